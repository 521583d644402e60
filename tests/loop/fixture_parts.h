/*
 * Set-up for loop tests of gateway parts, beside fixture.h: a running
 * config from a JSON mcp section, device MCP messages handed to the table
 * as the dispatcher would, a UDP peer started with fresh keys, and a real
 * mosquitto for a test program.
 */
#ifndef GW_TEST_FIXTURE_PARTS_H
#define GW_TEST_FIXTURE_PARTS_H

#include <stdbool.h>
#include <stdint.h>

#include <sys/types.h>

#include "gateway/audio/udp_audio.h"
#include "gateway/core/config_hold.h"
#include "gateway/device/device_table.h"

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

/* A mosquitto on 127.0.0.1 that every test of one program shares. */
struct gw_fixture_broker {
    pid_t pid;
    int port;
    int tls_port; /* gw_fixture_broker_start_tls() only */
    bool exited;
    char dir[64];
    char conf[96];
};

/*
 * Starts it (anonymous, no persistence, errors and warnings on stderr)
 * in a new directory named after name under TMPDIR; it ends with the
 * program, however the program ends. 0 or -1, for cmocka's group setup.
 */
int gw_fixture_broker_start(struct gw_fixture_broker *b, const char *name);
/* The same with a second, TLS listener on tls_port that serves good.crt
 * of gw_fixture_certs(cert_dir) (localhost and 127.0.0.1). */
int gw_fixture_broker_start_tls(struct gw_fixture_broker *b, const char *name,
                                const char *cert_dir);
/* Stops it and removes its directory. */
void gw_fixture_broker_stop(struct gw_fixture_broker *b);
/* Whether it has exited (a wait that also watches it ends then). */
bool gw_fixture_broker_exited(struct gw_fixture_broker *b);

#endif /* GW_TEST_FIXTURE_PARTS_H */
