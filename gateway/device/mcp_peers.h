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
struct gw_mcp_catalog;
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
    struct gw_list node;  /* in the peers' all_devices while level */
    unsigned n_interests; /* records of it on devices */
};

/*
 * Per device; lives in the device's record, with the parts of the record
 * its peers' requests go through (set at init: mcp_peers.c knows no
 * records).
 */
struct gw_mcp_interests {
    struct gw_list items; /* struct gw_mcp_interest (mcp_peers.c) */
    unsigned count;
    int device_level;         /* level the device was last set to, or -1 */
    struct gw_mcp_link *link; /* the device's */
    const struct gw_mcp_catalog *catalog; /* what the device offers */
};

/*
 * Per table; lives in the device table, which hands its records over
 * through find and next (set at init), so that the peers never reach
 * into the table.
 */
struct gw_mcp_peers {
    struct gw_mcp_links *links;
    struct gw_list all_devices; /* struct gw_mcp_peer with a level */
    /* The online device client_id's interests, or NULL. */
    struct gw_mcp_interests *(*find)(void *arg, const char *client_id);
    /* The online devices' interests in turn: the first after NULL, NULL
     * after the last. */
    struct gw_mcp_interests *(*next)(void *arg,
                                     const struct gw_mcp_interests *in);
    void *arg;
};

/*
 * What a peer then asks of the devices goes through the table that holds
 * them (device_table.h): gw_mcp_subscribe, gw_mcp_set_level,
 * gw_mcp_task_created and, before its memory goes, gw_mcp_peer_leave.
 */
void gw_mcp_peer_init(struct gw_mcp_peer *peer,
                      const struct gw_mcp_peer_ops *ops, const char *subject,
                      bool all_devices);

#endif /* GW_MCP_PEERS_H */
