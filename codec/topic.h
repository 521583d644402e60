/*
 * MQTT topic helpers for the gateway's per-device topics: capturing the
 * client id from the '+' level of a subscription pattern
 * ("devices/+/up"), and filling "{client_id}" into a publish template
 * ("devices/{client_id}/down").
 */
#ifndef GW_CODEC_TOPIC_H
#define GW_CODEC_TOPIC_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/*
 * Matches topic (topic_len bytes, not NUL-terminated) against pattern,
 * whose levels are literal or a single '+'. On a match, *cap / *cap_len
 * point at the level that matched the first '+'. A '+' never matches an
 * empty level here: a client id cannot be empty. Returns 0 or GW_ENOENT.
 */
GW_MUST_CHECK int gw_topic_capture(const char *pattern, const char *topic,
                                   size_t topic_len, const char **cap,
                                   size_t *cap_len);

/*
 * Writes template with "{client_id}" replaced by client_id (a valid topic
 * level) into out. Returns 0, GW_EINVAL (no placeholder) or GW_ENOSPC.
 */
GW_MUST_CHECK int gw_topic_format(const char *template_, const char *client_id,
                                  char *out, size_t cap);

#endif /* GW_CODEC_TOPIC_H */
