/*
 * Memory laid out by cache line: the per-session structures put what each
 * packet reads side by side, which only pays if those bytes start where a
 * line does (bench/NOTES.md).
 */
#ifndef GW_CACHELINE_H
#define GW_CACHELINE_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define GW_CACHE_LINE 64

/* size zeroed bytes starting on a cache line, released by free(); NULL
 * when out of memory. */
static inline void *gw_calloc_lines(size_t size)
{
    size_t rounded = (size + GW_CACHE_LINE - 1) & ~(size_t)(GW_CACHE_LINE - 1);
    void *p = rounded >= size ? aligned_alloc(GW_CACHE_LINE, rounded) : NULL;

    if (p != NULL) {
        memset(p, 0, rounded);
    }
    return p;
}

#endif /* GW_CACHELINE_H */
