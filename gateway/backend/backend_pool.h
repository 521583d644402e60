/*
 * Backend pools (docs/protocol.md section 6.1): each backend's runtime
 * state (health, active sessions, counters) and the choice of a backend
 * for a session among its route's, by the route's strategy.
 *
 * A backend that fails (connect, TLS, refused upgrade, no hello in time,
 * abnormal close) leaves the rotation for health.backoff_ms, doubled
 * with each further failure in a row up to health.backoff_max_ms; then
 * one trial session decides. A backend hello puts it back. When no
 * backend of a route is in rotation, the ones out of it are still tried
 * (the route's strategy among them): a device is better served by a
 * backend that may have come back than by a goodbye.
 *
 * State is kept by backend name, so it survives a config reload.
 */
#ifndef GW_BACKEND_POOL_H
#define GW_BACKEND_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "config/config.h"

#define GW_BACKEND_FAILURE_MAP(XX)                                             \
    XX(CONNECT, "connect")             /* TCP, DNS, connect timeout */         \
    XX(TLS, "tls")                     /* handshake or certificate */          \
    XX(UPGRADE, "upgrade")             /* HTTP status other than 101 */        \
    XX(HELLO_TIMEOUT, "hello_timeout") /* no valid hello in time */            \
    XX(CLOSED, "abnormal_close")       /* lost, or closed with an error */

enum gw_backend_failure {
#define XX(name, _) GW_BFAIL_##name,
    GW_BACKEND_FAILURE_MAP(XX)
#undef XX
        GW_BFAIL_COUNT_,
    GW_BFAIL_NONE = GW_BFAIL_COUNT_ /* not the backend's fault */
};

#define GW_BACKEND_HEALTH_MAP(XX)                                              \
    XX(UP, "up")       /* in rotation */                                       \
    XX(DOWN, "down")   /* out of rotation until retry_at_ms */                 \
    XX(TRIAL, "trial") /* one trial session under way */

enum gw_backend_health {
#define XX(name, _) GW_BHEALTH_##name,
    GW_BACKEND_HEALTH_MAP(XX)
#undef XX
        GW_BHEALTH_COUNT_
};

/* Upper bounds (ms) of the hello latency histogram; then +Inf. */
#define GW_POOL_LATENCY_BUCKETS 9
extern const unsigned gw_backend_pool_latency_bounds[GW_POOL_LATENCY_BUCKETS];

struct gw_backend_state {
    char name[72];
    enum gw_backend_health health;
    unsigned failures_in_row; /* since the last hello */
    uint64_t retry_at_ms;     /* DOWN: loop time the trial may start */
    uint64_t active;          /* sessions on it (connecting or active) */
    uint64_t attempts;        /* sessions sent to it */
    uint64_t hellos;          /* of those, answered with a hello */
    uint64_t failures[GW_BFAIL_COUNT_];
    uint64_t latency[GW_POOL_LATENCY_BUCKETS + 1]; /* hello, per bucket */
    uint64_t latency_sum_ms;
    uint64_t frames[2];     /* audio messages: [0] to it, [1] from it */
    uint64_t bytes[2];      /* and their audio bytes (headers not counted) */
    char last_failure[128]; /* for /healthz and logs */
};

struct gw_backend_pool;

/* One session's hold on a backend, from pick to done or failed. */
struct gw_pool_ticket {
    struct gw_backend_state *st; /* NULL: no hold */
    uint64_t started_ms;         /* the attempt's start, for latency */
    bool trial;                  /* this session is the backend's trial */
};

/* Bit k set: the route's backend k was tried by this session. */
struct gw_pool_tried {
    uint8_t bits[32]; /* routes list at most 256 backends */
};

/* ---- pure: the choice ---- */

struct gw_pool_candidate {
    uint32_t weight;       /* >= 1 */
    uint64_t name_hash;    /* gw_backend_pool_hash of its name */
    uint64_t active;       /* sessions on it now */
    uint64_t max_sessions; /* 0: no limit */
    bool in_rotation;      /* health allows a session now */
    bool tried;            /* by this session already */
};

uint64_t gw_backend_pool_hash(const char *s, size_t len);

/*
 * Index of the candidate a session goes to, or -1 when none is untried,
 * below its max_sessions and in rotation: ordered takes the first;
 * weighted draws with random in proportion to weight; least takes the
 * fewest active per weight (ties: the first); sticky the highest
 * weighted rendezvous score of client_hash and name_hash, so a device's
 * choice changes only when its backend leaves (or one joins and wins).
 */
int gw_backend_pool_choose(enum gw_route_strategy strategy,
                           const struct gw_pool_candidate *c, size_t n,
                           uint64_t client_hash, uint64_t random);

/*
 * What a WebSocket close reason (gw_backend_events.on_close) says of the
 * backend; active: the session had its hello. GW_BFAIL_NONE for a close
 * that is no failure (by the gateway, or 1000/1001 once active).
 */
enum gw_backend_failure gw_backend_pool_classify(const char *reason,
                                                 bool active);

const char *gw_backend_failure_name(enum gw_backend_failure why);
const char *gw_backend_health_name(enum gw_backend_health health);

/* ---- state ---- */

/* NULL on allocation failure. seed: the weighted draws. */
struct gw_backend_pool *gw_backend_pool_new(uint64_t seed);
void gw_backend_pool_free(struct gw_backend_pool *pool);

/*
 * Chooses a backend of route for a session not yet on one: the route
 * position (an index into route->backends) with *ticket holding it, or
 * -1 when every backend is tried or full. tried is updated.
 */
int gw_backend_pool_pick(struct gw_backend_pool *pool,
                         const struct gw_config *cfg,
                         const struct gw_route_config *route,
                         const char *client_id, struct gw_pool_tried *tried,
                         uint64_t now_ms, struct gw_pool_ticket *ticket);

/* The backend's hello arrived: back in rotation; the ticket stays. */
void gw_backend_pool_succeeded(struct gw_backend_pool *pool,
                               struct gw_pool_ticket *ticket, uint64_t now_ms);

/*
 * The attempt or session failed for why: counted, and a backend in
 * rotation (or on trial) leaves it. Releases the ticket. health: the
 * backoff keys. GW_BFAIL_NONE releases only.
 */
void gw_backend_pool_failed(struct gw_backend_pool *pool,
                            struct gw_pool_ticket *ticket,
                            enum gw_backend_failure why, const char *reason,
                            int backoff_ms, int backoff_max_ms,
                            uint64_t now_ms);

/* A probe of the backend failed: as gw_backend_pool_failed, no ticket. */
void gw_backend_pool_probe_failed(struct gw_backend_pool *pool,
                                  const char *name, enum gw_backend_failure why,
                                  const char *reason, int backoff_ms,
                                  int backoff_max_ms, uint64_t now_ms);

/* Releases the ticket without a verdict; idempotent. */
void gw_backend_pool_done(struct gw_backend_pool *pool,
                          struct gw_pool_ticket *ticket);

/* The state of a backend by name, NULL if never used. */
const struct gw_backend_state *
gw_backend_pool_find(const struct gw_backend_pool *pool, const char *name);

/* Whether a session could be sent to the backend now (health only). */
bool gw_backend_pool_in_rotation(const struct gw_backend_state *st,
                                 uint64_t now_ms);

/* Calls fn for each backend state, in the order first used. */
void gw_backend_pool_each(const struct gw_backend_pool *pool,
                          void (*fn)(void *arg,
                                     const struct gw_backend_state *st),
                          void *arg);

/*
 * For /healthz: adds to doc "backends" (each backend of cfg with its
 * state, active sessions, retry_in_ms when down and last failure) and,
 * when some route has no backend up (unused ones count as up),
 * "degraded": those routes
 * with their backends. Returns how many routes are degraded.
 */
size_t gw_backend_pool_health_json(const struct gw_backend_pool *pool,
                                   const struct gw_config *cfg, uint64_t now_ms,
                                   cJSON *doc);

#endif /* GW_BACKEND_POOL_H */
