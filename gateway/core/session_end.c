/*
 * The names of the session states and end reasons (session_end.h), for
 * log lines, metrics and the HTTP API.
 */
#include "gateway/core/session_end.h"

static const char *const end_names[GW_END_COUNT_] = {
#define XX(name, text) [GW_END_##name] = text,
    GW_SESSION_END_MAP(XX)
#undef XX
};

static const char *const state_names[GW_SESSION_STATE_COUNT_] = {
#define XX(name, text) [GW_SESSION_##name] = text,
    GW_SESSION_STATE_MAP(XX)
#undef XX
};

const char *gw_session_end_name(enum gw_session_end why)
{
    return (unsigned)why < GW_END_COUNT_ ? end_names[why] : "?";
}

const char *gw_session_state_name(enum gw_session_state state)
{
    return (unsigned)state < GW_SESSION_STATE_COUNT_ ? state_names[state] : "?";
}
