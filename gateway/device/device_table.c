/* The device records; see device_table.h. */
#include "gateway/device/device_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/jsonrpc.h"
#include "codec/mcp_caps.h"
#include "codec/mcp_tools.h"
#include "common/assert.h"
#include "common/log.h"
#include "gateway/device/mcp_catalog_int.h"
#include "gateway/device/mcp_discovery_int.h"
#include "gateway/device/mcp_link_int.h"
#include "gateway/device/mcp_peers_int.h"

static const char *const state_names[GW_DEVICE_STATE_COUNT_] = {
#define XX(name, text) [GW_DEVICE_##name] = text,
    GW_DEVICE_STATE_MAP(XX)
#undef XX
};
static const char *const change_names[GW_PRESENCE_CHANGE_COUNT_] = {
#define XX(name, text) [GW_PRESENCE_##name] = text,
    GW_PRESENCE_CHANGE_MAP(XX)
#undef XX
};

const char *gw_device_state_name(enum gw_device_state state)
{
    return (unsigned)state < GW_DEVICE_STATE_COUNT_ ? state_names[state] : "?";
}

const char *gw_presence_change_name(enum gw_presence_change change)
{
    return (unsigned)change < GW_PRESENCE_CHANGE_COUNT_ ? change_names[change]
                                                        : "?";
}

static void subject_of(const char *client_id, char *out, size_t cap)
{
    snprintf(out, cap, "dev=%s", client_id);
}

static void changed(struct gw_device_table *t, const struct gw_device *d,
                    unsigned what)
{
    if (t->on_changed != NULL && !t->closing) {
        t->on_changed(t->on_changed_arg, d, what);
    }
}

void gw_device_table_notify(struct gw_device_table *t,
                            const struct gw_device *d, unsigned what)
{
    changed(t, d, what);
}

/* Discovery finished or failed for the device that holds disc. */
static void on_tools_changed(void *arg, struct gw_mcp_discovery *disc,
                             unsigned what)
{
    struct gw_device *d = GW_CONTAINER_OF(disc, struct gw_device, discovery);

    /* A device going offline ends its discovery on the way: listeners
     * hear of that once, from record_gone. */
    if (d->state != GW_DEVICE_GONE) {
        changed(arg, d, what);
        if (d->catalog.known) {
            gw__device_peers_ready(&d->table->peers, &d->interests);
        }
    }
}

/* ---- the reaper ---- */

static void record_free(struct gw_device *d)
{
    GW_ASSERT(d->state == GW_DEVICE_GONE);
    GW_ASSERT(d->session == NULL);
    GW_ASSERT(d->link.n_pending == 0);
    gw_list_unlink(&d->reap_node);
    gw_tool_cache_clear(&d->tools);
    gw__device_catalog_clear(&d->catalog);
    cJSON_Delete(d->discovery.acc);
    free(d);
}

static void reap_all(struct gw_device_table *t)
{
    struct gw_list *first;

    while ((first = gw_list_first(&t->reap)) != NULL) {
        record_free(GW_LIST_ENTRY(first, struct gw_device, reap_node));
    }
}

static void on_reap(uv_idle_t *idle)
{
    struct gw_device_table *t = idle->data;

    reap_all(t);
    uv_idle_stop(idle);
}

/* ---- the table ---- */

/* The records as mcp_peers.c sees them: their interests. */
static struct gw_mcp_interests *peers_find(void *arg, const char *client_id)
{
    struct gw_device *d = gw_device_find(arg, client_id);

    return d != NULL ? &d->interests : NULL;
}

static struct gw_mcp_interests *peers_next(void *arg,
                                           const struct gw_mcp_interests *in)
{
    const struct gw_device_table *t = arg;
    struct gw_device *d =
        in == NULL ? t->by_id
                   : GW_CONTAINER_OF(in, struct gw_device, interests)->hh.next;

    return d != NULL ? &d->interests : NULL;
}

void gw_device_table_init(struct gw_device_table *t, uv_loop_t *loop,
                          const struct gw_config_live *config,
                          struct gw_publisher *pub)
{
    memset(t, 0, sizeof(*t));
    t->loop = loop;
    t->config = config;
    gw_list_init(&t->reap);
    uv_idle_init(loop, &t->reaper);
    t->reaper.data = t;
    uv_timer_init(loop, &t->grace);
    t->grace.data = t;
    t->epoch = 1; /* records start at 0: unconfirmed until told */
    gw__device_links_init(&t->links, loop, pub, config);
    gw__device_peers_init(&t->peers, &t->links, peers_find, peers_next, t);
    gw__device_discoverer_init(&t->discoverer, &t->links, config,
                               on_tools_changed, t);
}

void gw_device_table_set_listener(struct gw_device_table *t,
                                  gw_device_changed_cb cb, void *arg)
{
    t->on_changed = cb;
    t->on_changed_arg = arg;
}

void gw_device_table_set_request_handler(struct gw_device_table *t,
                                         gw_device_request_cb cb, void *arg)
{
    t->on_request = cb;
    t->on_request_arg = arg;
}

void gw_device_table_set_left_handler(struct gw_device_table *t,
                                      gw_device_left_cb cb, void *arg)
{
    t->on_left = cb;
    t->on_left_arg = arg;
}

void gw_device_table_set_owner(struct gw_device_table *t,
                               bool (*owns)(void *arg, const char *client_id),
                               void *arg)
{
    t->owns = owns;
    t->owns_arg = arg;
}

struct gw_device *gw_device_find(const struct gw_device_table *t,
                                 const char *client_id)
{
    struct gw_device *d = NULL;

    HASH_FIND_STR(t->by_id, client_id, d);
    return d;
}

struct gw_device *gw_device_find_label(const struct gw_device_table *t,
                                       const char *label)
{
    struct gw_device *d = NULL;

    HASH_FIND(label_hh, t->by_label, label, strlen(label), d);
    return d;
}

/*
 * A label another record already holds (a hash collision: not to be
 * found, but not to be trusted either) is refused to the newcomer: its
 * items get no name on /mcp, so the first device is never shadowed.
 * Found by index: a fleet coming back at once makes a record per device.
 */
static void label_claim(struct gw_device_table *t, struct gw_device *d)
{
    const struct gw_device *other = gw_device_find_label(t, d->label);
    char subject[GW_CLIENT_ID_MAX + 8];

    if (other == NULL) {
        HASH_ADD(label_hh, t->by_label, label, strlen(d->label), d);
        if (!GW_HASH_ADDED(d, label_hh)) {
            d->label[0] = '\0'; /* not findable: no name on /mcp */
        }
        return;
    }
    t->links.stats.label_clashes++;
    snprintf(subject, sizeof(subject), "dev=%s", d->client_id);
    gw_log_peer(GW_LOG_WARN, NULL, subject,
                "label %s is %s's already: this device's tools, resources and "
                "prompts are not on /mcp",
                d->label, other->client_id);
    d->label[0] = '\0';
}

struct gw_session *gw_device_session(const struct gw_device_table *t,
                                     const char *client_id)
{
    struct gw_device *d = gw_device_find(t, client_id);

    return d != NULL ? d->session : NULL;
}

size_t gw_device_table_online(const struct gw_device_table *t)
{
    return t->count;
}

struct gw_device *gw_device_table_first(const struct gw_device_table *t)
{
    return t->by_id;
}

struct gw_device *gw_device_table_next(const struct gw_device *dev)
{
    return dev->hh.next;
}

struct gw_mcp_links *gw_device_table_links(struct gw_device_table *t)
{
    return &t->links;
}

const struct gw_mcp_stats *
gw_device_table_mcp_stats(const struct gw_device_table *t)
{
    return &t->links.stats;
}

uv_loop_t *gw_device_table_loop(const struct gw_device_table *t)
{
    return t->loop;
}

static void label_drop(struct gw_device_table *t, struct gw_device *d)
{
    if (d->label[0] != '\0') {
        HASH_DELETE(label_hh, t->by_label, d);
    }
}

/* A new online record (not yet discovering); NULL with *rc set. */
static struct gw_device *record_add(struct gw_device_table *t,
                                    const char *client_id, int *rc)
{
    size_t len = strlen(client_id);
    struct gw_device *d;

    if (t->closing) {
        *rc = GW_ENOENT;
        return NULL;
    }
    if (t->count >= GW_DEVICE_TABLE_MAX) {
        *rc = GW_ELIMIT;
        return NULL;
    }
    if ((d = calloc(1, sizeof(*d))) == NULL) {
        *rc = GW_ENOMEM;
        return NULL;
    }
    struct gw_client_id id;
    if (len > GW_CLIENT_ID_MAX ||
        gw_client_id_parse(client_id, len, &id) != 0 ||
        gw_mcp_device_label(client_id, len, d->label) != 0) {
        free(d);
        *rc = GW_EINVAL;
        return NULL;
    }
    memcpy(d->client_id, client_id, len + 1);
    label_claim(t, d);
    d->table = t;
    d->state = GW_DEVICE_KNOWN;
    d->presence.since_ms = uv_now(t->loop);
    gw_list_init(&d->reap_node);
    gw_tool_cache_init(&d->tools);
    gw__device_catalog_init(&d->catalog);
    gw__device_interests_init(&d->interests, &d->link, &d->catalog);
    gw__device_link_open(&d->link, &t->links, d->client_id);
    gw__device_discovery_init(&d->discovery, &t->discoverer, &d->link,
                              &d->tools, &d->catalog);
    HASH_ADD_STR(t->by_id, client_id, d);
    if (!GW_HASH_ADDED(d, hh)) {
        label_drop(t, d);
        free(d);
        *rc = GW_ENOMEM;
        return NULL;
    }
    t->count++;
    *rc = 0;
    return d;
}

/* A device online (again): its tools are read unless already known. */
static void discover_if_needed(struct gw_device *d)
{
    const struct gw_config *cfg = gw_config_live_get(d->table->config);
    struct gw_device_table *t = d->table;

    /* Another instance owns it: that one runs its MCP client (and its
     * retries). */
    if (t->owns != NULL && !t->owns(t->owns_arg, d->client_id)) {
        if (d->discovery.state == GW_MCP_RETRYING) {
            gw__device_discovery_cancel(&d->discovery);
        }
        return;
    }
    /* One waiting for a retry goes now: its presence changed. */
    if (cfg->mcp.discover && (d->discovery.state == GW_MCP_IDLE ||
                              d->discovery.state == GW_MCP_FAILED ||
                              d->discovery.state == GW_MCP_RETRYING)) {
        gw__device_discovery_start(&d->discovery);
    }
}

/* The device is on a new connection: a new MCP session, whose server
 * (a rebooted device, esp-mcp's per-session gate) wants initialize
 * again. Its lists are read anew and replace the old ones. */
static void rediscover(struct gw_device *d)
{
    const struct gw_config *cfg = gw_config_live_get(d->table->config);
    struct gw_device_table *t = d->table;

    if (t->owns != NULL && !t->owns(t->owns_arg, d->client_id)) {
        return;
    }
    if (cfg->mcp.discover) {
        gw__device_discovery_start(&d->discovery);
    }
}

/*
 * The device is offline: out of the table, its requests ended with why
 * (their callbacks run from here), listeners told, memory reaped when the
 * loop turns. Starts nothing.
 */
static void record_gone(struct gw_device *d, enum gw_mcp_outcome why)
{
    struct gw_device_table *t = d->table;

    GW_ASSERT(d->state == GW_DEVICE_KNOWN);
    GW_ASSERT(d->session == NULL);
    d->state = GW_DEVICE_GONE;
    HASH_DEL(t->by_id, d);
    label_drop(t, d);
    t->count--;
    if (d->presence.online) {
        d->presence.online = false;
        t->presence_count--;
    }
    gw_list_insert_tail(&t->reap, &d->reap_node);
    if (!t->closing) {
        uv_idle_start(&t->reaper, on_reap);
    }
    gw__device_discovery_cancel(&d->discovery);
    gw__device_interests_clear(&d->interests);
    gw__device_link_close(&d->link, why);
    changed(t, d, GW_DEVICE_CHANGED_PRESENCE); /* GONE: listeners drop it */
}

/* ---- presence ---- */

struct gw_device_offline {
    UT_hash_handle hh;
    char client_id[GW_CLIENT_ID_MAX + 1];
};

/* Remembers an offline device; at the table's bound it is not kept (it
 * then counts as unknown, as without presence). */
static void offline_mark(struct gw_device_table *t, const char *client_id)
{
    struct gw_device_offline *o;
    size_t len = strlen(client_id);

    HASH_FIND_STR(t->offline, client_id, o);
    if (o != NULL || len > GW_CLIENT_ID_MAX ||
        t->n_offline >= GW_DEVICE_TABLE_MAX ||
        (o = calloc(1, sizeof(*o))) == NULL) {
        return;
    }
    memcpy(o->client_id, client_id, len + 1);
    HASH_ADD_STR(t->offline, client_id, o);
    if (!GW_HASH_ADDED(o, hh)) {
        free(o);
        return;
    }
    t->n_offline++;
}

static void offline_clear(struct gw_device_table *t, const char *client_id)
{
    struct gw_device_offline *o;

    HASH_FIND_STR(t->offline, client_id, o);
    if (o != NULL) {
        HASH_DEL(t->offline, o);
        free(o);
        t->n_offline--;
    }
}

static void offline_clear_all(struct gw_device_table *t)
{
    struct gw_device_offline *o, *tmp;

    HASH_ITER(hh, t->offline, o, tmp)
    {
        HASH_DEL(t->offline, o);
        free(o);
    }
    t->n_offline = 0;
}

bool gw_device_offline(const struct gw_device_table *t, const char *client_id)
{
    struct gw_device_offline *o;

    HASH_FIND_STR(t->offline, client_id, o);
    return o != NULL;
}

bool gw_device_confirmed(const struct gw_device *dev)
{
    return !dev->presence.online || dev->presence.epoch == dev->table->epoch;
}

/*
 * News about an older connection than the one on record. Brokers publish
 * presence in order, but an EMQX rule may report a taken-over session's
 * disconnect after the new connect; the connection number (the plugin's
 * counter, or EMQX's connected_at) puts them back in order. The plugin's
 * numbers restart with each broker run: a later run is newer whatever its
 * numbers; a broker that names no run restarts them unannounced, so its
 * numbers order only news heard since the link came back.
 */
static bool stale(const struct gw_device *d, const struct gw_presence *p)
{
    if (p->has_run && d->presence.run != 0 && p->run != d->presence.run) {
        return p->run < d->presence.run;
    }
    return p->has_conn && d->presence.conn != 0 && p->conn < d->presence.conn &&
           (d->presence.run != 0 || d->presence.epoch == d->table->epoch);
}

/* The broker said online since the link came back: shown ready again once
 * read; a new connection is a new MCP session. */
static void confirm(struct gw_device *d, bool renew)
{
    d->presence.epoch = d->table->epoch;
    d->presence.pending = false;
    d->presence.renew = false;
    if (renew) {
        rediscover(d);
    } else {
        discover_if_needed(d);
    }
}

/* A device the broker no longer speaks for: offline as if it said so. */
static void presence_lost(struct gw_device *d)
{
    struct gw_device_table *t = d->table;

    if (d->presence.online) {
        d->presence.online = false;
        t->presence_count--;
    }
}

static int on_presence(struct gw_device_table *t, const char *client_id,
                       const struct gw_presence *p, bool retained)
{
    struct gw_device *d = gw_device_find(t, client_id);
    bool was_online;
    int rc;

    if (d != NULL && stale(d, p)) {
        return GW_PRESENCE_SAME;
    }
    if (!p->online) {
        if (d == NULL) {
            offline_mark(t, client_id);
            return GW_PRESENCE_SAME;
        }
        presence_lost(d);
        d->presence.conn = p->conn;
        d->presence.run = p->run;
        offline_mark(t, client_id);
        if (d->session == NULL) {
            record_gone(d, GW_MCP_OFFLINE);
        }
        return GW_PRESENCE_LEFT;
    }
    /* What the broker publishes now names its current run. */
    if (!retained && p->has_run) {
        gw_device_table_broker_run(t, p->run);
    }
    offline_clear(t, client_id);
    if (d == NULL && (d = record_add(t, client_id, &rc)) == NULL) {
        return rc;
    }
    was_online = d->presence.online;
    /* Another connection than the one whose MCP session the gateway has:
     * it starts anew. */
    bool renew = was_online &&
                 (p->conn != d->presence.conn || p->run != d->presence.run);
    memcpy(d->presence.address, p->address, sizeof(d->presence.address));
    d->presence.conn = p->conn;
    d->presence.run = p->run;
    if (!was_online) {
        d->presence.online = true;
        t->presence_count++;
    }
    /* A retained online is the broker's word only when it is of the run
     * the broker is in; until that run is known it waits. One of a broker
     * that names no run is taken, as it always was. */
    if (!retained || !p->has_run || p->run == t->broker_run) {
        confirm(d, renew);
    } else if (t->broker_run == 0) {
        d->presence.pending = true;
        d->presence.renew = d->presence.renew || renew;
    }
    if (!was_online && d->session == NULL) {
        changed(t, d, GW_DEVICE_CHANGED_PRESENCE);
    }
    return !was_online ? GW_PRESENCE_ARRIVED
           : renew     ? GW_PRESENCE_RETURNED
                       : GW_PRESENCE_SAME;
}

int gw_device_on_presence(struct gw_device_table *t, const char *client_id,
                          const struct gw_presence *p)
{
    return on_presence(t, client_id, p, false);
}

int gw_device_on_retained_presence(struct gw_device_table *t,
                                   const char *client_id,
                                   const struct gw_presence *p)
{
    return on_presence(t, client_id, p, true);
}

/*
 * Runs are the broker's start times: the highest heard since link-up is
 * the current one (persistence may replay the run message of the run
 * before, if it comes first). A record confirmed by a retained online of
 * a lower run is unconfirmed again: only a live message, always of the
 * current run, or a retained one of it confirms.
 */
void gw_device_table_broker_run(struct gw_device_table *t, uint64_t run)
{
    if (run <= t->broker_run) {
        return;
    }
    t->broker_run = run;
    for (struct gw_device *d = t->by_id; d != NULL; d = d->hh.next) {
        if (d->presence.pending && d->presence.run == run) {
            confirm(d, d->presence.renew);
        } else if (d->presence.pending) {
            /* an earlier run's: the device has not come back (yet) */
            d->presence.pending = false;
        } else if (d->presence.run != 0 && d->presence.run < run &&
                   gw_device_confirmed(d)) {
            d->presence.epoch = t->epoch - 1;
        }
    }
}

/*
 * The grace after link-up is over: a device the broker has not said
 * online since is not connected to it (it would have been announced at
 * its connect, or replayed at subscribe). The ids first, then each
 * record, since ending a session may take others out of the table.
 */
static void on_grace(uv_timer_t *timer)
{
    struct gw_device_table *t = timer->data;
    char(*ids)[GW_CLIENT_ID_MAX + 1] = NULL;
    size_t n = 0;
    struct gw_device *d;

    for (d = t->by_id; d != NULL; d = d->hh.next) {
        n += !gw_device_confirmed(d);
    }
    if (n == 0 || (ids = calloc(n, sizeof(*ids))) == NULL) {
        if (n > 0) {
            gw_log(GW_LOG_ERROR, "presence",
                   "out of memory: %zu unconfirmed devices kept", n);
        }
        return;
    }
    n = 0;
    for (d = t->by_id; d != NULL; d = d->hh.next) {
        if (!gw_device_confirmed(d)) {
            memcpy(ids[n++], d->client_id, sizeof(d->client_id));
        }
    }
    size_t gone = 0;
    for (size_t i = 0; i < n; i++) {
        if ((d = gw_device_find(t, ids[i])) == NULL || gw_device_confirmed(d)) {
            continue;
        }
        presence_lost(d);
        t->expired++;
        gone++;
        if (d->session == NULL) {
            record_gone(d, GW_MCP_OFFLINE);
        } else if (t->on_left != NULL) {
            t->on_left(t->on_left_arg, d);
        }
    }
    gw_log(GW_LOG_INFO, "presence",
           "%zu device%s not confirmed by the broker within %d ms of its "
           "link came back: offline",
           gone, gone == 1 ? "" : "s",
           gw_config_live_get(t->config)->mqtt.presence_grace_ms);
    free(ids);
}

void gw_device_table_link_state(struct gw_device_table *t, bool up)
{
    t->epoch++;
    t->broker_run = 0;
    for (struct gw_device *d = t->by_id; d != NULL; d = d->hh.next) {
        d->presence.pending = false;
        d->presence.renew = false;
    }
    if (t->closing) {
        return;
    }
    if (!up) {
        uv_timer_stop(&t->grace);
        return;
    }
    /* The replay tells again what is offline. */
    offline_clear_all(t);
    uv_timer_start(
        &t->grace, on_grace,
        (uint64_t)gw_config_live_get(t->config)->mqtt.presence_grace_ms, 0);
}

/* ---- sessions ---- */

int gw_device_attach_session(struct gw_device_table *t, const char *client_id,
                             struct gw_session *s, const char *session_id,
                             struct gw_device **out)
{
    struct gw_device *d = gw_device_find(t, client_id);
    bool was_online = d != NULL;
    int rc;

    if (d == NULL && (d = record_add(t, client_id, &rc)) == NULL) {
        return rc;
    }
    GW_ASSERT(d->session == NULL);
    d->session = s;
    d->link.session_id = session_id;
    /* Also the start of the MCP link where no presence comes. */
    discover_if_needed(d);
    if (!was_online) {
        changed(t, d, GW_DEVICE_CHANGED_PRESENCE);
    }
    *out = d;
    return 0;
}

void gw_device_detach_session(struct gw_device *dev, struct gw_session *s,
                              bool keep_online)
{
    if (dev->session != s) {
        return;
    }
    dev->session = NULL;
    dev->link.session_id = "";
    /*
     * With no presence from the broker, a device is known only while it
     * talks: its record (and MCP link) ends with its last session.
     */
    if (!keep_online && !dev->presence.online &&
        dev->state == GW_DEVICE_KNOWN) {
        char subject[GW_CLIENT_ID_MAX + 8];
        subject_of(dev->client_id, subject, sizeof(subject));
        gw_log_peer(GW_LOG_DEBUG, NULL, subject,
                    "offline: %zu MCP request%s failed", dev->link.n_pending,
                    dev->link.n_pending == 1 ? "" : "s");
        record_gone(dev, GW_MCP_OFFLINE);
    }
}

/* ---- MCP ---- */

void gw_device_table_owners_changed(struct gw_device_table *t)
{
    for (struct gw_device *d = t->by_id; d != NULL; d = d->hh.next) {
        if (d->presence.online) {
            discover_if_needed(d);
        }
    }
}

void gw_device_settle(struct gw_device_table *t, const char *client_id)
{
    struct gw_device *d = gw_device_find(t, client_id);

    if (d != NULL && d->session == NULL && !d->presence.online) {
        record_gone(d, GW_MCP_OFFLINE);
    }
}

int gw_device_refresh(struct gw_device_table *t, const char *client_id)
{
    struct gw_device *d = gw_device_find(t, client_id);

    if (d == NULL) {
        return GW_ENOENT;
    }
    gw__device_discovery_start(&d->discovery);
    return 0;
}

/* A request of the device's own: true when the gateway answered it. */
static bool device_request(struct gw_device_table *t, struct gw_device *d,
                           const struct gw_rpc *rpc, const char *subject)
{
    unsigned need = gw_mcp_method_client_cap(rpc->method);
    char text[96];

    if (strcmp(rpc->method, "ping") == 0) {
        (void)gw_mcp_link_respond(&d->link, rpc->id, cJSON_CreateObject(),
                                  NULL);
        return true;
    }
    if (need == 0) {
        return false; /* the backend's to answer, as ever */
    }
    if (t->on_request != NULL && t->on_request(t->on_request_arg, d, rpc)) {
        return true;
    }
    snprintf(text, sizeof(text), "no MCP client of this device declared %s",
             gw_mcp_client_cap_name(need));
    gw_log_peer(GW_LOG_INFO, NULL, subject, "%s refused: %s", rpc->method,
                text);
    (void)gw_mcp_link_respond_error(&d->link, rpc->id, GW_RPC_NO_CLIENT, text);
    return true;
}

/* A notification of the device: true when consumed here. */
static bool device_notification(struct gw_device_table *t, struct gw_device *d,
                                const struct gw_rpc *rpc, const char *subject)
{
    const char *m = rpc->method;

    int kind = strcmp(m, "notifications/tools/list_changed") == 0 ? -1
               : strcmp(m, "notifications/resources/list_changed") == 0
                   ? GW_MCP_LIST_RESOURCES
               : strcmp(m, "notifications/prompts/list_changed") == 0
                   ? GW_MCP_LIST_PROMPTS
                   : -2;

    if (kind != -2) {
        t->links.stats.list_changed++;
        gw_log_peer(GW_LOG_INFO, NULL, subject, "%s: reading the lists again",
                    m + sizeof("notifications/") - 1);
        /* Its owner reads them (a session here may hear it too). */
        if (t->owns == NULL || t->owns(t->owns_arg, d->client_id)) {
            gw__device_discovery_list_changed(&d->discovery, kind);
        }
        return false; /* the backend may want it too */
    }
    if (strcmp(m, "notifications/progress") == 0) {
        if (!gw__device_link_on_progress(&d->link, rpc)) {
            t->links.stats.unsolicited++;
            gw_log_peer(GW_LOG_DEBUG, NULL, subject,
                        "progress for no request: dropped");
        }
        return true;
    }
    if (strcmp(m, "notifications/cancelled") == 0) {
        /* A request of its own it withdraws: the MCP client's, or else
         * the backend's to hear. */
        return t->on_request != NULL &&
               t->on_request(t->on_request_arg, d, rpc);
    }
    return gw__device_peers_on_notification(&t->peers, &d->interests, d, rpc);
}

bool gw_device_on_mcp(struct gw_device_table *t, const char *client_id,
                      const struct gw_envelope *env)
{
    const cJSON *payload =
        cJSON_GetObjectItemCaseSensitive(env->root, "payload");
    struct gw_device *d = gw_device_find(t, client_id);
    char subject[GW_CLIENT_ID_MAX + 16];
    struct gw_rpc rpc;

    snprintf(subject, sizeof(subject), "dev=%s mcp", client_id);
    if (gw_rpc_classify(payload, &rpc) != 0) {
        t->links.stats.refused++;
        gw_log_peer(GW_LOG_WARN, NULL, subject,
                    "mcp payload is not JSON-RPC: dropped");
        return true;
    }
    if (rpc.kind == GW_RPC_RESPONSE) {
        if (d != NULL) {
            if (gw__device_link_on_response(&d->link, &rpc) && d->link.open) {
                gw__device_peers_reinitialized(&t->peers, &d->interests);
            }
        } else {
            t->links.stats.unsolicited++;
            gw_log_peer(GW_LOG_DEBUG, NULL, subject,
                        "response from an unknown device");
        }
        return true;
    }
    if (d == NULL) {
        return false;
    }
    return rpc.kind == GW_RPC_REQUEST
               ? device_request(t, d, &rpc, subject)
               : device_notification(t, d, &rpc, subject);
}

/* ---- the devices' peers ---- */

void gw_mcp_peer_leave(struct gw_device_table *t, struct gw_mcp_peer *peer)
{
    gw__device_peers_leave(&t->peers, peer);
}

void gw_mcp_subscribe(struct gw_device_table *t, struct gw_device *dev,
                      struct gw_mcp_peer *peer, const char *uri, bool on,
                      enum gw_mcp_origin origin, gw_mcp_reply_cb cb, void *arg,
                      uint64_t *handle)
{
    gw__device_peers_subscribe(&t->peers, &dev->interests, peer, uri, on,
                               origin, cb, arg, handle);
}

void gw_mcp_set_level(struct gw_device_table *t, struct gw_device *dev,
                      struct gw_mcp_peer *peer, enum gw_mcp_log_level level,
                      enum gw_mcp_origin origin, gw_mcp_reply_cb cb, void *arg,
                      uint64_t *handle)
{
    gw__device_peers_set_level(&t->peers, dev != NULL ? &dev->interests : NULL,
                               peer, level, origin, cb, arg, handle);
}

void gw_mcp_task_created(struct gw_device *dev, struct gw_mcp_peer *peer,
                         const char *task_id)
{
    gw__device_peers_task_created(&dev->interests, peer, task_id);
}

bool gw_mcp_task_owned(const struct gw_device *dev,
                       const struct gw_mcp_peer *peer, const char *task_id)
{
    return gw__device_peers_task_owned(&dev->interests, peer, task_id);
}

/* ---- shutdown ---- */

static void on_reaper_closed(uv_handle_t *handle)
{
    struct gw_device_table *t = handle->data;

    reap_all(t);
    if (t->close_cb != NULL) {
        t->close_cb(t, t->close_arg);
    }
}

static void on_retry_closed(uv_handle_t *handle)
{
    struct gw_device_table *t =
        GW_CONTAINER_OF(handle, struct gw_device_table, discoverer.retry_timer);

    uv_close((uv_handle_t *)&t->reaper, on_reaper_closed);
}

static void on_grace_closed(uv_handle_t *handle)
{
    struct gw_device_table *t = handle->data;

    gw__device_discoverer_close(&t->discoverer, on_retry_closed);
}

void gw_device_table_close(struct gw_device_table *t,
                           void (*cb)(struct gw_device_table *t, void *arg),
                           void *arg)
{
    struct gw_device *d;

    if (t->closing) {
        return;
    }
    t->closing = true;
    t->close_cb = cb;
    t->close_arg = arg;
    gw__device_discoverer_stop(&t->discoverer);
    while ((d = t->by_id) != NULL) {
        if (d->session != NULL) {
            /* Sessions have ended by now; a straggler lets go here. */
            d->session = NULL;
            d->link.session_id = "";
        }
        record_gone(d, GW_MCP_CANCELLED);
    }
    offline_clear_all(t);
    gw__device_links_close(&t->links);
    uv_idle_stop(&t->reaper);
    uv_close((uv_handle_t *)&t->grace, on_grace_closed);
}
