/*
 * One gateway instance: one libuv loop, the broker link, the UDP audio
 * socket, the backend WebSocket context and the table of sessions, wired
 * together. Everything runs on the loop's thread.
 */
#ifndef GW_INSTANCE_H
#define GW_INSTANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "config/config.h"
#include "gateway/backend_ws.h"
#include "gateway/device.h"
#include "common/mqtt_link.h"
#include "gateway/presence.h"
#include "gateway/session.h"
#include "gateway/udp_audio.h"

/* Why a device message was refused; each has a counter. */
enum gw_refusal {
    GW_REFUSE_TOPIC,     /* topic does not carry a usable client id */
    GW_REFUSE_TOO_BIG,   /* over limits.max_message_bytes */
    GW_REFUSE_MALFORMED, /* not UTF-8 / not a JSON object */
    GW_REFUSE_PROTO,     /* no type, wrong member types */
    GW_REFUSE_HELLO,     /* a hello that fails validation */
    GW_REFUSE_NO_ROUTE,  /* no route matches the device */
    GW_REFUSE_LIMIT,     /* limits.max_sessions reached */
    GW_REFUSE_BACKEND,   /* bad message from a backend */
    GW_REFUSE_PRESENCE,  /* a presence message that does not parse */
    GW_REFUSE_COUNT_
};

const char *gw_refusal_name(enum gw_refusal why);

struct gw_http_api;
struct gw_mcp_server;

struct gw_instance_stats {
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
};

/*
 * A config and the sessions that still use it: a reload must not free
 * backend and route entries that a live session points into.
 */
struct gw_config_hold {
    struct gw_config *cfg; /* owned */
    size_t refs;           /* the instance (while current) + sessions */
};

struct gw_instance {
    uv_loop_t *loop;
    struct gw_config_hold *hold; /* the running config */
    struct gw_mqtt_link *mqtt;
    struct gw_udp_audio *udp;
    struct gw_backend_ws *bws;
    struct gw_session *sessions;       /* uthash by client id: live ones only */
    struct gw_presence_table presence; /* devices the broker says are on */
    struct gw_devices devices;         /* records and MCP links, by id */
    struct gw_http_api *api;           /* NULL when http.port is 0 */
    struct gw_mcp_server *mcp_server;  /* behind api */
    uint64_t next_session_serial;      /* tells sessions of one device apart */
    uint64_t started_ms;               /* loop time at init, for uptime */
    size_t n_alive;         /* allocated sessions, closing included */
    uv_timer_t drain_timer; /* bounds the shutdown drain */
    bool stopping;
    int parts_open; /* subsystems still closing */
    void (*stop_cb)(struct gw_instance *inst, void *arg);
    void *stop_arg;
    struct gw_instance_stats stats;
};

/*
 * Binds UDP, starts the broker link and the WebSocket context. Takes
 * ownership of cfg (also on failure).
 */
GW_MUST_CHECK int gw_instance_init(uv_loop_t *loop, struct gw_config *cfg,
                                   struct gw_instance **out);

/* The running config (valid until the next gw_instance_set_config). */
const struct gw_config *gw_instance_config(const struct gw_instance *inst);

/*
 * A reloaded config (ownership moves here): routes, backends and limits
 * apply to the next hello; live sessions keep the config they started
 * with, which is freed when the last of them ends.
 */
void gw_instance_set_config(struct gw_instance *inst, struct gw_config *cfg);

/* For sessions: drops a reference to a config, freeing it when unused. */
void gw_instance_release_config(struct gw_instance *inst,
                                struct gw_config_hold *hold);

/* For sessions: one session's memory was freed. */
void gw_instance_session_freed(struct gw_instance *inst);

/*
 * Drains: every session ends with a goodbye to its device, then the
 * subsystems close; cb runs last and the instance is freed after it.
 */
void gw_instance_stop(struct gw_instance *inst,
                      void (*cb)(struct gw_instance *inst, void *arg),
                      void *arg);

/* Publishes one JSON message to a device's down topic. */
int gw_instance_publish_device(struct gw_instance *inst, const char *client_id,
                               const char *json, size_t len);

/* Sends {"type":"goodbye","session_id":sid} to a device. */
void gw_instance_goodbye(struct gw_instance *inst, const char *client_id,
                         const char *session_id);

/* One log line with every counter (SIGUSR1, and at exit). */
void gw_instance_log_stats(const struct gw_instance *inst);

#endif /* GW_INSTANCE_H */
