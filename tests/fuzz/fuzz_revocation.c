/*
 * The revocation control message: any bytes parse into entries whose ids
 * are device client ids and whose below is 1..2^53, or are refused with no
 * entry seen; what parses packs again (at any size that holds the largest
 * entry) into messages within that size that parse back to the same
 * entries, in order.
 * Input: 2 bytes of message size (little-endian), then the message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/client_id.h"
#include "codec/revocation.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            abort();                                                           \
        }                                                                      \
    } while (0)

struct list {
    struct gw_revocation *e;
    char (*ids)[GW_CLIENT_ID_MAX + 1];
    size_t n, cap;
    size_t next; /* re-reading: the entry expected next */
    size_t max;  /* the pack's size */
    struct list *want;
};

static int collect(void *arg, const char *id, uint64_t below)
{
    struct list *l = arg;
    struct gw_client_id parsed;
    size_t len = strlen(id);

    CHECK(len <= GW_CLIENT_ID_MAX && gw_client_id_parse(id, len, &parsed) == 0);
    CHECK(below >= 1 && below <= GW_REVOCATION_BELOW_MAX);
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        void *e = realloc(l->e, cap * sizeof(*l->e));
        if (e == NULL) {
            return GW_ENOMEM;
        }
        l->e = e;
        void *ids = realloc(l->ids, cap * sizeof(*l->ids));
        if (ids == NULL) {
            return GW_ENOMEM;
        }
        l->ids = ids;
        l->cap = cap;
    }
    memcpy(l->ids[l->n], id, len + 1);
    l->e[l->n].below = below;
    l->n++;
    return 0;
}

/* Each entry of a packed message must be the next one expected. */
static int expect(void *arg, const char *id, uint64_t below)
{
    struct list *l = arg;

    CHECK(l->next < l->want->n);
    CHECK(strcmp(id, l->want->ids[l->next]) == 0);
    CHECK(below == l->want->e[l->next].below);
    l->next++;
    return 0;
}

static int reread(void *arg, const char *msg, size_t len)
{
    struct list *l = arg;
    size_t before = l->next;

    CHECK(len <= l->max);
    CHECK(gw_revocation_parse(msg, len, expect, l) > 0);
    CHECK(l->next > before);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct list got = {0}, check = {0};
    char *msg;
    int n;

    if (size < 2) {
        return 0;
    }
    size_t max = (size_t)data[0] | (size_t)data[1] << 8;
    msg = malloc(size - 2 > 0 ? size - 2 : 1);
    if (msg == NULL) {
        return 0;
    }
    memcpy(msg, data + 2, size - 2);
    n = gw_revocation_parse(msg, size - 2, collect, &got);
    free(msg);
    if (n < 0) {
        CHECK(got.n == 0 || n == GW_ENOMEM);
        goto out;
    }
    CHECK((size_t)n == got.n);
    for (size_t i = 0; i < got.n; i++) {
        got.e[i].client_id = got.ids[i];
    }
    /* The largest entry: ["<id escaped>",<16 digits>]. */
    size_t need = 0;
    for (size_t i = 0; i < got.n; i++) {
        size_t len = 24 + 2 * strlen(got.ids[i]);
        need = len > need ? len : need;
    }
    max = max < GW_REVOCATION_OVERHEAD + 1 ? GW_REVOCATION_OVERHEAD + 1 : max;
    check.want = &got;
    check.max = max;
    int msgs = gw_revocation_pack(got.e, got.n, max, reread, &check);
    if (msgs == GW_ETOOBIG) {
        CHECK(max < GW_REVOCATION_OVERHEAD + need);
    } else {
        CHECK(msgs >= 0 && (msgs > 0) == (got.n > 0));
        CHECK(check.next == got.n);
    }
out:
    free(got.e);
    free(got.ids);
    return 0;
}
