/*
 * MQTT client id parser. Invariants: the parts of a parsed id join back
 * into the input (the MAC through its lowercase ':' form), no part can
 * break a topic, and the parser and gw_client_id_topic_safe agree.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/client_id.h"

static void check_no_topic_chars(const char *s, size_t len)
{
    if (memchr(s, '/', len) != NULL || memchr(s, '+', len) != NULL ||
        memchr(s, '#', len) != NULL || memchr(s, '\0', len) != NULL) {
        abort();
    }
}

/* The MAC as the id carries it, from the normalised form. */
static void check_mac(const struct gw_client_id *id)
{
    for (size_t i = 0; i < GW_CLIENT_ID_MAC_PART_LEN; i++) {
        char want = id->mac_part[i];
        if (want == '_') {
            want = ':';
        } else if (want >= 'A' && want <= 'F') {
            want = (char)(want - 'A' + 'a');
        }
        if (id->mac[i] != want) {
            abort();
        }
    }
    if (id->mac[GW_CLIENT_ID_MAC_PART_LEN] != '\0') {
        abort();
    }
}

static void check_parsed(const char *buf, size_t len,
                         const struct gw_client_id *id)
{
    char joined[GW_CLIENT_ID_MAX + 1];
    size_t n = 0;

    if (id->group_len == 0 || id->group != buf ||
        (id->uuid != NULL && id->uuid_len == 0) ||
        (id->uuid == NULL && id->uuid_len != 0)) {
        abort();
    }
    check_no_topic_chars(id->group, id->group_len);
    if (id->uuid != NULL) {
        check_no_topic_chars(id->uuid, id->uuid_len);
    }
    check_mac(id);
    /* Re-join: group @@@ mac [@@@ uuid] must be the input exactly. */
    memcpy(joined, id->group, id->group_len);
    n = id->group_len;
    memcpy(joined + n, "@@@", 3);
    memcpy(joined + n + 3, id->mac_part, GW_CLIENT_ID_MAC_PART_LEN);
    n += 3 + GW_CLIENT_ID_MAC_PART_LEN;
    if (id->uuid != NULL) {
        if (n + 3 + id->uuid_len > sizeof(joined)) {
            abort();
        }
        memcpy(joined + n, "@@@", 3);
        memcpy(joined + n + 3, id->uuid, id->uuid_len);
        n += 3 + id->uuid_len;
    }
    if (n != len || memcmp(joined, buf, len) != 0) {
        abort();
    }
    if (!gw_client_id_topic_safe(id->group, id->group_len) ||
        (id->uuid != NULL &&
         !gw_client_id_topic_safe(id->uuid, id->uuid_len))) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_client_id id;
    char *buf = malloc(size > 0 ? size : 1);
    bool safe;
    int err;

    if (buf == NULL) {
        return 0;
    }
    memcpy(buf, data, size);
    err = gw_client_id_parse(buf, size, &id);
    safe = gw_client_id_topic_safe(buf, size);
    if (err == 0) {
        if (!safe) {
            abort();
        }
        check_parsed(buf, size, &id);
    } else if (err == GW_EPROTO || err == GW_EUTF8) {
        if (safe) {
            abort();
        }
    } else if (err == GW_EMALFORMED) {
        /* Structure only: an empty id aside, the text was topic-safe. */
        if (size > 0 && !safe) {
            abort();
        }
    } else if (err != GW_ETOOBIG || size <= GW_CLIENT_ID_MAX) {
        abort();
    }
    free(buf);
    return 0;
}
