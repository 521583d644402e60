/* Per-device MQTT topics: '+' capture and "{client_id}" templates. */
#include "codec/topic.h"

#include <string.h>

#define PLACEHOLDER "{client_id}"

int gw_topic_capture(const char *pattern, const char *topic, size_t topic_len,
                     const char **cap, size_t *cap_len)
{
    const char *p = pattern;
    size_t t = 0;
    bool captured = false;

    for (;;) {
        /* One level of each: the pattern's up to '/', the topic's too. */
        const char *p_end = strchr(p, '/');
        size_t p_len = p_end != NULL ? (size_t)(p_end - p) : strlen(p);
        size_t t_start = t;
        while (t < topic_len && topic[t] != '/') {
            t++;
        }
        size_t t_len = t - t_start;

        if (p_len == 1 && p[0] == '+') {
            if (t_len == 0) {
                return GW_ENOENT;
            }
            if (!captured) {
                *cap = topic + t_start;
                *cap_len = t_len;
                captured = true;
            }
        } else if (p_len != t_len || memcmp(p, topic + t_start, t_len) != 0) {
            return GW_ENOENT;
        }
        bool p_more = p_end != NULL;
        bool t_more = t < topic_len;
        if (p_more != t_more) {
            return GW_ENOENT; /* one has more levels than the other */
        }
        if (!p_more) {
            return captured ? 0 : GW_ENOENT;
        }
        p = p_end + 1;
        t++; /* past the '/' */
    }
}

int gw_topic_format(const char *template_, const char *client_id, char *out,
                    size_t cap)
{
    const char *at = strstr(template_, PLACEHOLDER);

    if (at == NULL) {
        return GW_EINVAL;
    }
    size_t head = (size_t)(at - template_);
    size_t id_len = strlen(client_id);
    const char *tail = at + strlen(PLACEHOLDER);
    size_t tail_len = strlen(tail);

    if (head + id_len + tail_len + 1 > cap) {
        return GW_ENOSPC;
    }
    memcpy(out, template_, head);
    memcpy(out + head, client_id, id_len);
    memcpy(out + head + id_len, tail, tail_len + 1);
    return 0;
}
