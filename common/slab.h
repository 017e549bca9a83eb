/*
 * slab: fixed-size items carved from blocks of SLAB_BYTES, whose pages go
 * back to the kernel once every item of a block is freed.
 *
 * For tables of many small entries that come and go in bulk (the inodes
 * the kernel holds: it forgets them by the thousand under memory
 * pressure).  Freed malloc() chunks of such entries stay in the process
 * when live allocations sit between them; a block here holds nothing
 * else, so when its last item goes its pages are given back with
 * MADV_DONTNEED (the block itself stays allocated, for the next items:
 * no mapping is made or unmapped per block).
 *
 * Not thread-safe: the caller's lock guards a pool and its items.
 */
#ifndef OBJFS_SLAB_H
#define OBJFS_SLAB_H

#include <stddef.h>
#include <stdint.h>

#define SLAB_BYTES (64u << 10)

struct slab_pool;

/* A pool of items of @item bytes (at most SLAB_BYTES / 8); NULL if out
 * of memory or @item is 0 or too big. */
struct slab_pool *slab_pool_new(size_t item);
/* The same, with @owner for slab_owner() of its items. */
struct slab_pool *slab_pool_new_owned(size_t item, void *owner);
/* Free the pool and every block: its items must not be used after. */
void slab_pool_free(struct slab_pool *p);

/* A zeroed item, or NULL if out of memory. */
void *slab_alloc(struct slab_pool *p);
/* Give @item (from slab_alloc() of @p, or NULL) back. */
void slab_free(struct slab_pool *p, void *item);

/* The owner given to slab_pool_new_owned() of the pool @item came from
 * (slab_alloc(), not yet freed): kept in its block's first word, so items
 * need no pointer of their own to it. */
static inline void *slab_owner(const void *item)
{
	return *(void *const *)((uintptr_t)item & ~(uintptr_t)(SLAB_BYTES - 1));
}

struct slab_stats {
	uint64_t items;	 /* handed out now */
	uint64_t blocks; /* allocated (each SLAB_BYTES of address space) */
	uint64_t empty;	 /* of those, with no item: their pages given back */
};
void slab_stats(const struct slab_pool *p, struct slab_stats *ret);

#endif
