/*
 * The simulated device's conversation: turns in each listening mode, how
 * the conversation ends, the deadlines of each phase and the verdict at
 * the end of the run.
 */
#include "tools/sim_device_int.h"

#include <inttypes.h>
#include <stdarg.h>

#include "common/log.h"
#include "tools/sim_common.h"
#include "tools/sim_espmcp.h"

static const char *mode_name(enum gw_sim_mode m)
{
    return m == GW_SIM_MODE_MANUAL     ? "manual"
           : m == GW_SIM_MODE_REALTIME ? "realtime"
                                       : "auto";
}

static void on_watchdog(uv_timer_t *t)
{
    struct gw_sim_device *d = t->data;

    if (d->closing || d->finished) {
        return;
    }
    switch (d->state) {
    case ST_CONNECTING:
        gw_sim_dev_fail(d, "no MQTT connection to %s:%d within %" PRIu32 " ms",
                        d->host, d->o.port, d->o.connect_timeout_ms);
        break;
    case ST_HELLO:
        gw_sim_dev_fail(d,
                        "no valid server hello within %" PRIu32 " ms (%" PRIu32
                        " invalid ignored)",
                        d->o.hello_timeout_ms, d->r.hello_invalid);
        break;
    case ST_OPENING:
        gw_sim_dev_fail(d, "UDP channel not open within %" PRIu32 " ms",
                        d->o.hello_timeout_ms);
        break;
    case ST_LINGER:
        gw_sim_dev_conversation_over(d);
        break;
    default:
        if (d->final_turn) {
            gw_sim_dev_fail(d,
                            "no server goodbye within %" PRIu32
                            " ms after the last "
                            "turn",
                            d->o.end_timeout_ms);
        } else {
            gw_sim_dev_fail(d,
                            "turn %" PRIu32 ": no tts stop within %" PRIu32
                            " ms (state %s)",
                            d->turn + 1, d->o.turn_timeout_ms,
                            gw_sim_dev_state_name(d->state));
        }
        break;
    }
}

void gw_sim_dev_watch(struct gw_sim_device *d, uint32_t ms)
{
    if (ms == 0) {
        uv_timer_stop(&d->watchdog);
    } else {
        uv_timer_start(&d->watchdog, on_watchdog, ms, 0);
    }
}

void gw_sim_dev_begin_turn(struct gw_sim_device *d, bool listen_msg, bool last)
{
    uint64_t now = uv_hrtime();

    d->turn_frame = 0;
    d->turn_played = 0;
    d->aborted = false;
    d->final_turn = last;
    d->turn_start_ns = now;
    d->speech_end_ns = now; /* until the speech really ends */
    d->state = ST_LISTENING;
    if (listen_msg) {
        gw_sim_dev_event(d, "> listen start mode=%s%s", mode_name(d->o.mode),
                         last ? " (waiting for the server's goodbye)" : "");
        if (gw_sim_dev_send_msg(d,
                                "{\"session_id\":\"%s\",\"type\":\"listen\","
                                "\"state\":\"start\",\"mode\":\"%s\"}",
                                d->sid, mode_name(d->o.mode)) != 0) {
            return;
        }
    }
    gw_sim_dev_uplink_start(d);
    gw_sim_dev_watch(d, last ? d->o.end_timeout_ms : d->o.turn_timeout_ms);
}

/* What follows the last turn. */
static void end_conversation(struct gw_sim_device *d)
{
    switch (d->o.end) {
    case GW_SIM_END_GOODBYE:
        gw_sim_dev_goodbye(d);
        break;
    case GW_SIM_END_SERVER:
        d->turn++;
        d->final_turn = true;
        if (d->o.mode == GW_SIM_MODE_MANUAL) {
            d->state = ST_IDLE; /* push to talk: nothing to send */
            gw_sim_dev_watch(d, d->o.end_timeout_ms);
        } else {
            gw_sim_dev_begin_turn(d, d->o.mode == GW_SIM_MODE_AUTO, true);
        }
        break;
    case GW_SIM_END_NONE:
        gw_sim_dev_event(d, "channel dropped without goodbye");
        gw_sim_dev_udp_close(d);
        gw_sim_dev_finish(d);
        break;
    }
}

/* tts stop arrived and the queue drained. */
void gw_sim_dev_turn_done(struct gw_sim_device *d)
{
    d->stop_pending = false;
    d->r.turns_done++;
    d->stop_ns = uv_hrtime();
    gw_sim_dev_event(d, "turn %" PRIu32 " done: %" PRIu32 " frames played",
                     d->turn + 1, d->turn_played);
    if (d->o.turns > 0 && d->r.turns_done >= d->o.turns) {
        end_conversation(d);
        return;
    }
    d->turn++;
    /* auto re-sends listen start; manual presses the button again;
     * realtime just keeps listening. */
    gw_sim_dev_begin_turn(d, d->o.mode != GW_SIM_MODE_REALTIME, false);
}

void gw_sim_dev_goodbye(struct gw_sim_device *d)
{
    /* Firmware order: UDP socket destroyed, then the goodbye. */
    gw_sim_dev_udp_close(d);
    uv_timer_stop(&d->play_timer);
    d->q_len = 0;
    d->playing = false;
    d->state = ST_LINGER;
    gw_sim_dev_event(d, "> goodbye");
    if (gw_sim_dev_send_msg(d, "{\"session_id\":\"%s\",\"type\":\"goodbye\"}",
                            d->sid) == 0) {
        d->r.goodbye_sent = true;
        gw_sim_dev_watch(d, d->o.linger_ms > 0 ? d->o.linger_ms : 1);
    }
}

/* ---- timers, end of run ---------------------------------------------- */

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
set_reason(struct gw_sim_device *d, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(d->r.reason, sizeof(d->r.reason), fmt, ap);
    va_end(ap);
}

/* Expectations checked once the run is over; the first unmet one wins. */
static void evaluate(struct gw_sim_device *d)
{
    const struct gw_sim_result *r = &d->r;
    char v[200] = "";
    size_t pos = 0;

    if (r->reason[0] != '\0') {
        return; /* a failure already ended the run */
    }
    for (int i = 0; i < GW_SIM_DROP_COUNT_; i++) {
        if (gw_sim_drop_is_violation(i) && i != GW_SIM_DROP_QUEUE &&
            r->drops[i] > 0 && pos < sizeof(v)) {
            pos += (size_t)snprintf(v + pos, sizeof(v) - pos, " %s=%" PRIu64,
                                    gw_sim_drop_name(i), r->drops[i]);
        }
    }
    if (pos > 0) {
        set_reason(d, "strict downlink checks failed:%s", v);
    } else if (r->drops[GW_SIM_DROP_QUEUE] > 0) {
        set_reason(d,
                   "decode queue overflow: %" PRIu64 " frames dropped "
                   "(downlink not paced near real time)",
                   r->drops[GW_SIM_DROP_QUEUE]);
    } else if (r->drops[GW_SIM_DROP_IDLE] > 0) {
        set_reason(d,
                   "%" PRIu64 " downlink frames arrived before tts start "
                   "and were dropped, as the firmware drops them (the "
                   "start of a reply lost)",
                   r->drops[GW_SIM_DROP_IDLE]);
    } else if (r->hello_duplicate > 0) {
        set_reason(d,
                   "%" PRIu32 " extra server hello(s): exactly one may "
                   "answer each device hello",
                   r->hello_duplicate);
    } else if (r->goodbye_replied) {
        set_reason(d, "the device's goodbye was answered with a goodbye");
    } else if (r->mcp_violations > 0) {
        set_reason(d, "MCP violations: %" PRIu32 " (first: %s)",
                   r->mcp_violations, gw_sim_esp_stats(d->esp)->violation);
    } else if (d->stopped) {
        return; /* load runs end on a clock, mid-turn */
    } else if (d->o.require_reply && r->stt_count == 0) {
        set_reason(d, "no stt received");
    } else if (d->o.require_reply && r->tts_start == 0) {
        set_reason(d, "no tts start received");
    } else if (d->o.require_reply && r->tts_stop == 0) {
        set_reason(d, "no tts stop received");
    } else if (d->o.require_reply && r->down_played == 0) {
        set_reason(d, "no downlink audio played");
    } else if (d->o.require_reply && d->o.turns > 0 &&
               r->turns_done < d->o.turns) {
        set_reason(d, "only %" PRIu32 " of %" PRIu32 " turns completed%s",
                   r->turns_done, d->o.turns,
                   r->goodbye_received ? " (the server said goodbye)" : "");
    } else if (d->o.end == GW_SIM_END_SERVER && !r->goodbye_received) {
        set_reason(d, "no goodbye from the server");
    }
}

static void on_done_timer(uv_timer_t *t)
{
    struct gw_sim_device *d = t->data;

    if (!d->closing && d->o.on_done != NULL) {
        d->o.on_done(d, &d->r, d->o.arg);
    }
}

void gw_sim_dev_finish(struct gw_sim_device *d)
{
    if (d->finished) {
        return;
    }
    d->finished = true;
    gw_sim_dev_udp_close(d);
    uv_timer_stop(&d->play_timer);
    uv_timer_stop(&d->watchdog);
    uv_timer_stop(&d->duration_timer);
    gw_sim_dev_sync_downlink(d);
    uv_timer_stop(&d->mcp_timer);
    gw_sim_dev_esp_finish(d);
    gw_sim_dev_sync_mcp(d);
    gw_sim_digest_hex(d->up_md, d->r.up_sha256);
    gw_sim_digest_hex(d->down_md, d->r.down_sha256);
    if (d->o.tone_hz > 0) {
        d->r.down_tone_hz = gw_sim_tone_hz(
            d->tone_pcm, d->tone_n, d->sample_rate, &d->r.down_tone_purity);
    }
    evaluate(d);
    d->state = ST_DONE;
    d->r.ok = d->r.reason[0] == '\0';
    d->r.done = true;
    if (!d->r.ok) {
        gw_log(GW_LOG_INFO, d->subject, "run failed: %s", d->r.reason);
    }
    gw_sim_dev_event(d, "end of run: %s%s",
                     d->r.ok ? "ok" : "FAILED: ", d->r.reason);
    uv_timer_start(&d->done_timer, on_done_timer, 0, 0);
}

/*
 * With --sessions the device stays connected after a conversation, as a
 * board does between two wake-ups, and the next one starts on a button
 * press (gw_sim_device_wake). The success checks look at the last
 * conversation only: an earlier one may have been ended by the server
 * (a gateway restart, say) before its turns were done.
 */
void gw_sim_dev_conversation_over(struct gw_sim_device *d)
{
    uint32_t sessions = d->o.sessions > 0 ? d->o.sessions : 1;

    /* An idle device sleeps again after each conversation, until stopped. */
    bool last = d->o.idle ? d->stopped : d->r.sessions >= sessions;

    if (d->finished || last) {
        gw_sim_dev_finish(d);
        return;
    }
    uv_timer_stop(&d->watchdog);
    uv_timer_stop(&d->play_timer);
    d->q_len = 0;
    d->playing = false;
    d->state = ST_ASLEEP;
    if (d->o.idle) {
        gw_sim_dev_event(d,
                         "conversation %" PRIu32
                         " over; idle, waiting for a wake-up (SIGUSR1)",
                         d->r.sessions);
        return;
    }
    gw_sim_dev_event(d,
                     "conversation %" PRIu32 " of %" PRIu32
                     " over; waiting for a wake-up (SIGUSR1)",
                     d->r.sessions, sessions);
}

void gw_sim_device_wake(struct gw_sim_device *d)
{
    if (d == NULL || d->finished || d->closing || d->state != ST_ASLEEP) {
        return;
    }
    /* What the checks judge starts again with this conversation. */
    d->turn = 0;
    d->turn_frame = 0;
    d->turn_played = 0;
    d->final_turn = false;
    d->stop_pending = false;
    d->aborted = false;
    d->stop_ns = 0;
    d->r.turns_done = 0;
    d->r.stt_count = 0;
    d->r.tts_start = 0;
    d->r.tts_stop = 0;
    d->r.down_played = 0;
    d->r.goodbye_received = false;
    d->r.goodbye_sent = false;
    gw_sim_dev_event(d, "woken up");
    gw_sim_dev_send_hello(d);
}

void gw_sim_dev_on_channel_timeout(uv_timer_t *t)
{
    struct gw_sim_device *d = t->data;

    if (!d->closing && !d->finished) {
        gw_sim_dev_fail(d,
                        "channel timeout: nothing received for %" PRIu32 " ms",
                        d->o.channel_timeout_ms);
    }
}

void gw_sim_device_stop(struct gw_sim_device *d)
{
    if (d == NULL || d->finished || d->closing) {
        return;
    }
    d->stopped = true;
    switch (d->state) {
    case ST_LISTENING:
    case ST_IDLE:
    case ST_SPEAKING:
        gw_sim_dev_goodbye(d);
        break;
    case ST_LINGER:
        break;
    case ST_ASLEEP:
        /* Between conversations, connected: nothing to close. */
        gw_sim_dev_event(d, "stopped while waiting for a wake-up");
        gw_sim_dev_finish(d);
        break;
    default:
        gw_sim_dev_fail(d, "stopped before the channel opened (state %s)",
                        gw_sim_dev_state_name(d->state));
        break;
    }
}
