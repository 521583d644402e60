/* The UDP audio header: big-endian packing and the firmware's checks. */
#include "codec/udp_header.h"

/* Byte shifts rather than casts: buf has no alignment guarantee. */
static uint16_t load16(const uint8_t *p)
{
    return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static uint32_t load32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

static void store16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void store32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

void gw_udp_header_pack(const struct gw_udp_header *h,
                        uint8_t out[GW_UDP_HEADER_LEN])
{
    out[0] = h->type;
    out[1] = h->flags;
    store16(out + 2, h->payload_len);
    store32(out + 4, h->ssrc);
    store32(out + 8, h->timestamp);
    store32(out + 12, h->sequence);
}

uint8_t gw_udp_header_downlink_flags(uint32_t seq)
{
    return (uint8_t)(GW_UDP_FLAGS_DOWNLINK | (seq & 0x7f));
}

int gw_udp_header_parse(const uint8_t *buf, size_t len, struct gw_udp_header *h)
{
    uint16_t payload_len;

    if (buf == NULL || len < GW_UDP_HEADER_LEN) {
        return GW_ETRUNC;
    }
    if (buf[0] != GW_UDP_TYPE_AUDIO) {
        return GW_EPROTO;
    }
    payload_len = load16(buf + 2);
    /* Exact, as firmware 2.4+ checks it (the Node gateway ignored trailing
     * bytes): extra bytes mean the sender framed the datagram otherwise. */
    if ((size_t)payload_len != len - GW_UDP_HEADER_LEN) {
        return GW_EMALFORMED;
    }
    if (payload_len > GW_UDP_MAX_PAYLOAD) {
        return GW_ETOOBIG;
    }
    h->type = buf[0];
    h->flags = buf[1];
    h->payload_len = payload_len;
    h->ssrc = load32(buf + 4);
    h->timestamp = load32(buf + 8);
    h->sequence = load32(buf + 12);
    return 0;
}

int gw_udp_header_check_sequence(uint32_t last_accepted, uint32_t seq)
{
    return seq > last_accepted ? 0 : GW_EREPLAY;
}

uint32_t gw_udp_header_peek_ssrc(const uint8_t *buf)
{
    return load32(buf + 4);
}
