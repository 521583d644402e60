/* Backend audio framings v2, v3 and raw: exact bytes, limits, round trips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec/audio_frame.h"

#define BAD_FRAMING ((enum gw_framing)42)

/* Hex digits with optional spaces -> bytes; returns the byte count. */
static size_t unhex(const char *text, uint8_t *out, size_t cap)
{
    size_t n = 0;
    int hi = -1;

    for (const char *p = text; *p != '\0'; p++) {
        int v;
        if (*p == ' ') {
            continue;
        }
        v = (*p >= '0' && *p <= '9') ? *p - '0' : (*p | 0x20) - 'a' + 10;
        if (hi < 0) {
            hi = v;
            continue;
        }
        assert_true(n < cap);
        out[n++] = (uint8_t)(hi << 4 | v);
        hi = -1;
    }
    assert_int_equal(hi, -1);
    return n;
}

static void test_header_len(void **state)
{
    (void)state;
    assert_int_equal(gw_audio_frame_header_len(GW_FRAMING_V2), 16);
    assert_int_equal(gw_audio_frame_header_len(GW_FRAMING_V3), 4);
    assert_int_equal(gw_audio_frame_header_len(GW_FRAMING_RAW), 0);
    assert_int_equal(gw_audio_frame_header_len(BAD_FRAMING), 0);
}

struct encode_case {
    const char *name;
    enum gw_framing framing;
    uint32_t ts;
    const char *payload; /* hex */
    const char *want;    /* hex of the whole frame */
};

static const struct encode_case encode_cases[] = {
    {"v2 uplink", GW_FRAMING_V2, 0x01020304, "aabbcc",
     "00000000 00000000 01020304 00000003 aabbcc"},
    {"v2 empty", GW_FRAMING_V2, 0, "", "00000000 00000000 00000000 00000000"},
    {"v2 max ts", GW_FRAMING_V2, 0xffffffff, "58",
     "00000000 00000000 ffffffff 00000001 58"},
    {"v3", GW_FRAMING_V3, 0x01020304, "aabbcc", "00 00 0003 aabbcc"},
    {"v3 empty", GW_FRAMING_V3, 7, "", "00 00 0000"},
    {"raw", GW_FRAMING_RAW, 0x01020304, "aabbcc", "aabbcc"},
    {"raw empty", GW_FRAMING_RAW, 0, "", ""},
};

static void test_encode_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(encode_cases) / sizeof(encode_cases[0]);
         i++) {
        const struct encode_case *c = &encode_cases[i];
        uint8_t payload[64], want[64], out[64], hdr[16];
        size_t plen = unhex(c->payload, payload, sizeof(payload));
        size_t wlen = unhex(c->want, want, sizeof(want));
        size_t out_len = 0, hdr_len = 99;

        assert_int_equal(gw_audio_frame_encode(c->framing, c->ts, payload, plen,
                                               out, sizeof(out), &out_len),
                         0);
        assert_int_equal(out_len, wlen);
        assert_memory_equal(out, want, wlen);

        /* Exactly enough room is enough; one byte less is not. */
        assert_int_equal(gw_audio_frame_encode(c->framing, c->ts, payload, plen,
                                               out, wlen, &out_len),
                         0);
        if (wlen > 0) {
            assert_int_equal(gw_audio_frame_encode(c->framing, c->ts, payload,
                                                   plen, out, wlen - 1,
                                                   &out_len),
                             GW_ENOSPC);
        }

        /* The header alone is the frame minus its payload. */
        assert_int_equal(gw_audio_frame_header(c->framing, c->ts, plen, hdr,
                                               sizeof(hdr), &hdr_len),
                         0);
        assert_int_equal(hdr_len, wlen - plen);
        assert_int_equal(hdr_len, gw_audio_frame_header_len(c->framing));
        assert_memory_equal(hdr, want, hdr_len);
    }
}

static void test_encode_errors(void **state)
{
    static uint8_t payload[GW_AUDIO_FRAME_MAX_PAYLOAD + 1];
    static uint8_t out[GW_AUDIO_FRAME_MAX_HEADER_LEN + sizeof(payload)];
    static const enum gw_framing all[] = {GW_FRAMING_V2, GW_FRAMING_V3,
                                          GW_FRAMING_RAW};
    uint8_t hdr[16];
    size_t n = 12345;

    (void)state;
    for (size_t i = 0; i < 3; i++) {
        /* The limit itself is fine, one more is not. */
        assert_int_equal(gw_audio_frame_encode(all[i], 1, payload,
                                               GW_AUDIO_FRAME_MAX_PAYLOAD, out,
                                               sizeof(out), &n),
                         0);
        assert_int_equal(n, gw_audio_frame_header_len(all[i]) +
                                GW_AUDIO_FRAME_MAX_PAYLOAD);
        assert_int_equal(gw_audio_frame_encode(all[i], 1, payload,
                                               sizeof(payload), out,
                                               sizeof(out), &n),
                         GW_ETOOBIG);
        assert_int_equal(gw_audio_frame_header(all[i], 1, sizeof(payload), hdr,
                                               sizeof(hdr), &n),
                         GW_ETOOBIG);
        assert_int_equal(
            gw_audio_frame_header(all[i], 1, SIZE_MAX, hdr, sizeof(hdr), &n),
            GW_ETOOBIG);
        assert_int_equal(
            gw_audio_frame_encode(all[i], 1, payload, 1, NULL, 0, &n),
            GW_ENOSPC);
        assert_int_equal(
            gw_audio_frame_encode(all[i], 1, NULL, 1, out, sizeof(out), &n),
            GW_EINVAL);
    }
    assert_int_equal(
        gw_audio_frame_encode(BAD_FRAMING, 1, payload, 1, out, sizeof(out), &n),
        GW_EINVAL);
    assert_int_equal(
        gw_audio_frame_header(BAD_FRAMING, 1, 1, hdr, sizeof(hdr), &n),
        GW_EINVAL);
    assert_int_equal(gw_audio_frame_header(GW_FRAMING_V2, 1, 1, hdr, 15, &n),
                     GW_ENOSPC);
    assert_int_equal(gw_audio_frame_header(GW_FRAMING_V3, 1, 1, hdr, 3, &n),
                     GW_ENOSPC);
    assert_int_equal(gw_audio_frame_header(GW_FRAMING_V3, 1, 1, NULL, 4, &n),
                     GW_ENOSPC);
    /* raw has no header, so no buffer is needed for it. */
    assert_int_equal(gw_audio_frame_header(GW_FRAMING_RAW, 1, 1, NULL, 0, &n),
                     0);
    assert_int_equal(n, 0);
}

/* The zero-copy path: the payload already sits after the header's room. */
static void test_encode_in_place(void **state)
{
    static const enum gw_framing all[] = {GW_FRAMING_V2, GW_FRAMING_V3,
                                          GW_FRAMING_RAW};

    (void)state;
    for (size_t i = 0; i < 3; i++) {
        uint8_t buf[16 + 5];
        size_t hlen = gw_audio_frame_header_len(all[i]), n = 0;
        const uint8_t *payload;
        uint32_t ts;

        memcpy(buf + hlen, "hello", 5);
        assert_int_equal(gw_audio_frame_encode(all[i], 99, buf + hlen, 5, buf,
                                               sizeof(buf), &n),
                         0);
        assert_int_equal(n, hlen + 5);
        assert_int_equal(
            gw_audio_frame_decode(all[i], buf, n, &ts, &payload, &n), 0);
        assert_int_equal(n, 5);
        assert_memory_equal(payload, "hello", 5);
    }
}

struct decode_case {
    const char *name;
    enum gw_framing framing;
    const char *frame; /* hex */
    size_t filler;     /* extra 0x5a bytes appended */
    int err;
    uint32_t ts;
    size_t payload_len;
};

static const struct decode_case decode_cases[] = {
    /* v2 downlink as the xiaozhi server writes it: bytes 0..7 carry its
     * own type, length and sequence, which must not matter. */
    {"v2 server downlink", GW_FRAMING_V2,
     "01 00 0005 00000007 6501f2a3 00000005 0102030405", 0, 0, 0x6501f2a3, 5},
    {"v2 garbage in 0..7", GW_FRAMING_V2,
     "ffffffff ffffffff 00000001 00000002 abcd", 0, 0, 1, 2},
    {"v2 empty payload", GW_FRAMING_V2, "00000000 00000000 00000000 00000000",
     0, 0, 0, 0},
    {"v2 largest payload", GW_FRAMING_V2, "00000000 00000000 00000009 000005cc",
     1484, 0, 9, 1484},
    {"v2 zero bytes", GW_FRAMING_V2, "", 0, GW_ETRUNC, 0, 0},
    {"v2 fifteen bytes", GW_FRAMING_V2, "00000000 00000000 00000000 000000", 0,
     GW_ETRUNC, 0, 0},
    {"v2 payload short", GW_FRAMING_V2, "00000000 00000000 00000000 0000000a",
     5, GW_ETRUNC, 0, 0},
    {"v2 payload short by one", GW_FRAMING_V2,
     "00000000 00000000 00000000 0000000a", 9, GW_ETRUNC, 0, 0},
    {"v2 trailing bytes", GW_FRAMING_V2, "00000000 00000000 00000000 00000003",
     5, GW_EMALFORMED, 0, 0},
    {"v2 oversized", GW_FRAMING_V2, "00000000 00000000 00000000 000005cd", 1485,
     GW_ETOOBIG, 0, 0},
    {"v2 oversized declared only", GW_FRAMING_V2,
     "00000000 00000000 00000000 ffffffff", 3, GW_ETOOBIG, 0, 0},
    {"v2 length over 2^31", GW_FRAMING_V2,
     "00000000 00000000 00000000 80000000", 0, GW_ETOOBIG, 0, 0},
    {"v3", GW_FRAMING_V3, "00 00 0003 aabbcc", 0, 0, 0, 3},
    {"v3 reserved ignored", GW_FRAMING_V3, "00 ff 0001 aa", 0, 0, 0, 1},
    {"v3 empty payload", GW_FRAMING_V3, "00 00 0000", 0, 0, 0, 0},
    {"v3 largest payload", GW_FRAMING_V3, "00 00 05cc", 1484, 0, 0, 1484},
    {"v3 zero bytes", GW_FRAMING_V3, "", 0, GW_ETRUNC, 0, 0},
    {"v3 three bytes", GW_FRAMING_V3, "00 00 00", 0, GW_ETRUNC, 0, 0},
    {"v3 type 1 (json)", GW_FRAMING_V3, "01 00 0001 7b", 0, GW_EPROTO, 0, 0},
    {"v3 type 0xff", GW_FRAMING_V3, "ff 00 0000", 0, GW_EPROTO, 0, 0},
    {"v3 payload short", GW_FRAMING_V3, "00 00 0004 aabbcc", 0, GW_ETRUNC, 0,
     0},
    {"v3 trailing bytes", GW_FRAMING_V3, "00 00 0002 aabbcc", 0, GW_EMALFORMED,
     0, 0},
    {"v3 oversized", GW_FRAMING_V3, "00 00 05cd", 1485, GW_ETOOBIG, 0, 0},
    {"v3 u16 max declared", GW_FRAMING_V3, "00 00 ffff", 10, GW_ETOOBIG, 0, 0},
    {"raw", GW_FRAMING_RAW, "f8fffe", 0, 0, 0, 3},
    {"raw empty", GW_FRAMING_RAW, "", 0, 0, 0, 0},
    {"raw largest", GW_FRAMING_RAW, "", 1484, 0, 0, 1484},
    {"raw oversized", GW_FRAMING_RAW, "", 1485, GW_ETOOBIG, 0, 0},
    /* pcm16: the whole message, any length (the WebSocket layer bounds
     * it), odd counts judged by the PCM bridge. */
    {"pcm16", GW_FRAMING_PCM16, "0100 ff7f", 0, 0, 0, 4},
    {"pcm16 odd", GW_FRAMING_PCM16, "010203", 0, 0, 0, 3},
    {"pcm16 empty", GW_FRAMING_PCM16, "", 0, 0, 0, 0},
    {"pcm16 past the Opus limit", GW_FRAMING_PCM16, "", 8192, 0, 0, 8192},
    {"unknown framing", BAD_FRAMING, "00", 0, GW_EINVAL, 0, 0},
};

static void test_decode_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(decode_cases) / sizeof(decode_cases[0]);
         i++) {
        const struct decode_case *c = &decode_cases[i];
        uint8_t head[64];
        size_t hlen = unhex(c->frame, head, sizeof(head));
        size_t len = hlen + c->filler;
        /* Exact size on the heap: ASan catches any read past len. */
        uint8_t *buf = malloc(len > 0 ? len : 1);
        const uint8_t *payload = NULL;
        size_t plen = 777;
        uint32_t ts = 777;
        int err;

        assert_non_null(buf);
        memcpy(buf, head, hlen);
        memset(buf + hlen, 0x5a, c->filler);
        err = gw_audio_frame_decode(c->framing, buf, len, &ts, &payload, &plen);
        if (err != c->err) {
            print_message("case: %s\n", c->name);
        }
        assert_int_equal(err, c->err);
        if (err == 0) {
            assert_int_equal(ts, c->ts);
            assert_int_equal(plen, c->payload_len);
            /* Zero copy: the payload is the tail of the frame. */
            assert_ptr_equal(payload, buf + len - plen);
        } else {
            assert_int_equal(ts, 777);
            assert_int_equal(plen, 777);
            assert_null(payload);
        }
        free(buf);
    }
}

static void test_decode_null(void **state)
{
    const uint8_t *payload;
    size_t plen;
    uint32_t ts;

    (void)state;
    assert_int_equal(
        gw_audio_frame_decode(GW_FRAMING_RAW, NULL, 0, &ts, &payload, &plen),
        GW_EINVAL);
    assert_int_equal(
        gw_audio_frame_decode(GW_FRAMING_V2, NULL, 16, &ts, &payload, &plen),
        GW_EINVAL);
}

/* pcm16 carries a device frame of PCM: up to 120 ms at 48 kHz. */
static void test_pcm16_limits(void **state)
{
    static uint8_t pcm[GW_AUDIO_FRAME_PCM16_MAX_PAYLOAD + 1];
    static uint8_t out[sizeof(pcm)];
    const uint8_t *got;
    size_t n = 0, got_len;
    uint32_t ts = 5;

    (void)state;
    assert_int_equal(gw_audio_frame_max_payload(GW_FRAMING_PCM16), 11520);
    assert_int_equal(gw_audio_frame_max_payload(GW_FRAMING_V2), 1484);
    assert_int_equal(gw_audio_frame_max_payload(GW_FRAMING_RAW), 1484);
    assert_int_equal(gw_audio_frame_max_payload(BAD_FRAMING), 0);
    assert_int_equal(gw_audio_frame_header_len(GW_FRAMING_PCM16), 0);
    memset(pcm, 0x11, sizeof(pcm));
    assert_int_equal(gw_audio_frame_encode(GW_FRAMING_PCM16, 99, pcm, 11520,
                                           out, sizeof(out), &n),
                     0);
    assert_int_equal(n, 11520);
    assert_int_equal(gw_audio_frame_encode(GW_FRAMING_PCM16, 99, pcm, 11521,
                                           out, sizeof(out), &n),
                     GW_ETOOBIG);
    assert_int_equal(gw_audio_frame_decode(GW_FRAMING_PCM16, out, 11520, &ts,
                                           &got, &got_len),
                     0);
    assert_int_equal(ts, 0); /* no timestamp in PCM */
    assert_ptr_equal(got, out);
    assert_int_equal(got_len, 11520);
}

/* decode(encode(x)) == x for every framing, size and timestamp. */
static void test_round_trip(void **state)
{
    static const enum gw_framing all[] = {GW_FRAMING_V2, GW_FRAMING_V3,
                                          GW_FRAMING_RAW};
    static const size_t sizes[] = {0, 1, 2, 3, 160, 255, 256, 1483, 1484};
    static const uint32_t stamps[] = {0, 1, 60, 0x80000000, 0xffffffff};
    static uint8_t payload[GW_AUDIO_FRAME_MAX_PAYLOAD];
    static uint8_t frame[GW_AUDIO_FRAME_MAX_HEADER_LEN + sizeof(payload)];

    (void)state;
    for (size_t i = 0; i < sizeof(payload); i++) {
        payload[i] = (uint8_t)(i * 7 + 3);
    }
    for (size_t f = 0; f < 3; f++) {
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            for (size_t t = 0; t < sizeof(stamps) / sizeof(stamps[0]); t++) {
                const uint8_t *got;
                size_t n, got_len;
                uint32_t ts;

                assert_int_equal(gw_audio_frame_encode(all[f], stamps[t],
                                                       payload, sizes[s], frame,
                                                       sizeof(frame), &n),
                                 0);
                assert_int_equal(gw_audio_frame_decode(all[f], frame, n, &ts,
                                                       &got, &got_len),
                                 0);
                assert_int_equal(got_len, sizes[s]);
                assert_memory_equal(got, payload, sizes[s]);
                /* Only v2 carries a timestamp. */
                assert_int_equal(ts, all[f] == GW_FRAMING_V2 ? stamps[t] : 0);
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_len),
        cmocka_unit_test(test_encode_table),
        cmocka_unit_test(test_encode_errors),
        cmocka_unit_test(test_encode_in_place),
        cmocka_unit_test(test_decode_table),
        cmocka_unit_test(test_decode_null),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_pcm16_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
