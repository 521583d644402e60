/*
 * The downlink pacer of the UDP audio socket on a real loop: a fake device
 * on 127.0.0.1 receives what gw_udp_peer_send() queued, and checks order,
 * content, pacing by each Opus packet's duration, hold, flush and limits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <opus.h>
#include <uv.h>

#include "codec/audio_frame.h"
#include "codec/udp_header.h"
#include "crypto/aes_ctr.h"
#include "crypto/session_keys.h"
#include "gateway/audio/udp_audio.h"

#include "fixture.h"
#include "fixture_parts.h"

#define NPKT      120  /* Opus packets of each kind, encoded once */
#define MAXRX     128  /* downlink datagrams the device keeps */
#define FRAME_MS  60   /* the device's uplink frame, from its hello */
#define SLACK_MS  3000 /* how late a paced packet may be on a busy machine */
#define DGRAM_MAX 1500

/*
 * 16 kHz mono Opus as a TTS backend sends it: 60 ms packets, 20 ms ones,
 * and packets whose duration cycles through 20, 40 and 60 ms.
 */
struct opus_set {
    uint8_t pkt[NPKT][400];
    size_t len[NPKT];
    unsigned ms[NPKT]; /* duration, as libopus reads the packet */
};
static struct opus_set p60, p20, pmix;

/* One downlink datagram as the device received it. */
struct rx {
    uint32_t seq, ts, ssrc;
    uint8_t flags;
    uint8_t opus[DGRAM_MAX];
    size_t len;
    uint64_t at_ms;    /* loop time of its arrival */
    bool from_gateway; /* sent from the gateway's bound address and port */
};

struct fixture {
    struct gw_fixture fx; /* the loop and the guard of every wait */
    struct gw_udp_audio *ua;
    struct sockaddr_in gw; /* the gateway's socket */
    struct gw_udp_peer peer;
    uint32_t ssrc;
    uint8_t key[16];
    /* the device */
    uv_udp_t sock;
    struct gw_aes_ctr *aes;
    uint8_t nonce[GW_SESSION_KEYS_NONCE_LEN];
    uint32_t up_seq;
    struct rx rx[MAXRX];
    size_t rx_count;
    size_t rx_bad; /* not type 1 or a length that does not add up */
    uint8_t scratch[65536];
    /* the session */
    size_t up_count;   /* uplink handed to it */
    uint64_t up_at_ms; /* loop time of the last */
};

static struct gw_udp_audio_stats stats(const struct fixture *f)
{
    struct gw_udp_audio_stats s;

    gw_udp_audio_get_stats(f->ua, &s);
    return s;
}

/* Runs the loop until cond holds; the fixture's guard fails a hang. */
#define WAIT_FOR(f, cond) GW_FIXTURE_RUN_UNTIL(&(f)->fx, cond)

/* ---- the device: the firmware's packet format ---- */

static void on_alloc(uv_handle_t *handle, size_t size, uv_buf_t *buf)
{
    struct fixture *f = handle->data;

    (void)size;
    *buf = uv_buf_init((char *)f->scratch, sizeof(f->scratch));
}

static bool is_gateway(const struct fixture *f, const struct sockaddr *addr)
{
    const struct sockaddr_in *in = (const struct sockaddr_in *)addr;

    return addr->sa_family == AF_INET && in->sin_port == f->gw.sin_port &&
           in->sin_addr.s_addr == f->gw.sin_addr.s_addr;
}

/*
 * The firmware's checks (gw_udp_header_parse applies them in its order),
 * then decryption with the header as received for the IV.
 */
static void on_recv(uv_udp_t *handle, ssize_t nread, const uv_buf_t *buf,
                    const struct sockaddr *addr, unsigned flags)
{
    struct fixture *f = handle->data;
    const uint8_t *d = (const uint8_t *)buf->base;
    struct gw_udp_header h;
    struct rx *r;

    (void)flags;
    if (nread <= 0 || addr == NULL) {
        return;
    }
    if (gw_udp_header_parse(d, (size_t)nread, &h) != 0 ||
        f->rx_count >= MAXRX) {
        f->rx_bad++;
        return;
    }
    r = &f->rx[f->rx_count++];
    r->ssrc = h.ssrc;
    r->flags = h.flags;
    r->ts = h.timestamp;
    r->seq = h.sequence;
    r->len = h.payload_len;
    r->at_ms = uv_now(&f->fx.loop);
    r->from_gateway = is_gateway(f, addr);
    assert_int_equal(gw_aes_ctr_apply(f->aes, d, d + GW_UDP_HEADER_LEN, r->opus,
                                      h.payload_len),
                     0);
}

/*
 * One uplink packet (60 ms, the hello's frame), which teaches the gateway
 * the device's address. As the firmware builds it: the hello's nonce with
 * length, timestamp and sequence written over, encrypted under itself.
 */
static void device_send(struct fixture *f, size_t k)
{
    uint8_t out[DGRAM_MAX];
    size_t len = GW_UDP_HEADER_LEN + p60.len[k];
    uv_buf_t b = uv_buf_init((char *)out, (unsigned)len);
    struct gw_udp_header h;

    assert_int_equal(gw_udp_header_parse(f->nonce, GW_UDP_HEADER_LEN, &h), 0);
    h.payload_len = (uint16_t)p60.len[k];
    h.timestamp = 0;
    h.sequence = ++f->up_seq;
    gw_udp_header_pack(&h, out);
    assert_int_equal(gw_aes_ctr_apply(f->aes, out, p60.pkt[k],
                                      out + GW_UDP_HEADER_LEN, p60.len[k]),
                     0);
    assert_int_equal(
        uv_udp_try_send(&f->sock, &b, 1, (const struct sockaddr *)&f->gw),
        (int)len);
}

/* ---- the gateway side ---- */

static void on_audio(struct gw_udp_peer *peer, uint32_t ts, uint8_t *opus,
                     size_t len, void *owner)
{
    struct fixture *f = owner;

    (void)peer;
    (void)ts;
    (void)opus;
    (void)len;
    f->up_count++;
    f->up_at_ms = uv_now(&f->fx.loop);
}

static struct fixture *fixture_new(size_t queue_bytes, unsigned prebuffer_ms)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct gw_udp_audio_options opts = {
        .bind_host = "127.0.0.1",
        .on_audio = on_audio,
        .prebuffer_ms = prebuffer_ms,
        .queue_bytes = queue_bytes,
    };
    struct sockaddr_in any;

    assert_non_null(f);
    gw_fixture_loop_init(&f->fx);
    assert_int_equal(gw_udp_audio_init(&f->fx.loop, &opts, &f->ua), 0);
    assert_int_equal(uv_ip4_addr("127.0.0.1", gw_udp_audio_port(f->ua), &f->gw),
                     0);
    gw_fixture_peer_start(f->ua, &f->peer, f->key, &f->ssrc, FRAME_MS, f);
    assert_int_equal(gw_aes_ctr_create(&f->aes), 0);
    assert_int_equal(gw_aes_ctr_set_key(f->aes, f->key), 0);
    gw_session_keys_nonce(f->ssrc, f->nonce);
    assert_int_equal(uv_udp_init(&f->fx.loop, &f->sock), 0);
    f->sock.data = f;
    assert_int_equal(uv_ip4_addr("127.0.0.1", 0, &any), 0);
    assert_int_equal(uv_udp_bind(&f->sock, (struct sockaddr *)&any, 0), 0);
    assert_int_equal(uv_udp_recv_start(&f->sock, on_alloc, on_recv), 0);
    return f;
}

/* Every handle must be gone afterwards: uv_loop_close() == 0. */
static void fixture_free(struct fixture *f)
{
    gw_udp_peer_stop(&f->peer);
    gw_udp_audio_close(f->ua, NULL, NULL);
    uv_close((uv_handle_t *)&f->sock, NULL);
    gw_fixture_loop_close(&f->fx);
    gw_aes_ctr_destroy(f->aes);
    free(f);
}

/* The device sends its first packet and the gateway learns its address. */
static void learn_address(struct fixture *f)
{
    device_send(f, 0);
    WAIT_FOR(f, f->up_count >= 1);
    assert_true(gw_udp_peer_has_address(&f->peer));
}

/* Queues packet k of set, as the session does with the backend's audio. */
static int queue_packet(struct fixture *f, const struct opus_set *set, size_t k,
                        uint32_t ts)
{
    return gw_udp_peer_send(&f->peer, ts, set->pkt[k], set->len[k]);
}

/*
 * Datagram i came from the gateway's own socket with the session's ssrc,
 * sequence seq and timestamp ts, and decrypts to packet k of set; and
 * nothing the firmware would drop came at all.
 */
static void assert_received(const struct fixture *f, size_t i,
                            const struct opus_set *set, size_t k, uint32_t ts,
                            uint32_t seq)
{
    const struct rx *r = &f->rx[i];

    assert_true(i < f->rx_count);
    assert_int_equal(f->rx_bad, 0);
    assert_true(r->from_gateway);
    assert_int_equal(r->ssrc, f->ssrc);
    assert_int_equal(r->seq, seq);
    assert_int_equal(r->ts, ts);
    assert_int_equal(r->len, set->len[k]);
    assert_memory_equal(r->opus, set->pkt[k], r->len);
}

/* Audio ahead of packet k: the sum of the durations before it. */
static uint64_t offset_ms(const struct opus_set *set, size_t k)
{
    uint64_t ms = 0;

    for (size_t i = 0; i < k; i++) {
        ms += set->ms[i];
    }
    return ms;
}

/* Packets sent at once from an idle clock: those that start within the
 * pre-buffer. */
static size_t burst_of(const struct opus_set *set, size_t n,
                       unsigned prebuffer_ms)
{
    size_t k = 0;

    while (k < n && offset_ms(set, k) < prebuffer_ms) {
        k++;
    }
    return k;
}

/* ---- order and content ---- */

static void test_order_content_and_source(void **state)
{
    struct fixture *f = fixture_new(0, 0);
    const size_t n = 12;
    const uint32_t ts0 = 0xfffffe00u; /* timestamps are opaque: they wrap */

    (void)state;
    learn_address(f);
    for (size_t k = 0; k < n; k++) {
        assert_int_equal(queue_packet(f, &p60, k, ts0 + (uint32_t)k * 960), 0);
    }
    WAIT_FOR(f, f->rx_count >= n);
    assert_int_equal(f->rx_count, n);
    assert_int_equal(f->rx_bad, 0);
    for (size_t i = 0; i < n; i++) {
        /* Sequences start at 1 and go up by one. */
        assert_received(f, i, &p60, i, ts0 + (uint32_t)i * 960,
                        (uint32_t)i + 1);
    }
    struct gw_udp_audio_stats s = stats(f);
    assert_int_equal(s.tx_audio, n);
    for (size_t r = 0; r < GW_UDP_DROP_COUNT_; r++) {
        assert_int_equal(s.drops[r], 0);
    }
    fixture_free(f);
}

/* ---- pacing ---- */

/*
 * A backend that sends a whole answer at once: the packets within the
 * pre-buffer go at once, each later one no earlier than its place in the
 * audio minus the pre-buffer, and the last not hopelessly later.
 */
static void check_pacing(const struct opus_set *set, size_t n,
                         unsigned prebuffer_ms)
{
    struct fixture *f = fixture_new(0, prebuffer_ms);
    const unsigned pre = prebuffer_ms != 0 ? prebuffer_ms : GW_UDP_PREBUFFER_MS;
    const size_t burst = burst_of(set, n, pre);
    const uint64_t due_last = offset_ms(set, n - 1) - pre;
    uint64_t t0, last;

    learn_address(f);
    uv_update_time(&f->fx.loop);
    t0 = uv_now(&f->fx.loop);
    for (size_t k = 0; k < n; k++) {
        assert_int_equal(queue_packet(f, set, k, (uint32_t)k), 0);
    }
    /* The burst went out inside the calls, the rest waits for the clock. */
    assert_true(burst > 1 && burst < n);
    assert_int_equal(stats(f).tx_audio, burst);
    WAIT_FOR(f, f->rx_count >= n);
    for (size_t k = 0; k < n; k++) {
        uint64_t due = offset_ms(set, k);
        uint64_t after = f->rx[k].at_ms - t0;
        assert_received(f, k, set, k, (uint32_t)k, (uint32_t)k + 1);
        if (due > pre && after < due - pre) {
            fail_msg("packet %zu (%u ms) arrived %llu ms after the first; "
                     "it is due at %llu ms minus the %u ms pre-buffer",
                     k, set->ms[k], (unsigned long long)after,
                     (unsigned long long)due, pre);
        }
    }
    last = f->rx[n - 1].at_ms - t0;
    print_message("pacing: %zu packets, %llu ms of audio, burst %zu, "
                  "last after %llu ms, due after %llu ms\n",
                  n, (unsigned long long)offset_ms(set, n), burst,
                  (unsigned long long)last, (unsigned long long)due_last);
    assert_true(last >= due_last);
    assert_true(last <= due_last + SLACK_MS);
    assert_int_equal(stats(f).tx_audio, n);
    fixture_free(f);
}

static void test_pacing_by_duration(void **state)
{
    (void)state;
    check_pacing(&pmix, 30, 0); /* GW_UDP_PREBUFFER_MS */
}

/* Paced as 20 ms each, not as the hello's 60 ms frames: that would take
 * three times as long, which even SLACK_MS does not cover. */
static void test_pacing_short_frames(void **state)
{
    (void)state;
    check_pacing(&p20, NPKT, 0);
}

static void test_pacing_own_prebuffer(void **state)
{
    (void)state;
    check_pacing(&pmix, 30, 100);
}

/* ---- hold ---- */

/* After "tts start" the audio waits at least the hold, then flows. */
static void test_hold_delays_first_packet(void **state)
{
    struct fixture *f = fixture_new(0, 0);
    const unsigned hold_ms = 250;
    const size_t n = 8;
    uint64_t t0;

    (void)state;
    learn_address(f);
    uv_update_time(&f->fx.loop);
    t0 = uv_now(&f->fx.loop);
    gw_udp_peer_hold(&f->peer, hold_ms);
    for (size_t k = 0; k < n; k++) {
        assert_int_equal(queue_packet(f, &p60, k, (uint32_t)k), 0);
    }
    assert_int_equal(stats(f).tx_audio, 0);
    WAIT_FOR(f, f->rx_count >= 1);
    print_message("hold: %u ms asked, first packet after %llu ms\n", hold_ms,
                  (unsigned long long)(f->rx[0].at_ms - t0));
    assert_true(f->rx[0].at_ms - t0 >= hold_ms);
    assert_true(f->rx[0].at_ms - t0 <= hold_ms + SLACK_MS);
    /* Then paced as usual, the clock starting at the end of the hold. */
    WAIT_FOR(f, f->rx_count >= n);
    for (size_t k = 0; k < n; k++) {
        assert_received(f, k, &p60, k, (uint32_t)k, (uint32_t)k + 1);
        assert_true(f->rx[k].at_ms - t0 >= hold_ms);
    }
    assert_true(f->rx[n - 1].at_ms - t0 >=
                hold_ms + offset_ms(&p60, n - 1) - GW_UDP_PREBUFFER_MS);
    assert_int_equal(stats(f).tx_audio, n);
    fixture_free(f);
}

/* ---- flush ---- */

/*
 * An abort while the pacer is sending: what is queued is dropped and
 * counted, and the clock restarts, so a new answer starts with a burst.
 */
static void test_flush_drops_queue(void **state)
{
    struct fixture *f = fixture_new(0, 0);
    const size_t n = 20;
    const size_t burst = GW_UDP_PREBUFFER_MS / FRAME_MS;
    const size_t again = burst + 1; /* a burst and one paced packet */
    struct gw_udp_audio_stats s;
    size_t sent, flushed;
    uint32_t seq;

    (void)state;
    learn_address(f);
    for (size_t k = 0; k < n; k++) {
        assert_int_equal(queue_packet(f, &p60, k, (uint32_t)k), 0);
    }
    assert_int_equal(stats(f).tx_audio, burst);
    /* The first paced packet is out: the pacer is at work. */
    WAIT_FOR(f, f->rx_count >= burst + 1);
    sent = stats(f).tx_audio;
    flushed = gw_udp_peer_flush(&f->peer);
    assert_int_equal(flushed, n - sent);
    assert_true(flushed > 0);
    assert_int_equal(gw_udp_peer_flush(&f->peer), 0);
    assert_int_equal(stats(f).tx_flushed, flushed);
    for (size_t k = 0; k < again; k++) {
        assert_int_equal(queue_packet(f, &p60, 30 + k, 1000 + (uint32_t)k), 0);
    }
    assert_int_equal(stats(f).tx_audio, sent + burst);
    /* The paced one leaves through the pacer, behind anything still
     * queued: once it is here, nothing flushed can follow. */
    WAIT_FOR(f, f->rx_count >= sent + again);
    assert_int_equal(f->rx_count, sent + again);
    for (size_t i = 0; i < sent; i++) {
        assert_received(f, i, &p60, i, (uint32_t)i, (uint32_t)i + 1);
    }
    /* Flushed packets had their sequences: the next ones only go up. */
    seq = f->rx[sent].seq;
    assert_true(seq > sent);
    for (size_t k = 0; k < again; k++) {
        assert_received(f, sent + k, &p60, 30 + k, 1000 + (uint32_t)k,
                        seq + (uint32_t)k);
    }
    s = stats(f);
    assert_int_equal(s.tx_audio, sent + again);
    assert_int_equal(s.tx_flushed, flushed);
    fixture_free(f);
}

/* ---- limits ---- */

/* Per queued record: a 4-byte length and duration, padding to 4 bytes. */
#define REC_MIN 4
#define REC_MAX 7

/* A small queue: what does not fit is refused, counted, and costs no
 * sequence number. */
static void test_queue_cap(void **state)
{
    const size_t cap = 2048;
    struct fixture *f = fixture_new(cap, 0);
    const size_t n = 40;
    const size_t burst = GW_UDP_PREBUFFER_MS / FRAME_MS;
    size_t kept[NPKT], nkept = 0, refused = 0, more = 0;
    size_t used_min = 0, used_max = 0; /* bytes queued, bounds */

    (void)state;
    learn_address(f);
    for (size_t k = 0; k < n; k++) {
        size_t dgram = GW_UDP_HEADER_LEN + p60.len[k];
        int err = queue_packet(f, &p60, k, (uint32_t)k);
        if (k < burst) { /* sent at once, never queued */
            assert_int_equal(err, 0);
            kept[nkept++] = k;
            continue;
        }
        if (err == GW_ELIMIT) {
            /* Only what cannot fit, at the most overhead, is refused. */
            assert_true(used_max + dgram + REC_MAX > cap);
            refused++;
            continue;
        }
        assert_int_equal(err, 0);
        kept[nkept++] = k;
        used_min += dgram + REC_MIN;
        used_max += dgram + REC_MAX;
        assert_true(used_min <= cap);
    }
    print_message("queue cap: %zu bytes, %zu queued, %zu refused\n", cap,
                  nkept - burst, refused);
    assert_true(refused > 0);
    assert_true(nkept > burst);
    assert_int_equal(stats(f).drops[GW_UDP_DROP_QUEUE_FULL], refused);
    /* Once some went out there is room again (the ring wraps): what is
     * taken then follows on in sequence. */
    WAIT_FOR(f, f->rx_count >= burst + 3);
    for (size_t k = n; k < n + 10; k++) {
        int err = queue_packet(f, &p60, k, (uint32_t)k);
        assert_true(err == 0 || err == GW_ELIMIT);
        if (err == 0) {
            kept[nkept++] = k;
            more++;
        } else {
            refused++;
        }
    }
    assert_true(more > 0);
    assert_int_equal(stats(f).drops[GW_UDP_DROP_QUEUE_FULL], refused);
    WAIT_FOR(f, f->rx_count >= nkept);
    for (size_t i = 0; i < nkept; i++) {
        assert_received(f, i, &p60, kept[i], (uint32_t)kept[i],
                        (uint32_t)i + 1);
    }
    assert_int_equal(stats(f).tx_audio, nkept);
    fixture_free(f);
}

/*
 * Before the device's first packet its address is unknown: downlink is
 * queued up to GW_UDP_HOLD_MS of audio, the rest refused and counted as
 * no_address; the queue goes out, paced, once the address is learned.
 */
static void test_before_address(void **state)
{
    struct fixture *f = fixture_new(0, 0);
    const size_t fits = GW_UDP_HOLD_MS / FRAME_MS;
    const size_t extra = 3;
    uint64_t t0;

    (void)state;
    for (size_t k = 0; k < fits + extra; k++) {
        int err = queue_packet(f, &p60, k, 500 + (uint32_t)k);
        assert_int_equal(err, k < fits ? 0 : GW_ELIMIT);
    }
    assert_false(gw_udp_peer_has_address(&f->peer));
    assert_int_equal(stats(f).drops[GW_UDP_DROP_NO_ADDRESS], extra);
    assert_int_equal(stats(f).tx_audio, 0);
    learn_address(f);
    t0 = f->up_at_ms;
    WAIT_FOR(f, f->rx_count >= fits);
    assert_int_equal(f->rx_count, fits);
    for (size_t k = 0; k < fits; k++) {
        assert_received(f, k, &p60, k, 500 + (uint32_t)k, (uint32_t)k + 1);
        if (offset_ms(&p60, k) > GW_UDP_PREBUFFER_MS) {
            assert_true(f->rx[k].at_ms - t0 >=
                        offset_ms(&p60, k) - GW_UDP_PREBUFFER_MS);
        }
    }
    assert_int_equal(stats(f).tx_audio, fits);
    assert_int_equal(stats(f).drops[GW_UDP_DROP_NO_ADDRESS], extra);
    fixture_free(f);
}

/* ---- keystream ---- */

/*
 * Each datagram's payload is encrypted with the counter blocks header,
 * header + 1, ... (a 128-bit big-endian increment per 16 bytes): the
 * device's own reading of what the gateway sent, independent of how the
 * gateway builds it.
 */
#define KS_FRAMES_MAX 320  /* downlink frames of one size, per framing */
#define KS_LEN_MAX    1276 /* the largest one-frame Opus packet */
#define KS_BATCH      40   /* frames sent before the device reads them */
#define BLOCK_LEN     16
#define KS_MAX        ((KS_FRAMES_MAX + 1) * ((KS_LEN_MAX + 15) / BLOCK_LEN))

static const char *const framing_names[] = {
#define XX(name, text) [GW_FRAMING_##name] = text,
    GW_FRAMING_MAP(XX)
#undef XX
};

struct block {
    uint8_t b[BLOCK_LEN];
};

struct blocks {
    struct block v[KS_MAX];
    size_t n;
};

static struct blocks ks_down, ks_up;

static void add_blocks(struct blocks *set, const uint8_t hdr[BLOCK_LEN],
                       size_t payload_len)
{
    struct block c;

    memcpy(c.b, hdr, BLOCK_LEN);
    for (size_t i = 0; i * BLOCK_LEN < payload_len; i++) {
        assert_true(set->n < KS_MAX);
        set->v[set->n++] = c;
        for (int j = BLOCK_LEN - 1; j >= 0 && ++c.b[j] == 0; j--) {
        }
    }
}

static int block_cmp(const void *a, const void *b)
{
    return memcmp(a, b, BLOCK_LEN);
}

/* Blocks of set that equal an earlier one of set; sorts set. */
static size_t count_repeats(struct blocks *set)
{
    size_t n = 0;

    qsort(set->v, set->n, sizeof(set->v[0]), block_cmp);
    for (size_t i = 1; i < set->n; i++) {
        n += memcmp(&set->v[i], &set->v[i - 1], BLOCK_LEN) == 0;
    }
    return n;
}

/* Blocks of down that also are in up (sorted). */
static size_t count_shared(const struct blocks *down, const struct blocks *up)
{
    size_t n = 0;

    for (size_t i = 0; i < down->n; i++) {
        n += bsearch(&down->v[i], up->v, up->n, sizeof(up->v[0]), block_cmp) !=
             NULL;
    }
    return n;
}

/*
 * One uplink packet of len bytes as the firmware builds it (the nonce with
 * length, timestamp and sequence written over), its counter blocks noted.
 */
static void device_send_noted(struct fixture *f, const uint8_t *opus,
                              size_t len, uint32_t ts, struct blocks *up)
{
    uint8_t out[DGRAM_MAX];
    uv_buf_t b = uv_buf_init((char *)out, (unsigned)(GW_UDP_HEADER_LEN + len));
    struct gw_udp_header h;

    assert_int_equal(gw_udp_header_parse(f->nonce, GW_UDP_HEADER_LEN, &h), 0);
    h.payload_len = (uint16_t)len;
    h.timestamp = ts;
    h.sequence = ++f->up_seq;
    gw_udp_header_pack(&h, out);
    add_blocks(up, out, len);
    assert_int_equal(
        gw_aes_ctr_apply(f->aes, out, opus, out + GW_UDP_HEADER_LEN, len), 0);
    assert_int_equal(
        uv_udp_try_send(&f->sock, &b, 1, (const struct sockaddr *)&f->gw),
        (int)(GW_UDP_HEADER_LEN + len));
}

/*
 * What a backend of this framing hands the session for frame k: the Opus
 * packet and, where the framing has one, the backend's timestamp
 * (constant when steady is false, the worst a backend can do).
 */
static uint32_t backend_frame(enum gw_framing framing, bool steady, size_t k,
                              const uint8_t *opus, size_t len,
                              const uint8_t **out)
{
    static uint8_t msg[GW_AUDIO_FRAME_MAX_HEADER_LEN + DGRAM_MAX];
    size_t msg_len, got;
    uint32_t ts;

    assert_int_equal(
        gw_audio_frame_encode(framing, steady ? (uint32_t)k * FRAME_MS : 0,
                              opus, len, msg, sizeof(msg), &msg_len),
        0);
    assert_int_equal(
        gw_audio_frame_decode(framing, msg, msg_len, &ts, out, &got), 0);
    assert_int_equal(got, len);
    return ts;
}

/*
 * A reply of n equal-sized frames of len bytes, as each framing brings it,
 * while the device streams equal-sized uplink (realtime mode) echoing the
 * downlink timestamps (server AEC). Returns how many counter blocks the
 * gateway encrypted with were used before: by an earlier downlink block,
 * or by the device under the same key. Should be none.
 */
static size_t check_keystream(enum gw_framing framing, bool steady, size_t n,
                              size_t len)
{
    /* Generous pre-buffer: each batch leaves at once. */
    struct fixture *f = fixture_new(0, 600000);
    uint8_t opus[KS_LEN_MAX];
    size_t repeats, shared, done = 0;

    assert_true(n <= KS_FRAMES_MAX && len <= KS_LEN_MAX);
    ks_down.n = ks_up.n = 0;
    /* One 60 ms SILK frame, then bytes that need not decode. */
    opus[0] = 11 << 3;
    for (size_t i = 1; i < len; i++) {
        opus[i] = (uint8_t)(i * 37);
    }
    device_send_noted(f, opus, len, 0, &ks_up);
    WAIT_FOR(f, f->up_count >= 1);
    assert_true(gw_udp_peer_has_address(&f->peer));
    while (done < n) {
        size_t batch = n - done < KS_BATCH ? n - done : KS_BATCH;
        f->rx_count = 0;
        for (size_t k = done; k < done + batch; k++) {
            const uint8_t *pkt;
            uint32_t ts = backend_frame(framing, steady, k, opus, len, &pkt);
            assert_int_equal(gw_udp_peer_send(&f->peer, ts, pkt, len), 0);
        }
        WAIT_FOR(f, f->rx_count >= batch);
        for (size_t i = 0; i < batch; i++) {
            const struct rx *r = &f->rx[i];
            uint8_t hdr[GW_UDP_HEADER_LEN];
            struct gw_udp_header h = {
                .type = GW_UDP_TYPE_AUDIO,
                .flags = r->flags,
                .payload_len = (uint16_t)r->len,
                .ssrc = r->ssrc,
                .timestamp = r->ts,
                .sequence = r->seq,
            };
            size_t k = done + i;
            /* What the firmware checks: consecutive sequences, no gap to
             * warn of; and the audio intact. */
            assert_int_equal(r->seq, k + 1);
            assert_true(r->from_gateway);
            assert_int_equal(r->len, len);
            assert_memory_equal(r->opus, opus, len);
            assert_int_equal(
                r->ts, framing == GW_FRAMING_V2 && steady ? k * FRAME_MS : 0);
            gw_udp_header_pack(&h, hdr);
            add_blocks(&ks_down, hdr, r->len);
            /* The device streams on, echoing what it played. */
            device_send_noted(f, opus, len, r->ts, &ks_up);
        }
        done += batch;
        /* Read, not necessarily taken: sent faster than real time, the
         * long run's uplink soon runs ahead of the forward window. Only
         * its counter blocks matter here. */
        WAIT_FOR(f, stats(f).rx_packets >= 1 + done);
    }
    assert_int_equal(f->rx_bad, 0);
    repeats = count_repeats(&ks_down);
    (void)count_repeats(&ks_up); /* sorts it */
    shared = count_shared(&ks_down, &ks_up);
    print_message("keystream %s%s, %zu frames of %zu bytes: %zu downlink "
                  "blocks, %zu repeated, %zu shared with the %zu uplink "
                  "blocks\n",
                  framing_names[framing],
                  framing == GW_FRAMING_V2
                      ? (steady ? " (timestamps)" : " (timestamp 0)")
                      : "",
                  n, len, ks_down.n, repeats, shared, ks_up.n);
    assert_int_equal(ks_down.n, n * ((len + 15) / BLOCK_LEN));
    fixture_free(f);
    return repeats + shared;
}

/*
 * Every framing, backend timestamps steady or stuck, a short reply like
 * the capture and a long one of the largest frames (more than
 * twice round the flags' 7-bit sequence).
 */
static void test_keystream_unique(void **state)
{
    const struct {
        enum gw_framing framing;
        bool steady;
    } kinds[] = {
        {GW_FRAMING_V2, true},
        {GW_FRAMING_V2, false},
        {GW_FRAMING_V3, false},
        {GW_FRAMING_RAW, false},
    };
    size_t reused[8];

    (void)state;
    /* All first, so that a failure shows every count. */
    for (size_t i = 0; i < 4; i++) {
        reused[2 * i] =
            check_keystream(kinds[i].framing, kinds[i].steady, 48, 160);
        reused[2 * i + 1] = check_keystream(kinds[i].framing, kinds[i].steady,
                                            KS_FRAMES_MAX, KS_LEN_MAX);
    }
    for (size_t i = 0; i < 8; i++) {
        assert_int_equal(reused[i], 0);
    }
}

/*
 * The last sequences: the largest packet's blocks stop short of carrying
 * into the timestamp, and past GW_UDP_DOWNLINK_SEQ_MAX downlink is
 * refused and counted rather than sent with blocks used before.
 */
static void test_sequence_end(void **state)
{
    struct fixture *f = fixture_new(0, 600000);
    uint8_t opus[KS_LEN_MAX];
    const size_t len = KS_LEN_MAX;

    (void)state;
    opus[0] = 11 << 3;
    memset(opus + 1, 0x5a, len - 1);
    learn_address(f);
    /* White box: the sequence a session reaches after 2^32 - 95 packets. */
    f->peer.tx_seq = GW_UDP_DOWNLINK_SEQ_MAX - 2;
    for (int k = 0; k < 2; k++) {
        assert_int_equal(gw_udp_peer_send(&f->peer, 7, opus, len), 0);
    }
    assert_int_equal(gw_udp_peer_send(&f->peer, 7, opus, len), GW_ELIMIT);
    assert_int_equal(stats(f).drops[GW_UDP_DROP_SEQ_END], 1);
    WAIT_FOR(f, f->rx_count >= 2);
    assert_int_equal(f->rx[1].seq, GW_UDP_DOWNLINK_SEQ_MAX);
    assert_int_equal(f->rx[1].flags,
                     gw_udp_header_downlink_flags(GW_UDP_DOWNLINK_SEQ_MAX));
    assert_memory_equal(f->rx[1].opus, opus, len);
    /* Not even a payload of GW_UDP_MAX_PAYLOAD would carry out of the
     * sequence word; this one's blocks keep the header's first 12 bytes. */
    assert_true((uint64_t)f->rx[1].seq + GW_UDP_MAX_BLOCKS - 1 <= UINT32_MAX);
    {
        uint8_t hdr[GW_UDP_HEADER_LEN];
        struct gw_udp_header h = {
            .type = GW_UDP_TYPE_AUDIO,
            .flags = f->rx[1].flags,
            .payload_len = (uint16_t)len,
            .ssrc = f->rx[1].ssrc,
            .timestamp = f->rx[1].ts,
            .sequence = f->rx[1].seq,
        };
        gw_udp_header_pack(&h, hdr);
        ks_down.n = 0;
        add_blocks(&ks_down, hdr, len);
        for (size_t i = 0; i < ks_down.n; i++) {
            assert_memory_equal(ks_down.v[i].b, hdr, 12);
        }
    }
    assert_int_equal(stats(f).tx_audio, 2);
    fixture_free(f);
}

/* ---- the packets ---- */

/* Packet k lasts pattern[k % n] ms; false if libopus would not. */
static bool encode_set(struct opus_set *set, const unsigned *pattern, size_t n)
{
    OpusEncoder *enc =
        opus_encoder_create(16000, 1, OPUS_APPLICATION_AUDIO, (int[]){0});
    opus_int16 pcm[960];
    uint32_t noise = 7;
    bool ok = enc != NULL;

    if (ok) {
        opus_encoder_ctl(enc, OPUS_SET_COMPLEXITY(0));
        opus_encoder_ctl(enc, OPUS_SET_BITRATE(24000));
    }
    for (size_t k = 0; ok && k < NPKT; k++) {
        int samples = (int)pattern[k % n] * 16;
        for (int i = 0; i < samples; i++) {
            /* A 250 Hz sawtooth under noise: never silence. */
            noise = noise * 1664525u + 1013904223u;
            pcm[i] = (opus_int16)((i % 64) * 200 - 6400 +
                                  (int32_t)(noise >> 23) - 256);
        }
        int len = opus_encode(enc, pcm, samples, set->pkt[k],
                              (opus_int32)sizeof(set->pkt[k]));
        ok = len >= 2;
        if (ok) {
            set->len[k] = (size_t)len;
            set->ms[k] =
                (unsigned)opus_packet_get_nb_samples(set->pkt[k], len, 48000) /
                48;
            ok = set->ms[k] == pattern[k % n];
        }
    }
    opus_encoder_destroy(enc);
    return ok;
}

static int encode_packets(void **state)
{
    (void)state;
    return encode_set(&p60, (const unsigned[]){60}, 1) &&
                   encode_set(&p20, (const unsigned[]){20}, 1) &&
                   encode_set(&pmix, (const unsigned[]){20, 40, 60}, 3)
               ? 0
               : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_content_and_source),
        cmocka_unit_test(test_pacing_by_duration),
        cmocka_unit_test(test_pacing_short_frames),
        cmocka_unit_test(test_pacing_own_prebuffer),
        cmocka_unit_test(test_hold_delays_first_packet),
        cmocka_unit_test(test_flush_drops_queue),
        cmocka_unit_test(test_queue_cap),
        cmocka_unit_test(test_before_address),
        cmocka_unit_test(test_keystream_unique),
        cmocka_unit_test(test_sequence_end),
    };

    return cmocka_run_group_tests(tests, encode_packets, NULL);
}
