/* Routing: first match by client id, MAC or group, on the shipped example. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "codec/client_id.h"
#include "config/config.h"
#include "gateway/session/router.h"

struct route_case {
    const char *client_id;
    int route;            /* expected route index */
    const char *backend0; /* first backend of that route */
};

static const struct route_case cases[] = {
    {"GID_test@@@a0_85_e3_f4_49_34@@@0f8e1c2d", 0, "raw-test"},
    {"GID_test@@@a0_85_e3_f4_49_34@@@other", 3, "xiaozhi"},
    {"GID_x@@@a0_85_e3_f4_49_35@@@u", 1, "lab"},
    {"GID_x@@@A0_85_E3_F4_49_36@@@u", 1, "lab"}, /* MACs compare normalised */
    {"GID_lab@@@00_11_22_33_44_55@@@u", 2, "lab"},
    {"GID_lab@@@00_11_22_33_44_55", 2, "lab"}, /* legacy two-part id */
    {"GID_other@@@00_11_22_33_44_55@@@u", 3, "xiaozhi"},
};

static void test_multi_backend_example(void **state)
{
    char err[1024];
    struct gw_config *cfg = NULL;
    (void)state;

    assert_int_equal(gw_config_load_file(GW_SOURCE_DIR
                                         "/config/multi-backend.json",
                                         &cfg, err, sizeof(err)),
                     0);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gw_client_id id;
        const char *cid = cases[i].client_id;
        assert_int_equal(gw_client_id_parse(cid, strlen(cid), &id), 0);
        int r = gw_router_match(cfg, &id, cid);
        assert_int_equal(r, cases[i].route);
        size_t b = cfg->routes[r].backend_index[0];
        assert_string_equal(cfg->backends[b].name, cases[i].backend0);
    }
    gw_config_destroy(cfg);
}

/* With routes that all need something, a device may match none. */
static void test_no_match(void **state)
{
    static const char text[] =
        "{\"backends\":[{\"name\":\"a\",\"url\":\"ws://127.0.0.1:1/\"}],"
        "\"routes\":[{\"match\":{\"groups\":[\"G1\"]},\"backends\":[\"a\"]}]}";
    char err[1024];
    struct gw_config *cfg = NULL;
    struct gw_client_id id;
    const char *cid = "G2@@@00_11_22_33_44_55@@@u";
    (void)state;

    assert_int_equal(gw_config_load_string(text, strlen(text), "t.json", &cfg,
                                           err, sizeof(err)),
                     0);
    assert_int_equal(gw_client_id_parse(cid, strlen(cid), &id), 0);
    assert_int_equal(gw_router_match(cfg, &id, cid), -1);
    gw_config_destroy(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multi_backend_example),
        cmocka_unit_test(test_no_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
