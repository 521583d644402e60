/*
 * hybridgw-sim's simulated device: a firmware-faithful MQTT+UDP client on
 * the libuv loop (anchor-device-firmware.md sections 2-7 and 9). This file
 * owns its life cycle, identity and result; the wire, the audio channel
 * and the turns have files of their own.
 */
#include "tools/sim_device_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "codec/topic.h"
#include "crypto/credential.h"
#include "common/log.h"
#include "tools/sim_common.h"
#include "tools/sim_espmcp.h"

#define DEF_USERNAME "eyJpcCI6IjEyNy4wLjAuMSJ9" /* {"ip":"127.0.0.1"} */

static const char *const state_names[] = {"connecting", "hello",  "opening",
                                          "listening",  "idle",   "speaking",
                                          "linger",     "asleep", "done"};

double gw_sim_dev_ms_since(uint64_t from_ns, uint64_t to_ns)
{
    return ((double)to_ns - (double)from_ns) / 1e6;
}

const char *gw_sim_dev_state_name(enum state s)
{
    return state_names[s];
}

void gw_sim_dev_event(struct gw_sim_device *d, const char *fmt, ...)
{
    char line[640];
    va_list ap;

    if (d->o.on_event == NULL || d->closing) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    d->o.on_event(d, gw_sim_dev_ms_since(d->t0_ns, uv_hrtime()), line,
                  d->o.arg);
}

void gw_sim_dev_fail(struct gw_sim_device *d, const char *fmt, ...)
{
    va_list ap;

    if (d->finished) {
        return;
    }
    if (d->r.reason[0] == '\0') {
        va_start(ap, fmt);
        vsnprintf(d->r.reason, sizeof(d->r.reason), fmt, ap);
        va_end(ap);
        gw_log(GW_LOG_WARN, d->subject, "%s", d->r.reason);
    }
    gw_sim_dev_finish(d);
}

void gw_sim_dev_set_subject(struct gw_sim_device *d)
{
    snprintf(d->subject, sizeof(d->subject), "dev=%s sid=%s", d->client_id,
             d->sid[0] ? d->sid : "null");
}

/* One handle or request finished closing; the last one frees. */
void gw_sim_dev_release(struct gw_sim_device *d)
{
    d->open_handles--;
    if (!d->closing || d->open_handles > 0) {
        return;
    }
    if (d->close_cb != NULL) {
        d->close_cb(d, d->close_arg);
    }
    gw_sim_dev_mcp_drop_queue(d);
    gw_sim_dev_call_free(d);
    gw_sim_esp_destroy(d->esp);
    gw_aes_ctr_destroy(d->aes);
    EVP_MD_CTX_free(d->up_md);
    EVP_MD_CTX_free(d->down_md);
    opus_decoder_destroy(d->dec);
    free(d->queue);
    free(d->pcm);
    free(d->tone_pcm);
    free(d);
}

void gw_sim_dev_on_closed(uv_handle_t *h)
{
    gw_sim_dev_release(h->data);
}

static void on_duration(uv_timer_t *t)
{
    struct gw_sim_device *d = t->data;

    if (!d->closing) {
        gw_sim_device_stop(d);
    }
}

/* ---- life cycle ------------------------------------------------------ */

void gw_sim_device_options_default(struct gw_sim_device_options *o)
{
    memset(o, 0, sizeof(*o));
    o->host = "127.0.0.1";
    o->port = 1883;
    o->publish_topic = "device-server";
    o->keepalive_s = 240;
    o->mode = GW_SIM_MODE_AUTO;
    o->end = GW_SIM_END_GOODBYE;
    o->turns = 1;
    o->speech_frames = 50; /* 3 s */
    o->frame_ms = 60;
    o->require_reply = true;
    o->decode = true;
    o->connect_timeout_ms = 10000;
    o->hello_timeout_ms = 10000;
    o->turn_timeout_ms = 60000;
    o->channel_timeout_ms = 120000;
    o->end_timeout_ms = 60000;
    o->linger_ms = 500;
    o->mcp_big_resource_bytes = 4096;
    o->mcp_reconnect_tools = UINT32_MAX;
}

/* GID_test@@@<random MAC>@@@<random uuid v4>, as a fresh board has. */
static int make_client_id(char *out, size_t cap)
{
    uint8_t mac[6];
    char uuid[GW_SIM_UUID_LEN + 1];

    if (RAND_bytes(mac, sizeof(mac)) != 1 || gw_sim_uuid4(uuid) != 0) {
        return GW_ECRYPTO;
    }
    snprintf(out, cap, "GID_test@@@%02x_%02x_%02x_%02x_%02x_%02x@@@%s", mac[0],
             mac[1], mac[2], mac[3], mac[4], mac[5], uuid);
    return 0;
}

/* A topic with {client_id} gets it filled in; others are literal. */
static int expand_topic(const char *tpl, const char *cid, char *out, size_t cap)
{
    if (strstr(tpl, "{client_id}") != NULL) {
        return gw_topic_format(tpl, cid, out, cap);
    }
    if (strlen(tpl) >= cap) {
        return GW_ENOSPC;
    }
    memcpy(out, tpl, strlen(tpl) + 1);
    return 0;
}

static int setup_identity(struct gw_sim_device *d,
                          const struct gw_sim_device_options *o)
{
    const char *user = o->username ? o->username : DEF_USERNAME;
    int rc;

    if (o->client_id != NULL) {
        if (strlen(o->client_id) >= sizeof(d->client_id)) {
            return GW_EINVAL;
        }
        memcpy(d->client_id, o->client_id, strlen(o->client_id) + 1);
    } else if ((rc = make_client_id(d->client_id, sizeof(d->client_id))) != 0) {
        return rc;
    }
    if (strlen(user) >= sizeof(d->username) ||
        (o->password && strlen(o->password) >= sizeof(d->password))) {
        return GW_EINVAL;
    }
    memcpy(d->username, user, strlen(user) + 1);
    if (o->password != NULL) {
        memcpy(d->password, o->password, strlen(o->password) + 1);
        d->has_password = true;
    } else if (o->key != NULL && o->key[0] != '\0') {
        rc = gw_credential_password_make(
            o->key, strlen(o->key), d->client_id, strlen(d->client_id),
            d->username, strlen(d->username), d->password, sizeof(d->password));
        if (rc != 0) {
            return rc;
        }
        d->has_password = true;
    }
    if ((rc = expand_topic(o->publish_topic, d->client_id, d->pub_topic,
                           sizeof(d->pub_topic))) != 0) {
        return rc;
    }
    if (o->subscribe_topic != NULL && o->subscribe_topic[0] != '\0') {
        return expand_topic(o->subscribe_topic, d->client_id, d->sub_topic,
                            sizeof(d->sub_topic));
    }
    return 0;
}

static void free_early(struct gw_sim_device *d)
{
    gw_sim_esp_destroy(d->esp);
    gw_aes_ctr_destroy(d->aes);
    EVP_MD_CTX_free(d->up_md);
    EVP_MD_CTX_free(d->down_md);
    free(d);
}

static int setup_state(struct gw_sim_device *d,
                       const struct gw_sim_device_options *o)
{
    int rc;

    if ((rc = gw_aes_ctr_create(&d->aes)) != 0) {
        return rc;
    }
    d->up_md = EVP_MD_CTX_new();
    d->down_md = EVP_MD_CTX_new();
    if (d->up_md == NULL || d->down_md == NULL ||
        EVP_DigestInit_ex(d->up_md, EVP_sha256(), NULL) != 1 ||
        EVP_DigestInit_ex(d->down_md, EVP_sha256(), NULL) != 1) {
        return GW_ECRYPTO;
    }
    gw_sim_mcp_defaults(&d->mcp);
    d->mcp.extra_tools = o->mcp_extra_tools;
    d->mcp.extra_description_bytes = o->mcp_tool_bytes;
    d->mcp.silent = o->mcp_silent;
    d->mcp.ignore_first = o->mcp_ignore_first;
    d->mcp.echo_tool = o->mcp_echo_tool;
    if (o->mcp_profile == GW_SIM_MCP_ESP) {
        struct gw_sim_esp_options eo = {
            .update_ms = o->mcp_update_ms,
            .change_after_ms = o->mcp_change_after_ms,
            .big_resource_bytes = o->mcp_big_resource_bytes,
            .remote = o->mcp_remote,
            .n_remote = o->n_mcp_remote,
            .remote_init = o->mcp_remote_init,
            .remote_progress = o->mcp_remote_progress,
            .string_progress = o->mcp_string_progress,
            .capability_gate = o->mcp_capability_gate,
            .engine_lifecycle = o->mcp_engine_lifecycle,
        };
        if ((rc = gw_sim_esp_create(&eo, &d->mcp, &d->esp)) != 0) {
            return rc;
        }
        d->r.mcp_esp = d->esp;
    }
    d->sample_rate = 24000; /* the firmware's defaults before any hello */
    d->frame_duration = 60;
    d->frame_ns = (uint64_t)o->frame_ms * 1000000u;
    d->r.connect_ms = d->r.hello_ms = NAN;
    d->r.stt_ms = d->r.tts_start_ms = d->r.first_audio_ms = NAN;
    d->r.tts_stop_ms = d->r.goodbye_ms = NAN;
    return 0;
}

int gw_sim_device_init(uv_loop_t *loop,
                       const struct gw_sim_device_options *opts,
                       struct gw_sim_device **out)
{
    struct gw_sim_device *d;
    int rc;

    if (loop == NULL || opts == NULL || out == NULL || opts->host == NULL ||
        opts->port < 1 || opts->port > 65535 || opts->clip == NULL ||
        opts->frame_ms == 0 || opts->publish_topic == NULL ||
        strlen(opts->host) >= sizeof(d->host)) {
        return GW_EINVAL;
    }
    if ((d = calloc(1, sizeof(*d))) == NULL) {
        return GW_ENOMEM;
    }
    d->forge_fd = -1;
    d->loop = loop;
    d->o = *opts;
    memcpy(d->host, opts->host, strlen(opts->host) + 1);
    d->o.host = d->host;
    if ((rc = setup_identity(d, opts)) != 0 ||
        (rc = setup_state(d, opts)) != 0) {
        free_early(d);
        return rc;
    }
    gw_sim_dev_set_subject(d);
    const char *topics[1] = {d->sub_topic};
    struct gw_mqtt_link_options lo = {
        .host = d->host,
        .port = opts->port,
        .client_id = d->client_id,
        .username = d->username,
        .password = d->has_password ? d->password : NULL,
        .keepalive_s = opts->keepalive_s,
        .tls = opts->tls || opts->port == 8883, /* the firmware's rule */
        .ca_file = opts->ca_file,
        .topics = topics,
        .n_topics = d->sub_topic[0] ? 1 : 0,
        .on_message = gw_sim_dev_on_message,
        .on_state = gw_sim_dev_on_state,
        .arg = d,
    };
    if ((rc = gw_mqtt_link_init(loop, &lo, &d->link)) != 0) {
        free_early(d);
        return rc;
    }
    uv_timer_t *timers[] = {
        &d->uplink_timer,   &d->play_timer, &d->watchdog,  &d->channel_timer,
        &d->duration_timer, &d->done_timer, &d->mcp_timer, &d->esp_timer};
    for (size_t i = 0; i < sizeof(timers) / sizeof(timers[0]); i++) {
        uv_timer_init(loop, timers[i]);
        timers[i]->data = d;
    }
    d->open_handles = 9; /* eight timers and the MQTT link */
    d->t0_ns = uv_hrtime();
    d->state = ST_CONNECTING;
    gw_sim_dev_watch(d, opts->connect_timeout_ms);
    if (opts->duration_ms > 0) {
        uv_timer_start(&d->duration_timer, on_duration, opts->duration_ms, 0);
    }
    *out = d;
    return 0;
}

static void on_link_closed(struct gw_mqtt_link *link, void *arg)
{
    struct gw_sim_device *d = arg;

    (void)link;
    d->link = NULL;
    gw_sim_dev_release(d);
}

void gw_sim_device_close(struct gw_sim_device *d, gw_sim_device_close_cb cb,
                         void *arg)
{
    if (d == NULL || d->closing) {
        return;
    }
    d->closing = true;
    d->close_cb = cb;
    d->close_arg = arg;
    d->o.on_done = NULL;
    d->o.on_event = NULL;
    gw_sim_dev_udp_close(d);
    uv_timer_t *timers[] = {
        &d->uplink_timer,   &d->play_timer, &d->watchdog,  &d->channel_timer,
        &d->duration_timer, &d->done_timer, &d->mcp_timer, &d->esp_timer};
    for (size_t i = 0; i < sizeof(timers) / sizeof(timers[0]); i++) {
        uv_close((uv_handle_t *)timers[i], gw_sim_dev_on_closed);
    }
    gw_mqtt_link_close(d->link, on_link_closed, d);
}

const struct gw_sim_result *gw_sim_device_result(const struct gw_sim_device *d)
{
    return &d->r;
}

const char *gw_sim_device_client_id(const struct gw_sim_device *d)
{
    return d->client_id;
}

/* ---- results --------------------------------------------------------- */

static void add_ms(cJSON *o, const char *name, double ms)
{
    if (isnan(ms)) {
        return; /* never happened */
    }
    /* One decimal is plenty; rounded without libm. */
    cJSON_AddNumberToObject(
        o, name, (double)(int64_t)(ms * 10 + (ms < 0 ? -0.5 : 0.5)) / 10);
}

/* "mcp": what the device's MCP server saw and answered. */
static bool add_mcp(cJSON *o, const struct gw_sim_result *r)
{
    cJSON *m = cJSON_AddObjectToObject(o, "mcp");

    if (m == NULL) {
        return false;
    }
    cJSON_AddNumberToObject(m, "answered", r->mcp_answered);
    cJSON_AddNumberToObject(m, "ignored", r->mcp_ignored);
    cJSON_AddNumberToObject(m, "initializes", r->mcp_initializes);
    cJSON_AddNumberToObject(m, "lists", r->mcp_lists);
    cJSON_AddNumberToObject(m, "calls", r->mcp_calls);
    cJSON_AddNumberToObject(m, "cancelled", r->mcp_cancelled);
    cJSON_AddBoolToObject(m, "vision", r->mcp_vision);
    cJSON_AddStringToObject(m, "vision_url", r->mcp_vision_url);
    cJSON_AddStringToObject(m, "vision_token", r->mcp_vision_token);
    return true;
}

/* "pushed": the last alert and custom message the device took. */
static bool add_pushed(cJSON *o, const struct gw_sim_result *r)
{
    cJSON *p = cJSON_AddObjectToObject(o, "pushed");
    cJSON *alert = cJSON_AddObjectToObject(p, "alert");

    if (p == NULL || alert == NULL) {
        return false;
    }
    cJSON_AddStringToObject(alert, "status", r->alert_status);
    cJSON_AddStringToObject(alert, "message", r->alert_message);
    cJSON_AddStringToObject(alert, "emotion", r->alert_emotion);
    cJSON_AddStringToObject(p, "custom", r->custom_payload);
    return true;
}

char *gw_sim_result_json(const struct gw_sim_result *r, const char *client_id)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *lat, *up, *down, *msgs, *drops;
    char *text = NULL;

    if (o == NULL) {
        return NULL;
    }
    cJSON_AddBoolToObject(o, "ok", r->ok);
    cJSON_AddStringToObject(o, "reason", r->reason);
    cJSON_AddStringToObject(o, "client_id", client_id ? client_id : "");
    cJSON_AddStringToObject(o, "session_id", r->session_id);
    cJSON_AddStringToObject(o, "stt", r->stt);
    cJSON_AddNumberToObject(o, "turns_done", r->turns_done);
    cJSON_AddNumberToObject(o, "sessions", r->sessions);
    cJSON_AddNumberToObject(o, "mqtt_reconnects", r->mqtt_reconnects);
    lat = cJSON_AddObjectToObject(o, "latency_ms");
    up = cJSON_AddObjectToObject(o, "uplink");
    down = cJSON_AddObjectToObject(o, "downlink");
    msgs = cJSON_AddObjectToObject(o, "messages");
    if (lat == NULL || up == NULL || down == NULL || msgs == NULL) {
        cJSON_Delete(o);
        return NULL;
    }
    add_ms(lat, "connect", r->connect_ms);
    add_ms(lat, "hello", r->hello_ms);
    add_ms(lat, "stt", r->stt_ms);
    add_ms(lat, "tts_start", r->tts_start_ms);
    add_ms(lat, "first_audio", r->first_audio_ms);
    add_ms(lat, "tts_stop", r->tts_stop_ms);
    add_ms(lat, "goodbye", r->goodbye_ms);
    cJSON_AddNumberToObject(o, "hellos", r->hellos);
    cJSON_AddNumberToObject(o, "hello_invalid", r->hello_invalid);
    cJSON_AddNumberToObject(o, "hello_duplicate", r->hello_duplicate);
    cJSON_AddNumberToObject(msgs, "stt", r->stt_count);
    cJSON_AddNumberToObject(msgs, "llm", r->llm_count);
    cJSON_AddNumberToObject(msgs, "tts_start", r->tts_start);
    cJSON_AddNumberToObject(msgs, "tts_stop", r->tts_stop);
    cJSON_AddNumberToObject(msgs, "tts_sentence_start", r->tts_sentence);
    cJSON_AddNumberToObject(msgs, "alert", r->alert_count);
    cJSON_AddNumberToObject(msgs, "system", r->system_count);
    cJSON_AddNumberToObject(msgs, "custom", r->custom_count);
    cJSON_AddNumberToObject(msgs, "other", r->other_count);
    cJSON_AddNumberToObject(msgs, "alert_ignored", r->alert_ignored);
    cJSON_AddNumberToObject(msgs, "system_ignored", r->system_ignored);
    cJSON_AddNumberToObject(msgs, "custom_ignored", r->custom_ignored);
    cJSON_AddNumberToObject(msgs, "reboots", r->reboots);
    if (!add_pushed(o, r)) {
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_AddNumberToObject(msgs, "unparsable", r->bad_json);
    cJSON_AddNumberToObject(msgs, "oversize", r->oversize);
    cJSON_AddNumberToObject(msgs, "oversize_bytes", (double)r->oversize_bytes);
    cJSON_AddNumberToObject(msgs, "mcp_answered", r->mcp_answered);
    cJSON_AddNumberToObject(msgs, "mcp_ignored", r->mcp_ignored);
    cJSON_AddNumberToObject(msgs, "goodbye_ignored", r->goodbye_ignored);
    if (!add_mcp(o, r)) {
        cJSON_Delete(o);
        return NULL;
    }
    if (!gw_sim_call_result_json(r, o)) {
        cJSON_Delete(o);
        return NULL;
    }
    if (r->mcp_esp != NULL && !gw_sim_esp_result_json(r->mcp_esp, o)) {
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_AddBoolToObject(o, "goodbye_received", r->goodbye_received);
    cJSON_AddBoolToObject(o, "goodbye_sent", r->goodbye_sent);
    cJSON_AddBoolToObject(o, "goodbye_replied", r->goodbye_replied);
    cJSON_AddNumberToObject(up, "packets", (double)r->up_packets);
    cJSON_AddNumberToObject(up, "bytes", (double)r->up_bytes);
    cJSON_AddNumberToObject(up, "send_errors", (double)r->up_send_errors);
    cJSON_AddNumberToObject(up, "replayed", (double)r->up_replayed);
    cJSON_AddNumberToObject(up, "forged", (double)r->up_forged);
    cJSON_AddStringToObject(up, "sha256", r->up_sha256);
    cJSON_AddNumberToObject(down, "datagrams", (double)r->down_datagrams);
    cJSON_AddNumberToObject(down, "accepted", (double)r->down_accepted);
    cJSON_AddNumberToObject(down, "played", (double)r->down_played);
    cJSON_AddNumberToObject(down, "lost", (double)r->down_lost);
    add_ms(down, "jitter_ms", r->jitter_ms);
    add_ms(down, "max_jitter_ms", r->max_jitter_ms);
    cJSON_AddStringToObject(down, "sha256", r->down_sha256);
    cJSON_AddNumberToObject(down, "tone_hz", r->down_tone_hz);
    cJSON_AddNumberToObject(down, "tone_purity", r->down_tone_purity);
    drops = cJSON_AddObjectToObject(down, "drops");
    if (drops == NULL) {
        cJSON_Delete(o);
        return NULL;
    }
    for (int i = 0; i < GW_SIM_DROP_COUNT_; i++) {
        cJSON_AddNumberToObject(drops, gw_sim_drop_name(i),
                                (double)r->drops[i]);
    }
    text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}
