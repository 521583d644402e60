/*
 * The HTTP/1.1 listener of the management API and the MCP server, on the
 * instance's loop (libwebsockets' HTTP server side). It hands complete
 * requests (headers and body) to one handler, which answers at once or
 * later (a device round trip), or opens a stream (server-sent events).
 */
#ifndef GW_HTTP_SERVER_H
#define GW_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "common/error.h"

struct gw_http_server;
struct gw_http_req;

/*
 * A complete request. The handler must, now or later, end it with
 * gw_http_respond() or start a stream; a request the client abandons
 * first is reported through gw_http_req_on_gone().
 */
typedef void (*gw_http_handler)(struct gw_http_req *req, void *arg);

struct gw_http_server_options {
    const char *listen; /* IP literal or host name to bind */
    int port;           /* 0 = any free port (tests) */
    size_t max_body;    /* bodies over this get 413 without the handler */
    /*
     * Optional: sees each request once its head is complete, before any
     * of its body is read (authorisation, and a route's own bound on its
     * body: gw_http_req_header(req, "content-length") is then valid or
     * absent). Answering it there refuses the request: its body is never
     * read and the connection closes after the answer. Not answering lets
     * the body come; on_request follows. It must not keep req (no
     * on_gone, no later answer). GET and HEAD requests announcing a body
     * are refused (400) before it.
     */
    gw_http_handler on_head;
    gw_http_handler on_request;
    void *arg;
    /* Connections open at once, in all and from one client address; a
     * connection over either is closed at once, counted and logged. 0 =
     * no limit. */
    int max_connections;
    int max_connections_per_address;
};

struct gw_http_server_stats {
    uint64_t connections_refused; /* over a connection limit */
    uint64_t connections;         /* open now (a gauge) */
    uint64_t body_bytes;          /* request body buffers held now */
};

/* Binds and listens. Errors are logged; GW_ECONFIG if the bind fails. */
GW_MUST_CHECK int gw_http_server_init(uv_loop_t *loop,
                                      const struct gw_http_server_options *o,
                                      struct gw_http_server **out);

/* The port actually bound. */
int gw_http_server_port(const struct gw_http_server *srv);

/*
 * Responses begun so far with this status (answers, streams and the
 * server's own refusals such as 413); 0 outside 100..599. For metrics.
 */
uint64_t gw_http_server_responses(const struct gw_http_server *srv, int status);

void gw_http_server_get_stats(const struct gw_http_server *srv,
                              struct gw_http_server_stats *out);

/*
 * A Content-Length value: plain decimal digits (at most 10^12), else
 * GW_EMALFORMED (also "5,5" from a repeated header); -1 for NULL.
 */
long long gw_http_content_length(const char *value);

/*
 * Closes every connection (streams end, requests waiting for an answer
 * get their on_gone callback, before this returns unless it is called
 * from a handler or on_gone) and the listener; cb runs when all is
 * closed and the server is freed after it. cb may be NULL.
 */
void gw_http_server_close(struct gw_http_server *srv,
                          void (*cb)(struct gw_http_server *srv, void *arg),
                          void *arg);

/* ---- without a socket (tests, fuzzing) --------------------------------- */

/* A server that listens nowhere: its requests come from
 * gw_http_server_inject; closing it is immediate (cb runs before return). */
GW_MUST_CHECK int
gw_http_server_init_detached(const struct gw_http_server_options *o,
                             struct gw_http_server **out);

/*
 * Runs one request through the server as if a client had sent it: method,
 * target "path[?query]" (not decoded), headers as name, value pairs (a
 * repeated name is joined by ','), and body, read in pieces of piece
 * bytes up to Content-Length (fewer bytes: the client leaves mid-body).
 * The answer is formatted and dropped; a request the handler kept is
 * then lost (on_gone). Returns the answer's status, 0 if none, or
 * GW_EPROTO for a request line lws would not pass.
 */
int gw_http_server_inject(struct gw_http_server *srv, const char *method,
                          const char *target, const char *const *headers,
                          size_t n_headers, const char *body, size_t len,
                          size_t piece);

/* ---- the request: valid from the handler until it is answered or gone */

const char *gw_http_req_method(const struct gw_http_req *req); /* "GET"... */
/* Percent-decoded, dot segments and repeated slashes removed; no query. */
const char *gw_http_req_path(const struct gw_http_req *req);
/* The query's arguments, each decoded, joined by '&'; "" if none. */
const char *gw_http_req_query(const struct gw_http_req *req);
/*
 * A request header by its name (any case), NULL when absent; repeated
 * headers come joined by ','. Every header is there while the handler
 * runs; afterwards the standard ones, the MCP ones (Mcp-Session-Id,
 * MCP-Protocol-Version, Last-Event-ID) and those already looked up.
 */
const char *gw_http_req_header(const struct gw_http_req *req, const char *name);
/* The body (NUL-terminated; "" when none); *len without the NUL. */
const char *gw_http_req_body(const struct gw_http_req *req, size_t *len);
/* The client's IP address as text. */
const char *gw_http_req_peer(const struct gw_http_req *req);

/*
 * A header line ("Name: value", checked and copied) for whatever answer
 * or stream head the request gets, from any handler (the router's CORS
 * headers on the MCP server's answers). GW_EINVAL for a line with CR, LF
 * or no colon, or past 1 KiB in all; GW_ENOMEM.
 */
int gw_http_req_add_header(struct gw_http_req *req, const char *line);

/*
 * Called once if the client goes away before the response (or stream)
 * ended; the request is invalid after cb returns. Replaces an earlier one.
 */
void gw_http_req_on_gone(struct gw_http_req *req,
                         void (*cb)(struct gw_http_req *req, void *arg),
                         void *arg);

/*
 * Answers the request: status, content type (NULL for none), extra header
 * lines ("Name: value", NULL-terminated array, may be NULL) and body
 * (copied). Content-Length is set. The request is invalid afterwards
 * (also on error, when the connection is dropped).
 */
int gw_http_respond(struct gw_http_req *req, int status,
                    const char *content_type, const char *const *headers,
                    const char *body, size_t len);

/*
 * Starts a response of unknown length (text/event-stream): headers now,
 * then any number of writes, then gw_http_stream_end(). The request stays
 * valid until it ends or is gone.
 */
int gw_http_stream_begin(struct gw_http_req *req, int status,
                         const char *content_type, const char *const *headers);
/* Queues data (copied). GW_ENOSPC when the client is too slow to keep up:
 * the stream is then ended by the server (on_gone follows). */
int gw_http_stream_write(struct gw_http_req *req, const char *data, size_t len);
/* Ends the stream after what is queued; the request is invalid after. */
void gw_http_stream_end(struct gw_http_req *req);

#endif /* GW_HTTP_SERVER_H */
