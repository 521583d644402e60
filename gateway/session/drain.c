/*
 * The drain: one timer does all of it. It wakes for a progress line
 * every PROGRESS_MS, at the deadline, and once the last live session is
 * gone; the drain ends only from its callback, so whoever asked (an HTTP
 * request, a signal) is never inside the instance's shutdown.
 */
#include "gateway/session/drain.h"

#include "common/log.h"

#define SUBJECT     "drain"
#define PROGRESS_MS 10000
/*
 * With nothing left to wait for, the end still comes this much later:
 * the answer to POST /api/drain leaves before the listener closes, and
 * the record that says draining reaches the other instances first.
 */
#define LINGER_MS 200

static const char *const state_names[GW_DRAIN_STATE_COUNT_] = {
#define XX(name, text) text,
    GW_DRAIN_STATE_MAP(XX)
#undef XX
};

const char *gw_drain_state_name(enum gw_drain_state state)
{
    return (unsigned)state < GW_DRAIN_STATE_COUNT_ ? state_names[state] : "?";
}

static void on_timer(uv_timer_t *timer);

void gw_drain_init(struct gw_drain *d, const struct gw_drain_env *env)
{
    *d = (struct gw_drain){.env = *env, .state = GW_DRAIN_OFF};
    uv_timer_init(env->loop, &d->timer);
    d->timer.data = d;
}

bool gw_drain_active(const struct gw_drain *d)
{
    return d->state == GW_DRAIN_WAITING;
}

uint64_t gw_drain_seconds_left(const struct gw_drain *d)
{
    uint64_t now = uv_now(d->env.loop);

    if (d->state != GW_DRAIN_WAITING || now >= d->deadline_ms) {
        return 0;
    }
    return (d->deadline_ms - now + 999) / 1000;
}

/* The next wake-up: a progress line, or the deadline if sooner. */
static void schedule(struct gw_drain *d)
{
    uint64_t now = uv_now(d->env.loop);
    uint64_t wait = d->deadline_ms > now ? d->deadline_ms - now : 0;

    if (gw_sessions_live(d->env.sessions) == 0) {
        wait = LINGER_MS;
    } else if (wait > PROGRESS_MS) {
        wait = PROGRESS_MS;
    }
    uv_timer_start(&d->timer, on_timer, wait, 0);
}

static void finish(struct gw_drain *d)
{
    size_t natural = d->cut < d->at_start ? d->at_start - d->cut : 0;
    uint64_t took = uv_now(d->env.loop) - d->started_ms;

    d->state = GW_DRAIN_DONE;
    gw_log(GW_LOG_INFO, SUBJECT,
           "drained in %llu ms: %zu session%s at the start, %zu ended by "
           "themselves, %zu cut at the deadline; stopping",
           (unsigned long long)took, d->at_start, d->at_start == 1 ? "" : "s",
           natural, d->cut);
    d->env.on_done(d->env.arg);
}

static void on_timer(uv_timer_t *timer)
{
    struct gw_drain *d = timer->data;
    size_t live = gw_sessions_live(d->env.sessions);

    if (d->state != GW_DRAIN_WAITING) {
        return;
    }
    if (live == 0) {
        finish(d);
        return;
    }
    if (uv_now(d->env.loop) >= d->deadline_ms) {
        d->cut = live;
        gw_log(GW_LOG_WARN, SUBJECT,
               "deadline reached: %zu session%s cut (a goodbye each)", live,
               live == 1 ? "" : "s");
        gw_sessions_end_all(d->env.sessions, GW_END_DRAIN_DEADLINE);
        finish(d);
        return;
    }
    /* No session starts during a drain: live only falls. */
    gw_log(GW_LOG_INFO, SUBJECT,
           "%zu session%s left, %zu ended, %llu s to the deadline", live,
           live == 1 ? "" : "s", live < d->at_start ? d->at_start - live : 0,
           (unsigned long long)gw_drain_seconds_left(d));
    schedule(d);
}

bool gw_drain_start(struct gw_drain *d, int deadline_s, const char *by)
{
    size_t live = gw_sessions_live(d->env.sessions);

    d->requests++;
    if (d->state != GW_DRAIN_OFF) {
        gw_log(GW_LOG_INFO, SUBJECT,
               "drain asked again by %s: already %s, %zu session%s left, "
               "%llu s to the deadline",
               by, gw_drain_state_name(d->state), live, live == 1 ? "" : "s",
               (unsigned long long)gw_drain_seconds_left(d));
        return false;
    }
    d->state = GW_DRAIN_WAITING;
    d->started_ms = uv_now(d->env.loop);
    d->deadline_ms = d->started_ms + (uint64_t)deadline_s * 1000;
    d->at_start = live;
    d->env.sessions->draining = true;
    if (d->env.on_start != NULL) {
        d->env.on_start(d->env.arg);
    }
    gw_log(GW_LOG_INFO, SUBJECT,
           "drain asked by %s: no new conversations; %zu session%s live, "
           "deadline in %d s",
           by, live, live == 1 ? "" : "s", deadline_s);
    schedule(d);
    return true;
}

void gw_drain_sessions_changed(struct gw_drain *d)
{
    if (d->state == GW_DRAIN_WAITING &&
        gw_sessions_live(d->env.sessions) == 0) {
        schedule(d); /* the linger, then the end */
    }
}

static void on_closed(uv_handle_t *handle)
{
    struct gw_drain *d = handle->data;

    if (d->closed_cb != NULL) {
        d->closed_cb(d->closed_arg);
    }
}

void gw_drain_close(struct gw_drain *d, void (*cb)(void *arg), void *arg)
{
    if (d->state == GW_DRAIN_WAITING) {
        /* SIGTERM (or a failure) ended the sessions with the rest. */
        gw_log(GW_LOG_INFO, SUBJECT,
               "stopped before its end, %llu s before the deadline "
               "(%zu session%s at the start)",
               (unsigned long long)gw_drain_seconds_left(d), d->at_start,
               d->at_start == 1 ? "" : "s");
        d->state = GW_DRAIN_DONE;
    }
    d->closed_cb = cb;
    d->closed_arg = arg;
    uv_timer_stop(&d->timer);
    uv_close((uv_handle_t *)&d->timer, on_closed);
}
