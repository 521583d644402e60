/*
 * What a device offers besides tools (docs/protocol.md section 7):
 * resources, resource templates and prompts as their list pages give
 * them, the names under which the aggregated MCP server shows them,
 * and the checks on resource contents. Pure: cJSON in, cJSON out.
 */
#ifndef GW_CODEC_MCP_ITEMS_H
#define GW_CODEC_MCP_ITEMS_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "codec/mcp_tools.h"
#include "common/error.h"

/* The lists a device's catalog holds besides tools. */
#define GW_MCP_LIST_MAP(XX)                                                    \
    XX(RESOURCES, "resources/list", "resources", "uri")                        \
    XX(TEMPLATES, "resources/templates/list", "resourceTemplates",             \
       "uriTemplate")                                                          \
    XX(PROMPTS, "prompts/list", "prompts", "name")

enum gw_mcp_list_kind {
#define XX(name, m, a, k) GW_MCP_LIST_##name,
    GW_MCP_LIST_MAP(XX)
#undef XX
        GW_MCP_LIST_COUNT_
};

/* "resources/list", ...; the result's array member ("resources", ...);
 * the member that names an item ("uri", "uriTemplate", "name"). NULL for
 * a kind outside the enum. */
const char *gw_mcp_list_method(enum gw_mcp_list_kind kind);
const char *gw_mcp_list_member(enum gw_mcp_list_kind kind);
const char *gw_mcp_list_key(enum gw_mcp_list_kind kind);

/* Longest URI, template or prompt name the gateway keeps. */
#define GW_MCP_URI_MAX 1024

/*
 * Checks one list page of kind: an object whose member (above) is an
 * array and whose optional "nextCursor" is a string or null. Each item
 * must be an object whose key member is a non-empty string of at most
 * GW_MCP_URI_MAX bytes, with a string "name" (resources and templates
 * too), and when present a string "description", "mimeType", "title"
 * (each of these members once: a repeated one is refused);
 * a prompt's "arguments", when present, an array of objects each with a
 * non-empty string "name". Appends a copy of each item to items and sets
 * *next (NULL on the last page: absent, null or ""; else points into
 * result). GW_EPROTO for a page breaking these rules (items untouched),
 * GW_ENOMEM, GW_EINVAL for NULL arguments.
 */
GW_MUST_CHECK int gw_mcp_list_page_parse(enum gw_mcp_list_kind kind,
                                         const cJSON *result, cJSON *items,
                                         const char **next);

/* ---- aggregated names (/mcp) ---- */

/* Resource and template URIs on /mcp: "hybridgw://<label>/<device uri>". */
#define GW_MCP_URI_PREFIX "hybridgw://"

/*
 * "hybridgw://<label>/<uri>" as a new string (free()); NULL on OOM, for
 * a label not shaped like gw_mcp_device_label's, or an empty uri or one
 * over GW_MCP_URI_MAX (the split would refuse it).
 */
char *gw_mcp_aggregate_uri(const char *label, const char *uri);

/*
 * Splits an aggregated URI: the label (shape checked) and the device's own
 * URI after the '/' that follows it (1..GW_MCP_URI_MAX bytes; points into
 * uri). GW_EPROTO for anything the gateway did not make, GW_EINVAL for
 * NULL arguments.
 */
GW_MUST_CHECK int gw_mcp_aggregate_uri_split(const char *uri,
                                             char label[GW_MCP_LABEL_LEN + 1],
                                             const char **device_uri);

/*
 * "<label>.<id>" as a new string (free()): task ids and prompt names on
 * /mcp (ids may hold any character; split them with
 * gw_mcp_aggregate_id_split). NULL on OOM, a bad label, an empty id or
 * one over GW_MCP_URI_MAX.
 */
char *gw_mcp_aggregate_id(const char *label, const char *id);

/*
 * Splits "<label>.<id>": the label (shape checked) and the id after the
 * '.' (1..GW_MCP_URI_MAX bytes of anything; points into name). Unlike
 * gw_mcp_aggregate_split, which only takes valid tool names (at most 128
 * of [A-Za-z0-9_.-]), this takes back every id gw_mcp_aggregate_id made.
 * GW_EPROTO for anything else, GW_EINVAL for NULL arguments.
 */
GW_MUST_CHECK int gw_mcp_aggregate_id_split(const char *name,
                                            char label[GW_MCP_LABEL_LEN + 1],
                                            const char **id);

/*
 * Rewrites, in place, every string member named key of every object in
 * the array member of obj (e.g. key "uri" of obj.contents[]) to its
 * aggregated form for label (uri and uriTemplate: gw_mcp_aggregate_uri;
 * anything else: gw_mcp_aggregate_id). Items without the member, and
 * an obj without the array, are left alone. All or nothing: GW_EPROTO
 * (a value empty or over GW_MCP_URI_MAX) and GW_ENOMEM leave obj as it
 * was; GW_EINVAL for NULL arguments or a bad label. Used for contents of
 * a read and list pages shown on /mcp.
 */
GW_MUST_CHECK int gw_mcp_rename_members(cJSON *obj, const char *array,
                                        const char *key, const char *label);

/* The same for obj's own members named key: a notification's params
 * (resources/updated's uri, tasks/status's taskId). */
GW_MUST_CHECK int gw_mcp_rename_member(cJSON *obj, const char *key,
                                       const char *label);

/* ---- resource contents ---- */

/*
 * Checks a resources/read result: {"contents":[...]} where each item is
 * an object with a non-empty string "uri" (at most GW_MCP_URI_MAX bytes,
 * so that it can be renamed) and exactly one of a string "text" or a
 * string "blob" that is valid base64 (gw_base64_valid), and an optional
 * string "mimeType"; none of these repeated. *total (may be
 * NULL) gets the sum of the text and blob lengths. GW_EPROTO for a
 * result breaking these rules, GW_ETOOBIG when the sum exceeds max_bytes
 * (0 = no limit); in both cases why (cap bytes) says what, for the
 * JSON-RPC error the caller sends.
 */
GW_MUST_CHECK int gw_mcp_contents_check(const cJSON *result, size_t max_bytes,
                                        size_t *total, char *why, size_t cap);

/* Whether s[0..len) is padded base64 of the standard alphabet (RFC 4648
 * section 4, no whitespace; "" is valid), in its one canonical form: the
 * bits padding drops are zero (section 3.5), as every encoder writes. */
bool gw_base64_valid(const char *s, size_t len);

/* Whether tok can be a progress token: a string or an integral number. */
bool gw_mcp_progress_token_valid(const cJSON *tok);

#endif /* GW_CODEC_MCP_ITEMS_H */
