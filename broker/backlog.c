/*
 * Finds the broker's listening TCP sockets among the process's descriptors
 * (the plugin API does not hand them out) and gives them a new backlog.
 */
#include "broker/backlog.h"

#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#define SOMAXCONN_PATH "/proc/sys/net/core/somaxconn"

int gw_broker_backlog_somaxconn(void)
{
    FILE *f = fopen(SOMAXCONN_PATH, "r");
    int n = 0;

    if (f == NULL) {
        return GW_EIO;
    }
    if (fscanf(f, "%d", &n) != 1 || n < 1) {
        n = GW_EIO;
    }
    fclose(f);
    return n;
}

static int sockopt(int fd, int name)
{
    int v = 0;
    socklen_t len = sizeof(v);

    return getsockopt(fd, SOL_SOCKET, name, &v, &len) == 0 ? v : -1;
}

/* Listening, TCP over IPv4 or IPv6: not a unix socket nor a client's. */
static int tcp_listener(int fd)
{
    int domain = sockopt(fd, SO_DOMAIN);

    return sockopt(fd, SO_ACCEPTCONN) == 1 &&
           (domain == AF_INET || domain == AF_INET6) &&
           sockopt(fd, SO_TYPE) == SOCK_STREAM &&
           sockopt(fd, SO_PROTOCOL) == IPPROTO_TCP;
}

int gw_broker_backlog_raise(int backlog)
{
    DIR *dir = opendir("/proc/self/fd");
    struct dirent *e;
    int raised = 0;

    if (dir == NULL) {
        return GW_EIO;
    }
    while ((e = readdir(dir)) != NULL) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd < 0 || fd == dirfd(dir) ||
            fd > 0x7fffffff) {
            continue;
        }
        if (tcp_listener((int)fd) && listen((int)fd, backlog) == 0) {
            raised++;
        }
    }
    closedir(dir);
    return raised;
}
