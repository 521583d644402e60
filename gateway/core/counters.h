/*
 * The instance's own counters (/metrics, the stats log line): sessions,
 * relayed messages and audio, presence, and refused device messages by
 * reason. A plain struct that the modules counting into it share.
 */
#ifndef GW_COUNTERS_H
#define GW_COUNTERS_H

#include <stdint.h>

#include "gateway/core/latency.h"
#include "gateway/core/session_end.h"

/* Why a device message was refused; each has a counter. */
#define GW_REFUSAL_MAP(XX)                                                     \
    XX(TOPIC, "topic")         /* topic does not carry a usable client id */   \
    XX(TOO_BIG, "too_big")     /* over limits.max_message_bytes */             \
    XX(MALFORMED, "malformed") /* not UTF-8 / not a JSON object */             \
    XX(PROTO, "protocol")      /* no type, wrong member types */               \
    XX(HELLO, "bad_hello")     /* a hello that fails validation */             \
    XX(NO_ROUTE, "no_route")   /* no route matches the device */               \
    XX(LIMIT, "max_sessions")  /* limits.max_sessions reached */               \
    XX(BACKEND, "backend_message") /* bad message from a backend */            \
    XX(PRESENCE, "presence")     /* a presence message that does not parse */  \
    XX(RETAINED, "retained")     /* a retained message on an up topic */       \
    XX(OFFLINE, "offline")       /* a hello of a device said offline */        \
    XX(HELLO_RATE, "hello_rate") /* hellos faster than limits.hello_* */       \
    XX(DRAINING, "draining")     /* a hello while the instance drains */

enum gw_refusal {
#define XX(name, _) GW_REFUSE_##name,
    GW_REFUSAL_MAP(XX)
#undef XX
        GW_REFUSE_COUNT_
};

const char *gw_refusal_name(enum gw_refusal why);

struct gw_counters {
    uint64_t sessions_started;
    uint64_t sessions_ended[GW_END_COUNT_];
    uint64_t refused[GW_REFUSE_COUNT_];
    uint64_t device_messages;  /* relayed device -> backend */
    uint64_t backend_messages; /* relayed backend -> device */
    uint64_t uplink_audio;     /* packets device -> backend */
    uint64_t downlink_audio;   /* packets backend -> device (queued) */
    uint64_t no_session_goodbyes;
    uint64_t presence_online;  /* devices that came online */
    uint64_t presence_offline; /* devices that went offline */
    /* The gateway's share of a turn (session.c): a device's listen stop
     * to the backend, a backend's tts start to the device. */
    struct gw_latency turn_listen_stop;
    struct gw_latency turn_tts_start;
};

#endif /* GW_COUNTERS_H */
