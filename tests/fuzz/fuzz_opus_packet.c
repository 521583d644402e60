/*
 * Opus packet inspection. Invariants: what inspect accepts is within the
 * RFC's limits and agrees with the TOC byte, and libopus' decoder agrees on
 * both validity and duration (a packet inspect refuses must not decode, one
 * it accepts must decode to exactly samples_48k samples).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <opus.h>

#include "codec/opus_packet.h"

/* One decoder for the whole run, reset per input: creating one per input
 * would cost more than the inspection under test. */
static OpusDecoder *decoder;
static opus_int16 pcm[GW_OPUS_MAX_SAMPLES_48K * 2];

/*
 * libopus comes uninstrumented from the distribution, so the fuzzer sees no
 * coverage inside it and would shrink the corpus to a few bytes. Branching
 * here on the packet's shape gives it a signal to keep one of each: the
 * framing code, the code 3 flags, the mode, and (through the loops' hit
 * counts) the number of frames and the packet's size.
 */
static volatile int sink;

static void shape_signal(const uint8_t *p, size_t size, int err,
                         const struct gw_opus_info *info)
{
    if (size == 0) {
        return;
    }
    switch (p[0] & 3) {
    case 0:
        sink = 10;
        break;
    case 1:
        sink = 11;
        break;
    case 2:
        sink = 12;
        break;
    default:
        if (size > 1 && (p[1] & 0x80) != 0) {
            sink = 13; /* VBR */
        }
        if (size > 1 && (p[1] & 0x40) != 0) {
            sink = 14; /* padding */
        }
        break;
    }
    if (err != 0) {
        sink = -1;
        return;
    }
    if (info->toc_config < 12) {
        sink = 20; /* SILK */
    } else if (info->toc_config < 16) {
        sink = 21; /* hybrid */
    } else {
        sink = 22; /* CELT */
    }
    for (int i = 0; i < info->frames; i++) {
        sink = i;
    }
    for (size_t i = 0; i < size; i += 32) {
        sink = -2;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_opus_info info;
    uint8_t *copy;
    int err, decoded;

    if (decoder == NULL) {
        decoder = opus_decoder_create(48000, 2, &err);
        if (decoder == NULL) {
            abort();
        }
    }
    /* A heap copy of the exact size, so an overread is always caught. */
    copy = malloc(size > 0 ? size : 1);
    if (copy == NULL) {
        return 0;
    }
    memcpy(copy, data, size);
    memset(&info, 0, sizeof(info));
    err = gw_opus_packet_inspect(copy, size, &info);
    if (err != 0 && err != GW_EOPUS) {
        abort();
    }
    shape_signal(copy, size, err, &info);
    if ((err == 0) != gw_opus_packet_sane(copy, size)) {
        abort();
    }
    if (err == 0 &&
        (info.samples_48k < GW_OPUS_MIN_SAMPLES_48K ||
         info.samples_48k > GW_OPUS_MAX_SAMPLES_48K || info.frames < 1 ||
         info.frames > 48 || info.toc_config != copy[0] >> 3 ||
         info.stereo != ((copy[0] & 0x04) != 0) ||
         info.bandwidth < OPUS_BANDWIDTH_NARROWBAND ||
         info.bandwidth > OPUS_BANDWIDTH_FULLBAND ||
         info.samples_48k !=
             info.frames * opus_packet_get_samples_per_frame(copy, 48000))) {
        abort();
    }
    /* An empty input asks the decoder for concealment: not a packet. */
    if (size > 0 && size < 1500) {
        if (opus_decoder_ctl(decoder, OPUS_RESET_STATE) != OPUS_OK) {
            abort();
        }
        decoded = opus_decode(decoder, copy, (opus_int32)size, pcm,
                              GW_OPUS_MAX_SAMPLES_48K, 0);
        if (err == 0 ? decoded != info.samples_48k : decoded >= 0) {
            abort();
        }
    }
    free(copy);
    return 0;
}
