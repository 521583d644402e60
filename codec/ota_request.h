/*
 * The firmware's OTA check (docs/protocol.md section 9): the headers and
 * the system-info JSON body a device POSTs to its OTA URL at boot, reduced
 * to what provisioning needs: who it is (MAC, uuid), what board and which
 * firmware version it runs.
 */
#ifndef GW_CODEC_OTA_REQUEST_H
#define GW_CODEC_OTA_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* The firmware's body is 1-2 KiB (most of it the partition table). */
#define GW_OTA_BODY_MAX 65536
/* Client-Id: a uuid v4 is 36 characters. */
#define GW_OTA_UUID_MAX 64
/* board.type, a build directory name such as "bread-compact-wifi". */
#define GW_OTA_BOARD_MAX 48
/* "2.4.2": dot-separated decimal numbers. */
#define GW_OTA_VERSION_MAX 32

/* The request headers that matter, each NULL when absent. */
struct gw_ota_headers {
    const char *device_id;  /* Device-Id: the MAC, "a0:85:e3:f4:49:34" */
    const char *client_id;  /* Client-Id: the uuid kept in the device */
    const char *user_agent; /* User-Agent: "<board name>/<version>" */
};

struct gw_ota_request {
    char mac[18];      /* lowercase, colon-separated */
    char mac_part[18]; /* the same with '_': part 2 of the MQTT client id */
    char uuid[GW_OTA_UUID_MAX + 1];
    /* body board.type, else the User-Agent's name; "" when neither is
     * usable. Only [A-Za-z0-9_.-]: it may become part of a client id. */
    char board[GW_OTA_BOARD_MAX + 1];
    /* body application.version, else the User-Agent's version; "" unless
     * it is dot-separated numbers (gw_ota_version_valid). */
    char version[GW_OTA_VERSION_MAX + 1];
    /* The body did not parse and was ignored: why (a constant sentence),
     * else NULL. See gw_ota_request_parse. */
    const char *body_ignored;
};

/*
 * Checks a request: Device-Id a MAC (either case, stored lowercase);
 * Client-Id 1..GW_OTA_UUID_MAX of [A-Za-z0-9_.-] (no '@', '/', '+', '#':
 * it becomes part 3 of the client id); the body, when it is a JSON
 * object (bounded, UTF-8, see gw_json_object_parse), must have
 * "mac_address" and "uuid", when they are strings, name the same device
 * as the headers. board and version are taken from the body or the
 * User-Agent when usable and left "" otherwise (they are informative,
 * never a reason to refuse).
 *
 * A body that does not parse (not JSON, not UTF-8) is ignored, not
 * refused: the firmware pastes the Wi-Fi name into its JSON unescaped,
 * so a network named with a '"' or in a legacy encoding (GBK) breaks the
 * body of a device that is otherwise fine, and the headers alone say who
 * it is. out->body_ignored then says why.
 *
 * Returns 0 and fills *out, or GW_EINVAL (NULL arguments), GW_EPROTO
 * (a header missing or unusable, a body naming another device) or
 * GW_ETOOBIG (the body). On failure *why is a short sentence for the
 * answer (never a value from the request) and *out is zeroed.
 */
GW_MUST_CHECK int gw_ota_request_parse(const struct gw_ota_headers *h,
                                       const char *body, size_t len,
                                       struct gw_ota_request *out,
                                       const char **why);

/*
 * True for what the firmware's version comparison reads safely: 1 to
 * GW_OTA_VERSION_MAX characters, decimal numbers of at most 9 digits
 * joined by single dots ("2.4.2").
 */
bool gw_ota_version_valid(const char *s);

#endif /* GW_CODEC_OTA_REQUEST_H */
