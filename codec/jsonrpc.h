/*
 * JSON-RPC 2.0 as MCP carries it (docs/protocol.md section 7): strict
 * classification of one message, the error codes the gateway answers with,
 * and builders for the messages it sends. Pure: cJSON in, cJSON out.
 */
#ifndef GW_CODEC_JSONRPC_H
#define GW_CODEC_JSONRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/error.h"

/* Standard codes, and the gateway's own in the server-error range. */
#define GW_RPC_PARSE_ERROR      (-32700)
#define GW_RPC_INVALID_REQUEST  (-32600)
#define GW_RPC_METHOD_NOT_FOUND (-32601)
#define GW_RPC_INVALID_PARAMS   (-32602)
#define GW_RPC_INTERNAL_ERROR   (-32603)
#define GW_RPC_TIMEOUT          (-32001) /* the device did not answer in time */
#define GW_RPC_DEVICE_OFFLINE                                                  \
    (-32002)                        /* the device is not (or no longer) on     \
                                     */
#define GW_RPC_DEVICE_BUSY (-32003) /* too many requests waiting for it */
#define GW_RPC_CANCELLED   (-32004) /* the gateway is shutting down */

/* -32005 (sessions full) is the MCP server's; then, in order: no MCP
 * client declared the capability a device asks for, no such MCP server for
 * this device, an MCP server failed (connect, TLS, HTTP status, body), and
 * the MCP client cancelled the request. */
#define GW_RPC_NO_CLIENT     (-32006)
#define GW_RPC_NO_SERVER     (-32007)
#define GW_RPC_SERVER_FAILED (-32008)

/* Largest id the gateway puts on a request: firmware reads ids as int. */
#define GW_RPC_ID_MAX 0x7fffffffu

enum gw_rpc_kind {
    GW_RPC_REQUEST,      /* method + id */
    GW_RPC_NOTIFICATION, /* method, no id */
    GW_RPC_RESPONSE      /* id + exactly one of result / error */
};

/* A classified message; every pointer points into the message. */
struct gw_rpc {
    enum gw_rpc_kind kind;
    const cJSON *id;     /* string, number or null; NULL for notifications */
    const char *method;  /* requests and notifications, else NULL */
    const cJSON *params; /* object or array, or NULL when absent */
    const cJSON *result; /* responses: any value, or NULL */
    const cJSON *error;  /* responses: an object, or NULL */
};

/*
 * Classifies msg. Requires an object with "jsonrpc":"2.0"; a string method
 * (non-empty) with params absent, an object or an array; an id that is a
 * string, an integral number or null (null only on responses). A response
 * has an id and exactly one of result / error; error must be an object
 * (its members are not checked here: see gw_rpc_error_normalise).
 * GW_EINVAL if msg is NULL, GW_EPROTO otherwise.
 */
GW_MUST_CHECK int gw_rpc_classify(const cJSON *msg, struct gw_rpc *out);

/* Whether id is an integral JSON number in 0..GW_RPC_ID_MAX; sets *out. */
bool gw_rpc_id_u32(const cJSON *id, uint32_t *out);

/*
 * A progress token the gateway sent as a number, in any JSON form a peer
 * echoes it: that number, or a string of its decimal digits (esp-mcp keeps
 * a numeric token as text and sends it back as a string). A string must be
 * the canonical form: 1..10 digits, no sign, no leading zero, at most
 * GW_RPC_ID_MAX. Sets *out.
 */
bool gw_rpc_token_u32(const cJSON *token, uint32_t *out);

/*
 * {"jsonrpc":"2.0","id":id,"method":method[,"params":params]}; params is
 * moved into the message (deleted on failure), may be NULL. NULL on OOM.
 */
cJSON *gw_rpc_request(uint32_t id, const char *method, cJSON *params);

/* {"jsonrpc":"2.0","method":method[,"params":params]}; params moved. */
cJSON *gw_rpc_notification(const char *method, cJSON *params);

/* {"jsonrpc":"2.0","id":<copy of id>,"result":result}; result moved. */
cJSON *gw_rpc_result(const cJSON *id, cJSON *result);

/*
 * {"jsonrpc":"2.0","id":<copy of id, null if NULL>,"error":{"code":code,
 * "message":message}}. NULL on OOM.
 */
cJSON *gw_rpc_error(const cJSON *id, int code, const char *message);

/* As gw_rpc_error, with a ready error object (moved in). */
cJSON *gw_rpc_error_with(const cJSON *id, cJSON *error);

/*
 * A valid JSON-RPC error object made from what a device sent: firmware
 * omits "code" (docs/protocol.md section 7). An integral code is kept, a
 * missing or bad one becomes GW_RPC_INTERNAL_ERROR; a string message is
 * kept, anything else becomes "device error"; "data" is copied when
 * present. error may be NULL or any value. NULL on OOM only.
 */
cJSON *gw_rpc_error_normalise(const cJSON *error);

#endif /* GW_CODEC_JSONRPC_H */
