/*
 * UTF-8 validation, differentially: gw_utf8_valid must agree with a
 * decoder that computes each code point and judges it (RFC 3629), on the
 * whole input and on every prefix the input's first byte selects.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/utf8.h"

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size > 0 ? size : 1);
    size_t cut;

    if (buf == NULL) {
        return 0;
    }
    memcpy(buf, data, size);
    if (gw_utf8_valid(buf, size) != ref_valid(data, size)) {
        abort();
    }
    /* A prefix too, so that sequences cut at len get exercised. */
    cut = size > 0 ? data[0] % (size + 1) : 0;
    if (gw_utf8_valid(buf, cut) != ref_valid(data, cut)) {
        abort();
    }
    free(buf);
    return 0;
}
