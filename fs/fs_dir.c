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
#define _GNU_SOURCE /* qsort_r */
#include "fs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Refusals that requests repeat (common/log.h): at most 10 lines in 10 s,
 * the same line at most once. */
static struct log_ratelimit link_rl =
    LOG_RATELIMIT_INIT("second names refused while written", 10000, 10);
static struct log_ratelimit rename_rl =
    LOG_RATELIMIT_INIT("renames onto existing names refused", 10000, 10);

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

	p = calloc(1, sizeof(*p));
	if (!p) {
		*ret_err = -ENOMEM;
		return NULL;
	}
	r = node_create(fs->nd, &id, &p->obj);
	if (r < 0) {
		free(p);
		*ret_err = r;
		return NULL;
	}
	p->id = id;
	p->parent = parent;
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->replace = true;
	p->created_ns = util_mono_ns();
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
	known = fs_dcache_get(fs, parent, name, &kind, &id);
	pthread_mutex_unlock(&fs->lock);
	if (!known)
		return false;
	if (kind == META_FILE) {
		/* The name cache keeps a file's name as a 64-bit hash: a name
		 * not in it matches another's with odds of about n / 2^64 (n
		 * names kept), which the copy's catalog path cannot rule out
		 * better (it lags a rename made on another node until the
		 * reconcile) */
		o = node_local(fs->nd, id);
		if (!o)
			return false;
	}
	pthread_mutex_lock(&fs->lock);
	in = fs_inode_get(fs, id, kind);
	if (!in) {
		pthread_mutex_unlock(&fs->lock);
		store_obj_unref(o);
		return false;
	}
	if (o && !in->pending && !in->sealed) {
		struct meta_obj mo;

		in->sealed = true;
		node_record_of(fs->nd, o, &mo);
		fs_inode_set_rec(fs, in, &mo);
	}
	store_obj_unref(o);
	/* the kernel caches the name: inval_all() must find it */
	if (kind == META_FILE)
		fs_inode_set_name(in, parent, name);
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
	uint64_t seen;
	int r;

	r = util_name_validate(name);
	if (r < 0) {
		fs_reply_err(req, r);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	p = fs_pending_find(fs, parent, name);
	if (p) {
		in = fs_inode_get(fs, p->id, META_FILE);
		if (!in)
			goto no_mem;
		in->pending = p;
		fs_inode_set_name(in, parent, name);
		fs_reply_entry_unlock(req, fs, in);
		return;
	}
	seen = fs->attr_seq;
	pthread_mutex_unlock(&fs->lock);

	r = meta_lookup(fs->meta, parent, name, &e);
	if (r == -EIO && lookup_offline(req, fs, parent, name))
		return;
	if (r < 0) {
		pthread_mutex_lock(&fs->lock);
		if (r == -ENOENT) {
			fs_dcache_del(fs, parent, name);
			fs_neg_note(fs, parent, name);
		}
		pthread_mutex_unlock(&fs->lock);
		fs_reply_err_at(req, r, "lookup", parent, name);
		return;
	}
	if (e.kind == META_FILE && fs_take_replace_wish(fs, e.id)) {
		p = make_replacement(fs, parent, name, &r);
		if (!p) {
			fs_reply_err_at(req, r, "overwrite", parent, name);
			return;
		}
		/* the new object keeps the name's owner and mode, not its
		 * count of names: it has this one */
		p->md.attr = e.attr;
		p->md.attr.nlink = 0;
		pthread_mutex_lock(&fs->lock);
		p->next = fs->pending;
		fs->pending = p;
		in = fs_inode_get(fs, p->id, META_FILE);
		if (!in)
			goto no_mem;
		in->pending = p;
		fs_inode_set_name(in, parent, name);
		fs_reply_entry_unlock(req, fs, in);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	fs_dcache_seen(fs, parent, name, e.kind, e.id);
	in = fs_inode_get(fs, e.id, e.kind);
	if (!in)
		goto no_mem;
	fs_inode_update_as_of(fs, in, &e, seen);
	if (e.kind != META_DIR)
		fs_inode_set_name(in, parent, name);
	fs_reply_entry_unlock(req, fs, in);
	return;

no_mem:
	pthread_mutex_unlock(&fs->lock);
	fs_reply_err(req, -ENOMEM);
}

void fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct fs *fs = fuse_req_userdata(req);

	pthread_mutex_lock(&fs->lock);
	fs_inode_forget(fs, ino, nlookup);
	pthread_mutex_unlock(&fs->lock);
	fuse_reply_none(req);
}

void fs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct fs *fs = fuse_req_userdata(req);
	size_t i;

	pthread_mutex_lock(&fs->lock);
	for (i = 0; i < count; i++)
		fs_inode_forget(fs, forgets[i].ino, forgets[i].nlookup);
	pthread_mutex_unlock(&fs->lock);
	fuse_reply_none(req);
}

void fs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fuse_req_userdata(req);
	struct meta_entry e;
	struct inode *in;
	bool is_file, fresh;
	uint64_t seen;
	int r;

	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find(fs, ino);
	/* a file's attributes change only by setattr, which every node
	 * hears of ("attr": attr_stale) */
	is_file =
	    in && ((in->kind == META_FILE && (in->pending || !in->sealed || !in->attr_stale)) ||
		   (in->kind == META_LINK && !in->attr_stale));
	fresh = in && in->kind == META_DIR && in->dir_at &&
		util_mono_ns() - in->dir_at < (int64_t)(FS_DIR_ATTR_TIMEOUT * 1e9);
	seen = fs->attr_seq;
	pthread_mutex_unlock(&fs->lock);
	if (is_file || fresh) {
		fs_reply_attr(req, fs, ino);
		return;
	}

	/* directories, and files whose owner, mode or times changed
	 * elsewhere: read again from Redis, but fall back to what we know
	 * when Redis is away */
	r = meta_getattr(fs->meta, ino, &e);
	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find(fs, ino);
	if (r < 0 && !(r == -EIO && in)) {
		pthread_mutex_unlock(&fs->lock);
		fs_reply_err_at(req, r == -ENOENT ? -ESTALE : r, "getattr", ino, NULL);
		return;
	}
	if (!in)
		in = fs_inode_get(fs, ino, e.kind);
	if (in && r == 0)
		fs_inode_update_as_of(fs, in, &e, seen);
	pthread_mutex_unlock(&fs->lock);
	if (!in)
		fs_reply_err(req, -ENOMEM);
	else
		fs_reply_attr(req, fs, ino);
}

/* ---- directories ----
 *
 * A handle's listing is read at its first READDIR, not at OPENDIR: while
 * the kernel still has the listing cached (cache_readdir, keep_cache),
 * OPENDIR and RELEASEDIR are all it sends.  It is read page by page
 * (meta_readdir_page(), with every entry's attributes), sorted, deduped
 * (a page may repeat a name), and the files being written here are
 * merged in: one that replaces a name takes that name's place, as it
 * does in a lookup.  READDIR and READDIRPLUS serve from it; READDIRPLUS
 * also hands the kernel each entry's inode and attributes, as a lookup
 * would, so that `ls -l` needs no LOOKUP per name.
 *
 * The kernel drops a cached listing itself on changes made through this
 * mount; fs_notify_dir() (fs_inval.c) drops it on every change another
 * node publishes and on every change the daemon makes on its own.  A
 * change noticed while a listing is being read may find nothing cached
 * yet, and the kernel would then cache the listing read before the
 * change: the directory's dir_gen moved meanwhile, and RELEASEDIR drops
 * the listing again.
 */

/* a listing larger than this gives EFBIG (as meta's own bound) */
#define DIR_ENTS_MAX (1u << 20)
/* pages of one listing: far more than DIR_ENTS_MAX names need */
#define DIR_PAGES_MAX (1u << 20)

struct dir_ent {
	struct meta_entry e; /* kind and id; the attributes if attr */
	uint32_t name;	     /* offset in dirlist.names */
	bool attr;
	bool pending; /* a file being written here: attributes from its inode */
};

/* An open directory handle.  All fields are guarded by lock: the kernel
 * sends one READDIR at a time per handle anyway. */
struct dirlist {
	pthread_mutex_t lock;
	bool loaded;
	uint64_t gen;	   /* the directory's dir_gen when the listing was read */
	uint64_t attr_seq; /* fs->attr_seq then */
	struct dir_ent *ents;
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
};

static const char *ent_name(const struct dirlist *d, const struct dir_ent *de)
{
	return d->names + de->name;
}

static void dirlist_clear(struct dirlist *d)
{
	free(d->ents);
	free(d->names);
	d->ents = NULL;
	d->names = NULL;
	d->n = d->cap = d->names_len = d->names_cap = 0;
	d->loaded = false;
}

static int dirlist_add(struct dirlist *d, const char *name, const struct meta_entry *e, bool attr,
		       bool pending)
{
	size_t len = strlen(name) + 1;
	struct dir_ent *de;

	if (d->n >= DIR_ENTS_MAX)
		return -EFBIG;
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 64;
		struct dir_ent *ents = realloc(d->ents, cap * sizeof(*ents));

		if (!ents)
			return -ENOMEM;
		d->ents = ents;
		d->cap = cap;
	}
	if (d->names_len + len > d->names_cap) {
		size_t cap = d->names_cap ? 2 * d->names_cap : 4096;
		char *names;

		while (cap < d->names_len + len)
			cap *= 2;
		names = realloc(d->names, cap);
		if (!names)
			return -ENOMEM;
		d->names = names;
		d->names_cap = cap;
	}
	de = &d->ents[d->n++];
	de->e = *e;
	de->name = (uint32_t)d->names_len;
	de->attr = attr;
	de->pending = pending;
	memcpy(d->names + d->names_len, name, len);
	d->names_len += len;
	return 0;
}

static int ent_cmp(const void *a, const void *b, void *names)
{
	return strcmp((const char *)names + ((const struct dir_ent *)a)->name,
		      (const char *)names + ((const struct dir_ent *)b)->name);
}

/* Index of @name among the first @n (sorted) entries, or -1. */
static ssize_t dirlist_find(const struct dirlist *d, size_t n, const char *name)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, ent_name(d, &d->ents[mid]));

		if (c == 0)
			return (ssize_t)mid;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -1;
}

/* Sort the names read from Redis and drop the repeats (the first wins:
 * HSCAN repeats a name only when the hash was resized meanwhile). */
static void dirlist_sort_unique(struct dirlist *d)
{
	size_t i, n = 0;

	qsort_r(d->ents, d->n, sizeof(*d->ents), ent_cmp, d->names);
	for (i = 0; i < d->n; i++) {
		if (n && !strcmp(ent_name(d, &d->ents[i]), ent_name(d, &d->ents[n - 1])))
			continue;
		d->ents[n++] = d->ents[i];
	}
	d->n = n;
}

/* The files being written here in @dir: each takes the place of the name
 * it replaces, or comes after the names read from Redis.  Called with
 * fs->lock held. */
static int dirlist_merge_pending(struct fs *fs, struct dirlist *d, uint64_t dir)
{
	size_t sorted = d->n;
	struct pending *p;
	int r;

	for (p = fs->pending; p; p = p->next) {
		struct meta_entry e = {.kind = META_FILE, .id = p->id};
		ssize_t k;

		if (p->parent != dir || p->unlinked)
			continue;
		k = dirlist_find(d, sorted, p->name);
		if (k >= 0) {
			d->ents[k].e = e;
			d->ents[k].attr = false;
			d->ents[k].pending = true;
			continue;
		}
		r = dirlist_add(d, p->name, &e, false, true);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Read the listing of @dir into @d, replacing what it had. */
static int dirlist_load(struct fs *fs, struct dirlist *d, uint64_t dir)
{
	struct meta_dirent_plus *page;
	uint64_t cursor = 0;
	unsigned pages = 0;
	struct inode *in;
	size_t n, i;
	int r;

	dirlist_clear(d);
	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find(fs, dir);
	d->gen = in ? in->dir_gen : 0;
	d->attr_seq = fs->attr_seq;
	pthread_mutex_unlock(&fs->lock);
	do {
		if (++pages > DIR_PAGES_MAX)
			return -EFBIG;
		r = meta_readdir_page(fs->meta, dir, &cursor, &page, &n);
		if (r < 0)
			return r;
		for (i = 0; i < n && r == 0; i++)
			r = dirlist_add(d, page[i].name, &page[i].e, page[i].attr, false);
		free(page);
		if (r < 0)
			return r;
	} while (cursor);
	dirlist_sort_unique(d);
	pthread_mutex_lock(&fs->lock);
	r = dirlist_merge_pending(fs, d, dir);
	pthread_mutex_unlock(&fs->lock);
	if (r == 0) {
		d->loaded = true;
		FS_COUNT(fs, listings, 1);
	}
	return r;
}

void fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fuse_req_userdata(req);
	struct dirlist *d;
	struct inode *in;

	d = calloc(1, sizeof(*d));
	if (!d) {
		fs_reply_err(req, -ENOMEM);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	/* held by the handle: its dir_gen must outlive a FORGET */
	in = fs_inode_get(fs, ino, META_DIR);
	if (in)
		in->handles++;
	pthread_mutex_unlock(&fs->lock);
	if (!in) {
		free(d);
		fs_reply_err(req, -ENOMEM);
		return;
	}
	pthread_mutex_init(&d->lock, NULL);
	fi->fh = (uintptr_t)d;
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	if (fuse_reply_open(req, fi) < 0) {
		pthread_mutex_destroy(&d->lock);
		free(d);
		pthread_mutex_lock(&fs->lock);
		fs_inode_put_handle(fs, ino);
		pthread_mutex_unlock(&fs->lock);
	}
}

/*
 * The inode of @de for READDIRPLUS, made or refreshed as a lookup would
 * (without its reference), or NULL if the kernel is to look the name up
 * itself (attributes damaged, a file being written here that is not any
 * more).  Called with fs->lock held.
 */
static struct inode *plus_inode(struct fs *fs, uint64_t dir, const char *name,
				const struct dir_ent *de, uint64_t seen)
{
	struct inode *in;

	if (de->pending) {
		struct pending *p = fs_pending_find(fs, dir, name);

		if (p && p->id == de->e.id) {
			in = fs_inode_get(fs, p->id, META_FILE);
			if (in) {
				in->pending = p;
				fs_inode_set_name(in, dir, name);
			}
			return in;
		}
		in = fs_inode_find(fs, de->e.id);
		return in && in->sealed && !in->pending ? in : NULL;
	}
	if (!de->attr)
		return NULL;
	in = fs_inode_get(fs, de->e.id, de->e.kind);
	if (!in)
		return NULL;
	fs_inode_update_as_of(fs, in, &de->e, seen);
	if (de->e.kind != META_DIR)
		fs_inode_set_name(in, dir, name);
	fs_dcache_seen(fs, dir, name, de->e.kind, de->e.id);
	return in;
}

/* Fill @buf (@size bytes) with the entries from @off on; with @plus, the
 * inodes handed over go into @ids (room for as many entries as fit) and
 * are counted as looked up.  Returns the bytes used. */
static size_t dir_fill(fuse_req_t req, struct fs *fs, uint64_t ino, struct dirlist *d, char *buf,
		       size_t size, off_t off, bool plus, uint64_t *ids, size_t *ret_nids)
{
	size_t total = 2 + d->n, used = 0, nids = 0;
	off_t i;

	if (plus)
		pthread_mutex_lock(&fs->lock);
	for (i = off; i >= 0 && (size_t)i < total; i++) {
		struct fuse_entry_param ep;
		struct inode *in = NULL;
		const char *name;
		size_t len;

		memset(&ep, 0, sizeof(ep));
		ep.attr.st_mode = S_IFDIR;
		if (i == 0) {
			name = ".";
			ep.attr.st_ino = ino;
		} else if (i == 1) {
			name = "..";
			ep.attr.st_ino = META_ROOT_ID;
		} else {
			const struct dir_ent *de = &d->ents[i - 2];

			name = ent_name(d, de);
			ep.attr.st_ino = de->e.id;
			ep.attr.st_mode = de->e.kind == META_DIR    ? S_IFDIR
					  : de->e.kind == META_LINK ? S_IFLNK
								    : S_IFREG;
			if (plus)
				in = plus_inode(fs, ino, name, de, d->attr_seq);
			if (in)
				fs_fill_entry(fs, in, &ep);
		}
		if (plus)
			len =
			    fuse_add_direntry_plus(req, buf + used, size - used, name, &ep, i + 1);
		else
			len =
			    fuse_add_direntry(req, buf + used, size - used, name, &ep.attr, i + 1);
		if (len > size - used) {
			/* not handed over: not looked up either */
			if (in)
				fs_inode_forget(fs, in->ino, 0);
			break;
		}
		used += len;
		if (in) {
			in->nlookup++;
			ids[nids++] = in->ino;
		}
	}
	if (plus)
		pthread_mutex_unlock(&fs->lock);
	*ret_nids = nids;
	return used;
}

static void dir_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi, bool plus)
{
	struct fs *fs = fuse_req_userdata(req);
	struct dirlist *d = (struct dirlist *)(uintptr_t)fi->fh;
	uint64_t *ids = NULL;
	size_t used, nids = 0, i;
	char *buf;
	int r = 0;

	buf = malloc(size);
	/* an entry takes 24 bytes at least, 152 with attributes */
	if (buf && plus)
		ids = calloc(size / 152 + 1, sizeof(*ids));
	if (!buf || (plus && !ids)) {
		free(buf);
		fs_reply_err(req, -ENOMEM);
		return;
	}
	pthread_mutex_lock(&d->lock);
	/* offset 0 is also a rewinddir(), which must see the changes since */
	if (!d->loaded || off == 0)
		r = dirlist_load(fs, d, ino);
	if (r < 0) {
		dirlist_clear(d);
		pthread_mutex_unlock(&d->lock);
		free(ids);
		free(buf);
		fs_reply_err_at(req, r, "readdir", ino, NULL);
		return;
	}
	used = dir_fill(req, fs, ino, d, buf, size, off, plus, ids, &nids);
	pthread_mutex_unlock(&d->lock);
	if (fuse_reply_buf(req, buf, used) < 0 && nids) {
		/* the kernel never saw these entries */
		pthread_mutex_lock(&fs->lock);
		for (i = 0; i < nids; i++)
			fs_inode_forget(fs, ids[i], 1);
		pthread_mutex_unlock(&fs->lock);
	}
	free(ids);
	free(buf);
}

void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	dir_read(req, ino, size, off, fi, false);
}

void fs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	dir_read(req, ino, size, off, fi, true);
}

void fs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fuse_req_userdata(req);
	struct dirlist *d = (struct dirlist *)(uintptr_t)fi->fh;
	struct inode *in;
	bool stale;

	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find(fs, ino);
	stale = d->loaded && in && in->dir_gen != d->gen;
	fs_inode_put_handle(fs, ino);
	pthread_mutex_unlock(&fs->lock);
	fs_reply_err(req, 0);
	/* the kernel may have cached what we read before a change */
	if (stale)
		fs_notify_dir(fs, ino);
	dirlist_clear(d);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

/* mkdir and symlink: a new entry @name of @kind in @parent, made by the
 * caller with @mode (a link: to @target), and its entry as the reply. */
static void make_entry(fuse_req_t req, fuse_ino_t parent, const char *name, enum meta_kind kind,
		       mode_t mode, const char *target)
{
	struct fs *fs = fuse_req_userdata(req);
	const char *what = kind == META_DIR ? "mkdir" : "symlink";
	int64_t now = util_now_ns();
	struct meta_attr attr;
	struct meta_entry e;
	struct inode *in;
	int r;

	r = util_name_validate(name);
	if (r < 0) {
		fs_reply_err(req, r);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	r = fs_pending_find(fs, parent, name) ? -EEXIST : 0;
	fs_new_attr(fs, req, parent, kind, mode, now, &attr);
	pthread_mutex_unlock(&fs->lock);
	if (r == 0)
		r = kind == META_DIR ? meta_mkdir_attr(fs->meta, parent, name, now, &attr, &e)
				     : meta_symlink(fs->meta, parent, name, target, now, &attr, &e);
	if (r < 0) {
		fs_reply_err_at(req, r, what, parent, name);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	/* a new directory changes the parent's link count */
	fs_dir_touched_locked(fs, parent, kind == META_DIR);
	if (kind == META_DIR)
		fs_dcache_put(fs, parent, name, META_DIR, e.id);
	in = fs_inode_get(fs, e.id, kind);
	if (!in) {
		pthread_mutex_unlock(&fs->lock);
		fs_reply_err(req, -ENOMEM);
		return;
	}
	fs_inode_update(fs, in, &e);
	fs_reply_entry_unlock(req, fs, in);
}

void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	make_entry(req, parent, name, META_DIR, mode, NULL);
}

void fs_op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
	/* a link's own mode is always 0777: its target's decides */
	make_entry(req, parent, name, META_LINK, 0777, target);
}

void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct fs *fs = fuse_req_userdata(req);
	struct meta_attr base;
	struct meta_entry e;
	struct inode *in;
	int r;

	r = util_name_validate(newname);
	if (r < 0) {
		fs_reply_err(req, r);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find_settled(fs, ino);
	if (!in) {
		r = -ESTALE;
	} else if (in->kind != META_FILE) {
		r = -EPERM; /* directories and symbolic links have one name */
	} else if (in->pending || !in->sealed) {
		/* it has no name in Redis before its seal */
		log_msg_limited(&link_rl, LOGL_INFO,
				"refusing a second name for object %" PRIu64
				" while it is being written: it may have more once it is closed",
				(uint64_t)ino);
		r = -EPERM;
	} else if (fs_pending_find(fs, newparent, newname)) {
		r = -EEXIST;
	} else {
		fs_shown_attr(fs, in, &base);
	}
	pthread_mutex_unlock(&fs->lock);
	if (r == 0)
		r = meta_link(fs->meta, ino, newparent, newname, &base, &e);
	if (r < 0) {
		fs_reply_err_at(req, r, "link", newparent, newname);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	fs_dir_touched_locked(fs, newparent, false);
	in = fs_inode_get(fs, ino, META_FILE);
	if (!in) {
		pthread_mutex_unlock(&fs->lock);
		fs_reply_err(req, -ENOMEM);
		return;
	}
	fs_inode_attr_changed(fs, in);
	fs_inode_update(fs, in, &e);
	fs_reply_entry_unlock(req, fs, in);
}

void fs_op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = fuse_req_userdata(req);
	char *buf = malloc(META_LINK_MAX + 1);
	int r;

	/* the kernel keeps it (FUSE_CAP_CACHE_SYMLINKS): a link's target
	 * never changes */
	r = buf ? meta_readlink(fs->meta, ino, buf, META_LINK_MAX + 1) : -ENOMEM;
	if (r < 0)
		fs_reply_err_at(req, r == -ENOENT ? -ESTALE : r, "readlink", ino, NULL);
	else
		fuse_reply_readlink(req, buf);
	free(buf);
}

void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fuse_req_userdata(req);
	int r;

	r = meta_rmdir(fs->meta, parent, name, NULL);
	if (r == 0) {
		fs_dcache_forget(fs, parent, name);
		fs_dir_touched(fs, parent, true);
	}
	fs_reply_err_at(req, r < 0 ? r : 0, "rmdir", parent, name);
}

/* Mark a pending file gone: it is discarded at its last release, or now
 * if nobody has it open.  Called with fs->lock held. */
static struct pending *pending_drop(struct fs *fs, struct pending *p)
{
	p->unlinked = true;
	/* a seal waiting for its retry stays listed: the retry discards it */
	if (p->seal_retry)
		return NULL;
	fs_pending_remove(fs, p);
	if (p->opens == 0 && !p->sealing) {
		struct inode *in = fs_inode_find(fs, p->id);

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
		p = fs_pending_find(fs, parent, name);
		if (!p || !p->sealing || p->seal_retry)
			return p;
		fs_pending_settle_locked(fs, p); /* may free p */
	}
	return NULL;
}

void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fuse_req_userdata(req);
	struct pending *p, *dead = NULL;
	struct inode *in;
	uint64_t id;
	int r;

	pthread_mutex_lock(&fs->lock);
	p = pending_find_settled(fs, parent, name);
	if (p && !p->replace) {
		dead = pending_drop(fs, p);
		pthread_mutex_unlock(&fs->lock);
		fs_pending_free(fs, dead);
		fs_reply_err(req, 0);
		return;
	}
	if (p)
		dead = pending_drop(fs, p); /* unlinking drops the replacement too */
	pthread_mutex_unlock(&fs->lock);
	fs_pending_free(fs, dead);

	r = meta_unlink(fs->meta, parent, name, &id);
	if (r < 0) {
		fs_reply_err_at(req, r, "unlink", parent, name);
		return;
	}
	fs_dcache_forget(fs, parent, name);
	fs_dir_touched(fs, parent, false);
	if (r == 0) {
		node_unlinked(fs->nd, id); /* its name is gone */
	} else {
		/* one of its names: it lives on, with one name less */
		pthread_mutex_lock(&fs->lock);
		in = fs_inode_find(fs, id);
		if (in) {
			in->attr_stale = true;
			fs_inode_attr_changed(fs, in);
		}
		pthread_mutex_unlock(&fs->lock);
	}
	fs_reply_err(req, 0);
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
	if (fs_pending_find(fs, parent, name) != p) {
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
	fs_pending_free(fs, dead);
	return 0;
}

void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		  const char *newname, unsigned int flags)
{
	struct fs *fs = fuse_req_userdata(req);
	unsigned mflags = 0;
	struct pending *p;
	uint64_t replaced = 0;
	int r;

	r = util_name_validate(newname);
	if (r < 0) {
		fs_reply_err(req, r);
		return;
	}
	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		fs_reply_err(req, -EINVAL);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	p = pending_find_settled(fs, parent, name);
	pthread_mutex_unlock(&fs->lock);
	if (p) {
		r = rename_pending(fs, parent, name, newparent, newname, flags);
		if (r != -EAGAIN) {
			fs_reply_err_at(req, r, "rename", parent, name);
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
			log_msg_limited(
			    &rename_rl, LOGL_INFO,
			    "rename of '%s' onto existing '%s' refused: objects are immutable "
			    "and the mount lacks allow_overwrite",
			    name, newname);
		fs_reply_err_at(req, r, "rename", parent, name);
		return;
	}
	fs_dcache_forget(fs, parent, name);
	fs_dcache_forget(fs, newparent, newname);
	pthread_mutex_lock(&fs->lock);
	fs_dir_touched_locked(fs, parent, true);
	fs_dir_touched_locked(fs, newparent, true);
	pthread_mutex_unlock(&fs->lock);
	if (replaced)
		node_unlinked(fs->nd, replaced); /* its name is gone */
	fs_reply_err(req, 0);
	/* the catalog path follows the name */
	node_renamed(fs->nd, newparent, newname);
	if (flags & RENAME_EXCHANGE)
		node_renamed(fs->nd, parent, name);
}
