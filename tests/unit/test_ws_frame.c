/*
 * WebSocket client frame heads and masking: the examples of RFC 6455
 * section 5.7, each length form at its edges, and the word-wise masking
 * against the byte-wise definition at every length and alignment.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "codec/ws_frame.h"

static const uint8_t rfc_mask[4] = {0x37, 0xfa, 0x21, 0x3d};

/* RFC 6455 5.7: a single-frame masked text message, "Hello". */
static void test_rfc_hello(void **state)
{
    static const uint8_t want[] = {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d,
                                   0x7f, 0x9f, 0x4d, 0x51, 0x58};
    uint8_t frame[32];
    int n;

    (void)state;
    n = gw_ws_frame_client_head(frame, sizeof(frame), GW_WS_OP_TEXT, 5,
                                rfc_mask);
    assert_int_equal(n, 6);
    memcpy(frame + n, "Hello", 5);
    gw_ws_frame_mask(frame + n, 5, rfc_mask);
    assert_int_equal(n + 5, sizeof(want));
    assert_memory_equal(frame, want, sizeof(want));
    /* Masking twice gives the payload back. */
    gw_ws_frame_mask(frame + n, 5, rfc_mask);
    assert_memory_equal(frame + n, "Hello", 5);
}

/* The shortest length form, at each boundary (RFC 6455 5.2). */
static void test_length_forms(void **state)
{
    static const struct {
        uint64_t len;
        int head;
        uint8_t b1;
    } cases[] = {
        {0, 6, 0x80},
        {125, 6, 0x80 | 125},
        {126, 8, 0x80 | 126},
        {65535, 8, 0x80 | 126},
        {65536, 14, 0x80 | 127},
        {(1ull << 63) - 1, 14, 0x80 | 127},
    };
    uint8_t out[GW_WS_FRAME_HEAD_MAX];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int n = gw_ws_frame_client_head(out, sizeof(out), GW_WS_OP_BINARY,
                                        cases[i].len, rfc_mask);
        assert_int_equal(n, cases[i].head);
        assert_int_equal(out[0], 0x82);
        assert_int_equal(out[1], cases[i].b1);
        uint64_t len = out[1] & 0x7f;
        if (len == 126) {
            len = (uint64_t)out[2] << 8 | out[3];
        } else if (len == 127) {
            len = 0;
            for (int k = 0; k < 8; k++) {
                len = len << 8 | out[2 + k];
            }
        }
        assert_true(len == cases[i].len);
        assert_memory_equal(out + n - 4, rfc_mask, 4);
    }
}

static void test_refusals(void **state)
{
    uint8_t out[GW_WS_FRAME_HEAD_MAX];

    (void)state;
    assert_int_equal(
        gw_ws_frame_client_head(out, 5, GW_WS_OP_BINARY, 1, rfc_mask),
        GW_ENOSPC);
    assert_int_equal(
        gw_ws_frame_client_head(out, 7, GW_WS_OP_BINARY, 126, rfc_mask),
        GW_ENOSPC);
    assert_int_equal(
        gw_ws_frame_client_head(out, 13, GW_WS_OP_BINARY, 65536, rfc_mask),
        GW_ENOSPC);
    assert_int_equal(
        gw_ws_frame_client_head(out, sizeof(out), 0x10, 1, rfc_mask),
        GW_EINVAL);
    assert_int_equal(gw_ws_frame_client_head(out, sizeof(out), GW_WS_OP_BINARY,
                                             1ull << 63, rfc_mask),
                     GW_EINVAL);
    assert_int_equal(gw_ws_frame_client_head(NULL, sizeof(out), GW_WS_OP_BINARY,
                                             1, rfc_mask),
                     GW_EINVAL);
    assert_int_equal(
        gw_ws_frame_client_head(out, sizeof(out), GW_WS_OP_BINARY, 1, NULL),
        GW_EINVAL);
}

/* Word-wise equals the byte-wise definition, whatever the alignment. */
static void test_mask_matches_definition(void **state)
{
    static const uint8_t key[4] = {0xa1, 0x02, 0xf3, 0x64};
    uint8_t buf[320 + 8], ref[320];

    (void)state;
    for (size_t off = 0; off < 8; off++) {
        for (size_t len = 0; len <= 320; len++) {
            for (size_t i = 0; i < len; i++) {
                ref[i] = (uint8_t)(i * 37 + off);
                buf[off + i] = ref[i];
            }
            gw_ws_frame_mask(buf + off, len, key);
            for (size_t i = 0; i < len; i++) {
                assert_int_equal(buf[off + i], ref[i] ^ key[i % 4]);
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc_hello),
        cmocka_unit_test(test_length_forms),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_mask_matches_definition),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
