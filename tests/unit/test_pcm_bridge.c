/*
 * The pcm16 transcoder: a tone survives Opus both ways at its frequency,
 * downlink PCM is cut into whole device frames whatever the message
 * sizes, odd byte counts and bad packets are counted, never fatal.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec/opus_packet.h"
#include "gateway/audio/pcm_bridge.h"

#define TONE_HZ     440.0
#define MAX_PACKETS 64

/* What the downlink emitted: the Opus packets, concatenated. */
struct sink {
    size_t n;
    size_t len[MAX_PACKETS];
    uint8_t buf[MAX_PACKETS][1500];
};

static void collect(void *arg, const uint8_t *opus, size_t len)
{
    struct sink *k = arg;

    assert_true(k->n < MAX_PACKETS);
    assert_true(len <= sizeof(k->buf[0]));
    memcpy(k->buf[k->n], opus, len);
    k->len[k->n++] = len;
}

static struct gw_pcm_bridge *make(int up, int down, int ms)
{
    struct gw_pcm_bridge_params p = {up, down, ms, "test"};
    struct gw_pcm_bridge *b = NULL;

    assert_int_equal(gw_pcm_bridge_create(&p, &b), 0);
    assert_non_null(b);
    return b;
}

/* PCM16LE of a sine at rate, amplitude 8000, samples [from, from + n). */
static void tone(uint8_t *out, int rate, size_t from, size_t n, double hz)
{
    for (size_t i = 0; i < n; i++) {
        double x = sin(2.0 * M_PI * hz * (double)(from + i) / rate);
        uint16_t v = (uint16_t)(int16_t)lrint(8000.0 * x);
        out[2 * i] = (uint8_t)v;
        out[2 * i + 1] = (uint8_t)(v >> 8);
    }
}

/* Power of PCM16LE samples at hz (Goertzel). */
static double power_at(const uint8_t *pcm, size_t n, int rate, double hz)
{
    double w = 2.0 * cos(2.0 * M_PI * hz / rate), s1 = 0, s2 = 0;

    for (size_t i = 0; i < n; i++) {
        double x = (int16_t)(uint16_t)(pcm[2 * i] | pcm[2 * i + 1] << 8);
        double s0 = x + w * s1 - s2;
        s2 = s1;
        s1 = s0;
    }
    return s1 * s1 + s2 * s2 - w * s1 * s2;
}

/* The frequency of largest power, 50..4000 Hz in 1 Hz steps. */
static double dominant(const uint8_t *pcm, size_t n, int rate)
{
    double best = 0, best_hz = 0;

    for (double hz = 50; hz <= 4000; hz += 1) {
        double p = power_at(pcm, n, rate, hz);
        if (p > best) {
            best = p;
            best_hz = hz;
        }
    }
    return best_hz;
}

static double rms(const uint8_t *pcm, size_t n)
{
    double sum = 0;

    for (size_t i = 0; i < n; i++) {
        double x = (int16_t)(uint16_t)(pcm[2 * i] | pcm[2 * i + 1] << 8);
        sum += x * x;
    }
    return n > 0 ? sqrt(sum / (double)n) : 0;
}

/*
 * Backend PCM at 24 kHz in messages of awkward sizes goes down as 60 ms
 * Opus frames; a device-side bridge at 16 kHz decodes them back (as the
 * uplink direction does): the tone is there at 440 Hz, at its level.
 */
static void test_tone_round_trip(void **state)
{
    (void)state;
    enum { RATE = 24000, UP = 16000, SECONDS = 1 };
    size_t total = RATE * SECONDS, sent = 0;
    static uint8_t pcm[RATE * SECONDS * 2];
    static uint8_t back[UP * SECONDS * 2 + 2 * 5760];
    static struct sink k;
    struct gw_pcm_bridge *down = make(16000, RATE, 60);
    struct gw_pcm_bridge *up = make(UP, 16000, 60);
    struct gw_pcm_bridge_stats st;
    size_t got = 0, emitted = 0;

    memset(&k, 0, sizeof(k));
    tone(pcm, RATE, 0, total, TONE_HZ);
    /* 1000-byte messages: never a whole frame (2880 bytes) at once. */
    while (sent < total * 2) {
        size_t m = total * 2 - sent < 1000 ? total * 2 - sent : 1000;
        emitted += gw_pcm_bridge_downlink(down, pcm + sent, m, collect, &k);
        sent += m;
    }
    /* 24000 samples = 16 frames of 1440 and 960 samples left over. */
    assert_int_equal(emitted, 16);
    assert_int_equal(k.n, 16);
    assert_int_equal(gw_pcm_bridge_pending(down), 960 * 2);
    for (size_t i = 0; i < k.n; i++) {
        struct gw_opus_info info;
        assert_int_equal(gw_opus_packet_inspect(k.buf[i], k.len[i], &info), 0);
        assert_int_equal(info.samples_48k, 2880); /* 60 ms */
        size_t n = 0;
        assert_int_equal(gw_pcm_bridge_uplink(up, k.buf[i], k.len[i],
                                              back + got, sizeof(back) - got,
                                              &n),
                         0);
        assert_int_equal(n, 960 * 2); /* 60 ms at 16 kHz */
        got += n;
    }
    /* Skip the first two frames: encoder look-ahead and ramp-up. */
    size_t skip = 2 * 960, n = got / 2 - skip;
    double hz = dominant(back + 2 * skip, n, UP);
    double level = rms(back + 2 * skip, n);
    print_message("decoded tone: %.0f Hz, rms %.0f (sent 440 Hz, rms %.0f)\n",
                  hz, level, 8000 / sqrt(2.0));
    assert_true(fabs(hz - TONE_HZ) <= 3.0);
    assert_true(level > 0.6 * 8000 / sqrt(2.0) &&
                level < 1.4 * 8000 / sqrt(2.0));
    /* The tone dominates: 440 Hz carries far more than a neighbour. */
    assert_true(power_at(back + 2 * skip, n, UP, TONE_HZ) >
                100 * power_at(back + 2 * skip, n, UP, 700));
    gw_pcm_bridge_get_stats(down, &st);
    assert_int_equal(st.down_frames, 16);
    assert_int_equal(st.down_bytes, total * 2);
    assert_int_equal(st.down_odd, 0);
    gw_pcm_bridge_get_stats(up, &st);
    assert_int_equal(st.up_packets, 16);
    assert_int_equal(st.up_errors, 0);
    gw_pcm_bridge_free(down);
    gw_pcm_bridge_free(up);
}

/* Partial frames wait; a whole frame goes the moment it is complete. */
static void test_framing_boundaries(void **state)
{
    (void)state;
    static struct sink k;
    struct gw_pcm_bridge *b = make(16000, 24000, 60);
    uint8_t pcm[3 * 2880 + 1];
    struct gw_pcm_bridge_stats st;

    memset(&k, 0, sizeof(k));
    tone(pcm, 24000, 0, sizeof(pcm) / 2, TONE_HZ);
    assert_int_equal(gw_pcm_bridge_frame_bytes(b), 2880);
    assert_int_equal(gw_pcm_bridge_downlink(b, pcm, 2878, collect, &k), 0);
    assert_int_equal(gw_pcm_bridge_pending(b), 2878);
    assert_int_equal(k.n, 0);
    /* Two more bytes complete the frame exactly. */
    assert_int_equal(gw_pcm_bridge_downlink(b, pcm + 2878, 2, collect, &k), 1);
    assert_int_equal(gw_pcm_bridge_pending(b), 0);
    assert_int_equal(k.n, 1);
    /* Two frames and a bit in one message: two out, the bit waits. */
    assert_int_equal(
        gw_pcm_bridge_downlink(b, pcm, 2 * 2880 + 100, collect, &k), 2);
    assert_int_equal(gw_pcm_bridge_pending(b), 100);
    /* Odd: 2781 bytes lose the last, 2780 + 100 = one frame, 0 left. */
    assert_int_equal(gw_pcm_bridge_downlink(b, pcm, 2781, collect, &k), 1);
    assert_int_equal(gw_pcm_bridge_pending(b), 0);
    /* A single odd byte is nothing at all; three bytes are one sample. */
    assert_int_equal(gw_pcm_bridge_downlink(b, pcm, 1, collect, &k), 0);
    assert_int_equal(gw_pcm_bridge_pending(b), 0);
    assert_int_equal(gw_pcm_bridge_downlink(b, pcm, 3, collect, &k), 0);
    assert_int_equal(gw_pcm_bridge_pending(b), 2);
    gw_pcm_bridge_get_stats(b, &st);
    assert_int_equal(st.down_odd, 3);
    assert_int_equal(st.down_frames, 4);
    /* The flush pads the last sample to a whole frame of 60 ms. */
    assert_int_equal(gw_pcm_bridge_downlink_flush(b, collect, &k), 1);
    assert_int_equal(gw_pcm_bridge_pending(b), 0);
    assert_int_equal(gw_pcm_bridge_downlink_flush(b, collect, &k), 0);
    struct gw_opus_info info;
    assert_int_equal(
        gw_opus_packet_inspect(k.buf[k.n - 1], k.len[k.n - 1], &info), 0);
    assert_int_equal(info.samples_48k, 2880);
    /* A reset drops what waits. */
    assert_int_equal(gw_pcm_bridge_downlink(b, pcm, 500, collect, &k), 0);
    gw_pcm_bridge_downlink_reset(b);
    assert_int_equal(gw_pcm_bridge_pending(b), 0);
    gw_pcm_bridge_get_stats(b, &st);
    assert_int_equal(st.down_discarded, 500);
    assert_int_equal(k.n, 5);
    gw_pcm_bridge_free(b);
}

/* Other durations and rates cut to their own sizes. */
static void test_frame_sizes(void **state)
{
    (void)state;
    static const struct {
        int rate, ms;
        size_t bytes;
        int samples_48k;
    } cases[] = {
        {8000, 20, 320, 960},      {16000, 60, 1920, 2880},
        {48000, 120, 11520, 5760}, {12000, 10, 240, 480},
        {24000, 5, 240, 240},
    };
    static uint8_t pcm[11520];
    static struct sink k;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gw_pcm_bridge *b = make(16000, cases[i].rate, cases[i].ms);
        struct gw_opus_info info;
        memset(&k, 0, sizeof(k));
        assert_int_equal(gw_pcm_bridge_frame_bytes(b), cases[i].bytes);
        tone(pcm, cases[i].rate, 0, cases[i].bytes / 2, TONE_HZ);
        assert_int_equal(
            gw_pcm_bridge_downlink(b, pcm, cases[i].bytes, collect, &k), 1);
        assert_int_equal(gw_opus_packet_inspect(k.buf[0], k.len[0], &info), 0);
        assert_int_equal(info.samples_48k, cases[i].samples_48k);
        gw_pcm_bridge_free(b);
    }
}

/* Bad uplink packets are refused and counted; the bridge goes on. */
static void test_uplink_errors(void **state)
{
    (void)state;
    struct gw_pcm_bridge *b = make(16000, 24000, 60);
    struct gw_pcm_bridge *enc = make(16000, 16000, 60);
    static const uint8_t bad[] = {0x03, 0x00}; /* code 3, zero frames */
    uint8_t pcm[11520], small[100];
    static struct sink k;
    struct gw_pcm_bridge_stats st;
    size_t n = 0;

    memset(&k, 0, sizeof(k));
    assert_int_equal(
        gw_pcm_bridge_uplink(b, bad, sizeof(bad), pcm, sizeof(pcm), &n),
        GW_EOPUS);
    assert_int_equal(gw_pcm_bridge_uplink(b, bad, 0, pcm, sizeof(pcm), &n),
                     GW_EOPUS);
    assert_int_equal(gw_pcm_bridge_uplink(b, NULL, 5, pcm, sizeof(pcm), &n),
                     GW_EOPUS);
    tone(pcm, 16000, 0, 960, TONE_HZ);
    assert_int_equal(gw_pcm_bridge_downlink(enc, pcm, 1920, collect, &k), 1);
    assert_int_equal(
        gw_pcm_bridge_uplink(b, k.buf[0], k.len[0], small, sizeof(small), &n),
        GW_ENOSPC);
    assert_int_equal(
        gw_pcm_bridge_uplink(b, k.buf[0], k.len[0], pcm, sizeof(pcm), &n), 0);
    assert_int_equal(n, 1920);
    gw_pcm_bridge_get_stats(b, &st);
    assert_int_equal(st.up_errors, 3);
    assert_int_equal(st.up_packets, 1);
    gw_pcm_bridge_free(b);
    gw_pcm_bridge_free(enc);
}

static void test_params(void **state)
{
    (void)state;
    struct gw_pcm_bridge *b = NULL;
    static const struct gw_pcm_bridge_params bad[] = {
        {44100, 16000, 60, NULL}, {16000, 22050, 60, NULL},
        {16000, 16000, 30, NULL}, {16000, 16000, 0, NULL},
        {0, 16000, 60, NULL},
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(gw_pcm_bridge_create(&bad[i], &b), GW_EINVAL);
        assert_null(b);
    }
    assert_int_equal(gw_pcm_bridge_create(NULL, &b), GW_EINVAL);
    gw_pcm_bridge_free(NULL);
}

static void test_hello_rate(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        int rate;
    } cases[] = {
        {"{\"audio_params\":{\"sample_rate\":16000}}", 16000},
        {"{\"audio_params\":{\"sample_rate\":48000}}", 48000},
        {"{\"audio_params\":{\"sample_rate\":44100}}", 0},
        {"{\"audio_params\":{\"sample_rate\":1e300}}", 0},
        {"{\"audio_params\":{\"sample_rate\":\"16000\"}}", 0},
        {"{\"audio_params\":{}}", 0},
        {"{}", 0},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cJSON *root = cJSON_Parse(cases[i].json);
        assert_non_null(root);
        assert_int_equal(gw_pcm_bridge_hello_rate(root), cases[i].rate);
        cJSON_Delete(root);
    }
    assert_int_equal(gw_pcm_bridge_hello_rate(NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tone_round_trip),
        cmocka_unit_test(test_framing_boundaries),
        cmocka_unit_test(test_frame_sizes),
        cmocka_unit_test(test_uplink_errors),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_hello_rate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
