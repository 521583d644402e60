/*
 * The OTA endpoint's pure parts: the firmware's request (accepted and
 * refused), the ota config keys, and the answer, whose password must
 * verify as the broker plugin verifies it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "codec/client_id.h"
#include "codec/ota_request.h"
#include "config/config.h"
#include "crypto/credential.h"
#include "gateway/api/ota.h"

#define MAC  "a0:85:e3:f4:49:34"
#define UUID "0f8e1b2c-3d4e-4f50-8a6b-7c8d9e0f1a2b"

/* The system information 2.4.2 sends, as it builds it (abridged
 * partition table). */
static const char body[] =
    "{\"version\":2,\"language\":\"zh-CN\",\"flash_size\":16777216,"
    "\"minimum_free_heap_size\":\"7265024\",\"mac_address\":\"" MAC "\","
    "\"uuid\":\"" UUID "\",\"chip_model_name\":\"esp32s3\","
    "\"chip_info\":{\"model\":9,\"cores\":2,\"revision\":2,\"features\":18},"
    "\"application\":{\"name\":\"xiaozhi\",\"version\":\"2.4.2\","
    "\"compile_time\":\"Aug  8 2026T08:33:45Z\",\"idf_version\":\"v5.5\","
    "\"elf_sha256\":\"00112233445566778899aabbccddeeff00112233445566778899aabb"
    "ccddeeff\"},\"partition_table\": [{\"label\":\"nvs\",\"type\":1,"
    "\"subtype\":2,\"address\":36864,\"size\":16384},{\"label\":\"ota_0\","
    "\"type\":0,\"subtype\":16,\"address\":131072,\"size\":4128768}],"
    "\"ota\":{\"label\":\"ota_0\"},\"display\":{\"monochrome\":false,"
    "\"width\":240,\"height\":240},\"board\":{\"type\":\"bread-compact-wifi\","
    "\"name\":\"bread-compact-wifi\",\"manufacturer\":\"\",\"ssid\":\"lab\","
    "\"rssi\":-51,\"channel\":6,\"ip\":\"192.168.1.20\",\"mac\":\"" MAC "\"}}";

static const struct gw_ota_headers firmware_headers = {
    .device_id = MAC,
    .client_id = UUID,
    .user_agent = "bread-compact-wifi/2.4.2",
};

/* ---- the request ------------------------------------------------------- */

static void test_firmware_request(void **state)
{
    struct gw_ota_request r;
    const char *why = "unset";

    (void)state;
    assert_int_equal(
        gw_ota_request_parse(&firmware_headers, body, strlen(body), &r, &why),
        0);
    assert_null(why);
    assert_string_equal(r.mac, MAC);
    assert_string_equal(r.mac_part, "a0_85_e3_f4_49_34");
    assert_string_equal(r.uuid, UUID);
    assert_string_equal(r.board, "bread-compact-wifi");
    assert_string_equal(r.version, "2.4.2");
    assert_null(r.body_ignored);
}

/* The headers name the device; the body only adds to them. */
static void test_fallbacks(void **state)
{
    struct gw_ota_headers h = {"A0:85:E3:F4:49:34", UUID, "my board!/1.9.0"};
    struct gw_ota_request r;
    const char *why, *body_of_types;

    (void)state;
    assert_int_equal(gw_ota_request_parse(&h, "{}", 2, &r, &why), 0);
    assert_string_equal(r.mac, MAC); /* lowercased */
    assert_string_equal(r.board, "my_board_");
    assert_string_equal(r.version, "1.9.0");
    /* a version the firmware's comparison could choke on is dropped */
    h.user_agent = "b/2.4.2-dirty";
    assert_int_equal(gw_ota_request_parse(&h, "{}", 2, &r, &why), 0);
    assert_string_equal(r.version, "");
    h.user_agent = NULL;
    body_of_types = "{\"board\":{\"type\":7},\"uuid\":null}";
    assert_int_equal(gw_ota_request_parse(&h, body_of_types,
                                          strlen(body_of_types), &r, &why),
                     0);
    assert_string_equal(r.board, "");
    assert_string_equal(r.version, "");
}

/*
 * A body that does not parse is ignored, not refused: the firmware pastes
 * the Wi-Fi name into its JSON unescaped, so a '"' or a GBK-encoded name
 * breaks it. The headers still provision the device.
 */
static void test_unreadable_body(void **state)
{
    static const struct {
        const char *body, *why;
    } cases[] = {
        {"", "a JSON object"},
        {"[1]", "a JSON object"},
        {"{\"a\":1", "a JSON object"},
        {"{\"board\":{\"ssid\":\"my \"lab\"\",\"type\":\"x\"}}",
         "a JSON object"},
        {"{\"board\":{\"ssid\":\"\xb9\xab\xcb\xbe\"}}", "not UTF-8"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gw_ota_request r;
        const char *why = "unset";

        assert_int_equal(gw_ota_request_parse(&firmware_headers, cases[i].body,
                                              strlen(cases[i].body), &r, &why),
                         0);
        assert_null(why);
        assert_string_equal(r.mac, MAC);
        assert_string_equal(r.uuid, UUID);
        /* described by the User-Agent alone */
        assert_string_equal(r.board, "bread-compact-wifi");
        assert_string_equal(r.version, "2.4.2");
        assert_non_null(r.body_ignored);
        assert_non_null(strstr(r.body_ignored, cases[i].why));
    }
}

static void test_refused(void **state)
{
    static const struct {
        const char *device_id, *client_id, *body;
        int rc;
        const char *why;
    } cases[] = {
        {NULL, UUID, "{}", GW_EPROTO, "Device-Id header missing"},
        {"a0:85:e3:f4:49", UUID, "{}", GW_EPROTO, "Device-Id is not a MAC"},
        {"a0-85-e3-f4-49-34", UUID, "{}", GW_EPROTO, "Device-Id is not a MAC"},
        {"g0:85:e3:f4:49:34", UUID, "{}", GW_EPROTO, "Device-Id is not a MAC"},
        {MAC, NULL, "{}", GW_EPROTO, "Client-Id header missing"},
        {MAC, "", "{}", GW_EPROTO, "Client-Id must be"},
        {MAC, "a/b", "{}", GW_EPROTO, "Client-Id must be"},
        {MAC, "x@@@y", "{}", GW_EPROTO, "Client-Id must be"},
        {MAC, "+", "{}", GW_EPROTO, "Client-Id must be"},
        {MAC,
         "0123456789012345678901234567890123456789012345678901234567890123"
         "4",
         "{}", GW_EPROTO, "Client-Id must be"},
        {MAC, UUID, "{\"mac_address\":\"a0:85:e3:f4:49:35\"}", GW_EPROTO,
         "mac_address is not the Device-Id"},
        {MAC, UUID, "{\"mac_address\":\"nope\"}", GW_EPROTO,
         "mac_address is not the Device-Id"},
        {MAC, UUID, "{\"uuid\":\"other\"}", GW_EPROTO,
         "uuid is not the Client-Id"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gw_ota_headers h = {cases[i].device_id, cases[i].client_id,
                                   NULL};
        struct gw_ota_request r;
        const char *why = NULL;
        int rc = gw_ota_request_parse(&h, cases[i].body, strlen(cases[i].body),
                                      &r, &why);
        if (rc != cases[i].rc || why == NULL ||
            strstr(why, cases[i].why) == NULL) {
            print_error("case %zu: rc %d why %s\n", i, rc,
                        why != NULL ? why : "(null)");
        }
        assert_int_equal(rc, cases[i].rc);
        assert_non_null(strstr(why, cases[i].why));
        assert_string_equal(r.mac, ""); /* zeroed */
    }
}

static void test_limits(void **state)
{
    size_t n = GW_OTA_BODY_MAX + 1;
    char *big = malloc(n);
    struct gw_ota_request r;
    const char *why;

    (void)state;
    assert_non_null(big);
    memset(big, ' ', n);
    big[0] = '{';
    big[GW_OTA_BODY_MAX - 1] = '}';
    assert_int_equal(
        gw_ota_request_parse(&firmware_headers, big, GW_OTA_BODY_MAX, &r, &why),
        0);
    assert_int_equal(gw_ota_request_parse(&firmware_headers, big, n, &r, &why),
                     GW_ETOOBIG);
    free(big);
    assert_int_equal(gw_ota_request_parse(NULL, "{}", 2, &r, &why), GW_EINVAL);
    assert_int_equal(gw_ota_request_parse(&firmware_headers, NULL, 2, &r, &why),
                     GW_EINVAL);
    assert_int_equal(
        gw_ota_request_parse(&firmware_headers, "{}", 2, NULL, &why),
        GW_EINVAL);
}

static void test_versions(void **state)
{
    static const char *const good[] = {"2.4.2", "1", "0.0.1", "123456789.0"};
    static const char *const bad[] = {
        "",       ".",
        "1.",     ".1",
        "1..2",   "v1",
        "1.2-rc", "1234567890",
        "1 .2",   "1.2.3.4.5.6.7.8.9.10.11.12.13.14.15.16"};

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        assert_true(gw_ota_version_valid(good[i]));
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_false(gw_ota_version_valid(bad[i]));
    }
    assert_false(gw_ota_version_valid(NULL));
}

/* ---- the config -------------------------------------------------------- */

#define BACKEND                                                                \
    "\"backends\":[{\"name\":\"main\",\"url\":\"ws://h:1/"                     \
    "x?from=mqtt_gateway\"}]"
#define ON "\"enabled\":true,\"device_key\":\"k3y-Of-Devices\""

static struct gw_config *load(const char *ota, char *err, size_t cap)
{
    char text[1024];
    struct gw_config *cfg = NULL;

    /* udp on loopback, which no OTA warning is about */
    snprintf(text, sizeof(text),
             "{" BACKEND ",\"udp\":{\"bind\":\"127.0.0.1\"},\"ota\":{%s}}",
             ota);
    err[0] = '\0';
    if (gw_config_load_string(text, strlen(text), "x.json", &cfg, err, cap) !=
        0) {
        return NULL;
    }
    return cfg;
}

static void test_config(void **state)
{
    static const struct {
        const char *ota, *want;
    } bad[] = {
        {"\"enabled\":true,\"device_key\":\"k\"",
         "ota.mqtt_endpoint: must be set when ota.enabled is true"},
        {"\"enabled\":true,\"mqtt_endpoint\":\"h:1883\"",
         "ota.device_key: must be set when ota.enabled is true"},
        {"\"mqtt_endpoint\":\"mqtt://h\"", "ota.mqtt_endpoint: must be host"},
        {"\"mqtt_endpoint\":\"h:\"", "ota.mqtt_endpoint: must be host"},
        {"\"mqtt_endpoint\":\"h:70000\"", "ota.mqtt_endpoint: port must be"},
        {"\"mqtt_endpoint\":\"::1\"", "ota.mqtt_endpoint: must be host"},
        {"\"group\":\"a/b\"", "ota.group: must not contain"},
        {"\"group\":\"a@@@b\"", "ota.group: must not contain '@@@'"},
        {"\"group\":\"GID@@\"", "ota.group: must not contain '@'"},
        {"\"group\":\"\"", "ota.group: must not be empty"},
        {"\"publish_topic\":\"\"", "ota.publish_topic: must not be empty"},
        {"\"publish_topic\":\"a/+\"", "ota.publish_topic: must not contain"},
        {"\"keepalive_s\":5", "ota.keepalive_s"},
        {"\"timezone_offset_min\":900", "ota.timezone_offset_min"},
        {"\"firmware\":{\"version\":\"2.x\"}",
         "ota.firmware.version: must be dot-separated numbers"},
        {"\"firmware\":{\"url\":\"ftp://x\"}",
         "ota.firmware.url: scheme must be http:// or https://"},
        {"\"firmware\":{\"version\":\"2.5.0\"}",
         "ota.firmware.url: must be set with ota.firmware.version"},
        {"\"firmware\":{\"url\":\"http://h/f.bin\"}",
         "ota.firmware.version: must be set with ota.firmware.url"},
        {"\"firmware\":{\"force\":true}", "ota.firmware.force: needs"},
        {"\"enable\":true", "ota.enable: unknown key (did you mean 'enabled'"},
    };
    char err[2048];
    struct gw_config *cfg;
    char *dump = NULL;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cfg = load(bad[i].ota, err, sizeof(err));
        if (cfg != NULL || strstr(err, bad[i].want) == NULL) {
            print_error("case %zu: want \"%s\", got:\n%s", i, bad[i].want, err);
        }
        assert_null(cfg);
        assert_non_null(strstr(err, bad[i].want));
    }
    /* off by default, with the defaults the docs name */
    cfg = load("", err, sizeof(err));
    assert_non_null(cfg);
    assert_false(cfg->ota.enabled);
    assert_string_equal(cfg->ota.group, "GID_default");
    assert_string_equal(cfg->ota.publish_topic, "device-server");
    assert_int_equal(cfg->ota.keepalive_s, 240);
    gw_config_destroy(cfg);
    /* the key is a secret: masked in a dump */
    cfg = load(ON ",\"mqtt_endpoint\":\"h:1883\"", err, sizeof(err));
    assert_non_null(cfg);
    assert_int_equal(gw_config_dump(cfg, false, &dump), 0);
    assert_null(strstr(dump, "k3y-Of-Devices"));
    assert_non_null(strstr(dump, "h:1883"));
    free(dump);
    gw_config_destroy(cfg);
}

/* Likely mistakes load, with a warning naming the key. */
static void collect(const char *path, const char *text, void *arg)
{
    char *all = arg;

    snprintf(all + strlen(all), 1024 - strlen(all), "%s: %s\n", path, text);
}

static void test_warnings(void **state)
{
    char err[2048], all[1024] = "";
    struct gw_config *cfg;

    (void)state;
    /* the defaults: http on loopback, and a loopback broker */
    cfg = load(ON ",\"mqtt_endpoint\":\"localhost:1883\"", err, sizeof(err));
    assert_non_null(cfg);
    assert_int_equal(gw_config_warnings(cfg, collect, all), 2);
    assert_non_null(strstr(all, "ota.enabled: http.listen is a loopback"));
    assert_non_null(strstr(all, "ota.mqtt_endpoint: a loopback address"));
    gw_config_destroy(cfg);
    /* reachable: none */
    cfg = load(ON ",\"mqtt_endpoint\":\"mq.example:1883\"}, \"http\":{"
                  "\"listen\":\"0.0.0.0\"",
               err, sizeof(err));
    assert_non_null(cfg);
    assert_int_equal(gw_config_warnings(cfg, NULL, NULL), 0);
    gw_config_destroy(cfg);
    /* no HTTP API at all */
    all[0] = '\0';
    cfg = load(ON ",\"mqtt_endpoint\":\"10.0.0.2\"}, \"http\":{\"port\":0", err,
               sizeof(err));
    assert_non_null(cfg);
    assert_int_equal(gw_config_warnings(cfg, collect, all), 1);
    assert_non_null(strstr(all, "ota.enabled: the HTTP API is off"));
    gw_config_destroy(cfg);
    /* off: nothing to say */
    cfg = load("\"mqtt_endpoint\":\"127.0.0.1\"", err, sizeof(err));
    assert_non_null(cfg);
    assert_int_equal(gw_config_warnings(cfg, NULL, NULL), 0);
    gw_config_destroy(cfg);
}

/* ---- the answer -------------------------------------------------------- */

static cJSON *answer(const char *ota, const struct gw_ota_request *r,
                     const char *peer, char *id)
{
    char err[2048], *text = NULL;
    struct gw_config *cfg = load(ota, err, sizeof(err));
    cJSON *doc;

    if (cfg == NULL) {
        print_error("%s", err);
    }
    assert_non_null(cfg);
    assert_int_equal(gw_ota_answer(cfg, r, peer, 1767225600123LL, &text, id),
                     0);
    gw_config_destroy(cfg);
    doc = cJSON_Parse(text);
    free(text);
    assert_non_null(doc);
    return doc;
}

static const char *str(const cJSON *o, const char *path1, const char *name)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(o, path1), name);

    assert_true(cJSON_IsString(item));
    return item->valuestring;
}

static double num(const cJSON *o, const char *path1, const char *name)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(o, path1), name);

    assert_true(cJSON_IsNumber(item));
    return item->valuedouble;
}

static void test_answer(void **state)
{
    struct gw_ota_request r;
    const char *why, *user, *pass;
    char id[GW_CLIENT_ID_MAX + 1];
    unsigned char decoded[128];
    cJSON *doc;
    int n;

    (void)state;
    assert_int_equal(
        gw_ota_request_parse(&firmware_headers, body, strlen(body), &r, &why),
        0);
    doc = answer(ON ",\"mqtt_endpoint\":\"mq.example:1883\"", &r,
                 "192.168.1.20", id);
    assert_string_equal(id, "GID_default@@@a0_85_e3_f4_49_34@@@" UUID);
    assert_string_equal(str(doc, "mqtt", "endpoint"), "mq.example:1883");
    assert_string_equal(str(doc, "mqtt", "client_id"), id);
    assert_string_equal(str(doc, "mqtt", "publish_topic"), "device-server");
    assert_string_equal(str(doc, "mqtt", "subscribe_topic"),
                        "devices/GID_default@@@a0_85_e3_f4_49_34@@@" UUID
                        "/down");
    assert_int_equal((int)num(doc, "mqtt", "keepalive"), 240);
    user = str(doc, "mqtt", "username");
    n = EVP_DecodeBlock(decoded, (const unsigned char *)user,
                        (int)strlen(user));
    assert_int_equal(n, 21);
    assert_memory_equal(decoded, "{\"ip\":\"192.168.1.20\"}", 21);
    /* what the broker plugin checks, with the same key */
    pass = str(doc, "mqtt", "password");
    assert_int_equal(
        gw_credential_password_verify("k3y-Of-Devices", 14, id, strlen(id),
                                      user, strlen(user), pass, strlen(pass)),
        0);
    assert_int_equal(
        gw_credential_password_verify("another-key", 11, id, strlen(id), user,
                                      strlen(user), pass, strlen(pass)),
        GW_EAUTH);
    assert_true(num(doc, "server_time", "timestamp") == 1767225600123.0);
    assert_int_equal((int)num(doc, "server_time", "timezone_offset"), 0);
    /* no firmware configured: its own version, no url, so no upgrade */
    assert_string_equal(str(doc, "firmware", "version"), "2.4.2");
    assert_string_equal(str(doc, "firmware", "url"), "");
    assert_null(
        cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "firmware"), "force"));
    cJSON_Delete(doc);
}

static void test_answer_options(void **state)
{
    struct gw_ota_request r;
    char id[GW_CLIENT_ID_MAX + 1];
    const char *why;
    struct gw_client_id parsed;
    cJSON *doc;

    (void)state;
    assert_int_equal(
        gw_ota_request_parse(&firmware_headers, body, strlen(body), &r, &why),
        0);
    doc = answer(ON ",\"mqtt_endpoint\":\"h\",\"group\":\"GID_{board}\","
                    "\"publish_topic\":\"up\",\"keepalive_s\":90,"
                    "\"timezone_offset_min\":480,\"firmware\":{\"version\":"
                    "\"2.5.0\",\"url\":\"https://fw.example/x.bin\","
                    "\"force\":true}",
                 &r, "::ffff:10.0.0.7", id);
    assert_string_equal(id,
                        "GID_bread-compact-wifi@@@a0_85_e3_f4_49_34@@@" UUID);
    assert_string_equal(str(doc, "mqtt", "publish_topic"), "up");
    assert_int_equal((int)num(doc, "mqtt", "keepalive"), 90);
    assert_int_equal((int)num(doc, "server_time", "timezone_offset"), 480);
    assert_string_equal(str(doc, "firmware", "version"), "2.5.0");
    assert_string_equal(str(doc, "firmware", "url"),
                        "https://fw.example/x.bin");
    assert_int_equal((int)num(doc, "firmware", "force"), 1);
    /* the IPv4 address without its mapped-IPv6 prefix */
    assert_string_equal(str(doc, "mqtt", "username"),
                        "eyJpcCI6IjEwLjAuMC43In0=");
    cJSON_Delete(doc);

    /* a long board is cut so that the id stays a valid client id */
    strcpy(r.board, "b123456789012345678901234567890123456789012345");
    strcpy(r.uuid, "u12345678901234567890123456789012345678901234567890123"
                   "4567890");
    r.version[0] = '\0';
    doc = answer(ON ",\"mqtt_endpoint\":\"h\",\"group\":\"{board}_"
                    "0123456789abcdefghijklm\"",
                 &r, "10.0.0.7", id);
    assert_int_equal(strlen(id), GW_CLIENT_ID_MAX);
    assert_int_equal(gw_client_id_parse(id, strlen(id), &parsed), 0);
    /* no version known and none configured: no firmware section */
    assert_null(cJSON_GetObjectItem(doc, "firmware"));
    cJSON_Delete(doc);
}

/* "{board}" cannot make the gateways' reserved group, nor outgrow 32
 * characters of board. */
static void test_client_id_group(void **state)
{
    char id[GW_CLIENT_ID_MAX + 1];

    (void)state;
    assert_int_equal(
        gw_ota_client_id("{board}", MAC, UUID, "hybridgw-gw-1", id), GW_EPROTO);
    assert_int_equal(gw_ota_client_id("{board}", MAC, UUID, "HybridGW", id),
                     GW_EPROTO);
    assert_int_equal(gw_ota_client_id("GID_{board}", MAC, UUID, "hybridgw", id),
                     0);
    assert_string_equal(id, "GID_hybridgw@@@a0_85_e3_f4_49_34@@@" UUID);
    assert_int_equal(gw_ota_client_id("GID_{board}", MAC, UUID,
                                      "b1234567890123456789012345678901234567",
                                      id),
                     0);
    assert_string_equal(id, "GID_b1234567890123456789012345678901@@@"
                            "a0_85_e3_f4_49_34@@@" UUID);
    assert_int_equal(gw_ota_client_id("GID_{board}", MAC, UUID, "", id), 0);
    assert_string_equal(id, "GID_unknown@@@a0_85_e3_f4_49_34@@@" UUID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_firmware_request),
        cmocka_unit_test(test_fallbacks),
        cmocka_unit_test(test_unreadable_body),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_warnings),
        cmocka_unit_test(test_answer),
        cmocka_unit_test(test_answer_options),
        cmocka_unit_test(test_client_id_group),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
