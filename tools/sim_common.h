/*
 * hybridgw-sim: small helpers the device, the load generator and the mock
 * backend share, so that their logs and identities agree.
 */
#ifndef GW_SIM_COMMON_H
#define GW_SIM_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>

#include <openssl/evp.h>

#include "common/error.h"

#define GW_SIM_UUID_LEN 36 /* 8-4-4-4-12 hex digits and dashes */

/*
 * FNV-1a of a payload and the wall clock in microseconds: the per-packet
 * logs of the devices and of the backend use both, so that a packet can
 * be joined across the two logs.
 */
uint32_t gw_sim_fnv32(const uint8_t *p, size_t n);
int64_t gw_sim_unix_us(void);

/* A random version 4 uuid in lowercase text. Returns 0 or GW_ECRYPTO. */
GW_MUST_CHECK int gw_sim_uuid4(char out[GW_SIM_UUID_LEN + 1]);

/* 32 bytes (a SHA-256) as 64 lowercase hex digits. */
void gw_sim_hex32(const uint8_t digest[32], char out[65]);

/* Finishes a SHA-256 context into hex; "" if OpenSSL fails. */
void gw_sim_digest_hex(EVP_MD_CTX *md, char out[65]);

/*
 * The strongest frequency of n PCM samples at rate, 50..4000 Hz to 1 Hz
 * (Goertzel over a 5 Hz grid, then 1 Hz around the best), and its share
 * of the signal's power in *purity (0..1; a clean tone is near 1) unless
 * purity is NULL. 0 for fewer than rate / 20 samples. For the pcm16 and
 * --tone checks: is what arrived the tone that was sent?
 */
double gw_sim_tone_hz(const int16_t *pcm, size_t n, int rate, double *purity);

/*
 * Raises the soft limit on open files towards want (RLIM_INFINITY: as
 * far as the hard limit allows) and returns the soft limit now in force,
 * or want when it cannot be read. Many simulated peers need many fds.
 */
rlim_t gw_sim_fd_limit_raise(rlim_t want);

#endif /* GW_SIM_COMMON_H */
