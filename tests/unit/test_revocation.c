/*
 * The revocation control message (codec/revocation.c): packing any number
 * of entries into messages within a size, each parsing back to exactly
 * its entries, and the parser's refusals.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec/revocation.h"

#define DEV "GID_test@@@a0_85_e3_f4_49_34@@@0f8e-uuid"

/* What a parse or a pack saw. */
struct seen {
    char ids[64][160];
    uint64_t below[64];
    size_t n;
    char msgs[64][4096];
    size_t lens[64];
    size_t n_msgs;
    int fail_at; /* the callback returns GW_ENOMEM at this call (1-based) */
};

static int on_entry(void *arg, const char *id, uint64_t below)
{
    struct seen *s = arg;

    if ((int)s->n + 1 == s->fail_at) {
        return GW_ENOMEM;
    }
    assert_true(s->n < 64);
    snprintf(s->ids[s->n], sizeof(s->ids[0]), "%s", id);
    s->below[s->n++] = below;
    return 0;
}

static int on_msg(void *arg, const char *msg, size_t len)
{
    struct seen *s = arg;

    if ((int)s->n_msgs + 1 == s->fail_at) {
        return GW_ENOMEM;
    }
    assert_true(s->n_msgs < 64 && len < sizeof(s->msgs[0]));
    memcpy(s->msgs[s->n_msgs], msg, len);
    s->msgs[s->n_msgs][len] = '\0';
    s->lens[s->n_msgs++] = len;
    return 0;
}

static int parse(const char *text, struct seen *s)
{
    memset(s, 0, sizeof(*s));
    return gw_revocation_parse(text, strlen(text), on_entry, s);
}

static void test_parse(void **state)
{
    struct seen *s = calloc(1, sizeof(*s));
    (void)state;

    assert_int_equal(parse("{\"revoke\":[[\"" DEV "\",6]]}", s), 1);
    assert_string_equal(s->ids[0], DEV);
    assert_int_equal(s->below[0], 6);
    assert_int_equal(parse(" {\"v\":2,\"revoke\":[[\"" DEV
                           "\",9007199254740992],"
                           "[\"g\\\"x@@@a0_85_e3_f4_49_35\",1.0]]} \n",
                           s),
                     2);
    assert_int_equal(s->below[0], 9007199254740992ULL);
    assert_string_equal(s->ids[1], "g\"x@@@a0_85_e3_f4_49_35");
    assert_int_equal(s->below[1], 1);
    assert_int_equal(parse("{\"revoke\":[]}", s), 0);
    assert_int_equal(s->n, 0);
    free(s);
}

static void test_parse_refusals(void **state)
{
    struct seen *s = calloc(1, sizeof(*s));
    const struct {
        const char *text;
        int rc;
    } cases[] = {
        {"", GW_EMALFORMED},
        {"[]", GW_EMALFORMED},
        {"{\"revoke\":[]} x", GW_EMALFORMED},
        {"{\"revoke\":[[\"" DEV "\",6]]", GW_EMALFORMED},
        {"{}", GW_EPROTO},
        {"{\"revoke\":{}}", GW_EPROTO},
        {"{\"revoke\":[],\"revoke\":[]}", GW_EPROTO},
        {"{\"revoke\":[\"" DEV "\"]}", GW_EPROTO},
        {"{\"revoke\":[[\"" DEV "\"]]}", GW_EPROTO},
        {"{\"revoke\":[[\"" DEV "\",6,7]]}", GW_EPROTO},
        {"{\"revoke\":[[6,\"" DEV "\"]]}", GW_EPROTO},
        {"{\"revoke\":[[\"" DEV "\",0]]}", GW_EPROTO},
        {"{\"revoke\":[[\"" DEV "\",-1]]}", GW_EPROTO},
        {"{\"revoke\":[[\"" DEV "\",1.5]]}", GW_EPROTO},
        {"{\"revoke\":[[\"" DEV "\",\"6\"]]}", GW_EPROTO},
        {"{\"revoke\":[[\"" DEV "\",9007199254740994]]}", GW_EPROTO},
        {"{\"revoke\":[[\"" DEV "\",1e300]]}", GW_EPROTO},
        {"{\"revoke\":[[\"sensor-7\",6]]}", GW_EPROTO},
        {"{\"revoke\":[[\"\",6]]}", GW_EPROTO},
        {"{\"revoke\":[[\"GID@@@a0_85_e3_f4_49_34@@@a/b\",6]]}", GW_EPROTO},
        {"{\"revoke\":[[\"GID@@@a0_85_e3_f4_49_34@@@a\\u0001\",6]]}",
         GW_EPROTO},
        /* One bad entry refuses the message: no call for the good one. */
        {"{\"revoke\":[[\"" DEV "\",6],[\"" DEV "\",0]]}", GW_EPROTO},
        {"{\"revoke\":[[\"" DEV "\",6]],\"x\":\"\xff\"}", GW_EUTF8},
    };
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = parse(cases[i].text, s);
        if (rc != cases[i].rc || s->n != 0) {
            fail_msg("case %zu '%s': %d, %zu calls", i, cases[i].text, rc,
                     s->n);
        }
    }
    char *big = malloc(GW_REVOCATION_MAX_LEN + 1);
    memset(big, ' ', GW_REVOCATION_MAX_LEN + 1);
    assert_int_equal(
        gw_revocation_parse(big, GW_REVOCATION_MAX_LEN + 1, on_entry, s),
        GW_ETOOBIG);
    free(big);
    assert_int_equal(gw_revocation_parse(NULL, 1, on_entry, s), GW_EINVAL);
    assert_int_equal(gw_revocation_parse("{}", 2, NULL, s), GW_EINVAL);
    /* The callback's error stops the calls and is returned. */
    memset(s, 0, sizeof(*s));
    s->fail_at = 2;
    const char *two = "{\"revoke\":[[\"" DEV "\",6],[\"" DEV "\",7]]}";
    assert_int_equal(gw_revocation_parse(two, strlen(two), on_entry, s),
                     GW_ENOMEM);
    assert_int_equal(s->n, 1);
    free(s);
}

/* n entries, each a distinct id. */
static struct gw_revocation *entries(size_t n, char (*ids)[64])
{
    struct gw_revocation *e = calloc(n, sizeof(*e));

    for (size_t i = 0; i < n; i++) {
        snprintf(ids[i], 64, "GID_t@@@a0_85_e3_f4_49_34@@@u%zu", i);
        e[i].client_id = ids[i];
        e[i].below = i + 1;
    }
    return e;
}

static void test_pack_split(void **state)
{
    struct seen *s = calloc(1, sizeof(*s));
    struct seen *back = calloc(1, sizeof(*back));
    char(*ids)[64] = calloc(40, 64);
    struct gw_revocation *e = entries(40, ids);
    (void)state;

    /* One message when it fits; exactly what the parser reads back. */
    assert_int_equal(gw_revocation_pack(e, 1, 4096, on_msg, s), 1);
    assert_string_equal(
        s->msgs[0], "{\"revoke\":[[\"GID_t@@@a0_85_e3_f4_49_34@@@u0\",1]]}");
    /* Entries of 36..38 bytes, filled in turn: 5, 5, then 4 a message. */
    memset(s, 0, sizeof(*s));
    int msgs = gw_revocation_pack(e, 40, 200, on_msg, s);
    assert_int_equal(msgs, 10);
    assert_int_equal(s->n_msgs, 10);
    size_t total = 0;
    const size_t lens[] = {197, 198, 168, 168, 168, 168, 168, 168, 168, 90};
    for (size_t m = 0; m < s->n_msgs; m++) {
        assert_int_equal(s->lens[m], lens[m]);
        int n = gw_revocation_parse(s->msgs[m], s->lens[m], on_entry, back);
        assert_true(n > 0);
        total += (size_t)n;
    }
    assert_int_equal(total, 40);
    for (size_t i = 0; i < 40; i++) {
        assert_string_equal(back->ids[i], ids[i]);
        assert_int_equal(back->below[i], i + 1);
    }
    /* Ids with '"' and '\' are escaped. */
    struct gw_revocation q = {"g\"\\@@@a0_85_e3_f4_49_34", 3};
    memset(s, 0, sizeof(*s));
    memset(back, 0, sizeof(*back));
    assert_int_equal(gw_revocation_pack(&q, 1, 100, on_msg, s), 1);
    assert_int_equal(
        gw_revocation_parse(s->msgs[0], s->lens[0], on_entry, back), 1);
    assert_string_equal(back->ids[0], q.client_id);
    free(e);
    free(ids);
    free(back);
    free(s);
}

static void test_pack_refusals(void **state)
{
    struct seen *s = calloc(1, sizeof(*s));
    char(*ids)[64] = calloc(3, 64);
    struct gw_revocation *e = entries(3, ids);
    (void)state;

    /* Nothing to say: no message. */
    assert_int_equal(gw_revocation_pack(NULL, 0, 100, on_msg, s), 0);
    assert_int_equal(s->n_msgs, 0);
    /* Exactly one entry a message. */
    size_t one = strlen("{\"revoke\":[[\"\",1]]}") + strlen(ids[0]);
    assert_int_equal(gw_revocation_pack(e, 3, one, on_msg, s), 3);
    /* An entry that cannot fit alone; checked before anything is sent. */
    memset(s, 0, sizeof(*s));
    e[2].client_id = "GID_t@@@a0_85_e3_f4_49_34@@@u22"; /* one byte longer */
    assert_int_equal(gw_revocation_pack(e, 3, one, on_msg, s), GW_ETOOBIG);
    assert_int_equal(s->n_msgs, 0);
    /* Bad entries and arguments. */
    e[2].client_id = "sensor-7";
    assert_int_equal(gw_revocation_pack(e, 3, 4096, on_msg, s), GW_EINVAL);
    e[2].client_id = ids[2];
    e[1].below = 0;
    assert_int_equal(gw_revocation_pack(e, 3, 4096, on_msg, s), GW_EINVAL);
    e[1].below = 9007199254740993ULL;
    assert_int_equal(gw_revocation_pack(e, 3, 4096, on_msg, s), GW_EINVAL);
    e[1].below = 2;
    assert_int_equal(s->n_msgs, 0);
    assert_int_equal(
        gw_revocation_pack(e, 3, GW_REVOCATION_OVERHEAD, on_msg, s), GW_EINVAL);
    assert_int_equal(
        gw_revocation_pack(e, 3, GW_REVOCATION_MAX_LEN + 1, on_msg, s),
        GW_EINVAL);
    assert_int_equal(gw_revocation_pack(e, 3, 4096, NULL, s), GW_EINVAL);
    assert_int_equal(gw_revocation_pack(NULL, 3, 4096, on_msg, s), GW_EINVAL);
    /* emit's error stops the packing. */
    s->fail_at = 2;
    assert_int_equal(gw_revocation_pack(e, 3, one, on_msg, s), GW_ENOMEM);
    assert_int_equal(s->n_msgs, 1);
    free(e);
    free(ids);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_parse_refusals),
        cmocka_unit_test(test_pack_split),
        cmocka_unit_test(test_pack_refusals),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
