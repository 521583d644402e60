/*
 * The plugin's decisions as pure functions: who a connecting client is,
 * what it may read and write, where its publishes go, and the presence
 * payload. No broker calls here, so every rule has a table test.
 */
#ifndef GW_BROKER_POLICY_H
#define GW_BROKER_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/options.h"
#include "broker/revoked.h"
#include "common/error.h"

enum gw_broker_role {
    GW_BROKER_ROLE_NONE,    /* not authenticated by us: may do nothing */
    GW_BROKER_ROLE_DEVICE,  /* a device: its own topics only */
    GW_BROKER_ROLE_GATEWAY, /* the gateway account: everything */
};

/* The outcome of a CONNECT; the refusals each have a log text. */
enum gw_broker_auth {
    GW_BROKER_AUTH_GATEWAY,
    GW_BROKER_AUTH_DEVICE,
    GW_BROKER_AUTH_NO_PASSWORD,
    GW_BROKER_AUTH_BAD_PASSWORD,
    GW_BROKER_AUTH_BAD_GATEWAY_PASSWORD,
    GW_BROKER_AUTH_UNUSABLE_ID,    /* cannot be a topic level */
    GW_BROKER_AUTH_NOT_DEVICE_ID,  /* not GROUP@@@MAC or GROUP@@@MAC@@@UUID */
    GW_BROKER_AUTH_FAILED,         /* the HMAC could not be computed */
    GW_BROKER_AUTH_RESERVED_GROUP, /* a device id in the gateways' group */
    GW_BROKER_AUTH_BAD_BINDING,    /* a username's "b" that is no id */
    GW_BROKER_AUTH_REVOKED,        /* binding id below its id's revocation */
};

/* The same values as mosquitto's MOSQ_ACL_* (the plugin asserts it). */
#define GW_BROKER_ACCESS_READ        0x01
#define GW_BROKER_ACCESS_WRITE       0x02
#define GW_BROKER_ACCESS_SUBSCRIBE   0x04
#define GW_BROKER_ACCESS_UNSUBSCRIBE 0x08

/* What to do with a publish that passed the ACL. */
enum gw_broker_route {
    GW_BROKER_ROUTE_PASS,    /* route it as published */
    GW_BROKER_ROUTE_REWRITE, /* route it on the topic written to out */
    GW_BROKER_ROUTE_DIRECT,  /* deliver to the client id written to out only */
    GW_BROKER_ROUTE_DROP,    /* a downlink no device can receive */
    GW_BROKER_ROUTE_REVOKE,  /* the gateway's revocations: consume it */
};

/*
 * Decides a CONNECT. The gateway account is recognised by its username
 * alone, so a wrong gateway password never falls through to the device
 * rules. Anyone else must present a device client id that can be a topic
 * level, whose group does not start with "hybridgw" (any case: the
 * gateways' prefix), and the xiaozhi password of (client_id, username); a
 * missing username counts as "". Both secrets are compared in constant
 * time. Once the password holds, the username's binding id
 * (gw_device_username_binding; 0 for none) must not be below the id's
 * revocation in revoked (NULL: none); it goes to *binding (may be NULL)
 * for an accepted device, 0 otherwise.
 */
enum gw_broker_auth
gw_broker_auth_check(const struct gw_broker_options *o,
                     const struct gw_broker_revoked *revoked,
                     const char *client_id, const char *username,
                     const char *password, uint64_t *binding);

/* The role an accepted auth gives, GW_BROKER_ROLE_NONE for a refusal. */
enum gw_broker_role gw_broker_auth_role(enum gw_broker_auth a);

/* Short reason for the log ("bad password", ...), never NULL. */
const char *gw_broker_auth_text(enum gw_broker_auth a);

/*
 * One ACL question (access is a single GW_BROKER_ACCESS_* value). A device
 * may write the device topic and <prefix>/<id>/up, read and subscribe to
 * <prefix>/<id>/down only, and always unsubscribe (so never the revoke
 * topic, which the options keep apart from those). The gateway account may
 * do anything; a client without a role nothing.
 */
bool gw_broker_acl_allows(const struct gw_broker_options *o,
                          enum gw_broker_role role, const char *client_id,
                          int access, const char *topic);

/*
 * A will Mosquitto sends after the connection's disconnect event, when
 * the plugin no longer knows the connection: role is what it was. Only
 * the gateway account's will to plugin_opt_gateway_status_topic passes
 * (its offline state after a death without DISCONNECT); a device's will
 * never does, presence already says that it left.
 */
bool gw_broker_will_allows(const struct gw_broker_options *o,
                           enum gw_broker_role role, int access,
                           const char *topic);

/*
 * Routes a publish of client_id (with role) on topic. REWRITE writes the
 * new topic to out, DIRECT the destination client id; out holds
 * GW_BROKER_TOPIC_MAX + 1 bytes. REVOKE: the gateway account's publish on
 * plugin_opt_revoke_topic, for the plugin to read and never deliver.
 */
enum gw_broker_route gw_broker_route_publish(const struct gw_broker_options *o,
                                             enum gw_broker_role role,
                                             const char *client_id,
                                             const char *topic, char *out,
                                             size_t cap);

/*
 * "<prefix>/<client_id>/<channel>", channel being "up", "down" or
 * "presence". Returns 0 or GW_ENOSPC.
 */
GW_MUST_CHECK int gw_broker_topic_make(const struct gw_broker_options *o,
                                       const char *client_id,
                                       const char *channel, char *out,
                                       size_t cap);

/*
 * The presence payload: {"state":"online","address":"<ip>","conn":N,
 * "run":R} or {"state":"offline","conn":N,"run":R}. conn numbers the
 * broker's accepted connections, so a reader can tell an old connection's
 * news from a new one's; run names the broker's run (conn restarts with
 * it), so a retained message of a run before a restart is told from one of
 * this run. Returns the length written (NUL excluded) or GW_ENOSPC.
 */
GW_MUST_CHECK int gw_broker_presence_format(bool online, const char *address,
                                            uint64_t conn, uint64_t run,
                                            char *out, size_t cap);

#endif /* GW_BROKER_POLICY_H */
