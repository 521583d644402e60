/*
 * The firmware's activation request (docs/protocol.md section 9.3): the
 * body a device POSTs to <ota url>/activate after an answer with an
 * activation challenge, `{}` or its serial number's HMAC over the
 * challenge.
 */
#ifndef GW_CODEC_ACTIVATION_REQUEST_H
#define GW_CODEC_ACTIVATION_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* The firmware's body is a few hundred bytes. */
#define GW_ACTIVATION_BODY_MAX 4096
/* A factory serial number, as the eFuse holds it (32 bytes). */
#define GW_ACTIVATION_SERIAL_MAX 64
/* The challenge as the gateway made it, echoed. */
#define GW_ACTIVATION_CHALLENGE_MAX 64
/* hex(HMAC-SHA256): 64 characters. */
#define GW_ACTIVATION_HMAC_HEX 64

struct gw_activation_request {
    bool proof; /* false for `{}`: a device without a serial number */
    char serial_number[GW_ACTIVATION_SERIAL_MAX + 1];
    char challenge[GW_ACTIVATION_CHALLENGE_MAX + 1];
    unsigned char hmac[GW_ACTIVATION_HMAC_HEX / 2];
};

/*
 * Parses body[0..len): a bounded, UTF-8 JSON object, either without any
 * of the proof's members (no proof; an empty body counts as `{}`), or
 * with all of them: "algorithm" exactly "hmac-sha256", "serial_number"
 * 1..GW_ACTIVATION_SERIAL_MAX of [A-Za-z0-9_.-], "challenge"
 * 1..GW_ACTIVATION_CHALLENGE_MAX of the same, "hmac" GW_ACTIVATION_HMAC_HEX
 * hex digits (either case). A repeated member is refused. Other members
 * are ignored.
 *
 * Returns 0 and fills *out, or GW_EINVAL (NULL arguments), GW_ETOOBIG,
 * GW_EMALFORMED (not a JSON object, not UTF-8) or GW_EPROTO (a proof
 * incomplete or unusable). On failure *why is a short sentence for the
 * answer (never a value from the request) and *out is zeroed.
 */
GW_MUST_CHECK int gw_activation_request_parse(const char *body, size_t len,
                                              struct gw_activation_request *out,
                                              const char **why);

#endif /* GW_CODEC_ACTIVATION_REQUEST_H */
