/*
 * UTF-8 validation (RFC 3629): MQTT strings, topic levels and JSON text
 * must be well-formed; overlong forms, surrogates and values past U+10FFFF
 * are refused.
 */
#ifndef GW_CODEC_UTF8_H
#define GW_CODEC_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* True if buf[0..len) is well-formed UTF-8. NUL bytes are allowed here. */
bool gw_utf8_valid(const char *buf, size_t len);

#endif /* GW_CODEC_UTF8_H */
