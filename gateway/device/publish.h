/*
 * Publishing to one device (docs/protocol.md section 2): the down topic
 * formatted for its client id, goodbyes, and MCP envelopes. The one way
 * anything in the gateway reaches a device over the broker, and the outbox
 * that holds device-bound messages over a short broker outage.
 */
#ifndef GW_PUBLISH_H
#define GW_PUBLISH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/error.h"
#include "common/list.h"
#include "common/mqtt_link.h"
#include "gateway/core/config_hold.h"

/* What the outbox did since the start. */
struct gw_publish_stats {
    uint64_t held;     /* messages put in the outbox */
    uint64_t sent;     /* of those, published later */
    uint64_t expired;  /* dropped past limits.outbox_age_ms */
    uint64_t overflow; /* refused: the outbox was full */
};

/*
 * Zero-initialised with link and config set is a valid publisher. While
 * the broker link is down, messages wait in the outbox (bounded by
 * limits.outbox_messages, outbox_bytes and outbox_age_ms, read at each
 * use) and go out in order once the link is back and, when the broker
 * reports presence, once the device is online again.
 */
struct gw_publisher {
    struct gw_mqtt_link *link; /* NULL until the broker link exists */
    const struct gw_config_live *config;
    struct gw_list held; /* struct held_msg, oldest first; lazily set up */
    size_t held_count;
    size_t held_bytes;
    bool presence_seen; /* the broker reports presence (plugin, EMQX) */
    bool overflow_told; /* one log line per outage for a full outbox */
    struct gw_publish_stats stats;
    /*
     * Told when the last message held for a device has been sent (not
     * when messages expire: their waiters have their own bound). The
     * session table sets it, to let go of downlink audio held behind a
     * late "tts start". Called while the outbox is being sent: it must
     * not publish.
     */
    void (*on_sent)(void *arg, const char *client_id);
    void *on_sent_arg;
};

/* One JSON message to the device's down topic. GW_EINVAL for a client id
 * the topic cannot carry; 0 when published or held; GW_ELIMIT when the
 * outbox is full; the link's error when the outbox is off. */
int gw_publish_json(struct gw_publisher *pub, const char *client_id,
                    const char *json, size_t len);

/* True while messages for client_id wait in the outbox: right after a
 * gw_publish_json() that returned 0, it says that message was held. */
bool gw_publish_waiting(const struct gw_publisher *pub, const char *client_id);

/* {"type":"goodbye","session_id":session_id} to the device. */
void gw_publish_goodbye(struct gw_publisher *pub, const char *client_id,
                        const char *session_id);

/* The broker link came up or went down (after the dispatcher heard it):
 * up sends what waits, unless devices must be seen online first. */
void gw_publish_link_state(struct gw_publisher *pub, bool up);

/* Every broker message, before it is dispatched: a device's own message
 * or its online presence releases what waits for it. */
void gw_publish_heard(struct gw_publisher *pub, const char *topic,
                      const uint8_t *payload, size_t len);

/* The same for a retained message replayed at subscribe: only presence
 * counts, a device's old message says nothing of it being there now. */
void gw_publish_heard_retained(struct gw_publisher *pub, const char *topic,
                               const uint8_t *payload, size_t len);

/* Frees whatever still waits (counted as expired). */
void gw_publish_close(struct gw_publisher *pub);

#endif /* GW_PUBLISH_H */
