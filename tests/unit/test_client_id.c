/* MQTT client ids: the three parts, the legacy form and the topic rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec/client_id.h"

#define MAC    "a0_85_e3_f4_49_34"
#define MAC_LC "a0:85:e3:f4:49:34"
#define UUID   "36c98363-3656-43cb-a00f-8bced2391a90"

/* A string literal with its length, NULs included. */
#define S(lit) lit, sizeof(lit) - 1

struct parse_case {
    const char *name;
    const char *id;
    size_t len;
    int err;
    const char *group; /* expected parts when err == 0 */
    const char *mac;
    const char *uuid; /* NULL for a legacy id */
};

static const struct parse_case parse_cases[] = {
    {"firmware id", S("GID_test@@@" MAC "@@@" UUID), 0, "GID_test", MAC_LC,
     UUID},
    {"upper-case MAC", S("GID_test@@@A0_85_E3_F4_49_3B@@@u"), 0, "GID_test",
     "a0:85:e3:f4:49:3b", "u"},
    {"mixed-case MAC", S("g@@@aB_cD_eF_01_23_45@@@u"), 0, "g",
     "ab:cd:ef:01:23:45", "u"},
    {"legacy two parts", S("GID_test@@@" MAC), 0, "GID_test", MAC_LC, NULL},
    {"manager-api MAC as uuid", S("GID_default@@@" MAC "@@@" MAC), 0,
     "GID_default", MAC_LC, MAC},
    {"board type group", S("lichuang-dev@@@" MAC "@@@" UUID), 0, "lichuang-dev",
     MAC_LC, UUID},
    {"single @ in group", S("a@b@@@" MAC "@@@u"), 0, "a@b", MAC_LC, "u"},
    {"@@ in uuid", S("g@@@" MAC "@@@u@@v"), 0, "g", MAC_LC, "u@@v"},
    {"trailing @ in uuid", S("g@@@" MAC "@@@u@"), 0, "g", MAC_LC, "u@"},
    {"utf-8 group", S("\xe7\xbb\x84@@@" MAC "@@@u"), 0, "\xe7\xbb\x84", MAC_LC,
     "u"},
    {"spaces and colons", S("my group@@@" MAC "@@@a:b c"), 0, "my group",
     MAC_LC, "a:b c"},
    {"empty", S(""), GW_EMALFORMED, NULL, NULL, NULL},
    {"one part", S("GID_test"), GW_EMALFORMED, NULL, NULL, NULL},
    {"four parts", S("g@@@" MAC "@@@u@@@x"), GW_EMALFORMED, NULL, NULL, NULL},
    {"empty group", S("@@@" MAC "@@@u"), GW_EMALFORMED, NULL, NULL, NULL},
    {"empty uuid", S("g@@@" MAC "@@@"), GW_EMALFORMED, NULL, NULL, NULL},
    {"empty MAC", S("g@@@@@@u"), GW_EMALFORMED, NULL, NULL, NULL},
    {"only separators", S("@@@@@@"), GW_EMALFORMED, NULL, NULL, NULL},
    {"four @", S("g@@@@" MAC "@@@u"), GW_EMALFORMED, NULL, NULL, NULL},
    {"MAC with colons", S("g@@@a0:85:e3:f4:49:34@@@u"), GW_EMALFORMED, NULL,
     NULL, NULL},
    {"MAC with dashes", S("g@@@a0-85-e3-f4-49-34@@@u"), GW_EMALFORMED, NULL,
     NULL, NULL},
    {"MAC five pairs", S("g@@@a0_85_e3_f4_49@@@u"), GW_EMALFORMED, NULL, NULL,
     NULL},
    {"MAC seven pairs", S("g@@@a0_85_e3_f4_49_34_00@@@u"), GW_EMALFORMED, NULL,
     NULL, NULL},
    {"MAC bad hex", S("g@@@a0_85_e3_f4_49_3g@@@u"), GW_EMALFORMED, NULL, NULL,
     NULL},
    {"MAC trailing _", S("g@@@a0_85_e3_f4_49_34_@@@u"), GW_EMALFORMED, NULL,
     NULL, NULL},
    {"MAC no separators", S("g@@@a085e3f449340000@@@u"), GW_EMALFORMED, NULL,
     NULL, NULL},
    {"legacy bad MAC", S("g@@@xx_85_e3_f4_49_34"), GW_EMALFORMED, NULL, NULL,
     NULL},
    {"slash in group", S("a/b@@@" MAC "@@@u"), GW_EPROTO, NULL, NULL, NULL},
    {"plus in uuid", S("g@@@" MAC "@@@u+"), GW_EPROTO, NULL, NULL, NULL},
    {"hash in uuid", S("g@@@" MAC "@@@#"), GW_EPROTO, NULL, NULL, NULL},
    {"NUL inside", S("g\0h@@@" MAC "@@@u"), GW_EPROTO, NULL, NULL, NULL},
    {"NUL at end", S("g@@@" MAC "@@@u\0"), GW_EPROTO, NULL, NULL, NULL},
    {"newline", S("g\n@@@" MAC "@@@u"), GW_EPROTO, NULL, NULL, NULL},
    {"DEL", S("g@@@" MAC "@@@u\x7f"), GW_EPROTO, NULL, NULL, NULL},
    {"C1 control U+0085", S("g\xc2\x85@@@" MAC "@@@u"), GW_EPROTO, NULL, NULL,
     NULL},
    {"non-character U+FFFE", S("g@@@" MAC "@@@\xef\xbf\xbe"), GW_EPROTO, NULL,
     NULL, NULL},
    {"non-character U+FDD0", S("g\xef\xb7\x90@@@" MAC "@@@u"), GW_EPROTO, NULL,
     NULL, NULL},
    {"slash and wrong shape", S("a/b"), GW_EPROTO, NULL, NULL, NULL},
    {"invalid byte 0xff", S("g\xff@@@" MAC "@@@u"), GW_EUTF8, NULL, NULL, NULL},
    {"overlong '/'", S("g\xc0\xaf@@@" MAC "@@@u"), GW_EUTF8, NULL, NULL, NULL},
    {"surrogate", S("g\xed\xa0\x80@@@" MAC "@@@u"), GW_EUTF8, NULL, NULL, NULL},
    {"cut sequence at end", S("g@@@" MAC "@@@u\xe7\xbb"), GW_EUTF8, NULL, NULL,
     NULL},
    {"lone continuation", S("\x80@@@" MAC "@@@u"), GW_EUTF8, NULL, NULL, NULL},
    {"bad UTF-8 beats '/'", S("/\xff"), GW_EUTF8, NULL, NULL, NULL},
};

static void check_parts(const struct parse_case *c, const char *buf,
                        const struct gw_client_id *id)
{
    size_t glen = strlen(c->group);

    assert_int_equal(id->group_len, glen);
    assert_memory_equal(id->group, c->group, glen);
    assert_ptr_equal(id->group, buf); /* pointers into the input */
    assert_ptr_equal(id->mac_part, buf + glen + 3);
    assert_string_equal(id->mac, c->mac);
    if (c->uuid == NULL) {
        assert_null(id->uuid);
        assert_int_equal(id->uuid_len, 0);
    } else {
        assert_int_equal(id->uuid_len, strlen(c->uuid));
        assert_memory_equal(id->uuid, c->uuid, id->uuid_len);
        assert_ptr_equal(id->uuid + id->uuid_len, buf + c->len);
    }
}

static void test_parse_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(parse_cases) / sizeof(parse_cases[0]); i++) {
        const struct parse_case *c = &parse_cases[i];
        /* Exact size, no NUL: ASan catches any read past len. */
        char *buf = malloc(c->len > 0 ? c->len : 1);
        struct gw_client_id id;
        int err;

        assert_non_null(buf);
        memcpy(buf, c->id, c->len);
        memset(&id, 0x33, sizeof(id));
        err = gw_client_id_parse(buf, c->len, &id);
        if (err != c->err) {
            print_message("case: %s\n", c->name);
        }
        assert_int_equal(err, c->err);
        if (err == 0) {
            check_parts(c, buf, &id);
            assert_true(gw_client_id_topic_safe(buf, c->len));
        } else {
            assert_int_equal(id.group_len, (size_t)0x3333333333333333ull);
            assert_int_equal(id.mac[0], 0x33);
        }
        /* The topic rules alone agree on what they cover. */
        if (err == GW_EPROTO || err == GW_EUTF8) {
            assert_false(gw_client_id_topic_safe(buf, c->len));
        }
        free(buf);
    }
}

static void test_parse_lengths(void **state)
{
    char buf[GW_CLIENT_ID_MAX + 1];
    struct gw_client_id id;
    size_t head = strlen("@@@" MAC "@@@u");

    (void)state;
    /* A group that makes the id exactly GW_CLIENT_ID_MAX bytes long. */
    memset(buf, 'g', sizeof(buf));
    memcpy(buf + GW_CLIENT_ID_MAX - head, "@@@" MAC "@@@u", head);
    assert_int_equal(gw_client_id_parse(buf, GW_CLIENT_ID_MAX, &id), 0);
    assert_int_equal(id.group_len, GW_CLIENT_ID_MAX - head);

    /* One byte longer. */
    memset(buf, 'g', sizeof(buf));
    memcpy(buf + GW_CLIENT_ID_MAX + 1 - head, "@@@" MAC "@@@u", head);
    assert_int_equal(gw_client_id_parse(buf, sizeof(buf), &id), GW_ETOOBIG);

    /* Length is checked before content: even garbage is "too big". */
    memset(buf, 0xff, sizeof(buf));
    assert_int_equal(gw_client_id_parse(buf, sizeof(buf), &id), GW_ETOOBIG);

    assert_int_equal(gw_client_id_parse(NULL, 5, &id), GW_EINVAL);
    assert_int_equal(gw_client_id_parse("g@@@" MAC, 4 + 17, NULL), GW_EINVAL);
}

/* Parsing stops at len even when the buffer goes on. */
static void test_parse_prefix(void **state)
{
    static const char id[] = "g@@@" MAC "@@@uuid/trailing";
    struct gw_client_id out;

    (void)state;
    assert_int_equal(gw_client_id_parse(id, strlen("g@@@" MAC "@@@uuid"), &out),
                     0);
    assert_int_equal(out.uuid_len, 4);
    assert_int_equal(gw_client_id_parse(id, strlen(id), &out), GW_EPROTO);
}

struct safe_case {
    const char *name;
    const char *text;
    size_t len;
    bool safe;
};

static const struct safe_case safe_cases[] = {
    {"gateway id", S("hybridgw-gw-1"), true},
    {"device id", S("GID_test@@@" MAC "@@@" UUID), true},
    {"single char", S("x"), true},
    {"U+00A0", S("\xc2\xa0"), true},
    {"U+10FFFD", S("\xf4\x8f\xbf\xbd"), true},
    {"emoji", S("\xf0\x9f\x98\x80"), true},
    {"U+FDEF + 1", S("\xef\xb7\xb0"), true},
    {"space and $", S("$SYS thing"), true},
    {"empty", S(""), false},
    {"slash", S("a/b"), false},
    {"plus", S("+"), false},
    {"hash", S("a#"), false},
    {"NUL", S("\0"), false},
    {"tab", S("a\tb"), false},
    {"U+001F", S("\x1f"), false},
    {"DEL", S("\x7f"), false},
    {"U+0080", S("\xc2\x80"), false},
    {"U+009F", S("\xc2\x9f"), false},
    {"U+FDD0", S("\xef\xb7\x90"), false},
    {"U+FDEF", S("\xef\xb7\xaf"), false},
    {"U+FFFF", S("\xef\xbf\xbf"), false},
    {"U+1FFFE", S("\xf0\x9f\xbf\xbe"), false},
    {"U+10FFFF", S("\xf4\x8f\xbf\xbf"), false},
    {"invalid", S("\xc3\x28"), false},
    {"cut", S("ab\xe2\x82"), false},
};

static void test_topic_safe_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(safe_cases) / sizeof(safe_cases[0]); i++) {
        const struct safe_case *c = &safe_cases[i];
        char *buf = malloc(c->len > 0 ? c->len : 1);

        assert_non_null(buf);
        memcpy(buf, c->text, c->len);
        if (gw_client_id_topic_safe(buf, c->len) != c->safe) {
            print_message("case: %s\n", c->name);
        }
        assert_int_equal(gw_client_id_topic_safe(buf, c->len), c->safe);
        free(buf);
    }
}

static void test_topic_safe_lengths(void **state)
{
    char *buf = malloc(65536);

    (void)state;
    assert_non_null(buf);
    memset(buf, 'a', 65536);
    assert_true(gw_client_id_topic_safe(buf, 65535));
    assert_false(gw_client_id_topic_safe(buf, 65536));
    assert_false(gw_client_id_topic_safe(NULL, 1));
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_table),
        cmocka_unit_test(test_parse_lengths),
        cmocka_unit_test(test_parse_prefix),
        cmocka_unit_test(test_topic_safe_table),
        cmocka_unit_test(test_topic_safe_lengths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
