/*
 * The bindings store's front: checks every argument, then hands the call
 * to the backend's operations (binding_sqlite.c, binding_pg.c); and what
 * both share: codes and challenges from OpenSSL, rows from text, names.
 */
#include "gateway/binding/binding.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "common/log.h"
#include "gateway/binding/binding_int.h"

/* Database errors: a burst, then one line a second with the count left
 * out (a store that is down fails every call). */
static const struct gw_bucket_rate fail_rate = {.per_s = 1.0, .burst = 5.0};

/* Whether s is a string of 1..max characters. */
static bool text_ok(const char *s, size_t max)
{
    return s != NULL && s[0] != '\0' && strnlen(s, max + 1) <= max;
}

/* Whether a fixed array holds its string (NUL inside it). */
#define FITS(field) (strnlen((field), sizeof(field)) < sizeof(field))

#define MAC_MAX 17

/* ---- opening and names -------------------------------------------------- */

int gw_binding_store_open(const struct gw_binding_store_options *o,
                          struct gw_binding_store **out)
{
    int rc;

    if (o == NULL || out == NULL) {
        return GW_EINVAL;
    }
    *out = NULL;
    switch (o->kind) {
    case GW_BINDING_STORE_SQLITE:
        if (!text_ok(o->path, 4096)) {
            gw_log(GW_LOG_ERROR, "bindings", "sqlite: no database file named");
            return GW_ECONFIG;
        }
        rc = gw__binding_sqlite_open(o, out);
        break;
    case GW_BINDING_STORE_POSTGRESQL:
        rc = gw__binding_pg_open(o, out);
        break;
    default:
        return GW_EINVAL;
    }
    if (rc == 0) {
        (*out)->kind = o->kind;
    }
    return rc;
}

void gw_binding_store_close(struct gw_binding_store *s)
{
    if (s != NULL) {
        s->ops->close(s);
    }
}

const char *gw_binding_store_kind_name(enum gw_binding_store_kind k)
{
    switch (k) {
    case GW_BINDING_STORE_SQLITE:
        return "sqlite";
    case GW_BINDING_STORE_POSTGRESQL:
        return "postgresql";
    }
    return "unknown";
}

const char *gw_binding_by_name(enum gw_binding_by by)
{
    switch (by) {
    case GW_BINDING_BY_OPERATOR:
        return "operator";
    case GW_BINDING_BY_HMAC:
        return "hmac";
    case GW_BINDING_BY_LAB:
        return "lab";
    }
    return "unknown";
}

int gw__binding_by_parse(const char *name, enum gw_binding_by *by)
{
    static const enum gw_binding_by all[] = {
        GW_BINDING_BY_OPERATOR, GW_BINDING_BY_HMAC, GW_BINDING_BY_LAB};

    for (size_t i = 0; name != NULL && i < sizeof(all) / sizeof(all[0]); i++) {
        if (strcmp(name, gw_binding_by_name(all[i])) == 0) {
            *by = all[i];
            return 0;
        }
    }
    return GW_EIO;
}

/* ---- the calls ---------------------------------------------------------- */

int gw_binding_find(struct gw_binding_store *s, const char *mac,
                    const char *uuid, struct gw_binding *out)
{
    if (s == NULL || out == NULL || !text_ok(mac, MAC_MAX) ||
        !text_ok(uuid, GW_OTA_UUID_MAX)) {
        return GW_EINVAL;
    }
    return s->ops->find(s, mac, uuid, out);
}

int gw_binding_find_client(struct gw_binding_store *s, const char *client_id,
                           struct gw_binding *out)
{
    if (s == NULL || out == NULL || !text_ok(client_id, GW_CLIENT_ID_MAX)) {
        return GW_EINVAL;
    }
    return s->ops->find_client(s, client_id, out);
}

int gw_binding_count_mac(struct gw_binding_store *s, const char *mac,
                         int *count)
{
    if (s == NULL || count == NULL || !text_ok(mac, MAC_MAX)) {
        return GW_EINVAL;
    }
    return s->ops->count_mac(s, mac, count);
}

int gw_binding_pending_get(struct gw_binding_store *s,
                           const struct gw_binding_pending *want,
                           int64_t now_ms, int64_t ttl_ms,
                           struct gw_binding_pending *out)
{
    if (s == NULL || want == NULL || out == NULL || ttl_ms <= 0 ||
        now_ms > INT64_MAX - ttl_ms || !text_ok(want->mac, MAC_MAX) ||
        !text_ok(want->uuid, GW_OTA_UUID_MAX) || !FITS(want->mac) ||
        !FITS(want->uuid) || !FITS(want->board) || !FITS(want->serial_number) ||
        !FITS(want->peer)) {
        return GW_EINVAL;
    }
    return s->ops->pending_get(s, want, now_ms, ttl_ms, out);
}

int gw_binding_pending_by_code(struct gw_binding_store *s, const char *code,
                               int64_t now_ms, struct gw_binding_pending *out)
{
    if (s == NULL || out == NULL || !text_ok(code, GW_BINDING_CODE_LEN)) {
        return GW_EINVAL;
    }
    return s->ops->pending_by_code(s, code, now_ms, out);
}

int gw_binding_pending_find(struct gw_binding_store *s, const char *mac,
                            const char *uuid, int64_t now_ms,
                            struct gw_binding_pending *out)
{
    if (s == NULL || out == NULL || !text_ok(mac, MAC_MAX) ||
        !text_ok(uuid, GW_OTA_UUID_MAX)) {
        return GW_EINVAL;
    }
    return s->ops->pending_find(s, mac, uuid, now_ms, out);
}

int gw_binding_bind(struct gw_binding_store *s, struct gw_binding *b)
{
    if (s == NULL || b == NULL || !FITS(b->client_id) || !FITS(b->mac) ||
        !FITS(b->uuid) || !FITS(b->group) || !FITS(b->board) ||
        !FITS(b->serial_number) || b->client_id[0] == '\0' ||
        b->mac[0] == '\0' || b->uuid[0] == '\0' ||
        strcmp(gw_binding_by_name(b->by), "unknown") == 0) {
        return GW_EINVAL;
    }
    return s->ops->bind(s, b);
}

int gw_binding_claim_issue(struct gw_binding_store *s, int64_t id,
                           bool *granted)
{
    if (s == NULL || granted == NULL) {
        return GW_EINVAL;
    }
    *granted = false;
    return s->ops->claim_issue(s, id, granted);
}

int gw_binding_allow_reissue(struct gw_binding_store *s, int64_t id)
{
    if (s == NULL) {
        return GW_EINVAL;
    }
    return s->ops->allow_reissue(s, id);
}

int gw_binding_unbind(struct gw_binding_store *s, const char *client_id,
                      struct gw_binding_revoked *out)
{
    if (s == NULL || out == NULL || !text_ok(client_id, GW_CLIENT_ID_MAX)) {
        return GW_EINVAL;
    }
    return s->ops->unbind(s, client_id, out);
}

int gw_binding_list(struct gw_binding_store *s, int64_t after, int limit,
                    gw_binding_fn fn, void *arg)
{
    if (s == NULL || fn == NULL || limit < 0) {
        return GW_EINVAL;
    }
    return limit == 0 ? 0 : s->ops->list(s, after, limit, fn, arg);
}

int gw_binding_pending_list(struct gw_binding_store *s, int64_t now_ms,
                            int limit, gw_binding_pending_fn fn, void *arg)
{
    if (s == NULL || fn == NULL || limit < 0) {
        return GW_EINVAL;
    }
    return limit == 0 ? 0 : s->ops->pending_list(s, now_ms, limit, fn, arg);
}

int gw_binding_revoked_list(struct gw_binding_store *s,
                            gw_binding_revoked_fn fn, void *arg)
{
    if (s == NULL || fn == NULL) {
        return GW_EINVAL;
    }
    return s->ops->revoked_list(s, fn, arg);
}

/* ---- codes and challenges ----------------------------------------------- */

int gw__binding_code(char out[GW_BINDING_CODE_LEN + 1])
{
    /* 10^6 codes; 32-bit draws at or above the largest multiple of 10^6
     * are drawn again, so that every code is equally likely. */
    const uint64_t span = 1000000;
    const uint64_t limit = (UINT64_C(1) << 32) - ((UINT64_C(1) << 32) % span);
    unsigned char r[4];
    uint64_t v;

    _Static_assert(GW_BINDING_CODE_LEN == 6, "span is 10^6");
    for (int tries = 0; tries < 64; tries++) {
        if (RAND_bytes(r, sizeof(r)) != 1) {
            return GW_ECRYPTO;
        }
        v = (uint64_t)r[0] << 24 | (uint64_t)r[1] << 16 | (uint64_t)r[2] << 8 |
            r[3];
        if (v < limit) {
            snprintf(out, GW_BINDING_CODE_LEN + 1, "%06u",
                     (unsigned)(v % span));
            return 0;
        }
    }
    return GW_ECRYPTO; /* 64 rejections in a row: the generator is broken */
}

int gw__binding_challenge(char out[GW_BINDING_CHALLENGE_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char r[GW_BINDING_CHALLENGE_LEN / 2];

    if (RAND_bytes(r, sizeof(r)) != 1) {
        return GW_ECRYPTO;
    }
    for (size_t i = 0; i < sizeof(r); i++) {
        out[2 * i] = hex[r[i] >> 4];
        out[2 * i + 1] = hex[r[i] & 15];
    }
    out[GW_BINDING_CHALLENGE_LEN] = '\0';
    return 0;
}

/* ---- rows from text ----------------------------------------------------- */

static int copy(char *dst, size_t cap, const char *src)
{
    size_t n;

    if (src == NULL || (n = strnlen(src, cap)) >= cap) {
        return GW_EIO;
    }
    memcpy(dst, src, n + 1);
    return 0;
}

static int int64_of(const char *s, int64_t *v)
{
    char *end = NULL;
    long long x;

    if (s == NULL || s[0] == '\0') {
        return GW_EIO;
    }
    errno = 0;
    x = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0') {
        return GW_EIO;
    }
    *v = (int64_t)x;
    return 0;
}

static int flag_of(const char *s, bool *v)
{
    if (s == NULL || (strcmp(s, "0") != 0 && strcmp(s, "1") != 0)) {
        return GW_EIO;
    }
    *v = s[0] == '1';
    return 0;
}

#define COPY(dst, src) copy((dst), sizeof(dst), (src))

int gw__binding_from_text(const char *const *v, struct gw_binding *b)
{
    memset(b, 0, sizeof(*b));
    if (int64_of(v[0], &b->id) || COPY(b->client_id, v[1]) ||
        COPY(b->mac, v[2]) || COPY(b->uuid, v[3]) || COPY(b->group, v[4]) ||
        COPY(b->board, v[5]) || COPY(b->serial_number, v[6]) ||
        gw__binding_by_parse(v[7], &b->by) || int64_of(v[8], &b->bound_ms) ||
        flag_of(v[9], &b->issued) || flag_of(v[10], &b->reissue)) {
        return GW_EIO;
    }
    return 0;
}

int gw__binding_pending_from_text(const char *const *v,
                                  struct gw_binding_pending *p)
{
    memset(p, 0, sizeof(*p));
    if (COPY(p->code, v[0]) || COPY(p->challenge, v[1]) || COPY(p->mac, v[2]) ||
        COPY(p->uuid, v[3]) || COPY(p->board, v[4]) ||
        COPY(p->serial_number, v[5]) || COPY(p->peer, v[6]) ||
        int64_of(v[7], &p->created_ms) || int64_of(v[8], &p->expires_ms)) {
        return GW_EIO;
    }
    return 0;
}

int gw__binding_revoked_from_text(const char *const *v,
                                  struct gw_binding_revoked *r)
{
    memset(r, 0, sizeof(*r));
    if (COPY(r->client_id, v[0]) || int64_of(v[1], &r->below)) {
        return GW_EIO;
    }
    return 0;
}

/* ---- errors and row arrays ---------------------------------------------- */

int gw__binding_fail(struct gw_binding_store *s, const char *what,
                     const char *detail)
{
    struct timespec ts;
    uint64_t now_ms, skipped = 0;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    now_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    if (!gw_bucket_take(&s->log_bucket, &fail_rate, now_ms, &skipped)) {
        return GW_EIO;
    }
    if (skipped > 0) {
        gw_log(GW_LOG_ERROR, "bindings",
               "%s: %s: %s (and %llu failures not "
               "logged)",
               gw_binding_store_kind_name(s->kind), what,
               detail != NULL ? detail : "unknown error",
               (unsigned long long)skipped);
    } else {
        gw_log(GW_LOG_ERROR, "bindings", "%s: %s: %s",
               gw_binding_store_kind_name(s->kind), what,
               detail != NULL ? detail : "unknown error");
    }
    return GW_EIO;
}

void *gw__binding_rows_add(struct gw__binding_rows *r)
{
    char *slot;

    if (r->n == r->cap) {
        size_t cap = r->cap != 0 ? r->cap * 2 : 16;
        void *items = realloc(r->items, cap * r->size);
        if (items == NULL) {
            return NULL;
        }
        r->items = items;
        r->cap = cap;
    }
    slot = (char *)r->items + r->n++ * r->size;
    memset(slot, 0, r->size);
    return slot;
}

void gw__binding_rows_free(struct gw__binding_rows *r)
{
    free(r->items);
    r->items = NULL;
    r->n = r->cap = 0;
}
