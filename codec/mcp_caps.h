/*
 * MCP capabilities (docs/protocol.md section 7): what a device's
 * initialize result offers, what an MCP client's initialize declares, and
 * which capability each method needs, so that the gateway serves exactly
 * what a device offers and sends a device nothing it did not. Pure.
 */
#ifndef GW_CODEC_MCP_CAPS_H
#define GW_CODEC_MCP_CAPS_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "common/error.h"

/* Server capabilities, one bit each. */
#define GW_MCP_CAP_MAP(XX)                                                     \
    XX(TOOLS, 0, "tools")                                                      \
    XX(TOOLS_LIST_CHANGED, 1, "tools.listChanged")                             \
    XX(RESOURCES, 2, "resources")                                              \
    XX(RESOURCES_SUBSCRIBE, 3, "resources.subscribe")                          \
    XX(RESOURCES_LIST_CHANGED, 4, "resources.listChanged")                     \
    XX(PROMPTS, 5, "prompts")                                                  \
    XX(PROMPTS_LIST_CHANGED, 6, "prompts.listChanged")                         \
    XX(COMPLETIONS, 7, "completions")                                          \
    XX(LOGGING, 8, "logging")                                                  \
    XX(TASKS, 9, "tasks") /* tasks.requests.tools.call */                      \
    XX(TASKS_LIST, 10, "tasks.list")                                           \
    XX(TASKS_CANCEL, 11, "tasks.cancel")

enum gw_mcp_cap {
#define XX(name, bit, _) GW_MCP_CAP_##name = 1u << (bit),
    GW_MCP_CAP_MAP(XX)
#undef XX
};

/* Client capabilities (an MCP client's initialize params). */
#define GW_MCP_CLIENT_CAP_MAP(XX)                                              \
    XX(SAMPLING, 0, "sampling")                                                \
    XX(ELICITATION, 1, "elicitation")                                          \
    XX(ROOTS, 2, "roots")

enum gw_mcp_client_cap {
#define XX(name, bit, _) GW_MCP_CLIENT_CAP_##name = 1u << (bit),
    GW_MCP_CLIENT_CAP_MAP(XX)
#undef XX
};

/* What the gateway's MCP server can serve for any device: every bit. */
#define GW_MCP_CAPS_ALL 0xfffu

/*
 * caps without unknown bits and without sub-capabilities whose parent is
 * not set (listChanged and subscribe need theirs; tasks.list and
 * tasks.cancel need GW_MCP_CAP_TASKS): what gw_mcp_server_info_parse and
 * gw_mcp_caps_json can say, so parse(caps_json(c)) == normalize(c).
 */
unsigned gw_mcp_caps_normalize(unsigned caps);

/* What a device's initialize result says about it. */
struct gw_mcp_server_info {
    unsigned caps;       /* enum gw_mcp_cap bits */
    char version[16];    /* protocolVersion, "" when absent or too long */
    char name[64];       /* serverInfo.name, cut to fit */
    char server_ver[32]; /* serverInfo.version, cut to fit */
};

/*
 * Reads an initialize result: "capabilities" must be an object (absent
 * means none); a member present as an object sets its bit, and its
 * sub-members (listChanged, subscribe: true; tasks.list, tasks.cancel,
 * tasks.requests.tools.call: objects) set theirs. A sub-capability
 * without its parent is ignored (GW_MCP_CAP_TASKS is the parent of
 * tasks.list and tasks.cancel). serverInfo and protocolVersion are
 * copied when strings. GW_EPROTO when result is not an object or
 * capabilities is present and not an object, or a member read here is
 * repeated (out->caps then 0); GW_EINVAL for NULL.
 */
GW_MUST_CHECK int gw_mcp_server_info_parse(const cJSON *result,
                                           struct gw_mcp_server_info *out);

/* The client capability bits an initialize's params declare (sampling,
 * elicitation, roots present as objects); 0 for anything malformed. */
unsigned gw_mcp_client_caps_parse(const cJSON *params);

/*
 * The server capabilities object for caps: tools{listChanged},
 * resources{subscribe,listChanged}, prompts{listChanged}, completions{},
 * logging{}, tasks{list{},cancel{},requests{tools{call{}}}}, each member
 * only when its bit is set. A new object, NULL on OOM.
 */
cJSON *gw_mcp_caps_json(unsigned caps);

/*
 * The capability a request method needs of a server (device), e.g.
 * resources/read -> GW_MCP_CAP_RESOURCES, resources/subscribe ->
 * GW_MCP_CAP_RESOURCES_SUBSCRIBE, tasks/list -> GW_MCP_CAP_TASKS_LIST;
 * 0 for methods every server answers (initialize, ping) and for methods
 * the table does not know (those pass to the device as they are).
 */
unsigned gw_mcp_method_cap(const char *method);

/* The client capability a device-initiated request needs
 * (sampling/createMessage, elicitation/create, roots/list), else 0. */
unsigned gw_mcp_method_client_cap(const char *method);

/* The name of one capability bit ("resources.subscribe", ...); "?" for
 * anything but a single known bit. */
const char *gw_mcp_cap_name(unsigned cap);
const char *gw_mcp_client_cap_name(unsigned cap);

/*
 * MCP logging levels (RFC 5424 order): debug 0 .. emergency 7.
 * GW_EPROTO for anything else.
 */
#define GW_MCP_LOG_LEVEL_MAP(XX)                                               \
    XX(DEBUG, "debug")                                                         \
    XX(INFO, "info")                                                           \
    XX(NOTICE, "notice")                                                       \
    XX(WARNING, "warning")                                                     \
    XX(ERROR, "error")                                                         \
    XX(CRITICAL, "critical")                                                   \
    XX(ALERT, "alert")                                                         \
    XX(EMERGENCY, "emergency")

enum gw_mcp_log_level {
#define XX(name, _) GW_MCP_LOG_##name,
    GW_MCP_LOG_LEVEL_MAP(XX)
#undef XX
        GW_MCP_LOG_LEVEL_COUNT_
};

GW_MUST_CHECK int gw_mcp_log_level_parse(const char *s,
                                         enum gw_mcp_log_level *out);
const char *gw_mcp_log_level_name(enum gw_mcp_log_level level);

#endif /* GW_CODEC_MCP_CAPS_H */
