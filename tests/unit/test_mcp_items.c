/* A device's resources, templates and prompts: list pages of each kind,
 * names on the aggregated server both ways, renaming in place, resource
 * contents checks and limits, base64 and progress tokens. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec/mcp_items.h"

#define LABEL "a085e3f44934-1c2d3e4f5a6b7c8d"
#define NOMAC "device000000-0000000000000000"

#define RES "{\"uri\":\"device://status\",\"name\":\"status\"}"
#define TPL "{\"uriTemplate\":\"device://sensor/{name}\",\"name\":\"sensor\"}"
#define PRM "{\"name\":\"greeting\",\"arguments\":[{\"name\":\"name\"}]}"

/* A JSON string of n bytes of 'u' after "device://". */
static char *long_uri(size_t n)
{
    char *s = malloc(n + 1);

    assert_non_null(s);
    memcpy(s, "device://", 9);
    memset(s + 9, 'u', n - 9);
    s[n] = '\0';
    return s;
}

static void test_list_names(void **state)
{
    (void)state;
    assert_string_equal(gw_mcp_list_method(GW_MCP_LIST_RESOURCES),
                        "resources/list");
    assert_string_equal(gw_mcp_list_member(GW_MCP_LIST_RESOURCES), "resources");
    assert_string_equal(gw_mcp_list_key(GW_MCP_LIST_RESOURCES), "uri");
    assert_string_equal(gw_mcp_list_method(GW_MCP_LIST_TEMPLATES),
                        "resources/templates/list");
    assert_string_equal(gw_mcp_list_member(GW_MCP_LIST_TEMPLATES),
                        "resourceTemplates");
    assert_string_equal(gw_mcp_list_key(GW_MCP_LIST_TEMPLATES), "uriTemplate");
    assert_string_equal(gw_mcp_list_method(GW_MCP_LIST_PROMPTS),
                        "prompts/list");
    assert_string_equal(gw_mcp_list_member(GW_MCP_LIST_PROMPTS), "prompts");
    assert_string_equal(gw_mcp_list_key(GW_MCP_LIST_PROMPTS), "name");
    assert_null(gw_mcp_list_method(GW_MCP_LIST_COUNT_));
    assert_null(gw_mcp_list_member((enum gw_mcp_list_kind) - 1));
    assert_null(gw_mcp_list_key(GW_MCP_LIST_COUNT_));
}

struct page_case {
    enum gw_mcp_list_kind kind;
    const char *result; /* JSON text, NULL for a NULL result */
    int err;
    int count;        /* items appended on success */
    const char *next; /* expected cursor on success */
};

#define R GW_MCP_LIST_RESOURCES
#define T GW_MCP_LIST_TEMPLATES
#define P GW_MCP_LIST_PROMPTS

static const struct page_case page_cases[] = {
    /* Each kind, and the cursor: absent, null, "" end; a string goes on. */
    {R, "{\"resources\":[" RES "]}", 0, 1, NULL},
    {R, "{\"resources\":[" RES "," RES "],\"nextCursor\":\"p2\"}", 0, 2, "p2"},
    {R, "{\"resources\":[],\"nextCursor\":null}", 0, 0, NULL},
    {R, "{\"resources\":[" RES "],\"nextCursor\":\"\"}", 0, 1, NULL},
    {T, "{\"resourceTemplates\":[" TPL "],\"nextCursor\":\"x\"}", 0, 1, "x"},
    {T, "{\"resourceTemplates\":[]}", 0, 0, NULL},
    {P, "{\"prompts\":[" PRM ",{\"name\":\"status_report\"}]}", 0, 2, NULL},
    {P,
     "{\"prompts\":[{\"name\":\"p\",\"arguments\":[]}],\"nextCursor\":\"c\"}",
     0, 1, "c"},
    {R, "{\"resources\":[],\"nextCursor\":1}", GW_EPROTO, 0, NULL},
    {R, "{\"resources\":[],\"nextCursor\":{}}", GW_EPROTO, 0, NULL},
    {P, "{\"prompts\":[],\"nextCursor\":true}", GW_EPROTO, 0, NULL},
    {T, "{\"resourceTemplates\":[],\"nextCursor\":[\"a\"]}", GW_EPROTO, 0,
     NULL},
    /* Optional members, and members the gateway does not read. */
    {R,
     "{\"resources\":[{\"uri\":\"a\",\"name\":\"\",\"title\":\"A\","
     "\"description\":\"d\",\"mimeType\":\"text/plain\",\"size\":3,"
     "\"annotations\":{}}],\"_meta\":{}}",
     0, 1, NULL},
    {P,
     "{\"prompts\":[{\"name\":\"p\",\"title\":\"P\",\"description\":\"d\","
     "\"arguments\":[{\"name\":\"a\",\"required\":true,\"description\":\"x\"}"
     "]}]}",
     0, 1, NULL},
    /* The wrong member for the kind. */
    {R, "{\"resourceTemplates\":[" TPL "]}", GW_EPROTO, 0, NULL},
    {T, "{\"resources\":[" RES "]}", GW_EPROTO, 0, NULL},
    {T, "{\"resourceTemplates\":[" RES "]}", GW_EPROTO, 0, NULL},
    {R, "{\"resources\":[" TPL "]}", GW_EPROTO, 0, NULL},
    {P, "{\"tools\":[]}", GW_EPROTO, 0, NULL},
    /* Page shape. */
    {R, NULL, GW_EPROTO, 0, NULL},
    {R, "[]", GW_EPROTO, 0, NULL},
    {R, "{\"resources\":{}}", GW_EPROTO, 0, NULL},
    {R, "{\"resources\":null}", GW_EPROTO, 0, NULL},
    {R, "{\"resources\":[],\"resources\":[]}", GW_EPROTO, 0, NULL},
    {R, "{\"resources\":[],\"nextCursor\":\"a\",\"nextCursor\":\"b\"}",
     GW_EPROTO, 0, NULL},
    /* Items. */
    {R, "{\"resources\":[\"device://status\"]}", GW_EPROTO, 0, NULL},
    {R, "{\"resources\":[{\"name\":\"n\"}]}", GW_EPROTO, 0, NULL},
    {R, "{\"resources\":[{\"uri\":\"\",\"name\":\"n\"}]}", GW_EPROTO, 0, NULL},
    {R, "{\"resources\":[{\"uri\":5,\"name\":\"n\"}]}", GW_EPROTO, 0, NULL},
    {R, "{\"resources\":[{\"uri\":\"a\"}]}", GW_EPROTO, 0, NULL},
    {T, "{\"resourceTemplates\":[{\"uriTemplate\":\"a\"}]}", GW_EPROTO, 0,
     NULL},
    {R, "{\"resources\":[{\"uri\":\"a\",\"name\":null}]}", GW_EPROTO, 0, NULL},
    {R, "{\"resources\":[{\"uri\":\"a\",\"name\":\"n\",\"description\":1}]}",
     GW_EPROTO, 0, NULL},
    {R, "{\"resources\":[{\"uri\":\"a\",\"name\":\"n\",\"mimeType\":[]}]}",
     GW_EPROTO, 0, NULL},
    {R, "{\"resources\":[{\"uri\":\"a\",\"name\":\"n\",\"title\":false}]}",
     GW_EPROTO, 0, NULL},
    {R, "{\"resources\":[{\"uri\":\"a\",\"uri\":\"b\",\"name\":\"n\"}]}",
     GW_EPROTO, 0, NULL},
    {R,
     "{\"resources\":[{\"uri\":\"a\",\"name\":\"n\",\"mimeType\":\"a\","
     "\"mimeType\":\"b\"}]}",
     GW_EPROTO, 0, NULL},
    {R, "{\"resources\":[" RES ",{\"uri\":\"b\",\"name\":7}]}", GW_EPROTO, 0,
     NULL},
    {P, "{\"prompts\":[{\"name\":\"\"}]}", GW_EPROTO, 0, NULL},
    {P, "{\"prompts\":[{\"description\":\"d\"}]}", GW_EPROTO, 0, NULL},
    {P, "{\"prompts\":[{\"name\":\"p\",\"arguments\":{}}]}", GW_EPROTO, 0,
     NULL},
    {P, "{\"prompts\":[{\"name\":\"p\",\"arguments\":null}]}", GW_EPROTO, 0,
     NULL},
    {P, "{\"prompts\":[{\"name\":\"p\",\"arguments\":[\"a\"]}]}", GW_EPROTO, 0,
     NULL},
    {P, "{\"prompts\":[{\"name\":\"p\",\"arguments\":[{}]}]}", GW_EPROTO, 0,
     NULL},
    {P, "{\"prompts\":[{\"name\":\"p\",\"arguments\":[{\"name\":\"\"}]}]}",
     GW_EPROTO, 0, NULL},
    {P, "{\"prompts\":[{\"name\":\"p\",\"arguments\":[{\"name\":1}]}]}",
     GW_EPROTO, 0, NULL},
    {P,
     "{\"prompts\":[{\"name\":\"p\",\"arguments\":[{\"name\":\"a\"}],"
     "\"arguments\":[]}]}",
     GW_EPROTO, 0, NULL},
};

static void test_page_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(page_cases) / sizeof(page_cases[0]); i++) {
        const struct page_case *c = &page_cases[i];
        cJSON *result = c->result != NULL ? cJSON_Parse(c->result) : NULL;
        cJSON *items = cJSON_Parse("[{\"name\":\"earlier\"}]");
        const char *next = "unset";
        int err;

        assert_true(c->result == NULL || result != NULL);
        err = gw_mcp_list_page_parse(c->kind, result, items, &next);
        if (err != c->err) {
            fail_msg("case %zu (%s): err %d, want %d", i, c->result, err,
                     c->err);
        }
        if (err == 0) {
            assert_int_equal(cJSON_GetArraySize(items), 1 + c->count);
            if (c->next == NULL) {
                assert_null(next);
            } else {
                assert_non_null(next);
                assert_string_equal(next, c->next);
            }
        } else {
            /* Refused: items as they were, next untouched. */
            assert_int_equal(cJSON_GetArraySize(items), 1);
            assert_string_equal(next, "unset");
        }
        cJSON_Delete(items);
        cJSON_Delete(result);
    }
}

/* Items are copies, appended in order; next points into the result. */
static void test_page_copies(void **state)
{
    cJSON *result = cJSON_Parse("{\"prompts\":[{\"name\":\"a\"},{\"name\":"
                                "\"b\"}],\"nextCursor\":\"more\"}");
    cJSON *items = cJSON_CreateArray();
    const char *next;

    (void)state;
    assert_int_equal(
        gw_mcp_list_page_parse(GW_MCP_LIST_PROMPTS, result, items, &next), 0);
    assert_ptr_equal(next,
                     cJSON_GetObjectItem(result, "nextCursor")->valuestring);
    cJSON_Delete(result);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetArrayItem(items, 0), "name")->valuestring,
        "a");
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetArrayItem(items, 1), "name")->valuestring,
        "b");
    cJSON_Delete(items);
}

static void test_page_uri_max(void **state)
{
    char *uri = long_uri(GW_MCP_URI_MAX + 1);
    cJSON *items = cJSON_CreateArray();
    const char *next;
    char *text = malloc(GW_MCP_URI_MAX + 100);
    cJSON *result;

    (void)state;
    assert_non_null(text);
    /* GW_MCP_URI_MAX bytes pass, one more is refused, for each key. */
    for (size_t len = GW_MCP_URI_MAX; len <= GW_MCP_URI_MAX + 1; len++) {
        int want = len <= GW_MCP_URI_MAX ? 0 : GW_EPROTO;

        uri[len] = '\0';
        snprintf(text, GW_MCP_URI_MAX + 100,
                 "{\"resources\":[{\"uri\":\"%s\",\"name\":\"n\"}]}", uri);
        result = cJSON_Parse(text);
        assert_int_equal(
            gw_mcp_list_page_parse(GW_MCP_LIST_RESOURCES, result, items, &next),
            want);
        cJSON_Delete(result);
        snprintf(text, GW_MCP_URI_MAX + 100,
                 "{\"resourceTemplates\":[{\"uriTemplate\":\"%s\","
                 "\"name\":\"n\"}]}",
                 uri);
        result = cJSON_Parse(text);
        assert_int_equal(
            gw_mcp_list_page_parse(GW_MCP_LIST_TEMPLATES, result, items, &next),
            want);
        cJSON_Delete(result);
        snprintf(text, GW_MCP_URI_MAX + 100,
                 "{\"prompts\":[{\"name\":\"%s\"}]}", uri);
        result = cJSON_Parse(text);
        assert_int_equal(
            gw_mcp_list_page_parse(GW_MCP_LIST_PROMPTS, result, items, &next),
            want);
        cJSON_Delete(result);
        uri[len] = 'u';
    }
    assert_int_equal(cJSON_GetArraySize(items), 3);
    cJSON_Delete(items);
    free(text);
    free(uri);
}

static void test_page_args(void **state)
{
    cJSON *result = cJSON_Parse("{\"resources\":[]}");
    cJSON *items = cJSON_CreateArray();
    cJSON *obj = cJSON_CreateObject();
    const char *next;

    (void)state;
    assert_int_equal(
        gw_mcp_list_page_parse(GW_MCP_LIST_RESOURCES, result, NULL, &next),
        GW_EINVAL);
    assert_int_equal(
        gw_mcp_list_page_parse(GW_MCP_LIST_RESOURCES, result, obj, &next),
        GW_EINVAL);
    assert_int_equal(
        gw_mcp_list_page_parse(GW_MCP_LIST_RESOURCES, result, items, NULL),
        GW_EINVAL);
    assert_int_equal(
        gw_mcp_list_page_parse(GW_MCP_LIST_COUNT_, result, items, &next),
        GW_EINVAL);
    cJSON_Delete(obj);
    cJSON_Delete(items);
    cJSON_Delete(result);
}

static void test_aggregate_uri(void **state)
{
    char label[GW_MCP_LABEL_LEN + 1];
    const char *dev;
    char *uri, *s;

    (void)state;
    uri = gw_mcp_aggregate_uri(LABEL, "device://status");
    assert_non_null(uri);
    assert_string_equal(uri, "hybridgw://" LABEL "/device://status");
    assert_int_equal(gw_mcp_aggregate_uri_split(uri, label, &dev), 0);
    assert_string_equal(label, LABEL);
    assert_string_equal(dev, "device://status");
    assert_ptr_equal(dev, uri + strlen("hybridgw://" LABEL "/"));
    free(uri);

    /* The device's URI as written: slashes, queries, spaces, anything. */
    uri = gw_mcp_aggregate_uri(NOMAC, "/a b?c=d#e/hybridgw://x");
    assert_non_null(uri);
    assert_int_equal(gw_mcp_aggregate_uri_split(uri, label, &dev), 0);
    assert_string_equal(label, NOMAC);
    assert_string_equal(dev, "/a b?c=d#e/hybridgw://x");
    free(uri);

    /* Refused labels and URIs. */
    assert_null(gw_mcp_aggregate_uri(LABEL, ""));
    assert_null(gw_mcp_aggregate_uri(LABEL, NULL));
    assert_null(gw_mcp_aggregate_uri(NULL, "a"));
    assert_null(gw_mcp_aggregate_uri("A085E3F44934-1c2d3e4f5a6b7c8d", "a"));
    assert_null(gw_mcp_aggregate_uri("a085e3f44934-1c2d3e4", "a"));
    assert_null(gw_mcp_aggregate_uri(LABEL "0", "a"));
    assert_null(gw_mcp_aggregate_uri("a085e3f44934.1c2d3e4f5a6b7c8d", "a"));
    assert_null(gw_mcp_aggregate_uri("device00000x-1c2d3e4f5a6b7c8d", "a"));

    /* GW_MCP_URI_MAX: made and split back; one more neither. */
    s = long_uri(GW_MCP_URI_MAX);
    uri = gw_mcp_aggregate_uri(LABEL, s);
    assert_non_null(uri);
    assert_int_equal(gw_mcp_aggregate_uri_split(uri, label, &dev), 0);
    assert_string_equal(dev, s);
    free(uri);
    free(s);
    s = long_uri(GW_MCP_URI_MAX + 1);
    assert_null(gw_mcp_aggregate_uri(LABEL, s));
    uri = malloc(strlen(s) + sizeof("hybridgw://" LABEL "/"));
    assert_non_null(uri);
    sprintf(uri, "hybridgw://" LABEL "/%s", s);
    assert_int_equal(gw_mcp_aggregate_uri_split(uri, label, &dev), GW_EPROTO);
    free(uri);
    free(s);
}

static void test_uri_split_refusals(void **state)
{
    static const char *const bad[] = {
        "",
        "hybridgw://",
        "hybridgw://" LABEL,
        "hybridgw://" LABEL "/",
        "hybridgw://" LABEL "device://status",
        "hybridgw://" LABEL ".device://status",
        "HYBRIDGW://" LABEL "/device://status",
        "hybridgw:/" LABEL "/device://status",
        "hybridgw://" LABEL "0/device://status",
        "hybridgw://a085e3f44934-1c2d3e4/device://status",
        "hybridgw://A085E3F44934-1c2d3e4f5a6b7c8d/device://status",
        "hybridgw://a085e3f44934_1c2d3e4f5a6b7c8d/device://status",
        "device://status",
        " hybridgw://" LABEL "/x",
    };
    char label[GW_MCP_LABEL_LEN + 1];
    const char *dev;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (gw_mcp_aggregate_uri_split(bad[i], label, &dev) != GW_EPROTO) {
            fail_msg("split accepted \"%s\"", bad[i]);
        }
    }
    assert_int_equal(gw_mcp_aggregate_uri_split(NULL, label, &dev), GW_EINVAL);
    assert_int_equal(
        gw_mcp_aggregate_uri_split("hybridgw://" LABEL "/x", NULL, &dev),
        GW_EINVAL);
    assert_int_equal(
        gw_mcp_aggregate_uri_split("hybridgw://" LABEL "/x", label, NULL),
        GW_EINVAL);
}

/* Labels of real client ids: aggregate then split gives both back. */
static void test_round_trips(void **state)
{
    static const char *const ids[] = {
        "GID_test@@@a0_85_e3_f4_49_34@@@36c98363-3656-43cb-a00f-8bced2391a90",
        "GID_test@@@a0_85_e3_f4_49_34@@@00000000-0000-0000-0000-000000000000",
        "no-mac-here",
        "x",
    };
    static const char *const values[] = {
        "device://status",        "job-1", "a",          "greeting",
        "device://sensor/{name}", "x.y.z", "with space", "\xe4\xb8\xad",
    };
    char label[GW_MCP_LABEL_LEN + 1], back[GW_MCP_LABEL_LEN + 1];
    const char *rest;

    (void)state;
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        assert_int_equal(gw_mcp_device_label(ids[i], strlen(ids[i]), label), 0);
        for (size_t j = 0; j < sizeof(values) / sizeof(values[0]); j++) {
            char *uri = gw_mcp_aggregate_uri(label, values[j]);
            char *id = gw_mcp_aggregate_id(label, values[j]);

            assert_non_null(uri);
            assert_non_null(id);
            assert_int_equal(gw_mcp_aggregate_uri_split(uri, back, &rest), 0);
            assert_string_equal(back, label);
            assert_string_equal(rest, values[j]);
            assert_int_equal(gw_mcp_aggregate_id_split(id, back, &rest), 0);
            assert_string_equal(back, label);
            assert_string_equal(rest, values[j]);
            /* Neither form reads as the other. */
            assert_int_equal(gw_mcp_aggregate_uri_split(id, back, &rest),
                             GW_EPROTO);
            assert_int_equal(gw_mcp_aggregate_id_split(uri, back, &rest),
                             GW_EPROTO);
            free(uri);
            free(id);
        }
    }
}

static void test_aggregate_id(void **state)
{
    char label[GW_MCP_LABEL_LEN + 1];
    const char *id;
    char *s, *made;

    (void)state;
    made = gw_mcp_aggregate_id(LABEL, "job-7");
    assert_string_equal(made, LABEL ".job-7");
    /* A tool-name-shaped id also splits with the tools' own split. */
    assert_int_equal(gw_mcp_aggregate_split(made, label, &id), 0);
    assert_string_equal(id, "job-7");
    free(made);

    /* Any character: only the id split takes these back. */
    made = gw_mcp_aggregate_id(LABEL, "task:9 / \"q\"");
    assert_non_null(made);
    assert_int_equal(gw_mcp_aggregate_split(made, label, &id), GW_EPROTO);
    assert_int_equal(gw_mcp_aggregate_id_split(made, label, &id), 0);
    assert_string_equal(id, "task:9 / \"q\"");
    free(made);

    assert_null(gw_mcp_aggregate_id(LABEL, ""));
    assert_null(gw_mcp_aggregate_id(LABEL, NULL));
    assert_null(gw_mcp_aggregate_id(NULL, "a"));
    assert_null(gw_mcp_aggregate_id("a085e3f44934-1C2D3E4F", "a"));
    s = long_uri(GW_MCP_URI_MAX);
    made = gw_mcp_aggregate_id(LABEL, s);
    assert_non_null(made);
    assert_int_equal(gw_mcp_aggregate_id_split(made, label, &id), 0);
    assert_string_equal(id, s);
    free(made);
    free(s);
    s = long_uri(GW_MCP_URI_MAX + 1);
    assert_null(gw_mcp_aggregate_id(LABEL, s));
    made = malloc(strlen(s) + sizeof(LABEL "."));
    assert_non_null(made);
    sprintf(made, LABEL ".%s", s);
    assert_int_equal(gw_mcp_aggregate_id_split(made, label, &id), GW_EPROTO);
    free(made);
    free(s);

    assert_int_equal(gw_mcp_aggregate_id_split(LABEL ".", label, &id),
                     GW_EPROTO);
    assert_int_equal(gw_mcp_aggregate_id_split(LABEL, label, &id), GW_EPROTO);
    assert_int_equal(gw_mcp_aggregate_id_split(LABEL "/x", label, &id),
                     GW_EPROTO);
    assert_int_equal(gw_mcp_aggregate_id_split("", label, &id), GW_EPROTO);
    assert_int_equal(
        gw_mcp_aggregate_id_split("a085e3f44934-1c2d3e4.xx", label, &id),
        GW_EPROTO);
    assert_int_equal(gw_mcp_aggregate_id_split(NULL, label, &id), GW_EINVAL);
    assert_int_equal(gw_mcp_aggregate_id_split(LABEL ".x", NULL, &id),
                     GW_EINVAL);
    assert_int_equal(gw_mcp_aggregate_id_split(LABEL ".x", label, NULL),
                     GW_EINVAL);
}

static void expect_json(const cJSON *obj, const char *want)
{
    char *text = cJSON_PrintUnformatted(obj);

    assert_non_null(text);
    assert_string_equal(text, want);
    cJSON_free(text);
}

static void test_rename_members(void **state)
{
    cJSON *obj;
    char label[GW_MCP_LABEL_LEN + 1];
    const char *dev;

    (void)state;
    /* A read's contents: every uri; items without one, and non-strings,
     * as they were. */
    obj = cJSON_Parse("{\"contents\":[{\"uri\":\"device://status\","
                      "\"text\":\"{}\"},{\"text\":\"x\"},{\"uri\":7},\"s\","
                      "{\"uri\":\"device://b\",\"blob\":\"QQ==\"}]}");
    assert_int_equal(gw_mcp_rename_members(obj, "contents", "uri", LABEL), 0);
    expect_json(obj, "{\"contents\":[{\"uri\":\"hybridgw://" LABEL
                     "/device://status\",\"text\":\"{}\"},{\"text\":\"x\"},"
                     "{\"uri\":7},\"s\",{\"uri\":\"hybridgw://" LABEL
                     "/device://b\",\"blob\":\"QQ==\"}]}");
    /* The renamed uri splits back to the device's own. */
    assert_int_equal(
        gw_mcp_aggregate_uri_split(
            cJSON_GetObjectItem(
                cJSON_GetArrayItem(cJSON_GetObjectItem(obj, "contents"), 0),
                "uri")
                ->valuestring,
            label, &dev),
        0);
    assert_string_equal(dev, "device://status");
    cJSON_Delete(obj);

    /* Template URIs are URIs too; prompt names are ids. */
    obj = cJSON_Parse("{\"resourceTemplates\":[{\"uriTemplate\":"
                      "\"device://sensor/{name}\",\"name\":\"sensor\"}]}");
    assert_int_equal(
        gw_mcp_rename_members(obj, "resourceTemplates", "uriTemplate", LABEL),
        0);
    expect_json(obj,
                "{\"resourceTemplates\":[{\"uriTemplate\":\"hybridgw://" LABEL
                "/device://sensor/{name}\",\"name\":\"sensor\"}]}");
    cJSON_Delete(obj);
    obj = cJSON_Parse("{\"prompts\":[{\"name\":\"greeting\",\"arguments\":"
                      "[{\"name\":\"name\"}]}]}");
    assert_int_equal(gw_mcp_rename_members(obj, "prompts", "name", LABEL), 0);
    expect_json(obj, "{\"prompts\":[{\"name\":\"" LABEL
                     ".greeting\",\"arguments\":[{\"name\":\"name\"}]}]}");
    cJSON_Delete(obj);

    /* No array, or not an array: nothing to do. */
    obj = cJSON_Parse("{\"uri\":\"device://x\",\"contents\":{\"uri\":\"a\"}}");
    assert_int_equal(gw_mcp_rename_members(obj, "resources", "uri", LABEL), 0);
    assert_int_equal(gw_mcp_rename_members(obj, "contents", "uri", LABEL), 0);
    expect_json(obj, "{\"uri\":\"device://x\",\"contents\":{\"uri\":\"a\"}}");

    /* One object's own member (a notification's params). */
    assert_int_equal(gw_mcp_rename_member(obj, "uri", LABEL), 0);
    expect_json(obj, "{\"uri\":\"hybridgw://" LABEL
                     "/device://x\",\"contents\":{\"uri\":\"a\"}}");
    cJSON_Delete(obj);
    obj = cJSON_Parse("{\"taskId\":\"job-1\",\"status\":\"working\"}");
    assert_int_equal(gw_mcp_rename_member(obj, "taskId", LABEL), 0);
    expect_json(obj, "{\"taskId\":\"" LABEL ".job-1\",\"status\":\"working\"}");
    cJSON_Delete(obj);
}

/* A value that cannot be renamed leaves everything as it was. */
static void test_rename_all_or_nothing(void **state)
{
    static const char before[] =
        "{\"contents\":[{\"uri\":\"a\"},{\"uri\":\"b\"},{\"uri\":\"\"}]}";
    char *text, *big = long_uri(GW_MCP_URI_MAX + 1);
    cJSON *obj = cJSON_Parse(before);

    (void)state;
    assert_int_equal(gw_mcp_rename_members(obj, "contents", "uri", LABEL),
                     GW_EPROTO);
    expect_json(obj, before);
    cJSON_Delete(obj);

    obj = cJSON_Parse("{\"contents\":[{\"uri\":\"a\"}]}");
    cJSON_AddItemToObject(
        cJSON_GetArrayItem(cJSON_GetObjectItem(obj, "contents"), 0), "uri",
        cJSON_CreateString(big));
    text = cJSON_PrintUnformatted(obj);
    assert_int_equal(gw_mcp_rename_members(obj, "contents", "uri", LABEL),
                     GW_EPROTO);
    expect_json(obj, text);
    assert_int_equal(gw_mcp_rename_member(obj, "contents", LABEL), 0);
    cJSON_free(text);
    cJSON_Delete(obj);
    free(big);

    obj = cJSON_Parse("{\"uri\":\"a\"}");
    assert_int_equal(gw_mcp_rename_member(obj, "uri", "bad"), GW_EINVAL);
    assert_int_equal(gw_mcp_rename_member(obj, "uri", NULL), GW_EINVAL);
    assert_int_equal(gw_mcp_rename_member(obj, NULL, LABEL), GW_EINVAL);
    assert_int_equal(gw_mcp_rename_member(NULL, "uri", LABEL), GW_EINVAL);
    assert_int_equal(gw_mcp_rename_members(obj, NULL, "uri", LABEL), GW_EINVAL);
    assert_int_equal(gw_mcp_rename_members(NULL, "c", "uri", LABEL), GW_EINVAL);
    assert_int_equal(gw_mcp_rename_members(obj, "c", "uri", NOMAC "x"),
                     GW_EINVAL);
    expect_json(obj, "{\"uri\":\"a\"}");
    cJSON_Delete(obj);
}

struct contents_case {
    const char *result;
    int err;
    size_t total;
};

static const struct contents_case contents_cases[] = {
    {"{\"contents\":[]}", 0, 0},
    {"{\"contents\":[{\"uri\":\"device://status\",\"mimeType\":"
     "\"application/json\",\"text\":\"{\\\"volume\\\":5}\"}]}",
     0, 12},
    {"{\"contents\":[{\"uri\":\"device://snapshot.png\",\"mimeType\":"
     "\"image/png\",\"blob\":\"iVBORw==\"}]}",
     0, 8},
    {"{\"contents\":[{\"uri\":\"a\",\"text\":\"\"},{\"uri\":\"b\",\"blob\":"
     "\"\"},"
     "{\"uri\":\"c\",\"text\":\"abc\",\"annotations\":{},\"_meta\":{}}]}",
     0, 3},
    {"{\"contents\":[{\"uri\":\"a\",\"text\":\"\xe4\xb8\xad\"}]}", 0, 3},
    /* Shape. */
    {"[]", GW_EPROTO, 0},
    {"{}", GW_EPROTO, 0},
    {"{\"contents\":{}}", GW_EPROTO, 0},
    {"{\"contents\":null}", GW_EPROTO, 0},
    {"{\"contents\":[],\"contents\":[]}", GW_EPROTO, 0},
    {"{\"contents\":[\"text\"]}", GW_EPROTO, 0},
    {"{\"contents\":[null]}", GW_EPROTO, 0},
    /* uri. */
    {"{\"contents\":[{\"text\":\"x\"}]}", GW_EPROTO, 0},
    {"{\"contents\":[{\"uri\":\"\",\"text\":\"x\"}]}", GW_EPROTO, 0},
    {"{\"contents\":[{\"uri\":1,\"text\":\"x\"}]}", GW_EPROTO, 0},
    {"{\"contents\":[{\"uri\":\"a\",\"uri\":\"b\",\"text\":\"x\"}]}", GW_EPROTO,
     0},
    /* Exactly one of text and blob. */
    {"{\"contents\":[{\"uri\":\"a\"}]}", GW_EPROTO, 0},
    {"{\"contents\":[{\"uri\":\"a\",\"text\":\"x\",\"blob\":\"QQ==\"}]}",
     GW_EPROTO, 0},
    {"{\"contents\":[{\"uri\":\"a\",\"text\":\"x\",\"text\":\"y\"}]}",
     GW_EPROTO, 0},
    {"{\"contents\":[{\"uri\":\"a\",\"text\":1}]}", GW_EPROTO, 0},
    {"{\"contents\":[{\"uri\":\"a\",\"text\":null}]}", GW_EPROTO, 0},
    {"{\"contents\":[{\"uri\":\"a\",\"blob\":[]}]}", GW_EPROTO, 0},
    {"{\"contents\":[{\"uri\":\"a\",\"blob\":\"QQ\"}]}", GW_EPROTO, 0},
    {"{\"contents\":[{\"uri\":\"a\",\"blob\":\"QQ==\\n\"}]}", GW_EPROTO, 0},
    {"{\"contents\":[{\"uri\":\"a\",\"blob\":\"-_8=\"}]}", GW_EPROTO, 0},
    /* mimeType. */
    {"{\"contents\":[{\"uri\":\"a\",\"text\":\"x\",\"mimeType\":5}]}",
     GW_EPROTO, 0},
    {"{\"contents\":[{\"uri\":\"a\",\"text\":\"x\",\"mimeType\":\"a\","
     "\"mimeType\":\"b\"}]}",
     GW_EPROTO, 0},
    /* A good item does not save a bad one after it. */
    {"{\"contents\":[{\"uri\":\"a\",\"text\":\"x\"},{\"uri\":\"a\"}]}",
     GW_EPROTO, 0},
};

static void test_contents_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(contents_cases) / sizeof(contents_cases[0]);
         i++) {
        const struct contents_case *c = &contents_cases[i];
        cJSON *result = cJSON_Parse(c->result);
        char why[160];
        size_t total = 99;
        int err;

        assert_non_null(result);
        err = gw_mcp_contents_check(result, 0, &total, why, sizeof(why));
        if (err != c->err || total != c->total) {
            fail_msg("case %zu (%s): err %d total %zu, want %d %zu (%s)", i,
                     c->result, err, total, c->err, c->total, why);
        }
        if (err == GW_EPROTO) {
            assert_memory_equal(why, "device sent invalid resource contents",
                                37);
        } else {
            assert_string_equal(why, "");
        }
        cJSON_Delete(result);
    }
    assert_int_equal(gw_mcp_contents_check(NULL, 0, NULL, NULL, 0), GW_EPROTO);
}

static void test_contents_limits(void **state)
{
    cJSON *result =
        cJSON_Parse("{\"contents\":[{\"uri\":\"a\",\"text\":\"0123456789\"},"
                    "{\"uri\":\"b\",\"blob\":\"QUJD\"}]}");
    char why[200], small[12];
    size_t total = 0;
    char *uri;
    cJSON *item;

    (void)state;
    /* 10 + 4 bytes: at the limit passes, one under it is over. */
    assert_int_equal(gw_mcp_contents_check(result, 14, &total, why, 200), 0);
    assert_int_equal(total, 14);
    assert_int_equal(gw_mcp_contents_check(result, 13, &total, why, 200),
                     GW_ETOOBIG);
    assert_int_equal(total, 14);
    assert_non_null(strstr(why, "14 bytes"));
    assert_non_null(strstr(why, "limit of 13 bytes"));
    assert_int_equal(gw_mcp_contents_check(result, 0, &total, why, 200), 0);
    assert_int_equal(gw_mcp_contents_check(result, 1, NULL, NULL, 0),
                     GW_ETOOBIG);
    /* A small why is cut, still a string. */
    assert_int_equal(
        gw_mcp_contents_check(result, 1, NULL, small, sizeof(small)),
        GW_ETOOBIG);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    cJSON_Delete(result);

    /* The uri: GW_MCP_URI_MAX passes, one more does not. */
    uri = long_uri(GW_MCP_URI_MAX + 1);
    result = cJSON_Parse("{\"contents\":[{\"text\":\"t\"}]}");
    item = cJSON_GetArrayItem(cJSON_GetObjectItem(result, "contents"), 0);
    cJSON_AddItemToObject(item, "uri", cJSON_CreateString(uri));
    assert_int_equal(gw_mcp_contents_check(result, 0, NULL, why, 200),
                     GW_EPROTO);
    uri[GW_MCP_URI_MAX] = '\0';
    cJSON_ReplaceItemInObject(item, "uri", cJSON_CreateString(uri));
    assert_int_equal(gw_mcp_contents_check(result, 0, NULL, why, 200), 0);
    /* Checked contents rename. */
    assert_int_equal(gw_mcp_rename_members(result, "contents", "uri", LABEL),
                     0);
    cJSON_Delete(result);
    free(uri);
}

/* Strict padded base64 by decoding and encoding again: what is valid is
 * exactly what comes back unchanged. */
static bool model_base64(const char *s, size_t len)
{
    static const char abc[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned char bytes[64];
    char again[90];
    size_t n = 0, pad = 0, j = 0;

    if (len % 4 != 0 || len > 80) {
        return false;
    }
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        for (size_t k = 0; k < 4; k++) {
            const char *p = s[i + k] != '\0' ? strchr(abc, s[i + k]) : NULL;
            bool last = i + 4 == len;
            if (s[i + k] == '=' && last && k >= 2 &&
                (k == 3 || s[i + 3] == '=')) {
                pad++;
                v <<= 6;
                continue;
            }
            if (p == NULL || pad > 0) {
                return false;
            }
            v = v << 6 | (uint32_t)(p - abc);
        }
        bytes[n++] = (unsigned char)(v >> 16);
        bytes[n++] = (unsigned char)(v >> 8);
        bytes[n++] = (unsigned char)v;
    }
    n -= pad;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)bytes[i] << 16;
        if (i + 1 < n) {
            v |= (uint32_t)bytes[i + 1] << 8;
        }
        if (i + 2 < n) {
            v |= bytes[i + 2];
        }
        again[j++] = abc[v >> 18 & 63];
        again[j++] = abc[v >> 12 & 63];
        again[j++] = i + 1 < n ? abc[v >> 6 & 63] : '=';
        again[j++] = i + 2 < n ? abc[v & 63] : '=';
    }
    return j == len && memcmp(again, s, len) == 0;
}

static void test_base64(void **state)
{
    static const struct {
        const char *s;
        bool ok;
    } cases[] = {
        {"", true},
        {"QQ==", true},
        {"QUI=", true},
        {"QUJD", true},
        {"QUJDRA==", true},
        {"+/+/", true},
        {"iVBORw0KGgo=", true},
        {"Q", false},
        {"QQ", false},
        {"QQ=", false},
        {"QQ===", false},
        {"====", false},
        {"Q===", false},
        {"=QQQ", false},
        {"QQ=Q", false},
        {"QU JD", false},
        {"QUJD\n", false},
        {" QUJD", false},
        {"-_-_", false},
        {"QR==", false},
        {"QUJ=", false},
        {"QUJDRA=", false},
        {"QUJD====", false},
        {"QUI=QUI=", false},
        {"QQ==QUJD", false},
        {"QUJ\xc3\x84", false},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t len = strlen(cases[i].s);

        if (gw_base64_valid(cases[i].s, len) != cases[i].ok ||
            model_base64(cases[i].s, len) != cases[i].ok) {
            fail_msg("\"%s\": %d, model %d, want %d", cases[i].s,
                     gw_base64_valid(cases[i].s, len),
                     model_base64(cases[i].s, len), cases[i].ok);
        }
    }
    /* Only len bytes count; a NUL inside is not base64. */
    assert_true(gw_base64_valid("QUJDxxxx", 4));
    assert_false(gw_base64_valid("QU\0D", 4));
    assert_true(gw_base64_valid(NULL, 0));
    assert_false(gw_base64_valid(NULL, 4));

    /* Every 4- and 8-character text over a small alphabet agrees with
     * the model. */
    {
        static const char some[] = "AQgw+/=-";
        char s[9];

        for (unsigned v = 0; v < 8 * 8 * 8 * 8; v++) {
            for (unsigned k = 0, x = v; k < 4; k++, x /= 8) {
                s[k] = some[x % 8];
            }
            if (gw_base64_valid(s, 4) != model_base64(s, 4)) {
                fail_msg("\"%.4s\": %d, model %d", s, gw_base64_valid(s, 4),
                         model_base64(s, 4));
            }
            memcpy(s + 4, s, 4);
            memcpy(s, "QUJD", 4);
            if (gw_base64_valid(s, 8) != model_base64(s, 8)) {
                fail_msg("\"%.8s\": %d, model %d", s, gw_base64_valid(s, 8),
                         model_base64(s, 8));
            }
        }
    }
}

static void test_progress_token(void **state)
{
    static const struct {
        const char *json;
        bool ok;
    } cases[] = {
        {"\"abc\"", true}, {"\"\"", true},  {"0", true},    {"17", true},
        {"-3", true},      {"1e300", true}, {"1.5", false}, {"-0.25", false},
        {"true", false},   {"null", false}, {"{}", false},  {"[1]", false},
    };
    cJSON *nan;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cJSON *tok = cJSON_Parse(cases[i].json);

        assert_non_null(tok);
        if (gw_mcp_progress_token_valid(tok) != cases[i].ok) {
            fail_msg("%s: want %d", cases[i].json, cases[i].ok);
        }
        cJSON_Delete(tok);
    }
    assert_false(gw_mcp_progress_token_valid(NULL));
    nan = cJSON_CreateNumber(NAN);
    assert_false(gw_mcp_progress_token_valid(nan));
    cJSON_Delete(nan);
    nan = cJSON_CreateNumber(INFINITY);
    assert_false(gw_mcp_progress_token_valid(nan));
    cJSON_Delete(nan);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_names),
        cmocka_unit_test(test_page_table),
        cmocka_unit_test(test_page_copies),
        cmocka_unit_test(test_page_uri_max),
        cmocka_unit_test(test_page_args),
        cmocka_unit_test(test_aggregate_uri),
        cmocka_unit_test(test_uri_split_refusals),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_aggregate_id),
        cmocka_unit_test(test_rename_members),
        cmocka_unit_test(test_rename_all_or_nothing),
        cmocka_unit_test(test_contents_table),
        cmocka_unit_test(test_contents_limits),
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_progress_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
