/*
 * hybridgw's Mosquitto 2.0 plugin (v5 API, docs/architecture.md section 2):
 * xiaozhi device auth and ACLs, uplink topic rewrite, direct downlink delivery,
 * retained presence and the gateway's revocations (unbound devices refused
 * and kicked). The decisions live in policy.c, clients.c and revoked.c; this
 * file only wires them to the broker's events.
 *
 * Mosquitto 2.0.11 has no connect event: a device is announced online from
 * its successful auth. The broker checks a will right after the disconnect
 * event, when the connection is no longer in the table: the plugin keeps
 * the departed connection's role for that one check. Only the gateway
 * account's will to plugin_opt_gateway_status_topic passes; a device's
 * never does, presence already tells the gateway that the device is gone.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mosquitto.h>
#include <mosquitto_broker.h>
#include <mosquitto_plugin.h>

#include "broker/backlog.h"
#include "broker/clients.h"
#include "broker/options.h"
#include "broker/policy.h"
#include "broker/revoked.h"
#include "codec/revocation.h"

/* Built with -fvisibility=hidden: only the entry points are exported. */
#define GW_EXPORT __attribute__((visibility("default")))

#define LOG_PREFIX "hybridgw_broker: "

/* Presence is rare and small; retained so a restarting gateway learns. */
#define PRESENCE_QOS     1
#define PRESENCE_PAYLOAD 160
#define LOGGED_TEXT_MAX  160

_Static_assert(GW_BROKER_ACCESS_READ == MOSQ_ACL_READ, "acl read");
_Static_assert(GW_BROKER_ACCESS_WRITE == MOSQ_ACL_WRITE, "acl write");
_Static_assert(GW_BROKER_ACCESS_SUBSCRIBE == MOSQ_ACL_SUBSCRIBE, "acl sub");
_Static_assert(GW_BROKER_ACCESS_UNSUBSCRIBE == MOSQ_ACL_UNSUBSCRIBE,
               "acl unsub");

struct plugin {
    mosquitto_plugin_id_t *pid;
    struct gw_broker_options opts;
    struct gw_broker_clients *clients;
    struct gw_broker_revoked *revoked;
    uint64_t oversized;        /* device publishes refused for size, in all */
    uint64_t retained;         /* device publishes whose retain was cleared */
    uint64_t refused_revoked;  /* CONNECTs with revoked credentials */
    uint64_t refused_reserved; /* device ids in the gateways' group */
    uint64_t revocations;      /* revocation messages taken */
    uint64_t revocations_bad;  /* ... refused as malformed */
    uint64_t revoked_dropped;  /* entries lost to a full table */
    uint64_t kicked;           /* connections ended by a revocation */
    /* The connection whose disconnect event came last, for its will's
     * ACL check, which follows at once; cleared by any other event. */
    const void *departed;
    enum gw_broker_role departed_role;
    /* This broker run, from the wall clock at start: in every presence
     * message, since connection numbers restart with the broker. */
    uint64_t run;
    bool backlog_done; /* the listeners' backlog was seen to */
};

/* The 1st, 2nd, 4th, 8th... of a connection's refusals: a device that
 * floods cannot flood the log, and the count still shows. */
static int flood_level(uint64_t n)
{
    return (n & (n - 1)) == 0 ? MOSQ_LOG_NOTICE : MOSQ_LOG_DEBUG;
}

/*
 * Client ids and topics come from the network: printed with control
 * characters masked and a length cap, so a log line stays one line.
 */
static const char *printable(const char *s, char buf[LOGGED_TEXT_MAX + 4])
{
    size_t n = 0;

    if (s == NULL) {
        return "(none)";
    }
    for (; s[n] != '\0' && n < LOGGED_TEXT_MAX; n++) {
        unsigned char ch = (unsigned char)s[n];
        buf[n] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    if (s[n] != '\0') {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
    return buf;
}

static const char *access_name(int access)
{
    switch (access) {
    case MOSQ_ACL_READ:
        return "read";
    case MOSQ_ACL_WRITE:
        return "write";
    case MOSQ_ACL_SUBSCRIBE:
        return "subscribe";
    case MOSQ_ACL_UNSUBSCRIBE:
        return "unsubscribe";
    default:
        return "access";
    }
}

static void publish_presence(struct plugin *p,
                             const struct gw_broker_presence *ev)
{
    char topic[GW_BROKER_TOPIC_MAX + 1];
    char payload[PRESENCE_PAYLOAD];
    char idbuf[LOGGED_TEXT_MAX + 4];
    int n;

    if (!ev->publish) {
        return;
    }
    if (gw_broker_topic_make(&p->opts, ev->client_id, "presence", topic,
                             sizeof(topic)) != 0 ||
        (n = gw_broker_presence_format(ev->online, ev->address, ev->conn,
                                       p->run, payload, sizeof(payload))) < 0) {
        return; /* cannot happen: ids and addresses are bounded */
    }
    int rc = mosquitto_broker_publish_copy(NULL, topic, n, payload,
                                           PRESENCE_QOS, true, NULL);
    if (rc != MOSQ_ERR_SUCCESS) {
        mosquitto_log_printf(MOSQ_LOG_WARNING,
                             LOG_PREFIX "device '%s': presence not published: "
                                        "%s",
                             printable(ev->client_id, idbuf),
                             mosquitto_strerror(rc));
        return;
    }
    mosquitto_log_printf(MOSQ_LOG_INFO, LOG_PREFIX "device '%s' %s (conn %llu)",
                         printable(ev->client_id, idbuf),
                         ev->online ? "online" : "offline",
                         (unsigned long long)ev->conn);
}

/*
 * The run, retained on <prefix>/$broker/presence (no client id can be
 * "$broker"): a gateway that subscribes learns which run is current, so
 * a retained online of an earlier run (kept by persistence for a device
 * that has not come back) is not taken for a live connection
 * (docs/protocol.md section 2.3). Published at start and again to each
 * gateway account that authenticates, in case persistence brought back an
 * older one after the first.
 */
static void publish_run(struct plugin *p)
{
    char topic[GW_BROKER_TOPIC_MAX + 1];
    char payload[64];
    int t = snprintf(topic, sizeof(topic), "%s/$broker/presence",
                     p->opts.topic_prefix);
    int n = snprintf(payload, sizeof(payload), "{\"run\":%llu}",
                     (unsigned long long)p->run);

    if (t < 0 || (size_t)t >= sizeof(topic) || n < 0 ||
        (size_t)n >= sizeof(payload)) {
        return; /* cannot happen: the prefix is bounded */
    }
    int rc = mosquitto_broker_publish_copy(NULL, topic, n, payload,
                                           PRESENCE_QOS, true, NULL);
    if (rc != MOSQ_ERR_SUCCESS) {
        mosquitto_log_printf(MOSQ_LOG_WARNING,
                             LOG_PREFIX "run not published: %s",
                             mosquitto_strerror(rc));
    }
}

/*
 * Mosquitto 2.0 listens with a backlog of 100: a fleet reconnecting at once
 * after a restart overflows it, and each dropped handshake waits out TCP's
 * retransmission (seconds). The listeners open after plugin init, so this
 * runs at the first tick (or first auth: 2.0.11 has no tick with
 * per_listener_settings); Linux takes a new backlog from a second listen().
 */
static void raise_backlog(struct plugin *p)
{
    int want = p->opts.listen_backlog_n;
    int max = gw_broker_backlog_somaxconn();

    if (p->backlog_done) {
        return;
    }
    p->backlog_done = true;
    if (want == 0) {
        mosquitto_log_printf(MOSQ_LOG_INFO,
                             LOG_PREFIX "listen backlog left as the broker "
                                        "set it (plugin_opt_listen_backlog 0)");
        return;
    }
    if (want < 0) {
        if (max < 0) {
            mosquitto_log_printf(MOSQ_LOG_WARNING,
                                 LOG_PREFIX "listen backlog left as the broker "
                                            "set it: net.core.somaxconn "
                                            "unreadable");
            return;
        }
        want = max;
    }
    int n = gw_broker_backlog_raise(want);
    if (n <= 0) {
        mosquitto_log_printf(MOSQ_LOG_WARNING,
                             LOG_PREFIX "listen backlog not raised: %s",
                             n < 0 ? gw_strerror(n) : "no TCP listener found");
        return;
    }
    mosquitto_log_printf(MOSQ_LOG_NOTICE,
                         LOG_PREFIX "listen backlog %d on %d TCP listener%s "
                                    "(net.core.somaxconn %d caps it)",
                         want, n, n == 1 ? "" : "s", max);
}

static int on_tick(int event, void *event_data, void *userdata)
{
    (void)event;
    (void)event_data;
    raise_backlog(userdata);
    return MOSQ_ERR_SUCCESS;
}

static int on_basic_auth(int event, void *event_data, void *userdata)
{
    struct mosquitto_evt_basic_auth *ed = event_data;
    struct plugin *p = userdata;
    struct gw_broker_presence ev;
    char idbuf[LOGGED_TEXT_MAX + 4];
    const char *id = mosquitto_client_id(ed->client);
    const char *address = mosquitto_client_address(ed->client);
    (void)event;

    raise_backlog(p);
    p->departed = NULL;
    uint64_t binding;
    enum gw_broker_auth a = gw_broker_auth_check(
        &p->opts, p->revoked, id, ed->username, ed->password, &binding);
    enum gw_broker_role role = gw_broker_auth_role(a);
    if (role == GW_BROKER_ROLE_NONE) {
        /* An unbound device retries without end: those two are counted,
         * and logged for the 1st, 2nd, 4th, 8th... */
        uint64_t *count = a == GW_BROKER_AUTH_REVOKED ? &p->refused_revoked
                          : a == GW_BROKER_AUTH_RESERVED_GROUP
                              ? &p->refused_reserved
                              : NULL;
        if (count == NULL) {
            mosquitto_log_printf(
                MOSQ_LOG_NOTICE, LOG_PREFIX "refused client '%s' from %s: %s",
                printable(id, idbuf), address != NULL ? address : "?",
                gw_broker_auth_text(a));
        } else {
            ++*count;
            mosquitto_log_printf(
                flood_level(*count),
                LOG_PREFIX "refused client '%s' from %s: %s (%llu in all)",
                printable(id, idbuf), address != NULL ? address : "?",
                gw_broker_auth_text(a), (unsigned long long)*count);
        }
        return MOSQ_ERR_AUTH;
    }
    if (gw_broker_clients_add(p->clients, ed->client, role, id, address,
                              binding, &ev) != 0) {
        mosquitto_log_printf(MOSQ_LOG_ERR,
                             LOG_PREFIX "refused client '%s': out of memory",
                             printable(id, idbuf));
        return MOSQ_ERR_AUTH;
    }
    mosquitto_log_printf(MOSQ_LOG_DEBUG,
                         LOG_PREFIX "client '%s' from %s authenticated as %s",
                         printable(id, idbuf), address != NULL ? address : "?",
                         gw_broker_auth_text(a));
    publish_presence(p, &ev);
    if (role == GW_BROKER_ROLE_GATEWAY) {
        publish_run(p);
    }
    return MOSQ_ERR_SUCCESS;
}

static int on_acl_check(int event, void *event_data, void *userdata)
{
    struct mosquitto_evt_acl_check *ed = event_data;
    struct plugin *p = userdata;
    char idbuf[LOGGED_TEXT_MAX + 4];
    char topicbuf[LOGGED_TEXT_MAX + 4];
    (void)event;

    struct gw_broker_conn_info *c =
        gw_broker_clients_find(p->clients, ed->client);
    if (c != NULL && gw_broker_acl_allows(&p->opts, c->role, c->client_id,
                                          ed->access, ed->topic)) {
        return MOSQ_ERR_SUCCESS;
    }
    if (c == NULL && ed->client == p->departed) {
        /* A will: the broker asks right after the disconnect event. */
        enum gw_broker_role role = p->departed_role;
        p->departed = NULL;
        if (gw_broker_will_allows(&p->opts, role, ed->access, ed->topic)) {
            mosquitto_log_printf(MOSQ_LOG_NOTICE,
                                 LOG_PREFIX
                                 "the gateway's will on '%s' let through",
                                 printable(ed->topic, topicbuf));
            return MOSQ_ERR_SUCCESS;
        }
    }
    /* A misbehaving device could flood the log: one notice per connection. */
    int level =
        c != NULL && c->denials++ == 0 ? MOSQ_LOG_NOTICE : MOSQ_LOG_DEBUG;
    mosquitto_log_printf(
        level, LOG_PREFIX "denied %s of '%s' to client '%s'",
        access_name(ed->access), printable(ed->topic, topicbuf),
        printable(c != NULL ? c->client_id : mosquitto_client_id(ed->client),
                  idbuf));
    return MOSQ_ERR_ACL_DENIED;
}

/* Swaps the stored message's topic for a copy of topic. */
static int replace_topic(struct mosquitto_evt_message *ed, const char *topic)
{
    char *copy = mosquitto_strdup(topic);

    if (copy == NULL) {
        return MOSQ_ERR_NOMEM;
    }
#if LIBMOSQUITTO_VERSION_NUMBER < 2000015
    /* Before 2.0.15 the broker overwrites the pointer without freeing it. */
    mosquitto_free(ed->topic);
#endif
    ed->topic = copy;
    return MOSQ_ERR_SUCCESS;
}

/*
 * A device's publish within plugin_opt_max_message_bytes, with its retain
 * flag cleared: firmware never retains, and a retained device message
 * would be replayed to the gateway at every subscribe (a retained hello
 * started a session at each gateway start). False: refuse it.
 */
static bool device_publish_ok(struct plugin *p, struct gw_broker_conn_info *c,
                              struct mosquitto_evt_message *ed)
{
    char idbuf[LOGGED_TEXT_MAX + 4];

    if (ed->payloadlen > p->opts.max_message_bytes) {
        p->oversized++;
        c->oversized++;
        mosquitto_log_printf(
            flood_level(c->oversized),
            LOG_PREFIX "device '%s': publish of %lu bytes refused, over "
                       "plugin_opt_max_message_bytes %lu (%llu from this "
                       "connection, %llu in all)",
            printable(c->client_id, idbuf), (unsigned long)ed->payloadlen,
            (unsigned long)p->opts.max_message_bytes,
            (unsigned long long)c->oversized, (unsigned long long)p->oversized);
        return false;
    }
    if (ed->retain) {
        ed->retain = false;
        p->retained++;
        c->retained++;
        mosquitto_log_printf(
            flood_level(c->retained),
            LOG_PREFIX "device '%s': retain flag cleared (%llu from this "
                       "connection, %llu in all)",
            printable(c->client_id, idbuf), (unsigned long long)c->retained,
            (unsigned long long)p->retained);
    }
    return true;
}

/* One entry of a revocation: raise, then end the connection it unbinds. */
static int revoke_entry(void *arg, const char *client_id, uint64_t below)
{
    struct plugin *p = arg;
    char idbuf[LOGGED_TEXT_MAX + 4];
    int rc = gw_broker_revoked_raise(p->revoked, client_id, below);

    if (rc < 0) {
        p->revoked_dropped++;
        mosquitto_log_printf(
            flood_level(p->revoked_dropped) == MOSQ_LOG_NOTICE ? MOSQ_LOG_ERR
                                                               : MOSQ_LOG_DEBUG,
            LOG_PREFIX "revocation of '%s' not kept: %s (%u client ids held, "
                       "%llu lost in all)",
            printable(client_id, idbuf),
            rc == GW_ELIMIT ? "table full" : "out of memory",
            gw_broker_revoked_count(p->revoked),
            (unsigned long long)p->revoked_dropped);
    }
    /* Kicked even when the table could not keep it: this connection at
     * least ends. The broker's disconnect event runs inside the kick. */
    if (gw_broker_clients_current_below(p->clients, client_id, below) &&
        mosquitto_kick_client_by_clientid(client_id, false) ==
            MOSQ_ERR_SUCCESS) {
        p->kicked++;
        mosquitto_log_printf(MOSQ_LOG_NOTICE,
                             LOG_PREFIX "device '%s' kicked: credentials "
                                        "revoked (binding id below %llu; %llu "
                                        "in all)",
                             printable(client_id, idbuf),
                             (unsigned long long)below,
                             (unsigned long long)p->kicked);
    }
    return 0;
}

/* The gateway's {"revoke":...}: applied, and never delivered to anyone. */
static int take_revocation(struct plugin *p, struct gw_broker_conn_info *c,
                           const struct mosquitto_evt_message *ed)
{
    char idbuf[LOGGED_TEXT_MAX + 4];
    uint64_t kicked = p->kicked;
    int n = gw_revocation_parse(ed->payload, ed->payloadlen, revoke_entry, p);

    if (n < 0) {
        p->revocations_bad++;
        mosquitto_log_printf(MOSQ_LOG_WARNING,
                             LOG_PREFIX "revocation from '%s' refused: %s "
                                        "(%llu in all)",
                             printable(c->client_id, idbuf), gw_strerror(n),
                             (unsigned long long)p->revocations_bad);
        return MOSQ_ERR_ACL_DENIED;
    }
    p->revocations++;
    mosquitto_log_printf(MOSQ_LOG_NOTICE,
                         LOG_PREFIX "revocation from '%s': %d entries, %llu "
                                    "kicked (%u client ids held; %llu "
                                    "revocations in all)",
                         printable(c->client_id, idbuf), n,
                         (unsigned long long)(p->kicked - kicked),
                         gw_broker_revoked_count(p->revoked),
                         (unsigned long long)p->revocations);
    return MOSQ_ERR_ACL_DENIED;
}

static int on_message(int event, void *event_data, void *userdata)
{
    struct mosquitto_evt_message *ed = event_data;
    struct plugin *p = userdata;
    char out[GW_BROKER_TOPIC_MAX + 1];
    char idbuf[LOGGED_TEXT_MAX + 4];
    int rc;
    (void)event;

    p->departed = NULL;
    struct gw_broker_conn_info *c =
        gw_broker_clients_find(p->clients, ed->client);
    if (c == NULL) {
        return MOSQ_ERR_SUCCESS;
    }
    if (c->role == GW_BROKER_ROLE_DEVICE && !device_publish_ok(p, c, ed)) {
        return MOSQ_ERR_ACL_DENIED;
    }
    switch (gw_broker_route_publish(&p->opts, c->role, c->client_id, ed->topic,
                                    out, sizeof(out))) {
    case GW_BROKER_ROUTE_PASS:
        return MOSQ_ERR_SUCCESS;
    case GW_BROKER_ROUTE_REWRITE:
        return replace_topic(ed, out);
    case GW_BROKER_ROUTE_DIRECT:
        /*
         * Straight to the one client, subscribed or not (stock firmware
         * never subscribes); the original is then refused so that a
         * device that did subscribe does not get a second copy.
         */
        rc = mosquitto_broker_publish_copy(out, ed->topic, (int)ed->payloadlen,
                                           ed->payload, ed->qos, false, NULL);
        if (rc != MOSQ_ERR_SUCCESS) {
            mosquitto_log_printf(MOSQ_LOG_WARNING,
                                 LOG_PREFIX "downlink to '%s' lost: %s",
                                 printable(out, idbuf), mosquitto_strerror(rc));
        }
        return MOSQ_ERR_ACL_DENIED;
    case GW_BROKER_ROUTE_REVOKE:
        return take_revocation(p, c, ed);
    case GW_BROKER_ROUTE_DROP:
        break;
    }
    mosquitto_log_printf(MOSQ_LOG_DEBUG,
                         LOG_PREFIX "dropped a downlink to an id too long for "
                                    "a device");
    return MOSQ_ERR_ACL_DENIED;
}

static int on_disconnect(int event, void *event_data, void *userdata)
{
    struct mosquitto_evt_disconnect *ed = event_data;
    struct plugin *p = userdata;
    struct gw_broker_presence ev;
    char idbuf[LOGGED_TEXT_MAX + 4];
    (void)event;

    struct gw_broker_conn_info *c =
        gw_broker_clients_find(p->clients, ed->client);
    p->departed = NULL;
    if (c == NULL) {
        return MOSQ_ERR_SUCCESS;
    }
    p->departed = ed->client;
    p->departed_role = c->role;
    bool device = c->role == GW_BROKER_ROLE_DEVICE;
    mosquitto_log_printf(MOSQ_LOG_DEBUG, LOG_PREFIX "client '%s' disconnected",
                         printable(c->client_id, idbuf));
    gw_broker_clients_remove(p->clients, ed->client, &ev);
    if (device && !ev.publish) {
        /*
         * Mosquitto 2.0 ends a taken-over connection while the new one
         * connects, after the new one's auth announced it online.
         */
        mosquitto_log_printf(MOSQ_LOG_DEBUG,
                             LOG_PREFIX "an older connection of '%s' ended "
                                        "(taken over): presence unchanged",
                             idbuf);
    }
    publish_presence(p, &ev);
    return MOSQ_ERR_SUCCESS;
}

static const struct {
    int event;
    MOSQ_FUNC_generic_callback cb;
} callbacks[] = {
    {MOSQ_EVT_BASIC_AUTH, on_basic_auth},
    {MOSQ_EVT_ACL_CHECK, on_acl_check},
    {MOSQ_EVT_MESSAGE, on_message},
    {MOSQ_EVT_DISCONNECT, on_disconnect},
    {MOSQ_EVT_TICK, on_tick},
};

#define N_CALLBACKS (sizeof(callbacks) / sizeof(callbacks[0]))

static void plugin_free(struct plugin *p, size_t registered)
{
    for (size_t i = 0; i < registered; i++) {
        mosquitto_callback_unregister(p->pid, callbacks[i].event,
                                      callbacks[i].cb, NULL);
    }
    gw_broker_clients_destroy(p->clients);
    gw_broker_revoked_destroy(p->revoked);
    gw_broker_options_free(&p->opts);
    free(p);
}

GW_EXPORT int mosquitto_plugin_version(int supported_version_count,
                                       const int *supported_versions)
{
    for (int i = 0; i < supported_version_count; i++) {
        if (supported_versions[i] == MOSQ_PLUGIN_VERSION) {
            return MOSQ_PLUGIN_VERSION;
        }
    }
    return -1;
}

static int load_options(struct plugin *p, const struct mosquitto_opt *options,
                        int option_count)
{
    char err[256] = "";

    for (int i = 0; i < option_count; i++) {
        if (gw_broker_options_set(&p->opts, options[i].key, options[i].value,
                                  err, sizeof(err)) != 0) {
            goto fail;
        }
    }
    if (gw_broker_options_check(&p->opts, err, sizeof(err)) == 0) {
        return 0;
    }
fail:
    mosquitto_log_printf(MOSQ_LOG_ERR, LOG_PREFIX "%s; refusing to start",
                         err[0] != '\0' ? err : "out of memory");
    return -1;
}

GW_EXPORT int mosquitto_plugin_init(mosquitto_plugin_id_t *identifier,
                                    void **userdata,
                                    struct mosquitto_opt *options,
                                    int option_count)
{
    struct plugin *p = calloc(1, sizeof(*p));
    size_t registered = 0;

    if (p == NULL) {
        return MOSQ_ERR_NOMEM;
    }
    p->pid = identifier;
    if (load_options(p, options, option_count) != 0 ||
        gw_broker_clients_create(&p->clients) != 0 ||
        gw_broker_revoked_create(&p->revoked) != 0) {
        plugin_free(p, 0);
        return MOSQ_ERR_INVAL;
    }
    for (; registered < N_CALLBACKS; registered++) {
        int rc =
            mosquitto_callback_register(identifier, callbacks[registered].event,
                                        callbacks[registered].cb, NULL, p);
        if (rc != MOSQ_ERR_SUCCESS) {
            mosquitto_log_printf(MOSQ_LOG_ERR,
                                 LOG_PREFIX "cannot register for event %d: "
                                            "%s; refusing to start",
                                 callbacks[registered].event,
                                 mosquitto_strerror(rc));
            plugin_free(p, registered);
            return rc;
        }
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    p->run = (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u;
    publish_run(p);
    mosquitto_log_printf(
        MOSQ_LOG_INFO,
        LOG_PREFIX "run %llu: devices publish on '%s', "
                   "per-device "
                   "topics '%s/<client_id>/up|down|presence', "
                   "at most %lu bytes; revocations on '%s'",
        (unsigned long long)p->run, p->opts.device_topic, p->opts.topic_prefix,
        (unsigned long)p->opts.max_message_bytes, p->opts.revoke_topic);
    *userdata = p;
    return MOSQ_ERR_SUCCESS;
}

GW_EXPORT int mosquitto_plugin_cleanup(void *userdata,
                                       struct mosquitto_opt *options,
                                       int option_count)
{
    (void)options;
    (void)option_count;
    if (userdata != NULL) {
        plugin_free(userdata, N_CALLBACKS);
    }
    return MOSQ_ERR_SUCCESS;
}
