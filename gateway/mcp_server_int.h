/*
 * Internals of the MCP server shared by mcp_server.c (HTTP requests and
 * the JSON-RPC methods) and mcp_server_clients.c (clients, their GET streams,
 * their waiting tool calls, the idle and keepalive timer).
 */
#ifndef GW_MCP_SERVER_INT_H
#define GW_MCP_SERVER_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include "common/hash.h"
#include <uv.h>

#include "codec/client_id.h"
#include "codec/jsonrpc.h"
#include "gateway/mcp_server.h"

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
    struct gw_mcp_stream *prev, *next; /* in the client's list, newest first */
    struct gw_mcp_client *cl;
    struct gw_http_req *req;
    uint64_t last_write_ms; /* for the keepalive comment */
};

/* One POST whose answer waits for tool calls (or is being built). */
struct gw_mcp_exchange {
    struct gw_mcp_client *cl;
    struct gw_http_req *req;
    cJSON *replies;   /* the responses gathered so far (an array) */
    bool batch;       /* answer with the array, else with its one item */
    bool dispatching; /* messages still being read: do not answer yet */
    unsigned waiting; /* calls not yet ended */
};

/* One tools/call sent to a device for a client. */
struct gw_mcp_call {
    struct gw_mcp_call *prev, *next; /* in the client's list */
    struct gw_mcp_client *cl;
    struct gw_mcp_exchange *ex; /* NULL once the client went away */
    cJSON *id;                  /* the client's JSON-RPC id (a copy) */
    uint64_t handle;
    char client_id[GW_CLIENT_ID_MAX + 1];
};

struct gw_mcp_client {
    UT_hash_handle hh; /* in the server's table, by id */
    struct gw_mcp_server *srv;
    char id[GW_MCP_SESSION_ID_LEN + 1];
    char subject[32];                     /* "mcp sid=<8 hex>" for the log */
    char client_id[GW_CLIENT_ID_MAX + 1]; /* "" for the aggregated /mcp */
    char version[16];                     /* negotiated protocol revision */
    uint64_t last_used_ms;
    struct gw_mcp_stream *streams;
    struct gw_mcp_call *calls;
    size_t n_streams, n_calls;
};

struct gw_mcp_server {
    struct gw_mcp_server_env env;
    void (*close_cb)(struct gw_mcp_server *srv, void *arg);
    void *close_arg;
    struct gw_mcp_client *clients; /* uthash by id */
    size_t n_clients;
    uv_timer_t timer; /* idle expiry and keepalives; frees srv on close */
    struct gw_mcp_server_stats stats;
};

/* ---- mcp_server_clients.c ---- */

/* Starts the sweep timer; on failure srv is freed (now or on close). */
GW_MUST_CHECK int gw_mcp_clients_start(struct gw_mcp_server *srv);
/* Ends every client, then closes the timer, whose callback frees srv. */
void gw_mcp_clients_stop(struct gw_mcp_server *srv);

/* A new client bound to client_id ("" = aggregated); GW_ELIMIT (counted)
 * when mcp.max_sessions are open: no session is evicted for it. */
GW_MUST_CHECK int gw_mcp_client_create(struct gw_mcp_server *srv,
                                       const char *client_id,
                                       const char *version,
                                       struct gw_mcp_client **out);
struct gw_mcp_client *gw_mcp_client_find(struct gw_mcp_server *srv,
                                         const char *id);
void gw_mcp_client_touch(struct gw_mcp_client *cl);
/* Streams end, waiting calls are answered -32004, the id is forgotten. */
void gw_mcp_client_end(struct gw_mcp_client *cl, const char *why);

/* Begins a GET stream on req; on failure req has been answered. */
void gw_mcp_stream_open(struct gw_mcp_client *cl, struct gw_http_req *req);
/* notifications/tools/list_changed to the clients that see dev. */
void gw_mcp_clients_tools_changed(struct gw_mcp_server *srv,
                                  const char *client_id);

/* An exchange for a POST of cl (NULL on OOM). */
struct gw_mcp_exchange *gw_mcp_exchange_create(struct gw_mcp_client *cl,
                                               struct gw_http_req *req,
                                               bool batch);
/* Adds one response (moved; NULL = out of memory, becomes -32603). */
void gw_mcp_exchange_put(struct gw_mcp_exchange *ex, cJSON *reply);
/* Every message was read: answers now, or when the last call ends. */
void gw_mcp_exchange_dispatched(struct gw_mcp_exchange *ex);

/* A call of ex (id copied) before it is sent; NULL on OOM. */
struct gw_mcp_call *gw_mcp_call_add(struct gw_mcp_exchange *ex, const cJSON *id,
                                    const char *client_id);
/* Ends a call with reply (moved) and frees it. */
void gw_mcp_call_finish(struct gw_mcp_call *call, cJSON *reply);
/* notifications/cancelled: true if request_id named a waiting call. */
bool gw_mcp_call_cancel(struct gw_mcp_client *cl, const cJSON *request_id);

/* ---- mcp_server_tools.c ---- */

/* The reply to tools/list (NULL on OOM). */
cJSON *gw_mcp_server_tools_list(struct gw_mcp_client *cl,
                                const struct gw_rpc *rpc);
/* The reply to tools/call now, or NULL with *started when the call went
 * to the device and its reply comes through ex later. */
cJSON *gw_mcp_server_tools_call(struct gw_mcp_exchange *ex,
                                const struct gw_rpc *rpc, bool *started);

/* ---- shared answers (mcp_server_clients.c) ---- */

/* Answers req with msg as JSON (not moved; NULL = no body) and, when cl
 * is given, its Mcp-Session-Id header. */
void gw_mcp_respond(struct gw_http_req *req, const struct gw_mcp_client *cl,
                    int status, const cJSON *msg);
/*
 * A refusal: logged once as a warning under subject, counted, answered
 * with status and a JSON-RPC error without id (code, message).
 */
void gw_mcp_reject(struct gw_mcp_server *srv, struct gw_http_req *req,
                   const char *subject, const struct gw_mcp_client *cl,
                   int status, int code, const char *message);

#endif /* GW_MCP_SERVER_INT_H */
