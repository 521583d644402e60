/* The revocation control message; see revocation.h. */
#include "codec/revocation.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/client_id.h"
#include "codec/envelope.h"

#define HEAD "{\"revoke\":["
#define TAIL "]}"
/* ["<id, every byte escaped at worst>",<16 digits>] */
#define ENTRY_MAX (2 * GW_CLIENT_ID_MAX + 24)

_Static_assert(sizeof(HEAD) - 1 + sizeof(TAIL) - 1 == GW_REVOCATION_OVERHEAD,
               "overhead");

static bool id_ok(const char *id, size_t len)
{
    struct gw_client_id parsed;

    return len <= GW_CLIENT_ID_MAX && gw_client_id_parse(id, len, &parsed) == 0;
}

/* One entry as JSON; ids never hold control characters (refused as topic
 * levels), only '"' and '\' need escaping. Returns its length, or 0 for an
 * entry that is not valid. */
static size_t entry_format(const struct gw_revocation *e, char *out)
{
    size_t len, n = 0;
    int k;

    if (e->client_id == NULL ||
        (len = strnlen(e->client_id, GW_CLIENT_ID_MAX + 1)) == 0 ||
        !id_ok(e->client_id, len) || e->below < 1 ||
        e->below > GW_REVOCATION_BELOW_MAX) {
        return 0;
    }
    out[n++] = '[';
    out[n++] = '"';
    for (size_t i = 0; i < len; i++) {
        if (e->client_id[i] == '"' || e->client_id[i] == '\\') {
            out[n++] = '\\';
        }
        out[n++] = e->client_id[i];
    }
    k = snprintf(out + n, ENTRY_MAX - n, "\",%" PRIu64 "]", e->below);
    return k > 0 && (size_t)k < ENTRY_MAX - n ? n + (size_t)k : 0;
}

int gw_revocation_pack(const struct gw_revocation *entries, size_t n,
                       size_t max_bytes, gw_revocation_emit_fn emit, void *arg)
{
    char entry[ENTRY_MAX];
    size_t used = 0, len;
    char *msg;
    int count = 0, rc;

    if ((entries == NULL && n > 0) || emit == NULL ||
        max_bytes <= GW_REVOCATION_OVERHEAD ||
        max_bytes > GW_REVOCATION_MAX_LEN) {
        return GW_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if ((len = entry_format(&entries[i], entry)) == 0) {
            return GW_EINVAL;
        }
        if (GW_REVOCATION_OVERHEAD + len > max_bytes) {
            return GW_ETOOBIG;
        }
    }
    if (n == 0) {
        return 0;
    }
    if ((msg = malloc(max_bytes)) == NULL) {
        return GW_ENOMEM;
    }
    for (size_t i = 0; i <= n; i++) {
        len = i < n ? entry_format(&entries[i], entry) : 0;
        /* Full (or done): close this message and send it. */
        if (used > 0 &&
            (i == n || used + 1 + len + sizeof(TAIL) - 1 > max_bytes)) {
            memcpy(msg + used, TAIL, sizeof(TAIL) - 1);
            used += sizeof(TAIL) - 1;
            if ((rc = emit(arg, msg, used)) != 0) {
                free(msg);
                return rc;
            }
            count++;
            used = 0;
        }
        if (i == n) {
            break;
        }
        if (used == 0) {
            memcpy(msg, HEAD, sizeof(HEAD) - 1);
            used = sizeof(HEAD) - 1;
        } else {
            msg[used++] = ',';
        }
        memcpy(msg + used, entry, len);
        used += len;
    }
    free(msg);
    return count;
}

/* One [client id, below] pair, or false. */
static bool entry_read(const cJSON *item, const char **id, uint64_t *below)
{
    const cJSON *c = cJSON_IsArray(item) ? item->child : NULL;
    const cJSON *b = c != NULL ? c->next : NULL;
    double v;

    if (!cJSON_IsString(c) || !cJSON_IsNumber(b) || b->next != NULL) {
        return false;
    }
    v = b->valuedouble;
    /* The range first: a cast of a double out of range is undefined. */
    if (!(v >= 1 && v <= (double)GW_REVOCATION_BELOW_MAX) ||
        v != (double)(uint64_t)v) {
        return false;
    }
    *id = c->valuestring;
    *below = (uint64_t)v;
    return id_ok(*id, strnlen(*id, GW_CLIENT_ID_MAX + 1));
}

int gw_revocation_parse(const char *buf, size_t len,
                        gw_revocation_entry_fn on_entry, void *arg)
{
    const cJSON *list, *item;
    const char *id;
    uint64_t below;
    cJSON *root;
    int count = 0, rc;

    if ((buf == NULL && len > 0) || on_entry == NULL) {
        return GW_EINVAL;
    }
    if ((rc = gw_json_object_parse(buf, len, GW_REVOCATION_MAX_LEN, &root)) !=
        0) {
        return rc;
    }
    if ((rc = gw_json_unique_member(root, "revoke", &list)) == 0 &&
        !cJSON_IsArray(list)) {
        rc = GW_EPROTO;
    }
    /* Checked whole before the first call: a bad message changes nothing. */
    if (rc == 0) {
        cJSON_ArrayForEach(item, list)
        {
            if (!entry_read(item, &id, &below)) {
                rc = GW_EPROTO;
                break;
            }
            count++;
        }
    }
    if (rc == 0) {
        cJSON_ArrayForEach(item, list)
        {
            if (entry_read(item, &id, &below) &&
                (rc = on_entry(arg, id, below)) != 0) {
                break;
            }
        }
    }
    cJSON_Delete(root);
    return rc != 0 ? rc : count;
}
