/*
 * The running config and the older ones that live sessions still use
 * (docs/architecture.md section 5): a reload must not free backend and
 * route entries that a live session points into. Each config is held by
 * reference count; the live slot holds one reference to the current one.
 */
#ifndef GW_CONFIG_HOLD_H
#define GW_CONFIG_HOLD_H

#include <stddef.h>

#include "common/error.h"
#include "config/config.h"

/* One config and the count of its holders. */
struct gw_config_hold {
    struct gw_config *cfg; /* owned */
    size_t refs;
};

/* The slot of the running config. */
struct gw_config_live {
    struct gw_config_hold *hold;
};

/* Takes ownership of cfg, also on failure (GW_ENOMEM). */
GW_MUST_CHECK int gw_config_live_init(struct gw_config_live *live,
                                      struct gw_config *cfg);
/* Drops the slot's reference; older holds go with their last holder. */
void gw_config_live_close(struct gw_config_live *live);

/* The running config (valid until the next gw_config_live_set). */
const struct gw_config *gw_config_live_get(const struct gw_config_live *live);

/* A reloaded config (ownership moves here; freed on GW_ENOMEM). */
GW_MUST_CHECK int gw_config_live_set(struct gw_config_live *live,
                                     struct gw_config *cfg);

/* A new reference to the running config, for a session's lifetime. */
struct gw_config_hold *gw_config_live_acquire(struct gw_config_live *live);
/* Drops a reference, freeing the config with its last holder. */
void gw_config_hold_release(struct gw_config_hold *hold);

#endif /* GW_CONFIG_HOLD_H */
