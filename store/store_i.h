/*
 * store_i.h: what the store's files share and nobody else sees.
 *
 * store_arena.c owns the arena mapping, the page bitmap, the allocation
 * and freeing of page runs, the extents of objects and prefault;
 * store.c owns the objects (lookup, refcounts, bytes, checksum, seal,
 * unlink) and opening and closing the store; store_catalog.c owns the
 * files beside the arena (catalog records and notes) and the adoption
 * of records at open.
 *
 * Locks.  There are three kinds, taken in this order:
 *
 *   obj->hash_lock  one per object; the checksum taken ahead of sealing
 *                   (hst, hashed, hash_gen).  Held across hashing
 *                   (store_hash_ahead(), store_seal()) so that only one
 *                   thread feeds an object's hash state.
 *   obj->lock       one per object; its pending state: size (stores),
 *                   the extents while pending, path, gen, and the one
 *                   write of sealed.  Catalog file I/O for the object
 *                   (record write and remove) happens under it.
 *   store->lock     one per store, the global lock; the bitmap and the
 *                   allocator (npages, hint, used_pages, draining_pages:
 *                   pages change hands, and obj->linked changes, only
 *                   under it), the id table
 *                   and the list of all objects (table, all, obj->hh,
 *                   obj->prev/next), obj->linked (with obj->lock) and
 *                   the counters.  Held only for work in memory, never
 *                   across file I/O or a caller's callback.
 *
 * So: obj->hash_lock, then obj->lock, then store->lock.  No thread holds
 * the locks of two objects at once.  store->note_lock is a leaf: it only
 * serializes note writers and nothing is taken under it.
 *
 * Fields not named under a lock are set before the store or the object
 * is shared and never change after (store->dir_fd and the other fds,
 * base, map_len, capacity, verify; obj->s, obj->id), or are atomic
 * (obj->refs, obj->size loads, obj->sealed loads).
 *
 * References: the id table holds one reference of its own on every
 * linked object (pending or sealed), dropped by store_unlink().  So a
 * count of zero means the object is unlinked and its pages can go.
 */
#ifndef OBJFS_STORE_I_H
#define OBJFS_STORE_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <xxhash.h>

/* uthash: report allocation failure instead of calling exit() */
#define HASH_NONFATAL_OOM 1
#include <uthash.h>

#include "store.h"

#define STORE_SIZE_MAX (1ULL << 50)	/* bytes per object */
#define STORE_CAPACITY_MAX (1ULL << 50) /* bytes per arena */
#define STORE_GROW_MAX_PAGES (16384ULL) /* 64 MiB: cap on speculative growth */
#define STORE_NOTE_MAX 65536		/* bytes per note value */
#define STORE_ID_HEX 16			/* hex digits in a record name */
#define STORE_TMP_PREFIX ".tmp-"
#define STORE_BAD_SUFFIX ".bad"

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static inline uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static inline uint64_t store_pages(uint64_t bytes)
{
	return (bytes + STORE_PAGE - 1) / STORE_PAGE;
}

/* A run of arena pages holding object pages [opage, opage + npages). */
struct store_ext {
	uint64_t page; /* first arena page */
	uint64_t npages;
	uint64_t opage; /* first object page it holds */
};

struct store_obj {
	struct store *s;  /* immutable */
	uint64_t id;	  /* immutable */
	atomic_uint refs; /* relaxed increments, acq_rel decrements */
	/* set once (release) under lock and s->lock; read with acquire
	 * without a lock, relaxed under either lock */
	atomic_bool sealed;
	bool linked; /* written under lock and s->lock; read under either */

	UT_hash_handle hh;	       /* s->table, while linked; s->lock */
	struct store_obj *prev, *next; /* s->all, until freed; s->lock */

	pthread_mutex_t lock;	   /* guards the pending state below */
	atomic_uint_fast64_t size; /* relaxed; stores under lock */
	/*
	 * Pending: read and written under lock, and also under s->lock
	 * while pages change hands (store_arena.c).  Sealed: immutable,
	 * read without a lock.
	 */
	struct store_ext *ext;
	size_t n_ext, cap_ext;
	uint64_t npages; /* sum of ext[].npages */
	/* lock; set before sealed is published, immutable after */
	int64_t mtime_ns;
	uint8_t csum[OBJFS_CSUM_LEN];
	char *path;	     /* lock; NULL means "" */
	uint64_t gen;	     /* lock; bumped by every change to bytes below hash_claim, and
			      * by every resize */
	uint64_t hash_claim; /* lock: bytes [0, hash_claim) are in hst, or being
			      * folded into it (store_hash_ahead()) */

	/* the checksum of a prefix, taken ahead of sealing (store_hash_ahead) */
	pthread_mutex_t hash_lock;
	XXH3_state_t *hst; /* hash_lock; NULL until needed */
	uint64_t hashed;   /* hash_lock: bytes [0, hashed) are in hst */
	uint64_t hash_gen; /* hash_lock: o->gen when hst was started */
};

struct store {
	/* set at open, before the store is shared (store_catalog.c) */
	int dir_fd, objects_fd, notes_fd, lock_fd;
	/* set at open (store_arena.c) */
	int arena_fd;
	uint8_t *base; /* the arena mapping */
	size_t map_len;
	uint64_t capacity; /* bytes, a multiple of STORE_PAGE */
	bool verify;

	pthread_mutex_t lock; /* the global lock: guards everything below */
	uint64_t npages;      /* pages the allocator may hand out */
	uint64_t *bitmap;     /* one bit per arena page, 1 = in use */
	uint64_t hint;	      /* every page below it is in use */
	uint64_t used_pages;
	uint64_t draining_pages; /* pages of unlinked objects still referenced */
	struct store_obj *table; /* linked objects by id (uthash) */
	struct store_obj *all;	 /* every object not yet freed */
	uint64_t nobjects, npending;
	uint64_t bad_records; /* written at open only */

	pthread_mutex_t note_lock; /* serializes note writers; a leaf */
};

/* ---- store_arena.c: the mapping ---- */

/*
 * Open and map DIR/arena (s->dir_fd open), growing the file to the
 * capacity, and allocate a bitmap over every page a catalog record may
 * name: the capacity or what the file held, whichever is more.  Sets
 * *ret_valid_pages to the whole pages the file held.  At open, single
 * threaded.
 */
int store_arena_open_i(struct store *s, uint64_t *ret_valid_pages);
/* After adoption: hand out only pages below the capacity, and cut the
 * file and the mapping down to it.  At open, single threaded. */
int store_arena_fit_i(struct store *s);
/* Free the bitmap, unmap and close the arena; a half-built store is fine. */
void store_arena_close_i(struct store *s);

/* ---- store_arena.c: page runs (s->lock held, or the store not yet shared) ---- */

/* Mark pages [page, page + n) in use; -EEXIST (nothing marked) if any
 * already is. */
int store_pages_claim_i(struct store *s, uint64_t page, uint64_t n);
/* Give back the pages of @n_ext extents. */
void store_pages_release_i(struct store *s, const struct store_ext *ext, size_t n_ext);

/* ---- store_arena.c: extents of a pending object (o->lock held) ---- */

/*
 * Make @o hold at least @want pages; all or nothing: -ENOSPC or -ENOMEM
 * leaves @o as it was.  @exact asks for no speculative growth (the
 * caller knows the final size).  Takes s->lock.
 */
int store_ext_grow_i(struct store_obj *o, uint64_t want, bool exact);
/* Give back every page of @o past its first @keep.  Takes s->lock. */
void store_ext_trim_i(struct store_obj *o, uint64_t keep);

/*
 * Walking bytes [off, end) of an object, which must lie within the pages
 * it holds, as pieces of arena memory:
 *
 *	store_span_init_i(&sp, o, off, end);
 *	while (store_span_next_i(&sp, &p, &n))
 *		use n bytes at p;
 *
 * o->lock held, or @o sealed.
 */
struct store_span {
	const struct store_obj *o;
	size_t i; /* next extent */
	uint64_t off, end;
};
void store_span_init_i(struct store_span *sp, const struct store_obj *o, uint64_t off,
		       uint64_t end);
bool store_span_next_i(struct store_span *sp, uint8_t **ret_p, size_t *ret_n);

/* ---- store.c ---- */

/* A fresh object: no pages, refs 0, not in the table.  NULL on ENOMEM. */
struct store_obj *store_obj_new_i(struct store *s, uint64_t id);
/* Free the memory of @o; its pages and list membership are the caller's. */
void store_obj_free_i(struct store_obj *o);
/* Add @o to the id table (linked, +1 ref) and s->all.  -ENOMEM.  s->lock held or
 * the store not yet shared. */
int store_table_add_i(struct store *s, struct store_obj *o);
/* xxh3-128 of the first @size bytes held by @ext.  0 or -ENOMEM. */
int store_hash_i(const struct store *s, const struct store_ext *ext, size_t n_ext, uint64_t size,
		 uint8_t ret_csum[OBJFS_CSUM_LEN]);

/* ---- store_catalog.c ---- */

/* Create (0700) and open @dir and its subdirectories, take the lock
 * (-EBUSY if held).  Sets the fds in @s; store_free() closes them. */
int store_dir_open_i(struct store *s, const char *dir);

/*
 * Adopt every valid record in objects/: extents must lie below
 * @valid_pages (what the arena file held) and not overlap.  Sets
 * *ret_max_end to the highest page end of an adopted object.  Single
 * threaded, at open.  0 or a negative errno for a failure that is not
 * a bad record.
 */
int store_catalog_adopt_i(struct store *s, uint64_t valid_pages, uint64_t *ret_max_end);
/* Write @o's record (path @path) atomically.  o->lock held. */
int store_catalog_write_i(struct store_obj *o, const char *path);
/* Remove the record of @id; 0 if it was not there. */
int store_catalog_remove_i(struct store *s, uint64_t id);
/* Delete leftover temp files in notes/. */
void store_notes_cleanup_i(struct store *s);

#endif
