/*
 * The logger: level filtering, the subject prefix, masking of control
 * characters in text lines, valid JSON in JSON lines, and the limit on
 * lines peers trigger.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "common/log.h"

/* Runs one gw_log call with stderr sent to a temporary file; returns it. */
static size_t capture(char *out, size_t cap, enum gw_log_level level,
                      const char *subject, const char *msg)
{
    FILE *tmp = tmpfile();
    int saved = dup(STDERR_FILENO);

    assert_non_null(tmp);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fileno(tmp), STDERR_FILENO), STDERR_FILENO);
    gw_log(level, subject, "%s", msg);
    assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
    rewind(tmp);
    size_t n = fread(out, 1, cap - 1, tmp);
    out[n] = '\0';
    fclose(tmp);
    return n;
}

static void test_level_filter(void **state)
{
    char buf[4096];
    (void)state;

    gw_log_set_format(GW_LOG_TEXT);
    gw_log_set_level(GW_LOG_WARN);
    assert_int_equal(capture(buf, sizeof(buf), GW_LOG_INFO, "s", "x"), 0);
    assert_true(capture(buf, sizeof(buf), GW_LOG_WARN, "s", "x") > 0);
    assert_true(capture(buf, sizeof(buf), GW_LOG_ERROR, "s", "x") > 0);
    gw_log_set_level(GW_LOG_DEBUG);
    assert_true(capture(buf, sizeof(buf), GW_LOG_DEBUG, "s", "x") > 0);
}

static void test_text_line(void **state)
{
    char buf[4096];
    (void)state;

    gw_log_set_format(GW_LOG_TEXT);
    gw_log_set_level(GW_LOG_INFO);
    size_t n = capture(buf, sizeof(buf), GW_LOG_INFO, "dev=GID@@@aa",
                       "hello\nforged line\x1b[31m");
    /* Exactly one line, ending in the newline the logger adds. */
    assert_true(n > 0);
    assert_int_equal(buf[n - 1], '\n');
    assert_ptr_equal(strchr(buf, '\n'), buf + n - 1);
    assert_non_null(strstr(buf, " info [dev=GID@@@aa] hello.forged line."));
    assert_null(strchr(buf, '\x1b'));
}

static void test_null_subject(void **state)
{
    char buf[4096];
    (void)state;

    gw_log_set_format(GW_LOG_TEXT);
    capture(buf, sizeof(buf), GW_LOG_ERROR, NULL, "m");
    assert_non_null(strstr(buf, " error [-] m"));
}

static void test_json_line(void **state)
{
    char buf[4096];
    (void)state;

    gw_log_set_format(GW_LOG_JSON);
    gw_log_set_level(GW_LOG_INFO);
    capture(buf, sizeof(buf), GW_LOG_WARN, "s\"q",
            "quote \" backslash \\ tab\t end");
    cJSON *root = cJSON_Parse(buf);
    assert_non_null(root);
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(root, "level")->valuestring, "warn");
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(root, "subject")->valuestring, "s\"q");
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(root, "msg")->valuestring,
        "quote \" backslash \\ tab\t end");
    assert_non_null(cJSON_GetObjectItemCaseSensitive(root, "ts"));
    cJSON_Delete(root);
}

/* A message longer than a line is cut, but the JSON stays well-formed. */
static void test_json_truncated(void **state)
{
    static char big[8192];
    char buf[8192];
    (void)state;

    memset(big, '"', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    gw_log_set_format(GW_LOG_JSON);
    size_t n = capture(buf, sizeof(buf), GW_LOG_ERROR, "s", big);
    assert_true(n <= 2048);
    assert_int_equal(buf[n - 1], '\n');
    cJSON *root = cJSON_Parse(buf);
    assert_non_null(root);
    cJSON_Delete(root);
}

/* 1,000 lines of one peer at once: a burst gets through, the rest are
 * counted; filtered lines cost nothing; another peer still gets its line. */
static void test_peer_limit(void **state)
{
    char line[512];
    FILE *tmp = tmpfile();
    int saved = dup(STDERR_FILENO);
    uint64_t before = gw_log_peer_suppressed(), skipped = 7;
    size_t lines = 0;

    (void)state;
    gw_log_set_level(GW_LOG_INFO);
    gw_log_set_format(GW_LOG_TEXT);
    assert_false(gw_log_peer_may(GW_LOG_DEBUG, "flood", &skipped));
    assert_int_equal(skipped, 0);
    assert_int_equal(gw_log_peer_suppressed(), before);
    assert_non_null(tmp);
    assert_int_equal(dup2(fileno(tmp), STDERR_FILENO), STDERR_FILENO);
    for (int i = 0; i < 1000; i++) {
        gw_log_peer(GW_LOG_WARN, "flood", "peer", "refused %d", i);
    }
    gw_log_peer(GW_LOG_WARN, NULL, "other", "one line");
    assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
    rewind(tmp);
    bool other = false;
    while (fgets(line, sizeof(line), tmp) != NULL) {
        lines++;
        other = other || strstr(line, "[other] one line") != NULL;
    }
    fclose(tmp);
    assert_true(other);
    assert_true(lines >= 2 && lines <= 40);
    assert_true(gw_log_peer_suppressed() - before >= 1000 - (lines - 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_level_filter),
        cmocka_unit_test(test_text_line),
        cmocka_unit_test(test_null_subject),
        cmocka_unit_test(test_json_line),
        cmocka_unit_test(test_json_truncated),
        cmocka_unit_test(test_peer_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
