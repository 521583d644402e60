/*
 * A device's capabilities and lists; see mcp_catalog.h.
 */
#include "gateway/device/mcp_catalog.h"

#include <stdio.h>
#include <string.h>

#include "gateway/device/mcp_catalog_int.h"
#include "gateway/device/shared_lists_int.h"

void gw__device_catalog_init(struct gw_mcp_catalog *c)
{
    memset(c, 0, sizeof(*c));
}

void gw__device_catalog_clear(struct gw_mcp_catalog *c)
{
    for (size_t i = 0; i < GW_MCP_LIST_COUNT_; i++) {
        gw__device_list_unshare(c->lists[i].items);
    }
    gw__device_catalog_init(c);
}

void gw_mcp_catalog_set_info(struct gw_mcp_catalog *c,
                             const struct gw_mcp_server_info *info)
{
    c->info = *info;
    c->known = true;
}

void gw_mcp_catalog_begin(struct gw_mcp_catalog *c, enum gw_mcp_list_kind kind)
{
    c->lists[kind].state = GW_TOOL_LIST_PENDING;
}

void gw_mcp_catalog_set(struct gw_mcp_catalog *c, enum gw_mcp_list_kind kind,
                        cJSON *items, bool truncated)
{
    struct gw_mcp_list *l = &c->lists[kind];
    const cJSON *old = l->items;

    l->items = gw__device_list_share(items);
    gw__device_list_unshare(old);
    l->state = truncated ? GW_TOOL_LIST_TRUNCATED : GW_TOOL_LIST_COMPLETE;
    c->serial++;
}

void gw_mcp_catalog_fail(struct gw_mcp_catalog *c, enum gw_mcp_list_kind kind)
{
    struct gw_mcp_list *l = &c->lists[kind];

    gw__device_list_unshare(l->items);
    l->items = NULL;
    l->state = GW_TOOL_LIST_FAILED;
    c->serial++;
}

void gw_mcp_catalog_clear_list(struct gw_mcp_catalog *c,
                               enum gw_mcp_list_kind kind)
{
    struct gw_mcp_list *l = &c->lists[kind];

    gw__device_list_unshare(l->items);
    l->items = NULL;
    l->state = GW_TOOL_LIST_NONE;
    c->serial++;
}

bool gw_mcp_catalog_offers(const struct gw_mcp_catalog *c, unsigned cap)
{
    return !c->known || (c->info.caps & cap) == cap;
}

bool gw_mcp_catalog_allows(const struct gw_mcp_catalog *c,
                           const char *client_id, const char *method, char *why,
                           size_t cap)
{
    unsigned need = gw_mcp_method_cap(method);

    if (need == 0 || gw_mcp_catalog_offers(c, need)) {
        return true;
    }
    snprintf(why, cap, "device %s does not offer %s", client_id,
             gw_mcp_cap_name(need));
    return false;
}

unsigned gw_mcp_catalog_caps(const struct gw_mcp_catalog *c)
{
    /* Unknown: the firmware's own, tools alone. */
    return c->known ? c->info.caps : GW_MCP_CAP_TOOLS;
}

const cJSON *gw_mcp_catalog_items(const struct gw_mcp_catalog *c,
                                  enum gw_mcp_list_kind kind)
{
    const struct gw_mcp_list *l = &c->lists[kind];

    return l->state == GW_TOOL_LIST_COMPLETE ? l->items : NULL;
}
