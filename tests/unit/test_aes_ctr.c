/*
 * AES-128-CTR: NIST SP 800-38A vectors, packets made by the openssl tool
 * (tests/vectors/crypto/), OpenSSL's own CTR mode on counter carries,
 * argument checks, and the embedded context.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "crypto/aes_ctr.h"

#define VECTORS     GW_SOURCE_DIR "/tests/vectors/crypto/aes_ctr_packets.txt"
#define MAX_PAYLOAD 1484 /* docs/protocol.md section 4 */

/* Decodes hex ("-" = empty) into out; returns the length or -1. */
static long unhex(const char *s, uint8_t *out, size_t cap)
{
    size_t n = strlen(s);

    if (strcmp(s, "-") == 0) {
        return 0;
    }
    if (n % 2 != 0 || n / 2 > cap) {
        return -1;
    }
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) {
            return -1;
        }
        out[i] = (uint8_t)v;
    }
    return (long)(n / 2);
}

/* NIST SP 800-38A appendix F.5.1 (encrypt) and F.5.2 (decrypt). */
static const uint8_t nist_key[16] = {0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae,
                                     0xd2, 0xa6, 0xab, 0xf7, 0x15, 0x88,
                                     0x09, 0xcf, 0x4f, 0x3c};
static const uint8_t nist_ctr[16] = {0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5,
                                     0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb,
                                     0xfc, 0xfd, 0xfe, 0xff};
static const uint8_t nist_plain[64] = {
    0x6b, 0xc1, 0xbe, 0xe2, 0x2e, 0x40, 0x9f, 0x96, 0xe9, 0x3d, 0x7e,
    0x11, 0x73, 0x93, 0x17, 0x2a, 0xae, 0x2d, 0x8a, 0x57, 0x1e, 0x03,
    0xac, 0x9c, 0x9e, 0xb7, 0x6f, 0xac, 0x45, 0xaf, 0x8e, 0x51, 0x30,
    0xc8, 0x1c, 0x46, 0xa3, 0x5c, 0xe4, 0x11, 0xe5, 0xfb, 0xc1, 0x19,
    0x1a, 0x0a, 0x52, 0xef, 0xf6, 0x9f, 0x24, 0x45, 0xdf, 0x4f, 0x9b,
    0x17, 0xad, 0x2b, 0x41, 0x7b, 0xe6, 0x6c, 0x37, 0x10};
static const uint8_t nist_cipher[64] = {
    0x87, 0x4d, 0x61, 0x91, 0xb6, 0x20, 0xe3, 0x26, 0x1b, 0xef, 0x68,
    0x64, 0x99, 0x0d, 0xb6, 0xce, 0x98, 0x06, 0xf6, 0x6b, 0x79, 0x70,
    0xfd, 0xff, 0x86, 0x17, 0x18, 0x7b, 0xb9, 0xff, 0xfd, 0xff, 0x5a,
    0xe4, 0xdf, 0x3e, 0xdb, 0xd5, 0xd3, 0x5e, 0x5b, 0x4f, 0x09, 0x02,
    0x0d, 0xb0, 0x3e, 0xab, 0x1e, 0x03, 0x1d, 0xda, 0x2f, 0xbe, 0x03,
    0xd1, 0x79, 0x21, 0x70, 0xa0, 0xf3, 0x00, 0x9c, 0xee};

/* Prefix lengths: whole vector, inside one block, across block edges. */
static const size_t nist_lens[] = {64, 0, 1, 15, 16, 17, 31, 33, 48, 63};

static struct gw_aes_ctr *keyed(const uint8_t key[16])
{
    struct gw_aes_ctr *c = NULL;

    assert_int_equal(gw_aes_ctr_create(&c), 0);
    assert_non_null(c);
    assert_int_equal(gw_aes_ctr_set_key(c, key), 0);
    return c;
}

/* Runs one direction of the NIST vector for every prefix length. */
static void nist_direction(const uint8_t *from, const uint8_t *to)
{
    struct gw_aes_ctr *c = keyed(nist_key);
    uint8_t out[64], inplace[64];

    for (size_t i = 0; i < sizeof(nist_lens) / sizeof(nist_lens[0]); i++) {
        size_t n = nist_lens[i];
        memset(out, 0xa5, sizeof(out));
        assert_int_equal(gw_aes_ctr_apply(c, nist_ctr, from, out, n), 0);
        assert_memory_equal(out, to, n);
        if (n < sizeof(out)) {
            assert_int_equal(out[n], 0xa5); /* nothing written past len */
        }
        memcpy(inplace, from, n);
        assert_int_equal(gw_aes_ctr_apply(c, nist_ctr, inplace, inplace, n), 0);
        assert_memory_equal(inplace, to, n);
    }
    gw_aes_ctr_destroy(c);
}

static void test_nist_encrypt(void **state)
{
    (void)state;
    nist_direction(nist_plain, nist_cipher); /* F.5.1 */
}

static void test_nist_decrypt(void **state)
{
    (void)state;
    nist_direction(nist_cipher, nist_plain); /* F.5.2 */
}

/* One line of aes_ctr_packets.txt. */
struct packet_case {
    uint8_t key[16];
    uint8_t iv[16];
    uint8_t plain[MAX_PAYLOAD];
    uint8_t cipher[MAX_PAYLOAD];
    size_t len;
};

static int parse_packet(char *line, struct packet_case *pc)
{
    char *f[4];
    char *save = NULL;
    long kl, il, pl, cl;

    for (int i = 0; i < 4; i++) {
        f[i] = strtok_r(i == 0 ? line : NULL, " \n", &save);
        if (f[i] == NULL) {
            return -1;
        }
    }
    kl = unhex(f[0], pc->key, sizeof(pc->key));
    il = unhex(f[1], pc->iv, sizeof(pc->iv));
    pl = unhex(f[2], pc->plain, sizeof(pc->plain));
    cl = unhex(f[3], pc->cipher, sizeof(pc->cipher));
    if (kl != 16 || il != 16 || pl < 0 || pl != cl) {
        return -1;
    }
    pc->len = (size_t)pl;
    return 0;
}

/*
 * Every packet goes through one context that is re-keyed only when the
 * key changes, as a session does; odd lengths leave unused keystream
 * that the next packet's IV must discard.
 */
static void test_openssl_packets(void **state)
{
    static struct packet_case pc;
    static uint8_t buf[MAX_PAYLOAD];
    uint8_t last_key[16] = {0};
    struct gw_aes_ctr *c = NULL;
    FILE *fp = fopen(VECTORS, "r");
    char *line = NULL;
    size_t cap = 0;
    int cases = 0;

    (void)state;
    assert_non_null(fp);
    assert_int_equal(gw_aes_ctr_create(&c), 0);
    while (getline(&line, &cap, fp) > 0) {
        if (line[0] == '#' || line[0] == '\n') {
            continue;
        }
        assert_int_equal(parse_packet(line, &pc), 0);
        if (cases == 0 || memcmp(last_key, pc.key, 16) != 0) {
            assert_int_equal(gw_aes_ctr_set_key(c, pc.key), 0);
            memcpy(last_key, pc.key, 16);
        }
        assert_int_equal(gw_aes_ctr_apply(c, pc.iv, pc.plain, buf, pc.len), 0);
        assert_memory_equal(buf, pc.cipher, pc.len);
        /* decrypt in place, as the uplink path does */
        assert_int_equal(gw_aes_ctr_apply(c, pc.iv, buf, buf, pc.len), 0);
        assert_memory_equal(buf, pc.plain, pc.len);
        cases++;
    }
    free(line);
    fclose(fp);
    gw_aes_ctr_destroy(c);
    assert_int_equal(cases, 10); /* a truncated file must not pass */
}

/* Uplink and downlink contexts of one session never disturb each other. */
static void test_two_directions(void **state)
{
    struct gw_aes_ctr *up = keyed(nist_key);
    uint8_t other[16] = {1, 2, 3};
    struct gw_aes_ctr *down = keyed(other);
    uint8_t out[64];

    (void)state;
    assert_int_equal(gw_aes_ctr_apply(up, nist_ctr, nist_plain, out, 7), 0);
    assert_int_equal(gw_aes_ctr_apply(down, nist_ctr, nist_plain, out, 64), 0);
    assert_memory_not_equal(out, nist_cipher, 64);
    assert_int_equal(gw_aes_ctr_apply(up, nist_ctr, nist_plain, out, 64), 0);
    assert_memory_equal(out, nist_cipher, 64);
    /* re-keying the same context switches keys */
    assert_int_equal(gw_aes_ctr_set_key(down, nist_key), 0);
    assert_int_equal(gw_aes_ctr_apply(down, nist_ctr, nist_plain, out, 64), 0);
    assert_memory_equal(out, nist_cipher, 64);
    gw_aes_ctr_destroy(up);
    gw_aes_ctr_destroy(down);
}

static void test_bad_arguments(void **state)
{
    struct gw_aes_ctr *c = NULL;
    uint8_t buf[16] = {0};

    (void)state;
    assert_int_equal(gw_aes_ctr_create(NULL), GW_EINVAL);
    gw_aes_ctr_destroy(NULL);
    assert_int_equal(gw_aes_ctr_create(&c), 0);
    /* no key yet: refuse rather than encrypt under an all-zero key */
    assert_int_equal(gw_aes_ctr_apply(c, nist_ctr, buf, buf, 16), GW_EINVAL);
    assert_int_equal(gw_aes_ctr_set_key(c, NULL), GW_EINVAL);
    assert_int_equal(gw_aes_ctr_set_key(NULL, nist_key), GW_EINVAL);
    assert_int_equal(gw_aes_ctr_set_key(c, nist_key), 0);
    assert_int_equal(gw_aes_ctr_apply(NULL, nist_ctr, buf, buf, 16), GW_EINVAL);
    assert_int_equal(gw_aes_ctr_apply(c, NULL, buf, buf, 16), GW_EINVAL);
    assert_int_equal(gw_aes_ctr_apply(c, nist_ctr, NULL, buf, 16), GW_EINVAL);
    assert_int_equal(gw_aes_ctr_apply(c, nist_ctr, buf, NULL, 16), GW_EINVAL);
    assert_int_equal(
        gw_aes_ctr_apply(c, nist_ctr, buf, buf, (size_t)INT32_MAX + 1),
        GW_EINVAL);
    /* an empty payload (DTX) is fine, even without buffers */
    assert_int_equal(gw_aes_ctr_apply(c, nist_ctr, NULL, NULL, 0), 0);
    gw_aes_ctr_destroy(c);
}

/*
 * Compare with OpenSSL's own CTR mode (an independent implementation)
 * where the counter is hardest, on counters whose low bytes carry
 * into the timestamp, the ssrc and past the top of the block, and on
 * lengths that cross several chunks of keystream.
 */
static void test_matches_openssl_ctr(void **state)
{
    static const uint8_t tails[][16] = {
        {0},
        {[12] = 0xff, [13] = 0xff, [14] = 0xff, [15] = 0xfe},
        {[8] = 0xff,
         [9] = 0xff,
         [10] = 0xff,
         [11] = 0xff,
         [12] = 0xff,
         [13] = 0xff,
         [14] = 0xff,
         [15] = 0xf0},
        {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
         0xff, 0xff, 0xff, 0xfd},
    };
    static const size_t lens[] = {1,   15,  16,  17,  255,
                                  256, 257, 511, 513, MAX_PAYLOAD};
    struct gw_aes_ctr *c = keyed(nist_key);
    EVP_CIPHER_CTX *ref = EVP_CIPHER_CTX_new();
    static uint8_t plain[MAX_PAYLOAD], ours[MAX_PAYLOAD], theirs[MAX_PAYLOAD];
    int outl;

    (void)state;
    assert_non_null(ref);
    for (size_t i = 0; i < sizeof(plain); i++) {
        plain[i] = (uint8_t)(i * 131 + 7);
    }
    for (size_t t = 0; t < sizeof(tails) / sizeof(tails[0]); t++) {
        for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
            assert_int_equal(EVP_EncryptInit_ex(ref, EVP_aes_128_ctr(), NULL,
                                                nist_key, tails[t]),
                             1);
            assert_int_equal(
                EVP_EncryptUpdate(ref, theirs, &outl, plain, (int)lens[l]), 1);
            assert_int_equal(
                gw_aes_ctr_apply(c, tails[t], plain, ours, lens[l]), 0);
            assert_memory_equal(ours, theirs, lens[l]);
        }
    }
    EVP_CIPHER_CTX_free(ref);
    gw_aes_ctr_destroy(c);
}

/*
 * The embedded form the UDP peer uses: init gives no key, set_key one,
 * apply only reads the context (a const copy works the same), and clear
 * wipes the key schedule and the key flag.
 */
static void test_embedded(void **state)
{
    struct gw_aes_ctr c;
    static const struct gw_aes_ctr zero;
    uint8_t out[64];

    (void)state;
    gw_aes_ctr_init(&c);
    assert_int_equal(gw_aes_ctr_apply(&c, nist_ctr, nist_plain, out, 64),
                     GW_EINVAL);
    assert_int_equal(gw_aes_ctr_set_key(&c, nist_key), 0);
    const struct gw_aes_ctr copy = c;
    assert_int_equal(gw_aes_ctr_apply(&copy, nist_ctr, nist_plain, out, 64), 0);
    assert_memory_equal(out, nist_cipher, 64);
    assert_memory_equal(&copy, &c, sizeof(c)); /* nothing kept per packet */
    gw_aes_ctr_clear(&c);
    assert_memory_equal(&c, &zero, sizeof(c));
    assert_int_equal(gw_aes_ctr_apply(&c, nist_ctr, nist_plain, out, 64),
                     GW_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nist_encrypt),
        cmocka_unit_test(test_nist_decrypt),
        cmocka_unit_test(test_openssl_packets),
        cmocka_unit_test(test_matches_openssl_ctr),
        cmocka_unit_test(test_two_directions),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_embedded),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
