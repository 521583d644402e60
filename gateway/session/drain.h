/*
 * The drain of a rolling restart (docs/architecture.md section 10,
 * docs/protocol.md section 10.5):
 * asked by SIGUSR2 or POST /api/drain, the instance takes no new
 * conversation (the session table refuses hellos, the cluster record says
 * draining so the others take its devices), lets the live ones end by
 * themselves up to cluster.drain_deadline_s, then ends the rest, one
 * goodbye each, and asks the process to stop (exit 0).
 *
 * SIGTERM is not a drain: it stops at once, during a drain too.
 * Everything runs on the loop's thread.
 */
#ifndef GW_DRAIN_H
#define GW_DRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "gateway/session/session.h"

/* Where the drain is; changed only by the drain module. */
#define GW_DRAIN_STATE_MAP(XX)                                                 \
    XX(OFF, "running")      /* no drain asked */                               \
    XX(WAITING, "draining") /* live conversations end by themselves */         \
    XX(DONE, "drained")     /* over: the instance is stopping */

enum gw_drain_state {
#define XX(name, _) GW_DRAIN_##name,
    GW_DRAIN_STATE_MAP(XX)
#undef XX
        GW_DRAIN_STATE_COUNT_
};

const char *gw_drain_state_name(enum gw_drain_state state);

/* What the drain needs of the instance, given once at init. */
struct gw_drain_env {
    uv_loop_t *loop;
    struct gw_sessions *sessions;
    /* The drain began (once): the cluster record says so. May be NULL. */
    void (*on_start)(void *arg);
    /* The drain is over (no live session left): stop the instance. */
    void (*on_done)(void *arg);
    void *arg;
};

struct gw_drain {
    struct gw_drain_env env;
    enum gw_drain_state state;
    uv_timer_t timer;     /* progress lines, the deadline, the end */
    uint64_t started_ms;  /* loop time the drain began */
    uint64_t deadline_ms; /* loop time of its deadline */
    size_t at_start;      /* live sessions when it began */
    size_t cut;           /* sessions ended at the deadline */
    uint64_t requests;    /* drain requests, the first included */
    void (*closed_cb)(void *arg);
    void *closed_arg;
};

/* The timer is made here: gw_drain_close must follow. */
void gw_drain_init(struct gw_drain *d, const struct gw_drain_env *env);

/*
 * Starts the drain with a deadline of deadline_s from now; by names who
 * asked (for the log). A drain under way is left as it is (its deadline
 * too): returns false then, true when this call started it.
 */
bool gw_drain_start(struct gw_drain *d, int deadline_s, const char *by);

/* The live session count may have fallen to zero (the session table's
 * on_empty): the drain ends without waiting for its deadline. */
void gw_drain_sessions_changed(struct gw_drain *d);

bool gw_drain_active(const struct gw_drain *d);

/* Whole seconds until the deadline (0 when none is pending). */
uint64_t gw_drain_seconds_left(const struct gw_drain *d);

/* Stops the drain where it is and closes its timer; cb runs when closed
 * (SIGTERM during a drain lands here with the rest of the instance). */
void gw_drain_close(struct gw_drain *d, void (*cb)(void *arg), void *arg);

#endif /* GW_DRAIN_H */
