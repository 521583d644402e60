/*
 * A probe on getaddrinfo for the loop tests, by symbol interposition: a
 * test program that uses it carries its own getaddrinfo, which every
 * library in the process (libuv's threadpool, lws, libmosquitto) calls in
 * place of libc's. It counts which thread asks for a host name, can hold
 * a named lookup for a while (a slow resolver), answers names under
 * .invalid with EAI_NONAME as a resolver should (RFC 6761) without
 * asking the network, and hands everything else to libc.
 */
#ifndef GW_TEST_DNS_PROBE_H
#define GW_TEST_DNS_PROBE_H

#include <stdbool.h>

struct gw_dns_probe {
    unsigned names_on_loop;  /* host names looked up on the loop thread */
    unsigned names_off_loop; /* ... on any other thread */
    unsigned returned;       /* host-name lookups finished */
};

/* The calling thread is the loop's; clears the counts and the delay. */
void gw_dns_probe_reset(void);

/* Lookups of name sleep ms before they are answered; NULL: none. */
void gw_dns_probe_slow(const char *name, unsigned ms);

void gw_dns_probe_get(struct gw_dns_probe *out);

#endif /* GW_TEST_DNS_PROBE_H */
