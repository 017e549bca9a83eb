/*
 * fs_i.h: state shared by the files of the fs module.
 *
 * Locking: fs->lock guards the inode table, the pending list and every
 * field marked "fs->lock" below.  It is never held across a Redis call or
 * a fuse_reply_*().  Objects (struct store_obj) have their own refcounts.
 */
#ifndef OBJFS_FS_I_H
#define OBJFS_FS_I_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
/* uthash: report allocation failure instead of calling exit() */
#define HASH_NONFATAL_OOM 1
#include <uthash.h>

#include "fs.h"
#include "log.h"
#include "meta.h"
#include "store.h"
#include "util.h"

/* Cache lifetimes handed to the kernel.  Objects never change, so their
 * entries and attributes can be cached for a long time; directories change
 * (mtime, link count), so their attributes are kept short. */
#define FS_ENTRY_TIMEOUT 3600.0
#define FS_FILE_ATTR_TIMEOUT 3600.0
#define FS_DIR_ATTR_TIMEOUT 1.0

/* threads that fetch chunks of other nodes' objects */
#define FS_FETCH_WORKERS 8

/*
 * A file being written on this node.  It is visible on this node only (an
 * overlay on the Redis namespace) until its last handle is released and
 * it is sealed and published.
 */
struct pending {
	uint64_t id;
	uint64_t parent;	/* fs->lock */
	char name[OBJFS_NAME_MAX + 1];	/* fs->lock */
	struct store_obj *obj;	/* one reference, owned */
	unsigned opens;		/* handles open on it; fs->lock */
	unsigned flushed;	/* handles flushed since their last write; fs->lock */
	bool replace;		/* replaces an existing name at seal (allow_overwrite) */
	bool failed;		/* a write failed: discard instead of sealing */
	bool unlinked;		/* name removed before the seal: discard */
	bool sealing;		/* last handle gone, seal in progress; fs->lock */
	int64_t created_ns;	/* mono_ns(); for reaping replacements nobody opened */
	struct pending *next;	/* fs->lock */
};

/* An inode the kernel knows about (nlookup > 0) or that a handle uses. */
struct inode {
	uint64_t ino;		/* = meta id */
	enum meta_kind kind;
	uint64_t nlookup;	/* fs->lock */
	unsigned handles;	/* open handles; fs->lock */
	bool sealed;		/* fs->lock */
	struct meta_obj obj;	/* sealed attributes; fs->lock */
	struct pending *pending;	/* while written here; fs->lock */
	/* files: the name it was last looked up by (for a fetched copy's
	 * catalog path); fs->lock */
	uint64_t parent;
	char *name;
	/* directories: cached attributes */
	int64_t dir_mtime;	/* fs->lock */
	uint64_t dir_nsub;	/* fs->lock */
	UT_hash_handle hh;
};

/*
 * The last known meaning of a name, kept after the kernel forgets the
 * inode, so that names of local objects still resolve while Redis is
 * unreachable.  Keyed by "<parent id>/<name>".
 */
struct dentry {
	char *key;
	enum meta_kind kind;
	uint64_t id;
	UT_hash_handle hh;
};

/* A published-later object: sealed while Redis was unreachable. */
struct unpublished {
	uint64_t id;
	uint64_t parent;
	char name[OBJFS_NAME_MAX + 1];
	bool replace;
	struct unpublished *next;
};

/* An O_TRUNC open of sealed object @id asked for a replacement (see
 * fs_file.c); the lookup that follows within a moment creates it. */
struct replace_wish {
	uint64_t id;
	int64_t at_ns;
};

struct fs {
	struct fs_config cfg;	/* strings owned */
	struct meta *meta;
	struct store *store;
	struct fuse_session *se;
	bool mounted;

	pthread_mutex_t lock;
	pthread_cond_t settle;	/* signalled when a pending object is released */
	struct inode *inodes;	/* fs->lock; uthash by ino */
	struct pending *pending;	/* fs->lock */
	struct unpublished *unpublished;	/* fs->lock */
	char epoch[64];		/* last Redis epoch reconciled against; fs->lock */
	struct replace_wish wishes[16];	/* fs->lock */
	struct dentry *dcache;	/* fs->lock; uthash by key */
	size_t n_dcache;	/* fs->lock */

	/* fetches of other nodes' objects (fs_fetch.c) */
	struct fetch *fetches;	/* fs->lock; uthash by id */
	pthread_mutex_t flock;	/* see fs_fetch.c */
	pthread_cond_t fq_cond;	/* workers wait here; fs->flock */
	struct fetch *fq;	/* fetches with chunks to hand out; fs->flock */
	bool fq_stop;		/* fs->flock */
	pthread_t workers[FS_FETCH_WORKERS];
	unsigned nworkers;
	struct lru *lru;	/* last use of local objects; fs->lock; uthash by id */
	struct peer_addr *peer_addrs;	/* fs->lock; uthash by node (fs_fetch.c) */

	/* counters, atomics */
	uint64_t n_sealed, n_published_late, n_reregistered;
	uint64_t n_fetches, n_fetch_direct, n_fetch_done, n_fetch_failed, n_fetch_bytes, n_failovers;
	uint64_t n_csum_failures, n_stale_holders, n_evictions, n_invalidations;
};

/* An open file: one per open(2) of a file through the mount. */
struct handle {
	struct store_obj *obj;	/* reference, owned */
	struct pending *pending;	/* set if this handle is on a pending object */
	struct fetch *fetch;	/* set while the object is being fetched here */
	bool writable;
	bool flushed;		/* fs->lock */
};

/* fs_fetch.c */
struct fetch;
int fetch_open(struct fs *fs, uint64_t id, const struct meta_obj *rec, struct fetch **ret_f,
	       struct store_obj **ret_obj);
void fetch_peer_cache_free(struct fs *fs);
struct fetch *fetch_ref(struct fs *fs, struct fetch *f);
/* After the open was answered: finish what a fetch done inside open()
 * left (Redis, the catalog record), and drop a fetch_ref() reference. */
void fetch_opened(struct fs *fs, struct fetch *f);
int fetch_wait(struct fs *fs, struct fetch *f, uint64_t off, uint64_t len);
void fetch_put(struct fs *fs, struct fetch *f);
int fetch_progress(struct fs *fs, uint64_t id, uint64_t *ret_done, uint64_t *ret_size);
bool fetch_running(struct fs *fs, uint64_t id);
int fetch_start_workers(struct fs *fs);
void fetch_stop_workers(struct fs *fs);
void fetch_drop_all(struct fs *fs);

/* fs_cache.c */
struct lru;
void fs_lru_touch(struct fs *fs, uint64_t id);
void fs_lru_free_all(struct fs *fs);
uint64_t fs_evict(struct fs *fs, uint64_t need);

/* fs_inode.c */
struct inode *inode_find(struct fs *fs, uint64_t ino);
struct inode *inode_get(struct fs *fs, uint64_t ino, enum meta_kind kind);
void inode_forget(struct fs *fs, uint64_t ino, uint64_t n);
void inode_set_name(struct inode *in, uint64_t parent, const char *name);
void inode_put_handle(struct fs *fs, uint64_t ino);
void inode_free_all(struct fs *fs);
struct pending *pending_find(struct fs *fs, uint64_t parent, const char *name);
void dcache_put(struct fs *fs, uint64_t parent, const char *name, enum meta_kind kind,
		uint64_t id);
void dcache_del(struct fs *fs, uint64_t parent, const char *name);
bool dcache_get(struct fs *fs, uint64_t parent, const char *name, enum meta_kind *ret_kind,
		uint64_t *ret_id);
void dcache_free_all(struct fs *fs);
void pending_remove(struct fs *fs, struct pending *p);

/* fs_file.c */
void fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		  struct fuse_file_info *fi);
void fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		 struct fuse_file_info *fi);
void fs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		   struct fuse_file_info *fi);
void fs_pending_settle(struct fs *fs, struct pending *p);
void fs_pending_free(struct pending *p);
bool fs_take_replace_wish(struct fs *fs, uint64_t id);
void fs_publish_retry(struct fs *fs);
void fs_reap_pending(struct fs *fs);

/* fs.c */
void fs_fill_attr(struct fs *fs, struct inode *in, struct stat *st);
void fs_reply_attr(fuse_req_t req, struct fs *fs, fuse_ino_t ino);
int fs_reply_entry_for(fuse_req_t req, struct fs *fs, struct inode *in);
void fs_forget_local(struct fs *fs, uint64_t id);
void fs_notify_gone(struct fs *fs, uint64_t parent, const char *name);
int fs_errno(struct fs *fs, int err, const char *what, uint64_t parent, const char *name);

#endif
