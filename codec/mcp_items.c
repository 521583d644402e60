/*
 * A device's resources, resource templates and prompts: checking their
 * list pages, the names the aggregated MCP server shows them under, and
 * the checks on what a resources/read brings back.
 */
#include "codec/mcp_items.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/envelope.h"

static const struct {
    const char *method, *member, *key;
} lists[] = {
#define XX(name, m, a, k) {m, a, k},
    GW_MCP_LIST_MAP(XX)
#undef XX
};

#define PREFIX_LEN (sizeof(GW_MCP_URI_PREFIX) - 1)

static const char invalid_contents[] = "device sent invalid resource contents";

const char *gw_mcp_list_method(enum gw_mcp_list_kind kind)
{
    return (unsigned)kind < GW_MCP_LIST_COUNT_ ? lists[kind].method : NULL;
}

const char *gw_mcp_list_member(enum gw_mcp_list_kind kind)
{
    return (unsigned)kind < GW_MCP_LIST_COUNT_ ? lists[kind].member : NULL;
}

const char *gw_mcp_list_key(enum gw_mcp_list_kind kind)
{
    return (unsigned)kind < GW_MCP_LIST_COUNT_ ? lists[kind].key : NULL;
}

/* strlen that stops looking past max: longer strings are refused anyway,
 * and a peer's string should not cost a full scan for that. */
static size_t bounded_len(const char *s, size_t max)
{
    size_t n = 0;

    while (n <= max && s[n] != '\0') {
        n++;
    }
    return n;
}

static bool is_string(const cJSON *item)
{
    return cJSON_IsString(item) && item->valuestring != NULL;
}

/* A name a list item or contents item is known by: 1..GW_MCP_URI_MAX. */
static bool key_valid(const cJSON *item)
{
    size_t len;

    if (!is_string(item)) {
        return false;
    }
    len = bounded_len(item->valuestring, GW_MCP_URI_MAX);
    return len > 0 && len <= GW_MCP_URI_MAX;
}

/* obj.key, when present (unique), is a string. */
static bool optional_string(const cJSON *obj, const char *key)
{
    const cJSON *m;

    return gw_json_unique_member(obj, key, &m) == 0 &&
           (m == NULL || is_string(m));
}

/* A prompt's arguments: an array of objects, each with a non-empty name. */
static bool arguments_valid(const cJSON *args)
{
    const cJSON *arg, *name;

    if (!cJSON_IsArray(args)) {
        return false;
    }
    cJSON_ArrayForEach(arg, args)
    {
        if (!cJSON_IsObject(arg) ||
            gw_json_unique_member(arg, "name", &name) != 0 ||
            !is_string(name) || name->valuestring[0] == '\0') {
            return false;
        }
    }
    return true;
}

static bool item_valid(enum gw_mcp_list_kind kind, const cJSON *item)
{
    const cJSON *key, *name, *args;

    if (!cJSON_IsObject(item) ||
        gw_json_unique_member(item, lists[kind].key, &key) != 0 ||
        !key_valid(key) || gw_json_unique_member(item, "name", &name) != 0 ||
        !is_string(name) || !optional_string(item, "description") ||
        !optional_string(item, "mimeType") || !optional_string(item, "title")) {
        return false;
    }
    if (kind == GW_MCP_LIST_PROMPTS) {
        if (gw_json_unique_member(item, "arguments", &args) != 0 ||
            (args != NULL && !arguments_valid(args))) {
            return false;
        }
    }
    return true;
}

/* The page's cursor: a string, "" and (from lenient servers) null meaning
 * the last page. */
static int cursor_check(const cJSON *cursor, const char **next)
{
    if (cursor == NULL || cJSON_IsNull(cursor)) {
        *next = NULL;
        return 0;
    }
    if (!is_string(cursor)) {
        return GW_EPROTO;
    }
    *next = cursor->valuestring[0] != '\0' ? cursor->valuestring : NULL;
    return 0;
}

int gw_mcp_list_page_parse(enum gw_mcp_list_kind kind, const cJSON *result,
                           cJSON *items, const char **next)
{
    const cJSON *list, *cursor, *item;
    const char *page_next;

    if ((unsigned)kind >= GW_MCP_LIST_COUNT_ || !cJSON_IsArray(items) ||
        next == NULL) {
        return GW_EINVAL;
    }
    if (!cJSON_IsObject(result) ||
        gw_json_unique_member(result, lists[kind].member, &list) != 0 ||
        gw_json_unique_member(result, "nextCursor", &cursor) != 0 ||
        !cJSON_IsArray(list) || cursor_check(cursor, &page_next) != 0) {
        return GW_EPROTO;
    }
    cJSON_ArrayForEach(item, list)
    {
        if (!item_valid(kind, item)) {
            return GW_EPROTO;
        }
    }
    if (gw_mcp_append_copies(items, list) != 0) {
        return GW_ENOMEM;
    }
    *next = page_next;
    return 0;
}

/* ---- aggregated names ---- */

/*
 * Whether the GW_MCP_LABEL_LEN bytes at s (readable, whatever follows)
 * have the shape of a label. The shape is mcp_tools.c's to define: ask
 * it through a tool name made of the label and one character.
 */
static bool label_at(const char *s)
{
    char probe[GW_MCP_LABEL_LEN + 3];
    char label[GW_MCP_LABEL_LEN + 1];
    const char *rest;

    memcpy(probe, s, GW_MCP_LABEL_LEN);
    memcpy(probe + GW_MCP_LABEL_LEN, ".x", 3);
    return gw_mcp_aggregate_split(probe, label, &rest) == 0;
}

static bool label_valid(const char *label)
{
    return label != NULL &&
           bounded_len(label, GW_MCP_LABEL_LEN) == GW_MCP_LABEL_LEN &&
           label_at(label);
}

/* head, label, sep, tail as one new string from alloc; NULL when tail is
 * empty or over GW_MCP_URI_MAX, the label is not one, or memory runs out. */
static char *join(void *(*alloc)(size_t), const char *head, size_t head_len,
                  const char *label, char sep, const char *tail)
{
    size_t tail_len, len;
    char *out;

    if (!label_valid(label) || tail == NULL) {
        return NULL;
    }
    tail_len = bounded_len(tail, GW_MCP_URI_MAX);
    if (tail_len == 0 || tail_len > GW_MCP_URI_MAX) {
        return NULL;
    }
    len = head_len + GW_MCP_LABEL_LEN + 1 + tail_len;
    out = alloc(len + 1);
    if (out == NULL) {
        return NULL;
    }
    memcpy(out, head, head_len);
    memcpy(out + head_len, label, GW_MCP_LABEL_LEN);
    out[head_len + GW_MCP_LABEL_LEN] = sep;
    memcpy(out + head_len + GW_MCP_LABEL_LEN + 1, tail, tail_len + 1);
    return out;
}

char *gw_mcp_aggregate_uri(const char *label, const char *uri)
{
    return join(malloc, GW_MCP_URI_PREFIX, PREFIX_LEN, label, '/', uri);
}

char *gw_mcp_aggregate_id(const char *label, const char *id)
{
    return join(malloc, "", 0, label, '.', id);
}

/* The other side of join: s = label, sep, 1..GW_MCP_URI_MAX bytes. */
static int split(const char *s, char sep, char label[GW_MCP_LABEL_LEN + 1],
                 const char **tail)
{
    size_t len;

    /* Reads stop at the NUL: the label's bytes are looked at only once
     * the string is known to be that long. */
    len = bounded_len(s, GW_MCP_LABEL_LEN + 1 + GW_MCP_URI_MAX);
    if (len < GW_MCP_LABEL_LEN + 2 ||
        len > GW_MCP_LABEL_LEN + 1 + GW_MCP_URI_MAX ||
        s[GW_MCP_LABEL_LEN] != sep || !label_at(s)) {
        return GW_EPROTO;
    }
    memcpy(label, s, GW_MCP_LABEL_LEN);
    label[GW_MCP_LABEL_LEN] = '\0';
    *tail = s + GW_MCP_LABEL_LEN + 1;
    return 0;
}

int gw_mcp_aggregate_uri_split(const char *uri,
                               char label[GW_MCP_LABEL_LEN + 1],
                               const char **device_uri)
{
    if (uri == NULL || label == NULL || device_uri == NULL) {
        return GW_EINVAL;
    }
    /* Exactly the prefix the gateway writes: no case folding, as a client
     * only ever echoes what it was shown. */
    if (strncmp(uri, GW_MCP_URI_PREFIX, PREFIX_LEN) != 0) {
        return GW_EPROTO;
    }
    return split(uri + PREFIX_LEN, '/', label, device_uri);
}

int gw_mcp_aggregate_id_split(const char *name,
                              char label[GW_MCP_LABEL_LEN + 1], const char **id)
{
    if (name == NULL || label == NULL || id == NULL) {
        return GW_EINVAL;
    }
    return split(name, '.', label, id);
}

/* The aggregated form of value under key, from cJSON's allocator as it
 * goes into a cJSON item: URIs (and URI templates, shown as URIs too)
 * get the URI form, anything else the id form. */
static char *aggregate(const char *key, const char *label, const char *value)
{
    if (strcmp(key, "uri") == 0 || strcmp(key, "uriTemplate") == 0) {
        return join(cJSON_malloc, GW_MCP_URI_PREFIX, PREFIX_LEN, label, '/',
                    value);
    }
    return join(cJSON_malloc, "", 0, label, '.', value);
}

/* Whether value can be renamed (not empty, not over GW_MCP_URI_MAX). */
static bool renamable(const char *value)
{
    size_t len = bounded_len(value, GW_MCP_URI_MAX);

    return len > 0 && len <= GW_MCP_URI_MAX;
}

/*
 * Puts a new value (cJSON_malloc'd) in place of a string item's: no allocation
 * here, so that a rename that has made all its strings cannot fail half
 * way. The old value is freed unless the item only referred to it.
 */
static void swap_value(cJSON *item, char *value)
{
    if (!(item->type & cJSON_IsReference)) {
        cJSON_free(item->valuestring);
    }
    item->type &= ~cJSON_IsReference;
    item->valuestring = value;
}

/*
 * Visits every string member named key of obj, or, with array, of every
 * object in obj's array member of that name: check only counts them and
 * refuses any that cannot be renamed; otherwise each gets vals[i].
 */
static int visit(cJSON *obj, const char *array, const char *key, char **vals,
                 size_t *n)
{
    cJSON *list = obj, *item, *m;
    size_t i = 0;

    if (array != NULL) {
        list = cJSON_GetObjectItemCaseSensitive(obj, array);
        if (!cJSON_IsArray(list)) {
            *n = 0;
            return 0; /* nothing to rename */
        }
    }
    for (item = array != NULL ? list->child : obj; item != NULL;
         item = array != NULL ? item->next : NULL) {
        if (!cJSON_IsObject(item)) {
            continue;
        }
        cJSON_ArrayForEach(m, item)
        {
            if (m->string == NULL || strcmp(m->string, key) != 0 ||
                !is_string(m)) {
                continue;
            }
            if (vals == NULL && !renamable(m->valuestring)) {
                return GW_EPROTO;
            }
            if (vals != NULL) {
                swap_value(m, vals[i]);
            }
            i++;
        }
    }
    *n = i;
    return 0;
}

/* The second walk's strings, made in the first walk's order. */
static int make_values(cJSON *obj, const char *array, const char *key,
                       const char *label, char **vals)
{
    cJSON *list =
        array != NULL ? cJSON_GetObjectItemCaseSensitive(obj, array) : obj;
    cJSON *item, *m;
    size_t i = 0;

    for (item = array != NULL ? list->child : obj; item != NULL;
         item = array != NULL ? item->next : NULL) {
        if (!cJSON_IsObject(item)) {
            continue;
        }
        cJSON_ArrayForEach(m, item)
        {
            if (m->string == NULL || strcmp(m->string, key) != 0 ||
                !is_string(m)) {
                continue;
            }
            vals[i] = aggregate(key, label, m->valuestring);
            if (vals[i] == NULL) {
                return GW_ENOMEM; /* the walk before refused all else */
            }
            i++;
        }
    }
    return 0;
}

static int rename_in(cJSON *obj, const char *array, const char *key,
                     const char *label)
{
    char **vals;
    size_t n;
    int err;

    if (obj == NULL || key == NULL || !label_valid(label)) {
        return GW_EINVAL;
    }
    err = visit(obj, array, key, NULL, &n);
    if (err != 0 || n == 0) {
        return err;
    }
    vals = calloc(n, sizeof(*vals));
    if (vals == NULL) {
        return GW_ENOMEM;
    }
    err = make_values(obj, array, key, label, vals);
    if (err == 0) {
        (void)visit(obj, array, key, vals, &n);
    } else {
        for (size_t i = 0; i < n; i++) {
            cJSON_free(vals[i]);
        }
    }
    free(vals);
    return err;
}

int gw_mcp_rename_members(cJSON *obj, const char *array, const char *key,
                          const char *label)
{
    if (array == NULL) {
        return GW_EINVAL;
    }
    return rename_in(obj, array, key, label);
}

int gw_mcp_rename_member(cJSON *obj, const char *key, const char *label)
{
    return rename_in(obj, NULL, key, label);
}

/* ---- resource contents ---- */

static int base64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    if (c == '+') {
        return 62;
    }
    if (c == '/') {
        return 63;
    }
    return -1;
}

bool gw_base64_valid(const char *s, size_t len)
{
    size_t pad = 0, data;
    int last;

    if (len == 0) {
        return true;
    }
    if (s == NULL || len % 4 != 0) {
        return false;
    }
    while (pad < 2 && s[len - 1 - pad] == '=') {
        pad++;
    }
    data = len - pad;
    for (size_t i = 0; i < data; i++) {
        if (base64_value((unsigned char)s[i]) < 0) {
            return false;
        }
    }
    /*
     * The last character before padding carries bits the padding says
     * are not there; they must be zero, or two texts would decode to the
     * same bytes and the one the client gets is not the one it checks.
     */
    last = base64_value((unsigned char)s[data - 1]);
    return pad == 0 || (pad == 1 && (last & 0x3) == 0) ||
           (pad == 2 && (last & 0xf) == 0);
}

bool gw_mcp_progress_token_valid(const cJSON *tok)
{
    double v;

    if (is_string(tok)) {
        return true;
    }
    if (!cJSON_IsNumber(tok)) {
        return false;
    }
    v = tok->valuedouble;
    /* Finite and whole: NaN and infinities fail v - v == 0. */
    return v - v == 0.0 &&
           (v >= 9007199254740992.0 || v <= -9007199254740992.0 ||
            v == (double)(long long)v);
}

/* One content item; *len gets its text or blob length. Why it fails is
 * said (detail cap bytes) for the error the client gets. */
static const char *content_check(const cJSON *c, size_t *len)
{
    const cJSON *uri, *text, *blob;

    if (!cJSON_IsObject(c)) {
        return "not an object";
    }
    if (gw_json_unique_member(c, "uri", &uri) != 0 ||
        gw_json_unique_member(c, "text", &text) != 0 ||
        gw_json_unique_member(c, "blob", &blob) != 0) {
        return "a repeated member";
    }
    if (!key_valid(uri)) {
        return "no uri, or one empty or too long";
    }
    if (!optional_string(c, "mimeType")) {
        return "mimeType not a string";
    }
    if ((text != NULL) == (blob != NULL)) {
        return "not exactly one of text and blob";
    }
    if (text != NULL) {
        if (!is_string(text)) {
            return "text not a string";
        }
        *len = strlen(text->valuestring);
        return NULL;
    }
    if (!is_string(blob)) {
        return "blob not a string";
    }
    *len = strlen(blob->valuestring);
    if (!gw_base64_valid(blob->valuestring, *len)) {
        return "blob not base64";
    }
    return NULL;
}

int gw_mcp_contents_check(const cJSON *result, size_t max_bytes, size_t *total,
                          char *why, size_t cap)
{
    const cJSON *contents, *c;
    const char *fault;
    size_t sum = 0, len, i = 0;

    if (total != NULL) {
        *total = 0;
    }
    if (why != NULL && cap > 0) {
        why[0] = '\0';
    }
    if (!cJSON_IsObject(result) ||
        gw_json_unique_member(result, "contents", &contents) != 0 ||
        !cJSON_IsArray(contents)) {
        if (why != NULL && cap > 0) {
            snprintf(why, cap, "%s: no contents array", invalid_contents);
        }
        return GW_EPROTO;
    }
    cJSON_ArrayForEach(c, contents)
    {
        len = 0;
        fault = content_check(c, &len);
        if (fault != NULL) {
            if (why != NULL && cap > 0) {
                snprintf(why, cap, "%s: contents[%zu]: %s", invalid_contents, i,
                         fault);
            }
            return GW_EPROTO;
        }
        /* Saturates: a sum that wraps would pass any limit. */
        sum = len > SIZE_MAX - sum ? SIZE_MAX : sum + len;
        i++;
    }
    if (total != NULL) {
        *total = sum;
    }
    if (max_bytes > 0 && sum > max_bytes) {
        if (why != NULL && cap > 0) {
            snprintf(why, cap,
                     "resource contents of %zu bytes exceed the limit of %zu "
                     "bytes",
                     sum, max_bytes);
        }
        return GW_ETOOBIG;
    }
    return 0;
}
