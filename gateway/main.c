/*
 * hybridgw entry point: command line, config load, and the one libuv loop
 * this process runs. Signals are loop events: SIGTERM/SIGINT stop the loop,
 * SIGHUP reloads the config (a bad file keeps the running one), SIGUSR2
 * drains for a rolling restart (no new conversations, the live ones end by
 * themselves up to cluster.drain_deadline_s, then exit 0).
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <mosquitto.h>
#include <openssl/crypto.h>
#include <opus/opus.h>
#include <uv.h>

#include "common/error.h"
#include "common/log.h"
#include "config/config.h"
#include "gateway/core/version.h"
#include "gateway/instance.h"

#define CONFIG_ERR_BYTES 8192

/* What the process owns while it runs; lives on main()'s stack. */
struct gw_main {
    uv_loop_t *loop;
    uv_signal_t sig_term; /* SIGTERM: drain and stop */
    uv_signal_t sig_int;  /* SIGINT: drain and stop */
    uv_signal_t sig_hup;  /* SIGHUP: reload config */
    uv_signal_t sig_usr1; /* SIGUSR1: log counters */
    uv_signal_t sig_usr2; /* SIGUSR2: drain, then stop */
    const char *config_path;
    struct gw_instance *inst; /* NULL once stopped */
    int stopping;
    int refused; /* cluster: another live instance has our name: exit 1 */
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hybridgw -c FILE [--check-config]\n"
            "       hybridgw --version\n"
            "\n"
            "  -c, --config FILE   configuration file (JSON)\n"
            "  -t, --check-config  validate the configuration and exit 0/1;\n"
            "                      binds nothing\n"
            "  -V, --version       print the version and exit\n"
            "  -h, --help          this text\n");
}

static void print_version(void)
{
    printf("hybridgw %s (libuv %s, %s, cJSON %s, %s)\n", GW_VERSION,
           uv_version_string(), OpenSSL_version(OPENSSL_VERSION),
           cJSON_Version(), opus_get_version_string());
}

static void apply_log_config(const struct gw_config *cfg)
{
    gw_log_set_level(cfg->log.level);
    gw_log_set_format(cfg->log.format);
}

/* Prints every line of a loader message with the config subject. */
static void log_config_errors(enum gw_log_level level, const char *err)
{
    char copy[CONFIG_ERR_BYTES];
    char *save = NULL;

    snprintf(copy, sizeof(copy), "%s", err);
    for (char *line = strtok_r(copy, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        gw_log(level, "config", "%s", line);
    }
}

/* A valid config that is likely a mistake: said, not refused. */
static void print_config_warning(const char *key, const char *text, void *arg)
{
    fprintf(stderr, "%s: warning: %s: %s\n", (const char *)arg, key, text);
}

static void log_config_warning(const char *key, const char *text, void *arg)
{
    (void)arg;
    gw_log(GW_LOG_WARN, "config", "%s: %s", key, text);
}

static int check_config(const char *path)
{
    char err[CONFIG_ERR_BYTES] = "";
    struct gw_config *cfg = NULL;
    int rc = gw_config_load_file(path, &cfg, err, sizeof(err));

    if (rc != 0) {
        fprintf(stderr, "%s", err[0] != '\0' ? err : gw_strerror(rc));
        if (err[0] == '\0' || err[strlen(err) - 1] != '\n') {
            fputc('\n', stderr);
        }
        fprintf(stderr, "%s: configuration is NOT valid\n", path);
        return 1;
    }
    gw_config_warnings(cfg, print_config_warning, (void *)path);
    printf("%s: configuration is valid (instance %s, %zu backend%s, "
           "%zu route%s)\n",
           path, cfg->instance, cfg->n_backends,
           cfg->n_backends == 1 ? "" : "s", cfg->n_routes,
           cfg->n_routes == 1 ? "" : "s");
    gw_config_destroy(cfg);
    return 0;
}

static void warn_restart_key(const char *path, void *arg)
{
    (void)arg;
    gw_log(GW_LOG_WARN, "config",
           "%s changed but needs a restart; keeping the running value", path);
}

static void reload_config(struct gw_main *m)
{
    char err[CONFIG_ERR_BYTES] = "";
    struct gw_config *next = NULL;
    int rc = gw_config_load_file(m->config_path, &next, err, sizeof(err));

    if (rc != 0) {
        log_config_errors(GW_LOG_ERROR, err[0] != '\0' ? err : gw_strerror(rc));
        gw_log(GW_LOG_ERROR, "config",
               "reload of %s failed; the running configuration stays",
               m->config_path);
        return;
    }
    /* The running config is not const for this one swap of values. */
    struct gw_config *running = (struct gw_config *)gw_instance_config(m->inst);
    size_t n = gw_config_restart_changes(running, next, warn_restart_key, NULL);
    if (n > 0) {
        /* Nothing bound has to move: restart-only keys keep their values. */
        gw_config_keep_restart_values(running, next);
        gw_log(GW_LOG_WARN, "config",
               "%zu restart-only key%s ignored until restart", n,
               n == 1 ? "" : "s");
    }
    apply_log_config(next);
    gw_config_warnings(next, log_config_warning, NULL);
    gw_instance_set_config(m->inst, next);
    gw_log(GW_LOG_INFO, "config", "reloaded %s", m->config_path);
}

static void on_close_noop(uv_handle_t *handle)
{
    (void)handle;
}

static void on_stopped(struct gw_instance *inst, void *arg)
{
    struct gw_main *m = arg;

    (void)inst;
    m->inst = NULL;
    uv_close((uv_handle_t *)&m->sig_term, on_close_noop);
    uv_close((uv_handle_t *)&m->sig_int, on_close_noop);
    uv_close((uv_handle_t *)&m->sig_hup, on_close_noop);
    uv_close((uv_handle_t *)&m->sig_usr1, on_close_noop);
    uv_close((uv_handle_t *)&m->sig_usr2, on_close_noop);
}

/* The drain (SIGUSR2 or POST /api/drain) is over: stop as SIGTERM does,
 * with nothing left to end. */
static void on_drained(struct gw_instance *inst, void *arg)
{
    struct gw_main *m = arg;

    if (m->stopping) {
        return;
    }
    m->stopping = 1;
    gw_instance_close(inst, on_stopped, m);
}

/* cluster.mode hash: the name is another live instance's (logged). */
static void on_refused(struct gw_instance *inst, void *arg)
{
    struct gw_main *m = arg;

    m->refused = 1;
    if (m->stopping) {
        return;
    }
    m->stopping = 1;
    gw_instance_close(inst, on_stopped, m);
}

static void on_signal(uv_signal_t *sig, int signum)
{
    struct gw_main *m = sig->data;

    if (m->inst == NULL) {
        return;
    }
    if (signum == SIGHUP) {
        reload_config(m);
        return;
    }
    if (signum == SIGUSR1) {
        gw_instance_log_stats(m->inst);
        return;
    }
    if (signum == SIGUSR2) {
        if (!m->stopping) {
            gw_instance_drain(m->inst, "SIGUSR2");
        }
        return;
    }
    if (m->stopping) {
        return;
    }
    m->stopping = 1;
    gw_log(GW_LOG_INFO, "gw", "%s received, shutting down",
           signum == SIGTERM ? "SIGTERM" : "SIGINT");
    gw_instance_close(m->inst, on_stopped, m);
}

static int start_signal(struct gw_main *m, uv_signal_t *sig, int signum)
{
    int rc = uv_signal_init(m->loop, sig);

    if (rc == 0) {
        sig->data = m;
        rc = uv_signal_start(sig, on_signal, signum);
    }
    return rc;
}

static int run(const char *path)
{
    char err[CONFIG_ERR_BYTES] = "";
    struct gw_config *cfg = NULL;
    struct gw_main m;
    int rc;

    memset(&m, 0, sizeof(m));
    m.config_path = path;
    rc = gw_config_load_file(path, &cfg, err, sizeof(err));
    if (rc != 0) {
        log_config_errors(GW_LOG_ERROR, err[0] != '\0' ? err : gw_strerror(rc));
        return 1;
    }
    apply_log_config(cfg);
    gw_config_warnings(cfg, log_config_warning, NULL);
    /* A peer closing a socket must be an error code, not a signal. */
    signal(SIGPIPE, SIG_IGN);
    mosquitto_lib_init();

    m.loop = uv_default_loop();
    const char *instance = cfg->instance;
    gw_log(GW_LOG_INFO, "gw", "hybridgw %s instance %s starting (pid %d)",
           GW_VERSION, instance, (int)getpid());
    rc = gw_instance_init(m.loop, cfg, &m.inst); /* owns cfg from here */
    if (rc == 0 && ((rc = start_signal(&m, &m.sig_term, SIGTERM)) != 0 ||
                    (rc = start_signal(&m, &m.sig_int, SIGINT)) != 0 ||
                    (rc = start_signal(&m, &m.sig_hup, SIGHUP)) != 0 ||
                    (rc = start_signal(&m, &m.sig_usr1, SIGUSR1)) != 0 ||
                    (rc = start_signal(&m, &m.sig_usr2, SIGUSR2)) != 0)) {
        gw_log(GW_LOG_ERROR, "gw", "signal setup failed: %s", uv_strerror(rc));
        m.stopping = 1;
        gw_instance_close(m.inst, on_stopped, &m);
    }
    if (m.inst != NULL && !m.stopping) {
        gw_instance_on_drained(m.inst, on_drained, &m);
        gw_instance_on_refused(m.inst, on_refused, &m);
        gw_log(GW_LOG_INFO, "gw", "running (pid %d)", (int)getpid());
    }
    uv_run(m.loop, UV_RUN_DEFAULT);
    int close_rc = uv_loop_close(m.loop);
    if (close_rc != 0) {
        gw_log(GW_LOG_ERROR, "gw", "loop closed with live handles: %s",
               uv_strerror(close_rc));
    }
    mosquitto_lib_cleanup();
    gw_log(GW_LOG_INFO, "gw", "stopped");
    return rc == 0 && close_rc == 0 && !m.refused ? 0 : 1;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"check-config", no_argument, NULL, 't'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *path = NULL;
    int check = 0;
    int opt;

    while ((opt = getopt_long(argc, argv, "c:tVh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            path = optarg;
            break;
        case 't':
            check = 1;
            break;
        case 'V':
            print_version();
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "hybridgw: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (path == NULL) {
        fprintf(stderr, "hybridgw: no configuration file (-c FILE)\n");
        usage(stderr);
        return 2;
    }
    return check ? check_config(path) : run(path);
}
