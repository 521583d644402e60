/*
 * The revocation control message the gateway account publishes to the
 * broker plugin on ota.revoke_topic / plugin_opt_revoke_topic
 * (docs/protocol.md section 1):
 *
 *   {"revoke":[["<client id>",<below>],...]}
 *
 * Each entry says: credentials of that device client id whose binding id
 * (codec/device_username.h) is below <below> are no longer good. The
 * packer splits any number of entries into messages that each fit the
 * broker's packet limit; the parser is bounded and refuses a message whole
 * when any part of it is wrong.
 */
#ifndef GW_CODEC_REVOCATION_H
#define GW_CODEC_REVOCATION_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* Largest message parsed; far above the broker's usual 64 KiB limit. */
#define GW_REVOCATION_MAX_LEN (1024 * 1024)
/* below is 1..2^53, an integer JSON and JavaScript agree on. */
#define GW_REVOCATION_BELOW_MAX 9007199254740992ULL
/* {"revoke":[]} around the entries. */
#define GW_REVOCATION_OVERHEAD 13

struct gw_revocation {
    const char *client_id; /* a device client id (gw_client_id_parse) */
    uint64_t below;        /* 1..GW_REVOCATION_BELOW_MAX */
};

/* Called with each message packed (not NUL-terminated); returns 0, or a
 * negative GW_E* code that stops the packing. */
typedef int (*gw_revocation_emit_fn)(void *arg, const char *msg, size_t len);

/* Called with each entry parsed (client_id NUL-terminated, valid for the
 * call only); returns 0, or a negative GW_E* code that stops the calls. */
typedef int (*gw_revocation_entry_fn)(void *arg, const char *client_id,
                                      uint64_t below);

/*
 * Packs the n entries, in order, into as few messages of at most max_bytes
 * (GW_REVOCATION_OVERHEAD < max_bytes <= GW_REVOCATION_MAX_LEN) as they
 * fill in turn, and calls emit with each. Every entry is checked before
 * the first emit, so a bad list emits nothing. Returns the number of
 * messages (0 for n == 0); GW_EINVAL for a bad argument, a client id that
 * gw_client_id_parse refuses, or a below out of range; GW_ETOOBIG for an
 * entry that does not fit a message alone; GW_ENOMEM; or emit's error.
 */
GW_MUST_CHECK int gw_revocation_pack(const struct gw_revocation *entries,
                                     size_t n, size_t max_bytes,
                                     gw_revocation_emit_fn emit, void *arg);

/*
 * Parses one message from buf[0..len) (no NUL needed) and calls on_entry
 * for each entry, in order, once the whole message is checked. Returns the
 * number of entries; GW_EINVAL (NULL buf with len > 0, NULL on_entry);
 * GW_ETOOBIG (over GW_REVOCATION_MAX_LEN); GW_EUTF8; GW_EMALFORMED (not
 * one JSON object); GW_EPROTO ("revoke" missing, repeated or not an
 * array; an entry not a [client id, below] pair; a client id that
 * gw_client_id_parse refuses; a below not an integer
 * 1..GW_REVOCATION_BELOW_MAX); or on_entry's error (the calls stop
 * there). Other members are ignored, for later additions.
 */
GW_MUST_CHECK int gw_revocation_parse(const char *buf, size_t len,
                                      gw_revocation_entry_fn on_entry,
                                      void *arg);

#endif /* GW_CODEC_REVOCATION_H */
