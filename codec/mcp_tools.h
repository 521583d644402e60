/*
 * MCP tool lists (docs/protocol.md section 7): a device's tools/list pages,
 * which of its tools are user-only, and the names under which the
 * gateway's aggregated MCP server shows the tools of many devices.
 */
#ifndef GW_CODEC_MCP_TOOLS_H
#define GW_CODEC_MCP_TOOLS_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "common/error.h"

/* MCP tool names: 1..128 of [A-Za-z0-9_.-] (spec 2025-11-25). */
#define GW_MCP_TOOL_NAME_MAX 128

/* A device label: 12 hex of the MAC, '-', 16 hex of SHA-256 of the client id.
 */
#define GW_MCP_LABEL_LEN 29

/*
 * Checks one tools/list result page: {"tools":[...]} with an optional
 * string "nextCursor" (absent or "" on the last page). Every tool must be
 * an object with a non-empty string "name" (any text: devices are not
 * held to MCP naming) and, when present, an object "inputSchema" and a
 * string "description". Appends a copy of each tool to the array tools
 * and sets *next (NULL on the last page; points into result). GW_EPROTO
 * for a page that breaks these rules (tools then untouched), GW_ENOMEM.
 */
GW_MUST_CHECK int gw_mcp_tools_page_parse(const cJSON *result, cJSON *tools,
                                          const char **next);

/* Appends a copy of every item of the array list to the array dest, all
 * or nothing: GW_ENOMEM leaves dest as it was. */
GW_MUST_CHECK int gw_mcp_append_copies(cJSON *dest, const cJSON *list);

/* Whether a tool is marked for the user only: its annotations.audience
 * names "user" and not "assistant" (how firmware marks them). */
bool gw_mcp_tool_user_only(const cJSON *tool);

/* Whether name is a valid MCP tool name (see GW_MCP_TOOL_NAME_MAX). */
bool gw_mcp_tool_name_valid(const char *name, size_t len);

/*
 * A short label for a device, stable across restarts and valid in a tool
 * name: the 12 lowercase hex digits of the MAC in the client id (or
 * "device000000" when it has none), '-', and the first 16 hex digits of
 * SHA-256 over the whole client id, so two ids with one MAC still differ
 * and no id can be crafted to take another's label. out needs
 * GW_MCP_LABEL_LEN + 1 bytes. GW_EINVAL for an empty id, GW_ENOMEM when
 * the digest fails.
 */
GW_MUST_CHECK int gw_mcp_device_label(const char *client_id, size_t len,
                                      char out[GW_MCP_LABEL_LEN + 1]);

/*
 * "<label>.<tool>" into out (cap bytes with the NUL). GW_EPROTO when the
 * result would not be a valid MCP tool name (a device tool name with
 * other characters, or over the limit), GW_ENOSPC, GW_EINVAL (a NULL
 * argument or a label not shaped like gw_mcp_device_label's).
 */
GW_MUST_CHECK int gw_mcp_aggregate_name(const char *label, const char *tool,
                                        char *out, size_t cap);

/*
 * Splits an aggregated name at its first '.': the label (checked to have
 * the shape above) and the device's tool name after it. GW_EPROTO if name
 * is not one the gateway made.
 */
GW_MUST_CHECK int gw_mcp_aggregate_split(const char *name,
                                         char label[GW_MCP_LABEL_LEN + 1],
                                         const char **tool);

#endif /* GW_CODEC_MCP_TOOLS_H */
