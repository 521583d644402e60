/*
 * Device catalogs between instances (docs/protocol.md section 10.7): sent
 * whole when they fit the broker's packet limit, else in parts the
 * others put together again; taken from the device's owner only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/instance_msg.h"
#include "codec/mcp_caps.h"
#include "codec/mcp_items.h"
#include "codec/mcp_tools.h"
#include "common/hash.h"
#include "common/log.h"
#include "gateway/cluster/cluster_int.h"

#define SUBJECT "cluster"
/* A catalog in parts: at most this many, this many bytes in all, this
 * many devices' at once, each complete within this time. */
#define PARTS_MAX      64
#define PARTS_BYTES    (4 * GW_INSTANCE_MSG_MAX_LEN)
#define ASSEMBLIES_MAX 16
#define ASSEMBLY_MS    30000

/* A device's catalog arriving in parts, until the last one is in. */
struct assembly {
    UT_hash_handle hh; /* in r->assemblies, by client_id */
    char client_id[GW_CLIENT_ID_MAX + 1];
    char from[GW_INSTANCE_NAME_MAX + 1];
    uint32_t gen;
    unsigned n, have;
    size_t bytes;
    uint64_t started_ms;
    cJSON *parts[PARTS_MAX];
};

/* {"state":..., "<member>":[...]}: a list page, so the page parsers of
 * discovery check it again on the way in. */
static cJSON *list_json(enum gw_tool_list_state state, const cJSON *items,
                        const char *member)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *copy =
        items != NULL ? cJSON_Duplicate(items, 1) : cJSON_CreateArray();

    if (o == NULL || copy == NULL ||
        cJSON_AddStringToObject(o, "state", gw_tool_list_state_name(state)) ==
            NULL ||
        !cJSON_AddItemToObject(o, member, copy)) {
        cJSON_Delete(copy);
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* What an initialize result said, as one, for gw_mcp_server_info_parse. */
static cJSON *info_json(const struct gw_mcp_server_info *info)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *caps = gw_mcp_caps_json(info->caps);
    cJSON *si = cJSON_CreateObject();

    if (o == NULL || caps == NULL || si == NULL ||
        !cJSON_AddItemToObject(o, "capabilities", caps)) {
        cJSON_Delete(o);
        cJSON_Delete(caps);
        cJSON_Delete(si);
        return NULL;
    }
    if (!cJSON_AddItemToObject(o, "serverInfo", si)) {
        cJSON_Delete(si);
        cJSON_Delete(o);
        return NULL;
    }
    if ((info->version[0] != '\0' &&
         cJSON_AddStringToObject(o, "protocolVersion", info->version) ==
             NULL) ||
        cJSON_AddStringToObject(si, "name", info->name) == NULL ||
        cJSON_AddStringToObject(si, "version", info->server_ver) == NULL) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *catalog_json(const struct gw_device *dev)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *part;

    if (o == NULL) {
        return NULL;
    }
    if (dev->catalog.known) {
        part = info_json(&dev->catalog.info);
        if (part == NULL || !cJSON_AddItemToObject(o, "info", part)) {
            cJSON_Delete(part);
            goto oom;
        }
    }
    part = list_json(dev->tools.state, dev->tools.tools, "tools");
    if (part == NULL || !cJSON_AddItemToObject(o, "tools", part)) {
        cJSON_Delete(part);
        goto oom;
    }
    for (int k = 0; k < GW_MCP_LIST_COUNT_; k++) {
        const struct gw_mcp_list *l = &dev->catalog.lists[k];
        const char *member = gw_mcp_list_member((enum gw_mcp_list_kind)k);
        part = list_json(l->state, l->items, member);
        if (part == NULL || !cJSON_AddItemToObject(o, member, part)) {
            cJSON_Delete(part);
            goto oom;
        }
    }
    return o;
oom:
    cJSON_Delete(o);
    return NULL;
}

/* Member k of a catalog: -1 the tools, else a list of the catalog. */
static const char *member_of(int k)
{
    return k < 0 ? "tools" : gw_mcp_list_member((enum gw_mcp_list_kind)k);
}

/* A part's shell: info (with_info), and every member's state with an
 * empty array, for the items that fit. */
static cJSON *part_shell(const cJSON *whole, bool with_info)
{
    cJSON *o = cJSON_CreateObject();
    const cJSON *info = cJSON_GetObjectItemCaseSensitive(whole, "info");

    if (o == NULL ||
        (with_info && info != NULL &&
         !cJSON_AddItemToObject(o, "info", cJSON_Duplicate(info, 1)))) {
        cJSON_Delete(o);
        return NULL;
    }
    for (int k = -1; k < GW_MCP_LIST_COUNT_; k++) {
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(whole, member_of(k));
        cJSON *st = cJSON_GetObjectItemCaseSensitive(l, "state");
        cJSON *part = cJSON_CreateObject();
        if (part == NULL || !cJSON_AddItemToObject(o, member_of(k), part) ||
            cJSON_AddStringToObject(part, "state", cJSON_GetStringValue(st)) ==
                NULL ||
            cJSON_AddArrayToObject(part, member_of(k)) == NULL) {
            cJSON_Delete(o);
            return NULL;
        }
    }
    return o;
}

static cJSON *part_items(cJSON *part, int k)
{
    return cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(part, member_of(k)), member_of(k));
}

/* Prints a catalog message around cat (moved); NULL on OOM. */
static char *catalog_text(struct gw_cluster_rpc *r, const struct gw_device *dev,
                          cJSON *cat)
{
    cJSON *m = gw_instance_msg_new(
        GW_IMSG_CATALOG, gw_cluster_name(r->env.cluster), dev->client_id, 0);
    char *text = NULL;

    if (m == NULL || cat == NULL || !cJSON_AddItemToObject(m, "catalog", cat)) {
        cJSON_Delete(cat);
    } else {
        text = cJSON_PrintUnformatted(m);
    }
    cJSON_Delete(m);
    return text;
}

/*
 * Splits whole into parts[] (each a catalog with some of the items and
 * "part":{gen,i,n}), each message within max bytes. Returns the count,
 * or GW_ETOOBIG (an item alone, or more than PARTS_MAX parts, would not
 * fit), GW_ENOMEM.
 */
static int split_catalog(struct gw_cluster_rpc *r, const struct gw_device *dev,
                         const cJSON *whole, size_t max, uint32_t gen,
                         cJSON **parts)
{
    /* The room a part leaves for items: its shell at its largest. */
    cJSON *shell = part_shell(whole, true);
    cJSON *num = cJSON_AddObjectToObject(shell, "part");
    cJSON_AddNumberToObject(num, "gen", 4294967295.0);
    cJSON_AddNumberToObject(num, "i", PARTS_MAX);
    cJSON_AddNumberToObject(num, "n", PARTS_MAX);
    char *text = num != NULL ? catalog_text(r, dev, shell) : NULL;
    size_t room, used = 0;
    int n = 0, rc = GW_ENOMEM;

    if (num == NULL) {
        cJSON_Delete(shell);
    }
    if (text == NULL) {
        return GW_ENOMEM;
    }
    room = strlen(text) + 64 < max ? max - strlen(text) - 64 : 0;
    cJSON_free(text);
    if ((parts[n++] = part_shell(whole, true)) == NULL) {
        goto fail;
    }
    for (int k = -1; k < GW_MCP_LIST_COUNT_; k++) {
        const cJSON *item;
        cJSON_ArrayForEach(
            item, cJSON_GetObjectItemCaseSensitive(
                      cJSON_GetObjectItemCaseSensitive(whole, member_of(k)),
                      member_of(k)))
        {
            char *t = cJSON_PrintUnformatted(item);
            size_t len = t != NULL ? strlen(t) + 1 : 0; /* and a comma */
            cJSON *copy;
            cJSON_free(t);
            if (len == 0) {
                goto fail;
            }
            if (len > room) {
                rc = GW_ETOOBIG;
                goto fail;
            }
            if (used + len > room) {
                if (n == PARTS_MAX) {
                    rc = GW_ETOOBIG;
                    goto fail;
                }
                if ((parts[n++] = part_shell(whole, false)) == NULL) {
                    goto fail;
                }
                used = 0;
            }
            if ((copy = cJSON_Duplicate(item, 1)) == NULL ||
                !cJSON_AddItemToArray(part_items(parts[n - 1], k), copy)) {
                cJSON_Delete(copy);
                goto fail;
            }
            used += len;
        }
    }
    for (int i = 0; i < n; i++) {
        num = cJSON_AddObjectToObject(parts[i], "part");
        if (num == NULL || cJSON_AddNumberToObject(num, "gen", gen) == NULL ||
            cJSON_AddNumberToObject(num, "i", i) == NULL ||
            cJSON_AddNumberToObject(num, "n", n) == NULL) {
            goto fail;
        }
    }
    return n;
fail:
    for (int i = 0; i < n; i++) {
        cJSON_Delete(parts[i]);
        parts[i] = NULL;
    }
    return rc;
}

/*
 * The device's catalog to one instance (on its request topic) or to all
 * (on ours): one message when it fits the broker's packet limit, else in
 * parts that do, which the others put together again.
 */
static void publish_catalog(struct gw_cluster_rpc *r,
                            const struct gw_device *dev, const char *to)
{
    const char *leaf = to != NULL ? "/rpc" : "/catalog";
    cJSON *whole = catalog_json(dev);
    cJSON *parts[PARTS_MAX] = {NULL};
    size_t max = gw__cluster_rpc_payload_max(r);
    char *text = catalog_text(r, dev, cJSON_Duplicate(whole, 1));
    int n = 0, rc;

    if (whole == NULL || text == NULL) {
        cJSON_Delete(whole);
        cJSON_free(text);
        return;
    }
    if (strlen(text) <= max) {
        rc = gw__cluster_rpc_send_text(r, to, leaf, "cat", text, strlen(text));
        n = 1;
    } else {
        r->catalog_gen = r->catalog_gen == UINT32_MAX ? 1 : r->catalog_gen + 1;
        rc = n = split_catalog(r, dev, whole, max, r->catalog_gen, parts);
    }
    cJSON_free(text);
    cJSON_Delete(whole);
    if (rc == GW_ETOOBIG) {
        r->stats.oversize++;
    }
    for (int i = 0; rc >= 0 && i < n && parts[i] != NULL; i++) {
        text = catalog_text(r, dev, parts[i]);
        parts[i] = NULL;
        rc = text != NULL ? gw__cluster_rpc_send_text(r, to, leaf, "cat", text,
                                                      strlen(text))
                          : GW_ENOMEM;
        cJSON_free(text);
    }
    for (int i = 0; i < PARTS_MAX; i++) {
        cJSON_Delete(parts[i]);
    }
    if (rc < 0) {
        gw__cluster_rpc_warn(r, "catalog of %s not sent: %s", dev->client_id,
                             gw_strerror(rc));
        return;
    }
    r->stats.catalogs_out++;
    if (n > 1) {
        r->stats.catalog_parts_out += (unsigned)n;
        gw_log(GW_LOG_INFO, SUBJECT, "catalog of %s sent in %d parts",
               dev->client_id, n);
    }
}

static bool state_parse(const char *s, enum gw_tool_list_state *out)
{
    for (int i = 0; i < GW_TOOL_LIST_COUNT_; i++) {
        if (s != NULL && strcmp(s, gw_tool_list_state_name(i)) == 0) {
            *out = (enum gw_tool_list_state)i;
            return true;
        }
    }
    return false;
}

/*
 * One list of a peer's catalog, checked as discovery checks a page:
 * *items a new array (NULL for none), *state its state. GW_EPROTO for a
 * list that breaks the rules or holds more than max.
 */
static int read_list(const cJSON *cat, const char *member, int kind, int max,
                     enum gw_tool_list_state *state, cJSON **items)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(cat, member);
    const char *next = NULL;
    int rc;

    *items = NULL;
    if (!cJSON_IsObject(o) ||
        !state_parse(
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "state")),
            state)) {
        return GW_EPROTO;
    }
    if ((*items = cJSON_CreateArray()) == NULL) {
        return GW_ENOMEM;
    }
    rc = kind < 0 ? gw_mcp_tools_page_parse(o, *items, &next)
                  : gw_mcp_list_page_parse((enum gw_mcp_list_kind)kind, o,
                                           *items, &next);
    if (rc == 0 && (next != NULL || cJSON_GetArraySize(*items) > max)) {
        rc = GW_EPROTO;
    }
    if (rc != 0) {
        cJSON_Delete(*items);
        *items = NULL;
    }
    return rc;
}

/* A list into the cache or catalog, by its state. */
static void apply_tools(struct gw_tool_cache *c, enum gw_tool_list_state st,
                        cJSON *items)
{
    if (st == GW_TOOL_LIST_COMPLETE || st == GW_TOOL_LIST_TRUNCATED) {
        gw_tool_cache_set(c, items, st == GW_TOOL_LIST_TRUNCATED);
        return;
    }
    cJSON_Delete(items);
    if (st == GW_TOOL_LIST_PENDING) {
        gw_tool_cache_begin(c);
    } else {
        gw_tool_cache_fail(c); /* none or failed: nothing callable */
        c->state = st;
    }
}

static void apply_list(struct gw_mcp_catalog *c, enum gw_mcp_list_kind k,
                       enum gw_tool_list_state st, cJSON *items)
{
    if (st == GW_TOOL_LIST_COMPLETE || st == GW_TOOL_LIST_TRUNCATED) {
        gw_mcp_catalog_set(c, k, items, st == GW_TOOL_LIST_TRUNCATED);
        return;
    }
    cJSON_Delete(items);
    if (st == GW_TOOL_LIST_FAILED) {
        gw_mcp_catalog_fail(c, k);
    } else if (st == GW_TOOL_LIST_PENDING) {
        gw_mcp_catalog_begin(c, k);
    } else {
        gw_mcp_catalog_clear_list(c, k);
    }
}

/* A device's whole catalog from its owner: all of it checked before any
 * goes in. */
static void apply_catalog(struct gw_cluster_rpc *r, struct gw_device *dev,
                          const char *from, const cJSON *catalog)
{
    const struct gw_config *cfg = gw__cluster_rpc_config(r);
    const cJSON *info = cJSON_GetObjectItemCaseSensitive(catalog, "info");
    struct gw_mcp_server_info si;
    enum gw_tool_list_state states[1 + GW_MCP_LIST_COUNT_];
    cJSON *items[1 + GW_MCP_LIST_COUNT_] = {NULL};
    int rc = 0;

    if (info != NULL && gw_mcp_server_info_parse(info, &si) != 0) {
        rc = GW_EPROTO;
    }
    for (int k = -1; rc == 0 && k < GW_MCP_LIST_COUNT_; k++) {
        rc = read_list(catalog, member_of(k), k,
                       k < 0 ? cfg->mcp.max_tools : cfg->mcp.max_list_items,
                       &states[k + 1], &items[k + 1]);
    }
    if (rc != 0) {
        for (int i = 0; i <= GW_MCP_LIST_COUNT_; i++) {
            cJSON_Delete(items[i]);
        }
        r->stats.refused++;
        gw__cluster_rpc_warn(r, "catalog of %s from %s refused: %s",
                             dev->client_id, from, gw_strerror(rc));
        return;
    }
    if (info != NULL) {
        gw_mcp_catalog_set_info(&dev->catalog, &si);
    }
    apply_tools(&dev->tools, states[0], items[0]);
    for (int k = 0; k < GW_MCP_LIST_COUNT_; k++) {
        apply_list(&dev->catalog, (enum gw_mcp_list_kind)k, states[k + 1],
                   items[k + 1]);
    }
    r->stats.catalogs_in++;
    GW_LOG(GW_LOG_DEBUG, SUBJECT, "catalog of %s from %s: %d tools",
           dev->client_id, from, gw_tool_cache_count(&dev->tools));
    r->applying = true;
    gw_device_table_notify(r->env.devices, dev,
                           GW_DEVICE_CHANGED_TOOLS |
                               GW_DEVICE_CHANGED_RESOURCES |
                               GW_DEVICE_CHANGED_PROMPTS);
    r->applying = false;
}

static void assembly_free(struct gw_cluster_rpc *r, struct assembly *a)
{
    HASH_DEL(r->assemblies, a);
    r->n_assemblies--;
    for (unsigned i = 0; i < a->n; i++) {
        cJSON_Delete(a->parts[i]);
    }
    free(a);
}

/* Room for one more: the stale ones go, then the oldest if need be. */
static void assemblies_trim(struct gw_cluster_rpc *r, uint64_t now)
{
    struct assembly *a, *tmp, *oldest = NULL;

    HASH_ITER(hh, r->assemblies, a, tmp)
    {
        if (now - a->started_ms > ASSEMBLY_MS) {
            assembly_free(r, a);
        } else if (oldest == NULL || a->started_ms < oldest->started_ms) {
            oldest = a;
        }
    }
    if (r->n_assemblies >= ASSEMBLIES_MAX && oldest != NULL) {
        assembly_free(r, oldest);
    }
}

/* The parts put together: each member's items in order, the states of
 * every part the same. NULL when they do not fit together (or OOM). */
static cJSON *assembly_join(const struct assembly *a)
{
    cJSON *out = cJSON_CreateObject();
    const cJSON *info = cJSON_GetObjectItemCaseSensitive(a->parts[0], "info");

    if (out == NULL ||
        (info != NULL &&
         !cJSON_AddItemToObject(out, "info", cJSON_Duplicate(info, 1)))) {
        goto fail;
    }
    for (int k = -1; k < GW_MCP_LIST_COUNT_; k++) {
        const char *state =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(a->parts[0], member_of(k)),
                "state"));
        cJSON *l = cJSON_AddObjectToObject(out, member_of(k));
        cJSON *all;
        if (state == NULL || l == NULL ||
            cJSON_AddStringToObject(l, "state", state) == NULL ||
            (all = cJSON_AddArrayToObject(l, member_of(k))) == NULL) {
            goto fail;
        }
        for (unsigned i = 0; i < a->n; i++) {
            const cJSON *pl =
                cJSON_GetObjectItemCaseSensitive(a->parts[i], member_of(k));
            const char *st = cJSON_GetStringValue(
                cJSON_GetObjectItemCaseSensitive(pl, "state"));
            cJSON *items = cJSON_GetObjectItemCaseSensitive(pl, member_of(k));
            if (st == NULL || strcmp(st, state) != 0 || !cJSON_IsArray(items)) {
                goto fail;
            }
            while (items->child != NULL) {
                cJSON_AddItemToArray(
                    all, cJSON_DetachItemViaPointer(items, items->child));
            }
        }
    }
    return out;
fail:
    cJSON_Delete(out);
    return NULL;
}

static bool part_number(const cJSON *o, const char *name, double max,
                        uint32_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    double d = cJSON_IsNumber(v) ? v->valuedouble : -1;

    if (d < 0 || d > max || d != (double)(uint32_t)d) {
        return false;
    }
    *out = (uint32_t)d;
    return true;
}

/*
 * One part of a device's catalog (m's, taken from it): kept until all
 * are in, then applied whole. A part that does not belong refuses its
 * whole catalog.
 */
static void take_part(struct gw_cluster_rpc *r, struct gw_device *dev,
                      struct gw_instance_msg *m, const cJSON *num, size_t len)
{
    uint32_t gen, i, n;
    struct assembly *a;
    uint64_t now = gw__cluster_rpc_now(r);

    if (!part_number(num, "gen", UINT32_MAX, &gen) ||
        !part_number(num, "n", PARTS_MAX, &n) ||
        !part_number(num, "i", n - 1.0, &i) || n == 0) {
        r->stats.refused++;
        gw__cluster_rpc_warn(
            r, "catalog part of %s from %s refused: bad part numbers",
            m->client_id, m->from);
        return;
    }
    HASH_FIND_STR(r->assemblies, m->client_id, a);
    if (a != NULL &&
        (a->gen != gen || a->n != n || strcmp(a->from, m->from) != 0)) {
        assembly_free(r, a); /* a newer catalog: the older one is moot */
        a = NULL;
    }
    if (a == NULL) {
        assemblies_trim(r, now);
        if ((a = calloc(1, sizeof(*a))) == NULL) {
            return;
        }
        memcpy(a->client_id, m->client_id, sizeof(a->client_id));
        memcpy(a->from, m->from, sizeof(a->from));
        a->gen = gen;
        a->n = n;
        a->started_ms = now;
        HASH_ADD_STR(r->assemblies, client_id, a);
        if (!GW_HASH_ADDED(a, hh)) {
            free(a);
            return;
        }
        r->n_assemblies++;
    }
    if (a->parts[i] != NULL) {
        return; /* the same part twice */
    }
    a->bytes += len;
    if (a->bytes > PARTS_BYTES) {
        r->stats.refused++;
        gw__cluster_rpc_warn(
            r, "catalog of %s from %s refused: its parts exceed %d bytes",
            m->client_id, m->from, PARTS_BYTES);
        assembly_free(r, a);
        return;
    }
    a->parts[i] = cJSON_DetachItemViaPointer(m->root, (cJSON *)m->catalog);
    m->catalog = NULL;
    r->stats.catalog_parts_in++;
    if (++a->have < a->n) {
        return;
    }
    cJSON *whole = assembly_join(a);
    char from[GW_INSTANCE_NAME_MAX + 1];
    memcpy(from, a->from, sizeof(from));
    assembly_free(r, a);
    if (whole == NULL) {
        r->stats.refused++;
        gw__cluster_rpc_warn(
            r, "catalog of %s from %s refused: its parts do not agree",
            m->client_id, from);
        return;
    }
    apply_catalog(r, dev, from, whole);
    cJSON_Delete(whole);
}

/*
 * A catalog message: taken only from the device's owner, on its own
 * catalog topic (sender, the topic's name) or on this instance's request
 * topic (sender NULL); anyone else's is refused and counted.
 */
void gw__cluster_catalog_take(struct gw_cluster_rpc *r, const char *sender,
                              struct gw_instance_msg *m, size_t len)
{
    const char *owner = gw_cluster_owner(r->env.cluster, m->client_id);
    struct gw_device *dev;

    if ((sender != NULL && strcmp(sender, m->from) != 0) || owner == NULL ||
        strcmp(owner, m->from) != 0) {
        r->stats.refused++;
        r->stats.catalogs_foreign++;
        gw__cluster_rpc_warn(r, "catalog of %s from %s refused: %s",
                             m->client_id, m->from,
                             sender != NULL && strcmp(sender, m->from) != 0
                                 ? "sent on another instance's topic"
                                 : "the device is not that instance's");
        return;
    }
    if ((dev = gw_device_find(r->env.devices, m->client_id)) == NULL) {
        return; /* not online here (yet) */
    }
    const cJSON *num = cJSON_GetObjectItemCaseSensitive(m->catalog, "part");
    if (num != NULL) {
        take_part(r, dev, m, num, len);
        return;
    }
    apply_catalog(r, dev, m->from, m->catalog);
}

void gw_cluster_rpc_device_changed(struct gw_cluster_rpc *r,
                                   const struct gw_device *dev, unsigned what)
{
    if (r == NULL || r->closed || r->applying ||
        (what & ~GW_DEVICE_CHANGED_PRESENCE) == 0 ||
        dev->state != GW_DEVICE_KNOWN ||
        !gw_cluster_owns(r->env.cluster, dev->client_id)) {
        return;
    }
    publish_catalog(r, dev, NULL);
}

void gw_cluster_rpc_peer_joined(struct gw_cluster_rpc *r, const char *name)
{
    unsigned n = 0;

    if (r == NULL || r->closed) {
        return;
    }
    struct gw_device *d;
    GW_DEVICE_FOREACH(r->env.devices, d)
    {
        if (d->presence.online && d->tools.state != GW_TOOL_LIST_NONE &&
            gw_cluster_owns(r->env.cluster, d->client_id)) {
            publish_catalog(r, d, name);
            n++;
        }
    }
    if (n > 0) {
        gw_log(GW_LOG_INFO, SUBJECT, "catalogs of %u device%s sent to %s", n,
               n == 1 ? "" : "s", name);
    }
}

void gw__cluster_catalog_close(struct gw_cluster_rpc *r)
{
    while (r->assemblies != NULL) {
        assembly_free(r, r->assemblies);
    }
}
