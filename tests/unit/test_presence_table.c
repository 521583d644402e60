/* The online-device table: arrivals, departures, take-over order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/presence.h"

#define DEV "GID_test@@@a0_85_e3_f4_49_34@@@0f8e"

static struct gw_presence msg(bool online, const char *address, uint64_t conn)
{
    struct gw_presence p = {
        .online = online, .has_conn = conn != 0, .conn = conn};
    snprintf(p.address, sizeof(p.address), "%s", address);
    return p;
}

static int update(struct gw_presence_table *t, bool online, const char *address,
                  uint64_t conn)
{
    struct gw_presence p = msg(online, address, conn);
    return gw_presence_table_update(t, DEV, &p, 1000);
}

static void test_arrive_and_leave(void **state)
{
    struct gw_presence_table t = {0};
    const struct gw_presence_entry *e;

    (void)state;
    assert_int_equal(update(&t, false, "", 1), GW_PRESENCE_SAME);
    assert_int_equal(update(&t, true, "10.1.2.3", 1), GW_PRESENCE_ARRIVED);
    e = gw_presence_table_find(&t, DEV);
    assert_non_null(e);
    assert_string_equal(e->address, "10.1.2.3");
    assert_int_equal(e->since_ms, 1000);
    assert_int_equal(update(&t, true, "10.1.2.3", 1), GW_PRESENCE_SAME);
    assert_int_equal(t.count, 1);
    assert_int_equal(update(&t, false, "", 1), GW_PRESENCE_LEFT);
    assert_null(gw_presence_table_find(&t, DEV));
    assert_int_equal(t.count, 0);
    gw_presence_table_clear(&t);
}

/* Take-over reported out of order (new connect, then old disconnect). */
static void test_takeover_order(void **state)
{
    struct gw_presence_table t = {0};

    (void)state;
    assert_int_equal(update(&t, true, "10.1.2.3", 5), GW_PRESENCE_ARRIVED);
    assert_int_equal(update(&t, true, "10.9.9.9", 6), GW_PRESENCE_RETURNED);
    assert_int_equal(update(&t, false, "", 5), GW_PRESENCE_SAME); /* old */
    assert_string_equal(gw_presence_table_find(&t, DEV)->address, "10.9.9.9");
    assert_int_equal(update(&t, true, "10.1.2.3", 5), GW_PRESENCE_SAME);
    assert_string_equal(gw_presence_table_find(&t, DEV)->address, "10.9.9.9");
    /* without numbers, messages apply in arrival order */
    assert_int_equal(update(&t, false, "", 0), GW_PRESENCE_LEFT);
    assert_int_equal(update(&t, true, "10.1.1.1", 0), GW_PRESENCE_ARRIVED);
    gw_presence_table_clear(&t);
    assert_null(gw_presence_table_find(&t, DEV));
    assert_int_equal(t.count, 0);
}

static void test_bad_id(void **state)
{
    struct gw_presence_table t = {0};
    char id[GW_CLIENT_ID_MAX + 2];
    struct gw_presence p = msg(true, "", 0);

    (void)state;
    memset(id, 'a', sizeof(id) - 1);
    id[sizeof(id) - 1] = '\0';
    assert_int_equal(gw_presence_table_update(&t, id, &p, 0), GW_EINVAL);
    assert_int_equal(t.count, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arrive_and_leave),
        cmocka_unit_test(test_takeover_order),
        cmocka_unit_test(test_bad_id),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
