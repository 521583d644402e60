/*
 * The audio cipher as the relay meets it: sessions take turns, so each
 * packet's key is cold once the sessions' keys no longer fit the cache
 * (in the gateway the kernel's send path and the other sessions' state
 * share it too). This times one 120-byte AES-128-CTR packet at a time,
 * sessions in random order, two ways in the same run:
 *
 *   evp:    the previous crypto/aes_ctr.c: an OpenSSL EVP AES-128-ECB
 *           context per session (behind a pointer, its key schedule in the
 *           provider's own allocation), counter blocks made and XORed here;
 *   nettle: crypto/aes_ctr.c now: Nettle's expanded key embedded in the
 *           session's own struct.
 *
 *   aes_cold [--sessions N] [--packets N]
 * prints one JSON line with ns per packet for each and nettle / evp. With
 * 1000 sessions alone both fit this machine's 1.25 MiB L2 and cost the
 * same; from 4000 the previous way's three cache lines per key show.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "crypto/aes_ctr.h"

#define PACKET 120

/* A session as the UDP peer holds one: some fields, then the key. */
struct session {
    uint8_t fields[64];
    struct gw_aes_ctr aes;
    EVP_CIPHER_CTX *evp;
};

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The old way: ECB keystream over counter blocks, XORed in. */
static void evp_packet(EVP_CIPHER_CTX *ctx, const uint8_t iv[16], uint8_t *buf,
                       size_t len)
{
    uint8_t blocks[128], stream[128];
    size_t nblk = (len + 15) / 16;
    int outl = 0;

    for (size_t b = 0; b < nblk; b++) {
        memcpy(blocks + b * 16, iv, 16);
        blocks[b * 16 + 15] = (uint8_t)(iv[15] + b);
    }
    if (EVP_EncryptUpdate(ctx, stream, &outl, blocks, (int)(nblk * 16)) != 1) {
        abort();
    }
    for (size_t i = 0; i < len; i++) {
        buf[i] ^= stream[i];
    }
}

int main(int argc, char **argv)
{
    size_t sessions = 4000, packets = 400000;
    static volatile uint8_t sink;

    for (int i = 1; i + 1 < argc; i += 2) {
        size_t v = (size_t)strtoull(argv[i + 1], NULL, 10);
        if (strcmp(argv[i], "--sessions") == 0) {
            sessions = v;
        } else if (strcmp(argv[i], "--packets") == 0) {
            packets = v;
        } else {
            fprintf(stderr, "aes_cold: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (sessions == 0 || packets == 0) {
        fprintf(stderr, "aes_cold: bad arguments\n");
        return 2;
    }
    EVP_CIPHER *ecb = EVP_CIPHER_fetch(NULL, "AES-128-ECB", NULL);
    struct session **s = calloc(sessions, sizeof(*s));
    uint32_t *order = malloc(packets * sizeof(*order));
    uint8_t key[16] = {1, 2, 3, 4}, iv[16] = {0}, buf[PACKET] = {0};

    if (ecb == NULL || s == NULL || order == NULL) {
        return 1;
    }
    for (size_t i = 0; i < sessions; i++) {
        s[i] = calloc(1, sizeof(**s));
        s[i]->evp = EVP_CIPHER_CTX_new();
        if (s[i] == NULL || s[i]->evp == NULL ||
            EVP_EncryptInit_ex(s[i]->evp, ecb, NULL, key, NULL) != 1 ||
            gw_aes_ctr_set_key(&s[i]->aes, key) != 0) {
            return 1;
        }
        EVP_CIPHER_CTX_set_padding(s[i]->evp, 0);
    }
    srand(1);
    for (size_t k = 0; k < packets; k++) {
        order[k] = (uint32_t)((size_t)rand() % sessions);
    }
    /* Way 0 is the loop alone, taken off the other two. */
    double ns[3] = {0};
    for (int way = 0; way < 3; way++) {
        double t0 = now_ns();
        for (size_t k = 0; k < packets; k++) {
            struct session *x = s[order[k]];
            iv[15] = (uint8_t)k;
            if (way == 1) {
                evp_packet(x->evp, iv, buf, sizeof(buf));
            } else if (way == 2 && gw_aes_ctr_apply(&x->aes, iv, buf, buf,
                                                    sizeof(buf)) != 0) {
                return 1;
            }
        }
        ns[way] = (now_ns() - t0) / (double)packets;
        sink = buf[0];
    }
    double evp = ns[1] - ns[0], nettle = ns[2] - ns[0];
    printf("{\"sessions\":%zu,\"packets\":%zu,\"evp_ns\":%.1f,"
           "\"nettle_ns\":%.1f,\"nettle_over_evp\":%.2f}\n",
           sessions, packets, evp, nettle, nettle / evp);
    (void)sink;
    return 0;
}
