/*
 * The device table on a real loop (gateway/device/device_table.c): presence and
 * its ordering by connection number, records made and ended by sessions,
 * mark and reap of records that go offline, its listener, and shutdown.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <uv.h>

#include "codec/envelope.h"
#include "codec/mcp_tools.h"
#include "codec/presence.h"
#include "config/config.h"
#include "fixture.h"
#include "fixture_parts.h"
#include "gateway/core/config_hold.h"
#include "gateway/device/device_table.h"
#include "gateway/device/publish.h"

#define DEV  "GID_test@@@a0_85_e3_f4_49_34@@@0f8e"
#define DEV2 "GID_test@@@a0_85_e3_f4_49_35@@@0f8e"
#define DEV3 "GID_test@@@a0_85_e3_f4_49_36"

/* What the listener was told, copied while the record was valid. */
struct event {
    enum gw_device_state state;
    enum gw_tool_list_state tools;
    bool presence;
    bool has_session;
    bool on_reap_list;
    bool findable;
    char client_id[GW_CLIENT_ID_MAX + 1];
};

#define MAX_EVENTS 16

static struct {
    struct gw_fixture fx;
    struct gw_config_live config;
    struct gw_publisher pub;
    struct gw_device_table t;
    bool started;
    unsigned closed; /* close callbacks seen */
    struct event events[MAX_EVENTS];
    unsigned n_events;
    const struct gw_device *gone; /* the last record told GONE */
} T;

/* Sessions are only compared by address here. */
static int session_a, session_b;
#define SESSION_A ((struct gw_session *)(void *)&session_a)
#define SESSION_B ((struct gw_session *)(void *)&session_b)

static void on_changed(void *arg, const struct gw_device *d, unsigned what)
{
    struct event *e;

    assert_ptr_equal(arg, &T);
    assert_true(what != 0);
    assert_true(T.n_events < MAX_EVENTS);
    e = &T.events[T.n_events++];
    e->state = d->state;
    e->tools = d->tools.state;
    e->presence = d->presence.online;
    e->has_session = d->session != NULL;
    e->on_reap_list = gw_list_linked(&d->reap_node);
    e->findable = gw_device_find(&T.t, d->client_id) == d;
    snprintf(e->client_id, sizeof(e->client_id), "%s", d->client_id);
    if (d->state == GW_DEVICE_GONE) {
        T.gone = d;
    }
}

/* A table whose config has mcp_json as its mcp section, and a publisher
 * with no broker link: whatever it sends is lost, as with a broker away. */
static void start(const char *mcp_json)
{
    gw_fixture_config_mcp(&T.config, mcp_json);
    T.pub = (struct gw_publisher){.link = NULL, .config = &T.config};
    gw_device_table_init(&T.t, &T.fx.loop, &T.config, &T.pub);
    gw_device_table_set_listener(&T.t, on_changed, &T);
    T.started = true;
}

static void on_closed(struct gw_device_table *t, void *arg)
{
    assert_ptr_equal(t, &T.t);
    assert_ptr_equal(arg, &T);
    T.closed++;
}

static void stop(void)
{
    if (!T.started) {
        return;
    }
    T.started = false;
    gw_device_table_close(&T.t, on_closed, &T);
    GW_FIXTURE_RUN_UNTIL(&T.fx, T.closed > 0);
    assert_int_equal(T.closed, 1);
    assert_true(gw_list_empty(&T.t.reap));
    gw_config_live_close(&T.config);
}

static int setup(void **state)
{
    (void)state;
    memset(&T, 0, sizeof(T));
    gw_fixture_loop_init(&T.fx);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    stop();
    gw_fixture_loop_close(&T.fx); /* uv_loop_close() == 0 */
    return 0;
}

static int presence(const char *client_id, bool online, const char *address,
                    uint64_t conn)
{
    struct gw_presence p = {
        .online = online, .has_conn = conn != 0, .conn = conn};

    snprintf(p.address, sizeof(p.address), "%s", address);
    return gw_device_on_presence(&T.t, client_id, &p);
}

/* One turn of the loop, which is when the reaper runs. */
static void turn(void)
{
    uv_run(&T.fx.loop, UV_RUN_NOWAIT);
}

/* The device's answer to the link's latest request, whose id the link
 * keeps in next_id (with no broker here, nothing else shows it). */
static bool answer_latest(struct gw_device *d, const char *member)
{
    char payload[1536];

    snprintf(payload, sizeof(payload), "{\"jsonrpc\":\"2.0\",\"id\":%u,%s}",
             d->link.next_id, member);
    return gw_fixture_mcp_in(&T.t, d->client_id, payload);
}

/* ---- presence: arrivals, departures, take-over order ------------------ */

/* Two online devices with one label (a collision, made here by giving the
 * first the label the second will have): the later gets none, so it
 * cannot be found by it and the first is not shadowed; it is counted. */
static void test_label_clash(void **state)
{
    struct gw_device *a, *b;
    char taken[GW_MCP_LABEL_LEN + 1];

    (void)state;
    start("{\"discover\":false}");
    assert_int_equal(gw_mcp_device_label(DEV2, strlen(DEV2), taken), 0);
    assert_int_equal(presence(DEV, true, "10.1.2.3", 1), GW_PRESENCE_ARRIVED);
    a = gw_device_find(&T.t, DEV);
    assert_non_null(a);
    HASH_DELETE(label_hh, T.t.by_label, a); /* filed under its label */
    memcpy(a->label, taken, sizeof(taken));
    HASH_ADD(label_hh, T.t.by_label, label, strlen(a->label), a);
    assert_int_equal(presence(DEV2, true, "10.1.2.4", 2), GW_PRESENCE_ARRIVED);
    b = gw_device_find(&T.t, DEV2);
    assert_non_null(b);
    assert_string_equal(b->label, "");
    assert_ptr_equal(gw_device_find_label(&T.t, taken), a);
    assert_int_equal(gw_device_table_mcp_stats(&T.t)->label_clashes, 1);
    /* Its tools cannot be named on /mcp. */
    char name[GW_MCP_TOOL_NAME_MAX + 1];
    assert_int_equal(gw_mcp_aggregate_name(b->label, "x", name, sizeof(name)),
                     GW_EINVAL);
    /* A third device, no clash: a label of its own. */
    assert_int_equal(presence(DEV3, true, "10.1.2.5", 3), GW_PRESENCE_ARRIVED);
    assert_int_equal(strlen(gw_device_find(&T.t, DEV3)->label),
                     GW_MCP_LABEL_LEN);
    assert_int_equal(gw_device_table_mcp_stats(&T.t)->label_clashes, 1);
}

static void test_presence_arrive_and_leave(void **state)
{
    struct gw_device *d;

    (void)state;
    start("{\"discover\":false}");
    assert_int_equal(presence(DEV, false, "", 1), GW_PRESENCE_SAME);
    assert_int_equal(gw_device_table_online(&T.t), 0);
    assert_true(gw_list_empty(&T.t.reap));

    assert_int_equal(presence(DEV, true, "10.1.2.3", 1), GW_PRESENCE_ARRIVED);
    d = gw_device_find(&T.t, DEV);
    assert_non_null(d);
    assert_int_equal(d->state, GW_DEVICE_KNOWN);
    assert_string_equal(d->presence.address, "10.1.2.3");
    assert_true(d->presence.online);
    assert_int_equal(d->presence.conn, 1);
    assert_int_equal(d->presence.since_ms, uv_now(&T.fx.loop));
    assert_null(d->session);
    assert_null(gw_device_session(&T.t, DEV));
    assert_ptr_equal(gw_device_find_label(&T.t, d->label), d);
    assert_int_equal(strncmp(d->label, "a085e3f44934-", 13), 0);
    assert_null(gw_device_find(&T.t, DEV2));

    assert_int_equal(presence(DEV, true, "10.1.2.3", 1), GW_PRESENCE_SAME);
    assert_int_equal(gw_device_table_online(&T.t), 1);
    assert_int_equal(T.t.presence_count, 1);
    assert_ptr_equal(gw_device_find(&T.t, DEV), d);

    assert_int_equal(presence(DEV, false, "", 1), GW_PRESENCE_LEFT);
    assert_null(gw_device_find(&T.t, DEV));
    assert_int_equal(gw_device_table_online(&T.t), 0);
    assert_int_equal(T.t.presence_count, 0);
    assert_int_equal(presence(DEV, false, "", 1), GW_PRESENCE_SAME);

    /* Told online once, offline once. */
    assert_int_equal(T.n_events, 2);
    assert_int_equal(T.events[0].state, GW_DEVICE_KNOWN);
    assert_true(T.events[0].presence);
    assert_true(T.events[0].findable);
    assert_int_equal(T.events[1].state, GW_DEVICE_GONE);
    assert_false(T.events[1].findable);
    assert_string_equal(T.events[1].client_id, DEV);
    turn();
    assert_true(gw_list_empty(&T.t.reap));
}

/* Take-over reported out of order (new connect, then old disconnect). */
static void test_presence_takeover_order(void **state)
{
    struct gw_device *d;

    (void)state;
    start("{\"discover\":false}");
    assert_int_equal(presence(DEV, true, "10.1.2.3", 5), GW_PRESENCE_ARRIVED);
    d = gw_device_find(&T.t, DEV);
    uint64_t since = d->presence.since_ms;
    assert_int_equal(presence(DEV, true, "10.9.9.9", 6), GW_PRESENCE_RETURNED);
    assert_ptr_equal(gw_device_find(&T.t, DEV), d); /* the same record */
    assert_int_equal(d->presence.since_ms, since);
    assert_int_equal(presence(DEV, false, "", 5), GW_PRESENCE_SAME); /* old */
    assert_ptr_equal(gw_device_find(&T.t, DEV), d);
    assert_true(d->presence.online);
    assert_string_equal(d->presence.address, "10.9.9.9");
    assert_int_equal(presence(DEV, true, "10.1.2.3", 5), GW_PRESENCE_SAME);
    assert_string_equal(d->presence.address, "10.9.9.9");
    assert_int_equal(d->presence.conn, 6);
    assert_int_equal(T.n_events, 1); /* online once; RETURNED is no news */

    /* Without numbers, messages apply in arrival order. */
    assert_int_equal(presence(DEV, false, "", 0), GW_PRESENCE_LEFT);
    assert_null(gw_device_find(&T.t, DEV));
    assert_int_equal(presence(DEV, true, "10.1.1.1", 0), GW_PRESENCE_ARRIVED);
    assert_string_equal(gw_device_find(&T.t, DEV)->presence.address,
                        "10.1.1.1");
    assert_int_equal(gw_device_table_online(&T.t), 1);
    /* A newer record while the old one still waits for the reaper. */
    assert_ptr_not_equal(gw_device_find(&T.t, DEV), d);
    assert_int_equal(gw_list_count(&T.t.reap), 1);
    turn();
    assert_true(gw_list_empty(&T.t.reap));
    assert_non_null(gw_device_find(&T.t, DEV));
}

static void test_presence_bad_id(void **state)
{
    char id[GW_CLIENT_ID_MAX + 2];

    (void)state;
    start("{\"discover\":false}");
    memset(id, 'a', sizeof(id) - 1);
    id[sizeof(id) - 1] = '\0';
    assert_int_equal(presence(id, true, "", 0), GW_EINVAL);
    assert_int_equal(presence("", true, "", 0), GW_EINVAL);
    assert_int_equal(gw_device_table_online(&T.t), 0);
    assert_int_equal(T.t.presence_count, 0);
    assert_int_equal(T.n_events, 0);
}

/* A presence message as the broker replays it at subscribe (retained),
 * with the plugin's run. */
static int replayed(const char *client_id, uint64_t conn, uint64_t run)
{
    struct gw_presence p = {.online = true,
                            .has_conn = true,
                            .conn = conn,
                            .has_run = run != 0,
                            .run = run};

    return gw_device_on_retained_presence(&T.t, client_id, &p);
}

static int live(const char *client_id, uint64_t conn, uint64_t run)
{
    struct gw_presence p = {.online = true,
                            .has_conn = true,
                            .conn = conn,
                            .has_run = run != 0,
                            .run = run};

    return gw_device_on_presence(&T.t, client_id, &p);
}

/* The grace after link-up, shortened for the test. */
static void set_grace_ms(int ms)
{
    ((struct gw_config *)gw_config_live_get(&T.config))
        ->mqtt.presence_grace_ms = ms;
}

/*
 * A broker that names no run restarts its numbers unannounced: once its
 * link went, the numbers on record order nothing, every device is
 * unconfirmed, and the next news applies (another number: a new
 * connection). What stays unconfirmed past the grace goes offline.
 */
static void test_presence_link(void **state)
{
    struct gw_device *d;

    (void)state;
    start("{\"discover\":false}");
    set_grace_ms(1000);
    assert_int_equal(presence(DEV, true, "10.1.2.3", 7), GW_PRESENCE_ARRIVED);
    assert_int_equal(presence(DEV2, true, "10.1.2.4", 9), GW_PRESENCE_ARRIVED);
    d = gw_device_find(&T.t, DEV);
    assert_true(gw_device_confirmed(d));
    /* While the link is up, lower numbers are stale. */
    assert_int_equal(presence(DEV, true, "10.5.5.5", 3), GW_PRESENCE_SAME);
    assert_int_equal(presence(DEV, false, "", 3), GW_PRESENCE_SAME);
    assert_string_equal(d->presence.address, "10.1.2.3");

    gw_device_table_link_state(&T.t, false);
    assert_false(gw_device_confirmed(d));
    assert_false(gw_device_confirmed(gw_device_find(&T.t, DEV2)));
    gw_device_table_link_state(&T.t, true);
    assert_false(gw_device_confirmed(d));
    /* The replay: another number, a new connection, taken. */
    assert_int_equal(replayed(DEV, 3, 0), GW_PRESENCE_RETURNED);
    assert_true(gw_device_confirmed(d));
    assert_string_equal(d->presence.address, "");
    assert_int_equal(d->presence.conn, 3);
    assert_int_equal(presence(DEV, false, "", 2), GW_PRESENCE_SAME); /* stale */
    /* DEV2 is never said online again: offline after the grace. */
    T.n_events = 0;
    GW_FIXTURE_RUN_UNTIL(&T.fx, gw_device_find(&T.t, DEV2) == NULL);
    assert_true(T.t.expired == 1);
    assert_int_equal(T.n_events, 1);
    assert_int_equal(T.events[0].state, GW_DEVICE_GONE);
    assert_string_equal(T.events[0].client_id, DEV2);
    assert_non_null(gw_device_find(&T.t, DEV));
    assert_int_equal(gw_device_table_online(&T.t), 1);
    assert_int_equal(T.t.presence_count, 1);
}

/*
 * With the plugin's run: a retained online of the run before a restart
 * (kept by persistence) confirms nothing; one of the current run does,
 * also when the run is learnt after it; a later run is newer whatever its
 * connection numbers, and a new connection is a new MCP session.
 */
static void test_presence_runs(void **state)
{
    struct gw_device *d, *d2;

    (void)state;
    start("{\"discover\":true,\"discover_concurrency\":1}");
    set_grace_ms(1000);
    gw_device_table_link_state(&T.t, true);
    assert_int_equal(live(DEV, 40, 100), GW_PRESENCE_ARRIVED);
    d = gw_device_find(&T.t, DEV);
    assert_true(gw_device_confirmed(d));
    assert_int_equal(d->discovery.state, GW_MCP_INITIALIZING);
    assert_true(answer_latest(d, "\"result\":{\"protocolVersion\":"
                                 "\"2024-11-05\",\"capabilities\":{}}"));
    assert_true(answer_latest(d, "\"result\":{\"tools\":[]}"));
    assert_int_equal(d->discovery.state, GW_MCP_READY);
    unsigned inits = d->link.next_id;

    /* The broker restarts (run 200) with persistence. */
    gw_device_table_link_state(&T.t, false);
    gw_device_table_link_state(&T.t, true);
    assert_int_equal(replayed(DEV, 40, 100), GW_PRESENCE_SAME);
    assert_false(gw_device_confirmed(d));
    assert_true(d->presence.pending);
    assert_int_equal(replayed(DEV2, 2, 200), GW_PRESENCE_ARRIVED);
    d2 = gw_device_find(&T.t, DEV2);
    assert_false(gw_device_confirmed(d2));
    assert_int_equal(d2->discovery.state, GW_MCP_IDLE); /* not asked yet */
    assert_int_equal(replayed(DEV3, 7, 100), GW_PRESENCE_ARRIVED);
    gw_device_table_broker_run(&T.t, 200);
    assert_true(gw_device_confirmed(d2));
    assert_int_equal(d2->discovery.state, GW_MCP_INITIALIZING);
    assert_false(gw_device_confirmed(d));
    assert_false(gw_device_confirmed(gw_device_find(&T.t, DEV3)));
    /* DEV comes back: run 200 is newer than 100 despite its number. */
    assert_int_equal(live(DEV, 1, 200), GW_PRESENCE_RETURNED);
    assert_true(gw_device_confirmed(d));
    /* Its new MCP session waits for a discovery slot: not "ready". */
    assert_int_equal(d->discovery.state, GW_MCP_IDLE);
    assert_true(d->link.next_id == inits);
    /* News of the old run is stale now. */
    assert_int_equal(live(DEV, 50, 100), GW_PRESENCE_SAME);
    assert_int_equal(d->presence.conn, 1);
    /* DEV3 never comes back. */
    GW_FIXTURE_RUN_UNTIL(&T.fx, gw_device_find(&T.t, DEV3) == NULL);
    assert_true(T.t.expired == 1);
    assert_non_null(gw_device_find(&T.t, DEV));
    assert_non_null(gw_device_find(&T.t, DEV2));

    /* Persistence may replay the run message of the run before first:
     * what it confirmed is unconfirmed once the current run is heard, and
     * a lower run heard later changes nothing. */
    gw_device_table_link_state(&T.t, false);
    gw_device_table_link_state(&T.t, true);
    gw_device_table_broker_run(&T.t, 200);
    assert_int_equal(replayed(DEV2, 2, 200), GW_PRESENCE_SAME);
    assert_true(gw_device_confirmed(d2));
    gw_device_table_broker_run(&T.t, 300);
    assert_false(gw_device_confirmed(d2));
    gw_device_table_broker_run(&T.t, 200);
    assert_true(T.t.broker_run == 300);
    assert_int_equal(replayed(DEV2, 2, 200), GW_PRESENCE_SAME);
    assert_false(gw_device_confirmed(d2));
}

/* ---- sessions --------------------------------------------------------- */

/* With no presence, a device is online while a session holds it. */
/*
 * What the broker last said is offline is remembered without a record, so
 * that an old hello of such a device starts nothing; online, or a broker
 * reconnect (presence is replayed), forgets it. Stale news marks nothing.
 */
static void test_offline_marks(void **state)
{
    (void)state;
    start("{\"discover\":false}");
    assert_false(gw_device_offline(&T.t, DEV));
    assert_int_equal(presence(DEV, false, "", 3), GW_PRESENCE_SAME);
    assert_true(gw_device_offline(&T.t, DEV));
    assert_null(gw_device_find(&T.t, DEV));
    assert_false(gw_device_offline(&T.t, DEV2));
    assert_int_equal(presence(DEV, true, "192.0.2.1", 4), GW_PRESENCE_ARRIVED);
    assert_false(gw_device_offline(&T.t, DEV));
    /* An offline about the older connection is stale: still online. */
    assert_int_equal(presence(DEV, false, "", 3), GW_PRESENCE_SAME);
    assert_false(gw_device_offline(&T.t, DEV));
    assert_int_equal(presence(DEV, false, "", 4), GW_PRESENCE_LEFT);
    assert_true(gw_device_offline(&T.t, DEV));
    assert_int_equal(presence(DEV2, false, "", 1), GW_PRESENCE_SAME);
    assert_int_equal(T.t.n_offline, 2);
    gw_device_table_link_state(&T.t, true);
    assert_false(gw_device_offline(&T.t, DEV));
    assert_false(gw_device_offline(&T.t, DEV2));
    assert_int_equal(T.t.n_offline, 0);
    /* Marks left at close are freed with the table (ASan checks). */
    assert_int_equal(presence(DEV3, false, "", 1), GW_PRESENCE_SAME);
    assert_true(gw_device_offline(&T.t, DEV3));
}

static void test_session_makes_record(void **state)
{
    struct gw_device *d = NULL;

    (void)state;
    start("{\"discover\":false}");
    assert_int_equal(
        gw_device_attach_session(&T.t, DEV, SESSION_A, "sid-1", &d), 0);
    assert_non_null(d);
    assert_ptr_equal(gw_device_find(&T.t, DEV), d);
    assert_int_equal(d->state, GW_DEVICE_KNOWN);
    assert_false(d->presence.online);
    assert_int_equal(T.t.presence_count, 0);
    assert_int_equal(gw_device_table_online(&T.t), 1);
    assert_ptr_equal(gw_device_session(&T.t, DEV), SESSION_A);
    assert_string_equal(d->link.session_id, "sid-1");
    assert_true(d->link.open);
    assert_int_equal(T.n_events, 1);
    assert_int_equal(T.events[0].state, GW_DEVICE_KNOWN);
    assert_true(T.events[0].has_session);
    assert_false(T.events[0].presence);

    /* Another session's end is not this one's. */
    gw_device_detach_session(d, SESSION_B, false);
    assert_ptr_equal(gw_device_find(&T.t, DEV), d);
    assert_ptr_equal(d->session, SESSION_A);

    gw_device_detach_session(d, SESSION_A, false);
    assert_null(gw_device_find(&T.t, DEV));
    assert_null(gw_device_session(&T.t, DEV));
    assert_int_equal(gw_device_table_online(&T.t), 0);
    /* Marked, not freed: the caller still holds it until the loop turns. */
    assert_int_equal(d->state, GW_DEVICE_GONE);
    assert_string_equal(d->client_id, DEV);
    assert_null(d->session);
    assert_string_equal(d->link.session_id, "");
    assert_false(d->link.open);
    assert_true(gw_list_linked(&d->reap_node));
    assert_int_equal(gw_list_count(&T.t.reap), 1);
    assert_int_equal(T.n_events, 2);
    assert_int_equal(T.events[1].state, GW_DEVICE_GONE);
    assert_true(T.events[1].on_reap_list);
    turn();
    assert_true(gw_list_empty(&T.t.reap));
}

/* A newer hello (or shutdown) keeps the device online between sessions. */
static void test_session_keep_online(void **state)
{
    struct gw_device *d = NULL, *d2 = NULL;

    (void)state;
    start("{\"discover\":false}");
    assert_int_equal(
        gw_device_attach_session(&T.t, DEV, SESSION_A, "sid-1", &d), 0);
    gw_device_detach_session(d, SESSION_A, true);
    assert_ptr_equal(gw_device_find(&T.t, DEV), d);
    assert_int_equal(d->state, GW_DEVICE_KNOWN);
    assert_null(d->session);
    assert_string_equal(d->link.session_id, "");
    assert_int_equal(
        gw_device_attach_session(&T.t, DEV, SESSION_B, "sid-2", &d2), 0);
    assert_ptr_equal(d2, d);
    assert_string_equal(d->link.session_id, "sid-2");
    assert_int_equal(T.n_events, 1); /* online once, never offline */
    turn();
    assert_ptr_equal(gw_device_find(&T.t, DEV), d);

    gw_device_detach_session(d, SESSION_B, false);
    assert_null(gw_device_find(&T.t, DEV));
    assert_int_equal(T.n_events, 2);
    assert_int_equal(T.events[1].state, GW_DEVICE_GONE);
}

/* A hello that replaced a session and was then refused: settling ends the
 * record kept for it, unless a session or the broker still holds it. */
static void test_settle(void **state)
{
    struct gw_device *d = NULL, *d2 = NULL;

    (void)state;
    start("{\"discover\":false}");
    gw_device_settle(&T.t, DEV); /* unknown: nothing */
    assert_int_equal(T.n_events, 0);

    assert_int_equal(
        gw_device_attach_session(&T.t, DEV, SESSION_A, "sid-1", &d), 0);
    gw_device_settle(&T.t, DEV); /* its session holds it */
    assert_ptr_equal(gw_device_find(&T.t, DEV), d);
    gw_device_detach_session(d, SESSION_A, true);
    assert_ptr_equal(gw_device_find(&T.t, DEV), d);
    gw_device_settle(&T.t, DEV);
    assert_null(gw_device_find(&T.t, DEV));
    assert_int_equal(d->state, GW_DEVICE_GONE);
    assert_int_equal(T.n_events, 2);
    assert_int_equal(T.events[1].state, GW_DEVICE_GONE);

    /* The broker's word keeps it. */
    assert_int_equal(presence(DEV2, true, "10.1.2.4", 1), GW_PRESENCE_ARRIVED);
    assert_int_equal(
        gw_device_attach_session(&T.t, DEV2, SESSION_A, "sid-2", &d2), 0);
    gw_device_detach_session(d2, SESSION_A, true);
    gw_device_settle(&T.t, DEV2);
    assert_ptr_equal(gw_device_find(&T.t, DEV2), d2);
    assert_int_equal(d2->state, GW_DEVICE_KNOWN);
    turn();
    assert_true(gw_list_empty(&T.t.reap));
}

/* Presence online keeps the record past its session; presence LEFT with a
 * session attached keeps it until the session lets go. */
static void test_session_and_presence(void **state)
{
    struct gw_device *d = NULL, *d2 = NULL;

    (void)state;
    start("{\"discover\":false}");
    assert_int_equal(presence(DEV, true, "10.1.2.3", 1), GW_PRESENCE_ARRIVED);
    assert_int_equal(
        gw_device_attach_session(&T.t, DEV, SESSION_A, "sid-1", &d), 0);
    assert_ptr_equal(gw_device_find(&T.t, DEV), d);
    gw_device_detach_session(d, SESSION_A, false);
    assert_ptr_equal(gw_device_find(&T.t, DEV), d); /* the broker says so */
    assert_int_equal(d->state, GW_DEVICE_KNOWN);
    assert_int_equal(T.n_events, 1);

    assert_int_equal(
        gw_device_attach_session(&T.t, DEV, SESSION_B, "sid-2", &d2), 0);
    assert_ptr_equal(d2, d);
    assert_int_equal(presence(DEV, false, "", 1), GW_PRESENCE_LEFT);
    assert_ptr_equal(gw_device_find(&T.t, DEV), d); /* held by its session */
    assert_int_equal(d->state, GW_DEVICE_KNOWN);
    assert_false(d->presence.online);
    assert_int_equal(T.t.presence_count, 0);
    assert_ptr_equal(gw_device_session(&T.t, DEV), SESSION_B);
    assert_true(d->link.open);
    assert_int_equal(T.n_events, 1);
    turn();
    assert_ptr_equal(gw_device_find(&T.t, DEV), d);

    gw_device_detach_session(d, SESSION_B, false);
    assert_null(gw_device_find(&T.t, DEV));
    assert_int_equal(d->state, GW_DEVICE_GONE);
    assert_int_equal(T.n_events, 2);
    assert_int_equal(T.events[1].state, GW_DEVICE_GONE);
    assert_false(T.events[1].presence);

    /* A session of a device the broker never named, then presence for it:
     * ARRIVED, but the listener already knew it was online. */
    assert_int_equal(
        gw_device_attach_session(&T.t, DEV2, SESSION_A, "sid-3", &d), 0);
    assert_int_equal(T.n_events, 3);
    assert_int_equal(presence(DEV2, true, "10.1.2.4", 4), GW_PRESENCE_ARRIVED);
    assert_int_equal(T.n_events, 3);
    assert_int_equal(T.t.presence_count, 1);
    gw_device_detach_session(d, SESSION_A, false);
    assert_ptr_equal(gw_device_find(&T.t, DEV2), d);
}

/* The header promises GW_EINVAL for an id that is not a device's. */
static void test_session_refuses_non_device_id(void **state)
{
    struct gw_device *d = NULL;

    (void)state;
    start("{\"discover\":false}");
    assert_int_equal(gw_device_attach_session(&T.t, "", SESSION_A, "sid-1", &d),
                     GW_EINVAL);
    assert_int_equal(
        gw_device_attach_session(&T.t, "not-a-device", SESSION_A, "sid-1", &d),
        GW_EINVAL);
    assert_int_equal(gw_device_table_online(&T.t), 0);
}

/* ---- mark and reap ---------------------------------------------------- */

/* A listener that, told of a GONE record, reads it again after the call
 * that ended it returned: the reaper frees it only when the loop turns. */
static void test_gone_readable_until_loop_turns(void **state)
{
    struct gw_device *d = NULL;
    const struct gw_device *gone;

    (void)state;
    start("{\"discover\":false}");
    assert_int_equal(presence(DEV, true, "10.1.2.3", 1), GW_PRESENCE_ARRIVED);
    assert_int_equal(presence(DEV2, true, "10.1.2.4", 1), GW_PRESENCE_ARRIVED);
    assert_int_equal(
        gw_device_attach_session(&T.t, DEV3, SESSION_A, "sid-1", &d), 0);

    assert_int_equal(presence(DEV, false, "", 1), GW_PRESENCE_LEFT);
    gone = T.gone;
    assert_non_null(gone);
    assert_int_equal(T.events[T.n_events - 1].state, GW_DEVICE_GONE);
    assert_true(T.events[T.n_events - 1].on_reap_list);
    assert_false(T.events[T.n_events - 1].findable);
    assert_int_equal(presence(DEV2, false, "", 1), GW_PRESENCE_LEFT);
    gw_device_detach_session(d, SESSION_A, false);
    assert_int_equal(gw_list_count(&T.t.reap), 3);
    /* All three are still whole. */
    assert_int_equal(gone->state, GW_DEVICE_GONE);
    assert_string_equal(gone->client_id, DEV);
    assert_string_equal(gone->presence.address, "10.1.2.3");
    assert_ptr_equal(gone->table, &T.t);
    assert_int_equal(T.gone->state, GW_DEVICE_GONE);
    assert_string_equal(T.gone->client_id, DEV3);
    assert_false(d->link.open); /* its requests would end offline */

    turn();
    assert_true(gw_list_empty(&T.t.reap));
    assert_int_equal(gw_device_table_online(&T.t), 0);
    T.gone = NULL; /* freed now */
    /* The reaper runs again for the next record that goes. */
    assert_int_equal(presence(DEV, true, "10.1.2.3", 2), GW_PRESENCE_ARRIVED);
    assert_int_equal(presence(DEV, false, "", 2), GW_PRESENCE_LEFT);
    assert_int_equal(gw_list_count(&T.t.reap), 1);
    turn();
    assert_true(gw_list_empty(&T.t.reap));
}

/* ---- the listener and tool discovery ---------------------------------- */

static const char init_result[] =
    "\"result\":{\"protocolVersion\":\"2024-11-05\",\"capabilities\":{},"
    "\"serverInfo\":{\"name\":\"fw\",\"version\":\"1.2\"}}";
static const char tools_result[] =
    "\"result\":{\"tools\":["
    "{\"name\":\"self.light.set\",\"inputSchema\":{\"type\":\"object\"}},"
    "{\"name\":\"self.reboot\",\"annotations\":{\"audience\":[\"user\"]},"
    "\"inputSchema\":{\"type\":\"object\"}}]}";

static void test_listener_told_of_tools(void **state)
{
    struct gw_device *d;
    uint32_t init_id;

    (void)state;
    start("{\"discover\":true,\"call_timeout_ms\":600000}");
    assert_int_equal(presence(DEV, true, "10.1.2.3", 1), GW_PRESENCE_ARRIVED);
    d = gw_device_find(&T.t, DEV);
    assert_int_equal(T.n_events, 1);
    assert_int_equal(T.events[0].state, GW_DEVICE_KNOWN);
    assert_int_equal(T.events[0].tools, GW_TOOL_LIST_PENDING);
    assert_int_equal(d->discovery.state, GW_MCP_INITIALIZING);
    assert_int_equal(d->link.n_pending, 1);
    init_id = d->link.next_id;

    /* A repeat presence does not start a second discovery. */
    assert_int_equal(presence(DEV, true, "10.1.2.3", 1), GW_PRESENCE_SAME);
    assert_int_equal(d->link.n_pending, 1);
    assert_int_equal(d->link.next_id, init_id);

    /* Answers are consumed by the table, whoever waits for them. */
    assert_true(answer_latest(d, init_result));
    assert_int_equal(d->discovery.state, GW_MCP_LISTING);
    assert_string_equal(d->catalog.info.name, "fw");
    assert_string_equal(d->catalog.info.server_ver, "1.2");
    assert_int_equal(d->link.n_pending, 1);
    assert_true(d->link.next_id != init_id);
    assert_int_equal(T.n_events, 1);
    uint64_t serial = d->tools.serial;
    assert_true(answer_latest(d, tools_result));
    assert_int_equal(d->discovery.state, GW_MCP_READY);
    assert_int_equal(d->tools.state, GW_TOOL_LIST_COMPLETE);
    assert_int_equal(gw_tool_cache_count(&d->tools), 2);
    assert_true(d->tools.serial != serial);
    assert_int_equal(T.t.links.stats.discoveries, 1);
    assert_int_equal(T.n_events, 2);
    assert_int_equal(T.events[1].state, GW_DEVICE_KNOWN);
    assert_int_equal(T.events[1].tools, GW_TOOL_LIST_COMPLETE);

    /* The device says its tools changed: read again. Not consumed: the
     * backend may want the notification too. */
    assert_false(
        gw_fixture_mcp_in(&T.t, DEV,
                          "{\"jsonrpc\":\"2.0\","
                          "\"method\":\"notifications/tools/list_changed\"}"));
    assert_int_equal(T.t.links.stats.list_changed, 1);
    assert_int_equal(d->discovery.state, GW_MCP_INITIALIZING);
    assert_int_equal(d->tools.state, GW_TOOL_LIST_PENDING);
    assert_true(answer_latest(
        d, "\"error\":{\"code\":-32601,\"message\":\"no initialize\"}"));
    assert_int_equal(d->discovery.state, GW_MCP_FAILED);
    assert_int_equal(d->tools.state, GW_TOOL_LIST_FAILED);
    assert_int_equal(gw_tool_cache_count(&d->tools), 0);
    assert_int_equal(T.n_events, 3);
    assert_int_equal(T.events[2].state, GW_DEVICE_KNOWN);
    assert_int_equal(T.events[2].tools, GW_TOOL_LIST_FAILED);

    /* Refresh on demand; unknown devices have none. */
    assert_int_equal(gw_device_refresh(&T.t, DEV2), GW_ENOENT);
    assert_int_equal(gw_device_refresh(&T.t, DEV), 0);
    assert_int_equal(d->discovery.state, GW_MCP_INITIALIZING);
    assert_int_equal(d->link.n_pending, 1);

    /* Offline: the discovery's request ends with the record. */
    assert_int_equal(presence(DEV, false, "", 1), GW_PRESENCE_LEFT);
    assert_int_equal(d->link.n_pending, 0);
    assert_int_equal(T.t.discoverer.running, 0);
    assert_int_equal(T.events[T.n_events - 1].state, GW_DEVICE_GONE);
    assert_int_equal(
        T.t.links.stats.requests[GW_MCP_FROM_GATEWAY][GW_MCP_OFFLINE], 1);
}

/*
 * tools/list_changed during a run asks for one more run after it. When
 * that run fails instead, the request must not linger and make a later
 * run, started after the change and so already current, repeat itself.
 */
static void test_list_changed_during_failed_run(void **state)
{
    struct gw_device *d;

    (void)state;
    start("{\"discover\":true,\"call_timeout_ms\":600000}");
    assert_int_equal(presence(DEV, true, "10.1.2.3", 1), GW_PRESENCE_ARRIVED);
    d = gw_device_find(&T.t, DEV);
    assert_false(
        gw_fixture_mcp_in(&T.t, DEV,
                          "{\"jsonrpc\":\"2.0\","
                          "\"method\":\"notifications/tools/list_changed\"}"));
    assert_int_equal(d->discovery.state, GW_MCP_INITIALIZING);
    assert_true(answer_latest(d, "\"error\":{\"message\":\"busy\"}"));
    assert_int_equal(d->discovery.state, GW_MCP_FAILED);
    assert_int_equal(d->link.n_pending, 0);

    assert_int_equal(gw_device_refresh(&T.t, DEV), 0);
    assert_true(answer_latest(d, init_result));
    assert_true(answer_latest(d, tools_result));
    assert_int_equal(T.t.links.stats.discoveries, 1);
    /* Done: no third run asks the device again. */
    assert_int_equal(d->discovery.state, GW_MCP_READY);
    assert_int_equal(d->link.n_pending, 0);
    assert_int_equal(d->tools.state, GW_TOOL_LIST_COMPLETE);
}

/*
 * A discovery the device does not answer in time (late, under a storm)
 * is run again after a growing, jittered delay, counted, until it is
 * answered or its retries are spent; a device that answers with an error
 * is not asked again. A retry waiting at shutdown goes with the table.
 */
static void test_discovery_retried_without_answer(void **state)
{
    const uint64_t *gateway = T.t.links.stats.requests[GW_MCP_FROM_GATEWAY];
    struct gw_device *d;
    uint32_t first_id;
    uint64_t failed_at;

    (void)state;
    start("{\"discover\":true,\"call_timeout_ms\":100,"
          "\"discover_retries\":3,\"discover_retry_ms\":200}");
    assert_int_equal(presence(DEV, true, "10.1.2.3", 1), GW_PRESENCE_ARRIVED);
    d = gw_device_find(&T.t, DEV);
    assert_int_equal(d->discovery.state, GW_MCP_INITIALIZING);
    first_id = d->link.next_id;

    /* No answer to initialize: the run fails and waits for its retry. */
    GW_FIXTURE_RUN_UNTIL(&T.fx, d->link.n_pending == 0);
    failed_at = uv_now(&T.fx.loop);
    assert_int_equal(gateway[GW_MCP_TIMEOUT], 1);
    assert_int_equal(d->discovery.state, GW_MCP_RETRYING);
    assert_int_equal(d->tools.state, GW_TOOL_LIST_FAILED);
    assert_int_equal(T.t.links.stats.discovery_retries, 1);
    assert_int_equal(T.t.discoverer.retry_waiting, 1);
    assert_int_equal(T.events[T.n_events - 1].tools, GW_TOOL_LIST_FAILED);

    /* The retry, no sooner than half its delay: initialize again, then
     * the tool list goes unanswered, which is retried too. */
    GW_FIXTURE_RUN_UNTIL(&T.fx, d->link.n_pending == 1);
    assert_true(uv_now(&T.fx.loop) - failed_at >= 100);
    assert_int_equal(d->discovery.state, GW_MCP_INITIALIZING);
    assert_true(d->link.next_id != first_id);
    assert_true(answer_latest(d, init_result));
    assert_int_equal(d->discovery.state, GW_MCP_LISTING);
    GW_FIXTURE_RUN_UNTIL(&T.fx, d->discovery.state == GW_MCP_RETRYING);
    assert_int_equal(gateway[GW_MCP_TIMEOUT], 2);
    assert_int_equal(T.t.links.stats.discovery_retries, 2);

    /* Answered at last: ready, the retries forgotten. */
    GW_FIXTURE_RUN_UNTIL(&T.fx, d->link.n_pending == 1);
    assert_true(answer_latest(d, init_result));
    assert_true(answer_latest(d, tools_result));
    assert_int_equal(d->discovery.state, GW_MCP_READY);
    assert_int_equal(d->tools.state, GW_TOOL_LIST_COMPLETE);
    assert_int_equal(d->discovery.attempts, 0);
    assert_int_equal(T.t.links.stats.discoveries, 1);
    assert_int_equal(T.t.discoverer.retry_waiting, 0);

    /* Never answered: the run and its three retries, then failed. */
    assert_int_equal(gw_device_refresh(&T.t, DEV), 0);
    for (unsigned i = 0; i < 4; i++) {
        GW_FIXTURE_RUN_UNTIL(&T.fx, d->discovery.state == GW_MCP_INITIALIZING);
        GW_FIXTURE_RUN_UNTIL(&T.fx, d->discovery.state != GW_MCP_INITIALIZING);
    }
    assert_int_equal(d->discovery.state, GW_MCP_FAILED);
    assert_int_equal(gateway[GW_MCP_TIMEOUT], 6);
    assert_int_equal(T.t.links.stats.discovery_retries, 5);
    assert_int_equal(T.t.discoverer.retry_waiting, 0);

    /* An error is an answer: failed, not retried. */
    assert_int_equal(gw_device_refresh(&T.t, DEV), 0);
    assert_true(answer_latest(
        d, "\"error\":{\"code\":-32601,\"message\":\"no initialize\"}"));
    assert_int_equal(d->discovery.state, GW_MCP_FAILED);
    assert_int_equal(T.t.links.stats.discovery_retries, 5);
    assert_int_equal(T.t.discoverer.retry_waiting, 0);

    /* Waiting for a retry when the table closes (the teardown). */
    assert_int_equal(gw_device_refresh(&T.t, DEV), 0);
    GW_FIXTURE_RUN_UNTIL(&T.fx, d->discovery.state == GW_MCP_RETRYING);
    assert_int_equal(T.t.discoverer.retry_waiting, 1);
}

/* Messages the table cannot use are counted, not acted on. */
static void test_mcp_from_devices(void **state)
{
    (void)state;
    start("{\"discover\":false}");
    assert_int_equal(presence(DEV, true, "10.1.2.3", 1), GW_PRESENCE_ARRIVED);
    assert_true(gw_fixture_mcp_in(
        &T.t, DEV, "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}"));
    assert_int_equal(T.t.links.stats.unsolicited, 1);
    assert_true(gw_fixture_mcp_in(
        &T.t, DEV2, "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}"));
    assert_int_equal(T.t.links.stats.unsolicited, 2);
    assert_true(gw_fixture_mcp_in(&T.t, DEV, "{\"jsonrpc\":\"1.0\",\"id\":5}"));
    assert_int_equal(T.t.links.stats.refused, 1);
    assert_true(gw_fixture_mcp_in(&T.t, DEV, "[1,2]"));
    assert_int_equal(T.t.links.stats.refused, 2);
    /* A device's own request is for its session to relay. */
    assert_false(gw_fixture_mcp_in(
        &T.t, DEV, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}"));
    assert_false(
        gw_fixture_mcp_in(&T.t, DEV, "{\"jsonrpc\":\"2.0\",\"method\":\"y\"}"));
    assert_int_equal(T.t.links.stats.unsolicited, 2);
    assert_int_equal(T.t.links.stats.list_changed, 0);
}

/* ---- shutdown --------------------------------------------------------- */

static void test_close(void **state)
{
    struct gw_device *d = NULL;

    (void)state;
    start("{\"discover\":true,\"call_timeout_ms\":600000}");
    assert_int_equal(presence(DEV, true, "10.1.2.3", 1), GW_PRESENCE_ARRIVED);
    assert_int_equal(presence(DEV2, true, "10.1.2.4", 1), GW_PRESENCE_ARRIVED);
    /* A session that has not ended by shutdown: the table lets go of it. */
    assert_int_equal(
        gw_device_attach_session(&T.t, DEV3, SESSION_A, "sid-1", &d), 0);
    /* One record already GONE, waiting for a reaper that will not turn. */
    assert_int_equal(presence(DEV2, false, "", 1), GW_PRESENCE_LEFT);
    assert_int_equal(gw_list_count(&T.t.reap), 1);
    unsigned told = T.n_events;

    T.started = false;
    gw_device_table_close(&T.t, on_closed, &T);
    gw_device_table_close(&T.t, on_closed, &T); /* a second call is a no-op */
    assert_int_equal(T.closed, 0);              /* from the loop */
    assert_int_equal(gw_device_table_online(&T.t), 0);
    assert_null(T.t.by_id);
    assert_int_equal(T.t.presence_count, 0);
    assert_int_equal(d->state, GW_DEVICE_GONE);
    assert_null(d->session);
    assert_int_equal(gw_list_count(&T.t.reap), 3);
    assert_int_equal(T.n_events, told); /* shutdown is nobody's news */
    /* Discoveries in flight ended cancelled; nothing new starts. */
    assert_int_equal(
        T.t.links.stats.requests[GW_MCP_FROM_GATEWAY][GW_MCP_CANCELLED], 2);
    assert_true(T.t.links.closed);
    assert_int_equal(T.t.discoverer.running, 0);
    assert_int_equal(presence(DEV, true, "10.1.2.3", 2), GW_ENOENT);
    assert_int_equal(
        gw_device_attach_session(&T.t, DEV, SESSION_B, "sid-2", &d), GW_ENOENT);
    assert_int_equal(gw_device_table_online(&T.t), 0);

    GW_FIXTURE_RUN_UNTIL(&T.fx, T.closed > 0);
    assert_int_equal(T.closed, 1);
    assert_true(gw_list_empty(&T.t.reap));
    gw_config_live_close(&T.config);
    /* teardown: every handle closed, uv_loop_close() == 0; ASan: no leak */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_presence_arrive_and_leave, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_presence_takeover_order, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_presence_bad_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_label_clash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_presence_link, setup, teardown),
        cmocka_unit_test_setup_teardown(test_presence_runs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_offline_marks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_makes_record, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_session_keep_online, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_settle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_and_presence, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_session_refuses_non_device_id,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_gone_readable_until_loop_turns,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_listener_told_of_tools, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_list_changed_during_failed_run,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_discovery_retried_without_answer,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_mcp_from_devices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
