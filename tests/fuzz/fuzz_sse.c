/*
 * The event-stream parser: any bytes, split anywhere, must give the same
 * events as the whole input (or the same failure), every event within the
 * limits, and no leak after a failure.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/sse.h"

#define MAX_LINE  256
#define MAX_EVENT 512

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A running digest of what the events said. */
struct digest {
    uint64_t h;
    size_t n;
};

static void mix(struct digest *d, const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++) {
        d->h = (d->h ^ b[i]) * 1099511628211ull;
    }
    d->h = (d->h ^ 0xff) * 1099511628211ull;
}

static int on_event(void *arg, const struct gw_sse_event *ev)
{
    struct digest *d = arg;

    if (ev->data_len > MAX_EVENT || strlen(ev->event) > GW_SSE_NAME_MAX ||
        strlen(ev->id) > GW_SSE_NAME_MAX || ev->data[ev->data_len] != '\0' ||
        ev->event[0] == '\0') {
        abort();
    }
    mix(d, ev->event, strlen(ev->event));
    mix(d, ev->data, ev->data_len);
    mix(d, ev->id, strlen(ev->id));
    d->n++;
    return 0;
}

static int run(const uint8_t *data, size_t size, size_t cut, size_t step,
               struct digest *d)
{
    struct gw_sse_parser p;
    int rc;

    gw_sse_init(&p, MAX_LINE, MAX_EVENT);
    rc = gw_sse_feed(&p, (const char *)data, cut, on_event, d);
    for (size_t i = cut; rc == 0 && i < size; i += step) {
        size_t n = size - i < step ? size - i : step;
        rc = gw_sse_feed(&p, (const char *)data + i, n, on_event, d);
    }
    gw_sse_free(&p);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct digest whole = {0}, split = {0};
    size_t cut, step;
    int a, b;

    if (size < 2 || size > 8192) {
        return 0;
    }
    /* The first two bytes choose the split, the rest is the stream. */
    cut = data[0] % (size - 1);
    step = (size_t)data[1] % 17 + 1;
    data += 2;
    size -= 2;
    cut = cut > size ? size : cut;
    a = run(data, size, size, 1, &whole);
    b = run(data, size, cut, step, &split);
    if (a != b) {
        abort();
    }
    /* The same events, also those before a failure. */
    if (whole.n != split.n || whole.h != split.h) {
        abort();
    }
    return 0;
}
