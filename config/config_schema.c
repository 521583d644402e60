/*
 * Every config key, declared once (docs/architecture.md section 5), and the
 * generic walks over those declarations: defaults, free, compare, dump.
 */
#include "config/config_schema.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "codec/ota_request.h"
#include "codec/ws_url.h"

/* Enums are stored and read through int *. */
_Static_assert(sizeof(enum gw_framing) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gw_auth_scheme) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gw_route_strategy) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gw_log_level) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gw_log_format) == sizeof(int), "enum size");

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Offset of a member of a nested (anonymous) struct within that struct. */
#define AT(type, outer, member)                                                \
    (offsetof(type, outer.member) - offsetof(type, outer))

/* One initializer per key kind, so that each table row reads as a row. */
/* clang-format off */
#define KEY_STR(n, off, fl, d, chk) {.name = (n), .type = GW_CF_STRING, \
    .flags = (fl), .offset = (off), .def_str = (d), .check = (chk)}
#define KEY_INT(n, off, fl, d, lo, hi) {.name = (n), .type = GW_CF_INT, \
    .flags = (fl), .offset = (off), .def = (d), .min = (lo), .max = (hi)}
#define KEY_BOOL(n, off, fl, d) {.name = (n), .type = GW_CF_BOOL, \
    .flags = (fl), .offset = (off), .def = (d)}
#define KEY_ENUM(n, off, fl, d, tbl) {.name = (n), .type = GW_CF_ENUM, \
    .flags = (fl), .offset = (off), .def = (d), .names = (tbl)}
#define KEY_OBJ(n, off, tbl) {.name = (n), .type = GW_CF_OBJECT, \
    .offset = (off), .sub = (tbl)}
#define KEY_ARRAY(n, off, cnt, fl, lo, hi, tbl) {.name = (n), \
    .type = GW_CF_ARRAY, .flags = (fl), .offset = (off), \
    .count_offset = (cnt), .min = (lo), .max = (hi), .sub = (tbl)}
#define KEY_STRS(n, off, cnt, fl, lo, hi, chk) {.name = (n), \
    .type = GW_CF_STRINGS, .flags = (fl), .offset = (off), \
    .count_offset = (cnt), .min = (lo), .max = (hi), .check = (chk)}
#define KEY_HEADERS(n, off, cnt, fl, hi) {.name = (n), \
    .type = GW_CF_HEADERS, .flags = (fl), .offset = (off), \
    .count_offset = (cnt), .min = 0, .max = (hi)}
#define TABLE(w, k, sz) {.what = (w), .keys = (k), .n_keys = COUNT(k), \
    .size = (sz)}
/* clang-format on */

/* ---- validators: a short reason, never the value (the path says it) --- */

static const char *check_nonempty(void *field)
{
    return **(char **)field == '\0' ? "must not be empty" : NULL;
}

/* A rate libopus codes at directly (no resampling in the gateway). */
static const char *check_opus_rate(void *field)
{
    int v = *(int *)field;

    return v == 8000 || v == 12000 || v == 16000 || v == 24000 || v == 48000
               ? NULL
               : "must be 8000, 12000, 16000, 24000 or 48000";
}

/* Names appear in logs, metrics and MQTT client ids: keep them plain. */
static const char *check_name(void *field)
{
    const char *s = *(char **)field;
    size_t len = strlen(s);

    if (len == 0) {
        return "must not be empty";
    }
    if (len > 64) {
        return "is longer than 64 characters";
    }
    if (strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                  "0123456789._-") != len) {
        return "may contain only letters, digits, '.', '_' and '-'";
    }
    return NULL;
}

/* The URL is used verbatim (docs/protocol.md section 6), so only its shape. */
static const char *check_url(void *field)
{
    const char *s = *(char **)field;
    const char *host, *why;
    struct gw_ws_url parts;

    if (strncmp(s, "ws://", 5) == 0) {
        host = s + 5;
    } else if (strncmp(s, "wss://", 6) == 0) {
        host = s + 6;
    } else {
        return "scheme must be ws:// or wss://";
    }
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p <= ' ' || *p == 0x7f) {
            return "must not contain spaces or control characters";
        }
    }
    if (*host == '\0' || strchr(":/?#@", *host) != NULL) {
        return "has no host";
    }
    /* What the connect will make of it: a url that loads must connect. */
    if (gw_ws_url_parse(s, strlen(s), &parts, &why) != 0) {
        return why;
    }
    return NULL;
}

/* An MCP server's Streamable HTTP endpoint, used verbatim by the client. */
static const char *check_http_url(void *field)
{
    const char *s = *(char **)field;
    const char *host;

    if (strncmp(s, "http://", 7) == 0) {
        host = s + 7;
    } else if (strncmp(s, "https://", 8) == 0) {
        host = s + 8;
    } else {
        return "scheme must be http:// or https://";
    }
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p <= ' ' || *p == 0x7f) {
            return "must not contain spaces or control characters";
        }
    }
    if (*host == '\0' || strchr(":/?#@", *host) != NULL) {
        return "has no host";
    }
    return NULL;
}

/* A URL handed to devices, or "" for none. */
static const char *check_optional_http_url(void *field)
{
    return **(char **)field == '\0' ? NULL : check_http_url(field);
}

/* Sent in an HTTP header: a CR or LF would end it and start another. */
static const char *check_header_value(void *field)
{
    for (const unsigned char *p = *(unsigned char **)field; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) {
            return "must not contain control characters";
        }
    }
    return NULL;
}

/* Subscription filters with one '+' level standing for the client id. */
static const char *check_level_topic(void *field)
{
    const char *s = *(char **)field;
    size_t plus = 0;

    if (strchr(s, '#') != NULL) {
        return "must not contain '#'";
    }
    for (const char *level = s;; level++) {
        size_t len = strcspn(level, "/");
        if (memchr(level, '+', len) != NULL) {
            if (len != 1) {
                return "'+' must be a whole topic level";
            }
            plus++;
        }
        level += len;
        if (*level == '\0') {
            break;
        }
    }
    return plus == 1 ? NULL : "needs exactly one '+' level (the client id)";
}

/* The gateway's own state topic: "" (none) or a plain topic. */
static const char *check_status_topic(void *field)
{
    const char *s = *(char **)field;

    return strpbrk(s, "+#") != NULL ? "must not contain '+' or '#'" : NULL;
}

/* cluster.topic_prefix: records go to <prefix>/<name>, one level below. */
static const char *check_cluster_prefix(void *field)
{
    const char *s = *(char **)field;
    size_t len = strlen(s);

    if (len == 0) {
        return "must not be empty";
    }
    if (strpbrk(s, "+#") != NULL) {
        return "must not contain '+' or '#'";
    }
    if (s[len - 1] == '/' || s[0] == '/') {
        return "must not begin or end with '/'";
    }
    return len > 128 ? "is longer than 128 characters" : NULL;
}

/* cluster.instance: "" (take mqtt.client_id) or a name. */
static const char *check_cluster_name(void *field)
{
    return **(char **)field == '\0' ? NULL : check_name(field);
}

/* A topic the gateway publishes to: no wildcards, one placeholder. */
static const char *check_down_topic(void *field)
{
    static const char hole[] = "{client_id}";
    const char *s = *(char **)field;
    const char *at = strstr(s, hole);

    if (strpbrk(s, "+#") != NULL) {
        return "must not contain '+' or '#'";
    }
    if (at == NULL || strstr(at + 1, hole) != NULL) {
        return "must contain {client_id} exactly once";
    }
    return NULL;
}

/* Accepts either case and stores lowercase, as devices are matched. */
static const char *check_mac(void *field)
{
    char *s = *(char **)field;

    if (strlen(s) != 17) {
        return "is not a MAC address like aa:bb:cc:dd:ee:ff";
    }
    for (size_t i = 0; i < 17; i++) {
        char c = s[i];
        if (i % 3 == 2) {
            if (c != ':') {
                return "is not a MAC address like aa:bb:cc:dd:ee:ff";
            }
        } else if (c >= 'A' && c <= 'F') {
            s[i] = (char)(c - 'A' + 'a');
        } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return "is not a MAC address like aa:bb:cc:dd:ee:ff";
        }
    }
    return NULL;
}

/* A client id is a topic level (docs/protocol.md section 1). */
static const char *check_client_id(void *field)
{
    const char *s = *(char **)field;

    if (*s == '\0') {
        return "must not be empty";
    }
    return strpbrk(s, "/+#") ? "must not contain '/', '+' or '#'" : NULL;
}

/* The group is part 1 of GROUP@@@MAC@@@UUID. */
static const char *check_group(void *field)
{
    const char *why = check_client_id(field);

    if (why == NULL && strstr(*(char **)field, "@@@") != NULL) {
        why = "must not contain '@@@'";
    }
    return why;
}

/*
 * The Node gateway refuses to start its API with a guessable key; here a
 * weak key is a config error instead, named by its path.
 */
static const char *check_manager_key(void *field)
{
    static const char *const weak[] = {"test",     "1234",   "admin",
                                       "password", "qwerty", "xiaozhi"};
    const char *s = *(char **)field;
    bool upper = false, lower = false;

    if (s[0] == '\0') {
        return NULL; /* off */
    }
    if (strlen(s) < 8) {
        return "must be at least 8 characters";
    }
    for (const char *p = s; *p != '\0'; p++) {
        upper = upper || (*p >= 'A' && *p <= 'Z');
        lower = lower || (*p >= 'a' && *p <= 'z');
    }
    if (!upper || !lower) {
        return "must mix upper and lower case letters";
    }
    for (size_t i = 0; i < COUNT(weak); i++) {
        if (strcasestr(s, weak[i]) != NULL) {
            return "contains a guessable word";
        }
    }
    return NULL;
}

/* An Origin header value: scheme "://" host [":" port], nothing else. */
static const char *check_origin(void *field)
{
    const char *s = *(char **)field;
    const char *host = strstr(s, "://");

    if (host == NULL || host == s || host[3] == '\0') {
        return "must look like scheme://host[:port]";
    }
    for (const char *p = host + 3; *p != '\0'; p++) {
        if (*p == '/' || *p == ' ' || (unsigned char)*p < 0x21) {
            return "must look like scheme://host[:port]";
        }
    }
    return NULL;
}

/* http.ui_dir: opened for each request, so relative to nothing. */
static const char *check_ui_dir(void *field)
{
    const char *s = *(char **)field;

    if (s[0] == '\0') {
        return NULL; /* the page is off */
    }
    if (s[0] != '/') {
        return "must be an absolute path (or \"\" to turn the page off)";
    }
    if (strlen(s) > 1024) {
        return "is longer than 1024 characters";
    }
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) {
            return "must not contain control characters";
        }
    }
    return NULL;
}

/* A Host header name: a DNS name or IP literal without port, or "*". */
static const char *check_host(void *field)
{
    const char *s = *(char **)field;

    if (s[0] == '\0' || strlen(s) > 253 ||
        strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                  "0123456789.-_:[]*") != strlen(s) ||
        (strchr(s, '*') != NULL && strcmp(s, "*") != 0)) {
        return "must be a host name or IP address (no port), or \"*\"";
    }
    return NULL;
}

/* ota.mqtt_endpoint: the firmware splits "host[:port]" at the first ':'
 * and reads the port with stoi, so one colon at most and a plain port. */
static const char *check_ota_endpoint(void *field)
{
    const char *s = *(char **)field;
    const char *colon = strchr(s, ':');
    long port = 0;

    if (s[0] == '\0') {
        return NULL; /* checked with ota.enabled */
    }
    if (colon == s || strlen(s) > 253 ||
        strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                  "0123456789.-_:") != strlen(s)) {
        return "must be host or host:port (no scheme, no IPv6 literal)";
    }
    if (colon != NULL) {
        if (colon[1] == '\0' || strlen(colon + 1) > 5 ||
            strspn(colon + 1, "0123456789") != strlen(colon + 1)) {
            return "must be host or host:port (no scheme, no IPv6 literal)";
        }
        port = strtol(colon + 1, NULL, 10);
        if (port < 1 || port > 65535) {
            return "port must be 1..65535";
        }
    }
    return NULL;
}

/* ota.group: part 1 of the client id, where "{board}" stands for the
 * device's board type. No '@' at all: "GID@@" would join the separator
 * into "@@@@@" and move the parts. */
static const char *check_ota_group(void *field)
{
    const char *why = check_group(field);

    if (why == NULL && strchr(*(char **)field, '@') != NULL) {
        why = "must not contain '@'";
    }
    if (why == NULL && strlen(*(char **)field) > 32) {
        why = "must be at most 32 characters";
    }
    return why;
}

/* ota.publish_topic: the topic devices publish to, a plain topic. */
static const char *check_publish_topic(void *field)
{
    const char *s = *(char **)field;

    if (s[0] == '\0') {
        return "must not be empty (a device with none sends nothing)";
    }
    return strpbrk(s, "+#") != NULL ? "must not contain '+' or '#'" : NULL;
}

/* The firmware compares versions as dot-separated numbers (stoi). */
static const char *check_fw_version(void *field)
{
    const char *s = *(char **)field;

    return s[0] == '\0' || gw_ota_version_valid(s)
               ? NULL
               : "must be dot-separated numbers like 2.4.2";
}

static const char *check_fw_url(void *field)
{
    return **(char **)field == '\0' ? NULL : check_http_url(field);
}

/* ---- enum spellings ---------------------------------------------------- */

static const struct gw_config_name framings[] = {
#define XX(name, text) {text, GW_FRAMING_##name},
    GW_FRAMING_MAP(XX)
#undef XX
        {NULL, 0},
};

static const struct gw_config_name auth_schemes[] = {
#define XX(name, text) {text, GW_AUTH_##name},
    GW_AUTH_SCHEME_MAP(XX)
#undef XX
        {NULL, 0},
};

static const struct gw_config_name strategies[] = {
#define XX(name, text) {text, GW_STRATEGY_##name},
    GW_ROUTE_STRATEGY_MAP(XX)
#undef XX
        {NULL, 0},
};

/* An MCP server takes no HMAC: its clients authenticate with a token. */
static const struct gw_config_name mcp_auth_schemes[] = {
    {"none", GW_AUTH_NONE},
    {"bearer", GW_AUTH_BEARER},
    {NULL, 0},
};

static const struct gw_config_name log_levels[] = {
#define XX(level, text) {text, GW_LOG_##level},
    GW_LOG_LEVEL_MAP(XX)
#undef XX
        {NULL, 0},
};

static const struct gw_config_name log_formats[] = {
    {"text", GW_LOG_TEXT},
    {"json", GW_LOG_JSON},
    {NULL, 0},
};

/* ---- the tables, innermost first --------------------------------------- */

#define TLS(m) AT(struct gw_config, mqtt.tls, m)
static const struct gw_config_key tls_keys[] = {
    KEY_BOOL("enabled", TLS(enabled), GW_CF_RESTART, 0),
    KEY_STR("ca_file", TLS(ca_file), GW_CF_RESTART, "", NULL),
    KEY_STR("cert_file", TLS(cert_file), GW_CF_RESTART, "", NULL),
    KEY_STR("key_file", TLS(key_file), GW_CF_RESTART, "", NULL),
};
static const struct gw_config_table tls_table = TABLE("mqtt.tls", tls_keys, 0);

/* The whole MQTT link is set up once; changing it means a restart. */
#define MQ(m) AT(struct gw_config, mqtt, m)
static const struct gw_config_key mqtt_keys[] = {
    KEY_STR("host", MQ(host), GW_CF_RESTART, "127.0.0.1", check_nonempty),
    KEY_INT("port", MQ(port), GW_CF_RESTART, 1883, 1, 65535),
    KEY_STR("client_id", MQ(client_id), GW_CF_RESTART, "", NULL),
    KEY_STR("username", MQ(username), GW_CF_RESTART, "", NULL),
    KEY_STR("password", MQ(password), GW_CF_RESTART | GW_CF_SECRET, "", NULL),
    KEY_INT("keepalive", MQ(keepalive_s), GW_CF_RESTART, 60, 5, 65535),
    KEY_OBJ("tls", MQ(tls), &tls_table),
    KEY_STR("up_topic", MQ(up_topic), GW_CF_RESTART, "devices/+/up",
            check_level_topic),
    KEY_STR("down_topic", MQ(down_topic), GW_CF_RESTART,
            "devices/{client_id}/down", check_down_topic),
    KEY_STR("presence_topic", MQ(presence_topic), GW_CF_RESTART,
            "devices/+/presence", check_level_topic),
    KEY_STR("status_topic", MQ(status_topic), GW_CF_RESTART, "",
            check_status_topic),
};
static const struct gw_config_table mqtt_table = TABLE("mqtt", mqtt_keys, 0);

/* The socket is bound once; what devices are told may change. */
#define UDP(m) AT(struct gw_config, udp, m)
static const struct gw_config_key udp_keys[] = {
    KEY_STR("bind", UDP(bind), GW_CF_RESTART, "0.0.0.0", check_nonempty),
    KEY_INT("port", UDP(port), GW_CF_RESTART, 8884, 0, 65535), /* 0: any */
    KEY_STR("public_host", UDP(public_host), GW_CF_RELOAD, "127.0.0.1",
            check_nonempty),
    /* 0 stands for "same as port" and is replaced after loading */
    KEY_INT("public_port", UDP(public_port), GW_CF_RELOAD, 0, 0, 65535),
};
static const struct gw_config_table udp_table = TABLE("udp", udp_keys, 0);

#define AUTH(m) AT(struct gw_backend_config, auth, m)
static const struct gw_config_key auth_keys[] = {
    KEY_ENUM("scheme", AUTH(scheme), GW_CF_RELOAD, GW_AUTH_NONE, auth_schemes),
    KEY_STR("token", AUTH(token), GW_CF_RELOAD | GW_CF_SECRET, "", NULL),
    KEY_STR("secret", AUTH(secret), GW_CF_RELOAD | GW_CF_SECRET, "", NULL),
};
static const struct gw_config_table auth_table =
    TABLE("backend auth", auth_keys, 0);

#define BE(m) offsetof(struct gw_backend_config, m)
static const struct gw_config_key backend_keys[] = {
    KEY_STR("name", BE(name), GW_CF_REQUIRED, NULL, check_name),
    KEY_STR("url", BE(url), GW_CF_REQUIRED, NULL, check_url),
    KEY_ENUM("framing", BE(framing), GW_CF_RELOAD, GW_FRAMING_V2, framings),
    KEY_OBJ("auth", BE(auth), &auth_table),
    KEY_STR("ca_file", BE(ca_file), GW_CF_RELOAD, "", NULL),
    KEY_INT("connect_timeout_ms", BE(connect_timeout_ms), GW_CF_RELOAD, 5000,
            100, 120000),
    /* For a backend behind an authenticating proxy; values are secrets. */
    KEY_HEADERS("headers", BE(headers), BE(n_headers),
                GW_CF_RELOAD | GW_CF_SECRET, GW_HEADERS_MAX),
    /* gateway/backend/backend_pool.c: its share of a weighted, least or sticky
     * route, and a cap on its sessions at once (0: none). */
    KEY_INT("weight", BE(weight), GW_CF_RELOAD, 1, 1, 1000),
    KEY_INT("max_sessions", BE(max_sessions), GW_CF_RELOAD, 0, 0, 1000000),
    /* pcm16 only: the rate of the backend's PCM when its hello names none */
    /* clang-format off */
    {.name = "pcm_sample_rate", .type = GW_CF_INT, .flags = GW_CF_RELOAD,
     .offset = BE(pcm_sample_rate), .def = 24000, .min = 8000, .max = 48000,
     .check = check_opus_rate},
    /* clang-format on */
};
static const struct gw_config_table backend_table =
    TABLE("backend", backend_keys, sizeof(struct gw_backend_config));

/* "match" is a JSON object whose members live directly in the route. */
#define RT(m) offsetof(struct gw_route_config, m)
static const struct gw_config_key match_keys[] = {
    KEY_STRS("groups", RT(groups), RT(n_groups), GW_CF_RELOAD, 0, 4096,
             check_group),
    KEY_STRS("macs", RT(macs), RT(n_macs), GW_CF_RELOAD, 0, 4096, check_mac),
    KEY_STRS("client_ids", RT(client_ids), RT(n_client_ids), GW_CF_RELOAD, 0,
             4096, check_client_id),
};
static const struct gw_config_table match_table =
    TABLE("route match", match_keys, 0);

static const struct gw_config_key route_keys[] = {
    KEY_OBJ("match", 0, &match_table),
    KEY_STRS("backends", RT(backends), RT(n_backends), GW_CF_REQUIRED, 1, 256,
             NULL),
    KEY_ENUM("strategy", RT(strategy), GW_CF_RELOAD, GW_STRATEGY_ORDERED,
             strategies),
};
static const struct gw_config_table route_table =
    TABLE("route", route_keys, sizeof(struct gw_route_config));

/* The listener is bound once; the token is checked per request. */
#define HTTP(m) AT(struct gw_config, http, m)
static const struct gw_config_key http_keys[] = {
    KEY_STR("listen", HTTP(listen), GW_CF_RESTART, "127.0.0.1", check_nonempty),
    KEY_INT("port", HTTP(port), GW_CF_RESTART, 8007, 0, 65535),
    KEY_STR("token", HTTP(token), GW_CF_RELOAD | GW_CF_SECRET, "", NULL),
    /* The manager-api's daily token is sha256(date + this key); "" turns
     * its routes off. */
    KEY_STR("manager_key", HTTP(manager_key), GW_CF_RELOAD | GW_CF_SECRET, "",
            check_manager_key),
    KEY_STRS("allowed_origins", HTTP(allowed_origins), HTTP(n_allowed_origins),
             GW_CF_RELOAD, 0, 64, check_origin),
    KEY_INT("max_body_bytes", HTTP(max_body_bytes), GW_CF_RESTART, 262144, 1024,
            16777216),
    /* DNS rebinding: a browser's Host names the attacker's domain. */
    KEY_STRS("allowed_hosts", HTTP(allowed_hosts), HTTP(n_allowed_hosts),
             GW_CF_RELOAD, 0, 64, check_host),
    KEY_INT("max_connections", HTTP(max_connections), GW_CF_RESTART, 256, 1,
            100000),
    KEY_INT("max_connections_per_address", HTTP(max_connections_per_address),
            GW_CF_RESTART, 32, 1, 100000),
    /* Where the image installs web/; read per request, so reloadable. */
    KEY_STR("ui_dir", HTTP(ui_dir), GW_CF_RELOAD,
            "/usr/local/share/hybridgw/web", check_ui_dir),
    /* The manager-api gives up after 10 s: answer before it does. */
    KEY_INT("api_timeout_ms", HTTP(api_timeout_ms), GW_CF_RELOAD, 8000, 100,
            600000),
    KEY_INT("broadcast_max_devices", HTTP(broadcast_max_devices), GW_CF_RELOAD,
            1024, 1, 1048576),
};
static const struct gw_config_table http_table = TABLE("http", http_keys, 0);

/* The device's camera tools upload to url with this bearer token. */
#define VIS(m) AT(struct gw_config, mcp.client_capabilities.vision, m)
static const struct gw_config_key vision_keys[] = {
    KEY_STR("url", VIS(url), GW_CF_RELOAD, "", check_optional_http_url),
    KEY_STR("token", VIS(token), GW_CF_RELOAD | GW_CF_SECRET, "", NULL),
};
static const struct gw_config_table vision_table =
    TABLE("mcp.client_capabilities.vision", vision_keys, 0);
static const struct gw_config_key client_caps_keys[] = {
    KEY_OBJ("vision", AT(struct gw_config, mcp.client_capabilities, vision),
            &vision_table),
};
static const struct gw_config_table client_caps_table =
    TABLE("mcp.client_capabilities", client_caps_keys, 0);

#define MCP(m) AT(struct gw_config, mcp, m)
static const struct gw_config_key mcp_keys[] = {
    KEY_BOOL("discover", MCP(discover), GW_CF_RELOAD, 1),
    KEY_INT("call_timeout_ms", MCP(call_timeout_ms), GW_CF_RELOAD, 30000, 100,
            600000),
    /* The Node gateway's max_tools_count is 128; pages are ~8000 bytes. */
    KEY_INT("max_tools", MCP(max_tools), GW_CF_RELOAD, 128, 1, 4096),
    KEY_INT("max_pending", MCP(max_pending), GW_CF_RELOAD, 32, 1, 4096),
    KEY_INT("discover_concurrency", MCP(discover_concurrency), GW_CF_RELOAD, 64,
            1, 100000),
    KEY_BOOL("expose_user_tools", MCP(expose_user_tools), GW_CF_RELOAD, 0),
    KEY_INT("session_idle_timeout_ms", MCP(session_idle_timeout_ms),
            GW_CF_RELOAD, 1800000, 1000, 86400000),
    KEY_INT("max_sessions", MCP(max_sessions), GW_CF_RELOAD, 256, 1, 100000),
    /* Each of a device's tools, resources, templates, prompts lists. */
    KEY_INT("max_list_items", MCP(max_list_items), GW_CF_RELOAD, 128, 1, 4096),
    /* The sum of text / blob lengths of one resources/read answer. */
    KEY_INT("max_resource_bytes", MCP(max_resource_bytes), GW_CF_RELOAD,
            1048576, 1024, 67108864),
    KEY_INT("task_result_timeout_ms", MCP(task_result_timeout_ms), GW_CF_RELOAD,
            300000, 100, 86400000),
    /* sampling, elicitation, roots requests of one device waiting at once */
    KEY_INT("max_device_requests", MCP(max_device_requests), GW_CF_RELOAD, 4, 1,
            1024),
    KEY_INT("device_request_timeout_ms", MCP(device_request_timeout_ms),
            GW_CF_RELOAD, 60000, 100, 3600000),
    /* Requests of one device to the MCP servers of mcp_servers at once. */
    KEY_INT("outbound_max_pending", MCP(outbound_max_pending), GW_CF_RELOAD, 8,
            1, 1024),
    /* A larger answer is cut off and refused; a device reads 8192 bytes. */
    KEY_INT("outbound_max_response_bytes", MCP(outbound_max_response_bytes),
            GW_CF_RELOAD, 1048576, 1024, 67108864),
    KEY_INT("outbound_session_idle_ms", MCP(outbound_session_idle_ms),
            GW_CF_RELOAD, 600000, 1000, 86400000),
    KEY_OBJ("client_capabilities", MCP(client_capabilities),
            &client_caps_table),
};
static const struct gw_config_table mcp_table = TABLE("mcp", mcp_keys, 0);

#define MSA(m) AT(struct gw_mcp_server_config, auth, m)
static const struct gw_config_key mcp_server_auth_keys[] = {
    KEY_ENUM("scheme", MSA(scheme), GW_CF_RELOAD, GW_AUTH_NONE,
             mcp_auth_schemes),
    KEY_STR("token", MSA(token), GW_CF_RELOAD | GW_CF_SECRET, "",
            check_header_value),
};
static const struct gw_config_table mcp_server_auth_table =
    TABLE("mcp server auth", mcp_server_auth_keys, 0);

/* Matched like a route's match: empty lists allow every device. */
#define MSL(m) AT(struct gw_mcp_server_config, allow, m)
static const struct gw_config_key mcp_server_allow_keys[] = {
    KEY_STRS("groups", MSL(groups), MSL(n_groups), GW_CF_RELOAD, 0, 4096,
             check_group),
    KEY_STRS("macs", MSL(macs), MSL(n_macs), GW_CF_RELOAD, 0, 4096, check_mac),
    KEY_STRS("client_ids", MSL(client_ids), MSL(n_client_ids), GW_CF_RELOAD, 0,
             4096, check_client_id),
};
static const struct gw_config_table mcp_server_allow_table =
    TABLE("mcp server allow", mcp_server_allow_keys, 0);

#define MS(m) offsetof(struct gw_mcp_server_config, m)
static const struct gw_config_key mcp_server_keys[] = {
    KEY_STR("name", MS(name), GW_CF_REQUIRED, NULL, check_name),
    KEY_STR("url", MS(url), GW_CF_REQUIRED, NULL, check_http_url),
    KEY_OBJ("auth", MS(auth), &mcp_server_auth_table),
    KEY_STR("ca_file", MS(ca_file), GW_CF_RELOAD, "", NULL),
    KEY_INT("timeout_ms", MS(timeout_ms), GW_CF_RELOAD, 30000, 100, 600000),
    KEY_OBJ("allow", MS(allow), &mcp_server_allow_table),
};
static const struct gw_config_table mcp_server_table =
    TABLE("mcp server", mcp_server_keys, sizeof(struct gw_mcp_server_config));

#define LIM(m) AT(struct gw_config, limits, m)
static const struct gw_config_key limits_keys[] = {
    KEY_INT("max_sessions", LIM(max_sessions), GW_CF_RELOAD, 10000, 1, 1000000),
    KEY_INT("backend_hello_timeout_ms", LIM(backend_hello_timeout_ms),
            GW_CF_RELOAD, 5000, 100, 120000),
    /* The firmware waits 10 s for the server hello: failover to further
     * backends happens within this, each attempt getting at most
     * backend_hello_timeout_ms of what is left. */
    KEY_INT("failover_budget_ms", LIM(failover_budget_ms), GW_CF_RELOAD, 9000,
            1000, 120000),
    KEY_INT("udp_idle_timeout_ms", LIM(udp_idle_timeout_ms), GW_CF_RELOAD,
            120000, 1000, 3600000),
    /* The Node gateway's 60 s: the callee's user has time to answer. */
    KEY_INT("call_ring_timeout_ms", LIM(call_ring_timeout_ms), GW_CF_RELOAD,
            60000, 500, 600000),
    KEY_INT("max_message_bytes", LIM(max_message_bytes), GW_CF_RELOAD, 8192,
            256, 65536),
    /* See session.c: the tts start goes through the broker, the audio
     * behind it does not and must not overtake it. */
    KEY_INT("tts_start_guard_ms", LIM(tts_start_guard_ms), GW_CF_RELOAD, 40, 0,
            1000),
    /* gateway/mqtt_dispatch.c: each hello opens a backend connection. A
     * device says hello once per conversation; these never stop one. */
    KEY_INT("hello_burst", LIM(hello_burst), GW_CF_RELOAD, 20, 1, 10000),
    KEY_INT("hello_per_minute", LIM(hello_per_minute), GW_CF_RELOAD, 20, 1,
            60000),
    /* gateway/device/publish.c: a broker restart must not lose a tts start;
     * 0 messages or 0 ms turns the outbox off. */
    KEY_INT("outbox_messages", LIM(outbox_messages), GW_CF_RELOAD, 1024, 0,
            1000000),
    KEY_INT("outbox_bytes", LIM(outbox_bytes), GW_CF_RELOAD, 1048576, 0,
            268435456),
    KEY_INT("outbox_age_ms", LIM(outbox_age_ms), GW_CF_RELOAD, 10000, 0,
            600000),
};
static const struct gw_config_table limits_table =
    TABLE("limits", limits_keys, 0);

/* gateway/backend/backend_pool.c: a failing backend leaves the rotation. */
#define HEALTH(m) AT(struct gw_config, health, m)
static const struct gw_config_key health_keys[] = {
    KEY_INT("backoff_ms", HEALTH(backoff_ms), GW_CF_RELOAD, 1000, 10, 3600000),
    KEY_INT("backoff_max_ms", HEALTH(backoff_max_ms), GW_CF_RELOAD, 60000, 10,
            86400000),
    /* WebSocket ping on a backend connection idle this long, and the
     * connection dropped when no pong follows in as long again. */
    KEY_INT("ping_interval_s", HEALTH(ping_interval_s), GW_CF_RESTART, 30, 0,
            3600),
    /* gateway/backend/backend_probe.c: each backend in rotation gets an
     * upgrade, closed at once, this often; a failure takes it out (0: none). */
    KEY_INT("probe_interval_s", HEALTH(probe_interval_s), GW_CF_RELOAD, 0, 0,
            86400),
};
static const struct gw_config_table health_table =
    TABLE("health", health_keys, 0);

/* gateway/api/ota.c; read per request, so every key reloads. */
#define FW(m) AT(struct gw_config, ota.firmware, m)
static const struct gw_config_key ota_firmware_keys[] = {
    KEY_STR("version", FW(version), GW_CF_RELOAD, "", check_fw_version),
    KEY_STR("url", FW(url), GW_CF_RELOAD, "", check_fw_url),
    KEY_BOOL("force", FW(force), GW_CF_RELOAD, 0),
};
static const struct gw_config_table ota_firmware_table =
    TABLE("ota.firmware", ota_firmware_keys, 0);

#define OTA(m) AT(struct gw_config, ota, m)
static const struct gw_config_key ota_keys[] = {
    KEY_BOOL("enabled", OTA(enabled), GW_CF_RELOAD, 0),
    KEY_STR("mqtt_endpoint", OTA(mqtt_endpoint), GW_CF_RELOAD, "",
            check_ota_endpoint),
    KEY_STR("device_key", OTA(device_key), GW_CF_RELOAD | GW_CF_SECRET, "",
            NULL),
    KEY_STR("group", OTA(group), GW_CF_RELOAD, "GID_default", check_ota_group),
    KEY_STR("publish_topic", OTA(publish_topic), GW_CF_RELOAD, "device-server",
            check_publish_topic),
    KEY_INT("keepalive_s", OTA(keepalive_s), GW_CF_RELOAD, 240, 10, 65535),
    KEY_INT("timezone_offset_min", OTA(timezone_offset_min), GW_CF_RELOAD, 0,
            -720, 840),
    KEY_OBJ("firmware", OTA(firmware), &ota_firmware_table),
};
static const struct gw_config_table ota_table = TABLE("ota", ota_keys, 0);

#define LOG(m) AT(struct gw_config, log, m)
static const struct gw_config_key log_keys[] = {
    KEY_ENUM("level", LOG(level), GW_CF_RELOAD, GW_LOG_INFO, log_levels),
    KEY_ENUM("format", LOG(format), GW_CF_RELOAD, GW_LOG_TEXT, log_formats),
};
static const struct gw_config_table log_table = TABLE("log", log_keys, 0);

static const struct gw_config_name cluster_modes[] = {
    {"off", GW_CLUSTER_MODE_OFF},
    {"hash", GW_CLUSTER_MODE_HASH},
    {"shared", GW_CLUSTER_MODE_SHARED},
    {NULL, 0},
};

/* Membership is set up once with the broker link. */
#define CL(m) AT(struct gw_config, cluster, m)
static const struct gw_config_key cluster_keys[] = {
    KEY_STR("instance", CL(instance), GW_CF_RESTART, "", check_cluster_name),
    KEY_ENUM("mode", CL(mode), GW_CF_RESTART, GW_CLUSTER_MODE_OFF,
             cluster_modes),
    KEY_STR("topic_prefix", CL(topic_prefix), GW_CF_RESTART,
            "hybridgw/instances", check_cluster_prefix),
    KEY_STR("share_group", CL(share_group), GW_CF_RESTART, "hybridgw",
            check_name),
    KEY_INT("drain_deadline_s", CL(drain_deadline_s), GW_CF_RELOAD, 300, 1,
            86400),
};
static const struct gw_config_table cluster_table =
    TABLE("cluster", cluster_keys, 0);

#define TOP(m) offsetof(struct gw_config, m)
static const struct gw_config_key top_keys[] = {
    KEY_STR("instance", TOP(instance), GW_CF_RESTART, "gw-1", check_name),
    KEY_OBJ("mqtt", TOP(mqtt), &mqtt_table),
    KEY_OBJ("udp", TOP(udp), &udp_table),
    /* 0 allowed here so that an empty list gets the clearer message */
    KEY_ARRAY("backends", TOP(backends), TOP(n_backends), GW_CF_RELOAD, 0, 256,
              &backend_table),
    KEY_ARRAY("routes", TOP(routes), TOP(n_routes), GW_CF_RELOAD, 1, 4096,
              &route_table),
    KEY_OBJ("http", TOP(http), &http_table),
    KEY_OBJ("mcp", TOP(mcp), &mcp_table),
    KEY_ARRAY("mcp_servers", TOP(mcp_servers), TOP(n_mcp_servers), GW_CF_RELOAD,
              0, 256, &mcp_server_table),
    KEY_OBJ("limits", TOP(limits), &limits_table),
    KEY_OBJ("health", TOP(health), &health_table),
    KEY_OBJ("ota", TOP(ota), &ota_table),
    KEY_OBJ("log", TOP(log), &log_table),
    KEY_OBJ("cluster", TOP(cluster), &cluster_table),
};
const struct gw_config_table gw_config_schema =
    TABLE("config", top_keys, sizeof(struct gw_config));

/* ---- names ------------------------------------------------------------- */

const char *gw_config_schema_name(const struct gw_config_name *names, int value)
{
    for (; names->name != NULL; names++) {
        if (names->value == value) {
            return names->name;
        }
    }
    return NULL;
}

const char *gw_framing_name(enum gw_framing framing)
{
    const char *name = gw_config_schema_name(framings, (int)framing);
    return name != NULL ? name : "unknown";
}

const char *gw_route_strategy_name(enum gw_route_strategy strategy)
{
    const char *name = gw_config_schema_name(strategies, (int)strategy);
    return name != NULL ? name : "unknown";
}

const char *gw_auth_scheme_name(enum gw_auth_scheme scheme)
{
    const char *name = gw_config_schema_name(auth_schemes, (int)scheme);
    return name != NULL ? name : "unknown";
}

/* ---- messages ---------------------------------------------------------- */

const char *gw_config_schema_quote(const char *s, char *buf, size_t size)
{
    size_t i = 0, cap = size > 4 ? size - 4 : 0;

    for (; s[i] != '\0' && i < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[i] = (c < 0x20 || c == 0x7f) ? '.' : (char)c;
    }
    if (s[i] != '\0') {
        while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80) {
            i--; /* do not split a UTF-8 sequence */
        }
        memcpy(buf + i, "...", 3);
        i += 3;
    }
    buf[i] = '\0';
    return buf;
}

const char *gw_config_schema_json_type(const cJSON *item)
{
    if (cJSON_IsBool(item)) {
        return "a boolean";
    }
    if (cJSON_IsNull(item)) {
        return "null";
    }
    if (cJSON_IsNumber(item)) {
        return "a number";
    }
    if (cJSON_IsString(item)) {
        return "a string";
    }
    if (cJSON_IsArray(item)) {
        return "an array";
    }
    return cJSON_IsObject(item) ? "an object" : "an invalid value";
}

/* ---- setters: scalar JSON values into their fields --------------------- */

const char gw_config_schema_oom[] = "out of memory";

/* A setter stores item at field or returns a reason (why may hold it). */
typedef const char *(*setter)(const struct gw_config_key *key,
                              const cJSON *item, void *field, char *why,
                              size_t whylen);

static const char *wrong_type(const char *want, const cJSON *item, char *why,
                              size_t whylen)
{
    snprintf(why, whylen, "expected %s, got %s", want,
             gw_config_schema_json_type(item));
    return why;
}

static const char *set_string(const struct gw_config_key *key,
                              const cJSON *item, void *field, char *why,
                              size_t whylen)
{
    char *copy;

    (void)key;
    if (!cJSON_IsString(item)) {
        return wrong_type("a string", item, why, whylen);
    }
    copy = strdup(item->valuestring);
    if (copy == NULL) {
        return gw_config_schema_oom;
    }
    free(*(char **)field);
    *(char **)field = copy;
    return NULL;
}

static const char *set_int(const struct gw_config_key *key, const cJSON *item,
                           void *field, char *why, size_t whylen)
{
    double v;

    if (!cJSON_IsNumber(item)) {
        return wrong_type("an integer", item, why, whylen);
    }
    v = item->valuedouble;
    /* Range first: it also keeps the cast below defined (and NaN out). */
    if (!(v >= (double)key->min && v <= (double)key->max)) {
        snprintf(why, whylen, "%.15g is out of range %lld-%lld", v, key->min,
                 key->max);
        return why;
    }
    if ((double)(long long)v != v) {
        snprintf(why, whylen, "expected an integer, got %.15g", v);
        return why;
    }
    *(int *)field = (int)v;
    return NULL;
}

static const char *set_bool(const struct gw_config_key *key, const cJSON *item,
                            void *field, char *why, size_t whylen)
{
    (void)key;
    if (!cJSON_IsBool(item)) {
        return wrong_type("true or false", item, why, whylen);
    }
    *(bool *)field = cJSON_IsTrue(item);
    return NULL;
}

static const char *set_enum(const struct gw_config_key *key, const cJSON *item,
                            void *field, char *why, size_t whylen)
{
    char q[48];
    size_t used;

    if (!cJSON_IsString(item)) {
        return wrong_type("a string", item, why, whylen);
    }
    for (const struct gw_config_name *n = key->names; n->name; n++) {
        if (strcmp(n->name, item->valuestring) == 0) {
            *(int *)field = n->value;
            return NULL;
        }
    }
    snprintf(why, whylen, "'%s' is not one of",
             gw_config_schema_quote(item->valuestring, q, sizeof(q)));
    for (const struct gw_config_name *n = key->names; n->name; n++) {
        used = strlen(why);
        snprintf(why + used, whylen - used, "%s %s", n == key->names ? "" : ",",
                 n->name);
    }
    return why;
}

static const setter setters[] = {
    [GW_CF_STRING] = set_string,  [GW_CF_INT] = set_int,
    [GW_CF_BOOL] = set_bool,      [GW_CF_ENUM] = set_enum,
    [GW_CF_STRINGS] = set_string, /* one element of the list */
};

const char *gw_config_schema_set(const struct gw_config_key *key,
                                 const cJSON *item, void *field, char *why,
                                 size_t whylen)
{
    const char *reason = NULL;

    if ((size_t)key->type >= COUNT(setters) || setters[key->type] == NULL) {
        return "not a scalar"; /* objects and lists are the loader's */
    }
    reason = setters[key->type](key, item, field, why, whylen);
    if (reason == NULL && key->check != NULL) {
        reason = key->check(field);
    }
    return reason;
}

/* ---- "did you mean" ---------------------------------------------------- */

#define NEAR_LEN 64 /* longer words get no suggestion */

static unsigned char lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c - 'A' + 'a') : c;
}

/* Edit distance counting a swap of neighbours as one edit, no case. */
static size_t distance(const char *a, size_t la, const char *b, size_t lb)
{
    size_t d[NEAR_LEN + 1][NEAR_LEN + 1];

    for (size_t i = 0; i <= la; i++) {
        for (size_t j = 0; j <= lb; j++) {
            if (i == 0 || j == 0) {
                d[i][j] = i + j;
                continue;
            }
            size_t cost = lower((unsigned char)a[i - 1]) !=
                          lower((unsigned char)b[j - 1]);
            size_t best = d[i - 1][j - 1] + cost;
            best = d[i - 1][j] + 1 < best ? d[i - 1][j] + 1 : best;
            best = d[i][j - 1] + 1 < best ? d[i][j - 1] + 1 : best;
            if (i > 1 && j > 1 &&
                lower((unsigned char)a[i - 1]) ==
                    lower((unsigned char)b[j - 2]) &&
                lower((unsigned char)a[i - 2]) ==
                    lower((unsigned char)b[j - 1]) &&
                d[i - 2][j - 2] + 1 < best) {
                best = d[i - 2][j - 2] + 1;
            }
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

const char *gw_config_schema_nearest(const char *word, const void *records,
                                     size_t n, size_t stride, size_t offset)
{
    size_t lw = strlen(word), best_d = SIZE_MAX;
    size_t limit = lw <= 3 ? 1 : lw <= 6 ? 2 : 3;
    const char *best = NULL;

    if (lw > NEAR_LEN) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const char *cand =
            *(const char *const *)((const char *)records + i * stride + offset);
        size_t lc = strlen(cand), d;
        if (lc > NEAR_LEN) {
            continue;
        }
        d = distance(word, lw, cand, lc);
        if (d <= limit && d < (lw > lc ? lw : lc) && d < best_d) {
            best = cand;
            best_d = d;
        }
    }
    return best;
}

/* ---- generic walks ----------------------------------------------------- */

#define FIELD(base, key)   ((char *)(base) + (key)->offset)
#define CFIELD(base, key)  ((const char *)(base) + (key)->offset)
#define COUNTER(base, key) ((size_t *)((char *)(base) + (key)->count_offset))
#define CCOUNTER(base, key)                                                    \
    (*(const size_t *)((const char *)(base) + (key)->count_offset))

int gw_config_schema_fill(const struct gw_config_table *table, void *base)
{
    for (size_t i = 0; i < table->n_keys; i++) {
        const struct gw_config_key *key = &table->keys[i];
        void *field = FIELD(base, key);
        int rc;

        switch (key->type) {
        case GW_CF_STRING:
            *(char **)field = strdup(key->def_str ? key->def_str : "");
            if (*(char **)field == NULL) {
                return GW_ENOMEM;
            }
            break;
        case GW_CF_INT:
        case GW_CF_ENUM:
            *(int *)field = (int)key->def;
            break;
        case GW_CF_BOOL:
            *(bool *)field = key->def != 0;
            break;
        case GW_CF_OBJECT:
            rc = gw_config_schema_fill(key->sub, field);
            if (rc < 0) {
                return rc;
            }
            break;
        case GW_CF_ARRAY:
        case GW_CF_STRINGS:
        case GW_CF_HEADERS:
            *(void **)field = NULL;
            *COUNTER(base, key) = 0;
            break;
        }
    }
    return 0;
}

void gw_config_schema_free(const struct gw_config_table *table, void *base)
{
    for (size_t i = 0; i < table->n_keys; i++) {
        const struct gw_config_key *key = &table->keys[i];
        void *field = FIELD(base, key);
        size_t n;

        switch (key->type) {
        case GW_CF_STRING:
            free(*(char **)field);
            *(char **)field = NULL;
            break;
        case GW_CF_OBJECT:
            gw_config_schema_free(key->sub, field);
            break;
        case GW_CF_ARRAY:
            n = *COUNTER(base, key);
            for (size_t k = 0; k < n; k++) {
                gw_config_schema_free(key->sub,
                                      *(char **)field + k * key->sub->size);
            }
            free(*(void **)field);
            *(void **)field = NULL;
            *COUNTER(base, key) = 0;
            break;
        case GW_CF_STRINGS:
            n = *COUNTER(base, key);
            for (size_t k = 0; k < n; k++) {
                free((*(char ***)field)[k]);
            }
            free(*(void **)field);
            *(void **)field = NULL;
            *COUNTER(base, key) = 0;
            break;
        case GW_CF_HEADERS:
            n = *COUNTER(base, key);
            for (size_t k = 0; k < n; k++) {
                free((*(struct gw_header **)field)[k].name);
                free((*(struct gw_header **)field)[k].value);
            }
            free(*(void **)field);
            *(void **)field = NULL;
            *COUNTER(base, key) = 0;
            break;
        default:
            break;
        }
    }
}

static bool table_equal(const struct gw_config_table *table, const void *a,
                        const void *b)
{
    for (size_t i = 0; i < table->n_keys; i++) {
        if (!gw_config_schema_equal(&table->keys[i], a, b)) {
            return false;
        }
    }
    return true;
}

bool gw_config_schema_equal(const struct gw_config_key *key, const void *a,
                            const void *b)
{
    const void *fa = CFIELD(a, key), *fb = CFIELD(b, key);
    size_t n;

    switch (key->type) {
    case GW_CF_STRING:
        return strcmp(*(char *const *)fa, *(char *const *)fb) == 0;
    case GW_CF_INT:
    case GW_CF_ENUM:
        return *(const int *)fa == *(const int *)fb;
    case GW_CF_BOOL:
        return *(const bool *)fa == *(const bool *)fb;
    case GW_CF_OBJECT:
        return table_equal(key->sub, fa, fb);
    case GW_CF_ARRAY:
        n = CCOUNTER(a, key);
        if (n != CCOUNTER(b, key)) {
            return false;
        }
        for (size_t k = 0; k < n; k++) {
            size_t at = k * key->sub->size;
            if (!table_equal(key->sub, *(char *const *)fa + at,
                             *(char *const *)fb + at)) {
                return false;
            }
        }
        return true;
    case GW_CF_STRINGS:
        n = CCOUNTER(a, key);
        if (n != CCOUNTER(b, key)) {
            return false;
        }
        for (size_t k = 0; k < n; k++) {
            if (strcmp((*(char **const *)fa)[k], (*(char **const *)fb)[k])) {
                return false;
            }
        }
        return true;
    case GW_CF_HEADERS:
        n = CCOUNTER(a, key);
        if (n != CCOUNTER(b, key)) {
            return false;
        }
        for (size_t k = 0; k < n; k++) {
            const struct gw_header *ha = &(*(struct gw_header *const *)fa)[k];
            const struct gw_header *hb = &(*(struct gw_header *const *)fb)[k];
            if (strcmp(ha->name, hb->name) || strcmp(ha->value, hb->value)) {
                return false;
            }
        }
        return true;
    }
    return false;
}

size_t gw_config_schema_diff(const struct gw_config_table *table, const void *a,
                             const void *b, const char *prefix,
                             gw_config_change_cb cb, void *arg)
{
    size_t changed = 0;

    for (size_t i = 0; i < table->n_keys; i++) {
        const struct gw_config_key *key = &table->keys[i];
        char path[128];

        /* Key names are short constants and the nesting is shallow. */
        snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "",
                 key->name);
        if (key->type == GW_CF_OBJECT && !(key->flags & GW_CF_RESTART)) {
            changed += gw_config_schema_diff(key->sub, CFIELD(a, key),
                                             CFIELD(b, key), path, cb, arg);
        } else if ((key->flags & GW_CF_RESTART) &&
                   !gw_config_schema_equal(key, a, b)) {
            changed++;
            if (cb != NULL) {
                cb(path, arg);
            }
        }
    }
    return changed;
}

/* Bytes a key's value occupies in its struct (count excluded). */
static size_t field_size(const struct gw_config_key *key)
{
    switch (key->type) {
    case GW_CF_INT:
    case GW_CF_ENUM:
        return sizeof(int);
    case GW_CF_BOOL:
        return sizeof(bool);
    case GW_CF_OBJECT:
        return key->sub->size;
    default:
        return sizeof(void *);
    }
}

static void swap_bytes(void *a, void *b, size_t n)
{
    unsigned char *x = a, *y = b;

    for (size_t i = 0; i < n; i++) {
        unsigned char t = x[i];
        x[i] = y[i];
        y[i] = t;
    }
}

size_t gw_config_schema_keep(const struct gw_config_table *table, void *running,
                             void *loaded)
{
    size_t kept = 0;

    for (size_t i = 0; i < table->n_keys; i++) {
        const struct gw_config_key *key = &table->keys[i];

        if (key->type == GW_CF_OBJECT && !(key->flags & GW_CF_RESTART)) {
            kept += gw_config_schema_keep(key->sub, FIELD(running, key),
                                          FIELD(loaded, key));
        } else if ((key->flags & GW_CF_RESTART) &&
                   !gw_config_schema_equal(key, running, loaded)) {
            /* Ownership moves with the bytes: each side frees what it
             * ends up holding. */
            swap_bytes(FIELD(running, key), FIELD(loaded, key),
                       field_size(key));
            if (key->type == GW_CF_ARRAY || key->type == GW_CF_STRINGS ||
                key->type == GW_CF_HEADERS) {
                swap_bytes(COUNTER(running, key), COUNTER(loaded, key),
                           sizeof(size_t));
            }
            kept++;
        }
    }
    return kept;
}

/* Names as written; values masked like any secret string. */
static cJSON *dump_headers(const struct gw_config_key *key, const void *base,
                           bool secrets)
{
    const struct gw_header *h = *(struct gw_header *const *)CFIELD(base, key);
    cJSON *obj = cJSON_CreateObject();

    for (size_t k = 0; obj != NULL && k < CCOUNTER(base, key); k++) {
        const char *v = h[k].value;
        if ((key->flags & GW_CF_SECRET) && !secrets && *v != '\0') {
            v = "********";
        }
        if (cJSON_AddStringToObject(obj, h[k].name, v) == NULL) {
            cJSON_Delete(obj);
            obj = NULL;
        }
    }
    return obj;
}

static cJSON *dump_value(const struct gw_config_key *key, const void *base,
                         bool secrets)
{
    const void *field = CFIELD(base, key);
    const char *s;
    cJSON *list;

    switch (key->type) {
    case GW_CF_STRING:
        s = *(char *const *)field;
        if ((key->flags & GW_CF_SECRET) && !secrets && *s != '\0') {
            s = "********";
        }
        return cJSON_CreateString(s);
    case GW_CF_INT:
        return cJSON_CreateNumber(*(const int *)field);
    case GW_CF_BOOL:
        return cJSON_CreateBool(*(const bool *)field);
    case GW_CF_ENUM:
        s = gw_config_schema_name(key->names, *(const int *)field);
        return cJSON_CreateString(s != NULL ? s : "unknown");
    case GW_CF_OBJECT:
        return gw_config_schema_dump(key->sub, field, secrets);
    case GW_CF_HEADERS:
        return dump_headers(key, base, secrets);
    case GW_CF_ARRAY:
    case GW_CF_STRINGS:
        break;
    }
    list = cJSON_CreateArray();
    for (size_t k = 0; list != NULL && k < CCOUNTER(base, key); k++) {
        cJSON *item;
        if (key->type == GW_CF_ARRAY) {
            item = gw_config_schema_dump(
                key->sub, *(char *const *)field + k * key->sub->size, secrets);
        } else {
            item = cJSON_CreateString((*(char **const *)field)[k]);
        }
        if (item == NULL || !cJSON_AddItemToArray(list, item)) {
            cJSON_Delete(item);
            cJSON_Delete(list);
            list = NULL;
        }
    }
    return list;
}

cJSON *gw_config_schema_dump(const struct gw_config_table *table,
                             const void *base, bool secrets)
{
    cJSON *obj = cJSON_CreateObject();

    for (size_t i = 0; obj != NULL && i < table->n_keys; i++) {
        cJSON *value = dump_value(&table->keys[i], base, secrets);
        if (value == NULL ||
            !cJSON_AddItemToObject(obj, table->keys[i].name, value)) {
            cJSON_Delete(value);
            cJSON_Delete(obj);
            obj = NULL;
        }
    }
    return obj;
}
