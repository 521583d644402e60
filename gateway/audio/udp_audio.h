/*
 * The instance's UDP audio socket (docs/protocol.md section 4): one socket for
 * every device, batched reads, O(1) demultiplexing by ssrc, in-place
 * decryption, replay and spoofing defences, and paced downlink.
 */
#ifndef GW_UDP_AUDIO_H
#define GW_UDP_AUDIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "common/error.h"
#include "crypto/aes_ctr.h"
#include "gateway/core/latency.h"
#include "gateway/audio/udp_doctor.h"

/* Audio kept ahead of the device's play clock (about 5 frames of 60 ms). */
#define GW_UDP_PREBUFFER_MS 300
/* Bytes of encrypted downlink a peer may queue: 10 s of TTS fits. */
#define GW_UDP_QUEUE_BYTES (64 * 1024)
#define GW_UDP_WARM_STEPS  3 /* on_warm steps per batch */
/* Writable bytes before each uplink payload (see gw_udp_audio_cb). */
#define GW_UDP_HEADROOM 32
/* Downlink held while the device's address is unknown, in ms of audio. */
#define GW_UDP_HOLD_MS 1000
/* In-order, in-stream packets from a new address before it is trusted. */
#define GW_UDP_MOVE_PACKETS 4
/*
 * How far, in ms of the hello's frames, an uplink sequence may run ahead of
 * where the device's real-time stream can be (the forward window, see
 * udp_uplink.c): the firmware's wake-word pre-roll, about 2 s sent at
 * once, plus network delay variation. 66 sequences at 60 ms frames.
 */
#define GW_UDP_AHEAD_MS 4000
/*
 * A packet at most this far above the last accepted one always passes the
 * window: a run of a few lost packets, or a sender faster than real time
 * (the simulated device's --fast test mode), is never cut off.
 */
#define GW_UDP_AHEAD_STEP 8
/*
 * A late packet, up to this many sequences below the last accepted one,
 * that was never accepted passes once: a network that reorders (a packet
 * overtaken by the next few) loses none of the device's audio to the
 * replay rule (bench/LOSS.md). At most 32: one bit each in the peer.
 */
#define GW_UDP_LATE_WINDOW 32

struct gw_udp_audio;
struct gw_udp_peer;

/*
 * A valid uplink packet, decrypted in place in the reader's receive slot.
 * The slot is the owner's until the batch ends (on_batch with end true,
 * or the call's return without on_batch): it may change the payload and
 * the GW_UDP_HEADROOM bytes before it, for example to frame it where it
 * lies (gw_backend_conn_send_audio_held).
 */
typedef void (*gw_udp_audio_cb)(struct gw_udp_peer *peer, uint32_t timestamp,
                                uint8_t *opus, size_t len, void *owner);

/* ua is still valid during the call and freed right after it. */
typedef void (*gw_udp_close_cb)(struct gw_udp_audio *ua, void *arg);

/*
 * Why a datagram was dropped, each with its counter and metric label: one
 * list makes both the enum (GW_UDP_DROP_<reason>) and gw_udp_drop_name().
 */
#define GW_UDP_DROP_MAP(XX)                                                    \
    XX(SHORT, "short")           /* under 16 bytes */                          \
    XX(TYPE, "type")             /* byte 0 != 0x01 */                          \
    XX(LENGTH, "length")         /* 16 + payload_len != datagram length */     \
    XX(TOOBIG, "toobig")         /* payload over 1484 bytes */                 \
    XX(UNKNOWN, "unknown_ssrc")  /* no session has this ssrc */                \
    XX(REPLAY, "replay")         /* sequence <= last accepted */               \
    XX(AHEAD, "ahead")           /* sequence beyond the forward window */      \
    XX(OPUS, "opus")             /* decrypted payload is not sane Opus */      \
    XX(ADDRESS, "address")       /* from a new address not (yet) trusted */    \
    XX(NO_ADDRESS, "no_address") /* downlink before the device's first         \
                                    packet, over the hold */                   \
    XX(QUEUE_FULL, "queue_full") /* downlink pacing queue full */              \
    XX(SEND, "send")             /* sendmsg (or its encryption) failed */      \
    XX(EMPTY, "empty")           /* uplink with an empty payload: nothing to   \
                                    forward, and not proof of anything */      \
    XX(TX_INVALID, "tx_invalid") /* downlink that is not one Opus packet of    \
                                    at most 1484 bytes */                      \
    XX(SEQ_END, "seq_end")       /* downlink past GW_UDP_DOWNLINK_SEQ_MAX */

enum gw_udp_drop {
#define XX(reason, _) GW_UDP_DROP_##reason,
    GW_UDP_DROP_MAP(XX)
#undef XX
        GW_UDP_DROP_COUNT_
};

/*
 * Upper bounds (microseconds) of the relay delay histogram: from the
 * kernel's receipt of a device datagram to its hand-off to the session
 * (and so to the backend's socket). The last bucket holds the rest.
 */
#define GW_UDP_RELAY_BUCKETS 14
extern const uint32_t gw_udp_relay_bounds_us[GW_UDP_RELAY_BUCKETS];

struct gw_udp_audio_stats {
    uint64_t rx_packets;    /* datagrams read */
    uint64_t rx_audio;      /* handed to a session */
    uint64_t tx_audio;      /* sent to devices */
    uint64_t tx_flushed;    /* queued downlink discarded by a flush */
    uint64_t address_moves; /* sessions whose device address moved */
    uint64_t rx_late;       /* of rx_audio: late, inside the late window */
    /* Sessions the UDP path doctor warned about, by cause (udp_doctor.h),
     * and devices it could not watch for unknown ssrcs (table full). */
    uint64_t doctor[GW_UDP_DOCTOR_COUNT_];
    uint64_t doctor_unwatched;
    /* Reading wakeups: on the socket's events, on the read timer's ticks
     * (udp_uplink.c; datagrams read over wakeups is the batch size). */
    uint64_t rx_wakeups_events;
    uint64_t rx_wakeups_ticks;
    uint64_t drops[GW_UDP_DROP_COUNT_]; /* by enum gw_udp_drop */
    /* The relay delay of accepted datagrams, when the kernel stamps them
     * (SO_TIMESTAMPNS): counts per bucket, not cumulative, and the sum. */
    uint64_t relay_le[GW_UDP_RELAY_BUCKETS + 1];
    uint64_t relay_sum_us;
    /* A turn's first downlink datagram (gw_udp_peer_time_next): from its
     * frame's arrival, and from the turn's tts start. */
    struct gw_latency turn_first_audio;
    struct gw_latency turn_tts_to_audio;
};

/* Metric label of a reason ("replay", "no_address"...); never NULL. */
const char *gw_udp_drop_name(enum gw_udp_drop reason);

/*
 * The socket is bound to bind_host:port and downlink leaves from it too:
 * the device's socket is connect()ed to the advertised udp.public_host, so
 * on a multi-homed host bind to that address (or use the wildcard only
 * where the kernel's choice of source address is that one).
 */
struct gw_udp_audio_options {
    const char *bind_host; /* e.g. "0.0.0.0" or "::" */
    int port;              /* 0 picks a free port (tests) */
    gw_udp_audio_cb on_audio;
    /* Around each batch of datagrams read at once (end false, then true):
     * lets the owner send what the batch's on_audio calls make as one
     * burst (gw_backend_ws_hold). May be NULL. */
    void (*on_batch)(void *arg, bool end);
    void *batch_arg;
    /* Before a batch is handled, for each datagram's owner and each step
     * from 0 to GW_UDP_WARM_STEPS - 1 (every owner's step 0, then every
     * owner's step 1, ...): a chance to prefetch the memory its on_audio
     * will touch, one pointer further each step. May be NULL. */
    void (*on_warm)(void *owner, unsigned step);
    unsigned prebuffer_ms; /* 0 = GW_UDP_PREBUFFER_MS */
    size_t queue_bytes;    /* per peer; 0 = GW_UDP_QUEUE_BYTES */
};

/* A device's UDP address, IPv4 or IPv6. */
union gw_udp_addr {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
};

/*
 * Encrypted downlink datagrams waiting for the play clock: a byte ring of
 * variable-length records (most TTS packets are 100-300 bytes, so fixed
 * 1500-byte slots would waste most of the memory). It is allocated at the
 * first packet that waits, small, and doubles as a burst needs it, up to
 * limit; emptied, a grown ring goes back (udp_downlink.c).
 */
struct gw_udp_queue {
    uint8_t *buf;     /* cap bytes; NULL until a packet waits */
    uint32_t cap;     /* multiple of 4 */
    uint32_t limit;   /* the most cap may grow to (queue_bytes) */
    uint32_t rd;      /* offset of the oldest record */
    uint32_t wr;      /* offset where the next record goes */
    uint32_t wrap;    /* end of the records above rd when wrapped */
    bool wrapped;     /* records run [rd, wrap) then [0, wr) */
    uint32_t count;   /* records queued */
    uint64_t samples; /* their total duration at 48 kHz */
};

/*
 * Per-session UDP state; embedded in the session, owned by this module.
 * Zero it before its first gw_udp_peer_start(); read no member directly.
 */
struct gw_udp_peer {
    /* What the judge reads for every packet comes first, up to candidate
     * (the reader prefetches it for a whole batch: udp_uplink.c). */
    struct gw_udp_audio *ua; /* NULL while not started */
    void *owner;             /* passed to on_audio */
    uint32_t ssrc;           /* key of the ssrc table */
    /* The session's key, both directions (CTR: the same operation);
     * embedded, so the uplink reads the key schedule beside the fields
     * above instead of behind a pointer. */
    struct gw_aes_ctr aes;
    uint32_t frame_samples_48k; /* expected uplink frame duration, or 0 */
    uint32_t last_seq;          /* last accepted uplink sequence */
    uint32_t tx_seq;            /* last downlink sequence sent */
    /* Bit k: sequence last_seq - k was accepted (the late window). */
    uint32_t seq_seen;
    union gw_udp_addr addr; /* the device, once learned */
    bool has_addr;          /* addr is valid */
    bool has_candidate;     /* candidate below is valid */
    /* The forward window's line (udp_uplink.c): by loop time line_ms + t
     * the device's stream is at most at line_seq plus t in frames. */
    uint32_t line_seq;
    uint64_t line_ms;
    uint64_t toc_seen;   /* bit (TOC >> 2) of each accepted TOC */
    uint64_t last_rx_ms; /* loop time of the last accepted */
    uint64_t rx_count;   /* accepted since the start */
    uint64_t rx_fit;     /* of those, of the hello's frame length */
    /* A new address under trial (see the move rule in udp_uplink.c). */
    union gw_udp_addr candidate;
    uint32_t candidate_seq;      /* its last in-order sequence */
    unsigned candidate_hits;     /* consecutive in-stream packets */
    uint64_t candidate_since_ms; /* loop time of the first of them */
    const char *subject;         /* log prefix; NULL = "udp" */
    /* Downlink pacing: the queue and the device's play clock. */
    struct gw_udp_queue queue;
    uint64_t play_start_ms;        /* loop time the device clock began */
    uint64_t hold_until_ms;        /* no downlink before this loop time */
    uint64_t played_samples;       /* audio sent since play_start_ms */
    struct gw_udp_peer *pace_prev; /* in the pacing list */
    struct gw_udp_peer *pace_next;
    bool pacing; /* on the pacing list */
    /* The downlink datagram being timed (0: none), and its clocks. */
    uint32_t timed_seq;
    uint64_t timed_rx_ns, timed_since_ns;
    uint64_t started_ms; /* loop time of the start */
    /* What the doctor keeps until the first accepted packet (udp_doctor.c). */
    struct gw_udp_evidence ev;
};

/*
 * Binds the socket and starts reading. Above 2 datagrams a millisecond
 * uplink is read in batches, a tick of at most 0.4 ms after the last
 * read, so a packet may wait that long and a read's work (a wakeup per
 * packet would cost more than the rest of its handling; udp_uplink.c).
 * Returns 0, GW_EINVAL (bad options) or a libuv error (UV_EADDRINUSE...).
 */
GW_MUST_CHECK int gw_udp_audio_init(uv_loop_t *loop,
                                    const struct gw_udp_audio_options *opts,
                                    struct gw_udp_audio **out);

/*
 * Stops reading, releases every peer still started (their owners should
 * have stopped them; a later gw_udp_peer_stop() on them is a no-op),
 * closes the socket and the pacing timer, then calls cb (may be NULL) and
 * frees ua. Safe inside on_audio. Idempotent.
 */
void gw_udp_audio_close(struct gw_udp_audio *ua, gw_udp_close_cb cb, void *arg);

/* The bound port (useful when the config asks for port 0 in tests). */
int gw_udp_audio_port(const struct gw_udp_audio *ua);

void gw_udp_audio_get_stats(const struct gw_udp_audio *ua,
                            struct gw_udp_audio_stats *out);

/*
 * Starts a peer for a new hello: installs key, registers ssrc (which must
 * be unused: see gw_udp_audio_ssrc_in_use), resets sequences to 0 and
 * forgets any learned address. A started peer is stopped first (a
 * re-hello). frame_duration_ms is the device's uplink frame length from
 * its hello (0 if unknown). Returns 0, GW_EINVAL, GW_EEXIST, GW_ENOMEM,
 * GW_ECRYPTO.
 */
GW_MUST_CHECK int gw_udp_peer_start(struct gw_udp_audio *ua,
                                    struct gw_udp_peer *peer, uint32_t ssrc,
                                    const uint8_t key[16],
                                    int frame_duration_ms, void *owner);

/* Unregisters the peer and drops its queued downlink. Synchronous. */
void gw_udp_peer_stop(struct gw_udp_peer *peer);

/*
 * Log prefix for this peer's lines (the session's identity); the string
 * must outlive the peer's start. Reset by every start.
 */
void gw_udp_peer_set_subject(struct gw_udp_peer *peer, const char *subject);

/* Matches gw_session_keys_in_use_cb; ua is the struct gw_udp_audio. */
bool gw_udp_audio_ssrc_in_use(uint32_t ssrc, void *ua);

/*
 * Queues one Opus packet for the device, encrypted with the next sequence
 * and sent when the play clock allows (a small pre-buffer goes at once).
 * Before the device's first uplink packet up to GW_UDP_HOLD_MS of audio is
 * held for it. Returns 0 (also when a send fails: counted, audio is not
 * retried), GW_EINVAL (not started), GW_ETOOBIG / GW_EOPUS (not one Opus
 * packet that fits a datagram), GW_ELIMIT (queue full, hold exceeded, or
 * the hello's downlink sequences spent: GW_UDP_DOWNLINK_SEQ_MAX); every
 * refusal is counted.
 */
GW_MUST_CHECK int gw_udp_peer_send(struct gw_udp_peer *peer, uint32_t timestamp,
                                   const uint8_t *opus, size_t len);

/*
 * Discards queued downlink (an abort: the device flushes its own queue)
 * and lets the play clock restart. Returns how many packets went.
 */
size_t gw_udp_peer_flush(struct gw_udp_peer *peer);

/*
 * Holds downlink for ms from now (queued, then paced as usual). Used after
 * a "tts start": that message reaches the device through the broker, and
 * the device discards audio that overtakes it.
 */
void gw_udp_peer_hold(struct gw_udp_peer *peer, unsigned ms);

/*
 * Times the next downlink packet queued: when its datagram is sent, the
 * stats' turn_first_audio gets the time since rx_ns and turn_tts_to_audio
 * the time since since_ns (uv_hrtime() clocks). A flush, a failed send or
 * a restart of the peer forgets it.
 */
void gw_udp_peer_time_next(struct gw_udp_peer *peer, uint64_t rx_ns,
                           uint64_t since_ns);

/* True once the device's address is known (downlink can reach it). */
bool gw_udp_peer_has_address(const struct gw_udp_peer *peer);

/* Milliseconds since the peer's last accepted uplink packet (or start). */
uint64_t gw_udp_peer_idle_ms(const struct gw_udp_peer *peer);

/* Uplink packets accepted since the peer's start. */
uint64_t gw_udp_peer_packets(const struct gw_udp_peer *peer);

/* Milliseconds since the peer's start (0 when not started). */
uint64_t gw_udp_peer_age_ms(const struct gw_udp_peer *peer);

#endif /* GW_UDP_AUDIO_H */
