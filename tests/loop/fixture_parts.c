/* Gateway-part set-up shared by the loop tests; see fixture_parts.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <mosquitto.h>

#include "codec/envelope.h"
#include "crypto/session_keys.h"
#include "fixture.h"
#include "fixture_parts.h"

void gw_fixture_config_mcp(struct gw_config_live *live, const char *mcp_json)
{
    char text[512];
    char err[512];
    struct gw_config *cfg = NULL;
    int n = snprintf(text, sizeof(text),
                     "{\"backends\":[{\"name\":\"main\","
                     "\"url\":\"ws://127.0.0.1:9/\"}],\"mcp\":%s}",
                     mcp_json);

    assert_true(n > 0 && (size_t)n < sizeof(text));
    assert_int_equal(
        gw_config_load_string(text, (size_t)n, "test", &cfg, err, sizeof(err)),
        0);
    assert_int_equal(gw_config_live_init(live, cfg), 0);
}

bool gw_fixture_mcp_in(struct gw_device_table *t, const char *client_id,
                       const char *payload)
{
    char text[2048];
    struct gw_envelope env;
    bool consumed;
    int n = snprintf(text, sizeof(text),
                     "{\"type\":\"mcp\",\"session_id\":\"\",\"payload\":%s}",
                     payload);

    assert_true(n > 0 && (size_t)n < sizeof(text));
    assert_int_equal(gw_envelope_parse(text, (size_t)n, sizeof(text), &env), 0);
    consumed = gw_device_on_mcp(t, client_id, &env);
    gw_envelope_free(&env);
    return consumed;
}

void gw_fixture_peer_start(struct gw_udp_audio *ua, struct gw_udp_peer *peer,
                           uint8_t key[16], uint32_t *ssrc, unsigned frame_ms,
                           void *owner)
{
    assert_int_equal(gw_session_keys_random_key(key), 0);
    assert_int_equal(
        gw_session_keys_unique_ssrc(ssrc, gw_udp_audio_ssrc_in_use, ua), 0);
    assert_int_equal(gw_udp_peer_start(ua, peer, *ssrc, key, frame_ms, owner),
                     0);
}

int gw_fixture_broker_start(struct gw_fixture_broker *b, const char *name)
{
    return gw_fixture_broker_start_tls(b, name, NULL);
}

int gw_fixture_broker_start_tls(struct gw_fixture_broker *b, const char *name,
                                const char *cert_dir)
{
    const char *tmp = getenv("TMPDIR");
    pid_t parent = getpid();
    FILE *fp;

    memset(b, 0, sizeof(*b));
    /* A short TMPDIR only: the paths must fit b's buffers. */
    snprintf(b->dir, sizeof(b->dir), "%s/%s-XXXXXX",
             tmp != NULL && strlen(tmp) < 40 ? tmp : P_tmpdir, name);
    if (mkdtemp(b->dir) == NULL) {
        return -1;
    }
    snprintf(b->conf, sizeof(b->conf), "%s/broker.conf", b->dir);
    b->port = gw_fixture_free_port(SOCK_STREAM);
    if ((fp = fopen(b->conf, "w")) == NULL) {
        return -1;
    }
    fprintf(fp,
            "listener %d 127.0.0.1\nallow_anonymous true\n"
            "persistence false\nset_tcp_nodelay true\nlog_dest stderr\n"
            "log_type error\nlog_type warning\n",
            b->port);
    if (cert_dir != NULL) {
        /* Started as root, mosquitto reads them as its own user. */
        static const char *const files[] = {"ca.crt", "good.crt", "good.key"};
        chmod(cert_dir, 0755);
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
            chmod(gw_fixture_cert(cert_dir, files[i]), 0644);
        }
        b->tls_port = gw_fixture_free_port(SOCK_STREAM);
        fprintf(fp,
                "listener %d 127.0.0.1\ncafile %s/ca.crt\n"
                "certfile %s/good.crt\nkeyfile %s/good.key\n",
                b->tls_port, cert_dir, cert_dir, cert_dir);
    }
    fclose(fp);
    mosquitto_lib_init();
    b->pid = fork();
    if (b->pid == 0) {
        /* The broker ends with this program, however the program ends. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) {
            _exit(1);
        }
        execlp("mosquitto", "mosquitto", "-c", b->conf, (char *)NULL);
        _exit(127);
    }
    return b->pid > 0 ? 0 : -1;
}

void gw_fixture_broker_stop(struct gw_fixture_broker *b)
{
    int status;

    if (b->pid > 0 && !b->exited) {
        kill(b->pid, SIGTERM);
        waitpid(b->pid, &status, 0);
    }
    unlink(b->conf);
    rmdir(b->dir);
    mosquitto_lib_cleanup();
}

bool gw_fixture_broker_exited(struct gw_fixture_broker *b)
{
    int status;

    if (!b->exited && waitpid(b->pid, &status, WNOHANG) == b->pid) {
        b->exited = true;
    }
    return b->exited;
}
