/*
 * Device presence as the broker plugin (or an EMQX rule) publishes it on
 * devices/<client_id>/presence (docs/architecture.md section 2):
 *   {"state":"online","address":"<ip>","conn":N,"run":R}   or
 *   {"state":"offline","conn":N,"run":R}
 * and the plugin's run alone, {"run":R}, on devices/$broker/presence
 * (gw_presence_run_parse). "address", "conn" and "run" are optional; other
 * members are ignored, so the broker side may add some. An empty payload (a
 * cleared retained message) means offline. The address goes into the backend's
 * x-forwarded-for header, so only an IPv4 or IPv6 literal is accepted (an IPv6
 * one may come in brackets, which are dropped).
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
    bool has_run;
    uint64_t run; /* the broker run conn belongs to, when given */
};

/*
 * Parses buf[0..len). Returns 0; GW_ETOOBIG, GW_EUTF8, GW_EMALFORMED (see
 * gw_json_object_parse); GW_EPROTO when "state" is missing or not
 * "online"/"offline", "address" is not an IP literal, or "conn" or "run" is
 * not a non-negative integer below 2^53. *out is zeroed on failure.
 */
GW_MUST_CHECK int gw_presence_parse(const char *buf, size_t len,
                                    struct gw_presence *out);

/* The topic level of the broker's own run message, in place of a client
 * id: no device client id can be it. */
#define GW_PRESENCE_BROKER_LEVEL "$broker"

/*
 * The broker's run message, {"run":R}: R a positive integer below 2^53
 * into *run. Returns 0, the errors of gw_json_object_parse, or GW_EPROTO.
 */
GW_MUST_CHECK int gw_presence_run_parse(const char *buf, size_t len,
                                        uint64_t *run);

#endif /* GW_CODEC_PRESENCE_H */
