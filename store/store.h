/*
 * store: the node's shared-memory object store.
 *
 * Layout of a store directory (store=DIR):
 *
 *   DIR/lock            flock()ed by the one daemon that owns the store
 *   DIR/data/<id>       one file per object (16 hex digits), holding the
 *                       object's bytes at offset 0 and, once sealed,
 *                       exactly its size long, so that the kernel can
 *                       serve the object from it (FUSE passthrough) and a
 *                       transport can register it once (RDMA)
 *   DIR/data/.pack-<n>-<slot size>  chunk files of small objects
 *                       (store_config.pack_max): a slot each, 2 MiB
 *                       files mapped once, charged by the pages they
 *                       fill (store_pack.c)
 *   DIR/data/.free-<n>  freed files kept for reuse (their pages are
 *                       resident: a first touch of memory is slow on
 *                       virtual machines)
 *   DIR/catalog.log     the catalog: a line per sealed object (id, size,
 *                       mtime, checksum, last known path), a line per new
 *                       path and per object gone, each checksummed;
 *                       appended, and compacted now and then
 *                       (store_catalog.c)
 *   DIR/catalog.bad     lines the store could not use, kept for a human
 *   DIR/objects/        the catalog of earlier versions (one record per
 *                       object), converted to the log at open
 *   DIR/notes/<key>     small strings other layers keep with the store
 *                       (the Redis epoch seen last, say)
 *
 * Memory.  DIR/data is a tmpfs the store mounts (huge=within_size, so
 * that large objects sit on 2 MiB pages; sized for the capacity), unless
 * DIR itself is a tmpfs mount, or DIR/data a hugetlbfs mount, which is
 * then used as it is (store_stats() says which; DIR itself cannot be a
 * hugetlbfs: -EMEDIUMTYPE, as records cannot be written there).  The mount outlives the daemon, so
 * that a restart adopts the objects; `umount DIR/data` removes it.  Capacity is counted by the
 * store: every object is charged its size rounded up to the filesystem's page, a growing one what
 * its file holds; on its own tmpfs, pages of deleted objects that someone else still maps count
 * too (store_stats()); a write that does not fit gets -ENOSPC and changes nothing else.  Freed
 * files of 1 MiB and more go to a pool (bounded by the free capacity) and are handed to the next
 * large object, so that fetches land on memory that is already faulted in; store_prefault() fills
 * the pool at mount.
 *
 * Objects.  A pending object (being written) grows its file as writes
 * come; sealing computes the xxh3-128 checksum, cuts the file to the
 * object's size, writes the catalog record, and makes the object
 * immutable (the file read-only, mapped read-only).  Bytes that were
 * never written read as zeros.
 *
 * Lifetime.  Objects are refcounted.  store_unlink() removes the catalog
 * record at once; the file when the last reference goes, so an object
 * that is still open stays readable after unlink.  Until then its bytes
 * count as used, and as draining (store_stats()).
 *
 * Restart.  store_open() adopts every object of the catalog whose file is
 * there: its line must be whole, the file exactly the object's size,
 * and the bytes must match the checksum.  A line that fails is kept in
 * catalog.bad and reported through the bad-record count; it is never
 * served.  Files nobody claims are deleted.  A store written by earlier
 * versions (a record file per object, or the arena layout) is converted.
 *
 * Descriptors and mappings.  An object being written or fetched holds a
 * descriptor and a mapping of its file; a sealed object holds neither at
 * rest.  It is mapped (read-only) the first time its bytes are read,
 * and the mapping is kept while anyone holds a reference; idle mappings
 * are kept up to store_config.map_cache, and the oldest go beyond that.
 * A descriptor is opened by name when someone needs one
 * (store_obj_open_fd()).  So the open-files limit bounds only the objects
 * being written or fetched at once (store_stats' open_max), not the
 * objects the store holds.
 *
 * Threading: all functions are thread-safe.  Reading a sealed object
 * that is mapped takes no lock.
 *
 * Errors: 0 or a negative errno.
 */
#ifndef OBJFS_STORE_H
#define OBJFS_STORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "util.h"

#define STORE_PAGE 4096

struct store;
struct store_obj;
struct bsums;

struct store_config {
	const char *dir;   /* created (0700) if missing */
	uint64_t capacity; /* bytes, rounded down to the page; >= 1 MiB */
	bool verify;	   /* check adopted objects' checksums at open */
	bool own_tmpfs;	   /* mount a tmpfs on DIR/data (unless DIR is one) */
	bool no_reuse;	   /* delete freed files instead of pooling them */
	/* idle mappings of sealed objects kept (0: 256, or less if
	 * vm.max_map_count is low) */
	uint64_t map_cache;
	/* objects a transport's registration may hang on at once, unless in
	 * use (store_obj_attach(); 0: STORE_REGS_DEFAULT) */
	uint64_t regs_max;
	/* objects up to this size are packed into slots of shared chunk
	 * files (store_pack.c) rather than a file each: 0 for none, at most
	 * 1 MiB; only on a tmpfs */
	uint64_t pack_max;
};

#define STORE_REGS_DEFAULT 256

/* Where the objects' files live (store_stats()). */
enum store_fs {
	STORE_FS_DIR,	    /* a directory on some filesystem: 4 KiB pages, no mount */
	STORE_FS_OWN_TMPFS, /* the tmpfs the store mounted on DIR/data */
	STORE_FS_TMPFS,	    /* DIR is a tmpfs the user mounted */
	STORE_FS_HUGETLBFS, /* DIR/data is a hugetlbfs: files are whole huge pages */
};
const char *store_fs_name(enum store_fs fs);

/*
 * Open (or create) the store.  NULL and *ret_err on failure: -EBUSY if
 * another process holds the lock, -EFBIG if adopted objects lie beyond
 * the capacity (a smaller capacity than before), -EINVAL for a bad
 * config, or the errno of the failing syscall.  For -EFBIG,
 * *ret_err_detail (may be NULL) gets the capacity that would be needed.
 */
struct store *store_open(const struct store_config *cfg, int *ret_err, uint64_t *ret_err_detail);

/* Unmap and unlock.  Leaks nothing even if objects are still referenced
 * (their mappings go, and their registrations are dropped first:
 * store_obj_attach()); sealed objects stay for the next store_open(). */
void store_close(struct store *s);

struct store_stats {
	uint64_t capacity; /* bytes */
	/* bytes charged to objects (see the top), and held (below): may
	 * pass the capacity */
	uint64_t used;
	/* of which held by unlinked objects (deleted, discarded or evicted)
	 * until their last reference goes: open here, or being sent to a
	 * peer that began fetching them before the unlink; and held */
	uint64_t draining;
	/* of which held by deleted objects the store let go of, but that a
	 * process still maps or holds open (a passthrough mmap maps the
	 * object's file itself, and outlives the FUSE handle): found on the
	 * store's own tmpfs only (store_files.c) */
	uint64_t held;
	uint64_t objects; /* sealed objects in the store */
	uint64_t pending; /* objects being written */
	/* objects in the store (sealed, pending, and unlinked ones still
	 * referenced) */
	uint64_t objects_all;
	/* the process's memory the store's objects take: their entries'
	 * blocks (resident unless empty) and the id table's buckets */
	uint64_t objects_mem;
	/* objects being written or fetched, which hold a descriptor and a
	 * mapping each until sealed, and the most there may be at once (the
	 * open-files limit and vm.max_map_count at store_open() bound them;
	 * a sealed object holds neither at rest) */
	uint64_t open, open_max;
	/* sealed objects mapped now, and how many idle ones are kept
	 * mapped; sealed objects mapped since open, and idle mappings taken
	 * away to keep to map_cache */
	uint64_t mapped, map_cache, maps_made, maps_dropped;
	/* sealed objects a transport's registration hangs on (RDMA): mapped
	 * while it does, outside the cache of idle mappings; at most
	 * regs_max of them unless in use; registrations dropped since open
	 * to keep to regs_max (store_obj_attach()) */
	uint64_t pinned, regs_max, regs_dropped;
	/* sealed objects known to be the only copy in the cluster
	 * (store_set_sole()), which eviction does not walk: how many, their
	 * bytes, and one of them */
	uint64_t sole, sole_bytes, sole_one;
	uint64_t bad_records; /* catalog records rejected at open */
	/* the catalog log: its bytes and lines, the objects it holds (the
	 * lines a compaction keeps), and compactions since open */
	uint64_t catalog_bytes, catalog_lines, catalog_live, compactions;
	uint64_t pool; /* bytes of files kept for reuse, or being made by prefault (not in used) */
	uint64_t files_new;    /* object files made new since open */
	uint64_t files_reused; /* object files taken from the pool since open */
	enum store_fs fs;
	uint64_t page; /* allocation unit of the filesystem */
	/* inodes of the filesystem the object files are on, and those free
	 * (fstatvfs of DIR/data): each object's file takes one, and so do
	 * pooled and deleted files; a new object gets -ENOSPC once none is
	 * left.  Both 0 when the filesystem has no such limit */
	uint64_t inodes, inodes_free;
	/* packed objects (store_config.pack_max, 0 if off): objects in
	 * slots, chunk files, and the pages the chunks hold (in used) */
	uint64_t pack_max, packed, chunks, chunk_bytes;
};
void store_stats(struct store *s, struct store_stats *ret);

/*
 * For a message about a full store: "X of Y MiB used", what holds the
 * room if unlinked objects do ("; N MiB held by deleted objects still
 * mapped or open"), and "; no inode left on the store's filesystem" if
 * that is what ran out.
 */
void store_describe_use(struct store *s, char *buf, size_t len);

/* What a prefault may take of memory (store_prefault()). */
struct store_prefault_limit {
	/* bytes it may still allocate now; asked before every file and
	 * every 64 MiB step (no lock held) */
	uint64_t (*room)(void *ctx);
	void *ctx;
};

/* Why a prefault ended. */
enum store_prefault_end {
	STORE_PREFAULT_DONE,	/* the free capacity is held */
	STORE_PREFAULT_MEMORY,	/* the limit's room ran out */
	STORE_PREFAULT_TAKEN,	/* the room was taken meanwhile (writers, held pages) */
	STORE_PREFAULT_FS_FULL, /* the filesystem is full (or cannot allocate ahead) */
};

struct store_prefault_report {
	uint64_t bytes; /* put into the pool */
	enum store_prefault_end end;
};

/*
 * Fill the pool with files that hold the free capacity, their pages
 * allocated now (first touch of memory is slow on virtual machines:
 * docs/benchmarks.md, "Figures behind constants"), so that the first
 * large objects written or fetched land on resident memory: files of a
 * power of two, 64 MiB and more, each the largest that fits in half of
 * what is still free and in what @limit (may be NULL) leaves.  0 and
 * *@ret once it stopped; -ECANCELED once *@stop (may be NULL) becomes
 * true, or the errno of a failed syscall.
 */
int store_prefault(struct store *s, const atomic_bool *stop,
		   const struct store_prefault_limit *limit, struct store_prefault_report *ret);

/* ---- objects ---- */

/*
 * Start a pending object with id @id (unique; -EEXIST if the store
 * already has @id; -EMFILE if open_max objects are being written or
 * fetched already, see struct store_stats).  Returns it with one
 * reference.
 */
struct store_obj *store_create(struct store *s, uint64_t id, int *ret_err);

/*
 * Would a new object of @size bytes, written or fetched whole, fit in the
 * store now: a free slot of its class if it is packed, else pages the
 * capacity has free?  A snapshot, for eviction (which frees slots, whose
 * pages may stay for their neighbours) to know when to stop.
 */
bool store_fits(struct store *s, uint64_t size);

/* Find an object (pending or sealed) by id and take a reference; NULL if
 * absent or unlinked. */
struct store_obj *store_lookup(struct store *s, uint64_t id);
/*
 * Sealed object @id is (@sole) the only copy in the cluster, as far as
 * the caller knows (it wrote it and published it; Redis refused to let it
 * go), or is not (a peer is fetching it).  An only copy leaves the use
 * order (store_touch(), store_walk_cold()) until it is not one any more,
 * so that eviction does not walk the objects it may not give up.
 * store_sole_forget() puts up to @max of them back in the use order,
 * those marked longest ago first (what the caller knew may be stale:
 * Redis lost its data, a holder that was away came back).
 */
void store_set_sole(struct store *s, uint64_t id, bool sole);
void store_sole_forget(struct store *s, uint64_t max);
/* Does the store have object @id now, sealed or pending (being written
 * or fetched)?  No reference taken: for a caller that holds a lock the
 * unref of one may not run under. */
bool store_has(struct store *s, uint64_t id);

struct store_obj *store_obj_ref(struct store_obj *o);
/* Drop a reference; NULL is fine.  Frees the pages of an unlinked or
 * discarded object when the last reference goes. */
void store_obj_unref(struct store_obj *o);

uint64_t store_obj_id(const struct store_obj *o);
uint64_t store_obj_size(const struct store_obj *o);
bool store_obj_sealed(const struct store_obj *o);

/*
 * A lease reference: it keeps @o's pages like any other, but
 * store_obj_in_use() does not count it.  For a holder that lets go when
 * asked (a serving lease, which eviction takes back:
 * node/node_source.c).  Returns @o (NULL is fine); the caller drops it
 * with store_obj_unref_lease(), never with store_obj_unref().
 */
struct store_obj *store_obj_ref_lease(struct store_obj *o);
void store_obj_unref_lease(struct store_obj *o);

/*
 * Does anyone but the store, the caller (who holds one reference) and
 * lease references hold @o: a reader, a transfer to a peer?  Then
 * unlinking it would free no page until they let go.  A snapshot: a
 * reference may be taken right after.
 */
bool store_obj_in_use(const struct store_obj *o);
/* Is sealed @o packed into a chunk with others (store_config.pack_max)?
 * Then it has no file of its own: store_obj_open_fd(), store_obj_map()
 * and store_obj_attach() say -EOPNOTSUPP.  false while pending. */
bool store_obj_packed(const struct store_obj *o);
/* Only meaningful once sealed. */
int64_t store_obj_mtime(const struct store_obj *o);
void store_obj_csum(const struct store_obj *o, uint8_t ret_csum[OBJFS_CSUM_LEN]);
/* Last known path, copied into @buf ("" if none). */
void store_obj_path(const struct store_obj *o, char *buf, size_t len);

/*
 * Write into a pending object, growing it.  Bytes between the old size and
 * @off read as zeros.  -EACCES if sealed, -ENOSPC if the store has no room
 * (the object keeps what it had), -EFBIG past 2^50 bytes.
 */
int store_write(struct store_obj *o, const void *buf, size_t len, uint64_t off);

/* Set the size of a pending object (shrink or zero-extend). */
int store_truncate(struct store_obj *o, uint64_t size);

/*
 * Make room for @size bytes at once and set the size (for receivers that
 * will fill the object through store_obj_iov()).  Unlike store_truncate(),
 * the new bytes are not zeroed: until the receiver has written them they
 * hold whatever the pages held, so they must not be read before then.
 * -ENOSPC, -EACCES.
 */
int store_reserve(struct store_obj *o, uint64_t size);

/*
 * Copy bytes out of any object (pending objects are read under their
 * lock; a sealed one is mapped first if it is not).  Returns bytes
 * copied (short at end of object) or negative errno.
 */
ssize_t store_read(struct store_obj *o, void *buf, size_t len, uint64_t off);

/*
 * Point @iov at the memory holding [@off, @off + @len) of the
 * object, clipped to its size.  Uses at most @max_iov entries and stops
 * early if it runs out.  Returns the number of entries used and sets
 * *ret_bytes to the bytes covered.  For a sealed object the memory stays
 * valid while the caller holds a reference; it is mapped now if it was
 * not (then -ENOMEM, -EMFILE or another errno of open(2) or mmap(2) may
 * come back).  For a pending object the caller must not race with
 * writers (the fetch path owns its object).
 */
int store_obj_iov(struct store_obj *o, uint64_t off, size_t len, struct iovec *iov, int max_iov,
		  size_t *ret_bytes);

/*
 * The memory and the file of sealed object @o, for transports that
 * register memory once per object (RDMA): @addr maps the whole object
 * MAP_SHARED (NULL for an empty one; mapped now if it was not), @len is
 * its size, and @fd is a new read-write descriptor of the object's file
 * (-1 if it cannot be opened so), which holds the object at offset 0 and
 * is exactly @len bytes long (on hugetlbfs: rounded up to whole huge
 * pages).  The caller closes @fd, and must never write through it.
 * @addr stays valid while a reference on @o is held, and for the
 * object's life once a registration hangs on it (store_obj_attach()).
 * The mapping is read-only.  -EINVAL if @o is pending, or the errno of
 * open(2) or mmap(2).
 */
struct store_map {
	void *addr;
	uint64_t len;
	int fd;
};
int store_obj_map(struct store_obj *o, struct store_map *ret);

/*
 * A new read-only descriptor of sealed @o's own file (see store_obj_map()),
 * for the caller to keep or hand to the kernel (FUSE_DEV_IOC_BACKING_OPEN)
 * and close.  Descriptions made from it may outlive what the caller knows
 * of @o's use (a passthrough mmap maps the file itself, and the kernel
 * releases the FUSE handle at close(2), before munmap): when @o is freed,
 * its file goes to the pool of freed files only if nobody else holds it
 * open (a write lease says so), else it is deleted and its pages go with
 * the last mapping.  -EINVAL if pending, -EOPNOTSUPP on hugetlbfs (the
 * file is longer than the object), or the errno of open(2).
 */
int store_obj_open_fd(struct store_obj *o);

/*
 * One registration slot per sealed object, for transports that register
 * an object's memory (store_obj_map()) once for its life (RDMA): the
 * store keeps @reg and owns it from then on.
 *
 * With @reg: hang it on @o (0), unless one hangs there already: then
 * -EEXIST with that one in *@ret_cur (may be NULL), and @reg stays the
 * caller's (it lost a race: it drops its own).  With @reg NULL: only
 * look, 0 and the current one (or NULL) in *@ret_cur.  -EINVAL if @o is
 * pending (its memory is neither final nor served), or @reg comes
 * without @drop or with another @drop than the store's first
 * registration had (one transport registers: its drop is kept once per
 * store, not per object).
 *
 * The store calls @drop(@reg) exactly once: when @o is freed (unlinked
 * or evicted, and its last reference gone), from the thread that drops
 * that reference, before its mapping goes and before its file can go to
 * the pool of freed files or to another object, so that a registration
 * never reaches memory that holds anything but @o; or at store_close()
 * for objects still there, before their mappings go; or earlier, to
 * keep at most store_config.regs_max registrations: then from a thread
 * that hangs another one (in this call), and only while nobody holds
 * @o but the table and leases (store_obj_ref_lease()).  A transport
 * uses a registration only while it holds a reference on the object,
 * and finds it anew each time (with @reg NULL): once dropped, the slot
 * is empty and the caller registers again.  @drop is called with no
 * store lock held; it must not call into the store for @o.
 */
int store_obj_attach(struct store_obj *o, void *reg, void (*drop)(void *reg), void **ret_cur);

/*
 * Fold bytes [0, @end) of a pending object into its checksum now, while
 * they are fresh in the cache, so that store_seal() hashes only the rest.
 * For receivers that fill an object front to back: the caller promises
 * these bytes are final (a store_write() below @end or a resize starts
 * the checksum over).  Returns at once if another thread is doing it.  0,
 * -EACCES if sealed, -ENOMEM, -EINVAL.
 */
int store_hash_ahead(struct store_obj *o, uint64_t end);
/* Pending @o's block sums will not be asked for (a fetched copy whose
 * record has them): hashing ahead leaves them out (store_seal_sums()
 * would sum them all at the seal). */
void store_skip_sums(struct store_obj *o);

/*
 * For writers: [@off, @end) was just written (store_write()).  If that
 * continues the prefix already in the checksum, fold it in now, while it
 * is in the cache; never starts the checksum over except from offset 0,
 * so a writer's bytes are hashed at most once however it writes.  A
 * write below what is folded starts the checksum over (store_write()); a
 * write past its end, appending, does not.  0, -EACCES if sealed,
 * -ENOMEM, -EINVAL.
 */
int store_hash_follow(struct store_obj *o, uint64_t off, uint64_t end);

/*
 * Seal a pending object: compute its checksum, cut its file, write
 * the catalog record with @path and @mtime_ns.  After this the object is
 * immutable.  -EACCES if already sealed.  With @path NULL no record is
 * written yet (a fetched copy, sealed on the reader's path): the object
 * is served at once but does not survive a restart until
 * store_set_path() writes its record.
 */
int store_seal(struct store_obj *o, const char *path, int64_t mtime_ns);
/*
 * store_seal(), and the object's block sums into *@ret_sums (caller
 * frees; NULL for an object of one block, or if there was no memory for
 * them): the same pass that checksums the bytes sums their blocks.
 */
int store_seal_sums(struct store_obj *o, const char *path, int64_t mtime_ns,
		    struct bsums **ret_sums);

/* Record a new path for a sealed object (after a rename). */
int store_set_path(struct store_obj *o, const char *path);

/*
 * Remove an object from the store: its catalog record goes now (a
 * restart will not bring it back), its pages when the last reference
 * goes.  Works on pending objects too (a discarded write).  Idempotent.
 */
void store_unlink(struct store_obj *o);

/* store_unlink() of object @id, if the store has it.  0 or -ENOENT. */
int store_unlink_id(struct store *s, uint64_t id);

/*
 * Call @cb for every sealed, linked object, each with a reference held
 * for the duration of the call.  Stops at the first non-zero return and
 * returns it.
 */
int store_foreach(struct store *s, int (*cb)(struct store_obj *o, void *arg), void *arg);

/*
 * Housekeeping, about once a second (the node's ticker): compacts the
 * catalog log once its dead lines (replaced paths, objects gone) are at
 * least as many as its live ones, and 4096.  Seals and unlinks wait
 * meanwhile (a pass over the live objects: docs/benchmarks.md,
 * LOG_COMPACT_MIN).
 */
void store_tick(struct store *s);

/* ---- use order ---- */

/* Sealed object @id was used now: it goes to the hot end of the use
 * order (nothing if the store has no sealed @id). */
void store_touch(struct store *s, uint64_t id);

/* One of the objects store_walk_cold() gives. */
struct store_cold {
	uint64_t id, size;
};
/* Where a walk stands (zero it to start; store_walk_end() when done). */
struct store_walk {
	struct store_obj *at; /* the last object given, referenced */
	uint32_t stamp;
};
/*
 * Up to @n sealed linked objects in use order, least recently used
 * first, going on from where the last call on @w stopped: O(@n).  If the
 * object it stopped at was used or unlinked meanwhile, it starts again
 * from the coldest: the caller skips what it saw.
 * Objects sealed or adopted are most recent first (adoption keeps the
 * catalog's order).
 */
size_t store_walk_cold(struct store *s, struct store_walk *w, struct store_cold *ret, size_t n);
void store_walk_end(struct store_walk *w);

/*
 * The pages a packed object's slot holds (store_config.pack_max), which
 * come free only with every slot that touches them: @own, the pages only
 * its slot touches; @shared[0..@nshared), those it shares with the
 * slots beside it (at most its first and last), each with a key unique
 * in the store while it is open and the number of used slots that
 * touch it now.
 */
struct store_pages {
	uint64_t own;
	int nshared;
	struct {
		uint64_t key;
		uint32_t used;
	} shared[2];
};
/* Fill @ret for object @o: 0, or -EINVAL if @o is not sealed and packed
 * (an object in a file of its own holds its pages alone). */
int store_obj_pages(struct store_obj *o, struct store_pages *ret);

/* ---- notes ---- */

/* Read note @key (a [a-z0-9_-]+ name) into @buf.  -ENOENT if absent. */
int store_note_get(struct store *s, const char *key, char *buf, size_t len);
/* Write note @key atomically. */
int store_note_set(struct store *s, const char *key, const char *value);

#endif
