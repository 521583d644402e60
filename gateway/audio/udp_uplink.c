/*
 * The uplink of the UDP audio socket: recvmmsg batches, the checks of each
 * datagram in the order that costs a flood least, in-place AES-CTR, and
 * the replay, forward window and address rules of docs/protocol.md
 * section 4. gw__udp_uplink_judge() decides each datagram without the
 * socket, so the fuzzer drives the same code.
 */

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "codec/opus_packet.h"
#include "codec/udp_header.h"
#include "common/log.h"
#include "gateway/audio/udp_audio_int.h"

/*
 * Reading has two modes, chosen by the arrival rate (datagrams in the last
 * whole RX_WINDOW_MS window).
 *
 * Below RX_SLOW (2 a millisecond, about 120 streaming devices) the
 * socket's own readable event drives it: each wakeup reads what is there,
 * with no added delay.
 *
 * Above it, packets arriving one by one would each cost a wakeup, which
 * costs more than everything else done for a packet (on the bench's
 * virtual machine about as much as relaying several: bench/NOTES.md). So
 * the socket leaves the poll set and a timer reads it: each wakeup reads
 * all that came meanwhile, then arms the timer again for one tick from
 * then. The tick is the time RX_BATCH datagrams take to arrive at the
 * current rate, so that one recvmmsg takes them, but never longer than
 * RX_TICK_MAX_US, nor shorter than RX_TICK_MIN_US. A packet so waits at
 * most a tick plus one wakeup's work (the relay histogram shows it).
 * Counted from the end of the work rather than on a fixed period, the
 * timer wakes less often for the same tick as the load grows, the way a
 * relay that pauses after each read does (bench/loopback_floor). The
 * timer is a timerfd (libuv's timers count whole milliseconds) and arming
 * it again also clears its expiry: a tick costs its wakeup, the recvmmsg
 * and one timerfd_settime; no epoll_ctl while the mode holds.
 *
 * One wakeup reads at most RX_ROUNDS batches, so a flood cannot keep the
 * loop from its other sockets; the rest waits for the next one.
 */
#define RX_ROUNDS      8
#define RX_WINDOW_MS   10
#define RX_SLOW        20 /* per RX_WINDOW_MS: 2 a millisecond */
#define RX_TICK_MAX_US 400
#define RX_TICK_MIN_US 100

/* read_batch marks a batch's relayed datagrams in one 64-bit word. */
_Static_assert(RX_BATCH <= 64, "RX_BATCH fits the relayed mask");

const uint32_t gw_udp_relay_bounds_us[GW_UDP_RELAY_BUCKETS] = {
    50,   100,  250,  500,   750,   1000,  1500,
    2000, 3000, 5000, 10000, 25000, 50000, 100000};

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
 * Counts a drop and, at debug level, says so within LOG_RATE (a burst,
 * then a few a second, the same bucket the MQTT refusals use): a flood
 * must cost a counter increment, not a write(2).
 */
static const struct gw_bucket_rate LOG_RATE = {.per_s = 5, .burst = 10};

void gw__udp_note_drop(struct gw_udp_audio *ua, enum gw_udp_drop reason,
                       const struct sockaddr *from)
{
    char name[80];
    uint64_t left_out = 0;

    ua->stats.drops[reason]++;
    if (gw_log_get_level() < GW_LOG_DEBUG) {
        return;
    }
    if (!gw_bucket_take(&ua->log_bucket, &LOG_RATE, uv_now(ua->loop),
                        &left_out)) {
        return; /* the counters have the rest */
    }
    format_addr(from, name, sizeof(name));
    gw_log(GW_LOG_DEBUG, "udp", "drop %s from %s (%llu not logged before)",
           gw_udp_drop_name(reason), name, (unsigned long long)left_out);
}

/* ---- uplink ---- */

/*
 * The line moves 1/CLOCK_SLACK faster than the hello's frames, about
 * 0.2 %: a device whose audio clock runs a little fast against ours (a
 * crystal is off by 10 to 100 ppm) must not drift out of the window during
 * hours of unbroken streaming.
 */
#define CLOCK_SLACK 512
/* Loop time the line looks at, at most: about 35 years, far beyond any
 * session, and small enough that no product below overflows. */
#define LINE_MAX_MS (UINT64_C(1) << 40)

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

void gw__udp_uplink_reset(struct gw_udp_peer *peer, int frame_duration_ms,
                          uint64_t now)
{
    peer->frame_samples_48k = frame_duration_ms > 0 && frame_duration_ms <= 120
                                  ? (uint32_t)frame_duration_ms * SAMPLES_PER_MS
                                  : 0;
    peer->last_seq = 0;
    peer->seq_seen = 0;
    peer->line_seq = 0;
    peer->line_ms = now;
    peer->last_rx_ms = now;
    peer->has_addr = false;
    peer->has_candidate = false;
    peer->candidate_hits = 0;
    peer->toc_seen = 0;
}

/* The stream's frame at 48 kHz; without a hello's, the shortest Opus has,
 * which only widens the window. */
static uint64_t frame_samples(const struct gw_udp_peer *peer)
{
    return peer->frame_samples_48k != 0 ? peer->frame_samples_48k
                                        : GW_OPUS_MIN_SAMPLES_48K;
}

/* Where the device's stream can be at most by now, window aside. */
static uint64_t line_at(const struct gw_udp_peer *peer, uint64_t now)
{
    uint64_t t = now > peer->line_ms ? now - peer->line_ms : 0;

    t = t < LINE_MAX_MS ? t : LINE_MAX_MS;
    t += t / CLOCK_SLACK;
    return peer->line_seq + t * SAMPLES_PER_MS / frame_samples(peer);
}

/*
 * The forward window. The device numbers its packets one per frame as it
 * records them, so by any time its sequence can be at most where a packet
 * it sent in time puts it plus one per frame since: the line. Only its
 * pre-roll (about 2 s of wake-word audio sent at once when the channel
 * opens) and network jitter put a packet ahead of that, which
 * GW_UDP_AHEAD_MS covers; a gap from lost packets or an outage stays
 * within it, since the line moved on meanwhile. A packet further ahead
 * is dropped and moves nothing: without it, a single forged or stray
 * packet with sequence 0xfffffff0 made everything after it a replay.
 *
 * The line starts at (0, start) and moves only with time, or down to an
 * accepted packet that is not ahead of it, which is where the device
 * stands after a silence. Packets ahead of the line, within the window,
 * are accepted but leave it, so accepted packets cannot push the window
 * up one after another. Besides, a packet at most GW_UDP_AHEAD_STEP above
 * the last accepted one always passes, so that a sender faster than real
 * time (a test device) is not cut off. A forger who can send from the
 * device's address thus stalls its stream for at most GW_UDP_AHEAD_MS plus
 * the silence since the device was last on the line, plus
 * GW_UDP_AHEAD_STEP sequences for each further packet it gets accepted.
 */
static bool in_window(const struct gw_udp_peer *peer, uint32_t seq,
                      uint64_t now)
{
    uint64_t window =
        (uint64_t)GW_UDP_AHEAD_MS * SAMPLES_PER_MS / frame_samples(peer);

    return seq <= (uint64_t)peer->last_seq + GW_UDP_AHEAD_STEP ||
           seq <= line_at(peer, now) + window;
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

/* Only a trial is written to: an accepted packet reads the flag alone,
 * which sits with the fields the judge reads anyway. */
static void forget_candidate(struct gw_udp_peer *peer)
{
    if (peer->has_candidate) {
        peer->has_candidate = false;
        peer->candidate_hits = 0;
    }
}

/* A dropped packet from the candidate address breaks its run. */
static void break_candidate(struct gw_udp_peer *peer,
                            const struct sockaddr *from)
{
    if (peer->has_candidate && same_addr(&peer->candidate, from)) {
        forget_candidate(peer);
    }
}

static bool refuse(struct gw_udp_verdict *v, enum gw_udp_drop reason)
{
    v->reason = reason;
    return false;
}

/* A drop of a packet that named a session. */
static bool refuse_for_peer(struct gw_udp_verdict *v, enum gw_udp_drop reason,
                            const struct sockaddr *from)
{
    break_candidate(v->peer, from);
    return refuse(v, reason);
}

/*
 * The address move rule (docs/protocol.md section 4). AES-CTR has no
 * integrity, so anyone who has seen an ssrc can send packets that decrypt
 * to something; moving the downlink on one of them would hand the device's
 * audio to the sender (the Node gateway's hijack). A packet from a new
 * address therefore only counts if it is in order (above the session's
 * last sequence and the candidate's previous one, and within the window)
 * and decrypts to Opus of the stream's frame duration and an already used
 * TOC: noise passes that with a probability of about 1/64.
 * GW_UDP_MOVE_PACKETS must pass in a row, spread over at least half their
 * real-time span, so a flood of guesses gains nothing (a burst is over
 * long before the span is) and a paced one needs about 64^4 tries at a
 * few per second. The device's own packets from the current address reset
 * the trial, and none of the trial packets is forwarded or moves last_seq
 * until the move, so a forger can neither replay into nor stall the real
 * stream. A genuine move (NAT rebinding, roaming) costs
 * GW_UDP_MOVE_PACKETS - 1 frames of audio.
 */
static bool try_move(struct gw_udp_peer *peer, const struct gw_udp_header *h,
                     const struct gw_opus_info *info, uint8_t toc,
                     const struct sockaddr *from, uint64_t now)
{
    uint64_t frame_ms, min_span_ms;

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
    return peer->candidate_hits >= GW_UDP_MOVE_PACKETS &&
           now - peer->candidate_since_ms >= min_span_ms;
}

/*
 * The late window, as IPsec's and DTLS's anti-replay: a sequence at or
 * below the last accepted one passes only if it is not 0, lies less than
 * GW_UDP_LATE_WINDOW below it and was never accepted. Each sequence so
 * passes once at most; anything older is a replay.
 */
static bool late_unseen(const struct gw_udp_peer *peer, uint32_t seq)
{
    uint32_t back = peer->last_seq - seq;

    return seq != 0 && seq <= peer->last_seq && back < GW_UDP_LATE_WINDOW &&
           (peer->seq_seen >> back & 1u) == 0;
}

static void note_seen(struct gw_udp_peer *peer, uint32_t seq)
{
    uint32_t up;

    if (seq <= peer->last_seq) {
        peer->seq_seen |= UINT32_C(1) << (peer->last_seq - seq);
        return;
    }
    up = seq - peer->last_seq;
    peer->seq_seen = up < GW_UDP_LATE_WINDOW ? peer->seq_seen << up : 0;
    peer->seq_seen |= 1u;
    peer->last_seq = seq;
}

/* For the doctor: noise decrypted with a wrong key often passes as Opus,
 * seldom of the hello's frame length. */
static void count_fit(struct gw_udp_peer *peer, const struct gw_opus_info *info)
{
    peer->rx_count++;
    peer->rx_fit += peer->frame_samples_48k == 0 ||
                    (uint32_t)info->samples_48k == peer->frame_samples_48k;
}

/*
 * A late packet says nothing about where the device stands now: it moves
 * neither the line nor the last sequence, only marks its own.
 */
static bool accept_late(struct gw_udp_verdict *v, uint8_t *opus,
                        const struct gw_opus_info *info, uint64_t now)
{
    struct gw_udp_peer *peer = v->peer;

    note_seen(peer, v->h.sequence);
    peer->last_rx_ms = now;
    count_fit(peer, info);
    peer->toc_seen |= toc_bit(opus[0]);
    forget_candidate(peer);
    v->late = true;
    v->opus = opus;
    return true;
}

static bool accept_packet(struct gw_udp_verdict *v, uint8_t *opus,
                          const struct gw_opus_info *info, uint64_t now)
{
    struct gw_udp_peer *peer = v->peer;

    /* Not ahead of the line: the device stands here (see in_window). */
    if (v->h.sequence <= line_at(peer, now)) {
        peer->line_seq = v->h.sequence;
        peer->line_ms = now;
    }
    note_seen(peer, v->h.sequence);
    peer->last_rx_ms = now;
    count_fit(peer, info);
    peer->toc_seen |= toc_bit(opus[0]);
    forget_candidate(peer);
    v->opus = opus;
    return true;
}

/*
 * In the order that costs a flood least: header, ssrc, sequence, then
 * decryption (in place, IV = the header as received) and the Opus check,
 * and last the address rule.
 */
bool gw__udp_uplink_judge(const struct gw_ssrc_table *peers, uint8_t *buf,
                          size_t len, const struct sockaddr *from, uint64_t now,
                          struct gw_udp_verdict *v)
{
    struct gw_udp_peer *peer;
    struct gw_opus_info info;
    uint8_t *opus = buf + GW_UDP_HEADER_LEN;
    bool late;
    int err;

    memset(v, 0, sizeof(*v));
    err = gw_udp_header_parse(buf, len, &v->h);
    if (err < 0) {
        return refuse(v, parse_drop(err));
    }
    peer = gw_ssrc_table_find(peers, v->h.ssrc);
    if (peer == NULL) {
        return refuse(v, GW_UDP_DROP_UNKNOWN);
    }
    v->peer = peer;
    late = gw_udp_header_check_sequence(peer->last_seq, v->h.sequence) < 0;
    /* A late packet is taken only from the device's current address: from
     * any other it is a replay as before, and no reason to move. */
    if (late && (!late_unseen(peer, v->h.sequence) || !peer->has_addr ||
                 !same_addr(&peer->addr, from))) {
        return refuse_for_peer(v, GW_UDP_DROP_REPLAY, from);
    }
    if (!late && !in_window(peer, v->h.sequence, now)) {
        return refuse_for_peer(v, GW_UDP_DROP_AHEAD, from);
    }
    /* libopus never emits an empty packet; an empty payload carries no
     * audio and proves nothing, so it must not move last_seq either. */
    if (v->h.payload_len == 0) {
        return refuse_for_peer(v, GW_UDP_DROP_EMPTY, from);
    }
    if (gw_aes_ctr_apply(&peer->aes, buf, opus, opus, v->h.payload_len) < 0 ||
        gw_opus_packet_inspect(opus, v->h.payload_len, &info) < 0) {
        return refuse_for_peer(v, GW_UDP_DROP_OPUS, from);
    }
    if (late) {
        return accept_late(v, opus, &info, now);
    }
    if (peer->has_addr && same_addr(&peer->addr, from)) {
        return accept_packet(v, opus, &info, now);
    }
    if (!peer->has_addr) {
        /* Learning is bound by the same stream test (the TOC is not known
         * yet): a forger racing the first packet must still guess the
         * frame duration. */
        if (!fits_stream(peer, &info, opus[0])) {
            return refuse(v, GW_UDP_DROP_ADDRESS);
        }
        copy_addr(&peer->addr, from);
        peer->has_addr = true;
        v->learned = true;
        return accept_packet(v, opus, &info, now);
    }
    if (!try_move(peer, &v->h, &info, opus[0], from, now)) {
        return refuse(v, GW_UDP_DROP_ADDRESS);
    }
    v->was = peer->addr;
    copy_addr(&peer->addr, from);
    v->moved = true;
    return accept_packet(v, opus, &info, now);
}

/* on_audio may stop the peer or close ua: nothing may follow it. */
static void handle_datagram(struct gw_udp_audio *ua, uint8_t *buf, size_t len,
                            const struct sockaddr *from, bool truncated)
{
    struct gw_udp_verdict v;
    struct gw_udp_peer *peer;
    char was[80], is[80];

    ua->stats.rx_packets++;
    if (truncated) {
        gw__udp_note_drop(ua, GW_UDP_DROP_TOOBIG, from);
        return;
    }
    if (!gw__udp_uplink_judge(&ua->peers, buf, len, from, uv_now(ua->loop),
                              &v)) {
        gw__udp_note_drop(ua, v.reason, from);
        gw__udp_doctor_note(ua, &v, from);
        return;
    }
    peer = v.peer;
    if (v.learned) {
        if (peer->queue.count > 0) {
            gw__udp_pace_add(peer); /* downlink held for this moment */
        }
        if (gw_log_get_level() >= GW_LOG_DEBUG) {
            format_addr(from, is, sizeof(is));
            gw_log(GW_LOG_DEBUG, peer_subject(peer), "device address %s", is);
        }
    }
    if (v.moved) {
        format_addr(&v.was.sa, was, sizeof(was));
        format_addr(from, is, sizeof(is));
        gw_log(GW_LOG_INFO, peer_subject(peer), "device address moved %s -> %s",
               was, is);
        ua->stats.address_moves++;
    }
    ua->stats.rx_audio++;
    ua->stats.rx_late += v.late;
    if (ua->on_audio != NULL) {
        ua->on_audio(peer, v.h.timestamp, v.opus, v.h.payload_len, peer->owner);
    }
}

/* ---- reading ---- */

_Static_assert(RX_HEAD % 16 == 0, "datagrams stay 16-byte aligned");

/* Datagram i of the batch, after its slot's headroom. */
static uint8_t *rx_data(struct gw_udp_audio *ua, int i)
{
    return ua->rx[i] + RX_HEAD;
}

static int64_t realtime_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The kernel's receive time of a datagram (CLOCK_REALTIME), or -1. */
static int64_t received_us(struct msghdr *msg)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c != NULL;
         c = CMSG_NXTHDR(msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPNS &&
            c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(c), sizeof(ts));
            return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
        }
    }
    return -1;
}

static void note_relay(struct gw_udp_audio *ua, int64_t since_us,
                       int64_t now_us)
{
    int64_t d = now_us - since_us;
    uint64_t us = d > 0 ? (uint64_t)d : 0; /* the clock may step back */
    unsigned b = 0;

    while (b < GW_UDP_RELAY_BUCKETS && us > gw_udp_relay_bounds_us[b]) {
        b++;
    }
    ua->stats.relay_le[b]++;
    ua->stats.relay_sum_us += us;
}

/* The arrival rate that decides whether to pause (RX_SLOW). */
static void count_rate(struct gw_udp_audio *ua, unsigned n)
{
    uint64_t now = uv_now(ua->loop);

    if (now - ua->rx_window_ms >= RX_WINDOW_MS) {
        /* A window with no read at all (idle) counts as slow too. */
        ua->rx_rate =
            now - ua->rx_window_ms < 2 * RX_WINDOW_MS ? ua->rx_window_count : 0;
        ua->rx_window_ms = now;
        ua->rx_window_count = 0;
    }
    ua->rx_window_count += n;
}

/*
 * A thousand sessions take turns, so a datagram's peer, session and
 * backend connection are rarely in the cache: handled one after another,
 * each line is a miss the CPU waits for before it can ask for the next.
 * Asked for a whole batch first, one pointer level at a time, the misses
 * of the batch overlap instead (bench/NOTES.md: the judge's share of the
 * profile fell tenfold, the waits moved here, shorter). Only prefetches:
 * a datagram that turns out bad costs nothing more.
 */
static void warm_batch(struct gw_udp_audio *ua, int n)
{
    /* The peer's fields the judge reads: everything before candidate. */
    const size_t hot = offsetof(struct gw_udp_peer, candidate);
    struct gw_udp_peer *peers[RX_BATCH];
    int m = 0;

    for (int i = 0; i < n; i++) {
        struct gw_udp_peer *p;

        if (ua->rx_msgs[i].msg_len < GW_UDP_HEADER_LEN) {
            continue;
        }
        p = gw_ssrc_table_find(&ua->peers,
                               gw_udp_header_peek_ssrc(rx_data(ua, i)));
        if (p == NULL) {
            continue;
        }
        for (size_t off = 0; off < hot; off += 64) {
            __builtin_prefetch((const char *)p + off, 1);
        }
        peers[m++] = p;
    }
    for (unsigned step = 0; ua->on_warm != NULL && step < GW_UDP_WARM_STEPS;
         step++) {
        for (int j = 0; j < m; j++) {
            ua->on_warm(peers[j]->owner, step);
        }
    }
}

/* One recvmmsg; returns the datagrams read, 0 when drained, or < 0. */
static int read_batch(struct gw_udp_audio *ua, int fd)
{
    int n;

    for (unsigned i = 0; i < RX_BATCH; i++) {
        struct msghdr *m = &ua->rx_msgs[i].msg_hdr;
        m->msg_namelen = sizeof(ua->rx_from[i]);
        m->msg_controllen = sizeof(ua->rx_ctl[i]);
        m->msg_flags = 0;
    }
    do {
        n = recvmmsg(fd, ua->rx_msgs, RX_BATCH, MSG_DONTWAIT, NULL);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
    }
    count_rate(ua, (unsigned)n);
    /* Kept: a close inside the batch clears ua->on_batch, and what the
     * batch held must still go out. */
    void (*batch)(void *, bool) = ua->on_batch;
    void *batch_arg = ua->batch_arg;
    uint64_t relayed = 0; /* bit i: datagram i went to its session */

    warm_batch(ua, n);
    if (batch != NULL) {
        batch(batch_arg, false);
    }
    for (int i = 0; i < n && !ua->closing; i++) {
        struct msghdr *m = &ua->rx_msgs[i].msg_hdr;
        uint64_t accepted = ua->stats.rx_audio;
        handle_datagram(ua, rx_data(ua, i), ua->rx_msgs[i].msg_len,
                        &ua->rx_from[i].sa, (m->msg_flags & MSG_TRUNC) != 0);
        if (ua->stats.rx_audio != accepted) {
            relayed |= (uint64_t)1 << i;
        }
    }
    if (batch != NULL) {
        batch(batch_arg, true);
    }
    /* The relay delay ends at the hand-off to the backend's socket, which
     * is now, after the batch's burst. */
    if (ua->rx_stamped && relayed != 0) {
        int64_t now = realtime_us();
        for (int i = 0; i < n; i++) {
            int64_t at = (relayed >> i & 1) != 0
                             ? received_us(&ua->rx_msgs[i].msg_hdr)
                             : -1;
            if (at >= 0) {
                note_relay(ua, at, now);
            }
        }
    }
    return n;
}

/* The tick for the rate of the last window (see RX_TICK_MAX_US), 0 for
 * reading on the socket's own events. */
static unsigned tick_for_rate(unsigned rate)
{
    unsigned us;

    if (rate < RX_SLOW) {
        return 0;
    }
    us = (unsigned)(RX_BATCH * RX_WINDOW_MS * 1000u / rate);
    return us > RX_TICK_MAX_US   ? RX_TICK_MAX_US
           : us < RX_TICK_MIN_US ? RX_TICK_MIN_US
                                 : us;
}

static void on_readable(uv_poll_t *poll, int status, int events);
static void on_tick(uv_poll_t *poll, int status, int events);

/* Arms the read timer once, us from now; 0 disarms. Either way its expiry
 * is cleared, so the poll does not fire again for the one just read.
 * Returns 0 or a negative errno. */
static int arm_tick(struct gw_udp_audio *ua, unsigned us)
{
    struct itimerspec its = {
        .it_value = {0, (long)us * 1000}, /* all zero disarms */
    };

    if (timerfd_settime(ua->rx_tfd, 0, &its, NULL) != 0) {
        int err = -errno;
        GW_LOG(GW_LOG_WARN, "udp", "read timer: %s", strerror(-err));
        return err;
    }
    return 0;
}

/*
 * After a wakeup's reads: the mode, and in tick mode the next tick, for
 * the rate just seen. `ticking` says whether a tick woke us (its expiry
 * must be cleared, by arming again or by disarming).
 */
static void adapt_reading(struct gw_udp_audio *ua, bool ticking)
{
    unsigned us = tick_for_rate(ua->rx_rate);
    unsigned cur = ua->rx_tick_us;

    if (us == 0 && !ticking) {
        return; /* events, and staying so */
    }
    if (arm_tick(ua, us) < 0) {
        (void)arm_tick(ua, 0);
        us = 0; /* the socket's events never fail to come */
    }
    if (us == 0 && cur != 0) {
        (void)uv_poll_start(&ua->rx_poll, UV_READABLE, on_readable);
    } else if (us != 0 && cur == 0) {
        uv_poll_stop(&ua->rx_poll);
    }
    ua->rx_tick_us = us;
}

/* Up to RX_ROUNDS batches; returns the datagrams read, or < 0. */
static int read_rounds(struct gw_udp_audio *ua)
{
    int total = 0;

    /* The descriptor kept at start, beside the fields read anyway: asking
     * sock for it was a cache miss each wakeup (bench/NOTES.md). */
    for (int round = 0; round < RX_ROUNDS && !ua->closing; round++) {
        int n = read_batch(ua, ua->rx_fd);
        if (n < 0) {
            /* An ICMP error queued on the socket, most likely: it is
             * consumed by the failed call, and reading goes on. */
            GW_LOG(GW_LOG_DEBUG, "udp", "receive failed: %s", strerror(-n));
            return n;
        }
        total += n;
        if (n < RX_BATCH) {
            break;
        }
    }
    return total;
}

static void on_readable(uv_poll_t *poll, int status, int events)
{
    struct gw_udp_audio *ua = poll->data;

    (void)events;
    if (ua->closing) {
        return;
    }
    if (status < 0) {
        GW_LOG(GW_LOG_DEBUG, "udp", "poll failed: %s", uv_strerror(status));
        return;
    }
    ua->stats.rx_wakeups_events++;
    if (read_rounds(ua) >= 0 && !ua->closing) {
        adapt_reading(ua, false);
    }
}

static void on_tick(uv_poll_t *poll, int status, int events)
{
    struct gw_udp_audio *ua = poll->data;
    int n;

    (void)events;
    if (ua->closing) {
        return;
    }
    if (status < 0) {
        /* Not armed again, the timer would never come back: the socket's
         * events take over until the next window. */
        GW_LOG(GW_LOG_WARN, "udp", "read timer poll: %s", uv_strerror(status));
        ua->rx_rate = 0;
        adapt_reading(ua, true);
        return;
    }
    ua->stats.rx_wakeups_ticks++;
    n = read_rounds(ua);
    if (n == 0) {
        count_rate(ua, 0); /* a quiet tick still moves the window */
    }
    if (!ua->closing) {
        /* Even after a failed read: the tick is re-armed or cleared. */
        adapt_reading(ua, true);
    }
}

int gw__udp_uplink_start(struct gw_udp_audio *ua)
{
    int fd = -1, on = 1, err;

    err = uv_fileno((uv_handle_t *)&ua->sock, &fd);
    if (err < 0) {
        return err;
    }
    ua->rx_fd = fd;
    for (unsigned i = 0; i < RX_BATCH; i++) {
        ua->rx_iov[i].iov_base = rx_data(ua, i);
        ua->rx_iov[i].iov_len = RX_SLOT;
        ua->rx_msgs[i].msg_hdr = (struct msghdr){
            .msg_name = &ua->rx_from[i],
            .msg_iov = &ua->rx_iov[i],
            .msg_iovlen = 1,
            .msg_control = ua->rx_ctl[i],
        };
    }
    /* Without timestamps the relay histogram stays empty; nothing else
     * depends on them. */
    ua->rx_stamped =
        setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)) == 0;
    /* The uv_udp_t only ever sends with uv_udp_try_send, which never
     * starts its watcher, so this poll is the socket's only one. */
    err = uv_poll_init(ua->loop, &ua->rx_poll, fd);
    if (err < 0) {
        return err;
    }
    ua->rx_poll.data = ua;
    ua->rx_poll_open = true;
    ua->handles_open++;
    /* The read timer: never readable until armed, so its poll can stay. */
    ua->rx_tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (ua->rx_tfd < 0) {
        return uv_translate_sys_error(errno);
    }
    err = uv_poll_init(ua->loop, &ua->rx_tick, ua->rx_tfd);
    if (err < 0) {
        close(ua->rx_tfd);
        ua->rx_tfd = -1;
        return err;
    }
    ua->rx_tick.data = ua;
    ua->rx_tick_open = true;
    ua->handles_open++;
    err = uv_poll_start(&ua->rx_tick, UV_READABLE, on_tick);
    return err < 0 ? err
                   : uv_poll_start(&ua->rx_poll, UV_READABLE, on_readable);
}

void gw__udp_uplink_stop(struct gw_udp_audio *ua)
{
    if (ua->rx_poll_open) { /* before the socket, whose fd it watches */
        uv_close((uv_handle_t *)&ua->rx_poll, gw__udp_on_handle_closed);
        ua->rx_poll_open = false;
    }
    if (ua->rx_tick_open) {
        uv_close((uv_handle_t *)&ua->rx_tick, gw__udp_on_handle_closed);
        ua->rx_tick_open = false;
    }
    if (ua->rx_tfd >= 0) { /* out of the poll set once its handle closed */
        close(ua->rx_tfd);
        ua->rx_tfd = -1;
    }
}
