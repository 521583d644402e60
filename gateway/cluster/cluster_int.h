/* What cluster.c lends cluster_rpc.c, private to gateway/cluster/. */
#ifndef GW_CLUSTER_INT_H
#define GW_CLUSTER_INT_H

#include <stddef.h>

#include "common/error.h"
#include "gateway/cluster/cluster.h"

/*
 * Publishes payload to <prefix>/<to><leaf> (to NULL: this instance's
 * own name), QoS 0 as device messages. -ENOTCONN while the link is down,
 * GW_EINVAL in mode off; else as gw_mqtt_link_publish.
 */
GW_MUST_CHECK int gw__cluster_send(struct gw_cluster *c, const char *to,
                                   const char *leaf, const char *payload,
                                   size_t len);

#endif /* GW_CLUSTER_INT_H */
