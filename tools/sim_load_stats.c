/*
 * The totals of hybridgw-sim's `load` run and its report: a summary on
 * stdout and the same numbers as one JSON object (the benchmark reads it).
 */
#include "tools/sim_load_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

void gw_sim_load_count_reason(struct load *l, const char *text)
{
    for (size_t i = 0; i < l->n_reasons; i++) {
        if (strcmp(l->reasons[i].text, text) == 0) {
            l->reasons[i].n++;
            return;
        }
    }
    if (l->n_reasons == MAX_REASONS) {
        l->other_reasons++;
        return;
    }
    snprintf(l->reasons[l->n_reasons].text, sizeof(l->reasons[0].text), "%s",
             text);
    l->reasons[l->n_reasons++].n = 1;
}

void gw_sim_load_add_result(struct load *l, const struct gw_sim_result *r)
{
    struct totals *t = &l->tot;

    t->connected += r->mqtt_connected;
    t->hellos += r->hellos > 0;
    t->hello_invalid += r->hello_invalid;
    t->hello_duplicate += r->hello_duplicate;
    t->ok += r->ok;
    t->failed += !r->ok;
    t->turns += r->turns_done;
    t->stt += r->stt_count;
    t->goodbye_received += r->goodbye_received;
    t->goodbye_sent += r->goodbye_sent;
    t->up_packets += r->up_packets;
    t->up_bytes += r->up_bytes;
    t->up_errors += r->up_send_errors;
    t->down_datagrams += r->down_datagrams;
    t->down_accepted += r->down_accepted;
    t->down_played += r->down_played;
    t->down_lost += r->down_lost;
    for (int i = 0; i < GW_SIM_DROP_COUNT_; i++) {
        t->drops[i] += r->drops[i];
    }
    if (r->down_accepted > 1) {
        t->jitter_sum += r->jitter_ms;
        t->jitter_n++;
        if (r->max_jitter_ms > t->jitter_max) {
            t->jitter_max = r->max_jitter_ms;
        }
    }
    if (!isnan(r->hello_ms)) {
        if (l->n_hello == l->hello_cap) {
            /* A churn run has many devices per slot. */
            size_t cap = l->hello_cap * 2;
            double *grown = realloc(l->hello_ms, cap * sizeof(double));
            if (grown == NULL) {
                return; /* latencies sampled from here on are lost */
            }
            l->hello_ms = grown;
            l->hello_cap = cap;
        }
        l->hello_ms[l->n_hello++] = r->hello_ms;
    }
    if (!r->ok) {
        gw_sim_load_count_reason(l, r->reason);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Nearest-rank percentile of the sorted hello latencies. */
static double percentile(const struct load *l, unsigned p)
{
    if (l->n_hello == 0) {
        return NAN;
    }
    size_t rank = ((size_t)p * l->n_hello + 99) / 100; /* ceil */
    return l->hello_ms[rank > 0 ? rank - 1 : 0];
}

double gw_sim_load_elapsed_s(const struct load *l)
{
    return (double)(uv_hrtime() - l->t0_ns) / 1e9;
}

static void print_summary(const struct load *l)
{
    const struct totals *t = &l->tot;
    double lost_pct = t->down_accepted + t->down_lost > 0
                          ? 100.0 * (double)t->down_lost /
                                (double)(t->down_accepted + t->down_lost)
                          : 0.0;

    if (l->n_idle > 0) {
        struct idle_counts c;
        gw_sim_load_idle_count(l, &c);
        printf("idle        %" PRIu32 " requested, %" PRIu32
               " connected, %" PRIu32 " discovered, %" PRIu32
               " reconnected, %" PRIu32 " re-initialized, %" PRIu32
               " online at the end\n",
               c.requested, c.connected, c.discovered, c.reconnected,
               c.reinitialized, c.online);
    }
    printf("devices     %" PRIu32 " started, %" PRIu32 " connected, %" PRIu32
           " hellos answered (%" PRIu32 " invalid, %" PRIu32 " extra), %" PRIu32
           " ok, %" PRIu32 " failed\n",
           l->started -
               (l->slots_begun < l->n_idle ? l->slots_begun : l->n_idle),
           t->connected, t->hellos, t->hello_invalid, t->hello_duplicate, t->ok,
           t->failed + l->init_failed);
    if (l->n_hello > 0) {
        printf("hello ms    p50 %.1f  p99 %.1f  max %.1f\n", percentile(l, 50),
               percentile(l, 99), percentile(l, 100));
    } else {
        printf("hello ms    n/a (no hello answered)\n");
    }
    printf("uplink      %" PRIu64 " packets, %" PRIu64 " bytes, %" PRIu64
           " send errors\n",
           t->up_packets, t->up_bytes, t->up_errors);
    printf("downlink    %" PRIu64 " datagrams, %" PRIu64 " accepted, %" PRIu64
           " played, %" PRIu64 " lost (%.2f %%), jitter mean %.1f ms, max "
           "%.1f ms\n",
           t->down_datagrams, t->down_accepted, t->down_played, t->down_lost,
           lost_pct, t->jitter_n ? t->jitter_sum / t->jitter_n : 0.0,
           t->jitter_max);
    gw_sim_cli_print_drops(t->drops);
    printf("\nturns       %" PRIu32 " completed, %" PRIu32
           " stt, goodbyes %" PRIu32 " sent / %" PRIu32 " received\n",
           t->turns, t->stt, t->goodbye_sent, t->goodbye_received);
    printf("wall time   %.1f s\n", gw_sim_load_elapsed_s(l));
    for (int i = 0; l->churn_s > 0 && i < CHURN_KIND_COUNT_; i++) {
        printf("churn       %-8s %" PRIu32 " started, %" PRIu32 " ok, %" PRIu32
               " failed\n",
               gw_sim_load_kind_name((enum churn_kind)i), l->kinds[i].started,
               l->kinds[i].ok, l->kinds[i].failed);
    }
    if (l->churn_s > 0) {
        printf("bad input   %" PRIu64 " malformed messages, %" PRIu64
               " junk datagrams\n",
               l->bad_messages, l->junk_datagrams);
    }
    for (size_t i = 0; i < l->n_reasons; i++) {
        printf("failure     %" PRIu32 " x %s\n", l->reasons[i].n,
               l->reasons[i].text);
    }
    if (l->other_reasons > 0) {
        printf("failure     %" PRIu32 " x (other reasons)\n", l->other_reasons);
    }
}

static void add_num(cJSON *o, const char *name, double v)
{
    if (!isnan(v)) {
        cJSON_AddNumberToObject(o, name, v);
    }
}

static char *stats_json(const struct load *l)
{
    const struct totals *t = &l->tot;
    cJSON *o = cJSON_CreateObject();
    cJSON *dev, *hello, *up, *down, *drops, *fails;
    char *text = NULL;

    if (o == NULL) {
        return NULL;
    }
    cJSON_AddStringToObject(o, "broker", l->cli.host);
    cJSON_AddNumberToObject(o, "port", l->cli.dev.port);
    cJSON_AddNumberToObject(o, "duration_s", l->duration_s);
    cJSON_AddNumberToObject(o, "ramp_per_s", l->ramp);
    cJSON_AddNumberToObject(
        o, "wall_s",
        (double)(int64_t)(gw_sim_load_elapsed_s(l) * 10 + 0.5) / 10);
    cJSON_AddNumberToObject(o, "turns", t->turns);
    cJSON_AddNumberToObject(o, "stt", t->stt);
    dev = cJSON_AddObjectToObject(o, "devices");
    hello = cJSON_AddObjectToObject(o, "hello_latency_ms");
    up = cJSON_AddObjectToObject(o, "uplink");
    down = cJSON_AddObjectToObject(o, "downlink");
    fails = cJSON_AddArrayToObject(o, "failures");
    if (dev == NULL || hello == NULL || up == NULL || down == NULL ||
        fails == NULL) {
        cJSON_Delete(o);
        return NULL;
    }
    /* Conversations only: the idle fleet has its own object. */
    uint32_t idle_begun =
        l->slots_begun < l->n_idle ? l->slots_begun : l->n_idle;
    cJSON_AddNumberToObject(dev, "requested", l->n - l->n_idle);
    cJSON_AddNumberToObject(dev, "started", l->started - idle_begun);
    cJSON_AddNumberToObject(dev, "connected", t->connected);
    cJSON_AddNumberToObject(dev, "hellos_answered", t->hellos);
    cJSON_AddNumberToObject(dev, "hello_invalid", t->hello_invalid);
    cJSON_AddNumberToObject(dev, "hello_duplicate", t->hello_duplicate);
    cJSON_AddNumberToObject(dev, "ok", t->ok);
    cJSON_AddNumberToObject(dev, "failed", t->failed + l->init_failed);
    add_num(hello, "p50", percentile(l, 50));
    add_num(hello, "p99", percentile(l, 99));
    add_num(hello, "max", percentile(l, 100));
    cJSON_AddNumberToObject(up, "packets", (double)t->up_packets);
    cJSON_AddNumberToObject(up, "bytes", (double)t->up_bytes);
    cJSON_AddNumberToObject(up, "send_errors", (double)t->up_errors);
    cJSON_AddNumberToObject(down, "datagrams", (double)t->down_datagrams);
    cJSON_AddNumberToObject(down, "accepted", (double)t->down_accepted);
    cJSON_AddNumberToObject(down, "played", (double)t->down_played);
    cJSON_AddNumberToObject(down, "lost", (double)t->down_lost);
    cJSON_AddNumberToObject(down, "jitter_ms_mean",
                            t->jitter_n ? t->jitter_sum / t->jitter_n : 0.0);
    cJSON_AddNumberToObject(down, "jitter_ms_max", t->jitter_max);
    drops = cJSON_AddObjectToObject(down, "drops");
    for (int i = 0; drops != NULL && i < GW_SIM_DROP_COUNT_; i++) {
        cJSON_AddNumberToObject(drops, gw_sim_drop_name(i),
                                (double)t->drops[i]);
    }
    if (l->churn_s > 0) {
        cJSON *churn = cJSON_AddObjectToObject(o, "churn");
        cJSON *kinds = churn ? cJSON_AddObjectToObject(churn, "kinds") : NULL;
        for (int i = 0; kinds != NULL && i < CHURN_KIND_COUNT_; i++) {
            cJSON *k = cJSON_AddObjectToObject(
                kinds, gw_sim_load_kind_name((enum churn_kind)i));
            if (k != NULL) {
                cJSON_AddNumberToObject(k, "started", l->kinds[i].started);
                cJSON_AddNumberToObject(k, "ok", l->kinds[i].ok);
                cJSON_AddNumberToObject(k, "failed", l->kinds[i].failed);
            }
        }
        if (churn != NULL) {
            cJSON_AddNumberToObject(churn, "seconds", l->churn_s);
            cJSON_AddNumberToObject(churn, "identities", l->slots_begun);
            cJSON_AddNumberToObject(churn, "bad_messages",
                                    (double)l->bad_messages);
            cJSON_AddNumberToObject(churn, "junk_datagrams",
                                    (double)l->junk_datagrams);
        }
    }
    if (l->n_idle > 0 && !gw_sim_load_idle_json(l, o)) {
        cJSON_Delete(o);
        return NULL;
    }
    for (size_t i = 0; i < l->n_reasons; i++) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "reason", l->reasons[i].text);
        cJSON_AddNumberToObject(f, "count", l->reasons[i].n);
        cJSON_AddItemToArray(fails, f);
    }
    text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

static void write_stats(struct load *l)
{
    char *json = stats_json(l);
    FILE *f;

    if (json == NULL) {
        fprintf(stderr, "hybridgw-sim load: out of memory for the stats\n");
        return;
    }
    if (l->cli.json) {
        printf("%s\n", json);
    }
    if (l->stats_path != NULL) {
        if ((f = fopen(l->stats_path, "w")) == NULL ||
            fprintf(f, "%s\n", json) < 0 || fclose(f) != 0) {
            perror(l->stats_path);
        }
    }
    cJSON_free(json);
}

void gw_sim_load_report(struct load *l)
{
    qsort(l->hello_ms, l->n_hello, sizeof(double), cmp_double);
    print_summary(l);
    write_stats(l);
}
