/*
 * Hex text <-> bytes, for the key and nonce fields of the hello
 * (docs/protocol.md section 3). Decoding is case-insensitive and strict.
 */
#ifndef GW_CODEC_HEX_H
#define GW_CODEC_HEX_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/*
 * Writes 2*len lowercase hex digits and a NUL to out (cap bytes).
 * Returns 0, or GW_ENOSPC if cap < 2*len + 1.
 */
GW_MUST_CHECK int gw_hex_encode(const uint8_t *buf, size_t len, char *out,
                                size_t cap);

/*
 * Decodes exactly text_len hex digits into out. text_len must be even and
 * text_len / 2 must equal out_len: the firmware accepts exactly 16 bytes,
 * so a short or long field is an error, not a prefix. Returns 0,
 * GW_EMALFORMED (odd length or a non-hex digit) or GW_EINVAL (wrong size).
 */
GW_MUST_CHECK int gw_hex_decode(const char *text, size_t text_len, uint8_t *out,
                                size_t out_len);

/* Value of one hex digit (either case), or -1. */
int gw_hex_nibble(char c);

#endif /* GW_CODEC_HEX_H */
