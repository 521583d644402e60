/*
 * Opus packet inspection: packets from the real encoder in the shapes the
 * device and the backends send, every TOC config, and hand-made malformed
 * packets for each framing code of RFC 6716 section 3.2.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <opus.h>

#include "codec/opus_packet.h"

#define MAX_PACKET 4000

/* Inspects a heap copy of exactly len bytes, so ASan catches overreads. */
static int inspect_exact(const uint8_t *buf, size_t len,
                         struct gw_opus_info *info)
{
    uint8_t *copy = malloc(len > 0 ? len : 1);
    int err;

    assert_non_null(copy);
    if (len > 0) {
        memcpy(copy, buf, len);
    }
    err = gw_opus_packet_inspect(copy, len, info);
    free(copy);
    return err;
}

struct encoder_case {
    const char *name;
    int rate;     /* encoder sample rate */
    int channels; /* 1 or 2 */
    int frame_ms; /* 60 = 3 * 20 ms */
    int app;      /* OPUS_APPLICATION_* */
    int max_bw;   /* widest bandwidth the rate allows */
};

static const struct encoder_case encoder_cases[] = {
    /* The device's uplink: 16 kHz mono, 60 ms, complexity 0, DTX. */
    {"device uplink", 16000, 1, 60, OPUS_APPLICATION_AUDIO,
     OPUS_BANDWIDTH_WIDEBAND},
    /* The xiaozhi server's TTS: 24 kHz mono, 60 ms. */
    {"backend downlink", 24000, 1, 60, OPUS_APPLICATION_AUDIO,
     OPUS_BANDWIDTH_SUPERWIDEBAND},
    {"20 ms voip", 16000, 1, 20, OPUS_APPLICATION_VOIP,
     OPUS_BANDWIDTH_WIDEBAND},
    {"48 kHz stereo 20 ms", 48000, 2, 20, OPUS_APPLICATION_AUDIO,
     OPUS_BANDWIDTH_FULLBAND},
    {"8 kHz 40 ms", 8000, 1, 40, OPUS_APPLICATION_VOIP,
     OPUS_BANDWIDTH_NARROWBAND},
    {"120 ms", 48000, 1, 120, OPUS_APPLICATION_AUDIO, OPUS_BANDWIDTH_FULLBAND},
};

/*
 * One frame of a 441 Hz triangle wave with a little noise (both channels
 * alike), from sample t on: enough signal for the encoder to spend bits.
 */
static void tone(opus_int16 *pcm, int samples, int channels, int rate, int t)
{
    uint32_t noise = 12345u + (uint32_t)t;

    for (int i = 0; i < samples; i++) {
        int period = rate / 441, phase = (t + i) % period;
        int tri = phase < period / 2 ? phase : period - phase;
        int v = tri * 16000 / (period / 2) - 8000;
        noise = noise * 1103515245u + 12345u;
        v += (int)(noise >> 24) - 128;
        for (int c = 0; c < channels; c++) {
            pcm[i * channels + c] = (opus_int16)v;
        }
    }
}

static void test_encoder_packets(void **state)
{
    static opus_int16 pcm[48000 / 1000 * 120 * 2];
    uint8_t pkt[MAX_PACKET];

    (void)state;
    for (size_t i = 0; i < sizeof(encoder_cases) / sizeof(encoder_cases[0]);
         i++) {
        const struct encoder_case *c = &encoder_cases[i];
        int samples = c->rate / 1000 * c->frame_ms, err;
        OpusEncoder *enc =
            opus_encoder_create(c->rate, c->channels, c->app, &err);

        assert_int_equal(err, OPUS_OK);
        assert_int_equal(opus_encoder_ctl(enc, OPUS_SET_COMPLEXITY(0)),
                         OPUS_OK);
        for (int k = 0; k < 5; k++) {
            struct gw_opus_info info;
            opus_int32 n;

            tone(pcm, samples, c->channels, c->rate, k * samples);
            n = opus_encode(enc, pcm, samples, pkt, sizeof(pkt));
            assert_true(n > 0);
            assert_int_equal(inspect_exact(pkt, (size_t)n, &info), 0);
            assert_int_equal(info.samples_48k, 48 * c->frame_ms);
            assert_int_equal(info.stereo, c->channels == 2);
            assert_int_equal(info.toc_config, pkt[0] >> 3);
            assert_true(info.frames >= 1 && info.frames <= 48);
            assert_int_equal(info.samples_48k %
                                 opus_packet_get_samples_per_frame(pkt, 48000),
                             0);
            assert_int_equal(info.frames,
                             info.samples_48k /
                                 opus_packet_get_samples_per_frame(pkt, 48000));
            assert_true(info.bandwidth >= OPUS_BANDWIDTH_NARROWBAND &&
                        info.bandwidth <= c->max_bw);
            assert_true(gw_opus_packet_sane(pkt, (size_t)n));
        }
        opus_encoder_destroy(enc);
    }
}

/* Silence with DTX on gives the device's tiny packets: they must pass. */
static void test_dtx_silence(void **state)
{
    static opus_int16 pcm[960];
    uint8_t pkt[MAX_PACKET];
    int err, tiny = 0;
    OpusEncoder *enc =
        opus_encoder_create(16000, 1, OPUS_APPLICATION_AUDIO, &err);

    (void)state;
    assert_int_equal(err, OPUS_OK);
    assert_int_equal(opus_encoder_ctl(enc, OPUS_SET_DTX(1)), OPUS_OK);
    assert_int_equal(opus_encoder_ctl(enc, OPUS_SET_COMPLEXITY(0)), OPUS_OK);
    for (int k = 0; k < 50; k++) {
        struct gw_opus_info info;
        opus_int32 n = opus_encode(enc, pcm, 960, pkt, sizeof(pkt));

        assert_true(n > 0);
        assert_int_equal(inspect_exact(pkt, (size_t)n, &info), 0);
        assert_int_equal(info.samples_48k, 2880);
        if (n <= 2) {
            tiny++;
        }
    }
    opus_encoder_destroy(enc);
    assert_true(tiny > 0);
}

/*
 * Every TOC config in a one-byte code 0 packet (one empty frame, which is
 * valid: the decoder treats it as lost). Durations and bandwidths from
 * RFC 6716 table 2, written out rather than computed.
 */
static void test_every_config(void **state)
{
    static const struct {
        int samples;
        int bandwidth;
    } table[32] = {
        /* SILK NB, MB, WB: 10, 20, 40, 60 ms */
        {480, OPUS_BANDWIDTH_NARROWBAND},
        {960, OPUS_BANDWIDTH_NARROWBAND},
        {1920, OPUS_BANDWIDTH_NARROWBAND},
        {2880, OPUS_BANDWIDTH_NARROWBAND},
        {480, OPUS_BANDWIDTH_MEDIUMBAND},
        {960, OPUS_BANDWIDTH_MEDIUMBAND},
        {1920, OPUS_BANDWIDTH_MEDIUMBAND},
        {2880, OPUS_BANDWIDTH_MEDIUMBAND},
        {480, OPUS_BANDWIDTH_WIDEBAND},
        {960, OPUS_BANDWIDTH_WIDEBAND},
        {1920, OPUS_BANDWIDTH_WIDEBAND},
        {2880, OPUS_BANDWIDTH_WIDEBAND},
        /* Hybrid SWB, FB: 10, 20 ms */
        {480, OPUS_BANDWIDTH_SUPERWIDEBAND},
        {960, OPUS_BANDWIDTH_SUPERWIDEBAND},
        {480, OPUS_BANDWIDTH_FULLBAND},
        {960, OPUS_BANDWIDTH_FULLBAND},
        /* CELT NB, WB, SWB, FB: 2.5, 5, 10, 20 ms */
        {120, OPUS_BANDWIDTH_NARROWBAND},
        {240, OPUS_BANDWIDTH_NARROWBAND},
        {480, OPUS_BANDWIDTH_NARROWBAND},
        {960, OPUS_BANDWIDTH_NARROWBAND},
        {120, OPUS_BANDWIDTH_WIDEBAND},
        {240, OPUS_BANDWIDTH_WIDEBAND},
        {480, OPUS_BANDWIDTH_WIDEBAND},
        {960, OPUS_BANDWIDTH_WIDEBAND},
        {120, OPUS_BANDWIDTH_SUPERWIDEBAND},
        {240, OPUS_BANDWIDTH_SUPERWIDEBAND},
        {480, OPUS_BANDWIDTH_SUPERWIDEBAND},
        {960, OPUS_BANDWIDTH_SUPERWIDEBAND},
        {120, OPUS_BANDWIDTH_FULLBAND},
        {240, OPUS_BANDWIDTH_FULLBAND},
        {480, OPUS_BANDWIDTH_FULLBAND},
        {960, OPUS_BANDWIDTH_FULLBAND},
    };

    (void)state;
    for (int config = 0; config < 32; config++) {
        for (int s = 0; s < 2; s++) {
            uint8_t toc = (uint8_t)(config << 3 | s << 2);
            struct gw_opus_info info;

            assert_int_equal(inspect_exact(&toc, 1, &info), 0);
            assert_int_equal(info.toc_config, config);
            assert_int_equal(info.samples_48k, table[config].samples);
            assert_int_equal(info.bandwidth, table[config].bandwidth);
            assert_int_equal(info.frames, 1);
            assert_int_equal(info.stereo, s == 1);
            assert_true(gw_opus_packet_sane(&toc, 1));
        }
    }
}

struct packet_case {
    const char *name;
    uint8_t bytes[8]; /* the packet's first bytes */
    size_t len;       /* total length; bytes past 8 are zero */
    int err;
    int samples_48k; /* if err == 0 */
    int frames;      /* if err == 0 */
};

/* TOC bytes: config << 3 | stereo << 2 | code. */
#define SILK_NB_20  (1 << 3)
#define SILK_NB_60  (3 << 3)
#define CELT_NB_2_5 (16 << 3)
#define CELT_FB_20  (31 << 3)

static const struct packet_case packet_cases[] = {
    {"empty", {0}, 0, GW_EOPUS, 0, 0},
    {"code 0, toc only", {SILK_NB_20}, 1, 0, 960, 1},
    {"code 0, one frame", {CELT_FB_20, 1, 2, 3}, 4, 0, 960, 1},
    {"code 0, 1275-byte frame", {CELT_FB_20}, 1 + 1275, 0, 960, 1},
    {"code 0, 1276-byte frame", {CELT_FB_20}, 1 + 1276, GW_EOPUS, 0, 0},
    {"code 1, two empty frames", {SILK_NB_20 | 1}, 1, 0, 1920, 2},
    {"code 1, even payload", {SILK_NB_20 | 1, 1, 2}, 3, 0, 1920, 2},
    {"code 1, odd payload", {SILK_NB_20 | 1, 1, 2, 3}, 4, GW_EOPUS, 0, 0},
    {"code 1, two 60 ms frames", {SILK_NB_60 | 1}, 1, 0, 5760, 2},
    {"code 2, no length byte", {SILK_NB_20 | 2}, 1, GW_EOPUS, 0, 0},
    {"code 2, lengths 0 and 0", {SILK_NB_20 | 2, 0}, 2, 0, 1920, 2},
    {"code 2, lengths 2 and 1", {SILK_NB_20 | 2, 2, 9, 9, 9}, 5, 0, 1920, 2},
    {"code 2, first frame past end",
     {SILK_NB_20 | 2, 5, 1, 2},
     4,
     GW_EOPUS,
     0,
     0},
    {"code 2, two-byte length cut", {SILK_NB_20 | 2, 252}, 2, GW_EOPUS, 0, 0},
    {"code 3, no count byte", {CELT_NB_2_5 | 3}, 1, GW_EOPUS, 0, 0},
    {"code 3, zero frames", {CELT_NB_2_5 | 3, 0}, 2, GW_EOPUS, 0, 0},
    {"code 3, 48 frames of 2.5 ms", {CELT_NB_2_5 | 3, 48}, 2, 0, 5760, 48},
    {"code 3, 49 frames", {CELT_NB_2_5 | 3, 49}, 2, GW_EOPUS, 0, 0},
    {"code 3, 63 frames", {CELT_NB_2_5 | 3, 63}, 2, GW_EOPUS, 0, 0},
    {"code 3, 3 x 60 ms = 180 ms", {SILK_NB_60 | 3, 3}, 2, GW_EOPUS, 0, 0},
    {"code 3, 2 x 60 ms", {SILK_NB_60 | 3, 2}, 2, 0, 5760, 2},
    {"code 3 cbr, uneven split",
     {CELT_NB_2_5 | 3, 2, 1, 2, 3},
     5,
     GW_EOPUS,
     0,
     0},
    {"code 3 cbr, even split", {CELT_NB_2_5 | 3, 2, 1, 2}, 4, 0, 240, 2},
    {"code 3 vbr, lengths cut", {CELT_NB_2_5 | 3, 0x80 | 2}, 2, GW_EOPUS, 0, 0},
    {"code 3 vbr, frame past end",
     {CELT_NB_2_5 | 3, 0x80 | 2, 10, 1},
     4,
     GW_EOPUS,
     0,
     0},
    {"code 3 vbr, good", {CELT_NB_2_5 | 3, 0x80 | 2, 1, 7, 8}, 5, 0, 240, 2},
    {"code 3, padding past end",
     {CELT_NB_2_5 | 3, 0x40 | 1, 200},
     3,
     GW_EOPUS,
     0,
     0},
    {"code 3, padding length cut",
     {CELT_NB_2_5 | 3, 0x40 | 1, 255},
     3,
     GW_EOPUS,
     0,
     0},
    {"code 3, padding fits",
     {CELT_NB_2_5 | 3, 0x40 | 1, 2, 0, 0},
     5,
     0,
     120,
     1},
};

static void test_packet_table(void **state)
{
    static uint8_t buf[1 + 1276];

    (void)state;
    for (size_t i = 0; i < sizeof(packet_cases) / sizeof(packet_cases[0]);
         i++) {
        const struct packet_case *c = &packet_cases[i];
        struct gw_opus_info info;
        int err;

        memset(buf, 0, sizeof(buf));
        memcpy(buf, c->bytes, c->len < 8 ? c->len : 8);
        memset(&info, 0x55, sizeof(info));
        err = inspect_exact(buf, c->len, &info);
        if (err != c->err) {
            print_message("case: %s\n", c->name);
        }
        assert_int_equal(err, c->err);
        assert_int_equal(gw_opus_packet_sane(buf, c->len), c->err == 0);
        if (err == 0) {
            assert_int_equal(info.samples_48k, c->samples_48k);
            assert_int_equal(info.frames, c->frames);
            assert_int_equal(info.toc_config, buf[0] >> 3);
        } else {
            assert_int_equal(info.frames, 0x55555555);
        }
    }
}

static void test_null(void **state)
{
    struct gw_opus_info info;

    (void)state;
    assert_int_equal(gw_opus_packet_inspect(NULL, 0, &info), GW_EOPUS);
    assert_int_equal(gw_opus_packet_inspect(NULL, 10, &info), GW_EOPUS);
    assert_false(gw_opus_packet_sane(NULL, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encoder_packets),
        cmocka_unit_test(test_dtx_silence),
        cmocka_unit_test(test_every_config),
        cmocka_unit_test(test_packet_table),
        cmocka_unit_test(test_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
