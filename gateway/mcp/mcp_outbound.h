/*
 * Devices as clients of the MCP servers named in mcp_servers
 * (docs/protocol.md section 7, outbound addressing): a device's mcp
 * message with an "endpoint" goes to that server over MCP's Streamable
 * HTTP transport. One MCP session per (device, server), opened on first
 * use and ended (DELETE) when idle; ids multiplexed; answers and the
 * server's notifications go back to the device under the same endpoint.
 */
#ifndef GW_MCP_OUTBOUND_H
#define GW_MCP_OUTBOUND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "codec/envelope.h"
#include "common/error.h"
#include "gateway/binding/binding.h"
#include "gateway/core/config_hold.h"
#include "gateway/device/device_table.h"
#include "gateway/device/publish.h"

/* How a device's request to an MCP server ended. */
#define GW_OUTBOUND_OUTCOME_MAP(XX)                                            \
    XX(OK, "ok")               /* a result */                                  \
    XX(ERROR, "error")         /* the server's JSON-RPC error */               \
    XX(TIMEOUT, "timeout")     /* no answer within timeout_ms (-32001) */      \
    XX(FAILED, "failed")       /* connect, TLS, HTTP, body (-32008) */         \
    XX(NO_SERVER, "no_server") /* unknown or not allowed (-32007) */           \
    XX(BUSY, "busy") /* over outbound_max_pending, max_connections (-32003) */ \
    XX(INVALID, "invalid")     /* its id is already waiting (-32600) */        \
    XX(TOO_LARGE, "too_large") /* over what the device reads (-32602) */       \
    XX(CANCELLED, "cancelled") /* the device withdrew it */                    \
    XX(SHUTDOWN, "shutdown")   /* the gateway stopped (-32004) */              \
    XX(LOCAL, "local")         /* answered by the gateway: ping, initialize */

enum gw_outbound_outcome {
#define XX(name, _) GW_OUTBOUND_##name,
    GW_OUTBOUND_OUTCOME_MAP(XX)
#undef XX
        GW_OUTBOUND_OUTCOME_COUNT_
};

/* Why a server failed (the -32008 reasons). */
#define GW_OUTBOUND_FAILURE_MAP(XX)                                            \
    XX(CONNECT, "connect")   /* name, refused, unreachable */                  \
    XX(TLS, "tls")           /* handshake, certificate */                      \
    XX(HTTP, "http_status")  /* a status other than 200 / 202 */               \
    XX(BODY, "bad_body")     /* not JSON-RPC, wrong type, cut off */           \
    XX(TOO_BIG, "too_big")   /* over outbound_max_response_bytes */            \
    XX(TRANSFER, "transfer") /* the connection broke */                        \
    XX(SESSION, "session")   /* the session was lost again after re-init */    \
    XX(VERSION, "protocol_version") /* initialize: not a version known */

enum gw_outbound_failure {
#define XX(name, _) GW_OUTBOUND_FAIL_##name,
    GW_OUTBOUND_FAILURE_MAP(XX)
#undef XX
        GW_OUTBOUND_FAILURE_COUNT_
};

const char *gw_outbound_outcome_name(enum gw_outbound_outcome o);
const char *gw_outbound_failure_name(enum gw_outbound_failure f);

/* Counters of one server, by its configured name. */
struct gw_outbound_server_stats {
    char name[65];
    uint64_t requests[GW_OUTBOUND_OUTCOME_COUNT_];
    uint64_t failures[GW_OUTBOUND_FAILURE_COUNT_];
    uint64_t initializes;    /* initialize requests sent */
    uint64_t reinitializes;  /* after a 404 on a session */
    uint64_t notifications;  /* server notifications to devices */
    uint64_t sessions_ended; /* DELETEd idle, device gone, ... */
    /* Notifications and DELETEs not sent: over the device's
     * outbound_max_pending or the server's max_connections. */
    uint64_t dropped;
    uint64_t connections; /* transfers open now (not a counter) */
};

struct gw_mcp_outbound;

struct gw_mcp_outbound_env {
    uv_loop_t *loop;
    const struct gw_config_live *config;
    struct gw_publisher *pub;
    struct gw_device_table *devices; /* for each device's live session id */
    /* NULL unless OTA activation is on: allow rules match bindings. */
    struct gw_binding_store *bindings;
};

GW_MUST_CHECK int gw_mcp_outbound_init(const struct gw_mcp_outbound_env *env,
                                       struct gw_mcp_outbound **out);

/*
 * An mcp envelope from client_id. Returns false when it has no
 * "endpoint" member (it is for the device's own link); true when it was
 * taken here (answered, forwarded or refused and logged).
 */
bool gw_mcp_outbound_on_device(struct gw_mcp_outbound *ob,
                               const char *client_id,
                               const struct gw_envelope *env);

/* The device went offline: its sessions end, its requests are dropped. */
void gw_mcp_outbound_device_gone(struct gw_mcp_outbound *ob,
                                 const char *client_id);

/* Sessions open now. */
size_t gw_mcp_outbound_sessions(const struct gw_mcp_outbound *ob);

/* Envelopes with an endpoint refused unanswered: endpoint not a non-empty
 * string, payload not JSON-RPC, a response nobody asked for. */
uint64_t gw_mcp_outbound_refused(const struct gw_mcp_outbound *ob);

/* Per-server counters: calls cb once per server ever used. */
void gw_mcp_outbound_each_stats(
    const struct gw_mcp_outbound *ob,
    void (*cb)(void *arg, const struct gw_outbound_server_stats *st),
    void *arg);

/*
 * Shutdown: every waiting request gets -32004, every transfer ends (no
 * DELETE: nothing waits for it); cb runs once everything is closed and
 * ob is freed after it.
 */
void gw_mcp_outbound_close(struct gw_mcp_outbound *ob,
                           void (*cb)(struct gw_mcp_outbound *ob, void *arg),
                           void *arg);

#endif /* GW_MCP_OUTBOUND_H */
