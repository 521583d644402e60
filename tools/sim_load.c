/*
 * The command line of hybridgw-sim's `device` and `load` subcommands: the
 * options they share, one device with its transcript, and many devices
 * from one loop against any MQTT endpoint that speaks the stock protocol.
 */
#include <inttypes.h>
#include <stddef.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cjson/cJSON.h>
#include <mosquitto.h>
#include <uv.h>

#include "gateway/log.h"
#include "tools/sim.h"
#include "tools/sim_device.h"

/* ---------------------------------------------------------------------- */
/* Shared options                                                          */

enum {
    O_BROKER = 256,
    O_CLIENT_ID,
    O_USERNAME,
    O_PASSWORD,
    O_KEY,
    O_PUBLISH,
    O_SUBSCRIBE,
    O_SUBSCRIBING,
    O_KEEPALIVE,
    O_MODE,
    O_END,
    O_TURNS,
    O_FRAMES,
    O_FRAME_MS,
    O_FAST,
    O_AEC,
    O_WAKE,
    O_ABORT,
    O_REPLAY,
    O_FORGE,
    O_CONNECT_TO,
    O_HELLO_TO,
    O_TURN_TO,
    O_CHANNEL_TO,
    O_END_TO,
    O_LINGER,
    O_DECODE,
    O_NO_DECODE,
    O_NO_REPLY,
    O_MCP_TOOLS,
    O_MCP_SILENT,
    O_JSON,
    O_PACKET_LOG,
    O_LOG_LEVEL,
    O_COUNT_
};

const struct option gw_sim_cli_options[] = {
    {"broker", required_argument, NULL, O_BROKER},
    {"client-id", required_argument, NULL, O_CLIENT_ID},
    {"username", required_argument, NULL, O_USERNAME},
    {"password", required_argument, NULL, O_PASSWORD},
    {"key", required_argument, NULL, O_KEY},
    {"publish-topic", required_argument, NULL, O_PUBLISH},
    {"subscribe-topic", required_argument, NULL, O_SUBSCRIBE},
    {"subscribing", no_argument, NULL, O_SUBSCRIBING},
    {"keepalive", required_argument, NULL, O_KEEPALIVE},
    {"mode", required_argument, NULL, O_MODE},
    {"end", required_argument, NULL, O_END},
    {"turns", required_argument, NULL, O_TURNS},
    {"frames", required_argument, NULL, O_FRAMES},
    {"frame-ms", required_argument, NULL, O_FRAME_MS},
    {"fast", no_argument, NULL, O_FAST},
    {"aec", no_argument, NULL, O_AEC},
    {"wake-word", no_argument, NULL, O_WAKE},
    {"abort-after", required_argument, NULL, O_ABORT},
    {"replay-every", required_argument, NULL, O_REPLAY},
    {"forge-every", required_argument, NULL, O_FORGE},
    {"connect-timeout", required_argument, NULL, O_CONNECT_TO},
    {"hello-timeout", required_argument, NULL, O_HELLO_TO},
    {"turn-timeout", required_argument, NULL, O_TURN_TO},
    {"channel-timeout", required_argument, NULL, O_CHANNEL_TO},
    {"end-timeout", required_argument, NULL, O_END_TO},
    {"linger", required_argument, NULL, O_LINGER},
    {"decode", no_argument, NULL, O_DECODE},
    {"no-decode", no_argument, NULL, O_NO_DECODE},
    {"no-reply", no_argument, NULL, O_NO_REPLY},
    {"mcp-extra-tools", required_argument, NULL, O_MCP_TOOLS},
    {"mcp-silent", no_argument, NULL, O_MCP_SILENT},
    {"json", no_argument, NULL, O_JSON},
    {"packet-log", required_argument, NULL, O_PACKET_LOG},
    {"log-level", required_argument, NULL, O_LOG_LEVEL},
};

const size_t gw_sim_cli_option_count =
    sizeof(gw_sim_cli_options) / sizeof(gw_sim_cli_options[0]);

void gw_sim_cli_defaults(struct gw_sim_cli *cli)
{
    memset(cli, 0, sizeof(*cli));
    gw_sim_device_options_default(&cli->dev);
    snprintf(cli->host, sizeof(cli->host), "127.0.0.1");
    cli->dev.host = cli->host;
    cli->log_level = GW_LOG_WARN; /* the transcript is the output */
}

void gw_sim_cli_usage(FILE *out)
{
    fprintf(
        out,
        "MQTT (the firmware's connection):\n"
        "  --broker HOST:PORT       broker, default 127.0.0.1:1883 (8883 = "
        "TLS)\n"
        "  --client-id ID           default GID_test@@@<random mac>@@@<uuid>\n"
        "  --username U             default base64 of {\"ip\":\"127.0.0.1\"}\n"
        "  --password P             sent verbatim\n"
        "  --key K                  password = base64(HMAC-SHA256(K, "
        "client_id|username))\n"
        "  --publish-topic T        default device-server; {client_id} "
        "expands\n"
        "  --subscribe-topic T      subscribing firmware (< 1.0.1); default:\n"
        "                           stock, never subscribes, topic ignored\n"
        "  --subscribing            same as --subscribe-topic "
        "devices/{client_id}/down\n"
        "  --keepalive S            default 240\n"
        "Conversation:\n"
        "  --mode M                 auto|manual|realtime (default auto, "
        "realtime with --aec)\n"
        "  --turns N                turns to complete (device default 1)\n"
        "  --frames N               speech frames per turn, then silence "
        "(default 50 = 3 s;\n"
        "                           0 = speech never stops)\n"
        "  --end E                  after the turns: goodbye (device says it),"
        "\n"
        "                           server (wait for its goodbye), none\n"
        "  --frame-ms MS            uplink frame interval, default 60 (real "
        "time)\n"
        "  --fast                   same as --frame-ms 10 (tests)\n"
        "  --aec                    features.aec; echo played timestamps\n"
        "  --wake-word              wake-word audio burst and listen detect\n"
        "  --abort-after N          send abort after N played frames\n"
        "  --replay-every N         send every Nth uplink packet twice\n"
        "  --forge-every N          after every Nth uplink packet, a forged\n"
        "                           one (noise, later sequence) from another\n"
        "                           port\n"
        "  --no-reply               success needs no stt/tts/audio\n"
        "  --decode / --no-decode   decode played frames with libopus, or "
        "only inspect them\n"
        "MCP:\n"
        "  --mcp-extra-tools N      add N tools (tools/list paging)\n"
        "  --mcp-silent             never answer MCP\n"
        "Timeouts (ms):\n"
        "  --connect-timeout MS     CONNACK, default 10000\n"
        "  --hello-timeout MS       server hello, default 10000 (firmware)\n"
        "  --turn-timeout MS        listen start to tts stop, default 60000\n"
        "  --channel-timeout MS     nothing received, default 120000 "
        "(firmware)\n"
        "  --end-timeout MS         wait for the server's goodbye, default "
        "60000\n"
        "  --linger MS              after our goodbye, default 500\n"
        "Output:\n"
        "  --json                   print a JSON result line at the end\n"
        "  --packet-log FILE        CSV: dir,client_id,seq,unix_us,len,fnv32 "
        "per packet\n"
        "  --log-level L            error|warn|info|debug, default warn\n");
}

/* Decimal in [min, max]. */
static int number(const char *name, const char *arg, uint32_t min, uint32_t max,
                  uint32_t *out)
{
    char *end;
    unsigned long v;

    if (arg == NULL || arg[0] < '0' || arg[0] > '9') {
        goto bad;
    }
    v = strtoul(arg, &end, 10);
    if (*end != '\0' || v < min || v > max) {
        goto bad;
    }
    *out = (uint32_t)v;
    return 0;
bad:
    fprintf(stderr,
            "hybridgw-sim: --%s: expected a number in %" PRIu32 "..%" PRIu32
            ", got '%s'\n",
            name, min, max, arg ? arg : "");
    return GW_EINVAL;
}

int gw_sim_cli_broker(struct gw_sim_cli *cli, const char *arg)
{
    const char *colon = strrchr(arg, ':');
    uint32_t port;
    size_t hlen = colon ? (size_t)(colon - arg) : 0;

    if (number("broker", colon ? colon + 1 : arg, 1, 65535, &port) != 0) {
        return GW_EINVAL;
    }
    if (colon != NULL) {
        if (hlen == 0 || hlen >= sizeof(cli->host)) {
            fprintf(stderr, "hybridgw-sim: --broker: bad host in '%s'\n", arg);
            return GW_EINVAL;
        }
        memcpy(cli->host, arg, hlen);
        cli->host[hlen] = '\0';
    }
    cli->dev.port = (int)port;
    return 0;
}

static int choice(const char *name, const char *arg, const char *const *names,
                  int n, int *out)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(arg, names[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    fprintf(stderr, "hybridgw-sim: --%s: unknown value '%s'\n", name, arg);
    return GW_EINVAL;
}

/* Options with a numeric value: where it goes and its range. */
static int parse_number(struct gw_sim_cli *cli, int code, const char *arg)
{
    struct gw_sim_device_options *o = &cli->dev;
    static const struct {
        int code;
        const char *name;
        uint32_t min, max;
        size_t offset;
    } table[] = {
#define N(c, n, lo, hi, f)                                                     \
    {c, n, lo, hi, offsetof(struct gw_sim_device_options, f)}
        N(O_TURNS, "turns", 0, 100000, turns),
        N(O_FRAMES, "frames", 0, 10000, speech_frames),
        N(O_FRAME_MS, "frame-ms", 1, 1000, frame_ms),
        N(O_ABORT, "abort-after", 0, 1000000, abort_after),
        N(O_REPLAY, "replay-every", 0, 1000000, replay_every),
        N(O_FORGE, "forge-every", 0, 1000000, forge_every),
        N(O_CONNECT_TO, "connect-timeout", 1, 3600000, connect_timeout_ms),
        N(O_HELLO_TO, "hello-timeout", 1, 3600000, hello_timeout_ms),
        N(O_TURN_TO, "turn-timeout", 0, 3600000, turn_timeout_ms),
        N(O_CHANNEL_TO, "channel-timeout", 1, 3600000, channel_timeout_ms),
        N(O_END_TO, "end-timeout", 1, 3600000, end_timeout_ms),
        N(O_LINGER, "linger", 0, 600000, linger_ms),
        N(O_MCP_TOOLS, "mcp-extra-tools", 0, 100000, mcp_extra_tools),
#undef N
    };

    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (table[i].code == code) {
            if (code == O_FRAMES) {
                cli->frames_set = true;
            }
            return number(table[i].name, arg, table[i].min, table[i].max,
                          (uint32_t *)((char *)o + table[i].offset));
        }
    }
    return 1; /* not a numeric option */
}

int gw_sim_cli_parse(struct gw_sim_cli *cli, int code, const char *arg)
{
    static const char *const modes[] = {"auto", "manual", "realtime"};
    static const char *const ends[] = {"goodbye", "server", "none"};
    static const char *const levels[] = {"error", "warn", "info", "debug"};
    struct gw_sim_device_options *o = &cli->dev;
    uint32_t v;
    int rc, i = 0;

    if (code < O_BROKER || code >= O_COUNT_) {
        return 0;
    }
    if ((rc = parse_number(cli, code, arg)) != 1) {
        return rc == 0 ? 1 : rc;
    }
    switch (code) {
    case O_BROKER:
        rc = gw_sim_cli_broker(cli, arg);
        break;
    case O_CLIENT_ID:
        o->client_id = arg;
        break;
    case O_USERNAME:
        o->username = arg;
        break;
    case O_PASSWORD:
        o->password = arg;
        break;
    case O_KEY:
        o->key = arg;
        break;
    case O_PUBLISH:
        o->publish_topic = arg;
        break;
    case O_SUBSCRIBE:
        o->subscribe_topic = arg;
        break;
    case O_SUBSCRIBING:
        o->subscribe_topic = "devices/{client_id}/down";
        break;
    case O_KEEPALIVE:
        if ((rc = number("keepalive", arg, 5, 65535, &v)) == 0) {
            o->keepalive_s = (int)v;
        }
        break;
    case O_MODE:
        rc = choice("mode", arg, modes, 3, &i);
        o->mode = (enum gw_sim_mode)i;
        cli->mode_set = true;
        break;
    case O_END:
        rc = choice("end", arg, ends, 3, &i);
        o->end = (enum gw_sim_end)i;
        break;
    case O_FAST:
        o->frame_ms = 10;
        break;
    case O_AEC:
        o->aec = true;
        break;
    case O_WAKE:
        o->wake_word = true;
        break;
    case O_DECODE:
    case O_NO_DECODE:
        o->decode = code == O_DECODE;
        break;
    case O_NO_REPLY:
        o->require_reply = false;
        break;
    case O_MCP_SILENT:
        o->mcp_silent = true;
        break;
    case O_JSON:
        cli->json = true;
        break;
    case O_PACKET_LOG:
        cli->packet_log_path = arg;
        break;
    case O_LOG_LEVEL:
        rc = choice("log-level", arg, levels, 4, &cli->log_level);
        break;
    default:
        return 0;
    }
    return rc == 0 ? 1 : rc;
}

void gw_sim_cli_finish(struct gw_sim_cli *cli)
{
    if (!cli->mode_set) {
        /* The firmware's default: realtime when AEC is on. */
        cli->dev.mode = cli->dev.aec ? GW_SIM_MODE_REALTIME : GW_SIM_MODE_AUTO;
    }
    cli->dev.host = cli->host;
}

/* ---------------------------------------------------------------------- */
/* The `device` subcommand                                                 */

/* What one `device` run owns; lives on gw_sim_device_main's stack. */
struct device_run {
    const struct gw_sim_cli *cli;
    struct gw_sim_device *dev; /* NULL once closed */
    uv_signal_t sigint;        /* first: goodbye; second: close at once */
    int interrupts;            /* SIGINTs seen */
    int status;                /* exit status */
};

static void device_usage(FILE *out)
{
    fprintf(out,
            "usage: hybridgw-sim device [options]\n"
            "\n"
            "Runs one simulated xiaozhi-esp32 device (firmware 2.4 rules)\n"
            "through its turns and exits 0 if the conversation succeeded:\n"
            "a valid server hello, stt, tts start/stop, downlink audio\n"
            "played, and no strict-check violation. A transcript goes to\n"
            "stdout, the failure reason to stderr (exit 1).\n"
            "\n");
    gw_sim_cli_usage(out);
    fprintf(out, "  -h, --help               this text\n");
}

static void print_event(struct gw_sim_device *d, double t_ms, const char *line,
                        void *arg)
{
    (void)d;
    (void)arg;
    printf("[%9.1f ms] %s\n", t_ms, line);
    fflush(stdout);
}

static void print_ms(const char *name, double ms)
{
    if (!isnan(ms)) {
        printf("  %s %.1f", name, ms);
    }
}

static void print_result(const struct gw_sim_result *r)
{
    printf("result      %s%s\n", r->ok ? "ok" : "FAILED: ", r->reason);
    printf("latency ms ");
    print_ms("connect", r->connect_ms);
    print_ms("hello", r->hello_ms);
    printf("  | after speech end:");
    print_ms("stt", r->stt_ms);
    print_ms("tts-start", r->tts_start_ms);
    print_ms("first-audio", r->first_audio_ms);
    print_ms("tts-stop", r->tts_stop_ms);
    printf("  |");
    print_ms("goodbye", r->goodbye_ms);
    printf("\nsession     %s, %" PRIu32 " turn(s), stt \"%s\"\n",
           r->session_id[0] ? r->session_id : "-", r->turns_done, r->stt);
    printf("hellos      %" PRIu32 " valid, %" PRIu32 " invalid, %" PRIu32
           " extra\n",
           r->hellos, r->hello_invalid, r->hello_duplicate);
    printf("uplink      %" PRIu64 " packets, %" PRIu64 " bytes, %" PRIu64
           " send errors, sha256 %s\n",
           r->up_packets, r->up_bytes, r->up_send_errors, r->up_sha256);
    printf("downlink    %" PRIu64 " datagrams, %" PRIu64 " accepted, %" PRIu64
           " played, %" PRIu64 " lost, jitter %.1f ms (max %.1f), sha256 %s\n",
           r->down_datagrams, r->down_accepted, r->down_played, r->down_lost,
           r->jitter_ms, r->max_jitter_ms, r->down_sha256);
    printf("drops      ");
    for (int i = 0; i < GW_SIM_DROP_COUNT_; i++) {
        printf(" %s=%" PRIu64, gw_sim_drop_name(i), r->drops[i]);
    }
    printf("\nmessages    stt %" PRIu32 ", llm %" PRIu32 ", tts start %" PRIu32
           "/stop %" PRIu32 "/sentence %" PRIu32 ", mcp %" PRIu32
           " answered/%" PRIu32 " ignored, %" PRIu32 " unparsable, goodbye "
           "%s%s%s\n",
           r->stt_count, r->llm_count, r->tts_start, r->tts_stop,
           r->tts_sentence, r->mcp_answered, r->mcp_ignored, r->bad_json,
           r->goodbye_received ? "received" : "", r->goodbye_sent ? "sent" : "",
           !r->goodbye_received && !r->goodbye_sent ? "none" : "");
}

static void device_closed(struct gw_sim_device *d, void *arg)
{
    struct device_run *run = arg;

    (void)d;
    run->dev = NULL;
}

static void device_done(struct gw_sim_device *d, const struct gw_sim_result *r,
                        void *arg)
{
    struct device_run *run = arg;

    print_result(r);
    if (run->cli->json) {
        char *json = gw_sim_result_json(r, gw_sim_device_client_id(d));
        if (json != NULL) {
            printf("%s\n", json);
            cJSON_free(json);
        }
    }
    fflush(stdout);
    if (!r->ok) {
        fprintf(stderr, "hybridgw-sim device: FAILED: %s\n", r->reason);
    }
    run->status = r->ok && run->interrupts == 0 ? 0 : 1;
    if (r->ok && run->interrupts > 0) {
        fprintf(stderr, "hybridgw-sim device: interrupted\n");
    }
    gw_sim_device_close(d, device_closed, run);
    uv_close((uv_handle_t *)&run->sigint, NULL);
}

static void device_sigint(uv_signal_t *s, int signum)
{
    struct device_run *run = s->data;

    (void)signum;
    if (run->dev == NULL) {
        return;
    }
    if (++run->interrupts == 1) {
        gw_sim_device_stop(run->dev); /* goodbye, as a user would */
        return;
    }
    run->status = 1;
    gw_sim_device_close(run->dev, device_closed, run);
    uv_close((uv_handle_t *)&run->sigint, NULL);
}

static int run_device(struct gw_sim_cli *cli)
{
    struct device_run run = {.cli = cli, .status = 1};
    struct gw_sim_clip *clip = NULL;
    FILE *log = NULL;
    uv_loop_t loop;
    int rc;

    uv_loop_init(&loop);
    rc = gw_sim_clip_create(
        cli->dev.speech_frames ? cli->dev.speech_frames : 50, &clip);
    if (rc == 0 && cli->packet_log_path != NULL) {
        log = fopen(cli->packet_log_path, "w");
        if (log == NULL) {
            perror(cli->packet_log_path);
            rc = GW_EINVAL;
        } else {
            fprintf(log, "dir,client_id,seq,unix_us,len,fnv32\n");
        }
    }
    cli->dev.clip = clip;
    cli->dev.packet_log = log;
    cli->dev.on_done = device_done;
    cli->dev.on_event = print_event;
    cli->dev.arg = &run;
    if (rc == 0 && (rc = gw_sim_device_init(&loop, &cli->dev, &run.dev)) == 0) {
        uv_signal_init(&loop, &run.sigint);
        run.sigint.data = &run;
        uv_signal_start(&run.sigint, device_sigint, SIGINT);
        uv_run(&loop, UV_RUN_DEFAULT);
    }
    if (rc != 0) {
        fprintf(stderr, "hybridgw-sim device: cannot start: %s\n",
                gw_strerror(rc));
        run.status = 1;
    }
    if (uv_loop_close(&loop) != 0) {
        fprintf(stderr, "hybridgw-sim device: handles left open\n");
    }
    gw_sim_clip_destroy(clip);
    if (log != NULL) {
        fclose(log);
    }
    cli->dev.arg = NULL; /* run and clip die here */
    cli->dev.clip = NULL;
    cli->dev.packet_log = NULL;
    return run.status;
}

int gw_sim_device_main(int argc, char **argv)
{
    struct option opts[96];
    struct gw_sim_cli cli;
    int c, rc;

    if (gw_sim_cli_option_count + 2 > sizeof(opts) / sizeof(opts[0])) {
        return 2;
    }
    memcpy(opts, gw_sim_cli_options, gw_sim_cli_option_count * sizeof(*opts));
    opts[gw_sim_cli_option_count] =
        (struct option){"help", no_argument, NULL, 'h'};
    opts[gw_sim_cli_option_count + 1] = (struct option){0};
    gw_sim_cli_defaults(&cli);
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h') {
            device_usage(stdout);
            return 0;
        }
        if ((rc = gw_sim_cli_parse(&cli, c, optarg)) != 1) {
            if (rc == 0) {
                device_usage(stderr);
            }
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "hybridgw-sim device: unexpected argument %s\n",
                argv[optind]);
        return 2;
    }
    gw_sim_cli_finish(&cli);
    gw_log_set_level((enum gw_log_level)cli.log_level);
    signal(SIGPIPE, SIG_IGN);
    mosquitto_lib_init();
    rc = run_device(&cli);
    mosquitto_lib_cleanup();
    return rc;
}

/* ---------------------------------------------------------------------- */
/* The `load` subcommand                                                   */

#define MAX_REASONS  16 /* distinct failure reasons listed */
#define RAMP_TICK_MS 10 /* how often the ramp starts more devices */
#define REPORT_MS    5000
#define GRACE_MS     30000 /* after the last device's duration */

enum { L_DEVICES = 400, L_RAMP, L_DURATION, L_STATS_JSON };

struct load;

/* A device's place in the run, passed as its callback argument. */
struct slot {
    struct load *load;         /* the run */
    struct gw_sim_device *dev; /* NULL before start and once closed */
};

/* One failure text and how many devices ended with it. */
struct reason_count {
    char text[256]; /* the device's reason */
    uint32_t n;     /* devices */
};

/* Sums over finished devices. */
struct totals {
    uint32_t connected, hellos, hello_invalid, hello_duplicate;
    uint32_t ok, failed, turns, stt, goodbye_received, goodbye_sent;
    uint64_t up_packets, up_bytes, up_errors;
    uint64_t down_datagrams, down_accepted, down_played, down_lost;
    uint64_t drops[GW_SIM_DROP_COUNT_];
    double jitter_sum, jitter_max; /* per device RFC 3550 jitter */
    uint32_t jitter_n;             /* devices that got downlink */
};

struct load {
    uv_loop_t *loop;
    struct gw_sim_cli cli;
    uint32_t n;             /* --devices */
    double ramp;            /* devices started per second; 0 = at once */
    uint32_t duration_s;    /* each device's run */
    const char *stats_path; /* --stats-json FILE */
    struct slot *slots;
    uint32_t started, finished, closed, init_failed;
    uv_timer_t ramp_timer;   /* starts devices */
    uv_timer_t report_timer; /* progress on stderr; also the deadline */
    uv_signal_t sigint, sigterm;
    int interrupts;
    bool ending; /* summary printed, handles closing */
    uint64_t t0_ns, deadline_ns;
    struct totals tot;
    double *hello_ms; /* one per answered hello */
    size_t n_hello;
    struct reason_count reasons[MAX_REASONS];
    size_t n_reasons;
    uint32_t other_reasons; /* beyond MAX_REASONS distinct texts */
};

static const struct option load_only[] = {
    {"devices", required_argument, NULL, L_DEVICES},
    {"ramp", required_argument, NULL, L_RAMP},
    {"duration", required_argument, NULL, L_DURATION},
    {"stats-json", required_argument, NULL, L_STATS_JSON},
    {"help", no_argument, NULL, 'h'},
};

static void load_usage(FILE *out)
{
    fprintf(out,
            "usage: hybridgw-sim load --devices N --broker HOST:PORT "
            "[options]\n"
            "\n"
            "Runs N simulated devices in one process against any MQTT\n"
            "endpoint that speaks the stock xiaozhi protocol. Each device\n"
            "says hello and streams 60 ms Opus frames in real time for the\n"
            "duration (or its turns), then says goodbye.\n"
            "\n"
            "Load:\n"
            "  --devices N              devices, default 10\n"
            "  --ramp R                 devices started per second, default "
            "100 (0 = all at once)\n"
            "  --duration S             seconds each device runs, default 60\n"
            "  --stats-json FILE        write the totals as JSON\n"
            "  (--turns defaults to 0: stream for the duration; with turns, "
            "success\n"
            "   needs each device's replies, as in `device`)\n");
    gw_sim_cli_usage(out);
    fprintf(out, "  -h, --help               this text\n");
}

static void raise_fd_limit(uint32_t devices)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        return;
    }
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max; /* two sockets per device */
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < (rlim_t)devices * 2 + 64) {
        fprintf(stderr,
                "hybridgw-sim load: warning: %llu file descriptors for %" PRIu32
                " devices (each needs 2)\n",
                (unsigned long long)rl.rlim_cur, devices);
    }
}

static void count_reason(struct load *l, const char *text)
{
    for (size_t i = 0; i < l->n_reasons; i++) {
        if (strcmp(l->reasons[i].text, text) == 0) {
            l->reasons[i].n++;
            return;
        }
    }
    if (l->n_reasons == MAX_REASONS) {
        l->other_reasons++;
        return;
    }
    snprintf(l->reasons[l->n_reasons].text, sizeof(l->reasons[0].text), "%s",
             text);
    l->reasons[l->n_reasons++].n = 1;
}

static void add_result(struct load *l, const struct gw_sim_result *r)
{
    struct totals *t = &l->tot;

    t->connected += r->mqtt_connected;
    t->hellos += r->hellos > 0;
    t->hello_invalid += r->hello_invalid;
    t->hello_duplicate += r->hello_duplicate;
    t->ok += r->ok;
    t->failed += !r->ok;
    t->turns += r->turns_done;
    t->stt += r->stt_count;
    t->goodbye_received += r->goodbye_received;
    t->goodbye_sent += r->goodbye_sent;
    t->up_packets += r->up_packets;
    t->up_bytes += r->up_bytes;
    t->up_errors += r->up_send_errors;
    t->down_datagrams += r->down_datagrams;
    t->down_accepted += r->down_accepted;
    t->down_played += r->down_played;
    t->down_lost += r->down_lost;
    for (int i = 0; i < GW_SIM_DROP_COUNT_; i++) {
        t->drops[i] += r->drops[i];
    }
    if (r->down_accepted > 1) {
        t->jitter_sum += r->jitter_ms;
        t->jitter_n++;
        if (r->max_jitter_ms > t->jitter_max) {
            t->jitter_max = r->max_jitter_ms;
        }
    }
    if (!isnan(r->hello_ms)) {
        l->hello_ms[l->n_hello++] = r->hello_ms;
    }
    if (!r->ok) {
        count_reason(l, r->reason);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Nearest-rank percentile of the sorted hello latencies. */
static double percentile(const struct load *l, unsigned p)
{
    if (l->n_hello == 0) {
        return NAN;
    }
    size_t rank = ((size_t)p * l->n_hello + 99) / 100; /* ceil */
    return l->hello_ms[rank > 0 ? rank - 1 : 0];
}

static double elapsed_s(const struct load *l)
{
    return (double)(uv_hrtime() - l->t0_ns) / 1e9;
}

static void print_summary(const struct load *l)
{
    const struct totals *t = &l->tot;
    double lost_pct = t->down_accepted + t->down_lost > 0
                          ? 100.0 * (double)t->down_lost /
                                (double)(t->down_accepted + t->down_lost)
                          : 0.0;

    printf("devices     %" PRIu32 " started, %" PRIu32 " connected, %" PRIu32
           " hellos answered (%" PRIu32 " invalid, %" PRIu32 " extra), %" PRIu32
           " ok, %" PRIu32 " failed\n",
           l->started, t->connected, t->hellos, t->hello_invalid,
           t->hello_duplicate, t->ok, t->failed + l->init_failed);
    if (l->n_hello > 0) {
        printf("hello ms    p50 %.1f  p99 %.1f  max %.1f\n", percentile(l, 50),
               percentile(l, 99), percentile(l, 100));
    } else {
        printf("hello ms    n/a (no hello answered)\n");
    }
    printf("uplink      %" PRIu64 " packets, %" PRIu64 " bytes, %" PRIu64
           " send errors\n",
           t->up_packets, t->up_bytes, t->up_errors);
    printf("downlink    %" PRIu64 " datagrams, %" PRIu64 " accepted, %" PRIu64
           " played, %" PRIu64 " lost (%.2f %%), jitter mean %.1f ms, max "
           "%.1f ms\n",
           t->down_datagrams, t->down_accepted, t->down_played, t->down_lost,
           lost_pct, t->jitter_n ? t->jitter_sum / t->jitter_n : 0.0,
           t->jitter_max);
    printf("drops      ");
    for (int i = 0; i < GW_SIM_DROP_COUNT_; i++) {
        printf(" %s=%" PRIu64, gw_sim_drop_name(i), t->drops[i]);
    }
    printf("\nturns       %" PRIu32 " completed, %" PRIu32
           " stt, goodbyes %" PRIu32 " sent / %" PRIu32 " received\n",
           t->turns, t->stt, t->goodbye_sent, t->goodbye_received);
    printf("wall time   %.1f s\n", elapsed_s(l));
    for (size_t i = 0; i < l->n_reasons; i++) {
        printf("failure     %" PRIu32 " x %s\n", l->reasons[i].n,
               l->reasons[i].text);
    }
    if (l->other_reasons > 0) {
        printf("failure     %" PRIu32 " x (other reasons)\n", l->other_reasons);
    }
}

static void add_num(cJSON *o, const char *name, double v)
{
    if (!isnan(v)) {
        cJSON_AddNumberToObject(o, name, v);
    }
}

static char *stats_json(const struct load *l)
{
    const struct totals *t = &l->tot;
    cJSON *o = cJSON_CreateObject();
    cJSON *dev, *hello, *up, *down, *drops, *fails;
    char *text = NULL;

    if (o == NULL) {
        return NULL;
    }
    cJSON_AddStringToObject(o, "broker", l->cli.host);
    cJSON_AddNumberToObject(o, "port", l->cli.dev.port);
    cJSON_AddNumberToObject(o, "duration_s", l->duration_s);
    cJSON_AddNumberToObject(o, "ramp_per_s", l->ramp);
    cJSON_AddNumberToObject(o, "wall_s",
                            (double)(int64_t)(elapsed_s(l) * 10 + 0.5) / 10);
    cJSON_AddNumberToObject(o, "turns", t->turns);
    cJSON_AddNumberToObject(o, "stt", t->stt);
    dev = cJSON_AddObjectToObject(o, "devices");
    hello = cJSON_AddObjectToObject(o, "hello_latency_ms");
    up = cJSON_AddObjectToObject(o, "uplink");
    down = cJSON_AddObjectToObject(o, "downlink");
    fails = cJSON_AddArrayToObject(o, "failures");
    if (dev == NULL || hello == NULL || up == NULL || down == NULL ||
        fails == NULL) {
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_AddNumberToObject(dev, "requested", l->n);
    cJSON_AddNumberToObject(dev, "started", l->started);
    cJSON_AddNumberToObject(dev, "connected", t->connected);
    cJSON_AddNumberToObject(dev, "hellos_answered", t->hellos);
    cJSON_AddNumberToObject(dev, "hello_invalid", t->hello_invalid);
    cJSON_AddNumberToObject(dev, "hello_duplicate", t->hello_duplicate);
    cJSON_AddNumberToObject(dev, "ok", t->ok);
    cJSON_AddNumberToObject(dev, "failed", t->failed + l->init_failed);
    add_num(hello, "p50", percentile(l, 50));
    add_num(hello, "p99", percentile(l, 99));
    add_num(hello, "max", percentile(l, 100));
    cJSON_AddNumberToObject(up, "packets", (double)t->up_packets);
    cJSON_AddNumberToObject(up, "bytes", (double)t->up_bytes);
    cJSON_AddNumberToObject(up, "send_errors", (double)t->up_errors);
    cJSON_AddNumberToObject(down, "datagrams", (double)t->down_datagrams);
    cJSON_AddNumberToObject(down, "accepted", (double)t->down_accepted);
    cJSON_AddNumberToObject(down, "played", (double)t->down_played);
    cJSON_AddNumberToObject(down, "lost", (double)t->down_lost);
    cJSON_AddNumberToObject(down, "jitter_ms_mean",
                            t->jitter_n ? t->jitter_sum / t->jitter_n : 0.0);
    cJSON_AddNumberToObject(down, "jitter_ms_max", t->jitter_max);
    drops = cJSON_AddObjectToObject(down, "drops");
    for (int i = 0; drops != NULL && i < GW_SIM_DROP_COUNT_; i++) {
        cJSON_AddNumberToObject(drops, gw_sim_drop_name(i),
                                (double)t->drops[i]);
    }
    for (size_t i = 0; i < l->n_reasons; i++) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "reason", l->reasons[i].text);
        cJSON_AddNumberToObject(f, "count", l->reasons[i].n);
        cJSON_AddItemToArray(fails, f);
    }
    text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

static void write_stats(struct load *l)
{
    char *json = stats_json(l);
    FILE *f;

    if (json == NULL) {
        fprintf(stderr, "hybridgw-sim load: out of memory for the stats\n");
        return;
    }
    if (l->cli.json) {
        printf("%s\n", json);
    }
    if (l->stats_path != NULL) {
        if ((f = fopen(l->stats_path, "w")) == NULL ||
            fprintf(f, "%s\n", json) < 0 || fclose(f) != 0) {
            perror(l->stats_path);
        }
    }
    cJSON_free(json);
}

/* Everything is closed or never started: report and let the loop end. */
static void maybe_end(struct load *l)
{
    if (l->ending || l->closed + l->init_failed < l->started ||
        (l->started < l->n && uv_is_active((uv_handle_t *)&l->ramp_timer))) {
        return;
    }
    l->ending = true;
    qsort(l->hello_ms, l->n_hello, sizeof(double), cmp_double);
    print_summary(l);
    write_stats(l);
    fflush(stdout);
    uv_close((uv_handle_t *)&l->ramp_timer, NULL);
    uv_close((uv_handle_t *)&l->report_timer, NULL);
    uv_close((uv_handle_t *)&l->sigint, NULL);
    uv_close((uv_handle_t *)&l->sigterm, NULL);
}

static void on_device_closed(struct gw_sim_device *d, void *arg)
{
    struct slot *s = arg;

    (void)d;
    s->dev = NULL;
    s->load->closed++;
    maybe_end(s->load);
}

static void on_device_done(struct gw_sim_device *d,
                           const struct gw_sim_result *r, void *arg)
{
    struct slot *s = arg;

    add_result(s->load, r);
    s->load->finished++;
    gw_sim_device_close(d, on_device_closed, s);
}

static void start_device(struct load *l)
{
    struct slot *s = &l->slots[l->started++];
    int rc;

    s->load = l;
    l->cli.dev.arg = s;
    if ((rc = gw_sim_device_init(l->loop, &l->cli.dev, &s->dev)) != 0) {
        char text[128];
        snprintf(text, sizeof(text), "cannot start a device: %s",
                 gw_strerror(rc));
        count_reason(l, text);
        l->init_failed++;
        s->dev = NULL;
    }
}

static void stop_all(struct load *l)
{
    uv_timer_stop(&l->ramp_timer);
    l->n = l->started; /* no more starts */
    for (uint32_t i = 0; i < l->started; i++) {
        gw_sim_device_stop(l->slots[i].dev);
    }
    maybe_end(l);
}

static void on_ramp(uv_timer_t *t)
{
    struct load *l = t->data;
    uint32_t target = l->n;

    if (l->ramp > 0) {
        double due = (double)(uint64_t)(elapsed_s(l) * l->ramp) + 1;
        target = due < (double)l->n ? (uint32_t)due : l->n;
    }
    while (l->started < target) {
        start_device(l);
    }
    if (l->started == l->n) {
        uv_timer_stop(t);
        maybe_end(l);
    }
}

static void on_report(uv_timer_t *t)
{
    struct load *l = t->data;
    uint32_t connected = 0, hellos = 0;
    uint64_t up = 0, down = 0;

    for (uint32_t i = 0; i < l->started; i++) {
        const struct gw_sim_device *d = l->slots[i].dev;
        if (d != NULL) {
            const struct gw_sim_result *r = gw_sim_device_result(d);
            connected += r->mqtt_connected;
            hellos += r->hellos > 0;
            up += r->up_packets;
            down += r->down_accepted;
        }
    }
    fprintf(stderr,
            "[%6.1f s] running %" PRIu32 " (connected %" PRIu32
            ", hellos %" PRIu32 "), finished %" PRIu32 " | live uplink %" PRIu64
            " packets, downlink %" PRIu64 "\n",
            elapsed_s(l), l->started - l->finished - l->init_failed, connected,
            hellos, l->finished, up, down);
    if (uv_hrtime() > l->deadline_ns) {
        fprintf(stderr, "hybridgw-sim load: deadline passed, stopping\n");
        stop_all(l);
    }
}

static void on_signal(uv_signal_t *s, int signum)
{
    struct load *l = s->data;

    (void)signum;
    if (++l->interrupts == 1) {
        fprintf(stderr, "hybridgw-sim load: stopping (again to abort)\n");
        stop_all(l);
        return;
    }
    for (uint32_t i = 0; i < l->started; i++) {
        struct gw_sim_device *d = l->slots[i].dev;
        if (d != NULL && !gw_sim_device_result(d)->done) {
            count_reason(l, "aborted");
            l->tot.failed++;
            gw_sim_device_close(d, on_device_closed, &l->slots[i]);
        }
    }
}

/* Load defaults differ from a single device: stream for the duration,
 * inspect rather than decode downlink (1000 decoders would be the
 * bottleneck), and need replies only when turns are asked for. */
static void load_defaults(struct load *l)
{
    gw_sim_cli_defaults(&l->cli);
    l->cli.dev.turns = 0;
    l->cli.dev.turn_timeout_ms = 0;
    l->cli.dev.decode = false;
    l->n = 10;
    l->ramp = 100;
    l->duration_s = 60;
}

static int load_parse(struct load *l, int argc, char **argv)
{
    struct option opts[96];
    size_t nc = gw_sim_cli_option_count;
    size_t nl = sizeof(load_only) / sizeof(load_only[0]);
    uint32_t v;
    int c, rc;

    if (nc + nl + 1 > sizeof(opts) / sizeof(opts[0])) {
        return 2;
    }
    memcpy(opts, gw_sim_cli_options, nc * sizeof(*opts));
    memcpy(opts + nc, load_only, nl * sizeof(*opts));
    opts[nc + nl] = (struct option){0};
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'h':
            load_usage(stdout);
            return 0;
        case L_DEVICES:
            v = (uint32_t)strtoul(optarg, &end, 10);
            if (*end != '\0' || v < 1 || v > 1000000) {
                fprintf(stderr, "hybridgw-sim load: bad --devices '%s'\n",
                        optarg);
                return 2;
            }
            l->n = v;
            break;
        case L_RAMP:
            l->ramp = strtod(optarg, &end);
            if (*end != '\0' || !(l->ramp >= 0)) {
                fprintf(stderr, "hybridgw-sim load: bad --ramp '%s'\n", optarg);
                return 2;
            }
            break;
        case L_DURATION:
            v = (uint32_t)strtoul(optarg, &end, 10);
            if (*end != '\0' || v < 1 || v > 86400) {
                fprintf(stderr, "hybridgw-sim load: bad --duration '%s'\n",
                        optarg);
                return 2;
            }
            l->duration_s = v;
            break;
        case L_STATS_JSON:
            l->stats_path = optarg;
            break;
        default:
            if ((rc = gw_sim_cli_parse(&l->cli, c, optarg)) != 1) {
                if (rc == 0) {
                    load_usage(stderr);
                }
                return 2;
            }
        }
    }
    if (optind < argc) {
        fprintf(stderr, "hybridgw-sim load: unexpected argument %s\n",
                argv[optind]);
        return 2;
    }
    return -1; /* go on */
}

/* Settles options that depend on each other, after parsing. */
static void load_finish(struct load *l)
{
    struct gw_sim_device_options *o = &l->cli.dev;

    gw_sim_cli_finish(&l->cli);
    if (l->cli.dev.client_id != NULL && l->n > 1) {
        fprintf(stderr, "hybridgw-sim load: --client-id ignored: each device "
                        "needs its own\n");
        o->client_id = NULL;
    }
    if (o->turns == 0) {
        o->require_reply = false; /* just stream */
    } else {
        if (!l->cli.frames_set) {
            o->speech_frames = 50;
        }
        if (o->turn_timeout_ms == 0) {
            o->turn_timeout_ms = 60000;
        }
    }
    if (!l->cli.frames_set && o->turns == 0) {
        o->speech_frames = 0; /* full-size frames the whole time */
    }
    o->duration_ms = l->duration_s * 1000u;
    o->on_event = NULL;
    o->on_done = on_device_done;
}

static int load_run(struct load *l, FILE *log)
{
    struct gw_sim_clip *clip = NULL;
    double ramp_s = l->ramp > 0 ? (double)l->n / l->ramp : 0;
    int rc;

    rc = gw_sim_clip_create(
        l->cli.dev.speech_frames ? l->cli.dev.speech_frames : 50, &clip);
    l->slots = calloc(l->n, sizeof(*l->slots));
    l->hello_ms = calloc(l->n, sizeof(double));
    if (rc != 0 || l->slots == NULL || l->hello_ms == NULL) {
        fprintf(stderr, "hybridgw-sim load: cannot start: %s\n",
                gw_strerror(rc ? rc : GW_ENOMEM));
        gw_sim_clip_destroy(clip);
        return 1;
    }
    l->cli.dev.clip = clip;
    l->cli.dev.packet_log = log;
    l->t0_ns = uv_hrtime();
    l->deadline_ns = l->t0_ns + (uint64_t)((ramp_s + l->duration_s) * 1e9) +
                     (uint64_t)GRACE_MS * 1000000u;
    uv_timer_init(l->loop, &l->ramp_timer);
    uv_timer_init(l->loop, &l->report_timer);
    uv_signal_init(l->loop, &l->sigint);
    uv_signal_init(l->loop, &l->sigterm);
    l->ramp_timer.data = l->report_timer.data = l;
    l->sigint.data = l->sigterm.data = l;
    uv_signal_start(&l->sigint, on_signal, SIGINT);
    uv_signal_start(&l->sigterm, on_signal, SIGTERM);
    uv_timer_start(&l->ramp_timer, on_ramp, 0, RAMP_TICK_MS);
    uv_timer_start(&l->report_timer, on_report, REPORT_MS, REPORT_MS);
    fprintf(stderr,
            "hybridgw-sim load: %" PRIu32 " devices against %s:%d, ramp %g/s, "
            "%" PRIu32 " s each, %s mode\n",
            l->n, l->cli.host, l->cli.dev.port, l->ramp, l->duration_s,
            l->cli.dev.subscribe_topic ? "subscribing" : "stock");
    uv_run(l->loop, UV_RUN_DEFAULT);
    gw_sim_clip_destroy(clip);
    return l->tot.failed + l->init_failed == 0 && l->started > 0 ? 0 : 1;
}

int gw_sim_load_main(int argc, char **argv)
{
    struct load l;
    uv_loop_t loop;
    FILE *log = NULL;
    int rc;

    memset(&l, 0, sizeof(l));
    load_defaults(&l);
    if ((rc = load_parse(&l, argc, argv)) >= 0) {
        return rc;
    }
    load_finish(&l);
    gw_log_set_level((enum gw_log_level)l.cli.log_level);
    raise_fd_limit(l.n);
    signal(SIGPIPE, SIG_IGN);
    if (l.cli.packet_log_path != NULL) {
        if ((log = fopen(l.cli.packet_log_path, "w")) == NULL) {
            perror(l.cli.packet_log_path);
            return 1;
        }
        setvbuf(log, NULL, _IOFBF, 1 << 20);
        fprintf(log, "dir,client_id,seq,unix_us,len,fnv32\n");
    }
    uv_loop_init(&loop);
    l.loop = &loop;
    mosquitto_lib_init();
    rc = load_run(&l, log);
    if (uv_loop_close(&loop) != 0) {
        fprintf(stderr, "hybridgw-sim load: handles left open\n");
    }
    mosquitto_lib_cleanup();
    free(l.slots);
    free(l.hello_ms);
    if (log != NULL) {
        fclose(log);
    }
    return rc;
}
