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

/* What one `device` run owns; lives on gw_sim_device_main's stack. */
struct device_run {
    const struct gw_sim_cli *cli;
    struct gw_sim_device *dev; /* NULL once closed */
    uv_signal_t sigint;        /* first: goodbye; second: close at once */
    uv_signal_t sigusr1;       /* a button press: the next conversation */
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

static int run_device(struct gw_sim_cli *cli)
{
    struct device_run run = {.cli = cli, .status = 1};
    struct gw_sim_clip *clip = NULL;
    FILE *log = NULL;
    uv_loop_t loop;
    int rc;

    uv_loop_init(&loop);
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
    if (rc == 0 && (rc = gw_sim_device_init(&loop, &cli->dev, &run.dev)) == 0) {
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
    struct option opts[96];
    struct gw_sim_cli cli;
    int c, rc;

    static const struct option help = {"help", no_argument, NULL, 'h'};

    if (gw_sim_cli_longopts(&help, 1, opts, sizeof(opts) / sizeof(opts[0])) !=
        0) {
        return 2;
    }
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
