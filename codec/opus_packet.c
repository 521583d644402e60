/* Opus packet inspection with libopus' own parser: no decoder state. */
#include "codec/opus_packet.h"

#include <opus.h>

int gw_opus_packet_inspect(const uint8_t *buf, size_t len,
                           struct gw_opus_info *info)
{
    const unsigned char *frames[48];
    opus_int16 sizes[48];
    unsigned char toc;
    int payload_offset;
    int nframes, samples, bandwidth, channels;

    /* libopus lengths are opus_int32; no Opus packet comes near that. */
    if (buf == NULL || len == 0 || len > (size_t)INT32_MAX) {
        return GW_EOPUS;
    }
    /* The full parser, not just the TOC: it checks every frame length,
     * the code 3 count and padding against len (RFC 6716 section 3.2). */
    nframes = opus_packet_parse(buf, (opus_int32)len, &toc, frames, sizes,
                                &payload_offset);
    if (nframes < 1) {
        return GW_EOPUS;
    }
    samples = opus_packet_get_nb_samples(buf, (opus_int32)len, 48000);
    if (samples < GW_OPUS_MIN_SAMPLES_48K ||
        samples > GW_OPUS_MAX_SAMPLES_48K) {
        return GW_EOPUS;
    }
    bandwidth = opus_packet_get_bandwidth(buf);
    channels = opus_packet_get_nb_channels(buf);
    if (bandwidth < 0 || channels < 1) {
        return GW_EOPUS;
    }
    info->samples_48k = samples;
    info->frames = nframes;
    info->toc_config = (uint8_t)(toc >> 3);
    info->stereo = channels == 2;
    info->bandwidth = bandwidth;
    return 0;
}

bool gw_opus_packet_sane(const uint8_t *buf, size_t len)
{
    struct gw_opus_info info;

    if (gw_opus_packet_inspect(buf, len, &info) < 0) {
        return false;
    }
    return info.samples_48k >= GW_OPUS_MIN_SAMPLES_48K &&
           info.samples_48k <= GW_OPUS_MAX_SAMPLES_48K;
}
