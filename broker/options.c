/*
 * plugin_opt_* parsing: one table of names, each value checked when it is
 * given, defaults and required options settled once all are in.
 */
#include "broker/options.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

enum kind {
    SECRET,  /* any non-empty text */
    NAME,    /* any non-empty text */
    TOPIC,   /* a publishable topic: no wildcards */
    PREFIX,  /* a topic without wildcards, '$' start or trailing '/' */
    BYTES,   /* a decimal count 1..GW_BROKER_MAX_MESSAGE_LIMIT */
    BACKLOG, /* "somaxconn" or a decimal count 0..GW_BROKER_BACKLOG_LIMIT */
};

struct option {
    const char *name;
    enum kind kind;
    size_t offset;        /* of the char * in struct gw_broker_options */
    const char *default_; /* NULL: required */
};

#define FIELD(f) offsetof(struct gw_broker_options, f)

static const struct option options[] = {
    {"device_key", SECRET, FIELD(device_key), NULL},
    {"device_topic", TOPIC, FIELD(device_topic),
     GW_BROKER_DEFAULT_DEVICE_TOPIC},
    {"gateway_username", NAME, FIELD(gateway_username), NULL},
    {"gateway_password", SECRET, FIELD(gateway_password), NULL},
    {"topic_prefix", PREFIX, FIELD(topic_prefix),
     GW_BROKER_DEFAULT_TOPIC_PREFIX},
    {"max_message_bytes", BYTES, FIELD(max_message),
     GW_BROKER_DEFAULT_MAX_MESSAGE},
    /* The gateway's mqtt.status_topic; "" lets no gateway will through. */
    {"gateway_status_topic", TOPIC, FIELD(gateway_status_topic), ""},
    /* The gateways' cluster.topic_prefix: each instance's will (its record
     * saying gone) goes to <prefix>/<name>. */
    {"gateway_instances_prefix", TOPIC, FIELD(gateway_instances_prefix),
     "hybridgw/instances"},
    /* The gateway's ota.revoke_topic: its {"revoke":...} messages. */
    {"revoke_topic", PREFIX, FIELD(revoke_topic),
     GW_BROKER_DEFAULT_REVOKE_TOPIC},
    /* The TCP listeners' accept queue; 0 leaves the broker's own. */
    {"listen_backlog", BACKLOG, FIELD(listen_backlog), "somaxconn"},
};

#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

static char **slot(struct gw_broker_options *o, const struct option *opt)
{
    return (char **)(void *)((char *)o + opt->offset);
}

__attribute__((format(printf, 3, 4))) static void say(char *err, size_t cap,
                                                      const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || cap == 0) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

/* NULL if the value is fine, else why it is not. */
static const char *value_problem(enum kind kind, const char *v)
{
    size_t len = strlen(v);

    if (len == 0) {
        return "must not be empty";
    }
    if (kind == SECRET || kind == NAME) {
        return NULL;
    }
    if (kind == BYTES) {
        if (strspn(v, "0123456789") != len || len > 9 || atol(v) < 1 ||
            atol(v) > GW_BROKER_MAX_MESSAGE_LIMIT) {
            return "must be a byte count from 1 to 268435455";
        }
        return NULL;
    }
    if (kind == BACKLOG) {
        if (strcmp(v, "somaxconn") != 0 &&
            (strspn(v, "0123456789") != len || len > 10 ||
             atoll(v) > GW_BROKER_BACKLOG_LIMIT)) {
            return "must be somaxconn or a count from 0 (the broker's own) "
                   "to 2147483647";
        }
        return NULL;
    }
    if (strpbrk(v, "+#") != NULL) {
        return "must not contain the wildcards '+' or '#'";
    }
    if (kind == TOPIC) {
        return len > GW_BROKER_TOPIC_MAX ? "is too long" : NULL;
    }
    if (len > GW_BROKER_PREFIX_MAX) {
        return "is too long";
    }
    if (v[0] == '$') {
        return "must not start with '$' (a broker-reserved topic space)";
    }
    if (v[len - 1] == '/') {
        return "must not end with '/'";
    }
    return NULL;
}

int gw_broker_options_set(struct gw_broker_options *o, const char *key,
                          const char *value, char *err, size_t err_cap)
{
    const struct option *opt = NULL;

    for (size_t i = 0; i < N_OPTIONS; i++) {
        if (strcmp(options[i].name, key) == 0) {
            opt = &options[i];
        }
    }
    if (opt == NULL) {
        say(err, err_cap,
            "unknown option plugin_opt_%s (known: device_key, device_topic, "
            "gateway_username, gateway_password, topic_prefix, "
            "max_message_bytes, gateway_status_topic, "
            "gateway_instances_prefix, revoke_topic, listen_backlog)",
            key);
        return GW_ENOENT;
    }
    char **dst = slot(o, opt);
    if (*dst != NULL) {
        say(err, err_cap, "plugin_opt_%s is given twice", key);
        return GW_EEXIST;
    }
    const char *problem = value_problem(opt->kind, value);
    if (problem != NULL) {
        say(err, err_cap, "plugin_opt_%s %s", key, problem);
        return GW_EINVAL;
    }
    *dst = strdup(value);
    return *dst != NULL ? 0 : GW_ENOMEM;
}

/* True if topic is prefix or one of its sub-topics. */
static bool under(const char *topic, const char *prefix)
{
    size_t n = strlen(prefix);

    return strncmp(topic, prefix, n) == 0 &&
           (topic[n] == '/' || topic[n] == '\0');
}

int gw_broker_options_check(struct gw_broker_options *o, char *err,
                            size_t err_cap)
{
    for (size_t i = 0; i < N_OPTIONS; i++) {
        char **dst = slot(o, &options[i]);
        if (*dst != NULL) {
            continue;
        }
        if (options[i].default_ == NULL) {
            say(err, err_cap, "plugin_opt_%s is required", options[i].name);
            return GW_ECONFIG;
        }
        *dst = strdup(options[i].default_);
        if (*dst == NULL) {
            return GW_ENOMEM;
        }
    }
    o->device_key_len = strlen(o->device_key);
    o->prefix_len = strlen(o->topic_prefix);
    o->max_message_bytes = (size_t)atol(o->max_message);
    o->listen_backlog_n = strcmp(o->listen_backlog, "somaxconn") == 0
                              ? -1
                              : (int)atoll(o->listen_backlog);

    /*
     * Devices may write their device topic: inside the per-device space it
     * would let one device speak as another or fake a downlink.
     */
    if (strncmp(o->device_topic, o->topic_prefix, o->prefix_len) == 0 &&
        (o->device_topic[o->prefix_len] == '/' ||
         o->device_topic[o->prefix_len] == '\0')) {
        say(err, err_cap,
            "plugin_opt_device_topic '%s' must not be under "
            "plugin_opt_topic_prefix '%s'",
            o->device_topic, o->topic_prefix);
        return GW_ECONFIG;
    }
    /*
     * The gateway's will is delivered without the plugin's routing: in the
     * per-device space it would read as a device's presence or downlink.
     */
    if (strncmp(o->gateway_status_topic, o->topic_prefix, o->prefix_len) == 0 &&
        (o->gateway_status_topic[o->prefix_len] == '/' ||
         o->gateway_status_topic[o->prefix_len] == '\0')) {
        say(err, err_cap,
            "plugin_opt_gateway_status_topic '%s' must not be under "
            "plugin_opt_topic_prefix '%s'",
            o->gateway_status_topic, o->topic_prefix);
        return GW_ECONFIG;
    }
    /*
     * Revocations are consumed, never routed: on a topic that devices may
     * write, or that the plugin routes or lets a will through to, they
     * would mean two things at once.
     */
    if (under(o->revoke_topic, o->topic_prefix) ||
        under(o->revoke_topic, o->gateway_instances_prefix) ||
        strcmp(o->revoke_topic, o->device_topic) == 0 ||
        strcmp(o->revoke_topic, o->gateway_status_topic) == 0) {
        say(err, err_cap,
            "plugin_opt_revoke_topic '%s' must differ from "
            "plugin_opt_device_topic and plugin_opt_gateway_status_topic and "
            "not be under plugin_opt_topic_prefix or "
            "plugin_opt_gateway_instances_prefix",
            o->revoke_topic);
        return GW_ECONFIG;
    }
    free(o->down_pattern);
    o->down_pattern = malloc(o->prefix_len + sizeof("/+/down"));
    if (o->down_pattern == NULL) {
        return GW_ENOMEM;
    }
    memcpy(o->down_pattern, o->topic_prefix, o->prefix_len);
    memcpy(o->down_pattern + o->prefix_len, "/+/down", sizeof("/+/down"));
    return 0;
}

void gw_broker_options_free(struct gw_broker_options *o)
{
    if (o->device_key != NULL) {
        OPENSSL_cleanse(o->device_key, strlen(o->device_key));
    }
    if (o->gateway_password != NULL) {
        OPENSSL_cleanse(o->gateway_password, strlen(o->gateway_password));
    }
    for (size_t i = 0; i < N_OPTIONS; i++) {
        free(*slot(o, &options[i]));
    }
    free(o->down_pattern);
    memset(o, 0, sizeof(*o));
}
