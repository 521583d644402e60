/* The online-device table; see presence.h. */

#include "gateway/presence.h"

#include <stdlib.h>
#include <string.h>

/*
 * News about an older connection than the one on record. Brokers publish
 * presence in order, but an EMQX rule may report a taken-over session's
 * disconnect after the new connect; the connection number (the plugin's
 * counter, or EMQX's connected_at) puts them back in order.
 */
static bool stale(const struct gw_presence_entry *e,
                  const struct gw_presence *p)
{
    return p->has_conn && e->conn != 0 && p->conn < e->conn;
}

int gw_presence_table_update(struct gw_presence_table *t, const char *client_id,
                             const struct gw_presence *p, uint64_t now_ms)
{
    struct gw_presence_entry *e = NULL;
    size_t len = strlen(client_id);

    if (len > GW_CLIENT_ID_MAX) {
        return GW_EINVAL;
    }
    HASH_FIND(hh, t->by_id, client_id, len, e);
    if (e != NULL && stale(e, p)) {
        return GW_PRESENCE_SAME;
    }
    if (!p->online) {
        if (e == NULL) {
            return GW_PRESENCE_SAME;
        }
        HASH_DEL(t->by_id, e);
        free(e);
        t->count--;
        return GW_PRESENCE_LEFT;
    }
    if (e != NULL) {
        bool newer = p->conn != e->conn;
        memcpy(e->address, p->address, sizeof(e->address));
        e->conn = p->conn;
        return newer ? GW_PRESENCE_RETURNED : GW_PRESENCE_SAME;
    }
    if (t->count >= GW_PRESENCE_MAX_DEVICES) {
        return GW_ELIMIT;
    }
    e = calloc(1, sizeof(*e));
    if (e == NULL) {
        return GW_ENOMEM;
    }
    memcpy(e->client_id, client_id, len + 1);
    memcpy(e->address, p->address, sizeof(e->address));
    e->conn = p->conn;
    e->since_ms = now_ms;
    HASH_ADD(hh, t->by_id, client_id, len, e);
    if (e->hh.tbl == NULL) { /* the table could not grow */
        free(e);
        return GW_ENOMEM;
    }
    t->count++;
    return GW_PRESENCE_ARRIVED;
}

const struct gw_presence_entry *
gw_presence_table_find(const struct gw_presence_table *t, const char *client_id)
{
    struct gw_presence_entry *e = NULL;

    HASH_FIND(hh, t->by_id, client_id, strlen(client_id), e);
    return e;
}

void gw_presence_table_clear(struct gw_presence_table *t)
{
    struct gw_presence_entry *e, *tmp;

    HASH_ITER(hh, t->by_id, e, tmp)
    {
        HASH_DEL(t->by_id, e);
        free(e);
    }
    t->count = 0;
}
