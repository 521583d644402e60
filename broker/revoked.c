/* Revocations by device client id: one hash; see revoked.h. */
#include "broker/revoked.h"

#include <stdlib.h>
#include <string.h>

#include "codec/client_id.h"
#include "common/hash.h"

struct entry {
    UT_hash_handle hh;
    uint64_t below;
    char client_id[]; /* hash key, NUL-terminated */
};

struct gw_broker_revoked {
    struct entry *by_id;
    unsigned count;
};

int gw_broker_revoked_create(struct gw_broker_revoked **out)
{
    *out = calloc(1, sizeof(**out));
    return *out != NULL ? 0 : GW_ENOMEM;
}

void gw_broker_revoked_destroy(struct gw_broker_revoked *t)
{
    struct entry *e, *tmp;

    if (t == NULL) {
        return;
    }
    HASH_ITER(hh, t->by_id, e, tmp)
    {
        HASH_DEL(t->by_id, e);
        free(e);
    }
    free(t);
}

static struct entry *find(const struct gw_broker_revoked *t, const char *id,
                          size_t len)
{
    struct entry *head = t->by_id, *e;

    HASH_FIND(hh, head, id, len, e);
    return e;
}

int gw_broker_revoked_raise(struct gw_broker_revoked *t, const char *client_id,
                            uint64_t below)
{
    struct entry *e;
    size_t len;

    if (client_id == NULL || below == 0 ||
        (len = strnlen(client_id, GW_CLIENT_ID_MAX + 1)) == 0 ||
        len > GW_CLIENT_ID_MAX) {
        return GW_EINVAL;
    }
    if ((e = find(t, client_id, len)) != NULL) {
        if (e->below >= below) {
            return 0;
        }
        e->below = below;
        return 1;
    }
    if (t->count >= GW_BROKER_REVOKED_MAX) {
        return GW_ELIMIT;
    }
    if ((e = malloc(sizeof(*e) + len + 1)) == NULL) {
        return GW_ENOMEM;
    }
    memset(&e->hh, 0, sizeof(e->hh));
    e->below = below;
    memcpy(e->client_id, client_id, len + 1);
    HASH_ADD_KEYPTR(hh, t->by_id, e->client_id, len, e);
    if (!GW_HASH_ADDED(e, hh)) {
        free(e);
        return GW_ENOMEM;
    }
    t->count++;
    return 1;
}

uint64_t gw_broker_revoked_below(const struct gw_broker_revoked *t,
                                 const char *client_id)
{
    struct entry *e;
    size_t len;

    if (t == NULL || client_id == NULL ||
        (len = strnlen(client_id, GW_CLIENT_ID_MAX + 1)) > GW_CLIENT_ID_MAX) {
        return 0;
    }
    e = find(t, client_id, len);
    return e != NULL ? e->below : 0;
}

unsigned gw_broker_revoked_count(const struct gw_broker_revoked *t)
{
    return t->count;
}
