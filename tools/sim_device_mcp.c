/*
 * The simulated device's MCP server (anchor section 9), pure: JSON-RPC in,
 * the reply the firmware would give out, tools/list paged as it pages.
 */
#include "tools/sim_device.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "codec/envelope.h"

/* ---------------------------------------------------------------------- */
/* A growing string, for replies whose size is not known up front         */

struct sbuf {
    char *p;    /* NUL-terminated text */
    size_t len; /* bytes before the NUL */
    size_t cap; /* bytes allocated */
    bool oom;   /* an allocation failed; p is unusable */
};

static bool sb_reserve(struct sbuf *b, size_t extra)
{
    if (b->oom) {
        return false;
    }
    if (b->len + extra + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + extra + 1) {
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->oom = true;
            return false;
        }
        b->p = p;
        b->cap = cap;
    }
    return true;
}

static void sb_add(struct sbuf *b, const char *s)
{
    size_t n = strlen(s);

    if (sb_reserve(b, n)) {
        memcpy(b->p + b->len, s, n + 1);
        b->len += n;
    }
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
sb_fmt(struct sbuf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    sb_add(b, tmp);
}

/* Appends s as a JSON string; text that is not UTF-8 becomes "". */
static void sb_str(struct sbuf *b, const char *s)
{
    size_t n = strlen(s);

    if (sb_reserve(b, n * 6 + 2) &&
        gw_envelope_write_string(b->p, b->cap, &b->len, s, n) != 0) {
        sb_add(b, "\"\"");
    }
}

/* ---------------------------------------------------------------------- */
/* MCP server of the device                                                */

enum tool_id {
    T_STATUS,
    T_VOLUME,
    T_BRIGHTNESS,
    T_ECHO,
    T_EXTRA,
    T_SYSINFO,
    T_REBOOT
};

/*
 * One tool; its argument, if any, is required: an integer is range
 * checked, a string (arg_string) must be a JSON string.
 */
struct tool {
    const char *name;        /* tool name */
    const char *description; /* shown to MCP clients */
    const char *arg;         /* the argument or NULL */
    int min, max;            /* an integer argument's range */
    bool user_only;          /* listed only with withUserTools */
    enum tool_id id;         /* what a call does */
    bool arg_string;         /* arg is a string, not an integer */
};

static const struct tool common_tools[] = {
    {"self.get_device_status",
     "Provides the real-time information of the device, including the "
     "current status of the audio speaker, screen, battery, network, etc.\n"
     "Use this tool for: \n1. Answering questions about current condition\n"
     "2. As the first step to control the device",
     NULL, 0, 0, false, T_STATUS, false},
    {"self.audio_speaker.set_volume",
     "Set the volume of the audio speaker. If the current volume is "
     "unknown, you must call `self.get_device_status` tool first and then "
     "call this tool.",
     "volume", 0, 100, false, T_VOLUME, false},
    {"self.screen.set_brightness", "Set the brightness of the screen.",
     "brightness", 0, 100, false, T_BRIGHTNESS, false},
};

/* A board tool whose answer names its question: tests tell replies apart. */
static const struct tool echo_tool = {
    .name = "self.sim.echo",
    .description = "Answers with the text it is given.",
    .arg = "text",
    .id = T_ECHO,
    .arg_string = true,
};

static const struct tool user_tools[] = {
    {"self.get_system_info", "Get the system information", NULL, 0, 0, true,
     T_SYSINFO, false},
    {"self.reboot", "Reboot the system", NULL, 0, 0, true, T_REBOOT, false},
};

#define N_COMMON (sizeof(common_tools) / sizeof(common_tools[0]))
#define N_USER   (sizeof(user_tools) / sizeof(user_tools[0]))

void gw_sim_mcp_defaults(struct gw_sim_mcp *m)
{
    memset(m, 0, sizeof(*m));
    m->volume = 70;
    m->brightness = 80;
}

/* Tool i in firmware order: common, board (echo, the synthetic ones),
 * user. */
static size_t tool_count(const struct gw_sim_mcp *m)
{
    return N_COMMON + (m->echo_tool ? 1 : 0) + m->extra_tools + N_USER;
}

static struct tool tool_at(const struct gw_sim_mcp *m, size_t i, char *name,
                           size_t cap)
{
    static const struct tool extra = {
        NULL,
        "A synthetic tool of the simulated device, there to make "
        "tools/list span several pages. It answers true.",
        NULL,
        0,
        0,
        false,
        T_EXTRA,
        false};
    struct tool t;

    if (i < N_COMMON) {
        return common_tools[i];
    }
    i -= N_COMMON;
    if (m->echo_tool) {
        if (i == 0) {
            return echo_tool;
        }
        i--;
    }
    if (i < m->extra_tools) {
        /* One long description for all of them, as firmware with
         * wordy tools has: the catalog grows by their number. */
        static char wordy[GW_SIM_TOOL_BYTES_MAX + 1];
        t = extra;
        snprintf(name, cap, "self.sim.tool_%04zu", i + 1);
        t.name = name;
        if (m->extra_description_bytes > 0) {
            size_t n = m->extra_description_bytes;
            for (size_t k = 0; k < n; k++) {
                wordy[k] = extra.description[k % strlen(extra.description)];
            }
            wordy[n] = '\0';
            t.description = wordy;
        }
        return t;
    }
    return user_tools[i - m->extra_tools];
}

static void tool_json(struct sbuf *b, const struct tool *t)
{
    sb_add(b, "{\"name\":");
    sb_str(b, t->name);
    sb_add(b, ",\"description\":");
    sb_str(b, t->description);
    sb_add(b, ",\"inputSchema\":{\"type\":\"object\",\"properties\":{");
    if (t->arg != NULL && t->arg_string) {
        sb_fmt(b, "\"%s\":{\"type\":\"string\"}},\"required\":[\"%s\"]}",
               t->arg, t->arg);
    } else if (t->arg != NULL) {
        sb_fmt(b,
               "\"%s\":{\"type\":\"integer\",\"minimum\":%d,"
               "\"maximum\":%d}},\"required\":[\"%s\"]}",
               t->arg, t->min, t->max, t->arg);
    } else {
        sb_add(b, "}}");
    }
    if (t->user_only) {
        sb_add(b, ",\"annotations\":{\"audience\":[\"user\"]}");
    }
    sb_add(b, "}");
}

cJSON *gw_sim_mcp_tools_json(const struct gw_sim_mcp *m, bool with_user)
{
    struct sbuf b = {0};
    char name[64];
    cJSON *arr;

    sb_add(&b, "[");
    for (size_t i = 0; i < tool_count(m); i++) {
        struct tool tl = tool_at(m, i, name, sizeof(name));
        if (tl.user_only && !with_user) {
            continue;
        }
        if (b.len > 1) {
            sb_add(&b, ",");
        }
        tool_json(&b, &tl);
    }
    sb_add(&b, "]");
    arr = b.oom ? NULL : cJSON_Parse(b.p);
    free(b.p);
    return arr;
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void
reply_error(struct sbuf *b, int id, const char *fmt, ...)
{
    char text[600];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    b->len = 0;
    if (b->p != NULL) {
        b->p[0] = '\0';
    }
    sb_fmt(b, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"error\":{\"message\":", id);
    sb_str(b, text);
    sb_add(b, "}}");
}

static void reply_text(struct sbuf *b, int id, const char *text)
{
    sb_fmt(b,
           "{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{\"content\":"
           "[{\"type\":\"text\",\"text\":",
           id);
    sb_str(b, text);
    sb_add(b, "}],\"isError\":false}}");
}

/* Pages cut near 8000 bytes, measured as the firmware measures them. */
static void tools_list(struct gw_sim_mcp *m, struct sbuf *b, int id,
                       const cJSON *params)
{
    const char *cursor = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(params, "cursor"));
    bool with_user =
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(params, "withUserTools"));
    bool found = cursor == NULL || cursor[0] == '\0';
    char name[64], next[64] = "";
    struct sbuf t = {0};

    sb_fmt(b, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{\"tools\":[", id);
    for (size_t i = 0; i < tool_count(m); i++) {
        struct tool tl = tool_at(m, i, name, sizeof(name));
        if (!found) {
            found = strcmp(tl.name, cursor) == 0;
            if (!found) {
                continue;
            }
        }
        if (tl.user_only && !with_user) {
            continue;
        }
        t.len = 0;
        tool_json(&t, &tl);
        sb_add(&t, ",");
        if (t.oom || b->len + t.len + 30 > GW_SIM_MCP_PAGE_BYTES) {
            snprintf(next, sizeof(next), "%s", tl.name);
            break;
        }
        sb_add(b, t.p);
    }
    free(t.p);
    if (b->len > 0 && !b->oom && b->p[b->len - 1] == ',') {
        b->p[--b->len] = '\0';
    }
    if (!b->oom && b->p[b->len - 1] == '[') {
        /* Also what an unknown cursor or only hidden tools give. */
        reply_error(
            b, id, "Failed to add tool %s because of payload size limit", next);
        return;
    }
    if (next[0] != '\0') {
        sb_fmt(b, "],\"nextCursor\":\"%s\"}}", next);
    } else {
        sb_add(b, "]}}");
    }
}

static void status_text(const struct gw_sim_mcp *m, char *out, size_t cap)
{
    snprintf(out, cap,
             "{\"audio_speaker\":{\"volume\":%d},\"screen\":{\"brightness\":"
             "%d,\"theme\":\"light\"},\"battery\":{\"level\":87,\"charging\":"
             "false},\"network\":{\"type\":\"wifi\",\"ssid\":\"hybridgw-sim\","
             "\"signal\":\"strong\"}}",
             m->volume, m->brightness);
}

static void tools_call(struct gw_sim_mcp *m, struct sbuf *b, int id,
                       const cJSON *params)
{
    const cJSON *name, *args;
    char buf[64], text[512];
    struct tool t;
    size_t i;

    if (!cJSON_IsObject(params)) {
        reply_error(b, id, "Missing params");
        return;
    }
    name = cJSON_GetObjectItemCaseSensitive(params, "name");
    args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
    if (!cJSON_IsString(name)) {
        reply_error(b, id, "Missing name");
        return;
    }
    if (args != NULL && !cJSON_IsObject(args)) {
        reply_error(b, id, "Invalid arguments");
        return;
    }
    for (i = 0; i < tool_count(m); i++) {
        t = tool_at(m, i, buf, sizeof(buf));
        if (strcmp(t.name, name->valuestring) == 0) {
            break;
        }
    }
    if (i == tool_count(m)) {
        reply_error(b, id, "Unknown tool: %s", name->valuestring);
        return;
    }
    int value = 0;
    const char *str = NULL;
    if (t.arg != NULL && t.arg_string) {
        str =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(args, t.arg));
        if (str == NULL) {
            reply_error(b, id, "Missing valid argument: %s", t.arg);
            return;
        }
    } else if (t.arg != NULL) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, t.arg);
        if (!cJSON_IsNumber(v)) {
            reply_error(b, id, "Missing valid argument: %s", t.arg);
            return;
        }
        value = v->valueint;
        if (value < t.min) {
            reply_error(b, id, "Value is below minimum allowed: %d", t.min);
            return;
        }
        if (value > t.max) {
            reply_error(b, id, "Value exceeds maximum allowed: %d", t.max);
            return;
        }
    }
    snprintf(text, sizeof(text), "true");
    if (t.id == T_STATUS) {
        status_text(m, text, sizeof(text));
    } else if (t.id == T_VOLUME) {
        m->volume = value;
    } else if (t.id == T_BRIGHTNESS) {
        m->brightness = value;
    } else if (t.id == T_ECHO) {
        m->calls++;
        reply_text(b, id, str); /* any length: it is the caller's text */
        return;
    } else if (t.id == T_SYSINFO) {
        snprintf(text, sizeof(text),
                 "{\"board\":\"hybridgw-sim\",\"version\":\"2.4.2\"}");
    }
    m->calls++;
    reply_text(b, id, text);
}

int gw_sim_mcp_handle(struct gw_sim_mcp *m, const cJSON *msg, char **reply,
                      size_t *reply_len)
{
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(msg, "jsonrpc");
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
    const cJSON *idj = cJSON_GetObjectItemCaseSensitive(msg, "id");
    struct sbuf b = {0};

    *reply = NULL;
    *reply_len = 0;
    if (!cJSON_IsObject(msg) || !cJSON_IsString(ver) ||
        strcmp(ver->valuestring, "2.0") != 0 || !cJSON_IsString(method)) {
        m->ignored++;
        return 0;
    }
    if (m->silent) {
        if (strcmp(method->valuestring, "notifications/cancelled") == 0) {
            m->cancelled++;
        }
        m->ignored++;
        return 0;
    }
    if (strncmp(method->valuestring, "notifications", 13) == 0) {
        if (strcmp(method->valuestring, "notifications/cancelled") == 0) {
            m->cancelled++; /* counted for tests; ignored as by firmware */
        }
        return 0; /* no reply, by design */
    }
    if ((params != NULL && !cJSON_IsObject(params)) || !cJSON_IsNumber(idj)) {
        m->ignored++; /* string ids included: dropped without a word */
        return 0;
    }
    int id = idj->valueint;
    const char *meth = method->valuestring;
    if (m->ignore_first > 0 &&
        (strcmp(meth, "initialize") == 0 || strcmp(meth, "tools/list") == 0)) {
        m->ignore_first--; /* late: the gateway gives up before we answer */
        m->ignored++;
        return 0;
    }
    if (strcmp(meth, "initialize") == 0) {
        const cJSON *caps =
            cJSON_GetObjectItemCaseSensitive(params, "capabilities");
        const cJSON *vision = cJSON_GetObjectItemCaseSensitive(caps, "vision");
        if (cJSON_IsObject(vision)) {
            const char *url = cJSON_GetStringValue(
                cJSON_GetObjectItemCaseSensitive(vision, "url"));
            m->vision_seen = true;
            if (url != NULL && strlen(url) < sizeof(m->vision_url)) {
                memcpy(m->vision_url, url, strlen(url) + 1);
            }
            const char *token = cJSON_GetStringValue(
                cJSON_GetObjectItemCaseSensitive(vision, "token"));
            if (token != NULL && strlen(token) < sizeof(m->vision_token)) {
                memcpy(m->vision_token, token, strlen(token) + 1);
            }
        }
        m->initializes++;
        sb_fmt(&b, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{", id);
        sb_add(&b, "\"protocolVersion\":\"2024-11-05\",\"capabilities\":"
                   "{\"tools\":{}},\"serverInfo\":{\"name\":\"hybridgw-sim\","
                   "\"version\":\"2.4.2\"}}}");
    } else if (strcmp(meth, "tools/list") == 0) {
        m->lists++;
        tools_list(m, &b, id, params);
    } else if (strcmp(meth, "tools/call") == 0) {
        tools_call(m, &b, id, params);
    } else {
        reply_error(&b, id, "Method not implemented: %s", meth);
    }
    if (b.oom) {
        free(b.p);
        return GW_ENOMEM;
    }
    m->answered++;
    *reply = b.p;
    *reply_len = b.len;
    return 0;
}
