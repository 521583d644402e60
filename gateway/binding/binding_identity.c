/*
 * A device's identity as its binding says it, for the decisions that must
 * not trust a client id's text: which MCP servers it may reach, which
 * device a call wakes (docs/protocol.md section 9.3).
 */
#include <string.h>

#include "gateway/binding/binding.h"

int gw_binding_identity(struct gw_binding_store *s, const char *client_id,
                        struct gw_binding *out)
{
    int count = 0;
    int rc;

    if (s == NULL || client_id == NULL || out == NULL) {
        return GW_EINVAL;
    }
    rc = gw_binding_find_client(s, client_id, out);
    if (rc == 0) {
        rc = gw_binding_count_mac(s, out->mac, &count);
    }
    if (rc == 0 && count != 1) {
        rc = GW_EEXIST; /* another binding holds this MAC too */
    }
    return rc;
}
