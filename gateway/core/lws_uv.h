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
 * One context on the loop and where its teardown stands; embedded in its
 * owner, which reads ctx and leaves the rest to this module.
 */
struct gw_lws_uv {
    uv_loop_t *loop;
    struct lws_context *ctx; /* lws writes NULL here when it frees it */
    /* lws's own uv handles carry the context pointer in ->data: a copy
     * of it finds them after lws has NULLed ctx. */
    void *tag;
    uint64_t deadline_ms; /* teardown: when to stop waiting for them */
    bool destroying;      /* the teardown's first phase is done */
    const char *subject;  /* log prefix */
    const char *what;     /* names the context in log lines ("HTTP") */
};

/*
 * Creates a context on loop. info holds the caller's own settings (zeroed
 * first); this adds the libuv option, the foreign loop, no uid/gid change
 * and pcontext, and routes lws's warnings and errors to our log. subject
 * and what (static strings) name it in log lines. Returns 0, or
 * GW_ECONFIG (logged).
 */
int gw_lws_uv_create(struct gw_lws_uv *lu, uv_loop_t *loop,
                     struct lws_context_creation_info *info,
                     const char *subject, const char *what);

/*
 * Tears the context down, one step a call: call it once a loop tick (from
 * a timer), after the owner has let go of its connections, until it
 * returns true. With a foreign loop lws needs two phases: the first
 * lws_context_destroy() closes its connections and its uv handles, whose
 * close callbacks run on later ticks; once none of those handles is left
 * on the loop, the second frees the context. If they are not gone within
 * a few seconds the context is left to leak (logged) rather than freed
 * under a live handle. True when done: freed, or given up on.
 */
bool gw_lws_uv_teardown(struct gw_lws_uv *lu);

#endif /* GW_LWS_UV_H */
