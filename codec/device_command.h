/*
 * What an operator may push to a device outside a conversation
 * (docs/protocol.md section 8.5): one message of the types the firmware
 * takes while idle, and the fan-out form that names which devices get it.
 *
 *   {"type":"mcp","payload":{"method":"..","params":{..}|[..]}}
 *   {"type":"alert","status":"..","message":"..","emotion":".."}
 *   {"type":"system","command":"reboot"}
 *   {"type":"custom","payload":{..}}
 *
 *   {"to":{"client_ids":[..]}|{"group":"GID_x"}|{"all":true},
 *    "message":<one of the above>}
 *
 * Pure: the parsers read a cJSON tree and point into it; a refusal says
 * in why which member is missing or wrong, for the 400 answer.
 */
#ifndef GW_CODEC_DEVICE_COMMAND_H
#define GW_CODEC_DEVICE_COMMAND_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "common/error.h"

/* The firmware's own words for the types it takes while idle. */
#define GW_DEVICE_COMMAND_TYPE_MAP(XX)                                         \
    XX(MCP, "mcp")       /* JSON-RPC to the device's MCP server */             \
    XX(ALERT, "alert")   /* shown with a vibration sound */                    \
    XX(SYSTEM, "system") /* "reboot": goodbye if talking, reboot in 1 s */     \
    XX(CUSTOM, "custom") /* boards built with CONFIG_RECEIVE_CUSTOM_MESSAGE */

enum gw_device_command_type {
#define XX(name, _) GW_DEVICE_COMMAND_##name,
    GW_DEVICE_COMMAND_TYPE_MAP(XX)
#undef XX
        GW_DEVICE_COMMAND_TYPE_COUNT_
};

/* One message, its members pointing into the parsed tree. */
struct gw_device_command {
    enum gw_device_command_type type;
    const char *method;   /* MCP: non-empty */
    const cJSON *params;  /* MCP: an object, an array or NULL */
    const char *status;   /* ALERT: the three non-empty strings */
    const char *message;  /* ALERT */
    const char *emotion;  /* ALERT */
    const char *command;  /* SYSTEM: "reboot" */
    const cJSON *payload; /* CUSTOM: an object */
};

/* Which devices a fan-out goes to. */
enum gw_device_target_kind {
    GW_DEVICE_TARGET_IDS,   /* the listed client ids */
    GW_DEVICE_TARGET_GROUP, /* online devices of one group (id part 1) */
    GW_DEVICE_TARGET_ALL    /* every online device */
};

struct gw_device_target {
    enum gw_device_target_kind kind;
    const cJSON *ids; /* IDS: an array of 1..max_ids id strings */
    size_t n_ids;
    const char *group; /* GROUP: a non-empty string */
};

const char *gw_device_command_type_name(enum gw_device_command_type type);

/*
 * Reads one message (an object). Returns 0, or GW_EPROTO with why naming
 * the missing or wrong member ("alert needs \"emotion\" (a non-empty
 * string)"); *out is zeroed on failure. why may be NULL.
 */
GW_MUST_CHECK int gw_device_command_read(const cJSON *msg,
                                         struct gw_device_command *out,
                                         char *why, size_t why_cap);

/*
 * The message as the device gets it (not MCP, which goes through the
 * device's MCP link): only the members the firmware reads, unformatted,
 * in *out (the caller's to free()). GW_ETOOBIG when it would not fit in
 * max_len bytes (the firmware's message limit), GW_EINVAL for an MCP
 * command, GW_ENOMEM.
 */
GW_MUST_CHECK int gw_device_command_encode(const struct gw_device_command *c,
                                           size_t max_len, char **out,
                                           size_t *len);

/*
 * Reads a fan-out body: its target and *message (the "message" member,
 * read with gw_device_command_read into *cmd). Every client id must be a
 * string of 1..max_id_len bytes; at most max_ids of them. Returns 0,
 * GW_ELIMIT for too many ids, or GW_EPROTO, with why saying what.
 */
GW_MUST_CHECK int gw_device_broadcast_read(const cJSON *body, size_t max_ids,
                                           size_t max_id_len,
                                           struct gw_device_target *to,
                                           struct gw_device_command *cmd,
                                           char *why, size_t why_cap);

#endif /* GW_CODEC_DEVICE_COMMAND_H */
