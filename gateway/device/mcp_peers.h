/*
 * Who listens to a device's MCP server (docs/protocol.md section 7): the
 * backend of its conversation and MCP client sessions, each a peer. A
 * peer subscribes to resources, sets a logging level and creates tasks;
 * the device's notifications about them go to that peer alone. The
 * device holds one subscription per URI and one logging level (the most
 * verbose any peer asked for), whoever the peers are, so that one peer
 * leaving never takes away what another still wants.
 */
#ifndef GW_MCP_PEERS_H
#define GW_MCP_PEERS_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "codec/jsonrpc.h"
#include "codec/mcp_caps.h"
#include "common/list.h"
#include "gateway/device/mcp_link.h"

struct gw_device;
struct gw_device_table;
struct gw_mcp_peer;

/* Subscriptions, levels and tasks one device records for its peers. */
#define GW_MCP_INTERESTS_MAX 256

struct gw_mcp_peer_ops {
    /*
     * A device notification this peer asked for: method is
     * notifications/resources/updated (a URI it subscribed to),
     * notifications/message (at or above its level) or
     * notifications/tasks/status (a task it created); params are the
     * device's, with the device's own names (the peer renames).
     */
    void (*notify)(struct gw_mcp_peer *peer, const struct gw_device *dev,
                   const char *method, const cJSON *params);
};

struct gw_mcp_peer {
    const struct gw_mcp_peer_ops *ops;
    const char *subject;  /* for the log: "sid=..." or "mcp sid=..." */
    bool all_devices;     /* an /mcp session: listens to every device */
    int level;            /* all_devices: enum gw_mcp_log_level, or -1 */
    struct gw_list node;  /* in the table's all-devices list while level */
    unsigned n_interests; /* records of it on devices */
};

/* Per device; lives in the device's record. */
struct gw_mcp_interests {
    struct gw_list items; /* struct gw_mcp_interest (mcp_peers.c) */
    unsigned count;
    int device_level; /* level the device was last set to, or -1 */
};

void gw_mcp_peer_init(struct gw_mcp_peer *peer,
                      const struct gw_mcp_peer_ops *ops, const char *subject,
                      bool all_devices);
/*
 * The peer leaves (its session ended): every record of it goes; a URI no
 * peer is subscribed to any more is unsubscribed on the device, and
 * levels are set again where the most verbose one changed. Must be
 * called before the peer's memory goes.
 */
void gw_mcp_peer_leave(struct gw_device_table *t, struct gw_mcp_peer *peer);

void gw_mcp_interests_init(struct gw_mcp_interests *in);
/* The device left: its records go (the peers are told nothing). */
void gw_mcp_interests_clear(struct gw_mcp_interests *in);

/*
 * resources/subscribe (or unsubscribe) of uri on dev for peer. The
 * device is asked only when the first peer subscribes to uri (the last
 * leaves); otherwise cb gets an empty result from the loop. Refusals
 * (the device lacks resources.subscribe, too many records) come through
 * cb like any other end.
 */
void gw_mcp_subscribe(struct gw_device_table *t, struct gw_device *dev,
                      struct gw_mcp_peer *peer, const char *uri, bool on,
                      enum gw_mcp_origin origin, gw_mcp_reply_cb cb, void *arg,
                      uint64_t *handle);

/*
 * logging/setLevel for peer: on one device (dev), or, for an all-devices
 * peer, dev NULL: every online device that offers logging (the answer
 * then comes at once, from the loop; devices that come later get it
 * when their discovery ends). The device is asked only when its most
 * verbose level changes.
 */
void gw_mcp_set_level(struct gw_device_table *t, struct gw_device *dev,
                      struct gw_mcp_peer *peer, enum gw_mcp_log_level level,
                      enum gw_mcp_origin origin, gw_mcp_reply_cb cb, void *arg,
                      uint64_t *handle);

/* A request of peer created task_id on dev (a CreateTaskResult came
 * back): the task's status notifications go to peer. */
void gw_mcp_task_created(struct gw_device *dev, struct gw_mcp_peer *peer,
                         const char *task_id);

/*
 * A device notification: resources/updated, message and tasks/status go
 * to the peers that asked for them and are consumed (true); anything
 * else returns false.
 */
bool gw_mcp_peers_on_notification(struct gw_device_table *t,
                                  struct gw_device *dev,
                                  const struct gw_rpc *rpc);

/* The device's discovery ended: all-devices peers' levels reach it. */
void gw_mcp_peers_device_ready(struct gw_device_table *t,
                               struct gw_device *dev);

#endif /* GW_MCP_PEERS_H */
