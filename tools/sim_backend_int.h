/*
 * What the files of hybridgw-sim's mock backend share (sim_backend*.c):
 * the process, its connections, and the steps one part calls in another.
 * Private to those files; the limits others rely on are in sim_backend.h.
 */
#ifndef GW_SIM_BACKEND_INT_H
#define GW_SIM_BACKEND_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>
#include <libwebsockets.h>
#include <openssl/evp.h>
#include <opus/opus.h>
#include <uv.h>

#include "codec/audio_frame.h"
#include "tools/sim_backend.h"
#include "tools/sim_common.h"

#define URI_MAX     512  /* longest path or query kept */
#define SUBJECT_MAX 128  /* log prefix */
#define PCM_MAX     5760 /* 120 ms at 48 kHz: any packet fits */

enum auth_scheme { AUTH_NONE, AUTH_BEARER, AUTH_HMAC };

/* The command line, validated. */
struct mock_opts {
    char host[128];
    int port;
    const char *cert, *key;   /* both set: wss:// */
    enum auth_scheme auth;    /* upgrade check */
    const char *auth_secret;  /* token or HMAC secret */
    bool auth_text;           /* refuse like the server: text, then close */
    int framing;              /* -1 auto, else enum gw_framing */
    bool no_hello;            /* never answer the hello */
    int hello_delay_ms;       /* answer it late */
    int turn_frames;          /* uplink frames that end a turn; 0: stop only */
    int tts_frames;           /* downlink frames per turn */
    int tts_rate;             /* Hz of the TTS Opus stream (pcm16: PCM) */
    int pcm_tone_hz;          /* pcm16: the tone of the TTS PCM */
    bool no_hello_rate;       /* hello audio_params without sample_rate */
    int tts_stop_delay_ms;    /* after the last frame, before tts stop */
    int glyph_bytes;          /* sentence_start with glyph_push this big */
    int glyph_messages;       /* that many of them per reply */
    bool pace;                /* real-time pacing like the server */
    bool decode;              /* decode every uplink packet with libopus */
    int close_after_turns;    /* 0: never close */
    bool mcp;                 /* act as the server's MCP client */
    bool mcp_notify;          /* also send notifications/initialized */
    const char *mcp_protocol; /* initialize's protocolVersion, or NULL */
    int mcp_list_delay_ms;    /* the server waits 1 s before tools/list */
    int mcp_timeout_ms;       /* per tools/call */
    int n_calls;              /* --mcp-call count */
    char *call_name[GW_SIM_BACKEND_MAX_MCP_CALL];
    cJSON *call_args[GW_SIM_BACKEND_MAX_MCP_CALL]; /* owned objects */
    int exit_after_sessions;                       /* 0: run until a signal */
    int max_conns;                                 /* fd budget for lws */
    const char *events_path, *latency_path, *dump_path;
};

/* The TTS audio, encoded once at startup and shared by every session. */
struct tts {
    uint8_t *buf;          /* all packets back to back */
    uint32_t *off;         /* packet i starts at buf + off[i] */
    uint16_t *len;         /* and has len[i] bytes */
    uint8_t (*prefix)[32]; /* prefix[k]: SHA-256 of packets 0..k-1 */
    int n;                 /* packets */
};

/* The process: one loop, one lws context, all connections. */
struct mock {
    uv_loop_t loop;
    struct mock_opts opt;
    struct tts tts;
    struct lws_context *ctx;
    uv_signal_t sig_int, sig_term;
    uv_timer_t stop_timer;   /* leaves lws callbacks before shutdown */
    FILE *events;            /* JSON lines, or NULL */
    FILE *latency;           /* per-packet times, or NULL */
    OpusDecoder *dec;        /* shared: validity, not audio quality */
    opus_int16 pcm[PCM_MAX]; /* decoder output, discarded */
    uint8_t *tx;             /* LWS_PRE + header + largest payload */
    uint64_t next_conn;      /* connection numbers start at 1 */
    uint64_t conns_open, conns_closed;
    bool stopping;
};

/* One queued text message, with the headroom lws_write needs. */
struct out_msg {
    struct out_msg *next;
    bool tts_stop; /* writing it ends the turn */
    size_t len;
    unsigned char buf[]; /* LWS_PRE bytes, then the text */
};

enum conn_state { ST_WAIT_HELLO, ST_IDLE, ST_LISTENING, ST_SPEAKING };
enum aux_job { AUX_NONE, AUX_HELLO, AUX_MCP_LIST, AUX_MCP_CALL };
enum mcp_stage {
    MCP_OFF,
    MCP_INIT,
    MCP_LIST_WAIT,
    MCP_LIST,
    MCP_CALL,
    MCP_DONE
};

/* Uplink counters of one turn, or of the whole connection. */
struct rx_stats {
    EVP_MD_CTX *sha;   /* over the Opus payloads, concatenated */
    uint64_t frames;   /* good frames hashed */
    uint64_t bytes;    /* their payload bytes */
    uint64_t samples;  /* decoded at 16 kHz */
    uint32_t ts_first; /* timestamps as received */
    uint32_t ts_last;
    uint64_t ts_nonzero;
    uint64_t rx_first_ns, rx_last_ns; /* CLOCK_MONOTONIC */
};

/* One WebSocket: a conversation with one gateway session. */
struct conn {
    struct mock *m;
    struct lws *wsi; /* NULL once lws closed it */
    uint64_t id;
    uv_timer_t pace_timer; /* TTS pacing and the delay before tts stop */
    uv_timer_t aux_timer;  /* hello delay, MCP delays and timeouts */
    enum aux_job aux;
    int handles_open;
    enum conn_state state;
    enum gw_framing framing;
    char sid[GW_SIM_UUID_LEN + 1];
    char dev[64], cid[64]; /* device-id and client-id, for the CSV log */
    char subject[SUBJECT_MAX];
    uint8_t *rx; /* reassembly of fragmented messages */
    size_t rx_len, rx_cap;
    struct out_msg *q_head, *q_tail;
    bool hello_seen, dev_mcp, listen_pending, close_now, closed_by_mock;
    bool peer_closed, goodbye_text;
    int peer_code, mock_code; /* close status each side sent */
    char peer_reason[64];
    uint64_t bad_frames, bad_opus, hdr_nonzero, outside, before_hello;
    uint64_t rx_index; /* uplink packets received, from 1 */
    struct rx_stats turn_rx, all_rx;
    uint32_t turn; /* turns begun */
    uint32_t turns_done;
    char mode[16]; /* listen mode of the turn */
    uint32_t tts_total, tts_sent, tts_released, tts_seq, tts_all;
    uint64_t tts_t0;
    bool stop_queued, aborted;
    enum mcp_stage mcp;
    uint32_t mcp_next_id; /* tools/call ids, from 1 like the server */
    uint32_t mcp_call_id;
    int mcp_call_idx;
    uint32_t mcp_pages;
    cJSON *mcp_tools; /* names gathered over the pages */
    /* pcm16: uplink PCM of the turn (at up_rate, from the gateway's
     * hello), for its frequency; the downlink tone's next sample. */
    int16_t *pcm_rx;
    size_t pcm_n;
    uint64_t pcm_odd; /* uplink messages of an odd byte count */
    int up_rate;
    uint64_t pcm_tx_pos;
};

/* lws per-session data: only the pointer, the conn outlives the wsi. */
struct pss {
    struct conn *conn;
};

/* --- sim_backend.c: the process and its outputs ------------------------ */

/* Peer text into an event: invalid UTF-8 would break the JSON line. */
void gw_sim_be_add_text(cJSON *o, const char *key, const char *s, size_t len);

/* A new event {"t":ms,"ev":name[,"conn":id,"sid":sid]}; c may be NULL. */
cJSON *gw_sim_be_ev_new(const char *name, const struct conn *c);

/* Writes o as one JSON line (with --events) and frees it. */
void gw_sim_be_ev_emit(struct mock *m, cJSON *o);

/* One line of the per-packet latency log. */
void gw_sim_be_latency_line(struct mock *m, const char *dir,
                            const struct conn *c, uint64_t n, uint32_t ts,
                            const uint8_t *p, size_t len);

/* --exit-after-sessions reached: shut down from the loop. */
void gw_sim_be_on_stop_timer(uv_timer_t *t);

/* --- sim_backend_cli.c: the command line ------------------------------- */

/* "v2", "v3", "raw", "pcm16", by enum gw_framing. */
extern const char *const gw_sim_be_framing_names[4];

/* Returns -1 to run, else the exit status (help printed or bad usage). */
int gw_sim_be_parse_options(int argc, char **argv, struct mock_opts *o);
void gw_sim_be_opts_free(struct mock_opts *o);

/* --- sim_backend_tts.c: the TTS audio, encoded once -------------------- */

GW_MUST_CHECK int gw_sim_be_tts_build(struct tts *t, int n, int rate);
void gw_sim_be_tts_free(struct tts *t);

/* --dump-frames: returns the exit status. */
int gw_sim_be_tts_dump(const struct tts *t, const char *path);

/* --- sim_backend_ws.c: the WebSocket server and output queue ----------- */

int gw_sim_be_on_lws(struct lws *wsi, enum lws_callback_reasons reason,
                     void *user, void *in, size_t len);

/* {"type":T}: the start of a message to the gateway. */
cJSON *gw_sim_be_msg_new(const char *type);

/* Queues o, serialised, and frees it; writing a tts_stop ends the turn. */
void gw_sim_be_queue_json(struct conn *c, cJSON *o, bool tts_stop);

/* The same with "session_id" added, as the server tags its messages. */
void gw_sim_be_queue_msg(struct conn *c, cJSON *o, bool tts_stop);

/* Asks lws for a writeable callback if anything is waiting. */
void gw_sim_be_pump(struct conn *c);

/* --- sim_backend_turns.c: hello, listening and speaking ---------------- */

int gw_sim_be_rx_stats_reset(struct rx_stats *s);

/* Adds the counters to an event; the hash context is finished and reset. */
void gw_sim_be_rx_stats_report(cJSON *o, struct rx_stats *s);

const char *gw_sim_be_str_item(const cJSON *o, const char *key);
void gw_sim_be_send_hello(struct conn *c);
void gw_sim_be_end_turn(struct conn *c, const char *trigger);
void gw_sim_be_on_text(struct conn *c, const char *buf, size_t len);
void gw_sim_be_on_binary(struct conn *c, const uint8_t *buf, size_t len);

/* The next TTS frame; returns 0 or -1 (lws write failed). */
int gw_sim_be_send_audio(struct conn *c);

/* The tts stop went out: report the turn, then close or listen again. */
void gw_sim_be_tts_finished(struct conn *c);

/* --- sim_backend_mcp.c: the server's MCP client ------------------------ */

/* Runs job on the connection's aux timer after ms. */
void gw_sim_be_aux_start(struct conn *c, enum aux_job job, int ms);
void gw_sim_be_mcp_start(struct conn *c);
void gw_sim_be_on_mcp(struct conn *c, const cJSON *root);

#endif /* GW_SIM_BACKEND_INT_H */
