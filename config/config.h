/*
 * The gateway's configuration (docs/architecture.md section 5): a JSON file,
 * loaded parse -> validate -> apply into one plain struct. Every key is
 * declared once, in config_schema.c, with its type, default, range and whether
 * a SIGHUP reload may change it.
 */
#ifndef GW_CONFIG_H
#define GW_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/audio_frame.h"
#include "common/error.h"
#include "common/log.h"

/* How the gateway authenticates its WebSocket to a backend. */
#define GW_AUTH_SCHEME_MAP(XX)                                                 \
    XX(NONE, "none")                 /* no authorization header */             \
    XX(BEARER, "bearer")             /* static "Bearer <token>" */             \
    XX(XIAOZHI_HMAC, "xiaozhi-hmac") /* "Bearer <sig>.<ts>" with secret */

enum gw_auth_scheme {
#define XX(name, _) GW_AUTH_##name,
    GW_AUTH_SCHEME_MAP(XX)
#undef XX
};

/* How a route chooses among its backends (gateway/backend/backend_pool.c). */
#define GW_ROUTE_STRATEGY_MAP(XX)                                              \
    XX(ORDERED, "ordered")   /* the first eligible, in the listed order */     \
    XX(WEIGHTED, "weighted") /* at random, in proportion to weight */          \
    XX(LEAST, "least")       /* fewest active sessions per weight */           \
    XX(STICKY, "sticky")     /* by client id (rendezvous hashing) */

/* cluster.mode: one instance alone, or owners by rendezvous hashing. */
enum gw_cluster_mode {
    GW_CLUSTER_MODE_OFF,
    GW_CLUSTER_MODE_HASH,
    GW_CLUSTER_MODE_SHARED, /* the broker's shared subscription picks */
};

/* ota.activation: whether a device must be bound before it gets
 * credentials (docs/protocol.md section 9). */
enum gw_ota_activation {
    GW_OTA_ACTIVATION_ON,
    GW_OTA_ACTIVATION_OFF, /* lab: credentials to every check */
};

/* bindings.store: where the device bindings live (gateway/binding/). */
enum gw_bindings_store {
    GW_BINDINGS_SQLITE,     /* one file, one instance */
    GW_BINDINGS_POSTGRESQL, /* shared by several instances */
};

enum gw_route_strategy {
#define XX(name, _) GW_STRATEGY_##name,
    GW_ROUTE_STRATEGY_MAP(XX)
#undef XX
};

/* One extra request header of a backend's upgrade (docs/protocol.md 6.2). */
struct gw_header {
    char *name;  /* an RFC 7230 token, as written */
    char *value; /* printable; a secret: masked in dumps, never logged */
};

/* Bounds on backends[].headers, so that the upgrade request stays small. */
#define GW_HEADERS_MAX       16
#define GW_HEADER_NAME_MAX   64
#define GW_HEADER_VALUE_MAX  1024
#define GW_HEADERS_TOTAL_MAX 2048 /* names and values together */

struct gw_backend_config {
    char *name;              /* unique, referenced by routes */
    char *url;               /* ws:// or wss://, used verbatim */
    enum gw_framing framing; /* binary audio framing */
    struct {
        enum gw_auth_scheme scheme;
        char *token;  /* GW_AUTH_BEARER */
        char *secret; /* GW_AUTH_XIAOZHI_HMAC */
    } auth;
    char *ca_file;          /* extra CA for wss:// ("" = system store) */
    int connect_timeout_ms; /* TCP + TLS + upgrade */
    int weight;             /* share under weighted, least and sticky */
    int max_sessions;       /* sessions at once; 0: no limit */
    /* pcm16: downlink PCM rate when the backend hello names none */
    int pcm_sample_rate;
    /* Extra upgrade headers, in file order (docs/protocol.md 6.2). */
    struct gw_header *headers;
    size_t n_headers;
};

/*
 * A route matches a device when every non-empty list matches (an empty
 * match matches everything); within a list any entry may match.
 */
struct gw_route_config {
    char **groups; /* client id part 1 */
    size_t n_groups;
    char **macs; /* "aa:bb:cc:dd:ee:ff", lowercase */
    size_t n_macs;
    char **client_ids; /* full MQTT client ids */
    size_t n_client_ids;
    char **backends; /* names: the route's pool */
    size_t n_backends;
    size_t *backend_index; /* resolved indices into gw_config.backends */
    enum gw_route_strategy strategy;
};

/*
 * An MCP server devices may call by name (docs/protocol.md section 7,
 * outbound addressing). allow matches devices like a route's match.
 */
struct gw_mcp_server_config {
    char *name; /* unique, the device's "endpoint" */
    char *url;  /* http:// or https://, the Streamable HTTP endpoint */
    struct {
        enum gw_auth_scheme scheme; /* none or bearer */
        char *token;                /* GW_AUTH_BEARER */
    } auth;
    char *ca_file;       /* extra CA for https:// ("" = system store) */
    int timeout_ms;      /* per request, initialize included */
    int max_connections; /* transfers to it open at once, all devices */
    struct {
        char **groups;
        size_t n_groups;
        char **macs;
        size_t n_macs;
        char **client_ids;
        size_t n_client_ids;
    } allow;
};

struct gw_config {
    char *source; /* file name the config came from, for messages */
    char *instance;
    struct {
        char *host;
        int port;
        char *client_id;
        char *username;
        char *password;
        int keepalive_s;
        int max_packet_bytes; /* the broker's max_packet_size */
        struct {
            bool enabled;
            char *ca_file;
            char *cert_file;
            char *key_file;
        } tls;
        char *up_topic;        /* with one '+' level for the client id */
        char *down_topic;      /* with "{client_id}" */
        char *presence_topic;  /* with one '+' level for the client id */
        char *status_topic;    /* the gateway's own online/offline, or "" */
        int presence_grace_ms; /* unconfirmed after link-up -> offline */
    } mqtt;
    struct {
        char *bind;
        int port;
        char *public_host; /* what devices are told in the hello */
        int public_port;
        int doctor_after_s; /* the UDP path doctor's look; 0: off */
    } udp;
    struct gw_backend_config *backends;
    size_t n_backends;
    struct gw_route_config *routes;
    size_t n_routes;
    struct {
        char *listen;
        int port;               /* 0 disables the HTTP API */
        char *token;            /* bearer for /api/devices, /metrics, /mcp */
        char *manager_key;      /* daily token key of the manager-api routes */
        char **allowed_origins; /* besides localhost ones */
        size_t n_allowed_origins;
        char **allowed_hosts; /* Host names besides local ones and listen */
        size_t n_allowed_hosts;
        int max_body_bytes;
        int max_connections;             /* open at once */
        int max_connections_per_address; /* from one client address */
        /* The operator page's files, served at /ui/; "" = off. */
        char *ui_dir;
        int api_timeout_ms;        /* device requests of the API's routes */
        int broadcast_max_devices; /* targets of one POST /api/broadcast */
    } http;
    struct {
        bool discover;               /* run each device's MCP client */
        int call_timeout_ms;         /* default for requests to a device */
        int max_tools;               /* cap on one device's tool cache */
        int max_pending;             /* requests waiting on one device */
        int discover_concurrency;    /* discoveries in flight at once */
        int discover_retries;        /* of a failed discovery, 0: none */
        int discover_retry_ms;       /* the first retry's delay, doubling */
        int discover_retry_max_ms;   /* to this cap */
        bool expose_user_tools;      /* to the backend and AI clients */
        int session_idle_timeout_ms; /* MCP server sessions */
        int max_sessions;            /* MCP server sessions */
        int max_list_items;          /* per catalog list of one device */
        int max_resource_bytes;      /* one resources/read's contents */
        int task_result_timeout_ms;  /* tasks/result waiting */
        int max_device_requests;     /* device -> client requests waiting */
        int device_request_timeout_ms;
        int outbound_max_pending;        /* per device, to MCP servers */
        int outbound_max_response_bytes; /* one answer of an MCP server */
        int outbound_session_idle_ms;    /* then the session is DELETEd */
        struct {
            struct {
                char *url;   /* "" = none sent */
                char *token; /* secret: never logged */
            } vision;
        } client_capabilities; /* in the gateway's own initialize */
    } mcp;
    struct gw_mcp_server_config *mcp_servers;
    size_t n_mcp_servers;
    struct {
        int max_sessions;
        int backend_hello_timeout_ms;
        int failover_budget_ms; /* all attempts of one device hello */
        int udp_idle_timeout_ms;
        int call_ring_timeout_ms; /* a device call unanswered this long ends */
        int max_message_bytes;    /* a device's message (uplink) */
        int max_downlink_bytes;   /* a backend's or the API's, to a device */
        int tts_start_guard_ms;   /* downlink held after a tts start */
        int hello_burst;          /* hellos one device may send at once */
        int hello_per_minute;     /* and then on average */
        int outbox_messages;      /* device messages held while the broker */
        int outbox_bytes;         /* is away, at most this many and bytes, */
        int outbox_age_ms;        /* each for at most this long */
    } limits;
    struct {
        int backoff_ms;       /* out of rotation after a first failure, */
        int backoff_max_ms;   /* doubling with each further one up to this */
        int ping_interval_s;  /* idle backend connections pinged; 0: off */
        int probe_interval_s; /* upgrade-and-close probes; 0: off */
    } health;
    /* POST /xiaozhi/ota/: MQTT credentials for devices (gateway/api/ota.c). */
    struct {
        bool enabled;
        char *mqtt_endpoint; /* "host[:port]" devices connect to */
        char *device_key;    /* the broker plugin's device_key; secret */
        char *group;         /* client id part 1; "{board}" is replaced */
        char *publish_topic; /* the plugin's device_topic */
        int keepalive_s;
        int timezone_offset_min; /* server_time.timezone_offset */
        struct {
            char *version; /* "" : tell each device its own version */
            char *url;
            bool force;
        } firmware;
        enum gw_ota_activation activation;
        int activation_ttl_s;     /* a pending activation's code lives */
        char *activation_message; /* shown with the code */
        char *serial_key;         /* device keys by serial; secret */
        char *revoke_topic;       /* unbindings to the broker plugin */
    } ota;
    /* The device bindings store (gateway/binding/binding.h). */
    struct {
        enum gw_bindings_store store;
        char *path;     /* sqlite: the database file */
        char *conninfo; /* postgresql: a libpq connection string; secret */
    } bindings;
    struct {
        enum gw_log_level level;
        enum gw_log_format format;
    } log;
    struct {
        char *instance; /* the name among instances; "": mqtt.client_id */
        enum gw_cluster_mode mode;
        char *topic_prefix; /* instance records: <prefix>/<name> */
        char *share_group;  /* mode shared: $share/<group>/<up topic> */
        int drain_deadline_s;
    } cluster;
};

/* Larger files are refused before parsing. */
#define GW_CONFIG_MAX_BYTES (1024 * 1024)

/*
 * Loads and validates a config. On success *out owns a new config (free
 * with gw_config_destroy). On failure returns GW_ECONFIG (or GW_ENOMEM /
 * a negative errno for an unreadable file) and writes one message per line
 * to err (truncated to errlen): "FILE:LINE:COL: reason" for syntax errors,
 * "FILE: key.path: reason" for the rest, e.g.
 *   "gw.json: backends[1].url: scheme must be ws:// or wss://".
 * Up to 20 messages are written; checks that span keys (backend names,
 * route targets, auth secrets, readable files) run once every key is
 * well-formed. Column numbers count characters, starting at 1.
 *
 * After a successful load every string is non-NULL ("" when absent and
 * without a default), mqtt.client_id defaults to "hybridgw-<instance>",
 * udp.public_port 0 becomes udp.port, routes default to one catch-all route
 * to the first backend, and every route's backend_index is resolved. File
 * paths (tls, ca_file) are relative to the working directory and must be
 * readable. The schema itself (keys, defaults, ranges, which keys need a
 * restart) is the table in config_schema.c.
 */
GW_MUST_CHECK int gw_config_load_file(const char *path, struct gw_config **out,
                                      char *err, size_t errlen);

/* As above, from memory; name stands in for the file name in messages. */
GW_MUST_CHECK int gw_config_load_string(const char *text, size_t len,
                                        const char *name,
                                        struct gw_config **out, char *err,
                                        size_t errlen);

void gw_config_destroy(struct gw_config *cfg);

/*
 * Called once per restart-only key whose value differs between a running
 * config and a reloaded one, with its path ("udp.port").
 */
typedef void (*gw_config_change_cb)(const char *path, void *arg);

/* Returns how many restart-only keys differ; cb may be NULL. */
size_t gw_config_restart_changes(const struct gw_config *running,
                                 const struct gw_config *loaded,
                                 gw_config_change_cb cb, void *arg);

/*
 * The effective config as indented JSON, every key present, in a string
 * the caller frees with free(). Secrets (passwords, tokens) print as
 * "********" unless secrets is true; with secrets, loading the output
 * gives back an equal config. Returns 0 or GW_ENOMEM.
 */
GW_MUST_CHECK int gw_config_dump(const struct gw_config *cfg, bool secrets,
                                 char **out);

/*
 * Makes a reloaded config keep the running values of every restart-only
 * key (swapping them with running's, which the caller then releases).
 * Call gw_config_restart_changes first to report them. Returns the count.
 */
size_t gw_config_keep_restart_values(struct gw_config *running,
                                     struct gw_config *loaded);

/*
 * Why a backends[].headers entry is refused, or NULL: name not an RFC
 * 7230 token or too long, value with a control character (CR, LF, NUL,
 * ...) or non-ASCII byte or too long, or a name the gateway sets itself
 * (Host, Connection, Upgrade, Sec-WebSocket-*, Content-Length,
 * Transfer-Encoding, Device-Id, Client-Id, Protocol-Version,
 * X-Forwarded-For, and Authorization unless scheme is none). Names are
 * compared without case (config_backend.c).
 */
const char *gw_config_header_check(const char *name, const char *value,
                                   enum gw_auth_scheme scheme);

/*
 * Calls cb once per thing in a loaded config that is valid but likely a
 * mistake, with the key path and a sentence: a v2 backend whose url does
 * not end with ?from=mqtt_gateway (xiaozhi-esp32-server then sends bare
 * Opus, which v2 cannot unframe). Returns how many (config_backend.c).
 */
typedef void (*gw_config_warn_cb)(const char *path, const char *text,
                                  void *arg);
size_t gw_config_warnings(const struct gw_config *cfg, gw_config_warn_cb cb,
                          void *arg);

/* Name tables shared with the code that prints configs. */
const char *gw_framing_name(enum gw_framing framing);
const char *gw_auth_scheme_name(enum gw_auth_scheme scheme);
const char *gw_route_strategy_name(enum gw_route_strategy strategy);

#endif /* GW_CONFIG_H */
