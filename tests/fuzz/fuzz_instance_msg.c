/*
 * Messages between instances. Invariants: a refused message owns nothing
 * and is zeroed; an accepted one has a valid sender and client id, the
 * members its kind needs, and its header made again by
 * gw_instance_msg_new parses back to the same kind, sender, device and id.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/instance_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct gw_instance_msg zero;
    struct gw_instance_msg m, back;
    int err = gw_instance_msg_parse((const char *)data, size, &m);

    if (err != 0) {
        if (memcmp(&m, &zero, sizeof(m)) != 0) {
            abort();
        }
        return 0;
    }
    if (!gw_instance_name_valid(m.from, GW_INSTANCE_NAME_MAX) ||
        m.client_id[0] == '\0' ||
        (m.kind == GW_IMSG_REQUEST &&
         (m.method == NULL || m.origin == NULL || m.timeout_ms == 0)) ||
        (m.kind == GW_IMSG_REPLY &&
         (m.outcome == NULL || (m.result == NULL) == (m.error == NULL))) ||
        (m.kind == GW_IMSG_CATALOG && m.catalog == NULL) ||
        (m.kind == GW_IMSG_UP && m.message == NULL)) {
        abort();
    }
    cJSON *o = gw_instance_msg_new(m.kind, m.from, m.client_id, m.id);
    /* Only the header: a request, reply... without its body is refused,
     * a cancel is whole. */
    if (o == NULL) {
        abort();
    }
    if (m.kind == GW_IMSG_CANCEL) {
        char *text = cJSON_PrintUnformatted(o);
        if (text == NULL) {
            abort();
        }
        if (gw_instance_msg_parse(text, strlen(text), &back) != 0 ||
            back.kind != m.kind || back.id != m.id ||
            strcmp(back.from, m.from) != 0 ||
            strcmp(back.client_id, m.client_id) != 0) {
            abort();
        }
        gw_instance_msg_free(&back);
        free(text);
    }
    cJSON_Delete(o);
    gw_instance_msg_free(&m);
    return 0;
}
