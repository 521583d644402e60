/*
 * The HTTP server's listening socket and who gets in: accept, the
 * connection caps (in all and per client address, http.max_connections
 * and http.max_connections_per_address), and the hand-over of each
 * admitted connection to lws.
 */
#include "gateway/http/http_server_int.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "common/log.h"

#define SUBJECT         "http"
#define ACCEPT_BATCH    32
#define ACCEPT_PAUSE_MS 100   /* after running out of descriptors */
#define REFUSED_LOG_MS  10000 /* one line per this for refused connections */

static void on_accept(uv_poll_t *poll, int status, int events);

static void on_accept_resume(uv_timer_t *timer)
{
    struct gw_http_server *srv = timer->data;

    if (srv->phase == SRV_RUNNING) {
        uv_poll_start(&srv->listener, UV_READABLE, on_accept);
    }
}

/* The client's address as a table key (IPv4 v4-mapped) and as text. */
static void addr_key(const struct sockaddr_storage *ss, unsigned char key[16],
                     char *text, size_t cap)
{
    memset(key, 0, 16);
    snprintf(text, cap, "?");
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &s4->sin_addr, 4);
        inet_ntop(AF_INET, &s4->sin_addr, text, (socklen_t)cap);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
        memcpy(key, &s6->sin6_addr, 16);
        if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
            inet_ntop(AF_INET, key + 12, text, (socklen_t)cap);
        } else {
            inet_ntop(AF_INET6, &s6->sin6_addr, text, (socklen_t)cap);
        }
    }
}

/* One connection less from a's address. */
void gw__http_addr_release(struct gw_http_server *srv, struct conn_addr *a)
{
    srv->stats.connections--;
    srv->addr_released = true;
    if (--a->n == 0) {
        HASH_DEL(srv->addrs, a);
        free(a);
    }
}

/* Refusals come in floods: one line per REFUSED_LOG_MS says how many. */
static void log_refused(struct gw_http_server *srv, const char *peer,
                        const char *why)
{
    uint64_t now = uv_now(srv->loop);

    srv->stats.connections_refused++;
    if (srv->refused_logged_ms != 0 &&
        now - srv->refused_logged_ms < REFUSED_LOG_MS) {
        srv->refused_unlogged++;
        return;
    }
    gw_log(GW_LOG_WARN, SUBJECT,
           "connection from %s refused: %s (%llu more refused before)", peer,
           why, (unsigned long long)srv->refused_unlogged);
    srv->refused_logged_ms = now;
    srv->refused_unlogged = 0;
}

/*
 * Counts the new connection against the limits: its address's entry
 * (held by the connection until lws destroys it), or NULL when refused.
 */
static struct conn_addr *admit(struct gw_http_server *srv,
                               const struct sockaddr_storage *ss)
{
    unsigned char key[16];
    char peer[INET6_ADDRSTRLEN];
    struct conn_addr *a = NULL;

    addr_key(ss, key, peer, sizeof(peer));
    if (srv->max_conns != 0 && srv->stats.connections >= srv->max_conns) {
        log_refused(srv, peer, "http.max_connections reached");
        return NULL;
    }
    HASH_FIND(hh, srv->addrs, key, sizeof(key), a);
    if (a != NULL && srv->max_per_addr != 0 && a->n >= srv->max_per_addr) {
        log_refused(srv, peer, "http.max_connections_per_address reached");
        return NULL;
    }
    if (a == NULL) {
        if ((a = calloc(1, sizeof(*a))) == NULL) {
            log_refused(srv, peer, "out of memory");
            return NULL;
        }
        memcpy(a->key, key, sizeof(key));
        HASH_ADD(hh, srv->addrs, key, sizeof(a->key), a);
        if (!GW_HASH_ADDED(a, hh)) {
            free(a);
            log_refused(srv, peer, "out of memory");
            return NULL;
        }
    }
    a->n++;
    srv->stats.connections++;
    return a;
}

static void adopt(struct gw_http_server *srv, int fd,
                  const struct sockaddr_storage *ss)
{
    struct conn_addr *a = admit(srv, ss);
    lws_adopt_desc_t desc;
    int one = 1;

    if (a == NULL) {
        close(fd); /* at once: nothing is read or kept */
        return;
    }
    /* Stream events are small writes that must not wait for ACKs. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    memset(&desc, 0, sizeof(desc));
    desc.vh = srv->vh;
    desc.type = LWS_ADOPT_SOCKET | LWS_ADOPT_HTTP;
    desc.fd.sockfd = fd;
    desc.opaque = a; /* given back when lws destroys the connection */
    srv->addr_released = false;
    if (lws_adopt_descriptor_vhost_via_info(&desc) == NULL) {
        gw_log_peer(GW_LOG_WARN, "http", SUBJECT, "connection refused by lws");
        if (!srv->addr_released) {
            gw__http_addr_release(srv, a);
        }
    }
}

static void on_accept(uv_poll_t *poll, int status, int events)
{
    struct gw_http_server *srv = poll->data;

    (void)events;
    if (status < 0) {
        gw_log(GW_LOG_WARN, SUBJECT, "listener: %s", uv_strerror(status));
        return;
    }
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = accept4(srv->fd, (struct sockaddr *)&ss, &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EINTR || errno == ECONNABORTED)) {
            continue;
        }
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                errno == ENOMEM) {
                /* The socket stays readable: pause instead of spinning. */
                gw_log(GW_LOG_WARN, SUBJECT, "cannot accept: %s",
                       strerror(errno));
                uv_poll_stop(poll);
                uv_timer_start(&srv->timer, on_accept_resume, ACCEPT_PAUSE_MS,
                               0);
            }
            return;
        }
        adopt(srv, fd, &ss);
    }
}

int gw__http_listen(struct gw_http_server *srv, const char *host, int port)
{
    struct addrinfo hints, *res = NULL;
    char name[256], service[8];
    size_t n = strlen(host);
    int rc, err = EADDRNOTAVAIL;

    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        host++;
        n -= 2;
    }
    if (n >= sizeof(name) || port < 0 || port > 65535) {
        gw_log(GW_LOG_ERROR, SUBJECT, "cannot listen on %s:%d", host, port);
        return GW_ECONFIG;
    }
    memcpy(name, host, n);
    name[n] = '\0';
    snprintf(service, sizeof(service), "%d", port);
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    rc = getaddrinfo(name, service, &hints, &res);
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, SUBJECT, "cannot listen on %s:%d: %s", name, port,
               gai_strerror(rc));
        return GW_ECONFIG;
    }
    for (struct addrinfo *ai = res; ai != NULL && srv->fd < 0;
         ai = ai->ai_next) {
        int one = 1;
        int fd = socket(ai->ai_family,
                        SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            err = errno;
            continue;
        }
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            listen(fd, SOMAXCONN) == 0) {
            srv->fd = fd;
        } else {
            err = errno;
            close(fd);
        }
    }
    freeaddrinfo(res);
    if (srv->fd < 0) {
        gw_log(GW_LOG_ERROR, SUBJECT, "cannot listen on %s:%d: %s", name, port,
               strerror(err));
        return GW_ECONFIG;
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    getsockname(srv->fd, (struct sockaddr *)&ss, &len);
    srv->port =
        ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                       : ((struct sockaddr_in *)&ss)->sin_port);
    return 0;
}

void gw__http_accept_start(struct gw_http_server *srv)
{
    uv_poll_start(&srv->listener, UV_READABLE, on_accept);
}

void gw__http_addrs_free(struct gw_http_server *srv)
{
    struct conn_addr *a, *tmp;

    HASH_ITER(hh, srv->addrs, a, tmp)
    {
        HASH_DEL(srv->addrs, a);
        free(a);
    }
}
