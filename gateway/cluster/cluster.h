/*
 * Several instances on one broker (docs/architecture.md section 9,
 * docs/protocol.md section 10). Each instance publishes a
 * retained record of itself on <cluster.topic_prefix>/<name>, with a last
 * will that marks it gone, and keeps the table of the live instances it
 * hears there. A device belongs to exactly one of them: the running
 * instance with the highest rendezvous hash of (instance name, client
 * id), so every instance reaches the same answer without asking. Only the
 * owner answers a device's hello and runs its MCP client; a live session
 * stays where it is until it ends.
 *
 * cluster.mode "off": no record, no subscription, gw_cluster_owns is
 * always true; draining still works (a single instance that drains
 * refuses new hellos).
 *
 * Everything runs on the loop's thread.
 */
#ifndef GW_CLUSTER_H
#define GW_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "common/error.h"
#include "common/mqtt_link.h"

struct gw_cluster;

/* Where this instance is in the cluster. */
#define GW_CLUSTER_PHASE_MAP(XX)                                               \
    XX(OFF, "off")           /* cluster.mode off: alone */                     \
    XX(JOINING, "joining")   /* waiting to know its name is its own */         \
    XX(RUNNING, "running")   /* owns its share of devices */                   \
    XX(DRAINING, "draining") /* takes no new conversations */                  \
    XX(REFUSED, "refused")   /* another live instance has the name */

enum gw_cluster_phase {
#define XX(name, _) GW_CLUSTER_##name,
    GW_CLUSTER_PHASE_MAP(XX)
#undef XX
        GW_CLUSTER_PHASE_COUNT_
};

const char *gw_cluster_phase_name(enum gw_cluster_phase phase);

struct gw_cluster_env {
    uv_loop_t *loop;
    struct gw_mqtt_link *link; /* may be set after init, before link up */
    bool hash_mode;            /* cluster.mode "hash" or "shared" */
    bool shared;               /* cluster.mode "shared" */
    const char *name;          /* cluster.instance (copied) */
    const char *topic_prefix;  /* cluster.topic_prefix (copied) */
    const char *udp;           /* "host:port" devices are told (copied) */
    /* Ownership may have moved (an instance came, went or changed state):
     * devices this instance now owns may need their MCP client. */
    void (*on_owners_changed)(void *arg);
    /* Another live instance holds this name: the instance must stop and
     * the process exit 1 (the error is logged already). */
    void (*on_refused)(void *arg);
    /* The load for the record, asked before each publish; NULL: what
     * gw_cluster_set_load gave. */
    void (*load)(void *arg, unsigned *sessions, unsigned *devices);
    /* A message on this instance's <prefix>/<name>/rpc (sender NULL), or
     * any instance's <prefix>/<name>/catalog (this one's too; sender the
     * topic's <name>, so a catalog is taken from that instance only),
     * while live. */
    void (*on_peer_message)(void *arg, const char *sender,
                            const uint8_t *payload, size_t len);
    /* Another instance appeared (or started again): it knows nothing of
     * the devices this one owns yet. */
    void (*on_peer_joined)(void *arg, const char *name);
    void *arg;
};

/*
 * Creates the cluster part. Nothing is published before the link is up
 * (gw_cluster_on_link_state). Returns 0, GW_ENOMEM or GW_EINVAL.
 */
GW_MUST_CHECK int gw_cluster_init(const struct gw_cluster_env *env,
                                  struct gw_cluster **out);

/* The link, once it exists (the link's options need the will first). */
void gw_cluster_set_link(struct gw_cluster *c, struct gw_mqtt_link *link);

/*
 * The will the link must carry (retained, QoS 1): topic and payload stay
 * valid for the cluster's life. False in mode off (no will of its own).
 */
bool gw_cluster_will(const struct gw_cluster *c, const char **topic,
                     const char **payload);

/* The topics the link must subscribe to (mode off: none); out must hold
 * GW_CLUSTER_TOPICS. */
#define GW_CLUSTER_TOPICS 4
size_t gw_cluster_topics(const struct gw_cluster *c, const char **out,
                         size_t max);

/*
 * A message from the broker: true when it was a cluster topic (taken
 * here, never a device's), false when the dispatcher should have it.
 */
bool gw_cluster_on_message(struct gw_cluster *c, const char *topic,
                           const uint8_t *payload, size_t len);

/* The broker link came up or went away. */
void gw_cluster_on_link_state(struct gw_cluster *c, bool up);

/*
 * The instance that owns client_id now, or NULL when it is this one (or
 * nobody: then this one serves it). Valid until membership changes.
 */
const char *gw_cluster_owner(const struct gw_cluster *c, const char *client_id);

/*
 * Whether this instance owns client_id: runs its MCP client, and (mode
 * hash) takes its new conversations.
 */
bool gw_cluster_owns(const struct gw_cluster *c, const char *client_id);

/*
 * Whether this instance takes a new conversation of client_id whose hello
 * it received: mode hash, when it owns the device; mode shared (the
 * broker picked this instance), while it runs and does not drain.
 */
bool gw_cluster_takes_hello(const struct gw_cluster *c, const char *client_id);

/* cluster.mode "shared". */
bool gw_cluster_shared(const struct gw_cluster *c);

/* Stops taking new conversations; republishes the record. Idempotent. */
void gw_cluster_set_draining(struct gw_cluster *c);
bool gw_cluster_is_draining(const struct gw_cluster *c);

/* The load the record carries (republished every 10 s). */
void gw_cluster_set_load(struct gw_cluster *c, unsigned sessions,
                         unsigned devices);

enum gw_cluster_phase gw_cluster_phase(const struct gw_cluster *c);
const char *gw_cluster_name(const struct gw_cluster *c);

/* For metrics and /healthz. */
struct gw_cluster_stats {
    unsigned running;          /* live instances seen running (self included) */
    unsigned draining;         /* ... draining */
    uint64_t hellos_ignored;   /* hellos of devices owned by another */
    uint64_t messages_ignored; /* other device traffic not ours */
    uint64_t records_refused;  /* bad instance records */
};
void gw_cluster_get_stats(const struct gw_cluster *c,
                          struct gw_cluster_stats *out);

/* Counting, by the dispatcher: a hello / message left to the owner. */
void gw_cluster_count_ignored(struct gw_cluster *c, bool hello);

/* Calls fn for each live instance seen (self included). */
void gw_cluster_each(const struct gw_cluster *c,
                     void (*fn)(void *arg, const char *name, const char *state,
                                const char *udp, unsigned sessions),
                     void *arg);

/*
 * Shutdown begins: the record says gone at once (the others take new
 * conversations from now on) and this instance owns nothing more; live
 * sessions end as the instance decides. Idempotent.
 */
void gw_cluster_leave(struct gw_cluster *c);

/*
 * A clean exit: the retained record says gone (before the link's clean
 * disconnect discards the will), timers stop; cb runs when closed.
 */
void gw_cluster_close(struct gw_cluster *c, void (*cb)(void *arg), void *arg);

#endif /* GW_CLUSTER_H */
