/* Client id parsing: topic-level rules first, then the three-part layout. */
#include "codec/client_id.h"

#include <stdint.h>
#include <string.h>

#include "codec/hex.h"
#include "codec/utf8.h"

#define SEP     "@@@"
#define SEP_LEN 3
/* MQTT strings carry a u16 length. */
#define TOPIC_LEVEL_MAX 65535

/* The code point of the well-formed sequence at p (n bytes long). */
static uint32_t code_point(const uint8_t *p, size_t n)
{
    uint32_t cp;

    if (n == 1) {
        return p[0];
    }
    cp = p[0] & (0xffu >> (n + 1));
    for (size_t k = 1; k < n; k++) {
        cp = cp << 6 | (p[k] & 0x3fu);
    }
    return cp;
}

static size_t seq_len(uint8_t lead)
{
    if (lead < 0x80) {
        return 1;
    }
    if (lead < 0xe0) {
        return 2;
    }
    return lead < 0xf0 ? 3 : 4;
}

/* What libmosquitto's UTF-8 check refuses beyond well-formedness. */
static bool forbidden(uint32_t cp)
{
    if (cp == '/' || cp == '+' || cp == '#') {
        return true; /* level separator and wildcards */
    }
    if (cp <= 0x1f || (cp >= 0x7f && cp <= 0x9f)) {
        return true; /* C0 (NUL included), DEL and C1 controls */
    }
    if (cp >= 0xfdd0 && cp <= 0xfdef) {
        return true;
    }
    return (cp & 0xfffe) == 0xfffe; /* U+xFFFE and U+xFFFF in every plane */
}

/* 0, GW_EUTF8 or GW_EPROTO for a candidate topic level. */
static int check_level(const char *buf, size_t len)
{
    const uint8_t *p = (const uint8_t *)buf;

    if (!gw_utf8_valid(buf, len)) {
        return GW_EUTF8;
    }
    /* Well-formed from here on, so every sequence is complete. */
    for (size_t i = 0; i < len;) {
        size_t n = seq_len(p[i]);
        if (forbidden(code_point(p + i, n))) {
            return GW_EPROTO;
        }
        i += n;
    }
    return 0;
}

bool gw_client_id_topic_safe(const char *buf, size_t len)
{
    if (buf == NULL || len == 0 || len > TOPIC_LEVEL_MAX) {
        return false;
    }
    return check_level(buf, len) == 0;
}

/*
 * Splits at each "@@@", left to right without overlap (as JavaScript's
 * split does in the Node gateway). Fills at most 3 parts; returns the part
 * count, 4 standing for "more than 3".
 */
static size_t split(const char *buf, size_t len, const char *part[3],
                    size_t part_len[3])
{
    size_t n = 0, start = 0, i = 0;

    while (i + SEP_LEN <= len) {
        if (memcmp(buf + i, SEP, SEP_LEN) != 0) {
            i++;
            continue;
        }
        if (n == 2) {
            return 4;
        }
        part[n] = buf + start;
        part_len[n++] = i - start;
        i += SEP_LEN;
        start = i;
    }
    part[n] = buf + start;
    part_len[n++] = len - start;
    return n;
}

/* "A0_85_e3_F4_49_34" -> "a0:85:e3:f4:49:34"; 0 or GW_EMALFORMED. */
static int parse_mac(const char *s, size_t len, char mac[18])
{
    static const char digits[] = "0123456789abcdef";

    if (len != GW_CLIENT_ID_MAC_PART_LEN) {
        return GW_EMALFORMED;
    }
    for (size_t k = 0; k < 6; k++) {
        int hi = gw_hex_nibble(s[3 * k]);
        int lo = gw_hex_nibble(s[3 * k + 1]);
        if (hi < 0 || lo < 0 || (k < 5 && s[3 * k + 2] != '_')) {
            return GW_EMALFORMED;
        }
        mac[3 * k] = digits[hi];
        mac[3 * k + 1] = digits[lo];
        mac[3 * k + 2] = k < 5 ? ':' : '\0';
    }
    return 0;
}

int gw_client_id_parse(const char *buf, size_t len, struct gw_client_id *out)
{
    const char *part[3];
    size_t part_len[3];
    char mac[18];
    size_t n;
    int err;

    if (buf == NULL || out == NULL) {
        return GW_EINVAL;
    }
    if (len == 0) {
        return GW_EMALFORMED;
    }
    if (len > GW_CLIENT_ID_MAX) {
        return GW_ETOOBIG;
    }
    err = check_level(buf, len);
    if (err < 0) {
        return err;
    }
    n = split(buf, len, part, part_len);
    if (n != 2 && n != 3) {
        return GW_EMALFORMED;
    }
    if (part_len[0] == 0 || (n == 3 && part_len[2] == 0)) {
        return GW_EMALFORMED;
    }
    if (parse_mac(part[1], part_len[1], mac) < 0) {
        return GW_EMALFORMED;
    }
    out->group = part[0];
    out->group_len = part_len[0];
    out->mac_part = part[1];
    out->uuid = n == 3 ? part[2] : NULL;
    out->uuid_len = n == 3 ? part_len[2] : 0;
    memcpy(out->mac, mac, sizeof(mac));
    return 0;
}
