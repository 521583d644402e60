/*
 * Logging: one line per event, to stderr, as text or JSON. Every line names
 * its subject (a session, the MQTT link, the config) so that one grep
 * follows one device. Never pass keys, nonces or audio here.
 */
#ifndef GW_LOG_H
#define GW_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

/* Levels, most severe first, with the names the config uses. */
#define GW_LOG_LEVEL_MAP(XX)                                                   \
    XX(ERROR, "error")                                                         \
    XX(WARN, "warn")                                                           \
    XX(INFO, "info")                                                           \
    XX(DEBUG, "debug")

enum gw_log_level {
#define XX(level, _) GW_LOG_##level,
    GW_LOG_LEVEL_MAP(XX)
#undef XX
        GW_LOG_LEVEL_COUNT_
};

enum gw_log_format { GW_LOG_TEXT, GW_LOG_JSON };

/* Changes take effect for the next line; safe to call at any time. */
void gw_log_set_level(enum gw_log_level level);
void gw_log_set_format(enum gw_log_format format);
enum gw_log_level gw_log_get_level(void);

/* Level names as written in the config: "error", "warn", "info", "debug". */
const char *gw_log_level_name(enum gw_log_level level);

/*
 * Writes one line. subject is the identity prefix ("gw", "mqtt",
 * "dev=GID@@@aa_bb@@@u sid=..."); NULL prints as "-". The message is
 * sanitised: control characters become '.', so peer bytes cannot forge
 * lines.
 */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void gw_log(enum gw_log_level level, const char *subject, const char *fmt,
            ...);

#if defined(__GNUC__)
__attribute__((format(printf, 3, 0)))
#endif
void gw_vlog(enum gw_log_level level, const char *subject, const char *fmt,
             va_list ap);

/*
 * Lines a peer can make us write (a device, an MCP client or server, an
 * HTTP client): a few a second per source key (its client id, session or
 * address) and a bound over all sources together, so no peer floods the
 * log. A line left out is counted (gw_log_peer_suppressed(), in
 * /metrics), and the source's next line written ends with how many of its
 * own were left out before it. key NULL: the subject. Lines of a level
 * that is filtered out cost nothing and are not counted.
 */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
void gw_log_peer(enum gw_log_level level, const char *key, const char *subject,
                 const char *fmt, ...);

/*
 * The limit alone, for a caller that writes its line itself: whether a
 * line of level about key may be written now; *skipped (may be NULL) gets
 * its lines left out since its last one (say so in the line).
 */
bool gw_log_peer_may(enum gw_log_level level, const char *key,
                     uint64_t *skipped);

/*
 * The same with a limiter of the caller's own (other rates, loop time):
 * gw_ratelimit_take (common/ratelimit.h), a refusal counted with the
 * others in gw_log_peer_suppressed().
 */
struct gw_ratelimit;
bool gw_log_limit_take(struct gw_ratelimit *rl, const char *key,
                       uint64_t now_ms, uint64_t *skipped);

/* text as one line, saying skipped lines were left out before it if any. */
void gw_log_skipped(enum gw_log_level level, const char *subject,
                    uint64_t skipped, const char *text);

/* Peers' lines left out since the start (all of the above). */
uint64_t gw_log_peer_suppressed(void);

/* Skips the formatting work entirely when the level is filtered out. */
#define GW_LOG(level, subject, ...)                                            \
    do {                                                                       \
        if ((level) <= gw_log_get_level()) {                                   \
            gw_log((level), (subject), __VA_ARGS__);                           \
        }                                                                      \
    } while (0)

#endif /* GW_LOG_H */
