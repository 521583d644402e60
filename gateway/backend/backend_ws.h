/*
 * WebSocket connections to AI backends (docs/protocol.md section 6):
 * libwebsockets on the instance's libuv loop, one lws context for all
 * sessions, one connection per session, with the upgrade headers, auth
 * scheme and binary audio framing each backend's config asks for.
 */
#ifndef GW_BACKEND_WS_H
#define GW_BACKEND_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "codec/audio_frame.h"
#include "codec/ws_frame.h"
#include "common/dns_cache.h"
#include "common/error.h"
#include "config/config.h"

struct gw_backend_ws;   /* the per-instance lws context */
struct gw_backend_conn; /* one session's WebSocket */

/*
 * Events of one connection. After on_close returns, the connection is
 * gone: the owner must drop its pointer there.
 */
struct gw_backend_events {
    /* The upgrade succeeded; sends are now possible. */
    void (*on_open)(struct gw_backend_conn *conn, void *owner);
    /* One complete text message (reassembled from fragments). */
    void (*on_text)(struct gw_backend_conn *conn, const char *text, size_t len,
                    void *owner);
    /* One complete binary message, already unframed: an Opus packet. */
    void (*on_audio)(struct gw_backend_conn *conn, uint32_t timestamp,
                     const uint8_t *opus, size_t len, void *owner);
    /*
     * The connection failed or closed, from either side; exactly once per
     * connection, always from the loop, never from inside a call of this
     * module. reason says why in a few words: "connect failed: <detail>",
     * "connect timeout", "closed by backend <code>", "closed by gateway",
     * "message too big", "connection lost", "write failed".
     */
    void (*on_close)(struct gw_backend_conn *conn, const char *reason,
                     void *owner);
};

/* What one connection needs beyond its backend's config. */
struct gw_backend_connect {
    const struct gw_backend_config *backend;
    const char *device_id;     /* MAC "aa:bb:cc:dd:ee:ff" */
    const char *client_id;     /* uuid; NULL or "": "default-client-id" */
    const char *forwarded_for; /* device IP for x-forwarded-for, or NULL */
    const char *log_subject;   /* the session's log prefix: not copied,
                                  must outlive the connection */
    size_t max_message_bytes;  /* larger incoming messages close it with
                                  1009 (limits.max_downlink_bytes); 0
                                  means 64 KiB */
};

struct gw_backend_ws_stats {
    uint64_t connects;       /* upgrades that succeeded */
    uint64_t connect_errors; /* failed before the upgrade */
    uint64_t rx_text, rx_audio, tx_text, tx_audio;
    uint64_t rx_bad_frames; /* undecodable binary messages */
    uint64_t tx_dropped;    /* send queue full */
    uint64_t tx_pings;      /* to connections with no pong for a while */
    uint64_t rx_pongs;      /* answers to the idle pings */
    uint64_t ping_timeouts; /* connections dropped: no answer to a ping */
    uint64_t live;          /* connections whose on_close is still due */
};

typedef void (*gw_backend_ws_close_cb)(struct gw_backend_ws *bws, void *arg);

/* One backend's dropped binary messages, indexed by enum gw_backend_drop
 * (gateway/backend/backend_msg.h). */
typedef void (*gw_backend_drops_cb)(const char *backend,
                                    const uint64_t *by_reason, void *arg);

/*
 * Creates the lws context on loop. ca_file (may be NULL) is added to the
 * system trust store for wss:// (tests use their own CA); a backend's own
 * ca_file is honoured too, per backend. Certificates and host names are
 * always verified. Returns 0, GW_EINVAL, GW_ENOMEM or GW_ECONFIG (lws
 * could not start, e.g. its libuv event library is not installed).
 */
GW_MUST_CHECK int gw_backend_ws_init(uv_loop_t *loop, const char *ca_file,
                                     struct gw_backend_ws **out);

/*
 * Destroys the context (two-phase, as lws needs with a foreign loop);
 * every open connection gets on_close first ("closed by gateway": open
 * ones are given up to a second to close normally). cb runs when done;
 * then lws has no handle left on the loop.
 */
void gw_backend_ws_close(struct gw_backend_ws *bws, gw_backend_ws_close_cb cb,
                         void *arg);

void gw_backend_ws_get_stats(const struct gw_backend_ws *bws,
                             struct gw_backend_ws_stats *out);

/* The backends' resolver cache (common/dns_cache.h). */
void gw_backend_ws_get_dns_stats(const struct gw_backend_ws *bws,
                                 struct gw_dns_stats *out);

/*
 * A connection that received no pong for secs gets a WebSocket ping, and
 * is dropped ("connection lost: no pong") when none follows within secs
 * more; 0 turns this off. Default 30. For connections opened after the
 * call.
 */
void gw_backend_ws_set_ping(struct gw_backend_ws *bws, unsigned secs);

/*
 * A burst of writes: between hold and release, a message that would go to
 * its socket at once waits in its connection's queue instead (an audio
 * frame built in place, in the burst: gw_backend_conn_send_audio_held),
 * and release sends them all, each connection's in order. The uplink holds
 * around each batch of datagrams it reads, so that the batch's sends follow one
 * another without the per-packet work in between, the kernel's send path
 * warm (docs/architecture.md, section 3). Not nested.
 */
void gw_backend_ws_hold(struct gw_backend_ws *bws);
void gw_backend_ws_release(struct gw_backend_ws *bws);

/*
 * Prefetches what sending a frame on conn reads: step 0 the connection's
 * own fields, 1 the lws connection (see gw_session_warm). Reads only; any
 * conn state is fine.
 */
void gw_backend_conn_warm(const struct gw_backend_conn *conn, unsigned step);

/*
 * Calls cb for every backend a connection has been opened to since init,
 * in no set order, with its drop counters (zero until a drop).
 */
void gw_backend_ws_foreach_drops(const struct gw_backend_ws *bws,
                                 gw_backend_drops_cb cb, void *arg);

/*
 * Starts connecting to params->backend->url, verbatim. Everything
 * needed is copied: params and the config need not outlive the call.
 * Events go to ev (copied) with owner. Returns 0 (on_open or on_close will
 * follow, never from inside this call) or an error, after which no event
 * follows: GW_EINVAL (bad url, header value with control characters, an
 * extra header gw_config_header_check refuses, auth scheme without its
 * token or secret), GW_EPROTO (gw_backend_ws_close was
 * called), GW_ECONFIG (the backend's ca_file), GW_ENOMEM. A host name
 * is resolved off the loop (common/dns_cache.h) before lws connects.
 */
GW_MUST_CHECK int gw_backend_conn_open(struct gw_backend_ws *bws,
                                       const struct gw_backend_connect *params,
                                       const struct gw_backend_events *ev,
                                       void *owner,
                                       struct gw_backend_conn **out);

/*
 * Queues a text message (copied). Messages queued before on_open go out
 * right after the upgrade. GW_ELIMIT when the queue is full (256 messages
 * or 1 MiB; counted in tx_dropped), GW_EPROTO after
 * gw_backend_conn_close.
 */
GW_MUST_CHECK int gw_backend_conn_send_text(struct gw_backend_conn *conn,
                                            const char *text, size_t len);

/*
 * Queues one Opus packet (for pcm16: the PCM of one device frame), framed
 * as the backend's config says, in a pooled buffer. Errors as for text,
 * plus GW_ETOOBIG (over 1484 bytes; pcm16: over
 * GW_AUDIO_FRAME_PCM16_MAX_PAYLOAD).
 */
GW_MUST_CHECK int gw_backend_conn_send_audio(struct gw_backend_conn *conn,
                                             uint32_t timestamp,
                                             const uint8_t *opus, size_t len);

/*
 * Bytes before the payload that gw_backend_conn_send_audio_held may
 * overwrite: the largest audio frame header and WebSocket frame head.
 */
#define GW_BACKEND_AUDIO_HEADROOM                                              \
    (GW_AUDIO_FRAME_MAX_HEADER_LEN + GW_WS_FRAME_HEAD_MAX)
/* Frames built in place per hold; later ones are copied. */
#define GW_BACKEND_BURST_MAX 64

/*
 * As gw_backend_conn_send_audio, but between gw_backend_ws_hold and
 * _release the frame may be built where opus lies instead of in a
 * buffer of the connection's (a plain ws:// connection with nothing
 * queued, not pcm16): the GW_BACKEND_AUDIO_HEADROOM bytes before opus and
 * opus itself are then overwritten, and must stay until the release,
 * which writes such frames before anything queued. Otherwise copies, as
 * gw_backend_conn_send_audio. Errors as there.
 */
GW_MUST_CHECK int gw_backend_conn_send_audio_held(struct gw_backend_conn *conn,
                                                  uint32_t timestamp,
                                                  uint8_t *opus, size_t len);

/*
 * Closes the connection (normal closure, after queued messages are
 * written; a backend that does not answer the close is dropped after 3
 * s). No on_open, on_text or on_audio after this call; on_close follows
 * later, from the loop, never from inside this call. Safe to call more
 * than once, and until on_close has run.
 */
void gw_backend_conn_close(struct gw_backend_conn *conn);

/* The framing of the connection's backend (from its config at open). */
enum gw_framing gw_backend_conn_framing(const struct gw_backend_conn *conn);

/* pcm16: the backend's configured pcm_sample_rate (from its config). */
int gw_backend_conn_pcm_rate(const struct gw_backend_conn *conn);

#endif /* GW_BACKEND_WS_H */
