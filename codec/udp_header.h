/*
 * The 16-byte header in front of every UDP audio datagram, both directions
 * (docs/protocol.md section 4): pack it, and parse it with the same checks, in
 * the same order, as the device firmware applies to what it receives.
 */
#ifndef GW_CODEC_UDP_HEADER_H
#define GW_CODEC_UDP_HEADER_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define GW_UDP_HEADER_LEN 16
/* The device receives into a 1500-byte buffer: 1500 - 16. */
#define GW_UDP_MAX_PAYLOAD 1484
#define GW_UDP_TYPE_AUDIO  0x01

/*
 * Host-order view of the header. On the wire every field is big-endian and
 * the whole 16 bytes, as sent, are the AES-128-CTR initial counter block.
 */
struct gw_udp_header {
    uint8_t type;         /* GW_UDP_TYPE_AUDIO; anything else is dropped */
    uint8_t flags;        /* downlink: gw_udp_header_downlink_flags(); the
                             device copies the nonce's 0 into its uplink;
                             ignored when received, by either side */
    uint16_t payload_len; /* bytes after the header (encrypted Opus) */
    uint32_t ssrc;        /* connection id handed out in the hello nonce */
    uint32_t timestamp;   /* ms, passed through untouched (server AEC) */
    uint32_t sequence;    /* per direction and hello, first packet is 1 */
};

/*
 * The downlink's counter blocks (docs/protocol.md section 4.1). The IV of a
 * datagram is its header and the counter runs through the payload's 16-byte
 * blocks, at most GW_UDP_MAX_BLOCKS of them, so a packet with sequence q
 * uses the blocks whose low 32 bits are q .. q + 92, the other 96 bits
 * being its header's. Two rules keep every block the gateway encrypts with
 * apart from every other one and from the device's uplink ones:
 *   - flags = 0x80 | (q & 0x7f). The uplink's flags are the nonce's 0, so
 *     bit 7 tells the directions apart; and two downlink packets less than
 *     128 sequences apart differ in the low 7 bits, while packets 128 or
 *     more apart have disjoint ranges of low words. Neither timestamp nor
 *     length matters, so a backend's timestamps may repeat.
 *   - q stays at most GW_UDP_DOWNLINK_SEQ_MAX, so q + 92 never carries
 *     into the timestamp.
 * The firmware reads neither flags nor ssrc of what it receives.
 */
#define GW_UDP_FLAGS_DOWNLINK   0x80
#define GW_UDP_MAX_BLOCKS       ((GW_UDP_MAX_PAYLOAD + 15) / 16) /* 93 */
#define GW_UDP_DOWNLINK_SEQ_MAX (UINT32_MAX - (GW_UDP_MAX_BLOCKS - 1))

/* The flags byte of the downlink packet with sequence seq (see above). */
uint8_t gw_udp_header_downlink_flags(uint32_t seq);

/* Writes h to out in wire order. Does not validate h. */
void gw_udp_header_pack(const struct gw_udp_header *h,
                        uint8_t out[GW_UDP_HEADER_LEN]);

/*
 * Parses the header of a whole datagram of len bytes and checks it as the
 * firmware does, in this order:
 *   len < 16                  -> GW_ETRUNC
 *   type != 0x01              -> GW_EPROTO
 *   16 + payload_len != len   -> GW_EMALFORMED (no trailing bytes allowed)
 *   payload_len > 1484        -> GW_ETOOBIG
 * flags are not checked. *h is written only on success. The sequence is
 * checked separately (gw_udp_header_check_sequence) because it needs the
 * session's state.
 */
GW_MUST_CHECK int gw_udp_header_parse(const uint8_t *buf, size_t len,
                                      struct gw_udp_header *h);

/*
 * Replay rule shared with the firmware: a packet is accepted only if its
 * sequence is above the last one accepted in that direction, gaps being
 * fine. last_accepted starts at 0 after each hello, so sequence 0 is always
 * refused. Returns 0 or GW_EREPLAY. There is no wrap-around: at one packet
 * per 60 ms a 32-bit counter lasts eight years, and the firmware does not
 * wrap either.
 */
GW_MUST_CHECK int gw_udp_header_check_sequence(uint32_t last_accepted,
                                               uint32_t seq);

/*
 * The ssrc (bytes 4..7) of a datagram, for the demultiplexer's lookup
 * before anything else is parsed. The caller must have checked that at
 * least GW_UDP_HEADER_LEN bytes are present.
 */
uint32_t gw_udp_header_peek_ssrc(const uint8_t *buf);

#endif /* GW_CODEC_UDP_HEADER_H */
