/* Messages to one device over the broker; see publish.h. */
#include "gateway/publish.h"

#include <string.h>

#include "codec/envelope.h"
#include "codec/hello.h"
#include "codec/topic.h"
#include "common/log.h"

#define TOPIC_MAX 512

int gw_publish_json(struct gw_publisher *pub, const char *client_id,
                    const char *json, size_t len)
{
    char topic[TOPIC_MAX];
    int rc = gw_topic_format(gw_config_live_get(pub->config)->mqtt.down_topic,
                             client_id, topic, sizeof(topic));

    if (rc != 0) {
        return rc;
    }
    if (pub->link == NULL) {
        return GW_ENOENT;
    }
    return gw_mqtt_link_publish(pub->link, topic, json, len);
}

void gw_publish_goodbye(struct gw_publisher *pub, const char *client_id,
                        const char *session_id)
{
    char msg[GW_SESSION_ID_MAX * 6 + 64];
    size_t len;

    if (gw_envelope_build_goodbye(session_id, msg, sizeof(msg), &len) == 0) {
        (void)gw_publish_json(pub, client_id, msg, len);
    }
}

int gw_publish_mcp(struct gw_publisher *pub, const char *client_id,
                   const char *session_id, const cJSON *msg)
{
    char *text = gw_envelope_print_mcp(session_id, msg);
    size_t len;
    int rc;

    if (text == NULL) {
        return GW_ENOMEM;
    }
    len = strlen(text);
    /* What the firmware accepts in one message (docs/protocol.md
     * section 2). */
    rc = len > GW_ENVELOPE_DEVICE_MAX
             ? GW_ETOOBIG
             : gw_publish_json(pub, client_id, text, len);
    cJSON_free(text);
    return rc;
}
