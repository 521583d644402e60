/*
 * One intrusive doubly linked list for every queue in the tree: a node
 * lives inside the object it links, so putting an object on a list never
 * allocates and taking it off is O(1). An unlinked node points at itself,
 * so gw_list_unlink is safe to call twice and gw_list_linked says where an
 * object is without a separate flag.
 */
#ifndef GW_COMMON_LIST_H
#define GW_COMMON_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct gw_list {
    struct gw_list *prev, *next;
};

/* The object that holds ptr as its member field. */
#define GW_CONTAINER_OF(ptr, type, field)                                      \
    ((type *)(void *)((char *)(ptr)-offsetof(type, field)))

/* The object that holds node as its member field. */
#define GW_LIST_ENTRY(node, type, field) GW_CONTAINER_OF(node, type, field)

/* for (it = first; it != head; it = next), safe against unlinking it. */
#define GW_LIST_FOREACH_SAFE(it, tmp, head)                                    \
    for ((it) = (head)->next, (tmp) = (it)->next; (it) != (head);              \
         (it) = (tmp), (tmp) = (it)->next)

static inline void gw_list_init(struct gw_list *head)
{
    head->prev = head;
    head->next = head;
}

static inline bool gw_list_empty(const struct gw_list *head)
{
    return head->next == head;
}

/* Whether node is on some list (an initialised, unlinked node is not). */
static inline bool gw_list_linked(const struct gw_list *node)
{
    return node->next != node;
}

static inline void gw_list_insert_tail(struct gw_list *head,
                                       struct gw_list *node)
{
    node->prev = head->prev;
    node->next = head;
    head->prev->next = node;
    head->prev = node;
}

static inline void gw_list_insert_head(struct gw_list *head,
                                       struct gw_list *node)
{
    node->next = head->next;
    node->prev = head;
    head->next->prev = node;
    head->next = node;
}

static inline void gw_list_unlink(struct gw_list *node)
{
    node->prev->next = node->next;
    node->next->prev = node->prev;
    node->prev = node;
    node->next = node;
}

/* The first node, or NULL when the list is empty. */
static inline struct gw_list *gw_list_first(const struct gw_list *head)
{
    return head->next != head ? head->next : NULL;
}

static inline size_t gw_list_count(const struct gw_list *head)
{
    size_t n = 0;

    for (const struct gw_list *it = head->next; it != head; it = it->next) {
        n++;
    }
    return n;
}

#endif /* GW_COMMON_LIST_H */
