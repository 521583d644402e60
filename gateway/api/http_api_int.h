/*
 * What the HTTP API's route files share with its router (http_api.c):
 * the answers in the API's own shapes. Private to gateway/http_api*.c.
 */
#ifndef GW_HTTP_API_INT_H
#define GW_HTTP_API_INT_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "gateway/http/http_server.h"

/* doc (taken; NULL: 503 out of memory) as the answer, with extra header
 * lines (NULL-terminated, may be NULL). */
void gw_http_api_send_json(struct gw_http_req *req, int status, cJSON *doc,
                           const char *const *headers);

/* A refusal, logged with the client: {"error":why}, or for the
 * manager-api's shapes {"success":false,"error":why}. */
void gw_http_api_refuse(struct gw_http_req *req, int status, bool manager,
                        const char *why, const char *const *headers);

#endif /* GW_HTTP_API_INT_H */
