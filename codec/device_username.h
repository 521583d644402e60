/*
 * The MQTT username the OTA endpoint hands a device (docs/protocol.md
 * section 1): base64 of {"ip":"<peer>"} as the xiaozhi manager makes it,
 * with "b":<binding id> added when the identity was bound, so that the
 * password (which covers the username) vouches for the binding too.
 */
#ifndef GW_CODEC_DEVICE_USERNAME_H
#define GW_CODEC_DEVICE_USERNAME_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* Binding ids are JSON integers the gateway and JavaScript agree on. */
#define GW_DEVICE_USERNAME_BINDING_MAX 9007199254740992ULL /* 2^53 */
/* Longest peer text taken: any IPv6 literal with a scope fits. */
#define GW_DEVICE_USERNAME_PEER_MAX 63
/* base64 of the longest JSON: {"ip":"<63>","b":<16 digits>} is 93 bytes. */
#define GW_DEVICE_USERNAME_MAX 124

/*
 * Writes the username of a device seen at peer (an address text; a
 * "::ffff:" prefix of an IPv4-mapped address is left out) with binding id
 * binding_id (0: none, the lab form without "b") and a NUL to out (cap
 * bytes; GW_DEVICE_USERNAME_MAX + 1 always suffice). Returns the length
 * written, GW_EINVAL (peer NULL, longer than GW_DEVICE_USERNAME_PEER_MAX,
 * holding '"', '\', a control character or a byte outside ASCII, or
 * binding_id over
 * GW_DEVICE_USERNAME_BINDING_MAX) or GW_ENOSPC.
 */
GW_MUST_CHECK int gw_device_username_make(const char *peer, uint64_t binding_id,
                                          char *out, size_t cap);

/*
 * The binding id in the len bytes of username (no NUL needed). Returns 0
 * with *id the binding id, or 0 with *id 0 when the username is not one
 * of ours (not padded standard base64 of a JSON object, or longer than
 * GW_DEVICE_USERNAME_MAX) or has no "b"; GW_EMALFORMED (with *id 0) when
 * "b" is there but not one integer 1..GW_DEVICE_USERNAME_BINDING_MAX;
 * GW_EINVAL for a NULL id or a NULL username with len > 0.
 */
GW_MUST_CHECK int gw_device_username_binding(const char *username, size_t len,
                                             uint64_t *id);

#endif /* GW_CODEC_DEVICE_USERNAME_H */
