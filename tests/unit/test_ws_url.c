/*
 * Backend urls: how they split, what is refused, and that the config
 * loader refuses every url the connect would refuse (a config used to load
 * urls such as ws://h:0/ that then failed at every session's connect).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "codec/ws_url.h"
#include "config/config.h"

static void test_split(void **state)
{
    static const struct {
        const char *url;
        bool tls;
        const char *host, *authority, *path;
        int port;
    } good[] = {
        {"ws://127.0.0.1:8000/xiaozhi/v1/?from=mqtt_gateway", false,
         "127.0.0.1", "127.0.0.1:8000", "/xiaozhi/v1/?from=mqtt_gateway", 8000},
        {"wss://lab.example.internal/voice", true, "lab.example.internal",
         "lab.example.internal", "/voice", 443},
        {"ws://h", false, "h", "h", "", 80},
        {"ws://h?q=1#frag", false, "h", "h", "?q=1", 80},
        {"wss://[::1]:8443/x#y", true, "::1", "[::1]:8443", "/x", 8443},
        {"ws://[::ffff:10.0.0.1]/", false, "::ffff:10.0.0.1",
         "[::ffff:10.0.0.1]", "/", 80},
        {"ws://h:65535", false, "h", "h:65535", "", 65535},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct gw_ws_url u;
        const char *url = good[i].url;
        assert_int_equal(gw_ws_url_parse(url, strlen(url), &u, NULL), 0);
        assert_int_equal(u.tls, good[i].tls);
        assert_int_equal(u.port, good[i].port);
        assert_int_equal(u.host_len, strlen(good[i].host));
        assert_memory_equal(u.host, good[i].host, u.host_len);
        assert_int_equal(u.authority_len, strlen(good[i].authority));
        assert_memory_equal(u.authority, good[i].authority, u.authority_len);
        assert_int_equal(u.path_len, strlen(good[i].path));
        assert_memory_equal(u.path, good[i].path, u.path_len);
    }
}

/* Refused by the connect before, and now by the parser both use. */
static const char *const bad_urls[] = {
    "http://127.0.0.1/", "ws://",         "ws:///path",  "ws://:80/",
    "ws://h:0/",         "ws://h:65536/", "ws://h:12a/", "ws://h:/",
    "ws://user@h/",      "ws://h/pa th",  "ws://h/\x01", "ws://[::1/",
    "ws://[::1]x/",      "wss//h/",       "WS://h/",     "ws://h:000080/",
    "ws://,,,/",         "ws://[]/",      "ws://[h]/",   "ws://a[b]/",
    "ws://h\xc3\xa9/",   "ws://h/\x7f",
};

static void test_refuse(void **state)
{
    struct gw_ws_url u = {.port = -1};
    const char *why;

    (void)state;
    for (size_t i = 0; i < sizeof(bad_urls) / sizeof(bad_urls[0]); i++) {
        why = NULL;
        if (gw_ws_url_parse(bad_urls[i], strlen(bad_urls[i]), &u, &why) !=
            GW_EINVAL) {
            fail_msg("accepted %s", bad_urls[i]);
        }
        assert_non_null(why);
        assert_int_equal(u.port, -1); /* untouched */
    }
    /* Only len bytes count: a NUL inside is refused, bytes past len unread. */
    assert_int_equal(gw_ws_url_parse("ws://h\0x", 8, &u, NULL), GW_EINVAL);
    assert_int_equal(gw_ws_url_parse("ws://h:80", 6, &u, NULL), 0);
    assert_int_equal(u.port, 80);
    assert_int_equal(u.authority_len, 1);
}

static void test_config_agrees(void **state)
{
    char json[256], err[512];
    struct gw_config *cfg = NULL;

    (void)state;
    for (size_t i = 0; i < sizeof(bad_urls) / sizeof(bad_urls[0]); i++) {
        if (strchr(bad_urls[i], '\x01') != NULL) {
            continue; /* JSON would need an escape; the rest go as they are */
        }
        snprintf(json, sizeof(json),
                 "{\"backends\":[{\"name\":\"m\",\"url\":\"%s\"}]}",
                 bad_urls[i]);
        if (gw_config_load_string(json, strlen(json), "x.json", &cfg, err,
                                  sizeof(err)) == 0) {
            gw_config_destroy(cfg);
            fail_msg("the config loads %s", bad_urls[i]);
        }
        if (strstr(err, "backends[0].url: ") == NULL) {
            fail_msg("%s: %s", bad_urls[i], err);
        }
    }
    snprintf(json, sizeof(json),
             "{\"backends\":[{\"name\":\"m\",\"url\":"
             "\"ws://h:0/\"}]}");
    assert_int_equal(gw_config_load_string(json, strlen(json), "x.json", &cfg,
                                           err, sizeof(err)),
                     GW_ECONFIG);
    assert_non_null(strstr(err, "backends[0].url: port must be 1-65535"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_refuse),
        cmocka_unit_test(test_config_agrees),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
