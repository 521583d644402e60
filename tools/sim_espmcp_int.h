/*
 * What the files of the esp-mcp-like MCP server share (sim_espmcp*.c):
 * its state and the steps one file calls in another. Private to them;
 * the interface is sim_espmcp.h.
 */
#ifndef GW_SIM_ESPMCP_INT_H
#define GW_SIM_ESPMCP_INT_H

#include "tools/sim_espmcp.h"

#define NEVER          UINT64_MAX /* a timer not armed */
#define PAGE_BYTES     8000       /* list pages, near the firmware's size */
#define MAX_SUBS       16         /* subscribed uris */
#define MAX_TASKS      64         /* tasks kept */
#define MAX_OUT_KEPT   1024 /* answered requests remembered (duplicates) */
#define VIOLATIONS_Q   16   /* violation texts kept for the transcript */
#define ESP_RECENT_IDS 64   /* request ids the engine remembers */
#define RELATED_TASK   "io.modelcontextprotocol/related-task"
#define DEFAULT_TTL    60000 /* ms a task is kept, when not asked */
#define POLL_INTERVAL  100   /* ms, suggested to tasks/get pollers */

/* What a waiting tools/call waits for: a timer (count, job, ask_cancel)
 * or an answer to the device's request. */
enum call_kind {
    C_COUNT,
    C_JOB,
    C_ASK,
    C_CONFIRM,
    C_ROOTS,
    C_ASK_CANCEL,
    C_REMOTE
};

/* A tools/call that is not answered yet. */
struct call {
    struct call *next;
    cJSON *id; /* the caller's id, a copy */
    enum call_kind kind;
    char tool[40];
    cJSON *token;          /* _meta.progressToken, a copy, or NULL */
    uint32_t steps, step;  /* self.sim.count */
    uint32_t interval_ms;  /* self.sim.count */
    uint32_t ms;           /* self.sim.job */
    uint64_t due_ms;       /* next timer, NEVER for none */
    struct out *waits_for; /* the device request it waits on */
};

enum out_state { O_PENDING, O_ANSWERED, O_WITHDRAWN };

/* A request the device sent. */
struct out {
    struct out *next;
    uint32_t id;
    char *endpoint; /* NULL: the device's own link */
    char method[32];
    char tool[129];    /* remote calls: the tool */
    int remote_index;  /* --mcp-remote entry, or -1 */
    struct call *call; /* the tools/call waiting for it, or NULL */
    enum out_state state;
};

enum task_status { TS_WORKING, TS_COMPLETED, TS_CANCELLED };

struct task {
    struct task *next;
    char id[24];
    enum task_status status;
    char created[32], updated[32];
    double ttl;
    uint32_t ms;
    uint64_t due_ms;
    cJSON *waiters; /* ids of tasks/result requests waiting (array) */
};

struct outmsg {
    struct outmsg *next;
    char *endpoint;
    char *json;
    char what[120];
};

struct remote_result {
    bool done, ok;
    char *text;
};

#define GW_SIM_ESP_CAP_SAMPLING    1u
#define GW_SIM_ESP_CAP_ELICITATION 2u
#define GW_SIM_ESP_CAP_ROOTS       4u

struct gw_sim_esp {
    struct gw_sim_esp_options o;
    struct gw_sim_mcp *stock;
    struct gw_sim_esp_catalog cat;
    struct gw_sim_esp_stats st;
    struct gw_sim_esp_remote remote[GW_SIM_ESP_REMOTE_MAX];
    struct remote_result remote_res[GW_SIM_ESP_REMOTE_MAX];
    size_t n_remote;
    bool initialized_once; /* the first initialize arrived */
    bool gated;            /* waiting for notifications/initialized */
    bool session_init;     /* an initialize was accepted (and not reset) */
    char recent_ids[ESP_RECENT_IDS][48]; /* engine_lifecycle: ids seen */
    size_t recent_next;
    /* What the last initialize declared: sampling, elicitation, roots
     * (GW_SIM_ESP_CAP_*), for the capability gate. */
    unsigned client_caps;
    uint64_t change_due_ms, update_due_ms;
    int log_level; /* index into levels[], -1: none set (or forgotten) */
    char *subs[MAX_SUBS];
    size_t n_subs;
    uint32_t next_out_id, next_task, n_tasks, n_outs;
    struct call *calls;
    struct out *outs; /* newest first */
    struct task *tasks;
    struct outmsg *q_head, *q_tail;
    struct outmsg *popped; /* freed on the next pop */
    char vq[VIOLATIONS_Q][200];
    size_t vq_head, vq_len;
    bool oom;
};

/* logging/setLevel's levels, most verbose first. */
#define GW_SIM_ESP_LEVELS 8
extern const char *const gw_sim_esp_levels[GW_SIM_ESP_LEVELS];

/* --- sim_espmcp_send.c: what the server sends -------------------------- */

/* Counts a violation; the first one's text is kept for the verdict. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void gw_sim_esp_violation(struct gw_sim_esp *e, const char *fmt, ...);

/* An integral JSON number (the engine reads ids as numbers). */
bool gw_sim_esp_integral(const cJSON *v);

/* An id as text for messages: 7, "a", (none). */
void gw_sim_esp_id_text(const cJSON *id, char *out, size_t cap);

/* Moves msg (printed) to the output queue, endpoint NULL for the
 * device's own link; the rest is the transcript's description. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
void gw_sim_esp_queue(struct gw_sim_esp *e, const char *endpoint, cJSON *msg,
                      const char *fmt, ...);

/* {"jsonrpc":"2.0"}, or NULL. */
cJSON *gw_sim_esp_rpc_base(void);

/* A result (moved in) under a copy of id; method names it in the
 * transcript. */
void gw_sim_esp_reply(struct gw_sim_esp *e, const cJSON *id, cJSON *result,
                      const char *method);

/* An error with a code, as this engine gives them. */
#if defined(__GNUC__)
__attribute__((format(printf, 5, 6)))
#endif
void gw_sim_esp_reply_error(struct gw_sim_esp *e, const cJSON *id, int code,
                            const char *method, const char *fmt, ...);

/* An error with a data object (moved in; may be NULL), as esp-mcp's
 * engine sends. */
void gw_sim_esp_reply_error_data(struct gw_sim_esp *e, const cJSON *id,
                                 int code, const char *method,
                                 const char *message, cJSON *data);

/* --- sim_espmcp_life.c: esp-mcp's lifecycle ----------------------------- */

/* A request may go on; false when it was refused (answered) as the
 * engine refuses it: before any initialize, a remembered id (both with
 * engine_lifecycle), before notifications/initialized. */
bool gw_sim_esp_life_admit(struct gw_sim_esp *e, const char *method,
                           const cJSON *id);

/* A notification may go on; false when the engine drops it. */
bool gw_sim_esp_life_notification(struct gw_sim_esp *e, const char *method);

/* With engine_lifecycle, an initialize: a repeated one resets the
 * session first; false when its params are refused (answered). */
bool gw_sim_esp_life_initialize(struct gw_sim_esp *e, const cJSON *id,
                                const cJSON *params);

/* A notification; params moved in (may be NULL); detail for the
 * transcript (may be NULL). */
void gw_sim_esp_notify(struct gw_sim_esp *e, const char *endpoint,
                       const char *method, cJSON *params, const char *detail);

/* A device request with the next id; params moved in. The record, or
 * NULL on OOM. */
struct out *gw_sim_esp_request(struct gw_sim_esp *e, const char *endpoint,
                               const char *method, cJSON *params);

/* notifications/message at a level index, if the client's level admits
 * it. */
void gw_sim_esp_log(struct gw_sim_esp *e, int level, const char *data);

/* A CallToolResult with one text content, or NULL. */
cJSON *gw_sim_esp_text_result(const char *text, bool is_error);

/* Answers a tools/call with one text content. */
void gw_sim_esp_reply_text(struct gw_sim_esp *e, const cJSON *id,
                           const char *text, bool is_error);

/* The text contents of a result joined by newlines (heap), or NULL. */
char *gw_sim_esp_content_text(const cJSON *result);

/* "error <code>: <message>" (with_code) or the message (heap), or NULL. */
char *gw_sim_esp_error_text(const cJSON *error, bool with_code);

/* --- sim_espmcp_tools.c: tools/call, device requests, tasks ------------- */

/* Forgets a call (no answer); what it waits on no longer points to it. */
void gw_sim_esp_call_free(struct gw_sim_esp *e, struct call *c);
struct call *gw_sim_esp_call_by_id(struct gw_sim_esp *e, const cJSON *id);

/* The device request with that id (a number), or NULL. */
struct out *gw_sim_esp_out_by_id(struct gw_sim_esp *e, const cJSON *id);

/* Withdraws a pending device request: notifications/cancelled. */
void gw_sim_esp_withdraw(struct gw_sim_esp *e, struct out *o,
                         const char *reason);

/* A task changes status: notified, and tasks/result waiters answered. */
void gw_sim_esp_task_settle(struct gw_sim_esp *e, struct task *t,
                            enum task_status status);

/* tools/call TOOL on endpoint for call c (NULL: --mcp-remote entry
 * index). */
void gw_sim_esp_remote_call(struct gw_sim_esp *e, struct call *c, int index,
                            const char *endpoint, const char *tool,
                            const cJSON *args);

/* A tools/call request (msg, its id and params). */
void gw_sim_esp_tools_call(struct gw_sim_esp *e, uint64_t now, const cJSON *msg,
                           const cJSON *id, const cJSON *params);

/* tasks/get, tasks/list, tasks/result, tasks/cancel. */
void gw_sim_esp_tasks(struct gw_sim_esp *e, const char *meth, const cJSON *id,
                      const cJSON *params);

/* A call waiting on a device request gets the answer (result or error). */
void gw_sim_esp_finish_call(struct gw_sim_esp *e, struct call *c,
                            const cJSON *result, const cJSON *error);

/* One step of self.sim.count: progress, and the answer after the last. */
void gw_sim_esp_count_step(struct gw_sim_esp *e, struct call *c);

#endif /* GW_SIM_ESPMCP_INT_H */
