/*
 * uthash, with its out-of-memory action made non-fatal. Stock uthash calls
 * exit() when a table cannot grow, which would take the whole gateway
 * down, or the whole broker when it happens inside the Mosquitto plugin.
 * Every file includes this header instead of <uthash.h>, and every add is
 * checked with GW_HASH_ADDED: a failed add leaves the element out of the
 * table and the table as it was.
 */
#ifndef GW_COMMON_HASH_H
#define GW_COMMON_HASH_H

#ifdef UTHASH_H
#error "include common/hash.h before (instead of) <uthash.h>"
#endif

#define HASH_NONFATAL_OOM 1
/* The failed add is seen by the caller through GW_HASH_ADDED. */
#define uthash_nonfatal_oom(elt) ((void)(elt))

#include <uthash.h>

/* After HASH_ADD*(field, ...): whether elt made it into the table. */
#define GW_HASH_ADDED(elt, field) ((elt)->field.tbl != NULL)

#endif /* GW_COMMON_HASH_H */
