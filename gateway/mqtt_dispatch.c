/* Broker messages to sessions, device links and presence; see the .h. */
#include "gateway/mqtt_dispatch.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "codec/presence.h"
#include "codec/topic.h"
#include "common/log.h"

/*
 * Log lines about one device's messages: a burst, then one every 10 s; all
 * devices together at most 5 a second after a burst of 50. A flood of bad
 * messages is a flood of counts in /metrics, not of log lines.
 */
static const struct gw_bucket_rate log_per_device = {0.1, 5};
static const struct gw_bucket_rate log_all = {5, 50};
#define LOG_KEYS_MAX   4096
#define HELLO_KEYS_MAX (1u << 17)

static uint64_t now_ms(const struct gw_mqtt_dispatch *d)
{
    return uv_now(gw_device_table_loop(d->devices));
}

static struct gw_bucket_rate hello_rate(const struct gw_config *cfg)
{
    return (struct gw_bucket_rate){cfg->limits.hello_per_minute / 60.0,
                                   cfg->limits.hello_burst};
}

static void limits_setup(struct gw_mqtt_dispatch *d)
{
    if (d->limits_ready) {
        return;
    }
    d->limits_ready = true;
    gw_ratelimit_init(&d->log_limit, log_per_device, log_all, LOG_KEYS_MAX);
    gw_ratelimit_init(&d->hello_limit,
                      hello_rate(gw_config_live_get(d->config)),
                      (struct gw_bucket_rate){0, 0}, HELLO_KEYS_MAX);
}

void gw_mqtt_dispatch_close(struct gw_mqtt_dispatch *d)
{
    if (d->limits_ready) {
        gw_ratelimit_free(&d->log_limit);
        gw_ratelimit_free(&d->hello_limit);
        d->limits_ready = false;
    }
}

/* Whether a line about key (a client id, or "" for none) may be logged;
 * *skipped gets the lines about it left out since its last one. */
static bool may_log(struct gw_mqtt_dispatch *d, const char *key,
                    uint64_t *skipped)
{
    limits_setup(d);
    *skipped = 0;
    return gw_log_limit_take(&d->log_limit, key, now_ms(d), skipped);
}

static void refuse(struct gw_mqtt_dispatch *d, enum gw_refusal why,
                   const char *client_id, const char *subject,
                   const char *detail)
{
    uint64_t skipped;
    char more[64] = "";

    d->counters->refused[why]++;
    if (!may_log(d, client_id, &skipped)) {
        return;
    }
    if (skipped > 0) {
        snprintf(more, sizeof(more), " (%llu more not logged before this)",
                 (unsigned long long)skipped);
    }
    gw_log(GW_LOG_WARN, subject, "message refused (%s): %s%s",
           gw_refusal_name(why), detail, more);
}

static enum gw_refusal refusal_of(int rc)
{
    switch (rc) {
    case GW_ETOOBIG:
        return GW_REFUSE_TOO_BIG;
    case GW_EPROTO:
        return GW_REFUSE_PROTO;
    default:
        return GW_REFUSE_MALFORMED;
    }
}

static bool hello_allowed(struct gw_mqtt_dispatch *d, const char *client_id)
{
    limits_setup(d);
    gw_ratelimit_set_rate(&d->hello_limit,
                          hello_rate(gw_config_live_get(d->config)),
                          (struct gw_bucket_rate){0, 0});
    return gw_ratelimit_take(&d->hello_limit, client_id, now_ms(d), NULL);
}

/*
 * Too many hellos: the device has moved on from any session it had (a
 * hello starts a new one), so that ends; the refused one gets its one
 * reply, a goodbye, as any hello that cannot start a session.
 */
static void hello_rate_refused(struct gw_mqtt_dispatch *d,
                               const char *client_id, const char *subject)
{
    const struct gw_config *cfg = gw_config_live_get(d->config);
    struct gw_session *old = gw_sessions_find(d->sessions, client_id);
    char text[96];

    snprintf(text, sizeof(text),
             "hellos over limits.hello_burst %d / hello_per_minute %d",
             cfg->limits.hello_burst, cfg->limits.hello_per_minute);
    refuse(d, GW_REFUSE_HELLO_RATE, client_id, subject, text);
    if (old != NULL) {
        gw_session_end(old, GW_END_REPLACED);
    }
    gw_publish_goodbye(d->pub, client_id, "");
    gw_device_settle(d->devices, client_id);
}

/* cluster.mode hash: messages of a device another instance owns. */
static void not_ours(struct gw_mqtt_dispatch *d, const char *client_id,
                     const char *what, bool hello, const char *subject)
{
    uint64_t skipped;

    gw_cluster_count_ignored(d->cluster, hello);
    if (gw_log_get_level() >= GW_LOG_DEBUG && may_log(d, client_id, &skipped)) {
        GW_LOG(GW_LOG_DEBUG, subject, "%s: another instance's device", what);
    }
}

static void on_device_hello(struct gw_mqtt_dispatch *d, const char *client_id,
                            const struct gw_client_id *id,
                            const struct gw_envelope *env, const char *subject)
{
    struct gw_device_hello hello;
    int rc = gw_device_hello_parse(env->root, &hello);
    struct gw_session *old;

    if (rc != 0) {
        refuse(d, GW_REFUSE_HELLO, client_id, subject, gw_strerror(rc));
        return;
    }
    if (d->cluster != NULL && !gw_cluster_takes_hello(d->cluster, client_id)) {
        /* The owner answers it. A conversation of the device here is
         * over: a hello starts a new one (no goodbye, it would reach the
         * new session). */
        if ((old = gw_sessions_find(d->sessions, client_id)) != NULL) {
            gw_session_end(old, GW_END_REPLACED);
        }
        not_ours(d, client_id, "hello", true, subject);
    } else if (gw_device_offline(d->devices, client_id)) {
        /* An old message (the device cannot speak while offline): no
         * session, no goodbye, nobody would hear it. */
        refuse(d, GW_REFUSE_OFFLINE, client_id, subject,
               "hello from a device the broker says is offline");
    } else if (!hello_allowed(d, client_id)) {
        hello_rate_refused(d, client_id, subject);
    } else if (d->stopping) {
        gw_log(GW_LOG_INFO, subject, "hello during shutdown: refused");
        gw_publish_goodbye(d->pub, client_id, "");
    } else {
        (void)gw_session_start(d->sessions, client_id, id, &hello);
    }
    gw_device_hello_free(&hello);
}

/* A device message with no session: tell the device its session is gone. */
static void on_orphan_message(struct gw_mqtt_dispatch *d, const char *client_id,
                              const struct gw_envelope *env,
                              const char *subject)
{
    uint64_t skipped;
    bool log;

    if (d->cluster != NULL && gw_cluster_phase(d->cluster) != GW_CLUSTER_OFF &&
        !gw_cluster_shared(d->cluster)) {
        /* Its session may be another instance's: a goodbye from here
         * would end it. A device whose instance died finds out by its own
         * timeouts and says hello again. */
        not_ours(d, client_id, env->type, false, subject);
        return;
    }
    log = gw_log_get_level() >= GW_LOG_DEBUG && may_log(d, client_id, &skipped);
    if (env->kind == GW_MSG_GOODBYE || env->kind == GW_MSG_MCP) {
        /* A goodbye needs no answer; MCP works without a voice session. */
        if (log) {
            GW_LOG(GW_LOG_DEBUG, subject, "%s without a session: dropped",
                   env->type);
        }
        return;
    }
    d->counters->no_session_goodbyes++;
    if (log) {
        GW_LOG(GW_LOG_DEBUG, subject, "%s without a session: goodbye",
               env->type);
    }
    gw_publish_goodbye(d->pub, client_id,
                       env->session_id != NULL ? env->session_id : "");
}

/*
 * Presence from the broker side (docs/architecture.md section 2). A device
 * that goes offline takes its session with it at once: its UDP would
 * otherwise be waited for until the idle timeout. Nobody is left to hear
 * a goodbye.
 */
static void on_presence(struct gw_mqtt_dispatch *d, const char *client_id,
                        const char *subject, const uint8_t *payload, size_t len,
                        bool retained)
{
    struct gw_presence p;
    struct gw_session *s;
    int rc = gw_presence_parse((const char *)payload, len, &p);

    if (rc != 0) {
        refuse(d, GW_REFUSE_PRESENCE, client_id, subject, gw_strerror(rc));
        return;
    }
    rc = retained ? gw_device_on_retained_presence(d->devices, client_id, &p)
                  : gw_device_on_presence(d->devices, client_id, &p);
    if (rc < 0) {
        refuse(d, GW_REFUSE_PRESENCE, client_id, subject, gw_strerror(rc));
        return;
    }
    if (rc == GW_PRESENCE_ARRIVED || rc == GW_PRESENCE_RETURNED) {
        d->counters->presence_online++;
        GW_LOG(GW_LOG_DEBUG, subject, "online from %s",
               p.address[0] != '\0' ? p.address : "an unknown address");
    } else if (rc == GW_PRESENCE_LEFT) {
        d->counters->presence_offline++;
        GW_LOG(GW_LOG_DEBUG, subject, "offline");
        if ((s = gw_sessions_find(d->sessions, client_id)) != NULL) {
            gw_session_end(s, GW_END_DEVICE_OFFLINE); /* the record goes */
        }
    }
}

/* The plugin's run, on the presence topic with "$broker" for a client id
 * (docs/protocol.md section 2.3): true when topic is that one. */
static bool broker_run(struct gw_mqtt_dispatch *d, const char *pattern,
                       const char *topic, const uint8_t *payload, size_t len)
{
    const char *cap;
    size_t cap_len;
    uint64_t run;
    int rc;

    if (pattern == NULL || pattern[0] == '\0' ||
        gw_topic_capture(pattern, topic, strlen(topic), &cap, &cap_len) != 0 ||
        cap_len != sizeof(GW_PRESENCE_BROKER_LEVEL) - 1 ||
        memcmp(cap, GW_PRESENCE_BROKER_LEVEL, cap_len) != 0) {
        return false;
    }
    if ((rc = gw_presence_run_parse((const char *)payload, len, &run)) != 0) {
        refuse(d, GW_REFUSE_PRESENCE, "", "mqtt", gw_strerror(rc));
        return true;
    }
    GW_LOG(GW_LOG_DEBUG, "mqtt", "broker run %" PRIu64, run);
    gw_device_table_broker_run(d->devices, run);
    return true;
}

/* The client id a topic carries under pattern, copied and checked. */
static bool topic_client_id(const char *pattern, const char *topic,
                            char out[GW_CLIENT_ID_MAX + 1],
                            struct gw_client_id *id)
{
    const char *cap;
    size_t cap_len;

    if (pattern == NULL || pattern[0] == '\0' ||
        gw_topic_capture(pattern, topic, strlen(topic), &cap, &cap_len) != 0 ||
        cap_len > GW_CLIENT_ID_MAX) {
        return false;
    }
    memcpy(out, cap, cap_len);
    out[cap_len] = '\0';
    return gw_client_id_parse(out, cap_len, id) == 0;
}

/*
 * cluster.mode hash: a device's MCP is the owner's, or this instance's
 * while it has the device's session or waits for the device's answers.
 */
static bool mcp_is_ours(struct gw_mqtt_dispatch *d, const char *client_id)
{
    struct gw_device *dev;

    if (d->cluster == NULL || gw_cluster_owns(d->cluster, client_id)) {
        return true;
    }
    /* Mode hash: every instance hears the device, and a session here
     * wants its notifications. Mode shared: the owner must hear its
     * answers, so the MCP goes there whoever has the session. */
    if (!gw_cluster_shared(d->cluster) &&
        gw_sessions_find(d->sessions, client_id) != NULL) {
        return true;
    }
    dev = gw_device_find(d->devices, client_id);
    return dev != NULL && dev->link.n_pending > 0;
}

static void device_message(struct gw_mqtt_dispatch *d, const char *client_id,
                           const struct gw_client_id *id,
                           const uint8_t *payload, size_t len, bool carried,
                           uint64_t rx_ns);

static void dispatch(struct gw_mqtt_link *link, const char *topic,
                     const uint8_t *payload, size_t len, void *arg,
                     bool retained)
{
    uint64_t rx_ns = uv_hrtime(); /* a turn's listen stop is timed from here */
    struct gw_mqtt_dispatch *d = arg;
    const struct gw_config *cfg = gw_config_live_get(d->config);
    char client_id[GW_CLIENT_ID_MAX + 1];
    char subject[GW_CLIENT_ID_MAX + 8];
    struct gw_client_id id;

    (void)link;
    if (gw_cluster_on_message(d->cluster, topic, payload, len)) {
        return; /* an instance record or a name probe */
    }
    if (!topic_client_id(cfg->mqtt.up_topic, topic, client_id, &id)) {
        if (topic_client_id(cfg->mqtt.presence_topic, topic, client_id, &id)) {
            snprintf(subject, sizeof(subject), "dev=%s", client_id);
            on_presence(d, client_id, subject, payload, len, retained);
            return;
        }
        if (broker_run(d, cfg->mqtt.presence_topic, topic, payload, len)) {
            return;
        }
        refuse(d, GW_REFUSE_TOPIC, "", "mqtt",
               "not a device topic, or its client id is not a device id");
        return;
    }
    device_message(d, client_id, &id, payload, len, false, rx_ns);
}

void gw_mqtt_dispatch_message(struct gw_mqtt_link *link, const char *topic,
                              const uint8_t *payload, size_t len, void *arg)
{
    dispatch(link, topic, payload, len, arg, false);
}

/*
 * Mode shared: the instance a message of client_id must go to instead of
 * this one, or NULL. Never for a message carried here already.
 */
static const char *carry_to(struct gw_mqtt_dispatch *d, const char *client_id,
                            bool carried)
{
    if (carried || d->carry == NULL || !gw_cluster_shared(d->cluster)) {
        return NULL;
    }
    return gw_cluster_owner(d->cluster, client_id);
}

static void device_message(struct gw_mqtt_dispatch *d, const char *client_id,
                           const struct gw_client_id *id,
                           const uint8_t *payload, size_t len, bool carried,
                           uint64_t rx_ns)
{
    const struct gw_config *cfg = gw_config_live_get(d->config);
    char subject[GW_CLIENT_ID_MAX + 8];
    struct gw_envelope env;
    struct gw_session *s;
    const char *to;

    snprintf(subject, sizeof(subject), "dev=%s", client_id);
    int rc = gw_envelope_parse((const char *)payload, len,
                               (size_t)cfg->limits.max_message_bytes, &env);
    if (rc != 0) {
        refuse(d, refusal_of(rc), client_id, subject, gw_strerror(rc));
        return;
    }
    if (env.kind == GW_MSG_HELLO) {
        /* Mode shared, draining: the broker still sends it here, so the
         * owner among running instances answers instead; a conversation
         * here is over (a hello starts a new one). */
        if (!gw_cluster_takes_hello(d->cluster, client_id) &&
            (to = carry_to(d, client_id, carried)) != NULL) {
            if ((s = gw_sessions_find(d->sessions, client_id)) != NULL) {
                gw_session_end(s, GW_END_REPLACED);
            }
            d->carry(d->carry_arg, to, client_id, env.root);
        } else {
            on_device_hello(d, client_id, id, &env, subject);
        }
    } else if (env.kind == GW_MSG_MCP && !mcp_is_ours(d, client_id)) {
        if ((to = carry_to(d, client_id, carried)) != NULL) {
            d->carry(d->carry_arg, to, client_id, env.root);
        } else {
            not_ours(d, client_id, "mcp", false, subject);
        }
    } else if (env.kind == GW_MSG_MCP && d->outbound != NULL &&
               gw_mcp_outbound_on_device(d->outbound, client_id, &env)) {
        /* addressed to an MCP server by "endpoint": answered there */
    } else if (env.kind == GW_MSG_MCP &&
               gw_device_on_mcp(d->devices, client_id, &env)) {
        /* an answer on the device's MCP link, delivered (or dropped) */
    } else if ((s = gw_sessions_find(d->sessions, client_id)) != NULL) {
        gw_session_on_device_message(s, &env, (const char *)payload, len,
                                     rx_ns);
    } else if (gw_cluster_is_draining(d->cluster) &&
               (to = carry_to(d, client_id, carried)) != NULL) {
        /* A conversation whose hello went to the owner (above). */
        d->carry(d->carry_arg, to, client_id, env.root);
    } else {
        on_orphan_message(d, client_id, &env, subject);
    }
    gw_envelope_free(&env);
}

void gw_mqtt_dispatch_carried(struct gw_mqtt_dispatch *d, const char *client_id,
                              const char *payload, size_t len)
{
    struct gw_client_id id;

    if (gw_client_id_parse(client_id, strlen(client_id), &id) != 0) {
        return;
    }
    device_message(d, client_id, &id, (const uint8_t *)payload, len, true,
                   uv_hrtime());
}

void gw_mqtt_dispatch_retained(struct gw_mqtt_link *link, const char *topic,
                               const uint8_t *payload, size_t len, void *arg)
{
    struct gw_mqtt_dispatch *d = arg;
    const struct gw_config *cfg = gw_config_live_get(d->config);
    char client_id[GW_CLIENT_ID_MAX + 1];
    char subject[GW_CLIENT_ID_MAX + 8];
    struct gw_client_id id;

    if (!topic_client_id(cfg->mqtt.up_topic, topic, client_id, &id)) {
        dispatch(link, topic, payload, len, arg, true);
        return;
    }
    /* Replayed at every subscribe: a retained hello would otherwise start
     * a session, and a backend connection, at each gateway start. */
    snprintf(subject, sizeof(subject), "dev=%s", client_id);
    refuse(d, GW_REFUSE_RETAINED, client_id, subject,
           "retained message on an up topic");
}

void gw_mqtt_dispatch_state(struct gw_mqtt_link *link, bool up, void *arg)
{
    struct gw_mqtt_dispatch *d = arg;

    (void)link;
    gw_cluster_on_link_state(d->cluster, up);
    /* Sessions keep streaming audio while the broker is away; messages
     * to devices wait in the publisher's outbox, within its bounds. */
    gw_log(up ? GW_LOG_INFO : GW_LOG_WARN, "mqtt", "broker link %s",
           up ? "up" : "down");
    /* Nothing is taken for online that the broker has not said since it
     * is back: the new subscription replays the retained presence, the
     * devices that reconnect announce themselves, the rest go offline
     * after mqtt.presence_grace_ms. */
    gw_device_table_link_state(d->devices, up);
}
