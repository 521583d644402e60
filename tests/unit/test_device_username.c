/*
 * Device MQTT usernames (codec/device_username.c): the exact bytes the OTA
 * endpoint hands out, with and without a binding id, and the binding id
 * read back from untrusted usernames.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "codec/device_username.h"

static void test_make(void **state)
{
    char out[GW_DEVICE_USERNAME_MAX + 1];
    char peer[GW_DEVICE_USERNAME_PEER_MAX + 2];
    (void)state;

    /* As the xiaozhi manager (and before, ota.c with OpenSSL) made it. */
    assert_int_equal(gw_device_username_make("127.0.0.1", 0, out, sizeof(out)),
                     24);
    assert_string_equal(out, "eyJpcCI6IjEyNy4wLjAuMSJ9");
    assert_int_equal(
        gw_device_username_make("::ffff:10.0.0.7", 0, out, sizeof(out)), 24);
    assert_string_equal(out, "eyJpcCI6IjEwLjAuMC43In0="); /* 10.0.0.7 */
    /* An IPv6 peer keeps its "::ffff:" when no IPv4 follows. */
    assert_true(gw_device_username_make("::ffff:a", 0, out, sizeof(out)) > 0);
    assert_string_equal(out, "eyJpcCI6Ijo6ZmZmZjphIn0=");

    assert_int_equal(gw_device_username_make("127.0.0.1", 5, out, sizeof(out)),
                     32);
    assert_string_equal(out, "eyJpcCI6IjEyNy4wLjAuMSIsImIiOjV9");
    assert_true(gw_device_username_make("2001:db8::1", 9007199254740992ULL, out,
                                        sizeof(out)) > 0);
    assert_string_equal(
        out, "eyJpcCI6IjIwMDE6ZGI4OjoxIiwiYiI6OTAwNzE5OTI1NDc0MDk5Mn0=");

    /* The longest peer and id fit GW_DEVICE_USERNAME_MAX exactly. */
    memset(peer, '1', GW_DEVICE_USERNAME_PEER_MAX);
    peer[GW_DEVICE_USERNAME_PEER_MAX] = '\0';
    assert_int_equal(
        gw_device_username_make(peer, 9007199254740992ULL, out, sizeof(out)),
        GW_DEVICE_USERNAME_MAX);
    assert_int_equal(gw_device_username_make(peer, 9007199254740992ULL, out,
                                             GW_DEVICE_USERNAME_MAX),
                     GW_ENOSPC);
    peer[GW_DEVICE_USERNAME_PEER_MAX] = '1';
    peer[GW_DEVICE_USERNAME_PEER_MAX + 1] = '\0';
    assert_int_equal(gw_device_username_make(peer, 0, out, sizeof(out)),
                     GW_EINVAL);

    /* Nothing that would need escaping, no id past 2^53. */
    assert_int_equal(gw_device_username_make("a\"b", 0, out, sizeof(out)),
                     GW_EINVAL);
    assert_int_equal(gw_device_username_make("a\\b", 0, out, sizeof(out)),
                     GW_EINVAL);
    assert_int_equal(gw_device_username_make("a\nb", 0, out, sizeof(out)),
                     GW_EINVAL);
    assert_int_equal(gw_device_username_make("fe\xb8::1", 7, out, sizeof(out)),
                     GW_EINVAL);
    assert_int_equal(gw_device_username_make("1.2.3.4", 9007199254740993ULL,
                                             out, sizeof(out)),
                     GW_EINVAL);
    assert_int_equal(gw_device_username_make(NULL, 0, out, sizeof(out)),
                     GW_EINVAL);
    assert_int_equal(gw_device_username_make("1.2.3.4", 0, out, 24), GW_ENOSPC);
}

/* What make writes, binding reads back. */
static void test_round_trip(void **state)
{
    const uint64_t ids[] = {
        0, 1, 5, 255, 65536, 4294967296ULL, 9007199254740992ULL};
    const char *peers[] = {"", "127.0.0.1", "::1", "fe80::1%eth0"};
    char out[GW_DEVICE_USERNAME_MAX + 1];
    (void)state;

    for (size_t p = 0; p < sizeof(peers) / sizeof(peers[0]); p++) {
        for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
            uint64_t id = 99;
            int n = gw_device_username_make(peers[p], ids[i], out, sizeof(out));
            assert_true(n > 0);
            assert_int_equal(gw_device_username_binding(out, (size_t)n, &id),
                             0);
            assert_int_equal(id, ids[i]);
        }
    }
}

static void test_binding(void **state)
{
    const struct {
        const char *username; /* base64 of the JSON in the comment */
        int rc;
        uint64_t id;
    } cases[] = {
        /* {"ip":"127.0.0.1","b":5} */
        {"eyJpcCI6IjEyNy4wLjAuMSIsImIiOjV9", 0, 5},
        /* {"b":5.0} */
        {"eyJiIjo1LjB9", 0, 5},
        /* not ours: no "b", not base64, not an object, none */
        {"eyJpcCI6IjEyNy4wLjAuMSJ9", 0, 0},
        {"", 0, 0},
        {"hybridgw", 0, 0},     /* decodes, not JSON */
        {"eyJpcCI6", 0, 0},     /* {"ip": */
        {"WzVd", 0, 0},         /* [5] */
        {"eyJiIjo1fQ", 0, 0},   /* {"b":5} without its padding */
        {"eyJiIjo1fR==", 0, 0}, /* stray bits under the padding */
        {"eyJiIjo1f=Q=", 0, 0}, /* padding inside */
        {"e yJiIjo1fQ==", 0, 0},
        /* ours, but "b" is no binding id */
        {"eyJiIjowfQ==", GW_EMALFORMED, 0},                     /* {"b":0} */
        {"eyJiIjotNX0=", GW_EMALFORMED, 0},                     /* {"b":-5} */
        {"eyJiIjoxLjV9", GW_EMALFORMED, 0},                     /* {"b":1.5} */
        {"eyJiIjoiNSJ9", GW_EMALFORMED, 0},                     /* {"b":"5"} */
        {"eyJiIjpudWxsfQ==", GW_EMALFORMED, 0},                 /* {"b":null} */
        {"eyJiIjpbNV19", GW_EMALFORMED, 0},                     /* {"b":[5]} */
        {"eyJiIjo5MDA3MTk5MjU0NzQwOTk0fQ==", GW_EMALFORMED, 0}, /* 2^53+2 */
        {"eyJiIjoxZTMwMH0=", GW_EMALFORMED, 0},     /* {"b":1e300} */
        {"eyJiIjo1LCJiIjo2fQ==", GW_EMALFORMED, 0}, /* two "b" */
    };
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t id = 99;
        int rc = gw_device_username_binding(cases[i].username,
                                            strlen(cases[i].username), &id);
        if (rc != cases[i].rc || id != cases[i].id) {
            fail_msg("case %zu '%s': rc %d id %llu", i, cases[i].username, rc,
                     (unsigned long long)id);
        }
    }
}

/* Input is bounded: never read past len, no NUL needed, long is not ours. */
static void test_binding_bounds(void **state)
{
    char buf[600];
    uint64_t id = 99;
    const char *u = "eyJpcCI6IjEyNy4wLjAuMSIsImIiOjV9";
    (void)state;

    memcpy(buf, u, strlen(u));
    memset(buf + strlen(u), 'A', sizeof(buf) - strlen(u));
    assert_int_equal(gw_device_username_binding(buf, strlen(u), &id), 0);
    assert_int_equal(id, 5);
    assert_int_equal(gw_device_username_binding(buf, sizeof(buf), &id), 0);
    assert_int_equal(id, 0);
    assert_int_equal(gw_device_username_binding(NULL, 0, &id), 0);
    assert_int_equal(id, 0);
    assert_int_equal(gw_device_username_binding(NULL, 4, &id), GW_EINVAL);
    assert_int_equal(gw_device_username_binding(u, strlen(u), NULL), GW_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_make),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_binding),
        cmocka_unit_test(test_binding_bounds),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
