/*
 * The bindings store in one SQLite file: WAL with synchronous=FULL (a
 * change acknowledged survives a crash), prepared statements, and the
 * table constraints that keep the store's promises (binding.h).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common/log.h"
#include "gateway/binding/binding_int.h"

/* "hybw" in the file's header: a file we made, not any SQLite database. */
#define APPLICATION_ID 0x68796277
#define SCHEMA_VERSION 1
/* A second process (an operator's sqlite3) may hold the write lock; the
 * calls are synchronous, so wait only briefly. */
#define BUSY_TIMEOUT_MS 2000

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS bindings ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT," /* never reused */
    " client_id TEXT NOT NULL UNIQUE,"
    " mac TEXT NOT NULL, uuid TEXT NOT NULL,"
    " grp TEXT NOT NULL, board TEXT NOT NULL,"
    " serial_number TEXT NOT NULL,"
    " admitted_by TEXT NOT NULL"
    "  CHECK (admitted_by IN ('operator', 'hmac', 'lab')),"
    " bound_ms INTEGER NOT NULL,"
    " issued INTEGER NOT NULL DEFAULT 0 CHECK (issued IN (0, 1)),"
    " reissue INTEGER NOT NULL DEFAULT 0 CHECK (reissue IN (0, 1)),"
    " UNIQUE (mac, uuid));"
    "CREATE TABLE IF NOT EXISTS pending ("
    " code TEXT NOT NULL UNIQUE, challenge TEXT NOT NULL,"
    " mac TEXT NOT NULL, uuid TEXT NOT NULL,"
    " board TEXT NOT NULL, serial_number TEXT NOT NULL, peer TEXT NOT NULL,"
    " created_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL,"
    " PRIMARY KEY (mac, uuid));"
    /* One device, one binding: a factory serial number binds one
     * identity, so one proof cannot bind many. */
    "CREATE UNIQUE INDEX IF NOT EXISTS bindings_serial ON bindings"
    " (serial_number) WHERE serial_number <> '';"
    "CREATE INDEX IF NOT EXISTS pending_expires ON pending (expires_ms);"
    "CREATE TABLE IF NOT EXISTS revoked ("
    " client_id TEXT PRIMARY KEY, below INTEGER NOT NULL);";

enum stmt {
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_FIND,
    ST_FIND_CLIENT,
    ST_COUNT_MAC,
    ST_PENDING_EXPIRE,
    ST_PENDING_FIND,
    ST_PENDING_CODE,
    ST_PENDING_INSERT,
    ST_PENDING_DELETE,
    ST_BIND,
    ST_CLAIM,
    ST_EXISTS,
    ST_REISSUE,
    ST_UNBIND,
    ST_REVOKE,
    ST_LIST,
    ST_PENDING_LIST,
    ST_REVOKED_LIST,
    ST_COUNT_
};

static const char *const sql[ST_COUNT_] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_FIND] = "SELECT " GW__BINDING_COLS
                " FROM bindings WHERE mac = ?1 AND uuid = ?2",
    [ST_FIND_CLIENT] =
        "SELECT " GW__BINDING_COLS " FROM bindings WHERE client_id = ?1",
    [ST_COUNT_MAC] = "SELECT count(*) FROM bindings WHERE mac = ?1",
    [ST_PENDING_EXPIRE] = "DELETE FROM pending WHERE expires_ms <= ?1",
    [ST_PENDING_FIND] = "SELECT " GW__PENDING_COLS " FROM pending"
                        " WHERE mac = ?1 AND uuid = ?2 AND expires_ms > ?3",
    [ST_PENDING_CODE] = "SELECT " GW__PENDING_COLS
                        " FROM pending WHERE code = ?1 AND expires_ms > ?2",
    /* Either unique key taken (the code, or the identity): no row. */
    [ST_PENDING_INSERT] = "INSERT OR IGNORE INTO pending (" GW__PENDING_COLS
                          ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [ST_PENDING_DELETE] = "DELETE FROM pending WHERE mac = ?1 AND uuid = ?2",
    [ST_BIND] = "INSERT INTO bindings (client_id, mac, uuid, grp, board,"
                " serial_number, admitted_by, bound_ms)"
                " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING id",
    [ST_CLAIM] = "UPDATE bindings SET issued = 1, reissue = 0"
                 " WHERE id = ?1 AND (issued = 0 OR reissue = 1)",
    [ST_EXISTS] = "SELECT 1 FROM bindings WHERE id = ?1",
    [ST_REISSUE] = "UPDATE bindings SET reissue = 1 WHERE id = ?1",
    [ST_UNBIND] = "DELETE FROM bindings WHERE client_id = ?1 RETURNING id",
    [ST_REVOKE] = "INSERT INTO revoked (client_id, below) VALUES (?1, ?2)"
                  " ON CONFLICT (client_id) DO UPDATE"
                  " SET below = max(below, excluded.below) RETURNING below",
    [ST_LIST] = "SELECT " GW__BINDING_COLS
                " FROM bindings WHERE id > ?1 ORDER BY id LIMIT ?2",
    [ST_PENDING_LIST] = "SELECT " GW__PENDING_COLS " FROM pending"
                        " WHERE expires_ms > ?1"
                        " ORDER BY created_ms, rowid LIMIT ?2",
    [ST_REVOKED_LIST] = "SELECT client_id, below FROM revoked"
                        " ORDER BY client_id",
};

struct sqlite_store {
    struct gw_binding_store base;
    sqlite3 *db;
    sqlite3_stmt *st[ST_COUNT_];
};

static struct sqlite_store *of(struct gw_binding_store *s)
{
    return (struct sqlite_store *)s;
}

/* The statement, reset and unbound, ready for its arguments. */
static sqlite3_stmt *prep(struct sqlite_store *q, enum stmt i)
{
    sqlite3_reset(q->st[i]);
    sqlite3_clear_bindings(q->st[i]);
    return q->st[i];
}

static int fail(struct sqlite_store *q, const char *what)
{
    return gw__binding_fail(&q->base, what, sqlite3_errmsg(q->db));
}

/* What a step's error code rc means: GW_EEXIST for a unique key taken,
 * else GW_EIO (logged). */
static int step_error(struct sqlite_store *q, int rc, const char *what)
{
    int ext = sqlite3_extended_errcode(q->db);

    if (rc == SQLITE_CONSTRAINT && (ext == SQLITE_CONSTRAINT_UNIQUE ||
                                    ext == SQLITE_CONSTRAINT_PRIMARYKEY)) {
        return GW_EEXIST;
    }
    return fail(q, what);
}

/* A statement that returns no row: 0, GW_EEXIST on a unique key, GW_EIO. */
static int run(struct sqlite_store *q, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st);

    rc = rc == SQLITE_DONE ? 0 : step_error(q, rc, what);
    sqlite3_reset(st);
    return rc;
}

static void rollback(struct sqlite_store *q)
{
    if (!sqlite3_get_autocommit(q->db)) {
        (void)run(q, prep(q, ST_ROLLBACK), "rollback");
    }
}

/* Text of the statement's current row's columns. */
static void columns(sqlite3_stmt *st, const char **v, int n)
{
    for (int i = 0; i < n; i++) {
        v[i] = (const char *)sqlite3_column_text(st, i);
    }
}

/* One row at most: 0 with *out filled, GW_ENOENT, GW_EIO. */
static int one_binding(struct sqlite_store *q, sqlite3_stmt *st,
                       struct gw_binding *out)
{
    const char *v[GW__BINDING_NCOLS];
    int rc = sqlite3_step(st);

    if (rc == SQLITE_DONE) {
        sqlite3_reset(st);
        return GW_ENOENT;
    }
    if (rc != SQLITE_ROW) {
        rc = fail(q, "reading a binding");
        sqlite3_reset(st);
        return rc;
    }
    columns(st, v, GW__BINDING_NCOLS);
    rc = gw__binding_from_text(v, out);
    sqlite3_reset(st);
    return rc != 0 ? gw__binding_fail(&q->base, "a binding", "not ours") : 0;
}

static int one_pending(struct sqlite_store *q, sqlite3_stmt *st,
                       struct gw_binding_pending *out)
{
    const char *v[GW__PENDING_NCOLS];
    int rc = sqlite3_step(st);

    if (rc == SQLITE_DONE) {
        sqlite3_reset(st);
        return GW_ENOENT;
    }
    if (rc != SQLITE_ROW) {
        rc = fail(q, "reading a pending activation");
        sqlite3_reset(st);
        return rc;
    }
    columns(st, v, GW__PENDING_NCOLS);
    rc = gw__binding_pending_from_text(v, out);
    sqlite3_reset(st);
    return rc != 0
               ? gw__binding_fail(&q->base, "a pending activation", "not ours")
               : 0;
}

static void text(sqlite3_stmt *st, int i, const char *s)
{
    sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
}

/* ---- the operations ------------------------------------------------------ */

static int sq_find(struct gw_binding_store *s, const char *mac,
                   const char *uuid, struct gw_binding *out)
{
    struct sqlite_store *q = of(s);
    sqlite3_stmt *st = prep(q, ST_FIND);

    text(st, 1, mac);
    text(st, 2, uuid);
    return one_binding(q, st, out);
}

static int sq_find_client(struct gw_binding_store *s, const char *client_id,
                          struct gw_binding *out)
{
    struct sqlite_store *q = of(s);
    sqlite3_stmt *st = prep(q, ST_FIND_CLIENT);

    text(st, 1, client_id);
    return one_binding(q, st, out);
}

static int sq_count_mac(struct gw_binding_store *s, const char *mac, int *count)
{
    struct sqlite_store *q = of(s);
    sqlite3_stmt *st = prep(q, ST_COUNT_MAC);
    int rc;

    text(st, 1, mac);
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        rc = fail(q, "counting a mac");
        sqlite3_reset(st);
        return rc;
    }
    *count = sqlite3_column_int(st, 0);
    sqlite3_reset(st);
    return 0;
}

static int sq_pending_find(struct gw_binding_store *s, const char *mac,
                           const char *uuid, int64_t now_ms,
                           struct gw_binding_pending *out)
{
    struct sqlite_store *q = of(s);
    sqlite3_stmt *st = prep(q, ST_PENDING_FIND);

    text(st, 1, mac);
    text(st, 2, uuid);
    sqlite3_bind_int64(st, 3, now_ms);
    return one_pending(q, st, out);
}

static int sq_pending_by_code(struct gw_binding_store *s, const char *code,
                              int64_t now_ms, struct gw_binding_pending *out)
{
    struct sqlite_store *q = of(s);
    sqlite3_stmt *st = prep(q, ST_PENDING_CODE);

    text(st, 1, code);
    sqlite3_bind_int64(st, 2, now_ms);
    return one_pending(q, st, out);
}

/* Inside the transaction: the identity's row, else a new one. */
static int pending_get_locked(struct sqlite_store *q,
                              const struct gw_binding_pending *want,
                              int64_t now_ms, int64_t ttl_ms,
                              struct gw_binding_pending *out)
{
    struct gw_binding_pending p;
    sqlite3_stmt *st = prep(q, ST_PENDING_EXPIRE);
    int rc;

    sqlite3_bind_int64(st, 1, now_ms);
    if ((rc = run(q, st, "deleting expired activations")) != 0) {
        return rc;
    }
    for (int i = 0; i < GW__BINDING_CODE_TRIES; i++) {
        rc = sq_pending_find(&q->base, want->mac, want->uuid, now_ms, out);
        if (rc != GW_ENOENT) {
            return rc;
        }
        p = *want;
        p.created_ms = now_ms;
        p.expires_ms = now_ms + ttl_ms;
        if ((rc = gw__binding_code(p.code)) != 0 ||
            (rc = gw__binding_challenge(p.challenge)) != 0) {
            return rc;
        }
        st = prep(q, ST_PENDING_INSERT);
        text(st, 1, p.code);
        text(st, 2, p.challenge);
        text(st, 3, p.mac);
        text(st, 4, p.uuid);
        text(st, 5, p.board);
        text(st, 6, p.serial_number);
        text(st, 7, p.peer);
        sqlite3_bind_int64(st, 8, p.created_ms);
        sqlite3_bind_int64(st, 9, p.expires_ms);
        if ((rc = run(q, st, "adding a pending activation")) != 0) {
            return rc;
        }
        if (sqlite3_changes(q->db) == 1) {
            *out = p;
            return 0;
        }
        /* The code is some other pending activation's: draw again. */
    }
    return GW_ELIMIT;
}

static int sq_pending_get(struct gw_binding_store *s,
                          const struct gw_binding_pending *want, int64_t now_ms,
                          int64_t ttl_ms, struct gw_binding_pending *out)
{
    struct sqlite_store *q = of(s);
    int rc = run(q, prep(q, ST_BEGIN), "begin");

    if (rc != 0) {
        return rc;
    }
    rc = pending_get_locked(q, want, now_ms, ttl_ms, out);
    if (rc == 0) {
        rc = run(q, prep(q, ST_COMMIT), "commit");
    }
    if (rc != 0) {
        rollback(q);
    }
    return rc;
}

static int sq_bind(struct gw_binding_store *s, struct gw_binding *b)
{
    struct sqlite_store *q = of(s);
    sqlite3_stmt *st;
    int64_t id = 0;
    int rc = run(q, prep(q, ST_BEGIN), "begin");

    if (rc != 0) {
        return rc;
    }
    st = prep(q, ST_PENDING_DELETE);
    text(st, 1, b->mac);
    text(st, 2, b->uuid);
    rc = run(q, st, "deleting a pending activation");
    if (rc == 0) {
        st = prep(q, ST_BIND);
        text(st, 1, b->client_id);
        text(st, 2, b->mac);
        text(st, 3, b->uuid);
        text(st, 4, b->group);
        text(st, 5, b->board);
        text(st, 6, b->serial_number);
        text(st, 7, gw_binding_by_name(b->by));
        sqlite3_bind_int64(st, 8, b->bound_ms);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            id = sqlite3_column_int64(st, 0);
            rc = sqlite3_step(st) == SQLITE_DONE ? 0 : fail(q, "binding");
        } else {
            rc = step_error(q, rc, "binding");
        }
        sqlite3_reset(st);
    }
    if (rc == 0) {
        rc = run(q, prep(q, ST_COMMIT), "commit");
    }
    if (rc != 0) {
        rollback(q);
        return rc;
    }
    b->id = id;
    b->issued = false;
    b->reissue = false;
    return 0;
}

static int exists(struct sqlite_store *q, int64_t id)
{
    sqlite3_stmt *st = prep(q, ST_EXISTS);
    int rc;

    sqlite3_bind_int64(st, 1, id);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc == SQLITE_ROW) {
        return 0;
    }
    return rc == SQLITE_DONE ? GW_ENOENT : fail(q, "finding a binding");
}

static int sq_claim_issue(struct gw_binding_store *s, int64_t id, bool *granted)
{
    struct sqlite_store *q = of(s);
    sqlite3_stmt *st = prep(q, ST_CLAIM);
    int rc;

    sqlite3_bind_int64(st, 1, id);
    if ((rc = run(q, st, "claiming an issue")) != 0) {
        return rc;
    }
    *granted = sqlite3_changes(q->db) == 1;
    return *granted ? 0 : exists(q, id);
}

static int sq_allow_reissue(struct gw_binding_store *s, int64_t id)
{
    struct sqlite_store *q = of(s);
    sqlite3_stmt *st = prep(q, ST_REISSUE);
    int rc;

    sqlite3_bind_int64(st, 1, id);
    if ((rc = run(q, st, "allowing a reissue")) != 0) {
        return rc;
    }
    return sqlite3_changes(q->db) == 1 ? 0 : GW_ENOENT;
}

/* A statement returning one integer in one row; GW_ENOENT for none. */
static int one_int(struct sqlite_store *q, sqlite3_stmt *st, int64_t *v,
                   const char *what)
{
    int rc = sqlite3_step(st);

    if (rc == SQLITE_ROW) {
        *v = sqlite3_column_int64(st, 0);
        rc = sqlite3_step(st) == SQLITE_DONE ? 0 : fail(q, what);
    } else {
        rc = rc == SQLITE_DONE ? GW_ENOENT : fail(q, what);
    }
    sqlite3_reset(st);
    return rc;
}

static int sq_unbind(struct gw_binding_store *s, const char *client_id,
                     struct gw_binding_revoked *out)
{
    struct sqlite_store *q = of(s);
    sqlite3_stmt *st;
    int64_t id = 0, below = 0;
    int rc = run(q, prep(q, ST_BEGIN), "begin");

    if (rc != 0) {
        return rc;
    }
    st = prep(q, ST_UNBIND);
    text(st, 1, client_id);
    rc = one_int(q, st, &id, "unbinding");
    if (rc == 0) {
        st = prep(q, ST_REVOKE);
        text(st, 1, client_id);
        sqlite3_bind_int64(st, 2, id + 1);
        rc = one_int(q, st, &below, "recording a revocation");
        rc = rc == GW_ENOENT ? fail(q, "recording a revocation") : rc;
    }
    if (rc == 0) {
        rc = run(q, prep(q, ST_COMMIT), "commit");
    }
    if (rc != 0) {
        rollback(q);
        return rc;
    }
    memset(out, 0, sizeof(*out));
    snprintf(out->client_id, sizeof(out->client_id), "%s", client_id);
    out->below = below;
    return 0;
}

/* ---- walks --------------------------------------------------------------- */

/* Steps st to its end, turning each row into an item of rows. */
static int collect(struct sqlite_store *q, sqlite3_stmt *st, int ncols,
                   int (*from_text)(const char *const *v, void *item),
                   struct gw__binding_rows *rows, const char *what)
{
    const char *v[GW__BINDING_NCOLS];
    void *item;
    int rc;

    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        columns(st, v, ncols);
        if ((item = gw__binding_rows_add(rows)) == NULL) {
            sqlite3_reset(st);
            return GW_ENOMEM;
        }
        if (from_text(v, item) != 0) {
            sqlite3_reset(st);
            return gw__binding_fail(&q->base, what, "a row not ours");
        }
    }
    rc = rc == SQLITE_DONE ? 0 : fail(q, what);
    sqlite3_reset(st);
    return rc;
}

static int binding_item(const char *const *v, void *item)
{
    return gw__binding_from_text(v, item);
}

static int pending_item(const char *const *v, void *item)
{
    return gw__binding_pending_from_text(v, item);
}

static int revoked_item(const char *const *v, void *item)
{
    return gw__binding_revoked_from_text(v, item);
}

static int sq_list(struct gw_binding_store *s, int64_t after, int limit,
                   gw_binding_fn fn, void *arg)
{
    struct sqlite_store *q = of(s);
    struct gw__binding_rows rows = {.size = sizeof(struct gw_binding)};
    sqlite3_stmt *st = prep(q, ST_LIST);
    int rc;

    sqlite3_bind_int64(st, 1, after);
    sqlite3_bind_int(st, 2, limit);
    rc = collect(q, st, GW__BINDING_NCOLS, binding_item, &rows,
                 "listing bindings");
    for (size_t i = 0; rc == 0 && i < rows.n; i++) {
        fn((struct gw_binding *)rows.items + i, arg);
    }
    rc = rc == 0 ? (int)rows.n : rc;
    gw__binding_rows_free(&rows);
    return rc;
}

static int sq_pending_list(struct gw_binding_store *s, int64_t now_ms,
                           int limit, gw_binding_pending_fn fn, void *arg)
{
    struct sqlite_store *q = of(s);
    struct gw__binding_rows rows = {.size = sizeof(struct gw_binding_pending)};
    sqlite3_stmt *st = prep(q, ST_PENDING_LIST);
    int rc;

    sqlite3_bind_int64(st, 1, now_ms);
    sqlite3_bind_int(st, 2, limit);
    rc = collect(q, st, GW__PENDING_NCOLS, pending_item, &rows,
                 "listing pending activations");
    for (size_t i = 0; rc == 0 && i < rows.n; i++) {
        fn((struct gw_binding_pending *)rows.items + i, arg);
    }
    rc = rc == 0 ? (int)rows.n : rc;
    gw__binding_rows_free(&rows);
    return rc;
}

static int sq_revoked_list(struct gw_binding_store *s, gw_binding_revoked_fn fn,
                           void *arg)
{
    struct sqlite_store *q = of(s);
    struct gw__binding_rows rows = {.size = sizeof(struct gw_binding_revoked)};
    int rc = collect(q, prep(q, ST_REVOKED_LIST), 2, revoked_item, &rows,
                     "listing revocations");

    for (size_t i = 0; rc == 0 && i < rows.n; i++) {
        fn((struct gw_binding_revoked *)rows.items + i, arg);
    }
    rc = rc == 0 ? (int)rows.n : rc;
    gw__binding_rows_free(&rows);
    return rc;
}

/* ---- open and close ------------------------------------------------------ */

static void sq_close(struct gw_binding_store *s)
{
    struct sqlite_store *q = of(s);

    for (int i = 0; i < ST_COUNT_; i++) {
        sqlite3_finalize(q->st[i]);
    }
    sqlite3_close_v2(q->db);
    free(q);
}

static const struct gw__binding_ops sqlite_ops = {
    .close = sq_close,
    .find = sq_find,
    .find_client = sq_find_client,
    .count_mac = sq_count_mac,
    .pending_get = sq_pending_get,
    .pending_by_code = sq_pending_by_code,
    .pending_find = sq_pending_find,
    .bind = sq_bind,
    .claim_issue = sq_claim_issue,
    .allow_reissue = sq_allow_reissue,
    .unbind = sq_unbind,
    .list = sq_list,
    .pending_list = sq_pending_list,
    .revoked_list = sq_revoked_list,
};

/* One integer from a statement of text (a pragma, a count); -1 on error. */
static long long query_int(sqlite3 *db, const char *text_sql)
{
    sqlite3_stmt *st = NULL;
    long long v = -1;

    if (sqlite3_prepare_v2(db, text_sql, -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        v = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    return v;
}

/* Inside BEGIN IMMEDIATE: a new file gets the schema and our marks; one of
 * ours is checked; anything else is refused. */
static const char *make_schema(sqlite3 *db)
{
    long long app = query_int(db, "PRAGMA application_id");
    long long version = query_int(db, "PRAGMA user_version");
    long long tables = query_int(db, "SELECT count(*) FROM sqlite_schema");
    char set[96];

    if (app < 0 || version < 0 || tables < 0) {
        return NULL; /* the database's own words say why */
    }
    if (app == 0 && tables == 0) {
        if (sqlite3_exec(db, schema, NULL, NULL, NULL) != SQLITE_OK) {
            return NULL;
        }
        snprintf(set, sizeof(set),
                 "PRAGMA application_id = %d; PRAGMA user_version = %d",
                 APPLICATION_ID, SCHEMA_VERSION);
        return sqlite3_exec(db, set, NULL, NULL, NULL) == SQLITE_OK ? "" : NULL;
    }
    if (app != APPLICATION_ID) {
        return "not a bindings store of hybridgw (another program's database)";
    }
    if (version != SCHEMA_VERSION) {
        return "a bindings store of another hybridgw version";
    }
    return "";
}

static int open_fail(sqlite3 *db, const char *path, const char *why)
{
    gw_log(GW_LOG_ERROR, "bindings", "sqlite: cannot open %s: %s", path,
           why != NULL ? why : (db != NULL ? sqlite3_errmsg(db) : "no memory"));
    return GW_ECONFIG;
}

static int setup(struct sqlite_store *q, const char *path)
{
    const char *why;
    sqlite3_stmt *st = NULL;
    bool wal;

    sqlite3_busy_timeout(q->db, BUSY_TIMEOUT_MS);
    /* journal_mode answers with the mode it is in: a file system without
     * shared memory stays in another, and then nothing is promised. */
    if (sqlite3_prepare_v2(q->db, "PRAGMA journal_mode = WAL", -1, &st, NULL) !=
            SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        return open_fail(q->db, path, NULL);
    }
    wal = sqlite3_strnicmp((const char *)sqlite3_column_text(st, 0), "wal",
                           4) == 0;
    sqlite3_finalize(st);
    if (!wal) {
        return open_fail(q->db, path, "cannot use a write-ahead log there");
    }
    if (sqlite3_exec(q->db, "PRAGMA synchronous = FULL", NULL, NULL, NULL) !=
            SQLITE_OK ||
        sqlite3_exec(q->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        return open_fail(q->db, path, NULL);
    }
    why = make_schema(q->db);
    if (why == NULL || why[0] != '\0') {
        int rc = open_fail(q->db, path, why);
        sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
        return rc;
    }
    if (sqlite3_exec(q->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        return open_fail(q->db, path, NULL);
    }
    for (int i = 0; i < ST_COUNT_; i++) {
        if (sqlite3_prepare_v3(q->db, sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                               &q->st[i], NULL) != SQLITE_OK) {
            return open_fail(q->db, path, NULL);
        }
    }
    return 0;
}

int gw__binding_sqlite_open(const struct gw_binding_store_options *o,
                            struct gw_binding_store **out)
{
    struct sqlite_store *q = calloc(1, sizeof(*q));
    int fd, rc;

    if (q == NULL) {
        return GW_ENOMEM;
    }
    q->base.ops = &sqlite_ops;
    q->base.kind = GW_BINDING_STORE_SQLITE;
    /* Made by us, readable by us only: SQLite gives its -wal and -shm
     * files the database file's mode. */
    fd = open(o->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) {
        close(fd);
    }
    rc = sqlite3_open_v2(o->path, &q->db,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        rc = open_fail(q->db, o->path, NULL);
    } else {
        rc = setup(q, o->path);
    }
    if (rc != 0) {
        sq_close(&q->base);
        return rc;
    }
    *out = &q->base;
    return 0;
}
