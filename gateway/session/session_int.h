/*
 * What the session table offers the device calls beside it in this
 * folder (device_call.c): their registration, and a session joining a
 * call. Private to gateway/session/.
 */
#ifndef GW_SESSION_INT_H
#define GW_SESSION_INT_H

#include "gateway/session/session.h"

/* The call module's callbacks (copied); once, right after the table's
 * init. */
void gw__session_set_call_ops(struct gw_sessions *t,
                              const struct gw_session_call_ops *ops);

/*
 * The session leaves its backend for a device call (call is not owned):
 * the WebSocket closes without a goodbye to the device, queued downlink
 * goes, and from now on its uplink goes to the call. ACTIVE sessions only.
 */
void gw__session_enter_call(struct gw_session *s, void *call);

#endif /* GW_SESSION_INT_H */
