/*
 * A seeded impairment relay for UDP (bench/loss.sh): loses, delays and
 * reorders datagrams both ways between devices and the gateway, as netem
 * would on a kernel that has it, and counts what it delivered each way.
 *
 *   impair_relay --listen IP:PORT --to IP:PORT [--loss PCT] [--jitter-ms J]
 *                [--reorder PCT] [--reorder-ms MIN:MAX] [--seed N]
 *                [--independent] [--stats FILE] [--log FILE]
 *
 * Devices send to --listen; each new device address gets its own socket
 * towards --to (as a NAT would), and what the gateway sends back on it goes
 * to that device from --listen. Each datagram, each way: lost with
 * probability --loss; else delayed by a uniform 0..--jitter-ms. Delay varies
 * as a queue's would, without one flow's datagrams overtaking each other
 * (a datagram leaves no earlier than the one before it in its flow and
 * direction); --independent drops that rule, so that datagrams sent closer
 * together than the jitter reorder among themselves. With probability
 * --reorder a datagram is held a further uniform MIN..MAX ms (default
 * 70:190) outside that order, so the ones sent after it overtake it: at
 * 60 ms frames, one to three of them.
 *
 * On SIGTERM or SIGINT it writes --stats (JSON: per direction received,
 * lost, reordered, delivered, still held) and exits. --log gets one line per
 * delivered datagram: dir,ssrc,sequence,unix_us (the UDP header's fields,
 * which are not encrypted).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_FLOWS 4096
#define MAX_DGRAM 2048

enum { UP, DOWN };

struct flow {
    struct sockaddr_in dev; /* the device's address */
    int fd;                 /* connected to the gateway */
    uint64_t last_ns[2];    /* latest in-order departure, each way */
};

struct held {
    uint64_t at_ns;
    uint64_t order; /* ties leave in arrival order */
    int dir;
    int flow;
    size_t len;
    uint8_t *data;
};

struct counts {
    uint64_t received, lost, reordered, delivered, send_errors;
};

static struct flow flows[MAX_FLOWS];
static int nflows;
static struct held *heap;
static size_t heap_len, heap_cap;
static uint64_t order_next;
static struct counts cnt[2];
static uint64_t rng[2];
static volatile sig_atomic_t stop;
static FILE *log_file;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t unix_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* splitmix64: one stream per direction, so one way's traffic does not
 * change the other's draws. */
static uint64_t next_u64(int dir)
{
    uint64_t z = (rng[dir] += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static double uniform(int dir) /* [0, 1) */
{
    return (double)(next_u64(dir) >> 11) / 9007199254740992.0;
}

static bool earlier(const struct held *a, const struct held *b)
{
    return a->at_ns < b->at_ns || (a->at_ns == b->at_ns && a->order < b->order);
}

static void heap_push(struct held h)
{
    if (heap_len == heap_cap) {
        heap_cap = heap_cap ? heap_cap * 2 : 1024;
        heap = realloc(heap, heap_cap * sizeof(*heap));
        if (heap == NULL) {
            perror("realloc");
            exit(1);
        }
    }
    size_t i = heap_len++;
    while (i > 0 && earlier(&h, &heap[(i - 1) / 2])) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = h;
}

static struct held heap_pop(void)
{
    struct held top = heap[0], last = heap[--heap_len];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= heap_len) {
            break;
        }
        if (c + 1 < heap_len && earlier(&heap[c + 1], &heap[c])) {
            c++;
        }
        if (!earlier(&heap[c], &last)) {
            break;
        }
        heap[i] = heap[c];
        i = c;
    }
    if (heap_len > 0) {
        heap[i] = last;
    }
    return top;
}

static bool parse_addr(const char *s, struct sockaddr_in *a)
{
    char ip[64];
    const char *colon = strrchr(s, ':');
    if (colon == NULL || (size_t)(colon - s) >= sizeof(ip)) {
        return false;
    }
    memcpy(ip, s, (size_t)(colon - s));
    ip[colon - s] = '\0';
    memset(a, 0, sizeof(*a));
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)atoi(colon + 1));
    return inet_pton(AF_INET, ip, &a->sin_addr) == 1;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

struct opts {
    double loss, reorder;
    double jitter_ms, reorder_min_ms, reorder_max_ms;
    bool independent;
};

/* Decides one datagram's fate and holds it for its departure. */
static void take(const struct opts *o, int dir, int flow, const uint8_t *buf,
                 size_t len)
{
    struct held h = {.dir = dir, .flow = flow, .len = len};
    uint64_t now = mono_ns();
    uint64_t delay_ns;

    cnt[dir].received++;
    if (uniform(dir) < o->loss) {
        cnt[dir].lost++;
        return;
    }
    delay_ns = (uint64_t)(uniform(dir) * o->jitter_ms * 1e6);
    h.at_ns = now + delay_ns;
    if (uniform(dir) < o->reorder) {
        cnt[dir].reordered++;
        h.at_ns += (uint64_t)((o->reorder_min_ms +
                               uniform(dir) *
                                   (o->reorder_max_ms - o->reorder_min_ms)) *
                              1e6);
    } else if (!o->independent) {
        uint64_t *last = &flows[flow].last_ns[dir];
        if (h.at_ns < *last) {
            h.at_ns = *last;
        }
        *last = h.at_ns;
    }
    h.order = order_next++;
    h.data = malloc(len);
    if (h.data == NULL) {
        perror("malloc");
        exit(1);
    }
    memcpy(h.data, buf, len);
    heap_push(h);
}

static void deliver(int listen_fd, const struct held *h)
{
    const struct flow *f = &flows[h->flow];
    ssize_t n = h->dir == UP
                    ? send(f->fd, h->data, h->len, 0)
                    : sendto(listen_fd, h->data, h->len, 0,
                             (const struct sockaddr *)&f->dev, sizeof(f->dev));
    if (n != (ssize_t)h->len) {
        cnt[h->dir].send_errors++;
        return;
    }
    cnt[h->dir].delivered++;
    if (log_file != NULL && h->len >= 16) {
        fprintf(log_file, "%s,%08" PRIx32 ",%" PRIu32 ",%" PRIu64 "\n",
                h->dir == UP ? "up" : "down", be32(h->data + 4),
                be32(h->data + 12), unix_us());
    }
}

static int flow_of(int epfd, const struct sockaddr_in *from,
                   const struct sockaddr_in *to)
{
    for (int i = 0; i < nflows; i++) {
        if (flows[i].dev.sin_port == from->sin_port &&
            flows[i].dev.sin_addr.s_addr == from->sin_addr.s_addr) {
            return i;
        }
    }
    if (nflows == MAX_FLOWS) {
        return -1;
    }
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int big = 1 << 20;
    if (fd < 0 || connect(fd, (const struct sockaddr *)to, sizeof(*to)) != 0) {
        perror("upstream socket");
        exit(1);
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)nflows};
    epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
    flows[nflows].dev = *from;
    flows[nflows].fd = fd;
    return nflows++;
}

static void write_stats(const char *path)
{
    FILE *f = path != NULL ? fopen(path, "w") : stdout;
    uint64_t held[2] = {0, 0};

    for (size_t i = 0; i < heap_len; i++) {
        held[heap[i].dir]++;
    }
    if (f == NULL) {
        perror(path);
        return;
    }
    fprintf(f, "{");
    for (int d = 0; d < 2; d++) {
        fprintf(f,
                "%s\"%s\": {\"received\": %" PRIu64 ", \"lost\": %" PRIu64
                ", \"reordered\": %" PRIu64 ", \"delivered\": %" PRIu64
                ", \"send_errors\": %" PRIu64 ", \"held_at_exit\": %" PRIu64
                "}",
                d ? ", " : "", d == UP ? "up" : "down", cnt[d].received,
                cnt[d].lost, cnt[d].reordered, cnt[d].delivered,
                cnt[d].send_errors, held[d]);
    }
    fprintf(f, ", \"flows\": %d}\n", nflows);
    if (f != stdout) {
        fclose(f);
    }
}

static void usage(void)
{
    fprintf(stderr,
            "usage: impair_relay --listen IP:PORT --to IP:PORT [--loss PCT] "
            "[--jitter-ms J] [--reorder PCT] [--reorder-ms MIN:MAX] "
            "[--seed N] [--independent] [--stats FILE] [--log FILE]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    struct opts o = {.reorder_min_ms = 70, .reorder_max_ms = 190};
    struct sockaddr_in listen_at, to;
    bool have_listen = false, have_to = false;
    const char *stats_path = NULL;
    uint64_t seed = 1;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--independent") == 0) {
            o.independent = true;
            continue;
        }
        if (v == NULL) {
            usage();
        }
        i++;
        if (strcmp(a, "--listen") == 0) {
            have_listen = parse_addr(v, &listen_at);
        } else if (strcmp(a, "--to") == 0) {
            have_to = parse_addr(v, &to);
        } else if (strcmp(a, "--loss") == 0) {
            o.loss = atof(v) / 100;
        } else if (strcmp(a, "--jitter-ms") == 0) {
            o.jitter_ms = atof(v);
        } else if (strcmp(a, "--reorder") == 0) {
            o.reorder = atof(v) / 100;
        } else if (strcmp(a, "--reorder-ms") == 0) {
            if (sscanf(v, "%lf:%lf", &o.reorder_min_ms, &o.reorder_max_ms) !=
                    2 ||
                o.reorder_max_ms < o.reorder_min_ms) {
                usage();
            }
        } else if (strcmp(a, "--seed") == 0) {
            seed = strtoull(v, NULL, 10);
        } else if (strcmp(a, "--stats") == 0) {
            stats_path = v;
        } else if (strcmp(a, "--log") == 0) {
            log_file = fopen(v, "w");
            if (log_file == NULL) {
                perror(v);
                return 1;
            }
            setvbuf(log_file, NULL, _IOFBF, 1 << 20);
        } else {
            usage();
        }
    }
    if (!have_listen || !have_to) {
        usage();
    }
    rng[UP] = seed * 2 + 1;
    rng[DOWN] = seed * 2 + 2;

    int lfd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int big = 4 << 20;
    if (lfd < 0 || bind(lfd, (const struct sockaddr *)&listen_at,
                        sizeof(listen_at)) != 0) {
        perror("listen socket");
        return 1;
    }
    setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
    epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    printf("ready\n");
    fflush(stdout);

    uint8_t buf[MAX_DGRAM];
    while (!stop) {
        uint64_t now = mono_ns();
        while (heap_len > 0 && heap[0].at_ns <= now) {
            struct held h = heap_pop();
            deliver(lfd, &h);
            free(h.data);
        }
        /* Wakes at the next departure; epoll counts whole milliseconds,
         * so a datagram leaves up to 1 ms late (less than the jitter). */
        int timeout = -1;
        if (heap_len > 0) {
            uint64_t wait = heap[0].at_ns - now;
            timeout = (int)((wait + 999999) / 1000000);
        }
        struct epoll_event evs[64];
        int n = epoll_wait(epfd, evs, 64, timeout);
        if (n < 0 && errno != EINTR) {
            perror("epoll_wait");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            uint32_t who = evs[i].data.u32;
            for (;;) {
                struct sockaddr_in from;
                socklen_t fl = sizeof(from);
                ssize_t r;
                if (who == UINT32_MAX) {
                    r = recvfrom(lfd, buf, sizeof(buf), 0,
                                 (struct sockaddr *)&from, &fl);
                } else {
                    r = recv(flows[who].fd, buf, sizeof(buf), 0);
                }
                if (r < 0) {
                    break; /* EAGAIN, or ICMP refused for an upstream */
                }
                if (who == UINT32_MAX) {
                    int f = flow_of(epfd, &from, &to);
                    if (f >= 0) {
                        take(&o, UP, f, buf, (size_t)r);
                    }
                } else {
                    take(&o, DOWN, (int)who, buf, (size_t)r);
                }
            }
        }
    }
    if (log_file != NULL) {
        fclose(log_file);
    }
    write_stats(stats_path);
    return 0;
}
