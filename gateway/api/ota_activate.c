/*
 * POST <ota url>/activate: a device shown an activation asks whether it
 * is bound yet, proving itself with its serial number's HMAC when it has
 * one (docs/protocol.md section 9.3).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>

#include "codec/activation_request.h"
#include "common/log.h"
#include "crypto/credential.h"
#include "gateway/api/http_api_int.h"
#include "gateway/binding/binding.h"
#include "gateway/http/http_server.h"

#define SUBJECT "ota"

bool gw__api_ota_activate_path(const char *path)
{
    return strcmp(path, "/xiaozhi/ota/activate") == 0;
}

static void refuse(struct gw__api_ota *ota, enum gw_ota_activate_result r,
                   struct gw_http_req *req, int status, const char *why)
{
    ota->stats.activations[r]++;
    gw__api_ota_refuse(req, status, why, NULL);
}

static void answer(struct gw__api_ota *ota, enum gw_ota_activate_result r,
                   struct gw_http_req *req, int status, const char *state)
{
    cJSON *doc = cJSON_CreateObject();

    ota->stats.activations[r]++;
    cJSON_AddStringToObject(doc, "status", state);
    gw__api_send_json(req, status, doc, NULL);
}

/* Whether a proof may be tried now: per address and overall. */
static bool may_guess(struct gw__api_ota *ota, struct gw_http_req *req)
{
    if (gw_ratelimit_take(&ota->guesses, gw_http_req_peer(req),
                          uv_now(ota->loop), NULL)) {
        return true;
    }
    refuse(ota, GW_OTA_ACTIVATE_LIMITED, req, 429,
           "too many proofs tried: wait");
    return false;
}

/* hmac is HMAC(HMAC(ota.serial_key, serial), challenge). */
static bool proof_ok(const struct gw_config *cfg,
                     const struct gw_activation_request *a,
                     const char *challenge)
{
    uint8_t want[GW_CREDENTIAL_PROOF_LEN];
    bool ok;

    if (gw_credential_activation_proof(
            cfg->ota.serial_key, strlen(cfg->ota.serial_key), a->serial_number,
            strlen(a->serial_number), challenge, strlen(challenge),
            want) != 0) {
        return false;
    }
    ok = gw_credential_equal(want, sizeof(want), a->hmac, sizeof(a->hmac));
    OPENSSL_cleanse(want, sizeof(want));
    return ok;
}

/*
 * A bound device proving itself again (its check asked, see ota.c's
 * serve_bound()): the challenge of this window or the one before.
 */
static bool reissue_ok(const struct gw_config *cfg, const struct gw_binding *b,
                       const struct gw_activation_request *a)
{
    int64_t ttl = GW__API_OTA_TTL_MS(cfg), window = gw_wall_ms() / ttl;
    char challenge[33];

    /* Only the serial number that bound it: another genuine device's
     * proof says nothing of this one. */
    if (b->serial_number[0] == '\0' ||
        strcmp(b->serial_number, a->serial_number) != 0) {
        return false;
    }
    for (int64_t w = window; w >= window - 1; w--) {
        if (gw__api_ota_reissue_challenge(cfg, b, w, challenge) == 0 &&
            gw_credential_equal(challenge, strlen(challenge), a->challenge,
                                strlen(a->challenge)) &&
            proof_ok(cfg, a, challenge)) {
            return true;
        }
    }
    return false;
}

static void bound(const struct gw_config *cfg,
                  const struct gw_http_api_env *env, struct gw__api_ota *ota,
                  struct gw_http_req *req, const struct gw_binding *b,
                  const struct gw_activation_request *a)
{
    if (!a->proof || cfg->ota.serial_key[0] == '\0') {
        answer(ota, GW_OTA_ACTIVATE_BOUND, req, 200, "bound");
        return;
    }
    if (!may_guess(ota, req)) {
        return;
    }
    if (!reissue_ok(cfg, b, a)) {
        refuse(ota, GW_OTA_ACTIVATE_DENIED, req, 403,
               "the proof does not match the challenge");
        return;
    }
    if (gw_binding_allow_reissue(env->bindings, b->id) != 0) {
        refuse(ota, GW_OTA_ACTIVATE_FAILED, req, 503,
               "the bindings are unavailable");
        return;
    }
    gw_log(GW_LOG_INFO, SUBJECT,
           "%s from %s: proved itself again, its next check gets its "
           "credentials",
           b->client_id, gw_http_req_peer(req));
    answer(ota, GW_OTA_ACTIVATE_BOUND, req, 200, "bound");
}

/* A pending identity with a correct proof binds itself. */
static void self_bind(const struct gw_config *cfg,
                      const struct gw_http_api_env *env,
                      struct gw__api_ota *ota, struct gw_http_req *req,
                      const struct gw_binding_pending *p,
                      const struct gw_activation_request *a)
{
    struct gw_binding b = {.by = GW_BINDING_BY_HMAC};
    int rc;

    if (!may_guess(ota, req)) {
        return;
    }
    if ((p->serial_number[0] != '\0' &&
         strcmp(p->serial_number, a->serial_number) != 0) ||
        !gw_credential_equal(p->challenge, strlen(p->challenge), a->challenge,
                             strlen(a->challenge)) ||
        !proof_ok(cfg, a, p->challenge)) {
        refuse(ota, GW_OTA_ACTIVATE_DENIED, req, 403,
               "the proof does not match the challenge");
        return;
    }
    rc = gw__api_binding_from_pending(cfg, p, &b);
    if (rc == 0) {
        memcpy(b.serial_number, a->serial_number, sizeof(b.serial_number));
        b.bound_ms = gw_wall_ms();
        rc = gw_binding_bind(env->bindings, &b);
    }
    if (rc == GW_EEXIST) {
        /* Bound meanwhile (another instance), or its serial number binds
         * another identity already: one device, one binding. */
        struct gw_binding known;
        if (gw_binding_find(env->bindings, p->mac, p->uuid, &known) == 0) {
            answer(ota, GW_OTA_ACTIVATE_BOUND, req, 200, "bound");
        } else {
            refuse(ota, GW_OTA_ACTIVATE_DENIED, req, 403,
                   "this serial number is bound to another device");
        }
        return;
    }
    if (rc != 0) {
        refuse(ota, GW_OTA_ACTIVATE_FAILED, req, 503,
               "the bindings are unavailable");
        return;
    }
    gw_log(GW_LOG_INFO, SUBJECT,
           "%s from %s: bound by its serial number's proof (binding %" PRId64
           ", serial %s)",
           b.client_id, gw_http_req_peer(req), b.id, b.serial_number);
    answer(ota, GW_OTA_ACTIVATE_BOUND, req, 200, "bound");
}

void gw__api_ota_activate(const struct gw_http_api_env *env,
                          struct gw__api_ota *ota, struct gw_http_req *req)
{
    const struct gw_config *cfg = gw_config_live_get(env->config);
    struct gw_ota_headers h = {
        .device_id = gw_http_req_header(req, "device-id"),
        .client_id = gw_http_req_header(req, "client-id"),
    };
    struct gw_activation_request a;
    struct gw_binding_pending p;
    struct gw_ota_request r;
    struct gw_binding b;
    const char *why = NULL, *body;
    size_t len;
    int rc;

    if (cfg->ota.activation == GW_OTA_ACTIVATION_OFF || env->bindings == NULL) {
        refuse(ota, GW_OTA_ACTIVATE_UNKNOWN, req, 404,
               "activation is off: ota.activation");
        return;
    }
    body = gw_http_req_body(req, &len);
    if (gw_ota_request_parse(&h, NULL, 0, &r, &why) != 0 ||
        gw_activation_request_parse(body, len, &a, &why) != 0) {
        refuse(ota, GW_OTA_ACTIVATE_MALFORMED, req, 400, why);
        return;
    }
    rc = gw_binding_find(env->bindings, r.mac, r.uuid, &b);
    if (rc == 0) {
        bound(cfg, env, ota, req, &b, &a);
        return;
    }
    if (rc == GW_ENOENT) {
        rc = gw_binding_pending_find(env->bindings, r.mac, r.uuid, gw_wall_ms(),
                                     &p);
    }
    if (rc == GW_ENOENT) {
        refuse(ota, GW_OTA_ACTIVATE_UNKNOWN, req, 404,
               "no activation is pending for this device: check again");
    } else if (rc != 0) {
        refuse(ota, GW_OTA_ACTIVATE_FAILED, req, 503,
               "the bindings are unavailable");
    } else if (a.proof && cfg->ota.serial_key[0] != '\0') {
        self_bind(cfg, env, ota, req, &p, &a);
    } else {
        /* The operator binds it by its code (or no fleet key is set). */
        answer(ota, GW_OTA_ACTIVATE_PENDING, req, 202, "pending");
    }
}
