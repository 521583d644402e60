/*
 * JSON-RPC and MCP tool lists on arbitrary bytes: what classifies must
 * rebuild and classify the same way, normalised errors and pages must obey
 * their contracts, and aggregated names must split and rejoin unchanged.
 */
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "codec/envelope.h"
#include "codec/jsonrpc.h"
#include "codec/mcp_tools.h"

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

/* Whether two values print the same. */
static bool same_json(const cJSON *a, const cJSON *b)
{
    char *ta = cJSON_PrintUnformatted(a);
    char *tb = cJSON_PrintUnformatted(b);
    bool same;

    if (ta == NULL || tb == NULL) {
        abort();
    }
    same = strcmp(ta, tb) == 0;
    cJSON_free(ta);
    cJSON_free(tb);
    return same;
}

/* Classifies msg (owned, freed here) as a peer would, from its text, and
 * insists on kind and id: ids outside the int range travel as raw text. */
static void expect_kind(cJSON *msg, enum gw_rpc_kind kind, const cJSON *id)
{
    char *text = msg != NULL ? cJSON_PrintUnformatted(msg) : NULL;
    cJSON *back = text != NULL ? cJSON_Parse(text) : NULL;
    struct gw_rpc rpc;

    cJSON_free(text);
    cJSON_Delete(msg);
    if (back == NULL || gw_rpc_classify(back, &rpc) != 0 || rpc.kind != kind) {
        abort();
    }
    if (id != NULL && (rpc.id == NULL || !same_json(rpc.id, id))) {
        abort();
    }
    cJSON_Delete(back);
}

/* The error object a device sent, made valid, answers any id. */
static void check_error(const cJSON *id, const cJSON *error)
{
    cJSON *fixed = gw_rpc_error_normalise(error);
    const cJSON *code, *message;

    if (fixed == NULL) {
        abort();
    }
    code = cJSON_GetObjectItemCaseSensitive(fixed, "code");
    message = cJSON_GetObjectItemCaseSensitive(fixed, "message");
    if (!cJSON_IsNumber(code) || code->valuedouble != (double)code->valueint ||
        !cJSON_IsString(message)) {
        abort();
    }
    expect_kind(gw_rpc_error_with(id, fixed), GW_RPC_RESPONSE, id);
}

static void check_rpc(const struct gw_rpc *rpc)
{
    uint32_t id;

    switch (rpc->kind) {
    case GW_RPC_REQUEST:
    case GW_RPC_NOTIFICATION:
        if (rpc->method == NULL || rpc->method[0] == '\0' ||
            (rpc->kind == GW_RPC_REQUEST) != (rpc->id != NULL) ||
            rpc->result != NULL || rpc->error != NULL) {
            abort();
        }
        break;
    case GW_RPC_RESPONSE:
        if (rpc->method != NULL || rpc->id == NULL ||
            (rpc->result != NULL) == (rpc->error != NULL)) {
            abort();
        }
        break;
    default:
        abort();
    }
    if (rpc->id != NULL) {
        expect_kind(gw_rpc_result(rpc->id, cJSON_CreateNull()), GW_RPC_RESPONSE,
                    rpc->id);
        expect_kind(gw_rpc_error(rpc->id, GW_RPC_TIMEOUT, "t"), GW_RPC_RESPONSE,
                    rpc->id);
        if (gw_rpc_id_u32(rpc->id, &id)) {
            cJSON *req = gw_rpc_request(id, "m", NULL);
            uint32_t again;
            struct gw_rpc back;

            if (id > GW_RPC_ID_MAX || req == NULL ||
                gw_rpc_classify(req, &back) != 0 ||
                !gw_rpc_id_u32(back.id, &again) || again != id) {
                abort();
            }
            cJSON_Delete(req);
        }
    }
    if (rpc->method != NULL) {
        expect_kind(gw_rpc_notification(rpc->method,
                                        rpc->params != NULL
                                            ? cJSON_Duplicate(rpc->params, true)
                                            : NULL),
                    GW_RPC_NOTIFICATION, NULL);
    }
    if (rpc->error != NULL) {
        check_error(rpc->id, rpc->error);
    }
}

/* name, joined to a label, splits back to both. */
static void check_join(const char *label, const char *name)
{
    char joined[GW_MCP_TOOL_NAME_MAX + 1];
    char back[GW_MCP_LABEL_LEN + 1];
    const char *tool;
    int err = gw_mcp_aggregate_name(label, name, joined, sizeof(joined));

    if (err == GW_EPROTO) {
        return;
    }
    if (err != 0 || !gw_mcp_tool_name_valid(joined, strlen(joined)) ||
        gw_mcp_aggregate_split(joined, back, &tool) != 0 ||
        strcmp(back, label) != 0 || strcmp(tool, name) != 0) {
        abort();
    }
}

/* A page, when valid, appends exactly its tools, each with a name. */
static void check_page(const cJSON *result, const char *label)
{
    cJSON *tools = cJSON_CreateArray();
    const cJSON *tool;
    const char *next = NULL;
    int err;

    if (tools == NULL) {
        abort();
    }
    err = gw_mcp_tools_page_parse(result, tools, &next);
    if (err != 0) {
        if (err != GW_EPROTO || cJSON_GetArraySize(tools) != 0) {
            abort();
        }
        cJSON_Delete(tools);
        return;
    }
    if (next != NULL && next[0] == '\0') {
        abort();
    }
    cJSON_ArrayForEach(tool, tools)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(tool, "name");
        if (!cJSON_IsString(name) || name->valuestring[0] == '\0') {
            abort();
        }
        (void)gw_mcp_tool_user_only(tool);
        check_join(label, name->valuestring);
    }
    cJSON_Delete(tools);
}

/* Any bytes as a client id give a well-formed label. */
static void check_label(const char *buf, size_t size, char *label)
{
    char joined[GW_MCP_TOOL_NAME_MAX + 1];

    if (gw_mcp_device_label(buf, size, label) != (size == 0 ? GW_EINVAL : 0)) {
        abort();
    }
    if (size == 0) {
        memcpy(label, "device000000-0000000000000000", GW_MCP_LABEL_LEN + 1);
    }
    if (strlen(label) != GW_MCP_LABEL_LEN ||
        gw_mcp_aggregate_name(label, "t", joined, sizeof(joined)) != 0) {
        abort();
    }
}

/* Splitting the raw text: what splits rejoins to exactly the input. */
static void check_split(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    char label[GW_MCP_LABEL_LEN + 1];
    char joined[GW_MCP_TOOL_NAME_MAX + 1];
    const char *tool;

    if (text == NULL) {
        abort();
    }
    memcpy(text, data, size);
    text[size] = '\0';
    if (gw_mcp_aggregate_split(text, label, &tool) == 0 &&
        (gw_mcp_aggregate_name(label, tool, joined, sizeof(joined)) != 0 ||
         strcmp(joined, text) != 0)) {
        abort();
    }
    free(text);
}

/* A progress token read back (gw_rpc_token_u32): a string one only in
 * its canonical digits, naming the number it spells. */
static void check_token(const cJSON *tok)
{
    char want[16];
    uint32_t v;

    if (!gw_rpc_token_u32(tok, &v) || !cJSON_IsString(tok)) {
        return;
    }
    snprintf(want, sizeof(want), "%u", v);
    if (v > GW_RPC_ID_MAX || strcmp(want, tok->valuestring) != 0) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = guarded_copy(data, size);
    char label[GW_MCP_LABEL_LEN + 1];
    struct gw_rpc rpc;
    cJSON *root;

    check_split(data, size);
    check_label(buf, size, label);
    if (gw_json_object_parse(buf, size, INPUT_MAX, &root) != 0) {
        return 0;
    }
    check_token(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(root, "params"), "progressToken"));
    if (gw_rpc_classify(root, &rpc) == 0) {
        check_rpc(&rpc);
        if (rpc.result != NULL) {
            check_page(rpc.result, label);
        }
    }
    /* Also as a bare page and a bare error, whatever the envelope. */
    check_page(root, label);
    check_error(NULL, root);
    (void)gw_mcp_tool_user_only(root);
    cJSON_Delete(root);
    return 0;
}
