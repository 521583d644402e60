/*
 * text/event-stream (the WHATWG "server-sent events" format), as MCP's
 * Streamable HTTP transport carries JSON-RPC messages on a response: a
 * pure, bounded, incremental parser. Bytes go in as they arrive, in any
 * split; each complete event comes out through a callback.
 */
#ifndef GW_CODEC_SSE_H
#define GW_CODEC_SSE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* Longest event type or id kept; a longer one is refused (GW_ETOOBIG). */
#define GW_SSE_NAME_MAX 128

/* One dispatched event; every pointer is valid during the callback only. */
struct gw_sse_event {
    const char *event; /* "message" unless an event: field set it */
    const char *data;  /* the data: lines joined by '\n', NUL-terminated */
    size_t data_len;
    const char *id; /* the last id: seen on the stream, "" when none */
};

/* Returns 0 to go on; anything else stops the feed and is returned. */
typedef int (*gw_sse_event_cb)(void *arg, const struct gw_sse_event *ev);

struct gw_sse_parser {
    size_t max_line;  /* bytes of one line, its end excluded */
    size_t max_event; /* bytes of one event's data */
    char *line;       /* the line being read */
    size_t line_len, line_cap;
    char *data; /* the event's data so far */
    size_t data_len, data_cap;
    bool has_data; /* a data: field was seen (even an empty one) */
    char event[GW_SSE_NAME_MAX + 1];
    char id[GW_SSE_NAME_MAX + 1];
    bool after_cr;  /* the last byte was a CR: a LF next ends nothing */
    bool started;   /* past a possible byte order mark */
    size_t bom_len; /* BOM bytes matched so far, at the very start */
    int failed;     /* the error that stopped it, sticky */
};

/* A parser with these limits (each at least 1); needs gw_sse_free. */
void gw_sse_init(struct gw_sse_parser *p, size_t max_line, size_t max_event);

/*
 * Feeds buf[0..len). Calls cb for each event completed by a blank line.
 * Returns 0; GW_ETOOBIG when a line, an event's data, its type or its id
 * is over the limits; GW_EINVAL on NULL arguments; GW_ENOMEM; or the
 * callback's non-zero value. After any failure the parser stays failed
 * and every later feed returns the same value. Comments (":...") and
 * unknown fields are skipped; "retry" is ignored. An event with no data
 * field is not dispatched (as the standard says).
 */
GW_MUST_CHECK int gw_sse_feed(struct gw_sse_parser *p, const char *buf,
                              size_t len, gw_sse_event_cb cb, void *arg);

/* Whether a partial line or event is pending: a stream that ends here
 * was cut off in the middle of an event. */
bool gw_sse_pending(const struct gw_sse_parser *p);

/* Frees the buffers; the parser may be initialised again. */
void gw_sse_free(struct gw_sse_parser *p);

#endif /* GW_CODEC_SSE_H */
