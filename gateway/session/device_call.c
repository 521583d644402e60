/*
 * Device-to-device calls, as the Node gateway of xinnan-tech runs them:
 * request (the callee is woken with self.remote_wakeup), accept, relay,
 * and the ends (expiry, either side leaving). A call joins two sessions;
 * it never owns them, and each session points back to it while in it.
 */
#include "gateway/session/device_call.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <opus/opus.h>

#include "codec/client_id.h"
#include "common/assert.h"
#include "common/log.h"
#include "gateway/device/mcp_link.h"
#include "gateway/session/session.h"
#include "gateway/session/session_int.h"

#define SUBJECT "call"
/* The silence frame: what the firmware's decoder expects of a server. */
#define SILENCE_RATE    16000
#define SILENCE_SAMPLES (SILENCE_RATE * 60 / 1000)
/* The route's index in stats.answers. */
#define API_REQUEST 0
#define API_ACCEPT  1

/* Log lines of ambiguous MACs: a burst, then one every 10 s. */
static const struct gw_bucket_rate ambiguous_rate = {0.1, 5};

struct gw_device_call {
    struct gw_list node;             /* in calls (until ENDED) */
    struct gw_device_calls *owner;   /* the registry */
    enum gw_device_call_state state; /* changed only by set_state() */
    uint64_t serial;
    char caller_mac[GW_CALL_MAC_SIZE];
    char callee_mac[GW_CALL_MAC_SIZE];
    struct gw_session *caller; /* in the call from the request */
    struct gw_session *callee; /* from the accept; NULL while ringing */
    uv_timer_t timer;          /* ring expiry */
    uint64_t started_ms, bridged_ms;
    char subject[64]; /* "call=<n> <caller>><callee>": every line */
};

static const char *const state_names[GW_DEVICE_CALL_STATE_COUNT_] = {
#define XX(name, text) [GW_DEVICE_CALL_##name] = text,
    GW_DEVICE_CALL_STATE_MAP(XX)
#undef XX
};
static const char *const end_names[GW_DEVICE_CALL_END_COUNT_] = {
#define XX(name, text) [GW_DEVICE_CALL_END_##name] = text,
    GW_DEVICE_CALL_END_MAP(XX)
#undef XX
};
static const char *const answer_names[GW_DEVICE_CALL_ANSWER_COUNT_] = {
#define XX(name, text) [GW_DEVICE_CALL_ANSWER_##name] = text,
    GW_DEVICE_CALL_ANSWER_MAP(XX)
#undef XX
};

const char *gw_device_call_state_name(enum gw_device_call_state state)
{
    return (unsigned)state < GW_DEVICE_CALL_STATE_COUNT_ ? state_names[state]
                                                         : "?";
}

const char *gw_device_call_end_name(enum gw_device_call_end why)
{
    return (unsigned)why < GW_DEVICE_CALL_END_COUNT_ ? end_names[why] : "?";
}

const char *gw_device_call_answer_name(enum gw_device_call_answer answer)
{
    return (unsigned)answer < GW_DEVICE_CALL_ANSWER_COUNT_
               ? answer_names[answer]
               : "?";
}

/* Encoded once: a frame of digital silence, as a device would send it. */
static void encode_silence(struct gw_device_calls *c)
{
    int err = 0;
    OpusEncoder *enc =
        opus_encoder_create(SILENCE_RATE, 1, OPUS_APPLICATION_VOIP, &err);
    opus_int16 pcm[SILENCE_SAMPLES] = {0};

    c->silence_len = 0;
    if (enc == NULL) {
        gw_log(GW_LOG_ERROR, SUBJECT, "opus encoder: %s", opus_strerror(err));
        return;
    }
    opus_int32 n = opus_encode(enc, pcm, SILENCE_SAMPLES, c->silence,
                               (opus_int32)sizeof(c->silence));
    if (n > 0) {
        c->silence_len = (size_t)n;
    } else {
        gw_log(GW_LOG_ERROR, SUBJECT, "silence frame: %s", opus_strerror(n));
    }
    opus_encoder_destroy(enc);
}

/* ---- state -------------------------------------------------------------- */

static void set_state(struct gw_device_call *call,
                      enum gw_device_call_state next)
{
    struct gw_device_calls *c = call->owner;

    GW_LOG(GW_LOG_DEBUG, call->subject, "state %s -> %s",
           gw_device_call_state_name(call->state),
           gw_device_call_state_name(next));
    GW_ASSERT(call->state != GW_DEVICE_CALL_ENDED);
    if (call->state == GW_DEVICE_CALL_RINGING) {
        c->n_ringing--;
    } else {
        c->n_bridged--;
    }
    if (next == GW_DEVICE_CALL_BRIDGED) {
        c->n_bridged++;
    } else if (next == GW_DEVICE_CALL_RINGING) {
        c->n_ringing++;
    } else {
        gw_list_unlink(&call->node);
    }
    call->state = next;
}

static void on_timer_closed(uv_handle_t *h)
{
    free(h->data);
}

/*
 * The call is over: both sessions let go of it (neither is ended here;
 * the caller decides that), counted, logged, memory on the timer's close.
 */
static void call_end(struct gw_device_call *call, enum gw_device_call_end why)
{
    struct gw_device_calls *c = call->owner;
    uint64_t now = uv_now(c->env.loop);

    if (call->state == GW_DEVICE_CALL_ENDED) {
        return;
    }
    gw_log(GW_LOG_INFO, call->subject, "call ended: %s after %" PRIu64 " ms%s",
           gw_device_call_end_name(why), now - call->started_ms,
           call->state == GW_DEVICE_CALL_BRIDGED ? " (bridged)" : " (ringing)");
    set_state(call, GW_DEVICE_CALL_ENDED);
    c->stats.ended[why]++;
    if (call->caller != NULL) {
        call->caller->call = NULL;
    }
    if (call->callee != NULL) {
        call->callee->call = NULL;
    }
    uv_timer_stop(&call->timer);
    uv_close((uv_handle_t *)&call->timer, on_timer_closed);
}

/* Unanswered: the caller's conversation ends with a goodbye. */
static void on_ring_timeout(uv_timer_t *t)
{
    struct gw_device_call *call = t->data;
    struct gw_session *caller = call->caller;

    call_end(call, GW_DEVICE_CALL_END_EXPIRED);
    if (caller != NULL) {
        gw_session_end(caller, GW_END_CALL_ENDED);
    }
}

/* s ends while in a call (the session table's call_ops.leave). */
static void on_leave(void *arg, struct gw_session *s)
{
    struct gw_device_call *call = s->call;

    (void)arg;
    if (call == NULL) {
        return;
    }
    if (call->state == GW_DEVICE_CALL_RINGING) {
        /* Only the caller is in a ringing call. */
        call_end(call, GW_DEVICE_CALL_END_CALLER_LEFT);
        return;
    }
    struct gw_session *other = s == call->caller ? call->callee : call->caller;
    call_end(call, GW_DEVICE_CALL_END_HANGUP);
    if (other != NULL) {
        gw_session_end(other, GW_END_CALL_ENDED); /* its goodbye */
    }
}

/* ---- audio -------------------------------------------------------------- */

/* A valid uplink packet of a session in a call (call_ops.on_uplink). */
static void on_uplink(void *arg, struct gw_session *s, const uint8_t *opus,
                      size_t len)
{
    struct gw_device_call *call = s->call;
    struct gw_device_calls *c = arg;

    if (call->state == GW_DEVICE_CALL_RINGING) {
        /* A waiting caller hears silence, one frame per frame it sends,
         * so its channel stays fed at its own pace. */
        if (c->silence_len > 0 &&
            gw_udp_peer_send(&s->udp, 0, c->silence, c->silence_len) == 0) {
            c->stats.silence_frames++;
        }
        return;
    }
    struct gw_session *other = s == call->caller ? call->callee : call->caller;
    /* Re-encrypted with the other side's key, under its own sequence, and
     * paced by its play clock; timestamp 0 as no backend stamps it. */
    if (gw_udp_peer_send(&other->udp, 0, opus, len) == 0) {
        c->stats.relayed_frames++;
        c->stats.relayed_bytes += len;
    } else {
        c->stats.relay_refused++; /* and counted by the UDP layer */
    }
}

void gw_device_calls_init(struct gw_device_calls *c,
                          const struct gw_device_calls_env *env)
{
    const struct gw_session_call_ops ops = {
        .on_uplink = on_uplink,
        .leave = on_leave,
        .arg = c,
    };

    memset(c, 0, sizeof(*c));
    c->env = *env;
    gw_list_init(&c->calls);
    encode_silence(c);
    gw__session_set_call_ops(env->sessions, &ops);
}

/* ---- the API ----------------------------------------------------------- */

/*
 * The device a MAC names: the one place a MAC becomes a device, for caller
 * and callee, request and accept alike, so what makes a record eligible is
 * decided here only. Returns how many online records carry mac in their
 * client id; *out is the device only when exactly one does (two devices
 * claiming one MAC are refused as ambiguous, never "the first one"). With
 * bindings kept, that one must be the MAC's only binding: a record not
 * bound to it is not called (as if offline), and a MAC two bindings hold
 * counts as two. O(devices), as the Node gateway's own lookup; calls are
 * rare.
 */
static unsigned device_of_mac(struct gw_device_calls *c, const char *mac,
                              const char *peer, struct gw_device **out)
{
    struct gw_device *d;
    struct gw_binding b;
    unsigned n = 0;
    int rc;

    *out = NULL;
    GW_DEVICE_FOREACH(c->env.devices, d)
    {
        struct gw_client_id id;
        if (gw_client_id_parse(d->client_id, strlen(d->client_id), &id) == 0 &&
            strcmp(id.mac, mac) == 0) {
            n++;
            *out = d;
        }
    }
    if (n > 1) {
        *out = NULL;
    }
    if (n != 1 || c->env.bindings == NULL) {
        return n;
    }
    rc = gw_binding_identity(c->env.bindings, (*out)->client_id, &b);
    if (rc == GW_EEXIST) {
        *out = NULL;
        return 2;
    }
    if (rc != 0 || strcmp(b.mac, mac) != 0) {
        gw_log_peer(GW_LOG_WARN, peer, SUBJECT,
                    "call from %s: %s is online but not bound to MAC %s (%s): "
                    "not called",
                    peer, (*out)->client_id, mac,
                    rc == 0 ? "bound to another" : gw_strerror(rc));
        *out = NULL;
        return 0;
    }
    return 1;
}

/* The ringing or bridged call a MAC takes part in, or NULL. */
static struct gw_device_call *call_of_mac(struct gw_device_calls *c,
                                          const char *mac, bool as_callee_only)
{
    struct gw_list *it, *tmp;

    GW_LIST_FOREACH_SAFE(it, tmp, &c->calls)
    {
        struct gw_device_call *call =
            GW_LIST_ENTRY(it, struct gw_device_call, node);
        if (strcmp(call->callee_mac, mac) == 0 ||
            (!as_callee_only && strcmp(call->caller_mac, mac) == 0)) {
            return call;
        }
    }
    return NULL;
}

/* {"status":..,"message":..} with its counter and one log line. */
static int answer(struct gw_device_calls *c, int route,
                  enum gw_device_call_answer a, const char *message,
                  const char *peer_mac, cJSON **out)
{
    cJSON *doc = cJSON_CreateObject();

    c->stats.answers[route][a]++;
    if (doc != NULL && a == GW_DEVICE_CALL_ANSWER_BAD_REQUEST) {
        cJSON_AddStringToObject(doc, "error", message);
    } else if (doc != NULL) {
        cJSON_AddStringToObject(doc, "status", gw_device_call_answer_name(a));
        if (message != NULL) {
            cJSON_AddStringToObject(doc, "message", message);
        }
        if (peer_mac != NULL) {
            cJSON_AddStringToObject(doc, "peerMac", peer_mac);
        }
    }
    *out = doc;
    return a == GW_DEVICE_CALL_ANSWER_BAD_REQUEST ? 400
           : a == GW_DEVICE_CALL_ANSWER_AMBIGUOUS ? 409
                                                  : 200;
}

/*
 * A MAC that names more than one online device: refused (409), counted,
 * logged within a bound (whoever holds a device's MAC can trigger it).
 */
static int ambiguous(struct gw_device_calls *c, int route, const char *role,
                     const char *mac, unsigned n, const char *peer, cJSON **out)
{
    char msg[160];
    uint64_t skipped = 0;

    snprintf(msg, sizeof(msg), "ambiguous: %u devices have the %s MAC %s", n,
             role, mac);
    if (gw_bucket_take(&c->ambiguous_log, &ambiguous_rate, uv_now(c->env.loop),
                       &skipped)) {
        gw_log(GW_LOG_WARN, SUBJECT,
               "call %s from %s: 409 %s (%" PRIu64 " such lines left out)",
               route == API_REQUEST ? "request" : "accept", peer, msg, skipped);
    }
    return answer(c, route, GW_DEVICE_CALL_ANSWER_AMBIGUOUS, msg, NULL, out);
}

/* A device's session that can join a call: active and in none. */
static struct gw_session *free_session(const struct gw_device *dev)
{
    struct gw_session *s = dev != NULL ? dev->session : NULL;

    return s != NULL && s->state == GW_SESSION_ACTIVE && s->call == NULL ? s
                                                                         : NULL;
}

/* The wake-up's answer: only logged (the device acts on it, or cannot). */
static void on_wake_reply(void *arg, const struct gw_mcp_reply *reply)
{
    struct gw_device_calls *c = arg;

    if (reply->outcome != GW_MCP_OK) {
        c->stats.wakeups_failed++;
        gw_log(GW_LOG_WARN, SUBJECT, "remote wake-up not taken: %s",
               gw_mcp_outcome_name(reply->outcome));
    }
}

/* MCP tools/call self.remote_wakeup, action listen: the device opens a
 * conversation, in which its user accepts (or not). */
static void wake(struct gw_device_calls *c, struct gw_device_call *call,
                 struct gw_device *callee, const char *nickname)
{
    char reason[GW_CALL_NICKNAME_MAX + 96];
    cJSON *params = cJSON_CreateObject();
    cJSON *args = cJSON_AddObjectToObject(params, "arguments");

    snprintf(reason, sizeof(reason),
             "[device_call]Incoming call from %s. Answer it?",
             nickname[0] != '\0' ? nickname : "an unknown caller");
    if (params == NULL || args == NULL ||
        cJSON_AddStringToObject(params, "name", "self.remote_wakeup") == NULL ||
        cJSON_AddStringToObject(args, "reason", reason) == NULL ||
        cJSON_AddStringToObject(args, "action", "listen") == NULL) {
        cJSON_Delete(params);
        gw_log(GW_LOG_ERROR, call->subject, "wake-up: out of memory");
        return;
    }
    gw_mcp_request(gw_device_table_links(c->env.devices), &callee->link,
                   "tools/call", params, 0, GW_MCP_FROM_API, on_wake_reply, c,
                   NULL);
    GW_LOG(GW_LOG_DEBUG, call->subject, "wake-up sent to %s",
           callee->client_id);
}

/* Both sessions relay to each other from now on. */
static void bridge(struct gw_device_call *call, struct gw_session *callee)
{
    struct gw_device_calls *c = call->owner;
    char msg[96];
    int n;

    call->callee = callee;
    gw__session_enter_call(callee, call);
    uv_timer_stop(&call->timer);
    set_state(call, GW_DEVICE_CALL_BRIDGED);
    call->bridged_ms = uv_now(c->env.loop);
    c->stats.bridged++;
    /* The caller learns it was answered; the callee is the one who did. */
    n = snprintf(msg, sizeof(msg),
                 "{\"type\":\"call_accepted\",\"from\":\"%s\"}",
                 call->callee_mac);
    if (gw_publish_json(c->env.pub, call->caller->client_id, msg, (size_t)n) !=
        0) {
        gw_log(GW_LOG_WARN, call->subject,
               "call_accepted not sent: broker away");
    }
    gw_log(GW_LOG_INFO, call->subject, "call bridged after %" PRIu64 " ms",
           call->bridged_ms - call->started_ms);
}

static int call_request(struct gw_device_calls *c, const char *body, size_t len,
                        const char *peer, cJSON **out)
{
    struct gw_call_request rq;
    const char *why;
    struct gw_device *target, *caller_dev;
    struct gw_session *caller;
    struct gw_device_call *call;

    if (gw_call_request_parse(body, len, &rq, &why) != 0) {
        gw_log_peer(GW_LOG_WARN, peer, SUBJECT, "call request from %s: 400 %s",
                    peer, why);
        return answer(c, API_REQUEST, GW_DEVICE_CALL_ANSWER_BAD_REQUEST, why,
                      NULL, out);
    }
    /* Both MACs name exactly one device before anything happens. */
    unsigned n_target = device_of_mac(c, rq.target_mac, peer, &target);
    unsigned n_caller = device_of_mac(c, rq.caller_mac, peer, &caller_dev);
    if (n_target > 1) {
        return ambiguous(c, API_REQUEST, "target", rq.target_mac, n_target,
                         peer, out);
    }
    if (n_caller > 1) {
        return ambiguous(c, API_REQUEST, "caller", rq.caller_mac, n_caller,
                         peer, out);
    }
    if (target == NULL) {
        gw_log(GW_LOG_INFO, SUBJECT, "call request %s>%s from %s: offline",
               rq.caller_mac, rq.target_mac, peer);
        return answer(c, API_REQUEST, GW_DEVICE_CALL_ANSWER_OFFLINE,
                      "the target device is not online", NULL, out);
    }
    /* The other side asked for us first: both are in, as with an accept. */
    call = call_of_mac(c, rq.target_mac, false);
    if (call != NULL && call->state == GW_DEVICE_CALL_RINGING &&
        strcmp(call->caller_mac, rq.target_mac) == 0 &&
        strcmp(call->callee_mac, rq.caller_mac) == 0 &&
        (caller = free_session(caller_dev)) != NULL) {
        bridge(call, caller);
        return answer(c, API_REQUEST, GW_DEVICE_CALL_ANSWER_BRIDGED, NULL, NULL,
                      out);
    }
    why = NULL;
    caller = free_session(caller_dev);
    if (strcmp(rq.caller_mac, rq.target_mac) == 0) {
        why = "a device cannot call itself";
    } else if (call_of_mac(c, rq.caller_mac, false) != NULL) {
        why = "the caller is already in a call";
    } else if (call_of_mac(c, rq.target_mac, false) != NULL) {
        why = "the target is already in a call";
    } else if (caller == NULL) {
        why = "the caller has no active voice session";
    }
    if (why != NULL) {
        gw_log(GW_LOG_WARN, SUBJECT, "call request %s>%s from %s: error: %s",
               rq.caller_mac, rq.target_mac, peer, why);
        return answer(c, API_REQUEST, GW_DEVICE_CALL_ANSWER_ERROR, why, NULL,
                      out);
    }
    if ((call = calloc(1, sizeof(*call))) == NULL) {
        *out = NULL;
        return 503;
    }
    call->owner = c;
    call->serial = ++c->next_serial;
    call->state = GW_DEVICE_CALL_RINGING;
    call->caller = caller;
    call->started_ms = uv_now(c->env.loop);
    memcpy(call->caller_mac, rq.caller_mac, sizeof(call->caller_mac));
    memcpy(call->callee_mac, rq.target_mac, sizeof(call->callee_mac));
    snprintf(call->subject, sizeof(call->subject), "call=%" PRIu64 " %s>%s",
             call->serial, call->caller_mac, call->callee_mac);
    uv_timer_init(c->env.loop, &call->timer);
    call->timer.data = call;
    gw_list_insert_tail(&c->calls, &call->node);
    c->n_ringing++;
    c->stats.started++;
    gw__session_enter_call(caller, call);
    int ring_ms =
        gw_config_live_get(c->env.config)->limits.call_ring_timeout_ms;
    uv_timer_start(&call->timer, on_ring_timeout, (uint64_t)ring_ms, 0);
    gw_log(GW_LOG_INFO, call->subject,
           "ringing (asked by %s, expires in %d ms)", peer, ring_ms);
    wake(c, call, target, rq.nickname);
    return answer(c, API_REQUEST, GW_DEVICE_CALL_ANSWER_PENDING, NULL, NULL,
                  out);
}

static int call_accept(struct gw_device_calls *c, const char *body, size_t len,
                       const char *peer, cJSON **out)
{
    struct gw_call_accept rq;
    const char *why;
    struct gw_device_call *call;
    struct gw_session *callee;

    if (gw_call_accept_parse(body, len, &rq, &why) != 0) {
        gw_log_peer(GW_LOG_WARN, peer, SUBJECT, "call accept from %s: 400 %s",
                    peer, why);
        return answer(c, API_ACCEPT, GW_DEVICE_CALL_ANSWER_BAD_REQUEST, why,
                      NULL, out);
    }
    struct gw_device *callee_dev;
    unsigned n = device_of_mac(c, rq.mac, peer, &callee_dev);
    if (n > 1) {
        return ambiguous(c, API_ACCEPT, "callee", rq.mac, n, peer, out);
    }
    call = call_of_mac(c, rq.mac, true);
    if (call == NULL || call->state != GW_DEVICE_CALL_RINGING) {
        gw_log_peer(GW_LOG_WARN, peer, SUBJECT,
                    "call accept for %s from %s: no_pending", rq.mac, peer);
        return answer(c, API_ACCEPT, GW_DEVICE_CALL_ANSWER_NO_PENDING,
                      "no call is waiting for this device", NULL, out);
    }
    callee = free_session(callee_dev);
    if (callee == NULL) {
        gw_log(GW_LOG_WARN, call->subject,
               "accept from %s: error: the callee has no active voice session",
               peer);
        return answer(c, API_ACCEPT, GW_DEVICE_CALL_ANSWER_ERROR,
                      "the callee has no active voice session", NULL, out);
    }
    bridge(call, callee);
    return answer(c, API_ACCEPT, GW_DEVICE_CALL_ANSWER_BRIDGED, NULL,
                  call->caller_mac, out);
}

int gw_device_calls_api(struct gw_device_calls *c, const char *path,
                        const char *body, size_t len, const char *peer,
                        cJSON **out)
{
    if (strcmp(path, GW_DEVICE_CALL_ACCEPT_PATH) == 0) {
        return call_accept(c, body, len, peer, out);
    }
    return call_request(c, body, len, peer, out);
}
