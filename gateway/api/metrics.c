/*
 * The Prometheus text exposition (format 0.0.4) of an instance's counters:
 * one HELP and TYPE line per family, label values escaped, the MCP
 * latency as a cumulative histogram in seconds.
 */
#include "gateway/api/metrics.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "common/log.h"
#include "gateway/api/http_api_int.h"
#include "gateway/api/ota.h"
#include "gateway/api/push_stats.h"
#include "gateway/backend/backend_msg.h"
#include "gateway/mcp/mcp_outbound.h"
#include "gateway/mcp/mcp_server.h"

#define INITIAL_CAP 16384

struct out {
    char *buf;
    size_t len, cap;
    bool oom;
};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (o->oom) {
        return;
    }
    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->oom = true;
            return;
        }
        if ((size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = o->cap * 2 > o->len + (size_t)n + 1
                         ? o->cap * 2
                         : o->len + (size_t)n + 1;
        char *grown = realloc(o->buf, cap);
        if (grown == NULL) {
            o->oom = true;
            return;
        }
        o->buf = grown;
        o->cap = cap;
    }
}

static void family(struct out *o, const char *name, const char *type,
                   const char *help)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value as the format wants it: \\, \" and \n escaped. */
static void put_label_value(struct out *o, const char *v)
{
    for (; *v != '\0'; v++) {
        switch (*v) {
        case '\\':
            put(o, "\\\\");
            break;
        case '"':
            put(o, "\\\"");
            break;
        case '\n':
            put(o, "\\n");
            break;
        default:
            put(o, "%c", *v);
        }
    }
}

/* name{label="value"} n, or name n when label is NULL. */
static void sample(struct out *o, const char *name, const char *label,
                   const char *value, uint64_t n)
{
    if (label == NULL) {
        put(o, "%s %llu\n", name, (unsigned long long)n);
        return;
    }
    put(o, "%s{%s=\"", name, label);
    put_label_value(o, value);
    put(o, "\"} %llu\n", (unsigned long long)n);
}

static void counter(struct out *o, const char *name, const char *help,
                    uint64_t n)
{
    family(o, name, "counter", help);
    sample(o, name, NULL, NULL, n);
}

static void gauge(struct out *o, const char *name, const char *help, uint64_t n)
{
    family(o, name, "gauge", help);
    sample(o, name, NULL, NULL, n);
}

/* A family of two samples that differ in one label's value. */
static void pair(struct out *o, const char *name, const char *type,
                 const char *help, const char *label, const char *a,
                 uint64_t na, const char *b, uint64_t nb)
{
    family(o, name, type, help);
    sample(o, name, label, a, na);
    sample(o, name, label, b, nb);
}

/* ---- backend pools (gateway/backend/backend_pool.c) ---- */

struct pool_out {
    struct out *o;
    int family; /* which of pool_part's families is being written */
};

static void pool_label(struct out *o, const char *name, const char *backend)
{
    put(o, "%s{backend=\"", name);
    put_label_value(o, backend);
    put(o, "\"");
}

static void pool_sample(void *arg, const struct gw_backend_state *st)
{
    struct pool_out *p = arg;
    struct out *o = p->o;
    uint64_t cum = 0;

    switch (p->family) {
    case 0:
        for (int h = 0; h < GW_BHEALTH_COUNT_; h++) {
            pool_label(o, "hybridgw_backend_state", st->name);
            put(o, ",state=\"%s\"} %d\n",
                gw_backend_health_name((enum gw_backend_health)h),
                st->health == (enum gw_backend_health)h);
        }
        break;
    case 1:
        pool_label(o, "hybridgw_backend_active_sessions", st->name);
        put(o, "} %llu\n", (unsigned long long)st->active);
        break;
    case 2:
        pool_label(o, "hybridgw_backend_attempts_total", st->name);
        put(o, "} %llu\n", (unsigned long long)st->attempts);
        break;
    case 3:
        for (int i = 0; i < GW_BFAIL_COUNT_; i++) {
            pool_label(o, "hybridgw_backend_failures_total", st->name);
            put(o, ",reason=\"%s\"} %llu\n",
                gw_backend_failure_name((enum gw_backend_failure)i),
                (unsigned long long)st->failures[i]);
        }
        break;
    case 5:
    case 6:
        for (int dir = 0; dir < 2; dir++) {
            pool_label(o,
                       p->family == 5 ? "hybridgw_backend_audio_frames_total"
                                      : "hybridgw_backend_audio_bytes_total",
                       st->name);
            put(o, ",direction=\"%s\"} %llu\n", dir == 0 ? "to" : "from",
                (unsigned long long)(p->family == 5 ? st->frames[dir]
                                                    : st->bytes[dir]));
        }
        break;
    default:
        for (int i = 0; i <= GW_POOL_LATENCY_BUCKETS; i++) {
            cum += st->latency[i];
            pool_label(o, "hybridgw_backend_hello_seconds_bucket", st->name);
            if (i < GW_POOL_LATENCY_BUCKETS) {
                put(o, ",le=\"%g\"} %llu\n",
                    gw_backend_pool_latency_bounds[i] / 1000.0,
                    (unsigned long long)cum);
            } else {
                put(o, ",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
            }
        }
        pool_label(o, "hybridgw_backend_hello_seconds_sum", st->name);
        put(o, "} %.3f\n", (double)st->latency_sum_ms / 1000.0);
        pool_label(o, "hybridgw_backend_hello_seconds_count", st->name);
        put(o, "} %llu\n", (unsigned long long)cum);
        break;
    }
}

/* Per backend, every backend a session was sent to since the start. */
static void pool_part(struct out *o, const struct gw_metrics_sources *src)
{
    static const char *const families[][3] = {
        {"hybridgw_backend_state", "gauge",
         "1 for the backend's health: up (in rotation), down (out of it "
         "for a backoff), trial (one trial session under way)."},
        {"hybridgw_backend_active_sessions", "gauge",
         "Sessions connecting to or using the backend."},
        {"hybridgw_backend_attempts_total", "counter",
         "Sessions sent to the backend (failover attempts included)."},
        {"hybridgw_backend_failures_total", "counter",
         "Failed attempts and abnormally ended sessions, by reason."},
        {"hybridgw_backend_hello_seconds", "histogram",
         "Time from the start of an attempt to the backend's hello."},
        {"hybridgw_backend_audio_frames_total", "counter",
         "Audio messages sent to (to) and received from (from) the backend "
         "by its sessions."},
        {"hybridgw_backend_audio_bytes_total", "counter",
         "Audio bytes of those messages, framing headers not counted."},
    };
    const struct gw_backend_pool *pool =
        src->sessions != NULL ? src->sessions->env.pool : NULL;
    struct pool_out p = {.o = o};

    if (pool == NULL) {
        return;
    }
    for (p.family = 0; p.family < 7; p.family++) {
        family(o, families[p.family][0], families[p.family][1],
               families[p.family][2]);
        gw_backend_pool_each(pool, pool_sample, &p);
    }
}

/* ---- the families ------------------------------------------------------ */

/* Device-to-device calls (gateway/session/device_call.h). */
static void calls_part(struct out *o, const struct gw_metrics_sources *src)
{
    const struct gw_device_calls *c = src->calls;
    const struct gw_device_call_stats *st;
    static const char *const routes[2] = {"request", "accept"};

    if (c == NULL) {
        return;
    }
    st = &c->stats;

    gauge(o, "hybridgw_calls_ringing", "Device calls waiting for an answer.",
          c->n_ringing);
    gauge(o, "hybridgw_calls_bridged", "Device calls relaying audio.",
          c->n_bridged);
    counter(o, "hybridgw_calls_started_total", "Device calls that rang.",
            st->started);
    counter(o, "hybridgw_calls_accepted_total", "Device calls bridged.",
            st->bridged);
    family(o, "hybridgw_calls_answers_total", "counter",
           "Call API answers, by route and status.");
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < GW_DEVICE_CALL_ANSWER_COUNT_; i++) {
            put(o,
                "hybridgw_calls_answers_total{route=\"%s\",status=\"%s\"} "
                "%llu\n",
                routes[r],
                gw_device_call_answer_name((enum gw_device_call_answer)i),
                (unsigned long long)st->answers[r][i]);
        }
    }
    family(o, "hybridgw_calls_ended_total", "counter",
           "Device calls ended, by reason.");
    for (int i = 0; i < GW_DEVICE_CALL_END_COUNT_; i++) {
        sample(o, "hybridgw_calls_ended_total", "reason",
               gw_device_call_end_name((enum gw_device_call_end)i),
               st->ended[i]);
    }
    counter(o, "hybridgw_calls_relayed_packets_total",
            "Opus packets relayed from one side of a call to the other.",
            st->relayed_frames);
    counter(o, "hybridgw_calls_relayed_bytes_total",
            "Opus bytes relayed between the sides of calls.",
            st->relayed_bytes);
    counter(o, "hybridgw_calls_relay_refused_total",
            "Call packets the other side's UDP peer refused.",
            st->relay_refused);
    counter(o, "hybridgw_calls_silence_packets_total",
            "Opus silence packets sent to waiting callers.",
            st->silence_frames);
    counter(o, "hybridgw_calls_wakeups_failed_total",
            "Remote wake-ups a callee did not take.", st->wakeups_failed);
}

static void sessions_part(struct out *o, const struct gw_metrics_sources *src)
{
    const struct gw_counters *st = src->counters;

    family(o, "hybridgw_uptime_seconds", "gauge",
           "Seconds since the instance started.");
    put(o, "hybridgw_uptime_seconds %.3f\n",
        (double)(uv_now(src->loop) - src->started_ms) / 1000.0);
    counter(o, "hybridgw_log_lines_suppressed_total",
            "Log lines peers could trigger left out by their rate limit.",
            gw_log_peer_suppressed());
    gauge(o, "hybridgw_sessions", "Voice sessions now open.",
          gw_sessions_live(src->sessions));
    gauge(o, "hybridgw_devices_online", "Devices now online.",
          gw_device_table_online(src->devices));
    gauge(o, "hybridgw_broker_up", "1 while the broker link is up.",
          src->mqtt != NULL && gw_mqtt_link_is_up(src->mqtt));
    counter(o, "hybridgw_devices_presence_expired_total",
            "Devices taken offline still unconfirmed after a broker outage.",
            src->devices->expired);
    counter(o, "hybridgw_sessions_started_total", "Voice sessions started.",
            st->sessions_started);
    family(o, "hybridgw_sessions_ended_total", "counter",
           "Voice sessions ended, by reason.");
    for (int i = 0; i < GW_END_COUNT_; i++) {
        sample(o, "hybridgw_sessions_ended_total", "reason",
               gw_session_end_name((enum gw_session_end)i),
               st->sessions_ended[i]);
    }
    family(o, "hybridgw_messages_refused_total", "counter",
           "Messages refused, by reason.");
    for (int i = 0; i < GW_REFUSE_COUNT_; i++) {
        sample(o, "hybridgw_messages_refused_total", "reason",
               gw_refusal_name((enum gw_refusal)i), st->refused[i]);
    }
    pair(o, "hybridgw_messages_relayed_total", "counter",
         "JSON messages relayed between devices and backends.", "direction",
         "device_to_backend", st->device_messages, "backend_to_device",
         st->backend_messages);
    pair(o, "hybridgw_audio_packets_total", "counter",
         "Opus packets relayed between devices and backends.", "direction",
         "device_to_backend", st->uplink_audio, "backend_to_device",
         st->downlink_audio);
    pair(o, "hybridgw_presence_changes_total", "counter",
         "Devices the broker reported coming online or going offline.", "to",
         "online", st->presence_online, "offline", st->presence_offline);
}

/* The outbox of device-bound messages held over a broker outage. Held is
 * sent + expired + what waits now; overflow ones were never held. */
static void outbox_part(struct out *o, const struct gw_metrics_sources *src)
{
    const struct gw_publisher *pub = src->sessions->env.pub;

    if (pub == NULL) {
        return;
    }
    pair(o, "hybridgw_outbox_messages_total", "counter",
         "Device-bound messages the outbox handled over broker outages, by "
         "outcome.",
         "outcome", "held", pub->stats.held, "sent", pub->stats.sent);
    sample(o, "hybridgw_outbox_messages_total", "outcome", "expired",
           pub->stats.expired);
    sample(o, "hybridgw_outbox_messages_total", "outcome", "overflow",
           pub->stats.overflow);
    gauge(o, "hybridgw_outbox_depth_messages",
          "Device-bound messages waiting in the outbox.", pub->held_count);
    gauge(o, "hybridgw_outbox_depth_bytes",
          "Payload bytes waiting in the outbox.", pub->held_bytes);
}

/* A histogram from per-bucket counts (n bounds, then the rest), in
 * seconds: bounds and sum are given in units of 1/scale s. */
static void histogram(struct out *o, const char *name, const char *help,
                      const unsigned *bounds, const uint64_t *le, int n,
                      uint64_t sum, double scale)
{
    uint64_t cum = 0;

    family(o, name, "histogram", help);
    for (int i = 0; i < n; i++) {
        cum += le[i];
        put(o, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[i] / scale,
            (unsigned long long)cum);
    }
    cum += le[n];
    put(o, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    put(o, "%s_sum %.6f\n", name, (double)sum / scale);
    put(o, "%s_count %llu\n", name, (unsigned long long)cum);
}

/* One backend's samples of hybridgw_backend_frames_dropped_total. */
static void backend_drops(const char *backend, const uint64_t *by_reason,
                          void *arg)
{
    struct out *o = arg;

    for (int i = 0; i < GW_BACKEND_DROP_COUNT_; i++) {
        put(o, "hybridgw_backend_frames_dropped_total{backend=\"");
        put_label_value(o, backend);
        put(o, "\",reason=\"%s\"} %llu\n",
            gw_backend_drop_name((enum gw_backend_drop)i),
            (unsigned long long)by_reason[i]);
    }
}

static void transport_part(struct out *o, const struct gw_metrics_sources *src)
{
    if (src->udp != NULL) {
        struct gw_udp_audio_stats us;
        gw_udp_audio_get_stats(src->udp, &us);
        counter(o, "hybridgw_udp_received_total", "UDP datagrams read.",
                us.rx_packets);
        counter(o, "hybridgw_udp_sent_total", "UDP audio datagrams sent.",
                us.tx_audio);
        counter(o, "hybridgw_udp_late_accepted_total",
                "Uplink audio accepted late: below the last sequence, "
                "inside the late window, never seen before.",
                us.rx_late);
        pair(o, "hybridgw_udp_read_wakeups_total", "counter",
             "Wakeups that read the UDP socket: on its own events (slow "
             "arrivals) or on the read timer's ticks (batches).",
             "mode", "events", us.rx_wakeups_events, "ticks",
             us.rx_wakeups_ticks);
        family(o, "hybridgw_udp_drops_total", "counter",
               "UDP datagrams dropped, by reason.");
        for (int i = 0; i < GW_UDP_DROP_COUNT_; i++) {
            sample(o, "hybridgw_udp_drops_total", "reason",
                   gw_udp_drop_name((enum gw_udp_drop)i), us.drops[i]);
        }
        counter(o, "hybridgw_udp_address_moves_total",
                "Sessions whose device's UDP address moved (NAT rebinding, "
                "roaming).",
                us.address_moves);
        family(o, "hybridgw_udp_doctor_total", "counter",
               "Sessions without valid UDP audio a few seconds after the "
               "server hello (udp.doctor_after_s), by likely cause.");
        for (int i = 0; i < GW_UDP_DOCTOR_COUNT_; i++) {
            sample(o, "hybridgw_udp_doctor_total", "cause",
                   gw_udp_doctor_name((enum gw_udp_doctor_cause)i),
                   us.doctor[i]);
        }
        counter(o, "hybridgw_udp_doctor_unwatched_total",
                "Devices whose address the doctor could not watch for "
                "unknown ssrcs (its table was full).",
                us.doctor_unwatched);
        histogram(o, "hybridgw_udp_relay_seconds",
                  "Time from the kernel's receipt of a device datagram to "
                  "its hand-off to the backend socket.",
                  gw_udp_relay_bounds_us, us.relay_le, GW_UDP_RELAY_BUCKETS,
                  us.relay_sum_us, 1e6);
    }
    if (src->bws != NULL) {
        struct gw_backend_ws_stats bs;
        gw_backend_ws_get_stats(src->bws, &bs);
        gauge(o, "hybridgw_backend_connections",
              "Backend WebSockets open or closing.", bs.live);
        counter(o, "hybridgw_backend_connects_total",
                "Backend WebSocket upgrades that succeeded.", bs.connects);
        counter(o, "hybridgw_backend_connect_errors_total",
                "Backend WebSockets that failed before the upgrade.",
                bs.connect_errors);
        family(o, "hybridgw_backend_messages_total", "counter",
               "Backend WebSocket messages, by direction and kind.");
        put(o,
            "hybridgw_backend_messages_total{direction=\"rx\",kind=\"text\"} "
            "%llu\n"
            "hybridgw_backend_messages_total{direction=\"rx\",kind=\"audio\"} "
            "%llu\n"
            "hybridgw_backend_messages_total{direction=\"tx\",kind=\"text\"} "
            "%llu\n"
            "hybridgw_backend_messages_total{direction=\"tx\",kind=\"audio\"} "
            "%llu\n",
            (unsigned long long)bs.rx_text, (unsigned long long)bs.rx_audio,
            (unsigned long long)bs.tx_text, (unsigned long long)bs.tx_audio);
        counter(o, "hybridgw_backend_bad_frames_total",
                "Binary backend messages that did not decode.",
                bs.rx_bad_frames);
        family(o, "hybridgw_backend_frames_dropped_total", "counter",
               "Binary backend messages that did not decode in the "
               "backend's framing, by backend and reason.");
        gw_backend_ws_foreach_drops(src->bws, backend_drops, o);
        counter(o, "hybridgw_backend_pings_total",
                "Pings to backend connections that had no pong for "
                "health.ping_interval_s.",
                bs.tx_pings);
        counter(o, "hybridgw_backend_pongs_total",
                "Pongs answering the pings of idle backend connections "
                "(health.ping_interval_s).",
                bs.rx_pongs);
        counter(o, "hybridgw_backend_ping_timeouts_total",
                "Backend connections dropped as lost: no answer to a ping "
                "within health.ping_interval_s.",
                bs.ping_timeouts);
        counter(o, "hybridgw_backend_dropped_total",
                "Messages dropped on a full backend send queue.",
                bs.tx_dropped);
    }
    if (src->mqtt != NULL) {
        struct gw_mqtt_link_stats ms;
        gw_mqtt_link_get_stats(src->mqtt, &ms);
        counter(o, "hybridgw_mqtt_connects_total", "Broker connections made.",
                ms.connects);
        counter(o, "hybridgw_mqtt_disconnects_total",
                "Broker connections lost or refused.", ms.disconnects);
        pair(o, "hybridgw_mqtt_messages_total", "counter",
             "MQTT messages, by direction.", "direction", "rx", ms.rx_messages,
             "tx", ms.tx_messages);
        counter(o, "hybridgw_mqtt_dropped_total",
                "Publishes dropped while the broker was away.", ms.tx_dropped);
    }
}

/* The resolver caches (common/dns_cache.h), one label value each. */
static void dns_part(struct out *o, const struct gw_metrics_sources *src)
{
    struct gw_dns_stats st[2];
    const char *names[2];
    size_t n = 0;

    if (src->bws != NULL) {
        gw_backend_ws_get_dns_stats(src->bws, &st[n]);
        names[n++] = "backends";
    }
    if (src->mqtt != NULL) {
        gw_mqtt_link_get_dns_stats(src->mqtt, &st[n]);
        names[n++] = "broker";
    }
    if (n == 0) {
        return;
    }
    family(o, "hybridgw_dns_lookups_total", "counter",
           "Host name lookups made on the resolver threads, by resolver.");
    for (size_t i = 0; i < n; i++) {
        sample(o, "hybridgw_dns_lookups_total", "resolver", names[i],
               st[i].lookups);
    }
    family(o, "hybridgw_dns_cache_hits_total", "counter",
           "Host names answered from the cache or by a lookup already "
           "under way, by resolver.");
    for (size_t i = 0; i < n; i++) {
        sample(o, "hybridgw_dns_cache_hits_total", "resolver", names[i],
               st[i].hits + st[i].coalesced);
    }
    family(o, "hybridgw_dns_failures_total", "counter",
           "Host name lookups that failed, by resolver.");
    for (size_t i = 0; i < n; i++) {
        sample(o, "hybridgw_dns_failures_total", "resolver", names[i],
               st[i].failures);
    }
}

static void latency_part(struct out *o, const struct gw_mcp_stats *st)
{
    static const unsigned bounds[GW_MCP_LATENCY_BUCKETS] =
        GW_MCP_LATENCY_BOUNDS;

    histogram(o, "hybridgw_mcp_request_duration_seconds",
              "Time from a request to the device until its end.", bounds,
              st->latency_le, GW_MCP_LATENCY_BUCKETS, st->latency_sum_ms, 1e3);
}

static void mcp_part(struct out *o, const struct gw_metrics_sources *src)
{
    const struct gw_mcp_stats *st = gw_device_table_mcp_stats(src->devices);

    family(o, "hybridgw_mcp_requests_total", "counter",
           "Requests to devices' MCP servers, by origin and outcome.");
    for (int i = 0; i < GW_MCP_ORIGIN_COUNT_; i++) {
        for (int j = 0; j < GW_MCP_OUTCOME_COUNT_; j++) {
            put(o, "hybridgw_mcp_requests_total{origin=\"");
            put_label_value(o, gw_mcp_origin_name((enum gw_mcp_origin)i));
            put(o, "\",outcome=\"");
            put_label_value(o, gw_mcp_outcome_name((enum gw_mcp_outcome)j));
            put(o, "\"} %llu\n", (unsigned long long)st->requests[i][j]);
        }
    }
    latency_part(o, st);
    counter(o, "hybridgw_mcp_unsolicited_total",
            "Device MCP responses that nobody waited for.", st->unsolicited);
    counter(o, "hybridgw_mcp_refused_total",
            "Device MCP messages that did not parse.", st->refused);
    counter(o, "hybridgw_mcp_discoveries_total", "Tool discoveries completed.",
            st->discoveries);
    counter(o, "hybridgw_mcp_discovery_retries_total",
            "Discoveries run again after no answer.", st->discovery_retries);
    counter(o, "hybridgw_mcp_list_changed_total",
            "tools/list_changed notifications from devices.", st->list_changed);
    counter(o, "hybridgw_mcp_label_clashes_total",
            "Devices left off /mcp: their label was another online device's.",
            st->label_clashes);
    if (src->mcp_server != NULL) {
        struct gw_mcp_server_stats ss;
        gw_mcp_server_get_stats(src->mcp_server, &ss);
        counter(o, "hybridgw_mcp_server_sessions_opened_total",
                "MCP server sessions opened.", ss.sessions_opened);
        counter(o, "hybridgw_mcp_server_sessions_expired_total",
                "MCP server sessions that expired.", ss.sessions_expired);
        counter(o, "hybridgw_mcp_server_sessions_refused_total",
                "MCP server sessions refused with mcp.max_sessions open.",
                ss.sessions_refused);
        counter(o, "hybridgw_mcp_server_requests_total",
                "JSON-RPC requests the MCP server handled.", ss.requests);
        counter(o, "hybridgw_mcp_server_rejected_total",
                "MCP server requests answered with a 4xx status.", ss.rejected);
        gauge(o, "hybridgw_mcp_server_streams",
              "MCP server GET streams now open.", ss.streams_open);
        counter(o, "hybridgw_mcp_server_refused_total",
                "MCP server JSON-RPC requests the gateway refused itself.",
                ss.refused);
        counter(o, "hybridgw_mcp_server_progress_total",
                "Progress notifications passed on to MCP clients.",
                ss.progress);
        counter(o, "hybridgw_mcp_server_notifications_total",
                "Device notifications passed on to MCP client sessions.",
                ss.notifications);
        family(o, "hybridgw_mcp_server_device_requests_total", "counter",
               "Device requests to MCP clients (sampling, elicitation, "
               "roots), by outcome.");
        const struct {
            const char *outcome;
            uint64_t n;
        } asks[] = {{"sent", ss.asks},
                    {"answered", ss.asks_answered},
                    {"refused", ss.asks_refused},
                    {"timeout", ss.asks_timeout},
                    {"dropped", ss.asks_dropped}};
        for (size_t i = 0; i < sizeof(asks) / sizeof(asks[0]); i++) {
            put(o,
                "hybridgw_mcp_server_device_requests_total{outcome=\"%s\"} "
                "%llu\n",
                asks[i].outcome, (unsigned long long)asks[i].n);
        }
    }
}

/* Devices' requests to the MCP servers of mcp_servers, by server. */
static void outbound_requests(void *arg,
                              const struct gw_outbound_server_stats *st)
{
    struct out *o = arg;

    for (int i = 0; i < GW_OUTBOUND_OUTCOME_COUNT_; i++) {
        if (st->requests[i] == 0) {
            continue;
        }
        put(o, "hybridgw_mcp_outbound_requests_total{server=\"");
        put_label_value(o, st->name);
        put(o, "\",outcome=\"%s\"} %llu\n",
            gw_outbound_outcome_name((enum gw_outbound_outcome)i),
            (unsigned long long)st->requests[i]);
    }
}

static void outbound_failures(void *arg,
                              const struct gw_outbound_server_stats *st)
{
    struct out *o = arg;

    for (int i = 0; i < GW_OUTBOUND_FAILURE_COUNT_; i++) {
        if (st->failures[i] == 0) {
            continue;
        }
        put(o, "hybridgw_mcp_outbound_failures_total{server=\"");
        put_label_value(o, st->name);
        put(o, "\",reason=\"%s\"} %llu\n",
            gw_outbound_failure_name((enum gw_outbound_failure)i),
            (unsigned long long)st->failures[i]);
    }
}

/* One per-server count family at a time: a family's samples go together. */
struct outbound_count {
    struct out *o;
    const char *name;
    size_t offset; /* of the uint64_t in the stats */
};

static void outbound_count(void *arg, const struct gw_outbound_server_stats *st)
{
    const struct outbound_count *oc = arg;
    uint64_t n;

    if (st->name[0] == '\0') {
        return; /* the refusals of names no server has */
    }
    memcpy(&n, (const char *)st + oc->offset, sizeof(n));
    put(oc->o, "%s{server=\"", oc->name);
    put_label_value(oc->o, st->name);
    put(oc->o, "\"} %llu\n", (unsigned long long)n);
}

static void outbound_part(struct out *o, const struct gw_metrics_sources *src)
{
    if (src->outbound == NULL) {
        return;
    }
    family(o, "hybridgw_mcp_outbound_requests_total", "counter",
           "Device requests to MCP servers, by server (\"\" for a name no "
           "server of the device has) and outcome.");
    gw_mcp_outbound_each_stats(src->outbound, outbound_requests, o);
    family(o, "hybridgw_mcp_outbound_failures_total", "counter",
           "MCP server failures seen by device requests, by reason.");
    gw_mcp_outbound_each_stats(src->outbound, outbound_failures, o);
    const struct {
        const char *name, *type, *help;
        size_t offset;
    } counts[] = {
        {"hybridgw_mcp_outbound_initializes_total", "counter",
         "MCP sessions initialized with a server, by server.",
         offsetof(struct gw_outbound_server_stats, initializes)},
        {"hybridgw_mcp_outbound_reinitializes_total", "counter",
         "Sessions initialized again after the server forgot them.",
         offsetof(struct gw_outbound_server_stats, reinitializes)},
        {"hybridgw_mcp_outbound_notifications_total", "counter",
         "Server notifications passed on to devices.",
         offsetof(struct gw_outbound_server_stats, notifications)},
        {"hybridgw_mcp_outbound_sessions_ended_total", "counter",
         "Sessions with servers ended (idle, device offline).",
         offsetof(struct gw_outbound_server_stats, sessions_ended)},
        {"hybridgw_mcp_outbound_dropped_total", "counter",
         "Notifications and DELETEs to servers not sent: over the device's "
         "outbound_max_pending or the server's max_connections.",
         offsetof(struct gw_outbound_server_stats, dropped)},
        {"hybridgw_mcp_outbound_connections", "gauge",
         "Transfers to a server open now (at most its max_connections).",
         offsetof(struct gw_outbound_server_stats, connections)},
    };
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        struct outbound_count oc = {o, counts[i].name, counts[i].offset};
        family(o, counts[i].name, counts[i].type, counts[i].help);
        gw_mcp_outbound_each_stats(src->outbound, outbound_count, &oc);
    }
    counter(o, "hybridgw_mcp_outbound_refused_total",
            "Device envelopes with an endpoint refused unanswered (bad "
            "endpoint, not JSON-RPC, an unasked response).",
            gw_mcp_outbound_refused(src->outbound));
    gauge(o, "hybridgw_mcp_outbound_sessions",
          "MCP sessions of devices with servers open now.",
          gw_mcp_outbound_sessions(src->outbound));
}

static void http_part(struct out *o, const struct gw_metrics_sources *src)
{
    char code[8];

    family(o, "hybridgw_http_responses_total", "counter",
           "HTTP API responses, by status code.");
    for (int status = 100; status <= 599 && src->http_responses != NULL;
         status++) {
        uint64_t n = src->http_responses(src->http_arg, status);
        if (n > 0) {
            snprintf(code, sizeof(code), "%d", status);
            sample(o, "hybridgw_http_responses_total", "code", code, n);
        }
    }
    if (src->http_server_stats != NULL) {
        struct gw_http_server_stats hs;
        src->http_server_stats(src->http_arg, &hs);
        counter(o, "hybridgw_http_connections_refused_total",
                "HTTP connections closed at accept, over a connection limit.",
                hs.connections_refused);
        gauge(o, "hybridgw_http_connections", "HTTP connections open now.",
              hs.connections);
        gauge(o, "hybridgw_http_body_bytes",
              "Bytes of request bodies the HTTP server holds now.",
              hs.body_bytes);
    }
}

/* The OTA endpoint's outcomes: every result, zeros included, so that a
 * refusal shows as a rate from the first one. */
static void ota_part(struct out *o, const struct gw_metrics_sources *src)
{
    static const char *const activate_names[] = {
#define XX(_, name) name,
        GW_OTA_ACTIVATE_MAP(XX)
#undef XX
    };
    static const char *const binding_names[] = {
#define XX(_, name) name,
        GW_OTA_BINDING_MAP(XX)
#undef XX
    };

    if (src->ota == NULL) {
        return;
    }
    family(o, "hybridgw_ota_requests_total", "counter",
           "POST /xiaozhi/ota/ requests, by result.");
    for (int r = 0; r < GW_OTA_RESULT_COUNT_; r++) {
        sample(o, "hybridgw_ota_requests_total", "result",
               gw__api_ota_result_name((enum gw_ota_result)r),
               src->ota->results[r]);
    }
    family(o, "hybridgw_ota_activations_total", "counter",
           "POST <ota url>/activate requests, by result.");
    for (int r = 0; r < GW_OTA_ACTIVATE_COUNT_; r++) {
        sample(o, "hybridgw_ota_activations_total", "result", activate_names[r],
               src->ota->activations[r]);
    }
    family(o, "hybridgw_bindings_requests_total", "counter",
           "Operator requests on /api/bindings, by result.");
    for (int r = 0; r < GW_OTA_BINDING_COUNT_; r++) {
        sample(o, "hybridgw_bindings_requests_total", "result",
               binding_names[r], src->ota->bindings[r]);
    }
    counter(o, "hybridgw_ota_bodies_ignored_total",
            "Checks answered from their headers because the body did not "
            "parse (an unescaped Wi-Fi name).",
            src->ota->bodies_ignored);
}

/* Pushes to idle devices (gateway/api/http_api_push.c). */
static void push_part(struct out *o, const struct gw_metrics_sources *src)
{
    static const char *const results[] = {
#define XX(_, name) name,
        GW_PUSH_RESULT_MAP(XX)
#undef XX
    };
    const struct gw_push_stats *p = src->push;

    if (p == NULL) {
        return;
    }
    family(o, "hybridgw_pushes_total", "counter",
           "alert, system and custom messages pushed, per device, by result.");
    for (int t = 0; t < GW_DEVICE_COMMAND_TYPE_COUNT_; t++) {
        if (t == GW_DEVICE_COMMAND_MCP) {
            continue; /* counted as MCP requests of origin api */
        }
        for (int r = 0; r < GW_PUSH_RESULT_COUNT_; r++) {
            put(o, "hybridgw_pushes_total{type=\"%s\",result=\"%s\"} %llu\n",
                gw_device_command_type_name((enum gw_device_command_type)t),
                results[r], (unsigned long long)p->messages[t][r]);
        }
    }
    counter(o, "hybridgw_push_refused_total",
            "Push and fan-out bodies refused (400, 413).", p->refused);
    counter(o, "hybridgw_push_broadcasts_total", "Fan-outs answered.",
            p->broadcasts);
}

/* Tallies of the loop's handles, for uv_walk. */
struct handle_tally {
    uint64_t open, active, timers;
};

static void tally_handle(uv_handle_t *h, void *arg)
{
    struct handle_tally *t = arg;

    if (uv_is_closing(h)) {
        return;
    }
    t->open++;
    if (uv_is_active(h)) {
        t->active++;
        t->timers += h->type == UV_TIMER;
    }
}

/* The loop's handles: a leak of sockets or timers shows here long before
 * it shows in memory (the soak test watches these). uv_walk is linear in
 * the handles, a few thousand per scrape. */
/* Membership and ownership (gateway/cluster/cluster.h). */
static void cluster_part(struct out *o, const struct gw_metrics_sources *src)
{
    const struct gw_cluster *c = src->cluster != NULL ? *src->cluster : NULL;
    struct gw_cluster_stats st;
    uint64_t owned = 0;

    if (c == NULL) {
        return;
    }
    gw_cluster_get_stats(c, &st);
    const struct gw_device *d;
    GW_DEVICE_FOREACH(src->devices, d)
    {
        owned += d->presence.online && gw_cluster_owns(c, d->client_id);
    }
    pair(o, "hybridgw_cluster_instances", "gauge",
         "Live instances this one sees (itself included), by state.", "state",
         "running", st.running, "draining", st.draining);
    gauge(o, "hybridgw_cluster_owned_devices",
          "Online devices whose new conversations are this instance's.", owned);
    counter(o, "hybridgw_cluster_hellos_ignored_total",
            "Hellos left to the device's owner, another instance.",
            st.hellos_ignored);
    counter(o, "hybridgw_cluster_messages_ignored_total",
            "Other device messages left to another instance.",
            st.messages_ignored);
    counter(o, "hybridgw_cluster_records_refused_total",
            "Instance records that did not parse.", st.records_refused);
    gauge(o, "hybridgw_cluster_draining",
          "1 while this instance drains (takes no new conversations).",
          gw_cluster_is_draining(c));
    if (src->crpc == NULL || *src->crpc == NULL) {
        return;
    }
    struct gw_cluster_rpc_stats rs;
    gw_cluster_rpc_get_stats(*src->crpc, &rs);
    pair(o, "hybridgw_cluster_requests_total", "counter",
         "Device requests carried to their owner (out) and served here "
         "for another instance (in).",
         "direction", "out", rs.carried_out, "in", rs.carried_in);
    counter(o, "hybridgw_cluster_replies_sent_total",
            "Ends of requests served here, sent back to their instance.",
            rs.replies_out);
    pair(o, "hybridgw_cluster_catalogs_total", "counter",
         "Device catalogs sent by their owner (out) and taken (in).",
         "direction", "out", rs.catalogs_out, "in", rs.catalogs_in);
    counter(o, "hybridgw_cluster_messages_refused_total",
            "Messages from other instances that did not parse or fit.",
            rs.refused);
    counter(o, "hybridgw_cluster_messages_oversize_total",
            "Messages for other instances not sent: over the broker's "
            "packet limit (mqtt.max_packet_bytes).",
            rs.oversize);
    counter(o, "hybridgw_cluster_catalogs_foreign_total",
            "Catalogs refused: not from the device's owner, or on another "
            "instance's topic.",
            rs.catalogs_foreign);
    pair(o, "hybridgw_cluster_catalog_parts_total", "counter",
         "Parts of catalogs too large for one message, sent (out) and "
         "taken (in).",
         "direction", "out", rs.catalog_parts_out, "in", rs.catalog_parts_in);
    counter(o, "hybridgw_cluster_requests_refused_total",
            "Requests carried here that the device's rules refuse.",
            rs.requests_refused);
    pair(o, "hybridgw_cluster_device_messages_total", "counter",
         "Mode shared: device messages carried to the instance that "
         "owns them (out) and carried here (in).",
         "direction", "out", rs.up_out, "in", rs.up_in);
}

static void loop_part(struct out *o, const struct gw_metrics_sources *src)
{
    struct handle_tally t = {0};

    uv_walk(src->loop, tally_handle, &t);
    gauge(o, "hybridgw_loop_handles", "libuv handles open on the loop.",
          t.open);
    gauge(o, "hybridgw_loop_active_handles",
          "libuv handles active on the loop (timers running, sockets read).",
          t.active);
    gauge(o, "hybridgw_loop_active_timers", "libuv timers running.", t.timers);
#if defined(__GLIBC__) &&                                                      \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    /* Bytes the program holds, unlike RSS, which keeps the high-water mark
     * of a heap that glibc rarely gives back. */
    struct mallinfo2 mi = mallinfo2();
    gauge(o, "hybridgw_heap_in_use_bytes",
          "Heap bytes allocated and not yet freed (glibc mallinfo2).",
          (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd);
#endif
}

int gw__api_metrics_format(const struct gw_metrics_sources *src, char **out,
                           size_t *len)
{
    struct out o = {.buf = malloc(INITIAL_CAP), .cap = INITIAL_CAP};

    if (o.buf == NULL) {
        return GW_ENOMEM;
    }
    o.buf[0] = '\0';
    sessions_part(&o, src);
    struct gw__api_turn_hist th[GW__API_TURN_HISTS];
    gw__api_turn_hists(src, th);
    for (int i = 0; i < GW__API_TURN_HISTS; i++) {
        histogram(&o, th[i].name, th[i].help, gw_latency_bounds_us, th[i].h.le,
                  GW_LATENCY_BUCKETS, th[i].h.sum_us, 1e6);
    }
    calls_part(&o, src);
    outbox_part(&o, src);
    transport_part(&o, src);
    dns_part(&o, src);
    pool_part(&o, src);
    mcp_part(&o, src);
    outbound_part(&o, src);
    http_part(&o, src);
    ota_part(&o, src);
    push_part(&o, src);
    cluster_part(&o, src);
    loop_part(&o, src);
    if (o.oom) {
        free(o.buf);
        return GW_ENOMEM;
    }
    *out = o.buf;
    *len = o.len;
    return 0;
}
