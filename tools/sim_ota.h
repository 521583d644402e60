/*
 * The simulated device's provisioning (`device --ota`): the firmware's OTA
 * check and activation loop (main/ota.cc, Application::CheckNewVersion).
 * The first half is pure (answers, stored settings, bodies) and unit
 * tested; the loop runs on libuv, one blocking libcurl easy request at a
 * time on the thread pool.
 */
#ifndef GW_SIM_OTA_H
#define GW_SIM_OTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "common/error.h"

/* A MAC as the firmware's Device-Id: lowercase, colon-separated. */
#define GW_SIM_MAC_LEN 17

/* --- Pure parts -------------------------------------------------------- */

/* What one check's answer said, as Ota::CheckVersion reads it: members of
 * the wrong JSON type count as absent. Strings are heap copies. */
struct gw_sim_ota_answer {
    bool has_code;      /* activation.code is a string */
    bool has_challenge; /* activation.challenge is a string */
    char *code, *challenge, *message;
    int32_t timeout_ms;   /* activation.timeout_ms, 0 if absent */
    bool has_mqtt;        /* mqtt is an object (stored member by member) */
    bool has_websocket;   /* websocket is an object */
    char *fw_version;     /* firmware.version, NULL if absent */
    char *fw_url;         /* firmware.url, NULL if absent */
    bool fw_force;        /* firmware.force == 1 */
    uint32_t mqtt_stored; /* members of mqtt taken (strings and numbers) */
    char *fatal;          /* with GW_ETOOBIG: the member NVS cannot take */
};

void gw_sim_ota_answer_free(struct gw_sim_ota_answer *a);

/*
 * Parses a 200 answer's body. Each string and number member of an `mqtt`
 * object is written into store (a JSON object: the NVS namespace "mqtt"),
 * numbers as integers; members left out keep their stored value. A body
 * that is JSON but not an object has no members. Returns 0, GW_EMALFORMED
 * (not JSON: the firmware retries the check), GW_ETOOBIG (a member name
 * over 15 bytes or a string of 4000 or more: NVS refuses it and the
 * firmware aborts; a->fatal names it) or GW_ENOMEM. Free a in every case.
 */
GW_MUST_CHECK int gw_sim_ota_answer_parse(const char *body, size_t len,
                                          cJSON *store,
                                          struct gw_sim_ota_answer *a);

/* "aa:bb:cc:dd:ee:ff" in either case into lowercase; GW_EINVAL if not a
 * MAC. */
GW_MUST_CHECK int gw_sim_ota_mac(const char *in, char out[GW_SIM_MAC_LEN + 1]);

/* The device key of a factory serial number: HMAC-SHA256(fleet secret,
 * serial), 32 raw bytes. 0 or GW_ECRYPTO. */
GW_MUST_CHECK int gw_sim_ota_device_key(const char *secret, const char *serial,
                                        uint8_t key[32]);

/*
 * The body of POST <ota url>/activate (Ota::GetActivationPayload): "{}"
 * without a serial number (key NULL), else {"algorithm":"hmac-sha256",
 * "serial_number","challenge","hmac":lowercase hex of HMAC-SHA256(key,
 * challenge)} in that order. A heap string (free()), NULL on failure.
 */
char *gw_sim_ota_activate_body(const char *serial, const uint8_t key[32],
                               const char *challenge);

/* <ota url>/activate, the slash added only when the URL lacks one.
 * 0 or GW_ENOSPC. */
GW_MUST_CHECK int gw_sim_ota_activate_url(const char *ota_url, char *out,
                                          size_t cap);

/* The system-information body of the check (Board::GetSystemInfoJson of
 * a Wi-Fi board), byte for byte as the firmware builds it. Heap string,
 * NULL on OOM. The values are pasted unescaped, as the firmware does: the
 * caller passes only values that need no escaping. */
char *gw_sim_ota_system_info(const char *mac, const char *uuid,
                             const char *board, const char *version);

/* The stored endpoint "host" or "host:port" split as MqttProtocol does
 * (at the first ':'; no port: 8883). 0, GW_EINVAL (empty, or a port that
 * is not 1..65535) or GW_ENOSPC. */
GW_MUST_CHECK int gw_sim_ota_endpoint(const char *endpoint, char *host,
                                      size_t cap, int *port);

/* The stored string of key, or NULL; the stored integer of key, or def. */
const char *gw_sim_ota_stored_string(const cJSON *store, const char *key);
int gw_sim_ota_stored_int(const cJSON *store, const char *key, int def);

/* --- The loop ---------------------------------------------------------- */

struct gw_sim_ota_options {
    const char *url;          /* the OTA URL, at least 10 characters */
    const char *mac;          /* Device-Id, lowercase */
    const char *uuid;         /* Client-Id */
    const char *serial;       /* factory serial number, or NULL */
    const uint8_t *key;       /* its device key (32 bytes), with serial */
    const char *board;        /* User-Agent board name, board.type */
    const char *version;      /* firmware version */
    cJSON *store;             /* the mqtt namespace, updated in place */
    uint32_t pending_ms;      /* after 202: 3000, as the firmware */
    uint32_t retry_ms;        /* after another status: 10000; also the
                                 first delay of a failed check (doubling) */
    uint32_t http_timeout_ms; /* each request */
};

struct gw_sim_ota;

/* One transcript line. */
typedef void (*gw_sim_ota_event_cb)(void *arg, const char *line);
/* The loop ended; status 0 when the last check needed no activation (or
 * the checks failed ten times: the firmware goes on with what it has),
 * GW_EPROTO when the answers chose a transport the simulator lacks. */
typedef void (*gw_sim_ota_done_cb)(void *arg, int status, const char *why);

/*
 * Starts the loop: check; on an activation, print `activation code
 * <code>` (or `activation challenge`) on stdout, then up to ten activate
 * requests; check again, until an answer asks for no activation. o and
 * what it points to must outlive the loop. 0, GW_EINVAL or GW_ENOMEM.
 */
GW_MUST_CHECK int gw_sim_ota_start(uv_loop_t *loop,
                                   const struct gw_sim_ota_options *o,
                                   gw_sim_ota_event_cb on_event,
                                   gw_sim_ota_done_cb on_done, void *arg,
                                   struct gw_sim_ota **out);

/* Stops the loop (a request under way is aborted) and frees it once its
 * handles have closed; no callback runs after this. */
void gw_sim_ota_close(struct gw_sim_ota *ota);

/* --- The device's command line (sim_device_ota.c) ---------------------- */

struct gw_sim_cli;
struct option;

/* The provisioning options of `device` and what they resolve to. */
struct gw_sim_prov {
    const char *url;        /* --ota */
    const char *mac_arg;    /* --mac */
    const char *uuid_arg;   /* --uuid */
    const char *serial;     /* --serial */
    const char *serial_key; /* --serial-key: the fleet secret */
    const char *nvs_path;   /* --nvs */
    const char *board;      /* --board */
    const char *version;    /* --firmware-version */
    uint32_t pending_ms, retry_ms;
    char mac[GW_SIM_MAC_LEN + 1];
    char uuid[65];
    uint8_t key[32];
    cJSON *nvs;  /* the whole stored state */
    cJSON *mqtt; /* its "mqtt" namespace */
    struct gw_sim_ota_options ota;
    char client_id[192], username[256], password[256], publish[256];
};

void gw_sim_prov_defaults(struct gw_sim_prov *p);

/* The options, for getopt_long; *n of them. */
const struct option *gw_sim_prov_options(size_t *n);

/* One option of gw_sim_prov_options: 1 taken, 0 not one of them,
 * GW_EINVAL (message printed). */
GW_MUST_CHECK int gw_sim_prov_parse(struct gw_sim_prov *p, int code,
                                    const char *arg);

/* Help text of those options. */
void gw_sim_prov_usage(FILE *out);

/*
 * After the command line: checks the options together, reads --nvs, picks
 * the MAC and uuid (given, stored, else random and then stored) and
 * derives the device key. Without --ota, a MAC or uuid given makes the
 * client id GID_test@@@<mac with _>@@@<uuid> unless --client-id is set.
 * 0 or GW_EINVAL (message printed).
 */
GW_MUST_CHECK int gw_sim_prov_prepare(struct gw_sim_prov *p,
                                      struct gw_sim_cli *cli);

/* After the loop: the stored settings into the device's options, as
 * MqttProtocol::StartMqttClient reads them. 0, or GW_EINVAL with why. */
GW_MUST_CHECK int gw_sim_prov_apply(struct gw_sim_prov *p,
                                    struct gw_sim_cli *cli, char *why,
                                    size_t cap);

/* Writes --nvs (if given); 0 or GW_EINVAL (message printed). */
int gw_sim_prov_save(const struct gw_sim_prov *p);
void gw_sim_prov_free(struct gw_sim_prov *p);

#endif /* GW_SIM_OTA_H */
