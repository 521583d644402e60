/*
 * The device table's side of mcp_peers.c, private to gateway/device/: a
 * device's interests and the table's peers are handed over as they are,
 * so that the peers never reach back into the table (device_table.h has
 * the public calls and what they do).
 */
#ifndef GW_MCP_PEERS_INT_H
#define GW_MCP_PEERS_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "codec/jsonrpc.h"
#include "codec/mcp_caps.h"
#include "gateway/device/mcp_link.h"
#include "gateway/device/mcp_peers.h"

void gw__device_peers_init(
    struct gw_mcp_peers *ps, struct gw_mcp_links *links,
    struct gw_mcp_interests *(*find)(void *arg, const char *client_id),
    struct gw_mcp_interests *(*next)(void *arg,
                                     const struct gw_mcp_interests *in),
    void *arg);

void gw__device_interests_init(struct gw_mcp_interests *in,
                               struct gw_mcp_link *link,
                               const struct gw_mcp_catalog *catalog);
/* The device left: its records go (the peers are told nothing). */
void gw__device_interests_clear(struct gw_mcp_interests *in);

/* gw_mcp_peer_leave, gw_mcp_subscribe, gw_mcp_set_level (in NULL: every
 * device) and gw_mcp_task_created of device_table.h. */
void gw__device_peers_leave(struct gw_mcp_peers *ps, struct gw_mcp_peer *peer);
void gw__device_peers_subscribe(struct gw_mcp_peers *ps,
                                struct gw_mcp_interests *in,
                                struct gw_mcp_peer *peer, const char *uri,
                                bool on, enum gw_mcp_origin origin,
                                gw_mcp_reply_cb cb, void *arg,
                                uint64_t *handle);
void gw__device_peers_set_level(struct gw_mcp_peers *ps,
                                struct gw_mcp_interests *in,
                                struct gw_mcp_peer *peer,
                                enum gw_mcp_log_level level,
                                enum gw_mcp_origin origin, gw_mcp_reply_cb cb,
                                void *arg, uint64_t *handle);
void gw__device_peers_task_created(struct gw_mcp_interests *in,
                                   struct gw_mcp_peer *peer,
                                   const char *task_id);
/* Whether peer created task_id (a record of it is kept). */
bool gw__device_peers_task_owned(const struct gw_mcp_interests *in,
                                 const struct gw_mcp_peer *peer,
                                 const char *task_id);

/*
 * A notification of dev (whose interests are in): resources/updated,
 * message and tasks/status go to the peers that asked for them and are
 * consumed (true); anything else returns false.
 */
bool gw__device_peers_on_notification(struct gw_mcp_peers *ps,
                                      struct gw_mcp_interests *in,
                                      const struct gw_device *dev,
                                      const struct gw_rpc *rpc);

/*
 * The device accepted an initialize (discovery's or a backend's): esp-mcp
 * then forgets its subscriptions and log level, so each URI a peer
 * listens to is subscribed again and the level set again, when the
 * catalog says the device offers them (a device that kept them only
 * hears them twice).
 */
void gw__device_peers_reinitialized(struct gw_mcp_peers *ps,
                                    struct gw_mcp_interests *in);

/* The device's discovery ended: all-devices peers' levels reach it. */
void gw__device_peers_ready(struct gw_mcp_peers *ps,
                            struct gw_mcp_interests *in);

#endif /* GW_MCP_PEERS_INT_H */
