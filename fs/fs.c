/*
 * fs: FUSE session, connection tuning, and the namespace operations
 * (lookup, getattr, readdir, mkdir, rmdir, unlink, rename, statfs,
 * xattrs).  File data operations live in fs_file.c, reconciliation with
 * Redis in fs_sync.c.
 *
 * Data flow of a lookup: the overlay of files being written here is
 * checked first, then Redis (one round trip).  Objects are immutable, so
 * the kernel may keep their entries and attributes for an hour; negative
 * entries are never cached, so a name created on another node shows up
 * at once.
 */
#include "fs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fs_errno(struct fs *fs, int err, const char *what, uint64_t parent, const char *name)
{
	if (err == -EBADMSG) {
		log_error("corrupt record in Redis (%s) while handling %s of '%s' in directory %" PRIu64
			  ": returning EIO",
			  meta_url(fs->meta), what, name ? name : "", parent);
		return EIO;
	}
	if (err == -EIO)
		log_warn("%s of '%s' in directory %" PRIu64 " failed: Redis at %s is unreachable",
			 what, name ? name : "", parent, meta_url(fs->meta));
	return -err;
}

static void set_time(struct timespec *ts, int64_t ns)
{
	ts->tv_sec = ns / 1000000000LL;
	ts->tv_nsec = ns % 1000000000LL;
}

/* Called with fs->lock held. */
void fs_fill_attr(struct fs *fs, struct inode *in, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = in->ino;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_blksize = 1 << 20;
	if (in->kind == META_DIR) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2 + in->dir_nsub;
		st->st_size = 4096;
		st->st_blocks = 8;
		set_time(&st->st_mtim, in->dir_mtime);
	} else if (in->pending) {
		uint64_t size = store_obj_size(in->pending->obj);

		st->st_mode = S_IFREG | 0644;
		st->st_nlink = 1;
		st->st_size = (off_t)size;
		st->st_blocks = (blkcnt_t)((size + STORE_PAGE - 1) / STORE_PAGE * (STORE_PAGE / 512));
		set_time(&st->st_mtim, now_ns());
	} else {
		/* sealed bytes never change; with allow_overwrite the name may
		 * be given to a new object by an O_TRUNC open, which the kernel
		 * checks against these bits (default_permissions) */
		st->st_mode = S_IFREG | (fs->cfg.allow_overwrite ? 0644 : 0444);
		st->st_nlink = 1;
		st->st_size = (off_t)in->obj.size;
		st->st_blocks =
			(blkcnt_t)((in->obj.size + STORE_PAGE - 1) / STORE_PAGE * (STORE_PAGE / 512));
		set_time(&st->st_mtim, in->obj.mtime_ns);
	}
	st->st_atim = st->st_mtim;
	st->st_ctim = st->st_mtim;
}

static double attr_timeout(const struct inode *in)
{
	if (in->kind == META_DIR)
		return FS_DIR_ATTR_TIMEOUT;
	/* a pending file's size and mode change at seal: never cache them */
	return in->pending ? 0.0 : FS_FILE_ATTR_TIMEOUT;
}

/* Take a lookup reference on @in and reply with its entry.  Called
 * with fs->lock held; releases it. */
int fs_reply_entry_for(fuse_req_t req, struct fs *fs, struct inode *in)
{
	struct fuse_entry_param e;

	memset(&e, 0, sizeof(e));
	in->nlookup++;
	e.ino = in->ino;
	e.generation = 1;
	fs_fill_attr(fs, in, &e.attr);
	e.attr_timeout = attr_timeout(in);
	e.entry_timeout = FS_ENTRY_TIMEOUT;
	pthread_mutex_unlock(&fs->lock);
	return fuse_reply_entry(req, &e);
}

/* Update @in from a meta entry.  Called with fs->lock held. */
static void inode_update(struct inode *in, const struct meta_entry *e)
{
	if (e->kind == META_DIR) {
		in->dir_mtime = e->obj.mtime_ns;
		in->dir_nsub = e->nsub;
	} else if (!in->pending) {
		in->sealed = true;
		in->obj = e->obj;
	}
}

/* Make the kernel forget its entry for @name (which no longer names what
 * it cached).  Never call with fs->lock held. */
void fs_notify_gone(struct fs *fs, uint64_t parent, const char *name)
{
	if (fs->se && fs->mounted)
		fuse_lowlevel_notify_inval_entry(fs->se, parent, name, strlen(name));
}

/* Drop this node's copy of object @id (its name is gone). */
void fs_forget_local(struct fs *fs, uint64_t id)
{
	struct store_obj *o = store_lookup(fs->store, id);

	if (!o)
		return;
	store_unlink(o);
	store_obj_unref(o);
}

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
	fs_reply_entry_for(req, fs, in);
	return true;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
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
		fs_reply_entry_for(req, fs, in);
		return;
	}
	pthread_mutex_unlock(&fs->lock);

	r = meta_lookup(fs->meta, parent, name, &e);
	if (r == -EIO && lookup_offline(req, fs, parent, name))
		return;
	if (r < 0) {
		pthread_mutex_lock(&fs->lock);
		if (r == -ENOENT)
			dcache_del(fs, parent, name);
		pthread_mutex_unlock(&fs->lock);
		fuse_reply_err(req, r == -ENOENT ? ENOENT : fs_errno(fs, r, "lookup", parent, name));
		return;
	}
	if (e.kind == META_FILE && fs_take_replace_wish(fs, e.id)) {
		p = make_replacement(fs, parent, name, &r);
		if (!p) {
			fuse_reply_err(req, fs_errno(fs, r, "overwrite", parent, name));
			return;
		}
		pthread_mutex_lock(&fs->lock);
		p->next = fs->pending;
		fs->pending = p;
		in = inode_get(fs, p->id, META_FILE);
		if (!in)
			goto no_mem;
		in->pending = p;
		fs_reply_entry_for(req, fs, in);
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
	fs_reply_entry_for(req, fs, in);
	return;

no_mem:
	pthread_mutex_unlock(&fs->lock);
	fuse_reply_err(req, ENOMEM);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct fs *fs = fuse_req_userdata(req);

	pthread_mutex_lock(&fs->lock);
	inode_forget(fs, ino, nlookup);
	pthread_mutex_unlock(&fs->lock);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct fs *fs = fuse_req_userdata(req);
	size_t i;

	pthread_mutex_lock(&fs->lock);
	for (i = 0; i < count; i++)
		inode_forget(fs, forgets[i].ino, forgets[i].nlookup);
	pthread_mutex_unlock(&fs->lock);
	fuse_reply_none(req);
}

/*
 * Reply with the attributes of a file inode, or of a directory inode as
 * last seen.  ESTALE if the kernel asks about an inode we do not have,
 * ENOENT for a write that was discarded.
 */
void fs_reply_attr(fuse_req_t req, struct fs *fs, fuse_ino_t ino)
{
	struct inode *in;
	struct stat st;
	double timeout;

	pthread_mutex_lock(&fs->lock);
	in = inode_find(fs, ino);
	if (in && in->kind == META_FILE && in->pending)
		fs_pending_settle(fs, in->pending);
	if (!in || (in->kind == META_FILE && !in->pending && !in->sealed)) {
		pthread_mutex_unlock(&fs->lock);
		fuse_reply_err(req, in ? ENOENT : ESTALE);
		return;
	}
	fs_fill_attr(fs, in, &st);
	timeout = attr_timeout(in);
	pthread_mutex_unlock(&fs->lock);
	fuse_reply_attr(req, &st, timeout);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fuse_req_userdata(req);
	struct meta_entry e;
	struct inode *in;
	bool is_file;
	int r;

	pthread_mutex_lock(&fs->lock);
	in = inode_find(fs, ino);
	is_file = in && in->kind == META_FILE;
	pthread_mutex_unlock(&fs->lock);
	if (is_file) {
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
		fuse_reply_err(req, r == -ENOENT ? ESTALE : fs_errno(fs, r, "getattr", ino, NULL));
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
	struct meta_dirent *ents;	/* from meta, or NULL */
	size_t n;
	char (*extra)[OBJFS_NAME_MAX + 1];	/* pending files here */
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

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
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
		fuse_reply_err(req, r == -ENOENT ? ENOENT : fs_errno(fs, r, "readdir", ino, NULL));
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

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
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
		struct stat st = { 0 };
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

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	dirlist_free((struct dirlist *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
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
		fuse_reply_err(req, fs_errno(fs, r, "mkdir", parent, name));
		return;
	}
	pthread_mutex_lock(&fs->lock);
	dcache_put(fs, parent, name, META_DIR, e.id);
	in = inode_get(fs, e.id, META_DIR);
	if (!in) {
		pthread_mutex_unlock(&fs->lock);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	inode_update(in, &e);
	fs_reply_entry_for(req, fs, in);
}

/* Drop @name from the name cache (the next lookup learns it anew). */
static void forget_name(struct fs *fs, uint64_t parent, const char *name)
{
	pthread_mutex_lock(&fs->lock);
	dcache_del(fs, parent, name);
	pthread_mutex_unlock(&fs->lock);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fuse_req_userdata(req);
	int r;

	r = meta_rmdir(fs->meta, parent, name, NULL);
	if (r == 0)
		forget_name(fs, parent, name);
	fuse_reply_err(req, r < 0 ? fs_errno(fs, r, "rmdir", parent, name) : 0);
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
		return p;	/* caller frees */
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
		fs_pending_settle(fs, p);	/* may free p */
	}
	return NULL;
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
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
		fs_pending_free(dead);
		fuse_reply_err(req, 0);
		return;
	}
	if (p)
		dead = pending_drop(fs, p);	/* unlinking drops the replacement too */
	pthread_mutex_unlock(&fs->lock);
	fs_pending_free(dead);

	r = meta_unlink(fs->meta, parent, name, &id);
	if (r < 0) {
		fuse_reply_err(req, fs_errno(fs, r, "unlink", parent, name));
		return;
	}
	forget_name(fs, parent, name);
	fs_forget_local(fs, id);
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
	fs_pending_free(dead);
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

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
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
			fuse_reply_err(req, r < 0 ? fs_errno(fs, r, "rename", parent, name) : 0);
			return;
		}
	}
	if (flags & RENAME_NOREPLACE)
		mflags |= META_RENAME_NOREPLACE;
	if (flags & RENAME_EXCHANGE)
		mflags |= META_RENAME_EXCHANGE;
	r = meta_rename(fs->meta, parent, name, newparent, newname, mflags,
			fs->cfg.allow_overwrite, &replaced);
	if (r < 0) {
		if (r == -EEXIST && !fs->cfg.allow_overwrite && !(flags & RENAME_NOREPLACE))
			log_info("rename of '%s' onto existing '%s' refused: objects are immutable "
				 "and the mount lacks allow_overwrite",
				 name, newname);
		fuse_reply_err(req, fs_errno(fs, r, "rename", parent, name));
		return;
	}
	forget_name(fs, parent, name);
	forget_name(fs, newparent, newname);
	if (replaced)
		fs_forget_local(fs, replaced);
	fuse_reply_err(req, 0);
	record_path(fs, newparent, newname);
	if (flags & RENAME_EXCHANGE)
		record_path(fs, parent, name);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = fuse_req_userdata(req);
	struct store_stats ss;
	struct statvfs sv;

	store_stats(fs->store, &ss);
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = STORE_PAGE;
	sv.f_frsize = STORE_PAGE;
	sv.f_blocks = ss.capacity / STORE_PAGE;
	sv.f_bfree = (ss.capacity - ss.used) / STORE_PAGE;
	sv.f_bavail = sv.f_bfree;
	sv.f_files = ss.objects + ss.pending + sv.f_bfree;
	sv.f_ffree = sv.f_bfree;
	sv.f_favail = sv.f_bfree;
	sv.f_namemax = OBJFS_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

/* ---- xattrs ---- */

#define XATTR_ID "user.objfs.id"
#define XATTR_CSUM "user.objfs.checksum"
#define XATTR_LOC "user.objfs.locations"
#define XATTR_STATUS "user.objfs.status"
#define XATTR_NODES "user.objfs.nodes"
#define XATTR_FETCH "user.objfs.fetch"

static void reply_xattr_value(fuse_req_t req, const char *val, size_t len, size_t size)
{
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, val, len);
}

static void xattr_locations(fuse_req_t req, struct fs *fs, uint64_t id, size_t size)
{
	char(*nodes)[OBJFS_NODE_MAX] = NULL;
	size_t n = 0, i, used = 0;
	char *buf;
	int r;

	r = meta_holders(fs->meta, id, &nodes, &n);
	if (r < 0) {
		fuse_reply_err(req, fs_errno(fs, r, "getxattr", id, XATTR_LOC));
		return;
	}
	buf = calloc(n + 1, OBJFS_NODE_MAX);
	if (!buf) {
		free(nodes);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (i = 0; i < n; i++)
		used += (size_t)sprintf(buf + used, "%s%s", i ? "," : "", nodes[i]);
	reply_xattr_value(req, buf, used, size);
	free(buf);
	free(nodes);
}

/* Size of object @id as this node knows it (0 if unknown). */
static uint64_t in_size(struct fs *fs, uint64_t id)
{
	struct inode *in;
	uint64_t size = 0;

	pthread_mutex_lock(&fs->lock);
	in = inode_find(fs, id);
	if (in && in->sealed)
		size = in->obj.size;
	pthread_mutex_unlock(&fs->lock);
	return size;
}

/* The cluster's members, one line each:
 * "NAME live|down TTL_MS HOST LISTEN CAPS USED CAPACITY". */
static void xattr_nodes(fuse_req_t req, struct fs *fs, size_t size)
{
	struct meta_member *mm = NULL;
	size_t n = 0, i, used = 0, cap;
	char *buf;
	int r;

	r = meta_members(fs->meta, &mm, &n);
	if (r < 0) {
		fuse_reply_err(req, fs_errno(fs, r, "getxattr", META_ROOT_ID, XATTR_NODES));
		return;
	}
	cap = (n + 1) * 640;
	buf = malloc(cap);
	if (!buf) {
		free(mm);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	buf[0] = '\0';
	for (i = 0; i < n; i++) {
		const struct meta_card *c = &mm[i].card;

		if (mm[i].live)
			used += (size_t)snprintf(buf + used, cap - used,
						 "%s live %" PRId64 " %s %s %s %" PRIu64 " %" PRIu64 "\n",
						 mm[i].node, mm[i].ttl_ms, c->host[0] ? c->host : "-",
						 c->listen[0] ? c->listen : "-", c->caps[0] ? c->caps : "-",
						 c->used, c->capacity);
		else
			used += (size_t)snprintf(buf + used, cap - used, "%s down -1 - - - 0 0\n",
						 mm[i].node);
	}
	reply_xattr_value(req, buf, used, size);
	free(buf);
	free(mm);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct fs *fs = fuse_req_userdata(req);
	char val[OBJFS_PATH_MAX];
	struct inode *in;
	bool sealed;
	size_t len;

	if (ino == META_ROOT_ID && !strcmp(name, XATTR_NODES)) {
		xattr_nodes(req, fs, size);
		return;
	}
	if (ino == META_ROOT_ID && !strcmp(name, XATTR_STATUS)) {
		char *buf = malloc(8192);

		if (!buf) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		len = fs_status(fs, buf, 8192);
		reply_xattr_value(req, buf, len, size);
		free(buf);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	in = inode_find(fs, ino);
	if (!in || in->kind != META_FILE) {
		pthread_mutex_unlock(&fs->lock);
		fuse_reply_err(req, ENODATA);
		return;
	}
	if (in->pending)
		fs_pending_settle(fs, in->pending);
	sealed = !in->pending && in->sealed;
	if (!strcmp(name, XATTR_ID)) {
		len = (size_t)snprintf(val, sizeof(val), "%" PRIu64, in->ino);
	} else if (!strcmp(name, XATTR_CSUM) && sealed) {
		csum_to_hex(in->obj.csum, val);
		len = strlen(val);
	} else if (!strcmp(name, XATTR_FETCH) && sealed) {
		uint64_t done = 0, total = 0;
		const char *state = "fetching";

		pthread_mutex_unlock(&fs->lock);
		if (fetch_progress(fs, ino, &done, &total) < 0) {
			struct store_obj *o = store_lookup(fs->store, ino);

			state = o && store_obj_sealed(o) ? "local" : "remote";
			total = in_size(fs, ino);
			done = o && store_obj_sealed(o) ? total : 0;
			store_obj_unref(o);
		}
		len = (size_t)snprintf(val, sizeof(val), "%s %" PRIu64 " %" PRIu64, state, done,
				       total);
		reply_xattr_value(req, val, len, size);
		return;
	} else if (!strcmp(name, XATTR_LOC) && sealed) {
		pthread_mutex_unlock(&fs->lock);
		xattr_locations(req, fs, ino, size);
		return;
	} else {
		pthread_mutex_unlock(&fs->lock);
		fuse_reply_err(req, ENODATA);
		return;
	}
	pthread_mutex_unlock(&fs->lock);
	reply_xattr_value(req, val, len, size);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct fs *fs = fuse_req_userdata(req);
	static const char file_names[] =
		XATTR_ID "\0" XATTR_CSUM "\0" XATTR_LOC "\0" XATTR_FETCH "\0";
	static const char root_names[] = XATTR_STATUS "\0" XATTR_NODES "\0";
	struct inode *in;
	bool is_file;

	if (ino == META_ROOT_ID) {
		reply_xattr_value(req, root_names, sizeof(root_names) - 1, size);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	in = inode_find(fs, ino);
	is_file = in && in->kind == META_FILE;
	pthread_mutex_unlock(&fs->lock);
	if (is_file)
		reply_xattr_value(req, file_names, sizeof(file_names) - 1, size);
	else
		reply_xattr_value(req, "", 0, size);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	/* objects carry no user metadata of their own (yet); cp -a and tar
	 * treat ENOTSUP as "this filesystem has no xattrs" */
	fuse_reply_err(req, ENOTSUP);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, ENOTSUP);
}

/* ---- session ---- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	conn->max_write = 1 << 20;
	conn->max_readahead = 1 << 20;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	conn->time_gran = 1;
	conn->want |= FUSE_CAP_ASYNC_READ;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/* immutable data: the kernel never needs to drop cached pages on its
	 * own; splice cannot carry 1 MiB replies here (see notes) */
	conn->want &= ~(unsigned)(FUSE_CAP_AUTO_INVAL_DATA | FUSE_CAP_SPLICE_READ |
				  FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE |
				  FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_READDIRPLUS |
				  FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
}

static const struct fuse_lowlevel_ops fs_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = fs_op_setattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.mkdir = op_mkdir,
	.rmdir = op_rmdir,
	.unlink = op_unlink,
	.rename = op_rename,
	.create = fs_op_create,
	.open = fs_op_open,
	.read = fs_op_read,
	.write = fs_op_write,
	.flush = fs_op_flush,
	.release = fs_op_release,
	.fsync = fs_op_fsync,
	.statfs = op_statfs,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.setxattr = op_setxattr,
	.removexattr = op_removexattr,
};

struct fs *fs_new(const struct fs_config *cfg, struct meta *m, struct store *s, int *ret_err)
{
	struct fs *fs = calloc(1, sizeof(*fs));

	if (!fs) {
		*ret_err = -ENOMEM;
		return NULL;
	}
	fs->cfg = *cfg;
	fs->cfg.mountpoint = strdup(cfg->mountpoint);
	fs->cfg.node = strdup(cfg->node);
	fs->cfg.fsname = strdup(cfg->fsname ? cfg->fsname : "objfs");
	fs->cfg.store_dir = strdup(cfg->store_dir ? cfg->store_dir : "");
	if (!fs->cfg.mountpoint || !fs->cfg.node || !fs->cfg.fsname || !fs->cfg.store_dir) {
		fs_free(fs);
		*ret_err = -ENOMEM;
		return NULL;
	}
	fs->meta = m;
	fs->store = s;
	pthread_mutex_init(&fs->lock, NULL);
	pthread_cond_init(&fs->settle, NULL);
	pthread_mutex_init(&fs->flock, NULL);
	pthread_cond_init(&fs->fq_cond, NULL);
	if (cfg->transport) {
		int r = fetch_start_workers(fs);

		if (r < 0) {
			fs_free(fs);
			*ret_err = r;
			return NULL;
		}
	}
	return fs;
}

void fs_stop_fetching(struct fs *fs)
{
	if (!fs)
		return;
	fetch_stop_workers(fs);
	fetch_drop_all(fs);
}

void fs_free(struct fs *fs)
{
	struct unpublished *u;

	if (!fs)
		return;
	fs_stop_fetching(fs);
	if (fs->se) {
		if (fs->mounted)
			fuse_session_unmount(fs->se);
		fuse_session_destroy(fs->se);
	}
	while (fs->pending) {
		struct pending *p = fs->pending;

		fs->pending = p->next;
		store_obj_unref(p->obj);
		free(p);
	}
	while ((u = fs->unpublished)) {
		fs->unpublished = u->next;
		free(u);
	}
	inode_free_all(fs);
	dcache_free_all(fs);
	fs_lru_free_all(fs);
	fetch_peer_cache_free(fs);
	pthread_mutex_destroy(&fs->lock);
	pthread_cond_destroy(&fs->settle);
	pthread_mutex_destroy(&fs->flock);
	pthread_cond_destroy(&fs->fq_cond);
	free((char *)fs->cfg.mountpoint);
	free((char *)fs->cfg.node);
	free((char *)fs->cfg.fsname);
	free((char *)fs->cfg.store_dir);
	free(fs);
}

/*
 * The kernel offers only 128 KiB of read-ahead at INIT; raising the
 * mount's bdi setting afterwards doubles cold read throughput here.
 */
static void raise_readahead(struct fs *fs)
{
	char line[4096], path[128], mnt[OBJFS_PATH_MAX];
	unsigned maj, min;
	bool found = false;
	FILE *f;
	int fd;

	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		/* id parent maj:min root mountpoint ... */
		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &maj, &min, mnt) == 3 &&
		    !strcmp(mnt, fs->cfg.mountpoint))
			found = true;	/* the last match is the top mount */
	}
	fclose(f);
	if (!found)
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", maj, min);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write_full(fd, "4096\n", 5) < 0)
		log_info("cannot raise read-ahead in %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

int fs_mount(struct fs *fs)
{
	char opts[1024];
	char *argv[4];
	struct fuse_args args;
	int argc = 0;

	snprintf(opts, sizeof(opts), "fsname=%s,subtype=objfs,default_permissions%s%s%s%s%s%s",
		 fs->cfg.fsname, fs->cfg.allow_other ? ",allow_other" : "",
		 fs->cfg.read_only ? ",ro" : "", fs->cfg.nosuid ? ",nosuid" : "",
		 fs->cfg.nodev ? ",nodev" : "", fs->cfg.noexec ? ",noexec" : "",
		 fs->cfg.noatime ? ",noatime" : "");
	argv[argc++] = (char *)"objfsd";
	argv[argc++] = (char *)"-o";
	argv[argc++] = opts;
	if (fs->cfg.debug)
		argv[argc++] = (char *)"-d";
	args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
	fs->se = fuse_session_new(&args, &fs_ops, sizeof(fs_ops), fs);
	fuse_opt_free_args(&args);
	if (!fs->se)
		return -EINVAL;
	if (fuse_set_signal_handlers(fs->se) < 0)
		return -EIO;
	if (fuse_session_mount(fs->se, fs->cfg.mountpoint) < 0)
		return -EIO;
	fs->mounted = true;
	raise_readahead(fs);
	return 0;
}

int fs_run(struct fs *fs)
{
	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	int r;

	if (!lc)
		return -ENOMEM;
	fuse_loop_cfg_set_idle_threads(lc, 8);
	fuse_loop_cfg_set_max_threads(lc, 64);
	r = fuse_session_loop_mt(fs->se, lc);
	fuse_loop_cfg_destroy(lc);
	fuse_remove_signal_handlers(fs->se);
	fuse_session_unmount(fs->se);
	fs->mounted = false;
	return r < 0 ? -EIO : 0;
}
