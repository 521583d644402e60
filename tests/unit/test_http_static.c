/*
 * The operator page's file server (gateway/api/http_static.c) on a detached
 * HTTP server: what each request gets from a directory of real files,
 * links and oversized ones, read at once; and a client that leaves while
 * its file is read on the threadpool.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include <cmocka.h>

#include "gateway/api/http_static.h"
#include "gateway/http/http_server.h"

struct world {
    char dir[64];  /* the served directory */
    char out[128]; /* a file outside it */
    const char *root;
    uv_loop_t *loop; /* NULL: read at once */
    unsigned requests;
};

static void write_path(const char *path, size_t size)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    for (size_t i = 0; i < size; i++) {
        fputc('x', f);
    }
    assert_int_equal(fclose(f), 0);
}

static void write_file(const char *dir, const char *name, size_t size)
{
    char path[512];

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    write_path(path, size);
}

static int setup(void **state)
{
    struct world *w = calloc(1, sizeof(*w));
    char path[256];

    assert_non_null(w);
    const char *tmp = getenv("TMPDIR");

    /* A short TMPDIR only: the paths must fit w's buffers. */
    snprintf(w->dir, sizeof(w->dir), "%s/gw-static-XXXXXX",
             tmp != NULL && strlen(tmp) < 40 ? tmp : P_tmpdir);
    assert_non_null(mkdtemp(w->dir));
    snprintf(w->out, sizeof(w->out), "%s.outside.html", w->dir);
    write_file(w->dir, "index.html", 10);
    write_file(w->dir, "app.js", 100);
    write_file(w->dir, "big.js", GW_HTTP_STATIC_MAX_BYTES + 1);
    snprintf(path, sizeof(path), "%s/sub", w->dir);
    assert_int_equal(mkdir(path, 0700), 0);
    write_file(path, "page.html", 5);
    write_path(w->out, 7);
    snprintf(path, sizeof(path), "%s/link.html", w->dir);
    assert_int_equal(symlink(w->out, path), 0);
    snprintf(path, sizeof(path), "%s/linkdir", w->dir);
    assert_int_equal(symlink("sub", path), 0);
    w->root = w->dir;
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    struct world *w = *state;
    char cmd[256];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", w->dir, w->out);
    assert_int_equal(system(cmd), 0);
    free(w);
    return 0;
}

static void on_request(struct gw_http_req *req, void *arg)
{
    struct world *w = arg;

    w->requests++;
    gw_http_static_serve(req, w->loop, w->root, "/ui");
}

static struct gw_http_server *server(struct world *w)
{
    struct gw_http_server_options o = {
        .max_body = 1024, .on_request = on_request, .arg = w};
    struct gw_http_server *srv = NULL;

    assert_int_equal(gw_http_server_init_detached(&o, &srv), 0);
    return srv;
}

static int get(struct gw_http_server *srv, const char *method,
               const char *target)
{
    static const char *const headers[] = {"Host", "127.0.0.1"};

    return gw_http_server_inject(srv, method, target, headers, 1, NULL, 0, 0);
}

static void test_answers(void **state)
{
    struct world *w = *state;
    struct gw_http_server *srv = server(w);
    static const struct {
        const char *method, *target;
        int status;
    } cases[] = {
        {"GET", "/ui", 301},
        {"GET", "/ui/", 200},
        {"HEAD", "/ui/", 200},
        {"GET", "/ui/index.html", 200},
        {"GET", "/ui/app.js", 200},
        {"GET", "/ui/sub/page.html", 200},
        {"POST", "/ui/app.js", 405},
        {"DELETE", "/ui/", 405},
        {"GET", "/ui/missing.js", 404},
        {"GET", "/ui/sub/", 404},              /* no index there */
        {"GET", "/ui/sub", 404},               /* a directory, no type */
        {"GET", "/ui/../index.html", 404},     /* not normalised here */
        {"GET", "/ui/sub/../app.js", 404},     /* nor here */
        {"GET", "/ui/.hidden.js", 404},        /* hidden */
        {"GET", "/ui//app.js", 404},           /* an empty name */
        {"GET", "/ui/link.html", 404},         /* a link out of the dir */
        {"GET", "/ui/linkdir/page.html", 404}, /* a link to a dir inside */
        {"GET", "/ui/app.exe", 404},
        {"GET", "/ui/big.js", 500}, /* over the cap */
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int status = get(srv, cases[i].method, cases[i].target);
        if (status != cases[i].status) {
            print_error("%s %s: %d, want %d\n", cases[i].method,
                        cases[i].target, status, cases[i].status);
        }
        assert_int_equal(status, cases[i].status);
    }
    assert_int_equal(gw_http_server_responses(srv, 200), 5);
    gw_http_server_close(srv, NULL, NULL);
}

/* The page off, or its directory gone: 404, nothing else breaks. */
static void test_no_directory(void **state)
{
    struct world *w = *state;
    struct gw_http_server *srv = server(w);

    w->root = "";
    assert_int_equal(get(srv, "GET", "/ui/"), 404);
    assert_int_equal(get(srv, "GET", "/ui"), 301);
    w->root = "/nonexistent/hybridgw-web";
    assert_int_equal(get(srv, "GET", "/ui/app.js"), 404);
    w->root = w->dir;
    assert_int_equal(get(srv, "GET", "/ui/app.js"), 200);
    gw_http_server_close(srv, NULL, NULL);
}

/*
 * With a loop the read goes to the threadpool and the answer comes later:
 * the injecting client leaves first. Each read is cancelled or finishes
 * into nothing; the loop ends with no job left (ASan: none leaked).
 */
static void test_client_leaves(void **state)
{
    struct world *w = *state;
    uv_loop_t loop;
    struct gw_http_server *srv;

    assert_int_equal(uv_loop_init(&loop), 0);
    w->loop = &loop;
    srv = server(w);
    for (int i = 0; i < 50; i++) {
        assert_int_equal(get(srv, "GET", i % 2 ? "/ui/app.js" : "/ui/big.js"),
                         0);
    }
    /* Refusals that need no file still answer at once. */
    assert_int_equal(get(srv, "GET", "/ui/../x.js"), 404);
    assert_int_equal(get(srv, "POST", "/ui/"), 405);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(gw_http_server_responses(srv, 200), 0);
    assert_int_equal(gw_http_server_responses(srv, 500), 0);
    gw_http_server_close(srv, NULL, NULL);
    assert_int_equal(uv_loop_close(&loop), 0);
    w->loop = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_leaves, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
