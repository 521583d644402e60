/*
 * Set-up for loop tests of gateway parts, beside fixture.h: a running
 * config from a JSON mcp section, device MCP messages handed to the table
 * as the dispatcher would, and a UDP peer started with fresh keys.
 */
#ifndef GW_TEST_FIXTURE_PARTS_H
#define GW_TEST_FIXTURE_PARTS_H

#include <stdbool.h>
#include <stdint.h>

#include "gateway/config_hold.h"
#include "gateway/device_table.h"
#include "gateway/udp_audio.h"

/* Loads a config whose mcp section is mcp_json (one placeholder backend)
 * into live. */
void gw_fixture_config_mcp(struct gw_config_live *live, const char *mcp_json);

/* An mcp envelope from client_id carrying payload, handed to the table as
 * the MQTT dispatcher does; returns whether the table consumed it. */
bool gw_fixture_mcp_in(struct gw_device_table *t, const char *client_id,
                       const char *payload);

/* Draws a key and an unused ssrc and starts peer on ua for owner. */
void gw_fixture_peer_start(struct gw_udp_audio *ua, struct gw_udp_peer *peer,
                           uint8_t key[16], uint32_t *ssrc, unsigned frame_ms,
                           void *owner);

#endif /* GW_TEST_FIXTURE_PARTS_H */
