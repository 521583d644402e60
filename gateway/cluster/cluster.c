/* Membership and ownership among instances; see cluster.h. */
#include "gateway/cluster/cluster.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codec/instance_record.h"
#include "common/hash.h"
#include "common/log.h"
#include "gateway/cluster/cluster_int.h"
#include "gateway/core/wall_clock.h"

#define SUBJECT          "cluster"
#define LOAD_INTERVAL_MS 10000 /* the record's load, republished */
#define PROBE_WAIT_MS    3000  /* a live holder of the name answers by then */
#define TOPIC_MAX        (128 + 1 + GW_INSTANCE_NAME_MAX + 16)

/* Another live instance, as its retained record last said. */
struct peer {
    UT_hash_handle hh; /* by rec.name */
    struct gw_instance_record rec;
};

struct gw_cluster {
    struct gw_cluster_env env;
    char name[GW_INSTANCE_NAME_MAX + 1];
    char boot[GW_INSTANCE_BOOT_MAX + 1];
    char udp[GW_INSTANCE_UDP_MAX + 1];
    uint64_t started_ms; /* wall clock, for the record and the log */
    enum gw_cluster_phase phase;
    bool draining;
    bool link_up;
    bool probe_sent;   /* this connection's probe is out */
    bool name_held;    /* a live record of our name with another boot seen */
    bool was_up;       /* the link was up during JOINING */
    unsigned sessions; /* the load the record carries */
    unsigned devices;
    struct peer *peers;
    /* The owners' candidates (running, else draining), self included
     * when it is one; rebuilt when membership changes. */
    const char **cand;
    size_t n_cand;
    char prefix[TOPIC_MAX];
    char record_topic[TOPIC_MAX];
    char all_topic[TOPIC_MAX];   /* <prefix>/+ */
    char probe_sub[TOPIC_MAX];   /* <prefix>/<name>/probe/# */
    char probe_topic[TOPIC_MAX]; /* <prefix>/<name>/probe */
    char reply_topic[TOPIC_MAX]; /* <prefix>/<name>/probe/reply */
    char rpc_topic[TOPIC_MAX];   /* <prefix>/<name>/rpc: to this one */
    char catalogs[TOPIC_MAX];    /* <prefix>/+/catalog: from every one */
    char will[GW_INSTANCE_RECORD_MAX_LEN];
    uv_timer_t load_timer;
    uv_timer_t probe_timer;
    int timers_open;
    bool left; /* shutdown: the record says gone */
    bool closing;
    void (*close_cb)(void *arg);
    void *close_arg;
    struct gw_cluster_stats stats;
};

static const char *const phase_names[] = {
#define XX(_, text) text,
    GW_CLUSTER_PHASE_MAP(XX)
#undef XX
};

const char *gw_cluster_phase_name(enum gw_cluster_phase phase)
{
    return (unsigned)phase < GW_CLUSTER_PHASE_COUNT_ ? phase_names[phase] : "?";
}

/* A random id per process start: tells two holders of one name apart. */
static void make_boot(char out[GW_INSTANCE_BOOT_MAX + 1])
{
    uint8_t b[8];
    uint64_t t = uv_hrtime() ^ ((uint64_t)uv_os_getpid() << 32);

    if (uv_random(NULL, NULL, b, sizeof(b), 0, NULL) != 0) {
        memcpy(b, &t, sizeof(b)); /* still distinct per start */
    }
    for (size_t i = 0; i < sizeof(b); i++) {
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    }
}

static bool hash_mode(const struct gw_cluster *c)
{
    return c->env.hash_mode;
}

static bool live(const struct gw_cluster *c)
{
    return c->phase == GW_CLUSTER_RUNNING || c->phase == GW_CLUSTER_DRAINING;
}

/* ---- candidates ---- */

static void count_states(struct gw_cluster *c)
{
    struct peer *p, *tmp;

    c->stats.running = c->phase == GW_CLUSTER_RUNNING;
    c->stats.draining = c->phase == GW_CLUSTER_DRAINING;
    HASH_ITER(hh, c->peers, p, tmp)
    {
        if (p->rec.state == GW_INSTANCE_RUNNING) {
            c->stats.running++;
        } else {
            c->stats.draining++;
        }
    }
}

/*
 * Running instances take new conversations; draining ones only when no
 * instance is running (a device must reach somebody). A joining instance
 * is nobody's owner yet, and knows it.
 */
static void rebuild_candidates(struct gw_cluster *c)
{
    size_t n = 0;
    struct peer *p, *tmp;

    count_states(c);
    bool want_draining = c->stats.running == 0;
    if (live(c) && (c->phase == GW_CLUSTER_RUNNING || want_draining)) {
        c->cand[n++] = c->name;
    }
    HASH_ITER(hh, c->peers, p, tmp)
    {
        if (p->rec.state == GW_INSTANCE_RUNNING || want_draining) {
            c->cand[n++] = p->rec.name;
        }
    }
    c->n_cand = n;
}

/* Membership changed: owners may have moved. */
static void owners_changed(struct gw_cluster *c)
{
    rebuild_candidates(c);
    if (c->env.on_owners_changed != NULL && !c->closing) {
        c->env.on_owners_changed(c->env.arg);
    }
}

bool gw_cluster_shared(const struct gw_cluster *c)
{
    return c != NULL && c->env.shared;
}

bool gw_cluster_takes_hello(const struct gw_cluster *c, const char *client_id)
{
    if (gw_cluster_shared(c)) {
        return c->phase == GW_CLUSTER_RUNNING && !c->left;
    }
    return gw_cluster_owns(c, client_id);
}

const char *gw_cluster_owner(const struct gw_cluster *c, const char *client_id)
{
    if (c == NULL || !hash_mode(c) || c->n_cand == 0) {
        return NULL;
    }
    int k = gw_rendezvous_pick(c->cand, c->n_cand, client_id);
    return k < 0 || c->cand[k] == c->name ? NULL : c->cand[k];
}

bool gw_cluster_owns(const struct gw_cluster *c, const char *client_id)
{
    if (c == NULL || !hash_mode(c)) {
        return true;
    }
    if (!live(c) || c->left || c->n_cand == 0) {
        return false;
    }
    int k = gw_rendezvous_pick(c->cand, c->n_cand, client_id);
    return k >= 0 && c->cand[k] == c->name;
}

/* ---- our record ---- */

static int format_own(const struct gw_cluster *c, enum gw_instance_state st,
                      char *buf, size_t cap)
{
    struct gw_instance_record r;

    memset(&r, 0, sizeof(r));
    memcpy(r.name, c->name, sizeof(r.name));
    memcpy(r.boot, c->boot, sizeof(r.boot));
    memcpy(r.udp, c->udp, sizeof(r.udp));
    r.started_ms = c->started_ms;
    r.state = st;
    r.sessions = c->sessions;
    r.devices = c->devices;
    return gw_instance_record_format(&r, buf, cap);
}

static enum gw_instance_state own_state(const struct gw_cluster *c)
{
    return c->phase == GW_CLUSTER_DRAINING ? GW_INSTANCE_DRAINING
                                           : GW_INSTANCE_RUNNING;
}

static void publish_record_on(struct gw_cluster *c, const char *topic,
                              bool retained)
{
    char buf[GW_INSTANCE_RECORD_MAX_LEN];
    int n;

    if (c->env.link == NULL || !c->link_up || c->left) {
        return;
    }
    if (c->env.load != NULL) {
        c->env.load(c->env.arg, &c->sessions, &c->devices);
    }
    if ((n = format_own(c, own_state(c), buf, sizeof(buf))) < 0) {
        return;
    }
    int rc =
        retained
            ? gw_mqtt_link_publish_retained(c->env.link, topic, buf, (size_t)n)
            : gw_mqtt_link_publish(c->env.link, topic, buf, (size_t)n);
    if (rc != 0) {
        gw_log(GW_LOG_WARN, SUBJECT, "record to %s not sent: %s", topic,
               gw_strerror(rc));
    }
}

static void publish_record(struct gw_cluster *c)
{
    if (hash_mode(c) && live(c)) {
        publish_record_on(c, c->record_topic, true);
    }
}

static void on_load_timer(uv_timer_t *t)
{
    publish_record(t->data);
}

/* ---- joining: is the name ours? ---- */

static void become_running(struct gw_cluster *c, const char *why)
{
    uv_timer_stop(&c->probe_timer);
    c->phase = c->draining ? GW_CLUSTER_DRAINING : GW_CLUSTER_RUNNING;
    gw_log(GW_LOG_INFO, SUBJECT,
           "instance %s (boot %s) %s: %s; %u other instance%s seen", c->name,
           c->boot, gw_cluster_phase_name(c->phase), why, HASH_COUNT(c->peers),
           HASH_COUNT(c->peers) == 1 ? "" : "s");
    publish_record(c);
    owners_changed(c);
}

/* Told from the loop, never from inside the broker link's callback: the
 * instance closes the link in answer. */
static void on_refused_timer(uv_timer_t *t)
{
    struct gw_cluster *c = t->data;

    if (c->env.on_refused != NULL && !c->closing) {
        c->env.on_refused(c->env.arg);
    }
}

static void refuse_name(struct gw_cluster *c, const char *why)
{
    if (c->phase == GW_CLUSTER_REFUSED) {
        return;
    }
    bool was_live = live(c);
    c->phase = GW_CLUSTER_REFUSED;
    gw_log(GW_LOG_ERROR, SUBJECT,
           "instance name %s is taken: %s; this instance (boot %s) stops. "
           "Give each instance its own cluster.instance",
           c->name, why, c->boot);
    if (was_live) {
        owners_changed(c);
    }
    uv_timer_start(&c->probe_timer, on_refused_timer, 0, 0);
}

static void describe(const struct gw_instance_record *r, char *buf, size_t cap)
{
    time_t secs = (time_t)(r->started_ms / 1000u);
    struct tm tm;
    char when[32] = "?";

    if (gmtime_r(&secs, &tm) != NULL) {
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    snprintf(buf, cap, "instance boot %s, started %s, udp %s, %s", r->boot,
             when, r->udp[0] != '\0' ? r->udp : "?",
             gw_instance_state_name(r->state));
}

static void on_probe_timer(uv_timer_t *t)
{
    struct gw_cluster *c = t->data;

    if (c->phase == GW_CLUSTER_JOINING) {
        become_running(c, "the old record of this name is stale (no live "
                          "holder answered): taken over");
    }
}

/* The broker has replayed the retained records: our probe came back. */
static void on_own_probe(struct gw_cluster *c)
{
    if (c->phase != GW_CLUSTER_JOINING) {
        return;
    }
    if (!c->name_held) {
        become_running(c, "name free");
        return;
    }
    gw_log(GW_LOG_INFO, SUBJECT,
           "a live record of %s exists: waiting %d ms for its holder", c->name,
           PROBE_WAIT_MS);
    uv_timer_start(&c->probe_timer, on_probe_timer, PROBE_WAIT_MS, 0);
}

static void send_probe(struct gw_cluster *c);

/*
 * Our probe has not come back (not sent, or lost while the broker link
 * turned over): ask again rather than stay joining for ever. A reply or
 * our own probe coming back restarts the timer for its own purpose.
 */
static void on_probe_lost(uv_timer_t *t)
{
    struct gw_cluster *c = t->data;

    if (c->phase == GW_CLUSTER_JOINING && c->link_up && !c->closing) {
        gw_log(GW_LOG_WARN, SUBJECT,
               "the name probe did not come back in %d ms: sending it again",
               2 * PROBE_WAIT_MS);
        send_probe(c);
    }
}

static void send_probe(struct gw_cluster *c)
{
    int rc = gw_mqtt_link_publish(c->env.link, c->probe_topic, c->boot,
                                  strlen(c->boot));

    uv_timer_start(&c->probe_timer, on_probe_lost, 2 * PROBE_WAIT_MS, 0);
    if (rc != 0) {
        gw_log(GW_LOG_WARN, SUBJECT, "probe not sent: %s", gw_strerror(rc));
        return;
    }
    c->probe_sent = true;
}

/* ---- records of others ---- */

static void refuse_record(struct gw_cluster *c, const char *topic,
                          const char *why)
{
    c->stats.records_refused++;
    gw_log(GW_LOG_WARN, SUBJECT, "instance record on %s refused: %s", topic,
           why);
}

/* The record of our own name, from somebody else (or an old us). */
static void on_own_name_record(struct gw_cluster *c,
                               const struct gw_instance_record *r)
{
    char desc[160];

    if (strcmp(r->boot, c->boot) == 0) {
        return; /* our own, echoed */
    }
    if (c->phase == GW_CLUSTER_JOINING) {
        c->name_held = r->state != GW_INSTANCE_GONE;
        return;
    }
    if (!live(c)) {
        return;
    }
    if (r->state != GW_INSTANCE_GONE &&
        (r->started_ms < c->started_ms ||
         (r->started_ms == c->started_ms && strcmp(r->boot, c->boot) < 0))) {
        /* Two live holders met after all (the broker dropped one while
         * the other joined): the younger one goes. */
        describe(r, desc, sizeof(desc));
        refuse_name(c, desc);
        return;
    }
    /* An older holder's will, or a younger one: the retained record must
     * say us again. */
    publish_record(c);
}

/* A new instance (or a new start of one) knows nothing yet. */
static void peer_joined(struct gw_cluster *c, const char *name)
{
    if (c->env.on_peer_joined != NULL && live(c) && !c->closing) {
        c->env.on_peer_joined(c->env.arg, name);
    }
}

static void peer_upsert(struct gw_cluster *c,
                        const struct gw_instance_record *r)
{
    struct peer *p;
    bool changed;

    HASH_FIND_STR(c->peers, r->name, p);
    if (r->state == GW_INSTANCE_GONE) {
        /* A will of an older boot must not remove its successor. */
        if (p == NULL || strcmp(p->rec.boot, r->boot) != 0) {
            return;
        }
        gw_log(GW_LOG_INFO, SUBJECT, "instance %s (boot %s) gone", r->name,
               r->boot);
        HASH_DEL(c->peers, p);
        free(p);
        owners_changed(c);
        return;
    }
    if (p == NULL) {
        p = calloc(1, sizeof(*p));
        if (p == NULL) {
            gw_log(GW_LOG_ERROR, SUBJECT, "instance %s: out of memory",
                   r->name);
            return;
        }
        p->rec = *r;
        HASH_ADD_STR(c->peers, rec.name, p);
        if (!GW_HASH_ADDED(p, hh)) {
            free(p);
            return;
        }
        /* The candidate array holds every peer and self. */
        const char **grown =
            realloc(c->cand, (HASH_COUNT(c->peers) + 1) * sizeof(*c->cand));
        if (grown == NULL) {
            HASH_DEL(c->peers, p);
            free(p);
            return;
        }
        c->cand = grown;
        gw_log(GW_LOG_INFO, SUBJECT, "instance %s (boot %s, udp %s) %s",
               r->name, r->boot, r->udp, gw_instance_state_name(r->state));
        owners_changed(c);
        peer_joined(c, r->name);
        return;
    }
    bool reborn = strcmp(p->rec.boot, r->boot) != 0;
    changed = p->rec.state != r->state || reborn;
    if (changed) {
        gw_log(GW_LOG_INFO, SUBJECT, "instance %s (boot %s) %s", r->name,
               r->boot, gw_instance_state_name(r->state));
    }
    p->rec = *r;
    if (changed) {
        owners_changed(c);
    }
    if (reborn) {
        peer_joined(c, r->name);
    }
}

static void on_record(struct gw_cluster *c, const char *topic,
                      const char *level, const uint8_t *payload, size_t len)
{
    struct gw_instance_record r;
    struct peer *p;
    int rc;

    if (len == 0) {
        /* A cleared retained record: nobody by that name. */
        HASH_FIND_STR(c->peers, level, p);
        if (p != NULL) {
            HASH_DEL(c->peers, p);
            free(p);
            owners_changed(c);
        }
        return;
    }
    if ((rc = gw_instance_record_parse((const char *)payload, len, &r)) != 0) {
        refuse_record(c, topic, gw_strerror(rc));
        return;
    }
    if (strcmp(r.name, level) != 0) {
        refuse_record(c, topic, "its name is not its topic's");
        return;
    }
    if (strcmp(r.name, c->name) == 0) {
        on_own_name_record(c, &r);
        return;
    }
    peer_upsert(c, &r);
}

static void on_probe(struct gw_cluster *c, const uint8_t *payload, size_t len)
{
    if (len == strlen(c->boot) && memcmp(payload, c->boot, len) == 0) {
        on_own_probe(c);
        return;
    }
    if (live(c)) {
        gw_log(GW_LOG_WARN, SUBJECT,
               "another instance is starting as %s: told it this name is "
               "live here",
               c->name);
        publish_record_on(c, c->reply_topic, false);
    }
}

static void on_probe_reply(struct gw_cluster *c, const uint8_t *payload,
                           size_t len)
{
    struct gw_instance_record r;
    char desc[160];

    if (c->phase != GW_CLUSTER_JOINING) {
        return;
    }
    if (gw_instance_record_parse((const char *)payload, len, &r) != 0 ||
        strcmp(r.name, c->name) != 0 || strcmp(r.boot, c->boot) == 0) {
        c->stats.records_refused++;
        return;
    }
    describe(&r, desc, sizeof(desc));
    refuse_name(c, desc);
}

/* <prefix>/<name>/catalog, prefix of plen bytes already matched. */
static bool is_catalog(const char *topic, size_t plen)
{
    static const char tail[] = "/catalog";
    const char *level = topic + plen + 1;
    const char *slash = strchr(level, '/');

    return slash != NULL && slash != level && strcmp(slash, tail) == 0;
}

bool gw_cluster_on_message(struct gw_cluster *c, const char *topic,
                           const uint8_t *payload, size_t len)
{
    size_t plen;
    const char *level;

    if (c == NULL || !hash_mode(c)) {
        return false;
    }
    plen = strlen(c->env.topic_prefix);
    if (strncmp(topic, c->env.topic_prefix, plen) != 0 || topic[plen] != '/') {
        return false;
    }
    if (c->closing || c->phase == GW_CLUSTER_REFUSED) {
        return true;
    }
    if (strcmp(topic, c->rpc_topic) == 0 || is_catalog(topic, plen)) {
        if (c->env.on_peer_message != NULL && live(c)) {
            char sender[GW_INSTANCE_NAME_MAX + 1] = "";
            const char *lvl = topic + plen + 1;
            size_t n = strcspn(lvl, "/");
            bool catalog = strcmp(topic, c->rpc_topic) != 0;
            if (catalog && n < sizeof(sender)) {
                memcpy(sender, lvl, n);
                sender[n] = '\0';
            }
            /* A name too long for an instance's: matches no sender. */
            c->env.on_peer_message(c->env.arg,
                                   catalog ? (n < sizeof(sender) ? sender : "/")
                                           : NULL,
                                   payload, len);
        }
    } else if (strcmp(topic, c->probe_topic) == 0) {
        on_probe(c, payload, len);
    } else if (strcmp(topic, c->reply_topic) == 0) {
        on_probe_reply(c, payload, len);
    } else if (strchr(level = topic + plen + 1, '/') == NULL &&
               level[0] != '\0') {
        if (strlen(level) > GW_INSTANCE_NAME_MAX) {
            refuse_record(c, topic, "name too long");
        } else {
            on_record(c, topic, level, payload, len);
        }
    }
    return true;
}

void gw_cluster_on_link_state(struct gw_cluster *c, bool up)
{
    if (c == NULL || !hash_mode(c) || c->closing) {
        return;
    }
    c->link_up = up;
    if (c->phase == GW_CLUSTER_JOINING) {
        if (!up && c->was_up) {
            /* The broker dropped us while we checked the name: another
             * connection with our MQTT client id took it over. */
            refuse_name(c, "the broker closed this connection while the name "
                           "was checked (another client with the same "
                           "mqtt.client_id)");
            return;
        }
        if (up) {
            c->was_up = true;
            c->name_held = false;
            send_probe(c);
        }
        return;
    }
    if (up && live(c)) {
        /* The broker may have published our will meanwhile. */
        publish_record(c);
    }
}

/* ---- the interface ---- */

static int make_topic(char *out, const char *prefix, const char *name,
                      const char *tail)
{
    int n = snprintf(out, TOPIC_MAX, "%s/%s%s", prefix, name, tail);
    return n < 0 || n >= TOPIC_MAX ? GW_EINVAL : 0;
}

int gw_cluster_init(const struct gw_cluster_env *env, struct gw_cluster **out)
{
    struct gw_cluster *c;

    if (env == NULL || env->loop == NULL || env->name == NULL ||
        !gw_instance_name_valid(env->name, GW_INSTANCE_NAME_MAX) ||
        (env->hash_mode && (env->topic_prefix == NULL || env->udp == NULL ||
                            strlen(env->topic_prefix) > 128 ||
                            strlen(env->udp) > GW_INSTANCE_UDP_MAX))) {
        return GW_EINVAL;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return GW_ENOMEM;
    }
    c->env = *env;
    memcpy(c->name, env->name, strlen(env->name) + 1);
    if (env->hash_mode) {
        memcpy(c->udp, env->udp, strlen(env->udp) + 1);
    }
    c->env.name = c->name;
    c->env.udp = c->udp;
    c->env.topic_prefix = NULL;
    make_boot(c->boot);
    c->started_ms = (uint64_t)gw_wall_ms();
    c->phase = env->hash_mode ? GW_CLUSTER_JOINING : GW_CLUSTER_OFF;
    c->cand = calloc(1, sizeof(*c->cand));
    if (c->cand == NULL ||
        (env->hash_mode &&
         (make_topic(c->record_topic, env->topic_prefix, c->name, "") != 0 ||
          make_topic(c->all_topic, env->topic_prefix, "+", "") != 0 ||
          make_topic(c->probe_sub, env->topic_prefix, c->name, "/probe/#") !=
              0 ||
          make_topic(c->probe_topic, env->topic_prefix, c->name, "/probe") !=
              0 ||
          make_topic(c->reply_topic, env->topic_prefix, c->name,
                     "/probe/reply") != 0 ||
          make_topic(c->rpc_topic, env->topic_prefix, c->name, "/rpc") != 0 ||
          make_topic(c->catalogs, env->topic_prefix, "+", "/catalog") != 0))) {
        free(c->cand);
        free(c);
        return GW_EINVAL;
    }
    c->env.topic_prefix = c->prefix;
    if (env->hash_mode) {
        memcpy(c->prefix, env->topic_prefix, strlen(env->topic_prefix) + 1);
        struct gw_instance_record gone = {.state = GW_INSTANCE_GONE};
        memcpy(gone.name, c->name, sizeof(gone.name));
        memcpy(gone.boot, c->boot, sizeof(gone.boot));
        if (gw_instance_record_format(&gone, c->will, sizeof(c->will)) < 0) {
            free(c->cand);
            free(c);
            return GW_EINVAL;
        }
    }
    uv_timer_init(env->loop, &c->load_timer);
    uv_timer_init(env->loop, &c->probe_timer);
    c->load_timer.data = c;
    c->probe_timer.data = c;
    c->timers_open = 2;
    if (env->hash_mode) {
        uv_timer_start(&c->load_timer, on_load_timer, LOAD_INTERVAL_MS,
                       LOAD_INTERVAL_MS);
        gw_log(GW_LOG_INFO, SUBJECT,
               "instance %s (boot %s) joining under %s/, udp %s", c->name,
               c->boot, c->env.topic_prefix, c->udp);
    }
    *out = c;
    return 0;
}

void gw_cluster_set_link(struct gw_cluster *c, struct gw_mqtt_link *link)
{
    c->env.link = link;
}

bool gw_cluster_will(const struct gw_cluster *c, const char **topic,
                     const char **payload)
{
    if (c == NULL || !hash_mode(c)) {
        return false;
    }
    *topic = c->record_topic;
    *payload = c->will;
    return true;
}

size_t gw_cluster_topics(const struct gw_cluster *c, const char **out,
                         size_t max)
{
    if (c == NULL || !hash_mode(c) || max < GW_CLUSTER_TOPICS) {
        return 0;
    }
    out[0] = c->all_topic;
    out[1] = c->probe_sub;
    out[2] = c->rpc_topic;
    out[3] = c->catalogs;
    return GW_CLUSTER_TOPICS;
}

int gw__cluster_send(struct gw_cluster *c, const char *to, const char *leaf,
                     const char *payload, size_t len)
{
    char topic[TOPIC_MAX];

    if (c == NULL || !hash_mode(c) || c->env.link == NULL) {
        return GW_EINVAL;
    }
    if (!c->link_up) {
        return -ENOTCONN;
    }
    if (make_topic(topic, c->prefix, to != NULL ? to : c->name, leaf) != 0) {
        return GW_EINVAL;
    }
    return gw_mqtt_link_publish(c->env.link, topic, payload, len);
}

void gw_cluster_set_draining(struct gw_cluster *c)
{
    if (c == NULL || c->draining) {
        return;
    }
    c->draining = true;
    if (c->phase == GW_CLUSTER_RUNNING) {
        c->phase = GW_CLUSTER_DRAINING;
        publish_record(c);
        owners_changed(c);
    }
    gw_log(GW_LOG_INFO, SUBJECT, "instance %s draining: no new conversations",
           c->name);
}

bool gw_cluster_is_draining(const struct gw_cluster *c)
{
    return c != NULL && c->draining;
}

void gw_cluster_set_load(struct gw_cluster *c, unsigned sessions,
                         unsigned devices)
{
    if (c != NULL) {
        c->sessions = sessions;
        c->devices = devices;
    }
}

enum gw_cluster_phase gw_cluster_phase(const struct gw_cluster *c)
{
    return c != NULL ? c->phase : GW_CLUSTER_OFF;
}

const char *gw_cluster_name(const struct gw_cluster *c)
{
    return c->name;
}

void gw_cluster_get_stats(const struct gw_cluster *c,
                          struct gw_cluster_stats *out)
{
    *out = c->stats;
    if (!hash_mode(c)) {
        /* Alone: itself, in its own state. */
        out->running = !c->draining;
        out->draining = c->draining;
    }
}

void gw_cluster_count_ignored(struct gw_cluster *c, bool hello)
{
    if (hello) {
        c->stats.hellos_ignored++;
    } else {
        c->stats.messages_ignored++;
    }
}

void gw_cluster_each(const struct gw_cluster *c,
                     void (*fn)(void *arg, const char *name, const char *state,
                                const char *udp, unsigned sessions),
                     void *arg)
{
    struct peer *p, *tmp;

    fn(arg, c->name, gw_cluster_phase_name(c->phase), c->udp, c->sessions);
    HASH_ITER(hh, c->peers, p, tmp)
    {
        fn(arg, p->rec.name, gw_instance_state_name(p->rec.state), p->rec.udp,
           p->rec.sessions);
    }
}

static void on_timer_closed(uv_handle_t *h)
{
    struct gw_cluster *c = h->data;
    struct peer *p, *tmp;

    if (--c->timers_open > 0) {
        return;
    }
    HASH_ITER(hh, c->peers, p, tmp)
    {
        HASH_DEL(c->peers, p);
        free(p);
    }
    void (*cb)(void *arg) = c->close_cb;
    void *arg = c->close_arg;
    free(c->cand);
    free(c);
    if (cb != NULL) {
        cb(arg);
    }
}

void gw_cluster_leave(struct gw_cluster *c)
{
    if (c == NULL || c->left || c->closing) {
        return;
    }
    if (hash_mode(c) && live(c) && c->link_up && c->env.link != NULL) {
        /* A clean disconnect discards the will: the record says gone
         * first. */
        int rc = gw_mqtt_link_publish_retained(c->env.link, c->record_topic,
                                               c->will, strlen(c->will));
        gw_log(rc == 0 ? GW_LOG_INFO : GW_LOG_WARN, SUBJECT,
               "instance %s leaves the cluster%s", c->name,
               rc == 0 ? "" : " (its record could not say so)");
    }
    uv_timer_stop(&c->probe_timer);
    c->left = true;
}

void gw_cluster_close(struct gw_cluster *c, void (*cb)(void *arg), void *arg)
{
    if (c == NULL || c->closing) {
        return;
    }
    gw_cluster_leave(c);
    c->closing = true;
    c->close_cb = cb;
    c->close_arg = arg;
    uv_close((uv_handle_t *)&c->load_timer, on_timer_closed);
    uv_close((uv_handle_t *)&c->probe_timer, on_timer_closed);
}
