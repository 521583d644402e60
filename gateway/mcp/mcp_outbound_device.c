/*
 * A device's messages for an MCP server: a request becomes a call of the
 * (device, server) session (ping and a repeated initialize answered by
 * the gateway; refused over outbound_max_pending or with an id already
 * waiting; ended by its own timer), a notification goes to the server
 * (dropped over outbound_max_pending; a notifications/cancelled ends the
 * call it names).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/jsonrpc.h"
#include "common/log.h"
#include "gateway/mcp/mcp_outbound_int.h"

static bool ids_equal(const cJSON *a, const cJSON *b)
{
    if (cJSON_IsNumber(a) && cJSON_IsNumber(b)) {
        return a->valuedouble == b->valuedouble;
    }
    if (cJSON_IsString(a) && cJSON_IsString(b)) {
        return strcmp(a->valuestring, b->valuestring) == 0;
    }
    return false;
}

static void on_call_timeout(uv_timer_t *t)
{
    struct ob_call *c = t->data;
    struct ob_session *s = c->s;
    const struct gw_mcp_server_config *ms;
    char text[160];

    if (s == NULL) {
        return;
    }
    ms = gw__mcp_outbound_server(c->ob, s->server, s->client_id);
    snprintf(text, sizeof(text), "MCP server %s did not answer within %d ms",
             s->server, ms != NULL ? ms->timeout_ms : 0);
    gw__mcp_outbound_log(c->ob, GW_LOG_WARN, s->client_id, "%s: %s", c->method,
                         text);
    if (c->sent) {
        gw__mcp_outbound_send_cancelled(s, c->gw_id, "timeout");
    }
    gw__mcp_outbound_call_fail(c, GW_OUTBOUND_TIMEOUT, GW_RPC_TIMEOUT, text);
}

/* Requests of this device waiting on any server, and the notifications
 * it sent on their way: each holds a connection. (The gateway's own, and
 * DELETEs, follow from its calls and sessions.) */
static unsigned device_pending(struct gw_mcp_outbound *ob,
                               const char *client_id)
{
    const struct gw_config *cfg = gw__mcp_outbound_config(ob);
    unsigned n = gw__mcp_outbound_posts_of(ob, client_id);

    for (size_t i = 0; i < cfg->n_mcp_servers; i++) {
        struct ob_session *s = gw__mcp_outbound_session_find(
            ob, client_id, cfg->mcp_servers[i].name);
        n += s != NULL ? s->n_calls : 0;
    }
    return n;
}

static struct ob_call *find_call(struct ob_session *s, const cJSON *dev_id)
{
    struct gw_list *lists[] = {&s->waiting, &s->sent};

    for (size_t i = 0; i < 2; i++) {
        for (struct gw_list *it = lists[i]->next; it != lists[i];
             it = it->next) {
            struct ob_call *c = GW_LIST_ENTRY(it, struct ob_call, node);
            if (ids_equal(c->dev_id, dev_id)) {
                return c;
            }
        }
    }
    return NULL;
}

void gw__mcp_outbound_request(struct gw_mcp_outbound *ob, const char *client_id,
                              const char *endpoint, const cJSON *payload,
                              const struct gw_rpc *rpc)
{
    const struct gw_config *cfg = gw__mcp_outbound_config(ob);
    const struct gw_mcp_server_config *ms =
        gw__mcp_outbound_server(ob, endpoint, client_id);
    struct ob_session *s;
    struct ob_call *c;
    char text[192];
    cJSON *msg;

    if (ms == NULL) {
        snprintf(text, sizeof(text),
                 "no MCP server named %.64s for this device", endpoint);
        gw__mcp_outbound_log(ob, GW_LOG_WARN, client_id, "%s refused: %s",
                             rpc->method, text);
        gw__mcp_outbound_reply_error(ob, client_id, endpoint, rpc->id,
                                     GW_RPC_NO_SERVER, text);
        gw__mcp_outbound_stats(ob, "")->requests[GW_OUTBOUND_NO_SERVER]++;
        return;
    }
    if (strcmp(rpc->method, "ping") == 0) {
        cJSON *r = cJSON_CreateObject();
        msg = r != NULL ? gw_rpc_result(rpc->id, r) : NULL;
        if (msg != NULL) {
            (void)gw__mcp_outbound_publish(ob, client_id, endpoint, msg, NULL);
        }
        cJSON_Delete(msg);
        gw__mcp_outbound_stats(ob, ms->name)->requests[GW_OUTBOUND_LOCAL]++;
        return;
    }
    if (device_pending(ob, client_id) >=
        (unsigned)cfg->mcp.outbound_max_pending) {
        snprintf(text, sizeof(text),
                 "too many requests and notifications to MCP servers on "
                 "their way (limit %d)",
                 cfg->mcp.outbound_max_pending);
        gw__mcp_outbound_log(ob, GW_LOG_WARN, client_id, "%s to %s refused: %s",
                             rpc->method, ms->name, text);
        gw__mcp_outbound_reply_error(ob, client_id, endpoint, rpc->id,
                                     GW_RPC_DEVICE_BUSY, text);
        gw__mcp_outbound_stats(ob, ms->name)->requests[GW_OUTBOUND_BUSY]++;
        return;
    }
    s = gw__mcp_outbound_session_get(ob, client_id, ms->name);
    if (s == NULL) {
        gw__mcp_outbound_reply_error(ob, client_id, endpoint, rpc->id,
                                     GW_RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    if (find_call(s, rpc->id) != NULL) {
        gw__mcp_outbound_log(ob, GW_LOG_WARN, client_id,
                             "%s to %s refused: id in use", rpc->method,
                             ms->name);
        gw__mcp_outbound_reply_error(
            ob, client_id, endpoint, rpc->id, GW_RPC_INVALID_REQUEST,
            "a request with this id is already waiting");
        gw__mcp_outbound_stats(ob, ms->name)->requests[GW_OUTBOUND_INVALID]++;
        return;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL || (c->dev_id = cJSON_Duplicate(rpc->id, true)) == NULL ||
        (c->msg = cJSON_Duplicate(payload, true)) == NULL) {
        if (c != NULL) {
            cJSON_Delete(c->dev_id);
        }
        free(c);
        gw__mcp_outbound_reply_error(ob, client_id, endpoint, rpc->id,
                                     GW_RPC_INTERNAL_ERROR, "out of memory");
        if (s->n_calls == 0) {
            gw__mcp_outbound_session_idle_start(s);
        }
        return;
    }
    c->ob = ob;
    c->s = s;
    c->kind =
        strcmp(rpc->method, "initialize") == 0 ? CALL_INITIALIZE : CALL_FORWARD;
    snprintf(c->method, sizeof(c->method), "%s", rpc->method);
    uv_timer_init(ob->loop, &c->timer);
    c->timer.data = c;
    ob->handles++;
    uv_timer_start(&c->timer, on_call_timeout, (uint64_t)ms->timeout_ms, 0);
    uv_timer_stop(&s->idle);
    s->n_calls++;
    gw_list_insert_tail(&s->waiting, &c->node);
    if (s->state == SS_READY) {
        gw__mcp_outbound_session_flush(s);
    } else if (s->state == SS_IDLE) {
        gw__mcp_outbound_session_init_start(s);
    }
}

void gw__mcp_outbound_notification(struct gw_mcp_outbound *ob,
                                   const char *client_id, const char *endpoint,
                                   const cJSON *payload,
                                   const struct gw_rpc *rpc)
{
    const struct gw_mcp_server_config *ms =
        gw__mcp_outbound_server(ob, endpoint, client_id);
    struct ob_session *s =
        ms != NULL ? gw__mcp_outbound_session_find(ob, client_id, ms->name)
                   : NULL;
    struct ob_xfer *x;
    int limit;

    if (ms == NULL) {
        gw__mcp_outbound_log(
            ob, GW_LOG_WARN, client_id,
            "%s refused: no MCP server named %.64s for this device",
            rpc->method, endpoint);
        return;
    }
    if (strcmp(rpc->method, "notifications/initialized") == 0) {
        return; /* the gateway sent its own when the session opened */
    }
    if (strcmp(rpc->method, "notifications/cancelled") == 0) {
        const cJSON *rid =
            cJSON_GetObjectItemCaseSensitive(rpc->params, "requestId");
        struct ob_call *c = s != NULL ? find_call(s, rid) : NULL;
        if (c == NULL) {
            return; /* answered already, or never sent: nothing to do */
        }
        if (c->sent) {
            const cJSON *why =
                cJSON_GetObjectItemCaseSensitive(rpc->params, "reason");
            gw__mcp_outbound_send_cancelled(s, c->gw_id,
                                            cJSON_IsString(why)
                                                ? why->valuestring
                                                : "cancelled by the device");
        }
        gw__mcp_outbound_call_end(c, GW_OUTBOUND_CANCELLED);
        return;
    }
    if (s == NULL || s->state != SS_READY) {
        gw__mcp_outbound_log(ob, GW_LOG_DEBUG, client_id,
                             "%s to %s without a session: dropped", rpc->method,
                             ms->name);
        return;
    }
    limit = gw__mcp_outbound_config(ob)->mcp.outbound_max_pending;
    if (device_pending(ob, client_id) >= (unsigned)limit) {
        gw__mcp_outbound_stats(ob, ms->name)->dropped++;
        gw__mcp_outbound_log(ob, GW_LOG_WARN, client_id,
                             "%s to %s dropped: too many requests and "
                             "notifications to MCP servers on their way "
                             "(limit %d)",
                             rpc->method, ms->name, limit);
        return;
    }
    /* Over the server's max_connections: dropped and counted there. */
    if (gw__mcp_outbound_xfer_start(ob, ms, s, X_NOTIFY, payload, 0, NULL,
                                    &x) == 0) {
        x->from_device = true;
    }
}
