/*
 * Messages between gateway instances (docs/protocol.md section 10.7),
 * published on <cluster.topic_prefix>/<name>/rpc (to one instance) and
 * <cluster.topic_prefix>/<name>/catalog (from one instance to all):
 *
 *   {"t":"req","from":"gw-a","cid":"<client id>","id":7,
 *    "method":"tools/call","params":{...},"timeout_ms":8000,
 *    "origin":"api","progress":false}
 *   {"t":"rep","from":"gw-b","cid":...,"id":7,"outcome":"ok","result":{...}}
 *   {"t":"rep",...,"outcome":"timeout","error":{"code":-32001,"message":...}}
 *   {"t":"prog","from":...,"cid":...,"id":7,"params":{...}}
 *   {"t":"cancel","from":...,"cid":...,"id":7}
 *   {"t":"cat","from":...,"cid":...,"catalog":{...}}
 *   {"t":"up","from":...,"cid":...,"message":{...}}
 *
 * Only gateway accounts may publish there (the broker plugin), but a peer
 * is still outside input: bounded, checked, refused whole when wrong.
 * The parsed message points into root, which it owns.
 */
#ifndef GW_CODEC_INSTANCE_MSG_H
#define GW_CODEC_INSTANCE_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "codec/client_id.h"
#include "codec/instance_record.h"
#include "common/error.h"

/* A catalog of many tools is the largest message; far above any real one. */
#define GW_INSTANCE_MSG_MAX_LEN (512 * 1024)
#define GW_INSTANCE_METHOD_MAX  128
#define GW_INSTANCE_TIMEOUT_MAX 600000 /* ms */
#define GW_INSTANCE_WORD_MAX    16     /* origin, outcome */

#define GW_INSTANCE_MSG_MAP(XX)                                                \
    XX(REQUEST, "req")   /* a device request, carried to its owner */          \
    XX(REPLY, "rep")     /* its end, carried back */                           \
    XX(PROGRESS, "prog") /* the device's progress of a carried request */      \
    XX(CANCEL, "cancel") /* the asker gave up */                               \
    XX(CATALOG, "cat")   /* a device's tools and lists, from its owner */      \
    XX(UP, "up")         /* a device's MCP message, carried to its owner */

enum gw_instance_msg_kind {
#define XX(name, _) GW_IMSG_##name,
    GW_INSTANCE_MSG_MAP(XX)
#undef XX
        GW_IMSG_COUNT_
};

const char *gw_instance_msg_kind_name(enum gw_instance_msg_kind kind);

struct gw_instance_msg {
    cJSON *root; /* owned: gw_instance_msg_free */
    enum gw_instance_msg_kind kind;
    char from[GW_INSTANCE_NAME_MAX + 1];
    char client_id[GW_CLIENT_ID_MAX + 1];
    uint32_t id;          /* req, rep, prog, cancel: 1..GW_RPC_ID_MAX */
    const char *method;   /* req */
    const cJSON *params;  /* req (object or NULL), prog (object) */
    uint32_t timeout_ms;  /* req: 1..GW_INSTANCE_TIMEOUT_MAX */
    const char *origin;   /* req: a short word, the gateway maps it */
    bool progress;        /* req: the asker hears progress */
    const char *outcome;  /* rep: a short word, the gateway maps it */
    const cJSON *result;  /* rep "ok": any JSON value */
    const cJSON *error;   /* other rep: {"code":<int>,"message":<string>} */
    const cJSON *catalog; /* cat: an object, read by the gateway */
    const cJSON *message; /* up: an object, the device's envelope */
};

/*
 * Parses buf[0..len). Returns 0; GW_ETOOBIG, GW_EUTF8, GW_EMALFORMED (not
 * one JSON object); GW_EPROTO for an unknown "t", a bad "from" (not an
 * instance name) or "cid" (not a device client id), a missing or out of
 * range member the kind needs, or a member of the wrong type. *out is
 * zeroed on failure, and then owns nothing.
 */
GW_MUST_CHECK int gw_instance_msg_parse(const char *buf, size_t len,
                                        struct gw_instance_msg *out);

void gw_instance_msg_free(struct gw_instance_msg *m);

/*
 * A new message object of kind with "t", "from", "cid" and (when id is
 * not 0) "id" set, for the caller to complete and print; NULL on OOM or
 * a from/cid that would not parse back.
 */
cJSON *gw_instance_msg_new(enum gw_instance_msg_kind kind, const char *from,
                           const char *client_id, uint32_t id);

#endif /* GW_CODEC_INSTANCE_MSG_H */
