/*
 * Credentials: device password, backend token and daily token against
 * vectors made by the openssl tool (tests/vectors/crypto/), plus the
 * inputs every verify must refuse.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "crypto/credential.h"

#define VEC_DIR   GW_SOURCE_DIR "/tests/vectors/crypto/"
#define MAX_CASES 16
#define MAX_FIELD 128
#define DAY       86400

/* One vector line: up to five tab-separated fields. */
struct vec {
    char f[5][MAX_FIELD];
    size_t n;
};

/* Reads a vector file: '#' lines are comments; returns the case count. */
static size_t load(const char *name, struct vec *v, size_t want_fields)
{
    char path[512];
    char *line = NULL;
    size_t cap = 0, count = 0;
    ssize_t len;
    FILE *fp;

    snprintf(path, sizeof(path), "%s%s", VEC_DIR, name);
    fp = fopen(path, "r");
    assert_non_null(fp);
    while ((len = getline(&line, &cap, fp)) > 0) {
        char *p = line;
        if (line[0] == '#' || line[0] == '\n') {
            continue;
        }
        assert_true(count < MAX_CASES);
        line[strcspn(line, "\n")] = '\0';
        v[count].n = 0;
        while (p != NULL && v[count].n < 5) {
            char *tab = strchr(p, '\t');
            size_t flen = tab != NULL ? (size_t)(tab - p) : strlen(p);
            assert_true(flen < MAX_FIELD);
            memcpy(v[count].f[v[count].n], p, flen);
            v[count].f[v[count].n][flen] = '\0';
            v[count].n++;
            p = tab != NULL ? tab + 1 : NULL;
        }
        assert_int_equal(v[count].n, want_fields);
        count++;
    }
    free(line);
    fclose(fp);
    return count;
}

#define S(x) (x), strlen(x)

/* Presented values derived from a good one, all of which must fail. */
struct mangled {
    char text[MAX_FIELD + 2];
    size_t len;
};

/* Builds tampered, truncated, extended and empty variants of good. */
static size_t mangle(const char *good, struct mangled *m)
{
    size_t len = strlen(good), n = 0;
    const size_t flips[] = {0, len / 2, len - 1};

    for (size_t i = 0; i < 3; i++) {
        memcpy(m[n].text, good, len);
        m[n].text[flips[i]] ^= 0x01; /* stays printable */
        m[n++].len = len;
    }
    memcpy(m[n].text, good, len);
    m[n++].len = len - 1; /* truncated */
    memcpy(m[n].text, good, len);
    m[n].text[len] = 'A';
    m[n++].len = len + 1; /* extended */
    m[n++].len = 0;       /* empty */
    return n;
}

static void test_password_vectors(void **state)
{
    static struct vec v[MAX_CASES];
    struct mangled m[8];
    char out[GW_CREDENTIAL_PASSWORD_LEN + 1];
    size_t n = load("device_password.txt", v, 4);

    (void)state;
    assert_int_equal(n, 4);
    for (size_t i = 0; i < n; i++) {
        const char *key = v[i].f[0], *cid = v[i].f[1], *user = v[i].f[2];
        const char *pw = v[i].f[3];
        assert_int_equal(gw_credential_password_make(S(key), S(cid), S(user),
                                                     out, sizeof(out)),
                         0);
        assert_string_equal(out, pw);
        assert_int_equal(strlen(out), GW_CREDENTIAL_PASSWORD_LEN);
        assert_int_equal(
            gw_credential_password_verify(S(key), S(cid), S(user), S(pw)), 0);
        size_t nm = mangle(pw, m);
        for (size_t j = 0; j < nm; j++) {
            assert_int_equal(gw_credential_password_verify(
                                 S(key), S(cid), S(user), m[j].text, m[j].len),
                             GW_EAUTH);
        }
        /* the right password for another identity or key */
        assert_int_equal(gw_credential_password_verify(
                             S(key), cid, strlen(cid) - 1, S(user), S(pw)),
                         GW_EAUTH);
        assert_int_equal(
            gw_credential_password_verify(S(key), S(cid), S("x"), S(pw)),
            GW_EAUTH);
        assert_int_equal(
            gw_credential_password_verify(S("K"), S(cid), S(user), S(pw)),
            GW_EAUTH);
    }
}

static void test_password_arguments(void **state)
{
    char out[GW_CREDENTIAL_PASSWORD_LEN + 1];

    (void)state;
    assert_int_equal(gw_credential_password_make(S("k"), S("c"), S("u"), out,
                                                 sizeof(out) - 1),
                     GW_ENOSPC);
    assert_int_equal(
        gw_credential_password_make(S("k"), S("c"), S("u"), NULL, 64),
        GW_ENOSPC);
    /* an empty key must never authenticate anyone */
    assert_int_equal(
        gw_credential_password_make("", 0, S("c"), S("u"), out, sizeof(out)),
        GW_EINVAL);
    assert_int_equal(
        gw_credential_password_verify(NULL, 0, S("c"), S("u"), S("p")),
        GW_EINVAL);
    assert_int_equal(
        gw_credential_password_verify(S("k"), NULL, 3, S("u"), S("p")),
        GW_EINVAL);
    assert_int_equal(
        gw_credential_password_verify(S("k"), S("c"), S("u"), NULL, 44),
        GW_EINVAL);
    assert_int_equal(
        gw_credential_password_verify(S("k"), S("c"), S("u"), NULL, 0),
        GW_EAUTH);
    /* an empty username is legal MQTT and still signed */
    assert_int_equal(
        gw_credential_password_make(S("k"), S("c"), NULL, 0, out, sizeof(out)),
        0);
    assert_int_equal(
        gw_credential_password_verify(S("k"), S("c"), NULL, 0, S(out)), 0);
}

static void test_backend_vectors(void **state)
{
    static struct vec v[MAX_CASES];
    struct mangled m[8];
    char out[GW_CREDENTIAL_BACKEND_TOKEN_MAX];
    size_t n = load("backend_token.txt", v, 5);
    int defaults = 0;

    (void)state;
    assert_int_equal(n, 6);
    for (size_t i = 0; i < n; i++) {
        const char *sec = v[i].f[0], *cid = v[i].f[1], *dev = v[i].f[2];
        const char *tok = v[i].f[4];
        int64_t ts = strtoll(v[i].f[3], NULL, 10);
        const int64_t age = GW_CREDENTIAL_BACKEND_MAX_AGE;

        defaults += strcmp(cid, GW_CREDENTIAL_DEFAULT_CLIENT_ID) == 0;
        assert_int_equal(gw_credential_backend_token_make(
                             S(sec), S(cid), S(dev), ts, out, sizeof(out)),
                         0);
        assert_string_equal(out, tok);
        /* exact fit, and one byte short */
        assert_int_equal(gw_credential_backend_token_make(
                             S(sec), S(cid), S(dev), ts, out, strlen(tok) + 1),
                         0);
        assert_int_equal(gw_credential_backend_token_make(
                             S(sec), S(cid), S(dev), ts, out, strlen(tok)),
                         GW_ENOSPC);
        assert_int_equal(gw_credential_backend_token_verify(
                             S(sec), S(cid), S(dev), S(tok), ts, 0),
                         0);
        assert_int_equal(gw_credential_backend_token_verify(
                             S(sec), S(cid), S(dev), S(tok), ts + age, age),
                         0);
        assert_int_equal(gw_credential_backend_token_verify(
                             S(sec), S(cid), S(dev), S(tok), ts + age + 1, age),
                         GW_EAUTH);
        if (ts > age) { /* from the future */
            assert_int_equal(
                gw_credential_backend_token_verify(S(sec), S(cid), S(dev),
                                                   S(tok), ts - age - 1, age),
                GW_EAUTH);
        }
        /* signed for someone else */
        assert_int_equal(
            gw_credential_backend_token_verify(
                S(sec), S(cid), S("00:00:00:00:00:00"), S(tok), ts, age),
            GW_EAUTH);
        assert_int_equal(gw_credential_backend_token_verify(
                             S("other"), S(cid), S(dev), S(tok), ts, age),
                         GW_EAUTH);
        /* any mangling fails, as bad shape or bad signature */
        size_t nm = mangle(tok, m);
        for (size_t j = 0; j < nm; j++) {
            assert_true(
                gw_credential_backend_token_verify(
                    S(sec), S(cid), S(dev), m[j].text, m[j].len, ts, age) < 0);
        }
        /* the first flip lands in the signature: an auth failure */
        assert_int_equal(gw_credential_backend_token_verify(S(sec), S(cid),
                                                            S(dev), m[0].text,
                                                            m[0].len, ts, age),
                         GW_EAUTH);
    }
    assert_true(defaults >= 2);
}

/* Token shapes the parser must refuse before any signature check. */
static const char *const malformed_tokens[] = {
    "",
    "abc",
    "h8e3SL0nY9RZkdyBi-slcubwwKc5y0LnNLPYA0QNGdc",
    "h8e3SL0nY9RZkdyBi-slcubwwKc5y0LnNLPYA0QNGdc.",
    "h8e3SL0nY9RZkdyBi-slcubwwKc5y0LnNLPYA0QNGd.1735689600",
    "h8e3SL0nY9RZkdyBi-slcubwwKc5y0LnNLPYA0QNGdc=.1735689600",
    "h8e3SL0nY9RZkdyBi-slcubwwKc5y0LnNLPYA0QNGdc.+1735689600",
    "h8e3SL0nY9RZkdyBi-slcubwwKc5y0LnNLPYA0QNGdc.-1735689600",
    "h8e3SL0nY9RZkdyBi-slcubwwKc5y0LnNLPYA0QNGdc.01735689600",
    "h8e3SL0nY9RZkdyBi-slcubwwKc5y0LnNLPYA0QNGdc.1735689600 ",
    "h8e3SL0nY9RZkdyBi-slcubwwKc5y0LnNLPYA0QNGdc.17356x9600",
    "h8e3SL0nY9RZkdyBi-slcubwwKc5y0LnNLPYA0QNGdc.1735689600.1",
    "h8e3SL0nY9RZkdyBi-slcubwwKc5y0LnNLPYA0QNGdc.9223372036854775808",
    "h8e3SL0nY9RZkdyBi-slcubwwKc5y0LnNLPYA0QNGdc.12345678901234567890",
};

static void test_backend_malformed(void **state)
{
    const char *sec = "server-secret-Abc123";
    const char *cid = "0f8e3b9c-2d71-4f3a-9a6e-5b1c7d2e8f90";
    const char *dev = "a0:85:e3:f4:49:34";
    const char *good = "h8e3SL0nY9RZkdyBi-slcubwwKc5y0LnNLPYA0QNGdc.1735689600";
    char out[GW_CREDENTIAL_BACKEND_TOKEN_MAX];

    (void)state;
    assert_int_equal(gw_credential_backend_token_verify(
                         S(sec), S(cid), S(dev), S(good), 1735689600, 60),
                     0);
    for (size_t i = 0;
         i < sizeof(malformed_tokens) / sizeof(malformed_tokens[0]); i++) {
        assert_int_equal(
            gw_credential_backend_token_verify(
                S(sec), S(cid), S(dev), S(malformed_tokens[i]), 1735689600, 60),
            GW_EMALFORMED);
    }
    /* the length argument, not a NUL, ends the token */
    assert_int_equal(gw_credential_backend_token_verify(S(sec), S(cid), S(dev),
                                                        good, strlen(good) - 1,
                                                        1735689600, 60),
                     GW_EAUTH);
    assert_int_equal(gw_credential_backend_token_verify(S(sec), S(cid), S(dev),
                                                        S(good), -1, 60),
                     GW_EINVAL);
    assert_int_equal(gw_credential_backend_token_verify(
                         S(sec), S(cid), S(dev), S(good), 1735689600, -1),
                     GW_EINVAL);
    assert_int_equal(gw_credential_backend_token_verify(
                         "", 0, S(cid), S(dev), S(good), 1735689600, 60),
                     GW_EINVAL);
    assert_int_equal(gw_credential_backend_token_make(S(sec), S(cid), S(dev),
                                                      -1, out, sizeof(out)),
                     GW_EINVAL);
    /* the largest timestamp still fits the declared buffer */
    assert_int_equal(gw_credential_backend_token_make(
                         S(sec), S(cid), S(dev), INT64_MAX, out, sizeof(out)),
                     0);
    assert_int_equal(strlen(out), GW_CREDENTIAL_BACKEND_TOKEN_MAX - 1);
    assert_int_equal(gw_credential_backend_token_verify(S(sec), S(cid), S(dev),
                                                        S(out), INT64_MAX, 0),
                     0);
    assert_int_equal(gw_credential_backend_token_verify(S(sec), S(cid), S(dev),
                                                        S(out), 0, INT64_MAX),
                     0);
}

static void test_daily_vectors(void **state)
{
    static struct vec v[MAX_CASES];
    struct mangled m[8];
    char out[GW_CREDENTIAL_DAILY_TOKEN_LEN + 1];
    size_t n = load("daily_token.txt", v, 4);
    static const struct {
        int days;
        int rc;
    } shifts[] = {{-2, GW_EAUTH}, {-1, 0}, {0, 0}, {1, 0}, {2, GW_EAUTH}};

    (void)state;
    assert_int_equal(n, 6);
    for (size_t i = 0; i < n; i++) {
        const char *key = v[i].f[0], *tok = v[i].f[3];
        int64_t ts = strtoll(v[i].f[1], NULL, 10);

        assert_int_equal(
            gw_credential_daily_token_make(S(key), ts, out, sizeof(out)), 0);
        assert_string_equal(out, tok);
        for (size_t j = 0; j < sizeof(shifts) / sizeof(shifts[0]); j++) {
            assert_int_equal(gw_credential_daily_token_verify(
                                 S(key), ts + shifts[j].days * DAY, S(tok)),
                             shifts[j].rc);
        }
        size_t nm = mangle(tok, m);
        for (size_t j = 0; j < nm; j++) {
            assert_int_equal(gw_credential_daily_token_verify(
                                 S(key), ts, m[j].text, m[j].len),
                             GW_EAUTH);
        }
        for (char *p = out; *p != '\0'; p++) {
            *p = (char)(*p >= 'a' && *p <= 'f' ? *p - 'a' + 'A' : *p);
        }
        assert_int_equal(gw_credential_daily_token_verify(S(key), ts, S(out)),
                         GW_EAUTH);
        assert_int_equal(
            gw_credential_daily_token_verify(S("wrong"), ts, S(tok)), GW_EAUTH);
    }
}

/* Days are calendar dates, not 24 hour windows. */
static void test_daily_edges(void **state)
{
    const char *key = "MgmtKey-Strong9";
    /* token of 2024-12-31, from daily_token.txt */
    const char *dec31 =
        "acd37f62e9154fc72318aba48fe35f27dfb4d78e4c105dcd1eec0bf5a8040cc3";
    char out[GW_CREDENTIAL_DAILY_TOKEN_LEN + 1];

    (void)state;
    assert_int_equal(
        gw_credential_daily_token_verify(S(key), 1735775999, S(dec31)), 0);
    assert_int_equal(
        gw_credential_daily_token_verify(S(key), 1735776000, S(dec31)),
        GW_EAUTH);
    assert_int_equal(
        gw_credential_daily_token_verify(S(key), 1735516800, S(dec31)), 0);
    assert_int_equal(
        gw_credential_daily_token_verify(S(key), 1735516799, S(dec31)),
        GW_EAUTH);
    assert_int_equal(gw_credential_daily_token_make(S(key), 1735689599, out,
                                                    sizeof(out) - 1),
                     GW_ENOSPC);
    assert_int_equal(
        gw_credential_daily_token_make("", 0, 1735689599, out, sizeof(out)),
        GW_EINVAL);
    /* year 10000 has no YYYY-MM-DD */
    assert_int_equal(
        gw_credential_daily_token_make(S(key), 253402300800, out, sizeof(out)),
        GW_EINVAL);
    assert_int_equal(
        gw_credential_daily_token_verify(S(key), INT64_MAX, S(dec31)),
        GW_EINVAL);
    assert_int_equal(
        gw_credential_daily_token_verify(S(key), INT64_MIN, S(dec31)),
        GW_EINVAL);
    assert_int_equal(
        gw_credential_daily_token_verify(S(key), 1735689599, NULL, 64),
        GW_EINVAL);
}

/* One equality case: both sides and the expected answer. */
struct eq_case {
    const char *a;
    size_t alen;
    const char *b;
    size_t blen;
    bool equal;
};

static const struct eq_case eq_cases[] = {
    {"secret", 6, "secret", 6, true},
    {"secret", 6, "Secret", 6, false},
    {"secret", 6, "secreT", 6, false},
    {"secret", 6, "secre", 5, false},
    {"secre", 5, "secret", 6, false},
    {"secret", 6, "secret!", 7, false},
    {"", 0, "", 0, true},
    {NULL, 0, NULL, 0, true},
    {"x", 1, NULL, 0, false},
    {"a\0b", 3, "a\0c", 3, false}, /* NUL is data, not an end */
    {"a\0b", 3, "a\0b", 3, true},
};

static void test_equal(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(eq_cases) / sizeof(eq_cases[0]); i++) {
        const struct eq_case *c = &eq_cases[i];
        assert_int_equal(gw_credential_equal(c->a, c->alen, c->b, c->blen),
                         c->equal);
    }
    assert_string_equal(GW_CREDENTIAL_DEFAULT_CLIENT_ID, "default-client-id");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_password_vectors),
        cmocka_unit_test(test_password_arguments),
        cmocka_unit_test(test_backend_vectors),
        cmocka_unit_test(test_backend_malformed),
        cmocka_unit_test(test_daily_vectors),
        cmocka_unit_test(test_daily_edges),
        cmocka_unit_test(test_equal),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
