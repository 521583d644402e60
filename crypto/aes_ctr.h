/*
 * AES-128-CTR for the UDP audio channel (docs/protocol.md section 4): the
 * initial counter block of each packet is its 16-byte header as sent.
 */
#ifndef GW_CRYPTO_AES_CTR_H
#define GW_CRYPTO_AES_CTR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nettle/aes.h>

#include "common/error.h"

#define GW_AES_CTR_KEY_LEN 16 /* AES-128 */
#define GW_AES_CTR_IV_LEN  16 /* one counter block = one UDP header */

/*
 * One context serves one session and one direction (uplink decrypt or
 * downlink encrypt): it holds the expanded key and nothing else, so apply
 * only reads it. Its fields are visible so that the hot path can embed
 * it (the UDP peer does); use the functions below, not the fields.
 */
struct gw_aes_ctr {
    struct aes128_ctx key; /* Nettle's expanded key, 176 bytes */
    bool keyed;            /* set_key ran; apply is refused before */
};

/* An embedded context with no key; gw_aes_ctr_clear wipes it after use. */
void gw_aes_ctr_init(struct gw_aes_ctr *c);
void gw_aes_ctr_clear(struct gw_aes_ctr *c);

/*
 * A context of its own allocation, with no key. Returns 0, GW_EINVAL or
 * GW_ENOMEM.
 */
GW_MUST_CHECK int gw_aes_ctr_create(struct gw_aes_ctr **out);

/* Wipes the key schedule and frees the context. NULL is a no-op. */
void gw_aes_ctr_destroy(struct gw_aes_ctr *c);

/*
 * Installs a key: the key schedule is expanded here, once per hello, not
 * per packet. A context may be re-keyed. Returns 0 or GW_EINVAL.
 */
GW_MUST_CHECK int gw_aes_ctr_set_key(struct gw_aes_ctr *c,
                                     const uint8_t key[GW_AES_CTR_KEY_LEN]);

/*
 * Encrypts or decrypts (the same operation in CTR) len bytes of in into
 * out, starting the counter at iv; the full 128-bit block is incremented
 * big-endian, as the firmware's mbedTLS does. in == out is allowed;
 * partially overlapping buffers are not. The context is only read: no
 * allocation, no key expansion. Returns 0 or GW_EINVAL (no key yet, NULL
 * buffer with len > 0, len > INT_MAX).
 */
GW_MUST_CHECK int gw_aes_ctr_apply(const struct gw_aes_ctr *c,
                                   const uint8_t iv[GW_AES_CTR_IV_LEN],
                                   const uint8_t *in, uint8_t *out, size_t len);

#endif /* GW_CRYPTO_AES_CTR_H */
