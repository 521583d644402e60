/*
 * The outbound's HTTP transfers (MCP's Streamable HTTP): one POST or
 * DELETE with the session's headers, within the server's max_connections
 * (each holds a connection), its response read as JSON or as an
 * event stream within mcp.outbound_max_response_bytes, the JSON-RPC
 * messages in it handed to the transfer's owner, and why it ended without
 * an answer. A transfer goes with its transfer's end, or at once when
 * its owner lets go of it outside the transfer's callbacks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "codec/jsonrpc.h"
#include "common/log.h"
#include "gateway/mcp/mcp_outbound_int.h"

/* Out of its server's connections: ended, or answered (the rest of it is
 * not read, its end follows). */
static void xfer_uncount(struct ob_xfer *x)
{
    if (x->counted) {
        x->counted = false;
        gw__mcp_outbound_stats(x->ob, x->server)->connections--;
    }
}

static void xfer_free(struct ob_xfer *x)
{
    xfer_uncount(x);
    gw_list_unlink(&x->node);
    if (x->sse_ready) {
        gw_sse_free(&x->parser);
    }
    free(x->sid);
    free(x->sent_sid);
    free(x->body);
    free(x);
}

void gw__mcp_outbound_xfer_abandon(struct ob_xfer *x)
{
    x->call = NULL;
    x->s = NULL;
    if (x->in_cb) {
        x->abandoned = true;
        return;
    }
    gw_http_cancel(x->req);
    xfer_free(x);
}

static void xfer_on_header(void *arg, const char *name, const char *value)
{
    struct ob_xfer *x = arg;

    if (strcasecmp(name, "content-type") == 0) {
        x->sse = strncasecmp(value, "text/event-stream", 17) == 0;
    } else if (strcasecmp(name, "mcp-session-id") == 0) {
        free(x->sid);
        x->sid = strdup(value);
    }
}

static void xfer_fail(struct ob_xfer *x, enum gw_outbound_failure why,
                      const char *reason)
{
    if (!x->failed) {
        x->failed = true;
        x->fail = why;
        snprintf(x->reason, sizeof(x->reason), "%s", reason);
    }
}

/* One JSON-RPC message of a response, JSON body or event (only those of
 * an initialize or a call are read: x->ops is set). */
static void xfer_message(struct ob_xfer *x, const char *text, size_t len)
{
    cJSON *msg = cJSON_ParseWithLength(text, len);
    struct gw_rpc rpc;
    uint32_t id;

    if (msg == NULL || gw_rpc_classify(msg, &rpc) != 0) {
        xfer_fail(x, GW_OUTBOUND_FAIL_BODY, "the answer is not JSON-RPC");
        cJSON_Delete(msg);
        return;
    }
    if (rpc.kind == GW_RPC_RESPONSE) {
        if (x->answered || !gw_rpc_id_u32(rpc.id, &id) || id != x->want_id) {
            xfer_fail(x, GW_OUTBOUND_FAIL_BODY,
                      "the answer has an id the gateway did not send");
        } else {
            x->answered = true;
            xfer_uncount(x); /* what the answer starts may take its place */
            x->ops->on_answer(x, msg, &rpc);
        }
    } else {
        x->ops->on_message(x, msg);
    }
    cJSON_Delete(msg);
}

static int on_sse_event(void *arg, const struct gw_sse_event *ev)
{
    struct ob_xfer *x = arg;

    if (strcmp(ev->event, "message") != 0) {
        return 0; /* the transport defines no other event */
    }
    xfer_message(x, ev->data, ev->data_len);
    return x->failed || x->abandoned ? 1 : 0;
}

static size_t max_response(const struct gw_mcp_outbound *ob)
{
    return (size_t)gw__mcp_outbound_config(ob)->mcp.outbound_max_response_bytes;
}

static bool xfer_on_data(void *arg, const char *buf, size_t len)
{
    struct ob_xfer *x = arg;
    struct gw_mcp_outbound *ob = x->ob;
    size_t limit = max_response(ob);
    char text[160];

    /* Every body counts against the limit, also those nobody reads. */
    x->total += len;
    if (x->total > limit) {
        snprintf(text, sizeof(text),
                 "the answer is over mcp.outbound_max_response_bytes (%zu)",
                 limit);
        xfer_fail(x, GW_OUTBOUND_FAIL_TOO_BIG, text);
        return false;
    }
    if (x->kind == X_NOTIFY || x->kind == X_DELETE ||
        gw_http_req_status(x->req) != 200) {
        return true; /* nothing to read in it */
    }
    x->in_cb = true;
    if (x->sse) {
        if (!x->sse_ready) {
            gw_sse_init(&x->parser, limit, limit);
            x->sse_ready = true;
        }
        int rc = gw_sse_feed(&x->parser, buf, len, on_sse_event, x);
        if (rc < 0 && !x->failed) {
            xfer_fail(x, GW_OUTBOUND_FAIL_BODY, "bad event stream");
        }
    } else {
        if (x->body_len + len + 1 > x->body_cap) {
            size_t cap = x->body_cap ? x->body_cap : 1024;
            while (cap < x->body_len + len + 1) {
                cap *= 2;
            }
            char *grown = realloc(x->body, cap);
            if (grown == NULL) {
                xfer_fail(x, GW_OUTBOUND_FAIL_BODY, "out of memory");
                x->in_cb = false;
                return false;
            }
            x->body = grown;
            x->body_cap = cap;
        }
        memcpy(x->body + x->body_len, buf, len);
        x->body_len += len;
    }
    x->in_cb = false;
    /* Answered: the rest of the stream is of no interest. */
    return !(x->failed || x->abandoned || x->answered);
}

static const char *const *
build_headers(const struct gw_mcp_server_config *ms, const struct ob_session *s,
              bool with_session, char *auth, size_t auth_cap, char *sidh,
              size_t sid_cap, char *verh, size_t ver_cap, const char *out[6])
{
    size_t n = 0;

    out[n++] = "Content-Type: application/json";
    out[n++] = "Accept: application/json, text/event-stream";
    if (ms->auth.scheme == GW_AUTH_BEARER) {
        snprintf(auth, auth_cap, "Authorization: Bearer %s", ms->auth.token);
        out[n++] = auth;
    }
    if (with_session && s->sid != NULL) {
        snprintf(sidh, sid_cap, "Mcp-Session-Id: %s", s->sid);
        out[n++] = sidh;
    }
    if (with_session && s->version[0] != '\0') {
        snprintf(verh, ver_cap, "MCP-Protocol-Version: %s", s->version);
        out[n++] = verh;
    }
    out[n] = NULL;
    return out;
}

static void xfer_on_done(void *arg, enum gw_http_result result, int status,
                         const char *detail);

unsigned gw__mcp_outbound_posts_of(const struct gw_mcp_outbound *ob,
                                   const char *client_id)
{
    unsigned n = 0;

    for (const struct gw_list *it = ob->posts.next; it != &ob->posts;
         it = it->next) {
        const struct ob_xfer *x = GW_LIST_ENTRY(it, struct ob_xfer, node);
        n += x->from_device && strcmp(x->client_id, client_id) == 0;
    }
    return n;
}

/* Over the server's max_connections: a notification or DELETE is dropped
 * here (nobody waits for it), a request is refused by its owner. */
static bool server_full(struct gw_mcp_outbound *ob,
                        const struct gw_mcp_server_config *ms,
                        const struct ob_session *s, enum xfer_kind kind,
                        const cJSON *msg)
{
    struct gw_outbound_server_stats *st = gw__mcp_outbound_stats(ob, ms->name);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(msg, "method");

    if (st->connections < (uint64_t)ms->max_connections) {
        return false;
    }
    if (kind == X_NOTIFY || kind == X_DELETE) {
        st->dropped++;
        gw__mcp_outbound_log(
            ob, GW_LOG_WARN, s->client_id,
            "%s to %s dropped: %d connections to it open (max_connections)",
            kind == X_DELETE    ? "DELETE"
            : cJSON_IsString(m) ? m->valuestring
                                : "notification",
            ms->name, ms->max_connections);
    }
    return true;
}

int gw__mcp_outbound_xfer_start(struct gw_mcp_outbound *ob,
                                const struct gw_mcp_server_config *ms,
                                struct ob_session *s, enum xfer_kind kind,
                                const cJSON *msg, uint32_t want_id,
                                const struct ob_xfer_ops *ops,
                                struct ob_xfer **out)
{
    /* initialize opens the session: every other request names it */
    bool with_session = kind != X_INIT;
    char auth[1024], sidh[SID_MAX + 32], verh[64];
    const char *headers[6];
    struct ob_xfer *x;
    char *body = NULL;
    int rc;

    if (server_full(ob, ms, s, kind, msg)) {
        return GW_ELIMIT;
    }
    x = calloc(1, sizeof(*x));
    if (x == NULL) {
        return GW_ENOMEM;
    }
    x->ob = ob;
    x->kind = kind;
    x->want_id = want_id;
    x->ops = ops;
    gw_list_init(&x->node);
    snprintf(x->server, sizeof(x->server), "%s", ms->name);
    snprintf(x->client_id, sizeof(x->client_id), "%s", s->client_id);
    if ((msg != NULL && (body = cJSON_PrintUnformatted(msg)) == NULL) ||
        (with_session && s->sid != NULL &&
         (x->sent_sid = strdup(s->sid)) == NULL)) {
        cJSON_free(body);
        free(x);
        return GW_ENOMEM;
    }
    struct gw_http_options opts = {
        .method = kind == X_DELETE ? "DELETE" : "POST",
        .url = ms->url,
        .headers = build_headers(ms, s, with_session, auth, sizeof(auth), sidh,
                                 sizeof(sidh), verh, sizeof(verh), headers),
        .body = body,
        .body_len = body != NULL ? strlen(body) : 0,
        /* the call's own timer ends it first; this only backs it up */
        .timeout_ms = (long)ms->timeout_ms + 1000,
        .ca_file = ms->ca_file,
    };
    struct gw_http_callbacks cbs = {
        .on_header = xfer_on_header,
        .on_data = xfer_on_data,
        .on_done = xfer_on_done,
        .arg = x,
    };
    if (kind == X_INIT) {
        opts.timeout_ms = ms->timeout_ms;
    }
    rc = gw_http_request(ob->http, &opts, &cbs, &x->req);
    cJSON_free(body);
    if (rc != 0) {
        xfer_free(x);
        /* GW_ELIMIT means the server's cap to the callers */
        return rc == GW_ELIMIT ? GW_EINVAL : rc;
    }
    x->counted = true;
    gw__mcp_outbound_stats(ob, ms->name)->connections++;
    if (kind == X_NOTIFY || kind == X_DELETE) {
        gw_list_insert_tail(&ob->posts, &x->node);
    }
    if (out != NULL) {
        *out = x;
    }
    return 0;
}

static enum gw_outbound_failure failure_of(enum gw_http_result r)
{
    switch (r) {
    case GW_HTTP_CONNECT:
        return GW_OUTBOUND_FAIL_CONNECT;
    case GW_HTTP_TLS:
        return GW_OUTBOUND_FAIL_TLS;
    default:
        return GW_OUTBOUND_FAIL_TRANSFER;
    }
}

/* The transfer ended: for an initialize or a call still wanted that got
 * no answer, the owner hears why. */
static void xfer_on_done(void *arg, enum gw_http_result result, int status,
                         const char *detail)
{
    struct ob_xfer *x = arg;
    struct ob_xfer_end end = {.fail = GW_OUTBOUND_FAIL_BODY};
    char text[256];

    x->in_cb = true;
    if (x->kind == X_NOTIFY || x->kind == X_DELETE) {
        if (result != GW_HTTP_OK || (status != 200 && status != 202 &&
                                     status != 204 && status != 404)) {
            gw_log(GW_LOG_DEBUG, "mcp-out", "%s %s: %s %d %s", x->server,
                   x->kind == X_DELETE ? "DELETE" : "notification",
                   gw_http_result_name(result), status, detail);
        }
        goto out;
    }
    if (x->abandoned || x->answered || (x->call == NULL && x->s == NULL)) {
        goto out;
    }
    if (x->failed) {
        end.fail = x->fail;
        snprintf(text, sizeof(text), "%s", x->reason);
    } else if (result != GW_HTTP_OK) {
        end.fail = failure_of(result);
        end.timeout = result == GW_HTTP_TIMEOUT;
        snprintf(text, sizeof(text), "%s (%s)", gw_http_result_name(result),
                 detail);
    } else if (status != 200) {
        bool lost = status == 404 && x->kind == X_CALL;
        end.fail = lost ? GW_OUTBOUND_FAIL_SESSION : GW_OUTBOUND_FAIL_HTTP;
        end.session_gone = lost && x->sent_sid != NULL;
        snprintf(text, sizeof(text), "HTTP status %d", status);
    } else if (x->sse) {
        snprintf(text, sizeof(text), "the event stream ended with no answer");
    } else {
        xfer_message(x, x->body != NULL ? x->body : "", x->body_len);
        if (x->answered) {
            goto out;
        }
        snprintf(text, sizeof(text), "%s",
                 x->failed ? x->reason : "no answer in the body");
        end.fail = x->failed ? x->fail : GW_OUTBOUND_FAIL_BODY;
    }
    end.text = text;
    x->ops->on_failed(x, &end);
out:
    xfer_free(x);
}
