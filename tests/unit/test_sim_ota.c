/*
 * The pure half of the simulated device's provisioning (tools/sim_ota.h):
 * answers read as Ota::CheckVersion reads them, the stored settings, the
 * activation body and its HMAC, the URLs, the system-information body and
 * the endpoint split.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tools/sim_ota.h"

static int parse(const char *body, cJSON *store, struct gw_sim_ota_answer *a)
{
    return gw_sim_ota_answer_parse(body, strlen(body), store, a);
}

static void test_answer_activation(void **state)
{
    cJSON *store = cJSON_CreateObject();
    struct gw_sim_ota_answer a;

    (void)state;
    assert_int_equal(parse("{\"activation\":{\"message\":\"Give this code\","
                           "\"code\":\"123456\",\"challenge\":\"c-1\","
                           "\"timeout_ms\":599000},"
                           "\"server_time\":{\"timestamp\":1}}",
                           store, &a),
                     0);
    assert_true(a.has_code);
    assert_true(a.has_challenge);
    assert_string_equal(a.code, "123456");
    assert_string_equal(a.challenge, "c-1");
    assert_string_equal(a.message, "Give this code");
    assert_int_equal(a.timeout_ms, 599000);
    assert_false(a.has_mqtt);
    assert_int_equal(cJSON_GetArraySize(store), 0);
    gw_sim_ota_answer_free(&a);

    /* A challenge only (bound, issued, serial device): no code. */
    assert_int_equal(
        parse("{\"activation\":{\"challenge\":\"c-2\"}}", store, &a), 0);
    assert_false(a.has_code);
    assert_true(a.has_challenge);
    gw_sim_ota_answer_free(&a);

    /* Members of the wrong type are absent, as in the firmware: a numeric
     * code ends the loop. */
    assert_int_equal(
        parse("{\"activation\":{\"code\":123456,\"challenge\":null}}", store,
              &a),
        0);
    assert_false(a.has_code);
    assert_false(a.has_challenge);
    gw_sim_ota_answer_free(&a);
    assert_int_equal(parse("{\"activation\":\"123456\"}", store, &a), 0);
    assert_false(a.has_code);
    gw_sim_ota_answer_free(&a);
    cJSON_Delete(store);
}

static void test_answer_mqtt_store(void **state)
{
    cJSON *store = cJSON_CreateObject();
    struct gw_sim_ota_answer a;

    (void)state;
    assert_int_equal(parse("{\"mqtt\":{\"endpoint\":\"127.0.0.1:1883\","
                           "\"client_id\":\"G@@@a@@@b\",\"username\":\"u1\","
                           "\"password\":\"p1\",\"keepalive\":60,"
                           "\"publish_topic\":\"device-server\","
                           "\"odd\":[1],\"flag\":true}}",
                           store, &a),
                     0);
    assert_true(a.has_mqtt);
    assert_int_equal(a.mqtt_stored, 6); /* not the array nor the bool */
    gw_sim_ota_answer_free(&a);
    assert_string_equal(gw_sim_ota_stored_string(store, "password"), "p1");
    assert_int_equal(gw_sim_ota_stored_int(store, "keepalive", 240), 60);
    assert_null(gw_sim_ota_stored_string(store, "odd"));

    /* Bound and issued: no username and password; the stored ones stay,
     * the others are replaced. */
    assert_int_equal(parse("{\"mqtt\":{\"endpoint\":\"h:2883\","
                           "\"keepalive\":\"90\"}}",
                           store, &a),
                     0);
    gw_sim_ota_answer_free(&a);
    assert_string_equal(gw_sim_ota_stored_string(store, "endpoint"), "h:2883");
    assert_string_equal(gw_sim_ota_stored_string(store, "username"), "u1");
    assert_string_equal(gw_sim_ota_stored_string(store, "password"), "p1");
    /* A string keepalive is stored as a string: GetInt finds no integer. */
    assert_int_equal(gw_sim_ota_stored_int(store, "keepalive", 240), 240);

    /* No mqtt object: nothing changes. */
    assert_int_equal(parse("{\"mqtt\":\"x\"}", store, &a), 0);
    assert_false(a.has_mqtt);
    gw_sim_ota_answer_free(&a);
    assert_string_equal(gw_sim_ota_stored_string(store, "client_id"),
                        "G@@@a@@@b");
    cJSON_Delete(store);
}

static void test_answer_refusals(void **state)
{
    cJSON *store = cJSON_CreateObject();
    struct gw_sim_ota_answer a;
    char *big;

    (void)state;
    assert_int_equal(parse("{\"mqtt\":", store, &a), GW_EMALFORMED);
    gw_sim_ota_answer_free(&a);
    /* JSON but not an object: no members, not an error. */
    assert_int_equal(parse("[1,2]", store, &a), 0);
    assert_false(a.has_mqtt || a.has_code || a.has_challenge);
    gw_sim_ota_answer_free(&a);
    /* NVS keys are at most 15 bytes: the firmware would abort. */
    assert_int_equal(parse("{\"mqtt\":{\"subscribe_topic\":\"t\","
                           "\"subscribe_topic_x\":\"t\"}}",
                           store, &a),
                     GW_ETOOBIG);
    assert_string_equal(a.fatal, "subscribe_topic_x");
    gw_sim_ota_answer_free(&a);
    big = malloc(4100);
    assert_non_null(big);
    memcpy(big, "{\"mqtt\":{\"password\":\"", 21);
    memset(big + 21, 'x', 4000);
    memcpy(big + 4021, "\"}}", 4);
    assert_int_equal(parse(big, store, &a), GW_ETOOBIG);
    assert_string_equal(a.fatal, "password");
    gw_sim_ota_answer_free(&a);
    free(big);
    cJSON_Delete(store);
}

static void test_answer_transport_firmware(void **state)
{
    cJSON *store = cJSON_CreateObject();
    struct gw_sim_ota_answer a;

    (void)state;
    assert_int_equal(parse("{\"websocket\":{\"url\":\"ws://x\"},"
                           "\"firmware\":{\"version\":\"2.5.0\","
                           "\"url\":\"http://x/f.bin\",\"force\":1}}",
                           store, &a),
                     0);
    assert_true(a.has_websocket);
    assert_string_equal(a.fw_version, "2.5.0");
    assert_string_equal(a.fw_url, "http://x/f.bin");
    assert_true(a.fw_force);
    gw_sim_ota_answer_free(&a);
    cJSON_Delete(store);
}

static void test_activate_body(void **state)
{
    uint8_t key[32];
    char hex[65];
    char *body;
    cJSON *o;

    (void)state;
    body = gw_sim_ota_activate_body(NULL, NULL, "c");
    assert_string_equal(body, "{}");
    free(body);

    /* Device key = HMAC-SHA256(fleet secret, serial); proof =
     * hex(HMAC-SHA256(device key, challenge)). Figures from Python's hmac
     * module. */
    assert_int_equal(gw_sim_ota_device_key("fleet-secret-0123456789",
                                           "SN0000000000000000000000000001",
                                           key),
                     0);
    for (int i = 0; i < 32; i++) {
        snprintf(hex + 2 * i, 3, "%02x", key[i]);
    }
    assert_string_equal(
        hex,
        "e295de78acc43586f6c4a19e3b002f43a5264290606ff0e592ebefcaf630a4a9");
    body = gw_sim_ota_activate_body("SN0000000000000000000000000001", key,
                                    "c6f1e0a2-challenge");
    assert_non_null(body);
    assert_string_equal(
        body, "{\"algorithm\":\"hmac-sha256\","
              "\"serial_number\":\"SN0000000000000000000000000001\","
              "\"challenge\":\"c6f1e0a2-challenge\",\"hmac\":"
              "\"55dd9ea5ac535021dc35d4b8a9b26134a496f8bec90ea50dd2f0a860e2e"
              "61570\"}");
    /* A challenge with quotes is escaped by cJSON, as by the firmware. */
    free(body);
    body = gw_sim_ota_activate_body("SN1", key, "a\"b");
    o = cJSON_Parse(body);
    assert_non_null(o);
    assert_string_equal(cJSON_GetObjectItem(o, "challenge")->valuestring,
                        "a\"b");
    cJSON_Delete(o);
    free(body);
}

static void test_urls_mac_endpoint(void **state)
{
    char out[64], mac[GW_SIM_MAC_LEN + 1], host[32];
    int port = 0;

    (void)state;
    assert_int_equal(
        gw_sim_ota_activate_url("http://h:1/xiaozhi/ota/", out, sizeof(out)),
        0);
    assert_string_equal(out, "http://h:1/xiaozhi/ota/activate");
    assert_int_equal(
        gw_sim_ota_activate_url("http://h:1/xiaozhi/ota", out, sizeof(out)), 0);
    assert_string_equal(out, "http://h:1/xiaozhi/ota/activate");
    assert_int_equal(gw_sim_ota_activate_url("http://h:1/xiaozhi/ota", out, 20),
                     GW_ENOSPC);

    assert_int_equal(gw_sim_ota_mac("A0:85:E3:f4:49:34", mac), 0);
    assert_string_equal(mac, "a0:85:e3:f4:49:34");
    assert_int_equal(gw_sim_ota_mac("a0-85-e3-f4-49-34", mac), GW_EINVAL);
    assert_int_equal(gw_sim_ota_mac("a0:85:e3:f4:49:3g", mac), GW_EINVAL);
    assert_int_equal(gw_sim_ota_mac("a0:85:e3:f4:49", mac), GW_EINVAL);

    assert_int_equal(gw_sim_ota_endpoint("broker", host, sizeof(host), &port),
                     0);
    assert_string_equal(host, "broker");
    assert_int_equal(port, 8883); /* no port: 8883, which means TLS */
    assert_int_equal(
        gw_sim_ota_endpoint("127.0.0.1:1883", host, sizeof(host), &port), 0);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 1883);
    assert_int_equal(gw_sim_ota_endpoint("", host, sizeof(host), &port),
                     GW_EINVAL);
    assert_int_equal(gw_sim_ota_endpoint("h:x", host, sizeof(host), &port),
                     GW_EINVAL);
    assert_int_equal(gw_sim_ota_endpoint("h:70000", host, sizeof(host), &port),
                     GW_EINVAL);
    assert_int_equal(gw_sim_ota_endpoint(":1883", host, sizeof(host), &port),
                     GW_EINVAL);
}

static void test_system_info(void **state)
{
    char *s =
        gw_sim_ota_system_info("a0:85:e3:f4:49:34", "u-1", "bread", "2.4.2");
    cJSON *o;

    (void)state;
    assert_non_null(s);
    assert_non_null(strstr(s, "\"partition_table\": [{")); /* its space */
    o = cJSON_Parse(s);
    assert_non_null(o);
    assert_string_equal(cJSON_GetObjectItem(o, "mac_address")->valuestring,
                        "a0:85:e3:f4:49:34");
    assert_string_equal(cJSON_GetObjectItem(o, "uuid")->valuestring, "u-1");
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(o, "application"), "version")
            ->valuestring,
        "2.4.2");
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(o, "board"), "type")
            ->valuestring,
        "bread");
    cJSON_Delete(o);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_answer_activation),
        cmocka_unit_test(test_answer_mqtt_store),
        cmocka_unit_test(test_answer_refusals),
        cmocka_unit_test(test_answer_transport_firmware),
        cmocka_unit_test(test_activate_body),
        cmocka_unit_test(test_urls_mac_endpoint),
        cmocka_unit_test(test_system_info),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
