/*
 * Topic capture on arbitrary topics: a capture always lies inside the
 * topic, is one non-empty level, and formatting it back into the down
 * template yields a topic that contains it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/topic.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *topic = (const char *)data;
    const char *cap = NULL;
    size_t cap_len = 0;
    char id[256];
    char out[300];

    if (gw_topic_capture("devices/+/up", topic, size, &cap, &cap_len) != 0) {
        return 0;
    }
    if (cap < topic || cap + cap_len > topic + size || cap_len == 0 ||
        memchr(cap, '/', cap_len) != NULL) {
        abort();
    }
    if (size != cap_len + strlen("devices//up") ||
        memcmp(topic, "devices/", 8) != 0) {
        abort();
    }
    if (cap_len >= sizeof(id) || memchr(cap, '\0', cap_len) != NULL) {
        return 0;
    }
    memcpy(id, cap, cap_len);
    id[cap_len] = '\0';
    if (gw_topic_format("devices/{client_id}/down", id, out, sizeof(out)) !=
            0 ||
        strstr(out, id) == NULL) {
        abort();
    }
    return 0;
}
