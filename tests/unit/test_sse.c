/* The event-stream parser: fields, line ends, splits, limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "codec/sse.h"

#define MAX_EVENTS 16

struct seen {
    size_t n;
    char event[MAX_EVENTS][GW_SSE_NAME_MAX + 1];
    char data[MAX_EVENTS][256];
    size_t data_len[MAX_EVENTS];
    char id[MAX_EVENTS][GW_SSE_NAME_MAX + 1];
    int stop_at; /* return 1 on this event (1-based), 0: never */
};

static int on_event(void *arg, const struct gw_sse_event *ev)
{
    struct seen *s = arg;

    assert_true(s->n < MAX_EVENTS);
    snprintf(s->event[s->n], sizeof(s->event[0]), "%s", ev->event);
    assert_true(ev->data_len < sizeof(s->data[0]));
    memcpy(s->data[s->n], ev->data, ev->data_len + 1);
    assert_int_equal(ev->data[ev->data_len], '\0');
    s->data_len[s->n] = ev->data_len;
    snprintf(s->id[s->n], sizeof(s->id[0]), "%s", ev->id);
    s->n++;
    return s->stop_at != 0 && (size_t)s->stop_at == s->n ? 1 : 0;
}

/* Feeds text whole, then again in every two-part split and byte by byte:
 * the events must be the same each time. */
static void feed_all_ways(const char *text, struct seen *whole)
{
    size_t len = strlen(text);
    struct gw_sse_parser p;

    memset(whole, 0, sizeof(*whole));
    gw_sse_init(&p, 1024, 1024);
    assert_int_equal(gw_sse_feed(&p, text, len, on_event, whole), 0);
    gw_sse_free(&p);
    for (size_t cut = 0; cut <= len; cut++) {
        struct seen s;
        memset(&s, 0, sizeof(s));
        gw_sse_init(&p, 1024, 1024);
        assert_int_equal(gw_sse_feed(&p, text, cut, on_event, &s), 0);
        assert_int_equal(gw_sse_feed(&p, text + cut, len - cut, on_event, &s),
                         0);
        gw_sse_free(&p);
        assert_int_equal(s.n, whole->n);
        for (size_t i = 0; i < s.n; i++) {
            assert_string_equal(s.event[i], whole->event[i]);
            assert_int_equal(s.data_len[i], whole->data_len[i]);
            assert_memory_equal(s.data[i], whole->data[i], s.data_len[i]);
            assert_string_equal(s.id[i], whole->id[i]);
        }
    }
    {
        struct seen s;
        memset(&s, 0, sizeof(s));
        gw_sse_init(&p, 1024, 1024);
        for (size_t i = 0; i < len; i++) {
            assert_int_equal(gw_sse_feed(&p, text + i, 1, on_event, &s), 0);
        }
        gw_sse_free(&p);
        assert_int_equal(s.n, whole->n);
    }
}

static void test_mcp_response(void **state)
{
    struct seen s;

    (void)state;
    feed_all_ways("event: message\nid: 7\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,"
                  "\"result\":{}}\n\n",
                  &s);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.event[0], "message");
    assert_string_equal(s.data[0],
                        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
    assert_string_equal(s.id[0], "7");
}

static void test_line_ends_and_fields(void **state)
{
    struct seen s;

    (void)state;
    /* CRLF, lone CR, LF; comments; a field without colon; no space. */
    feed_all_ways(": keep-alive\r\n"
                  "data:a\r\ndata: b\rdata\n"
                  "retry: 10\nfoo: bar\n\r\n"
                  "event: custom\ndata:  two spaces\n\n",
                  &s);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.event[0], "message");
    assert_int_equal(s.data_len[0], 4);
    assert_memory_equal(s.data[0], "a\nb\n", 4); /* empty last data line */
    assert_string_equal(s.event[1], "custom");
    assert_string_equal(s.data[1], " two spaces");
    assert_string_equal(s.id[1], "");
}

static void test_no_data_no_event(void **state)
{
    struct seen s;

    (void)state;
    /* An event type alone is not dispatched and does not leak into the
     * next event; ids persist across events. */
    feed_all_ways("event: x\nid: 1\n\ndata: d\n\nid\ndata: e\n\n\n\n", &s);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.event[0], "message");
    assert_string_equal(s.id[0], "1");
    assert_string_equal(s.data[0], "d");
    assert_string_equal(s.id[1], ""); /* "id" with no value resets it */
}

static void test_bom(void **state)
{
    struct seen s;

    (void)state;
    feed_all_ways("\xef\xbb\xbf"
                  "data: x\n\n",
                  &s);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.data[0], "x");
    /* Not a BOM: the bytes stay part of the first line (a field name). */
    feed_all_ways("\xef\xbb"
                  "data: y\n\ndata: z\n\n",
                  &s);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.data[0], "z");
}

static void test_unfinished(void **state)
{
    struct gw_sse_parser p;
    struct seen s = {0};

    (void)state;
    gw_sse_init(&p, 64, 64);
    assert_false(gw_sse_pending(&p));
    assert_int_equal(gw_sse_feed(&p, "data: x\n", 8, on_event, &s), 0);
    assert_true(gw_sse_pending(&p));
    assert_int_equal(s.n, 0);
    assert_int_equal(gw_sse_feed(&p, "\n", 1, on_event, &s), 0);
    assert_false(gw_sse_pending(&p));
    assert_int_equal(s.n, 1);
    assert_int_equal(gw_sse_feed(&p, NULL, 0, on_event, &s), 0);
    assert_int_equal(gw_sse_feed(&p, NULL, 1, on_event, &s), GW_EINVAL);
    gw_sse_free(&p);
}

static void test_limits(void **state)
{
    struct gw_sse_parser p;
    struct seen s = {0};
    char name[GW_SSE_NAME_MAX + 16];

    (void)state;
    /* A line of exactly max_line is fine, one more byte is not. */
    gw_sse_init(&p, 10, 100);
    assert_int_equal(gw_sse_feed(&p, "data: 1234\n\n", 12, on_event, &s), 0);
    assert_int_equal(gw_sse_feed(&p, "data: 12345", 11, on_event, &s),
                     GW_ETOOBIG);
    /* Sticky: nothing more is read. */
    assert_int_equal(gw_sse_feed(&p, "\n\n", 2, on_event, &s), GW_ETOOBIG);
    assert_int_equal(s.n, 1);
    gw_sse_free(&p);

    /* Data summed over lines (with the joining LFs) against max_event. */
    gw_sse_init(&p, 100, 5);
    assert_int_equal(
        gw_sse_feed(&p, "data: ab\ndata: cd\n\n", 19, on_event, &s),
        0); /* "ab\ncd": exactly 5 */
    assert_int_equal(gw_sse_feed(&p, "data: ab\ndata: cde\n", 19, on_event, &s),
                     GW_ETOOBIG);
    gw_sse_free(&p);

    /* Event type and id longer than GW_SSE_NAME_MAX. */
    memset(name, 'e', sizeof(name));
    memcpy(name, "event:", 6);
    name[sizeof(name) - 1] = '\n';
    gw_sse_init(&p, 1000, 1000);
    assert_int_equal(gw_sse_feed(&p, name, sizeof(name), on_event, &s),
                     GW_ETOOBIG);
    gw_sse_free(&p);
    memcpy(name, "id:   ", 6);
    gw_sse_init(&p, 1000, 1000);
    assert_int_equal(gw_sse_feed(&p, name, sizeof(name), on_event, &s),
                     GW_ETOOBIG);
    gw_sse_free(&p);
}

static void test_callback_stops(void **state)
{
    struct gw_sse_parser p;
    struct seen s = {.stop_at = 1};
    static const char text[] = "data: 1\n\ndata: 2\n\n";

    (void)state;
    gw_sse_init(&p, 64, 64);
    assert_int_equal(gw_sse_feed(&p, text, strlen(text), on_event, &s), 1);
    assert_int_equal(s.n, 1);
    assert_int_equal(gw_sse_feed(&p, text, strlen(text), on_event, &s), 1);
    assert_int_equal(s.n, 1);
    gw_sse_free(&p);
}

static void test_nul_bytes(void **state)
{
    struct gw_sse_parser p;
    struct seen s = {0};
    static const char text[] = "id: a\0b\ndata: x\0y\n\n";

    (void)state;
    gw_sse_init(&p, 64, 64);
    assert_int_equal(gw_sse_feed(&p, text, sizeof(text) - 1, on_event, &s), 0);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.data_len[0], 3); /* NUL kept inside data */
    assert_string_equal(s.id[0], "");   /* an id with a NUL is ignored */
    gw_sse_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mcp_response),
        cmocka_unit_test(test_line_ends_and_fields),
        cmocka_unit_test(test_no_data_no_event),
        cmocka_unit_test(test_bom),
        cmocka_unit_test(test_unfinished),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_callback_stops),
        cmocka_unit_test(test_nul_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
