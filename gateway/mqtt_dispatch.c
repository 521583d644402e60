/* Broker messages to sessions, device links and presence; see the .h. */
#include "gateway/mqtt_dispatch.h"

#include <stdio.h>
#include <string.h>

#include "codec/presence.h"
#include "codec/topic.h"
#include "common/log.h"

static void refuse(struct gw_mqtt_dispatch *d, enum gw_refusal why,
                   const char *subject, const char *detail)
{
    d->counters->refused[why]++;
    gw_log(GW_LOG_WARN, subject, "message refused (%s): %s",
           gw_refusal_name(why), detail);
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

static void on_device_hello(struct gw_mqtt_dispatch *d, const char *client_id,
                            const struct gw_client_id *id,
                            const struct gw_envelope *env, const char *subject)
{
    struct gw_device_hello hello;
    int rc = gw_device_hello_parse(env->root, &hello);

    if (rc != 0) {
        refuse(d, GW_REFUSE_HELLO, subject, gw_strerror(rc));
        return;
    }
    if (d->stopping) {
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
    if (env->kind == GW_MSG_GOODBYE || env->kind == GW_MSG_MCP) {
        /* A goodbye needs no answer; MCP works without a voice session. */
        GW_LOG(GW_LOG_DEBUG, subject, "%s without a session: dropped",
               env->type);
        return;
    }
    d->counters->no_session_goodbyes++;
    GW_LOG(GW_LOG_DEBUG, subject, "%s without a session: goodbye", env->type);
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
                        const char *subject, const uint8_t *payload, size_t len)
{
    struct gw_presence p;
    struct gw_session *s;
    int rc = gw_presence_parse((const char *)payload, len, &p);

    if (rc != 0) {
        refuse(d, GW_REFUSE_PRESENCE, subject, gw_strerror(rc));
        return;
    }
    rc = gw_device_on_presence(d->devices, client_id, &p);
    if (rc < 0) {
        refuse(d, GW_REFUSE_PRESENCE, subject, gw_strerror(rc));
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

void gw_mqtt_dispatch_message(struct gw_mqtt_link *link, const char *topic,
                              const uint8_t *payload, size_t len, void *arg)
{
    struct gw_mqtt_dispatch *d = arg;
    const struct gw_config *cfg = gw_config_live_get(d->config);
    char client_id[GW_CLIENT_ID_MAX + 1];
    char subject[GW_CLIENT_ID_MAX + 8];
    struct gw_client_id id;
    struct gw_envelope env;
    struct gw_session *s;

    (void)link;
    if (!topic_client_id(cfg->mqtt.up_topic, topic, client_id, &id)) {
        if (topic_client_id(cfg->mqtt.presence_topic, topic, client_id, &id)) {
            snprintf(subject, sizeof(subject), "dev=%s", client_id);
            on_presence(d, client_id, subject, payload, len);
            return;
        }
        refuse(d, GW_REFUSE_TOPIC, "mqtt",
               "not a device topic, or its client id is not a device id");
        return;
    }
    snprintf(subject, sizeof(subject), "dev=%s", client_id);
    int rc = gw_envelope_parse((const char *)payload, len,
                               (size_t)cfg->limits.max_message_bytes, &env);
    if (rc != 0) {
        refuse(d, refusal_of(rc), subject, gw_strerror(rc));
        return;
    }
    if (env.kind == GW_MSG_HELLO) {
        on_device_hello(d, client_id, &id, &env, subject);
    } else if (env.kind == GW_MSG_MCP &&
               gw_device_on_mcp(d->devices, client_id, &env)) {
        /* an answer on the device's MCP link, delivered (or dropped) */
    } else if ((s = gw_sessions_find(d->sessions, client_id)) != NULL) {
        gw_session_on_device_message(s, &env, (const char *)payload, len);
    } else {
        on_orphan_message(d, client_id, &env, subject);
    }
    gw_envelope_free(&env);
}

void gw_mqtt_dispatch_state(struct gw_mqtt_link *link, bool up, void *arg)
{
    struct gw_mqtt_dispatch *d = arg;

    (void)link;
    /* Sessions keep streaming audio while the broker is away; messages
     * to devices in the meantime are dropped (QoS 0) and counted. */
    gw_log(up ? GW_LOG_INFO : GW_LOG_WARN, "mqtt", "broker link %s",
           up ? "up" : "down");
    if (up) {
        /* The new subscription brings the retained presence of every
         * device again; a restarted broker numbers connections anew. */
        gw_device_table_presence_reset(d->devices);
    }
}
