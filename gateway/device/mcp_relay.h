/*
 * The backend's side of a device's MCP link (docs/protocol.md section 7):
 * the backend's requests go through the device's shared link with their
 * ids (and progress tokens) rewritten and restored, its tools/list is
 * answered from a complete cache, its tools/call is checked against the
 * cache's allow-list, a method the device does not offer is refused, and
 * its subscriptions, logging level and tasks are the backend's as one
 * peer of the device (mcp_peers.h). Each session owns one relay; the
 * relay's waiting calls and its subscriptions die with it.
 */
#ifndef GW_MCP_RELAY_H
#define GW_MCP_RELAY_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "codec/envelope.h"
#include "common/list.h"
#include "gateway/device/device_table.h"
#include "gateway/device/mcp_peers.h"

/* Sends one JSON-RPC message (not moved) to the backend. */
typedef void (*gw_mcp_relay_send_fn)(void *arg, const cJSON *payload);

struct gw_mcp_relay {
    struct gw_device_table *devices;
    struct gw_mcp_links *links;
    struct gw_mcp_peer peer; /* the backend, as a listener of the device */
    const char *client_id;   /* the session's */
    struct gw_list calls;    /* backend requests waiting for the device */
    gw_mcp_relay_send_fn send;
    void *arg;
};

/* subject (the session's log prefix) and client_id outlive the relay. */
void gw_mcp_relay_init(struct gw_mcp_relay *relay,
                       struct gw_device_table *devices, const char *client_id,
                       const char *subject, gw_mcp_relay_send_fn send,
                       void *arg);
/* The session ends: waiting calls are abandoned, subscriptions dropped,
 * nothing is sent. */
void gw_mcp_relay_close(struct gw_mcp_relay *relay);

/*
 * An mcp envelope from the backend for dev (raw: its text, passed on
 * as it is when it needs no rewriting). GW_EPROTO when the payload is not
 * JSON-RPC (the caller counts and logs the refusal).
 */
int gw_mcp_relay_from_backend(struct gw_mcp_relay *relay, struct gw_device *dev,
                              const struct gw_envelope *env, const char *raw,
                              size_t len);

#endif /* GW_MCP_RELAY_H */
