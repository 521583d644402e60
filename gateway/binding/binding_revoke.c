/*
 * Revocations to the broker plugin: the one an unbinding makes, and all of
 * them each time the broker link comes up, since the plugin keeps them in
 * memory only (docs/protocol.md section 9.3).
 */
#include <stdlib.h>
#include <string.h>

#include "codec/revocation.h"
#include "common/log.h"
#include "gateway/binding/binding.h"

#define SUBJECT "bindings"
/* What a packet holds besides the payload, kept as the cluster's messages
 * keep it: the shipped brokers' message_size_limit is their
 * max_packet_size less this. */
#define PUBLISH_OVERHEAD 1024

struct sink {
    struct gw_mqtt_link *link;
    const char *topic;
    size_t messages;
};

static int emit(void *arg, const char *msg, size_t len)
{
    struct sink *k = arg;
    int rc = gw_mqtt_link_publish(k->link, k->topic, msg, len);

    k->messages += rc == 0;
    return rc;
}

int gw_binding_revoke_publish(struct gw_mqtt_link *link, const char *topic,
                              size_t packet_max,
                              const struct gw_binding_revoked *r, size_t n)
{
    struct gw_revocation *e;
    struct sink k = {.link = link, .topic = topic};
    size_t room;
    int rc;

    if (n == 0) {
        return 0;
    }
    room = packet_max > PUBLISH_OVERHEAD + strlen(topic)
               ? packet_max - PUBLISH_OVERHEAD - strlen(topic)
               : 0;
    e = calloc(n, sizeof(*e));
    if (e == NULL) {
        return GW_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        e[i].client_id = r[i].client_id;
        e[i].below = (uint64_t)r[i].below;
    }
    rc = gw_revocation_pack(e, n, room, emit, &k);
    free(e);
    if (rc > 0) {
        rc = 0; /* the number of messages */
    }
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, SUBJECT,
               "could not tell the broker %zu revocation(s) on %s: %s (%zu "
               "message(s) sent)",
               n, topic, gw_strerror(rc), k.messages);
    }
    return rc;
}

struct all {
    struct gw_binding_revoked *r;
    size_t n, cap;
    int rc;
};

static void collect(const struct gw_binding_revoked *r, void *arg)
{
    struct all *a = arg;

    if (a->rc != 0) {
        return;
    }
    if (a->n == a->cap) {
        size_t cap = a->cap > 0 ? a->cap * 2 : 64;
        struct gw_binding_revoked *p = realloc(a->r, cap * sizeof(*p));
        if (p == NULL) {
            a->rc = GW_ENOMEM;
            return;
        }
        a->r = p;
        a->cap = cap;
    }
    a->r[a->n++] = *r;
}

int gw_binding_revoke_publish_all(struct gw_binding_store *s,
                                  struct gw_mqtt_link *link, const char *topic,
                                  size_t packet_max)
{
    struct all a = {0};
    int rc = gw_binding_revoked_list(s, collect, &a);

    if (rc >= 0) {
        rc = a.rc != 0
                 ? a.rc
                 : gw_binding_revoke_publish(link, topic, packet_max, a.r, a.n);
    }
    if (rc == 0 && a.n > 0) {
        gw_log(GW_LOG_INFO, SUBJECT,
               "told the broker the %zu binding(s) undone so far", a.n);
    } else if (rc != 0) {
        gw_log(GW_LOG_ERROR, SUBJECT,
               "could not tell the broker the bindings undone: %s",
               gw_strerror(rc));
    }
    free(a.r);
    return rc;
}
