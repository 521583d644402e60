/*
 * Fresh key material for each device hello (docs/protocol.md section 3): a
 * random AES key, a random ssrc and the nonce (header template) built on it.
 */
#ifndef GW_CRYPTO_SESSION_KEYS_H
#define GW_CRYPTO_SESSION_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define GW_SESSION_KEYS_KEY_LEN   16 /* AES-128 key in the hello */
#define GW_SESSION_KEYS_NONCE_LEN 16 /* nonce = UDP header template */

/* Draws for gw_session_keys_unique_ssrc before it gives up. */
#define GW_SESSION_KEYS_SSRC_TRIES 16

/* Tells whether an ssrc is taken; arg is the caller's table. */
typedef bool (*gw_session_keys_in_use_cb)(uint32_t ssrc, void *arg);

/*
 * Fills key with 16 bytes from the OpenSSL CSPRNG. Returns 0 or
 * GW_ECRYPTO (the key is then unusable: never fall back to weak bytes).
 */
GW_MUST_CHECK int
gw_session_keys_random_key(uint8_t key[GW_SESSION_KEYS_KEY_LEN]);

/*
 * Draws an unguessable, non-zero ssrc from the CSPRNG: the ssrc is the
 * only thing tying an uplink packet to its session, so it must not be
 * predictable from earlier ones. Uniqueness within the instance is NOT
 * checked here: the session table owns that (see unique_ssrc). Returns 0,
 * GW_EINVAL or GW_ECRYPTO.
 */
GW_MUST_CHECK int gw_session_keys_random_ssrc(uint32_t *ssrc);

/*
 * Like random_ssrc, but redraws while in_use(ssrc, arg) says the value is
 * taken, at most GW_SESSION_KEYS_SSRC_TRIES times. Returns 0, GW_EINVAL,
 * GW_ECRYPTO, or GW_ELIMIT if every draw was taken (the table is
 * implausibly full, or in_use is wrong).
 */
GW_MUST_CHECK int gw_session_keys_unique_ssrc(uint32_t *ssrc,
                                              gw_session_keys_in_use_cb in_use,
                                              void *arg);

/*
 * Writes the hello nonce `01 00 0000 <ssrc BE> 00000000 00000000`. The
 * device copies bytes 0, 1 and 4..7 into each uplink header, which is how
 * uplink packets find their session.
 */
void gw_session_keys_nonce(uint32_t ssrc,
                           uint8_t nonce[GW_SESSION_KEYS_NONCE_LEN]);

#endif /* GW_CRYPTO_SESSION_KEYS_H */
