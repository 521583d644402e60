/*
 * Presence parser. Invariants: an accepted payload has a state and an
 * address that is empty or an IP literal without header-breaking bytes;
 * a refused one leaves the result zeroed. The broker's run message
 * parser on the same bytes: a run only when accepted, never 0.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/presence.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_presence p;
    int err = gw_presence_parse((const char *)data, size, &p);
    size_t n = strnlen(p.address, sizeof(p.address));

    if (n == sizeof(p.address)) {
        abort(); /* not terminated */
    }
    if (err == 0) {
        for (size_t i = 0; i < n; i++) {
            char c = p.address[i];
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
                  (c >= 'A' && c <= 'F') || c == '.' || c == ':')) {
                abort();
            }
        }
        if (p.conn > 9007199254740991ull || (!p.has_conn && p.conn != 0) ||
            p.run > 9007199254740991ull || (!p.has_run && p.run != 0)) {
            abort();
        }
    } else if (p.online || n != 0 || p.has_conn || p.conn != 0 || p.has_run ||
               p.run != 0) {
        abort();
    }
    uint64_t run;
    err = gw_presence_run_parse((const char *)data, size, &run);
    if ((err == 0) != (run != 0) || run > 9007199254740991ull) {
        abort();
    }
    return 0;
}
