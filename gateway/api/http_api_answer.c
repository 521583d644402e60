/*
 * The HTTP API's answers in its own shapes, for the router and every
 * route file: a JSON document, an error, a refusal logged with the
 * client, 404 and 405.
 */
#include "gateway/api/http_api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#define SUBJECT "http"
#define JSON    "application/json"

void gw__api_send_json(struct gw_http_req *req, int status, cJSON *doc,
                       const char *const *headers)
{
    char *text = doc != NULL ? cJSON_PrintUnformatted(doc) : NULL;

    cJSON_Delete(doc);
    if (text == NULL) {
        static const char oom[] = "{\"error\":\"out of memory\"}";
        (void)gw_http_respond(req, 503, JSON, NULL, oom, sizeof(oom) - 1);
        return;
    }
    (void)gw_http_respond(req, status, JSON, headers, text, strlen(text));
    free(text);
}

/* {"error":why}, or for the manager-api {"success":false,"error":why}. */
void gw__api_send_error(struct gw_http_req *req, int status, bool manager,
                        const char *why, const char *const *headers)
{
    cJSON *doc = cJSON_CreateObject();

    if (doc != NULL && manager) {
        cJSON_AddBoolToObject(doc, "success", false);
    }
    if (doc != NULL) {
        cJSON_AddStringToObject(doc, "error", why);
    }
    gw__api_send_json(req, status, doc, headers);
}

/* One warning per refused request, naming the client. */
void gw__api_refuse(struct gw_http_req *req, int status, bool manager,
                    const char *why, const char *const *headers)
{
    gw_log_peer(GW_LOG_WARN, gw_http_req_peer(req), SUBJECT,
                "%s %.128s from %s: %d %s", gw_http_req_method(req),
                gw_http_req_path(req), gw_http_req_peer(req), status, why);
    gw__api_send_error(req, status, manager, why, headers);
}

void gw__api_not_found(struct gw_http_req *req, bool manager)
{
    gw_log_peer(GW_LOG_DEBUG, gw_http_req_peer(req), SUBJECT,
                "%s %.128s from %s: 404", gw_http_req_method(req),
                gw_http_req_path(req), gw_http_req_peer(req));
    gw__api_send_error(req, 404, manager, "not found", NULL);
}

/* 405 with Allow, unless the method is one of allow ("GET, HEAD"). */
bool gw__api_method_ok(struct gw_http_req *req, const char *allow, bool manager)
{
    const char *method = gw_http_req_method(req);
    size_t n = strlen(method);
    char header[64];
    const char *headers[] = {header, NULL};

    for (const char *p = allow; (p = strstr(p, method)) != NULL; p += n) {
        if ((p == allow || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0')) {
            return true;
        }
    }
    snprintf(header, sizeof(header), "Allow: %s", allow);
    gw__api_refuse(req, 405, manager, "method not allowed", headers);
    return false;
}
