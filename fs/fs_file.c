/*
 * fs_file: file handles and data.
 *
 *   create ──► pending (overlay, this node only) ──writes──► last release
 *          ──► fs_seal_pending() (fs_publish.c)
 *   open of a sealed object ──► local: a store reference; remote:
 *          fetcher_open(), and reads wait for their range (fetch_wait())
 *
 * Reads of a sealed object are answered with an iovec that points straight
 * into the store's shared memory (fuse_reply_iov): no copy in the daemon,
 * and no splice, which cannot carry 1 MiB replies on these kernels.
 *
 * Overwrite (allow_overwrite): an O_TRUNC open of a sealed object must not
 * reuse its inode, because the kernel would truncate the page cache that
 * other readers of the old object share.  So the open records a wish and
 * answers ESTALE; the VFS retries the path walk with LOOKUP_REVAL, our
 * lookup (fs_dir.c) then creates the replacement object and returns its
 * new inode, and the writer opens that.  The replacement takes the name
 * at seal.
 */
#include "fs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define REPLACE_WISH_NS (2 * 1000000000LL)
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
	e->attr_timeout = 0; /* pending: size and mode change at seal */
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
	fuse_reply_err(req, fs_reply_errno(fs, r, "create", parent, name));
}

static bool wants_write(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

/* Is sealed @o the object @rec describes? */
static bool local_copy_is(struct store_obj *o, const struct meta_obj *rec)
{
	uint8_t csum[OBJFS_CSUM_LEN];

	store_obj_csum(o, csum);
	return store_obj_size(o) == rec->size && !memcmp(csum, rec->csum, sizeof(csum));
}

/* This node's copy of an id is other bytes than the id's record says
 * (Redis lost writes and the id was used again): it is never served as
 * that object.  Its bytes move to a fresh id, and the store is reconciled
 * with Redis to register them.  Drops the reference on @o.  0, or a
 * negative errno if they could not move (the copy stays as it is, and
 * this open fails). */
static int set_stranger_aside(struct fs *fs, struct store_obj *o)
{
	struct store_obj *n;
	int r = 0;

	n = fs_rekey(fs, o, &r);
	store_obj_unref(n);
	store_obj_unref(o);
	atomic_store(&fs->resync, true);
	if (fs->cfg.wake_tick)
		fs->cfg.wake_tick(fs->cfg.wake_ctx);
	return n ? 0 : r;
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
		pending_settle_locked(fs, in->pending);
	p = in->pending;
	if (!p && !in->sealed) {
		pthread_mutex_unlock(&fs->lock);
		fuse_reply_err(req, ENOENT); /* a discarded write */
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
	if (obj && have_rec && !local_copy_is(obj, &rec)) {
		r = set_stranger_aside(fs, obj);
		obj = NULL;
		if (r < 0) {
			r = EIO;
			goto fail;
		}
	}
	if (!obj) {
		r = fetcher_open(fs->fetcher, ino, have_rec ? &rec : NULL, &f, &obj);
		if (r < 0) {
			r = -r;
			if (r != ENOENT && r != ENOSPC && r != EFBIG && r != ENOMEM)
				r = EIO;
			goto fail;
		}
	} else {
		fetcher_touch(fs->fetcher, ino);
	}
	h = handle_new(obj, NULL, false);
	if (!h) {
		store_obj_unref(obj);
		fetch_opened(f); /* what is left of a small fetch, and its reference */
		r = ENOMEM;
		goto fail;
	}
	h->fetch = f;
	fi->fh = (uintptr_t)h;
	fi->keep_cache = 1;
	/* the handle may be released as soon as the open is answered */
	fetch_ref(f);
	fuse_reply_open(req, fi);
	fetch_opened(f);
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
		int r = fetch_wait(h->fetch, (uint64_t)off, size);

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
	bool failed;
	int r;

	if (!p || !h->writable) {
		fuse_reply_err(req, p ? EBADF : EACCES);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	failed = p->failed;
	pthread_mutex_unlock(&fs->lock);
	if (failed) {
		fuse_reply_err(req, ENOSPC);
		return;
	}
	r = store_write(h->obj, buf, size, (uint64_t)off);
	if (r == -ENOSPC && fetcher_evict(fs->fetcher, size) > 0)
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
		fs_seal_pending(fs, p);
	fetch_put(h->fetch);
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
