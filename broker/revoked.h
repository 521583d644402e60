/*
 * The plugin's revocations: per device client id, the lowest binding id
 * whose credentials are still good ("below", from the gateway's
 * {"revoke":...} messages, codec/revocation.h). Kept in memory only: the
 * gateway sends all of them again each time its broker link comes up.
 */
#ifndef GW_BROKER_REVOKED_H
#define GW_BROKER_REVOKED_H

#include <stdint.h>

#include "common/error.h"

/*
 * Client ids held at most. An entry is about 200 bytes, so the table stays
 * within some 20 MB of the broker's memory even if a gateway's bug sent
 * ids without end; real deployments unbind far fewer devices.
 */
#define GW_BROKER_REVOKED_MAX 100000

struct gw_broker_revoked;

GW_MUST_CHECK int gw_broker_revoked_create(struct gw_broker_revoked **out);
void gw_broker_revoked_destroy(struct gw_broker_revoked *t);

/*
 * Raises client_id's below to below (a lower value changes nothing: a
 * revocation is never undone). Returns 1 if it was raised or added, 0 if
 * it already was as high, GW_EINVAL (empty or NULL id, one longer than
 * GW_CLIENT_ID_MAX, below 0), GW_ELIMIT (a new id while
 * GW_BROKER_REVOKED_MAX are held) or GW_ENOMEM.
 */
GW_MUST_CHECK int gw_broker_revoked_raise(struct gw_broker_revoked *t,
                                          const char *client_id,
                                          uint64_t below);

/* client_id's below, 0 when nothing of it is revoked (t may be NULL). */
uint64_t gw_broker_revoked_below(const struct gw_broker_revoked *t,
                                 const char *client_id);

/* Client ids held. */
unsigned gw_broker_revoked_count(const struct gw_broker_revoked *t);

#endif /* GW_BROKER_REVOKED_H */
