/*
 * Connection table: one hash by broker context, one by device client id
 * whose entry lists that id's live connections, newest (current) first.
 */
#include "broker/clients.h"

#include <stdlib.h>
#include <string.h>

#include "common/hash.h"

struct device;

struct conn {
    const void *ctx; /* hash key: the broker's context pointer */
    struct gw_broker_conn_info info;
    uint64_t serial; /* of its latest online announcement */
    char address[GW_BROKER_ADDRESS_MAX + 1];
    struct device *device; /* NULL for the gateway account */
    struct conn *older;    /* next in device->conns */
    char *gateway_id;      /* the gateway's client id (devices: NULL) */
    UT_hash_handle hh;
};

struct device {
    char client_id[GW_CLIENT_ID_MAX + 1]; /* hash key */
    struct conn *conns; /* live connections, the current one first */
    UT_hash_handle hh;
};

struct gw_broker_clients {
    struct conn *by_ctx;
    struct device *by_id;
    uint64_t serial; /* last number given to an online announcement */
    unsigned count;
};

int gw_broker_clients_create(struct gw_broker_clients **out)
{
    *out = calloc(1, sizeof(**out));
    return *out != NULL ? 0 : GW_ENOMEM;
}

static void announce(struct gw_broker_clients *t, struct conn *c,
                     struct gw_broker_presence *ev)
{
    c->serial = ++t->serial;
    ev->publish = true;
    ev->online = true;
    ev->conn = c->serial;
    memcpy(ev->client_id, c->device->client_id, sizeof(ev->client_id));
    memcpy(ev->address, c->address, sizeof(ev->address));
}

static void conn_free(struct conn *c)
{
    free(c->gateway_id);
    free(c);
}

void gw_broker_clients_remove(struct gw_broker_clients *t, const void *ctx,
                              struct gw_broker_presence *ev)
{
    struct conn *c;
    struct device *d;

    memset(ev, 0, sizeof(*ev));
    HASH_FIND_PTR(t->by_ctx, &ctx, c);
    if (c == NULL) {
        return; /* refused at CONNECT, or never authenticated by us */
    }
    HASH_DEL(t->by_ctx, c);
    t->count--;
    d = c->device;
    if (d == NULL) {
        conn_free(c);
        return;
    }
    bool was_current = d->conns == c;
    for (struct conn **p = &d->conns; *p != NULL; p = &(*p)->older) {
        if (*p == c) {
            *p = c->older;
            break;
        }
    }
    if (was_current && d->conns != NULL) {
        announce(t, d->conns, ev);
    } else if (was_current) {
        ev->publish = true;
        ev->online = false;
        ev->conn = c->serial;
        memcpy(ev->client_id, d->client_id, sizeof(ev->client_id));
    }
    if (d->conns == NULL) {
        HASH_DEL(t->by_id, d);
        free(d);
    }
    conn_free(c);
}

static int add_device(struct gw_broker_clients *t, struct conn *c,
                      const char *client_id, struct gw_broker_presence *ev)
{
    struct device *d;
    size_t len = strlen(client_id);

    if (len > GW_CLIENT_ID_MAX) {
        return GW_EINVAL;
    }
    HASH_FIND_STR(t->by_id, client_id, d);
    if (d == NULL) {
        d = calloc(1, sizeof(*d));
        if (d == NULL) {
            return GW_ENOMEM;
        }
        memcpy(d->client_id, client_id, len + 1);
        HASH_ADD_STR(t->by_id, client_id, d);
        if (!GW_HASH_ADDED(d, hh)) {
            free(d);
            return GW_ENOMEM;
        }
    }
    c->device = d;
    c->older = d->conns;
    d->conns = c;
    c->info.client_id = d->client_id;
    announce(t, c, ev);
    return 0;
}

int gw_broker_clients_add(struct gw_broker_clients *t, const void *ctx,
                          enum gw_broker_role role, const char *client_id,
                          const char *address, uint64_t binding,
                          struct gw_broker_presence *ev)
{
    struct gw_broker_presence stale;
    struct conn *c;
    int rc;

    memset(ev, 0, sizeof(*ev));
    if (role == GW_BROKER_ROLE_NONE || client_id == NULL) {
        return GW_EINVAL;
    }
    gw_broker_clients_remove(t, ctx, &stale);
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return GW_ENOMEM;
    }
    c->ctx = ctx;
    c->info.role = role;
    c->info.binding = binding;
    if (address != NULL && strlen(address) <= GW_BROKER_ADDRESS_MAX) {
        strcpy(c->address, address);
    }
    /* The context table first: if that add fails, nothing has been
     * announced for the device yet and there is nothing to undo. */
    HASH_ADD_PTR(t->by_ctx, ctx, c);
    if (!GW_HASH_ADDED(c, hh)) {
        conn_free(c);
        return GW_ENOMEM;
    }
    if (role == GW_BROKER_ROLE_DEVICE) {
        rc = add_device(t, c, client_id, ev);
    } else {
        c->gateway_id = strdup(client_id);
        c->info.client_id = c->gateway_id;
        rc = c->gateway_id != NULL ? 0 : GW_ENOMEM;
    }
    if (rc != 0) {
        HASH_DEL(t->by_ctx, c);
        conn_free(c);
        return rc;
    }
    t->count++;
    return 0;
}

struct gw_broker_conn_info *gw_broker_clients_find(struct gw_broker_clients *t,
                                                   const void *ctx)
{
    struct conn *c;

    HASH_FIND_PTR(t->by_ctx, &ctx, c);
    return c != NULL ? &c->info : NULL;
}

bool gw_broker_clients_current_below(struct gw_broker_clients *t,
                                     const char *client_id, uint64_t below)
{
    struct device *d;

    if (client_id == NULL || strlen(client_id) > GW_CLIENT_ID_MAX) {
        return false;
    }
    HASH_FIND_STR(t->by_id, client_id, d);
    return d != NULL && d->conns != NULL && d->conns->info.binding < below;
}

unsigned gw_broker_clients_count(const struct gw_broker_clients *t)
{
    return t->count;
}

void gw_broker_clients_destroy(struct gw_broker_clients *t)
{
    struct conn *c, *ctmp;
    struct device *d, *dtmp;

    if (t == NULL) {
        return;
    }
    HASH_ITER(hh, t->by_ctx, c, ctmp)
    {
        HASH_DEL(t->by_ctx, c);
        conn_free(c);
    }
    HASH_ITER(hh, t->by_id, d, dtmp)
    {
        HASH_DEL(t->by_id, d);
        free(d);
    }
    free(t);
}
