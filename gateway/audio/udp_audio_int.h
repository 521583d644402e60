/*
 * What the three files of the UDP audio socket share: the instance
 * (udp_audio.c: socket, peers, life cycle), the uplink path
 * (udp_uplink.c) and the paced downlink (udp_downlink.c).
 */
#ifndef GW_UDP_AUDIO_INT_H
#define GW_UDP_AUDIO_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <uv.h>

#include "codec/udp_header.h"
#include "common/ratelimit.h"
#include "gateway/audio/ssrc_table.h"
#include "gateway/audio/udp_audio.h"

/*
 * The uplink reads with its own recvmmsg (libuv's gives no ancillary
 * data, and the kernel's receive time is what the relay delay is measured
 * from): RX_BATCH datagrams a call, each in a slot larger than any valid
 * datagram, so a longer one shows as truncated.
 */
#define RX_BATCH 64
#define RX_SLOT  2048
/* Room before each datagram: with its header, GW_UDP_HEADROOM before the
 * payload. */
#define RX_HEAD (GW_UDP_HEADROOM - GW_UDP_HEADER_LEN)
#define RX_CTL  64 /* ancillary data of one datagram: its timestamp */

#define SAMPLES_PER_MS 48 /* Opus durations are counted at 48 kHz */

/* A queued downlink datagram starts with this, 4-byte aligned. */
struct record {
    uint16_t len;     /* datagram bytes that follow */
    uint16_t samples; /* its duration at 48 kHz (at most 5760) */
};

#define RECORD_SIZE(len)                                                       \
    ((uint32_t)sizeof(struct record) + (((len) + 3u) & ~3u))
#define MAX_DATAGRAM (GW_UDP_HEADER_LEN + GW_UDP_MAX_PAYLOAD)

/*
 * The doctor's table of device addresses watched for datagrams of an
 * unknown ssrc (udp_doctor.c): open addressing over a fixed array, made at
 * the first watch, at most half full. Only a session's start adds an
 * address, so a flood from others finds nothing and changes nothing.
 */
#define GW_UDP_WATCH_BITS  10
#define GW_UDP_WATCH_SLOTS (1u << GW_UDP_WATCH_BITS)

struct gw_udp_watch {
    uint8_t ip[16];     /* IPv4 mapped into IPv6 */
    uint32_t refs;      /* sessions watching it; 0 = empty slot */
    uint32_t unknown;   /* unknown-ssrc datagrams from it */
    uint32_t last_ssrc; /* the last of them named */
    uint16_t last_port; /* and came from */
};

struct gw_udp_audio {
    uv_loop_t *loop;
    uv_udp_t sock;            /* the advertised socket, both directions */
    uv_poll_t rx_poll;        /* readable events of the same socket */
    uv_timer_t pace_timer;    /* runs while pace_head is not NULL */
    int handles_open;         /* closes still to come */
    int rx_fd;                /* sock's descriptor, once reading started */
    uint64_t rx_window_ms;    /* start of the current rate window */
    unsigned rx_window_count; /* datagrams read in it */
    unsigned rx_rate;         /* datagrams of the last whole window */
    bool rx_poll_open;        /* rx_poll was initialised */
    /* Reading on ticks (udp_uplink.c): a one-shot timerfd and its poll. */
    int rx_tfd;               /* -1 when none */
    uv_poll_t rx_tick;        /* readable when a tick has passed */
    bool rx_tick_open;        /* rx_tick was initialised */
    unsigned rx_tick_us;      /* the armed tick; 0: on the socket's events */
    bool rx_stamped;          /* the kernel timestamps each datagram */
    bool closing;             /* gw_udp_audio_close() was called */
    gw_udp_close_cb close_cb; /* called once all handles closed */
    void *close_arg;          /* for close_cb */
    gw_udp_audio_cb on_audio; /* accepted uplink goes here */
    void (*on_batch)(void *arg, bool end); /* around each read batch */
    void *batch_arg;
    void (*on_warm)(void *owner, unsigned step); /* before each batch */
    struct gw_ssrc_table peers;    /* ssrc -> struct gw_udp_peer */
    struct gw_udp_peer *pace_head; /* peers with downlink queued */
    uint64_t prebuffer_samples;    /* audio allowed ahead of the device */
    uint64_t hold_samples;         /* downlink held without an address */
    uint32_t queue_bytes;          /* ring size of each peer */
    int port;                      /* bound port */
    struct gw_udp_audio_stats stats;
    struct gw_bucket log_bucket;      /* drop lines (gw__udp_note_drop) */
    struct gw_udp_watch *watch;       /* GW_UDP_WATCH_SLOTS, or NULL */
    uint32_t n_watch;                 /* slots in use */
    uint8_t tx[MAX_DATAGRAM];         /* downlink sent without queueing */
    struct mmsghdr rx_msgs[RX_BATCH]; /* one batch of uplink ... */
    struct iovec rx_iov[RX_BATCH];
    union gw_udp_addr rx_from[RX_BATCH];
    _Alignas(struct cmsghdr) uint8_t rx_ctl[RX_BATCH][RX_CTL];
    /* ... and its datagrams, each at RX_HEAD in its slot (rx_data) */
    _Alignas(16) uint8_t rx[RX_BATCH][RX_HEAD + RX_SLOT];
};

/* What one uplink datagram comes to (gw__udp_uplink_judge). */
struct gw_udp_verdict {
    enum gw_udp_drop reason;  /* why it is dropped, when it is */
    struct gw_udp_peer *peer; /* the session its ssrc names, or NULL */
    struct gw_udp_header h;   /* valid once peer is set */
    uint8_t *opus;            /* the decrypted payload, when accepted */
    bool learned;             /* accepted, and the first address learned */
    bool moved;               /* accepted, and the address moved from was */
    bool late;                /* accepted below the last sequence */
    union gw_udp_addr was;
};

/*
 * The uplink's decision on one datagram of len bytes from from, at loop
 * time now (udp_uplink.c): header, session by ssrc, replay and forward
 * window, decryption in place, Opus, and the address rules. It updates the
 * session's uplink state (sequence, window, address, trial) and nothing
 * else: counting, logging, waking the downlink and handing the audio on
 * are the caller's. Returns true to accept; else v->reason says why.
 */
bool gw__udp_uplink_judge(const struct gw_ssrc_table *peers, uint8_t *buf,
                          size_t len, const struct sockaddr *from, uint64_t now,
                          struct gw_udp_verdict *v);

/*
 * Resets a peer's uplink state for a new hello at loop time now:
 * sequences, window, frame duration (0 if unknown), idle clock.
 */
void gw__udp_uplink_reset(struct gw_udp_peer *peer, int frame_duration_ms,
                          uint64_t now);

/* Counts a drop and logs it, rate-limited, at debug level (udp_uplink.c). */
void gw__udp_note_drop(struct gw_udp_audio *ua, enum gw_udp_drop reason,
                       const struct sockaddr *from);

/* Keeps what a dropped datagram says about the session its ssrc names,
 * or about a watched device address (udp_doctor.c). */
void gw__udp_doctor_note(struct gw_udp_audio *ua,
                         const struct gw_udp_verdict *v,
                         const struct sockaddr *from);

/* The peer lets go of its watched address, if any (udp_doctor.c). */
void gw__udp_doctor_unwatch(struct gw_udp_peer *peer);

/* Starts reading the bound socket in batches (udp_uplink.c). */
int gw__udp_uplink_start(struct gw_udp_audio *ua);

/* Closes the reading handles (before the socket): udp_uplink.c. */
void gw__udp_uplink_stop(struct gw_udp_audio *ua);

/* Every handle's close callback; the last frees ua (udp_audio.c). */
void gw__udp_on_handle_closed(uv_handle_t *handle);

/* Puts a peer with queued downlink on the pacing list (udp_downlink.c). */
void gw__udp_pace_add(struct gw_udp_peer *peer);

/* Takes a peer off the pacing list, if it is on it (udp_downlink.c). */
void gw__udp_pace_remove(struct gw_udp_peer *peer);

#endif /* GW_UDP_AUDIO_INT_H */
