/*
 * The broker plugin's decisions: auth outcome per CONNECT, the ACL table,
 * where publishes go, per-device topics and presence payloads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "broker/policy.h"
#include "broker/revoked.h"
#include "codec/client_id.h"
#include "codec/device_username.h"
#include "crypto/credential.h"

#define KEY  "k3y"
#define DEV  "GID_test@@@a0_85_e3_f4_49_34@@@0f8e-uuid"
#define DEV2 "GID_test@@@a0_85_e3_f4_49_35@@@other"
#define OLD  "GID_test@@@a0_85_e3_f4_49_36"
#define USER "eyJpcCI6IjEyNy4wLjAuMSJ9"

static int setup(void **state)
{
    static struct gw_broker_options o;
    char err[256];

    memset(&o, 0, sizeof(o));
    if (gw_broker_options_set(&o, "device_key", KEY, err, sizeof(err)) != 0 ||
        gw_broker_options_set(&o, "gateway_username", "gw", err, sizeof(err)) !=
            0 ||
        gw_broker_options_set(&o, "gateway_password", "gwpass", err,
                              sizeof(err)) != 0 ||
        gw_broker_options_check(&o, err, sizeof(err)) != 0) {
        return -1;
    }
    *state = &o;
    return 0;
}

static int teardown(void **state)
{
    gw_broker_options_free(*state);
    return 0;
}

/* The password the OTA server would issue. */
static const char *password(const char *key, const char *id, const char *user)
{
    static char out[GW_CREDENTIAL_PASSWORD_LEN + 1];

    assert_int_equal(gw_credential_password_make(key, strlen(key), id,
                                                 strlen(id), user, strlen(user),
                                                 out, sizeof(out)),
                     0);
    return out;
}

/* A CONNECT with nothing revoked. */
static enum gw_broker_auth auth(const struct gw_broker_options *o,
                                const char *id, const char *user,
                                const char *pw)
{
    uint64_t binding = 99;
    enum gw_broker_auth a =
        gw_broker_auth_check(o, NULL, id, user, pw, &binding);

    if (a != GW_BROKER_AUTH_DEVICE) {
        assert_int_equal(binding, 0);
    }
    return a;
}

/* The username the OTA endpoint makes for binding b (0: lab). */
static const char *username(uint64_t b)
{
    static char out[GW_DEVICE_USERNAME_MAX + 1];

    assert_true(gw_device_username_make("127.0.0.1", b, out, sizeof(out)) > 0);
    return out;
}

static void test_auth(void **state)
{
    const struct gw_broker_options *o = *state;
    char long_id[GW_CLIENT_ID_MAX + 8];
    char pw[GW_CREDENTIAL_PASSWORD_LEN + 1];

    memset(long_id, 'a', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    strcpy(pw, password(KEY, DEV, USER));

    /* The gateway account: any client id, username decides. */
    assert_int_equal(auth(o, "hybridgw-1", "gw", "gwpass"),
                     GW_BROKER_AUTH_GATEWAY);
    assert_int_equal(auth(o, "a/b+#", "gw", "gwpass"), GW_BROKER_AUTH_GATEWAY);
    assert_int_equal(auth(o, "hybridgw-1", "gw", "gwpas"),
                     GW_BROKER_AUTH_BAD_GATEWAY_PASSWORD);
    assert_int_equal(auth(o, "hybridgw-1", "gw", NULL),
                     GW_BROKER_AUTH_NO_PASSWORD);
    /* A device password never opens the gateway account. */
    assert_int_equal(auth(o, DEV, "gw", password(KEY, DEV, "gw")),
                     GW_BROKER_AUTH_BAD_GATEWAY_PASSWORD);

    /* Devices. */
    assert_int_equal(auth(o, DEV, USER, pw), GW_BROKER_AUTH_DEVICE);
    assert_int_equal(auth(o, OLD, USER, password(KEY, OLD, USER)),
                     GW_BROKER_AUTH_DEVICE);
    assert_int_equal(auth(o, DEV, NULL, password(KEY, DEV, "")),
                     GW_BROKER_AUTH_DEVICE);
    assert_int_equal(auth(o, DEV, USER, NULL), GW_BROKER_AUTH_NO_PASSWORD);
    assert_int_equal(auth(o, DEV, "other", pw), GW_BROKER_AUTH_BAD_PASSWORD);
    assert_int_equal(auth(o, DEV2, USER, pw), GW_BROKER_AUTH_BAD_PASSWORD);
    assert_int_equal(auth(o, DEV, USER, password("other", DEV, USER)),
                     GW_BROKER_AUTH_BAD_PASSWORD);
    assert_int_equal(auth(o, DEV, USER, ""), GW_BROKER_AUTH_BAD_PASSWORD);
    pw[43] = '\0'; /* one character short */
    assert_int_equal(auth(o, DEV, USER, pw), GW_BROKER_AUTH_BAD_PASSWORD);

    /* Ids: refused before the password is even looked at. */
    const char *unusable[] = {"",
                              "GID/x@@@a0_85_e3_f4_49_34@@@u",
                              "GID@@@a0_85_e3_f4_49_34@@@u+",
                              "GID@@@a0_85_e3_f4_49_34@@@#",
                              long_id,
                              "GID@@@a0_85_e3_f4_49_34@@@u\n"};
    for (size_t i = 0; i < sizeof(unusable) / sizeof(unusable[0]); i++) {
        assert_int_equal(
            auth(o, unusable[i], USER, password(KEY, unusable[i], USER)),
            GW_BROKER_AUTH_UNUSABLE_ID);
    }
    assert_int_equal(auth(o, NULL, USER, "x"), GW_BROKER_AUTH_UNUSABLE_ID);
    const char *not_device[] = {"mosq-abc", "GID@@@zz_85_e3_f4_49_34@@@u",
                                "GID@@@a0_85_e3_f4_49_34@@@", "@@@x"};
    for (size_t i = 0; i < sizeof(not_device) / sizeof(not_device[0]); i++) {
        assert_int_equal(auth(o, not_device[i], USER, NULL),
                         GW_BROKER_AUTH_NOT_DEVICE_ID);
    }
}

/* Device ids in the gateways' group are refused, any case, before the
 * password; a group that merely contains the word is not. */
static void test_auth_reserved_group(void **state)
{
    const struct gw_broker_options *o = *state;
    const char *reserved[] = {"hybridgw@@@a0_85_e3_f4_49_34@@@u",
                              "HybridGW-x@@@a0_85_e3_f4_49_34@@@u",
                              "HYBRIDGW_lab@@@a0_85_e3_f4_49_34"};
    const char *fine[] = {"hybridg@@@a0_85_e3_f4_49_34@@@u",
                          "my-hybridgw@@@a0_85_e3_f4_49_34@@@u"};

    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
        assert_int_equal(
            auth(o, reserved[i], USER, password(KEY, reserved[i], USER)),
            GW_BROKER_AUTH_RESERVED_GROUP);
        assert_int_equal(auth(o, reserved[i], USER, NULL),
                         GW_BROKER_AUTH_RESERVED_GROUP);
    }
    for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++) {
        assert_int_equal(auth(o, fine[i], USER, password(KEY, fine[i], USER)),
                         GW_BROKER_AUTH_DEVICE);
    }
    /* The gateway account keeps any client id. */
    assert_int_equal(
        auth(o, "hybridgw@@@a0_85_e3_f4_49_34@@@u", "gw", "gwpass"),
        GW_BROKER_AUTH_GATEWAY);
    assert_string_equal(gw_broker_auth_text(GW_BROKER_AUTH_RESERVED_GROUP),
                        "client id group reserved for gateways");
}

/* Binding ids against revocations: below the id's "below" is refused. */
static void test_auth_revoked(void **state)
{
    const struct gw_broker_options *o = *state;
    struct gw_broker_revoked *r;
    uint64_t binding;
    char u5[GW_DEVICE_USERNAME_MAX + 1], u6[GW_DEVICE_USERNAME_MAX + 1];
    char pw5[GW_CREDENTIAL_PASSWORD_LEN + 1],
        pw6[GW_CREDENTIAL_PASSWORD_LEN + 1];
    char pw0[GW_CREDENTIAL_PASSWORD_LEN + 1];

    strcpy(u5, username(5));
    strcpy(u6, username(6));
    strcpy(pw5, password(KEY, DEV, u5));
    strcpy(pw6, password(KEY, DEV, u6));
    strcpy(pw0, password(KEY, DEV, USER));
    assert_int_equal(gw_broker_revoked_create(&r), 0);

    /* Nothing revoked: every good password passes, with its binding id. */
    assert_int_equal(gw_broker_auth_check(o, r, DEV, u5, pw5, &binding),
                     GW_BROKER_AUTH_DEVICE);
    assert_int_equal(binding, 5);
    assert_int_equal(gw_broker_auth_check(o, r, DEV, USER, pw0, &binding),
                     GW_BROKER_AUTH_DEVICE);
    assert_int_equal(binding, 0);

    /* Unbinding 5 records below 6. */
    assert_int_equal(gw_broker_revoked_raise(r, DEV, 6), 1);
    const struct {
        const char *user, *pw;
        enum gw_broker_auth want;
        uint64_t binding;
    } cases[] = {
        {u5, pw5, GW_BROKER_AUTH_REVOKED, 0},
        {u6, pw6, GW_BROKER_AUTH_DEVICE, 6},
        {USER, pw0, GW_BROKER_AUTH_REVOKED, 0},    /* lab: no "b" is 0 */
        {u5, pw6, GW_BROKER_AUTH_BAD_PASSWORD, 0}, /* "b" is signed */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        binding = 99;
        assert_int_equal(gw_broker_auth_check(o, r, DEV, cases[i].user,
                                              cases[i].pw, &binding),
                         cases[i].want);
        assert_int_equal(binding, cases[i].binding);
    }
    /* Another id is not touched; the gateway account never. */
    assert_int_equal(
        gw_broker_auth_check(o, r, DEV2, u5, password(KEY, DEV2, u5), &binding),
        GW_BROKER_AUTH_DEVICE);
    assert_int_equal(gw_broker_auth_check(o, r, DEV, "gw", "gwpass", NULL),
                     GW_BROKER_AUTH_GATEWAY);

    /* A "b" that is no id, in a username the key signed, is refused. */
    const char *bad_b[] = {
        "eyJpcCI6IjEyNy4wLjAuMSIsImIiOiI1In0=", /* {"ip":..,"b":"5"} */
        "eyJpcCI6IjEyNy4wLjAuMSIsImIiOjB9",     /* "b":0 */
        "eyJiIjo1LCJiIjo2fQ==",                 /* "b":5,"b":6 */
    };
    for (size_t i = 0; i < sizeof(bad_b) / sizeof(bad_b[0]); i++) {
        assert_int_equal(gw_broker_auth_check(o, r, DEV2, bad_b[i],
                                              password(KEY, DEV2, bad_b[i]),
                                              &binding),
                         GW_BROKER_AUTH_BAD_BINDING);
    }
    assert_string_equal(gw_broker_auth_text(GW_BROKER_AUTH_REVOKED),
                        "credentials revoked (unbound)");
    gw_broker_revoked_destroy(r);
}

static void test_auth_role_and_text(void **state)
{
    (void)state;
    assert_int_equal(gw_broker_auth_role(GW_BROKER_AUTH_GATEWAY),
                     GW_BROKER_ROLE_GATEWAY);
    assert_int_equal(gw_broker_auth_role(GW_BROKER_AUTH_DEVICE),
                     GW_BROKER_ROLE_DEVICE);
    for (int a = GW_BROKER_AUTH_NO_PASSWORD; a <= GW_BROKER_AUTH_REVOKED; a++) {
        assert_int_equal(gw_broker_auth_role(a), GW_BROKER_ROLE_NONE);
        assert_non_null(gw_broker_auth_text(a));
    }
    assert_string_equal(gw_broker_auth_text(GW_BROKER_AUTH_BAD_PASSWORD),
                        "bad password");
    assert_string_equal(gw_broker_auth_text(GW_BROKER_AUTH_NO_PASSWORD),
                        "no password");
    assert_non_null(strstr(gw_broker_auth_text(GW_BROKER_AUTH_UNUSABLE_ID),
                           "unusable client id"));
}

struct acl_case {
    enum gw_broker_role role;
    int access;
    const char *topic;
    bool allowed;
};

#define R  GW_BROKER_ACCESS_READ
#define W  GW_BROKER_ACCESS_WRITE
#define S  GW_BROKER_ACCESS_SUBSCRIBE
#define U  GW_BROKER_ACCESS_UNSUBSCRIBE
#define D  GW_BROKER_ROLE_DEVICE
#define G  GW_BROKER_ROLE_GATEWAY
#define N  GW_BROKER_ROLE_NONE
#define UP "devices/" DEV "/up"
#define DN "devices/" DEV "/down"

static const struct acl_case acl_cases[] = {
    {D, W, "device-server", true},
    {D, W, UP, true},
    {D, R, DN, true},
    {D, S, DN, true},
    {D, U, "devices/#", true},
    {D, W, DN, false},
    {D, R, UP, false},
    {D, S, UP, false},
    {D, W, "devices/" DEV2 "/up", false},
    {D, R, "devices/" DEV2 "/down", false},
    {D, S, "devices/" DEV2 "/down", false},
    {D, S, "devices/+/up", false},
    {D, S, "devices/+/down", false},
    {D, S, "devices/#", false},
    {D, S, "#", false},
    {D, R, "device-server", false},
    {D, S, "device-server", false},
    {D, W, "devices/" DEV "/presence", false},
    {D, W, "devices/" DEV "/up/x", false},
    {D, R, "devices/" DEV "/down/x", false},
    {D, R, "devicesX/" DEV "/down", false},
    {D, R, "devices/" DEV "X/down", false},
    {D, R, "devices/" DEV, false},
    {D, W, "devices/" DEV "/u", false},
    {D, W, "device-server/x", false},
    {D, 0x10, DN, false},
    {G, R, "devices/" DEV "/up", true},
    {G, S, "devices/+/up", true},
    {G, S, "devices/+/presence", true},
    {G, W, "devices/" DEV2 "/down", true},
    {N, W, "device-server", false},
    {N, R, DN, false},
    {N, U, DN, false},
};

static void test_acl_table(void **state)
{
    const struct gw_broker_options *o = *state;

    for (size_t i = 0; i < sizeof(acl_cases) / sizeof(acl_cases[0]); i++) {
        const struct acl_case *c = &acl_cases[i];
        bool got = gw_broker_acl_allows(o, c->role, DEV, c->access, c->topic);
        if (got != c->allowed) {
            fail_msg("case %zu: role %d access %d '%s': got %d", i, c->role,
                     c->access, c->topic, got);
        }
    }
    assert_false(gw_broker_acl_allows(o, D, NULL, W, "device-server"));
    assert_false(gw_broker_acl_allows(o, D, DEV, W, NULL));
}

/* A prefix of several levels and a custom device topic. */
static void test_acl_custom_topics(void **state)
{
    struct gw_broker_options o = {0};
    char err[256];
    (void)state;

    assert_int_equal(gw_broker_options_set(&o, "device_key", "k", err, 256), 0);
    assert_int_equal(
        gw_broker_options_set(&o, "gateway_username", "g", err, 256), 0);
    assert_int_equal(
        gw_broker_options_set(&o, "gateway_password", "p", err, 256), 0);
    assert_int_equal(
        gw_broker_options_set(&o, "topic_prefix", "site/a", err, 256), 0);
    assert_int_equal(gw_broker_options_set(&o, "device_topic", "in", err, 256),
                     0);
    assert_int_equal(gw_broker_options_check(&o, err, 256), 0);
    assert_true(gw_broker_acl_allows(&o, D, "x", W, "in"));
    assert_true(gw_broker_acl_allows(&o, D, "x", W, "site/a/x/up"));
    assert_true(gw_broker_acl_allows(&o, D, "x", S, "site/a/x/down"));
    assert_false(gw_broker_acl_allows(&o, D, "x", W, "device-server"));
    assert_false(gw_broker_acl_allows(&o, D, "x", W, "devices/x/up"));
    assert_false(gw_broker_acl_allows(&o, D, "x", S, "site/x/down"));

    char out[GW_BROKER_TOPIC_MAX + 1];
    assert_int_equal(
        gw_broker_route_publish(&o, D, "x", "in", out, sizeof(out)),
        GW_BROKER_ROUTE_REWRITE);
    assert_string_equal(out, "site/a/x/up");
    assert_int_equal(
        gw_broker_route_publish(&o, G, "gw", "site/a/x/down", out, sizeof(out)),
        GW_BROKER_ROUTE_DIRECT);
    assert_string_equal(out, "x");
    assert_int_equal(gw_broker_route_publish(&o, G, "gw", "devices/x/down", out,
                                             sizeof(out)),
                     GW_BROKER_ROUTE_PASS);
    gw_broker_options_free(&o);
}

/* Options with gateway_status_topic set to status (NULL: not given). */
/* The rest of will_options' options, into o as it is. */
static int will_options_more(struct gw_broker_options *o, char err[256])
{
    assert_int_equal(gw_broker_options_set(o, "device_key", "k", err, 256), 0);
    assert_int_equal(
        gw_broker_options_set(o, "gateway_username", "g", err, 256), 0);
    assert_int_equal(
        gw_broker_options_set(o, "gateway_password", "p", err, 256), 0);
    return gw_broker_options_check(o, err, 256);
}

static int will_options(struct gw_broker_options *o, const char *status,
                        char err[256])
{
    memset(o, 0, sizeof(*o));
    assert_int_equal(gw_broker_options_set(o, "device_key", "k", err, 256), 0);
    assert_int_equal(
        gw_broker_options_set(o, "gateway_username", "g", err, 256), 0);
    assert_int_equal(
        gw_broker_options_set(o, "gateway_password", "p", err, 256), 0);
    if (status != NULL) {
        assert_int_equal(
            gw_broker_options_set(o, "gateway_status_topic", status, err, 256),
            0);
    }
    return gw_broker_options_check(o, err, 256);
}

/* The will of a departed connection: the gateway's, to its status topic
 * alone; a device's never. */
static void test_will(void **state)
{
    struct gw_broker_options o;
    char err[256] = "";
    (void)state;

    assert_int_equal(will_options(&o, "hybridgw/status", err), 0);
    assert_true(gw_broker_will_allows(&o, G, W, "hybridgw/status"));
    assert_false(gw_broker_will_allows(&o, G, W, "hybridgw/status/x"));
    assert_false(gw_broker_will_allows(&o, G, W, "hybridgw/statu"));
    assert_false(gw_broker_will_allows(&o, G, W, "devices/" DEV "/down"));
    assert_false(gw_broker_will_allows(&o, G, R, "hybridgw/status"));
    assert_false(gw_broker_will_allows(&o, G, W, NULL));
    assert_false(gw_broker_will_allows(&o, D, W, "hybridgw/status"));
    assert_false(gw_broker_will_allows(&o, D, W, "devices/" DEV "/up"));
    assert_false(gw_broker_will_allows(&o, D, W, "device-server"));
    assert_false(gw_broker_will_allows(&o, N, W, "hybridgw/status"));
    /* An instance record (cluster.mode hash): one level under the
     * default instances prefix, the gateway's only. */
    assert_true(gw_broker_will_allows(&o, G, W, "hybridgw/instances/gw-a"));
    assert_false(gw_broker_will_allows(&o, G, W, "hybridgw/instances/"));
    assert_false(gw_broker_will_allows(&o, G, W, "hybridgw/instances"));
    assert_false(
        gw_broker_will_allows(&o, G, W, "hybridgw/instances/gw-a/probe"));
    assert_false(gw_broker_will_allows(&o, G, W, "hybridgw/instancesx/gw-a"));
    assert_false(gw_broker_will_allows(&o, D, W, "hybridgw/instances/gw-a"));
    gw_broker_options_free(&o);

    /* Another instances prefix: records pass there, not under the
     * default. */
    memset(&o, 0, sizeof(o));
    assert_int_equal(gw_broker_options_set(&o, "gateway_instances_prefix",
                                           "fleet/gw", err, sizeof(err)),
                     0);
    assert_int_equal(will_options_more(&o, err), 0);
    assert_true(gw_broker_will_allows(&o, G, W, "fleet/gw/gw-a"));
    assert_false(gw_broker_will_allows(&o, G, W, "hybridgw/instances/gw-a"));
    gw_broker_options_free(&o);

    /* Not configured: no will passes, the gateway's neither. */
    assert_int_equal(will_options(&o, NULL, err), 0);
    assert_string_equal(o.gateway_status_topic, "");
    assert_false(gw_broker_will_allows(&o, G, W, "hybridgw/status"));
    assert_false(gw_broker_will_allows(&o, G, W, ""));
    gw_broker_options_free(&o);

    /* In the per-device space it would read as a device's presence. */
    assert_int_equal(will_options(&o, "devices/" DEV "/presence", err),
                     GW_ECONFIG);
    assert_non_null(strstr(err, "gateway_status_topic"));
    gw_broker_options_free(&o);
    assert_int_equal(will_options(&o, "devices", err), GW_ECONFIG);
    gw_broker_options_free(&o);
    assert_int_equal(will_options(&o, "devices2/status", err), 0);
    gw_broker_options_free(&o);
    memset(&o, 0, sizeof(o));
    assert_int_equal(
        gw_broker_options_set(&o, "gateway_status_topic", "gw/+", err, 256),
        GW_EINVAL);
    gw_broker_options_free(&o);
}

static void test_route(void **state)
{
    const struct gw_broker_options *o = *state;
    char out[GW_BROKER_TOPIC_MAX + 1];
    char topic[400];

    assert_int_equal(
        gw_broker_route_publish(o, D, DEV, "device-server", out, sizeof(out)),
        GW_BROKER_ROUTE_REWRITE);
    assert_string_equal(out, UP);
    assert_int_equal(gw_broker_route_publish(o, D, DEV, UP, out, sizeof(out)),
                     GW_BROKER_ROUTE_PASS);
    assert_int_equal(gw_broker_route_publish(o, G, "gw", DN, out, sizeof(out)),
                     GW_BROKER_ROUTE_DIRECT);
    assert_string_equal(out, DEV);
    assert_int_equal(gw_broker_route_publish(o, G, "gw", UP, out, sizeof(out)),
                     GW_BROKER_ROUTE_PASS);
    assert_int_equal(
        gw_broker_route_publish(o, G, "gw", "device-server", out, sizeof(out)),
        GW_BROKER_ROUTE_PASS);
    assert_int_equal(
        gw_broker_route_publish(o, G, "gw", "devices//down", out, sizeof(out)),
        GW_BROKER_ROUTE_PASS);
    assert_int_equal(
        gw_broker_route_publish(o, G, "gw", DN "/x", out, sizeof(out)),
        GW_BROKER_ROUTE_PASS);
    /* A device's down topic published by a device is not a downlink. */
    assert_int_equal(gw_broker_route_publish(o, D, DEV, DN, out, sizeof(out)),
                     GW_BROKER_ROUTE_PASS);
    assert_int_equal(
        gw_broker_route_publish(o, N, DEV, "device-server", out, sizeof(out)),
        GW_BROKER_ROUTE_PASS);
    /* Longer than any device id: nobody to deliver to. */
    memset(topic, 'a', sizeof(topic));
    memcpy(topic, "devices/", 8);
    strcpy(topic + sizeof(topic) - 6, "/down");
    assert_int_equal(
        gw_broker_route_publish(o, G, "gw", topic, out, sizeof(out)),
        GW_BROKER_ROUTE_DROP);
    /* A rewrite that does not fit leaves the publish alone. */
    assert_int_equal(
        gw_broker_route_publish(o, D, DEV, "device-server", out, 10),
        GW_BROKER_ROUTE_PASS);
    /* Revocations: the gateway's are consumed; nobody else may write there. */
    const char *rt = "hybridgw/broker/revoke";
    assert_int_equal(gw_broker_route_publish(o, G, "gw", rt, out, sizeof(out)),
                     GW_BROKER_ROUTE_REVOKE);
    assert_int_equal(gw_broker_route_publish(o, G, "gw",
                                             "hybridgw/broker/revoke/x", out,
                                             sizeof(out)),
                     GW_BROKER_ROUTE_PASS);
    assert_int_equal(gw_broker_route_publish(o, D, DEV, rt, out, sizeof(out)),
                     GW_BROKER_ROUTE_PASS);
    for (int access = 1; access <= 4; access <<= 1) {
        assert_false(gw_broker_acl_allows(o, D, DEV, access, rt));
        assert_false(gw_broker_acl_allows(o, N, DEV, access, rt));
    }
}

static void test_topic_make(void **state)
{
    const struct gw_broker_options *o = *state;
    char out[64];

    assert_int_equal(gw_broker_topic_make(o, "id", "presence", out, 64), 0);
    assert_string_equal(out, "devices/id/presence");
    assert_int_equal(gw_broker_topic_make(o, "id", "up", out, 13), GW_ENOSPC);
    assert_int_equal(gw_broker_topic_make(o, "id", "up", out, 14), 0);
    assert_string_equal(out, "devices/id/up");
}

static void test_presence_format(void **state)
{
    char out[128];
    (void)state;

    int n =
        gw_broker_presence_format(true, "127.0.0.1", 7, 9, out, sizeof(out));
    assert_int_equal(n, (int)strlen(out));
    assert_string_equal(out, "{\"state\":\"online\",\"address\":\"127.0.0.1\","
                             "\"conn\":7,\"run\":9}");
    assert_true(gw_broker_presence_format(false, "ignored", 7, 9, out,
                                          sizeof(out)) > 0);
    assert_string_equal(out, "{\"state\":\"offline\",\"conn\":7,\"run\":9}");
    assert_true(gw_broker_presence_format(true, "::1", 1, 9, out, sizeof(out)) >
                0);
    assert_string_equal(
        out, "{\"state\":\"online\",\"address\":\"::1\",\"conn\":1,\"run\":9}");
    assert_true(gw_broker_presence_format(true, NULL, 2, 9, out, sizeof(out)) >
                0);
    assert_string_equal(
        out, "{\"state\":\"online\",\"address\":\"\",\"conn\":2,\"run\":9}");
    /* Addresses are the broker's text: escaped, never trusted as JSON. */
    assert_true(gw_broker_presence_format(true, "a\"b\\c\n", 3, 9, out,
                                          sizeof(out)) > 0);
    assert_string_equal(out, "{\"state\":\"online\",\"address\":"
                             "\"a\\\"b\\\\c\\u000a\",\"conn\":3,\"run\":9}");
    assert_int_equal(
        gw_broker_presence_format(true, "127.0.0.1", 7, 9, out, 20), GW_ENOSPC);
    assert_int_equal(gw_broker_presence_format(false, NULL, 7, 9, out, 36),
                     GW_ENOSPC);
    assert_int_equal(gw_broker_presence_format(false, NULL, 7, 9, out, 37), 36);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auth),
        cmocka_unit_test(test_auth_reserved_group),
        cmocka_unit_test(test_auth_revoked),
        cmocka_unit_test(test_auth_role_and_text),
        cmocka_unit_test(test_acl_table),
        cmocka_unit_test(test_acl_custom_topics),
        cmocka_unit_test(test_will),
        cmocka_unit_test(test_route),
        cmocka_unit_test(test_topic_make),
        cmocka_unit_test(test_presence_format),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
