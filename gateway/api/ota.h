/*
 * POST /xiaozhi/ota/, the firmware's boot-time check (docs/protocol.md
 * section 9): hands a device the MQTT credentials the broker plugin
 * accepts, the time and the firmware on offer, so that a fleet needs no
 * xiaozhi manager. Off unless ota.enabled.
 */
#ifndef GW_OTA_H
#define GW_OTA_H

#include <stdbool.h>
#include <stdint.h>

#include "codec/ota_request.h"
#include "common/error.h"
#include "config/config.h"

struct gw_http_req;

/* How each OTA request ended; each has a counter. */
#define GW_OTA_RESULT_MAP(XX)                                                  \
    XX(ISSUED, "issued")       /* 200 with credentials */                      \
    XX(MALFORMED, "malformed") /* 400: headers or body unusable */             \
    XX(OFF, "off")             /* 404: ota.enabled is false */                 \
    XX(METHOD, "method")       /* 405: not a POST */                           \
    XX(FAILED, "failed")       /* 503: out of memory or crypto failure */

enum gw_ota_result {
#define XX(name, _) GW_OTA_##name,
    GW_OTA_RESULT_MAP(XX)
#undef XX
        GW_OTA_RESULT_COUNT_
};

/* Owned by the HTTP API, read by /metrics. */
struct gw_ota_stats {
    uint64_t results[GW_OTA_RESULT_COUNT_];
    uint64_t bodies_ignored; /* issued from the headers alone */
};

/*
 * The answer to a parsed request as JSON text (free() it): the mqtt
 * section (endpoint, client_id, username = base64 of {"ip":peer},
 * password, publish_topic, subscribe_topic, keepalive), server_time with
 * now_ms, and firmware. peer is the device's address as the gateway sees
 * it. If client_id is not NULL the issued client id is copied there
 * (GW_CLIENT_ID_MAX + 1 bytes). Returns 0, GW_ENOMEM, GW_EINVAL (no
 * device key), GW_EPROTO (an id the plugin would refuse, which a
 * validated config and request cannot make) or GW_ECRYPTO.
 */
GW_MUST_CHECK int gw_ota_answer(const struct gw_config *cfg,
                                const struct gw_ota_request *r,
                                const char *peer, int64_t now_ms, char **out,
                                char *client_id);

#endif /* GW_OTA_H */
