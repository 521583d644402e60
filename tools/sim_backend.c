/*
 * hybridgw-sim backend: a mock of the xiaozhi server's gateway endpoint
 * (docs/protocol.md sections 5-7). Each observation becomes one JSON line
 * (--events) so tests and benchmarks can check what the gateway delivered.
 * This file runs the process: the lws context on the loop, the outputs
 * and the shutdown.
 */
#include "tools/sim_backend_int.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "codec/utf8.h"
#include "common/log.h"
#include "tools/sim.h"

#define RX_BUFFER 2048 /* lws per-connection rx chunk */

/* ---- events ---- */

/* Peer text into an event: invalid UTF-8 would break the JSON line. */
void gw_sim_be_add_text(cJSON *o, const char *key, const char *s, size_t len)
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

cJSON *gw_sim_be_ev_new(const char *name, const struct conn *c)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddNumberToObject(o, "t", (double)(gw_sim_unix_us() / 1000));
    cJSON_AddStringToObject(o, "ev", name);
    if (c != NULL) {
        cJSON_AddNumberToObject(o, "conn", (double)c->id);
        cJSON_AddStringToObject(o, "sid", c->sid);
    }
    return o;
}

void gw_sim_be_ev_emit(struct mock *m, cJSON *o)
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
void gw_sim_be_latency_line(struct mock *m, const char *dir,
                            const struct conn *c, uint64_t n, uint32_t ts,
                            const uint8_t *p, size_t len)
{
    fprintf(m->latency, "%s,%s,%s,%s,%llu,%llu,%u,%zu,%08x\n", dir, c->sid,
            c->dev, c->cid, (unsigned long long)n,
            (unsigned long long)gw_sim_unix_us(), ts, len,
            gw_sim_fnv32(p, len));
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

void gw_sim_be_on_stop_timer(uv_timer_t *t)
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
    rlim_t want = (rlim_t)conns + 64;
    rlim_t got = gw_sim_fd_limit_raise(want);

    return (unsigned)(got < want ? got : want);
}

/*
 * The context first, then the listening vhost: a failed bind leaves a
 * sound context that the normal two-phase teardown can take apart (lws
 * 4.1 half-builds the context when the default vhost fails).
 */
static struct lws_vhost *create_server(struct mock *m, void **loops)
{
    static const struct lws_protocols protocols[] = {
        {"xiaozhi", gw_sim_be_on_lws, sizeof(struct pss), RX_BUFFER, 0, NULL,
         0},
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
    cJSON *ev = gw_sim_be_ev_new("ready", NULL);
    int port = lws_get_vhost_listen_port(vh);
    char hex[65];

    gw_sim_hex32(m->tts.prefix[m->tts.n], hex);
    cJSON_AddStringToObject(ev, "host", m->opt.host);
    cJSON_AddNumberToObject(ev, "port", port);
    cJSON_AddBoolToObject(ev, "tls", m->opt.cert != NULL);
    cJSON_AddNumberToObject(ev, "tts_frames", m->tts.n);
    cJSON_AddNumberToObject(ev, "tts_rate", m->opt.tts_rate);
    cJSON_AddStringToObject(ev, "tts_sha256", hex);
    gw_sim_be_ev_emit(m, ev);
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
    ev = gw_sim_be_ev_new("exit", NULL);
    cJSON_AddNumberToObject(ev, "connections", (double)m->next_conn);
    cJSON_AddNumberToObject(ev, "closed", (double)m->conns_closed);
    gw_sim_be_ev_emit(m, ev);
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
    /* pcm16 messages are the largest (section 6.4). */
    m->tx = malloc(LWS_PRE + GW_AUDIO_FRAME_MAX_HEADER_LEN +
                   GW_AUDIO_FRAME_PCM16_MAX_PAYLOAD);
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
    gw_sim_be_tts_free(&m->tts);
    gw_sim_be_opts_free(&m->opt);
    free(m);
}

int gw_sim_backend_main(int argc, char **argv)
{
    struct mock *m = calloc(1, sizeof(*m));
    int rc;

    if (m == NULL) {
        return 1;
    }
    rc = gw_sim_be_parse_options(argc, argv, &m->opt);
    if (rc < 0) {
        rc = gw_sim_be_tts_build(&m->tts, m->opt.tts_frames, m->opt.tts_rate) !=
                     0
                 ? 1
             : m->opt.dump_path != NULL
                 ? gw_sim_be_tts_dump(&m->tts, m->opt.dump_path)
             : open_outputs(m) != 0 ? 1
                                    : run(m);
    }
    cleanup(m);
    return rc;
}
