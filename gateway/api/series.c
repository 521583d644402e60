/*
 * The last minutes of the instance, for the operator page's charts: every
 * SERIES_EVERY_MS a sample of live sessions, UDP packet rates and the
 * turn histograms' count and mean, in a bounded ring, so that a page
 * opened now shows what happened before it; and the turn histograms
 * /metrics writes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/api/http_api_int.h"

#define SERIES_EVERY_MS 10000
#define SERIES_SAMPLES  90 /* 15 minutes */

/* A reading of the counters the samples are differences of. */
struct reading {
    int64_t wall_ms;
    uint64_t loop_ms;
    uint64_t rx, tx; /* UDP datagrams read, audio datagrams sent */
    uint64_t n[GW__API_TURN_HISTS], sum_us[GW__API_TURN_HISTS];
};

struct sample {
    int64_t wall_ms;  /* end of its span */
    uint32_t span_ms; /* what the rates are over */
    uint32_t sessions;
    uint64_t rx, tx;
    uint64_t n[GW__API_TURN_HISTS], sum_us[GW__API_TURN_HISTS];
};

struct gw__api_series {
    uv_timer_t timer;
    const struct gw_metrics_sources *src;
    struct reading last;
    struct sample ring[SERIES_SAMPLES];
    unsigned head, count; /* next slot; samples held */
};

/* The turn histograms: what each one times (docs/protocol.md, /metrics). */
static const struct {
    const char *key, *name, *help;
} turn_hists[GW__API_TURN_HISTS] = {
    {"listen_stop", "hybridgw_turn_listen_stop_seconds",
     "From a device's listen stop read off the broker to its hand-off to "
     "the backend's socket."},
    {"tts_start", "hybridgw_turn_tts_start_seconds",
     "From a backend's tts start read off its socket to its publication to "
     "the device."},
    {"first_audio", "hybridgw_turn_first_audio_seconds",
     "From the backend's first audio frame after a tts start to its UDP "
     "datagram sent to the device."},
    {"tts_to_audio", "hybridgw_turn_tts_to_audio_seconds",
     "From a backend's tts start read off its socket to the turn's first "
     "UDP audio datagram sent to the device."},
};

void gw__api_turn_hists(const struct gw_metrics_sources *src,
                        struct gw__api_turn_hist out[GW__API_TURN_HISTS])
{
    struct gw_udp_audio_stats us;

    memset(out, 0, sizeof(*out) * GW__API_TURN_HISTS);
    for (int i = 0; i < GW__API_TURN_HISTS; i++) {
        out[i].key = turn_hists[i].key;
        out[i].name = turn_hists[i].name;
        out[i].help = turn_hists[i].help;
    }
    out[0].h = src->counters->turn_listen_stop;
    out[1].h = src->counters->turn_tts_start;
    if (src->udp != NULL) {
        gw_udp_audio_get_stats(src->udp, &us);
        out[2].h = us.turn_first_audio;
        out[3].h = us.turn_tts_to_audio;
    }
}

static void read_now(const struct gw_metrics_sources *src, struct reading *r)
{
    struct gw__api_turn_hist th[GW__API_TURN_HISTS];
    struct gw_udp_audio_stats us = {0};

    if (src->udp != NULL) {
        gw_udp_audio_get_stats(src->udp, &us);
    }
    r->wall_ms = gw_wall_ms();
    r->loop_ms = uv_now(src->loop);
    r->rx = us.rx_packets;
    r->tx = us.tx_audio;
    gw__api_turn_hists(src, th);
    for (int i = 0; i < GW__API_TURN_HISTS; i++) {
        r->n[i] = th[i].h.count;
        r->sum_us[i] = th[i].h.sum_us;
    }
}

/* The sample from reading a to reading b. */
static void sample_of(const struct gw_metrics_sources *src,
                      const struct reading *a, const struct reading *b,
                      struct sample *s)
{
    s->wall_ms = b->wall_ms;
    s->span_ms = (uint32_t)(b->loop_ms - a->loop_ms);
    s->sessions = (uint32_t)gw_sessions_live(src->sessions);
    s->rx = b->rx - a->rx;
    s->tx = b->tx - a->tx;
    for (int i = 0; i < GW__API_TURN_HISTS; i++) {
        s->n[i] = b->n[i] - a->n[i];
        s->sum_us[i] = b->sum_us[i] - a->sum_us[i];
    }
}

static void on_tick(uv_timer_t *timer)
{
    struct gw__api_series *se = timer->data;
    struct reading now;

    read_now(se->src, &now);
    sample_of(se->src, &se->last, &now, &se->ring[se->head]);
    se->head = (se->head + 1) % SERIES_SAMPLES;
    se->count += se->count < SERIES_SAMPLES;
    se->last = now;
}

int gw__api_series_init(uv_loop_t *loop, const struct gw_metrics_sources *src,
                        struct gw__api_series **out)
{
    struct gw__api_series *se = calloc(1, sizeof(*se));

    if (se == NULL) {
        return GW_ENOMEM;
    }
    se->src = src;
    read_now(src, &se->last);
    if (loop != NULL) {
        uv_timer_init(loop, &se->timer);
        se->timer.data = se;
        uv_timer_start(&se->timer, on_tick, SERIES_EVERY_MS, SERIES_EVERY_MS);
        uv_unref((uv_handle_t *)&se->timer); /* keeps no loop alive */
    }
    *out = se;
    return 0;
}

static void on_closed(uv_handle_t *h)
{
    free(h->data);
}

void gw__api_series_close(struct gw__api_series *se, bool has_timer)
{
    if (se == NULL) {
        return;
    }
    if (!has_timer) {
        free(se);
        return;
    }
    uv_close((uv_handle_t *)&se->timer, on_closed);
}

static void add_sample(cJSON *arr, const struct sample *s, bool partial)
{
    cJSON *o = cJSON_CreateObject();
    double span = s->span_ms > 0 ? s->span_ms / 1000.0 : 0;
    char key[32];

    if (o == NULL || !cJSON_AddItemToArray(arr, o)) {
        cJSON_Delete(o);
        return;
    }
    cJSON_AddNumberToObject(o, "t", (double)s->wall_ms);
    cJSON_AddNumberToObject(o, "span_s", span);
    if (partial) {
        cJSON_AddBoolToObject(o, "partial", true);
    }
    cJSON_AddNumberToObject(o, "sessions", s->sessions);
    cJSON_AddNumberToObject(o, "udp_rx_per_s", span > 0 ? s->rx / span : 0);
    cJSON_AddNumberToObject(o, "udp_tx_per_s", span > 0 ? s->tx / span : 0);
    for (int i = 0; i < GW__API_TURN_HISTS; i++) {
        snprintf(key, sizeof(key), "%s_n", turn_hists[i].key);
        cJSON_AddNumberToObject(o, key, (double)s->n[i]);
        snprintf(key, sizeof(key), "%s_ms", turn_hists[i].key);
        if (s->n[i] > 0) {
            cJSON_AddNumberToObject(
                o, key, (double)s->sum_us[i] / 1000.0 / (double)s->n[i]);
        } else {
            cJSON_AddNullToObject(o, key);
        }
    }
}

void gw__api_series_serve(struct gw__api_series *se, struct gw_http_req *req)
{
    cJSON *doc = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(doc, "samples");
    struct reading now;
    struct sample partial;

    if (doc == NULL || arr == NULL) {
        cJSON_Delete(doc);
        gw__api_send_error(req, 503, false, "out of memory", NULL);
        return;
    }
    cJSON_AddNumberToObject(doc, "interval_s", SERIES_EVERY_MS / 1000);
    cJSON_AddNumberToObject(doc, "max_samples", SERIES_SAMPLES);
    for (unsigned i = 0; i < se->count; i++) {
        unsigned k =
            (se->head + SERIES_SAMPLES - se->count + i) % SERIES_SAMPLES;
        add_sample(arr, &se->ring[k], false);
    }
    /* What happened since the last sample, so a fresh turn shows at once. */
    read_now(se->src, &now);
    sample_of(se->src, &se->last, &now, &partial);
    add_sample(arr, &partial, true);
    gw__api_send_json(req, 200, doc, NULL);
}
