/*
 * What the two files of hybridgw-sim's `load` subcommand share: the run
 * (sim_load.c) and its totals and report (sim_load_stats.c).
 */
#ifndef GW_SIM_LOAD_INT_H
#define GW_SIM_LOAD_INT_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "tools/sim_cli.h"

#define MAX_REASONS 16 /* distinct failure reasons listed */

struct load;

/* How a device of a churn run behaves (--churn); each has a weight. */
enum churn_kind {
    CHURN_GOODBYE, /* converses, says goodbye, disconnects */
    CHURN_NOBYE,   /* converses, drops UDP, disconnects without goodbye */
    CHURN_SILENT,  /* converses, then goes quiet with MQTT still up */
    CHURN_BADJSON, /* converses, publishing malformed messages meanwhile */
    CHURN_BADUDP,  /* converses with replays, forgeries and junk datagrams */
    CHURN_BADKEY,  /* a wrong password: the broker should refuse it */
    CHURN_KIND_COUNT_
};

/* A device's place in the run, passed as its callback argument. In a
 * churn run one slot is one device identity, reconnecting again and
 * again. */
struct slot {
    struct load *load;         /* the run */
    struct gw_sim_device *dev; /* NULL before start and once closed */
    uint32_t index;            /* in load.slots */
    enum churn_kind kind;      /* of the current device */
    bool idle;                 /* --idle-devices: online, no conversation */
    bool idle_counted;         /* its result is in load.idle_done */
    bool holding;              /* silent device kept online after its run */
    bool timer_open;           /* timer initialised, to be closed */
    uv_timer_t timer;          /* churn: pause, hold, malformed input */
    char client_id[96];        /* churn: the same one on every reconnect */
};

/* Devices of one churn kind and how their runs ended. */
struct kind_count {
    uint32_t started, ok, failed;
};

/* One failure text and how many devices ended with it. */
struct reason_count {
    char text[256]; /* the device's reason */
    uint32_t n;     /* devices */
};

/* The idle fleet (--idle-devices) at one moment: devices live now plus
 * those already finished. */
struct idle_counts {
    uint32_t requested, started;
    uint32_t online;                       /* MQTT up now */
    uint32_t connected;                    /* CONNACK seen at least once */
    uint32_t discovered;                   /* an initialize answered */
    uint32_t reconnected;                  /* two CONNACKs or more */
    uint32_t reinitialized;                /* two initializes or more */
    uint64_t connects, initializes, lists; /* sums over devices */
    /* Latest over devices of the last CONNACK / initialize, Unix ms. */
    double last_connect_unix_ms, last_initialize_unix_ms;
};

/* Sums over finished devices. */
struct totals {
    uint32_t connected, hellos, hello_invalid, hello_duplicate;
    uint32_t ok, failed, turns, stt, goodbye_received, goodbye_sent;
    uint64_t up_packets, up_bytes, up_errors;
    uint64_t down_datagrams, down_accepted, down_played, down_lost;
    uint64_t drops[GW_SIM_DROP_COUNT_];
    double jitter_sum, jitter_max; /* per device RFC 3550 jitter */
    uint32_t jitter_n;             /* devices that got downlink */
};

struct load {
    uv_loop_t *loop;
    struct gw_sim_cli cli;
    uint32_t n;                   /* slots: --idle-devices, then --devices */
    uint32_t n_idle;              /* --idle-devices (the first n_idle slots) */
    bool devices_set;             /* --devices given */
    const char *status_path;      /* --status-file FILE */
    uv_timer_t status_timer;      /* rewrites it */
    struct idle_counts idle_done; /* idle devices already finished */
    uint32_t idle_finished;       /* how many */
    double ramp;                  /* devices started per second; 0 = at once */
    uint32_t duration_s;          /* each device's run */
    const char *stats_path;       /* --stats-json FILE */
    struct slot *slots;
    uint32_t slots_begun; /* slots the ramp has started */
    uint32_t started, finished, closed, init_failed; /* devices */
    uv_timer_t ramp_timer;                           /* starts devices */
    uv_timer_t report_timer; /* progress on stderr; also the deadline */
    uv_signal_t sigint, sigterm;
    int interrupts;
    bool ending; /* summary printed, handles closing */
    uint64_t t0_ns, deadline_ns;
    struct totals tot;
    double *hello_ms; /* one per answered hello */
    size_t n_hello, hello_cap;
    /* --churn: devices come and go until churn_end_ns */
    uint32_t churn_s;                    /* 0: one device per slot */
    uint32_t pause_ms, hold_ms;          /* between runs; silent hold */
    uint32_t weights[CHURN_KIND_COUNT_]; /* --churn-mix */
    uint64_t churn_end_ns, rng;          /* end; xorshift state */
    bool churn_over;                     /* no more reconnects */
    struct kind_count kinds[CHURN_KIND_COUNT_];
    uint64_t bad_messages, junk_datagrams; /* malformed input sent */
    struct sockaddr_in junk_addr;          /* --junk-udp, port 0 if none */
    uv_udp_t junk;                         /* sends the junk datagrams */
    struct reason_count reasons[MAX_REASONS];
    size_t n_reasons;
    uint32_t other_reasons; /* beyond MAX_REASONS distinct texts */
};

/* Adds a finished device's result to the totals. */
void gw_sim_load_add_result(struct load *l, const struct gw_sim_result *r);

/* Counts a failure by its text; the first MAX_REASONS texts are listed. */
void gw_sim_load_count_reason(struct load *l, const char *text);

/* Short name of a churn kind ("goodbye", "badkey"...). */
const char *gw_sim_load_kind_name(enum churn_kind k);

/* Seconds since the run began. */
double gw_sim_load_elapsed_s(const struct load *l);

/* Adds one idle device's result to c. */
void gw_sim_load_idle_add(struct idle_counts *c, const struct gw_sim_result *r);

/* The idle fleet now: l->idle_done plus every live idle device. */
void gw_sim_load_idle_count(const struct load *l, struct idle_counts *c);

/* Adds "idle" (the counts above) to a report object; false on OOM. */
bool gw_sim_load_idle_json(const struct load *l, cJSON *o);

/* Rewrites --status-file (atomically: a temporary file renamed). */
void gw_sim_load_status_write(const struct load *l);

/* The summary on stdout, the JSON line with --json, --stats-json FILE. */
void gw_sim_load_report(struct load *l);

#endif /* GW_SIM_LOAD_INT_H */
