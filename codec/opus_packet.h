/*
 * Opus packet inspection (RFC 6716 section 3) through libopus, without
 * decoding: is it a well-formed packet, and how long does it play? Used to
 * pace downlink and to judge whether uplink from a new address is audio.
 */
#ifndef GW_CODEC_OPUS_PACKET_H
#define GW_CODEC_OPUS_PACKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* RFC 6716 section 3.2.5: a packet holds at most 120 ms of audio. */
#define GW_OPUS_MAX_SAMPLES_48K 5760
/* The shortest frame Opus has (2.5 ms, CELT only). */
#define GW_OPUS_MIN_SAMPLES_48K 120

/* What the TOC byte and frame layout of one packet say. */
struct gw_opus_info {
    int samples_48k;    /* duration in samples at 48 kHz, 120..5760 */
    int frames;         /* frames in the packet, 1..48 */
    uint8_t toc_config; /* TOC bits 7..3 (0..31): mode, bandwidth, size */
    bool stereo;        /* TOC bit 2 */
    int bandwidth;      /* OPUS_BANDWIDTH_NARROWBAND .. _FULLBAND */
};

/*
 * Parses buf[0..len) as one raw (not self-delimited) Opus packet. Returns
 * 0 and fills *info, or GW_EOPUS for an empty or malformed packet (bad
 * code 1/2/3 lengths, frame count or padding; more than 120 ms). A packet
 * whose frames are all empty (DTX, PLC) is well-formed and returns 0. *info
 * is written only on success.
 */
GW_MUST_CHECK int gw_opus_packet_inspect(const uint8_t *buf, size_t len,
                                         struct gw_opus_info *info);

/*
 * True if buf is a well-formed packet playing 2.5 to 120 ms: the cheap
 * "does this look like audio" test for uplink from an unproven address.
 */
bool gw_opus_packet_sane(const uint8_t *buf, size_t len);

#endif /* GW_CODEC_OPUS_PACKET_H */
