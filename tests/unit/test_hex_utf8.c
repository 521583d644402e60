/*
 * Hex and UTF-8 text codecs: tables of good and malformed input, plus an
 * exhaustive comparison of the UTF-8 check with a decoder written the
 * other way round (decode the code point, then judge it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec/hex.h"
#include "codec/utf8.h"

#define S(lit) lit, sizeof(lit) - 1

/* ---- hex ---- */

struct hex_encode_case {
    const char *name;
    const uint8_t *bytes;
    size_t len;
    const char *want;
};

static const uint8_t key16[16] = {0x00, 0x01, 0x23, 0x45, 0x67, 0x89,
                                  0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba,
                                  0x98, 0x76, 0x54, 0x10};

static const struct hex_encode_case hex_encode_cases[] = {
    {"empty", (const uint8_t *)"", 0, ""},
    {"one byte", (const uint8_t *)"\x0f", 1, "0f"},
    {"high bits", (const uint8_t *)"\xff\x80", 2, "ff80"},
    {"key", key16, 16, "000123456789abcdeffedcba98765410"},
};

static void test_hex_encode_table(void **state)
{
    (void)state;
    for (size_t i = 0;
         i < sizeof(hex_encode_cases) / sizeof(hex_encode_cases[0]); i++) {
        const struct hex_encode_case *c = &hex_encode_cases[i];
        size_t need = 2 * c->len + 1;
        char *out = malloc(need);

        assert_non_null(out);
        /* Exactly 2 * len + 1 is enough (heap-exact: ASan checks it). */
        assert_int_equal(gw_hex_encode(c->bytes, c->len, out, need), 0);
        assert_string_equal(out, c->want);
        /* One byte short, or no room at all, is refused. */
        assert_int_equal(gw_hex_encode(c->bytes, c->len, out, need - 1),
                         GW_ENOSPC);
        assert_int_equal(gw_hex_encode(c->bytes, c->len, out, 0), GW_ENOSPC);
        assert_int_equal(gw_hex_encode(c->bytes, c->len, NULL, need),
                         GW_ENOSPC);
        free(out);
    }
}

struct hex_decode_case {
    const char *name;
    const char *text;
    size_t text_len;
    size_t out_len;
    int err;
    const char *want; /* out_len bytes when err == 0 */
};

static const struct hex_decode_case hex_decode_cases[] = {
    {"empty", S(""), 0, 0, ""},
    {"lower", S("00ff"), 2, 0, "\x00\xff"},
    {"upper", S("ABCDEF"), 3, 0, "\xab\xcd\xef"},
    {"mixed case", S("aBcD"), 2, 0, "\xab\xcd"},
    {"every digit", S("0123456789abcdefABCDEF"), 11, 0,
     "\x01\x23\x45\x67\x89\xab\xcd\xef\xab\xcd\xef"},
    {"16-byte key", S("000123456789abcdeffedcba98765410"), 16, 0,
     "\x00\x01\x23\x45\x67\x89\xab\xcd\xef\xfe\xdc\xba\x98\x76\x54\x10"},
    {"odd length", S("abc"), 1, GW_EMALFORMED, NULL},
    {"odd and wrong size", S("abc"), 16, GW_EMALFORMED, NULL},
    {"one digit", S("a"), 0, GW_EMALFORMED, NULL},
    {"g", S("0g"), 1, GW_EMALFORMED, NULL},
    {"G", S("G0"), 1, GW_EMALFORMED, NULL},
    {"space", S("0 "), 1, GW_EMALFORMED, NULL},
    {"0x prefix", S("0x12"), 2, GW_EMALFORMED, NULL},
    {"colon", S("00:1"), 2, GW_EMALFORMED, NULL},
    {"NUL", S("0\0"), 1, GW_EMALFORMED, NULL},
    {"high byte", S("\xc3\xa9"), 1, GW_EMALFORMED, NULL},
    {"digit neighbours", S("/:@G`g"), 3, GW_EMALFORMED, NULL},
    {"bad digit at the end", S("00000000000000000000000000000z"), 15,
     GW_EMALFORMED, NULL},
    {"short key", S("000123456789abcdeffedcba987654"), 16, GW_EINVAL, NULL},
    {"long key", S("000123456789abcdeffedcba9876541011"), 16, GW_EINVAL, NULL},
    {"size checked before digits", S("zz"), 2, GW_EINVAL, NULL},
};

static void test_hex_decode_table(void **state)
{
    (void)state;
    for (size_t i = 0;
         i < sizeof(hex_decode_cases) / sizeof(hex_decode_cases[0]); i++) {
        const struct hex_decode_case *c = &hex_decode_cases[i];
        char *text = malloc(c->text_len > 0 ? c->text_len : 1);
        uint8_t *out = malloc(c->out_len > 0 ? c->out_len : 1);
        int err;

        assert_non_null(text);
        assert_non_null(out);
        memcpy(text, c->text, c->text_len);
        err = gw_hex_decode(text, c->text_len, out, c->out_len);
        if (err != c->err) {
            print_message("case: %s\n", c->name);
        }
        assert_int_equal(err, c->err);
        if (err == 0) {
            assert_memory_equal(out, c->want, c->out_len);
        }
        free(text);
        free(out);
    }
}

static void test_hex_null(void **state)
{
    uint8_t out[1];

    (void)state;
    assert_int_equal(gw_hex_decode(NULL, 2, out, 1), GW_EMALFORMED);
}

/* decode(encode(x)) == x, every byte value in every position. */
static void test_hex_round_trip(void **state)
{
    uint8_t bytes[256], back[256];
    char text[513];

    (void)state;
    for (size_t i = 0; i < sizeof(bytes); i++) {
        bytes[i] = (uint8_t)(i * 37 + 11);
    }
    for (size_t len = 0; len <= sizeof(bytes); len += 17) {
        assert_int_equal(gw_hex_encode(bytes, len, text, sizeof(text)), 0);
        assert_int_equal(strlen(text), 2 * len);
        assert_int_equal(gw_hex_decode(text, 2 * len, back, len), 0);
        assert_memory_equal(back, bytes, len);
    }
}

/* ---- UTF-8 ---- */

struct utf8_case {
    const char *name;
    const char *text;
    size_t len;
    bool valid;
};

static const struct utf8_case utf8_cases[] = {
    {"empty", S(""), true},
    {"ascii", S("hello, world"), true},
    {"NUL allowed", S("a\0b"), true},
    {"U+0080", S("\xc2\x80"), true},
    {"U+07FF", S("\xdf\xbf"), true},
    {"U+0800", S("\xe0\xa0\x80"), true},
    {"U+D7FF", S("\xed\x9f\xbf"), true},
    {"U+E000", S("\xee\x80\x80"), true},
    {"U+FFFF", S("\xef\xbf\xbf"), true},
    {"U+10000", S("\xf0\x90\x80\x80"), true},
    {"U+10FFFF", S("\xf4\x8f\xbf\xbf"), true},
    {"greek", S("\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5"), true},
    {"lone continuation", S("\x80"), false},
    {"continuation 0xbf", S("a\xbf"), false},
    {"overlong NUL", S("\xc0\x80"), false},
    {"overlong '/' c1", S("\xc1\xbf"), false},
    {"overlong 3-byte", S("\xe0\x80\xaf"), false},
    {"overlong U+07FF", S("\xe0\x9f\xbf"), false},
    {"overlong 4-byte", S("\xf0\x8f\xbf\xbf"), false},
    {"surrogate D800", S("\xed\xa0\x80"), false},
    {"surrogate DFFF", S("\xed\xbf\xbf"), false},
    {"surrogate pair", S("\xed\xa0\x80\xed\xb0\x80"), false},
    {"U+110000", S("\xf4\x90\x80\x80"), false},
    {"lead f5", S("\xf5\x80\x80\x80"), false},
    {"lead f8 (5-byte)", S("\xf8\x88\x80\x80\x80"), false},
    {"lead fe", S("\xfe"), false},
    {"lead ff", S("\xff"), false},
    {"cut 2-byte", S("\xc3"), false},
    {"cut 3-byte", S("\xe2\x82"), false},
    {"cut 4-byte", S("\xf0\x9f\x98"), false},
    {"cut after text", S("abc\xe4\xb8"), false},
    {"bad second byte", S("\xc3\x28"), false},
    {"bad third byte", S("\xe2\x82\x28"), false},
    {"bad fourth byte", S("\xf0\x9f\x98\x28"), false},
    {"ascii after lead", S("\xe2(\xa1"), false},
};

static void test_utf8_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(utf8_cases) / sizeof(utf8_cases[0]); i++) {
        const struct utf8_case *c = &utf8_cases[i];
        char *buf = malloc(c->len > 0 ? c->len : 1);

        assert_non_null(buf);
        memcpy(buf, c->text, c->len);
        if (gw_utf8_valid(buf, c->len) != c->valid) {
            print_message("case: %s\n", c->name);
        }
        assert_int_equal(gw_utf8_valid(buf, c->len), c->valid);
        free(buf);
    }
}

/* The validator must stop at len even if the sequence goes on after it. */
static void test_utf8_stops_at_len(void **state)
{
    (void)state;
    assert_false(gw_utf8_valid("\xc3\xa9", 1));
    assert_false(gw_utf8_valid("\xf0\x9f\x98\x80", 3));
    assert_true(gw_utf8_valid("ab\xff", 2));
    assert_true(gw_utf8_valid(NULL, 0));
}

/*
 * Reference: decode with bit masks, then refuse overlong forms, surrogates
 * and values past U+10FFFF by their code point (RFC 3629 section 3).
 */
static bool ref_valid(const uint8_t *p, size_t len)
{
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};

    for (size_t i = 0; i < len;) {
        size_t n;
        uint32_t cp;

        if ((p[i] & 0x80) == 0) {
            i++;
            continue;
        } else if ((p[i] & 0xe0) == 0xc0) {
            n = 2;
            cp = p[i] & 0x1fu;
        } else if ((p[i] & 0xf0) == 0xe0) {
            n = 3;
            cp = p[i] & 0x0fu;
        } else if ((p[i] & 0xf8) == 0xf0) {
            n = 4;
            cp = p[i] & 0x07u;
        } else {
            return false;
        }
        if (len - i < n) {
            return false;
        }
        for (size_t k = 1; k < n; k++) {
            if ((p[i + k] & 0xc0) != 0x80) {
                return false;
            }
            cp = cp << 6 | (p[i + k] & 0x3fu);
        }
        if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
            return false;
        }
        i += n;
    }
    return true;
}

/* Every string of one, two and three bytes: 16.8 million of them. */
static void test_utf8_exhaustive_short(void **state)
{
    uint8_t b[3];
    size_t mismatches = 0, valid = 0;

    (void)state;
    for (uint32_t v = 0; v < 1u << 24; v++) {
        b[0] = (uint8_t)(v >> 16);
        b[1] = (uint8_t)(v >> 8);
        b[2] = (uint8_t)v;
        if (gw_utf8_valid((const char *)b, 3) != ref_valid(b, 3)) {
            mismatches++;
        }
        valid += ref_valid(b, 3);
        if (v < 1u << 16) {
            /* Two bytes and one byte, from the low end of v. */
            if (gw_utf8_valid((const char *)b + 1, 2) != ref_valid(b + 1, 2) ||
                gw_utf8_valid((const char *)b + 2, 1) != ref_valid(b + 2, 1)) {
                mismatches++;
            }
        }
    }
    assert_int_equal(mismatches, 0);
    /* 128^3 ascii + 2 * 128 * 1920 mixed + 61440 three-byte sequences. */
    assert_int_equal(valid, 128u * 128 * 128 + 2u * 128 * 1920 + 61440);
}

/*
 * Four-byte strings: every lead and second byte, with the third and fourth
 * bytes drawn from the values where ranges change.
 */
static void test_utf8_exhaustive_four(void **state)
{
    static const uint8_t edges[] = {0x00, 0x41, 0x7f, 0x80, 0x81, 0x8f,
                                    0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc2,
                                    0xe0, 0xf0, 0xf4, 0xf5, 0xff};
    const size_t ne = sizeof(edges);
    size_t mismatches = 0;

    (void)state;
    for (uint32_t ab = 0; ab < 1u << 16; ab++) {
        for (size_t c = 0; c < ne; c++) {
            for (size_t d = 0; d < ne; d++) {
                uint8_t b[4] = {(uint8_t)(ab >> 8), (uint8_t)ab, edges[c],
                                edges[d]};
                if (gw_utf8_valid((const char *)b, 4) != ref_valid(b, 4)) {
                    mismatches++;
                }
            }
        }
    }
    assert_int_equal(mismatches, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hex_encode_table),
        cmocka_unit_test(test_hex_decode_table),
        cmocka_unit_test(test_hex_null),
        cmocka_unit_test(test_hex_round_trip),
        cmocka_unit_test(test_utf8_table),
        cmocka_unit_test(test_utf8_stops_at_len),
        cmocka_unit_test(test_utf8_exhaustive_short),
        cmocka_unit_test(test_utf8_exhaustive_four),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
