/* Names of the counters' reasons; see counters.h. */
#include "gateway/core/counters.h"

static const char *const refusal_names[GW_REFUSE_COUNT_] = {
#define XX(name, text) [GW_REFUSE_##name] = text,
    GW_REFUSAL_MAP(XX)
#undef XX
};

const char *gw_refusal_name(enum gw_refusal why)
{
    return (unsigned)why < GW_REFUSE_COUNT_ ? refusal_names[why] : "?";
}
