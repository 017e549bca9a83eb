/*
 * store_i.h: what the store's files share and nobody else sees.
 *
 * The store may use common only: it knows nothing of Redis, peers or
 * FUSE, and nothing but its own files and mappings.  store_files.c owns
 * the object files and the pool of freed files (store_prefault.c fills
 * it), store.c the objects and opening and closing the store,
 * store_tab.c the id table, store_pack.c the chunks of small objects,
 * store_catalog.c the catalog log and notes, store_catalog_old.c the
 * conversion of earlier versions.
 *
 * Locks, in this order: obj->hash_lock, then obj->lock, then
 * store->log_lock, then store->lock; store->pack_lock nests inside
 * obj->lock and above store->lock.  No thread holds the locks of two
 * objects at once.  store->note_lock is a leaf.  A sealed object's
 * mapping is taken away only from an object whose refs is 1 (the
 * table's own), so a reader that holds a reference needs no lock for it.
 * docs/design.md, "Locks and references", says what each lock guards,
 * which fields need none, and why the mapping rule is safe.
 */
#ifndef OBJFS_STORE_I_H
#define OBJFS_STORE_I_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "bsum.h"
#include "xxh.h"

#include "slab.h"
#include "store.h"

#define STORE_SIZE_MAX (1ULL << 50)	/* bytes per object */
#define STORE_CAPACITY_MAX (1ULL << 50) /* bytes per store */
#define STORE_GROW_MAX (64ULL << 20)	/* cap on a writer's speculative growth */
#define STORE_NOTE_MAX 65536		/* bytes per note value */
#define STORE_ID_HEX 16			/* hex digits in a record or file name */
#define STORE_TMP_PREFIX ".tmp-"
#define STORE_BAD_SUFFIX ".bad"
#define STORE_POOL_MAX 64	    /* freed files kept for reuse, at most */
#define STORE_MAP_CACHE_DEFAULT 256 /* idle mappings of sealed objects kept */
#define STORE_POOL_MIN (1ULL << 20) /* smaller freed files are not worth pooling */
#define PREFAULT_MIN (64ULL << 20)  /* store_prefault()'s smallest file */
#define PREFAULT_STEP (64ULL << 20) /* and what it allocates at a time */
/* a chunk file of packed objects: a power of two in between, so that
 * a store has about 4,096 chunks at most, a mapping each */
#define STORE_PACK_CHUNK_MIN (2ULL << 20)
#define STORE_PACK_CHUNK_MAX (64ULL << 20)
#define STORE_PACK_CLASSES_MAX 64	/* size classes of their slots, at most */
#define STORE_PACK_MAX_LIMIT (1u << 20) /* pack_max, at most */
#define GONE_PREFIX ".gone-"		/* data/.gone-<n>: an unlinked object's file */
#define FREE_PREFIX ".free-"		/* data/.free-<n>: a pooled file */

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static inline uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

#define STORE_HASH_LOCKS 64
#define STORE_OBJ_LOCKS 256 /* obj_lock(): objects share these by id */

/* @o's hash lock (see the top): one of its store's, by id. */
static inline pthread_mutex_t *obj_hash_lock(struct store_obj *o);

static inline uint64_t store_pages(uint64_t bytes)
{
	return (bytes + STORE_PAGE - 1) / STORE_PAGE;
}

/* A mapping a growing object left behind (see struct store_obj.old_maps). */
struct store_old_map {
	void *addr;
	size_t len;
	struct store_old_map *next;
};

/* Which list an object is on (obj->lru_list): s->lru, s->sole, or
 * s->gone (unlinked, until freed). */
enum { LRU_NONE, LRU_USE, LRU_SOLE, LRU_GONE };

/* Objects by id (store_tab.c). */
struct store_tab {
	struct store_obj **b; /* NULL until the first add */
	unsigned shift;	      /* 64 - log2 of the buckets */
	uint64_t count;
};

struct store_obj {
	uint64_t id;	  /* immutable; its store is obj_store() */
	atomic_uint refs; /* relaxed increments, acq_rel decrements */
	/* of which lease references (store_obj_ref_lease()), not counted as
	 * use; taken after, and dropped before, their share of refs */
	atomic_uint lease_refs;
	/* set once (release) under lock and s->lock; read with acquire
	 * without a lock, relaxed under either lock */
	atomic_bool sealed;
	bool linked; /* written under lock and s->lock; read under either */
	/* store_unlink() took it out of the table (an object being adopted
	 * is not linked yet, nor unlinked); lock and s->lock */
	bool unlinked;
	/* read, or its registration used, since the clock (s->mapped's or
	 * s->regd's) last passed it (no lock: a hint) */
	atomic_bool map_used;
	/*
	 * Bit-fields share a byte, so each group is read and written under
	 * one lock only, and a member that is not a bit-field stands between
	 * two groups.  Under lock (or with the last reference): has_file,
	 * data/<id> (or its gone name) exists; renamed, the file is
	 * data/.gone-<gone_seq> now; recyclable, the file may go to the pool
	 * when the object is freed (if nobody else holds it open then),
	 * false once it lost its name.
	 */
	uint8_t has_file : 1, renamed : 1, recyclable : 1;
	/* s->log_lock: the catalog log holds the object (an R line, and no D
	 * after it) */
	bool recorded;
	/*
	 * Under s->lock: lru_list, on s->lru (LRU_USE), s->sole (LRU_SOLE),
	 * s->gone (LRU_GONE), or none; counted_open, counted in s->nopen
	 * (may hold a descriptor: pending, or unlinked with a file that lost
	 * its name); on_mapped, on s->mapped (sealed and mapped); pinned, on
	 * s->regd, a transport's registration hangs on the mapping (never
	 * taken away then): never both.
	 */
	uint8_t lru_list : 2, counted_open : 1, on_mapped : 1, pinned : 1;
	/* lock while pending, immutable once sealed (read then without a
	 * lock): the object's bytes are in a slot of a chunk (store_pack.c),
	 * never in a file of its own; a byte of its own, in what was padding */
	bool packed;
	int fd; /* the object's file, while it needs one (see below) */
	/* s->lock: moves on whenever the object moves on s->lru
	 * (store_walk_cold()); 32 bits, as a wrap only makes a walk go on
	 * from an object that moved meanwhile */
	uint32_t lru_stamp;
	struct store_obj *mprev, *mnext; /* s->mapped or s->regd; s->lock */
	/* s->lru or s->sole, sealed and linked, or s->gone once unlinked
	 * (s->lock, with lru_list) */
	struct store_obj *lprev, *lnext;

	union {
		/* its chain in s->table (or adoption's); s->lock */
		struct store_obj *hnext;
		/* once out of the table for good (store_unlink(), or
		 * unlinked before it had a file): its name is
		 * data/.gone-<gone_seq>; lock (8 B an object at rest) */
		uint64_t gone_seq;
	};

	atomic_uint_fast64_t size; /* relaxed; stores under lock */
	/*
	 * The object's file (data/<id>, renamed data/.gone-<n> at unlink) and
	 * its mapping, MAP_SHARED over [0, w->map_len): read-write while
	 * pending, read-only once sealed.  fd is -1 until the first byte
	 * needs a home, and again once sealed (the file is opened by name
	 * when needed), unless the file lost its name at unlink (fd sits
	 * with the flags above, to pack the struct).  A sealed
	 * object's map is NULL until first used and whenever the mapping
	 * cache took it away (see the top).  alloc is what the object is charged against the
	 * capacity (s->used): while pending, the file's length; once
	 * sealed, its size rounded up to s->unit.  A sealed object's mapping
	 * covers its size in whole pages (store_files.c sealed_map_len()).  A pending object that
	 * grows maps its file again, longer, and keeps the old mappings on
	 * old_maps until it is sealed or freed, so that a pointer handed out
	 * before (store_obj_iov()) stays good.  Pending: written under lock.
	 * Sealed: immutable, read without a lock.
	 */
	_Atomic(uint8_t *) map; /* sealed: acquire loads, release stores */
	uint64_t alloc;
	/* s->lock: what the filesystem holds for the sealed object beyond
	 * alloc (a huge page its seal could not split), in s->extra */
	uint64_t extra;
	/*
	 * A transport's registration of the sealed object's memory
	 * (store_obj_attach()), given back by store->reg_drop: set at most once
	 * under lock; taken (set NULL) and dropped by obj_drop_reg() when
	 * the object is freed, before its mapping and file go, with no
	 * store lock held (dropping one is a syscall).
	 */
	void *reg; /* dropped with store->reg_drop */
	/* lock: the chunk of a packed object's slot (its bytes are at map);
	 * immutable once sealed */
	struct store_chunk *chunk;
	/* lock; set before sealed is published, immutable after */
	int64_t mtime_ns;
	uint8_t csum[OBJFS_CSUM_LEN];
	/*
	 * Where its path is (lock and s->log_lock to write, s->log_lock to
	 * read): bit 0 clear, a string of its own (NULL: ""), as before the
	 * log holds it; set, the rest is the offset in the catalog log of its
	 * last R or P line, which holds it (store_catalog_path_i()), so that
	 * an object at rest keeps no copy.
	 */
	uintptr_t path_ref;
	/* what only a pending object needs: made by store_create(), freed
	 * by its seal (under its hash lock and lock) or with it; NULL once
	 * sealed */
	struct store_writing *w;
};

/* A pending object's state of writing (obj->w). */
struct store_writing {
	uint64_t gen;	     /* obj->lock; bumped by every change to bytes below
			      * hash_claim, and by every resize */
	uint64_t hash_claim; /* obj->lock: bytes [0, hash_claim) are in hst, or
			      * being folded into it (store_hash_ahead()) */
	/* the checksum of a prefix, taken ahead of sealing
	 * (store_hash_ahead()); the object's hash lock (obj_hash_lock()) */
	XXH3_state_t *hst;     /* NULL until needed */
	struct bsum_stream bs; /* the block sums of the same bytes */
	bool no_sums;	       /* obj->lock: nobody will ask for them */
	uint64_t hashed;       /* bytes [0, hashed) are in hst and bs */
	uint64_t hash_gen;     /* gen when hst was started */
	/* mappings of the file before it grew (store_file_grow_i()); obj->lock */
	struct store_old_map *old_maps;
	size_t map_len; /* obj->lock: what obj->map covers */
	/* obj->lock: slots of chunks it left (store_pack.c), kept like
	 * old_maps; spilled, it left packing for a file for good */
	struct store_slot *old_slots;
	bool spilled;
};

/* A freed file kept for reuse: data/.free-<seq>, its pages still there
 * (no descriptor held: it is opened by name when taken). */
struct store_pooled {
	uint64_t len; /* the file's length, a multiple of s->unit */
	uint64_t seq;
};

struct store {
	/* set at open, before the store is shared (store_catalog.c) */
	int dir_fd, objects_fd, notes_fd, lock_fd;
	/* set at open (store_files.c) */
	int data_fd; /* DIR/data */
	enum store_fs kind;
	uint64_t unit;	   /* allocation unit: the page size of data/'s filesystem */
	uint64_t capacity; /* bytes, a multiple of unit */
	bool verify;
	bool reuse; /* keep freed files in the pool */

	pthread_mutex_t lock; /* the global lock: guards everything below */
	uint64_t used;	      /* bytes charged to objects (their alloc) */
	uint64_t draining;    /* of which unlinked objects still referenced */
	struct store_pooled pool[STORE_POOL_MAX];
	size_t npool;
	uint64_t pool_bytes; /* sum of pool[].len */
	uint64_t seq;	     /* names of gone and pooled files */
	/* bytes a running store_prefault() has allocated for the pool file it
	 * makes, and whether a writer took them back (it then stops) */
	uint64_t prefault_hold;
	bool prefault_cancel;
	/*
	 * What the filesystem holds beyond used and the pool (see
	 * store_files_held_i()): bytes allocated in the file a running
	 * prefault makes, until it is pooled or deleted (a writer may take
	 * its hold back before); bytes of files the store is deleting
	 * (pooled files given up, until they are unlinked and closed); and
	 * the sum of sealed objects' extra.
	 */
	uint64_t prefault_alloc;
	uint64_t limbo;
	uint64_t extra;
	/* pages of deleted objects still mapped, as last measured
	 * (store_files_held_i()): taken from the free capacity */
	uint64_t held;
	struct store_tab table; /* linked objects by id */
	/* unlinked objects not yet freed (LRU_GONE, through obj->lprev/lnext) */
	struct store_obj *gone;
	uint64_t nobjects, npending;
	uint64_t nall; /* objects not yet freed, linked or not */
	/* objects that may hold a descriptor (pending ones): at most
	 * open_max of them (store_create()), from the open-files limit */
	uint64_t nopen, open_max;
	/* sealed linked objects with a mapping, most recently mapped or
	 * used first; at most map_cache of them unless in use */
	struct store_obj *mapped, *mapped_tail;
	uint64_t nmapped, map_cache;
	/* sealed objects a registration hangs on (obj->pinned), on s->regd
	 * through obj->mprev/mnext (they are never on s->mapped): most
	 * recently registered or used first; at most regs_max of them unless
	 * in use (store_obj_attach()) */
	struct store_obj *regd, *regd_tail;
	uint64_t npinned, regs_max, regs_dropped;
	uint64_t maps_made, maps_dropped; /* sealed objects mapped, unmapped idle */
	/* sealed linked objects by last use (store_touch()): lru is the most
	 * recent, lru_cold the least */
	struct store_obj *lru, *lru_cold;
	uint32_t lru_stamp;
	/* sealed linked objects known to be the only copy in the cluster
	 * (store_set_sole()): off s->lru, so that eviction never walks them;
	 * in no order */
	struct store_obj *sole, *sole_tail; /* most recently marked first */
	uint64_t nsole, sole_bytes;
	uint64_t bad_records;		  /* written at open only */
	uint64_t files_new, files_reused; /* object files made, taken from the pool */

	pthread_mutex_t note_lock; /* serializes note writers; a leaf */
	/* objects' hash locks (obj_hash_lock()) */
	pthread_mutex_t hash_locks[STORE_HASH_LOCKS];
	/* what an object's obj_lock() is one of (see the top) */
	pthread_mutex_t obj_locks[STORE_OBJ_LOCKS];
	/* where struct store_obj come from: blocks of their own, so that the
	 * objects a store keeps for long do not sit between the short-lived
	 * allocations of writing and pin their freed chunks; a leaf lock */
	struct slab_pool *obj_pool;
	pthread_mutex_t obj_pool_lock;
	/* what gives back every registration hung on an object
	 * (store_obj_attach(): the first one's); set once, s->lock */
	void (*reg_drop)(void *reg);

	/* packed objects (store_pack.c): pack_max is set at open; the rest
	 * under pack_lock, which nests inside obj->lock and above s->lock */
	pthread_mutex_t pack_lock;
	uint32_t pack_max;   /* T: objects up to this size are packed (0: none) */
	uint64_t pack_chunk; /* bytes of a new chunk (store_pack_chunk_len()) */
	uint32_t pack_ncls;
	uint32_t pack_cls[STORE_PACK_CLASSES_MAX]; /* slot sizes, ascending */
	struct store_chunk **pack_chunks;	   /* by number */
	uint32_t pack_nchunks_cap, pack_nchunks;
	/* of each class, the chunks with a free slot */
	struct store_chunk *pack_free[STORE_PACK_CLASSES_MAX];
	uint64_t pack_slots, pack_pages; /* slots used; pages charged */
	uint64_t pack_chunks_made;

	/* the catalog log (store_catalog.c) */
	pthread_mutex_t log_lock;
	int log_fd;	      /* DIR/catalog.log, O_APPEND */
	uint64_t log_size;    /* bytes */
	uint64_t log_lines;   /* lines after the header */
	uint64_t log_live;    /* objects recorded: the lines a compaction keeps */
	uint64_t compactions; /* at runtime (store_tick()) */
	/* a compaction is due whatever the count of dead lines (a D that
	 * could not be appended, a compaction at open that could not run) */
	bool log_dirty;
	int64_t log_retry_ns; /* the ticker's alone: no compaction before (util_mono_ns()) */
};

/* ---- store_files.c: the filesystem ---- */

/*
 * Set up DIR/data (s->dir_fd open): if DIR is itself a tmpfs or
 * hugetlbfs mount, a plain subdirectory of it; else, with @own_tmpfs,
 * a tmpfs the store mounts there (huge=within_size, sized for the
 * capacity), or finds mounted by an earlier run; else a plain
 * subdirectory on DIR's filesystem.  Sets s->data_fd, kind and unit, and
 * adopts the pool files an earlier run left.  At open, single threaded.
 */
int store_files_open_i(struct store *s, const char *dir, bool own_tmpfs);
/* Close the pool's files and data_fd (the files stay). */
void store_files_close_i(struct store *s);
/* Delete what an earlier run left in data/ that no record claims
 * (pending objects, unlinked ones): every non-pool file without an
 * adopted object.  After adoption, single threaded. */
void store_files_sweep_i(struct store *s);

/* ---- store_files.c: an object's file (o->lock held, unless said) ---- */

/*
 * Make pending @o's file at least @want bytes long, and map all of it,
 * charging the capacity (all or nothing: -ENOSPC or another errno leaves
 * @o as it was).  @exact (the caller knows the final size, a fetch) asks
 * for no speculative growth.  New bytes hold whatever the file's pages
 * held (zeros for a new file, an old object's bytes for a reused one).
 */
int store_file_grow_i(struct store_obj *o, uint64_t want, bool exact);
/* At seal, before the record is written: cut the file to the object's
 * size and charge only what is left.  The object may still be written
 * if the seal fails after this. */
int store_file_seal_i(struct store_obj *o);
/* Once sealed for good: the file read-only, mapped read-only over just
 * the object, the old mappings gone. */
void store_file_freeze_i(struct store_obj *o);
/* At unlink, before @o leaves the table: rename the file out of the way
 * of a new object with this id.  true if it was renamed: the caller sets
 * o->gone_seq to *@ret_seq once @o is out of the table (they share a
 * word with hnext). */
bool store_file_unlink_i(struct store_obj *o, uint64_t *ret_seq);
/* The last reference went: unmap, uncharge, and put the file in the pool
 * or delete it.  No lock held; @o is nobody's any more. */
void store_file_free_i(struct store_obj *o);
/*
 * Bytes of data/'s filesystem that no file of the store accounts for:
 * pages of deleted object files that someone else still maps or holds
 * open.  Measured now, on the store's own tmpfs only (0 elsewhere), and
 * kept in s->held.  Takes s->lock.
 */
uint64_t store_files_held_i(struct store *s);
/* The inodes of data/'s filesystem, and those free now (fstatvfs); 0 and
 * 0 when it has no such limit.  No lock. */
void store_files_inodes_i(struct store *s, uint64_t *ret_total, uint64_t *ret_free);
/* Charge @n bytes to the capacity for the store's own use (chunks),
 * giving up pooled files if need be: 0 or -ENOSPC; and give them back.
 * Take s->lock. */
int store_files_charge_i(struct store *s, uint64_t n);
void store_files_uncharge_i(struct store *s, uint64_t n);
/* The capacity nobody holds.  s->lock held. */
uint64_t store_files_free_locked_i(const struct store *s);
/* data/<@prefix><@seq in 16 hex digits> into @buf. */
void store_files_seq_name_i(const char *prefix, uint64_t seq, char *buf, size_t len);
/* A spill into a file failed (store_pack.c): the file it made goes, and
 * its charge.  o->lock held, o->map NULL. */
void store_file_abandon_i(struct store_obj *o);
/* Unmap and close, leaving the file as it is (store_close()). */
void store_file_close_i(struct store_obj *o);
/*
 * Adopt data/<id> for sealed @o of size o->size (at open): check that it
 * is a file of the size's length (no descriptor, no mapping kept), and
 * with @csum, that its bytes hash to @csum.  -EBADMSG if not.
 */
int store_file_adopt_i(struct store_obj *o, const uint8_t *csum);
/* Unmap sealed @o, which is on nobody's list (adoption).  Single threaded. */
void store_file_rest_i(struct store_obj *o);
/*
 * Sealed @o's mapping, made now if it has none (no lock held; the caller
 * holds a reference).  0 and *@ret (NULL for an empty object), or -errno.
 */
int store_file_mapping_i(struct store_obj *o, uint8_t **ret);
/* Sealed @o was just sealed with its writer's mapping: put it on
 * s->mapped (o->lock held), taking idle mappings away if too many. */
void store_file_mapped_add_i(struct store_obj *o);
/*
 * Map sealed @o's file read-only (o->lock held, o->map NULL, size > 0),
 * put it on s->mapped and take idle mappings away from the cold end
 * while more than s->map_cache are mapped.  0, or the errno of open(2)
 * or mmap(2).
 */
int store_file_map_i(struct store_obj *o);
/* Take @o off s->mapped (unlink, free).  s->lock held. */
void store_file_mapped_del_i(struct store *s, struct store_obj *o);
/* Open @o's file (by name; o->lock held) with @flags.  -errno. */
int store_file_open_i(struct store_obj *o, int flags);
/* The name of @id's file: data/<16 hex digits>. */
void store_file_name_i(uint64_t id, char buf[STORE_ID_HEX + 1]);

/* ---- store_pack.c: packed objects (see there) ---- */

/* The length of new chunks for a store of @capacity bytes. */
static inline uint64_t store_pack_chunk_len(uint64_t capacity)
{
	uint64_t len = STORE_PACK_CHUNK_MIN;

	while (len < STORE_PACK_CHUNK_MAX && capacity / len > 4096)
		len *= 2;
	return len;
}

/* At open, after store_files_open_i(): the classes for @pack_max (0: no
 * packing), and the chunks in data/.  Then, after the catalog's adoption
 * (store_pack_adopt_i() for each packed line), store_pack_settle_i(). */
int store_pack_open_i(struct store *s, uint64_t pack_max);
void store_pack_settle_i(struct store *s);
/* Unmap the chunks (store_close(), after the objects). */
void store_pack_close_i(struct store *s);
/* Claim the slot of packed @o's line (store_pack_slot_i(): kept in
 * o->alloc until adopted), before any object is adopted: -EBADMSG if no
 * chunk has it, or another line claimed it first.  Then adopt @o, whose
 * slot it claimed; with @csum, check its bytes (-EBADMSG). */
int store_pack_claim_i(struct store_obj *o);
int store_pack_adopt_i(struct store_obj *o, const uint8_t *csum);
/* The chunk number and offset of @o's slot (its catalog line's). */
void store_pack_slot_i(const struct store_obj *o, uint32_t *ret_no, uint32_t *ret_off);
/* Does pending @o live in a slot, or should it for @want bytes?  o->lock. */
bool store_pack_wants_i(const struct store_obj *o, uint64_t want);
/* store_file_grow_i(), seal_i() and freeze_i() for such an object. */
int store_pack_grow_i(struct store_obj *o, uint64_t want, bool exact);
int store_pack_seal_i(struct store_obj *o);
void store_pack_freeze_i(struct store_obj *o);
/* The last reference went: its slots are free (a spilled object's old
 * ones too).  No lock held. */
void store_pack_free_i(struct store_obj *o);
/* store_close(): forget its slots, whose chunks go next. */
void store_pack_forget_i(struct store_obj *o);
void store_pack_stats_i(struct store *s, struct store_stats *ret);
/* store_obj_pages() of sealed packed @o.  Takes pack_lock. */
void store_pack_pages_i(struct store_obj *o, struct store_pages *ret);
/* Is an object of @size bytes packed (*@ret_packed), and what would a
 * slot for it charge now (0: a free one on pages already held)?  Takes
 * pack_lock. */
uint64_t store_pack_need_i(struct store *s, uint64_t size, bool *ret_packed);

/* ---- store_tab.c: objects by id (the caller's lock held) ---- */

struct store_obj *store_tab_find_i(const struct store_tab *t, uint64_t id);
/* Add @o (not in a table).  0, or -ENOMEM if the table has no bucket. */
int store_tab_add_i(struct store_tab *t, struct store_obj *o);
void store_tab_del_i(struct store_tab *t, struct store_obj *o);
/* The object after @o (NULL: the first), *@at its bucket; NULL at the
 * end.  @o may be deleted once the next is known. */
struct store_obj *store_tab_next_i(const struct store_tab *t, struct store_obj *o, size_t *at);
/* The buckets go; the objects are the caller's. */
void store_tab_free_i(struct store_tab *t);

/* ---- store.c ---- */

/* A fresh object: no file, refs 0, not in the table.  NULL on ENOMEM. */
struct store_obj *store_obj_new_i(struct store *s, uint64_t id);
/* Free the memory of @o; its file and list membership are the caller's. */
void store_obj_free_i(struct store_obj *o);
/* Add @o to the id table (linked, +1 ref).  -ENOMEM.  s->lock held or
 * the store not yet shared.  A pending @o is counted in s->nopen. */
int store_table_add_i(struct store *s, struct store_obj *o);
/* xxh3-128 of @len bytes at @p. */
void store_hash_i(const void *p, uint64_t len, uint8_t ret_csum[OBJFS_CSUM_LEN]);

/* ---- store_catalog.c ---- */

/* Create (0700, if missing) and open directory @name in @dir_fd. */
int store_subdir_open_i(int dir_fd, const char *name, int *ret_fd);
/* Create (0700) and open @dir and its subdirectories, take the lock
 * (-EBUSY if held).  Sets the fds in @s; store_free() closes them. */
int store_dir_open_i(struct store *s, const char *dir);

/*
 * Open the catalog log and adopt every object it holds whose file is
 * whole, then convert the catalog of earlier versions
 * (store_catalog_old.c), compacting the log if need be.  Sets *ret_bytes
 * to what the adopted objects are charged.  Single threaded, at open.  0
 * or a negative errno for a failure that is not a bad record.
 */
int store_catalog_adopt_i(struct store *s, uint64_t *ret_bytes);
/* Append @o's record with path @path (R, or P if the log has it); its
 * path is then read from the log (o->path_ref).  o->lock
 * held. */
int store_catalog_write_i(struct store_obj *o, const char *path);
/* Copy @o's path (truncated to @len - 1 bytes) to @buf; "" if the log
 * lost it (logged).  Takes s->log_lock. */
void store_catalog_path_i(struct store_obj *o, char *buf, size_t len);
/* Give @o the path @path (its own string from now on; NULL: ""), not
 * in the log.  o->lock held; takes s->log_lock. */
void store_catalog_set_path_i(struct store_obj *o, char *path);
/* Append that @o is gone (D), if the log holds it.  o->lock held. */
int store_catalog_remove_i(struct store_obj *o);
/* Read up to @len bytes of @fd at offset 0; *ret_n what was read. */
int store_read_upto_i(int fd, void *buf, size_t len, size_t *ret_n);
/* The names in directory @dir_fd, sorted, less "." names; deletes temp
 * files on the way.  The caller frees each name and the array. */
int store_list_dir_i(int dir_fd, char ***ret_names, size_t *ret_n);

/* ---- store_catalog_old.c ---- */

/* Records of the catalog of earlier versions, adopted (converted) and to
 * be deleted once the log holds them. */
struct store_old {
	char **names; /* in objects/ */
	size_t n;
	bool arena; /* DIR/arena too */
};
/* Adopt every valid record in objects/ whose id the log did not have,
 * copying the objects of an arena-layout store into files of their own.
 * Single threaded, at open, after the log.  0 or a negative errno. */
int store_catalog_old_adopt_i(struct store *s, struct store_old *ret);
/* Delete them if @committed (the log holds them), and forget them. */
void store_catalog_old_done_i(struct store *s, struct store_old *old, bool committed);
/* Delete leftover temp files in notes/. */
void store_notes_cleanup_i(struct store *s);

/* Take @o off the list at *@head (and *@tail, if the list keeps one)
 * that it is on through obj->lprev/lnext. */
static inline void store_list_del_i(struct store_obj **head, struct store_obj **tail,
				    struct store_obj *o)
{
	if (o->lprev)
		o->lprev->lnext = o->lnext;
	else
		*head = o->lnext;
	if (o->lnext)
		o->lnext->lprev = o->lprev;
	else if (tail)
		*tail = o->lprev;
	o->lprev = o->lnext = NULL;
}

/* The store @o belongs to: the owner of its block (store_obj_new_i()). */
static inline struct store *obj_store(const struct store_obj *o)
{
	return slab_owner(o);
}

/* @o's path if it is a string of its own (see obj->path_ref), else NULL. */
static inline char *obj_path_str(const struct store_obj *o)
{
	return o->path_ref & 1 ? NULL : (char *)o->path_ref;
}

static inline pthread_mutex_t *obj_hash_lock(struct store_obj *o)
{
	return &obj_store(o)
		    ->hash_locks[((o->id * 0x9E3779B97F4A7C15ull) >> 32) % STORE_HASH_LOCKS];
}

/*
 * Objects of one store share STORE_OBJ_LOCKS mutexes, by id (a mutex
 * each cost 40 bytes an object at rest).  Sound because no thread holds
 * the locks of two objects at once (see the top); builds with assertions
 * check that.
 */
#ifndef NDEBUG
extern _Thread_local unsigned store_obj_locks_held;
#endif

static inline void obj_lock(const struct store_obj *o)
{
#ifndef NDEBUG
	assert(!store_obj_locks_held++);
#endif
	pthread_mutex_lock(
	    &obj_store(o)->obj_locks[((o->id * 0x9E3779B97F4A7C15ull) >> 40) % STORE_OBJ_LOCKS]);
}

static inline void obj_unlock(const struct store_obj *o)
{
	pthread_mutex_unlock(
	    &obj_store(o)->obj_locks[((o->id * 0x9E3779B97F4A7C15ull) >> 40) % STORE_OBJ_LOCKS]);
#ifndef NDEBUG
	store_obj_locks_held--;
#endif
}

#endif
