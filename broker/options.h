/*
 * The plugin's settings, from mosquitto.conf's plugin_opt_<name> lines.
 * The names are a contract shared with the docs and the container files:
 * device_key, device_topic, gateway_username, gateway_password,
 * topic_prefix, max_message_bytes, gateway_status_topic,
 * gateway_instances_prefix, revoke_topic, listen_backlog.
 */
#ifndef GW_BROKER_OPTIONS_H
#define GW_BROKER_OPTIONS_H

#include <stddef.h>

#include "common/error.h"

/* Bounds that let every per-device topic fit GW_BROKER_TOPIC_MAX. */
#define GW_BROKER_PREFIX_MAX 256
#define GW_BROKER_TOPIC_MAX  512

#define GW_BROKER_DEFAULT_DEVICE_TOPIC "device-server"
#define GW_BROKER_DEFAULT_TOPIC_PREFIX "devices"
/* The gateway's ota.revoke_topic (codec/revocation.h). */
#define GW_BROKER_DEFAULT_REVOKE_TOPIC "hybridgw/broker/revoke"
/*
 * Largest device publish payload let through. Firmware messages are a few
 * KiB, the largest an MCP tools/list page the firmware cuts near 8000
 * bytes; 64 KiB is the gateway's own upper bound (limits.max_message_bytes
 * cannot be set higher), so nothing the gateway could take is lost here.
 * The broker's max_packet_size is global and sized for the gateway's larger
 * downlink: this bound is what keeps device uplink small.
 */
#define GW_BROKER_DEFAULT_MAX_MESSAGE "65536"
#define GW_BROKER_MAX_MESSAGE_LIMIT   268435455  /* MQTT's own bound */
#define GW_BROKER_BACKLOG_LIMIT       2147483647 /* listen()'s int */

/* Every string is heap-owned and NUL-terminated once checked. */
struct gw_broker_options {
    char *device_key;       /* xiaozhi key of the device passwords */
    size_t device_key_len;  /* bytes at device_key */
    char *device_topic;     /* stock firmware's publish topic */
    char *gateway_username; /* the gateway account */
    char *gateway_password;
    char *topic_prefix;         /* "<prefix>/<client_id>/up|down|presence" */
    char *max_message;          /* device payload bound, as given */
    size_t max_message_bytes;   /* the same, checked */
    char *gateway_status_topic; /* the gateway's will may go here, or "" */
    /* cluster.topic_prefix of the gateways: their wills (instance
     * records) may go to <this>/<name> */
    char *gateway_instances_prefix;
    /* where the gateway account publishes revocations; consumed, never
     * delivered */
    char *revoke_topic;
    /* the TCP listeners' backlog: "somaxconn" or a count, as given */
    char *listen_backlog;
    int listen_backlog_n; /* the same: -1 somaxconn, 0 the broker's own */
    char *down_pattern;   /* "<prefix>/+/down", for gw_topic_capture */
    size_t prefix_len;    /* bytes at topic_prefix */
};

/*
 * Takes one plugin_opt_<key> value (key without the prefix). Returns 0,
 * GW_ENOENT for a name that is not one of ours, GW_EEXIST for a name given
 * twice, GW_EINVAL for a value that cannot be used, or GW_ENOMEM; on an
 * error, a sentence for the log goes to err.
 */
GW_MUST_CHECK int gw_broker_options_set(struct gw_broker_options *o,
                                        const char *key, const char *value,
                                        char *err, size_t err_cap);

/*
 * Fills the defaults and checks that the required options are there.
 * Returns 0, GW_ECONFIG (with the sentence in err) or GW_ENOMEM.
 */
GW_MUST_CHECK int gw_broker_options_check(struct gw_broker_options *o,
                                          char *err, size_t err_cap);

/* Frees every string (the device key is wiped first) and zeroes o. */
void gw_broker_options_free(struct gw_broker_options *o);

#endif /* GW_BROKER_OPTIONS_H */
