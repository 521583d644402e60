/*
 * What relaying costs on this machine before any gateway logic: the
 * kernel's share of one UDP datagram in and one small TCP write out, per
 * packet, with the same batching as the gateway's UDP reader. It forks a
 * sink (N TCP connections read and discarded, as the backend does) and a
 * source (datagrams spread evenly at the given rate, as N devices send
 * them) and measures only the relay in the middle, from getrusage().
 *
 * On loopback the sender of a TCP segment also pays for its delivery
 * (the receiving socket's processing and the wakeup of the reader run in
 * the sender's system call), so this floor is higher than on a real
 * network. bench/run.sh also runs it as it runs the gateway: the relay in
 * the gateway's network namespace, sink and source in their own, reached
 * over veth pairs; it reports the floor beside the gateway's figure.
 *
 *   loopback_floor [--conns N] [--rate PPS] [--seconds S] [--size BYTES]
 *                  [--pause-ms MS | --pause-us US] [--relay-ip IP]
 *                  [--sink-ip IP] [--sink-netns NAME] [--source-netns NAME]
 *                  [--relay-cpu N]
 * prints one JSON line: {"conns":..,"packets":..,"us_per_packet":..,...}
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* recvmmsg */
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BATCH    64
#define WARMUP_S 1

static int conns = 1000, rate = 16667, seconds = 10, size = 120;
static long pause_us = 1000; /* after each drained read, as the gateway */
/* Where each part runs: the relay in the caller's network namespace, the
 * sink and the source each in a named one (ip netns) when given. */
static const char *relay_ip = "127.0.0.1", *sink_ip = "127.0.0.1";
static const char *sink_ns, *source_ns;
/* With --relay-cpu the relay moves to that CPU once its sink and source
 * are forked; they keep the CPUs it was started on (bench/run.sh's pinned
 * layout: the relay alone on one core, as the gateway is). */
static int relay_cpu = -1;

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static struct sockaddr_in ipv4(const char *ip, uint16_t port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};

    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
        fprintf(stderr, "loopback_floor: bad address %s\n", ip);
        exit(2);
    }
    return a;
}

/* Moves the calling process into the named network namespace. */
static void enter_netns(const char *name)
{
    char path[256];
    int fd;

    if (name == NULL) {
        return;
    }
    snprintf(path, sizeof(path), "/run/netns/%s", name);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
        die(path);
    }
    close(fd);
}

static uint16_t bound_port(int fd)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);

    if (getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        die("getsockname");
    }
    return ntohs(a.sin_port);
}

/* The backend's side: accept everything, read everything, until killed.
 * Its port goes back to the relay through the pipe. */
static void run_sink(int report)
{
    static char buf[65536];
    struct sockaddr_in at = ipv4(sink_ip, 0);
    int lfd;

    enter_netns(sink_ns);
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&at, sizeof(at)) != 0 ||
        listen(lfd, 4096) != 0) {
        die("sink socket");
    }
    uint16_t port = bound_port(lfd);
    if (write(report, &port, sizeof(port)) != (ssize_t)sizeof(port)) {
        die("sink report");
    }
    close(report);

    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd}, evs[256];
    int ep = epoll_create1(0);

    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) != 0) {
        die("sink epoll");
    }
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == lfd) {
                int c = accept(lfd, NULL, NULL);
                struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};
                if (c >= 0) {
                    (void)epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
                }
                continue;
            }
            if (read(fd, buf, sizeof(buf)) <= 0) {
                close(fd);
            }
        }
    }
}

/* The devices' side: datagrams evenly spread at the rate, until killed. */
static void run_source(uint16_t port)
{
    struct sockaddr_in to = ipv4(relay_ip, port);
    char buf[1500];
    int fd;
    double interval = 1.0 / rate, next = now_s();

    enter_netns(source_ns);
    fd = socket(AF_INET, SOCK_DGRAM, 0);

    memset(buf, 0x5a, sizeof(buf));
    if (fd < 0) {
        die("source socket");
    }
    for (;;) {
        double t = now_s();
        if (t < next) {
            struct timespec ts = {0, (long)((next - t) * 1e9)};
            nanosleep(&ts, NULL);
            continue;
        }
        (void)sendto(fd, buf, (size_t)size, 0, (struct sockaddr *)&to,
                     sizeof(to));
        next += interval;
        if (t - next > 0.1) {
            next = t; /* never burst to catch up after a stall */
        }
    }
}

static void parse(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        int v = atoi(argv[i + 1]);
        if (strcmp(argv[i], "--relay-ip") == 0) {
            relay_ip = argv[i + 1];
        } else if (strcmp(argv[i], "--sink-ip") == 0) {
            sink_ip = argv[i + 1];
        } else if (strcmp(argv[i], "--sink-netns") == 0) {
            sink_ns = argv[i + 1];
        } else if (strcmp(argv[i], "--source-netns") == 0) {
            source_ns = argv[i + 1];
        } else if (strcmp(argv[i], "--conns") == 0) {
            conns = v;
        } else if (strcmp(argv[i], "--rate") == 0) {
            rate = v;
        } else if (strcmp(argv[i], "--seconds") == 0) {
            seconds = v;
        } else if (strcmp(argv[i], "--size") == 0) {
            size = v;
        } else if (strcmp(argv[i], "--pause-ms") == 0) {
            pause_us = 1000L * v;
        } else if (strcmp(argv[i], "--pause-us") == 0) {
            pause_us = v;
        } else if (strcmp(argv[i], "--relay-cpu") == 0) {
            relay_cpu = v;
        } else {
            fprintf(stderr, "loopback_floor: unknown option %s\n", argv[i]);
            exit(2);
        }
    }
    if (conns < 1 || rate < 1 || seconds < WARMUP_S + 1 || size < 1 ||
        size > 1500 || pause_us < 0 || pause_us >= 1000000) {
        fprintf(stderr, "loopback_floor: bad arguments\n");
        exit(2);
    }
}

int main(int argc, char **argv)
{
    static char bufs[BATCH][1500];
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    int ufd, *tcp, one = 1, report[2];
    uint16_t sink_port;
    pid_t sink, source;

    parse(argc, argv);
    struct sockaddr_in any = ipv4(relay_ip, 0);
    signal(SIGPIPE, SIG_IGN);
    ufd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    if (ufd < 0 || bind(ufd, (struct sockaddr *)&any, sizeof(any)) != 0 ||
        pipe(report) != 0) {
        die("sockets");
    }
    sink = fork();
    if (sink == 0) {
        close(report[0]);
        run_sink(report[1]);
    }
    close(report[1]);
    if (read(report[0], &sink_port, sizeof(sink_port)) !=
        (ssize_t)sizeof(sink_port)) {
        die("sink port");
    }
    close(report[0]);
    struct sockaddr_in to = ipv4(sink_ip, sink_port);
    tcp = calloc((size_t)conns, sizeof(*tcp));
    for (int i = 0; i < conns; i++) {
        tcp[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (tcp[i] < 0 ||
            connect(tcp[i], (struct sockaddr *)&to, sizeof(to)) != 0) {
            die("connect");
        }
        setsockopt(tcp[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    source = fork();
    if (source == 0) {
        run_source(bound_port(ufd));
    }
    if (relay_cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(relay_cpu, &set);
        if (sched_setaffinity(0, sizeof(set), &set) != 0) {
            die("sched_setaffinity");
        }
    }

    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = ufd}, out;
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ufd, &ev) != 0) {
        die("epoll");
    }
    for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = bufs[i];
        iov[i].iov_len = sizeof(bufs[i]);
        memset(&msgs[i], 0, sizeof(msgs[i]));
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    double start = now_s(), t0 = 0, c0 = 0;
    uint64_t packets = 0, counted = 0;
    unsigned next_conn = 0;
    for (;;) {
        double t = now_s();
        if (t0 == 0 && t - start >= WARMUP_S) {
            t0 = t;
            c0 = cpu_s();
            counted = packets;
        }
        if (t - start >= seconds) {
            break;
        }
        if (epoll_wait(ep, &out, 1, 100) <= 0) {
            continue;
        }
        for (;;) {
            int n = recvmmsg(ufd, msgs, BATCH, MSG_DONTWAIT, NULL);
            if (n <= 0) {
                break;
            }
            for (int i = 0; i < n; i++) {
                (void)send(tcp[next_conn], bufs[i], msgs[i].msg_len,
                           MSG_DONTWAIT | MSG_NOSIGNAL);
                next_conn = (next_conn + 1) % (unsigned)conns;
            }
            packets += (uint64_t)n;
            if (n < BATCH) {
                break;
            }
        }
        if (pause_us > 0) {
            struct timespec ts = {0, pause_us * 1000L};
            nanosleep(&ts, NULL);
        }
    }
    double cpu = cpu_s() - c0, wall = now_s() - t0;
    uint64_t n = packets - counted;
    kill(source, SIGKILL);
    kill(sink, SIGKILL);
    waitpid(source, NULL, 0);
    waitpid(sink, NULL, 0);
    /* packets_all: the whole run's, for counts taken over the whole
     * process (bench/run.sh's system calls per packet). */
    printf("{\"conns\":%d,\"rate\":%d,\"size\":%d,\"pause_us\":%ld,"
           "\"packets\":%llu,\"packets_all\":%llu,\"cpu_pct\":%.1f,"
           "\"us_per_packet\":%.3f}\n",
           conns, rate, size, pause_us, (unsigned long long)n,
           (unsigned long long)packets, 100.0 * cpu / wall,
           n > 0 ? cpu * 1e6 / (double)n : 0.0);
    return n > 0 ? 0 : 1;
}
