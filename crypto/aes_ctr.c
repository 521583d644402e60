/*
 * AES-128-CTR over one long-lived OpenSSL EVP context per session and
 * direction, so that the audio path neither allocates nor expands keys.
 *
 * The context runs AES-128-ECB and this file does the counter mode: each
 * packet has its own initial counter (its header), and re-initialising a
 * CTR context with a new IV costs more than encrypting a whole audio
 * packet. Encrypting the counter blocks in one ECB call and XORing the
 * keystream in gives the same bytes as AES-128-CTR (the unit tests check
 * it against OpenSSL's own CTR mode and the NIST vectors) for a fraction
 * of the cost.
 */
#include "crypto/aes_ctr.h"

#include <endian.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#define BLOCK      16
#define CHUNK_BLKS 16 /* keystream made per ECB call: 256 bytes */

struct gw_aes_ctr {
    EVP_CIPHER *cipher;  /* fetched once; the context holds the provider */
    EVP_CIPHER_CTX *ctx; /* key schedule; ECB keeps no other state */
    unsigned keyed : 1;  /* set_key succeeded; apply is refused before */
};

int gw_aes_ctr_create(struct gw_aes_ctr **out)
{
    struct gw_aes_ctr *c;

    if (out == NULL) {
        return GW_EINVAL;
    }
    *out = NULL;
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return GW_ENOMEM;
    }
    c->cipher = EVP_CIPHER_fetch(NULL, "AES-128-ECB", NULL);
    c->ctx = EVP_CIPHER_CTX_new();
    /*
     * Binding the cipher now, without a key, lets set_key pass a NULL
     * cipher later, which keeps the provider context instead of freeing
     * and re-creating it. No padding: only whole blocks go in.
     */
    if (c->cipher == NULL || c->ctx == NULL ||
        EVP_EncryptInit_ex(c->ctx, c->cipher, NULL, NULL, NULL) != 1 ||
        EVP_CIPHER_CTX_set_padding(c->ctx, 0) != 1) {
        gw_aes_ctr_destroy(c);
        return GW_ECRYPTO;
    }
    *out = c;
    return 0;
}

void gw_aes_ctr_destroy(struct gw_aes_ctr *c)
{
    if (c == NULL) {
        return;
    }
    EVP_CIPHER_CTX_free(c->ctx);
    EVP_CIPHER_free(c->cipher);
    free(c);
}

int gw_aes_ctr_set_key(struct gw_aes_ctr *c,
                       const uint8_t key[GW_AES_CTR_KEY_LEN])
{
    if (c == NULL || key == NULL) {
        return GW_EINVAL;
    }
    c->keyed = 0;
    if (EVP_EncryptInit_ex(c->ctx, NULL, NULL, key, NULL) != 1) {
        return GW_ECRYPTO;
    }
    c->keyed = 1;
    return 0;
}

/*
 * Counter blocks for one chunk. The whole 128-bit block counts, big-endian,
 * as OpenSSL and mbedTLS do; the carry is done on the two 64-bit halves.
 */
static void fill_counters(uint8_t *blocks, size_t nblk, uint64_t *hi,
                          uint64_t *lo)
{
    for (size_t b = 0; b < nblk; b++) {
        uint64_t h = htobe64(*hi), l = htobe64(*lo);
        memcpy(blocks + b * BLOCK, &h, 8);
        memcpy(blocks + b * BLOCK + 8, &l, 8);
        if (++*lo == 0) {
            ++*hi;
        }
    }
}

static uint64_t load_be64(const uint8_t *p)
{
    uint64_t v;

    memcpy(&v, p, 8);
    return be64toh(v);
}

/* out = in ^ stream, a word at a time where it can (memcpy: no alignment
 * is assumed, and in == out is fine). */
static void xor_stream(uint8_t *out, const uint8_t *in, const uint8_t *stream,
                       size_t n)
{
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        uint64_t a, k;
        memcpy(&a, in + i, 8);
        memcpy(&k, stream + i, 8);
        a ^= k;
        memcpy(out + i, &a, 8);
    }
    for (; i < n; i++) {
        out[i] = in[i] ^ stream[i];
    }
}

int gw_aes_ctr_apply(struct gw_aes_ctr *c, const uint8_t iv[GW_AES_CTR_IV_LEN],
                     const uint8_t *in, uint8_t *out, size_t len)
{
    uint8_t blocks[CHUNK_BLKS * BLOCK];
    uint8_t stream[CHUNK_BLKS * BLOCK];
    uint64_t hi, lo;
    size_t done = 0;

    if (c == NULL || iv == NULL || !c->keyed || len > INT_MAX) {
        return GW_EINVAL;
    }
    if (len == 0) {
        return 0;
    }
    if (in == NULL || out == NULL) {
        return GW_EINVAL;
    }
    hi = load_be64(iv);
    lo = load_be64(iv + 8);
    while (done < len) {
        size_t n = len - done < sizeof(stream) ? len - done : sizeof(stream);
        size_t nblk = (n + BLOCK - 1) / BLOCK;
        int outl = 0;

        fill_counters(blocks, nblk, &hi, &lo);
        if (EVP_EncryptUpdate(c->ctx, stream, &outl, blocks,
                              (int)(nblk * BLOCK)) != 1 ||
            (size_t)outl != nblk * BLOCK) {
            return GW_ECRYPTO;
        }
        xor_stream(out + done, in + done, stream, n);
        done += n;
    }
    return 0;
}
