/*
 * Every call of the bindings store (gateway/binding/binding.h) against a
 * real database: "sqlite" (a file in a fresh directory) or "postgresql"
 * (the server with_postgres.sh started, GW_TEST_PG_CONNINFO).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <sqlite3.h>

#include "gateway/binding/binding.h"
#include "gateway/binding/binding_int.h"

static enum gw_binding_store_kind kind;
static char dir[] = "/tmp/gw-binding-XXXXXX";
static char path[256];
static const char *conninfo;
static int files;

static void quiet(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

/* For PostgreSQL, a connection of the test's own, to reset and to break. */
static PGconn *admin(void)
{
    PGconn *c = PQconnectdb(conninfo);

    assert_int_equal(PQstatus(c), CONNECTION_OK);
    PQsetNoticeProcessor(c, quiet, NULL);
    return c;
}

static void admin_exec(const char *sql)
{
    PGconn *c = admin();
    PGresult *r = PQexec(c, sql);

    if (PQresultStatus(r) != PGRES_COMMAND_OK &&
        PQresultStatus(r) != PGRES_TUPLES_OK) {
        fail_msg("%s: %s", sql, PQresultErrorMessage(r));
    }
    PQclear(r);
    PQfinish(c);
}

/* A store on an empty database; again() opens the same one once more. */
static struct gw_binding_store *again(void)
{
    struct gw_binding_store_options o = {
        .kind = kind, .path = path, .conninfo = conninfo};
    struct gw_binding_store *s = NULL;

    assert_int_equal(gw_binding_store_open(&o, &s), 0);
    assert_non_null(s);
    return s;
}

static struct gw_binding_store *fresh(void)
{
    if (kind == GW_BINDING_STORE_SQLITE) {
        snprintf(path, sizeof(path), "%s/b%d.db", dir, files++);
    } else {
        admin_exec("DROP TABLE IF EXISTS bindings, pending, revoked,"
                   " hybridgw_bindings_schema");
    }
    return again();
}

static struct gw_binding identity(int n)
{
    struct gw_binding b;

    memset(&b, 0, sizeof(b));
    snprintf(b.mac, sizeof(b.mac), "aa:bb:cc:00:%02x:%02x", (n >> 8) & 255,
             n & 255);
    snprintf(b.uuid, sizeof(b.uuid), "uuid-%d", n);
    snprintf(b.group, sizeof(b.group), "GID_test");
    snprintf(b.client_id, sizeof(b.client_id),
             "GID_test@@@aa_bb_cc_00_%02x_%02x@@@uuid-%d", (n >> 8) & 255,
             n & 255, n);
    snprintf(b.board, sizeof(b.board), "bread-compact-wifi");
    b.by = GW_BINDING_BY_OPERATOR;
    b.bound_ms = 1700000000000 + n;
    return b;
}

static struct gw_binding_pending asking(int n, const char *peer)
{
    struct gw_binding b = identity(n);
    struct gw_binding_pending p;

    memset(&p, 0, sizeof(p));
    memcpy(p.mac, b.mac, sizeof(p.mac));
    memcpy(p.uuid, b.uuid, sizeof(p.uuid));
    memcpy(p.board, b.board, sizeof(p.board));
    snprintf(p.serial_number, sizeof(p.serial_number), "SN-%d", n);
    snprintf(p.peer, sizeof(p.peer), "%s", peer);
    return p;
}

static bool digits(const char *s, size_t n)
{
    return strlen(s) == n && strspn(s, "0123456789") == n;
}

static void test_bind_find(void **state)
{
    struct gw_binding_store *s = fresh();
    struct gw_binding a = identity(1), b = identity(2), got;
    int count = -1;
    (void)state;

    snprintf(a.serial_number, sizeof(a.serial_number), "SN-1");
    a.by = GW_BINDING_BY_HMAC;
    a.issued = true; /* ignored: a new binding is not issued */
    assert_int_equal(gw_binding_bind(s, &a), 0);
    assert_true(a.id > 0);
    assert_false(a.issued);
    assert_int_equal(gw_binding_find(s, a.mac, a.uuid, &got), 0);
    assert_int_equal(got.id, a.id);
    assert_string_equal(got.client_id, a.client_id);
    assert_string_equal(got.mac, a.mac);
    assert_string_equal(got.uuid, a.uuid);
    assert_string_equal(got.group, "GID_test");
    assert_string_equal(got.board, "bread-compact-wifi");
    assert_string_equal(got.serial_number, "SN-1");
    assert_int_equal(got.by, GW_BINDING_BY_HMAC);
    assert_int_equal(got.bound_ms, a.bound_ms);
    assert_false(got.issued);
    assert_false(got.reissue);
    assert_int_equal(gw_binding_find_client(s, a.client_id, &got), 0);
    assert_int_equal(got.id, a.id);
    assert_int_equal(gw_binding_find(s, b.mac, b.uuid, &got), GW_ENOENT);
    assert_int_equal(gw_binding_find_client(s, b.client_id, &got), GW_ENOENT);
    assert_int_equal(gw_binding_find(s, a.mac, "other", &got), GW_ENOENT);

    /* One MAC under two uuids: ambiguous, and counted so. */
    assert_int_equal(gw_binding_count_mac(s, a.mac, &count), 0);
    assert_int_equal(count, 1);
    memcpy(b.mac, a.mac, sizeof(b.mac));
    assert_int_equal(gw_binding_bind(s, &b), 0);
    assert_true(b.id > a.id);
    assert_int_equal(gw_binding_count_mac(s, a.mac, &count), 0);
    assert_int_equal(count, 2);
    assert_int_equal(gw_binding_count_mac(s, "00:00:00:00:00:00", &count), 0);
    assert_int_equal(count, 0);
    gw_binding_store_close(s);
}

static void test_bind_exists(void **state)
{
    struct gw_binding_store *s = fresh();
    struct gw_binding a = identity(1), twin, b = identity(2), got;
    struct gw_binding_pending want = asking(2, "10.0.0.2"), p, q;
    (void)state;

    assert_int_equal(gw_binding_bind(s, &a), 0);
    /* The same identity under another client id. */
    twin = a;
    snprintf(twin.client_id, sizeof(twin.client_id), "GID_other@@@x@@@y");
    assert_int_equal(gw_binding_bind(s, &twin), GW_EEXIST);
    /* Another identity under the same client id: refused, and its pending
     * activation stays (the transaction is undone as a whole). */
    assert_int_equal(gw_binding_pending_get(s, &want, 1000, 60000, &p), 0);
    memcpy(b.client_id, a.client_id, sizeof(b.client_id));
    assert_int_equal(gw_binding_bind(s, &b), GW_EEXIST);
    assert_int_equal(gw_binding_pending_find(s, b.mac, b.uuid, 2000, &q), 0);
    assert_string_equal(q.code, p.code);
    assert_int_equal(gw_binding_find(s, b.mac, b.uuid, &got), GW_ENOENT);
    assert_int_equal(gw_binding_find_client(s, a.client_id, &got), 0);
    assert_int_equal(got.id, a.id);
    /* Bound properly, the pending activation goes. */
    b = identity(2);
    assert_int_equal(gw_binding_bind(s, &b), 0);
    assert_int_equal(gw_binding_pending_find(s, b.mac, b.uuid, 2000, &q),
                     GW_ENOENT);
    assert_int_equal(gw_binding_pending_by_code(s, p.code, 2000, &q),
                     GW_ENOENT);
    gw_binding_store_close(s);
}

static void test_pending(void **state)
{
    struct gw_binding_store *s = fresh();
    struct gw_binding_pending want = asking(7, "192.0.2.7"), p, q, other;
    struct gw_binding_pending later = asking(8, "192.0.2.8");
    (void)state;

    assert_int_equal(gw_binding_pending_find(s, want.mac, want.uuid, 0, &q),
                     GW_ENOENT);
    assert_int_equal(gw_binding_pending_get(s, &want, 10000, 600000, &p), 0);
    assert_true(digits(p.code, GW_BINDING_CODE_LEN));
    assert_int_equal(strlen(p.challenge), GW_BINDING_CHALLENGE_LEN);
    assert_int_equal(strspn(p.challenge, "0123456789abcdef"),
                     GW_BINDING_CHALLENGE_LEN);
    assert_string_equal(p.mac, want.mac);
    assert_string_equal(p.uuid, want.uuid);
    assert_string_equal(p.board, want.board);
    assert_string_equal(p.serial_number, "SN-7");
    assert_string_equal(p.peer, "192.0.2.7");
    assert_int_equal(p.created_ms, 10000);
    assert_int_equal(p.expires_ms, 610000);

    /* Asked again while unexpired: the same row, as stored. */
    snprintf(want.peer, sizeof(want.peer), "192.0.2.99");
    assert_int_equal(gw_binding_pending_get(s, &want, 20000, 600000, &q), 0);
    assert_string_equal(q.code, p.code);
    assert_string_equal(q.challenge, p.challenge);
    assert_string_equal(q.peer, "192.0.2.7");
    assert_int_equal(q.expires_ms, 610000);

    assert_int_equal(gw_binding_pending_by_code(s, p.code, 609999, &q), 0);
    assert_string_equal(q.uuid, want.uuid);
    assert_int_equal(gw_binding_pending_find(s, p.mac, p.uuid, 609999, &q), 0);
    assert_string_equal(q.code, p.code);
    /* Expired at expires_ms. */
    assert_int_equal(gw_binding_pending_by_code(s, p.code, 610000, &q),
                     GW_ENOENT);
    assert_int_equal(gw_binding_pending_find(s, p.mac, p.uuid, 610000, &q),
                     GW_ENOENT);
    assert_int_equal(gw_binding_pending_by_code(s, "000000x", 0, &q),
                     GW_EINVAL);

    /* Another identity's activation deletes the expired row on the way:
     * listed at an earlier time it is gone. */
    assert_int_equal(gw_binding_pending_get(s, &later, 700000, 1000, &other),
                     0);
    assert_string_not_equal(other.code, "");
    assert_int_equal(gw_binding_pending_find(s, p.mac, p.uuid, 0, &q),
                     GW_ENOENT);
    /* And the first one gets a fresh activation. */
    assert_int_equal(gw_binding_pending_get(s, &want, 700000, 600000, &q), 0);
    assert_int_equal(q.created_ms, 700000);
    assert_string_not_equal(q.challenge, p.challenge);
    gw_binding_store_close(s);
}

enum { CODES = 1500 };
struct codes {
    char code[CODES][GW_BINDING_CODE_LEN + 1];
    int n;
};

static void collect_code(const struct gw_binding_pending *p, void *arg)
{
    struct codes *c = arg;

    if (c->n < CODES) {
        memcpy(c->code[c->n++], p->code, sizeof(c->code[0]));
    }
}

static int by_text(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* Codes are unique among pending activations, and uniform. */
static void test_codes(void **state)
{
    enum { N = CODES };
    static struct codes codes;
    struct gw_binding_store *s = fresh();
    struct gw_binding_pending want, p;
    long first[10] = {0}, last[10] = {0};
    char code[GW_BINDING_CODE_LEN + 1];
    (void)state;

    for (int i = 0; i < N; i++) {
        want = asking(i, "198.51.100.1");
        assert_int_equal(gw_binding_pending_get(s, &want, 1000, 60000, &p), 0);
    }
    assert_int_equal(
        gw_binding_pending_list(s, 1000, N + 10, collect_code, &codes), N);
    qsort(codes.code, N, sizeof(codes.code[0]), by_text);
    for (int i = 1; i < N; i++) {
        assert_string_not_equal(codes.code[i - 1], codes.code[i]);
    }
    gw_binding_store_close(s);

    /* 200000 draws: each first and last digit within 5 % of a tenth (the
     * spread of a fair draw is under 1 %). */
    for (int i = 0; i < 200000; i++) {
        assert_int_equal(gw__binding_code(code), 0);
        assert_true(digits(code, GW_BINDING_CODE_LEN));
        first[code[0] - '0']++;
        last[code[5] - '0']++;
    }
    for (int d = 0; d < 10; d++) {
        assert_in_range(first[d], 19000, 21000);
        assert_in_range(last[d], 19000, 21000);
    }
}

static void test_claim_issue(void **state)
{
    struct gw_binding_store *s = fresh();
    struct gw_binding a = identity(1), got;
    bool granted = false;
    (void)state;

    assert_int_equal(gw_binding_bind(s, &a), 0);
    assert_int_equal(gw_binding_claim_issue(s, a.id, &granted), 0);
    assert_true(granted);
    assert_int_equal(gw_binding_find(s, a.mac, a.uuid, &got), 0);
    assert_true(got.issued);
    assert_false(got.reissue);
    assert_int_equal(gw_binding_claim_issue(s, a.id, &granted), 0);
    assert_false(granted);
    assert_int_equal(gw_binding_allow_reissue(s, a.id), 0);
    assert_int_equal(gw_binding_find(s, a.mac, a.uuid, &got), 0);
    assert_true(got.reissue);
    assert_int_equal(gw_binding_claim_issue(s, a.id, &granted), 0);
    assert_true(granted);
    assert_int_equal(gw_binding_find(s, a.mac, a.uuid, &got), 0);
    assert_true(got.issued);
    assert_false(got.reissue);
    assert_int_equal(gw_binding_claim_issue(s, a.id, &granted), 0);
    assert_false(granted);
    assert_int_equal(gw_binding_claim_issue(s, a.id + 100, &granted),
                     GW_ENOENT);
    assert_false(granted);
    assert_int_equal(gw_binding_allow_reissue(s, a.id + 100), GW_ENOENT);
    gw_binding_store_close(s);
}

/* Two handles (two connections) claim the same ids at the same moment. */
enum { RACE_IDS = 40 };
struct racer {
    struct gw_binding_store *s;
    pthread_barrier_t *start;
    int64_t ids[RACE_IDS];
    int granted, errors;
};

static void *race(void *arg)
{
    struct racer *r = arg;
    bool granted;

    for (int i = 0; i < RACE_IDS; i++) {
        pthread_barrier_wait(r->start);
        if (gw_binding_claim_issue(r->s, r->ids[i], &granted) != 0) {
            r->errors++;
        } else if (granted) {
            r->granted++;
        }
    }
    return NULL;
}

static void test_claim_race(void **state)
{
    struct gw_binding_store *s = fresh(), *t = again();
    pthread_barrier_t start;
    struct racer a = {.s = s, .start = &start}, b = {.s = t, .start = &start};
    pthread_t ta, tb;
    (void)state;

    for (int i = 0; i < RACE_IDS; i++) {
        struct gw_binding x = identity(i);
        assert_int_equal(gw_binding_bind(i % 2 ? s : t, &x), 0);
        a.ids[i] = b.ids[i] = x.id;
    }
    pthread_barrier_init(&start, NULL, 2);
    assert_int_equal(pthread_create(&ta, NULL, race, &a), 0);
    assert_int_equal(pthread_create(&tb, NULL, race, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&start);
    assert_int_equal(a.errors + b.errors, 0);
    assert_int_equal(a.granted + b.granted, RACE_IDS);
    print_message("# claims granted: %d on one handle, %d on the other\n",
                  a.granted, b.granted);

    /* A reissue set through one handle is claimed once through either. */
    assert_int_equal(gw_binding_allow_reissue(t, a.ids[3]), 0);
    a.granted = b.granted = 0;
    for (int i = 0; i < RACE_IDS; i++) {
        a.ids[i] = b.ids[i] = a.ids[3];
    }
    pthread_barrier_init(&start, NULL, 2);
    assert_int_equal(pthread_create(&ta, NULL, race, &a), 0);
    assert_int_equal(pthread_create(&tb, NULL, race, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&start);
    assert_int_equal(a.errors + b.errors, 0);
    assert_int_equal(a.granted + b.granted, 1);
    gw_binding_store_close(t);
    gw_binding_store_close(s);
}

struct revocations {
    struct gw_binding_revoked r[8];
    int n;
};

static void collect_revoked(const struct gw_binding_revoked *r, void *arg)
{
    struct revocations *rs = arg;

    if (rs->n < 8) {
        rs->r[rs->n++] = *r;
    }
}

static void test_unbind(void **state)
{
    struct gw_binding_store *s = fresh();
    struct gw_binding a = identity(1), b = identity(2), again_a, got;
    struct gw_binding_revoked r;
    struct revocations rs = {0};
    (void)state;

    assert_int_equal(gw_binding_bind(s, &a), 0);
    assert_int_equal(gw_binding_bind(s, &b), 0);
    assert_int_equal(gw_binding_revoked_list(s, collect_revoked, &rs), 0);
    assert_int_equal(gw_binding_unbind(s, a.client_id, &r), 0);
    assert_string_equal(r.client_id, a.client_id);
    assert_int_equal(r.below, a.id + 1);
    assert_int_equal(gw_binding_find_client(s, a.client_id, &got), GW_ENOENT);
    assert_int_equal(gw_binding_find(s, a.mac, a.uuid, &got), GW_ENOENT);
    assert_int_equal(gw_binding_unbind(s, a.client_id, &r), GW_ENOENT);
    assert_int_equal(gw_binding_unbind(s, "GID_x@@@none@@@none", &r),
                     GW_ENOENT);

    /* Bound again: a larger id, which the revocation does not cover. */
    again_a = identity(1);
    assert_int_equal(gw_binding_bind(s, &again_a), 0);
    assert_true(again_a.id > b.id);
    assert_true(again_a.id >= r.below);
    /* Undone again: the revocation is raised, still one row. */
    assert_int_equal(gw_binding_unbind(s, a.client_id, &r), 0);
    assert_int_equal(r.below, again_a.id + 1);
    assert_int_equal(gw_binding_unbind(s, b.client_id, &r), 0);
    assert_int_equal(gw_binding_revoked_list(s, collect_revoked, &rs), 2);
    for (int i = 0; i < rs.n; i++) {
        if (strcmp(rs.r[i].client_id, a.client_id) == 0) {
            assert_int_equal(rs.r[i].below, again_a.id + 1);
        } else {
            assert_string_equal(rs.r[i].client_id, b.client_id);
            assert_int_equal(rs.r[i].below, b.id + 1);
        }
    }
    gw_binding_store_close(s);
}

/* Ids only grow: after a delete of the last one and across a reopen. */
static void test_ids_never_reused(void **state)
{
    struct gw_binding_store *s = fresh();
    struct gw_binding a = identity(1), b = identity(2), c = identity(3);
    struct gw_binding d = identity(4);
    struct gw_binding_revoked r;
    (void)state;

    assert_int_equal(gw_binding_bind(s, &a), 0);
    assert_int_equal(gw_binding_bind(s, &b), 0);
    assert_int_equal(gw_binding_unbind(s, b.client_id, &r), 0);
    assert_int_equal(gw_binding_bind(s, &c), 0);
    assert_true(c.id > b.id);
    assert_int_equal(gw_binding_unbind(s, c.client_id, &r), 0);
    gw_binding_store_close(s);
    s = again();
    assert_int_equal(gw_binding_bind(s, &d), 0);
    assert_true(d.id > c.id);
    gw_binding_store_close(s);
}

struct seen {
    int64_t ids[16];
    char macs[16][18];
    int n;
};

static void collect_binding(const struct gw_binding *b, void *arg)
{
    struct seen *w = arg;

    if (w->n < 16) {
        w->ids[w->n++] = b->id;
    }
}

static void collect_pending(const struct gw_binding_pending *p, void *arg)
{
    struct seen *w = arg;

    if (w->n < 16) {
        memcpy(w->macs[w->n++], p->mac, 18);
    }
}

static void test_lists(void **state)
{
    struct gw_binding_store *s = fresh();
    struct gw_binding b[5];
    struct gw_binding_pending want, p;
    struct seen w = {0};
    (void)state;

    for (int i = 0; i < 5; i++) {
        b[i] = identity(i);
        assert_int_equal(gw_binding_bind(s, &b[i]), 0);
    }
    assert_int_equal(gw_binding_list(s, 0, 2, collect_binding, &w), 2);
    assert_int_equal(w.ids[0], b[0].id);
    assert_int_equal(w.ids[1], b[1].id);
    assert_int_equal(gw_binding_list(s, w.ids[1], 10, collect_binding, &w), 3);
    assert_int_equal(w.ids[2], b[2].id);
    assert_int_equal(w.ids[4], b[4].id);
    assert_int_equal(gw_binding_list(s, b[4].id, 10, collect_binding, &w), 0);
    assert_int_equal(gw_binding_list(s, 0, 0, collect_binding, &w), 0);
    assert_int_equal(w.n, 5);

    /* Pending ones by creation; the expired left out. */
    for (int i = 0; i < 4; i++) {
        want = asking(100 + i, "203.0.113.1");
        assert_int_equal(gw_binding_pending_get(s, &want, 5000 - i * 1000,
                                                i == 1 ? 500 : 60000, &p),
                         0);
    }
    w.n = 0;
    assert_int_equal(gw_binding_pending_list(s, 4500, 10, collect_pending, &w),
                     3);
    assert_string_equal(w.macs[0], asking(103, "").mac);
    assert_string_equal(w.macs[1], asking(102, "").mac);
    assert_string_equal(w.macs[2], asking(100, "").mac);
    w.n = 0;
    assert_int_equal(gw_binding_pending_list(s, 4500, 1, collect_pending, &w),
                     1);
    gw_binding_store_close(s);
}

static void test_invalid(void **state)
{
    struct gw_binding_store *s = fresh();
    struct gw_binding a = identity(1), got;
    struct gw_binding_pending want = asking(1, "x"), p;
    struct gw_binding_revoked r;
    char long_mac[40];
    int count;
    (void)state;

    memset(long_mac, 'a', sizeof(long_mac) - 1);
    long_mac[sizeof(long_mac) - 1] = '\0';
    assert_int_equal(gw_binding_find(s, NULL, "u", &got), GW_EINVAL);
    assert_int_equal(gw_binding_find(s, long_mac, "u", &got), GW_EINVAL);
    assert_int_equal(gw_binding_find(s, a.mac, a.uuid, NULL), GW_EINVAL);
    assert_int_equal(gw_binding_find_client(NULL, a.client_id, &got),
                     GW_EINVAL);
    assert_int_equal(gw_binding_count_mac(s, long_mac, &count), GW_EINVAL);
    assert_int_equal(gw_binding_claim_issue(s, 1, NULL), GW_EINVAL);
    assert_int_equal(gw_binding_unbind(s, "", &r), GW_EINVAL);
    assert_int_equal(gw_binding_list(s, 0, -1, collect_binding, NULL),
                     GW_EINVAL);
    assert_int_equal(gw_binding_revoked_list(s, NULL, NULL), GW_EINVAL);
    assert_int_equal(gw_binding_pending_get(s, &want, 0, 0, &p), GW_EINVAL);
    memset(want.peer, 'x', sizeof(want.peer)); /* no NUL in it */
    assert_int_equal(gw_binding_pending_get(s, &want, 0, 1000, &p), GW_EINVAL);
    a.by = (enum gw_binding_by)42;
    assert_int_equal(gw_binding_bind(s, &a), GW_EINVAL);
    a = identity(1);
    memset(a.client_id, 'c', sizeof(a.client_id));
    assert_int_equal(gw_binding_bind(s, &a), GW_EINVAL);
    gw_binding_store_close(s);
    assert_string_equal(gw_binding_by_name(GW_BINDING_BY_LAB), "lab");
    assert_string_equal(gw_binding_store_kind_name(kind),
                        kind == GW_BINDING_STORE_SQLITE ? "sqlite"
                                                        : "postgresql");
}

/* What is not a store of ours is refused at open. */
static void test_open_refused(void **state)
{
    struct gw_binding_store_options o = {.kind = kind};
    struct gw_binding_store *s = NULL;
    char other[300];
    FILE *f;
    (void)state;

    if (kind == GW_BINDING_STORE_SQLITE) {
        snprintf(other, sizeof(other), "%s/not-a-db.txt", dir);
        f = fopen(other, "w");
        assert_non_null(f);
        fputs("hello, this is not SQLite at all, just some text\n", f);
        fclose(f);
        o.path = other;
        assert_int_equal(gw_binding_store_open(&o, &s), GW_ECONFIG);
        /* A SQLite database of another program's. */
        snprintf(other, sizeof(other), "%s/other.db", dir);
        {
            sqlite3 *db = NULL;
            assert_int_equal(sqlite3_open(other, &db), SQLITE_OK);
            assert_int_equal(
                sqlite3_exec(db, "CREATE TABLE t (x)", NULL, NULL, NULL),
                SQLITE_OK);
            sqlite3_close(db);
        }
        assert_int_equal(gw_binding_store_open(&o, &s), GW_ECONFIG);
        snprintf(other, sizeof(other), "%s/nodir/sub/b.db", dir);
        assert_int_equal(gw_binding_store_open(&o, &s), GW_ECONFIG);
        o.path = "";
        assert_int_equal(gw_binding_store_open(&o, &s), GW_ECONFIG);
    } else {
        snprintf(other, sizeof(other), "%s user=nobody_here", conninfo);
        o.conninfo = other;
        assert_int_equal(gw_binding_store_open(&o, &s), GW_ECONFIG);
        /* A "bindings" table of someone else's. */
        admin_exec("DROP TABLE IF EXISTS bindings, pending, revoked,"
                   " hybridgw_bindings_schema;"
                   " CREATE TABLE bindings (id int, name text)");
        o.conninfo = conninfo;
        assert_int_equal(gw_binding_store_open(&o, &s), GW_ECONFIG);
    }
    assert_null(s);
}

/* PostgreSQL: a connection the server ends fails one call; the next one
 * connects again. */
static void test_reconnect(void **state)
{
    struct gw_binding_store *s = fresh();
    struct gw_binding a = identity(1), got;
    PGconn *c;
    PGresult *r;
    int left = -1;
    (void)state;

    assert_int_equal(gw_binding_bind(s, &a), 0);
    c = admin();
    r = PQexec(c, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                  " WHERE application_name = 'hybridgw'");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    assert_int_equal(PQntuples(r), 1);
    PQclear(r);
    /* Until the server says that backend is gone (bounded). */
    for (int i = 0; i < 500 && left != 0; i++) {
        r = PQexec(c, "SELECT count(*) FROM pg_stat_activity"
                      " WHERE application_name = 'hybridgw'");
        left = atoi(PQgetvalue(r, 0, 0));
        PQclear(r);
        if (left != 0) {
            usleep(10000);
        }
    }
    assert_int_equal(left, 0);
    PQfinish(c);
    assert_int_equal(gw_binding_find(s, a.mac, a.uuid, &got), GW_EIO);
    assert_int_equal(gw_binding_find(s, a.mac, a.uuid, &got), 0);
    assert_int_equal(got.id, a.id);
    gw_binding_store_close(s);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bind_find),
        cmocka_unit_test(test_bind_exists),
        cmocka_unit_test(test_pending),
        cmocka_unit_test(test_codes),
        cmocka_unit_test(test_claim_issue),
        cmocka_unit_test(test_claim_race),
        cmocka_unit_test(test_unbind),
        cmocka_unit_test(test_ids_never_reused),
        cmocka_unit_test(test_lists),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_open_refused),
        cmocka_unit_test(test_reconnect),
    };
    size_t n = sizeof(tests) / sizeof(tests[0]);
    int rc;

    if (argc == 2 && strcmp(argv[1], "sqlite") == 0) {
        kind = GW_BINDING_STORE_SQLITE;
        n--; /* no connection to break */
        if (mkdtemp(dir) == NULL) {
            perror("mkdtemp");
            return 1;
        }
    } else if (argc == 2 && strcmp(argv[1], "postgresql") == 0) {
        kind = GW_BINDING_STORE_POSTGRESQL;
        conninfo = getenv("GW_TEST_PG_CONNINFO");
        if (conninfo == NULL) {
            fprintf(stderr, "GW_TEST_PG_CONNINFO is not set: run me under "
                            "with_postgres.sh\n");
            return 1;
        }
    } else {
        fprintf(stderr, "usage: %s sqlite|postgresql\n", argv[0]);
        return 2;
    }
    rc = _cmocka_run_group_tests(argv[1], tests, n, NULL, NULL);
    if (kind == GW_BINDING_STORE_SQLITE) {
        char cmd[64];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0) {
            fprintf(stderr, "could not remove %s\n", dir);
        }
    }
    return rc;
}
