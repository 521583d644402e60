/* UDP audio header: packing, the firmware's checks and their order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec/udp_header.h"

/* Large enough for a 16-bit payload_len that is honest about its length. */
#define BIG (GW_UDP_HEADER_LEN + 65535)

struct parse_case {
    const char *name;
    uint8_t hdr[GW_UDP_HEADER_LEN]; /* first bytes of the datagram */
    size_t len;                     /* datagram length; bytes past the
                                       header are filler */
    int err;                        /* expected result */
};

static const struct parse_case parse_cases[] = {
    {"empty payload",
     {0x01, 0, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 0, 0, 0, 1},
     16,
     0},
    {"typical uplink",
     {0x01, 0, 0x00, 0x2a, 0x12, 0x34, 0x56, 0x78, 0, 0, 0, 0, 0, 0, 0, 7},
     16 + 42,
     0},
    {"largest payload",
     {0x01, 0, 0x05, 0xcc, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1},
     16 + 1484,
     0},
    {"flags ignored",
     {0x01, 0xff, 0x00, 0x01, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1},
     17,
     0},
    {"all ones fields",
     {0x01, 0, 0x00, 0x03, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
      0xff, 0xff, 0xff},
     19,
     0},
    {"sequence 0 is the caller's to refuse",
     {0x01, 0, 0x00, 0x00, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
     16,
     0},
    {"zero bytes", {0}, 0, GW_ETRUNC},
    {"one byte", {0x01}, 1, GW_ETRUNC},
    {"fifteen bytes", {0x01, 0, 0, 0}, 15, GW_ETRUNC},
    {"short beats wrong type", {0x02}, 15, GW_ETRUNC},
    {"type 0", {0x00, 0, 0, 0}, 16, GW_EPROTO},
    {"type 2", {0x02, 0, 0, 0}, 16, GW_EPROTO},
    {"type 0xff", {0xff, 0, 0, 0}, 16, GW_EPROTO},
    {"wrong type beats wrong length", {0x00, 0, 0x00, 0x10}, 20, GW_EPROTO},
    {"fewer bytes than declared", {0x01, 0, 0x00, 0x0a}, 16, GW_EMALFORMED},
    {"one byte missing", {0x01, 0, 0x00, 0x0a}, 25, GW_EMALFORMED},
    {"trailing byte", {0x01, 0, 0x00, 0x00}, 17, GW_EMALFORMED},
    {"oversized declared, short datagram",
     {0x01, 0, 0x05, 0xcd},
     1500,
     GW_EMALFORMED},
    {"oversized by one", {0x01, 0, 0x05, 0xcd}, 16 + 1485, GW_ETOOBIG},
    {"oversized to the u16 limit", {0x01, 0, 0xff, 0xff}, BIG, GW_ETOOBIG},
};

/* The datagram on the heap at its exact size, so ASan sees any overread. */
static uint8_t *make_datagram(const struct parse_case *c)
{
    uint8_t *buf = malloc(c->len > 0 ? c->len : 1);
    size_t n = c->len < GW_UDP_HEADER_LEN ? c->len : GW_UDP_HEADER_LEN;

    assert_non_null(buf);
    memset(buf, 0xa5, c->len);
    memcpy(buf, c->hdr, n);
    return buf;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

static void test_parse_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(parse_cases) / sizeof(parse_cases[0]); i++) {
        const struct parse_case *c = &parse_cases[i];
        uint8_t *buf = make_datagram(c);
        struct gw_udp_header h;
        int err;

        memset(&h, 0x77, sizeof(h));
        err = gw_udp_header_parse(buf, c->len, &h);
        if (err != c->err) {
            print_message("case: %s\n", c->name);
        }
        assert_int_equal(err, c->err);
        if (err == 0) {
            assert_int_equal(h.type, GW_UDP_TYPE_AUDIO);
            assert_int_equal(h.flags, c->hdr[1]);
            assert_int_equal(h.payload_len, c->len - GW_UDP_HEADER_LEN);
            assert_int_equal(h.ssrc, be32(c->hdr + 4));
            assert_int_equal(h.timestamp, be32(c->hdr + 8));
            assert_int_equal(h.sequence, be32(c->hdr + 12));
            assert_int_equal(gw_udp_header_peek_ssrc(buf), h.ssrc);
        } else {
            /* Nothing half-written on failure. */
            assert_int_equal(h.type, 0x77);
            assert_int_equal(h.ssrc, 0x77777777u);
        }
        free(buf);
    }
}

static void test_parse_null(void **state)
{
    struct gw_udp_header h;

    (void)state;
    assert_int_equal(gw_udp_header_parse(NULL, 0, &h), GW_ETRUNC);
    assert_int_equal(gw_udp_header_parse(NULL, 16, &h), GW_ETRUNC);
}

/* Every payload length must be accepted exactly at its own size. */
static void test_parse_every_length(void **state)
{
    static uint8_t buf[GW_UDP_HEADER_LEN + GW_UDP_MAX_PAYLOAD + 2];
    struct gw_udp_header h = {.type = GW_UDP_TYPE_AUDIO, .sequence = 1};

    (void)state;
    for (uint32_t n = 0; n <= GW_UDP_MAX_PAYLOAD + 1; n++) {
        h.payload_len = (uint16_t)n;
        gw_udp_header_pack(&h, buf);
        struct gw_udp_header out;
        int want = n <= GW_UDP_MAX_PAYLOAD ? 0 : GW_ETOOBIG;
        assert_int_equal(gw_udp_header_parse(buf, 16 + n, &out), want);
        assert_int_equal(gw_udp_header_parse(buf, 16 + n + 1, &out),
                         GW_EMALFORMED);
        if (n > 0) {
            assert_int_equal(gw_udp_header_parse(buf, 16 + n - 1, &out),
                             GW_EMALFORMED);
        }
    }
}

static void test_pack_bytes(void **state)
{
    static const struct gw_udp_header h = {
        .type = GW_UDP_TYPE_AUDIO,
        .flags = 0,
        .payload_len = 0x0102,
        .ssrc = 0xa1b2c3d4,
        .timestamp = 0x00010203,
        .sequence = 0xfffffffe,
    };
    static const uint8_t want[16] = {0x01, 0x00, 0x01, 0x02, 0xa1, 0xb2,
                                     0xc3, 0xd4, 0x00, 0x01, 0x02, 0x03,
                                     0xff, 0xff, 0xff, 0xfe};
    uint8_t out[16];

    (void)state;
    gw_udp_header_pack(&h, out);
    assert_memory_equal(out, want, sizeof(want));
}

/*
 * The hello's nonce is a header template; the device copies bytes 0, 1 and
 * 4..7 of it into every uplink header (docs/protocol.md section 3).
 */
static void test_nonce_template(void **state)
{
    const struct gw_udp_header tmpl = {.type = GW_UDP_TYPE_AUDIO,
                                       .ssrc = 0x0badf00d};
    static const uint8_t want[16] = {1, 0, 0, 0, 0x0b, 0xad, 0xf0, 0x0d,
                                     0, 0, 0, 0, 0,    0,    0,    0};
    uint8_t nonce[16], pkt[16 + 3] = {0};
    struct gw_udp_header h;

    (void)state;
    gw_udp_header_pack(&tmpl, nonce);
    assert_memory_equal(nonce, want, 16);

    /* What the device builds for its first uplink packet. */
    memcpy(pkt, nonce, 16);
    pkt[3] = 3;
    pkt[15] = 1;
    assert_int_equal(gw_udp_header_parse(pkt, sizeof(pkt), &h), 0);
    assert_int_equal(h.ssrc, 0x0badf00d);
    assert_int_equal(h.sequence, 1);
    assert_int_equal(gw_udp_header_peek_ssrc(pkt), 0x0badf00d);
}

static void test_round_trip(void **state)
{
    static const struct gw_udp_header cases[] = {
        {GW_UDP_TYPE_AUDIO, 0, 0, 0, 0, 0},
        {GW_UDP_TYPE_AUDIO, 0, 1484, 0xffffffff, 0xffffffff, 0xffffffff},
        {GW_UDP_TYPE_AUDIO, 0x80, 160, 0x80000000, 60, 2},
        {GW_UDP_TYPE_AUDIO, 0, 0x100, 0x00000100, 0x00010000, 0x01000000},
    };
    static uint8_t buf[GW_UDP_HEADER_LEN + GW_UDP_MAX_PAYLOAD];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gw_udp_header out;
        uint8_t again[16];

        gw_udp_header_pack(&cases[i], buf);
        assert_int_equal(
            gw_udp_header_parse(buf, GW_UDP_HEADER_LEN + cases[i].payload_len,
                                &out),
            0);
        assert_memory_equal(&out, &cases[i], sizeof(out));
        gw_udp_header_pack(&out, again);
        assert_memory_equal(again, buf, 16);
    }
}

static void test_sequence(void **state)
{
    static const struct {
        uint32_t last, seq;
        int err;
    } cases[] = {
        {0, 0, GW_EREPLAY},                   /* sequence 0 never plays */
        {0, 1, 0},                            /* first after a hello */
        {1, 2, 0},                            /* in order */
        {5, 5, GW_EREPLAY},                   /* duplicate */
        {5, 4, GW_EREPLAY},                   /* late */
        {5, 100, 0},                          /* gap tolerated */
        {0xfffffffe, 0xffffffff, 0},          /* top of the range */
        {0xffffffff, 0, GW_EREPLAY},          /* no wrap-around */
        {0xffffffff, 0xffffffff, GW_EREPLAY}, /* duplicate at the top */
        {0x80000000, 1, GW_EREPLAY},          /* not serial arithmetic */
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(
            gw_udp_header_check_sequence(cases[i].last, cases[i].seq),
            cases[i].err);
    }
}

/*
 * The downlink flags (codec/udp_header.h): bit 7 always set, where the
 * uplink has the nonce's 0; and any two sequences close enough for their
 * packets' counter ranges to overlap (less than GW_UDP_MAX_BLOCKS apart)
 * get different flags, so their blocks differ whatever the rest.
 */
static void test_downlink_flags(void **state)
{
    static const uint32_t starts[] = {
        1, 2, 127, 128, 129, 1000, 0x7fffffff, GW_UDP_DOWNLINK_SEQ_MAX - 300};

    (void)state;
    assert_int_equal(GW_UDP_MAX_BLOCKS, 93);
    assert_int_equal(GW_UDP_DOWNLINK_SEQ_MAX + (GW_UDP_MAX_BLOCKS - 1),
                     UINT32_MAX);
    for (size_t i = 0; i < sizeof(starts) / sizeof(starts[0]); i++) {
        for (uint32_t p = starts[i]; p < starts[i] + 300; p++) {
            uint8_t fp = gw_udp_header_downlink_flags(p);
            assert_true(fp & GW_UDP_FLAGS_DOWNLINK);
            for (uint32_t d = 1; d < GW_UDP_MAX_BLOCKS; d++) {
                assert_int_not_equal(fp, gw_udp_header_downlink_flags(p + d));
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_table),
        cmocka_unit_test(test_parse_null),
        cmocka_unit_test(test_parse_every_length),
        cmocka_unit_test(test_pack_bytes),
        cmocka_unit_test(test_nonce_template),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_sequence),
        cmocka_unit_test(test_downlink_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
