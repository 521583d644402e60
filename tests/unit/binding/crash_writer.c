/*
 * The crash test's helper (test_crash.sh): "write" binds identity after
 * identity, printing each id the store acknowledged, until it is killed;
 * "check" then opens the database (SQLite: PRAGMA integrity_check first)
 * and finds every acknowledged binding under its id.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "gateway/binding/binding.h"

static int open_store(const char *kind, const char *target,
                      struct gw_binding_store **s)
{
    struct gw_binding_store_options o = {0};

    if (strcmp(kind, "sqlite") == 0) {
        o.kind = GW_BINDING_STORE_SQLITE;
        o.path = target;
    } else {
        o.kind = GW_BINDING_STORE_POSTGRESQL;
        o.conninfo = target;
    }
    return gw_binding_store_open(&o, s);
}

static int write_loop(struct gw_binding_store *s, long start)
{
    /* Bounded: the test kills it long before. */
    for (long n = start; n < start + 1000000; n++) {
        struct gw_binding b;
        int rc;

        memset(&b, 0, sizeof(b));
        snprintf(b.mac, sizeof(b.mac), "02:00:00:%02lx:%02lx:%02lx",
                 (n >> 16) & 255, (n >> 8) & 255, n & 255);
        snprintf(b.uuid, sizeof(b.uuid), "crash-%ld", n);
        snprintf(b.client_id, sizeof(b.client_id),
                 "GID_crash@@@02_00_00_%02lx_%02lx_%02lx@@@crash-%ld",
                 (n >> 16) & 255, (n >> 8) & 255, n & 255, n);
        snprintf(b.group, sizeof(b.group), "GID_crash");
        b.by = GW_BINDING_BY_LAB;
        b.bound_ms = n;
        rc = gw_binding_bind(s, &b);
        if (rc != 0) {
            fprintf(stderr, "bind %ld: %s\n", n, gw_strerror(rc));
            return 1;
        }
        /* Acknowledged: the line goes out at once, whole. */
        printf("%lld %s\n", (long long)b.id, b.client_id);
        fflush(stdout);
    }
    return 0;
}

static int integrity(const char *path)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int ok = 0;

    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) ==
            SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        ok = v != NULL && strcmp(v, "ok") == 0;
        printf("integrity_check: %s\n", v != NULL ? v : "(null)");
    } else {
        printf("integrity_check: %s\n", db ? sqlite3_errmsg(db) : "no db");
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return ok;
}

static int check(struct gw_binding_store *s, const char *acked)
{
    FILE *f = fopen(acked, "r");
    char line[256], client_id[GW_CLIENT_ID_MAX + 1];
    long long id;
    long n = 0, bad = 0;

    if (f == NULL) {
        perror(acked);
        return 1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        struct gw_binding b;
        if (sscanf(line, "%lld %128s", &id, client_id) != 2) {
            continue; /* a line cut by the kill was never acknowledged */
        }
        n++;
        if (gw_binding_find_client(s, client_id, &b) != 0 || b.id != id) {
            printf("lost: %lld %s\n", id, client_id);
            bad++;
        }
    }
    fclose(f);
    printf("acknowledged bindings found: %ld of %ld\n", n - bad, n);
    return bad == 0 && n > 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    struct gw_binding_store *s = NULL;
    int rc;

    if (argc != 5 || (strcmp(argv[2], "sqlite") != 0 &&
                      strcmp(argv[2], "postgresql") != 0)) {
        fprintf(stderr,
                "usage: %s write KIND TARGET START | check KIND TARGET FILE\n"
                "  KIND sqlite (TARGET a file) or postgresql (a conninfo)\n",
                argv[0]);
        return 2;
    }
    if (strcmp(argv[1], "check") == 0 && strcmp(argv[2], "sqlite") == 0 &&
        !integrity(argv[3])) {
        return 1;
    }
    if ((rc = open_store(argv[2], argv[3], &s)) != 0) {
        fprintf(stderr, "open: %s\n", gw_strerror(rc));
        return 1;
    }
    if (strcmp(argv[1], "write") == 0) {
        rc = write_loop(s, atol(argv[4]));
    } else {
        rc = check(s, argv[4]);
    }
    gw_binding_store_close(s);
    return rc;
}
