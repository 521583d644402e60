/*
 * Envelope parser on arbitrary bytes. On success: printing is stable
 * (print, parse, print gives the same text), the header survives the trip,
 * and a session_id set or a goodbye built from it reads back unchanged.
 * The input sits right before an unmapped page: libcjson is not built with
 * ASan, so this is what catches it reading past len.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "codec/envelope.h"
#include "codec/utf8.h"

/* Parses text and checks the header matches env's; returns the copy. */
static void reparse(const char *text, size_t len, const struct gw_envelope *env,
                    struct gw_envelope *out)
{
    if (gw_envelope_parse(text, len, len, out) != 0) {
        abort();
    }
    if (strcmp(out->type, env->type) != 0 || out->kind != env->kind) {
        abort();
    }
    if ((out->session_id == NULL) != (env->session_id == NULL) ||
        (env->session_id != NULL &&
         strcmp(out->session_id, env->session_id) != 0)) {
        abort();
    }
}

/* A goodbye for sid reads back with exactly sid. */
static void check_goodbye(const char *sid)
{
    size_t cap = 6 * strlen(sid) + 64; /* every byte escaped as \u00XX */
    char *out = malloc(cap);
    size_t len;
    struct gw_envelope env;

    if (out == NULL || gw_envelope_build_goodbye(sid, out, cap, &len) != 0 ||
        gw_envelope_parse(out, len, len, &env) != 0 ||
        env.kind != GW_MSG_GOODBYE || strcmp(env.session_id, sid) != 0) {
        abort();
    }
    gw_envelope_free(&env);
    free(out);
}

/* Copies data so that its last byte is the last readable one. */
static const char *guarded_copy(const uint8_t *data, size_t size)
{
    static char *area;
    static size_t span;

    if (area == NULL) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        span = (GW_ENVELOPE_DEVICE_MAX + page - 1) / page * page;
        area = mmap(NULL, span + page, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (area == MAP_FAILED || mprotect(area + span, page, PROT_NONE)) {
            abort();
        }
    }
    if (size > span) {
        return (const char *)data; /* refused on size before any read */
    }
    memcpy(area + span - size, data, size);
    return area + span - size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_envelope env, again;
    char *text, *text2;
    size_t len, len2;
    const char *buf = guarded_copy(data, size);
    int err = gw_envelope_parse(buf, size, GW_ENVELOPE_DEVICE_MAX, &env);

    if (err != 0) {
        if (env.root != NULL || env.type != NULL ||
            (err != GW_EMALFORMED && err != GW_EUTF8 && err != GW_EPROTO &&
             err != GW_ETOOBIG)) {
            abort();
        }
        return 0;
    }
    if (!gw_utf8_valid((const char *)data, size) || env.type[0] == '\0' ||
        env.kind != gw_envelope_type(env.type)) {
        abort();
    }
    if (env.session_id != NULL) {
        check_goodbye(env.session_id);
    }
    /* Numbers may print longer than they were written (1e2 -> 100). */
    if (gw_envelope_print(&env, SIZE_MAX, &text, &len) != 0) {
        abort();
    }
    reparse(text, len, &env, &again);
    if (gw_envelope_print(&again, len, &text2, &len2) != 0 || len2 != len ||
        memcmp(text, text2, len) != 0) {
        abort();
    }
    cJSON_free(text2);
    gw_envelope_free(&again);
    cJSON_free(text);

    if (gw_envelope_set_session_id(&env, "sid-\"\\\x01") != 0 ||
        gw_envelope_print(&env, SIZE_MAX, &text, &len) != 0) {
        abort();
    }
    reparse(text, len, &env, &again);
    gw_envelope_free(&again);
    cJSON_free(text);
    gw_envelope_free(&env);
    gw_envelope_free(&env);
    return 0;
}
