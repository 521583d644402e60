/* Publishing as a device's MCP link does it (publish.h), private to
 * gateway/device/. */
#ifndef GW_PUBLISH_INT_H
#define GW_PUBLISH_INT_H

#include <cjson/cJSON.h>

#include "gateway/device/publish.h"

/* {"session_id":..,"type":"mcp","payload":msg}; GW_ETOOBIG past what
 * the firmware accepts in one message. */
int gw__device_publish_mcp(struct gw_publisher *pub, const char *client_id,
                           const char *session_id, const cJSON *msg);

#endif /* GW_PUBLISH_INT_H */
