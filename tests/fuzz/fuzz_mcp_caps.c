/*
 * MCP capabilities on arbitrary bytes: a device's initialize result reads
 * as normalised bits and bounded, cut-clean strings; a client's
 * initialize params give only client bits; the gateway's capabilities
 * object for any bits reads back as the same bits; method and level
 * tables answer only what they know.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "codec/envelope.h"
#include "codec/mcp_caps.h"
#include "codec/utf8.h"
#include "common/assert.h"

/* Larger than any device message, so size limits are not all it meets. */
#define INPUT_MAX 65536

#define CLIENT_CAPS_ALL                                                        \
    (GW_MCP_CLIENT_CAP_SAMPLING | GW_MCP_CLIENT_CAP_ELICITATION |              \
     GW_MCP_CLIENT_CAP_ROOTS)

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

/* parse(caps_json(bits)) gives the normalised bits back. */
static unsigned round_trip(unsigned bits)
{
    cJSON *result = cJSON_CreateObject();
    cJSON *caps = gw_mcp_caps_json(bits);
    struct gw_mcp_server_info info;

    if (result == NULL || caps == NULL) {
        abort();
    }
    cJSON_AddItemToObject(result, "capabilities", caps);
    GW_ASSERT(gw_mcp_server_info_parse(result, &info) == 0);
    GW_ASSERT(info.caps == gw_mcp_caps_normalize(bits));
    cJSON_Delete(result);
    return info.caps;
}

/* A copied string: a prefix of the source, never cut inside a UTF-8
 * sequence, so that valid text stays valid. */
static void check_copy(const char *copy, size_t cap, const cJSON *src)
{
    size_t len = strlen(copy);

    GW_ASSERT(len < cap);
    if (!cJSON_IsString(src) || src->valuestring == NULL) {
        GW_ASSERT(len == 0);
        return;
    }
    GW_ASSERT(strncmp(copy, src->valuestring, len) == 0);
    /* Cut only when it did not fit. */
    GW_ASSERT(src->valuestring[len] == '\0' || strlen(src->valuestring) >= cap);
    if (gw_utf8_valid(src->valuestring, strlen(src->valuestring))) {
        GW_ASSERT(gw_utf8_valid(copy, len));
    }
}

static void check_server(const cJSON *result)
{
    struct gw_mcp_server_info info;
    const cJSON *si, *version;
    int err = gw_mcp_server_info_parse(result, &info);

    if (err != 0) {
        GW_ASSERT(err == GW_EPROTO && info.caps == 0);
        return;
    }
    GW_ASSERT(info.caps == gw_mcp_caps_normalize(info.caps));
    /* What the gateway would show of this device reads back the same. */
    GW_ASSERT(round_trip(info.caps) == info.caps);
    si = cJSON_GetObjectItemCaseSensitive(result, "serverInfo");
    if (cJSON_IsObject(si)) {
        check_copy(info.name, sizeof(info.name),
                   cJSON_GetObjectItemCaseSensitive(si, "name"));
        check_copy(info.server_ver, sizeof(info.server_ver),
                   cJSON_GetObjectItemCaseSensitive(si, "version"));
    } else {
        GW_ASSERT(info.name[0] == '\0' && info.server_ver[0] == '\0');
    }
    /* The version is all or nothing. */
    version = cJSON_GetObjectItemCaseSensitive(result, "protocolVersion");
    GW_ASSERT(info.version[0] == '\0' ||
              (cJSON_IsString(version) &&
               strcmp(info.version, version->valuestring) == 0));
}

/* The raw text as a method name and a level. */
static void check_text(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    enum gw_mcp_log_level level;
    unsigned cap;

    if (text == NULL) {
        abort();
    }
    memcpy(text, data, size);
    text[size] = '\0';
    cap = gw_mcp_method_cap(text);
    GW_ASSERT(cap == 0 || strcmp(gw_mcp_cap_name(cap), "?") != 0);
    cap = gw_mcp_method_client_cap(text);
    GW_ASSERT(cap == 0 || strcmp(gw_mcp_client_cap_name(cap), "?") != 0);
    if (gw_mcp_log_level_parse(text, &level) == 0) {
        GW_ASSERT(strcmp(gw_mcp_log_level_name(level), text) == 0);
    }
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = guarded_copy(data, size);
    const cJSON *result, *params;
    cJSON *root;
    unsigned bits;

    /* Any bits the first bytes make, unknown ones included. */
    bits = size >= 2 ? (unsigned)data[0] | (unsigned)data[1] << 8 : 0;
    (void)round_trip(bits);
    check_text(data, size);
    if (gw_json_object_parse(buf, size, INPUT_MAX, &root) != 0) {
        return 0;
    }
    /* A bare result / params, or inside a JSON-RPC message. */
    result = cJSON_GetObjectItemCaseSensitive(root, "result");
    check_server(cJSON_IsObject(result) ? result : root);
    params = cJSON_GetObjectItemCaseSensitive(root, "params");
    GW_ASSERT((gw_mcp_client_caps_parse(root) & ~CLIENT_CAPS_ALL) == 0);
    GW_ASSERT((gw_mcp_client_caps_parse(params) & ~CLIENT_CAPS_ALL) == 0);
    cJSON_Delete(root);
    return 0;
}
