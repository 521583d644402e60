/* Messages between gateway instances; see instance_msg.h. */
#include "codec/instance_msg.h"

#include <limits.h>
#include <string.h>

#include "codec/envelope.h"
#include "codec/jsonrpc.h"

static const char *const kind_names[] = {
#define XX(_, text) text,
    GW_INSTANCE_MSG_MAP(XX)
#undef XX
};

const char *gw_instance_msg_kind_name(enum gw_instance_msg_kind kind)
{
    return (unsigned)kind < GW_IMSG_COUNT_ ? kind_names[kind] : "?";
}

static const cJSON *member(const cJSON *root, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(root, key);
}

/* A string member of 1..max bytes, or NULL. */
static const char *short_string(const cJSON *root, const char *key, size_t max)
{
    const char *s = cJSON_GetStringValue(member(root, key));

    return s != NULL && s[0] != '\0' && strnlen(s, max + 1) <= max ? s : NULL;
}

/* An integral number in lo..hi, or false. */
static bool whole(const cJSON *item, double lo, double hi, uint32_t *out)
{
    double v;

    if (!cJSON_IsNumber(item)) {
        return false;
    }
    v = item->valuedouble;
    if (!(v >= lo && v <= hi) || v != (double)(uint32_t)v) {
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

static bool needs_id(enum gw_instance_msg_kind k)
{
    return k == GW_IMSG_REQUEST || k == GW_IMSG_REPLY ||
           k == GW_IMSG_PROGRESS || k == GW_IMSG_CANCEL;
}

/* {"code":<int>,"message":<string>}, as gw_rpc_error_normalise makes. */
static bool error_object(const cJSON *e)
{
    const cJSON *code = member(e, "code");

    double v = cJSON_IsNumber(code) ? code->valuedouble : 0.5;

    /* In int range before the cast: a cast of a double out of range is
     * undefined. */
    return cJSON_IsObject(e) && v >= (double)INT_MIN && v <= (double)INT_MAX &&
           v == (double)(int)v && cJSON_IsString(member(e, "message"));
}

static int read_kind(struct gw_instance_msg *m)
{
    const cJSON *root = m->root;
    const cJSON *item;

    switch (m->kind) {
    case GW_IMSG_REQUEST:
        m->method = short_string(root, "method", GW_INSTANCE_METHOD_MAX);
        m->origin = short_string(root, "origin", GW_INSTANCE_WORD_MAX);
        m->params = member(root, "params");
        item = member(root, "progress");
        if (m->method == NULL || m->origin == NULL ||
            (m->params != NULL && !cJSON_IsObject(m->params)) ||
            !whole(member(root, "timeout_ms"), 1, GW_INSTANCE_TIMEOUT_MAX,
                   &m->timeout_ms) ||
            (item != NULL && !cJSON_IsBool(item))) {
            return GW_EPROTO;
        }
        m->progress = cJSON_IsTrue(item);
        return 0;
    case GW_IMSG_REPLY:
        m->outcome = short_string(root, "outcome", GW_INSTANCE_WORD_MAX);
        m->result = member(root, "result");
        m->error = member(root, "error");
        if (m->outcome == NULL) {
            return GW_EPROTO;
        }
        /* A result with "ok", an error otherwise, never both. */
        if (strcmp(m->outcome, "ok") == 0) {
            return m->result != NULL && m->error == NULL ? 0 : GW_EPROTO;
        }
        return m->result == NULL && error_object(m->error) ? 0 : GW_EPROTO;
    case GW_IMSG_PROGRESS:
        m->params = member(root, "params");
        return cJSON_IsObject(m->params) ? 0 : GW_EPROTO;
    case GW_IMSG_CANCEL:
        return 0;
    case GW_IMSG_CATALOG:
        m->catalog = member(root, "catalog");
        return cJSON_IsObject(m->catalog) ? 0 : GW_EPROTO;
    case GW_IMSG_UP:
        m->message = member(root, "message");
        return cJSON_IsObject(m->message) ? 0 : GW_EPROTO;
    default:
        return GW_EPROTO;
    }
}

static int read_msg(struct gw_instance_msg *m)
{
    const char *t = cJSON_GetStringValue(member(m->root, "t"));
    const char *from = cJSON_GetStringValue(member(m->root, "from"));
    const char *cid = cJSON_GetStringValue(member(m->root, "cid"));
    struct gw_client_id parsed;
    size_t cid_len;
    int k;

    if (t == NULL || from == NULL || cid == NULL) {
        return GW_EPROTO;
    }
    for (k = 0; k < GW_IMSG_COUNT_ && strcmp(t, kind_names[k]) != 0; k++) {
    }
    if (k == GW_IMSG_COUNT_) {
        return GW_EPROTO;
    }
    m->kind = (enum gw_instance_msg_kind)k;
    cid_len = strnlen(cid, GW_CLIENT_ID_MAX + 1);
    if (!gw_instance_name_valid(from, GW_INSTANCE_NAME_MAX) ||
        cid_len > GW_CLIENT_ID_MAX ||
        gw_client_id_parse(cid, cid_len, &parsed) != 0 ||
        !gw_client_id_topic_safe(cid, cid_len)) {
        return GW_EPROTO;
    }
    memcpy(m->from, from, strlen(from) + 1);
    memcpy(m->client_id, cid, cid_len + 1);
    if (needs_id(m->kind)
            ? !whole(member(m->root, "id"), 1, GW_RPC_ID_MAX, &m->id)
            : member(m->root, "id") != NULL) {
        return GW_EPROTO;
    }
    return read_kind(m);
}

int gw_instance_msg_parse(const char *buf, size_t len,
                          struct gw_instance_msg *out)
{
    int err;

    if (out == NULL) {
        return GW_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    if (buf == NULL) {
        return GW_EINVAL;
    }
    err = gw_json_object_parse(buf, len, GW_INSTANCE_MSG_MAX_LEN, &out->root);
    if (err == 0) {
        err = read_msg(out);
    }
    if (err != 0) {
        cJSON_Delete(out->root);
        memset(out, 0, sizeof(*out));
    }
    return err;
}

void gw_instance_msg_free(struct gw_instance_msg *m)
{
    if (m != NULL) {
        cJSON_Delete(m->root);
        memset(m, 0, sizeof(*m));
    }
}

cJSON *gw_instance_msg_new(enum gw_instance_msg_kind kind, const char *from,
                           const char *client_id, uint32_t id)
{
    struct gw_client_id parsed;
    size_t cid_len;
    cJSON *o;

    if ((unsigned)kind >= GW_IMSG_COUNT_ || from == NULL || client_id == NULL ||
        !gw_instance_name_valid(from, GW_INSTANCE_NAME_MAX) ||
        (cid_len = strnlen(client_id, GW_CLIENT_ID_MAX + 1)) >
            GW_CLIENT_ID_MAX ||
        gw_client_id_parse(client_id, cid_len, &parsed) != 0 ||
        (needs_id(kind) && (id == 0 || id > GW_RPC_ID_MAX))) {
        return NULL;
    }
    if ((o = cJSON_CreateObject()) == NULL ||
        cJSON_AddStringToObject(o, "t", kind_names[kind]) == NULL ||
        cJSON_AddStringToObject(o, "from", from) == NULL ||
        cJSON_AddStringToObject(o, "cid", client_id) == NULL ||
        (needs_id(kind) && cJSON_AddNumberToObject(o, "id", id) == NULL)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}
