/*
 * The esp-mcp-like MCP server's tools: the stock ones through the stock
 * server, the profile's own (progress, jobs and tasks, requests to the
 * device's client, remote calls, the status resource), and the calls
 * that wait on a timer or on an answer.
 */
#include "tools/sim_espmcp_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Task timestamps: ISO 8601, UTC, to the second. */
static void iso_now(char *out, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ---- calls, device requests and tasks -------------------------------- */

static struct call *call_new(struct gw_sim_esp *e, const cJSON *id,
                             enum call_kind kind, const char *tool)
{
    struct call *c = calloc(1, sizeof(*c));

    if (c == NULL || (c->id = cJSON_Duplicate(id, true)) == NULL) {
        free(c);
        e->oom = true;
        return NULL;
    }
    c->kind = kind;
    c->due_ms = NEVER;
    snprintf(c->tool, sizeof(c->tool), "%s", tool);
    c->next = e->calls;
    e->calls = c;
    return c;
}

void gw_sim_esp_call_free(struct gw_sim_esp *e, struct call *c)
{
    for (struct call **pp = &e->calls; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    if (c->waits_for != NULL) {
        c->waits_for->call = NULL;
    }
    cJSON_Delete(c->id);
    cJSON_Delete(c->token);
    free(c);
}

struct call *gw_sim_esp_call_by_id(struct gw_sim_esp *e, const cJSON *id)
{
    for (struct call *c = e->calls; c != NULL; c = c->next) {
        if (cJSON_Compare(c->id, id, true)) {
            return c;
        }
    }
    return NULL;
}

struct out *gw_sim_esp_out_by_id(struct gw_sim_esp *e, const cJSON *id)
{
    if (!gw_sim_esp_integral(id) || id->valuedouble < 1 ||
        id->valuedouble > (double)UINT32_MAX) {
        return NULL;
    }
    for (struct out *o = e->outs; o != NULL; o = o->next) {
        if (o->id == (uint32_t)id->valuedouble) {
            return o;
        }
    }
    return NULL;
}

/* Withdraws a pending device request: notifications/cancelled. */
void gw_sim_esp_withdraw(struct gw_sim_esp *e, struct out *o,
                         const char *reason)
{
    cJSON *p = cJSON_CreateObject();
    char detail[48];

    if (o->state != O_PENDING) {
        return;
    }
    o->state = O_WITHDRAWN;
    if (p == NULL || cJSON_AddNumberToObject(p, "requestId", o->id) == NULL ||
        cJSON_AddStringToObject(p, "reason", reason) == NULL) {
        cJSON_Delete(p);
        e->oom = true;
        return;
    }
    snprintf(detail, sizeof(detail), "requestId=%" PRIu32, o->id);
    gw_sim_esp_notify(e, o->endpoint, "notifications/cancelled", p, detail);
}

static struct task *task_by_id(struct gw_sim_esp *e, const char *id)
{
    for (struct task *t = e->tasks; t != NULL; t = t->next) {
        if (id != NULL && strcmp(t->id, id) == 0) {
            return t;
        }
    }
    return NULL;
}

static cJSON *task_json(const struct task *t)
{
    static const char *const names[] = {"working", "completed", "cancelled"};
    cJSON *j = cJSON_CreateObject();

    if (j == NULL || cJSON_AddStringToObject(j, "taskId", t->id) == NULL ||
        cJSON_AddStringToObject(j, "status", names[t->status]) == NULL ||
        (t->status == TS_CANCELLED &&
         cJSON_AddStringToObject(j, "statusMessage",
                                 "cancelled by the client") == NULL) ||
        cJSON_AddStringToObject(j, "createdAt", t->created) == NULL ||
        cJSON_AddStringToObject(j, "lastUpdatedAt", t->updated) == NULL ||
        cJSON_AddNumberToObject(j, "ttl", t->ttl) == NULL ||
        cJSON_AddNumberToObject(j, "pollInterval", POLL_INTERVAL) == NULL) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static cJSON *task_result(const struct task *t)
{
    char text[64];
    cJSON *r, *meta, *rel;

    snprintf(text, sizeof(text), "job done after %" PRIu32 " ms", t->ms);
    r = gw_sim_esp_text_result(text, false);
    meta = cJSON_AddObjectToObject(r, "_meta");
    rel = cJSON_AddObjectToObject(meta, RELATED_TASK);
    if (rel == NULL || cJSON_AddStringToObject(rel, "taskId", t->id) == NULL) {
        cJSON_Delete(r);
        return NULL;
    }
    return r;
}

/* Status change: notify, and answer whoever waits on tasks/result. */
void gw_sim_esp_task_settle(struct gw_sim_esp *e, struct task *t,
                            enum task_status status)
{
    cJSON *id;

    t->status = status;
    t->due_ms = NEVER;
    iso_now(t->updated, sizeof(t->updated));
    gw_sim_esp_notify(e, NULL, "notifications/tasks/status", task_json(t),
                      t->id);
    cJSON_ArrayForEach(id, t->waiters)
    {
        if (status == TS_COMPLETED) {
            gw_sim_esp_reply(e, id, task_result(t), "tasks/result");
        } else {
            gw_sim_esp_reply_error(e, id, -32603, "tasks/result",
                                   "task %s was cancelled: it has no result",
                                   t->id);
        }
    }
    cJSON_Delete(t->waiters);
    t->waiters = NULL;
}

/* ---- tools/call ------------------------------------------------------ */

/* An integer argument in [lo, hi]; absent gives def (or false if def <
 * 0). */
static bool int_arg(const cJSON *args, const char *name, long lo, long hi,
                    long def, long *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, name);

    if (v == NULL && def >= 0) {
        *out = def;
        return true;
    }
    if (!gw_sim_esp_integral(v) || v->valuedouble < (double)lo ||
        v->valuedouble > (double)hi) {
        return false;
    }
    *out = (long)v->valuedouble;
    return true;
}

static const char *str_arg(const cJSON *args, const char *name)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(args, name));
}

void gw_sim_esp_remote_call(struct gw_sim_esp *e, struct call *c, int index,
                            const char *endpoint, const char *tool,
                            const cJSON *args)
{
    cJSON *p = cJSON_CreateObject();
    cJSON *a =
        args != NULL ? cJSON_Duplicate(args, true) : cJSON_CreateObject();
    struct out *o;

    if (p == NULL || a == NULL ||
        cJSON_AddStringToObject(p, "name", tool) == NULL) {
        cJSON_Delete(p);
        cJSON_Delete(a);
        e->oom = true;
        return;
    }
    cJSON_AddItemToObject(p, "arguments", a);
    if (e->o.remote_progress) {
        /* The token is the request's own id (the next one). */
        cJSON *meta = cJSON_AddObjectToObject(p, "_meta");
        if (meta == NULL ||
            cJSON_AddNumberToObject(meta, "progressToken",
                                    e->next_out_id + 1) == NULL) {
            cJSON_Delete(p);
            e->oom = true;
            return;
        }
    }
    if ((o = gw_sim_esp_request(e, endpoint, "tools/call", p)) == NULL) {
        return;
    }
    snprintf(o->tool, sizeof(o->tool), "%s", tool);
    o->remote_index = index;
    o->call = c;
    if (c != NULL) {
        c->waits_for = o;
    }
}

static cJSON *sampling_params(const char *question)
{
    cJSON *p = cJSON_CreateObject();
    cJSON *msgs = cJSON_AddArrayToObject(p, "messages");
    cJSON *m = cJSON_CreateObject();
    cJSON *content;

    if (p == NULL || msgs == NULL || m == NULL) {
        cJSON_Delete(p);
        cJSON_Delete(m);
        return NULL;
    }
    cJSON_AddItemToArray(msgs, m);
    content = cJSON_AddObjectToObject(m, "content");
    if (cJSON_AddStringToObject(m, "role", "user") == NULL || content == NULL ||
        cJSON_AddStringToObject(content, "type", "text") == NULL ||
        cJSON_AddStringToObject(content, "text", question) == NULL ||
        cJSON_AddNumberToObject(p, "maxTokens", 64) == NULL) {
        cJSON_Delete(p);
        return NULL;
    }
    return p;
}

static cJSON *elicitation_params(const char *message)
{
    cJSON *p = cJSON_CreateObject();
    cJSON *schema =
        cJSON_Parse("{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":"
                    "\"boolean\"}},\"required\":[\"ok\"]}");

    if (p == NULL || schema == NULL ||
        cJSON_AddStringToObject(p, "mode", "form") == NULL ||
        cJSON_AddStringToObject(p, "message", message) == NULL) {
        cJSON_Delete(p);
        cJSON_Delete(schema);
        return NULL;
    }
    cJSON_AddItemToObject(p, "requestedSchema", schema);
    return p;
}

/* The capability a request to the client needs. */
static unsigned cap_of(const char *method)
{
    return strcmp(method, "sampling/createMessage") == 0
               ? GW_SIM_ESP_CAP_SAMPLING
           : strcmp(method, "elicitation/create") == 0
               ? GW_SIM_ESP_CAP_ELICITATION
               : GW_SIM_ESP_CAP_ROOTS;
}

/* Waits on a device request made for the call. Behind the capability gate
 * (esp-mcp's), a request the client did not declare is not made: the
 * call fails at once. */
static void ask_client(struct gw_sim_esp *e, struct call *c, const char *method,
                       cJSON *params)
{
    struct out *o;

    if (c != NULL && e->o.capability_gate &&
        (e->client_caps & cap_of(method)) == 0) {
        char text[96];
        snprintf(text, sizeof(text), "the client did not declare %s", method);
        cJSON_Delete(params);
        gw_sim_esp_reply_text(e, c->id, text, true);
        gw_sim_esp_call_free(e, c);
        return;
    }
    if (c == NULL ||
        (o = gw_sim_esp_request(e, NULL, method, params)) == NULL) {
        if (c != NULL) {
            gw_sim_esp_call_free(e, c);
        } else {
            cJSON_Delete(params);
        }
        return;
    }
    o->call = c;
    c->waits_for = o;
}

static void sim_job(struct gw_sim_esp *e, uint64_t now, const cJSON *id,
                    const cJSON *params, long ms)
{
    const cJSON *task = cJSON_GetObjectItemCaseSensitive(params, "task");
    const cJSON *ttl = cJSON_GetObjectItemCaseSensitive(task, "ttl");
    struct task *t;
    cJSON *r;

    if (task == NULL) {
        struct call *c = call_new(e, id, C_JOB, "self.sim.job");
        if (c != NULL) {
            c->ms = (uint32_t)ms;
            c->due_ms = now + (uint64_t)ms;
        }
        return;
    }
    if (e->n_tasks >= MAX_TASKS) {
        gw_sim_esp_reply_error(e, id, -32603, "tools/call",
                               "too many tasks (%d)", MAX_TASKS);
        return;
    }
    if ((t = calloc(1, sizeof(*t))) == NULL) {
        e->oom = true;
        return;
    }
    snprintf(t->id, sizeof(t->id), "job-%" PRIu32, ++e->next_task);
    t->status = TS_WORKING;
    iso_now(t->created, sizeof(t->created));
    memcpy(t->updated, t->created, sizeof(t->updated));
    t->ttl = cJSON_IsNumber(ttl) && ttl->valuedouble >= 0 ? ttl->valuedouble
                                                          : DEFAULT_TTL;
    t->ms = (uint32_t)ms;
    t->due_ms = now + (uint64_t)ms;
    t->next = e->tasks;
    e->tasks = t;
    e->n_tasks++;
    e->st.tasks++;
    r = cJSON_CreateObject();
    cJSON *tj = task_json(t);
    if (r == NULL || tj == NULL) {
        cJSON_Delete(r);
        cJSON_Delete(tj);
        e->oom = true;
        return;
    }
    cJSON_AddItemToObject(r, "task", tj);
    e->stock->calls++;
    gw_sim_esp_reply(e, id, r, "tools/call task");
}

static void subscribed_update(struct gw_sim_esp *e, const char *uri)
{
    cJSON *p;

    for (size_t i = 0; i < e->n_subs; i++) {
        if (strcmp(e->subs[i], uri) == 0) {
            p = cJSON_CreateObject();
            if (p == NULL || cJSON_AddStringToObject(p, "uri", uri) == NULL) {
                cJSON_Delete(p);
                e->oom = true;
                return;
            }
            e->st.updates_sent++;
            gw_sim_esp_notify(e, NULL, "notifications/resources/updated", p,
                              uri);
            return;
        }
    }
}

/* The profile's own tools. args is an object (maybe empty). */
static void sim_tool(struct gw_sim_esp *e, uint64_t now, const cJSON *id,
                     const char *name, const cJSON *params, const cJSON *args)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
    const cJSON *token =
        cJSON_GetObjectItemCaseSensitive(meta, "progressToken");
    char text[160];
    long a, b;
    struct call *c;

    if (cJSON_GetObjectItemCaseSensitive(params, "task") != NULL &&
        strcmp(name, "self.sim.job") != 0) {
        gw_sim_esp_reply_error(
            e, id, -32601, "tools/call",
            "Tool %s does not support task-augmented execution", name);
        return;
    }
    if (strcmp(name, "self.sim.count") == 0) {
        if (!int_arg(args, "steps", 1, 50, -1, &a) ||
            !int_arg(args, "interval_ms", 10, 2000, 50, &b)) {
            gw_sim_esp_reply_text(
                e, id,
                "Invalid arguments: steps must be an integer in "
                "1..50, interval_ms in 10..2000",
                true);
            return;
        }
        if ((c = call_new(e, id, C_COUNT, name)) == NULL) {
            return;
        }
        c->steps = (uint32_t)a;
        c->interval_ms = (uint32_t)b;
        c->due_ms = now + (uint64_t)b;
        if ((cJSON_IsString(token) || cJSON_IsNumber(token)) &&
            (c->token = cJSON_Duplicate(token, true)) == NULL) {
            e->oom = true;
        }
    } else if (strcmp(name, "self.sim.job") == 0) {
        if (!int_arg(args, "ms", 0, 600000, -1, &a)) {
            gw_sim_esp_reply_text(e, id,
                                  "Invalid arguments: ms must be an integer in "
                                  "0..600000",
                                  true);
            return;
        }
        sim_job(e, now, id, params, a);
    } else if (strcmp(name, "self.sim.ask") == 0 ||
               strcmp(name, "self.sim.ask_cancel") == 0) {
        bool withdraws = strcmp(name, "self.sim.ask_cancel") == 0;
        const char *q = str_arg(args, "question");
        if (q == NULL ||
            (withdraws && !int_arg(args, "after_ms", 0, 600000, -1, &a))) {
            gw_sim_esp_reply_text(
                e, id,
                withdraws ? "Invalid arguments: question (string) and "
                            "after_ms (0..600000) are required"
                          : "Invalid arguments: question (string) is "
                            "required",
                true);
            return;
        }
        c = call_new(e, id, withdraws ? C_ASK_CANCEL : C_ASK, name);
        if (c != NULL && withdraws) {
            c->due_ms = now + (uint64_t)a;
        }
        e->st.samplings++;
        ask_client(e, c, "sampling/createMessage", sampling_params(q));
    } else if (strcmp(name, "self.sim.confirm") == 0) {
        const char *msg = str_arg(args, "message");
        if (msg == NULL) {
            gw_sim_esp_reply_text(
                e, id, "Invalid arguments: message (string) is required", true);
            return;
        }
        e->st.elicitations++;
        ask_client(e, call_new(e, id, C_CONFIRM, name), "elicitation/create",
                   elicitation_params(msg));
    } else if (strcmp(name, "self.sim.roots") == 0) {
        e->st.roots++;
        ask_client(e, call_new(e, id, C_ROOTS, name), "roots/list", NULL);
    } else if (strcmp(name, "self.sim.remote") == 0) {
        const char *ep = str_arg(args, "endpoint");
        const char *tool = str_arg(args, "tool");
        const cJSON *rargs =
            cJSON_GetObjectItemCaseSensitive(args, "arguments");
        if (ep == NULL || ep[0] == '\0' || tool == NULL ||
            (rargs != NULL && !cJSON_IsObject(rargs))) {
            gw_sim_esp_reply_text(
                e, id,
                "Invalid arguments: endpoint and tool (strings) are "
                "required, arguments must be an object",
                true);
            return;
        }
        if ((c = call_new(e, id, C_REMOTE, name)) != NULL) {
            gw_sim_esp_remote_call(e, c, -1, ep, tool, rargs);
        }
    } else if (strcmp(name, "self.sim.touch") == 0) {
        e->cat.touched++;
        snprintf(text, sizeof(text), "touched %" PRIu32, e->cat.touched);
        subscribed_update(e, "device://status");
        gw_sim_esp_log(e, 1, text);
        gw_sim_esp_reply_text(e, id, text, false);
    } else { /* self.sim.added */
        gw_sim_esp_reply_text(e, id, "added", false);
    }
}

/* Stock tools are answered by the stock server, errors given a code. */
static void stock_tool(struct gw_sim_esp *e, const cJSON *msg, const cJSON *id)
{
    char *reply = NULL;
    size_t len = 0;
    cJSON *r, *err;

    if (gw_sim_mcp_handle(e->stock, msg, &reply, &len) != 0 || reply == NULL) {
        free(reply);
        e->oom = true;
        return;
    }
    e->stock->answered--; /* counted again when queued below */
    e->cat.volume = e->stock->volume;
    r = cJSON_ParseWithLength(reply, len);
    free(reply);
    err = cJSON_GetObjectItemCaseSensitive(r, "error");
    if (r == NULL) {
        e->oom = true;
    } else if (err != NULL) {
        /* The firmware's errors lack a code; this engine gives one. */
        const char *m = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(err, "message"));
        gw_sim_esp_reply_error(e, id, -32602, "tools/call", "%s",
                               m ? m : "error");
    } else {
        gw_sim_esp_reply(e, id,
                         cJSON_DetachItemFromObjectCaseSensitive(r, "result"),
                         "tools/call");
    }
    cJSON_Delete(r);
}

void gw_sim_esp_tools_call(struct gw_sim_esp *e, uint64_t now, const cJSON *msg,
                           const cJSON *id, const cJSON *params)
{
    const char *name =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(params, "name"));
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
    cJSON *empty;
    char line[300];

    if (name == NULL) {
        gw_sim_esp_reply_error(e, id, -32602, "tools/call", "Missing name");
        return;
    }
    if (args != NULL && !cJSON_IsObject(args)) {
        gw_sim_esp_reply_error(e, id, -32602, "tools/call",
                               "Invalid arguments");
        return;
    }
    snprintf(line, sizeof(line), "tools/call %s", name);
    gw_sim_esp_log(e, 1, line);
    char *a = args != NULL ? cJSON_PrintUnformatted(args) : NULL;
    snprintf(line, sizeof(line), "tools/call %s arguments %.200s", name,
             a != NULL ? a : "{}");
    free(a);
    gw_sim_esp_log(e, 0, line);
    if (!gw_sim_esp_is_sim_tool(&e->cat, name)) {
        if (cJSON_GetObjectItemCaseSensitive(params, "task") != NULL) {
            gw_sim_esp_reply_error(
                e, id, -32601, "tools/call",
                "Tool %s does not support task-augmented execution", name);
            return;
        }
        stock_tool(e, msg, id);
        return;
    }
    empty = cJSON_CreateObject();
    if (empty == NULL) {
        e->oom = true;
        return;
    }
    sim_tool(e, now, id, name, params, args != NULL ? args : empty);
    cJSON_Delete(empty);
}

void gw_sim_esp_tasks(struct gw_sim_esp *e, const char *meth, const cJSON *id,
                      const cJSON *params)
{
    const char *tid = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(params, "taskId"));
    struct task *t;

    if (strcmp(meth, "tasks/list") == 0) {
        cJSON *r = cJSON_CreateObject();
        cJSON *arr = cJSON_AddArrayToObject(r, "tasks");
        if (arr == NULL) {
            cJSON_Delete(r);
            e->oom = true;
            return;
        }
        for (t = e->tasks; t != NULL; t = t->next) {
            cJSON_AddItemToArray(arr, task_json(t));
        }
        gw_sim_esp_reply(e, id, r, meth);
        return;
    }
    if ((t = task_by_id(e, tid)) == NULL) {
        gw_sim_esp_reply_error(e, id, -32602, meth, "Task not found: %s",
                               tid ? tid : "(no taskId)");
        return;
    }
    if (strcmp(meth, "tasks/get") == 0) {
        gw_sim_esp_reply(e, id, task_json(t), meth);
    } else if (strcmp(meth, "tasks/result") == 0) {
        if (t->status == TS_COMPLETED) {
            gw_sim_esp_reply(e, id, task_result(t), meth);
        } else if (t->status == TS_CANCELLED) {
            gw_sim_esp_reply_error(e, id, -32603, meth,
                                   "task %s was cancelled: it has no result",
                                   t->id);
        } else if ((t->waiters == NULL &&
                    (t->waiters = cJSON_CreateArray()) == NULL) ||
                   !cJSON_AddItemToArray(t->waiters,
                                         cJSON_Duplicate(id, true))) {
            e->oom = true;
        }
    } else { /* tasks/cancel */
        if (t->status != TS_WORKING) {
            gw_sim_esp_reply_error(e, id, -32602, meth,
                                   "Cannot cancel task in terminal status: %s",
                                   t->status == TS_COMPLETED ? "completed"
                                                             : "cancelled");
            return;
        }
        gw_sim_esp_task_settle(e, t, TS_CANCELLED);
        gw_sim_esp_reply(e, id, task_json(t), meth);
    }
}

/* A call waiting on a device request gets its answer. */
void gw_sim_esp_finish_call(struct gw_sim_esp *e, struct call *c,
                            const cJSON *result, const cJSON *error)
{
    char *text = NULL;
    bool is_error = error != NULL;

    if (error != NULL) {
        text = gw_sim_esp_error_text(error, c->kind == C_REMOTE);
    } else if (c->kind == C_REMOTE) {
        /* The remote result as it came: content copied. */
        cJSON *r = cJSON_CreateObject();
        const cJSON *item;
        cJSON_ArrayForEach(item, result)
        {
            if (strcmp(item->string, "_meta") != 0) {
                cJSON_AddItemToObject(r, item->string,
                                      cJSON_Duplicate(item, true));
            }
        }
        e->stock->calls++;
        gw_sim_esp_reply(e, c->id, r, "tools/call");
        gw_sim_esp_call_free(e, c);
        return;
    } else if (c->kind == C_ASK || c->kind == C_ASK_CANCEL) {
        text = gw_sim_esp_content_text(result);
        if (text == NULL) {
            text = strdup("the sampling answer has no text");
            is_error = true;
        }
    } else if (c->kind == C_CONFIRM) {
        cJSON *o = cJSON_CreateObject();
        const cJSON *action =
            cJSON_GetObjectItemCaseSensitive(result, "action");
        const cJSON *content =
            cJSON_GetObjectItemCaseSensitive(result, "content");
        if (o != NULL) {
            cJSON_AddItemToObject(o, "action",
                                  action ? cJSON_Duplicate(action, true)
                                         : cJSON_CreateNull());
            cJSON_AddItemToObject(o, "content",
                                  content ? cJSON_Duplicate(content, true)
                                          : cJSON_CreateNull());
            text = cJSON_PrintUnformatted(o);
            cJSON_Delete(o);
        }
    } else { /* C_ROOTS */
        const cJSON *roots = cJSON_GetObjectItemCaseSensitive(result, "roots");
        text = roots != NULL ? cJSON_PrintUnformatted(roots)
                             : strdup("the roots answer has no roots");
        is_error = roots == NULL;
    }
    if (text == NULL) {
        e->oom = true;
        gw_sim_esp_call_free(e, c);
        return;
    }
    gw_sim_esp_reply_text(e, c->id, text, is_error);
    free(text);
    gw_sim_esp_call_free(e, c);
}

/* ---- timers ------------------------------------------------------------ */

void gw_sim_esp_count_step(struct gw_sim_esp *e, struct call *c)
{
    char text[48];

    c->step++;
    if (c->token != NULL) {
        cJSON *p = cJSON_CreateObject();
        snprintf(text, sizeof(text), "step %" PRIu32, c->step);
        if (p == NULL) {
            e->oom = true;
            return;
        }
        if (e->o.string_progress && cJSON_IsNumber(c->token)) {
            /* esp-mcp keeps a numeric token as text and echoes that. */
            char tok[32];
            snprintf(tok, sizeof(tok), "%.0f", c->token->valuedouble);
            cJSON_AddStringToObject(p, "progressToken", tok);
        } else {
            cJSON_AddItemToObject(p, "progressToken",
                                  cJSON_Duplicate(c->token, true));
        }
        cJSON_AddNumberToObject(p, "progress", c->step);
        cJSON_AddNumberToObject(p, "total", c->steps);
        cJSON_AddStringToObject(p, "message", text);
        e->st.progress_sent++;
        gw_sim_esp_notify(e, NULL, "notifications/progress", p, text);
    }
    if (c->step >= c->steps) {
        snprintf(text, sizeof(text), "counted %" PRIu32, c->steps);
        gw_sim_esp_reply_text(e, c->id, text, false);
        gw_sim_esp_call_free(e, c);
    } else {
        c->due_ms += c->interval_ms;
    }
}
