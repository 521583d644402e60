/* The broker plugin's plugin_opt_* names, defaults and refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "broker/options.h"

static const char *const required[][2] = {
    {"device_key", "k3y"},
    {"gateway_username", "gw"},
    {"gateway_password", "secret"},
};

static void set_required(struct gw_broker_options *o, const char *skip)
{
    char err[256];

    for (size_t i = 0; i < 3; i++) {
        if (skip == NULL || strcmp(required[i][0], skip) != 0) {
            assert_int_equal(gw_broker_options_set(o, required[i][0],
                                                   required[i][1], err,
                                                   sizeof(err)),
                             0);
        }
    }
}

static void test_defaults(void **state)
{
    struct gw_broker_options o = {0};
    char err[256] = "";
    (void)state;

    set_required(&o, NULL);
    assert_int_equal(gw_broker_options_check(&o, err, sizeof(err)), 0);
    assert_string_equal(o.device_key, "k3y");
    assert_int_equal(o.device_key_len, 3);
    assert_string_equal(o.device_topic, "device-server");
    assert_string_equal(o.gateway_username, "gw");
    assert_string_equal(o.gateway_password, "secret");
    assert_string_equal(o.topic_prefix, "devices");
    assert_int_equal(o.prefix_len, 7);
    assert_string_equal(o.down_pattern, "devices/+/down");
    assert_int_equal(o.max_message_bytes, 65536);
    assert_string_equal(o.revoke_topic, "hybridgw/broker/revoke");
    assert_int_equal(o.listen_backlog_n, -1); /* the kernel's somaxconn */
    gw_broker_options_free(&o);
    assert_null(o.device_key);
    assert_null(o.down_pattern);
}

static void test_given_values(void **state)
{
    struct gw_broker_options o = {0};
    char err[256] = "";
    (void)state;

    set_required(&o, NULL);
    assert_int_equal(
        gw_broker_options_set(&o, "device_topic", "dev/in", err, sizeof(err)),
        0);
    assert_int_equal(
        gw_broker_options_set(&o, "topic_prefix", "site/a", err, sizeof(err)),
        0);
    assert_int_equal(gw_broker_options_check(&o, err, sizeof(err)), 0);
    assert_string_equal(o.device_topic, "dev/in");
    assert_string_equal(o.down_pattern, "site/a/+/down");
    gw_broker_options_free(&o);
}

/* Each required option, when missing, is named in the refusal. */
static void test_required(void **state)
{
    (void)state;
    for (size_t i = 0; i < 3; i++) {
        struct gw_broker_options o = {0};
        char err[256] = "";
        set_required(&o, required[i][0]);
        assert_int_equal(gw_broker_options_check(&o, err, sizeof(err)),
                         GW_ECONFIG);
        assert_non_null(strstr(err, required[i][0]));
        assert_non_null(strstr(err, "required"));
        gw_broker_options_free(&o);
    }
}

static void test_unknown_and_twice(void **state)
{
    struct gw_broker_options o = {0};
    char err[256] = "";
    (void)state;

    assert_int_equal(
        gw_broker_options_set(&o, "device_keys", "x", err, sizeof(err)),
        GW_ENOENT);
    assert_non_null(strstr(err, "plugin_opt_device_keys"));
    assert_int_equal(
        gw_broker_options_set(&o, "device_key", "x", err, sizeof(err)), 0);
    assert_int_equal(
        gw_broker_options_set(&o, "device_key", "y", err, sizeof(err)),
        GW_EEXIST);
    assert_non_null(strstr(err, "twice"));
    assert_string_equal(o.device_key, "x");
    gw_broker_options_free(&o);
}

struct bad_value {
    const char *key;
    const char *value;
    const char *says;
};

static void test_bad_values(void **state)
{
    static char long_prefix[GW_BROKER_PREFIX_MAX + 2];
    memset(long_prefix, 'a', sizeof(long_prefix) - 1);
    const struct bad_value cases[] = {
        {"device_key", "", "empty"},
        {"gateway_username", "", "empty"},
        {"gateway_password", "", "empty"},
        {"device_topic", "", "empty"},
        {"device_topic", "dev/+", "wildcard"},
        {"device_topic", "#", "wildcard"},
        {"topic_prefix", "", "empty"},
        {"topic_prefix", "a/+/b", "wildcard"},
        {"topic_prefix", "devices/", "end with '/'"},
        {"topic_prefix", "$SYS", "'$'"},
        {"topic_prefix", long_prefix, "too long"},
        {"max_message_bytes", "", "empty"},
        {"max_message_bytes", "0", "byte count"},
        {"max_message_bytes", "-1", "byte count"},
        {"max_message_bytes", "64k", "byte count"},
        {"max_message_bytes", "268435456", "byte count"},
        {"max_message_bytes", "99999999999999999999", "byte count"},
        {"listen_backlog", "", "empty"},
        {"listen_backlog", "-1", "somaxconn or a count"},
        {"listen_backlog", "4k", "somaxconn or a count"},
        {"listen_backlog", "2147483648", "somaxconn or a count"},
        {"listen_backlog", "99999999999999999999", "somaxconn or a count"},
        {"revoke_topic", "", "empty"},
        {"revoke_topic", "gw/+/revoke", "wildcard"},
        {"revoke_topic", "$SYS/revoke", "'$'"},
        {"revoke_topic", "gw/revoke/", "end with '/'"},
    };
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gw_broker_options o = {0};
        char err[256] = "";
        assert_int_equal(gw_broker_options_set(&o, cases[i].key, cases[i].value,
                                               err, sizeof(err)),
                         GW_EINVAL);
        assert_non_null(strstr(err, cases[i].key));
        assert_non_null(strstr(err, cases[i].says));
        gw_broker_options_free(&o);
    }
}

/* The device payload bound: any count MQTT allows, checked once. */
static void test_max_message_bytes(void **state)
{
    static const char *const good[] = {"1", "8192", "268435455"};
    (void)state;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct gw_broker_options o = {0};
        char err[256] = "";
        set_required(&o, NULL);
        assert_int_equal(gw_broker_options_set(&o, "max_message_bytes", good[i],
                                               err, sizeof(err)),
                         0);
        assert_int_equal(gw_broker_options_check(&o, err, sizeof(err)), 0);
        assert_int_equal(o.max_message_bytes, (size_t)atol(good[i]));
        gw_broker_options_free(&o);
    }
}

/* The listeners' backlog: the kernel's bound, a count, or 0 for off. */
static void test_listen_backlog(void **state)
{
    static const struct {
        const char *value;
        int n;
    } good[] = {{"somaxconn", -1},
                {"0", 0},
                {"4096", 4096},
                {"2147483647", 2147483647}};
    (void)state;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct gw_broker_options o = {0};
        char err[256] = "";
        set_required(&o, NULL);
        assert_int_equal(gw_broker_options_set(&o, "listen_backlog",
                                               good[i].value, err, sizeof(err)),
                         0);
        assert_int_equal(gw_broker_options_check(&o, err, sizeof(err)), 0);
        assert_int_equal(o.listen_backlog_n, good[i].n);
        gw_broker_options_free(&o);
    }
}

/* A device topic inside the per-device space would let devices fake one. */
static void test_device_topic_outside_prefix(void **state)
{
    const char *bad[] = {"devices", "devices/x/down", "devices/a"};
    const char *fine[] = {"devices-server", "devicesx/a", "dev"};
    (void)state;

    for (size_t i = 0; i < 3; i++) {
        struct gw_broker_options o = {0};
        char err[256] = "";
        set_required(&o, NULL);
        assert_int_equal(
            gw_broker_options_set(&o, "device_topic", bad[i], err, sizeof(err)),
            0);
        assert_int_equal(gw_broker_options_check(&o, err, sizeof(err)),
                         GW_ECONFIG);
        assert_non_null(strstr(err, "must not be under"));
        gw_broker_options_free(&o);

        set_required(&o, NULL);
        assert_int_equal(gw_broker_options_set(&o, "device_topic", fine[i], err,
                                               sizeof(err)),
                         0);
        assert_int_equal(gw_broker_options_check(&o, err, sizeof(err)), 0);
        gw_broker_options_free(&o);
    }
}

/* The revoke topic is consumed: never one that is routed, written by
 * devices, or a will's. */
static void test_revoke_topic_apart(void **state)
{
    const char *bad[][2] = {
        {"revoke_topic", "devices"},
        {"revoke_topic", "devices/x/down"},
        {"revoke_topic", "device-server"},
        {"revoke_topic", "hybridgw/instances/gw-a"},
        {"revoke_topic", "hybridgw/instances"},
        {"gateway_status_topic", "hybridgw/broker/revoke"},
    };
    (void)state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct gw_broker_options o = {0};
        char err[256] = "";
        set_required(&o, NULL);
        assert_int_equal(
            gw_broker_options_set(&o, bad[i][0], bad[i][1], err, sizeof(err)),
            0);
        assert_int_equal(gw_broker_options_check(&o, err, sizeof(err)),
                         GW_ECONFIG);
        assert_non_null(strstr(err, "plugin_opt_revoke_topic"));
        gw_broker_options_free(&o);
    }
    struct gw_broker_options o = {0};
    char err[256] = "";
    set_required(&o, NULL);
    assert_int_equal(gw_broker_options_set(&o, "revoke_topic", "site/revoke",
                                           err, sizeof(err)),
                     0);
    assert_int_equal(gw_broker_options_check(&o, err, sizeof(err)), 0);
    assert_string_equal(o.revoke_topic, "site/revoke");
    gw_broker_options_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_given_values),
        cmocka_unit_test(test_required),
        cmocka_unit_test(test_unknown_and_twice),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_max_message_bytes),
        cmocka_unit_test(test_listen_backlog),
        cmocka_unit_test(test_device_topic_outside_prefix),
        cmocka_unit_test(test_revoke_topic_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
