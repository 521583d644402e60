/*
 * The uplink's ssrc table against a plain reference array: random adds
 * and removes, including runs that wrap around the end of the array and
 * keys whose probe runs overlap, where backward-shift deletion can go
 * wrong.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "gateway/audio/ssrc_table.h"

#define KEYS 3000

static uint32_t rng_state = 12345;

static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

static void test_basic(void **state)
{
    struct gw_ssrc_table t;
    int a, b;

    (void)state;
    gw_ssrc_table_init(&t);
    assert_null(gw_ssrc_table_find(&t, 7));
    assert_null(gw_ssrc_table_remove(&t, 7));
    assert_int_equal(gw_ssrc_table_add(&t, 0, &a), GW_EINVAL);
    assert_int_equal(gw_ssrc_table_add(&t, 7, NULL), GW_EINVAL);
    assert_int_equal(gw_ssrc_table_add(&t, 7, &a), 0);
    assert_int_equal(gw_ssrc_table_add(&t, 7, &b), GW_EEXIST);
    assert_ptr_equal(gw_ssrc_table_find(&t, 7), &a);
    assert_null(gw_ssrc_table_find(&t, 0));
    assert_null(gw_ssrc_table_find(&t, 8));
    assert_ptr_equal(gw_ssrc_table_remove(&t, 7), &a);
    assert_null(gw_ssrc_table_find(&t, 7));
    assert_int_equal(t.count, 0);
    gw_ssrc_table_free(&t);
}

/* Keys that share a home slot: one run, removed from the middle. */
static void test_colliding_run(void **state)
{
    struct gw_ssrc_table t;
    uint32_t keys[8];
    size_t n = 0;
    int v[8];

    (void)state;
    gw_ssrc_table_init(&t);
    assert_int_equal(gw_ssrc_table_add(&t, 1, &v[0]), 0); /* sizes it */
    assert_null(gw_ssrc_table_remove(&t, 2));
    uint32_t target = gw_ssrc_table_home(&t, 1);
    assert_ptr_equal(gw_ssrc_table_remove(&t, 1), &v[0]);
    for (uint32_t k = 1; n < 8; k++) {
        if (gw_ssrc_table_home(&t, k) == target) {
            keys[n] = k;
            assert_int_equal(gw_ssrc_table_add(&t, k, &v[n]), 0);
            n++;
        }
    }
    assert_ptr_equal(gw_ssrc_table_remove(&t, keys[3]), &v[3]);
    assert_ptr_equal(gw_ssrc_table_remove(&t, keys[0]), &v[0]);
    for (size_t i = 0; i < 8; i++) {
        if (i == 0 || i == 3) {
            assert_null(gw_ssrc_table_find(&t, keys[i]));
        } else {
            assert_ptr_equal(gw_ssrc_table_find(&t, keys[i]), &v[i]);
        }
    }
    gw_ssrc_table_free(&t);
}

static void test_against_reference(void **state)
{
    struct gw_ssrc_table t;
    static uint32_t keys[KEYS];
    static bool present[KEYS];
    static int values[KEYS];
    uint32_t count = 0;

    (void)state;
    gw_ssrc_table_init(&t);
    for (size_t i = 0; i < KEYS; i++) {
        /* Small keys in a narrow range make long, wrapping runs; the
         * random ones have the top bit set, so no key repeats. */
        keys[i] = i % 2 ? rng() | 0x80000000u : (uint32_t)i + 1;
    }
    for (int round = 0; round < 200000; round++) {
        size_t i = rng() % KEYS;
        if (present[i]) {
            assert_ptr_equal(gw_ssrc_table_remove(&t, keys[i]), &values[i]);
            present[i] = false;
            count--;
        } else {
            assert_int_equal(gw_ssrc_table_add(&t, keys[i], &values[i]), 0);
            present[i] = true;
            count++;
        }
        assert_int_equal(t.count, count);
        assert_true((uint64_t)t.count * 2 <= (uint64_t)t.mask + 1);
        if (round % 1000 == 0) {
            for (size_t k = 0; k < KEYS; k++) {
                void *want = present[k] ? &values[k] : NULL;
                assert_ptr_equal(gw_ssrc_table_find(&t, keys[k]), want);
            }
        }
    }
    gw_ssrc_table_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_colliding_run),
        cmocka_unit_test(test_against_reference),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
