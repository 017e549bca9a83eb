/*
 * fs_file: file handles, data, and the life of an object written here.
 *
 *   create ──► pending (overlay, this node only) ──writes──► last release
 *          ──► store_seal (checksum, catalog) ──► meta_publish (name visible
 *              to every node) ──► sealed, mode 0444, immutable
 *
 * Reads of a sealed object are answered with an iovec that points straight
 * into the store's shared memory (fuse_reply_iov): no copy in the daemon,
 * and no splice, which cannot carry 1 MiB replies on these kernels.
 *
 * Overwrite (allow_overwrite): an O_TRUNC open of a sealed object must not
 * reuse its inode, because the kernel would truncate the page cache that
 * other readers of the old object share.  So the open records a wish and
 * answers ESTALE; the VFS retries the path walk with LOOKUP_REVAL, our
 * lookup then creates the replacement object and returns its new inode,
 * and the writer opens that.  The replacement takes the name at seal.
 *
 * The kernel sends RELEASE asynchronously: close(2) can return before the
 * object is sealed.  Operations that must see the sealed state (an open
 * for write, stat, getxattr) wait briefly for a pending object whose
 * handles have all been flushed (closed) to settle.
 */
#include "fs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define SETTLE_WAIT_MS 500
#define SEAL_WAIT_NS (60 * 1000000000LL)
#define REPLACE_WISH_NS (2 * 1000000000LL)
#define REAP_AFTER_NS (10 * 1000000000LL)
#define READ_IOV_MAX 256

/* ---- overwrite wishes (see the top of this file) ---- */

/* Called with fs->lock held. */
static void add_replace_wish(struct fs *fs, uint64_t id)
{
	struct replace_wish *wishes = fs->wishes;
	size_t i, oldest = 0;

	for (i = 0; i < ARRAY_SIZE(fs->wishes); i++) {
		if (wishes[i].id == id || wishes[i].id == 0) {
			oldest = i;
			break;
		}
		if (wishes[i].at_ns < wishes[oldest].at_ns)
			oldest = i;
	}
	wishes[oldest].id = id;
	wishes[oldest].at_ns = mono_ns();
}

bool fs_take_replace_wish(struct fs *fs, uint64_t id)
{
	struct replace_wish *wishes = fs->wishes;
	bool found = false;
	size_t i;

	pthread_mutex_lock(&fs->lock);
	for (i = 0; i < ARRAY_SIZE(fs->wishes); i++) {
		if (wishes[i].id == id && mono_ns() - wishes[i].at_ns < REPLACE_WISH_NS) {
			wishes[i].id = 0;
			found = true;
		}
	}
	pthread_mutex_unlock(&fs->lock);
	return found;
}

/* ---- pending objects ---- */

void fs_pending_free(struct pending *p)
{
	if (!p)
		return;
	store_unlink(p->obj);
	store_obj_unref(p->obj);
	free(p);
}

static bool unsettled(struct pending *p, bool *ret_sealing)
{
	*ret_sealing = p->sealing;
	return p->sealing || (p->opens && p->flushed >= p->opens);
}

/*
 * Wait until @p is sealed if its last handle is gone (a seal is running)
 * or every handle was closed and only the asynchronous RELEASE is
 * outstanding.  The first case always ends soon (a checksum and one Redis
 * call, each bounded); the second may be a dup()ed descriptor still in
 * use, so it waits SETTLE_WAIT_MS at most.  Called with fs->lock held;
 * may drop and retake it.
 */
void fs_pending_settle(struct fs *fs, struct pending *p)
{
	uint64_t id = p->id;	/* @p may be freed while we wait */
	struct inode *in = inode_find(fs, id);
	int64_t start = mono_ns();
	bool sealing;

	while (in && in->pending == p && unsettled(p, &sealing)) {
		int64_t limit = sealing ? SEAL_WAIT_NS : SETTLE_WAIT_MS * 1000000LL;
		struct timespec until;

		if (mono_ns() - start > limit)
			break;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 50 * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&fs->settle, &fs->lock, &until);
		in = inode_find(fs, id);
	}
}

static struct handle *handle_new(struct store_obj *obj, struct pending *p, bool writable)
{
	struct handle *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->obj = obj;
	h->pending = p;
	h->writable = writable;
	return h;
}

static void handle_release(struct fs *fs, uint64_t ino, struct handle *h);

static void fill_entry(struct fs *fs, struct inode *in, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = in->ino;
	e->generation = 1;
	fs_fill_attr(fs, in, &e->attr);
	e->attr_timeout = 0;	/* pending: size and mode change at seal */
	e->entry_timeout = FS_ENTRY_TIMEOUT;
}

void fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		  struct fuse_file_info *fi)
{
	struct fs *fs = fuse_req_userdata(req);
	struct fuse_entry_param e;
	struct meta_entry me;
	struct pending *p = NULL;
	struct handle *h = NULL;
	struct inode *in;
	uint64_t id;
	int r;

	r = name_validate(name);
	if (r < 0)
		goto fail;
	if (!S_ISREG(mode)) {
		r = -EPERM;
		goto fail;
	}
	pthread_mutex_lock(&fs->lock);
	r = pending_find(fs, parent, name) ? -EEXIST : 0;
	pthread_mutex_unlock(&fs->lock);
	if (r < 0)
		goto fail;
	r = meta_lookup(fs->meta, parent, name, &me);
	if (r == 0) {
		r = me.kind == META_DIR ? -EISDIR : -EEXIST;
		goto fail;
	}
	if (r != -ENOENT)
		goto fail;
	r = meta_alloc_id(fs->meta, &id);
	if (r < 0)
		goto fail;

	p = calloc(1, sizeof(*p));
	if (!p) {
		r = -ENOMEM;
		goto fail;
	}
	p->obj = store_create(fs->store, id, &r);
	if (!p->obj)
		goto fail_free;
	p->id = id;
	p->parent = parent;
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->opens = 1;
	p->created_ns = mono_ns();
	h = handle_new(store_obj_ref(p->obj), p, true);
	if (!h) {
		r = -ENOMEM;
		goto fail_obj;
	}

	pthread_mutex_lock(&fs->lock);
	in = inode_get(fs, id, META_FILE);
	if (!in) {
		pthread_mutex_unlock(&fs->lock);
		r = -ENOMEM;
		goto fail_handle;
	}
	p->next = fs->pending;
	fs->pending = p;
	in->pending = p;
	in->nlookup++;
	in->handles++;
	fill_entry(fs, in, &e);
	pthread_mutex_unlock(&fs->lock);

	fi->fh = (uintptr_t)h;
	fi->keep_cache = 0;
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		/* the creator was interrupted: the kernel never saw the entry,
		 * so it will send neither RELEASE nor FORGET */
		pthread_mutex_lock(&fs->lock);
		in = inode_find(fs, id);
		if (in && in->nlookup)
			in->nlookup--;
		pthread_mutex_unlock(&fs->lock);
		handle_release(fs, id, h);
	}
	return;

fail_handle:
	store_obj_unref(h->obj);
	free(h);
fail_obj:
	store_unlink(p->obj);
	store_obj_unref(p->obj);
fail_free:
	free(p);
fail:
	fuse_reply_err(req, fs_errno(fs, r, "create", parent, name));
}

static bool wants_write(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

void fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fuse_req_userdata(req);
	struct fetch *f = NULL;
	struct meta_obj rec;
	bool have_rec = false;
	struct store_obj *obj;
	struct handle *h;
	struct inode *in;
	struct pending *p;
	int r;

	pthread_mutex_lock(&fs->lock);
	in = inode_find(fs, ino);
	if (!in || in->kind != META_FILE) {
		pthread_mutex_unlock(&fs->lock);
		fuse_reply_err(req, in ? EISDIR : ESTALE);
		return;
	}
	if (in->pending)
		fs_pending_settle(fs, in->pending);
	p = in->pending;
	if (!p && !in->sealed) {
		pthread_mutex_unlock(&fs->lock);
		fuse_reply_err(req, ENOENT);	/* a discarded write */
		return;
	}
	if (p && p->sealing) {
		pthread_mutex_unlock(&fs->lock);
		log_warn("object %" PRIu64 " is still being sealed after 60 s", (uint64_t)ino);
		fuse_reply_err(req, EBUSY);
		return;
	}
	if (p && !p->unlinked) {
		obj = store_obj_ref(p->obj);
		h = handle_new(obj, p, (fi->flags & O_ACCMODE) != O_RDONLY);
		if (!h) {
			pthread_mutex_unlock(&fs->lock);
			store_obj_unref(obj);
			fuse_reply_err(req, ENOMEM);
			return;
		}
		p->opens++;
		in->handles++;
		pthread_mutex_unlock(&fs->lock);
		if ((fi->flags & O_TRUNC) && h->writable && (r = store_truncate(p->obj, 0)) < 0) {
			handle_release(fs, ino, h);
			fuse_reply_err(req, -r);
			return;
		}
		fi->fh = (uintptr_t)h;
		fi->keep_cache = 0;
		fuse_reply_open(req, fi);
		return;
	}
	if (wants_write(fi->flags)) {
		if (fs->cfg.allow_overwrite && (fi->flags & O_TRUNC) && in->sealed) {
			add_replace_wish(fs, ino);
			pthread_mutex_unlock(&fs->lock);
			fuse_reply_err(req, ESTALE);
			return;
		}
		pthread_mutex_unlock(&fs->lock);
		log_info("refusing to open object %" PRIu64 " for writing: objects are immutable "
			 "once sealed%s",
			 (uint64_t)ino,
			 fs->cfg.allow_overwrite ? " (replace it with an O_TRUNC open)" : "");
		fuse_reply_err(req, EACCES);
		return;
	}
	in->handles++;
	have_rec = in->sealed;
	if (have_rec)
		rec = in->obj;
	pthread_mutex_unlock(&fs->lock);

	obj = store_lookup(fs->store, ino);
	if (obj && !store_obj_sealed(obj)) {
		/* a fetch in flight (or one that just ended): go through it */
		store_obj_unref(obj);
		obj = NULL;
	}
	if (!obj) {
		r = fetch_open(fs, ino, have_rec ? &rec : NULL, &f, &obj);
		if (r < 0) {
			r = -r;
			if (r != ENOENT && r != ENOSPC && r != ENOMEM)
				r = EIO;
			goto fail;
		}
	} else {
		fs_lru_touch(fs, ino);
	}
	h = handle_new(obj, NULL, false);
	if (!h) {
		store_obj_unref(obj);
		fetch_put(fs, f);
		r = ENOMEM;
		goto fail;
	}
	h->fetch = f;
	fi->fh = (uintptr_t)h;
	fi->keep_cache = 1;
	/* the handle may be released as soon as the open is answered */
	fetch_ref(fs, f);
	fuse_reply_open(req, fi);
	fetch_opened(fs, f);
	return;

fail:
	pthread_mutex_lock(&fs->lock);
	inode_put_handle(fs, ino);
	pthread_mutex_unlock(&fs->lock);
	fuse_reply_err(req, r);
}

void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct iovec iov[READ_IOV_MAX];
	size_t bytes = 0;
	ssize_t n;
	char *buf;
	int cnt;

	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (h->fetch) {
		int r = fetch_wait(fuse_req_userdata(req), h->fetch, (uint64_t)off, size);

		if (r < 0) {
			fuse_reply_err(req, -r);
			return;
		}
	}
	if (!h->pending) {
		cnt = store_obj_iov(h->obj, (uint64_t)off, size, iov, READ_IOV_MAX, &bytes);
		if (cnt < 0)
			fuse_reply_err(req, -cnt);
		else if (cnt == 0)
			fuse_reply_buf(req, NULL, 0);
		else
			fuse_reply_iov(req, iov, cnt);
		return;
	}
	/* a file still being written: copy under the object's lock */
	buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = store_read(h->obj, buf, size, (uint64_t)off);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		 struct fuse_file_info *fi)
{
	struct fs *fs = fuse_req_userdata(req);
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct pending *p = h->pending;
	int r;

	if (!p || !h->writable) {
		fuse_reply_err(req, p ? EBADF : EACCES);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (p->failed) {
		fuse_reply_err(req, ENOSPC);
		return;
	}
	r = store_write(h->obj, buf, size, (uint64_t)off);
	if (r == -ENOSPC && fs_evict(fs, size) > 0)
		r = store_write(h->obj, buf, size, (uint64_t)off);
	pthread_mutex_lock(&fs->lock);
	if (h->flushed) {
		h->flushed = false;
		p->flushed--;
	}
	if (r == -ENOSPC && !p->failed) {
		p->failed = true;
		log_warn("store full: object %" PRIu64 " being written as '%s' is discarded", p->id,
			 p->name);
	}
	pthread_mutex_unlock(&fs->lock);
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_write(req, size);
}

void fs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fuse_req_userdata(req);
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct pending *p = h->pending;
	char name[OBJFS_NAME_MAX + 1];
	bool failed = false, hide = false;
	uint64_t parent = 0;

	if (p) {
		pthread_mutex_lock(&fs->lock);
		if (!h->flushed) {
			h->flushed = true;
			p->flushed++;
		}
		failed = p->failed;
		/* a write was lost: the object will never be published, so the
		 * name goes away now rather than at the (asynchronous) release */
		if (failed && !p->unlinked) {
			p->unlinked = true;
			pending_remove(fs, p);
			parent = p->parent;
			memcpy(name, p->name, sizeof(name));
			hide = true;
		}
		pthread_mutex_unlock(&fs->lock);
	}
	if (hide)
		fs_notify_gone(fs, parent, name);
	/* close(2) reports a write that was lost to a full store */
	fuse_reply_err(req, failed && h->writable ? ENOSPC : 0);
}

void fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	/* the store is memory; there is nothing further to make durable */
	fuse_reply_err(req, 0);
}

/* Publish @p under a name that does not collide with @name. */
static int publish_conflict(struct fs *fs, struct pending *p, const struct meta_obj *mo,
			    char *path)
{
	char alt[OBJFS_NAME_MAX + 1];
	int r;

	snprintf(alt, sizeof(alt), "%.*s.objfs-%" PRIu64, OBJFS_NAME_MAX - 28, p->name, p->id);
	r = meta_publish(fs->meta, p->parent, alt, mo, false, NULL, path);
	if (r == 0)
		log_warn("'%s' was created elsewhere while object %" PRIu64
			 " was written here; kept it as '%s'",
			 p->name, p->id, alt);
	return r;
}

static void remember_unpublished(struct fs *fs, struct pending *p)
{
	struct unpublished *u = calloc(1, sizeof(*u));

	if (!u) {
		log_error("out of memory: object %" PRIu64 " stays unpublished until restart",
			  p->id);
		return;
	}
	u->id = p->id;
	u->parent = p->parent;
	memcpy(u->name, p->name, sizeof(u->name));
	u->replace = p->replace;
	pthread_mutex_lock(&fs->lock);
	u->next = fs->unpublished;
	fs->unpublished = u;
	pthread_mutex_unlock(&fs->lock);
}

/* Link a sealed object's name in Redis, handling every way that can fail
 * without losing the object.  Returns 0, or -EIO if Redis is away (the
 * caller keeps it for a later retry). */
static int publish(struct fs *fs, uint64_t id, uint64_t parent, const char *name, bool replace,
		   struct store_obj *obj)
{
	char path[OBJFS_PATH_MAX];
	struct pending tmp = { .id = id, .parent = parent };
	uint64_t replaced = 0;
	bool as_named;
	struct meta_obj mo;
	int r;

	memset(&mo, 0, sizeof(mo));
	mo.id = id;
	mo.size = store_obj_size(obj);
	mo.mtime_ns = store_obj_mtime(obj);
	store_obj_csum(obj, mo.csum);
	snprintf(mo.origin, sizeof(mo.origin), "%s", fs->cfg.node);
	snprintf(tmp.name, sizeof(tmp.name), "%s", name);

	path[0] = '\0';
	r = meta_publish(fs->meta, parent, name, &mo, replace, &replaced, path);
	as_named = r == 0;
	if (r == -EEXIST || r == -EISDIR)
		r = publish_conflict(fs, &tmp, &mo, path);
	if (r == -ENOENT || r == -ENOTDIR) {
		snprintf(path, sizeof(path), "/lost+found/%s", name);
		r = meta_reregister(fs->meta, &mo, path);
		if (r >= 0) {
			log_warn("directory of '%s' vanished while object %" PRIu64
				 " was written; it is in /lost+found",
				 name, id);
			r = 0;
		}
	}
	if (r < 0) {
		if (r != -EIO)
			log_error("cannot publish object %" PRIu64 " as '%s': %s; will retry", id,
				  name, strerror(-r));
		return -EIO;
	}
	if (path[0])
		store_set_path(obj, path);
	if (as_named) {
		pthread_mutex_lock(&fs->lock);
		dcache_put(fs, parent, name, META_FILE, id);
		pthread_mutex_unlock(&fs->lock);
	}
	if (replaced)
		fs_forget_local(fs, replaced);
	return 0;
}

/* The last handle on @p is gone: seal and publish it, or discard it. */
static void seal_pending(struct fs *fs, struct pending *p)
{
	struct inode *in;
	bool discard;
	int r = 0;

	pthread_mutex_lock(&fs->lock);
	discard = p->failed || p->unlinked;
	pthread_mutex_unlock(&fs->lock);
	if (!discard) {
		r = store_seal(p->obj, "", now_ns());
		if (r < 0)
			log_error("cannot seal object %" PRIu64 " ('%s'): %s; discarding it", p->id,
				  p->name, strerror(-r));
	}
	if (!discard && r == 0 && publish(fs, p->id, p->parent, p->name, p->replace, p->obj) < 0) {
		log_warn("Redis unreachable: object %" PRIu64 " ('%s') sealed on this node, "
			 "published when Redis is back",
			 p->id, p->name);
		remember_unpublished(fs, p);
	}

	pthread_mutex_lock(&fs->lock);
	pending_remove(fs, p);
	in = inode_find(fs, p->id);
	if (in && in->pending == p) {
		in->pending = NULL;
		if (!discard && r == 0) {
			in->sealed = true;
			in->obj.id = p->id;
			in->obj.size = store_obj_size(p->obj);
			in->obj.mtime_ns = store_obj_mtime(p->obj);
			store_obj_csum(p->obj, in->obj.csum);
			snprintf(in->obj.origin, sizeof(in->obj.origin), "%s", fs->cfg.node);
		}
	}
	pthread_cond_broadcast(&fs->settle);
	pthread_mutex_unlock(&fs->lock);
	__atomic_add_fetch(&fs->n_sealed, 1, __ATOMIC_RELAXED);

	if (discard || r < 0) {
		fs_notify_gone(fs, p->parent, p->name);
		fs_pending_free(p);
	}
	else {
		store_obj_unref(p->obj);
		free(p);
	}
}

/* Drop handle @h on inode @ino; the last handle on a pending object seals
 * it.  Also used to undo an open the kernel never saw. */
static void handle_release(struct fs *fs, uint64_t ino, struct handle *h)
{
	struct pending *p = h->pending;
	bool last = false;

	pthread_mutex_lock(&fs->lock);
	if (p) {
		if (h->flushed)
			p->flushed--;
		last = --p->opens == 0;
		if (last)
			p->sealing = true;
	}
	pthread_mutex_unlock(&fs->lock);
	if (last)
		seal_pending(fs, p);
	fetch_put(fs, h->fetch);
	store_obj_unref(h->obj);
	free(h);
	pthread_mutex_lock(&fs->lock);
	inode_put_handle(fs, ino);
	pthread_mutex_unlock(&fs->lock);
}

void fs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	handle_release(fuse_req_userdata(req), ino, (struct handle *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

void fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		   struct fuse_file_info *fi)
{
	struct fs *fs = fuse_req_userdata(req);
	struct store_obj *obj = NULL;
	enum meta_kind kind;
	struct inode *in;
	int r = 0;

	pthread_mutex_lock(&fs->lock);
	in = inode_find(fs, ino);
	if (!in) {
		pthread_mutex_unlock(&fs->lock);
		fuse_reply_err(req, ESTALE);
		return;
	}
	kind = in->kind;
	if (kind == META_FILE && in->pending)
		obj = store_obj_ref(in->pending->obj);
	pthread_mutex_unlock(&fs->lock);

	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (!obj) {
			log_info("refusing to truncate object %" PRIu64
				 ": objects are immutable once sealed",
				 (uint64_t)ino);
			fuse_reply_err(req, kind == META_DIR ? EISDIR : EACCES);
			return;
		}
		r = store_truncate(obj, (uint64_t)attr->st_size);
		if (r == -ENOSPC) {
			pthread_mutex_lock(&fs->lock);
			in = inode_find(fs, ino);
			if (in && in->pending && in->pending->obj == obj)
				in->pending->failed = true;
			pthread_mutex_unlock(&fs->lock);
		}
	}
	/* mode, owner and times are fixed at seal; changing them is accepted
	 * and has no effect, so tar and cp -p work on the mount */
	store_obj_unref(obj);
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fs_reply_attr(req, fs, ino);
}

/* ---- maintenance ---- */

/* Publish objects that were sealed while Redis was unreachable. */
void fs_publish_retry(struct fs *fs)
{
	struct unpublished *list, *u, *keep = NULL;

	pthread_mutex_lock(&fs->lock);
	list = fs->unpublished;
	fs->unpublished = NULL;
	pthread_mutex_unlock(&fs->lock);

	while ((u = list)) {
		struct store_obj *obj = store_lookup(fs->store, u->id);

		list = u->next;
		if (!obj) {
			free(u);	/* unlinked meanwhile */
			continue;
		}
		if (publish(fs, u->id, u->parent, u->name, u->replace, obj) == 0) {
			log_info("published object %" PRIu64 " as '%s' now that Redis is back",
				 u->id, u->name);
			__atomic_add_fetch(&fs->n_published_late, 1, __ATOMIC_RELAXED);
			free(u);
		} else {
			u->next = keep;
			keep = u;
		}
		store_obj_unref(obj);
	}
	if (keep) {
		pthread_mutex_lock(&fs->lock);
		for (u = keep; u->next; u = u->next)
			;
		u->next = fs->unpublished;
		fs->unpublished = keep;
		pthread_mutex_unlock(&fs->lock);
	}
}

/* Discard replacement objects whose writer never opened them. */
void fs_reap_pending(struct fs *fs)
{
	struct pending *p, *dead = NULL, *next;
	int64_t now = mono_ns();

	pthread_mutex_lock(&fs->lock);
	for (p = fs->pending; p; p = next) {
		next = p->next;
		if (p->opens == 0 && !p->sealing && now - p->created_ns > REAP_AFTER_NS) {
			struct inode *in = inode_find(fs, p->id);

			pending_remove(fs, p);
			if (in && in->pending == p)
				in->pending = NULL;
			p->next = dead;
			dead = p;
		}
	}
	pthread_mutex_unlock(&fs->lock);
	while ((p = dead)) {
		dead = p->next;
		fs_pending_free(p);
	}
}
