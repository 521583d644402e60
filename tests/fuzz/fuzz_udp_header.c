/*
 * UDP audio header parser. Invariants: a datagram that parses re-packs to
 * its own first 16 bytes, and every refusal has the reason the firmware's
 * check order gives it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/udp_header.h"

/* The firmware's rule, restated independently of the parser. */
static int expected(const uint8_t *data, size_t size)
{
    size_t declared;

    if (size < GW_UDP_HEADER_LEN) {
        return GW_ETRUNC;
    }
    if (data[0] != GW_UDP_TYPE_AUDIO) {
        return GW_EPROTO;
    }
    declared = (size_t)data[2] * 256 + data[3];
    if (GW_UDP_HEADER_LEN + declared != size) {
        return GW_EMALFORMED;
    }
    return declared > GW_UDP_MAX_PAYLOAD ? GW_ETOOBIG : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_udp_header h;
    uint8_t again[GW_UDP_HEADER_LEN];
    int err = gw_udp_header_parse(data, size, &h);

    if (err != expected(data, size)) {
        abort();
    }
    if (err == 0) {
        gw_udp_header_pack(&h, again);
        if (memcmp(again, data, GW_UDP_HEADER_LEN) != 0 ||
            h.payload_len != size - GW_UDP_HEADER_LEN ||
            h.payload_len > GW_UDP_MAX_PAYLOAD ||
            gw_udp_header_peek_ssrc(data) != h.ssrc) {
            abort();
        }
        /* The replay rule is a strict order: seq is never above itself. */
        if (gw_udp_header_check_sequence(h.sequence, h.sequence) !=
                GW_EREPLAY ||
            (h.sequence > 0 &&
             gw_udp_header_check_sequence(h.sequence - 1, h.sequence) != 0)) {
            abort();
        }
    }
    return 0;
}
