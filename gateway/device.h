/*
 * Per-device records that outlive conversations (DESIGN.md section 4):
 * one for each device the broker says is online or that said hello, with
 * the device's MCP client (PROTOCOL.md section 7): discovery (initialize,
 * notifications/initialized, tools/list paged to the end), the tool cache,
 * and the one link that the backend, the gateway, the management API and
 * external MCP clients share, with ids rewritten and calls serialised.
 */
#ifndef GW_DEVICE_H
#define GW_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include "common/hash.h"

#include "codec/client_id.h"
#include "codec/envelope.h"
#include "common/error.h"

struct gw_instance;

/* Where the device's MCP client is. */
enum gw_mcp_state {
    GW_MCP_IDLE,         /* nothing asked yet, or waiting for a slot */
    GW_MCP_INITIALIZING, /* initialize sent */
    GW_MCP_LISTING,      /* tools/list pages in flight */
    GW_MCP_READY,        /* the cache holds every tool (up to the cap) */
    GW_MCP_FAILED        /* the last discovery failed; retried on hello */
};

/* Who asked: the counters and the log say it. */
enum gw_mcp_origin {
    GW_MCP_FROM_GATEWAY, /* discovery */
    GW_MCP_FROM_BACKEND, /* the session's backend */
    GW_MCP_FROM_API,     /* the management API (manager-api) */
    GW_MCP_FROM_CLIENT,  /* an MCP client of the gateway's MCP server */
    GW_MCP_ORIGIN_COUNT_
};

/* How a request ended. */
enum gw_mcp_outcome {
    GW_MCP_OK,        /* the device answered with a result */
    GW_MCP_ERROR,     /* the device answered with an error */
    GW_MCP_TIMEOUT,   /* -32001 */
    GW_MCP_OFFLINE,   /* -32002: the device went (or was) offline */
    GW_MCP_BUSY,      /* -32003: too many requests already wait */
    GW_MCP_CANCELLED, /* -32004: shutdown */
    GW_MCP_OUTCOME_COUNT_
};

/* Upper bounds (ms) of the latency histogram's buckets; +Inf follows. */
#define GW_MCP_LATENCY_BOUNDS                                                  \
    {                                                                          \
        5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000           \
    }
#define GW_MCP_LATENCY_BUCKETS 12

struct gw_mcp_stats {
    uint64_t requests[GW_MCP_ORIGIN_COUNT_][GW_MCP_OUTCOME_COUNT_];
    uint64_t latency_le[GW_MCP_LATENCY_BUCKETS + 1]; /* non-cumulative */
    uint64_t latency_sum_ms;
    uint64_t latency_count;
    uint64_t unsolicited;  /* device responses nobody waited for */
    uint64_t refused;      /* device MCP messages that do not parse */
    uint64_t discoveries;  /* completed tool discoveries */
    uint64_t list_changed; /* tools/list_changed notifications seen */
};

/* One request's end, given to its origin exactly once. */
struct gw_mcp_reply {
    enum gw_mcp_outcome outcome;
    const cJSON *result; /* GW_MCP_OK: the device's result */
    const cJSON *error;  /* otherwise: a valid {code,message} object */
};

typedef void (*gw_mcp_reply_cb)(void *arg, const struct gw_mcp_reply *reply);

struct gw_device {
    UT_hash_handle hh; /* in the table, by client_id */
    char client_id[GW_CLIENT_ID_MAX + 1];
    char label[24]; /* codec/mcp_tools.h device label */
    bool online;    /* presence says so, or a session is live */
    enum gw_mcp_state mcp;
    cJSON *tools;        /* array of the device's tools, all of them; or NULL */
    bool tools_complete; /* tools holds every page (or the cap) */
    uint64_t tools_serial;   /* changes whenever tools changes */
    char server_name[64];    /* serverInfo.name from initialize */
    char server_version[32]; /* serverInfo.version */
    /* the rest is the MCP link's own (device.c) */
    struct gw_devices *owner;
    uint32_t next_id;               /* next id toward the device */
    struct gw_mcp_pending *pending; /* by device-side id (uthash) */
    struct gw_mcp_pending *calls_head, *calls_tail; /* queued tools/call */
    struct gw_mcp_pending *call_in_flight;          /* at most one */
    size_t n_pending;
    cJSON *list_acc;     /* tools gathered by the discovery in progress */
    unsigned list_pages; /* pages of the discovery in progress */
    bool discover_queued;
    struct gw_device *discover_next; /* in the table's discovery queue */
    bool rediscover;                 /* list_changed during a discovery */
    bool discovering;                /* holds one of the table's slots */
    bool dying;                      /* being removed: no new requests */
};

/* Told whenever a device's tool list or online state changes. */
typedef void (*gw_devices_changed_cb)(void *arg, const struct gw_device *dev);

struct gw_devices {
    struct gw_instance *inst;
    struct gw_device *table; /* uthash by client_id */
    struct gw_device *discover_head, *discover_tail;
    unsigned discovering; /* discoveries in flight */
    struct gw_mcp_stats stats;
    struct gw_mcp_pending *by_handle; /* every request, by handle */
    uint64_t next_handle;
    gw_devices_changed_cb on_changed;
    void *on_changed_arg;
};

void gw_devices_init(struct gw_devices *devs, struct gw_instance *inst);
/* Fails every pending request (GW_MCP_CANCELLED) and frees every record. */
void gw_devices_destroy(struct gw_devices *devs);

/* Registers the one listener (the MCP server); NULL to unregister. */
void gw_devices_set_listener(struct gw_devices *devs, gw_devices_changed_cb cb,
                             void *arg);

/* A device by client id, or NULL. */
struct gw_device *gw_devices_find(const struct gw_devices *devs,
                                  const char *client_id);
/* A device by its label (codec/mcp_tools.h), or NULL. O(n). */
struct gw_device *gw_devices_find_label(const struct gw_devices *devs,
                                        const char *label);
/* Number of online devices. */
size_t gw_devices_online_count(const struct gw_devices *devs);
const char *gw_mcp_state_name(enum gw_mcp_state state);
const char *gw_mcp_origin_name(enum gw_mcp_origin origin);
const char *gw_mcp_outcome_name(enum gw_mcp_outcome outcome);

/* Iterate: for (d = devs->table; d != NULL; d = d->hh.next). */

/* ---- events from the instance ---- */

/* Presence says online (or a hello came): record + discovery if needed. */
void gw_devices_online(struct gw_devices *devs, const char *client_id);
/*
 * Presence says offline (or the last session ended with no presence
 * known): every pending request ends with GW_MCP_OFFLINE, the record goes.
 */
void gw_devices_offline(struct gw_devices *devs, const char *client_id);

/*
 * An mcp envelope from a device. Responses go to whoever waits for their
 * id (or are dropped and counted); tools/list_changed starts a refresh.
 * Returns true if consumed; false means a request or notification of the
 * device's own that the session should relay to its backend.
 */
bool gw_devices_on_device_mcp(struct gw_devices *devs, const char *client_id,
                              const struct gw_envelope *env);

/* ---- requests toward a device ---- */

/*
 * Sends method/params (params moved; NULL for none) to the device with a
 * fresh numeric id. cb runs exactly once, never from inside this call:
 * with the device's result or normalised error, or -32001 after
 * timeout_ms (0 = mcp.call_timeout_ms; then notifications/cancelled goes
 * to the device), -32002 if the device is or goes offline, -32003 if too
 * many requests wait, -32004 on shutdown. tools/call requests reach the
 * device one at a time, in order. *handle (may be NULL) names the request
 * for gw_devices_abandon.
 */
void gw_devices_request(struct gw_devices *devs, const char *client_id,
                        const char *method, cJSON *params, uint32_t timeout_ms,
                        enum gw_mcp_origin origin, gw_mcp_reply_cb cb,
                        void *arg, uint64_t *handle);

/* The origin is gone: cb will not run; the device's answer is dropped. */
void gw_devices_abandon(struct gw_devices *devs, uint64_t handle);

/* Re-reads the device's tools (on demand). GW_ENOENT if unknown. */
int gw_devices_refresh(struct gw_devices *devs, const char *client_id);

#endif /* GW_DEVICE_H */
