/*
 * The broker plugin's connection table: roles by context, and presence
 * through connects, disconnects and session take-over in the order
 * Mosquitto 2.0 reports them (the new connection's auth comes before the
 * old connection's disconnect).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "broker/clients.h"

#define DEV  "GID_test@@@a0_85_e3_f4_49_34@@@u"
#define DEV2 "GID_test@@@a0_85_e3_f4_49_35@@@u"

/* Distinct addresses stand in for the broker's context pointers. */
static int ctx[8];

static int setup(void **state)
{
    struct gw_broker_clients *t;

    if (gw_broker_clients_create(&t) != 0) {
        return -1;
    }
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    gw_broker_clients_destroy(*state);
    return 0;
}

static void expect(const struct gw_broker_presence *ev, bool online,
                   uint64_t conn, const char *id, const char *address)
{
    assert_true(ev->publish);
    assert_int_equal(ev->online, online);
    assert_int_equal(ev->conn, conn);
    assert_string_equal(ev->client_id, id);
    if (online) {
        assert_string_equal(ev->address, address);
    }
}

/* A device connection on ctx[i] that must be accepted. */
static void add_device(struct gw_broker_clients *t, int i, const char *id,
                       const char *address, struct gw_broker_presence *ev)
{
    assert_int_equal(gw_broker_clients_add(t, &ctx[i], GW_BROKER_ROLE_DEVICE,
                                           id, address, 0, ev),
                     0);
}

static void test_device_lifecycle(void **state)
{
    struct gw_broker_clients *t = *state;
    struct gw_broker_presence ev;

    add_device(t, 0, DEV, "10.0.0.1", &ev);
    expect(&ev, true, 1, DEV, "10.0.0.1");
    struct gw_broker_conn_info *c = gw_broker_clients_find(t, &ctx[0]);
    assert_non_null(c);
    assert_int_equal(c->role, GW_BROKER_ROLE_DEVICE);
    assert_string_equal(c->client_id, DEV);
    assert_int_equal(c->denials, 0);
    assert_int_equal(gw_broker_clients_count(t), 1);

    gw_broker_clients_remove(t, &ctx[0], &ev);
    expect(&ev, false, 1, DEV, NULL);
    assert_null(gw_broker_clients_find(t, &ctx[0]));
    assert_int_equal(gw_broker_clients_count(t), 0);

    /* Unknown contexts (refused at CONNECT) say nothing. */
    gw_broker_clients_remove(t, &ctx[0], &ev);
    assert_false(ev.publish);
}

/* The gateway account has a role but no presence. */
static void test_gateway(void **state)
{
    struct gw_broker_clients *t = *state;
    struct gw_broker_presence ev;

    assert_int_equal(gw_broker_clients_add(t, &ctx[1], GW_BROKER_ROLE_GATEWAY,
                                           "hybridgw-1", "10.0.0.9", 0, &ev),
                     0);
    assert_false(ev.publish);
    struct gw_broker_conn_info *c = gw_broker_clients_find(t, &ctx[1]);
    assert_non_null(c);
    assert_int_equal(c->role, GW_BROKER_ROLE_GATEWAY);
    assert_string_equal(c->client_id, "hybridgw-1");
    /* Two instances may share the account and even a device-like id. */
    assert_int_equal(gw_broker_clients_add(t, &ctx[2], GW_BROKER_ROLE_GATEWAY,
                                           "hybridgw-1", "10.0.0.9", 0, &ev),
                     0);
    assert_false(ev.publish);
    gw_broker_clients_remove(t, &ctx[1], &ev);
    assert_false(ev.publish);
    gw_broker_clients_remove(t, &ctx[2], &ev);
    assert_false(ev.publish);
}

/* Take-over: new auth (online), then the old one's disconnect (silent). */
static void test_take_over(void **state)
{
    struct gw_broker_clients *t = *state;
    struct gw_broker_presence ev;

    add_device(t, 0, DEV, "10.0.0.1", &ev);
    expect(&ev, true, 1, DEV, "10.0.0.1");
    add_device(t, 1, DEV, "10.0.0.2", &ev);
    expect(&ev, true, 2, DEV, "10.0.0.2");
    gw_broker_clients_remove(t, &ctx[0], &ev);
    assert_false(ev.publish);
    assert_non_null(gw_broker_clients_find(t, &ctx[1]));
    gw_broker_clients_remove(t, &ctx[1], &ev);
    expect(&ev, false, 2, DEV, NULL);
}

/*
 * A newer connection that ends while the older one is still there (it
 * failed after its auth): the older one is current again, announced with
 * a fresh number so readers ordering by conn take it.
 */
static void test_newer_fails_first(void **state)
{
    struct gw_broker_clients *t = *state;
    struct gw_broker_presence ev;

    add_device(t, 0, DEV, "10.0.0.1", &ev);
    add_device(t, 1, DEV, "10.0.0.2", &ev);
    expect(&ev, true, 2, DEV, "10.0.0.2");
    gw_broker_clients_remove(t, &ctx[1], &ev);
    expect(&ev, true, 3, DEV, "10.0.0.1");
    gw_broker_clients_remove(t, &ctx[0], &ev);
    expect(&ev, false, 3, DEV, NULL);
}

/* Three connections: only the current one's end changes presence. */
static void test_middle_ends(void **state)
{
    struct gw_broker_clients *t = *state;
    struct gw_broker_presence ev;

    for (int i = 0; i < 3; i++) {
        add_device(t, i, DEV, "10.0.0.1", &ev);
        expect(&ev, true, (uint64_t)i + 1, DEV, "10.0.0.1");
    }
    gw_broker_clients_remove(t, &ctx[1], &ev);
    assert_false(ev.publish);
    gw_broker_clients_remove(t, &ctx[0], &ev);
    assert_false(ev.publish);
    gw_broker_clients_remove(t, &ctx[2], &ev);
    expect(&ev, false, 3, DEV, NULL);
    assert_int_equal(gw_broker_clients_count(t), 0);
}

static void test_devices_are_independent(void **state)
{
    struct gw_broker_clients *t = *state;
    struct gw_broker_presence ev;

    add_device(t, 0, DEV, "10.0.0.1", &ev);
    add_device(t, 1, DEV2, "10.0.0.2", &ev);
    expect(&ev, true, 2, DEV2, "10.0.0.2");
    gw_broker_clients_remove(t, &ctx[0], &ev);
    expect(&ev, false, 1, DEV, NULL);
    assert_string_equal(gw_broker_clients_find(t, &ctx[1])->client_id, DEV2);
    gw_broker_clients_remove(t, &ctx[1], &ev);
    expect(&ev, false, 2, DEV2, NULL);
}

static void test_refusals(void **state)
{
    struct gw_broker_clients *t = *state;
    struct gw_broker_presence ev;
    char long_id[GW_CLIENT_ID_MAX + 2];
    char long_addr[GW_BROKER_ADDRESS_MAX + 2];

    memset(long_id, 'a', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    memset(long_addr, '1', sizeof(long_addr) - 1);
    long_addr[sizeof(long_addr) - 1] = '\0';

    assert_int_equal(gw_broker_clients_add(t, &ctx[0], GW_BROKER_ROLE_NONE, DEV,
                                           "10.0.0.1", 0, &ev),
                     GW_EINVAL);
    assert_int_equal(gw_broker_clients_add(t, &ctx[0], GW_BROKER_ROLE_DEVICE,
                                           NULL, "10.0.0.1", 0, &ev),
                     GW_EINVAL);
    assert_int_equal(gw_broker_clients_add(t, &ctx[0], GW_BROKER_ROLE_DEVICE,
                                           long_id, "10.0.0.1", 0, &ev),
                     GW_EINVAL);
    assert_false(ev.publish);
    assert_int_equal(gw_broker_clients_count(t), 0);

    /* An address too long to be an IP is recorded as unknown. */
    assert_int_equal(gw_broker_clients_add(t, &ctx[0], GW_BROKER_ROLE_DEVICE,
                                           DEV, long_addr, 0, &ev),
                     0);
    expect(&ev, true, 1, DEV, "");
    gw_broker_clients_remove(t, &ctx[0], &ev);
    assert_int_equal(gw_broker_clients_add(t, &ctx[0], GW_BROKER_ROLE_DEVICE,
                                           DEV, NULL, 0, &ev),
                     0);
    expect(&ev, true, 2, DEV, "");
}

/* A context seen again without its disconnect replaces its old entry. */
static void test_context_reused(void **state)
{
    struct gw_broker_clients *t = *state;
    struct gw_broker_presence ev;

    add_device(t, 0, DEV, "10.0.0.1", &ev);
    assert_int_equal(gw_broker_clients_add(t, &ctx[0], GW_BROKER_ROLE_GATEWAY,
                                           "gw", "10.0.0.1", 0, &ev),
                     0);
    assert_false(ev.publish);
    assert_int_equal(gw_broker_clients_count(t), 1);
    assert_int_equal(gw_broker_clients_find(t, &ctx[0])->role,
                     GW_BROKER_ROLE_GATEWAY);
    /* DEV has no connection left: a new one is simply current. */
    add_device(t, 1, DEV, "10.0.0.3", &ev);
    expect(&ev, true, 2, DEV, "10.0.0.3");
}

/* A revocation ends the current connection of an id only if its
 * credentials' binding id is below. */
static void test_current_below(void **state)
{
    struct gw_broker_clients *t = *state;
    struct gw_broker_presence ev;

    assert_false(gw_broker_clients_current_below(t, DEV, 6));
    assert_int_equal(gw_broker_clients_add(t, &ctx[0], GW_BROKER_ROLE_DEVICE,
                                           DEV, "10.0.0.1", 5, &ev),
                     0);
    assert_int_equal(gw_broker_clients_find(t, &ctx[0])->binding, 5);
    assert_true(gw_broker_clients_current_below(t, DEV, 6));
    assert_false(gw_broker_clients_current_below(t, DEV, 5));
    assert_false(gw_broker_clients_current_below(t, DEV2, 6));
    /* Take-over by credentials of binding 6: that one is current. */
    assert_int_equal(gw_broker_clients_add(t, &ctx[1], GW_BROKER_ROLE_DEVICE,
                                           DEV, "10.0.0.1", 6, &ev),
                     0);
    assert_false(gw_broker_clients_current_below(t, DEV, 6));
    assert_true(gw_broker_clients_current_below(t, DEV, 7));
    /* Gateways are never in the device table. */
    assert_int_equal(gw_broker_clients_add(t, &ctx[2], GW_BROKER_ROLE_GATEWAY,
                                           DEV2, "10.0.0.9", 0, &ev),
                     0);
    assert_false(gw_broker_clients_current_below(t, DEV2, 6));
    assert_false(gw_broker_clients_current_below(t, NULL, 6));
}

/* Destroy frees whatever is still connected (the broker shutting down). */
static void test_destroy_with_connections(void **state)
{
    struct gw_broker_clients *t;
    struct gw_broker_presence ev;
    (void)state;

    assert_int_equal(gw_broker_clients_create(&t), 0);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(gw_broker_clients_add(t, &ctx[i],
                                               i % 2 ? GW_BROKER_ROLE_DEVICE
                                                     : GW_BROKER_ROLE_GATEWAY,
                                               i < 4 ? DEV : DEV2, "::1", 0,
                                               &ev),
                         0);
    }
    assert_int_equal(gw_broker_clients_count(t), 8);
    gw_broker_clients_destroy(t);
    gw_broker_clients_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_device_lifecycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gateway, setup, teardown),
        cmocka_unit_test_setup_teardown(test_take_over, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_fails_first, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_middle_ends, setup, teardown),
        cmocka_unit_test_setup_teardown(test_devices_are_independent, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_context_reused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_current_below, setup, teardown),
        cmocka_unit_test(test_destroy_with_connections),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
