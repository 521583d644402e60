/*
 * The UDP path doctor: the evidence each dropped datagram leaves for the
 * session its ssrc names or for a watched device address, the one look a
 * few seconds after the server hello, its warning line and its view for
 * the API. docs/protocol.md section 4.6 says what each cause means.
 */
#include "gateway/audio/udp_doctor.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "gateway/audio/udp_audio_int.h"

static const char *const cause_names[GW_UDP_DOCTOR_COUNT_] = {
#define XX(cause, name) [GW_UDP_DOCTOR_##cause] = name,
    GW_UDP_DOCTOR_MAP(XX)
#undef XX
};

const char *gw_udp_doctor_name(enum gw_udp_doctor_cause cause)
{
    return (unsigned)cause < GW_UDP_DOCTOR_COUNT_ ? cause_names[cause] : "?";
}

const char *gw_udp_doctor_hint(enum gw_udp_doctor_cause cause)
{
    switch (cause) {
    case GW_UDP_DOCTOR_NOTHING:
        return "UDP from the device does not reach the gateway: open udp.port "
               "for UDP in every firewall on the way, forward it on a NAT in "
               "front of the gateway, and check that the device can reach "
               "udp.public_host";
    case GW_UDP_DOCTOR_ADVERTISED:
        return "set udp.public_host (and udp.public_port behind a NAT) to "
               "the address devices reach this gateway at";
    case GW_UDP_DOCTOR_UNDECRYPTABLE:
        return "the device encrypts with another key: it streams on an "
               "older server hello, or something on the way alters "
               "datagrams";
    case GW_UDP_DOCTOR_REJECTED:
        return "the device's stream breaks the uplink rules (the frame "
               "length of its hello, its sequence): see "
               "hybridgw_udp_drops_total";
    case GW_UDP_DOCTOR_UNKNOWN_SSRC:
        return "the device streams on a session this gateway does not hold "
               "(an older server hello, a gateway restart, or another "
               "instance behind udp.public_host)";
    default:
        return "?";
    }
}

/* ---- addresses ---- */

/* IPv4 as ::ffff:a.b.c.d, so one comparison covers both families. */
static void map_v4(const struct in_addr *a, uint8_t ip[16])
{
    memset(ip, 0, 10);
    ip[10] = ip[11] = 0xff;
    memcpy(ip + 12, &a->s_addr, 4);
}

static bool parse_ip(const char *s, uint8_t ip[16])
{
    struct in_addr a4;

    if (s == NULL) {
        return false;
    }
    if (inet_pton(AF_INET, s, &a4) == 1) {
        map_v4(&a4, ip);
        return true;
    }
    return inet_pton(AF_INET6, s, ip) == 1;
}

static void sockaddr_ip(const struct sockaddr *sa, uint8_t ip[16],
                        uint16_t *port)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        map_v4(&in->sin_addr, ip);
        *port = ntohs(in->sin_port);
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        memcpy(ip, &in6->sin6_addr, 16);
        *port = ntohs(in6->sin6_port);
    }
}

static bool is_mapped(const uint8_t ip[16])
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0,    0,
                                       0, 0, 0, 0, 0xff, 0xff};

    return memcmp(ip, prefix, sizeof(prefix)) == 0;
}

static void format_ip(const uint8_t ip[16], uint16_t port, char *out,
                      size_t size)
{
    char text[INET6_ADDRSTRLEN] = "?";

    if (is_mapped(ip)) {
        inet_ntop(AF_INET, ip + 12, text, sizeof(text));
        snprintf(out, size, "%s:%u", text, (unsigned)port);
    } else {
        inet_ntop(AF_INET6, ip, text, sizeof(text));
        snprintf(out, size, "[%s]:%u", text, (unsigned)port);
    }
}

static enum gw_ip_class class_of(const uint8_t ip[16])
{
    static const uint8_t zero[16], one[16] = {[15] = 1};

    if (is_mapped(ip)) {
        const uint8_t *a = ip + 12;
        if (a[0] == 0 && a[1] == 0 && a[2] == 0 && a[3] == 0) {
            return GW_IP_UNSPECIFIED;
        }
        if (a[0] == 127) {
            return GW_IP_LOOPBACK;
        }
        if (a[0] == 10 || (a[0] == 172 && (a[1] & 0xf0) == 16) ||
            (a[0] == 192 && a[1] == 168) ||
            (a[0] == 100 && (a[1] & 0xc0) == 64)) {
            return GW_IP_PRIVATE;
        }
        return a[0] == 169 && a[1] == 254 ? GW_IP_LINK_LOCAL : GW_IP_PUBLIC;
    }
    if (memcmp(ip, zero, 16) == 0) {
        return GW_IP_UNSPECIFIED;
    }
    if (memcmp(ip, one, 16) == 0) {
        return GW_IP_LOOPBACK;
    }
    if ((ip[0] & 0xfe) == 0xfc) {
        return GW_IP_PRIVATE;
    }
    return ip[0] == 0xfe && (ip[1] & 0xc0) == 0x80 ? GW_IP_LINK_LOCAL
                                                   : GW_IP_PUBLIC;
}

enum gw_ip_class gw_ip_class_of(const char *host)
{
    uint8_t ip[16];

    if (host != NULL && strcasecmp(host, "localhost") == 0) {
        return GW_IP_LOOPBACK;
    }
    return parse_ip(host, ip) ? class_of(ip) : GW_IP_NAME;
}

const char *gw_ip_class_name(enum gw_ip_class c)
{
    static const char *const names[] = {"name",    "unspecified", "loopback",
                                        "private", "link-local",  "public"};

    return (unsigned)c < sizeof(names) / sizeof(names[0]) ? names[c] : "?";
}

/* Private addresses of one network: the same range and /16 (IPv4), the
 * same /48 (IPv6). A guess: a routed private network may span more. */
static bool same_network(const uint8_t a[16], const uint8_t b[16])
{
    if (is_mapped(a) != is_mapped(b)) {
        return false;
    }
    return is_mapped(a) ? memcmp(a + 12, b + 12, 2) == 0 : memcmp(a, b, 6) == 0;
}

bool gw_udp_doctor_unreachable(const char *advertised, const char *device_ip,
                               bool advertised_local)
{
    uint8_t adv[16], dev[16];
    enum gw_ip_class ac = gw_ip_class_of(advertised), dc;

    if (!parse_ip(device_ip, dev)) {
        return false;
    }
    dc = class_of(dev);
    switch (ac) {
    case GW_IP_UNSPECIFIED:
    case GW_IP_LOOPBACK:
        return dc != GW_IP_LOOPBACK;
    case GW_IP_PRIVATE:
    case GW_IP_LINK_LOCAL:
        if (dc == GW_IP_LOOPBACK) {
            return !advertised_local;
        }
        if (dc != GW_IP_PRIVATE && dc != GW_IP_LINK_LOCAL) {
            return true;
        }
        return !parse_ip(advertised, adv) || !same_network(adv, dev);
    default:
        return false;
    }
}

bool gw_ip_is_local(const char *text)
{
    struct ifaddrs *list, *i;
    uint8_t want[16], have[16];
    uint16_t port;
    bool found = false;

    if (!parse_ip(text, want) || getifaddrs(&list) != 0) {
        return false;
    }
    for (i = list; i != NULL && !found; i = i->ifa_next) {
        if (i->ifa_addr == NULL || (i->ifa_addr->sa_family != AF_INET &&
                                    i->ifa_addr->sa_family != AF_INET6)) {
            continue;
        }
        sockaddr_ip(i->ifa_addr, have, &port);
        found = memcmp(want, have, 16) == 0;
    }
    freeifaddrs(list);
    return found;
}

/* ---- the watched addresses ---- */

static uint32_t watch_home(const uint8_t ip[16])
{
    uint32_t w[4];

    memcpy(w, ip, sizeof(w));
    return ((w[0] ^ w[1] ^ w[2] ^ w[3]) * 0x9e3779b1u) >>
           (32 - GW_UDP_WATCH_BITS);
}

static struct gw_udp_watch *watch_find(struct gw_udp_audio *ua,
                                       const uint8_t ip[16])
{
    const uint32_t mask = GW_UDP_WATCH_SLOTS - 1;

    if (ua->watch == NULL || ua->n_watch == 0) {
        return NULL;
    }
    for (uint32_t i = watch_home(ip);; i = (i + 1) & mask) {
        struct gw_udp_watch *w = &ua->watch[i];
        if (w->refs == 0) {
            return NULL;
        }
        if (memcmp(w->ip, ip, 16) == 0) {
            return w;
        }
    }
}

/* Adds a reference to ip's slot, made if needed; NULL when full. */
static struct gw_udp_watch *watch_add(struct gw_udp_audio *ua,
                                      const uint8_t ip[16])
{
    const uint32_t mask = GW_UDP_WATCH_SLOTS - 1;
    struct gw_udp_watch *w = watch_find(ua, ip);

    if (w != NULL) {
        w->refs++;
        return w;
    }
    if (ua->n_watch >= GW_UDP_WATCH_SLOTS / 2) {
        return NULL;
    }
    if (ua->watch == NULL &&
        (ua->watch = calloc(GW_UDP_WATCH_SLOTS, sizeof(*ua->watch))) == NULL) {
        return NULL;
    }
    for (uint32_t i = watch_home(ip);; i = (i + 1) & mask) {
        w = &ua->watch[i];
        if (w->refs == 0) {
            memset(w, 0, sizeof(*w));
            memcpy(w->ip, ip, 16);
            w->refs = 1;
            ua->n_watch++;
            return w;
        }
    }
}

/* Drops a reference; the last empties the slot, shifting the probe chain
 * behind it back so that no tombstone is left (as ssrc_table.c does). */
static void watch_release(struct gw_udp_audio *ua, const uint8_t ip[16])
{
    const uint32_t mask = GW_UDP_WATCH_SLOTS - 1;
    struct gw_udp_watch *w = watch_find(ua, ip);
    uint32_t i, j;

    if (w == NULL || --w->refs > 0) {
        return;
    }
    ua->n_watch--;
    i = (uint32_t)(w - ua->watch);
    for (j = (i + 1) & mask; ua->watch[j].refs != 0; j = (j + 1) & mask) {
        uint32_t k = watch_home(ua->watch[j].ip);
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            ua->watch[i] = ua->watch[j];
            i = j;
        }
    }
    memset(&ua->watch[i], 0, sizeof(ua->watch[i]));
}

void gw__udp_doctor_unwatch(struct gw_udp_peer *peer)
{
    if (peer->ev.watching && peer->ua != NULL) {
        watch_release(peer->ua, peer->ev.ip);
    }
    peer->ev.watching = false;
}

void gw_udp_peer_set_device_ip(struct gw_udp_peer *peer, const char *ip)
{
    struct gw_udp_evidence *ev = &peer->ev;
    struct gw_udp_watch *w;

    if (peer->ua == NULL || ev->has_ip || ev->checked ||
        !parse_ip(ip, ev->ip)) {
        return;
    }
    ev->has_ip = true;
    w = watch_add(peer->ua, ev->ip);
    if (w == NULL) {
        peer->ua->stats.doctor_unwatched++;
        return;
    }
    ev->watching = true;
    ev->unknown_base = w->unknown;
}

/* ---- evidence ---- */

static void bump(uint32_t *n)
{
    if (*n != UINT32_MAX) {
        (*n)++;
    }
}

/*
 * Only drops come here, and only counters and an address are written: a
 * flood costs what the drop counters cost. Unknown ssrcs count only from a
 * watched address; a datagram naming a session counts for it.
 */
void gw__udp_doctor_note(struct gw_udp_audio *ua,
                         const struct gw_udp_verdict *v,
                         const struct sockaddr *from)
{
    struct gw_udp_evidence *ev;
    uint8_t ip[16];
    uint16_t port;
    bool mine;

    if (v->peer == NULL) {
        struct gw_udp_watch *w;
        if (v->reason != GW_UDP_DROP_UNKNOWN || ua->n_watch == 0) {
            return;
        }
        sockaddr_ip(from, ip, &port);
        if ((w = watch_find(ua, ip)) != NULL) {
            bump(&w->unknown);
            w->last_ssrc = v->h.ssrc;
            w->last_port = port;
        }
        return;
    }
    ev = &v->peer->ev;
    if (ev->checked || v->reason == GW_UDP_DROP_REPLAY) {
        return;
    }
    sockaddr_ip(from, ip, &port);
    mine = !ev->has_ip || memcmp(ip, ev->ip, 16) == 0;
    if (mine) {
        bump(v->reason == GW_UDP_DROP_OPUS ? &ev->undecryptable
                                           : &ev->rejected);
    } else {
        bump(&ev->stray);
        if (ev->undecryptable + ev->rejected > 0) {
            return; /* the device's own evidence keeps its address */
        }
    }
    ev->reason = (uint8_t)v->reason;
    memcpy(ev->from_ip, ip, 16);
    ev->from_port = port;
}

/* ---- the look ---- */

/* Accepted packets not of the hello's frame length: noise under a wrong
 * key that passed as Opus. */
static uint64_t misfit(const struct gw_udp_peer *peer)
{
    return peer->rx_count - peer->rx_fit;
}

static enum gw_udp_doctor_cause diagnose(const struct gw_udp_peer *peer,
                                         const struct gw_udp_doctor_ctx *ctx)
{
    const struct gw_udp_evidence *ev = &peer->ev;
    uint64_t bad = ev->undecryptable + misfit(peer);

    /* The right key never makes a datagram that is not Opus, while noise
     * under a wrong one passes as Opus of another frame length about as
     * often as not (refused by the address rule until an address is
     * learned): a fifth of failures to decrypt is the key's fault. */
    if (bad > 0 || ev->rejected > 0) {
        return bad * 4 >= ev->rejected ? GW_UDP_DOCTOR_UNDECRYPTABLE
                                       : GW_UDP_DOCTOR_REJECTED;
    }
    if (ev->unknown > 0) {
        return GW_UDP_DOCTOR_UNKNOWN_SSRC;
    }
    /* The interfaces are read only when they decide. */
    if (gw_udp_doctor_unreachable(ctx->public_host, ctx->device_ip, false) &&
        (gw_ip_class_of(ctx->device_ip) != GW_IP_LOOPBACK ||
         !gw_ip_is_local(ctx->public_host))) {
        return GW_UDP_DOCTOR_ADVERTISED;
    }
    if (ev->stray > 0) {
        return ev->reason == GW_UDP_DROP_OPUS ? GW_UDP_DOCTOR_UNDECRYPTABLE
                                              : GW_UDP_DOCTOR_REJECTED;
    }
    return GW_UDP_DOCTOR_NOTHING;
}

/* What the evidence of the cause was, for the line. */
static void describe(const struct gw_udp_peer *peer,
                     const struct gw_udp_doctor_ctx *ctx,
                     enum gw_udp_doctor_cause cause, char *out, size_t size)
{
    const struct gw_udp_evidence *ev = &peer->ev;
    const char *dev = ctx->device_ip != NULL && ctx->device_ip[0] != '\0'
                          ? ctx->device_ip
                          : "an unknown address";
    char from[64], also[96] = "";

    format_ip(ev->from_ip, ev->from_port, from, sizeof(from));
    switch (cause) {
    case GW_UDP_DOCTOR_ADVERTISED:
        snprintf(out, size,
                 "udp.public_host %s is a %s address, which the device at %s "
                 "cannot reach",
                 ctx->public_host,
                 gw_ip_class_name(gw_ip_class_of(ctx->public_host)), dev);
        break;
    case GW_UDP_DOCTOR_UNDECRYPTABLE:
    case GW_UDP_DOCTOR_REJECTED:
        if (misfit(peer) > 0) {
            snprintf(also, sizeof(also),
                     " and %llu more passed as Opus of another frame length",
                     (unsigned long long)misfit(peer));
        }
        snprintf(
            out, size,
            "%u datagram(s) with this session's ssrc from %s%s %s (last "
            "dropped as %s)%s",
            cause == GW_UDP_DOCTOR_UNDECRYPTABLE ? ev->undecryptable
                                                 : ev->rejected,
            ev->undecryptable + ev->rejected > 0 ? "the device at " : "", from,
            cause == GW_UDP_DOCTOR_UNDECRYPTABLE ? "did not decrypt to Opus"
                                                 : "decrypted but were refused",
            gw_udp_drop_name((enum gw_udp_drop)ev->reason), also);
        if (ev->undecryptable + ev->rejected == 0) {
            snprintf(out, size,
                     "%u datagram(s) with this session's ssrc came from %s, "
                     "not from the device's address, and were dropped as %s",
                     ev->stray, from,
                     gw_udp_drop_name((enum gw_udp_drop)ev->reason));
        }
        break;
    case GW_UDP_DOCTOR_UNKNOWN_SSRC:
        format_ip(ev->ip, ev->unknown_port, from, sizeof(from));
        snprintf(out, size,
                 "%u datagram(s) from the device's address (last %s) name ssrc "
                 "%08x, which is not this session's (%08x) nor any other's",
                 ev->unknown, from, ev->unknown_ssrc, peer->ssrc);
        break;
    default:
        snprintf(out, size,
                 "no datagram with this session's ssrc came, from anywhere%s",
                 ev->watching ? ", nor any from the device's address" : "");
        break;
    }
}

bool gw_udp_peer_examine(struct gw_udp_peer *peer,
                         const struct gw_udp_doctor_ctx *ctx)
{
    struct gw_udp_evidence *ev = &peer->ev;
    struct gw_udp_watch *w;
    enum gw_udp_doctor_cause cause;
    char why[320];

    if (peer->ua == NULL || ev->checked) {
        return !ev->diagnosed;
    }
    ev->checked = true;
    if (ev->watching && (w = watch_find(peer->ua, ev->ip)) != NULL) {
        ev->unknown = w->unknown - ev->unknown_base;
        ev->unknown_ssrc = w->last_ssrc;
        ev->unknown_port = w->last_port;
    }
    gw__udp_doctor_unwatch(peer);
    /* More valid audio than datagrams of the device's that failed: a
     * device with a wrong key gets some noise through, never most. */
    if (peer->rx_fit > 0 &&
        peer->rx_fit > ev->undecryptable + ev->rejected + misfit(peer)) {
        return true;
    }
    cause = diagnose(peer, ctx);
    ev->diagnosed = true;
    ev->cause = (uint8_t)cause;
    peer->ua->stats.doctor[cause]++;
    describe(peer, ctx, cause, why, sizeof(why));
    gw_log_peer(
        GW_LOG_WARN, ctx->key, peer->subject != NULL ? peer->subject : "udp",
        "no valid UDP audio %llu ms after the server hello: device "
        "mac %s was told udp %s:%d, the broker saw it at %s; cause "
        "%s: %s; %s",
        (unsigned long long)ctx->after_ms, ctx->mac != NULL ? ctx->mac : "?",
        ctx->public_host, ctx->public_port,
        ctx->device_ip != NULL && ctx->device_ip[0] != '\0'
            ? ctx->device_ip
            : "an unknown address",
        gw_udp_doctor_name(cause), why, gw_udp_doctor_hint(cause));
    return false;
}

bool gw_udp_peer_examined(const struct gw_udp_peer *peer)
{
    return peer->ev.checked;
}

void gw_udp_peer_doctor_view(const struct gw_udp_peer *peer,
                             struct gw_udp_doctor_view *out)
{
    const struct gw_udp_evidence *ev = &peer->ev;

    memset(out, 0, sizeof(*out));
    out->ev = ev;
    out->packets = peer->rx_count;
    out->last_age_ms =
        peer->rx_count > 0 ? (int64_t)gw_udp_peer_idle_ms(peer) : -1;
    out->diagnosed = ev->diagnosed;
    out->cause = (enum gw_udp_doctor_cause)ev->cause;
    out->state = ev->diagnosed                     ? "no_audio"
                 : peer->rx_fit > 0 || ev->checked ? "ok"
                                                   : "waiting";
    if (ev->undecryptable + ev->rejected + ev->stray > 0) {
        format_ip(ev->from_ip, ev->from_port, out->from, sizeof(out->from));
    }
}
