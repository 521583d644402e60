/*
 * Line logger for the daemon: text for people, JSON for collectors. Each
 * line is built in one buffer and written with one write(2), so lines from
 * one process never interleave.
 */
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/ratelimit.h"

#define LINE_MAX_BYTES 2048

/* Peers' lines: per source a burst then a couple a second, and a bound
 * over all sources; the table forgets sources whose bucket is full. */
#define PEER_PER_KEY  ((struct gw_bucket_rate){2.0, 20.0})
#define PEER_ALL      ((struct gw_bucket_rate){50.0, 200.0})
#define PEER_KEYS_MAX 4096
/* While lines are left out, one summary line at most this often. */
#define PEER_SUMMARY_MS 10000

static enum gw_log_level current_level = GW_LOG_INFO;
static enum gw_log_format current_format = GW_LOG_TEXT;

static const char *const level_names[GW_LOG_LEVEL_COUNT_] = {
#define XX(level, name) [GW_LOG_##level] = name,
    GW_LOG_LEVEL_MAP(XX)
#undef XX
};

void gw_log_set_level(enum gw_log_level level)
{
    current_level = level;
}

void gw_log_set_format(enum gw_log_format format)
{
    current_format = format;
}

enum gw_log_level gw_log_get_level(void)
{
    return current_level;
}

const char *gw_log_level_name(enum gw_log_level level)
{
    if ((unsigned)level >= GW_LOG_LEVEL_COUNT_) {
        return "?";
    }
    return level_names[level];
}

/*
 * Appends s to buf at *pos, stopping short of limit; JSON mode escapes,
 * text mode masks control characters.
 */
static void append_to(char *buf, size_t *pos, const char *s, int json,
                      size_t limit)
{
    /* Each step writes at most 6 bytes (one \u escape). */
    for (; *s != '\0' && *pos + 6 < limit; s++) {
        unsigned char c = (unsigned char)*s;
        if (json && (c == '"' || c == '\\')) {
            buf[(*pos)++] = '\\';
            buf[(*pos)++] = (char)c;
        } else if (json && c < 0x20) {
            *pos += (size_t)snprintf(buf + *pos, 7, "\\u%04x", c);
        } else if (c < 0x20 || c == 0x7f) {
            /* A peer's bytes must never start a new log line. */
            buf[(*pos)++] = '.';
        } else {
            buf[(*pos)++] = (char)c;
        }
    }
}

/* Body text stops early so that the closing bytes always fit. */
static void append(char *buf, size_t *pos, const char *s, int json)
{
    append_to(buf, pos, s, json, LINE_MAX_BYTES - 16);
}

static void timestamp(char *out, size_t cap)
{
    struct timespec ts;
    struct tm tm;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, cap - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

void gw_vlog(enum gw_log_level level, const char *subject, const char *fmt,
             va_list ap)
{
    char msg[LINE_MAX_BYTES];
    char line[LINE_MAX_BYTES];
    char ts[40];
    size_t pos = 0;
    int json = current_format == GW_LOG_JSON;

    if (level > current_level) {
        return;
    }
    vsnprintf(msg, sizeof(msg), fmt, ap);
    timestamp(ts, sizeof(ts));
    if (subject == NULL) {
        subject = "-";
    }
    if (json) {
        append(line, &pos, "{\"ts\":\"", 0);
        append(line, &pos, ts, 0);
        append(line, &pos, "\",\"level\":\"", 0);
        append(line, &pos, gw_log_level_name(level), 0);
        append(line, &pos, "\",\"subject\":\"", 0);
        append(line, &pos, subject, 1);
        append(line, &pos, "\",\"msg\":\"", 0);
        append(line, &pos, msg, 1);
        append_to(line, &pos, "\"}", 0, LINE_MAX_BYTES - 1);
    } else {
        append(line, &pos, ts, 0);
        append(line, &pos, " ", 0);
        append(line, &pos, gw_log_level_name(level), 0);
        append(line, &pos, " [", 0);
        append(line, &pos, subject, 0);
        append(line, &pos, "] ", 0);
        append(line, &pos, msg, 0);
    }
    line[pos++] = '\n';
    /* Best effort: a logger has nowhere to report its own failure. */
    ssize_t unused = write(STDERR_FILENO, line, pos);
    (void)unused;
}

void gw_log(enum gw_log_level level, const char *subject, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    gw_vlog(level, subject, fmt, ap);
    va_end(ap);
}

/* ---- peers' lines ---- */

/* One table for the process, as the level is: lines are the process's. */
static struct gw_ratelimit peer_limit;
static bool peer_limit_ready;
static uint64_t peer_suppressed;
static uint64_t peer_unsummed;   /* left out since the last summary */
static uint64_t peer_summary_ms; /* when the first of them was */

static uint64_t monotonic_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* One more line left out; now and then a line says how many, so that a
 * flood is seen even when its sources never get a line through. */
static void left_out(void)
{
    uint64_t now = monotonic_ms();

    peer_suppressed++;
    if (peer_unsummed++ == 0) {
        peer_summary_ms = now; /* a period starts with its first */
    } else if (now - peer_summary_ms >= PEER_SUMMARY_MS) {
        gw_log(GW_LOG_WARN, "log",
               "%llu lines of peers left out by their rate limit in %llu s",
               (unsigned long long)peer_unsummed,
               (unsigned long long)((now - peer_summary_ms) / 1000));
        peer_unsummed = 0;
        peer_summary_ms = now;
    }
}

bool gw_log_peer_may(enum gw_log_level level, const char *key,
                     uint64_t *skipped)
{
    uint64_t n = 0;

    if (skipped != NULL) {
        *skipped = 0;
    }
    if (level > current_level) {
        return false;
    }
    if (!peer_limit_ready) {
        gw_ratelimit_init(&peer_limit, PEER_PER_KEY, PEER_ALL, PEER_KEYS_MAX);
        peer_limit_ready = true;
    }
    if (!gw_ratelimit_take(&peer_limit, key != NULL ? key : "", monotonic_ms(),
                           &n)) {
        left_out();
        return false;
    }
    if (skipped != NULL) {
        *skipped = n;
    }
    return true;
}

bool gw_log_limit_take(struct gw_ratelimit *rl, const char *key,
                       uint64_t now_ms, uint64_t *skipped)
{
    if (!gw_ratelimit_take(rl, key, now_ms, skipped)) {
        left_out();
        return false;
    }
    return true;
}

void gw_log_skipped(enum gw_log_level level, const char *subject,
                    uint64_t skipped, const char *text)
{
    if (skipped > 0) {
        gw_log(level, subject, "%s (%llu more not logged before this)", text,
               (unsigned long long)skipped);
    } else {
        gw_log(level, subject, "%s", text);
    }
}

uint64_t gw_log_peer_suppressed(void)
{
    return peer_suppressed;
}

void gw_log_peer(enum gw_log_level level, const char *key, const char *subject,
                 const char *fmt, ...)
{
    char text[LINE_MAX_BYTES];
    uint64_t skipped;
    va_list ap;

    if (!gw_log_peer_may(level, key != NULL ? key : subject, &skipped)) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    gw_log_skipped(level, subject, skipped, text);
}
