/*
 * What instances carry for each other (docs/protocol.md section 10.7,
 * docs/architecture.md section 9): a device's MCP client is its owner's,
 * yet every instance serves the API and the MCP server for every device.
 *
 *   - Requests: a request for a device another instance owns (from the
 *     API, an MCP client, a backend whose session lives here) is carried
 *     to the owner on <prefix>/<owner>/rpc, sent to the device there under
 *     the owner's ids, and its end (result, error, timeout, offline...)
 *     comes back the same way; so does progress, and a cancel goes out
 *     when the asker gives up. The device sees one JSON-RPC client.
 *   - Catalogs: the owner publishes each device's tools and lists on
 *     <prefix>/<owner>/catalog whenever they change, and sends all of them
 *     to an instance that joins; the others keep them as the device's
 *     tool cache and catalog, so listing and the allow-list work the same
 *     everywhere.
 *
 * Everything runs on the loop's thread.
 */
#ifndef GW_CLUSTER_RPC_H
#define GW_CLUSTER_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "gateway/cluster/cluster.h"
#include "gateway/core/config_hold.h"
#include "gateway/device/device_table.h"

struct gw_cluster_rpc;

struct gw_cluster_rpc_env {
    struct gw_cluster *cluster; /* in hash mode */
    struct gw_device_table *devices;
    const struct gw_config_live *config;
    /* Mode shared: a device message another instance carried here, to be
     * handled as from the broker (gw_mqtt_dispatch_carried). */
    void (*on_carried)(void *arg, const char *client_id, const char *payload,
                       size_t len);
    void *arg;
};

/* Counters for /metrics. */
struct gw_cluster_rpc_stats {
    uint64_t carried_out;       /* requests sent to their owner */
    uint64_t carried_in;        /* requests served for another instance */
    uint64_t replies_out;       /* their ends, sent back */
    uint64_t catalogs_out;      /* device catalogs published or sent */
    uint64_t catalogs_in;       /* device catalogs taken from their owner */
    uint64_t refused;           /* messages that did not parse or fit */
    uint64_t oversize;          /* not sent: over the broker's packet limit */
    uint64_t catalogs_foreign;  /* refused: not from the device's owner */
    uint64_t requests_refused;  /* carried here, refused by the rules */
    uint64_t catalog_parts_out; /* parts of catalogs sent in parts */
    uint64_t catalog_parts_in;  /* ... taken */
    uint64_t up_out;            /* device messages carried to their instance */
    uint64_t up_in;             /* ... carried here */
};

/*
 * Creates the part and puts itself between the device table's MCP links
 * and their owners (gw_mcp_links_set_remote). GW_ENOMEM, GW_EINVAL.
 */
GW_MUST_CHECK int gw_cluster_rpc_init(const struct gw_cluster_rpc_env *env,
                                      struct gw_cluster_rpc **out);

/* A message the cluster passed on (gw_cluster_env.on_peer_message):
 * sender the name of the catalog topic it came on, NULL for this
 * instance's request topic. */
void gw_cluster_rpc_on_message(struct gw_cluster_rpc *r, const char *sender,
                               const uint8_t *payload, size_t len);

/* An instance appeared: it gets the catalog of every device owned here. */
void gw_cluster_rpc_peer_joined(struct gw_cluster_rpc *r, const char *name);

/* A device's lists changed (the table's listener): published when owned
 * here. */
void gw_cluster_rpc_device_changed(struct gw_cluster_rpc *r,
                                   const struct gw_device *dev, unsigned what);

/* Mode shared: carries a device's message (msg, not moved) to owner. */
void gw_cluster_rpc_carry(struct gw_cluster_rpc *r, const char *owner,
                          const char *client_id, const cJSON *msg);

void gw_cluster_rpc_get_stats(const struct gw_cluster_rpc *r,
                              struct gw_cluster_rpc_stats *out);

/*
 * Shutdown: requests served for others are let go (their askers time
 * out), the links carry nothing more, and the part is freed. NULL is a
 * no-op.
 */
void gw_cluster_rpc_close(struct gw_cluster_rpc *r);

#endif /* GW_CLUSTER_RPC_H */
