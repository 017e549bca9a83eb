/*
 * fs_inval: keeping the kernel's caches and this node's copies in step
 * with the namespace.
 *
 * Every namespace change anywhere is published by Redis; the subscriber
 * thread of meta calls fs_on_inval(), which drops the kernel's cached
 * entry for the name and its cached listing of the directory (FUSE
 * notify; see fs_dir.c for why a listing may need it twice) and, for an
 * object that was deleted, this node's copy (its pages go once no reader
 * has it open).  Changes the daemon makes on its own (a write given up, a
 * replacement published, a name taken meanwhile) drop the listing too.
 * After a gap in the subscription (Redis was away), every cached name
 * and listing is dropped,
 * since messages may have been missed, and the store is reconciled with
 * Redis at once (node_resync()), as it is on "resync": Redis lost writes.
 *
 * The notify calls may wait for the kernel, which may be waiting for a
 * FUSE request of ours: they are never made with fs->lock held.
 */
#include "fs_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void notify_entry(struct fs *fs, uint64_t parent, const char *name)
{
	if (fs->se && atomic_load(&fs->mounted))
		fuse_lowlevel_notify_inval_entry(fs->se, parent, name, strlen(name));
}

/* The kernel keeps a directory's cached listing in the directory's
 * pages: dropping them all (offset 0) drops it, with its attributes.
 * (Dropping the attributes alone would do only if something read them
 * again before the listing, such as the stat(2) of `ls`.) */
static void notify_listing(struct fs *fs, uint64_t dir)
{
	if (fs->se && atomic_load(&fs->mounted))
		fuse_lowlevel_notify_inval_inode(fs->se, dir, 0, 0);
}

void fs_notify_dir(struct fs *fs, uint64_t dir)
{
	struct inode *in;

	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find(fs, dir);
	if (in)
		in->dir_gen++;
	pthread_mutex_unlock(&fs->lock);
	notify_listing(fs, dir);
}

void fs_notify_gone(struct fs *fs, uint64_t parent, const char *name)
{
	notify_entry(fs, parent, name);
	fs_notify_dir(fs, parent);
}

void fs_notify_data_gone(struct fs *fs, uint64_t ino)
{
	struct inode *in;

	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find(fs, ino);
	if (in)
		in->filled = false;
	pthread_mutex_unlock(&fs->lock);
	if (fs->se && atomic_load(&fs->mounted))
		fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0);
}

/* Drop every listing the kernel may have cached. */
static void inval_listings(struct fs *fs)
{
	struct inode *in, *tmp;
	uint64_t *dirs;
	size_t n = 0, cap, i;

	pthread_mutex_lock(&fs->lock);
	cap = HASH_COUNT(fs->inodes);
	dirs = calloc(cap ? cap : 1, sizeof(*dirs));
	HASH_ITER (hh, fs->inodes, in, tmp) {
		if (in->kind != META_DIR)
			continue;
		in->dir_gen++;
		if (dirs && n < cap)
			dirs[n++] = in->ino;
	}
	pthread_mutex_unlock(&fs->lock);
	for (i = 0; i < n; i++)
		notify_listing(fs, dirs[i]);
	free(dirs);
}

/* Drop every name and listing the kernel may have cached (messages were
 * lost): the names of directories in the name cache, and those of the
 * files the kernel holds (it caches a file's name only with an entry
 * this daemon gave it: a lookup, a create or a READDIRPLUS, each of which
 * names the inode).  The name cache's files are hashes, not names, and
 * need not be: those the kernel still caches are among its inodes. */
static void inval_all(struct fs *fs)
{
	struct dentry *d, *dtmp;
	struct inode *in, *itmp;
	char **keys = NULL, key[OBJFS_NAME_MAX + 32];
	size_t n = 0, cap, i;

	pthread_mutex_lock(&fs->lock);
	cap = fs->n_dcache + HASH_COUNT(fs->inodes);
	keys = calloc(cap ? cap : 1, sizeof(*keys));
	if (keys) {
		HASH_ITER (hh, fs->dcache, d, dtmp) {
			if (n < cap && (keys[n] = strdup(d->key)))
				n++;
		}
		HASH_ITER (hh, fs->inodes, in, itmp) {
			if (!in->name || n >= cap)
				continue;
			snprintf(key, sizeof(key), "%" PRIu64 "/%s", in->parent, in->name);
			if ((keys[n] = strdup(key)))
				n++;
		}
	}
	pthread_mutex_unlock(&fs->lock);
	for (i = 0; i < n; i++) {
		char *slash = strchr(keys[i], '/');

		if (slash) {
			*slash = '\0';
			notify_entry(fs, strtoull(keys[i], NULL, 10), slash + 1);
		}
		free(keys[i]);
	}
	free(keys);
	inval_listings(fs);
	log_info("invalidation messages may have been missed; dropped %zu cached names", n);
}

/* Drop this node's copy of a deleted object, unless it is being written
 * here (an object with the same id cannot be, but be safe). */
static void drop_deleted(struct fs *fs, uint64_t id)
{
	struct inode *in;
	bool mine;

	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find(fs, id);
	mine = in && in->pending;
	pthread_mutex_unlock(&fs->lock);
	if (!mine)
		node_gone(fs->nd, id);
}

/* A file's or directory's owner, mode or times changed: read them again
 * at the next GETATTR, and make the kernel ask (its copy may be cached
 * for an hour).  This node's own change is in both already. */
static void attr_changed(struct fs *fs, const struct meta_inval *ev)
{
	struct inode *in;
	bool known;

	if (ev->origin[0] && !strcmp(ev->origin, fs->cfg.node)) {
		FS_COUNT(fs, inval_own, 1);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find(fs, ev->id);
	known = in != NULL;
	if (in) {
		in->attr_stale = true;
		in->dir_at = 0;
		fs_inode_attr_changed(fs, in);
	}
	pthread_mutex_unlock(&fs->lock);
	if (known && fs->se && atomic_load(&fs->mounted))
		fuse_lowlevel_notify_inval_inode(fs->se, ev->id, -1, 0);
}

void fs_on_inval(void *arg, const struct meta_inval *ev)
{
	struct fs *fs = arg;

	if (!ev) {
		/* Redis may have restarted, with less than it had */
		inval_all(fs);
		node_resync(fs->nd);
		return;
	}
	if (!strcmp(ev->kind, "resync")) {
		log_warn("Redis lost writes (its namespace was made again, or its write "
			 "sequence went back); reconciling this node's objects now");
		inval_all(fs);
		node_resync(fs->nd);
		return;
	}
	FS_COUNT(fs, invalidations, 1);
	if (!strcmp(ev->kind, "gone")) {
		drop_deleted(fs, ev->id);
		return;
	}
	if (!strcmp(ev->kind, "attr")) {
		attr_changed(fs, ev);
		return;
	}
	/* The name cache learns what the name means now, rather than
	 * forgetting it: it must keep answering for this node's objects
	 * while Redis is unreachable, its own publishes included (a file
	 * held elsewhere only: forgotten, see fs_dcache_learn_file()). */
	if (!strcmp(ev->kind, "publish") || !strcmp(ev->kind, "replace"))
		fs_dcache_learn_file(fs, ev->parent, ev->name, ev->id);
	else if (!strcmp(ev->kind, "mkdir"))
		fs_dcache_learn(fs, ev->parent, ev->name, META_DIR, ev->id);
	else
		fs_dcache_forget(fs, ev->parent, ev->name);
	/* A change this node's kernel made through the mount is in its
	 * caches already.  Telling it again would only cost: the entry
	 * notification takes the directory's lock, which the next create
	 * or unlink in that directory holds, and drops an entry that is
	 * right. */
	if (ev->origin[0] && !strcmp(ev->origin, fs->cfg.node)) {
		FS_COUNT(fs, inval_own, 1);
	} else {
		/* another node changed the directory: read its attributes
		 * again; its listing, mtime and link count changed */
		fs_dir_touched(fs, ev->parent, true);
		fs_notify_gone(fs, ev->parent, ev->name);
	}
	if (!strcmp(ev->kind, "unlink"))
		drop_deleted(fs, ev->id);
}
