/*
 * The UDP uplink as a device's datagram meets it: header, session by ssrc,
 * replay and forward window, in-place decryption, Opus and the address
 * rules, through gw__udp_uplink_judge(), which the socket's reader calls
 * for every datagram (gateway/audio/udp_uplink.c). Two sessions with fixed keys
 * and ssrcs: one with 60 ms frames, one whose hello gave none.
 *
 * The input is a run of datagrams, each
 *   u8 how: bits 0-1 pick one of four source addresses (bit 2: IPv6),
 *           bit 3 asks the harness to encrypt the payload first, under
 *           the header and the key of the session the ssrc names, as a
 *           device does (so the fuzzer can steer what decrypts);
 *   u8 the loop time step, in ms;
 *   u16 datagram length, big-endian; then the datagram.
 *
 * Invariants, after every datagram: an accepted one named a session, went
 * above its last sequence (or, late, below it by less than
 * GW_UDP_LATE_WINDOW, from the address the session already held, leaving
 * sequence and address as they were), was never accepted before, and
 * either stayed within the window's bound
 * since the start (accepted packets cannot push the window on) or within
 * GW_UDP_AHEAD_STEP of the last accepted one, came from the
 * address the session now holds, and decrypted to well-formed Opus; an
 * address is set or changed only by a learn or a move; a refused one
 * changed neither sequence nor address.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/opus_packet.h"
#include "codec/udp_header.h"
#include "crypto/aes_ctr.h"
#include "gateway/audio/udp_audio_int.h"

#define NPEERS   2
#define START_MS 1000

static const uint32_t ssrcs[NPEERS] = {0x11223344u, 0x55667788u};
static const int frame_ms[NPEERS] = {60, 0};
static const uint8_t keys[NPEERS][16] = {
    {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb,
     0xcc, 0xdd, 0xee, 0xff},
    {0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x69, 0x78, 0x87, 0x96, 0xa5, 0xb4,
     0xc3, 0xd2, 0xe1, 0xf0},
};

static struct gw_ssrc_table table;
static struct gw_udp_peer peers[NPEERS];
static struct gw_aes_ctr *device_aes[NPEERS]; /* the devices' side */
static union gw_udp_addr sources[8];
/* Every sequence each session accepted in this input: none twice. */
#define MAX_ACCEPTED 4096
static uint32_t accepted[NPEERS][MAX_ACCEPTED];
static size_t n_accepted[NPEERS];

static bool accepted_before(int i, uint32_t seq)
{
    for (size_t k = 0; k < n_accepted[i]; k++) {
        if (accepted[i][k] == seq) {
            return true;
        }
    }
    if (n_accepted[i] < MAX_ACCEPTED) {
        accepted[i][n_accepted[i]++] = seq;
    }
    return false;
}

static void set_up(void)
{
    gw_ssrc_table_init(&table);
    for (int i = 0; i < NPEERS; i++) {
        gw_aes_ctr_init(&peers[i].aes);
        if (gw_aes_ctr_set_key(&peers[i].aes, keys[i]) != 0 ||
            gw_aes_ctr_create(&device_aes[i]) != 0 ||
            gw_aes_ctr_set_key(device_aes[i], keys[i]) != 0) {
            abort();
        }
        peers[i].ssrc = ssrcs[i];
        if (gw_ssrc_table_add(&table, ssrcs[i], &peers[i]) != 0) {
            abort();
        }
    }
    for (int i = 0; i < 4; i++) {
        sources[i].in.sin_family = AF_INET;
        sources[i].in.sin_port = htons((uint16_t)(40000 + (i & 1)));
        sources[i].in.sin_addr.s_addr = htonl(0xc0000200u + (uint32_t)(i >> 1));
        sources[4 + i].in6.sin6_family = AF_INET6;
        sources[4 + i].in6.sin6_port = htons((uint16_t)(40000 + (i & 1)));
        sources[4 + i].in6.sin6_addr.s6_addr[0] = 0x20;
        sources[4 + i].in6.sin6_addr.s6_addr[15] = (uint8_t)(i >> 1);
    }
}

static bool same(const union gw_udp_addr *a, const union gw_udp_addr *b)
{
    if (a->sa.sa_family != b->sa.sa_family) {
        return false;
    }
    return a->sa.sa_family == AF_INET
               ? memcmp(&a->in, &b->in, sizeof(a->in)) == 0
               : memcmp(&a->in6, &b->in6, sizeof(a->in6)) == 0;
}

/* The highest sequence the line can ever allow at now: the line from
 * (0, START_MS) at its fastest, plus the window. */
static uint64_t bound(int i, uint64_t now)
{
    uint64_t fs =
        frame_ms[i] != 0 ? (uint64_t)frame_ms[i] * 48 : GW_OPUS_MIN_SAMPLES_48K;
    uint64_t t = now - START_MS;

    t += t / 512;
    return (t * 48 + (uint64_t)GW_UDP_AHEAD_MS * 48) / fs;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    static uint8_t buf[2048];
    uint64_t now = START_MS;
    size_t at = 0;

    if (!ready) {
        set_up();
        ready = true;
    }
    for (int i = 0; i < NPEERS; i++) {
        gw__udp_uplink_reset(&peers[i], frame_ms[i], now);
        memset(&peers[i].addr, 0, sizeof(peers[i].addr));
        n_accepted[i] = 0;
    }
    while (size - at >= 4) {
        uint8_t how = data[at];
        size_t len = (size_t)data[at + 2] << 8 | data[at + 3];
        const union gw_udp_addr *from = &sources[how & 7];
        struct gw_udp_peer before[NPEERS];
        struct gw_udp_verdict v;
        bool ok;

        now += data[at + 1];
        at += 4;
        if (len > size - at || len > sizeof(buf)) {
            break;
        }
        memcpy(buf, data + at, len);
        at += len;
        if ((how & 8) && len > GW_UDP_HEADER_LEN) {
            for (int i = 0; i < NPEERS; i++) {
                if (gw_udp_header_peek_ssrc(buf) == ssrcs[i] &&
                    gw_aes_ctr_apply(device_aes[i], buf,
                                     buf + GW_UDP_HEADER_LEN,
                                     buf + GW_UDP_HEADER_LEN,
                                     len - GW_UDP_HEADER_LEN) != 0) {
                    abort();
                }
            }
        }
        memcpy(before, peers, sizeof(before));
        ok = gw__udp_uplink_judge(&table, buf, len, &from->sa, now, &v);
        for (int i = 0; i < NPEERS; i++) {
            struct gw_udp_peer *p = &peers[i];
            bool mine = v.peer == p;
            if (!mine || !ok) {
                /* Untouched, or refused: no sequence or address moved. */
                if (p->last_seq != before[i].last_seq ||
                    p->has_addr != before[i].has_addr ||
                    (p->has_addr && !same(&p->addr, &before[i].addr))) {
                    abort();
                }
                continue;
            }
            if (accepted_before(i, v.h.sequence)) {
                abort();
            }
            if (v.late) {
                /* Late: within the window below the last, from the
                 * address held, and nothing but its own bit moved. */
                if (v.h.sequence == 0 || v.h.sequence > before[i].last_seq ||
                    before[i].last_seq - v.h.sequence >= GW_UDP_LATE_WINDOW ||
                    p->last_seq != before[i].last_seq || !before[i].has_addr ||
                    !same(&before[i].addr, from) ||
                    !same(&p->addr, &before[i].addr) || v.learned || v.moved ||
                    p->line_seq != before[i].line_seq ||
                    !gw_opus_packet_sane(v.opus, v.h.payload_len)) {
                    abort();
                }
                continue;
            }
            if (v.h.sequence <= before[i].last_seq ||
                p->last_seq != v.h.sequence ||
                ((uint64_t)v.h.sequence > bound(i, now) &&
                 v.h.sequence - before[i].last_seq > GW_UDP_AHEAD_STEP) ||
                !p->has_addr || !same(&p->addr, from) ||
                v.opus != buf + GW_UDP_HEADER_LEN ||
                !gw_opus_packet_sane(v.opus, v.h.payload_len)) {
                abort();
            }
            if (v.learned != !before[i].has_addr ||
                (v.moved && !same(&v.was, &before[i].addr)) ||
                (!v.learned && !v.moved && !same(&before[i].addr, &p->addr))) {
                abort();
            }
        }
        if (ok ? v.peer == NULL : v.reason >= GW_UDP_DROP_COUNT_) {
            abort();
        }
    }
    return 0;
}

#ifdef GW_FUZZ_WRITE_SEEDS
/*
 * The seed corpus, made with the real key code: compile this file with
 * -DGW_FUZZ_WRITE_SEEDS and without -fsanitize=fuzzer (it then has a main
 * of its own), link it as the target is linked, and run it in
 * corpus/udp_uplink/.
 */
#include <stdio.h>

static uint8_t seed[8192];
static size_t seed_len;
static uint32_t seq_of[NPEERS];

/* One packet for session i, Opus of 60 ms (SILK wideband, code 0). */
static void put(int i, uint8_t how, uint8_t dt, uint32_t seq, size_t n)
{
    uint8_t *d = seed + seed_len + 4;
    struct gw_udp_header h = {GW_UDP_TYPE_AUDIO, 0, (uint16_t)n,
                              ssrcs[i],          0, seq};
    uint8_t opus[64];

    opus[0] = 11 << 3;
    for (size_t k = 1; k < n; k++) {
        opus[k] = (uint8_t)(k * 29 + seq);
    }
    gw_udp_header_pack(&h, d);
    if (gw_aes_ctr_apply(device_aes[i], d, opus, d + GW_UDP_HEADER_LEN, n) !=
        0) {
        abort();
    }
    seed[seed_len] = how;
    seed[seed_len + 1] = dt;
    seed[seed_len + 2] = (uint8_t)((GW_UDP_HEADER_LEN + n) >> 8);
    seed[seed_len + 3] = (uint8_t)(GW_UDP_HEADER_LEN + n);
    seed_len += 4 + GW_UDP_HEADER_LEN + n;
}

static void stream(int i, uint8_t how, int count)
{
    for (int k = 0; k < count; k++) {
        put(i, how, 60, ++seq_of[i], 40);
    }
}

static void write_seed(const char *name)
{
    FILE *f = fopen(name, "wb");

    if (f == NULL || fwrite(seed, 1, seed_len, f) != seed_len ||
        fclose(f) != 0) {
        abort();
    }
    seed_len = 0;
    memset(seq_of, 0, sizeof(seq_of));
}

int main(void)
{
    set_up();
    stream(0, 0, 6);
    write_seed("stream");
    stream(0, 0, 2);
    put(0, 0, 60, 0xfffffff0u, 40);
    stream(0, 0, 3);
    write_seed("far_ahead");
    stream(0, 0, 3);
    stream(0, 1, 5);
    write_seed("address_move");
    stream(0, 4, 2);
    put(0, 4, 0, 2, 40);
    put(0, 4, 0, 1, 40);
    put(0, 4, 60, 40, 40);
    stream(0, 4, 1);
    write_seed("replay_gap_v6");
    stream(1, 2, 4);
    stream(0, 3, 2);
    put(1, 2, 200, 200, 20);
    write_seed("two_sessions");
    stream(0, 0, 2);
    put(0, 0, 60, 3, 0);
    stream(0, 0, 2);
    write_seed("empty_payload");
    stream(0, 0, 3);
    put(0, 0, 60, 6, 40);
    put(0, 0, 0, 5, 40);
    put(0, 0, 0, 4, 40);
    put(0, 0, 0, 5, 40);
    put(0, 1, 0, 4, 40);
    write_seed("late_window");
    return 0;
}
#endif
