/*
 * JSON envelopes of the control channel (docs/protocol.md section 5): bounded,
 * strict parsing of one message, its type and session_id, the goodbye the
 * gateway builds, and re-serialisation with the current session_id; the
 * strict object parse and member lookup the other JSON codecs share.
 */
#ifndef GW_CODEC_ENVELOPE_H
#define GW_CODEC_ENVELOPE_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "common/error.h"

/* Nesting allowed in one message. MCP payloads reach depth ~10; cJSON's
 * own limit (1000 levels of recursion) is far deeper than the stack of a
 * callback needs to risk. */
#define GW_ENVELOPE_MAX_DEPTH 32

/* Largest MCP message the gateway builds for a device; relayed and pushed
 * messages have limits.max_downlink_bytes (docs/protocol.md section 2.4). */
#define GW_ENVELOPE_DEVICE_MAX 8192

/* Message types the relay switches on; everything else is OTHER and is
 * relayed untouched. */
/* Every "type" the gateway knows, with its wire string. */
#define GW_MSG_TYPE_MAP(XX)                                                    \
    XX(HELLO, "hello")             /* handshake, both directions */            \
    XX(GOODBYE, "goodbye")         /* end of session, both directions */       \
    XX(LISTEN, "listen")           /* device: start/stop/detect */             \
    XX(ABORT, "abort")             /* device: interrupt TTS */                 \
    XX(MCP, "mcp")                 /* JSON-RPC carried both ways */            \
    XX(STT, "stt")                 /* backend: recognised text */              \
    XX(LLM, "llm")                 /* backend: emotion */                      \
    XX(TTS, "tts")                 /* backend: start/stop/sentence_start */    \
    XX(ALERT, "alert")             /* backend: status/message/emotion */       \
    XX(SYSTEM, "system")           /* backend: command (reboot) */             \
    XX(CUSTOM, "custom")           /* backend: custom payload */               \
    XX(UDP_TIMEOUT, "udp_timeout") /* device (some forks): a goodbye */        \
    XX(IOT, "iot") /* device (firmware 1.x): legacy descriptors/states */

enum gw_msg_type {
    GW_MSG_OTHER = 0, /* unknown to the gateway (error, ping, server...) */
#define XX(name, _) GW_MSG_##name,
    GW_MSG_TYPE_MAP(XX)
#undef XX
        GW_MSG_TYPE_COUNT_
};

/* One parsed message. type and session_id point into root and live as
 * long as it does. */
struct gw_envelope {
    cJSON *root;            /* the message, always an object; owned */
    const char *type;       /* non-empty; never NULL after a parse */
    const char *session_id; /* NULL when absent; "" is a valid value */
    enum gw_msg_type kind;  /* type mapped by gw_envelope_type() */
};

/*
 * The checks of gw_envelope_parse() short of the envelope header: a
 * bounded, UTF-8, well-nested JSON object and nothing else. *out is the
 * caller's to cJSON_Delete(). Returns 0, GW_EINVAL, GW_ETOOBIG, GW_EUTF8
 * or GW_EMALFORMED (then *out is NULL).
 */
GW_MUST_CHECK int gw_json_object_parse(const char *buf, size_t len,
                                       size_t max_len, cJSON **out);

/*
 * The only member named key in obj, NULL when absent. GW_EPROTO when it
 * is repeated: cJSON keeps both and other readers may take the last, so
 * a repeated member means two things at once.
 */
GW_MUST_CHECK int gw_json_unique_member(const cJSON *obj, const char *key,
                                        const cJSON **out);

/*
 * Parses one message from buf[0..len) (no NUL needed). Order of checks:
 * len > max_len -> GW_ETOOBIG; not UTF-8 -> GW_EUTF8; nesting deeper than
 * GW_ENVELOPE_MAX_DEPTH, NUL bytes, control characters other than JSON
 * whitespace, \u0000 in strings, not JSON, not an object, or anything but
 * whitespace after the object -> GW_EMALFORMED; type missing, not a non-empty
 * string or repeated, session_id not a string or repeated -> GW_EPROTO.
 * Repeated type/session_id are refused because peers disagree on which one
 * wins. On failure env is left empty (root NULL) and needs no free.
 */
GW_MUST_CHECK int gw_envelope_parse(const char *buf, size_t len, size_t max_len,
                                    struct gw_envelope *env);

/* Frees root and empties env; safe to call twice or on an empty env. */
void gw_envelope_free(struct gw_envelope *env);

/* Maps a type string to its enum; NULL or unknown gives GW_MSG_OTHER. */
enum gw_msg_type gw_envelope_type(const char *type);

/*
 * Sets session_id to sid (replacing it in place, or appending it), or
 * removes it when sid is NULL; env->session_id follows. GW_EINVAL on an
 * empty env, GW_EUTF8 if sid is not UTF-8, GW_ENOMEM.
 */
GW_MUST_CHECK int gw_envelope_set_session_id(struct gw_envelope *env,
                                             const char *sid);

/*
 * Serialises env without whitespace into a heap string (*out, free with
 * cJSON_free) of *out_len bytes plus a NUL. Returns GW_ETOOBIG if the text
 * exceeds max_len (nothing is returned then), GW_ENOMEM, GW_EINVAL. An int
 * result rather than a bare pointer so that "too big for a device" and
 * "out of memory" stay apart.
 */
GW_MUST_CHECK int gw_envelope_print(const struct gw_envelope *env,
                                    size_t max_len, char **out,
                                    size_t *out_len);

/*
 * Writes exactly {"type":"goodbye","session_id":"<sid>"} and a NUL into
 * out (cap bytes); *out_len excludes the NUL. sid is JSON-escaped. Returns
 * GW_EINVAL (sid NULL), GW_EUTF8, GW_ENOSPC; on failure out holds "".
 */
GW_MUST_CHECK int gw_envelope_build_goodbye(const char *sid, char *out,
                                            size_t cap, size_t *out_len);

/*
 * {"session_id":sid,"type":"mcp","payload":payload} as text, the one
 * shape MCP takes both toward devices and toward backends. Returns the
 * text (cJSON_free() it) or NULL on OOM; payload is not moved.
 */
char *gw_envelope_print_mcp(const char *sid, const cJSON *payload);

/*
 * {"session_id":sid,"type":"mcp","endpoint":endpoint,"payload":payload}:
 * a message between a device and an MCP server it addresses by name
 * (docs/protocol.md section 7). NULL on OOM; payload is not moved.
 */
char *gw_envelope_print_mcp_endpoint(const char *sid, const char *endpoint,
                                     const cJSON *payload);

/*
 * Appends s[0..len) as a quoted JSON string at out[*pos], escaping quotes,
 * backslashes and control characters, and keeps out NUL-terminated.
 * Advances *pos on success. GW_EUTF8 if s is not UTF-8, GW_ENOSPC if it
 * does not fit (cap counts the NUL). Shared by the hand-built messages,
 * whose exact key order matters to strict firmware.
 */
GW_MUST_CHECK int gw_envelope_write_string(char *out, size_t cap, size_t *pos,
                                           const char *s, size_t len);

#endif /* GW_CODEC_ENVELOPE_H */
