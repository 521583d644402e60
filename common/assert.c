/* The failure path of GW_ASSERT (assert.h): one log line, then a core. */
#include "common/assert.h"

#include <stdlib.h>

#include "common/log.h"

void gw_assert_fail(const char *cond, const char *file, int line,
                    const char *func)
{
    gw_log(GW_LOG_ERROR, "assert", "%s:%d %s: invariant broken: %s", file, line,
           func, cond);
    abort(); /* debug and sanitizer builds only: the test must stop here */
}
