/*
 * The plugin's connection table (broker/clients.c) under any sequence of
 * auths, disconnects and lookups, checked against a model: every lookup
 * finds exactly the live connections with their role and id, the count
 * matches, and each presence event is the one the rules call for (online
 * with a fresh number for a new or promoted current connection, offline
 * with the ended one's number when a device's last connection goes,
 * nothing otherwise), and a revocation's question (is the current
 * connection's binding id below?) gets the model's answer.
 * Input: 3 bytes per step: op/role/address/binding, context, client id.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "broker/clients.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_CTX 16
#define N_IDS 6

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            abort();                                                           \
        }                                                                      \
    } while (0)

static char contexts[N_CTX]; /* only their addresses matter */

/* Index N_IDS - 1 is one byte too long for a device id. */
static char ids[N_IDS][GW_CLIENT_ID_MAX + 2] = {
    "GID_a@@@02_00_00_00_00_01@@@u1", "GID_a@@@02_00_00_00_00_02@@@u2",
    "GID_a@@@02_00_00_00_00_03", "hybridgw-test", ""};

static const char *const addresses[] = {
    "192.0.2.7", "2001:db8::1",
    "a-very-long-address-that-no-ip-literal-could-ever-be-so-it-is-dropped"};

struct model_conn {
    bool live;
    enum gw_broker_role role;
    int id;
    uint64_t serial; /* of its latest online announcement */
    uint64_t stamp;  /* when added: the newest live one is current */
    int addr;        /* index into addresses, -1 for none */
    uint64_t binding;
};

static struct model_conn conns[N_CTX];
static uint64_t serial, stamp;

static void setup(void)
{
    if (ids[N_IDS - 1][0] == '\0') {
        memset(ids[N_IDS - 1], 'x', GW_CLIENT_ID_MAX + 1);
        ids[N_IDS - 1][GW_CLIENT_ID_MAX + 1] = '\0';
    }
}

/* The current (newest live) device connection of id, or -1. */
static int current_of(int id)
{
    int best = -1;

    for (int i = 0; i < N_CTX; i++) {
        if (conns[i].live && conns[i].role == GW_BROKER_ROLE_DEVICE &&
            conns[i].id == id &&
            (best < 0 || conns[i].stamp > conns[best].stamp)) {
            best = i;
        }
    }
    return best;
}

static const char *address_of(int i)
{
    int a = conns[i].addr;

    return a < 0 || strlen(addresses[a]) > GW_BROKER_ADDRESS_MAX ? ""
                                                                 : addresses[a];
}

static void expect_online(const struct gw_broker_presence *ev, int i)
{
    CHECK(ev->publish && ev->online);
    CHECK(ev->conn == ++serial);
    conns[i].serial = serial;
    CHECK(strcmp(ev->client_id, ids[conns[i].id]) == 0);
    CHECK(strcmp(ev->address, address_of(i)) == 0);
}

/* The model's side of a disconnect of ctx i; checks ev if given. */
static void model_remove(int i, const struct gw_broker_presence *ev)
{
    if (!conns[i].live) {
        if (ev != NULL) {
            CHECK(!ev->publish);
        }
        return;
    }
    bool device = conns[i].role == GW_BROKER_ROLE_DEVICE;
    int id = conns[i].id;
    bool was_current = device && current_of(id) == i;
    uint64_t ended = conns[i].serial;

    conns[i].live = false;
    if (!was_current) {
        if (ev != NULL) {
            CHECK(!ev->publish);
        }
        return;
    }
    int next = current_of(id);
    if (next >= 0) {
        /* Announced even when ev is NULL: the table numbers it anyway. */
        if (ev != NULL) {
            expect_online(ev, next);
        } else {
            conns[next].serial = ++serial;
        }
    } else if (ev != NULL) {
        CHECK(ev->publish && !ev->online && ev->conn == ended);
        CHECK(strcmp(ev->client_id, ids[id]) == 0);
    }
}

static void check_all(struct gw_broker_clients *t)
{
    unsigned live = 0;

    for (int i = 0; i < N_CTX; i++) {
        struct gw_broker_conn_info *c = gw_broker_clients_find(t, &contexts[i]);
        CHECK((c != NULL) == conns[i].live);
        if (c != NULL) {
            live++;
            CHECK(c->role == conns[i].role);
            CHECK(strcmp(c->client_id, ids[conns[i].id]) == 0);
            CHECK(c->binding == conns[i].binding);
        }
    }
    CHECK(gw_broker_clients_count(t) == live);
}

static void step(struct gw_broker_clients *t, uint8_t op, uint8_t ctx,
                 uint8_t idb)
{
    struct gw_broker_presence ev;
    int i = ctx % N_CTX, id = idb % N_IDS;

    switch (op & 3) {
    case 0:
    case 1: {
        static const enum gw_broker_role roles[] = {
            GW_BROKER_ROLE_DEVICE, GW_BROKER_ROLE_DEVICE,
            GW_BROKER_ROLE_GATEWAY, GW_BROKER_ROLE_NONE};
        enum gw_broker_role role = roles[(op >> 2) & 3];
        int addr = (int)((op >> 4) % 4) - 1;
        uint64_t binding = op >> 6;
        int rc = gw_broker_clients_add(t, &contexts[i], role, ids[id],
                                       addr < 0 ? NULL : addresses[addr],
                                       binding, &ev);
        if (role == GW_BROKER_ROLE_NONE) {
            CHECK(rc == GW_EINVAL && !ev.publish);
            break;
        }
        model_remove(i, NULL); /* a reused context replaces its old one */
        if (role == GW_BROKER_ROLE_DEVICE && id == N_IDS - 1) {
            CHECK(rc == GW_EINVAL && !ev.publish);
            break;
        }
        if (rc == GW_ENOMEM) {
            CHECK(!ev.publish);
            break;
        }
        CHECK(rc == 0);
        conns[i] = (struct model_conn){.live = true,
                                       .role = role,
                                       .id = id,
                                       .stamp = ++stamp,
                                       .addr = addr,
                                       .binding = binding};
        if (role == GW_BROKER_ROLE_DEVICE) {
            expect_online(&ev, i);
        } else {
            CHECK(!ev.publish);
        }
        break;
    }
    case 2:
        gw_broker_clients_remove(t, &contexts[i], &ev);
        model_remove(i, &ev);
        break;
    default: {
        /* A revocation's question: is the current connection below? */
        uint64_t below = (op >> 2) & 7;
        int cur = current_of(id);
        CHECK(gw_broker_clients_current_below(t, ids[id], below) ==
              (cur >= 0 && conns[cur].binding < below));
        break; /* and a lookup: check_all does it */
    }
    }
    check_all(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_broker_clients *t;

    setup();
    if (gw_broker_clients_create(&t) != 0) {
        return 0;
    }
    memset(conns, 0, sizeof(conns));
    serial = 0;
    stamp = 0;
    for (size_t off = 0; off + 3 <= size; off += 3) {
        step(t, data[off], data[off + 1], data[off + 2]);
    }
    gw_broker_clients_destroy(t);
    return 0;
}
