/* Random key, ssrc and nonce for each device hello. */
#include "crypto/session_keys.h"

#include <string.h>

#include <openssl/rand.h>

/*
 * Zero means "no ssrc" to the session table; a zero draw happens with
 * probability 2^-32, so a few redraws only guard against a broken RNG.
 */
#define NONZERO_TRIES 4

int gw_session_keys_random_key(uint8_t key[GW_SESSION_KEYS_KEY_LEN])
{
    if (key == NULL) {
        return GW_EINVAL;
    }
    if (RAND_bytes(key, GW_SESSION_KEYS_KEY_LEN) != 1) {
        return GW_ECRYPTO;
    }
    return 0;
}

int gw_session_keys_random_ssrc(uint32_t *ssrc)
{
    uint8_t b[4];

    if (ssrc == NULL) {
        return GW_EINVAL;
    }
    for (int i = 0; i < NONZERO_TRIES; i++) {
        if (RAND_bytes(b, sizeof(b)) != 1) {
            return GW_ECRYPTO;
        }
        uint32_t v = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
                     (uint32_t)b[2] << 8 | (uint32_t)b[3];
        if (v != 0) {
            *ssrc = v;
            return 0;
        }
    }
    return GW_ECRYPTO;
}

int gw_session_keys_unique_ssrc(uint32_t *ssrc,
                                gw_session_keys_in_use_cb in_use, void *arg)
{
    uint32_t v;

    if (ssrc == NULL || in_use == NULL) {
        return GW_EINVAL;
    }
    for (int i = 0; i < GW_SESSION_KEYS_SSRC_TRIES; i++) {
        int rc = gw_session_keys_random_ssrc(&v);
        if (rc != 0) {
            return rc;
        }
        if (!in_use(v, arg)) {
            *ssrc = v;
            return 0;
        }
    }
    return GW_ELIMIT;
}

void gw_session_keys_nonce(uint32_t ssrc,
                           uint8_t nonce[GW_SESSION_KEYS_NONCE_LEN])
{
    memset(nonce, 0, GW_SESSION_KEYS_NONCE_LEN);
    nonce[0] = 0x01; /* packet type: audio */
    /* Byte 1, the flags, stays 0: the device copies it into every uplink
     * header, and the downlink's flags have bit 7 set, which keeps the two
     * directions' counter blocks apart (codec/udp_header.h). */
    nonce[4] = (uint8_t)(ssrc >> 24);
    nonce[5] = (uint8_t)(ssrc >> 16);
    nonce[6] = (uint8_t)(ssrc >> 8);
    nonce[7] = (uint8_t)ssrc;
}
