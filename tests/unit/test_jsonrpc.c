/* JSON-RPC: classification and its refusals, numeric ids, the builders'
 * exact output, and the repair of firmware error objects. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "codec/jsonrpc.h"

struct classify_case {
    const char *name;
    const char *text;
    int err;
    enum gw_rpc_kind kind;      /* expected on success */
    const char *method;         /* expected method, NULL for responses */
    const char *id;             /* expected id printed, NULL when absent */
    bool params, result, error; /* which of them are expected set */
};

#define REQ(name, text, method, id, params)                                    \
    {                                                                          \
        name, text, 0, GW_RPC_REQUEST, method, id, params, false, false        \
    }
#define NOTE(name, text, method, params)                                       \
    {                                                                          \
        name, text, 0, GW_RPC_NOTIFICATION, method, NULL, params, false, false \
    }
#define RESP(name, text, id, result)                                           \
    {                                                                          \
        name, text, 0, GW_RPC_RESPONSE, NULL, id, false, result, !(result)     \
    }
#define BAD(name, text)                                                        \
    {                                                                          \
        name, text, GW_EPROTO, 0, NULL, NULL, false, false, false              \
    }

static const struct classify_case classify_cases[] = {
    REQ("initialize",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
        "\"params\":{\"protocolVersion\":\"2024-11-05\"}}",
        "initialize", "1", true),
    REQ("string id", "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"m\"}", "m",
        "\"a\"", false),
    REQ("params array",
        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"m\","
        "\"params\":[1]}",
        "m", "2", true),
    REQ("id written 1.0", "{\"jsonrpc\":\"2.0\",\"id\":1.0,\"method\":\"m\"}",
        "m", "1", false),
    REQ("negative id", "{\"jsonrpc\":\"2.0\",\"id\":-5,\"method\":\"m\"}", "m",
        "-5", false),
    REQ("huge integral id",
        "{\"jsonrpc\":\"2.0\",\"id\":1e300,\"method\":\"m\"}", "m", "1e+300",
        false),
    REQ("key order free",
        "{\"method\":\"m\",\"id\":0,\"jsonrpc\":\"2.0\","
        "\"extra\":1}",
        "m", "0", false),
    NOTE("initialized",
         "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
         "notifications/initialized", false),
    NOTE("cancelled with params",
         "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
         "\"params\":{\"requestId\":3}}",
         "notifications/cancelled", true),
    RESP("result", "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"tools\":[]}}",
         "2", true),
    RESP("null result", "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":null}", "2",
         true),
    RESP("firmware error",
         "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"message\":\"Unknown\"}}",
         "3", false),
    RESP("null id error",
         "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700}}",
         "null", false),
    RESP("string id result", "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":1}",
         "\"x\"", true),
    BAD("array", "[{\"jsonrpc\":\"2.0\",\"method\":\"m\"}]"),
    BAD("string", "\"2.0\""),
    BAD("no jsonrpc", "{\"id\":1,\"method\":\"m\"}"),
    BAD("jsonrpc 2.00", "{\"jsonrpc\":\"2.00\",\"id\":1,\"method\":\"m\"}"),
    BAD("jsonrpc 1.0", "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"m\"}"),
    BAD("jsonrpc number", "{\"jsonrpc\":2.0,\"id\":1,\"method\":\"m\"}"),
    BAD("jsonrpc with space", "{\"jsonrpc\":\"2.0 \",\"method\":\"m\"}"),
    BAD("empty method", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}"),
    BAD("method number", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}"),
    BAD("method null", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":null}"),
    BAD("method and result",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"result\":1}"),
    BAD("method and error",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"error\":{}}"),
    BAD("params string",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":\"x\"}"),
    BAD("params null",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":null}"),
    BAD("params number", "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":1}"),
    BAD("request id null",
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"m\"}"),
    BAD("fractional id", "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"m\"}"),
    BAD("bool id", "{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"m\"}"),
    BAD("object id", "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"m\"}"),
    BAD("infinite id", "{\"jsonrpc\":\"2.0\",\"id\":1e400,\"method\":\"m\"}"),
    BAD("response fractional id",
        "{\"jsonrpc\":\"2.0\",\"id\":0.5,\"result\":1}"),
    BAD("response without id", "{\"jsonrpc\":\"2.0\",\"result\":1}"),
    BAD("result and error",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1,\"error\":{}}"),
    BAD("neither result nor error", "{\"jsonrpc\":\"2.0\",\"id\":1}"),
    BAD("error string", "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":\"bad\"}"),
    BAD("error null", "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":null}"),
    BAD("error array", "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":[]}"),
    BAD("response with params",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1,\"params\":{}}"),
    BAD("duplicate id",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"id\":2}"),
    BAD("duplicate method",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\",\"method\":\"b\"}"),
    BAD("duplicate jsonrpc",
        "{\"jsonrpc\":\"2.0\",\"jsonrpc\":\"1.0\",\"method\":\"m\"}"),
    BAD("duplicate result",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1,\"result\":2}"),
    BAD("empty object", "{}"),
};

static void check_classified(const struct classify_case *c,
                             const struct gw_rpc *rpc)
{
    assert_int_equal(rpc->kind, c->kind);
    if (c->method != NULL) {
        assert_non_null(rpc->method);
        assert_string_equal(rpc->method, c->method);
    } else {
        assert_null(rpc->method);
    }
    if (c->id != NULL) {
        char *printed = cJSON_PrintUnformatted(rpc->id);
        assert_non_null(printed);
        assert_string_equal(printed, c->id);
        cJSON_free(printed);
    } else {
        assert_null(rpc->id);
    }
    assert_int_equal(rpc->params != NULL, c->params);
    assert_int_equal(rpc->result != NULL, c->result);
    assert_int_equal(rpc->error != NULL, c->error);
}

static void test_classify_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(classify_cases) / sizeof(classify_cases[0]);
         i++) {
        const struct classify_case *c = &classify_cases[i];
        cJSON *msg = cJSON_Parse(c->text);
        struct gw_rpc rpc, untouched;
        int err;

        print_message("case: %s\n", c->name);
        assert_non_null(msg);
        memset(&rpc, 0xa5, sizeof(rpc));
        untouched = rpc;
        err = gw_rpc_classify(msg, &rpc);
        assert_int_equal(err, c->err);
        if (err == 0) {
            check_classified(c, &rpc);
        } else {
            assert_memory_equal(&rpc, &untouched, sizeof(rpc));
        }
        cJSON_Delete(msg);
    }
}

/* Ids that JSON text cannot carry but a cJSON tree can. */
static void test_classify_odd_numbers(void **state)
{
    const double ids[] = {NAN, INFINITY, -INFINITY, 0.25};
    struct gw_rpc rpc;

    (void)state;
    assert_int_equal(gw_rpc_classify(NULL, &rpc), GW_EINVAL);
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        cJSON *msg = cJSON_CreateObject();

        assert_non_null(msg);
        assert_non_null(cJSON_AddStringToObject(msg, "jsonrpc", "2.0"));
        assert_non_null(cJSON_AddNumberToObject(msg, "id", ids[i]));
        assert_non_null(cJSON_AddStringToObject(msg, "method", "m"));
        assert_int_equal(gw_rpc_classify(msg, &rpc), GW_EPROTO);
        assert_int_equal(gw_rpc_classify(msg, NULL), GW_EINVAL);
        cJSON_Delete(msg);
    }
}

struct id_case {
    double value;
    bool ok;
    uint32_t id;
};

static const struct id_case id_cases[] = {
    {0, true, 0},
    {1, true, 1},
    {-0.0, true, 0},
    {2147483647.0, true, GW_RPC_ID_MAX},
    {2147483648.0, false, 0},
    {4294967295.0, false, 0},
    {4294967296.0, false, 0},
    {-1, false, 0},
    {1.5, false, 0},
    {2147483646.5, false, 0},
    {1e300, false, 0},
    {-1e300, false, 0},
};

static void test_id_u32(void **state)
{
    const double odd[] = {NAN, INFINITY, -INFINITY};
    cJSON *other[] = {cJSON_CreateString("1"), cJSON_CreateNull(),
                      cJSON_CreateTrue(), cJSON_CreateArray()};
    uint32_t out;

    (void)state;
    for (size_t i = 0; i < sizeof(id_cases) / sizeof(id_cases[0]); i++) {
        cJSON *id = cJSON_CreateNumber(id_cases[i].value);

        assert_non_null(id);
        out = 77;
        assert_int_equal(gw_rpc_id_u32(id, &out), id_cases[i].ok);
        assert_int_equal(out, id_cases[i].ok ? id_cases[i].id : 77);
        assert_false(gw_rpc_id_u32(id, NULL));
        cJSON_Delete(id);
    }
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
        cJSON *id = cJSON_CreateNumber(odd[i]);
        assert_non_null(id);
        assert_false(gw_rpc_id_u32(id, &out));
        cJSON_Delete(id);
    }
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        assert_non_null(other[i]);
        assert_false(gw_rpc_id_u32(other[i], &out));
        cJSON_Delete(other[i]);
    }
    assert_false(gw_rpc_id_u32(NULL, &out));
}

/* A numeric token as a peer echoes it: the number, or esp-mcp's string
 * of its digits; nothing else. */
static void test_token_u32(void **state)
{
    static const struct {
        const char *json;
        bool ok;
        uint32_t id;
    } cases[] = {
        {"7", true, 7},
        {"\"7\"", true, 7},
        {"\"0\"", true, 0},
        {"\"2147483647\"", true, 0x7fffffffu},
        {"7.0", true, 7},
        {"\"2147483648\"", false, 0},
        {"\"07\"", false, 0},
        {"\"+7\"", false, 0},
        {"\"-7\"", false, 0},
        {"\"7.0\"", false, 0},
        {"\" 7\"", false, 0},
        {"\"\"", false, 0},
        {"\"12345678901\"", false, 0},
        {"\"tok-a\"", false, 0},
        {"7.5", false, 0},
        {"null", false, 0},
        {"[7]", false, 0},
    };
    uint32_t out;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cJSON *tok = cJSON_Parse(cases[i].json);
        assert_non_null(tok);
        out = 77;
        assert_int_equal(gw_rpc_token_u32(tok, &out), cases[i].ok);
        assert_int_equal(out, cases[i].ok ? cases[i].id : 77);
        assert_false(gw_rpc_token_u32(tok, NULL));
        cJSON_Delete(tok);
    }
    assert_false(gw_rpc_token_u32(NULL, &out));
}

/* Prints msg, compares with want, frees msg. */
static void expect_text(cJSON *msg, const char *want)
{
    char *text;

    assert_non_null(msg);
    text = cJSON_PrintUnformatted(msg);
    assert_non_null(text);
    assert_string_equal(text, want);
    cJSON_free(text);
    cJSON_Delete(msg);
}

static void test_build_calls(void **state)
{
    cJSON *params = cJSON_Parse("{\"cursor\":\"self.x\"}");

    (void)state;
    assert_non_null(params);
    expect_text(gw_rpc_request(7, "tools/list", params),
                "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\","
                "\"params\":{\"cursor\":\"self.x\"}}");
    expect_text(gw_rpc_request(GW_RPC_ID_MAX, "ping", NULL),
                "{\"jsonrpc\":\"2.0\",\"id\":2147483647,\"method\":\"ping\"}");
    expect_text(gw_rpc_request(0, "m", cJSON_CreateArray()),
                "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"m\","
                "\"params\":[]}");
    expect_text(gw_rpc_notification("notifications/initialized", NULL),
                "{\"jsonrpc\":\"2.0\",\"method\":"
                "\"notifications/initialized\"}");
    expect_text(
        gw_rpc_notification("notifications/cancelled",
                            cJSON_Parse("{\"requestId\":4,\"reason\":\"t\"}")),
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
        "\"params\":{\"requestId\":4,\"reason\":\"t\"}}");
    /* Without a method the params are still freed (ASan checks). */
    assert_null(gw_rpc_request(1, NULL, cJSON_CreateObject()));
    assert_null(gw_rpc_notification(NULL, cJSON_CreateObject()));
}

static void test_build_replies(void **state)
{
    cJSON *num = cJSON_CreateNumber(12);
    cJSON *str = cJSON_CreateString("abc");

    (void)state;
    assert_non_null(num);
    assert_non_null(str);
    expect_text(gw_rpc_result(num, cJSON_Parse("{\"tools\":[]}")),
                "{\"jsonrpc\":\"2.0\",\"id\":12,\"result\":{\"tools\":[]}}");
    expect_text(gw_rpc_result(str, cJSON_CreateNull()),
                "{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"result\":null}");
    expect_text(gw_rpc_result(NULL, cJSON_CreateTrue()),
                "{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":true}");
    assert_null(gw_rpc_result(num, NULL));
    expect_text(gw_rpc_error(num, GW_RPC_TIMEOUT, "timeout"),
                "{\"jsonrpc\":\"2.0\",\"id\":12,\"error\":{\"code\":-32001,"
                "\"message\":\"timeout\"}}");
    expect_text(gw_rpc_error(NULL, GW_RPC_PARSE_ERROR, "parse error"),
                "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,"
                "\"message\":\"parse error\"}}");
    expect_text(gw_rpc_error_with(str, cJSON_Parse("{\"code\":1}")),
                "{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"error\":{\"code\":1}}");
    assert_null(gw_rpc_error_with(str, NULL));
    /* The ids were copied, not moved. */
    assert_int_equal(num->valueint, 12);
    assert_string_equal(str->valuestring, "abc");
    cJSON_Delete(num);
    cJSON_Delete(str);
}

/* Ids come back as exactly the text the peer sent. */
static void test_ids_verbatim(void **state)
{
    static const char *const ids[] = {
        "9007199254740991", "-9007199254740991", "2147483648", "4294967296",
        "-2147483649",      "1234567890123",     "2147483647", "-2147483648",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        char in[96], want[128];
        snprintf(in, sizeof(in),
                 "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"x\"}", ids[i]);
        snprintf(want, sizeof(want),
                 "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}", ids[i]);
        cJSON *req = cJSON_Parse(in);
        struct gw_rpc rpc;
        assert_non_null(req);
        assert_int_equal(gw_rpc_classify(req, &rpc), 0);
        expect_text(gw_rpc_result(rpc.id, cJSON_CreateObject()), want);
        cJSON_Delete(req);
    }
}

/* What the gateway builds classifies as what it is. */
static void test_build_classifies(void **state)
{
    cJSON *id = cJSON_CreateNumber(5);
    cJSON *msgs[] = {
        gw_rpc_request(5, "tools/call", cJSON_CreateObject()),
        gw_rpc_notification("notifications/initialized", NULL),
        gw_rpc_result(id, cJSON_CreateObject()),
        gw_rpc_error(id, GW_RPC_DEVICE_OFFLINE, "offline"),
    };
    const enum gw_rpc_kind kinds[] = {GW_RPC_REQUEST, GW_RPC_NOTIFICATION,
                                      GW_RPC_RESPONSE, GW_RPC_RESPONSE};
    struct gw_rpc rpc;
    uint32_t out;

    (void)state;
    for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
        assert_non_null(msgs[i]);
        assert_int_equal(gw_rpc_classify(msgs[i], &rpc), 0);
        assert_int_equal(rpc.kind, kinds[i]);
        if (rpc.id != NULL) {
            assert_true(gw_rpc_id_u32(rpc.id, &out));
            assert_int_equal(out, 5);
        }
        cJSON_Delete(msgs[i]);
    }
    cJSON_Delete(id);
}

struct normalise_case {
    const char *name;
    const char *error; /* JSON text, NULL for a NULL error */
    const char *want;
};

static const struct normalise_case normalise_cases[] = {
    {"firmware", "{\"message\":\"Unknown tool: self.x\"}",
     "{\"code\":-32603,\"message\":\"Unknown tool: self.x\"}"},
    {"standard kept", "{\"code\":-32601,\"message\":\"Method not found\"}",
     "{\"code\":-32601,\"message\":\"Method not found\"}"},
    {"int max kept", "{\"code\":2147483647,\"message\":\"m\"}",
     "{\"code\":2147483647,\"message\":\"m\"}"},
    {"int min kept", "{\"code\":-2147483648,\"message\":\"m\"}",
     "{\"code\":-2147483648,\"message\":\"m\"}"},
    {"code 1.0 kept", "{\"code\":1.0,\"message\":\"m\"}",
     "{\"code\":1,\"message\":\"m\"}"},
    {"over int", "{\"code\":2147483648,\"message\":\"m\"}",
     "{\"code\":-32603,\"message\":\"m\"}"},
    {"under int", "{\"code\":-2147483649,\"message\":\"m\"}",
     "{\"code\":-32603,\"message\":\"m\"}"},
    {"fraction", "{\"code\":1.5,\"message\":\"m\"}",
     "{\"code\":-32603,\"message\":\"m\"}"},
    {"infinite", "{\"code\":-1e400,\"message\":\"m\"}",
     "{\"code\":-32603,\"message\":\"m\"}"},
    {"string code", "{\"code\":\"-32601\",\"message\":\"m\"}",
     "{\"code\":-32603,\"message\":\"m\"}"},
    {"number message", "{\"code\":-32000,\"message\":5}",
     "{\"code\":-32000,\"message\":\"device error\"}"},
    {"null message", "{\"message\":null}",
     "{\"code\":-32603,\"message\":\"device error\"}"},
    {"empty object", "{}", "{\"code\":-32603,\"message\":\"device error\"}"},
    {"string error", "\"oops\"",
     "{\"code\":-32603,\"message\":\"device error\"}"},
    {"array error", "[1]", "{\"code\":-32603,\"message\":\"device error\"}"},
    {"NULL error", NULL, "{\"code\":-32603,\"message\":\"device error\"}"},
    {"data copied", "{\"message\":\"m\",\"data\":{\"a\":[1,2]},\"x\":1}",
     "{\"code\":-32603,\"message\":\"m\",\"data\":{\"a\":[1,2]}}"},
    {"null data copied", "{\"code\":-32602,\"message\":\"m\",\"data\":null}",
     "{\"code\":-32602,\"message\":\"m\",\"data\":null}"},
    {"empty message kept", "{\"message\":\"\"}",
     "{\"code\":-32603,\"message\":\"\"}"},
};

static void test_normalise_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(normalise_cases) / sizeof(normalise_cases[0]);
         i++) {
        const struct normalise_case *c = &normalise_cases[i];
        cJSON *error = c->error != NULL ? cJSON_Parse(c->error) : NULL;
        cJSON *fixed, *msg;
        struct gw_rpc rpc;

        print_message("case: %s\n", c->name);
        assert_true(c->error == NULL || error != NULL);
        fixed = gw_rpc_error_normalise(error);
        assert_non_null(fixed);
        msg = gw_rpc_error_with(NULL, cJSON_Duplicate(fixed, true));
        assert_non_null(msg);
        assert_int_equal(gw_rpc_classify(msg, &rpc), 0);
        assert_int_equal(rpc.kind, GW_RPC_RESPONSE);
        cJSON_Delete(msg);
        expect_text(fixed, c->want);
        cJSON_Delete(error);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify_table),
        cmocka_unit_test(test_classify_odd_numbers),
        cmocka_unit_test(test_id_u32),
        cmocka_unit_test(test_token_u32),
        cmocka_unit_test(test_build_calls),
        cmocka_unit_test(test_build_replies),
        cmocka_unit_test(test_build_classifies),
        cmocka_unit_test(test_ids_verbatim),
        cmocka_unit_test(test_normalise_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
