/*
 * slab: see slab.h.
 *
 * Blocks are SLAB_BYTES long and aligned, so an item finds its block by
 * masking its address; a block's header (its list links, free items and
 * counts) sits at its start, and its items after it.  Blocks are carved
 * from chunks mapped anonymous, 1 MiB for the first and doubling up to
 * 64 MiB, so that a pool of a million items makes a dozen mappings, not
 * one per block; a chunk's pages are only touched as its blocks are used.
 *
 *   partial   blocks with a free or never used item (alloc takes from the
 *             first)
 *   full      every item handed out
 *   empty     no item handed out: the pages after the header's were
 *             given back (MADV_DONTNEED), and come back zeroed on reuse
 */
#define _GNU_SOURCE
#include "slab.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(a, n) ASAN_POISON_MEMORY_REGION(a, n)
#define UNPOISON(a, n) ASAN_UNPOISON_MEMORY_REGION(a, n)
#else
#define POISON(a, n) ((void)(a), (void)(n))
#define UNPOISON(a, n) ((void)(a), (void)(n))
#endif

#define CHUNK_MIN (1u << 20)
#define CHUNK_MAX (64u << 20)
#define HEADER 64 /* bytes before a block's first item */
#define PAGE 4096

enum blk_list { ON_PARTIAL, ON_FULL, ON_EMPTY };

struct blk {
	void *owner; /* the pool's (slab_owner()): first, as slab.h reads it */
	struct blk *prev, *next;
	void *free;	 /* freed items, linked through their first word */
	uint32_t used;	 /* items handed out */
	uint32_t carved; /* items ever handed out since the block was (re)used */
	enum blk_list list;
};

struct chunk {
	struct chunk *next;
	void *base; /* the mapping as made (to unmap it) */
	size_t len;
};

struct slab_pool {
	void *owner;
	size_t item, per_blk;
	struct blk *lists[3];
	/* the chunk blocks are carved from next: [next_blk, end) */
	uintptr_t next_blk, end;
	size_t chunk_len; /* of the next chunk to map */
	struct chunk *chunks;
	uint64_t items, blocks, empty;
};

_Static_assert(sizeof(struct blk) <= HEADER, "a block's header fits before its items");
_Static_assert(offsetof(struct blk, owner) == 0, "slab_owner() reads the first word");

struct slab_pool *slab_pool_new(size_t item)
{
	return slab_pool_new_owned(item, NULL);
}

struct slab_pool *slab_pool_new_owned(size_t item, void *owner)
{
	struct slab_pool *p;

	if (!item)
		return NULL;
	/* room for the free list's link; 8-byte aligned */
	if (item < sizeof(void *))
		item = sizeof(void *);
	item = (item + 7) & ~(size_t)7;
	if (!item || item > SLAB_BYTES / 8)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->owner = owner;
	p->item = item;
	p->per_blk = (SLAB_BYTES - HEADER) / item;
	p->chunk_len = CHUNK_MIN;
	return p;
}

void slab_pool_free(struct slab_pool *p)
{
	struct chunk *c, *next;

	if (!p)
		return;
	for (c = p->chunks; c; c = next) {
		next = c->next;
		munmap(c->base, c->len);
		free(c);
	}
	free(p);
}

static void list_del(struct slab_pool *p, struct blk *b)
{
	if (b->prev)
		b->prev->next = b->next;
	else
		p->lists[b->list] = b->next;
	if (b->next)
		b->next->prev = b->prev;
	b->prev = b->next = NULL;
}

static void list_add(struct slab_pool *p, struct blk *b, enum blk_list l)
{
	b->list = l;
	b->prev = NULL;
	b->next = p->lists[l];
	if (b->next)
		b->next->prev = b;
	p->lists[l] = b;
}

/* A new chunk, aligned to SLAB_BYTES: the blocks to carve.  0 or -1. */
static int chunk_map(struct slab_pool *p)
{
	size_t len = p->chunk_len + SLAB_BYTES;
	struct chunk *c = malloc(sizeof(*c));
	uintptr_t at;
	void *m;

	if (!c)
		return -1;
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		free(c);
		return -1;
	}
	c->base = m;
	c->len = len;
	c->next = p->chunks;
	p->chunks = c;
	at = ((uintptr_t)m + SLAB_BYTES - 1) & ~(uintptr_t)(SLAB_BYTES - 1);
	p->next_blk = at;
	p->end = at + p->chunk_len;
	if (p->chunk_len < CHUNK_MAX)
		p->chunk_len *= 2;
	return 0;
}

/* A block to take an item from: a partial one, else an empty one, else
 * a new one. */
static struct blk *blk_get(struct slab_pool *p)
{
	struct blk *b = p->lists[ON_PARTIAL];

	if (b)
		return b;
	b = p->lists[ON_EMPTY];
	if (b) {
		list_del(p, b);
		p->empty--;
	} else {
		if (p->next_blk + SLAB_BYTES > p->end && chunk_map(p) < 0)
			return NULL;
		b = (struct blk *)p->next_blk;
		p->next_blk += SLAB_BYTES;
		p->blocks++;
	}
	b->owner = p->owner;
	b->free = NULL;
	b->used = b->carved = 0;
	list_add(p, b, ON_PARTIAL);
	return b;
}

void *slab_alloc(struct slab_pool *p)
{
	struct blk *b = blk_get(p);
	void *item;

	if (!b)
		return NULL;
	if (b->free) {
		item = b->free;
		UNPOISON(item, p->item);
		b->free = *(void **)item;
	} else {
		item = (char *)b + HEADER + (size_t)b->carved * p->item;
		b->carved++;
	}
	b->used++;
	p->items++;
	if (b->used == p->per_blk) {
		list_del(p, b);
		list_add(p, b, ON_FULL);
	}
	memset(item, 0, p->item);
	return item;
}

void slab_free(struct slab_pool *p, void *item)
{
	struct blk *b;

	if (!item)
		return;
	b = (struct blk *)((uintptr_t)item & ~(uintptr_t)(SLAB_BYTES - 1));
	*(void **)item = b->free;
	b->free = item;
	/* but its link: a use after free is caught under ASan */
	POISON((char *)item + sizeof(void *), p->item - sizeof(void *));
	b->used--;
	p->items--;
	if (b->list == ON_FULL) {
		list_del(p, b);
		list_add(p, b, ON_PARTIAL);
	}
	if (b->used)
		return;
	/* the last item: every page but the header's goes back */
	list_del(p, b);
	list_add(p, b, ON_EMPTY);
	p->empty++;
	UNPOISON((char *)b + HEADER, SLAB_BYTES - HEADER);
	madvise((char *)b + PAGE, SLAB_BYTES - PAGE, MADV_DONTNEED);
}

void slab_stats(const struct slab_pool *p, struct slab_stats *ret)
{
	ret->items = p->items;
	ret->blocks = p->blocks;
	ret->empty = p->empty;
}
