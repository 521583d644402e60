/*
 * hybridgw-sim's `device` subcommand: one simulated device with its
 * transcript on stdout, a summary and an exit status that says whether
 * the conversation met the firmware's expectations.
 */
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <mosquitto.h>
#include <uv.h>

#include "common/log.h"
#include "tools/sim.h"
#include "tools/sim_cli.h"
#include "tools/sim_ota.h"

/* What one `device` run owns; lives on gw_sim_device_main's stack. */
struct device_run {
    struct gw_sim_cli *cli;
    struct gw_sim_prov *prov; /* --ota and the device's identity */
    uv_loop_t *loop;
    struct gw_sim_ota *ota;    /* the provisioning loop, NULL when over */
    struct gw_sim_device *dev; /* NULL once closed */
    uv_signal_t sigint;        /* first: goodbye; second: close at once */
    uv_signal_t sigusr1;       /* a button press: the next conversation */
    uint64_t t0_ns;            /* start of the run */
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
    gw_sim_prov_usage(out);
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
    gw_sim_cli_print_drops(r->drops);
    printf("\nmessages    stt %" PRIu32 ", llm %" PRIu32 ", tts start %" PRIu32
           "/stop %" PRIu32 "/sentence %" PRIu32 ", mcp %" PRIu32
           " answered/%" PRIu32 " ignored (%" PRIu32 " calls%s), %" PRIu32
           " unparsable, goodbye %s%s%s\n",
           r->stt_count, r->llm_count, r->tts_start, r->tts_stop,
           r->tts_sentence, r->mcp_answered, r->mcp_ignored, r->mcp_calls,
           r->mcp_vision ? ", vision seen" : "", r->bad_json,
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
    /* SIGINT is how an idle device's run is meant to end. */
    bool ended_well = run->interrupts == 0 || run->cli->dev.idle;
    run->status = r->ok && ended_well ? 0 : 1;
    if (r->ok && !ended_well) {
        fprintf(stderr, "hybridgw-sim device: interrupted\n");
    }
    gw_sim_device_close(d, device_closed, run);
    uv_close((uv_handle_t *)&run->sigint, NULL);
    uv_close((uv_handle_t *)&run->sigusr1, NULL);
}

static double since_start(const struct device_run *run)
{
    return (double)(uv_hrtime() - run->t0_ns) / 1e6;
}

static void close_signals(struct device_run *run)
{
    uv_close((uv_handle_t *)&run->sigint, NULL);
    uv_close((uv_handle_t *)&run->sigusr1, NULL);
}

/* The provisioning loop ends without a device run (failure, SIGINT). */
static void end_ota(struct device_run *run)
{
    gw_sim_ota_close(run->ota);
    run->ota = NULL;
    run->status = 1;
    close_signals(run);
}

static void print_ota_event(void *arg, const char *line)
{
    struct device_run *run = arg;

    print_event(NULL, since_start(run), line, NULL);
}

static void ota_done(void *arg, int status, const char *why)
{
    struct device_run *run = arg;
    char reason[256];
    int rc;

    if (gw_sim_prov_save(run->prov) != 0) {
        status = GW_EINVAL;
        why = "cannot write --nvs";
    }
    if (status == 0 &&
        gw_sim_prov_apply(run->prov, run->cli, reason, sizeof(reason)) != 0) {
        status = GW_EINVAL;
        why = reason;
    }
    if (status != 0) {
        fprintf(stderr, "hybridgw-sim device: FAILED: provisioning: %s\n",
                why ? why : gw_strerror(status));
        end_ota(run);
        return;
    }
    gw_sim_ota_close(run->ota);
    run->ota = NULL;
    printf("[%9.1f ms] provisioned: %s at %s:%d\n", since_start(run),
           run->cli->dev.client_id, run->cli->dev.host, run->cli->dev.port);
    fflush(stdout);
    if ((rc = gw_sim_device_init(run->loop, &run->cli->dev, &run->dev)) != 0) {
        fprintf(stderr, "hybridgw-sim device: cannot start: %s\n",
                gw_strerror(rc));
        run->status = 1;
        close_signals(run);
    }
}

static void device_sigint(uv_signal_t *s, int signum)
{
    struct device_run *run = s->data;

    (void)signum;
    if (run->ota != NULL) {
        /* Still provisioning: nothing to say goodbye to. */
        fprintf(stderr, "hybridgw-sim device: interrupted while "
                        "provisioning\n");
        end_ota(run);
        return;
    }
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
    uv_close((uv_handle_t *)&run->sigusr1, NULL);
}

static void device_sigusr1(uv_signal_t *s, int signum)
{
    struct device_run *run = s->data;

    (void)signum;
    if (run->dev != NULL) {
        gw_sim_device_wake(run->dev);
    }
}

static int run_device(struct gw_sim_cli *cli, struct gw_sim_prov *prov)
{
    struct device_run run = {.cli = cli, .prov = prov, .status = 1};
    struct gw_sim_clip *clip = NULL;
    FILE *log = NULL;
    uv_loop_t loop;
    int rc;

    uv_loop_init(&loop);
    run.loop = &loop;
    run.t0_ns = uv_hrtime();
    gw_sim_clip_set_tone(cli->dev.tone_hz);
    rc = gw_sim_clip_create(
        cli->dev.speech_frames ? cli->dev.speech_frames : 50, &clip);
    if (rc == 0 && cli->packet_log_path != NULL &&
        (log = gw_sim_cli_packet_log(cli, 0)) == NULL) {
        rc = GW_EINVAL;
    }
    cli->dev.clip = clip;
    cli->dev.packet_log = log;
    cli->dev.on_done = device_done;
    cli->dev.on_event = print_event;
    cli->dev.arg = &run;
    if (rc == 0) {
        /* The firmware provisions first; the protocol starts after. */
        rc = prov->url != NULL
                 ? gw_sim_ota_start(&loop, &prov->ota, print_ota_event,
                                    ota_done, &run, &run.ota)
                 : gw_sim_device_init(&loop, &cli->dev, &run.dev);
    }
    if (rc == 0) {
        uv_signal_init(&loop, &run.sigint);
        run.sigint.data = &run;
        uv_signal_start(&run.sigint, device_sigint, SIGINT);
        uv_signal_init(&loop, &run.sigusr1);
        run.sigusr1.data = &run;
        uv_signal_start(&run.sigusr1, device_sigusr1, SIGUSR1);
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
    struct option opts[112], extra[24];
    struct gw_sim_cli cli;
    struct gw_sim_prov prov;
    size_t n_prov;
    const struct option *po = gw_sim_prov_options(&n_prov);
    int c, rc;

    extra[0] = (struct option){"help", no_argument, NULL, 'h'};
    if (n_prov + 1 > sizeof(extra) / sizeof(extra[0])) {
        return 2;
    }
    memcpy(extra + 1, po, n_prov * sizeof(*po));
    if (gw_sim_cli_longopts(extra, n_prov + 1, opts,
                            sizeof(opts) / sizeof(opts[0])) != 0) {
        return 2;
    }
    gw_sim_cli_defaults(&cli);
    gw_sim_prov_defaults(&prov);
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h') {
            device_usage(stdout);
            return 0;
        }
        if ((rc = gw_sim_prov_parse(&prov, c, optarg)) == 1) {
            continue;
        }
        if (rc != 0 || (rc = gw_sim_cli_parse(&cli, c, optarg)) != 1) {
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
    if (gw_sim_prov_prepare(&prov, &cli) != 0) {
        gw_sim_prov_free(&prov);
        return 2;
    }
    gw_log_set_level((enum gw_log_level)cli.log_level);
    signal(SIGPIPE, SIG_IGN);
    mosquitto_lib_init();
    rc = run_device(&cli, &prov);
    mosquitto_lib_cleanup();
    gw_sim_prov_free(&prov);
    return rc;
}
