/* Backend WebSocket audio framings v2, v3, raw and pcm16: headers. */
#include "codec/audio_frame.h"

#include <stdbool.h>
#include <string.h>

static uint32_t load32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

static void store32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

size_t gw_audio_frame_header_len(enum gw_framing framing)
{
    switch (framing) {
    case GW_FRAMING_V2:
        return GW_AUDIO_FRAME_V2_HEADER_LEN;
    case GW_FRAMING_V3:
        return GW_AUDIO_FRAME_V3_HEADER_LEN;
    case GW_FRAMING_RAW:
    case GW_FRAMING_PCM16:
        return 0;
    }
    return 0;
}

static bool framing_known(enum gw_framing framing)
{
    return framing == GW_FRAMING_V2 || framing == GW_FRAMING_V3 ||
           framing == GW_FRAMING_RAW || framing == GW_FRAMING_PCM16;
}

size_t gw_audio_frame_max_payload(enum gw_framing framing)
{
    if (!framing_known(framing)) {
        return 0;
    }
    return framing == GW_FRAMING_PCM16 ? GW_AUDIO_FRAME_PCM16_MAX_PAYLOAD
                                       : GW_AUDIO_FRAME_MAX_PAYLOAD;
}

int gw_audio_frame_header(enum gw_framing framing, uint32_t ts,
                          size_t payload_len, uint8_t *hdr, size_t cap,
                          size_t *hdr_len)
{
    size_t need = gw_audio_frame_header_len(framing);

    if (!framing_known(framing)) {
        return GW_EINVAL;
    }
    if (payload_len > gw_audio_frame_max_payload(framing)) {
        return GW_ETOOBIG;
    }
    if (need > 0 && (hdr == NULL || cap < need)) {
        return GW_ENOSPC;
    }
    switch (framing) {
    case GW_FRAMING_V2:
        /* Bytes 0..7 stay zero as the Node gateway sends them: the xiaozhi
         * server reads only the timestamp and the bytes from 16 on. */
        memset(hdr, 0, 8);
        store32(hdr + 8, ts);
        store32(hdr + 12, (uint32_t)payload_len);
        break;
    case GW_FRAMING_V3:
        hdr[0] = 0; /* type 0 = Opus */
        hdr[1] = 0;
        hdr[2] = (uint8_t)(payload_len >> 8);
        hdr[3] = (uint8_t)payload_len;
        break;
    case GW_FRAMING_RAW:
    case GW_FRAMING_PCM16:
        break;
    }
    *hdr_len = need;
    return 0;
}

int gw_audio_frame_encode(enum gw_framing framing, uint32_t ts,
                          const uint8_t *payload, size_t payload_len,
                          uint8_t *out, size_t cap, size_t *out_len)
{
    size_t hlen = gw_audio_frame_header_len(framing);
    uint8_t hdr[GW_AUDIO_FRAME_MAX_HEADER_LEN];
    int err;

    /* Header built aside first: payload may overlap the header's bytes. */
    err = gw_audio_frame_header(framing, ts, payload_len, hdr, sizeof(hdr),
                                &hlen);
    if (err < 0) {
        return err;
    }
    if (out == NULL || cap < hlen || cap - hlen < payload_len) {
        return GW_ENOSPC;
    }
    if (payload_len > 0) {
        if (payload == NULL) {
            return GW_EINVAL;
        }
        memmove(out + hlen, payload, payload_len);
    }
    memcpy(out, hdr, hlen);
    *out_len = hlen + payload_len;
    return 0;
}

/* Checks a declared length against the limit and the bytes present. */
static int check_length(size_t declared, size_t present, size_t max)
{
    if (declared > max) {
        return GW_ETOOBIG;
    }
    if (present < declared) {
        return GW_ETRUNC;
    }
    if (present > declared) {
        return GW_EMALFORMED;
    }
    return 0;
}

int gw_audio_frame_decode(enum gw_framing framing, const uint8_t *buf,
                          size_t len, uint32_t *ts, const uint8_t **payload,
                          size_t *payload_len)
{
    size_t hlen = gw_audio_frame_header_len(framing);
    uint32_t stamp = 0;
    size_t declared;
    int err;

    if (!framing_known(framing)) {
        return GW_EINVAL;
    }
    if (buf == NULL) {
        return GW_EINVAL;
    }
    if (len < hlen) {
        return GW_ETRUNC;
    }
    switch (framing) {
    case GW_FRAMING_V2:
        /* Only 8..15: the server fills 0..7 with its own type, length and
         * sequence, which say nothing we rely on. */
        stamp = load32(buf + 8);
        declared = load32(buf + 12);
        break;
    case GW_FRAMING_V3:
        if (buf[0] != 0) {
            return GW_EPROTO;
        }
        declared = (size_t)buf[2] << 8 | buf[3];
        break;
    case GW_FRAMING_PCM16:
        /* Any length: the connection's message limit bounds it, and the
         * PCM bridge judges whole samples. */
        *ts = 0;
        *payload = buf;
        *payload_len = len;
        return 0;
    default:
        declared = len;
        break;
    }
    err =
        check_length(declared, len - hlen, gw_audio_frame_max_payload(framing));
    if (err < 0) {
        return err;
    }
    *ts = stamp;
    *payload = buf + hlen;
    *payload_len = declared;
    return 0;
}
