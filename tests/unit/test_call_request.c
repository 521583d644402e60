/* Device-call bodies: what is accepted, normalised, cut, and refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "codec/call_request.h"

static int parse_request(const char *json, struct gw_call_request *rq,
                         const char **why)
{
    return gw_call_request_parse(json, strlen(json), rq, why);
}

static void test_request_accepted(void **state)
{
    struct gw_call_request rq;
    const char *why;

    (void)state;
    assert_int_equal(
        parse_request("{\"caller_mac\":\"A0:85:E3:F4:49:34\",\"target_mac\":"
                      "\"a0_85_e3_f4_49_35\",\"caller_nickname\":\"Alice\"}",
                      &rq, &why),
        0);
    assert_string_equal(rq.caller_mac, "a0:85:e3:f4:49:34");
    assert_string_equal(rq.target_mac, "a0:85:e3:f4:49:35");
    assert_string_equal(rq.nickname, "Alice");
    /* Nickname optional, null as absent; other members ignored. */
    assert_int_equal(
        parse_request("{\"caller_mac\":\"a0-85-e3-f4-49-34\",\"target_mac\":"
                      "\"a0:85:e3:f4:49:35\",\"caller_nickname\":null,"
                      "\"x\":[1]}",
                      &rq, &why),
        0);
    assert_string_equal(rq.caller_mac, "a0:85:e3:f4:49:34");
    assert_string_equal(rq.nickname, "");
}

static void test_nickname_cut_on_a_character(void **state)
{
    struct gw_call_request rq;
    const char *why;
    char json[1024], nick[512] = "";

    (void)state;
    /* 95 ASCII bytes, then a 3-byte character that would end at 98. */
    memset(nick, 'n', 95);
    strcat(nick, "\xe5\xb0\x8f");
    snprintf(json, sizeof(json),
             "{\"caller_mac\":\"a0:85:e3:f4:49:34\",\"target_mac\":"
             "\"a0:85:e3:f4:49:35\",\"caller_nickname\":\"%s\"}",
             nick);
    assert_int_equal(parse_request(json, &rq, &why), 0);
    assert_int_equal(strlen(rq.nickname), 95);
}

static void test_request_refused(void **state)
{
    static const struct {
        const char *json;
        int err;
        const char *why;
    } cases[] = {
        {"{\"caller_mac\":\"a0:85:e3:f4:49:34\"}", GW_ENOENT,
         "missing required fields: caller_mac, target_mac"},
        {"{\"caller_mac\":\"\",\"target_mac\":\"a0:85:e3:f4:49:34\"}",
         GW_ENOENT, "missing required fields: caller_mac, target_mac"},
        {"{\"caller_mac\":1,\"target_mac\":\"a0:85:e3:f4:49:34\"}", GW_ENOENT,
         "missing required fields: caller_mac, target_mac"},
        {"{\"caller_mac\":\"a0:85:e3:f4:49\",\"target_mac\":"
         "\"a0:85:e3:f4:49:34\"}",
         GW_EPROTO, "caller_mac is not a MAC address"},
        {"{\"caller_mac\":\"a0:85:e3:f4:49:34\",\"target_mac\":"
         "\"a0:85_e3:f4:49:34\"}",
         GW_EPROTO, "target_mac is not a MAC address"},
        {"{\"caller_mac\":\"a0:85:e3:f4:49:34\",\"target_mac\":"
         "\"g0:85:e3:f4:49:34\"}",
         GW_EPROTO, "target_mac is not a MAC address"},
        {"{\"caller_mac\":\"a0:85:e3:f4:49:34\",\"target_mac\":"
         "\"a0:85:e3:f4:49:35\",\"caller_nickname\":7}",
         GW_EPROTO, "caller_nickname must be a string"},
        {"[]", GW_EMALFORMED, "body must be one JSON object"},
        {"", GW_EMALFORMED, "body must be one JSON object"},
    };
    struct gw_call_request rq, zero;
    const char *why;

    (void)state;
    memset(&zero, 0, sizeof(zero));
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(parse_request(cases[i].json, &rq, &why), cases[i].err);
        assert_string_equal(why, cases[i].why);
        assert_memory_equal(&rq, &zero, sizeof(rq));
    }
}

static void test_accept(void **state)
{
    struct gw_call_accept ac;
    const char *why;
    const char *ok = "{\"mac\":\"A0_85_E3_F4_49_34\"}";
    const char *missing = "{\"peer\":\"a0:85:e3:f4:49:34\"}";
    const char *bad = "{\"mac\":\"a0:85:e3:f4:49:3\"}";

    (void)state;
    assert_int_equal(gw_call_accept_parse(ok, strlen(ok), &ac, &why), 0);
    assert_string_equal(ac.mac, "a0:85:e3:f4:49:34");
    assert_int_equal(gw_call_accept_parse(missing, strlen(missing), &ac, &why),
                     GW_ENOENT);
    assert_string_equal(why, "missing required field: mac");
    assert_int_equal(gw_call_accept_parse(bad, strlen(bad), &ac, &why),
                     GW_EPROTO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_accepted),
        cmocka_unit_test(test_nickname_cut_on_a_character),
        cmocka_unit_test(test_request_refused),
        cmocka_unit_test(test_accept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
