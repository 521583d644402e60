/*
 * Line logger for the daemon: text for people, JSON for collectors. Each
 * line is built in one buffer and written with one write(2), so lines from
 * one process never interleave.
 */
#include "common/log.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 2048

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
