/*
 * What a device offers as an MCP server besides its tools
 * (docs/protocol.md section 7): the capabilities and server info of its
 * initialize result, and its resources, resource templates and prompts
 * as discovery last read them. The one place that decides whether a
 * method may be sent to a device at all: the gateway serves exactly what
 * the device offers, no more.
 */
#ifndef GW_MCP_CATALOG_H
#define GW_MCP_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "codec/mcp_caps.h"
#include "codec/mcp_items.h"
#include "gateway/device/tool_cache.h"

/* What changed about a device, for listeners (device_table.h). */
#define GW_DEVICE_CHANGED_PRESENCE  (1u << 0) /* came or went */
#define GW_DEVICE_CHANGED_TOOLS     (1u << 1) /* its tool list */
#define GW_DEVICE_CHANGED_RESOURCES (1u << 2) /* resources or templates */
#define GW_DEVICE_CHANGED_PROMPTS   (1u << 3) /* its prompt list */

struct gw_mcp_list {
    enum gw_tool_list_state state; /* as a tool list's */
    const cJSON *items; /* as listed, or NULL: shared (tool_cache.h) */
};

struct gw_mcp_catalog {
    bool known; /* an initialize result was read */
    struct gw_mcp_server_info info;
    struct gw_mcp_list lists[GW_MCP_LIST_COUNT_];
    uint64_t serial; /* changes whenever a list changes */
};

/* The device's initialize result was read. */
void gw_mcp_catalog_set_info(struct gw_mcp_catalog *c,
                             const struct gw_mcp_server_info *info);

/* A list is being read again / was read (items moved in, kept as
 * gw_tool_cache_set keeps tools) / failed. */
void gw_mcp_catalog_begin(struct gw_mcp_catalog *c, enum gw_mcp_list_kind kind);
void gw_mcp_catalog_set(struct gw_mcp_catalog *c, enum gw_mcp_list_kind kind,
                        cJSON *items, bool truncated);
void gw_mcp_catalog_fail(struct gw_mcp_catalog *c, enum gw_mcp_list_kind kind);
/* The device no longer offers the list. */
void gw_mcp_catalog_clear_list(struct gw_mcp_catalog *c,
                               enum gw_mcp_list_kind kind);

/*
 * Whether the device offers cap. Before its initialize result is known
 * (discovery off, or not yet run) nothing can be said, and every
 * capability counts as offered: the device answers for itself.
 */
bool gw_mcp_catalog_offers(const struct gw_mcp_catalog *c, unsigned cap);

/*
 * Whether method may be sent to the device (gw_mcp_method_cap). On
 * refusal false, with why (cap bytes) = "device <client_id> does not
 * offer <capability>", for a -32601 error.
 */
bool gw_mcp_catalog_allows(const struct gw_mcp_catalog *c,
                           const char *client_id, const char *method, char *why,
                           size_t cap);

/* The capabilities to show an MCP client of this one device. */
unsigned gw_mcp_catalog_caps(const struct gw_mcp_catalog *c);

/* A list's items when the list is complete, else NULL. */
const cJSON *gw_mcp_catalog_items(const struct gw_mcp_catalog *c,
                                  enum gw_mcp_list_kind kind);

#endif /* GW_MCP_CATALOG_H */
