/*
 * The command line of hybridgw-sim's mock backend: one table of options,
 * each with where its value goes and what it may be.
 */
#include "tools/sim_backend_int.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

const char *const gw_sim_be_framing_names[4] = {"v2", "v3", "raw", "pcm16"};

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
        " raw |\n"
        "                           pcm16 (PCM both ways: a tone down, the\n"
        "                           frequency heard up in each turn event)\n"
        "  --pcm-tone-hz N          pcm16: the tone sent down (440)\n"
        "  --no-hello-rate          hello audio_params without sample_rate\n"
        "  --no-hello               never answer the hello\n"
        "  --hello-delay-ms N       answer it N ms late\n"
        "  --turn-frames N          uplink frames that end a turn (10; 0: "
        "only\n"
        "                           listen stop)\n"
        "  --tts-frames N           downlink frames per turn (10, max %d)\n"
        "  --tts-rate HZ            TTS sample rate (%d)\n"
        "  --tts-stop-delay-ms N    after the last frame (420: 7 frames)\n"
        "  --glyph-bytes N          each reply's sentence_start carries a\n"
        "                           glyph_push of bitmaps, the message about "
        "N\n"
        "                           bytes (firmware 2.4; a \"big\" event "
        "each)\n"
        "  --glyph-messages K       K such sentence_starts per reply (1)\n"
        "  --no-pace                send all TTS frames at once\n"
        "  --no-decode              check uplink Opus by inspection only\n"
        "  --close-after-turns K    close (no goodbye) after K turns\n"
        "  --mcp                    run the server's MCP client\n"
        "  --mcp-initialized        also send notifications/initialized\n"
        "  --mcp-protocol V         initialize's protocolVersion "
        "(2024-11-05)\n"
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

static bool parse_listen(const char *s, struct mock_opts *o)
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

static bool parse_auth(const char *s, struct mock_opts *o)
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

static bool parse_auth_fail(const char *s, struct mock_opts *o)
{
    o->auth_text = strcmp(s, "text") == 0;
    return o->auth_text || strcmp(s, "http") == 0;
}

static bool parse_framing(const char *s, struct mock_opts *o)
{
    o->framing = -1;
    for (int i = GW_FRAMING_V2; i <= GW_FRAMING_PCM16; i++) {
        if (strcmp(s, gw_sim_be_framing_names[i]) == 0) {
            o->framing = i;
        }
    }
    return o->framing >= 0 || strcmp(s, "auto") == 0;
}

static bool parse_call(const char *s, struct mock_opts *o)
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

static bool parse_level(const char *s, struct mock_opts *o)
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

static bool check_rate(const char *s, struct mock_opts *o)
{
    (void)s;
    return o->tts_rate == 8000 || o->tts_rate == 12000 ||
           o->tts_rate == 16000 || o->tts_rate == 24000 || o->tts_rate == 48000;
}

/* One command-line option: where its value goes and what it may be. */
struct opt_def {
    const char *name;
    enum { K_INT, K_ON, K_OFF, K_STR, K_FN } kind;
    size_t off;    /* member of struct mock_opts (K_INT, K_ON/OFF, K_STR) */
    long min, max; /* K_INT range */
    bool (*fn)(const char *v, struct mock_opts *o); /* K_FN, or K_INT check */
};

#define OPT(m) offsetof(struct mock_opts, m)
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
    {"pcm-tone-hz", K_INT, OPT(pcm_tone_hz), 50, 4000, NULL},
    {"no-hello-rate", K_ON, OPT(no_hello_rate), 0, 0, NULL},
    {"tts-stop-delay-ms", K_INT, OPT(tts_stop_delay_ms), 0, 60000, NULL},
    {"glyph-bytes", K_INT, OPT(glyph_bytes), 0, 16 << 20, NULL},
    {"glyph-messages", K_INT, OPT(glyph_messages), 1, 10000, NULL},
    {"no-pace", K_OFF, OPT(pace), 0, 0, NULL},
    {"no-decode", K_OFF, OPT(decode), 0, 0, NULL},
    {"close-after-turns", K_INT, OPT(close_after_turns), 0, 1000000, NULL},
    {"mcp", K_ON, OPT(mcp), 0, 0, NULL},
    {"mcp-initialized", K_ON, OPT(mcp_notify), 0, 0, NULL},
    {"mcp-protocol", K_STR, OPT(mcp_protocol), 0, 0, NULL},
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
                         struct mock_opts *o)
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

static void set_defaults(struct mock_opts *o)
{
    snprintf(o->host, sizeof(o->host), "127.0.0.1");
    o->port = 8000;
    o->framing = -1;
    o->turn_frames = 10;
    o->tts_frames = 10;
    o->tts_rate = GW_SIM_BACKEND_TTS_RATE;
    o->pcm_tone_hz = 440;
    o->tts_stop_delay_ms = 7 * GW_SIM_BACKEND_FRAME_MS; /* the server's */
    o->glyph_messages = 1;
    o->pace = o->decode = true;
    o->mcp_list_delay_ms = 1000;
    o->mcp_timeout_ms = 30000;
    o->max_conns = 16384;
}

/* Returns -1 to run, else the exit status. */
int gw_sim_be_parse_options(int argc, char **argv, struct mock_opts *o)
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

void gw_sim_be_opts_free(struct mock_opts *o)
{
    for (int i = 0; i < o->n_calls; i++) {
        free(o->call_name[i]);
        cJSON_Delete(o->call_args[i]);
    }
}
