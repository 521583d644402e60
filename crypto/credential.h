/*
 * Shared-secret credentials of the xiaozhi ecosystem: the device MQTT
 * password, the backend WebSocket bearer token and the management API's
 * daily token (docs/protocol.md sections 1, 6 and 8), compared in constant
 * time.
 */
#ifndef GW_CRYPTO_CREDENTIAL_H
#define GW_CRYPTO_CREDENTIAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/*
 * Text arguments are (pointer, length) and need no NUL; a pointer may be
 * NULL only with length 0. Keys and secrets are the configured strings,
 * used as raw HMAC key bytes; an empty key is GW_EINVAL (a configuration
 * that forgot its key must not authenticate anyone). Outputs are NUL
 * terminated; GW_ENOSPC if cap is too small. Every verify returns 0 only
 * for a match, so callers treat any non-zero value as "reject".
 */

/* base64 of an HMAC-SHA256, with padding: 44 characters. */
#define GW_CREDENTIAL_PASSWORD_LEN 44

/* <43 base64url chars>.<up to 19 digits>, plus NUL. */
#define GW_CREDENTIAL_BACKEND_TOKEN_MAX 64

/* The xiaozhi server's default token lifetime: 30 days. */
#define GW_CREDENTIAL_BACKEND_MAX_AGE (30 * 24 * 3600)

/* Lowercase hex SHA-256: 64 characters. */
#define GW_CREDENTIAL_DAILY_TOKEN_LEN 64

/*
 * The client id a backend token is signed with when the device's MQTT
 * client id has no uuid part. The caller must then send this same value
 * as the `client-id` upgrade header: the Node gateway signs with it but
 * sends no header, and the server verifies against "None" and refuses.
 */
#define GW_CREDENTIAL_DEFAULT_CLIENT_ID "default-client-id"

/*
 * Device MQTT password: base64(HMAC-SHA256(key, client_id "|" username)),
 * standard alphabet with padding, exactly as the OTA server issues it.
 * Writes GW_CREDENTIAL_PASSWORD_LEN characters and a NUL.
 */
GW_MUST_CHECK int gw_credential_password_make(const char *key, size_t key_len,
                                              const char *client_id,
                                              size_t client_id_len,
                                              const char *username,
                                              size_t username_len, char *out,
                                              size_t cap);

/*
 * Checks a password presented at MQTT CONNECT. Returns 0, GW_EAUTH on any
 * mismatch (including length), or GW_EINVAL/GW_ECRYPTO.
 */
GW_MUST_CHECK int
gw_credential_password_verify(const char *key, size_t key_len,
                              const char *client_id, size_t client_id_len,
                              const char *username, size_t username_len,
                              const char *password, size_t password_len);

/*
 * Backend token "<sig>.<ts>" with sig = base64url, no padding, of
 * HMAC-SHA256(secret, client_id "|" device_id "|" ts), ts = unix seconds
 * in decimal. This is the token only: the caller writes
 * "Authorization: Bearer <token>". device_id is the MAC with colons;
 * client_id is the uuid or GW_CREDENTIAL_DEFAULT_CLIENT_ID. ts < 0 is
 * GW_EINVAL.
 */
GW_MUST_CHECK int
gw_credential_backend_token_make(const char *secret, size_t secret_len,
                                 const char *client_id, size_t client_id_len,
                                 const char *device_id, size_t device_id_len,
                                 int64_t ts, char *out, size_t cap);

/*
 * Checks a backend token (without "Bearer "): ts must be canonical
 * decimal (no sign, no leading zero) and |now - ts| <= max_age seconds.
 * Returns 0, GW_EMALFORMED (not "<43 chars>.<digits>"), GW_EAUTH (wrong
 * signature or out of date), GW_EINVAL (now or max_age negative) or
 * GW_ECRYPTO.
 */
GW_MUST_CHECK int gw_credential_backend_token_verify(
    const char *secret, size_t secret_len, const char *client_id,
    size_t client_id_len, const char *device_id, size_t device_id_len,
    const char *token, size_t token_len, int64_t now, int64_t max_age);

/*
 * Management API token: lowercase hex of SHA-256("YYYY-MM-DD" key), the
 * date being the UTC date of now (unix seconds). Writes
 * GW_CREDENTIAL_DAILY_TOKEN_LEN characters and a NUL. GW_EINVAL if now is
 * outside years 0..9999.
 */
GW_MUST_CHECK int gw_credential_daily_token_make(const char *key,
                                                 size_t key_len, int64_t now,
                                                 char *out, size_t cap);

/*
 * Accepts the token of the UTC date of now, the day before or the day
 * after: manager-api retries with those dates, and the Node gateway used
 * its local date. Uppercase hex is refused. All three dates are always
 * compared. Returns 0, GW_EAUTH, GW_EINVAL or GW_ECRYPTO.
 */
GW_MUST_CHECK int gw_credential_daily_token_verify(const char *key,
                                                   size_t key_len, int64_t now,
                                                   const char *token,
                                                   size_t token_len);

/*
 * Constant-time equality. Pass the expected (secret-derived) value as a:
 * the time taken depends on alen only, never on where the bytes differ
 * nor on blen. Different lengths compare unequal.
 */
bool gw_credential_equal(const void *a, size_t alen, const void *b,
                         size_t blen);

/* hex(HMAC-SHA256(...)) of an activation: 64 characters. */
#define GW_CREDENTIAL_PROOF_LEN 32

/*
 * The proof a device with a factory serial number gives of a challenge
 * (docs/protocol.md section 9.2): HMAC-SHA256(device key, challenge), the
 * device key being HMAC-SHA256(fleet key, serial number), as burnt into
 * the device at the factory. Writes GW_CREDENTIAL_PROOF_LEN bytes to out.
 * Returns 0, GW_EINVAL (empty key, serial or challenge) or GW_ECRYPTO.
 */
GW_MUST_CHECK int
gw_credential_activation_proof(const char *fleet_key, size_t fleet_key_len,
                               const char *serial, size_t serial_len,
                               const char *challenge, size_t challenge_len,
                               uint8_t out[GW_CREDENTIAL_PROOF_LEN]);

/*
 * A challenge that needs no storage: 32 lowercase hex characters of
 * HMAC-SHA256(key, subject | "|" | window), so that the gateway can
 * check an answer to it later from the same subject and time window.
 * Writes 33 bytes (NUL included) to out. Returns 0, GW_EINVAL or
 * GW_ECRYPTO.
 */
GW_MUST_CHECK int gw_credential_challenge_make(const char *key, size_t key_len,
                                               const char *subject,
                                               int64_t window, char out[33]);

#endif /* GW_CRYPTO_CREDENTIAL_H */
