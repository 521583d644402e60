/*
 * The downlink of the UDP audio socket: each peer's ring of encrypted
 * datagrams, and the pacing that keeps the device's 40-frame play queue
 * from overflowing.
 */

#include <stdlib.h>
#include <string.h>

#include <utlist.h>

#include "codec/opus_packet.h"
#include "codec/udp_header.h"
#include "gateway/audio/udp_audio_int.h"

#define PACE_INTERVAL_MS 10
/* A ring's first size: 8 to 10 TTS packets, more than a paced backend
 * keeps waiting. Sessions whose backend sends ahead grow theirs. */
#define QUEUE_FIRST 2048

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

/* Moves the records to a new buffer of cap bytes, oldest first at 0
 * (each record carries its length, so they stay readable in order). */
static int queue_resize(struct gw_udp_queue *q, uint32_t cap)
{
    uint8_t *buf = malloc(cap);
    uint32_t used = 0;

    if (buf == NULL) {
        return GW_ENOMEM;
    }
    if (q->count > 0) {
        uint32_t end = q->wrapped ? q->wrap : q->wr;
        memcpy(buf, q->buf + q->rd, end - q->rd);
        used = end - q->rd;
        if (q->wrapped) {
            memcpy(buf + used, q->buf, q->wr);
            used += q->wr;
        }
    }
    free(q->buf);
    q->buf = buf;
    q->cap = cap;
    q->rd = 0;
    q->wr = used;
    q->wrapped = false;
    return 0;
}

/* Room for rec more bytes at *off, growing the ring up to its limit. */
static bool queue_make_room(struct gw_udp_queue *q, uint32_t rec, uint32_t *off)
{
    while (!queue_find(q, rec, off)) {
        uint32_t cap = q->cap == 0 ? QUEUE_FIRST : q->cap * 2;
        if (q->cap >= q->limit) {
            return false;
        }
        if (queue_resize(q, cap < q->limit ? cap : q->limit) < 0) {
            return false;
        }
    }
    return true;
}

/* An empty ring that grew goes back; the first size stays with the peer. */
static void queue_trim(struct gw_udp_queue *q)
{
    if (q->count == 0 && q->cap > QUEUE_FIRST) {
        free(q->buf);
        q->buf = NULL;
        q->cap = 0;
    }
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

void gw__udp_pace_add(struct gw_udp_peer *peer)
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

void gw__udp_pace_remove(struct gw_udp_peer *peer)
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

/* The datagram is the one gw_udp_peer_time_next() asked for: one compare
 * per datagram while no turn is being timed. */
static bool is_timed(struct gw_udp_peer *peer, const uint8_t *dgram, size_t len)
{
    struct gw_udp_header h;

    if (peer->timed_seq == 0) {
        return false;
    }
    if (gw_udp_header_parse(dgram, len, &h) != 0 ||
        h.sequence != peer->timed_seq) {
        return false;
    }
    peer->timed_seq = 0;
    return true;
}

static void send_datagram(struct gw_udp_audio *ua, struct gw_udp_peer *peer,
                          const uint8_t *dgram, size_t len)
{
    uv_buf_t buf = uv_buf_init((char *)dgram, (unsigned)len);
    bool timed = is_timed(peer, dgram, len);

    /* Synchronous and request-free; a full socket buffer is a drop, since
     * late audio is worse than lost audio. */
    if (uv_udp_try_send(&ua->sock, &buf, 1, &peer->addr.sa) < 0) {
        gw__udp_note_drop(ua, GW_UDP_DROP_SEND, &peer->addr.sa);
        return;
    }
    ua->stats.tx_audio++;
    if (timed) {
        uint64_t now = uv_hrtime();
        gw_latency_add(&ua->stats.turn_first_audio, now - peer->timed_rx_ns);
        gw_latency_add(&ua->stats.turn_tts_to_audio,
                       now - peer->timed_since_ns);
    }
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
    queue_trim(q);
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
            gw__udp_pace_remove(peer);
        }
    }
    if (ua->pace_head == NULL) {
        uv_timer_stop(&ua->pace_timer);
    }
}

/* ---- downlink ---- */

/*
 * Header with the next sequence, then the payload encrypted under it. The
 * flags byte keeps every counter block of the session's downlink unique
 * and apart from the uplink's (codec/udp_header.h), whatever the
 * timestamps; gw_udp_peer_send() stops at GW_UDP_DOWNLINK_SEQ_MAX.
 */
static int build_datagram(struct gw_udp_peer *peer, uint8_t *out,
                          uint32_t timestamp, const uint8_t *opus, size_t len)
{
    uint32_t seq = ++peer->tx_seq;
    struct gw_udp_header h = {
        .type = GW_UDP_TYPE_AUDIO,
        .flags = gw_udp_header_downlink_flags(seq),
        .payload_len = (uint16_t)len,
        .ssrc = peer->ssrc,
        .timestamp = timestamp,
        .sequence = seq,
    };

    gw_udp_header_pack(&h, out);
    return gw_aes_ctr_apply(&peer->aes, out, opus, out + GW_UDP_HEADER_LEN,
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

    if (!queue_make_room(q, rec, &off)) {
        gw__udp_note_drop(ua, GW_UDP_DROP_QUEUE_FULL, NULL);
        return GW_ELIMIT;
    }
    err = build_datagram(peer, q->buf + off + sizeof(r), timestamp, opus, len);
    if (err < 0) {
        gw__udp_note_drop(ua, GW_UDP_DROP_SEND, NULL);
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
    /* Sequences are spent (124 days of audio in 2.5 ms frames, 8 years
     * in 60 ms ones): another would share counter blocks with the first. */
    if (peer->tx_seq >= GW_UDP_DOWNLINK_SEQ_MAX) {
        gw__udp_note_drop(ua, GW_UDP_DROP_SEQ_END, NULL);
        return GW_ELIMIT;
    }
    /* The duration paces it; a packet without one cannot be paced. */
    if (len > GW_UDP_MAX_PAYLOAD ||
        gw_opus_packet_inspect(opus, len, &info) < 0) {
        gw__udp_note_drop(ua, GW_UDP_DROP_TX_INVALID, NULL);
        return len > GW_UDP_MAX_PAYLOAD ? GW_ETOOBIG : GW_EOPUS;
    }
    if (!peer->has_addr) {
        if (peer->queue.samples + (uint64_t)info.samples_48k >
            ua->hold_samples) {
            gw__udp_note_drop(ua, GW_UDP_DROP_NO_ADDRESS, NULL);
            return GW_ELIMIT;
        }
        return enqueue(ua, peer, timestamp, opus, len,
                       (uint32_t)info.samples_48k);
    }
    now = uv_now(ua->loop);
    if (peer->queue.count == 0 && now >= peer->hold_until_ms &&
        sync_clock(peer, now) < (int64_t)ua->prebuffer_samples) {
        if (build_datagram(peer, ua->tx, timestamp, opus, len) < 0) {
            gw__udp_note_drop(ua, GW_UDP_DROP_SEND, NULL);
            return GW_ECRYPTO;
        }
        send_datagram(ua, peer, ua->tx, GW_UDP_HEADER_LEN + len);
        peer->played_samples += (uint64_t)info.samples_48k;
        return 0;
    }
    err = enqueue(ua, peer, timestamp, opus, len, (uint32_t)info.samples_48k);
    if (err == 0) {
        gw__udp_pace_add(peer);
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
    queue_trim(&peer->queue);
    gw__udp_pace_remove(peer);
    peer->timed_seq = 0; /* if it was queued, it went */
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

void gw_udp_peer_time_next(struct gw_udp_peer *peer, uint64_t rx_ns,
                           uint64_t since_ns)
{
    if (peer == NULL || peer->ua == NULL ||
        peer->tx_seq >= GW_UDP_DOWNLINK_SEQ_MAX) {
        return;
    }
    /* build_datagram() gives the next packet the next sequence. */
    peer->timed_seq = peer->tx_seq + 1;
    peer->timed_rx_ns = rx_ns;
    peer->timed_since_ns = since_ns;
}
