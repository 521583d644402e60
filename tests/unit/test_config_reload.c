/*
 * Reload semantics: restart-only keys keep their running values in the
 * reloaded config, reloadable keys take the new ones, and both configs
 * still free cleanly afterwards.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "config/config.h"

static struct gw_config *load(const char *text)
{
    char err[1024];
    struct gw_config *cfg = NULL;

    assert_int_equal(gw_config_load_string(text, strlen(text), "t.json", &cfg,
                                           err, sizeof(err)),
                     0);
    return cfg;
}

static void test_keep_restart_values(void **state)
{
    (void)state;
    struct gw_config *running = load(
        "{\"backends\":[{\"name\":\"a\",\"url\":\"ws://127.0.0.1:1/\"}],"
        "\"mqtt\":{\"host\":\"10.0.0.1\",\"down_topic\":\"d/{client_id}\"},"
        "\"udp\":{\"port\":1000},\"log\":{\"level\":\"debug\"}}");
    struct gw_config *loaded =
        load("{\"backends\":[{\"name\":\"b\",\"url\":\"ws://127.0.0.1:2/\"}],"
             "\"mqtt\":{\"host\":\"10.0.0.2\"},"
             "\"udp\":{\"port\":2000},\"log\":{\"level\":\"info\"}}");

    assert_int_equal(gw_config_restart_changes(running, loaded, NULL, NULL),
                     3); /* mqtt.host, mqtt.down_topic, udp.port */
    assert_int_equal(gw_config_keep_restart_values(running, loaded), 3);
    assert_int_equal(loaded->udp.port, 1000);
    assert_string_equal(loaded->mqtt.host, "10.0.0.1");
    assert_string_equal(loaded->mqtt.down_topic, "d/{client_id}");
    assert_int_equal(loaded->log.level, GW_LOG_INFO);   /* reloadable */
    assert_string_equal(loaded->backends[0].name, "b"); /* reloadable */
    assert_int_equal(running->udp.port, 2000);
    assert_int_equal(gw_config_restart_changes(running, loaded, NULL, NULL), 3);
    /* Nothing left to keep once loaded matches what runs. */
    struct gw_config *again = load(
        "{\"backends\":[{\"name\":\"c\",\"url\":\"ws://127.0.0.1:3/\"}],"
        "\"mqtt\":{\"host\":\"10.0.0.1\",\"down_topic\":\"d/{client_id}\"},"
        "\"udp\":{\"port\":1000}}");
    assert_int_equal(gw_config_keep_restart_values(loaded, again), 0);
    gw_config_destroy(again);
    gw_config_destroy(running);
    gw_config_destroy(loaded);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keep_restart_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
