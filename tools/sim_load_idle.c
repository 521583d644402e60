/*
 * The idle fleet of hybridgw-sim's `load` (--idle-devices): devices that
 * stay online answering MCP as the firmware does, counted for a fleet
 * bench (connected, discovered, back after a broker restart).
 */
#include "tools/sim_load_int.h"

#include <stdio.h>
#include <string.h>

#include "tools/sim_common.h"

void gw_sim_load_idle_add(struct idle_counts *c, const struct gw_sim_result *r)
{
    c->online += r->mqtt_up;
    c->connected += r->mqtt_connects > 0;
    c->discovered += r->mcp_initializes > 0;
    c->reconnected += r->mqtt_connects > 1;
    c->reinitialized += r->mcp_initializes > 1;
    c->connects += r->mqtt_connects;
    c->initializes += r->mcp_initializes;
    c->lists += r->mcp_lists;
    if (r->last_connect_unix_ms > c->last_connect_unix_ms) {
        c->last_connect_unix_ms = r->last_connect_unix_ms;
    }
    if (r->last_initialize_unix_ms > c->last_initialize_unix_ms) {
        c->last_initialize_unix_ms = r->last_initialize_unix_ms;
    }
}

void gw_sim_load_idle_count(const struct load *l, struct idle_counts *c)
{
    uint32_t begun = l->slots_begun < l->n_idle ? l->slots_begun : l->n_idle;

    *c = l->idle_done;
    c->requested = l->n_idle;
    c->started = begun;
    for (uint32_t i = 0; i < begun; i++) {
        const struct slot *s = &l->slots[i];
        if (s->dev != NULL && !s->idle_counted) {
            gw_sim_load_idle_add(c, gw_sim_device_result(s->dev));
        }
    }
}

bool gw_sim_load_idle_json(const struct load *l, cJSON *o)
{
    struct idle_counts c;
    cJSON *j = cJSON_AddObjectToObject(o, "idle");

    if (j == NULL) {
        return false;
    }
    gw_sim_load_idle_count(l, &c);
    cJSON_AddNumberToObject(j, "requested", c.requested);
    cJSON_AddNumberToObject(j, "started", c.started);
    cJSON_AddNumberToObject(j, "online", c.online);
    cJSON_AddNumberToObject(j, "connected", c.connected);
    cJSON_AddNumberToObject(j, "discovered", c.discovered);
    cJSON_AddNumberToObject(j, "reconnected", c.reconnected);
    cJSON_AddNumberToObject(j, "reinitialized", c.reinitialized);
    cJSON_AddNumberToObject(j, "connects", (double)c.connects);
    cJSON_AddNumberToObject(j, "initializes", (double)c.initializes);
    cJSON_AddNumberToObject(j, "lists", (double)c.lists);
    cJSON_AddNumberToObject(j, "last_connect_unix_ms", c.last_connect_unix_ms);
    cJSON_AddNumberToObject(j, "last_initialize_unix_ms",
                            c.last_initialize_unix_ms);
    return true;
}

void gw_sim_load_status_write(const struct load *l)
{
    cJSON *o = cJSON_CreateObject();
    char tmp[4096], *text = NULL;
    FILE *f;

    if (l->status_path == NULL || o == NULL ||
        snprintf(tmp, sizeof(tmp), "%s.tmp", l->status_path) >=
            (int)sizeof(tmp)) {
        cJSON_Delete(o);
        return;
    }
    cJSON_AddNumberToObject(o, "unix_ms", (double)gw_sim_unix_us() / 1000.0);
    cJSON_AddNumberToObject(
        o, "conversations_started",
        l->started - (l->slots_begun < l->n_idle ? l->slots_begun : l->n_idle));
    cJSON_AddNumberToObject(o, "conversations_finished",
                            l->finished - l->idle_finished);
    if (gw_sim_load_idle_json(l, o)) {
        text = cJSON_PrintUnformatted(o);
    }
    cJSON_Delete(o);
    if (text == NULL) {
        return;
    }
    if ((f = fopen(tmp, "w")) == NULL || fprintf(f, "%s\n", text) < 0 ||
        fclose(f) != 0 || rename(tmp, l->status_path) != 0) {
        perror(l->status_path);
    }
    cJSON_free(text);
}
