/*
 * The simulated device of hybridgw-sim: an MQTT+UDP client that behaves as
 * xiaozhi-esp32 firmware 2.4 does, strict checks included, so that passing
 * against it means passing against a device. Many share one libuv loop.
 */
#ifndef GW_SIM_DEVICE_H
#define GW_SIM_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "codec/udp_header.h"
#include "common/error.h"

/* Which MCP server the device runs. */
enum gw_sim_mcp_profile {
    GW_SIM_MCP_STOCK, /* the xiaozhi firmware's tools-only server */
    GW_SIM_MCP_ESP    /* an esp-mcp-like server (sim_espmcp.h) */
};

/* The firmware's listening modes (the `mode` of listen start). */
enum gw_sim_mode {
    GW_SIM_MODE_AUTO,    /* server VAD ends turns; mic off while speaking */
    GW_SIM_MODE_MANUAL,  /* push to talk: listen stop after the speech */
    GW_SIM_MODE_REALTIME /* mic stays on while speaking (AEC builds) */
};

/* How the conversation ends once its turns are done. */
enum gw_sim_end {
    GW_SIM_END_GOODBYE, /* the device closes the channel with a goodbye */
    GW_SIM_END_SERVER,  /* keep listening until the server says goodbye */
    GW_SIM_END_NONE     /* drop the channel silently, as after a timeout */
};

/* Why a downlink datagram was not played; each has a counter. */
enum gw_sim_drop {
    GW_SIM_DROP_SHORT,  /* under 16 bytes */
    GW_SIM_DROP_TYPE,   /* byte 0 != 0x01 */
    GW_SIM_DROP_LENGTH, /* 16 + payload_len != datagram length */
    GW_SIM_DROP_TOOBIG, /* payload over 1484 bytes */
    GW_SIM_DROP_REPLAY, /* sequence <= last accepted (0 included) */
    GW_SIM_DROP_IDLE,   /* valid, but not in speaking state */
    GW_SIM_DROP_QUEUE,  /* decode queue (40 frames) full: not paced */
    GW_SIM_DROP_OPUS,   /* decrypted payload is not decodable Opus */
    GW_SIM_DROP_COUNT_
};

/* Short name of a drop reason ("replay", "queue"...), never NULL. */
const char *gw_sim_drop_name(enum gw_sim_drop reason);

/* True for the reasons a correct gateway never causes. */
bool gw_sim_drop_is_violation(enum gw_sim_drop reason);

/* --- Downlink checks (firmware 2.4, anchor section 4.3), pure ---------- */

/* The downlink receive state the firmware keeps per hello. */
struct gw_sim_downlink {
    uint32_t last_seq;                  /* last accepted; 0 after a hello */
    uint64_t accepted;                  /* passed every check */
    uint64_t gaps;                      /* accepted after a sequence gap */
    uint64_t lost;                      /* sequence numbers skipped */
    uint64_t drops[GW_SIM_DROP_COUNT_]; /* by reason */
};

/* A new hello: the firmware resets the sequence; counters are kept. */
void gw_sim_downlink_reset(struct gw_sim_downlink *dl);

/*
 * Checks one whole datagram in the firmware's order: < 16 bytes, type,
 * 16 + payload_len == len, payload <= 1484, sequence > last (a gap is only
 * counted). On success fills *h, advances last_seq and returns 0; else
 * counts the drop and returns GW_ETRUNC, GW_EPROTO, GW_EMALFORMED,
 * GW_ETOOBIG or GW_EREPLAY. The payload stays at buf + 16, encrypted.
 */
GW_MUST_CHECK int gw_sim_downlink_check(struct gw_sim_downlink *dl,
                                        const uint8_t *buf, size_t len,
                                        struct gw_udp_header *h);

/* --- MCP server of the device (anchor section 9), pure ----------------- */

/* The longest description --mcp-tool-bytes gives a synthetic tool (a
 * tools/list page of the firmware stays within 8000 bytes). */
#define GW_SIM_TOOL_BYTES_MAX 4000

/* The device's MCP server state; set up with gw_sim_mcp_defaults. */
struct gw_sim_mcp {
    int volume;           /* speaker volume, set by set_volume */
    int brightness;       /* screen brightness, set by set_brightness */
    uint32_t extra_tools; /* synthetic tools added for paging tests */
    uint32_t extra_description_bytes; /* their descriptions' size; 0: short */
    bool echo_tool;        /* board tool self.sim.echo (whose answer is it) */
    bool silent;           /* never answer anything (timeout tests) */
    uint32_t ignore_first; /* initialize and tools/list left unanswered */
    bool vision_seen;      /* initialize carried capabilities.vision */
    char vision_url[128];  /* its url, "" if none or too long */
    /* Its token, "" if none or too long. */
    char vision_token[128];
    uint64_t answered;    /* replies produced */
    uint64_t ignored;     /* requests dropped as the firmware drops them */
    uint64_t initializes; /* initialize requests answered */
    uint64_t lists;       /* tools/list requests answered (pages) */
    uint64_t calls;       /* tools/call requests answered */
    uint64_t cancelled;   /* notifications/cancelled seen (no reply) */
};

/* Page limit of tools/list, as the firmware measures it. */
#define GW_SIM_MCP_PAGE_BYTES 8000

void gw_sim_mcp_defaults(struct gw_sim_mcp *m);

/*
 * Handles one JSON-RPC message (the `payload` of an mcp envelope) as the
 * firmware does: requests need jsonrpc "2.0", a string method, params
 * absent or an object and a numeric id, else they are dropped silently;
 * notifications get no reply. Methods: initialize, tools/list (cursor
 * paging near 8000 bytes, withUserTools), tools/call. Errors are
 * {"error":{"message":...}} without code. Sets *reply to a heap string
 * (free()) of *reply_len bytes, or NULL when the device stays silent.
 * Returns 0 or GW_ENOMEM.
 */
GW_MUST_CHECK int gw_sim_mcp_handle(struct gw_sim_mcp *m, const cJSON *msg,
                                    char **reply, size_t *reply_len);

/* The stock tools as tools/list shows them (every page at once), the
 * user-only ones with with_user; a JSON array, or NULL on OOM. */
cJSON *gw_sim_mcp_tools_json(const struct gw_sim_mcp *m, bool with_user);

/* --- Uplink audio ------------------------------------------------------ */

/*
 * Opus frames encoded once per process (16 kHz mono, 60 ms, VBR, DTX,
 * complexity 0, as the firmware encodes) and replayed by every device: a
 * speech-like part and a silence part whose DTX packets are tiny.
 */
struct gw_sim_clip;

/* Encodes speech_frames of a voiced test signal, then silence. Returns 0,
 * GW_EINVAL, GW_ENOMEM or GW_EOPUS. */
GW_MUST_CHECK int gw_sim_clip_create(uint32_t speech_frames,
                                     struct gw_sim_clip **out);
void gw_sim_clip_destroy(struct gw_sim_clip *clip);

/* --tone: clips created after this have a steady sine of hz (0: the
 * speech-like signal) in their voiced frames. */
void gw_sim_clip_set_tone(uint32_t hz);

/* --- The device -------------------------------------------------------- */

struct gw_sim_device;
struct gw_sim_esp;

/* Per device outcome; counters are live while the device runs. */
struct gw_sim_result {
    bool ok;                /* the conversation met every expectation */
    bool done;              /* the run has finished */
    char reason[256];       /* first failure, "" when ok */
    bool mqtt_connected;    /* CONNACK seen at least once */
    bool mqtt_up;           /* the MQTT connection is up now */
    uint32_t mqtt_connects; /* CONNACKs, reconnections included */
    /* Wall clock (Unix ms) of the last CONNACK and of the last initialize
     * answered; 0 if none yet (a fleet bench times a storm with them). */
    double last_connect_unix_ms, last_initialize_unix_ms;
    double connect_ms; /* init to CONNACK; NAN if never (all below) */
    double hello_ms;   /* device hello to valid server hello */
    /* Per-step latencies of the first turn, ms after the end of the
     * device's speech (negative if earlier). */
    double stt_ms, tts_start_ms, first_audio_ms, tts_stop_ms;
    double goodbye_ms;    /* server goodbye after the last tts stop */
    char session_id[129]; /* from the server hello */
    char stt[256];        /* text of the first stt */
    uint32_t turns_done;  /* completed turns (tts stop, playback drained) */
    uint32_t sessions;    /* conversations begun (hellos sent) */
    /* Server hellos: valid and answering ours, invalid (ignored), extra. */
    uint32_t hellos, hello_invalid, hello_duplicate;
    uint32_t stt_count, llm_count, tts_start, tts_stop, tts_sentence;
    uint32_t alert_count, system_count, custom_count, other_count;
    /* Pushed messages the firmware would drop, and the last ones taken. */
    uint32_t alert_ignored, system_ignored, custom_ignored, reboots;
    char alert_status[64], alert_message[160], alert_emotion[32];
    char custom_payload[256]; /* unformatted JSON, cut to fit */
    uint32_t bad_json;        /* unparsable messages, dropped */
    uint32_t oversize;        /* messages over 8192 bytes (accepted) */
    uint64_t oversize_bytes;  /* and their bytes */
    uint32_t goodbye_ignored; /* goodbyes with another session_id */
    bool goodbye_received;    /* the server ended the session */
    bool goodbye_sent;        /* the device ended it */
    bool goodbye_replied;     /* a goodbye answered ours: a gateway bug */
    uint32_t mcp_answered, mcp_ignored;
    uint32_t mcp_initializes, mcp_lists, mcp_calls, mcp_cancelled;
    /* MQTT connections after the first (each a new MCP session) */
    uint32_t mqtt_reconnects;
    bool mcp_vision;          /* an initialize carried capabilities.vision */
    char mcp_vision_url[128]; /* its url */
    /* Its token. */
    char mcp_vision_token[128];
    /* The esp profile's server (sim_espmcp.h), NULL in stock mode; valid
     * as long as the result. */
    const struct gw_sim_esp *mcp_esp;
    uint32_t mcp_violations; /* esp: strict MCP checks failed */
    uint64_t up_packets, up_bytes, up_send_errors;
    uint64_t up_replayed, up_forged; /* test traffic, not in the counts */
    uint64_t down_datagrams;         /* every datagram read */
    uint64_t down_accepted;          /* passed the strict checks */
    uint64_t down_played;            /* decoded (or inspected) and counted */
    uint64_t down_lost;              /* skipped sequence numbers, and
                                        frames dropped before tts start */
    uint64_t drops[GW_SIM_DROP_COUNT_];
    double jitter_ms;     /* RFC 3550 style, vs each packet's duration */
    double max_jitter_ms; /* largest single deviation */
    char up_sha256[65];   /* of the plaintext Opus payloads sent */
    char down_sha256[65]; /* of the plaintext Opus payloads played */
    /* With tone_hz: the strongest frequency of the played audio (decoded,
     * first 2 s after its first 2 frames) and its share of the power. */
    double down_tone_hz, down_tone_purity;
    /* With call: what the device saw of calls. */
    struct gw_sim_call_result {
        uint32_t wakeups;    /* self.remote_wakeup calls taken */
        uint32_t accepted;   /* call_accepted messages */
        uint64_t tx_frames;  /* numbered frames sent */
        uint64_t rx_frames;  /* numbered frames received, bit-exact */
        uint64_t rx_bad;     /* numbered, but not the bytes sent */
        uint64_t rx_gaps;    /* numbered, but not the next number */
        uint64_t rx_silence; /* other frames that decode to silence */
        uint64_t rx_other;   /* other frames with sound in them */
        uint32_t rx_first;   /* number of the first one received */
        uint32_t rx_last;    /* and of the last */
    } call;
};

/* The run ended; r stays valid until the device is closed. */
typedef void (*gw_sim_device_done_cb)(struct gw_sim_device *d,
                                      const struct gw_sim_result *r, void *arg);

/* One transcript line, t_ms after init. */
typedef void (*gw_sim_device_event_cb)(struct gw_sim_device *d, double t_ms,
                                       const char *line, void *arg);

typedef void (*gw_sim_device_close_cb)(struct gw_sim_device *d, void *arg);

struct gw_sim_device_options {
    const char *host;            /* broker */
    int port;                    /* broker port (8883 means TLS) */
    bool tls;                    /* TLS on any port (tests) */
    const char *ca_file;         /* CA for the broker; NULL: system */
    const char *client_id;       /* NULL: GID_test@@@<mac>@@@<uuid> */
    const char *username;        /* NULL: base64 of {"ip":"127.0.0.1"} */
    const char *password;        /* NULL: made from key, or none */
    const char *key;             /* device credential key, or NULL */
    const char *publish_topic;   /* "device-server"; {client_id} expands */
    const char *subscribe_topic; /* NULL: stock firmware, no SUBSCRIBE */
    int keepalive_s;             /* 240, as the firmware */
    enum gw_sim_mode mode;       /* listen start mode */
    enum gw_sim_end end;         /* what follows the last turn */
    uint32_t turns;              /* conversation turns; 0 = until stopped */
    uint32_t sessions;      /* conversations on one connection; 0 means 1 */
    uint32_t speech_frames; /* speech frames per turn; 0 = endless */
    uint32_t frame_ms;      /* uplink frame interval: 60 real time */
    uint32_t tone_hz;       /* speech is this sine; downlink measured */
    bool aec;               /* features.aec, echo downlink stamps */
    bool glyph_push;        /* features.glyph_push true, and a text_font */
    bool wake_word;         /* wake-word burst and listen detect */
    bool require_reply;     /* ok needs stt, tts and played audio */
    bool decode;            /* decode each played frame (libopus) */
    uint32_t abort_after;   /* played frames before abort; 0 never */
    uint32_t replay_every;  /* send every Nth uplink twice; 0 never */
    uint32_t forge_every;   /* after every Nth uplink, a forgery from
                               another port; 0 never */
    /* A broken UDP path, for the gateway's doctor: */
    bool no_udp;             /* never send uplink (a firewall eats it) */
    bool udp_wrong_key;      /* encrypt with a keystream not the hello's */
    bool udp_stale_ssrc;     /* name an ssrc not the hello's */
    uint32_t udp_rebind;     /* after N packets, a new source port; 0 never */
    const char *udp_send_to; /* "a.b.c.d:port" instead of the hello's */
    uint32_t connect_timeout_ms; /* MQTT CONNACK wait: 10000 */
    uint32_t hello_timeout_ms;   /* server hello wait: 10000 */
    uint32_t turn_timeout_ms;    /* listen start to tts stop: 60000 */
    uint32_t channel_timeout_ms; /* nothing received: 120000 */
    uint32_t end_timeout_ms;     /* wait for the server's goodbye */
    uint32_t linger_ms;          /* after our goodbye, watch for a reply */
    uint32_t duration_ms;        /* stop the run after this; 0 = never */
    uint32_t mcp_extra_tools;    /* synthetic tools for paging tests */
    uint32_t mcp_tool_bytes;     /* their descriptions' size (big catalogs) */
    bool mcp_silent;             /* never answer MCP */
    uint32_t mcp_ignore_first;   /* initialize, tools/list left unanswered */
    bool mcp_echo_tool;          /* board tool self.sim.echo */
    uint32_t mcp_call_delay_ms;  /* tools/call answered this late, one
                                    at a time in arrival order; 0 = at
                                    once */
    enum gw_sim_mcp_profile mcp_profile; /* stock or esp-mcp-like */
    uint32_t mcp_update_ms;              /* esp: resources/updated period */
    uint32_t mcp_change_after_ms;        /* esp: list changes after the
                                            first initialize; 0 never */
    uint32_t mcp_big_resource_bytes;     /* esp: device://big.txt size */
    const char *mcp_remote[16];          /* esp: ENDPOINT:TOOL:{json} calls made
                                            once the first initialize arrived */
    size_t n_mcp_remote;
    /* extra tools from the first MQTT reconnect on; UINT32_MAX: the same */
    uint32_t mcp_reconnect_tools;
    bool mcp_remote_init;      /* esp: initialize each endpoint first */
    bool mcp_remote_progress;  /* esp: remote calls carry a progress token */
    bool mcp_string_progress;  /* esp: numeric tokens echoed as strings */
    bool mcp_capability_gate;  /* esp: asks only what the client declared */
    bool mcp_engine_lifecycle; /* --mcp-engine esp-mcp: its lifecycle */
    bool call; /* device calls (sim_device_call.c): remote wake-up,
                  numbered uplink frames, received call audio checked */
    bool idle; /* connect and stay online with no conversation until a
                  wake-up (gw_sim_device_wake) or a stop; sleeps again
                  after each conversation */
    const struct gw_sim_clip *clip; /* uplink audio, required */
    FILE *packet_log;               /* per-packet lines, or NULL */
    gw_sim_device_done_cb on_done;
    gw_sim_device_event_cb on_event; /* transcript, may be NULL */
    void *arg;                       /* for both callbacks */
};

/* Fills the firmware's defaults (one auto turn of 50 frames...). */
void gw_sim_device_options_default(struct gw_sim_device_options *o);

/*
 * Creates a device and starts it: MQTT connect, hello, turns. on_done
 * runs once, from its own loop callback, when the run ends. Returns 0,
 * GW_EINVAL, GW_ENOMEM, GW_ECRYPTO or GW_EOPUS.
 */
GW_MUST_CHECK int gw_sim_device_init(uv_loop_t *loop,
                                     const struct gw_sim_device_options *opts,
                                     struct gw_sim_device **out);

/*
 * A button press: with options.sessions > 1 (or options.idle), a device
 * whose conversation ended (or that never had one) waits, connected, for
 * this before its next hello. Ignored at any other time.
 */
void gw_sim_device_wake(struct gw_sim_device *d);

/* Ends the conversation now, as a user closing the chat (goodbye); a
 * device waiting for a wake-up just ends its run. */
void gw_sim_device_stop(struct gw_sim_device *d);

/* Closes every handle and the MQTT link, then frees the device and calls
 * cb (may be NULL). No done or event callback runs after this. */
void gw_sim_device_close(struct gw_sim_device *d, gw_sim_device_close_cb cb,
                         void *arg);

const struct gw_sim_result *gw_sim_device_result(const struct gw_sim_device *d);
const char *gw_sim_device_client_id(const struct gw_sim_device *d);

/* The result as one JSON object (heap string, cJSON_free), or NULL. */
char *gw_sim_result_json(const struct gw_sim_result *r, const char *client_id);

#endif /* GW_SIM_DEVICE_H */
