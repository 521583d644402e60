/*
 * The hello handshake (docs/protocol.md sections 3 and 6): device hello in,
 * backend hello out, backend hello reply in, server hello out, and the
 * server hello as the firmware (v2.4) checks it, for the simulated device.
 */
#ifndef GW_CODEC_HELLO_H
#define GW_CODEC_HELLO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/error.h"

/* Longest session_id taken from a backend; uuid4 text is 36. */
#define GW_SESSION_ID_MAX 128

/* Longest udp.server a server hello may carry (a DNS name is <= 253). */
#define GW_HELLO_HOST_MAX 253

/* Opus stream parameters as the hello's audio_params carries them. */
struct gw_audio_params {
    char format[16];        /* "opus" in practice; NUL-terminated */
    int32_t sample_rate;    /* Hz: 8000, 12000, 16000, 24000 or 48000 */
    int32_t channels;       /* 1 or 2 */
    int32_t frame_duration; /* ms: 5, 10, 20, 40, 60, 80, 100 or 120 */
};

/*
 * A validated device hello. Everything the backend hello forwards is kept:
 * known fields as checked values, the rest as owned cJSON copies.
 */
struct gw_device_hello {
    int32_t version;              /* 1..3; MQTT firmware always sends 3 */
    struct gw_audio_params audio; /* uplink parameters (defaults if absent) */
    bool has_audio;               /* the hello carried audio_params */
    unsigned mcp : 1;             /* features.mcp was true */
    unsigned aec : 1;             /* features.aec was true (server AEC) */
    unsigned glyph_push : 1;      /* features.glyph_push was true */
    cJSON *features;    /* owned copy of the object, NULL when absent */
    cJSON *audio_extra; /* owned object: audio_params members other than
                           the four known ones (play_buffer_duration...),
                           NULL when there are none */
    cJSON *extra;       /* owned object: top-level members other than
                           type/version/transport/features/audio_params/
                           session_id (text_font...), in the device's
                           order, without the reserved ones; NULL when
                           there are none */
};

/*
 * Whether a top-level hello member names something the gateway derives
 * from the device's login: client_id, device_id, mac, uuid, group_id,
 * username, authorization, x-forwarded-for, protocol_version, matched
 * without case, '-' or '_'. A device hello's reserved members are dropped,
 * so the backend hears the device's identity from the gateway alone (the
 * upgrade headers, docs/protocol.md section 6.2); other unknown members
 * still pass.
 */
bool gw_hello_member_reserved(const char *name);

/*
 * Validates a device hello (root from gw_envelope_parse) per docs/protocol.md
 * section 3: type "hello"; transport "udp"; version an integer 1..3;
 * features, if present, an object whose mcp/aec/glyph_push are booleans;
 * audio_params, if present, an object whose members, each optional, are
 * format (string "opus"), sample_rate, channels, frame_duration (integers
 * from the sets above); text_font, if present, an object; session_id, if
 * present, a string (ignored: the device clears it before a hello);
 * reserved members (gw_hello_member_reserved) dropped.
 * Without audio_params the firmware's own uplink (opus/16000/1/60) is
 * assumed and has_audio is false; a missing member takes the same default.
 * A known member given twice is refused. Returns 0, GW_EPROTO, GW_ENOMEM,
 * GW_EINVAL. On failure *out is empty and needs no free.
 */
GW_MUST_CHECK int gw_device_hello_parse(const cJSON *root,
                                        struct gw_device_hello *out);

/* Frees the owned copies and empties h; safe to call twice. */
void gw_device_hello_free(struct gw_device_hello *h);

/*
 * Builds the first message to the backend (docs/protocol.md section 6), in this
 * order: {"type":"hello","version":2,"transport":"websocket",
 * "audio_params":{format,sample_rate,channels,frame_duration, then the
 * device's other audio_params members},"features":<device's, omitted when
 * it sent none>, then the device's other top-level members (text_font...)
 * in its order}. audio_params is always sent (the defaults when the device
 * sent none) so the backend knows what uplink to decode. The Node gateway
 * drops text_font; forwarding it keeps glyph push working. Returns a heap
 * string (free with cJSON_free) of *out_len bytes, or NULL if out of
 * memory or h is NULL.
 */
char *gw_backend_hello_build(const struct gw_device_hello *h, size_t *out_len);

/*
 * Reads the backend's hello reply: type "hello"; session_id a string of
 * 1..GW_SESSION_ID_MAX printable ASCII bytes other than '"' and '\'
 * (firmware concatenates it into its messages without escaping, so either
 * would break every later device message); transport, if present,
 * "websocket"; audio_params optional, each member optional and checked as
 * for the device hello (format any string < 16 bytes) with the firmware's
 * downlink defaults opus/24000/1/60. session_id gets the NUL-terminated id
 * (GW_ENOSPC if sid_cap is too small). Returns 0, GW_EPROTO, GW_ENOSPC,
 * GW_EINVAL; on failure session_id is "" and *audio is untouched.
 */
GW_MUST_CHECK int gw_backend_hello_parse(const cJSON *root, char *session_id,
                                         size_t sid_cap,
                                         struct gw_audio_params *audio);

/*
 * Writes exactly, in this key order:
 * {"type":"hello","transport":"udp","session_id":"<sid>","audio_params":
 * {"format":"opus","sample_rate":N,"channels":N,"frame_duration":N},"udp":
 * {"server":"<host>","port":N,"encryption":"aes-128-ctr","key":"<32 hex>",
 * "nonce":"<32 hex>"}} and a NUL into out (cap bytes); *out_len excludes
 * the NUL. Strings are JSON-escaped; format is always "opus" (the device
 * decodes nothing else). Refuses NULL arguments, an empty host, port 0 and
 * audio values outside the sets above (GW_EINVAL), non-UTF-8 strings
 * (GW_EUTF8) and a short buffer (GW_ENOSPC). Older firmware crashes on a
 * partial hello, so on any failure out holds "".
 */
GW_MUST_CHECK int gw_server_hello_build(const char *session_id,
                                        const struct gw_audio_params *audio,
                                        const char *server_host, uint16_t port,
                                        const uint8_t key[16],
                                        const uint8_t nonce[16], char *out,
                                        size_t cap, size_t *out_len);

/* A server hello as the device understood it. */
struct gw_server_hello {
    char session_id[GW_SESSION_ID_MAX + 1]; /* "" when absent */
    bool has_session_id;                    /* session_id was present */
    char server[GW_HELLO_HOST_MAX + 1];     /* udp.server */
    uint16_t port;                          /* udp.port, 1..65535 */
    uint8_t key[16];                        /* AES-128 key */
    uint8_t nonce[16];                      /* header template / IV */
    int32_t sample_rate;    /* downlink rate, 24000 when absent */
    int32_t frame_duration; /* downlink frame ms, 60 when absent */
};

/*
 * Applies the checks of firmware v2.4 (anchor-device-firmware.md 3.2) and
 * a few stricter ones, so that a gateway passing it passes every firmware:
 * type "hello"; transport the string "udp"; udp an object with server a
 * non-empty string (<= GW_HELLO_HOST_MAX bytes), port an integer 1..65535,
 * key and nonce strings of hex decoding to exactly 16 bytes (any case);
 * encryption ignored; session_id optional string (<= GW_SESSION_ID_MAX);
 * audio_params optional object whose sample_rate (positive integer) and
 * frame_duration (one of the set above) are optional; other members are
 * ignored. Returns 0, GW_EPROTO, GW_EINVAL; on failure no key or address
 * is left in *out.
 */
GW_MUST_CHECK int gw_server_hello_parse(const cJSON *root,
                                        struct gw_server_hello *out);

#endif /* GW_CODEC_HELLO_H */
