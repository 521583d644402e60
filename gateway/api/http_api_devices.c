/*
 * /api/devices (http.token): what the gateway knows of each device, its
 * session and its MCP state; POST /api/devices/{id}/refresh lists the
 * device's tools again.
 */
#include "gateway/api/http_api_int.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>

#include "common/log.h"
#include "gateway/session/session.h"

#define SUBJECT "http"

/* What the device's initialize said, and the sizes of its lists. */
static void add_catalog(cJSON *mcp, const struct gw_mcp_catalog *c)
{
    cJSON *server = cJSON_AddObjectToObject(mcp, "server");
    cJSON *caps = cJSON_AddArrayToObject(mcp, "capabilities");

    cJSON_AddStringToObject(server, "name", c->info.name);
    cJSON_AddStringToObject(server, "version", c->info.server_ver);
    cJSON_AddStringToObject(server, "protocol", c->info.version);
    for (unsigned bit = 1; bit <= GW_MCP_CAPS_ALL; bit <<= 1) {
        if (c->info.caps & bit) {
            cJSON_AddItemToArray(caps,
                                 cJSON_CreateString(gw_mcp_cap_name(bit)));
        }
    }
    for (int k = 0; k < GW_MCP_LIST_COUNT_; k++) {
        const struct gw_mcp_list *l = &c->lists[k];
        if (l->state != GW_TOOL_LIST_NONE) {
            cJSON_AddNumberToObject(mcp, gw_mcp_list_member(k),
                                    cJSON_GetArraySize(l->items));
        }
    }
}

/*
 * What the gateway knows of a device besides its MCP state: since when it
 * is online (UTC, from the loop time its record was made), its address
 * (the broker's word, else its audio's source), the firmware version and
 * board its MCP serverInfo named, its live session and backend, and how
 * many tools it has. Shared by /api/devices and /api/devices/status.
 */
void gw__api_device_detail(cJSON *o, const struct gw_device *dev,
                           uint64_t now_ms)
{
    const struct gw_session *s = dev->session;
    uint64_t age_ms = now_ms - dev->presence.since_ms;
    time_t since = time(NULL) - (time_t)(age_ms / 1000);
    struct tm tm;
    char when[32], addr[64] = "";

    if (gmtime_r(&since, &tm) != NULL &&
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm) > 0) {
        cJSON_AddStringToObject(o, "online_since", when);
    }
    cJSON_AddNumberToObject(o, "online_s", (double)(age_ms / 1000));
    if (dev->presence.address[0] != '\0') {
        snprintf(addr, sizeof(addr), "%s", dev->presence.address);
    } else if (s != NULL && s->udp.has_addr) {
        const union gw_udp_addr *a = &s->udp.addr;
        (void)inet_ntop(a->sa.sa_family,
                        a->sa.sa_family == AF_INET6
                            ? (const void *)&a->in6.sin6_addr
                            : (const void *)&a->in.sin_addr,
                        addr, sizeof(addr));
    }
    if (addr[0] != '\0') {
        cJSON_AddStringToObject(o, "address", addr);
    } else {
        cJSON_AddNullToObject(o, "address");
    }
    if (dev->catalog.known && dev->catalog.info.server_ver[0] != '\0') {
        cJSON_AddStringToObject(o, "firmware", dev->catalog.info.server_ver);
    } else {
        cJSON_AddNullToObject(o, "firmware");
    }
    if (dev->catalog.known && dev->catalog.info.name[0] != '\0') {
        cJSON_AddStringToObject(o, "board", dev->catalog.info.name);
    } else {
        cJSON_AddNullToObject(o, "board");
    }
    cJSON_AddNumberToObject(o, "tool_count", gw_tool_cache_count(&dev->tools));
}

/*
 * The session's UDP path as the doctor sees it (docs/protocol.md section
 * 4.6): null without an active session.
 */
static void add_udp(cJSON *o, const struct gw_http_api_env *env,
                    const struct gw_session *s)
{
    const struct gw_config *cfg = gw_config_live_get(env->config);
    struct gw_udp_doctor_view v;
    cJSON *udp, *dx;
    char adv[300];

    if (s == NULL || s->state != GW_SESSION_ACTIVE) {
        cJSON_AddNullToObject(o, "udp");
        return;
    }
    udp = cJSON_AddObjectToObject(o, "udp");
    if (udp == NULL) {
        return;
    }
    gw_udp_peer_doctor_view(&s->udp, &v);
    snprintf(adv, sizeof(adv), "%s:%d", cfg->udp.public_host,
             cfg->udp.public_port > 0 ? cfg->udp.public_port
                                      : gw_udp_audio_port(s->udp.ua));
    cJSON_AddStringToObject(udp, "state", v.state);
    cJSON_AddNumberToObject(udp, "packets", (double)v.packets);
    if (v.last_age_ms >= 0) {
        cJSON_AddNumberToObject(udp, "last_packet_age_ms",
                                (double)v.last_age_ms);
    } else {
        cJSON_AddNullToObject(udp, "last_packet_age_ms");
    }
    cJSON_AddStringToObject(udp, "advertised", adv);
    if (!v.diagnosed) {
        cJSON_AddNullToObject(udp, "diagnosis");
        return;
    }
    dx = cJSON_AddObjectToObject(udp, "diagnosis");
    if (dx == NULL) {
        return;
    }
    cJSON_AddStringToObject(dx, "cause", gw_udp_doctor_name(v.cause));
    cJSON_AddStringToObject(dx, "hint", gw_udp_doctor_hint(v.cause));
    cJSON_AddNumberToObject(dx, "undecryptable", v.ev->undecryptable);
    cJSON_AddNumberToObject(dx, "rejected", v.ev->rejected);
    cJSON_AddNumberToObject(dx, "stray", v.ev->stray);
    cJSON_AddNumberToObject(dx, "unknown_ssrc", v.ev->unknown);
    if (v.from[0] != '\0') {
        cJSON_AddStringToObject(dx, "from", v.from);
    } else {
        cJSON_AddNullToObject(dx, "from");
    }
}

static cJSON *device_json(const struct gw_http_api_env *env,
                          const struct gw_device *dev, uint64_t now_ms)
{
    const struct gw_session *s = dev->session;
    cJSON *o = cJSON_CreateObject();
    cJSON *sess = s != NULL ? cJSON_CreateObject() : cJSON_CreateNull();
    cJSON *mcp = cJSON_CreateObject();

    if (o == NULL || sess == NULL || mcp == NULL) {
        cJSON_Delete(o);
        cJSON_Delete(sess);
        cJSON_Delete(mcp);
        return NULL;
    }
    cJSON_AddStringToObject(o, "client_id", dev->client_id);
    cJSON_AddStringToObject(o, "label", dev->label);
    cJSON_AddBoolToObject(o, "online", dev->state == GW_DEVICE_KNOWN);
    cJSON_AddStringToObject(
        o, "presence", gw_device_confirmed(dev) ? "confirmed" : "unconfirmed");
    gw__api_device_detail(o, dev, now_ms);
    if (s != NULL) {
        cJSON_AddStringToObject(sess, "state", gw_session_state_name(s->state));
        cJSON_AddStringToObject(sess, "session_id", s->session_id);
        if (s->backend_name != NULL) {
            cJSON_AddStringToObject(sess, "backend", s->backend_name);
        } else {
            cJSON_AddNullToObject(sess, "backend");
        }
    }
    cJSON_AddItemToObject(o, "session", sess);
    add_udp(o, env, s);
    /* Not "ready" on the strength of what the broker said before its
     * link went: re-read once the broker confirms the device. */
    cJSON_AddStringToObject(mcp, "state",
                            gw_device_confirmed(dev)
                                ? gw_mcp_state_name(dev->discovery.state)
                                : "unconfirmed");
    cJSON_AddNumberToObject(mcp, "tools", gw_tool_cache_count(&dev->tools));
    cJSON_AddBoolToObject(mcp, "complete", gw_tool_cache_complete(&dev->tools));
    cJSON_AddStringToObject(mcp, "list",
                            gw_tool_list_state_name(dev->tools.state));
    if (dev->catalog.known) {
        add_catalog(mcp, &dev->catalog);
    }
    cJSON_AddItemToObject(o, "mcp", mcp);
    return o;
}

static void list_devices(const struct gw_http_api_env *env,
                         struct gw_http_req *req)
{
    cJSON *doc = cJSON_CreateObject();
    cJSON *list = cJSON_AddArrayToObject(doc, "devices");
    int n = 0;

    const struct gw_device *d;
    for (d = gw_device_table_first(env->devices); d != NULL && list != NULL;
         d = gw_device_table_next(d)) {
        cJSON *o = device_json(env, d, uv_now(env->loop));
        if (o == NULL) {
            cJSON_Delete(doc);
            doc = NULL;
            break;
        }
        cJSON_AddItemToArray(list, o);
        n++;
    }
    if (doc != NULL) {
        cJSON_AddNumberToObject(doc, "count", n);
    }
    gw__api_send_json(req, 200, doc, NULL);
}

/* /api/devices/{id} and /api/devices/{id}/refresh. */
static void one_device(const struct gw_http_api_env *env,
                       struct gw_http_req *req, const char *rest)
{
    const char *slash = strchr(rest, '/');
    size_t n = slash != NULL ? (size_t)(slash - rest) : strlen(rest);
    char id[GW_CLIENT_ID_MAX + 1];
    const struct gw_device *dev;

    if (n == 0 || n > GW_CLIENT_ID_MAX ||
        (slash != NULL && strcmp(slash, "/refresh") != 0)) {
        gw__api_not_found(req, false);
        return;
    }
    memcpy(id, rest, n);
    id[n] = '\0';
    if (slash == NULL) {
        if (gw__api_method_ok(req, "GET, HEAD", false)) {
            dev = gw_device_find(env->devices, id);
            if (dev == NULL) {
                gw__api_not_found(req, false);
            } else {
                gw__api_send_json(
                    req, 200, device_json(env, dev, uv_now(env->loop)), NULL);
            }
        }
        return;
    }
    if (!gw__api_method_ok(req, "POST", false)) {
        return;
    }
    if (gw_device_refresh(env->devices, id) != 0) {
        gw__api_not_found(req, false);
        return;
    }
    gw_log(GW_LOG_INFO, SUBJECT, "tool refresh of %s asked by %s", id,
           gw_http_req_peer(req));
    gw__api_send_json(req, 202, cJSON_CreateObject(), NULL);
}

void gw__api_devices_serve(const struct gw_http_api_env *env,
                           struct gw_http_req *req)
{
    const char *path = gw_http_req_path(req);

    if (strcmp(path, "/api/devices") == 0 ||
        strcmp(path, "/api/devices/") == 0) {
        if (gw__api_method_ok(req, "GET, HEAD", false)) {
            list_devices(env, req);
        }
    } else {
        one_device(env, req, path + strlen(GW__API_DEVICES_PREFIX));
    }
}
