/*
 * One gateway instance: one libuv loop and the parts it wires together
 * (docs/architecture.md section 1). Everything runs on the loop's thread.
 * Only main.c and tests include this header: modules get a narrow
 * environment of their own at init instead.
 */
#ifndef GW_INSTANCE_H
#define GW_INSTANCE_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "common/error.h"
#include "common/mqtt_link.h"
#include "config/config.h"
#include "gateway/api/http_api.h"
#include "gateway/audio/udp_audio.h"
#include "gateway/backend/backend_ws.h"
#include "gateway/binding/binding.h"
#include "gateway/cluster/cluster.h"
#include "gateway/cluster/cluster_rpc.h"
#include "gateway/core/config_hold.h"
#include "gateway/core/counters.h"
#include "gateway/device/device_table.h"
#include "gateway/device/publish.h"
#include "gateway/mcp/mcp_outbound.h"
#include "gateway/mcp/mcp_server.h"
#include "gateway/mqtt_dispatch.h"
#include "gateway/session/device_call.h"
#include "gateway/session/drain.h"
#include "gateway/session/session.h"

struct gw_instance {
    uv_loop_t *loop;
    struct gw_config_live config; /* the running config */
    struct gw_counters counters;
    struct gw_publisher pub;
    struct gw_mqtt_link *mqtt;
    struct gw_cluster *cluster;  /* membership, owners (cluster.mode) */
    struct gw_cluster_rpc *crpc; /* what instances carry (mode hash) */
    char up_sub[320]; /* mode shared: $share/<group>/<mqtt.up_topic> */
    bool refused;     /* the cluster name is another live instance's: exit 1 */
    void (*refused_cb)(struct gw_instance *inst, void *arg);
    void *refused_arg;
    struct gw_udp_audio *udp;
    struct gw_backend_ws *bws;
    struct gw_backend_probe *probe; /* health.probe_interval_s */
    struct gw_device_table devices; /* one record per device */
    struct gw_sessions sessions;
    struct gw_device_calls calls; /* between two devices' sessions */
    struct gw_mqtt_dispatch dispatch;
    struct gw_mcp_server *mcp_server; /* NULL when http.port is 0 */
    struct gw_mcp_outbound *outbound; /* devices to MCP servers */
    struct gw_http_api *api;          /* NULL when http.port is 0 */
    /* NULL unless ota.enabled with activation (docs/protocol.md 9.3). */
    struct gw_binding_store *bindings;
    uint64_t started_ms;    /* loop time at init, for uptime */
    uv_timer_t drain_timer; /* bounds the shutdown drain */
    struct gw_drain drain;  /* rolling restart: SIGUSR2, API */
    bool stopping;
    int parts_open; /* parts still closing */
    void (*stop_cb)(struct gw_instance *inst, void *arg);
    void *stop_arg;
    void (*drained_cb)(struct gw_instance *inst, void *arg);
    void *drained_arg;
};

/*
 * Binds UDP, starts the broker link, the WebSocket context and the HTTP
 * API. Takes ownership of cfg (also on failure).
 */
GW_MUST_CHECK int gw_instance_init(uv_loop_t *loop, struct gw_config *cfg,
                                   struct gw_instance **out);

/* The running config (valid until the next gw_instance_set_config). */
const struct gw_config *gw_instance_config(const struct gw_instance *inst);

/*
 * A reloaded config (ownership moves here): routes, backends and limits
 * apply to the next hello; live sessions keep the config they started
 * with, which is freed when the last of them ends.
 */
void gw_instance_set_config(struct gw_instance *inst, struct gw_config *cfg);

/*
 * Drains: every session ends with a goodbye to its device, then the
 * parts close; cb runs last and the instance is freed after it.
 */
void gw_instance_close(struct gw_instance *inst,
                       void (*cb)(struct gw_instance *inst, void *arg),
                       void *arg);

/*
 * A rolling restart's drain (drain.h), asked by the signal or the API:
 * no new conversations, the live ones end by themselves up to
 * cluster.drain_deadline_s, the rest get a goodbye, then cb (set once,
 * by main) runs and should close the instance. Idempotent.
 */
void gw_instance_on_drained(struct gw_instance *inst,
                            void (*cb)(struct gw_instance *inst, void *arg),
                            void *arg);
void gw_instance_drain(struct gw_instance *inst, const char *by);

/*
 * cluster.mode hash: another live instance has this instance's name. cb
 * (set once, by main) should close the instance and exit 1; inst->refused
 * says so too.
 */
void gw_instance_on_refused(struct gw_instance *inst,
                            void (*cb)(struct gw_instance *inst, void *arg),
                            void *arg);

/* One log line with every counter (SIGUSR1, and at exit). */
void gw_instance_log_stats(const struct gw_instance *inst);

#endif /* GW_INSTANCE_H */
