/* Hex text <-> bytes for the hello's key and nonce. */
#include "codec/hex.h"

int gw_hex_nibble(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

int gw_hex_encode(const uint8_t *buf, size_t len, char *out, size_t cap)
{
    static const char digits[] = "0123456789abcdef";

    if (out == NULL || cap == 0 || len > (cap - 1) / 2) {
        return GW_ENOSPC;
    }
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[buf[i] >> 4];
        out[2 * i + 1] = digits[buf[i] & 0x0f];
    }
    out[2 * len] = '\0';
    return 0;
}

int gw_hex_decode(const char *text, size_t text_len, uint8_t *out,
                  size_t out_len)
{
    if (text == NULL || text_len % 2 != 0) {
        return GW_EMALFORMED;
    }
    if (text_len / 2 != out_len) {
        return GW_EINVAL;
    }
    for (size_t i = 0; i < out_len; i++) {
        int hi = gw_hex_nibble(text[2 * i]);
        int lo = gw_hex_nibble(text[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return GW_EMALFORMED;
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}
