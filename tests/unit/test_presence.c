/* Presence payloads: the table of what is accepted and what is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "codec/presence.h"

struct good_case {
    const char *json;
    bool online;
    const char *address;
    bool has_conn;
    uint64_t conn;
};

static void test_accepted(void **state)
{
    static const struct good_case cases[] = {
        {"{\"state\":\"online\",\"address\":\"192.168.1.20\",\"conn\":7}", true,
         "192.168.1.20", true, 7},
        {"{\"state\":\"offline\",\"conn\":8}", false, "", true, 8},
        {"{\"state\":\"offline\"}", false, "", false, 0},
        {"{\"state\":\"online\"}", true, "", false, 0},
        {" {\"conn\":0,\"state\":\"online\",\"address\":\"::1\"} ", true, "::1",
         true, 0},
        {"{\"state\":\"online\",\"address\":\"2001:db8::8a2e:370:7334\","
         "\"extra\":{\"x\":[1,2]}}",
         true, "2001:db8::8a2e:370:7334", false, 0},
        {"{\"state\":\"online\",\"conn\":9007199254740991}", true, "", true,
         9007199254740991ull},
        {"{\"state\":\"online\",\"address\":\"[2001:db8::7]\"}", true,
         "2001:db8::7", false, 0},
        {"", false, "", false, 0}, /* cleared retained message */
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gw_presence p;
        assert_int_equal(
            gw_presence_parse(cases[i].json, strlen(cases[i].json), &p), 0);
        assert_int_equal(p.online, cases[i].online);
        assert_string_equal(p.address, cases[i].address);
        assert_int_equal(p.has_conn, cases[i].has_conn);
        assert_int_equal(p.conn, cases[i].conn);
    }
}

static void test_refused(void **state)
{
    static const struct {
        const char *json;
        int err;
    } cases[] = {
        {"{}", GW_EPROTO},
        {"{\"state\":\"away\"}", GW_EPROTO},
        {"{\"state\":1}", GW_EPROTO},
        {"{\"state\":\"online\",\"address\":\"example.com\"}", GW_EPROTO},
        {"{\"state\":\"online\",\"address\":\"1.2.3.4\\r\\nX-Evil: 1\"}",
         GW_EPROTO},
        {"{\"state\":\"online\",\"address\":\"1.2.3.4:80\"}", GW_EPROTO},
        {"{\"state\":\"online\",\"address\":42}", GW_EPROTO},
        {"{\"state\":\"online\",\"address\":\"[]\"}", GW_EPROTO},
        {"{\"state\":\"online\",\"address\":\"[1.2.3.4\"}", GW_EPROTO},
        {"{\"state\":\"online\",\"conn\":-1}", GW_EPROTO},
        {"{\"state\":\"online\",\"conn\":1.5}", GW_EPROTO},
        {"{\"state\":\"online\",\"conn\":\"3\"}", GW_EPROTO},
        {"{\"state\":\"online\",\"conn\":1e300}", GW_EPROTO},
        {"[\"online\"]", GW_EMALFORMED},
        {"{\"state\":\"online\"", GW_EMALFORMED},
        {"{\"state\":\"online\"} x", GW_EMALFORMED},
        {"\xff", GW_EUTF8},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gw_presence p;
        memset(&p, 0x55, sizeof(p));
        assert_int_equal(
            gw_presence_parse(cases[i].json, strlen(cases[i].json), &p),
            cases[i].err);
        assert_false(p.online); /* zeroed on failure */
        assert_string_equal(p.address, "");
    }
}

static void test_limits(void **state)
{
    char big[GW_PRESENCE_MAX_LEN + 2];
    struct gw_presence p;

    (void)state;
    memset(big, ' ', sizeof(big));
    memcpy(big, "{\"state\":\"online\"}", 18);
    assert_int_equal(gw_presence_parse(big, GW_PRESENCE_MAX_LEN, &p), 0);
    assert_int_equal(gw_presence_parse(big, GW_PRESENCE_MAX_LEN + 1, &p),
                     GW_ETOOBIG);
    assert_int_equal(gw_presence_parse(NULL, 3, &p), GW_EINVAL);
    assert_int_equal(gw_presence_parse("{}", 2, NULL), GW_EINVAL);
}

/* The broker run: in a presence message, and alone on $broker. */
static void test_run(void **state)
{
    static const char with_run[] =
        "{\"state\":\"online\",\"conn\":3,\"run\":1790000000000}";
    struct gw_presence p;
    uint64_t run;

    (void)state;
    assert_int_equal(gw_presence_parse(with_run, strlen(with_run), &p), 0);
    assert_true(p.has_run);
    assert_true(p.run == 1790000000000ull);
    assert_int_equal(
        gw_presence_parse("{\"state\":\"online\",\"run\":-1}", 27, &p),
        GW_EPROTO);
    assert_false(p.has_run);
    assert_int_equal(gw_presence_run_parse("{\"run\":42}", 10, &run), 0);
    assert_true(run == 42);
    assert_int_equal(gw_presence_run_parse("{\"run\":0}", 9, &run), GW_EPROTO);
    assert_int_equal(gw_presence_run_parse("{\"run\":\"1\"}", 11, &run),
                     GW_EPROTO);
    assert_int_equal(gw_presence_run_parse("{}", 2, &run), GW_EPROTO);
    assert_true(run == 0);
    assert_int_equal(gw_presence_run_parse("nope", 4, &run), GW_EMALFORMED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_run),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
