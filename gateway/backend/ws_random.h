/*
 * Random bytes for WebSocket masking keys, ours and libwebsockets' alike
 * (ws_random.c).
 */
#ifndef GW_WS_RANDOM_H
#define GW_WS_RANDOM_H

#include <stddef.h>

/* Fills buf with len strong random bytes; returns len, or fewer on a
 * failure of the generator. */
size_t gw_ws_random(void *buf, size_t len);

#endif /* GW_WS_RANDOM_H */
