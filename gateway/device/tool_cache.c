/* A device's tools and who may use them; see tool_cache.h. */
#include "gateway/device/tool_cache.h"

#include <stdio.h>
#include <string.h>

#include "codec/mcp_tools.h"
#include "gateway/device/shared_lists_int.h"

static const char *const list_state_names[GW_TOOL_LIST_COUNT_] = {
#define XX(name, text) [GW_TOOL_LIST_##name] = text,
    GW_TOOL_LIST_MAP(XX)
#undef XX
};

const char *gw_tool_list_state_name(enum gw_tool_list_state state)
{
    return (unsigned)state < GW_TOOL_LIST_COUNT_ ? list_state_names[state]
                                                 : "?";
}

void gw_tool_cache_init(struct gw_tool_cache *c)
{
    memset(c, 0, sizeof(*c));
    c->state = GW_TOOL_LIST_NONE;
}

void gw_tool_cache_clear(struct gw_tool_cache *c)
{
    gw__device_list_unshare(c->tools);
    c->tools = NULL;
    c->serial++;
    c->state = GW_TOOL_LIST_NONE;
}

void gw_tool_cache_begin(struct gw_tool_cache *c)
{
    c->state = GW_TOOL_LIST_PENDING;
}

void gw_tool_cache_set(struct gw_tool_cache *c, cJSON *tools, bool truncated)
{
    const cJSON *old = c->tools;

    /* The new list first: an unchanged one keeps its copy. */
    c->tools = gw__device_list_share(tools);
    gw__device_list_unshare(old);
    c->serial++;
    c->state = truncated ? GW_TOOL_LIST_TRUNCATED : GW_TOOL_LIST_COMPLETE;
}

void gw_tool_cache_fail(struct gw_tool_cache *c)
{
    gw__device_list_unshare(c->tools);
    c->tools = NULL;
    c->serial++;
    c->state = GW_TOOL_LIST_FAILED;
}

bool gw_tool_cache_complete(const struct gw_tool_cache *c)
{
    return c->state == GW_TOOL_LIST_COMPLETE;
}

int gw_tool_cache_count(const struct gw_tool_cache *c)
{
    return c->tools != NULL ? cJSON_GetArraySize(c->tools) : 0;
}

bool gw_tool_visible(const cJSON *tool, enum gw_tool_caller caller,
                     bool expose_user_tools)
{
    return caller == GW_TOOLS_FOR_OPERATOR || expose_user_tools ||
           !gw_mcp_tool_user_only(tool);
}

static const cJSON *find_tool(const struct gw_tool_cache *c, const char *name)
{
    const cJSON *t;

    cJSON_ArrayForEach(t, c->tools)
    {
        const char *n =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "name"));
        if (n != NULL && strcmp(n, name) == 0) {
            return t;
        }
    }
    return NULL;
}

/* Why nothing can be decided from the list, for an AI caller. */
static const char *unusable_why(enum gw_tool_list_state state)
{
    switch (state) {
    case GW_TOOL_LIST_PENDING:
        return "the device's tool list is being read; try again shortly";
    case GW_TOOL_LIST_TRUNCATED:
        return "the device has more tools than mcp.max_tools; its tools "
               "cannot be called until the list fits";
    case GW_TOOL_LIST_FAILED:
        return "the device's tool list could not be read";
    default:
        return "the device's tool list is not known (mcp.discover is off "
               "or the device has not been asked yet)";
    }
}

bool gw_tool_cache_may_call(const struct gw_tool_cache *c,
                            enum gw_tool_caller caller, const char *name,
                            bool expose_user_tools, char *why, size_t cap)
{
    const cJSON *tool;

    if (name == NULL || name[0] == '\0') {
        snprintf(why, cap, "tools/call needs a tool name");
        return false;
    }
    if (!gw_tool_cache_complete(c)) {
        if (caller == GW_TOOLS_FOR_OPERATOR) {
            return true;
        }
        snprintf(why, cap, "Tool %.128s refused: %s", name,
                 unusable_why(c->state));
        return false;
    }
    tool = find_tool(c, name);
    if (tool == NULL || !gw_tool_visible(tool, caller, expose_user_tools)) {
        /* A hidden tool is as unknown to the caller as a missing one. */
        snprintf(why, cap, "Unknown tool: %.128s", name);
        return false;
    }
    return true;
}

cJSON *gw_tool_cache_visible(const struct gw_tool_cache *c,
                             enum gw_tool_caller caller, bool expose_user_tools)
{
    const cJSON *t;
    cJSON *out;

    if (c->tools == NULL || (out = cJSON_CreateArray()) == NULL) {
        return NULL;
    }
    cJSON_ArrayForEach(t, c->tools)
    {
        if (!gw_tool_visible(t, caller, expose_user_tools)) {
            continue;
        }
        cJSON *copy = cJSON_Duplicate(t, 1);
        if (copy == NULL || !cJSON_AddItemToArray(out, copy)) {
            cJSON_Delete(copy);
            cJSON_Delete(out);
            return NULL;
        }
    }
    return out;
}
