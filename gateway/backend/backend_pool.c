/* Per-backend health and counters, and the strategies of a route. */
#include "gateway/backend/backend_pool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const unsigned gw_backend_pool_latency_bounds[GW_POOL_LATENCY_BUCKETS] = {
    10, 25, 50, 100, 250, 500, 1000, 2500, 5000};

static const char *const failure_names[GW_BFAIL_COUNT_] = {
#define XX(name, text) [GW_BFAIL_##name] = text,
    GW_BACKEND_FAILURE_MAP(XX)
#undef XX
};

static const char *const health_names[GW_BHEALTH_COUNT_] = {
#define XX(name, text) [GW_BHEALTH_##name] = text,
    GW_BACKEND_HEALTH_MAP(XX)
#undef XX
};

const char *gw_backend_failure_name(enum gw_backend_failure why)
{
    return (unsigned)why < GW_BFAIL_COUNT_ ? failure_names[why] : "none";
}

const char *gw_backend_health_name(enum gw_backend_health health)
{
    return (unsigned)health < GW_BHEALTH_COUNT_ ? health_names[health] : "?";
}

struct gw_backend_pool {
    struct gw_backend_state **b; /* each its own allocation: stable */
    size_t n, cap;
    uint64_t rng; /* xorshift64* state, never 0 */
};

/* ---- pure ---- */

/* FNV-1a, then a finalizer so that near names spread (splitmix64). */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t gw_backend_pool_hash(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;

    for (size_t i = 0; i < len; i++) {
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
    }
    return mix(h);
}

static bool eligible(const struct gw_pool_candidate *c)
{
    return !c->tried && c->in_rotation &&
           (c->max_sessions == 0 || c->active < c->max_sessions);
}

/* Weighted rendezvous: -w / ln(u), u uniform in (0, 1) from the pair. */
static double sticky_score(const struct gw_pool_candidate *c,
                           uint64_t client_hash)
{
    uint64_t h = mix(client_hash ^ c->name_hash);
    double u = ((double)(h >> 11) + 0.5) / 9007199254740992.0; /* 2^53 */

    return -(double)c->weight / log(u);
}

int gw_backend_pool_choose(enum gw_route_strategy strategy,
                           const struct gw_pool_candidate *c, size_t n,
                           uint64_t client_hash, uint64_t random)
{
    int best = -1;
    uint64_t total = 0;
    double best_score = 0;

    switch (strategy) {
    case GW_STRATEGY_WEIGHTED:
        for (size_t i = 0; i < n; i++) {
            total += eligible(&c[i]) ? c[i].weight : 0;
        }
        if (total == 0) {
            return -1;
        }
        random %= total;
        for (size_t i = 0; i < n; i++) {
            if (!eligible(&c[i])) {
                continue;
            }
            if (random < c[i].weight) {
                return (int)i;
            }
            random -= c[i].weight;
        }
        return -1; /* not reached */
    case GW_STRATEGY_LEAST:
        for (size_t i = 0; i < n; i++) {
            /* active_i / w_i < active_b / w_b, without division */
            if (eligible(&c[i]) &&
                (best < 0 ||
                 c[i].active * c[best].weight < c[best].active * c[i].weight)) {
                best = (int)i;
            }
        }
        return best;
    case GW_STRATEGY_STICKY:
        for (size_t i = 0; i < n; i++) {
            if (!eligible(&c[i])) {
                continue;
            }
            double score = sticky_score(&c[i], client_hash);
            if (best < 0 || score > best_score) {
                best = (int)i;
                best_score = score;
            }
        }
        return best;
    case GW_STRATEGY_ORDERED:
    default:
        for (size_t i = 0; i < n; i++) {
            if (eligible(&c[i])) {
                return (int)i;
            }
        }
        return -1;
    }
}

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

enum gw_backend_failure gw_backend_pool_classify(const char *reason,
                                                 bool active)
{
    if (starts_with(reason, "connect failed: ")) {
        const char *what = reason + strlen("connect failed: ");
        if (strstr(what, "(HTTP ") != NULL) {
            return GW_BFAIL_UPGRADE;
        }
        if (starts_with(what, "certificate") || strstr(what, "tls") ||
            strstr(what, "TLS") || strstr(what, "ssl") || strstr(what, "SSL")) {
            return GW_BFAIL_TLS;
        }
        return GW_BFAIL_CONNECT;
    }
    if (starts_with(reason, "connect timeout")) {
        return GW_BFAIL_CONNECT;
    }
    if (starts_with(reason, "closed by gateway")) {
        return GW_BFAIL_NONE;
    }
    if (active && (strcmp(reason, "closed by backend 1000") == 0 ||
                   strcmp(reason, "closed by backend 1001") == 0)) {
        return GW_BFAIL_NONE; /* a normal end of a conversation */
    }
    /* Before its hello any close is the backend's failure; once active,
     * a lost connection or an error status. */
    return GW_BFAIL_CLOSED;
}

/* ---- state ---- */

struct gw_backend_pool *gw_backend_pool_new(uint64_t seed)
{
    struct gw_backend_pool *pool = calloc(1, sizeof(*pool));

    if (pool != NULL) {
        pool->rng = mix(seed) | 1;
    }
    return pool;
}

void gw_backend_pool_free(struct gw_backend_pool *pool)
{
    if (pool == NULL) {
        return;
    }
    for (size_t i = 0; i < pool->n; i++) {
        free(pool->b[i]);
    }
    free(pool->b);
    free(pool);
}

static uint64_t next_random(struct gw_backend_pool *pool)
{
    uint64_t x = pool->rng;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    pool->rng = x;
    return x * 0x2545f4914f6cdd1dULL;
}

const struct gw_backend_state *
gw_backend_pool_find(const struct gw_backend_pool *pool, const char *name)
{
    for (size_t i = 0; i < pool->n; i++) {
        if (strcmp(pool->b[i]->name, name) == 0) {
            return pool->b[i];
        }
    }
    return NULL;
}

static struct gw_backend_state *state_of(struct gw_backend_pool *pool,
                                         const char *name)
{
    struct gw_backend_state *st =
        (struct gw_backend_state *)gw_backend_pool_find(pool, name);

    if (st != NULL) {
        return st;
    }
    if (pool->n == pool->cap) {
        size_t cap = pool->cap ? pool->cap * 2 : 8;
        void *b = realloc(pool->b, cap * sizeof(*pool->b));
        if (b == NULL) {
            return NULL;
        }
        pool->b = b;
        pool->cap = cap;
    }
    if ((st = calloc(1, sizeof(*st))) == NULL) {
        return NULL;
    }
    /* Config names are at most 64 characters. */
    strncpy(st->name, name, sizeof(st->name) - 1);
    pool->b[pool->n++] = st;
    return st;
}

bool gw_backend_pool_in_rotation(const struct gw_backend_state *st,
                                 uint64_t now_ms)
{
    return st->health == GW_BHEALTH_UP ||
           (st->health == GW_BHEALTH_DOWN && now_ms >= st->retry_at_ms);
}

int gw_backend_pool_pick(struct gw_backend_pool *pool,
                         const struct gw_config *cfg,
                         const struct gw_route_config *route,
                         const char *client_id, struct gw_pool_tried *tried,
                         uint64_t now_ms, struct gw_pool_ticket *ticket)
{
    struct gw_pool_candidate c[256];
    struct gw_backend_state *st[256];
    size_t n = route->n_backends < 256 ? route->n_backends : 256;
    bool any = false;

    for (size_t k = 0; k < n; k++) {
        const struct gw_backend_config *b =
            &cfg->backends[route->backend_index[k]];
        if ((st[k] = state_of(pool, b->name)) == NULL) {
            return -1;
        }
        c[k] = (struct gw_pool_candidate){
            .weight = (uint32_t)(b->weight > 0 ? b->weight : 1),
            .name_hash = gw_backend_pool_hash(b->name, strlen(b->name)),
            .active = st[k]->active,
            .max_sessions = (uint64_t)b->max_sessions,
            .in_rotation = gw_backend_pool_in_rotation(st[k], now_ms),
            .tried = (tried->bits[k / 8] >> (k % 8)) & 1,
        };
        any = any || eligible(&c[k]);
    }
    uint64_t client_hash = gw_backend_pool_hash(client_id, strlen(client_id));
    int k = gw_backend_pool_choose(route->strategy, c, n, client_hash,
                                   next_random(pool));
    if (k < 0 && !any) {
        /* Nothing in rotation: the ones out of it rather than nothing. */
        for (size_t i = 0; i < n; i++) {
            c[i].in_rotation = true;
        }
        k = gw_backend_pool_choose(route->strategy, c, n, client_hash,
                                   next_random(pool));
    }
    if (k < 0) {
        return -1;
    }
    struct gw_backend_state *s = st[k];
    tried->bits[k / 8] |= (uint8_t)(1u << (k % 8));
    *ticket = (struct gw_pool_ticket){.st = s, .started_ms = now_ms};
    if (s->health == GW_BHEALTH_DOWN && now_ms >= s->retry_at_ms) {
        s->health = GW_BHEALTH_TRIAL;
        ticket->trial = true;
    }
    s->active++;
    s->attempts++;
    return k;
}

void gw_backend_pool_succeeded(struct gw_backend_pool *pool,
                               struct gw_pool_ticket *ticket, uint64_t now_ms)
{
    struct gw_backend_state *st = ticket->st;
    uint64_t ms = now_ms - ticket->started_ms;
    size_t i = 0;

    (void)pool;
    if (st == NULL) {
        return;
    }
    st->hellos++;
    while (i < GW_POOL_LATENCY_BUCKETS &&
           ms > gw_backend_pool_latency_bounds[i]) {
        i++;
    }
    st->latency[i]++;
    st->latency_sum_ms += ms;
    st->health = GW_BHEALTH_UP;
    st->failures_in_row = 0;
    ticket->trial = false;
}

void gw_backend_pool_done(struct gw_backend_pool *pool,
                          struct gw_pool_ticket *ticket)
{
    struct gw_backend_state *st = ticket->st;

    (void)pool;
    if (st == NULL) {
        return;
    }
    if (ticket->trial && st->health == GW_BHEALTH_TRIAL) {
        st->health = GW_BHEALTH_DOWN; /* no verdict: the next may try */
    }
    if (st->active > 0) {
        st->active--;
    }
    *ticket = (struct gw_pool_ticket){0};
}

void gw_backend_pool_failed(struct gw_backend_pool *pool,
                            struct gw_pool_ticket *ticket,
                            enum gw_backend_failure why, const char *reason,
                            int backoff_ms, int backoff_max_ms, uint64_t now_ms)
{
    struct gw_backend_state *st = ticket->st;

    if (st == NULL || why >= GW_BFAIL_COUNT_) {
        gw_backend_pool_done(pool, ticket);
        return;
    }
    st->failures[why]++;
    snprintf(st->last_failure, sizeof(st->last_failure), "%s: %s",
             gw_backend_failure_name(why), reason != NULL ? reason : "");
    /* Sessions that started before the backend went down fail too: only
     * a failure in rotation or of the trial makes the backoff grow. */
    if (st->health == GW_BHEALTH_UP ||
        (ticket->trial && st->health == GW_BHEALTH_TRIAL)) {
        uint64_t wait = (uint64_t)backoff_ms;
        for (unsigned i = 0; i < st->failures_in_row && wait < (1ULL << 40);
             i++) {
            wait *= 2;
        }
        if (wait > (uint64_t)backoff_max_ms) {
            wait = (uint64_t)backoff_max_ms;
        }
        st->failures_in_row++;
        st->health = GW_BHEALTH_DOWN;
        st->retry_at_ms = now_ms + wait;
    }
    ticket->trial = false;
    gw_backend_pool_done(pool, ticket);
}

void gw_backend_pool_probe_failed(struct gw_backend_pool *pool,
                                  const char *name, enum gw_backend_failure why,
                                  const char *reason, int backoff_ms,
                                  int backoff_max_ms, uint64_t now_ms)
{
    /* A ticket without a session: it holds no active count. */
    struct gw_pool_ticket ticket = {.st = state_of(pool, name)};

    if (ticket.st == NULL) {
        return;
    }
    ticket.st->active++;
    gw_backend_pool_failed(pool, &ticket, why, reason, backoff_ms,
                           backoff_max_ms, now_ms);
}

void gw_backend_pool_each(const struct gw_backend_pool *pool,
                          void (*fn)(void *arg,
                                     const struct gw_backend_state *st),
                          void *arg)
{
    for (size_t i = 0; i < pool->n; i++) {
        fn(arg, pool->b[i]);
    }
}

static void add_backend(cJSON *arr, const struct gw_backend_pool *pool,
                        const char *name, uint64_t now_ms)
{
    const struct gw_backend_state *st = gw_backend_pool_find(pool, name);
    cJSON *b = cJSON_CreateObject();

    cJSON_AddStringToObject(b, "name", name);
    cJSON_AddStringToObject(
        b, "state", gw_backend_health_name(st ? st->health : GW_BHEALTH_UP));
    cJSON_AddNumberToObject(b, "active", st ? (double)st->active : 0);
    if (st != NULL && st->health == GW_BHEALTH_DOWN) {
        cJSON_AddNumberToObject(
            b, "retry_in_ms",
            st->retry_at_ms > now_ms ? (double)(st->retry_at_ms - now_ms) : 0);
    }
    if (st != NULL && st->last_failure[0] != '\0') {
        cJSON_AddStringToObject(b, "last_failure", st->last_failure);
    }
    cJSON_AddItemToArray(arr, b);
}

size_t gw_backend_pool_health_json(const struct gw_backend_pool *pool,
                                   const struct gw_config *cfg, uint64_t now_ms,
                                   cJSON *doc)
{
    cJSON *all = cJSON_AddArrayToObject(doc, "backends");
    cJSON *degraded = NULL;
    size_t n = 0;

    for (size_t i = 0; i < cfg->n_backends; i++) {
        add_backend(all, pool, cfg->backends[i].name, now_ms);
    }
    for (size_t r = 0; r < cfg->n_routes; r++) {
        const struct gw_route_config *route = &cfg->routes[r];
        bool any = false;
        for (size_t k = 0; k < route->n_backends && !any; k++) {
            const struct gw_backend_state *st = gw_backend_pool_find(
                pool, cfg->backends[route->backend_index[k]].name);
            /* Waiting for its trial is not yet healthy. */
            any = st == NULL || st->health == GW_BHEALTH_UP;
        }
        if (any) {
            continue;
        }
        if (degraded == NULL) {
            degraded = cJSON_AddArrayToObject(doc, "degraded");
        }
        cJSON *item = cJSON_CreateObject();
        cJSON_AddNumberToObject(item, "route", (double)r);
        cJSON *list = cJSON_AddArrayToObject(item, "backends");
        for (size_t k = 0; k < route->n_backends; k++) {
            add_backend(list, pool, route->backends[k], now_ms);
        }
        cJSON_AddItemToArray(degraded, item);
        n++;
    }
    return n;
}
