/* JSON envelopes: parse limits and refusals, type map, re-serialisation
 * with a new session_id, and the goodbye builder's escaping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "codec/envelope.h"

/* Marks "session_id must be absent" in a case's expected sid. */
#define NO_SID ((const char *)1)

struct parse_case {
    const char *name;
    const char *text;      /* the message */
    size_t len;            /* bytes of text to use; 0 means strlen */
    int err;               /* expected result */
    const char *type;      /* expected type on success */
    const char *sid;       /* expected session_id, or NO_SID */
    enum gw_msg_type kind; /* expected kind on success */
};

static const struct parse_case parse_cases[] = {
    /* Device messages, key order as the firmware sends them. */
    {"listen start",
     "{\"session_id\":\"S\",\"type\":\"listen\",\"state\":\"start\","
     "\"mode\":\"auto\"}",
     0, 0, "listen", "S", GW_MSG_LISTEN},
    {"wake word detect",
     "{\"session_id\":\"S\",\"type\":\"listen\",\"state\":\"detect\","
     "\"text\":\"\xe4\xbd\xa0\xe5\xa5\xbd\xe5\xb0\x8f\xe6\x99\xba\"}",
     0, 0, "listen", "S", GW_MSG_LISTEN},
    {"abort with reason",
     "{\"session_id\":\"S\",\"type\":\"abort\",\"reason\":"
     "\"wake_word_detected\"}",
     0, 0, "abort", "S", GW_MSG_ABORT},
    {"mcp before any session",
     "{\"session_id\":\"\",\"type\":\"mcp\",\"payload\":{\"jsonrpc\":"
     "\"2.0\",\"id\":1,\"result\":{\"tools\":[]}}}",
     0, 0, "mcp", "", GW_MSG_MCP},
    {"device goodbye", "{\"session_id\":\"abc\",\"type\":\"goodbye\"}", 0, 0,
     "goodbye", "abc", GW_MSG_GOODBYE},
    {"legacy iot",
     "{\"session_id\":\"S\",\"type\":\"iot\",\"update\":true,"
     "\"states\":[{\"name\":\"Speaker\",\"state\":{\"volume\":70}}]}",
     0, 0, "iot", "S", GW_MSG_IOT},
    {"udp_timeout fork message", "{\"type\":\"udp_timeout\"}", 0, 0,
     "udp_timeout", NO_SID, GW_MSG_UDP_TIMEOUT},
    {"old hello with spaces",
     "{\"type\":\"hello\",\"version\": 3,\"transport\":\"udp\","
     "\"audio_params\":{\"format\":\"opus\", \"sample_rate\":16000, "
     "\"channels\":1, \"frame_duration\":60}}",
     0, 0, "hello", NO_SID, GW_MSG_HELLO},
    /* Backend messages. */
    {"stt", "{\"type\":\"stt\",\"text\":\"hi\",\"session_id\":\"x-1\"}", 0, 0,
     "stt", "x-1", GW_MSG_STT},
    {"llm emoji by surrogate pair",
     "{\"type\":\"llm\",\"text\":\"\\ud83d\\ude00\",\"emotion\":\"happy\"}", 0,
     0, "llm", NO_SID, GW_MSG_LLM},
    {"tts start", "{\"type\":\"tts\",\"state\":\"start\",\"session_id\":\"x\"}",
     0, 0, "tts", "x", GW_MSG_TTS},
    {"alert",
     "{\"type\":\"alert\",\"status\":\"s\",\"message\":\"m\",\"emotion\":"
     "\"sad\"}",
     0, 0, "alert", NO_SID, GW_MSG_ALERT},
    {"system reboot", "{\"type\":\"system\",\"command\":\"reboot\"}", 0, 0,
     "system", NO_SID, GW_MSG_SYSTEM},
    {"custom", "{\"type\":\"custom\",\"payload\":{\"a\":[1,2,null]}}", 0, 0,
     "custom", NO_SID, GW_MSG_CUSTOM},
    {"unknown type relayed", "{\"type\":\"error\",\"message\":\"x\"}", 0, 0,
     "error", NO_SID, GW_MSG_OTHER},
    {"types are case sensitive", "{\"type\":\"Hello\"}", 0, 0, "Hello", NO_SID,
     GW_MSG_OTHER},
    {"whitespace around", " \r\n\t{ \"type\" : \"abort\" }\r\n\t ", 0, 0,
     "abort", NO_SID, GW_MSG_ABORT},
    {"escaped quote in sid", "{\"type\":\"abort\",\"session_id\":\"a\\\"b\"}",
     0, 0, "abort", "a\"b", GW_MSG_ABORT},
    {"Type is another key", "{\"type\":\"abort\",\"Type\":1}", 0, 0, "abort",
     NO_SID, GW_MSG_ABORT},
    /* Refused before or by the JSON parser. */
    {"empty", "", 0, GW_EMALFORMED, NULL, NULL, 0},
    {"whitespace only", "  \n", 0, GW_EMALFORMED, NULL, NULL, 0},
    {"truncated in string", "{\"type\":\"listen\",\"state\":\"st", 0,
     GW_EMALFORMED, NULL, NULL, 0},
    {"truncated after colon", "{\"type\":", 0, GW_EMALFORMED, NULL, NULL, 0},
    {"truncated before brace", "{\"type\":\"abort\"", 0, GW_EMALFORMED, NULL,
     NULL, 0},
    {"truncated backslash", "{\"type\":\"a\\", 0, GW_EMALFORMED, NULL, NULL, 0},
    {"cut by length", "{\"type\":\"abort\"}", 10, GW_EMALFORMED, NULL, NULL, 0},
    {"trailing garbage", "{\"type\":\"abort\"}x", 0, GW_EMALFORMED, NULL, NULL,
     0},
    {"two objects", "{\"type\":\"abort\"}{\"type\":\"abort\"}", 0,
     GW_EMALFORMED, NULL, NULL, 0},
    {"extra closing brace", "{\"type\":\"abort\"}}", 0, GW_EMALFORMED, NULL,
     NULL, 0},
    {"trailing NUL", "{\"type\":\"abort\"}\0", 17, GW_EMALFORMED, NULL, NULL,
     0},
    {"NUL inside string", "{\"type\":\"ab\0rt\"}", 16, GW_EMALFORMED, NULL,
     NULL, 0},
    {"escaped NUL", "{\"type\":\"abort\",\"t\":\"a\\u0000b\"}", 0,
     GW_EMALFORMED, NULL, NULL, 0},
    {"escaped NUL in key", "{\"type\":\"abort\",\"\\u0000\":1}", 0,
     GW_EMALFORMED, NULL, NULL, 0},
    {"raw newline in string", "{\"type\":\"ab\nort\"}", 0, GW_EMALFORMED, NULL,
     NULL, 0},
    {"control byte as whitespace", "\x01{\"type\":\"abort\"}", 0, GW_EMALFORMED,
     NULL, NULL, 0},
    {"form feed between tokens", "{\"type\":\f\"abort\"}", 0, GW_EMALFORMED,
     NULL, NULL, 0},
    {"raw tab in string", "{\"type\":\"abort\",\"t\":\"\t\"}", 0, GW_EMALFORMED,
     NULL, NULL, 0},
    {"lone high surrogate", "{\"type\":\"stt\",\"text\":\"\\ud83d\"}", 0,
     GW_EMALFORMED, NULL, NULL, 0},
    {"lone low surrogate", "{\"type\":\"stt\",\"text\":\"\\ude00\"}", 0,
     GW_EMALFORMED, NULL, NULL, 0},
    {"bad escape", "{\"type\":\"stt\",\"text\":\"\\x41\"}", 0, GW_EMALFORMED,
     NULL, NULL, 0},
    {"bad literal", "{\"type\":\"abort\",\"a\":tru}", 0, GW_EMALFORMED, NULL,
     NULL, 0},
    {"single quotes", "{'type':'abort'}", 0, GW_EMALFORMED, NULL, NULL, 0},
    {"array root", "[{\"type\":\"abort\"}]", 0, GW_EMALFORMED, NULL, NULL, 0},
    {"string root", "\"hello\"", 0, GW_EMALFORMED, NULL, NULL, 0},
    {"number root", "42", 0, GW_EMALFORMED, NULL, NULL, 0},
    {"null root", "null", 0, GW_EMALFORMED, NULL, NULL, 0},
    {"invalid byte", "{\"type\":\"stt\",\"text\":\"\xff\"}", 0, GW_EUTF8, NULL,
     NULL, 0},
    {"overlong slash", "{\"type\":\"stt\",\"text\":\"\xc0\xaf\"}", 0, GW_EUTF8,
     NULL, NULL, 0},
    {"encoded surrogate", "{\"type\":\"stt\",\"text\":\"\xed\xa0\x80\"}", 0,
     GW_EUTF8, NULL, NULL, 0},
    {"cut multibyte", "{\"type\":\"stt\",\"text\":\"\xe4\xbd\"}", 0, GW_EUTF8,
     NULL, NULL, 0},
    {"bad UTF-8 outside strings", "{\"type\":\"abort\"}\xc3", 0, GW_EUTF8, NULL,
     NULL, 0},
    /* Parsed, but the header is wrong. */
    {"missing type", "{\"session_id\":\"x\"}", 0, GW_EPROTO, NULL, NULL, 0},
    {"empty object", "{}", 0, GW_EPROTO, NULL, NULL, 0},
    {"numeric type", "{\"type\":3}", 0, GW_EPROTO, NULL, NULL, 0},
    {"null type", "{\"type\":null}", 0, GW_EPROTO, NULL, NULL, 0},
    {"object type", "{\"type\":{\"a\":1}}", 0, GW_EPROTO, NULL, NULL, 0},
    {"empty type", "{\"type\":\"\"}", 0, GW_EPROTO, NULL, NULL, 0},
    {"repeated type", "{\"type\":\"listen\",\"type\":\"hello\"}", 0, GW_EPROTO,
     NULL, NULL, 0},
    {"numeric session_id", "{\"type\":\"listen\",\"session_id\":5}", 0,
     GW_EPROTO, NULL, NULL, 0},
    {"null session_id", "{\"type\":\"listen\",\"session_id\":null}", 0,
     GW_EPROTO, NULL, NULL, 0},
    {"repeated session_id",
     "{\"type\":\"goodbye\",\"session_id\":\"a\",\"session_id\":\"b\"}", 0,
     GW_EPROTO, NULL, NULL, 0},
};

/*
 * Runs one parse with the text's last byte right before an unmapped page:
 * no NUL follows, and a read past len by libcjson (which ASan does not
 * see) faults.
 */
static int parse_exact(const char *text, size_t len, size_t max,
                       struct gw_envelope *env)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t span = (len + page - 1) / page * page + page;
    char *area = mmap(NULL, span + page, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int err;

    assert_true(area != MAP_FAILED);
    assert_int_equal(mprotect(area + span, page, PROT_NONE), 0);
    memcpy(area + span - len, text, len);
    err = gw_envelope_parse(area + span - len, len, max, env);
    munmap(area, span + page);
    return err;
}

static void test_parse_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(parse_cases) / sizeof(parse_cases[0]); i++) {
        const struct parse_case *c = &parse_cases[i];
        size_t len = c->len ? c->len : strlen(c->text);
        struct gw_envelope env;
        int err = parse_exact(c->text, len, GW_ENVELOPE_DEVICE_MAX, &env);

        if (err != c->err) {
            fail_msg("%s: got %s, want %s", c->name, gw_err_name(err),
                     gw_err_name(c->err));
        }
        if (err != 0) {
            assert_null(env.root);
            assert_null(env.type);
            continue;
        }
        assert_string_equal(env.type, c->type);
        assert_int_equal(env.kind, c->kind);
        if (c->sid == NO_SID) {
            assert_null(env.session_id);
        } else {
            assert_non_null(env.session_id);
            assert_string_equal(env.session_id, c->sid);
        }
        gw_envelope_free(&env);
        assert_null(env.root);
        gw_envelope_free(&env); /* idempotent */
    }
}

/* {"type":"stt","text":"aaa..."} of exactly n bytes (n >= 24). */
static char *make_sized(size_t n)
{
    static const char head[] = "{\"type\":\"stt\",\"text\":\"";
    char *buf = malloc(n);

    assert_non_null(buf);
    memcpy(buf, head, sizeof(head) - 1);
    memset(buf + sizeof(head) - 1, 'a', n - (sizeof(head) - 1) - 2);
    memcpy(buf + n - 2, "\"}", 2);
    return buf;
}

static void test_size_limit(void **state)
{
    static const size_t limits[] = {64, 1024, GW_ENVELOPE_DEVICE_MAX};
    struct gw_envelope env;

    (void)state;
    for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
        char *buf = make_sized(limits[i] + 1);
        assert_int_equal(gw_envelope_parse(buf, limits[i], limits[i], &env),
                         GW_EMALFORMED); /* cut: no closing brace */
        assert_int_equal(gw_envelope_parse(buf, limits[i] + 1, limits[i], &env),
                         GW_ETOOBIG);
        assert_null(env.root);
        assert_int_equal(
            gw_envelope_parse(buf, limits[i] + 1, limits[i] + 1, &env), 0);
        assert_string_equal(env.type, "stt");
        gw_envelope_free(&env);
        free(buf);
    }
    /* The size check comes first: even bad UTF-8 is just too big. */
    assert_int_equal(gw_envelope_parse("\xff\xff\xff", 3, 2, &env), GW_ETOOBIG);
    assert_int_equal(gw_envelope_parse(NULL, 0, 10, &env), GW_EMALFORMED);
    assert_int_equal(gw_envelope_parse(NULL, 5, 10, &env), GW_EINVAL);
    assert_int_equal(gw_envelope_parse("{}", 2, 10, NULL), GW_EINVAL);
}

/* {"type":"x","a":[[...0...]]} whose deepest value sits at depth. */
static char *make_nested(size_t depth, size_t *len)
{
    static const char head[] = "{\"type\":\"x\",\"a\":";
    size_t h = sizeof(head) - 1;
    size_t n = h + 2 * (depth - 1) + 2;
    char *buf = malloc(n);

    assert_non_null(buf);
    memcpy(buf, head, h);
    memset(buf + h, '[', depth - 1);
    buf[h + depth - 1] = '0';
    memset(buf + h + depth, ']', depth - 1);
    buf[n - 1] = '}';
    *len = n;
    return buf;
}

static void test_depth_limit(void **state)
{
    static const struct {
        size_t depth;
        int err;
    } cases[] = {
        {1, 0},
        {2, 0},
        {GW_ENVELOPE_MAX_DEPTH, 0},
        {GW_ENVELOPE_MAX_DEPTH + 1, GW_EMALFORMED},
        {1000, GW_EMALFORMED},
        {100000, GW_EMALFORMED},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t len;
        char *buf = make_nested(cases[i].depth, &len);
        struct gw_envelope env;
        int err = gw_envelope_parse(buf, len, len, &env);
        if (err != cases[i].err) {
            fail_msg("depth %zu: got %s", cases[i].depth, gw_err_name(err));
        }
        gw_envelope_free(&env);
        free(buf);
    }
}

static void test_type_map(void **state)
{
    static const struct {
        const char *text;
        enum gw_msg_type kind;
    } cases[] = {
        {"hello", GW_MSG_HELLO},   {"goodbye", GW_MSG_GOODBYE},
        {"listen", GW_MSG_LISTEN}, {"abort", GW_MSG_ABORT},
        {"mcp", GW_MSG_MCP},       {"stt", GW_MSG_STT},
        {"llm", GW_MSG_LLM},       {"tts", GW_MSG_TTS},
        {"alert", GW_MSG_ALERT},   {"system", GW_MSG_SYSTEM},
        {"custom", GW_MSG_CUSTOM}, {"udp_timeout", GW_MSG_UDP_TIMEOUT},
        {"iot", GW_MSG_IOT},       {"error", GW_MSG_OTHER},
        {"HELLO", GW_MSG_OTHER},   {"hello ", GW_MSG_OTHER},
        {"", GW_MSG_OTHER},        {NULL, GW_MSG_OTHER},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(gw_envelope_type(cases[i].text), cases[i].kind);
    }
}

struct sid_case {
    const char *name;
    const char *in;  /* message as received */
    const char *sid; /* session_id to set, NULL to remove */
    int err;         /* expected result of the set */
    const char *out; /* expected serialisation */
};

static const struct sid_case sid_cases[] = {
    {"replaced in place",
     "{\"session_id\":\"old\",\"type\":\"listen\",\"state\":\"start\"}", "new",
     0, "{\"session_id\":\"new\",\"type\":\"listen\",\"state\":\"start\"}"},
    {"stale empty id replaced", "{\"session_id\":\"\",\"type\":\"abort\"}",
     "s-1", 0, "{\"session_id\":\"s-1\",\"type\":\"abort\"}"},
    {"appended when absent", "{\"type\":\"tts\",\"state\":\"start\"}", "s-2", 0,
     "{\"type\":\"tts\",\"state\":\"start\",\"session_id\":\"s-2\"}"},
    {"set to empty", "{\"type\":\"stt\",\"session_id\":\"x\"}", "", 0,
     "{\"type\":\"stt\",\"session_id\":\"\"}"},
    {"removed", "{\"type\":\"stt\",\"session_id\":\"x\",\"text\":\"t\"}", NULL,
     0, "{\"type\":\"stt\",\"text\":\"t\"}"},
    {"remove when absent", "{\"type\":\"stt\"}", NULL, 0, "{\"type\":\"stt\"}"},
    {"escaped on output", "{\"type\":\"stt\"}", "a\"b\\c\n", 0,
     "{\"type\":\"stt\",\"session_id\":\"a\\\"b\\\\c\\n\"}"},
    {"invalid UTF-8 refused", "{\"type\":\"stt\",\"session_id\":\"x\"}",
     "\xc3(", GW_EUTF8, "{\"type\":\"stt\",\"session_id\":\"x\"}"},
};

static void test_set_session_id(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(sid_cases) / sizeof(sid_cases[0]); i++) {
        const struct sid_case *c = &sid_cases[i];
        struct gw_envelope env, again;
        char *text;
        size_t len;
        int err;

        assert_int_equal(gw_envelope_parse(c->in, strlen(c->in), 8192, &env),
                         0);
        err = gw_envelope_set_session_id(&env, c->sid);
        if (err != c->err) {
            fail_msg("%s: got %s", c->name, gw_err_name(err));
        }
        if (err == 0 && c->sid != NULL) {
            assert_string_equal(env.session_id, c->sid);
        } else if (err == 0) {
            assert_null(env.session_id);
        }
        assert_int_equal(gw_envelope_print(&env, 8192, &text, &len), 0);
        assert_string_equal(text, c->out);
        assert_int_equal(len, strlen(c->out));
        /* What we send parses back with the same header. */
        assert_int_equal(gw_envelope_parse(text, len, 8192, &again), 0);
        assert_string_equal(again.type, env.type);
        if (env.session_id != NULL) {
            assert_string_equal(again.session_id, env.session_id);
        }
        gw_envelope_free(&again);
        cJSON_free(text);
        gw_envelope_free(&env);
    }
    assert_int_equal(gw_envelope_set_session_id(NULL, "x"), GW_EINVAL);
}

static void test_print_limit(void **state)
{
    static const char msg[] = "{\"type\":\"tts\", \"state\": \"stop\"}";
    static const char want[] = "{\"type\":\"tts\",\"state\":\"stop\"}";
    struct gw_envelope env, empty = {0};
    char *text = (char *)1;
    size_t len = 0;

    (void)state;
    assert_int_equal(gw_envelope_parse(msg, sizeof(msg) - 1, 64, &env), 0);
    assert_int_equal(gw_envelope_print(&env, sizeof(want) - 2, &text, &len),
                     GW_ETOOBIG);
    assert_null(text);
    assert_int_equal(gw_envelope_print(&env, sizeof(want) - 1, &text, &len), 0);
    assert_string_equal(text, want);
    assert_int_equal(len, sizeof(want) - 1);
    cJSON_free(text);
    assert_int_equal(gw_envelope_print(&empty, 64, &text, &len), GW_EINVAL);
    assert_int_equal(gw_envelope_print(NULL, 64, &text, &len), GW_EINVAL);
    gw_envelope_free(&env);
}

struct goodbye_case {
    const char *name;
    const char *sid; /* id to put in the goodbye */
    int err;         /* expected result */
    const char *out; /* expected text, NULL to only check the round trip */
};

static const struct goodbye_case goodbye_cases[] = {
    {"uuid", "c5b0e6a4-1d2b-4f0e-9a51-2f1c2d3e4f50", 0,
     "{\"type\":\"goodbye\",\"session_id\":"
     "\"c5b0e6a4-1d2b-4f0e-9a51-2f1c2d3e4f50\"}"},
    {"empty", "", 0, "{\"type\":\"goodbye\",\"session_id\":\"\"}"},
    {"quote", "a\"b", 0, "{\"type\":\"goodbye\",\"session_id\":\"a\\\"b\"}"},
    {"backslash", "a\\b", 0,
     "{\"type\":\"goodbye\",\"session_id\":\"a\\\\b\"}"},
    {"short escapes", "\b\f\n\r\t", 0,
     "{\"type\":\"goodbye\",\"session_id\":\"\\b\\f\\n\\r\\t\"}"},
    {"other controls", "\x01\x1f", 0,
     "{\"type\":\"goodbye\",\"session_id\":\"\\u0001\\u001f\"}"},
    {"slash and DEL kept", "/\x7f", 0,
     "{\"type\":\"goodbye\",\"session_id\":\"/\x7f\"}"},
    {"UTF-8 kept raw", "\xe4\xbd\xa0\xf0\x9f\x98\x80", 0, NULL},
    {"everything", "\"\\\"\x02}{", 0, NULL},
    {"invalid UTF-8", "ab\xff", GW_EUTF8, NULL},
    {"cut UTF-8", "ab\xe4\xbd", GW_EUTF8, NULL},
    {"NULL id", NULL, GW_EINVAL, NULL},
};

static void test_goodbye_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(goodbye_cases) / sizeof(goodbye_cases[0]);
         i++) {
        const struct goodbye_case *c = &goodbye_cases[i];
        char out[512];
        size_t len = 0;
        struct gw_envelope env;
        int err = gw_envelope_build_goodbye(c->sid, out, sizeof(out), &len);

        if (err != c->err) {
            fail_msg("%s: got %s", c->name, gw_err_name(err));
        }
        if (err != 0) {
            assert_string_equal(out, "");
            continue;
        }
        assert_int_equal(len, strlen(out));
        if (c->out != NULL) {
            assert_string_equal(out, c->out);
        }
        assert_int_equal(gw_envelope_parse(out, len, len, &env), 0);
        assert_int_equal(env.kind, GW_MSG_GOODBYE);
        assert_string_equal(env.session_id, c->sid);
        gw_envelope_free(&env);
    }
}

/* Every capacity short of the whole message fails cleanly. */
static void test_goodbye_capacity(void **state)
{
    static const char *const sids[] = {"abc", "a\"\x01"};

    (void)state;
    for (size_t s = 0; s < sizeof(sids) / sizeof(sids[0]); s++) {
        char full[128], out[128];
        size_t need, len;

        assert_int_equal(
            gw_envelope_build_goodbye(sids[s], full, sizeof(full), &need), 0);
        for (size_t cap = 1; cap <= need; cap++) {
            memset(out, 'x', sizeof(out));
            assert_int_equal(gw_envelope_build_goodbye(sids[s], out, cap, &len),
                             GW_ENOSPC);
            assert_int_equal(out[0], '\0');
        }
        assert_int_equal(
            gw_envelope_build_goodbye(sids[s], out, need + 1, &len), 0);
        assert_string_equal(out, full);
    }
    assert_int_equal(gw_envelope_build_goodbye("x", NULL, 0, NULL), GW_ENOSPC);
}

/* The mcp envelope: the shape devices and backends get, payload intact
 * and not moved, and a session id written as JSON. */
static void test_print_mcp(void **state)
{
    cJSON *payload =
        cJSON_Parse("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}");
    char *text;

    (void)state;
    assert_non_null(payload);
    text = gw_envelope_print_mcp("s\"1", payload);
    assert_non_null(text);
    assert_string_equal(text, "{\"session_id\":\"s\\\"1\",\"type\":\"mcp\","
                              "\"payload\":{\"jsonrpc\":\"2.0\",\"id\":7,"
                              "\"result\":{}}}");
    cJSON_free(text);
    text = gw_envelope_print_mcp("", payload);
    assert_non_null(text);
    assert_non_null(strstr(text, "{\"session_id\":\"\",\"type\":\"mcp\""));
    cJSON_free(text);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(payload, "id")->valueint,
                     7);
    cJSON_Delete(payload);
}

static void test_write_string(void **state)
{
    char out[16] = "ab";
    size_t pos = 2;

    (void)state;
    assert_int_equal(gw_envelope_write_string(out, sizeof(out), &pos, "q\"", 2),
                     0);
    assert_string_equal(out, "ab\"q\\\"\"");
    assert_int_equal(pos, 7);
    /* Too long: nothing of it stays, the earlier text does. */
    assert_int_equal(
        gw_envelope_write_string(out, sizeof(out), &pos, "0123456789", 10),
        GW_ENOSPC);
    assert_string_equal(out, "ab\"q\\\"\"");
    assert_int_equal(pos, 7);
    /* Length-bounded: the byte after len is not read. */
    assert_int_equal(gw_envelope_write_string(out, sizeof(out), &pos, "xyz", 1),
                     0);
    assert_string_equal(out, "ab\"q\\\"\"\"x\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_table),
        cmocka_unit_test(test_size_limit),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_type_map),
        cmocka_unit_test(test_set_session_id),
        cmocka_unit_test(test_print_limit),
        cmocka_unit_test(test_goodbye_table),
        cmocka_unit_test(test_goodbye_capacity),
        cmocka_unit_test(test_write_string),
        cmocka_unit_test(test_print_mcp),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
