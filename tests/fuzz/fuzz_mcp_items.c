/*
 * A device's resources, templates and prompts on arbitrary bytes: pages
 * of each kind keep their contract and every item they accept renames
 * and splits back to itself; resource contents the check accepts sum to
 * the total it reports, meet the limit exactly, and rename; base64
 * agrees with a decode-and-encode model; aggregated URIs and ids split
 * and rejoin unchanged.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "codec/envelope.h"
#include "codec/mcp_items.h"
#include "common/assert.h"

/* Larger than any device message, so size limits are not all it meets. */
#define INPUT_MAX 65536

/* Copies data so that its last byte is the last readable one: libcjson is
 * not built with ASan, and this catches it reading past len. */
static const char *guarded_copy(const uint8_t *data, size_t size)
{
    static char *area;
    static size_t span;

    if (area == NULL) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        span = (INPUT_MAX + page - 1) / page * page;
        area = mmap(NULL, span + page, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (area == MAP_FAILED || mprotect(area + span, page, PROT_NONE)) {
            abort();
        }
    }
    if (size > span) {
        return (const char *)data; /* refused on size before any read */
    }
    memcpy(area + span - size, data, size);
    return area + span - size;
}

/* value under label: the aggregated form splits back to label and value. */
static void check_join(const char *label, const char *value, bool uri)
{
    char back[GW_MCP_LABEL_LEN + 1];
    const char *rest;
    size_t len = strlen(value);
    char *made = uri ? gw_mcp_aggregate_uri(label, value)
                     : gw_mcp_aggregate_id(label, value);
    int err;

    if (len == 0 || len > GW_MCP_URI_MAX) {
        GW_ASSERT(made == NULL);
        return;
    }
    GW_ASSERT(made != NULL);
    err = uri ? gw_mcp_aggregate_uri_split(made, back, &rest)
              : gw_mcp_aggregate_id_split(made, back, &rest);
    GW_ASSERT(err == 0);
    GW_ASSERT(strcmp(back, label) == 0 && strcmp(rest, value) == 0);
    free(made);
}

/* The item's key member, which a page accepted. */
static const char *key_of(const cJSON *item, enum gw_mcp_list_kind kind)
{
    const cJSON *key =
        cJSON_GetObjectItemCaseSensitive(item, gw_mcp_list_key(kind));

    GW_ASSERT(cJSON_IsString(key) && key->valuestring != NULL);
    GW_ASSERT(key->valuestring[0] != '\0' &&
              strlen(key->valuestring) <= GW_MCP_URI_MAX);
    return key->valuestring;
}

/* After a rename, obj's array holds the aggregated keys of orig's. */
static void check_renamed(const cJSON *orig, const cJSON *renamed,
                          const char *array, const char *key, const char *label)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(orig, array);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(renamed, array);
    const cJSON *x, *y;
    bool uri = strcmp(key, "name") != 0;
    char back[GW_MCP_LABEL_LEN + 1];
    const char *rest;

    if (!cJSON_IsArray(a)) {
        return; /* nothing to rename: check_rename saw it unchanged */
    }
    GW_ASSERT(cJSON_GetArraySize(a) == cJSON_GetArraySize(b));
    for (x = a->child, y = b->child; x != NULL; x = x->next, y = y->next) {
        const cJSON *kx = cJSON_GetObjectItemCaseSensitive(x, key);
        const cJSON *ky = cJSON_GetObjectItemCaseSensitive(y, key);
        int err;

        if (!cJSON_IsString(kx)) {
            continue;
        }
        GW_ASSERT(cJSON_IsString(ky));
        err = uri ? gw_mcp_aggregate_uri_split(ky->valuestring, back, &rest)
                  : gw_mcp_aggregate_id_split(ky->valuestring, back, &rest);
        GW_ASSERT(err == 0 && strcmp(back, label) == 0 &&
                  strcmp(rest, kx->valuestring) == 0);
    }
}

/* Renames a copy of result's array member (all or nothing). */
static void check_rename(const cJSON *result, const char *array,
                         const char *key, const char *label, bool must)
{
    cJSON *copy = cJSON_Duplicate(result, true);
    char *before, *after;
    int err;

    if (copy == NULL) {
        abort();
    }
    err = gw_mcp_rename_members(copy, array, key, label);
    if (err == 0) {
        check_renamed(result, copy, array, key, label);
    }
    if (err != 0 ||
        !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(result, array))) {
        /* Refused, or no array: not one member changed. */
        GW_ASSERT(err == 0 || (!must && err == GW_EPROTO));
        before = cJSON_PrintUnformatted(result);
        after = cJSON_PrintUnformatted(copy);
        GW_ASSERT(before != NULL && after != NULL &&
                  strcmp(before, after) == 0);
        cJSON_free(before);
        cJSON_free(after);
    }
    cJSON_Delete(copy);
}

static void check_page(enum gw_mcp_list_kind kind, const cJSON *result,
                       const char *label)
{
    cJSON *items = cJSON_CreateArray();
    const cJSON *item, *list;
    const char *next = NULL;
    int err;

    if (items == NULL) {
        abort();
    }
    err = gw_mcp_list_page_parse(kind, result, items, &next);
    if (err != 0) {
        GW_ASSERT(err == GW_EPROTO && cJSON_GetArraySize(items) == 0);
        cJSON_Delete(items);
        return;
    }
    list = cJSON_GetObjectItemCaseSensitive(result, gw_mcp_list_member(kind));
    GW_ASSERT(cJSON_GetArraySize(items) == cJSON_GetArraySize(list));
    GW_ASSERT(next == NULL || next[0] != '\0');
    cJSON_ArrayForEach(item, items)
    {
        check_join(label, key_of(item, kind), kind != GW_MCP_LIST_PROMPTS);
    }
    /* An accepted page always renames. */
    check_rename(result, gw_mcp_list_member(kind), gw_mcp_list_key(kind), label,
                 true);
    cJSON_Delete(items);
}

static void check_contents(const cJSON *result, const char *label)
{
    static const char invalid[] = "device sent invalid resource contents";
    const cJSON *c;
    char why[160];
    size_t total = 1, sum = 0;
    int err = gw_mcp_contents_check(result, 0, &total, why, sizeof(why));

    if (err != 0) {
        GW_ASSERT(err == GW_EPROTO && total == 0);
        GW_ASSERT(strncmp(why, invalid, sizeof(invalid) - 1) == 0);
        return;
    }
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(result, "contents"))
    {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(c, "text");
        const cJSON *blob = cJSON_GetObjectItemCaseSensitive(c, "blob");

        GW_ASSERT((text != NULL) != (blob != NULL));
        if (blob != NULL) {
            GW_ASSERT(
                gw_base64_valid(blob->valuestring, strlen(blob->valuestring)));
        }
        sum += strlen(text != NULL ? text->valuestring : blob->valuestring);
    }
    GW_ASSERT(sum == total);
    /* The limit: exactly the total passes, one less does not. */
    GW_ASSERT(gw_mcp_contents_check(result, total, NULL, NULL, 0) == 0);
    if (total > 1) { /* a limit of 0 is none */
        GW_ASSERT(gw_mcp_contents_check(result, total - 1, NULL, why,
                                        sizeof(why)) == GW_ETOOBIG);
    }
    check_rename(result, "contents", "uri", label, true);
}

/* Padded base64 by decoding and encoding again. */
static bool model_base64(const char *s, size_t len)
{
    static const char abc[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t pad = 0;
    int v[4];

    if (len % 4 != 0) {
        return false;
    }
    for (size_t i = 0; i < len; i += 4) {
        for (size_t k = 0; k < 4; k++) {
            const char *p = s[i + k] != '\0' ? strchr(abc, s[i + k]) : NULL;
            bool may_pad =
                i + 4 == len && (k == 3 || (k == 2 && s[i + 3] == '='));

            if (s[i + k] == '=' && may_pad) {
                pad++;
                v[k] = 0;
            } else if (p == NULL) {
                return false;
            } else {
                v[k] = (int)(p - abc);
            }
        }
        /* Re-encoding the decoded bytes writes zeros where padding cut. */
        if ((pad == 1 && (v[2] & 3) != 0) || (pad == 2 && (v[1] & 15) != 0)) {
            return false;
        }
    }
    return true;
}

/* The raw text as an aggregated URI and id, and as a device's own. */
static void check_names(const uint8_t *data, size_t size, const char *label)
{
    char *text = malloc(size + 1);
    char back[GW_MCP_LABEL_LEN + 1];
    const char *rest;
    char *again;

    if (text == NULL) {
        abort();
    }
    memcpy(text, data, size);
    text[size] = '\0';
    if (gw_mcp_aggregate_uri_split(text, back, &rest) == 0) {
        again = gw_mcp_aggregate_uri(back, rest);
        GW_ASSERT(again != NULL && strcmp(again, text) == 0);
        free(again);
    }
    if (gw_mcp_aggregate_id_split(text, back, &rest) == 0) {
        again = gw_mcp_aggregate_id(back, rest);
        GW_ASSERT(again != NULL && strcmp(again, text) == 0);
        free(again);
    }
    check_join(label, text, true);
    check_join(label, text, false);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = guarded_copy(data, size);
    char label[GW_MCP_LABEL_LEN + 1] = "device000000-0000000000000000";
    const cJSON *result, *tok;
    cJSON *root;

    if (size > 0 && gw_mcp_device_label(buf, size, label) != 0) {
        abort();
    }
    GW_ASSERT(gw_base64_valid(buf, size) == model_base64(buf, size));
    check_names(data, size, label);
    if (gw_json_object_parse(buf, size, INPUT_MAX, &root) != 0) {
        return 0;
    }
    /* A bare result, or a JSON-RPC response's. */
    result = cJSON_GetObjectItemCaseSensitive(root, "result");
    if (!cJSON_IsObject(result)) {
        result = root;
    }
    for (int kind = 0; kind < GW_MCP_LIST_COUNT_; kind++) {
        check_page((enum gw_mcp_list_kind)kind, result, label);
        /* Any array member renames all or nothing. */
        check_rename(result, gw_mcp_list_member((enum gw_mcp_list_kind)kind),
                     gw_mcp_list_key((enum gw_mcp_list_kind)kind), label,
                     false);
    }
    check_contents(result, label);
    tok = cJSON_GetObjectItemCaseSensitive(result, "progressToken");
    if (gw_mcp_progress_token_valid(tok)) {
        GW_ASSERT(cJSON_IsString(tok) ||
                  (cJSON_IsNumber(tok) &&
                   tok->valuedouble - tok->valuedouble == 0.0));
    }
    cJSON_Delete(root);
    return 0;
}
