/*
 * The glue between libwebsockets 4.1 and the instance's libuv loop, shared
 * by the backend WebSocket client and the HTTP server.
 */
#include "gateway/core/lws_uv.h"

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

int gw_lws_uv_create(struct gw_lws_uv *lu, uv_loop_t *loop,
                     struct lws_context_creation_info *info,
                     const char *subject, const char *what)
{
    /* lws reads the loop only while it creates the context. */
    void *loops[1] = {loop};

    memset(lu, 0, sizeof(*lu));
    lu->loop = loop;
    lu->subject = subject;
    lu->what = what;
    lws_set_log_level(LLL_ERR | LLL_WARN, lws_log_line);
    info->options |= LWS_SERVER_OPTION_LIBUV;
    info->foreign_loops = loops;
    info->gid = -1;
    info->uid = -1;
    info->pcontext = &lu->ctx;
    lu->ctx = lws_create_context(info);
    if (lu->ctx == NULL) {
        gw_log(GW_LOG_ERROR, subject,
               "cannot create the %s context (is the libuv event "
               "library of libwebsockets installed?)",
               what);
        return GW_ECONFIG;
    }
    lu->tag = lu->ctx;
    return 0;
}

static void find_tagged(uv_handle_t *handle, void *arg)
{
    void **tag = arg;

    if (handle->data == *tag) {
        *tag = NULL;
    }
}

/* Whether any of lws's own uv handles (timer, idle) is still open. */
static bool handles_left(const struct gw_lws_uv *lu)
{
    void *tag = lu->tag;

    uv_walk(lu->loop, find_tagged, &tag);
    return tag == NULL;
}

bool gw_lws_uv_teardown(struct gw_lws_uv *lu)
{
    if (!lu->destroying) {
        lu->destroying = true;
        lu->deadline_ms = uv_now(lu->loop) + DESTROY_WAIT_MS;
        lws_context_destroy(lu->ctx);
        return false;
    }
    if (handles_left(lu)) {
        if (uv_now(lu->loop) < lu->deadline_ms) {
            return false;
        }
        gw_log(GW_LOG_ERROR, lu->subject,
               "%s context did not finish closing; leaking it", lu->what);
    } else if (lu->ctx != NULL) {
        lws_context_destroy(lu->ctx);
    }
    return true;
}
