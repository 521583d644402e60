/*
 * What a simulated device does in a call between devices (--call): it is
 * woken by the gateway's self.remote_wakeup tool call (the firmware of the
 * call-capable builds opens the audio channel and listens), takes
 * call_accepted, sends numbered frames whose bytes the other side can
 * rebuild, and checks every frame a call brings it: the other side's
 * frames bit for bit and in order, the gateway's keepalive as silence.
 */
#include "tools/sim_device_int.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"

/* A numbered frame: TOC of one 60 ms SILK wideband mono frame (what the
 * firmware's encoder makes), a mark, the sender's tag, its number, then
 * bytes derived from both. Well-formed Opus as far as any check looks. */
#define CALL_TOC     0x58
#define CALL_MARK    "CALL"
#define CALL_LEN     40
#define CALL_NUM_OFF 6
/* Decoded peak at or below this is silence. */
#define SILENCE_PEAK 16
#define DEC_RATE     16000
#define DEC_SAMPLES  (DEC_RATE * 120 / 1000)

struct gw_sim_call {
    uint8_t tag; /* this device's mark in its frames */
    uint32_t tx; /* number of the last frame sent */
    uint8_t frame[CALL_LEN];
    bool rx_any;      /* a numbered frame was received */
    OpusDecoder *dec; /* keepalive check, made on first use */
    int16_t pcm[DEC_SAMPLES];
};

/* The frame number n of the device tagged tag. */
static void build_frame(uint8_t tag, uint32_t n, uint8_t out[CALL_LEN])
{
    out[0] = CALL_TOC;
    memcpy(out + 1, CALL_MARK, 4);
    out[5] = tag;
    out[CALL_NUM_OFF] = (uint8_t)(n >> 24);
    out[CALL_NUM_OFF + 1] = (uint8_t)(n >> 16);
    out[CALL_NUM_OFF + 2] = (uint8_t)(n >> 8);
    out[CALL_NUM_OFF + 3] = (uint8_t)n;
    for (size_t i = CALL_NUM_OFF + 4; i < CALL_LEN; i++) {
        out[i] = (uint8_t)(n * 31u + i * 17u + tag);
    }
}

static struct gw_sim_call *state_of(struct gw_sim_device *d)
{
    if (d->call == NULL && (d->call = calloc(1, sizeof(*d->call))) != NULL) {
        uint8_t tag = 0;
        for (const char *p = d->client_id; *p != '\0'; p++) {
            tag = (uint8_t)(tag * 33u + (uint8_t)*p);
        }
        d->call->tag = tag;
    }
    return d->call;
}

void gw_sim_dev_call_free(struct gw_sim_device *d)
{
    if (d->call != NULL) {
        opus_decoder_destroy(d->call->dec);
        free(d->call);
        d->call = NULL;
    }
}

bool gw_sim_dev_call_on_mcp(struct gw_sim_device *d, const cJSON *payload)
{
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(payload, "params");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(payload, "id");
    const char *method = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(payload, "method"));
    const char *name =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(params, "name"));

    if (method == NULL || strcmp(method, "tools/call") != 0 || name == NULL ||
        strcmp(name, "self.remote_wakeup") != 0 || !cJSON_IsNumber(id)) {
        return false;
    }
    d->r.call.wakeups++;
    gw_sim_dev_event(d, "< mcp tools/call self.remote_wakeup");
    gw_sim_dev_send_msg(d,
                        "{\"session_id\":\"%s\",\"type\":\"mcp\",\"payload\":"
                        "{\"jsonrpc\":\"2.0\",\"id\":%.0f,\"result\":"
                        "{\"content\":[{\"type\":\"text\",\"text\":\"true\"}],"
                        "\"isError\":false}}}",
                        d->sid, id->valuedouble);
    if (d->state == ST_ASLEEP) {
        gw_sim_device_wake(d); /* opens the channel and listens */
    }
    return true;
}

bool gw_sim_dev_call_on_message(struct gw_sim_device *d,
                                const struct gw_envelope *env)
{
    const char *from = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(env->root, "from"));

    if (strcmp(env->type, "call_accepted") != 0) {
        return false;
    }
    d->r.call.accepted++;
    gw_sim_dev_event(d, "< call_accepted from %s", from ? from : "-");
    return true;
}

void gw_sim_dev_call_frame(struct gw_sim_device *d, const uint8_t **p,
                           size_t *n)
{
    struct gw_sim_call *c = state_of(d);

    if (c == NULL) {
        gw_sim_dev_fail(d, "out of memory");
        *p = (const uint8_t *)"";
        *n = 0;
        return;
    }
    build_frame(c->tag, ++c->tx, c->frame);
    d->r.call.tx_frames = c->tx;
    *p = c->frame;
    *n = CALL_LEN;
}

/* Numbered frames: rebuilt from their tag and number, compared whole. */
static void numbered(struct gw_sim_device *d, struct gw_sim_call *c,
                     const uint8_t *opus)
{
    uint8_t want[CALL_LEN];
    uint32_t n = (uint32_t)opus[CALL_NUM_OFF] << 24 |
                 (uint32_t)opus[CALL_NUM_OFF + 1] << 16 |
                 (uint32_t)opus[CALL_NUM_OFF + 2] << 8 |
                 (uint32_t)opus[CALL_NUM_OFF + 3];

    build_frame(opus[5], n, want);
    if (memcmp(want, opus, CALL_LEN) != 0) {
        d->r.call.rx_bad++;
        return;
    }
    if (!c->rx_any) {
        c->rx_any = true;
        d->r.call.rx_first = n;
        gw_sim_dev_event(d, "< call audio: first frame is number %u",
                         (unsigned)n);
    } else if (n != d->r.call.rx_last + 1) {
        d->r.call.rx_gaps++;
    }
    d->r.call.rx_last = n;
    d->r.call.rx_frames++;
}

bool gw_sim_dev_call_on_audio(struct gw_sim_device *d, const uint8_t *opus,
                              size_t len)
{
    struct gw_sim_call *c = state_of(d);
    int err = 0;

    if (c == NULL) {
        return false;
    }
    if (len == CALL_LEN && opus[0] == CALL_TOC &&
        memcmp(opus + 1, CALL_MARK, 4) == 0) {
        numbered(d, c, opus);
        return true;
    }
    /* Anything else is judged by ear: the gateway's keepalive must be
     * silence; a backend's speech is played as usual. */
    if (c->dec == NULL &&
        (c->dec = opus_decoder_create(DEC_RATE, 1, &err)) == NULL) {
        return false;
    }
    int n = opus_decode(c->dec, opus, (opus_int32)len, c->pcm, DEC_SAMPLES, 0);
    int peak = 0;
    for (int i = 0; i < n; i++) {
        int v = c->pcm[i] < 0 ? -c->pcm[i] : c->pcm[i];
        peak = v > peak ? v : peak;
    }
    if (n > 0 && peak <= SILENCE_PEAK) {
        if (d->r.call.rx_silence++ == 0) {
            gw_sim_dev_event(d, "< silence frame (call keepalive)");
        }
        return true;
    }
    d->r.call.rx_other++;
    return false;
}

bool gw_sim_call_result_json(const struct gw_sim_result *r, cJSON *o)
{
    const struct gw_sim_call_result *c = &r->call;
    cJSON *call = cJSON_AddObjectToObject(o, "call");

    if (call == NULL) {
        return false;
    }
    cJSON_AddNumberToObject(call, "wakeups", c->wakeups);
    cJSON_AddNumberToObject(call, "accepted", c->accepted);
    cJSON_AddNumberToObject(call, "tx_frames", (double)c->tx_frames);
    cJSON_AddNumberToObject(call, "rx_frames", (double)c->rx_frames);
    cJSON_AddNumberToObject(call, "rx_bad", (double)c->rx_bad);
    cJSON_AddNumberToObject(call, "rx_gaps", (double)c->rx_gaps);
    cJSON_AddNumberToObject(call, "rx_silence", (double)c->rx_silence);
    cJSON_AddNumberToObject(call, "rx_other", (double)c->rx_other);
    cJSON_AddNumberToObject(call, "rx_first", c->rx_first);
    return cJSON_AddNumberToObject(call, "rx_last", c->rx_last) != NULL;
}
