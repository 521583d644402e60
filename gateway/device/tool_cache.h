/*
 * A device's tool cache and the one place that decides which of its tools
 * a caller may see and call (docs/protocol.md section 7). The decision is
 * an allow-list: a tool is callable only when it is in a complete, current
 * list and visible to the caller. User-only tools (annotations.audience
 * ["user"]) are for the operator alone unless mcp.expose_user_tools.
 */
#ifndef GW_TOOL_CACHE_H
#define GW_TOOL_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* Who wants the tools. */
#define GW_TOOL_CALLER_MAP(XX)                                                 \
    XX(BACKEND, "backend")   /* the session's AI backend */                    \
    XX(CLIENT, "client")     /* an MCP client of the gateway's MCP server */   \
    XX(OPERATOR, "operator") /* the management API (manager-api) */

enum gw_tool_caller {
#define XX(name, _) GW_TOOLS_FOR_##name,
    GW_TOOL_CALLER_MAP(XX)
#undef XX
        GW_TOOL_CALLER_COUNT_
};

/* How far the cache's list can be trusted. */
#define GW_TOOL_LIST_MAP(XX)                                                   \
    XX(NONE, "none")           /* never listed (or discovery is off) */        \
    XX(PENDING, "pending")     /* a discovery is reading the list */           \
    XX(COMPLETE, "complete")   /* every tool the device has */                 \
    XX(TRUNCATED, "truncated") /* cut at mcp.max_tools: not every tool */      \
    XX(FAILED, "failed")       /* the last discovery failed */

enum gw_tool_list_state {
#define XX(name, _) GW_TOOL_LIST_##name,
    GW_TOOL_LIST_MAP(XX)
#undef XX
        GW_TOOL_LIST_COUNT_
};

const char *gw_tool_list_state_name(enum gw_tool_list_state state);

struct gw_tool_cache {
    enum gw_tool_list_state state;
    /* the device's tools as listed, or NULL: shared with every device
     * that listed the same, so never to be changed */
    const cJSON *tools;
    uint64_t serial; /* changes whenever tools changes */
};

void gw_tool_cache_init(struct gw_tool_cache *c);
void gw_tool_cache_clear(struct gw_tool_cache *c);

/* A discovery started: the old list is no longer current. */
void gw_tool_cache_begin(struct gw_tool_cache *c);
/* A discovery ended with tools (moved in: the copy kept may be another
 * device's equal one); truncated when the device has more than were
 * kept. */
void gw_tool_cache_set(struct gw_tool_cache *c, cJSON *tools, bool truncated);
/* A discovery failed: the old list is dropped, nothing is callable. */
void gw_tool_cache_fail(struct gw_tool_cache *c);

/* Whether the list holds every tool and is current. */
bool gw_tool_cache_complete(const struct gw_tool_cache *c);
/* Number of tools held (any state). */
int gw_tool_cache_count(const struct gw_tool_cache *c);

/* Whether caller may see tool (a member of c->tools). */
bool gw_tool_visible(const cJSON *tool, enum gw_tool_caller caller,
                     bool expose_user_tools);

/*
 * Whether caller may call the tool named name. On refusal returns false
 * and writes why, ready for a JSON-RPC error message, into why (cap
 * bytes). The operator may call any tool when there is no usable list
 * (manager-api lists the tools itself); once a complete list exists the
 * tool must be in it.
 */
bool gw_tool_cache_may_call(const struct gw_tool_cache *c,
                            enum gw_tool_caller caller, const char *name,
                            bool expose_user_tools, char *why, size_t cap);

/* The tools caller may see: a new array of copies; NULL on OOM or when
 * the cache holds none. */
cJSON *gw_tool_cache_visible(const struct gw_tool_cache *c,
                             enum gw_tool_caller caller,
                             bool expose_user_tools);

#endif /* GW_TOOL_CACHE_H */
