/*
 * Messages an operator pushes to a device outside a conversation, taken
 * with the firmware's checks (its section 5.2): an alert needs its three
 * strings, only the "reboot" system command does anything, a custom
 * message needs an object payload (boards built with
 * CONFIG_RECEIVE_CUSTOM_MESSAGE, as this one pretends to be), and none of
 * them looks at session_id. What was taken is recorded for tests; what
 * the firmware would drop is counted as ignored.
 */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tools/sim_device_int.h"

/* Copies s into out, cut to fit. */
static void keep(char *out, size_t cap, const char *s)
{
    snprintf(out, cap, "%s", s != NULL ? s : "");
}

static void on_alert(struct gw_sim_device *d, const cJSON *root)
{
    const char *status =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "status"));
    const char *message =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "message"));
    const char *emotion =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "emotion"));

    if (status == NULL || message == NULL || emotion == NULL) {
        d->r.alert_ignored++;
        gw_sim_dev_event(d, "< alert without status, message and emotion "
                            "strings (ignored, as the firmware does)");
        return;
    }
    d->r.alert_count++;
    keep(d->r.alert_status, sizeof(d->r.alert_status), status);
    keep(d->r.alert_message, sizeof(d->r.alert_message), message);
    keep(d->r.alert_emotion, sizeof(d->r.alert_emotion), emotion);
    gw_sim_dev_event(d, "< alert status=%s message=%s emotion=%s (%s)", status,
                     message, emotion,
                     d->channel_open ? "in a conversation" : "idle");
}

static void on_system(struct gw_sim_device *d, const cJSON *root)
{
    const char *command =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "command"));

    if (command == NULL || strcmp(command, "reboot") != 0) {
        d->r.system_ignored++;
        gw_sim_dev_event(d, "< system command=%s (unknown, logged only)",
                         command != NULL ? command : "-");
        return;
    }
    d->r.system_count++;
    d->r.reboots++;
    gw_sim_dev_event(d, "< system command=reboot (%s)",
                     d->channel_open ? "closing the channel first" : "idle");
    if (d->channel_open) {
        gw_sim_dev_goodbye(d); /* close the channel, then reboot */
    }
}

static void on_custom(struct gw_sim_device *d, const cJSON *root)
{
    const cJSON *payload = cJSON_GetObjectItemCaseSensitive(root, "payload");
    char *text;

    if (!cJSON_IsObject(payload)) {
        d->r.custom_ignored++;
        gw_sim_dev_event(d, "< custom without an object payload (ignored)");
        return;
    }
    d->r.custom_count++;
    text = cJSON_PrintUnformatted(payload);
    keep(d->r.custom_payload, sizeof(d->r.custom_payload), text);
    gw_sim_dev_event(d, "< custom payload=%s", d->r.custom_payload);
    cJSON_free(text);
}

bool gw_sim_dev_on_push(struct gw_sim_device *d, const struct gw_envelope *env)
{
    switch (env->kind) {
    case GW_MSG_ALERT:
        on_alert(d, env->root);
        return true;
    case GW_MSG_SYSTEM:
        on_system(d, env->root);
        return true;
    case GW_MSG_CUSTOM:
        on_custom(d, env->root);
        return true;
    default:
        return false;
    }
}
