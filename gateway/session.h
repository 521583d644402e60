/*
 * One device's conversation (DESIGN.md section 4): created by a device
 * hello, bridged to one backend WebSocket and one UDP peer, ended by
 * either side, a timeout, a newer hello or shutdown. The state changes
 * only through one function, which logs every change.
 */
#ifndef GW_SESSION_H
#define GW_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hash.h"
#include <uv.h>

#include "codec/client_id.h"
#include "codec/envelope.h"
#include "codec/hello.h"
#include "gateway/backend_ws.h"
#include "gateway/udp_audio.h"

struct gw_instance;
struct gw_config_hold;

enum gw_session_state {
    GW_SESSION_CONNECTING_BACKEND, /* WebSocket opening, awaiting its hello */
    GW_SESSION_ACTIVE,             /* server hello sent; relaying */
    GW_SESSION_CLOSING             /* ended; waiting for handles to close */
};

/* Why a session ended; each has a counter and a log word. */
enum gw_session_end {
    GW_END_DEVICE_GOODBYE,      /* the device said goodbye (or udp_timeout) */
    GW_END_BACKEND_CLOSED,      /* the backend closed its WebSocket */
    GW_END_BACKEND_GOODBYE,     /* the backend sent a goodbye */
    GW_END_BACKEND_UNAVAILABLE, /* no backend of the route connected */
    GW_END_BACKEND_HELLO_TIMEOUT,
    GW_END_UDP_IDLE,       /* no uplink audio for udp_idle_timeout_ms */
    GW_END_DEVICE_OFFLINE, /* the broker says the device disconnected */
    GW_END_REPLACED,       /* a newer hello from the same device */
    GW_END_SHUTDOWN,       /* the gateway is stopping */
    GW_END_ERROR,          /* a local failure (memory, crypto) */
    GW_END_COUNT_
};

const char *gw_session_end_name(enum gw_session_end why);
const char *gw_session_state_name(enum gw_session_state state);

struct gw_session {
    UT_hash_handle hh;           /* in the instance's table, by client_id */
    struct gw_instance *inst;    /* owner */
    struct gw_config_hold *hold; /* the config this session started with */
    enum gw_session_state state; /* changed only by set_state() */
    char client_id[GW_CLIENT_ID_MAX + 1];
    struct gw_client_id id;                 /* parts of client_id */
    char session_id[GW_SESSION_ID_MAX + 1]; /* from the backend, or "" */
    char subject[GW_CLIENT_ID_MAX + GW_SESSION_ID_MAX + 16]; /* log prefix */
    struct gw_device_hello hello; /* kept until the backend answers */
    int route;                    /* index into cfg->routes */
    size_t next_backend;          /* next entry of the route to try */
    const char *backend_name;     /* the backend being tried or used */
    struct gw_backend_conn *ws;   /* NULL once closed */
    struct gw_udp_peer udp;       /* started when ACTIVE */
    uv_timer_t timer;             /* hello timeout, then idle checks */
    uint64_t started_ms;          /* loop time of the device hello */
    uint64_t serial;              /* unique per instance: late answers of
                                     an ended session find no match */
    bool timer_closed;            /* timer's close callback ran */
    bool linked;                  /* in the instance's table */
};

/*
 * Starts a session for a validated device hello (hello is moved into the
 * session). A session of the same client id is replaced. Refused when
 * the instance is at limits.max_sessions or no route matches: the device
 * then gets a goodbye. Returns 0 or a negative error (already logged).
 */
int gw_session_start(struct gw_instance *inst, const char *client_id,
                     const struct gw_client_id *id,
                     struct gw_device_hello *hello);

/* A parsed device message (not a hello) for this session. */
void gw_session_on_device_message(struct gw_session *s,
                                  const struct gw_envelope *env,
                                  const char *raw, size_t len);

/* A valid uplink audio packet from the session's UDP peer. */
void gw_session_on_uplink(struct gw_session *s, uint32_t timestamp,
                          const uint8_t *opus, size_t len);

/*
 * Ends the session: tells the device (unless it said goodbye, or a newer
 * hello replaced it), closes the WebSocket, stops the UDP peer. Memory is
 * freed later, once every handle has closed. Idempotent.
 */
void gw_session_end(struct gw_session *s, enum gw_session_end why);

#endif /* GW_SESSION_H */
