/*
 * The firmware's downlink checks (anchor section 4.3), pure: what the
 * simulated device accepts, and why it drops the rest.
 */
#include "tools/sim_device_int.h"

static const char *const drop_names[GW_SIM_DROP_COUNT_] = {
    "short", "type", "length", "toobig", "replay", "idle", "queue", "opus"};

const char *gw_sim_drop_name(enum gw_sim_drop reason)
{
    return (unsigned)reason < GW_SIM_DROP_COUNT_ ? drop_names[reason]
                                                 : "unknown";
}

bool gw_sim_drop_is_violation(enum gw_sim_drop reason)
{
    /* Audio before tts start can be a broker-vs-UDP race, not a bug. */
    return (unsigned)reason < GW_SIM_DROP_COUNT_ && reason != GW_SIM_DROP_IDLE;
}

void gw_sim_downlink_reset(struct gw_sim_downlink *dl)
{
    dl->last_seq = 0;
}

enum gw_sim_drop gw_sim_drop_of(int err)
{
    switch (err) {
    case GW_ETRUNC:
        return GW_SIM_DROP_SHORT;
    case GW_EPROTO:
        return GW_SIM_DROP_TYPE;
    case GW_ETOOBIG:
        return GW_SIM_DROP_TOOBIG;
    case GW_EREPLAY:
        return GW_SIM_DROP_REPLAY;
    default:
        return GW_SIM_DROP_LENGTH;
    }
}

int gw_sim_downlink_check(struct gw_sim_downlink *dl, const uint8_t *buf,
                          size_t len, struct gw_udp_header *h)
{
    struct gw_udp_header hdr;
    int err = gw_udp_header_parse(buf, len, &hdr);

    if (err == 0) {
        err = gw_udp_header_check_sequence(dl->last_seq, hdr.sequence);
    }
    if (err != 0) {
        dl->drops[gw_sim_drop_of(err)]++;
        return err;
    }
    if (hdr.sequence != dl->last_seq + 1) {
        dl->gaps++; /* the firmware only warns */
        dl->lost += hdr.sequence - dl->last_seq - 1;
    }
    dl->last_seq = hdr.sequence;
    dl->accepted++;
    *h = hdr;
    return 0;
}
