/* The plugin's revocations by client id (broker/revoked.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "broker/revoked.h"
#include "codec/client_id.h"

#define DEV  "GID_test@@@a0_85_e3_f4_49_34@@@0f8e-uuid"
#define DEV2 "GID_test@@@a0_85_e3_f4_49_35@@@other"

static void test_raise(void **state)
{
    struct gw_broker_revoked *t;
    (void)state;

    assert_int_equal(gw_broker_revoked_create(&t), 0);
    assert_int_equal(gw_broker_revoked_below(t, DEV), 0);
    assert_int_equal(gw_broker_revoked_below(NULL, DEV), 0);
    assert_int_equal(gw_broker_revoked_raise(t, DEV, 6), 1);
    assert_int_equal(gw_broker_revoked_below(t, DEV), 6);
    assert_int_equal(gw_broker_revoked_below(t, DEV2), 0);
    /* Never lowered: a revocation is not undone by an older message. */
    assert_int_equal(gw_broker_revoked_raise(t, DEV, 3), 0);
    assert_int_equal(gw_broker_revoked_raise(t, DEV, 6), 0);
    assert_int_equal(gw_broker_revoked_below(t, DEV), 6);
    assert_int_equal(gw_broker_revoked_raise(t, DEV, 9), 1);
    assert_int_equal(gw_broker_revoked_below(t, DEV), 9);
    assert_int_equal(gw_broker_revoked_count(t), 1);
    /* Bad input changes nothing. */
    char long_id[GW_CLIENT_ID_MAX + 2];
    memset(long_id, 'a', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    assert_int_equal(gw_broker_revoked_raise(t, long_id, 2), GW_EINVAL);
    assert_int_equal(gw_broker_revoked_below(t, long_id), 0);
    assert_int_equal(gw_broker_revoked_raise(t, "", 2), GW_EINVAL);
    assert_int_equal(gw_broker_revoked_raise(t, NULL, 2), GW_EINVAL);
    assert_int_equal(gw_broker_revoked_raise(t, DEV2, 0), GW_EINVAL);
    assert_int_equal(gw_broker_revoked_count(t), 1);
    gw_broker_revoked_destroy(t);
    gw_broker_revoked_destroy(NULL);
}

/* Full: known ids still rise, new ones are refused. */
static void test_bound(void **state)
{
    struct gw_broker_revoked *t;
    char id[64];
    (void)state;

    assert_int_equal(gw_broker_revoked_create(&t), 0);
    for (unsigned i = 0; i < GW_BROKER_REVOKED_MAX; i++) {
        snprintf(id, sizeof(id), "G@@@a0_85_e3_f4_49_34@@@%u", i);
        assert_int_equal(gw_broker_revoked_raise(t, id, 2), 1);
    }
    assert_int_equal(gw_broker_revoked_count(t), GW_BROKER_REVOKED_MAX);
    assert_int_equal(gw_broker_revoked_raise(t, DEV, 2), GW_ELIMIT);
    assert_int_equal(gw_broker_revoked_below(t, DEV), 0);
    assert_int_equal(gw_broker_revoked_raise(t, "G@@@a0_85_e3_f4_49_34@@@7", 3),
                     1);
    assert_int_equal(gw_broker_revoked_below(t, "G@@@a0_85_e3_f4_49_34@@@7"),
                     3);
    gw_broker_revoked_destroy(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raise),
        cmocka_unit_test(test_bound),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
