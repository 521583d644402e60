/*
 * Instance wiring: broker messages become sessions and relayed messages,
 * UDP audio goes to its session, and shutdown drains every session with a
 * goodbye before the subsystems close.
 */
#include "gateway/instance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/presence.h"
#include "codec/topic.h"
#include "gateway/http_api.h"
#include "common/log.h"
#include "gateway/mcp_server.h"

#define DRAIN_TIMEOUT_MS 3000 /* bound on waiting for backends to close */
#define TOPIC_MAX        512

static const char *const refusal_names[GW_REFUSE_COUNT_] = {
    [GW_REFUSE_TOPIC] = "topic",
    [GW_REFUSE_TOO_BIG] = "too_big",
    [GW_REFUSE_MALFORMED] = "malformed",
    [GW_REFUSE_PROTO] = "protocol",
    [GW_REFUSE_HELLO] = "bad_hello",
    [GW_REFUSE_NO_ROUTE] = "no_route",
    [GW_REFUSE_LIMIT] = "max_sessions",
    [GW_REFUSE_BACKEND] = "backend_message",
    [GW_REFUSE_PRESENCE] = "presence",
};

const char *gw_refusal_name(enum gw_refusal why)
{
    return (unsigned)why < GW_REFUSE_COUNT_ ? refusal_names[why] : "?";
}

const struct gw_config *gw_instance_config(const struct gw_instance *inst)
{
    return inst->hold->cfg;
}

static struct gw_config_hold *hold_create(struct gw_config *cfg)
{
    struct gw_config_hold *hold = calloc(1, sizeof(*hold));

    if (hold == NULL) {
        gw_config_destroy(cfg);
        return NULL;
    }
    hold->cfg = cfg;
    hold->refs = 1;
    return hold;
}

void gw_instance_release_config(struct gw_instance *inst,
                                struct gw_config_hold *hold)
{
    (void)inst;
    if (hold != NULL && --hold->refs == 0) {
        gw_config_destroy(hold->cfg);
        free(hold);
    }
}

void gw_instance_set_config(struct gw_instance *inst, struct gw_config *cfg)
{
    struct gw_config_hold *hold = hold_create(cfg);

    if (hold == NULL) {
        gw_log(GW_LOG_ERROR, "config", "out of memory; keeping the old one");
        return;
    }
    gw_instance_release_config(inst, inst->hold);
    inst->hold = hold;
}

/* ---- to the device ---- */

int gw_instance_publish_device(struct gw_instance *inst, const char *client_id,
                               const char *json, size_t len)
{
    char topic[TOPIC_MAX];
    int rc = gw_topic_format(inst->hold->cfg->mqtt.down_topic, client_id, topic,
                             sizeof(topic));

    if (rc != 0) {
        return rc;
    }
    return gw_mqtt_link_publish(inst->mqtt, topic, json, len);
}

void gw_instance_goodbye(struct gw_instance *inst, const char *client_id,
                         const char *session_id)
{
    char msg[GW_SESSION_ID_MAX * 6 + 64];
    size_t len;

    if (gw_envelope_build_goodbye(session_id, msg, sizeof(msg), &len) == 0) {
        (void)gw_instance_publish_device(inst, client_id, msg, len);
    }
}

/* ---- from the broker ---- */

static void refuse(struct gw_instance *inst, enum gw_refusal why,
                   const char *subject, const char *detail)
{
    inst->stats.refused[why]++;
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

static void on_device_hello(struct gw_instance *inst, const char *client_id,
                            const struct gw_client_id *id,
                            const struct gw_envelope *env, const char *subject)
{
    struct gw_device_hello hello;
    int rc = gw_device_hello_parse(env->root, &hello);

    if (rc != 0) {
        refuse(inst, GW_REFUSE_HELLO, subject, gw_strerror(rc));
        return;
    }
    if (inst->stopping) {
        gw_log(GW_LOG_INFO, subject, "hello during shutdown: refused");
        gw_instance_goodbye(inst, client_id, "");
    } else if (gw_session_start(inst, client_id, id, &hello) == 0) {
        /* Also the start of the MCP link where no presence comes. */
        gw_devices_online(&inst->devices, client_id);
    }
    gw_device_hello_free(&hello);
}

/* A device message with no session: tell the device its session is gone. */
static void on_orphan_message(struct gw_instance *inst, const char *client_id,
                              const struct gw_envelope *env,
                              const char *subject)
{
    if (env->kind == GW_MSG_GOODBYE || env->kind == GW_MSG_MCP) {
        /* A goodbye needs no answer; MCP works without a voice session. */
        GW_LOG(GW_LOG_DEBUG, subject, "%s without a session: dropped",
               env->type);
        return;
    }
    inst->stats.no_session_goodbyes++;
    GW_LOG(GW_LOG_DEBUG, subject, "%s without a session: goodbye", env->type);
    gw_instance_goodbye(inst, client_id,
                        env->session_id != NULL ? env->session_id : "");
}

/*
 * Presence from the broker side (DESIGN.md section 2). A device that goes
 * offline takes its session with it at once: its UDP would otherwise be
 * waited for until the idle timeout. Nobody is left to hear a goodbye.
 */
static void on_presence(struct gw_instance *inst, const char *client_id,
                        const char *subject, const uint8_t *payload, size_t len)
{
    struct gw_presence p;
    struct gw_session *s = NULL;
    int rc = gw_presence_parse((const char *)payload, len, &p);

    if (rc != 0) {
        refuse(inst, GW_REFUSE_PRESENCE, subject, gw_strerror(rc));
        return;
    }
    rc = gw_presence_table_update(&inst->presence, client_id, &p,
                                  uv_now(inst->loop));
    if (rc < 0) {
        refuse(inst, GW_REFUSE_PRESENCE, subject, gw_strerror(rc));
        return;
    }
    if (rc == GW_PRESENCE_ARRIVED || rc == GW_PRESENCE_RETURNED) {
        inst->stats.presence_online++;
        GW_LOG(GW_LOG_DEBUG, subject, "online from %s",
               p.address[0] != '\0' ? p.address : "an unknown address");
        gw_devices_online(&inst->devices, client_id);
        return;
    }
    if (rc != GW_PRESENCE_LEFT) {
        /* A retained "offline" replayed after the broker link came back:
         * the device left while the link was down. */
        if (!p.online) {
            gw_devices_offline(&inst->devices, client_id);
        }
        return;
    }
    inst->stats.presence_offline++;
    GW_LOG(GW_LOG_DEBUG, subject, "offline");
    HASH_FIND(hh, inst->sessions, client_id, strlen(client_id), s);
    if (s != NULL) {
        gw_session_end(s, GW_END_DEVICE_OFFLINE);
    }
    gw_devices_offline(&inst->devices, client_id); /* its calls fail now */
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

static void on_mqtt_message(struct gw_mqtt_link *link, const char *topic,
                            const uint8_t *payload, size_t len, void *arg)
{
    struct gw_instance *inst = arg;
    const struct gw_config *cfg = inst->hold->cfg;
    char client_id[GW_CLIENT_ID_MAX + 1];
    char subject[GW_CLIENT_ID_MAX + 8];
    struct gw_client_id id;
    struct gw_envelope env;

    (void)link;
    if (!topic_client_id(cfg->mqtt.up_topic, topic, client_id, &id)) {
        if (topic_client_id(cfg->mqtt.presence_topic, topic, client_id, &id)) {
            snprintf(subject, sizeof(subject), "dev=%s", client_id);
            on_presence(inst, client_id, subject, payload, len);
            return;
        }
        refuse(inst, GW_REFUSE_TOPIC, "mqtt",
               "not a device topic, or its client id is not a device id");
        return;
    }
    snprintf(subject, sizeof(subject), "dev=%s", client_id);
    int rc = gw_envelope_parse((const char *)payload, len,
                               (size_t)cfg->limits.max_message_bytes, &env);
    if (rc != 0) {
        refuse(inst, refusal_of(rc), subject, gw_strerror(rc));
        return;
    }
    if (env.kind == GW_MSG_HELLO) {
        on_device_hello(inst, client_id, &id, &env, subject);
    } else if (env.kind == GW_MSG_MCP &&
               gw_devices_on_device_mcp(&inst->devices, client_id, &env)) {
        /* an answer on the device's MCP link, delivered (or dropped) */
    } else {
        struct gw_session *s = NULL;
        HASH_FIND(hh, inst->sessions, client_id, strlen(client_id), s);
        if (s != NULL) {
            gw_session_on_device_message(s, &env, (const char *)payload, len);
        } else {
            on_orphan_message(inst, client_id, &env, subject);
        }
    }
    gw_envelope_free(&env);
}

static void on_mqtt_state(struct gw_mqtt_link *link, bool up, void *arg)
{
    struct gw_instance *inst = arg;

    (void)link;
    /* Sessions keep streaming audio while the broker is away; messages
     * to devices in the meantime are dropped (QoS 0) and counted. */
    gw_log(up ? GW_LOG_INFO : GW_LOG_WARN, "mqtt", "broker link %s",
           up ? "up" : "down");
    if (up) {
        /* The new subscription brings the retained presence of every
         * device again; what was learned before may be stale (a broker
         * restart forgets its connections). */
        gw_presence_table_clear(&inst->presence);
    }
}

static void on_uplink(struct gw_udp_peer *peer, uint32_t timestamp,
                      const uint8_t *opus, size_t len, void *owner)
{
    (void)peer;
    gw_session_on_uplink(owner, timestamp, opus, len);
}

/* ---- lifecycle ---- */

static int start_mqtt(struct gw_instance *inst)
{
    const struct gw_config *cfg = inst->hold->cfg;
    const char *topics[] = {cfg->mqtt.up_topic, cfg->mqtt.presence_topic};
    struct gw_mqtt_link_options opts = {
        .host = cfg->mqtt.host,
        .port = cfg->mqtt.port,
        .client_id = cfg->mqtt.client_id,
        .username = cfg->mqtt.username,
        .password = cfg->mqtt.password,
        .keepalive_s = cfg->mqtt.keepalive_s,
        .tls = cfg->mqtt.tls.enabled,
        .ca_file = cfg->mqtt.tls.ca_file,
        .cert_file = cfg->mqtt.tls.cert_file,
        .key_file = cfg->mqtt.tls.key_file,
        .topics = topics,
        .n_topics = cfg->mqtt.presence_topic[0] != '\0' ? 2 : 1,
        .on_message = on_mqtt_message,
        .on_state = on_mqtt_state,
        .arg = inst,
    };
    return gw_mqtt_link_init(inst->loop, &opts, &inst->mqtt);
}

static void on_device_changed(void *arg, const struct gw_device *dev)
{
    struct gw_instance *inst = arg;

    if (inst->mcp_server != NULL) {
        gw_mcp_server_device_changed(inst->mcp_server, dev);
    }
}

/* The HTTP API and the MCP server behind it, when http.port is set. */
static int start_http(struct gw_instance *inst)
{
    const struct gw_config *cfg = inst->hold->cfg;
    int rc;

    if (cfg->http.port == 0) {
        return 0;
    }
    rc = gw_mcp_server_create(inst, &inst->mcp_server);
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, "http", "cannot create the MCP server: %s",
               gw_strerror(rc));
        return rc;
    }
    gw_devices_set_listener(&inst->devices, on_device_changed, inst);
    return gw_http_api_init(inst, &inst->api); /* failures logged there */
}

static const char *backend_ca_file(const struct gw_config *cfg)
{
    /* One lws context serves every backend, so it has one extra CA. */
    for (size_t i = 0; i < cfg->n_backends; i++) {
        if (cfg->backends[i].ca_file != NULL &&
            cfg->backends[i].ca_file[0] != '\0') {
            return cfg->backends[i].ca_file;
        }
    }
    return NULL;
}

static void on_drain_closed(uv_handle_t *handle);

int gw_instance_init(uv_loop_t *loop, struct gw_config *cfg,
                     struct gw_instance **out)
{
    struct gw_instance *inst = calloc(1, sizeof(*inst));
    int rc;

    if (inst == NULL || (inst->hold = hold_create(cfg)) == NULL) {
        if (inst == NULL) {
            gw_config_destroy(cfg);
        }
        free(inst);
        return GW_ENOMEM;
    }
    inst->loop = loop;
    inst->started_ms = uv_now(loop);
    gw_devices_init(&inst->devices, inst);
    struct gw_udp_audio_options uopts = {
        .bind_host = cfg->udp.bind,
        .port = cfg->udp.port,
        .on_audio = on_uplink,
    };
    rc = gw_udp_audio_init(loop, &uopts, &inst->udp);
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, "udp", "cannot bind %s:%d: %s", cfg->udp.bind,
               cfg->udp.port, gw_strerror(rc));
        goto fail;
    }
    rc = gw_backend_ws_init(loop, backend_ca_file(cfg), &inst->bws);
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, "ws", "cannot create the WebSocket context: %s",
               gw_strerror(rc));
        goto fail;
    }
    rc = start_mqtt(inst);
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, "mqtt", "cannot start the broker link: %s",
               gw_strerror(rc));
        goto fail;
    }
    rc = start_http(inst);
    if (rc != 0) {
        goto fail;
    }
    uv_timer_init(loop, &inst->drain_timer);
    inst->drain_timer.data = inst;
    gw_log(GW_LOG_INFO, "udp", "audio on %s:%d, advertised as %s:%d",
           cfg->udp.bind, gw_udp_audio_port(inst->udp), cfg->udp.public_host,
           cfg->udp.public_port > 0 ? cfg->udp.public_port
                                    : gw_udp_audio_port(inst->udp));
    *out = inst;
    return 0;

fail:
    /* Parts that did start close asynchronously; the caller stops the
     * loop after a failed init, so let them finish there. */
    if (inst->udp != NULL) {
        gw_udp_audio_close(inst->udp, NULL, NULL);
    }
    if (inst->bws != NULL) {
        gw_backend_ws_close(inst->bws, NULL, NULL);
    }
    if (inst->mqtt != NULL) {
        gw_mqtt_link_close(inst->mqtt, NULL, NULL);
    }
    if (inst->mcp_server != NULL) {
        gw_mcp_server_destroy(inst->mcp_server);
    }
    gw_devices_destroy(&inst->devices);
    gw_instance_release_config(inst, inst->hold);
    gw_presence_table_clear(&inst->presence);
    free(inst);
    return rc;
}

static void maybe_finish(struct gw_instance *inst)
{
    if (inst->parts_open > 0 || inst->n_alive > 0) {
        return;
    }
    gw_instance_release_config(inst, inst->hold);
    if (inst->stop_cb != NULL) {
        inst->stop_cb(inst, inst->stop_arg);
    }
    gw_presence_table_clear(&inst->presence);
    free(inst);
}

static void on_part_closed(struct gw_instance *inst)
{
    inst->parts_open--;
    maybe_finish(inst);
}

static void on_bws_closed(struct gw_backend_ws *bws, void *arg)
{
    (void)bws;
    on_part_closed(arg);
}

static void on_udp_closed(struct gw_udp_audio *ua, void *arg)
{
    (void)ua;
    on_part_closed(arg);
}

static void on_mqtt_closed(struct gw_mqtt_link *link, void *arg)
{
    (void)link;
    on_part_closed(arg);
}

static void on_api_closed(struct gw_http_api *api, void *arg)
{
    struct gw_instance *inst = arg;

    (void)api;
    inst->api = NULL;
    on_part_closed(inst);
}

static void on_drain_closed(uv_handle_t *handle)
{
    on_part_closed(handle->data);
}

static void close_parts(struct gw_instance *inst)
{
    if (inst->parts_open > 0 ||
        uv_is_closing((uv_handle_t *)&inst->drain_timer)) {
        return;
    }
    gw_instance_log_stats(inst); /* the last chance: parts close next */
    inst->parts_open = 4 + (inst->api != NULL);
    uv_timer_stop(&inst->drain_timer);
    uv_close((uv_handle_t *)&inst->drain_timer, on_drain_closed);
    /* HTTP first: its waiting requests let go of their device calls,
     * then every call still open ends (-32004) before the broker goes. */
    if (inst->api != NULL) {
        gw_http_api_close(inst->api, on_api_closed, inst);
    }
    if (inst->mcp_server != NULL) {
        gw_mcp_server_destroy(inst->mcp_server);
        inst->mcp_server = NULL;
    }
    gw_devices_destroy(&inst->devices);
    /* Backends first: sessions still waiting for a close get it now. */
    gw_backend_ws_close(inst->bws, on_bws_closed, inst);
    gw_udp_audio_close(inst->udp, on_udp_closed, inst);
    gw_mqtt_link_close(inst->mqtt, on_mqtt_closed, inst);
}

static void on_drain_timeout(uv_timer_t *timer)
{
    struct gw_instance *inst = timer->data;

    gw_log(GW_LOG_WARN, "gw", "%zu session%s still closing after %d ms",
           inst->n_alive, inst->n_alive == 1 ? "" : "s", DRAIN_TIMEOUT_MS);
    close_parts(inst);
}

void gw_instance_session_freed(struct gw_instance *inst)
{
    inst->n_alive--;
    if (!inst->stopping || inst->n_alive > 0) {
        return;
    }
    if (inst->parts_open == 0) {
        close_parts(inst);
    } else {
        maybe_finish(inst);
    }
}

void gw_instance_stop(struct gw_instance *inst,
                      void (*cb)(struct gw_instance *inst, void *arg),
                      void *arg)
{
    struct gw_session *s, *tmp;

    if (inst->stopping) {
        return;
    }
    inst->stopping = true;
    inst->stop_cb = cb;
    inst->stop_arg = arg;
    gw_log(GW_LOG_INFO, "gw", "draining %u session%s",
           HASH_COUNT(inst->sessions),
           HASH_COUNT(inst->sessions) == 1 ? "" : "s");
    HASH_ITER(hh, inst->sessions, s, tmp)
    {
        gw_session_end(s, GW_END_SHUTDOWN); /* each device gets a goodbye */
    }
    if (inst->n_alive == 0) {
        close_parts(inst);
    } else {
        uv_timer_start(&inst->drain_timer, on_drain_timeout, DRAIN_TIMEOUT_MS,
                       0);
    }
}

void gw_instance_log_stats(const struct gw_instance *inst)
{
    char line[1024];
    size_t n = 0;
    struct gw_udp_audio_stats us;

    n += (size_t)snprintf(line + n, sizeof(line) - n,
                          "sessions=%u online=%u started=%llu "
                          "relayed_up=%llu relayed_down=%llu audio_up=%llu "
                          "audio_down=%llu",
                          HASH_COUNT(inst->sessions), inst->presence.count,
                          (unsigned long long)inst->stats.sessions_started,
                          (unsigned long long)inst->stats.device_messages,
                          (unsigned long long)inst->stats.backend_messages,
                          (unsigned long long)inst->stats.uplink_audio,
                          (unsigned long long)inst->stats.downlink_audio);
    for (int i = 0; i < GW_END_COUNT_ && n < sizeof(line); i++) {
        if (inst->stats.sessions_ended[i] > 0) {
            n += (size_t)snprintf(
                line + n, sizeof(line) - n, " ended[%s]=%llu",
                gw_session_end_name(i),
                (unsigned long long)inst->stats.sessions_ended[i]);
        }
    }
    for (int i = 0; i < GW_REFUSE_COUNT_ && n < sizeof(line); i++) {
        if (inst->stats.refused[i] > 0) {
            n += (size_t)snprintf(line + n, sizeof(line) - n,
                                  " refused[%s]=%llu", gw_refusal_name(i),
                                  (unsigned long long)inst->stats.refused[i]);
        }
    }
    gw_udp_audio_get_stats(inst->udp, &us);
    for (int i = 0; i < GW_UDP_DROP_COUNT_ && n < sizeof(line); i++) {
        if (us.drops[i] > 0) {
            n += (size_t)snprintf(line + n, sizeof(line) - n,
                                  " udp_drop[%s]=%llu", gw_udp_drop_name(i),
                                  (unsigned long long)us.drops[i]);
        }
    }
    gw_log(GW_LOG_INFO, "stats", "%s", line);
}
