/*
 * What every libwebsockets context of ours shares: it runs on the
 * instance's libuv loop, logs through ours, and is torn down in two phases.
 */
#ifndef GW_LWS_UV_H
#define GW_LWS_UV_H

#include <stdbool.h>
#include <stdint.h>

#include <libwebsockets.h>
#include <uv.h>

/*
 * Creates a context on loop. info holds the caller's own settings (zeroed
 * first); this adds the libuv option, the foreign loop, no uid/gid change
 * and pcontext = ctx, and routes lws's warnings and errors to our log.
 * lws's own uv handles carry the context pointer in ->data: keep a copy
 * of *ctx as the tag for the teardown, since lws NULLs *ctx when it frees
 * the context. subject and what ("HTTP") name it in log lines.
 * Returns 0, or GW_ECONFIG (logged).
 */
int gw_lws_uv_create(uv_loop_t *loop, struct lws_context_creation_info *info,
                     const char *subject, const char *what,
                     struct lws_context **ctx);

/*
 * Teardown, first phase: lws starts closing its connections and uv
 * handles. Returns the loop time by which they should be gone.
 */
uint64_t gw_lws_uv_destroy_start(uv_loop_t *loop, struct lws_context *ctx);

/* Whether any of lws's own uv handles (timer, idle) is still open. */
bool gw_lws_uv_handles_left(uv_loop_t *loop, void *ctx_tag);

/*
 * Teardown, second phase, tried once per tick: false while lws's handles
 * are still closing before deadline_ms; true once lws freed the context,
 * or gave up on it at the deadline (logged, the context leaks).
 */
bool gw_lws_uv_destroy_finish(uv_loop_t *loop, struct lws_context **ctx,
                              void *ctx_tag, uint64_t deadline_ms,
                              const char *subject, const char *what);

#endif /* GW_LWS_UV_H */
