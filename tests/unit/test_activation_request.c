/*
 * The firmware's activation request (codec/activation_request.c): the
 * two bodies the firmware sends, and every way a proof can be unusable.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "codec/activation_request.h"

#define HMAC_HEX                                                               \
    "00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff"

static int parse(const char *body, struct gw_activation_request *r,
                 const char **why)
{
    return gw_activation_request_parse(body, strlen(body), r, why);
}

static void test_firmware_bodies(void **state)
{
    struct gw_activation_request r;
    const char *why = "unset";
    const char *proof =
        "{\"algorithm\":\"hmac-sha256\",\"serial_number\":\"SN0123456789\","
        "\"challenge\":\"6b1f0c2d9e8a7b6c5d4e3f2a1b0c9d8e\",\"hmac\":"
        "\"" HMAC_HEX "\"}";

    (void)state;
    assert_int_equal(parse("{}", &r, &why), 0);
    assert_false(r.proof);
    assert_null(why);
    assert_int_equal(gw_activation_request_parse(NULL, 0, &r, &why), 0);
    assert_false(r.proof);

    assert_int_equal(parse(proof, &r, &why), 0);
    assert_true(r.proof);
    assert_string_equal(r.serial_number, "SN0123456789");
    assert_string_equal(r.challenge, "6b1f0c2d9e8a7b6c5d4e3f2a1b0c9d8e");
    assert_int_equal(r.hmac[0], 0x00);
    assert_int_equal(r.hmac[10], 0xaa);
    assert_int_equal(r.hmac[31], 0xff);
    /* Members the proof does not use are no reason to refuse. */
    assert_int_equal(parse("{\"note\":1}", &r, &why), 0);
    assert_false(r.proof);
}

static void test_refused(void **state)
{
    static const struct {
        const char *body;
        int rc;
    } cases[] = {
        {"[]", GW_EMALFORMED},
        {"{", GW_EMALFORMED},
        {"\"x\"", GW_EMALFORMED},
        {"{\"hmac\":\"" HMAC_HEX "\"}", GW_EPROTO},
        {"{\"algorithm\":\"hmac-sha256\",\"serial_number\":\"S\","
         "\"challenge\":\"c\"}",
         GW_EPROTO},
        {"{\"algorithm\":\"hmac-md5\",\"serial_number\":\"S\","
         "\"challenge\":\"c\",\"hmac\":\"" HMAC_HEX "\"}",
         GW_EPROTO},
        {"{\"algorithm\":\"hmac-sha256\",\"serial_number\":\"S/1\","
         "\"challenge\":\"c\",\"hmac\":\"" HMAC_HEX "\"}",
         GW_EPROTO},
        {"{\"algorithm\":\"hmac-sha256\",\"serial_number\":\"\","
         "\"challenge\":\"c\",\"hmac\":\"" HMAC_HEX "\"}",
         GW_EPROTO},
        {"{\"algorithm\":\"hmac-sha256\",\"serial_number\":\"S\","
         "\"challenge\":\"c\",\"hmac\":\"0011\"}",
         GW_EPROTO},
        {"{\"algorithm\":\"hmac-sha256\",\"serial_number\":\"S\","
         "\"challenge\":\"c\",\"hmac\":\"zz112233445566778899aabbccddeeff"
         "00112233445566778899aabbccddeeff\"}",
         GW_EPROTO},
        {"{\"algorithm\":\"hmac-sha256\",\"serial_number\":7,"
         "\"challenge\":\"c\",\"hmac\":\"" HMAC_HEX "\"}",
         GW_EPROTO},
        {"{\"algorithm\":\"hmac-sha256\",\"serial_number\":\"S\","
         "\"serial_number\":\"T\",\"challenge\":\"c\",\"hmac\":\"" HMAC_HEX
         "\"}",
         GW_EPROTO},
    };
    struct gw_activation_request r;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *why = NULL;
        memset(&r, 0x5a, sizeof(r));
        assert_int_equal(parse(cases[i].body, &r, &why), cases[i].rc);
        assert_non_null(why);
        assert_false(r.proof);
        assert_int_equal(r.serial_number[0], '\0');
    }
}

static void test_limits(void **state)
{
    static char big[GW_ACTIVATION_BODY_MAX + 2];
    char serial[GW_ACTIVATION_SERIAL_MAX + 2];
    char body[512];
    struct gw_activation_request r;
    const char *why;

    (void)state;
    memset(big, ' ', sizeof(big) - 1);
    big[0] = '{';
    big[sizeof(big) - 2] = '}';
    assert_int_equal(
        gw_activation_request_parse(big, sizeof(big) - 1, &r, &why),
        GW_ETOOBIG);
    memset(serial, 'S', sizeof(serial) - 1);
    serial[sizeof(serial) - 1] = '\0';
    snprintf(body, sizeof(body),
             "{\"algorithm\":\"hmac-sha256\",\"serial_number\":\"%s\","
             "\"challenge\":\"c\",\"hmac\":\"" HMAC_HEX "\"}",
             serial);
    assert_int_equal(parse(body, &r, &why), GW_EPROTO);
    serial[GW_ACTIVATION_SERIAL_MAX] = '\0';
    snprintf(body, sizeof(body),
             "{\"algorithm\":\"hmac-sha256\",\"serial_number\":\"%s\","
             "\"challenge\":\"c\",\"hmac\":\"" HMAC_HEX "\"}",
             serial);
    assert_int_equal(parse(body, &r, &why), 0);
    assert_int_equal(strlen(r.serial_number), GW_ACTIVATION_SERIAL_MAX);
    assert_int_equal(gw_activation_request_parse(NULL, 0, NULL, &why),
                     GW_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_firmware_bodies),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_limits),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
