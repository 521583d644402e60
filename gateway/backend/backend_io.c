/*
 * A backend connection's traffic: pooled send buffers, the send queue and
 * the direct write that skips it, and incoming messages reassembled from
 * lws's pieces and unframed; what does not unframe is counted per backend
 * and reason, and told once per connection.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <libwebsockets.h>

#include "codec/ws_frame.h"
#include "common/cacheline.h"
#include "common/log.h"
#include "gateway/backend/backend_ws_int.h"
#include "gateway/backend/ws_random.h"

_Static_assert(LWS_PRE >= GW_WS_FRAME_HEAD_MAX, "a frame head fits LWS_PRE");
_Static_assert(offsetof(struct gw_backend_conn, link) <= GW_CACHE_LINE,
               "what a frame reads of its connection shares a line");
_Static_assert(GW_BACKEND_BURST_MAX <= UINT8_MAX, "in_burst counts a burst");

#define TX_MAX_MSGS  256
#define TX_MAX_BYTES (1024 * 1024)
/* Spare buffers kept per connection: one is all a flowing stream uses (a
 * frame is written before the next is read); what a backlog took beyond
 * two goes back to the allocator once written, or 3000 sessions that once
 * backed up keep 4 KB each (bench/NOTES.md). */
#define POOL_KEEP 2
/*
 * A buffer's room: at least POOL_MIN (an Opus frame of the usual bitrates,
 * most JSON messages), else what the message needs; spares are kept up to
 * POOL_MAX, which holds any audio frame, PCM ones included. A connection
 * therefore keeps buffers the size of its own traffic, not of the largest
 * frame (memory per session: bench/NOTES.md).
 */
#define POOL_MIN 512
#define POOL_MAX                                                               \
    (GW_AUDIO_FRAME_MAX_HEADER_LEN + GW_AUDIO_FRAME_PCM16_MAX_PAYLOAD)

/* ---- buffers ---------------------------------------------------------- */

static struct tx_msg *msg_get(struct gw_backend_conn *conn, size_t len)
{
    struct tx_msg *msg = conn->spare;

    if (msg != NULL) {
        conn->spare = msg->next;
        conn->spare_count--;
        if (msg->cap < len) { /* too small: make one that fits */
            free(msg);
            msg = NULL;
        }
    }
    if (msg == NULL) {
        size_t cap = len < POOL_MIN ? POOL_MIN : len;
        msg = malloc(sizeof(*msg) + LWS_PRE + cap);
        if (msg == NULL) {
            return NULL;
        }
        msg->cap = cap;
    }
    msg->next = NULL;
    msg->len = 0;
    return msg;
}

static void msg_put(struct gw_backend_conn *conn, struct tx_msg *msg)
{
    if (msg->cap <= POOL_MAX && conn->spare_count < POOL_KEEP) {
        msg->next = conn->spare;
        conn->spare = msg;
        conn->spare_count++;
        return;
    }
    free(msg);
}

static void msg_list_free(struct tx_msg *msg)
{
    while (msg != NULL) {
        struct tx_msg *next = msg->next;
        free(msg);
        msg = next;
    }
}

void gw__backend_io_release(struct gw_backend_conn *conn)
{
    msg_list_free(conn->tx_head);
    msg_list_free(conn->spare);
    gw_backend_msg_release(&conn->rx);
}

/* ---- dropped binary messages ------------------------------------------ */

struct backend_drops *gw__backend_drops_get(struct gw_backend_ws *bws,
                                            const char *name)
{
    struct backend_drops *d;
    size_t len = strlen(name);

    /* A handful of backends, looked up once per connection. */
    for (d = bws->drops; d != NULL; d = d->next) {
        if (strcmp(d->name, name) == 0) {
            return d;
        }
    }
    d = calloc(1, sizeof(*d) + len + 1);
    if (d == NULL) {
        return NULL;
    }
    memcpy(d->name, name, len + 1);
    d->next = bws->drops;
    bws->drops = d;
    return d;
}

void gw__backend_drops_free(struct gw_backend_ws *bws)
{
    while (bws->drops != NULL) {
        struct backend_drops *next = bws->drops->next;
        free(bws->drops);
        bws->drops = next;
    }
}

void gw_backend_ws_foreach_drops(const struct gw_backend_ws *bws,
                                 gw_backend_drops_cb cb, void *arg)
{
    for (const struct backend_drops *d = bws->drops; d != NULL; d = d->next) {
        cb(d->name, d->by_reason, arg);
    }
}

/*
 * A binary message that does not decode is audio the device will never
 * hear. The first of a connection is a warning that says what came and
 * why it likely did (a wrong framing loses every frame, and a debug line
 * would hide that); later ones go to debug, 1st, 2nd, 4th, 8th..., so a
 * broken backend cannot flood the log.
 */
static void drop_binary(struct gw_backend_conn *conn, const uint8_t *buf,
                        size_t len, int err)
{
    enum gw_backend_drop why =
        gw_backend_drop_classify(conn->framing, buf, len, err);
    const char *hint;
    char head[16 * 3 + 8]; /* the first 16 bytes in hex */

    conn->bws->stats.rx_bad_frames++;
    conn->bad_frames++;
    if (conn->drops != NULL) {
        conn->drops->by_reason[why]++;
    }
    if (conn->bad_frames == 1) {
        gw_backend_hex_head(buf, len, 16, head, sizeof(head));
        hint = gw_backend_drop_hint(conn->framing, why, conn->gateway_query);
        GW_LOG(GW_LOG_WARN, conn->subject,
               "backend %s (framing %s): dropped binary message of %zu "
               "bytes (%s): not a %s frame (%s, reason %s)%s%s; the "
               "device hears none of these, each is counted in "
               "hybridgw_backend_frames_dropped_total",
               conn->name, gw_framing_name(conn->framing), len, head,
               gw_framing_name(conn->framing), gw_strerror(err),
               gw_backend_drop_name(why), hint != NULL ? "; " : "",
               hint != NULL ? hint : "");
    } else if ((conn->bad_frames & (conn->bad_frames - 1)) == 0) {
        gw_backend_hex_head(buf, len, 16, head, sizeof(head));
        GW_LOG(GW_LOG_DEBUG, conn->subject,
               "backend %s: dropped binary message of %zu bytes (%s): %s "
               "(%llu so far)",
               conn->name, len, head, gw_backend_drop_name(why),
               (unsigned long long)conn->bad_frames);
    }
}

/* ---- receiving -------------------------------------------------------- */

static void deliver(struct gw_backend_conn *conn, const uint8_t *buf,
                    size_t len, bool binary)
{
    struct gw_backend_ws *bws = conn->bws;
    const uint8_t *opus;
    size_t opus_len;
    uint32_t ts;

    if (!binary) {
        bws->stats.rx_text++;
        if (conn->ev.on_text != NULL) {
            conn->ev.on_text(conn, (const char *)buf, len, conn->owner);
        }
        return;
    }
    int rc =
        gw_audio_frame_decode(conn->framing, buf, len, &ts, &opus, &opus_len);
    if (rc != 0) {
        drop_binary(conn, buf, len, rc);
        return;
    }
    bws->stats.rx_audio++;
    if (conn->ev.on_audio != NULL) {
        conn->ev.on_audio(conn, ts, opus, opus_len, conn->owner);
    }
}

int gw__backend_on_receive(struct gw_backend_conn *conn, struct lws *wsi,
                           const uint8_t *in, size_t len)
{
    struct gw_backend_msg_out msg;
    int rc;

    if (conn->state != CONN_OPEN) {
        return 0; /* closing: the owner has stopped listening */
    }
    rc = gw_backend_msg_add(
        &conn->rx, conn->max_message, in, len, lws_is_first_fragment(wsi),
        lws_is_final_fragment(wsi), lws_frame_is_binary(wsi), &msg);
    if (rc == GW_ETOOBIG) {
        gw__backend_set_reason(conn, "message too big");
        conn->close_requested = true;
        conn->state = CONN_CLOSING;
        uv_timer_start(&conn->timer, gw__backend_on_timer, CLOSE_LINGER_MS, 0);
        gw__backend_close_with(conn, wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE);
        return 0;
    }
    if (rc < 0) {
        gw__backend_set_reason(conn, "receive: %s", gw_strerror(rc));
        return -1;
    }
    if (rc == 1) {
        deliver(conn, msg.data, msg.len, msg.binary);
        gw_backend_msg_trim(&conn->rx);
    }
    return 0;
}

/*
 * An audio frame on a plain ws:// connection, framed and masked here and
 * sent with one send(): libwebsockets' lws_write costs more than the rest
 * of the gateway's work for a packet (its per-byte masking, its state
 * checks across several structures; bench/NOTES.md). The head goes into
 * the GW_WS_FRAME_HEAD_MAX bytes before the payload (LWS_PRE in a buffer
 * of ours, the headroom of a frame built in place), the key comes from
 * the same strong source lws uses (gateway/backend/ws_random.c). Whatever the
 * socket does not take goes to lws as raw bytes, which it keeps and sends
 * before anything it writes itself (its own control frames included), so the
 * stream stays whole. Text, TLS and anything outside these bounds stay with
 * lws. Returns the payload length, or -1.
 */
static int send_frame(struct gw_backend_conn *conn, struct lws *wsi,
                      uint8_t *payload, size_t len)
{
    uint8_t head[GW_WS_FRAME_HEAD_MAX];
    uint8_t mask[4];
    int h;
    ssize_t n;

    if (gw_ws_random(mask, sizeof(mask)) != sizeof(mask)) {
        return -1;
    }
    h = gw_ws_frame_client_head(head, sizeof(head), GW_WS_OP_BINARY, len, mask);
    if (h < 0) {
        return -1;
    }
    uint8_t *frame = payload - h;
    size_t total = (size_t)h + len;
    memcpy(frame, head, (size_t)h);
    gw_ws_frame_mask(payload, len, mask);
    do {
        n = send(conn->fd, frame, total, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            return -1;
        }
        n = 0;
    }
    if ((size_t)n < total &&
        lws_write(wsi, frame + n, total - (size_t)n, LWS_WRITE_RAW) < 0) {
        return -1;
    }
    return (int)len;
}

/*
 * Whether a message goes by send_frame: see there. That lws has nothing
 * buffered is the callers' to know: write_now runs after can_write_now or
 * release's own check, and lws calls on_writeable only once its buffer is
 * out, so it is not asked a third time per packet here.
 */
static bool frame_here(const struct gw_backend_conn *conn,
                       const struct tx_msg *msg)
{
    return msg->binary && !conn->tls && conn->fd >= 0 && msg->len < 65536;
}

/*
 * Hands one message to the socket (send_frame) or to lws, and recycles its
 * buffer. lws keeps whatever the socket does not take and sends it first,
 * before any later write.
 */
static int write_msg(struct gw_backend_conn *conn, struct lws *wsi,
                     struct tx_msg *msg)
{
    size_t len = msg->len;
    int n = frame_here(conn, msg)
                ? send_frame(conn, wsi, msg->buf + LWS_PRE, len)
                : lws_write(wsi, msg->buf + LWS_PRE, len,
                            msg->binary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT);

    if (msg->binary) {
        conn->bws->stats.tx_audio++;
    } else {
        conn->bws->stats.tx_text++;
    }
    msg_put(conn, msg);
    if (n < 0 || (size_t)n < len) {
        gw__backend_set_reason(conn, "write failed");
        return -1;
    }
    return 0;
}

/* Takes the oldest queued message off the queue. */
static struct tx_msg *queue_pop(struct gw_backend_conn *conn)
{
    struct tx_msg *msg = conn->tx_head;

    if (msg != NULL) {
        conn->tx_head = msg->next;
        if (conn->tx_head == NULL) {
            conn->tx_tail = NULL;
        }
        conn->tx_count--;
        conn->tx_bytes -= msg->len;
    }
    return msg;
}

/* One message per writable event, a keepalive ping first; the close frame
 * goes after the last. */
int gw__backend_on_writeable(struct gw_backend_conn *conn, struct lws *wsi)
{
    struct tx_msg *msg;

    if (conn->state == CONN_OPEN) {
        int rc = gw__backend_alive_write_ping(conn, wsi);
        if (rc != 0) {
            if (rc > 0 && conn->tx_head != NULL) {
                lws_callback_on_writable(wsi);
            }
            return rc < 0 ? -1 : 0;
        }
    }
    msg = queue_pop(conn);
    if (msg == NULL) {
        if (conn->state == CONN_CLOSING && !conn->close_sent) {
            gw__backend_close_with(conn, wsi, LWS_CLOSE_STATUS_NORMAL);
        }
        return 0;
    }
    if (write_msg(conn, wsi, msg) < 0) {
        return -1;
    }
    if (conn->tx_head != NULL || conn->state == CONN_CLOSING) {
        lws_callback_on_writable(wsi);
    }
    return 0;
}

/* ---- sending ---------------------------------------------------------- */

/* Reserves a queue slot for len bytes, or counts a drop. The bound may
 * be exceeded by a burst (burst_copy): its test stays >=, the byte count
 * is compared without underflow. */
static int queue_reserve(struct gw_backend_conn *conn, size_t len,
                         struct tx_msg **out)
{
    if (conn->close_requested || conn->state == CONN_DONE) {
        return GW_EPROTO;
    }
    if (conn->tx_count >= TX_MAX_MSGS || conn->tx_bytes > TX_MAX_BYTES ||
        len > TX_MAX_BYTES - conn->tx_bytes) {
        conn->bws->stats.tx_dropped++;
        return GW_ELIMIT;
    }
    *out = msg_get(conn, len);
    return *out != NULL ? 0 : GW_ENOMEM;
}

/*
 * Whether a message may go to lws at once instead of through a writable
 * callback. Asking lws for a writable callback per message costs two
 * epoll_ctl calls each way on the libuv backend (uv_poll_start re-arms
 * the descriptor) plus a loop turn, several times the write itself; so
 * when nothing is queued before it, the socket took everything so far
 * and no lws callback is running (lws does not expect writes from inside
 * its service), the message is written right away. Anything lws could
 * not send stays in its own buffer, lws_partial_buffered() says so, and
 * later messages then queue here behind it, bounded as before.
 */
static bool can_write_now(const struct gw_backend_conn *conn)
{
    return conn->state == CONN_OPEN && conn->tx_head == NULL &&
           conn->bws->in_lws == 0 && !lws_partial_buffered(conn->wsi);
}

/* Not inside a callback, a failed write cannot return -1: lws closes the
 * connection from its loop, and on_close follows. */
static bool write_now(struct gw_backend_conn *conn, struct tx_msg *msg)
{
    if (write_msg(conn, conn->wsi, msg) < 0) {
        lws_set_timeout(conn->wsi, PENDING_TIMEOUT_KILLED_BY_PARENT,
                        LWS_TO_KILL_ASYNC);
        return false;
    }
    return true;
}

static void queue_append(struct gw_backend_conn *conn, struct tx_msg *msg)
{
    if (conn->tx_tail != NULL) {
        conn->tx_tail->next = msg;
    } else {
        conn->tx_head = msg;
    }
    conn->tx_tail = msg;
    conn->tx_count++;
    conn->tx_bytes += msg->len;
}

static void burst_to_queue(struct gw_backend_conn *conn);

static void queue_push(struct gw_backend_conn *conn, struct tx_msg *msg)
{
    if (conn->in_burst > 0) {
        burst_to_queue(conn); /* they go first */
    }
    if (can_write_now(conn)) {
        if (!conn->bws->holding) {
            (void)write_now(conn, msg);
            return;
        }
        /* Held: release writes it (an empty queue was not held yet). */
        gw_list_insert_tail(&conn->bws->held, &conn->held);
        queue_append(conn, msg);
        return;
    }
    queue_append(conn, msg);
    /*
     * A non-empty queue always has a write request pending (on_writeable
     * renews it; on_established makes the first after connecting) or is
     * held, so only the first message of an empty queue asks.
     */
    if (conn->state == CONN_OPEN && conn->tx_count == 1) {
        lws_callback_on_writable(conn->wsi);
    }
}

void gw_backend_conn_warm(const struct gw_backend_conn *conn, unsigned step)
{
    if (step == 0) {
        /* The fields a frame reads, up to in_burst: its first line
         * (gw_calloc_lines). */
        __builtin_prefetch(conn);
        return;
    }
    if (conn->wsi == NULL) {
        return;
    }
    if (!conn->tls) {
        /*
         * A frame built in place reads one line of lws's connection,
         * lws_partial_buffered's, at an offset that is lws's own: asking
         * it now starts that miss while the batch's others are on their
         * way, instead of at the write.
         */
        int buffered = lws_partial_buffered(conn->wsi);
        (void)buffered; /* asked again at the write */
        return;
    }
    /* TLS: the frame is copied to a spare buffer, then lws_write reads
     * the first lines of its connection. */
    if (conn->spare != NULL) {
        for (int off = 0; off < 256; off += 64) {
            __builtin_prefetch((const char *)conn->spare + off, 1);
        }
    }
    for (int off = 0; off < 256; off += 64) {
        __builtin_prefetch((const char *)conn->wsi + off);
    }
}

/* ---- frames built in place -------------------------------------------- */

/*
 * A burst frame that cannot go straight to its socket at the release is
 * copied to its connection's queue, behind nothing (a message queued
 * after it moves it there first: burst_to_queue). It was accepted, so the
 * queue's bounds do not refuse it: they are exceeded by at most a burst,
 * since a connection with a queue takes no frames into the burst. A
 * connection that has ended drops it, as it drops its queue.
 */
static void burst_copy(struct gw_backend_conn *conn, const uint8_t *frame,
                       size_t len)
{
    struct tx_msg *msg;

    if (conn->state != CONN_OPEN && conn->state != CONN_CLOSING) {
        return;
    }
    msg = msg_get(conn, len);
    if (msg == NULL) {
        conn->bws->stats.tx_dropped++;
        return;
    }
    memcpy(msg->buf + LWS_PRE, frame, len);
    msg->len = len;
    msg->binary = true;
    queue_append(conn, msg);
}

/* Takes the connection's frames out of the burst, in order, copying them
 * to its queue when keep. */
static void burst_take(struct gw_backend_conn *conn, bool keep)
{
    struct gw_backend_ws *bws = conn->bws;

    for (unsigned i = 0; i < bws->n_burst && conn->in_burst > 0; i++) {
        struct burst_frame *b = &bws->burst[i];
        if (b->conn == conn) {
            if (keep) {
                burst_copy(conn, b->frame, b->len);
            }
            b->conn = NULL;
            conn->in_burst--;
        }
    }
}

/* A message for a connection with frames in the burst: they are moved to
 * its queue, held like the messages of the burst that queue. */
static void burst_to_queue(struct gw_backend_conn *conn)
{
    burst_take(conn, true);
    if (conn->tx_head != NULL && !gw_list_linked(&conn->held)) {
        gw_list_insert_tail(&conn->bws->held, &conn->held);
    }
}

void gw__backend_burst_forget(struct gw_backend_conn *conn)
{
    burst_take(conn, false);
}

/*
 * The burst's frames, in the order they were sent: each straight to its
 * socket as write_now would, or, where something stands before it now (a
 * partial write lws keeps, a close begun), through the queue.
 */
static void burst_write(struct gw_backend_ws *bws)
{
    for (unsigned i = 0; i < bws->n_burst; i++) {
        struct burst_frame *b = &bws->burst[i];
        struct gw_backend_conn *conn = b->conn;

        if (conn == NULL) {
            continue; /* moved to its queue, or its connection ended */
        }
        conn->in_burst--;
        if (!can_write_now(conn)) {
            bool was_empty = conn->tx_head == NULL;
            burst_copy(conn, b->frame, b->len);
            if (was_empty && conn->tx_head != NULL &&
                conn->state == CONN_OPEN) {
                lws_callback_on_writable(conn->wsi);
            }
            continue;
        }
        bws->stats.tx_audio++;
        if (send_frame(conn, conn->wsi, b->frame, b->len) < 0) {
            gw__backend_set_reason(conn, "write failed");
            lws_set_timeout(conn->wsi, PENDING_TIMEOUT_KILLED_BY_PARENT,
                            LWS_TO_KILL_ASYNC);
        }
    }
    bws->n_burst = 0;
}

void gw_backend_ws_hold(struct gw_backend_ws *bws)
{
    bws->holding = true;
}

/*
 * Each held connection's queue goes out as the direct write would have
 * sent it; what the socket does not take (or a connection that began
 * closing meanwhile, whose close asked for a writable event) goes on
 * through writable events as usual.
 */
void gw_backend_ws_release(struct gw_backend_ws *bws)
{
    struct gw_list *node;

    bws->holding = false;
    burst_write(bws);
    while ((node = gw_list_first(&bws->held)) != NULL) {
        struct gw_backend_conn *conn =
            GW_LIST_ENTRY(node, struct gw_backend_conn, held);

        gw_list_unlink(node);
        bool ok = true;
        while (ok && conn->tx_head != NULL && conn->state == CONN_OPEN &&
               bws->in_lws == 0 && !lws_partial_buffered(conn->wsi)) {
            ok = write_now(conn, queue_pop(conn));
        }
        if (ok && conn->tx_head != NULL && conn->state == CONN_OPEN) {
            lws_callback_on_writable(conn->wsi);
        }
    }
}

int gw_backend_conn_send_text(struct gw_backend_conn *conn, const char *text,
                              size_t len)
{
    struct tx_msg *msg;
    int rc;

    if (conn == NULL || (text == NULL && len > 0)) {
        return GW_EINVAL;
    }
    rc = queue_reserve(conn, len, &msg);
    if (rc != 0) {
        return rc;
    }
    if (len > 0) {
        memcpy(msg->buf + LWS_PRE, text, len);
    }
    msg->len = len;
    msg->binary = false;
    queue_push(conn, msg);
    return 0;
}

int gw_backend_conn_send_audio(struct gw_backend_conn *conn, uint32_t timestamp,
                               const uint8_t *opus, size_t len)
{
    struct tx_msg *msg;
    size_t framed;
    int rc;

    if (conn == NULL || (opus == NULL && len > 0)) {
        return GW_EINVAL;
    }
    if (len > gw_audio_frame_max_payload(conn->framing)) {
        return GW_ETOOBIG;
    }
    rc = queue_reserve(conn, gw_audio_frame_header_len(conn->framing) + len,
                       &msg);
    if (rc != 0) {
        return rc;
    }
    /* Header and payload are written straight into the queued buffer. */
    rc = gw_audio_frame_encode(conn->framing, timestamp, opus, len,
                               msg->buf + LWS_PRE, msg->cap, &framed);
    if (rc != 0) {
        msg_put(conn, msg);
        return rc;
    }
    msg->len = framed;
    msg->binary = true;
    queue_push(conn, msg);
    return 0;
}

int gw_backend_conn_send_audio_held(struct gw_backend_conn *conn,
                                    uint32_t timestamp, uint8_t *opus,
                                    size_t len)
{
    struct gw_backend_ws *bws;
    size_t hlen;
    int rc;

    if (conn == NULL || opus == NULL || len == 0 ||
        len > gw_audio_frame_max_payload(conn->framing)) {
        return gw_backend_conn_send_audio(conn, timestamp, opus, len);
    }
    bws = conn->bws;
    /* What send_frame takes, and nothing queued to go before it. */
    if (!bws->holding || bws->n_burst == GW_BACKEND_BURST_MAX || conn->tls ||
        conn->fd < 0 || conn->state != CONN_OPEN || conn->close_requested ||
        conn->tx_head != NULL || conn->framing == GW_FRAMING_PCM16) {
        return gw_backend_conn_send_audio(conn, timestamp, opus, len);
    }
    hlen = gw_audio_frame_header_len(conn->framing);
    rc = gw_audio_frame_header(conn->framing, timestamp, len, opus - hlen, hlen,
                               &hlen);
    if (rc != 0) {
        return rc;
    }
    bws->burst[bws->n_burst++] = (struct burst_frame){
        .conn = conn, .frame = opus - hlen, .len = hlen + len};
    conn->in_burst++;
    return 0;
}

enum gw_framing gw_backend_conn_framing(const struct gw_backend_conn *conn)
{
    return conn->framing;
}

int gw_backend_conn_pcm_rate(const struct gw_backend_conn *conn)
{
    return conn->pcm_sample_rate;
}
