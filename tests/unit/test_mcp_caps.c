/* MCP capabilities: a device's initialize result, a client's initialize
 * params, the gateway's own capabilities object, which capability each
 * method needs, capability names and logging levels. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec/mcp_caps.h"

#define ESP_CAPS                                                               \
    "{\"tools\":{\"listChanged\":true},"                                       \
    "\"resources\":{\"subscribe\":true,\"listChanged\":true},"                 \
    "\"prompts\":{\"listChanged\":true},\"completions\":{},\"logging\":{},"    \
    "\"tasks\":{\"list\":{},\"cancel\":{},"                                    \
    "\"requests\":{\"tools\":{\"call\":{}}}}}"

struct caps_case {
    const char *name;
    const char *caps; /* the capabilities member's JSON, NULL: absent */
    int err;
    unsigned bits;
};

static const struct caps_case caps_cases[] = {
    {"absent", NULL, 0, 0},
    {"empty", "{}", 0, 0},
    {"stock firmware", "{\"tools\":{}}", 0, GW_MCP_CAP_TOOLS},
    {"esp-mcp, everything", ESP_CAPS, 0, GW_MCP_CAPS_ALL},
    {"tools listChanged", "{\"tools\":{\"listChanged\":true}}", 0,
     GW_MCP_CAP_TOOLS | GW_MCP_CAP_TOOLS_LIST_CHANGED},
    {"listChanged false", "{\"tools\":{\"listChanged\":false}}", 0,
     GW_MCP_CAP_TOOLS},
    {"listChanged 1 is not true", "{\"tools\":{\"listChanged\":1}}", 0,
     GW_MCP_CAP_TOOLS},
    {"listChanged string", "{\"prompts\":{\"listChanged\":\"true\"}}", 0,
     GW_MCP_CAP_PROMPTS},
    {"tools true is not an object", "{\"tools\":true}", 0, 0},
    {"tools null", "{\"tools\":null}", 0, 0},
    {"tools array", "{\"tools\":[]}", 0, 0},
    {"resources subscribe only", "{\"resources\":{\"subscribe\":true}}", 0,
     GW_MCP_CAP_RESOURCES | GW_MCP_CAP_RESOURCES_SUBSCRIBE},
    {"resources listChanged only", "{\"resources\":{\"listChanged\":true}}", 0,
     GW_MCP_CAP_RESOURCES | GW_MCP_CAP_RESOURCES_LIST_CHANGED},
    {"resources bare", "{\"resources\":{}}", 0, GW_MCP_CAP_RESOURCES},
    {"completions, logging", "{\"completions\":{},\"logging\":{}}", 0,
     GW_MCP_CAP_COMPLETIONS | GW_MCP_CAP_LOGGING},
    {"logging true", "{\"logging\":true}", 0, 0},
    {"tasks tools.call", "{\"tasks\":{\"requests\":{\"tools\":{\"call\":{}}}}}",
     0, GW_MCP_CAP_TASKS},
    /* Sub-capabilities without their parent count for nothing. */
    {"tasks list without call", "{\"tasks\":{\"list\":{},\"cancel\":{}}}", 0,
     0},
    {"tasks call true",
     "{\"tasks\":{\"requests\":{\"tools\":{\"call\":true}}}}", 0, 0},
    {"tasks requests no tools", "{\"tasks\":{\"requests\":{},\"list\":{}}}", 0,
     0},
    {"tasks list true",
     "{\"tasks\":{\"list\":true,\"requests\":{\"tools\":{\"call\":{}}}}}", 0,
     GW_MCP_CAP_TASKS},
    {"tasks cancel",
     "{\"tasks\":{\"cancel\":{},\"requests\":{\"tools\":{\"call\":{}}}}}", 0,
     GW_MCP_CAP_TASKS | GW_MCP_CAP_TASKS_CANCEL},
    {"listChanged at the top", "{\"listChanged\":true,\"subscribe\":true}", 0,
     0},
    {"subscribe under tools", "{\"tools\":{\"subscribe\":true}}", 0,
     GW_MCP_CAP_TOOLS},
    {"unknown members", "{\"experimental\":{\"x\":{}},\"sampling\":{}}", 0, 0},
    {"null", "null", GW_EPROTO, 0},
    {"array", "[]", GW_EPROTO, 0},
    {"string", "\"tools\"", GW_EPROTO, 0},
    {"repeated tools", "{\"tools\":{},\"tools\":{}}", GW_EPROTO, 0},
    {"repeated listChanged",
     "{\"tools\":{\"listChanged\":true,\"listChanged\":false}}", GW_EPROTO, 0},
    {"repeated tasks.list",
     "{\"tasks\":{\"list\":{},\"list\":{},\"requests\":{\"tools\":"
     "{\"call\":{}}}}}",
     GW_EPROTO, 0},
};

static cJSON *result_with(const char *caps)
{
    cJSON *result = cJSON_Parse("{\"protocolVersion\":\"2025-11-25\"}");

    assert_non_null(result);
    if (caps != NULL) {
        cJSON *c = cJSON_Parse(caps);
        assert_non_null(c);
        cJSON_AddItemToObject(result, "capabilities", c);
    }
    return result;
}

static void test_server_caps_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(caps_cases) / sizeof(caps_cases[0]); i++) {
        const struct caps_case *c = &caps_cases[i];
        cJSON *result = result_with(c->caps);
        struct gw_mcp_server_info info;
        int err;

        memset(&info, 0x5a, sizeof(info));
        err = gw_mcp_server_info_parse(result, &info);
        if (err != c->err || info.caps != c->bits) {
            fail_msg("%s: err %d caps %#x, want %d %#x", c->name, err,
                     info.caps, c->err, c->bits);
        }
        cJSON_Delete(result);
    }
}

static void test_server_info(void **state)
{
    struct gw_mcp_server_info info;
    char name[200], text[512];
    cJSON *result;

    (void)state;
    result = cJSON_Parse("{\"protocolVersion\":\"2024-11-05\",\"capabilities\":"
                         "{\"tools\":{}},\"serverInfo\":{\"name\":\"xiaozhi\","
                         "\"version\":\"1.9.2\"}}");
    assert_int_equal(gw_mcp_server_info_parse(result, &info), 0);
    assert_int_equal(info.caps, GW_MCP_CAP_TOOLS);
    assert_string_equal(info.version, "2024-11-05");
    assert_string_equal(info.name, "xiaozhi");
    assert_string_equal(info.server_ver, "1.9.2");
    cJSON_Delete(result);

    /* Versions that do not fit are none; 15 bytes fit. */
    result = cJSON_Parse("{\"protocolVersion\":\"2025-11-25-abcde\"}");
    assert_int_equal(gw_mcp_server_info_parse(result, &info), 0);
    assert_string_equal(info.version, "");
    cJSON_Delete(result);
    result = cJSON_Parse("{\"protocolVersion\":\"2025-11-25-abcd\"}");
    assert_int_equal(gw_mcp_server_info_parse(result, &info), 0);
    assert_string_equal(info.version, "2025-11-25-abcd");
    cJSON_Delete(result);

    /* Not strings: left empty, not refused. */
    result = cJSON_Parse("{\"protocolVersion\":20241105,\"serverInfo\":"
                         "{\"name\":7,\"version\":null}}");
    assert_int_equal(gw_mcp_server_info_parse(result, &info), 0);
    assert_string_equal(info.version, "");
    assert_string_equal(info.name, "");
    assert_string_equal(info.server_ver, "");
    cJSON_Delete(result);
    result = cJSON_Parse("{\"serverInfo\":\"sim\"}");
    assert_int_equal(gw_mcp_server_info_parse(result, &info), 0);
    assert_string_equal(info.name, "");
    cJSON_Delete(result);

    /* A long name is cut to 63 bytes, never inside a UTF-8 sequence. */
    memset(name, 'n', 100);
    name[100] = '\0';
    snprintf(text, sizeof(text), "{\"serverInfo\":{\"name\":\"%s\"}}", name);
    result = cJSON_Parse(text);
    assert_int_equal(gw_mcp_server_info_parse(result, &info), 0);
    assert_int_equal(strlen(info.name), sizeof(info.name) - 1);
    cJSON_Delete(result);
    memset(name, 'n', 62);
    strcpy(name + 62, "\xe4\xb8\xad"); /* bytes 62..64: one character */
    snprintf(text, sizeof(text),
             "{\"serverInfo\":{\"name\":\"%s\","
             "\"version\":\"%s\"}}",
             name, name);
    result = cJSON_Parse(text);
    assert_int_equal(gw_mcp_server_info_parse(result, &info), 0);
    assert_int_equal(strlen(info.name), 62);
    assert_int_equal(strlen(info.server_ver), 31);
    cJSON_Delete(result);
    name[60] = '\0';
    strcat(name, "\xe4\xb8\xad"); /* bytes 60..62: just fits */
    snprintf(text, sizeof(text), "{\"serverInfo\":{\"name\":\"%s\"}}", name);
    result = cJSON_Parse(text);
    assert_int_equal(gw_mcp_server_info_parse(result, &info), 0);
    assert_string_equal(info.name, name);
    cJSON_Delete(result);

    /* Refusals. */
    result = cJSON_Parse("[]");
    assert_int_equal(gw_mcp_server_info_parse(result, &info), GW_EPROTO);
    cJSON_Delete(result);
    result = cJSON_Parse("{\"capabilities\":{},\"capabilities\":{}}");
    assert_int_equal(gw_mcp_server_info_parse(result, &info), GW_EPROTO);
    cJSON_Delete(result);
    result = cJSON_Parse("{\"serverInfo\":{},\"serverInfo\":{}}");
    assert_int_equal(gw_mcp_server_info_parse(result, &info), GW_EPROTO);
    assert_int_equal(gw_mcp_server_info_parse(NULL, &info), GW_EINVAL);
    assert_int_equal(gw_mcp_server_info_parse(result, NULL), GW_EINVAL);
    cJSON_Delete(result);
}

static void test_client_caps(void **state)
{
    static const struct {
        const char *params;
        unsigned bits;
    } cases[] = {
        {"{\"capabilities\":{}}", 0},
        {"{\"capabilities\":{\"sampling\":{}}}", GW_MCP_CLIENT_CAP_SAMPLING},
        {"{\"capabilities\":{\"elicitation\":{\"form\":{}}}}",
         GW_MCP_CLIENT_CAP_ELICITATION},
        {"{\"capabilities\":{\"roots\":{\"listChanged\":true}}}",
         GW_MCP_CLIENT_CAP_ROOTS},
        {"{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{\"sampling\":"
         "{},\"elicitation\":{},\"roots\":{},\"experimental\":{}}}",
         GW_MCP_CLIENT_CAP_SAMPLING | GW_MCP_CLIENT_CAP_ELICITATION |
             GW_MCP_CLIENT_CAP_ROOTS},
        {"{\"capabilities\":{\"sampling\":true,\"roots\":[]}}", 0},
        {"{\"capabilities\":{\"sampling\":null,\"roots\":{}}}",
         GW_MCP_CLIENT_CAP_ROOTS},
        {"{}", 0},
        {"{\"capabilities\":[]}", 0},
        {"{\"capabilities\":\"sampling\"}", 0},
        {"[{\"capabilities\":{\"sampling\":{}}}]", 0},
        {"{\"capabilities\":{\"sampling\":{}},\"capabilities\":{}}", 0},
        {"{\"capabilities\":{\"sampling\":{},\"sampling\":{}}}", 0},
        /* Server capabilities are not client ones. */
        {"{\"capabilities\":{\"tools\":{},\"logging\":{}}}", 0},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cJSON *params = cJSON_Parse(cases[i].params);

        assert_non_null(params);
        if (gw_mcp_client_caps_parse(params) != cases[i].bits) {
            fail_msg("%s: %#x, want %#x", cases[i].params,
                     gw_mcp_client_caps_parse(params), cases[i].bits);
        }
        cJSON_Delete(params);
    }
    assert_int_equal(gw_mcp_client_caps_parse(NULL), 0);
}

static void expect_json(cJSON *obj, const char *want)
{
    char *text;

    assert_non_null(obj);
    text = cJSON_PrintUnformatted(obj);
    assert_non_null(text);
    assert_string_equal(text, want);
    cJSON_free(text);
    cJSON_Delete(obj);
}

static void test_caps_json(void **state)
{
    (void)state;
    expect_json(gw_mcp_caps_json(0), "{}");
    expect_json(gw_mcp_caps_json(GW_MCP_CAP_TOOLS), "{\"tools\":{}}");
    expect_json(gw_mcp_caps_json(GW_MCP_CAPS_ALL),
                "{\"tools\":{\"listChanged\":true},\"resources\":{"
                "\"subscribe\":true,\"listChanged\":true},\"prompts\":{"
                "\"listChanged\":true},\"completions\":{},\"logging\":{},"
                "\"tasks\":{\"list\":{},\"cancel\":{},\"requests\":{"
                "\"tools\":{\"call\":{}}}}}");
    /* What /mcp offers: everything but tasks.list. */
    expect_json(gw_mcp_caps_json(GW_MCP_CAPS_ALL & ~GW_MCP_CAP_TASKS_LIST),
                "{\"tools\":{\"listChanged\":true},\"resources\":{"
                "\"subscribe\":true,\"listChanged\":true},\"prompts\":{"
                "\"listChanged\":true},\"completions\":{},\"logging\":{},"
                "\"tasks\":{\"cancel\":{},\"requests\":{"
                "\"tools\":{\"call\":{}}}}}");
    /* Sub-capabilities without their parent and unknown bits: nothing. */
    expect_json(gw_mcp_caps_json(GW_MCP_CAP_TASKS_LIST |
                                 GW_MCP_CAP_RESOURCES_SUBSCRIBE |
                                 GW_MCP_CAP_TOOLS_LIST_CHANGED | 0x1000u),
                "{}");
    expect_json(gw_mcp_caps_json(GW_MCP_CAP_RESOURCES |
                                 GW_MCP_CAP_RESOURCES_LIST_CHANGED),
                "{\"resources\":{\"listChanged\":true}}");
}

/* parse(caps_json(c)) == normalize(c), for every combination of bits. */
static void test_caps_round_trip(void **state)
{
    (void)state;
    for (unsigned bits = 0; bits <= GW_MCP_CAPS_ALL; bits++) {
        cJSON *result = cJSON_CreateObject();
        cJSON *caps = gw_mcp_caps_json(bits);
        struct gw_mcp_server_info info;

        assert_non_null(result);
        assert_non_null(caps);
        cJSON_AddItemToObject(result, "capabilities", caps);
        assert_int_equal(gw_mcp_server_info_parse(result, &info), 0);
        if (info.caps != gw_mcp_caps_normalize(bits)) {
            fail_msg("bits %#x read back as %#x", bits, info.caps);
        }
        cJSON_Delete(result);
    }
}

static void test_normalize(void **state)
{
    (void)state;
    assert_int_equal(gw_mcp_caps_normalize(0), 0);
    assert_int_equal(gw_mcp_caps_normalize(GW_MCP_CAPS_ALL), GW_MCP_CAPS_ALL);
    assert_int_equal(gw_mcp_caps_normalize(0xffffffffu), GW_MCP_CAPS_ALL);
    assert_int_equal(gw_mcp_caps_normalize(GW_MCP_CAP_TOOLS_LIST_CHANGED), 0);
    assert_int_equal(gw_mcp_caps_normalize(GW_MCP_CAP_RESOURCES_SUBSCRIBE |
                                           GW_MCP_CAP_RESOURCES_LIST_CHANGED),
                     0);
    assert_int_equal(gw_mcp_caps_normalize(GW_MCP_CAP_PROMPTS_LIST_CHANGED), 0);
    assert_int_equal(
        gw_mcp_caps_normalize(GW_MCP_CAP_TASKS_LIST | GW_MCP_CAP_TASKS_CANCEL),
        0);
    assert_int_equal(
        gw_mcp_caps_normalize(GW_MCP_CAP_TASKS | GW_MCP_CAP_TASKS_LIST),
        GW_MCP_CAP_TASKS | GW_MCP_CAP_TASKS_LIST);
    assert_int_equal(
        gw_mcp_caps_normalize(GW_MCP_CAP_COMPLETIONS | GW_MCP_CAP_LOGGING),
        GW_MCP_CAP_COMPLETIONS | GW_MCP_CAP_LOGGING);
}

static void test_method_caps(void **state)
{
    static const struct {
        const char *method;
        unsigned cap;
    } cases[] = {
        {"tools/list", GW_MCP_CAP_TOOLS},
        {"tools/call", GW_MCP_CAP_TOOLS},
        {"resources/list", GW_MCP_CAP_RESOURCES},
        {"resources/templates/list", GW_MCP_CAP_RESOURCES},
        {"resources/read", GW_MCP_CAP_RESOURCES},
        {"resources/subscribe", GW_MCP_CAP_RESOURCES_SUBSCRIBE},
        {"resources/unsubscribe", GW_MCP_CAP_RESOURCES_SUBSCRIBE},
        {"prompts/list", GW_MCP_CAP_PROMPTS},
        {"prompts/get", GW_MCP_CAP_PROMPTS},
        {"completion/complete", GW_MCP_CAP_COMPLETIONS},
        {"logging/setLevel", GW_MCP_CAP_LOGGING},
        {"tasks/get", GW_MCP_CAP_TASKS},
        {"tasks/result", GW_MCP_CAP_TASKS},
        {"tasks/list", GW_MCP_CAP_TASKS_LIST},
        {"tasks/cancel", GW_MCP_CAP_TASKS_CANCEL},
        {"initialize", 0},
        {"ping", 0},
        {"notifications/initialized", 0},
        {"notifications/cancelled", 0},
        {"sampling/createMessage", 0},
        {"vendor/thing", 0},
        {"", 0},
        {"tools/List", 0},
        {"tools/list ", 0},
        {"resources", 0},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (gw_mcp_method_cap(cases[i].method) != cases[i].cap) {
            fail_msg("%s: %#x, want %#x", cases[i].method,
                     gw_mcp_method_cap(cases[i].method), cases[i].cap);
        }
    }
    assert_int_equal(gw_mcp_method_cap(NULL), 0);

    /* A device offering everything takes every method; stock firmware
     * (tools alone) takes tools/ methods and what every server answers. */
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unsigned need = gw_mcp_method_cap(cases[i].method);
        bool tools_only =
            strncmp(cases[i].method, "tools/", 6) == 0 || cases[i].cap == 0;

        assert_true((GW_MCP_CAPS_ALL & need) == need);
        assert_int_equal((GW_MCP_CAP_TOOLS & need) == need, tools_only);
    }

    assert_int_equal(gw_mcp_method_client_cap("sampling/createMessage"),
                     GW_MCP_CLIENT_CAP_SAMPLING);
    assert_int_equal(gw_mcp_method_client_cap("elicitation/create"),
                     GW_MCP_CLIENT_CAP_ELICITATION);
    assert_int_equal(gw_mcp_method_client_cap("roots/list"),
                     GW_MCP_CLIENT_CAP_ROOTS);
    assert_int_equal(gw_mcp_method_client_cap("tools/call"), 0);
    assert_int_equal(gw_mcp_method_client_cap("ping"), 0);
    assert_int_equal(gw_mcp_method_client_cap("roots/list_changed"), 0);
    assert_int_equal(gw_mcp_method_client_cap(""), 0);
    assert_int_equal(gw_mcp_method_client_cap(NULL), 0);
}

static void test_cap_names(void **state)
{
    (void)state;
#define XX(name, bit, text)                                                    \
    assert_string_equal(gw_mcp_cap_name(1u << (bit)), text);
    GW_MCP_CAP_MAP(XX)
#undef XX
#define XX(name, bit, text)                                                    \
    assert_string_equal(gw_mcp_client_cap_name(1u << (bit)), text);
    GW_MCP_CLIENT_CAP_MAP(XX)
#undef XX
    assert_string_equal(gw_mcp_cap_name(GW_MCP_CAP_RESOURCES_SUBSCRIBE),
                        "resources.subscribe");
    assert_string_equal(gw_mcp_cap_name(0), "?");
    assert_string_equal(gw_mcp_cap_name(GW_MCP_CAP_TOOLS | GW_MCP_CAP_PROMPTS),
                        "?");
    assert_string_equal(gw_mcp_cap_name(1u << 12), "?");
    assert_string_equal(gw_mcp_cap_name(GW_MCP_CAPS_ALL), "?");
    assert_string_equal(gw_mcp_client_cap_name(0), "?");
    assert_string_equal(gw_mcp_client_cap_name(1u << 3), "?");
    assert_string_equal(gw_mcp_client_cap_name(3), "?");
}

static void test_log_levels(void **state)
{
    static const char *const names[] = {"debug",   "info",     "notice",
                                        "warning", "error",    "critical",
                                        "alert",   "emergency"};
    enum gw_mcp_log_level level;

    (void)state;
    assert_int_equal(GW_MCP_LOG_LEVEL_COUNT_, 8);
    for (int i = 0; i < 8; i++) {
        level = GW_MCP_LOG_EMERGENCY;
        assert_int_equal(gw_mcp_log_level_parse(names[i], &level), 0);
        assert_int_equal(level, i);
        assert_string_equal(gw_mcp_log_level_name(level), names[i]);
    }
    /* RFC 5424 order: more verbose is lower. */
    assert_true(GW_MCP_LOG_DEBUG < GW_MCP_LOG_INFO);
    assert_true(GW_MCP_LOG_WARNING < GW_MCP_LOG_ERROR);
    assert_true(GW_MCP_LOG_ALERT < GW_MCP_LOG_EMERGENCY);

    level = GW_MCP_LOG_NOTICE;
    assert_int_equal(gw_mcp_log_level_parse("Debug", &level), GW_EPROTO);
    assert_int_equal(gw_mcp_log_level_parse("warn", &level), GW_EPROTO);
    assert_int_equal(gw_mcp_log_level_parse("", &level), GW_EPROTO);
    assert_int_equal(gw_mcp_log_level_parse("info ", &level), GW_EPROTO);
    assert_int_equal(gw_mcp_log_level_parse("emergencyy", &level), GW_EPROTO);
    assert_int_equal(level, GW_MCP_LOG_NOTICE); /* untouched */
    assert_int_equal(gw_mcp_log_level_parse(NULL, &level), GW_EINVAL);
    assert_int_equal(gw_mcp_log_level_parse("info", NULL), GW_EINVAL);
    assert_string_equal(gw_mcp_log_level_name(GW_MCP_LOG_LEVEL_COUNT_), "?");
    assert_string_equal(gw_mcp_log_level_name((enum gw_mcp_log_level) - 1),
                        "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_server_caps_table),
        cmocka_unit_test(test_server_info),
        cmocka_unit_test(test_client_caps),
        cmocka_unit_test(test_caps_json),
        cmocka_unit_test(test_caps_round_trip),
        cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_method_caps),
        cmocka_unit_test(test_cap_names),
        cmocka_unit_test(test_log_levels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
