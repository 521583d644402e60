/*
 * The command line that hybridgw-sim's `device` and `load` subcommands
 * share: per-device options, their help and the outputs both write.
 */
#include "tools/sim_cli.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "tools/sim_espmcp.h"

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
    O_TLS,
    O_CA,
    O_MODE,
    O_END,
    O_TURNS,
    O_FRAMES,
    O_FRAME_MS,
    O_TONE,
    O_FAST,
    O_AEC,
    O_GLYPH,
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
    O_SESSIONS,
    O_DECODE,
    O_NO_DECODE,
    O_NO_REPLY,
    O_MCP_TOOLS,
    O_MCP_TOOL_BYTES,
    O_MCP_SILENT,
    O_MCP_IGNORE_FIRST,
    O_MCP_ECHO,
    O_MCP_DELAY,
    O_MCP_PROFILE,
    O_MCP_REMOTE,
    O_MCP_REMOTE_INIT,
    O_MCP_REMOTE_PROGRESS,
    O_MCP_STRING_PROGRESS,
    O_MCP_CAPABILITY_GATE,
    O_MCP_ENGINE,
    O_MCP_UPDATE,
    O_MCP_CHANGE,
    O_MCP_BIG,
    O_MCP_RECONNECT_TOOLS,
    O_IDLE,
    O_CALL,
    O_NO_UDP,
    O_UDP_WRONG_KEY,
    O_UDP_STALE_SSRC,
    O_UDP_REBIND,
    O_UDP_SEND_TO,
    O_JSON,
    O_PACKET_LOG,
    O_LOG_LEVEL,
    O_COUNT_
};

static const struct option cli_options[] = {
    {"broker", required_argument, NULL, O_BROKER},
    {"client-id", required_argument, NULL, O_CLIENT_ID},
    {"username", required_argument, NULL, O_USERNAME},
    {"password", required_argument, NULL, O_PASSWORD},
    {"key", required_argument, NULL, O_KEY},
    {"publish-topic", required_argument, NULL, O_PUBLISH},
    {"subscribe-topic", required_argument, NULL, O_SUBSCRIBE},
    {"subscribing", no_argument, NULL, O_SUBSCRIBING},
    {"keepalive", required_argument, NULL, O_KEEPALIVE},
    {"tls", no_argument, NULL, O_TLS},
    {"ca", required_argument, NULL, O_CA},
    {"mode", required_argument, NULL, O_MODE},
    {"end", required_argument, NULL, O_END},
    {"turns", required_argument, NULL, O_TURNS},
    {"frames", required_argument, NULL, O_FRAMES},
    {"frame-ms", required_argument, NULL, O_FRAME_MS},
    {"tone", required_argument, NULL, O_TONE},
    {"fast", no_argument, NULL, O_FAST},
    {"aec", no_argument, NULL, O_AEC},
    {"glyph-push", no_argument, NULL, O_GLYPH},
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
    {"sessions", required_argument, NULL, O_SESSIONS},
    {"decode", no_argument, NULL, O_DECODE},
    {"no-decode", no_argument, NULL, O_NO_DECODE},
    {"no-reply", no_argument, NULL, O_NO_REPLY},
    {"mcp-extra-tools", required_argument, NULL, O_MCP_TOOLS},
    {"mcp-tool-bytes", required_argument, NULL, O_MCP_TOOL_BYTES},
    {"mcp-silent", no_argument, NULL, O_MCP_SILENT},
    {"mcp-ignore-first", required_argument, NULL, O_MCP_IGNORE_FIRST},
    {"mcp-echo-tool", no_argument, NULL, O_MCP_ECHO},
    {"mcp-call-delay-ms", required_argument, NULL, O_MCP_DELAY},
    {"mcp-profile", required_argument, NULL, O_MCP_PROFILE},
    {"mcp-remote", required_argument, NULL, O_MCP_REMOTE},
    {"mcp-remote-init", no_argument, NULL, O_MCP_REMOTE_INIT},
    {"mcp-remote-progress", no_argument, NULL, O_MCP_REMOTE_PROGRESS},
    {"mcp-string-progress", no_argument, NULL, O_MCP_STRING_PROGRESS},
    {"mcp-capability-gate", no_argument, NULL, O_MCP_CAPABILITY_GATE},
    {"mcp-engine", required_argument, NULL, O_MCP_ENGINE},
    {"mcp-update-ms", required_argument, NULL, O_MCP_UPDATE},
    {"mcp-change-after-ms", required_argument, NULL, O_MCP_CHANGE},
    {"mcp-big-resource-bytes", required_argument, NULL, O_MCP_BIG},
    {"mcp-reconnect-tools", required_argument, NULL, O_MCP_RECONNECT_TOOLS},
    {"idle", no_argument, NULL, O_IDLE},
    {"no-udp", no_argument, NULL, O_NO_UDP},
    {"udp-wrong-key", no_argument, NULL, O_UDP_WRONG_KEY},
    {"udp-stale-ssrc", no_argument, NULL, O_UDP_STALE_SSRC},
    {"udp-rebind", required_argument, NULL, O_UDP_REBIND},
    {"udp-send-to", required_argument, NULL, O_UDP_SEND_TO},
    {"call", no_argument, NULL, O_CALL},
    {"json", no_argument, NULL, O_JSON},
    {"packet-log", required_argument, NULL, O_PACKET_LOG},
    {"log-level", required_argument, NULL, O_LOG_LEVEL},
};

#define N_CLI_OPTIONS (sizeof(cli_options) / sizeof(cli_options[0]))

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
        "  --tls                    TLS on any port, the broker's certificate\n"
        "                           and host name verified\n"
        "  --ca FILE                CA for that check (default: system "
        "store); implies --tls\n"
        "Conversation:\n"
        "  --mode M                 auto|manual|realtime (default auto, "
        "realtime with --aec)\n"
        "  --turns N                turns to complete (device default 1)\n"
        "  --frames N               speech frames per turn, then silence "
        "(default 50 = 3 s;\n"
        "                           0 = speech never stops)\n"
        "  --tone HZ                speech is a steady sine of HZ, and the\n"
        "                           played downlink's frequency is reported\n"
        "                           (downlink.tone_hz in --json; --decode)\n"
        "  --end E                  after the turns: goodbye (device says it),"
        "\n"
        "                           server (wait for its goodbye), none\n"
        "  --frame-ms MS            uplink frame interval, default 60 (real "
        "time)\n"
        "  --fast                   same as --frame-ms 10 (tests)\n"
        "  --aec                    features.aec; echo played timestamps\n"
        "  --glyph-push             features.glyph_push true, with a "
        "text_font\n"
        "  --wake-word              wake-word audio burst and listen detect\n"
        "  --abort-after N          send abort after N played frames\n"
        "  --replay-every N         send every Nth uplink packet twice\n"
        "  --forge-every N          after every Nth uplink packet, a forged\n"
        "                           one (noise, later sequence) from another\n"
        "                           port\n"
        "  --no-udp                 never send uplink audio (as behind a\n"
        "                           firewall that drops it)\n"
        "  --udp-wrong-key          encrypt uplink with a keystream the\n"
        "                           hello's key does not give\n"
        "  --udp-stale-ssrc         name an ssrc other than the hello's\n"
        "  --udp-rebind N           after N uplink packets, go on from a\n"
        "                           new source port (a NAT rebinding)\n"
        "  --udp-send-to IP:PORT    send UDP there, not where the hello\n"
        "                           says\n"
        "  --no-reply               success needs no stt/tts/audio\n"
        "  --sessions N             conversations on one MQTT connection; "
        "each\n"
        "                           after the first starts on SIGUSR1 (a\n"
        "                           button press); checks judge the last\n"
        "                           one\n"
        "  --idle                   connect and stay online with no "
        "conversation\n"
        "                           (MCP is answered) until SIGINT, which "
        "ends the\n"
        "                           run with exit 0; SIGUSR1 starts one\n"
        "  --call                   take part in device calls: woken by\n"
        "                           self.remote_wakeup, sends numbered call\n"
        "                           frames, checks what a call brings\n"
        "  --decode / --no-decode   decode played frames with libopus, or "
        "only inspect them\n"
        "MCP:\n"
        "  --mcp-extra-tools N      add N tools (tools/list paging)\n"
        "  --mcp-tool-bytes N       their descriptions N bytes long (a big "
        "catalog)\n"
        "  --mcp-reconnect-tools N  N extra tools from the first MQTT "
        "reconnect on\n"
        "                           (an update while the broker was away)\n"
        "  --mcp-silent             never answer MCP\n"
        "  --mcp-ignore-first N     leave the first N initialize and "
        "tools/list\n"
        "                           requests unanswered (a device late "
        "under load)\n"
        "  --mcp-echo-tool          board tool self.sim.echo: answers its "
        "required\n"
        "                           string argument text\n"
        "  --mcp-call-delay-ms N    answer each tools/call N ms late, one at "
        "a time\n"
        "                           in arrival order (a slow tool); other "
        "methods\n"
        "                           are answered at once\n"
        "  --mcp-profile P          stock (the firmware's tools-only "
        "server) or esp\n"
        "                           (an esp-mcp-like server: resources, "
        "prompts,\n"
        "                           logging, progress, tasks, device "
        "requests)\n"
        "  --mcp-remote 'EP:TOOL:{json}'  esp: once the first initialize "
        "arrived,\n"
        "                           call TOOL on the MCP server EP through "
        "the\n"
        "                           gateway (repeatable, up to 16)\n"
        "  --mcp-remote-init        esp: initialize each such server first "
        "(then\n"
        "                           notifications/initialized), as esp-mcp's "
        "client\n"
        "  --mcp-remote-progress    esp: remote calls carry "
        "_meta.progressToken (their\n"
        "                           id); progress from the server is "
        "checked\n"
        "  --mcp-string-progress    esp: a numeric progress token comes back "
        "as a\n"
        "                           string, as esp-mcp's engine sends it\n"
        "  --mcp-capability-gate    esp: sampling, elicitation and roots asked "
        "only\n"
        "                           of a client whose initialize declared "
        "them\n"
        "  --mcp-engine esp-mcp     the esp profile as Espressif's engine "
        "behaves:\n"
        "                           string progress tokens, the capability "
        "gate,\n"
        "                           its initialize checks and lifecycle "
        "gate,\n"
        "                           remembered request ids\n"
        "  --mcp-update-ms N        esp: resources/updated every N ms per\n"
        "                           subscribed uri (default 0: never)\n"
        "  --mcp-change-after-ms N  esp: add a tool, a resource and a "
        "prompt N ms\n"
        "                           after the first initialize, with "
        "list_changed\n"
        "  --mcp-big-resource-bytes N  esp: size of device://big.txt "
        "(default 4096)\n"
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
        N(O_TONE, "tone", 0, 4000, tone_hz),
        N(O_ABORT, "abort-after", 0, 1000000, abort_after),
        N(O_REPLAY, "replay-every", 0, 1000000, replay_every),
        N(O_FORGE, "forge-every", 0, 1000000, forge_every),
        N(O_UDP_REBIND, "udp-rebind", 0, 1000000, udp_rebind),
        N(O_CONNECT_TO, "connect-timeout", 1, 3600000, connect_timeout_ms),
        N(O_HELLO_TO, "hello-timeout", 1, 3600000, hello_timeout_ms),
        N(O_TURN_TO, "turn-timeout", 0, 3600000, turn_timeout_ms),
        N(O_CHANNEL_TO, "channel-timeout", 1, 3600000, channel_timeout_ms),
        N(O_END_TO, "end-timeout", 1, 3600000, end_timeout_ms),
        N(O_LINGER, "linger", 0, 600000, linger_ms),
        N(O_SESSIONS, "sessions", 1, 100000, sessions),
        N(O_MCP_TOOLS, "mcp-extra-tools", 0, 100000, mcp_extra_tools),
        N(O_MCP_TOOL_BYTES, "mcp-tool-bytes", 0, GW_SIM_TOOL_BYTES_MAX,
          mcp_tool_bytes),
        N(O_MCP_DELAY, "mcp-call-delay-ms", 0, 3600000, mcp_call_delay_ms),
        N(O_MCP_IGNORE_FIRST, "mcp-ignore-first", 0, 1000, mcp_ignore_first),
        N(O_MCP_UPDATE, "mcp-update-ms", 0, 3600000, mcp_update_ms),
        N(O_MCP_CHANGE, "mcp-change-after-ms", 0, 3600000, mcp_change_after_ms),
        N(O_MCP_BIG, "mcp-big-resource-bytes", 1, GW_SIM_ESP_BIG_MAX,
          mcp_big_resource_bytes),
        N(O_MCP_RECONNECT_TOOLS, "mcp-reconnect-tools", 0, 100000,
          mcp_reconnect_tools),
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

/* --mcp-remote: checked now, parsed again by the device. */
static int remote_spec(struct gw_sim_device_options *o, const char *arg)
{
    struct gw_sim_esp_remote r;
    size_t max = sizeof(o->mcp_remote) / sizeof(o->mcp_remote[0]);

    if (o->n_mcp_remote == max) {
        fprintf(stderr, "hybridgw-sim: --mcp-remote: at most %zu\n", max);
        return GW_EINVAL;
    }
    if (gw_sim_esp_remote_parse(arg, &r) != 0) {
        fprintf(stderr,
                "hybridgw-sim: --mcp-remote: expected "
                "ENDPOINT:TOOL[:{json object}], got '%s'\n",
                arg);
        return GW_EINVAL;
    }
    gw_sim_esp_remote_free(&r);
    o->mcp_remote[o->n_mcp_remote++] = arg;
    return 0;
}

int gw_sim_cli_parse(struct gw_sim_cli *cli, int code, const char *arg)
{
    static const char *const modes[] = {"auto", "manual", "realtime"};
    static const char *const ends[] = {"goodbye", "server", "none"};
    static const char *const levels[] = {"error", "warn", "info", "debug"};
    static const char *const profiles[] = {"stock", "esp"};
    static const char *const engines[] = {"esp-mcp"};
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
    case O_TLS:
        o->tls = true;
        break;
    case O_CA:
        o->tls = true;
        o->ca_file = arg;
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
    case O_GLYPH:
        o->glyph_push = true;
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
    case O_MCP_ECHO:
        o->mcp_echo_tool = true;
        break;
    case O_MCP_PROFILE:
        rc = choice("mcp-profile", arg, profiles, 2, &i);
        o->mcp_profile = (enum gw_sim_mcp_profile)i;
        break;
    case O_MCP_REMOTE:
        rc = remote_spec(o, arg);
        break;
    case O_MCP_REMOTE_INIT:
        o->mcp_remote_init = true;
        break;
    case O_MCP_REMOTE_PROGRESS:
        o->mcp_remote_progress = true;
        break;
    case O_MCP_STRING_PROGRESS:
        o->mcp_string_progress = true;
        break;
    case O_MCP_CAPABILITY_GATE:
        o->mcp_capability_gate = true;
        break;
    case O_MCP_ENGINE:
        /* Every quirk of Espressif's engine at once (tools/README.md). */
        rc = choice("mcp-engine", arg, engines, 1, &i);
        o->mcp_profile = GW_SIM_MCP_ESP;
        o->mcp_string_progress = true;
        o->mcp_capability_gate = true;
        o->mcp_engine_lifecycle = true;
        break;
    case O_IDLE:
        o->idle = true;
        break;
    case O_CALL:
        o->call = true;
        break;
    case O_NO_UDP:
        o->no_udp = true;
        break;
    case O_UDP_WRONG_KEY:
        o->udp_wrong_key = true;
        break;
    case O_UDP_STALE_SSRC:
        o->udp_stale_ssrc = true;
        break;
    case O_UDP_SEND_TO:
        o->udp_send_to = arg;
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

int gw_sim_cli_longopts(const struct option *extra, size_t n_extra,
                        struct option *out, size_t cap)
{
    if (N_CLI_OPTIONS + n_extra + 1 > cap) {
        return GW_ENOSPC;
    }
    memcpy(out, cli_options, N_CLI_OPTIONS * sizeof(*out));
    memcpy(out + N_CLI_OPTIONS, extra, n_extra * sizeof(*out));
    out[N_CLI_OPTIONS + n_extra] = (struct option){0};
    return 0;
}

FILE *gw_sim_cli_packet_log(const struct gw_sim_cli *cli, size_t buffer)
{
    FILE *log = fopen(cli->packet_log_path, "w");

    if (log == NULL) {
        perror(cli->packet_log_path);
        return NULL;
    }
    if (buffer > 0) {
        setvbuf(log, NULL, _IOFBF, buffer);
    }
    fprintf(log, "dir,client_id,seq,unix_us,len,fnv32\n");
    return log;
}

void gw_sim_cli_print_drops(const uint64_t drops[GW_SIM_DROP_COUNT_])
{
    printf("drops      ");
    for (int i = 0; i < GW_SIM_DROP_COUNT_; i++) {
        printf(" %s=%" PRIu64, gw_sim_drop_name(i), drops[i]);
    }
}
