/*
 * The UDP audio socket: recvmmsg batches, ssrc demultiplexing, in-place
 * AES-CTR, the replay and address rules of PROTOCOL.md section 4, and a
 * downlink paced so that the device's 40-frame play queue never overflows.
 */

#include "gateway/udp_audio.h"

#include <stdlib.h>
#include <string.h>

#include <utlist.h>

#include "codec/opus_packet.h"
#include "codec/udp_header.h"
#include "gateway/log.h"
#include "gateway/ssrc_table.h"

/*
 * libuv 1.44 cuts the receive buffer into 64 KiB slots, one datagram per
 * slot, and asks recvmmsg for at most 20 datagrams per call (src/unix/
 * udp.c: UV__UDP_DGRAM_MAXSIZE, UV__MMSG_MAXWIDTH). A smaller buffer would
 * give zero slots and read nothing, so the buffer is 20 whole slots: one
 * per instance, reused for every batch.
 */
#define RX_SLOT  (64 * 1024)
#define RX_SLOTS 20

/*
 * Reading pauses RX_PAUSE_MS once the socket is drained, so that packets
 * arriving one by one (1000 devices send 16 a millisecond, evenly spread)
 * are read in batches: a wakeup and two recvmmsg calls per packet cost
 * more than everything else done for it. Voice frames are 60 ms: 2 ms of
 * delay is not heard. After a cycle of RX_BUSY datagrams or more, reading
 * goes on without a pause, which bounds what queues in the socket buffer.
 */
#define RX_PAUSE_MS 2
#define RX_BUSY     64

/* Best effort: a loop stall of a few ms at 1000 devices must not drop. */
#define RX_SOCKBUF (4 * 1024 * 1024)
#define TX_SOCKBUF (1024 * 1024)

#define PACE_INTERVAL_MS 10
#define SAMPLES_PER_MS   48 /* Opus durations are counted at 48 kHz */

/* Rate limit of the per-packet debug lines: a burst per second. */
#define LOG_BURST 10

/* A queued downlink datagram starts with this, 4-byte aligned. */
struct record {
    uint16_t len;     /* datagram bytes that follow */
    uint16_t samples; /* its duration at 48 kHz (at most 5760) */
};

#define RECORD_SIZE(len)                                                       \
    ((uint32_t)sizeof(struct record) + (((len) + 3u) & ~3u))
#define MAX_DATAGRAM (GW_UDP_HEADER_LEN + GW_UDP_MAX_PAYLOAD)

struct gw_udp_audio {
    uv_loop_t *loop;
    uv_udp_t sock;                 /* the advertised socket, both directions */
    uv_timer_t pace_timer;         /* runs while pace_head is not NULL */
    uv_timer_t rx_timer;           /* ends a pause in reading */
    int handles_open;              /* closes still to come */
    unsigned rx_batch;             /* datagrams of the current recvmmsg */
    unsigned rx_cycle;             /* datagrams since the last pause */
    bool closing;                  /* gw_udp_audio_close() was called */
    gw_udp_close_cb close_cb;      /* called once all handles closed */
    void *close_arg;               /* for close_cb */
    gw_udp_audio_cb on_audio;      /* accepted uplink goes here */
    struct gw_ssrc_table peers;    /* ssrc -> struct gw_udp_peer */
    struct gw_udp_peer *pace_head; /* peers with downlink queued */
    uint64_t prebuffer_samples;    /* audio allowed ahead of the device */
    uint64_t hold_samples;         /* downlink held without an address */
    uint32_t queue_bytes;          /* ring size of each peer */
    int port;                      /* bound port */
    struct gw_udp_audio_stats stats;
    uint64_t log_window_ms;   /* start of the current rate-limit second */
    unsigned log_budget;      /* debug lines left in it */
    uint8_t tx[MAX_DATAGRAM]; /* downlink sent without queueing */
    _Alignas(16) uint8_t rx[RX_SLOTS * RX_SLOT]; /* one batch of uplink */
};

static const char *const drop_names[GW_UDP_DROP_COUNT_] = {
    [GW_UDP_DROP_SHORT] = "short",
    [GW_UDP_DROP_TYPE] = "type",
    [GW_UDP_DROP_LENGTH] = "length",
    [GW_UDP_DROP_TOOBIG] = "toobig",
    [GW_UDP_DROP_UNKNOWN] = "unknown_ssrc",
    [GW_UDP_DROP_REPLAY] = "replay",
    [GW_UDP_DROP_OPUS] = "opus",
    [GW_UDP_DROP_ADDRESS] = "address",
    [GW_UDP_DROP_NO_ADDRESS] = "no_address",
    [GW_UDP_DROP_QUEUE_FULL] = "queue_full",
    [GW_UDP_DROP_SEND] = "send",
    [GW_UDP_DROP_EMPTY] = "empty",
    [GW_UDP_DROP_TX_INVALID] = "tx_invalid",
};

const char *gw_udp_drop_name(enum gw_udp_drop reason)
{
    if ((unsigned)reason >= GW_UDP_DROP_COUNT_) {
        return "?";
    }
    return drop_names[reason];
}

/* ---- addresses and logging ---- */

static void format_addr(const struct sockaddr *sa, char *out, size_t size)
{
    char ip[64];
    bool v6 = sa != NULL && sa->sa_family == AF_INET6;

    if (sa == NULL || uv_ip_name(sa, ip, sizeof(ip)) != 0) {
        snprintf(out, size, "-");
        return;
    }
    snprintf(out, size, v6 ? "[%s]:%u" : "%s:%u", ip,
             (unsigned)ntohs(v6 ? ((const struct sockaddr_in6 *)sa)->sin6_port
                                : ((const struct sockaddr_in *)sa)->sin_port));
}

static bool same_addr(const union gw_udp_addr *a, const struct sockaddr *b)
{
    if (a->sa.sa_family != b->sa_family) {
        return false;
    }
    if (b->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)b;
        return a->in.sin_port == in->sin_port &&
               a->in.sin_addr.s_addr == in->sin_addr.s_addr;
    }
    if (b->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)b;
        return a->in6.sin6_port == in6->sin6_port &&
               a->in6.sin6_scope_id == in6->sin6_scope_id &&
               memcmp(&a->in6.sin6_addr, &in6->sin6_addr,
                      sizeof(in6->sin6_addr)) == 0;
    }
    return false;
}

static void copy_addr(union gw_udp_addr *dst, const struct sockaddr *src)
{
    memset(dst, 0, sizeof(*dst));
    if (src->sa_family == AF_INET6) {
        memcpy(&dst->in6, src, sizeof(dst->in6));
    } else {
        memcpy(&dst->in, src, sizeof(dst->in));
    }
}

static const char *peer_subject(const struct gw_udp_peer *peer)
{
    return peer->subject != NULL ? peer->subject : "udp";
}

/*
 * Counts a drop and, at debug level, says so at most LOG_BURST times a
 * second: a flood must cost a counter increment, not a write(2).
 */
static void note_drop(struct gw_udp_audio *ua, enum gw_udp_drop reason,
                      const struct sockaddr *from)
{
    char name[80];
    uint64_t now;

    ua->stats.drops[reason]++;
    if (gw_log_get_level() < GW_LOG_DEBUG) {
        return;
    }
    now = uv_now(ua->loop);
    if (now - ua->log_window_ms >= 1000) {
        ua->log_window_ms = now;
        ua->log_budget = LOG_BURST;
    }
    if (ua->log_budget == 0) {
        return; /* the counters have the rest */
    }
    ua->log_budget--;
    format_addr(from, name, sizeof(name));
    gw_log(GW_LOG_DEBUG, "udp", "drop %s from %s", gw_udp_drop_name(reason),
           name);
}

/* ---- the downlink queue: a ring of variable-length records ---- */

/*
 * Where a record of rec bytes would go, without changing the ring. Free
 * space is [wr, rd) when wrapped, else [wr, cap) and then [0, rd).
 */
static bool queue_find(const struct gw_udp_queue *q, uint32_t rec,
                       uint32_t *off)
{
    uint32_t end = q->wrapped ? q->rd : q->cap;

    if (q->count == 0) {
        *off = 0;
        return rec <= q->cap;
    }
    *off = q->wr;
    if (end - q->wr >= rec) {
        return true;
    }
    *off = 0;
    return !q->wrapped && q->rd >= rec;
}

static void queue_clear(struct gw_udp_queue *q)
{
    q->rd = q->wr = q->count = 0;
    q->wrapped = false;
    q->samples = 0;
}

static void queue_commit(struct gw_udp_queue *q, uint32_t off, uint32_t rec,
                         uint32_t samples)
{
    if (q->count == 0) {
        queue_clear(q);
    } else if (!q->wrapped && off < q->wr) {
        q->wrap = q->wr;
        q->wrapped = true;
    }
    q->wr = off + rec;
    q->count++;
    q->samples += samples;
}

static struct record queue_front(const struct gw_udp_queue *q)
{
    struct record r;

    memcpy(&r, q->buf + q->rd, sizeof(r));
    return r;
}

static void queue_pop(struct gw_udp_queue *q, const struct record *r)
{
    q->rd += RECORD_SIZE(r->len);
    q->count--;
    q->samples -= r->samples;
    if (q->count == 0) {
        queue_clear(q);
    } else if (q->wrapped && q->rd == q->wrap) {
        q->rd = 0;
        q->wrapped = false;
    }
}

/* ---- pacing ---- */

static void on_pace(uv_timer_t *timer);

static void pace_add(struct gw_udp_peer *peer)
{
    struct gw_udp_audio *ua = peer->ua;

    if (!peer->pacing) {
        DL_APPEND2(ua->pace_head, peer, pace_prev, pace_next);
        peer->pacing = true;
    }
    if (!uv_is_active((uv_handle_t *)&ua->pace_timer)) {
        uv_timer_start(&ua->pace_timer, on_pace, PACE_INTERVAL_MS,
                       PACE_INTERVAL_MS);
    }
}

static void pace_remove(struct gw_udp_peer *peer)
{
    if (peer->pacing) {
        DL_DELETE2(peer->ua->pace_head, peer, pace_prev, pace_next);
        peer->pacing = false;
    }
}

/*
 * The device starts playing when audio arrives and plays in real time, so
 * what it holds is what was sent minus what it has played since then:
 * played_samples ahead of the clock started at play_start_ms. Once that
 * reaches zero the device has run dry, and the next packet starts a new
 * clock (the device starts again when it arrives).
 */
static int64_t sync_clock(struct gw_udp_peer *peer, uint64_t now)
{
    int64_t elapsed = (int64_t)(now - peer->play_start_ms) * SAMPLES_PER_MS;
    int64_t ahead = (int64_t)peer->played_samples - elapsed;

    if (ahead <= 0) {
        peer->play_start_ms = now;
        peer->played_samples = 0;
        ahead = 0;
    }
    return ahead;
}

static void send_datagram(struct gw_udp_audio *ua, struct gw_udp_peer *peer,
                          const uint8_t *dgram, size_t len)
{
    uv_buf_t buf = uv_buf_init((char *)dgram, (unsigned)len);

    /* Synchronous and request-free; a full socket buffer is a drop, since
     * late audio is worse than lost audio. */
    if (uv_udp_try_send(&ua->sock, &buf, 1, &peer->addr.sa) < 0) {
        note_drop(ua, GW_UDP_DROP_SEND, &peer->addr.sa);
        return;
    }
    ua->stats.tx_audio++;
}

/* Sends queued packets while the device is less than a pre-buffer ahead. */
static void drain(struct gw_udp_audio *ua, struct gw_udp_peer *peer,
                  uint64_t now)
{
    struct gw_udp_queue *q = &peer->queue;

    if (now < peer->hold_until_ms) {
        return;
    }
    while (q->count > 0 &&
           sync_clock(peer, now) < (int64_t)ua->prebuffer_samples) {
        struct record r = queue_front(q);
        send_datagram(ua, peer, q->buf + q->rd + sizeof(r), r.len);
        peer->played_samples += r.samples;
        queue_pop(q, &r);
    }
}

static void on_pace(uv_timer_t *timer)
{
    struct gw_udp_audio *ua = timer->data;
    struct gw_udp_peer *peer, *next;
    uint64_t now;

    if (ua->closing) {
        return;
    }
    now = uv_now(ua->loop);
    DL_FOREACH_SAFE2(ua->pace_head, peer, next, pace_next)
    {
        drain(ua, peer, now);
        if (peer->queue.count == 0) {
            pace_remove(peer);
        }
    }
    if (ua->pace_head == NULL) {
        uv_timer_stop(&ua->pace_timer);
    }
}

/* ---- uplink ---- */

static enum gw_udp_drop parse_drop(int err)
{
    return err == GW_ETRUNC    ? GW_UDP_DROP_SHORT
           : err == GW_EPROTO  ? GW_UDP_DROP_TYPE
           : err == GW_ETOOBIG ? GW_UDP_DROP_TOOBIG
                               : GW_UDP_DROP_LENGTH;
}

static uint64_t toc_bit(uint8_t toc)
{
    /* Config, bandwidth and stereo bits; the frame-count code may vary. */
    return UINT64_C(1) << (toc >> 2);
}

/*
 * Does this packet look like the device's stream: the frame duration its
 * hello announced, and a TOC (mode, bandwidth, channels) that the stream
 * has already used? Both are free for the real device and each costs a
 * blind forger a factor the size of the TOC space.
 */
static bool fits_stream(const struct gw_udp_peer *peer,
                        const struct gw_opus_info *info, uint8_t toc)
{
    if (peer->frame_samples_48k != 0 &&
        (uint32_t)info->samples_48k != peer->frame_samples_48k) {
        return false;
    }
    return peer->toc_seen == 0 || (peer->toc_seen & toc_bit(toc)) != 0;
}

static void forget_candidate(struct gw_udp_peer *peer)
{
    peer->has_candidate = false;
    peer->candidate_hits = 0;
}

/* A dropped packet from the candidate address breaks its run. */
static void break_candidate(struct gw_udp_peer *peer,
                            const struct sockaddr *from)
{
    if (peer->has_candidate && same_addr(&peer->candidate, from)) {
        forget_candidate(peer);
    }
}

static void drop_for_peer(struct gw_udp_audio *ua, struct gw_udp_peer *peer,
                          enum gw_udp_drop reason, const struct sockaddr *from)
{
    break_candidate(peer, from);
    note_drop(ua, reason, from);
}

/*
 * The address move rule (PROTOCOL.md section 4). AES-CTR has no integrity,
 * so anyone who has seen an ssrc can send packets that decrypt to
 * something; moving the downlink on one of them would hand the device's
 * audio to the sender (the Node gateway's hijack). A packet from a new
 * address therefore only counts if it is in order (above the session's
 * last sequence and the candidate's previous one) and decrypts to Opus of
 * the stream's frame duration and an already used TOC: noise passes that
 * with a probability of about 1/64. GW_UDP_MOVE_PACKETS must pass in a
 * row, spread over at least half their real-time span, so a flood of
 * guesses gains nothing (a burst is over long before the span is) and a
 * paced one needs about 64^4 tries at a few per second. The device's own
 * packets from the current address reset the trial, and none of the trial
 * packets is forwarded or moves last_seq until the move, so a forger can
 * neither replay into nor stall the real stream. A genuine move (NAT
 * rebinding, roaming) costs GW_UDP_MOVE_PACKETS - 1 frames of audio.
 */
static bool try_move(struct gw_udp_audio *ua, struct gw_udp_peer *peer,
                     const struct gw_udp_header *h,
                     const struct gw_opus_info *info, uint8_t toc,
                     const struct sockaddr *from, uint64_t now)
{
    uint64_t frame_ms, min_span_ms;
    char was[80], is[80];

    if (!fits_stream(peer, info, toc)) {
        break_candidate(peer, from);
        return false;
    }
    if (!peer->has_candidate || !same_addr(&peer->candidate, from) ||
        h->sequence <= peer->candidate_seq) {
        copy_addr(&peer->candidate, from);
        peer->has_candidate = true;
        peer->candidate_hits = 0;
        peer->candidate_since_ms = now;
    }
    peer->candidate_seq = h->sequence;
    peer->candidate_hits++;
    frame_ms = peer->frame_samples_48k != 0
                   ? peer->frame_samples_48k / SAMPLES_PER_MS
                   : 60;
    min_span_ms = (GW_UDP_MOVE_PACKETS - 1) * frame_ms / 2;
    if (peer->candidate_hits < GW_UDP_MOVE_PACKETS ||
        now - peer->candidate_since_ms < min_span_ms) {
        return false;
    }
    format_addr(&peer->addr.sa, was, sizeof(was));
    format_addr(from, is, sizeof(is));
    gw_log(GW_LOG_INFO, peer_subject(peer), "device address moved %s -> %s",
           was, is);
    copy_addr(&peer->addr, from);
    ua->stats.address_moves++;
    return true;
}

static void learn_address(struct gw_udp_peer *peer, const struct sockaddr *from)
{
    char name[80];

    copy_addr(&peer->addr, from);
    peer->has_addr = true;
    if (peer->queue.count > 0) {
        pace_add(peer); /* downlink held for this moment */
    }
    if (gw_log_get_level() >= GW_LOG_DEBUG) {
        format_addr(from, name, sizeof(name));
        gw_log(GW_LOG_DEBUG, peer_subject(peer), "device address %s", name);
    }
}

/* on_audio may stop the peer or close ua: nothing may follow it. */
static void accept_packet(struct gw_udp_audio *ua, struct gw_udp_peer *peer,
                          const struct gw_udp_header *h, const uint8_t *opus,
                          uint64_t now)
{
    peer->last_seq = h->sequence;
    peer->last_rx_ms = now;
    peer->toc_seen |= toc_bit(opus[0]);
    forget_candidate(peer);
    ua->stats.rx_audio++;
    if (ua->on_audio != NULL) {
        ua->on_audio(peer, h->timestamp, opus, h->payload_len, peer->owner);
    }
}

/*
 * One datagram, in the order that costs least to a flood: header, ssrc,
 * sequence, then decryption (in place, IV = the header as received) and
 * the Opus check, and last the address rule.
 */
static void handle_datagram(struct gw_udp_audio *ua, uint8_t *buf, size_t len,
                            const struct sockaddr *from, unsigned flags)
{
    struct gw_udp_header h;
    struct gw_udp_peer *peer;
    struct gw_opus_info info;
    uint8_t *opus = buf + GW_UDP_HEADER_LEN;
    uint64_t now;
    int err;

    ua->stats.rx_packets++;
    if (flags & UV_UDP_PARTIAL) {
        note_drop(ua, GW_UDP_DROP_TOOBIG, from);
        return;
    }
    err = gw_udp_header_parse(buf, len, &h);
    if (err < 0) {
        note_drop(ua, parse_drop(err), from);
        return;
    }
    peer = gw_ssrc_table_find(&ua->peers, h.ssrc);
    if (peer == NULL) {
        note_drop(ua, GW_UDP_DROP_UNKNOWN, from);
        return;
    }
    if (gw_udp_header_check_sequence(peer->last_seq, h.sequence) < 0) {
        drop_for_peer(ua, peer, GW_UDP_DROP_REPLAY, from);
        return;
    }
    /* libopus never emits an empty packet; an empty payload carries no
     * audio and proves nothing, so it must not move last_seq either. */
    if (h.payload_len == 0) {
        drop_for_peer(ua, peer, GW_UDP_DROP_EMPTY, from);
        return;
    }
    if (gw_aes_ctr_apply(peer->up, buf, opus, opus, h.payload_len) < 0 ||
        gw_opus_packet_inspect(opus, h.payload_len, &info) < 0) {
        drop_for_peer(ua, peer, GW_UDP_DROP_OPUS, from);
        return;
    }
    now = uv_now(ua->loop);
    if (peer->has_addr && same_addr(&peer->addr, from)) {
        accept_packet(ua, peer, &h, opus, now);
        return;
    }
    if (!peer->has_addr) {
        /* Learning is bound by the same stream test (the TOC is not known
         * yet): a forger racing the first packet must still guess the
         * frame duration. */
        if (!fits_stream(peer, &info, opus[0])) {
            note_drop(ua, GW_UDP_DROP_ADDRESS, from);
            return;
        }
        learn_address(peer, from);
        accept_packet(ua, peer, &h, opus, now);
        return;
    }
    if (!try_move(ua, peer, &h, &info, opus[0], from, now)) {
        note_drop(ua, GW_UDP_DROP_ADDRESS, from);
        return;
    }
    accept_packet(ua, peer, &h, opus, now);
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    struct gw_udp_audio *ua = handle->data;

    (void)suggested;
    /* Reused for every batch: libuv hands all of it out before asking
     * again, and this module keeps no pointer into it. */
    *buf = uv_buf_init((char *)ua->rx, (unsigned)sizeof(ua->rx));
}

static void on_recv(uv_udp_t *handle, ssize_t nread, const uv_buf_t *buf,
                    const struct sockaddr *addr, unsigned flags);

static void on_rx_timer(uv_timer_t *timer)
{
    struct gw_udp_audio *ua = timer->data;

    if (!ua->closing) {
        ua->rx_cycle = 0;
        (void)uv_udp_recv_start(&ua->sock, on_alloc, on_recv);
    }
}

/* The socket is drained: stop reading for a while (see RX_PAUSE_MS). */
static void pause_reading(struct gw_udp_audio *ua)
{
    if (ua->rx_cycle >= RX_BUSY) {
        ua->rx_cycle = 0;
        return;
    }
    uv_udp_recv_stop(&ua->sock);
    uv_timer_start(&ua->rx_timer, on_rx_timer, RX_PAUSE_MS, 0);
}

/*
 * With UV_UDP_RECVMMSG each datagram comes as a UV_UDP_MMSG_CHUNK, then a
 * UV_UDP_MMSG_FREE call (addr NULL) returns the whole buffer; nread 0 with
 * addr NULL and no flag means the socket is drained. The buffer lives in
 * ua, so only chunks (or single datagrams without recvmmsg) need work. A
 * batch shorter than the buffer also means drained, which saves libuv's
 * extra recvmmsg that would only say so.
 */
static void on_recv(uv_udp_t *handle, ssize_t nread, const uv_buf_t *buf,
                    const struct sockaddr *addr, unsigned flags)
{
    struct gw_udp_audio *ua = handle->data;

    if (ua->closing) {
        return;
    }
    if (nread < 0) {
        GW_LOG(GW_LOG_DEBUG, "udp", "receive failed: %s",
               uv_strerror((int)nread));
        return;
    }
    if (addr == NULL) {
        if (!(flags & UV_UDP_MMSG_FREE) || ua->rx_batch < RX_SLOTS) {
            pause_reading(ua);
        }
        ua->rx_batch = 0;
        return;
    }
    ua->rx_batch++;
    ua->rx_cycle++;
    handle_datagram(ua, (uint8_t *)buf->base, (size_t)nread, addr, flags);
}

/* ---- downlink ---- */

/* Header with the next sequence, then the payload encrypted under it. */
static int build_datagram(struct gw_udp_peer *peer, uint8_t *out,
                          uint32_t timestamp, const uint8_t *opus, size_t len)
{
    struct gw_udp_header h = {
        .type = GW_UDP_TYPE_AUDIO,
        .flags = 0,
        .payload_len = (uint16_t)len,
        .ssrc = peer->ssrc,
        .timestamp = timestamp,
        .sequence = ++peer->tx_seq,
    };

    gw_udp_header_pack(&h, out);
    return gw_aes_ctr_apply(peer->down, out, opus, out + GW_UDP_HEADER_LEN,
                            len);
}

static int enqueue(struct gw_udp_audio *ua, struct gw_udp_peer *peer,
                   uint32_t timestamp, const uint8_t *opus, size_t len,
                   uint32_t samples)
{
    struct gw_udp_queue *q = &peer->queue;
    struct record r = {(uint16_t)(GW_UDP_HEADER_LEN + len), (uint16_t)samples};
    uint32_t rec = RECORD_SIZE(r.len);
    uint32_t off;
    int err;

    if (!queue_find(q, rec, &off)) {
        note_drop(ua, GW_UDP_DROP_QUEUE_FULL, NULL);
        return GW_ELIMIT;
    }
    err = build_datagram(peer, q->buf + off + sizeof(r), timestamp, opus, len);
    if (err < 0) {
        note_drop(ua, GW_UDP_DROP_SEND, NULL);
        return err;
    }
    memcpy(q->buf + off, &r, sizeof(r));
    queue_commit(q, off, rec, samples);
    return 0;
}

int gw_udp_peer_send(struct gw_udp_peer *peer, uint32_t timestamp,
                     const uint8_t *opus, size_t len)
{
    struct gw_udp_audio *ua;
    struct gw_opus_info info;
    uint64_t now;
    int err;

    if (peer == NULL || peer->ua == NULL) {
        return GW_EINVAL;
    }
    ua = peer->ua;
    /* The duration paces it; a packet without one cannot be paced. */
    if (len > GW_UDP_MAX_PAYLOAD ||
        gw_opus_packet_inspect(opus, len, &info) < 0) {
        note_drop(ua, GW_UDP_DROP_TX_INVALID, NULL);
        return len > GW_UDP_MAX_PAYLOAD ? GW_ETOOBIG : GW_EOPUS;
    }
    if (!peer->has_addr) {
        if (peer->queue.samples + (uint64_t)info.samples_48k >
            ua->hold_samples) {
            note_drop(ua, GW_UDP_DROP_NO_ADDRESS, NULL);
            return GW_ELIMIT;
        }
        return enqueue(ua, peer, timestamp, opus, len,
                       (uint32_t)info.samples_48k);
    }
    now = uv_now(ua->loop);
    if (peer->queue.count == 0 && now >= peer->hold_until_ms &&
        sync_clock(peer, now) < (int64_t)ua->prebuffer_samples) {
        if (build_datagram(peer, ua->tx, timestamp, opus, len) < 0) {
            note_drop(ua, GW_UDP_DROP_SEND, NULL);
            return GW_ECRYPTO;
        }
        send_datagram(ua, peer, ua->tx, GW_UDP_HEADER_LEN + len);
        peer->played_samples += (uint64_t)info.samples_48k;
        return 0;
    }
    err = enqueue(ua, peer, timestamp, opus, len, (uint32_t)info.samples_48k);
    if (err == 0) {
        pace_add(peer);
    }
    return err;
}

size_t gw_udp_peer_flush(struct gw_udp_peer *peer)
{
    size_t n;

    if (peer == NULL || peer->ua == NULL) {
        return 0;
    }
    n = peer->queue.count;
    peer->ua->stats.tx_flushed += n;
    queue_clear(&peer->queue);
    pace_remove(peer);
    /* The device empties its queue too: the next packet starts afresh. */
    peer->play_start_ms = 0;
    peer->played_samples = 0;
    return n;
}

void gw_udp_peer_hold(struct gw_udp_peer *peer, unsigned ms)
{
    if (peer == NULL || peer->ua == NULL) {
        return;
    }
    peer->hold_until_ms = uv_now(peer->ua->loop) + ms;
}

/* ---- peers ---- */

/* Frees what start allocated; the peer is then not started. */
static void release_peer(struct gw_udp_peer *peer)
{
    gw_aes_ctr_destroy(peer->up);
    gw_aes_ctr_destroy(peer->down);
    free(peer->queue.buf);
    peer->up = NULL;
    peer->down = NULL;
    memset(&peer->queue, 0, sizeof(peer->queue));
    peer->pacing = false;
    peer->ua = NULL;
}

static int prepare_peer(struct gw_udp_audio *ua, struct gw_udp_peer *peer,
                        const uint8_t key[16])
{
    int err;

    /* One key, two contexts: each keeps its own per-packet state. */
    err = gw_aes_ctr_create(&peer->up);
    err = err < 0 ? err : gw_aes_ctr_create(&peer->down);
    err = err < 0 ? err : gw_aes_ctr_set_key(peer->up, key);
    err = err < 0 ? err : gw_aes_ctr_set_key(peer->down, key);
    if (err < 0) {
        return err;
    }
    peer->queue.buf = malloc(ua->queue_bytes);
    peer->queue.cap = ua->queue_bytes;
    return peer->queue.buf != NULL ? 0 : GW_ENOMEM;
}

int gw_udp_peer_start(struct gw_udp_audio *ua, struct gw_udp_peer *peer,
                      uint32_t ssrc, const uint8_t key[16],
                      int frame_duration_ms, void *owner)
{
    struct gw_udp_peer *other;
    int err;

    if (ua == NULL || peer == NULL || key == NULL || ua->closing) {
        return GW_EINVAL;
    }
    other = gw_ssrc_table_find(&ua->peers, ssrc);
    if (other != NULL && other != peer) {
        return GW_EEXIST;
    }
    gw_udp_peer_stop(peer);
    memset(peer, 0, sizeof(*peer));
    err = prepare_peer(ua, peer, key);
    if (err < 0) {
        release_peer(peer);
        return err;
    }
    peer->ua = ua;
    peer->owner = owner;
    peer->ssrc = ssrc;
    if (frame_duration_ms > 0 && frame_duration_ms <= 120) {
        peer->frame_samples_48k = (uint32_t)frame_duration_ms * SAMPLES_PER_MS;
    }
    peer->last_rx_ms = uv_now(ua->loop);
    err = gw_ssrc_table_add(&ua->peers, ssrc, peer);
    if (err < 0) { /* GW_EINVAL for ssrc 0, or the table could not grow */
        release_peer(peer);
        return err;
    }
    return 0;
}

void gw_udp_peer_stop(struct gw_udp_peer *peer)
{
    if (peer == NULL || peer->ua == NULL) {
        return;
    }
    (void)gw_ssrc_table_remove(&peer->ua->peers, peer->ssrc);
    pace_remove(peer);
    release_peer(peer);
}

void gw_udp_peer_set_subject(struct gw_udp_peer *peer, const char *subject)
{
    peer->subject = subject;
}

bool gw_udp_audio_ssrc_in_use(uint32_t ssrc, void *arg)
{
    struct gw_udp_audio *ua = arg;

    return gw_ssrc_table_find(&ua->peers, ssrc) != NULL;
}

bool gw_udp_peer_has_address(const struct gw_udp_peer *peer)
{
    return peer->ua != NULL && peer->has_addr;
}

uint64_t gw_udp_peer_idle_ms(const struct gw_udp_peer *peer)
{
    uint64_t now;

    if (peer->ua == NULL) {
        return 0;
    }
    now = uv_now(peer->ua->loop);
    return now > peer->last_rx_ms ? now - peer->last_rx_ms : 0;
}

/* ---- the instance ---- */

static void on_handle_closed(uv_handle_t *handle)
{
    struct gw_udp_audio *ua = handle->data;

    if (--ua->handles_open > 0) {
        return;
    }
    if (ua->close_cb != NULL) {
        ua->close_cb(ua, ua->close_arg);
    }
    free(ua);
}

static int parse_bind(const char *host, int port, union gw_udp_addr *addr)
{
    if (host == NULL || port < 0 || port > 65535) {
        return GW_EINVAL;
    }
    memset(addr, 0, sizeof(*addr));
    if (uv_ip4_addr(host, port, &addr->in) == 0 ||
        uv_ip6_addr(host, port, &addr->in6) == 0) {
        return 0;
    }
    return GW_EINVAL;
}

static int start_socket(struct gw_udp_audio *ua, const union gw_udp_addr *addr)
{
    union gw_udp_addr bound;
    int namelen = (int)sizeof(bound);
    int size;
    int err;

    err = uv_udp_bind(&ua->sock, &addr->sa, 0);
    if (err < 0) {
        return err;
    }
    err = uv_udp_getsockname(&ua->sock, &bound.sa, &namelen);
    if (err < 0) {
        return err;
    }
    ua->port = ntohs(bound.sa.sa_family == AF_INET6 ? bound.in6.sin6_port
                                                    : bound.in.sin_port);
    /* The kernel caps these at its limits; a smaller buffer still works. */
    size = RX_SOCKBUF;
    (void)uv_recv_buffer_size((uv_handle_t *)&ua->sock, &size);
    size = TX_SOCKBUF;
    (void)uv_send_buffer_size((uv_handle_t *)&ua->sock, &size);
    return uv_udp_recv_start(&ua->sock, on_alloc, on_recv);
}

int gw_udp_audio_init(uv_loop_t *loop, const struct gw_udp_audio_options *opts,
                      struct gw_udp_audio **out)
{
    struct gw_udp_audio *ua;
    union gw_udp_addr addr;
    size_t queue_bytes;
    int err;

    if (loop == NULL || opts == NULL || out == NULL) {
        return GW_EINVAL;
    }
    queue_bytes =
        opts->queue_bytes != 0 ? opts->queue_bytes : (size_t)GW_UDP_QUEUE_BYTES;
    if (queue_bytes < RECORD_SIZE(MAX_DATAGRAM) || queue_bytes > 1u << 30) {
        return GW_EINVAL;
    }
    err = parse_bind(opts->bind_host, opts->port, &addr);
    if (err < 0) {
        return err;
    }
    ua = calloc(1, sizeof(*ua));
    if (ua == NULL) {
        return GW_ENOMEM;
    }
    ua->loop = loop;
    ua->on_audio = opts->on_audio;
    ua->queue_bytes = (uint32_t)(queue_bytes & ~(size_t)3);
    ua->prebuffer_samples =
        (uint64_t)(opts->prebuffer_ms != 0 ? opts->prebuffer_ms
                                           : GW_UDP_PREBUFFER_MS) *
        SAMPLES_PER_MS;
    ua->hold_samples = (uint64_t)GW_UDP_HOLD_MS * SAMPLES_PER_MS;
    err = uv_udp_init_ex(loop, &ua->sock, addr.sa.sa_family | UV_UDP_RECVMMSG);
    if (err < 0) {
        free(ua);
        return err;
    }
    ua->sock.data = ua;
    uv_timer_init(loop, &ua->pace_timer);
    uv_timer_init(loop, &ua->rx_timer);
    ua->pace_timer.data = ua;
    ua->rx_timer.data = ua;
    ua->handles_open = 3;
    err = start_socket(ua, &addr);
    if (err < 0) {
        /* The handles exist now: they are freed by the loop, silently. */
        gw_udp_audio_close(ua, NULL, NULL);
        return err;
    }
    GW_LOG(GW_LOG_INFO, "udp", "audio socket on %s port %d", opts->bind_host,
           ua->port);
    *out = ua;
    return 0;
}

void gw_udp_audio_close(struct gw_udp_audio *ua, gw_udp_close_cb cb, void *arg)
{
    struct gw_udp_peer *peer;

    if (ua == NULL || ua->closing) {
        return;
    }
    ua->closing = true;
    ua->close_cb = cb;
    ua->close_arg = arg;
    ua->on_audio = NULL;
    for (uint32_t i = 0; ua->peers.slots != NULL && i <= ua->peers.mask; i++) {
        peer = ua->peers.slots[i].value;
        if (peer != NULL) {
            release_peer(peer);
        }
    }
    gw_ssrc_table_free(&ua->peers);
    ua->pace_head = NULL;
    uv_udp_recv_stop(&ua->sock);
    uv_timer_stop(&ua->pace_timer);
    uv_timer_stop(&ua->rx_timer);
    uv_close((uv_handle_t *)&ua->sock, on_handle_closed);
    uv_close((uv_handle_t *)&ua->pace_timer, on_handle_closed);
    uv_close((uv_handle_t *)&ua->rx_timer, on_handle_closed);
}

int gw_udp_audio_port(const struct gw_udp_audio *ua)
{
    return ua->port;
}

void gw_udp_audio_get_stats(const struct gw_udp_audio *ua,
                            struct gw_udp_audio_stats *out)
{
    *out = ua->stats;
}
