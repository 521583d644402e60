/*
 * hybridgw-sim's simulated device: a firmware-faithful MQTT+UDP client on
 * the libuv loop (anchor-device-firmware.md sections 2-7 and 9), with its
 * pure downlink checks and MCP server and the uplink clip.
 */
#include "tools/sim_device.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <opus/opus.h>

#include "codec/client_id.h"
#include "codec/envelope.h"
#include "codec/hello.h"
#include "codec/hex.h"
#include "codec/opus_packet.h"
#include "codec/topic.h"
#include "crypto/aes_ctr.h"
#include "crypto/credential.h"
#include "gateway/log.h"
#include "gateway/mqtt_link.h"

#define QUEUE_FRAMES   40   /* the firmware's decode queue */
#define RX_BUF         2048 /* sees oversized datagrams whole, to count them */
#define UP_RATE        16000
#define UP_SAMPLES     960 /* 60 ms at 16 kHz */
#define WAKE_FRAMES    33  /* ~2 s of cached wake-word audio */
#define WAKE_WORD      "\xe4\xbd\xa0\xe5\xa5\xbd\xe5\xb0\x8f\xe6\x99\xba"
#define MSG_PARSE_MAX  65536 /* esp-mqtt reassembles anything; be generous */
#define TOPIC_MAX      256
#define MAX_CATCH_UP   5 /* frames sent in one tick when the loop lagged */
#define DEF_USERNAME   "eyJpcCI6IjEyNy4wLjAuMSJ9" /* {"ip":"127.0.0.1"} */
#define SILENCE_SETTLE 10 /* silence frames before DTX settles */
#define SILENCE_LOOP   30 /* settled silence frames, replayed in a loop */

/* ---------------------------------------------------------------------- */
/* Downlink checks                                                         */

static const char *const drop_names[GW_SIM_DROP_COUNT_] = {
    "short", "type", "length", "toobig", "replay", "idle", "queue", "opus"};

const char *gw_sim_drop_name(enum gw_sim_drop reason)
{
    return (unsigned)reason < GW_SIM_DROP_COUNT_ ? drop_names[reason]
                                                 : "unknown";
}

bool gw_sim_drop_is_violation(enum gw_sim_drop reason)
{
    /* Audio before tts start can be a broker-vs-UDP race, not a bug. */
    return (unsigned)reason < GW_SIM_DROP_COUNT_ && reason != GW_SIM_DROP_IDLE;
}

void gw_sim_downlink_reset(struct gw_sim_downlink *dl)
{
    dl->last_seq = 0;
}

static enum gw_sim_drop drop_of(int err)
{
    switch (err) {
    case GW_ETRUNC:
        return GW_SIM_DROP_SHORT;
    case GW_EPROTO:
        return GW_SIM_DROP_TYPE;
    case GW_ETOOBIG:
        return GW_SIM_DROP_TOOBIG;
    case GW_EREPLAY:
        return GW_SIM_DROP_REPLAY;
    default:
        return GW_SIM_DROP_LENGTH;
    }
}

int gw_sim_downlink_check(struct gw_sim_downlink *dl, const uint8_t *buf,
                          size_t len, struct gw_udp_header *h)
{
    struct gw_udp_header hdr;
    int err = gw_udp_header_parse(buf, len, &hdr);

    if (err == 0) {
        err = gw_udp_header_check_sequence(dl->last_seq, hdr.sequence);
    }
    if (err != 0) {
        dl->drops[drop_of(err)]++;
        return err;
    }
    if (hdr.sequence != dl->last_seq + 1) {
        dl->gaps++; /* the firmware only warns */
        dl->lost += hdr.sequence - dl->last_seq - 1;
    }
    dl->last_seq = hdr.sequence;
    dl->accepted++;
    *h = hdr;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* A growing string, for replies whose size is not known up front         */

struct sbuf {
    char *p;    /* NUL-terminated text */
    size_t len; /* bytes before the NUL */
    size_t cap; /* bytes allocated */
    bool oom;   /* an allocation failed; p is unusable */
};

static bool sb_reserve(struct sbuf *b, size_t extra)
{
    if (b->oom) {
        return false;
    }
    if (b->len + extra + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + extra + 1) {
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->oom = true;
            return false;
        }
        b->p = p;
        b->cap = cap;
    }
    return true;
}

static void sb_add(struct sbuf *b, const char *s)
{
    size_t n = strlen(s);

    if (sb_reserve(b, n)) {
        memcpy(b->p + b->len, s, n + 1);
        b->len += n;
    }
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
sb_fmt(struct sbuf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    sb_add(b, tmp);
}

/* Appends s as a JSON string; text that is not UTF-8 becomes "". */
static void sb_str(struct sbuf *b, const char *s)
{
    size_t n = strlen(s);

    if (sb_reserve(b, n * 6 + 2) &&
        gw_envelope_write_string(b->p, b->cap, &b->len, s, n) != 0) {
        sb_add(b, "\"\"");
    }
}

/* ---------------------------------------------------------------------- */
/* MCP server of the device                                                */

enum tool_id { T_STATUS, T_VOLUME, T_BRIGHTNESS, T_EXTRA, T_SYSINFO, T_REBOOT };

/* One tool; the integer argument, if any, is required and range checked. */
struct tool {
    const char *name;        /* tool name */
    const char *description; /* shown to MCP clients */
    const char *arg;         /* integer argument or NULL */
    int min, max;            /* its range */
    bool user_only;          /* listed only with withUserTools */
    enum tool_id id;         /* what a call does */
};

static const struct tool common_tools[] = {
    {"self.get_device_status",
     "Provides the real-time information of the device, including the "
     "current status of the audio speaker, screen, battery, network, etc.\n"
     "Use this tool for: \n1. Answering questions about current condition\n"
     "2. As the first step to control the device",
     NULL, 0, 0, false, T_STATUS},
    {"self.audio_speaker.set_volume",
     "Set the volume of the audio speaker. If the current volume is "
     "unknown, you must call `self.get_device_status` tool first and then "
     "call this tool.",
     "volume", 0, 100, false, T_VOLUME},
    {"self.screen.set_brightness", "Set the brightness of the screen.",
     "brightness", 0, 100, false, T_BRIGHTNESS},
};

static const struct tool user_tools[] = {
    {"self.get_system_info", "Get the system information", NULL, 0, 0, true,
     T_SYSINFO},
    {"self.reboot", "Reboot the system", NULL, 0, 0, true, T_REBOOT},
};

#define N_COMMON (sizeof(common_tools) / sizeof(common_tools[0]))
#define N_USER   (sizeof(user_tools) / sizeof(user_tools[0]))

void gw_sim_mcp_defaults(struct gw_sim_mcp *m)
{
    memset(m, 0, sizeof(*m));
    m->volume = 70;
    m->brightness = 80;
}

/* Tool i in firmware order: common, board (the synthetic ones), user. */
static size_t tool_count(const struct gw_sim_mcp *m)
{
    return N_COMMON + m->extra_tools + N_USER;
}

static struct tool tool_at(const struct gw_sim_mcp *m, size_t i, char *name,
                           size_t cap)
{
    static const struct tool extra = {
        NULL,
        "A synthetic tool of the simulated device, there to make "
        "tools/list span several pages. It answers true.",
        NULL,
        0,
        0,
        false,
        T_EXTRA};
    struct tool t;

    if (i < N_COMMON) {
        return common_tools[i];
    }
    i -= N_COMMON;
    if (i < m->extra_tools) {
        t = extra;
        snprintf(name, cap, "self.sim.tool_%04zu", i + 1);
        t.name = name;
        return t;
    }
    return user_tools[i - m->extra_tools];
}

static void tool_json(struct sbuf *b, const struct tool *t)
{
    sb_add(b, "{\"name\":");
    sb_str(b, t->name);
    sb_add(b, ",\"description\":");
    sb_str(b, t->description);
    sb_add(b, ",\"inputSchema\":{\"type\":\"object\",\"properties\":{");
    if (t->arg != NULL) {
        sb_fmt(b,
               "\"%s\":{\"type\":\"integer\",\"minimum\":%d,"
               "\"maximum\":%d}},\"required\":[\"%s\"]}",
               t->arg, t->min, t->max, t->arg);
    } else {
        sb_add(b, "}}");
    }
    if (t->user_only) {
        sb_add(b, ",\"annotations\":{\"audience\":[\"user\"]}");
    }
    sb_add(b, "}");
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void
reply_error(struct sbuf *b, int id, const char *fmt, ...)
{
    char text[600];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    b->len = 0;
    if (b->p != NULL) {
        b->p[0] = '\0';
    }
    sb_fmt(b, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"error\":{\"message\":", id);
    sb_str(b, text);
    sb_add(b, "}}");
}

static void reply_text(struct sbuf *b, int id, const char *text)
{
    sb_fmt(b,
           "{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{\"content\":"
           "[{\"type\":\"text\",\"text\":",
           id);
    sb_str(b, text);
    sb_add(b, "}],\"isError\":false}}");
}

/* Pages cut near 8000 bytes, measured as the firmware measures them. */
static void tools_list(struct gw_sim_mcp *m, struct sbuf *b, int id,
                       const cJSON *params)
{
    const char *cursor = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(params, "cursor"));
    bool with_user =
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(params, "withUserTools"));
    bool found = cursor == NULL || cursor[0] == '\0';
    char name[64], next[64] = "";
    struct sbuf t = {0};

    sb_fmt(b, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{\"tools\":[", id);
    for (size_t i = 0; i < tool_count(m); i++) {
        struct tool tl = tool_at(m, i, name, sizeof(name));
        if (!found) {
            found = strcmp(tl.name, cursor) == 0;
            if (!found) {
                continue;
            }
        }
        if (tl.user_only && !with_user) {
            continue;
        }
        t.len = 0;
        tool_json(&t, &tl);
        sb_add(&t, ",");
        if (t.oom || b->len + t.len + 30 > GW_SIM_MCP_PAGE_BYTES) {
            snprintf(next, sizeof(next), "%s", tl.name);
            break;
        }
        sb_add(b, t.p);
    }
    free(t.p);
    if (b->len > 0 && !b->oom && b->p[b->len - 1] == ',') {
        b->p[--b->len] = '\0';
    }
    if (!b->oom && b->p[b->len - 1] == '[') {
        /* Also what an unknown cursor or only hidden tools give. */
        reply_error(
            b, id, "Failed to add tool %s because of payload size limit", next);
        return;
    }
    if (next[0] != '\0') {
        sb_fmt(b, "],\"nextCursor\":\"%s\"}}", next);
    } else {
        sb_add(b, "]}}");
    }
}

static void status_text(const struct gw_sim_mcp *m, char *out, size_t cap)
{
    snprintf(out, cap,
             "{\"audio_speaker\":{\"volume\":%d},\"screen\":{\"brightness\":"
             "%d,\"theme\":\"light\"},\"battery\":{\"level\":87,\"charging\":"
             "false},\"network\":{\"type\":\"wifi\",\"ssid\":\"hybridgw-sim\","
             "\"signal\":\"strong\"}}",
             m->volume, m->brightness);
}

static void tools_call(struct gw_sim_mcp *m, struct sbuf *b, int id,
                       const cJSON *params)
{
    const cJSON *name, *args;
    char buf[64], text[512];
    struct tool t;
    size_t i;

    if (!cJSON_IsObject(params)) {
        reply_error(b, id, "Missing params");
        return;
    }
    name = cJSON_GetObjectItemCaseSensitive(params, "name");
    args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
    if (!cJSON_IsString(name)) {
        reply_error(b, id, "Missing name");
        return;
    }
    if (args != NULL && !cJSON_IsObject(args)) {
        reply_error(b, id, "Invalid arguments");
        return;
    }
    for (i = 0; i < tool_count(m); i++) {
        t = tool_at(m, i, buf, sizeof(buf));
        if (strcmp(t.name, name->valuestring) == 0) {
            break;
        }
    }
    if (i == tool_count(m)) {
        reply_error(b, id, "Unknown tool: %s", name->valuestring);
        return;
    }
    int value = 0;
    if (t.arg != NULL) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, t.arg);
        if (!cJSON_IsNumber(v)) {
            reply_error(b, id, "Missing valid argument: %s", t.arg);
            return;
        }
        value = v->valueint;
        if (value < t.min) {
            reply_error(b, id, "Value is below minimum allowed: %d", t.min);
            return;
        }
        if (value > t.max) {
            reply_error(b, id, "Value exceeds maximum allowed: %d", t.max);
            return;
        }
    }
    snprintf(text, sizeof(text), "true");
    if (t.id == T_STATUS) {
        status_text(m, text, sizeof(text));
    } else if (t.id == T_VOLUME) {
        m->volume = value;
    } else if (t.id == T_BRIGHTNESS) {
        m->brightness = value;
    } else if (t.id == T_SYSINFO) {
        snprintf(text, sizeof(text),
                 "{\"board\":\"hybridgw-sim\",\"version\":\"2.4.2\"}");
    }
    m->calls++;
    reply_text(b, id, text);
}

int gw_sim_mcp_handle(struct gw_sim_mcp *m, const cJSON *msg, char **reply,
                      size_t *reply_len)
{
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(msg, "jsonrpc");
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
    const cJSON *idj = cJSON_GetObjectItemCaseSensitive(msg, "id");
    struct sbuf b = {0};

    *reply = NULL;
    *reply_len = 0;
    if (m->silent || !cJSON_IsObject(msg) || !cJSON_IsString(ver) ||
        strcmp(ver->valuestring, "2.0") != 0 || !cJSON_IsString(method)) {
        m->ignored++;
        return 0;
    }
    if (strncmp(method->valuestring, "notifications", 13) == 0) {
        return 0; /* no reply, by design */
    }
    if ((params != NULL && !cJSON_IsObject(params)) || !cJSON_IsNumber(idj)) {
        m->ignored++; /* string ids included: dropped without a word */
        return 0;
    }
    int id = idj->valueint;
    const char *meth = method->valuestring;
    if (strcmp(meth, "initialize") == 0) {
        const cJSON *caps =
            cJSON_GetObjectItemCaseSensitive(params, "capabilities");
        if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(caps, "vision"))) {
            m->vision_seen = true;
        }
        sb_fmt(&b, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{", id);
        sb_add(&b, "\"protocolVersion\":\"2024-11-05\",\"capabilities\":"
                   "{\"tools\":{}},\"serverInfo\":{\"name\":\"hybridgw-sim\","
                   "\"version\":\"2.4.2\"}}}");
    } else if (strcmp(meth, "tools/list") == 0) {
        tools_list(m, &b, id, params);
    } else if (strcmp(meth, "tools/call") == 0) {
        tools_call(m, &b, id, params);
    } else {
        reply_error(&b, id, "Method not implemented: %s", meth);
    }
    if (b.oom) {
        free(b.p);
        return GW_ENOMEM;
    }
    m->answered++;
    *reply = b.p;
    *reply_len = b.len;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Uplink clip                                                             */

struct gw_sim_clip {
    uint8_t *data;   /* every packet, back to back */
    size_t *off;     /* packet i starts at data + off[i] */
    uint16_t *len;   /* and has len[i] bytes */
    uint32_t speech; /* packets 0..speech-1 are voiced */
};

/* sin() for the test signal without libm (the tool does not link it):
 * range reduction and a Taylor series, ample for a test tone. */
static double sine(double x)
{
    const double two_pi = 2 * M_PI;

    x -= two_pi * (double)(int64_t)(x / two_pi);
    if (x > M_PI) {
        x -= two_pi;
    } else if (x < -M_PI) {
        x += two_pi;
    }
    if (x > M_PI / 2) {
        x = M_PI - x;
    } else if (x < -M_PI / 2) {
        x = -M_PI - x;
    }
    double x2 = x * x;
    return x * (1 - x2 / 6 * (1 - x2 / 20 * (1 - x2 / 42 * (1 - x2 / 72))));
}

/* A voiced, syllabic signal with a gliding pitch: enough like speech for
 * a VAD to fire and for Opus to use its speech modes. */
static void speech_pcm(int16_t *pcm, uint32_t frame, double *phase)
{
    for (int i = 0; i < UP_SAMPLES; i++) {
        double t = (double)(frame * UP_SAMPLES + (uint32_t)i) / UP_RATE;
        double f0 = 140.0 + 25.0 * sine(2 * M_PI * 0.7 * t);
        double syl = sine(2 * M_PI * 1.8 * t);
        double a = syl < 0 ? -syl : syl;
        double env = 0.15 + 0.85 * a * (2 - a);
        double s = 0;
        *phase += 2 * M_PI * f0 / UP_RATE;
        if (*phase > 2 * M_PI * 1000) {
            *phase -= 2 * M_PI * 1000; /* keeps sine() accurate */
        }
        for (int h = 1; h <= 12; h++) {
            double formant = h >= 3 && h <= 6 ? 1.6 : 1.0;
            s += formant * sine(*phase * h) / h;
        }
        pcm[i] = (int16_t)(6000.0 * env * s / 2.5);
    }
}

static void silence_pcm(int16_t *pcm, uint32_t *lcg)
{
    for (int i = 0; i < UP_SAMPLES; i++) {
        *lcg = *lcg * 1103515245u + 12345u;
        pcm[i] = (int16_t)((int)((*lcg >> 16) % 9) - 4); /* mic floor */
    }
}

int gw_sim_clip_create(uint32_t speech_frames, struct gw_sim_clip **out)
{
    uint32_t total = speech_frames + SILENCE_SETTLE + SILENCE_LOOP;
    struct gw_sim_clip *c;
    OpusEncoder *enc;
    int16_t pcm[UP_SAMPLES];
    uint8_t pkt[GW_UDP_MAX_PAYLOAD];
    double phase = 0;
    uint32_t lcg = 1;
    int err;

    if (speech_frames == 0 || speech_frames > 10000) {
        return GW_EINVAL;
    }
    c = calloc(1, sizeof(*c));
    enc = opus_encoder_create(UP_RATE, 1, OPUS_APPLICATION_AUDIO, &err);
    if (c == NULL || enc == NULL ||
        (c->data = malloc((size_t)total * GW_UDP_MAX_PAYLOAD)) == NULL ||
        (c->off = calloc(total, sizeof(*c->off))) == NULL ||
        (c->len = calloc(total, sizeof(*c->len))) == NULL) {
        gw_sim_clip_destroy(c);
        opus_encoder_destroy(enc);
        return enc == NULL ? GW_EOPUS : GW_ENOMEM;
    }
    opus_encoder_ctl(enc, OPUS_SET_VBR(1));
    opus_encoder_ctl(enc, OPUS_SET_DTX(1));
    opus_encoder_ctl(enc, OPUS_SET_COMPLEXITY(0));
    c->speech = speech_frames;
    size_t pos = 0;
    for (uint32_t i = 0; i < total; i++) {
        if (i < speech_frames) {
            speech_pcm(pcm, i, &phase);
        } else {
            silence_pcm(pcm, &lcg);
        }
        int n = opus_encode(enc, pcm, UP_SAMPLES, pkt, sizeof(pkt));
        if (n < 1) {
            opus_encoder_destroy(enc);
            gw_sim_clip_destroy(c);
            return GW_EOPUS;
        }
        memcpy(c->data + pos, pkt, (size_t)n);
        c->off[i] = pos;
        c->len[i] = (uint16_t)n;
        pos += (size_t)n;
    }
    opus_encoder_destroy(enc);
    *out = c;
    return 0;
}

void gw_sim_clip_destroy(struct gw_sim_clip *clip)
{
    if (clip != NULL) {
        free(clip->data);
        free(clip->off);
        free(clip->len);
        free(clip);
    }
}

static uint32_t silence_index(const struct gw_sim_clip *c, uint32_t k)
{
    if (k < SILENCE_SETTLE) {
        return c->speech + k;
    }
    return c->speech + SILENCE_SETTLE + (k - SILENCE_SETTLE) % SILENCE_LOOP;
}

/* Frame k of a turn: speech_frames of speech (cycling the clip), then
 * silence, whose settled part loops; speech_frames 0 = speech only,
 * silent = silence only. */
static void clip_frame(const struct gw_sim_clip *c, uint32_t k,
                       uint32_t speech_frames, bool silent, const uint8_t **p,
                       size_t *n)
{
    uint32_t i;

    if (silent) {
        i = silence_index(c, k);
    } else if (speech_frames == 0 || k < speech_frames) {
        i = k % c->speech;
    } else {
        i = silence_index(c, k - speech_frames);
    }
    *p = c->data + c->off[i];
    *n = c->len[i];
}

/* ---------------------------------------------------------------------- */
/* The device                                                              */

/* Application states of the firmware that matter on the wire, plus the
 * simulator's own start and end. */
enum state {
    ST_CONNECTING, /* waiting for CONNACK */
    ST_HELLO,      /* hello sent, waiting for a valid server hello */
    ST_OPENING,    /* resolving and connecting the UDP socket */
    ST_LISTENING,  /* listen start sent, mic streaming */
    ST_IDLE,       /* channel open, mic off (manual mode after stop) */
    ST_SPEAKING,   /* after tts start: downlink is played */
    ST_LINGER,     /* our goodbye sent; watching for a wrongful reply */
    ST_DONE        /* run finished */
};

static const char *const state_names[] = {"connecting", "hello", "opening",
                                          "listening",  "idle",  "speaking",
                                          "linger",     "done"};

/* One queued downlink frame, decrypted. */
struct play_slot {
    uint32_t ts;                      /* downlink timestamp (AEC echo) */
    uint16_t len;                     /* Opus bytes */
    uint8_t data[GW_UDP_MAX_PAYLOAD]; /* the Opus packet */
};

struct gw_sim_device {
    uv_loop_t *loop;
    struct gw_sim_device_options o; /* copied; strings below */
    char host[256];                 /* broker host */
    char client_id[GW_CLIENT_ID_MAX + 1];
    char username[256];
    char password[256];
    bool has_password;         /* password[] is to be sent */
    char pub_topic[TOPIC_MAX]; /* expanded publish topic */
    char sub_topic[TOPIC_MAX]; /* expanded, "" in stock mode */
    char subject[GW_CLIENT_ID_MAX + GW_SESSION_ID_MAX + 16]; /* log prefix */
    struct gw_mqtt_link *link; /* NULL once closed */
    uv_udp_t udp;              /* connect()ed to udp.server */
    int forge_fd;              /* a second socket for forgeries, or -1 */
    struct sockaddr_in server; /* udp.server:port, for forgeries */
    uv_getaddrinfo_t resolve;  /* udp.server lookup */
    uv_timer_t uplink_timer;   /* one frame per frame_ms */
    uv_timer_t play_timer;     /* end of the sounding frame */
    uv_timer_t watchdog;       /* the current phase's deadline */
    uv_timer_t channel_timer;  /* 120 s without anything */
    uv_timer_t duration_timer; /* load runs end here */
    uv_timer_t done_timer;     /* reports the end from the loop */
    int open_handles;          /* handles and reqs to wait for */
    bool udp_open, resolving, finished, closing, stopped;
    enum state state;
    bool hello_pending; /* our hello awaits its answer */
    bool channel_open;  /* UDP connected */
    uint16_t udp_port;  /* udp.port of the hello */
    uint64_t t0_ns, hello_sent_ns, turn_start_ns, speech_end_ns, stop_ns;
    /* Session, from the server hello. */
    uint8_t key[16], nonce[16];
    char sid[GW_SESSION_ID_MAX + 1];
    int32_t sample_rate, frame_duration; /* sticky across hellos */
    uint32_t up_seq;                     /* last uplink sequence sent */
    struct gw_aes_ctr *aes;
    struct gw_sim_downlink dl;
    /* Turns. */
    uint32_t turn, turn_frame, turn_played;
    bool uplink_on, final_turn, stop_pending, aborted;
    uint64_t next_frame_ns, frame_ns;
    /* Playback: the decode queue and the frame now sounding. */
    struct play_slot *queue;
    size_t q_head, q_len;
    bool playing;
    uint64_t play_end_ns; /* when the sounding frame ends */
    OpusDecoder *dec;
    int32_t dec_rate;
    int16_t *pcm;
    uint32_t aec_ts[3]; /* played timestamps to echo */
    size_t aec_n;
    /* Downlink arrival jitter. */
    uint64_t last_arrival_ns;
    uint64_t last_dur_ns;
    double jitter_ns;
    EVP_MD_CTX *up_md, *down_md;
    struct gw_sim_mcp mcp;
    struct gw_sim_result r;
    gw_sim_device_close_cb close_cb;
    void *close_arg;
    uint8_t rx[RX_BUF]; /* one datagram */
};

static void finish(struct gw_sim_device *d);
static void on_watchdog(uv_timer_t *t);
static void begin_turn(struct gw_sim_device *d, bool listen_msg, bool last);
static void device_goodbye(struct gw_sim_device *d);

static double ms_since(uint64_t from_ns, uint64_t to_ns)
{
    return ((double)to_ns - (double)from_ns) / 1e6;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
event(struct gw_sim_device *d, const char *fmt, ...)
{
    char line[640];
    va_list ap;

    if (d->o.on_event == NULL || d->closing) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    d->o.on_event(d, ms_since(d->t0_ns, uv_hrtime()), line, d->o.arg);
}

/* Ends the run with a reason; the first reason wins. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
fail(struct gw_sim_device *d, const char *fmt, ...)
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
    finish(d);
}

static void set_subject(struct gw_sim_device *d)
{
    snprintf(d->subject, sizeof(d->subject), "dev=%s sid=%s", d->client_id,
             d->sid[0] ? d->sid : "null");
}

static void watch(struct gw_sim_device *d, uint32_t ms)
{
    if (ms == 0) {
        uv_timer_stop(&d->watchdog);
    } else {
        uv_timer_start(&d->watchdog, on_watchdog, ms, 0);
    }
}

/* One handle or request finished closing; the last one frees. */
static void release(struct gw_sim_device *d)
{
    d->open_handles--;
    if (!d->closing || d->open_handles > 0) {
        return;
    }
    if (d->close_cb != NULL) {
        d->close_cb(d, d->close_arg);
    }
    gw_aes_ctr_destroy(d->aes);
    EVP_MD_CTX_free(d->up_md);
    EVP_MD_CTX_free(d->down_md);
    opus_decoder_destroy(d->dec);
    free(d->queue);
    free(d->pcm);
    free(d);
}

static void on_handle_closed(uv_handle_t *h)
{
    release(h->data);
}

static void close_udp(struct gw_sim_device *d)
{
    if (d->resolving) {
        uv_cancel((uv_req_t *)&d->resolve); /* its callback still runs */
    }
    if (d->forge_fd >= 0) {
        close(d->forge_fd);
        d->forge_fd = -1;
    }
    if (d->udp_open) {
        uv_udp_recv_stop(&d->udp);
        uv_close((uv_handle_t *)&d->udp, on_handle_closed);
        d->udp_open = false;
    }
    d->channel_open = false;
    d->uplink_on = false;
    uv_timer_stop(&d->uplink_timer);
    uv_timer_stop(&d->channel_timer);
}

static int publish(struct gw_sim_device *d, const char *msg, size_t len)
{
    int rc = gw_mqtt_link_publish(d->link, d->pub_topic, msg, len);

    if (rc != 0) {
        /* The firmware treats a failed publish as a closed channel. */
        fail(d, "publish to %s failed: %s", d->pub_topic, gw_strerror(rc));
    }
    return rc;
}

/* Device messages are concatenated, unescaped, as the firmware does:
 * set_session checked that the session_id needs no escaping. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int
send_msg(struct gw_sim_device *d, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return publish(d, msg, (size_t)n < sizeof(msg) ? (size_t)n : 0);
}

static const char *mode_name(enum gw_sim_mode m)
{
    return m == GW_SIM_MODE_MANUAL     ? "manual"
           : m == GW_SIM_MODE_REALTIME ? "realtime"
                                       : "auto";
}

/* ---- uplink ---------------------------------------------------------- */

static uint32_t fnv32(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 16777619u;
    }
    return h;
}

static int64_t unix_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void log_packet(struct gw_sim_device *d, const char *dir, uint32_t seq,
                       const uint8_t *opus, size_t len)
{
    if (d->o.packet_log != NULL) {
        fprintf(d->o.packet_log,
                "%s,%s,%" PRIu32 ",%" PRId64 ",%zu,%08" PRIx32 "\n", dir,
                d->client_id, seq, unix_us(), len, fnv32(opus, len));
    }
}

static void put_be(uint8_t *p, uint32_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

/*
 * What a blind forger can do: it saw (or guessed) the ssrc but has no key,
 * so it sends a header with a sequence ahead of the device's and noise
 * for a payload, from another port. The gateway must not move the
 * device's address or disturb its sequence.
 */
static void forge_send(struct gw_sim_device *d, const uint8_t *pkt, size_t len)
{
    uint8_t fake[GW_UDP_HEADER_LEN + GW_UDP_MAX_PAYLOAD];

    if (d->forge_fd < 0) {
        d->forge_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (d->forge_fd < 0) {
            return;
        }
    }
    memcpy(fake, pkt, GW_UDP_HEADER_LEN);
    put_be(fake + 12, d->up_seq + 1000, 4);
    for (size_t i = GW_UDP_HEADER_LEN; i < len; i++) {
        fake[i] = (uint8_t)(d->up_seq * 131 + i * 7);
    }
    if (sendto(d->forge_fd, fake, len, 0, (const struct sockaddr *)&d->server,
               sizeof(d->server)) == (ssize_t)len) {
        d->r.up_forged++;
    }
}

/* Header = the nonce with len@2, timestamp@8, seq@12; IV = header. */
static void uplink_send(struct gw_sim_device *d, const uint8_t *opus,
                        size_t len)
{
    uint8_t pkt[GW_UDP_HEADER_LEN + GW_UDP_MAX_PAYLOAD];
    uint32_t ts = 0;

    if (d->o.aec && d->aec_n > 0) {
        ts = d->aec_ts[0];
        memmove(d->aec_ts, d->aec_ts + 1, --d->aec_n * sizeof(uint32_t));
    }
    memcpy(pkt, d->nonce, GW_UDP_HEADER_LEN);
    put_be(pkt + 2, (uint32_t)len, 2);
    put_be(pkt + 8, ts, 4);
    put_be(pkt + 12, ++d->up_seq, 4);
    if (gw_aes_ctr_apply(d->aes, pkt, opus, pkt + GW_UDP_HEADER_LEN, len) !=
        0) {
        fail(d, "AES-CTR failed");
        return;
    }
    uv_buf_t b = uv_buf_init((char *)pkt, (unsigned)(GW_UDP_HEADER_LEN + len));
    int rc = uv_udp_try_send(&d->udp, &b, 1, NULL);
    if (rc < 0) {
        d->r.up_send_errors++;
        GW_LOG(GW_LOG_DEBUG, d->subject, "udp send: %s", uv_strerror(rc));
        return;
    }
    d->r.up_packets++;
    d->r.up_bytes += len;
    EVP_DigestUpdate(d->up_md, opus, len);
    log_packet(d, "up", d->up_seq, opus, len);
    if (d->o.replay_every > 0 && d->up_seq % d->o.replay_every == 0 &&
        uv_udp_try_send(&d->udp, &b, 1, NULL) >= 0) {
        d->r.up_replayed++; /* as a network may duplicate it */
    }
    if (d->o.forge_every > 0 && d->up_seq % d->o.forge_every == 0) {
        forge_send(d, pkt, GW_UDP_HEADER_LEN + len);
    }
}

/* End of the user's speech in this turn. */
static void speech_ended(struct gw_sim_device *d)
{
    d->speech_end_ns = uv_hrtime();
    event(d, "> audio: %" PRIu32 " speech frames sent (turn %" PRIu32 ")",
          d->turn_frame, d->turn + 1);
    if (d->o.mode == GW_SIM_MODE_MANUAL) {
        /* Push-to-talk released: listen stop, mic off, idle. */
        d->uplink_on = false;
        d->state = ST_IDLE;
        event(d, "> listen stop");
        send_msg(d,
                 "{\"session_id\":\"%s\",\"type\":\"listen\",\"state\":"
                 "\"stop\"}",
                 d->sid);
    }
}

static void send_frame(struct gw_sim_device *d)
{
    const uint8_t *p;
    size_t n;

    clip_frame(d->o.clip, d->turn_frame, d->o.speech_frames, d->final_turn, &p,
               &n);
    uplink_send(d, p, n);
    d->turn_frame++;
    if (!d->final_turn && d->turn_frame == d->o.speech_frames) {
        speech_ended(d);
    }
}

static bool mic_on(const struct gw_sim_device *d)
{
    return d->uplink_on && !d->finished &&
           (d->state == ST_LISTENING ||
            (d->state == ST_SPEAKING && d->o.mode == GW_SIM_MODE_REALTIME));
}

/* Deadlines come from a fixed clock, so the rate stays exact even when
 * the loop is late; a few missed frames are caught up. */
static void on_uplink(uv_timer_t *t)
{
    struct gw_sim_device *d = t->data;
    uint64_t now = uv_hrtime();
    int sent = 0;

    if (d->closing || !mic_on(d)) {
        return;
    }
    while (d->next_frame_ns <= now && sent < MAX_CATCH_UP && mic_on(d)) {
        send_frame(d);
        d->next_frame_ns += d->frame_ns;
        sent++;
    }
    if (!mic_on(d)) {
        return;
    }
    if (d->next_frame_ns <= now) {
        d->next_frame_ns = now + d->frame_ns; /* too far behind: resync */
    }
    uv_timer_start(t, on_uplink, (d->next_frame_ns - now + 999999) / 1000000,
                   0);
}

static void uplink_start(struct gw_sim_device *d)
{
    d->uplink_on = true;
    if (!uv_is_active((uv_handle_t *)&d->uplink_timer)) {
        /* The first frame exists once one frame of audio was captured,
         * so listen start always precedes it on the wire. */
        d->next_frame_ns = uv_hrtime() + d->frame_ns;
        uv_timer_start(&d->uplink_timer, on_uplink, d->frame_ns / 1000000, 0);
    }
}

/* ---- downlink and playback ------------------------------------------- */

static void log_drop(struct gw_sim_device *d, enum gw_sim_drop why)
{
    uint64_t n = d->r.drops[why];

    /* Per-packet logging is rate limited: first few, then every 1000th. */
    if (n <= 3 || n % 1000 == 0) {
        GW_LOG(GW_LOG_DEBUG, d->subject, "downlink dropped (%s), %" PRIu64,
               gw_sim_drop_name(why), n);
    }
    if (n == 1 || n == 10 || n == 100 || n == 1000) {
        event(d, "! downlink dropped: %s (%" PRIu64 " so far)",
              gw_sim_drop_name(why), n);
    }
}

static void sync_downlink(struct gw_sim_device *d)
{
    for (int i = 0; i <= GW_SIM_DROP_REPLAY; i++) {
        d->r.drops[i] = d->dl.drops[i];
    }
    d->r.down_accepted = d->dl.accepted;
    d->r.down_lost = d->dl.lost;
}

static void turn_done(struct gw_sim_device *d);

static bool ensure_decoder(struct gw_sim_device *d)
{
    int err;

    if (d->dec != NULL && d->dec_rate == d->sample_rate) {
        return true;
    }
    opus_decoder_destroy(d->dec);
    d->dec = opus_decoder_create(d->sample_rate, 1, &err);
    if (d->dec == NULL) {
        fail(d,
             "cannot decode downlink at the hello's sample_rate %" PRId32
             ": %s",
             d->sample_rate, opus_strerror(err));
        return false;
    }
    d->dec_rate = d->sample_rate;
    if (d->pcm == NULL &&
        (d->pcm = malloc(GW_OPUS_MAX_SAMPLES_48K * sizeof(int16_t))) == NULL) {
        fail(d, "out of memory");
        return false;
    }
    return true;
}

/* Decodes (or inspects) one frame as the firmware's decoder would, which
 * holds frame_duration ms at most. Returns its duration in ns, 0 if bad. */
static uint64_t frame_duration_ns(struct gw_sim_device *d,
                                  const struct play_slot *s)
{
    struct gw_opus_info info;

    if (s->len == 0) {
        return 0;
    }
    if (d->o.decode) {
        if (!ensure_decoder(d)) {
            return 0;
        }
        int max = d->sample_rate * d->frame_duration / 1000;
        int n = opus_decode(d->dec, s->data, s->len, d->pcm, max, 0);
        return n > 0 ? (uint64_t)n * 1000000000u / (uint64_t)d->sample_rate : 0;
    }
    if (gw_opus_packet_inspect(s->data, s->len, &info) != 0 ||
        info.samples_48k > 48 * d->frame_duration) {
        return 0;
    }
    return (uint64_t)info.samples_48k * 1000000u / 48u;
}

static void played(struct gw_sim_device *d, const struct play_slot *s)
{
    uint64_t now = uv_hrtime();

    d->r.down_played++;
    d->turn_played++;
    EVP_DigestUpdate(d->down_md, s->data, s->len);
    if (d->o.aec) {
        if (d->aec_n == 3) {
            memmove(d->aec_ts, d->aec_ts + 1, 2 * sizeof(uint32_t));
            d->aec_n = 2;
        }
        d->aec_ts[d->aec_n++] = s->ts;
    }
    if (d->turn_played == 1) {
        double ms = ms_since(d->speech_end_ns, now);
        if (d->turn == 0 && isnan(d->r.first_audio_ms)) {
            d->r.first_audio_ms = ms;
        }
        event(d, "< first audio frame played (%+.1f ms after speech end)", ms);
    }
    if (d->o.abort_after > 0 && d->turn_played == d->o.abort_after &&
        !d->aborted) {
        d->aborted = true; /* the device stays speaking until tts stop */
        event(d, "> abort (after %" PRIu32 " frames)", d->turn_played);
        send_msg(d, "{\"session_id\":\"%s\",\"type\":\"abort\"}", d->sid);
    }
}

/* Plays queued frames one frame duration apart, on an absolute clock. */
static void on_play(uv_timer_t *t);

static void play_pump(struct gw_sim_device *d, uint64_t start_ns)
{
    while (d->q_len > 0 && !d->finished) {
        struct play_slot *s = &d->queue[d->q_head];
        d->q_head = (d->q_head + 1) % QUEUE_FRAMES;
        d->q_len--;
        uint64_t dur = frame_duration_ns(d, s);
        if (dur == 0) {
            d->r.drops[GW_SIM_DROP_OPUS]++;
            log_drop(d, GW_SIM_DROP_OPUS);
            continue;
        }
        played(d, s);
        d->playing = true;
        d->play_end_ns = start_ns + dur;
        uint64_t now = uv_hrtime();
        uint64_t wait = d->play_end_ns > now ? d->play_end_ns - now : 0;
        uv_timer_start(&d->play_timer, on_play, (wait + 999999) / 1000000, 0);
        return;
    }
    d->playing = false;
    if (d->stop_pending && !d->finished) {
        turn_done(d); /* tts stop and the playback drained */
    }
}

static void on_play(uv_timer_t *t)
{
    struct gw_sim_device *d = t->data;

    if (d->closing || d->finished) {
        return;
    }
    d->playing = false;
    play_pump(d, d->play_end_ns);
}

static void note_arrival(struct gw_sim_device *d, const uint8_t *opus,
                         size_t len)
{
    uint64_t now = uv_hrtime();
    struct gw_opus_info info;
    uint64_t dur = (uint64_t)d->frame_duration * 1000000u;

    if (gw_opus_packet_inspect(opus, len, &info) == 0) {
        dur = (uint64_t)info.samples_48k * 1000000u / 48u;
    }
    /* A pause over a second is a new utterance, not jitter. */
    if (d->last_arrival_ns != 0 && now - d->last_arrival_ns < 1000000000u) {
        double dev =
            (double)(now - d->last_arrival_ns) - (double)d->last_dur_ns;
        dev = dev < 0 ? -dev : dev;
        d->jitter_ns += (dev - d->jitter_ns) / 16.0;
        d->r.jitter_ms = d->jitter_ns / 1e6;
        if (dev / 1e6 > d->r.max_jitter_ms) {
            d->r.max_jitter_ms = dev / 1e6;
        }
    }
    d->last_arrival_ns = now;
    d->last_dur_ns = dur;
}

static void on_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf)
{
    struct gw_sim_device *d = h->data;

    (void)size;
    *buf = uv_buf_init((char *)d->rx, sizeof(d->rx));
}

static void on_udp_recv(uv_udp_t *u, ssize_t nread, const uv_buf_t *buf,
                        const struct sockaddr *addr, unsigned flags)
{
    struct gw_sim_device *d = u->data;
    struct gw_udp_header h;

    (void)buf;
    (void)addr;
    (void)flags;
    if (d->closing || d->finished || nread == 0) {
        return;
    }
    if (nread < 0) {
        GW_LOG(GW_LOG_DEBUG, d->subject, "udp receive: %s",
               uv_strerror((int)nread));
        return;
    }
    d->r.down_datagrams++;
    int err = gw_sim_downlink_check(&d->dl, d->rx, (size_t)nread, &h);
    sync_downlink(d);
    if (err != 0) {
        log_drop(d, drop_of(err));
        return;
    }
    uint8_t *opus = d->rx + GW_UDP_HEADER_LEN;
    if (gw_aes_ctr_apply(d->aes, d->rx, opus, opus, h.payload_len) != 0) {
        return; /* firmware: decrypt failure drops */
    }
    uv_timer_again(&d->channel_timer);
    note_arrival(d, opus, h.payload_len);
    log_packet(d, "down", h.sequence, opus, h.payload_len);
    if (d->state != ST_SPEAKING) {
        d->r.drops[GW_SIM_DROP_IDLE]++;
        log_drop(d, GW_SIM_DROP_IDLE);
        return;
    }
    if (d->q_len >= QUEUE_FRAMES) {
        d->r.drops[GW_SIM_DROP_QUEUE]++;
        log_drop(d, GW_SIM_DROP_QUEUE);
        return;
    }
    struct play_slot *s = &d->queue[(d->q_head + d->q_len) % QUEUE_FRAMES];
    s->ts = h.timestamp;
    s->len = h.payload_len;
    memcpy(s->data, opus, h.payload_len);
    d->q_len++;
    if (!d->playing) {
        play_pump(d, uv_hrtime());
    }
}

/* ---- turns ----------------------------------------------------------- */

static void begin_turn(struct gw_sim_device *d, bool listen_msg, bool last)
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
        event(d, "> listen start mode=%s%s", mode_name(d->o.mode),
              last ? " (waiting for the server's goodbye)" : "");
        if (send_msg(d,
                     "{\"session_id\":\"%s\",\"type\":\"listen\","
                     "\"state\":\"start\",\"mode\":\"%s\"}",
                     d->sid, mode_name(d->o.mode)) != 0) {
            return;
        }
    }
    uplink_start(d);
    watch(d, last ? d->o.end_timeout_ms : d->o.turn_timeout_ms);
}

/* What follows the last turn. */
static void end_conversation(struct gw_sim_device *d)
{
    switch (d->o.end) {
    case GW_SIM_END_GOODBYE:
        device_goodbye(d);
        break;
    case GW_SIM_END_SERVER:
        d->turn++;
        d->final_turn = true;
        if (d->o.mode == GW_SIM_MODE_MANUAL) {
            d->state = ST_IDLE; /* push to talk: nothing to send */
            watch(d, d->o.end_timeout_ms);
        } else {
            begin_turn(d, d->o.mode == GW_SIM_MODE_AUTO, true);
        }
        break;
    case GW_SIM_END_NONE:
        event(d, "channel dropped without goodbye");
        close_udp(d);
        finish(d);
        break;
    }
}

/* tts stop arrived and the queue drained. */
static void turn_done(struct gw_sim_device *d)
{
    d->stop_pending = false;
    d->r.turns_done++;
    d->stop_ns = uv_hrtime();
    event(d, "turn %" PRIu32 " done: %" PRIu32 " frames played", d->turn + 1,
          d->turn_played);
    if (d->o.turns > 0 && d->r.turns_done >= d->o.turns) {
        end_conversation(d);
        return;
    }
    d->turn++;
    /* auto re-sends listen start; manual presses the button again;
     * realtime just keeps listening. */
    begin_turn(d, d->o.mode != GW_SIM_MODE_REALTIME, false);
}

static void device_goodbye(struct gw_sim_device *d)
{
    /* Firmware order: UDP socket destroyed, then the goodbye. */
    close_udp(d);
    uv_timer_stop(&d->play_timer);
    d->q_len = 0;
    d->playing = false;
    d->state = ST_LINGER;
    event(d, "> goodbye");
    if (send_msg(d, "{\"session_id\":\"%s\",\"type\":\"goodbye\"}", d->sid) ==
        0) {
        d->r.goodbye_sent = true;
        watch(d, d->o.linger_ms > 0 ? d->o.linger_ms : 1);
    }
}

/* ---- hello and the UDP channel --------------------------------------- */

static void send_hello(struct gw_sim_device *d)
{
    char msg[512];

    d->sid[0] = '\0'; /* the firmware clears it before a hello */
    set_subject(d);
    snprintf(msg, sizeof(msg),
             "{\"type\":\"hello\",\"version\":3,\"transport\":\"udp\","
             "\"features\":{%s\"mcp\":true,\"glyph_push\":false},"
             "\"audio_params\":{\"format\":\"opus\",\"sample_rate\":16000,"
             "\"channels\":1,\"frame_duration\":60}}",
             d->o.aec ? "\"aec\":true," : "");
    d->state = ST_HELLO;
    d->hello_pending = true;
    d->hello_sent_ns = uv_hrtime();
    event(d, "> hello to %s (%s)", d->pub_topic,
          d->sub_topic[0] ? "subscribing" : "stock, no subscription");
    if (publish(d, msg, strlen(msg)) == 0) {
        watch(d, d->o.hello_timeout_ms);
    }
}

static void on_channel_timeout(uv_timer_t *t);

static void udp_connect(struct gw_sim_device *d, const struct sockaddr *addr)
{
    char ip[64] = "?";
    int rc;

    uv_ip4_name((const struct sockaddr_in *)addr, ip, sizeof(ip));
    memcpy(&d->server, addr, sizeof(d->server));
    uv_udp_init(d->loop, &d->udp);
    d->udp.data = d;
    d->udp_open = true;
    d->open_handles++;
    if ((rc = uv_udp_connect(&d->udp, addr)) != 0 ||
        (rc = uv_udp_recv_start(&d->udp, on_alloc, on_udp_recv)) != 0) {
        fail(d, "UDP connect to %s:%u failed: %s", ip, d->udp_port,
             uv_strerror(rc));
        return;
    }
    uv_timer_start(&d->channel_timer, on_channel_timeout,
                   d->o.channel_timeout_ms, d->o.channel_timeout_ms);
    d->channel_open = true;
    event(d, "udp connected to %s:%u", ip, d->udp_port);
    if (d->o.wake_word) {
        const uint8_t *p;
        size_t n;
        for (uint32_t i = 0; i < WAKE_FRAMES && !d->finished; i++) {
            clip_frame(d->o.clip, i, 0, false, &p, &n);
            uplink_send(d, p, n);
        }
        event(d, "> wake-word audio: %d frames at once", WAKE_FRAMES);
        event(d, "> listen detect");
        if (send_msg(d,
                     "{\"session_id\":\"%s\",\"type\":\"listen\","
                     "\"state\":\"detect\",\"text\":\"" WAKE_WORD "\"}",
                     d->sid) != 0) {
            return;
        }
    }
    begin_turn(d, true, false);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct gw_sim_device *d = req->data;

    d->resolving = false;
    if (status == 0 && !d->closing && !d->finished) {
        struct sockaddr_in a;
        memcpy(&a, res->ai_addr, sizeof(a));
        a.sin_port = htons(d->udp_port);
        udp_connect(d, (const struct sockaddr *)&a);
    } else if (!d->closing && !d->finished) {
        fail(d, "cannot resolve udp.server: %s", uv_strerror(status));
    }
    uv_freeaddrinfo(res);
    release(d); /* the request counted as a handle */
}

static void open_udp(struct gw_sim_device *d, const char *server)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM};
    struct sockaddr_in a;

    d->state = ST_OPENING;
    watch(d, d->o.hello_timeout_ms);
    if (uv_ip4_addr(server, d->udp_port, &a) == 0) {
        udp_connect(d, (const struct sockaddr *)&a);
        return;
    }
    d->resolve.data = d;
    int rc =
        uv_getaddrinfo(d->loop, &d->resolve, on_resolved, server, NULL, &hints);
    if (rc != 0) {
        fail(d, "cannot resolve udp.server %s: %s", server, uv_strerror(rc));
        return;
    }
    d->resolving = true;
    d->open_handles++;
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
        event(d, "< hello INVALID, ignored as firmware 2.4 does: %s", why);
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
        fail(d, "cannot install the hello's AES key");
        return;
    }
    d->up_seq = 0;
    gw_sim_downlink_reset(&d->dl);
    snprintf(d->sid, sizeof(d->sid), "%s", h.session_id);
    set_subject(d);
    if (!d->hello_pending) {
        /* The firmware re-keys but keeps its socket: a broken session. */
        d->r.hello_duplicate++;
        gw_log(GW_LOG_WARN, d->subject, "extra server hello (%" PRIu32 ")",
               d->r.hello_duplicate);
        event(d,
              "< hello AGAIN (extra #%" PRIu32 "): only one may answer a "
              "device hello; re-keyed, sequences restart",
              d->r.hello_duplicate);
        return;
    }
    d->hello_pending = false;
    d->r.hellos++;
    d->r.hello_ms = ms_since(d->hello_sent_ns, now);
    snprintf(d->r.session_id, sizeof(d->r.session_id), "%s", d->sid);
    event(d,
          "< hello session_id=%s udp=%s:%u downlink=%" PRId32 " Hz/%" PRId32
          " ms (%.1f ms after ours)",
          d->sid[0] ? d->sid : "(none)", h.server, h.port, d->sample_rate,
          d->frame_duration, d->r.hello_ms);
    if (!sid_safe(d->sid)) {
        fail(d, "session_id needs JSON escaping, which the firmware does not "
                "do: every later device message would be broken");
        return;
    }
    d->udp_port = h.port;
    open_udp(d, h.server);
}

static void on_goodbye(struct gw_sim_device *d, const char *sid)
{
    if (sid == NULL || strcmp(sid, d->sid) != 0) {
        d->r.goodbye_ignored++; /* firmware 2.3+: only the current id */
        event(d, "< goodbye for %s%s%s ignored (current session %s)",
              sid ? "\"" : "", sid ? sid : "no session_id", sid ? "\"" : "",
              d->sid);
        return;
    }
    if (d->state == ST_LINGER) {
        d->r.goodbye_replied = true;
        event(d, "< goodbye in reply to ours: a gateway must never answer a "
                 "device goodbye");
        finish(d);
        return;
    }
    if (!d->channel_open) {
        d->r.goodbye_ignored++;
        event(d, "< goodbye with no channel open (ignored)");
        return;
    }
    d->r.goodbye_received = true;
    if (d->stop_ns != 0) {
        d->r.goodbye_ms = ms_since(d->stop_ns, uv_hrtime());
    }
    event(d, "< goodbye: channel closed, no reply");
    close_udp(d);
    d->state = ST_IDLE;
    finish(d);
}

static void on_tts(struct gw_sim_device *d, const cJSON *root)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "state");
    const char *text =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "text"));
    double ms = ms_since(d->speech_end_ns, uv_hrtime());

    if (!cJSON_IsString(st)) {
        fail(d, "tts message without a string state: firmware before 2.4 "
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
            event(d, "< tts start (ignored in state %s)",
                  state_names[d->state]);
            return;
        }
        if (d->queue == NULL &&
            (d->queue = calloc(QUEUE_FRAMES, sizeof(*d->queue))) == NULL) {
            fail(d, "out of memory");
            return;
        }
        event(d, "< tts start (%+.1f ms after speech end)", ms);
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
        d->r.tts_stop++;
        if (d->turn == 0 && isnan(d->r.tts_stop_ms)) {
            d->r.tts_stop_ms = ms;
        }
        event(d, "< tts stop (%+.1f ms after speech end, %zu frames queued)",
              ms, d->q_len);
        if (d->state == ST_SPEAKING) {
            d->stop_pending = true;
            if (!d->playing) {
                play_pump(d, uv_hrtime());
            }
        }
    } else if (strcmp(st->valuestring, "sentence_start") == 0) {
        d->r.tts_sentence++;
        event(d, "< tts sentence_start \"%s\"", text ? text : "");
    } else {
        event(d, "< tts state \"%s\" (ignored)", st->valuestring);
    }
}

static void on_stt(struct gw_sim_device *d, const cJSON *root)
{
    const char *text =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "text"));
    double ms = ms_since(d->speech_end_ns, uv_hrtime());

    d->r.stt_count++;
    if (d->r.stt_count == 1) {
        snprintf(d->r.stt, sizeof(d->r.stt), "%s", text ? text : "");
    }
    if (d->turn == 0 && isnan(d->r.stt_ms)) {
        d->r.stt_ms = ms;
    }
    event(d, "< stt \"%s\" (%+.1f ms after speech end)", text ? text : "", ms);
}

static void on_mcp(struct gw_sim_device *d, const cJSON *root)
{
    const cJSON *payload = cJSON_GetObjectItemCaseSensitive(root, "payload");
    const char *method = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(payload, "method"));
    char *reply = NULL;
    size_t len = 0;

    if (!cJSON_IsObject(payload)) {
        d->mcp.ignored++;
    } else if (gw_sim_mcp_handle(&d->mcp, payload, &reply, &len) != 0) {
        fail(d, "out of memory");
        return;
    }
    d->r.mcp_answered = (uint32_t)d->mcp.answered;
    d->r.mcp_ignored = (uint32_t)d->mcp.ignored;
    if (reply == NULL) {
        event(d, "< mcp %s (no reply, as the firmware)", method ? method : "-");
        return;
    }
    size_t cap = len + strlen(d->sid) + 64;
    char *msg = malloc(cap);
    if (msg == NULL) {
        free(reply);
        fail(d, "out of memory");
        return;
    }
    int n = snprintf(msg, cap,
                     "{\"session_id\":\"%s\",\"type\":\"mcp\",\"payload\":%s}",
                     d->sid, reply);
    event(d, "< mcp %s > reply of %d bytes", method, n);
    publish(d, msg, (size_t)n);
    free(msg);
    free(reply);
}

static void on_other(struct gw_sim_device *d, const struct gw_envelope *env)
{
    const cJSON *root = env->root;
#define STR(key)                                                               \
    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, key))

    switch (env->kind) {
    case GW_MSG_LLM:
        d->r.llm_count++;
        event(d, "< llm emotion=%s", STR("emotion") ? STR("emotion") : "-");
        break;
    case GW_MSG_ALERT:
        d->r.alert_count++; /* needs status, message and emotion strings */
        event(d, "< alert %s",
              STR("status") && STR("message") && STR("emotion")
                  ? STR("message")
                  : "(incomplete, ignored)");
        break;
    case GW_MSG_SYSTEM:
        d->r.system_count++;
        event(d, "< system command=%s", STR("command") ? STR("command") : "-");
        if (STR("command") && strcmp(STR("command"), "reboot") == 0 &&
            d->channel_open) {
            device_goodbye(d); /* close the channel, then reboot */
        }
        break;
    case GW_MSG_CUSTOM:
        d->r.custom_count++;
        event(d, "< custom");
        break;
    default:
        d->r.other_count++;
        event(d, "< %s (unknown type, ignored)", env->type);
        break;
    }
#undef STR
}

/* Stock firmware ignores the topic: everything on the connection counts. */
static void on_mqtt_message(struct gw_mqtt_link *link, const char *topic,
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
        d->r.oversize++;
    }
    int err =
        gw_envelope_parse((const char *)payload, len, MSG_PARSE_MAX, &env);
    if (err != 0) {
        d->r.bad_json++;
        GW_LOG(GW_LOG_DEBUG, d->subject, "message dropped: %s",
               gw_strerror(err));
        event(d, "< unparsable message dropped (%s)", gw_strerror(err));
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

static void on_mqtt_state(struct gw_mqtt_link *link, bool up, void *arg)
{
    struct gw_sim_device *d = arg;

    (void)link;
    if (d->closing || d->finished) {
        return;
    }
    if (!up) {
        /*
         * esp-mqtt reconnects by itself and the audio channel stays open:
         * only 120 s without anything received ends it (firmware section
         * 7). A broker restart is not the "network lost" of the board.
         */
        event(d, "mqtt connection lost (state %s); reconnecting",
              state_names[d->state]);
        return;
    }
    if (!d->r.mqtt_connected) {
        d->r.mqtt_connected = true;
        d->r.connect_ms = ms_since(d->t0_ns, uv_hrtime());
        event(d, "mqtt connected to %s:%d as %s", d->host, d->o.port,
              d->client_id);
    }
    if (d->state == ST_CONNECTING) {
        send_hello(d);
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
                                    drop_names[i], r->drops[i]);
        }
    }
    if (pos > 0) {
        set_reason(d, "strict downlink checks failed:%s", v);
    } else if (r->drops[GW_SIM_DROP_QUEUE] > 0) {
        set_reason(d,
                   "decode queue overflow: %" PRIu64 " frames dropped "
                   "(downlink not paced near real time)",
                   r->drops[GW_SIM_DROP_QUEUE]);
    } else if (r->hello_duplicate > 0) {
        set_reason(d,
                   "%" PRIu32 " extra server hello(s): exactly one may "
                   "answer each device hello",
                   r->hello_duplicate);
    } else if (r->goodbye_replied) {
        set_reason(d, "the device's goodbye was answered with a goodbye");
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

static void digest_hex(EVP_MD_CTX *md, char out[65])
{
    unsigned char h[EVP_MAX_MD_SIZE];
    unsigned n = 0;

    if (EVP_DigestFinal_ex(md, h, &n) != 1 ||
        gw_hex_encode(h, n, out, 65) != 0) {
        out[0] = '\0';
    }
}

static void finish(struct gw_sim_device *d)
{
    if (d->finished) {
        return;
    }
    d->finished = true;
    close_udp(d);
    uv_timer_stop(&d->play_timer);
    uv_timer_stop(&d->watchdog);
    uv_timer_stop(&d->duration_timer);
    sync_downlink(d);
    d->r.mcp_answered = (uint32_t)d->mcp.answered;
    d->r.mcp_ignored = (uint32_t)d->mcp.ignored;
    digest_hex(d->up_md, d->r.up_sha256);
    digest_hex(d->down_md, d->r.down_sha256);
    evaluate(d);
    d->state = ST_DONE;
    d->r.ok = d->r.reason[0] == '\0';
    d->r.done = true;
    if (!d->r.ok) {
        gw_log(GW_LOG_INFO, d->subject, "run failed: %s", d->r.reason);
    }
    event(d, "end of run: %s%s", d->r.ok ? "ok" : "FAILED: ", d->r.reason);
    uv_timer_start(&d->done_timer, on_done_timer, 0, 0);
}

static void on_watchdog(uv_timer_t *t)
{
    struct gw_sim_device *d = t->data;

    if (d->closing || d->finished) {
        return;
    }
    switch (d->state) {
    case ST_CONNECTING:
        fail(d, "no MQTT connection to %s:%d within %" PRIu32 " ms", d->host,
             d->o.port, d->o.connect_timeout_ms);
        break;
    case ST_HELLO:
        fail(d,
             "no valid server hello within %" PRIu32 " ms (%" PRIu32
             " invalid ignored)",
             d->o.hello_timeout_ms, d->r.hello_invalid);
        break;
    case ST_OPENING:
        fail(d, "UDP channel not open within %" PRIu32 " ms",
             d->o.hello_timeout_ms);
        break;
    case ST_LINGER:
        finish(d);
        break;
    default:
        if (d->final_turn) {
            fail(d,
                 "no server goodbye within %" PRIu32 " ms after the last "
                 "turn",
                 d->o.end_timeout_ms);
        } else {
            fail(d,
                 "turn %" PRIu32 ": no tts stop within %" PRIu32
                 " ms (state %s)",
                 d->turn + 1, d->o.turn_timeout_ms, state_names[d->state]);
        }
        break;
    }
}

static void on_channel_timeout(uv_timer_t *t)
{
    struct gw_sim_device *d = t->data;

    if (!d->closing && !d->finished) {
        fail(d, "channel timeout: nothing received for %" PRIu32 " ms",
             d->o.channel_timeout_ms);
    }
}

static void on_duration(uv_timer_t *t)
{
    struct gw_sim_device *d = t->data;

    if (!d->closing) {
        gw_sim_device_stop(d);
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
        device_goodbye(d);
        break;
    case ST_LINGER:
        break;
    default:
        fail(d, "stopped before the channel opened (state %s)",
             state_names[d->state]);
        break;
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
}

/* GID_test@@@<random MAC>@@@<random uuid v4>, as a fresh board has. */
static int make_client_id(char *out, size_t cap)
{
    uint8_t r[22];

    if (RAND_bytes(r, sizeof(r)) != 1) {
        return GW_ECRYPTO;
    }
    r[12] = (uint8_t)((r[12] & 0x0f) | 0x40);
    r[14] = (uint8_t)((r[14] & 0x3f) | 0x80);
    snprintf(out, cap,
             "GID_test@@@%02x_%02x_%02x_%02x_%02x_%02x@@@%02x%02x%02x%02x-"
             "%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10],
             r[11], r[12], r[13], r[14], r[15], r[16], r[17], r[18], r[19],
             r[20], r[21]);
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
    d->mcp.silent = o->mcp_silent;
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
    set_subject(d);
    const char *topics[1] = {d->sub_topic};
    struct gw_mqtt_link_options lo = {
        .host = d->host,
        .port = opts->port,
        .client_id = d->client_id,
        .username = d->username,
        .password = d->has_password ? d->password : NULL,
        .keepalive_s = opts->keepalive_s,
        .tls = opts->port == 8883, /* the firmware's rule */
        .topics = topics,
        .n_topics = d->sub_topic[0] ? 1 : 0,
        .on_message = on_mqtt_message,
        .on_state = on_mqtt_state,
        .arg = d,
    };
    if ((rc = gw_mqtt_link_init(loop, &lo, &d->link)) != 0) {
        free_early(d);
        return rc;
    }
    uv_timer_t *timers[] = {&d->uplink_timer,   &d->play_timer,
                            &d->watchdog,       &d->channel_timer,
                            &d->duration_timer, &d->done_timer};
    for (size_t i = 0; i < sizeof(timers) / sizeof(timers[0]); i++) {
        uv_timer_init(loop, timers[i]);
        timers[i]->data = d;
    }
    d->open_handles = 7; /* six timers and the MQTT link */
    d->t0_ns = uv_hrtime();
    d->state = ST_CONNECTING;
    watch(d, opts->connect_timeout_ms);
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
    release(d);
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
    close_udp(d);
    uv_timer_t *timers[] = {&d->uplink_timer,   &d->play_timer,
                            &d->watchdog,       &d->channel_timer,
                            &d->duration_timer, &d->done_timer};
    for (size_t i = 0; i < sizeof(timers) / sizeof(timers[0]); i++) {
        uv_close((uv_handle_t *)timers[i], on_handle_closed);
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
    cJSON_AddNumberToObject(msgs, "unparsable", r->bad_json);
    cJSON_AddNumberToObject(msgs, "oversize", r->oversize);
    cJSON_AddNumberToObject(msgs, "mcp_answered", r->mcp_answered);
    cJSON_AddNumberToObject(msgs, "mcp_ignored", r->mcp_ignored);
    cJSON_AddNumberToObject(msgs, "goodbye_ignored", r->goodbye_ignored);
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
    drops = cJSON_AddObjectToObject(down, "drops");
    if (drops == NULL) {
        cJSON_Delete(o);
        return NULL;
    }
    for (int i = 0; i < GW_SIM_DROP_COUNT_; i++) {
        cJSON_AddNumberToObject(drops, drop_names[i], (double)r->drops[i]);
    }
    text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}
