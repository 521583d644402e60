/* Periodic upgrade-and-close probes of the backends in rotation. */
#include "gateway/backend/backend_probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/list.h"
#include "common/log.h"

#define TICK_MS 1000

struct gw_backend_probe {
    uv_loop_t *loop;
    const struct gw_config_live *config;
    struct gw_backend_ws *bws;
    struct gw_backend_pool *pool;
    uv_timer_t timer;
    uint64_t next_ms; /* loop time of the next round */
    struct gw_list conns;
    bool closing, timer_closed;
    void (*close_cb)(void *arg);
    void *close_arg;
};

struct probe_conn {
    struct gw_list link; /* on the probe's conns */
    struct gw_backend_probe *p;
    struct gw_backend_conn *ws; /* NULL once closed */
    bool opened;
    int backoff_ms, backoff_max_ms; /* of the config it started with */
    char name[72];
    char subject[96];
};

static void maybe_done(struct gw_backend_probe *p)
{
    if (!p->closing || !p->timer_closed || gw_list_first(&p->conns) != NULL) {
        return;
    }
    void (*cb)(void *) = p->close_cb;
    void *arg = p->close_arg;
    free(p);
    if (cb != NULL) {
        cb(arg);
    }
}

static void on_open(struct gw_backend_conn *conn, void *owner)
{
    struct probe_conn *c = owner;

    c->opened = true;
    gw_backend_conn_close(conn); /* the upgrade was the probe */
}

static void on_text(struct gw_backend_conn *conn, const char *text, size_t len,
                    void *owner)
{
    (void)conn, (void)text, (void)len, (void)owner;
}

static void on_audio(struct gw_backend_conn *conn, uint32_t timestamp,
                     const uint8_t *opus, size_t len, void *owner)
{
    (void)conn, (void)timestamp, (void)opus, (void)len, (void)owner;
}

static void on_close(struct gw_backend_conn *conn, const char *reason,
                     void *owner)
{
    struct probe_conn *c = owner;
    struct gw_backend_probe *p = c->p;

    (void)conn;
    if (!c->opened && !p->closing) {
        enum gw_backend_failure why = gw_backend_pool_classify(reason, false);
        gw_log(GW_LOG_WARN, c->subject, "failed: %s", reason);
        gw_backend_pool_probe_failed(p->pool, c->name, why, reason,
                                     c->backoff_ms, c->backoff_max_ms,
                                     uv_now(p->loop));
    }
    gw_list_unlink(&c->link);
    free(c);
    maybe_done(p);
}

static const struct gw_backend_events probe_events = {
    .on_open = on_open,
    .on_text = on_text,
    .on_audio = on_audio,
    .on_close = on_close,
};

static bool probing(const struct gw_backend_probe *p, const char *name)
{
    for (const struct gw_list *n = p->conns.next; n != &p->conns; n = n->next) {
        if (strcmp(GW_LIST_ENTRY(n, struct probe_conn, link)->name, name) ==
            0) {
            return true;
        }
    }
    return false;
}

static void probe_one(struct gw_backend_probe *p, const struct gw_config *cfg,
                      const struct gw_backend_config *b)
{
    struct probe_conn *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        return;
    }
    c->p = p;
    c->backoff_ms = cfg->health.backoff_ms;
    c->backoff_max_ms = cfg->health.backoff_max_ms;
    snprintf(c->name, sizeof(c->name), "%s", b->name);
    snprintf(c->subject, sizeof(c->subject), "probe %s", b->name);
    struct gw_backend_connect params = {
        .backend = b,
        .device_id = "00:00:00:00:00:00",
        .client_id = "hybridgw-probe",
        .log_subject = c->subject,
        .max_message_bytes = (size_t)cfg->limits.max_downlink_bytes,
    };
    int rc = gw_backend_conn_open(p->bws, &params, &probe_events, c, &c->ws);
    if (rc != 0) {
        gw_log(GW_LOG_WARN, c->subject, "not started: %s", gw_strerror(rc));
        free(c);
        return;
    }
    gw_list_insert_tail(&p->conns, &c->link);
}

static void on_tick(uv_timer_t *timer)
{
    struct gw_backend_probe *p = timer->data;
    const struct gw_config *cfg = gw_config_live_get(p->config);
    uint64_t now = uv_now(p->loop);

    if (cfg->health.probe_interval_s <= 0 || now < p->next_ms) {
        return;
    }
    p->next_ms = now + (uint64_t)cfg->health.probe_interval_s * 1000;
    for (size_t i = 0; i < cfg->n_backends; i++) {
        const struct gw_backend_config *b = &cfg->backends[i];
        const struct gw_backend_state *st =
            gw_backend_pool_find(p->pool, b->name);
        if ((st == NULL || st->health == GW_BHEALTH_UP) &&
            !probing(p, b->name)) {
            probe_one(p, cfg, b);
        }
    }
}

int gw_backend_probe_start(uv_loop_t *loop, const struct gw_config_live *config,
                           struct gw_backend_ws *bws,
                           struct gw_backend_pool *pool,
                           struct gw_backend_probe **out)
{
    struct gw_backend_probe *p = calloc(1, sizeof(*p));

    if (p == NULL) {
        return GW_ENOMEM;
    }
    p->loop = loop;
    p->config = config;
    p->bws = bws;
    p->pool = pool;
    gw_list_init(&p->conns);
    uv_timer_init(loop, &p->timer);
    p->timer.data = p;
    uv_timer_start(&p->timer, on_tick, TICK_MS, TICK_MS);
    *out = p;
    return 0;
}

static void on_timer_closed(uv_handle_t *handle)
{
    struct gw_backend_probe *p = handle->data;

    p->timer_closed = true;
    maybe_done(p);
}

void gw_backend_probe_close(struct gw_backend_probe *p, void (*cb)(void *arg),
                            void *arg)
{
    p->closing = true;
    p->close_cb = cb;
    p->close_arg = arg;
    uv_timer_stop(&p->timer);
    uv_close((uv_handle_t *)&p->timer, on_timer_closed);
    /* Their on_close comes later, from the loop. */
    for (struct gw_list *n = p->conns.next; n != &p->conns; n = n->next) {
        gw_backend_conn_close(GW_LIST_ENTRY(n, struct probe_conn, link)->ws);
    }
}
