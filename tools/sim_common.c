/* hybridgw-sim: helpers shared by the device, load and backend parts. */
#include "tools/sim_common.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

#include <openssl/rand.h>

#include "codec/hex.h"

uint32_t gw_sim_fnv32(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 16777619u;
    }
    return h;
}

int64_t gw_sim_unix_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int gw_sim_uuid4(char out[GW_SIM_UUID_LEN + 1])
{
    uint8_t u[16];

    if (RAND_bytes(u, sizeof(u)) != 1) {
        return GW_ECRYPTO;
    }
    u[6] = (uint8_t)((u[6] & 0x0f) | 0x40); /* version 4 */
    u[8] = (uint8_t)((u[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(out, GW_SIM_UUID_LEN + 1,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
             "%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10],
             u[11], u[12], u[13], u[14], u[15]);
    return 0;
}

void gw_sim_hex32(const uint8_t digest[32], char out[65])
{
    if (gw_hex_encode(digest, 32, out, 65) != 0) {
        out[0] = '\0'; /* cannot happen: 65 bytes always fit */
    }
}

void gw_sim_digest_hex(EVP_MD_CTX *md, char out[65])
{
    unsigned char h[EVP_MAX_MD_SIZE];
    unsigned n = 0;

    if (EVP_DigestFinal_ex(md, h, &n) != 1 ||
        gw_hex_encode(h, n, out, 65) != 0) {
        out[0] = '\0';
    }
}

rlim_t gw_sim_fd_limit_raise(rlim_t want)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        return want;
    }
    if (rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            getrlimit(RLIMIT_NOFILE, &rl);
        }
    }
    return rl.rlim_cur;
}

/* Power at hz, normalised so that a full-scale match of n samples of a
 * sine with amplitude A gives A * A / 2 (the sine's own mean power). */
static double goertzel(const int16_t *pcm, size_t n, int rate, double hz)
{
    double w = 2.0 * cos(2.0 * M_PI * hz / rate), s1 = 0, s2 = 0;

    for (size_t i = 0; i < n; i++) {
        double s0 = pcm[i] + w * s1 - s2;
        s2 = s1;
        s1 = s0;
    }
    return 2.0 * (s1 * s1 + s2 * s2 - w * s1 * s2) / ((double)n * n);
}

double gw_sim_tone_hz(const int16_t *pcm, size_t n, int rate, double *purity)
{
    double best = 0, best_hz = 0, total = 0;

    if (purity != NULL) {
        *purity = 0;
    }
    if (rate <= 0 || n < (size_t)rate / 20) {
        return 0;
    }
    for (double hz = 50; hz <= 4000; hz += 5) {
        double p = goertzel(pcm, n, rate, hz);
        if (p > best) {
            best = p;
            best_hz = hz;
        }
    }
    for (double hz = best_hz - 5; hz <= best_hz + 5; hz += 1) {
        double p = goertzel(pcm, n, rate, hz);
        if (p > best) {
            best = p;
            best_hz = hz;
        }
    }
    for (size_t i = 0; i < n; i++) {
        total += (double)pcm[i] * pcm[i];
    }
    total /= (double)n;
    if (purity != NULL && total > 0) {
        *purity = best / total > 1 ? 1 : best / total;
    }
    return best_hz;
}
