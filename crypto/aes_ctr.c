/*
 * AES-128-CTR with Nettle: the expanded key lives in the context itself,
 * which the UDP peer embeds, so decrypting a packet reads the key
 * schedule from the lines next to the peer's own fields instead of
 * following OpenSSL's EVP context to its provider context (separate
 * allocations, each a cache miss when a thousand sessions take turns).
 * bench/NOTES.md has the figures. Nettle uses AES-NI where the CPU has it.
 *
 * The counter is the whole 128-bit block, big-endian, as the firmware's
 * mbedTLS and OpenSSL's CTR mode do; Nettle's ctr_crypt counts the same
 * way (the unit tests check it against OpenSSL's CTR mode on carries).
 */
#include "crypto/aes_ctr.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/ctr.h>

void gw_aes_ctr_init(struct gw_aes_ctr *c)
{
    memset(c, 0, sizeof(*c));
}

void gw_aes_ctr_clear(struct gw_aes_ctr *c)
{
    /* The key schedule gives the key back: wipe it where the compiler
     * cannot drop the stores. */
    volatile uint8_t *p = (volatile uint8_t *)c;

    for (size_t i = 0; i < sizeof(*c); i++) {
        p[i] = 0;
    }
}

int gw_aes_ctr_create(struct gw_aes_ctr **out)
{
    if (out == NULL) {
        return GW_EINVAL;
    }
    *out = malloc(sizeof(**out));
    if (*out == NULL) {
        return GW_ENOMEM;
    }
    gw_aes_ctr_init(*out);
    return 0;
}

void gw_aes_ctr_destroy(struct gw_aes_ctr *c)
{
    if (c != NULL) {
        gw_aes_ctr_clear(c);
        free(c);
    }
}

int gw_aes_ctr_set_key(struct gw_aes_ctr *c,
                       const uint8_t key[GW_AES_CTR_KEY_LEN])
{
    if (c == NULL || key == NULL) {
        return GW_EINVAL;
    }
    aes128_set_encrypt_key(&c->key, key);
    c->keyed = true;
    return 0;
}

int gw_aes_ctr_apply(const struct gw_aes_ctr *c,
                     const uint8_t iv[GW_AES_CTR_IV_LEN], const uint8_t *in,
                     uint8_t *out, size_t len)
{
    uint8_t ctr[GW_AES_CTR_IV_LEN];

    if (c == NULL || iv == NULL || !c->keyed || len > INT_MAX) {
        return GW_EINVAL;
    }
    if (len == 0) {
        return 0;
    }
    if (in == NULL || out == NULL) {
        return GW_EINVAL;
    }
    memcpy(ctr, iv, sizeof(ctr)); /* ctr_crypt advances its copy */
    ctr_crypt(&c->key, (nettle_cipher_func *)aes128_encrypt, AES_BLOCK_SIZE,
              ctr, len, out, in);
    return 0;
}
