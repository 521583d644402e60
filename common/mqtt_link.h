/*
 * The instance's one MQTT connection to the broker: libmosquitto driven by
 * the libuv loop (a uv_poll on its socket, a timer for its housekeeping;
 * no mosquitto thread). Reconnects with backoff (quick retries first after
 * a loss, when asked) and resubscribes.
 */
#ifndef GW_MQTT_LINK_H
#define GW_MQTT_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "common/dns_cache.h"
#include "common/error.h"

struct gw_mqtt_link;

/* A message arrived on one of the subscribed topics. */
typedef void (*gw_mqtt_message_cb)(struct gw_mqtt_link *link, const char *topic,
                                   const uint8_t *payload, size_t len,
                                   void *arg);

/* The broker connection came up (after subscribing) or went away. */
typedef void (*gw_mqtt_state_cb)(struct gw_mqtt_link *link, bool up, void *arg);

typedef void (*gw_mqtt_close_cb)(struct gw_mqtt_link *link, void *arg);

struct gw_mqtt_link_options {
    const char *host;
    int port;
    const char *client_id;
    const char *username; /* NULL or "" for none */
    const char *password;
    int keepalive_s;
    bool tls;
    const char *ca_file; /* NULL or "" = system store */
    const char *cert_file;
    const char *key_file;
    /* NULL or "": none. Else the link's own state, retained at QoS 1:
     * {"state":"online"} on every connect, {"state":"offline"} as its
     * will (the broker sends it when the link dies unannounced) and
     * before a clean disconnect. */
    const char *status_topic;
    /* NULL or "": none. Else a will of the caller's (retained, QoS 1),
     * which takes the place of the status topic's (one will per
     * connection; the status topic still says online and, at a clean
     * disconnect, offline). */
    const char *will_topic;
    const char *will_payload;
    /* After losing a link that was up, retry every 100-200 ms for 10 s
     * before the backoff (the gateway: what devices publish while it is
     * not subscribed is lost); false: the backoff alone, as devices do. */
    bool quick_retry;
    const char *const *topics; /* subscribed at QoS 0 on every connect */
    size_t n_topics;
    gw_mqtt_message_cb on_message;
    /* Retained messages (replayed at each subscribe); NULL: on_message. */
    gw_mqtt_message_cb on_retained;
    gw_mqtt_state_cb on_state;
    void *arg;
};

/*
 * Creates the link (copies every option) and starts connecting. The link
 * keeps trying until gw_mqtt_link_close(); failures are logged, not
 * returned. Returns 0 or GW_ENOMEM / GW_EINVAL.
 */
GW_MUST_CHECK int gw_mqtt_link_init(uv_loop_t *loop,
                                    const struct gw_mqtt_link_options *opts,
                                    struct gw_mqtt_link **out);

/*
 * Sends (or queues) one QoS 0 publish. Returns 0, -ENOTCONN while the
 * broker is away (the message is dropped, as QoS 0 allows), GW_ENOMEM or
 * GW_ETOOBIG.
 */
GW_MUST_CHECK int gw_mqtt_link_publish(struct gw_mqtt_link *link,
                                       const char *topic, const void *payload,
                                       size_t len);

/*
 * One retained QoS 1 publish (a state others read when they subscribe).
 * Returns as gw_mqtt_link_publish.
 */
GW_MUST_CHECK int gw_mqtt_link_publish_retained(struct gw_mqtt_link *link,
                                                const char *topic,
                                                const void *payload,
                                                size_t len);

bool gw_mqtt_link_is_up(const struct gw_mqtt_link *link);

/* Counters for metrics. */
struct gw_mqtt_link_stats {
    uint64_t connects;    /* successful CONNACKs */
    uint64_t disconnects; /* lost or refused connections */
    uint64_t rx_messages;
    uint64_t tx_messages;
    uint64_t tx_dropped; /* publishes while the broker was away */
};
void gw_mqtt_link_get_stats(const struct gw_mqtt_link *link,
                            struct gw_mqtt_link_stats *out);

/* The broker name's resolver cache; a TLS broker is looked up by the
 * library instead (see try_connect) and counts nothing here. */
void gw_mqtt_link_get_dns_stats(const struct gw_mqtt_link *link,
                                struct gw_dns_stats *out);

/*
 * Sends DISCONNECT if connected, closes every handle and frees the link;
 * cb (may be NULL) runs once all of that is done. Idempotent.
 */
void gw_mqtt_link_close(struct gw_mqtt_link *link, gw_mqtt_close_cb cb,
                        void *arg);

#endif /* GW_MQTT_LINK_H */
