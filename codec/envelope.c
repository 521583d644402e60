/*
 * JSON envelopes: strict framing around cJSON (which neither checks UTF-8
 * nor refuses raw control characters), member lookup that refuses a
 * repeated member, and the goodbye builder.
 */
#include "codec/envelope.h"

#include <string.h>

#include "codec/utf8.h"

/* Type strings in enum order, index 0 (OTHER) unused. */
static const char *const type_names[GW_MSG_TYPE_COUNT_] = {
#define XX(name, text) [GW_MSG_##name] = text,
    GW_MSG_TYPE_MAP(XX)
#undef XX
};

enum gw_msg_type gw_envelope_type(const char *type)
{
    if (type == NULL) {
        return GW_MSG_OTHER;
    }
    for (size_t i = 1; i < GW_MSG_TYPE_COUNT_; i++) {
        if (strcmp(type, type_names[i]) == 0) {
            return (enum gw_msg_type)i;
        }
    }
    return GW_MSG_OTHER;
}

/* True if buf[i..len) starts the escape body "u0000" (after a backslash). */
static bool is_nul_escape(const char *buf, size_t len, size_t i)
{
    return len - i >= 5 && memcmp(buf + i, "u0000", 5) == 0;
}

/*
 * One pass over the raw text before cJSON sees it: bounds nesting (cJSON
 * recurses per level), and refuses what cJSON would accept but other
 * parsers would not or would read differently: NUL bytes anywhere, raw
 * control characters inside strings (RFC 8259 section 7) or outside them
 * (other than the four whitespace bytes), and \u0000, which cJSON
 * silently turns into a truncated C string.
 */
static int prescan(const char *buf, size_t len)
{
    size_t depth = 0;
    bool in_string = false;

    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (c == 0) {
            return GW_EMALFORMED;
        }
        if (in_string) {
            if (c < 0x20) {
                return GW_EMALFORMED;
            }
            if (c == '\\') {
                if (i + 1 < len && ((unsigned char)buf[i + 1] < 0x20 ||
                                    is_nul_escape(buf, len, i + 1))) {
                    return GW_EMALFORMED;
                }
                i++; /* the escaped character cannot end the string */
            } else if (c == '"') {
                in_string = false;
            }
            continue;
        }
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
            return GW_EMALFORMED; /* cJSON would skip it as whitespace */
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            if (++depth > GW_ENVELOPE_MAX_DEPTH) {
                return GW_EMALFORMED;
            }
        } else if (c == '}' || c == ']') {
            if (depth == 0) {
                return GW_EMALFORMED;
            }
            depth--;
        }
    }
    return 0;
}

static bool is_json_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int gw_json_unique_member(const cJSON *obj, const char *key, const cJSON **out)
{
    const cJSON *child;

    *out = NULL;
    cJSON_ArrayForEach(child, obj)
    {
        if (child->string != NULL && strcmp(child->string, key) == 0) {
            if (*out != NULL) {
                return GW_EPROTO;
            }
            *out = child;
        }
    }
    return 0;
}

/* Fills type, session_id and kind from a parsed object. */
static int read_header(struct gw_envelope *env)
{
    const cJSON *type, *sid;
    int err;

    if ((err = gw_json_unique_member(env->root, "type", &type)) != 0 ||
        (err = gw_json_unique_member(env->root, "session_id", &sid)) != 0) {
        return err;
    }
    if (!cJSON_IsString(type) || type->valuestring[0] == '\0') {
        return GW_EPROTO;
    }
    if (sid != NULL && !cJSON_IsString(sid)) {
        return GW_EPROTO;
    }
    env->type = type->valuestring;
    env->session_id = sid != NULL ? sid->valuestring : NULL;
    env->kind = gw_envelope_type(env->type);
    return 0;
}

int gw_json_object_parse(const char *buf, size_t len, size_t max_len,
                         cJSON **out)
{
    const char *end = NULL;
    cJSON *root;
    int err;

    if (out == NULL) {
        return GW_EINVAL;
    }
    *out = NULL;
    if (buf == NULL && len != 0) {
        return GW_EINVAL;
    }
    if (len > max_len) {
        return GW_ETOOBIG;
    }
    if (!gw_utf8_valid(buf, len)) {
        return GW_EUTF8;
    }
    if (len == 0) {
        return GW_EMALFORMED;
    }
    if ((err = prescan(buf, len)) != 0) {
        return err;
    }
    /* Not "require NUL-terminated": that option wants a NUL inside len
     * and so refuses an exact buffer; the tail is checked here instead. */
    root = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
    if (root == NULL) {
        return GW_EMALFORMED;
    }
    while (end < buf + len && is_json_space(*end)) {
        end++;
    }
    if (end != buf + len || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return GW_EMALFORMED;
    }
    *out = root;
    return 0;
}

int gw_envelope_parse(const char *buf, size_t len, size_t max_len,
                      struct gw_envelope *env)
{
    int err;

    if (env == NULL) {
        return GW_EINVAL;
    }
    memset(env, 0, sizeof(*env));
    err = gw_json_object_parse(buf, len, max_len, &env->root);
    if (err == 0) {
        err = read_header(env);
    }
    if (err != 0) {
        gw_envelope_free(env);
    }
    return err;
}

void gw_envelope_free(struct gw_envelope *env)
{
    if (env == NULL) {
        return;
    }
    cJSON_Delete(env->root);
    memset(env, 0, sizeof(*env));
}

int gw_envelope_set_session_id(struct gw_envelope *env, const char *sid)
{
    cJSON *old, *item;

    if (env == NULL || env->root == NULL) {
        return GW_EINVAL;
    }
    old = cJSON_GetObjectItemCaseSensitive(env->root, "session_id");
    if (sid == NULL) {
        cJSON_Delete(cJSON_DetachItemViaPointer(env->root, old));
        env->session_id = NULL;
        return 0;
    }
    if (!gw_utf8_valid(sid, strlen(sid))) {
        return GW_EUTF8;
    }
    if ((item = cJSON_CreateString(sid)) == NULL) {
        return GW_ENOMEM;
    }
    if (old != NULL) {
        /* Replacing in place keeps the sender's key order. old is the
         * only session_id (the parse refused repeats), so the lookup by
         * name finds it. The key is copied last: out of memory there
         * leaves an unnamed member, which is removed. */
        if (!cJSON_ReplaceItemInObjectCaseSensitive(env->root, "session_id",
                                                    item)) {
            cJSON_Delete(item);
            return GW_ENOMEM;
        }
        if (item->string == NULL) {
            cJSON_Delete(cJSON_DetachItemViaPointer(env->root, item));
            env->session_id = NULL;
            return GW_ENOMEM;
        }
        env->session_id = item->valuestring;
        return 0;
    }
    if (!cJSON_AddItemToObject(env->root, "session_id", item)) {
        cJSON_Delete(item);
        return GW_ENOMEM;
    }
    env->session_id = item->valuestring;
    return 0;
}

int gw_envelope_print(const struct gw_envelope *env, size_t max_len, char **out,
                      size_t *out_len)
{
    char *text;
    size_t n;

    if (env == NULL || env->root == NULL || out == NULL) {
        return GW_EINVAL;
    }
    *out = NULL;
    if ((text = cJSON_PrintUnformatted(env->root)) == NULL) {
        return GW_ENOMEM;
    }
    n = strlen(text);
    if (n > max_len) {
        cJSON_free(text);
        return GW_ETOOBIG;
    }
    *out = text;
    if (out_len != NULL) {
        *out_len = n;
    }
    return 0;
}

/* Appends n raw bytes, keeping room for the NUL. */
static int put(char *out, size_t cap, size_t *pos, const char *s, size_t n)
{
    if (cap - *pos <= n) {
        return GW_ENOSPC;
    }
    memcpy(out + *pos, s, n);
    *pos += n;
    out[*pos] = '\0';
    return 0;
}

/* The escape for one byte, or NULL if it goes out as itself. */
static const char *escape_of(unsigned char c, char tmp[7])
{
    static const char hex[] = "0123456789abcdef";

    switch (c) {
    case '"':
        return "\\\"";
    case '\\':
        return "\\\\";
    case '\b':
        return "\\b";
    case '\f':
        return "\\f";
    case '\n':
        return "\\n";
    case '\r':
        return "\\r";
    case '\t':
        return "\\t";
    default:
        break;
    }
    if (c >= 0x20) {
        return NULL;
    }
    memcpy(tmp, "\\u00", 4);
    tmp[4] = hex[c >> 4];
    tmp[5] = hex[c & 0x0f];
    tmp[6] = '\0';
    return tmp;
}

int gw_envelope_write_string(char *out, size_t cap, size_t *pos, const char *s,
                             size_t len)
{
    size_t at;
    int err = 0;

    if (out == NULL || pos == NULL || *pos >= cap || (s == NULL && len)) {
        return GW_ENOSPC;
    }
    if (!gw_utf8_valid(s, len)) {
        return GW_EUTF8;
    }
    at = *pos;
    err = put(out, cap, &at, "\"", 1);
    for (size_t i = 0; i < len && err == 0; i++) {
        char tmp[7];
        const char *esc = escape_of((unsigned char)s[i], tmp);
        err = esc != NULL ? put(out, cap, &at, esc, strlen(esc))
                          : put(out, cap, &at, s + i, 1);
    }
    if (err == 0) {
        err = put(out, cap, &at, "\"", 1);
    }
    if (err != 0) {
        out[*pos] = '\0'; /* drop the partial string */
        return err;
    }
    *pos = at;
    return 0;
}

int gw_envelope_build_goodbye(const char *sid, char *out, size_t cap,
                              size_t *out_len)
{
    static const char head[] = "{\"type\":\"goodbye\",\"session_id\":";
    size_t pos = 0;
    int err;

    if (out == NULL || cap == 0) {
        return GW_ENOSPC;
    }
    out[0] = '\0';
    if (sid == NULL) {
        return GW_EINVAL;
    }
    err = put(out, cap, &pos, head, sizeof(head) - 1);
    if (err == 0) {
        err = gw_envelope_write_string(out, cap, &pos, sid, strlen(sid));
    }
    if (err == 0) {
        err = put(out, cap, &pos, "}", 1);
    }
    if (err != 0) {
        out[0] = '\0';
        return err;
    }
    if (out_len != NULL) {
        *out_len = pos;
    }
    return 0;
}

char *gw_envelope_print_mcp(const char *sid, const cJSON *payload)
{
    cJSON *env = cJSON_CreateObject();
    char *text = NULL;

    if (env != NULL &&
        cJSON_AddStringToObject(env, "session_id", sid) != NULL &&
        cJSON_AddStringToObject(env, "type", "mcp") != NULL &&
        cJSON_AddItemReferenceToObject(env, "payload", (cJSON *)payload)) {
        text = cJSON_PrintUnformatted(env);
    }
    cJSON_Delete(env);
    return text;
}

char *gw_envelope_print_mcp_endpoint(const char *sid, const char *endpoint,
                                     const cJSON *payload)
{
    cJSON *env = cJSON_CreateObject();
    char *text = NULL;

    if (env != NULL &&
        cJSON_AddStringToObject(env, "session_id", sid) != NULL &&
        cJSON_AddStringToObject(env, "type", "mcp") != NULL &&
        cJSON_AddStringToObject(env, "endpoint", endpoint) != NULL &&
        cJSON_AddItemReferenceToObject(env, "payload", (cJSON *)payload)) {
        text = cJSON_PrintUnformatted(env);
    }
    cJSON_Delete(env);
    return text;
}
