/* Messages to one device over the broker; see publish.h. */
#include "gateway/device/publish.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec/client_id.h"
#include "codec/envelope.h"
#include "codec/hello.h"
#include "codec/presence.h"
#include "codec/topic.h"
#include "common/log.h"
#include "gateway/device/publish_int.h"

#define TOPIC_MAX 512

/*
 * One device-bound message waiting for the broker. The link publishes at
 * QoS 0, and libmosquitto (2.0.11) refuses a QoS 0 publish while its
 * socket is gone (MOSQ_ERR_NO_CONN) without keeping it, so nothing held
 * here was sent before: a message goes out once or not at all. A QoS 1
 * publish gets the same MOSQ_ERR_NO_CONN but stays in the library's queue
 * and goes out after the reconnect (DUP set): holding it here too would
 * send it twice.
 */
struct held_msg {
    struct gw_list node; /* in pub->held, oldest first */
    uint64_t at_ms;      /* when it was held */
    size_t len;          /* payload bytes */
    char client_id[GW_CLIENT_ID_MAX + 1];
    char topic[TOPIC_MAX];
    char payload[]; /* len bytes */
};

static uint64_t now_ms(void)
{
    return uv_hrtime() / 1000000;
}

static void held_setup(struct gw_publisher *pub)
{
    if (pub->held.next == NULL) {
        gw_list_init(&pub->held);
    }
}

static void held_drop(struct gw_publisher *pub, struct held_msg *m)
{
    gw_list_unlink(&m->node);
    pub->held_count--;
    pub->held_bytes -= m->len;
    free(m);
}

static bool held_for(const struct gw_publisher *pub, const char *client_id)
{
    struct gw_list *it;

    if (pub->held_count == 0) {
        return false;
    }
    for (it = pub->held.next; it != &pub->held; it = it->next) {
        if (strcmp(GW_LIST_ENTRY(it, struct held_msg, node)->client_id,
                   client_id) == 0) {
            return true;
        }
    }
    return false;
}

/* One warning for n messages of one device dropped for their age. */
static void tell_expired(const char *client_id, size_t n, uint64_t max_age)
{
    char subject[GW_CLIENT_ID_MAX + 8];

    snprintf(subject, sizeof(subject), "dev=%s", client_id);
    gw_log(GW_LOG_WARN, subject,
           "%zu held message%s dropped: older than %llu ms", n,
           n == 1 ? "" : "s", (unsigned long long)max_age);
}

/* Drops what waited longer than limits.outbox_age_ms: a reply that late
 * is no longer the one the device is waiting for. One line for each run
 * of one device's messages. */
static void expire(struct gw_publisher *pub)
{
    const struct gw_config *cfg = gw_config_live_get(pub->config);
    uint64_t now = now_ms(), max_age = (uint64_t)cfg->limits.outbox_age_ms;
    char last[GW_CLIENT_ID_MAX + 1] = "";
    size_t n = 0;

    while (pub->held_count > 0) {
        struct held_msg *m =
            GW_LIST_ENTRY(pub->held.next, struct held_msg, node);
        if (now - m->at_ms <= max_age) {
            break;
        }
        if (n > 0 && strcmp(last, m->client_id) != 0) {
            tell_expired(last, n, max_age);
            n = 0;
        }
        memcpy(last, m->client_id, sizeof(last));
        n++;
        pub->stats.expired++;
        held_drop(pub, m);
    }
    if (n > 0) {
        tell_expired(last, n, max_age);
    }
}

static int hold(struct gw_publisher *pub, const char *client_id,
                const char *topic, const char *json, size_t len)
{
    const struct gw_config *cfg = gw_config_live_get(pub->config);
    struct held_msg *m;

    held_setup(pub);
    if (pub->held_count + 1 > (size_t)cfg->limits.outbox_messages ||
        pub->held_bytes + len > (size_t)cfg->limits.outbox_bytes) {
        pub->stats.overflow++;
        if (!pub->overflow_told) {
            pub->overflow_told = true;
            gw_log(GW_LOG_WARN, "mqtt",
                   "outbox full (%zu messages, %zu bytes): newer device "
                   "messages are dropped until the broker is back",
                   pub->held_count, pub->held_bytes);
        }
        return GW_ELIMIT;
    }
    if ((m = malloc(sizeof(*m) + len)) == NULL) {
        return GW_ENOMEM;
    }
    m->at_ms = now_ms();
    m->len = len;
    snprintf(m->client_id, sizeof(m->client_id), "%s", client_id);
    snprintf(m->topic, sizeof(m->topic), "%s", topic);
    memcpy(m->payload, json, len);
    gw_list_insert_tail(&pub->held, &m->node);
    pub->held_count++;
    pub->held_bytes += len;
    pub->stats.held++;
    if (GW_LOG_DEBUG <= gw_log_get_level()) {
        char subject[GW_CLIENT_ID_MAX + 8];
        snprintf(subject, sizeof(subject), "dev=%s", client_id);
        gw_log(GW_LOG_DEBUG, subject, "message held (%zu waiting)",
               pub->held_count);
    }
    return 0;
}

/* m's device has nothing left in the outbox: its waiter may go on. */
static void tell_sent(struct gw_publisher *pub, const char *client_id)
{
    if (pub->on_sent != NULL && !held_for(pub, client_id)) {
        pub->on_sent(pub->on_sent_arg, client_id);
    }
}

/* Publishes what waits for client_id (every device when NULL), in order;
 * stops at the first failure, which leaves the rest held. */
static void release(struct gw_publisher *pub, const char *client_id)
{
    struct gw_list *it, *tmp;
    uint64_t oldest = 0, now = now_ms();
    size_t n = 0;

    if (pub->held_count == 0 || pub->link == NULL ||
        !gw_mqtt_link_is_up(pub->link)) {
        return;
    }
    GW_LIST_FOREACH_SAFE(it, tmp, &pub->held)
    {
        struct held_msg *m = GW_LIST_ENTRY(it, struct held_msg, node);
        char subject[GW_CLIENT_ID_MAX + 8];

        if (client_id != NULL && strcmp(m->client_id, client_id) != 0) {
            continue;
        }
        if (gw_mqtt_link_publish(pub->link, m->topic, m->payload, m->len) !=
            0) {
            break;
        }
        if (n++ == 0) {
            oldest = now - m->at_ms;
        }
        pub->stats.sent++;
        if (client_id == NULL) {
            snprintf(subject, sizeof(subject), "dev=%s", m->client_id);
            GW_LOG(GW_LOG_DEBUG, subject, "held message sent after %llu ms",
                   (unsigned long long)(now - m->at_ms));
            /* held_drop frees m: the id goes into subject's buffer. */
            snprintf(subject, sizeof(subject), "%s", m->client_id);
            held_drop(pub, m);
            tell_sent(pub, subject);
            continue;
        }
        held_drop(pub, m);
    }
    if (n > 0 && client_id != NULL) {
        tell_sent(pub, client_id);
    }
    if (n > 0 && client_id != NULL) {
        char subject[GW_CLIENT_ID_MAX + 8];
        snprintf(subject, sizeof(subject), "dev=%s", client_id);
        gw_log(GW_LOG_INFO, subject,
               "%zu held message%s sent, the oldest after %llu ms", n,
               n == 1 ? "" : "s", (unsigned long long)oldest);
    } else if (n > 0) {
        gw_log(GW_LOG_INFO, "mqtt",
               "%zu held message%s sent, the oldest after %llu ms", n,
               n == 1 ? "" : "s", (unsigned long long)oldest);
    }
}

int gw_publish_json(struct gw_publisher *pub, const char *client_id,
                    const char *json, size_t len)
{
    const struct gw_config *cfg = gw_config_live_get(pub->config);
    char topic[TOPIC_MAX];
    int rc =
        gw_topic_format(cfg->mqtt.down_topic, client_id, topic, sizeof(topic));

    if (rc != 0) {
        return rc;
    }
    if (pub->link == NULL) {
        return GW_ENOENT;
    }
    if (pub->held_count > 0) {
        expire(pub);
    }
    /* Behind what already waits for this device, never before it. */
    if (gw_mqtt_link_is_up(pub->link) && !held_for(pub, client_id)) {
        rc = gw_mqtt_link_publish(pub->link, topic, json, len);
        if (rc != -ENOTCONN) {
            return rc;
        }
    }
    if (cfg->limits.outbox_messages == 0 || cfg->limits.outbox_age_ms == 0) {
        return -ENOTCONN; /* the outbox is off: dropped, as QoS 0 allows */
    }
    return hold(pub, client_id, topic, json, len);
}

bool gw_publish_waiting(const struct gw_publisher *pub, const char *client_id)
{
    return held_for(pub, client_id);
}

void gw_publish_goodbye(struct gw_publisher *pub, const char *client_id,
                        const char *session_id)
{
    char msg[GW_SESSION_ID_MAX * 6 + 64];
    size_t len;

    if (gw_envelope_build_goodbye(session_id, msg, sizeof(msg), &len) == 0) {
        (void)gw_publish_json(pub, client_id, msg, len);
    }
}

int gw__device_publish_mcp(struct gw_publisher *pub, const char *client_id,
                           const char *session_id, const cJSON *msg)
{
    char *text = gw_envelope_print_mcp(session_id, msg);
    size_t len;
    int rc;

    if (text == NULL) {
        return GW_ENOMEM;
    }
    len = strlen(text);
    /* What the firmware accepts in one message (docs/protocol.md
     * section 2). */
    rc = len > GW_ENVELOPE_DEVICE_MAX
             ? GW_ETOOBIG
             : gw_publish_json(pub, client_id, text, len);
    cJSON_free(text);
    return rc;
}

void gw_publish_link_state(struct gw_publisher *pub, bool up)
{
    if (!up || pub->held_count == 0) {
        return;
    }
    pub->overflow_told = false;
    expire(pub);
    if (!pub->presence_seen) {
        release(pub, NULL);
    } else if (pub->held_count > 0) {
        /*
         * The broker reports presence, so a device is reachable once it
         * is online again: after a broker restart devices reconnect at
         * their own pace, and a message for one that has not yet would be
         * lost. Its presence (retained or new) or its own message sends
         * what waits for it.
         */
        gw_log(GW_LOG_INFO, "mqtt",
               "%zu held message%s wait for their devices to be online",
               pub->held_count, pub->held_count == 1 ? "" : "s");
    }
}

/* The client id that topic carries under pattern, or false. */
static bool topic_device(const char *pattern, const char *topic,
                         char out[GW_CLIENT_ID_MAX + 1])
{
    const char *cap;
    size_t cap_len;

    if (pattern[0] == '\0' ||
        gw_topic_capture(pattern, topic, strlen(topic), &cap, &cap_len) != 0 ||
        cap_len == 0 || cap_len > GW_CLIENT_ID_MAX) {
        return false;
    }
    memcpy(out, cap, cap_len);
    out[cap_len] = '\0';
    return true;
}

static void heard(struct gw_publisher *pub, const char *topic,
                  const uint8_t *payload, size_t len, bool retained)
{
    const struct gw_config *cfg = gw_config_live_get(pub->config);
    char client_id[GW_CLIENT_ID_MAX + 1];
    struct gw_presence p;

    if (pub->presence_seen && pub->held_count == 0) {
        return; /* the usual case: nothing to decide */
    }
    if (topic_device(cfg->mqtt.presence_topic, topic, client_id)) {
        if (gw_presence_parse((const char *)payload, len, &p) != 0) {
            return;
        }
        pub->presence_seen = true;
        if (!p.online) {
            return;
        }
    } else if (retained ||
               !topic_device(cfg->mqtt.up_topic, topic, client_id)) {
        return;
    }
    if (pub->held_count > 0) {
        expire(pub);
        release(pub, client_id);
    }
}

void gw_publish_heard(struct gw_publisher *pub, const char *topic,
                      const uint8_t *payload, size_t len)
{
    heard(pub, topic, payload, len, false);
}

void gw_publish_heard_retained(struct gw_publisher *pub, const char *topic,
                               const uint8_t *payload, size_t len)
{
    heard(pub, topic, payload, len, true);
}

void gw_publish_close(struct gw_publisher *pub)
{
    size_t n = pub->held_count;

    while (pub->held_count > 0) {
        pub->stats.expired++;
        held_drop(pub, GW_LIST_ENTRY(pub->held.next, struct held_msg, node));
    }
    if (n > 0) {
        gw_log(GW_LOG_WARN, "mqtt", "%zu held message%s dropped at shutdown", n,
               n == 1 ? "" : "s");
    }
}
