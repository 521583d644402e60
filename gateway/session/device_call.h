/*
 * Calls between two devices (docs/architecture.md section 4, the API in
 * docs/protocol.md section 8.4): the manager-api asks for a call, the
 * callee is woken with an MCP tool call, and once it accepts, each side's
 * uplink audio goes to the other's UDP peer instead of a backend.
 */
#ifndef GW_DEVICE_CALL_H
#define GW_DEVICE_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "codec/call_request.h"
#include "common/list.h"
#include "common/ratelimit.h"
#include "gateway/binding/binding.h"
#include "gateway/core/config_hold.h"
#include "gateway/device/device_table.h"
#include "gateway/device/publish.h"
#include "gateway/session/session.h"

/* A call's states; only set_state in device_call.c changes them. */
#define GW_DEVICE_CALL_STATE_MAP(XX)                                           \
    XX(RINGING, "ringing") /* caller waits (silence), callee was woken */      \
    XX(BRIDGED, "bridged") /* audio relayed both ways */                       \
    XX(ENDED, "ended")     /* over; freed when its timer has closed */

enum gw_device_call_state {
#define XX(name, _) GW_DEVICE_CALL_##name,
    GW_DEVICE_CALL_STATE_MAP(XX)
#undef XX
        GW_DEVICE_CALL_STATE_COUNT_
};

/* Why a call ended; each has a counter (hybridgw_calls_ended_total). */
#define GW_DEVICE_CALL_END_MAP(XX)                                             \
    XX(EXPIRED, "expired")         /* not accepted in time */                  \
    XX(CALLER_LEFT, "caller_left") /* caller's session ended while ringing */  \
    XX(HANGUP, "hangup")           /* a side's session ended while bridged */

enum gw_device_call_end {
#define XX(name, _) GW_DEVICE_CALL_END_##name,
    GW_DEVICE_CALL_END_MAP(XX)
#undef XX
        GW_DEVICE_CALL_END_COUNT_
};

/* What the two routes answered, as the Node gateway's "status" (plus
 * bad_request for a 400); each has a counter. */
#define GW_DEVICE_CALL_ANSWER_MAP(XX)                                          \
    XX(PENDING, "pending")         /* request: the callee is being woken */    \
    XX(BRIDGED, "bridged")         /* request (mutual) or accept */            \
    XX(OFFLINE, "offline")         /* request: the target is not online */     \
    XX(ERROR, "error")             /* request or accept refused */             \
    XX(NO_PENDING, "no_pending")   /* accept: no call rings for the mac */     \
    XX(AMBIGUOUS, "ambiguous")     /* 409: a MAC names several devices */      \
    XX(BAD_REQUEST, "bad_request") /* 400: missing or malformed fields */

enum gw_device_call_answer {
#define XX(name, _) GW_DEVICE_CALL_ANSWER_##name,
    GW_DEVICE_CALL_ANSWER_MAP(XX)
#undef XX
        GW_DEVICE_CALL_ANSWER_COUNT_
};

/* The routes (the manager-api's daily token guards both). */
#define GW_DEVICE_CALL_REQUEST_PATH "/api/call/request"
#define GW_DEVICE_CALL_ACCEPT_PATH  "/api/call/accept"

struct gw_device_call_stats {
    uint64_t
        answers[2][GW_DEVICE_CALL_ANSWER_COUNT_]; /* [0] request, [1] accept */
    uint64_t started;                             /* calls that rang */
    uint64_t bridged;                             /* calls accepted */
    uint64_t ended[GW_DEVICE_CALL_END_COUNT_];
    uint64_t relayed_frames; /* uplink packets handed to the other side */
    uint64_t relayed_bytes;
    uint64_t relay_refused;  /* the other side's UDP peer refused one */
    uint64_t silence_frames; /* keepalive frames sent to waiting callers */
    uint64_t wakeups_failed; /* remote_wakeup answered with an error */
};

struct gw_device_call;

/* What calls need, given once at init. */
struct gw_device_calls_env {
    uv_loop_t *loop;
    struct gw_config_live *config;
    struct gw_publisher *pub;
    struct gw_device_table *devices;
    struct gw_sessions *sessions;      /* whose sessions take part; they tell
                                          the calls their audio and their end */
    struct gw_binding_store *bindings; /* NULL: client ids are identities */
};

/* Every call (one per instance, beside its session table). */
struct gw_device_calls {
    struct gw_device_calls_env env;
    struct gw_list calls; /* RINGING and BRIDGED calls */
    size_t n_ringing, n_bridged;
    uint64_t next_serial;
    struct gw_device_call_stats stats;
    struct gw_bucket ambiguous_log; /* log lines of ambiguous MACs */
    /* One 60 ms frame of Opus silence, encoded once (16 kHz mono). */
    uint8_t silence[128];
    size_t silence_len;
};

const char *gw_device_call_state_name(enum gw_device_call_state state);
const char *gw_device_call_end_name(enum gw_device_call_end why);
const char *gw_device_call_answer_name(enum gw_device_call_answer answer);

/* Right after env->sessions' init: the table tells c from now on. */
void gw_device_calls_init(struct gw_device_calls *c,
                          const struct gw_device_calls_env *env);

/*
 * POST /api/call/request or /api/call/accept (path picks which; the
 * daily token was checked): parses body, acts, and returns the HTTP
 * status with the answer in *out (NULL when out of memory). peer names
 * the client in log lines.
 */
int gw_device_calls_api(struct gw_device_calls *c, const char *path,
                        const char *body, size_t len, const char *peer,
                        cJSON **out);

#endif /* GW_DEVICE_CALL_H */
