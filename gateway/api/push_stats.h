/*
 * What pushing to devices did (gateway/api/http_api_push.c), for /metrics:
 * each alert, system and custom message per device by result, the bodies
 * refused, and the fan-outs answered. MCP pushes are counted with every
 * other MCP request (origin "api", gateway/device/mcp_link.h).
 */
#ifndef GW_PUSH_STATS_H
#define GW_PUSH_STATS_H

#include <stdint.h>

#include "codec/device_command.h"

#define GW_PUSH_RESULT_MAP(XX)                                                 \
    XX(PUBLISHED, "published") /* handed to the broker */                      \
    XX(HELD, "held")           /* in the outbox: the broker link is down */    \
    XX(OFFLINE, "offline")     /* the device is not online */                  \
    XX(FAILED, "failed")       /* outbox full, no link, out of memory */

enum gw_push_result {
#define XX(name, _) GW_PUSH_##name,
    GW_PUSH_RESULT_MAP(XX)
#undef XX
        GW_PUSH_RESULT_COUNT_
};

struct gw_push_stats {
    /* Per device and message (a fan-out counts each of its devices). */
    uint64_t messages[GW_DEVICE_COMMAND_TYPE_COUNT_][GW_PUSH_RESULT_COUNT_];
    uint64_t refused;    /* bodies refused: 400, 413 */
    uint64_t broadcasts; /* POST /api/broadcast answered */
};

#endif /* GW_PUSH_STATS_H */
