/*
 * The firmware's OTA check (codec/ota_request.c). Input: Device-Id,
 * Client-Id and User-Agent, each ended by a NUL (a missing one is an
 * absent header), then the body. Invariants: a refusal says why and
 * leaves the result zeroed; an accepted request gives a lowercase MAC that
 * is the Device-Id, a uuid that is the Client-Id, a board and version made
 * only of the characters documented, and a client id the broker plugin
 * and the gateway parse back to the same MAC and uuid.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "codec/client_id.h"
#include "codec/ota_request.h"

#define SAFE "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The next NUL-ended field as a heap string, or NULL when none is left. */
static char *field(const uint8_t **p, size_t *left)
{
    const uint8_t *nul = memchr(*p, '\0', *left);
    size_t n;
    char *s;

    if (nul == NULL) {
        return NULL;
    }
    n = (size_t)(nul - *p);
    s = malloc(n + 1);
    if (s == NULL) {
        abort();
    }
    memcpy(s, *p, n + 1);
    *p += n + 1;
    *left -= n + 1;
    return s;
}

static void check_accepted(const struct gw_ota_headers *h,
                           const struct gw_ota_request *r)
{
    char id[GW_CLIENT_ID_MAX + 1];
    struct gw_client_id parsed;
    size_t n;

    if (strlen(r->mac) != 17 || strcasecmp(r->mac, h->device_id) != 0 ||
        strspn(r->mac, "0123456789abcdef:") != 17) {
        abort();
    }
    for (size_t i = 0; i < 17; i++) {
        if (r->mac_part[i] != (r->mac[i] == ':' ? '_' : r->mac[i])) {
            abort();
        }
    }
    if (strcmp(r->uuid, h->client_id) != 0) {
        abort();
    }
    n = strlen(r->board);
    if (n > GW_OTA_BOARD_MAX || strspn(r->board, SAFE) != n) {
        abort();
    }
    if (r->version[0] != '\0' && !gw_ota_version_valid(r->version)) {
        abort();
    }
    /* What gateway/api/ota.c issues, with the longest group it allows. */
    n = (size_t)snprintf(id, sizeof(id),
                         "GID_0123456789012345678901234567@@@%s@@@%s",
                         r->mac_part, r->uuid);
    if (n > GW_CLIENT_ID_MAX || gw_client_id_parse(id, n, &parsed) != 0 ||
        strcmp(parsed.mac, r->mac) != 0 || parsed.uuid_len != strlen(r->uuid) ||
        memcmp(parsed.uuid, r->uuid, parsed.uuid_len) != 0) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct gw_ota_request zero;
    const uint8_t *p = data;
    size_t left = size;
    struct gw_ota_headers h;
    struct gw_ota_request r;
    const char *why = NULL;
    int rc;

    h.device_id = field(&p, &left);
    h.client_id = h.device_id != NULL ? field(&p, &left) : NULL;
    h.user_agent = h.client_id != NULL ? field(&p, &left) : NULL;
    rc = gw_ota_request_parse(&h, (const char *)p, left, &r, &why);
    if (rc == 0) {
        if (why != NULL) {
            abort();
        }
        check_accepted(&h, &r);
    } else if (why == NULL || memcmp(&r, &zero, sizeof(r)) != 0) {
        abort();
    }
    free((char *)h.device_id);
    free((char *)h.client_id);
    free((char *)h.user_agent);
    return 0;
}
