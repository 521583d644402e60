/*
 * Text for the error codes of error.h. Kept free of libuv so that the pure
 * modules (codec/, crypto/, config/) can report errors without the loop.
 */
#include "common/error.h"

#include <string.h>

const char *gw_strerror(int err)
{
    switch (err) {
    case 0:
        return "success";
#define XX(code, text)                                                         \
    case GW_E##code:                                                           \
        return text;
        GW_ERRNO_MAP(XX)
#undef XX
    default:
        break;
    }
    /* libuv's values on Unix are negated errno, apart from its EOF. */
    if (err < 0 && err > -4096) {
        return strerror(-err);
    }
    return "unknown error";
}

const char *gw_err_name(int err)
{
    switch (err) {
    case 0:
        return "OK";
#define XX(code, _)                                                            \
    case GW_E##code:                                                           \
        return "GW_E" #code;
        GW_ERRNO_MAP(XX)
#undef XX
    default:
        return "SYSTEM";
    }
}
