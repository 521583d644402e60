/*
 * The activation keys (ota.activation*, ota.serial_key, ota.revoke_topic)
 * and the bindings store's (bindings.*): defaults, ranges, the two checks
 * across keys, and the secrets kept out of dumps and messages.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config/config.h"

#define ERR_CAP 4096
#define BACKEND "\"backends\":[{\"name\":\"main\",\"url\":\"ws://h:1/x\"}]"
/* What ota.enabled needs besides. */
#define OTA_ON                                                                 \
    "\"enabled\":true,\"mqtt_endpoint\":\"mqtt.example:1883\","                \
    "\"device_key\":\"device-key-1\""

static struct gw_config *load(const char *text, char *err, int *rc)
{
    struct gw_config *cfg = NULL;

    *rc =
        gw_config_load_string(text, strlen(text), "x.json", &cfg, err, ERR_CAP);
    return cfg;
}

static struct gw_config *load_ok(const char *text)
{
    char err[ERR_CAP];
    int rc;
    struct gw_config *cfg = load(text, err, &rc);

    if (rc != 0) {
        print_error("unexpected failure %d:\n%s", rc, err);
    }
    assert_int_equal(rc, 0);
    return cfg;
}

static void test_defaults(void **state)
{
    struct gw_config *cfg = load_ok("{" BACKEND "}");
    (void)state;

    assert_int_equal(cfg->ota.activation, GW_OTA_ACTIVATION_ON);
    assert_int_equal(cfg->ota.activation_ttl_s, 600);
    assert_string_equal(cfg->ota.activation_message,
                        "Give this code to your operator");
    assert_string_equal(cfg->ota.serial_key, "");
    assert_string_equal(cfg->ota.revoke_topic, "hybridgw/broker/revoke");
    assert_int_equal(cfg->bindings.store, GW_BINDINGS_SQLITE);
    assert_string_equal(cfg->bindings.path, "/var/lib/hybridgw/bindings.db");
    assert_string_equal(cfg->bindings.conninfo, "");
    gw_config_destroy(cfg);
}

static void test_shipped_config(void **state)
{
    char path[512], err[ERR_CAP];
    struct gw_config *cfg = NULL;
    (void)state;

    snprintf(path, sizeof(path), "%s/config/hybridgw.json", GW_SOURCE_DIR);
    assert_int_equal(gw_config_load_file(path, &cfg, err, sizeof(err)), 0);
    assert_int_equal(cfg->ota.activation, GW_OTA_ACTIVATION_ON);
    assert_int_equal(cfg->bindings.store, GW_BINDINGS_SQLITE);
    assert_string_equal(cfg->bindings.path, "/var/lib/hybridgw/bindings.db");
    gw_config_destroy(cfg);
}

static void test_values_accepted(void **state)
{
    struct gw_config *cfg;
    (void)state;

    cfg = load_ok("{" BACKEND ",\"ota\":{\"activation\":\"off\","
                  "\"activation_ttl_s\":60,\"activation_message\":\"Hi\","
                  "\"serial_key\":\"0123456789abcdef\","
                  "\"revoke_topic\":\"ops/revoke\"},"
                  "\"bindings\":{\"store\":\"postgresql\","
                  "\"conninfo\":\"host=db user=gw password=pw-9\"}}");
    assert_int_equal(cfg->ota.activation, GW_OTA_ACTIVATION_OFF);
    assert_int_equal(cfg->ota.activation_ttl_s, 60);
    assert_string_equal(cfg->ota.activation_message, "Hi");
    assert_string_equal(cfg->ota.serial_key, "0123456789abcdef");
    assert_string_equal(cfg->ota.revoke_topic, "ops/revoke");
    assert_int_equal(cfg->bindings.store, GW_BINDINGS_POSTGRESQL);
    assert_string_equal(cfg->bindings.conninfo,
                        "host=db user=gw password=pw-9");
    gw_config_destroy(cfg);
    cfg = load_ok("{" BACKEND ",\"ota\":{\"activation_ttl_s\":86400},"
                  "\"bindings\":{\"path\":\"b.db\"}}");
    assert_int_equal(cfg->ota.activation_ttl_s, 86400);
    assert_string_equal(cfg->bindings.path, "b.db");
    gw_config_destroy(cfg);
}

struct bad_case {
    const char *text;
    const char *want;
};

static const struct bad_case bad_cases[] = {
    {"{" BACKEND ",\"ota\":{\"activation\":\"maybe\"}}",
     "ota.activation: 'maybe' is not one of on, off"},
    {"{" BACKEND ",\"ota\":{\"activation_ttl_s\":59}}",
     "ota.activation_ttl_s:"},
    {"{" BACKEND ",\"ota\":{\"activation_ttl_s\":86401}}",
     "ota.activation_ttl_s:"},
    {"{" BACKEND ",\"ota\":{\"serial_key\":\"short-key-15chr\"}}",
     "ota.serial_key: must be at least 16 characters"},
    {"{" BACKEND ",\"ota\":{\"revoke_topic\":\"\"}}",
     "ota.revoke_topic: must not be empty"},
    {"{" BACKEND ",\"ota\":{\"revoke_topic\":\"a/#\"}}",
     "ota.revoke_topic: must not contain '+' or '#'"},
    {"{" BACKEND ",\"ota\":{\"group\":\"hybridgw\"}}",
     "ota.group: must not start with \"hybridgw\""},
    {"{" BACKEND ",\"ota\":{\"group\":\"HybridGW_{board}\"}}",
     "ota.group: must not start with \"hybridgw\""},
    {"{" BACKEND ",\"bindings\":{\"store\":\"mysql\"}}",
     "bindings.store: 'mysql' is not one of sqlite, postgresql"},
    {"{" BACKEND ",\"bindings\":{\"path\":\"\"}}", "bindings.path:"},
    {"{" BACKEND ",\"bindings\":{\"pth\":\"x\"}}", "did you mean 'path'"},
    /* Several instances, the endpoint on, activation on: one SQLite file
     * cannot serve them. */
    {"{" BACKEND ",\"ota\":{" OTA_ON "},"
     "\"cluster\":{\"mode\":\"hash\",\"instance\":\"a\"}}",
     "bindings.store: must be \"postgresql\" when cluster.mode is \"hash\" "
     "and ota.activation is \"on\""},
    {"{" BACKEND ",\"ota\":{" OTA_ON "},\"bindings\":{\"store\":\"sqlite\"},"
     "\"cluster\":{\"mode\":\"shared\",\"instance\":\"a\"}}",
     "cluster.mode is \"shared\""},
};

static void test_bad(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        char err[ERR_CAP];
        int rc;
        struct gw_config *cfg = load(bad_cases[i].text, err, &rc);

        if (rc != GW_ECONFIG || strstr(err, bad_cases[i].want) == NULL) {
            print_error("case %zu: rc %d, want \"%s\", got:\n%s", i, rc,
                        bad_cases[i].want, err);
        }
        assert_int_equal(rc, GW_ECONFIG);
        assert_null(cfg);
        assert_non_null(strstr(err, bad_cases[i].want));
        /* A refused secret is named, never shown. */
        assert_null(strstr(err, "short-key-15chr"));
    }
}

/* The cluster check bites only where activation is in force. */
static void test_cluster_check_scope(void **state)
{
    static const char *const fine[] = {
        /* the OTA endpoint off: the keys are only parsed */
        "{" BACKEND ",\"cluster\":{\"mode\":\"hash\",\"instance\":\"a\"}}",
        /* lab mode keeps no bindings that must be shared */
        "{" BACKEND ",\"ota\":{" OTA_ON ",\"activation\":\"off\"},"
        "\"cluster\":{\"mode\":\"hash\",\"instance\":\"a\"}}",
        /* a shared store */
        "{" BACKEND ",\"ota\":{" OTA_ON "},"
        "\"bindings\":{\"store\":\"postgresql\"},"
        "\"cluster\":{\"mode\":\"hash\",\"instance\":\"a\"}}",
        /* one instance alone */
        "{" BACKEND ",\"ota\":{" OTA_ON "}}",
    };
    (void)state;

    for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++) {
        gw_config_destroy(load_ok(fine[i]));
    }
}

static void test_secrets_masked(void **state)
{
    struct gw_config *cfg =
        load_ok("{" BACKEND ",\"ota\":{\"serial_key\":\"serial-key-0123456\"},"
                "\"bindings\":{\"conninfo\":\"password=pg-secret-7\"}}");
    char *text = NULL;
    (void)state;

    assert_int_equal(gw_config_dump(cfg, false, &text), 0);
    assert_null(strstr(text, "serial-key-0123456"));
    assert_null(strstr(text, "pg-secret-7"));
    assert_non_null(strstr(text, "\"serial_key\":\t\"********\""));
    assert_non_null(strstr(text, "\"conninfo\":\t\"********\""));
    assert_non_null(strstr(text, "\"activation\":\t\"on\""));
    assert_non_null(strstr(text, "\"store\":\t\"sqlite\""));
    free(text);
    assert_int_equal(gw_config_dump(cfg, true, &text), 0);
    assert_non_null(strstr(text, "pg-secret-7"));
    free(text);
    gw_config_destroy(cfg);
}

struct changes {
    char paths[256];
};

static void on_change(const char *path, void *arg)
{
    struct changes *c = arg;
    size_t used = strlen(c->paths);

    snprintf(c->paths + used, sizeof(c->paths) - used, "%s,", path);
}

/* The store is opened at start; the ota keys are read per request. */
static void test_reload(void **state)
{
    struct gw_config *running = load_ok("{" BACKEND "}");
    struct gw_config *loaded = load_ok(
        "{" BACKEND ",\"ota\":{\"activation\":\"off\",\"activation_ttl_s\":90,"
        "\"serial_key\":\"0123456789abcdefX\",\"revoke_topic\":\"r\"},"
        "\"bindings\":{\"store\":\"postgresql\",\"path\":\"x.db\","
        "\"conninfo\":\"host=db\"}}");
    struct changes seen = {.paths = ""};
    (void)state;

    assert_int_equal(
        gw_config_restart_changes(running, loaded, on_change, &seen), 3);
    assert_string_equal(seen.paths,
                        "bindings.store,bindings.path,bindings.conninfo,");
    gw_config_destroy(loaded);
    gw_config_destroy(running);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_shipped_config),
        cmocka_unit_test(test_values_accepted),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_cluster_check_scope),
        cmocka_unit_test(test_secrets_masked),
        cmocka_unit_test(test_reload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
