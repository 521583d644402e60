/*
 * Backend hello reply on arbitrary bytes. On success a server hello built
 * from it (fixed key and nonce) must pass the firmware's checks and carry
 * the same session_id and downlink audio.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/envelope.h"
#include "codec/hello.h"

static const uint8_t key[16] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                                0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
static const uint8_t nonce[16] = {0x01, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef};

static void check_server_hello(const char *sid, const struct gw_audio_params *a)
{
    char out[1024];
    size_t len;
    struct gw_envelope env;
    struct gw_server_hello sh;

    if (gw_server_hello_build(sid, a, "gw.example.org", 8884, key, nonce, out,
                              sizeof(out), &len) != 0 ||
        gw_envelope_parse(out, len, GW_ENVELOPE_DEVICE_MAX, &env) != 0 ||
        gw_server_hello_parse(env.root, &sh) != 0) {
        abort();
    }
    if (strcmp(sh.session_id, sid) != 0 || !sh.has_session_id ||
        strcmp(sh.server, "gw.example.org") != 0 || sh.port != 8884 ||
        memcmp(sh.key, key, 16) != 0 || memcmp(sh.nonce, nonce, 16) != 0 ||
        sh.sample_rate != a->sample_rate ||
        sh.frame_duration != a->frame_duration) {
        abort();
    }
    gw_envelope_free(&env);
}

/* The id goes into the device's unescaped messages: it must need none. */
static void check_session_id(const char *sid)
{
    size_t n = strlen(sid);

    if (n == 0 || n > GW_SESSION_ID_MAX) {
        abort();
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)sid[i];
        if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\') {
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_envelope env;
    struct gw_audio_params a;
    char sid[GW_SESSION_ID_MAX + 1];
    int err;

    if (gw_envelope_parse((const char *)data, size, GW_ENVELOPE_DEVICE_MAX,
                          &env) != 0) {
        return 0;
    }
    err = gw_backend_hello_parse(env.root, sid, sizeof(sid), &a);
    gw_envelope_free(&env);
    if (err != 0) {
        if (err != GW_EPROTO) {
            abort();
        }
        return 0;
    }
    check_session_id(sid);
    check_server_hello(sid, &a);
    return 0;
}
