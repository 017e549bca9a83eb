/*
 * store_i.h: what store.c and store_catalog.c share and nobody else sees.
 *
 * store.c owns the arena, the page bitmap, the objects and their
 * refcounts; store_catalog.c owns the files beside the arena (catalog
 * records and notes) and the adoption of records at open.
 *
 * Lock order: obj->hash_lock, then obj->lock, then store->lock.
 * store->note_lock is a leaf.
 *
 * References: the id table holds one reference of its own on every
 * linked object (pending or sealed), dropped by store_unlink().  So a
 * count of zero means the object is unlinked and its pages can go.
 */
#ifndef OBJFS_STORE_I_H
#define OBJFS_STORE_I_H

#include <pthread.h>
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
	struct store *s;
	uint64_t id;
	uint32_t refs; /* atomic */
	bool sealed;   /* atomic; set (release) once, under lock */
	bool linked;   /* written under lock and s->lock */

	UT_hash_handle hh;	       /* s->table, while linked; s->lock */
	struct store_obj *prev, *next; /* s->all, until freed; s->lock */

	pthread_mutex_t lock; /* guards the pending state below */
	uint64_t size;	      /* atomic loads; stores under lock */
	/* lock while pending; immutable once sealed (read without lock) */
	struct store_ext *ext;
	size_t n_ext, cap_ext;
	uint64_t npages; /* sum of ext[].npages */
	/* set before sealed is published */
	int64_t mtime_ns;
	uint8_t csum[OBJFS_CSUM_LEN];
	char *path; /* lock; NULL means "" */
	uint64_t gen; /* lock; bumped by every change to the bytes */

	/* the checksum of a prefix, taken ahead of sealing (store_hash_ahead) */
	pthread_mutex_t hash_lock;
	XXH3_state_t *hst; /* hash_lock; NULL until needed */
	uint64_t hashed;   /* hash_lock: bytes [0, hashed) are in hst */
	uint64_t hash_gen; /* hash_lock: o->gen when hst was started */
};

struct store {
	int dir_fd, objects_fd, notes_fd, lock_fd, arena_fd;
	uint8_t *base; /* the arena mapping */
	size_t map_len;
	uint64_t capacity; /* bytes, a multiple of STORE_PAGE */
	bool verify;

	pthread_mutex_t lock; /* guards everything below */
	uint64_t npages;      /* pages the allocator may hand out */
	uint64_t *bitmap;     /* one bit per arena page, 1 = in use */
	uint64_t hint;	      /* every page below it is in use */
	uint64_t used_pages;
	struct store_obj *table; /* linked objects by id (uthash) */
	struct store_obj *all;	 /* every object not yet freed */
	uint64_t nobjects, npending, bad_records;

	pthread_mutex_t note_lock; /* serializes note writers */
};

/* ---- store.c ---- */

/* A fresh object: no pages, refs 0, not in the table.  NULL on ENOMEM. */
struct store_obj *store_obj_new_i(struct store *s, uint64_t id);
/* Free the memory of @o; its pages and list membership are the caller's. */
void store_obj_free_i(struct store_obj *o);
/* Add @o to the id table (linked, +1 ref) and s->all.  -ENOMEM.  s->lock held or
 * the store not yet shared. */
int store_table_add_i(struct store *s, struct store_obj *o);
/* Mark pages in use; -EEXIST (nothing marked) if any already is. */
int store_pages_claim_i(struct store *s, uint64_t page, uint64_t n);
void store_pages_release_i(struct store *s, uint64_t page, uint64_t n);
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
