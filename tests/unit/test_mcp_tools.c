/* MCP tool lists: page checks and copying, user-only marks, tool names,
 * device labels and aggregated names both ways. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec/mcp_tools.h"

#define MAC_ID "GID_test@@@a0_85_e3_f4_49_34"
#define UUID   "36c98363-3656-43cb-a00f-8bced2391a90"
#define LABEL  "a085e3f44934-903e5920529d25d4" /* of MAC_ID "@@@" UUID */
#define TOOL_OK                                                                \
    "{\"name\":\"self.get_device_status\",\"description\":\"d\","              \
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{}}}"

struct page_case {
    const char *name;
    const char *result; /* JSON text, NULL for a NULL result */
    int err;
    int count;        /* tools appended on success */
    const char *next; /* expected cursor on success */
};

static const struct page_case page_cases[] = {
    {"empty last page", "{\"tools\":[]}", 0, 0, NULL},
    {"page with cursor",
     "{\"tools\":[" TOOL_OK "],\"nextCursor\":\"self.audio_speaker.set\"}", 0,
     1, "self.audio_speaker.set"},
    {"empty cursor ends",
     "{\"tools\":[" TOOL_OK "," TOOL_OK "],\"nextCursor\":\"\"}", 0, 2, NULL},
    {"null cursor ends", "{\"tools\":[" TOOL_OK "],\"nextCursor\":null}", 0, 1,
     NULL},
    {"name only", "{\"tools\":[{\"name\":\"x\"}]}", 0, 1, NULL},
    {"name any text",
     "{\"tools\":[{\"name\":\"\xe4\xb8\xad \xe6\x96\x87/x\"}]}", 0, 1, NULL},
    {"other members kept",
     "{\"tools\":[{\"name\":\"x\",\"annotations\":{\"audience\":[\"user\"]}}],"
     "\"_meta\":{}}",
     0, 1, NULL},
    {"NULL result", NULL, GW_EPROTO, 0, NULL},
    {"result array", "[]", GW_EPROTO, 0, NULL},
    {"no tools", "{\"nextCursor\":\"a\"}", GW_EPROTO, 0, NULL},
    {"tools object", "{\"tools\":{}}", GW_EPROTO, 0, NULL},
    {"tools null", "{\"tools\":null}", GW_EPROTO, 0, NULL},
    {"cursor number", "{\"tools\":[],\"nextCursor\":1}", GW_EPROTO, 0, NULL},
    {"tool string", "{\"tools\":[\"x\"]}", GW_EPROTO, 0, NULL},
    {"tool without name", "{\"tools\":[{\"description\":\"d\"}]}", GW_EPROTO, 0,
     NULL},
    {"empty name", "{\"tools\":[{\"name\":\"\"}]}", GW_EPROTO, 0, NULL},
    {"number name", "{\"tools\":[{\"name\":1}]}", GW_EPROTO, 0, NULL},
    {"schema array", "{\"tools\":[{\"name\":\"x\",\"inputSchema\":[]}]}",
     GW_EPROTO, 0, NULL},
    {"schema string", "{\"tools\":[{\"name\":\"x\",\"inputSchema\":\"o\"}]}",
     GW_EPROTO, 0, NULL},
    {"description number", "{\"tools\":[{\"name\":\"x\",\"description\":3}]}",
     GW_EPROTO, 0, NULL},
    {"bad tool after good", "{\"tools\":[" TOOL_OK ",{\"name\":null}]}",
     GW_EPROTO, 0, NULL},
    {"duplicate tools", "{\"tools\":[],\"tools\":[]}", GW_EPROTO, 0, NULL},
    {"duplicate cursor",
     "{\"tools\":[],\"nextCursor\":\"a\",\"nextCursor\":\"\"}", GW_EPROTO, 0,
     NULL},
    {"duplicate name", "{\"tools\":[{\"name\":\"a\",\"name\":\"b\"}]}",
     GW_EPROTO, 0, NULL},
};

static void test_page_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(page_cases) / sizeof(page_cases[0]); i++) {
        const struct page_case *c = &page_cases[i];
        cJSON *result = c->result != NULL ? cJSON_Parse(c->result) : NULL;
        cJSON *tools = cJSON_Parse("[{\"name\":\"earlier\"}]");
        const char *next = "unset";
        int err;

        print_message("case: %s\n", c->name);
        assert_true(c->result == NULL || result != NULL);
        assert_non_null(tools);
        err = gw_mcp_tools_page_parse(result, tools, &next);
        assert_int_equal(err, c->err);
        if (err != 0) {
            assert_int_equal(cJSON_GetArraySize(tools), 1);
            assert_string_equal(next, "unset");
        } else {
            assert_int_equal(cJSON_GetArraySize(tools), 1 + c->count);
            if (c->next == NULL) {
                assert_null(next);
            } else {
                assert_non_null(next);
                assert_string_equal(next, c->next);
            }
        }
        cJSON_Delete(result);
        cJSON_Delete(tools);
    }
}

/* Two pages accumulate; the copies outlive the pages. */
static void test_page_accumulate(void **state)
{
    cJSON *p1 = cJSON_Parse("{\"tools\":[{\"name\":\"a\"},{\"name\":\"b\"}],"
                            "\"nextCursor\":\"c\"}");
    cJSON *p2 = cJSON_Parse("{\"tools\":[{\"name\":\"c\"}]}");
    cJSON *tools = cJSON_CreateArray();
    const char *next = NULL;
    const char *want[] = {"a", "b", "c"};
    int i = 0;
    const cJSON *tool;

    (void)state;
    assert_non_null(p1);
    assert_non_null(p2);
    assert_non_null(tools);
    assert_int_equal(gw_mcp_tools_page_parse(p1, tools, &next), 0);
    assert_string_equal(next, "c");
    assert_int_equal(gw_mcp_tools_page_parse(p2, tools, &next), 0);
    assert_null(next);
    cJSON_Delete(p1);
    cJSON_Delete(p2);
    assert_int_equal(cJSON_GetArraySize(tools), 3);
    cJSON_ArrayForEach(tool, tools)
    {
        assert_string_equal(
            cJSON_GetObjectItemCaseSensitive(tool, "name")->valuestring,
            want[i++]);
    }
    cJSON_Delete(tools);
}

static void test_page_args(void **state)
{
    cJSON *page = cJSON_Parse("{\"tools\":[]}");
    cJSON *not_array = cJSON_CreateObject();
    cJSON *tools = cJSON_CreateArray();
    const char *next;

    (void)state;
    assert_int_equal(gw_mcp_tools_page_parse(page, NULL, &next), GW_EINVAL);
    assert_int_equal(gw_mcp_tools_page_parse(page, not_array, &next),
                     GW_EINVAL);
    assert_int_equal(gw_mcp_tools_page_parse(page, tools, NULL), GW_EINVAL);
    cJSON_Delete(page);
    cJSON_Delete(not_array);
    cJSON_Delete(tools);
}

struct user_case {
    const char *name;
    const char *tool;
    bool user_only;
};

static const struct user_case user_cases[] = {
    {"firmware user-only",
     "{\"name\":\"self.reboot\",\"annotations\":{\"audience\":[\"user\"]}}",
     true},
    {"user and assistant",
     "{\"name\":\"x\",\"annotations\":{\"audience\":[\"user\",\"assistant\"]}}",
     false},
    {"assistant and user",
     "{\"name\":\"x\",\"annotations\":{\"audience\":[\"assistant\",\"user\"]}}",
     false},
    {"assistant only",
     "{\"name\":\"x\",\"annotations\":{\"audience\":[\"assistant\"]}}", false},
    {"empty audience", "{\"name\":\"x\",\"annotations\":{\"audience\":[]}}",
     false},
    {"no annotations", "{\"name\":\"x\"}", false},
    {"no audience", "{\"name\":\"x\",\"annotations\":{\"readOnlyHint\":true}}",
     false},
    {"audience string",
     "{\"name\":\"x\",\"annotations\":{\"audience\":\"user\"}}", false},
    {"other entries ignored",
     "{\"name\":\"x\",\"annotations\":{\"audience\":[1,null,\"user\"]}}", true},
    {"case matters",
     "{\"name\":\"x\",\"annotations\":{\"audience\":[\"User\"]}}", false},
    {"annotations array", "{\"name\":\"x\",\"annotations\":[\"user\"]}", false},
    {"tool array", "[{\"annotations\":{\"audience\":[\"user\"]}}]", false},
};

static void test_user_only(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(user_cases) / sizeof(user_cases[0]); i++) {
        cJSON *tool = cJSON_Parse(user_cases[i].tool);

        print_message("case: %s\n", user_cases[i].name);
        assert_non_null(tool);
        assert_int_equal(gw_mcp_tool_user_only(tool), user_cases[i].user_only);
        cJSON_Delete(tool);
    }
    assert_false(gw_mcp_tool_user_only(NULL));
}

static void test_name_valid(void **state)
{
    char name[GW_MCP_TOOL_NAME_MAX + 2];

    (void)state;
    memset(name, 'a', sizeof(name));
    assert_true(gw_mcp_tool_name_valid(name, 1));
    assert_true(gw_mcp_tool_name_valid(name, GW_MCP_TOOL_NAME_MAX));
    assert_false(gw_mcp_tool_name_valid(name, GW_MCP_TOOL_NAME_MAX + 1));
    assert_false(gw_mcp_tool_name_valid(name, 0));
    assert_false(gw_mcp_tool_name_valid(NULL, 1));
    assert_true(gw_mcp_tool_name_valid("self.audio-speaker_Set9", 23));
    assert_false(gw_mcp_tool_name_valid("a b", 3));
    assert_false(gw_mcp_tool_name_valid("a/b", 3));
    assert_false(gw_mcp_tool_name_valid("a:b", 3));
    assert_false(gw_mcp_tool_name_valid("a\0b", 3));
    assert_false(gw_mcp_tool_name_valid("\xc3\xa9", 2));
    /* Only len bytes count. */
    assert_true(gw_mcp_tool_name_valid("ab cd", 2));
}

struct label_case {
    const char *name;
    const char *id;
    const char *label;
};

static const struct label_case label_cases[] = {
    {"firmware id", MAC_ID "@@@" UUID, LABEL},
    {"upper-case MAC", "GID_test@@@A0_85_E3_F4_49_34@@@" UUID,
     "a085e3f44934-5191fe28ac4a98da"},
    {"legacy id", MAC_ID, "a085e3f44934-97f6eb6ee46db47d"},
    {"no MAC", "foobar", "device000000-c3ab8ff13720e8ad"},
    {"one byte", "a", "device000000-ca978112ca1bbdca"},
};

static void test_label(void **state)
{
    char out[GW_MCP_LABEL_LEN + 1];
    char other[GW_MCP_LABEL_LEN + 1];
    char *long_id = malloc(200);

    (void)state;
    for (size_t i = 0; i < sizeof(label_cases) / sizeof(label_cases[0]); i++) {
        const struct label_case *c = &label_cases[i];

        print_message("case: %s\n", c->name);
        assert_int_equal(gw_mcp_device_label(c->id, strlen(c->id), out), 0);
        assert_string_equal(out, c->label);
        assert_int_equal(strlen(out), GW_MCP_LABEL_LEN);
    }
    /* Same MAC, other uuid: same first half, other hash. */
    assert_int_equal(
        gw_mcp_device_label(MAC_ID "@@@u2", strlen(MAC_ID "@@@u2"), other), 0);
    assert_memory_equal(other, LABEL, 13);
    assert_string_not_equal(other, LABEL);
    /* Only len bytes are read. */
    assert_int_equal(gw_mcp_device_label("foobarXYZ", 6, out), 0);
    assert_string_equal(out, "device000000-c3ab8ff13720e8ad");
    /* Longer than a client id may be: no MAC taken from it. */
    assert_non_null(long_id);
    memset(long_id, 'g', 200);
    memcpy(long_id, MAC_ID "@@@", strlen(MAC_ID "@@@"));
    assert_int_equal(gw_mcp_device_label(long_id, 200, out), 0);
    assert_memory_equal(out, "device000000-", 13);
    free(long_id);
    /* Two ids with one MAC crafted to share their FNV-1a-32 (974587cb),
     * which once made one label of them: the hash now tells them apart. */
    assert_int_equal(gw_mcp_device_label(MAC_ID "@@@x422789",
                                         strlen(MAC_ID "@@@x422789"), out),
                     0);
    assert_int_equal(gw_mcp_device_label(MAC_ID "@@@x639192",
                                         strlen(MAC_ID "@@@x639192"), other),
                     0);
    assert_string_equal(out, "a085e3f44934-3ca512d881d1d421");
    assert_string_equal(other, "a085e3f44934-57661189cd7c0842");
    assert_int_equal(gw_mcp_device_label("", 0, out), GW_EINVAL);
    assert_int_equal(gw_mcp_device_label(NULL, 3, out), GW_EINVAL);
}

static void test_aggregate_name(void **state)
{
    char out[GW_MCP_TOOL_NAME_MAX + 8];
    char tool[GW_MCP_TOOL_NAME_MAX + 1];
    const size_t fit = GW_MCP_TOOL_NAME_MAX - GW_MCP_LABEL_LEN - 1; /* 98 */

    (void)state;
    assert_int_equal(
        gw_mcp_aggregate_name(LABEL, "self.get_device_status", out, 64), 0);
    assert_string_equal(out, LABEL ".self.get_device_status");
    assert_int_equal(gw_mcp_aggregate_name("device000000-0000000000000000", "x",
                                           out, sizeof(out)),
                     0);
    assert_string_equal(out, "device000000-0000000000000000.x");
    /* 128 characters fit, 129 do not. */
    memset(tool, 't', fit + 1);
    tool[fit] = '\0';
    assert_int_equal(gw_mcp_aggregate_name(LABEL, tool, out, sizeof(out)), 0);
    assert_int_equal(strlen(out), GW_MCP_TOOL_NAME_MAX);
    tool[fit] = 't';
    tool[fit + 1] = '\0';
    assert_int_equal(gw_mcp_aggregate_name(LABEL, tool, out, sizeof(out)),
                     GW_EPROTO);
    assert_string_equal(out, "");
    /* cap counts the NUL. */
    assert_int_equal(gw_mcp_aggregate_name(LABEL, "ab", out, 33), 0);
    assert_int_equal(gw_mcp_aggregate_name(LABEL, "ab", out, 32), GW_ENOSPC);
    assert_string_equal(out, "");
    assert_int_equal(gw_mcp_aggregate_name(LABEL, "ab", out, 0), GW_ENOSPC);
    /* Device names MCP would not take. */
    assert_int_equal(gw_mcp_aggregate_name(LABEL, "", out, sizeof(out)),
                     GW_EPROTO);
    assert_int_equal(gw_mcp_aggregate_name(LABEL, "a b", out, sizeof(out)),
                     GW_EPROTO);
    assert_int_equal(
        gw_mcp_aggregate_name(LABEL, "\xe4\xb8\xad", out, sizeof(out)),
        GW_EPROTO);
    /* Labels the gateway would not make. */
    assert_int_equal(gw_mcp_aggregate_name("A085E3F44934-903e5920529d25d4", "x",
                                           out, sizeof(out)),
                     GW_EINVAL);
    assert_int_equal(gw_mcp_aggregate_name("a085e3f44934-903e5920529d25d", "x",
                                           out, sizeof(out)),
                     GW_EINVAL);
    assert_int_equal(gw_mcp_aggregate_name(LABEL "0", "x", out, sizeof(out)),
                     GW_EINVAL);
    assert_int_equal(gw_mcp_aggregate_name(NULL, "x", out, sizeof(out)),
                     GW_EINVAL);
    assert_int_equal(gw_mcp_aggregate_name(LABEL, NULL, out, sizeof(out)),
                     GW_EINVAL);
    assert_int_equal(gw_mcp_aggregate_name(LABEL, "x", NULL, 10), GW_EINVAL);
}

struct split_case {
    const char *name;
    const char *text;
    int err;
    const char *label; /* expected on success */
    const char *tool;
};

static const struct split_case split_cases[] = {
    {"made name", LABEL ".self.get_device_status", 0, LABEL,
     "self.get_device_status"},
    {"no MAC", "device000000-c3ab8ff13720e8ad.x", 0,
     "device000000-c3ab8ff13720e8ad", "x"},
    {"dots and dashes in tool", LABEL ".a.b-c_d", 0, LABEL, "a.b-c_d"},
    {"no tool", LABEL ".", GW_EPROTO, NULL, NULL},
    {"no dot", LABEL, GW_EPROTO, NULL, NULL},
    {"plain tool", "self.reboot", GW_EPROTO, NULL, NULL},
    {"empty", "", GW_EPROTO, NULL, NULL},
    {"upper-case label", "A085E3F44934-903e5920529d25d4.x", GW_EPROTO, NULL,
     NULL},
    {"short hash", "a085e3f44934-903e5920529d25d.x", GW_EPROTO, NULL, NULL},
    {"long hash", "a085e3f44934-903e5920529d25d40.x", GW_EPROTO, NULL, NULL},
    {"underscore separator", "a085e3f44934_903e5920529d25d4.x", GW_EPROTO, NULL,
     NULL},
    {"non-hex MAC", "g085e3f44934-903e5920529d25d4.x", GW_EPROTO, NULL, NULL},
    {"almost no MAC", "device000001-903e5920529d25d4.x", GW_EPROTO, NULL, NULL},
    {"bad tool char", LABEL ".a b", GW_EPROTO, NULL, NULL},
    {"slash in tool", LABEL ".a/b", GW_EPROTO, NULL, NULL},
};

static void test_split_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(split_cases) / sizeof(split_cases[0]); i++) {
        const struct split_case *c = &split_cases[i];
        char label[GW_MCP_LABEL_LEN + 1] = "unset";
        const char *tool = NULL;
        int err;

        print_message("case: %s\n", c->name);
        err = gw_mcp_aggregate_split(c->text, label, &tool);
        assert_int_equal(err, c->err);
        if (err == 0) {
            assert_string_equal(label, c->label);
            assert_string_equal(tool, c->tool);
            assert_ptr_equal(tool, c->text + GW_MCP_LABEL_LEN + 1);
        } else {
            assert_string_equal(label, "unset");
            assert_null(tool);
        }
    }
}

/* Boundary lengths, and every name made splits back to its parts. */
static void test_split_lengths(void **state)
{
    char name[GW_MCP_TOOL_NAME_MAX + 2];
    char label[GW_MCP_LABEL_LEN + 1];
    const char *tool;

    (void)state;
    memset(name, 'x', sizeof(name));
    memcpy(name, LABEL ".", GW_MCP_LABEL_LEN + 1);
    name[GW_MCP_TOOL_NAME_MAX] = '\0';
    assert_int_equal(gw_mcp_aggregate_split(name, label, &tool), 0);
    assert_int_equal(strlen(tool), GW_MCP_TOOL_NAME_MAX - GW_MCP_LABEL_LEN - 1);
    name[GW_MCP_TOOL_NAME_MAX] = 'x';
    name[GW_MCP_TOOL_NAME_MAX + 1] = '\0';
    assert_int_equal(gw_mcp_aggregate_split(name, label, &tool), GW_EPROTO);

    for (size_t i = 0; i < sizeof(label_cases) / sizeof(label_cases[0]); i++) {
        char made[GW_MCP_LABEL_LEN + 1];

        assert_int_equal(gw_mcp_device_label(label_cases[i].id,
                                             strlen(label_cases[i].id), made),
                         0);
        assert_int_equal(gw_mcp_aggregate_name(made, "self.audio_speaker.mute",
                                               name, sizeof(name)),
                         0);
        assert_int_equal(gw_mcp_aggregate_split(name, label, &tool), 0);
        assert_string_equal(label, made);
        assert_string_equal(tool, "self.audio_speaker.mute");
    }
    assert_int_equal(gw_mcp_aggregate_split(NULL, label, &tool), GW_EINVAL);
    assert_int_equal(gw_mcp_aggregate_split(LABEL ".x", NULL, &tool),
                     GW_EINVAL);
    assert_int_equal(gw_mcp_aggregate_split(LABEL ".x", label, NULL),
                     GW_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_page_table),
        cmocka_unit_test(test_page_accumulate),
        cmocka_unit_test(test_page_args),
        cmocka_unit_test(test_user_only),
        cmocka_unit_test(test_name_valid),
        cmocka_unit_test(test_label),
        cmocka_unit_test(test_aggregate_name),
        cmocka_unit_test(test_split_table),
        cmocka_unit_test(test_split_lengths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
