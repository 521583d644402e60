/*
 * The glue between libwebsockets 4.1 and the instance's libuv loop, shared
 * by the backend WebSocket client and the HTTP server.
 */
#include "gateway/lws_uv.h"

#include <string.h>

#include "common/error.h"
#include "common/log.h"

#define DESTROY_WAIT_MS 5000 /* for lws's own handles to close */

/*
 * lws's warnings and errors go to our log as warnings (its "errors" are
 * mostly one peer's trouble, e.g. a certificate that does not verify);
 * its chatter stays off.
 */
static void lws_log_line(int level, const char *line)
{
    char buf[256];
    size_t n = strnlen(line, sizeof(buf) - 1);

    memcpy(buf, line, n);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) {
        n--;
    }
    buf[n] = '\0';
    (void)level;
    gw_log(GW_LOG_WARN, "lws", "%s", buf);
}

int gw_lws_uv_create(uv_loop_t *loop, struct lws_context_creation_info *info,
                     const char *subject, const char *what,
                     struct lws_context **ctx)
{
    /* lws reads the loop only while it creates the context. */
    void *loops[1] = {loop};

    lws_set_log_level(LLL_ERR | LLL_WARN, lws_log_line);
    info->options |= LWS_SERVER_OPTION_LIBUV;
    info->foreign_loops = loops;
    info->gid = -1;
    info->uid = -1;
    info->pcontext = ctx;
    *ctx = lws_create_context(info);
    if (*ctx == NULL) {
        gw_log(GW_LOG_ERROR, subject,
               "cannot create the %s context (is the libuv event "
               "library of libwebsockets installed?)",
               what);
        return GW_ECONFIG;
    }
    return 0;
}

uint64_t gw_lws_uv_destroy_start(uv_loop_t *loop, struct lws_context *ctx)
{
    uint64_t deadline_ms = uv_now(loop) + DESTROY_WAIT_MS;

    lws_context_destroy(ctx);
    return deadline_ms;
}

static void find_tagged(uv_handle_t *handle, void *arg)
{
    void **tag = arg;

    if (handle->data == *tag) {
        *tag = NULL;
    }
}

bool gw_lws_uv_handles_left(uv_loop_t *loop, void *ctx_tag)
{
    void *tag = ctx_tag;

    uv_walk(loop, find_tagged, &tag);
    return tag == NULL;
}

bool gw_lws_uv_destroy_finish(uv_loop_t *loop, struct lws_context **ctx,
                              void *ctx_tag, uint64_t deadline_ms,
                              const char *subject, const char *what)
{
    if (gw_lws_uv_handles_left(loop, ctx_tag)) {
        if (uv_now(loop) < deadline_ms) {
            return false;
        }
        gw_log(GW_LOG_ERROR, subject,
               "%s context did not finish closing; leaking it", what);
    } else if (*ctx != NULL) {
        lws_context_destroy(*ctx);
    }
    return true;
}
