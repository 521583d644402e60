/*
 * What the files of the HTTP server share: the server and its
 * connections (http_server.c), its listening socket and the connection
 * caps (http_listener.c), and one request with its answer
 * (http_request.c). Private to gateway/http/.
 */
#ifndef GW_HTTP_SERVER_INT_H
#define GW_HTTP_SERVER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <netinet/in.h>

#include <libwebsockets.h>
#include <uv.h>

#include "common/hash.h"
#include "common/list.h"
#include "gateway/core/lws_uv.h"
#include "gateway/http/http_server.h"

#define MAX_QUEUED (1024 * 1024) /* per stream: a slower reader is dropped */
#define HEAD_MAX   4096          /* a response's status and headers */
#define STATUS_MIN 100
#define STATUS_MAX 599

enum req_state {
    REQ_READING,   /* the body is arriving */
    REQ_WAITING,   /* with the handler, not answered yet */
    REQ_STREAMING, /* stream open */
    REQ_FINISHING  /* answered, ended or refused: the rest is ours */
};

struct hdr {
    struct hdr *next;
    char *value;
    char name[]; /* lowercase, then the value */
};

/* Bytes queued for the socket. */
struct out_buf {
    struct out_buf *next;
    size_t len, off;
    bool detach_after; /* a stream's head: lws may drop its headers */
    unsigned char data[];
};

struct watch; /* http_server.c */

struct gw_http_req {
    struct gw_http_server *srv;
    struct gw_list link; /* on srv->reqs */
    struct lws *wsi;
    enum req_state state;
    bool live_headers; /* the handler runs: lws still has every header */
    bool http11;
    bool keep_alive;     /* the connection may serve the next request */
    bool head;           /* HEAD: no body goes out */
    bool killed;         /* the connection is being dropped */
    bool rx_paused;      /* lws reads nothing until the answer is out */
    struct watch *watch; /* notices the client leaving while we owe it */
    char method[8];
    char peer[INET6_ADDRSTRLEN];
    char *path, *query;
    struct hdr *hdrs;
    char *body; /* grows as the body arrives, never ahead of it */
    size_t body_len, body_cap;
    size_t body_want; /* the announced Content-Length */
    struct out_buf *out_head, *out_tail;
    size_t out_bytes;
    void (*gone_cb)(struct gw_http_req *req, void *arg);
    void *gone_arg;
    char *extra; /* gw_http_req_add_header's lines, each ending CRLF */
};

/* The connections open from one client address (IPv4 as v4-mapped). */
struct conn_addr {
    UT_hash_handle hh;
    unsigned char key[16];
    unsigned n;
};

enum srv_phase {
    SRV_RUNNING,
    SRV_DRAINING,   /* requests are being dropped */
    SRV_DESTROYING, /* lws context half destroyed, its handles closing */
    SRV_CLOSED
};

struct gw_http_server {
    uv_loop_t *loop;
    struct gw_lws_uv lws; /* the context */
    struct lws_vhost *vh;
    int fd;
    int port;
    uv_poll_t listener;
    uv_timer_t timer; /* accept pauses, then shutdown steps */
    int handles_open; /* listener, timer and watches not yet closed */
    bool listening;
    bool detached; /* no listener, no lws: requests are injected */
    size_t max_body;
    gw_http_handler on_head;
    gw_http_handler on_request;
    void *arg;
    size_t max_conns, max_per_addr; /* 0: no limit */
    struct conn_addr *addrs;        /* uthash by key */
    bool addr_released;             /* a connection's count was given back */
    uint64_t refused_logged_ms;     /* the last refusal logged */
    uint64_t refused_unlogged;      /* refusals since, not logged */
    struct gw_http_server_stats stats;
    struct gw_list reqs; /* every request not yet freed */
    unsigned busy;       /* a handler or on_gone of ours is running */
    enum srv_phase phase;
    void (*close_cb)(struct gw_http_server *srv, void *arg);
    void *close_arg;
    uint64_t responses[STATUS_MAX - STATUS_MIN + 1];
};

/* A request whose head lws parsed, copied out and tied to wsi; NULL on
 * OOM (http_request.c). */
struct gw_http_req *gw__http_req_create(struct gw_http_server *srv,
                                        struct lws *wsi);

/*
 * A request without a connection (gw_http_server_inject): method, target
 * "path[?query]" and headers as name, value pairs; NULL when the request
 * line is not one lws would pass, or on OOM (http_request.c).
 */
struct gw_http_req *gw__http_req_create_detached(struct gw_http_server *srv,
                                                 const char *method,
                                                 const char *target,
                                                 const char *const *headers,
                                                 size_t n_headers);

/* Unties req from its connection and frees it (http_request.c). */
void gw__http_req_destroy(struct gw_http_req *req);

/*
 * The connection is gone or the server closes: on_gone if an answer or
 * the end of a stream was still due, then the request is freed
 * (http_request.c).
 */
void gw__http_req_lost(struct gw_http_req *req);

/* Stops req's watch, if any; its handle closes later (http_server.c). */
void gw__http_watch_stop(struct gw_http_req *req);

/* Drops a connection from the loop, soon (http_server.c). */
void gw__http_conn_kill(struct lws *wsi);

/* Bytes are queued: they go out when the socket has room (http_server.c). */
void gw__http_watch_write(struct gw_http_req *req);

/*
 * Binds and listens on host (an IP literal, IPv6 with or without
 * brackets, or a name) and port; errors logged, GW_ECONFIG
 * (http_listener.c).
 */
int gw__http_listen(struct gw_http_server *srv, const char *host, int port);

/* Accepts on srv->listener from now on (http_listener.c). */
void gw__http_accept_start(struct gw_http_server *srv);

/* A connection lws destroyed gives back its address's count
 * (http_listener.c). */
void gw__http_addr_release(struct gw_http_server *srv, struct conn_addr *a);

/* Frees what is left of the table of addresses (http_listener.c). */
void gw__http_addrs_free(struct gw_http_server *srv);

/* Answers before any handler saw the request, and logs why. */
void gw__http_req_refuse(struct gw_http_req *req, int status, const char *why);

#endif /* GW_HTTP_SERVER_INT_H */
