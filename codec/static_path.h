/*
 * The path of a static file under a mount point (the operator page's
 * /ui/): what a request may name, turned into a relative path that cannot
 * leave the served directory, and the content type it is served with.
 */
#ifndef GW_CODEC_STATIC_PATH_H
#define GW_CODEC_STATIC_PATH_H

#include <stddef.h>

#include "common/error.h"

#define GW_STATIC_PATH_MAX    255 /* the relative path, without its NUL */
#define GW_STATIC_SEGMENT_MAX 64  /* one file or directory name */
#define GW_STATIC_DEPTH_MAX   8   /* names in the path, the file's included */
#define GW_STATIC_INDEX       "index.html"

/*
 * path (len bytes, not NUL-terminated) is what follows the mount point's
 * '/': "", "index.html", "css/site.css", "docs/". Each name is 1 to
 * GW_STATIC_SEGMENT_MAX characters of [A-Za-z0-9._-] not starting with
 * '.' (so neither "." nor ".." nor hidden files), names are joined by
 * single '/', and an empty path or one ending in '/' names that
 * directory's GW_STATIC_INDEX. Writes the relative path and a NUL to out
 * (cap bytes) and sets *type to its content type.
 *
 * Returns 0, GW_EMALFORMED (a character or name not allowed, an empty
 * name, a leading '/'), GW_ETOOBIG (over GW_STATIC_PATH_MAX, a name over
 * GW_STATIC_SEGMENT_MAX or more than GW_STATIC_DEPTH_MAX names), GW_EPROTO
 * (a file type that is not served) or GW_ENOSPC (cap too small). out is
 * "" and *type NULL on error.
 */
GW_MUST_CHECK int gw_static_path_parse(const char *path, size_t len, char *out,
                                       size_t cap, const char **type);

/*
 * The content type of a file name by its extension (case-insensitive),
 * or NULL when files of that kind are not served (no extension, unknown).
 */
const char *gw_static_path_type(const char *name, size_t len);

#endif /* GW_CODEC_STATIC_PATH_H */
