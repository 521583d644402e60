/*
 * Device presence as the broker plugin (or an EMQX rule) publishes it on
 * devices/<client_id>/presence (docs/architecture.md section 2):
 *   {"state":"online","address":"<ip>","conn":N}   or
 *   {"state":"offline","conn":N}
 * "address" and "conn" are optional; other members are ignored, so the
 * broker side may add some. An empty payload (a cleared retained message)
 * means offline. The address goes into the backend's x-forwarded-for
 * header, so only an IPv4 or IPv6 literal is accepted (an IPv6 one may
 * come in brackets, which are dropped).
 */
#ifndef GW_CODEC_PRESENCE_H
#define GW_CODEC_PRESENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define GW_PRESENCE_MAX_LEN     512 /* far above any real payload */
#define GW_PRESENCE_ADDRESS_MAX 45  /* INET6_ADDRSTRLEN - 1 */

struct gw_presence {
    bool online;
    char address[GW_PRESENCE_ADDRESS_MAX + 1]; /* "" when not given */
    bool has_conn;
    uint64_t conn; /* the broker's connection number, when given */
};

/*
 * Parses buf[0..len). Returns 0; GW_ETOOBIG, GW_EUTF8, GW_EMALFORMED (see
 * gw_json_object_parse); GW_EPROTO when "state" is missing or not
 * "online"/"offline", "address" is not an IP literal, or "conn" is not a
 * non-negative integer below 2^53. *out is zeroed on failure.
 */
GW_MUST_CHECK int gw_presence_parse(const char *buf, size_t len,
                                    struct gw_presence *out);

#endif /* GW_CODEC_PRESENCE_H */
