/* Pushed messages and fan-out bodies: what is taken, what is refused and
 * how the refusal names the member, and what the device gets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec/device_command.h"

static cJSON *parse(const char *json)
{
    cJSON *doc = cJSON_Parse(json);

    assert_non_null(doc);
    return doc;
}

/* Reads and encodes json; returns the encoded text (freed by caller). */
static char *encoded(const char *json, enum gw_device_command_type type)
{
    cJSON *doc = parse(json);
    struct gw_device_command c;
    char why[160];
    char *text;
    size_t len;

    assert_int_equal(gw_device_command_read(doc, &c, why, sizeof(why)), 0);
    assert_int_equal(c.type, type);
    assert_int_equal(gw_device_command_encode(&c, 8192, &text, &len), 0);
    assert_int_equal(strlen(text), len);
    cJSON_Delete(doc);
    return text;
}

static void test_accepted(void **state)
{
    char *t;

    (void)state;
    t = encoded("{\"type\":\"alert\",\"status\":\"Warn\",\"message\":\"Door "
                "open\",\"emotion\":\"sad\",\"extra\":1,\"session_id\":\"x\"}",
                GW_DEVICE_COMMAND_ALERT);
    assert_string_equal(t,
                        "{\"type\":\"alert\",\"status\":\"Warn\",\"message\":"
                        "\"Door open\",\"emotion\":\"sad\"}");
    free(t);
    t = encoded("{\"command\":\"reboot\",\"type\":\"system\"}",
                GW_DEVICE_COMMAND_SYSTEM);
    assert_string_equal(t, "{\"type\":\"system\",\"command\":\"reboot\"}");
    free(t);
    t = encoded("{\"type\":\"custom\",\"payload\":{\"a\":[1,{\"b\":null}]}}",
                GW_DEVICE_COMMAND_CUSTOM);
    assert_string_equal(
        t, "{\"type\":\"custom\",\"payload\":{\"a\":[1,{\"b\":null}]}}");
    free(t);
}

static void test_mcp(void **state)
{
    static const char *const good[] = {
        "{\"type\":\"mcp\",\"payload\":{\"method\":\"tools/list\"}}",
        "{\"type\":\"mcp\",\"payload\":{\"method\":\"tools/call\","
        "\"params\":{\"name\":\"x\"}}}",
        "{\"type\":\"mcp\",\"payload\":{\"method\":\"m\",\"params\":[]}}",
    };
    struct gw_device_command c;
    char *text;
    size_t len;

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        cJSON *doc = parse(good[i]);
        assert_int_equal(gw_device_command_read(doc, &c, NULL, 0), 0);
        assert_int_equal(c.type, GW_DEVICE_COMMAND_MCP);
        assert_non_null(c.method);
        /* MCP goes through the device's MCP link, never encoded here. */
        assert_int_equal(gw_device_command_encode(&c, 8192, &text, &len),
                         GW_EINVAL);
        assert_null(text);
        cJSON_Delete(doc);
    }
}

struct bad_case {
    const char *json;
    const char *why; /* a part of the reason */
};

static void test_refused(void **state)
{
    static const struct bad_case cases[] = {
        {"[]", "JSON object"},
        {"{}", "\"type\" must be"},
        {"{\"type\":3}", "\"type\" must be"},
        {"{\"type\":\"\"}", "\"type\" must be"},
        {"{\"type\":\"tts\"}", "unknown \"type\" \"tts\""},
        {"{\"type\":\"alert\",\"message\":\"m\",\"emotion\":\"e\"}",
         "alert needs \"status\""},
        {"{\"type\":\"alert\",\"status\":\"s\",\"emotion\":\"e\"}",
         "alert needs \"message\""},
        {"{\"type\":\"alert\",\"status\":\"s\",\"message\":\"m\"}",
         "alert needs \"emotion\""},
        {"{\"type\":\"alert\",\"status\":\"s\",\"message\":\"\","
         "\"emotion\":\"e\"}",
         "alert needs \"message\""},
        {"{\"type\":\"alert\",\"status\":\"s\",\"message\":7,"
         "\"emotion\":\"e\"}",
         "alert needs \"message\""},
        {"{\"type\":\"system\"}", "system needs \"command\""},
        {"{\"type\":\"system\",\"command\":\"shutdown\"}",
         "system needs \"command\""},
        {"{\"type\":\"custom\"}", "custom needs \"payload\""},
        {"{\"type\":\"custom\",\"payload\":[1]}", "custom needs \"payload\""},
        {"{\"type\":\"custom\",\"payload\":\"x\"}", "custom needs \"payload\""},
        {"{\"type\":\"mcp\"}", "mcp needs \"payload\""},
        {"{\"type\":\"mcp\",\"payload\":{}}", "\"method\""},
        {"{\"type\":\"mcp\",\"payload\":{\"method\":\"\"}}", "\"method\""},
        {"{\"type\":\"mcp\",\"payload\":{\"method\":\"m\",\"params\":1}}",
         "\"params\""},
    };
    struct gw_device_command c;
    char why[160];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cJSON *doc = parse(cases[i].json);
        assert_int_equal(gw_device_command_read(doc, &c, why, sizeof(why)),
                         GW_EPROTO);
        if (strstr(why, cases[i].why) == NULL) {
            fail_msg("%s: \"%s\" lacks \"%s\"", cases[i].json, why,
                     cases[i].why);
        }
        assert_null(c.method);
        assert_null(c.status);
        cJSON_Delete(doc);
    }
}

/* A custom payload past the firmware's message limit is refused. */
static void test_too_big(void **state)
{
    size_t n = 9000;
    char *json = malloc(n + 64);
    cJSON *doc;
    struct gw_device_command c;
    char *text;
    size_t len;

    (void)state;
    assert_non_null(json);
    strcpy(json, "{\"type\":\"custom\",\"payload\":{\"t\":\"");
    memset(json + strlen(json), 'x', n);
    strcpy(json + strlen("{\"type\":\"custom\",\"payload\":{\"t\":\"") + n,
           "\"}}");
    doc = parse(json);
    assert_int_equal(gw_device_command_read(doc, &c, NULL, 0), 0);
    assert_int_equal(gw_device_command_encode(&c, 8192, &text, &len),
                     GW_ETOOBIG);
    assert_null(text);
    assert_int_equal(gw_device_command_encode(&c, 65536, &text, &len), 0);
    assert_true(len > n);
    free(text);
    cJSON_Delete(doc);
    free(json);
}

static void test_broadcast(void **state)
{
    struct gw_device_target to;
    struct gw_device_command c;
    char why[160];
    cJSON *doc;

    (void)state;
    doc = parse("{\"to\":{\"client_ids\":[\"a\",\"b\"]},\"message\":{\"type\":"
                "\"system\",\"command\":\"reboot\"}}");
    assert_int_equal(
        gw_device_broadcast_read(doc, 4, 128, &to, &c, why, sizeof(why)), 0);
    assert_int_equal(to.kind, GW_DEVICE_TARGET_IDS);
    assert_int_equal(to.n_ids, 2);
    assert_int_equal(c.type, GW_DEVICE_COMMAND_SYSTEM);
    assert_int_equal(
        gw_device_broadcast_read(doc, 1, 128, &to, &c, why, sizeof(why)),
        GW_ELIMIT);
    assert_non_null(strstr(why, "at most 1"));
    cJSON_Delete(doc);

    doc = parse("{\"to\":{\"group\":\"GID_x\"},\"message\":{\"type\":"
                "\"custom\",\"payload\":{}}}");
    assert_int_equal(
        gw_device_broadcast_read(doc, 4, 128, &to, &c, why, sizeof(why)), 0);
    assert_int_equal(to.kind, GW_DEVICE_TARGET_GROUP);
    assert_string_equal(to.group, "GID_x");
    cJSON_Delete(doc);

    doc = parse("{\"to\":{\"all\":true},\"message\":{\"type\":\"mcp\","
                "\"payload\":{\"method\":\"tools/list\"}}}");
    assert_int_equal(
        gw_device_broadcast_read(doc, 4, 128, &to, &c, why, sizeof(why)), 0);
    assert_int_equal(to.kind, GW_DEVICE_TARGET_ALL);
    cJSON_Delete(doc);

    static const struct bad_case bad[] = {
        {"{\"message\":{\"type\":\"system\",\"command\":\"reboot\"}}",
         "\"to\" must be"},
        {"{\"to\":{},\"message\":{}}", "\"to\" must be"},
        {"{\"to\":{\"all\":false},\"message\":{}}", "\"to\" must be"},
        {"{\"to\":{\"all\":true,\"group\":\"g\"},\"message\":{}}",
         "\"to\" must be"},
        {"{\"to\":{\"client_ids\":[]},\"message\":{}}", "non-empty array"},
        {"{\"to\":{\"client_ids\":[\"a\",2]},\"message\":{}}", "client ids"},
        {"{\"to\":{\"client_ids\":[\"\"]},\"message\":{}}", "client ids"},
        {"{\"to\":{\"group\":\"\"},\"message\":{}}", "\"group\""},
        {"{\"to\":{\"all\":true}}", "\"message\""},
        {"{\"to\":{\"all\":true},\"message\":{\"type\":\"alert\"}}",
         "alert needs \"status\""},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        doc = parse(bad[i].json);
        assert_true(gw_device_broadcast_read(doc, 4, 128, &to, &c, why,
                                             sizeof(why)) != 0);
        if (strstr(why, bad[i].why) == NULL) {
            fail_msg("%s: \"%s\" lacks \"%s\"", bad[i].json, why, bad[i].why);
        }
        assert_null(to.ids);
        cJSON_Delete(doc);
    }
    /* An id longer than a client id can be. */
    doc = parse("{\"to\":{\"client_ids\":[\"abcdef\"]},\"message\":{\"type\":"
                "\"system\",\"command\":\"reboot\"}}");
    assert_int_equal(
        gw_device_broadcast_read(doc, 4, 5, &to, &c, why, sizeof(why)),
        GW_EPROTO);
    cJSON_Delete(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted),  cmocka_unit_test(test_mcp),
        cmocka_unit_test(test_refused),   cmocka_unit_test(test_too_big),
        cmocka_unit_test(test_broadcast),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
