/*
 * The masking-key source that replaces libwebsockets' lws_get_random
 * (gateway/backend/ws_random.c): every byte asked for is filled, across pool
 * refills, keys do not repeat, and the bytes look uniform.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <libwebsockets.h>

static void test_fills_every_byte(void **state)
{
    static const size_t lens[] = {1, 4, 16, 4095, 4096, 4097, 10000};
    unsigned char buf[10001];

    (void)state;
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        memset(buf, 0, sizeof(buf));
        buf[lens[i]] = 0xa5;
        assert_int_equal(lws_get_random(NULL, buf, lens[i]), lens[i]);
        assert_int_equal(buf[lens[i]], 0xa5); /* nothing past the end */
        if (lens[i] >= 16) {
            size_t zeros = 0;
            for (size_t j = 0; j < lens[i]; j++) {
                zeros += buf[j] == 0;
            }
            assert_true(zeros < lens[i] / 16 + 2);
        }
    }
}

/* 100000 masks of 4 bytes (about 100 pool refills): no mask twice in a
 * row, few repeats at all, and each bit set about half the time. */
static void test_masks_differ(void **state)
{
    enum { N = 100000 };
    static uint32_t masks[N];
    unsigned bits[32] = {0};
    unsigned same = 0;

    (void)state;
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(lws_get_random(NULL, &masks[i], 4), 4);
        for (int b = 0; b < 32; b++) {
            bits[b] += (masks[i] >> b) & 1u;
        }
        if (i > 0 && masks[i] == masks[i - 1]) {
            same++;
        }
    }
    assert_true(same == 0);
    for (int b = 0; b < 32; b++) {
        /* 50000 expected; 6 standard deviations is about 950 */
        assert_true(bits[b] > 49000 && bits[b] < 51000);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fills_every_byte),
        cmocka_unit_test(test_masks_differ),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
