/* The error list: every code has its own name and text; errno passes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"

static void test_codes_named(void **state)
{
    (void)state;
    for (int e = GW_ERR_FIRST_ + 1; e < GW_ERR_LAST_; e++) {
        assert_true(e < -4096);
        assert_string_not_equal(gw_strerror(e), "unknown error");
        assert_memory_equal(gw_err_name(e), "GW_E", 4);
        for (int f = e + 1; f < GW_ERR_LAST_; f++) {
            assert_string_not_equal(gw_err_name(e), gw_err_name(f));
            assert_string_not_equal(gw_strerror(e), gw_strerror(f));
        }
    }
    assert_string_equal(gw_err_name(GW_EPROTO), "GW_EPROTO");
}

static void test_errno_passes(void **state)
{
    (void)state;
    assert_string_equal(gw_strerror(0), "success");
    assert_string_equal(gw_strerror(-ECONNREFUSED), strerror(ECONNREFUSED));
    assert_string_equal(gw_err_name(-EPIPE), "SYSTEM");
    assert_string_equal(gw_strerror(GW_ERR_LAST_), "unknown error");
    assert_string_equal(gw_strerror(1), "unknown error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codes_named),
        cmocka_unit_test(test_errno_passes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
