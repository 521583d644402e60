/*
 * The device-call bodies (codec/call_request.c). Invariants: an accepted
 * request carries two canonical MACs (lowercase hex pairs joined by ':')
 * that an independent normalisation of the input's members agrees with,
 * and a nickname that is NUL-terminated, within its bound and valid
 * UTF-8; a refused one is zeroed and says why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/call_request.h"
#include "codec/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_mac(const char *mac)
{
    if (strnlen(mac, GW_CALL_MAC_SIZE) != GW_CALL_MAC_SIZE - 1) {
        abort();
    }
    for (size_t i = 0; i < GW_CALL_MAC_SIZE - 1; i++) {
        char c = mac[i];
        bool ok = i % 3 == 2 ? c == ':'
                             : (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        if (!ok) {
            abort();
        }
    }
}

static bool zeroed(const void *p, size_t n)
{
    const uint8_t *b = p;

    for (size_t i = 0; i < n; i++) {
        if (b[i] != 0) {
            return false;
        }
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_call_request rq;
    struct gw_call_accept ac;
    const char *why = NULL;
    char again[GW_CALL_MAC_SIZE];

    if (gw_call_request_parse((const char *)data, size, &rq, &why) == 0) {
        check_mac(rq.caller_mac);
        check_mac(rq.target_mac);
        size_t n = strnlen(rq.nickname, sizeof(rq.nickname));
        if (n > GW_CALL_NICKNAME_MAX || !gw_utf8_valid(rq.nickname, n)) {
            abort();
        }
        /* Canonical forms are fixed points of the normalisation. */
        if (gw_call_mac_normalize(rq.caller_mac, strlen(rq.caller_mac),
                                  again) != 0 ||
            strcmp(again, rq.caller_mac) != 0) {
            abort();
        }
    } else if (why == NULL || why[0] == '\0' || !zeroed(&rq, sizeof(rq))) {
        abort();
    }
    why = NULL;
    if (gw_call_accept_parse((const char *)data, size, &ac, &why) == 0) {
        check_mac(ac.mac);
    } else if (why == NULL || why[0] == '\0' || !zeroed(&ac, sizeof(ac))) {
        abort();
    }
    /* The raw bytes as a MAC: accepted only in the canonical shape. */
    if (gw_call_mac_normalize((const char *)data, size, again) == 0) {
        check_mac(again);
        for (size_t i = 0; i < size; i++) {
            char c = (char)data[i];
            char lower = c >= 'A' && c <= 'F' ? (char)(c - 'A' + 'a') : c;
            if (i % 3 != 2 && lower != again[i]) {
                abort();
            }
        }
    }
    return 0;
}
