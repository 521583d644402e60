/*
 * AES-128-CTR over one long-lived OpenSSL EVP context per session and
 * direction, so that the audio path neither allocates nor expands keys.
 */
#include "crypto/aes_ctr.h"

#include <limits.h>
#include <stdlib.h>

#include <openssl/evp.h>

struct gw_aes_ctr {
    EVP_CIPHER *cipher;  /* fetched once; the context holds the provider */
    EVP_CIPHER_CTX *ctx; /* key schedule plus per-packet counter state */
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
    c->cipher = EVP_CIPHER_fetch(NULL, "AES-128-CTR", NULL);
    c->ctx = EVP_CIPHER_CTX_new();
    /*
     * Binding the cipher now, without key or IV, lets set_key and apply
     * pass a NULL cipher later, which keeps the provider context instead
     * of freeing and re-creating it.
     */
    if (c->cipher == NULL || c->ctx == NULL ||
        EVP_EncryptInit_ex(c->ctx, c->cipher, NULL, NULL, NULL) != 1) {
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

int gw_aes_ctr_apply(struct gw_aes_ctr *c, const uint8_t iv[GW_AES_CTR_IV_LEN],
                     const uint8_t *in, uint8_t *out, size_t len)
{
    int outl = 0;

    if (c == NULL || iv == NULL || !c->keyed || len > INT_MAX) {
        return GW_EINVAL;
    }
    if (len == 0) {
        return 0;
    }
    if (in == NULL || out == NULL) {
        return GW_EINVAL;
    }
    /*
     * A NULL key keeps the expanded schedule; the new IV also discards
     * the unused keystream of the previous packet's last block.
     */
    if (EVP_EncryptInit_ex(c->ctx, NULL, NULL, NULL, iv) != 1) {
        return GW_ECRYPTO;
    }
    if (EVP_EncryptUpdate(c->ctx, out, &outl, in, (int)len) != 1 ||
        (size_t)outl != len) {
        return GW_ECRYPTO;
    }
    return 0;
}
