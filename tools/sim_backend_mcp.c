/*
 * The MCP client the xiaozhi server runs against a device, in the mock
 * backend: initialize, tools/list over every page, then each --mcp-call
 * with its timeout, with the server's fixed and colliding ids.
 */
#include "tools/sim_backend_int.h"

#include <string.h>

#define MCP_INIT_ID  1 /* the xiaozhi server's fixed ids */
#define MCP_TOOLS_ID 2

static cJSON *rpc_new(uint32_t id, const char *method)
{
    cJSON *p = cJSON_CreateObject();

    cJSON_AddStringToObject(p, "jsonrpc", "2.0");
    if (id != 0) {
        cJSON_AddNumberToObject(p, "id", id);
    }
    cJSON_AddStringToObject(p, "method", method);
    return p;
}

/* {"type":"mcp","payload":p}: the server adds no session_id here. */
static void mcp_send(struct conn *c, cJSON *p)
{
    cJSON *ev = gw_sim_be_ev_new("mcp_tx", c);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(p, "id");
    cJSON *o = gw_sim_be_msg_new("mcp");

    if (cJSON_IsNumber(id)) {
        cJSON_AddNumberToObject(ev, "id", id->valuedouble);
    }
    cJSON_AddStringToObject(ev, "method", gw_sim_be_str_item(p, "method"));
    gw_sim_be_ev_emit(c->m, ev);
    cJSON_AddItemToObject(o, "payload", p);
    gw_sim_be_queue_json(c, o, false);
}

void gw_sim_be_mcp_start(struct conn *c)
{
    cJSON *p, *params, *caps, *vision, *info;

    if (!c->dev_mcp) {
        c->mcp = MCP_DONE; /* the server also needs features.mcp */
        gw_sim_be_ev_emit(c->m, gw_sim_be_ev_new("mcp_skipped", c));
        return;
    }
    p = rpc_new(MCP_INIT_ID, "initialize");
    params = cJSON_AddObjectToObject(p, "params");
    cJSON_AddStringToObject(
        params, "protocolVersion",
        c->m->opt.mcp_protocol != NULL ? c->m->opt.mcp_protocol : "2024-11-05");
    caps = cJSON_AddObjectToObject(params, "capabilities");
    cJSON_AddBoolToObject(cJSON_AddObjectToObject(caps, "roots"), "listChanged",
                          1);
    cJSON_AddObjectToObject(caps, "sampling");
    vision = cJSON_AddObjectToObject(caps, "vision");
    cJSON_AddStringToObject(vision, "url", GW_SIM_BACKEND_VISION_URL);
    cJSON_AddStringToObject(vision, "token", GW_SIM_BACKEND_VISION_TOKEN);
    info = cJSON_AddObjectToObject(params, "clientInfo");
    cJSON_AddStringToObject(info, "name", "XiaozhiClient");
    cJSON_AddStringToObject(info, "version", "1.0.0");
    c->mcp = MCP_INIT;
    mcp_send(c, p);
}

/* Every page of tools/list reuses id 2, like the server. */
static void mcp_list(struct conn *c, const char *cursor)
{
    cJSON *p = rpc_new(MCP_TOOLS_ID, "tools/list");

    if (cursor != NULL) {
        cJSON_AddStringToObject(cJSON_AddObjectToObject(p, "params"), "cursor",
                                cursor);
    }
    c->mcp = MCP_LIST;
    mcp_send(c, p);
}

/* tools/call ids come from a counter starting at 1: they collide with the
 * fixed initialize and tools/list ids on purpose, as with the server. */
static void mcp_next_call(struct conn *c)
{
    const struct mock_opts *o = &c->m->opt;
    cJSON *p, *params;
    int i = c->mcp_call_idx;

    if (i >= o->n_calls) {
        c->mcp = MCP_DONE;
        return;
    }
    c->mcp_call_idx++;
    c->mcp_call_id = c->mcp_next_id++;
    p = rpc_new(c->mcp_call_id, "tools/call");
    params = cJSON_AddObjectToObject(p, "params");
    cJSON_AddStringToObject(params, "name", o->call_name[i]);
    cJSON_AddItemToObject(params, "arguments",
                          cJSON_Duplicate(o->call_args[i], 1));
    c->mcp = MCP_CALL;
    mcp_send(c, p);
    gw_sim_be_aux_start(c, AUX_MCP_CALL, o->mcp_timeout_ms);
}

static void mcp_tools_page(struct conn *c, const cJSON *result)
{
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(result, "tools");
    const cJSON *t;
    const char *next;
    cJSON *ev;

    if (!cJSON_IsArray(tools)) {
        return; /* the server logs and waits: so do we */
    }
    c->mcp_pages++;
    if (c->mcp_tools == NULL) {
        c->mcp_tools = cJSON_CreateArray();
    }
    cJSON_ArrayForEach(t, tools)
    {
        const char *name = gw_sim_be_str_item(t, "name");
        cJSON_AddItemToArray(c->mcp_tools,
                             cJSON_CreateString(name != NULL ? name : ""));
    }
    next = gw_sim_be_str_item(result, "nextCursor");
    if (next != NULL && next[0] != '\0') {
        mcp_list(c, next);
        return;
    }
    ev = gw_sim_be_ev_new("mcp_tools", c);
    cJSON_AddNumberToObject(ev, "pages", c->mcp_pages);
    cJSON_AddNumberToObject(ev, "count", cJSON_GetArraySize(c->mcp_tools));
    cJSON_AddItemToObject(ev, "names", c->mcp_tools);
    c->mcp_tools = NULL;
    gw_sim_be_ev_emit(c->m, ev);
    mcp_next_call(c);
}

/* A device reply is matched to the request waiting for it, if any. */
void gw_sim_be_on_mcp(struct conn *c, const cJSON *root)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "payload");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(p, "id");
    const cJSON *result = cJSON_GetObjectItemCaseSensitive(p, "result");
    bool answer = cJSON_IsNumber(id) &&
                  (result != NULL || cJSON_HasObjectItem(p, "error"));
    double v = cJSON_IsNumber(id) ? id->valuedouble : -1;
    const char *matched = "none";
    cJSON *ev = gw_sim_be_ev_new("mcp", c);

    if (answer && c->mcp == MCP_CALL && v == c->mcp_call_id) {
        matched = "tools/call";
    } else if (result != NULL && c->mcp == MCP_INIT && v == MCP_INIT_ID) {
        matched = "initialize";
    } else if (result != NULL && c->mcp == MCP_LIST && v == MCP_TOOLS_ID) {
        matched = "tools/list";
    }
    cJSON_AddStringToObject(ev, "matched", matched);
    cJSON_AddItemToObject(ev, "payload", cJSON_Duplicate(p, 1));
    gw_sim_be_ev_emit(c->m, ev);
    if (strcmp(matched, "tools/call") == 0) {
        uv_timer_stop(&c->aux_timer);
        c->aux = AUX_NONE;
        mcp_next_call(c);
    } else if (strcmp(matched, "initialize") == 0) {
        if (c->m->opt.mcp_notify) {
            mcp_send(c, rpc_new(0, "notifications/initialized"));
        }
        c->mcp = MCP_LIST_WAIT;
        if (c->m->opt.mcp_list_delay_ms > 0) {
            gw_sim_be_aux_start(c, AUX_MCP_LIST, c->m->opt.mcp_list_delay_ms);
        } else {
            mcp_list(c, NULL);
        }
    } else if (strcmp(matched, "tools/list") == 0) {
        mcp_tools_page(c, result);
    }
}

static void on_aux(uv_timer_t *t)
{
    struct conn *c = t->data;
    enum aux_job job = c->aux;
    cJSON *ev;

    c->aux = AUX_NONE;
    if (c->wsi == NULL) {
        return;
    }
    switch (job) {
    case AUX_HELLO:
        gw_sim_be_send_hello(c);
        break;
    case AUX_MCP_LIST:
        mcp_list(c, NULL);
        break;
    case AUX_MCP_CALL:
        ev = gw_sim_be_ev_new("mcp_timeout", c);
        cJSON_AddNumberToObject(ev, "id", c->mcp_call_id);
        gw_sim_be_ev_emit(c->m, ev);
        mcp_next_call(c);
        break;
    default:
        break;
    }
}

void gw_sim_be_aux_start(struct conn *c, enum aux_job job, int ms)
{
    c->aux = job;
    uv_timer_start(&c->aux_timer, on_aux, (uint64_t)ms, 0);
}
