/*
 * The UDP path doctor's pure parts: which advertised addresses a device
 * cannot reach, and the bounded table of watched device addresses under
 * many sessions and a flood of unknown ssrcs from everywhere.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>

#include "gateway/audio/udp_audio_int.h"
#include "gateway/audio/udp_doctor.h"

static void test_classes(void **state)
{
    (void)state;
    assert_int_equal(gw_ip_class_of("127.0.0.1"), GW_IP_LOOPBACK);
    assert_int_equal(gw_ip_class_of("127.3.2.1"), GW_IP_LOOPBACK);
    assert_int_equal(gw_ip_class_of("::1"), GW_IP_LOOPBACK);
    assert_int_equal(gw_ip_class_of("LocalHost"), GW_IP_LOOPBACK);
    assert_int_equal(gw_ip_class_of("0.0.0.0"), GW_IP_UNSPECIFIED);
    assert_int_equal(gw_ip_class_of("::"), GW_IP_UNSPECIFIED);
    assert_int_equal(gw_ip_class_of("10.1.2.3"), GW_IP_PRIVATE);
    assert_int_equal(gw_ip_class_of("172.16.0.1"), GW_IP_PRIVATE);
    assert_int_equal(gw_ip_class_of("172.31.255.1"), GW_IP_PRIVATE);
    assert_int_equal(gw_ip_class_of("172.32.0.1"), GW_IP_PUBLIC);
    assert_int_equal(gw_ip_class_of("192.168.1.9"), GW_IP_PRIVATE);
    assert_int_equal(gw_ip_class_of("100.64.0.1"), GW_IP_PRIVATE);
    assert_int_equal(gw_ip_class_of("100.128.0.1"), GW_IP_PUBLIC);
    assert_int_equal(gw_ip_class_of("fd00::1"), GW_IP_PRIVATE);
    assert_int_equal(gw_ip_class_of("169.254.3.4"), GW_IP_LINK_LOCAL);
    assert_int_equal(gw_ip_class_of("fe80::1"), GW_IP_LINK_LOCAL);
    assert_int_equal(gw_ip_class_of("192.0.2.7"), GW_IP_PUBLIC);
    assert_int_equal(gw_ip_class_of("2001:db8::1"), GW_IP_PUBLIC);
    assert_int_equal(gw_ip_class_of("gw.example"), GW_IP_NAME);
    assert_int_equal(gw_ip_class_of(""), GW_IP_NAME);
    assert_int_equal(gw_ip_class_of(NULL), GW_IP_NAME);
}

static void test_unreachable(void **state)
{
    (void)state;
    /* loopback advertised: only a device on this host reaches it */
    assert_true(gw_udp_doctor_unreachable("127.0.0.1", "192.0.2.7", true));
    assert_true(gw_udp_doctor_unreachable("127.0.0.1", "192.168.1.20", true));
    assert_true(gw_udp_doctor_unreachable("localhost", "10.0.0.2", true));
    assert_false(gw_udp_doctor_unreachable("127.0.0.1", "127.0.0.1", true));
    assert_true(gw_udp_doctor_unreachable("0.0.0.0", "10.0.0.2", false));
    /* private advertised, the device public or in another network */
    assert_true(gw_udp_doctor_unreachable("192.168.1.5", "192.0.2.7", true));
    assert_true(gw_udp_doctor_unreachable("10.0.0.5", "192.168.1.20", true));
    assert_true(gw_udp_doctor_unreachable("10.1.0.5", "10.2.0.7", true));
    assert_true(gw_udp_doctor_unreachable("fd00:1:2::5", "fd00:9:9::7", true));
    assert_false(gw_udp_doctor_unreachable("10.1.0.5", "10.1.200.7", true));
    assert_false(
        gw_udp_doctor_unreachable("192.168.1.5", "192.168.1.20", true));
    assert_false(
        gw_udp_doctor_unreachable("fd00:1:2::5", "fd00:1:2:3::7", true));
    /* a device on this host reaches the host's own addresses only */
    assert_true(gw_udp_doctor_unreachable("10.255.255.1", "127.0.0.1", false));
    assert_false(gw_udp_doctor_unreachable("10.255.255.1", "127.0.0.1", true));
    /* not judged: public, a name, an unknown device */
    assert_false(gw_udp_doctor_unreachable("192.0.2.1", "10.0.0.2", false));
    assert_false(gw_udp_doctor_unreachable("gw.example", "10.0.0.2", false));
    assert_false(gw_udp_doctor_unreachable("127.0.0.1", "", false));
    assert_false(gw_udp_doctor_unreachable("127.0.0.1", NULL, false));
    assert_false(gw_udp_doctor_unreachable("127.0.0.1", "junk", false));
    assert_true(gw_ip_is_local("127.0.0.1"));
    assert_false(gw_ip_is_local("192.0.2.254"));
}

/* A datagram of an unknown ssrc from ip:port. */
static void unknown_from(struct gw_udp_audio *ua, const char *ip, int port)
{
    struct gw_udp_verdict v = {.reason = GW_UDP_DROP_UNKNOWN};
    struct sockaddr_in a;

    assert_int_equal(uv_ip4_addr(ip, port, &a), 0);
    v.h.ssrc = 0x1234;
    gw__udp_doctor_note(ua, &v, (const struct sockaddr *)&a);
}

#define PEERS 1400 /* more addresses than the table holds */

static void test_watch_table(void **state)
{
    struct gw_udp_audio *ua = calloc(1, sizeof(*ua));
    struct gw_udp_peer *peers = calloc(PEERS, sizeof(*peers));
    char ip[32];
    unsigned watching = 0;

    (void)state;
    assert_non_null(ua);
    assert_non_null(peers);
    for (unsigned i = 0; i < PEERS; i++) {
        peers[i].ua = ua;
        /* pairs of sessions behind one address (a shared NAT) */
        snprintf(ip, sizeof(ip), "10.%u.%u.1", (i / 2) >> 8, (i / 2) & 255);
        gw_udp_peer_set_device_ip(&peers[i], ip);
        watching += peers[i].ev.watching;
    }
    /* half of the slots, one per address, two sessions each */
    assert_int_equal(ua->n_watch, GW_UDP_WATCH_SLOTS / 2);
    assert_int_equal(watching, GW_UDP_WATCH_SLOTS);
    assert_int_equal(ua->stats.doctor_unwatched, PEERS - GW_UDP_WATCH_SLOTS);
    /* a flood from addresses nobody watches changes nothing */
    for (unsigned i = 0; i < 100000; i++) {
        snprintf(ip, sizeof(ip), "192.0.%u.%u", (i >> 8) & 255, i & 255);
        unknown_from(ua, ip, 1000 + (int)(i % 5000));
    }
    assert_int_equal(ua->n_watch, GW_UDP_WATCH_SLOTS / 2);
    /* let half the sessions go, in an order that breaks probe runs */
    for (unsigned i = 0; i < PEERS; i++) {
        if ((i * 2654435761u) >> 31) {
            gw__udp_doctor_unwatch(&peers[i]);
        }
    }
    /* every address still watched still counts, for both its sessions */
    for (unsigned i = 0; i < PEERS; i++) {
        if (peers[i].ev.watching) {
            snprintf(ip, sizeof(ip), "10.%u.%u.1", (i / 2) >> 8, (i / 2) & 255);
            unknown_from(ua, ip, 4000);
        }
    }
    for (unsigned i = 0; i < PEERS; i++) {
        struct gw_udp_doctor_ctx ctx = {.public_host = "127.0.0.1",
                                        .public_port = 1,
                                        .device_ip = "10.0.0.1"};
        if (!peers[i].ev.watching) {
            continue;
        }
        peers[i].ssrc = 1;
        assert_false(gw_udp_peer_examine(&peers[i], &ctx));
        assert_true(peers[i].ev.unknown >= 1);
        assert_int_equal(peers[i].ev.cause, GW_UDP_DOCTOR_UNKNOWN_SSRC);
        assert_false(peers[i].ev.watching);
    }
    for (unsigned i = 0; i < PEERS; i++) {
        gw__udp_doctor_unwatch(&peers[i]);
    }
    assert_int_equal(ua->n_watch, 0);
    free(ua->watch);
    free(peers);
    free(ua);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classes),
        cmocka_unit_test(test_unreachable),
        cmocka_unit_test(test_watch_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
