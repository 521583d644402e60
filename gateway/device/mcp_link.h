/*
 * A device's MCP link (docs/protocol.md section 7): the one JSON-RPC
 * channel to the device's MCP server that the gateway's discovery, the
 * backend relay, the HTTP API and MCP clients share. Each request gets a
 * fresh numeric id and a timer; the device's answer, the timer, the
 * device leaving or shutdown ends it exactly once, toward its origin.
 * tools/call requests reach the device one at a time, in order.
 */
#ifndef GW_MCP_LINK_H
#define GW_MCP_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "codec/client_id.h"
#include "codec/jsonrpc.h"
#include "common/error.h"
#include "common/hash.h"
#include "common/list.h"
#include "gateway/core/config_hold.h"
#include "gateway/device/publish.h"

/* Who asked: the counters and the log say it. */
#define GW_MCP_ORIGIN_MAP(XX)                                                  \
    XX(GATEWAY, "gateway") /* discovery */                                     \
    XX(BACKEND, "backend") /* the session's backend */                         \
    XX(API, "api")         /* the management API (manager-api) */              \
    XX(CLIENT, "client")   /* an MCP client of the gateway's MCP server */

enum gw_mcp_origin {
#define XX(name, _) GW_MCP_FROM_##name,
    GW_MCP_ORIGIN_MAP(XX)
#undef XX
        GW_MCP_ORIGIN_COUNT_
};

/* How a request ended. */
#define GW_MCP_OUTCOME_MAP(XX)                                                 \
    XX(OK, "ok")               /* the device answered with a result */         \
    XX(ERROR, "error")         /* the device answered with an error */         \
    XX(TIMEOUT, "timeout")     /* -32001 */                                    \
    XX(OFFLINE, "offline")     /* -32002: the device went (or was) offline */  \
    XX(BUSY, "busy")           /* -32003: too many requests already wait */    \
    XX(CANCELLED, "cancelled") /* -32004: shutdown */                          \
    XX(REFUSED, "refused")     /* the gateway refused it (tool not allowed) */

enum gw_mcp_outcome {
#define XX(name, _) GW_MCP_##name,
    GW_MCP_OUTCOME_MAP(XX)
#undef XX
        GW_MCP_OUTCOME_COUNT_
};

const char *gw_mcp_origin_name(enum gw_mcp_origin origin);
const char *gw_mcp_outcome_name(enum gw_mcp_outcome outcome);

/* Upper bounds (ms) of the latency histogram's buckets; +Inf follows. */
#define GW_MCP_LATENCY_BOUNDS                                                  \
    {                                                                          \
        5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000           \
    }
#define GW_MCP_LATENCY_BUCKETS 12

struct gw_mcp_stats {
    uint64_t requests[GW_MCP_ORIGIN_COUNT_][GW_MCP_OUTCOME_COUNT_];
    uint64_t latency_le[GW_MCP_LATENCY_BUCKETS + 1]; /* non-cumulative */
    uint64_t latency_sum_ms;
    uint64_t latency_count;
    uint64_t unsolicited;       /* device responses nobody waited for */
    uint64_t refused;           /* device MCP messages that do not parse */
    uint64_t discoveries;       /* completed tool discoveries */
    uint64_t discovery_retries; /* failed discoveries run again later */
    uint64_t list_changed;      /* tools/list_changed notifications seen */
    uint64_t label_clashes; /* records left without a label: one was taken */
};

/* One request's end, given to its origin exactly once. */
struct gw_mcp_reply {
    enum gw_mcp_outcome outcome;
    const cJSON *result; /* GW_MCP_OK: the device's result */
    const cJSON *error;  /* otherwise: a valid {code,message} object */
};

typedef void (*gw_mcp_reply_cb)(void *arg, const struct gw_mcp_reply *reply);

struct gw_mcp_request; /* mcp_link.c's own */

/*
 * Several instances (docs/architecture.md section 9): a device's MCP
 * client is its owner's. A request for a device another instance owns is
 * carried there (gateway/cluster/cluster_rpc.c) under an id of this link's, and
 * its end comes back through gw_mcp_link_on_remote_reply.
 */
struct gw_mcp_remote {
    /* The owner of client_id's MCP client, or NULL when it is this one. */
    const char *(*owner)(void *arg, const char *client_id);
    /* Carries a request to owner: 0, or an error when it cannot go (the
     * request then ends as if lost, at its timer). params not moved. */
    int (*send)(void *arg, const char *owner, const char *client_id,
                uint32_t id, const char *method, const cJSON *params,
                uint32_t timeout_ms, enum gw_mcp_origin origin, bool progress);
    /* The asker gave up on a carried request. */
    void (*cancel)(void *arg, const char *owner, const char *client_id,
                   uint32_t id);
    void *arg;
};

/* A carried request waits this much longer than the owner does, so the
 * owner's own answer (a timeout too) comes first when it lives. */
#define GW_MCP_REMOTE_SLACK_MS 1000

/* What every link shares: the loop, the way to the devices, the limits
 * from the running config, the counters, and every request by handle. */
struct gw_mcp_links {
    uv_loop_t *loop;
    struct gw_publisher *pub;
    const struct gw_config_live *config;
    struct gw_mcp_request *by_handle; /* uthash: every live request */
    uint64_t next_handle;
    bool closed; /* shutdown: every new request is refused */
    const struct gw_mcp_remote *remote; /* NULL: every device is ours */
    struct gw_mcp_stats stats;
};

/* One device's link; lives inside the device's record. */
struct gw_mcp_link {
    struct gw_mcp_links *links;
    const char *client_id;          /* the record's, outlives the link */
    const char *session_id;         /* of the live session, or "" */
    bool open;                      /* false once the device left: refuse all */
    uint32_t next_id;               /* the last id given toward the device */
    struct gw_mcp_request *pending; /* uthash by device-side id */
    size_t n_pending;
    struct gw_list calls;                  /* queued tools/call requests */
    struct gw_mcp_request *call_in_flight; /* at most one */
    struct gw_mcp_request *carried;        /* uthash by id: at the owner */
    size_t n_carried;
};

/* Who carries requests for devices other instances own
 * (gateway/cluster/cluster_rpc.c); NULL: every device is ours. */
void gw_mcp_links_set_remote(struct gw_mcp_links *links,
                             const struct gw_mcp_remote *remote);
/* remote stops carrying, unless another has taken its place since. */
void gw_mcp_links_unset_remote(struct gw_mcp_links *links,
                               const struct gw_mcp_remote *remote);

/*
 * Sends method/params (params moved; NULL for none) to the device on
 * link (NULL: the device is not known, the request ends GW_MCP_OFFLINE).
 * cb runs exactly once, never from inside this call: with the device's
 * result or normalised error, or -32001 after timeout_ms (0 =
 * mcp.call_timeout_ms; notifications/cancelled then goes to the device),
 * -32002 if the device is or goes offline, -32003 if more than
 * mcp.max_pending requests wait, -32004 on shutdown. *handle (may be
 * NULL) names the request for gw_mcp_abandon.
 */
void gw_mcp_request(struct gw_mcp_links *links, struct gw_mcp_link *link,
                    const char *method, cJSON *params, uint32_t timeout_ms,
                    enum gw_mcp_origin origin, gw_mcp_reply_cb cb, void *arg,
                    uint64_t *handle);

/* Progress of a request (a notifications/progress params object with the
 * origin's own progressToken), not moved. */
typedef void (*gw_mcp_progress_cb)(void *arg, const cJSON *params);

/* Extras of a request; a zeroed struct gives gw_mcp_request's behaviour. */
struct gw_mcp_opts {
    uint32_t timeout_ms; /* 0 = mcp.call_timeout_ms */
    /*
     * When params carry _meta.progressToken: with on_progress, the device
     * gets the request's own id as token and its notifications/progress
     * reach on_progress (arg is the request's) under the origin's token;
     * without, the token is taken out (nobody would hear the progress).
     */
    gw_mcp_progress_cb on_progress;
    /*
     * Runs exactly once when the request ends, however it ends, even
     * abandoned (the origin's cb then does not run), just before cb:
     * for what the gateway itself must undo or free.
     */
    void (*on_end)(void *end_arg, enum gw_mcp_outcome outcome);
    void *end_arg;
    /* Carried here from another instance: sent to the device from here
     * whoever owns it now, never carried on. */
    bool here;
};

/* gw_mcp_request with opts (may be NULL). */
void gw_mcp_request_with(struct gw_mcp_links *links, struct gw_mcp_link *link,
                         const char *method, cJSON *params,
                         const struct gw_mcp_opts *opts,
                         enum gw_mcp_origin origin, gw_mcp_reply_cb cb,
                         void *arg, uint64_t *handle);

/*
 * Ends a request now with a result of the caller's (moved; NULL = {}),
 * from the loop, without asking the device: for what the gateway answers
 * itself (a subscription the device already holds). Outcome GW_MCP_OK.
 */
void gw_mcp_answer(struct gw_mcp_links *links, enum gw_mcp_origin origin,
                   cJSON *result, gw_mcp_reply_cb cb, void *arg,
                   uint64_t *handle);

/*
 * Ends a request now with a gateway error of the caller's (code, message),
 * from the loop, without sending anything: for refusals decided before a
 * device is asked (a tool the caller may not call). Outcome
 * GW_MCP_REFUSED.
 */
void gw_mcp_refuse(struct gw_mcp_links *links, enum gw_mcp_origin origin,
                   int code, const char *message, gw_mcp_reply_cb cb, void *arg,
                   uint64_t *handle);

/* The origin is gone: cb will not run; the device's answer is dropped,
 * and a request the device already has is cancelled toward it. */
void gw_mcp_abandon(struct gw_mcp_links *links, uint64_t handle);

/*
 * The end of a carried request (id: this link's), as its owner said:
 * outcome and result or error (not moved). Dropped and counted when
 * nobody waits.
 */
void gw_mcp_link_on_remote_reply(struct gw_mcp_link *link, uint32_t id,
                                 enum gw_mcp_outcome outcome,
                                 const cJSON *result, const cJSON *error);

/* Progress of a carried request, as its owner passed it on (params with
 * the id as token; not moved). */
void gw_mcp_link_on_remote_progress(struct gw_mcp_link *link, uint32_t id,
                                    const cJSON *params);

/* An outcome's name back to the outcome; false when unknown. */
bool gw_mcp_outcome_parse(const char *name, enum gw_mcp_outcome *out);
bool gw_mcp_origin_parse(const char *name, enum gw_mcp_origin *out);

/*
 * Answers a request the device sent (id: the device's, copied): result
 * or error (moved; exactly one non-NULL; error a {code,message} object).
 */
int gw_mcp_link_respond(struct gw_mcp_link *link, const cJSON *id,
                        cJSON *result, cJSON *error);

/* Answers a request the device sent with the gateway's own error. */
int gw_mcp_link_respond_error(struct gw_mcp_link *link, const cJSON *id,
                              int code, const char *message);

#endif /* GW_MCP_LINK_H */
