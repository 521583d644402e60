/*
 * The uplink of the UDP audio socket: recvmmsg batches, the checks of each
 * datagram in the order that costs a flood least, in-place AES-CTR, and
 * the replay and address rules of PROTOCOL.md section 4.
 */

#include <stdio.h>
#include <string.h>

#include "codec/opus_packet.h"
#include "codec/udp_header.h"
#include "gateway/log.h"
#include "gateway/udp_audio_int.h"

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

/* Rate limit of the per-packet debug lines: a burst per second. */
#define LOG_BURST 10

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
void gw_udp_note_drop(struct gw_udp_audio *ua, enum gw_udp_drop reason,
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
    gw_udp_note_drop(ua, reason, from);
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
        gw_udp_pace_add(peer); /* downlink held for this moment */
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
        gw_udp_note_drop(ua, GW_UDP_DROP_TOOBIG, from);
        return;
    }
    err = gw_udp_header_parse(buf, len, &h);
    if (err < 0) {
        gw_udp_note_drop(ua, parse_drop(err), from);
        return;
    }
    peer = gw_ssrc_table_find(&ua->peers, h.ssrc);
    if (peer == NULL) {
        gw_udp_note_drop(ua, GW_UDP_DROP_UNKNOWN, from);
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
            gw_udp_note_drop(ua, GW_UDP_DROP_ADDRESS, from);
            return;
        }
        learn_address(peer, from);
        accept_packet(ua, peer, &h, opus, now);
        return;
    }
    if (!try_move(ua, peer, &h, &info, opus[0], from, now)) {
        gw_udp_note_drop(ua, GW_UDP_DROP_ADDRESS, from);
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

int gw_udp_uplink_start(struct gw_udp_audio *ua)
{
    return uv_udp_recv_start(&ua->sock, on_alloc, on_recv);
}
