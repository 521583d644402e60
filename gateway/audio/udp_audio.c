/*
 * The UDP audio socket: binding, the peers it demultiplexes to by ssrc,
 * its life cycle and counters. The uplink path is in udp_uplink.c, the
 * paced downlink in udp_downlink.c.
 */

#include "gateway/audio/udp_audio.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "gateway/audio/udp_audio_int.h"

/* Best effort: a loop stall of a few ms at 1000 devices must not drop. */
#define RX_SOCKBUF (4 * 1024 * 1024)
#define TX_SOCKBUF (1024 * 1024)

static const char *const drop_names[GW_UDP_DROP_COUNT_] = {
#define XX(reason, name) [GW_UDP_DROP_##reason] = name,
    GW_UDP_DROP_MAP(XX)
#undef XX
};

const char *gw_udp_drop_name(enum gw_udp_drop reason)
{
    if ((unsigned)reason >= GW_UDP_DROP_COUNT_) {
        return "?";
    }
    return drop_names[reason];
}

/* ---- peers ---- */

/* Frees what start allocated; the peer is then not started. */
static void release_peer(struct gw_udp_peer *peer)
{
    gw__udp_doctor_unwatch(peer);
    gw_aes_ctr_clear(&peer->aes);
    free(peer->queue.buf);
    memset(&peer->queue, 0, sizeof(peer->queue));
    peer->pacing = false;
    peer->ua = NULL;
}

static int prepare_peer(struct gw_udp_audio *ua, struct gw_udp_peer *peer,
                        const uint8_t key[16])
{
    int err;

    gw_aes_ctr_init(&peer->aes);
    err = gw_aes_ctr_set_key(&peer->aes, key);
    if (err < 0) {
        return err;
    }
    peer->queue.limit = ua->queue_bytes; /* the ring comes when needed */
    return 0;
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
    peer->started_ms = uv_now(ua->loop);
    gw__udp_uplink_reset(peer, frame_duration_ms, peer->started_ms);
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
    gw__udp_pace_remove(peer);
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

/* Milliseconds from loop time t to now, 0 for a peer not started. */
static uint64_t ms_since(const struct gw_udp_peer *peer, uint64_t t)
{
    uint64_t now;

    if (peer->ua == NULL) {
        return 0;
    }
    now = uv_now(peer->ua->loop);
    return now > t ? now - t : 0;
}

uint64_t gw_udp_peer_idle_ms(const struct gw_udp_peer *peer)
{
    return ms_since(peer, peer->last_rx_ms);
}

uint64_t gw_udp_peer_packets(const struct gw_udp_peer *peer)
{
    return peer->rx_count;
}

uint64_t gw_udp_peer_age_ms(const struct gw_udp_peer *peer)
{
    return ms_since(peer, peer->started_ms);
}

/* ---- the instance ---- */

void gw__udp_on_handle_closed(uv_handle_t *handle)
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
    return gw__udp_uplink_start(ua);
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
    ua->on_batch = opts->on_batch;
    ua->batch_arg = opts->batch_arg;
    ua->on_warm = opts->on_warm;
    ua->queue_bytes = (uint32_t)(queue_bytes & ~(size_t)3);
    ua->prebuffer_samples =
        (uint64_t)(opts->prebuffer_ms != 0 ? opts->prebuffer_ms
                                           : GW_UDP_PREBUFFER_MS) *
        SAMPLES_PER_MS;
    ua->hold_samples = (uint64_t)GW_UDP_HOLD_MS * SAMPLES_PER_MS;
    err = uv_udp_init_ex(loop, &ua->sock, addr.sa.sa_family);
    if (err < 0) {
        free(ua);
        return err;
    }
    ua->sock.data = ua;
    uv_timer_init(loop, &ua->pace_timer);
    ua->pace_timer.data = ua;
    ua->rx_tfd = -1;
    ua->rx_fd = -1;
    ua->handles_open = 2;
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
    ua->on_batch = NULL;
    ua->on_warm = NULL;
    for (uint32_t i = 0; ua->peers.slots != NULL && i <= ua->peers.mask; i++) {
        peer = ua->peers.slots[i].value;
        if (peer != NULL) {
            release_peer(peer);
        }
    }
    gw_ssrc_table_free(&ua->peers);
    free(ua->watch); /* every peer let go of its slot above */
    ua->watch = NULL;
    ua->pace_head = NULL;
    gw__udp_uplink_stop(ua); /* before the socket, whose fd it watches */
    uv_timer_stop(&ua->pace_timer);
    uv_close((uv_handle_t *)&ua->sock, gw__udp_on_handle_closed);
    uv_close((uv_handle_t *)&ua->pace_timer, gw__udp_on_handle_closed);
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
