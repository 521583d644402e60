/* Token buckets and the bounded per-key table (common/ratelimit.c), on a
 * clock the test turns by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "common/ratelimit.h"

/* A burst of 5, then one every 10 s. */
static const struct gw_bucket_rate slow = {0.1, 5};

static void test_bucket_burst_refill(void **state)
{
    struct gw_bucket b = {0};
    uint64_t refused = 99;
    (void)state;

    for (int i = 0; i < 5; i++) {
        assert_true(gw_bucket_take(&b, &slow, 1000, &refused));
        assert_int_equal(refused, 0);
    }
    for (int i = 0; i < 3; i++) {
        assert_false(gw_bucket_take(&b, &slow, 1000 + (uint64_t)i, NULL));
    }
    assert_false(gw_bucket_idle(&b, &slow, 1000));
    /* 9.9 s is not yet a token; 10 s is, and says what was left out. */
    assert_false(gw_bucket_take(&b, &slow, 10900, &refused));
    assert_true(gw_bucket_take(&b, &slow, 11000, &refused));
    assert_int_equal(refused, 4);
    /* Refilled to the burst and no further, however long it waited. */
    assert_true(gw_bucket_idle(&b, &slow, 1000000));
    for (int i = 0; i < 5; i++) {
        assert_true(gw_bucket_take(&b, &slow, 1000000, NULL));
    }
    assert_false(gw_bucket_take(&b, &slow, 1000000, NULL));
    /* A clock that goes back refills nothing. */
    assert_false(gw_bucket_take(&b, &slow, 5, NULL));
}

static void test_per_key(void **state)
{
    struct gw_ratelimit rl;
    uint64_t refused = 0;
    (void)state;

    gw_ratelimit_init(&rl, slow, (struct gw_bucket_rate){0, 0}, 16);
    for (int i = 0; i < 5; i++) {
        assert_true(gw_ratelimit_take(&rl, "a", 1, NULL));
    }
    assert_false(gw_ratelimit_take(&rl, "a", 1, NULL));
    /* Another key has its own bucket. */
    assert_true(gw_ratelimit_take(&rl, "b", 1, NULL));
    assert_true(gw_ratelimit_take(&rl, NULL, 1, NULL)); /* NULL is "" */
    assert_true(gw_ratelimit_take(&rl, "a", 10001, &refused));
    assert_int_equal(refused, 1);
    assert_int_equal(rl.count, 3);
    gw_ratelimit_free(&rl);
    assert_int_equal(rl.count, 0);
}

/* Keys beyond the bound share one bucket until full ones are forgotten. */
static void test_bound(void **state)
{
    struct gw_ratelimit rl;
    char key[16];
    (void)state;

    gw_ratelimit_init(&rl, slow, (struct gw_bucket_rate){0, 0}, 4);
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_true(gw_ratelimit_take(&rl, key, 1, NULL));
    }
    assert_int_equal(rl.count, 4);
    /* No bucket has refilled: new keys go to the overflow bucket. */
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof(key), "new%d", i);
        assert_true(gw_ratelimit_take(&rl, key, 2, NULL));
    }
    assert_false(gw_ratelimit_take(&rl, "new9", 3, NULL));
    assert_int_equal(rl.count, 4);
    /* Once refilled (10 s), the old buckets are forgotten for new keys. */
    assert_true(gw_ratelimit_take(&rl, "fresh", 20000, NULL));
    assert_int_equal(rl.count, 1);
    gw_ratelimit_free(&rl);
}

/* The overall bucket bounds many keys together. */
static void test_all(void **state)
{
    struct gw_ratelimit rl;
    char key[16];
    int passed = 0;
    uint64_t refused = 0;
    (void)state;

    gw_ratelimit_init(&rl, slow, (struct gw_bucket_rate){1, 10}, 1000);
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "dev%d", i);
        passed += gw_ratelimit_take(&rl, key, 1, NULL);
    }
    assert_int_equal(passed, 10);
    /* A key stopped by the overall bound hears of it on its next line. */
    assert_true(gw_ratelimit_take(&rl, "dev50", 2001, &refused));
    assert_int_equal(refused, 1);
    gw_ratelimit_set_rate(&rl, slow, (struct gw_bucket_rate){0, 0});
    assert_true(gw_ratelimit_take(&rl, "dev51", 2001, NULL));
    gw_ratelimit_free(&rl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_burst_refill),
        cmocka_unit_test(test_per_key),
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
