/*
 * The provisioning options of hybridgw-sim's `device` (--ota, --mac,
 * --uuid, --serial...): the device's identity, its stored settings (a
 * JSON file standing in for NVS) and the MQTT options they give.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "tools/sim_cli.h"
#include "tools/sim_common.h"
#include "tools/sim_ota.h"

enum {
    P_OTA = 400,
    P_MAC,
    P_UUID,
    P_SERIAL,
    P_SERIAL_KEY,
    P_NVS,
    P_BOARD,
    P_VERSION,
    P_PENDING,
    P_RETRY,
    P_COUNT_
};

static const struct option prov_options[] = {
    {"ota", required_argument, NULL, P_OTA},
    {"mac", required_argument, NULL, P_MAC},
    {"uuid", required_argument, NULL, P_UUID},
    {"serial", required_argument, NULL, P_SERIAL},
    {"serial-key", required_argument, NULL, P_SERIAL_KEY},
    {"nvs", required_argument, NULL, P_NVS},
    {"board", required_argument, NULL, P_BOARD},
    {"firmware-version", required_argument, NULL, P_VERSION},
    {"activate-pending-ms", required_argument, NULL, P_PENDING},
    {"activate-retry-ms", required_argument, NULL, P_RETRY},
};

void gw_sim_prov_defaults(struct gw_sim_prov *p)
{
    memset(p, 0, sizeof(*p));
    p->board = "bread-compact-wifi";
    p->version = "2.4.2";
    p->pending_ms = 3000; /* Application::CheckNewVersion's waits */
    p->retry_ms = 10000;
}

const struct option *gw_sim_prov_options(size_t *n)
{
    *n = sizeof(prov_options) / sizeof(prov_options[0]);
    return prov_options;
}

void gw_sim_prov_usage(FILE *out)
{
    fprintf(
        out,
        "Provisioning (the firmware's OTA check and activation):\n"
        "  --ota URL                POST the check to URL first, activate "
        "as asked,\n"
        "                           then connect with the MQTT settings "
        "stored\n"
        "  --mac MAC                Device-Id (default: stored, else "
        "random)\n"
        "  --uuid UUID              Client-Id (default: stored, else random "
        "v4)\n"
        "  --serial SN              a factory serial number "
        "(Activation-Version 2)\n"
        "  --serial-key SECRET      the fleet secret: device key = "
        "HMAC-SHA256(SECRET, SN)\n"
        "  --nvs FILE               keep the stored settings (and MAC, "
        "uuid) in FILE\n"
        "  --board NAME             User-Agent board (default "
        "bread-compact-wifi)\n"
        "  --firmware-version V     default 2.4.2\n"
        "  --activate-pending-ms N  wait after 202, default 3000\n"
        "  --activate-retry-ms N    wait after another answer, default "
        "10000;\n"
        "                           a failed check waits N, doubling\n");
}

/* 1..max characters of A-Z a-z 0-9 - _ . (nothing to escape anywhere). */
static bool plain(const char *s, size_t max)
{
    size_t n = strlen(s);

    if (n == 0 || n > max) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.')) {
            return false;
        }
    }
    return true;
}

static int bad(const char *name, const char *why, const char *arg)
{
    fprintf(stderr, "hybridgw-sim: --%s: %s, got '%s'\n", name, why, arg);
    return GW_EINVAL;
}

static int ms(const char *name, const char *arg, uint32_t *out)
{
    char *end;
    unsigned long v;

    errno = 0;
    if (arg[0] < '0' || arg[0] > '9' ||
        ((v = strtoul(arg, &end, 10)), *end != '\0') || errno != 0 ||
        v > 3600000) {
        return bad(name, "expected a number in 0..3600000", arg);
    }
    *out = (uint32_t)v;
    return 0;
}

int gw_sim_prov_parse(struct gw_sim_prov *p, int code, const char *arg)
{
    int rc = 0;

    switch (code) {
    case P_OTA:
        if (strlen(arg) < 10 || (strncmp(arg, "http://", 7) != 0 &&
                                 strncmp(arg, "https://", 8) != 0)) {
            /* The firmware refuses a URL under 10 characters. */
            return bad("ota", "expected an http(s) URL", arg);
        }
        p->url = arg;
        break;
    case P_MAC:
        if (gw_sim_ota_mac(arg, p->mac) != 0) {
            return bad("mac", "expected aa:bb:cc:dd:ee:ff", arg);
        }
        p->mac_arg = arg;
        break;
    case P_UUID:
        if (!plain(arg, 64)) {
            return bad("uuid", "expected 1..64 of A-Z a-z 0-9 - _ .", arg);
        }
        p->uuid_arg = arg;
        break;
    case P_SERIAL:
        if (!plain(arg, 32)) {
            return bad("serial", "expected 1..32 of A-Z a-z 0-9 - _ .", arg);
        }
        p->serial = arg;
        break;
    case P_SERIAL_KEY:
        if (arg[0] == '\0') {
            return bad("serial-key", "expected the fleet secret", arg);
        }
        p->serial_key = arg;
        break;
    case P_NVS:
        p->nvs_path = arg;
        break;
    case P_BOARD:
        if (!plain(arg, 48)) {
            return bad("board", "expected 1..48 of A-Z a-z 0-9 - _ .", arg);
        }
        p->board = arg;
        break;
    case P_VERSION:
        if (!plain(arg, 32)) {
            return bad("firmware-version",
                       "expected 1..32 of 0-9 . (and "
                       "letters)",
                       arg);
        }
        p->version = arg;
        break;
    case P_PENDING:
        rc = ms("activate-pending-ms", arg, &p->pending_ms);
        break;
    case P_RETRY:
        rc = ms("activate-retry-ms", arg, &p->retry_ms);
        break;
    default:
        return 0;
    }
    return rc == 0 ? 1 : rc;
}

/* The namespace name of the stored state, made if missing. */
static cJSON *space(cJSON *nvs, const char *name)
{
    cJSON *s = cJSON_GetObjectItemCaseSensitive(nvs, name);

    if (cJSON_IsObject(s)) {
        return s;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(nvs, name);
    return cJSON_AddObjectToObject(nvs, name);
}

static int load_nvs(struct gw_sim_prov *p)
{
    FILE *f;
    char *text = NULL;
    long n;

    if (p->nvs_path != NULL && (f = fopen(p->nvs_path, "rb")) != NULL) {
        if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
            n <= (1 << 20) && fseek(f, 0, SEEK_SET) == 0 &&
            (text = calloc(1, (size_t)n + 1)) != NULL &&
            fread(text, 1, (size_t)n, f) == (size_t)n) {
            p->nvs = cJSON_Parse(text);
        }
        fclose(f);
        free(text);
        if (!cJSON_IsObject(p->nvs)) {
            fprintf(stderr, "hybridgw-sim: --nvs %s: not a JSON object\n",
                    p->nvs_path);
            return GW_EINVAL;
        }
    } else if (p->nvs_path != NULL && errno != ENOENT) {
        perror(p->nvs_path);
        return GW_EINVAL;
    }
    if (p->nvs == NULL && (p->nvs = cJSON_CreateObject()) == NULL) {
        return GW_ENOMEM;
    }
    return (p->mqtt = space(p->nvs, "mqtt")) != NULL ? 0 : GW_ENOMEM;
}

/* Stores name = value in the namespace ns. */
static int put(cJSON *nvs, const char *ns, const char *name, const char *value)
{
    cJSON *s = space(nvs, ns), *v;

    if (s == NULL || (v = cJSON_CreateString(value)) == NULL) {
        return GW_ENOMEM;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(s, name);
    cJSON_AddItemToObject(s, name, v);
    return 0;
}

/* --mac, else the stored one (the simulator's own "sim" namespace: a real
 * device reads its MAC from eFuse), else a random one, stored. */
static int pick_mac(struct gw_sim_prov *p)
{
    const char *stored =
        gw_sim_ota_stored_string(cJSON_GetObjectItem(p->nvs, "sim"), "mac");
    uint8_t m[6];

    if (p->mac_arg == NULL && stored != NULL &&
        gw_sim_ota_mac(stored, p->mac) == 0) {
        return 0;
    }
    if (p->mac_arg == NULL) {
        if (RAND_bytes(m, sizeof(m)) != 1) {
            return GW_ECRYPTO;
        }
        snprintf(p->mac, sizeof(p->mac), "%02x:%02x:%02x:%02x:%02x:%02x", m[0],
                 m[1], m[2], m[3], m[4], m[5]);
    }
    return put(p->nvs, "sim", "mac", p->mac);
}

/* --uuid, else board.uuid as the firmware keeps it, else a new v4. */
static int pick_uuid(struct gw_sim_prov *p)
{
    const char *stored =
        gw_sim_ota_stored_string(cJSON_GetObjectItem(p->nvs, "board"), "uuid");
    const char *use = p->uuid_arg;

    if (use == NULL && stored != NULL && plain(stored, 64)) {
        use = stored;
    }
    if (use != NULL) {
        snprintf(p->uuid, sizeof(p->uuid), "%s", use);
    } else if (gw_sim_uuid4(p->uuid) != 0) {
        return GW_ECRYPTO;
    }
    return put(p->nvs, "board", "uuid", p->uuid);
}

int gw_sim_prov_prepare(struct gw_sim_prov *p, struct gw_sim_cli *cli)
{
    struct gw_sim_device_options *d = &cli->dev;
    int rc;

    if ((p->serial != NULL) != (p->serial_key != NULL)) {
        fprintf(stderr, "hybridgw-sim: --serial and --serial-key go "
                        "together\n");
        return GW_EINVAL;
    }
    if (p->url == NULL && (p->serial || p->nvs_path)) {
        fprintf(stderr, "hybridgw-sim: --serial and --nvs need --ota\n");
        return GW_EINVAL;
    }
    if (p->url != NULL &&
        (d->client_id || d->username || d->password || d->key)) {
        fprintf(stderr, "hybridgw-sim: --ota: the client id, username and "
                        "password come from the OTA answers\n");
        return GW_EINVAL;
    }
    if (p->url == NULL && p->mac_arg == NULL && p->uuid_arg == NULL) {
        return 0;
    }
    if ((rc = load_nvs(p)) != 0 || (rc = pick_mac(p)) != 0 ||
        (rc = pick_uuid(p)) != 0) {
        return rc;
    }
    if (p->url == NULL) {
        if (d->client_id == NULL) {
            char mac[GW_SIM_MAC_LEN + 1];
            memcpy(mac, p->mac, sizeof(mac));
            for (char *c = mac; *c; c++) {
                *c = *c == ':' ? '_' : *c;
            }
            snprintf(p->client_id, sizeof(p->client_id), "GID_test@@@%s@@@%s",
                     mac, p->uuid);
            d->client_id = p->client_id;
        }
        return 0;
    }
    if (p->serial != NULL &&
        gw_sim_ota_device_key(p->serial_key, p->serial, p->key) != 0) {
        return GW_ECRYPTO;
    }
    p->ota = (struct gw_sim_ota_options){
        .url = p->url,
        .mac = p->mac,
        .uuid = p->uuid,
        .serial = p->serial,
        .key = p->serial ? p->key : NULL,
        .board = p->board,
        .version = p->version,
        .store = p->mqtt,
        .pending_ms = p->pending_ms,
        .retry_ms = p->retry_ms,
        .http_timeout_ms = 15000,
    };
    return 0;
}

/* A stored string into buf ("" when absent), as Settings::GetString. */
static const char *stored(const struct gw_sim_prov *p, const char *key,
                          char *buf, size_t cap)
{
    const char *v = gw_sim_ota_stored_string(p->mqtt, key);

    snprintf(buf, cap, "%s", v ? v : "");
    return buf;
}

int gw_sim_prov_apply(struct gw_sim_prov *p, struct gw_sim_cli *cli, char *why,
                      size_t cap)
{
    struct gw_sim_device_options *d = &cli->dev;
    char endpoint[300];
    int port;

    stored(p, "endpoint", endpoint, sizeof(endpoint));
    if (endpoint[0] == '\0') {
        snprintf(why, cap, "MQTT endpoint is not specified (nothing stored)");
        return GW_EINVAL;
    }
    if (gw_sim_ota_endpoint(endpoint, cli->host, sizeof(cli->host), &port) !=
        0) {
        snprintf(why, cap, "stored endpoint \"%.200s\" is not host[:port]",
                 endpoint);
        return GW_EINVAL;
    }
    d->host = cli->host;
    d->port = port;
    stored(p, "client_id", p->client_id, sizeof(p->client_id));
    stored(p, "username", p->username, sizeof(p->username));
    stored(p, "password", p->password, sizeof(p->password));
    stored(p, "publish_topic", p->publish, sizeof(p->publish));
    if (p->client_id[0] == '\0' || p->publish[0] == '\0') {
        /* Without a publish topic MqttProtocol::SendText sends nothing. */
        snprintf(why, cap, "no %s stored",
                 p->client_id[0] == '\0' ? "client_id" : "publish_topic");
        return GW_EINVAL;
    }
    d->client_id = p->client_id;
    d->username = p->username;
    d->password = p->password[0] ? p->password : NULL;
    d->key = NULL;
    d->publish_topic = p->publish;
    d->keepalive_s = gw_sim_ota_stored_int(p->mqtt, "keepalive", 240);
    if (d->keepalive_s < 0 || d->keepalive_s > 65535) {
        snprintf(why, cap, "stored keepalive %d is out of range",
                 d->keepalive_s);
        return GW_EINVAL;
    }
    return 0;
}

int gw_sim_prov_save(const struct gw_sim_prov *p)
{
    char *text;
    FILE *f;
    int rc = 0;

    if (p->nvs_path == NULL || p->nvs == NULL) {
        return 0;
    }
    if ((text = cJSON_Print(p->nvs)) == NULL) {
        return GW_ENOMEM;
    }
    if ((f = fopen(p->nvs_path, "w")) == NULL || fprintf(f, "%s\n", text) < 0) {
        perror(p->nvs_path);
        rc = GW_EINVAL;
    }
    if (f != NULL && fclose(f) != 0) {
        perror(p->nvs_path);
        rc = GW_EINVAL;
    }
    cJSON_free(text);
    return rc;
}

void gw_sim_prov_free(struct gw_sim_prov *p)
{
    cJSON_Delete(p->nvs);
    p->nvs = p->mqtt = NULL;
}
