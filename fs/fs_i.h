/*
 * fs_i.h: state shared by the files of the FUSE layer.
 *
 * fs may call node, store, meta, transport and common, and nothing calls
 * fs: node reaches it only through the hooks fs gives it.  fs never
 * touches Redis, peers or the store's files but through those rooms.
 *
 *   fs.c          the session, the ops table, connection tuning, the
 *                 node's hooks; creates and frees everything below
 *   fs_dir.c      namespace operations: lookup, getattr, readdir, mkdir,
 *                 rmdir, unlink, rename
 *   fs_xattr.c    xattrs, the status report, statfs
 *   fs_file.c     file handles: create, open, read, write, flush,
 *                 release, setattr; overwrite wishes
 *   fs_seal.c     the end of a pending file: node_seal_publish() and the
 *                 overlay, seal retries, reaping abandoned replacements;
 *                 the tick
 *   fs_lastclose.c  what FLUSH reads of /proc: is this the writer's last
 *                 close, was it killed by a signal
 *   fs_inval.c    invalidation: from other nodes, and of this node's
 *                 kernel cache
 *   fs_inode.c    inodes, the write overlay, the name cache, replies
 *   fs_pt.c       FUSE passthrough on libfuse 3.14 (fs_pt.h): a custom
 *                 I/O layer, backing ids; knows no inode
 *
 * Calls go down that list only, never up (fs_xattr.c calls only files
 * below it too).  What happens to an object on this node (create, open or
 * fetch, seal and publish, eviction, reconciling) is node/'s.
 *
 * Locking: fs->lock guards the inode table, the overlay of pending files,
 * the name cache, the overwrite wishes, and every field marked
 * "fs->lock" below.  It is never held across a Redis call, a
 * node call, a transfer or a fuse_reply_*() (the reply may be the
 * kernel's last reference), except by functions named *_unlock, which
 * drop it before replying.  Objects (struct store_obj) and fetches have
 * their own refcounts.  Lock order: fs->lock, then the node's lock,
 * then the store's locks.
 */
#ifndef OBJFS_FS_I_H
#define OBJFS_FS_I_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
/* uthash: report allocation failure instead of calling exit() */
#define HASH_NONFATAL_OOM 1
#include <uthash.h>

#include "fs.h"
#include "fs_pt.h"
#include "log.h"
#include "meta.h"
#include "node.h"
#include "slab.h"
#include "store.h"
#include "util.h"

/* Cache lifetimes handed to the kernel.  Objects never change, so their
 * entries and attributes can be cached for a long time; directories change
 * (mtime, link count), so their attributes are kept short. */
#define FS_ENTRY_TIMEOUT 3600.0
#define FS_FILE_ATTR_TIMEOUT 3600.0
#define FS_DIR_ATTR_TIMEOUT 1.0
#define FS_NEG_SLOTS 64
#define FS_NEG_TTL_NS 1000000000LL

/*
 * A file being written on this node.  It is visible on this node only (an
 * overlay on the Redis namespace) until its last writer is done with it
 * and it is sealed and published (fs_seal.c).  A writer is done when
 * the process that opened its handle closes its last descriptor of the
 * file (a FLUSH, see fs_file.c), or at the handle's RELEASE.
 *
 * Life: in the overlay (fs->pending, inode->pending) until the seal ends;
 * then sealed or discarded, out of the overlay, and freed by whoever
 * comes last of the seal and the last handle's release (opens == 0).
 */
struct pending {
	uint64_t id;
	uint64_t parent;	       /* fs->lock */
	char name[OBJFS_NAME_MAX + 1]; /* fs->lock */
	struct store_obj *obj;	       /* one reference, owned */
	unsigned opens;		       /* handles open on it; fs->lock */
	unsigned writers;	       /* writable handles not yet done; fs->lock */
	unsigned flushed;	       /* handles flushed since their last write; fs->lock */
	bool replace;		       /* replaces an existing name at seal (allow_overwrite) */
	bool failed;		       /* a write failed: discard instead of sealing; fs->lock */
	bool unlinked;		       /* name removed before the seal: discard; fs->lock */
	bool sealing;		       /* last writer done, seal in progress; fs->lock */
	bool sealed;		       /* the seal kept it: immutable now; fs->lock */
	bool discarded;		       /* the seal gave it up; fs->lock */
	bool late_logged;	       /* a write after the seal was logged; fs->lock */
	bool seal_retry;	       /* the seal failed at a RELEASE: the tick tries again;
					* sealing stays true meanwhile; fs->lock */
	int seal_err;		       /* why it was discarded when its seal failed (-errno);
					* writes and closes of its writers get it; fs->lock */
	int killed_sig;		       /* the signal that killed the process that wrote last
					* (0: none): sealed into /lost+found; fs->lock */
	pid_t writer_tid, writer_tgid; /* the thread that wrote last, its process; fs->lock */
	/* a handle on it was opened O_RDWR, which a writable shared mapping
	 * needs: only then does FLUSH read /proc/<pid>/maps; fs->lock */
	bool mappable;
	pid_t mapper_tid;   /* a FLUSH found it mapped shared and writable by this
			     * thread: the seal at RELEASE asks how it ended; fs->lock */
	int64_t created_ns; /* util_mono_ns(); for reaping replacements nobody opened */
	/* its creator's uid, gid and mode, and what setattr changed since
	 * (utimensat before the seal: cp -p, tar); published with it; fs->lock */
	struct node_meta md;
	struct pending *next; /* fs->lock */
};

/*
 * How the kernel serves a handle's reads and mmap (see fs_file.c for who
 * gets which): its page cache filled by the daemon, the daemon with no
 * page cache (FOPEN_DIRECT_IO), or the object's store file itself (FUSE
 * passthrough).
 */
enum fs_io {
	FS_IO_NONE, /* not answered yet: not counted */
	FS_IO_CACHED,
	FS_IO_DIRECT,
	FS_IO_PT,
};

/* A sealed object's record as an inode keeps it: struct meta_obj less
 * its id (the inode's number) and with its origin's name interned
 * (fs_origin()), 40 bytes where it was 104. */
struct inode_rec {
	uint64_t size;
	int64_t mtime_ns;
	uint8_t csum[OBJFS_CSUM_LEN];
	const char *origin; /* lives as long as the fs */
};

/* A node name kept once (struct fs.origins). */
struct origin_name {
	UT_hash_handle hh;
	char name[];
};

/* An inode the kernel knows about (nlookup > 0) or that a handle uses. */
struct inode {
	uint64_t ino; /* = meta id */
	enum meta_kind kind;
	uint64_t nlookup; /* fs->lock */
	unsigned handles; /* open handles; fs->lock */
	/* of those, opened (answered) in each enum fs_io; fs->lock */
	unsigned n_cached, n_direct, n_pt;
	/* the backing id of the passthrough handles (0: none): registered at
	 * the first, closed once the last is released; pt_obj, one
	 * reference owned, is the object whose file it is, kept as long as
	 * the id is registered; fs->lock */
	uint32_t backing_id;
	struct store_obj *pt_obj;
	bool sealed; /* fs->lock */
	/* its sealed bytes were stored in the kernel's page cache at an open
	 * (fill_cache() in fs_file.c); cleared when they are dropped; fs->lock */
	bool filled;
	/* owner, mode, atime and ctime (not set: the mount's defaults;
	 * a pending file's are its pending's md); fs->lock */
	struct meta_attr attr;
	/* another node changed them: GETATTR reads them again; fs->lock */
	bool attr_stale;
	uint64_t attr_seq;	 /* fs->attr_seq at their last change; fs->lock */
	struct inode_rec obj;	 /* sealed attributes; fs->lock */
	struct pending *pending; /* while written here; fs->lock */
	/* files: the name it was last looked up or created by (for a
	 * fetched copy's catalog path, and inval_all()); fs->lock */
	uint64_t parent;
	char *name;
	/* directories: cached attributes, and when they were read from
	 * Redis (mono ns; 0: to be read again).  GETATTR answers from them
	 * for FS_DIR_ATTR_TIMEOUT: the kernel drops its copy at every create
	 * or unlink in the directory, and asking Redis each time would cost
	 * a round trip per create.  A change by another node (its
	 * invalidation) makes them stale at once; this node's own changes
	 * update them (fs_dir_touched_locked()). */
	int64_t dir_mtime; /* fs->lock */
	uint64_t dir_nsub; /* fs->lock */
	int64_t dir_at;	   /* fs->lock */
	/* directories: +1 at every change of the listing the kernel may have
	 * cached that it was told about (fs_notify_dir()); fs->lock */
	uint64_t dir_gen;
	UT_hash_handle hh;
};

/*
 * The last known meaning of a name, kept after the kernel forgets the
 * inode, so that names of local objects still resolve while Redis is
 * unreachable.  Directories: a struct dentry each, keyed by
 * "<parent id>/<name>", in an exact LRU of at most DCACHE_MAX.  Files
 * (there may be millions): a struct dcache_slot each, in a
 * set-associative table (see fs_inode.c).
 */
#define DCACHE_MAX (1u << 20) /* directory names the name cache keeps */
/*
 * Slots of the file table at most: 2^21 slots of 16 B are 32 MiB, and
 * hold 2^20 names or more without replacing any (the directory LRU's
 * capacity, which files shared before), a fraction of what as many
 * dentries took (docs/benchmarks.md, "Figures behind constants").
 */
#define DCACHE_FILES_MAX (1u << 21)
#define DCACHE_FILES_MIN 1024u /* slots at first */
#define DCACHE_WAYS 8u	       /* slots of a bucket: two cache lines */
/* A file's name: @key hashes (parent, name), never 0 (0: free slot). */
struct dcache_slot {
	uint64_t key;
	uint64_t id;
};
/* The two buckets (of @nbuckets, a power of two) @key may live in. */
static inline size_t dcache_bucket(uint64_t key, size_t nbuckets, unsigned which)
{
	return (size_t)(which ? key >> 32 : key) & (nbuckets - 1);
}
/* The key of (@parent, @name) in the file table; never 0. */
uint64_t fs_dcache_file_key(uint64_t parent, const char *name);
struct dentry {
	UT_hash_handle hh;
	struct dentry *prev, *next; /* fs->dcache_lru, most recent first */
	uint64_t id;
	enum meta_kind kind;
	char key[]; /* "<parent id>/<name>" */
};

/* An O_TRUNC open of sealed object @id asked for a replacement (see
 * fs_file.c); the lookup that follows within a moment creates it. */
struct replace_wish {
	uint64_t id;
	int64_t at_ns;
};

struct fs {
	struct fs_config cfg; /* strings owned; fixed */
	struct meta *meta;    /* not owned */
	struct store *store;  /* not owned */
	struct node *nd;      /* not owned */
	struct fuse_session *se;
	struct fs_pt *pt;    /* owned; thread-safe */
	atomic_bool mounted; /* read by threads that notify the kernel */
	/* the mount as /proc/self/mountinfo shows it, for FLUSH's look at
	 * other processes' descriptors (fs_file.c); set in fs_mount(), 0 if
	 * not found */
	int mnt_id;
	unsigned mnt_major, mnt_minor;

	pthread_mutex_t lock;
	pthread_cond_t settle; /* signalled when a pending object is released */
	struct inode *inodes;  /* fs->lock; uthash by ino */
	/* where inodes are allocated: the pages of those the kernel forgot
	 * go back (common/slab.h); fs->lock */
	struct slab_pool *inode_slab;
	/* inodes freed since the tick last gave the allocator's free
	 * memory back (fs_tick()), and how often it did; fs->lock */
	uint64_t inodes_freed, heap_trims;
	/* +1 at every change of an owner, mode or time this node learns of
	 * (its own setattr, another node's "attr"): what Redis said before
	 * such a change must not undo it (fs_inode_update_as_of()); fs->lock */
	uint64_t attr_seq;
	/* the origins inodes name (struct inode_rec); fs->lock; freed with
	 * the fs: as many as nodes ever wrote an object seen here */
	struct origin_name *origins;
	struct pending *pending;		 /* fs->lock */
	struct replace_wish wishes[16];		 /* fs->lock */
	struct dentry *dcache;			 /* fs->lock; uthash by key */
	size_t n_dcache;			 /* fs->lock */
	struct dentry *dcache_lru, *dcache_cold; /* fs->lock: by last use */
	/* the file table: dcache_nslots slots (0: none yet), n_dcache_files
	 * of them used; the hand picks what a full bucket replaces; fs->lock */
	struct dcache_slot *dcache_files;
	size_t dcache_nslots, n_dcache_files;
	unsigned dcache_hand;
	/* names Redis just said are free (fs_neg_note()); fs->lock */
	struct negative {
		uint64_t parent;
		int64_t at; /* mono ns; 0: empty */
		char name[OBJFS_NAME_MAX + 1];
	} neg[FS_NEG_SLOTS];

	struct {
		/* sealed_at_close: of sealed, those a FLUSH sealed (close(2)
		 * waited for them) */
		atomic_uint_fast64_t sealed, sealed_at_close, invalidations, inval_own;
		/* opens answered in each enum fs_io; READ requests served */
		atomic_uint_fast64_t opens_cached, opens_direct, opens_pt, reads;
		/* page-cache opens whose bytes were stored in the kernel's
		 * cache with the open (FUSE_NOTIFY_STORE) */
		atomic_uint_fast64_t cache_fills;
		/* FLUSH requests (close(2) of a handle that was not opened
		 * noflush) */
		atomic_uint_fast64_t flushes;
		/* directory listings read from Redis (the kernel's cache missed) */
		atomic_uint_fast64_t listings;
	} cnt;
};

#define FS_COUNT(fs, field, n) \
	atomic_fetch_add_explicit(&(fs)->cnt.field, (n), memory_order_relaxed)

/* An open file: one per open(2) of a file through the mount. */
struct handle {
	struct store_obj *obj;	  /* reference, owned */
	struct pending *pending;  /* set if this handle is on a pending object */
	struct node_fetch *fetch; /* reference, set while the object is fetched here */
	enum fs_io io;		  /* counted in its inode's n_*; fs->lock */
	bool writable;
	bool flushed; /* fs->lock */
	/* the opener's last descriptor of the file is closed: no longer one
	 * of pending->writers; fs->lock */
	bool done;
	pid_t opener;	   /* thread that opened it (as FUSE gives it; 0: unknown) */
	pid_t opener_tgid; /* its process, for a writable handle (0: unknown) */
};

/* ---- fs_dir.c ---- */
void fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void fs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void fs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi);
void fs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi);
void fs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		  const char *newname, unsigned int flags);

/* ---- fs_xattr.c ---- */
void fs_op_statfs(fuse_req_t req, fuse_ino_t ino);
void fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		    size_t size, int flags);
void fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

/* ---- fs_file.c ---- */
void fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		  struct fuse_file_info *fi);
void fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		 struct fuse_file_info *fi);
void fs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void fs_op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name);
void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void fs_op_readlink(fuse_req_t req, fuse_ino_t ino);
void fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		   struct fuse_file_info *fi);
/* Did an O_TRUNC open ask, a moment ago, for @id to be replaced?  Takes
 * the wish.  Takes fs->lock. */
bool fs_take_replace_wish(struct fs *fs, uint64_t id);

/* ---- fs_seal.c ---- */
/*
 * The last writer of @p is done (the caller set p->sealing): seal and
 * publish it (node_seal_publish()), or discard it.  Frees @p if no handle
 * is open on it any more (else the last release does).  Takes fs->lock.
 * 0; -EIO if it is sealed but not published (Redis unreachable: it is
 * published later) or could not be sealed; -ENOSPC if a write was lost
 * (discarded).  @told: the result reaches the writer (a FLUSH: close(2)
 * returns it), so a seal that fails discards the object; otherwise (a
 * RELEASE: the writer's close(2) already returned 0) nothing is
 * discarded: the object stays pending and fs_seal_retry() tries again.
 */
int fs_seal_pending(struct fs *fs, struct pending *p, bool told);
/* Try again the seals that failed at a RELEASE (from the tick). */
void fs_seal_retry(struct fs *fs);
/* Discard replacement objects whose writer never opened them. */
void fs_reap_pending(struct fs *fs);

/* ---- fs_lastclose.c ---- */
/* What FLUSH learns of a writer's close (docs/design.md, "When a writer
 * is done"). */
enum flush_verdict {
	FLUSH_NOT_LAST, /* the opener's process (or a child) still holds the file */
	FLUSH_LAST,	/* the opener's last close, or the daemon could not look:
			 * seal now, and close(2) gets the result */
	FLUSH_BLIND,	/* the daemon cannot see the writer at all (another pid
			 * namespace, /proc closed to it, no fdinfo "ino:"): RELEASE seals */
};

/* Is this FLUSH of @h (a writable handle on a pending object, inode
 * number @ino) its opener's last close of the file?  @maps: look for
 * writable shared mappings too; *@ret_mapper gets the thread found mapping
 * it. */
enum flush_verdict fs_flush_verdict(fuse_req_t req, const struct handle *h, uint64_t ino, bool maps,
				    pid_t *ret_mapper);
/*
 * The signal that is killing thread @tid, if it is exiting from one
 * (/proc/<tid>/stat: PF_EXITING in flags, field 9; the wait status in
 * exit_code, field 52, set before the kernel closes a dying process's
 * descriptors); 0 if it is not, or -errno if it cannot tell.
 */
int fs_task_killed_by(pid_t tid);
/* The process (thread group) of thread @tid, from /proc/<tid>/status; 0
 * if it cannot tell (gone, or FUSE gave no pid). */
pid_t fs_task_tgid(pid_t tid);

/* ---- fs_inval.c ---- */
/* Make the kernel forget its entry for @name (which no longer names what
 * it cached), and its listing of @parent.  Never call with fs->lock held. */
void fs_notify_gone(struct fs *fs, uint64_t parent, const char *name);
/* The listing of directory @dir changed: make the kernel drop its cached
 * listing and attributes of @dir, and tell the handles reading it now
 * (dir_gen).  Never call with fs->lock held. */
void fs_notify_dir(struct fs *fs, uint64_t dir);
/* Make the kernel drop its cached pages of @ino.  Never call with
 * fs->lock held, nor from a thread that serves FUSE requests. */
void fs_notify_data_gone(struct fs *fs, uint64_t ino);

/* ---- fs_inode.c: everything here is called with fs->lock held, unless
 * said otherwise ---- */
struct inode *fs_inode_find(struct fs *fs, uint64_t ino);
/* Find or make the inode @ino; NULL only on allocation failure. */
struct inode *fs_inode_get(struct fs *fs, uint64_t ino, enum meta_kind kind);
void fs_inode_forget(struct fs *fs, uint64_t ino, uint64_t n);
/* Remember the name @in was looked up by (best effort). */
void fs_inode_set_name(struct inode *in, uint64_t parent, const char *name);
/* Drop a handle's hold on an inode (see struct inode.handles). */
void fs_inode_put_handle(struct fs *fs, uint64_t ino);
void fs_inode_free_all(struct fs *fs);
/* Update @in from a meta entry. */
void fs_inode_update(struct fs *fs, struct inode *in, const struct meta_entry *e);
/* fs_inode_update() with what Redis said when fs->attr_seq was @seen: its
 * owner, mode and times only if they have not changed since. */
void fs_inode_update_as_of(struct fs *fs, struct inode *in, const struct meta_entry *e,
			   uint64_t seen);
/* @in's owner, mode or times changed (setattr, "attr"); fs->lock held. */
void fs_inode_attr_changed(struct fs *fs, struct inode *in);
/* Keep @mo as @in's sealed record; the record of @in as a meta_obj. */
void fs_inode_set_rec(struct fs *fs, struct inode *in, const struct meta_obj *mo);
void fs_inode_get_rec(const struct inode *in, struct meta_obj *ret);
void fs_inode_origins_free(struct fs *fs);

struct pending *fs_pending_find(struct fs *fs, uint64_t parent, const char *name);
/* Unlink @p from the overlay; the caller still owns it. */
void fs_pending_remove(struct fs *fs, struct pending *p);
/*
 * Wait until @p is sealed if its last handle is gone (a seal is running),
 * or if every handle was closed and only the asynchronous RELEASE is
 * outstanding.  May drop and retake fs->lock; @p may be freed meanwhile.
 */
void fs_pending_settle_locked(struct fs *fs, struct pending *p);
/* Inode @ino (NULL if none), after the seal of the file being written
 * there settled (fs_pending_settle_locked()).  fs->lock held. */
struct inode *fs_inode_find_settled(struct fs *fs, uint64_t ino);
/* Discard @p and free it (no lock needed: @p is the caller's). */
void fs_pending_free(struct fs *fs, struct pending *p);

void fs_dcache_put(struct fs *fs, uint64_t parent, const char *name, enum meta_kind kind,
		   uint64_t id);
void fs_dcache_del(struct fs *fs, uint64_t parent, const char *name);
/*
 * The kernel sends LOOKUP, then CREATE, for a new name, both under the
 * directory's lock.  fs_neg_note() remembers that Redis just answered
 * ENOENT for @name; fs_neg_take() tells CREATE whether that answer is at
 * most FS_NEG_TTL_NS old (and forgets it), so that CREATE need not ask
 * Redis again.  A name another node links in between is found at the
 * seal, as one linked while the object is written always was.  Both
 * with fs->lock held.
 */
void fs_neg_note(struct fs *fs, uint64_t parent, const char *name);
/* This node changed directory @dir: its mtime is now; if @counts, its link
 * count may have changed too, so its attributes are read again.  With
 * fs->lock held. */
void fs_dir_touched_locked(struct fs *fs, uint64_t dir, bool counts);
/* fs_dir_touched_locked() taking fs->lock itself. */
void fs_dir_touched(struct fs *fs, uint64_t dir, bool counts);
bool fs_neg_take(struct fs *fs, uint64_t parent, const char *name);
bool fs_dcache_get(struct fs *fs, uint64_t parent, const char *name, enum meta_kind *ret_kind,
		   uint64_t *ret_id);
void fs_dcache_free_all(struct fs *fs);
/* fs_dcache_del() and fs_dcache_put() taking fs->lock themselves. */
void fs_dcache_forget(struct fs *fs, uint64_t parent, const char *name);
/* A file was published at (@parent, @name): the cache keeps it if this
 * node holds @id (it answers for local objects while Redis is away: a
 * file held elsewhere could not be opened then), else forgets the name,
 * so that what other nodes publish does not fill it. */
void fs_dcache_learn_file(struct fs *fs, uint64_t parent, const char *name, uint64_t id);
/* What Redis said (@parent, @name) means, under fs->lock: remembered if
 * a directory or a file this node holds or is fetching (node_holds()),
 * else forgotten (the cache is for this node's objects; opening one that
 * is fetched remembers it, and a lookup while its fetch runs must not
 * forget it). */
void fs_dcache_seen(struct fs *fs, uint64_t parent, const char *name, enum meta_kind kind,
		    uint64_t id);
void fs_dcache_learn(struct fs *fs, uint64_t parent, const char *name, enum meta_kind kind,
		     uint64_t id);

/* Attributes of @in for the kernel. */
void fs_fill_attr(struct fs *fs, struct inode *in, struct stat *st);
/* What an entry of @kind with no owner of its own shows (the mount's
 * uid=, gid=, umask=), its atime and ctime @mtime_ns. */
void fs_default_attr(struct fs *fs, enum meta_kind kind, int64_t mtime_ns, struct meta_attr *ret);
/* Sealed or directory @in's owner, mode and times as recorded, or the
 * defaults; fs->lock held. */
void fs_shown_attr(struct fs *fs, const struct inode *in, struct meta_attr *ret);
/* What a file or directory @kind that @req's caller makes in @parent with
 * @mode (the kernel took the umask off) records: the caller's uid and
 * gid (the directory's gid if it is set-group-ID), times @now.  fs->lock
 * held. */
void fs_new_attr(struct fs *fs, fuse_req_t req, uint64_t parent, enum meta_kind kind, mode_t mode,
		 int64_t now, struct meta_attr *ret);
/* How long the kernel may cache @in's attributes. */
double fs_attr_timeout(const struct inode *in);
/* The entry of @in as a lookup gives it (no reference taken). */
void fs_fill_entry(struct fs *fs, struct inode *in, struct fuse_entry_param *e);
/* Take a lookup reference on @in and reply with its entry; drops fs->lock
 * before replying. */
int fs_reply_entry_unlock(fuse_req_t req, struct fs *fs, struct inode *in);
/* Reply with the attributes of inode @ino.  Takes fs->lock. */
void fs_reply_attr(fuse_req_t req, struct fs *fs, fuse_ino_t ino);
/*
 * The one way an op answers with an error (or with plain success): @r is
 * 0 or a negative errno, as everywhere in objfs; the kernel gets -@r, as
 * libfuse's fuse_reply_err() wants it.  fs_reply_err_at() names the
 * request (@what of @name in directory @parent) and logs what the user
 * must know: a corrupt record in Redis (-EBADMSG, answered EIO), Redis
 * unreachable (-EIO).  fs_kernel_errno() is the map itself (a positive
 * @r is a bug: logged, EIO).  No lock needed.
 */
void fs_reply_err(fuse_req_t req, int r);
void fs_reply_err_at(fuse_req_t req, int r, const char *what, uint64_t parent, const char *name);
int fs_kernel_errno(struct fs *fs, int r, const char *what, uint64_t parent, const char *name);

/* node_open()'s error @r as an open answers it: -ENOENT, -ENOSPC, -EFBIG
 * and -ENOMEM as they are, anything else (a peer, the wire, Redis) -EIO */
int fs_open_errno(int r);

#endif
