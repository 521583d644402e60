/*
 * AES-128-CTR for the UDP audio channel (docs/protocol.md section 4): the
 * initial counter block of each packet is its 16-byte header as sent.
 */
#ifndef GW_CRYPTO_AES_CTR_H
#define GW_CRYPTO_AES_CTR_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define GW_AES_CTR_KEY_LEN 16 /* AES-128 */
#define GW_AES_CTR_IV_LEN  16 /* one counter block = one UDP header */

/*
 * One context serves one session and one direction (uplink decrypt or
 * downlink encrypt): it holds the expanded key, and the per-packet state
 * it keeps is reset by every gw_aes_ctr_apply(). It is not thread-safe,
 * which is fine on the single loop thread.
 */
struct gw_aes_ctr;

/*
 * Allocates a context with no key. This is the only allocation: set_key
 * and apply reuse it. Returns 0, GW_ENOMEM or GW_ECRYPTO.
 */
GW_MUST_CHECK int gw_aes_ctr_create(struct gw_aes_ctr **out);

/* Frees the context; OpenSSL clears the key schedule. NULL is a no-op. */
void gw_aes_ctr_destroy(struct gw_aes_ctr *c);

/*
 * Installs a key: the key schedule is expanded here, once per hello, not
 * per packet. A context may be re-keyed. Returns 0, GW_EINVAL or
 * GW_ECRYPTO.
 */
GW_MUST_CHECK int gw_aes_ctr_set_key(struct gw_aes_ctr *c,
                                     const uint8_t key[GW_AES_CTR_KEY_LEN]);

/*
 * Encrypts or decrypts (the same operation in CTR) len bytes of in into
 * out, starting the counter at iv; the full 128-bit block is incremented
 * big-endian, as the firmware's mbedTLS does. in == out is allowed;
 * partially overlapping buffers are not. Only the IV is reset per call:
 * no allocation, no key expansion. Returns 0, GW_EINVAL (no key yet,
 * NULL buffer with len > 0, len > INT_MAX) or GW_ECRYPTO.
 */
GW_MUST_CHECK int gw_aes_ctr_apply(struct gw_aes_ctr *c,
                                   const uint8_t iv[GW_AES_CTR_IV_LEN],
                                   const uint8_t *in, uint8_t *out, size_t len);

#endif /* GW_CRYPTO_AES_CTR_H */
