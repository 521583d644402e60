/*
 * MCP tool lists: checking a device's tools/list pages, spotting the tools
 * firmware keeps for the user, and the per-device names of the aggregated
 * server.
 */
#include "codec/mcp_tools.h"

#include <stdint.h>
#include <string.h>

#include <openssl/evp.h>

#include "codec/client_id.h"
#include "codec/envelope.h"

/* Lengths inside a label: "<12 hex>-<16 hex>". */
#define LABEL_MAC_LEN  12
#define LABEL_HASH_LEN 16

/* Stands in for the MAC of a client id that has none. */
static const char no_mac[] = "device000000";

/* One tool: an object with a non-empty name, and an object inputSchema
 * and a string description when they are there. */
static int tool_check(const cJSON *tool)
{
    const cJSON *name, *schema, *description;

    if (!cJSON_IsObject(tool) ||
        gw_json_unique_member(tool, "name", &name) != 0 ||
        gw_json_unique_member(tool, "inputSchema", &schema) != 0 ||
        gw_json_unique_member(tool, "description", &description) != 0) {
        return GW_EPROTO;
    }
    if (!cJSON_IsString(name) || name->valuestring == NULL ||
        name->valuestring[0] == '\0') {
        return GW_EPROTO;
    }
    if (schema != NULL && !cJSON_IsObject(schema)) {
        return GW_EPROTO;
    }
    if (description != NULL && !cJSON_IsString(description)) {
        return GW_EPROTO;
    }
    return 0;
}

/* The page's cursor: a string, "" and (from lenient servers) null meaning
 * the last page. */
static int cursor_check(const cJSON *cursor, const char **next)
{
    if (cursor == NULL || cJSON_IsNull(cursor)) {
        *next = NULL;
        return 0;
    }
    if (!cJSON_IsString(cursor) || cursor->valuestring == NULL) {
        return GW_EPROTO;
    }
    *next = cursor->valuestring[0] != '\0' ? cursor->valuestring : NULL;
    return 0;
}

int gw_mcp_tools_page_parse(const cJSON *result, cJSON *tools,
                            const char **next)
{
    const cJSON *list, *cursor, *tool;
    const char *page_next;

    if (!cJSON_IsArray(tools) || next == NULL) {
        return GW_EINVAL;
    }
    if (!cJSON_IsObject(result) ||
        gw_json_unique_member(result, "tools", &list) != 0 ||
        gw_json_unique_member(result, "nextCursor", &cursor) != 0 ||
        !cJSON_IsArray(list) || cursor_check(cursor, &page_next) != 0) {
        return GW_EPROTO;
    }
    cJSON_ArrayForEach(tool, list)
    {
        if (tool_check(tool) != 0) {
            return GW_EPROTO;
        }
    }
    if (gw_mcp_append_copies(tools, list) != 0) {
        return GW_ENOMEM;
    }
    *next = page_next;
    return 0;
}

int gw_mcp_append_copies(cJSON *dest, const cJSON *list)
{
    cJSON *copies, *copy;
    const cJSON *item;

    /* Copies first, so that running out of memory leaves dest as it was. */
    copies = cJSON_CreateArray();
    if (copies == NULL) {
        return GW_ENOMEM;
    }
    cJSON_ArrayForEach(item, list)
    {
        copy = cJSON_Duplicate(item, true);
        if (copy == NULL || !cJSON_AddItemToArray(copies, copy)) {
            cJSON_Delete(copy);
            cJSON_Delete(copies);
            return GW_ENOMEM;
        }
    }
    while ((copy = cJSON_DetachItemFromArray(copies, 0)) != NULL) {
        cJSON_AddItemToArray(dest, copy); /* cannot fail: both non-NULL */
    }
    cJSON_Delete(copies);
    return 0;
}

bool gw_mcp_tool_user_only(const cJSON *tool)
{
    const cJSON *annotations, *audience, *entry;
    bool user = false, assistant = false;

    if (!cJSON_IsObject(tool)) {
        return false;
    }
    annotations = cJSON_GetObjectItemCaseSensitive(tool, "annotations");
    audience = cJSON_IsObject(annotations)
                   ? cJSON_GetObjectItemCaseSensitive(annotations, "audience")
                   : NULL;
    if (!cJSON_IsArray(audience)) {
        return false;
    }
    cJSON_ArrayForEach(entry, audience)
    {
        if (!cJSON_IsString(entry) || entry->valuestring == NULL) {
            continue;
        }
        if (strcmp(entry->valuestring, "user") == 0) {
            user = true;
        } else if (strcmp(entry->valuestring, "assistant") == 0) {
            assistant = true;
        }
    }
    return user && !assistant;
}

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

bool gw_mcp_tool_name_valid(const char *name, size_t len)
{
    if (name == NULL || len == 0 || len > GW_MCP_TOOL_NAME_MAX) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (!name_char(name[i])) {
            return false;
        }
    }
    return true;
}

static bool lower_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static bool all_lower_hex(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (!lower_hex(s[i])) {
            return false;
        }
    }
    return true;
}

/* Whether the GW_MCP_LABEL_LEN bytes at s have the shape of a label. */
static bool label_shape(const char *s)
{
    bool mac = all_lower_hex(s, LABEL_MAC_LEN) ||
               memcmp(s, no_mac, LABEL_MAC_LEN) == 0;

    return mac && s[LABEL_MAC_LEN] == '-' &&
           all_lower_hex(s + LABEL_MAC_LEN + 1, LABEL_HASH_LEN);
}

int gw_mcp_device_label(const char *client_id, size_t len,
                        char out[GW_MCP_LABEL_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    unsigned char hash[EVP_MAX_MD_SIZE];
    unsigned int hash_len = 0;
    struct gw_client_id id;
    size_t n = 0;

    if (client_id == NULL || len == 0 || out == NULL) {
        return GW_EINVAL;
    }
    if (gw_client_id_parse(client_id, len, &id) == 0) {
        /* mac is "aa:bb:cc:dd:ee:ff", already lowercase: drop the colons. */
        for (size_t i = 0; id.mac[i] != '\0' && n < LABEL_MAC_LEN; i++) {
            if (id.mac[i] != ':') {
                out[n++] = id.mac[i];
            }
        }
    }
    if (n != LABEL_MAC_LEN) {
        memcpy(out, no_mac, LABEL_MAC_LEN);
    }
    out[LABEL_MAC_LEN] = '-';
    /* SHA-256, not a fast hash: a crafted client id must not be able to
     * take another device's label (2^64 tries for one given label). */
    if (EVP_Digest(client_id, len, hash, &hash_len, EVP_sha256(), NULL) != 1 ||
        hash_len * 2 < LABEL_HASH_LEN) {
        return GW_ENOMEM;
    }
    for (size_t i = 0; i < LABEL_HASH_LEN; i++) {
        unsigned char b = hash[i / 2];
        out[LABEL_MAC_LEN + 1 + i] = digits[i % 2 == 0 ? b >> 4 : b & 0xf];
    }
    out[GW_MCP_LABEL_LEN] = '\0';
    return 0;
}

/* strlen that stops looking past max: names longer than that are refused
 * anyway, and a peer's string should not cost a full scan. */
static size_t bounded_len(const char *s, size_t max)
{
    size_t n = 0;

    while (n <= max && s[n] != '\0') {
        n++;
    }
    return n;
}

int gw_mcp_aggregate_name(const char *label, const char *tool, char *out,
                          size_t cap)
{
    size_t tool_len, total;

    if (out != NULL && cap > 0) {
        out[0] = '\0';
    }
    if (label == NULL || tool == NULL || out == NULL ||
        bounded_len(label, GW_MCP_LABEL_LEN) != GW_MCP_LABEL_LEN ||
        !label_shape(label)) {
        return GW_EINVAL;
    }
    tool_len = bounded_len(tool, GW_MCP_TOOL_NAME_MAX);
    total = GW_MCP_LABEL_LEN + 1 + tool_len;
    if (!gw_mcp_tool_name_valid(tool, tool_len) ||
        total > GW_MCP_TOOL_NAME_MAX) {
        return GW_EPROTO;
    }
    if (total >= cap) {
        return GW_ENOSPC;
    }
    memcpy(out, label, GW_MCP_LABEL_LEN);
    out[GW_MCP_LABEL_LEN] = '.';
    memcpy(out + GW_MCP_LABEL_LEN + 1, tool, tool_len);
    out[total] = '\0';
    return 0;
}

int gw_mcp_aggregate_split(const char *name, char label[GW_MCP_LABEL_LEN + 1],
                           const char **tool)
{
    size_t len;

    if (name == NULL || label == NULL || tool == NULL) {
        return GW_EINVAL;
    }
    len = bounded_len(name, GW_MCP_TOOL_NAME_MAX);
    /* The label holds no '.', so the first one ends it. */
    if (!gw_mcp_tool_name_valid(name, len) || len <= GW_MCP_LABEL_LEN + 1 ||
        name[GW_MCP_LABEL_LEN] != '.' || !label_shape(name)) {
        return GW_EPROTO;
    }
    memcpy(label, name, GW_MCP_LABEL_LEN);
    label[GW_MCP_LABEL_LEN] = '\0';
    *tool = name + GW_MCP_LABEL_LEN + 1;
    return 0;
}
