/*
 * The pure half of the simulated device's provisioning: reading a check's
 * answer as the firmware's Ota::CheckVersion does, the stored settings,
 * the bodies it sends and the endpoint it connects to.
 */
#include "tools/sim_ota.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "tools/sim_common.h"

/* NVS limits: Settings::SetString/SetInt abort the firmware beyond them
 * (ESP_ERROR_CHECK), so a gateway must never send more. */
#define NVS_KEY_MAX 15
#define NVS_STR_MAX 4000 /* bytes with the terminating NUL */

void gw_sim_ota_answer_free(struct gw_sim_ota_answer *a)
{
    free(a->code);
    free(a->challenge);
    free(a->message);
    free(a->fw_version);
    free(a->fw_url);
    free(a->fatal);
    memset(a, 0, sizeof(*a));
}

static int dup_string(const cJSON *item, char **out)
{
    if (!cJSON_IsString(item)) {
        return 0;
    }
    free(*out);
    *out = strdup(item->valuestring);
    return *out != NULL ? 1 : GW_ENOMEM;
}

/* One member of `mqtt` into the store, as Settings::SetString/SetInt. */
static int store_member(cJSON *store, const cJSON *item,
                        struct gw_sim_ota_answer *a)
{
    cJSON *v;

    if (!cJSON_IsString(item) && !cJSON_IsNumber(item)) {
        return 0; /* the firmware skips other types */
    }
    if (strlen(item->string) > NVS_KEY_MAX ||
        (cJSON_IsString(item) && strlen(item->valuestring) >= NVS_STR_MAX)) {
        a->fatal = strdup(item->string);
        return a->fatal != NULL ? GW_ETOOBIG : GW_ENOMEM;
    }
    v = cJSON_IsString(item) ? cJSON_CreateString(item->valuestring)
                             : cJSON_CreateNumber(item->valueint);
    if (v == NULL) {
        return GW_ENOMEM;
    }
    if (cJSON_GetObjectItemCaseSensitive(store, item->string) != NULL) {
        cJSON_ReplaceItemInObjectCaseSensitive(store, item->string, v);
    } else if (!cJSON_AddItemToObject(store, item->string, v)) {
        cJSON_Delete(v);
        return GW_ENOMEM;
    }
    a->mqtt_stored++;
    return 0;
}

static int parse_activation(const cJSON *act, struct gw_sim_ota_answer *a)
{
    const cJSON *t;
    int rc;

    if (!cJSON_IsObject(act)) {
        return 0;
    }
    if ((rc = dup_string(cJSON_GetObjectItem(act, "message"), &a->message)) <
            0 ||
        (rc = dup_string(cJSON_GetObjectItem(act, "code"), &a->code)) < 0) {
        return rc;
    }
    a->has_code = rc == 1;
    rc = dup_string(cJSON_GetObjectItem(act, "challenge"), &a->challenge);
    if (rc < 0) {
        return rc;
    }
    a->has_challenge = rc == 1;
    t = cJSON_GetObjectItem(act, "timeout_ms");
    if (cJSON_IsNumber(t)) {
        a->timeout_ms = t->valueint;
    }
    return 0;
}

static int parse_firmware(const cJSON *fw, struct gw_sim_ota_answer *a)
{
    const cJSON *force;
    int rc;

    if (!cJSON_IsObject(fw)) {
        return 0;
    }
    if ((rc = dup_string(cJSON_GetObjectItem(fw, "version"), &a->fw_version)) <
            0 ||
        (rc = dup_string(cJSON_GetObjectItem(fw, "url"), &a->fw_url)) < 0) {
        return rc;
    }
    force = cJSON_GetObjectItem(fw, "force");
    a->fw_force = cJSON_IsNumber(force) && force->valueint == 1;
    return 0;
}

int gw_sim_ota_answer_parse(const char *body, size_t len, cJSON *store,
                            struct gw_sim_ota_answer *a)
{
    cJSON *root, *mqtt, *item;
    int rc = 0;

    memset(a, 0, sizeof(*a));
    root = cJSON_ParseWithLength(body, len);
    if (root == NULL) {
        return GW_EMALFORMED;
    }
    /* Lookups on a non-object find nothing, as in the firmware. */
    if ((rc = parse_activation(cJSON_GetObjectItem(root, "activation"), a)) !=
        0) {
        goto out;
    }
    mqtt = cJSON_GetObjectItem(root, "mqtt");
    if (cJSON_IsObject(mqtt)) {
        a->has_mqtt = true;
        cJSON_ArrayForEach(item, mqtt)
        {
            if ((rc = store_member(store, item, a)) != 0) {
                goto out;
            }
        }
    }
    a->has_websocket = cJSON_IsObject(cJSON_GetObjectItem(root, "websocket"));
    rc = parse_firmware(cJSON_GetObjectItem(root, "firmware"), a);
out:
    cJSON_Delete(root);
    return rc;
}

int gw_sim_ota_mac(const char *in, char out[GW_SIM_MAC_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";

    if (in == NULL || strlen(in) != GW_SIM_MAC_LEN) {
        return GW_EINVAL;
    }
    for (size_t i = 0; i < GW_SIM_MAC_LEN; i++) {
        char c = in[i];
        if (i % 3 == 2) {
            if (c != ':') {
                return GW_EINVAL;
            }
            out[i] = c;
            continue;
        }
        if (c >= 'A' && c <= 'F') {
            c = (char)(c - 'A' + 'a');
        }
        if (strchr(hex, c) == NULL || c == '\0') {
            return GW_EINVAL;
        }
        out[i] = c;
    }
    out[GW_SIM_MAC_LEN] = '\0';
    return 0;
}

int gw_sim_ota_device_key(const char *secret, const char *serial,
                          uint8_t key[32])
{
    unsigned int n = 0;

    if (HMAC(EVP_sha256(), secret, (int)strlen(secret),
             (const unsigned char *)serial, strlen(serial), key, &n) == NULL ||
        n != 32) {
        return GW_ECRYPTO;
    }
    return 0;
}

char *gw_sim_ota_activate_body(const char *serial, const uint8_t key[32],
                               const char *challenge)
{
    uint8_t mac[32];
    unsigned int n = 0;
    char hex[65];
    cJSON *o;
    char *text;

    if (serial == NULL || key == NULL) {
        return strdup("{}");
    }
    if (HMAC(EVP_sha256(), key, 32, (const unsigned char *)challenge,
             strlen(challenge), mac, &n) == NULL ||
        n != 32) {
        return NULL;
    }
    gw_sim_hex32(mac, hex);
    if ((o = cJSON_CreateObject()) == NULL) {
        return NULL;
    }
    if (cJSON_AddStringToObject(o, "algorithm", "hmac-sha256") == NULL ||
        cJSON_AddStringToObject(o, "serial_number", serial) == NULL ||
        cJSON_AddStringToObject(o, "challenge", challenge) == NULL ||
        cJSON_AddStringToObject(o, "hmac", hex) == NULL) {
        cJSON_Delete(o);
        return NULL;
    }
    text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

int gw_sim_ota_activate_url(const char *ota_url, char *out, size_t cap)
{
    size_t n = strlen(ota_url);
    const char *tail =
        n > 0 && ota_url[n - 1] == '/' ? "activate" : "/activate";
    int w = snprintf(out, cap, "%s%s", ota_url, tail);

    return w < 0 || (size_t)w >= cap ? GW_ENOSPC : 0;
}

char *gw_sim_ota_system_info(const char *mac, const char *uuid,
                             const char *board, const char *version)
{
    /* A 16 MB ESP32-S3 board with a 240x240 colour display on Wi-Fi
     * (WifiBoard::GetBoardJson); no spaces but the firmware's one after
     * "partition_table":. */
    static const char fmt[] =
        "{\"version\":2,\"language\":\"zh-CN\",\"flash_size\":16777216,"
        "\"minimum_free_heap_size\":\"7265024\",\"mac_address\":\"%s\","
        "\"uuid\":\"%s\",\"chip_model_name\":\"esp32s3\","
        "\"chip_info\":{\"model\":9,\"cores\":2,\"revision\":2,"
        "\"features\":18},"
        "\"application\":{\"name\":\"xiaozhi\",\"version\":\"%s\","
        "\"compile_time\":\"Aug  8 2026T08:33:45Z\","
        "\"idf_version\":\"v5.5.1\",\"elf_sha256\":"
        "\"4e1a9d0f2c3b5a6978e1d2c3b4a5968778e1d2c3b4a5968778e1d2c3b4a59687\"},"
        "\"partition_table\": [{\"label\":\"nvs\",\"type\":1,\"subtype\":2,"
        "\"address\":36864,\"size\":16384},{\"label\":\"otadata\",\"type\":1,"
        "\"subtype\":0,\"address\":53248,\"size\":8192},"
        "{\"label\":\"phy_init\",\"type\":1,\"subtype\":1,\"address\":61440,"
        "\"size\":4096},{\"label\":\"ota_0\",\"type\":0,\"subtype\":16,"
        "\"address\":131072,\"size\":4128768},{\"label\":\"ota_1\",\"type\":0,"
        "\"subtype\":17,\"address\":4259840,\"size\":4128768}],"
        "\"ota\":{\"label\":\"ota_0\"},"
        "\"display\":{\"monochrome\":false,\"width\":240,\"height\":240},"
        "\"board\":{\"type\":\"%s\",\"name\":\"%s\",\"manufacturer\":\"\","
        "\"ssid\":\"lab\",\"rssi\":-51,\"channel\":6,\"ip\":\"127.0.0.1\","
        "\"mac\":\"%s\"}}";
    int n = snprintf(NULL, 0, fmt, mac, uuid, version, board, board, mac);
    char *out;

    if (n < 0 || (out = malloc((size_t)n + 1)) == NULL) {
        return NULL;
    }
    snprintf(out, (size_t)n + 1, fmt, mac, uuid, version, board, board, mac);
    return out;
}

int gw_sim_ota_endpoint(const char *endpoint, char *host, size_t cap, int *port)
{
    const char *colon = strchr(endpoint, ':');
    size_t hlen = colon ? (size_t)(colon - endpoint) : strlen(endpoint);
    long p = 8883;

    if (hlen == 0) {
        return GW_EINVAL;
    }
    if (colon != NULL) {
        char *end;
        /* std::stoi would throw (the firmware aborts) on no digits. */
        if (colon[1] < '0' || colon[1] > '9') {
            return GW_EINVAL;
        }
        p = strtol(colon + 1, &end, 10);
        if (*end != '\0' || p < 1 || p > 65535) {
            return GW_EINVAL;
        }
    }
    if (hlen >= cap) {
        return GW_ENOSPC;
    }
    memcpy(host, endpoint, hlen);
    host[hlen] = '\0';
    *port = (int)p;
    return 0;
}

const char *gw_sim_ota_stored_string(const cJSON *store, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(store, key);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int gw_sim_ota_stored_int(const cJSON *store, const char *key, int def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(store, key);

    return cJSON_IsNumber(v) ? v->valueint : def;
}
