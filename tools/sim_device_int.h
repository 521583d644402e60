/*
 * What the files of the simulated device share (sim_device*.c): its state
 * and the steps one part calls in another. Private to those files; the
 * interface is sim_device.h.
 */
#ifndef GW_SIM_DEVICE_INT_H
#define GW_SIM_DEVICE_INT_H

#include <openssl/evp.h>
#include <opus/opus.h>

#include "codec/client_id.h"
#include "codec/envelope.h"
#include "codec/hello.h"
#include "crypto/aes_ctr.h"
#include "common/mqtt_link.h"
#include "tools/sim_device.h"

#define QUEUE_FRAMES 40   /* the firmware's decode queue */
#define RX_BUF       2048 /* sees oversized datagrams whole, to count them */
#define TOPIC_MAX    256
/* esp-mqtt reassembles a message of any size and the firmware parses it
 * whole (glyph_push puts up to 64 KiB of bitmaps into one tts): bounded
 * here only as far above the gateway's downlink limits as its range. */
#define MSG_PARSE_MAX (16u << 20)

/* Application states of the firmware that matter on the wire, plus the
 * simulator's own start and end. */
enum state {
    ST_CONNECTING, /* waiting for CONNACK */
    ST_HELLO,      /* hello sent, waiting for a valid server hello */
    ST_OPENING,    /* resolving and connecting the UDP socket */
    ST_LISTENING,  /* listen start sent, mic streaming */
    ST_IDLE,       /* channel open, mic off (manual mode after stop) */
    ST_SPEAKING,   /* after tts start: downlink is played */
    ST_LINGER,     /* our goodbye sent; watching for a wrongful reply */
    ST_ASLEEP,     /* conversation over, more to come: awaits a wake-up */
    ST_DONE        /* run finished */
};

/* One queued downlink frame, decrypted. */
struct play_slot {
    uint32_t ts;                      /* downlink timestamp (AEC echo) */
    uint16_t len;                     /* Opus bytes */
    uint8_t data[GW_UDP_MAX_PAYLOAD]; /* the Opus packet */
};

struct gw_sim_device {
    uv_loop_t *loop;
    struct gw_sim_device_options o; /* copied; strings below */
    char host[256];                 /* broker host */
    char client_id[GW_CLIENT_ID_MAX + 1];
    char username[256];
    char password[256];
    bool has_password;         /* password[] is to be sent */
    char pub_topic[TOPIC_MAX]; /* expanded publish topic */
    char sub_topic[TOPIC_MAX]; /* expanded, "" in stock mode */
    char subject[GW_CLIENT_ID_MAX + GW_SESSION_ID_MAX + 16]; /* log prefix */
    struct gw_mqtt_link *link; /* NULL once closed */
    uv_udp_t udp;              /* connect()ed to udp.server */
    uv_udp_t udp2;             /* --udp-rebind: the new source port */
    bool udp2_open;            /* udp2 was initialised */
    int forge_fd;              /* a second socket for forgeries, or -1 */
    struct sockaddr_in server; /* udp.server:port, for forgeries */
    uv_getaddrinfo_t resolve;  /* udp.server lookup */
    uv_timer_t uplink_timer;   /* one frame per frame_ms */
    uv_timer_t play_timer;     /* end of the sounding frame */
    uv_timer_t watchdog;       /* the current phase's deadline */
    uv_timer_t channel_timer;  /* 120 s without anything */
    uv_timer_t duration_timer; /* load runs end here */
    uv_timer_t done_timer;     /* reports the end from the loop */
    int open_handles;          /* handles and reqs to wait for */
    bool udp_open, resolving, finished, closing, stopped;
    enum state state;
    bool hello_pending; /* our hello awaits its answer */
    bool channel_open;  /* UDP connected */
    uint16_t udp_port;  /* udp.port of the hello */
    uint64_t t0_ns, hello_sent_ns, turn_start_ns, speech_end_ns, stop_ns;
    /* Session, from the server hello. */
    uint8_t key[16], nonce[16];
    char sid[GW_SESSION_ID_MAX + 1];
    int32_t sample_rate, frame_duration; /* sticky across hellos */
    uint32_t up_seq;                     /* last uplink sequence sent */
    struct gw_aes_ctr *aes;
    struct gw_sim_downlink dl;
    /* Turns. */
    uint32_t turn, turn_frame, turn_played;
    bool uplink_on, final_turn, stop_pending, aborted;
    uint64_t next_frame_ns, frame_ns;
    /* Playback: the decode queue and the frame now sounding. */
    struct play_slot *queue;
    size_t q_head, q_len;
    bool playing;
    uint64_t play_end_ns; /* when the sounding frame ends */
    OpusDecoder *dec;
    int32_t dec_rate;
    int16_t *pcm;
    int16_t *tone_pcm; /* --tone: played downlink, decoded */
    size_t tone_n, tone_skip;
    uint32_t aec_ts[3]; /* played timestamps to echo */
    size_t aec_n;
    /* Downlink arrival jitter. */
    uint64_t last_arrival_ns;
    uint64_t last_dur_ns;
    double jitter_ns;
    EVP_MD_CTX *up_md, *down_md;
    struct gw_sim_mcp mcp;
    /* tools/call requests waiting out --mcp-call-delay-ms, oldest first. */
    struct gw_sim_mcp_job *mcp_head, *mcp_tail;
    uv_timer_t mcp_timer;   /* answers the oldest one */
    struct gw_sim_esp *esp; /* --mcp-profile esp, else NULL */
    uv_timer_t esp_timer;   /* its next timer */
    struct gw_sim_result r;
    struct gw_sim_call *call; /* sim_device_call.c's state, or NULL */
    gw_sim_device_close_cb close_cb;
    void *close_arg;
    uint8_t rx[RX_BUF]; /* one datagram */
};

/* --- sim_device.c: life cycle and reporting ---------------------------- */

double gw_sim_dev_ms_since(uint64_t from_ns, uint64_t to_ns);
const char *gw_sim_dev_state_name(enum state s);
void gw_sim_dev_set_subject(struct gw_sim_device *d);

/* One transcript line, unless closing. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void gw_sim_dev_event(struct gw_sim_device *d, const char *fmt, ...);

/* Ends the run with a reason; the first reason wins. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void gw_sim_dev_fail(struct gw_sim_device *d, const char *fmt, ...);

/* One handle or request finished closing; the last one frees. */
void gw_sim_dev_release(struct gw_sim_device *d);
void gw_sim_dev_on_closed(uv_handle_t *h);

/* --- sim_device_mqtt.c: messages --------------------------------------- */

/* Publishes to the device's topic; a failure ends the run. Returns 0 or
 * the link's error. */
int gw_sim_dev_publish(struct gw_sim_device *d, const char *msg, size_t len);

/* A device message from a format, concatenated unescaped as the firmware
 * does (the session_id was checked to need no escaping). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
int gw_sim_dev_send_msg(struct gw_sim_device *d, const char *fmt, ...);

void gw_sim_dev_on_message(struct gw_mqtt_link *link, const char *topic,
                           const uint8_t *payload, size_t len, void *arg);
void gw_sim_dev_on_state(struct gw_mqtt_link *link, bool up, void *arg);
void gw_sim_dev_send_hello(struct gw_sim_device *d);

/* Copies the MCP server's counters into the result. */
void gw_sim_dev_sync_mcp(struct gw_sim_device *d);

/* The esp profile's run ends: unanswered requests are counted. */
void gw_sim_dev_esp_finish(struct gw_sim_device *d);

/* Frees the tools/call requests still waiting (the device is going). */
void gw_sim_dev_mcp_drop_queue(struct gw_sim_device *d);

/* --- sim_device_udp.c: the audio channel ------------------------------- */

/* Opens the channel the server hello named (d->udp_port is set). */
void gw_sim_dev_udp_open(struct gw_sim_device *d, const char *server);
/* Takes the datagrams already waiting on the socket: the firmware's audio
 * task has them queued before its MQTT task reads a later tts stop, even
 * when MQTT runs seconds behind (large messages). */
void gw_sim_dev_udp_drain(struct gw_sim_device *d);
void gw_sim_dev_udp_close(struct gw_sim_device *d);
void gw_sim_dev_uplink_start(struct gw_sim_device *d);

/* Plays queued frames one frame duration apart from start_ns. */
void gw_sim_dev_play_pump(struct gw_sim_device *d, uint64_t start_ns);

/* Copies the downlink check counters into the result. */
void gw_sim_dev_sync_downlink(struct gw_sim_device *d);

/* --- sim_device_turns.c: turns and the end of the run ------------------ */

/* Arms the current phase's deadline; 0 disarms it. */
void gw_sim_dev_watch(struct gw_sim_device *d, uint32_t ms);
void gw_sim_dev_begin_turn(struct gw_sim_device *d, bool listen_msg, bool last);
void gw_sim_dev_turn_done(struct gw_sim_device *d);
void gw_sim_dev_goodbye(struct gw_sim_device *d);
/* An alert, system or custom message (sim_device_push.c): true when it
 * was one of those and is handled. */
bool gw_sim_dev_on_push(struct gw_sim_device *d, const struct gw_envelope *env);
void gw_sim_dev_finish(struct gw_sim_device *d);
/* A conversation ended normally: finish, or sleep until the next one. */
void gw_sim_dev_conversation_over(struct gw_sim_device *d);
void gw_sim_dev_on_channel_timeout(uv_timer_t *t);

/* --- sim_device_call.c: device calls (options.call) -------------------- */
/* A tools/call self.remote_wakeup: answered, and an asleep device wakes.
 * True when the message was taken. */
bool gw_sim_dev_call_on_mcp(struct gw_sim_device *d, const cJSON *payload);
/* A message of a type the stock firmware ignores (call_accepted). */
bool gw_sim_dev_call_on_message(struct gw_sim_device *d,
                                const struct gw_envelope *env);
/* The next uplink frame: numbered, so the other side can check it. */
void gw_sim_dev_call_frame(struct gw_sim_device *d, const uint8_t **p,
                           size_t *n);
/* A decrypted downlink frame; true when it was call audio (taken). */
bool gw_sim_dev_call_on_audio(struct gw_sim_device *d, const uint8_t *opus,
                              size_t len);
void gw_sim_dev_call_free(struct gw_sim_device *d);
/* Adds "call" to a result object; false on OOM. */
bool gw_sim_call_result_json(const struct gw_sim_result *r, cJSON *o);

/* --- sim_device_checks.c and sim_device_clip.c ------------------------- */

/* The drop counter of a gw_sim_downlink_check error. */
enum gw_sim_drop gw_sim_drop_of(int err);

/*
 * Frame k of a turn: speech_frames of speech (cycling the clip), then
 * silence, whose settled part loops; speech_frames 0 = speech only,
 * silent = silence only.
 */
void gw_sim_clip_frame(const struct gw_sim_clip *c, uint32_t k,
                       uint32_t speech_frames, bool silent, const uint8_t **p,
                       size_t *n);

#endif /* GW_SIM_DEVICE_INT_H */
