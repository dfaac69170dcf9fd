/* heap.c - a binary heap of slots with each slot's position, the state of
 * the fifo, lifo, minheap and maxheap selectors (selector.h).
 *
 * What: push, pop (remove the top), remove any slot and re-key a batch, all
 * O(log n); the order is the selector's `before` (ids for fifo/lifo, stored
 * priorities with ties to the older item for the heaps). 8 bytes per slot:
 * the heap array and each slot's place in it (UINT32_MAX: absent).
 *
 * Why one heap for four selectors: they differ only in their order, and a
 * heap with positions is what lets a remover take any live item out (a
 * consumed item under MAX_TIMES_SAMPLED, a priority update) in O(log n).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../replay.h"
#include "../selector.h"

#define NOPOS UINT32_MAX
/* Re-keying several slots: take them all out before their priorities change
 * and push them back after. Fixing one slot at a time after the change (sift
 * up/down) is wrong once two or more keys moved, since each sift assumes the
 * rest of the heap is in order. A detached slot's pos holds DETACHED until
 * it is pushed back (slots out of the heap stay out). */
#define DETACHED (UINT32_MAX - 1)

typedef struct ir_heap {
    ir_heap_before before;
    int keyed; /* ordered by stored priority: re-keyed on updates */
    uint64_t n;
    uint32_t *h, *pos;
} ir_heap;

void *heapStateNew(const ir_table *t, ir_heap_before before, int keyed) {
    ir_heap *h = calloc(1, sizeof(*h));
    if (!h) return NULL;
    h->before = before;
    h->keyed = keyed;
    h->h = malloc(t->o.capacity * sizeof(uint32_t));
    h->pos = malloc(t->o.capacity * sizeof(uint32_t));
    if (!h->h || !h->pos) {
        heapStateFree(h);
        return NULL;
    }
    memset(h->pos, 0xff, t->o.capacity * sizeof(uint32_t));
    return h;
}

void heapStateFree(void *st) {
    ir_heap *h = st;
    if (!h) return;
    free(h->h);
    free(h->pos);
    free(h);
}

static inline void heapSet(ir_heap *h, uint64_t i, uint32_t slot) {
    h->h[i] = slot;
    h->pos[slot] = (uint32_t)i;
}

static void heapUp(const ir_table *t, ir_heap *h, uint64_t i) {
    uint32_t x = h->h[i];
    while (i > 0) {
        uint64_t p = (i - 1) / 2;
        if (!h->before(t, x, h->h[p])) break;
        heapSet(h, i, h->h[p]);
        i = p;
    }
    heapSet(h, i, x);
}

static void heapDown(const ir_table *t, ir_heap *h, uint64_t i) {
    uint32_t x = h->h[i];
    for (;;) {
        uint64_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && h->before(t, h->h[c + 1], h->h[c])) c++;
        if (!h->before(t, h->h[c], x)) break;
        heapSet(h, i, h->h[c]);
        i = c;
    }
    heapSet(h, i, x);
}

void heapInsert(const ir_table *t, void *st, uint32_t slot) {
    ir_heap *h = st;
    if (h->pos[slot] != NOPOS) return;
    heapSet(h, h->n++, slot);
    heapUp(t, h, h->n - 1);
}

void heapRemoveSlot(const ir_table *t, void *st, uint32_t slot) {
    ir_heap *h = st;
    uint32_t i = h->pos[slot];
    if (i == NOPOS) return;
    h->pos[slot] = NOPOS;
    uint64_t last = --h->n;
    if (i == last) return;
    uint32_t moved = h->h[last];
    heapSet(h, i, moved);
    heapUp(t, h, i);
    heapDown(t, h, h->pos[moved]);
}

void heapRekeyBegin(const ir_table *t, void *st, const uint64_t *slots, size_t n) {
    ir_heap *h = st;
    if (!h->keyed) return;
    for (size_t i = 0; i < n; i++) {
        uint32_t slot = (uint32_t)slots[i];
        if (h->pos[slot] == NOPOS || h->pos[slot] == DETACHED) continue;
        heapRemoveSlot(t, h, slot);
        h->pos[slot] = DETACHED;
    }
}

void heapRekeyEnd(const ir_table *t, void *st, const uint64_t *slots, size_t n) {
    ir_heap *h = st;
    if (!h->keyed) return;
    for (size_t i = 0; i < n; i++) {
        uint32_t slot = (uint32_t)slots[i];
        if (h->pos[slot] != DETACHED) continue;
        h->pos[slot] = NOPOS;
        heapInsert(t, h, slot);
    }
}

uint32_t heapTop(const void *st) { return ((const ir_heap *)st)->h[0]; }

/* Whether a heap state holds exactly `live` slots, each at its recorded position
 * and none before its parent: 0, or -1 with what is wrong in why (the fuzzer's
 * invariant after every input). */
int heapCheck(const ir_table *t, const void *st, uint64_t live, char *why, size_t len) {
    const ir_heap *h = st;
    if (h->n != live) {
        snprintf(why, len, "holds %llu slots, %llu items live", (unsigned long long)h->n,
                 (unsigned long long)live);
        return -1;
    }
    for (uint64_t i = 0; i < h->n; i++) {
        uint32_t s = h->h[i];
        if (s >= t->o.capacity || h->pos[s] != i || tableSlotOf(t, t->slot_id[s]) != s) {
            snprintf(why, len, "entry %llu (slot %u) is not a live slot at its position",
                     (unsigned long long)i, s);
            return -1;
        }
        if (i && h->before(t, s, h->h[(i - 1) / 2])) {
            snprintf(why, len, "out of order at %llu", (unsigned long long)i);
            return -1;
        }
    }
    return 0;
}
