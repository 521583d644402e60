/*
 * The uplink clip of the simulated device: Opus frames encoded once per
 * process, as the firmware encodes its microphone, and replayed by every
 * device.
 */
#include "tools/sim_device_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define UP_RATE        16000
#define UP_SAMPLES     960 /* 60 ms at 16 kHz */
#define SILENCE_SETTLE 10  /* silence frames before DTX settles */
#define SILENCE_LOOP   30  /* settled silence frames, replayed in a loop */

struct gw_sim_clip {
    uint8_t *data;   /* every packet, back to back */
    size_t *off;     /* packet i starts at data + off[i] */
    uint16_t *len;   /* and has len[i] bytes */
    uint32_t speech; /* packets 0..speech-1 are voiced */
};

/* sin() for the test signal without libm (the tool does not link it):
 * range reduction and a Taylor series, ample for a test tone. */
static double sine(double x)
{
    const double two_pi = 2 * M_PI;

    x -= two_pi * (double)(int64_t)(x / two_pi);
    if (x > M_PI) {
        x -= two_pi;
    } else if (x < -M_PI) {
        x += two_pi;
    }
    if (x > M_PI / 2) {
        x = M_PI - x;
    } else if (x < -M_PI / 2) {
        x = -M_PI - x;
    }
    double x2 = x * x;
    return x * (1 - x2 / 6 * (1 - x2 / 20 * (1 - x2 / 42 * (1 - x2 / 72))));
}

/* A voiced, syllabic signal with a gliding pitch: enough like speech for
 * a VAD to fire and for Opus to use its speech modes. */
static void speech_pcm(int16_t *pcm, uint32_t frame, double *phase)
{
    for (int i = 0; i < UP_SAMPLES; i++) {
        double t = (double)(frame * UP_SAMPLES + (uint32_t)i) / UP_RATE;
        double f0 = 140.0 + 25.0 * sine(2 * M_PI * 0.7 * t);
        double syl = sine(2 * M_PI * 1.8 * t);
        double a = syl < 0 ? -syl : syl;
        double env = 0.15 + 0.85 * a * (2 - a);
        double s = 0;
        *phase += 2 * M_PI * f0 / UP_RATE;
        if (*phase > 2 * M_PI * 1000) {
            *phase -= 2 * M_PI * 1000; /* keeps sine() accurate */
        }
        for (int h = 1; h <= 12; h++) {
            double formant = h >= 3 && h <= 6 ? 1.6 : 1.0;
            s += formant * sine(*phase * h) / h;
        }
        pcm[i] = (int16_t)(6000.0 * env * s / 2.5);
    }
}

static uint32_t clip_tone_hz; /* --tone, 0: speech_pcm */

void gw_sim_clip_set_tone(uint32_t hz)
{
    clip_tone_hz = hz;
}

/* --tone: a steady sine, so what reaches the backend can be recognised. */
static void tone_pcm(int16_t *pcm, uint32_t frame)
{
    for (int i = 0; i < UP_SAMPLES; i++) {
        uint32_t n = (frame * UP_SAMPLES + (uint32_t)i) % UP_RATE;
        pcm[i] =
            (int16_t)(8000.0 * sine(2 * M_PI * clip_tone_hz * n / UP_RATE));
    }
}

static void silence_pcm(int16_t *pcm, uint32_t *lcg)
{
    for (int i = 0; i < UP_SAMPLES; i++) {
        *lcg = *lcg * 1103515245u + 12345u;
        pcm[i] = (int16_t)((int)((*lcg >> 16) % 9) - 4); /* mic floor */
    }
}

int gw_sim_clip_create(uint32_t speech_frames, struct gw_sim_clip **out)
{
    uint32_t total = speech_frames + SILENCE_SETTLE + SILENCE_LOOP;
    struct gw_sim_clip *c;
    OpusEncoder *enc;
    int16_t pcm[UP_SAMPLES];
    uint8_t pkt[GW_UDP_MAX_PAYLOAD];
    double phase = 0;
    uint32_t lcg = 1;
    int err;

    if (speech_frames == 0 || speech_frames > 10000) {
        return GW_EINVAL;
    }
    c = calloc(1, sizeof(*c));
    enc = opus_encoder_create(UP_RATE, 1, OPUS_APPLICATION_AUDIO, &err);
    if (c == NULL || enc == NULL ||
        (c->data = malloc((size_t)total * GW_UDP_MAX_PAYLOAD)) == NULL ||
        (c->off = calloc(total, sizeof(*c->off))) == NULL ||
        (c->len = calloc(total, sizeof(*c->len))) == NULL) {
        gw_sim_clip_destroy(c);
        opus_encoder_destroy(enc);
        return enc == NULL ? GW_EOPUS : GW_ENOMEM;
    }
    opus_encoder_ctl(enc, OPUS_SET_VBR(1));
    opus_encoder_ctl(enc, OPUS_SET_DTX(1));
    opus_encoder_ctl(enc, OPUS_SET_COMPLEXITY(0));
    c->speech = speech_frames;
    size_t pos = 0;
    for (uint32_t i = 0; i < total; i++) {
        if (i < speech_frames && clip_tone_hz > 0) {
            tone_pcm(pcm, i);
        } else if (i < speech_frames) {
            speech_pcm(pcm, i, &phase);
        } else {
            silence_pcm(pcm, &lcg);
        }
        int n = opus_encode(enc, pcm, UP_SAMPLES, pkt, sizeof(pkt));
        if (n < 1) {
            opus_encoder_destroy(enc);
            gw_sim_clip_destroy(c);
            return GW_EOPUS;
        }
        memcpy(c->data + pos, pkt, (size_t)n);
        c->off[i] = pos;
        c->len[i] = (uint16_t)n;
        pos += (size_t)n;
    }
    opus_encoder_destroy(enc);
    *out = c;
    return 0;
}

void gw_sim_clip_destroy(struct gw_sim_clip *clip)
{
    if (clip != NULL) {
        free(clip->data);
        free(clip->off);
        free(clip->len);
        free(clip);
    }
}

static uint32_t silence_index(const struct gw_sim_clip *c, uint32_t k)
{
    if (k < SILENCE_SETTLE) {
        return c->speech + k;
    }
    return c->speech + SILENCE_SETTLE + (k - SILENCE_SETTLE) % SILENCE_LOOP;
}

/* Frame k of a turn: speech_frames of speech (cycling the clip), then
 * silence, whose settled part loops; speech_frames 0 = speech only,
 * silent = silence only. */
void gw_sim_clip_frame(const struct gw_sim_clip *c, uint32_t k,
                       uint32_t speech_frames, bool silent, const uint8_t **p,
                       size_t *n)
{
    uint32_t i;

    if (silent) {
        i = silence_index(c, k);
    } else if (speech_frames == 0 || k < speech_frames) {
        i = k % c->speech;
    } else {
        i = silence_index(c, k - speech_frames);
    }
    *p = c->data + c->off[i];
    *n = c->len[i];
}
