/*
 * The plugin's table of authenticated connections: the role of each
 * broker context, and for each device client id which of its connections
 * is the current one, so presence survives session take-over.
 */
#ifndef GW_BROKER_CLIENTS_H
#define GW_BROKER_CLIENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "broker/policy.h"
#include "codec/client_id.h"
#include "common/error.h"

/* Longer addresses (never an IP) are recorded as "". */
#define GW_BROKER_ADDRESS_MAX 63

struct gw_broker_clients;

/* What a connection looks like to the callbacks. */
struct gw_broker_conn_info {
    enum gw_broker_role role;
    const char *client_id; /* as authenticated; valid until removed */
    unsigned denials;      /* ACL refusals so far, for rate-limited logs */
    uint64_t oversized;    /* device publishes refused for their size */
    uint64_t retained;     /* device publishes whose retain was cleared */
    uint64_t binding;      /* a device's credentials' binding id, 0: none */
};

/* A presence message to publish, self-contained. */
struct gw_broker_presence {
    bool publish; /* false: nothing to say */
    bool online;
    uint64_t conn; /* the connection the news is about */
    char client_id[GW_CLIENT_ID_MAX + 1];
    char address[GW_BROKER_ADDRESS_MAX + 1];
};

GW_MUST_CHECK int gw_broker_clients_create(struct gw_broker_clients **out);
void gw_broker_clients_destroy(struct gw_broker_clients *t);

/*
 * Records an authenticated connection (ctx is the broker's context, used
 * only as a key) with its credentials' binding id (devices; 0: none). A
 * device connection becomes its id's current one and *ev says "online"
 * for it; ctx already in the table (a context reused without its
 * disconnect being seen) is replaced silently. Returns 0, GW_EINVAL (no
 * role, or a device id longer than GW_CLIENT_ID_MAX) or GW_ENOMEM.
 */
GW_MUST_CHECK int gw_broker_clients_add(struct gw_broker_clients *t,
                                        const void *ctx,
                                        enum gw_broker_role role,
                                        const char *client_id,
                                        const char *address, uint64_t binding,
                                        struct gw_broker_presence *ev);

/*
 * True if client_id's current device connection (the one the broker finds
 * by that id, so the one a kick by client id ends) has a binding id below
 * below: a revocation must end it.
 */
bool gw_broker_clients_current_below(struct gw_broker_clients *t,
                                     const char *client_id, uint64_t below);

/* The connection of ctx, or NULL. The pointer is valid until removal. */
struct gw_broker_conn_info *gw_broker_clients_find(struct gw_broker_clients *t,
                                                   const void *ctx);

/*
 * Forgets ctx at its disconnect. *ev says "offline" only if ctx was its
 * device's current connection and no other is left; if an older one is
 * still there (the newer one failed after authenticating), it becomes
 * current again and *ev says "online" for it. A connection already
 * replaced by a newer one (take-over) says nothing.
 */
void gw_broker_clients_remove(struct gw_broker_clients *t, const void *ctx,
                              struct gw_broker_presence *ev);

/* Connections in the table, for logs and tests. */
unsigned gw_broker_clients_count(const struct gw_broker_clients *t);

#endif /* GW_BROKER_CLIENTS_H */
