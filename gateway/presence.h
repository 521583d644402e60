/*
 * Which devices the broker says are connected, and from where: fed by the
 * presence topic, read when a session opens its backend WebSocket (the
 * x-forwarded-for header) and, later, by the per-device MCP client. One
 * entry per online device; an offline message removes it.
 */
#ifndef GW_GATEWAY_PRESENCE_H
#define GW_GATEWAY_PRESENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hash.h"

#include "codec/client_id.h"
#include "codec/presence.h"
#include "common/error.h"

/* Entries kept at most: a bound on what a broker (or a forger with the
 * gateway's account) can make the gateway hold. */
#define GW_PRESENCE_MAX_DEVICES (1u << 20)

struct gw_presence_entry {
    UT_hash_handle hh;
    char client_id[GW_CLIENT_ID_MAX + 1];
    char address[GW_PRESENCE_ADDRESS_MAX + 1]; /* "" when not known */
    uint64_t conn;                             /* the broker's, or 0 */
    uint64_t since_ms;                         /* loop time it came online */
};

struct gw_presence_table {
    struct gw_presence_entry *by_id; /* uthash by client_id */
    unsigned count;
};

/* What an update changed, for the caller's logs and actions. */
enum gw_presence_change {
    GW_PRESENCE_SAME,     /* offline for a device not online, or a repeat */
    GW_PRESENCE_ARRIVED,  /* a device not online before */
    GW_PRESENCE_RETURNED, /* online again on a newer connection */
    GW_PRESENCE_LEFT      /* was online, now gone */
};

/*
 * Applies one parsed presence message for client_id (already checked to
 * be a device id). Returns the change (>= 0), GW_ELIMIT when the table is
 * full or GW_ENOMEM; the table is unchanged on errors.
 */
int gw_presence_table_update(struct gw_presence_table *t, const char *client_id,
                             const struct gw_presence *p, uint64_t now_ms);

/* The entry of an online device, or NULL. Valid until the next update. */
const struct gw_presence_entry *
gw_presence_table_find(const struct gw_presence_table *t,
                       const char *client_id);

/* Forgets everything (the broker link was lost: retained presence comes
 * again on the new subscription). */
void gw_presence_table_clear(struct gw_presence_table *t);

#endif /* GW_GATEWAY_PRESENCE_H */
