/* A device's catalog as its record holds it (mcp_catalog.h), private to
 * gateway/device/. */
#ifndef GW_MCP_CATALOG_INT_H
#define GW_MCP_CATALOG_INT_H

#include "gateway/device/mcp_catalog.h"

void gw__device_catalog_init(struct gw_mcp_catalog *c);
void gw__device_catalog_clear(struct gw_mcp_catalog *c);

#endif /* GW_MCP_CATALOG_INT_H */
