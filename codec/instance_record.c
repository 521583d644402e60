/* Instance records and the rendezvous hash; see instance_record.h. */
#include "codec/instance_record.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "codec/envelope.h"

#define MAX_SAFE_INTEGER 9007199254740991.0 /* 2^53 - 1: exact in a double */
#define COUNT_MAX        4294967295.0       /* sessions, devices: unsigned */

static const char *const state_names[] = {"running", "draining", "gone"};

const char *gw_instance_state_name(enum gw_instance_state state)
{
    return (unsigned)state < 3 ? state_names[state] : "?";
}

bool gw_instance_name_valid(const char *s, size_t max)
{
    size_t n = 0;

    if (s == NULL) {
        return false;
    }
    for (; s[n] != '\0'; n++) {
        char c = s[n];
        if (n >= max ||
            !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')) {
            return false;
        }
    }
    return n > 0;
}

/* A string member into out[cap]: absent is "", present must satisfy ok. */
static int read_string(const cJSON *root, const char *key, char *out,
                       size_t cap, bool required, bool name_like)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    const char *s;
    size_t len;

    if (item == NULL) {
        return required ? GW_EPROTO : 0;
    }
    if ((s = cJSON_GetStringValue(item)) == NULL || (len = strlen(s)) >= cap) {
        return GW_EPROTO;
    }
    if (name_like && !gw_instance_name_valid(s, cap - 1)) {
        return GW_EPROTO;
    }
    for (size_t i = 0; i < len; i++) {
        /* "host:port": printable, no quote or backslash (written back
         * into JSON unescaped), no space. */
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c >= 0x7f || c == '"' || c == '\\') {
            return GW_EPROTO;
        }
    }
    memcpy(out, s, len + 1);
    return 0;
}

static int read_number(const cJSON *root, const char *key, double max,
                       uint64_t *out)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    double v;

    if (item == NULL) {
        return 0;
    }
    v = item->valuedouble;
    if (!cJSON_IsNumber(item) || !(v >= 0 && v <= max) ||
        v != (double)(uint64_t)v) {
        return GW_EPROTO;
    }
    *out = (uint64_t)v;
    return 0;
}

static int read_record(const cJSON *root, struct gw_instance_record *out)
{
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(root, "state");
    const char *st = cJSON_GetStringValue(state);
    uint64_t sessions = 0, devices = 0;
    int err;

    if (st == NULL) {
        return GW_EPROTO;
    }
    if (strcmp(st, "running") == 0) {
        out->state = GW_INSTANCE_RUNNING;
    } else if (strcmp(st, "draining") == 0) {
        out->state = GW_INSTANCE_DRAINING;
    } else if (strcmp(st, "gone") == 0) {
        out->state = GW_INSTANCE_GONE;
    } else {
        return GW_EPROTO;
    }
    if ((err = read_string(root, "name", out->name, sizeof(out->name), true,
                           true)) != 0 ||
        (err = read_string(root, "boot", out->boot, sizeof(out->boot), true,
                           true)) != 0 ||
        (err = read_string(root, "udp", out->udp, sizeof(out->udp), false,
                           false)) != 0 ||
        (err = read_number(root, "started_ms", MAX_SAFE_INTEGER,
                           &out->started_ms)) != 0 ||
        (err = read_number(root, "sessions", COUNT_MAX, &sessions)) != 0 ||
        (err = read_number(root, "devices", COUNT_MAX, &devices)) != 0) {
        return err;
    }
    out->sessions = (unsigned)sessions;
    out->devices = (unsigned)devices;
    if (out->state != GW_INSTANCE_GONE &&
        (out->udp[0] == '\0' ||
         cJSON_GetObjectItemCaseSensitive(root, "started_ms") == NULL)) {
        return GW_EPROTO; /* a live instance says where and since when */
    }
    return 0;
}

int gw_instance_record_parse(const char *buf, size_t len,
                             struct gw_instance_record *out)
{
    cJSON *root = NULL;
    int err;

    if (out == NULL) {
        return GW_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    if (buf == NULL) {
        return GW_EINVAL;
    }
    err = gw_json_object_parse(buf, len, GW_INSTANCE_RECORD_MAX_LEN, &root);
    if (err == 0) {
        err = read_record(root, out);
    }
    cJSON_Delete(root);
    if (err != 0) {
        memset(out, 0, sizeof(*out));
    }
    return err;
}

static bool udp_valid(const char *s)
{
    size_t n = strnlen(s, GW_INSTANCE_UDP_MAX + 1);

    if (n == 0 || n > GW_INSTANCE_UDP_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c >= 0x7f || c == '"' || c == '\\') {
            return false;
        }
    }
    return true;
}

int gw_instance_record_format(const struct gw_instance_record *r, char *buf,
                              size_t cap)
{
    int n;

    if (r == NULL || buf == NULL ||
        !gw_instance_name_valid(r->name, GW_INSTANCE_NAME_MAX) ||
        !gw_instance_name_valid(r->boot, GW_INSTANCE_BOOT_MAX) ||
        (unsigned)r->state > GW_INSTANCE_GONE ||
        (double)r->started_ms > MAX_SAFE_INTEGER) {
        return GW_EINVAL;
    }
    if (r->state == GW_INSTANCE_GONE) {
        n = snprintf(buf, cap,
                     "{\"name\":\"%s\",\"boot\":\"%s\",\"state\":"
                     "\"gone\"}",
                     r->name, r->boot);
    } else {
        if (!udp_valid(r->udp)) {
            return GW_EINVAL;
        }
        n = snprintf(buf, cap,
                     "{\"name\":\"%s\",\"boot\":\"%s\",\"udp\":\"%s\","
                     "\"started_ms\":%" PRIu64 ",\"state\":\"%s\","
                     "\"sessions\":%u,\"devices\":%u}",
                     r->name, r->boot, r->udp, r->started_ms,
                     gw_instance_state_name(r->state), r->sessions, r->devices);
    }
    if (n < 0 || (size_t)n >= cap) {
        return GW_ENOSPC;
    }
    return n;
}

/* ---- rendezvous hashing ---- */

/*
 * FNV-1a over both strings (a 0 byte between them, so ("ab","c") and
 * ("a","bc") differ), then the 64-bit finalizer of MurmurHash3, which
 * spreads every input bit over the whole word: FNV alone leaves the high
 * bits poorly mixed for short inputs, and the comparison of scores is
 * decided by the high bits.
 */
static uint64_t fnv1a(uint64_t h, const char *s)
{
    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

uint64_t gw_rendezvous_score(const char *name, const char *client_id)
{
    uint64_t h = fnv1a(0xcbf29ce484222325ull, name);

    h ^= 0;
    h *= 0x100000001b3ull; /* the separator byte */
    h = fnv1a(fmix64(h), client_id);
    return fmix64(h);
}

int gw_rendezvous_pick(const char *const *names, size_t n,
                       const char *client_id)
{
    int best = -1;
    uint64_t best_score = 0;

    for (size_t i = 0; i < n; i++) {
        uint64_t s = gw_rendezvous_score(names[i], client_id);
        if (best < 0 || s > best_score ||
            (s == best_score && strcmp(names[i], names[best]) < 0)) {
            best = (int)i;
            best_score = s;
        }
    }
    return best;
}
