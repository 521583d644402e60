/*
 * One record per device (docs/architecture.md section 4), keyed by client
 * id: its presence as the broker reports it, its live session if any, its
 * MCP link, its tool cache and its tool discovery. Presence, session
 * lookup and MCP state are all read from here; no other table is kept in
 * step with it.
 *
 * A device is online while the broker says so or while it has a session
 * (brokers without presence tell of a device only through its hello).
 * When it goes offline its record leaves the table at once (KNOWN ->
 * GONE), its MCP requests end, and its memory is reaped on the next turn
 * of the loop, after every callback that might still hold it returned.
 */
#ifndef GW_DEVICE_TABLE_H
#define GW_DEVICE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "codec/client_id.h"
#include "codec/envelope.h"
#include "codec/mcp_tools.h"
#include "codec/presence.h"
#include "common/error.h"
#include "common/hash.h"
#include "common/list.h"
#include "gateway/core/config_hold.h"
#include "gateway/device/mcp_catalog.h"
#include "gateway/device/mcp_discovery.h"
#include "gateway/device/mcp_link.h"
#include "gateway/device/mcp_peers.h"
#include "gateway/device/publish.h"
#include "gateway/device/tool_cache.h"

/* Records kept at most: a bound on what a broker (or a forger with the
 * gateway's account) can make the gateway hold. */
#define GW_DEVICE_TABLE_MAX (1u << 20)

/* Which list a record is on. */
#define GW_DEVICE_STATE_MAP(XX)                                                \
    XX(KNOWN, "known") /* in the table: online */                              \
    XX(GONE, "gone")   /* out of it, on the reap list until the loop turns */

enum gw_device_state {
#define XX(name, _) GW_DEVICE_##name,
    GW_DEVICE_STATE_MAP(XX)
#undef XX
        GW_DEVICE_STATE_COUNT_
};

/* What a presence message changed, for the caller's logs and actions. */
#define GW_PRESENCE_CHANGE_MAP(XX)                                             \
    XX(SAME, "same")         /* a repeat, stale news, or offline for none */   \
    XX(ARRIVED, "arrived")   /* the broker had not said online before */       \
    XX(RETURNED, "returned") /* online again on a newer connection */          \
    XX(LEFT, "left")         /* the broker says it is gone */

enum gw_presence_change {
#define XX(name, _) GW_PRESENCE_##name,
    GW_PRESENCE_CHANGE_MAP(XX)
#undef XX
        GW_PRESENCE_CHANGE_COUNT_
};

struct gw_session;
struct gw_device_table;

struct gw_device_presence {
    bool online;                               /* the broker says so */
    char address[GW_PRESENCE_ADDRESS_MAX + 1]; /* "" when not known */
    uint64_t conn;                             /* the broker's, or 0 */
    uint64_t run;      /* the broker run conn belongs to, or 0 */
    uint64_t since_ms; /* loop time the record was made */
    /* The table's link epoch in which the broker last said online: the
     * device is confirmed while it is the table's (gw_device_confirmed). */
    uint32_t epoch;
    bool pending; /* a retained online of a run not yet known current */
    bool renew;   /* ... naming another connection than the one on record */
};

struct gw_device {
    UT_hash_handle hh;        /* in the table, by client_id (KNOWN) */
    UT_hash_handle label_hh;  /* in the table by label, unless "" (KNOWN) */
    struct gw_list reap_node; /* on the reap list (GONE) */
    enum gw_device_state state;
    struct gw_device_table *table;
    char client_id[GW_CLIENT_ID_MAX + 1];
    /* codec/mcp_tools.h device label; "" while another record holds the
     * same one (no name on /mcp then: neither is shadowed) */
    char label[GW_MCP_LABEL_LEN + 1];
    struct gw_device_presence presence;
    struct gw_session *session; /* the live conversation (not owned) */
    struct gw_mcp_link link;
    struct gw_tool_cache tools;
    struct gw_mcp_catalog catalog;     /* capabilities, resources, prompts */
    struct gw_mcp_interests interests; /* its peers' subscriptions... */
    struct gw_mcp_discovery discovery;
};

/* Told when a device comes online, goes offline or a list of it changes
 * (what: GW_DEVICE_CHANGED_* bits of mcp_catalog.h). */
typedef void (*gw_device_changed_cb)(void *arg, const struct gw_device *dev,
                                     unsigned what);

/*
 * A request the device sends to its client (sampling/createMessage,
 * elicitation/create, roots/list), or the device's notifications/cancelled
 * (which may withdraw one). Returns true when it was taken: a request is
 * then answered (to the device, through gw_mcp_link_respond) exactly
 * once, later or at once.
 */
typedef bool (*gw_device_request_cb)(void *arg, struct gw_device *dev,
                                     const struct gw_rpc *rpc);

/* A device the table takes offline by itself (its presence unconfirmed
 * past mqtt.presence_grace_ms) while a session holds it: the callee ends
 * the session, which lets go of the record. */
typedef void (*gw_device_left_cb)(void *arg, struct gw_device *dev);

/* A device the broker last said is offline, while it has no record. */
struct gw_device_offline;

struct gw_device_table {
    uv_loop_t *loop;
    const struct gw_config_live *config;
    struct gw_device *by_id;    /* uthash by client_id: KNOWN records */
    struct gw_device *by_label; /* uthash by label: those that have one */
    unsigned count;
    unsigned presence_count;           /* records the broker says are online */
    struct gw_device_offline *offline; /* uthash by client_id */
    unsigned n_offline;
    struct gw_list reap; /* GONE records */
    uv_idle_t reaper;
    struct gw_mcp_links links;
    struct gw_mcp_discoverer discoverer;
    gw_device_changed_cb on_changed;
    void *on_changed_arg;
    gw_device_request_cb on_request;
    void *on_request_arg;
    /* cluster.mode hash: whether this instance owns a device (runs its
     * MCP client); NULL: always. */
    bool (*owns)(void *arg, const char *client_id);
    void *owns_arg;
    struct gw_mcp_peers peers; /* who listens to the devices' MCP servers */
    /* Presence since the broker link came back (docs/protocol.md section
     * 2.3): bumped at each link change, so every record the broker had
     * said online is unconfirmed at once, without a pass. */
    uint32_t epoch;
    uint64_t broker_run; /* the broker's current run, 0: not known yet */
    uv_timer_t grace;    /* link-up + mqtt.presence_grace_ms */
    uint64_t expired;    /* records taken offline unconfirmed, in all */
    gw_device_left_cb on_left;
    void *on_left_arg;
    bool closing;
    void (*close_cb)(struct gw_device_table *t, void *arg);
    void *close_arg;
};

void gw_device_table_init(struct gw_device_table *t, uv_loop_t *loop,
                          const struct gw_config_live *config,
                          struct gw_publisher *pub);
/*
 * Shutdown: nothing new starts, every record goes (its MCP requests end
 * with GW_MCP_CANCELLED before this returns), and cb (may be NULL) runs
 * once the memory is released.
 */
void gw_device_table_close(struct gw_device_table *t,
                           void (*cb)(struct gw_device_table *t, void *arg),
                           void *arg);

/* The one listener (the MCP server); NULL to unregister. */
void gw_device_table_set_listener(struct gw_device_table *t,
                                  gw_device_changed_cb cb, void *arg);
/* Who takes device-initiated requests (the MCP server); NULL to
 * unregister: the device then gets -32006 for each at once. */
void gw_device_table_set_request_handler(struct gw_device_table *t,
                                         gw_device_request_cb cb, void *arg);

/* Who decides which devices this instance owns; NULL: all of them. */
void gw_device_table_set_owner(struct gw_device_table *t,
                               bool (*owns)(void *arg, const char *client_id),
                               void *arg);
/* A device's lists changed from outside discovery (its owner's catalog,
 * gateway/cluster/cluster_rpc.c): the listener hears it as from discovery. */
void gw_device_table_notify(struct gw_device_table *t,
                            const struct gw_device *d, unsigned what);

/* Owners moved: online devices now owned here get their discovery. */
void gw_device_table_owners_changed(struct gw_device_table *t);

const char *gw_device_state_name(enum gw_device_state state);
const char *gw_presence_change_name(enum gw_presence_change change);

/* An online device by client id, or NULL. */
struct gw_device *gw_device_find(const struct gw_device_table *t,
                                 const char *client_id);
/* An online device by its label (codec/mcp_tools.h), or NULL. */
struct gw_device *gw_device_find_label(const struct gw_device_table *t,
                                       const char *label);

/* The live session of a device, or NULL. */
struct gw_session *gw_device_session(const struct gw_device_table *t,
                                     const char *client_id);

/*
 * A parsed presence message for client_id (already checked to be a
 * device id), as the broker publishes it now (a new connection, or a
 * connection's end). Returns the change (>= 0), GW_ELIMIT when the table
 * is full or GW_ENOMEM. A device that arrives starts its discovery, one
 * on a new connection its discovery again (a new MCP session); one that
 * left goes offline unless a session still holds it (the caller ends that
 * session, which lets go of the record).
 */
int gw_device_on_presence(struct gw_device_table *t, const char *client_id,
                          const struct gw_presence *p);
/* The same, replayed from the broker's retained state at subscribe: an
 * online of another broker run than the current one confirms nothing. */
int gw_device_on_retained_presence(struct gw_device_table *t,
                                   const char *client_id,
                                   const struct gw_presence *p);
/* The broker's run message ($broker): the current run, so the retained
 * onlines waiting for it are confirmed or not. O(n) once per run. */
void gw_device_table_broker_run(struct gw_device_table *t, uint64_t run);

/*
 * The broker link went or came back: every device the broker had said
 * online is unconfirmed until the broker says so again; once the link is
 * up, the ones still unconfirmed after mqtt.presence_grace_ms go offline
 * (a session holding one is ended through the left handler). What was
 * known to be offline is learnt again from the replayed presence.
 */
void gw_device_table_link_state(struct gw_device_table *t, bool up);

/* Whether the broker said the device is online since its link came back
 * (or it is known from a session alone, with nothing to confirm). */
bool gw_device_confirmed(const struct gw_device *dev);

/* Who ends the session of a device the table takes offline; NULL: none
 * (the record then stays until its session ends). */
void gw_device_table_set_left_handler(struct gw_device_table *t,
                                      gw_device_left_cb cb, void *arg);

/*
 * Whether the broker's latest word on client_id is offline (and nothing
 * since brought it back): such a device cannot be speaking now, so a
 * hello of its is an old message, never a new session.
 */
bool gw_device_offline(const struct gw_device_table *t, const char *client_id);

/*
 * A session starts for client_id: the record is made if needed (the
 * device is online through its session) and points to s. GW_ELIMIT,
 * GW_ENOMEM, GW_EINVAL for a client id that is not a device's.
 */
int gw_device_attach_session(struct gw_device_table *t, const char *client_id,
                             struct gw_session *s, const char *session_id,
                             struct gw_device **out);
/*
 * The session ended: the record lets go of it and, unless keep_online
 * (a newer hello replaces it; shutdown) or the broker says the device is
 * online, the device goes offline.
 */
void gw_device_detach_session(struct gw_device *dev, struct gw_session *s,
                              bool keep_online);

/*
 * A device kept online for a session that did not follow (a newer hello
 * was refused after replacing the old session): with neither a session
 * nor the broker's word, it goes offline.
 */
void gw_device_settle(struct gw_device_table *t, const char *client_id);

/* Re-reads the device's tools (on demand). GW_ENOENT if not online. */
int gw_device_refresh(struct gw_device_table *t, const char *client_id);

/*
 * An mcp envelope from a device. Responses go to whoever waits for their
 * id (or are dropped and counted); tools/list_changed starts a refresh.
 * Returns true if consumed; false means a request or notification of the
 * device's own that its session should relay to the backend.
 */
bool gw_device_on_mcp(struct gw_device_table *t, const char *client_id,
                      const struct gw_envelope *env);

/* Devices online now. */
size_t gw_device_table_online(const struct gw_device_table *t);

/*
 * The online records, in no set order: GW_DEVICE_FOREACH(t, d) { ... }.
 * The body may not take d (or any record) out of the table.
 */
struct gw_device *gw_device_table_first(const struct gw_device_table *t);
struct gw_device *gw_device_table_next(const struct gw_device *dev);
#define GW_DEVICE_FOREACH(t, d)                                                \
    for ((d) = gw_device_table_first(t); (d) != NULL;                          \
         (d) = gw_device_table_next(d))

/* What every device's MCP link shares: requests by handle, their stats,
 * the way to the broker and to a device another instance owns. */
struct gw_mcp_links *gw_device_table_links(struct gw_device_table *t);
const struct gw_mcp_stats *
gw_device_table_mcp_stats(const struct gw_device_table *t);

/* The loop the table runs on. */
uv_loop_t *gw_device_table_loop(const struct gw_device_table *t);

/* ---- the devices' peers (mcp_peers.h) ---- */

/*
 * The peer leaves (its session ended): every record of it goes; a URI no
 * peer is subscribed to any more is unsubscribed on the device, and
 * levels are set again where the most verbose one changed. Must be
 * called before the peer's memory goes.
 */
void gw_mcp_peer_leave(struct gw_device_table *t, struct gw_mcp_peer *peer);

/*
 * resources/subscribe (or unsubscribe) of uri on dev for peer. The
 * device is asked only when the first peer subscribes to uri (the last
 * leaves); otherwise cb gets an empty result from the loop. Refusals
 * (the device lacks resources.subscribe, too many records) come through
 * cb like any other end.
 */
void gw_mcp_subscribe(struct gw_device_table *t, struct gw_device *dev,
                      struct gw_mcp_peer *peer, const char *uri, bool on,
                      enum gw_mcp_origin origin, gw_mcp_reply_cb cb, void *arg,
                      uint64_t *handle);

/*
 * logging/setLevel for peer: on one device (dev), or, for an all-devices
 * peer, dev NULL: every online device that offers logging (the answer
 * then comes at once, from the loop; devices that come later get it
 * when their discovery ends). The device is asked only when its most
 * verbose level changes.
 */
void gw_mcp_set_level(struct gw_device_table *t, struct gw_device *dev,
                      struct gw_mcp_peer *peer, enum gw_mcp_log_level level,
                      enum gw_mcp_origin origin, gw_mcp_reply_cb cb, void *arg,
                      uint64_t *handle);

/* A request of peer created task_id on dev (a CreateTaskResult came
 * back): the task's status notifications go to peer. */
void gw_mcp_task_created(struct gw_device *dev, struct gw_mcp_peer *peer,
                         const char *task_id);

/* Whether peer created task_id on dev: a task is its creator's alone (the
 * oldest records go when a device's table is full; their tasks then
 * answer as unknown). */
bool gw_mcp_task_owned(const struct gw_device *dev,
                       const struct gw_mcp_peer *peer, const char *task_id);

#endif /* GW_DEVICE_TABLE_H */
