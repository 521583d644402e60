/*
 * The simulated device's UDP audio channel: opening it from the server
 * hello, the paced and encrypted uplink (with test replays and forgeries)
 * and the downlink through the firmware's checks, decode queue and
 * real-time playback.
 */
#include "tools/sim_device_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "codec/opus_packet.h"
#include "common/log.h"
#include "tools/sim_common.h"

#define WAKE_FRAMES  33 /* ~2 s of cached wake-word audio */
#define WAKE_WORD    "\xe4\xbd\xa0\xe5\xa5\xbd\xe5\xb0\x8f\xe6\x99\xba"
#define MAX_CATCH_UP 5 /* frames sent in one tick when the loop lagged */

/* ---- uplink ---------------------------------------------------------- */

static void log_packet(struct gw_sim_device *d, const char *dir, uint32_t seq,
                       const uint8_t *opus, size_t len)
{
    if (d->o.packet_log != NULL) {
        fprintf(d->o.packet_log,
                "%s,%s,%" PRIu32 ",%" PRId64 ",%zu,%08" PRIx32 "\n", dir,
                d->client_id, seq, gw_sim_unix_us(), len,
                gw_sim_fnv32(opus, len));
    }
}

static void put_be(uint8_t *p, uint32_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

/*
 * What a blind forger can do: it saw (or guessed) the ssrc but has no key,
 * so it sends a header with a sequence ahead of the device's and noise
 * for a payload, from another port. The gateway must not move the
 * device's address or disturb its sequence.
 */
static void forge_send(struct gw_sim_device *d, const uint8_t *pkt, size_t len)
{
    uint8_t fake[GW_UDP_HEADER_LEN + GW_UDP_MAX_PAYLOAD];

    if (d->forge_fd < 0) {
        d->forge_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (d->forge_fd < 0) {
            return;
        }
    }
    memcpy(fake, pkt, GW_UDP_HEADER_LEN);
    put_be(fake + 12, d->up_seq + 1000, 4);
    for (size_t i = GW_UDP_HEADER_LEN; i < len; i++) {
        fake[i] = (uint8_t)(d->up_seq * 131 + i * 7);
    }
    if (sendto(d->forge_fd, fake, len, 0, (const struct sockaddr *)&d->server,
               sizeof(d->server)) == (ssize_t)len) {
        d->r.up_forged++;
    }
}

/* Header = the nonce with len@2, timestamp@8, seq@12; IV = header. */
static void uplink_send(struct gw_sim_device *d, const uint8_t *opus,
                        size_t len)
{
    uint8_t pkt[GW_UDP_HEADER_LEN + GW_UDP_MAX_PAYLOAD];
    uint32_t ts = 0;

    if (d->o.aec && d->aec_n > 0) {
        ts = d->aec_ts[0];
        memmove(d->aec_ts, d->aec_ts + 1, --d->aec_n * sizeof(uint32_t));
    }
    uint8_t iv[GW_UDP_HEADER_LEN];

    memcpy(pkt, d->nonce, GW_UDP_HEADER_LEN);
    put_be(pkt + 2, (uint32_t)len, 2);
    put_be(pkt + 8, ts, 4);
    put_be(pkt + 12, ++d->up_seq, 4);
    if (d->o.udp_stale_ssrc) {
        pkt[7] ^= 0x5a; /* an older hello's, say: not this session's */
    }
    memcpy(iv, pkt, sizeof(iv));
    if (d->o.udp_wrong_key) {
        iv[9] ^= 0xa5; /* the keystream of another key, as far as the
                          gateway can tell: it decrypts to noise */
    }
    if (gw_aes_ctr_apply(d->aes, iv, opus, pkt + GW_UDP_HEADER_LEN, len) != 0) {
        gw_sim_dev_fail(d, "AES-CTR failed");
        return;
    }
    if (d->o.no_udp) {
        return; /* a firewall on the way eats it */
    }
    uv_buf_t b = uv_buf_init((char *)pkt, (unsigned)(GW_UDP_HEADER_LEN + len));
    uv_udp_t *out =
        d->udp2_open && d->up_seq > d->o.udp_rebind ? &d->udp2 : &d->udp;
    if (d->o.udp_rebind > 0 && d->up_seq == d->o.udp_rebind + 1) {
        gw_sim_dev_event(d, "udp: rebinding to a new source port");
    }
    int rc = uv_udp_try_send(out, &b, 1, NULL);
    if (rc < 0) {
        d->r.up_send_errors++;
        GW_LOG(GW_LOG_DEBUG, d->subject, "udp send: %s", uv_strerror(rc));
        return;
    }
    d->r.up_packets++;
    d->r.up_bytes += len;
    EVP_DigestUpdate(d->up_md, opus, len);
    log_packet(d, "up", d->up_seq, opus, len);
    if (d->o.replay_every > 0 && d->up_seq % d->o.replay_every == 0 &&
        uv_udp_try_send(out, &b, 1, NULL) >= 0) {
        d->r.up_replayed++; /* as a network may duplicate it */
    }
    if (d->o.forge_every > 0 && d->up_seq % d->o.forge_every == 0) {
        forge_send(d, pkt, GW_UDP_HEADER_LEN + len);
    }
}

/* End of the user's speech in this turn. */
static void speech_ended(struct gw_sim_device *d)
{
    d->speech_end_ns = uv_hrtime();
    gw_sim_dev_event(
        d, "> audio: %" PRIu32 " speech frames sent (turn %" PRIu32 ")",
        d->turn_frame, d->turn + 1);
    if (d->o.mode == GW_SIM_MODE_MANUAL) {
        /* Push-to-talk released: listen stop, mic off, idle. */
        d->uplink_on = false;
        d->state = ST_IDLE;
        gw_sim_dev_event(d, "> listen stop");
        gw_sim_dev_send_msg(
            d,
            "{\"session_id\":\"%s\",\"type\":\"listen\",\"state\":"
            "\"stop\"}",
            d->sid);
    }
}

static void send_frame(struct gw_sim_device *d)
{
    const uint8_t *p;
    size_t n;

    if (d->o.call) {
        gw_sim_dev_call_frame(d, &p, &n);
    } else {
        gw_sim_clip_frame(d->o.clip, d->turn_frame, d->o.speech_frames,
                          d->final_turn, &p, &n);
    }
    uplink_send(d, p, n);
    d->turn_frame++;
    if (!d->final_turn && d->turn_frame == d->o.speech_frames) {
        speech_ended(d);
    }
}

static bool mic_on(const struct gw_sim_device *d)
{
    return d->uplink_on && !d->finished &&
           (d->state == ST_LISTENING ||
            (d->state == ST_SPEAKING && d->o.mode == GW_SIM_MODE_REALTIME));
}

/* Deadlines come from a fixed clock, so the rate stays exact even when
 * the loop is late; a few missed frames are caught up. */
static void on_uplink(uv_timer_t *t)
{
    struct gw_sim_device *d = t->data;
    uint64_t now = uv_hrtime();
    int sent = 0;

    if (d->closing || !mic_on(d)) {
        return;
    }
    while (d->next_frame_ns <= now && sent < MAX_CATCH_UP && mic_on(d)) {
        send_frame(d);
        d->next_frame_ns += d->frame_ns;
        sent++;
    }
    if (!mic_on(d)) {
        return;
    }
    if (d->next_frame_ns <= now) {
        d->next_frame_ns = now + d->frame_ns; /* too far behind: resync */
    }
    uv_timer_start(t, on_uplink, (d->next_frame_ns - now + 999999) / 1000000,
                   0);
}

void gw_sim_dev_uplink_start(struct gw_sim_device *d)
{
    d->uplink_on = true;
    if (!uv_is_active((uv_handle_t *)&d->uplink_timer)) {
        /* The first frame exists once one frame of audio was captured,
         * so listen start always precedes it on the wire. */
        d->next_frame_ns = uv_hrtime() + d->frame_ns;
        uv_timer_start(&d->uplink_timer, on_uplink, d->frame_ns / 1000000, 0);
    }
}

/* ---- downlink and playback ------------------------------------------- */

static void log_drop(struct gw_sim_device *d, enum gw_sim_drop why)
{
    uint64_t n = d->r.drops[why];

    /* Per-packet logging is rate limited: first few, then every 1000th. */
    if (n <= 3 || n % 1000 == 0) {
        GW_LOG(GW_LOG_DEBUG, d->subject, "downlink dropped (%s), %" PRIu64,
               gw_sim_drop_name(why), n);
    }
    if (n == 1 || n == 10 || n == 100 || n == 1000) {
        gw_sim_dev_event(d, "! downlink dropped: %s (%" PRIu64 " so far)",
                         gw_sim_drop_name(why), n);
    }
}

void gw_sim_dev_sync_downlink(struct gw_sim_device *d)
{
    for (int i = 0; i <= GW_SIM_DROP_REPLAY; i++) {
        d->r.drops[i] = d->dl.drops[i];
    }
    d->r.down_accepted = d->dl.accepted;
    /* A frame the firmware discards for arriving before tts start is as
     * lost to the listener as one that never came. */
    d->r.down_lost = d->dl.lost + d->r.drops[GW_SIM_DROP_IDLE];
}

static bool ensure_decoder(struct gw_sim_device *d)
{
    int err;

    if (d->dec != NULL && d->dec_rate == d->sample_rate) {
        return true;
    }
    opus_decoder_destroy(d->dec);
    d->dec = opus_decoder_create(d->sample_rate, 1, &err);
    if (d->dec == NULL) {
        gw_sim_dev_fail(
            d,
            "cannot decode downlink at the hello's sample_rate %" PRId32 ": %s",
            d->sample_rate, opus_strerror(err));
        return false;
    }
    d->dec_rate = d->sample_rate;
    if (d->pcm == NULL &&
        (d->pcm = malloc(GW_OPUS_MAX_SAMPLES_48K * sizeof(int16_t))) == NULL) {
        gw_sim_dev_fail(d, "out of memory");
        return false;
    }
    return true;
}

/* --tone: keeps 2 s of played audio after its first 2 frames (the
 * decoder's ramp), for its frequency at the end of the run. */
static void tone_keep(struct gw_sim_device *d, int n)
{
    size_t cap = (size_t)d->sample_rate * 2;

    if (d->tone_skip < 2) {
        d->tone_skip++;
        return;
    }
    if (d->tone_pcm == NULL &&
        (d->tone_pcm = malloc(cap * sizeof(*d->tone_pcm))) == NULL) {
        return;
    }
    for (int i = 0; i < n && d->tone_n < cap; i++) {
        d->tone_pcm[d->tone_n++] = d->pcm[i];
    }
}

/* Decodes (or inspects) one frame as the firmware's decoder would, which
 * holds frame_duration ms at most. Returns its duration in ns, 0 if bad. */
static uint64_t frame_duration_ns(struct gw_sim_device *d,
                                  const struct play_slot *s)
{
    struct gw_opus_info info;

    if (s->len == 0) {
        return 0;
    }
    if (d->o.decode) {
        if (!ensure_decoder(d)) {
            return 0;
        }
        int max = d->sample_rate * d->frame_duration / 1000;
        int n = opus_decode(d->dec, s->data, s->len, d->pcm, max, 0);
        if (n > 0 && d->o.tone_hz > 0) {
            tone_keep(d, n);
        }
        return n > 0 ? (uint64_t)n * 1000000000u / (uint64_t)d->sample_rate : 0;
    }
    if (gw_opus_packet_inspect(s->data, s->len, &info) != 0 ||
        info.samples_48k > 48 * d->frame_duration) {
        return 0;
    }
    return (uint64_t)info.samples_48k * 1000000u / 48u;
}

static void played(struct gw_sim_device *d, const struct play_slot *s)
{
    uint64_t now = uv_hrtime();

    d->r.down_played++;
    d->turn_played++;
    EVP_DigestUpdate(d->down_md, s->data, s->len);
    if (d->o.aec) {
        if (d->aec_n == 3) {
            memmove(d->aec_ts, d->aec_ts + 1, 2 * sizeof(uint32_t));
            d->aec_n = 2;
        }
        d->aec_ts[d->aec_n++] = s->ts;
    }
    if (d->turn_played == 1) {
        double ms = gw_sim_dev_ms_since(d->speech_end_ns, now);
        if (d->turn == 0 && isnan(d->r.first_audio_ms)) {
            d->r.first_audio_ms = ms;
        }
        gw_sim_dev_event(
            d, "< first audio frame played (%+.1f ms after speech end)", ms);
    }
    if (d->o.abort_after > 0 && d->turn_played == d->o.abort_after &&
        !d->aborted) {
        d->aborted = true; /* the device stays speaking until tts stop */
        gw_sim_dev_event(d, "> abort (after %" PRIu32 " frames)",
                         d->turn_played);
        gw_sim_dev_send_msg(d, "{\"session_id\":\"%s\",\"type\":\"abort\"}",
                            d->sid);
    }
}

static void on_play(uv_timer_t *t);

void gw_sim_dev_play_pump(struct gw_sim_device *d, uint64_t start_ns)
{
    while (d->q_len > 0 && !d->finished) {
        struct play_slot *s = &d->queue[d->q_head];
        d->q_head = (d->q_head + 1) % QUEUE_FRAMES;
        d->q_len--;
        uint64_t dur = frame_duration_ns(d, s);
        if (dur == 0) {
            d->r.drops[GW_SIM_DROP_OPUS]++;
            log_drop(d, GW_SIM_DROP_OPUS);
            continue;
        }
        played(d, s);
        d->playing = true;
        d->play_end_ns = start_ns + dur;
        uint64_t now = uv_hrtime();
        uint64_t wait = d->play_end_ns > now ? d->play_end_ns - now : 0;
        uv_timer_start(&d->play_timer, on_play, (wait + 999999) / 1000000, 0);
        return;
    }
    d->playing = false;
    if (d->stop_pending && !d->finished) {
        gw_sim_dev_turn_done(d); /* tts stop and the playback drained */
    }
}

static void on_play(uv_timer_t *t)
{
    struct gw_sim_device *d = t->data;

    if (d->closing || d->finished) {
        return;
    }
    d->playing = false;
    gw_sim_dev_play_pump(d, d->play_end_ns);
}

static void note_arrival(struct gw_sim_device *d, const uint8_t *opus,
                         size_t len)
{
    uint64_t now = uv_hrtime();
    struct gw_opus_info info;
    uint64_t dur = (uint64_t)d->frame_duration * 1000000u;

    if (gw_opus_packet_inspect(opus, len, &info) == 0) {
        dur = (uint64_t)info.samples_48k * 1000000u / 48u;
    }
    /* A pause over a second is a new utterance, not jitter. */
    if (d->last_arrival_ns != 0 && now - d->last_arrival_ns < 1000000000u) {
        double dev =
            (double)(now - d->last_arrival_ns) - (double)d->last_dur_ns;
        dev = dev < 0 ? -dev : dev;
        d->jitter_ns += (dev - d->jitter_ns) / 16.0;
        d->r.jitter_ms = d->jitter_ns / 1e6;
        if (dev / 1e6 > d->r.max_jitter_ms) {
            d->r.max_jitter_ms = dev / 1e6;
        }
    }
    d->last_arrival_ns = now;
    d->last_dur_ns = dur;
}

static void on_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf)
{
    struct gw_sim_device *d = h->data;

    (void)size;
    *buf = uv_buf_init((char *)d->rx, sizeof(d->rx));
}

static void on_udp_recv(uv_udp_t *u, ssize_t nread, const uv_buf_t *buf,
                        const struct sockaddr *addr, unsigned flags)
{
    struct gw_sim_device *d = u->data;
    struct gw_udp_header h;

    (void)buf;
    (void)addr;
    (void)flags;
    if (d->closing || d->finished || nread == 0) {
        return;
    }
    if (nread < 0) {
        GW_LOG(GW_LOG_DEBUG, d->subject, "udp receive: %s",
               uv_strerror((int)nread));
        return;
    }
    d->r.down_datagrams++;
    int err = gw_sim_downlink_check(&d->dl, d->rx, (size_t)nread, &h);
    gw_sim_dev_sync_downlink(d);
    if (err != 0) {
        log_drop(d, gw_sim_drop_of(err));
        return;
    }
    uint8_t *opus = d->rx + GW_UDP_HEADER_LEN;
    if (gw_aes_ctr_apply(d->aes, d->rx, opus, opus, h.payload_len) != 0) {
        return; /* firmware: decrypt failure drops */
    }
    uv_timer_again(&d->channel_timer);
    note_arrival(d, opus, h.payload_len);
    log_packet(d, "down", h.sequence, opus, h.payload_len);
    if (d->o.call && gw_sim_dev_call_on_audio(d, opus, h.payload_len)) {
        return;
    }
    if (d->state != ST_SPEAKING) {
        /* The firmware plays downlink only in speaking, entered on tts
         * start; what comes earlier (a tts start that lost the race
         * through the broker) is discarded: the reply loses its start. */
        d->r.drops[GW_SIM_DROP_IDLE]++;
        d->r.down_lost++;
        log_drop(d, GW_SIM_DROP_IDLE);
        return;
    }
    if (d->q_len >= QUEUE_FRAMES) {
        d->r.drops[GW_SIM_DROP_QUEUE]++;
        log_drop(d, GW_SIM_DROP_QUEUE);
        return;
    }
    struct play_slot *s = &d->queue[(d->q_head + d->q_len) % QUEUE_FRAMES];
    s->ts = h.timestamp;
    s->len = h.payload_len;
    memcpy(s->data, opus, h.payload_len);
    d->q_len++;
    if (!d->playing) {
        gw_sim_dev_play_pump(d, uv_hrtime());
    }
}

void gw_sim_dev_udp_drain(struct gw_sim_device *d)
{
    uv_os_fd_t fd;

    if (!d->udp_open || uv_fileno((uv_handle_t *)&d->udp, &fd) != 0) {
        return;
    }
    for (int i = 0; i < QUEUE_FRAMES; i++) {
        uv_buf_t buf = uv_buf_init((char *)d->rx, sizeof(d->rx));
        ssize_t n = recv(fd, d->rx, sizeof(d->rx), MSG_DONTWAIT);
        if (n < 0) {
            return;
        }
        on_udp_recv(&d->udp, n, &buf, NULL, 0);
    }
}

/* ---- opening and closing the channel --------------------------------- */

static void udp_connect(struct gw_sim_device *d, const struct sockaddr *addr)
{
    char ip[64] = "?";
    int rc;

    uv_ip4_name((const struct sockaddr_in *)addr, ip, sizeof(ip));
    memcpy(&d->server, addr, sizeof(d->server));
    uv_udp_init(d->loop, &d->udp);
    d->udp.data = d;
    d->udp_open = true;
    d->open_handles++;
    if ((rc = uv_udp_connect(&d->udp, addr)) != 0 ||
        (rc = uv_udp_recv_start(&d->udp, on_alloc, on_udp_recv)) != 0) {
        gw_sim_dev_fail(d, "UDP connect to %s:%u failed: %s", ip, d->udp_port,
                        uv_strerror(rc));
        return;
    }
    if (d->o.udp_rebind > 0) {
        /* A NAT's new mapping: the same device from another port. */
        uv_udp_init(d->loop, &d->udp2);
        d->udp2.data = d;
        d->udp2_open = true;
        d->open_handles++;
        if ((rc = uv_udp_connect(&d->udp2, addr)) != 0 ||
            (rc = uv_udp_recv_start(&d->udp2, on_alloc, on_udp_recv)) != 0) {
            gw_sim_dev_fail(d, "second UDP socket: %s", uv_strerror(rc));
            return;
        }
    }
    uv_timer_start(&d->channel_timer, gw_sim_dev_on_channel_timeout,
                   d->o.channel_timeout_ms, d->o.channel_timeout_ms);
    d->channel_open = true;
    gw_sim_dev_event(d, "udp connected to %s:%u", ip, d->udp_port);
    if (d->o.wake_word) {
        const uint8_t *p;
        size_t n;
        for (uint32_t i = 0; i < WAKE_FRAMES && !d->finished; i++) {
            gw_sim_clip_frame(d->o.clip, i, 0, false, &p, &n);
            uplink_send(d, p, n);
        }
        gw_sim_dev_event(d, "> wake-word audio: %d frames at once",
                         WAKE_FRAMES);
        gw_sim_dev_event(d, "> listen detect");
        if (gw_sim_dev_send_msg(d,
                                "{\"session_id\":\"%s\",\"type\":\"listen\","
                                "\"state\":\"detect\",\"text\":\"" WAKE_WORD
                                "\"}",
                                d->sid) != 0) {
            return;
        }
    }
    gw_sim_dev_begin_turn(d, true, false);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct gw_sim_device *d = req->data;

    d->resolving = false;
    if (status == 0 && !d->closing && !d->finished) {
        struct sockaddr_in a;
        memcpy(&a, res->ai_addr, sizeof(a));
        a.sin_port = htons(d->udp_port);
        udp_connect(d, (const struct sockaddr *)&a);
    } else if (!d->closing && !d->finished) {
        gw_sim_dev_fail(d, "cannot resolve udp.server: %s",
                        uv_strerror(status));
    }
    uv_freeaddrinfo(res);
    gw_sim_dev_release(d); /* the request counted as a handle */
}

void gw_sim_dev_udp_open(struct gw_sim_device *d, const char *server)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM};
    struct sockaddr_in a;

    d->state = ST_OPENING;
    gw_sim_dev_watch(d, d->o.hello_timeout_ms);
    if (d->o.udp_send_to != NULL) {
        char ip[64];
        const char *colon = strrchr(d->o.udp_send_to, ':');
        size_t n = colon != NULL ? (size_t)(colon - d->o.udp_send_to) : 0;
        if (n == 0 || n >= sizeof(ip)) {
            gw_sim_dev_fail(d, "--udp-send-to wants IP:PORT");
            return;
        }
        memcpy(ip, d->o.udp_send_to, n);
        ip[n] = '\0';
        unsigned told = d->udp_port;
        d->udp_port = (uint16_t)atoi(colon + 1);
        if (uv_ip4_addr(ip, d->udp_port, &a) != 0) {
            gw_sim_dev_fail(d, "--udp-send-to: not an IPv4 address: %s", ip);
            return;
        }
        gw_sim_dev_event(d, "udp: told %s:%u, sending to %s instead", server,
                         told, d->o.udp_send_to);
        udp_connect(d, (const struct sockaddr *)&a);
        return;
    }
    if (uv_ip4_addr(server, d->udp_port, &a) == 0) {
        udp_connect(d, (const struct sockaddr *)&a);
        return;
    }
    d->resolve.data = d;
    int rc =
        uv_getaddrinfo(d->loop, &d->resolve, on_resolved, server, NULL, &hints);
    if (rc != 0) {
        gw_sim_dev_fail(d, "cannot resolve udp.server %s: %s", server,
                        uv_strerror(rc));
        return;
    }
    d->resolving = true;
    d->open_handles++;
}

void gw_sim_dev_udp_close(struct gw_sim_device *d)
{
    if (d->resolving) {
        uv_cancel((uv_req_t *)&d->resolve); /* its callback still runs */
    }
    if (d->forge_fd >= 0) {
        close(d->forge_fd);
        d->forge_fd = -1;
    }
    if (d->udp2_open) {
        uv_udp_recv_stop(&d->udp2);
        uv_close((uv_handle_t *)&d->udp2, gw_sim_dev_on_closed);
        d->udp2_open = false;
    }
    if (d->udp_open) {
        uv_udp_recv_stop(&d->udp);
        uv_close((uv_handle_t *)&d->udp, gw_sim_dev_on_closed);
        d->udp_open = false;
    }
    d->channel_open = false;
    d->uplink_on = false;
    uv_timer_stop(&d->uplink_timer);
    uv_timer_stop(&d->channel_timer);
}
