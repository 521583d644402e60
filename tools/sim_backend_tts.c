/*
 * The mock backend's TTS audio: a stepped tone encoded once at startup and
 * shared by every session, with the SHA-256 of each prefix so that a turn
 * of any length can report the hash of what it sent.
 */
#include "tools/sim_backend_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int tts_encode(struct tts *t, OpusEncoder *enc, int rate)
{
    int spf = rate * GW_SIM_BACKEND_FRAME_MS / 1000;
    opus_int16 pcm[PCM_MAX];
    uint8_t pkt[GW_AUDIO_FRAME_MAX_PAYLOAD];
    uint32_t used = 0;

    for (int i = 0; i < t->n; i++) {
        /* A tone that steps each frame, so every packet differs. */
        double f = 220.0 + 30.0 * (i % 12);
        for (int j = 0; j < spf; j++) {
            double x = (double)(i * spf + j) / rate;
            pcm[j] = (opus_int16)(6000.0 * sin(2.0 * M_PI * f * x) +
                                  2000.0 * sin(2.0 * M_PI * 2.5 * f * x));
        }
        int n = opus_encode(enc, pcm, spf, pkt, (opus_int32)sizeof(pkt));
        if (n <= 0) {
            return GW_EOPUS;
        }
        t->off[i] = used;
        t->len[i] = (uint16_t)n;
        memcpy(t->buf + used, pkt, (size_t)n);
        used += (uint32_t)n;
    }
    return 0;
}

static int tts_hash(struct tts *t)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new(), *tmp = EVP_MD_CTX_new();
    int rc = ctx != NULL && tmp != NULL &&
                     EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1
                 ? 0
                 : GW_ECRYPTO;

    for (int k = 0; rc == 0 && k <= t->n; k++) {
        if (k > 0 &&
            EVP_DigestUpdate(ctx, t->buf + t->off[k - 1], t->len[k - 1]) != 1) {
            rc = GW_ECRYPTO;
        } else if (EVP_MD_CTX_copy_ex(tmp, ctx) != 1 ||
                   EVP_DigestFinal_ex(tmp, t->prefix[k], NULL) != 1) {
            rc = GW_ECRYPTO;
        }
    }
    EVP_MD_CTX_free(ctx);
    EVP_MD_CTX_free(tmp);
    return rc;
}

void gw_sim_be_tts_free(struct tts *t)
{
    free(t->buf);
    free(t->off);
    free(t->len);
    free(t->prefix);
    memset(t, 0, sizeof(*t));
}

int gw_sim_be_tts_build(struct tts *t, int n, int rate)
{
    int err = 0;
    OpusEncoder *enc =
        opus_encoder_create(rate, 1, OPUS_APPLICATION_AUDIO, &err);
    int rc;

    if (enc == NULL) {
        return GW_EOPUS;
    }
    opus_encoder_ctl(enc, OPUS_SET_BITRATE(24000));
    t->n = n;
    t->buf = malloc((size_t)n * GW_AUDIO_FRAME_MAX_PAYLOAD + 1);
    t->off = calloc((size_t)n + 1, sizeof(*t->off));
    t->len = calloc((size_t)n + 1, sizeof(*t->len));
    t->prefix = calloc((size_t)n + 1, sizeof(*t->prefix));
    if (t->buf == NULL || t->off == NULL || t->len == NULL ||
        t->prefix == NULL) {
        rc = GW_ENOMEM;
    } else if ((rc = tts_encode(t, enc, rate)) == 0) {
        rc = tts_hash(t);
    }
    opus_encoder_destroy(enc);
    if (rc != 0) {
        gw_sim_be_tts_free(t);
    }
    return rc;
}

/* --dump-frames: u16 big-endian length, then the packet, per frame. */
int gw_sim_be_tts_dump(const struct tts *t, const char *path)
{
    FILE *f = fopen(path, "wb");
    int ok = f != NULL;

    for (int i = 0; ok && i < t->n; i++) {
        uint8_t be[2] = {(uint8_t)(t->len[i] >> 8), (uint8_t)t->len[i]};
        ok = fwrite(be, 1, 2, f) == 2 &&
             fwrite(t->buf + t->off[i], 1, t->len[i], f) == t->len[i];
    }
    if (f != NULL && fclose(f) != 0) {
        ok = 0;
    }
    if (!ok) {
        fprintf(stderr, "hybridgw-sim backend: cannot write %s\n", path);
    }
    return ok ? 0 : 1;
}
