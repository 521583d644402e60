/*
 * The resolver cache (dns_cache.h). One entry per name: its answer (an
 * address or an error) until it expires, or the one lookup under way and
 * the requests waiting on it. Entries are few (the configured backends
 * and the broker), so a list searched by name is enough.
 */
#include "common/dns_cache.h"

#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/list.h"

struct entry {
    struct gw_list link; /* on dns->entries; unlinked once orphaned */
    struct gw_dns *dns;
    uv_getaddrinfo_t gai;   /* the lookup, while pending */
    bool pending;           /* gai is on the threadpool */
    int status;             /* of the last lookup: 0 or an error */
    uint64_t expires_ms;    /* loop time the answer goes stale */
    struct gw_list waiters; /* gw_dns_req, oldest first */
    char ip[GW_DNS_IP_MAX];
    char name[];
};

struct gw_dns_req {
    struct gw_list link; /* on its entry's waiters */
    gw_dns_cb cb;
    void *arg;
};

struct gw_dns {
    uv_loop_t *loop;
    struct gw_list entries;
    size_t n_entries; /* on the list */
    unsigned in_flight;
    unsigned ttl_ms, negative_ttl_ms, max_entries;
    bool closing;
    struct entry *delivering; /* whose waiters are being called */
    struct gw_dns_stats stats;
};

int gw_dns_create(uv_loop_t *loop, const struct gw_dns_options *opts,
                  struct gw_dns **out)
{
    struct gw_dns *dns;

    if (loop == NULL || out == NULL) {
        return GW_EINVAL;
    }
    dns = calloc(1, sizeof(*dns));
    if (dns == NULL) {
        return GW_ENOMEM;
    }
    dns->loop = loop;
    gw_list_init(&dns->entries);
    dns->ttl_ms = GW_DNS_TTL_MS;
    dns->negative_ttl_ms = GW_DNS_NEGATIVE_TTL_MS;
    dns->max_entries = GW_DNS_MAX_ENTRIES;
    if (opts != NULL) {
        dns->ttl_ms = opts->ttl_ms > 0 ? opts->ttl_ms : dns->ttl_ms;
        dns->negative_ttl_ms = opts->negative_ttl_ms > 0 ? opts->negative_ttl_ms
                                                         : dns->negative_ttl_ms;
        dns->max_entries =
            opts->max_entries > 0 ? opts->max_entries : dns->max_entries;
    }
    *out = dns;
    return 0;
}

bool gw_dns_is_literal(const char *name)
{
    unsigned char buf[16];
    char inner[GW_DNS_IP_MAX];
    size_t n = strlen(name);

    if (uv_inet_pton(AF_INET, name, buf) == 0 ||
        uv_inet_pton(AF_INET6, name, buf) == 0) {
        return true;
    }
    if (n < 3 || n - 2 >= sizeof(inner) || name[0] != '[' ||
        name[n - 1] != ']') {
        return false;
    }
    memcpy(inner, name + 1, n - 2);
    inner[n - 2] = '\0';
    return uv_inet_pton(AF_INET6, inner, buf) == 0;
}

/* The literal without its brackets, into ip. */
static void copy_literal(const char *name, char *ip, size_t cap)
{
    size_t n = strlen(name);

    if (name[0] == '[') {
        name++;
        n -= 2;
    }
    if (n >= cap) {
        n = cap - 1; /* not reached: literals fit GW_DNS_IP_MAX */
    }
    memcpy(ip, name, n);
    ip[n] = '\0';
}

static void entry_free(struct entry *e)
{
    if (gw_list_linked(&e->link)) {
        gw_list_unlink(&e->link);
        e->dns->n_entries--;
    }
    free(e);
}

static void maybe_free_dns(struct gw_dns *dns)
{
    if (dns->closing && dns->in_flight == 0 && dns->delivering == NULL) {
        free(dns);
    }
}

static void deliver(struct entry *e)
{
    struct gw_dns *dns = e->dns;
    struct gw_list *first;

    /* One at a time from the head: a callback may cancel other waiters
     * of this entry (their owners went away), or close the cache. */
    dns->delivering = e;
    while (!dns->closing && (first = gw_list_first(&e->waiters)) != NULL) {
        struct gw_dns_req *req = GW_LIST_ENTRY(first, struct gw_dns_req, link);
        gw_list_unlink(&req->link);
        req->cb(req->arg, e->status, e->status == 0 ? e->ip : NULL);
        free(req);
    }
    dns->delivering = NULL;
    if (dns->closing) {
        entry_free(e); /* gw_dns_close left it to us */
    }
}

static void on_lookup(uv_getaddrinfo_t *gai, int status, struct addrinfo *res)
{
    struct entry *e = gai->data;
    struct gw_dns *dns = e->dns;

    e->pending = false;
    dns->in_flight--;
    if (status == 0 && res != NULL) {
        status = res->ai_family == AF_INET6
                     ? uv_ip6_name((const struct sockaddr_in6 *)res->ai_addr,
                                   e->ip, sizeof(e->ip))
                     : uv_ip4_name((const struct sockaddr_in *)res->ai_addr,
                                   e->ip, sizeof(e->ip));
    } else if (status == 0) {
        status = UV_EAI_NONAME;
    }
    uv_freeaddrinfo(res);
    if (dns->closing) {
        entry_free(e);
        maybe_free_dns(dns);
        return;
    }
    e->status = status;
    if (status != 0) {
        dns->stats.failures++;
        e->ip[0] = '\0';
    }
    uv_update_time(dns->loop);
    e->expires_ms =
        uv_now(dns->loop) + (status == 0 ? dns->ttl_ms : dns->negative_ttl_ms);
    deliver(e);
    maybe_free_dns(dns);
}

static struct entry *find(struct gw_dns *dns, const char *name)
{
    struct gw_list *it, *tmp;

    GW_LIST_FOREACH_SAFE(it, tmp, &dns->entries)
    {
        struct entry *e = GW_LIST_ENTRY(it, struct entry, link);
        if (strcmp(e->name, name) == 0) {
            return e;
        }
    }
    return NULL;
}

/* Room for one more entry: drops expired answers, else the stalest. */
static bool make_room(struct gw_dns *dns, uint64_t now)
{
    struct gw_list *it, *tmp;
    struct entry *oldest = NULL;

    GW_LIST_FOREACH_SAFE(it, tmp, &dns->entries)
    {
        struct entry *e = GW_LIST_ENTRY(it, struct entry, link);
        if (e->pending || e == dns->delivering) {
            continue;
        }
        if (e->expires_ms <= now) {
            entry_free(e);
        } else if (oldest == NULL || e->expires_ms < oldest->expires_ms) {
            oldest = e;
        }
    }
    if (dns->n_entries < dns->max_entries) {
        return true;
    }
    if (oldest == NULL) {
        return false; /* every entry is a lookup under way */
    }
    entry_free(oldest);
    return true;
}

static int start_lookup(struct gw_dns *dns, struct entry *e)
{
    struct addrinfo hints;
    int rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    e->gai.data = e;
    rc = uv_getaddrinfo(dns->loop, &e->gai, on_lookup, e->name, NULL, &hints);
    if (rc != 0) {
        return rc;
    }
    e->pending = true;
    dns->in_flight++;
    dns->stats.lookups++;
    return 0;
}

int gw_dns_resolve(struct gw_dns *dns, const char *name, gw_dns_cb cb,
                   void *arg, char *ip, size_t ip_cap, struct gw_dns_req **req)
{
    struct gw_dns_req *r;
    struct entry *e;
    size_t len;
    uint64_t now;
    int rc;

    if (dns == NULL || name == NULL || cb == NULL || ip == NULL ||
        ip_cap < GW_DNS_IP_MAX || req == NULL || dns->closing) {
        return GW_EINVAL;
    }
    *req = NULL;
    len = strlen(name);
    if (len == 0 || len > GW_DNS_NAME_MAX) {
        return GW_EINVAL;
    }
    if (gw_dns_is_literal(name)) {
        dns->stats.literals++;
        copy_literal(name, ip, ip_cap);
        return 1;
    }
    now = uv_now(dns->loop);
    e = find(dns, name);
    if (e != NULL && !e->pending && e->expires_ms > now) {
        dns->stats.hits++;
        if (e->status != 0) {
            return e->status;
        }
        memcpy(ip, e->ip, sizeof(e->ip));
        return 1;
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return GW_ENOMEM;
    }
    r->cb = cb;
    r->arg = arg;
    if (e != NULL && e->pending) {
        dns->stats.coalesced++;
    } else {
        if (e == NULL) {
            if (dns->n_entries >= dns->max_entries && !make_room(dns, now)) {
                free(r);
                return GW_ELIMIT;
            }
            e = calloc(1, sizeof(*e) + len + 1);
            if (e == NULL) {
                free(r);
                return GW_ENOMEM;
            }
            memcpy(e->name, name, len + 1);
            e->dns = dns;
            gw_list_init(&e->waiters);
            gw_list_insert_head(&dns->entries, &e->link);
            dns->n_entries++;
        }
        /* A stale entry is looked up again in place. */
        rc = start_lookup(dns, e);
        if (rc != 0) {
            if (gw_list_empty(&e->waiters) && e != dns->delivering) {
                entry_free(e);
            }
            free(r);
            return rc;
        }
    }
    gw_list_insert_tail(&e->waiters, &r->link);
    *req = r;
    return 0;
}

void gw_dns_cancel(struct gw_dns_req *req)
{
    if (req == NULL) {
        return;
    }
    /* The lookup itself goes on: its answer fills the cache for the next
     * session that needs the name. */
    gw_list_unlink(&req->link);
    free(req);
}

void gw_dns_close(struct gw_dns *dns)
{
    struct gw_list *it, *tmp;

    if (dns == NULL || dns->closing) {
        return;
    }
    dns->closing = true;
    GW_LIST_FOREACH_SAFE(it, tmp, &dns->entries)
    {
        struct entry *e = GW_LIST_ENTRY(it, struct entry, link);
        struct gw_list *w, *wtmp;

        GW_LIST_FOREACH_SAFE(w, wtmp, &e->waiters)
        {
            struct gw_dns_req *r = GW_LIST_ENTRY(w, struct gw_dns_req, link);
            gw_list_unlink(&r->link);
            free(r);
        }
        gw_list_unlink(&e->link);
        dns->n_entries--;
        if (e->pending) {
            /* Not started yet: the callback comes with UV_ECANCELED.
             * Running: it comes when getaddrinfo returns. Either way
             * on_lookup frees the entry. */
            (void)uv_cancel((uv_req_t *)&e->gai);
        } else if (e != dns->delivering) {
            free(e);
        }
    }
    maybe_free_dns(dns);
}

void gw_dns_get_stats(const struct gw_dns *dns, struct gw_dns_stats *out)
{
    *out = dns->stats;
    out->entries = dns->n_entries;
}

const char *gw_dns_strerror(int err)
{
    /* Gateway codes sit far below libuv's range. */
    return err <= GW_ERR_BASE ? gw_strerror(err) : uv_strerror(err);
}
