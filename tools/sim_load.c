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

#define RAMP_TICK_MS 10 /* how often the ramp starts more devices */
#define REPORT_MS    5000
#define GRACE_MS     30000 /* after the last device's duration */

enum { L_DEVICES = 400, L_RAMP, L_DURATION, L_STATS_JSON };

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
    /* As high as allowed: two sockets per device, three with forgeries. */
    rlim_t cur = gw_sim_fd_limit_raise(RLIM_INFINITY);

    if (cur != RLIM_INFINITY && cur < (rlim_t)devices * 2 + 64) {
        fprintf(stderr,
                "hybridgw-sim load: warning: %llu file descriptors for %" PRIu32
                " devices (each needs 2)\n",
                (unsigned long long)cur, devices);
    }
}

/* Everything is closed or never started: report and let the loop end. */
static void maybe_end(struct load *l)
{
    if (l->ending || l->closed + l->init_failed < l->started ||
        (l->started < l->n && uv_is_active((uv_handle_t *)&l->ramp_timer))) {
        return;
    }
    l->ending = true;
    gw_sim_load_report(l);
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

    gw_sim_load_add_result(s->load, r);
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
        gw_sim_load_count_reason(l, text);
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
        double due = (double)(uint64_t)(gw_sim_load_elapsed_s(l) * l->ramp) + 1;
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
            gw_sim_load_elapsed_s(l), l->started - l->finished - l->init_failed,
            connected, hellos, l->finished, up, down);
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
