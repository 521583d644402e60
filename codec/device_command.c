/*
 * The operator's messages to idle devices: validated against what the
 * firmware reads (its section 5.2 checks, and stricter: a message it
 * would drop is refused here, with the member named) and re-encoded with
 * only those members, so the device gets nothing it was not meant to.
 */
#include "codec/device_command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const type_names[] = {
#define XX(_, name) name,
    GW_DEVICE_COMMAND_TYPE_MAP(XX)
#undef XX
};

const char *gw_device_command_type_name(enum gw_device_command_type type)
{
    return (unsigned)type < GW_DEVICE_COMMAND_TYPE_COUNT_ ? type_names[type]
                                                          : "unknown";
}

static int refuse(char *why, size_t cap, const char *text)
{
    if (why != NULL && cap > 0) {
        snprintf(why, cap, "%s", text);
    }
    return GW_EPROTO;
}

/* A non-empty string member, or NULL. */
static const char *text_of(const cJSON *o, const char *name)
{
    const char *s =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, name));

    return s != NULL && s[0] != '\0' ? s : NULL;
}

static int read_mcp(const cJSON *msg, struct gw_device_command *c, char *why,
                    size_t cap)
{
    const cJSON *payload = cJSON_GetObjectItemCaseSensitive(msg, "payload");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(payload, "params");

    if (!cJSON_IsObject(payload)) {
        return refuse(why, cap, "mcp needs \"payload\" (an object)");
    }
    c->method = text_of(payload, "method");
    if (c->method == NULL) {
        return refuse(why, cap,
                      "mcp needs \"payload\".\"method\" (a non-empty string)");
    }
    if (params != NULL && !cJSON_IsObject(params) && !cJSON_IsArray(params)) {
        return refuse(why, cap,
                      "mcp \"payload\".\"params\" must be an object or array");
    }
    c->params = params;
    c->payload = payload;
    return 0;
}

static int read_alert(const cJSON *msg, struct gw_device_command *c, char *why,
                      size_t cap)
{
    static const char *const names[] = {"status", "message", "emotion"};
    const char **fields[] = {&c->status, &c->message, &c->emotion};

    for (size_t i = 0; i < 3; i++) {
        *fields[i] = text_of(msg, names[i]);
        if (*fields[i] == NULL) {
            if (why != NULL && cap > 0) {
                snprintf(why, cap, "alert needs \"%s\" (a non-empty string)",
                         names[i]);
            }
            return GW_EPROTO;
        }
    }
    return 0;
}

int gw_device_command_read(const cJSON *msg, struct gw_device_command *out,
                           char *why, size_t why_cap)
{
    const char *type = text_of(msg, "type");
    struct gw_device_command c = {0};
    int rc = GW_EPROTO;

    memset(out, 0, sizeof(*out));
    if (why != NULL && why_cap > 0) {
        why[0] = '\0';
    }
    if (!cJSON_IsObject(msg)) {
        return refuse(why, why_cap, "the message must be a JSON object");
    }
    if (type == NULL) {
        return refuse(why, why_cap,
                      "\"type\" must be \"mcp\", \"alert\", \"system\" or "
                      "\"custom\"");
    }
    if (strcmp(type, "mcp") == 0) {
        c.type = GW_DEVICE_COMMAND_MCP;
        rc = read_mcp(msg, &c, why, why_cap);
    } else if (strcmp(type, "alert") == 0) {
        c.type = GW_DEVICE_COMMAND_ALERT;
        rc = read_alert(msg, &c, why, why_cap);
    } else if (strcmp(type, "system") == 0) {
        c.type = GW_DEVICE_COMMAND_SYSTEM;
        c.command = text_of(msg, "command");
        /* The firmware logs any other command and does nothing. */
        rc = c.command != NULL && strcmp(c.command, "reboot") == 0
                 ? 0
                 : refuse(why, why_cap,
                          "system needs \"command\": \"reboot\" (the only "
                          "one the firmware knows)");
    } else if (strcmp(type, "custom") == 0) {
        c.type = GW_DEVICE_COMMAND_CUSTOM;
        c.payload = cJSON_GetObjectItemCaseSensitive(msg, "payload");
        rc = cJSON_IsObject(c.payload)
                 ? 0
                 : refuse(why, why_cap, "custom needs \"payload\" (an object)");
    } else {
        if (why != NULL && why_cap > 0) {
            snprintf(why, why_cap,
                     "unknown \"type\" \"%.32s\": \"mcp\", \"alert\", "
                     "\"system\" or \"custom\"",
                     type);
        }
        return GW_EPROTO;
    }
    if (rc == 0) {
        *out = c;
    }
    return rc;
}

int gw_device_command_encode(const struct gw_device_command *c, size_t max_len,
                             char **out, size_t *len)
{
    cJSON *doc;
    bool ok;
    char *text;
    size_t n;

    *out = NULL;
    *len = 0;
    if (c->type == GW_DEVICE_COMMAND_MCP ||
        (unsigned)c->type >= GW_DEVICE_COMMAND_TYPE_COUNT_) {
        return GW_EINVAL;
    }
    doc = cJSON_CreateObject();
    ok = doc != NULL &&
         cJSON_AddStringToObject(doc, "type",
                                 gw_device_command_type_name(c->type)) != NULL;
    switch (c->type) {
    case GW_DEVICE_COMMAND_ALERT:
        ok = ok && cJSON_AddStringToObject(doc, "status", c->status) != NULL &&
             cJSON_AddStringToObject(doc, "message", c->message) != NULL &&
             cJSON_AddStringToObject(doc, "emotion", c->emotion) != NULL;
        break;
    case GW_DEVICE_COMMAND_SYSTEM:
        ok = ok && cJSON_AddStringToObject(doc, "command", c->command) != NULL;
        break;
    case GW_DEVICE_COMMAND_CUSTOM: {
        cJSON *copy = ok ? cJSON_Duplicate(c->payload, true) : NULL;
        ok = copy != NULL && cJSON_AddItemToObject(doc, "payload", copy);
        if (!ok) {
            cJSON_Delete(copy);
        }
        break;
    }
    default:
        ok = false;
        break;
    }
    text = ok ? cJSON_PrintUnformatted(doc) : NULL;
    cJSON_Delete(doc);
    if (text == NULL) {
        return GW_ENOMEM;
    }
    n = strlen(text);
    if (n > max_len) {
        free(text);
        return GW_ETOOBIG;
    }
    *out = text;
    *len = n;
    return 0;
}

static int read_target(const cJSON *to, size_t max_ids, size_t max_id_len,
                       struct gw_device_target *t, char *why, size_t cap)
{
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(to, "client_ids");
    const cJSON *group = cJSON_GetObjectItemCaseSensitive(to, "group");
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(to, "all");
    const cJSON *id;
    static const char what[] =
        "\"to\" must be {\"client_ids\":[..]}, {\"group\":\"..\"} or "
        "{\"all\":true}";

    if (!cJSON_IsObject(to) ||
        (ids != NULL) + (group != NULL) + (all != NULL) != 1) {
        return refuse(why, cap, what);
    }
    if (all != NULL) {
        if (!cJSON_IsTrue(all)) {
            return refuse(why, cap, what);
        }
        t->kind = GW_DEVICE_TARGET_ALL;
        return 0;
    }
    if (group != NULL) {
        t->group = cJSON_GetStringValue(group);
        if (t->group == NULL || t->group[0] == '\0') {
            return refuse(why, cap,
                          "\"to\".\"group\" must be a non-empty string");
        }
        t->kind = GW_DEVICE_TARGET_GROUP;
        return 0;
    }
    if (!cJSON_IsArray(ids) || cJSON_GetArraySize(ids) == 0) {
        return refuse(why, cap,
                      "\"to\".\"client_ids\" must be a non-empty array");
    }
    cJSON_ArrayForEach(id, ids)
    {
        const char *s = cJSON_GetStringValue(id);
        if (s == NULL || s[0] == '\0' || strlen(s) > max_id_len) {
            return refuse(why, cap,
                          "\"to\".\"client_ids\" must hold client ids "
                          "(non-empty strings)");
        }
        if (++t->n_ids > max_ids) {
            if (why != NULL && cap > 0) {
                snprintf(why, cap, "at most %zu client_ids per request",
                         max_ids);
            }
            return GW_ELIMIT;
        }
    }
    t->ids = ids;
    t->kind = GW_DEVICE_TARGET_IDS;
    return 0;
}

int gw_device_broadcast_read(const cJSON *body, size_t max_ids,
                             size_t max_id_len, struct gw_device_target *to,
                             struct gw_device_command *cmd, char *why,
                             size_t why_cap)
{
    struct gw_device_target t = {0};
    const cJSON *message = cJSON_GetObjectItemCaseSensitive(body, "message");
    int rc;

    memset(to, 0, sizeof(*to));
    memset(cmd, 0, sizeof(*cmd));
    if (!cJSON_IsObject(body)) {
        return refuse(why, why_cap, "the body must be a JSON object");
    }
    rc = read_target(cJSON_GetObjectItemCaseSensitive(body, "to"), max_ids,
                     max_id_len, &t, why, why_cap);
    if (rc != 0) {
        return rc;
    }
    if (!cJSON_IsObject(message)) {
        return refuse(why, why_cap, "\"message\" (an object) is missing");
    }
    rc = gw_device_command_read(message, cmd, why, why_cap);
    if (rc == 0) {
        *to = t;
    }
    return rc;
}
