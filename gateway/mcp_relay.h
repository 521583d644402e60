/*
 * The backend's side of a device's MCP link (PROTOCOL.md section 7): the
 * backend's requests go through the device's shared link with their ids
 * rewritten, its tools/list is answered from a complete cache, and tools
 * meant for the user alone stay hidden from it unless the config allows.
 */
#ifndef GW_MCP_RELAY_H
#define GW_MCP_RELAY_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "codec/envelope.h"

struct gw_session;
struct gw_device;

/* An mcp envelope from the session's backend. */
void gw_mcp_relay_from_backend(struct gw_session *s,
                               const struct gw_envelope *env, const char *raw,
                               size_t len);

/*
 * The device's tools an AI client may see: a new array of copies, without
 * user-only tools unless with_user. NULL on OOM or when dev has none.
 */
cJSON *gw_mcp_relay_visible_tools(const struct gw_device *dev, bool with_user);

/* Whether name is a user-only tool of dev (by its cache). */
bool gw_mcp_relay_user_only(const struct gw_device *dev, const char *name);

#endif /* GW_MCP_RELAY_H */
