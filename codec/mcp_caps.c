/*
 * MCP capabilities: reading a device's initialize result and a client's
 * initialize params, writing the gateway's own, and the table of which
 * capability each method needs.
 */
#include "codec/mcp_caps.h"

#include <string.h>

#include "codec/envelope.h"

/* Each sub-capability and the bit it cannot be offered without. */
static const struct {
    unsigned bit, parent;
} sub_caps[] = {
    {GW_MCP_CAP_TOOLS_LIST_CHANGED, GW_MCP_CAP_TOOLS},
    {GW_MCP_CAP_RESOURCES_SUBSCRIBE, GW_MCP_CAP_RESOURCES},
    {GW_MCP_CAP_RESOURCES_LIST_CHANGED, GW_MCP_CAP_RESOURCES},
    {GW_MCP_CAP_PROMPTS_LIST_CHANGED, GW_MCP_CAP_PROMPTS},
    {GW_MCP_CAP_TASKS_LIST, GW_MCP_CAP_TASKS},
    {GW_MCP_CAP_TASKS_CANCEL, GW_MCP_CAP_TASKS},
};

/* The requests a server may lack; anything else needs nothing. */
static const struct {
    const char *method;
    unsigned cap;
} method_caps[] = {
    {"tools/list", GW_MCP_CAP_TOOLS},
    {"tools/call", GW_MCP_CAP_TOOLS},
    {"resources/list", GW_MCP_CAP_RESOURCES},
    {"resources/templates/list", GW_MCP_CAP_RESOURCES},
    {"resources/read", GW_MCP_CAP_RESOURCES},
    /* Unsubscribing is only meaningful where subscribing is. */
    {"resources/subscribe", GW_MCP_CAP_RESOURCES_SUBSCRIBE},
    {"resources/unsubscribe", GW_MCP_CAP_RESOURCES_SUBSCRIBE},
    {"prompts/list", GW_MCP_CAP_PROMPTS},
    {"prompts/get", GW_MCP_CAP_PROMPTS},
    {"completion/complete", GW_MCP_CAP_COMPLETIONS},
    {"logging/setLevel", GW_MCP_CAP_LOGGING},
    /* A task exists only if tools/call could create one. */
    {"tasks/get", GW_MCP_CAP_TASKS},
    {"tasks/result", GW_MCP_CAP_TASKS},
    {"tasks/list", GW_MCP_CAP_TASKS_LIST},
    {"tasks/cancel", GW_MCP_CAP_TASKS_CANCEL},
};

static const struct {
    const char *method;
    unsigned cap;
} client_method_caps[] = {
    {"sampling/createMessage", GW_MCP_CLIENT_CAP_SAMPLING},
    {"elicitation/create", GW_MCP_CLIENT_CAP_ELICITATION},
    {"roots/list", GW_MCP_CLIENT_CAP_ROOTS},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

unsigned gw_mcp_caps_normalize(unsigned caps)
{
    caps &= GW_MCP_CAPS_ALL;
    for (size_t i = 0; i < COUNT(sub_caps); i++) {
        if ((caps & sub_caps[i].parent) == 0) {
            caps &= ~sub_caps[i].bit;
        }
    }
    return caps;
}

/* A flag member (listChanged, subscribe): its bit when it is true. */
static int flag(const cJSON *obj, const char *key, unsigned bit, unsigned *caps)
{
    const cJSON *m;

    if (gw_json_unique_member(obj, key, &m) != 0) {
        return GW_EPROTO;
    }
    if (cJSON_IsTrue(m)) {
        *caps |= bit;
    }
    return 0;
}

/* Whether obj.key (unique) is an object; *err set on a repeated key. */
static const cJSON *object_member(const cJSON *obj, const char *key, int *err)
{
    const cJSON *m;

    if (!cJSON_IsObject(obj)) {
        return NULL;
    }
    if (gw_json_unique_member(obj, key, &m) != 0) {
        *err = GW_EPROTO;
        return NULL;
    }
    return cJSON_IsObject(m) ? m : NULL;
}

/* tasks: its bit is tasks.requests.tools.call, the one task-augmented
 * request a server takes; list and cancel only count beside it. */
static int tasks_caps(const cJSON *tasks, unsigned *caps)
{
    const cJSON *requests, *tools;
    int err = 0;

    requests = object_member(tasks, "requests", &err);
    tools = object_member(requests, "tools", &err);
    if (object_member(tools, "call", &err) != NULL) {
        *caps |= GW_MCP_CAP_TASKS;
    }
    if (object_member(tasks, "list", &err) != NULL) {
        *caps |= GW_MCP_CAP_TASKS_LIST;
    }
    if (object_member(tasks, "cancel", &err) != NULL) {
        *caps |= GW_MCP_CAP_TASKS_CANCEL;
    }
    return err;
}

static int server_caps(const cJSON *c, unsigned *caps)
{
    const cJSON *tools, *resources, *prompts, *tasks;
    int err = 0;

    tools = object_member(c, "tools", &err);
    resources = object_member(c, "resources", &err);
    prompts = object_member(c, "prompts", &err);
    tasks = object_member(c, "tasks", &err);
    if (object_member(c, "completions", &err) != NULL) {
        *caps |= GW_MCP_CAP_COMPLETIONS;
    }
    if (object_member(c, "logging", &err) != NULL) {
        *caps |= GW_MCP_CAP_LOGGING;
    }
    if (err != 0) {
        return err;
    }
    if (tools != NULL) {
        *caps |= GW_MCP_CAP_TOOLS;
        err |= flag(tools, "listChanged", GW_MCP_CAP_TOOLS_LIST_CHANGED, caps);
    }
    if (resources != NULL) {
        *caps |= GW_MCP_CAP_RESOURCES;
        err |=
            flag(resources, "subscribe", GW_MCP_CAP_RESOURCES_SUBSCRIBE, caps);
        err |= flag(resources, "listChanged", GW_MCP_CAP_RESOURCES_LIST_CHANGED,
                    caps);
    }
    if (prompts != NULL) {
        *caps |= GW_MCP_CAP_PROMPTS;
        err |=
            flag(prompts, "listChanged", GW_MCP_CAP_PROMPTS_LIST_CHANGED, caps);
    }
    if (tasks != NULL) {
        err |= tasks_caps(tasks, caps);
    }
    return err != 0 ? GW_EPROTO : 0;
}

/*
 * Copies a string that may be cut into cap bytes, never inside a UTF-8
 * sequence: the name goes into logs and JSON, where half a character
 * would make the whole text invalid.
 */
static void copy_cut(char *dst, size_t cap, const char *src)
{
    size_t n = 0;

    while (n < cap - 1 && src[n] != '\0') {
        n++;
    }
    if (src[n] != '\0') {
        /* Cut: step back to the start of the sequence at the cut. */
        while (n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80) {
            n--;
        }
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
}

int gw_mcp_server_info_parse(const cJSON *result,
                             struct gw_mcp_server_info *out)
{
    const cJSON *caps, *version, *info, *name, *ver;
    size_t len;

    if (result == NULL || out == NULL) {
        return GW_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    if (!cJSON_IsObject(result) ||
        gw_json_unique_member(result, "capabilities", &caps) != 0 ||
        gw_json_unique_member(result, "protocolVersion", &version) != 0 ||
        gw_json_unique_member(result, "serverInfo", &info) != 0) {
        return GW_EPROTO;
    }
    if (caps != NULL &&
        (!cJSON_IsObject(caps) || server_caps(caps, &out->caps) != 0)) {
        out->caps = 0;
        return GW_EPROTO;
    }
    out->caps = gw_mcp_caps_normalize(out->caps);
    /* A version that does not fit is not one the gateway knows: "". */
    if (cJSON_IsString(version) && version->valuestring != NULL) {
        len = strnlen(version->valuestring, sizeof(out->version));
        if (len < sizeof(out->version)) {
            memcpy(out->version, version->valuestring, len + 1);
        }
    }
    if (cJSON_IsObject(info)) {
        name = cJSON_GetObjectItemCaseSensitive(info, "name");
        ver = cJSON_GetObjectItemCaseSensitive(info, "version");
        if (cJSON_IsString(name) && name->valuestring != NULL) {
            copy_cut(out->name, sizeof(out->name), name->valuestring);
        }
        if (cJSON_IsString(ver) && ver->valuestring != NULL) {
            copy_cut(out->server_ver, sizeof(out->server_ver),
                     ver->valuestring);
        }
    }
    return 0;
}

unsigned gw_mcp_client_caps_parse(const cJSON *params)
{
    static const struct {
        const char *key;
        unsigned bit;
    } keys[] = {
#define XX(name, _, key) {key, GW_MCP_CLIENT_CAP_##name},
        GW_MCP_CLIENT_CAP_MAP(XX)
#undef XX
    };
    const cJSON *caps;
    unsigned out = 0;
    int err = 0;

    caps = object_member(params, "capabilities", &err);
    for (size_t i = 0; caps != NULL && i < COUNT(keys); i++) {
        if (object_member(caps, keys[i].key, &err) != NULL) {
            out |= keys[i].bit;
        }
    }
    return err == 0 ? out : 0;
}

/* Adds an empty object named key to obj; the new object, NULL on OOM. */
static cJSON *add_object(cJSON *obj, const char *key)
{
    return obj != NULL ? cJSON_AddObjectToObject(obj, key) : NULL;
}

/* tasks{list{},cancel{},requests{tools{call{}}}} for the task bits. */
static bool add_tasks(cJSON *caps, unsigned bits)
{
    cJSON *tasks = add_object(caps, "tasks");
    cJSON *requests;

    if (tasks == NULL ||
        ((bits & GW_MCP_CAP_TASKS_LIST) && add_object(tasks, "list") == NULL) ||
        ((bits & GW_MCP_CAP_TASKS_CANCEL) &&
         add_object(tasks, "cancel") == NULL)) {
        return false;
    }
    requests = add_object(tasks, "requests");
    return add_object(add_object(requests, "tools"), "call") != NULL;
}

/* name{flag:true,...} with a flag for each set bit of flags. */
static bool add_with_flags(cJSON *caps, const char *name, unsigned bits,
                           unsigned flag1, const char *key1, unsigned flag2,
                           const char *key2)
{
    cJSON *o = add_object(caps, name);

    return o != NULL &&
           (!(bits & flag1) || cJSON_AddTrueToObject(o, key1) != NULL) &&
           (!(bits & flag2) || cJSON_AddTrueToObject(o, key2) != NULL);
}

cJSON *gw_mcp_caps_json(unsigned caps)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o != NULL;

    /* Sub-capabilities never appear without their parent: a reader (this
     * file's own parse among them) would ignore them. */
    caps = gw_mcp_caps_normalize(caps);
    if (ok && (caps & GW_MCP_CAP_TOOLS)) {
        ok = add_with_flags(o, "tools", caps, GW_MCP_CAP_TOOLS_LIST_CHANGED,
                            "listChanged", 0, NULL);
    }
    if (ok && (caps & GW_MCP_CAP_RESOURCES)) {
        ok = add_with_flags(o, "resources", caps,
                            GW_MCP_CAP_RESOURCES_SUBSCRIBE, "subscribe",
                            GW_MCP_CAP_RESOURCES_LIST_CHANGED, "listChanged");
    }
    if (ok && (caps & GW_MCP_CAP_PROMPTS)) {
        ok = add_with_flags(o, "prompts", caps, GW_MCP_CAP_PROMPTS_LIST_CHANGED,
                            "listChanged", 0, NULL);
    }
    if (ok && (caps & GW_MCP_CAP_COMPLETIONS)) {
        ok = add_object(o, "completions") != NULL;
    }
    if (ok && (caps & GW_MCP_CAP_LOGGING)) {
        ok = add_object(o, "logging") != NULL;
    }
    if (ok && (caps & GW_MCP_CAP_TASKS)) {
        ok = add_tasks(o, caps);
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

unsigned gw_mcp_method_cap(const char *method)
{
    if (method == NULL) {
        return 0;
    }
    for (size_t i = 0; i < COUNT(method_caps); i++) {
        if (strcmp(method, method_caps[i].method) == 0) {
            return method_caps[i].cap;
        }
    }
    return 0;
}

unsigned gw_mcp_method_client_cap(const char *method)
{
    if (method == NULL) {
        return 0;
    }
    for (size_t i = 0; i < COUNT(client_method_caps); i++) {
        if (strcmp(method, client_method_caps[i].method) == 0) {
            return client_method_caps[i].cap;
        }
    }
    return 0;
}

const char *gw_mcp_cap_name(unsigned cap)
{
    switch (cap) {
#define XX(name, _, text)                                                      \
    case GW_MCP_CAP_##name:                                                    \
        return text;
        GW_MCP_CAP_MAP(XX)
#undef XX
    default:
        return "?";
    }
}

const char *gw_mcp_client_cap_name(unsigned cap)
{
    switch (cap) {
#define XX(name, _, text)                                                      \
    case GW_MCP_CLIENT_CAP_##name:                                             \
        return text;
        GW_MCP_CLIENT_CAP_MAP(XX)
#undef XX
    default:
        return "?";
    }
}

static const char *const level_names[] = {
#define XX(_, text) text,
    GW_MCP_LOG_LEVEL_MAP(XX)
#undef XX
};

int gw_mcp_log_level_parse(const char *s, enum gw_mcp_log_level *out)
{
    if (s == NULL || out == NULL) {
        return GW_EINVAL;
    }
    for (size_t i = 0; i < COUNT(level_names); i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum gw_mcp_log_level)i;
            return 0;
        }
    }
    return GW_EPROTO;
}

const char *gw_mcp_log_level_name(enum gw_mcp_log_level level)
{
    if ((unsigned)level >= COUNT(level_names)) {
        return "?";
    }
    return level_names[level];
}
