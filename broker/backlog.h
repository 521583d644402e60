/*
 * The listen backlog of the broker's TCP listeners, raised from inside the
 * plugin: Mosquitto 2.0 listens with a fixed backlog of 100.
 */
#ifndef GW_BROKER_BACKLOG_H
#define GW_BROKER_BACKLOG_H

#include "common/error.h"

/* The kernel's net.core.somaxconn, or a negative GW_E* when unreadable. */
GW_MUST_CHECK int gw_broker_backlog_somaxconn(void);

/*
 * Calls listen(fd, backlog) again on every listening TCP socket of this
 * process (Linux then takes the new backlog; the kernel caps it at
 * somaxconn). Returns how many sockets it changed, or a negative GW_E*.
 */
GW_MUST_CHECK int gw_broker_backlog_raise(int backlog);

#endif /* GW_BROKER_BACKLOG_H */
