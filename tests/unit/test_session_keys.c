/*
 * Hello key material: the nonce layout of docs/protocol.md section 3, and the
 * random key and ssrc draws.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "crypto/session_keys.h"

#define DRAWS 2000

/* One nonce layout case: ssrc in, the 16 bytes expected out. */
struct nonce_case {
    uint32_t ssrc;
    uint8_t nonce[16];
};

static const struct nonce_case nonce_cases[] = {
    {0x00000001, {1, 0, 0, 0, 0x00, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0}},
    {0x12345678, {1, 0, 0, 0, 0x12, 0x34, 0x56, 0x78, 0, 0, 0, 0, 0, 0, 0, 0}},
    {0x80000000, {1, 0, 0, 0, 0x80, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0}},
    {0xdeadbeef, {1, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 0, 0, 0, 0}},
    {0xffffffff, {1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0}},
};

static void test_nonce_layout(void **state)
{
    uint8_t nonce[GW_SESSION_KEYS_NONCE_LEN];

    (void)state;
    for (size_t i = 0; i < sizeof(nonce_cases) / sizeof(nonce_cases[0]); i++) {
        memset(nonce, 0xa5, sizeof(nonce)); /* stale bytes must be cleared */
        gw_session_keys_nonce(nonce_cases[i].ssrc, nonce);
        assert_memory_equal(nonce, nonce_cases[i].nonce, sizeof(nonce));
        /* the field layout, spelled out */
        assert_int_equal(nonce[0], 0x01);
        assert_int_equal(nonce[1], 0x00);
        assert_int_equal(nonce[2] | nonce[3], 0);
        assert_int_equal((uint32_t)nonce[4] << 24 | (uint32_t)nonce[5] << 16 |
                             (uint32_t)nonce[6] << 8 | nonce[7],
                         nonce_cases[i].ssrc);
        for (size_t j = 8; j < 16; j++) {
            assert_int_equal(nonce[j], 0);
        }
    }
}

static void test_random_key(void **state)
{
    uint8_t a[GW_SESSION_KEYS_KEY_LEN], b[GW_SESSION_KEYS_KEY_LEN];
    static const uint8_t zero[GW_SESSION_KEYS_KEY_LEN];

    (void)state;
    assert_int_equal(gw_session_keys_random_key(a), 0);
    assert_int_equal(gw_session_keys_random_key(b), 0);
    assert_memory_not_equal(a, b, sizeof(a));
    assert_memory_not_equal(a, zero, sizeof(a));
    assert_int_equal(gw_session_keys_random_key(NULL), GW_EINVAL);
}

static void test_random_ssrc(void **state)
{
    static uint32_t seen[DRAWS];
    uint32_t all_or = 0, all_and = UINT32_MAX;
    size_t repeats = 0;

    (void)state;
    for (size_t i = 0; i < DRAWS; i++) {
        assert_int_equal(gw_session_keys_random_ssrc(&seen[i]), 0);
        assert_int_not_equal(seen[i], 0);
        all_or |= seen[i];
        all_and &= seen[i];
    }
    /* every bit varies: not a counter, not a constant */
    assert_int_equal(all_or, UINT32_MAX);
    assert_int_equal(all_and, 0);
    for (size_t i = 1; i < DRAWS; i++) {
        if (seen[i] == seen[i - 1] || seen[i] == seen[i - 1] + 1) {
            repeats++;
        }
    }
    assert_true(repeats < 2);
    assert_int_equal(gw_session_keys_random_ssrc(NULL), GW_EINVAL);
}

/* Test table for unique_ssrc: says "taken" for the first busy draws. */
struct table {
    int busy;      /* draws to refuse before accepting one */
    int calls;     /* how often in_use was asked */
    uint32_t last; /* the last ssrc asked about */
};

static bool table_in_use(uint32_t ssrc, void *arg)
{
    struct table *t = arg;

    assert_int_not_equal(ssrc, 0);
    t->calls++;
    t->last = ssrc;
    return t->calls <= t->busy;
}

static void test_unique_ssrc(void **state)
{
    static const int busy[] = {0, 1, 3, GW_SESSION_KEYS_SSRC_TRIES - 1};
    uint32_t ssrc;

    (void)state;
    for (size_t i = 0; i < sizeof(busy) / sizeof(busy[0]); i++) {
        struct table t = {busy[i], 0, 0};
        ssrc = 0;
        assert_int_equal(gw_session_keys_unique_ssrc(&ssrc, table_in_use, &t),
                         0);
        assert_int_equal(t.calls, busy[i] + 1);
        assert_int_equal(ssrc, t.last); /* the free one, not a taken one */
    }
}

static void test_unique_ssrc_gives_up(void **state)
{
    struct table t = {1 << 30, 0, 0};
    uint32_t ssrc = 7;

    (void)state;
    assert_int_equal(gw_session_keys_unique_ssrc(&ssrc, table_in_use, &t),
                     GW_ELIMIT);
    assert_int_equal(t.calls, GW_SESSION_KEYS_SSRC_TRIES);
    assert_int_equal(ssrc, 7); /* untouched on failure */
    assert_int_equal(gw_session_keys_unique_ssrc(NULL, table_in_use, &t),
                     GW_EINVAL);
    assert_int_equal(gw_session_keys_unique_ssrc(&ssrc, NULL, &t), GW_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nonce_layout),
        cmocka_unit_test(test_random_key),
        cmocka_unit_test(test_random_ssrc),
        cmocka_unit_test(test_unique_ssrc),
        cmocka_unit_test(test_unique_ssrc_gives_up),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
