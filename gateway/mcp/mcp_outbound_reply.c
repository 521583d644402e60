/*
 * What the outbound sends a device under an endpoint: the server's
 * messages and answers, and errors, each within what the firmware reads
 * in one message; and its rate-limited log lines about a device's
 * requests.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "codec/jsonrpc.h"
#include "common/log.h"
#include "gateway/mcp/mcp_outbound_int.h"

void gw__mcp_outbound_log(struct gw_mcp_outbound *ob, enum gw_log_level level,
                          const char *client_id, const char *fmt, ...)
{
    char subject[GW_CLIENT_ID_MAX + 16], text[512];
    uint64_t skipped = 0;
    va_list ap;

    if (level > gw_log_get_level()) {
        return;
    }
    if (level <= GW_LOG_INFO &&
        !gw_log_limit_take(&ob->log_limit, client_id, uv_now(ob->loop),
                           &skipped)) {
        return;
    }
    snprintf(subject, sizeof(subject), "dev=%s mcp-out", client_id);
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    gw_log_skipped(level, subject, skipped, text);
}

int gw__mcp_outbound_publish(struct gw_mcp_outbound *ob, const char *client_id,
                             const char *endpoint, const cJSON *payload,
                             size_t *len_out)
{
    const struct gw_device *dev = gw_device_find(ob->devices, client_id);
    const char *sid =
        dev != NULL && dev->link.session_id != NULL ? dev->link.session_id : "";
    char *text = gw_envelope_print_mcp_endpoint(sid, endpoint, payload);
    size_t len;
    int rc;

    if (text == NULL) {
        return GW_ENOMEM;
    }
    len = strlen(text);
    if (len_out != NULL) {
        *len_out = len;
    }
    /* What the firmware accepts in one message (docs/protocol.md
     * section 2). */
    rc = len > GW_ENVELOPE_DEVICE_MAX
             ? GW_ETOOBIG
             : gw_publish_json(ob->pub, client_id, text, len);
    cJSON_free(text);
    return rc;
}

void gw__mcp_outbound_reply_error(struct gw_mcp_outbound *ob,
                                  const char *client_id, const char *endpoint,
                                  const cJSON *id, int code,
                                  const char *message)
{
    cJSON *msg = gw_rpc_error(id, code, message);

    if (msg != NULL) {
        (void)gw__mcp_outbound_publish(ob, client_id, endpoint, msg, NULL);
        cJSON_Delete(msg);
    }
}

enum gw_outbound_outcome gw__mcp_outbound_reply_message(
    struct gw_mcp_outbound *ob, const char *client_id, const char *endpoint,
    cJSON *msg, const cJSON *dev_id, enum gw_outbound_outcome outcome)
{
    char text[128];
    size_t len = 0;
    int rc;

    rc = gw__mcp_outbound_publish(ob, client_id, endpoint, msg, &len);
    if (rc == GW_ETOOBIG) {
        snprintf(text, sizeof(text),
                 "the answer is too large for the device (%zu bytes, limit "
                 "%d)",
                 len, GW_ENVELOPE_DEVICE_MAX);
        gw__mcp_outbound_log(ob, GW_LOG_WARN, client_id, "%s: %s", endpoint,
                             text);
        gw__mcp_outbound_reply_error(ob, client_id, endpoint, dev_id,
                                     GW_RPC_INVALID_PARAMS, text);
        return GW_OUTBOUND_TOO_LARGE;
    }
    return outcome;
}
