/*
 * The operator page's files: each request's path is checked by the pure
 * parser (codec/static_path.c), then walked one name at a time from the
 * served directory without following symbolic links, and the file is read
 * whole on the threadpool so that a slow disk never stalls the loop.
 */
#include "gateway/api/http_static.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "codec/static_path.h"
#include "common/log.h"

#define SUBJECT "http"
#define JSON    "application/json"

/*
 * The page talks only to its own origin and runs only its own files; it
 * may not be framed (clickjacking of the alert and tool forms).
 */
static const char *const file_headers[] = {
    "Cache-Control: no-cache",
    "X-Content-Type-Options: nosniff",
    "Content-Security-Policy: default-src 'none'; script-src 'self'; "
    "style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "Referrer-Policy: no-referrer",
    "X-Frame-Options: DENY",
    NULL};

/* One file being read for one request. */
struct job {
    uv_work_t work;
    struct gw_http_req *req; /* NULL once the client left */
    const char *type;
    char rel[GW_STATIC_PATH_MAX + 1];
    /* The outcome, set by load(): 200 with body, or a refusal. */
    int status;
    bool warn;       /* the refusal is worth a warning (else debug) */
    const char *why; /* a constant */
    int err;         /* errno behind why, or 0 */
    char *body;
    size_t len;
    char root[]; /* the served directory */
};

static void answer_error(struct gw_http_req *req, int status, bool warn,
                         const char *why, int err, const char *const *headers)
{
    char body[160];
    int n = snprintf(body, sizeof(body), "{\"error\":\"%s\"}", why);

    /* A warning is the server's fault (its directory, a link, a size):
     * limited per fault, so one client's other refusals do not hide it. */
    gw_log_peer(warn ? GW_LOG_WARN : GW_LOG_DEBUG,
                warn ? why : gw_http_req_peer(req), SUBJECT,
                "%s %.128s from %s: %d %s%s%s", gw_http_req_method(req),
                gw_http_req_path(req), gw_http_req_peer(req), status, why,
                err != 0 ? ": " : "", err != 0 ? strerror(err) : "");
    (void)gw_http_respond(req, status, JSON, headers, body,
                          n > 0 && (size_t)n < sizeof(body) ? (size_t)n : 0);
}

static void fail(struct job *j, int status, bool warn, const char *why, int err)
{
    j->status = status;
    j->warn = warn;
    j->why = why;
    j->err = err;
}

/* An open() failure on the way to the file, as the answer says it. */
static void fail_open(struct job *j, int err)
{
    if (err == ELOOP) {
        fail(j, 404, true, "not served: a symbolic link", 0);
    } else if (err == ENOENT || err == ENOTDIR) {
        fail(j, 404, false, "not found", 0);
    } else {
        fail(j, 404, true, "not found", err);
    }
}

/* Reads the regular file fd into j->body (fd is closed by the caller). */
static void read_file(struct job *j, int fd)
{
    struct stat st;
    size_t want;

    if (fstat(fd, &st) != 0) {
        fail(j, 404, true, "not found", errno);
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        fail(j, 404, false, "not found", 0);
        return;
    }
    if (st.st_size > GW_HTTP_STATIC_MAX_BYTES) {
        fail(j, 500, true, "file over the size cap of the page's files", 0);
        return;
    }
    want = (size_t)st.st_size;
    j->body = malloc(want > 0 ? want : 1);
    if (j->body == NULL) {
        fail(j, 503, true, "out of memory", 0);
        return;
    }
    /* A file that shrinks meanwhile is sent as far as it goes; one that
     * grows, as long as it was. */
    while (j->len < want) {
        ssize_t n = read(fd, j->body + j->len, want - j->len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            fail(j, 500, true, "file not readable", errno);
            return;
        }
        if (n == 0) {
            break;
        }
        j->len += (size_t)n;
    }
    j->status = 200;
}

/*
 * The file named by j->rel under j->root, one name at a time: every
 * directory on the way and the file itself are opened with O_NOFOLLOW, so
 * a link inside the directory cannot lead out of it. Threadpool side.
 */
static void load(struct job *j)
{
    int dir = open(j->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const char *p = j->rel;

    if (dir < 0) {
        fail(j, 404, true,
             "the page's directory (http.ui_dir) cannot be opened", errno);
        return;
    }
    for (;;) {
        const char *slash = strchr(p, '/');
        char name[GW_STATIC_SEGMENT_MAX + 1];
        size_t n = slash != NULL ? (size_t)(slash - p) : strlen(p);
        int fd;

        memcpy(name, p, n); /* the parser kept n within the name's cap */
        name[n] = '\0';
        fd = openat(dir, name,
                    O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
                        (slash != NULL ? O_DIRECTORY : O_NONBLOCK));
        if (fd < 0) {
            fail_open(j, errno);
            break;
        }
        (void)close(dir);
        dir = fd;
        if (slash == NULL) {
            read_file(j, fd);
            break;
        }
        p = slash + 1;
    }
    (void)close(dir);
}

static void on_load(uv_work_t *w)
{
    load(w->data);
}

static void job_free(struct job *j)
{
    free(j->body);
    free(j);
}

/* Loop side: answers the client if it is still there. */
static void job_done(struct job *j)
{
    struct gw_http_req *req = j->req;

    if (req == NULL) {
        job_free(j);
        return;
    }
    gw_http_req_on_gone(req, NULL, NULL);
    if (j->status != 200) {
        answer_error(req, j->status, j->warn, j->why, j->err, NULL);
    } else {
        GW_LOG(GW_LOG_DEBUG, SUBJECT, "%s %.128s from %s: 200 (%zu bytes)",
               gw_http_req_method(req), gw_http_req_path(req),
               gw_http_req_peer(req), j->len);
        (void)gw_http_respond(req, 200, j->type, file_headers, j->body, j->len);
    }
    job_free(j);
}

static void on_loaded(uv_work_t *w, int status)
{
    struct job *j = w->data;

    (void)status; /* cancelled: the client left, j->req is NULL */
    job_done(j);
}

static void on_gone(struct gw_http_req *req, void *arg)
{
    struct job *j = arg;

    (void)req;
    j->req = NULL;
    (void)uv_cancel((uv_req_t *)&j->work); /* not started yet: never is */
}

static bool method_ok(struct gw_http_req *req)
{
    static const char *const allow[] = {"Allow: GET, HEAD", NULL};
    const char *m = gw_http_req_method(req);

    if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0) {
        return true;
    }
    answer_error(req, 405, true, "method not allowed", 0, allow);
    return false;
}

/* The mount point without its '/': where the page's own links resolve. */
static void redirect(struct gw_http_req *req, const char *mount)
{
    char location[128];
    const char *headers[] = {location, NULL};

    snprintf(location, sizeof(location), "Location: %s/", mount);
    (void)gw_http_respond(req, 301, NULL, headers, NULL, 0);
}

void gw_http_static_serve(struct gw_http_req *req, uv_loop_t *loop,
                          const char *root, const char *mount)
{
    const char *path = gw_http_req_path(req);
    const char *rest = path + strlen(mount);
    size_t root_len = strlen(root);
    struct job *j;
    int rc;

    if (!method_ok(req)) {
        return;
    }
    if (*rest == '\0') {
        redirect(req, mount);
        return;
    }
    if (root_len == 0) {
        answer_error(req, 404, false, "the page is off (http.ui_dir is empty)",
                     0, NULL);
        return;
    }
    j = calloc(1, sizeof(*j) + root_len + 1);
    if (j == NULL) {
        answer_error(req, 503, true, "out of memory", 0, NULL);
        return;
    }
    memcpy(j->root, root, root_len + 1);
    rest++; /* past the mount point's '/' */
    rc = gw_static_path_parse(rest, strlen(rest), j->rel, sizeof(j->rel),
                              &j->type);
    if (rc != 0) {
        answer_error(req, 404, rc != GW_EPROTO,
                     rc == GW_EPROTO
                         ? "not served: unknown file type"
                         : "not served: a path the page does not use",
                     0, NULL);
        free(j);
        return;
    }
    j->req = req;
    j->work.data = j;
    if (loop == NULL) {
        load(j);
        job_done(j);
        return;
    }
    gw_http_req_on_gone(req, on_gone, j);
    rc = uv_queue_work(loop, &j->work, on_load, on_loaded);
    if (rc != 0) {
        gw_http_req_on_gone(req, NULL, NULL);
        answer_error(req, 503, true, "cannot queue the read", 0, NULL);
        free(j);
    }
}
