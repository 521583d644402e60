/*
 * Instance wiring: the parts are made in order, each given the narrow
 * environment it needs, and closed in reverse at shutdown, after every
 * session has said goodbye. The work itself lives in the parts.
 */
#include "gateway/instance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "gateway/backend/backend_probe.h"

#define DRAIN_TIMEOUT_MS 3000 /* bound on waiting for backends to close */

const struct gw_config *gw_instance_config(const struct gw_instance *inst)
{
    return gw_config_live_get(&inst->config);
}

void gw_instance_set_config(struct gw_instance *inst, struct gw_config *cfg)
{
    if (gw_config_live_set(&inst->config, cfg) != 0) {
        gw_log(GW_LOG_ERROR, "config", "out of memory; keeping the old one");
    }
}

static void on_uplink(struct gw_udp_peer *peer, uint32_t timestamp,
                      uint8_t *opus, size_t len, void *owner)
{
    (void)peer;
    gw_session_on_uplink(owner, timestamp, opus, len);
}

static void on_uplink_warm(void *owner, unsigned step)
{
    gw_session_warm(owner, step);
}

/* A batch's frames go to the backends as one burst of sends. */
static void on_uplink_batch(void *arg, bool end)
{
    struct gw_instance *inst = arg;

    if (inst->bws == NULL) {
        return;
    }
    if (end) {
        gw_backend_ws_release(inst->bws);
    } else {
        gw_backend_ws_hold(inst->bws);
    }
}

/* ---- lifecycle ---- */

/* The outbox hears the broker first: what waits for a device goes out
 * before anything its message causes. */
static void on_mqtt_message(struct gw_mqtt_link *link, const char *topic,
                            const uint8_t *payload, size_t len, void *arg)
{
    struct gw_instance *inst = arg;

    gw_publish_heard(&inst->pub, topic, payload, len);
    gw_mqtt_dispatch_message(link, topic, payload, len, &inst->dispatch);
}

/* Replayed at subscribe: presence counts, a device's own message not. */
static void on_mqtt_retained(struct gw_mqtt_link *link, const char *topic,
                             const uint8_t *payload, size_t len, void *arg)
{
    struct gw_instance *inst = arg;

    gw_publish_heard_retained(&inst->pub, topic, payload, len);
    gw_mqtt_dispatch_retained(link, topic, payload, len, &inst->dispatch);
}

static void on_mqtt_state(struct gw_mqtt_link *link, bool up, void *arg)
{
    struct gw_instance *inst = arg;
    const struct gw_config *cfg = gw_instance_config(inst);

    gw_mqtt_dispatch_state(link, up, &inst->dispatch);
    gw_publish_link_state(&inst->pub, up);
    /* The plugin keeps the bindings undone in memory: a broker that
     * restarted hears them again (docs/protocol.md section 9.3). */
    if (up && inst->bindings != NULL) {
        (void)gw_binding_revoke_publish_all(inst->bindings, link,
                                            cfg->ota.revoke_topic,
                                            (size_t)cfg->mqtt.max_packet_bytes);
    }
}

/* An operator undid a binding: the plugin refuses its credentials and
 * closes the device's connection. */
static void on_unbind(const struct gw_binding_revoked *r, void *arg)
{
    struct gw_instance *inst = arg;
    const struct gw_config *cfg = gw_instance_config(inst);

    (void)gw_binding_revoke_publish(inst->mqtt, cfg->ota.revoke_topic,
                                    (size_t)cfg->mqtt.max_packet_bytes, r, 1);
}

/*
 * The bindings, when OTA hands out credentials only to bound devices; a
 * lab that turned activation off is told loudly what that means.
 */
static int open_bindings(struct gw_instance *inst)
{
    const struct gw_config *cfg = gw_instance_config(inst);
    struct gw_binding_store_options o = {
        .kind = cfg->bindings.store == GW_BINDINGS_POSTGRESQL
                    ? GW_BINDING_STORE_POSTGRESQL
                    : GW_BINDING_STORE_SQLITE,
        .path = cfg->bindings.path,
        .conninfo = cfg->bindings.conninfo,
    };
    int rc;

    if (!cfg->ota.enabled) {
        return 0;
    }
    if (cfg->ota.activation == GW_OTA_ACTIVATION_OFF) {
        gw_log(GW_LOG_WARN, "ota",
               "ota.activation is off: the OTA endpoint hands MQTT "
               "credentials to anyone who can reach it and names a MAC and "
               "uuid; use this in a lab only");
        return 0;
    }
    rc = gw_binding_store_open(&o, &inst->bindings);
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, "ota",
               "cannot open the bindings (%s): %s; OTA activation needs them",
               gw_binding_store_kind_name(o.kind), gw_strerror(rc));
        return rc;
    }
    gw_log(GW_LOG_INFO, "ota", "activation on: bindings in %s%s%s",
           gw_binding_store_kind_name(o.kind),
           o.kind == GW_BINDING_STORE_SQLITE ? " at " : "",
           o.kind == GW_BINDING_STORE_SQLITE ? o.path : "");
    return 0;
}

/* Devices this instance owns now may need their MCP client. */
static void on_owners_changed(void *arg)
{
    struct gw_instance *inst = arg;

    gw_device_table_owners_changed(&inst->devices);
}

static void on_cluster_refused(void *arg)
{
    struct gw_instance *inst = arg;

    inst->refused = true;
    if (inst->refused_cb != NULL) {
        inst->refused_cb(inst, inst->refused_arg);
    }
}

static void cluster_load(void *arg, unsigned *sessions, unsigned *devices)
{
    struct gw_instance *inst = arg;

    *sessions = (unsigned)gw_sessions_live(&inst->sessions);
    *devices = (unsigned)gw_device_table_online(&inst->devices);
}

static void on_peer_message(void *arg, const char *sender,
                            const uint8_t *payload, size_t len)
{
    struct gw_instance *inst = arg;

    gw_cluster_rpc_on_message(inst->crpc, sender, payload, len);
}

static void on_peer_joined(void *arg, const char *name)
{
    struct gw_instance *inst = arg;

    gw_cluster_rpc_peer_joined(inst->crpc, name);
}

/* Mode shared: a device message another instance received. */
static void on_carried(void *arg, const char *client_id, const char *payload,
                       size_t len)
{
    struct gw_instance *inst = arg;

    gw_mqtt_dispatch_carried(&inst->dispatch, client_id, payload, len);
}

static void carry_up(void *arg, const char *owner, const char *client_id,
                     const cJSON *msg)
{
    struct gw_instance *inst = arg;

    gw_cluster_rpc_carry(inst->crpc, owner, client_id, msg);
}

static bool device_owned(void *arg, const char *client_id)
{
    return gw_cluster_owns(arg, client_id);
}

/* Membership (cluster.mode): its will and topics go into the link's. */
static int start_cluster(struct gw_instance *inst)
{
    const struct gw_config *cfg = gw_instance_config(inst);
    char udp[96];

    snprintf(udp, sizeof(udp), "%s:%d", cfg->udp.public_host,
             cfg->udp.public_port);
    struct gw_cluster_env env = {
        .loop = inst->loop,
        .hash_mode = cfg->cluster.mode != GW_CLUSTER_MODE_OFF,
        .shared = cfg->cluster.mode == GW_CLUSTER_MODE_SHARED,
        /* mode off: the name is only shown (/healthz) */
        .name = cfg->cluster.instance[0] != '\0' ? cfg->cluster.instance
                                                 : cfg->instance,
        .topic_prefix = cfg->cluster.topic_prefix,
        .udp = udp,
        .on_owners_changed = on_owners_changed,
        .on_refused = on_cluster_refused,
        .load = cluster_load,
        .on_peer_message = on_peer_message,
        .on_peer_joined = on_peer_joined,
        .arg = inst,
    };
    int rc = gw_cluster_init(&env, &inst->cluster);
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, "cluster", "cannot start: %s", gw_strerror(rc));
        return rc;
    }
    if (env.hash_mode) {
        struct gw_cluster_rpc_env renv = {
            .cluster = inst->cluster,
            .devices = &inst->devices,
            .config = &inst->config,
            .on_carried = on_carried,
            .arg = inst,
        };
        if ((rc = gw_cluster_rpc_init(&renv, &inst->crpc)) != 0) {
            gw_log(GW_LOG_ERROR, "cluster", "cannot start: %s",
                   gw_strerror(rc));
            return rc;
        }
    }
    inst->dispatch.cluster = inst->cluster;
    if (env.shared) {
        inst->dispatch.carry = carry_up;
        inst->dispatch.carry_arg = inst;
    }
    gw_device_table_set_owner(&inst->devices, device_owned, inst->cluster);
    return 0;
}

static int start_mqtt(struct gw_instance *inst)
{
    const struct gw_config *cfg = gw_instance_config(inst);
    const char *topics[2 + GW_CLUSTER_TOPICS] = {cfg->mqtt.up_topic,
                                                 cfg->mqtt.presence_topic};
    /* Mode shared: the broker gives each device's messages to one member
     * of the group (docs/emqx.md). */
    if (cfg->cluster.mode == GW_CLUSTER_MODE_SHARED) {
        int n = snprintf(inst->up_sub, sizeof(inst->up_sub), "$share/%s/%s",
                         cfg->cluster.share_group, cfg->mqtt.up_topic);
        if (n < 0 || (size_t)n >= sizeof(inst->up_sub)) {
            gw_log(GW_LOG_ERROR, "cluster", "cluster.share_group: too long");
            return GW_EINVAL;
        }
        topics[0] = inst->up_sub;
    }
    size_t n_topics = cfg->mqtt.presence_topic[0] != '\0' ? 2 : 1;
    const char *will_topic = NULL, *will_payload = NULL;
    int rc = start_cluster(inst);

    if (rc != 0) {
        return rc;
    }
    (void)gw_cluster_will(inst->cluster, &will_topic, &will_payload);
    if (n_topics == 1) {
        topics[1] = NULL;
    }
    n_topics +=
        gw_cluster_topics(inst->cluster, topics + n_topics, GW_CLUSTER_TOPICS);
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
        .status_topic = cfg->mqtt.status_topic,
        .will_topic = will_topic,
        .will_payload = will_payload,
        /* hellos published while it is not subscribed are lost */
        .quick_retry = true,
        .topics = topics,
        .n_topics = n_topics,
        .on_message = on_mqtt_message,
        .on_retained = on_mqtt_retained,
        .on_state = on_mqtt_state,
        .arg = inst,
    };
    rc = gw_mqtt_link_init(inst->loop, &opts, &inst->mqtt);

    inst->pub.link = inst->mqtt;
    gw_cluster_set_link(inst->cluster, inst->mqtt);
    return rc;
}

static void on_device_changed(void *arg, const struct gw_device *dev,
                              unsigned what)
{
    struct gw_instance *inst = arg;

    if (inst->mcp_server != NULL) {
        gw_mcp_server_device_changed(inst->mcp_server, dev, what);
    }
    gw_cluster_rpc_device_changed(inst->crpc, dev, what);
    /* Offline however it went (the broker's word, or the end of the
     * session that held it on a broker without presence): its sessions
     * with MCP servers end. */
    if (dev->state == GW_DEVICE_GONE && inst->outbound != NULL) {
        gw_mcp_outbound_device_gone(inst->outbound, dev->client_id);
    }
}

/* Without the MCP server nobody takes them: the device hears -32006. */
static bool on_device_request(void *arg, struct gw_device *dev,
                              const struct gw_rpc *rpc)
{
    struct gw_instance *inst = arg;

    return inst->mcp_server != NULL &&
           gw_mcp_server_device_request(inst->mcp_server, dev, rpc);
}

/* A device whose presence went unconfirmed past the grace: as when the
 * broker says offline, its session ends (and with it the record). */
static void on_device_left(void *arg, struct gw_device *dev)
{
    (void)arg;
    if (dev->session != NULL) {
        gw_session_end(dev->session, GW_END_DEVICE_OFFLINE);
    }
}

static struct gw_metrics_sources metrics_sources(struct gw_instance *inst)
{
    struct gw_metrics_sources src = {
        .loop = inst->loop,
        .counters = &inst->counters,
        .sessions = &inst->sessions,
        .devices = &inst->devices,
        .started_ms = inst->started_ms,
        .calls = &inst->calls,
        .mqtt = inst->mqtt,
        .udp = inst->udp,
        .bws = inst->bws,
        .mcp_server = inst->mcp_server,
        .outbound = inst->outbound,
        .cluster = &inst->cluster,
        .crpc = &inst->crpc,
    };
    return src;
}

/* The HTTP API and the MCP server behind it, when http.port is set. */
static int start_http(struct gw_instance *inst)
{
    const struct gw_config *cfg = gw_instance_config(inst);
    struct gw_mcp_server_env menv = {
        .loop = inst->loop,
        .config = &inst->config,
        .devices = &inst->devices,
    };
    int rc;

    if (cfg->http.port == 0) {
        return 0;
    }
    rc = gw_mcp_server_init(&menv, &inst->mcp_server);
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, "http", "cannot start the MCP server: %s",
               gw_strerror(rc));
        return rc;
    }
    struct gw_http_api_env aenv = {
        .loop = inst->loop,
        .config = &inst->config,
        .devices = &inst->devices,
        .sessions = &inst->sessions,
        .calls = &inst->calls,
        .mcp_server = inst->mcp_server,
        .metrics = metrics_sources(inst),
        .drain = &inst->drain,
        .bindings = inst->bindings,
        .on_unbind = on_unbind,
        .on_unbind_arg = inst,
    };
    return gw_http_api_init(&aenv, &inst->api); /* failures logged there */
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

static void on_sessions_empty(struct gw_sessions *t, void *arg);
static void on_drain_closed(uv_handle_t *handle);

/* A drain began: the record says draining, the others take the hellos. */
static void on_drain_started(void *arg)
{
    struct gw_instance *inst = arg;

    if (inst->cluster != NULL) {
        gw_cluster_set_draining(inst->cluster);
    }
}

/* The rolling restart's drain is over: main stops the instance. */
static void on_drained(void *arg)
{
    struct gw_instance *inst = arg;

    if (inst->drained_cb != NULL) {
        inst->drained_cb(inst, inst->drained_arg);
    }
}

/* The parts every instance has, in the order they depend on each other. */
static int start_parts(struct gw_instance *inst)
{
    const struct gw_config *cfg = gw_instance_config(inst);
    struct gw_udp_audio_options uopts = {
        .bind_host = cfg->udp.bind,
        .port = cfg->udp.port,
        .on_audio = on_uplink,
        .on_batch = on_uplink_batch,
        .batch_arg = inst,
        .on_warm = on_uplink_warm,
    };
    int rc = open_bindings(inst);

    if (rc != 0) {
        return rc;
    }
    rc = gw_udp_audio_init(inst->loop, &uopts, &inst->udp);
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, "udp", "cannot bind %s:%d: %s", cfg->udp.bind,
               cfg->udp.port, gw_strerror(rc));
        return rc;
    }
    rc = gw_backend_ws_init(inst->loop, backend_ca_file(cfg), &inst->bws);
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, "ws", "cannot create the WebSocket context: %s",
               gw_strerror(rc));
        return rc;
    }
    gw_backend_ws_set_ping(inst->bws, (unsigned)cfg->health.ping_interval_s);
    /* Kept in the session table's env; freed with the instance. */
    struct gw_backend_pool *pool = gw_backend_pool_new(uv_hrtime());
    if (pool == NULL) {
        return GW_ENOMEM;
    }
    struct gw_session_env senv = {
        .loop = inst->loop,
        .config = &inst->config,
        .pub = &inst->pub,
        .udp = inst->udp,
        .bws = inst->bws,
        .pool = pool,
        .devices = &inst->devices,
        .counters = &inst->counters,
    };
    gw_sessions_init(&inst->sessions, &senv);
    struct gw_device_calls_env cenv = {
        .loop = inst->loop,
        .config = &inst->config,
        .pub = &inst->pub,
        .devices = &inst->devices,
        .sessions = &inst->sessions,
        .bindings = inst->bindings,
    };
    gw_device_calls_init(&inst->calls, &cenv);
    rc = gw_backend_probe_start(inst->loop, &inst->config, inst->bws, pool,
                                &inst->probe);
    if (rc != 0) {
        return rc;
    }
    inst->sessions.on_empty = on_sessions_empty;
    inst->sessions.on_empty_arg = inst;
    inst->dispatch = (struct gw_mqtt_dispatch){
        .config = &inst->config,
        .devices = &inst->devices,
        .sessions = &inst->sessions,
        .pub = &inst->pub,
        .counters = &inst->counters,
    };
    struct gw_mcp_outbound_env oenv = {
        .loop = inst->loop,
        .config = &inst->config,
        .pub = &inst->pub,
        .devices = &inst->devices,
        .bindings = inst->bindings,
    };
    rc = gw_mcp_outbound_init(&oenv, &inst->outbound);
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, "mcp-out", "cannot start the MCP client: %s",
               gw_strerror(rc));
        return rc;
    }
    inst->dispatch.outbound = inst->outbound;
    gw_device_table_set_listener(&inst->devices, on_device_changed, inst);
    gw_device_table_set_request_handler(&inst->devices, on_device_request,
                                        inst);
    gw_device_table_set_left_handler(&inst->devices, on_device_left, inst);
    rc = start_mqtt(inst);
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, "mqtt", "cannot start the broker link: %s",
               gw_strerror(rc));
        return rc;
    }
    return start_http(inst);
}

static void close_parts(struct gw_instance *inst);

int gw_instance_init(uv_loop_t *loop, struct gw_config *cfg,
                     struct gw_instance **out)
{
    struct gw_instance *inst = calloc(1, sizeof(*inst));
    int rc;

    if (inst == NULL) {
        gw_config_destroy(cfg);
        return GW_ENOMEM;
    }
    if (gw_config_live_init(&inst->config, cfg) != 0) {
        free(inst);
        return GW_ENOMEM;
    }
    inst->loop = loop;
    inst->started_ms = uv_now(loop);
    inst->pub.config = &inst->config;
    uv_timer_init(loop, &inst->drain_timer);
    inst->drain_timer.data = inst;
    struct gw_drain_env denv = {
        .loop = loop,
        .sessions = &inst->sessions,
        .on_start = on_drain_started,
        .on_done = on_drained,
        .arg = inst,
    };
    gw_drain_init(&inst->drain, &denv);
    gw_device_table_init(&inst->devices, loop, &inst->config, &inst->pub);
    rc = start_parts(inst);
    if (rc != 0) {
        /* What did start closes on the loop; the caller runs it until
         * it empties and frees nothing itself. */
        inst->stopping = true;
        close_parts(inst);
        return rc;
    }
    gw_log(GW_LOG_INFO, "udp", "audio on %s:%d, advertised as %s:%d",
           cfg->udp.bind, gw_udp_audio_port(inst->udp), cfg->udp.public_host,
           cfg->udp.public_port > 0 ? cfg->udp.public_port
                                    : gw_udp_audio_port(inst->udp));
    *out = inst;
    return 0;
}

/* The instance goes once every part has closed and every session's
 * memory is released (sessions point into the instance until then). */
static void maybe_finish(struct gw_instance *inst)
{
    if (inst->parts_open > 0 || gw_sessions_alive(&inst->sessions) > 0) {
        return;
    }
    gw_config_live_close(&inst->config);
    gw_backend_pool_free(inst->sessions.env.pool);
    if (inst->bindings != NULL) {
        gw_binding_store_close(inst->bindings);
    }
    if (inst->stop_cb != NULL) {
        inst->stop_cb(inst, inst->stop_arg);
    }
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

static void on_probe_closed(void *arg)
{
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
    (void)api;
    on_part_closed(arg);
}

static void on_mcp_server_closed(struct gw_mcp_server *srv, void *arg)
{
    (void)srv;
    on_part_closed(arg);
}

static void on_outbound_closed(struct gw_mcp_outbound *ob, void *arg)
{
    (void)ob;
    on_part_closed(arg);
}

static void on_devices_closed(struct gw_device_table *t, void *arg)
{
    (void)t;
    on_part_closed(arg);
}

static void on_drain_closed(uv_handle_t *handle)
{
    on_part_closed(handle->data);
}

static void on_rolling_drain_closed(void *arg)
{
    on_part_closed(arg);
}

/*
 * Every part closes, each finishing in its own callback; the last one
 * frees the instance. The count covers every part first, so no callback
 * that runs early can see it reach zero.
 */
static void close_parts(struct gw_instance *inst)
{
    if (uv_is_closing((uv_handle_t *)&inst->drain_timer)) {
        return;
    }
    if (inst->udp != NULL) {
        gw_instance_log_stats(inst); /* the last chance: parts close next */
    }
    /* The drain timers and the device table always close; the other
     * parts when they started; one more holds until every close is
     * started. */
    inst->parts_open = 3 + (inst->api != NULL) + (inst->mcp_server != NULL) +
                       (inst->outbound != NULL) + (inst->bws != NULL) +
                       (inst->probe != NULL) + (inst->udp != NULL) +
                       (inst->mqtt != NULL) + 1;
    uv_timer_stop(&inst->drain_timer);
    uv_close((uv_handle_t *)&inst->drain_timer, on_drain_closed);
    gw_drain_close(&inst->drain, on_rolling_drain_closed, inst);
    /* HTTP first: its waiting requests let go of their device calls,
     * then every call still open ends (-32004) before the broker goes. */
    if (inst->api != NULL) {
        gw_http_api_close(inst->api, on_api_closed, inst);
    }
    gw_device_table_set_listener(&inst->devices, NULL, NULL);
    gw_device_table_set_request_handler(&inst->devices, NULL, NULL);
    gw_device_table_set_left_handler(&inst->devices, NULL, NULL);
    if (inst->mcp_server != NULL) {
        gw_mcp_server_close(inst->mcp_server, on_mcp_server_closed, inst);
    }
    /* Devices' requests to MCP servers end (-32004) while the broker is
     * still there to carry the answers. */
    if (inst->outbound != NULL) {
        inst->dispatch.outbound = NULL;
        gw_mcp_outbound_close(inst->outbound, on_outbound_closed, inst);
    }
    /* Requests served for other instances let go while links live. */
    gw_cluster_rpc_close(inst->crpc);
    inst->crpc = NULL;
    gw_device_table_close(&inst->devices, on_devices_closed, inst);
    /* Probes under way close with the backends' context. */
    if (inst->probe != NULL) {
        gw_backend_probe_close(inst->probe, on_probe_closed, inst);
    }
    /* Backends first: sessions still waiting for a close get it now. */
    if (inst->bws != NULL) {
        gw_backend_ws_close(inst->bws, on_bws_closed, inst);
    }
    if (inst->udp != NULL) {
        gw_udp_audio_close(inst->udp, on_udp_closed, inst);
    }
    /* The record says gone before the link's clean disconnect. */
    inst->dispatch.cluster = NULL;
    gw_device_table_set_owner(&inst->devices, NULL, NULL);
    gw_cluster_close(inst->cluster, NULL, NULL);
    inst->cluster = NULL;
    if (inst->mqtt != NULL) {
        gw_mqtt_link_close(inst->mqtt, on_mqtt_closed, inst);
        inst->pub.link = NULL;
    }
    gw_publish_close(&inst->pub);
    /* The link calls in no more: the dispatcher's tables can go. */
    gw_mqtt_dispatch_close(&inst->dispatch);
    on_part_closed(inst); /* the hold taken above */
}

static void on_drain_timeout(uv_timer_t *timer)
{
    struct gw_instance *inst = timer->data;
    size_t n = gw_sessions_alive(&inst->sessions);

    gw_log(GW_LOG_WARN, "gw", "%zu session%s still closing after %d ms", n,
           n == 1 ? "" : "s", DRAIN_TIMEOUT_MS);
    close_parts(inst);
}

static void on_sessions_empty(struct gw_sessions *t, void *arg)
{
    struct gw_instance *inst = arg;

    (void)t;
    if (!inst->stopping) {
        gw_drain_sessions_changed(&inst->drain);
        return;
    }
    if (uv_is_closing((uv_handle_t *)&inst->drain_timer)) {
        maybe_finish(inst); /* the parts closed first (drain timeout) */
    } else {
        close_parts(inst);
    }
}

void gw_instance_close(struct gw_instance *inst,
                       void (*cb)(struct gw_instance *inst, void *arg),
                       void *arg)
{
    size_t live = gw_sessions_live(&inst->sessions);

    if (inst->stopping) {
        return;
    }
    inst->stopping = true;
    inst->dispatch.stopping = true;
    /* The others take this instance's devices' new hellos at once. */
    gw_cluster_leave(inst->cluster);
    inst->stop_cb = cb;
    inst->stop_arg = arg;
    gw_log(GW_LOG_INFO, "gw", "draining %zu session%s", live,
           live == 1 ? "" : "s");
    gw_sessions_end_all(&inst->sessions, GW_END_SHUTDOWN);
    if (gw_sessions_alive(&inst->sessions) == 0) {
        close_parts(inst);
    } else {
        uv_timer_start(&inst->drain_timer, on_drain_timeout, DRAIN_TIMEOUT_MS,
                       0);
    }
}

void gw_instance_on_refused(struct gw_instance *inst,
                            void (*cb)(struct gw_instance *inst, void *arg),
                            void *arg)
{
    inst->refused_cb = cb;
    inst->refused_arg = arg;
}

void gw_instance_on_drained(struct gw_instance *inst,
                            void (*cb)(struct gw_instance *inst, void *arg),
                            void *arg)
{
    inst->drained_cb = cb;
    inst->drained_arg = arg;
}

void gw_instance_drain(struct gw_instance *inst, const char *by)
{
    if (inst->stopping) {
        return; /* stopping already, at once */
    }
    (void)gw_drain_start(
        &inst->drain, gw_instance_config(inst)->cluster.drain_deadline_s, by);
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
                          (unsigned)gw_sessions_live(&inst->sessions),
                          (unsigned)gw_device_table_online(&inst->devices),
                          (unsigned long long)inst->counters.sessions_started,
                          (unsigned long long)inst->counters.device_messages,
                          (unsigned long long)inst->counters.backend_messages,
                          (unsigned long long)inst->counters.uplink_audio,
                          (unsigned long long)inst->counters.downlink_audio);
    for (int i = 0; i < GW_END_COUNT_ && n < sizeof(line); i++) {
        if (inst->counters.sessions_ended[i] > 0) {
            n += (size_t)snprintf(
                line + n, sizeof(line) - n, " ended[%s]=%llu",
                gw_session_end_name(i),
                (unsigned long long)inst->counters.sessions_ended[i]);
        }
    }
    for (int i = 0; i < GW_REFUSE_COUNT_ && n < sizeof(line); i++) {
        if (inst->counters.refused[i] > 0) {
            n +=
                (size_t)snprintf(line + n, sizeof(line) - n,
                                 " refused[%s]=%llu", gw_refusal_name(i),
                                 (unsigned long long)inst->counters.refused[i]);
        }
    }
    if (inst->pub.stats.held > 0 && n < sizeof(line)) {
        n += (size_t)snprintf(
            line + n, sizeof(line) - n,
            " outbox[held]=%llu outbox[sent]=%llu outbox[expired]=%llu "
            "outbox[overflow]=%llu",
            (unsigned long long)inst->pub.stats.held,
            (unsigned long long)inst->pub.stats.sent,
            (unsigned long long)inst->pub.stats.expired,
            (unsigned long long)inst->pub.stats.overflow);
    }
    gw_udp_audio_get_stats(inst->udp, &us);
    for (int i = 0; i < GW_UDP_DROP_COUNT_ && n < sizeof(line); i++) {
        if (us.drops[i] > 0) {
            n += (size_t)snprintf(line + n, sizeof(line) - n,
                                  " udp_drop[%s]=%llu", gw_udp_drop_name(i),
                                  (unsigned long long)us.drops[i]);
        }
    }
    if (gw_log_peer_suppressed() > 0 && n < sizeof(line)) {
        /* The lines peers' floods left out, said even when none follows. */
        n += (size_t)snprintf(line + n, sizeof(line) - n, " log_left_out=%llu",
                              (unsigned long long)gw_log_peer_suppressed());
    }
    gw_log(GW_LOG_INFO, "stats", "%s", line);
}
