/* What the files of gateway/cluster/ lend each other: cluster.c's send
 * to cluster_rpc.c, cluster_rpc.c's part to cluster_catalog.c and back. */
#ifndef GW_CLUSTER_INT_H
#define GW_CLUSTER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/instance_msg.h"
#include "common/error.h"
#include "common/ratelimit.h"
#include "gateway/cluster/cluster.h"
#include "gateway/cluster/cluster_rpc.h"
#include "gateway/device/mcp_link.h"

/*
 * Publishes payload to <prefix>/<to><leaf> (to NULL: this instance's
 * own name), QoS 0 as device messages. -ENOTCONN while the link is down,
 * GW_EINVAL in mode off; else as gw_mqtt_link_publish.
 */
GW_MUST_CHECK int gw__cluster_send(struct gw_cluster *c, const char *to,
                                   const char *leaf, const char *payload,
                                   size_t len);

struct inbound;
struct assembly;

/* cluster_rpc.c's part; cluster_catalog.c reads and counts in it. */
struct gw_cluster_rpc {
    struct gw_cluster_rpc_env env;
    struct gw_mcp_remote remote;
    struct inbound *inbound;
    struct assembly *assemblies;
    unsigned n_assemblies;
    uint32_t catalog_gen; /* numbers the catalogs sent in parts */
    struct gw_bucket warn_bucket;
    bool applying; /* a peer's catalog goes in: not ours to publish */
    bool closed;
    struct gw_cluster_rpc_stats stats;
};

/* ---- cluster_rpc.c ---- */

const struct gw_config *gw__cluster_rpc_config(const struct gw_cluster_rpc *r);
uint64_t gw__cluster_rpc_now(const struct gw_cluster_rpc *r);

/* A warning a peer can cause: rate-limited over all of them. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void gw__cluster_rpc_warn(struct gw_cluster_rpc *r, const char *fmt, ...);

/* The largest payload a publish may carry (mqtt.max_packet_bytes less
 * the room for topic and header, within a peer's parser). */
size_t gw__cluster_rpc_payload_max(const struct gw_cluster_rpc *r);

/*
 * Sends text to <prefix>/<to><leaf>; one over the payload limit is never
 * sent (GW_ETOOBIG, counted, logged; kind names it). Else as
 * gw__cluster_send.
 */
int gw__cluster_rpc_send_text(struct gw_cluster_rpc *r, const char *to,
                              const char *leaf, const char *kind,
                              const char *text, size_t len);

/* ---- cluster_catalog.c ---- */

/* A catalog message (m's catalog may be taken), sender as for
 * gw_cluster_rpc_on_message, len its payload's size. */
void gw__cluster_catalog_take(struct gw_cluster_rpc *r, const char *sender,
                              struct gw_instance_msg *m, size_t len);

/* Shutdown: catalogs still arriving in parts are dropped. */
void gw__cluster_catalog_close(struct gw_cluster_rpc *r);

#endif /* GW_CLUSTER_INT_H */
