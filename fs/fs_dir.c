/*
 * fs_dir: the namespace operations (lookup, getattr, readdir, mkdir,
 * rmdir, unlink, rename).
 *
 * Data flow of a lookup: the overlay of files being written here is
 * checked first, then Redis (one round trip).  Objects are immutable, so
 * the kernel may keep their entries and attributes for an hour; negative
 * entries are never cached, so a name created on another node shows up
 * at once.  While Redis is unreachable, names of directories and of
 * objects held here resolve from the name cache.
 *
 * A file still being written here lives only in the overlay: unlink and
 * rename act on it there, after any seal of it already running.
 */
#include "fs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/*
 * An O_TRUNC open of a sealed object with allow_overwrite was answered
 * with ESTALE (see fs_op_open); the kernel now looks the name up again.
 * Create the replacement object and answer with it, so the writer gets a
 * new inode and readers of the old one keep the old bytes.
 */
static struct pending *make_replacement(struct fs *fs, uint64_t parent, const char *name,
					int *ret_err)
{
	struct pending *p;
	uint64_t id;
	int r;

	r = meta_alloc_id(fs->meta, &id);
	if (r < 0) {
		*ret_err = r;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		*ret_err = -ENOMEM;
		return NULL;
	}
	p->obj = store_create(fs->store, id, &r);
	if (!p->obj) {
		free(p);
		*ret_err = r;
		return NULL;
	}
	p->id = id;
	p->parent = parent;
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->replace = true;
	p->created_ns = mono_ns();
	return p;
}

/*
 * Redis is unreachable: answer from the name cache if @name was a
 * directory or an object this node holds, so local objects stay readable
 * after the kernel dropped its entries.  Returns false if it cannot.
 */
static bool lookup_offline(fuse_req_t req, struct fs *fs, uint64_t parent, const char *name)
{
	struct store_obj *o = NULL;
	enum meta_kind kind;
	struct inode *in;
	uint64_t id;
	bool known;

	pthread_mutex_lock(&fs->lock);
	known = dcache_get(fs, parent, name, &kind, &id);
	pthread_mutex_unlock(&fs->lock);
	if (!known)
		return false;
	if (kind == META_FILE) {
		o = store_lookup(fs->store, id);
		if (!o || !store_obj_sealed(o)) {
			store_obj_unref(o);
			return false;
		}
	}
	pthread_mutex_lock(&fs->lock);
	in = inode_get(fs, id, kind);
	if (!in) {
		pthread_mutex_unlock(&fs->lock);
		store_obj_unref(o);
		return false;
	}
	if (o && !in->pending && !in->sealed) {
		in->sealed = true;
		in->obj.id = id;
		in->obj.size = store_obj_size(o);
		in->obj.mtime_ns = store_obj_mtime(o);
		store_obj_csum(o, in->obj.csum);
		snprintf(in->obj.origin, sizeof(in->obj.origin), "%s", fs->cfg.node);
	}
	store_obj_unref(o);
	log_debug("Redis unreachable: '%s' in directory %" PRIu64 " resolved from the name cache",
		  name, parent);
	fs_reply_entry_unlock(req, fs, in);
	return true;
}

void fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fuse_req_userdata(req);
	struct meta_entry e;
	struct pending *p;
	struct inode *in;
	int r;

	r = name_validate(name);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	p = pending_find(fs, parent, name);
	if (p) {
		in = inode_get(fs, p->id, META_FILE);
		if (!in)
			goto no_mem;
		in->pending = p;
		fs_reply_entry_unlock(req, fs, in);
		return;
	}
	pthread_mutex_unlock(&fs->lock);

	r = meta_lookup(fs->meta, parent, name, &e);
	if (r == -EIO && lookup_offline(req, fs, parent, name))
		return;
	if (r < 0) {
		pthread_mutex_lock(&fs->lock);
		if (r == -ENOENT) {
			dcache_del(fs, parent, name);
			neg_note(fs, parent, name);
		}
		pthread_mutex_unlock(&fs->lock);
		fuse_reply_err(req, r == -ENOENT ? ENOENT
						 : fs_reply_errno(fs, r, "lookup", parent, name));
		return;
	}
	if (e.kind == META_FILE && fs_take_replace_wish(fs, e.id)) {
		p = make_replacement(fs, parent, name, &r);
		if (!p) {
			fuse_reply_err(req, fs_reply_errno(fs, r, "overwrite", parent, name));
			return;
		}
		pthread_mutex_lock(&fs->lock);
		p->next = fs->pending;
		fs->pending = p;
		in = inode_get(fs, p->id, META_FILE);
		if (!in)
			goto no_mem;
		in->pending = p;
		fs_reply_entry_unlock(req, fs, in);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	dcache_put(fs, parent, name, e.kind, e.id);
	in = inode_get(fs, e.id, e.kind);
	if (!in)
		goto no_mem;
	inode_update(in, &e);
	if (e.kind == META_FILE)
		inode_set_name(in, parent, name);
	fs_reply_entry_unlock(req, fs, in);
	return;

no_mem:
	pthread_mutex_unlock(&fs->lock);
	fuse_reply_err(req, ENOMEM);
}

void fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct fs *fs = fuse_req_userdata(req);

	pthread_mutex_lock(&fs->lock);
	inode_forget(fs, ino, nlookup);
	pthread_mutex_unlock(&fs->lock);
	fuse_reply_none(req);
}

void fs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct fs *fs = fuse_req_userdata(req);
	size_t i;

	pthread_mutex_lock(&fs->lock);
	for (i = 0; i < count; i++)
		inode_forget(fs, forgets[i].ino, forgets[i].nlookup);
	pthread_mutex_unlock(&fs->lock);
	fuse_reply_none(req);
}

void fs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fuse_req_userdata(req);
	struct meta_entry e;
	struct inode *in;
	bool is_file, fresh;
	int r;

	pthread_mutex_lock(&fs->lock);
	in = inode_find(fs, ino);
	is_file = in && in->kind == META_FILE;
	fresh = in && in->kind == META_DIR && in->dir_at &&
		mono_ns() - in->dir_at < (int64_t)(FS_DIR_ATTR_TIMEOUT * 1e9);
	pthread_mutex_unlock(&fs->lock);
	if (is_file || fresh) {
		fs_reply_attr(req, fs, ino);
		return;
	}

	/* directories: refresh mtime and link count from Redis, but fall
	 * back to what we know when Redis is away */
	r = meta_getattr(fs->meta, ino, &e);
	pthread_mutex_lock(&fs->lock);
	in = inode_find(fs, ino);
	if (r < 0 && !(r == -EIO && in)) {
		pthread_mutex_unlock(&fs->lock);
		fuse_reply_err(req,
			       r == -ENOENT ? ESTALE : fs_reply_errno(fs, r, "getattr", ino, NULL));
		return;
	}
	if (!in)
		in = inode_get(fs, ino, e.kind);
	if (in && r == 0)
		inode_update(in, &e);
	pthread_mutex_unlock(&fs->lock);
	if (!in)
		fuse_reply_err(req, ENOMEM);
	else
		fs_reply_attr(req, fs, ino);
}

/* ---- directories ---- */

struct dirlist {
	struct meta_dirent *ents; /* from meta, or NULL */
	size_t n;
	char (*extra)[OBJFS_NAME_MAX + 1]; /* pending files here */
	uint64_t *extra_ids;
	size_t nextra;
};

static void dirlist_free(struct dirlist *d)
{
	if (!d)
		return;
	meta_dirents_free(d->ents);
	free(d->extra);
	free(d->extra_ids);
	free(d);
}

void fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fuse_req_userdata(req);
	struct dirlist *d;
	struct pending *p;
	size_t n = 0;
	int r;

	d = calloc(1, sizeof(*d));
	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	r = meta_readdir(fs->meta, ino, &d->ents, &d->n);
	if (r < 0) {
		free(d);
		fuse_reply_err(req,
			       r == -ENOENT ? ENOENT : fs_reply_errno(fs, r, "readdir", ino, NULL));
		return;
	}
	pthread_mutex_lock(&fs->lock);
	for (p = fs->pending; p; p = p->next)
		if (p->parent == ino && !p->unlinked)
			n++;
	if (n) {
		d->extra = calloc(n, sizeof(*d->extra));
		d->extra_ids = calloc(n, sizeof(*d->extra_ids));
		if (d->extra && d->extra_ids) {
			for (p = fs->pending; p && d->nextra < n; p = p->next) {
				if (p->parent != ino || p->unlinked)
					continue;
				memcpy(d->extra[d->nextra], p->name, sizeof(p->name));
				d->extra_ids[d->nextra++] = p->id;
			}
		}
	}
	pthread_mutex_unlock(&fs->lock);
	fi->fh = (uintptr_t)d;
	fi->cache_readdir = 0;
	fuse_reply_open(req, fi);
}

static bool dirlist_has(const struct dirlist *d, const char *name)
{
	size_t i;

	for (i = 0; i < d->n; i++)
		if (!strcmp(d->ents[i].name, name))
			return true;
	return false;
}

void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	struct dirlist *d = (struct dirlist *)(uintptr_t)fi->fh;
	size_t total = 2 + d->n + d->nextra, used = 0;
	char *buf;
	off_t i;

	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (i = off; i >= 0 && (size_t)i < total; i++) {
		struct stat st = {0};
		const char *name;
		size_t len;

		if (i == 0) {
			name = ".";
			st.st_ino = ino;
			st.st_mode = S_IFDIR;
		} else if (i == 1) {
			name = "..";
			st.st_ino = META_ROOT_ID;
			st.st_mode = S_IFDIR;
		} else if ((size_t)i - 2 < d->n) {
			const struct meta_dirent *de = &d->ents[i - 2];

			name = de->name;
			st.st_ino = de->id;
			st.st_mode = de->kind == META_DIR ? S_IFDIR : S_IFREG;
		} else {
			size_t k = (size_t)i - 2 - d->n;

			/* a replacement being written shows once, as the name */
			if (dirlist_has(d, d->extra[k]))
				continue;
			name = d->extra[k];
			st.st_ino = d->extra_ids[k];
			st.st_mode = S_IFREG;
		}
		len = fuse_add_direntry(req, buf + used, size - used, name, &st, i + 1);
		if (len > size - used)
			break;
		used += len;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

void fs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	dirlist_free((struct dirlist *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct fs *fs = fuse_req_userdata(req);
	struct meta_entry e;
	struct inode *in;
	int r;

	r = name_validate(name);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	r = pending_find(fs, parent, name) ? -EEXIST : 0;
	pthread_mutex_unlock(&fs->lock);
	if (r == 0)
		r = meta_mkdir(fs->meta, parent, name, now_ns(), &e);
	if (r < 0) {
		fuse_reply_err(req, fs_reply_errno(fs, r, "mkdir", parent, name));
		return;
	}
	pthread_mutex_lock(&fs->lock);
	dir_touched(fs, parent, true);
	dcache_put(fs, parent, name, META_DIR, e.id);
	in = inode_get(fs, e.id, META_DIR);
	if (!in) {
		pthread_mutex_unlock(&fs->lock);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	inode_update(in, &e);
	fs_reply_entry_unlock(req, fs, in);
}

void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fuse_req_userdata(req);
	int r;

	r = meta_rmdir(fs->meta, parent, name, NULL);
	if (r == 0) {
		dcache_forget(fs, parent, name);
		dir_touched_unlocked(fs, parent, true);
	}
	fuse_reply_err(req, r < 0 ? fs_reply_errno(fs, r, "rmdir", parent, name) : 0);
}

/* Mark a pending file gone: it is discarded at its last release, or now
 * if nobody has it open.  Called with fs->lock held. */
static struct pending *pending_drop(struct fs *fs, struct pending *p)
{
	p->unlinked = true;
	pending_remove(fs, p);
	if (p->opens == 0 && !p->sealing) {
		struct inode *in = inode_find(fs, p->id);

		if (in && in->pending == p)
			in->pending = NULL;
		return p; /* caller frees */
	}
	return NULL;
}

/*
 * The file being written as @name in @parent, once any seal of it that is
 * already running has finished (a sealing file belongs to the seal: its
 * name is about to be published).  NULL if there is none.  Called with
 * fs->lock held; may drop and retake it.
 */
static struct pending *pending_find_settled(struct fs *fs, uint64_t parent, const char *name)
{
	struct pending *p;
	int tries;

	for (tries = 0; tries < 4; tries++) {
		p = pending_find(fs, parent, name);
		if (!p || !p->sealing)
			return p;
		pending_settle_locked(fs, p); /* may free p */
	}
	return NULL;
}

void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fuse_req_userdata(req);
	struct pending *p, *dead = NULL;
	uint64_t id;
	int r;

	pthread_mutex_lock(&fs->lock);
	p = pending_find_settled(fs, parent, name);
	if (p && !p->replace) {
		dead = pending_drop(fs, p);
		pthread_mutex_unlock(&fs->lock);
		pending_free(dead);
		fuse_reply_err(req, 0);
		return;
	}
	if (p)
		dead = pending_drop(fs, p); /* unlinking drops the replacement too */
	pthread_mutex_unlock(&fs->lock);
	pending_free(dead);

	r = meta_unlink(fs->meta, parent, name, &id);
	if (r < 0) {
		fuse_reply_err(req, fs_reply_errno(fs, r, "unlink", parent, name));
		return;
	}
	dcache_forget(fs, parent, name);
	dir_touched_unlocked(fs, parent, false);
	(void)store_unlink_id(fs->store, id); /* its name is gone */
	fuse_reply_err(req, 0);
}

/*
 * rename(2) of a file that is still being written on this node.  -EAGAIN
 * if it was sealed meanwhile (the caller renames it in Redis instead).
 */
static int rename_pending(struct fs *fs, uint64_t parent, const char *name, uint64_t nparent,
			  const char *nname, unsigned flags)
{
	struct pending *p, *other, *dead = NULL;
	struct meta_entry e;
	bool replace = false;
	int r;

	if (flags & RENAME_EXCHANGE)
		return -EINVAL;
	r = meta_lookup(fs->meta, nparent, nname, &e);
	if (r == 0) {
		if (e.kind == META_DIR)
			return -EISDIR;
		if ((flags & RENAME_NOREPLACE) || !fs->cfg.allow_overwrite)
			return -EEXIST;
		replace = true;
	} else if (r != -ENOENT) {
		return r;
	}
	pthread_mutex_lock(&fs->lock);
	/* found again: it may have been sealed or unlinked during the lookup */
	p = pending_find_settled(fs, parent, name);
	if (!p) {
		pthread_mutex_unlock(&fs->lock);
		return -EAGAIN;
	}
	other = pending_find_settled(fs, nparent, nname);
	if (pending_find(fs, parent, name) != p) {
		pthread_mutex_unlock(&fs->lock);
		return -EAGAIN;
	}
	if (other && other != p) {
		if (flags & RENAME_NOREPLACE) {
			pthread_mutex_unlock(&fs->lock);
			return -EEXIST;
		}
		dead = pending_drop(fs, other);
	}
	p->parent = nparent;
	snprintf(p->name, sizeof(p->name), "%s", nname);
	p->replace = replace;
	pthread_mutex_unlock(&fs->lock);
	pending_free(dead);
	return 0;
}

/*
 * Keep the catalog path of a local object current after a rename here, so
 * that a re-registration after Redis lost its data uses the new name.
 * (Objects below a renamed directory keep their old recorded paths.)
 */
static void record_path(struct fs *fs, uint64_t parent, const char *name)
{
	char path[OBJFS_PATH_MAX];
	enum meta_kind kind;
	struct store_obj *o;
	uint64_t id;

	if (meta_path(fs->meta, parent, name, &kind, &id, path) < 0 || kind != META_FILE ||
	    !path[0])
		return;
	o = store_lookup(fs->store, id);
	if (o && store_obj_sealed(o))
		store_set_path(o, path);
	store_obj_unref(o);
}

void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		  const char *newname, unsigned int flags)
{
	struct fs *fs = fuse_req_userdata(req);
	unsigned mflags = 0;
	struct pending *p;
	uint64_t replaced = 0;
	int r;

	r = name_validate(newname);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	p = pending_find_settled(fs, parent, name);
	pthread_mutex_unlock(&fs->lock);
	if (p) {
		r = rename_pending(fs, parent, name, newparent, newname, flags);
		if (r != -EAGAIN) {
			fuse_reply_err(req,
				       r < 0 ? fs_reply_errno(fs, r, "rename", parent, name) : 0);
			return;
		}
	}
	if (flags & RENAME_NOREPLACE)
		mflags |= META_RENAME_NOREPLACE;
	if (flags & RENAME_EXCHANGE)
		mflags |= META_RENAME_EXCHANGE;
	r = meta_rename(fs->meta, parent, name, newparent, newname, mflags, fs->cfg.allow_overwrite,
			&replaced);
	if (r < 0) {
		if (r == -EEXIST && !fs->cfg.allow_overwrite && !(flags & RENAME_NOREPLACE))
			log_info("rename of '%s' onto existing '%s' refused: objects are immutable "
				 "and the mount lacks allow_overwrite",
				 name, newname);
		fuse_reply_err(req, fs_reply_errno(fs, r, "rename", parent, name));
		return;
	}
	dcache_forget(fs, parent, name);
	dcache_forget(fs, newparent, newname);
	pthread_mutex_lock(&fs->lock);
	dir_touched(fs, parent, true);
	dir_touched(fs, newparent, true);
	pthread_mutex_unlock(&fs->lock);
	if (replaced)
		(void)store_unlink_id(fs->store, replaced); /* its name is gone */
	fuse_reply_err(req, 0);
	record_path(fs, newparent, newname);
	if (flags & RENAME_EXCHANGE)
		record_path(fs, parent, name);
}
