/*
 * The esp-mcp-like MCP server of the simulated device (`--mcp-profile
 * esp`), pure: each message received is checked as strictly as the
 * engine checks it, then dispatched (initialize, lists, resources,
 * prompts, completion, logging; tools and tasks in sim_espmcp_tools.c);
 * answers to the device's own requests are matched; list changes and
 * resource updates run on timers the caller drives with its clock.
 */
#include "tools/sim_espmcp_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The protocol versions esp-mcp knows, oldest first. */
static const char *const versions[] = {"2024-11-05", "2025-03-26", "2025-06-18",
                                       "2025-11-25"};

/* ---- lists ----------------------------------------------------------- */

/*
 * One page of items under key: cursors are "<key>:<index>", pages end
 * near PAGE_BYTES or at params.limit (1..128) items.
 */
static void list_page(struct gw_sim_esp *e, const cJSON *id,
                      const cJSON *params, const char *method, const char *key,
                      cJSON *items)
{
    const char *cursor = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(params, "cursor"));
    const cJSON *limit = cJSON_GetObjectItemCaseSensitive(params, "limit");
    int n = cJSON_GetArraySize(items), start = 0, max = 128, i;
    size_t bytes = 0, klen = strlen(key);
    cJSON *r, *arr;

    if (items == NULL) {
        e->oom = true;
        return;
    }
    if (cursor != NULL) {
        char *end;
        long v = -1;
        if (strncmp(cursor, key, klen) == 0 && cursor[klen] == ':') {
            v = strtol(cursor + klen + 1, &end, 10);
            if (*end != '\0' || end == cursor + klen + 1) {
                v = -1;
            }
        }
        if (v < 1 || v >= n) {
            cJSON_Delete(items);
            gw_sim_esp_reply_error(e, id, -32602, method, "Invalid cursor");
            return;
        }
        start = (int)v;
    }
    if (gw_sim_esp_integral(limit) && limit->valuedouble >= 1 &&
        limit->valuedouble <= 128) {
        max = (int)limit->valuedouble;
    }
    r = cJSON_CreateObject();
    arr = cJSON_AddArrayToObject(r, key);
    if (arr == NULL) {
        cJSON_Delete(r);
        cJSON_Delete(items);
        e->oom = true;
        return;
    }
    for (i = start; i < n && i - start < max; i++) {
        cJSON *item = cJSON_GetArrayItem(items, i);
        char *t = cJSON_PrintUnformatted(item);
        size_t len = t != NULL ? strlen(t) : 0;
        free(t);
        if (i > start && bytes + len + 1 > PAGE_BYTES) {
            break;
        }
        bytes += len + 1;
        cJSON_AddItemToArray(arr, cJSON_Duplicate(item, true));
    }
    if (i < n) {
        char next[64];
        snprintf(next, sizeof(next), "%s:%d", key, i);
        cJSON_AddStringToObject(r, "nextCursor", next);
    }
    cJSON_Delete(items);
    gw_sim_esp_reply(e, id, r, method);
}

/* ---- the other requests ---------------------------------------------- */

static bool sub_add(struct gw_sim_esp *e, uint64_t now, const char *uri)
{
    for (size_t i = 0; i < e->n_subs; i++) {
        if (strcmp(e->subs[i], uri) == 0) {
            return true;
        }
    }
    if (e->n_subs == MAX_SUBS) {
        return false;
    }
    if ((e->subs[e->n_subs] = strdup(uri)) == NULL) {
        e->oom = true;
        return false;
    }
    if (e->n_subs++ == 0 && e->o.update_ms > 0) {
        e->update_due_ms = now + e->o.update_ms;
    }
    return true;
}

static void sub_remove(struct gw_sim_esp *e, const char *uri)
{
    for (size_t i = 0; i < e->n_subs; i++) {
        if (strcmp(e->subs[i], uri) == 0) {
            free(e->subs[i]);
            e->subs[i] = e->subs[--e->n_subs];
            break;
        }
    }
    if (e->n_subs == 0) {
        e->update_due_ms = NEVER;
    }
}

static void resources(struct gw_sim_esp *e, uint64_t now, const char *meth,
                      const cJSON *id, const cJSON *params)
{
    const char *uri =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(params, "uri"));
    cJSON *contents = NULL, *r;
    int rc;

    if (strcmp(meth, "resources/list") == 0) {
        list_page(e, id, params, meth, "resources",
                  gw_sim_esp_resources(&e->cat));
        return;
    }
    if (strcmp(meth, "resources/templates/list") == 0) {
        list_page(e, id, params, meth, "resourceTemplates",
                  gw_sim_esp_templates(&e->cat));
        return;
    }
    if (uri == NULL) {
        gw_sim_esp_reply_error(e, id, -32602, meth, "Missing uri");
        return;
    }
    if (strcmp(meth, "resources/unsubscribe") == 0) {
        sub_remove(e, uri);
        gw_sim_esp_reply(e, id, cJSON_CreateObject(), meth);
        return;
    }
    rc = gw_sim_esp_read(&e->cat, uri, &contents);
    if (rc == GW_ENOENT) {
        cJSON *err = cJSON_CreateObject(), *data, *m = gw_sim_esp_rpc_base();
        data = cJSON_AddObjectToObject(err, "data");
        if (m == NULL || data == NULL ||
            cJSON_AddStringToObject(data, "uri", uri) == NULL) {
            cJSON_Delete(m);
            cJSON_Delete(err);
            e->oom = true;
            return;
        }
        cJSON_AddItemToObject(m, "id", cJSON_Duplicate(id, true));
        cJSON_AddNumberToObject(err, "code", -32002);
        cJSON_AddStringToObject(err, "message", "Resource not found");
        cJSON_AddItemToObject(m, "error", err);
        e->stock->answered++;
        gw_sim_esp_queue(e, NULL, m, "error %s (%s): resource not found", uri,
                         meth);
        return;
    }
    if (rc != 0) {
        e->oom = true;
        return;
    }
    if (strcmp(meth, "resources/read") == 0) {
        r = cJSON_CreateObject();
        if (r == NULL) {
            cJSON_Delete(contents);
            e->oom = true;
            return;
        }
        cJSON_AddItemToObject(r, "contents", contents);
        gw_sim_esp_reply(e, id, r, meth);
        return;
    }
    cJSON_Delete(contents);
    /* resources/subscribe */
    if (!sub_add(e, now, uri)) {
        gw_sim_esp_reply_error(e, id, -32603, meth,
                               "too many subscriptions (%d)", MAX_SUBS);
        return;
    }
    e->st.subscribed++;
    gw_sim_esp_reply(e, id, cJSON_CreateObject(), meth);
}

/* After the reply to the first initialize: what waits for the link. */
static void first_initialize(struct gw_sim_esp *e, uint64_t now)
{
    e->initialized_once = true;
    if (e->o.change_after_ms > 0) {
        e->change_due_ms = now + e->o.change_after_ms;
    }
    for (size_t i = 0; i < e->n_remote; i++) {
        if (!e->o.remote_init) {
            gw_sim_esp_remote_call(e, NULL, (int)i, e->remote[i].endpoint,
                                   e->remote[i].tool, e->remote[i].arguments);
            continue;
        }
        bool first = true;
        for (size_t j = 0; j < i; j++) {
            first = first &&
                    strcmp(e->remote[j].endpoint, e->remote[i].endpoint) != 0;
        }
        if (first) {
            /* As esp-mcp's manager: initialize the server first. */
            gw_sim_esp_request(
                e, e->remote[i].endpoint, "initialize",
                cJSON_Parse("{\"protocolVersion\":\"2025-11-25\","
                            "\"capabilities\":{},\"clientInfo\":"
                            "{\"name\":\"sim-esp\",\"version\":"
                            "\"2.0.1\"}}"));
        }
    }
}

/* --mcp-remote-init: an endpoint answered its initialize; its calls go. */
static void remote_initialized(struct gw_sim_esp *e, const char *endpoint,
                               const cJSON *result)
{
    if (result != NULL) {
        e->st.remote_inits_ok++;
        gw_sim_esp_notify(e, endpoint, "notifications/initialized", NULL, NULL);
    } else {
        e->st.remote_inits_err++; /* the calls still go: they tell why */
    }
    for (size_t i = 0; i < e->n_remote; i++) {
        if (strcmp(e->remote[i].endpoint, endpoint) == 0) {
            gw_sim_esp_remote_call(e, NULL, (int)i, endpoint, e->remote[i].tool,
                                   e->remote[i].arguments);
        }
    }
}

/* A client capability as esp-mcp reads it: an object or true. */
static bool declared(const cJSON *caps, const char *name)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(caps, name);

    return cJSON_IsObject(c) || cJSON_IsTrue(c);
}

static void initialize(struct gw_sim_esp *e, uint64_t now, const cJSON *id,
                       const cJSON *params)
{
    const char *asked = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(params, "protocolVersion"));
    const cJSON *caps =
        cJSON_GetObjectItemCaseSensitive(params, "capabilities");
    const cJSON *vision = cJSON_GetObjectItemCaseSensitive(caps, "vision");
    const char *version = versions[3];
    cJSON *r, *caps_out;

    if (!gw_sim_esp_life_initialize(e, id, params)) {
        return;
    }
    if (asked == NULL) {
        gw_sim_esp_reply_error(e, id, -32602, "initialize",
                               "Missing protocolVersion");
        return;
    }
    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
        if (strcmp(asked, versions[i]) == 0) {
            version = versions[i];
        }
    }
    e->client_caps =
        (declared(caps, "sampling") ? GW_SIM_ESP_CAP_SAMPLING : 0) |
        (declared(caps, "elicitation") ? GW_SIM_ESP_CAP_ELICITATION : 0) |
        (declared(caps, "roots") ? GW_SIM_ESP_CAP_ROOTS : 0);
    if (cJSON_IsObject(vision)) {
        const char *url = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(vision, "url"));
        const char *token = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(vision, "token"));
        e->stock->vision_seen = true;
        if (url != NULL && strlen(url) < sizeof(e->stock->vision_url)) {
            memcpy(e->stock->vision_url, url, strlen(url) + 1);
        }
        if (token != NULL && strlen(token) < sizeof(e->stock->vision_token)) {
            memcpy(e->stock->vision_token, token, strlen(token) + 1);
        }
    }
    r = cJSON_CreateObject();
    caps_out = cJSON_Parse(
        "{\"capabilities\":{\"tools\":{\"listChanged\":true},\"resources\":"
        "{\"subscribe\":true,\"listChanged\":true},\"prompts\":"
        "{\"listChanged\":true},\"completions\":{},\"logging\":{},\"tasks\":"
        "{\"list\":{},\"cancel\":{},\"requests\":{\"tools\":{\"call\":{}}}}},"
        "\"serverInfo\":{\"name\":\"sim-esp\",\"version\":\"2.0.1\"}}");
    if (r == NULL || caps_out == NULL ||
        cJSON_AddStringToObject(r, "protocolVersion", version) == NULL) {
        cJSON_Delete(r);
        cJSON_Delete(caps_out);
        e->oom = true;
        return;
    }
    /* protocolVersion first, then what the literal holds, in order */
    while (caps_out->child != NULL) {
        cJSON *item = caps_out->child;
        cJSON_AddItemToObject(r, item->string,
                              cJSON_DetachItemViaPointer(caps_out, item));
    }
    cJSON_Delete(caps_out);
    snprintf(e->st.protocol_version, sizeof(e->st.protocol_version), "%s",
             version);
    e->stock->initializes++;
    /* esp-mcp's lifecycle gate: newer than the baseline waits for
     * notifications/initialized. */
    e->gated = strcmp(version, versions[0]) > 0;
    e->session_init = true;
    gw_sim_esp_reply(e, id, r, "initialize");
    if (!e->initialized_once) {
        first_initialize(e, now);
    }
}

static void on_request(struct gw_sim_esp *e, uint64_t now, const cJSON *msg,
                       const char *meth, const cJSON *id, const cJSON *params)
{
    cJSON *items;
    const char *s;

    if (strcmp(meth, "initialize") == 0) {
        initialize(e, now, id, params);
    } else if (strcmp(meth, "ping") == 0) {
        gw_sim_esp_reply(e, id, cJSON_CreateObject(), meth);
    } else if (strcmp(meth, "tools/list") == 0) {
        e->cat.with_user = cJSON_IsTrue(
            cJSON_GetObjectItemCaseSensitive(params, "withUserTools"));
        e->stock->lists++;
        list_page(e, id, params, meth, "tools", gw_sim_esp_tools(&e->cat));
    } else if (strcmp(meth, "tools/call") == 0) {
        gw_sim_esp_tools_call(e, now, msg, id, params);
    } else if (strncmp(meth, "resources/", 10) == 0 &&
               (strcmp(meth + 10, "list") == 0 ||
                strcmp(meth + 10, "templates/list") == 0 ||
                strcmp(meth + 10, "read") == 0 ||
                strcmp(meth + 10, "subscribe") == 0 ||
                strcmp(meth + 10, "unsubscribe") == 0)) {
        resources(e, now, meth, id, params);
    } else if (strcmp(meth, "prompts/list") == 0) {
        list_page(e, id, params, meth, "prompts", gw_sim_esp_prompts(&e->cat));
    } else if (strcmp(meth, "prompts/get") == 0) {
        const char *why = NULL;
        int rc;
        s = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(params, "name"));
        rc = s == NULL ? GW_ENOENT
                       : gw_sim_esp_prompt_get(&e->cat, s,
                                               cJSON_GetObjectItemCaseSensitive(
                                                   params, "arguments"),
                                               &items, &why);
        if (rc == 0) {
            gw_sim_esp_reply(e, id, items, meth);
        } else if (rc == GW_ENOENT) {
            gw_sim_esp_reply_error(e, id, -32602, meth, "Prompt not found: %s",
                                   s ? s : "(no name)");
        } else if (rc == GW_EINVAL) {
            gw_sim_esp_reply_error(e, id, -32602, meth, "%s", why);
        } else {
            e->oom = true;
        }
    } else if (strcmp(meth, "completion/complete") == 0) {
        int rc = gw_sim_esp_complete(&e->cat, params, &items);
        if (rc == 0) {
            gw_sim_esp_reply(e, id, items, meth);
        } else if (rc == GW_EINVAL) {
            gw_sim_esp_reply_error(e, id, -32602, meth,
                                   "Invalid completion reference or argument");
        } else {
            e->oom = true;
        }
    } else if (strcmp(meth, "logging/setLevel") == 0) {
        s = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(params, "level"));
        for (size_t i = 0; s != NULL && i < GW_SIM_ESP_LEVELS; i++) {
            if (strcmp(s, gw_sim_esp_levels[i]) == 0) {
                e->log_level = (int)i;
                gw_sim_esp_reply(e, id, cJSON_CreateObject(), meth);
                return;
            }
        }
        gw_sim_esp_reply_error(e, id, -32602, meth, "Invalid log level");
    } else if (strcmp(meth, "tasks/get") == 0 ||
               strcmp(meth, "tasks/list") == 0 ||
               strcmp(meth, "tasks/result") == 0 ||
               strcmp(meth, "tasks/cancel") == 0) {
        gw_sim_esp_tasks(e, meth, id, params);
    } else {
        gw_sim_esp_reply_error(e, id, -32601, meth, "Method not found: %s",
                               meth);
    }
}

/* The device's own link: notifications from its client. */
static void on_notification(struct gw_sim_esp *e, const char *meth,
                            const cJSON *params)
{
    if (strcmp(meth, "notifications/initialized") == 0) {
        e->gated = false;
    } else if (strcmp(meth, "notifications/cancelled") == 0) {
        const cJSON *rid =
            cJSON_GetObjectItemCaseSensitive(params, "requestId");
        struct call *c = rid != NULL ? gw_sim_esp_call_by_id(e, rid) : NULL;
        e->stock->cancelled++;
        if (c != NULL) {
            /* Stop, never answer; withdraw what it waits on. */
            if (c->waits_for != NULL) {
                gw_sim_esp_withdraw(e, c->waits_for,
                                    "the tools/call was cancelled");
            }
            gw_sim_esp_call_free(e, c);
        }
    }
    /* others (roots/list_changed...) need nothing */
}

static void on_response(struct gw_sim_esp *e, const cJSON *id,
                        const cJSON *result, const cJSON *error,
                        const char *endpoint)
{
    struct out *o;
    char idt[48];

    gw_sim_esp_id_text(id, idt, sizeof(idt));
    if ((result == NULL) == (error == NULL)) {
        gw_sim_esp_violation(e, "response id=%s with %s of result and error",
                             idt, result == NULL ? "neither" : "both");
        return;
    }
    if (error != NULL &&
        (!cJSON_IsObject(error) ||
         !gw_sim_esp_integral(
             cJSON_GetObjectItemCaseSensitive(error, "code")) ||
         !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(error, "message")))) {
        gw_sim_esp_violation(
            e,
            "response id=%s: error without an integer code and a "
            "string message",
            idt);
    }
    if ((o = gw_sim_esp_out_by_id(e, id)) == NULL) {
        gw_sim_esp_violation(
            e, "response id=%s%s%s: the device never used that id", idt,
            endpoint ? " from " : "", endpoint ? endpoint : "");
        return;
    }
    if (o->state == O_WITHDRAWN) {
        e->st.late++;
        return;
    }
    if (o->state == O_ANSWERED) {
        gw_sim_esp_violation(e, "second response to id=%s (%s)", idt,
                             o->method);
        return;
    }
    o->state = O_ANSWERED;
    if (o->endpoint != NULL && endpoint == NULL) {
        gw_sim_esp_violation(
            e, "response to id=%s (%s to %s) without its endpoint", idt,
            o->method, o->endpoint);
    } else if (o->endpoint != NULL && strcmp(o->endpoint, endpoint) != 0) {
        gw_sim_esp_violation(e, "response to id=%s (%s to %s) from endpoint %s",
                             idt, o->method, o->endpoint, endpoint);
    } else if (o->endpoint == NULL && endpoint != NULL) {
        gw_sim_esp_violation(
            e,
            "response to id=%s (%s on the device's own link) carries "
            "endpoint %s",
            idt, o->method, endpoint);
    }
    if (o->endpoint != NULL && strcmp(o->method, "initialize") == 0) {
        remote_initialized(e, o->endpoint, error == NULL ? result : NULL);
    } else if (o->endpoint != NULL) {
        bool ok =
            error == NULL &&
            !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(result, "isError"));
        if (ok) {
            e->st.remote_ok++;
        } else {
            e->st.remote_err++;
        }
        if (o->remote_index >= 0) {
            struct remote_result *rr = &e->remote_res[o->remote_index];
            rr->done = true;
            rr->ok = ok;
            rr->text = error != NULL ? gw_sim_esp_error_text(error, true)
                                     : gw_sim_esp_content_text(result);
            if (rr->text == NULL) {
                rr->text = strdup("");
            }
        }
    }
    if (o->call != NULL) {
        gw_sim_esp_finish_call(e, o->call, result, error);
    }
}

/*
 * A notification from an MCP server: progress must carry a token the
 * device gave (--mcp-remote-progress) to a call still running there.
 */
static void remote_notification(struct gw_sim_esp *e, const char *endpoint,
                                const char *meth, const cJSON *params)
{
    const cJSON *token =
        cJSON_GetObjectItemCaseSensitive(params, "progressToken");
    struct out *o;
    char tt[48];

    e->st.remote_notifications++;
    if (strcmp(meth, "notifications/progress") != 0) {
        return;
    }
    o = e->o.remote_progress ? gw_sim_esp_out_by_id(e, token) : NULL;
    if (o != NULL && o->state == O_WITHDRAWN) {
        return; /* a race with the withdrawal */
    }
    if (o == NULL || o->state != O_PENDING || o->endpoint == NULL ||
        strcmp(o->endpoint, endpoint) != 0 ||
        strcmp(o->method, "tools/call") != 0) {
        gw_sim_esp_id_text(token, tt, sizeof(tt));
        gw_sim_esp_violation(
            e,
            "progress from %s with token %s: no call of the device "
            "to it running with that token",
            endpoint, tt);
        return;
    }
    e->st.remote_progress++;
}

/* Top-level members a JSON-RPC message may have. */
static bool known_member(const char *name)
{
    static const char *const names[] = {"jsonrpc", "id",     "method",
                                        "params",  "result", "error"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(name, names[i]) == 0) {
            return true;
        }
    }
    return false;
}

int gw_sim_esp_receive(struct gw_sim_esp *e, uint64_t now_ms,
                       const cJSON *payload, const cJSON *endpoint)
{
    const char *ep = NULL;
    const cJSON *ver, *id, *method, *params, *item;
    char idt[48];

    e->st.received++;
    if (endpoint != NULL) {
        if (!cJSON_IsString(endpoint) || endpoint->valuestring[0] == '\0') {
            gw_sim_esp_violation(e, "endpoint is not a non-empty string");
            e->stock->ignored++;
            return 0;
        }
        ep = endpoint->valuestring;
    }
    if (!cJSON_IsObject(payload)) {
        gw_sim_esp_violation(e, "mcp payload is not a JSON object");
        e->stock->ignored++;
        return 0;
    }
    cJSON_ArrayForEach(item, payload)
    {
        if (!known_member(item->string)) {
            gw_sim_esp_violation(
                e, "JSON-RPC message with an unknown member \"%.40s\"",
                item->string);
            e->stock->ignored++;
            return 0;
        }
    }
    ver = cJSON_GetObjectItemCaseSensitive(payload, "jsonrpc");
    id = cJSON_GetObjectItemCaseSensitive(payload, "id");
    method = cJSON_GetObjectItemCaseSensitive(payload, "method");
    params = cJSON_GetObjectItemCaseSensitive(payload, "params");
    if (!cJSON_IsString(ver) || strcmp(ver->valuestring, "2.0") != 0) {
        gw_sim_esp_violation(e, "jsonrpc is not \"2.0\"");
        e->stock->ignored++;
        return 0;
    }
    if (method == NULL) {
        if (id == NULL) {
            gw_sim_esp_violation(e,
                                 "JSON-RPC message with neither method nor id");
        } else {
            on_response(e, id,
                        cJSON_GetObjectItemCaseSensitive(payload, "result"),
                        cJSON_GetObjectItemCaseSensitive(payload, "error"), ep);
        }
        return e->oom ? GW_ENOMEM : 0;
    }
    if (!cJSON_IsString(method) || method->valuestring[0] == '\0' ||
        cJSON_GetObjectItemCaseSensitive(payload, "result") != NULL ||
        cJSON_GetObjectItemCaseSensitive(payload, "error") != NULL) {
        gw_sim_esp_violation(e,
                             "malformed request: method not a string, or with "
                             "result or error");
        e->stock->ignored++;
        return 0;
    }
    if (e->stock->silent) {
        e->stock->ignored++;
        return 0;
    }
    if (ep != NULL) {
        /* A server's notification (progress, message...) or request. */
        if (id == NULL) {
            remote_notification(e, ep, method->valuestring, params);
        } else {
            gw_sim_esp_reply_error(e, id, -32601, method->valuestring,
                                   "the device serves no requests from %s", ep);
            if (e->q_tail != NULL) {
                /* send it back to that server */
                e->q_tail->endpoint = strdup(ep);
                e->oom = e->oom || e->q_tail->endpoint == NULL;
            }
        }
        return e->oom ? GW_ENOMEM : 0;
    }
    if (params != NULL && !cJSON_IsObject(params)) {
        gw_sim_esp_violation(e, "%s with params that are not an object",
                             method->valuestring);
        if (gw_sim_esp_integral(id)) {
            gw_sim_esp_reply_error(e, id, -32600, method->valuestring,
                                   "params must be an object");
        }
        return e->oom ? GW_ENOMEM : 0;
    }
    if (id == NULL) {
        if (gw_sim_esp_life_notification(e, method->valuestring)) {
            on_notification(e, method->valuestring, params);
        }
        return e->oom ? GW_ENOMEM : 0;
    }
    gw_sim_esp_id_text(id, idt, sizeof(idt));
    if (!gw_sim_esp_integral(id)) {
        /* The engine, as the firmware, takes numeric ids only. */
        gw_sim_esp_violation(e, "%s with id %s: only numeric ids are accepted",
                             method->valuestring, idt);
        e->stock->ignored++;
        return 0;
    }
    if (!gw_sim_esp_life_admit(e, method->valuestring, id)) {
        return e->oom ? GW_ENOMEM : 0;
    }
    if (gw_sim_esp_call_by_id(e, id) != NULL) {
        gw_sim_esp_violation(e, "%s reuses id %s of a tools/call still running",
                             method->valuestring, idt);
        gw_sim_esp_reply_error(e, id, -32600, method->valuestring,
                               "Duplicate request id");
        return e->oom ? GW_ENOMEM : 0;
    }
    on_request(e, now_ms, payload, method->valuestring, id, params);
    return e->oom ? GW_ENOMEM : 0;
}

int gw_sim_esp_tick(struct gw_sim_esp *e, uint64_t now_ms)
{
    bool again = true;
    char text[64];

    while (again && !e->oom) {
        again = false;
        for (struct call *c = e->calls; c != NULL; c = c->next) {
            if (c->due_ms > now_ms) {
                continue;
            }
            if (c->kind == C_COUNT) {
                gw_sim_esp_count_step(e, c);
            } else if (c->kind == C_JOB) {
                snprintf(text, sizeof(text), "job done after %" PRIu32 " ms",
                         c->ms);
                gw_sim_esp_reply_text(e, c->id, text, false);
                gw_sim_esp_call_free(e, c);
            } else if (c->kind == C_ASK_CANCEL) {
                if (c->waits_for != NULL) {
                    gw_sim_esp_withdraw(e, c->waits_for, "changed my mind");
                }
                gw_sim_esp_reply_text(e, c->id, "withdrawn", false);
                gw_sim_esp_call_free(e, c);
            }
            again = true; /* the list may have changed: start over */
            break;
        }
    }
    for (struct task *t = e->tasks; t != NULL; t = t->next) {
        if (t->due_ms <= now_ms && t->status == TS_WORKING) {
            gw_sim_esp_task_settle(e, t, TS_COMPLETED);
        }
    }
    if (e->change_due_ms <= now_ms) {
        e->change_due_ms = NEVER;
        e->cat.changed = true;
        gw_sim_esp_notify(e, NULL, "notifications/tools/list_changed", NULL,
                          NULL);
        gw_sim_esp_notify(e, NULL, "notifications/resources/list_changed", NULL,
                          NULL);
        gw_sim_esp_notify(e, NULL, "notifications/prompts/list_changed", NULL,
                          NULL);
        e->st.list_changed_sent += 3;
    }
    if (e->update_due_ms <= now_ms) {
        for (size_t i = 0; i < e->n_subs; i++) {
            cJSON *p = cJSON_CreateObject();
            if (p == NULL ||
                cJSON_AddStringToObject(p, "uri", e->subs[i]) == NULL) {
                cJSON_Delete(p);
                e->oom = true;
                break;
            }
            e->st.updates_sent++;
            gw_sim_esp_notify(e, NULL, "notifications/resources/updated", p,
                              e->subs[i]);
        }
        /* Catch up without a burst after a stall. */
        e->update_due_ms += e->o.update_ms;
        if (e->update_due_ms <= now_ms) {
            e->update_due_ms = now_ms + e->o.update_ms;
        }
    }
    return e->oom ? GW_ENOMEM : 0;
}

int64_t gw_sim_esp_next_ms(const struct gw_sim_esp *e, uint64_t now_ms)
{
    uint64_t due = e->change_due_ms;

    if (e->update_due_ms < due) {
        due = e->update_due_ms;
    }
    for (const struct call *c = e->calls; c != NULL; c = c->next) {
        if (c->due_ms < due) {
            due = c->due_ms;
        }
    }
    for (const struct task *t = e->tasks; t != NULL; t = t->next) {
        if (t->status == TS_WORKING && t->due_ms < due) {
            due = t->due_ms;
        }
    }
    if (due == NEVER) {
        return -1;
    }
    return due <= now_ms ? 0 : (int64_t)(due - now_ms);
}

/* ---- life cycle and output ------------------------------------------- */

int gw_sim_esp_remote_parse(const char *spec, struct gw_sim_esp_remote *out)
{
    const char *c1 = strchr(spec, ':');
    const char *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
    size_t elen = c1 != NULL ? (size_t)(c1 - spec) : 0;
    size_t tlen = c1 == NULL   ? 0
                  : c2 != NULL ? (size_t)(c2 - c1 - 1)
                               : strlen(c1 + 1);

    memset(out, 0, sizeof(*out));
    if (elen == 0 || elen >= sizeof(out->endpoint) || tlen == 0 ||
        tlen >= sizeof(out->tool)) {
        return GW_EINVAL;
    }
    for (size_t i = 0; i < elen; i++) {
        char ch = spec[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
              (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' ||
              ch == '-')) {
            return GW_EINVAL;
        }
    }
    memcpy(out->endpoint, spec, elen);
    memcpy(out->tool, c1 + 1, tlen);
    out->arguments = c2 != NULL ? cJSON_Parse(c2 + 1) : cJSON_CreateObject();
    if (out->arguments == NULL || !cJSON_IsObject(out->arguments)) {
        cJSON_Delete(out->arguments);
        out->arguments = NULL;
        return c2 != NULL ? GW_EINVAL : GW_ENOMEM;
    }
    return 0;
}

void gw_sim_esp_remote_free(struct gw_sim_esp_remote *r)
{
    cJSON_Delete(r->arguments);
    r->arguments = NULL;
}

int gw_sim_esp_create(const struct gw_sim_esp_options *o,
                      struct gw_sim_mcp *stock, struct gw_sim_esp **out)
{
    struct gw_sim_esp *e;
    int rc;

    *out = NULL;
    if (o->n_remote > GW_SIM_ESP_REMOTE_MAX ||
        o->big_resource_bytes > GW_SIM_ESP_BIG_MAX) {
        return GW_EINVAL;
    }
    if ((e = calloc(1, sizeof(*e))) == NULL) {
        return GW_ENOMEM;
    }
    e->o = *o;
    e->o.remote = NULL;
    e->stock = stock;
    e->cat.stock = stock;
    e->cat.big_bytes = o->big_resource_bytes;
    e->cat.volume = stock->volume;
    e->log_level = -1;
    e->change_due_ms = NEVER;
    e->update_due_ms = NEVER;
    for (size_t i = 0; i < o->n_remote; i++) {
        if ((rc = gw_sim_esp_remote_parse(o->remote[i], &e->remote[i])) != 0) {
            gw_sim_esp_destroy(e);
            return rc;
        }
        e->n_remote++;
    }
    *out = e;
    return 0;
}

void gw_sim_esp_destroy(struct gw_sim_esp *e)
{
    if (e == NULL) {
        return;
    }
    while (e->calls != NULL) {
        gw_sim_esp_call_free(e, e->calls);
    }
    while (e->outs != NULL) {
        struct out *o = e->outs;
        e->outs = o->next;
        free(o->endpoint);
        free(o);
    }
    while (e->tasks != NULL) {
        struct task *t = e->tasks;
        e->tasks = t->next;
        cJSON_Delete(t->waiters);
        free(t);
    }
    while (e->q_head != NULL) {
        struct outmsg *m = e->q_head;
        e->q_head = m->next;
        free(m->endpoint);
        free(m->json);
        free(m);
    }
    free(e->popped);
    for (size_t i = 0; i < e->n_subs; i++) {
        free(e->subs[i]);
    }
    for (size_t i = 0; i < e->n_remote; i++) {
        gw_sim_esp_remote_free(&e->remote[i]);
        free(e->remote_res[i].text);
    }
    free(e);
}

void gw_sim_esp_finish(struct gw_sim_esp *e)
{
    for (struct out *o = e->outs; o != NULL; o = o->next) {
        if (o->state == O_PENDING) {
            o->state = O_ANSWERED; /* counted once */
            e->st.unanswered++;
            gw_sim_esp_violation(
                e, "request id=%" PRIu32 " (%s%s%s) was never answered", o->id,
                o->method, o->endpoint ? " to " : "",
                o->endpoint ? o->endpoint : "");
        }
    }
}

const struct gw_sim_esp_stats *gw_sim_esp_stats(const struct gw_sim_esp *e)
{
    return &e->st;
}

bool gw_sim_esp_result_json(const struct gw_sim_esp *e, cJSON *o)
{
    const struct gw_sim_esp_stats *s = &e->st;
    cJSON *arr;

    cJSON_AddStringToObject(o, "mcp_profile", "esp");
    if (e->o.engine_lifecycle) {
        cJSON_AddStringToObject(o, "mcp_engine", "esp-mcp");
    }
    cJSON_AddNumberToObject(o, "mcp_lifecycle_refused", s->lifecycle_refused);
    cJSON_AddNumberToObject(o, "mcp_lifecycle_ignored", s->lifecycle_ignored);
    cJSON_AddNumberToObject(o, "mcp_reinitializes", s->reinitializes);
    cJSON_AddNumberToObject(o, "mcp_samplings", s->samplings);
    cJSON_AddNumberToObject(o, "mcp_elicitations", s->elicitations);
    cJSON_AddNumberToObject(o, "mcp_roots", s->roots);
    cJSON_AddNumberToObject(o, "mcp_remote_ok", s->remote_ok);
    cJSON_AddNumberToObject(o, "mcp_remote_err", s->remote_err);
    cJSON_AddNumberToObject(o, "mcp_remote_inits", s->remote_inits_ok);
    cJSON_AddNumberToObject(o, "mcp_remote_init_err", s->remote_inits_err);
    cJSON_AddNumberToObject(o, "mcp_remote_notifications",
                            s->remote_notifications);
    cJSON_AddNumberToObject(o, "mcp_remote_progress", s->remote_progress);
    cJSON_AddNumberToObject(o, "mcp_progress_sent", s->progress_sent);
    cJSON_AddNumberToObject(o, "mcp_tasks", s->tasks);
    cJSON_AddNumberToObject(o, "mcp_subscribed", s->subscribed);
    cJSON_AddNumberToObject(o, "mcp_updates_sent", s->updates_sent);
    cJSON_AddNumberToObject(o, "mcp_logs_sent", s->logs_sent);
    cJSON_AddNumberToObject(o, "mcp_list_changed_sent", s->list_changed_sent);
    cJSON_AddNumberToObject(o, "mcp_late", s->late);
    cJSON_AddNumberToObject(o, "mcp_unanswered", s->unanswered);
    cJSON_AddNumberToObject(o, "mcp_violations", s->violations);
    cJSON_AddStringToObject(o, "mcp_violation", s->violation);
    cJSON_AddStringToObject(o, "mcp_protocol_version", s->protocol_version);
    arr = cJSON_AddArrayToObject(o, "mcp_remote");
    if (arr == NULL) {
        return false;
    }
    for (size_t i = 0; i < e->n_remote; i++) {
        const struct remote_result *r = &e->remote_res[i];
        cJSON *item = cJSON_CreateObject();
        if (item == NULL) {
            return false;
        }
        cJSON_AddItemToArray(arr, item);
        cJSON_AddStringToObject(item, "endpoint", e->remote[i].endpoint);
        cJSON_AddStringToObject(item, "tool", e->remote[i].tool);
        cJSON_AddBoolToObject(item, "done", r->done);
        cJSON_AddBoolToObject(item, "ok", r->ok);
        cJSON_AddStringToObject(item, "text", r->text ? r->text : "");
    }
    return true;
}
