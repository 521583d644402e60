/*
 * The command line that hybridgw-sim's `device` and `load` subcommands
 * share: the per-device options, their help text and the outputs both
 * write (packet log, drop counters).
 */
#ifndef GW_SIM_CLI_H
#define GW_SIM_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tools/sim_device.h"

/* Settings of both subcommands, filled by gw_sim_cli_parse. */
struct gw_sim_cli {
    struct gw_sim_device_options dev; /* per device options */
    char host[256];                   /* storage for dev.host */
    bool json;                        /* print the result as JSON */
    bool mode_set;                    /* --mode given (else from --aec) */
    bool frames_set;                  /* --frames given */
    int log_level;                    /* enum gw_log_level */
    const char *packet_log_path;      /* --packet-log FILE */
};

/* Defaults for the device (one conversation) on 127.0.0.1:1883. */
void gw_sim_cli_defaults(struct gw_sim_cli *cli);

/*
 * Applies one option returned by getopt_long. Returns 1 if it was one of
 * the shared options, 0 if not, GW_EINVAL (message printed) for a bad
 * value.
 */
GW_MUST_CHECK int gw_sim_cli_parse(struct gw_sim_cli *cli, int code,
                                   const char *arg);

/* Settles defaults that depend on other options (mode from --aec). */
void gw_sim_cli_finish(struct gw_sim_cli *cli);

/* Help text of the shared options. */
void gw_sim_cli_usage(FILE *out);

/* Parses "host:port" or "port" into cli->host/dev.port. */
GW_MUST_CHECK int gw_sim_cli_broker(struct gw_sim_cli *cli, const char *arg);

/*
 * Fills out with the shared long options, then the n_extra of extra, then
 * the zero entry getopt_long ends on. Returns 0, or GW_ENOSPC when cap
 * entries are too few.
 */
GW_MUST_CHECK int gw_sim_cli_longopts(const struct option *extra,
                                      size_t n_extra, struct option *out,
                                      size_t cap);

/*
 * Opens cli->packet_log_path and writes the CSV header; buffer > 0 gives
 * the stream a buffer of that size. NULL, with perror, on failure.
 */
FILE *gw_sim_cli_packet_log(const struct gw_sim_cli *cli, size_t buffer);

/* The "drops" line of a summary, each reason with its count, no newline. */
void gw_sim_cli_print_drops(const uint64_t drops[GW_SIM_DROP_COUNT_]);

#endif /* GW_SIM_CLI_H */
