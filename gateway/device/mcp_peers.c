/*
 * A device's peers and what each asked of it; see mcp_peers.h. Records
 * live on the device (a list, at most GW_MCP_INTERESTS_MAX), so a device
 * leaving takes them all at once; a peer leaving looks for its records
 * only when it has some (n_interests). The device table hands over what
 * is needed (mcp_peers_int.h): nothing here knows its records.
 */
#include "gateway/device/mcp_peers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/client_id.h"
#include "codec/mcp_items.h"
#include "common/log.h"
#include "gateway/device/mcp_catalog.h"
#include "gateway/device/mcp_peers_int.h"

enum interest_kind {
    INTEREST_SUBSCRIPTION, /* key: a resource URI */
    INTEREST_LEVEL,        /* level */
    INTEREST_TASK          /* key: a task id */
};

struct gw_mcp_interest {
    struct gw_list node; /* in the device's interests */
    struct gw_mcp_peer *peer;
    enum interest_kind kind;
    int level;
    char key[]; /* "" for a level */
};

/* ---- records ---- */

void gw_mcp_peer_init(struct gw_mcp_peer *peer,
                      const struct gw_mcp_peer_ops *ops, const char *subject,
                      bool all_devices)
{
    memset(peer, 0, sizeof(*peer));
    peer->ops = ops;
    peer->subject = subject;
    peer->all_devices = all_devices;
    peer->level = -1;
    gw_list_init(&peer->node);
}

void gw__device_peers_init(
    struct gw_mcp_peers *ps, struct gw_mcp_links *links,
    struct gw_mcp_interests *(*find)(void *arg, const char *client_id),
    struct gw_mcp_interests *(*next)(void *arg,
                                     const struct gw_mcp_interests *in),
    void *arg)
{
    ps->links = links;
    gw_list_init(&ps->all_devices);
    ps->find = find;
    ps->next = next;
    ps->arg = arg;
}

void gw__device_interests_init(struct gw_mcp_interests *in,
                               struct gw_mcp_link *link,
                               const struct gw_mcp_catalog *catalog)
{
    gw_list_init(&in->items);
    in->count = 0;
    in->device_level = -1;
    in->link = link;
    in->catalog = catalog;
}

static void record_free(struct gw_mcp_interests *in, struct gw_mcp_interest *r)
{
    gw_list_unlink(&r->node);
    in->count--;
    r->peer->n_interests--;
    free(r);
}

void gw__device_interests_clear(struct gw_mcp_interests *in)
{
    struct gw_list *it, *tmp;

    GW_LIST_FOREACH_SAFE(it, tmp, &in->items)
    {
        record_free(in, GW_LIST_ENTRY(it, struct gw_mcp_interest, node));
    }
    in->device_level = -1;
}

static struct gw_mcp_interest *record_find(const struct gw_mcp_interests *in,
                                           const struct gw_mcp_peer *peer,
                                           enum interest_kind kind,
                                           const char *key)
{
    struct gw_list *it;

    for (it = in->items.next; it != &in->items; it = it->next) {
        struct gw_mcp_interest *r =
            GW_LIST_ENTRY(it, struct gw_mcp_interest, node);
        if (r->kind == kind && (peer == NULL || r->peer == peer) &&
            strcmp(r->key, key) == 0) {
            return r;
        }
    }
    return NULL;
}

static struct gw_mcp_interest *record_add(struct gw_mcp_interests *in,
                                          struct gw_mcp_peer *peer,
                                          enum interest_kind kind,
                                          const char *key)
{
    size_t len = strlen(key);
    struct gw_mcp_interest *r;

    if (in->count >= GW_MCP_INTERESTS_MAX ||
        (r = calloc(1, sizeof(*r) + len + 1)) == NULL) {
        return NULL;
    }
    r->peer = peer;
    r->kind = kind;
    r->level = -1;
    memcpy(r->key, key, len + 1);
    gw_list_insert_tail(&in->items, &r->node);
    in->count++;
    peer->n_interests++;
    return r;
}

static void subject_of(const struct gw_mcp_interests *in, char *out, size_t cap)
{
    snprintf(out, cap, "dev=%s mcp", in->link->client_id);
}

/* Requests whose answers nobody waits for (the gateway's own upkeep). */
static void on_upkeep_reply(void *arg, const struct gw_mcp_reply *reply)
{
    (void)arg;
    (void)reply;
}

/* ---- logging levels ---- */

/* The most verbose level any peer wants of the device, or -1 for none. */
static int wanted_level(const struct gw_mcp_peers *ps,
                        const struct gw_mcp_interests *in)
{
    const struct gw_list *it;
    int level = -1;

    for (it = in->items.next; it != &in->items; it = it->next) {
        const struct gw_mcp_interest *r =
            GW_LIST_ENTRY(it, struct gw_mcp_interest, node);
        if (r->kind == INTEREST_LEVEL && (level < 0 || r->level < level)) {
            level = r->level;
        }
    }
    for (it = ps->all_devices.next; it != &ps->all_devices; it = it->next) {
        const struct gw_mcp_peer *p =
            GW_LIST_ENTRY(it, struct gw_mcp_peer, node);
        if (p->level >= 0 && (level < 0 || p->level < level)) {
            level = p->level;
        }
    }
    return level;
}

/*
 * Sets the device's level to what its peers want now, when that changed (a
 * device keeps its last level when nobody wants any: MCP has no way to
 * turn logging off, and nothing it sends then reaches anyone). cb (may
 * be NULL) hears the device's answer, or an empty result from the loop
 * when nothing had to be sent.
 */
static void apply_level(struct gw_mcp_peers *ps, struct gw_mcp_interests *in,
                        enum gw_mcp_origin origin, gw_mcp_reply_cb cb,
                        void *arg, uint64_t *handle)
{
    int level = wanted_level(ps, in);
    cJSON *params;

    if (level < 0 || level == in->device_level || !in->catalog->known ||
        !gw_mcp_catalog_offers(in->catalog, GW_MCP_CAP_LOGGING)) {
        if (cb != NULL) {
            gw_mcp_answer(ps->links, origin, NULL, cb, arg, handle);
        }
        return;
    }
    params = cJSON_CreateObject();
    if (params == NULL ||
        cJSON_AddStringToObject(params, "level",
                                gw_mcp_log_level_name(level)) == NULL) {
        cJSON_Delete(params);
        params = NULL;
    }
    in->device_level = level;
    gw_mcp_request(ps->links, in->link, "logging/setLevel", params, 0, origin,
                   cb != NULL ? cb : on_upkeep_reply, arg, handle);
}

void gw__device_peers_set_level(struct gw_mcp_peers *ps,
                                struct gw_mcp_interests *in,
                                struct gw_mcp_peer *peer,
                                enum gw_mcp_log_level level,
                                enum gw_mcp_origin origin, gw_mcp_reply_cb cb,
                                void *arg, uint64_t *handle)
{
    char why[GW_CLIENT_ID_MAX + 64];
    struct gw_mcp_interest *r;

    if (in == NULL) {
        /* Every device: the answer does not wait for any of them. */
        peer->level = (int)level;
        if (!gw_list_linked(&peer->node)) {
            gw_list_insert_tail(&ps->all_devices, &peer->node);
        }
        for (struct gw_mcp_interests *d = ps->next(ps->arg, NULL); d != NULL;
             d = ps->next(ps->arg, d)) {
            apply_level(ps, d, GW_MCP_FROM_GATEWAY, NULL, NULL, NULL);
        }
        gw_mcp_answer(ps->links, origin, NULL, cb, arg, handle);
        return;
    }
    if (!gw_mcp_catalog_allows(in->catalog, in->link->client_id,
                               "logging/setLevel", why, sizeof(why))) {
        gw_mcp_refuse(ps->links, origin, GW_RPC_METHOD_NOT_FOUND, why, cb, arg,
                      handle);
        return;
    }
    r = record_find(in, peer, INTEREST_LEVEL, "");
    if (r == NULL && (r = record_add(in, peer, INTEREST_LEVEL, "")) == NULL) {
        gw_mcp_refuse(ps->links, origin, GW_RPC_DEVICE_BUSY,
                      "too many subscriptions and levels on this device", cb,
                      arg, handle);
        return;
    }
    r->level = (int)level;
    apply_level(ps, in, origin, cb, arg, handle);
}

void gw__device_peers_ready(struct gw_mcp_peers *ps,
                            struct gw_mcp_interests *in)
{
    apply_level(ps, in, GW_MCP_FROM_GATEWAY, NULL, NULL, NULL);
}

/* ---- subscriptions ---- */

/* A subscribe the device was asked for: a refusal takes the record back,
 * so that the next subscriber asks the device again. Freed when the
 * request ends, however it ends (an origin that went away included). */
struct sub_wait {
    struct gw_mcp_peers *ps;
    struct gw_mcp_peer *peer; /* compared only: it may have left */
    char client_id[GW_CLIENT_ID_MAX + 1];
    char uri[];
};

static void on_subscribe_end(void *arg, enum gw_mcp_outcome outcome)
{
    struct sub_wait *w = arg;
    struct gw_mcp_interests *in;
    struct gw_mcp_interest *r;

    if (outcome != GW_MCP_OK &&
        (in = w->ps->find(w->ps->arg, w->client_id)) != NULL &&
        (r = record_find(in, w->peer, INTEREST_SUBSCRIPTION, w->uri)) != NULL) {
        record_free(in, r);
    }
    free(w);
}

static void send_subscribe(struct gw_mcp_peers *ps, struct gw_mcp_interests *in,
                           const char *uri, bool on, struct sub_wait *w,
                           enum gw_mcp_origin origin, gw_mcp_reply_cb cb,
                           void *arg, uint64_t *handle)
{
    const struct gw_mcp_opts opts = {
        .on_end = w != NULL ? on_subscribe_end : NULL, .end_arg = w};
    cJSON *params = cJSON_CreateObject();

    if (params != NULL && cJSON_AddStringToObject(params, "uri", uri) == NULL) {
        cJSON_Delete(params);
        params = NULL;
    }
    gw_mcp_request_with(ps->links, in->link,
                        on ? "resources/subscribe" : "resources/unsubscribe",
                        params, &opts, origin, cb, arg, handle);
}

void gw__device_peers_subscribe(struct gw_mcp_peers *ps,
                                struct gw_mcp_interests *in,
                                struct gw_mcp_peer *peer, const char *uri,
                                bool on, enum gw_mcp_origin origin,
                                gw_mcp_reply_cb cb, void *arg, uint64_t *handle)
{
    const char *method = on ? "resources/subscribe" : "resources/unsubscribe";
    char why[GW_CLIENT_ID_MAX + 64];
    struct gw_mcp_interest *r;
    struct sub_wait *w;
    size_t len;

    if (!gw_mcp_catalog_allows(in->catalog, in->link->client_id, method, why,
                               sizeof(why))) {
        gw_mcp_refuse(ps->links, origin, GW_RPC_METHOD_NOT_FOUND, why, cb, arg,
                      handle);
        return;
    }
    if (uri == NULL || uri[0] == '\0' || (len = strlen(uri)) > GW_MCP_URI_MAX) {
        gw_mcp_refuse(ps->links, origin, GW_RPC_INVALID_PARAMS,
                      "uri must be a non-empty string of at most 1024 bytes",
                      cb, arg, handle);
        return;
    }
    r = record_find(in, peer, INTEREST_SUBSCRIPTION, uri);
    if (!on) {
        if (r != NULL) {
            record_free(in, r);
            if (record_find(in, NULL, INTEREST_SUBSCRIPTION, uri) == NULL) {
                send_subscribe(ps, in, uri, false, NULL, origin, cb, arg,
                               handle);
                return;
            }
        }
        gw_mcp_answer(ps->links, origin, NULL, cb, arg, handle);
        return;
    }
    if (r != NULL) {
        gw_mcp_answer(ps->links, origin, NULL, cb, arg, handle);
        return;
    }
    bool held = record_find(in, NULL, INTEREST_SUBSCRIPTION, uri) != NULL;
    if (record_add(in, peer, INTEREST_SUBSCRIPTION, uri) == NULL) {
        gw_mcp_refuse(ps->links, origin, GW_RPC_DEVICE_BUSY,
                      "too many subscriptions and levels on this device", cb,
                      arg, handle);
        return;
    }
    if (held) {
        gw_mcp_answer(ps->links, origin, NULL, cb, arg, handle);
        return;
    }
    if ((w = calloc(1, sizeof(*w) + len + 1)) == NULL) {
        record_free(in, record_find(in, peer, INTEREST_SUBSCRIPTION, uri));
        gw_mcp_refuse(ps->links, origin, GW_RPC_INTERNAL_ERROR, "out of memory",
                      cb, arg, handle);
        return;
    }
    w->ps = ps;
    w->peer = peer;
    snprintf(w->client_id, sizeof(w->client_id), "%s", in->link->client_id);
    memcpy(w->uri, uri, len + 1);
    send_subscribe(ps, in, uri, true, w, origin, cb, arg, handle);
}

void gw__device_peers_reinitialized(struct gw_mcp_peers *ps,
                                    struct gw_mcp_interests *in)
{
    char why[GW_CLIENT_ID_MAX + 64];
    const struct gw_list *it;

    in->device_level = -1; /* whatever it was, the device may not have it */
    apply_level(ps, in, GW_MCP_FROM_GATEWAY, NULL, NULL, NULL);
    if (!gw_mcp_catalog_allows(in->catalog, in->link->client_id,
                               "resources/subscribe", why, sizeof(why))) {
        return;
    }
    for (it = in->items.next; it != &in->items; it = it->next) {
        const struct gw_mcp_interest *r =
            GW_LIST_ENTRY(it, struct gw_mcp_interest, node);
        /* One request per URI: the first record of it asks. */
        if (r->kind != INTEREST_SUBSCRIPTION ||
            record_find(in, NULL, INTEREST_SUBSCRIPTION, r->key) != r) {
            continue;
        }
        send_subscribe(ps, in, r->key, true, NULL, GW_MCP_FROM_GATEWAY,
                       on_upkeep_reply, NULL, NULL);
    }
}

/* ---- tasks ---- */

void gw__device_peers_task_created(struct gw_mcp_interests *in,
                                   struct gw_mcp_peer *peer,
                                   const char *task_id)
{
    struct gw_list *it;

    if (task_id == NULL || task_id[0] == '\0' ||
        strlen(task_id) > GW_MCP_URI_MAX ||
        record_find(in, peer, INTEREST_TASK, task_id) != NULL) {
        return;
    }
    /* A full table forgets its oldest task: only its status
     * notifications are lost, the task itself goes on. */
    if (in->count >= GW_MCP_INTERESTS_MAX) {
        for (it = in->items.next; it != &in->items; it = it->next) {
            struct gw_mcp_interest *r =
                GW_LIST_ENTRY(it, struct gw_mcp_interest, node);
            if (r->kind == INTEREST_TASK) {
                record_free(in, r);
                break;
            }
        }
    }
    (void)record_add(in, peer, INTEREST_TASK, task_id);
}

bool gw__device_peers_task_owned(const struct gw_mcp_interests *in,
                                 const struct gw_mcp_peer *peer,
                                 const char *task_id)
{
    return task_id != NULL && task_id[0] != '\0' &&
           record_find(in, peer, INTEREST_TASK, task_id) != NULL;
}

/* ---- notifications ---- */

/* The peers to tell, gathered first: a peer's notify may change the
 * records (it cannot free the device: records are reaped later). */
struct targets {
    struct gw_mcp_peer *peer[GW_MCP_INTERESTS_MAX];
    size_t n;
};

static void targets_add(struct targets *tg, struct gw_mcp_peer *peer)
{
    for (size_t i = 0; i < tg->n; i++) {
        if (tg->peer[i] == peer) {
            return;
        }
    }
    if (tg->n < GW_MCP_INTERESTS_MAX) {
        tg->peer[tg->n++] = peer;
    }
}

static void gather(const struct gw_mcp_interests *in, enum interest_kind kind,
                   const char *key, int msg_level, struct targets *tg)
{
    const struct gw_list *it;

    for (it = in->items.next; it != &in->items; it = it->next) {
        const struct gw_mcp_interest *r =
            GW_LIST_ENTRY(it, struct gw_mcp_interest, node);
        if (r->kind != kind) {
            continue;
        }
        if (kind == INTEREST_LEVEL ? r->level <= msg_level
                                   : strcmp(r->key, key) == 0) {
            targets_add(tg, r->peer);
        }
    }
}

bool gw__device_peers_on_notification(struct gw_mcp_peers *ps,
                                      struct gw_mcp_interests *in,
                                      const struct gw_device *dev,
                                      const struct gw_rpc *rpc)
{
    static struct targets tg; /* one loop thread; too big for the stack */
    char subject[GW_CLIENT_ID_MAX + 16];
    const char *key = NULL;
    enum interest_kind kind;
    enum gw_mcp_log_level level = GW_MCP_LOG_DEBUG;

    if (strcmp(rpc->method, "notifications/resources/updated") == 0) {
        kind = INTEREST_SUBSCRIPTION;
        key = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(rpc->params, "uri"));
    } else if (strcmp(rpc->method, "notifications/tasks/status") == 0) {
        kind = INTEREST_TASK;
        key = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(rpc->params, "taskId"));
    } else if (strcmp(rpc->method, "notifications/message") == 0) {
        kind = INTEREST_LEVEL;
        key = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(rpc->params, "level"));
        if (key != NULL && gw_mcp_log_level_parse(key, &level) != 0) {
            key = NULL;
        }
    } else {
        return false;
    }
    subject_of(in, subject, sizeof(subject));
    if (key == NULL) {
        ps->links->stats.refused++;
        gw_log_peer(GW_LOG_WARN, NULL, subject,
                    "%s without a valid %s: dropped", rpc->method,
                    kind == INTEREST_SUBSCRIPTION ? "uri"
                    : kind == INTEREST_TASK       ? "taskId"
                                                  : "level");
        return true;
    }
    tg.n = 0;
    gather(in, kind, key, (int)level, &tg);
    if (kind == INTEREST_LEVEL) {
        for (const struct gw_list *it = ps->all_devices.next;
             it != &ps->all_devices; it = it->next) {
            struct gw_mcp_peer *p = GW_LIST_ENTRY(it, struct gw_mcp_peer, node);
            if (p->level >= 0 && p->level <= (int)level) {
                targets_add(&tg, p);
            }
        }
    }
    if (tg.n == 0) {
        gw_log_peer(GW_LOG_DEBUG, NULL, subject, "%s for no listener: dropped",
                    rpc->method);
    }
    for (size_t i = 0; i < tg.n; i++) {
        tg.peer[i]->ops->notify(tg.peer[i], dev, rpc->method, rpc->params);
    }
    return true;
}

/* ---- a peer leaving ---- */

static void leave_device(struct gw_mcp_peers *ps, struct gw_mcp_interests *in,
                         struct gw_mcp_peer *peer)
{
    struct gw_list *it, *tmp;
    bool had_level = false;

    GW_LIST_FOREACH_SAFE(it, tmp, &in->items)
    {
        struct gw_mcp_interest *r =
            GW_LIST_ENTRY(it, struct gw_mcp_interest, node);
        if (r->peer != peer) {
            continue;
        }
        if (r->kind == INTEREST_SUBSCRIPTION) {
            char *uri = strdup(r->key);
            record_free(in, r);
            if (uri != NULL &&
                record_find(in, NULL, INTEREST_SUBSCRIPTION, uri) == NULL) {
                send_subscribe(ps, in, uri, false, NULL, GW_MCP_FROM_GATEWAY,
                               on_upkeep_reply, NULL, NULL);
            }
            free(uri); /* requests answer from the loop: tmp holds */
            continue;
        }
        had_level |= r->kind == INTEREST_LEVEL;
        record_free(in, r);
    }
    if (had_level) {
        apply_level(ps, in, GW_MCP_FROM_GATEWAY, NULL, NULL, NULL);
    }
}

void gw__device_peers_leave(struct gw_mcp_peers *ps, struct gw_mcp_peer *peer)
{
    bool had_level = gw_list_linked(&peer->node);

    if (had_level) {
        gw_list_unlink(&peer->node);
        peer->level = -1;
    }
    for (struct gw_mcp_interests *in = ps->next(ps->arg, NULL);
         in != NULL && (peer->n_interests > 0 || had_level);
         in = ps->next(ps->arg, in)) {
        if (peer->n_interests > 0) {
            leave_device(ps, in, peer);
        }
        if (had_level) {
            apply_level(ps, in, GW_MCP_FROM_GATEWAY, NULL, NULL, NULL);
        }
    }
}
