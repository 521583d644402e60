/*
 * The simulated device's esp-mcp-like MCP server (`--mcp-profile esp`),
 * pure: JSON-RPC messages in, with the time; the messages the device
 * sends out queued in order; timers driven by the caller's clock. It
 * checks strictly what it receives and counts every violation.
 */
#ifndef GW_SIM_ESPMCP_H
#define GW_SIM_ESPMCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/error.h"
#include "tools/sim_device.h"

/* --mcp-remote entries a device takes. */
#define GW_SIM_ESP_REMOTE_MAX 16
/* Largest --mcp-big-resource-bytes. */
#define GW_SIM_ESP_BIG_MAX 16777216u

/* One --mcp-remote ENDPOINT:TOOL:{json}, parsed. */
struct gw_sim_esp_remote {
    char endpoint[65]; /* server name, [A-Za-z0-9_.-]{1,64} */
    char tool[129];    /* tool name */
    cJSON *arguments;  /* an object, owned */
};

/*
 * Parses "ENDPOINT:TOOL" or "ENDPOINT:TOOL:{json object}" into *out (its
 * arguments to be freed with gw_sim_esp_remote_free). GW_EINVAL on a bad
 * spec, GW_ENOMEM.
 */
GW_MUST_CHECK int gw_sim_esp_remote_parse(const char *spec,
                                          struct gw_sim_esp_remote *out);
void gw_sim_esp_remote_free(struct gw_sim_esp_remote *r);

struct gw_sim_esp_options {
    uint32_t update_ms;          /* resources/updated period; 0 never */
    uint32_t change_after_ms;    /* list changes after the first
                                    initialize; 0 never */
    uint32_t big_resource_bytes; /* size of device://big.txt */
    const char *const *remote;   /* --mcp-remote specs, already checked */
    size_t n_remote;
    bool remote_init;      /* initialize each remote endpoint first */
    bool remote_progress;  /* remote calls carry a progress token */
    bool string_progress;  /* a numeric token echoed as a string (esp-mcp) */
    bool capability_gate;  /* no request its client did not declare */
    bool engine_lifecycle; /* esp-mcp's initialize checks, lifecycle and
                              remembered ids, exactly */
};

/* What the server did and saw; all counters only grow. */
struct gw_sim_esp_stats {
    uint32_t samplings, elicitations, roots;    /* device requests sent */
    uint32_t remote_ok, remote_err;             /* remote calls answered */
    uint32_t remote_inits_ok, remote_inits_err; /* --mcp-remote-init */
    uint32_t remote_notifications;              /* from MCP servers */
    uint32_t remote_progress; /* progress on the device\'s tokens */
    uint32_t progress_sent, tasks, subscribed;
    uint32_t updates_sent, logs_sent, list_changed_sent;
    uint32_t late;       /* answers to withdrawn requests */
    uint32_t unanswered; /* device requests never answered (at the end) */
    uint32_t violations;
    uint32_t lifecycle_refused; /* refused before (notifications/)initialize */
    uint32_t lifecycle_ignored; /* notifications dropped before initialize */
    uint32_t reinitializes;     /* initialize on an initialized session */
    uint32_t received, sent;    /* messages in and out */
    char violation[200];        /* the first one, "" if none */
    char protocol_version[16];
};

struct gw_sim_esp;

/*
 * Creates the server. stock is the device's stock MCP state: its tools
 * (and --mcp-echo-tool, --mcp-extra-tools) are served too, and its
 * counters (answered, initializes, lists, calls, cancelled, ignored,
 * vision) are kept up to date. Returns 0, GW_EINVAL (a bad remote spec)
 * or GW_ENOMEM.
 */
GW_MUST_CHECK int gw_sim_esp_create(const struct gw_sim_esp_options *o,
                                    struct gw_sim_mcp *stock,
                                    struct gw_sim_esp **out);
void gw_sim_esp_destroy(struct gw_sim_esp *e);

/*
 * One mcp envelope's JSON-RPC payload arrived at now_ms. endpoint is the
 * envelope's "endpoint" member as it came, NULL when absent. Replies and
 * notifications are queued (gw_sim_esp_pop). Returns 0 or GW_ENOMEM.
 */
GW_MUST_CHECK int gw_sim_esp_receive(struct gw_sim_esp *e, uint64_t now_ms,
                                     const cJSON *payload,
                                     const cJSON *endpoint);

/* Runs every timer due at now_ms. Returns 0 or GW_ENOMEM. */
GW_MUST_CHECK int gw_sim_esp_tick(struct gw_sim_esp *e, uint64_t now_ms);

/* Milliseconds from now_ms to the next timer (0: due), -1 for none. */
int64_t gw_sim_esp_next_ms(const struct gw_sim_esp *e, uint64_t now_ms);

/*
 * Takes the oldest queued message: *endpoint (NULL for the device's own
 * link) and *json (the JSON-RPC payload) are heap strings for the caller
 * to free(); *what is a short description for a transcript (valid until
 * the next call). False when the queue is empty.
 */
bool gw_sim_esp_pop(struct gw_sim_esp *e, char **endpoint, char **json,
                    const char **what);

/* Takes the oldest violation text not yet taken (for a transcript). */
bool gw_sim_esp_pop_violation(struct gw_sim_esp *e, char *out, size_t cap);

/* The run ends: device requests still unanswered become violations. */
void gw_sim_esp_finish(struct gw_sim_esp *e);

const struct gw_sim_esp_stats *gw_sim_esp_stats(const struct gw_sim_esp *e);

/* Adds the profile's members of the --json result line to o. False on
 * OOM. */
bool gw_sim_esp_result_json(const struct gw_sim_esp *e, cJSON *o);

/* --- sim_espmcp_catalog.c: what the server offers, pure ---------------- */

struct gw_sim_esp_catalog {
    const struct gw_sim_mcp *stock; /* the stock tools */
    bool with_user;                 /* stock user-only tools listed */
    bool changed;                   /* the --mcp-change-after-ms additions */
    uint32_t big_bytes;             /* device://big.txt size */
    int volume;                     /* for device://status */
    uint32_t touched;               /* self.sim.touch calls */
};

/* The full lists as JSON arrays (caller deletes); NULL on OOM. */
cJSON *gw_sim_esp_tools(const struct gw_sim_esp_catalog *c);
cJSON *gw_sim_esp_resources(const struct gw_sim_esp_catalog *c);
cJSON *gw_sim_esp_templates(const struct gw_sim_esp_catalog *c);
cJSON *gw_sim_esp_prompts(const struct gw_sim_esp_catalog *c);

/* Whether name is one of the profile's own tools (not a stock one). */
bool gw_sim_esp_is_sim_tool(const struct gw_sim_esp_catalog *c,
                            const char *name);

/*
 * resources/read of uri: *contents gets the contents array. Returns 0,
 * GW_ENOENT for an unknown uri, GW_ENOMEM.
 */
GW_MUST_CHECK int gw_sim_esp_read(const struct gw_sim_esp_catalog *c,
                                  const char *uri, cJSON **contents);

/*
 * prompts/get: *result gets {description, messages}. Returns 0, GW_ENOENT
 * (unknown prompt), GW_EINVAL (a required argument missing, *why says
 * which), GW_ENOMEM.
 */
GW_MUST_CHECK int gw_sim_esp_prompt_get(const struct gw_sim_esp_catalog *c,
                                        const char *name, const cJSON *args,
                                        cJSON **result, const char **why);

/*
 * completion/complete: *result gets {completion:{values,total,hasMore}}.
 * Returns 0, GW_EINVAL (bad ref or argument), GW_ENOMEM.
 */
GW_MUST_CHECK int gw_sim_esp_complete(const struct gw_sim_esp_catalog *c,
                                      const cJSON *params, cJSON **result);

#endif /* GW_SIM_ESPMCP_H */
