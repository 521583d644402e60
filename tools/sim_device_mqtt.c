/*
 * The simulated device on MQTT: its hello and messages, and what it does
 * with each message from the server, as firmware 2.4 does (anchor
 * sections 3, 5 and 6).
 */
#include "tools/sim_device_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "codec/envelope.h"
#include "codec/hello.h"
#include "codec/hex.h"
#include "common/log.h"
#include "tools/sim_common.h"
#include "tools/sim_espmcp.h"

int gw_sim_dev_publish(struct gw_sim_device *d, const char *msg, size_t len)
{
    int rc = gw_mqtt_link_publish(d->link, d->pub_topic, msg, len);

    if (rc != 0) {
        /* The firmware treats a failed publish as a closed channel. */
        gw_sim_dev_fail(d, "publish to %s failed: %s", d->pub_topic,
                        gw_strerror(rc));
    }
    return rc;
}

/* Device messages are concatenated, unescaped, as the firmware does:
 * set_session checked that the session_id needs no escaping. */
int gw_sim_dev_send_msg(struct gw_sim_device *d, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return gw_sim_dev_publish(d, msg, (size_t)n < sizeof(msg) ? (size_t)n : 0);
}

void gw_sim_dev_send_hello(struct gw_sim_device *d)
{
    char msg[512];

    d->sid[0] = '\0'; /* the firmware clears it before a hello */
    gw_sim_dev_set_subject(d);
    snprintf(msg, sizeof(msg),
             "{\"type\":\"hello\",\"version\":3,\"transport\":\"udp\","
             "\"features\":{%s\"mcp\":true,\"glyph_push\":%s},%s"
             "\"audio_params\":{\"format\":\"opus\",\"sample_rate\":16000,"
             "\"channels\":1,\"frame_duration\":60}}",
             d->o.aec ? "\"aec\":true," : "",
             d->o.glyph_push ? "true" : "false",
             /* firmware 2.4 names its installed font only with glyph_push */
             d->o.glyph_push ? "\"text_font\":{\"bundle\":\"noto-v1\","
                               "\"charset\":\"common\",\"size\":20,"
                               "\"bpp\":4},"
                             : "");
    d->state = ST_HELLO;
    d->hello_pending = true;
    d->r.sessions++;
    d->hello_sent_ns = uv_hrtime();
    gw_sim_dev_event(d, "> hello to %s (%s)", d->pub_topic,
                     d->sub_topic[0] ? "subscribing"
                                     : "stock, no subscription");
    if (gw_sim_dev_publish(d, msg, strlen(msg)) == 0) {
        gw_sim_dev_watch(d, d->o.hello_timeout_ms);
    }
}

/* ---- messages from the server ---------------------------------------- */

/* Which firmware 2.4 rule a refused hello broke, for the report. */
static const char *hello_problem(const cJSON *root)
{
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(root, "transport");
    const cJSON *udp = cJSON_GetObjectItemCaseSensitive(root, "udp");
    const cJSON *port = cJSON_GetObjectItemCaseSensitive(udp, "port");
    const cJSON *sid = cJSON_GetObjectItemCaseSensitive(root, "session_id");
    const char *s =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(udp, "server"));
    const char *names[2] = {"key", "nonce"};
    uint8_t tmp[16];

    if (!cJSON_IsString(tr) || strcmp(tr->valuestring, "udp") != 0) {
        return "transport is not \"udp\"";
    }
    if (!cJSON_IsObject(udp)) {
        return "udp is missing or not an object";
    }
    if (s == NULL || s[0] == '\0') {
        return "udp.server is missing or not a string";
    }
    if (!cJSON_IsNumber(port) || port->valuedouble < 1 ||
        port->valuedouble > 65535 ||
        port->valuedouble != (double)(int)port->valuedouble) {
        return "udp.port is not an integer in 1..65535";
    }
    for (int i = 0; i < 2; i++) {
        s = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(udp, names[i]));
        if (s == NULL || gw_hex_decode(s, strlen(s), tmp, 16) != 0) {
            return i == 0 ? "udp.key is not 32 hex digits (16 bytes)"
                          : "udp.nonce is not 32 hex digits (16 bytes)";
        }
    }
    if (sid != NULL && !cJSON_IsString(sid)) {
        return "session_id is not a string";
    }
    return "audio_params invalid, or a member repeated";
}

/* The firmware pastes session_id into its JSON without escaping. */
static bool sid_safe(const char *s)
{
    for (; *s != '\0'; s++) {
        if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20) {
            return false;
        }
    }
    return true;
}

static void on_server_hello(struct gw_sim_device *d, const cJSON *root)
{
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(root, "audio_params");
    struct gw_server_hello h;
    uint64_t now = uv_hrtime();

    if (gw_server_hello_parse(root, &h) != 0) {
        const char *why = hello_problem(root);
        d->r.hello_invalid++;
        gw_log(GW_LOG_WARN, d->subject, "server hello ignored: %s", why);
        gw_sim_dev_event(d, "< hello INVALID, ignored as firmware 2.4 does: %s",
                         why);
        return;
    }
    /* Missing audio members keep earlier values: they are sticky. */
    if (cJSON_GetObjectItemCaseSensitive(ap, "sample_rate") != NULL) {
        d->sample_rate = h.sample_rate;
    }
    if (cJSON_GetObjectItemCaseSensitive(ap, "frame_duration") != NULL) {
        d->frame_duration = h.frame_duration;
    }
    memcpy(d->key, h.key, sizeof(d->key));
    memcpy(d->nonce, h.nonce, sizeof(d->nonce));
    if (gw_aes_ctr_set_key(d->aes, d->key) != 0) {
        gw_sim_dev_fail(d, "cannot install the hello's AES key");
        return;
    }
    d->up_seq = 0;
    gw_sim_downlink_reset(&d->dl);
    snprintf(d->sid, sizeof(d->sid), "%s", h.session_id);
    gw_sim_dev_set_subject(d);
    if (!d->hello_pending) {
        /* The firmware re-keys but keeps its socket: a broken session. */
        d->r.hello_duplicate++;
        gw_log(GW_LOG_WARN, d->subject, "extra server hello (%" PRIu32 ")",
               d->r.hello_duplicate);
        gw_sim_dev_event(d,
                         "< hello AGAIN (extra #%" PRIu32
                         "): only one may answer a "
                         "device hello; re-keyed, sequences restart",
                         d->r.hello_duplicate);
        return;
    }
    d->hello_pending = false;
    d->r.hellos++;
    d->r.hello_ms = gw_sim_dev_ms_since(d->hello_sent_ns, now);
    snprintf(d->r.session_id, sizeof(d->r.session_id), "%s", d->sid);
    gw_sim_dev_event(d,
                     "< hello session_id=%s udp=%s:%u downlink=%" PRId32
                     " Hz/%" PRId32 " ms (%.1f ms after ours)",
                     d->sid[0] ? d->sid : "(none)", h.server, h.port,
                     d->sample_rate, d->frame_duration, d->r.hello_ms);
    if (!sid_safe(d->sid)) {
        gw_sim_dev_fail(
            d, "session_id needs JSON escaping, which the firmware does not "
               "do: every later device message would be broken");
        return;
    }
    d->udp_port = h.port;
    gw_sim_dev_udp_open(d, h.server);
}

static void on_goodbye(struct gw_sim_device *d, const char *sid)
{
    if (sid == NULL || strcmp(sid, d->sid) != 0) {
        d->r.goodbye_ignored++; /* firmware 2.3+: only the current id */
        gw_sim_dev_event(d, "< goodbye for %s%s%s ignored (current session %s)",
                         sid ? "\"" : "", sid ? sid : "no session_id",
                         sid ? "\"" : "", d->sid);
        return;
    }
    if (d->state == ST_LINGER) {
        d->r.goodbye_replied = true;
        gw_sim_dev_event(
            d, "< goodbye in reply to ours: a gateway must never answer a "
               "device goodbye");
        gw_sim_dev_finish(d);
        return;
    }
    if (!d->channel_open) {
        d->r.goodbye_ignored++;
        gw_sim_dev_event(d, "< goodbye with no channel open (ignored)");
        return;
    }
    d->r.goodbye_received = true;
    if (d->stop_ns != 0) {
        d->r.goodbye_ms = gw_sim_dev_ms_since(d->stop_ns, uv_hrtime());
    }
    gw_sim_dev_event(d, "< goodbye: channel closed, no reply");
    gw_sim_dev_udp_close(d);
    d->state = ST_IDLE;
    gw_sim_dev_conversation_over(d);
}

static void on_tts(struct gw_sim_device *d, const cJSON *root)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "state");
    const char *text =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "text"));
    double ms = gw_sim_dev_ms_since(d->speech_end_ns, uv_hrtime());

    if (!cJSON_IsString(st)) {
        gw_sim_dev_fail(
            d, "tts message without a string state: firmware before 2.4 "
               "crashes on it");
        return;
    }
    if (strcmp(st->valuestring, "start") == 0) {
        d->r.tts_start++;
        if (d->turn == 0 && isnan(d->r.tts_start_ms)) {
            d->r.tts_start_ms = ms;
        }
        if (!d->channel_open ||
            (d->state != ST_LISTENING && d->state != ST_IDLE)) {
            gw_sim_dev_event(d, "< tts start (ignored in state %s)",
                             gw_sim_dev_state_name(d->state));
            return;
        }
        if (d->queue == NULL &&
            (d->queue = calloc(QUEUE_FRAMES, sizeof(*d->queue))) == NULL) {
            gw_sim_dev_fail(d, "out of memory");
            return;
        }
        gw_sim_dev_event(d, "< tts start (%+.1f ms after speech end)", ms);
        d->state = ST_SPEAKING;
        d->q_len = 0;           /* entering speaking flushes the decode queue */
        d->last_arrival_ns = 0; /* a new utterance: no jitter across */
        d->stop_pending = false;
        d->turn_played = 0;
        if (d->o.mode != GW_SIM_MODE_REALTIME) {
            d->uplink_on = false; /* the mic stops */
            uv_timer_stop(&d->uplink_timer);
        }
    } else if (strcmp(st->valuestring, "stop") == 0) {
        gw_sim_dev_udp_drain(d);
        d->r.tts_stop++;
        if (d->turn == 0 && isnan(d->r.tts_stop_ms)) {
            d->r.tts_stop_ms = ms;
        }
        gw_sim_dev_event(
            d, "< tts stop (%+.1f ms after speech end, %zu frames queued)", ms,
            d->q_len);
        if (d->state == ST_SPEAKING) {
            d->stop_pending = true;
            if (!d->playing) {
                gw_sim_dev_play_pump(d, uv_hrtime());
            }
        }
    } else if (strcmp(st->valuestring, "sentence_start") == 0) {
        d->r.tts_sentence++;
        gw_sim_dev_event(d, "< tts sentence_start \"%s\"", text ? text : "");
    } else {
        gw_sim_dev_event(d, "< tts state \"%s\" (ignored)", st->valuestring);
    }
}

static void on_stt(struct gw_sim_device *d, const cJSON *root)
{
    const char *text =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "text"));
    double ms = gw_sim_dev_ms_since(d->speech_end_ns, uv_hrtime());

    d->r.stt_count++;
    if (d->r.stt_count == 1) {
        snprintf(d->r.stt, sizeof(d->r.stt), "%s", text ? text : "");
    }
    if (d->turn == 0 && isnan(d->r.stt_ms)) {
        d->r.stt_ms = ms;
    }
    gw_sim_dev_event(d, "< stt \"%s\" (%+.1f ms after speech end)",
                     text ? text : "", ms);
}

void gw_sim_dev_sync_mcp(struct gw_sim_device *d)
{
    const struct gw_sim_mcp *m = &d->mcp;

    if (d->esp != NULL) {
        d->r.mcp_violations = gw_sim_esp_stats(d->esp)->violations;
    }

    if ((uint32_t)m->initializes != d->r.mcp_initializes) {
        d->r.last_initialize_unix_ms = (double)gw_sim_unix_us() / 1000.0;
    }
    d->r.mcp_answered = (uint32_t)m->answered;
    d->r.mcp_ignored = (uint32_t)m->ignored;
    d->r.mcp_initializes = (uint32_t)m->initializes;
    d->r.mcp_lists = (uint32_t)m->lists;
    d->r.mcp_calls = (uint32_t)m->calls;
    d->r.mcp_cancelled = (uint32_t)m->cancelled;
    d->r.mcp_vision = m->vision_seen;
    memcpy(d->r.mcp_vision_url, m->vision_url, sizeof(d->r.mcp_vision_url));
    memcpy(d->r.mcp_vision_token, m->vision_token,
           sizeof(d->r.mcp_vision_token));
}

/* Answers one JSON-RPC message now, as the firmware's MCP server does. */
static void mcp_answer(struct gw_sim_device *d, const cJSON *payload)
{
    const char *method = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(payload, "method"));
    char *reply = NULL;
    size_t len = 0;

    if (!cJSON_IsObject(payload)) {
        d->mcp.ignored++;
    } else if (gw_sim_mcp_handle(&d->mcp, payload, &reply, &len) != 0) {
        gw_sim_dev_fail(d, "out of memory");
        return;
    }
    gw_sim_dev_sync_mcp(d);
    if (reply == NULL) {
        gw_sim_dev_event(d, "< mcp %s (no reply, as the firmware)",
                         method ? method : "-");
        return;
    }
    size_t cap = len + strlen(d->sid) + 64;
    char *msg = malloc(cap);
    if (msg == NULL) {
        free(reply);
        gw_sim_dev_fail(d, "out of memory");
        return;
    }
    int n = snprintf(msg, cap,
                     "{\"session_id\":\"%s\",\"type\":\"mcp\",\"payload\":%s}",
                     d->sid, reply);
    gw_sim_dev_event(d, "< mcp %s > reply of %d bytes", method, n);
    gw_sim_dev_publish(d, msg, (size_t)n);
    free(msg);
    free(reply);
}

/*
 * --mcp-call-delay-ms: the firmware runs each tool on its main loop, one
 * after another, so a slow tool holds back the calls behind it while
 * other methods are still answered at once.
 */
struct gw_sim_mcp_job {
    struct gw_sim_mcp_job *next;
    cJSON *payload; /* the tools/call request, a copy */
};

static void on_mcp_timer(uv_timer_t *t)
{
    struct gw_sim_device *d = t->data;
    struct gw_sim_mcp_job *job = d->mcp_head;

    if (job == NULL || d->closing || d->finished) {
        return;
    }
    d->mcp_head = job->next;
    if (d->mcp_head == NULL) {
        d->mcp_tail = NULL;
    }
    mcp_answer(d, job->payload);
    cJSON_Delete(job->payload);
    free(job);
    if (d->mcp_head != NULL && !d->finished) {
        uv_timer_start(&d->mcp_timer, on_mcp_timer, d->o.mcp_call_delay_ms, 0);
    }
}

static bool mcp_delayed(struct gw_sim_device *d, const cJSON *payload)
{
    const char *method = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(payload, "method"));
    struct gw_sim_mcp_job *job;

    if (d->o.mcp_call_delay_ms == 0 || d->mcp.silent || method == NULL ||
        strcmp(method, "tools/call") != 0) {
        return false;
    }
    if ((job = calloc(1, sizeof(*job))) == NULL ||
        (job->payload = cJSON_Duplicate(payload, true)) == NULL) {
        free(job);
        gw_sim_dev_fail(d, "out of memory");
        return true;
    }
    if (d->mcp_tail != NULL) {
        d->mcp_tail->next = job;
    } else {
        d->mcp_head = job;
        uv_timer_start(&d->mcp_timer, on_mcp_timer, d->o.mcp_call_delay_ms, 0);
    }
    d->mcp_tail = job;
    gw_sim_dev_event(d,
                     "< mcp tools/call queued (answered in %" PRIu32 " ms "
                     "after the ones before it)",
                     d->o.mcp_call_delay_ms);
    return true;
}

void gw_sim_dev_mcp_drop_queue(struct gw_sim_device *d)
{
    while (d->mcp_head != NULL) {
        struct gw_sim_mcp_job *job = d->mcp_head;
        d->mcp_head = job->next;
        cJSON_Delete(job->payload);
        free(job);
    }
    d->mcp_tail = NULL;
}

/* ---- the esp profile ------------------------------------------------- */

static void on_esp_timer(uv_timer_t *t);

/*
 * Publishes what the esp server queued, each in an mcp envelope (with
 * "endpoint" for an MCP server), prints its violations, and arms its
 * next timer.
 */
static void esp_flush(struct gw_sim_device *d)
{
    char *endpoint, *json, vio[200];
    const char *what;

    while (gw_sim_esp_pop(d->esp, &endpoint, &json, &what)) {
        /* A tool's caller names the endpoint: it is escaped. */
        cJSON *eps = endpoint ? cJSON_CreateString(endpoint) : NULL;
        char *ep = eps ? cJSON_PrintUnformatted(eps) : NULL;
        size_t cap = strlen(json) + strlen(d->sid) + (ep ? strlen(ep) : 0) + 80;
        char *msg = endpoint == NULL || ep != NULL ? malloc(cap) : NULL;
        int n = -1;
        cJSON_Delete(eps);
        if (msg != NULL && endpoint != NULL) {
            n = snprintf(msg, cap,
                         "{\"session_id\":\"%s\",\"type\":\"mcp\","
                         "\"endpoint\":%s,\"payload\":%s}",
                         d->sid, ep, json);
        } else if (msg != NULL) {
            n = snprintf(msg, cap,
                         "{\"session_id\":\"%s\",\"type\":\"mcp\","
                         "\"payload\":%s}",
                         d->sid, json);
        }
        free(endpoint);
        free(json);
        cJSON_free(ep);
        if (n < 0) {
            free(msg);
            gw_sim_dev_fail(d, "out of memory");
            return;
        }
        gw_sim_dev_event(d, "> mcp %s (%d bytes)", what, n);
        int rc = gw_sim_dev_publish(d, msg, (size_t)n);
        free(msg);
        if (rc != 0 || d->finished) {
            return;
        }
    }
    while (gw_sim_esp_pop_violation(d->esp, vio, sizeof(vio))) {
        gw_log(GW_LOG_WARN, d->subject, "MCP violation: %s", vio);
        gw_sim_dev_event(d, "MCP VIOLATION: %s", vio);
    }
    gw_sim_dev_sync_mcp(d);
    int64_t next = gw_sim_esp_next_ms(d->esp, uv_now(d->loop));
    if (next < 0) {
        uv_timer_stop(&d->esp_timer);
    } else {
        uv_timer_start(&d->esp_timer, on_esp_timer, (uint64_t)next, 0);
    }
}

static void on_esp_timer(uv_timer_t *t)
{
    struct gw_sim_device *d = t->data;

    if (d->closing || d->finished) {
        return;
    }
    if (gw_sim_esp_tick(d->esp, uv_now(d->loop)) != 0) {
        gw_sim_dev_fail(d, "out of memory");
        return;
    }
    esp_flush(d);
}

void gw_sim_dev_esp_finish(struct gw_sim_device *d)
{
    char vio[200];

    if (d->esp == NULL) {
        return;
    }
    uv_timer_stop(&d->esp_timer);
    gw_sim_esp_finish(d->esp);
    while (gw_sim_esp_pop_violation(d->esp, vio, sizeof(vio))) {
        gw_sim_dev_event(d, "MCP VIOLATION: %s", vio);
    }
    gw_sim_dev_sync_mcp(d);
}

static void esp_receive(struct gw_sim_device *d, const cJSON *root)
{
    const cJSON *payload = cJSON_GetObjectItemCaseSensitive(root, "payload");
    const cJSON *endpoint = cJSON_GetObjectItemCaseSensitive(root, "endpoint");
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(payload, "method");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(payload, "id");
    const char *ep = cJSON_GetStringValue(endpoint);

    if (cJSON_IsString(method)) {
        gw_sim_dev_event(d, "< mcp %s%s%s", method->valuestring,
                         ep ? " from " : "", ep ? ep : "");
    } else if (cJSON_IsNumber(id)) {
        gw_sim_dev_event(d, "< mcp %sanswer id=%.0f%s%s", ep ? "remote " : "",
                         id->valuedouble, ep ? " from " : "", ep ? ep : "");
    } else {
        gw_sim_dev_event(d, "< mcp message");
    }
    if (gw_sim_esp_receive(d->esp, uv_now(d->loop), payload, endpoint) != 0) {
        gw_sim_dev_fail(d, "out of memory");
        return;
    }
    esp_flush(d);
}

static void on_mcp(struct gw_sim_device *d, const cJSON *root)
{
    const cJSON *payload = cJSON_GetObjectItemCaseSensitive(root, "payload");

    if (d->o.call && gw_sim_dev_call_on_mcp(d, payload)) {
        return;
    }
    if (d->esp != NULL) {
        esp_receive(d, root);
        return;
    }

    if (!mcp_delayed(d, payload)) {
        mcp_answer(d, payload);
    }
}

static void on_other(struct gw_sim_device *d, const struct gw_envelope *env)
{
    const cJSON *root = env->root;
#define STR(key)                                                               \
    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, key))

    if (gw_sim_dev_on_push(d, env)) {
        return; /* alert, system, custom: sim_device_push.c */
    }
    switch (env->kind) {
    case GW_MSG_LLM:
        d->r.llm_count++;
        gw_sim_dev_event(d, "< llm emotion=%s",
                         STR("emotion") ? STR("emotion") : "-");
        break;
    case GW_MSG_ALERT:
        d->r.alert_count++; /* needs status, message and emotion strings */
        gw_sim_dev_event(d, "< alert %s",
                         STR("status") && STR("message") && STR("emotion")
                             ? STR("message")
                             : "(incomplete, ignored)");
        break;
    case GW_MSG_SYSTEM:
        d->r.system_count++;
        gw_sim_dev_event(d, "< system command=%s",
                         STR("command") ? STR("command") : "-");
        if (STR("command") && strcmp(STR("command"), "reboot") == 0 &&
            d->channel_open) {
            gw_sim_dev_goodbye(d); /* close the channel, then reboot */
        }
        break;
    case GW_MSG_CUSTOM:
        d->r.custom_count++;
        gw_sim_dev_event(d, "< custom");
        break;
    default:
        if (d->o.call && gw_sim_dev_call_on_message(d, env)) {
            break;
        }
        d->r.other_count++;
        gw_sim_dev_event(d, "< %s (unknown type, ignored)", env->type);
        break;
    }
#undef STR
}

/* A message past the 8192 bytes of older firmware (glyph_push): taken, and
 * its length and hash told, so a test can see it arrived byte for byte. */
static void large_message(struct gw_sim_device *d, const uint8_t *payload,
                          size_t len)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    char hex[65] = "";

    d->r.oversize++;
    d->r.oversize_bytes += len;
    if (md != NULL && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 &&
        EVP_DigestUpdate(md, payload, len) == 1) {
        gw_sim_digest_hex(md, hex);
    }
    EVP_MD_CTX_free(md);
    gw_sim_dev_event(d, "< large message: %zu bytes, sha256 %s", len, hex);
}

/* Stock firmware ignores the topic: everything on the connection counts. */
void gw_sim_dev_on_message(struct gw_mqtt_link *link, const char *topic,
                           const uint8_t *payload, size_t len, void *arg)
{
    struct gw_sim_device *d = arg;
    struct gw_envelope env;

    (void)link;
    (void)topic;
    if (d->closing || d->finished) {
        return;
    }
    if (len > GW_ENVELOPE_DEVICE_MAX) {
        large_message(d, payload, len);
    }
    int err =
        gw_envelope_parse((const char *)payload, len, MSG_PARSE_MAX, &env);
    if (err != 0) {
        d->r.bad_json++;
        GW_LOG(GW_LOG_DEBUG, d->subject, "message dropped: %s",
               gw_strerror(err));
        gw_sim_dev_event(d, "< unparsable message dropped (%s)",
                         gw_strerror(err));
        return;
    }
    if (d->channel_open) {
        uv_timer_again(&d->channel_timer);
    }
    switch (env.kind) {
    case GW_MSG_HELLO:
        on_server_hello(d, env.root);
        break;
    case GW_MSG_GOODBYE:
        on_goodbye(d, env.session_id);
        break;
    case GW_MSG_TTS:
        on_tts(d, env.root);
        break;
    case GW_MSG_STT:
        on_stt(d, env.root);
        break;
    case GW_MSG_MCP:
        on_mcp(d, env.root);
        break;
    default:
        on_other(d, &env);
        break;
    }
    gw_envelope_free(&env);
}

void gw_sim_dev_on_state(struct gw_mqtt_link *link, bool up, void *arg)
{
    struct gw_sim_device *d = arg;

    (void)link;
    if (d->closing || d->finished) {
        return;
    }
    d->r.mqtt_up = up;
    if (up) {
        d->r.mqtt_connects++;
        d->r.last_connect_unix_ms = (double)gw_sim_unix_us() / 1000.0;
    }
    if (!up) {
        /*
         * esp-mqtt reconnects by itself and the audio channel stays open:
         * only 120 s without anything received ends it (firmware section
         * 7). A broker restart is not the "network lost" of the board.
         */
        gw_sim_dev_event(d, "mqtt connection lost (state %s); reconnecting",
                         gw_sim_dev_state_name(d->state));
        return;
    }
    if (d->r.mqtt_connected) {
        /* A new connection: a new MCP session for the gateway to open. */
        d->r.mqtt_reconnects++;
        if (d->o.mcp_reconnect_tools != UINT32_MAX) {
            d->mcp.extra_tools = d->o.mcp_reconnect_tools;
        }
        gw_sim_dev_event(
            d, "mqtt reconnected (#%" PRIu32 "), %" PRIu32 " extra tools",
            d->r.mqtt_reconnects, d->mcp.extra_tools);
    } else {
        d->r.mqtt_connected = true;
        d->r.connect_ms = gw_sim_dev_ms_since(d->t0_ns, uv_hrtime());
        gw_sim_dev_event(d, "mqtt connected to %s:%d as %s", d->host, d->o.port,
                         d->client_id);
    }
    if (d->state == ST_CONNECTING && d->o.idle) {
        /* MCP is answered whenever MQTT is up: no conversation needed. */
        gw_sim_dev_watch(d, 0);
        d->state = ST_ASLEEP;
        gw_sim_dev_event(d, "idle, online: waiting for a wake-up (SIGUSR1) "
                            "or the end (SIGINT)");
    } else if (d->state == ST_CONNECTING) {
        gw_sim_dev_send_hello(d);
    }
}
