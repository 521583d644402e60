/*
 * hybridgw-sim's `load` subcommand: many simulated devices from one loop
 * against any MQTT endpoint that speaks the stock protocol, started at a
 * steady rate and stopped on a clock.
 */
#include "tools/sim_load_int.h"

#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <mosquitto.h>

#include "common/log.h"
#include "tools/sim.h"
#include "tools/sim_common.h"
#include "tools/sim_device_int.h" /* the link and topic, for bad input */

#define RAMP_TICK_MS 10 /* how often the ramp starts more devices */
#define REPORT_MS    5000
#define GRACE_MS     30000 /* after the last device's duration */
#define STATUS_MS    500   /* --status-file rewritten */

enum {
    L_DEVICES = 400,
    L_RAMP,
    L_DURATION,
    L_STATS_JSON,
    L_CHURN,
    L_CHURN_MIX,
    L_PAUSE,
    L_HOLD,
    L_JUNK_UDP,
    L_SEED,
    L_IDLE_DEVICES,
    L_STATUS_FILE
};

static const struct option load_only[] = {
    {"devices", required_argument, NULL, L_DEVICES},
    {"ramp", required_argument, NULL, L_RAMP},
    {"duration", required_argument, NULL, L_DURATION},
    {"stats-json", required_argument, NULL, L_STATS_JSON},
    {"churn", required_argument, NULL, L_CHURN},
    {"churn-mix", required_argument, NULL, L_CHURN_MIX},
    {"churn-pause-ms", required_argument, NULL, L_PAUSE},
    {"churn-hold-ms", required_argument, NULL, L_HOLD},
    {"junk-udp", required_argument, NULL, L_JUNK_UDP},
    {"seed", required_argument, NULL, L_SEED},
    {"idle-devices", required_argument, NULL, L_IDLE_DEVICES},
    {"status-file", required_argument, NULL, L_STATUS_FILE},
    {"help", no_argument, NULL, 'h'},
};

static const char *const kind_names[CHURN_KIND_COUNT_] = {
    "goodbye", "nobye", "silent", "badjson", "badudp", "badkey"};

const char *gw_sim_load_kind_name(enum churn_kind k)
{
    return (unsigned)k < CHURN_KIND_COUNT_ ? kind_names[k] : "?";
}

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
            "  --idle-devices N         also N idle devices (started first): "
            "online\n"
            "                           with no conversation, answering MCP "
            "as the\n"
            "                           firmware does, until the end "
            "(--duration or a\n"
            "                           signal); --devices then defaults "
            "to 0\n"
            "  --status-file FILE       the idle fleet's counts as JSON, "
            "rewritten\n"
            "                           every 0.5 s (connected, discovered, "
            "reconnected...)\n"
            "  (--turns defaults to 0: stream for the duration; with turns, "
            "success\n"
            "   needs each device's replies, as in `device`)\n"
            "\n"
            "Churn (a soak): each of the N devices converses, ends, pauses "
            "and\n"
            "reconnects with the same identity, again and again:\n"
            "  --churn S                for S seconds, then every device "
            "stops\n"
            "  --churn-mix LIST         weights of the behaviours, default\n"
            "                           goodbye=70,nobye=8,silent=7,badjson=5,"
            "badudp=5,badkey=5\n"
            "                           goodbye: 1-2 turns then goodbye; "
            "nobye: no goodbye,\n"
            "                           UDP dropped, MQTT disconnected; "
            "silent: UDP and\n"
            "                           MQTT go quiet, the link held "
            "--churn-hold-ms;\n"
            "                           badjson: malformed messages "
            "mid-conversation;\n"
            "                           badudp: replays, forgeries and "
            "--junk-udp datagrams;\n"
            "                           badkey: a wrong password\n"
            "  --churn-pause-ms MS      mean pause before a reconnect, "
            "default 3000\n"
            "  --churn-hold-ms MS       how long a silent device stays "
            "online, default 30000\n"
            "  --junk-udp IP:PORT       where badudp devices send junk "
            "datagrams (the\n"
            "                           gateway's UDP port)\n"
            "  --seed N                 identities and choices; default "
            "from the clock\n"
            "  (--duration caps each conversation; a churn run exits 0 when "
            "it ran)\n");
    gw_sim_cli_usage(out);
    fprintf(out, "  -h, --help               this text\n");
}

static void raise_fd_limit(const struct load *l)
{
    /* As high as allowed. libmosquitto keeps a socket pair per client
     * beside its connection: three descriptors per idle device, a fourth
     * for a conversation's UDP (a fifth with forgeries). */
    rlim_t cur = gw_sim_fd_limit_raise(RLIM_INFINITY);
    rlim_t need = (rlim_t)(l->n - l->n_idle) * 4 + (rlim_t)l->n_idle * 3 + 64;

    if (cur != RLIM_INFINITY && cur < need) {
        fprintf(stderr,
                "hybridgw-sim load: warning: %llu file descriptors for %" PRIu32
                " devices (%llu needed)\n",
                (unsigned long long)cur, l->n, (unsigned long long)need);
    }
}

/* Everything is closed or never started: report and let the loop end. */
static void maybe_end(struct load *l)
{
    if (l->ending || l->closed + l->init_failed < l->started ||
        (l->slots_begun < l->n &&
         uv_is_active((uv_handle_t *)&l->ramp_timer)) ||
        (l->churn_s > 0 && !l->churn_over)) {
        return;
    }
    l->ending = true;
    gw_sim_load_status_write(l);
    gw_sim_load_report(l);
    fflush(stdout);
    for (uint32_t i = 0; i < l->slots_begun; i++) {
        if (l->slots[i].timer_open) {
            uv_close((uv_handle_t *)&l->slots[i].timer, NULL);
        }
    }
    if (l->junk_addr.sin_port != 0) {
        uv_close((uv_handle_t *)&l->junk, NULL);
    }
    uv_close((uv_handle_t *)&l->ramp_timer, NULL);
    uv_close((uv_handle_t *)&l->report_timer, NULL);
    uv_close((uv_handle_t *)&l->status_timer, NULL);
    uv_close((uv_handle_t *)&l->sigint, NULL);
    uv_close((uv_handle_t *)&l->sigterm, NULL);
}

/* xorshift64*: reproducible choices from --seed. */
static uint64_t rnd(struct load *l)
{
    l->rng ^= l->rng >> 12;
    l->rng ^= l->rng << 25;
    l->rng ^= l->rng >> 27;
    return l->rng * 0x2545F4914F6CDD1DULL;
}

/* A number in [lo, hi]. */
static uint32_t rnd_in(struct load *l, uint32_t lo, uint32_t hi)
{
    return lo + (uint32_t)(rnd(l) % ((uint64_t)hi - lo + 1));
}

static void start_in_slot(struct slot *s);

static void on_pause_over(uv_timer_t *t)
{
    start_in_slot(t->data);
}

static void on_device_closed(struct gw_sim_device *d, void *arg)
{
    struct slot *s = arg;
    struct load *l = s->load;

    (void)d;
    s->dev = NULL;
    s->holding = false;
    l->closed++;
    if (l->churn_s > 0 && !l->churn_over) {
        /* The next conversation of this identity, after a pause. */
        uv_timer_start(&s->timer, on_pause_over,
                       rnd_in(l, l->pause_ms / 2, l->pause_ms * 3 / 2 + 1), 0);
        return;
    }
    maybe_end(l);
}

static void on_hold_over(uv_timer_t *t)
{
    struct slot *s = t->data;

    s->holding = false;
    gw_sim_device_close(s->dev, on_device_closed, s);
}

static void on_device_done(struct gw_sim_device *d,
                           const struct gw_sim_result *r, void *arg)
{
    struct slot *s = arg;
    struct load *l = s->load;

    l->finished++;
    if (s->idle) {
        /* Counted apart: an idle device has no conversation to judge. */
        gw_sim_load_idle_add(&l->idle_done, r);
        s->idle_counted = true;
        l->idle_finished++;
        gw_sim_device_close(d, on_device_closed, s);
        return;
    }
    gw_sim_load_add_result(l, r);
    if (l->churn_s > 0) {
        struct kind_count *k = &l->kinds[s->kind];
        k->ok += r->ok;
        k->failed += !r->ok;
        uv_timer_stop(&s->timer);
        if (s->kind == CHURN_SILENT && !l->churn_over) {
            /* UDP is closed; MQTT stays up and says nothing (keepalive
             * only): the gateway has to time the session out. */
            s->holding = true;
            s->timer.data = s;
            uv_timer_start(&s->timer, on_hold_over, l->hold_ms, 0);
            return;
        }
    }
    gw_sim_device_close(d, on_device_closed, s);
}

/* Malformed device messages, each a refusal the gateway must count. */
static void send_bad_json(uv_timer_t *t)
{
    static const char *const bad[] = {
        "not json at all",
        "{\"type\":\"listen\",\"state\":",
        "{\"type\":42}",
        "[1,2,3]",
        "\xff\xfe\x00\x01binary",
        "{\"type\":\"mcp\",\"payload\":\"nope\"}",
        "{\"type\":\"listen\",\"state\":[\"start\"],\"mode\":{}}",
        "{\"type\":\"hello\",\"version\":\"x\",\"audio_params\":7}",
    };
    struct slot *s = t->data;
    struct load *l = s->load;
    struct gw_sim_device *d = s->dev;
    char big[9000];
    size_t depth = 1200;

    if (d == NULL || d->link == NULL || !gw_mqtt_link_is_up(d->link)) {
        return;
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (gw_mqtt_link_publish(d->link, d->pub_topic, bad[i],
                                 strlen(bad[i])) == 0) {
            l->bad_messages++;
        }
    }
    /* Deep nesting within the size limit, then one message over it. */
    for (size_t i = 0; i < depth; i++) {
        big[i] = '[';
    }
    if (gw_mqtt_link_publish(d->link, d->pub_topic, big, depth) == 0) {
        l->bad_messages++;
    }
    memset(big, 'x', sizeof(big));
    if (gw_mqtt_link_publish(d->link, d->pub_topic, big, sizeof(big)) == 0) {
        l->bad_messages++;
    }
}

/* Datagrams no device sends: empty, short, wrong type, wrong length,
 * unknown ssrc, a sequence far ahead, oversized. */
static void send_junk(struct load *l)
{
    uint8_t pkt[1600];
    const size_t lens[] = {0, 5, 16, 40, 56, 56, 1600};

    for (size_t i = 0; i < sizeof(pkt); i++) {
        pkt[i] = (uint8_t)rnd(l);
    }
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        uint8_t *p = pkt;
        if (lens[i] >= 16) {
            p[0] = i == 2 ? 0x02 : 0x01; /* type */
            p[1] = 0;
            uint16_t plen = (uint16_t)(lens[i] - 16 + (i == 3 ? 7 : 0));
            p[2] = (uint8_t)(plen >> 8);
            p[3] = (uint8_t)plen;
        }
        if (i == 5) {
            memset(p + 12, 0xff, 3); /* sequence 0xFFFFFFxx */
        }
        uv_buf_t b = uv_buf_init((char *)p, (unsigned)lens[i]);
        if (uv_udp_try_send(&l->junk, &b, 1,
                            (const struct sockaddr *)&l->junk_addr) >= 0) {
            l->junk_datagrams++;
        }
    }
}

static enum churn_kind pick_kind(struct load *l)
{
    uint32_t total = 0, r;

    for (int i = 0; i < CHURN_KIND_COUNT_; i++) {
        total += l->weights[i];
    }
    r = (uint32_t)(rnd(l) % total);
    for (int i = 0; i < CHURN_KIND_COUNT_; i++) {
        if (r < l->weights[i]) {
            return (enum churn_kind)i;
        }
        r -= l->weights[i];
    }
    return CHURN_GOODBYE;
}

/* The options of the slot's next device in a churn run. */
static void churn_options(struct load *l, struct slot *s,
                          struct gw_sim_device_options *o)
{
    s->kind = pick_kind(l);
    l->kinds[s->kind].started++;
    o->client_id = s->client_id;
    o->turns = rnd_in(l, 1, 2);
    o->end = GW_SIM_END_GOODBYE;
    switch (s->kind) {
    case CHURN_NOBYE:
    case CHURN_SILENT:
        o->turns = 1;
        o->end = GW_SIM_END_NONE;
        break;
    case CHURN_BADJSON:
        s->timer.data = s;
        uv_timer_start(&s->timer, send_bad_json, rnd_in(l, 500, 4000), 0);
        break;
    case CHURN_BADUDP:
        o->replay_every = 11;
        o->forge_every = 7;
        if (l->junk_addr.sin_port != 0) {
            send_junk(l);
        }
        break;
    case CHURN_BADKEY:
        o->key = NULL;
        o->password = "not-the-device-password";
        o->connect_timeout_ms = 3000;
        break;
    default:
        break;
    }
}

static void start_in_slot(struct slot *s)
{
    struct load *l = s->load;
    struct gw_sim_device_options o = l->cli.dev;
    int rc;

    if (l->churn_s > 0) {
        if (l->churn_over) {
            maybe_end(l);
            return;
        }
        churn_options(l, s, &o);
    }
    if (s->idle) {
        /* Online until stopped, waiting however long the broker takes. */
        o.idle = true;
        o.duration_ms = 0;
        o.connect_timeout_ms = 0;
    }
    l->started++;
    o.arg = s;
    if ((rc = gw_sim_device_init(l->loop, &o, &s->dev)) != 0) {
        char text[128];
        snprintf(text, sizeof(text), "cannot start a device: %s",
                 gw_strerror(rc));
        gw_sim_load_count_reason(l, text);
        l->init_failed++;
        s->dev = NULL;
        if (l->churn_s > 0) {
            uv_timer_stop(&s->timer);
            uv_timer_start(&s->timer, on_pause_over, l->pause_ms, 0);
        }
    }
}

/* A churn identity: GID_test@@@<MAC>@@@<uuid> from the seed and slot, so
 * that a restarted run (and every reconnect) is the same device again. */
static void churn_identity(struct load *l, struct slot *s)
{
    uint64_t a = rnd(l), b = rnd(l), c = rnd(l);

    snprintf(s->client_id, sizeof(s->client_id),
             "GID_test@@@02_%02x_%02x_%02x_%02x_%02x@@@%08x-%04x-4%03x-a%03x-"
             "%012llx",
             (unsigned)(s->index >> 16) & 0xff,
             (unsigned)(s->index >> 8) & 0xff, (unsigned)s->index & 0xff,
             (unsigned)(a & 0xff), (unsigned)((a >> 8) & 0xff),
             (unsigned)(a >> 32), (unsigned)(b & 0xffff),
             (unsigned)((b >> 16) & 0xfff), (unsigned)((b >> 28) & 0xfff),
             (unsigned long long)(c & 0xffffffffffffULL));
}

static void start_device(struct load *l)
{
    struct slot *s = &l->slots[l->slots_begun];

    s->load = l;
    s->index = l->slots_begun++;
    s->idle = s->index < l->n_idle;
    if (l->churn_s > 0) {
        uv_timer_init(l->loop, &s->timer);
        s->timer.data = s;
        s->timer_open = true;
        churn_identity(l, s);
    }
    start_in_slot(s);
}

static void stop_all(struct load *l)
{
    uv_timer_stop(&l->ramp_timer);
    l->n = l->slots_begun; /* no more starts */
    l->churn_over = true;
    for (uint32_t i = 0; i < l->slots_begun; i++) {
        struct slot *s = &l->slots[i];
        if (s->timer_open) {
            uv_timer_stop(&s->timer); /* a pause: no next device */
        }
        if (s->holding) {
            s->holding = false;
            gw_sim_device_close(s->dev, on_device_closed, s);
        } else {
            gw_sim_device_stop(s->dev);
        }
    }
    maybe_end(l);
}

static void on_ramp(uv_timer_t *t)
{
    struct load *l = t->data;
    uint32_t target = l->n;

    if (l->ramp > 0) {
        double due = (double)(uint64_t)(gw_sim_load_elapsed_s(l) * l->ramp) + 1;
        target = due < (double)l->n ? (uint32_t)due : l->n;
    }
    while (l->slots_begun < target) {
        start_device(l);
    }
    if (l->slots_begun == l->n) {
        uv_timer_stop(t);
        maybe_end(l);
    }
}

static void on_report(uv_timer_t *t)
{
    struct load *l = t->data;
    uint32_t connected = 0, hellos = 0;
    uint64_t up = 0, down = 0;
    struct idle_counts ic;

    for (uint32_t i = 0; i < l->slots_begun; i++) {
        const struct gw_sim_device *d = l->slots[i].dev;
        if (d != NULL && !l->slots[i].holding && !l->slots[i].idle) {
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
            gw_sim_load_elapsed_s(l), l->started - l->finished - l->init_failed,
            connected, hellos, l->finished, up, down);
    if (l->n_idle > 0) {
        gw_sim_load_idle_count(l, &ic);
        fprintf(stderr,
                "[%6.1f s] idle %" PRIu32 "/%" PRIu32 " online, %" PRIu32
                " discovered, %" PRIu32 " reconnected, %" PRIu32
                " re-initialized\n",
                gw_sim_load_elapsed_s(l), ic.online, ic.requested,
                ic.discovered, ic.reconnected, ic.reinitialized);
    }
    if (l->churn_s > 0 && !l->churn_over && uv_hrtime() >= l->churn_end_ns) {
        fprintf(stderr, "hybridgw-sim load: churn over, stopping\n");
        stop_all(l);
        return;
    }
    if (uv_hrtime() > l->deadline_ns) {
        fprintf(stderr, "hybridgw-sim load: deadline passed, stopping\n");
        stop_all(l);
    }
}

static void on_status(uv_timer_t *t)
{
    gw_sim_load_status_write(t->data);
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
    for (uint32_t i = 0; i < l->slots_begun; i++) {
        struct gw_sim_device *d = l->slots[i].dev;
        if (d != NULL && !gw_sim_device_result(d)->done) {
            gw_sim_load_count_reason(l, "aborted");
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
    l->pause_ms = 3000;
    l->hold_ms = 30000;
    static const uint32_t mix[CHURN_KIND_COUNT_] = {70, 8, 7, 5, 5, 5};
    memcpy(l->weights, mix, sizeof(mix));
    l->rng = (uint64_t)gw_sim_unix_us() | 1;
}

/* "goodbye=70,badkey=5,...": kinds not named keep their weight. */
static int parse_mix(struct load *l, const char *arg)
{
    char buf[256], *save = NULL;
    uint32_t total = 0;

    if (strlen(arg) >= sizeof(buf)) {
        return -1;
    }
    memcpy(buf, arg, strlen(arg) + 1);
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '='), *end;
        int k = -1;
        if (eq == NULL) {
            return -1;
        }
        *eq = '\0';
        for (int i = 0; i < CHURN_KIND_COUNT_; i++) {
            if (strcmp(tok, kind_names[i]) == 0) {
                k = i;
            }
        }
        unsigned long w = strtoul(eq + 1, &end, 10);
        if (k < 0 || *end != '\0' || eq[1] == '\0' || w > 1000) {
            return -1;
        }
        l->weights[k] = (uint32_t)w;
    }
    for (int i = 0; i < CHURN_KIND_COUNT_; i++) {
        total += l->weights[i];
    }
    return total > 0 ? 0 : -1;
}

/* --junk-udp IP:PORT (numeric IPv4). */
static int parse_junk(struct load *l, const char *arg)
{
    char ip[64];
    const char *colon = strrchr(arg, ':');
    char *end;

    if (colon == NULL || (size_t)(colon - arg) >= sizeof(ip)) {
        return -1;
    }
    memcpy(ip, arg, (size_t)(colon - arg));
    ip[colon - arg] = '\0';
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (*end != '\0' || port < 1 || port > 65535 ||
        uv_ip4_addr(ip, (int)port, &l->junk_addr) != 0) {
        return -1;
    }
    return 0;
}

static int load_parse(struct load *l, int argc, char **argv)
{
    struct option opts[96];
    uint32_t v;
    int c, rc;

    if (gw_sim_cli_longopts(load_only, sizeof(load_only) / sizeof(load_only[0]),
                            opts, sizeof(opts) / sizeof(opts[0])) != 0) {
        return 2;
    }
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'h':
            load_usage(stdout);
            return 0;
        case L_DEVICES:
        case L_IDLE_DEVICES:
            v = (uint32_t)strtoul(optarg, &end, 10);
            if (*end != '\0' || optarg[0] == '\0' || v > 1000000) {
                fprintf(stderr, "hybridgw-sim load: bad device count '%s'\n",
                        optarg);
                return 2;
            }
            if (c == L_DEVICES) {
                l->n = v;
                l->devices_set = true;
            } else {
                l->n_idle = v;
            }
            break;
        case L_STATUS_FILE:
            l->status_path = optarg;
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
        case L_CHURN:
        case L_PAUSE:
        case L_HOLD:
            v = (uint32_t)strtoul(optarg, &end, 10);
            if (*end != '\0' || v < 1 || v > 86400000) {
                fprintf(stderr, "hybridgw-sim load: bad value '%s'\n", optarg);
                return 2;
            }
            *(c == L_CHURN   ? &l->churn_s
              : c == L_PAUSE ? &l->pause_ms
                             : &l->hold_ms) = v;
            break;
        case L_CHURN_MIX:
            if (parse_mix(l, optarg) != 0) {
                fprintf(stderr, "hybridgw-sim load: bad --churn-mix '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case L_JUNK_UDP:
            if (parse_junk(l, optarg) != 0) {
                fprintf(stderr, "hybridgw-sim load: bad --junk-udp '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case L_SEED:
            l->rng = strtoull(optarg, &end, 10) * 2 + 1; /* never 0 */
            if (*end != '\0') {
                fprintf(stderr, "hybridgw-sim load: bad --seed '%s'\n", optarg);
                return 2;
            }
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
    if (l->n_idle > 0 && !l->devices_set) {
        l->n = 0; /* an idle fleet alone */
    }
    if (l->n + l->n_idle == 0 || (l->n_idle > 0 && l->churn_s > 0)) {
        fprintf(stderr, "hybridgw-sim load: no devices, or idle devices in "
                        "a churn run\n");
        return 2;
    }
    l->n += l->n_idle; /* the idle slots come first */
    return -1;         /* go on */
}

/* Settles options that depend on each other, after parsing. */
static void load_finish(struct load *l)
{
    struct gw_sim_device_options *o = &l->cli.dev;

    gw_sim_cli_finish(&l->cli);
    if (l->churn_s > 0 && o->turns == 0) {
        o->turns = 1; /* each device picks its own, never 0 */
    }
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
    l->hello_cap = l->n;
    l->hello_ms = calloc(l->hello_cap, sizeof(double));
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
    if (l->churn_s > 0) {
        l->churn_end_ns = l->t0_ns + (uint64_t)l->churn_s * 1000000000u;
        l->deadline_ns += (uint64_t)l->churn_s * 1000000000u;
    }
    if (l->junk_addr.sin_port != 0) {
        uv_udp_init(l->loop, &l->junk);
    }
    uv_timer_init(l->loop, &l->ramp_timer);
    uv_timer_init(l->loop, &l->report_timer);
    uv_timer_init(l->loop, &l->status_timer);
    l->status_timer.data = l;
    uv_signal_init(l->loop, &l->sigint);
    uv_signal_init(l->loop, &l->sigterm);
    l->ramp_timer.data = l->report_timer.data = l;
    l->sigint.data = l->sigterm.data = l;
    uv_signal_start(&l->sigint, on_signal, SIGINT);
    uv_signal_start(&l->sigterm, on_signal, SIGTERM);
    uv_timer_start(&l->ramp_timer, on_ramp, 0, RAMP_TICK_MS);
    uv_timer_start(&l->report_timer, on_report, REPORT_MS, REPORT_MS);
    if (l->status_path != NULL) {
        uv_timer_start(&l->status_timer, on_status, STATUS_MS, STATUS_MS);
    }
    fprintf(stderr,
            "hybridgw-sim load: %" PRIu32 " devices against %s:%d, ramp %g/s, "
            "%" PRIu32 " s each, %s mode\n",
            l->n, l->cli.host, l->cli.dev.port, l->ramp, l->duration_s,
            l->cli.dev.subscribe_topic ? "subscribing" : "stock");
    if (l->churn_s > 0) {
        fprintf(stderr,
                "hybridgw-sim load: churn for %" PRIu32 " s, pause %" PRIu32
                " ms, silent hold %" PRIu32 " ms\n",
                l->churn_s, l->pause_ms, l->hold_ms);
    }
    uv_run(l->loop, UV_RUN_DEFAULT);
    gw_sim_clip_destroy(clip);
    if (l->churn_s > 0) {
        /* Failures are part of a churn run (wrong keys, dropped links):
         * the report counts them by kind. */
        return l->started > 0 ? 0 : 1;
    }
    /* Idle devices succeed by having been online at all. */
    return l->tot.failed + l->init_failed == 0 && l->started > 0 &&
                   l->idle_done.connected == l->n_idle
               ? 0
               : 1;
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
    raise_fd_limit(&l);
    signal(SIGPIPE, SIG_IGN);
    if (l.cli.packet_log_path != NULL &&
        (log = gw_sim_cli_packet_log(&l.cli, 1 << 20)) == NULL) {
        return 1;
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
