/*
 * Device MQTT usernames: any bytes as a username give a binding id within
 * 1..2^53 or 0 (never read past the input), and any username made from the
 * input's peer text and id reads back with that id.
 * Input: 8 bytes of binding id (little-endian), then the username/peer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/device_username.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char out[GW_DEVICE_USERNAME_MAX + 1];
    uint64_t want = 0, id = 99;
    char *text;
    int rc;

    /* The username on its own, copied so that an overread is caught. */
    text = malloc(size > 0 ? size : 1);
    if (text == NULL) {
        return 0;
    }
    memcpy(text, data, size);
    rc = gw_device_username_binding(text, size, &id);
    if ((rc != 0 && rc != GW_EMALFORMED) || (rc == GW_EMALFORMED && id != 0) ||
        id > GW_DEVICE_USERNAME_BINDING_MAX ||
        (size > GW_DEVICE_USERNAME_MAX && (rc != 0 || id != 0))) {
        abort();
    }
    free(text);

    if (size < 8) {
        return 0;
    }
    for (int i = 7; i >= 0; i--) {
        want = want << 8 | data[i];
    }
    want &=
        GW_DEVICE_USERNAME_BINDING_MAX | (GW_DEVICE_USERNAME_BINDING_MAX - 1);
    text = malloc(size - 8 + 1);
    if (text == NULL) {
        return 0;
    }
    memcpy(text, data + 8, size - 8);
    text[size - 8] = '\0';
    rc = gw_device_username_make(text, want, out, sizeof(out));
    if (rc >= 0) {
        if ((size_t)rc != strlen(out) || rc > GW_DEVICE_USERNAME_MAX ||
            gw_device_username_binding(out, (size_t)rc, &id) != 0 ||
            id != want) {
            abort();
        }
    } else if (rc != GW_EINVAL || want <= GW_DEVICE_USERNAME_BINDING_MAX) {
        /* Only a peer that cannot be one: too long, or needing escapes. */
        size_t len = strlen(text);
        int bad = len > GW_DEVICE_USERNAME_PEER_MAX + 7 ||
                  strpbrk(text, "\"\\") != NULL;
        for (size_t i = 0; i < len && !bad; i++) {
            bad =
                (unsigned char)text[i] < 0x20 || (unsigned char)text[i] > 0x7e;
        }
        if (rc != GW_EINVAL || (!bad && len <= GW_DEVICE_USERNAME_PEER_MAX)) {
            abort();
        }
    }
    free(text);
    return 0;
}
