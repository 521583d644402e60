/*
 * Instance record parser. Invariants: an accepted record has valid name
 * and boot, and formats back into a record that parses to the same
 * fields; a refused one leaves the result zeroed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/instance_record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct gw_instance_record zero;
    struct gw_instance_record r, back;
    char buf[GW_INSTANCE_RECORD_MAX_LEN];
    int err = gw_instance_record_parse((const char *)data, size, &r);

    if (err != 0) {
        if (memcmp(&r, &zero, sizeof(r)) != 0) {
            abort();
        }
        return 0;
    }
    if (!gw_instance_name_valid(r.name, GW_INSTANCE_NAME_MAX) ||
        !gw_instance_name_valid(r.boot, GW_INSTANCE_BOOT_MAX)) {
        abort();
    }
    int n = gw_instance_record_format(&r, buf, sizeof(buf));
    if (n <= 0 || gw_instance_record_parse(buf, (size_t)n, &back) != 0 ||
        strcmp(back.name, r.name) != 0 || strcmp(back.boot, r.boot) != 0 ||
        back.state != r.state) {
        abort();
    }
    if (r.state != GW_INSTANCE_GONE && memcmp(&back, &r, sizeof(r)) != 0) {
        abort();
    }
    return 0;
}
