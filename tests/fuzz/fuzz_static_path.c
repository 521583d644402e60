/*
 * The operator page's file paths: whatever a request names, an accepted
 * path is made only of allowed names (never ".", "..", hidden or empty),
 * within its limits, maps back to the input (plus the index of a
 * directory), has the type its extension says, and fits the buffer given
 * exactly; a refusal leaves nothing behind.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/static_path.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_names(const char *rel)
{
    unsigned depth = 0;

    for (const char *p = rel; *p != '\0';) {
        size_t n = strcspn(p, "/");
        if (n == 0 || n > GW_STATIC_SEGMENT_MAX || p[0] == '.') {
            abort();
        }
        for (size_t i = 0; i < n; i++) {
            char c = p[i];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')) {
                abort();
            }
        }
        depth++;
        p += n;
        if (*p == '/') {
            p++;
            if (*p == '\0') {
                abort(); /* an accepted path names a file */
            }
        }
    }
    if (depth == 0 || depth > GW_STATIC_DEPTH_MAX) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = (const char *)data;
    char out[GW_STATIC_PATH_MAX + 1];
    const char *type = NULL;
    int rc = gw_static_path_parse(path, size, out, sizeof(out), &type);
    size_t len;

    if (rc != 0) {
        if (out[0] != '\0' || type != NULL) {
            abort();
        }
        if (rc != GW_EMALFORMED && rc != GW_ETOOBIG && rc != GW_EPROTO) {
            abort(); /* the buffer is the largest path: never ENOSPC */
        }
        return 0;
    }
    len = strlen(out);
    check_names(out);
    if (len > GW_STATIC_PATH_MAX || type == NULL ||
        type != gw_static_path_type(out, len)) {
        abort();
    }
    /* The input, or the input and the index of the directory it names. */
    if (size == 0 || path[size - 1] == '/') {
        if (len != size + strlen(GW_STATIC_INDEX) ||
            memcmp(out, path, size) != 0 ||
            strcmp(out + size, GW_STATIC_INDEX) != 0) {
            abort();
        }
    } else if (len != size || memcmp(out, path, size) != 0) {
        abort();
    }
    /* Exactly len + 1 bytes are enough, one fewer is not. */
    char *exact = malloc(len + 1);
    if (exact == NULL ||
        gw_static_path_parse(path, size, exact, len + 1, &type) != 0 ||
        strcmp(exact, out) != 0 ||
        gw_static_path_parse(path, size, exact, len, &type) != GW_ENOSPC) {
        abort();
    }
    free(exact);
    return 0;
}
