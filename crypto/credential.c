/*
 * Device password, backend token and daily management token: HMAC and
 * SHA-256 through OpenSSL, compared with CRYPTO_memcmp.
 */
#include "crypto/credential.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#define MAC_LEN       32 /* HMAC-SHA256 and SHA-256 output */
#define B64_LEN       44 /* base64 of MAC_LEN bytes, padded */
#define B64URL_LEN    43 /* the same without the '=' */
#define TS_MAX_DIGITS 19 /* INT64_MAX has 19 digits */
#define DAY_SECONDS   86400
#define DATE_LEN      10 /* YYYY-MM-DD */

/* One piece of an HMAC message, so callers need not concatenate. */
struct part {
    const void *ptr; /* may be NULL when len is 0 */
    size_t len;      /* bytes to feed */
};

/* NULL is only acceptable for an empty string. */
static bool text_ok(const char *p, size_t len)
{
    return p != NULL || len == 0;
}

static int hmac_sha256(const char *key, size_t key_len,
                       const struct part *parts, size_t nparts,
                       uint8_t mac[MAC_LEN])
{
    char digest[] = "SHA256";
    EVP_MAC *hmac;
    EVP_MAC_CTX *ctx = NULL;
    OSSL_PARAM params[2];
    size_t outl = 0;
    int rc = GW_ECRYPTO;

    params[0] =
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0);
    params[1] = OSSL_PARAM_construct_end();
    hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    if (hmac == NULL || (ctx = EVP_MAC_CTX_new(hmac)) == NULL ||
        EVP_MAC_init(ctx, (const unsigned char *)key, key_len, params) != 1) {
        goto out;
    }
    for (size_t i = 0; i < nparts; i++) {
        if (parts[i].len > 0 &&
            EVP_MAC_update(ctx, parts[i].ptr, parts[i].len) != 1) {
            goto out;
        }
    }
    if (EVP_MAC_final(ctx, mac, &outl, MAC_LEN) == 1 && outl == MAC_LEN) {
        rc = 0;
    }
out:
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(hmac);
    return rc;
}

/* Standard base64 with padding of a MAC: B64_LEN chars and a NUL. */
static void base64_mac(const uint8_t mac[MAC_LEN], char out[B64_LEN + 1])
{
    EVP_EncodeBlock((unsigned char *)out, mac, MAC_LEN);
}

/* base64url without padding (RFC 4648 section 5): B64URL_LEN + NUL. */
static void base64url_mac(const uint8_t mac[MAC_LEN], char out[B64URL_LEN + 1])
{
    char tmp[B64_LEN + 1];

    base64_mac(mac, tmp);
    for (size_t i = 0; i < B64URL_LEN; i++) {
        out[i] = tmp[i] == '+' ? '-' : tmp[i] == '/' ? '_' : tmp[i];
    }
    out[B64URL_LEN] = '\0';
}

bool gw_credential_equal(const void *a, size_t alen, const void *b, size_t blen)
{
    /*
     * On a length mismatch a is compared with itself, so the work done
     * is the same as for a content mismatch of equal length.
     */
    int diff = CRYPTO_memcmp(a, alen == blen ? b : a, alen);

    return alen == blen && diff == 0;
}

int gw_credential_password_make(const char *key, size_t key_len,
                                const char *client_id, size_t client_id_len,
                                const char *username, size_t username_len,
                                char *out, size_t cap)
{
    const struct part msg[] = {
        {client_id, client_id_len},
        {"|", 1},
        {username, username_len},
    };
    uint8_t mac[MAC_LEN];
    int rc;

    if (key == NULL || key_len == 0 || !text_ok(client_id, client_id_len) ||
        !text_ok(username, username_len)) {
        return GW_EINVAL;
    }
    if (out == NULL || cap < GW_CREDENTIAL_PASSWORD_LEN + 1) {
        return GW_ENOSPC;
    }
    rc = hmac_sha256(key, key_len, msg, 3, mac);
    if (rc == 0) {
        base64_mac(mac, out);
    }
    OPENSSL_cleanse(mac, sizeof(mac));
    return rc;
}

int gw_credential_password_verify(const char *key, size_t key_len,
                                  const char *client_id, size_t client_id_len,
                                  const char *username, size_t username_len,
                                  const char *password, size_t password_len)
{
    char want[GW_CREDENTIAL_PASSWORD_LEN + 1];
    int rc;

    if (!text_ok(password, password_len)) {
        return GW_EINVAL;
    }
    rc =
        gw_credential_password_make(key, key_len, client_id, client_id_len,
                                    username, username_len, want, sizeof(want));
    if (rc == 0 && !gw_credential_equal(want, GW_CREDENTIAL_PASSWORD_LEN,
                                        password, password_len)) {
        rc = GW_EAUTH;
    }
    OPENSSL_cleanse(want, sizeof(want));
    return rc;
}

/* Signs client_id|device_id|ts_text into a base64url signature. */
static int backend_sig(const char *secret, size_t secret_len,
                       const char *client_id, size_t client_id_len,
                       const char *device_id, size_t device_id_len,
                       const char *ts_text, size_t ts_len,
                       char sig[B64URL_LEN + 1])
{
    const struct part msg[] = {
        {client_id, client_id_len}, {"|", 1},
        {device_id, device_id_len}, {"|", 1},
        {ts_text, ts_len},
    };
    uint8_t mac[MAC_LEN];
    int rc;

    if (secret == NULL || secret_len == 0 ||
        !text_ok(client_id, client_id_len) ||
        !text_ok(device_id, device_id_len)) {
        return GW_EINVAL;
    }
    rc = hmac_sha256(secret, secret_len, msg, 5, mac);
    if (rc == 0) {
        base64url_mac(mac, sig);
    }
    OPENSSL_cleanse(mac, sizeof(mac));
    return rc;
}

int gw_credential_backend_token_make(const char *secret, size_t secret_len,
                                     const char *client_id,
                                     size_t client_id_len,
                                     const char *device_id,
                                     size_t device_id_len, int64_t ts,
                                     char *out, size_t cap)
{
    char ts_text[TS_MAX_DIGITS + 1];
    char sig[B64URL_LEN + 1];
    int n, rc;

    if (ts < 0) {
        return GW_EINVAL;
    }
    n = snprintf(ts_text, sizeof(ts_text), "%" PRId64, ts);
    if (n <= 0 || (size_t)n >= sizeof(ts_text)) {
        return GW_EINVAL;
    }
    rc = backend_sig(secret, secret_len, client_id, client_id_len, device_id,
                     device_id_len, ts_text, (size_t)n, sig);
    if (rc != 0) {
        return rc;
    }
    if (out == NULL || cap < B64URL_LEN + 1 + (size_t)n + 1) {
        return GW_ENOSPC;
    }
    memcpy(out, sig, B64URL_LEN);
    out[B64URL_LEN] = '.';
    memcpy(out + B64URL_LEN + 1, ts_text, (size_t)n + 1);
    return 0;
}

/*
 * Parses canonical unsigned decimal: digits only, no leading zero, at
 * most INT64_MAX. Canonical form keeps one token per (sig, ts), and it
 * is what the server signs (Python's str(int(ts))).
 */
static int parse_ts(const char *s, size_t len, int64_t *ts)
{
    uint64_t v = 0;

    if (len == 0 || len > TS_MAX_DIGITS || (s[0] == '0' && len > 1)) {
        return GW_EMALFORMED;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return GW_EMALFORMED;
        }
        v = v * 10 + (uint64_t)(s[i] - '0'); /* 19 digits fit in 64 bits */
    }
    if (v > (uint64_t)INT64_MAX) {
        return GW_EMALFORMED;
    }
    *ts = (int64_t)v;
    return 0;
}

int gw_credential_backend_token_verify(
    const char *secret, size_t secret_len, const char *client_id,
    size_t client_id_len, const char *device_id, size_t device_id_len,
    const char *token, size_t token_len, int64_t now, int64_t max_age)
{
    char want[B64URL_LEN + 1];
    const char *ts_text;
    size_t ts_len;
    int64_t ts;
    uint64_t age;
    int rc;

    if (now < 0 || max_age < 0 || !text_ok(token, token_len)) {
        return GW_EINVAL;
    }
    if (token_len < B64URL_LEN + 2 || token[B64URL_LEN] != '.') {
        return GW_EMALFORMED;
    }
    ts_text = token + B64URL_LEN + 1;
    ts_len = token_len - B64URL_LEN - 1;
    rc = parse_ts(ts_text, ts_len, &ts);
    if (rc != 0) {
        return rc;
    }
    rc = backend_sig(secret, secret_len, client_id, client_id_len, device_id,
                     device_id_len, ts_text, ts_len, want);
    if (rc != 0) {
        return rc;
    }
    /* Both are >= 0, so the difference fits in 64 unsigned bits. */
    age =
        ts > now ? (uint64_t)ts - (uint64_t)now : (uint64_t)now - (uint64_t)ts;
    if (!gw_credential_equal(want, B64URL_LEN, token, B64URL_LEN) ||
        age > (uint64_t)max_age) {
        rc = GW_EAUTH;
    }
    OPENSSL_cleanse(want, sizeof(want));
    return rc;
}

/* Writes v as exactly n decimal digits, zero-padded; v < 10^n. */
static void put_digits(char *out, unsigned v, size_t n)
{
    while (n-- > 0) {
        out[n] = (char)('0' + v % 10);
        v /= 10;
    }
}

/* "YYYY-MM-DD" of the UTC day holding t; years 0..9999 only. */
static int utc_date(int64_t t, char out[DATE_LEN + 1])
{
    time_t tt = (time_t)t;
    struct tm tm;

    if ((int64_t)tt != t || gmtime_r(&tt, &tm) == NULL || tm.tm_year < -1900 ||
        tm.tm_year > 9999 - 1900) {
        return GW_EINVAL;
    }
    put_digits(out, (unsigned)(tm.tm_year + 1900), 4);
    out[4] = '-';
    put_digits(out + 5, (unsigned)(tm.tm_mon + 1), 2);
    out[7] = '-';
    put_digits(out + 8, (unsigned)tm.tm_mday, 2);
    out[DATE_LEN] = '\0';
    return 0;
}

int gw_credential_daily_token_make(const char *key, size_t key_len, int64_t now,
                                   char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    char date[DATE_LEN + 1];
    uint8_t md[MAC_LEN];
    unsigned int mdlen = 0;
    EVP_MD_CTX *ctx;
    int rc;

    if (key == NULL || key_len == 0) {
        return GW_EINVAL;
    }
    rc = utc_date(now, date);
    if (rc != 0) {
        return rc;
    }
    if (out == NULL || cap < GW_CREDENTIAL_DAILY_TOKEN_LEN + 1) {
        return GW_ENOSPC;
    }
    ctx = EVP_MD_CTX_new();
    if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 ||
        EVP_DigestUpdate(ctx, date, DATE_LEN) != 1 ||
        EVP_DigestUpdate(ctx, key, key_len) != 1 ||
        EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != MAC_LEN) {
        EVP_MD_CTX_free(ctx);
        return GW_ECRYPTO;
    }
    EVP_MD_CTX_free(ctx);
    for (size_t i = 0; i < MAC_LEN; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 0x0f];
    }
    out[GW_CREDENTIAL_DAILY_TOKEN_LEN] = '\0';
    OPENSSL_cleanse(md, sizeof(md));
    return 0;
}

int gw_credential_daily_token_verify(const char *key, size_t key_len,
                                     int64_t now, const char *token,
                                     size_t token_len)
{
    char want[GW_CREDENTIAL_DAILY_TOKEN_LEN + 1];
    bool match = false;
    int rc = 0;

    if (!text_ok(token, token_len) || now < INT64_MIN + DAY_SECONDS ||
        now > INT64_MAX - DAY_SECONDS) {
        return GW_EINVAL;
    }
    for (int day = -1; day <= 1 && rc == 0; day++) {
        rc = gw_credential_daily_token_make(
            key, key_len, now + (int64_t)day * DAY_SECONDS, want, sizeof(want));
        if (rc == 0) {
            match |= gw_credential_equal(want, GW_CREDENTIAL_DAILY_TOKEN_LEN,
                                         token, token_len);
        }
    }
    OPENSSL_cleanse(want, sizeof(want));
    if (rc != 0) {
        return rc;
    }
    return match ? 0 : GW_EAUTH;
}

int gw_credential_activation_proof(const char *fleet_key, size_t fleet_key_len,
                                   const char *serial, size_t serial_len,
                                   const char *challenge, size_t challenge_len,
                                   uint8_t out[GW_CREDENTIAL_PROOF_LEN])
{
    uint8_t device_key[MAC_LEN];
    struct part sn = {serial, serial_len}, ch = {challenge, challenge_len};
    int rc;

    if (fleet_key == NULL || fleet_key_len == 0 || serial == NULL ||
        serial_len == 0 || challenge == NULL || challenge_len == 0 ||
        out == NULL) {
        return GW_EINVAL;
    }
    rc = hmac_sha256(fleet_key, fleet_key_len, &sn, 1, device_key);
    if (rc == 0) {
        rc = hmac_sha256((const char *)device_key, sizeof(device_key), &ch, 1,
                         out);
    }
    OPENSSL_cleanse(device_key, sizeof(device_key));
    return rc;
}

int gw_credential_challenge_make(const char *key, size_t key_len,
                                 const char *subject, int64_t window,
                                 char out[33])
{
    static const char digits[] = "0123456789abcdef";
    char num[TS_MAX_DIGITS + 3];
    uint8_t mac[MAC_LEN];
    int n = snprintf(num, sizeof(num), "|%" PRId64, window);
    struct part parts[2] = {{subject, subject != NULL ? strlen(subject) : 0},
                            {num, (size_t)n}};

    if (key == NULL || key_len == 0 || subject == NULL || out == NULL ||
        n < 0 || (size_t)n >= sizeof(num)) {
        return GW_EINVAL;
    }
    if (hmac_sha256(key, key_len, parts, 2, mac) != 0) {
        return GW_ECRYPTO;
    }
    for (size_t i = 0; i < 16; i++) {
        out[2 * i] = digits[mac[i] >> 4];
        out[2 * i + 1] = digits[mac[i] & 15];
    }
    out[32] = '\0';
    return 0;
}
