/*
 * Where /metrics reads the instance's figures, given by the instance with
 * the API's environment; metrics.c formats them (Prometheus text format
 * 0.0.4, every name prefixed hybridgw_).
 */
#ifndef GW_METRICS_H
#define GW_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "common/error.h"
#include "common/mqtt_link.h"
#include "gateway/audio/udp_audio.h"
#include "gateway/backend/backend_ws.h"
#include "gateway/cluster/cluster.h"
#include "gateway/cluster/cluster_rpc.h"
#include "gateway/core/counters.h"
#include "gateway/device/device_table.h"
#include "gateway/http/http_server.h"
#include "gateway/session/device_call.h"
#include "gateway/session/session.h"

struct gw_mcp_server;
struct gw_mcp_outbound;
struct gw_ota_stats;
struct gw_push_stats;

/* Where the figures come from; any pointer may be NULL but the first
 * four. */
struct gw_metrics_sources {
    uv_loop_t *loop;
    const struct gw_counters *counters;
    const struct gw_sessions *sessions;
    const struct gw_device_table *devices;
    uint64_t started_ms;                 /* loop time at start, for uptime */
    const struct gw_device_calls *calls; /* device-to-device calls */
    struct gw_mqtt_link *mqtt;
    struct gw_udp_audio *udp;
    struct gw_backend_ws *bws;
    const struct gw_mcp_server *mcp_server;
    const struct gw_mcp_outbound *outbound; /* devices to MCP servers */
    /* Responses sent with an HTTP status, when the API runs. */
    uint64_t (*http_responses)(const void *arg, int status);
    /* Its connections and buffered bodies, when the API runs. */
    void (*http_server_stats)(const void *arg,
                              struct gw_http_server_stats *out);
    const void *http_arg;
    /* POST /xiaozhi/ota/ outcomes, when the API runs (gateway/api/ota.h). */
    const struct gw_ota_stats *ota;
    /* Pushes to devices, when the API runs (gateway/api/push_stats.h). */
    const struct gw_push_stats *push;
    /* The instance's cluster part (NULL once it closed). */
    struct gw_cluster *const *cluster;
    /* What instances carry for each other (NULL outside mode hash). */
    struct gw_cluster_rpc *const *crpc;
};

#endif /* GW_METRICS_H */
