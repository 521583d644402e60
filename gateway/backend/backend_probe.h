/*
 * The active probe of backends (docs/protocol.md section 6.1): every
 * health.probe_interval_s each backend in rotation gets a WebSocket
 * upgrade that is closed at once, without a hello. A probe that fails
 * (connect, TLS, refused upgrade) takes the backend out of rotation as a
 * failed session would, so a dead backend is caught before a device
 * meets it. Backends out of rotation are left to their trial session.
 */
#ifndef GW_BACKEND_PROBE_H
#define GW_BACKEND_PROBE_H

#include <uv.h>

#include "common/error.h"
#include "gateway/backend/backend_pool.h"
#include "gateway/backend/backend_ws.h"
#include "gateway/core/config_hold.h"

struct gw_backend_probe;

/* Starts its timer (it checks the live config each second). Returns 0
 * or GW_ENOMEM. */
GW_MUST_CHECK int gw_backend_probe_start(uv_loop_t *loop,
                                         const struct gw_config_live *config,
                                         struct gw_backend_ws *bws,
                                         struct gw_backend_pool *pool,
                                         struct gw_backend_probe **out);

/* Stops it: probes under way are closed; cb runs once the timer and
 * every probe connection are gone, then the probe is freed. */
void gw_backend_probe_close(struct gw_backend_probe *p, void (*cb)(void *arg),
                            void *arg);

#endif /* GW_BACKEND_PROBE_H */
