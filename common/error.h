/*
 * Error codes shared by every module: 0 is success, negative values are
 * failures. System and libuv errors pass through as negative errno values;
 * gateway codes live in their own range below GW_ERR_BASE.
 */
#ifndef GW_ERROR_H
#define GW_ERROR_H

#if defined(__GNUC__)
#define GW_MUST_CHECK __attribute__((warn_unused_result))
#else
#define GW_MUST_CHECK
#endif

/* Far below errno values and libuv's own range (-4095 .. -3000). */
#define GW_ERR_BASE (-30000)

/*
 * Peer faults are kept apart so that counters and logs say who was wrong:
 * MALFORMED (bytes do not parse), TRUNC (shorter than declared), TOOBIG
 * (over a limit), PROTO (parses, but not allowed here), AUTH (bad
 * credential or MAC). IO is a database or disk that failed us.
 */
#define GW_ERRNO_MAP(XX)                                                       \
    XX(INVAL, "invalid argument")                                              \
    XX(NOMEM, "out of memory")                                                 \
    XX(NOSPC, "output buffer too small")                                       \
    XX(MALFORMED, "malformed input")                                           \
    XX(TRUNC, "truncated input")                                               \
    XX(TOOBIG, "input exceeds limit")                                          \
    XX(PROTO, "protocol violation")                                            \
    XX(UTF8, "invalid UTF-8")                                                  \
    XX(AUTH, "authentication failed")                                          \
    XX(CRYPTO, "crypto library failure")                                       \
    XX(CONFIG, "invalid configuration")                                        \
    XX(NOENT, "not found")                                                     \
    XX(EXIST, "already exists")                                                \
    XX(OPUS, "invalid opus packet")                                            \
    XX(REPLAY, "replayed or reordered packet")                                 \
    XX(LIMIT, "resource limit reached")                                        \
    XX(IO, "storage failure")

enum gw_errno {
    GW_ERR_FIRST_ = GW_ERR_BASE,
#define XX(code, _) GW_E##code,
    GW_ERRNO_MAP(XX)
#undef XX
        GW_ERR_LAST_
};

/* Human-readable text for any error this program returns, never NULL. */
const char *gw_strerror(int err);

/* Symbolic name ("GW_EPROTO", "EPIPE"...), never NULL. */
const char *gw_err_name(int err);

#endif /* GW_ERROR_H */
