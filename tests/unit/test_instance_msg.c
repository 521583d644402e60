/* Messages between instances: each kind accepted, refusals, and what
 * gw_instance_msg_new makes parses back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec/instance_msg.h"

#define CID "GID_test@@@02_00_00_00_00_01@@@u1"

static int parse(const char *json, struct gw_instance_msg *m)
{
    return gw_instance_msg_parse(json, strlen(json), m);
}

static void test_kinds(void **state)
{
    struct gw_instance_msg m;

    (void)state;
    assert_int_equal(
        parse("{\"t\":\"req\",\"from\":\"gw-a\",\"cid\":\"" CID "\",\"id\":7,"
              "\"method\":\"tools/call\",\"params\":{\"name\":\"x\"},"
              "\"timeout_ms\":8000,\"origin\":\"api\",\"progress\":true}",
              &m),
        0);
    assert_int_equal(m.kind, GW_IMSG_REQUEST);
    assert_string_equal(m.from, "gw-a");
    assert_string_equal(m.client_id, CID);
    assert_int_equal(m.id, 7);
    assert_string_equal(m.method, "tools/call");
    assert_non_null(m.params);
    assert_int_equal(m.timeout_ms, 8000);
    assert_string_equal(m.origin, "api");
    assert_true(m.progress);
    gw_instance_msg_free(&m);
    assert_null(m.root);

    assert_int_equal(parse("{\"t\":\"rep\",\"from\":\"b\",\"cid\":\"" CID
                           "\",\"id\":1,\"outcome\":\"ok\",\"result\":5}",
                           &m),
                     0);
    assert_int_equal(m.kind, GW_IMSG_REPLY);
    assert_string_equal(m.outcome, "ok");
    assert_true(cJSON_IsNumber(m.result));
    gw_instance_msg_free(&m);
    assert_int_equal(parse("{\"t\":\"rep\",\"from\":\"b\",\"cid\":\"" CID
                           "\",\"id\":1,"
                           "\"outcome\":\"timeout\",\"error\":{\"code\":-32001,"
                           "\"message\":\"late\"}}",
                           &m),
                     0);
    assert_non_null(m.error);
    assert_null(m.result);
    gw_instance_msg_free(&m);
    assert_int_equal(parse("{\"t\":\"prog\",\"from\":\"b\",\"cid\":\"" CID
                           "\",\"id\":3,\"params\":{\"progress\":1}}",
                           &m),
                     0);
    assert_int_equal(m.kind, GW_IMSG_PROGRESS);
    gw_instance_msg_free(&m);
    assert_int_equal(parse("{\"t\":\"cancel\",\"from\":\"b\",\"cid\":\"" CID
                           "\",\"id\":3}",
                           &m),
                     0);
    assert_int_equal(m.kind, GW_IMSG_CANCEL);
    gw_instance_msg_free(&m);
    assert_int_equal(parse("{\"t\":\"cat\",\"from\":\"b\",\"cid\":\"" CID
                           "\",\"catalog\":{\"tools\":{}}}",
                           &m),
                     0);
    assert_int_equal(m.kind, GW_IMSG_CATALOG);
    assert_non_null(m.catalog);
    gw_instance_msg_free(&m);
    assert_int_equal(parse("{\"t\":\"up\",\"from\":\"b\",\"cid\":\"" CID
                           "\",\"message\":{\"type\":\"mcp\"}}",
                           &m),
                     0);
    assert_int_equal(m.kind, GW_IMSG_UP);
    gw_instance_msg_free(&m);
}

static void test_refused(void **state)
{
    static const struct {
        const char *json;
        int err;
    } cases[] = {
        {"", GW_EMALFORMED},
        {"[1]", GW_EMALFORMED},
        {"{\"t\":\"zap\",\"from\":\"a\",\"cid\":\"" CID "\"}", GW_EPROTO},
        {"{\"t\":\"cancel\",\"cid\":\"" CID "\",\"id\":1}", GW_EPROTO},
        {"{\"t\":\"cancel\",\"from\":\"a/b\",\"cid\":\"" CID "\",\"id\":1}",
         GW_EPROTO},
        {"{\"t\":\"cancel\",\"from\":\"a\",\"cid\":\"nope\",\"id\":1}",
         GW_EPROTO},
        {"{\"t\":\"cancel\",\"from\":\"a\",\"cid\":\"" CID "\"}", GW_EPROTO},
        {"{\"t\":\"cancel\",\"from\":\"a\",\"cid\":\"" CID "\",\"id\":0}",
         GW_EPROTO},
        {"{\"t\":\"cancel\",\"from\":\"a\",\"cid\":\"" CID "\",\"id\":1.5}",
         GW_EPROTO},
        {"{\"t\":\"cancel\",\"from\":\"a\",\"cid\":\"" CID
         "\",\"id\":2147483648}",
         GW_EPROTO},
        /* a catalog names no id */
        {"{\"t\":\"cat\",\"from\":\"a\",\"cid\":\"" CID
         "\",\"id\":1,\"catalog\":{}}",
         GW_EPROTO},
        {"{\"t\":\"cat\",\"from\":\"a\",\"cid\":\"" CID "\",\"catalog\":[]}",
         GW_EPROTO},
        {"{\"t\":\"req\",\"from\":\"a\",\"cid\":\"" CID "\",\"id\":1,"
         "\"timeout_ms\":10,\"origin\":\"api\"}",
         GW_EPROTO}, /* no method */
        {"{\"t\":\"req\",\"from\":\"a\",\"cid\":\"" CID "\",\"id\":1,"
         "\"method\":\"m\",\"timeout_ms\":0,\"origin\":\"api\"}",
         GW_EPROTO},
        {"{\"t\":\"req\",\"from\":\"a\",\"cid\":\"" CID "\",\"id\":1,"
         "\"method\":\"m\",\"timeout_ms\":600001,\"origin\":\"api\"}",
         GW_EPROTO},
        {"{\"t\":\"req\",\"from\":\"a\",\"cid\":\"" CID "\",\"id\":1,"
         "\"method\":\"m\",\"timeout_ms\":5,\"origin\":\"api\","
         "\"params\":[1]}",
         GW_EPROTO},
        {"{\"t\":\"req\",\"from\":\"a\",\"cid\":\"" CID "\",\"id\":1,"
         "\"method\":\"m\",\"timeout_ms\":5,\"origin\":\"api\","
         "\"progress\":1}",
         GW_EPROTO},
        /* ok without a result, an error with one, both */
        {"{\"t\":\"rep\",\"from\":\"a\",\"cid\":\"" CID
         "\",\"id\":1,\"outcome\":\"ok\"}",
         GW_EPROTO},
        {"{\"t\":\"rep\",\"from\":\"a\",\"cid\":\"" CID
         "\",\"id\":1,\"outcome\":\"error\",\"result\":{}}",
         GW_EPROTO},
        {"{\"t\":\"rep\",\"from\":\"a\",\"cid\":\"" CID
         "\",\"id\":1,\"outcome\":\"error\",\"error\":{\"code\":1.5,"
         "\"message\":\"x\"}}",
         GW_EPROTO},
        {"{\"t\":\"rep\",\"from\":\"a\",\"cid\":\"" CID
         "\",\"id\":1,\"outcome\":\"ok\",\"result\":1,\"error\":{\"code\":1,"
         "\"message\":\"x\"}}",
         GW_EPROTO},
        {"{\"t\":\"prog\",\"from\":\"a\",\"cid\":\"" CID "\",\"id\":1}",
         GW_EPROTO},
        {"{\"t\":\"up\",\"from\":\"a\",\"cid\":\"" CID "\",\"message\":\"x\"}",
         GW_EPROTO},
    };
    struct gw_instance_msg m;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        m.root = (cJSON *)&m; /* must be zeroed on failure */
        int err = parse(cases[i].json, &m);
        if (err != cases[i].err) {
            fail_msg("case %zu: %s: got %d", i, cases[i].json, err);
        }
        assert_null(m.root);
        assert_int_equal(m.id, 0);
    }
}

static void test_too_big(void **state)
{
    size_t n = GW_INSTANCE_MSG_MAX_LEN + 2;
    char *big = malloc(n + 1);
    struct gw_instance_msg m;

    (void)state;
    assert_non_null(big);
    memset(big, ' ', n);
    big[0] = '{';
    big[n - 1] = '}';
    big[n] = '\0';
    assert_int_equal(gw_instance_msg_parse(big, n, &m), GW_ETOOBIG);
    free(big);
}

static void test_new_round_trip(void **state)
{
    struct gw_instance_msg m;
    cJSON *o = gw_instance_msg_new(GW_IMSG_CANCEL, "gw-b", CID, 42);
    char *text;

    (void)state;
    assert_non_null(o);
    text = cJSON_PrintUnformatted(o);
    assert_int_equal(parse(text, &m), 0);
    assert_int_equal(m.kind, GW_IMSG_CANCEL);
    assert_int_equal(m.id, 42);
    assert_string_equal(m.from, "gw-b");
    gw_instance_msg_free(&m);
    free(text);
    cJSON_Delete(o);
    /* Nothing that would not parse back. */
    assert_null(gw_instance_msg_new(GW_IMSG_CANCEL, "gw b", CID, 1));
    assert_null(gw_instance_msg_new(GW_IMSG_CANCEL, "gw", "x", 1));
    assert_null(gw_instance_msg_new(GW_IMSG_REPLY, "gw", CID, 0));
    assert_null(gw_instance_msg_new(GW_IMSG_COUNT_, "gw", CID, 1));
    assert_string_equal(gw_instance_msg_kind_name(GW_IMSG_UP), "up");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_too_big),
        cmocka_unit_test(test_new_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
