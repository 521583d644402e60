/*
 * Lists that devices share (tools, resources, templates, prompts), private
 * to gateway/device/: devices of one firmware report the same lists, so
 * each distinct list is kept once, found by its content, counted by the
 * records that hold it and freed with the last of them.
 */
#ifndef GW_SHARED_LISTS_INT_H
#define GW_SHARED_LISTS_INT_H

#include <stddef.h>

#include <cjson/cJSON.h>

/*
 * The shared copy of items (moved in: freed when an equal list is held
 * already, else kept as that copy), with one more holder; NULL for NULL.
 * On OOM items stays a copy of its holder's alone. Never to be changed:
 * every holder sees it.
 */
const cJSON *gw__device_list_share(cJSON *items);

/* A holder lets go of a list gw__device_list_share gave (NULL: none); the
 * last one frees it. */
void gw__device_list_unshare(const cJSON *items);

/* Holders of a shared list (0: not one of them). */
unsigned gw__device_list_refs(const cJSON *items);

/* Distinct lists held now. */
size_t gw__device_lists_held(void);

#endif /* GW_SHARED_LISTS_INT_H */
