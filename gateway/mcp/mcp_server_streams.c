/*
 * How the MCP server writes to its clients: an answer as JSON with the
 * session's header, a refusal, a message as a server-sent event, and the
 * sessions' GET streams with their keepalive comments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/jsonrpc.h"
#include "common/log.h"
#include "gateway/mcp/mcp_server_int.h"

static const char KEEPALIVE_COMMENT[] = ": keepalive\n\n";

/* ---- answers ---- */

void gw__mcp_server_respond(struct gw_http_req *req,
                            const struct gw_mcp_client *cl, int status,
                            const cJSON *msg)
{
    char header[sizeof("Mcp-Session-Id: ") + GW_MCP_SESSION_ID_LEN];
    const char *headers[2] = {NULL, NULL};
    char *body = NULL;

    if (cl != NULL) {
        snprintf(header, sizeof(header), "Mcp-Session-Id: %s", cl->id);
        headers[0] = header;
    }
    if (msg == NULL) {
        (void)gw_http_respond(req, status, NULL, headers, "", 0);
        return;
    }
    body = cJSON_PrintUnformatted(msg);
    if (body == NULL) {
        static const char oom[] = "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":"
                                  "{\"code\":-32603,\"message\":"
                                  "\"out of memory\"}}";
        (void)gw_http_respond(req, 500, "application/json", headers, oom,
                              sizeof(oom) - 1);
        return;
    }
    (void)gw_http_respond(req, status, "application/json", headers, body,
                          strlen(body));
    cJSON_free(body);
}

void gw__mcp_server_reject(struct gw_mcp_server *srv, struct gw_http_req *req,
                           const char *subject, const struct gw_mcp_client *cl,
                           int status, int code, const char *message)
{
    cJSON *msg = gw_rpc_error(NULL, code, message);

    gw_log_peer(GW_LOG_WARN, gw_http_req_peer(req), subject,
                "%s %s refused with %d: %s", gw_http_req_method(req),
                gw_http_req_path(req), status, message);
    srv->stats.rejected++;
    gw__mcp_server_respond(req, cl, status, msg);
    cJSON_Delete(msg);
}

/* ---- events ---- */

/* One server-sent event of msg (free() it); NULL on OOM. */
static char *event_of(const cJSON *msg, size_t *len)
{
    char *json = cJSON_PrintUnformatted(msg);
    size_t n;
    char *ev;

    if (json == NULL) {
        return NULL;
    }
    n = strlen(json) + sizeof("event: message\ndata: \n\n");
    if ((ev = malloc(n)) != NULL) {
        *len = (size_t)snprintf(ev, n, "event: message\ndata: %s\n\n", json);
    }
    cJSON_free(json);
    return ev;
}

/* A write error ends the stream in the HTTP server, which reports it gone
 * later, from the loop: req stays valid until then. */
void gw__mcp_server_event_write(struct gw_http_req *req, const cJSON *msg)
{
    size_t len = 0;
    char *ev = event_of(msg, &len);

    if (ev != NULL) {
        (void)gw_http_stream_write(req, ev, len);
    }
    free(ev);
}

/* ---- GET streams ---- */

static void stream_unlink(struct gw_mcp_stream *st)
{
    struct gw_mcp_client *cl = st->cl;

    gw_list_unlink(&st->node);
    cl->n_streams--;
    cl->srv->stats.streams_open--;
}

static void stream_gone(struct gw_http_req *req, void *arg)
{
    struct gw_mcp_stream *st = arg;
    struct gw_mcp_client *cl = st->cl;

    (void)req;
    stream_unlink(st);
    free(st);
    /* idle time counts from the end of the last stream */
    gw__mcp_server_touch(cl);
    gw_log_peer(GW_LOG_DEBUG, NULL, cl->subject, "stream closed (%zu left)",
                cl->n_streams);
}

/* A write error ends the stream in the HTTP server, which then reports it
 * gone (possibly at once): st must not be used after a failed write. */
static void stream_write(struct gw_mcp_stream *st, const char *data, size_t len)
{
    st->last_write_ms = uv_now(st->cl->srv->env.loop);
    (void)gw_http_stream_write(st->req, data, len);
}

void gw__mcp_server_stream_open(struct gw_mcp_client *cl,
                                struct gw_http_req *req)
{
    char id_header[sizeof("Mcp-Session-Id: ") + GW_MCP_SESSION_ID_LEN];
    const char *headers[] = {"Cache-Control: no-cache", id_header, NULL};
    struct gw_mcp_stream *st = calloc(1, sizeof(*st));
    int rc;

    if (st == NULL) {
        cJSON *msg = gw_rpc_error(NULL, GW_RPC_INTERNAL_ERROR, "out of memory");
        gw__mcp_server_respond(req, cl, 500, msg);
        cJSON_Delete(msg);
        return;
    }
    snprintf(id_header, sizeof(id_header), "Mcp-Session-Id: %s", cl->id);
    if ((rc = gw_http_stream_begin(req, 200, "text/event-stream", headers)) !=
        0) {
        gw_log_peer(GW_LOG_WARN, NULL, cl->subject, "cannot open stream: %s",
                    gw_strerror(rc));
        free(st);
        return;
    }
    st->cl = cl;
    st->req = req;
    st->last_write_ms = uv_now(cl->srv->env.loop);
    gw_list_insert_head(&cl->streams, &st->node);
    cl->n_streams++;
    cl->srv->stats.streams_open++;
    gw_http_req_on_gone(req, stream_gone, st);
    gw__mcp_server_touch(cl);
    gw_log_peer(GW_LOG_DEBUG, NULL, cl->subject, "stream opened (%zu open)",
                cl->n_streams);
}

bool gw__mcp_server_notify(struct gw_mcp_client *cl, const cJSON *msg)
{
    struct gw_list *first = gw_list_first(&cl->streams);
    size_t len = 0;
    char *ev;

    /* One stream only: the transport forbids sending one message on
     * several streams of a session. The newest is the one in use. */
    if (first == NULL || (ev = event_of(msg, &len)) == NULL) {
        return false;
    }
    stream_write(GW_LIST_ENTRY(first, struct gw_mcp_stream, node), ev, len);
    free(ev);
    return true;
}

void gw__mcp_server_streams_keepalive(struct gw_mcp_client *cl, uint64_t now,
                                      uint64_t ms)
{
    struct gw_list *it, *tmp;

    GW_LIST_FOREACH_SAFE(it, tmp, &cl->streams)
    {
        struct gw_mcp_stream *st =
            GW_LIST_ENTRY(it, struct gw_mcp_stream, node);
        if (now - st->last_write_ms >= ms) {
            stream_write(st, KEEPALIVE_COMMENT, sizeof(KEEPALIVE_COMMENT) - 1);
        }
    }
}

void gw__mcp_server_streams_end(struct gw_mcp_client *cl)
{
    struct gw_list *first;

    while ((first = gw_list_first(&cl->streams)) != NULL) {
        struct gw_mcp_stream *st =
            GW_LIST_ENTRY(first, struct gw_mcp_stream, node);
        stream_unlink(st);
        gw_http_stream_end(st->req);
        free(st);
    }
}
