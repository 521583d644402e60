/*
 * The esp-mcp engine's lifecycle for the esp-mcp-like server, pure: what
 * it refuses before an initialize and before notifications/initialized,
 * its check of initialize's params and what a repeated initialize
 * forgets, the request ids it remembers; the engine's errors with their
 * data objects.
 */
#include "tools/sim_espmcp_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -32600 "Invalid request" with data {method, reason}. */
static void invalid_request(struct gw_sim_esp *e, const cJSON *id,
                            const char *method, const char *reason)
{
    cJSON *data = cJSON_CreateObject();

    if (data == NULL ||
        cJSON_AddStringToObject(data, "method", method) == NULL ||
        cJSON_AddStringToObject(data, "reason", reason) == NULL) {
        cJSON_Delete(data);
        e->oom = true;
        return;
    }
    gw_sim_esp_reply_error_data(e, id, -32600, method, "Invalid request", data);
}

/* -32602 "Invalid params" with data {method, expected, field}. */
static void invalid_params(struct gw_sim_esp *e, const cJSON *id,
                           const char *method, const char *expected,
                           const char *field)
{
    cJSON *data = cJSON_CreateObject();

    if (data == NULL ||
        cJSON_AddStringToObject(data, "method", method) == NULL ||
        cJSON_AddStringToObject(data, "expected", expected) == NULL ||
        cJSON_AddStringToObject(data, "field", field) == NULL) {
        cJSON_Delete(data);
        e->oom = true;
        return;
    }
    gw_sim_esp_reply_error_data(e, id, -32602, method, "Invalid params", data);
}

bool gw_sim_esp_life_notification(struct gw_sim_esp *e, const char *method)
{
    if (e->o.engine_lifecycle && !e->session_init) {
        /* The engine drops notifications before any initialize. */
        e->st.lifecycle_ignored++;
        e->stock->ignored++;
        return false;
    }
    (void)method;
    return true;
}

/* Whether idt is among the remembered ids; remembers it either way. */
static bool seen_id(struct gw_sim_esp *e, const char *idt)
{
    bool seen = false;

    for (size_t i = 0; i < ESP_RECENT_IDS; i++) {
        if (e->recent_ids[i][0] != '\0' && strcmp(e->recent_ids[i], idt) == 0) {
            seen = true;
            break;
        }
    }
    snprintf(e->recent_ids[e->recent_next], sizeof(e->recent_ids[0]), "%s",
             idt);
    e->recent_next = (e->recent_next + 1) % ESP_RECENT_IDS;
    return seen;
}

bool gw_sim_esp_life_admit(struct gw_sim_esp *e, const char *method,
                           const cJSON *id)
{
    char idt[48];
    bool init = strcmp(method, "initialize") == 0;

    if (e->o.engine_lifecycle) {
        if (!e->session_init && !init) {
            e->st.lifecycle_refused++;
            gw_sim_esp_violation(e,
                                 "request %s before any initialize (refused "
                                 "as esp-mcp refuses it)",
                                 method);
            invalid_request(e, id, method,
                            "initialize must be first interaction");
            return false;
        }
        gw_sim_esp_id_text(id, idt, sizeof(idt));
        if (seen_id(e, idt)) {
            gw_sim_esp_violation(e,
                                 "%s reuses id %s, one of the last %d "
                                 "(refused as esp-mcp refuses it)",
                                 method, idt, ESP_RECENT_IDS);
            invalid_request(e, id, method, "duplicate request id in session");
            return false;
        }
    }
    if (e->gated && !init && strcmp(method, "ping") != 0) {
        e->st.lifecycle_refused++;
        gw_sim_esp_violation(e,
                             "request %s before notifications/initialized "
                             "(refused as esp-mcp refuses it)",
                             method);
        invalid_request(e, id, method, "client not initialized");
        return false;
    }
    return true;
}

/* What the engine forgets on a repeated initialize, before looking at
 * it: subscriptions, remembered ids, the log level, the client's
 * capabilities and the lifecycle. */
static void forget_session(struct gw_sim_esp *e)
{
    for (size_t i = 0; i < e->n_subs; i++) {
        free(e->subs[i]);
    }
    e->n_subs = 0;
    e->update_due_ms = NEVER;
    memset(e->recent_ids, 0, sizeof(e->recent_ids));
    e->recent_next = 0;
    e->log_level = -1;
    e->client_caps = 0;
    e->gated = false;
    e->session_init = false;
}

bool gw_sim_esp_life_initialize(struct gw_sim_esp *e, const cJSON *id,
                                const cJSON *params)
{
    static const char *const known[] = {"2024-11-05", "2025-03-26",
                                        "2025-06-18", "2025-11-25"};
    const cJSON *v =
        cJSON_GetObjectItemCaseSensitive(params, "protocolVersion");
    const cJSON *info = cJSON_GetObjectItemCaseSensitive(params, "clientInfo");
    const char *name =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(info, "name"));
    const char *ver =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(info, "version"));
    const char *s = cJSON_GetStringValue(v);
    bool is_known = false, is_date = s != NULL && strlen(s) == 10;

    if (!e->o.engine_lifecycle) {
        return true;
    }
    if (e->session_init) {
        e->st.reinitializes++;
        forget_session(e);
    }
    for (int i = 0; is_date && i < 10; i++) {
        is_date =
            (i == 4 || i == 7) ? s[i] == '-' : (s[i] >= '0' && s[i] <= '9');
    }
    for (size_t i = 0; is_date && i < sizeof(known) / sizeof(known[0]); i++) {
        is_known = is_known || strcmp(s, known[i]) == 0;
    }
    if (!cJSON_IsObject(params)) {
        invalid_params(e, id, "initialize",
                       "params.protocolVersion+params.capabilities+"
                       "params.clientInfo",
                       "params");
    } else if (s == NULL || s[0] == '\0') {
        invalid_params(e, id, "initialize", "params.protocolVersion",
                       "params.protocolVersion");
    } else if (!is_date) {
        invalid_params(e, id, "initialize", "YYYY-MM-DD",
                       "params.protocolVersion");
    } else if (!is_known) {
        invalid_params(e, id, "initialize", "supported params.protocolVersion",
                       "params.protocolVersion");
    } else if (!cJSON_IsObject(
                   cJSON_GetObjectItemCaseSensitive(params, "capabilities"))) {
        invalid_params(e, id, "initialize", "params.capabilities",
                       "params.capabilities");
    } else if (!cJSON_IsObject(info)) {
        invalid_params(e, id, "initialize", "params.clientInfo",
                       "params.clientInfo");
    } else if (name == NULL || name[0] == '\0') {
        invalid_params(e, id, "initialize", "params.clientInfo.name",
                       "params.clientInfo.name");
    } else if (ver == NULL || ver[0] == '\0') {
        invalid_params(e, id, "initialize", "params.clientInfo.version",
                       "params.clientInfo.version");
    } else {
        return true;
    }
    return false;
}
