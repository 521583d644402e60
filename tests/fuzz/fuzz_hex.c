/*
 * Hex decoding of the hello's key and nonce: anything that decodes must
 * encode back to the same digits in lowercase, and nothing else decodes.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/hex.h"

#define MAX_BYTES 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t bytes[MAX_BYTES];
    char text[2 * MAX_BYTES + 1];
    size_t want = size / 2;

    if (size > 2 * MAX_BYTES) {
        return 0;
    }
    /* Exact size first, then a wrong one, which must always be refused. */
    int rc = gw_hex_decode((const char *)data, size, bytes, want);
    if (size % 2 == 0 && want > 0 &&
        gw_hex_decode((const char *)data, size, bytes, want - 1) == 0) {
        abort();
    }
    if (rc != 0) {
        for (size_t i = 0; size % 2 == 0 && i < size; i++) {
            if (!isxdigit(data[i])) {
                return 0;
            }
        }
        if (size % 2 == 0) {
            abort(); /* all digits, even length: must have decoded */
        }
        return 0;
    }
    if (gw_hex_encode(bytes, want, text, sizeof(text)) != 0) {
        abort();
    }
    for (size_t i = 0; i < size; i++) {
        if (text[i] != tolower(data[i])) {
            abort();
        }
    }
    return 0;
}
