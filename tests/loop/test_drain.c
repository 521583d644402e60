/*
 * The rolling restart's drain on a real loop (gateway/session/drain.c): when it
 * ends (at once when idle, when the last session goes, at the deadline),
 * what it tells the session table and the cluster, that a second request
 * changes nothing, and that closing it mid-way ends nothing. The session
 * table is a bare one whose live count the test sets: the drain reads
 * only that and ends what is on its live list (empty here).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "gateway/session/drain.h"
#include "gateway/session/session.h"

#include "fixture.h"

struct fixture {
    struct gw_fixture fx;
    struct gw_sessions sessions;
    struct gw_drain drain;
    unsigned started; /* on_start calls */
    unsigned done;    /* on_done calls */
    uint64_t done_ms; /* loop time of the first on_done */
    bool closed;
};

static void on_start(void *arg)
{
    struct fixture *f = arg;

    f->started++;
}

static void on_done(void *arg)
{
    struct fixture *f = arg;

    if (f->done++ == 0) {
        f->done_ms = uv_now(&f->fx.loop);
    }
}

static void on_closed(void *arg)
{
    struct fixture *f = arg;

    f->closed = true;
}

static int setup(void **state)
{
    struct fixture *f = test_calloc(1, sizeof(*f));

    gw_fixture_loop_init(&f->fx);
    gw_list_init(&f->sessions.live);
    gw_list_init(&f->sessions.closing);
    struct gw_drain_env env = {
        .loop = &f->fx.loop,
        .sessions = &f->sessions,
        .on_start = on_start,
        .on_done = on_done,
        .arg = f,
    };
    gw_drain_init(&f->drain, &env);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    gw_drain_close(&f->drain, on_closed, f);
    GW_FIXTURE_RUN_UNTIL(&f->fx, f->closed);
    gw_fixture_loop_close(&f->fx);
    test_free(f);
    return 0;
}

/* Nothing live: the end comes after the short linger, not the deadline. */
static void test_idle_ends_soon(void **state)
{
    struct fixture *f = *state;

    assert_string_equal(gw_drain_state_name(f->drain.state), "running");
    uint64_t t0 = uv_now(&f->fx.loop);
    assert_true(gw_drain_start(&f->drain, 300, "test"));
    assert_true(f->sessions.draining);
    assert_int_equal(f->started, 1);
    assert_true(gw_drain_active(&f->drain));
    assert_int_equal(gw_drain_seconds_left(&f->drain), 300);
    GW_FIXTURE_RUN_UNTIL(&f->fx, f->done > 0);
    assert_in_range(f->done_ms - t0, 150, 5000);
    assert_false(gw_drain_active(&f->drain));
    assert_string_equal(gw_drain_state_name(f->drain.state), "drained");
    assert_int_equal(f->drain.cut, 0);
}

/* A second request changes nothing: no new start, the same deadline. */
static void test_second_request(void **state)
{
    struct fixture *f = *state;

    f->sessions.n_live = 1;
    assert_true(gw_drain_start(&f->drain, 100, "first"));
    uint64_t deadline = f->drain.deadline_ms;
    assert_false(gw_drain_start(&f->drain, 5, "second"));
    assert_false(gw_drain_start(&f->drain, 500, "third"));
    assert_int_equal(f->started, 1);
    assert_int_equal(f->drain.requests, 3);
    assert_int_equal(f->drain.deadline_ms, deadline);
    assert_true(gw_drain_active(&f->drain));
    assert_int_equal(f->done, 0);
}

/* The last live session goes: the end follows without the deadline. */
static void test_last_session_ends_it(void **state)
{
    struct fixture *f = *state;

    f->sessions.n_live = 2;
    assert_true(gw_drain_start(&f->drain, 60, "test"));
    assert_int_equal(f->drain.at_start, 2);
    f->sessions.n_live = 1;
    gw_drain_sessions_changed(&f->drain); /* one left: nothing yet */
    f->sessions.n_live = 0;
    uint64_t t0 = uv_now(&f->fx.loop);
    gw_drain_sessions_changed(&f->drain);
    assert_int_equal(f->done, 0); /* never from inside the caller */
    GW_FIXTURE_RUN_UNTIL(&f->fx, f->done > 0);
    assert_true(f->done_ms - t0 < 5000);
    assert_int_equal(f->drain.cut, 0);
    assert_int_equal(f->done, 1);
}

/* Sessions still live at the deadline are cut there, and counted. */
static void test_deadline_cuts(void **state)
{
    struct fixture *f = *state;

    f->sessions.n_live = 3;
    uint64_t t0 = uv_now(&f->fx.loop);
    assert_true(gw_drain_start(&f->drain, 1, "test"));
    GW_FIXTURE_RUN_UNTIL(&f->fx, f->done > 0);
    assert_true(f->done_ms - t0 >= 1000);
    assert_int_equal(f->drain.cut, 3);
    assert_int_equal(f->done, 1);
}

/* Closed mid-way (SIGTERM): the timer goes, the end never comes. */
static void test_close_while_waiting(void **state)
{
    struct fixture *f = *state;

    f->sessions.n_live = 1;
    assert_true(gw_drain_start(&f->drain, 1, "test"));
    gw_drain_close(&f->drain, on_closed, f);
    GW_FIXTURE_RUN_UNTIL(&f->fx, f->closed);
    assert_int_equal(f->done, 0);
    assert_false(gw_drain_active(&f->drain));
    /* teardown's close would be a second one: reopen a timer for it */
    struct gw_drain_env env = f->drain.env;
    f->closed = false;
    gw_drain_init(&f->drain, &env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_idle_ends_soon, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_last_session_ends_it, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_deadline_cuts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_while_waiting, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
