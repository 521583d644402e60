/*
 * JSON-RPC 2.0 for MCP: strict classification (one reading per message,
 * whoever sent it), builders, and the repair of firmware error objects.
 */
#include "codec/jsonrpc.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* Doubles at or beyond 2^53 are all integers; below it a cast tells. */
#define EXACT_LIMIT 9007199254740992.0

/* The members classification looks at, in one walk of the object. */
struct members {
    const cJSON *jsonrpc, *id, *method, *params, *result, *error;
};

/* Whether v is finite and has no fractional part. */
static bool is_integral(double v)
{
    if (!(v - v == 0.0)) {
        return false; /* NaN or infinite */
    }
    if (v >= EXACT_LIMIT || v <= -EXACT_LIMIT) {
        return true;
    }
    return v == (double)(long long)v;
}

static bool is_integral_number(const cJSON *item)
{
    return cJSON_IsNumber(item) && is_integral(item->valuedouble);
}

/* Stores item in *slot, refusing a second one: cJSON keeps repeated keys
 * and other peers' parsers would pick the last where cJSON picks the first. */
static int take_once(const cJSON **slot, const cJSON *item)
{
    if (*slot != NULL) {
        return GW_EPROTO;
    }
    *slot = item;
    return 0;
}

static int collect(const cJSON *msg, struct members *m)
{
    static const char *const names[] = {"jsonrpc", "id",     "method",
                                        "params",  "result", "error"};
    const cJSON **slots[] = {&m->jsonrpc, &m->id,     &m->method,
                             &m->params,  &m->result, &m->error};
    const cJSON *child;

    memset(m, 0, sizeof(*m));
    cJSON_ArrayForEach(child, msg)
    {
        if (child->string == NULL) {
            return GW_EPROTO;
        }
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            if (strcmp(child->string, names[i]) == 0) {
                if (take_once(slots[i], child) != 0) {
                    return GW_EPROTO;
                }
                break;
            }
        }
    }
    return 0;
}

/* A request or notification; the caller has seen a method member. */
static int classify_call(const struct members *m, struct gw_rpc *out)
{
    if (!cJSON_IsString(m->method) || m->method->valuestring == NULL ||
        m->method->valuestring[0] == '\0') {
        return GW_EPROTO;
    }
    if (m->result != NULL || m->error != NULL) {
        return GW_EPROTO;
    }
    if (m->params != NULL && !cJSON_IsObject(m->params) &&
        !cJSON_IsArray(m->params)) {
        return GW_EPROTO;
    }
    if (m->id != NULL && !cJSON_IsString(m->id) && !is_integral_number(m->id)) {
        return GW_EPROTO; /* null too: a request needs an id it can get back */
    }
    out->kind = m->id != NULL ? GW_RPC_REQUEST : GW_RPC_NOTIFICATION;
    out->id = m->id;
    out->method = m->method->valuestring;
    out->params = m->params;
    out->result = NULL;
    out->error = NULL;
    return 0;
}

/* A response: an id (null allowed, for errors on unreadable requests) and
 * exactly one of result / error. params has no meaning here. */
static int classify_response(const struct members *m, struct gw_rpc *out)
{
    if (m->id == NULL || m->params != NULL) {
        return GW_EPROTO;
    }
    if (!cJSON_IsString(m->id) && !cJSON_IsNull(m->id) &&
        !is_integral_number(m->id)) {
        return GW_EPROTO;
    }
    if ((m->result != NULL) == (m->error != NULL)) {
        return GW_EPROTO;
    }
    if (m->error != NULL && !cJSON_IsObject(m->error)) {
        return GW_EPROTO;
    }
    out->kind = GW_RPC_RESPONSE;
    out->id = m->id;
    out->method = NULL;
    out->params = NULL;
    out->result = m->result;
    out->error = m->error;
    return 0;
}

int gw_rpc_classify(const cJSON *msg, struct gw_rpc *out)
{
    struct members m;
    struct gw_rpc rpc;
    int err;

    if (msg == NULL || out == NULL) {
        return GW_EINVAL;
    }
    if (!cJSON_IsObject(msg)) {
        return GW_EPROTO;
    }
    err = collect(msg, &m);
    if (err != 0) {
        return err;
    }
    if (!cJSON_IsString(m.jsonrpc) || m.jsonrpc->valuestring == NULL ||
        strcmp(m.jsonrpc->valuestring, "2.0") != 0) {
        return GW_EPROTO;
    }
    err = m.method != NULL ? classify_call(&m, &rpc)
                           : classify_response(&m, &rpc);
    if (err != 0) {
        return err;
    }
    *out = rpc;
    return 0;
}

bool gw_rpc_id_u32(const cJSON *id, uint32_t *out)
{
    double v;

    if (!is_integral_number(id) || out == NULL) {
        return false;
    }
    v = id->valuedouble;
    if (v < 0.0 || v > (double)GW_RPC_ID_MAX) {
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

bool gw_rpc_token_u32(const cJSON *token, uint32_t *out)
{
    const char *s;
    size_t n;
    uint64_t v = 0;

    if (cJSON_IsNumber(token)) {
        return gw_rpc_id_u32(token, out);
    }
    if (!cJSON_IsString(token) || out == NULL) {
        return false;
    }
    s = token->valuestring;
    n = strlen(s);
    if (n == 0 || n > 10 || strspn(s, "0123456789") != n ||
        (s[0] == '0' && n > 1)) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > GW_RPC_ID_MAX) {
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

/* A message with only "jsonrpc":"2.0" in it. */
static cJSON *envelope(void)
{
    cJSON *msg = cJSON_CreateObject();

    if (msg != NULL && cJSON_AddStringToObject(msg, "jsonrpc", "2.0") == NULL) {
        cJSON_Delete(msg);
        return NULL;
    }
    return msg;
}

/* Moves item under key. Either may be NULL from a failed allocation: then,
 * as on any failure, both are freed and NULL is returned. */
static cJSON *add_moved(cJSON *msg, const char *key, cJSON *item)
{
    if (msg == NULL || item == NULL || !cJSON_AddItemToObject(msg, key, item)) {
        cJSON_Delete(item);
        cJSON_Delete(msg);
        return NULL;
    }
    return msg;
}

/*
 * A copy of id for a reply; a missing id answers as null. Ids come back
 * as the peer wrote them: cJSON prints a number outside the int range
 * with 15 significant digits (9007199254740991 would come back as
 * 9.00719925474099e+15), so such an id is written out digit for digit.
 * Integral ids up to 2^53 are exact this way; beyond that a double no
 * longer holds the digits the peer sent, and its shortest exact form is
 * used.
 */
static cJSON *id_copy(const cJSON *id)
{
    char text[40];
    double v;

    if (id == NULL) {
        return cJSON_CreateNull();
    }
    if (!cJSON_IsNumber(id) || id->valuedouble == (double)id->valueint) {
        return cJSON_Duplicate(id, true);
    }
    v = id->valuedouble;
    if (is_integral(v) && v < EXACT_LIMIT && v > -EXACT_LIMIT) {
        snprintf(text, sizeof(text), "%.0f", v);
    } else {
        snprintf(text, sizeof(text), "%.17g", v);
    }
    return cJSON_CreateRaw(text);
}

/* jsonrpc [, id], method [, params]; with_id says whether id is added. */
static cJSON *build_call(bool with_id, uint32_t id, const char *method,
                         cJSON *params)
{
    cJSON *msg;

    if (method == NULL) {
        cJSON_Delete(params);
        return NULL;
    }
    msg = envelope();
    if (msg != NULL && with_id &&
        cJSON_AddNumberToObject(msg, "id", (double)id) == NULL) {
        cJSON_Delete(msg);
        msg = NULL;
    }
    if (msg != NULL && cJSON_AddStringToObject(msg, "method", method) == NULL) {
        cJSON_Delete(msg);
        msg = NULL;
    }
    if (params == NULL) {
        return msg;
    }
    return add_moved(msg, "params", params);
}

cJSON *gw_rpc_request(uint32_t id, const char *method, cJSON *params)
{
    return build_call(true, id, method, params);
}

cJSON *gw_rpc_notification(const char *method, cJSON *params)
{
    return build_call(false, 0, method, params);
}

/* jsonrpc, id, then key: body. A NULL body is the caller's failed
 * allocation, so the answer is NULL as for any other OOM. */
static cJSON *build_reply(const cJSON *id, const char *key, cJSON *body)
{
    cJSON *msg;

    if (body == NULL) {
        return NULL;
    }
    msg = add_moved(envelope(), "id", id_copy(id));
    return add_moved(msg, key, body);
}

cJSON *gw_rpc_result(const cJSON *id, cJSON *result)
{
    return build_reply(id, "result", result);
}

/* {"code":code,"message":message}. */
static cJSON *error_object(int code, const char *message)
{
    cJSON *error = cJSON_CreateObject();

    if (error == NULL) {
        return NULL;
    }
    if (cJSON_AddNumberToObject(error, "code", code) == NULL ||
        cJSON_AddStringToObject(error, "message",
                                message != NULL ? message : "error") == NULL) {
        cJSON_Delete(error);
        return NULL;
    }
    return error;
}

cJSON *gw_rpc_error(const cJSON *id, int code, const char *message)
{
    return build_reply(id, "error", error_object(code, message));
}

cJSON *gw_rpc_error_with(const cJSON *id, cJSON *error)
{
    return build_reply(id, "error", error);
}

/* The first member named key when obj is an object, else NULL. */
static const cJSON *member(const cJSON *obj, const char *key)
{
    return cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key)
                               : NULL;
}

cJSON *gw_rpc_error_normalise(const cJSON *error)
{
    const cJSON *code = member(error, "code");
    const cJSON *message = member(error, "message");
    const cJSON *data = member(error, "data");
    int value = GW_RPC_INTERNAL_ERROR;
    cJSON *out;

    if (is_integral_number(code) && code->valuedouble >= (double)INT_MIN &&
        code->valuedouble <= (double)INT_MAX) {
        value = (int)code->valuedouble;
    }
    out = error_object(value,
                       cJSON_IsString(message) && message->valuestring != NULL
                           ? message->valuestring
                           : "device error");
    if (out != NULL && data != NULL) {
        out = add_moved(out, "data", cJSON_Duplicate(data, true));
    }
    return out;
}
