/*
 * The bindings store in PostgreSQL, shared by several instances: the
 * schema of binding_sqlite.c, prepared statements, bind and unbind in
 * transactions, the issue claimed by one conditional UPDATE, and a new
 * connection at the next call once one broke.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "common/log.h"
#include "gateway/binding/binding_int.h"

#define SCHEMA_VERSION 1
/* Taken while the tables are made: instances starting together would
 * otherwise race in CREATE TABLE IF NOT EXISTS. "hybw". */
#define SCHEMA_LOCK "1752785527"

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS hybridgw_bindings_schema ("
    " version integer NOT NULL);"
    "CREATE TABLE IF NOT EXISTS bindings ("
    " id bigserial PRIMARY KEY," /* a sequence: never reused */
    " client_id text NOT NULL UNIQUE,"
    " mac text NOT NULL, uuid text NOT NULL,"
    " grp text NOT NULL, board text NOT NULL,"
    " serial_number text NOT NULL,"
    " admitted_by text NOT NULL"
    "  CHECK (admitted_by IN ('operator', 'hmac', 'lab')),"
    " bound_ms bigint NOT NULL,"
    " issued smallint NOT NULL DEFAULT 0 CHECK (issued IN (0, 1)),"
    " reissue smallint NOT NULL DEFAULT 0 CHECK (reissue IN (0, 1)),"
    " UNIQUE (mac, uuid));"
    "CREATE TABLE IF NOT EXISTS pending ("
    " code text NOT NULL UNIQUE, challenge text NOT NULL,"
    " mac text NOT NULL, uuid text NOT NULL,"
    " board text NOT NULL, serial_number text NOT NULL, peer text NOT NULL,"
    " created_ms bigint NOT NULL, expires_ms bigint NOT NULL,"
    " PRIMARY KEY (mac, uuid));"
    /* One device, one binding: a factory serial number binds one
     * identity, so one proof cannot bind many. */
    "CREATE UNIQUE INDEX IF NOT EXISTS bindings_serial ON bindings"
    " (serial_number) WHERE serial_number <> '';"
    "CREATE INDEX IF NOT EXISTS pending_expires ON pending (expires_ms);"
    "CREATE TABLE IF NOT EXISTS revoked ("
    " client_id text PRIMARY KEY, below bigint NOT NULL);"
    "INSERT INTO hybridgw_bindings_schema (version) SELECT 1"
    " WHERE NOT EXISTS (SELECT 1 FROM hybridgw_bindings_schema);";

enum stmt {
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

static const struct {
    const char *name, *sql;
} stmts[ST_COUNT_] = {
    [ST_FIND] = {"gw_find", "SELECT " GW__BINDING_COLS
                            " FROM bindings WHERE mac = $1 AND uuid = $2"},
    [ST_FIND_CLIENT] = {"gw_find_client",
                        "SELECT " GW__BINDING_COLS
                        " FROM bindings WHERE client_id = $1"},
    [ST_COUNT_MAC] = {"gw_count_mac",
                      "SELECT count(*) FROM bindings WHERE mac = $1"},
    [ST_PENDING_EXPIRE] = {"gw_pending_expire",
                           "DELETE FROM pending WHERE expires_ms <= $1"},
    [ST_PENDING_FIND] = {"gw_pending_find",
                         "SELECT " GW__PENDING_COLS " FROM pending"
                         " WHERE mac = $1 AND uuid = $2 AND expires_ms > $3"},
    [ST_PENDING_CODE] = {"gw_pending_code",
                         "SELECT " GW__PENDING_COLS " FROM pending"
                         " WHERE code = $1 AND expires_ms > $2"},
    /* Either unique key taken (the code, or the identity): no row. */
    [ST_PENDING_INSERT] = {"gw_pending_insert",
                           "INSERT INTO pending (" GW__PENDING_COLS ")"
                           " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
                           " ON CONFLICT DO NOTHING RETURNING code"},
    [ST_PENDING_DELETE] = {"gw_pending_delete",
                           "DELETE FROM pending"
                           " WHERE mac = $1 AND uuid = $2"},
    [ST_BIND] = {"gw_bind",
                 "INSERT INTO bindings (client_id, mac, uuid, grp, board,"
                 " serial_number, admitted_by, bound_ms)"
                 " VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id"},
    [ST_CLAIM] = {"gw_claim", "UPDATE bindings SET issued = 1, reissue = 0"
                              " WHERE id = $1 AND (issued = 0 OR reissue = 1)"},
    [ST_EXISTS] = {"gw_exists", "SELECT 1 FROM bindings WHERE id = $1"},
    [ST_REISSUE] = {"gw_reissue",
                    "UPDATE bindings SET reissue = 1 WHERE id = $1"},
    [ST_UNBIND] = {"gw_unbind",
                   "DELETE FROM bindings WHERE client_id = $1 RETURNING id"},
    [ST_REVOKE] = {"gw_revoke",
                   "INSERT INTO revoked (client_id, below) VALUES ($1, $2)"
                   " ON CONFLICT (client_id) DO UPDATE"
                   " SET below = GREATEST(revoked.below, EXCLUDED.below)"
                   " RETURNING below"},
    [ST_LIST] = {"gw_list", "SELECT " GW__BINDING_COLS " FROM bindings"
                            " WHERE id > $1 ORDER BY id LIMIT $2"},
    [ST_PENDING_LIST] = {"gw_pending_list",
                         "SELECT " GW__PENDING_COLS " FROM pending"
                         " WHERE expires_ms > $1"
                         " ORDER BY created_ms, mac, uuid LIMIT $2"},
    [ST_REVOKED_LIST] = {"gw_revoked_list",
                         "SELECT client_id, below FROM revoked"
                         " ORDER BY client_id"},
};

struct pg_store {
    struct gw_binding_store base;
    PGconn *conn;
    bool ready;     /* connected, schema checked, statements prepared */
    char *conninfo; /* a secret: never logged */
};

static struct pg_store *of(struct gw_binding_store *s)
{
    return (struct pg_store *)s;
}

/* libpq's message on one line. */
static const char *words(const char *msg, char *buf, size_t size)
{
    size_t n;

    snprintf(buf, size, "%s", msg != NULL ? msg : "");
    for (char *c = buf; *c != '\0'; c++) {
        *c = *c == '\n' ? ' ' : *c;
    }
    n = strlen(buf);
    while (n > 0 && buf[n - 1] == ' ') {
        buf[--n] = '\0';
    }
    return buf;
}

/* The server's notices ("already exists, skipping") are not ours to
 * print: libpq would write them to stderr. */
static void quiet(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

static int fail(struct pg_store *p, const char *what, const PGresult *res)
{
    char buf[512];
    const char *msg = res != NULL ? PQresultErrorMessage(res) : NULL;

    if (msg == NULL || msg[0] == '\0') {
        msg = PQerrorMessage(p->conn);
    }
    return gw__binding_fail(&p->base, what, words(msg, buf, sizeof(buf)));
}

/* One statement's result when it ran, else NULL with *rc GW_EEXIST (a
 * unique key taken) or GW_EIO (logged). */
static PGresult *exec(struct pg_store *p, enum stmt i, int n,
                      const char *const *v, int *rc, const char *what)
{
    PGresult *res = PQexecPrepared(p->conn, stmts[i].name, n, v, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(res);
    const char *state;

    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
        *rc = 0;
        return res;
    }
    state = res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    if (state != NULL && strcmp(state, "23505") == 0) {
        *rc = GW_EEXIST;
    } else {
        *rc = fail(p, what, res);
    }
    PQclear(res);
    return NULL;
}

/* A command without parameters (BEGIN, COMMIT, ROLLBACK). */
static int plain(struct pg_store *p, const char *command)
{
    PGresult *res = PQexec(p->conn, command);
    int rc =
        PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : fail(p, command, res);

    PQclear(res);
    return rc;
}

static void rollback(struct pg_store *p)
{
    if (PQstatus(p->conn) == CONNECTION_OK &&
        PQtransactionStatus(p->conn) != PQTRANS_IDLE) {
        (void)plain(p, "ROLLBACK");
    }
}

#define I64(buf, x)                                                            \
    (snprintf((buf), sizeof(buf), "%lld", (long long)(x)), (buf))

/* ---- connecting ---------------------------------------------------------- */

/* A new connection with the tables made and the statements prepared:
 * NULL, or why not (the database's words are in PQerrorMessage). */
static const char *prepare_all(struct pg_store *p)
{
    PGresult *res;
    bool ok;

    res =
        PQexec(p->conn, "BEGIN; SELECT pg_advisory_xact_lock(" SCHEMA_LOCK ")");
    ok = PQresultStatus(res) == PGRES_TUPLES_OK;
    PQclear(res);
    if (ok) {
        res = PQexec(p->conn, schema);
        ok = PQresultStatus(res) == PGRES_COMMAND_OK;
        PQclear(res);
    }
    if (!ok) {
        rollback(p);
        return "";
    }
    res =
        PQexec(p->conn, "COMMIT; SELECT version FROM hybridgw_bindings_schema");
    ok = PQresultStatus(res) == PGRES_TUPLES_OK;
    if (ok && (PQntuples(res) != 1 ||
               atoi(PQgetvalue(res, 0, 0)) != SCHEMA_VERSION)) {
        PQclear(res);
        return "a bindings store of another hybridgw version";
    }
    PQclear(res);
    if (!ok) {
        return "";
    }
    for (int i = 0; i < ST_COUNT_; i++) {
        res = PQprepare(p->conn, stmts[i].name, stmts[i].sql, 0, NULL);
        ok = PQresultStatus(res) == PGRES_COMMAND_OK;
        PQclear(res);
        if (!ok) {
            return ""; /* a table of that name that is not ours */
        }
    }
    return NULL;
}

/* Connects; returns NULL or why not. */
static const char *connect_pg(struct pg_store *p, char *buf, size_t size)
{
    /* Keywords before dbname are defaults the conninfo may override. */
    static const char *const keys[] = {
        "connect_timeout", "fallback_application_name", "dbname", NULL};
    const char *values[] = {"10", "hybridgw", p->conninfo, NULL};
    const char *why;

    PQfinish(p->conn);
    p->ready = false;
    p->conn = PQconnectdbParams(keys, values, 1);
    if (p->conn == NULL) {
        return "out of memory";
    }
    if (PQstatus(p->conn) != CONNECTION_OK) {
        return words(PQerrorMessage(p->conn), buf, size);
    }
    PQsetNoticeProcessor(p->conn, quiet, NULL);
    why = prepare_all(p);
    if (why != NULL) {
        return why[0] != '\0' ? why : words(PQerrorMessage(p->conn), buf, size);
    }
    p->ready = true;
    return NULL;
}

/* Before each call: a broken connection is made again. 0 or GW_EIO. */
static int ready(struct pg_store *p)
{
    char buf[512];
    const char *why;

    if (p->ready && PQstatus(p->conn) == CONNECTION_OK) {
        return 0;
    }
    why = connect_pg(p, buf, sizeof(buf));
    if (why != NULL) {
        return gw__binding_fail(&p->base, "reconnecting", why);
    }
    gw_log(GW_LOG_INFO, "bindings", "postgresql: connected again");
    return 0;
}

/* ---- the operations ------------------------------------------------------ */

/* At most one row of a select of GW__BINDING_COLS. */
static int one_binding(struct pg_store *p, enum stmt i, int n,
                       const char *const *v, struct gw_binding *out)
{
    const char *col[GW__BINDING_NCOLS];
    PGresult *res;
    int rc = ready(p);

    if (rc != 0 || (res = exec(p, i, n, v, &rc, "finding a binding")) == NULL) {
        return rc;
    }
    if (PQntuples(res) == 0) {
        rc = GW_ENOENT;
    } else {
        for (int c = 0; c < GW__BINDING_NCOLS; c++) {
            col[c] = PQgetisnull(res, 0, c) ? NULL : PQgetvalue(res, 0, c);
        }
        rc = gw__binding_from_text(col, out) != 0
                 ? gw__binding_fail(&p->base, "a binding", "a row not ours")
                 : 0;
    }
    PQclear(res);
    return rc;
}

static int one_pending(struct pg_store *p, enum stmt i, int n,
                       const char *const *v, struct gw_binding_pending *out)
{
    const char *col[GW__PENDING_NCOLS];
    PGresult *res;
    int rc = ready(p);

    if (rc != 0 ||
        (res = exec(p, i, n, v, &rc, "finding a pending activation")) == NULL) {
        return rc;
    }
    if (PQntuples(res) == 0) {
        rc = GW_ENOENT;
    } else {
        for (int c = 0; c < GW__PENDING_NCOLS; c++) {
            col[c] = PQgetisnull(res, 0, c) ? NULL : PQgetvalue(res, 0, c);
        }
        rc = gw__binding_pending_from_text(col, out) != 0
                 ? gw__binding_fail(&p->base, "a pending activation",
                                    "a row not ours")
                 : 0;
    }
    PQclear(res);
    return rc;
}

static int pg_find(struct gw_binding_store *s, const char *mac,
                   const char *uuid, struct gw_binding *out)
{
    const char *v[] = {mac, uuid};

    return one_binding(of(s), ST_FIND, 2, v, out);
}

static int pg_find_client(struct gw_binding_store *s, const char *client_id,
                          struct gw_binding *out)
{
    const char *v[] = {client_id};

    return one_binding(of(s), ST_FIND_CLIENT, 1, v, out);
}

static int pg_count_mac(struct gw_binding_store *s, const char *mac, int *count)
{
    struct pg_store *p = of(s);
    const char *v[] = {mac};
    PGresult *res;
    int rc = ready(p);

    if (rc != 0 ||
        (res = exec(p, ST_COUNT_MAC, 1, v, &rc, "counting a mac")) == NULL) {
        return rc;
    }
    *count = atoi(PQgetvalue(res, 0, 0));
    PQclear(res);
    return 0;
}

static int pg_pending_find(struct gw_binding_store *s, const char *mac,
                           const char *uuid, int64_t now_ms,
                           struct gw_binding_pending *out)
{
    char now[24];
    const char *v[] = {mac, uuid, I64(now, now_ms)};

    return one_pending(of(s), ST_PENDING_FIND, 3, v, out);
}

static int pg_pending_by_code(struct gw_binding_store *s, const char *code,
                              int64_t now_ms, struct gw_binding_pending *out)
{
    char now[24];
    const char *v[] = {code, I64(now, now_ms)};

    return one_pending(of(s), ST_PENDING_CODE, 2, v, out);
}

/* Another instance may add the identity's row at the same time: the insert
 * then adds nothing and the next turn finds that row. */
static int pg_pending_get(struct gw_binding_store *s,
                          const struct gw_binding_pending *want, int64_t now_ms,
                          int64_t ttl_ms, struct gw_binding_pending *out)
{
    struct pg_store *p = of(s);
    struct gw_binding_pending n;
    char now[24], created[24], expires[24];
    const char *v[9];
    PGresult *res;
    int rc = ready(p), rows;

    v[0] = I64(now, now_ms);
    if (rc != 0 || (res = exec(p, ST_PENDING_EXPIRE, 1, v, &rc,
                               "deleting expired activations")) == NULL) {
        return rc;
    }
    PQclear(res);
    for (int i = 0; i < GW__BINDING_CODE_TRIES; i++) {
        rc = pg_pending_find(s, want->mac, want->uuid, now_ms, out);
        if (rc != GW_ENOENT) {
            return rc;
        }
        n = *want;
        n.created_ms = now_ms;
        n.expires_ms = now_ms + ttl_ms;
        if ((rc = gw__binding_code(n.code)) != 0 ||
            (rc = gw__binding_challenge(n.challenge)) != 0) {
            return rc;
        }
        v[0] = n.code;
        v[1] = n.challenge;
        v[2] = n.mac;
        v[3] = n.uuid;
        v[4] = n.board;
        v[5] = n.serial_number;
        v[6] = n.peer;
        v[7] = I64(created, n.created_ms);
        v[8] = I64(expires, n.expires_ms);
        res = exec(p, ST_PENDING_INSERT, 9, v, &rc,
                   "adding a pending activation");
        if (res == NULL) {
            return rc;
        }
        rows = PQntuples(res);
        PQclear(res);
        if (rows == 1) {
            *out = n;
            return 0;
        }
    }
    return GW_ELIMIT;
}

static int pg_bind(struct gw_binding_store *s, struct gw_binding *b)
{
    struct pg_store *p = of(s);
    char bound[24];
    const char *v[] = {b->client_id,
                       b->mac,
                       b->uuid,
                       b->group,
                       b->board,
                       b->serial_number,
                       gw_binding_by_name(b->by),
                       I64(bound, b->bound_ms)};
    int64_t id = 0;
    PGresult *res;
    int rc = ready(p);

    if (rc != 0 || (rc = plain(p, "BEGIN")) != 0) {
        return rc;
    }
    res = exec(p, ST_PENDING_DELETE, 2, v + 1, &rc,
               "deleting a pending activation");
    PQclear(res);
    if (rc == 0 && (res = exec(p, ST_BIND, 8, v, &rc, "binding")) != NULL) {
        id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        PQclear(res);
    }
    if (rc == 0) {
        rc = plain(p, "COMMIT");
    }
    if (rc != 0) {
        rollback(p);
        return rc;
    }
    b->id = id;
    b->issued = false;
    b->reissue = false;
    return 0;
}

/* An UPDATE by id that changed nothing: GW_ENOENT unless the row is there. */
static int exists(struct pg_store *p, const char *const *v)
{
    PGresult *res = NULL;
    int rc;

    if ((res = exec(p, ST_EXISTS, 1, v, &rc, "finding a binding")) == NULL) {
        return rc;
    }
    rc = PQntuples(res) == 1 ? 0 : GW_ENOENT;
    PQclear(res);
    return rc;
}

static int pg_claim_issue(struct gw_binding_store *s, int64_t id, bool *granted)
{
    struct pg_store *p = of(s);
    char ids[24];
    const char *v[] = {I64(ids, id)};
    PGresult *res;
    int rc = ready(p);

    if (rc != 0 ||
        (res = exec(p, ST_CLAIM, 1, v, &rc, "claiming an issue")) == NULL) {
        return rc;
    }
    *granted = strcmp(PQcmdTuples(res), "1") == 0;
    PQclear(res);
    return *granted ? 0 : exists(p, v);
}

static int pg_allow_reissue(struct gw_binding_store *s, int64_t id)
{
    struct pg_store *p = of(s);
    char ids[24];
    const char *v[] = {I64(ids, id)};
    PGresult *res;
    int rc = ready(p);

    if (rc != 0 ||
        (res = exec(p, ST_REISSUE, 1, v, &rc, "allowing a reissue")) == NULL) {
        return rc;
    }
    rc = strcmp(PQcmdTuples(res), "1") == 0 ? 0 : GW_ENOENT;
    PQclear(res);
    return rc;
}

static int pg_unbind(struct gw_binding_store *s, const char *client_id,
                     struct gw_binding_revoked *out)
{
    struct pg_store *p = of(s);
    char next[24];
    const char *v[] = {client_id, NULL};
    int64_t below = 0;
    PGresult *res;
    int rc = ready(p);

    if (rc != 0 || (rc = plain(p, "BEGIN")) != 0) {
        return rc;
    }
    res = exec(p, ST_UNBIND, 1, v, &rc, "unbinding");
    if (res != NULL && PQntuples(res) == 0) {
        rc = GW_ENOENT;
    } else if (res != NULL) {
        v[1] = I64(next, strtoll(PQgetvalue(res, 0, 0), NULL, 10) + 1);
    }
    PQclear(res);
    if (rc == 0 && (res = exec(p, ST_REVOKE, 2, v, &rc,
                               "recording a revocation")) != NULL) {
        below = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        PQclear(res);
    }
    if (rc == 0) {
        rc = plain(p, "COMMIT");
    }
    if (rc != 0) {
        rollback(p);
        return rc;
    }
    memset(out, 0, sizeof(*out));
    snprintf(out->client_id, sizeof(out->client_id), "%s", client_id);
    out->below = below;
    return 0;
}

/* ---- walks --------------------------------------------------------------- */

/* Runs a select and calls each(row's text, arg) for its rows in order;
 * returns the count or a negative GW_E*. */
static int walk(struct pg_store *p, enum stmt i, int n, const char *const *v,
                int ncols, int (*each)(const char *const *col, void *arg),
                void *arg, const char *what)
{
    const char *col[GW__BINDING_NCOLS];
    PGresult *res;
    int rc = ready(p), rows;

    if (rc != 0 || (res = exec(p, i, n, v, &rc, what)) == NULL) {
        return rc;
    }
    rows = PQntuples(res);
    for (int r = 0; r < rows && rc == 0; r++) {
        for (int c = 0; c < ncols; c++) {
            col[c] = PQgetisnull(res, r, c) ? NULL : PQgetvalue(res, r, c);
        }
        rc = each(col, arg);
    }
    PQclear(res);
    return rc != 0 ? gw__binding_fail(&p->base, what, "a row not ours") : rows;
}

struct walk_fn {
    void *fn;
    void *arg;
};

static int each_binding(const char *const *col, void *arg)
{
    struct walk_fn *w = arg;
    struct gw_binding b;

    if (gw__binding_from_text(col, &b) != 0) {
        return GW_EIO;
    }
    ((gw_binding_fn)w->fn)(&b, w->arg);
    return 0;
}

static int each_pending(const char *const *col, void *arg)
{
    struct walk_fn *w = arg;
    struct gw_binding_pending pe;

    if (gw__binding_pending_from_text(col, &pe) != 0) {
        return GW_EIO;
    }
    ((gw_binding_pending_fn)w->fn)(&pe, w->arg);
    return 0;
}

static int each_revoked(const char *const *col, void *arg)
{
    struct walk_fn *w = arg;
    struct gw_binding_revoked r;

    if (gw__binding_revoked_from_text(col, &r) != 0) {
        return GW_EIO;
    }
    ((gw_binding_revoked_fn)w->fn)(&r, w->arg);
    return 0;
}

static int pg_list(struct gw_binding_store *s, int64_t after, int limit,
                   gw_binding_fn fn, void *arg)
{
    char a[24], l[24];
    const char *v[] = {I64(a, after), I64(l, limit)};
    struct walk_fn w = {.fn = (void *)fn, .arg = arg};

    return walk(of(s), ST_LIST, 2, v, GW__BINDING_NCOLS, each_binding, &w,
                "listing bindings");
}

static int pg_pending_list(struct gw_binding_store *s, int64_t now_ms,
                           int limit, gw_binding_pending_fn fn, void *arg)
{
    char a[24], l[24];
    const char *v[] = {I64(a, now_ms), I64(l, limit)};
    struct walk_fn w = {.fn = (void *)fn, .arg = arg};

    return walk(of(s), ST_PENDING_LIST, 2, v, GW__PENDING_NCOLS, each_pending,
                &w, "listing pending activations");
}

static int pg_revoked_list(struct gw_binding_store *s, gw_binding_revoked_fn fn,
                           void *arg)
{
    struct walk_fn w = {.fn = (void *)fn, .arg = arg};

    return walk(of(s), ST_REVOKED_LIST, 0, NULL, 2, each_revoked, &w,
                "listing revocations");
}

/* ---- open and close ------------------------------------------------------ */

static void pg_close(struct gw_binding_store *s)
{
    struct pg_store *p = of(s);

    PQfinish(p->conn);
    if (p->conninfo != NULL) {
        memset(p->conninfo, 0, strlen(p->conninfo));
        free(p->conninfo);
    }
    free(p);
}

static const struct gw__binding_ops pg_ops = {
    .close = pg_close,
    .find = pg_find,
    .find_client = pg_find_client,
    .count_mac = pg_count_mac,
    .pending_get = pg_pending_get,
    .pending_by_code = pg_pending_by_code,
    .pending_find = pg_pending_find,
    .bind = pg_bind,
    .claim_issue = pg_claim_issue,
    .allow_reissue = pg_allow_reissue,
    .unbind = pg_unbind,
    .list = pg_list,
    .pending_list = pg_pending_list,
    .revoked_list = pg_revoked_list,
};

int gw__binding_pg_open(const struct gw_binding_store_options *o,
                        struct gw_binding_store **out)
{
    struct pg_store *p = calloc(1, sizeof(*p));
    char buf[512];
    const char *why;

    if (p == NULL || (p->conninfo = strdup(o->conninfo != NULL ? o->conninfo
                                                               : "")) == NULL) {
        free(p);
        return GW_ENOMEM;
    }
    p->base.ops = &pg_ops;
    p->base.kind = GW_BINDING_STORE_POSTGRESQL;
    why = connect_pg(p, buf, sizeof(buf));
    if (why != NULL) {
        gw_log(GW_LOG_ERROR, "bindings", "postgresql: cannot open: %s", why);
        pg_close(&p->base);
        return GW_ECONFIG;
    }
    *out = &p->base;
    return 0;
}
