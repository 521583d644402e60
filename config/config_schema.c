/*
 * Every config key, declared once (docs/architecture.md section 5): its
 * type, member, default, range, reload policy and validator
 * (config_checks.c), and the enum spellings. config_walk.c walks them.
 */
#include "config/config_schema.h"

#include <stddef.h>

#include "config/config_int.h"

/* Enums are stored and read through int *. */
_Static_assert(sizeof(enum gw_framing) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gw_auth_scheme) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gw_route_strategy) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gw_log_level) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gw_log_format) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gw_ota_activation) == sizeof(int), "enum size");
_Static_assert(sizeof(enum gw_bindings_store) == sizeof(int), "enum size");

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
    KEY_STR("host", MQ(host), GW_CF_RESTART, "127.0.0.1",
            gw__config_check_nonempty),
    KEY_INT("port", MQ(port), GW_CF_RESTART, 1883, 1, 65535),
    KEY_STR("client_id", MQ(client_id), GW_CF_RESTART, "", NULL),
    KEY_STR("username", MQ(username), GW_CF_RESTART, "", NULL),
    KEY_STR("password", MQ(password), GW_CF_RESTART | GW_CF_SECRET, "", NULL),
    KEY_INT("keepalive", MQ(keepalive_s), GW_CF_RESTART, 60, 5, 65535),
    /* At most the broker's max_packet_size: what instances send each
     * other, records and revocations stay within it (a device's downlink
     * is bounded by limits.max_downlink_bytes instead). */
    KEY_INT("max_packet_bytes", MQ(max_packet_bytes), GW_CF_RESTART, 66560,
            16384, 268435455),
    KEY_OBJ("tls", MQ(tls), &tls_table),
    KEY_STR("up_topic", MQ(up_topic), GW_CF_RESTART, "devices/+/up",
            gw__config_check_level_topic),
    KEY_STR("down_topic", MQ(down_topic), GW_CF_RESTART,
            "devices/{client_id}/down", gw__config_check_down_topic),
    KEY_STR("presence_topic", MQ(presence_topic), GW_CF_RESTART,
            "devices/+/presence", gw__config_check_level_topic),
    KEY_STR("status_topic", MQ(status_topic), GW_CF_RESTART, "",
            gw__config_check_status_topic),
    /* How long after the link is back a device kept from before may go
     * unconfirmed by the broker before it counts as offline. */
    KEY_INT("presence_grace_ms", MQ(presence_grace_ms), GW_CF_RELOAD, 15000,
            1000, 600000),
};
static const struct gw_config_table mqtt_table = TABLE("mqtt", mqtt_keys, 0);

/* The socket is bound once; what devices are told may change. */
#define UDP(m) AT(struct gw_config, udp, m)
static const struct gw_config_key udp_keys[] = {
    KEY_STR("bind", UDP(bind), GW_CF_RESTART, "0.0.0.0",
            gw__config_check_nonempty),
    KEY_INT("port", UDP(port), GW_CF_RESTART, 8884, 0, 65535), /* 0: any */
    KEY_STR("public_host", UDP(public_host), GW_CF_RELOAD, "127.0.0.1",
            gw__config_check_nonempty),
    /* 0 stands for "same as port" and is replaced after loading */
    KEY_INT("public_port", UDP(public_port), GW_CF_RELOAD, 0, 0, 65535),
    /* Seconds after the server hello without valid audio before the
     * gateway says why (gateway/audio/udp_doctor.c); 0 turns it off. */
    KEY_INT("doctor_after_s", UDP(doctor_after_s), GW_CF_RELOAD, 5, 0, 600),
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
    KEY_STR("name", BE(name), GW_CF_REQUIRED, NULL, gw__config_check_name),
    KEY_STR("url", BE(url), GW_CF_REQUIRED, NULL, gw__config_check_url),
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
     .check = gw__config_check_opus_rate},
    /* clang-format on */
};
static const struct gw_config_table backend_table =
    TABLE("backend", backend_keys, sizeof(struct gw_backend_config));

/* "match" is a JSON object whose members live directly in the route. */
#define RT(m) offsetof(struct gw_route_config, m)
static const struct gw_config_key match_keys[] = {
    KEY_STRS("groups", RT(groups), RT(n_groups), GW_CF_RELOAD, 0, 4096,
             gw__config_check_group),
    KEY_STRS("macs", RT(macs), RT(n_macs), GW_CF_RELOAD, 0, 4096,
             gw__config_check_mac),
    KEY_STRS("client_ids", RT(client_ids), RT(n_client_ids), GW_CF_RELOAD, 0,
             4096, gw__config_check_client_id),
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
    KEY_STR("listen", HTTP(listen), GW_CF_RESTART, "127.0.0.1",
            gw__config_check_nonempty),
    KEY_INT("port", HTTP(port), GW_CF_RESTART, 8007, 0, 65535),
    KEY_STR("token", HTTP(token), GW_CF_RELOAD | GW_CF_SECRET, "", NULL),
    /* The manager-api's daily token is sha256(date + this key); "" turns
     * its routes off. */
    KEY_STR("manager_key", HTTP(manager_key), GW_CF_RELOAD | GW_CF_SECRET, "",
            gw__config_check_manager_key),
    KEY_STRS("allowed_origins", HTTP(allowed_origins), HTTP(n_allowed_origins),
             GW_CF_RELOAD, 0, 64, gw__config_check_origin),
    KEY_INT("max_body_bytes", HTTP(max_body_bytes), GW_CF_RESTART, 262144, 1024,
            16777216),
    /* DNS rebinding: a browser's Host names the attacker's domain. */
    KEY_STRS("allowed_hosts", HTTP(allowed_hosts), HTTP(n_allowed_hosts),
             GW_CF_RELOAD, 0, 64, gw__config_check_host),
    KEY_INT("max_connections", HTTP(max_connections), GW_CF_RESTART, 256, 1,
            100000),
    KEY_INT("max_connections_per_address", HTTP(max_connections_per_address),
            GW_CF_RESTART, 32, 1, 100000),
    /* Where the image installs web/; read per request, so reloadable. */
    KEY_STR("ui_dir", HTTP(ui_dir), GW_CF_RELOAD,
            "/usr/local/share/hybridgw/web", gw__config_check_ui_dir),
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
    KEY_STR("url", VIS(url), GW_CF_RELOAD, "",
            gw__config_check_optional_http_url),
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
    /* A discovery that got no answer; the cap fits the retry wheel
     * (gateway/device/mcp_discovery.h). */
    KEY_INT("discover_retries", MCP(discover_retries), GW_CF_RELOAD, 5, 0, 100),
    KEY_INT("discover_retry_ms", MCP(discover_retry_ms), GW_CF_RELOAD, 2000,
            100, 100000),
    KEY_INT("discover_retry_max_ms", MCP(discover_retry_max_ms), GW_CF_RELOAD,
            60000, 100, 100000),
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
            gw__config_check_header_value),
};
static const struct gw_config_table mcp_server_auth_table =
    TABLE("mcp server auth", mcp_server_auth_keys, 0);

/* Matched like a route's match: empty lists allow every device. */
#define MSL(m) AT(struct gw_mcp_server_config, allow, m)
static const struct gw_config_key mcp_server_allow_keys[] = {
    KEY_STRS("groups", MSL(groups), MSL(n_groups), GW_CF_RELOAD, 0, 4096,
             gw__config_check_group),
    KEY_STRS("macs", MSL(macs), MSL(n_macs), GW_CF_RELOAD, 0, 4096,
             gw__config_check_mac),
    KEY_STRS("client_ids", MSL(client_ids), MSL(n_client_ids), GW_CF_RELOAD, 0,
             4096, gw__config_check_client_id),
};
static const struct gw_config_table mcp_server_allow_table =
    TABLE("mcp server allow", mcp_server_allow_keys, 0);

#define MS(m) offsetof(struct gw_mcp_server_config, m)
static const struct gw_config_key mcp_server_keys[] = {
    KEY_STR("name", MS(name), GW_CF_REQUIRED, NULL, gw__config_check_name),
    KEY_STR("url", MS(url), GW_CF_REQUIRED, NULL,
            gw__config_check_mcp_server_url),
    KEY_OBJ("auth", MS(auth), &mcp_server_auth_table),
    KEY_STR("ca_file", MS(ca_file), GW_CF_RELOAD, "", NULL),
    KEY_INT("timeout_ms", MS(timeout_ms), GW_CF_RELOAD, 30000, 100, 600000),
    /* Every POST and DELETE to it is a connection of the gateway's. */
    KEY_INT("max_connections", MS(max_connections), GW_CF_RELOAD, 32, 1, 4096),
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
    /* Firmware 2.4 reassembles a message of any size and a server may put
     * 64 KiB of glyph bitmaps into one tts or stt: backend frames and pushed
     * messages up to this reach the device; the broker's max_packet_size
     * must take it (docs/deploy.md). */
    KEY_INT("max_downlink_bytes", LIM(max_downlink_bytes), GW_CF_RELOAD, 131072,
            8192, 16777216),
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
    KEY_STR("version", FW(version), GW_CF_RELOAD, "",
            gw__config_check_fw_version),
    KEY_STR("url", FW(url), GW_CF_RELOAD, "", gw__config_check_fw_url),
    KEY_BOOL("force", FW(force), GW_CF_RELOAD, 0),
};
static const struct gw_config_table ota_firmware_table =
    TABLE("ota.firmware", ota_firmware_keys, 0);

static const struct gw_config_name activations[] = {
    {"on", GW_OTA_ACTIVATION_ON},
    {"off", GW_OTA_ACTIVATION_OFF},
    {NULL, 0},
};

#define OTA(m) AT(struct gw_config, ota, m)
static const struct gw_config_key ota_keys[] = {
    KEY_BOOL("enabled", OTA(enabled), GW_CF_RELOAD, 0),
    KEY_STR("mqtt_endpoint", OTA(mqtt_endpoint), GW_CF_RELOAD, "",
            gw__config_check_ota_endpoint),
    KEY_STR("device_key", OTA(device_key), GW_CF_RELOAD | GW_CF_SECRET, "",
            NULL),
    KEY_STR("group", OTA(group), GW_CF_RELOAD, "GID_default",
            gw__config_check_ota_group),
    KEY_STR("publish_topic", OTA(publish_topic), GW_CF_RELOAD, "device-server",
            gw__config_check_publish_topic),
    KEY_INT("keepalive_s", OTA(keepalive_s), GW_CF_RELOAD, 240, 10, 65535),
    KEY_INT("timezone_offset_min", OTA(timezone_offset_min), GW_CF_RELOAD, 0,
            -720, 840),
    KEY_OBJ("firmware", OTA(firmware), &ota_firmware_table),
    /* Only a bound device gets credentials; "off" is the lab's open door. */
    KEY_ENUM("activation", OTA(activation), GW_CF_RELOAD, GW_OTA_ACTIVATION_ON,
             activations),
    KEY_INT("activation_ttl_s", OTA(activation_ttl_s), GW_CF_RELOAD, 600, 60,
            86400),
    KEY_STR("activation_message", OTA(activation_message), GW_CF_RELOAD,
            "Give this code to your operator", NULL),
    /* Device key = HMAC-SHA256(serial_key, serial number); "": no device
     * binds itself. */
    KEY_STR("serial_key", OTA(serial_key), GW_CF_RELOAD | GW_CF_SECRET, "",
            gw__config_check_serial_key),
    /* The broker plugin's plugin_opt_revoke_topic. */
    KEY_STR("revoke_topic", OTA(revoke_topic), GW_CF_RELOAD,
            "hybridgw/broker/revoke", gw__config_check_revoke_topic),
};
static const struct gw_config_table ota_table = TABLE("ota", ota_keys, 0);

static const struct gw_config_name binding_stores[] = {
    {"sqlite", GW_BINDINGS_SQLITE},
    {"postgresql", GW_BINDINGS_POSTGRESQL},
    {NULL, 0},
};

/* gateway/binding/: the store is opened once, at start. */
#define BND(m) AT(struct gw_config, bindings, m)
static const struct gw_config_key bindings_keys[] = {
    KEY_ENUM("store", BND(store), GW_CF_RESTART, GW_BINDINGS_SQLITE,
             binding_stores),
    KEY_STR("path", BND(path), GW_CF_RESTART, "/var/lib/hybridgw/bindings.db",
            gw__config_check_nonempty),
    KEY_STR("conninfo", BND(conninfo), GW_CF_RESTART | GW_CF_SECRET, "", NULL),
};
static const struct gw_config_table bindings_table =
    TABLE("bindings", bindings_keys, 0);

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
    KEY_STR("instance", CL(instance), GW_CF_RESTART, "",
            gw__config_check_cluster_name),
    KEY_ENUM("mode", CL(mode), GW_CF_RESTART, GW_CLUSTER_MODE_OFF,
             cluster_modes),
    KEY_STR("topic_prefix", CL(topic_prefix), GW_CF_RESTART,
            "hybridgw/instances", gw__config_check_cluster_prefix),
    KEY_STR("share_group", CL(share_group), GW_CF_RESTART, "hybridgw",
            gw__config_check_name),
    KEY_INT("drain_deadline_s", CL(drain_deadline_s), GW_CF_RELOAD, 300, 1,
            86400),
};
static const struct gw_config_table cluster_table =
    TABLE("cluster", cluster_keys, 0);

#define TOP(m) offsetof(struct gw_config, m)
static const struct gw_config_key top_keys[] = {
    KEY_STR("instance", TOP(instance), GW_CF_RESTART, "gw-1",
            gw__config_check_name),
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
    KEY_OBJ("bindings", TOP(bindings), &bindings_table),
    KEY_OBJ("log", TOP(log), &log_table),
    KEY_OBJ("cluster", TOP(cluster), &cluster_table),
};
const struct gw_config_table gw_config_schema =
    TABLE("config", top_keys, sizeof(struct gw_config));

/* ---- names ------------------------------------------------------------- */

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
