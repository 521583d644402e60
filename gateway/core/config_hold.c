/* Reference-counted configs for reloads; see config_hold.h. */
#include "gateway/core/config_hold.h"

#include <stdlib.h>

#include "common/assert.h"

static struct gw_config_hold *hold_create(struct gw_config *cfg)
{
    struct gw_config_hold *hold = calloc(1, sizeof(*hold));

    if (hold == NULL) {
        gw_config_destroy(cfg);
        return NULL;
    }
    hold->cfg = cfg;
    hold->refs = 1;
    return hold;
}

int gw_config_live_init(struct gw_config_live *live, struct gw_config *cfg)
{
    live->hold = hold_create(cfg);
    return live->hold != NULL ? 0 : GW_ENOMEM;
}

void gw_config_live_close(struct gw_config_live *live)
{
    gw_config_hold_release(live->hold);
    live->hold = NULL;
}

const struct gw_config *gw_config_live_get(const struct gw_config_live *live)
{
    return live->hold->cfg;
}

int gw_config_live_set(struct gw_config_live *live, struct gw_config *cfg)
{
    struct gw_config_hold *hold = hold_create(cfg);

    if (hold == NULL) {
        return GW_ENOMEM;
    }
    gw_config_hold_release(live->hold);
    live->hold = hold;
    return 0;
}

struct gw_config_hold *gw_config_live_acquire(struct gw_config_live *live)
{
    live->hold->refs++;
    return live->hold;
}

void gw_config_hold_release(struct gw_config_hold *hold)
{
    if (hold == NULL) {
        return;
    }
    GW_ASSERT(hold->refs > 0);
    if (--hold->refs == 0) {
        gw_config_destroy(hold->cfg);
        free(hold);
    }
}
