/*
 * What every loop test sets up around its real libuv loop: a guard timer
 * that fails a test whose loop would hang, a bounded close that checks
 * every handle is gone, free 127.0.0.1 ports and TLS certificates.
 */
#ifndef GW_TEST_FIXTURE_H
#define GW_TEST_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

/*
 * The guard of one test. Generous: the sanitizer build on a loaded
 * two-core machine runs many times slower than on an idle one, and every
 * wait ends on its event, so a long bound costs nothing when all is well.
 * GW_TEST_GUARD_MS overrides it (valgrind, a debugger).
 */
#define GW_FIXTURE_GUARD_MS 60000

struct gw_fixture {
    uv_loop_t loop;
    uv_timer_t guard;
    bool timed_out;
    uint64_t guard_ms; /* the running guard's bound, for the messages */
};

/* The guard's bound: GW_TEST_GUARD_MS, else GW_FIXTURE_GUARD_MS. */
uint64_t gw_fixture_guard_ms(void);

/* Initializes fx->loop and starts the guard with gw_fixture_guard_ms(). */
void gw_fixture_loop_init(struct gw_fixture *fx);

/* Restarts the guard with a bound of its own: ms from now. */
void gw_fixture_guard_start(struct gw_fixture *fx, uint64_t ms);

/*
 * One turn of loop; fails the test at file:line, naming what it waited
 * for and listing the live handles, once *timed_out is set. For helpers
 * that hold a loop and a guard flag but not a whole fixture.
 */
void gw_loop_run_once(uv_loop_t *loop, const bool *timed_out, const char *what,
                      const char *file, int line);

/* Runs loop until cond holds; the guard behind timed_out bounds it. */
#define GW_LOOP_RUN_UNTIL(loop, timed_out, cond)                               \
    do {                                                                       \
        while (!(cond)) {                                                      \
            gw_loop_run_once((loop), (timed_out), #cond, __FILE__, __LINE__);  \
        }                                                                      \
    } while (0)

/* Runs fx's loop until cond holds, within the guard. */
#define GW_FIXTURE_RUN_UNTIL(fx, cond)                                         \
    GW_LOOP_RUN_UNTIL(&(fx)->loop, &(fx)->timed_out, cond)

/*
 * Lets close callbacks and the handles' last work run out under a fresh
 * guard, then closes the guard and the loop, asserting uv_loop_close() == 0:
 * whatever the test opened, it must have closed.
 */
void gw_fixture_loop_close(struct gw_fixture *fx);

/* A 127.0.0.1 port nothing is bound to (released before it is used);
 * type is SOCK_STREAM or SOCK_DGRAM. */
int gw_fixture_free_port(int type);

/*
 * Makes a temporary directory of PEM files and writes its path to dir: a
 * test CA (ca.crt) and leaves <name>.crt with <name>.key: good
 * (localhost, 127.0.0.1), wrong (another name), rogue (localhost, but
 * from a CA nobody trusts) and iponly (127.0.0.1 and no name).
 */
void gw_fixture_certs(char *dir, size_t cap);

/* Removes what gw_fixture_certs() made. */
void gw_fixture_certs_remove(const char *dir);

/* dir/file, in one of four buffers that later calls reuse in turn. */
const char *gw_fixture_cert(const char *dir, const char *file);

/* Runs only the tests GW_TEST_FILTER names (a cmocka pattern such as
 * "test_tls"), when it is set; call before cmocka_run_group_tests(). */
void gw_fixture_filter(void);

#endif /* GW_TEST_FIXTURE_H */
