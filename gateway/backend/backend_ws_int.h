/*
 * What the four files of the backend WebSocket module share: the context,
 * connection life cycle and lws callback dispatch (backend_ws.c), opening
 * a connection (backend_open.c), its send queue and receive path
 * (backend_io.c), and the keepalive (backend_alive.c).
 */
#ifndef GW_BACKEND_WS_INT_H
#define GW_BACKEND_WS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libwebsockets.h>
#include <uv.h>

#include "codec/audio_frame.h"
#include "common/dns_cache.h"
#include "common/list.h"
#include "gateway/backend/backend_msg.h"
#include "gateway/backend/backend_ws.h"
#include "gateway/core/lws_uv.h"

#define PROTOCOL_NAME "gw-backend"
/* lws hands a message over in pieces of at most this size, from a buffer
 * of this size per connection: above any Opus frame (1484 + header), so
 * audio comes in one piece; larger messages are joined by backend_msg.c. */
#define RX_CHUNK        2048
#define CLOSE_LINGER_MS 3000 /* bound on our close handshake */
/* lws's own stage timeouts stay above any connect_timeout_ms (<= 120 s),
 * so that ours, which count the whole connect, always fire first. */
#define LWS_STAGE_TIMEOUT_S 130
#define REASON_MAX          128

/* One queued outgoing message, LWS_PRE bytes of headroom in front. */
struct tx_msg {
    struct tx_msg *next; /* queue or free list */
    size_t len;          /* message bytes at buf + LWS_PRE */
    size_t cap;          /* room for the message */
    bool binary;         /* audio frame, else text */
    uint8_t buf[];       /* LWS_PRE headroom, then the message */
};

enum conn_state {
    CONN_CONNECTING, /* TCP, TLS and upgrade under way; timer = timeout */
    CONN_OPEN,       /* upgraded */
    CONN_CLOSING,    /* our close frame is queued or sent; timer = linger */
    CONN_DONE        /* unhooked from lws; on_close is pending */
};

struct gw_backend_conn {
    /* What an audio frame's write reads, first and together (one line for
     * a thousand connections taking turns: gw_backend_conn_warm). */
    struct gw_backend_ws *bws;
    struct lws *wsi; /* NULL once unhooked */
    struct tx_msg *tx_head, *tx_tail;
    int fd; /* its socket once open: plain ws:// audio frames go straight */
    enum conn_state state;
    enum gw_framing framing;
    bool close_requested; /* by gw_backend_conn_close or shutdown */
    bool close_sent;      /* lws is sending our close frame */
    bool tls;
    uint8_t in_burst; /* its frames in bws->burst (backend_io.c) */

    struct gw_list link; /* on bws->conns */
    struct gw_list held; /* on bws->held while its writes wait (hold) */
    struct tx_msg *spare;
    size_t tx_count, tx_bytes, spare_count;
    uv_timer_t timer; /* connect timeout, close linger; its close is ours */
    struct gw_backend_events ev;
    void *owner;
    int pcm_sample_rate; /* pcm16: the backend's configured PCM rate */
    int connect_timeout_ms;
    size_t max_message;
    uint64_t started_ms; /* loop time of gw_backend_conn_open */
    /* Strings copied at open; all point into the same allocation. */
    const char *name;      /* backend name, for logs */
    const char *subject;   /* the owner's log prefix (owner's memory) */
    const char *device_id; /* header values */
    const char *client_id;
    const char *forwarded_for; /* NULL when unknown */
    const char *authorization; /* "Bearer ...", NULL for scheme none */
    const char *extra_headers; /* backends[].headers: "name:" NUL value NUL */
    size_t n_extra_headers;    /* pairs at extra_headers */
    const char *address;       /* the url's host: a name or an IP */
    const char *host;          /* Host header; TLS name (up to ':') */
    const char *path;          /* verbatim from the url */
    int port;

    struct lws_vhost *vh;       /* the client vhost to connect from */
    struct gw_dns_req *dns_req; /* while the address is being resolved */
    char ip[GW_DNS_IP_MAX];     /* what lws connects to */

    struct gw_backend_msg rx; /* a message arriving in pieces */
    uint64_t bad_frames;      /* this connection's, for rate-limited logs */
    /* Its backend's drop counters (NULL when out of memory), and whether
     * the url ends with ?from=mqtt_gateway, for the drop warning. */
    struct backend_drops *drops;
    bool gateway_query;
    char reason[REASON_MAX]; /* the first cause of the end wins */
    /* The keepalive (backend_alive.c): on bws->quiet while open, in the
     * order of alive_due, when it is pinged or dropped. */
    struct gw_list quiet;
    uint64_t alive_due; /* loop ms */
    bool ping_wanted;   /* at the next writable event */
    bool ping_out;      /* sent, not answered yet */
};

/* Binary messages of one backend (by name) dropped, for /metrics. */
struct backend_drops {
    struct backend_drops *next;
    uint64_t by_reason[GW_BACKEND_DROP_COUNT_];
    char name[];
};

/* Extra client vhosts, one per distinct backend ca_file. */
struct ca_vhost {
    struct ca_vhost *next;
    struct lws_vhost *vh;
    char name[16]; /* lws keeps the pointer */
    char path[];
};

enum bws_phase {
    BWS_RUNNING,
    BWS_DRAINING,   /* connections closing, up to SHUTDOWN_GRACE_MS */
    BWS_DESTROYING, /* lws context half destroyed, its handles closing */
    BWS_CLOSED
};

struct gw_backend_ws {
    uv_loop_t *loop;
    struct gw_lws_uv lws; /* the context */
    struct ca_vhost *ca;  /* per-backend CA vhosts */
    unsigned n_ca;
    struct gw_list conns; /* every connection not yet freed */
    struct gw_dns *dns;   /* backend host names, off the loop */
    uv_timer_t timer;     /* the keepalive tick, then the shutdown steps */
    enum bws_phase phase;
    gw_backend_ws_close_cb close_cb;
    void *close_arg;
    struct gw_backend_ws_stats stats;
    unsigned in_lws; /* depth of lws callbacks running now */
    /* Between gw_backend_ws_hold and _release: connections whose writes
     * wait in their queue, in the order of their first one. */
    bool holding;
    struct gw_list held;
    /* Audio frames built in place in the caller's buffers while holding
     * (gw_backend_conn_send_audio_held), written first at release. */
    struct burst_frame {
        struct gw_backend_conn *conn;
        uint8_t *frame; /* the audio frame, GW_WS_FRAME_HEAD_MAX after room */
        size_t len;
    } burst[GW_BACKEND_BURST_MAX];
    unsigned n_burst;
    /* lws's own ping checks stay off (all zero: see backend_alive.c);
     * lws keeps the pointer. */
    lws_retry_bo_t retry;
    unsigned ping_ms;     /* 0: no keepalive */
    struct gw_list quiet; /* open connections by keepalive deadline */
    /* Drop counters per backend name, kept until the end. */
    struct backend_drops *drops;
};

/* The one protocol every connection speaks (backend_ws.c). */
extern const struct lws_protocols gw__backend_protocols[];

/* Records why the connection ends; the first cause wins (backend_ws.c). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void gw__backend_set_reason(struct gw_backend_conn *conn, const char *fmt, ...);

/*
 * Ends the connection for its owner: on_close follows from the loop
 * (backend_ws.c). kill: lws still holds a live wsi to tear down.
 */
void gw__backend_finish(struct gw_backend_conn *conn, const char *reason,
                        bool kill);

/* The connection's timer: connect timeout, close linger (backend_ws.c). */
void gw__backend_on_timer(uv_timer_t *timer);

/* Starts lws's closing handshake with code (backend_ws.c). */
void gw__backend_close_with(struct gw_backend_conn *conn, struct lws *wsi,
                            enum lws_close_status code);

/* The upgrade request's headers (backend_open.c). */
int gw__backend_append_headers(struct gw_backend_conn *conn, struct lws *wsi,
                               void *in, size_t len);

/* The connect failed before the upgrade (backend_open.c). */
void gw__backend_on_connect_error(struct gw_backend_conn *conn, struct lws *wsi,
                                  const char *in);

/* A piece of an incoming message (backend_io.c). */
int gw__backend_on_receive(struct gw_backend_conn *conn, struct lws *wsi,
                           const uint8_t *in, size_t len);

/* The socket can take the next queued message (backend_io.c). */
int gw__backend_on_writeable(struct gw_backend_conn *conn, struct lws *wsi);

/* Frees the queues and buffers of a finished connection (backend_io.c). */
void gw__backend_io_release(struct gw_backend_conn *conn);
/* Drops the connection's frames from the burst (it is being freed). */
void gw__backend_burst_forget(struct gw_backend_conn *conn);

/* The drop counters of the backend called name, made on first use; NULL
 * when out of memory (backend_io.c). */
struct backend_drops *gw__backend_drops_get(struct gw_backend_ws *bws,
                                            const char *name);

/* Frees every backend's drop counters (backend_io.c). */
void gw__backend_drops_free(struct gw_backend_ws *bws);

/* The keepalive (backend_alive.c). start: the connection is open; pong:
 * its backend answered; stop: it is ending.
 * write_ping, from its writable callback: 0 nothing owed, 1 sent, -1 the
 * write failed. */
void gw__backend_alive_start(struct gw_backend_conn *conn);
void gw__backend_alive_pong(struct gw_backend_conn *conn);
void gw__backend_alive_stop(struct gw_backend_conn *conn);
int gw__backend_alive_write_ping(struct gw_backend_conn *conn, struct lws *wsi);

#endif /* GW_BACKEND_WS_INT_H */
