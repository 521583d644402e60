/* The getaddrinfo probe (dns_probe.h). */
#include "dns_probe.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef int (*getaddrinfo_fn)(const char *, const char *,
                              const struct addrinfo *, struct addrinfo **);

static pthread_t loop_thread;
static atomic_bool have_loop_thread;
static atomic_uint on_loop, off_loop, returned;
static atomic_uint slow_ms;
static char slow_name[256]; /* written only while no lookup runs */

void gw_dns_probe_reset(void)
{
    loop_thread = pthread_self();
    atomic_store(&have_loop_thread, true);
    atomic_store(&on_loop, 0);
    atomic_store(&off_loop, 0);
    atomic_store(&returned, 0);
    gw_dns_probe_slow(NULL, 0);
}

void gw_dns_probe_slow(const char *name, unsigned ms)
{
    atomic_store(&slow_ms, 0);
    snprintf(slow_name, sizeof(slow_name), "%s", name != NULL ? name : "");
    atomic_store(&slow_ms, name != NULL ? ms : 0);
}

void gw_dns_probe_get(struct gw_dns_probe *out)
{
    out->names_on_loop = atomic_load(&on_loop);
    out->names_off_loop = atomic_load(&off_loop);
    out->returned = atomic_load(&returned);
}

static bool numeric(const char *node)
{
    unsigned char buf[16];

    return inet_pton(AF_INET, node, buf) == 1 ||
           inet_pton(AF_INET6, node, buf) == 1;
}

static bool under_invalid(const char *node)
{
    size_t n = strlen(node);

    return strcmp(node, "invalid") == 0 ||
           (n > 8 && strcmp(node + n - 8, ".invalid") == 0);
}

int getaddrinfo(const char *node, const char *service,
                const struct addrinfo *hints, struct addrinfo **res)
{
    static getaddrinfo_fn real;
    unsigned ms;
    int rc;

    if (real == NULL) {
        real = (getaddrinfo_fn)dlsym(RTLD_NEXT, "getaddrinfo");
    }
    if (node == NULL || numeric(node)) {
        return real(node, service, hints, res);
    }
    if (atomic_load(&have_loop_thread) &&
        pthread_equal(pthread_self(), loop_thread)) {
        atomic_fetch_add(&on_loop, 1);
    } else {
        atomic_fetch_add(&off_loop, 1);
    }
    ms = atomic_load(&slow_ms);
    if (ms > 0 && strcmp(node, slow_name) == 0) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    rc = under_invalid(node) ? EAI_NONAME : real(node, service, hints, res);
    atomic_fetch_add(&returned, 1);
    return rc;
}
