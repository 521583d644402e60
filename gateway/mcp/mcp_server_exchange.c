/*
 * A POST's exchange with the MCP server: the replies of its messages, the
 * requests it forwarded to devices and waits for (progress passed on,
 * cancelled by the client, answered), and its answer once the last one
 * ended: as JSON, or as an event stream when progress is to come first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/jsonrpc.h"
#include "codec/mcp_items.h"
#include "common/log.h"
#include "gateway/device/device_table.h"
#include "gateway/mcp/mcp_server_int.h"

/* ---- exchanges: a POST and the replies of its messages ---- */

struct gw_mcp_exchange *gw__mcp_server_exchange_create(struct gw_mcp_client *cl,
                                                       struct gw_http_req *req,
                                                       bool batch)
{
    struct gw_mcp_exchange *ex = calloc(1, sizeof(*ex));

    if (ex == NULL || (ex->replies = cJSON_CreateArray()) == NULL) {
        free(ex);
        return NULL;
    }
    ex->cl = cl;
    ex->req = req;
    ex->batch = batch;
    ex->dispatching = true;
    return ex;
}

static void exchange_send(struct gw_mcp_exchange *ex)
{
    int n = cJSON_GetArraySize(ex->replies);

    if (ex->streaming) {
        if (n > 0) {
            gw__mcp_server_event_write(
                ex->req,
                ex->batch ? ex->replies : cJSON_GetArrayItem(ex->replies, 0));
        }
        gw_http_stream_end(ex->req);
    } else if (n == 0) {
        gw__mcp_server_respond(ex->req, ex->cl, 202, NULL);
    } else if (ex->batch) {
        gw__mcp_server_respond(ex->req, ex->cl, 200, ex->replies);
    } else {
        gw__mcp_server_respond(ex->req, ex->cl, 200,
                               cJSON_GetArrayItem(ex->replies, 0));
    }
    cJSON_Delete(ex->replies);
    free(ex);
}

void gw__mcp_server_exchange_put(struct gw_mcp_exchange *ex, cJSON *reply)
{
    if (reply == NULL) {
        reply = gw_rpc_error(NULL, GW_RPC_INTERNAL_ERROR, "out of memory");
    }
    if (reply != NULL && !cJSON_AddItemToArray(ex->replies, reply)) {
        cJSON_Delete(reply);
    }
}

/* The client went away: its requests are abandoned, the device's answers
 * will be dropped. */
static void exchange_gone(struct gw_http_req *req, void *arg)
{
    struct gw_mcp_exchange *ex = arg;
    struct gw_mcp_client *cl = ex->cl;
    struct gw_list *it, *tmp;

    (void)req;
    GW_LIST_FOREACH_SAFE(it, tmp, &cl->pending)
    {
        struct gw__mcp_pending *p =
            GW_LIST_ENTRY(it, struct gw__mcp_pending, node);
        if (p->ex != ex) {
            continue;
        }
        gw_mcp_abandon(gw_device_table_links(cl->srv->env.devices), p->handle);
        p->ex = NULL;
        gw__mcp_server_pending_finish(p, NULL);
    }
    gw_log_peer(GW_LOG_DEBUG, NULL, cl->subject,
                "client went away before the answer");
    cJSON_Delete(ex->replies);
    free(ex);
}

/* A request of ex carries a progress token and the client takes event
 * streams: the answer becomes one, progress first, then the replies. */
static void exchange_stream(struct gw_mcp_exchange *ex)
{
    char id_header[sizeof("Mcp-Session-Id: ") + GW_MCP_SESSION_ID_LEN];
    const char *headers[] = {"Cache-Control: no-cache", id_header, NULL};
    int rc;

    snprintf(id_header, sizeof(id_header), "Mcp-Session-Id: %s", ex->cl->id);
    rc = gw_http_stream_begin(ex->req, 200, "text/event-stream", headers);
    if (rc != 0) {
        /* The request is being dropped, without a gone report (nothing
         * is owed to it any more): its requests go now, as if it left. */
        gw_log_peer(GW_LOG_WARN, NULL, ex->cl->subject,
                    "cannot stream the answer: %s", gw_strerror(rc));
        exchange_gone(ex->req, ex);
        return;
    }
    ex->streaming = true;
}

void gw__mcp_server_exchange_dispatched(struct gw_mcp_exchange *ex)
{
    ex->dispatching = false;
    if (ex->waiting == 0) {
        exchange_send(ex);
        return;
    }
    gw_http_req_on_gone(ex->req, exchange_gone, ex);
    if (ex->progress && ex->sse_ok) {
        exchange_stream(ex);
    }
}

/* ---- requests forwarded to devices ---- */

struct gw__mcp_pending *gw__mcp_server_pending_add(struct gw_mcp_exchange *ex,
                                                   const cJSON *id,
                                                   const char *client_id)
{
    struct gw_mcp_client *cl = ex->cl;
    struct gw__mcp_pending *p = calloc(1, sizeof(*p));

    if (p == NULL) {
        return NULL;
    }
    if ((p->id = cJSON_Duplicate(id, true)) == NULL) {
        free(p);
        return NULL;
    }
    snprintf(p->client_id, sizeof(p->client_id), "%s", client_id);
    p->cl = cl;
    p->ex = ex;
    gw_list_insert_head(&cl->pending, &p->node);
    cl->n_pending++;
    ex->waiting++;
    return p;
}

/* Ends p; answered: reply (moved) joins its exchange's replies. */
static void pending_end(struct gw__mcp_pending *p, cJSON *reply, bool answered)
{
    struct gw_mcp_client *cl = p->cl;
    struct gw_mcp_exchange *ex = p->ex;

    gw_list_unlink(&p->node);
    cl->n_pending--;
    gw__mcp_server_touch(cl);
    cJSON_Delete(p->id);
    free(p);
    if (ex == NULL) {
        cJSON_Delete(reply);
        return;
    }
    if (answered) {
        gw__mcp_server_exchange_put(ex, reply);
    }
    if (--ex->waiting == 0 && !ex->dispatching) {
        exchange_send(ex);
    }
}

void gw__mcp_server_pending_finish(struct gw__mcp_pending *pending,
                                   cJSON *reply)
{
    pending_end(pending, reply, true);
}

bool gw__mcp_server_pending_cancel(struct gw_mcp_client *cl,
                                   const cJSON *request_id)
{
    struct gw__mcp_pending *p = NULL;
    struct gw_list *it;

    if (request_id == NULL) {
        return false;
    }
    for (it = cl->pending.next; it != &cl->pending; it = it->next) {
        struct gw__mcp_pending *q =
            GW_LIST_ENTRY(it, struct gw__mcp_pending, node);
        if (q->ex != NULL && cJSON_Compare(q->id, request_id, true)) {
            p = q;
            break;
        }
    }
    if (p == NULL) {
        return false;
    }
    gw_log_peer(GW_LOG_INFO, NULL, cl->subject, "%s to %s cancelled by client",
                p->method, p->client_id);
    gw_mcp_abandon(gw_device_table_links(cl->srv->env.devices), p->handle);
    /* MCP: a cancelled request gets no response. Its POST still ends:
     * 202 when nothing else of it has an answer, or its stream ends. */
    pending_end(p, NULL, false);
    return true;
}

void gw__mcp_server_pending_reply(void *arg, const struct gw_mcp_reply *reply)
{
    struct gw__mcp_pending *p = arg;
    cJSON *body, *msg = NULL;

    if (p->shape != NULL) {
        gw__mcp_server_pending_finish(p, p->shape(p, reply));
        return;
    }
    if (reply->outcome == GW_MCP_OK) {
        if ((body = cJSON_Duplicate(reply->result, true)) != NULL) {
            msg = gw_rpc_result(p->id, body);
        }
    } else {
        if (reply->outcome != GW_MCP_ERROR) {
            gw_log_peer(GW_LOG_INFO, NULL, p->cl->subject, "%s to %s: %s",
                        p->method, p->client_id,
                        gw_mcp_outcome_name(reply->outcome));
        }
        if ((body = cJSON_Duplicate(reply->error, true)) != NULL) {
            msg = gw_rpc_error_with(p->id, body);
        }
    }
    gw__mcp_server_pending_finish(p, msg);
}

void gw__mcp_server_pending_end_all(struct gw_mcp_client *cl)
{
    struct gw_list *first;

    while ((first = gw_list_first(&cl->pending)) != NULL) {
        struct gw__mcp_pending *p =
            GW_LIST_ENTRY(first, struct gw__mcp_pending, node);
        if (p->ex != NULL) {
            gw_mcp_abandon(gw_device_table_links(cl->srv->env.devices),
                           p->handle);
        }
        gw__mcp_server_pending_finish(
            p, gw_rpc_error(p->id, GW_RPC_CANCELLED, "session ended"));
    }
}

/* Progress of a pending request (params with the client's own token): on
 * the answer's event stream when it is one, else on the session's GET
 * stream. */
static void pending_progress(void *arg, const cJSON *params)
{
    struct gw__mcp_pending *p = arg;
    struct gw_mcp_client *cl = p->cl;
    cJSON *copy = cJSON_Duplicate(params, true);
    cJSON *msg = copy != NULL
                     ? gw_rpc_notification("notifications/progress", copy)
                     : NULL;

    if (msg == NULL) {
        return;
    }
    cl->srv->stats.progress++;
    if (p->ex != NULL && p->ex->streaming) {
        gw__mcp_server_event_write(p->ex->req, msg);
    } else if (!gw__mcp_server_notify(cl, msg)) {
        gw_log_peer(GW_LOG_DEBUG, NULL, cl->subject,
                    "progress of %s dropped: no stream to carry it", p->method);
    }
    cJSON_Delete(msg);
}

cJSON *gw__mcp_server_forward(struct gw_mcp_exchange *ex,
                              const struct gw_rpc *rpc, struct gw_device *dev,
                              const char *method, cJSON *params,
                              uint32_t timeout_ms, gw__mcp_shape_cb shape,
                              bool *started)
{
    struct gw_mcp_client *cl = ex->cl;
    struct gw_mcp_opts opts = {.timeout_ms = timeout_ms};
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
    struct gw__mcp_pending *p;

    if (params == NULL ||
        (p = gw__mcp_server_pending_add(ex, rpc->id, dev->client_id)) == NULL) {
        cJSON_Delete(params);
        return gw_rpc_error(rpc->id, GW_RPC_INTERNAL_ERROR, "out of memory");
    }
    p->method = method;
    p->shape = shape;
    if (cl->client_id[0] == '\0') {
        snprintf(p->label, sizeof(p->label), "%.*s", GW_MCP_LABEL_LEN,
                 dev->label);
    }
    if (gw_mcp_progress_token_valid(
            cJSON_GetObjectItemCaseSensitive(meta, "progressToken"))) {
        p->progress = true;
        ex->progress = true;
        opts.on_progress = pending_progress;
    }
    if (strcmp(method, "tools/call") != 0) { /* that one says which tool */
        gw_log_peer(GW_LOG_DEBUG, NULL, cl->subject, "%s to %s", method,
                    dev->client_id);
    }
    gw_mcp_request_with(gw_device_table_links(cl->srv->env.devices), &dev->link,
                        method, params, &opts, GW_MCP_FROM_CLIENT,
                        gw__mcp_server_pending_reply, p, &p->handle);
    *started = true;
    return NULL;
}
