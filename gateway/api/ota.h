/*
 * POST /xiaozhi/ota/, the firmware's boot-time check (docs/protocol.md
 * section 9): hands a bound device the MQTT credentials the broker plugin
 * accepts, an unknown one an activation code, and each the time and the
 * firmware on offer, so that a fleet needs no xiaozhi manager. Off unless
 * ota.enabled.
 */
#ifndef GW_OTA_H
#define GW_OTA_H

#include <stdbool.h>
#include <stdint.h>

#include "codec/client_id.h"
#include "codec/ota_request.h"
#include "common/error.h"
#include "config/config.h"

struct gw_http_req;

/* The group prefix no issued client id may have: the gateways'. */
#define GW_OTA_RESERVED_GROUP "hybridgw"

/* How each OTA request ended; each has a counter. */
#define GW_OTA_RESULT_MAP(XX)                                                  \
    XX(ISSUED, "issued")         /* 200 with credentials */                    \
    XX(ACTIVATION, "activation") /* 200: unknown, an activation code */        \
    XX(KNOWN, "known")           /* 200: bound, credentials already given */   \
    XX(MALFORMED, "malformed")   /* 400: headers or body unusable */           \
    XX(RESERVED, "reserved")     /* 403: its client id would be unusable */    \
    XX(OFF, "off")               /* 404: ota.enabled is false */               \
    XX(METHOD, "method")         /* 405: not a POST */                         \
    XX(LIMITED, "limited")       /* 429: too many new devices at once */       \
    XX(FAILED, "failed")         /* 503: store, memory or crypto failure */

/* How each POST <ota url>/activate ended. */
#define GW_OTA_ACTIVATE_MAP(XX)                                                \
    XX(BOUND, "bound")         /* 200: bound (now or before) */                \
    XX(PENDING, "pending")     /* 202: waiting for the operator */             \
    XX(MALFORMED, "malformed") /* 400 */                                       \
    XX(DENIED, "denied")       /* 403: a wrong proof */                        \
    XX(UNKNOWN, "unknown")     /* 404: nothing pending for it */               \
    XX(LIMITED, "limited")     /* 429: too many proofs tried */                \
    XX(FAILED, "failed")       /* 503 */

enum gw_ota_activate_result {
#define XX(name, _) GW_OTA_ACTIVATE_##name,
    GW_OTA_ACTIVATE_MAP(XX)
#undef XX
        GW_OTA_ACTIVATE_COUNT_
};

/* How each operator request on /api/bindings ended. */
#define GW_OTA_BINDING_MAP(XX)                                                 \
    XX(LISTED, "listed")     /* 200 */                                         \
    XX(BOUND, "bound")       /* 201: bound by its code */                      \
    XX(UNBOUND, "unbound")   /* 200: undone, the broker told */                \
    XX(REFUSED, "refused")   /* 400, 405, 413: unusable request */             \
    XX(UNKNOWN, "unknown")   /* 404: no such code or binding */                \
    XX(CONFLICT, "conflict") /* 409: already bound */                          \
    XX(LIMITED, "limited")   /* 429: too many codes tried */                   \
    XX(FAILED, "failed")     /* 503 */

enum gw_ota_binding_result {
#define XX(name, _) GW_OTA_BINDING_##name,
    GW_OTA_BINDING_MAP(XX)
#undef XX
        GW_OTA_BINDING_COUNT_
};

enum gw_ota_result {
#define XX(name, _) GW_OTA_##name,
    GW_OTA_RESULT_MAP(XX)
#undef XX
        GW_OTA_RESULT_COUNT_
};

/* Owned by the HTTP API, read by /metrics. */
struct gw_ota_stats {
    uint64_t results[GW_OTA_RESULT_COUNT_];
    uint64_t activations[GW_OTA_ACTIVATE_COUNT_];
    uint64_t bindings[GW_OTA_BINDING_COUNT_];
    uint64_t bodies_ignored; /* issued from the headers alone */
};

/* What an answer offers besides the time and the firmware. */
struct gw_ota_offer {
    const char *client_id; /* the mqtt section's; NULL: no mqtt section */
    int64_t binding;       /* carried in the username; 0: none (lab) */
    bool credentials;      /* username and password, else neither */
    const char *challenge; /* an activation object; NULL: none */
    const char *code;      /* its code; NULL: a proof alone is asked */
    int64_t timeout_ms;    /* its timeout_ms */
};

/*
 * The answer as JSON text (free() it): the mqtt section (endpoint,
 * client_id, with credentials username = base64 of {"ip":peer,"b":binding}
 * and password, publish_topic, subscribe_topic, keepalive), the
 * activation object, server_time with now_ms, and firmware. peer is the
 * device's address as the gateway sees it. Returns 0, GW_ENOMEM,
 * GW_EINVAL (no device key) or GW_ECRYPTO.
 */
GW_MUST_CHECK int gw_ota_answer_offer(const struct gw_config *cfg,
                                      const struct gw_ota_request *r,
                                      const char *peer, int64_t now_ms,
                                      const struct gw_ota_offer *o, char **out);

/*
 * The lab's answer (ota.activation "off"): credentials for the client id
 * ota.group makes for r, copied to client_id if not NULL
 * (GW_CLIENT_ID_MAX + 1 bytes). Returns as gw_ota_answer_offer, or
 * GW_EPROTO (gw_ota_client_id refused).
 */
GW_MUST_CHECK int gw_ota_answer(const struct gw_config *cfg,
                                const struct gw_ota_request *r,
                                const char *peer, int64_t now_ms, char **out,
                                char *client_id);

/*
 * GROUP@@@MAC@@@UUID with "{board}" in group replaced by at most 32
 * characters of board ("unknown" when ""), fewer when the id would
 * outgrow GW_CLIENT_ID_MAX; mac colon-separated. GW_EPROTO
 * when the broker would refuse the id or its group starts with
 * GW_OTA_RESERVED_GROUP (any case).
 */
GW_MUST_CHECK int gw_ota_client_id(const char *group, const char *mac,
                                   const char *uuid, const char *board,
                                   char out[GW_CLIENT_ID_MAX + 1]);

#endif /* GW_OTA_H */
