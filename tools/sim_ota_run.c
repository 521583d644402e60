/*
 * The simulated device's provisioning loop (`device --ota`), as the
 * firmware's Application::CheckNewVersion runs it: check, activate, check
 * again. One libcurl easy request at a time, performed on libuv's thread
 * pool so that the loop (signals, timers) stays responsive.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "tools/sim_ota.h"

#define MAX_TRIES  10        /* checks in a row, activations per round */
#define ANSWER_MAX (1 << 20) /* more is no OTA answer */
#define URL_MAX    2048

enum step { STEP_CHECK, STEP_ACTIVATE };

struct gw_sim_ota {
    uv_loop_t *loop;
    const struct gw_sim_ota_options *o;
    gw_sim_ota_event_cb on_event;
    gw_sim_ota_done_cb on_done;
    void *arg;
    uv_timer_t timer;
    uv_work_t work;
    bool busy;    /* a request is on the thread pool */
    bool closing; /* gw_sim_ota_close called */
    bool timer_closed;
    atomic_int abort; /* read by the request's progress callback */
    enum step step;
    /* The request: set on the loop, used by the worker, read back after. */
    char url[URL_MAX];
    char *body;
    struct curl_slist *headers;
    CURLcode cres;
    long status;
    char errbuf[CURL_ERROR_SIZE];
    char *answer;
    size_t answer_len;
    bool answer_cut;
    /* The loop. */
    char *system_info;
    char activate_url[URL_MAX];
    int check_failures;
    uint32_t check_delay_ms;
    int activate_tries;
    struct gw_sim_ota_answer last;
};

/* A line for the device's transcript (checked as printf's arguments). */
static void event(struct gw_sim_ota *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void event(struct gw_sim_ota *t, const char *fmt, ...)
{
    char line[512];
    va_list ap;

    if (t->on_event == NULL || t->closing) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    t->on_event(t->arg, line);
}

static void done(struct gw_sim_ota *t, int status, const char *why)
{
    if (!t->closing && t->on_done != NULL) {
        gw_sim_ota_done_cb cb = t->on_done;
        t->on_done = NULL;
        cb(t->arg, status, why);
    }
}

/* ---- one request on the thread pool ------------------------------------ */

static size_t on_write(char *p, size_t size, size_t n, void *arg)
{
    struct gw_sim_ota *t = arg;
    size_t len = size * n;
    char *grown;

    if (t->answer_len + len > ANSWER_MAX) {
        t->answer_cut = true;
        return 0; /* aborts the transfer */
    }
    if ((grown = realloc(t->answer, t->answer_len + len + 1)) == NULL) {
        return 0;
    }
    t->answer = grown;
    memcpy(t->answer + t->answer_len, p, len);
    t->answer_len += len;
    t->answer[t->answer_len] = '\0';
    return len;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c,
                       curl_off_t d)
{
    struct gw_sim_ota *t = arg;

    (void)a, (void)b, (void)c, (void)d;
    return atomic_load(&t->abort); /* non-zero ends the request */
}

static void perform(uv_work_t *w)
{
    struct gw_sim_ota *t = w->data;
    CURL *e = curl_easy_init();

    t->status = 0;
    t->errbuf[0] = '\0';
    if (e == NULL) {
        t->cres = CURLE_FAILED_INIT;
        return;
    }
    curl_easy_setopt(e, CURLOPT_URL, t->url);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)strlen(t->body));
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, t);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)t->o->http_timeout_ms);
    t->cres = curl_easy_perform(e);
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &t->status);
    curl_easy_cleanup(e);
}

static void maybe_free(struct gw_sim_ota *t)
{
    if (!t->closing || t->busy || !t->timer_closed) {
        return;
    }
    curl_slist_free_all(t->headers);
    gw_sim_ota_answer_free(&t->last);
    free(t->body);
    free(t->answer);
    free(t->system_info);
    free(t);
    curl_global_cleanup();
}

static void on_checked(struct gw_sim_ota *t);
static void on_activated(struct gw_sim_ota *t);

static void performed(uv_work_t *w, int status)
{
    struct gw_sim_ota *t = w->data;

    (void)status;
    t->busy = false;
    if (t->closing) {
        maybe_free(t);
        return;
    }
    if (t->step == STEP_CHECK) {
        on_checked(t);
    } else {
        on_activated(t);
    }
}

/* The firmware's headers (Ota::SetupHttp), nothing of curl's own. */
static int headers(struct gw_sim_ota *t)
{
    const struct gw_sim_ota_options *o = t->o;
    char h[5][320];
    struct curl_slist *l = NULL, *next;

    snprintf(h[0], sizeof(h[0]), "Activation-Version: %s",
             o->serial ? "2" : "1");
    snprintf(h[1], sizeof(h[1]), "Device-Id: %s", o->mac);
    snprintf(h[2], sizeof(h[2]), "Client-Id: %s", o->uuid);
    snprintf(h[3], sizeof(h[3]), "Serial-Number: %s",
             o->serial ? o->serial : "");
    snprintf(h[4], sizeof(h[4]), "User-Agent: %s/%s", o->board, o->version);
    const char *all[] = {h[0],
                         h[1],
                         h[2],
                         o->serial ? h[3] : NULL,
                         h[4],
                         "Accept-Language: zh-CN",
                         "Content-Type: application/json",
                         "Accept:",
                         "Expect:"};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        if (all[i] == NULL) {
            continue;
        }
        if ((next = curl_slist_append(l, all[i])) == NULL) {
            curl_slist_free_all(l);
            return GW_ENOMEM;
        }
        l = next;
    }
    t->headers = l;
    return 0;
}

static void request(struct gw_sim_ota *t, enum step step, const char *url,
                    char *body)
{
    free(t->body);
    free(t->answer);
    t->body = body;
    t->answer = NULL;
    t->answer_len = 0;
    t->answer_cut = false;
    t->step = step;
    snprintf(t->url, sizeof(t->url), "%s", url);
    t->busy = true;
    if (body == NULL ||
        uv_queue_work(t->loop, &t->work, perform, performed) != 0) {
        t->busy = false;
        done(t, GW_ENOMEM, "cannot start a request");
    }
}

/* ---- the check ------------------------------------------------------------
 */

static void check(struct gw_sim_ota *t)
{
    request(t, STEP_CHECK, t->o->url, strdup(t->system_info));
}

static void on_check_timer(uv_timer_t *h)
{
    check(h->data);
}

static void on_activate_timer(uv_timer_t *h);

/* The request's outcome in words: "200", "connect: ...". */
static void outcome(const struct gw_sim_ota *t, char *out, size_t cap)
{
    if (t->cres == CURLE_OK) {
        snprintf(out, cap, "%ld", t->status);
    } else {
        snprintf(out, cap, "no answer (%s)",
                 t->errbuf[0] ? t->errbuf : curl_easy_strerror(t->cres));
    }
}

/* Non-200 or unparsable: retry 10 s later, doubling, ten times in all. */
static void check_failed(struct gw_sim_ota *t, const char *why)
{
    if (++t->check_failures >= MAX_TRIES) {
        event(t,
              "ota check failed (%s): %d in a row, going on with the "
              "stored settings",
              why, t->check_failures);
        done(t, 0, NULL);
        return;
    }
    event(t, "ota check failed (%s), again in %u ms", why, t->check_delay_ms);
    uv_timer_start(&t->timer, on_check_timer, t->check_delay_ms, 0);
    t->check_delay_ms *= 2;
}

static void firmware_offer(struct gw_sim_ota *t)
{
    const struct gw_sim_ota_answer *a = &t->last;

    if (a->fw_version == NULL || a->fw_url == NULL) {
        return;
    }
    /* The simulator cannot install anything: as a failed upgrade, the
     * firmware then goes on with the version it runs. */
    if (a->fw_force || strcmp(a->fw_version, t->o->version) != 0) {
        event(t, "ota firmware %s offered%s, not installed", a->fw_version,
              a->fw_force ? " (force)" : "");
    }
}

static void activate(struct gw_sim_ota *t);

static void on_checked(struct gw_sim_ota *t)
{
    struct gw_sim_ota_answer *a = &t->last;
    char what[300];
    int rc;

    outcome(t, what, sizeof(what));
    if (t->cres != CURLE_OK || t->status != 200) {
        check_failed(t, what);
        return;
    }
    gw_sim_ota_answer_free(a);
    rc = gw_sim_ota_answer_parse(t->answer ? t->answer : "", t->answer_len,
                                 t->o->store, a);
    if (rc == GW_EMALFORMED) {
        check_failed(t, "200, not JSON");
        return;
    }
    if (rc == GW_ETOOBIG) {
        char why[160];
        snprintf(why, sizeof(why),
                 "mqtt member \"%.40s\" is more than NVS takes (key over 15 "
                 "bytes or value of 4000): the firmware aborts",
                 a->fatal);
        done(t, GW_EPROTO, why);
        return;
    }
    if (rc != 0) {
        done(t, rc, "cannot read the answer");
        return;
    }
    t->check_failures = 0;
    t->check_delay_ms = t->o->retry_ms;
    event(t, "ota check 200: %s%u mqtt member(s) stored%s%s%s",
          a->has_mqtt ? "" : "no mqtt, ", a->mqtt_stored,
          a->has_code ? ", activation code" : "",
          a->has_challenge ? ", challenge" : "",
          a->has_websocket ? ", websocket" : "");
    firmware_offer(t);
    if (!a->has_code && !a->has_challenge) {
        if (!a->has_mqtt && a->has_websocket) {
            done(t, GW_EPROTO,
                 "the answer chose WebSocket (websocket without mqtt): not "
                 "simulated");
            return;
        }
        done(t, 0, NULL);
        return;
    }
    /* What the device shows and speaks; tests read this line. */
    if (a->has_code) {
        printf("activation code %s\n", a->code);
    } else {
        printf("activation challenge\n");
    }
    fflush(stdout);
    if (a->message != NULL) {
        event(t, "activation message \"%.200s\" (timeout_ms %d)", a->message,
              (int)a->timeout_ms);
    }
    t->activate_tries = 0;
    activate(t);
}

/* ---- activation ------------------------------------------------------------
 */

static void after_attempt(struct gw_sim_ota *t, uint32_t wait_ms)
{
    if (t->activate_tries >= MAX_TRIES) {
        /* The firmware waits, then leaves the round to check again. */
        uv_timer_start(&t->timer, on_check_timer, wait_ms, 0);
        return;
    }
    uv_timer_start(&t->timer, on_activate_timer, wait_ms, 0);
}

static void activate(struct gw_sim_ota *t)
{
    const struct gw_sim_ota_options *o = t->o;

    t->activate_tries++;
    if (!t->last.has_challenge) {
        /* Ota::Activate sends nothing without a challenge: a failure. */
        event(t, "activate %d/%d: no challenge, nothing sent",
              t->activate_tries, MAX_TRIES);
        after_attempt(t, o->retry_ms);
        return;
    }
    request(t, STEP_ACTIVATE, t->activate_url,
            gw_sim_ota_activate_body(o->serial, o->key, t->last.challenge));
}

static void on_activate_timer(uv_timer_t *h)
{
    activate(h->data);
}

static void on_activated(struct gw_sim_ota *t)
{
    char what[300];

    outcome(t, what, sizeof(what));
    event(t, "activate %d/%d: %s", t->activate_tries, MAX_TRIES, what);
    if (t->cres == CURLE_OK && t->status == 200) {
        check(t);
    } else if (t->cres == CURLE_OK && t->status == 202) {
        after_attempt(t, t->o->pending_ms);
    } else {
        after_attempt(t, t->o->retry_ms);
    }
}

/* ---- life cycle ------------------------------------------------------------
 */

int gw_sim_ota_start(uv_loop_t *loop, const struct gw_sim_ota_options *o,
                     gw_sim_ota_event_cb on_event, gw_sim_ota_done_cb on_done,
                     void *arg, struct gw_sim_ota **out)
{
    struct gw_sim_ota *t;

    if (o->url == NULL || strlen(o->url) < 10 || strlen(o->url) >= URL_MAX ||
        o->mac == NULL || o->uuid == NULL || o->board == NULL ||
        o->version == NULL || o->store == NULL ||
        (o->serial != NULL && o->key == NULL) || o->http_timeout_ms == 0) {
        return GW_EINVAL;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        return GW_ENOMEM;
    }
    if ((t = calloc(1, sizeof(*t))) == NULL) {
        curl_global_cleanup();
        return GW_ENOMEM;
    }
    t->loop = loop;
    t->o = o;
    t->on_event = on_event;
    t->on_done = on_done;
    t->arg = arg;
    t->work.data = t;
    t->check_delay_ms = o->retry_ms;
    atomic_init(&t->abort, 0);
    t->system_info =
        gw_sim_ota_system_info(o->mac, o->uuid, o->board, o->version);
    if (t->system_info == NULL || headers(t) != 0 ||
        gw_sim_ota_activate_url(o->url, t->activate_url,
                                sizeof(t->activate_url)) != 0) {
        curl_slist_free_all(t->headers);
        free(t->system_info);
        free(t);
        curl_global_cleanup();
        return GW_ENOMEM;
    }
    uv_timer_init(loop, &t->timer);
    t->timer.data = t;
    check(t);
    *out = t;
    return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
    struct gw_sim_ota *t = h->data;

    t->timer_closed = true;
    maybe_free(t);
}

void gw_sim_ota_close(struct gw_sim_ota *t)
{
    if (t == NULL || t->closing) {
        return;
    }
    t->closing = true;
    atomic_store(&t->abort, 1);
    if (t->busy) {
        uv_cancel((uv_req_t *)&t->work); /* performed() still runs */
    }
    uv_close((uv_handle_t *)&t->timer, on_timer_closed);
}
