/*
 * A gateway instance's record, retained on <cluster.topic_prefix>/<name>
 * (docs/protocol.md section 10.1):
 *   {"name":"gw-a","boot":"5f0c...","udp":"203.0.113.7:8884",
 *    "started_ms":1764131000000,"state":"running","sessions":12,
 *    "devices":40}
 * and, as the last will or at a clean exit, {"name","boot","state":"gone"}.
 * Other instances' records are outside input: bounded, checked, and a bad
 * one is refused whole. Also the rendezvous hash that picks a device's
 * owner among the live instances.
 */
#ifndef GW_CODEC_INSTANCE_RECORD_H
#define GW_CODEC_INSTANCE_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define GW_INSTANCE_RECORD_MAX_LEN 1024 /* far above any real record */
#define GW_INSTANCE_NAME_MAX       64
#define GW_INSTANCE_BOOT_MAX       32
#define GW_INSTANCE_UDP_MAX        80

enum gw_instance_state {
    GW_INSTANCE_RUNNING,
    GW_INSTANCE_DRAINING,
    GW_INSTANCE_GONE,
};

const char *gw_instance_state_name(enum gw_instance_state state);

struct gw_instance_record {
    char name[GW_INSTANCE_NAME_MAX + 1];
    char boot[GW_INSTANCE_BOOT_MAX + 1];
    char udp[GW_INSTANCE_UDP_MAX + 1]; /* "" when not given (gone) */
    uint64_t started_ms;               /* 0 when not given */
    enum gw_instance_state state;
    unsigned sessions;
    unsigned devices;
};

/*
 * An instance name or boot id: 1..max bytes of letters, digits, '.', '_',
 * '-' (a topic level without wildcards, and a JSON string without
 * escapes).
 */
bool gw_instance_name_valid(const char *s, size_t max);

/*
 * Parses buf[0..len). Returns 0; GW_ETOOBIG, GW_EUTF8, GW_EMALFORMED (not
 * one JSON object); GW_EPROTO when "name" or "boot" is missing or not a
 * valid name, "state" is not running/draining/gone, a running or draining
 * record has no "udp" or "started_ms", or a number is not a non-negative
 * integer in range. *out is zeroed on failure.
 */
GW_MUST_CHECK int gw_instance_record_parse(const char *buf, size_t len,
                                           struct gw_instance_record *out);

/*
 * Writes r as JSON into buf (NUL-terminated). A gone record carries only
 * name, boot and state. Returns the length, GW_EINVAL for a record that
 * would not parse back, GW_ENOSPC when cap is too small.
 */
GW_MUST_CHECK int gw_instance_record_format(const struct gw_instance_record *r,
                                            char *buf, size_t cap);

/*
 * The rendezvous score of (instance name, client id): a fixed, well-mixed
 * 64-bit hash, the same on every instance and every platform. A device's
 * owner is the candidate with the highest score (ties: the smaller name).
 */
uint64_t gw_rendezvous_score(const char *name, const char *client_id);

/* The index of client_id's owner among names[0..n), or -1 when n is 0. */
int gw_rendezvous_pick(const char *const *names, size_t n,
                       const char *client_id);

#endif /* GW_CODEC_INSTANCE_RECORD_H */
