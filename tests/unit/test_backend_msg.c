/*
 * Reassembly of a backend's WebSocket messages from lws's pieces: one
 * piece without a copy, pieces in order, the size limit exactly, empty
 * pieces (lws may pass NULL for one), stray continuations refused, a
 * large message's buffer freed once it is handed over.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <opus.h>

#include "gateway/backend/backend_msg.h"

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

/* ---- dropped binary messages ------------------------------------------ */

/* One real packet of a 440 Hz tone, as a server's encoder makes it. */
static size_t encode(int rate, int channels, int ms, int bandwidth,
                     uint8_t *out, size_t cap)
{
    int err, n = rate / 1000 * ms;
    OpusEncoder *enc =
        opus_encoder_create(rate, channels, OPUS_APPLICATION_VOIP, &err);
    opus_int16 pcm[2 * 48 * 120];
    opus_int32 len;

    assert_int_equal(err, OPUS_OK);
    if (bandwidth != 0) {
        assert_int_equal(
            opus_encoder_ctl(enc, OPUS_SET_MAX_BANDWIDTH(bandwidth)), OPUS_OK);
    }
    for (int i = 0; i < n * channels; i++) {
        pcm[i] = (opus_int16)((i * 37 % 200 - 100) * 80);
    }
    /* the first packet of a stream can be tiny: take the third */
    for (int k = 0; k < 3; k++) {
        len = opus_encode(enc, pcm, n, out, (opus_int32)cap);
        assert_true(len > 0);
    }
    opus_encoder_destroy(enc);
    return (size_t)len;
}

/* What the xiaozhi server sends without ?from=mqtt_gateway. */
/* A 120 KB message (firmware 2.4 glyphs) in 4 KiB pieces: whole, and its
 * buffer freed once handed over, while a small one's buffer stays. */
static void test_trim(void **state)
{
    static uint8_t big[120000];
    struct gw_backend_msg msg = {0};
    struct gw_backend_msg_out out;
    size_t off = 0;
    int rc = 0;

    (void)state;
    for (size_t i = 0; i < sizeof(big); i++) {
        big[i] = (uint8_t)('a' + i % 26);
    }
    while (off < sizeof(big)) {
        size_t n = sizeof(big) - off < 4096 ? sizeof(big) - off : 4096;
        rc = gw_backend_msg_add(&msg, 131072, big + off, n, off == 0,
                                off + n == sizeof(big), false, &out);
        off += n;
    }
    assert_int_equal(rc, 1);
    assert_int_equal(out.len, sizeof(big));
    assert_memory_equal(out.data, big, sizeof(big));
    assert_true(msg.cap >= sizeof(big));
    gw_backend_msg_trim(&msg);
    assert_null(msg.buf);
    assert_int_equal(msg.cap, 0);
    assert_int_equal(add(&msg, 131072, "ab", true, false, false, &out), 0);
    gw_backend_msg_trim(&msg); /* under way: kept */
    assert_int_equal(add(&msg, 131072, "c", false, true, false, &out), 1);
    assert_memory_equal(out.data, "abc", 3);
    gw_backend_msg_trim(&msg); /* small: kept for the next one */
    assert_non_null(msg.buf);
    gw_backend_msg_release(&msg);
}

static void test_drop_bare_opus(void **state)
{
    static const int rates[] = {16000, 24000, 48000};
    uint8_t pkt[1500];

    (void)state;
    for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
        size_t len = encode(rates[i], 1, 60, 0, pkt, sizeof(pkt));
        int rc;
        uint32_t ts;
        const uint8_t *p;
        size_t plen;

        rc = gw_audio_frame_decode(GW_FRAMING_V2, pkt, len, &ts, &p, &plen);
        assert_true(rc < 0);
        assert_int_equal(gw_backend_drop_classify(GW_FRAMING_V2, pkt, len, rc),
                         GW_BACKEND_DROP_BARE_OPUS);
        assert_int_equal(
            gw_backend_drop_classify(GW_FRAMING_V3, pkt, len, GW_EPROTO),
            GW_BACKEND_DROP_BARE_OPUS);
        /* with no header to miss, raw never says so */
        assert_int_equal(
            gw_backend_drop_classify(GW_FRAMING_RAW, pkt, len, GW_ETOOBIG),
            GW_BACKEND_DROP_TOO_BIG);
    }
    /* 20 ms packets too */
    size_t len = encode(16000, 1, 20, 0, pkt, sizeof(pkt));
    assert_int_equal(
        gw_backend_drop_classify(GW_FRAMING_V2, pkt, len, GW_ETOOBIG),
        GW_BACKEND_DROP_BARE_OPUS);
    /* stereo or narrowband is no xiaozhi server's: the plain reason */
    len = encode(48000, 2, 60, 0, pkt, sizeof(pkt));
    assert_int_equal(
        gw_backend_drop_classify(GW_FRAMING_V2, pkt, len, GW_ETOOBIG),
        GW_BACKEND_DROP_TOO_BIG);
    len = encode(8000, 1, 60, OPUS_BANDWIDTH_NARROWBAND, pkt, sizeof(pkt));
    assert_int_equal(
        gw_backend_drop_classify(GW_FRAMING_V2, pkt, len, GW_ETRUNC),
        GW_BACKEND_DROP_TRUNCATED);
}

/* A v2 frame from the server (bytes 0..1 = 01 00) with a broken length
 * is not taken for bare Opus: its first byte reads as a narrowband TOC. */
static void test_drop_reasons(void **state)
{
    uint8_t frame[16 + 40] = {0x01, 0x00, 0x00, 0x28, 0, 0, 0, 1,
                              0,    0,    0,    0,    0, 0, 0, 0x29};

    (void)state;
    memset(frame + 16, 0x58, 40);
    assert_int_equal(gw_backend_drop_classify(GW_FRAMING_V2, frame,
                                              sizeof(frame), GW_ETRUNC),
                     GW_BACKEND_DROP_TRUNCATED);
    frame[0] = 0x00;
    assert_int_equal(gw_backend_drop_classify(GW_FRAMING_V2, frame,
                                              sizeof(frame), GW_EMALFORMED),
                     GW_BACKEND_DROP_LENGTH);
    assert_int_equal(
        gw_backend_drop_classify(GW_FRAMING_V3, frame, 3, GW_EPROTO),
        GW_BACKEND_DROP_BAD_TYPE);
    assert_int_equal(
        gw_backend_drop_classify(GW_FRAMING_V3, frame, 3, GW_EINVAL),
        GW_BACKEND_DROP_OTHER);
    assert_int_equal(
        gw_backend_drop_classify(GW_FRAMING_V2, NULL, 0, GW_EINVAL),
        GW_BACKEND_DROP_OTHER);
    assert_int_equal(
        gw_backend_drop_classify(GW_FRAMING_V2, frame, 0, GW_ETRUNC),
        GW_BACKEND_DROP_TRUNCATED);
    assert_string_equal(gw_backend_drop_name(GW_BACKEND_DROP_BARE_OPUS),
                        "bare_opus");
    assert_string_equal(gw_backend_drop_name(GW_BACKEND_DROP_LENGTH),
                        "length_mismatch");
    assert_string_equal(gw_backend_drop_name(GW_BACKEND_DROP_COUNT_), "other");
}

static void test_drop_hints(void **state)
{
    const char *h;

    (void)state;
    h = gw_backend_drop_hint(GW_FRAMING_V2, GW_BACKEND_DROP_BARE_OPUS, false);
    assert_non_null(strstr(h, "xiaozhi-esp32-server"));
    assert_non_null(strstr(h, "lacks ?from=mqtt_gateway"));
    /* the query is there: the server is not the xiaozhi one, or raw */
    h = gw_backend_drop_hint(GW_FRAMING_V2, GW_BACKEND_DROP_BARE_OPUS, true);
    assert_null(strstr(h, "lacks"));
    assert_non_null(strstr(h, "raw"));
    h = gw_backend_drop_hint(GW_FRAMING_V3, GW_BACKEND_DROP_BARE_OPUS, false);
    assert_null(strstr(h, "mqtt_gateway"));
    assert_non_null(
        gw_backend_drop_hint(GW_FRAMING_RAW, GW_BACKEND_DROP_TOO_BIG, true));
    assert_null(
        gw_backend_drop_hint(GW_FRAMING_RAW, GW_BACKEND_DROP_OTHER, true));
}

static void test_hex_head(void **state)
{
    static const uint8_t b[] = {0x00, 0x01, 0xab, 0xff, 0x10};
    char out[32];

    (void)state;
    assert_string_equal(gw_backend_hex_head(b, 5, 16, out, sizeof(out)),
                        "00 01 ab ff 10");
    assert_string_equal(gw_backend_hex_head(b, 5, 3, out, sizeof(out)),
                        "00 01 ab ...");
    assert_string_equal(gw_backend_hex_head(b, 0, 3, out, sizeof(out)), "");
    /* a small buffer is cut at a whole byte, and always ended */
    assert_string_equal(gw_backend_hex_head(b, 5, 16, out, 9), "00 01 ab");
    assert_string_equal(gw_backend_hex_head(b, 5, 16, out, 8), "00 01");
    assert_string_equal(gw_backend_hex_head(b, 5, 16, out, 3), "");
    assert_string_equal(gw_backend_hex_head(b, 5, 16, out, 4), "00");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_piece),
        cmocka_unit_test(test_pieces),
        cmocka_unit_test(test_empty_pieces),
        cmocka_unit_test(test_limit),
        cmocka_unit_test(test_trim),
        cmocka_unit_test(test_drop_bare_opus),
        cmocka_unit_test(test_drop_reasons),
        cmocka_unit_test(test_drop_hints),
        cmocka_unit_test(test_hex_head),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
