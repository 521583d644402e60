/*
 * The wall clock in milliseconds since the epoch, for what outlives the
 * loop or is compared across hosts (instance records, codes, bindings);
 * the loop's own time (uv_now) for everything else.
 */
#ifndef GW_CORE_WALL_CLOCK_H
#define GW_CORE_WALL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t gw_wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif /* GW_CORE_WALL_CLOCK_H */
