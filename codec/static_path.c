/*
 * Static file paths: a whitelist of characters and names rather than a
 * normaliser, so that no spelling of "..", of a hidden file or of another
 * root (backslashes, NUL, percent escapes left over) gets through.
 */
#include "codec/static_path.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

/* Only the kinds of file a web page is made of; anything else is not
 * served, so nothing is ever sniffed or guessed. */
static const struct {
    const char *ext;
    const char *type;
} types[] = {
    {"html", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"json", "application/json"},
    {"txt", "text/plain; charset=utf-8"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"ico", "image/x-icon"},
    {"woff2", "font/woff2"},
};

const char *gw_static_path_type(const char *name, size_t len)
{
    size_t dot = len;

    while (dot > 0 && name[dot - 1] != '.' && name[dot - 1] != '/') {
        dot--;
    }
    if (dot < 2 || name[dot - 1] != '.' || name[dot - 2] == '/') {
        return NULL; /* no extension, or a name that is only one */
    }
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        size_t n = strlen(types[i].ext);
        if (len - dot == n && strncasecmp(name + dot, types[i].ext, n) == 0) {
            return types[i].type;
        }
    }
    return NULL;
}

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

/* The names of path, checked; *depth counts them. */
static int check_names(const char *path, size_t len, unsigned *depth)
{
    size_t start = 0;

    *depth = 0;
    while (start < len) {
        size_t end = start;
        while (end < len && path[end] != '/') {
            if (!name_char(path[end])) {
                return GW_EMALFORMED;
            }
            end++;
        }
        if (end == start || path[start] == '.') {
            return GW_EMALFORMED; /* "//", a leading '/', ".", "..", ".x" */
        }
        if (end - start > GW_STATIC_SEGMENT_MAX ||
            ++*depth > GW_STATIC_DEPTH_MAX) {
            return GW_ETOOBIG;
        }
        start = end + 1; /* past the '/'; a trailing one ends the loop */
    }
    return 0;
}

int gw_static_path_parse(const char *path, size_t len, char *out, size_t cap,
                         const char **type)
{
    bool dir = len == 0 || path[len - 1] == '/';
    size_t total = len + (dir ? strlen(GW_STATIC_INDEX) : 0);
    unsigned depth;
    int rc;

    *type = NULL;
    if (cap > 0) {
        out[0] = '\0';
    }
    if (len > GW_STATIC_PATH_MAX) {
        return GW_ETOOBIG; /* before reading a byte of it */
    }
    if ((rc = check_names(path, len, &depth)) != 0) {
        return rc;
    }
    if (total > GW_STATIC_PATH_MAX ||
        (dir && depth + 1 > GW_STATIC_DEPTH_MAX)) {
        return GW_ETOOBIG;
    }
    if (total + 1 > cap) {
        return GW_ENOSPC;
    }
    memcpy(out, path, len);
    memcpy(out + len, GW_STATIC_INDEX, total - len);
    out[total] = '\0';
    *type = gw_static_path_type(out, total);
    if (*type == NULL) {
        out[0] = '\0';
        return GW_EPROTO;
    }
    return 0;
}
