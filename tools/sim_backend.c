/*
 * hybridgw-sim backend: a mock of the xiaozhi server's gateway endpoint
 * (PROTOCOL.md sections 5-7). Each observation becomes one JSON line
 * (--events) so tests and benchmarks can check what the gateway delivered.
 */
#include "tools/sim_backend.h"

#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <libwebsockets.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <opus/opus.h>
#include <uv.h>

#include "codec/audio_frame.h"
#include "codec/envelope.h"
#include "codec/opus_packet.h"
#include "codec/utf8.h"
#include "crypto/credential.h"
#include "gateway/error.h"
#include "gateway/log.h"
#include "tools/sim.h"

#define SID_LEN        36   /* uuid4 text */
#define HDR_MAX        256  /* longest header value kept */
#define URI_MAX        512  /* longest path or query kept */
#define RX_BUFFER      2048 /* lws per-connection rx chunk */
#define SUBJECT_MAX    128  /* log prefix */
#define BAD_LOG_LIMIT  3    /* debug lines per connection for bad frames */
#define PCM_MAX        5760 /* 120 ms at 48 kHz: any packet fits */
#define FRAME_NS       ((uint64_t)GW_SIM_BACKEND_FRAME_MS * 1000000u)
#define MCP_INIT_ID    1 /* the xiaozhi server's fixed ids */
#define MCP_TOOLS_ID   2
#define TEXT_NO_DEVICE "port ok: no device-id"
#define TEXT_AUTH_FAIL "auth failed"

enum auth_scheme { AUTH_NONE, AUTH_BEARER, AUTH_HMAC };

/* The command line, validated. */
struct options {
    char host[128];
    int port;
    const char *cert, *key;  /* both set: wss:// */
    enum auth_scheme auth;   /* upgrade check */
    const char *auth_secret; /* token or HMAC secret */
    bool auth_text;          /* refuse like the server: text, then close */
    int framing;             /* -1 auto, else enum gw_framing */
    bool no_hello;           /* never answer the hello */
    int hello_delay_ms;      /* answer it late */
    int turn_frames;         /* uplink frames that end a turn; 0: stop only */
    int tts_frames;          /* downlink frames per turn */
    int tts_rate;            /* Hz of the TTS Opus stream */
    int tts_stop_delay_ms;   /* after the last frame, before tts stop */
    bool pace;               /* real-time pacing like the server */
    bool decode;             /* decode every uplink packet with libopus */
    int close_after_turns;   /* 0: never close */
    bool mcp;                /* act as the server's MCP client */
    bool mcp_notify;         /* also send notifications/initialized */
    int mcp_list_delay_ms;   /* the server waits 1 s before tools/list */
    int mcp_timeout_ms;      /* per tools/call */
    int n_calls;             /* --mcp-call count */
    char *call_name[GW_SIM_BACKEND_MAX_MCP_CALL];
    cJSON *call_args[GW_SIM_BACKEND_MAX_MCP_CALL]; /* owned objects */
    int exit_after_sessions;                       /* 0: run until a signal */
    int max_conns;                                 /* fd budget for lws */
    const char *events_path, *latency_path, *dump_path;
};

/* The TTS audio, encoded once at startup and shared by every session. */
struct tts {
    uint8_t *buf;          /* all packets back to back */
    uint32_t *off;         /* packet i starts at buf + off[i] */
    uint16_t *len;         /* and has len[i] bytes */
    uint8_t (*prefix)[32]; /* prefix[k]: SHA-256 of packets 0..k-1 */
    int n;                 /* packets */
};

/* The process: one loop, one lws context, all connections. */
struct mock {
    uv_loop_t loop;
    struct options opt;
    struct tts tts;
    struct lws_context *ctx;
    uv_signal_t sig_int, sig_term;
    uv_timer_t stop_timer;   /* leaves lws callbacks before shutdown */
    FILE *events;            /* JSON lines, or NULL */
    FILE *latency;           /* per-packet times, or NULL */
    OpusDecoder *dec;        /* shared: validity, not audio quality */
    opus_int16 pcm[PCM_MAX]; /* decoder output, discarded */
    uint8_t *tx;             /* LWS_PRE + header + largest payload */
    uint64_t next_conn;      /* connection numbers start at 1 */
    uint64_t conns_open, conns_closed;
    bool stopping;
};

/* One queued text message, with the headroom lws_write needs. */
struct out_msg {
    struct out_msg *next;
    bool tts_stop; /* writing it ends the turn */
    size_t len;
    unsigned char buf[]; /* LWS_PRE bytes, then the text */
};

enum conn_state { ST_WAIT_HELLO, ST_IDLE, ST_LISTENING, ST_SPEAKING };
enum aux_job { AUX_NONE, AUX_HELLO, AUX_MCP_LIST, AUX_MCP_CALL };
enum mcp_stage {
    MCP_OFF,
    MCP_INIT,
    MCP_LIST_WAIT,
    MCP_LIST,
    MCP_CALL,
    MCP_DONE
};

/* Uplink counters of one turn, or of the whole connection. */
struct rx_stats {
    EVP_MD_CTX *sha;   /* over the Opus payloads, concatenated */
    uint64_t frames;   /* good frames hashed */
    uint64_t bytes;    /* their payload bytes */
    uint64_t samples;  /* decoded at 16 kHz */
    uint32_t ts_first; /* timestamps as received */
    uint32_t ts_last;
    uint64_t ts_nonzero;
    uint64_t rx_first_ns, rx_last_ns; /* CLOCK_MONOTONIC */
};

/* One WebSocket: a conversation with one gateway session. */
struct conn {
    struct mock *m;
    struct lws *wsi; /* NULL once lws closed it */
    uint64_t id;
    uv_timer_t pace_timer; /* TTS pacing and the delay before tts stop */
    uv_timer_t aux_timer;  /* hello delay, MCP delays and timeouts */
    enum aux_job aux;
    int handles_open;
    enum conn_state state;
    enum gw_framing framing;
    char sid[SID_LEN + 1];
    char dev[64], cid[64]; /* device-id and client-id, for the CSV log */
    char subject[SUBJECT_MAX];
    uint8_t *rx; /* reassembly of fragmented messages */
    size_t rx_len, rx_cap;
    struct out_msg *q_head, *q_tail;
    bool hello_seen, dev_mcp, listen_pending, close_now, closed_by_mock;
    bool peer_closed, goodbye_text;
    int peer_code, mock_code; /* close status each side sent */
    char peer_reason[64];
    uint64_t bad_frames, bad_opus, hdr_nonzero, outside, before_hello;
    uint64_t rx_index; /* uplink packets received, from 1 */
    struct rx_stats turn_rx, all_rx;
    uint32_t turn; /* turns begun */
    uint32_t turns_done;
    char mode[16]; /* listen mode of the turn */
    uint32_t tts_total, tts_sent, tts_released, tts_seq, tts_all;
    uint64_t tts_t0;
    bool stop_queued, aborted;
    enum mcp_stage mcp;
    uint32_t mcp_next_id; /* tools/call ids, from 1 like the server */
    uint32_t mcp_call_id;
    int mcp_call_idx;
    uint32_t mcp_pages;
    cJSON *mcp_tools; /* names gathered over the pages */
};

/* lws per-session data: only the pointer, the conn outlives the wsi. */
struct pss {
    struct conn *conn;
};

enum {
    H_DEVICE_ID,
    H_CLIENT_ID,
    H_PROTOCOL_VERSION,
    H_AUTHORIZATION,
    H_XFF,
    H_COUNT
};

/* What the upgrade request said. */
struct upgrade {
    char val[H_COUNT][HDR_MAX];
    bool present[H_COUNT];
    char path[URI_MAX], query[URI_MAX], peer[64];
};

static const char *const hdr_names[H_COUNT] = {
    "device-id", "client-id", "protocol-version", "authorization",
    "x-forwarded-for"};

static const char *const framing_names[] = {"v2", "v3", "raw"};

static void pump(struct conn *c);
static void start_turn(struct conn *c);
static void mcp_start(struct conn *c);
static void on_aux(uv_timer_t *t);

/* ---- time, text and events ---- */

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Peer text into an event: invalid UTF-8 would break the JSON line. */
static void add_text(cJSON *o, const char *key, const char *s, size_t len)
{
    char buf[URI_MAX];

    if (len >= sizeof(buf)) {
        len = sizeof(buf) - 1;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (!gw_utf8_valid(buf, len)) {
        for (size_t i = 0; i < len; i++) {
            buf[i] = (unsigned char)buf[i] < 0x80 ? buf[i] : '?';
        }
    }
    cJSON_AddStringToObject(o, key, buf);
}

static void hex32(const uint8_t *d, char out[65])
{
    static const char digits[] = "0123456789abcdef";

    for (int i = 0; i < 32; i++) {
        out[2 * i] = digits[d[i] >> 4];
        out[2 * i + 1] = digits[d[i] & 15];
    }
    out[64] = '\0';
}

static cJSON *ev_new(const char *name, const struct conn *c)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddNumberToObject(o, "t", (double)wall_ms());
    cJSON_AddStringToObject(o, "ev", name);
    if (c != NULL) {
        cJSON_AddNumberToObject(o, "conn", (double)c->id);
        cJSON_AddStringToObject(o, "sid", c->sid);
    }
    return o;
}

static void ev_emit(struct mock *m, cJSON *o)
{
    char *s;

    if (o == NULL) {
        return;
    }
    if (m->events != NULL && (s = cJSON_PrintUnformatted(o)) != NULL) {
        fputs(s, m->events);
        fputc('\n', m->events);
        fflush(m->events);
        cJSON_free(s);
    }
    cJSON_Delete(o);
}

/*
 * Per-packet CSV line, in the load generator's clock and hash (wall-clock
 * microseconds, FNV-1a of the Opus payload) so the two logs can be joined
 * per device, in order: dir,session_id,device_id,client_id,n,unix_us,ts,
 * len,fnv32. The stdio buffer makes this a memcpy most of the time.
 */
static void latency_line(struct mock *m, const char *dir, const struct conn *c,
                         uint64_t n, uint32_t ts, const uint8_t *p, size_t len)
{
    uint32_t h = 2166136261u;
    struct timespec now;

    for (size_t i = 0; i < len; i++) {
        h = (h ^ p[i]) * 16777619u;
    }
    clock_gettime(CLOCK_REALTIME, &now);
    fprintf(m->latency, "%s,%s,%s,%s,%llu,%llu,%u,%zu,%08x\n", dir, c->sid,
            c->dev, c->cid, (unsigned long long)n,
            (unsigned long long)now.tv_sec * 1000000u +
                (unsigned long long)now.tv_nsec / 1000u,
            ts, len, h);
}

/* ---- TTS audio: encoded once ---- */

static int tts_encode(struct tts *t, OpusEncoder *enc, int rate)
{
    int spf = rate * GW_SIM_BACKEND_FRAME_MS / 1000;
    opus_int16 pcm[PCM_MAX];
    uint8_t pkt[GW_AUDIO_FRAME_MAX_PAYLOAD];
    uint32_t used = 0;

    for (int i = 0; i < t->n; i++) {
        /* A tone that steps each frame, so every packet differs. */
        double f = 220.0 + 30.0 * (i % 12);
        for (int j = 0; j < spf; j++) {
            double x = (double)(i * spf + j) / rate;
            pcm[j] = (opus_int16)(6000.0 * sin(2.0 * M_PI * f * x) +
                                  2000.0 * sin(2.0 * M_PI * 2.5 * f * x));
        }
        int n = opus_encode(enc, pcm, spf, pkt, (opus_int32)sizeof(pkt));
        if (n <= 0) {
            return GW_EOPUS;
        }
        t->off[i] = used;
        t->len[i] = (uint16_t)n;
        memcpy(t->buf + used, pkt, (size_t)n);
        used += (uint32_t)n;
    }
    return 0;
}

static int tts_hash(struct tts *t)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new(), *tmp = EVP_MD_CTX_new();
    int rc = ctx != NULL && tmp != NULL &&
                     EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1
                 ? 0
                 : GW_ECRYPTO;

    for (int k = 0; rc == 0 && k <= t->n; k++) {
        if (k > 0 &&
            EVP_DigestUpdate(ctx, t->buf + t->off[k - 1], t->len[k - 1]) != 1) {
            rc = GW_ECRYPTO;
        } else if (EVP_MD_CTX_copy_ex(tmp, ctx) != 1 ||
                   EVP_DigestFinal_ex(tmp, t->prefix[k], NULL) != 1) {
            rc = GW_ECRYPTO;
        }
    }
    EVP_MD_CTX_free(ctx);
    EVP_MD_CTX_free(tmp);
    return rc;
}

static void tts_free(struct tts *t)
{
    free(t->buf);
    free(t->off);
    free(t->len);
    free(t->prefix);
    memset(t, 0, sizeof(*t));
}

static int tts_build(struct tts *t, int n, int rate)
{
    int err = 0;
    OpusEncoder *enc =
        opus_encoder_create(rate, 1, OPUS_APPLICATION_AUDIO, &err);
    int rc;

    if (enc == NULL) {
        return GW_EOPUS;
    }
    opus_encoder_ctl(enc, OPUS_SET_BITRATE(24000));
    t->n = n;
    t->buf = malloc((size_t)n * GW_AUDIO_FRAME_MAX_PAYLOAD + 1);
    t->off = calloc((size_t)n + 1, sizeof(*t->off));
    t->len = calloc((size_t)n + 1, sizeof(*t->len));
    t->prefix = calloc((size_t)n + 1, sizeof(*t->prefix));
    if (t->buf == NULL || t->off == NULL || t->len == NULL ||
        t->prefix == NULL) {
        rc = GW_ENOMEM;
    } else if ((rc = tts_encode(t, enc, rate)) == 0) {
        rc = tts_hash(t);
    }
    opus_encoder_destroy(enc);
    if (rc != 0) {
        tts_free(t);
    }
    return rc;
}

/* --dump-frames: u16 big-endian length, then the packet, per frame. */
static int tts_dump(const struct tts *t, const char *path)
{
    FILE *f = fopen(path, "wb");
    int ok = f != NULL;

    for (int i = 0; ok && i < t->n; i++) {
        uint8_t be[2] = {(uint8_t)(t->len[i] >> 8), (uint8_t)t->len[i]};
        ok = fwrite(be, 1, 2, f) == 2 &&
             fwrite(t->buf + t->off[i], 1, t->len[i], f) == t->len[i];
    }
    if (f != NULL && fclose(f) != 0) {
        ok = 0;
    }
    if (!ok) {
        fprintf(stderr, "hybridgw-sim backend: cannot write %s\n", path);
    }
    return ok ? 0 : 1;
}

/* ---- connection lifetime and output queue ---- */

static int rx_stats_reset(struct rx_stats *s)
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
static void rx_stats_report(cJSON *o, struct rx_stats *s)
{
    uint8_t d[32];
    char hex[65] = "";

    if (EVP_DigestFinal_ex(s->sha, d, NULL) == 1) {
        hex32(d, hex);
    }
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

static void conn_free(struct conn *c)
{
    while (c->q_head != NULL) {
        struct out_msg *q = c->q_head;
        c->q_head = q->next;
        free(q);
    }
    EVP_MD_CTX_free(c->turn_rx.sha);
    EVP_MD_CTX_free(c->all_rx.sha);
    cJSON_Delete(c->mcp_tools);
    free(c->rx);
    free(c);
}

static void on_timer_closed(uv_handle_t *h)
{
    struct conn *c = h->data;

    if (--c->handles_open == 0) {
        conn_free(c);
    }
}

static struct conn *conn_create(struct mock *m, struct lws *wsi)
{
    struct conn *c = calloc(1, sizeof(*c));
    uint8_t u[16];

    if (c == NULL) {
        return NULL;
    }
    c->m = m;
    c->wsi = wsi;
    c->id = ++m->next_conn;
    c->mcp_next_id = 1;
    if (RAND_bytes(u, sizeof(u)) != 1 || rx_stats_reset(&c->turn_rx) != 0 ||
        rx_stats_reset(&c->all_rx) != 0) {
        conn_free(c);
        return NULL;
    }
    u[6] = (uint8_t)((u[6] & 0x0f) | 0x40); /* uuid4, as the server uses */
    u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
    snprintf(c->sid, sizeof(c->sid),
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
             "%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10],
             u[11], u[12], u[13], u[14], u[15]);
    uv_timer_init(&m->loop, &c->pace_timer);
    uv_timer_init(&m->loop, &c->aux_timer);
    c->pace_timer.data = c;
    c->aux_timer.data = c;
    c->handles_open = 2;
    m->conns_open++;
    return c;
}

/* lws is done with the wsi: the timers close, then the memory goes. */
static void conn_release(struct conn *c)
{
    c->wsi = NULL;
    c->m->conns_open--;
    uv_close((uv_handle_t *)&c->pace_timer, on_timer_closed);
    uv_close((uv_handle_t *)&c->aux_timer, on_timer_closed);
}

static void queue_text(struct conn *c, const char *s, size_t len, bool tts_stop)
{
    struct out_msg *q = malloc(sizeof(*q) + LWS_PRE + len);

    if (q == NULL) {
        gw_log(GW_LOG_ERROR, c->subject, "out of memory, message dropped");
        return;
    }
    q->next = NULL;
    q->tts_stop = tts_stop;
    q->len = len;
    memcpy(q->buf + LWS_PRE, s, len);
    if (c->q_tail != NULL) {
        c->q_tail->next = q;
    } else {
        c->q_head = q;
    }
    c->q_tail = q;
    pump(c);
}

/* Serialises and frees o. */
static void queue_json(struct conn *c, cJSON *o, bool tts_stop)
{
    char *s = cJSON_PrintUnformatted(o);

    if (s != NULL) {
        queue_text(c, s, strlen(s), tts_stop);
        cJSON_free(s);
    }
    cJSON_Delete(o);
}

/* {"type":T,...,"session_id":sid}: the server tags what it sends. */
static cJSON *msg_new(const char *type)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "type", type);
    return o;
}

static void queue_msg(struct conn *c, cJSON *o, bool tts_stop)
{
    cJSON_AddStringToObject(o, "session_id", c->sid);
    queue_json(c, o, tts_stop);
}

static void queue_tts(struct conn *c, const char *state, const char *text)
{
    cJSON *o = msg_new("tts");

    cJSON_AddStringToObject(o, "state", state);
    if (text != NULL) {
        cJSON_AddStringToObject(o, "text", text);
    }
    queue_msg(c, o, strcmp(state, "stop") == 0);
}

static bool has_output(const struct conn *c)
{
    return c->q_head != NULL || c->close_now ||
           (c->state == ST_SPEAKING && c->tts_sent < c->tts_released);
}

static void pump(struct conn *c)
{
    if (c->wsi != NULL && has_output(c)) {
        lws_callback_on_writable(c->wsi);
    }
}

/* ---- speaking: stt, tts, paced downlink ---- */

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
    uint64_t el = mono_ns() - c->tts_t0;
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
    pump(c);
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
    o = msg_new("stt");
    cJSON_AddStringToObject(o, "text", text);
    queue_msg(c, o, false);
    queue_tts(c, "start", NULL);
    o = msg_new("llm");
    cJSON_AddStringToObject(o, "text", "\xf0\x9f\x98\x80");
    cJSON_AddStringToObject(o, "emotion", "happy");
    queue_msg(c, o, false);
    snprintf(text, sizeof(text), "reply %u", c->turn);
    queue_tts(c, "sentence_start", text);
    c->tts_t0 = mono_ns();
    if (c->tts_total == 0) {
        queue_stop(c);
    } else {
        release_due(c);
    }
}

static void end_turn(struct conn *c, const char *trigger)
{
    cJSON *o = ev_new("turn", c);
    uint64_t frames = c->turn_rx.frames;

    cJSON_AddNumberToObject(o, "turn", c->turn);
    cJSON_AddStringToObject(o, "trigger", trigger);
    cJSON_AddStringToObject(o, "mode", c->mode);
    rx_stats_report(o, &c->turn_rx);
    ev_emit(c->m, o);
    gw_log(GW_LOG_INFO, c->subject, "turn %u ended (%s) after %llu frames",
           c->turn, trigger, (unsigned long long)frames);
    if (strcmp(trigger, "close") != 0) {
        start_speaking(c, frames);
    }
}

/* The tts stop went out: report the turn, then close or listen again. */
static void tts_finished(struct conn *c)
{
    cJSON *o = ev_new("tts", c);
    char hex[65];

    hex32(c->m->tts.prefix[c->tts_sent], hex);
    cJSON_AddNumberToObject(o, "turn", c->turn);
    cJSON_AddNumberToObject(o, "frames", c->tts_sent);
    cJSON_AddStringToObject(o, "sha256", hex);
    cJSON_AddBoolToObject(o, "paced", c->m->opt.pace);
    cJSON_AddBoolToObject(o, "aborted", c->aborted);
    cJSON_AddNumberToObject(o, "elapsed_ms",
                            (double)(mono_ns() - c->tts_t0) / 1e6);
    ev_emit(c->m, o);
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

/* One v2/v3/raw binary frame from the precomputed TTS packets. */
static int send_audio(struct conn *c)
{
    struct mock *m = c->m;
    uint32_t i = c->tts_sent;
    const uint8_t *p = m->tts.buf + m->tts.off[i];
    size_t plen = m->tts.len[i], hl = 0;
    uint32_t ts = (uint32_t)wall_ms(); /* the server's AEC key */
    uint8_t *h = m->tx + LWS_PRE;

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
    if (lws_write(c->wsi, h, hl + plen, LWS_WRITE_BINARY) < 0) {
        return -1;
    }
    c->tts_sent++;
    c->tts_all++;
    if (m->latency != NULL) {
        latency_line(m, "down", c, c->tts_all, ts, p, plen);
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

/* LWS_CALLBACK_SERVER_WRITEABLE: one lws_write per call, as lws wants. */
static int on_writable(struct conn *c)
{
    struct out_msg *q = c->q_head;

    if (q != NULL) {
        bool stop = q->tts_stop;
        int n;

        c->q_head = q->next;
        if (c->q_head == NULL) {
            c->q_tail = NULL;
        }
        n = lws_write(c->wsi, q->buf + LWS_PRE, q->len, LWS_WRITE_TEXT);
        free(q);
        if (n < 0) {
            return -1;
        }
        if (stop) {
            tts_finished(c);
        }
    } else if (c->state == ST_SPEAKING && c->tts_sent < c->tts_released) {
        if (send_audio(c) != 0) {
            return -1;
        }
    } else if (c->close_now) {
        /*
         * Like the xiaozhi server: a plain close, never a goodbye. lws 4.1
         * drops the socket without a close frame when a writeable callback
         * returns -1; from the wsi timer callback it closes politely.
         */
        c->closed_by_mock = true;
        c->mock_code = LWS_CLOSE_STATUS_NORMAL;
        c->close_now = false;
        lws_close_reason(c->wsi, LWS_CLOSE_STATUS_NORMAL, NULL, 0);
        lws_set_timer_usecs(c->wsi, 1);
        return 0;
    }
    pump(c);
    return 0;
}

/* ---- listening: uplink audio ---- */

static void start_turn(struct conn *c)
{
    c->listen_pending = false;
    c->state = ST_LISTENING;
    c->turn++;
    rx_stats_reset(&c->turn_rx);
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

static void on_binary(struct conn *c, const uint8_t *buf, size_t len)
{
    struct mock *m = c->m;
    const uint8_t *p = NULL;
    size_t plen = 0;
    uint32_t ts = 0;
    uint64_t now = mono_ns();
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
    if (m->opt.decode) {
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
        latency_line(m, "up", c, c->rx_index, ts, p, plen);
    }
    rx_stats_add(&c->all_rx, ts, p, plen, samples, now);
    if (c->state != ST_LISTENING) {
        c->outside++;
        return;
    }
    rx_stats_add(&c->turn_rx, ts, p, plen, samples, now);
    if (m->opt.turn_frames > 0 &&
        c->turn_rx.frames >= (uint64_t)m->opt.turn_frames) {
        end_turn(c, "frames");
    }
}

/* ---- text from the gateway ---- */

static const char *str_item(const cJSON *o, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);

    return cJSON_IsString(it) ? it->valuestring : NULL;
}

static void send_hello(struct conn *c)
{
    cJSON *o = msg_new("hello");
    cJSON *ap;

    /* The server also says version 1; the gateway reads only the rest. */
    cJSON_AddNumberToObject(o, "version", 1);
    cJSON_AddStringToObject(o, "transport", "websocket");
    cJSON_AddStringToObject(o, "session_id", c->sid);
    ap = cJSON_AddObjectToObject(o, "audio_params");
    cJSON_AddStringToObject(ap, "format", "opus");
    cJSON_AddNumberToObject(ap, "sample_rate", c->m->opt.tts_rate);
    cJSON_AddNumberToObject(ap, "channels", 1);
    cJSON_AddNumberToObject(ap, "frame_duration", GW_SIM_BACKEND_FRAME_MS);
    queue_json(c, o, false);
    if (c->state == ST_WAIT_HELLO) {
        c->state = ST_IDLE;
    }
    if (c->m->opt.mcp && c->mcp == MCP_OFF) {
        mcp_start(c);
    }
}

/* ---- MCP client, as the xiaozhi server runs it ---- */

static void aux_start(struct conn *c, enum aux_job job, int ms)
{
    c->aux = job;
    uv_timer_start(&c->aux_timer, on_aux, (uint64_t)ms, 0);
}

static cJSON *rpc_new(uint32_t id, const char *method)
{
    cJSON *p = cJSON_CreateObject();

    cJSON_AddStringToObject(p, "jsonrpc", "2.0");
    if (id != 0) {
        cJSON_AddNumberToObject(p, "id", id);
    }
    cJSON_AddStringToObject(p, "method", method);
    return p;
}

/* {"type":"mcp","payload":p}: the server adds no session_id here. */
static void mcp_send(struct conn *c, cJSON *p)
{
    cJSON *ev = ev_new("mcp_tx", c);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(p, "id");
    cJSON *o = msg_new("mcp");

    if (cJSON_IsNumber(id)) {
        cJSON_AddNumberToObject(ev, "id", id->valuedouble);
    }
    cJSON_AddStringToObject(ev, "method", str_item(p, "method"));
    ev_emit(c->m, ev);
    cJSON_AddItemToObject(o, "payload", p);
    queue_json(c, o, false);
}

static void mcp_start(struct conn *c)
{
    cJSON *p, *params, *caps, *vision, *info;

    if (!c->dev_mcp) {
        c->mcp = MCP_DONE; /* the server also needs features.mcp */
        ev_emit(c->m, ev_new("mcp_skipped", c));
        return;
    }
    p = rpc_new(MCP_INIT_ID, "initialize");
    params = cJSON_AddObjectToObject(p, "params");
    cJSON_AddStringToObject(params, "protocolVersion", "2024-11-05");
    caps = cJSON_AddObjectToObject(params, "capabilities");
    cJSON_AddBoolToObject(cJSON_AddObjectToObject(caps, "roots"), "listChanged",
                          1);
    cJSON_AddObjectToObject(caps, "sampling");
    vision = cJSON_AddObjectToObject(caps, "vision");
    cJSON_AddStringToObject(vision, "url", GW_SIM_BACKEND_VISION_URL);
    cJSON_AddStringToObject(vision, "token", GW_SIM_BACKEND_VISION_TOKEN);
    info = cJSON_AddObjectToObject(params, "clientInfo");
    cJSON_AddStringToObject(info, "name", "XiaozhiClient");
    cJSON_AddStringToObject(info, "version", "1.0.0");
    c->mcp = MCP_INIT;
    mcp_send(c, p);
}

/* Every page of tools/list reuses id 2, like the server. */
static void mcp_list(struct conn *c, const char *cursor)
{
    cJSON *p = rpc_new(MCP_TOOLS_ID, "tools/list");

    if (cursor != NULL) {
        cJSON_AddStringToObject(cJSON_AddObjectToObject(p, "params"), "cursor",
                                cursor);
    }
    c->mcp = MCP_LIST;
    mcp_send(c, p);
}

/* tools/call ids come from a counter starting at 1: they collide with the
 * fixed initialize and tools/list ids on purpose, as with the server. */
static void mcp_next_call(struct conn *c)
{
    const struct options *o = &c->m->opt;
    cJSON *p, *params;
    int i = c->mcp_call_idx;

    if (i >= o->n_calls) {
        c->mcp = MCP_DONE;
        return;
    }
    c->mcp_call_idx++;
    c->mcp_call_id = c->mcp_next_id++;
    p = rpc_new(c->mcp_call_id, "tools/call");
    params = cJSON_AddObjectToObject(p, "params");
    cJSON_AddStringToObject(params, "name", o->call_name[i]);
    cJSON_AddItemToObject(params, "arguments",
                          cJSON_Duplicate(o->call_args[i], 1));
    c->mcp = MCP_CALL;
    mcp_send(c, p);
    aux_start(c, AUX_MCP_CALL, o->mcp_timeout_ms);
}

static void mcp_tools_page(struct conn *c, const cJSON *result)
{
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(result, "tools");
    const cJSON *t;
    const char *next;
    cJSON *ev;

    if (!cJSON_IsArray(tools)) {
        return; /* the server logs and waits: so do we */
    }
    c->mcp_pages++;
    if (c->mcp_tools == NULL) {
        c->mcp_tools = cJSON_CreateArray();
    }
    cJSON_ArrayForEach(t, tools)
    {
        const char *name = str_item(t, "name");
        cJSON_AddItemToArray(c->mcp_tools,
                             cJSON_CreateString(name != NULL ? name : ""));
    }
    next = str_item(result, "nextCursor");
    if (next != NULL && next[0] != '\0') {
        mcp_list(c, next);
        return;
    }
    ev = ev_new("mcp_tools", c);
    cJSON_AddNumberToObject(ev, "pages", c->mcp_pages);
    cJSON_AddNumberToObject(ev, "count", cJSON_GetArraySize(c->mcp_tools));
    cJSON_AddItemToObject(ev, "names", c->mcp_tools);
    c->mcp_tools = NULL;
    ev_emit(c->m, ev);
    mcp_next_call(c);
}

/* A device reply is matched to the request waiting for it, if any. */
static void on_mcp(struct conn *c, const cJSON *root)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "payload");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(p, "id");
    const cJSON *result = cJSON_GetObjectItemCaseSensitive(p, "result");
    bool answer = cJSON_IsNumber(id) &&
                  (result != NULL || cJSON_HasObjectItem(p, "error"));
    double v = cJSON_IsNumber(id) ? id->valuedouble : -1;
    const char *matched = "none";
    cJSON *ev = ev_new("mcp", c);

    if (answer && c->mcp == MCP_CALL && v == c->mcp_call_id) {
        matched = "tools/call";
    } else if (result != NULL && c->mcp == MCP_INIT && v == MCP_INIT_ID) {
        matched = "initialize";
    } else if (result != NULL && c->mcp == MCP_LIST && v == MCP_TOOLS_ID) {
        matched = "tools/list";
    }
    cJSON_AddStringToObject(ev, "matched", matched);
    cJSON_AddItemToObject(ev, "payload", cJSON_Duplicate(p, 1));
    ev_emit(c->m, ev);
    if (strcmp(matched, "tools/call") == 0) {
        uv_timer_stop(&c->aux_timer);
        c->aux = AUX_NONE;
        mcp_next_call(c);
    } else if (strcmp(matched, "initialize") == 0) {
        if (c->m->opt.mcp_notify) {
            mcp_send(c, rpc_new(0, "notifications/initialized"));
        }
        c->mcp = MCP_LIST_WAIT;
        if (c->m->opt.mcp_list_delay_ms > 0) {
            aux_start(c, AUX_MCP_LIST, c->m->opt.mcp_list_delay_ms);
        } else {
            mcp_list(c, NULL);
        }
    } else if (strcmp(matched, "tools/list") == 0) {
        mcp_tools_page(c, result);
    }
}

static void on_aux(uv_timer_t *t)
{
    struct conn *c = t->data;
    enum aux_job job = c->aux;
    cJSON *ev;

    c->aux = AUX_NONE;
    if (c->wsi == NULL) {
        return;
    }
    switch (job) {
    case AUX_HELLO:
        send_hello(c);
        break;
    case AUX_MCP_LIST:
        mcp_list(c, NULL);
        break;
    case AUX_MCP_CALL:
        ev = ev_new("mcp_timeout", c);
        cJSON_AddNumberToObject(ev, "id", c->mcp_call_id);
        ev_emit(c->m, ev);
        mcp_next_call(c);
        break;
    default:
        break;
    }
}

/* ---- text from the gateway, continued ---- */

static void on_hello(struct conn *c, const cJSON *root)
{
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    const cJSON *feat = cJSON_GetObjectItemCaseSensitive(root, "features");
    const char *tr = str_item(root, "transport");
    const char *problem = NULL;
    cJSON *ev = ev_new("hello", c);

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
    cJSON_AddBoolToObject(ev, "ok", problem == NULL);
    if (problem != NULL) {
        cJSON_AddStringToObject(ev, "problem", problem);
    }
    cJSON_AddBoolToObject(ev, "again", c->hello_seen);
    cJSON_AddItemToObject(ev, "msg", cJSON_Duplicate(root, 1));
    ev_emit(c->m, ev);
    gw_log(GW_LOG_INFO, c->subject, "hello%s%s", problem ? ": " : "",
           problem ? problem : "");
    c->hello_seen = true;
    if (c->m->opt.no_hello || c->close_now) {
        return;
    }
    if (c->m->opt.hello_delay_ms > 0) {
        aux_start(c, AUX_HELLO, c->m->opt.hello_delay_ms);
    } else {
        send_hello(c);
    }
}

static void on_listen(struct conn *c, const cJSON *root)
{
    const char *state = str_item(root, "state");
    const char *mode = str_item(root, "mode");
    cJSON *ev = ev_new("listen", c);

    cJSON_AddItemToObject(ev, "msg", cJSON_Duplicate(root, 1));
    ev_emit(c->m, ev);
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
            end_turn(c, "stop");
        } else {
            c->state = ST_IDLE; /* nothing heard: the server stays quiet */
        }
    }
}

/* The server answers an abort with an immediate tts stop. */
static void on_abort(struct conn *c, const cJSON *root)
{
    cJSON *ev = ev_new("abort", c);

    cJSON_AddItemToObject(ev, "msg", cJSON_Duplicate(root, 1));
    ev_emit(c->m, ev);
    if (c->state == ST_SPEAKING && !c->stop_queued) {
        c->aborted = true;
        c->tts_total = c->tts_released = c->tts_sent;
        queue_stop(c);
    }
}

static void on_text(struct conn *c, const char *buf, size_t len)
{
    struct gw_envelope env;
    int rc = gw_envelope_parse(buf, len, GW_SIM_BACKEND_MAX_MESSAGE, &env);
    cJSON *ev;

    if (rc != 0) {
        ev = ev_new("bad_text", c);
        cJSON_AddStringToObject(ev, "error", gw_strerror(rc));
        add_text(ev, "text", buf, len);
        ev_emit(c->m, ev);
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
        on_mcp(c, env.root);
        break;
    default:
        /* goodbye included: the gateway should close instead of relaying. */
        c->goodbye_text |= env.kind == GW_MSG_GOODBYE;
        ev = ev_new("rx", c);
        cJSON_AddStringToObject(ev, "type", env.type);
        cJSON_AddItemToObject(ev, "msg", cJSON_Duplicate(env.root, 1));
        ev_emit(c->m, ev);
        break;
    }
    gw_envelope_free(&env);
}

/* ---- the WebSocket server ---- */

static void read_upgrade(struct lws *wsi, struct upgrade *u)
{
    static const enum lws_token_indexes known[H_COUNT] = {
        [H_AUTHORIZATION] = WSI_TOKEN_HTTP_AUTHORIZATION,
        [H_XFF] = WSI_TOKEN_X_FORWARDED_FOR};
    char name[32], frag[URI_MAX];
    size_t qlen = 0;

    memset(u, 0, sizeof(*u));
    for (int i = 0; i < H_COUNT; i++) {
        if (known[i] != 0) {
            u->present[i] =
                lws_hdr_total_length(wsi, known[i]) > 0 &&
                lws_hdr_copy(wsi, u->val[i], HDR_MAX, known[i]) >= 0;
            continue;
        }
        /* Unknown to lws: stored by name, lowercase, with the colon. */
        int n = snprintf(name, sizeof(name), "%s:", hdr_names[i]);
        u->present[i] =
            lws_hdr_custom_copy(wsi, u->val[i], HDR_MAX, name, n) >= 0;
    }
    if (lws_hdr_copy(wsi, u->path, sizeof(u->path), WSI_TOKEN_GET_URI) < 0) {
        u->path[0] = '\0';
    }
    for (int i = 0; lws_hdr_copy_fragment(wsi, frag, sizeof(frag),
                                          WSI_TOKEN_HTTP_URI_ARGS, i) >= 0;
         i++) {
        int n = snprintf(u->query + qlen, sizeof(u->query) - qlen, "%s%s",
                         i > 0 ? "&" : "", frag);
        if (n < 0 || (size_t)n >= sizeof(u->query) - qlen) {
            break;
        }
        qlen += (size_t)n;
    }
    lws_get_peer_simple(wsi, u->peer, sizeof(u->peer));
    if (strncmp(u->peer, "::ffff:", 7) == 0 && strchr(u->peer, '.') != NULL) {
        memmove(u->peer, u->peer + 7, strlen(u->peer + 7) + 1); /* v4 */
    }
}

static void add_upgrade(cJSON *o, const struct upgrade *u)
{
    cJSON *h;

    add_text(o, "path", u->path, strlen(u->path));
    add_text(o, "query", u->query, strlen(u->query));
    cJSON_AddStringToObject(o, "peer", u->peer);
    h = cJSON_AddObjectToObject(o, "headers");
    for (int i = 0; i < H_COUNT; i++) {
        if (u->present[i]) {
            add_text(h, hdr_names[i], u->val[i], strlen(u->val[i]));
        } else {
            cJSON_AddNullToObject(h, hdr_names[i]);
        }
    }
}

/* A header as a CSV field: "-" when absent, no separators or controls. */
static void csv_field(char *out, size_t cap, const struct upgrade *u, int h)
{
    snprintf(out, cap, "%s", u->present[h] && u->val[h][0] ? u->val[h] : "-");
    for (char *p = out; *p != '\0'; p++) {
        if (*p == ',' || (unsigned char)*p <= ' ' || *p == 0x7f) {
            *p = '_';
        }
    }
}

/* NULL when the upgrade may proceed, else why not. */
static const char *auth_check(const struct options *o, const struct upgrade *u)
{
    const char *tok = u->val[H_AUTHORIZATION] + 7;
    /* The server formats a missing client-id as "None" and signs that. */
    const char *cid = u->present[H_CLIENT_ID] ? u->val[H_CLIENT_ID] : "None";
    const char *did = u->val[H_DEVICE_ID];
    int rc;

    if (o->auth == AUTH_NONE) {
        return NULL;
    }
    if (!u->present[H_AUTHORIZATION] ||
        strncmp(u->val[H_AUTHORIZATION], "Bearer ", 7) != 0) {
        return "no Bearer authorization";
    }
    if (o->auth == AUTH_BEARER) {
        return gw_credential_equal(o->auth_secret, strlen(o->auth_secret), tok,
                                   strlen(tok))
                   ? NULL
                   : "wrong token";
    }
    rc = gw_credential_backend_token_verify(
        o->auth_secret, strlen(o->auth_secret), cid, strlen(cid), did,
        strlen(did), tok, strlen(tok), (int64_t)time(NULL),
        GW_CREDENTIAL_BACKEND_MAX_AGE);
    return rc == 0               ? NULL
           : rc == GW_EMALFORMED ? "malformed token"
                                 : "bad token";
}

/* The default refusal: HTTP 401 before the upgrade. */
static int confirm_upgrade(struct mock *m, struct lws *wsi, const char *proto)
{
    struct upgrade u;
    const char *why;
    cJSON *ev;

    if (m->opt.auth == AUTH_NONE || m->opt.auth_text || proto == NULL ||
        strcmp(proto, "websocket") != 0) {
        return 0;
    }
    read_upgrade(wsi, &u);
    if ((why = auth_check(&m->opt, &u)) == NULL) {
        return 0;
    }
    ev = ev_new("auth_refused", NULL);
    cJSON_AddStringToObject(ev, "reason", why);
    add_upgrade(ev, &u);
    ev_emit(m, ev);
    gw_log(GW_LOG_INFO, "backend", "refused %s from %s: %s", u.path, u.peer,
           why);
    if (lws_return_http_status(wsi, HTTP_STATUS_UNAUTHORIZED, NULL) != 0) {
        return -1;
    }
    return 1;
}

static int on_established(struct mock *m, struct lws *wsi, struct pss *pss)
{
    struct upgrade u;
    struct conn *c;
    const char *why;
    bool gw_mode;
    cJSON *ev;

    read_upgrade(wsi, &u);
    if ((c = conn_create(m, wsi)) == NULL) {
        return -1;
    }
    pss->conn = c;
    /* The server's test: the request ends with "?from=mqtt_gateway". */
    gw_mode = strcmp(u.query, "from=mqtt_gateway") == 0;
    c->framing = m->opt.framing >= 0 ? (enum gw_framing)m->opt.framing
                 : gw_mode           ? GW_FRAMING_V2
                                     : GW_FRAMING_RAW;
    csv_field(c->dev, sizeof(c->dev), &u, H_DEVICE_ID);
    csv_field(c->cid, sizeof(c->cid), &u, H_CLIENT_ID);
    snprintf(c->subject, sizeof(c->subject), "dev=%s sid=%s", c->dev, c->sid);
    why = auth_check(&m->opt, &u); /* fails here only with --auth-fail text */
    ev = ev_new("connect", c);
    add_upgrade(ev, &u);
    cJSON_AddBoolToObject(ev, "gateway_mode", gw_mode);
    cJSON_AddStringToObject(ev, "framing", framing_names[c->framing]);
    cJSON_AddStringToObject(ev, "auth",
                            m->opt.auth == AUTH_NONE ? "none"
                            : why == NULL            ? "ok"
                                                     : why);
    ev_emit(m, ev);
    gw_log(GW_LOG_INFO, c->subject, "connected from %s to %s%s%s (%s)", u.peer,
           u.path, u.query[0] ? "?" : "", u.query, framing_names[c->framing]);
    if (why != NULL) {
        queue_text(c, TEXT_AUTH_FAIL, strlen(TEXT_AUTH_FAIL), false);
        c->close_now = true;
    } else if (!u.present[H_DEVICE_ID]) {
        queue_text(c, TEXT_NO_DEVICE, strlen(TEXT_NO_DEVICE), false);
        c->close_now = true;
    }
    return 0;
}

/* Small messages arrive whole; larger ones are put together here. */
static int on_receive(struct conn *c, const uint8_t *in, size_t len)
{
    bool fin = lws_is_final_fragment(c->wsi) &&
               lws_remaining_packet_payload(c->wsi) == 0;
    bool bin = lws_frame_is_binary(c->wsi);

    if (c->rx_len == 0 && fin) {
        bin ? on_binary(c, in, len) : on_text(c, (const char *)in, len);
        return 0;
    }
    if (len > GW_SIM_BACKEND_MAX_MESSAGE - c->rx_len) {
        c->closed_by_mock = true;
        c->mock_code = LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE;
        lws_close_reason(c->wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE, NULL, 0);
        return -1;
    }
    if (c->rx_len + len > c->rx_cap) {
        size_t cap = c->rx_len + len < 4096 ? 4096 : c->rx_len + len;
        uint8_t *p = realloc(c->rx, cap);
        if (p == NULL) {
            return -1;
        }
        c->rx = p;
        c->rx_cap = cap;
    }
    memcpy(c->rx + c->rx_len, in, len);
    c->rx_len += len;
    if (fin) {
        bin ? on_binary(c, c->rx, c->rx_len)
            : on_text(c, (const char *)c->rx, c->rx_len);
        free(c->rx); /* rare: idle connections keep no buffer */
        c->rx = NULL;
        c->rx_len = c->rx_cap = 0;
    }
    return 0;
}

static void on_peer_close(struct conn *c, const uint8_t *in, size_t len)
{
    size_t n = len > 2 ? len - 2 : 0;

    c->peer_closed = true;
    c->peer_code = len >= 2 ? (in[0] << 8) | in[1] : 1005;
    if (n >= sizeof(c->peer_reason)) {
        n = sizeof(c->peer_reason) - 1;
    }
    if (n > 0) {
        memcpy(c->peer_reason, in + 2, n);
    }
    c->peer_reason[n] = '\0';
}

static void on_stop_timer(uv_timer_t *t);

static void on_closed(struct mock *m, struct conn *c)
{
    cJSON *ev, *up;
    const char *by = c->closed_by_mock ? "mock"
                     : c->peer_closed  ? "peer"
                     : m->stopping     ? "shutdown"
                                       : "peer";

    if (c->state == ST_LISTENING && c->turn_rx.frames > 0) {
        end_turn(c, "close");
    }
    ev = ev_new("close", c);
    cJSON_AddStringToObject(ev, "by", by);
    if (c->closed_by_mock || c->peer_closed) {
        cJSON_AddNumberToObject(
            ev, "code", c->closed_by_mock ? c->mock_code : c->peer_code);
    } else {
        cJSON_AddNullToObject(ev, "code"); /* no close frame */
    }
    add_text(ev, "reason", c->peer_reason, strlen(c->peer_reason));
    cJSON_AddBoolToObject(ev, "hello", c->hello_seen);
    cJSON_AddNumberToObject(ev, "turns", c->turns_done);
    cJSON_AddNumberToObject(ev, "tts_frames", c->tts_all);
    cJSON_AddNumberToObject(ev, "bad_frames", (double)c->bad_frames);
    cJSON_AddNumberToObject(ev, "bad_opus", (double)c->bad_opus);
    cJSON_AddNumberToObject(ev, "header_nonzero", (double)c->hdr_nonzero);
    cJSON_AddNumberToObject(ev, "outside_turn", (double)c->outside);
    cJSON_AddNumberToObject(ev, "before_hello", (double)c->before_hello);
    cJSON_AddBoolToObject(ev, "goodbye_text", c->goodbye_text);
    up = cJSON_AddObjectToObject(ev, "uplink");
    rx_stats_report(up, &c->all_rx);
    ev_emit(m, ev);
    gw_log(GW_LOG_INFO, c->subject, "closed by %s after %u turns", by,
           c->turns_done);
    m->conns_closed++;
    conn_release(c);
    if (m->opt.exit_after_sessions > 0 && !m->stopping &&
        m->conns_closed >= (uint64_t)m->opt.exit_after_sessions) {
        uv_timer_start(&m->stop_timer, on_stop_timer, 0, 0);
    }
}

static int on_lws(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                  void *in, size_t len)
{
    struct mock *m = lws_context_user(lws_get_context(wsi));
    struct pss *pss = user;
    struct conn *c = pss != NULL ? pss->conn : NULL;

    switch (reason) {
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
        return confirm_upgrade(m, wsi, in);
    case LWS_CALLBACK_HTTP:
        /* Not an upgrade: nothing to serve. */
        lws_return_http_status(wsi, HTTP_STATUS_NOT_FOUND, NULL);
        return -1;
    case LWS_CALLBACK_ESTABLISHED:
        return on_established(m, wsi, pss);
    case LWS_CALLBACK_RECEIVE:
        return c != NULL ? on_receive(c, in, len) : -1;
    case LWS_CALLBACK_SERVER_WRITEABLE:
        return c != NULL ? on_writable(c) : 0;
    case LWS_CALLBACK_TIMER:
        return c != NULL && c->closed_by_mock ? -1 : 0;
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
        if (c != NULL) {
            on_peer_close(c, in, len);
        }
        return 0;
    case LWS_CALLBACK_CLOSED:
        if (c != NULL) {
            pss->conn = NULL;
            on_closed(m, c);
        }
        return 0;
    default:
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}

/* ---- command line ---- */

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: hybridgw-sim backend [options]\n"
        "  --listen HOST:PORT       bind address (127.0.0.1:8000; port 0 picks"
        " one)\n"
        "  --cert FILE --key FILE   serve wss:// instead of ws://\n"
        "  --auth SCHEME            none | bearer:TOKEN | xiaozhi-hmac:SECRET\n"
        "  --auth-fail http|text    refuse with HTTP 401 (default), or accept,"
        " send\n"
        "                           a text and close, as the xiaozhi server"
        " does\n"
        "  --framing F              auto (v2 if the query is exactly\n"
        "                           from=mqtt_gateway, else raw) | v2 | v3 |"
        " raw\n"
        "  --no-hello               never answer the hello\n"
        "  --hello-delay-ms N       answer it N ms late\n"
        "  --turn-frames N          uplink frames that end a turn (10; 0: "
        "only\n"
        "                           listen stop)\n"
        "  --tts-frames N           downlink frames per turn (10, max %d)\n"
        "  --tts-rate HZ            TTS sample rate (%d)\n"
        "  --tts-stop-delay-ms N    after the last frame (420: 7 frames)\n"
        "  --no-pace                send all TTS frames at once\n"
        "  --no-decode              check uplink Opus by inspection only\n"
        "  --close-after-turns K    close (no goodbye) after K turns\n"
        "  --mcp                    run the server's MCP client\n"
        "  --mcp-initialized        also send notifications/initialized\n"
        "  --mcp-list-delay-ms N    before tools/list (1000, like the server)\n"
        "  --mcp-call NAME[:JSON]   tools/call after the list (repeatable)\n"
        "  --mcp-timeout-ms N       per tools/call (30000)\n"
        "  --events FILE            JSON lines of what happened ('-':"
        " stdout)\n"
        "  --latency-log FILE       one line per audio packet\n"
        "  --exit-after-sessions N  exit after N connections closed\n"
        "  --max-conns N            connections to budget fds for (16384)\n"
        "  --dump-frames FILE       write the TTS packets and exit\n"
        "  --log-level LEVEL        error | warn | info | debug\n",
        GW_SIM_BACKEND_MAX_TTS, GW_SIM_BACKEND_TTS_RATE);
}

static bool parse_listen(const char *s, struct options *o)
{
    const char *colon = strrchr(s, ':');
    size_t n = colon != NULL ? (size_t)(colon - s) : 0;
    char *end;
    long port;

    if (colon == NULL || n == 0 || n >= sizeof(o->host)) {
        return false;
    }
    memcpy(o->host, s, n);
    o->host[n] = '\0';
    port = strtol(colon + 1, &end, 10);
    o->port = (int)port;
    return end != colon + 1 && *end == '\0' && port >= 0 && port <= 65535;
}

static bool parse_auth(const char *s, struct options *o)
{
    if (strcmp(s, "none") == 0) {
        o->auth = AUTH_NONE;
    } else if (strncmp(s, "bearer:", 7) == 0 && s[7] != '\0') {
        o->auth = AUTH_BEARER;
        o->auth_secret = s + 7;
    } else if (strncmp(s, "xiaozhi-hmac:", 13) == 0 && s[13] != '\0') {
        o->auth = AUTH_HMAC;
        o->auth_secret = s + 13;
    } else {
        return false;
    }
    return true;
}

static bool parse_auth_fail(const char *s, struct options *o)
{
    o->auth_text = strcmp(s, "text") == 0;
    return o->auth_text || strcmp(s, "http") == 0;
}

static bool parse_framing(const char *s, struct options *o)
{
    o->framing = -1;
    for (int i = GW_FRAMING_V2; i <= GW_FRAMING_RAW; i++) {
        if (strcmp(s, framing_names[i]) == 0) {
            o->framing = i;
        }
    }
    return o->framing >= 0 || strcmp(s, "auto") == 0;
}

static bool parse_call(const char *s, struct options *o)
{
    const char *colon = strchr(s, ':');
    size_t n = colon != NULL ? (size_t)(colon - s) : strlen(s);
    cJSON *args = cJSON_Parse(colon != NULL ? colon + 1 : "{}");

    if (o->n_calls >= GW_SIM_BACKEND_MAX_MCP_CALL || n == 0 ||
        !cJSON_IsObject(args)) {
        cJSON_Delete(args);
        return false;
    }
    o->call_name[o->n_calls] = strndup(s, n);
    o->call_args[o->n_calls] = args;
    return o->call_name[o->n_calls++] != NULL;
}

static bool parse_level(const char *s, struct options *o)
{
    (void)o;
    for (int l = GW_LOG_ERROR; l <= GW_LOG_DEBUG; l++) {
        if (strcmp(s, gw_log_level_name((enum gw_log_level)l)) == 0) {
            gw_log_set_level((enum gw_log_level)l);
            return true;
        }
    }
    return false;
}

static bool check_rate(const char *s, struct options *o)
{
    (void)s;
    return o->tts_rate == 8000 || o->tts_rate == 12000 ||
           o->tts_rate == 16000 || o->tts_rate == 24000 || o->tts_rate == 48000;
}

/* One command-line option: where its value goes and what it may be. */
struct opt_def {
    const char *name;
    enum { K_INT, K_ON, K_OFF, K_STR, K_FN } kind;
    size_t off;    /* member of struct options (K_INT, K_ON/OFF, K_STR) */
    long min, max; /* K_INT range */
    bool (*fn)(const char *v, struct options *o); /* K_FN, or K_INT check */
};

#define OPT(m) offsetof(struct options, m)
static const struct opt_def opt_defs[] = {
    {"listen", K_FN, 0, 0, 0, parse_listen},
    {"cert", K_STR, OPT(cert), 0, 0, NULL},
    {"key", K_STR, OPT(key), 0, 0, NULL},
    {"auth", K_FN, 0, 0, 0, parse_auth},
    {"auth-fail", K_FN, 0, 0, 0, parse_auth_fail},
    {"framing", K_FN, 0, 0, 0, parse_framing},
    {"no-hello", K_ON, OPT(no_hello), 0, 0, NULL},
    {"hello-delay-ms", K_INT, OPT(hello_delay_ms), 0, 3600000, NULL},
    {"turn-frames", K_INT, OPT(turn_frames), 0, 1000000, NULL},
    {"tts-frames", K_INT, OPT(tts_frames), 0, GW_SIM_BACKEND_MAX_TTS, NULL},
    {"tts-rate", K_INT, OPT(tts_rate), 8000, 48000, check_rate},
    {"tts-stop-delay-ms", K_INT, OPT(tts_stop_delay_ms), 0, 60000, NULL},
    {"no-pace", K_OFF, OPT(pace), 0, 0, NULL},
    {"no-decode", K_OFF, OPT(decode), 0, 0, NULL},
    {"close-after-turns", K_INT, OPT(close_after_turns), 0, 1000000, NULL},
    {"mcp", K_ON, OPT(mcp), 0, 0, NULL},
    {"mcp-initialized", K_ON, OPT(mcp_notify), 0, 0, NULL},
    {"mcp-list-delay-ms", K_INT, OPT(mcp_list_delay_ms), 0, 600000, NULL},
    {"mcp-call", K_FN, 0, 0, 0, parse_call},
    {"mcp-timeout-ms", K_INT, OPT(mcp_timeout_ms), 1, 3600000, NULL},
    {"events", K_STR, OPT(events_path), 0, 0, NULL},
    {"latency-log", K_STR, OPT(latency_path), 0, 0, NULL},
    {"exit-after-sessions", K_INT, OPT(exit_after_sessions), 0, 1 << 30, NULL},
    {"max-conns", K_INT, OPT(max_conns), 1, 1000000, NULL},
    {"dump-frames", K_STR, OPT(dump_path), 0, 0, NULL},
    {"log-level", K_FN, 0, 0, 0, parse_level},
};
#define N_OPTS (sizeof(opt_defs) / sizeof(opt_defs[0]))

static bool apply_option(const struct opt_def *d, const char *v,
                         struct options *o)
{
    char *member = (char *)o + d->off;
    char *end;
    long n;

    switch (d->kind) {
    case K_ON:
    case K_OFF:
        *(bool *)member = d->kind == K_ON;
        return true;
    case K_STR:
        *(const char **)member = v;
        return true;
    case K_FN:
        return d->fn(v, o);
    default:
        n = strtol(v, &end, 10);
        if (end == v || *end != '\0' || n < d->min || n > d->max) {
            return false;
        }
        *(int *)member = (int)n;
        return d->fn == NULL || d->fn(v, o);
    }
}

static void set_defaults(struct options *o)
{
    snprintf(o->host, sizeof(o->host), "127.0.0.1");
    o->port = 8000;
    o->framing = -1;
    o->turn_frames = 10;
    o->tts_frames = 10;
    o->tts_rate = GW_SIM_BACKEND_TTS_RATE;
    o->tts_stop_delay_ms = 7 * GW_SIM_BACKEND_FRAME_MS; /* the server's */
    o->pace = o->decode = true;
    o->mcp_list_delay_ms = 1000;
    o->mcp_timeout_ms = 30000;
    o->max_conns = 16384;
}

/* Returns -1 to run, else the exit status. */
static int parse_options(int argc, char **argv, struct options *o)
{
    struct option longopts[N_OPTS + 2];
    int opt;

    for (size_t i = 0; i < N_OPTS; i++) {
        bool arg = opt_defs[i].kind != K_ON && opt_defs[i].kind != K_OFF;
        longopts[i] = (struct option){opt_defs[i].name, arg, NULL, (int)i};
    }
    longopts[N_OPTS] = (struct option){"help", 0, NULL, 'h'};
    longopts[N_OPTS + 1] = (struct option){NULL, 0, NULL, 0};
    set_defaults(o);
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (opt == 'h') {
            usage(stdout);
            return 0;
        }
        if (opt == '?' || !apply_option(&opt_defs[opt], optarg, o)) {
            if (opt != '?') {
                fprintf(stderr, "hybridgw-sim backend: bad --%s '%s'\n",
                        opt_defs[opt].name, optarg != NULL ? optarg : "");
            }
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc || (o->cert == NULL) != (o->key == NULL)) {
        fprintf(stderr, "hybridgw-sim backend: %s\n",
                optind < argc ? "unexpected argument"
                              : "--cert and --key go together");
        return 2;
    }
    return -1;
}

/* ---- process lifetime ---- */

static void on_handle_closed(uv_handle_t *h)
{
    (void)h;
}

/* Phase one of the lws teardown with a foreign loop; the loop then runs
 * until lws has closed its handles, and main() finishes phase two. */
static void begin_shutdown(struct mock *m, const char *why)
{
    if (m->stopping) {
        return;
    }
    m->stopping = true;
    gw_log(GW_LOG_INFO, "backend", "%s: shutting down", why);
    uv_close((uv_handle_t *)&m->sig_int, on_handle_closed);
    uv_close((uv_handle_t *)&m->sig_term, on_handle_closed);
    uv_close((uv_handle_t *)&m->stop_timer, on_handle_closed);
    if (m->ctx != NULL) {
        lws_context_destroy(m->ctx);
    }
}

static void on_signal(uv_signal_t *s, int signum)
{
    begin_shutdown(s->data, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

static void on_stop_timer(uv_timer_t *t)
{
    begin_shutdown(t->data, "session limit reached");
}

static void lws_emit(int level, const char *line)
{
    int n = (int)strlen(line);

    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) {
        n--;
    }
    gw_log(level == LLL_ERR ? GW_LOG_ERROR : GW_LOG_WARN, "lws", "%.*s", n,
           line);
}

/* 1000+ connections need more descriptors than the usual soft limit. */
static unsigned fd_budget(int conns)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)conns + 64;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        return (unsigned)want;
    }
    if (rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            getrlimit(RLIMIT_NOFILE, &rl);
        }
    }
    return (unsigned)(rl.rlim_cur < want ? rl.rlim_cur : want);
}

/*
 * The context first, then the listening vhost: a failed bind leaves a
 * sound context that the normal two-phase teardown can take apart (lws
 * 4.1 half-builds the context when the default vhost fails).
 */
static struct lws_vhost *create_server(struct mock *m, void **loops)
{
    static const struct lws_protocols protocols[] = {
        {"xiaozhi", on_lws, sizeof(struct pss), RX_BUFFER, 0, NULL, 0},
        {NULL, NULL, 0, 0, 0, NULL, 0}};
    struct lws_context_creation_info info;

    memset(&info, 0, sizeof(info));
    info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_EXPLICIT_VHOSTS;
    info.foreign_loops = loops;
    info.user = m;
    info.fd_limit_per_thread = fd_budget(m->opt.max_conns);
    info.max_http_header_pool = 128;
    if (m->opt.cert != NULL) {
        info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
    }
    lws_set_log_level(LLL_ERR | LLL_WARN, lws_emit);
    if ((m->ctx = lws_create_context(&info)) == NULL) {
        return NULL;
    }
    info.options |= LWS_SERVER_OPTION_FAIL_UPON_UNABLE_TO_BIND;
    info.port = m->opt.port;
    info.iface = m->opt.host;
    info.protocols = protocols;
    info.ssl_cert_filepath = m->opt.cert;
    info.ssl_private_key_filepath = m->opt.key;
    return lws_create_vhost(m->ctx, &info);
}

/* Says where the vhost listens, in the log and as the first event. */
static void emit_ready(struct mock *m, struct lws_vhost *vh)
{
    cJSON *ev = ev_new("ready", NULL);
    int port = lws_get_vhost_listen_port(vh);
    char hex[65];

    hex32(m->tts.prefix[m->tts.n], hex);
    cJSON_AddStringToObject(ev, "host", m->opt.host);
    cJSON_AddNumberToObject(ev, "port", port);
    cJSON_AddBoolToObject(ev, "tls", m->opt.cert != NULL);
    cJSON_AddNumberToObject(ev, "tts_frames", m->tts.n);
    cJSON_AddNumberToObject(ev, "tts_rate", m->opt.tts_rate);
    cJSON_AddStringToObject(ev, "tts_sha256", hex);
    ev_emit(m, ev);
    gw_log(GW_LOG_INFO, "backend", "listening on %s://%s:%d",
           m->opt.cert != NULL ? "wss" : "ws", m->opt.host, port);
}

static int run(struct mock *m)
{
    void *loops[1] = {&m->loop};
    struct lws_vhost *vh;
    cJSON *ev;
    bool ok;
    int rc;

    if (uv_loop_init(&m->loop) != 0) {
        return 1;
    }
    uv_signal_init(&m->loop, &m->sig_int);
    uv_signal_init(&m->loop, &m->sig_term);
    uv_timer_init(&m->loop, &m->stop_timer);
    m->sig_int.data = m->sig_term.data = m->stop_timer.data = m;
    uv_signal_start(&m->sig_int, on_signal, SIGINT);
    uv_signal_start(&m->sig_term, on_signal, SIGTERM);
    vh = create_server(m, loops);
    ok = vh != NULL;
    if (ok) {
        emit_ready(m, vh);
    } else {
        gw_log(GW_LOG_ERROR, "backend", "cannot listen on %s:%d", m->opt.host,
               m->opt.port);
        begin_shutdown(m, "startup failed");
    }
    uv_run(&m->loop, UV_RUN_DEFAULT);
    if (m->ctx != NULL) {
        lws_context_destroy(m->ctx);
    }
    ev = ev_new("exit", NULL);
    cJSON_AddNumberToObject(ev, "connections", (double)m->next_conn);
    cJSON_AddNumberToObject(ev, "closed", (double)m->conns_closed);
    ev_emit(m, ev);
    rc = uv_loop_close(&m->loop);
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, "backend", "loop closed with live handles: %s",
               uv_strerror(rc));
    }
    return ok && rc == 0 ? 0 : 1;
}

static int open_outputs(struct mock *m)
{
    int err = 0;

    if (m->opt.events_path != NULL) {
        m->events = strcmp(m->opt.events_path, "-") == 0
                        ? stdout
                        : fopen(m->opt.events_path, "w");
    }
    if (m->opt.latency_path != NULL) {
        m->latency = fopen(m->opt.latency_path, "w");
        if (m->latency != NULL) {
            setvbuf(m->latency, NULL, _IOFBF, 1 << 20);
        }
    }
    m->dec = opus_decoder_create(16000, 1, &err);
    m->tx = malloc(LWS_PRE + GW_AUDIO_FRAME_MAX_HEADER_LEN +
                   GW_AUDIO_FRAME_MAX_PAYLOAD);
    if ((m->opt.events_path != NULL && m->events == NULL) ||
        (m->opt.latency_path != NULL && m->latency == NULL)) {
        fprintf(stderr, "hybridgw-sim backend: cannot open an output file\n");
        return 1;
    }
    return m->dec != NULL && m->tx != NULL ? 0 : 1;
}

static void cleanup(struct mock *m)
{
    if (m->events != NULL && m->events != stdout) {
        fclose(m->events);
    }
    if (m->latency != NULL) {
        fclose(m->latency);
    }
    if (m->dec != NULL) {
        opus_decoder_destroy(m->dec);
    }
    free(m->tx);
    tts_free(&m->tts);
    for (int i = 0; i < m->opt.n_calls; i++) {
        free(m->opt.call_name[i]);
        cJSON_Delete(m->opt.call_args[i]);
    }
    free(m);
}

int gw_sim_backend_main(int argc, char **argv)
{
    struct mock *m = calloc(1, sizeof(*m));
    int rc;

    if (m == NULL) {
        return 1;
    }
    rc = parse_options(argc, argv, &m->opt);
    if (rc < 0) {
        rc = tts_build(&m->tts, m->opt.tts_frames, m->opt.tts_rate) != 0 ? 1
             : m->opt.dump_path != NULL ? tts_dump(&m->tts, m->opt.dump_path)
             : open_outputs(m) != 0     ? 1
                                        : run(m);
    }
    cleanup(m);
    return rc;
}
