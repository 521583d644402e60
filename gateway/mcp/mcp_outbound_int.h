/*
 * Internals of the outbound MCP client (mcp_outbound.h), shared by its
 * files, each calling only the ones below it: mcp_outbound.c (entry
 * points, life), mcp_outbound_device.c (a device's requests and
 * notifications), mcp_outbound_session.c (sessions and their calls),
 * mcp_outbound_http.c (transfers, answers as JSON or an event stream),
 * mcp_outbound_reply.c (messages to the device) and
 * mcp_outbound_servers.c (which servers a device may use, their
 * counters).
 */
#ifndef GW_MCP_OUTBOUND_INT_H
#define GW_MCP_OUTBOUND_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "codec/client_id.h"
#include "codec/jsonrpc.h"
#include "codec/sse.h"
#include "common/hash.h"
#include "common/list.h"
#include "common/log.h"
#include "common/ratelimit.h"
#include "gateway/http/http_client.h"
#include "gateway/mcp/mcp_outbound.h"

#define NAME_MAX_LEN 64
#define KEY_MAX      (GW_CLIENT_ID_MAX + 1 + NAME_MAX_LEN + 1)
#define SID_MAX      256
#define VERSION_MAX  31

enum session_state { SS_IDLE, SS_INITIALIZING, SS_READY };
enum call_kind { CALL_FORWARD, CALL_INITIALIZE };
enum xfer_kind { X_INIT, X_CALL, X_NOTIFY, X_DELETE };

struct stats_rec {
    UT_hash_handle hh; /* by st.name */
    struct gw_outbound_server_stats st;
};

struct ob_session;
struct ob_call;
struct ob_xfer;

/* Why a transfer of an initialize or a call ended without its answer. */
struct ob_xfer_end {
    enum gw_outbound_failure fail;
    const char *text;
    bool timeout;      /* the transfer timed out (nothing failed before) */
    bool session_gone; /* HTTP 404 to a request that named a session */
};

/* What the owner of a transfer (an initialize or a call) hears of it. */
struct ob_xfer_ops {
    /* The response to want_id (msg not moved). */
    void (*on_answer)(struct ob_xfer *x, const cJSON *msg,
                      const struct gw_rpc *rpc);
    /* A notification or request of the server before the answer. */
    void (*on_message)(struct ob_xfer *x, const cJSON *msg);
    /* The transfer ended without an answer; it is freed after this. */
    void (*on_failed)(struct ob_xfer *x, const struct ob_xfer_end *end);
};

struct ob_xfer {
    struct gw_list node; /* in ob->posts (notify, delete) */
    struct gw_mcp_outbound *ob;
    char client_id[GW_CLIENT_ID_MAX + 1]; /* whose session it is of */
    struct gw_http_req *req;
    enum xfer_kind kind;
    struct ob_session *s;          /* X_INIT: the session, NULL once let go */
    struct ob_call *call;          /* X_CALL: the call, NULL once let go */
    const struct ob_xfer_ops *ops; /* its owner's; NULL: nothing is read */
    uint32_t want_id;              /* the answer that ends it */
    char server[NAME_MAX_LEN + 1];
    bool sse;
    bool in_cb;     /* inside a callback of its transfer */
    bool abandoned; /* let go of inside a callback */
    bool answered;
    bool counted;     /* in its server's connections */
    bool from_device; /* a device's notification (its pending count) */
    char *sid;        /* Mcp-Session-Id of the response */
    char *sent_sid;   /* the one the request carried, or NULL */
    char *body;
    size_t body_len, body_cap;
    size_t total; /* bytes of the response body */
    bool sse_ready;
    struct gw_sse_parser parser;
    bool failed; /* fail/reason set while reading */
    enum gw_outbound_failure fail;
    char reason[160];
};

struct ob_call {
    struct gw_list node; /* in its session's waiting or sent */
    struct gw_mcp_outbound *ob;
    struct ob_session *s; /* NULL once ended */
    enum call_kind kind;
    cJSON *dev_id; /* the device's id, as it wrote it */
    cJSON *msg;    /* the device's request */
    char method[48];
    uint32_t gw_id; /* toward the server, once sent */
    struct ob_xfer *x;
    uv_timer_t timer;
    bool retried; /* re-sent after a new session */
    bool sent;
};

struct ob_session {
    UT_hash_handle hh; /* in ob->sessions by key */
    char key[KEY_MAX];
    struct gw_mcp_outbound *ob;
    char client_id[GW_CLIENT_ID_MAX + 1];
    char server[NAME_MAX_LEN + 1];
    enum session_state state;
    char *sid;
    char version[VERSION_MAX + 1];
    cJSON *init_result;
    struct ob_xfer *init;
    struct gw_list waiting;
    struct gw_list sent;
    unsigned n_calls;
    uint32_t next_id;
    uv_timer_t idle;
    bool ended;
};

struct gw_mcp_outbound {
    uv_loop_t *loop;
    const struct gw_config_live *config;
    struct gw_publisher *pub;
    struct gw_device_table *devices;
    struct gw_binding_store *bindings; /* NULL: client ids are identities */
    struct gw_http_client *http;
    struct ob_session *sessions;
    size_t n_sessions;
    struct stats_rec *stats;
    struct gw_list posts;
    struct gw_ratelimit log_limit;
    uint64_t refused; /* envelopes refused unanswered */
    int handles;      /* timers still to close */
    bool http_open;
    bool closing;
    void (*close_cb)(struct gw_mcp_outbound *ob, void *arg);
    void *close_arg;
};

/* ---- mcp_outbound_device.c ---- */

/* A device's request for the server endpoint (the payload, not moved). */
void gw__mcp_outbound_request(struct gw_mcp_outbound *ob, const char *client_id,
                              const char *endpoint, const cJSON *payload,
                              const struct gw_rpc *rpc);
/* A device's notification for the server endpoint. */
void gw__mcp_outbound_notification(struct gw_mcp_outbound *ob,
                                   const char *client_id, const char *endpoint,
                                   const cJSON *payload,
                                   const struct gw_rpc *rpc);

/* ---- mcp_outbound_session.c ---- */

struct ob_session *gw__mcp_outbound_session_find(struct gw_mcp_outbound *ob,
                                                 const char *client_id,
                                                 const char *server);
/* The session of (client_id, server), made when there is none (idle, not
 * initialized); NULL on OOM. */
struct ob_session *gw__mcp_outbound_session_get(struct gw_mcp_outbound *ob,
                                                const char *client_id,
                                                const char *server);
/* Sends initialize; the waiting calls go once it is answered. */
void gw__mcp_outbound_session_init_start(struct ob_session *s);
/* Sends the waiting calls (the session is ready). */
void gw__mcp_outbound_session_flush(struct ob_session *s);
/* Starts the idle timer (no call is waiting). */
void gw__mcp_outbound_session_idle_start(struct ob_session *s);
/*
 * Ends s. Its calls end with outcome (answered with code/message unless
 * code is 0); with delete, the server hears the session end.
 */
void gw__mcp_outbound_session_end(struct ob_session *s,
                                  enum gw_outbound_outcome outcome, int code,
                                  const char *message, bool delete);
/* Ends c: out of its session, its transfer let go, its memory freed. The
 * outcome is counted here; the device was answered by the caller. */
void gw__mcp_outbound_call_end(struct ob_call *c,
                               enum gw_outbound_outcome outcome);
/* Answers c with an error and ends it. */
void gw__mcp_outbound_call_fail(struct ob_call *c,
                                enum gw_outbound_outcome outcome, int code,
                                const char *message);
/* A cancellation toward the server for a request it has (fire and
 * forget). */
void gw__mcp_outbound_send_cancelled(struct ob_session *s, uint32_t gw_id,
                                     const char *reason);
/* A handle closed (or the HTTP client): once all have, the close
 * callback runs and ob is freed. */
void gw__mcp_outbound_maybe_done(struct gw_mcp_outbound *ob);

/* ---- mcp_outbound_http.c ---- */

/*
 * Starts one request of session s (or of a session that is ending:
 * notifications and DELETE, fire and forget; ops NULL). want_id: the
 * answer that ends it. *out (when out is not NULL) is the transfer.
 * GW_ELIMIT when the server has ms->max_connections transfers open (a
 * notification or DELETE is then counted dropped and logged here),
 * GW_ENOMEM.
 */
int gw__mcp_outbound_xfer_start(struct gw_mcp_outbound *ob,
                                const struct gw_mcp_server_config *ms,
                                struct ob_session *s, enum xfer_kind kind,
                                const cJSON *msg, uint32_t want_id,
                                const struct ob_xfer_ops *ops,
                                struct ob_xfer **out);
/* The notifications client_id sent that are on their way. */
unsigned gw__mcp_outbound_posts_of(const struct gw_mcp_outbound *ob,
                                   const char *client_id);
/* The owner no longer wants x: its transfer ends now, or as soon as its
 * callback returns. */
void gw__mcp_outbound_xfer_abandon(struct ob_xfer *x);

/* ---- mcp_outbound_reply.c ---- */

/* A log line about client_id's requests, rate-limited per device at
 * info and below. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
void gw__mcp_outbound_log(struct gw_mcp_outbound *ob, enum gw_log_level level,
                          const char *client_id, const char *fmt, ...);
/* payload to the device under endpoint; GW_ETOOBIG with *len_out set
 * when the message would be too large. */
int gw__mcp_outbound_publish(struct gw_mcp_outbound *ob, const char *client_id,
                             const char *endpoint, const cJSON *payload,
                             size_t *len_out);
/* A JSON-RPC error to the device under endpoint. */
void gw__mcp_outbound_reply_error(struct gw_mcp_outbound *ob,
                                  const char *client_id, const char *endpoint,
                                  const cJSON *id, int code,
                                  const char *message);
/* A message for the device under its own id; too large: -32602 and
 * GW_OUTBOUND_TOO_LARGE, else outcome. */
enum gw_outbound_outcome gw__mcp_outbound_reply_message(
    struct gw_mcp_outbound *ob, const char *client_id, const char *endpoint,
    cJSON *msg, const cJSON *dev_id, enum gw_outbound_outcome outcome);

/* ---- mcp_outbound_servers.c ---- */

const struct gw_config *
gw__mcp_outbound_config(const struct gw_mcp_outbound *ob);
/* The server named so that this device may use (its allow rules matched
 * against the device's binding when bindings are kept), or NULL (both
 * cases look the same to the device). */
const struct gw_mcp_server_config *
gw__mcp_outbound_server(struct gw_mcp_outbound *ob, const char *name,
                        const char *client_id);
/* The counters of server (a spare set when out of memory). */
struct gw_outbound_server_stats *
gw__mcp_outbound_stats(struct gw_mcp_outbound *ob, const char *server);

#endif /* GW_MCP_OUTBOUND_INT_H */
