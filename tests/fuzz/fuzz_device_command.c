/*
 * Pushed messages and fan-out bodies, parsed as the API parses them.
 * Invariants: an accepted message has what its type needs; an encoded
 * one fits the limit, parses back to the same command, and carries only
 * the members the firmware reads; a refusal says why and leaves the
 * results zeroed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/device_command.h"
#include "codec/envelope.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_command(const struct gw_device_command *c)
{
    char *text = NULL;
    size_t len = 0;
    int rc;

    switch (c->type) {
    case GW_DEVICE_COMMAND_MCP:
        if (c->method == NULL || c->method[0] == '\0' ||
            (c->params != NULL && !cJSON_IsObject(c->params) &&
             !cJSON_IsArray(c->params))) {
            abort();
        }
        return;
    case GW_DEVICE_COMMAND_ALERT:
        if (c->status == NULL || c->message == NULL || c->emotion == NULL ||
            !c->status[0] || !c->message[0] || !c->emotion[0]) {
            abort();
        }
        break;
    case GW_DEVICE_COMMAND_SYSTEM:
        if (c->command == NULL || strcmp(c->command, "reboot") != 0) {
            abort();
        }
        break;
    case GW_DEVICE_COMMAND_CUSTOM:
        if (!cJSON_IsObject(c->payload)) {
            abort();
        }
        break;
    default:
        abort();
    }
    rc = gw_device_command_encode(c, GW_ENVELOPE_DEVICE_MAX, &text, &len);
    if (rc == 0) {
        cJSON *back = cJSON_ParseWithLength(text, len);
        struct gw_device_command again;
        if (len > GW_ENVELOPE_DEVICE_MAX || back == NULL ||
            gw_device_command_read(back, &again, NULL, 0) != 0 ||
            again.type != c->type ||
            cJSON_GetArraySize(back) !=
                (c->type == GW_DEVICE_COMMAND_ALERT ? 4 : 2)) {
            abort();
        }
        cJSON_Delete(back);
        free(text);
    } else if (rc != GW_ETOOBIG && rc != GW_ENOMEM) {
        abort();
    } else if (text != NULL) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *doc = NULL;
    struct gw_device_command c;
    struct gw_device_target to;
    char why[160];
    int rc;

    if (gw_json_object_parse((const char *)data, size, 65536, &doc) != 0) {
        return 0;
    }
    rc = gw_device_command_read(doc, &c, why, sizeof(why));
    if (rc == 0) {
        check_command(&c);
    } else if (rc != GW_EPROTO || why[0] == '\0' || c.method != NULL ||
               c.payload != NULL) {
        abort();
    }
    rc = gw_device_broadcast_read(doc, 8, 128, &to, &c, why, sizeof(why));
    if (rc == 0) {
        if (to.kind == GW_DEVICE_TARGET_IDS &&
            (to.n_ids == 0 || to.n_ids > 8 ||
             (size_t)cJSON_GetArraySize(to.ids) != to.n_ids)) {
            abort();
        }
        if (to.kind == GW_DEVICE_TARGET_GROUP &&
            (to.group == NULL || to.group[0] == '\0')) {
            abort();
        }
        check_command(&c);
    } else if ((rc != GW_EPROTO && rc != GW_ELIMIT) || why[0] == '\0' ||
               to.ids != NULL || to.group != NULL) {
        abort();
    }
    cJSON_Delete(doc);
    return 0;
}
