/* Gateway-part set-up shared by the loop tests; see fixture_parts.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "codec/envelope.h"
#include "crypto/session_keys.h"
#include "fixture_parts.h"

void gw_fixture_config_mcp(struct gw_config_live *live, const char *mcp_json)
{
    char text[512];
    char err[512];
    struct gw_config *cfg = NULL;
    int n = snprintf(text, sizeof(text),
                     "{\"backends\":[{\"name\":\"main\","
                     "\"url\":\"ws://127.0.0.1:9/\"}],\"mcp\":%s}",
                     mcp_json);

    assert_true(n > 0 && (size_t)n < sizeof(text));
    assert_int_equal(
        gw_config_load_string(text, (size_t)n, "test", &cfg, err, sizeof(err)),
        0);
    assert_int_equal(gw_config_live_init(live, cfg), 0);
}

bool gw_fixture_mcp_in(struct gw_device_table *t, const char *client_id,
                       const char *payload)
{
    char text[2048];
    struct gw_envelope env;
    bool consumed;
    int n = snprintf(text, sizeof(text),
                     "{\"type\":\"mcp\",\"session_id\":\"\",\"payload\":%s}",
                     payload);

    assert_true(n > 0 && (size_t)n < sizeof(text));
    assert_int_equal(gw_envelope_parse(text, (size_t)n, sizeof(text), &env), 0);
    consumed = gw_device_on_mcp(t, client_id, &env);
    gw_envelope_free(&env);
    return consumed;
}

void gw_fixture_peer_start(struct gw_udp_audio *ua, struct gw_udp_peer *peer,
                           uint8_t key[16], uint32_t *ssrc, unsigned frame_ms,
                           void *owner)
{
    assert_int_equal(gw_session_keys_random_key(key), 0);
    assert_int_equal(
        gw_session_keys_unique_ssrc(ssrc, gw_udp_audio_ssrc_in_use, ua), 0);
    assert_int_equal(gw_udp_peer_start(ua, peer, *ssrc, key, frame_ms, owner),
                     0);
}
