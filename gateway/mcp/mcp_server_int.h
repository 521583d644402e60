/*
 * Internals of the MCP server, shared by its files, each calling only the
 * ones below it: mcp_server.c (HTTP requests, the JSON-RPC dispatch,
 * initialize); the methods in mcp_server_tools.c (tools),
 * mcp_server_tasks.c (tasks) and mcp_server_items.c (resources, prompts,
 * completion, logging); mcp_server_clients.c (the session table and its
 * sweep timer); mcp_server_ask.c (requests of a device to its clients);
 * mcp_server_request.c (what every method does alike: the device a
 * request is for, its params, list pages, refusals);
 * mcp_server_exchange.c (a POST's answer and the requests it waits for at
 * devices); mcp_server_streams.c (JSON answers, events, GET streams).
 */
#ifndef GW_MCP_SERVER_INT_H
#define GW_MCP_SERVER_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "codec/client_id.h"
#include "codec/jsonrpc.h"
#include "codec/mcp_caps.h"
#include "codec/mcp_tools.h"
#include "common/hash.h"
#include "common/list.h"
#include "gateway/device/mcp_link.h"
#include "gateway/device/mcp_peers.h"
#include "gateway/mcp/mcp_server.h"

/* initialize refused: mcp.max_sessions are open (HTTP 503). */
#define GW_MCP_SESSIONS_FULL (-32005)

/* 16 random bytes as lowercase hex. */
#define GW_MCP_SESSION_ID_LEN 32

/* The newest protocol; also the answer to an unknown requested one. */
#define GW_MCP_PROTOCOL_LATEST "2025-11-25"
/* Assumed when a request has no MCP-Protocol-Version header; the only
 * revision that allows JSON-RPC batches. */
#define GW_MCP_PROTOCOL_BATCH "2025-03-26"

/* One GET stream (server-sent events) of a client. */
struct gw_mcp_stream {
    struct gw_list node; /* in the client's streams, newest first */
    struct gw_mcp_client *cl;
    struct gw_http_req *req;
    uint64_t last_write_ms; /* for the keepalive comment */
};

/* One POST whose answer waits for device requests (or is being built). */
struct gw_mcp_exchange {
    struct gw_mcp_client *cl;
    struct gw_http_req *req;
    cJSON *replies;   /* the responses gathered so far (an array) */
    bool batch;       /* answer with the array, else with its one item */
    bool dispatching; /* messages still being read: do not answer yet */
    bool sse_ok;      /* its Accept lists text/event-stream */
    bool progress;    /* a waiting request carries a progress token */
    bool streaming;   /* answered as an event stream: progress, then replies */
    unsigned waiting; /* requests not yet ended */
};

struct gw__mcp_pending;

/*
 * Makes the client's response of a device's reply (NULL on OOM, which
 * becomes -32603). NULL shape: the device's result as it came, its error
 * or the gateway's as a JSON-RPC error.
 */
typedef cJSON *(*gw__mcp_shape_cb)(struct gw__mcp_pending *pending,
                                   const struct gw_mcp_reply *reply);

/*
 * A client's request forwarded to a device (any method), waiting for the
 * device's answer; not to be confused with a device's request to a
 * client (struct gw_mcp_ask).
 */
struct gw__mcp_pending {
    struct gw_list node; /* in the client's pending, newest first */
    struct gw_mcp_client *cl;
    struct gw_mcp_exchange *ex; /* NULL once the client went away */
    cJSON *id;                  /* the client's JSON-RPC id (a copy) */
    uint64_t handle;
    const char *method; /* static: the method sent, for the log */
    gw__mcp_shape_cb shape;
    bool progress; /* the client asked for progress notifications */
    char client_id[GW_CLIENT_ID_MAX + 1];
    char label[GW_MCP_LABEL_LEN + 1]; /* "" on a device endpoint */
};

/* A device's request to a client session (sampling, elicitation, roots). */
struct gw_mcp_ask {
    struct gw_list node; /* in the server's asks, newest first */
    struct gw_mcp_server *srv;
    struct gw_mcp_client *cl;
    struct gw_device *dev; /* valid until it is reported gone */
    cJSON *device_id;      /* the device's own id (a copy) */
    char id[24];           /* the gateway's toward the client: gw-<n> */
    char method[32];
    uv_timer_t timer; /* mcp.device_request_timeout_ms; frees the ask */
};

struct gw_mcp_client {
    UT_hash_handle hh; /* in the server's table, by id */
    struct gw_mcp_server *srv;
    char id[GW_MCP_SESSION_ID_LEN + 1];
    char subject[32];                     /* "mcp sid=<8 hex>" for the log */
    char client_id[GW_CLIENT_ID_MAX + 1]; /* "" for the aggregated /mcp */
    char version[16];                     /* negotiated protocol revision */
    unsigned caps;        /* server capabilities its initialize was shown */
    unsigned client_caps; /* capabilities its initialize declared */
    uint64_t seq;         /* creation order: the newest takes device asks */
    uint64_t last_used_ms;
    struct gw_mcp_peer peer; /* subscriptions, level, tasks (mcp_peers.h) */
    struct gw_list streams;  /* struct gw_mcp_stream */
    struct gw_list pending;  /* struct gw__mcp_pending */
    size_t n_streams, n_pending, n_asks;
};

struct gw_mcp_server {
    struct gw_mcp_server_env env;
    void (*close_cb)(struct gw_mcp_server *srv, void *arg);
    void *close_arg;
    struct gw_mcp_client *clients; /* uthash by id */
    size_t n_clients;
    uv_timer_t timer;    /* idle expiry and keepalives; frees srv on close */
    struct gw_list asks; /* struct gw_mcp_ask: every one waiting */
    uint64_t next_seq, next_ask;
    struct gw_mcp_server_stats stats;
};

/* The session was used now: its idle time starts again. */
static inline void gw__mcp_server_touch(struct gw_mcp_client *cl)
{
    cl->last_used_ms = uv_now(cl->srv->env.loop);
}

/* A request method: its reply now, or NULL with *started when it went
 * to a device and its reply comes through ex later. */
typedef cJSON *(*gw__mcp_method_fn)(struct gw_mcp_exchange *ex,
                                    const struct gw_rpc *rpc, bool *started);

/* ---- mcp_server_tools.c ---- */

cJSON *gw__mcp_server_tools_list(struct gw_mcp_exchange *ex,
                                 const struct gw_rpc *rpc, bool *started);
cJSON *gw__mcp_server_tools_call(struct gw_mcp_exchange *ex,
                                 const struct gw_rpc *rpc, bool *started);

/* ---- mcp_server_tasks.c ---- */

/* tasks/get, tasks/result, tasks/cancel, tasks/list. */
cJSON *gw__mcp_server_tasks(struct gw_mcp_exchange *ex,
                            const struct gw_rpc *rpc, bool *started);
/* A tools/call's result that is a CreateTaskResult (result not moved):
 * the task is recorded for the session and its id renamed on /mcp. */
int gw__mcp_server_task_created(struct gw__mcp_pending *pending, cJSON *result);

/* ---- mcp_server_items.c ---- */

cJSON *gw__mcp_server_resources_list(struct gw_mcp_exchange *ex,
                                     const struct gw_rpc *rpc, bool *started);
cJSON *gw__mcp_server_templates_list(struct gw_mcp_exchange *ex,
                                     const struct gw_rpc *rpc, bool *started);
cJSON *gw__mcp_server_prompts_list(struct gw_mcp_exchange *ex,
                                   const struct gw_rpc *rpc, bool *started);
cJSON *gw__mcp_server_resources_read(struct gw_mcp_exchange *ex,
                                     const struct gw_rpc *rpc, bool *started);
cJSON *gw__mcp_server_subscribe(struct gw_mcp_exchange *ex,
                                const struct gw_rpc *rpc, bool *started);
cJSON *gw__mcp_server_prompts_get(struct gw_mcp_exchange *ex,
                                  const struct gw_rpc *rpc, bool *started);
cJSON *gw__mcp_server_complete(struct gw_mcp_exchange *ex,
                               const struct gw_rpc *rpc, bool *started);
cJSON *gw__mcp_server_set_level(struct gw_mcp_exchange *ex,
                                const struct gw_rpc *rpc, bool *started);
/* The peer callbacks of every session (mcp_peers.h): the device
 * notifications it asked for, renamed on /mcp. */
extern const struct gw_mcp_peer_ops gw__mcp_server_peer_ops;

/* ---- mcp_server_clients.c ---- */

/* Starts the sweep timer; on failure srv is freed (now or on close). */
GW_MUST_CHECK int gw__mcp_server_clients_start(struct gw_mcp_server *srv);
/* Ends every client, then closes the timer, whose callback frees srv. */
void gw__mcp_server_clients_stop(struct gw_mcp_server *srv);

/* A new client bound to client_id ("" = aggregated), its device
 * notifications through ops; GW_ELIMIT (counted) when mcp.max_sessions
 * are open: no session is evicted for it. */
GW_MUST_CHECK int gw__mcp_server_client_create(
    struct gw_mcp_server *srv, const char *client_id, const char *version,
    const struct gw_mcp_peer_ops *ops, struct gw_mcp_client **out);
struct gw_mcp_client *gw__mcp_server_client_find(struct gw_mcp_server *srv,
                                                 const char *id);
/* Streams end, waiting requests are answered -32004, the id is
 * forgotten. */
void gw__mcp_server_client_end(struct gw_mcp_client *cl, const char *why);
/* The list_changed notifications of caps (GW_MCP_CAP_TOOLS, _RESOURCES,
 * _PROMPTS) to the clients that see client_id and were shown them. */
void gw__mcp_server_lists_changed(struct gw_mcp_server *srv,
                                  const char *client_id, unsigned caps);

/* ---- mcp_server_ask.c ---- */

/* A response the client POSTed: to the device request it answers. */
void gw__mcp_server_ask_answered(struct gw_mcp_client *cl,
                                 const struct gw_rpc *rpc);
/* The session ends: its device requests get -32006. */
void gw__mcp_server_asks_client_gone(struct gw_mcp_client *cl);
/* The device went: its requests are cancelled toward the clients. */
void gw__mcp_server_asks_device_gone(struct gw_mcp_server *srv,
                                     const struct gw_device *dev);

/* ---- mcp_server_request.c ---- */

/*
 * The device a request is for: the session's own on a device endpoint,
 * else the one with label (/mcp); then method (NULL: no check) must be
 * one the device offers. NULL with *err (the refusal) otherwise.
 */
struct gw_device *gw__mcp_server_target(struct gw_mcp_client *cl,
                                        const struct gw_rpc *rpc,
                                        const char *label, const char *method,
                                        cJSON **err);
/* Copies the members of src named in names (NULL-terminated) into a new
 * object; NULL on OOM. */
cJSON *gw__mcp_server_params_pick(const cJSON *src, const char *const *names);
/*
 * A refusal of a request by the gateway: logged under the session's
 * subject with the method, counted, and returned as the JSON-RPC error.
 */
cJSON *gw__mcp_server_refuse(struct gw_mcp_client *cl, const struct gw_rpc *rpc,
                             int code, const char *message);

/* One page of a list (tools, resources, templates, prompts) as it is
 * built: the items after the cursor's offset, a page's worth at most. */
struct gw__mcp_page {
    cJSON *items;  /* the page's array, in the result */
    size_t offset; /* items before the cursor, skipped */
    size_t seen;   /* items met so far */
    bool more;     /* the page is full and items follow it */
};
/* The cursor of params into pg->offset (0 when absent); false when it is
 * not one the gateway made ("gw-offset-<n>"). */
bool gw__mcp_server_page_cursor(struct gw__mcp_page *pg, const cJSON *params);
/* The result object of the page, its array member named member (into
 * pg->items); NULL on OOM. */
cJSON *gw__mcp_server_page_new(struct gw__mcp_page *pg, const char *member);
/* Counts the next item met: true when it goes on the page; false before
 * the cursor's offset and once the page is full (pg->more is then set:
 * stop). */
bool gw__mcp_server_page_take(struct gw__mcp_page *pg);
/* The response with res (moved), with a nextCursor when items follow the
 * page; NULL on OOM. */
cJSON *gw__mcp_server_page_result(const struct gw_rpc *rpc, cJSON *res,
                                  const struct gw__mcp_page *pg);
/* An item of an aggregate list (copy, taken) with its description
 * prefixed by its device's client id; NULL (copy freed) on OOM. */
cJSON *gw__mcp_server_item_of(cJSON *copy, const struct gw_device *dev);

/* ---- mcp_server_exchange.c ---- */

/* An exchange for a POST of cl (NULL on OOM). */
struct gw_mcp_exchange *gw__mcp_server_exchange_create(struct gw_mcp_client *cl,
                                                       struct gw_http_req *req,
                                                       bool batch);
/* Adds one response (moved; NULL = out of memory, becomes -32603). */
void gw__mcp_server_exchange_put(struct gw_mcp_exchange *ex, cJSON *reply);
/* Every message was read: answers now, or when the last request ends. */
void gw__mcp_server_exchange_dispatched(struct gw_mcp_exchange *ex);

/* A pending request of ex (id copied) before it is sent; NULL on OOM. */
struct gw__mcp_pending *gw__mcp_server_pending_add(struct gw_mcp_exchange *ex,
                                                   const cJSON *id,
                                                   const char *client_id);
/* Ends a pending request with reply (moved) and frees it. */
void gw__mcp_server_pending_finish(struct gw__mcp_pending *pending,
                                   cJSON *reply);
/* notifications/cancelled: true if request_id named a waiting request. */
bool gw__mcp_server_pending_cancel(struct gw_mcp_client *cl,
                                   const cJSON *request_id);
/* The link's reply callback of every pending request (arg: it). */
void gw__mcp_server_pending_reply(void *arg, const struct gw_mcp_reply *reply);
/* The session ends: each of its requests is abandoned at the device and
 * answered -32004. */
void gw__mcp_server_pending_end_all(struct gw_mcp_client *cl);

/*
 * Sends method with params (moved) to dev for the request rpc of ex;
 * label: the device's on /mcp (the shape renames back), else NULL.
 * timeout_ms 0 = mcp.call_timeout_ms. Progress is asked for when params
 * carry a valid _meta.progressToken. Returns NULL with *started, or the
 * error reply (out of memory).
 */
cJSON *gw__mcp_server_forward(struct gw_mcp_exchange *ex,
                              const struct gw_rpc *rpc, struct gw_device *dev,
                              const char *method, cJSON *params,
                              uint32_t timeout_ms, gw__mcp_shape_cb shape,
                              bool *started);

/* ---- mcp_server_streams.c ---- */

/* Answers req with msg as JSON (not moved; NULL = no body) and, when cl
 * is given, its Mcp-Session-Id header. */
void gw__mcp_server_respond(struct gw_http_req *req,
                            const struct gw_mcp_client *cl, int status,
                            const cJSON *msg);
/*
 * A refusal: logged once as a warning under subject, counted, answered
 * with status and a JSON-RPC error without id (code, message).
 */
void gw__mcp_server_reject(struct gw_mcp_server *srv, struct gw_http_req *req,
                           const char *subject, const struct gw_mcp_client *cl,
                           int status, int code, const char *message);
/* msg (not moved) as one server-sent event on req. */
void gw__mcp_server_event_write(struct gw_http_req *req, const cJSON *msg);

/* Begins a GET stream on req; on failure req has been answered. */
void gw__mcp_server_stream_open(struct gw_mcp_client *cl,
                                struct gw_http_req *req);
/* msg (not moved) on the session's newest GET stream; false when it has
 * none (the message is dropped). */
bool gw__mcp_server_notify(struct gw_mcp_client *cl, const cJSON *msg);
/* A keepalive comment on each stream of cl silent since now - ms. */
void gw__mcp_server_streams_keepalive(struct gw_mcp_client *cl, uint64_t now,
                                      uint64_t ms);
/* The session ends: each of its streams is ended and freed. */
void gw__mcp_server_streams_end(struct gw_mcp_client *cl);

#endif /* GW_MCP_SERVER_INT_H */
