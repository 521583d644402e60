/*
 * Publishing to one device (docs/protocol.md section 2): the down topic
 * formatted for its client id, goodbyes, and MCP envelopes. The one way
 * anything in the gateway reaches a device over the broker.
 */
#ifndef GW_PUBLISH_H
#define GW_PUBLISH_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "common/error.h"
#include "common/mqtt_link.h"
#include "gateway/config_hold.h"

struct gw_publisher {
    struct gw_mqtt_link *link; /* NULL until the broker link exists */
    const struct gw_config_live *config;
};

/* One JSON message to the device's down topic. GW_EINVAL for a client id
 * the topic cannot carry; the link's error when the broker is away. */
int gw_publish_json(struct gw_publisher *pub, const char *client_id,
                    const char *json, size_t len);

/* {"type":"goodbye","session_id":session_id} to the device. */
void gw_publish_goodbye(struct gw_publisher *pub, const char *client_id,
                        const char *session_id);

/* {"session_id":..,"type":"mcp","payload":msg}; GW_ETOOBIG past what
 * the firmware accepts in one message. */
int gw_publish_mcp(struct gw_publisher *pub, const char *client_id,
                   const char *session_id, const cJSON *msg);

#endif /* GW_PUBLISH_H */
