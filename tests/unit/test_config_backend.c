/*
 * backends[].headers (docs/protocol.md section 6.2): what loads, what is
 * refused and why, values masked in dumps and never echoed in messages;
 * and the warnings of a valid config, the missing ?from=mqtt_gateway.
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

/* A config with one backend whose members after the url are extra. */
static int load(const char *extra, struct gw_config **cfg, char *err)
{
    char text[ERR_CAP * 2];

    snprintf(text, sizeof(text),
             "{\"backends\":[{\"name\":\"px\",\"url\":"
             "\"ws://h:1/x/?from=mqtt_gateway\"%s%s}]}",
             extra[0] != '\0' ? "," : "", extra);
    return gw_config_load_string(text, strlen(text), "x.json", cfg, err,
                                 ERR_CAP);
}

static void test_headers_load(void **state)
{
    char err[ERR_CAP];
    struct gw_config *cfg = NULL;

    (void)state;
    assert_int_equal(load("\"headers\":{\"X-Api-Key\":\"k-1\","
                          "\"CF-Access-Client-Secret\":\"s 2=\",\"x\":\"\"}",
                          &cfg, err),
                     0);
    assert_int_equal(cfg->backends[0].n_headers, 3);
    assert_string_equal(cfg->backends[0].headers[0].name, "X-Api-Key");
    assert_string_equal(cfg->backends[0].headers[0].value, "k-1");
    assert_string_equal(cfg->backends[0].headers[1].name,
                        "CF-Access-Client-Secret");
    assert_string_equal(cfg->backends[0].headers[1].value, "s 2=");
    assert_string_equal(cfg->backends[0].headers[2].value, "");
    gw_config_destroy(cfg);
    /* absent: none */
    assert_int_equal(load("", &cfg, err), 0);
    assert_int_equal(cfg->backends[0].n_headers, 0);
    assert_null(cfg->backends[0].headers);
    gw_config_destroy(cfg);
    /* Authorization is the operator's when no auth scheme sets it. */
    assert_int_equal(
        load("\"headers\":{\"Authorization\":\"Basic dTpw\"}", &cfg, err), 0);
    gw_config_destroy(cfg);
}

struct bad_header {
    const char *extra;
    const char *want; /* substring of the message */
};

static const struct bad_header bad_headers[] = {
    {"\"headers\":{\"X Key\":\"v\"}", "headers.X Key: is not a header name"},
    {"\"headers\":{\"X:Key\":\"v\"}", "headers.X:Key: is not a header name"},
    {"\"headers\":{\"\":\"v\"}", "headers.: is not a header name"},
    {"\"headers\":{\"X-\\u00e9\":\"v\"}", "is not a header name"},
    {"\"headers\":{\"X-A\":\"v\\r\\nX-Evil: 1\"}",
     "headers.X-A: must be printable ASCII"},
    {"\"headers\":{\"X-A\":\"v\\nw\"}", "must be printable ASCII"},
    {"\"headers\":{\"X-A\":\"tab\\there\"}", "must be printable ASCII"},
    {"\"headers\":{\"X-A\":\"\\u00e9\"}", "must be printable ASCII"},
    {"\"headers\":{\"Host\":\"v\"}", "headers.Host: is set by the gateway"},
    {"\"headers\":{\"connection\":\"v\"}", "is set by the gateway"},
    {"\"headers\":{\"Upgrade\":\"v\"}", "is set by the gateway"},
    {"\"headers\":{\"Sec-WebSocket-Protocol\":\"v\"}", "is set by the gateway"},
    {"\"headers\":{\"sec-websocket-key\":\"v\"}", "is set by the gateway"},
    {"\"headers\":{\"Device-Id\":\"v\"}", "is set by the gateway"},
    {"\"headers\":{\"client-id\":\"v\"}", "is set by the gateway"},
    {"\"headers\":{\"Protocol-Version\":\"v\"}", "is set by the gateway"},
    {"\"headers\":{\"X-Forwarded-For\":\"v\"}", "is set by the gateway"},
    {"\"headers\":{\"Content-Length\":\"5\"}", "is set by the gateway"},
    {"\"headers\":{\"Transfer-Encoding\":\"chunked\"}",
     "is set by the gateway"},
    {"\"auth\":{\"scheme\":\"bearer\",\"token\":\"t\"},"
     "\"headers\":{\"authorization\":\"v\"}",
     "headers.authorization: is set by auth.scheme"},
    {"\"auth\":{\"scheme\":\"xiaozhi-hmac\",\"secret\":\"s\"},"
     "\"headers\":{\"Authorization\":\"v\"}",
     "is set by auth.scheme"},
    {"\"headers\":{\"X-A\":\"1\",\"x-a\":\"2\"}",
     "headers.x-a: duplicate header"},
    {"\"headers\":{\"X-A\":1}", "headers.X-A: expected a string, got a number"},
    {"\"headers\":[\"X-A\"]", "headers: expected an object, got an array"},
    {"\"headers\":{\"a\":\"\",\"b\":\"\",\"c\":\"\",\"d\":\"\",\"e\":\"\","
     "\"f\":\"\",\"g\":\"\",\"h\":\"\",\"i\":\"\",\"j\":\"\",\"k\":\"\","
     "\"l\":\"\",\"m\":\"\",\"n\":\"\",\"o\":\"\",\"p\":\"\",\"q\":\"\"}",
     "headers: has 17 headers, at most 16 allowed"},
    {"\"heders\":{}", "unknown key (did you mean 'headers'?)"},
};

static void test_headers_refused(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_headers) / sizeof(bad_headers[0]); i++) {
        char err[ERR_CAP];
        struct gw_config *cfg = NULL;
        int rc = load(bad_headers[i].extra, &cfg, err);
        if (rc != GW_ECONFIG || strstr(err, bad_headers[i].want) == NULL) {
            print_error("case %zu: rc %d, want \"%s\", got:\n%s", i, rc,
                        bad_headers[i].want, err);
        }
        assert_int_equal(rc, GW_ECONFIG);
        assert_null(cfg);
        assert_non_null(strstr(err, bad_headers[i].want));
        assert_non_null(strstr(err, "x.json: backends[0]."));
    }
}

/* Long names and values, and the sum of them. */
static void test_headers_sizes(void **state)
{
    char extra[ERR_CAP], err[ERR_CAP], name[80], value[1100];
    struct gw_config *cfg = NULL;

    (void)state;
    memset(name, 'n', 64);
    name[64] = '\0';
    memset(value, 'v', 1024);
    value[1024] = '\0';
    snprintf(extra, sizeof(extra), "\"headers\":{\"%s\":\"%s\"}", name, value);
    assert_int_equal(load(extra, &cfg, err), 0);
    gw_config_destroy(cfg);
    snprintf(extra, sizeof(extra), "\"headers\":{\"%sn\":\"v\"}", name);
    assert_int_equal(load(extra, &cfg, err), GW_ECONFIG);
    assert_non_null(strstr(err, "longer than 64"));
    snprintf(extra, sizeof(extra), "\"headers\":{\"X\":\"%sv\"}", value);
    assert_int_equal(load(extra, &cfg, err), GW_ECONFIG);
    assert_non_null(strstr(err, "headers.X: is longer than 1024"));
    /* two of 1024 pass each on their own, not together */
    snprintf(extra, sizeof(extra), "\"headers\":{\"A\":\"%s\",\"B\":\"%s\"}",
             value, value);
    assert_int_equal(load(extra, &cfg, err), GW_ECONFIG);
    assert_non_null(
        strstr(err, "headers: names and values take 2050 bytes, at most 2048"));
}

/* A value is a secret: neither a refusal nor a dump shows it. */
static void test_headers_secret(void **state)
{
    char err[ERR_CAP], *text = NULL;
    struct gw_config *cfg = NULL, *again = NULL;

    (void)state;
    assert_int_equal(load("\"headers\":{\"Host\":\"tok-host-1\","
                          "\"X-A\":\"tok-ctl\\r\\n2\"}",
                          &cfg, err),
                     GW_ECONFIG);
    assert_null(strstr(err, "tok-"));
    assert_int_equal(
        load("\"headers\":{\"X-Api-Key\":\"tok-9\",\"X-E\":\"\"}", &cfg, err),
        0);
    assert_int_equal(gw_config_dump(cfg, false, &text), 0);
    assert_null(strstr(text, "tok-9"));
    assert_non_null(strstr(text, "\"X-Api-Key\":\t\"********\""));
    assert_non_null(strstr(text, "\"X-E\":\t\"\"")); /* empty stays */
    free(text);
    /* with secrets the dump loads back to the same config */
    assert_int_equal(gw_config_dump(cfg, true, &text), 0);
    assert_non_null(strstr(text, "\"X-Api-Key\":\t\"tok-9\""));
    assert_int_equal(
        gw_config_load_string(text, strlen(text), "dump", &again, err, ERR_CAP),
        0);
    assert_int_equal(again->backends[0].n_headers, 2);
    assert_string_equal(again->backends[0].headers[0].value, "tok-9");
    free(text);
    gw_config_destroy(again);
    gw_config_destroy(cfg);
}

/* A reload may change them: they are no restart-only key. */
static void test_headers_reload(void **state)
{
    char err[ERR_CAP];
    struct gw_config *a = NULL, *b = NULL;

    (void)state;
    assert_int_equal(load("\"headers\":{\"X-A\":\"1\"}", &a, err), 0);
    assert_int_equal(load("\"headers\":{\"X-A\":\"2\"}", &b, err), 0);
    assert_int_equal(gw_config_restart_changes(a, b, NULL, NULL), 0);
    gw_config_destroy(a);
    gw_config_destroy(b);
}

static void on_warning(const char *path, const char *text, void *arg)
{
    char *out = arg;
    size_t used = strlen(out);

    snprintf(out + used, ERR_CAP - used, "%s: %s\n", path, text);
}

static void test_gateway_query_warning(void **state)
{
    static const char text[] =
        "{\"udp\":{\"bind\":\"127.0.0.1\"},\"backends\":["
        "{\"name\":\"ok\",\"url\":\"ws://h/xiaozhi/v1/?from=mqtt_gateway\"},"
        "{\"name\":\"bare\",\"url\":\"ws://h/xiaozhi/v1/\"},"
        "{\"name\":\"later\",\"url\":\"ws://h/x?from=mqtt_gateway&a=1\"},"
        "{\"name\":\"frag\",\"url\":\"ws://h/x?from=mqtt_gateway#f\"},"
        "{\"name\":\"raw\",\"url\":\"ws://h/x/\",\"framing\":\"raw\"},"
        "{\"name\":\"v3\",\"url\":\"ws://h/x/\",\"framing\":\"v3\"}]}";
    char err[ERR_CAP], out[ERR_CAP] = "";
    struct gw_config *cfg = NULL;

    (void)state;
    assert_int_equal(gw_config_load_string(text, strlen(text), "x.json", &cfg,
                                           err, sizeof(err)),
                     0);
    assert_int_equal(gw_config_warnings(cfg, on_warning, out), 2);
    assert_non_null(strstr(out, "backends[1].url: backend bare: framing is "
                                "v2 but the url does not end with "
                                "?from=mqtt_gateway"));
    assert_non_null(strstr(out, "backends[2].url: backend later:"));
    assert_null(strstr(out, "backends[0]"));
    assert_null(strstr(out, "backends[3]")); /* the fragment is not sent */
    assert_null(strstr(out, "backends[4]"));
    assert_null(strstr(out, "backends[5]"));
    assert_int_equal(gw_config_warnings(cfg, NULL, NULL), 2);
    gw_config_destroy(cfg);
}

/* Devices told an address only this host reaches, while the socket
 * listens beyond it: said by --check-config and at start. */
static void test_udp_public_host_warning(void **state)
{
    static const struct {
        const char *udp;
        const char *warning; /* NULL: none */
    } cases[] = {
        {"{}", "udp.public_host: 127.0.0.1 is a loopback address while "
               "udp.bind 0.0.0.0 is not loopback"},
        {"{\"bind\":\"::\",\"public_host\":\"localhost\"}",
         "udp.public_host: localhost is a loopback address while udp.bind :: "
         "is not loopback"},
        {"{\"public_host\":\"0.0.0.0\"}",
         "udp.public_host: 0.0.0.0 is unspecified while udp.bind 0.0.0.0"},
        {"{\"bind\":\"10.0.0.5\",\"public_host\":\"::\"}",
         "udp.public_host: :: is unspecified"},
        {"{\"bind\":\"127.0.0.1\"}", NULL},
        {"{\"public_host\":\"192.0.2.7\"}", NULL},
        {"{\"public_host\":\"gw.example\"}", NULL},
    };
    char text[512], err[ERR_CAP], out[ERR_CAP];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gw_config *cfg = NULL;
        snprintf(text, sizeof(text),
                 "{\"udp\":%s,\"backends\":[{\"name\":\"b\",\"url\":"
                 "\"ws://h/x?from=mqtt_gateway\"}]}",
                 cases[i].udp);
        out[0] = '\0';
        assert_int_equal(gw_config_load_string(text, strlen(text), "x.json",
                                               &cfg, err, sizeof(err)),
                         0);
        assert_int_equal(gw_config_warnings(cfg, on_warning, out),
                         cases[i].warning != NULL ? 1 : 0);
        if (cases[i].warning != NULL) {
            assert_non_null(strstr(out, cases[i].warning));
        }
        gw_config_destroy(cfg);
    }
}

static void test_header_check(void **state)
{
    (void)state;
    assert_null(gw_config_header_check("X-Key", "v", GW_AUTH_NONE));
    assert_null(gw_config_header_check("authorization", "v", GW_AUTH_NONE));
    assert_non_null(
        gw_config_header_check("authorization", "v", GW_AUTH_BEARER));
    assert_non_null(gw_config_header_check("X-Key", "a\x7f", GW_AUTH_NONE));
    assert_non_null(gw_config_header_check("X-Key", "\x80", GW_AUTH_NONE));
    assert_non_null(gw_config_header_check("X(Key)", "v", GW_AUTH_NONE));
    assert_null(
        gw_config_header_check("!#$%&'*+-.^_`|~09aZ", "", GW_AUTH_NONE));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_headers_load),
        cmocka_unit_test(test_headers_refused),
        cmocka_unit_test(test_headers_sizes),
        cmocka_unit_test(test_headers_secret),
        cmocka_unit_test(test_headers_reload),
        cmocka_unit_test(test_gateway_query_warning),
        cmocka_unit_test(test_udp_public_host_warning),
        cmocka_unit_test(test_header_check),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
