/*
 * The tool cache's allow-list (gateway/device/tool_cache.c): who may call and
 * see which of a device's tools, for each state of its list; and the one
 * copy of a list that caches share (gateway/device/shared_lists.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "gateway/device/mcp_catalog.h"
#include "gateway/device/mcp_catalog_int.h"
#include "gateway/device/shared_lists_int.h"
#include "gateway/device/tool_cache.h"

/* One tool for the AI, one for the user only, one for both audiences
 * (not user-only: the assistant is named too). */
static const char tools_json[] =
    "[{\"name\":\"self.light.set\",\"description\":\"light\","
    "\"inputSchema\":{\"type\":\"object\"}},"
    "{\"name\":\"self.reboot\",\"annotations\":{\"audience\":[\"user\"]}},"
    "{\"name\":\"self.volume\","
    "\"annotations\":{\"audience\":[\"user\",\"assistant\"]}}]";

static const enum gw_tool_caller all_callers[] = {
    GW_TOOLS_FOR_BACKEND, GW_TOOLS_FOR_CLIENT, GW_TOOLS_FOR_OPERATOR};
#define N_CALLERS (sizeof(all_callers) / sizeof(all_callers[0]))

static cJSON *tools_new(void)
{
    cJSON *tools = cJSON_Parse(tools_json);

    assert_non_null(tools);
    return tools;
}

/* A cache holding tools_json as a complete list. */
static void complete_cache(struct gw_tool_cache *c)
{
    gw_tool_cache_init(c);
    gw_tool_cache_begin(c);
    gw_tool_cache_set(c, tools_new(), false);
    assert_int_equal(c->state, GW_TOOL_LIST_COMPLETE);
}

static bool may_call(const struct gw_tool_cache *c, enum gw_tool_caller caller,
                     const char *name, bool expose, char *why, size_t cap)
{
    memset(why, 0, cap);
    return gw_tool_cache_may_call(c, caller, name, expose, why, cap);
}

/* Names of a visible list, comma-joined, for one comparison per case. */
static void names_of(const cJSON *list, char *out, size_t cap)
{
    const cJSON *t;
    size_t n = 0;

    out[0] = '\0';
    cJSON_ArrayForEach(t, list)
    {
        n += (size_t)snprintf(
            out + n, cap - n, "%s%s", n > 0 ? "," : "",
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "name")));
        assert_true(n < cap);
    }
}

static void test_init_and_names(void **state)
{
    struct gw_tool_cache c;

    (void)state;
    gw_tool_cache_init(&c);
    assert_int_equal(c.state, GW_TOOL_LIST_NONE);
    assert_null(c.tools);
    assert_int_equal(c.serial, 0);
    assert_int_equal(gw_tool_cache_count(&c), 0);
    assert_false(gw_tool_cache_complete(&c));
    assert_null(gw_tool_cache_visible(&c, GW_TOOLS_FOR_OPERATOR, true));
    assert_string_equal(gw_tool_list_state_name(GW_TOOL_LIST_NONE), "none");
    assert_string_equal(gw_tool_list_state_name(GW_TOOL_LIST_PENDING),
                        "pending");
    assert_string_equal(gw_tool_list_state_name(GW_TOOL_LIST_COMPLETE),
                        "complete");
    assert_string_equal(gw_tool_list_state_name(GW_TOOL_LIST_TRUNCATED),
                        "truncated");
    assert_string_equal(gw_tool_list_state_name(GW_TOOL_LIST_FAILED), "failed");
    assert_string_equal(gw_tool_list_state_name(GW_TOOL_LIST_COUNT_), "?");
    gw_tool_cache_clear(&c);
}

/* begin marks the list stale without touching it; set, fail and clear
 * replace it and move the serial, which is how listeners see a change. */
static void test_state_and_serial(void **state)
{
    struct gw_tool_cache c;
    cJSON *first = tools_new();

    (void)state;
    gw_tool_cache_init(&c);
    gw_tool_cache_begin(&c);
    assert_int_equal(c.state, GW_TOOL_LIST_PENDING);
    assert_int_equal(c.serial, 0);

    gw_tool_cache_set(&c, first, false);
    assert_int_equal(c.state, GW_TOOL_LIST_COMPLETE);
    assert_ptr_equal(c.tools, first); /* moved in, not copied */
    assert_int_equal(c.serial, 1);
    assert_int_equal(gw_tool_cache_count(&c), 3);
    assert_true(gw_tool_cache_complete(&c));

    gw_tool_cache_begin(&c);
    assert_int_equal(c.state, GW_TOOL_LIST_PENDING);
    assert_int_equal(c.serial, 1);
    assert_ptr_equal(c.tools, first);
    assert_int_equal(gw_tool_cache_count(&c), 3);
    assert_false(gw_tool_cache_complete(&c));

    gw_tool_cache_set(&c, cJSON_CreateArray(), true);
    assert_int_equal(c.state, GW_TOOL_LIST_TRUNCATED);
    assert_int_equal(c.serial, 2);
    assert_int_equal(gw_tool_cache_count(&c), 0);
    assert_false(gw_tool_cache_complete(&c));

    gw_tool_cache_set(&c, tools_new(), false);
    assert_int_equal(c.serial, 3);
    gw_tool_cache_fail(&c);
    assert_int_equal(c.state, GW_TOOL_LIST_FAILED);
    assert_null(c.tools);
    assert_int_equal(c.serial, 4);
    assert_int_equal(gw_tool_cache_count(&c), 0);

    gw_tool_cache_set(&c, tools_new(), false);
    gw_tool_cache_clear(&c);
    assert_int_equal(c.state, GW_TOOL_LIST_NONE);
    assert_null(c.tools);
    assert_int_equal(c.serial, 6);
}

static void test_complete_list(void **state)
{
    struct gw_tool_cache c;
    char why[256];

    (void)state;
    complete_cache(&c);
    for (size_t i = 0; i < N_CALLERS; i++) {
        assert_true(may_call(&c, all_callers[i], "self.light.set", false, why,
                             sizeof(why)));
        assert_true(may_call(&c, all_callers[i], "self.volume", false, why,
                             sizeof(why)));
    }

    /* User-only: hidden from AI callers, as unknown as a missing tool. */
    assert_false(may_call(&c, GW_TOOLS_FOR_BACKEND, "self.reboot", false, why,
                          sizeof(why)));
    assert_string_equal(why, "Unknown tool: self.reboot");
    assert_false(may_call(&c, GW_TOOLS_FOR_CLIENT, "self.reboot", false, why,
                          sizeof(why)));
    assert_string_equal(why, "Unknown tool: self.reboot");
    assert_true(may_call(&c, GW_TOOLS_FOR_OPERATOR, "self.reboot", false, why,
                         sizeof(why)));
    assert_true(may_call(&c, GW_TOOLS_FOR_BACKEND, "self.reboot", true, why,
                         sizeof(why)));
    assert_true(may_call(&c, GW_TOOLS_FOR_CLIENT, "self.reboot", true, why,
                         sizeof(why)));

    /* Not in a complete list: nobody may call it, not even the operator,
     * whatever expose_user_tools says. */
    for (size_t i = 0; i < N_CALLERS; i++) {
        for (int expose = 0; expose < 2; expose++) {
            assert_false(may_call(&c, all_callers[i], "self.missing",
                                  expose != 0, why, sizeof(why)));
            assert_string_equal(why, "Unknown tool: self.missing");
        }
        /* Names match exactly: no prefix, no case folding. */
        assert_false(
            may_call(&c, all_callers[i], "self.light", true, why, sizeof(why)));
        assert_false(may_call(&c, all_callers[i], "SELF.LIGHT.SET", true, why,
                              sizeof(why)));
    }
    gw_tool_cache_clear(&c);
}

/* While the list is not complete and current, AI callers are refused with
 * the reason; the operator (manager-api lists tools itself) is not. */
static void test_unusable_list(void **state)
{
    static const struct {
        enum gw_tool_list_state state;
        const char *reason;
    } cases[] = {
        {GW_TOOL_LIST_NONE, "is not known"},
        {GW_TOOL_LIST_PENDING, "is being read"},
        {GW_TOOL_LIST_FAILED, "could not be read"},
        {GW_TOOL_LIST_TRUNCATED, "more tools than mcp.max_tools"},
    };
    char why[256];

    (void)state;
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct gw_tool_cache c;

        gw_tool_cache_init(&c);
        switch (cases[k].state) {
        case GW_TOOL_LIST_PENDING:
            /* An old list that names the tool does not count while a new
             * one is read. */
            gw_tool_cache_set(&c, tools_new(), false);
            gw_tool_cache_begin(&c);
            break;
        case GW_TOOL_LIST_FAILED:
            gw_tool_cache_set(&c, tools_new(), false);
            gw_tool_cache_fail(&c);
            break;
        case GW_TOOL_LIST_TRUNCATED:
            gw_tool_cache_set(&c, tools_new(), true);
            break;
        default:
            break;
        }
        assert_int_equal(c.state, cases[k].state);
        for (int who = 0; who < 2; who++) {
            enum gw_tool_caller caller = all_callers[who];
            for (int expose = 0; expose < 2; expose++) {
                assert_false(may_call(&c, caller, "self.light.set", expose != 0,
                                      why, sizeof(why)));
                assert_non_null(strstr(why, "self.light.set"));
                assert_non_null(strstr(why, cases[k].reason));
            }
        }
        assert_true(may_call(&c, GW_TOOLS_FOR_OPERATOR, "self.light.set", false,
                             why, sizeof(why)));
        assert_true(may_call(&c, GW_TOOLS_FOR_OPERATOR, "self.missing", false,
                             why, sizeof(why)));
        gw_tool_cache_clear(&c);
    }
}

static void test_no_name(void **state)
{
    struct gw_tool_cache c;
    char why[64];

    (void)state;
    complete_cache(&c);
    for (size_t i = 0; i < N_CALLERS; i++) {
        assert_false(may_call(&c, all_callers[i], "", true, why, sizeof(why)));
        assert_string_equal(why, "tools/call needs a tool name");
        assert_false(
            may_call(&c, all_callers[i], NULL, true, why, sizeof(why)));
        assert_string_equal(why, "tools/call needs a tool name");
    }
    gw_tool_cache_clear(&c);
    /* No list at all: the operator still needs a name. */
    assert_false(
        may_call(&c, GW_TOOLS_FOR_OPERATOR, "", false, why, sizeof(why)));
}

/* why is bounded by cap and by the name's cut at 128 bytes. */
static void test_why_bounds(void **state)
{
    struct gw_tool_cache c;
    char name[300];
    char why[512];
    char small[12];

    (void)state;
    memset(name, 'n', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    complete_cache(&c);
    assert_false(
        may_call(&c, GW_TOOLS_FOR_BACKEND, name, false, why, sizeof(why)));
    assert_int_equal(strlen(why), strlen("Unknown tool: ") + 128);
    memset(small, 'x', sizeof(small));
    assert_false(gw_tool_cache_may_call(&c, GW_TOOLS_FOR_BACKEND, name, false,
                                        small, sizeof(small)));
    assert_int_equal(strlen(small), sizeof(small) - 1);
    gw_tool_cache_begin(&c);
    assert_false(
        may_call(&c, GW_TOOLS_FOR_CLIENT, name, false, why, sizeof(why)));
    assert_true(strlen(why) < sizeof(why));
    assert_null(strstr(why, name)); /* cut */
    gw_tool_cache_clear(&c);
}

static void test_visible(void **state)
{
    struct gw_tool_cache c;
    char names[256];
    cJSON *list;

    (void)state;
    complete_cache(&c);
    for (int who = 0; who < 2; who++) {
        list = gw_tool_cache_visible(&c, all_callers[who], false);
        assert_non_null(list);
        names_of(list, names, sizeof(names));
        assert_string_equal(names, "self.light.set,self.volume");
        cJSON_Delete(list);

        list = gw_tool_cache_visible(&c, all_callers[who], true);
        names_of(list, names, sizeof(names));
        assert_string_equal(names, "self.light.set,self.reboot,self.volume");
        cJSON_Delete(list);
    }
    list = gw_tool_cache_visible(&c, GW_TOOLS_FOR_OPERATOR, false);
    names_of(list, names, sizeof(names));
    assert_string_equal(names, "self.light.set,self.reboot,self.volume");
    /* Copies: the caller's list lives apart from the cache's. */
    assert_ptr_not_equal(cJSON_GetArrayItem(list, 0),
                         cJSON_GetArrayItem(c.tools, 0));
    cJSON_Delete(list);
    assert_int_equal(gw_tool_cache_count(&c), 3);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            cJSON_GetArrayItem(c.tools, 0), "description")),
                        "light");

    /* The per-tool rule behind both. */
    const cJSON *reboot = cJSON_GetArrayItem(c.tools, 1);
    assert_false(gw_tool_visible(reboot, GW_TOOLS_FOR_BACKEND, false));
    assert_false(gw_tool_visible(reboot, GW_TOOLS_FOR_CLIENT, false));
    assert_true(gw_tool_visible(reboot, GW_TOOLS_FOR_OPERATOR, false));
    assert_true(gw_tool_visible(reboot, GW_TOOLS_FOR_BACKEND, true));
    assert_true(gw_tool_visible(cJSON_GetArrayItem(c.tools, 0),
                                GW_TOOLS_FOR_BACKEND, false));

    /* An empty complete list is an empty array; no list is NULL. */
    gw_tool_cache_set(&c, cJSON_CreateArray(), false);
    list = gw_tool_cache_visible(&c, GW_TOOLS_FOR_BACKEND, false);
    assert_non_null(list);
    assert_int_equal(cJSON_GetArraySize(list), 0);
    cJSON_Delete(list);
    gw_tool_cache_fail(&c);
    assert_null(gw_tool_cache_visible(&c, GW_TOOLS_FOR_OPERATOR, true));
    gw_tool_cache_clear(&c);
}

static cJSON *parse(const char *json)
{
    cJSON *j = cJSON_Parse(json);

    assert_non_null(j);
    return j;
}

/*
 * Caches holding equal lists hold one copy; a list that differs in any
 * member, key, value or order has its own; the last holder frees it.
 */
static void test_shared_by_content(void **state)
{
    struct gw_tool_cache a, b, c, d;
    struct gw_mcp_catalog cat;

    (void)state;
    gw_tool_cache_init(&a);
    gw_tool_cache_init(&b);
    gw_tool_cache_init(&c);
    gw_tool_cache_init(&d);
    gw__device_catalog_init(&cat);
    assert_int_equal(gw__device_lists_held(), 0);

    gw_tool_cache_set(&a, tools_new(), false);
    gw_tool_cache_set(&b, tools_new(), true); /* the state is each's own */
    assert_ptr_equal(a.tools, b.tools);
    assert_int_equal(gw__device_list_refs(a.tools), 2);
    assert_int_equal(b.state, GW_TOOL_LIST_TRUNCATED);
    assert_int_equal(gw__device_lists_held(), 1);

    /* The same members, keys in another order: another list to show. */
    gw_tool_cache_set(&c,
                      parse("[{\"description\":\"light\",\"name\":"
                            "\"self.light.set\"}]"),
                      false);
    gw_tool_cache_set(&d,
                      parse("[{\"name\":\"self.light.set\","
                            "\"description\":\"light\"}]"),
                      false);
    assert_ptr_not_equal(c.tools, d.tools);
    /* A value of another type, a number changed: not the same either. */
    gw_tool_cache_set(&c, parse("[{\"n\":1}]"), false);
    gw_tool_cache_set(&d, parse("[{\"n\":\"1\"}]"), false);
    assert_ptr_not_equal(c.tools, d.tools);
    gw_tool_cache_set(&d, parse("[{\"n\":2}]"), false);
    assert_ptr_not_equal(c.tools, d.tools);
    gw_tool_cache_set(&d, parse("[{\"n\":1}]"), false);
    assert_ptr_equal(c.tools, d.tools);
    assert_int_equal(gw__device_lists_held(), 2);

    /* A catalog list of equal content is the same copy. */
    gw_mcp_catalog_set(&cat, GW_MCP_LIST_PROMPTS, parse("[{\"n\":1}]"), false);
    assert_ptr_equal(gw_mcp_catalog_items(&cat, GW_MCP_LIST_PROMPTS), c.tools);
    assert_int_equal(gw__device_list_refs(c.tools), 3);

    /* Holders let go; the last frees. */
    gw_tool_cache_fail(&a);
    assert_int_equal(gw__device_list_refs(b.tools), 1);
    gw_tool_cache_clear(&b);
    assert_int_equal(gw__device_lists_held(), 1);
    gw_tool_cache_clear(&c);
    gw__device_catalog_clear(&cat);
    assert_int_equal(gw__device_list_refs(d.tools), 1);
    gw_tool_cache_clear(&d);
    assert_int_equal(gw__device_lists_held(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_and_names),
        cmocka_unit_test(test_state_and_serial),
        cmocka_unit_test(test_complete_list),
        cmocka_unit_test(test_unusable_list),
        cmocka_unit_test(test_no_name),
        cmocka_unit_test(test_why_bounds),
        cmocka_unit_test(test_visible),
        cmocka_unit_test(test_shared_by_content),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
