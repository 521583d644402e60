/*
 * The resolver cache on a real loop and libuv's real threadpool: one
 * lookup for concurrent requests of a name, answers from the cache until
 * they expire, failures cached briefly, cancelled requests never called,
 * IP literals never looked up, and a close with a lookup still running.
 * dns_probe.h counts the getaddrinfo calls and where they run. Then the
 * broker link, which resolves the broker's name with it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "common/dns_cache.h"
#include "common/log.h"
#include "common/mqtt_link.h"
#include "dns_probe.h"
#include "fixture.h"
#include "fixture_parts.h"

#define MAX_ANSWERS 8

struct answer {
    int status;
    char ip[GW_DNS_IP_MAX];
};

static struct {
    struct gw_fixture fx;
    struct gw_dns *dns;
    struct answer answers[MAX_ANSWERS];
    int n_answers;
    bool in_resolve;              /* a callback inside gw_dns_resolve */
    struct gw_dns_req *to_cancel; /* by the first callback */
    uv_timer_t wait;
    bool waited;
} T;

#define RUN_UNTIL(cond) GW_FIXTURE_RUN_UNTIL(&T.fx, cond)

static void on_answer(void *arg, int status, const char *ip)
{
    struct answer *a = &T.answers[T.n_answers];

    assert_true(T.n_answers < MAX_ANSWERS);
    assert_ptr_equal(arg, &T);
    assert_false(T.in_resolve);
    a->status = status;
    if (status == 0) {
        assert_non_null(ip);
        snprintf(a->ip, sizeof(a->ip), "%s", ip);
    } else {
        assert_null(ip);
    }
    T.n_answers++;
    if (T.to_cancel != NULL) {
        gw_dns_cancel(T.to_cancel);
        T.to_cancel = NULL;
    }
}

static int resolve(const char *name, char *ip, struct gw_dns_req **req)
{
    char buf[GW_DNS_IP_MAX];
    struct gw_dns_req *r;
    int rc;

    T.in_resolve = true;
    rc = gw_dns_resolve(T.dns, name, on_answer, &T, ip != NULL ? ip : buf,
                        GW_DNS_IP_MAX, req != NULL ? req : &r);
    T.in_resolve = false;
    return rc;
}

static void start(unsigned ttl_ms, unsigned negative_ttl_ms,
                  unsigned max_entries)
{
    struct gw_dns_options opts = {ttl_ms, negative_ttl_ms, max_entries};

    memset(&T, 0, sizeof(T));
    gw_fixture_loop_init(&T.fx);
    gw_dns_probe_reset();
    assert_int_equal(gw_dns_create(&T.fx.loop, &opts, &T.dns), 0);
}

static void stop(void)
{
    gw_dns_close(T.dns);
    T.dns = NULL;
    gw_fixture_loop_close(&T.fx); /* asserts the loop is empty */
}

static struct gw_dns_stats stats(void)
{
    struct gw_dns_stats st;

    gw_dns_get_stats(T.dns, &st);
    return st;
}

static void on_wait(uv_timer_t *timer)
{
    (void)timer;
    T.waited = true;
}

static void on_wait_closed(uv_handle_t *handle)
{
    (void)handle;
}

/* Lets ms of loop time pass (cache entries expire by the loop's clock). */
static void pass_ms(unsigned ms)
{
    T.waited = false;
    uv_timer_init(&T.fx.loop, &T.wait);
    uv_timer_start(&T.wait, on_wait, ms, 0);
    RUN_UNTIL(T.waited);
    uv_close((uv_handle_t *)&T.wait, on_wait_closed);
}

static bool loopback(const char *ip)
{
    return strcmp(ip, "127.0.0.1") == 0 || strcmp(ip, "::1") == 0;
}

static void test_coalescing_and_cache(void **state)
{
    struct gw_dns_req *a, *b;
    struct gw_dns_probe probe;
    char ip[GW_DNS_IP_MAX];

    (void)state;
    start(60000, 0, 0);
    /* Two requests while the name is looked up: one getaddrinfo. */
    assert_int_equal(resolve("localhost", NULL, &a), 0);
    assert_int_equal(resolve("localhost", NULL, &b), 0);
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    assert_int_equal(stats().lookups, 1);
    assert_int_equal(stats().coalesced, 1);
    assert_int_equal(T.n_answers, 0); /* never from inside the call */
    RUN_UNTIL(T.n_answers == 2);
    assert_int_equal(T.answers[0].status, 0);
    assert_int_equal(T.answers[1].status, 0);
    assert_true(loopback(T.answers[0].ip));
    assert_string_equal(T.answers[0].ip, T.answers[1].ip);
    /* The lookup ran on the threadpool, not on this (the loop's) thread. */
    gw_dns_probe_get(&probe);
    assert_int_equal(probe.names_on_loop, 0);
    assert_int_equal(probe.names_off_loop, 1);

    /* Fresh: answered at once, no callback, no lookup. */
    assert_int_equal(resolve("localhost", ip, &a), 1);
    assert_null(a);
    assert_string_equal(ip, T.answers[0].ip);
    assert_int_equal(stats().lookups, 1);
    assert_int_equal(stats().hits, 1);
    assert_int_equal(stats().entries, 1);
    pass_ms(20);
    assert_int_equal(T.n_answers, 2);
    stop();
}

static void test_ttl_expiry(void **state)
{
    struct gw_dns_req *req;

    (void)state;
    start(100, 0, 0);
    assert_int_equal(resolve("localhost", NULL, &req), 0);
    RUN_UNTIL(T.n_answers == 1);
    assert_int_equal(resolve("localhost", NULL, &req), 1);
    assert_int_equal(stats().lookups, 1);
    pass_ms(150);
    /* Stale: looked up again, in place. */
    assert_int_equal(resolve("localhost", NULL, &req), 0);
    assert_non_null(req);
    assert_int_equal(stats().lookups, 2);
    RUN_UNTIL(T.n_answers == 2);
    assert_int_equal(T.answers[1].status, 0);
    assert_int_equal(stats().entries, 1);
    stop();
}

static void test_negative_cache(void **state)
{
    struct gw_dns_req *req;
    int rc;

    (void)state;
    start(60000, 100, 0);
    assert_int_equal(resolve("nothing.invalid", NULL, &req), 0);
    RUN_UNTIL(T.n_answers == 1);
    assert_int_equal(T.answers[0].status, UV_EAI_NONAME);
    assert_int_equal(stats().failures, 1);
    assert_non_null(strstr(gw_dns_strerror(T.answers[0].status), "unknown"));
    /* Within the negative TTL: the cached error, at once. */
    rc = resolve("nothing.invalid", NULL, &req);
    assert_int_equal(rc, UV_EAI_NONAME);
    assert_null(req);
    assert_int_equal(stats().lookups, 1);
    pass_ms(150);
    assert_int_equal(resolve("nothing.invalid", NULL, &req), 0);
    assert_int_equal(stats().lookups, 2);
    RUN_UNTIL(T.n_answers == 2);
    assert_int_equal(T.answers[1].status, UV_EAI_NONAME);
    stop();
}

static void test_cancel(void **state)
{
    struct gw_dns_req *a, *b, *c;
    struct gw_dns_probe probe;

    (void)state;
    start(60000, 0, 0);
    gw_dns_probe_slow("localhost", 200);
    assert_int_equal(resolve("localhost", NULL, &a), 0);
    assert_int_equal(resolve("localhost", NULL, &b), 0);
    assert_int_equal(resolve("localhost", NULL, &c), 0);
    gw_dns_cancel(a); /* its owner went away */
    T.to_cancel = c;  /* and b's callback ends c's owner */
    RUN_UNTIL(T.n_answers == 1);
    pass_ms(50);
    assert_int_equal(T.n_answers, 1); /* only b */
    gw_dns_probe_get(&probe);
    assert_int_equal(probe.returned, 1);
    /* The answer still filled the cache. */
    assert_int_equal(resolve("localhost", NULL, &a), 1);
    gw_dns_cancel(NULL);
    stop();
}

static void test_literals(void **state)
{
    static const char *const literals[] = {"127.0.0.1", "::1", "[::1]",
                                           "[fe80::1]", "10.1.2.3"};
    static const char *const want[] = {"127.0.0.1", "::1", "::1", "fe80::1",
                                       "10.1.2.3"};
    struct gw_dns_req *req;
    struct gw_dns_probe probe;
    char ip[GW_DNS_IP_MAX];

    (void)state;
    start(0, 0, 0);
    for (size_t i = 0; i < sizeof(literals) / sizeof(literals[0]); i++) {
        assert_int_equal(resolve(literals[i], ip, &req), 1);
        assert_null(req);
        assert_string_equal(ip, want[i]);
    }
    assert_false(gw_dns_is_literal("localhost"));
    assert_false(gw_dns_is_literal("[localhost]"));
    assert_false(gw_dns_is_literal("[127.0.0.1]"));
    assert_false(gw_dns_is_literal("1.2.3"));
    assert_int_equal(stats().lookups, 0);
    assert_int_equal(stats().literals, 5);
    assert_int_equal(stats().entries, 0);
    pass_ms(10);
    gw_dns_probe_get(&probe);
    assert_int_equal(probe.names_on_loop + probe.names_off_loop, 0);
    assert_int_equal(T.n_answers, 0);
    stop();
}

static void test_bounds_and_arguments(void **state)
{
    char name[GW_DNS_NAME_MAX + 2];
    struct gw_dns_req *req;

    (void)state;
    start(60000, 0, 2);
    memset(name, 'a', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    assert_int_equal(resolve("", NULL, &req), GW_EINVAL);
    assert_int_equal(resolve(name, NULL, &req), GW_EINVAL);
    /* Two names under way fill a cache of two: a third is refused. */
    gw_dns_probe_slow("a.invalid", 100);
    assert_int_equal(resolve("a.invalid", NULL, &req), 0);
    assert_int_equal(resolve("localhost", NULL, &req), 0);
    assert_int_equal(resolve("b.invalid", NULL, &req), GW_ELIMIT);
    RUN_UNTIL(T.n_answers == 2);
    /* Answered entries make room: the stalest goes. */
    assert_int_equal(resolve("b.invalid", NULL, &req), 0);
    assert_int_equal(stats().entries, 2);
    RUN_UNTIL(T.n_answers == 3);
    assert_true(stats().entries <= 2);
    stop();
}

static void test_close_while_looking_up(void **state)
{
    struct gw_dns_req *req;
    struct gw_dns_probe probe;

    (void)state;
    start(0, 0, 0);
    gw_dns_probe_slow("localhost", 200);
    assert_int_equal(resolve("localhost", NULL, &req), 0);
    assert_int_equal(resolve("other.invalid", NULL, &req), 0);
    /* No callback after the close; the memory goes when the lookups are
     * back (the loop runs until then: ASan sees no leak). */
    stop();
    gw_dns_probe_get(&probe);
    assert_int_equal(T.n_answers, 0);
}

/* ---- the broker link ------------------------------------------------ */

static struct gw_fixture_broker B;

static struct {
    struct gw_mqtt_link *link;
    bool up, closed;
    uv_timer_t tick;
    uint64_t last_ns, max_gap_ns;
    unsigned ticks;
} L;

static void on_link_state(struct gw_mqtt_link *link, bool up, void *arg)
{
    (void)link;
    (void)arg;
    L.up = up;
}

static void on_link_closed(struct gw_mqtt_link *link, void *arg)
{
    (void)link;
    (void)arg;
    L.closed = true;
}

static void on_link_tick(uv_timer_t *timer)
{
    uint64_t now = uv_hrtime();

    (void)timer;
    if (now - L.last_ns > L.max_gap_ns) {
        L.max_gap_ns = now - L.last_ns;
    }
    L.last_ns = now;
    L.ticks++;
}

static char cert_dir[64]; /* gw_fixture_certs(), for the whole run */

/* ca_file NULL: plain MQTT; else TLS on the broker's TLS listener. */
static void link_open_with(const char *host, const char *ca_file)
{
    struct gw_mqtt_link_options o = {
        .host = host,
        .port = ca_file != NULL ? B.tls_port : B.port,
        .client_id = "hybridgw-test-dns",
        .keepalive_s = 60,
        .on_state = on_link_state,
        .tls = ca_file != NULL,
        .ca_file = ca_file,
    };

    memset(&L, 0, sizeof(L));
    uv_timer_init(&T.fx.loop, &L.tick);
    uv_timer_start(&L.tick, on_link_tick, 5, 5);
    L.last_ns = uv_hrtime();
    assert_int_equal(gw_mqtt_link_init(&T.fx.loop, &o, &L.link), 0);
}

static void link_open(const char *host)
{
    link_open_with(host, NULL);
}

static void link_close(void)
{
    uv_close((uv_handle_t *)&L.tick, NULL);
    gw_mqtt_link_close(L.link, on_link_closed, NULL);
    RUN_UNTIL(L.closed);
}

#define BROKER_SLOW_MS 1000

/* A broker named "localhost" behind a slow resolver: the loop keeps
 * turning while the name is looked up, on the threadpool, and the link
 * comes up. */
static void test_broker_by_name(void **state)
{
    struct gw_dns_probe probe;

    (void)state;
    start(0, 0, 0);
    gw_dns_probe_slow("localhost", BROKER_SLOW_MS);
    link_open("localhost");
    RUN_UNTIL(L.up || gw_fixture_broker_exited(&B));
    assert_false(B.exited);
    gw_dns_probe_get(&probe);
    print_message("# broker link up: %u ticks, longest loop gap %.1f ms, "
                  "names looked up on the loop %u, off it %u\n",
                  L.ticks, (double)L.max_gap_ns / 1e6, probe.names_on_loop,
                  probe.names_off_loop);
    assert_int_equal(probe.names_on_loop, 0);
    assert_int_equal(probe.names_off_loop, 1);
    assert_true(L.max_gap_ns < (uint64_t)BROKER_SLOW_MS * 1000000 / 2);
    link_close();
    stop();
}

/* A broker name that does not resolve: the link keeps retrying without
 * a lookup on the loop, and closes cleanly while a lookup is under way. */
static void test_broker_unresolved(void **state)
{
    struct gw_dns_probe probe;

    (void)state;
    start(0, 0, 0);
    gw_dns_probe_slow("broker.invalid", 300);
    link_open("broker.invalid");
    RUN_UNTIL((gw_dns_probe_get(&probe), probe.returned >= 1));
    /* The negative answer is cached; the next attempt, after the backoff,
     * looks it up again (or answers from the cache), never on the loop. */
    RUN_UNTIL((gw_dns_probe_get(&probe), probe.names_off_loop >= 2));
    assert_false(L.up);
    assert_int_equal(probe.names_on_loop, 0);
    link_close(); /* most likely during the second lookup */
    stop();
}

/*
 * A TLS broker by name behind a slow resolver: the certificate is checked
 * against the name (so the library gets the name, not an address), yet
 * the lookup happens on the threadpool and the loop keeps turning.
 */
static void test_broker_tls_by_name(void **state)
{
    struct gw_dns_probe probe;

    (void)state;
    start(0, 0, 0);
    gw_dns_probe_slow("localhost", BROKER_SLOW_MS);
    link_open_with("localhost", gw_fixture_cert(cert_dir, "ca.crt"));
    RUN_UNTIL(L.up || gw_fixture_broker_exited(&B));
    assert_false(B.exited);
    gw_dns_probe_get(&probe);
    print_message("# TLS broker link up: %u ticks, longest loop gap %.1f ms, "
                  "names looked up on the loop %u, off it %u\n",
                  L.ticks, (double)L.max_gap_ns / 1e6, probe.names_on_loop,
                  probe.names_off_loop);
    assert_int_equal(probe.names_on_loop, 0);
    assert_true(probe.names_off_loop >= 1);
    assert_true(L.max_gap_ns < (uint64_t)BROKER_SLOW_MS * 1000000 / 2);
    link_close();
    stop();
}

/* Closed while the connect is on the threadpool: the close waits for it
 * to come back, then frees everything (ASan sees no leak, the loop ends
 * empty). */
static void test_broker_tls_close_while_connecting(void **state)
{
    struct gw_dns_probe probe;

    (void)state;
    start(0, 0, 0);
    gw_dns_probe_slow("localhost", 300);
    link_open_with("localhost", gw_fixture_cert(cert_dir, "ca.crt"));
    RUN_UNTIL((gw_dns_probe_get(&probe), probe.names_off_loop >= 1));
    link_close();
    gw_dns_probe_get(&probe);
    assert_false(L.up);
    assert_int_equal(probe.names_on_loop, 0);
    stop();
}

/* A certificate the link does not trust (the leaf given as its own CA):
 * the link never comes up, and every retry connects off the loop. */
static void test_broker_tls_untrusted(void **state)
{
    struct gw_dns_probe probe;

    (void)state;
    start(0, 0, 0);
    gw_dns_probe_slow("localhost", 50);
    link_open_with("localhost", gw_fixture_cert(cert_dir, "good.crt"));
    RUN_UNTIL((gw_dns_probe_get(&probe), probe.names_off_loop >= 2));
    assert_false(L.up);
    assert_int_equal(probe.names_on_loop, 0);
    link_close();
    stop();
}

static int broker_start(void **state)
{
    (void)state;
    gw_fixture_certs(cert_dir, sizeof(cert_dir));
    return gw_fixture_broker_start_tls(&B, "gwdns", cert_dir);
}

static int broker_stop(void **state)
{
    (void)state;
    gw_fixture_broker_stop(&B);
    gw_fixture_certs_remove(cert_dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coalescing_and_cache),
        cmocka_unit_test(test_ttl_expiry),
        cmocka_unit_test(test_negative_cache),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_literals),
        cmocka_unit_test(test_bounds_and_arguments),
        cmocka_unit_test(test_close_while_looking_up),
        cmocka_unit_test(test_broker_by_name),
        cmocka_unit_test(test_broker_unresolved),
        cmocka_unit_test(test_broker_tls_by_name),
        cmocka_unit_test(test_broker_tls_close_while_connecting),
        cmocka_unit_test(test_broker_tls_untrusted),
    };

    gw_fixture_filter();
    gw_log_set_level(GW_LOG_ERROR); /* the unresolved broker's warnings */
    return cmocka_run_group_tests(tests, broker_start, broker_stop);
}
