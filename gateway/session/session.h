/*
 * One device's conversation (docs/architecture.md section 4): created by a
 * device hello, bridged to one backend WebSocket and one UDP peer, ended
 * by either side, a timeout, a newer hello or shutdown. The state says
 * which list of the session table a session is on and changes only
 * through one function, which moves it and logs the change.
 */
#ifndef GW_SESSION_H
#define GW_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "codec/client_id.h"
#include "codec/envelope.h"
#include "codec/hello.h"
#include "common/cacheline.h"
#include "common/list.h"
#include "common/ratelimit.h"
#include "gateway/audio/pcm_bridge.h"
#include "gateway/audio/udp_audio.h"
#include "gateway/backend/backend_pool.h"
#include "gateway/backend/backend_ws.h"
#include "gateway/core/config_hold.h"
#include "gateway/core/counters.h"
#include "gateway/core/session_end.h"
#include "gateway/device/device_table.h"
#include "gateway/device/mcp_relay.h"
#include "gateway/device/publish.h"

/* What sessions need of the instance, given once at init. */
struct gw_session_env {
    uv_loop_t *loop;
    struct gw_config_live *config;
    struct gw_publisher *pub;
    struct gw_udp_audio *udp;
    struct gw_backend_ws *bws;
    struct gw_backend_pool *pool; /* backend health and choice */
    struct gw_device_table *devices;
    struct gw_counters *counters;
};

struct gw_session;

/*
 * What a session tells the device call it is in. The call module above
 * (device_call.h) registers these at its init; a session knows its call
 * only as an opaque pointer.
 */
struct gw_session_call_ops {
    /* A valid uplink packet of s, which is in a call: never to a backend. */
    void (*on_uplink)(void *arg, struct gw_session *s, const uint8_t *opus,
                      size_t len);
    /* s ends (already CLOSING) while in a call: the call ends, and in a
     * bridged call the other side's session ends too. */
    void (*leave)(void *arg, struct gw_session *s);
    void *arg;
};

/* The session table: every session, on the list its state names. */
struct gw_sessions {
    struct gw_session_env env;
    struct gw_list live;    /* CONNECTING_BACKEND and ACTIVE */
    struct gw_list closing; /* CLOSING: handles still closing */
    size_t n_live, n_closing;
    uint64_t next_serial;
    struct gw_bucket log_all; /* refusal lines of all sessions together */
    struct gw_session_call_ops call_ops; /* zero when no call module */
    bool draining; /* a drain (drain.h) is under way: no new session */
    /* Told when the last session's memory is released. */
    void (*on_empty)(struct gw_sessions *t, void *arg);
    void *on_empty_arg;
};

struct gw_session {
    struct gw_list node;         /* in the table's list for its state */
    struct gw_device *dev;       /* its device's record, while live */
    struct gw_config_hold *hold; /* the config this session started with */
    char client_id[GW_CLIENT_ID_MAX + 1];
    struct gw_client_id id;                 /* parts of client_id */
    char session_id[GW_SESSION_ID_MAX + 1]; /* from the backend, or "" */
    char subject[GW_CLIENT_ID_MAX + GW_SESSION_ID_MAX + 16]; /* log prefix */
    struct gw_device_hello hello; /* kept until the backend answers */
    int route;                    /* index into cfg->routes */
    struct gw_pool_tried tried;   /* the route's backends tried so far */
    unsigned abandoned;           /* given-up attempts still closing */
    bool hello_timed_out;         /* an attempt missed its hello deadline */
    const char *backend_name;     /* the backend being tried or used */
    struct gw_mcp_relay relay;    /* the backend's MCP requests */
    uv_timer_t timer;             /* attempt's hello deadline, then idle */
    uint64_t started_ms;          /* loop time of the device hello */
    uint64_t serial;              /* unique per instance */
    bool timer_closed;            /* timer's close callback ran */
    bool tts_start_waits;         /* its tts start is in the outbox */
    uint64_t tts_start_held_ms;   /* loop time it was held */
    uint64_t tts_start_rx_ns;     /* uv_hrtime() its tts start was read */
    bool await_audio;             /* its reply's first audio is to come */
    struct gw_bucket log_bucket;  /* its backend's refused messages */
    /*
     * What every uplink packet reads (gw_session_on_uplink), side by side
     * and just before the peer whose first fields the UDP reader reads:
     * a thousand sessions taking turns find few of them in the cache, so
     * each line they share is a miss fewer (bench/NOTES.md). From a line's
     * start (gw_calloc_lines): 64 bytes, then the peer's.
     */
    _Alignas(GW_CACHE_LINE) struct gw_sessions *table; /* owner */
    void *call;                   /* its device call (opaque), or NULL */
    struct gw_pcm_bridge *pcm;    /* pcm16 backends only, else NULL */
    struct gw_backend_conn *ws;   /* NULL once closed */
    struct gw_pool_ticket ticket; /* its hold on the backend tried or used */
    enum gw_session_state state;  /* changed only by set_state() */
    struct gw_udp_peer udp;       /* started when ACTIVE */
};

void gw_sessions_init(struct gw_sessions *t, const struct gw_session_env *env);

/* Sessions that are not CLOSING. */
size_t gw_sessions_live(const struct gw_sessions *t);
/* Sessions whose memory is not yet released (CLOSING included). */
size_t gw_sessions_alive(const struct gw_sessions *t);

/* The live session of a device, or NULL. */
struct gw_session *gw_sessions_find(const struct gw_sessions *t,
                                    const char *client_id);

/* Ends every live session with why (each device gets its goodbye). */
void gw_sessions_end_all(struct gw_sessions *t, enum gw_session_end why);

/*
 * Starts a session for a validated device hello (hello is moved into the
 * session). A session of the same client id is replaced. Refused when
 * the table is at limits.max_sessions, no route matches or the instance
 * drains: the device then gets a goodbye (during a drain, a session of
 * the same client id ends first: the device has left it). Returns 0 or a
 * negative error (already logged).
 */
int gw_session_start(struct gw_sessions *t, const char *client_id,
                     const struct gw_client_id *id,
                     struct gw_device_hello *hello);

/* A parsed device message (not a hello) for this session, read off the
 * broker at rx_ns (uv_hrtime()), from which a listen stop is timed. */
void gw_session_on_device_message(struct gw_session *s,
                                  const struct gw_envelope *env,
                                  const char *raw, size_t len, uint64_t rx_ns);

/*
 * Prefetches what gw_session_on_uplink will touch, step by step (the UDP
 * reader's on_warm): 0 the session's own fields, 1 its backend
 * connection, 2 what that connection's write reads.
 */
void gw_session_warm(const struct gw_session *s, unsigned step);

/* A valid uplink audio packet from the session's UDP peer; opus and the
 * GW_UDP_HEADROOM bytes before it are the session's to overwrite (see
 * gw_udp_audio_cb). */
void gw_session_on_uplink(struct gw_session *s, uint32_t timestamp,
                          uint8_t *opus, size_t len);

/*
 * Ends the session: tells the device (unless it said goodbye, or a newer
 * hello replaced it), closes the WebSocket, stops the UDP peer, lets go
 * of the device record. Memory is released later, once every handle has
 * closed. Idempotent.
 */
void gw_session_end(struct gw_session *s, enum gw_session_end why);

#endif /* GW_SESSION_H */
