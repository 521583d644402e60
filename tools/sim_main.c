/* hybridgw-sim entry point: picks the subcommand. */
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tools/sim.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: hybridgw-sim device|backend|load [options]\n"
                 "       hybridgw-sim SUBCOMMAND --help\n"
                 "       hybridgw-sim free-port [--udp]\n");
}

/*
 * Prints a port that was free on 127.0.0.1 a moment ago, for test
 * scripts that must hand a port to a server that cannot report its own.
 */
static int free_port(int argc, char **argv)
{
    int type =
        argc > 1 && strcmp(argv[1], "--udp") == 0 ? SOCK_DGRAM : SOCK_STREAM;
    struct sockaddr_in sin = {.sin_family = AF_INET,
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, type, 0);

    if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
        getsockname(fd, (struct sockaddr *)&sin, &len) != 0) {
        perror("free-port");
        if (fd >= 0) {
            close(fd);
        }
        return 1;
    }
    printf("%u\n", (unsigned)ntohs(sin.sin_port));
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "device") == 0) {
        return gw_sim_device_main(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "backend") == 0) {
        return gw_sim_backend_main(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "load") == 0) {
        return gw_sim_load_main(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "free-port") == 0) {
        return free_port(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    usage(stderr);
    return 2;
}
