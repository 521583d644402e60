/* Instance records (accepted, refused, round trip) and the rendezvous
 * hash (balance, and minimal movement when an instance comes or goes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "codec/instance_record.h"

static void test_accepted(void **state)
{
    struct gw_instance_record r;
    const char *full = "{\"name\":\"gw-a\",\"boot\":\"0123abcd\",\"udp\":"
                       "\"203.0.113.7:8884\",\"started_ms\":1764131000000,"
                       "\"state\":\"draining\",\"sessions\":12,\"devices\":40,"
                       "\"extra\":[1]}";
    const char *gone =
        "{\"name\":\"gw.b_2\",\"boot\":\"x\",\"state\":\"gone\"}";

    (void)state;
    assert_int_equal(gw_instance_record_parse(full, strlen(full), &r), 0);
    assert_string_equal(r.name, "gw-a");
    assert_string_equal(r.boot, "0123abcd");
    assert_string_equal(r.udp, "203.0.113.7:8884");
    assert_true(r.started_ms == 1764131000000ull);
    assert_int_equal(r.state, GW_INSTANCE_DRAINING);
    assert_int_equal(r.sessions, 12);
    assert_int_equal(r.devices, 40);
    assert_int_equal(gw_instance_record_parse(gone, strlen(gone), &r), 0);
    assert_int_equal(r.state, GW_INSTANCE_GONE);
    assert_string_equal(r.name, "gw.b_2");
    assert_string_equal(r.udp, "");
}

static void test_refused(void **state)
{
    static const struct {
        const char *json;
        int err;
    } cases[] = {
        {"", GW_EMALFORMED},
        {"[]", GW_EMALFORMED},
        {"{\"name\":\"a\",\"boot\":\"b\"}", GW_EPROTO}, /* no state */
        {"{\"name\":\"a\",\"boot\":\"b\",\"state\":\"up\"}", GW_EPROTO},
        {"{\"boot\":\"b\",\"state\":\"gone\"}", GW_EPROTO},
        {"{\"name\":\"a/b\",\"boot\":\"b\",\"state\":\"gone\"}", GW_EPROTO},
        {"{\"name\":\"a+\",\"boot\":\"b\",\"state\":\"gone\"}", GW_EPROTO},
        {"{\"name\":\"\",\"boot\":\"b\",\"state\":\"gone\"}", GW_EPROTO},
        {"{\"name\":\"a\",\"boot\":7,\"state\":\"gone\"}", GW_EPROTO},
        /* running without where or since when */
        {"{\"name\":\"a\",\"boot\":\"b\",\"state\":\"running\","
         "\"started_ms\":1}",
         GW_EPROTO},
        {"{\"name\":\"a\",\"boot\":\"b\",\"state\":\"running\","
         "\"udp\":\"h:1\"}",
         GW_EPROTO},
        {"{\"name\":\"a\",\"boot\":\"b\",\"state\":\"running\",\"udp\":"
         "\"h\\\"x:1\",\"started_ms\":1}",
         GW_EPROTO},
        {"{\"name\":\"a\",\"boot\":\"b\",\"state\":\"running\",\"udp\":"
         "\"h:1\",\"started_ms\":-1}",
         GW_EPROTO},
        {"{\"name\":\"a\",\"boot\":\"b\",\"state\":\"running\",\"udp\":"
         "\"h:1\",\"started_ms\":1.5}",
         GW_EPROTO},
        {"{\"name\":\"a\",\"boot\":\"b\",\"state\":\"running\",\"udp\":"
         "\"h:1\",\"started_ms\":1,\"sessions\":4294967296}",
         GW_EPROTO},
        {"{\"name\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaa\",\"boot\":\"b\",\"state\":\"gone\"}",
         GW_EPROTO}, /* 65 bytes */
    };
    struct gw_instance_record r;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int err =
            gw_instance_record_parse(cases[i].json, strlen(cases[i].json), &r);
        if (err != cases[i].err) {
            fail_msg("case %zu (%s): %d, expected %d", i, cases[i].json, err,
                     cases[i].err);
        }
        assert_string_equal(r.name, "");
    }
}

static void test_round_trip(void **state)
{
    struct gw_instance_record r, back;
    char buf[GW_INSTANCE_RECORD_MAX_LEN];
    char small[20];
    int n;

    (void)state;
    memset(&r, 0, sizeof(r)); /* padding too: compared whole below */
    strcpy(r.name, "gw-c");
    strcpy(r.boot, "feed01");
    strcpy(r.udp, "127.0.0.1:9000");
    r.started_ms = 42;
    r.state = GW_INSTANCE_RUNNING;
    r.sessions = 3;
    r.devices = 7;
    n = gw_instance_record_format(&r, buf, sizeof(buf));
    assert_true(n > 0);
    assert_int_equal(gw_instance_record_parse(buf, (size_t)n, &back), 0);
    assert_memory_equal(&r, &back, sizeof(r));
    r.state = GW_INSTANCE_GONE;
    n = gw_instance_record_format(&r, buf, sizeof(buf));
    assert_string_equal(
        buf, "{\"name\":\"gw-c\",\"boot\":\"feed01\",\"state\":\"gone\"}");
    assert_int_equal(gw_instance_record_format(&r, small, sizeof(small)),
                     GW_ENOSPC);
    strcpy(r.name, "bad name");
    assert_int_equal(gw_instance_record_format(&r, buf, sizeof(buf)),
                     GW_EINVAL);
}

#define IDS 30000

static void id_of(unsigned i, char out[32])
{
    /* Client ids as devices have them: a MAC and a UUID-ish tail. */
    snprintf(out, 32, "GID_t@@@%02x_%02x_%02x@@@%04x", (i >> 16) & 0xff,
             (i >> 8) & 0xff, i & 0xff, (i * 2654435761u) >> 16);
}

static void test_balance(void **state)
{
    const char *names[] = {"gw-a", "gw-b", "gw-c"};
    unsigned count[3] = {0};
    char id[32];

    (void)state;
    for (unsigned i = 0; i < IDS; i++) {
        id_of(i, id);
        int k = gw_rendezvous_pick(names, 3, id);
        assert_true(k >= 0 && k < 3);
        count[k]++;
    }
    for (int k = 0; k < 3; k++) {
        /* within 3% of a third: 10000 +- 300 */
        if (count[k] < IDS / 3 - 300 || count[k] > IDS / 3 + 300) {
            fail_msg("%s owns %u of %u", names[k], count[k], IDS);
        }
    }
    assert_int_equal(gw_rendezvous_pick(names, 0, "x"), -1);
}

static void test_minimal_movement(void **state)
{
    const char *three[] = {"gw-a", "gw-b", "gw-c"};
    const char *two[] = {"gw-a", "gw-c"}; /* gw-b gone */
    const char *four[] = {"gw-a", "gw-b", "gw-c", "gw-d"};
    unsigned moved_in = 0;
    char id[32];

    (void)state;
    for (unsigned i = 0; i < IDS; i++) {
        id_of(i, id);
        const char *before = three[gw_rendezvous_pick(three, 3, id)];
        const char *after = two[gw_rendezvous_pick(two, 2, id)];
        const char *joined = four[gw_rendezvous_pick(four, 4, id)];
        /* Only gw-b's devices move when it goes. */
        if (strcmp(before, "gw-b") != 0) {
            assert_string_equal(before, after);
        }
        /* A joining instance takes devices only for itself. */
        if (strcmp(joined, "gw-d") == 0) {
            moved_in++;
        } else {
            assert_string_equal(before, joined);
        }
        /* Every instance computes the same answer in any order. */
        const char *rev[] = {"gw-c", "gw-b", "gw-a"};
        assert_string_equal(before, rev[gw_rendezvous_pick(rev, 3, id)]);
    }
    assert_true(moved_in > IDS / 4 - 300 && moved_in < IDS / 4 + 300);
}

static void test_fixed_values(void **state)
{
    (void)state;
    /* The hash is part of the protocol: instances of different builds
     * must agree. These values must never change. */
    assert_true(gw_rendezvous_score("gw-a", "dev") !=
                gw_rendezvous_score("gw-b", "dev"));
    assert_true(gw_rendezvous_score("ab", "c") !=
                gw_rendezvous_score("a", "bc"));
    printf("score(gw-a,dev)=%016llx\n",
           (unsigned long long)gw_rendezvous_score("gw-a", "dev"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_balance),
        cmocka_unit_test(test_minimal_movement),
        cmocka_unit_test(test_fixed_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
