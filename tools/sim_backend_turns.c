/*
 * The mock backend's side of a conversation, as the xiaozhi server runs
 * it: the hello, turns of uplink audio ended by frames or listen stop, and
 * the reply (stt, tts start, llm, paced TTS frames, tts stop).
 */
#include "tools/sim_backend_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

#include "codec/envelope.h"
#include "codec/opus_packet.h"
#include "common/log.h"

#define BAD_LOG_LIMIT  3 /* debug lines per connection for bad frames */
#define FRAME_NS       ((uint64_t)GW_SIM_BACKEND_FRAME_MS * 1000000u)
#define PCM_RX_SECONDS 4 /* pcm16: uplink PCM kept per turn for its tone */

/* ---- uplink counters ---- */

int gw_sim_be_rx_stats_reset(struct rx_stats *s)
{
    EVP_MD_CTX *sha = s->sha;

    memset(s, 0, sizeof(*s));
    s->sha = sha != NULL ? sha : EVP_MD_CTX_new();
    if (s->sha == NULL || EVP_DigestInit_ex(s->sha, EVP_sha256(), NULL) != 1) {
        return GW_ECRYPTO;
    }
    return 0;
}

static void rx_stats_add(struct rx_stats *s, uint32_t ts, const uint8_t *p,
                         size_t len, int samples, uint64_t now)
{
    if (s->frames == 0) {
        s->ts_first = ts;
        s->rx_first_ns = now;
    }
    s->frames++;
    s->bytes += len;
    s->samples += samples > 0 ? (uint64_t)samples : 0;
    s->ts_last = ts;
    s->ts_nonzero += ts != 0;
    s->rx_last_ns = now;
    EVP_DigestUpdate(s->sha, p, len);
}

/* Adds the counters to an event; the hash context is finished and reset. */
void gw_sim_be_rx_stats_report(cJSON *o, struct rx_stats *s)
{
    char hex[65];

    gw_sim_digest_hex(s->sha, hex);
    EVP_DigestInit_ex(s->sha, EVP_sha256(), NULL);
    cJSON_AddNumberToObject(o, "frames", (double)s->frames);
    cJSON_AddNumberToObject(o, "bytes", (double)s->bytes);
    cJSON_AddStringToObject(o, "sha256", hex);
    cJSON_AddNumberToObject(o, "samples_16k", (double)s->samples);
    cJSON_AddNumberToObject(o, "ts_first", s->ts_first);
    cJSON_AddNumberToObject(o, "ts_last", s->ts_last);
    cJSON_AddNumberToObject(o, "ts_nonzero", (double)s->ts_nonzero);
    cJSON_AddNumberToObject(o, "span_ms",
                            (double)(s->rx_last_ns - s->rx_first_ns) / 1e6);
}

/* ---- listening: uplink audio ---- */

/* pcm16: keeps the turn's uplink samples (the first PCM_RX_SECONDS). */
static void pcm_rx_add(struct conn *c, const uint8_t *p, size_t len)
{
    size_t cap = (size_t)c->up_rate * PCM_RX_SECONDS;

    if (c->pcm_rx == NULL &&
        (c->pcm_rx = malloc(cap * sizeof(*c->pcm_rx))) == NULL) {
        return;
    }
    for (size_t i = 0; i + 1 < len && c->pcm_n < cap; i += 2) {
        c->pcm_rx[c->pcm_n++] = (int16_t)(uint16_t)(p[i] | p[i + 1] << 8);
    }
}

static void start_turn(struct conn *c)
{
    c->pcm_n = 0;
    c->listen_pending = false;
    c->state = ST_LISTENING;
    c->turn++;
    gw_sim_be_rx_stats_reset(&c->turn_rx);
}

static void bad_frame(struct conn *c, uint64_t *counter, const char *what,
                      int rc)
{
    (*counter)++;
    if (*counter <= BAD_LOG_LIMIT) {
        GW_LOG(GW_LOG_DEBUG, c->subject, "uplink packet %llu: %s (%s)",
               (unsigned long long)c->rx_index, what, gw_strerror(rc));
    }
}

void gw_sim_be_on_binary(struct conn *c, const uint8_t *buf, size_t len)
{
    struct mock *m = c->m;
    const uint8_t *p = NULL;
    size_t plen = 0;
    uint32_t ts = 0;
    uint64_t now = uv_hrtime();
    int samples = 0;
    int rc;

    c->rx_index++;
    rc = gw_audio_frame_decode(c->framing, buf, len, &ts, &p, &plen);
    if (rc != 0) {
        bad_frame(c, &c->bad_frames, "bad framing", rc);
        return;
    }
    if (c->framing == GW_FRAMING_V2 &&
        (buf[0] | buf[1] | buf[2] | buf[3] | buf[4] | buf[5] | buf[6] |
         buf[7]) != 0) {
        c->hdr_nonzero++; /* gateways must write zeros there */
    }
    if (c->framing == GW_FRAMING_PCM16) {
        /* PCM: whole 16-bit samples, nothing to decode. */
        c->pcm_odd += plen % 2;
        samples = (int)(plen / 2);
    } else if (m->opt.decode) {
        samples = plen > 0 ? opus_decode(m->dec, p, (opus_int32)plen, m->pcm,
                                         PCM_MAX, 0)
                           : OPUS_INVALID_PACKET;
    } else {
        samples = gw_opus_packet_sane(p, plen) ? 0 : OPUS_INVALID_PACKET;
    }
    if (samples < 0) {
        bad_frame(c, &c->bad_opus, "not a valid Opus packet", GW_EOPUS);
    }
    if (m->latency != NULL) {
        gw_sim_be_latency_line(m, "up", c, c->rx_index, ts, p, plen);
    }
    rx_stats_add(&c->all_rx, ts, p, plen, samples, now);
    if (c->state != ST_LISTENING) {
        c->outside++;
        return;
    }
    rx_stats_add(&c->turn_rx, ts, p, plen, samples, now);
    if (c->framing == GW_FRAMING_PCM16) {
        pcm_rx_add(c, p, plen);
    }
    if (m->opt.turn_frames > 0 &&
        c->turn_rx.frames >= (uint64_t)m->opt.turn_frames) {
        gw_sim_be_end_turn(c, "frames");
    }
}

/* ---- speaking: stt, tts, paced downlink ---- */

static void queue_tts(struct conn *c, const char *state, const char *text)
{
    cJSON *o = gw_sim_be_msg_new("tts");

    cJSON_AddStringToObject(o, "state", state);
    if (text != NULL) {
        cJSON_AddStringToObject(o, "text", text);
    }
    gw_sim_be_queue_msg(c, o, strcmp(state, "stop") == 0);
}

static void queue_stop(struct conn *c)
{
    if (c->stop_queued) {
        return;
    }
    c->stop_queued = true;
    uv_timer_stop(&c->pace_timer);
    queue_tts(c, "stop", NULL);
}

static void on_pace(uv_timer_t *t);

/* Frame i is due at t0 for i < PREBUFFER, else (i - PREBUFFER + 1) frames
 * later: the server's pre-buffer, then real time. */
static void release_due(struct conn *c)
{
    uint64_t el = uv_hrtime() - c->tts_t0;
    uint64_t due = GW_SIM_BACKEND_PREBUFFER + el / FRAME_NS;

    if (!c->m->opt.pace || due > c->tts_total) {
        due = c->tts_total;
    }
    c->tts_released = (uint32_t)due;
    if (due < c->tts_total) {
        uint64_t at = (due - GW_SIM_BACKEND_PREBUFFER + 1) * FRAME_NS;
        uv_timer_start(&c->pace_timer, on_pace, (at - el + 999999) / 1000000,
                       0);
    }
    gw_sim_be_pump(c);
}

static void on_pace(uv_timer_t *t)
{
    struct conn *c = t->data;

    if (c->wsi == NULL || c->state != ST_SPEAKING) {
        return;
    }
    if (c->tts_sent >= c->tts_total) {
        queue_stop(c); /* the playout delay is over */
        return;
    }
    release_due(c);
}

/*
 * A sentence_start as firmware 2.4 takes it with glyph_push (up to 64
 * glyphs of base64 bitmaps), grown to about bytes; its length and hash go
 * to a "big" event, so a test can compare what the device received.
 */
static void queue_glyphs(struct conn *c, const char *text, uint32_t k)
{
    static const char b64[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t want = (size_t)c->m->opt.glyph_bytes, each;
    uint32_t x = (uint32_t)c->id * 2654435761u ^ c->turn * 40503u ^ k;
    cJSON *o = gw_sim_be_msg_new("tts"), *gp, *list, *ev;
    char *bitmap, *s;
    char hex[65] = "";

    cJSON_AddStringToObject(o, "state", "sentence_start");
    cJSON_AddStringToObject(o, "text", text);
    gp = cJSON_AddObjectToObject(o, "glyph_push");
    cJSON_AddNumberToObject(gp, "v", 1);
    cJSON_AddStringToObject(gp, "bundle", "sim");
    cJSON_AddNumberToObject(gp, "size", 16);
    cJSON_AddNumberToObject(gp, "bpp", 4);
    list = cJSON_AddArrayToObject(gp, "glyphs");
    cJSON_AddStringToObject(o, "session_id", c->sid);
    /* 64 glyphs of about 110 bytes of members each, then the bitmaps. */
    each = want > 64 * 110 ? (want - 64 * 110) / 64 : 4;
    each -= each % 4;
    bitmap = malloc(each + 1);
    for (int g = 0; g < 64 && bitmap != NULL && list != NULL; g++) {
        cJSON *gl = cJSON_CreateObject();
        for (size_t i = 0; i < each; i++) {
            x = x * 1103515245u + 12345u;
            bitmap[i] = b64[(x >> 16) & 63];
        }
        bitmap[each] = '\0';
        cJSON_AddNumberToObject(gl, "codepoint", 0x4e00 + g);
        cJSON_AddNumberToObject(gl, "adv_w", 16);
        cJSON_AddNumberToObject(gl, "box_w", 16);
        cJSON_AddNumberToObject(gl, "box_h", 16);
        cJSON_AddNumberToObject(gl, "ofs_x", 0);
        cJSON_AddNumberToObject(gl, "ofs_y", -2);
        cJSON_AddStringToObject(gl, "bitmap", bitmap);
        cJSON_AddItemToArray(list, gl);
    }
    free(bitmap);
    s = cJSON_PrintUnformatted(o);
    ev = gw_sim_be_ev_new("big", c);
    if (s != NULL) {
        unsigned char h[32];
        SHA256((const unsigned char *)s, strlen(s), h);
        gw_sim_hex32(h, hex);
        cJSON_AddNumberToObject(ev, "bytes", (double)strlen(s));
    }
    cJSON_AddNumberToObject(ev, "turn", c->turn);
    cJSON_AddNumberToObject(ev, "index", k);
    cJSON_AddStringToObject(ev, "sha256", hex);
    gw_sim_be_ev_emit(c->m, ev);
    cJSON_free(s);
    gw_sim_be_queue_json(c, o, false);
}

static void start_speaking(struct conn *c, uint64_t frames)
{
    char text[96];
    cJSON *o;

    c->state = ST_SPEAKING;
    c->tts_total = (uint32_t)c->m->opt.tts_frames;
    c->tts_sent = c->tts_released = c->tts_seq = 0;
    c->stop_queued = c->aborted = false;
    snprintf(text, sizeof(text), "turn %u: heard %llu frames", c->turn,
             (unsigned long long)frames);
    o = gw_sim_be_msg_new("stt");
    cJSON_AddStringToObject(o, "text", text);
    gw_sim_be_queue_msg(c, o, false);
    queue_tts(c, "start", NULL);
    o = gw_sim_be_msg_new("llm");
    cJSON_AddStringToObject(o, "text", "\xf0\x9f\x98\x80");
    cJSON_AddStringToObject(o, "emotion", "happy");
    gw_sim_be_queue_msg(c, o, false);
    snprintf(text, sizeof(text), "reply %u", c->turn);
    if (c->m->opt.glyph_bytes > 0) {
        for (int k = 0; k < c->m->opt.glyph_messages; k++) {
            queue_glyphs(c, text, (uint32_t)k);
        }
    } else {
        queue_tts(c, "sentence_start", text);
    }
    c->tts_t0 = uv_hrtime();
    if (c->tts_total == 0) {
        queue_stop(c);
    } else {
        release_due(c);
    }
}

void gw_sim_be_end_turn(struct conn *c, const char *trigger)
{
    cJSON *o = gw_sim_be_ev_new("turn", c);
    uint64_t frames = c->turn_rx.frames;

    cJSON_AddNumberToObject(o, "turn", c->turn);
    cJSON_AddStringToObject(o, "trigger", trigger);
    cJSON_AddStringToObject(o, "mode", c->mode);
    gw_sim_be_rx_stats_report(o, &c->turn_rx);
    if (c->framing == GW_FRAMING_PCM16) {
        /* What the gateway decoded for us: the device's tone, if any. */
        double purity = 0;
        double hz = gw_sim_tone_hz(c->pcm_rx, c->pcm_n, c->up_rate, &purity);
        cJSON_AddNumberToObject(o, "pcm_rate", c->up_rate);
        cJSON_AddNumberToObject(o, "pcm_samples", (double)c->pcm_n);
        cJSON_AddNumberToObject(o, "pcm_hz", hz);
        cJSON_AddNumberToObject(o, "pcm_purity", purity);
        cJSON_AddNumberToObject(o, "pcm_odd", (double)c->pcm_odd);
    }
    gw_sim_be_ev_emit(c->m, o);
    gw_log(GW_LOG_INFO, c->subject, "turn %u ended (%s) after %llu frames",
           c->turn, trigger, (unsigned long long)frames);
    if (strcmp(trigger, "close") != 0) {
        start_speaking(c, frames);
    }
}

/* The tts stop went out: report the turn, then close or listen again. */
void gw_sim_be_tts_finished(struct conn *c)
{
    cJSON *o = gw_sim_be_ev_new("tts", c);
    char hex[65];

    gw_sim_hex32(c->m->tts.prefix[c->tts_sent], hex);
    cJSON_AddNumberToObject(o, "turn", c->turn);
    cJSON_AddNumberToObject(o, "frames", c->tts_sent);
    cJSON_AddStringToObject(o, "sha256", hex);
    cJSON_AddBoolToObject(o, "paced", c->m->opt.pace);
    cJSON_AddBoolToObject(o, "aborted", c->aborted);
    cJSON_AddNumberToObject(o, "elapsed_ms",
                            (double)(uv_hrtime() - c->tts_t0) / 1e6);
    gw_sim_be_ev_emit(c->m, o);
    c->state = ST_IDLE;
    c->turns_done++;
    if (c->m->opt.close_after_turns > 0 &&
        c->turns_done >= (uint32_t)c->m->opt.close_after_turns) {
        gw_log(GW_LOG_INFO, c->subject,
               "closing after %u turns, without goodbye", c->turns_done);
        c->close_now = true;
    } else if (c->listen_pending) {
        start_turn(c);
    }
}

/*
 * pcm16: frame i of the reply as PCM of a steady tone, in messages of 3/4
 * and 5/4 of a frame by turns, so that the gateway must buffer and cut.
 */
static int send_pcm(struct conn *c)
{
    struct mock *m = c->m;
    uint32_t i = c->tts_sent;
    size_t spf = (size_t)m->opt.tts_rate * GW_SIM_BACKEND_FRAME_MS / 1000;
    size_t n = i % 2 == 0 ? spf * 3 / 4 : spf * 5 / 4;
    uint8_t *p = m->tx + LWS_PRE;

    if (i + 1 == c->tts_total && i % 2 == 0) {
        n = spf; /* an odd count of frames ends on a whole one */
    }
    for (size_t k = 0; k < n; k++) {
        double x = (double)(c->pcm_tx_pos + k) / m->opt.tts_rate;
        uint16_t v = (uint16_t)(int16_t)lrint(
            8000.0 * sin(2.0 * M_PI * m->opt.pcm_tone_hz * x));
        p[2 * k] = (uint8_t)v;
        p[2 * k + 1] = (uint8_t)(v >> 8);
    }
    if (lws_write(c->wsi, p, 2 * n, LWS_WRITE_BINARY) < 0) {
        return -1;
    }
    c->pcm_tx_pos += n;
    return 0;
}

/* One v2/v3/raw binary frame from the precomputed TTS packets. */
static int send_opus(struct conn *c, uint32_t ts, const uint8_t *p, size_t plen)
{
    uint8_t *h = c->m->tx + LWS_PRE;
    size_t hl = 0;

    if (gw_audio_frame_header(c->framing, ts, plen, h,
                              GW_AUDIO_FRAME_MAX_HEADER_LEN, &hl) != 0) {
        return -1;
    }
    if (c->framing == GW_FRAMING_V2) {
        /* The server's own type, length and sequence; gateways ignore it. */
        uint32_t seq = ++c->tts_seq;
        h[0] = 1;
        h[1] = 0;
        h[2] = (uint8_t)(plen >> 8);
        h[3] = (uint8_t)plen;
        h[4] = (uint8_t)(seq >> 24);
        h[5] = (uint8_t)(seq >> 16);
        h[6] = (uint8_t)(seq >> 8);
        h[7] = (uint8_t)seq;
    }
    memcpy(h + hl, p, plen);
    return lws_write(c->wsi, h, hl + plen, LWS_WRITE_BINARY) < 0 ? -1 : 0;
}

/* The next frame of the reply, as the connection's framing has it. */
int gw_sim_be_send_audio(struct conn *c)
{
    struct mock *m = c->m;
    uint32_t i = c->tts_sent;
    const uint8_t *p = m->tts.buf + m->tts.off[i];
    size_t plen = m->tts.len[i];
    uint32_t ts =
        (uint32_t)(gw_sim_unix_us() / 1000); /* the server's AEC key */

    if (c->framing == GW_FRAMING_PCM16 ? send_pcm(c) != 0
                                       : send_opus(c, ts, p, plen) != 0) {
        return -1;
    }
    c->tts_sent++;
    c->tts_all++;
    if (m->latency != NULL) {
        gw_sim_be_latency_line(m, "down", c, c->tts_all, ts, p, plen);
    }
    if (c->tts_sent == c->tts_total) {
        if (m->opt.tts_stop_delay_ms > 0) {
            uv_timer_start(&c->pace_timer, on_pace,
                           (uint64_t)m->opt.tts_stop_delay_ms, 0);
        } else {
            queue_stop(c);
        }
    }
    return 0;
}

/* ---- text from the gateway ---- */

const char *gw_sim_be_str_item(const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);

    return cJSON_IsString(it) ? it->valuestring : NULL;
}

void gw_sim_be_send_hello(struct conn *c)
{
    cJSON *o = gw_sim_be_msg_new("hello");
    cJSON *ap;

    /* The server also says version 1; the gateway reads only the rest. */
    cJSON_AddNumberToObject(o, "version", 1);
    cJSON_AddStringToObject(o, "transport", "websocket");
    cJSON_AddStringToObject(o, "session_id", c->sid);
    ap = cJSON_AddObjectToObject(o, "audio_params");
    cJSON_AddStringToObject(ap, "format",
                            c->framing == GW_FRAMING_PCM16 ? "pcm16" : "opus");
    if (!c->m->opt.no_hello_rate) {
        cJSON_AddNumberToObject(ap, "sample_rate", c->m->opt.tts_rate);
    }
    cJSON_AddNumberToObject(ap, "channels", 1);
    cJSON_AddNumberToObject(ap, "frame_duration", GW_SIM_BACKEND_FRAME_MS);
    gw_sim_be_queue_json(c, o, false);
    if (c->state == ST_WAIT_HELLO) {
        c->state = ST_IDLE;
    }
    if (c->m->opt.mcp && c->mcp == MCP_OFF) {
        gw_sim_be_mcp_start(c);
    }
}

static void on_hello(struct conn *c, const cJSON *root)
{
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    const cJSON *feat = cJSON_GetObjectItemCaseSensitive(root, "features");
    const char *tr = gw_sim_be_str_item(root, "transport");
    const char *problem = NULL;
    cJSON *ev = gw_sim_be_ev_new("hello", c);

    if (!cJSON_IsNumber(ver) || ver->valuedouble != 2) {
        problem = "version is not 2";
    } else if (tr == NULL || strcmp(tr, "websocket") != 0) {
        problem = "transport is not websocket";
    } else if (!cJSON_IsObject(
                   cJSON_GetObjectItemCaseSensitive(root, "audio_params"))) {
        problem = "no audio_params object";
    } else if (feat != NULL && !cJSON_IsObject(feat)) {
        problem = "features is not an object";
    }
    c->dev_mcp = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(feat, "mcp"));
    /* pcm16: uplink PCM comes at the device's rate, which this names. */
    const cJSON *rate = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(root, "audio_params"), "sample_rate");
    c->up_rate = cJSON_IsNumber(rate) && rate->valuedouble >= 8000 &&
                         rate->valuedouble <= 48000
                     ? (int)rate->valuedouble
                     : 16000;
    cJSON_AddBoolToObject(ev, "ok", problem == NULL);
    if (problem != NULL) {
        cJSON_AddStringToObject(ev, "problem", problem);
    }
    cJSON_AddBoolToObject(ev, "again", c->hello_seen);
    cJSON_AddItemToObject(ev, "msg", cJSON_Duplicate(root, 1));
    gw_sim_be_ev_emit(c->m, ev);
    gw_log(GW_LOG_INFO, c->subject, "hello%s%s", problem ? ": " : "",
           problem ? problem : "");
    c->hello_seen = true;
    if (c->m->opt.no_hello || c->close_now) {
        return;
    }
    if (c->m->opt.hello_delay_ms > 0) {
        gw_sim_be_aux_start(c, AUX_HELLO, c->m->opt.hello_delay_ms);
    } else {
        gw_sim_be_send_hello(c);
    }
}

static void on_listen(struct conn *c, const cJSON *root)
{
    const char *state = gw_sim_be_str_item(root, "state");
    const char *mode = gw_sim_be_str_item(root, "mode");
    cJSON *ev = gw_sim_be_ev_new("listen", c);

    cJSON_AddItemToObject(ev, "msg", cJSON_Duplicate(root, 1));
    gw_sim_be_ev_emit(c->m, ev);
    if (state == NULL) {
        return;
    }
    if (strcmp(state, "start") == 0) {
        snprintf(c->mode, sizeof(c->mode), "%s", mode != NULL ? mode : "");
        if (c->state == ST_IDLE) {
            start_turn(c);
        } else if (c->state == ST_SPEAKING) {
            c->listen_pending = true; /* after the tts stop */
        }
    } else if (strcmp(state, "stop") == 0 && c->state == ST_LISTENING) {
        if (c->turn_rx.frames > 0) {
            gw_sim_be_end_turn(c, "stop");
        } else {
            c->state = ST_IDLE; /* nothing heard: the server stays quiet */
        }
    }
}

/* The server answers an abort with an immediate tts stop. */
static void on_abort(struct conn *c, const cJSON *root)
{
    cJSON *ev = gw_sim_be_ev_new("abort", c);

    cJSON_AddItemToObject(ev, "msg", cJSON_Duplicate(root, 1));
    gw_sim_be_ev_emit(c->m, ev);
    if (c->state == ST_SPEAKING && !c->stop_queued) {
        c->aborted = true;
        c->tts_total = c->tts_released = c->tts_sent;
        queue_stop(c);
    }
}

void gw_sim_be_on_text(struct conn *c, const char *buf, size_t len)
{
    struct gw_envelope env;
    int rc = gw_envelope_parse(buf, len, GW_SIM_BACKEND_MAX_MESSAGE, &env);
    cJSON *ev;

    if (rc != 0) {
        ev = gw_sim_be_ev_new("bad_text", c);
        cJSON_AddStringToObject(ev, "error", gw_strerror(rc));
        gw_sim_be_add_text(ev, "text", buf, len);
        gw_sim_be_ev_emit(c->m, ev);
        return;
    }
    if (c->state == ST_WAIT_HELLO && env.kind != GW_MSG_HELLO) {
        c->before_hello++;
    }
    switch (env.kind) {
    case GW_MSG_HELLO:
        on_hello(c, env.root);
        break;
    case GW_MSG_LISTEN:
        on_listen(c, env.root);
        break;
    case GW_MSG_ABORT:
        on_abort(c, env.root);
        break;
    case GW_MSG_MCP:
        gw_sim_be_on_mcp(c, env.root);
        break;
    default:
        /* goodbye included: the gateway should close instead of relaying. */
        c->goodbye_text |= env.kind == GW_MSG_GOODBYE;
        ev = gw_sim_be_ev_new("rx", c);
        cJSON_AddStringToObject(ev, "type", env.type);
        cJSON_AddItemToObject(ev, "msg", cJSON_Duplicate(env.root, 1));
        gw_sim_be_ev_emit(c->m, ev);
        break;
    }
    gw_envelope_free(&env);
}
