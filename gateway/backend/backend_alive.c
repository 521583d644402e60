/*
 * Keepalive of the backend connections (docs/protocol.md section 6): a
 * connection whose backend has not answered a ping for the ping interval
 * gets one, and is dropped as lost when no pong follows within as long
 * again.
 *
 * libwebsockets can do this itself (its validity policy), but it keeps one
 * timer per connection in a sorted list that each rescheduling walks from
 * the start: with thousands of connections, each pinged every 30 s, the
 * walks took 12 % of the gateway's CPU at 3000 sessions (bench/NOTES.md).
 * Here every deadline is "now + the interval", set when a connection
 * opens, is pinged or hears a pong, so the connections stay in deadline
 * order on one plain list by moving to its tail at each of those, O(1),
 * and one timer a second walks from the head only over the deadlines that
 * have passed.
 */
#include <stdint.h>

#include <libwebsockets.h>

#include "common/log.h"
#include "gateway/backend/backend_ws_int.h"

#define ALIVE_TICK_MS 1000

static void on_alive_tick(uv_timer_t *timer);

static void queue_at_tail(struct gw_backend_ws *bws,
                          struct gw_backend_conn *conn, uint64_t now)
{
    conn->alive_due = now + bws->ping_ms;
    gw_list_unlink(&conn->quiet);
    gw_list_insert_tail(&bws->quiet, &conn->quiet);
}

void gw__backend_alive_start(struct gw_backend_conn *conn)
{
    struct gw_backend_ws *bws = conn->bws;

    if (bws->ping_ms == 0 || bws->phase != BWS_RUNNING) {
        return;
    }
    conn->ping_out = false;
    queue_at_tail(bws, conn, uv_now(bws->loop));
    /* The timer is the context's: while running, it only ticks this. */
    if (!uv_is_active((uv_handle_t *)&bws->timer)) {
        uv_timer_start(&bws->timer, on_alive_tick, ALIVE_TICK_MS,
                       ALIVE_TICK_MS);
    }
}

void gw__backend_alive_pong(struct gw_backend_conn *conn)
{
    if (!gw_list_linked(&conn->quiet)) {
        return; /* off, or ending */
    }
    conn->ping_out = false;
    queue_at_tail(conn->bws, conn, uv_now(conn->bws->loop));
}

void gw__backend_alive_stop(struct gw_backend_conn *conn)
{
    gw_list_unlink(&conn->quiet);
    conn->ping_wanted = false;
}

int gw__backend_alive_write_ping(struct gw_backend_conn *conn, struct lws *wsi)
{
    uint8_t buf[LWS_PRE + 1];

    if (!conn->ping_wanted) {
        return 0;
    }
    conn->ping_wanted = false;
    if (lws_write(wsi, buf + LWS_PRE, 0, LWS_WRITE_PING) < 0) {
        gw__backend_set_reason(conn, "write failed");
        return -1;
    }
    conn->bws->stats.tx_pings++;
    return 1;
}

static void on_alive_tick(uv_timer_t *timer)
{
    struct gw_backend_ws *bws = timer->data;
    uint64_t now = uv_now(bws->loop);
    struct gw_list *node;

    while ((node = gw_list_first(&bws->quiet)) != NULL) {
        struct gw_backend_conn *conn =
            GW_LIST_ENTRY(node, struct gw_backend_conn, quiet);

        if (conn->alive_due > now) {
            break; /* the rest are later still */
        }
        if (conn->state != CONN_OPEN) {
            gw__backend_alive_stop(conn); /* closing: its linger bounds it */
            continue;
        }
        if (conn->ping_out) {
            gw_log(GW_LOG_WARN, conn->subject,
                   "backend %s: no pong within %u s", conn->name,
                   bws->ping_ms / 1000);
            bws->stats.ping_timeouts++;
            gw__backend_finish(conn, "connection lost: no pong", true);
            continue; /* finish took it off the list */
        }
        conn->ping_out = true;
        conn->ping_wanted = true;
        queue_at_tail(bws, conn, now);
        lws_callback_on_writable(conn->wsi);
    }
    if (gw_list_empty(&bws->quiet)) {
        uv_timer_stop(timer);
    }
}
