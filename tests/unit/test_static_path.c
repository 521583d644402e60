/*
 * The operator page's file paths (codec/static_path.c): what may be
 * served and as what, and every spelling of a way out that must not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "codec/static_path.h"

struct good_case {
    const char *path;
    const char *rel;
    const char *type;
};

static const struct good_case good[] = {
    {"", "index.html", "text/html; charset=utf-8"},
    {"index.html", "index.html", "text/html; charset=utf-8"},
    {"app.js", "app.js", "text/javascript; charset=utf-8"},
    {"lib/mod.mjs", "lib/mod.mjs", "text/javascript; charset=utf-8"},
    {"style.css", "style.css", "text/css; charset=utf-8"},
    {"STYLE.CSS", "STYLE.CSS", "text/css; charset=utf-8"},
    {"favicon.svg", "favicon.svg", "image/svg+xml"},
    {"img/logo.png", "img/logo.png", "image/png"},
    {"favicon.ico", "favicon.ico", "image/x-icon"},
    {"data/x.json", "data/x.json", "application/json"},
    {"notes.txt", "notes.txt", "text/plain; charset=utf-8"},
    {"fonts/a_b-c.woff2", "fonts/a_b-c.woff2", "font/woff2"},
    {"docs/", "docs/index.html", "text/html; charset=utf-8"},
    {"a/b/c/d/e/f/g/", "a/b/c/d/e/f/g/index.html", "text/html; charset=utf-8"},
    {"v1.2/app.js", "v1.2/app.js", "text/javascript; charset=utf-8"},
    {"a..b.html", "a..b.html", "text/html; charset=utf-8"},
};

static void test_served(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        char out[GW_STATIC_PATH_MAX + 1];
        const char *type = NULL;
        int rc = gw_static_path_parse(good[i].path, strlen(good[i].path), out,
                                      sizeof(out), &type);
        assert_int_equal(rc, 0);
        assert_string_equal(out, good[i].rel);
        assert_non_null(type);
        assert_string_equal(type, good[i].type);
    }
}

struct bad_case {
    const char *path;
    size_t len; /* 0: strlen */
    int rc;
};

static const struct bad_case bad[] = {
    {"..", 0, GW_EMALFORMED},
    {"../etc/passwd", 0, GW_EMALFORMED},
    {"a/../../x.html", 0, GW_EMALFORMED},
    {"a/..", 0, GW_EMALFORMED},
    {"./index.html", 0, GW_EMALFORMED},
    {"a/./b.html", 0, GW_EMALFORMED},
    {".git/config", 0, GW_EMALFORMED},
    {".env", 0, GW_EMALFORMED},
    {"a/.hidden.html", 0, GW_EMALFORMED},
    {"/etc/passwd", 0, GW_EMALFORMED},
    {"a//b.html", 0, GW_EMALFORMED},
    {"..\\..\\x.html", 0, GW_EMALFORMED},
    {"a\\b.html", 0, GW_EMALFORMED},
    {"%2e%2e/x.html", 0, GW_EMALFORMED},
    {"a b.html", 0, GW_EMALFORMED},
    {"a:b.html", 0, GW_EMALFORMED},
    {"x.html\n", 0, GW_EMALFORMED},
    {"caf\xc3\xa9.html", 0, GW_EMALFORMED},
    {"index.html\0.css", 15, GW_EMALFORMED},
    {"README", 0, GW_EPROTO},
    {"x.exe", 0, GW_EPROTO},
    {"x.html.bak", 0, GW_EPROTO},
    {"x.", 0, GW_EPROTO},
    {"dir.d/file", 0, GW_EPROTO},
    {"a/b/c/d/e/f/g/h/i.html", 0, GW_ETOOBIG},
    {"a/b/c/d/e/f/g/h/", 0, GW_ETOOBIG},
};

static void test_refused(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char out[GW_STATIC_PATH_MAX + 1];
        const char *type = "x";
        size_t len = bad[i].len != 0 ? bad[i].len : strlen(bad[i].path);
        int rc =
            gw_static_path_parse(bad[i].path, len, out, sizeof(out), &type);
        if (rc != bad[i].rc) {
            print_error("case %zu \"%s\": %d, want %d\n", i, bad[i].path, rc,
                        bad[i].rc);
        }
        assert_int_equal(rc, bad[i].rc);
        assert_string_equal(out, "");
        assert_null(type);
    }
}

/* Names and the whole path: each limit holds exactly. */
static void test_limits(void **state)
{
    char path[600], out[GW_STATIC_PATH_MAX + 1];
    const char *type;

    (void)state;
    memset(path, 'a', GW_STATIC_SEGMENT_MAX - 3);
    memcpy(path + GW_STATIC_SEGMENT_MAX - 3, ".js", 4);
    assert_int_equal(
        gw_static_path_parse(path, strlen(path), out, sizeof(out), &type), 0);
    memset(path, 'a', GW_STATIC_SEGMENT_MAX - 2);
    memcpy(path + GW_STATIC_SEGMENT_MAX - 2, ".js", 4);
    assert_int_equal(
        gw_static_path_parse(path, strlen(path), out, sizeof(out), &type),
        GW_ETOOBIG);
    /* 4 names of 63 and "abc.js": 4 * 64 + 6 = 262 > 255. */
    size_t n = 0;
    for (int k = 0; k < 4; k++) {
        memset(path + n, 'd', 63);
        path[n + 63] = '/';
        n += 64;
    }
    memcpy(path + n, "abc.js", 7);
    assert_int_equal(
        gw_static_path_parse(path, strlen(path), out, sizeof(out), &type),
        GW_ETOOBIG);
    /* A directory whose index would pass the cap. */
    n = 0;
    for (int k = 0; k < 4; k++) {
        memset(path + n, 'd', k < 3 ? 63 : 54);
        n += k < 3 ? 63 : 54;
        path[n++] = '/';
    }
    path[n] = '\0'; /* 3 * 64 + 55 = 247; with index.html 257 */
    assert_int_equal(gw_static_path_parse(path, n, out, sizeof(out), &type),
                     GW_ETOOBIG);
    /* Over the cap before any byte is looked at. */
    memset(path, 'x', sizeof(path) - 1);
    path[sizeof(path) - 1] = '\0';
    assert_int_equal(
        gw_static_path_parse(path, strlen(path), out, sizeof(out), &type),
        GW_ETOOBIG);
}

/* The output buffer: exactly enough, one byte short, none. */
static void test_out_space(void **state)
{
    char out[16];
    const char *type;

    (void)state;
    assert_int_equal(gw_static_path_parse("app.js", 6, out, 7, &type), 0);
    assert_string_equal(out, "app.js");
    assert_int_equal(gw_static_path_parse("app.js", 6, out, 6, &type),
                     GW_ENOSPC);
    assert_null(type);
    assert_int_equal(gw_static_path_parse("", 0, out, 10, &type), GW_ENOSPC);
    assert_int_equal(gw_static_path_parse("", 0, out, 11, &type), 0);
    assert_string_equal(out, "index.html");
    assert_int_equal(gw_static_path_parse("app.js", 6, NULL, 0, &type),
                     GW_ENOSPC);
}

static void test_type(void **state)
{
    (void)state;
    assert_string_equal(gw_static_path_type("a.HTML", 6),
                        "text/html; charset=utf-8");
    assert_null(gw_static_path_type("html", 4));
    assert_null(gw_static_path_type(".html", 5));
    assert_null(gw_static_path_type("a/.html", 7));
    assert_null(gw_static_path_type("a.js/x", 6));
    assert_null(gw_static_path_type("", 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_served), cmocka_unit_test(test_refused),
        cmocka_unit_test(test_limits), cmocka_unit_test(test_out_space),
        cmocka_unit_test(test_type),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
