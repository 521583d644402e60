/*
 * What the esp-mcp-like profile of the simulated device offers: its
 * tools, resources, templates and prompts, resource contents, prompt
 * messages and completions. Pure; the protocol is sim_espmcp.c.
 */
#include "tools/sim_espmcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The profile's own tools, as tools/list shows them. */
static const char *const sim_tools[] = {
    "{\"name\":\"self.sim.count\",\"description\":\"Counts to steps, one "
    "step every interval_ms, with a progress notification per step when "
    "the request carries a progress token.\",\"inputSchema\":{\"type\":"
    "\"object\",\"properties\":{\"steps\":{\"type\":\"integer\",\"minimum\":"
    "1,\"maximum\":50},\"interval_ms\":{\"type\":\"integer\",\"minimum\":10,"
    "\"maximum\":2000,\"default\":50}},\"required\":[\"steps\"]}}",
    "{\"name\":\"self.sim.job\",\"description\":\"A long job that ends "
    "after ms milliseconds; may run as a task.\",\"inputSchema\":{\"type\":"
    "\"object\",\"properties\":{\"ms\":{\"type\":\"integer\",\"minimum\":0,"
    "\"maximum\":600000}},\"required\":[\"ms\"]},\"execution\":"
    "{\"taskSupport\":\"optional\"}}",
    "{\"name\":\"self.sim.ask\",\"description\":\"Asks the client's model "
    "a question (sampling) and answers with its reply.\",\"inputSchema\":"
    "{\"type\":\"object\",\"properties\":{\"question\":{\"type\":"
    "\"string\"}},\"required\":[\"question\"]}}",
    "{\"name\":\"self.sim.confirm\",\"description\":\"Asks the user to "
    "confirm (elicitation) and answers with the action and content.\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"message\":"
    "{\"type\":\"string\"}},\"required\":[\"message\"]}}",
    "{\"name\":\"self.sim.roots\",\"description\":\"Lists the client's "
    "roots.\",\"inputSchema\":{\"type\":\"object\",\"properties\":{}}}",
    "{\"name\":\"self.sim.ask_cancel\",\"description\":\"Asks the client's "
    "model a question, then withdraws it after after_ms.\",\"inputSchema\":"
    "{\"type\":\"object\",\"properties\":{\"question\":{\"type\":"
    "\"string\"},\"after_ms\":{\"type\":\"integer\",\"minimum\":0,"
    "\"maximum\":600000}},\"required\":[\"question\",\"after_ms\"]}}",
    "{\"name\":\"self.sim.remote\",\"description\":\"Calls a tool of an "
    "MCP server the gateway knows by name.\",\"inputSchema\":{\"type\":"
    "\"object\",\"properties\":{\"endpoint\":{\"type\":\"string\"},"
    "\"tool\":{\"type\":\"string\"},\"arguments\":{\"type\":\"object\"}},"
    "\"required\":[\"endpoint\",\"tool\"]}}",
    "{\"name\":\"self.sim.touch\",\"description\":\"Changes the status "
    "resource.\",\"inputSchema\":{\"type\":\"object\",\"properties\":{}}}",
};

/* Added by --mcp-change-after-ms. */
static const char added_tool[] =
    "{\"name\":\"self.sim.added\",\"description\":\"A tool that appeared "
    "later.\",\"inputSchema\":{\"type\":\"object\",\"properties\":{}}}";

#define N_SIM_TOOLS (sizeof(sim_tools) / sizeof(sim_tools[0]))

/* Appends the JSON texts to arr; false on OOM (or a bad literal). */
static bool add_parsed(cJSON *arr, const char *json)
{
    cJSON *item = cJSON_Parse(json);

    if (item == NULL) {
        return false;
    }
    cJSON_AddItemToArray(arr, item);
    return true;
}

cJSON *gw_sim_esp_tools(const struct gw_sim_esp_catalog *c)
{
    cJSON *arr = gw_sim_mcp_tools_json(c->stock, c->with_user);

    if (arr == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < N_SIM_TOOLS; i++) {
        if (!add_parsed(arr, sim_tools[i])) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    if (c->changed && !add_parsed(arr, added_tool)) {
        cJSON_Delete(arr);
        return NULL;
    }
    return arr;
}

bool gw_sim_esp_is_sim_tool(const struct gw_sim_esp_catalog *c,
                            const char *name)
{
    static const char *const names[] = {
        "self.sim.count",   "self.sim.job",   "self.sim.ask",
        "self.sim.confirm", "self.sim.roots", "self.sim.ask_cancel",
        "self.sim.remote",  "self.sim.touch"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(name, names[i]) == 0) {
            return true;
        }
    }
    return c->changed && strcmp(name, "self.sim.added") == 0;
}

/* ---- resources --------------------------------------------------------- */

/* A few bytes of PNG (the signature and an IHDR start), base64. */
#define SNAPSHOT_B64 "iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB"

static const struct {
    const char *name, *value;
} sensors[] = {{"temp", "21.5"}, {"humidity", "40"}, {"tilt", "0"}};

#define N_SENSORS (sizeof(sensors) / sizeof(sensors[0]))

cJSON *gw_sim_esp_resources(const struct gw_sim_esp_catalog *c)
{
    char big[400];
    cJSON *arr = cJSON_CreateArray();

    snprintf(big, sizeof(big),
             "{\"uri\":\"device://big.txt\",\"name\":\"big\","
             "\"description\":\"A large text resource.\","
             "\"mimeType\":\"text/plain\",\"size\":%u}",
             (unsigned)c->big_bytes);
    if (arr == NULL ||
        !add_parsed(arr, "{\"uri\":\"device://status\",\"name\":\"status\","
                         "\"description\":\"Volume and touch count of the "
                         "device.\",\"mimeType\":\"application/json\"}") ||
        !add_parsed(arr, "{\"uri\":\"device://snapshot.png\",\"name\":"
                         "\"snapshot\",\"description\":\"A tiny picture.\","
                         "\"mimeType\":\"image/png\"}") ||
        !add_parsed(arr, big) ||
        (c->changed &&
         !add_parsed(arr, "{\"uri\":\"device://added.txt\",\"name\":"
                          "\"added\",\"description\":\"A resource that "
                          "appeared later.\",\"mimeType\":\"text/plain\"}"))) {
        cJSON_Delete(arr);
        return NULL;
    }
    return arr;
}

cJSON *gw_sim_esp_templates(const struct gw_sim_esp_catalog *c)
{
    cJSON *arr = cJSON_CreateArray();

    (void)c;
    if (arr == NULL ||
        !add_parsed(arr, "{\"uriTemplate\":\"device://sensor/{name}\","
                         "\"name\":\"sensor\",\"description\":\"One sensor: "
                         "temp, humidity or tilt.\",\"mimeType\":"
                         "\"text/plain\"}")) {
        cJSON_Delete(arr);
        return NULL;
    }
    return arr;
}

/* {uri, mimeType, text|blob} as the one element of a contents array. */
static cJSON *contents_of(const char *uri, const char *mime, const char *key,
                          const char *value)
{
    cJSON *arr = cJSON_CreateArray();
    cJSON *item = cJSON_CreateObject();

    if (arr == NULL || item == NULL) {
        cJSON_Delete(arr);
        cJSON_Delete(item);
        return NULL;
    }
    cJSON_AddItemToArray(arr, item);
    if (cJSON_AddStringToObject(item, "uri", uri) == NULL ||
        cJSON_AddStringToObject(item, "mimeType", mime) == NULL ||
        cJSON_AddStringToObject(item, key, value) == NULL) {
        cJSON_Delete(arr);
        return NULL;
    }
    return arr;
}

int gw_sim_esp_read(const struct gw_sim_esp_catalog *c, const char *uri,
                    cJSON **contents)
{
    char text[128];

    *contents = NULL;
    if (strcmp(uri, "device://status") == 0) {
        snprintf(text, sizeof(text), "{\"volume\":%d,\"touched\":%u}",
                 c->volume, (unsigned)c->touched);
        *contents = contents_of(uri, "application/json", "text", text);
    } else if (strcmp(uri, "device://snapshot.png") == 0) {
        *contents = contents_of(uri, "image/png", "blob", SNAPSHOT_B64);
    } else if (strcmp(uri, "device://big.txt") == 0) {
        char *big = malloc((size_t)c->big_bytes + 1);
        if (big == NULL) {
            return GW_ENOMEM;
        }
        for (uint32_t i = 0; i < c->big_bytes; i++) {
            big[i] = (char)('a' + i % 26);
        }
        big[c->big_bytes] = '\0';
        *contents = contents_of(uri, "text/plain", "text", big);
        free(big);
    } else if (c->changed && strcmp(uri, "device://added.txt") == 0) {
        *contents = contents_of(uri, "text/plain", "text", "added");
    } else if (strncmp(uri, "device://sensor/", 16) == 0) {
        size_t i;
        for (i = 0; i < N_SENSORS; i++) {
            if (strcmp(uri + 16, sensors[i].name) == 0) {
                break;
            }
        }
        if (i == N_SENSORS) {
            return GW_ENOENT;
        }
        snprintf(text, sizeof(text), "%s=%s", sensors[i].name,
                 sensors[i].value);
        *contents = contents_of(uri, "text/plain", "text", text);
    } else {
        return GW_ENOENT;
    }
    return *contents == NULL ? GW_ENOMEM : 0;
}

/* ---- prompts ------------------------------------------------------------ */

cJSON *gw_sim_esp_prompts(const struct gw_sim_esp_catalog *c)
{
    cJSON *arr = cJSON_CreateArray();

    if (arr == NULL ||
        !add_parsed(arr, "{\"name\":\"greeting\",\"description\":\"Greets "
                         "someone.\",\"arguments\":[{\"name\":\"name\","
                         "\"description\":\"who to greet\",\"required\":"
                         "true}]}") ||
        !add_parsed(arr, "{\"name\":\"status_report\",\"description\":"
                         "\"Reports on the device.\"}") ||
        (c->changed &&
         !add_parsed(arr, "{\"name\":\"added_prompt\",\"description\":\"A "
                          "prompt that appeared later.\"}"))) {
        cJSON_Delete(arr);
        return NULL;
    }
    return arr;
}

/* {description, messages:[{role:"user",content:{type:"text",text}}]} */
static cJSON *prompt_result(const char *description, const char *text)
{
    cJSON *r = cJSON_CreateObject();
    cJSON *msgs = cJSON_AddArrayToObject(r, "messages");
    cJSON *m = cJSON_CreateObject();
    cJSON *content;

    if (r == NULL || msgs == NULL || m == NULL) {
        cJSON_Delete(r);
        cJSON_Delete(m);
        return NULL;
    }
    cJSON_AddItemToArray(msgs, m);
    content = cJSON_AddObjectToObject(m, "content");
    if (cJSON_AddStringToObject(r, "description", description) == NULL ||
        cJSON_AddStringToObject(m, "role", "user") == NULL || content == NULL ||
        cJSON_AddStringToObject(content, "type", "text") == NULL ||
        cJSON_AddStringToObject(content, "text", text) == NULL) {
        cJSON_Delete(r);
        return NULL;
    }
    return r;
}

int gw_sim_esp_prompt_get(const struct gw_sim_esp_catalog *c, const char *name,
                          const cJSON *args, cJSON **result, const char **why)
{
    char text[300];

    *result = NULL;
    *why = NULL;
    if (strcmp(name, "greeting") == 0) {
        const char *who = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(args, "name"));
        if (who == NULL) {
            *why = "Missing required argument: name";
            return GW_EINVAL;
        }
        if (strlen(who) > 200) {
            *why = "Argument name is too long";
            return GW_EINVAL;
        }
        snprintf(text, sizeof(text), "Say hello to %s", who);
        *result = prompt_result("Greets someone.", text);
    } else if (strcmp(name, "status_report") == 0) {
        snprintf(text, sizeof(text),
                 "Report on the device: volume %d, touched %u times.",
                 c->volume, (unsigned)c->touched);
        *result = prompt_result("Reports on the device.", text);
    } else if (c->changed && strcmp(name, "added_prompt") == 0) {
        *result = prompt_result("A prompt that appeared later.",
                                "This prompt appeared later.");
    } else {
        return GW_ENOENT;
    }
    return *result == NULL ? GW_ENOMEM : 0;
}

/* ---- completion --------------------------------------------------------- */

int gw_sim_esp_complete(const struct gw_sim_esp_catalog *c, const cJSON *params,
                        cJSON **result)
{
    static const char *const people[] = {"alice", "alan", "bob"};
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(params, "ref");
    const cJSON *arg = cJSON_GetObjectItemCaseSensitive(params, "argument");
    const char *type =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ref, "type"));
    const char *aname =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(arg, "name"));
    const char *value =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(arg, "value"));
    const char *const *pool = NULL;
    const char *sensor_names[N_SENSORS];
    size_t n = 0;

    (void)c;
    *result = NULL;
    if (type == NULL || aname == NULL || value == NULL) {
        return GW_EINVAL;
    }
    if (strcmp(type, "ref/prompt") == 0) {
        const char *name =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ref, "name"));
        if (name == NULL) {
            return GW_EINVAL;
        }
        if (strcmp(name, "greeting") == 0 && strcmp(aname, "name") == 0) {
            pool = people;
            n = sizeof(people) / sizeof(people[0]);
        }
    } else if (strcmp(type, "ref/resource") == 0) {
        const char *uri =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ref, "uri"));
        if (uri == NULL) {
            return GW_EINVAL;
        }
        if (strcmp(uri, "device://sensor/{name}") == 0 &&
            strcmp(aname, "name") == 0) {
            for (size_t i = 0; i < N_SENSORS; i++) {
                sensor_names[i] = sensors[i].name;
            }
            pool = sensor_names;
            n = N_SENSORS;
        }
    } else {
        return GW_EINVAL;
    }
    cJSON *r = cJSON_CreateObject();
    cJSON *comp = cJSON_AddObjectToObject(r, "completion");
    cJSON *values = cJSON_AddArrayToObject(comp, "values");
    int total = 0;
    if (r == NULL || comp == NULL || values == NULL) {
        cJSON_Delete(r);
        return GW_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        if (strncmp(pool[i], value, strlen(value)) == 0) {
            cJSON *s = cJSON_CreateString(pool[i]);
            if (s == NULL) {
                cJSON_Delete(r);
                return GW_ENOMEM;
            }
            cJSON_AddItemToArray(values, s);
            total++;
        }
    }
    if (cJSON_AddNumberToObject(comp, "total", total) == NULL ||
        cJSON_AddBoolToObject(comp, "hasMore", 0) == NULL) {
        cJSON_Delete(r);
        return GW_ENOMEM;
    }
    *result = r;
    return 0;
}
