/*
 * Device hello on arbitrary bytes, through the envelope as the gateway
 * runs it. On success the backend hello built from it, read back as a
 * device hello, must give the same audio, features and pass-through.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/envelope.h"
#include "codec/hello.h"

/* Printed forms, so that numbers cJSON prints as null (1e999) compare. */
static void same_json(const cJSON *a, const cJSON *b)
{
    char *ta, *tb;

    if ((a == NULL) != (b == NULL)) {
        abort();
    }
    if (a == NULL) {
        return;
    }
    ta = cJSON_PrintUnformatted(a);
    tb = cJSON_PrintUnformatted(b);
    if (ta == NULL || tb == NULL || strcmp(ta, tb) != 0) {
        abort();
    }
    cJSON_free(ta);
    cJSON_free(tb);
}

/* The backend hello differs from a device hello only in version and
 * transport: put those back and parse it again. */
static void roundtrip(const struct gw_device_hello *h)
{
    size_t len;
    char *text = gw_backend_hello_build(h, &len);
    struct gw_envelope env;
    struct gw_device_hello h2;

    if (text == NULL || gw_envelope_parse(text, len, len, &env) != 0 ||
        env.kind != GW_MSG_HELLO) {
        abort();
    }
    if (!cJSON_ReplaceItemInObjectCaseSensitive(env.root, "transport",
                                                cJSON_CreateString("udp")) ||
        !cJSON_ReplaceItemInObjectCaseSensitive(
            env.root, "version", cJSON_CreateNumber(h->version))) {
        abort();
    }
    if (gw_device_hello_parse(env.root, &h2) != 0) {
        abort();
    }
    if (memcmp(&h->audio, &h2.audio, sizeof(h->audio)) != 0 || !h2.has_audio ||
        h->mcp != h2.mcp || h->aec != h2.aec ||
        h->glyph_push != h2.glyph_push || h->version != h2.version) {
        abort();
    }
    same_json(h->features, h2.features);
    same_json(h->audio_extra, h2.audio_extra);
    same_json(h->extra, h2.extra);
    gw_device_hello_free(&h2);
    gw_envelope_free(&env);
    cJSON_free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_envelope env;
    struct gw_device_hello h;
    int err;

    if (gw_envelope_parse((const char *)data, size, GW_ENVELOPE_DEVICE_MAX,
                          &env) != 0) {
        return 0;
    }
    err = gw_device_hello_parse(env.root, &h);
    gw_envelope_free(&env);
    if (err != 0) {
        if (h.features != NULL || h.extra != NULL || h.audio_extra != NULL ||
            (err != GW_EPROTO && err != GW_ENOMEM)) {
            abort();
        }
        return 0;
    }
    if (h.version < 1 || h.version > 3 || strcmp(h.audio.format, "opus") ||
        h.audio.channels < 1 || h.audio.channels > 2) {
        abort();
    }
    roundtrip(&h);
    gw_device_hello_free(&h);
    return 0;
}
