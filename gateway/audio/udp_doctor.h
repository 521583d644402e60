/*
 * The UDP path doctor (docs/protocol.md section 4.6): a few seconds after
 * the server hello, why a session's device sent no valid audio, told apart
 * from what the uplink kept and from the address the device was told.
 */
#ifndef GW_UDP_DOCTOR_H
#define GW_UDP_DOCTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The causes, each with its metric label: one list makes the enum
 * (GW_UDP_DOCTOR_<cause>) and gw_udp_doctor_name().
 */
#define GW_UDP_DOCTOR_MAP(XX)                                                  \
    XX(NOTHING, "nothing")               /* no datagram of the device */       \
    XX(ADVERTISED, "advertised_address") /* public_host it cannot reach */     \
    XX(UNDECRYPTABLE, "undecryptable")   /* its ssrc, but another key */       \
    XX(REJECTED, "rejected")             /* decrypts, breaks a rule */         \
    XX(UNKNOWN_SSRC, "unknown_ssrc")     /* its address, no session's ssrc */

enum gw_udp_doctor_cause {
#define XX(cause, _) GW_UDP_DOCTOR_##cause,
    GW_UDP_DOCTOR_MAP(XX)
#undef XX
        GW_UDP_DOCTOR_COUNT_
};

/* Metric label of a cause ("nothing"...); never NULL. */
const char *gw_udp_doctor_name(enum gw_udp_doctor_cause cause);

/* What an operator does about a cause: one sentence; never NULL. */
const char *gw_udp_doctor_hint(enum gw_udp_doctor_cause cause);

/*
 * A session's evidence, kept in its peer from the start until the doctor's
 * look (then frozen): only counters and one address, never allocated.
 * Datagrams naming the session's ssrc count as the device's when they come
 * from the address the broker saw it at (ip), or when that is not known.
 */
struct gw_udp_evidence {
    uint8_t ip[16];     /* the device's, IPv4 mapped into IPv6 */
    bool has_ip;        /* ip was given (gw_udp_peer_set_device_ip) */
    bool watching;      /* ip holds a slot of the unknown-ssrc table */
    bool checked;       /* the doctor looked: counting stopped */
    bool diagnosed;     /* and warned, for cause */
    uint8_t cause;      /* enum gw_udp_doctor_cause */
    uint8_t reason;     /* enum gw_udp_drop of the last one counted */
    uint16_t from_port; /* where the last one counted came from */
    uint8_t from_ip[16];
    uint32_t undecryptable; /* the device's, not Opus under the key */
    uint32_t rejected;      /* the device's, decrypted but refused (not
                               replays: a network may duplicate) */
    uint32_t stray;         /* either, from another address */
    uint32_t unknown_base;  /* the table's count for ip at the start */
    uint32_t unknown;       /* at the look: unknown-ssrc datagrams from ip */
    uint32_t unknown_ssrc;  /* the last of them named this ssrc */
    uint16_t unknown_port;  /* and came from this port */
};

/* Where a host string points (an IP literal, or a name). */
enum gw_ip_class {
    GW_IP_NAME,        /* not an IP literal: not judged */
    GW_IP_UNSPECIFIED, /* 0.0.0.0, :: */
    GW_IP_LOOPBACK,    /* 127/8, ::1, "localhost" */
    GW_IP_PRIVATE,     /* 10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7 */
    GW_IP_LINK_LOCAL,  /* 169.254/16, fe80::/10 */
    GW_IP_PUBLIC,      /* anything else */
};

enum gw_ip_class gw_ip_class_of(const char *host);

/* "loopback", "private"... for messages. */
const char *gw_ip_class_name(enum gw_ip_class c);

/*
 * Whether a device the broker saw at device_ip likely cannot reach
 * advertised (udp.public_host): a loopback or unspecified address while
 * the device is not on this host; a private or link-local one while the
 * device is public, or private in another network (another range, or
 * another /16; /48 for IPv6), or on this host while this host does not
 * have the address (advertised_local false). A name, a public address or
 * an unknown device (device_ip NULL or "") is never judged so. Pure.
 */
bool gw_udp_doctor_unreachable(const char *advertised, const char *device_ip,
                               bool advertised_local);

/* Whether ip (a literal) is an address of one of this host's interfaces. */
bool gw_ip_is_local(const char *ip);

/* What the doctor's line says besides what the peer knows. */
struct gw_udp_doctor_ctx {
    const char *public_host; /* what the device was told */
    int public_port;
    const char *device_ip; /* the broker's word, or NULL / "" */
    const char *mac;       /* the device's, for the line */
    const char *key;       /* its client id: the line's rate limit */
    uint64_t after_ms;     /* since the server hello */
};

struct gw_udp_peer;

/*
 * The device's address as the broker saw it (an IP literal; NULL, "" or
 * anything else: unknown), right after gw_udp_peer_start(): datagrams of
 * an unknown ssrc from it are counted for this session, within a bounded
 * table (when full, not: counted in doctor_unwatched).
 */
void gw_udp_peer_set_device_ip(struct gw_udp_peer *peer, const char *ip);

/*
 * The doctor's one look, once per start: true when the device sent valid
 * audio (accepted packets of the hello's frame length, and more of them
 * than datagrams of its that failed); else the cause is kept, counted and
 * said in one warning line, and false. Counting stops either way.
 */
bool gw_udp_peer_examine(struct gw_udp_peer *peer,
                         const struct gw_udp_doctor_ctx *ctx);

/* Whether the doctor has looked since the start. */
bool gw_udp_peer_examined(const struct gw_udp_peer *peer);

/* What GET /api/devices/{id} shows of a peer. */
struct gw_udp_doctor_view {
    const char *state;   /* "waiting", "ok" or "no_audio" */
    uint64_t packets;    /* accepted */
    int64_t last_age_ms; /* since the last accepted, -1 for none */
    bool diagnosed;      /* cause below is valid */
    enum gw_udp_doctor_cause cause;
    const struct gw_udp_evidence *ev;
    char from[64]; /* ev's last source, "" for none */
};

void gw_udp_peer_doctor_view(const struct gw_udp_peer *peer,
                             struct gw_udp_doctor_view *out);

#endif /* GW_UDP_DOCTOR_H */
