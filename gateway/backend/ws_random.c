/*
 * The random bytes libwebsockets asks for (docs/architecture.md section
 * 3). libwebsockets 4.1 masks every client frame with 4 bytes from
 * lws_get_random(), which read()s them from /dev/urandom: one system call
 * and one kernel CRNG run per relayed packet (bench/NOTES.md). The
 * library calls its own lws_get_random through its PLT, so this
 * definition in the executable takes its place (ELF symbol interposition;
 * the link exports it, gateway/CMakeLists.txt).
 *
 * The bytes come from OpenSSL's DRBG, which the TLS connections already
 * use, drawn 4 KiB at a time: a cryptographically strong source, as RFC
 * 6455 section 5.3 asks of masking keys, without a system call per frame.
 * The buffer is per thread (each instance's loop has its own), and a
 * byte is handed out once.
 */
#include <stddef.h>
#include <string.h>

#include <libwebsockets.h>
#include <openssl/rand.h>

#include "gateway/backend/ws_random.h"

#define POOL_BYTES 4096

static _Thread_local unsigned char pool[POOL_BYTES];
static _Thread_local size_t pool_left; /* unused bytes at the pool's end */

size_t gw_ws_random(void *buf, size_t len)
{
    unsigned char *out = buf;
    size_t done = 0;

    while (done < len) {
        if (pool_left == 0) {
            if (RAND_bytes(pool, POOL_BYTES) != 1) {
                return done; /* lws treats a short count as failure */
            }
            pool_left = POOL_BYTES;
        }
        size_t n = len - done < pool_left ? len - done : pool_left;
        unsigned char *from = pool + POOL_BYTES - pool_left;
        memcpy(out + done, from, n);
        /* Handed out once: what remains in memory is not a key again. */
        memset(from, 0, n);
        pool_left -= n;
        done += n;
    }
    return done;
}

/* The frame writes of backend_io.c call gw_ws_random directly: the
 * context lws passes is not needed, and reading it from the connection is
 * a cache miss per frame. */
size_t lws_get_random(struct lws_context *context, void *buf, size_t len)
{
    (void)context;
    return gw_ws_random(buf, len);
}
