/*
 * Device MQTT client ids (docs/protocol.md section 1): GROUP@@@MAC@@@UUID, or
 * the legacy GROUP@@@MAC, split into parts that point into the caller's buffer.
 * The id becomes a topic level (devices/<client_id>/up), so ids that could
 * not be one are refused.
 */
#ifndef GW_CODEC_CLIENT_ID_H
#define GW_CODEC_CLIENT_ID_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* Real ids are about 67 bytes (group, 17-byte MAC, 36-byte uuid). */
#define GW_CLIENT_ID_MAX 128
/* "a0_85_e3_f4_49_34": six hex pairs joined by '_'. */
#define GW_CLIENT_ID_MAC_PART_LEN 17

/* A parsed id. Pointers are into the parsed buffer and not NUL-terminated. */
struct gw_client_id {
    const char *group;    /* part 1, never empty (e.g. "GID_test") */
    size_t group_len;     /* bytes at group */
    const char *mac_part; /* part 2 as sent, GW_CLIENT_ID_MAC_PART_LEN bytes */
    const char *uuid;     /* part 3; NULL for a legacy two-part id */
    size_t uuid_len;      /* bytes at uuid; 0 for a legacy id */
    char mac[18];         /* "a0:85:e3:f4:49:34", lowercase, NUL-terminated */
};

/*
 * Parses the len bytes at buf (no NUL needed). Returns 0 and fills *out,
 * which then points into buf, or (in the order checked):
 *   GW_EINVAL      buf or out is NULL
 *   GW_EMALFORMED  empty id
 *   GW_ETOOBIG     longer than GW_CLIENT_ID_MAX bytes
 *   GW_EUTF8       not well-formed UTF-8
 *   GW_EPROTO      not usable as a topic level (see gw_client_id_topic_safe)
 *   GW_EMALFORMED  not two or three "@@@"-separated parts, empty group,
 *                  MAC part not six hex pairs joined by '_' (either case),
 *                  or an empty uuid in the three-part form
 * The group and uuid may contain any other character, single '@' included.
 * *out is written only on success.
 *
 * The Node gateway differs: it checks the MAC only in two-part ids, and
 * there accepts lowercase only; it passes the MAC's case through to the
 * backend's device-id header, where mac here is always lowercase; and,
 * being its own broker, it has no topic-level rule.
 */
GW_MUST_CHECK int gw_client_id_parse(const char *buf, size_t len,
                                     struct gw_client_id *out);

/*
 * True if the len bytes at buf can be one level of a topic that libmosquitto
 * will publish to: 1..65535 bytes of well-formed UTF-8 without '/', '+',
 * '#', U+0000, other control characters (U+0001..U+001F, U+007F..U+009F)
 * or Unicode non-characters, all of which libmosquitto refuses in a topic.
 * Usable for any id, the gateway's own included.
 */
bool gw_client_id_topic_safe(const char *buf, size_t len);

#endif /* GW_CODEC_CLIENT_ID_H */
