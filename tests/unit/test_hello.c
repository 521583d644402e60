/* Hello handshake: device hello in every firmware shape, the backend hello
 * built from it, the backend's reply, and the server hello held to the
 * firmware's checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec/envelope.h"
#include "codec/hello.h"

#define AUDIO_16K                                                              \
    "\"audio_params\":{\"format\":\"opus\",\"sample_rate\":16000,"             \
    "\"channels\":1,\"frame_duration\":60}"
#define HELLO_HEAD "{\"type\":\"hello\",\"version\":3,\"transport\":\"udp\","
#define TEXT_FONT                                                              \
    "\"text_font\":{\"bundle\":\"noto-v1\",\"charset\":\"common\","            \
    "\"size\":20,\"bpp\":4}"

/* An error case: only name, text and the expected code matter. */
#define BAD(n, t, e)                                                           \
    {                                                                          \
        .name = (n), .text = (t), .err = (e)                                   \
    }

/* Envelope then device hello, as the gateway runs them, on an exact-size
 * heap copy so that ASan sees any overread. */
static int parse_device_text(const char *text, size_t len,
                             struct gw_device_hello *h)
{
    struct gw_envelope env;
    char *buf = malloc(len > 0 ? len : 1);
    int err;

    assert_non_null(buf);
    memcpy(buf, text, len);
    memset(h, 0, sizeof(*h));
    err = gw_envelope_parse(buf, len, GW_ENVELOPE_DEVICE_MAX, &env);
    free(buf);
    if (err == 0) {
        err = gw_device_hello_parse(env.root, h);
        gw_envelope_free(&env);
    }
    return err;
}

struct device_case {
    const char *name;
    const char *text;    /* the device's message */
    int err;             /* expected result */
    int32_t rate, frame; /* expected audio on success */
    int32_t channels;    /* expected channels on success */
    bool has_audio;      /* expected has_audio */
    unsigned flags;      /* expected mcp | aec << 1 | glyph_push << 2 */
    const char *backend; /* expected backend hello, NULL to skip */
};

static const struct device_case device_cases[] = {
    {"v2.4 with aec, glyph push and text_font",
     HELLO_HEAD
     "\"features\":{\"aec\":true,\"mcp\":true,\"glyph_push\":true}," TEXT_FONT
     "," AUDIO_16K "}",
     0, 16000, 60, 1, true, 7,
     "{\"type\":\"hello\",\"version\":2,\"transport\":\"websocket\","
     "\"audio_params\":{\"format\":\"opus\",\"sample_rate\":16000,"
     "\"channels\":1,\"frame_duration\":60},\"features\":{\"aec\":true,"
     "\"mcp\":true,\"glyph_push\":true}," TEXT_FONT "}"},
    {"v2.4 without aec, glyph push off",
     HELLO_HEAD "\"features\":{\"mcp\":true,\"glyph_push\":false}," AUDIO_16K
                "}",
     0, 16000, 60, 1, true, 1,
     "{\"type\":\"hello\",\"version\":2,\"transport\":\"websocket\","
     "\"audio_params\":{\"format\":\"opus\",\"sample_rate\":16000,"
     "\"channels\":1,\"frame_duration\":60},\"features\":{\"mcp\":true,"
     "\"glyph_push\":false}}"},
    {"v1.8 features mcp only",
     HELLO_HEAD "\"features\":{\"mcp\":true}," AUDIO_16K "}", 0, 16000, 60, 1,
     true, 1, NULL},
    {"v1.6.6 aec only", HELLO_HEAD "\"features\":{\"aec\":true}," AUDIO_16K "}",
     0, 16000, 60, 1, true, 2, NULL},
    {"v1.x without features", HELLO_HEAD AUDIO_16K "}", 0, 16000, 60, 1, true,
     0,
     "{\"type\":\"hello\",\"version\":2,\"transport\":\"websocket\","
     "\"audio_params\":{\"format\":\"opus\",\"sample_rate\":16000,"
     "\"channels\":1,\"frame_duration\":60}}"},
    {"v0.8 string-built with spaces",
     "{\"type\":\"hello\",\"version\": 3,\"transport\":\"udp\","
     "\"audio_params\":{\"format\":\"opus\", \"sample_rate\":16000, "
     "\"channels\":1, \"frame_duration\":60}}",
     0, 16000, 60, 1, true, 0, NULL},
    {"pretty printed",
     "{\n  \"type\": \"hello\",\n  \"version\": 3,\n  \"transport\": "
     "\"udp\",\n  \"features\": { \"mcp\": true },\n  \"audio_params\": "
     "{ \"format\": \"opus\", \"sample_rate\": 16000, \"channels\": 1, "
     "\"frame_duration\": 60 }\n}\n",
     0, 16000, 60, 1, true, 1, NULL},
    {"play_buffer_duration passes through",
     HELLO_HEAD "\"audio_params\":{\"format\":\"opus\",\"sample_rate\":"
                "16000,\"channels\":1,\"frame_duration\":60,"
                "\"play_buffer_duration\":240}}",
     0, 16000, 60, 1, true, 0,
     "{\"type\":\"hello\",\"version\":2,\"transport\":\"websocket\","
     "\"audio_params\":{\"format\":\"opus\",\"sample_rate\":16000,"
     "\"channels\":1,\"frame_duration\":60,\"play_buffer_duration\":240}}"},
    {"no audio_params: firmware defaults",
     HELLO_HEAD "\"features\":{\"mcp\":true}}", 0, 16000, 60, 1, false, 1,
     "{\"type\":\"hello\",\"version\":2,\"transport\":\"websocket\","
     "\"audio_params\":{\"format\":\"opus\",\"sample_rate\":16000,"
     "\"channels\":1,\"frame_duration\":60},\"features\":{\"mcp\":true}}"},
    {"partial audio_params",
     HELLO_HEAD "\"audio_params\":{\"sample_rate\":24000}}", 0, 24000, 60, 1,
     true, 0, NULL},
    {"stereo 48k 120 ms",
     HELLO_HEAD "\"audio_params\":{\"format\":\"opus\",\"sample_rate\":48000,"
                "\"channels\":2,\"frame_duration\":120}}",
     0, 48000, 120, 2, true, 0, NULL},
    {"empty session_id tolerated",
     "{\"session_id\":\"\",\"type\":\"hello\",\"version\":3,\"transport\":"
     "\"udp\"," AUDIO_16K "}",
     0, 16000, 60, 1, true, 0, NULL},
    {"version 1", "{\"type\":\"hello\",\"version\":1,\"transport\":\"udp\"}", 0,
     16000, 60, 1, false, 0, NULL},
    {"version 3.0 is an integer",
     "{\"type\":\"hello\",\"version\":3.0,\"transport\":\"udp\"}", 0, 16000, 60,
     1, false, 0, NULL},
    {"unknown members kept in order",
     HELLO_HEAD "\"features\":{\"mcp\":true,\"vision\":{\"x\":1}},"
                "\"zz\":[1,\"a\"]," TEXT_FONT ",\"aa\":null}",
     0, 16000, 60, 1, false, 1,
     "{\"type\":\"hello\",\"version\":2,\"transport\":\"websocket\","
     "\"audio_params\":{\"format\":\"opus\",\"sample_rate\":16000,"
     "\"channels\":1,\"frame_duration\":60},\"features\":{\"mcp\":true,"
     "\"vision\":{\"x\":1}},\"zz\":[1,\"a\"]," TEXT_FONT ",\"aa\":null}"},
    /* Wrong envelope. */
    BAD("truncated", HELLO_HEAD "\"audio_params\":{\"format\":\"op",
        GW_EMALFORMED),
    BAD("trailing garbage", HELLO_HEAD AUDIO_16K "}}", GW_EMALFORMED),
    BAD("invalid UTF-8 in text_font",
        HELLO_HEAD "\"text_font\":{\"bundle\":\"\xc3\x28\"}}", GW_EUTF8),
    BAD("array root", "[" HELLO_HEAD AUDIO_16K "}]", GW_EMALFORMED),
    BAD("missing type", "{\"version\":3,\"transport\":\"udp\"}", GW_EPROTO),
    BAD("numeric type", "{\"type\":1,\"version\":3,\"transport\":\"udp\"}",
        GW_EPROTO),
    /* Wrong hello. */
    BAD("not a hello",
        "{\"type\":\"listen\",\"version\":3,\"transport\":\"udp\"}", GW_EPROTO),
    BAD("missing transport", "{\"type\":\"hello\",\"version\":3}", GW_EPROTO),
    BAD("websocket transport",
        "{\"type\":\"hello\",\"version\":3,\"transport\":\"websocket\"}",
        GW_EPROTO),
    BAD("numeric transport",
        "{\"type\":\"hello\",\"version\":3,\"transport\":1}", GW_EPROTO),
    BAD("missing version", "{\"type\":\"hello\",\"transport\":\"udp\"}",
        GW_EPROTO),
    BAD("string version",
        "{\"type\":\"hello\",\"version\":\"3\","
        "\"transport\":\"udp\"}",
        GW_EPROTO),
    BAD("boolean version",
        "{\"type\":\"hello\",\"version\":true,"
        "\"transport\":\"udp\"}",
        GW_EPROTO),
    BAD("fractional version",
        "{\"type\":\"hello\",\"version\":2.5,"
        "\"transport\":\"udp\"}",
        GW_EPROTO),
    BAD("version 0", "{\"type\":\"hello\",\"version\":0,\"transport\":\"udp\"}",
        GW_EPROTO),
    BAD("version 4", "{\"type\":\"hello\",\"version\":4,\"transport\":\"udp\"}",
        GW_EPROTO),
    BAD("huge version",
        "{\"type\":\"hello\",\"version\":1e300,"
        "\"transport\":\"udp\"}",
        GW_EPROTO),
    BAD("repeated version",
        "{\"type\":\"hello\",\"version\":3,\"version\":9,\"transport\":"
        "\"udp\"}",
        GW_EPROTO),
    BAD("numeric session_id", HELLO_HEAD "\"session_id\":0}", GW_EPROTO),
    BAD("features array", HELLO_HEAD "\"features\":[\"mcp\"]}", GW_EPROTO),
    BAD("features.mcp string", HELLO_HEAD "\"features\":{\"mcp\":\"true\"}}",
        GW_EPROTO),
    BAD("features.aec number", HELLO_HEAD "\"features\":{\"aec\":1}}",
        GW_EPROTO),
    BAD("features.glyph_push null",
        HELLO_HEAD "\"features\":{\"glyph_push\":null}}", GW_EPROTO),
    BAD("features.mcp repeated",
        HELLO_HEAD "\"features\":{\"mcp\":true,\"mcp\":false}}", GW_EPROTO),
    BAD("audio_params string", HELLO_HEAD "\"audio_params\":\"opus\"}",
        GW_EPROTO),
    BAD("format pcm", HELLO_HEAD "\"audio_params\":{\"format\":\"pcm\"}}",
        GW_EPROTO),
    BAD("format number", HELLO_HEAD "\"audio_params\":{\"format\":1}}",
        GW_EPROTO),
    BAD("sample_rate 44100",
        HELLO_HEAD "\"audio_params\":{\"sample_rate\":44100}}", GW_EPROTO),
    BAD("sample_rate string",
        HELLO_HEAD "\"audio_params\":{\"sample_rate\":\"16000\"}}", GW_EPROTO),
    BAD("sample_rate fraction",
        HELLO_HEAD "\"audio_params\":{\"sample_rate\":16000.5}}", GW_EPROTO),
    BAD("sample_rate negative",
        HELLO_HEAD "\"audio_params\":{\"sample_rate\":-16000}}", GW_EPROTO),
    BAD("sample_rate repeated",
        HELLO_HEAD "\"audio_params\":{\"sample_rate\":16000,\"sample_rate\":"
                   "8000}}",
        GW_EPROTO),
    BAD("channels 0", HELLO_HEAD "\"audio_params\":{\"channels\":0}}",
        GW_EPROTO),
    BAD("channels 3", HELLO_HEAD "\"audio_params\":{\"channels\":3}}",
        GW_EPROTO),
    BAD("channels true", HELLO_HEAD "\"audio_params\":{\"channels\":true}}",
        GW_EPROTO),
    BAD("frame_duration 50",
        HELLO_HEAD "\"audio_params\":{\"frame_duration\":50}}", GW_EPROTO),
    BAD("frame_duration 0",
        HELLO_HEAD "\"audio_params\":{\"frame_duration\":0}}", GW_EPROTO),
    BAD("frame_duration huge",
        HELLO_HEAD "\"audio_params\":{\"frame_duration\":6e9}}", GW_EPROTO),
    BAD("frame_duration null",
        HELLO_HEAD "\"audio_params\":{\"frame_duration\":null}}", GW_EPROTO),
    BAD("text_font string", HELLO_HEAD "\"text_font\":\"noto\"}", GW_EPROTO),
    BAD("text_font repeated", HELLO_HEAD TEXT_FONT "," TEXT_FONT "}",
        GW_EPROTO),
};

static void check_backend_hello(const struct device_case *c,
                                const struct gw_device_hello *h)
{
    size_t len = 0;
    char *text = gw_backend_hello_build(h, &len);
    struct gw_envelope env;
    cJSON *features;

    assert_non_null(text);
    assert_int_equal(len, strlen(text));
    if (c->backend != NULL) {
        assert_string_equal(text, c->backend);
    }
    /* Whatever was built is a valid envelope carrying the device's
     * features unchanged. */
    assert_int_equal(gw_envelope_parse(text, len, len, &env), 0);
    assert_int_equal(env.kind, GW_MSG_HELLO);
    features = cJSON_GetObjectItemCaseSensitive(env.root, "features");
    if (h->features == NULL) {
        assert_null(features);
    } else {
        assert_true(cJSON_Compare(features, h->features, 1));
    }
    gw_envelope_free(&env);
    cJSON_free(text);
}

static void test_device_hello_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(device_cases) / sizeof(device_cases[0]);
         i++) {
        const struct device_case *c = &device_cases[i];
        struct gw_device_hello h;
        int err = parse_device_text(c->text, strlen(c->text), &h);
        unsigned flags;

        if (err != c->err) {
            fail_msg("%s: got %s, want %s", c->name, gw_err_name(err),
                     gw_err_name(c->err));
        }
        if (err != 0) {
            assert_null(h.features);
            assert_null(h.extra);
            assert_null(h.audio_extra);
            continue;
        }
        assert_string_equal(h.audio.format, "opus");
        assert_int_equal(h.audio.sample_rate, c->rate);
        assert_int_equal(h.audio.frame_duration, c->frame);
        assert_int_equal(h.audio.channels, c->channels);
        assert_int_equal(h.has_audio, c->has_audio);
        flags = h.mcp | h.aec << 1 | h.glyph_push << 2;
        if (flags != c->flags) {
            fail_msg("%s: flags %u, want %u", c->name, flags, c->flags);
        }
        check_backend_hello(c, &h);
        gw_device_hello_free(&h);
        assert_null(h.features);
        gw_device_hello_free(&h); /* idempotent */
    }
}

static void test_device_hello_args(void **state)
{
    struct gw_device_hello h;
    cJSON *arr = cJSON_CreateArray();

    (void)state;
    assert_int_equal(gw_device_hello_parse(NULL, &h), GW_EPROTO);
    assert_int_equal(gw_device_hello_parse(arr, &h), GW_EPROTO);
    assert_int_equal(gw_device_hello_parse(arr, NULL), GW_EINVAL);
    assert_null(gw_backend_hello_build(NULL, NULL));
    cJSON_Delete(arr);
}

/* A text_font so large the hello passes 8192 bytes. */
static void test_device_hello_oversized(void **state)
{
    static const char head[] = HELLO_HEAD "\"text_font\":{\"bundle\":\"";
    size_t n = GW_ENVELOPE_DEVICE_MAX + 1;
    char *buf = malloc(n);
    struct gw_device_hello h;

    (void)state;
    assert_non_null(buf);
    memcpy(buf, head, sizeof(head) - 1);
    memset(buf + sizeof(head) - 1, 'x', n - (sizeof(head) - 1) - 3);
    memcpy(buf + n - 3, "\"}}", 3);
    assert_int_equal(parse_device_text(buf, n, &h), GW_ETOOBIG);
    /* One byte less of the same shape is fine. */
    memcpy(buf + n - 4, "\"}}", 3);
    assert_int_equal(parse_device_text(buf, n - 1, &h), 0);
    assert_non_null(h.extra);
    gw_device_hello_free(&h);
    free(buf);
}

/*
 * Identity is the gateway's (docs/protocol.md section 6.2): members that
 * name what it derives from the login never reach the backend hello, in
 * any spelling, while a member the firmware may add later passes as it is.
 */
static void test_device_hello_identity_dropped(void **state)
{
    static const char text[] =
        HELLO_HEAD "\"client_id\":\"forged-uuid\",\"device_id\":\"aa:bb:cc:dd:"
                   "ee:ff\",\"Client-Id\":\"x\",\"deviceId\":\"y\",\"mac\":"
                   "\"z\",\"uuid\":\"u\",\"x-forwarded-for\":\"10.0.0.1\","
                   "\"authorization\":\"Bearer t\",\"future_field\":{\"a\":1},"
                   "\"client\":\"kept\"}";
    static const char want[] =
        "{\"type\":\"hello\",\"version\":2,\"transport\":\"websocket\","
        "\"audio_params\":{\"format\":\"opus\",\"sample_rate\":16000,"
        "\"channels\":1,\"frame_duration\":60},\"future_field\":{\"a\":1},"
        "\"client\":\"kept\"}";
    struct gw_device_hello h;
    size_t len = 0;

    (void)state;
    assert_int_equal(parse_device_text(text, sizeof(text) - 1, &h), 0);
    char *out = gw_backend_hello_build(&h, &len);
    assert_non_null(out);
    assert_string_equal(out, want);
    assert_int_equal(len, strlen(want));
    cJSON_free(out);
    gw_device_hello_free(&h);

    assert_true(gw_hello_member_reserved("CLIENT_ID"));
    assert_true(gw_hello_member_reserved("protocol-version"));
    assert_false(gw_hello_member_reserved("text_font"));
    assert_false(gw_hello_member_reserved(""));
    assert_false(gw_hello_member_reserved(
        "client_id_with_a_name_longer_than_any_reserved_one"));

    /* Only reserved extras: nothing extra is left at all. */
    static const char only[] = HELLO_HEAD "\"device_id\":1}";
    assert_int_equal(parse_device_text(only, sizeof(only) - 1, &h), 0);
    assert_null(h.extra);
    gw_device_hello_free(&h);
}

#define SID36 "c5b0e6a4-1d2b-4f0e-9a51-2f1c2d3e4f50"
#define SID128                                                                 \
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"         \
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

struct backend_case {
    const char *name;
    const char *text;    /* the backend's reply */
    int err;             /* expected result */
    const char *sid;     /* expected session_id on success */
    int32_t rate, frame; /* expected audio on success */
};

static const struct backend_case backend_cases[] = {
    {"xiaozhi server reply",
     "{\"type\":\"hello\",\"version\":1,\"transport\":\"websocket\","
     "\"audio_params\":{\"format\":\"opus\",\"sample_rate\":16000,"
     "\"channels\":1,\"frame_duration\":60},\"session_id\":\"" SID36 "\"}",
     0, SID36, 16000, 60},
    {"no audio_params: firmware defaults",
     "{\"type\":\"hello\",\"session_id\":\"s1\"}", 0, "s1", 24000, 60},
    {"partial audio_params",
     "{\"type\":\"hello\",\"session_id\":\"s1\",\"audio_params\":"
     "{\"frame_duration\":20}}",
     0, "s1", 24000, 20},
    {"other members ignored",
     "{\"type\":\"hello\",\"session_id\":\"s1\",\"version\":\"x\","
     "\"xiaozhi\":{\"a\":[1]}}",
     0, "s1", 24000, 60},
    {"longest session_id", "{\"type\":\"hello\",\"session_id\":\"" SID128 "\"}",
     0, SID128, 24000, 60},
    {"printable punctuation", "{\"type\":\"hello\",\"session_id\":\"a/b:c~\"}",
     0, "a/b:c~", 24000, 60},
    BAD("not a hello", "{\"type\":\"stt\",\"session_id\":\"s1\"}", GW_EPROTO),
    BAD("missing session_id", "{\"type\":\"hello\"}", GW_EPROTO),
    BAD("empty session_id", "{\"type\":\"hello\",\"session_id\":\"\"}",
        GW_EPROTO),
    BAD("numeric session_id", "{\"type\":\"hello\",\"session_id\":7}",
        GW_EPROTO),
    BAD("null session_id", "{\"type\":\"hello\",\"session_id\":null}",
        GW_EPROTO),
    BAD("session_id too long",
        "{\"type\":\"hello\",\"session_id\":\"" SID128 "x\"}", GW_EPROTO),
    BAD("quote in session_id", "{\"type\":\"hello\",\"session_id\":\"a\\\"b\"}",
        GW_EPROTO),
    BAD("backslash in session_id",
        "{\"type\":\"hello\",\"session_id\":\"a\\\\b\"}", GW_EPROTO),
    BAD("space in session_id", "{\"type\":\"hello\",\"session_id\":\"a b\"}",
        GW_EPROTO),
    BAD("control in session_id",
        "{\"type\":\"hello\",\"session_id\":\"a\\u0001\"}", GW_EPROTO),
    BAD("non-ASCII session_id",
        "{\"type\":\"hello\",\"session_id\":\"\xc3\xa9\"}", GW_EPROTO),
    BAD("udp transport",
        "{\"type\":\"hello\",\"session_id\":\"s\",\"transport\":\"udp\"}",
        GW_EPROTO),
    BAD("numeric transport",
        "{\"type\":\"hello\",\"session_id\":\"s\",\"transport\":2}", GW_EPROTO),
    BAD("audio_params array",
        "{\"type\":\"hello\",\"session_id\":\"s\",\"audio_params\":[]}",
        GW_EPROTO),
    BAD("sample_rate string",
        "{\"type\":\"hello\",\"session_id\":\"s\",\"audio_params\":"
        "{\"sample_rate\":\"24000\"}}",
        GW_EPROTO),
    BAD("frame_duration 7",
        "{\"type\":\"hello\",\"session_id\":\"s\",\"audio_params\":"
        "{\"frame_duration\":7}}",
        GW_EPROTO),
    BAD("channels 3",
        "{\"type\":\"hello\",\"session_id\":\"s\",\"audio_params\":"
        "{\"channels\":3}}",
        GW_EPROTO),
    BAD("format too long",
        "{\"type\":\"hello\",\"session_id\":\"s\",\"audio_params\":"
        "{\"format\":\"0123456789abcdef\"}}",
        GW_EPROTO),
    BAD("repeated session_id",
        "{\"type\":\"hello\",\"session_id\":\"a\",\"session_id\":\"b\"}",
        GW_EPROTO),
    BAD("truncated", "{\"type\":\"hello\",\"session_id\":\"s", GW_EMALFORMED),
    BAD("invalid UTF-8", "{\"type\":\"hello\",\"session_id\":\"\xe0\x80\"}",
        GW_EUTF8),
};

static int parse_backend_text(const char *text, char *sid, size_t cap,
                              struct gw_audio_params *a)
{
    struct gw_envelope env;
    int err = gw_envelope_parse(text, strlen(text), 8192, &env);

    if (err == 0) {
        err = gw_backend_hello_parse(env.root, sid, cap, a);
        gw_envelope_free(&env);
    }
    return err;
}

static void test_backend_hello_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(backend_cases) / sizeof(backend_cases[0]);
         i++) {
        const struct backend_case *c = &backend_cases[i];
        char sid[GW_SESSION_ID_MAX + 1] = "junk";
        struct gw_audio_params a = {"junk", -1, -1, -1};
        int err = parse_backend_text(c->text, sid, sizeof(sid), &a);

        if (err != c->err) {
            fail_msg("%s: got %s, want %s", c->name, gw_err_name(err),
                     gw_err_name(c->err));
        }
        if (err != 0) {
            assert_int_equal(a.sample_rate, -1); /* untouched */
            continue;
        }
        assert_string_equal(sid, c->sid);
        assert_string_equal(a.format, "opus");
        assert_int_equal(a.sample_rate, c->rate);
        assert_int_equal(a.frame_duration, c->frame);
        assert_int_equal(a.channels, 1);
    }
}

static void test_backend_hello_capacity(void **state)
{
    static const char msg[] = "{\"type\":\"hello\",\"session_id\":\"abcd\"}";
    char sid[8];
    struct gw_audio_params a;

    (void)state;
    assert_int_equal(parse_backend_text(msg, sid, 4, &a), GW_ENOSPC);
    assert_int_equal(parse_backend_text(msg, sid, 5, &a), 0);
    assert_string_equal(sid, "abcd");
    assert_int_equal(parse_backend_text(msg, sid, 0, &a), GW_EINVAL);
    assert_int_equal(parse_backend_text(msg, NULL, 5, &a), GW_EINVAL);
    assert_int_equal(parse_backend_text(msg, sid, 5, NULL), GW_EINVAL);
}

static const uint8_t test_key[16] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55,
                                     0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb,
                                     0xcc, 0xdd, 0xee, 0xff};
static const uint8_t test_nonce[16] = {0x01, 0, 0, 0, 0x12, 0x34, 0x56, 0x78};
#define AUDIO_24K                                                              \
    {                                                                          \
        "opus", 24000, 1, 60                                                   \
    }
static const struct gw_audio_params test_audio = AUDIO_24K;

static void test_server_hello_exact(void **state)
{
    static const char want[] =
        "{\"type\":\"hello\",\"transport\":\"udp\",\"session_id\":\"" SID36
        "\",\"audio_params\":{\"format\":\"opus\",\"sample_rate\":24000,"
        "\"channels\":1,\"frame_duration\":60},\"udp\":{\"server\":"
        "\"gw.example.org\",\"port\":8884,\"encryption\":\"aes-128-ctr\","
        "\"key\":\"00112233445566778899aabbccddeeff\",\"nonce\":"
        "\"01000000123456780000000000000000\"}}";
    char out[512];
    size_t len = 0;

    (void)state;
    assert_int_equal(gw_server_hello_build(SID36, &test_audio, "gw.example.org",
                                           8884, test_key, test_nonce, out,
                                           sizeof(out), &len),
                     0);
    assert_string_equal(out, want);
    assert_int_equal(len, sizeof(want) - 1);
}

struct roundtrip_case {
    const char *name;
    const char *sid;  /* session_id given to the builder */
    const char *host; /* udp.server */
    uint16_t port;
    struct gw_audio_params audio;
};

static const struct roundtrip_case roundtrip_cases[] = {
    {"typical", SID36, "127.0.0.1", 8884, {"opus", 24000, 1, 60}},
    {"empty id, port 1", "", "h", 1, {"opus", 16000, 2, 20}},
    {"port 65535", "x", "10.0.0.1", 65535, {"opus", 48000, 1, 120}},
    {"quote and backslash escaped", "a\"b\\c", "h\"o\\st", 9, AUDIO_24K},
    {"control characters escaped", "\x01\n\x1f", "host", 9, AUDIO_24K},
    {"longest id", SID128, "host", 9, AUDIO_24K},
    {"UTF-8 host", "s", "\xe4\xbd\xa0.example", 9, AUDIO_24K},
};

static void test_server_hello_roundtrip(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(roundtrip_cases) / sizeof(roundtrip_cases[0]);
         i++) {
        const struct roundtrip_case *c = &roundtrip_cases[i];
        char out[1024];
        size_t len;
        struct gw_envelope env;
        struct gw_server_hello sh;
        int err =
            gw_server_hello_build(c->sid, &c->audio, c->host, c->port, test_key,
                                  test_nonce, out, sizeof(out), &len);
        if (err != 0) {
            fail_msg("%s: build %s", c->name, gw_err_name(err));
        }
        assert_int_equal(gw_envelope_parse(out, len, 8192, &env), 0);
        assert_int_equal(env.kind, GW_MSG_HELLO);
        assert_int_equal(gw_server_hello_parse(env.root, &sh), 0);
        assert_true(sh.has_session_id);
        assert_string_equal(sh.session_id, c->sid);
        assert_string_equal(sh.server, c->host);
        assert_int_equal(sh.port, c->port);
        assert_memory_equal(sh.key, test_key, 16);
        assert_memory_equal(sh.nonce, test_nonce, 16);
        assert_int_equal(sh.sample_rate, c->audio.sample_rate);
        assert_int_equal(sh.frame_duration, c->audio.frame_duration);
        gw_envelope_free(&env);
    }
}

static void test_server_hello_build_refusals(void **state)
{
    char long_host[GW_HELLO_HOST_MAX + 2] = {0};
    char long_sid[GW_SESSION_ID_MAX + 2] = {0};
    const struct gw_audio_params a = test_audio;
    struct gw_audio_params bad_rate = a, bad_ch = a, bad_frame = a;
    const struct {
        const char *name;
        const char *sid, *host;
        uint16_t port;
        const struct gw_audio_params *audio;
        const uint8_t *key, *nonce;
        int err;
    } cases[] = {
        {"port 0", "s", "h", 0, &a, test_key, test_nonce, GW_EINVAL},
        {"empty host", "s", "", 1, &a, test_key, test_nonce, GW_EINVAL},
        {"NULL host", "s", NULL, 1, &a, test_key, test_nonce, GW_EINVAL},
        {"host too long", "s", long_host, 1, &a, test_key, test_nonce,
         GW_EINVAL},
        {"NULL session_id", NULL, "h", 1, &a, test_key, test_nonce, GW_EINVAL},
        {"session_id too long", long_sid, "h", 1, &a, test_key, test_nonce,
         GW_EINVAL},
        {"NULL audio", "s", "h", 1, NULL, test_key, test_nonce, GW_EINVAL},
        {"NULL key", "s", "h", 1, &a, NULL, test_nonce, GW_EINVAL},
        {"NULL nonce", "s", "h", 1, &a, test_key, NULL, GW_EINVAL},
        {"sample_rate 44100", "s", "h", 1, &bad_rate, test_key, test_nonce,
         GW_EINVAL},
        {"channels 0", "s", "h", 1, &bad_ch, test_key, test_nonce, GW_EINVAL},
        {"frame_duration 50", "s", "h", 1, &bad_frame, test_key, test_nonce,
         GW_EINVAL},
        {"invalid UTF-8 id", "\xff", "h", 1, &a, test_key, test_nonce,
         GW_EUTF8},
        {"invalid UTF-8 host", "s", "\xc3", 1, &a, test_key, test_nonce,
         GW_EUTF8},
    };

    (void)state;
    memset(long_host, 'h', GW_HELLO_HOST_MAX + 1);
    memset(long_sid, 's', GW_SESSION_ID_MAX + 1);
    bad_rate.sample_rate = 44100;
    bad_ch.channels = 0;
    bad_frame.frame_duration = 50;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[1024];
        size_t len = 0;
        int err;

        memset(out, 'x', sizeof(out));
        err = gw_server_hello_build(cases[i].sid, cases[i].audio, cases[i].host,
                                    cases[i].port, cases[i].key, cases[i].nonce,
                                    out, sizeof(out), &len);
        if (err != cases[i].err) {
            fail_msg("%s: got %s", cases[i].name, gw_err_name(err));
        }
        assert_int_equal(out[0], '\0'); /* never a partial hello */
    }
}

/* Every buffer short of the whole hello gives "" and GW_ENOSPC. */
static void test_server_hello_capacity(void **state)
{
    char full[512], out[512];
    size_t need, len;

    (void)state;
    assert_int_equal(gw_server_hello_build("a\"b", &test_audio, "host", 8884,
                                           test_key, test_nonce, full,
                                           sizeof(full), &need),
                     0);
    for (size_t cap = 1; cap <= need; cap++) {
        memset(out, 'x', sizeof(out));
        assert_int_equal(gw_server_hello_build("a\"b", &test_audio, "host",
                                               8884, test_key, test_nonce, out,
                                               cap, &len),
                         GW_ENOSPC);
        assert_int_equal(out[0], '\0');
    }
    assert_int_equal(gw_server_hello_build("a\"b", &test_audio, "host", 8884,
                                           test_key, test_nonce, out, need + 1,
                                           &len),
                     0);
    assert_string_equal(out, full);
    assert_int_equal(gw_server_hello_build("s", &test_audio, "h", 1, test_key,
                                           test_nonce, NULL, 0, &len),
                     GW_ENOSPC);
}

#define KEY_OK   "\"key\":\"00112233445566778899aabbccddeeff\""
#define NONCE_OK "\"nonce\":\"01000000123456780000000000000000\""
#define UDP_OK                                                                 \
    "\"udp\":{\"server\":\"1.2.3.4\",\"port\":8884,\"encryption\":"            \
    "\"aes-128-ctr\"," KEY_OK "," NONCE_OK "}"
#define SH_HEAD "{\"type\":\"hello\",\"transport\":\"udp\","
/* A server hello whose udp object holds exactly the members m. */
#define SH_UDP(m) SH_HEAD "\"udp\":{" m "}}"
/* udp members with key and nonce replaced. */
#define KEY_IS(k)    "\"server\":\"h\",\"port\":1,\"key\":" k "," NONCE_OK
#define NONCE_IS(n)  "\"server\":\"h\",\"port\":1," KEY_OK ",\"nonce\":" n
#define PORT_IS(p)   "\"server\":\"h\",\"port\":" p "," KEY_OK "," NONCE_OK
#define SERVER_IS(s) "\"server\":" s ",\"port\":1," KEY_OK "," NONCE_OK

struct server_case {
    const char *name;
    const char *text;    /* a server hello */
    int err;             /* expected result */
    const char *sid;     /* expected session_id on success ("" if absent) */
    int32_t rate, frame; /* expected downlink audio on success */
};

static const struct server_case server_cases[] = {
    {"Node gateway shape",
     "{\"type\":\"hello\",\"version\":3,\"session_id\":\"s1\",\"transport\":"
     "\"udp\"," UDP_OK ",\"audio_params\":{\"format\":\"opus\","
     "\"sample_rate\":16000,\"channels\":1,\"frame_duration\":60}}",
     0, "s1", 16000, 60},
    {"no session_id, no audio_params", SH_HEAD UDP_OK "}", 0, "", 24000, 60},
    {"encryption ignored", SH_UDP(PORT_IS("1") ",\"encryption\":7"), 0, "",
     24000, 60},
    {"no encryption, port 65535", SH_UDP(PORT_IS("65535")), 0, "", 24000, 60},
    {"upper-case hex", SH_UDP(KEY_IS("\"00112233445566778899AABBCCDDEEFF\"")),
     0, "", 24000, 60},
    {"only frame_duration",
     SH_HEAD UDP_OK ",\"audio_params\":{\"frame_duration\":20}}", 0, "", 24000,
     20},
    {"format and channels ignored",
     SH_HEAD UDP_OK ",\"audio_params\":{\"format\":1,\"channels\":\"x\"}}", 0,
     "", 24000, 60},
    BAD("not a hello",
        "{\"type\":\"goodbye\",\"transport\":\"udp\"," UDP_OK "}", GW_EPROTO),
    BAD("missing transport", "{\"type\":\"hello\"," UDP_OK "}", GW_EPROTO),
    BAD("websocket transport",
        "{\"type\":\"hello\",\"transport\":\"websocket\"," UDP_OK "}",
        GW_EPROTO),
    BAD("numeric transport", "{\"type\":\"hello\",\"transport\":1," UDP_OK "}",
        GW_EPROTO),
    BAD("missing udp", SH_HEAD "\"session_id\":\"s\"}", GW_EPROTO),
    BAD("udp string", SH_HEAD "\"udp\":\"1.2.3.4:8884\"}", GW_EPROTO),
    BAD("missing server", SH_UDP("\"port\":1," KEY_OK "," NONCE_OK), GW_EPROTO),
    BAD("numeric server", SH_UDP(SERVER_IS("1234")), GW_EPROTO),
    BAD("empty server", SH_UDP(SERVER_IS("\"\"")), GW_EPROTO),
    BAD("missing port", SH_UDP("\"server\":\"h\"," KEY_OK "," NONCE_OK),
        GW_EPROTO),
    BAD("port 0", SH_UDP(PORT_IS("0")), GW_EPROTO),
    BAD("port 65536", SH_UDP(PORT_IS("65536")), GW_EPROTO),
    BAD("port -1", SH_UDP(PORT_IS("-1")), GW_EPROTO),
    BAD("port string", SH_UDP(PORT_IS("\"8884\"")), GW_EPROTO),
    BAD("port fraction", SH_UDP(PORT_IS("8884.5")), GW_EPROTO),
    BAD("missing key", SH_UDP("\"server\":\"h\",\"port\":1," NONCE_OK),
        GW_EPROTO),
    BAD("key 15 bytes", SH_UDP(KEY_IS("\"00112233445566778899aabbccddee\"")),
        GW_EPROTO),
    BAD("key 17 bytes",
        SH_UDP(KEY_IS("\"00112233445566778899aabbccddeeff00\"")), GW_EPROTO),
    BAD("key odd length", SH_UDP(KEY_IS("\"00112233445566778899aabbccddeef\"")),
        GW_EPROTO),
    BAD("key bad hex", SH_UDP(KEY_IS("\"0011223344556677889gaabbccddeeff\"")),
        GW_EPROTO),
    BAD("key number", SH_UDP(KEY_IS("1")), GW_EPROTO),
    BAD("nonce 8 bytes", SH_UDP(NONCE_IS("\"0100000012345678\"")), GW_EPROTO),
    BAD("nonce with spaces",
        SH_UDP(NONCE_IS("\"01 00 00 00 12 34 56 78 00 00 00 00 00 00 00\"")),
        GW_EPROTO),
    BAD("nonce empty", SH_UDP(NONCE_IS("\"\"")), GW_EPROTO),
    BAD("nonce null", SH_UDP(NONCE_IS("null")), GW_EPROTO),
    BAD("numeric session_id", SH_HEAD "\"session_id\":1," UDP_OK "}",
        GW_EPROTO),
    BAD("session_id too long",
        SH_HEAD "\"session_id\":\"" SID128 "x\"," UDP_OK "}", GW_EPROTO),
    BAD("sample_rate string",
        SH_HEAD UDP_OK ",\"audio_params\":{\"sample_rate\":\"24000\"}}",
        GW_EPROTO),
    BAD("frame_duration 7",
        SH_HEAD UDP_OK ",\"audio_params\":{\"frame_duration\":7}}", GW_EPROTO),
    BAD("repeated udp", SH_HEAD UDP_OK "," UDP_OK "}", GW_EPROTO),
};

static void test_server_hello_parse_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(server_cases) / sizeof(server_cases[0]);
         i++) {
        const struct server_case *c = &server_cases[i];
        struct gw_envelope env;
        struct gw_server_hello sh;
        int err = gw_envelope_parse(c->text, strlen(c->text), 8192, &env);

        if (err == 0) {
            err = gw_server_hello_parse(env.root, &sh);
            gw_envelope_free(&env);
        }
        if (err != c->err) {
            fail_msg("%s: got %s, want %s", c->name, gw_err_name(err),
                     gw_err_name(c->err));
        }
        if (err != 0) {
            continue;
        }
        assert_string_equal(sh.session_id, c->sid);
        assert_int_equal(sh.has_session_id, c->sid[0] != '\0');
        assert_memory_equal(sh.key, test_key, 16);
        assert_int_equal(sh.nonce[0], 0x01);
        assert_int_equal(sh.sample_rate, c->rate);
        assert_int_equal(sh.frame_duration, c->frame);
    }
    assert_int_equal(gw_server_hello_parse(NULL, NULL), GW_EINVAL);
}

/* The path the gateway runs: device hello -> backend hello -> backend
 * reply -> server hello -> what the device accepts. */
static void test_handshake_chain(void **state)
{
    static const char device[] =
        HELLO_HEAD "\"features\":{\"mcp\":true}," AUDIO_16K "}";
    static const char reply[] =
        "{\"type\":\"hello\",\"transport\":\"websocket\",\"session_id\":"
        "\"" SID36 "\",\"audio_params\":{\"sample_rate\":24000,"
        "\"frame_duration\":60}}";
    struct gw_device_hello h;
    struct gw_audio_params a;
    struct gw_envelope env;
    struct gw_server_hello sh;
    char sid[GW_SESSION_ID_MAX + 1], out[1024];
    size_t len;
    char *backend;

    (void)state;
    assert_int_equal(parse_device_text(device, sizeof(device) - 1, &h), 0);
    backend = gw_backend_hello_build(&h, &len);
    assert_non_null(backend);
    assert_non_null(strstr(backend, "\"transport\":\"websocket\""));
    cJSON_free(backend);
    gw_device_hello_free(&h);
    assert_int_equal(parse_backend_text(reply, sid, sizeof(sid), &a), 0);
    assert_int_equal(gw_server_hello_build(sid, &a, "127.0.0.1", 8884, test_key,
                                           test_nonce, out, sizeof(out), &len),
                     0);
    assert_int_equal(gw_envelope_parse(out, len, GW_ENVELOPE_DEVICE_MAX, &env),
                     0);
    assert_int_equal(gw_server_hello_parse(env.root, &sh), 0);
    assert_string_equal(sh.session_id, SID36);
    assert_int_equal(sh.sample_rate, 24000);
    gw_envelope_free(&env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_hello_table),
        cmocka_unit_test(test_device_hello_args),
        cmocka_unit_test(test_device_hello_oversized),
        cmocka_unit_test(test_device_hello_identity_dropped),
        cmocka_unit_test(test_backend_hello_table),
        cmocka_unit_test(test_backend_hello_capacity),
        cmocka_unit_test(test_server_hello_exact),
        cmocka_unit_test(test_server_hello_roundtrip),
        cmocka_unit_test(test_server_hello_build_refusals),
        cmocka_unit_test(test_server_hello_capacity),
        cmocka_unit_test(test_server_hello_parse_table),
        cmocka_unit_test(test_handshake_chain),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
