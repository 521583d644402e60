/*
 * Static files of the operator page (web/) under a mount point of the
 * HTTP API (/ui/): read from one directory on the loop's threadpool, never
 * outside it, GET and HEAD only. The files carry no data: every figure
 * the page shows comes from the token-guarded routes.
 */
#ifndef GW_HTTP_STATIC_H
#define GW_HTTP_STATIC_H

#include <stdbool.h>

#include <uv.h>

#include "gateway/http/http_server.h"

/* Files over this are refused (500): a page is made of small files, and
 * each is read whole into memory before it is sent. */
#define GW_HTTP_STATIC_MAX_BYTES (1024 * 1024)

/*
 * Answers req, whose path is mount or under it ("/ui", "/ui/..."): the
 * mount point alone is redirected (301) to mount + "/"; another method
 * than GET or HEAD gets 405; a path gw_static_path_parse refuses, a file
 * that is missing, not a regular file, or reached through a symbolic link
 * gets 404; a file over GW_HTTP_STATIC_MAX_BYTES 500. root is the
 * directory ("" = the page is off: 404); it is copied. The file is read
 * on loop's threadpool, or at once when loop is NULL (a detached API);
 * a client that leaves first abandons the read.
 */
void gw_http_static_serve(struct gw_http_req *req, uv_loop_t *loop,
                          const char *root, const char *mount);

#endif /* GW_HTTP_STATIC_H */
