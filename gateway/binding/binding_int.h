/*
 * What the files of gateway/binding/ share: the two backends (SQLite,
 * PostgreSQL) behind one table of operations, and the helpers both use
 * (random codes and challenges, rows from text, rate-limited error lines).
 */
#ifndef GW_BINDING_INT_H
#define GW_BINDING_INT_H

#include "common/ratelimit.h"
#include "gateway/binding/binding.h"

/* Called by binding.c once the arguments are checked. */
struct gw__binding_ops {
    void (*close)(struct gw_binding_store *s);
    int (*find)(struct gw_binding_store *s, const char *mac, const char *uuid,
                struct gw_binding *out);
    int (*find_client)(struct gw_binding_store *s, const char *client_id,
                       struct gw_binding *out);
    int (*count_mac)(struct gw_binding_store *s, const char *mac, int *count);
    int (*pending_get)(struct gw_binding_store *s,
                       const struct gw_binding_pending *want, int64_t now_ms,
                       int64_t ttl_ms, struct gw_binding_pending *out);
    int (*pending_by_code)(struct gw_binding_store *s, const char *code,
                           int64_t now_ms, struct gw_binding_pending *out);
    int (*pending_find)(struct gw_binding_store *s, const char *mac,
                        const char *uuid, int64_t now_ms,
                        struct gw_binding_pending *out);
    int (*bind)(struct gw_binding_store *s, struct gw_binding *b);
    int (*claim_issue)(struct gw_binding_store *s, int64_t id, bool *granted);
    int (*allow_reissue)(struct gw_binding_store *s, int64_t id);
    int (*unbind)(struct gw_binding_store *s, const char *client_id,
                  struct gw_binding_revoked *out);
    int (*list)(struct gw_binding_store *s, int64_t after, int limit,
                gw_binding_fn fn, void *arg);
    int (*pending_list)(struct gw_binding_store *s, int64_t now_ms, int limit,
                        gw_binding_pending_fn fn, void *arg);
    int (*revoked_list)(struct gw_binding_store *s, gw_binding_revoked_fn fn,
                        void *arg);
};

/* The head of each backend's own struct. */
struct gw_binding_store {
    const struct gw__binding_ops *ops;
    enum gw_binding_store_kind kind;
    struct gw_bucket log_bucket; /* database errors: a few lines a second */
};

/* The columns every backend selects, in this order, as text. */
#define GW__BINDING_COLS                                                       \
    "id, client_id, mac, uuid, grp, board, serial_number, admitted_by, "       \
    "bound_ms, issued, reissue"
#define GW__BINDING_NCOLS 11
#define GW__PENDING_COLS                                                       \
    "code, challenge, mac, uuid, board, serial_number, peer, created_ms, "     \
    "expires_ms"
#define GW__PENDING_NCOLS 9

/* Tries of a fresh code before giving up (a collision is one in a million
 * per pending activation). */
#define GW__BINDING_CODE_TRIES 16

int gw__binding_sqlite_open(const struct gw_binding_store_options *o,
                            struct gw_binding_store **out);
int gw__binding_pg_open(const struct gw_binding_store_options *o,
                        struct gw_binding_store **out);

/* A uniformly random code of GW_BINDING_CODE_LEN digits, and a challenge of
 * GW_BINDING_CHALLENGE_LEN hex digits, from OpenSSL. 0 or GW_ECRYPTO. */
int gw__binding_code(char out[GW_BINDING_CODE_LEN + 1]);
int gw__binding_challenge(char out[GW_BINDING_CHALLENGE_LEN + 1]);

/* A stored row from its columns' text (NULL for SQL NULL); GW_EIO when a
 * value does not fit or does not parse (a row not written by us). */
int gw__binding_from_text(const char *const *v, struct gw_binding *out);
int gw__binding_pending_from_text(const char *const *v,
                                  struct gw_binding_pending *out);
int gw__binding_revoked_from_text(const char *const *v,
                                  struct gw_binding_revoked *out);

/* "operator" / "hmac" / "lab" back to the enum: 0 or GW_EIO. */
int gw__binding_by_parse(const char *name, enum gw_binding_by *by);

/* A database failure's line (subject "bindings"), at most a few a second;
 * never the connection string. Returns GW_EIO. */
int gw__binding_fail(struct gw_binding_store *s, const char *what,
                     const char *detail);

/* A growing array of rows, for walks that call back only once the
 * database is done with the statement. */
struct gw__binding_rows {
    void *items;
    size_t n, cap, size;
};
/* The next slot (zeroed), or NULL when out of memory. */
void *gw__binding_rows_add(struct gw__binding_rows *r);
void gw__binding_rows_free(struct gw__binding_rows *r);

#endif /* GW_BINDING_INT_H */
