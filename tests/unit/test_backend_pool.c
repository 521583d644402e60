/* Backend pools: each strategy's distribution, sticky stability, health. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "config/config.h"
#include "gateway/backend/backend_pool.h"

#define N_DEVICES 3000

static void candidates(struct gw_pool_candidate *c, size_t n,
                       const unsigned *weights)
{
    static const char *const names[] = {"a", "b", "c", "d"};

    for (size_t i = 0; i < n; i++) {
        c[i] = (struct gw_pool_candidate){
            .weight = weights[i],
            .name_hash = gw_backend_pool_hash(names[i], 1),
            .in_rotation = true,
        };
    }
}

static uint64_t device_hash(unsigned i)
{
    char id[64];
    int len = snprintf(id, sizeof(id), "GID_t@@@02_00_00_00_%02x_%02x@@@u%u",
                       (i >> 8) & 0xff, i & 0xff, i);
    return gw_backend_pool_hash(id, (size_t)len);
}

static void test_ordered_takes_first_eligible(void **state)
{
    unsigned w[3] = {1, 1, 1};
    struct gw_pool_candidate c[3];
    (void)state;

    candidates(c, 3, w);
    assert_int_equal(gw_backend_pool_choose(GW_STRATEGY_ORDERED, c, 3, 0, 0),
                     0);
    c[0].tried = true;
    assert_int_equal(gw_backend_pool_choose(GW_STRATEGY_ORDERED, c, 3, 0, 0),
                     1);
    c[1].in_rotation = false;
    assert_int_equal(gw_backend_pool_choose(GW_STRATEGY_ORDERED, c, 3, 0, 0),
                     2);
    c[2].max_sessions = 4;
    c[2].active = 4; /* full */
    assert_int_equal(gw_backend_pool_choose(GW_STRATEGY_ORDERED, c, 3, 0, 0),
                     -1);
}

static void test_weighted_distribution(void **state)
{
    unsigned w[3] = {1, 2, 3}, count[3] = {0};
    struct gw_pool_candidate c[3];
    uint64_t x = 88172645463325252ULL;
    (void)state;

    candidates(c, 3, w);
    for (unsigned i = 0; i < 6000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int k = gw_backend_pool_choose(GW_STRATEGY_WEIGHTED, c, 3, 0, x);
        assert_true(k >= 0 && k < 3);
        count[k]++;
    }
    /* Expected 1000, 2000, 3000; 5 % tolerance of the total. */
    for (int k = 0; k < 3; k++) {
        int want = 1000 * (int)w[k];
        assert_in_range(count[k], (unsigned)(want - 300),
                        (unsigned)(want + 300));
    }
    c[2].tried = true; /* draws only among the rest */
    for (unsigned i = 0; i < 100; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        assert_int_not_equal(
            gw_backend_pool_choose(GW_STRATEGY_WEIGHTED, c, 3, 0, x), 2);
    }
}

static void test_least_active_per_weight(void **state)
{
    unsigned w[3] = {1, 1, 2}, count[3] = {0};
    struct gw_pool_candidate c[3];
    (void)state;

    candidates(c, 3, w);
    /* Sessions that stay: each goes where fewest are per weight. */
    for (unsigned i = 0; i < 400; i++) {
        int k = gw_backend_pool_choose(GW_STRATEGY_LEAST, c, 3, 0, 0);
        assert_true(k >= 0);
        c[k].active++;
        count[k]++;
    }
    assert_int_equal(count[0], 100);
    assert_int_equal(count[1], 100);
    assert_int_equal(count[2], 200);
    c[1].active = 0; /* its sessions ended: it takes the next ones */
    assert_int_equal(gw_backend_pool_choose(GW_STRATEGY_LEAST, c, 3, 0, 0), 1);
}

static void test_sticky_moves_only_devices_of_leaving_backend(void **state)
{
    unsigned w[3] = {1, 1, 1}, count[3] = {0};
    struct gw_pool_candidate c[3];
    static int before[N_DEVICES];
    (void)state;

    candidates(c, 3, w);
    for (unsigned i = 0; i < N_DEVICES; i++) {
        before[i] =
            gw_backend_pool_choose(GW_STRATEGY_STICKY, c, 3, device_hash(i), i);
        assert_true(before[i] >= 0);
        count[before[i]]++;
        /* Same device, other random and load: same backend. */
        c[0].active = i;
        assert_int_equal(gw_backend_pool_choose(GW_STRATEGY_STICKY, c, 3,
                                                device_hash(i), ~(uint64_t)i),
                         before[i]);
        c[0].active = 0;
    }
    for (int k = 0; k < 3; k++) { /* 1000 each, within 10 % */
        assert_in_range(count[k], 900, 1100);
    }
    c[1].in_rotation = false; /* b leaves */
    unsigned moved = 0;
    for (unsigned i = 0; i < N_DEVICES; i++) {
        int k =
            gw_backend_pool_choose(GW_STRATEGY_STICKY, c, 3, device_hash(i), 0);
        if (before[i] == 1) {
            assert_true(k == 0 || k == 2);
            moved++;
        } else {
            assert_int_equal(k, before[i]);
        }
    }
    assert_int_equal(moved, count[1]);
    c[1].in_rotation = true; /* b returns: its devices come back */
    for (unsigned i = 0; i < N_DEVICES; i++) {
        assert_int_equal(
            gw_backend_pool_choose(GW_STRATEGY_STICKY, c, 3, device_hash(i), 0),
            before[i]);
    }
}

static void test_sticky_weighted(void **state)
{
    unsigned w[2] = {1, 3}, count[2] = {0};
    struct gw_pool_candidate c[2];
    (void)state;

    candidates(c, 2, w);
    for (unsigned i = 0; i < 4000; i++) {
        count[gw_backend_pool_choose(GW_STRATEGY_STICKY, c, 2, device_hash(i),
                                     0)]++;
    }
    assert_in_range(count[0], 800, 1200); /* 1000 expected */
}

static void test_classify(void **state)
{
    (void)state;
    assert_int_equal(gw_backend_pool_classify(
                         "connect failed: HS: ws upgrade response not 101 "
                         "(HTTP 401)",
                         false),
                     GW_BFAIL_UPGRADE);
    assert_int_equal(gw_backend_pool_classify(
                         "connect failed: certificate: self-signed", false),
                     GW_BFAIL_TLS);
    assert_int_equal(
        gw_backend_pool_classify("connect failed: connection refused", false),
        GW_BFAIL_CONNECT);
    assert_int_equal(gw_backend_pool_classify("connect timeout", false),
                     GW_BFAIL_CONNECT);
    assert_int_equal(gw_backend_pool_classify("closed by backend 1000", false),
                     GW_BFAIL_CLOSED);
    assert_int_equal(gw_backend_pool_classify("closed by backend 1000", true),
                     GW_BFAIL_NONE);
    assert_int_equal(gw_backend_pool_classify("closed by backend 1011", true),
                     GW_BFAIL_CLOSED);
    assert_int_equal(gw_backend_pool_classify("connection lost", true),
                     GW_BFAIL_CLOSED);
    assert_int_equal(gw_backend_pool_classify("closed by gateway", true),
                     GW_BFAIL_NONE);
}

static const char pool_config[] =
    "{\"backends\":["
    "{\"name\":\"a\",\"url\":\"ws://127.0.0.1:1/\"},"
    "{\"name\":\"b\",\"url\":\"ws://127.0.0.1:2/\",\"max_sessions\":2}],"
    "\"routes\":[{\"backends\":[\"a\",\"b\"]}]}";

static void test_health_backoff_and_trial(void **state)
{
    char err[512];
    struct gw_config *cfg = NULL;
    struct gw_backend_pool *pool = gw_backend_pool_new(1);
    struct gw_pool_ticket t1 = {0}, t2 = {0}, t3 = {0};
    struct gw_pool_tried tried = {{0}};
    const struct gw_route_config *route;
    (void)state;

    assert_non_null(pool);
    assert_int_equal(gw_config_load_string(pool_config, sizeof(pool_config) - 1,
                                           "t.json", &cfg, err, sizeof(err)),
                     0);
    route = &cfg->routes[0];
    assert_int_equal(route->strategy, GW_STRATEGY_ORDERED);
    assert_int_equal(cfg->backends[0].weight, 1);

    /* a fails to connect: out for 100 ms, b takes the sessions. */
    assert_int_equal(
        gw_backend_pool_pick(pool, cfg, route, "d1", &tried, 0, &t1), 0);
    gw_backend_pool_failed(pool, &t1, GW_BFAIL_CONNECT, "refused", 100, 400, 0);
    assert_null(t1.st);
    const struct gw_backend_state *a = gw_backend_pool_find(pool, "a");
    assert_int_equal(a->health, GW_BHEALTH_DOWN);
    assert_int_equal(a->failures[GW_BFAIL_CONNECT], 1);
    assert_int_equal(a->active, 0);
    assert_int_equal(
        gw_backend_pool_pick(pool, cfg, route, "d1", &tried, 0, &t1), 1);
    memset(&tried, 0, sizeof(tried));
    assert_int_equal(
        gw_backend_pool_pick(pool, cfg, route, "d2", &tried, 50, &t2), 1);
    /* b is full (max_sessions 2), a out of rotation yet tried: last
     * resort before nothing. */
    memset(&tried, 0, sizeof(tried));
    assert_int_equal(
        gw_backend_pool_pick(pool, cfg, route, "d3", &tried, 50, &t3), 0);
    assert_false(t3.trial);
    gw_backend_pool_done(pool, &t3);
    memset(&tried, 0, sizeof(tried));
    tried.bits[0] = 1; /* a tried: b full, nothing left */
    assert_int_equal(
        gw_backend_pool_pick(pool, cfg, route, "d3", &tried, 50, &t3), -1);

    /* After the backoff one trial; a second session does not get one. */
    memset(&tried, 0, sizeof(tried));
    assert_int_equal(
        gw_backend_pool_pick(pool, cfg, route, "d3", &tried, 100, &t3), 0);
    assert_true(t3.trial);
    assert_int_equal(a->health, GW_BHEALTH_TRIAL);
    assert_false(gw_backend_pool_in_rotation(a, 100));
    /* The trial fails: backoff doubles (200 ms). */
    gw_backend_pool_failed(pool, &t3, GW_BFAIL_HELLO_TIMEOUT, "no hello", 100,
                           400, 150);
    assert_int_equal(a->health, GW_BHEALTH_DOWN);
    assert_int_equal(a->retry_at_ms, 350);
    assert_false(gw_backend_pool_in_rotation(a, 349));
    assert_true(gw_backend_pool_in_rotation(a, 350));
    /* A trial that ends without a verdict hands the trial on. */
    memset(&tried, 0, sizeof(tried));
    assert_int_equal(
        gw_backend_pool_pick(pool, cfg, route, "d4", &tried, 350, &t3), 0);
    gw_backend_pool_done(pool, &t3);
    assert_true(gw_backend_pool_in_rotation(a, 351));
    /* The next trial succeeds: back up, latency counted. */
    memset(&tried, 0, sizeof(tried));
    assert_int_equal(
        gw_backend_pool_pick(pool, cfg, route, "d4", &tried, 400, &t3), 0);
    gw_backend_pool_succeeded(pool, &t3, 430);
    assert_int_equal(a->health, GW_BHEALTH_UP);
    assert_int_equal(a->failures_in_row, 0);
    assert_int_equal(a->hellos, 1);
    assert_int_equal(a->latency[2], 1); /* 30 ms: the 50 ms bucket */
    assert_int_equal(a->active, 1);
    gw_backend_pool_done(pool, &t3);
    gw_backend_pool_done(pool, &t3); /* idempotent */
    assert_int_equal(a->active, 0);
    gw_backend_pool_done(pool, &t1);
    gw_backend_pool_done(pool, &t2);
    assert_int_equal(gw_backend_pool_find(pool, "b")->active, 0);

    /* Backoff is capped at backoff_max_ms. */
    for (int i = 0; i < 10; i++) {
        memset(&tried, 0, sizeof(tried));
        uint64_t now = 1000 + (uint64_t)i * 1000;
        assert_int_equal(
            gw_backend_pool_pick(pool, cfg, route, "d5", &tried, now, &t1), 0);
        gw_backend_pool_failed(pool, &t1, GW_BFAIL_CLOSED, "lost", 100, 400,
                               now);
        assert_true(a->retry_at_ms <= now + 400);
    }
    assert_int_equal(a->retry_at_ms, 10000 + 400);

    /* A failed probe takes an up backend out, without a session. */
    const struct gw_backend_state *b = gw_backend_pool_find(pool, "b");
    assert_int_equal(b->health, GW_BHEALTH_UP);
    gw_backend_pool_probe_failed(pool, "b", GW_BFAIL_UPGRADE, "HTTP 503", 100,
                                 400, 20000);
    assert_int_equal(b->health, GW_BHEALTH_DOWN);
    assert_int_equal(b->failures[GW_BFAIL_UPGRADE], 1);
    assert_int_equal(b->active, 0);
    assert_int_equal(b->retry_at_ms, 20100);
    gw_backend_pool_free(pool);
    gw_config_destroy(cfg);
}

static void test_config_keys(void **state)
{
    static const char bad_strategy[] =
        "{\"backends\":[{\"name\":\"a\",\"url\":\"ws://h/\"}],"
        "\"routes\":[{\"backends\":[\"a\"],\"strategy\":\"fastest\"}]}";
    static const char twice[] =
        "{\"backends\":[{\"name\":\"a\",\"url\":\"ws://h/\"}],"
        "\"routes\":[{\"backends\":[\"a\",\"a\"]}]}";
    static const char bad_weight[] =
        "{\"backends\":[{\"name\":\"a\",\"url\":\"ws://h/\",\"weight\":0}]}";
    static const char bad_backoff[] =
        "{\"backends\":[{\"name\":\"a\",\"url\":\"ws://h/\"}],"
        "\"health\":{\"backoff_ms\":5000,\"backoff_max_ms\":1000}}";
    static const char good[] =
        "{\"backends\":[{\"name\":\"a\",\"url\":\"ws://h/\",\"weight\":3,"
        "\"max_sessions\":10},{\"name\":\"b\",\"url\":\"ws://h/\"}],"
        "\"routes\":[{\"backends\":[\"a\",\"b\"],\"strategy\":\"sticky\"}],"
        "\"health\":{\"backoff_ms\":500,\"backoff_max_ms\":8000}}";
    char err[1024];
    struct gw_config *cfg = NULL;
    (void)state;

    assert_int_equal(gw_config_load_string(bad_strategy,
                                           sizeof(bad_strategy) - 1, "t.json",
                                           &cfg, err, sizeof(err)),
                     GW_ECONFIG);
    assert_non_null(strstr(err, "routes[0].strategy"));
    assert_non_null(strstr(err, "sticky"));
    assert_int_equal(gw_config_load_string(twice, sizeof(twice) - 1, "t.json",
                                           &cfg, err, sizeof(err)),
                     GW_ECONFIG);
    assert_non_null(strstr(err, "routes[0].backends[1]: backend 'a' is listed "
                                "twice"));
    assert_int_equal(gw_config_load_string(bad_weight, sizeof(bad_weight) - 1,
                                           "t.json", &cfg, err, sizeof(err)),
                     GW_ECONFIG);
    assert_non_null(strstr(err, "backends[0].weight"));
    assert_int_equal(gw_config_load_string(bad_backoff, sizeof(bad_backoff) - 1,
                                           "t.json", &cfg, err, sizeof(err)),
                     GW_ECONFIG);
    assert_non_null(strstr(err, "health.backoff_max_ms"));
    assert_int_equal(gw_config_load_string(good, sizeof(good) - 1, "t.json",
                                           &cfg, err, sizeof(err)),
                     0);
    assert_int_equal(cfg->routes[0].strategy, GW_STRATEGY_STICKY);
    assert_int_equal(cfg->backends[0].weight, 3);
    assert_int_equal(cfg->backends[0].max_sessions, 10);
    assert_int_equal(cfg->backends[1].max_sessions, 0);
    assert_int_equal(cfg->health.backoff_ms, 500);
    assert_int_equal(cfg->limits.failover_budget_ms, 9000);
    assert_string_equal(gw_route_strategy_name(cfg->routes[0].strategy),
                        "sticky");
    gw_config_destroy(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ordered_takes_first_eligible),
        cmocka_unit_test(test_weighted_distribution),
        cmocka_unit_test(test_least_active_per_weight),
        cmocka_unit_test(test_sticky_moves_only_devices_of_leaving_backend),
        cmocka_unit_test(test_sticky_weighted),
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_health_backoff_and_trial),
        cmocka_unit_test(test_config_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
