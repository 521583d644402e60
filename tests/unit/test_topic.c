/* Per-device topics: '+' capture against patterns and template filling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "codec/topic.h"

struct capture_case {
    const char *pattern;
    const char *topic;
    int rc;
    const char *want; /* the captured level when rc == 0 */
};

static const struct capture_case capture_cases[] = {
    {"devices/+/up", "devices/GID@@@aa_bb_cc_dd_ee_ff@@@u/up", 0,
     "GID@@@aa_bb_cc_dd_ee_ff@@@u"},
    {"devices/+/presence", "devices/x/presence", 0, "x"},
    {"+/up", "abc/up", 0, "abc"},
    {"devices/+", "devices/abc", 0, "abc"},
    {"devices/+/up", "devices/a/down", GW_ENOENT, NULL},
    {"devices/+/up", "devices//up", GW_ENOENT, NULL},
    {"devices/+/up", "devices/a/up/", GW_ENOENT, NULL},
    {"devices/+/up", "devices/a/up/more", GW_ENOENT, NULL},
    {"devices/+/up", "devices/a", GW_ENOENT, NULL},
    {"devices/+/up", "devices/a/", GW_ENOENT, NULL},
    {"devices/+/up", "", GW_ENOENT, NULL},
    {"devices/+/up", "device/a/up", GW_ENOENT, NULL},
    {"devices/+/up", "devicesX/a/up", GW_ENOENT, NULL},
    {"devices/up", "devices/up", GW_ENOENT, NULL}, /* nothing to capture */
    {"a/+/+", "a/b/c", 0, "b"},                    /* first '+' wins */
};

static void test_capture_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(capture_cases) / sizeof(capture_cases[0]);
         i++) {
        const struct capture_case *c = &capture_cases[i];
        const char *cap = NULL;
        size_t cap_len = 0;
        int rc = gw_topic_capture(c->pattern, c->topic, strlen(c->topic), &cap,
                                  &cap_len);
        assert_int_equal(rc, c->rc);
        if (rc == 0) {
            assert_int_equal(cap_len, strlen(c->want));
            assert_memory_equal(cap, c->want, cap_len);
        }
    }
}

/* The topic length bounds the match, not a NUL. */
static void test_capture_length_bound(void **state)
{
    const char *cap;
    size_t cap_len;
    (void)state;

    const char *topic = "devices/abc/upXXXX";
    assert_int_equal(
        gw_topic_capture("devices/+/up", topic, 14, &cap, &cap_len), 0);
    assert_int_equal(cap_len, 3);
    assert_int_equal(
        gw_topic_capture("devices/+/up", topic, 13, &cap, &cap_len), GW_ENOENT);
}

static void test_format(void **state)
{
    char out[64];
    (void)state;

    assert_int_equal(
        gw_topic_format("devices/{client_id}/down", "abc", out, sizeof(out)),
        0);
    assert_string_equal(out, "devices/abc/down");
    assert_int_equal(gw_topic_format("{client_id}", "x", out, sizeof(out)), 0);
    assert_string_equal(out, "x");
    assert_int_equal(gw_topic_format("devices/down", "x", out, sizeof(out)),
                     GW_EINVAL);
    /* Exactly fits: 16 characters and the NUL. */
    assert_int_equal(
        gw_topic_format("devices/{client_id}/down", "abc", out, 17), 0);
    assert_int_equal(
        gw_topic_format("devices/{client_id}/down", "abc", out, 16), GW_ENOSPC);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_table),
        cmocka_unit_test(test_capture_length_bound),
        cmocka_unit_test(test_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
