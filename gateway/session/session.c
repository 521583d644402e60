/*
 * The session state machine: CONNECTING_BACKEND -> ACTIVE -> CLOSING, and
 * the session table whose lists those states name. A session lets go of
 * its device record the moment it ends, so a late event of an old session
 * (its WebSocket closing, say) can only touch that old session, never a
 * newer one of the same device.
 */
#include "gateway/session/session.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "common/assert.h"
#include "common/log.h"
#include "crypto/credential.h"
#include "crypto/session_keys.h"
#include "gateway/session/router.h"
#include "gateway/session/session_int.h"

#define SERVER_HELLO_MAX 1024

static const struct gw_session_env *env_of(const struct gw_session *s)
{
    return &s->table->env;
}

static uint64_t age_ms(const struct gw_session *s)
{
    return uv_now(env_of(s)->loop) - s->started_ms;
}

/*
 * A backend that sends garbage is counted for every message and logged
 * for a few: per session a burst of 5, then one every 10 s, and all
 * sessions together 5 a second after a burst of 50.
 */
static const struct gw_bucket_rate log_per_session = {0.1, 5};
static const struct gw_bucket_rate log_all_sessions = {5, 50};

/* Counts a refused backend message and logs why, rate-limited. */
__attribute__((format(printf, 2, 3))) static void
backend_refused(struct gw_session *s, const char *fmt, ...)
{
    struct gw_sessions *t = s->table;
    uint64_t now = uv_now(t->env.loop), skipped = 0;
    char text[160];
    va_list ap;

    t->env.counters->refused[GW_REFUSE_BACKEND]++;
    if (!gw_bucket_take(&t->log_all, &log_all_sessions, now, NULL)) {
        s->log_bucket.refused++; /* told with the session's next line */
        return;
    }
    if (!gw_bucket_take(&s->log_bucket, &log_per_session, now, &skipped)) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (skipped > 0) {
        gw_log(GW_LOG_WARN, s->subject, "%s (%llu more not logged before this)",
               text, (unsigned long long)skipped);
    } else {
        gw_log(GW_LOG_WARN, s->subject, "%s", text);
    }
}

static void set_subject(struct gw_session *s)
{
    snprintf(s->subject, sizeof(s->subject), "dev=%s sid=%s", s->client_id,
             s->session_id[0] != '\0' ? s->session_id : "-");
}

/* The one place the state changes, and with it the session's list. */
static void set_state(struct gw_session *s, enum gw_session_state next)
{
    struct gw_sessions *t = s->table;

    GW_LOG(GW_LOG_DEBUG, s->subject, "state %s -> %s (age %llu ms)",
           gw_session_state_name(s->state), gw_session_state_name(next),
           (unsigned long long)age_ms(s));
    GW_ASSERT(s->state != GW_SESSION_CLOSING);
    if (next == GW_SESSION_CLOSING) {
        gw_list_unlink(&s->node);
        t->n_live--;
        gw_list_insert_tail(&t->closing, &s->node);
        t->n_closing++;
    }
    s->state = next;
}

/* Memory goes only once every handle has closed. */
static void maybe_free(struct gw_session *s)
{
    struct gw_sessions *t = s->table;

    if (s->state != GW_SESSION_CLOSING || !s->timer_closed || s->ws != NULL ||
        s->abandoned > 0) {
        return;
    }
    gw_list_unlink(&s->node);
    t->n_closing--;
    gw_config_hold_release(s->hold);
    gw_device_hello_free(&s->hello);
    free(s);
    if (t->n_live == 0 && t->n_closing == 0 && t->on_empty != NULL) {
        t->on_empty(t, t->on_empty_arg);
    }
}

static void on_timer_closed(uv_handle_t *handle)
{
    struct gw_session *s = handle->data;

    s->timer_closed = true;
    maybe_free(s);
}

/* ---- backend side ---- */

/* An attempt shorter than this could not answer: failover stops. */
#define MIN_ATTEMPT_MS 200

static void try_next_backend(struct gw_session *s);
static void on_timer(uv_timer_t *timer);

/* The backend tried or used failed for why (GW_BFAIL_NONE: it did not). */
static void pool_failed(struct gw_session *s, enum gw_backend_failure why,
                        const char *reason)
{
    const struct gw_config *cfg = s->hold->cfg;

    gw_backend_pool_failed(env_of(s)->pool, &s->ticket, why, reason,
                           cfg->health.backoff_ms, cfg->health.backoff_max_ms,
                           uv_now(env_of(s)->loop));
}

/* The port devices are told (udp.public_port 0: the bound one). */
static int public_port(const struct gw_session *s)
{
    const struct gw_config *cfg = s->hold->cfg;

    return cfg->udp.public_port > 0 ? cfg->udp.public_port
                                    : gw_udp_audio_port(env_of(s)->udp);
}

/*
 * The UDP path doctor's one look (udp_doctor.h), with what only the
 * session knows: the advertised address and where the broker saw the
 * device. Once its time has come; returns the ms until it, or UINT64_MAX
 * when done or off (udp.doctor_after_s 0).
 */
static uint64_t udp_doctor(struct gw_session *s)
{
    const struct gw_config *cfg = s->hold->cfg;
    uint64_t after = (uint64_t)cfg->udp.doctor_after_s * 1000;
    uint64_t age = gw_udp_peer_age_ms(&s->udp);

    if (after == 0 || gw_udp_peer_examined(&s->udp)) {
        return UINT64_MAX;
    }
    if (age < after) {
        return after - age;
    }
    const struct gw_udp_doctor_ctx ctx = {
        .public_host = cfg->udp.public_host,
        .public_port = public_port(s),
        .device_ip = s->dev != NULL ? s->dev->presence.address : NULL,
        .mac = s->id.mac,
        .key = s->client_id,
        .after_ms = age,
    };
    (void)gw_udp_peer_examine(&s->udp, &ctx);
    return UINT64_MAX;
}

/* The idle timer's next wake: the idle limit, or the doctor's look. */
static uint64_t next_look_ms(struct gw_session *s)
{
    uint64_t limit = (uint64_t)s->hold->cfg->limits.udp_idle_timeout_ms;
    uint64_t idle = gw_udp_peer_idle_ms(&s->udp);
    uint64_t doctor = udp_doctor(s);
    uint64_t left = idle < limit ? limit - idle : 0;

    return doctor < left ? doctor : left;
}

static void activate(struct gw_session *s, const struct gw_audio_params *audio)
{
    const struct gw_session_env *env = env_of(s);
    const struct gw_config *cfg = s->hold->cfg;
    uint8_t key[16], nonce[16];
    uint32_t ssrc;
    char hello[SERVER_HELLO_MAX];
    size_t len;
    int rc;

    set_subject(s);
    if ((rc = gw_session_keys_random_key(key)) != 0 ||
        (rc = gw_session_keys_unique_ssrc(&ssrc, gw_udp_audio_ssrc_in_use,
                                          env->udp)) != 0 ||
        (rc = gw_udp_peer_start(env->udp, &s->udp, ssrc, key,
                                s->hello.audio.frame_duration, s)) != 0) {
        OPENSSL_cleanse(key, sizeof(key));
        gw_log(GW_LOG_ERROR, s->subject, "cannot start UDP peer: %s",
               gw_strerror(rc));
        gw_session_end(s, GW_END_ERROR);
        return;
    }
    gw_udp_peer_set_subject(&s->udp, s->subject);
    if (s->dev != NULL) { /* the broker's word on where the device is */
        gw_udp_peer_set_device_ip(&s->udp, s->dev->presence.address);
    }
    gw_session_keys_nonce(ssrc, nonce);
    rc = gw_server_hello_build(s->session_id, audio, cfg->udp.public_host,
                               (uint16_t)public_port(s), key, nonce, hello,
                               sizeof(hello), &len);
    OPENSSL_cleanse(key, sizeof(key));
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, s->subject, "cannot build server hello: %s",
               gw_strerror(rc));
        gw_session_end(s, GW_END_ERROR);
        return;
    }
    gw_device_hello_free(&s->hello);
    set_state(s, GW_SESSION_ACTIVE);
    uv_timer_start(&s->timer, s->timer.timer_cb, next_look_ms(s), 0);
    if (gw_publish_json(env->pub, s->client_id, hello, len) != 0) {
        gw_log(GW_LOG_WARN, s->subject, "server hello not sent: broker away");
    }
    gw_log(GW_LOG_INFO, s->subject, "session active after %llu ms",
           (unsigned long long)age_ms(s));
}

/* A listen or tts message's "state" is this one. */
static bool state_is(const struct gw_envelope *env, const char *want)
{
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(env->root, "state");

    return cJSON_IsString(state) && strcmp(state->valuestring, want) == 0;
}

/*
 * Downlink audio waits for its "tts start". Sent now, the broker needs a
 * head start of limits.tts_start_guard_ms. Held in the outbox (the broker
 * is away), the audio waits until the outbox sends it (on_outbox_sent),
 * at most limits.outbox_age_ms, after which the outbox has dropped it
 * anyway; the UDP queue bounds what waits meanwhile (beyond it, audio is
 * dropped as queue_full).
 */
static void hold_for_tts_start(struct gw_session *s, bool held)
{
    const struct gw_config *cfg = s->hold->cfg;
    unsigned guard = (unsigned)cfg->limits.tts_start_guard_ms;

    if (!held) {
        s->tts_start_waits = false; /* an earlier one expired unsent */
        gw_udp_peer_hold(&s->udp, guard);
        return;
    }
    if (!s->tts_start_waits) {
        gw_log(GW_LOG_INFO, s->subject,
               "tts start held in the outbox: downlink audio waits for it");
    }
    /* The latest one counts: it goes out last of what waits. */
    s->tts_start_waits = true;
    s->tts_start_held_ms = uv_now(env_of(s)->loop);
    gw_udp_peer_hold(&s->udp, (unsigned)cfg->limits.outbox_age_ms + guard);
}

/* The outbox sent everything it held for client_id. */
static void on_outbox_sent(void *arg, const char *client_id)
{
    struct gw_sessions *t = arg;
    struct gw_session *s = gw_sessions_find(t, client_id);

    if (s == NULL || !s->tts_start_waits) {
        return;
    }
    s->tts_start_waits = false;
    const struct gw_config *cfg = s->hold->cfg;
    uint64_t waited = uv_now(t->env.loop) - s->tts_start_held_ms;
    /* The outbox drops what is older before it sends: past the age the
     * tts start was among the dropped (logged there), and the hold set
     * for it has run out or soon will. */
    if (waited > (uint64_t)cfg->limits.outbox_age_ms) {
        return;
    }
    gw_latency_add(&t->env.counters->turn_tts_start,
                   uv_hrtime() - s->tts_start_rx_ns);
    gw_log(GW_LOG_INFO, s->subject,
           "tts start sent after %llu ms in the outbox: downlink audio goes",
           (unsigned long long)waited);
    gw_udp_peer_hold(&s->udp, (unsigned)cfg->limits.tts_start_guard_ms);
}

/* Audio to (dir 0) or from (dir 1) the session's backend, per backend:
 * two increments where the packet is handled anyway. */
static void count_audio(struct gw_session *s, int dir, size_t len)
{
    struct gw_backend_state *st = s->ticket.st;

    if (st != NULL) {
        st->frames[dir]++;
        st->bytes[dir] += len;
    }
}

/* ---- pcm16: the backend speaks PCM, the gateway transcodes ---- */

/*
 * Sets up the transcoder when the backend's framing is pcm16. The device
 * is promised the backend's PCM rate (its hello's audio_params, else the
 * configured pcm_sample_rate), mono, in frames of its own duration, so no
 * resampling is needed. False when the session has ended.
 */
static bool pcm_start(struct gw_session *s, struct gw_backend_conn *conn,
                      int hello_rate, struct gw_audio_params *audio)
{
    if (gw_backend_conn_framing(conn) != GW_FRAMING_PCM16) {
        return true;
    }
    audio->sample_rate =
        hello_rate > 0 ? hello_rate : gw_backend_conn_pcm_rate(conn);
    audio->channels = 1;
    audio->frame_duration = s->hello.audio.frame_duration;
    struct gw_pcm_bridge_params p = {
        .up_rate = s->hello.audio.sample_rate,
        .down_rate = audio->sample_rate,
        .frame_ms = s->hello.audio.frame_duration,
        .subject = s->subject,
    };
    int rc = gw_pcm_bridge_create(&p, &s->pcm);
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, s->subject, "pcm16 codec for %d/%d Hz: %s",
               p.up_rate, p.down_rate, gw_strerror(rc));
        gw_session_end(s, GW_END_ERROR);
        return false;
    }
    return true;
}

/* One encoded downlink frame: on to the paced UDP path like backend Opus. */
static void pcm_to_device(void *arg, const uint8_t *opus, size_t len)
{
    struct gw_session *s = arg;

    env_of(s)->counters->downlink_audio++;
    if (gw_udp_peer_send(&s->udp, 0, opus, len) != 0) {
        return; /* counted by the UDP layer */
    }
}

/* The end of a reply: its last partial frame goes too, padded. */
static void pcm_on_tts(struct gw_session *s, const struct gw_envelope *env)
{
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(env->root, "state");

    if (s->pcm != NULL && env->kind == GW_MSG_TTS && cJSON_IsString(state) &&
        strcmp(state->valuestring, "stop") == 0) {
        gw_pcm_bridge_downlink_flush(s->pcm, pcm_to_device, s);
    }
}

/* Uplink Opus decoded; the PCM of the frame is one binary message. */
static void pcm_uplink(struct gw_session *s, const uint8_t *opus, size_t len)
{
    uint8_t pcm[GW_PCM_BRIDGE_MAX_FRAME_BYTES];
    size_t n = 0;

    if (gw_pcm_bridge_uplink(s->pcm, opus, len, pcm, sizeof(pcm), &n) != 0) {
        return; /* counted, logged once by the bridge */
    }
    if (gw_backend_conn_send_audio(s->ws, 0, pcm, n) != 0) {
        return; /* counted by the WebSocket layer */
    }
    count_audio(s, 0, n);
}

/*
 * A tts start went to the device (rc 0; held: in the outbox, timed when it
 * leaves, on_outbox_sent): the gateway's share of the turn is timed from
 * rx_ns, when it was read off the backend's socket, and its first audio
 * frame will be too (on_ws_audio).
 */
static void turn_tts_start(struct gw_session *s, int rc, bool held,
                           uint64_t rx_ns)
{
    s->tts_start_rx_ns = rx_ns;
    s->await_audio = rc == 0;
    if (rc == 0 && !held) {
        gw_latency_add(&env_of(s)->counters->turn_tts_start,
                       uv_hrtime() - rx_ns);
    }
}

/* Backend JSON for the device: validated, then passed on byte for byte. */
static void relay_to_device(struct gw_session *s, const char *text, size_t len,
                            uint64_t rx_ns)
{
    const struct gw_session_env *senv = env_of(s);
    struct gw_counters *counters = senv->counters;
    struct gw_envelope env;
    /* Firmware 2.4 reassembles any size (docs/protocol.md section 2.4). */
    int rc = gw_envelope_parse(
        text, len, (size_t)s->hold->cfg->limits.max_downlink_bytes, &env);

    if (rc != 0) {
        backend_refused(s, "backend message refused: %s", gw_strerror(rc));
        return;
    }
    if (env.kind == GW_MSG_HELLO) {
        GW_LOG(GW_LOG_DEBUG, s->subject, "extra backend hello ignored");
    } else if (env.kind == GW_MSG_TTS &&
               !cJSON_IsString(
                   cJSON_GetObjectItemCaseSensitive(env.root, "state"))) {
        /* Older firmware crashes on a tts message without a state. */
        backend_refused(s, "tts message without state dropped");
    } else if (env.kind == GW_MSG_GOODBYE) {
        /* The device acts on it only with its current session id. */
        gw_publish_goodbye(senv->pub, s->client_id, s->session_id);
        gw_envelope_free(&env);
        gw_session_end(s, GW_END_BACKEND_GOODBYE);
        return;
    } else if (env.kind == GW_MSG_MCP) {
        if (gw_mcp_relay_from_backend(&s->relay, s->dev, &env, text, len) !=
            0) {
            backend_refused(s, "backend mcp is not JSON-RPC: dropped");
        } else {
            counters->backend_messages++;
        }
    } else {
        counters->backend_messages++;
        pcm_on_tts(s, &env);
        rc = gw_publish_json(senv->pub, s->client_id, text, len);
        /*
         * The device plays downlink only after "tts start", which travels
         * through the broker while audio comes straight over UDP: audio
         * right behind it would overtake it and be discarded. The hold
         * (limits.tts_start_guard_ms, default 40: under one 60 ms frame)
         * gives the broker that head start.
         */
        if (env.kind == GW_MSG_TTS && state_is(&env, "start")) {
            bool held = rc == 0 && gw_publish_waiting(senv->pub, s->client_id);
            turn_tts_start(s, rc, held, rx_ns);
            hold_for_tts_start(s, held);
        }
    }
    gw_envelope_free(&env);
}

static void on_ws_open(struct gw_backend_conn *conn, void *owner)
{
    struct gw_session *s = owner;
    size_t len = 0;

    /* A pcm16 backend is told what it gets: PCM at the device's rate. */
    snprintf(s->hello.audio.format, sizeof(s->hello.audio.format), "%s",
             gw_backend_conn_framing(conn) == GW_FRAMING_PCM16 ? "pcm16"
                                                               : "opus");
    char *hello = gw_backend_hello_build(&s->hello, &len);
    if (hello == NULL || gw_backend_conn_send_text(s->ws, hello, len) != 0) {
        cJSON_free(hello);
        gw_log(GW_LOG_ERROR, s->subject, "cannot send backend hello");
        gw_session_end(s, GW_END_ERROR);
        return;
    }
    cJSON_free(hello);
    GW_LOG(GW_LOG_DEBUG, s->subject, "backend connected after %llu ms",
           (unsigned long long)age_ms(s));
}

static void on_ws_text(struct gw_backend_conn *conn, const char *text,
                       size_t len, void *owner)
{
    struct gw_session *s = owner;
    struct gw_envelope env;
    struct gw_audio_params audio;
    int pcm_rate = 0;

    if (s->state == GW_SESSION_ACTIVE) {
        relay_to_device(s, text, len, uv_hrtime());
        return;
    }
    if (s->state != GW_SESSION_CONNECTING_BACKEND) {
        return;
    }
    int rc = gw_envelope_parse(
        text, len, (size_t)s->hold->cfg->limits.max_message_bytes, &env);
    if (rc == 0 && env.kind == GW_MSG_HELLO) {
        rc = gw_backend_hello_parse(env.root, s->session_id,
                                    sizeof(s->session_id), &audio);
        pcm_rate = gw_pcm_bridge_hello_rate(env.root);
    } else if (rc == 0) {
        rc = GW_EPROTO;
    }
    gw_envelope_free(&env);
    if (rc != 0) {
        /* The hello timer still runs: a backend that never says a valid
         * hello is given up there. */
        backend_refused(s, "backend message before hello: %s", gw_strerror(rc));
        return;
    }
    gw_backend_pool_succeeded(env_of(s)->pool, &s->ticket,
                              uv_now(env_of(s)->loop));
    if (!pcm_start(s, conn, pcm_rate, &audio)) {
        return;
    }
    activate(s, &audio);
}

static void on_ws_audio(struct gw_backend_conn *conn, uint32_t timestamp,
                        const uint8_t *opus, size_t len, void *owner)
{
    struct gw_session *s = owner;

    (void)conn;
    if (s->state != GW_SESSION_ACTIVE) {
        return;
    }
    count_audio(s, 1, len);
    if (s->await_audio) { /* the turn's first: timed to its datagram */
        s->await_audio = false;
        gw_udp_peer_time_next(&s->udp, uv_hrtime(), s->tts_start_rx_ns);
    }
    if (s->pcm != NULL) {
        gw_pcm_bridge_downlink(s->pcm, opus, len, pcm_to_device, s);
        return;
    }
    env_of(s)->counters->downlink_audio++;
    if (gw_udp_peer_send(&s->udp, timestamp, opus, len) != 0) {
        return; /* counted by the UDP layer */
    }
}

static void on_ws_close(struct gw_backend_conn *conn, const char *reason,
                        void *owner)
{
    struct gw_session *s = owner;

    if (conn != s->ws) { /* an attempt given up at its hello deadline */
        s->abandoned--;
        maybe_free(s);
        return;
    }
    s->ws = NULL;
    switch (s->state) {
    case GW_SESSION_CONNECTING_BACKEND:
        gw_log(GW_LOG_WARN, s->subject, "backend %s: %s", s->backend_name,
               reason);
        pool_failed(s, gw_backend_pool_classify(reason, false), reason);
        try_next_backend(s);
        break;
    case GW_SESSION_ACTIVE:
        gw_log(GW_LOG_INFO, s->subject, "backend closed: %s", reason);
        pool_failed(s, gw_backend_pool_classify(reason, true), reason);
        gw_session_end(s, GW_END_BACKEND_CLOSED);
        break;
    default: /* CLOSING */
        maybe_free(s);
        break;
    }
}

static const struct gw_backend_events ws_events = {
    .on_open = on_ws_open,
    .on_text = on_ws_text,
    .on_audio = on_ws_audio,
    .on_close = on_ws_close,
};

/* The device's address as the broker saw it, for x-forwarded-for. */
static const char *forwarded_for(const struct gw_session *s)
{
    const char *address = s->dev->presence.address;

    return address[0] != '\0' ? address : NULL;
}

/*
 * Opens the backend the route's strategy picks next, with a hello
 * deadline of limits.backend_hello_timeout_ms or what is left of
 * limits.failover_budget_ms (the device waits 10 s for its hello),
 * whichever is less; ends the session when no backend or no time is
 * left.
 */
static void try_next_backend(struct gw_session *s)
{
    const struct gw_session_env *env = env_of(s);
    const struct gw_config *cfg = s->hold->cfg;
    const struct gw_route_config *route = &cfg->routes[s->route];
    uint64_t budget = (uint64_t)cfg->limits.failover_budget_ms;

    for (;;) {
        uint64_t now = uv_now(env->loop), used = now - s->started_ms;
        if (used + MIN_ATTEMPT_MS > budget) {
            gw_log(GW_LOG_WARN, s->subject,
                   "no time left for another backend after %llu ms",
                   (unsigned long long)used);
            break;
        }
        int k = gw_backend_pool_pick(env->pool, cfg, route, s->client_id,
                                     &s->tried, now, &s->ticket);
        if (k < 0) {
            gw_log(GW_LOG_WARN, s->subject,
                   "no backend of route %d left to try after %llu ms", s->route,
                   (unsigned long long)used);
            break;
        }
        const struct gw_backend_config *b =
            &cfg->backends[route->backend_index[k]];
        uint64_t deadline = (uint64_t)cfg->limits.backend_hello_timeout_ms;
        struct gw_backend_connect params = {
            .backend = b,
            .device_id = s->id.mac,
            .client_id = s->id.uuid_len > 0 ? s->id.uuid
                                            : GW_CREDENTIAL_DEFAULT_CLIENT_ID,
            .forwarded_for = forwarded_for(s),
            .log_subject = s->subject,
            .max_message_bytes = (size_t)cfg->limits.max_downlink_bytes,
        };
        int rc = gw_backend_conn_open(env_of(s)->bws, &params, &ws_events, s,
                                      &s->ws);
        if (rc == 0) {
            s->backend_name = b->name;
            if (deadline > budget - used) {
                deadline = budget - used;
            }
            uv_timer_start(&s->timer, on_timer, deadline, 0);
            GW_LOG(GW_LOG_DEBUG, s->subject,
                   "connecting to backend %s, hello due in %llu ms", b->name,
                   (unsigned long long)deadline);
            return;
        }
        gw_log(GW_LOG_WARN, s->subject, "backend %s: %s", b->name,
               gw_strerror(rc));
        pool_failed(s, GW_BFAIL_CONNECT, gw_strerror(rc));
    }
    gw_session_end(s, s->hello_timed_out ? GW_END_BACKEND_HELLO_TIMEOUT
                                         : GW_END_BACKEND_UNAVAILABLE);
}

/* ---- timers ---- */

static void on_timer(uv_timer_t *timer)
{
    struct gw_session *s = timer->data;
    const struct gw_config *cfg = s->hold->cfg;

    if (s->state == GW_SESSION_CONNECTING_BACKEND) {
        /* Given up: its close comes later and is only counted then; a
         * hello it might still send can no longer reach the device. */
        gw_log(GW_LOG_WARN, s->subject,
               "backend %s: no backend hello within %llu ms", s->backend_name,
               (unsigned long long)(uv_now(env_of(s)->loop) -
                                    s->ticket.started_ms));
        s->hello_timed_out = true;
        pool_failed(s, GW_BFAIL_HELLO_TIMEOUT, "no hello in time");
        if (s->ws != NULL) {
            gw_backend_conn_close(s->ws);
            s->ws = NULL;
            s->abandoned++;
        }
        try_next_backend(s);
        return;
    }
    if (s->state != GW_SESSION_ACTIVE) {
        return;
    }
    uint64_t idle = gw_udp_peer_idle_ms(&s->udp);
    uint64_t limit = (uint64_t)cfg->limits.udp_idle_timeout_ms;
    uint64_t next = next_look_ms(s); /* the doctor looks first */
    if (idle >= limit) {
        gw_log(GW_LOG_INFO, s->subject, "no uplink audio for %llu ms",
               (unsigned long long)idle);
        gw_session_end(s, GW_END_UDP_IDLE);
        return;
    }
    uv_timer_start(&s->timer, on_timer, next, 0);
}

/* ---- device side ---- */

void gw_session_on_device_message(struct gw_session *s,
                                  const struct gw_envelope *env,
                                  const char *raw, size_t len, uint64_t rx_ns)
{
    switch (env->kind) {
    case GW_MSG_GOODBYE:
    case GW_MSG_UDP_TIMEOUT:
        /* Never answered: old firmware would answer our goodbye again. */
        gw_session_end(s, GW_END_DEVICE_GOODBYE);
        return;
    default:
        break;
    }
    if (s->state != GW_SESSION_ACTIVE) {
        GW_LOG(GW_LOG_DEBUG, s->subject,
               "%s before the session is active: "
               "dropped",
               env->type);
        return;
    }
    if (s->call != NULL) {
        /* No backend to hear listen or abort; the call ends by goodbye. */
        GW_LOG(GW_LOG_DEBUG, s->subject, "%s in a device call: dropped",
               env->type);
        return;
    }
    if (env->kind == GW_MSG_ABORT) {
        /* The user interrupted: audio still queued here is stale. */
        size_t n = gw_udp_peer_flush(&s->udp);
        s->await_audio = false; /* the reply it stops is not timed */
        if (s->pcm != NULL) {
            gw_pcm_bridge_downlink_reset(s->pcm);
        }
        GW_LOG(GW_LOG_DEBUG, s->subject, "abort: %zu queued packets dropped",
               n);
    }
    if (gw_backend_conn_send_text(s->ws, raw, len) == 0) {
        env_of(s)->counters->device_messages++;
        if (env->kind == GW_MSG_LISTEN && state_is(env, "stop")) {
            gw_latency_add(&env_of(s)->counters->turn_listen_stop,
                           uv_hrtime() - rx_ns);
        }
    } else {
        gw_log(GW_LOG_WARN, s->subject, "backend send queue full: %s dropped",
               env->type);
    }
}

void gw_session_warm(const struct gw_session *s, unsigned step)
{
    switch (step) {
    case 0: /* from table to state: one line (gw_calloc_lines) */
        __builtin_prefetch(&s->table);
        break;
    default:
        if (s->state == GW_SESSION_ACTIVE && s->ws != NULL) {
            gw_backend_conn_warm(s->ws, step - 1);
        }
        break;
    }
}

_Static_assert(offsetof(struct gw_session, udp) -
                       offsetof(struct gw_session, table) <=
                   GW_CACHE_LINE,
               "what on_uplink reads of the session shares a line");
_Static_assert(GW_UDP_HEADROOM >= GW_BACKEND_AUDIO_HEADROOM,
               "an uplink frame can be built where its payload lies");

void gw_session_on_uplink(struct gw_session *s, uint32_t timestamp,
                          uint8_t *opus, size_t len)
{
    if (s->state == GW_SESSION_ACTIVE && s->call != NULL) {
        const struct gw_session_call_ops *ops = &s->table->call_ops;
        ops->on_uplink(ops->arg, s, opus, len); /* never to a backend */
        return;
    }
    if (s->state != GW_SESSION_ACTIVE || s->ws == NULL) {
        return;
    }
    env_of(s)->counters->uplink_audio++;
    if (s->pcm != NULL) {
        pcm_uplink(s, opus, len);
        return;
    }
    /* The reader's slot is ours until its batch ends: the frame is built
     * there (GW_UDP_HEADROOM). */
    if (gw_backend_conn_send_audio_held(s->ws, timestamp, opus, len) != 0) {
        /* Counted by the WebSocket layer; audio is not retried. */
        return;
    }
    count_audio(s, 0, len);
}

/* {"type":"mcp","session_id":..,"payload":payload} to the backend. */
static void send_mcp_to_backend(void *arg, const cJSON *payload)
{
    struct gw_session *s = arg;
    char *text = NULL;

    if (s->state != GW_SESSION_ACTIVE || s->ws == NULL ||
        (text = gw_envelope_print_mcp(s->session_id, payload)) == NULL ||
        gw_backend_conn_send_text(s->ws, text, strlen(text)) != 0) {
        gw_log(GW_LOG_WARN, s->subject, "mcp answer to the backend dropped");
    }
    cJSON_free(text);
}

/* ---- device calls ---- */

void gw__session_set_call_ops(struct gw_sessions *t,
                              const struct gw_session_call_ops *ops)
{
    t->call_ops = *ops;
}

void gw__session_enter_call(struct gw_session *s, void *call)
{
    const struct gw_session_env *env = env_of(s);

    GW_ASSERT(s->state == GW_SESSION_ACTIVE && s->call == NULL);
    s->call = call;
    gw_log(GW_LOG_INFO, s->subject, "backend %s left for a device call",
           s->backend_name != NULL ? s->backend_name : "-");
    /* Closed like an attempt given up: its on_close only counts down. */
    if (s->ws != NULL) {
        gw_backend_conn_close(s->ws);
        s->ws = NULL;
        s->abandoned++;
    }
    gw_mcp_relay_close(&s->relay);
    gw_backend_pool_done(env->pool, &s->ticket);
    gw_pcm_bridge_free(s->pcm);
    s->pcm = NULL;
    /* The backend's last words are stale now. */
    (void)gw_udp_peer_flush(&s->udp);
}

/* ---- the table ---- */

void gw_sessions_init(struct gw_sessions *t, const struct gw_session_env *env)
{
    memset(t, 0, sizeof(*t));
    t->env = *env;
    gw_list_init(&t->live);
    gw_list_init(&t->closing);
    if (env->pub != NULL) {
        env->pub->on_sent = on_outbox_sent;
        env->pub->on_sent_arg = t;
    }
}

size_t gw_sessions_live(const struct gw_sessions *t)
{
    return t->n_live;
}

size_t gw_sessions_alive(const struct gw_sessions *t)
{
    return t->n_live + t->n_closing;
}

struct gw_session *gw_sessions_find(const struct gw_sessions *t,
                                    const char *client_id)
{
    return gw_device_session(t->env.devices, client_id);
}

void gw_sessions_end_all(struct gw_sessions *t, enum gw_session_end why)
{
    struct gw_list *first;

    /* Always the head: ending a session moves it to the closing list. */
    while ((first = gw_list_first(&t->live)) != NULL) {
        gw_session_end(GW_LIST_ENTRY(first, struct gw_session, node), why);
    }
}

/* Refuses a hello: counted, logged, and the device told with a goodbye. */
static int refuse_hello(struct gw_sessions *t, const char *client_id,
                        enum gw_refusal why, int rc, const char *text)
{
    char subject[GW_CLIENT_ID_MAX + 8];

    snprintf(subject, sizeof(subject), "dev=%s", client_id);
    t->env.counters->refused[why]++;
    gw_log(GW_LOG_WARN, subject, "refused: %s", text);
    gw_publish_goodbye(t->env.pub, client_id, "");
    gw_device_settle(t->env.devices, client_id);
    return rc;
}

int gw_session_start(struct gw_sessions *t, const char *client_id,
                     const struct gw_client_id *id,
                     struct gw_device_hello *hello)
{
    const struct gw_session_env *env = &t->env;
    const struct gw_config *cfg = gw_config_live_get(env->config);
    struct gw_session *old = gw_sessions_find(t, client_id);
    size_t cid_len = strlen(client_id);
    char text[64];
    int rc;

    if (t->draining) {
        /* A new conversation, which a draining instance does not take;
         * refused like a full one, so the device tries again. */
        if (old != NULL) {
            gw_log(GW_LOG_INFO, old->subject, "new hello ends this session");
            gw_session_end(old, GW_END_REPLACED);
        }
        return refuse_hello(t, client_id, GW_REFUSE_DRAINING, GW_ELIMIT,
                            "draining: no new conversations");
    }
    if (old != NULL) {
        gw_log(GW_LOG_INFO, old->subject, "new hello replaces this session");
        gw_session_end(old, GW_END_REPLACED);
    } else if (t->n_live >= (size_t)cfg->limits.max_sessions) {
        snprintf(text, sizeof(text), "max_sessions (%d) reached",
                 cfg->limits.max_sessions);
        return refuse_hello(t, client_id, GW_REFUSE_LIMIT, GW_ELIMIT, text);
    }
    int route = gw_router_match(cfg, id, client_id);
    if (route < 0) {
        return refuse_hello(t, client_id, GW_REFUSE_NO_ROUTE, GW_ENOENT,
                            "no route matches");
    }
    struct gw_session *s = gw_calloc_lines(sizeof(*s));
    if (s == NULL) {
        gw_device_settle(env->devices, client_id);
        return GW_ENOMEM;
    }
    memcpy(s->client_id, client_id, cid_len + 1);
    /* Re-parse from our own copy: the parts must point into it. */
    if (cid_len > GW_CLIENT_ID_MAX ||
        gw_client_id_parse(s->client_id, cid_len, &s->id) != 0) {
        free(s);
        return GW_EINVAL;
    }
    rc = gw_device_attach_session(env->devices, s->client_id, s, s->session_id,
                                  &s->dev);
    if (rc != 0) {
        free(s);
        snprintf(text, sizeof(text), "device record: %s", gw_strerror(rc));
        return refuse_hello(t, client_id, GW_REFUSE_LIMIT, rc, text);
    }
    s->table = t;
    s->hold = gw_config_live_acquire(env->config);
    s->hello = *hello;
    memset(hello, 0, sizeof(*hello)); /* moved */
    s->route = route;
    s->state = GW_SESSION_CONNECTING_BACKEND;
    s->started_ms = uv_now(env->loop);
    s->serial = ++t->next_serial;
    gw_mcp_relay_init(&s->relay, env->devices, s->client_id, s->subject,
                      send_mcp_to_backend, s);
    set_subject(s);
    uv_timer_init(env->loop, &s->timer);
    s->timer.data = s; /* started with each backend attempt */
    gw_list_insert_tail(&t->live, &s->node);
    t->n_live++;
    env->counters->sessions_started++;
    GW_LOG(GW_LOG_DEBUG, s->subject, "hello: route %d", route);
    try_next_backend(s);
    return 0;
}

void gw_session_end(struct gw_session *s, enum gw_session_end why)
{
    const struct gw_session_env *env = env_of(s);

    if (s->state == GW_SESSION_CLOSING) {
        return;
    }
    gw_log(GW_LOG_INFO, s->subject, "session ended: %s (age %llu ms)",
           gw_session_end_name(why), (unsigned long long)age_ms(s));
    env->counters->sessions_ended[why]++;
    bool was_active = s->state == GW_SESSION_ACTIVE;
    set_state(s, GW_SESSION_CLOSING);
    if (s->call != NULL) { /* the other side of a call gets its goodbye */
        s->table->call_ops.leave(s->table->call_ops.arg, s);
    }
    if (was_active) {
        gw_udp_peer_stop(&s->udp);
    }
    gw_pcm_bridge_free(s->pcm); /* codec state goes with the session */
    s->pcm = NULL;
    gw_mcp_relay_close(&s->relay);
    gw_backend_pool_done(env->pool, &s->ticket);
    /*
     * The device is told, with the id it knows, unless it left first, is
     * gone from the broker (nobody would receive it), or a newer hello
     * of its own replaced this session (a goodbye then could end the new
     * conversation on firmware older than 2.3).
     */
    if (why != GW_END_DEVICE_GOODBYE && why != GW_END_REPLACED &&
        why != GW_END_BACKEND_GOODBYE && why != GW_END_DEVICE_OFFLINE) {
        gw_publish_goodbye(env->pub, s->client_id, s->session_id);
    }
    if (s->ws != NULL) {
        gw_backend_conn_close(s->ws); /* on_ws_close follows */
    }
    /* A newer hello or shutdown is no sign that the device left. */
    struct gw_device *dev = s->dev;
    s->dev = NULL;
    gw_device_detach_session(dev, s,
                             why == GW_END_REPLACED || why == GW_END_SHUTDOWN ||
                                 why == GW_END_DRAIN_DEADLINE);
    uv_timer_stop(&s->timer);
    uv_close((uv_handle_t *)&s->timer, on_timer_closed);
}
