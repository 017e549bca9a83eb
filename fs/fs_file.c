/*
 * fs_file: file handles and data.
 *
 *   create ──► node_create(), pending (overlay, this node only)
 *          ──writes──► last writer done ──► fs_seal_pending() (fs_seal.c)
 *   open of a sealed object ──► node_open(): the local copy, or a fetch,
 *          whose reads wait for their range (node_fetch_wait())
 *
 * Reads of a sealed object are answered with an iovec that points straight
 * into the store's shared memory (fuse_reply_iov): no copy in the daemon,
 * and no splice, which cannot carry 1 MiB replies on these kernels.
 *
 * It calls the node for an object's life and the store for the bytes of
 * objects it holds a reference to; what FLUSH reads of /proc is
 * fs_lastclose.c's, backing ids are fs_pt.c's.  docs/design.md has the
 * rules: how the kernel serves a handle (enum fs_io, chosen at open,
 * counted per inode under fs->lock: "Which open gets which mode"),
 * "Overwrite", and "When a writer is done" (the seal at FLUSH or at
 * RELEASE, a writer killed by a signal, a write after the seal).
 */
#include "fs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REPLACE_WISH_NS (2 * 1000000000LL)
#define READ_IOV_MAX 256

/* Lines that requests or objects repeat (common/log.h): at most a few in
 * 10 s, the same line at most once. */
static struct log_ratelimit refuse_rl =
    LOG_RATELIMIT_INIT("refused writes to sealed objects", 10000, 10);
static struct log_ratelimit late_rl =
    LOG_RATELIMIT_INIT("writes after the seal refused", 10000, 10);
static struct log_ratelimit sealing_rl =
    LOG_RATELIMIT_INIT("requests refused while a seal runs", 10000, 10);
static struct log_ratelimit setaside_rl =
    LOG_RATELIMIT_INIT("opens refused of copies set aside", 10000, 10);
static struct log_ratelimit discard_rl =
    LOG_RATELIMIT_INIT("objects discarded while written", 10000, 10);
static struct log_ratelimit backing_rl =
    LOG_RATELIMIT_INIT("FUSE backing ids that could not be closed", 10000, 10);
static struct log_ratelimit nopt_rl =
    LOG_RATELIMIT_INIT("OPEN replies without passthrough", 10000, 10);

/* ---- overwrite wishes (docs/design.md, "Overwrite") ---- */

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
	wishes[oldest].at_ns = util_mono_ns();
}

bool fs_take_replace_wish(struct fs *fs, uint64_t id)
{
	struct replace_wish *wishes = fs->wishes;
	bool found = false;
	size_t i;

	pthread_mutex_lock(&fs->lock);
	for (i = 0; i < ARRAY_SIZE(fs->wishes); i++) {
		if (wishes[i].id == id && util_mono_ns() - wishes[i].at_ns < REPLACE_WISH_NS) {
			wishes[i].id = 0;
			found = true;
		}
	}
	pthread_mutex_unlock(&fs->lock);
	return found;
}

static struct handle *handle_new(fuse_req_t req, struct store_obj *obj, struct pending *p,
				 bool writable)
{
	struct handle *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->obj = obj;
	h->pending = p;
	h->writable = writable;
	h->opener = fuse_req_ctx(req)->pid;
	/* a thread that opens a file may end before another closes it */
	if (writable && p)
		h->opener_tgid = fs_task_tgid(h->opener);
	return h;
}

static void handle_release(struct fs *fs, uint64_t ino, struct handle *h);
static void io_count_locked(struct inode *in, enum fs_io io);

/*
 * How a writer's handle is served: with direct I/O where the kernel lets
 * such handles be mapped shared (FUSE_DIRECT_IO_ALLOW_MMAP, accepted with
 * passthrough), else through the page cache.  Direct I/O takes the page
 * cache out of the write path: each write(2) is one WRITE request either
 * way (no writeback cache), but the kernel no longer copies the bytes
 * into page-cache pages it must allocate, insert and keep (the object
 * would be in RAM twice), and a big copy into the mount is faster than
 * through the page cache (docs/benchmarks.md, "Figures behind
 * constants").  A direct-I/O handle coexists with the passthrough
 * handles of readers once the object is sealed.
 */
static enum fs_io writer_io(const struct fs *fs)
{
	return fs_pt_direct_mmap(fs->pt) ? FS_IO_DIRECT : FS_IO_CACHED;
}

static void count_open(struct fs *fs, enum fs_io io)
{
	if (io == FS_IO_PT)
		FS_COUNT(fs, opens_pt, 1);
	else if (io == FS_IO_DIRECT)
		FS_COUNT(fs, opens_direct, 1);
	else
		FS_COUNT(fs, opens_cached, 1);
}

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
	bool fresh;
	uint64_t id;
	int r;

	r = util_name_validate(name);
	if (r < 0)
		goto fail;
	if (!S_ISREG(mode)) {
		r = -EPERM;
		goto fail;
	}
	if ((fi->flags & O_ACCMODE) == O_ACCMODE) {
		r = -EINVAL; /* as open(2): neither read, write nor both */
		goto fail;
	}
	pthread_mutex_lock(&fs->lock);
	r = fs_pending_find(fs, parent, name) ? -EEXIST : 0;
	fresh = r == 0 && fs_neg_take(fs, parent, name);
	pthread_mutex_unlock(&fs->lock);
	if (r < 0)
		goto fail;
	r = fresh ? -ENOENT : meta_lookup(fs->meta, parent, name, &me);
	if (r == 0) {
		r = me.kind == META_DIR ? -EISDIR : -EEXIST;
		goto fail;
	}
	if (r != -ENOENT)
		goto fail;
	p = calloc(1, sizeof(*p));
	if (!p) {
		r = -ENOMEM;
		goto fail;
	}
	r = node_create(fs->nd, &id, &p->obj);
	if (r < 0)
		goto fail_free;
	p->id = id;
	p->parent = parent;
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->opens = 1;
	p->writers = 1;
	p->created_ns = util_mono_ns();
	p->mappable = (fi->flags & O_ACCMODE) == O_RDWR;
	pthread_mutex_lock(&fs->lock);
	fs_new_attr(fs, req, parent, META_FILE, mode, util_now_ns(), &p->md.attr);
	pthread_mutex_unlock(&fs->lock);
	h = handle_new(req, store_obj_ref(p->obj), p, true);
	if (!h) {
		r = -ENOMEM;
		goto fail_obj;
	}

	pthread_mutex_lock(&fs->lock);
	in = fs_inode_get(fs, id, META_FILE);
	if (!in) {
		pthread_mutex_unlock(&fs->lock);
		r = -ENOMEM;
		goto fail_handle;
	}
	p->next = fs->pending;
	fs->pending = p;
	in->pending = p;
	fs_inode_set_name(in, parent, name); /* for inval_all() */
	in->nlookup++;
	in->handles++;
	h->io = writer_io(fs);
	io_count_locked(in, h->io);
	fill_entry(fs, in, &e);
	pthread_mutex_unlock(&fs->lock);
	count_open(fs, h->io);

	fi->fh = (uintptr_t)h;
	fi->keep_cache = 0;
	fi->direct_io = h->io == FS_IO_DIRECT;
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		/* the creator was interrupted: the kernel never saw the entry,
		 * so it will send neither RELEASE nor FORGET */
		pthread_mutex_lock(&fs->lock);
		in = fs_inode_find(fs, id);
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
	node_discard(fs->nd, p->obj);
	store_obj_unref(p->obj);
fail_free:
	free(p);
fail:
	fs_reply_err_at(req, r, "create", parent, name);
}

static bool wants_write(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

/* ---- how the kernel serves a handle (docs/design.md) ---- */

/*
 * Objects of at least this size, read while they are being fetched, are
 * read with direct I/O.  Then the fetched bytes go from the store to the
 * reader with no page-cache insert of every page, which makes a big
 * remote read faster and cheaper in CPU.  But direct-I/O reads reach the
 * daemon at the reader's own size, with no read-ahead, so small reads
 * are slower than through the page cache while 1 MiB ones are faster
 * (docs/benchmarks.md, "Figures behind constants").  Files report
 * st_blksize 1 MiB, so cat, cp and stdio or python buffers read 1 MiB at
 * a time.  The daemon cannot know the reader's read size at open; the
 * object's size stands in for it: a smaller object fits in one
 * read-ahead window of the mount (4 MiB) and caching it costs little, and
 * objects up to the node's sync_max (1 MiB) are complete, and sealed,
 * when the open is answered anyway.
 */
#define FS_DIRECT_IO_MIN (1ull << 20)

/*
 * How the kernel is to serve the next open of @in (docs/design.md,
 * "Which open gets which mode"): @sealed, the object is sealed in the
 * store (else being fetched); @pt_ok, it can be passed through (its store
 * file is at hand); @size, its size.  -EBUSY if passthrough handles are
 * open on @in and the object is not sealed here any more (its copy was
 * set aside): no other mode can open beside them.  Called with fs->lock
 * held.
 */
static int choose_io_locked(struct fs *fs, const struct inode *in, bool sealed, bool pt_ok,
			    uint64_t size)
{
	bool pt = fs_pt_usable(fs->pt);

	if (in->n_pt)
		return sealed ? FS_IO_PT : -EBUSY;
	if (sealed && pt && pt_ok && !in->n_cached && !in->n_direct)
		return FS_IO_PT;
	/* a direct-I/O handle of the fetch may be mapped shared, which rules
	 * passthrough out until it is released: keep the page cache out of
	 * it until then */
	if (size >= FS_DIRECT_IO_MIN && fs_pt_direct_mmap(fs->pt) &&
	    (!sealed || (pt && in->n_direct)))
		return FS_IO_DIRECT;
	return FS_IO_CACHED;
}

static void io_count_locked(struct inode *in, enum fs_io io)
{
	if (io == FS_IO_CACHED)
		in->n_cached++;
	else if (io == FS_IO_DIRECT)
		in->n_direct++;
	else if (io == FS_IO_PT)
		in->n_pt++;
}

/* Take a handle opened in @io out of @in's counts.  If it was the last
 * passthrough handle, the backing id and its object go to the caller
 * (*ret_id, *ret_obj; left alone otherwise), for backing_close() once
 * fs->lock is dropped. */
static void io_put_locked(struct inode *in, enum fs_io io, uint32_t *ret_id,
			  struct store_obj **ret_obj)
{
	if (io == FS_IO_CACHED && in->n_cached)
		in->n_cached--;
	else if (io == FS_IO_DIRECT && in->n_direct)
		in->n_direct--;
	else if (io == FS_IO_PT && in->n_pt && --in->n_pt == 0) {
		*ret_id = in->backing_id;
		*ret_obj = in->pt_obj;
		in->backing_id = 0;
		in->pt_obj = NULL;
	}
}

/* Register sealed @o's store file as a backing file.  0 and *ret_id, or
 * -errno (-EOPNOTSUPP: the store keeps no file per object). */
static int backing_open(struct fs *fs, struct store_obj *o, uint32_t *ret_id)
{
	int fd = store_obj_open_fd(o), r;

	if (fd < 0)
		return fd;
	r = fs_pt_backing_open(fs->pt, fd, ret_id);
	close(fd);
	if (r < 0 && r != -ENOTTY && r != -EPERM)
		log_debug("object %" PRIu64 " cannot be passed through: %s", store_obj_id(o),
			  strerror(-r));
	return r;
}

/* Close backing id @id (0: none) and then drop @o (NULL is fine), whose
 * file it is.  Never with fs->lock held. */
static void backing_close(struct fs *fs, uint32_t id, struct store_obj *o)
{
	int r = id ? fs_pt_backing_close(fs->pt, id) : 0;

	if (r < 0)
		log_msg_limited(&backing_rl, LOGL_WARN, "cannot close FUSE backing id %u: %s", id,
				strerror(-r));
	store_obj_unref(o);
}

/*
 * The largest object whose bytes an open stores in the kernel's page
 * cache (fill_cache()): a packed one (store_config.pack_max) fits.
 */
#define FS_FILL_MAX (64u << 10)

/*
 * Is the open of @in, a sealed object of @size bytes to be answered in
 * @io, to store its bytes in the kernel's cache (fill_cache())?  Once per
 * inode, and not beside a page-cache handle: its pages are there
 * already, or a read through it may hold one locked while it waits for
 * objfsd to answer, which the store would wait for.  Marks @in filled if
 * so.  Called with fs->lock held, before the handle is counted.
 */
static bool fill_claim_locked(struct fs *fs, struct inode *in, int io, uint64_t size)
{
	if (io != FS_IO_CACHED || size == 0 || size > FS_FILL_MAX || in->filled || in->n_cached ||
	    !fs->se || !atomic_load(&fs->mounted))
		return false;
	in->filled = true;
	return true;
}

/*
 * Store sealed @o's bytes, all @size of them, in the page cache of inode
 * @ino (claimed: fill_claim_locked()), as the open answered with
 * keep_cache is about to be (FUSE_NOTIFY_STORE): its first read then
 * needs no READ request, which on a cold open of a small object read
 * through the page cache (a packed one) would cost a round trip through
 * objfsd as long as the open's.  Best effort: on any failure the reads
 * come as requests.  Never with fs->lock held; takes it then.
 */
static void fill_cache(struct fs *fs, uint64_t ino, struct store_obj *o, uint64_t size)
{
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(0);
	struct iovec iov;
	struct inode *in;
	size_t bytes = 0;
	int r;

	/* sealed, so its bytes stay put while @o is held; one piece, as
	 * packed and small objects are */
	r = store_obj_iov(o, 0, (size_t)size, &iov, 1, &bytes);
	if (r == 1 && bytes == size) {
		bv.buf[0].mem = iov.iov_base;
		bv.buf[0].size = bytes;
		r = fuse_lowlevel_notify_store(fs->se, ino, 0, &bv, 0);
	} else if (r >= 0)
		r = -EMSGSIZE;
	if (r == 0) {
		FS_COUNT(fs, cache_fills, 1);
		return;
	}
	log_debug("object %" PRIu64 ": its bytes could not be stored in the kernel's cache "
		  "at the open: %s",
		  ino, strerror(-r));
	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find(fs, ino);
	if (in)
		in->filled = false;
	pthread_mutex_unlock(&fs->lock);
}

/*
 * Answer the open of a sealed or fetched object @ino with handle @h (not
 * counted yet; @h->obj sealed, or the pending object of @h->fetch): choose
 * how the kernel serves it, register the inode's backing id at its first
 * passthrough handle, count it and reply.  If the open fails or the
 * opener was interrupted, @h is released.  Takes fs->lock.
 */
static void reply_open(struct fs *fs, fuse_req_t req, uint64_t ino, struct handle *h,
		       struct fuse_file_info *fi, uint64_t size)
{
	/* a packed object has no file to pass through */
	bool sealed, pt_ok = !store_obj_packed(h->obj);
	uint32_t id = 0, spare = 0;
	struct inode *in;
	bool fill = false;
	int io, r;

	/* sealed is read under fs->lock: a fetch this open joined may seal
	 * @h->obj, and another open pass it through, at any moment before */
	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find(fs, ino); /* held by in->handles */
	sealed = store_obj_sealed(h->obj);
	io = in ? choose_io_locked(fs, in, sealed, pt_ok, size) : -ESTALE;
	if (io == FS_IO_PT && !in->backing_id) {
		pthread_mutex_unlock(&fs->lock);
		pt_ok = backing_open(fs, h->obj, &spare) == 0;
		pthread_mutex_lock(&fs->lock);
		/* again: other opens and releases may have come meanwhile */
		in = fs_inode_find(fs, ino);
		io = in ? choose_io_locked(fs, in, sealed, pt_ok, size) : -ESTALE;
		if (io == FS_IO_PT && !in->backing_id) {
			in->backing_id = spare;
			in->pt_obj = store_obj_ref(h->obj);
			spare = 0;
		}
	}
	if (io > 0) {
		fill = sealed && fill_claim_locked(fs, in, io, size);
		io_count_locked(in, (enum fs_io)io);
		h->io = (enum fs_io)io;
		id = in->backing_id;
	}
	pthread_mutex_unlock(&fs->lock);
	backing_close(fs, spare, NULL);
	if (io < 0) {
		if (io == -EBUSY)
			log_msg_limited(
			    &setaside_rl, LOGL_INFO,
			    "object %" PRIu64 " is open in passthrough mode on a copy that "
			    "was set aside: refusing new opens until those handles close",
			    ino);
		handle_release(fs, ino, h);
		fs_reply_err(req, io);
		return;
	}

	if (fill)
		fill_cache(fs, ino, h->obj, size);
	/* from the reply on, @h may be released (and freed) at any moment */
	fi->keep_cache = io == FS_IO_CACHED;
	fi->direct_io = io == FS_IO_DIRECT;
	/* a read-only handle of a sealed object: its FLUSH would do nothing
	 * (fs_op_flush()), so close(2) need not wait for one */
	fi->noflush = 1;
	r = io == FS_IO_PT ? fs_pt_reply_open(fs->pt, req, fi, id) : fuse_reply_open(req, fi);
	if (r == -ENOENT) {
		handle_release(fs, ino, h); /* interrupted: the kernel never opened it */
		return;
	}
	if (io == FS_IO_PT && r == 0)
		/* never with libfuse 3.14 (fs_pt turned passthrough off for the
		 * mount): the kernel has a page-cache handle that is counted as
		 * a passthrough one, and an open of this inode beside it fails */
		log_msg_limited(&nopt_rl, LOGL_ERROR,
				"the OPEN reply of object %" PRIu64 " went out without passthrough",
				ino);
	count_open(fs, (enum fs_io)io);
}

void fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fuse_req_userdata(req);
	struct node_fetch *f = NULL;
	char name[OBJFS_NAME_MAX + 1];
	struct meta_obj rec;
	bool have_rec = false;
	uint64_t parent = 0;
	struct store_obj *obj;
	struct handle *h;
	struct inode *in;
	struct pending *p;
	int r;

	if ((fi->flags & O_ACCMODE) == O_ACCMODE) {
		/* neither read, write nor both: Linux lets it through (for
		 * ioctls), POSIX leaves it undefined; objfs has no use for it */
		fs_reply_err(req, -EINVAL);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find(fs, ino);
	if (!in || in->kind != META_FILE) {
		pthread_mutex_unlock(&fs->lock);
		fs_reply_err(req, !in ? -ESTALE : in->kind == META_LINK ? -ELOOP : -EISDIR);
		return;
	}
	if (in->pending)
		fs_pending_settle_locked(fs, in->pending);
	p = in->pending;
	if (!p && !in->sealed) {
		pthread_mutex_unlock(&fs->lock);
		fs_reply_err(req, -ENOENT); /* a discarded write */
		return;
	}
	if (p && p->sealing && !p->seal_retry) {
		pthread_mutex_unlock(&fs->lock);
		log_msg_limited(&sealing_rl, LOGL_WARN,
				"object %" PRIu64 " is still being sealed after 60 s",
				(uint64_t)ino);
		fs_reply_err(req, -EBUSY);
		return;
	}
	if (p && p->seal_retry && (fi->flags & O_ACCMODE) != O_RDONLY) {
		/* its writers are done; only its seal is left */
		pthread_mutex_unlock(&fs->lock);
		fs_reply_err(req, -EACCES);
		return;
	}
	if (p && !p->unlinked) {
		obj = store_obj_ref(p->obj);
		h = handle_new(req, obj, p, (fi->flags & O_ACCMODE) != O_RDONLY);
		if ((fi->flags & O_ACCMODE) == O_RDWR)
			p->mappable = true;
		if (!h) {
			pthread_mutex_unlock(&fs->lock);
			store_obj_unref(obj);
			fs_reply_err(req, -ENOMEM);
			return;
		}
		p->opens++;
		if (h->writable)
			p->writers++;
		in->handles++;
		h->io = h->writable ? writer_io(fs) : FS_IO_CACHED;
		io_count_locked(in, h->io);
		pthread_mutex_unlock(&fs->lock);
		if ((fi->flags & O_TRUNC) && h->writable && (r = store_truncate(p->obj, 0)) < 0) {
			handle_release(fs, ino, h);
			fs_reply_err(req, r);
			return;
		}
		fi->fh = (uintptr_t)h;
		fi->keep_cache = 0;
		fi->direct_io = h->io == FS_IO_DIRECT;
		count_open(fs, h->io);
		if (fuse_reply_open(req, fi) == -ENOENT)
			handle_release(fs, ino, h); /* interrupted: never opened */
		return;
	}
	if (wants_write(fi->flags)) {
		if (fs->cfg.allow_overwrite && (fi->flags & O_TRUNC) && in->sealed) {
			add_replace_wish(fs, ino);
			pthread_mutex_unlock(&fs->lock);
			fs_reply_err(req, -ESTALE);
			return;
		}
		pthread_mutex_unlock(&fs->lock);
		log_msg_limited(
		    &refuse_rl, LOGL_INFO,
		    "refusing to open object %" PRIu64 " for writing: objects are immutable "
		    "once sealed%s",
		    (uint64_t)ino,
		    fs->cfg.allow_overwrite ? " (replace it with an O_TRUNC open)" : "");
		fs_reply_err(req, -EACCES);
		return;
	}
	in->handles++;
	have_rec = in->sealed;
	if (have_rec)
		fs_inode_get_rec(in, &rec);
	/* the name a fetched copy is catalogued by */
	name[0] = '\0';
	if (in->name) {
		parent = in->parent;
		snprintf(name, sizeof(name), "%s", in->name);
	}
	pthread_mutex_unlock(&fs->lock);

	r = node_open(fs->nd, ino, have_rec ? &rec : NULL, parent, name[0] ? name : NULL, &obj, &f);
	if (r < 0) {
		r = fs_open_errno(r);
		goto fail;
	}
	h = handle_new(req, obj, NULL, false);
	if (!h) {
		store_obj_unref(obj);
		node_fetch_opened(f); /* what is left of a small fetch, and its reference */
		r = -ENOMEM;
		goto fail;
	}
	h->fetch = f;
	fi->fh = (uintptr_t)h;
	/* held here now, or soon: its name answers while Redis is away */
	if (name[0]) {
		pthread_mutex_lock(&fs->lock);
		fs_dcache_put(fs, parent, name, META_FILE, ino);
		pthread_mutex_unlock(&fs->lock);
	}
	/* the handle may be released as soon as the open is answered */
	node_fetch_ref(f);
	reply_open(fs, req, ino, h, fi, have_rec ? rec.size : store_obj_size(obj));
	node_fetch_opened(f);
	return;

fail:
	pthread_mutex_lock(&fs->lock);
	fs_inode_put_handle(fs, ino);
	pthread_mutex_unlock(&fs->lock);
	fs_reply_err(req, r);
}

void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct iovec iov[READ_IOV_MAX];
	size_t bytes = 0;
	ssize_t n;
	char *buf;
	int cnt;

	FS_COUNT((struct fs *)fuse_req_userdata(req), reads, 1);
	if (off < 0) {
		fs_reply_err(req, -EINVAL);
		return;
	}
	if (h->fetch) {
		int r = node_fetch_wait(h->fetch, (uint64_t)off, size);

		if (r < 0) {
			fs_reply_err(req, r);
			return;
		}
	}
	if (!h->pending || store_obj_sealed(h->obj)) {
		cnt = store_obj_iov(h->obj, (uint64_t)off, size, iov, READ_IOV_MAX, &bytes);
		if (cnt < 0)
			fs_reply_err(req, cnt);
		else if (cnt == 0)
			fuse_reply_buf(req, NULL, 0);
		else
			fuse_reply_iov(req, iov, cnt);
		return;
	}
	/* a file still being written: copy under the object's lock */
	buf = malloc(size ? size : 1);
	if (!buf) {
		fs_reply_err(req, -ENOMEM);
		return;
	}
	n = store_read(h->obj, buf, size, (uint64_t)off);
	if (n < 0)
		fs_reply_err(req, (int)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

/* A write through a handle whose object was sealed meanwhile
 * (docs/design.md, "When a writer is done"): EACCES, logged once per
 * object.  Takes fs->lock. */
static int late_write(struct fs *fs, struct pending *p)
{
	bool log;

	pthread_mutex_lock(&fs->lock);
	log = !p->late_logged;
	p->late_logged = true;
	pthread_mutex_unlock(&fs->lock);
	if (log)
		log_msg_limited(&late_rl, LOGL_INFO,
				"write after the seal of object %" PRIu64 " ('%s') refused: it was "
				"sealed when the process that created it closed it",
				p->id, p->name);
	return -EACCES;
}

void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		 struct fuse_file_info *fi)
{
	struct fs *fs = fuse_req_userdata(req);
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct pending *p = h->pending;
	bool failed, sealed, log_full;
	char use[160], name[OBJFS_NAME_MAX + 1];
	pid_t tid = fuse_req_ctx(req)->pid, wtid, wtgid = 0, mapper;
	int r, mk = -1;

	if (!p || !h->writable) {
		fs_reply_err(req, p ? -EBADF : -EACCES);
		return;
	}
	if (off < 0) {
		fs_reply_err(req, -EINVAL);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	failed = p->failed;
	sealed = p->sealed;
	r = p->seal_err;
	wtid = p->writer_tid;
	mapper = p->mapper_tid;
	pthread_mutex_unlock(&fs->lock);
	if (tid > 0 && tid != wtid) /* once per thread that writes */
		wtgid = tid == h->opener ? h->opener_tgid : fs_task_tgid(tid);
	/* a mapping's pages written back as its process dies (at exit the
	 * kernel writes them back before it lets go of the mapping, and
	 * waits for these WRITEs): the one moment that death is sure to be
	 * seen, since no FLUSH comes for a mapping */
	if (mapper > 0)
		mk = fs_task_killed_by(mapper);
	if (failed || r) {
		fs_reply_err(req, failed ? -ENOSPC : r);
		return;
	}
	r = sealed ? -EACCES : store_write(h->obj, buf, size, (uint64_t)off);
	if (r == -ENOSPC && node_evict(fs->nd, size) > 0)
		r = store_write(h->obj, buf, size, (uint64_t)off);
	if (r == -EACCES) {
		/* sealed meanwhile, if not before */
		fs_reply_err(req, late_write(fs, p));
		return;
	}
	/* the bytes are in the cache now: fold them into the checksum, so
	 * that the seal at close hashes next to nothing */
	if (r == 0)
		(void)store_hash_follow(h->obj, (uint64_t)off, (uint64_t)off + size);
	pthread_mutex_lock(&fs->lock);
	if (h->flushed) {
		h->flushed = false;
		p->flushed--;
	}
	if (r == 0 && tid > 0 && tid != p->writer_tid) {
		p->writer_tid = tid;
		p->writer_tgid = wtgid;
	}
	if (r == 0)
		p->md.mtime_set = false; /* a write after utimensat moves it again */
	if (r == 0 && mk > 0)
		p->killed_sig = mk;
	else if (r == 0 && (tid > 0 || mk == 0))
		p->killed_sig = 0; /* whoever writes now is alive */
	if ((r == -EMFILE || r == -ENFILE) && !p->failed) {
		/* the daemon's own limit, not the writer's: the write is lost */
		p->failed = true;
		log_msg_limited(&discard_rl, LOGL_WARN,
				"out of descriptors: object %" PRIu64 " being written as '%s' is "
				"discarded; raise the open-files limit (LimitNOFILE=, ulimit -n)",
				p->id, p->name);
	}
	log_full = r == -ENOSPC && !p->failed;
	if (log_full) {
		p->failed = true;
		memcpy(name, p->name, sizeof(name));
	}
	if (r == -EMFILE || r == -ENFILE)
		r = -ENOSPC;
	pthread_mutex_unlock(&fs->lock);
	if (log_full) {
		/* without fs->lock: it asks the store's filesystem */
		store_describe_use(fs->store, use, sizeof(use));
		log_msg_limited(&discard_rl, LOGL_WARN,
				"store full (%s): object %" PRIu64
				" being written as '%s' is discarded",
				use, p->id, name);
	}
	if (r < 0)
		fs_reply_err(req, r);
	else
		fuse_reply_write(req, size);
}

void fs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fuse_req_userdata(req);
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct pending *p = h->pending;
	char name[OBJFS_NAME_MAX + 1];
	bool failed = false, hide = false, may_seal = false, seal = false, mappable = false;
	uint64_t parent = 0;
	pid_t tid = fuse_req_ctx(req)->pid, wtid = 0, wtgid = 0, mapper = 0;
	int r = 0, killed = -1;

	FS_COUNT(fs, flushes, 1);
	if (p && h->writable && tid > 0) {
		pthread_mutex_lock(&fs->lock);
		wtid = p->writer_tid;
		wtgid = p->writer_tgid;
		pthread_mutex_unlock(&fs->lock);
		/* the process that wrote last dying from a signal may leave the
		 * object cut short; another one's death (a child that only held
		 * the descriptor) says nothing of it */
		if (!wtid || tid == wtid || (wtgid && fs_task_tgid(tid) == wtgid))
			killed = fs_task_killed_by(tid);
	}
	if (p) {
		pthread_mutex_lock(&fs->lock);
		if (!h->flushed) {
			h->flushed = true;
			p->flushed++;
		}
		failed = p->failed;
		if (killed >= 0 && !p->sealing && !p->sealed)
			p->killed_sig = killed;
		if (h->writable && p->seal_err)
			r = p->seal_err; /* its seal failed: this close fails too */
		/* a write was lost: the object will never be published, so the
		 * name goes away now rather than at the seal */
		if (failed && !p->unlinked && !p->discarded) {
			p->unlinked = true;
			fs_pending_remove(fs, p);
			parent = p->parent;
			memcpy(name, p->name, sizeof(name));
			hide = true;
		}
		may_seal = h->writable && !h->done && !p->sealing && !p->sealed && !p->discarded;
		mappable = p->mappable;
		pthread_mutex_unlock(&fs->lock);
	}
	if (hide)
		fs_notify_gone(fs, parent, name);
	if (may_seal && fs_flush_verdict(req, h, ino, mappable, &mapper) != FLUSH_LAST) {
		if (mapper) {
			pthread_mutex_lock(&fs->lock);
			p->mapper_tid = mapper;
			pthread_mutex_unlock(&fs->lock);
		}
	} else if (may_seal) {
		pthread_mutex_lock(&fs->lock);
		if (!h->done) {
			h->done = true;
			p->writers--;
		}
		if (p->writers == 0 && !p->sealing && !p->sealed && !p->discarded)
			seal = p->sealing = true;
		pthread_mutex_unlock(&fs->lock);
		/* @h keeps @p alive: its RELEASE has not come */
		if (seal)
			r = fs_seal_pending(fs, p, true);
	}
	/* close(2) reports a write that was lost to a full store */
	if (failed && h->writable)
		r = -ENOSPC;
	fs_reply_err(req, r);
}

void fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	/* the store is memory; there is nothing further to make durable */
	fs_reply_err(req, 0);
}

/* Drop handle @h on inode @ino; when the last writer of a pending object
 * is done, it is sealed (unless a FLUSH did that).  Also used to undo an
 * open the kernel never saw. */
static void handle_release(struct fs *fs, uint64_t ino, struct handle *h)
{
	struct pending *p = h->pending;
	struct store_obj *pt_obj = NULL;
	bool seal = false, drop = false;
	struct inode *in;
	uint32_t id = 0;
	enum fs_io io;
	pid_t mapper = 0;

	pthread_mutex_lock(&fs->lock);
	if (p) {
		if (h->flushed)
			p->flushed--;
		if (h->writable && !h->done)
			p->writers--;
		p->opens--;
		if (p->sealed || p->discarded)
			drop = p->opens == 0; /* the seal is over: the last handle frees it */
		else if (!p->sealing && p->writers == 0)
			seal = p->sealing = true;
		if (seal)
			mapper = p->mapper_tid;
	}
	pthread_mutex_unlock(&fs->lock);
	if (seal && mapper > 0) {
		/* the last mapping went: at the exit of its process, if that
		 * is why, and then the process is still dying now */
		int k = fs_task_killed_by(mapper);

		if (k > 0) {
			pthread_mutex_lock(&fs->lock);
			p->killed_sig = k;
			pthread_mutex_unlock(&fs->lock);
		}
	}
	if (seal)
		(void)fs_seal_pending(fs, p, false); /* frees @p if this was its last handle */
	if (drop) {
		store_obj_unref(p->obj);
		free(p);
	}
	io = h->io;
	node_fetch_put(h->fetch);
	store_obj_unref(h->obj);
	free(h);
	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find(fs, ino);
	if (in)
		io_put_locked(in, io, &id, &pt_obj);
	fs_inode_put_handle(fs, ino);
	pthread_mutex_unlock(&fs->lock);
	/* the kernel dropped the handle's mode before it sent RELEASE */
	backing_close(fs, id, pt_obj);
}

void fs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	handle_release(fuse_req_userdata(req), ino, (struct handle *)(uintptr_t)fi->fh);
	fs_reply_err(req, 0);
}

/* @ts in ns since the epoch; false if it does not fit (before 1678 or
 * after 2262: times are kept in 64-bit ns). */
static bool ts_ns(const struct timespec *ts, int64_t *ret)
{
	if (ts->tv_sec > INT64_MAX / 1000000000LL - 1 || ts->tv_sec < INT64_MIN / 1000000000LL + 1)
		return false;
	*ret = (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec;
	return true;
}

/* The times @to_set asks for, into @a and *@mtime (UTIME_NOW: now);
 * UINT_MAX for a time that cannot be kept. */
static unsigned setattr_times(const struct stat *attr, int to_set, struct meta_attr *a,
			      int64_t *mtime)
{
	int64_t now = util_now_ns();
	unsigned what = 0;

	if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
		a->atime_ns = now;
		what |= META_SET_ATIME;
	} else if (to_set & FUSE_SET_ATTR_ATIME) {
		if (!ts_ns(&attr->st_atim, &a->atime_ns))
			return UINT_MAX;
		what |= META_SET_ATIME;
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
		*mtime = now;
		what |= META_SET_MTIME;
	} else if (to_set & FUSE_SET_ATTR_MTIME) {
		if (!ts_ns(&attr->st_mtim, mtime))
			return UINT_MAX;
		what |= META_SET_MTIME;
	}
	return what;
}

/*
 * chmod, chown and utimensat: a pending file keeps them for its seal; a
 * sealed file's or a directory's change in Redis, for every node (the
 * kernel checked who may: default_permissions).  0 or -errno.
 */
static int setattr_meta(struct fs *fs, fuse_ino_t ino, const struct stat *attr, int to_set)
{
	struct meta_attr a = {0}, base;
	struct meta_entry e;
	unsigned what = 0, times;
	int64_t mtime = 0;
	struct inode *in;
	int r;

	if (to_set & FUSE_SET_ATTR_UID) {
		a.uid = (uint32_t)attr->st_uid;
		what |= META_SET_UID;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		a.gid = (uint32_t)attr->st_gid;
		what |= META_SET_GID;
	}
	if (to_set & FUSE_SET_ATTR_MODE) {
		a.mode = attr->st_mode & 07777;
		what |= META_SET_MODE;
	}
	times = setattr_times(attr, to_set, &a, &mtime);
	if (times == UINT_MAX)
		return -EINVAL;
	what |= times;
	if (!what)
		return 0;
	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find_settled(fs, ino);
	if (!in) {
		pthread_mutex_unlock(&fs->lock);
		return -ESTALE;
	}
	if (in->kind == META_FILE && in->pending && in->pending->sealing) {
		/* its seal took the metadata already, and is not done */
		pthread_mutex_unlock(&fs->lock);
		log_msg_limited(&sealing_rl, LOGL_WARN,
				"object %" PRIu64
				" is still being sealed: its owner, mode or times "
				"cannot change yet",
				(uint64_t)ino);
		return -EBUSY;
	}
	if (in->kind == META_FILE && in->pending) {
		struct node_meta *md = &in->pending->md;

		if (!md->attr.set)
			fs_default_attr(fs, META_FILE, 0, &md->attr);
		if (what & META_SET_UID)
			md->attr.uid = a.uid;
		if (what & META_SET_GID)
			md->attr.gid = a.gid;
		if (what & META_SET_MODE)
			md->attr.mode = a.mode;
		if (what & META_SET_ATIME) {
			md->atime_set = true;
			md->atime_ns = a.atime_ns;
		}
		if (what & META_SET_MTIME) {
			md->mtime_set = true;
			md->mtime_ns = mtime;
		}
		pthread_mutex_unlock(&fs->lock);
		return 0;
	}
	if (in->kind == META_FILE && !in->sealed) {
		pthread_mutex_unlock(&fs->lock);
		return -ENOENT; /* a discarded write */
	}
	fs_shown_attr(fs, in, &base);
	pthread_mutex_unlock(&fs->lock);
	r = meta_setattr(fs->meta, ino, what, &a, mtime, &base, &e);
	if (r < 0)
		return r == -ENOENT ? -ESTALE : r;
	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find(fs, ino);
	if (in && in->kind == e.kind) {
		fs_inode_attr_changed(fs, in);
		fs_inode_update(fs, in, &e);
	}
	pthread_mutex_unlock(&fs->lock);
	return 0;
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
	in = fs_inode_find(fs, ino);
	if (!in) {
		pthread_mutex_unlock(&fs->lock);
		fs_reply_err(req, -ESTALE);
		return;
	}
	kind = in->kind;
	if (kind == META_FILE && in->pending)
		obj = store_obj_ref(in->pending->obj);
	pthread_mutex_unlock(&fs->lock);

	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (!obj) {
			log_msg_limited(&refuse_rl, LOGL_INFO,
					"refusing to truncate object %" PRIu64
					": objects are immutable once sealed",
					(uint64_t)ino);
			fs_reply_err(req, kind == META_DIR ? -EISDIR : -EACCES);
			return;
		}
		r = store_truncate(obj, (uint64_t)attr->st_size);
		if (r == -EMFILE || r == -ENFILE)
			r = -ENOSPC; /* the daemon's limit, not the caller's */
		if (r == -ENOSPC) {
			pthread_mutex_lock(&fs->lock);
			in = fs_inode_find(fs, ino);
			if (in && in->pending && in->pending->obj == obj)
				in->pending->failed = true;
			pthread_mutex_unlock(&fs->lock);
		}
	}
	store_obj_unref(obj);
	if (r == 0)
		r = setattr_meta(fs, ino, attr, to_set);
	if (r < 0)
		fs_reply_err_at(req, r, "setattr", ino, NULL);
	else
		fs_reply_attr(req, fs, ino);
}

void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	(void)rdev;
	/* objects are regular files: no devices, FIFOs or sockets (bind(2)
	 * of a Unix socket comes here too) */
	log_debug("refusing mknod of '%s' in directory %" PRIu64 " (mode %o): objfs holds "
		  "regular files and directories only",
		  name, (uint64_t)parent, (unsigned)mode);
	fs_reply_err(req, -EPERM);
}
