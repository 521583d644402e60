/*
 * Binary audio frames on the backend WebSocket (docs/protocol.md section 6):
 * one Opus packet per message, behind a header chosen by the backend's framing.
 * Built for zero copy: the header can be written in front of a payload that
 * is already in place, and decoding points into the received buffer.
 */
#ifndef GW_CODEC_AUDIO_FRAME_H
#define GW_CODEC_AUDIO_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "codec/udp_header.h"
#include "common/error.h"

/* Binary audio framing toward a backend (docs/protocol.md section 6). */
#define GW_FRAMING_MAP(XX)                                                     \
    XX(V2, "v2")       /* 16-byte header, xiaozhi server ?from=mqtt_gateway */ \
    XX(V3, "v3")       /* 4-byte header */                                     \
    XX(RAW, "raw")     /* the Opus packet alone */                             \
    XX(PCM16, "pcm16") /* 16-bit LE mono PCM; the gateway transcodes */

enum gw_framing {
#define XX(name, _) GW_FRAMING_##name,
    GW_FRAMING_MAP(XX)
#undef XX
};

/*
 * v2:  u32 zero, u32 zero, u32 timestamp, u32 opus length, opus
 *      (the xiaozhi server writes its own type, length and sequence into
 *      bytes 0..7 on downlink; they are ignored)
 * v3:  u8 type = 0, u8 reserved, u16 opus length, opus (no timestamp)
 * raw: opus
 * pcm16: 16-bit little-endian mono PCM alone, no header (uplink: one
 *      device frame per message; downlink: any whole samples, cut into
 *      frames by gateway/audio/pcm_bridge.c)
 */
#define GW_AUDIO_FRAME_V2_HEADER_LEN  16
#define GW_AUDIO_FRAME_V3_HEADER_LEN  4
#define GW_AUDIO_FRAME_MAX_HEADER_LEN 16

/*
 * Largest payload either way: a bigger Opus packet could never be sent on
 * to a device, so it is refused at the framing layer.
 */
#define GW_AUDIO_FRAME_MAX_PAYLOAD GW_UDP_MAX_PAYLOAD
/*
 * pcm16 carries decoded audio: one device frame of up to 120 ms at 48 kHz,
 * 2 bytes a sample. Downlink messages are bounded by the connection's
 * limits.max_message_bytes before they get here.
 */
#define GW_AUDIO_FRAME_PCM16_MAX_PAYLOAD (48 * 120 * 2)

/* The largest payload the framing carries (0 if unknown). */
size_t gw_audio_frame_max_payload(enum gw_framing framing);

/* Header bytes in front of the payload: 16, 4 or 0 (also 0 if unknown). */
size_t gw_audio_frame_header_len(enum gw_framing framing);

/*
 * Writes only the header for a payload of payload_len bytes into hdr (cap
 * bytes) and sets *hdr_len; the caller places the payload right after it.
 * For raw, *hdr_len is 0 and hdr may be NULL. v3 has no timestamp field,
 * so ts is dropped there. Returns 0, GW_ETOOBIG (payload_len over
 * GW_AUDIO_FRAME_MAX_PAYLOAD), GW_ENOSPC (cap too small) or GW_EINVAL
 * (unknown framing).
 */
GW_MUST_CHECK int gw_audio_frame_header(enum gw_framing framing, uint32_t ts,
                                        size_t payload_len, uint8_t *hdr,
                                        size_t cap, size_t *hdr_len);

/*
 * Writes header and payload to out (cap bytes) and sets *out_len. payload
 * may overlap out, e.g. already sit at out + gw_audio_frame_header_len().
 * Errors as gw_audio_frame_header, GW_ENOSPC covering the payload too.
 */
GW_MUST_CHECK int gw_audio_frame_encode(enum gw_framing framing, uint32_t ts,
                                        const uint8_t *payload,
                                        size_t payload_len, uint8_t *out,
                                        size_t cap, size_t *out_len);

/*
 * Decodes one binary WebSocket message of len bytes. On success *payload
 * points into buf, *payload_len is its length (0 is allowed: the framing
 * does not judge the Opus inside) and *ts is the timestamp (0 for v3 and
 * raw). The length field must match the bytes present exactly:
 *   shorter than the header, or fewer payload bytes than declared
 *                               -> GW_ETRUNC
 *   more bytes than declared    -> GW_EMALFORMED
 *   v3 type != 0                -> GW_EPROTO
 *   payload over the limit      -> GW_ETOOBIG (the declared length is
 *                                  checked before the bytes present)
 *   unknown framing             -> GW_EINVAL
 * pcm16 has no length field: the whole message is the payload, of any
 * length (the WebSocket layer bounds it by limits.max_message_bytes).
 * Outputs are written only on success. The Node gateway and the firmware
 * trust the length field without a bounds check; we do not.
 */
GW_MUST_CHECK int gw_audio_frame_decode(enum gw_framing framing,
                                        const uint8_t *buf, size_t len,
                                        uint32_t *ts, const uint8_t **payload,
                                        size_t *payload_len);

#endif /* GW_CODEC_AUDIO_FRAME_H */
