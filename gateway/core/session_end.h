/*
 * Why a session ended and which state it is in: shared by the session
 * module, the counters and the HTTP API, each from one X-macro list.
 */
#ifndef GW_SESSION_END_H
#define GW_SESSION_END_H

/* The session states; each names the list the session is on. */
#define GW_SESSION_STATE_MAP(XX)                                               \
    XX(CONNECTING_BACKEND, "CONNECTING_BACKEND") /* live: awaiting hello */    \
    XX(ACTIVE, "ACTIVE")                         /* live: relaying */          \
    XX(CLOSING, "CLOSING") /* closing: waiting for its handles */

enum gw_session_state {
#define XX(name, _) GW_SESSION_##name,
    GW_SESSION_STATE_MAP(XX)
#undef XX
        GW_SESSION_STATE_COUNT_
};

/* Why a session ended; each has a counter and a log word. */
#define GW_SESSION_END_MAP(XX)                                                 \
    XX(DEVICE_GOODBYE, "device goodbye") /* or udp_timeout */                  \
    XX(BACKEND_CLOSED, "backend closed")                                       \
    XX(BACKEND_GOODBYE, "backend goodbye")                                     \
    XX(BACKEND_UNAVAILABLE, "backend unavailable") /* none connected */        \
    XX(BACKEND_HELLO_TIMEOUT, "backend hello timeout")                         \
    XX(UDP_IDLE, "udp idle timeout")                                           \
    XX(DEVICE_OFFLINE, "device offline") /* the broker says it left */         \
    XX(REPLACED, "replaced by a new hello")                                    \
    XX(SHUTDOWN, "shutdown")                                                   \
    XX(DRAIN_DEADLINE, "drain deadline") /* still live when a drain ended */   \
    XX(CALL_ENDED, "call ended") /* other side hung up, or no answer */        \
    XX(ERROR, "local error")     /* memory, crypto */

enum gw_session_end {
#define XX(name, _) GW_END_##name,
    GW_SESSION_END_MAP(XX)
#undef XX
        GW_END_COUNT_
};

const char *gw_session_end_name(enum gw_session_end why);
const char *gw_session_state_name(enum gw_session_state state);

#endif /* GW_SESSION_END_H */
