/*
 * libmosquitto on the instance's libuv loop. The library owns the socket
 * and may close it inside any loop_* call, so after every call the watch
 * is re-synced with mosquitto_socket(): a changed or closed fd drops the
 * uv_poll at once (libuv must never poll an fd that was closed under it).
 * Reconnects are scheduled on a timer, never from the disconnect callback.
 */
#include "common/mqtt_link.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mosquitto.h>

#include "common/dns_cache.h"
#include "common/log.h"

#define MISC_INTERVAL_MS 1000 /* keepalive and retry bookkeeping */
#define BACKOFF_MIN_MS   250
#define BACKOFF_MAX_MS   10000
/*
 * For this long after a link that was up is lost, retries come every
 * QUICK_DELAY_MS (jittered): a broker restart takes seconds, and whatever
 * devices publish before the gateway has subscribed again is lost (QoS 0,
 * no subscriber). Past it, the exponential backoff above.
 */
#define QUICK_WINDOW_MS  10000
#define QUICK_DELAY_MS   200
#define READS_PER_WAKEUP 64 /* bounds the work of one readable event */
#define MQTT_MAX_PAYLOAD 268435455
#define STATUS_ONLINE    "{\"state\":\"online\"}"
#define STATUS_OFFLINE   "{\"state\":\"offline\"}"

/* One per broker socket: each reconnect gets a fresh fd and a fresh poll. */
struct sock_watch {
    uv_poll_t poll;            /* data points back to the watch */
    struct gw_mqtt_link *link; /* owner */
};

struct gw_mqtt_link {
    uv_loop_t *loop;
    struct mosquitto *mosq;
    struct sock_watch *watch; /* NULL while no socket is open */
    int fd;                   /* the fd watch polls, or -1 */
    int events;               /* what watch is armed for */
    uv_timer_t misc_timer;    /* mosquitto_loop_misc once a second */
    uv_timer_t retry_timer;   /* next connect attempt */
    unsigned backoff_ms;      /* delay before the next attempt */
    uint64_t jitter;          /* xorshift state for backoff jitter */
    bool quick_retry;         /* the option of that name */
    bool quick_pending;       /* an up link was lost: retry quickly */
    uint64_t quick_until;     /* loop time when quick retries end, or 0 */
    int handles_open;         /* timers and watches not yet closed */
    bool up;                  /* CONNACK accepted, not lost since */
    bool closing;             /* gw_mqtt_link_close() was called */
    bool tls_told;            /* this attempt's TLS failure is logged */
    char *status_topic;       /* NULL: none */
    char *host;               /* copied options */
    int port;
    int keepalive_s;
    char **topics;
    size_t n_topics;
    gw_mqtt_message_cb on_message;  /* cleared when closing */
    gw_mqtt_message_cb on_retained; /* cleared when closing */
    gw_mqtt_state_cb on_state;      /* cleared when closing */
    void *arg;
    gw_mqtt_close_cb close_cb;
    void *close_arg;
    struct gw_mqtt_link_stats stats;

    bool tls;                   /* connect by name: see try_connect */
    struct gw_dns *dns;         /* the broker's name, off the loop */
    struct gw_dns_req *dns_req; /* while it is being resolved */

    /*
     * A TLS connect runs on libuv's threadpool (see try_connect). While
     * it does, the worker owns mosq: the loop leaves it alone (no misc,
     * no watch, no publish) until after_connect runs on the loop.
     */
    uv_work_t connect_work;
    bool connecting; /* connect_work queued and not yet back */
    int connect_rc;  /* written by the worker, read after it */
    int connect_errno;
    char connect_err[192]; /* the library's first error in the worker */
};

static void watch_sync(struct gw_mqtt_link *link);
static void on_retry(uv_timer_t *timer);

static void maybe_finish(struct gw_mqtt_link *link)
{
    if (!link->closing || link->handles_open > 0 || link->connecting) {
        return;
    }
    mosquitto_destroy(link->mosq);
    gw_dns_close(link->dns);
    if (link->close_cb != NULL) {
        link->close_cb(link, link->close_arg);
    }
    for (size_t i = 0; i < link->n_topics; i++) {
        free(link->topics[i]);
    }
    free(link->topics);
    free(link->status_topic);
    free(link->host);
    free(link);
}

static void on_timer_closed(uv_handle_t *handle)
{
    struct gw_mqtt_link *link = handle->data;

    link->handles_open--;
    maybe_finish(link);
}

static void on_watch_closed(uv_handle_t *handle)
{
    struct sock_watch *watch = handle->data;
    struct gw_mqtt_link *link = watch->link;

    free(watch);
    link->handles_open--;
    maybe_finish(link);
}

static void watch_drop(struct gw_mqtt_link *link)
{
    if (link->watch == NULL) {
        return;
    }
    uv_poll_stop(&link->watch->poll);
    uv_close((uv_handle_t *)&link->watch->poll, on_watch_closed);
    link->watch = NULL;
    link->fd = -1;
    link->events = 0;
}

/* Sets *quick when the delay is one of the quick retries after a loss. */
static unsigned next_delay(struct gw_mqtt_link *link, bool *quick)
{
    unsigned base = link->backoff_ms;
    uint64_t now = uv_now(link->loop);

    /* Jitter (50-100%) so that many gateways restarted together do not
     * reconnect in lockstep. */
    link->jitter ^= link->jitter << 13;
    link->jitter ^= link->jitter >> 7;
    link->jitter ^= link->jitter << 17;
    if (link->quick_pending) {
        link->quick_pending = false;
        link->quick_until = now + QUICK_WINDOW_MS;
    }
    *quick = now < link->quick_until;
    if (*quick) {
        return QUICK_DELAY_MS / 2 +
               (unsigned)(link->jitter % (QUICK_DELAY_MS / 2 + 1));
    }
    link->backoff_ms = base * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : base * 2;
    return base / 2 + (unsigned)(link->jitter % (base / 2 + 1));
}

static void schedule_retry(struct gw_mqtt_link *link)
{
    /* A lookup or a connect under way is an attempt under way. */
    if (link->closing || link->dns_req != NULL || link->connecting ||
        uv_is_active((uv_handle_t *)&link->retry_timer)) {
        return;
    }
    bool quick;
    bool first_quick = link->quick_pending;
    unsigned delay = next_delay(link, &quick);
    if (quick && first_quick) {
        gw_log(GW_LOG_INFO, "mqtt",
               "reconnecting to %s:%d every %d-%d ms for up to %d s",
               link->host, link->port, QUICK_DELAY_MS / 2, QUICK_DELAY_MS,
               QUICK_WINDOW_MS / 1000);
    }
    /* The quick ones are many: the line above stands for them. */
    gw_log(quick ? GW_LOG_DEBUG : GW_LOG_INFO, "mqtt",
           "reconnecting to %s:%d in %u ms", link->host, link->port, delay);
    uv_timer_start(&link->retry_timer, on_retry, delay, 0);
}

/*
 * One clear line per connect attempt for a failed handshake, from
 * whichever place meets it first: the call that ran the handshake
 * (connect_async on a fast link, else a later read or write) or the
 * library's own OpenSSL error report, which some paths give alone.
 */
static void log_tls_failure(struct gw_mqtt_link *link)
{
    if (link->tls_told || link->closing) {
        return;
    }
    link->tls_told = true;
    gw_log(GW_LOG_WARN, "mqtt",
           "TLS with %s:%d failed: the broker's certificate or host "
           "name is not trusted, or the handshake broke",
           link->host, link->port);
}

/* rc, err: what mosquitto_connect_async returned, errno after it. */
static void connect_done(struct gw_mqtt_link *link, int rc, int err)
{
    if (rc == MOSQ_ERR_TLS) {
        log_tls_failure(link);
    } else if (rc != MOSQ_ERR_SUCCESS) {
        gw_log(GW_LOG_WARN, "mqtt", "connect to %s:%d failed: %s", link->host,
               link->port,
               rc == MOSQ_ERR_ERRNO ? strerror(err) : mosquitto_strerror(rc));
    }
    watch_sync(link);
}

/* address: the broker's IP (see try_connect). */
static void connect_to(struct gw_mqtt_link *link, const char *address)
{
    int rc;

    link->tls_told = false;
    rc = mosquitto_connect_async(link->mosq, address, link->port,
                                 link->keepalive_s);
    connect_done(link, rc, errno);
}

/* On a threadpool thread: the name lookup and the TCP connect. */
static void connect_work_run(uv_work_t *work)
{
    struct gw_mqtt_link *link = work->data;

    errno = 0;
    link->connect_rc = mosquitto_connect_async(link->mosq, link->host,
                                               link->port, link->keepalive_s);
    link->connect_errno = errno;
}

/* Back on the loop: mosq is the loop's again. */
static void connect_work_done(uv_work_t *work, int status)
{
    struct gw_mqtt_link *link = work->data;

    link->connecting = false;
    if (link->closing) {
        maybe_finish(link); /* destroying mosq closes what it opened */
        return;
    }
    if (link->connect_err[0] != '\0') {
        gw_log(GW_LOG_WARN, "mqtt", "%s:%d: %s", link->host, link->port,
               link->connect_err);
        if (strncmp(link->connect_err, "OpenSSL Error", 13) == 0) {
            log_tls_failure(link);
        }
    }
    if (status != 0) { /* not started (cancelled): try again later */
        watch_sync(link);
        return;
    }
    connect_done(link, link->connect_rc, link->connect_errno);
}

static void connect_by_name(struct gw_mqtt_link *link)
{
    int rc;

    link->tls_told = false;
    link->connect_err[0] = '\0';
    link->connect_work.data = link;
    link->connecting = true; /* before the worker can look at it */
    rc = uv_queue_work(link->loop, &link->connect_work, connect_work_run,
                       connect_work_done);
    if (rc != 0) {
        link->connecting = false;
        gw_log(GW_LOG_WARN, "mqtt", "cannot queue the connect to %s:%d: %s",
               link->host, link->port, uv_strerror(rc));
        schedule_retry(link);
    }
}

static void resolve_failed(struct gw_mqtt_link *link, int status)
{
    gw_log(GW_LOG_WARN, "mqtt", "cannot resolve the broker %s: %s", link->host,
           gw_dns_strerror(status));
    schedule_retry(link);
}

static void on_resolved(void *arg, int status, const char *ip)
{
    struct gw_mqtt_link *link = arg;

    link->dns_req = NULL; /* cancelled on close: never called after it */
    if (status != 0) {
        resolve_failed(link, status);
        return;
    }
    connect_to(link, ip);
}

static void try_connect(struct gw_mqtt_link *link)
{
    /*
     * Without TLS the name is resolved on libuv's threadpool (with a
     * short cache) and libmosquitto connects to the address: its own
     * getaddrinfo then gets a literal and does not block. With TLS,
     * libmosquitto checks the broker's certificate (and sends SNI)
     * against the host given to connect, with no way to name it apart:
     * connecting by IP would check the IP and break SNI routing. So a
     * TLS broker is connected by name, and the whole connect call (its
     * getaddrinfo included) runs on the threadpool while the loop keeps
     * its hands off the handle. The handshake then runs on the loop,
     * driven by the socket's readiness.
     */
    char ip[GW_DNS_IP_MAX];
    int rc;

    if (link->dns_req != NULL || link->connecting) {
        return;
    }
    if (link->tls) {
        connect_by_name(link);
        return;
    }
    rc = gw_dns_resolve(link->dns, link->host, on_resolved, link, ip,
                        sizeof(ip), &link->dns_req);
    if (rc == 1) {
        connect_to(link, ip);
    } else if (rc < 0) {
        resolve_failed(link, rc);
    }
}

static void on_retry(uv_timer_t *timer)
{
    struct gw_mqtt_link *link = timer->data;

    if (!link->closing) {
        try_connect(link);
    }
}

static void on_poll(uv_poll_t *poll, int status, int events)
{
    struct sock_watch *watch = poll->data;
    struct gw_mqtt_link *link = watch->link;
    int rc = MOSQ_ERR_SUCCESS;

    (void)events;
    if (link->watch != watch) {
        return; /* a stale event for a socket already dropped */
    }
    if (status < 0) {
        gw_log(GW_LOG_DEBUG, "mqtt", "poll error: %s", uv_strerror(status));
    }
    /*
     * Read first on any event: with TLS the handshake is driven from the
     * read path. The library reads about one packet per call, so loop
     * until the socket is drained, within a bound.
     */
    for (int i = 0; i < READS_PER_WAKEUP; i++) {
        errno = 0;
        rc = mosquitto_loop_read(link->mosq, 1);
        if (rc != MOSQ_ERR_SUCCESS || errno == EAGAIN || errno == EWOULDBLOCK ||
            mosquitto_socket(link->mosq) < 0) {
            break;
        }
    }
    if (rc == MOSQ_ERR_SUCCESS && mosquitto_want_write(link->mosq)) {
        rc = mosquitto_loop_write(link->mosq, 1);
    }
    if (rc == MOSQ_ERR_TLS) {
        log_tls_failure(link);
    } else if (rc != MOSQ_ERR_SUCCESS && rc != MOSQ_ERR_NO_CONN) {
        gw_log(GW_LOG_DEBUG, "mqtt", "socket i/o: %s",
               rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
    }
    watch_sync(link);
}

/* Makes the uv_poll match the library's socket and write interest. */
static void watch_sync(struct gw_mqtt_link *link)
{
    int fd;

    if (link->closing || link->connecting) {
        return; /* the worker has mosq */
    }
    fd = mosquitto_socket(link->mosq);
    if (fd != link->fd) {
        watch_drop(link);
    }
    if (fd < 0) {
        if (link->up) {
            /* Lost without the disconnect callback having run. */
            link->up = false;
            link->stats.disconnects++;
            if (link->on_state != NULL) {
                link->on_state(link, false, link->arg);
            }
        }
        schedule_retry(link);
        return;
    }
    if (link->watch == NULL) {
        struct sock_watch *watch = calloc(1, sizeof(*watch));
        if (watch == NULL ||
            uv_poll_init_socket(link->loop, &watch->poll, fd) != 0) {
            free(watch);
            gw_log(GW_LOG_ERROR, "mqtt", "cannot watch broker socket");
            return;
        }
        watch->link = link;
        watch->poll.data = watch;
        link->watch = watch;
        link->fd = fd;
        link->events = 0;
        link->handles_open++;
    }
    int events = UV_READABLE;
    if (mosquitto_want_write(link->mosq)) {
        events |= UV_WRITABLE; /* only while there is something to send */
    }
    if (events != link->events) {
        uv_poll_start(&link->watch->poll, events, on_poll);
        link->events = events;
    }
}

static void on_misc(uv_timer_t *timer)
{
    struct gw_mqtt_link *link = timer->data;

    if (link->connecting) {
        return; /* the worker has mosq */
    }
    if (mosquitto_socket(link->mosq) >= 0) {
        mosquitto_loop_misc(link->mosq); /* PINGREQ, keepalive expiry */
    }
    watch_sync(link);
}

static void on_connect(struct mosquitto *mosq, void *obj, int rc)
{
    struct gw_mqtt_link *link = obj;

    if (rc != 0) {
        gw_log(GW_LOG_WARN, "mqtt", "broker refused the connection: %s",
               mosquitto_connack_string(rc));
        /* Credentials or a full broker: a quick retry would be refused
         * the same way, so the backoff grows. */
        link->quick_pending = false;
        link->quick_until = 0;
        return;
    }
    link->up = true;
    link->backoff_ms = BACKOFF_MIN_MS;
    link->quick_pending = link->quick_retry; /* for its loss */
    link->quick_until = 0;
    link->stats.connects++;
    for (size_t i = 0; i < link->n_topics; i++) {
        int sub = mosquitto_subscribe(mosq, NULL, link->topics[i], 0);
        if (sub != MOSQ_ERR_SUCCESS) {
            gw_log(GW_LOG_ERROR, "mqtt", "subscribe %s: %s", link->topics[i],
                   mosquitto_strerror(sub));
        }
    }
    if (link->status_topic != NULL) {
        int pub = mosquitto_publish(mosq, NULL, link->status_topic,
                                    (int)strlen(STATUS_ONLINE), STATUS_ONLINE,
                                    1, true);
        if (pub != MOSQ_ERR_SUCCESS) {
            gw_log(GW_LOG_ERROR, "mqtt", "status %s: %s", link->status_topic,
                   mosquitto_strerror(pub));
        }
    }
    gw_log(GW_LOG_INFO, "mqtt", "connected to %s:%d, %zu subscription%s",
           link->host, link->port, link->n_topics,
           link->n_topics == 1 ? "" : "s");
    if (link->on_state != NULL) {
        link->on_state(link, true, link->arg);
    }
}

static void on_disconnect(struct mosquitto *mosq, void *obj, int rc)
{
    struct gw_mqtt_link *link = obj;

    (void)mosq;
    if (!link->up) {
        return;
    }
    link->up = false;
    link->stats.disconnects++;
    if (!link->closing) {
        gw_log(GW_LOG_WARN, "mqtt", "connection to %s:%d lost: %s", link->host,
               link->port, mosquitto_strerror(rc));
    }
    if (link->on_state != NULL) {
        link->on_state(link, false, link->arg);
    }
}

/*
 * libmosquitto tells why a TLS handshake failed (an untrusted certificate,
 * a host name it does not carry) only through its log: its errors become
 * ours, naming the broker.
 */
static void on_lib_log(struct mosquitto *mosq, void *obj, int level,
                       const char *str)
{
    struct gw_mqtt_link *link = obj;

    (void)mosq;
    if (link->connecting) {
        /* On the worker: kept for the loop to log (the first error). */
        if ((level & MOSQ_LOG_ERR) != 0 && link->connect_err[0] == '\0') {
            snprintf(link->connect_err, sizeof(link->connect_err), "%s", str);
        }
        return;
    }
    if ((level & MOSQ_LOG_ERR) != 0 && !link->closing) {
        gw_log(GW_LOG_WARN, "mqtt", "%s:%d: %s", link->host, link->port, str);
        if (strncmp(str, "OpenSSL Error", 13) == 0) {
            log_tls_failure(link);
        }
    }
}

static void on_message(struct mosquitto *mosq, void *obj,
                       const struct mosquitto_message *msg)
{
    struct gw_mqtt_link *link = obj;

    (void)mosq;
    link->stats.rx_messages++;
    gw_mqtt_message_cb cb = msg->retain && link->on_retained != NULL
                                ? link->on_retained
                                : link->on_message;
    if (cb != NULL && msg->payloadlen >= 0) {
        cb(link, msg->topic, msg->payload, (size_t)msg->payloadlen, link->arg);
    }
}

static int copy_options(struct gw_mqtt_link *link,
                        const struct gw_mqtt_link_options *opts)
{
    link->host = strdup(opts->host);
    link->topics = calloc(opts->n_topics + 1, sizeof(char *));
    if (link->host == NULL || link->topics == NULL) {
        return GW_ENOMEM;
    }
    for (size_t i = 0; i < opts->n_topics; i++) {
        link->topics[i] = strdup(opts->topics[i]);
        if (link->topics[i] == NULL) {
            return GW_ENOMEM;
        }
        link->n_topics++;
    }
    if (opts->status_topic != NULL && opts->status_topic[0] != '\0' &&
        (link->status_topic = strdup(opts->status_topic)) == NULL) {
        return GW_ENOMEM;
    }
    link->port = opts->port;
    link->tls = opts->tls;
    link->keepalive_s = opts->keepalive_s;
    link->on_message = opts->on_message;
    link->on_retained = opts->on_retained;
    link->on_state = opts->on_state;
    link->arg = opts->arg;
    return 0;
}

static int setup_client(struct gw_mqtt_link *link,
                        const struct gw_mqtt_link_options *opts)
{
    link->mosq = mosquitto_new(opts->client_id, true, link);
    if (link->mosq == NULL) {
        return errno == ENOMEM ? GW_ENOMEM : GW_EINVAL;
    }
    mosquitto_int_option(link->mosq, MOSQ_OPT_PROTOCOL_VERSION,
                         MQTT_PROTOCOL_V311);
    mosquitto_int_option(link->mosq, MOSQ_OPT_TCP_NODELAY, 1);
    if (opts->username != NULL && opts->username[0] != '\0' &&
        mosquitto_username_pw_set(link->mosq, opts->username, opts->password) !=
            MOSQ_ERR_SUCCESS) {
        return GW_ENOMEM;
    }
    if (opts->will_topic != NULL && opts->will_topic[0] != '\0') {
        const char *p = opts->will_payload != NULL ? opts->will_payload : "";
        if (mosquitto_will_set(link->mosq, opts->will_topic, (int)strlen(p), p,
                               1, true) != MOSQ_ERR_SUCCESS) {
            return GW_EINVAL;
        }
    } else if (link->status_topic != NULL &&
               mosquitto_will_set(link->mosq, link->status_topic,
                                  (int)strlen(STATUS_OFFLINE), STATUS_OFFLINE,
                                  1, true) != MOSQ_ERR_SUCCESS) {
        return GW_EINVAL;
    }
    if (opts->tls) {
        const char *ca = opts->ca_file != NULL && opts->ca_file[0] != '\0'
                             ? opts->ca_file
                             : NULL;
        const char *capath = ca == NULL ? "/etc/ssl/certs" : NULL;
        const char *cert = opts->cert_file != NULL && opts->cert_file[0]
                               ? opts->cert_file
                               : NULL;
        const char *key =
            opts->key_file != NULL && opts->key_file[0] ? opts->key_file : NULL;
        int rc = mosquitto_tls_set(link->mosq, ca, capath, cert, key, NULL);
        if (rc != MOSQ_ERR_SUCCESS) {
            gw_log(GW_LOG_ERROR, "mqtt", "TLS setup: %s",
                   mosquitto_strerror(rc));
            return GW_EINVAL;
        }
    }
    mosquitto_connect_callback_set(link->mosq, on_connect);
    mosquitto_disconnect_callback_set(link->mosq, on_disconnect);
    mosquitto_message_callback_set(link->mosq, on_message);
    mosquitto_log_callback_set(link->mosq, on_lib_log);
    return 0;
}

static void link_free_early(struct gw_mqtt_link *link)
{
    mosquitto_destroy(link->mosq);
    gw_dns_close(link->dns);
    for (size_t i = 0; i < link->n_topics; i++) {
        free(link->topics[i]);
    }
    free(link->topics);
    free(link->status_topic);
    free(link->host);
    free(link);
}

int gw_mqtt_link_init(uv_loop_t *loop, const struct gw_mqtt_link_options *opts,
                      struct gw_mqtt_link **out)
{
    struct gw_mqtt_link *link;
    int rc;

    if (opts->host == NULL || opts->client_id == NULL || opts->port <= 0) {
        return GW_EINVAL;
    }
    link = calloc(1, sizeof(*link));
    if (link == NULL) {
        return GW_ENOMEM;
    }
    link->loop = loop;
    link->fd = -1;
    link->backoff_ms = BACKOFF_MIN_MS;
    link->jitter = uv_hrtime() | 1;
    link->quick_retry = opts->quick_retry;
    if ((rc = copy_options(link, opts)) != 0 ||
        (rc = gw_dns_create(loop, NULL, &link->dns)) != 0 ||
        (rc = setup_client(link, opts)) != 0) {
        link_free_early(link);
        return rc;
    }
    uv_timer_init(loop, &link->misc_timer);
    uv_timer_init(loop, &link->retry_timer);
    link->misc_timer.data = link;
    link->retry_timer.data = link;
    link->handles_open = 2;
    uv_timer_start(&link->misc_timer, on_misc, MISC_INTERVAL_MS,
                   MISC_INTERVAL_MS);
    uv_timer_start(&link->retry_timer, on_retry, 0, 0); /* first attempt */
    *out = link;
    return 0;
}

static int link_publish(struct gw_mqtt_link *link, const char *topic,
                        const void *payload, size_t len, int qos, bool retain);

int gw_mqtt_link_publish(struct gw_mqtt_link *link, const char *topic,
                         const void *payload, size_t len)
{
    return link_publish(link, topic, payload, len, 0, false);
}

int gw_mqtt_link_publish_retained(struct gw_mqtt_link *link, const char *topic,
                                  const void *payload, size_t len)
{
    return link_publish(link, topic, payload, len, 1, true);
}

static int link_publish(struct gw_mqtt_link *link, const char *topic,
                        const void *payload, size_t len, int qos, bool retain)
{
    if (len > MQTT_MAX_PAYLOAD) {
        return GW_ETOOBIG;
    }
    if (!link->up || link->closing || link->connecting) {
        link->stats.tx_dropped++;
        return -ENOTCONN;
    }
    int rc = mosquitto_publish(link->mosq, NULL, topic, (int)len, payload, qos,
                               retain);
    if (rc != MOSQ_ERR_SUCCESS) {
        link->stats.tx_dropped++;
        watch_sync(link);
        return rc == MOSQ_ERR_NOMEM ? GW_ENOMEM : -ENOTCONN;
    }
    link->stats.tx_messages++;
    /* Outside callbacks the library writes at once; inside one it queues,
     * and the poll must then wait for writability too. */
    watch_sync(link);
    return 0;
}

bool gw_mqtt_link_is_up(const struct gw_mqtt_link *link)
{
    return link->up && !link->closing;
}

void gw_mqtt_link_get_stats(const struct gw_mqtt_link *link,
                            struct gw_mqtt_link_stats *out)
{
    *out = link->stats;
}

void gw_mqtt_link_get_dns_stats(const struct gw_mqtt_link *link,
                                struct gw_dns_stats *out)
{
    gw_dns_get_stats(link->dns, out);
}

void gw_mqtt_link_close(struct gw_mqtt_link *link, gw_mqtt_close_cb cb,
                        void *arg)
{
    if (link == NULL || link->closing) {
        return;
    }
    link->on_message = NULL;
    link->on_retained = NULL;
    link->on_state = NULL;
    link->close_cb = cb;
    link->close_arg = arg;
    gw_dns_cancel(link->dns_req);
    link->dns_req = NULL;
    if (link->connecting) {
        /* Not started: never runs. Running: finishes, then maybe_finish. */
        (void)uv_cancel((uv_req_t *)&link->connect_work);
    }
    /* Stop polling before the library closes the fd under the poll. */
    watch_drop(link);
    link->closing = true; /* the disconnect below is not a loss */
    if (link->up && !link->connecting) {
        /* Written at once, outside any callback; a clean disconnect
         * discards the will, so the offline state goes first. */
        if (link->status_topic != NULL) {
            (void)mosquitto_publish(link->mosq, NULL, link->status_topic,
                                    (int)strlen(STATUS_OFFLINE), STATUS_OFFLINE,
                                    1, true);
        }
        mosquitto_disconnect(link->mosq);
    }
    uv_timer_stop(&link->misc_timer);
    uv_timer_stop(&link->retry_timer);
    uv_close((uv_handle_t *)&link->misc_timer, on_timer_closed);
    uv_close((uv_handle_t *)&link->retry_timer, on_timer_closed);
}
