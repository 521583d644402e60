/*
 * The config loader on arbitrary bytes. A loaded config must hold its
 * invariants and survive dump -> load unchanged; a refused one must say why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_invariants(const struct gw_config *cfg)
{
    if (cfg->n_backends < 1 || cfg->n_routes < 1 || cfg->udp.public_port < 1 ||
        cfg->mqtt.client_id == NULL || *cfg->mqtt.client_id == '\0' ||
        cfg->mqtt.username == NULL) {
        abort();
    }
    for (size_t i = 0; i < cfg->n_backends; i++) {
        if (strncmp(cfg->backends[i].url, "ws", 2) != 0) {
            abort();
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(cfg->backends[i].name, cfg->backends[j].name) == 0) {
                abort();
            }
        }
    }
    for (size_t r = 0; r < cfg->n_routes; r++) {
        const struct gw_route_config *route = &cfg->routes[r];
        if (route->n_backends < 1) {
            abort();
        }
        for (size_t k = 0; k < route->n_backends; k++) {
            size_t b = route->backend_index[k];
            if (b >= cfg->n_backends ||
                strcmp(cfg->backends[b].name, route->backends[k]) != 0) {
                abort();
            }
        }
    }
}

/* The dump of a loaded config loads again, to the same dump. */
static void check_round_trip(const struct gw_config *cfg)
{
    struct gw_config *again = NULL;
    char *once = NULL, *twice = NULL;

    if (gw_config_dump(cfg, true, &once) < 0) {
        return; /* out of memory: nothing to compare */
    }
    if (gw_config_load_string(once, strlen(once), "dump", &again, NULL, 0) !=
            0 ||
        gw_config_restart_changes(cfg, again, NULL, NULL) != 0 ||
        gw_config_dump(again, true, &twice) != 0 || strcmp(once, twice) != 0) {
        abort();
    }
    free(once);
    free(twice);
    gw_config_destroy(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_config *cfg = NULL;
    char err[1024];
    int rc = gw_config_load_string((const char *)data, size, "fuzz.json", &cfg,
                                   err, sizeof(err));

    if (rc != 0) {
        /* refused: no config, and a message that names the file */
        if (cfg != NULL || (rc != GW_ECONFIG && rc != GW_ENOMEM) ||
            strncmp(err, "fuzz.json", 9) != 0 ||
            memchr(err, '\0', sizeof(err)) == NULL) {
            abort();
        }
        return 0;
    }
    check_invariants(cfg);
    check_round_trip(cfg);
    gw_config_destroy(cfg);
    return 0;
}
