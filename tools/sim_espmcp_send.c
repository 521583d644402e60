/*
 * What the esp-mcp-like MCP server sends: replies, errors with codes,
 * notifications, its own requests with their ids, log messages, and the
 * output queue the device drains; the violation record.
 */
#include "tools/sim_espmcp_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const gw_sim_esp_levels[GW_SIM_ESP_LEVELS] = {
    "debug", "info",     "notice", "warning",
    "error", "critical", "alert",  "emergency"};

/* ---- small helpers -------------------------------------------------- */

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void
gw_sim_esp_violation(struct gw_sim_esp *e, const char *fmt, ...)
{
    char text[200];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    e->st.violations++;
    if (e->st.violation[0] == '\0') {
        memcpy(e->st.violation, text, sizeof(text));
    }
    if (e->vq_len < VIOLATIONS_Q) {
        memcpy(e->vq[(e->vq_head + e->vq_len) % VIOLATIONS_Q], text,
               sizeof(text));
        e->vq_len++;
    }
}

/* An integral JSON number (the engine reads ids as numbers). */
bool gw_sim_esp_integral(const cJSON *v)
{
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) &&
           v->valuedouble == floor(v->valuedouble) &&
           fabs(v->valuedouble) < 9007199254740992.0;
}

void gw_sim_esp_id_text(const cJSON *id, char *out, size_t cap)
{
    if (gw_sim_esp_integral(id)) {
        snprintf(out, cap, "%.0f", id->valuedouble);
    } else if (cJSON_IsString(id)) {
        snprintf(out, cap, "\"%.40s\"", id->valuestring);
    } else {
        snprintf(out, cap, "%s", id == NULL ? "(none)" : "(not a number)");
    }
}

/* Moves msg to the output queue. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
void
gw_sim_esp_queue(struct gw_sim_esp *e, const char *endpoint, cJSON *msg, const char *fmt,
      ...)
{
    struct outmsg *m = calloc(1, sizeof(*m));
    va_list ap;

    if (msg == NULL || m == NULL) {
        cJSON_Delete(msg);
        free(m);
        e->oom = true;
        return;
    }
    m->json = cJSON_PrintUnformatted(msg);
    cJSON_Delete(msg);
    m->endpoint = endpoint != NULL ? strdup(endpoint) : NULL;
    if (m->json == NULL || (endpoint != NULL && m->endpoint == NULL)) {
        free(m->json);
        free(m->endpoint);
        free(m);
        e->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(m->what, sizeof(m->what), fmt, ap);
    va_end(ap);
    if (e->q_tail != NULL) {
        e->q_tail->next = m;
    } else {
        e->q_head = m;
    }
    e->q_tail = m;
    e->st.sent++;
}

cJSON *gw_sim_esp_rpc_base(void)
{
    cJSON *m = cJSON_CreateObject();

    if (m != NULL && cJSON_AddStringToObject(m, "jsonrpc", "2.0") == NULL) {
        cJSON_Delete(m);
        return NULL;
    }
    return m;
}

/* {"jsonrpc","id","result"}: result moved in. */
void gw_sim_esp_reply(struct gw_sim_esp *e, const cJSON *id, cJSON *result,
                      const char *method)
{
    cJSON *m = gw_sim_esp_rpc_base();
    cJSON *idc = cJSON_Duplicate(id, true);
    char idt[48];

    if (m == NULL || idc == NULL || result == NULL) {
        cJSON_Delete(m);
        cJSON_Delete(idc);
        cJSON_Delete(result);
        e->oom = true;
        return;
    }
    cJSON_AddItemToObject(m, "id", idc);
    cJSON_AddItemToObject(m, "result", result);
    gw_sim_esp_id_text(id, idt, sizeof(idt));
    e->stock->answered++;
    gw_sim_esp_queue(e, NULL, m, "result id=%s (%s)", idt, method);
}

void gw_sim_esp_reply_error_data(struct gw_sim_esp *e, const cJSON *id,
                                 int code, const char *method,
                                 const char *message, cJSON *data)
{
    char idt[48], why[66] = "";
    const char *reason =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(data, "reason"));
    cJSON *m = gw_sim_esp_rpc_base(), *err = cJSON_CreateObject();
    cJSON *idc = cJSON_Duplicate(id, true);

    if (m == NULL || err == NULL || idc == NULL ||
        cJSON_AddNumberToObject(err, "code", code) == NULL ||
        cJSON_AddStringToObject(err, "message", message) == NULL) {
        cJSON_Delete(m);
        cJSON_Delete(err);
        cJSON_Delete(idc);
        cJSON_Delete(data);
        e->oom = true;
        return;
    }
    /* A copy: the queue frees the message before it writes the line. */
    if (reason != NULL) {
        snprintf(why, sizeof(why), " %s", reason);
    }
    if (data != NULL) {
        cJSON_AddItemToObject(err, "data", data);
    }
    cJSON_AddItemToObject(m, "id", idc);
    cJSON_AddItemToObject(m, "error", err);
    gw_sim_esp_id_text(id, idt, sizeof(idt));
    e->stock->answered++;
    gw_sim_esp_queue(e, NULL, m, "error id=%s %d (%s): %s%s", idt, code, method,
                     message, why);
}

#if defined(__GNUC__)
__attribute__((format(printf, 5, 6)))
#endif
void
gw_sim_esp_reply_error(struct gw_sim_esp *e, const cJSON *id, int code, const char *method,
            const char *fmt, ...)
{
    char text[300];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    gw_sim_esp_reply_error_data(e, id, code, method, text, NULL);
}

/* A notification; params moved in (may be NULL). */
void gw_sim_esp_notify(struct gw_sim_esp *e, const char *endpoint,
                       const char *method, cJSON *params, const char *detail)
{
    cJSON *m = gw_sim_esp_rpc_base();

    if (m == NULL || cJSON_AddStringToObject(m, "method", method) == NULL) {
        cJSON_Delete(m);
        cJSON_Delete(params);
        e->oom = true;
        return;
    }
    if (params != NULL) {
        cJSON_AddItemToObject(m, "params", params);
    }
    gw_sim_esp_queue(e, endpoint, m, "%s%s%s%s%s", method, detail ? " " : "",
                     detail ? detail : "", endpoint ? " to " : "",
                     endpoint ? endpoint : "");
}

/* A device request; params moved in. Returns the record or NULL. */
struct out *gw_sim_esp_request(struct gw_sim_esp *e, const char *endpoint,
                               const char *method, cJSON *params)
{
    struct out *o = calloc(1, sizeof(*o));
    cJSON *m = gw_sim_esp_rpc_base();

    if (o == NULL || m == NULL ||
        (endpoint != NULL && (o->endpoint = strdup(endpoint)) == NULL)) {
        free(o != NULL ? o->endpoint : NULL);
        free(o);
        cJSON_Delete(m);
        cJSON_Delete(params);
        e->oom = true;
        return NULL;
    }
    o->id = ++e->next_out_id;
    o->remote_index = -1;
    snprintf(o->method, sizeof(o->method), "%s", method);
    cJSON_AddNumberToObject(m, "id", o->id);
    cJSON_AddStringToObject(m, "method", method);
    if (params != NULL) {
        cJSON_AddItemToObject(m, "params", params);
    }
    o->next = e->outs;
    e->outs = o;
    e->n_outs++;
    if (endpoint != NULL) {
        gw_sim_esp_queue(e, endpoint, m, "remote %s id=%" PRIu32 " to %s",
                         method, o->id, endpoint);
    } else {
        gw_sim_esp_queue(e, NULL, m, "%s id=%" PRIu32, method, o->id);
    }
    /* Forget the oldest settled requests: duplicates come soon or never. */
    if (e->n_outs > MAX_OUT_KEPT) {
        struct out **pp = &e->outs;
        struct out *last_settled = NULL, **last_pp = NULL;
        for (; *pp != NULL; pp = &(*pp)->next) {
            if ((*pp)->state != O_PENDING) {
                last_settled = *pp;
                last_pp = pp;
            }
        }
        if (last_settled != NULL) {
            *last_pp = last_settled->next;
            free(last_settled->endpoint);
            free(last_settled);
            e->n_outs--;
        }
    }
    return o;
}

/* notifications/message at level, if the client's level admits it. With
 * no level set the engine logs everything, the esp profile nothing. */
void gw_sim_esp_log(struct gw_sim_esp *e, int level, const char *data)
{
    cJSON *p;

    if (e->log_level < 0 ? !e->o.engine_lifecycle : level < e->log_level) {
        return;
    }
    p = cJSON_CreateObject();
    if (p == NULL ||
        cJSON_AddStringToObject(p, "level", gw_sim_esp_levels[level]) == NULL ||
        cJSON_AddStringToObject(p, "logger", "sim") == NULL ||
        cJSON_AddStringToObject(p, "data", data) == NULL) {
        cJSON_Delete(p);
        e->oom = true;
        return;
    }
    e->st.logs_sent++;
    gw_sim_esp_notify(e, NULL, "notifications/message", p,
                      gw_sim_esp_levels[level]);
}

/* A CallToolResult with one text content. */
cJSON *gw_sim_esp_text_result(const char *text, bool is_error)
{
    cJSON *r = cJSON_CreateObject();
    cJSON *content = cJSON_AddArrayToObject(r, "content");
    cJSON *item = cJSON_CreateObject();

    if (r == NULL || content == NULL || item == NULL) {
        cJSON_Delete(r);
        cJSON_Delete(item);
        return NULL;
    }
    cJSON_AddItemToArray(content, item);
    if (cJSON_AddStringToObject(item, "type", "text") == NULL ||
        cJSON_AddStringToObject(item, "text", text) == NULL ||
        cJSON_AddBoolToObject(r, "isError", is_error) == NULL) {
        cJSON_Delete(r);
        return NULL;
    }
    return r;
}

void gw_sim_esp_reply_text(struct gw_sim_esp *e, const cJSON *id,
                           const char *text, bool is_error)
{
    e->stock->calls++;
    gw_sim_esp_reply(e, id, gw_sim_esp_text_result(text, is_error),
                     "tools/call");
}

/* The text contents of a result joined by newlines (heap), or NULL. */
char *gw_sim_esp_content_text(const cJSON *result)
{
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(result, "content");
    const cJSON *item;
    size_t len = 0;
    char *out;

    if (cJSON_IsObject(content)) { /* sampling: one content object */
        const char *t = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(content, "text"));
        return t != NULL ? strdup(t) : NULL;
    }
    cJSON_ArrayForEach(item, content)
    {
        const char *t = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(item, "text"));
        if (t != NULL) {
            len += strlen(t) + 1;
        }
    }
    if ((out = calloc(1, len + 1)) == NULL) {
        return NULL;
    }
    cJSON_ArrayForEach(item, content)
    {
        const char *t = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(item, "text"));
        if (t != NULL) {
            if (out[0] != '\0') {
                strcat(out, "\n");
            }
            strcat(out, t);
        }
    }
    return out;
}

/* "error <code>: <message>" of a JSON-RPC error object (heap). */
char *gw_sim_esp_error_text(const cJSON *error, bool with_code)
{
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(error, "code");
    const char *msg = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(error, "message"));
    size_t cap = (msg ? strlen(msg) : 0) + 48;
    char *out = malloc(cap);

    if (out == NULL) {
        return NULL;
    }
    if (with_code) {
        snprintf(out, cap, "error %.0f: %s",
                 cJSON_IsNumber(code) ? code->valuedouble : 0.0,
                 msg ? msg : "");
    } else {
        snprintf(out, cap, "%s", msg ? msg : "");
    }
    return out;
}

bool gw_sim_esp_pop(struct gw_sim_esp *e, char **endpoint, char **json,
                    const char **what)
{
    struct outmsg *m = e->q_head;

    free(e->popped);
    e->popped = NULL;
    if (m == NULL) {
        return false;
    }
    e->q_head = m->next;
    if (e->q_head == NULL) {
        e->q_tail = NULL;
    }
    *endpoint = m->endpoint;
    *json = m->json;
    *what = m->what;
    e->popped = m; /* what stays valid until the next pop */
    return true;
}

bool gw_sim_esp_pop_violation(struct gw_sim_esp *e, char *out, size_t cap)
{
    if (e->vq_len == 0) {
        return false;
    }
    snprintf(out, cap, "%s", e->vq[e->vq_head]);
    e->vq_head = (e->vq_head + 1) % VIOLATIONS_Q;
    e->vq_len--;
    return true;
}
