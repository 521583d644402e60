/*
 * Messages from the broker, dispatched (docs/architecture.md section 3):
 * a device's up topic carries its hello (a new session), MCP (its link),
 * and everything else for its session; the presence topic feeds the
 * device table. Bad messages are refused, logged and counted here; the
 * log lines are rate-limited per device (the counters have every one),
 * and so are hellos, each of which opens a backend connection.
 */
#ifndef GW_MQTT_DISPATCH_H
#define GW_MQTT_DISPATCH_H

#include <stdbool.h>

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "common/mqtt_link.h"
#include "common/ratelimit.h"
#include "gateway/cluster/cluster.h"
#include "gateway/core/config_hold.h"
#include "gateway/core/counters.h"
#include "gateway/device/device_table.h"
#include "gateway/device/publish.h"
#include "gateway/mcp/mcp_outbound.h"
#include "gateway/session/session.h"

struct gw_mqtt_dispatch {
    struct gw_config_live *config;
    struct gw_device_table *devices;
    struct gw_sessions *sessions;
    struct gw_publisher *pub;
    struct gw_counters *counters;
    /* MCP addressed to a server by "endpoint", or NULL */
    struct gw_mcp_outbound *outbound;
    /* Membership and owners: its topics go there, and a device this
     * instance neither owns nor has a session of is left alone. */
    struct gw_cluster *cluster;
    /*
     * cluster.mode shared: a device message that is another instance's
     * (MCP of a device it owns; a hello or a message that has no session
     * here while this instance drains) is carried to it (cluster_rpc.c);
     * msg is the parsed envelope, not moved. NULL: left alone.
     */
    void (*carry)(void *arg, const char *owner, const char *client_id,
                  const cJSON *msg);
    void *carry_arg;
    bool stopping; /* shutdown: hellos are refused */
    /* Set up on first use, freed by gw_mqtt_dispatch_close: */
    bool limits_ready;
    struct gw_ratelimit log_limit;   /* refusal lines, per device */
    struct gw_ratelimit hello_limit; /* hellos, per device */
};

/* The link's message callback; arg is a struct gw_mqtt_dispatch. */
void gw_mqtt_dispatch_message(struct gw_mqtt_link *link, const char *topic,
                              const uint8_t *payload, size_t len, void *arg);

/*
 * The link's callback for retained messages; arg is a struct
 * gw_mqtt_dispatch. Presence is retained by design; a retained message on
 * an up topic is an old one replayed at subscribe, never the device
 * speaking now: refused and counted (docs/protocol.md section 2.3).
 */
void gw_mqtt_dispatch_retained(struct gw_mqtt_link *link, const char *topic,
                               const uint8_t *payload, size_t len, void *arg);

/*
 * A device message another instance received and carried here (mode
 * shared): handled as if from the broker, except that it is never
 * carried on.
 */
void gw_mqtt_dispatch_carried(struct gw_mqtt_dispatch *d, const char *client_id,
                              const char *payload, size_t len);

/* Frees the rate limits' tables once the link no longer calls in. */
void gw_mqtt_dispatch_close(struct gw_mqtt_dispatch *d);

/* The link's state callback; arg is a struct gw_mqtt_dispatch. */
void gw_mqtt_dispatch_state(struct gw_mqtt_link *link, bool up, void *arg);

#endif /* GW_MQTT_DISPATCH_H */
