/*
 * Device bindings: which device identities an operator (or a device's own
 * proof) has admitted, the activations still waiting for that, and the
 * bindings undone. Stored in SQLite (one file) or PostgreSQL (several
 * instances); docs/protocol.md section "Activation" says how they are used.
 */
#ifndef GW_BINDING_H
#define GW_BINDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/client_id.h"
#include "codec/ota_request.h"
#include "common/error.h"
#include "common/mqtt_link.h"

#define GW_BINDING_CODE_LEN      6  /* decimal digits the device shows */
#define GW_BINDING_CHALLENGE_LEN 32 /* hex characters */
#define GW_BINDING_SERIAL_MAX    64 /* Serial-Number: a factory serial */
#define GW_BINDING_GROUP_MAX     GW_CLIENT_ID_MAX
#define GW_BINDING_PEER_MAX      46 /* an IPv6 address as text */

enum gw_binding_store_kind {
    GW_BINDING_STORE_SQLITE,
    GW_BINDING_STORE_POSTGRESQL,
};

/* Who admitted a binding. */
enum gw_binding_by {
    GW_BINDING_BY_OPERATOR, /* the API or the page, by the shown code */
    GW_BINDING_BY_HMAC,     /* the device, by its serial number's HMAC */
    GW_BINDING_BY_LAB,      /* ota.activation "off": any check */
};

struct gw_binding {
    /* Grows with every binding made, never reused: the credentials of a
     * binding carry it, so that those of an undone one stay refused. */
    int64_t id;
    char client_id[GW_CLIENT_ID_MAX + 1]; /* GROUP@@@MAC@@@UUID */
    char mac[18];                         /* lowercase, colon-separated */
    char uuid[GW_OTA_UUID_MAX + 1];
    char group[GW_BINDING_GROUP_MAX + 1];
    char board[GW_OTA_BOARD_MAX + 1];
    char serial_number[GW_BINDING_SERIAL_MAX + 1]; /* "" unless by HMAC */
    enum gw_binding_by by;
    int64_t bound_ms; /* wall clock, ms since the epoch */
    bool issued;      /* its credentials were handed out */
    bool reissue;     /* a fresh proof lets the next check have them again */
};

/* An activation waiting for its binding: a device checked in unknown. */
struct gw_binding_pending {
    char code[GW_BINDING_CODE_LEN + 1];           /* unique among pending */
    char challenge[GW_BINDING_CHALLENGE_LEN + 1]; /* random, hex */
    char mac[18];
    char uuid[GW_OTA_UUID_MAX + 1];
    char board[GW_OTA_BOARD_MAX + 1];
    char serial_number[GW_BINDING_SERIAL_MAX + 1]; /* "" if none was sent */
    char peer[GW_BINDING_PEER_MAX + 1];            /* the check's address */
    int64_t created_ms, expires_ms;                /* wall clock */
};

/* A binding undone: credentials of client_id with a binding id below
 * `below` are refused by the broker plugin. */
struct gw_binding_revoked {
    char client_id[GW_CLIENT_ID_MAX + 1];
    int64_t below;
};

struct gw_binding_store_options {
    enum gw_binding_store_kind kind;
    const char *path;     /* SQLite: the database file (made if absent) */
    const char *conninfo; /* PostgreSQL: a libpq connection string */
};

struct gw_binding_store;

/*
 * Opens the store and makes its tables if they are not there (SQLite in
 * WAL mode with synchronous=FULL: a change acknowledged survives a crash).
 * Returns 0, GW_ECONFIG (cannot open or not a store of ours; logged with
 * the database's words) or GW_ENOMEM.
 */
GW_MUST_CHECK int
gw_binding_store_open(const struct gw_binding_store_options *o,
                      struct gw_binding_store **out);

void gw_binding_store_close(struct gw_binding_store *s);

/*
 * Every call below is one statement or one transaction, synchronous.
 * Returns 0, GW_ENOENT (no such row), GW_EEXIST (as documented), GW_EINVAL
 * (a NULL or over-long argument) or GW_EIO (the database failed; logged,
 * rate-limited, and the store reconnects to PostgreSQL on the next call).
 */

/* The binding of one identity, by (mac, uuid) or by client id. */
GW_MUST_CHECK int gw_binding_find(struct gw_binding_store *s, const char *mac,
                                  const char *uuid, struct gw_binding *out);
GW_MUST_CHECK int gw_binding_find_client(struct gw_binding_store *s,
                                         const char *client_id,
                                         struct gw_binding *out);

/* How many bindings hold mac (two or more: the MAC is ambiguous). */
GW_MUST_CHECK int gw_binding_count_mac(struct gw_binding_store *s,
                                       const char *mac, int *count);

/*
 * The pending activation of (want->mac, want->uuid) if one is unexpired
 * at now_ms, else a new one: a fresh code (uniformly random, unique among
 * pending ones, never leading to a guessable sequence) and challenge from
 * the OpenSSL generator, want's board, serial_number and peer, expiring
 * at now_ms + ttl_ms. Expired rows are deleted on the way. *out is the
 * row as stored. Also GW_ECRYPTO (the generator failed) or GW_ELIMIT (no
 * free code found in a few draws: nearly every code is pending).
 */
GW_MUST_CHECK int gw_binding_pending_get(struct gw_binding_store *s,
                                         const struct gw_binding_pending *want,
                                         int64_t now_ms, int64_t ttl_ms,
                                         struct gw_binding_pending *out);

/* The unexpired pending activation with this code, or of this identity. */
GW_MUST_CHECK int gw_binding_pending_by_code(struct gw_binding_store *s,
                                             const char *code, int64_t now_ms,
                                             struct gw_binding_pending *out);
GW_MUST_CHECK int gw_binding_pending_find(struct gw_binding_store *s,
                                          const char *mac, const char *uuid,
                                          int64_t now_ms,
                                          struct gw_binding_pending *out);

/*
 * Binds: in one transaction, deletes the pending row of (b->mac, b->uuid)
 * if any and inserts b (client_id, mac, uuid, group, board,
 * serial_number, by, bound_ms; issued and reissue false) with a new id,
 * written back to b->id. GW_EEXIST if that identity, client id or
 * (non-empty) serial number is already bound.
 */
GW_MUST_CHECK int gw_binding_bind(struct gw_binding_store *s,
                                  struct gw_binding *b);

/*
 * Claims the right to hand out binding id's credentials: sets issued and
 * clears reissue only if it was not issued or reissue was set, atomically
 * (two instances asking at once: one gets it). *granted says which.
 */
GW_MUST_CHECK int gw_binding_claim_issue(struct gw_binding_store *s, int64_t id,
                                         bool *granted);

/* Lets the next check of binding id have its credentials again. */
GW_MUST_CHECK int gw_binding_allow_reissue(struct gw_binding_store *s,
                                           int64_t id);

/*
 * Undoes the binding of client_id: deletes it and records (or raises)
 * its revocation, below = its id + 1, in one transaction; *out is that
 * revocation. GW_ENOENT if it is not bound.
 */
GW_MUST_CHECK int gw_binding_unbind(struct gw_binding_store *s,
                                    const char *client_id,
                                    struct gw_binding_revoked *out);

/*
 * The identity client_id is known by: its binding, when that is the only
 * binding of its MAC. GW_ENOENT when it is not bound, GW_EEXIST when
 * another binding holds its MAC too (ambiguous: no MAC rule may match
 * it), else as above.
 */
GW_MUST_CHECK int gw_binding_identity(struct gw_binding_store *s,
                                      const char *client_id,
                                      struct gw_binding *out);

/*
 * Walks bindings by id, the ones with id > after, at most limit of them,
 * in id order (a page of the API's list): fn is called for each; returns
 * the count walked or a negative GW_E*. Likewise the pending ones
 * (unexpired at now_ms, by creation) and every revocation (the broker
 * plugin is told them all when the gateway's link comes up). fn runs
 * once the database is done with the query, so it may call the store;
 * GW_ENOMEM if the rows do not fit in memory.
 */
typedef void (*gw_binding_fn)(const struct gw_binding *b, void *arg);
typedef void (*gw_binding_pending_fn)(const struct gw_binding_pending *p,
                                      void *arg);
typedef void (*gw_binding_revoked_fn)(const struct gw_binding_revoked *r,
                                      void *arg);
int gw_binding_list(struct gw_binding_store *s, int64_t after, int limit,
                    gw_binding_fn fn, void *arg);
int gw_binding_pending_list(struct gw_binding_store *s, int64_t now_ms,
                            int limit, gw_binding_pending_fn fn, void *arg);
int gw_binding_revoked_list(struct gw_binding_store *s,
                            gw_binding_revoked_fn fn, void *arg);

/*
 * Publishes revocations r[0..n) to the broker plugin on topic, QoS 1, in
 * as many messages as needed for each packet to stay within packet_max
 * bytes. Returns 0 or a negative GW_E* (logged).
 */
int gw_binding_revoke_publish(struct gw_mqtt_link *link, const char *topic,
                              size_t packet_max,
                              const struct gw_binding_revoked *r, size_t n);

/* Every revocation recorded: what the plugin must hear when the link
 * comes up. Returns as gw_binding_revoke_publish. */
int gw_binding_revoke_publish_all(struct gw_binding_store *s,
                                  struct gw_mqtt_link *link, const char *topic,
                                  size_t packet_max);

/* "sqlite" / "postgresql", and "operator" / "hmac" / "lab". */
const char *gw_binding_store_kind_name(enum gw_binding_store_kind k);
const char *gw_binding_by_name(enum gw_binding_by by);

#endif /* GW_BINDING_H */
