/*
 * HTTP requests from the loop: libcurl's multi interface driven by libuv
 * (one uv_poll per socket curl watches, one uv_timer for curl's timeout).
 * Nothing blocks the loop; responses stream in through callbacks. Used by
 * the outbound MCP client (gateway/mcp/mcp_outbound.h).
 */
#ifndef GW_HTTP_CLIENT_H
#define GW_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "common/error.h"

struct gw_http_client;
struct gw_http_req;

/* How a request ended (besides its HTTP status). */
#define GW_HTTP_RESULT_MAP(XX)                                                 \
    XX(OK, "ok")             /* a complete response */                         \
    XX(CONNECT, "connect")   /* name, connection refused, unreachable */       \
    XX(TLS, "tls")           /* handshake or certificate */                    \
    XX(TIMEOUT, "timeout")   /* the request's timeout passed */                \
    XX(ABORTED, "aborted")   /* a callback refused more data */                \
    XX(TRANSFER, "transfer") /* the connection broke, bad HTTP */              \
    XX(SHUTDOWN, "shutdown") /* the client closed with the request open */

enum gw_http_result {
#define XX(name, _) GW_HTTP_##name,
    GW_HTTP_RESULT_MAP(XX)
#undef XX
        GW_HTTP_RESULT_COUNT_
};

const char *gw_http_result_name(enum gw_http_result r);

struct gw_http_callbacks {
    /* One response header (the name as sent, value trimmed). */
    void (*on_header)(void *arg, const char *name, const char *value);
    /* Body bytes as they arrive; false aborts (GW_HTTP_ABORTED). */
    bool (*on_data)(void *arg, const char *buf, size_t len);
    /* Once, last, unless the request was cancelled; status 0 when no
     * response came; detail: curl's words for a failure, else "". */
    void (*on_done)(void *arg, enum gw_http_result result, int status,
                    const char *detail);
    void *arg;
};

struct gw_http_options {
    const char *method; /* "POST", "DELETE", "GET" */
    const char *url;
    const char *const *headers; /* "Name: value", NULL-terminated, or NULL */
    const char *body;           /* POST body (copied), may be NULL */
    size_t body_len;
    long timeout_ms;     /* whole request, > 0 */
    const char *ca_file; /* extra CA ("" or NULL: the system store) */
};

GW_MUST_CHECK int gw_http_client_init(uv_loop_t *loop,
                                      struct gw_http_client **out);

/*
 * Starts a request. Safe to call from any callback of this client. The
 * callbacks run on the loop; on_done always runs (asynchronously) unless
 * gw_http_cancel came first. GW_ENOMEM, GW_EINVAL, GW_ELIMIT (closing).
 */
GW_MUST_CHECK int gw_http_request(struct gw_http_client *c,
                                  const struct gw_http_options *opts,
                                  const struct gw_http_callbacks *cbs,
                                  struct gw_http_req **out);

/* The status of the response being read (0 before its status line). */
int gw_http_req_status(const struct gw_http_req *r);

/* No more callbacks for r; its transfer ends. Safe from any callback of
 * this client, also r's own (but not after its on_done). */
void gw_http_cancel(struct gw_http_req *r);

/* Requests in flight. */
size_t gw_http_client_active(const struct gw_http_client *c);

/*
 * Every open request ends with GW_HTTP_SHUTDOWN (on_done runs, inside
 * this call), then the handles close; cb runs once all are closed and
 * the client is freed after it. Not from a callback of this client.
 */
void gw_http_client_close(struct gw_http_client *c,
                          void (*cb)(struct gw_http_client *c, void *arg),
                          void *arg);

#endif /* GW_HTTP_CLIENT_H */
