/*
 * The hello handshake: every field the device or backend sends is checked
 * before anything is forwarded, and the server hello is built by hand so
 * that its key order and field set are exactly what strict firmware wants.
 */
#include "codec/hello.h"

#include <stdio.h>
#include <string.h>

#include "codec/envelope.h"
#include "codec/hex.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const int32_t sample_rates[] = {8000, 12000, 16000, 24000, 48000};
static const int32_t frame_durations[] = {5, 10, 20, 40, 60, 80, 100, 120};

/* Device uplink and downlink defaults of the firmware (anchor 3.2, 4.5). */
static const struct gw_audio_params device_defaults = {"opus", 16000, 1, 60};
static const struct gw_audio_params backend_defaults = {"opus", 24000, 1, 60};

static bool in_set(int32_t v, const int32_t *set, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (set[i] == v) {
            return true;
        }
    }
    return false;
}

/* An integral JSON number within [lo, hi]; 16000.0 counts, 16000.5 not. */
static bool get_int(const cJSON *item, int32_t lo, int32_t hi, int32_t *out)
{
    double d;

    if (!cJSON_IsNumber(item)) {
        return false;
    }
    d = item->valuedouble;
    /* Range first: converting an out-of-range double is undefined. */
    if (!(d >= (double)lo && d <= (double)hi) || (double)(int32_t)d != d) {
        return false;
    }
    *out = (int32_t)d;
    return true;
}

static bool is_string(const cJSON *item, const char *want)
{
    return cJSON_IsString(item) && strcmp(item->valuestring, want) == 0;
}

/* Adds a deep copy of item to *obj (created on first use) under its key. */
static int keep_copy(cJSON **obj, const cJSON *item)
{
    cJSON *dup;

    if (*obj == NULL && (*obj = cJSON_CreateObject()) == NULL) {
        return GW_ENOMEM;
    }
    if ((dup = cJSON_Duplicate(item, 1)) == NULL) {
        return GW_ENOMEM;
    }
    if (!cJSON_AddItemToObject(*obj, item->string, dup)) {
        cJSON_Delete(dup);
        return GW_ENOMEM;
    }
    return 0;
}

/*
 * Sorts obj's members: slots[i] gets the member called names[i] (NULL if
 * absent), the others are copied into *extra (or skipped if extra is
 * NULL). A known name given twice is GW_EPROTO: cJSON would read the first,
 * other parsers the last.
 */
static int split_members(const cJSON *obj, const char *const *names, size_t n,
                         const cJSON **slots, cJSON **extra)
{
    for (size_t i = 0; i < n; i++) {
        slots[i] = NULL;
    }
    for (const cJSON *it = obj->child; it != NULL; it = it->next) {
        size_t i = 0;
        while (i < n && strcmp(it->string, names[i]) != 0) {
            i++;
        }
        if (i < n) {
            if (slots[i] != NULL) {
                return GW_EPROTO;
            }
            slots[i] = it;
        } else if (extra != NULL) {
            int err = keep_copy(extra, it);
            if (err != 0) {
                return err;
            }
        }
    }
    return 0;
}

enum { A_FORMAT, A_RATE, A_CHANNELS, A_FRAME, A_COUNT };
static const char *const audio_names[A_COUNT] = {"format", "sample_rate",
                                                 "channels", "frame_duration"};

/*
 * Checks an audio_params object over the defaults already in *a. A device
 * must say "opus"; a backend's format is only bounded (the device ignores
 * it and the gateway always sends "opus").
 */
static int parse_audio(const cJSON *obj, bool device, struct gw_audio_params *a,
                       cJSON **extra)
{
    const cJSON *m[A_COUNT];
    int err;

    if (!cJSON_IsObject(obj)) {
        return GW_EPROTO;
    }
    if ((err = split_members(obj, audio_names, A_COUNT, m, extra)) != 0) {
        return err;
    }
    if (m[A_FORMAT] != NULL) {
        const char *f = cJSON_GetStringValue(m[A_FORMAT]);
        if (f == NULL || f[0] == '\0' || strlen(f) >= sizeof(a->format) ||
            (device && strcmp(f, "opus") != 0)) {
            return GW_EPROTO;
        }
        memcpy(a->format, f, strlen(f) + 1);
    }
    if (m[A_RATE] != NULL &&
        (!get_int(m[A_RATE], 1, 48000, &a->sample_rate) ||
         !in_set(a->sample_rate, sample_rates, COUNT(sample_rates)))) {
        return GW_EPROTO;
    }
    if (m[A_CHANNELS] != NULL && !get_int(m[A_CHANNELS], 1, 2, &a->channels)) {
        return GW_EPROTO;
    }
    if (m[A_FRAME] != NULL &&
        (!get_int(m[A_FRAME], 1, 120, &a->frame_duration) ||
         !in_set(a->frame_duration, frame_durations, COUNT(frame_durations)))) {
        return GW_EPROTO;
    }
    return 0;
}

enum { F_MCP, F_AEC, F_GLYPH, F_COUNT };
static const char *const feature_names[F_COUNT] = {"mcp", "aec", "glyph_push"};

/* Known features must be booleans; unknown ones pass through as sent. */
static int parse_features(const cJSON *obj, struct gw_device_hello *h)
{
    const cJSON *m[F_COUNT];
    int err;

    if (!cJSON_IsObject(obj)) {
        return GW_EPROTO;
    }
    if ((err = split_members(obj, feature_names, F_COUNT, m, NULL)) != 0) {
        return err;
    }
    for (size_t i = 0; i < F_COUNT; i++) {
        if (m[i] != NULL && !cJSON_IsBool(m[i])) {
            return GW_EPROTO;
        }
    }
    h->mcp = cJSON_IsTrue(m[F_MCP]);
    h->aec = cJSON_IsTrue(m[F_AEC]);
    h->glyph_push = cJSON_IsTrue(m[F_GLYPH]);
    if ((h->features = cJSON_Duplicate(obj, 1)) == NULL) {
        return GW_ENOMEM;
    }
    return 0;
}

/* text_font travels in extra; it must be one object if present. */
static int check_text_font(const cJSON *extra)
{
    int seen = 0;

    for (const cJSON *it = extra != NULL ? extra->child : NULL; it != NULL;
         it = it->next) {
        if (strcmp(it->string, "text_font") == 0) {
            if (++seen > 1 || !cJSON_IsObject(it)) {
                return GW_EPROTO;
            }
        }
    }
    return 0;
}

/*
 * What the gateway itself derives from the device's login (docs/protocol.md
 * section 6.2), spelled without '-' or '_' and in lower case, so that
 * "client_id", "Client-Id" and "clientId" all match.
 */
static const char *const identity_names[] = {
    "clientid",     "deviceid",       "mac",
    "macaddress",   "uuid",           "groupid",
    "username",     "authorization",  "xforwardedfor",
    "forwardedfor", "protocolversion"};

bool gw_hello_member_reserved(const char *name)
{
    char folded[32];
    size_t n = 0;

    for (; *name != '\0'; name++) {
        unsigned char ch = (unsigned char)*name;
        if (ch == '-' || ch == '_') {
            continue;
        }
        if (n + 1 >= sizeof(folded)) {
            return false; /* longer than every reserved name */
        }
        folded[n++] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
    }
    folded[n] = '\0';
    for (size_t i = 0; i < sizeof(identity_names) / sizeof(identity_names[0]);
         i++) {
        if (strcmp(folded, identity_names[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* Drops the members a device may not set (see gw_hello_member_reserved). */
static void drop_reserved(cJSON **extra)
{
    cJSON *it = *extra != NULL ? (*extra)->child : NULL;

    while (it != NULL) {
        cJSON *next = it->next;
        if (gw_hello_member_reserved(it->string)) {
            cJSON_Delete(cJSON_DetachItemViaPointer(*extra, it));
        }
        it = next;
    }
    if (*extra != NULL && (*extra)->child == NULL) {
        cJSON_Delete(*extra);
        *extra = NULL;
    }
}

enum { D_TYPE, D_VERSION, D_TRANSPORT, D_FEATURES, D_AUDIO, D_SID, D_COUNT };
static const char *const device_names[D_COUNT] = {
    "type", "version", "transport", "features", "audio_params", "session_id"};

static int parse_device(const cJSON *root, struct gw_device_hello *h)
{
    const cJSON *m[D_COUNT];
    int err;

    err = split_members(root, device_names, D_COUNT, m, &h->extra);
    if (err != 0) {
        return err;
    }
    drop_reserved(&h->extra);
    if (!is_string(m[D_TYPE], "hello") || !is_string(m[D_TRANSPORT], "udp") ||
        !get_int(m[D_VERSION], 1, 3, &h->version) ||
        (m[D_SID] != NULL && !cJSON_IsString(m[D_SID]))) {
        return GW_EPROTO;
    }
    if (m[D_FEATURES] != NULL &&
        (err = parse_features(m[D_FEATURES], h)) != 0) {
        return err;
    }
    h->audio = device_defaults;
    if (m[D_AUDIO] != NULL) {
        h->has_audio = true;
        err = parse_audio(m[D_AUDIO], true, &h->audio, &h->audio_extra);
        if (err != 0) {
            return err;
        }
    }
    return check_text_font(h->extra);
}

int gw_device_hello_parse(const cJSON *root, struct gw_device_hello *out)
{
    int err;

    if (out == NULL) {
        return GW_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    if (!cJSON_IsObject(root)) {
        return GW_EPROTO;
    }
    if ((err = parse_device(root, out)) != 0) {
        gw_device_hello_free(out);
    }
    return err;
}

void gw_device_hello_free(struct gw_device_hello *h)
{
    if (h == NULL) {
        return;
    }
    cJSON_Delete(h->features);
    cJSON_Delete(h->audio_extra);
    cJSON_Delete(h->extra);
    memset(h, 0, sizeof(*h));
}

/* Appends deep copies of every member of src (may be NULL) to dst. */
static bool copy_members(cJSON *dst, const cJSON *src)
{
    for (const cJSON *it = src != NULL ? src->child : NULL; it != NULL;
         it = it->next) {
        cJSON *dup = cJSON_Duplicate(it, 1);
        if (dup == NULL || !cJSON_AddItemToObject(dst, it->string, dup)) {
            cJSON_Delete(dup);
            return false;
        }
    }
    return true;
}

static bool add_audio(cJSON *root, const struct gw_audio_params *a,
                      const cJSON *audio_extra)
{
    cJSON *obj = cJSON_AddObjectToObject(root, "audio_params");

    return obj != NULL &&
           cJSON_AddStringToObject(obj, "format", a->format) != NULL &&
           cJSON_AddNumberToObject(obj, "sample_rate", a->sample_rate) &&
           cJSON_AddNumberToObject(obj, "channels", a->channels) &&
           cJSON_AddNumberToObject(obj, "frame_duration", a->frame_duration) &&
           copy_members(obj, audio_extra);
}

char *gw_backend_hello_build(const struct gw_device_hello *h, size_t *out_len)
{
    cJSON *root, *features = NULL;
    char *text = NULL;
    bool ok;

    if (h == NULL || (root = cJSON_CreateObject()) == NULL) {
        return NULL;
    }
    ok = cJSON_AddStringToObject(root, "type", "hello") != NULL &&
         cJSON_AddNumberToObject(root, "version", 2) != NULL &&
         cJSON_AddStringToObject(root, "transport", "websocket") != NULL &&
         add_audio(root, &h->audio, h->audio_extra);
    if (ok && h->features != NULL) {
        features = cJSON_Duplicate(h->features, 1);
        ok = features != NULL &&
             cJSON_AddItemToObject(root, "features", features);
        if (!ok) {
            cJSON_Delete(features);
        }
    }
    if (ok && copy_members(root, h->extra)) {
        text = cJSON_PrintUnformatted(root);
    }
    cJSON_Delete(root);
    if (text != NULL && out_len != NULL) {
        *out_len = strlen(text);
    }
    return text;
}

/* What the firmware can echo back unescaped (see hello.h). */
static bool session_id_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > GW_SESSION_ID_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\') {
            return false;
        }
    }
    return true;
}

enum { B_TYPE, B_SID, B_TRANSPORT, B_AUDIO, B_COUNT };
static const char *const backend_names[B_COUNT] = {"type", "session_id",
                                                   "transport", "audio_params"};

int gw_backend_hello_parse(const cJSON *root, char *session_id, size_t sid_cap,
                           struct gw_audio_params *audio)
{
    const cJSON *m[B_COUNT];
    const char *sid;
    struct gw_audio_params a = backend_defaults;
    int err;

    if (session_id == NULL || audio == NULL || sid_cap == 0) {
        return GW_EINVAL;
    }
    session_id[0] = '\0';
    if (!cJSON_IsObject(root)) {
        return GW_EPROTO;
    }
    if ((err = split_members(root, backend_names, B_COUNT, m, NULL)) != 0) {
        return err;
    }
    sid = cJSON_GetStringValue(m[B_SID]);
    if (!is_string(m[B_TYPE], "hello") || sid == NULL || !session_id_ok(sid) ||
        (m[B_TRANSPORT] != NULL && !is_string(m[B_TRANSPORT], "websocket"))) {
        return GW_EPROTO;
    }
    if (m[B_AUDIO] != NULL &&
        (err = parse_audio(m[B_AUDIO], false, &a, NULL)) != 0) {
        return err;
    }
    if (strlen(sid) >= sid_cap) {
        return GW_ENOSPC;
    }
    memcpy(session_id, sid, strlen(sid) + 1);
    *audio = a;
    return 0;
}

/* Raw append with the NUL kept; fails rather than truncates. */
static int append(char *out, size_t cap, size_t *pos, const char *s)
{
    size_t n = strlen(s);

    if (cap - *pos <= n) {
        return GW_ENOSPC;
    }
    memcpy(out + *pos, s, n + 1);
    *pos += n;
    return 0;
}

static int append_int(char *out, size_t cap, size_t *pos, long v)
{
    char tmp[24];

    snprintf(tmp, sizeof(tmp), "%ld", v);
    return append(out, cap, pos, tmp);
}

static int append_str(char *out, size_t cap, size_t *pos, const char *s)
{
    return gw_envelope_write_string(out, cap, pos, s, strlen(s));
}

static bool build_args_ok(const char *sid, const struct gw_audio_params *a,
                          const char *host, uint16_t port, const uint8_t *key,
                          const uint8_t *nonce)
{
    return sid != NULL && a != NULL && host != NULL && key != NULL &&
           nonce != NULL && port != 0 && host[0] != '\0' &&
           strlen(host) <= GW_HELLO_HOST_MAX &&
           strlen(sid) <= GW_SESSION_ID_MAX &&
           in_set(a->sample_rate, sample_rates, COUNT(sample_rates)) &&
           (a->channels == 1 || a->channels == 2) &&
           in_set(a->frame_duration, frame_durations, COUNT(frame_durations));
}

int gw_server_hello_build(const char *session_id,
                          const struct gw_audio_params *audio,
                          const char *server_host, uint16_t port,
                          const uint8_t key[16], const uint8_t nonce[16],
                          char *out, size_t cap, size_t *out_len)
{
    char key_hex[33], nonce_hex[33];
    size_t pos = 0;
    int err;

    if (out == NULL || cap == 0) {
        return GW_ENOSPC;
    }
    out[0] = '\0';
    if (!build_args_ok(session_id, audio, server_host, port, key, nonce)) {
        return GW_EINVAL;
    }
    if ((err = gw_hex_encode(key, 16, key_hex, sizeof(key_hex))) != 0 ||
        (err = gw_hex_encode(nonce, 16, nonce_hex, sizeof(nonce_hex))) != 0) {
        return err;
    }
    /* Each step runs only while the previous ones succeeded. */
    err = append(out, cap, &pos,
                 "{\"type\":\"hello\",\"transport\":\"udp\","
                 "\"session_id\":");
    err = err ? err : append_str(out, cap, &pos, session_id);
    err = err ? err
              : append(out, cap, &pos,
                       ",\"audio_params\":{\"format\":\"opus\","
                       "\"sample_rate\":");
    err = err ? err : append_int(out, cap, &pos, audio->sample_rate);
    err = err ? err : append(out, cap, &pos, ",\"channels\":");
    err = err ? err : append_int(out, cap, &pos, audio->channels);
    err = err ? err : append(out, cap, &pos, ",\"frame_duration\":");
    err = err ? err : append_int(out, cap, &pos, audio->frame_duration);
    err = err ? err : append(out, cap, &pos, "},\"udp\":{\"server\":");
    err = err ? err : append_str(out, cap, &pos, server_host);
    err = err ? err : append(out, cap, &pos, ",\"port\":");
    err = err ? err : append_int(out, cap, &pos, port);
    err = err ? err
              : append(out, cap, &pos,
                       ",\"encryption\":\"aes-128-ctr\",\"key\":\"");
    err = err ? err : append(out, cap, &pos, key_hex);
    err = err ? err : append(out, cap, &pos, "\",\"nonce\":\"");
    err = err ? err : append(out, cap, &pos, nonce_hex);
    err = err ? err : append(out, cap, &pos, "\"}}");
    if (err != 0) {
        out[0] = '\0';
        return err;
    }
    if (out_len != NULL) {
        *out_len = pos;
    }
    return 0;
}

/* A bounded string copied into dst[cap]; false if missing or too long. */
static bool copy_string(const cJSON *item, bool allow_empty, char *dst,
                        size_t cap)
{
    const char *s = cJSON_GetStringValue(item);
    size_t n;

    if (s == NULL) {
        return false;
    }
    n = strlen(s);
    if (n >= cap || (n == 0 && !allow_empty)) {
        return false;
    }
    memcpy(dst, s, n + 1);
    return true;
}

static bool hex16(const cJSON *item, uint8_t out[16])
{
    const char *s = cJSON_GetStringValue(item);

    return s != NULL && gw_hex_decode(s, strlen(s), out, 16) == 0;
}

enum { U_SERVER, U_PORT, U_KEY, U_NONCE, U_COUNT };
static const char *const udp_names[U_COUNT] = {"server", "port", "key",
                                               "nonce"};

static int parse_udp(const cJSON *obj, struct gw_server_hello *out)
{
    const cJSON *m[U_COUNT];
    int32_t port;
    int err;

    if (!cJSON_IsObject(obj)) {
        return GW_EPROTO;
    }
    if ((err = split_members(obj, udp_names, U_COUNT, m, NULL)) != 0) {
        return err;
    }
    if (!copy_string(m[U_SERVER], false, out->server, sizeof(out->server)) ||
        !get_int(m[U_PORT], 1, 65535, &port) || !hex16(m[U_KEY], out->key) ||
        !hex16(m[U_NONCE], out->nonce)) {
        return GW_EPROTO;
    }
    out->port = (uint16_t)port;
    return 0;
}

/* Only the two members the firmware reads; format/channels are ignored. */
static int parse_downlink_audio(const cJSON *obj, struct gw_server_hello *out)
{
    const cJSON *m[A_COUNT];
    int err;

    if (!cJSON_IsObject(obj)) {
        return GW_EPROTO;
    }
    if ((err = split_members(obj, audio_names, A_COUNT, m, NULL)) != 0) {
        return err;
    }
    if ((m[A_RATE] != NULL &&
         !get_int(m[A_RATE], 1, 384000, &out->sample_rate)) ||
        (m[A_FRAME] != NULL &&
         (!get_int(m[A_FRAME], 1, 120, &out->frame_duration) ||
          !in_set(out->frame_duration, frame_durations,
                  COUNT(frame_durations))))) {
        return GW_EPROTO;
    }
    return 0;
}

enum { S_TYPE, S_TRANSPORT, S_SID, S_UDP, S_AUDIO, S_COUNT };
static const char *const server_names[S_COUNT] = {
    "type", "transport", "session_id", "udp", "audio_params"};

int gw_server_hello_parse(const cJSON *root, struct gw_server_hello *out)
{
    const cJSON *m[S_COUNT];
    int err;

    if (out == NULL) {
        return GW_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    out->sample_rate = backend_defaults.sample_rate;
    out->frame_duration = backend_defaults.frame_duration;
    if (!cJSON_IsObject(root)) {
        return GW_EPROTO;
    }
    if ((err = split_members(root, server_names, S_COUNT, m, NULL)) != 0) {
        return err;
    }
    if (!is_string(m[S_TYPE], "hello") || !is_string(m[S_TRANSPORT], "udp")) {
        return GW_EPROTO;
    }
    if (m[S_SID] != NULL) {
        if (!copy_string(m[S_SID], true, out->session_id,
                         sizeof(out->session_id))) {
            return GW_EPROTO;
        }
        out->has_session_id = true;
    }
    if ((err = parse_udp(m[S_UDP], out)) != 0 ||
        (m[S_AUDIO] != NULL &&
         (err = parse_downlink_audio(m[S_AUDIO], out)) != 0)) {
        memset(out, 0, sizeof(*out)); /* no half-read key or address */
        return err;
    }
    return 0;
}
