/*
 * The firmware's activation request (codec/activation_request.c).
 * Invariants: a refusal says why and leaves the result zeroed; an
 * accepted proof has a serial number and challenge made only of the
 * documented characters and within their bounds; no proof, nothing set.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/activation_request.h"

#define SAFE "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int all_zero(const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++) {
        if (b[i] != 0) {
            return 0;
        }
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_activation_request r;
    const char *why = NULL;
    int rc = gw_activation_request_parse((const char *)data, size, &r, &why);

    if (rc != 0) {
        if (why == NULL || !all_zero(&r, sizeof(r))) {
            abort();
        }
        return 0;
    }
    if (!r.proof) {
        if (!all_zero(&r, sizeof(r))) {
            abort();
        }
        return 0;
    }
    size_t sn = strlen(r.serial_number), ch = strlen(r.challenge);
    if (sn == 0 || sn > GW_ACTIVATION_SERIAL_MAX ||
        strspn(r.serial_number, SAFE) != sn || ch == 0 ||
        ch > GW_ACTIVATION_CHALLENGE_MAX || strspn(r.challenge, SAFE) != ch) {
        abort();
    }
    return 0;
}
