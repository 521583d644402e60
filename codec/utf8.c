/* UTF-8 well-formedness after RFC 3629 section 4 (the byte-range table). */
#include "codec/utf8.h"

#include <stdint.h>

/* Length of the sequence led by b, 0 if b cannot start one. */
static size_t lead_len(uint8_t b)
{
    if (b < 0x80) {
        return 1;
    }
    if (b >= 0xc2 && b <= 0xdf) {
        return 2;
    }
    if (b >= 0xe0 && b <= 0xef) {
        return 3;
    }
    if (b >= 0xf0 && b <= 0xf4) {
        return 4;
    }
    return 0; /* 0x80-0xc1 (continuation, overlong 2-byte) and 0xf5-0xff */
}

bool gw_utf8_valid(const char *buf, size_t len)
{
    const uint8_t *p = (const uint8_t *)buf;
    size_t i = 0;

    while (i < len) {
        size_t n = lead_len(p[i]);
        if (n == 0 || n > len - i) {
            return false;
        }
        if (n >= 2) {
            /* The second byte's range depends on the lead: this is what
             * rules out overlong forms, surrogates and > U+10FFFF. */
            uint8_t lo = 0x80, hi = 0xbf;
            if (p[i] == 0xe0) {
                lo = 0xa0;
            } else if (p[i] == 0xed) {
                hi = 0x9f;
            } else if (p[i] == 0xf0) {
                lo = 0x90;
            } else if (p[i] == 0xf4) {
                hi = 0x8f;
            }
            if (p[i + 1] < lo || p[i + 1] > hi) {
                return false;
            }
            for (size_t k = 2; k < n; k++) {
                if ((p[i + k] & 0xc0) != 0x80) {
                    return false;
                }
            }
        }
        i += n;
    }
    return true;
}
