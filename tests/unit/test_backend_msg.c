/*
 * Reassembly of a backend's WebSocket messages from lws's pieces: one
 * piece without a copy, pieces in order, the size limit exactly, empty
 * pieces (lws may pass NULL for one), stray continuations refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/backend_msg.h"

static int add(struct gw_backend_msg *msg, size_t max, const char *in,
               bool first, bool final, bool binary,
               struct gw_backend_msg_out *out)
{
    return gw_backend_msg_add(msg, max, (const uint8_t *)in,
                              in != NULL ? strlen(in) : 0, first, final, binary,
                              out);
}

static void test_one_piece(void **state)
{
    static const char text[] = "{\"type\":\"tts\"}";
    struct gw_backend_msg msg = {0};
    struct gw_backend_msg_out out;

    (void)state;
    assert_int_equal(add(&msg, 64, text, true, true, false, &out), 1);
    assert_ptr_equal(out.data, text); /* not copied */
    assert_int_equal(out.len, strlen(text));
    assert_false(out.binary);
    assert_null(msg.buf);
    gw_backend_msg_release(&msg);
}

static void test_pieces(void **state)
{
    struct gw_backend_msg msg = {0};
    struct gw_backend_msg_out out;

    (void)state;
    assert_int_equal(add(&msg, 64, "abc", true, false, true, &out), 0);
    assert_int_equal(add(&msg, 64, "def", false, false, false, &out), 0);
    assert_int_equal(add(&msg, 64, "g", false, true, false, &out), 1);
    assert_int_equal(out.len, 7);
    assert_memory_equal(out.data, "abcdefg", 7);
    assert_true(out.binary); /* the first piece's kind */
    /* A new first piece drops a message under way. */
    assert_int_equal(add(&msg, 64, "xx", true, false, false, &out), 0);
    assert_int_equal(add(&msg, 64, "yy", true, false, false, &out), 0);
    assert_int_equal(add(&msg, 64, "z", false, true, false, &out), 1);
    assert_int_equal(out.len, 3);
    assert_memory_equal(out.data, "yyz", 3);
    gw_backend_msg_release(&msg);
    assert_null(msg.buf);
}

static void test_empty_pieces(void **state)
{
    struct gw_backend_msg msg = {0};
    struct gw_backend_msg_out out;

    (void)state;
    /* An empty first piece of a message in pieces, as NULL: nothing is
     * copied to or from a NULL pointer. */
    assert_int_equal(add(&msg, 64, NULL, true, false, true, &out), 0);
    assert_int_equal(add(&msg, 64, NULL, false, true, true, &out), 1);
    assert_non_null(out.data);
    assert_int_equal(out.len, 0);
    assert_int_equal(add(&msg, 64, NULL, true, true, false, &out), 1);
    assert_non_null(out.data);
    assert_int_equal(out.len, 0);
    gw_backend_msg_release(&msg);
}

static void test_limit(void **state)
{
    char big[65];
    struct gw_backend_msg msg = {0};
    struct gw_backend_msg_out out;

    (void)state;
    memset(big, 'a', 64);
    big[64] = '\0';
    assert_int_equal(add(&msg, 64, big, true, true, false, &out), 1);
    assert_int_equal(add(&msg, 63, big, true, true, false, &out), GW_ETOOBIG);
    assert_int_equal(add(&msg, 64, big + 32, true, false, false, &out), 0);
    assert_int_equal(add(&msg, 64, big + 32, false, true, false, &out), 1);
    assert_int_equal(out.len, 64);
    assert_int_equal(add(&msg, 64, big + 32, true, false, false, &out), 0);
    assert_int_equal(add(&msg, 64, big + 31, false, true, false, &out),
                     GW_ETOOBIG);
    assert_true(msg.cap <= 64); /* never grown past the limit */
    /* The partial message is gone: a continuation now is a stray one. */
    assert_int_equal(add(&msg, 64, "x", false, true, false, &out), GW_EPROTO);
    assert_int_equal(add(&msg, 64, "ok", true, true, false, &out), 1);
    gw_backend_msg_release(&msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_piece),
        cmocka_unit_test(test_pieces),
        cmocka_unit_test(test_empty_pieces),
        cmocka_unit_test(test_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
