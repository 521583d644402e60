/*
 * Bodies of the manager-api's device-call routes (docs/protocol.md section
 * 8.4): POST /api/call/request {"caller_mac","target_mac","caller_nickname"}
 * and POST /api/call/accept {"mac"}. Pure and bounded: the HTTP layer hands
 * over the raw body, the call module gets normalised MAC addresses.
 */
#ifndef GW_CODEC_CALL_REQUEST_H
#define GW_CODEC_CALL_REQUEST_H

#include <stddef.h>

#include "common/error.h"

/* Far above a real body (two MACs and a nickname). */
#define GW_CALL_BODY_MAX 4096
/* "a0:85:e3:f4:49:34" plus NUL. */
#define GW_CALL_MAC_SIZE 18
/* Bytes of the caller's nickname kept (cut on a character boundary). */
#define GW_CALL_NICKNAME_MAX 96

struct gw_call_request {
    char caller_mac[GW_CALL_MAC_SIZE]; /* lowercase, ':'-separated */
    char target_mac[GW_CALL_MAC_SIZE];
    char nickname[GW_CALL_NICKNAME_MAX + 1]; /* "" when not given */
};

struct gw_call_accept {
    char mac[GW_CALL_MAC_SIZE]; /* the callee, lowercase */
};

/*
 * A MAC as six hex pairs joined by ':', '_' or '-' (any case) into
 * lowercase "aa:bb:cc:dd:ee:ff". Returns 0 or GW_EMALFORMED.
 */
GW_MUST_CHECK int gw_call_mac_normalize(const char *in, size_t len,
                                        char out[GW_CALL_MAC_SIZE]);

/*
 * Parses a call request body. Returns 0; GW_ETOOBIG, GW_EUTF8,
 * GW_EMALFORMED (not one JSON object, see gw_json_object_parse);
 * GW_ENOENT when caller_mac or target_mac is missing, empty or not a
 * string (the Node gateway's 400); GW_EPROTO when one is not a MAC or
 * caller_nickname is present and not a string. *why names the fault for
 * the answer (static text). *out is zeroed on failure.
 */
GW_MUST_CHECK int gw_call_request_parse(const char *buf, size_t len,
                                        struct gw_call_request *out,
                                        const char **why);

/* The same for an accept body {"mac":..}. */
GW_MUST_CHECK int gw_call_accept_parse(const char *buf, size_t len,
                                       struct gw_call_accept *out,
                                       const char **why);

#endif /* GW_CODEC_CALL_REQUEST_H */
