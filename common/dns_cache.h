/*
 * Host names resolved off the event loop: uv_getaddrinfo runs the lookup
 * on libuv's threadpool, and a short cache keeps repeated connects to the
 * same backend or broker from looking the name up each time. Concurrent
 * lookups of one name share a single getaddrinfo; a failure is cached
 * briefly too, so that a name that does not resolve does not turn every
 * session into a lookup. IP literals never reach the resolver.
 */
#ifndef GW_DNS_CACHE_H
#define GW_DNS_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "common/error.h"

/* Room for a numeric address with its NUL (INET6_ADDRSTRLEN). */
#define GW_DNS_IP_MAX 46
/* Longest name looked up (RFC 1035: 253 characters). */
#define GW_DNS_NAME_MAX 253

struct gw_dns;
struct gw_dns_req;

/*
 * A lookup finished: status 0 and ip (numeric, NUL-terminated, valid for
 * the call) or a negative error (gw_dns_strerror). Always called from
 * the loop, never from inside gw_dns_resolve, and never after
 * gw_dns_cancel of its request or gw_dns_close.
 */
typedef void (*gw_dns_cb)(void *arg, int status, const char *ip);

struct gw_dns_options {
    unsigned ttl_ms;          /* a resolved name; 0: GW_DNS_TTL_MS */
    unsigned negative_ttl_ms; /* a failed lookup; 0: GW_DNS_NEGATIVE_TTL_MS */
    unsigned max_entries;     /* 0: GW_DNS_MAX_ENTRIES */
};

#define GW_DNS_TTL_MS          10000
#define GW_DNS_NEGATIVE_TTL_MS 2000
#define GW_DNS_MAX_ENTRIES     64

struct gw_dns_stats {
    uint64_t lookups;   /* uv_getaddrinfo calls made */
    uint64_t hits;      /* answered from a fresh entry, either kind */
    uint64_t coalesced; /* joined a lookup already under way */
    uint64_t literals;  /* IP literals, passed through */
    uint64_t failures;  /* lookups that ended in an error */
    size_t entries;     /* names held now */
};

/* opts may be NULL for the defaults. Returns 0 or GW_EINVAL/GW_ENOMEM. */
GW_MUST_CHECK int gw_dns_create(uv_loop_t *loop,
                                const struct gw_dns_options *opts,
                                struct gw_dns **out);

/*
 * Resolves name (a host name, an IPv4 literal, or an IPv6 literal with
 * or without brackets). Returns
 *   1 with ip filled (ip_cap >= GW_DNS_IP_MAX): a literal or a fresh
 *     cached answer; no callback follows and *req is NULL;
 *   0 with *req set: cb(arg, ...) follows from the loop unless the
 *     request is cancelled first;
 *   a negative error: a cached failure (a resolver error) or a bad
 *     argument (GW_EINVAL), a full cache of lookups under way
 *     (GW_ELIMIT), GW_ENOMEM, or the error of uv_getaddrinfo itself.
 */
GW_MUST_CHECK int gw_dns_resolve(struct gw_dns *dns, const char *name,
                                 gw_dns_cb cb, void *arg, char *ip,
                                 size_t ip_cap, struct gw_dns_req **req);

/* The callback of req will not run; req is freed. NULL is ignored. */
void gw_dns_cancel(struct gw_dns_req *req);

/*
 * Drops the cache. Requests still pending get no callback. Lookups
 * already on the threadpool are cancelled if they have not started; the
 * memory goes once the last one is back, which keeps the loop alive
 * until then (uv_run returns only after).
 */
void gw_dns_close(struct gw_dns *dns);

void gw_dns_get_stats(const struct gw_dns *dns, struct gw_dns_stats *out);

/* Whether name is an IP literal (IPv6 with or without brackets). */
bool gw_dns_is_literal(const char *name);

/* The text of a gw_dns error: a resolver's (libuv) or a gateway code. */
const char *gw_dns_strerror(int err);

#endif /* GW_DNS_CACHE_H */
