/*
 * Fuzzes the credential verifiers with arbitrary presented values and
 * checks that make and verify agree: what make issues, verify accepts.
 * Input: 8 bytes of big-endian "now", then key, id, id, presented, split
 * at '\n' (missing fields are empty).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crypto/credential.h"

#define NFIELDS 4
#define DAY     86400

/* One field in its own exact-size allocation, so ASan sees overreads. */
struct field {
    char *p;    /* NULL when len is 0 */
    size_t len; /* bytes, no NUL */
};

static void split(const uint8_t *data, size_t size, struct field *f)
{
    size_t start = 0, n = 0;

    for (size_t i = 0; i <= size && n < NFIELDS; i++) {
        if (i == size || (data[i] == '\n' && n < NFIELDS - 1)) {
            f[n].len = i - start;
            f[n].p = f[n].len > 0 ? malloc(f[n].len) : NULL;
            if (f[n].p == NULL && f[n].len > 0) {
                abort();
            }
            if (f[n].len > 0) {
                memcpy(f[n].p, data + start, f[n].len);
            }
            n++;
            start = i + 1;
        }
    }
}

static void check_password(const struct field *f)
{
    char want[GW_CREDENTIAL_PASSWORD_LEN + 1];
    int made =
        gw_credential_password_make(f[0].p, f[0].len, f[1].p, f[1].len, f[2].p,
                                    f[2].len, want, sizeof(want));
    int rc = gw_credential_password_verify(f[0].p, f[0].len, f[1].p, f[1].len,
                                           f[2].p, f[2].len, f[3].p, f[3].len);

    /* accepted means it is exactly the password make issues */
    if (rc == 0 && (made != 0 || !gw_credential_equal(want, strlen(want),
                                                      f[3].p, f[3].len))) {
        abort();
    }
    if (made == 0 && gw_credential_password_verify(f[0].p, f[0].len, f[1].p,
                                                   f[1].len, f[2].p, f[2].len,
                                                   want, strlen(want)) != 0) {
        abort();
    }
}

static void check_backend(const struct field *f, int64_t now)
{
    char tok[GW_CREDENTIAL_BACKEND_TOKEN_MAX];
    int64_t ts = now & INT64_MAX;
    int rc;

    rc = gw_credential_backend_token_verify(f[0].p, f[0].len, f[1].p, f[1].len,
                                            f[2].p, f[2].len, f[3].p, f[3].len,
                                            ts, GW_CREDENTIAL_BACKEND_MAX_AGE);
    if (rc == 0) {
        /* a valid token has the shape make writes; rebuild it */
        char digits[24] = {0};
        if (f[3].len < 45 || f[3].len - 44 >= sizeof(digits)) {
            abort();
        }
        memcpy(digits, f[3].p + 44, f[3].len - 44);
        if (gw_credential_backend_token_make(
                f[0].p, f[0].len, f[1].p, f[1].len, f[2].p, f[2].len,
                strtoll(digits, NULL, 10), tok, sizeof(tok)) != 0 ||
            !gw_credential_equal(tok, strlen(tok), f[3].p, f[3].len)) {
            abort();
        }
    }
    if (gw_credential_backend_token_make(f[0].p, f[0].len, f[1].p, f[1].len,
                                         f[2].p, f[2].len, ts, tok,
                                         sizeof(tok)) == 0 &&
        gw_credential_backend_token_verify(f[0].p, f[0].len, f[1].p, f[1].len,
                                           f[2].p, f[2].len, tok, strlen(tok),
                                           ts, 0) != 0) {
        abort();
    }
}

static void check_daily(const struct field *f, int64_t now)
{
    char want[3][GW_CREDENTIAL_DAILY_TOKEN_LEN + 1];
    int made = 0, matched = 0, rc;

    if (now < INT64_MIN + DAY || now > INT64_MAX - DAY) {
        return;
    }
    for (int d = 0; d < 3; d++) {
        if (gw_credential_daily_token_make(f[0].p, f[0].len,
                                           now + (d - 1) * DAY, want[d],
                                           sizeof(want[d])) == 0) {
            made++;
            matched |=
                gw_credential_equal(want[d], strlen(want[d]), f[3].p, f[3].len);
        }
    }
    rc = gw_credential_daily_token_verify(f[0].p, f[0].len, now, f[3].p,
                                          f[3].len);
    if ((rc == 0 && !matched) || (made == 3 && matched && rc != 0)) {
        abort();
    }
    if (made == 3 &&
        gw_credential_daily_token_verify(f[0].p, f[0].len, now, want[1],
                                         strlen(want[1])) != 0) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct field f[NFIELDS] = {{NULL, 0}};
    uint64_t t = 0;

    if (size < 8) {
        return 0;
    }
    for (int i = 0; i < 8; i++) {
        t = t << 8 | data[i];
    }
    split(data + 8, size - 8, f);
    check_password(f);
    check_backend(f, (int64_t)t);
    check_daily(f, (int64_t)t);
    if (gw_credential_equal(f[1].p, f[1].len, f[2].p, f[2].len) !=
        (f[1].len == f[2].len &&
         (f[1].len == 0 || memcmp(f[1].p, f[2].p, f[1].len) == 0))) {
        abort();
    }
    for (int i = 0; i < NFIELDS; i++) {
        free(f[i].p);
    }
    return 0;
}
