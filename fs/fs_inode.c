/*
 * fs_inode: the table of inodes the kernel holds references to, the
 * overlay of files being written on this node, the name cache, and the
 * replies built from inodes.
 *
 * An inode lives while the kernel has looked it up (nlookup > 0) or a
 * handle is open on it.  Inode numbers are meta ids, so the same object
 * has the same inode number on every node and across remounts.
 * The name cache (dcache_*) remembers what names meant, past the
 * kernel's FORGET, for lookups while Redis is unreachable.  Directories
 * are kept in an LRU of struct dentry: past DCACHE_MAX entries the least
 * recently used one goes.  Files, of which a node may hold millions, take
 * 16 B each in an open-addressed, set-associative table: a slot is
 * {64-bit hash of (parent, name), id}, and a name lives in one of two
 * buckets of DCACHE_WAYS slots its hash picks, the emptier one (or
 * either, once an entry of a full one moved to its other bucket).  The
 * table doubles (rehashing its keys) once 3/4 of its slots are used, up
 * to DCACHE_FILES_MAX slots; a put into two full buckets that cannot
 * make room then replaces one entry of the first (at a rotating hand),
 * never more.  Only the hash is kept, and two names may share one (see
 * lookup_offline()).
 *
 * The kernel sends RELEASE asynchronously: when FLUSH could not seal an
 * object (see fs_file.c), close(2) returns before it is sealed.
 * Operations that must see the sealed state (an open for write, stat,
 * getxattr) wait briefly in fs_pending_settle_locked() for a pending object
 * whose handles have all been flushed (closed) to settle.
 *
 * Unless a comment says otherwise, functions here are called with fs->lock
 * held.  This file calls no other file of fs/.
 */
#include "fs_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SETTLE_WAIT_MS 500
#define SEAL_WAIT_NS (60 * 1000000000LL)

struct inode *fs_inode_find(struct fs *fs, uint64_t ino)
{
	struct inode *in = NULL;

	HASH_FIND(hh, fs->inodes, &ino, sizeof(ino), in);
	return in;
}

struct inode *fs_inode_get(struct fs *fs, uint64_t ino, enum meta_kind kind)
{
	struct inode *in = fs_inode_find(fs, ino);

	if (in) {
		in->kind = kind;
		return in;
	}
	in = slab_alloc(fs->inode_slab);
	if (!in)
		return NULL;
	in->ino = ino;
	in->kind = kind;
	HASH_ADD(hh, fs->inodes, ino, sizeof(in->ino), in);
	if (fs_inode_find(fs, ino) != in) { /* the table could not grow */
		slab_free(fs->inode_slab, in);
		return NULL;
	}
	return in;
}

static void inode_maybe_free(struct fs *fs, struct inode *in)
{
	/* no handle: no backing id either (fs_file.c closes it at the last
	 * passthrough handle's release) */
	if (in->nlookup || in->handles || in->pending || in->ino == META_ROOT_ID)
		return;
	HASH_DELETE(hh, fs->inodes, in);
	free(in->name);
	slab_free(fs->inode_slab, in);
	fs->inodes_freed++;
}

void fs_inode_set_name(struct inode *in, uint64_t parent, const char *name)
{
	if (in->name && in->parent == parent && !strcmp(in->name, name))
		return;
	free(in->name);
	in->name = strdup(name);
	in->parent = parent;
}

void fs_inode_forget(struct fs *fs, uint64_t ino, uint64_t n)
{
	struct inode *in = fs_inode_find(fs, ino);

	if (!in)
		return;
	in->nlookup = in->nlookup > n ? in->nlookup - n : 0;
	inode_maybe_free(fs, in);
}

void fs_inode_put_handle(struct fs *fs, uint64_t ino)
{
	struct inode *in = fs_inode_find(fs, ino);

	if (!in)
		return;
	if (in->handles)
		in->handles--;
	inode_maybe_free(fs, in);
}

void fs_inode_free_all(struct fs *fs)
{
	struct inode *in, *tmp;

	HASH_ITER (hh, fs->inodes, in, tmp) {
		HASH_DELETE(hh, fs->inodes, in);
		/* the session is gone, and its backing ids with it */
		store_obj_unref(in->pt_obj);
		free(in->name);
		slab_free(fs->inode_slab, in);
	}
}

struct pending *fs_pending_find(struct fs *fs, uint64_t parent, const char *name)
{
	struct pending *p;

	for (p = fs->pending; p; p = p->next)
		if (p->parent == parent && !p->unlinked && !strcmp(p->name, name))
			return p;
	return NULL;
}

void fs_pending_remove(struct fs *fs, struct pending *p)
{
	struct pending **pp;

	for (pp = &fs->pending; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			p->next = NULL;
			return;
		}
	}
}

static void dcache_key(char *buf, size_t len, uint64_t parent, const char *name)
{
	snprintf(buf, len, "%" PRIu64 "/%s", parent, name);
}

static struct dentry *dcache_find(struct fs *fs, uint64_t parent, const char *name)
{
	char key[32 + OBJFS_NAME_MAX];
	struct dentry *d = NULL;

	dcache_key(key, sizeof(key), parent, name);
	HASH_FIND_STR(fs->dcache, key, d);
	return d;
}

static void dcache_unhook(struct fs *fs, struct dentry *d)
{
	if (d->prev)
		d->prev->next = d->next;
	else
		fs->dcache_lru = d->next;
	if (d->next)
		d->next->prev = d->prev;
	else
		fs->dcache_cold = d->prev;
	d->prev = d->next = NULL;
}

/* @d was used now: to the front. */
static void dcache_hook(struct fs *fs, struct dentry *d)
{
	d->prev = NULL;
	d->next = fs->dcache_lru;
	if (fs->dcache_lru)
		fs->dcache_lru->prev = d;
	else
		fs->dcache_cold = d;
	fs->dcache_lru = d;
}

static void dcache_drop(struct fs *fs, struct dentry *d)
{
	dcache_unhook(fs, d);
	HASH_DELETE(hh, fs->dcache, d);
	fs->n_dcache--;
	free(d);
}

/* ---- the file table ---- */

/* murmur3's finalizer: every bit of @h moves every bit of the result */
static uint64_t mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

uint64_t fs_dcache_file_key(uint64_t parent, const char *name)
{
	uint64_t h = mix64(parent ^ 0x9e3779b97f4a7c15ULL);
	size_t len;

	/* FNV-1a over the name, from the parent's mix */
	for (len = 0; name[len]; len++)
		h = (h ^ (unsigned char)name[len]) * 0x100000001b3ULL;
	h = mix64(h ^ len);
	return h ? h : 1;
}

static struct dcache_slot *files_bucket(struct dcache_slot *t, size_t nslots, uint64_t key,
					unsigned which)
{
	return t + dcache_bucket(key, nslots / DCACHE_WAYS, which) * DCACHE_WAYS;
}

static struct dcache_slot *files_find(struct fs *fs, uint64_t key)
{
	unsigned w, i;

	for (w = 0; w < 2 && fs->dcache_nslots; w++) {
		struct dcache_slot *b = files_bucket(fs->dcache_files, fs->dcache_nslots, key, w);

		for (i = 0; i < DCACHE_WAYS; i++)
			if (b[i].key == key)
				return &b[i];
	}
	return NULL;
}

static struct dcache_slot *files_free_slot(struct dcache_slot *b)
{
	unsigned i;

	for (i = 0; i < DCACHE_WAYS; i++)
		if (!b[i].key)
			return &b[i];
	return NULL;
}

/*
 * Put @key (not in @t) in the emptier of its two buckets.  If both are
 * full, an entry of theirs that has room in its other bucket moves there
 * (the table stays nearly lossless up to 3/4 full); failing that, @key
 * goes over the entry at *@hand in the first.  Returns 1 if a free slot
 * took it, 0 if it replaced an entry.
 */
static size_t files_insert(struct dcache_slot *t, size_t nslots, uint64_t key, uint64_t id,
			   unsigned *hand)
{
	struct dcache_slot *b[2], *s = NULL, *alt;
	unsigned used[2] = {0, 0}, w, i;

	for (w = 0; w < 2; w++) {
		b[w] = files_bucket(t, nslots, key, w);
		for (i = 0; i < DCACHE_WAYS; i++)
			used[w] += b[w][i].key != 0;
	}
	w = used[1] < used[0];
	s = files_free_slot(b[w]);
	for (w = 0; !s && w < 2; w++) {
		for (i = 0; i < DCACHE_WAYS; i++) {
			struct dcache_slot *other = files_bucket(t, nslots, b[w][i].key, 0);

			if (other == b[w])
				other = files_bucket(t, nslots, b[w][i].key, 1);
			alt = other == b[w] ? NULL : files_free_slot(other);
			if (alt) {
				*alt = b[w][i];
				s = &b[w][i];
				break;
			}
		}
	}
	if (s) {
		s->key = key;
		s->id = id;
		return 1;
	}
	s = &b[0][(*hand)++ % DCACHE_WAYS];
	s->key = key;
	s->id = id;
	return 0;
}

/* Twice the slots (DCACHE_FILES_MIN at first), the keys rehashed; if
 * that cannot be allocated, the table stays as it is. */
static void files_grow(struct fs *fs)
{
	size_t n = fs->dcache_nslots ? fs->dcache_nslots * 2 : DCACHE_FILES_MIN, kept = 0, i;
	struct dcache_slot *t;

	/* page-aligned, so each bucket is a cache line */
	if (n > DCACHE_FILES_MAX || !(t = util_table_alloc(n * sizeof(*t))))
		return;
	for (i = 0; i < fs->dcache_nslots; i++) {
		struct dcache_slot *s = &fs->dcache_files[i];

		if (s->key)
			kept += files_insert(t, n, s->key, s->id, &fs->dcache_hand);
	}
	util_table_free(fs->dcache_files, fs->dcache_nslots * sizeof(*t));
	fs->dcache_files = t;
	fs->dcache_nslots = n;
	fs->n_dcache_files = kept;
}

static void files_put(struct fs *fs, uint64_t key, uint64_t id)
{
	struct dcache_slot *s = files_find(fs, key);

	if (s) {
		s->id = id;
		return;
	}
	if ((fs->n_dcache_files + 1) * 4 > fs->dcache_nslots * 3)
		files_grow(fs);
	if (fs->dcache_nslots)
		fs->n_dcache_files +=
		    files_insert(fs->dcache_files, fs->dcache_nslots, key, id, &fs->dcache_hand);
}

static void files_del(struct fs *fs, uint64_t key)
{
	struct dcache_slot *s = files_find(fs, key);

	if (s) {
		s->key = 0;
		s->id = 0;
		fs->n_dcache_files--;
	}
}

/* ---- the name cache ---- */

void fs_dcache_put(struct fs *fs, uint64_t parent, const char *name, enum meta_kind kind,
		   uint64_t id)
{
	char key[32 + OBJFS_NAME_MAX];
	struct dentry *d = dcache_find(fs, parent, name);

	/* a name may change kind: it lives in one table only */
	if (kind == META_FILE) {
		if (d)
			dcache_drop(fs, d);
		files_put(fs, fs_dcache_file_key(parent, name), id);
		return;
	}
	files_del(fs, fs_dcache_file_key(parent, name));
	if (d) {
		dcache_unhook(fs, d);
	} else {
		if (fs->n_dcache >= DCACHE_MAX && fs->dcache_cold)
			dcache_drop(fs, fs->dcache_cold);
		dcache_key(key, sizeof(key), parent, name);
		/* one allocation, the key within */
		d = calloc(1, sizeof(*d) + strlen(key) + 1);
		if (!d)
			return; /* only a fallback: losing an entry is fine */
		memcpy(d->key, key, strlen(key) + 1);
		HASH_ADD_KEYPTR(hh, fs->dcache, d->key, strlen(d->key), d);
		if (dcache_find(fs, parent, name) != d) {
			free(d);
			return;
		}
		fs->n_dcache++;
	}
	dcache_hook(fs, d);
	d->kind = kind;
	d->id = id;
}

void fs_dcache_del(struct fs *fs, uint64_t parent, const char *name)
{
	struct dentry *d = dcache_find(fs, parent, name);

	if (d)
		dcache_drop(fs, d);
	files_del(fs, fs_dcache_file_key(parent, name));
}

void fs_dir_touched_locked(struct fs *fs, uint64_t dir, bool counts)
{
	struct inode *in = fs_inode_find(fs, dir);

	if (!in || in->kind != META_DIR)
		return;
	in->dir_mtime = util_now_ns();
	if (counts)
		in->dir_at = 0;
}

void fs_dir_touched(struct fs *fs, uint64_t dir, bool counts)
{
	pthread_mutex_lock(&fs->lock);
	fs_dir_touched_locked(fs, dir, counts);
	pthread_mutex_unlock(&fs->lock);
}

static struct negative *neg_slot(struct fs *fs, uint64_t parent, const char *name)
{
	uint64_t h = parent * 0x9e3779b97f4a7c15ULL;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 0x100000001b3ULL;
	return &fs->neg[h % FS_NEG_SLOTS];
}

void fs_neg_note(struct fs *fs, uint64_t parent, const char *name)
{
	struct negative *n = neg_slot(fs, parent, name);

	n->parent = parent;
	n->at = util_mono_ns();
	snprintf(n->name, sizeof(n->name), "%s", name);
}

bool fs_neg_take(struct fs *fs, uint64_t parent, const char *name)
{
	struct negative *n = neg_slot(fs, parent, name);
	bool fresh = n->at && n->parent == parent && !strcmp(n->name, name) &&
		     util_mono_ns() - n->at <= FS_NEG_TTL_NS;

	n->at = 0;
	return fresh;
}

bool fs_dcache_get(struct fs *fs, uint64_t parent, const char *name, enum meta_kind *ret_kind,
		   uint64_t *ret_id)
{
	struct dentry *d = dcache_find(fs, parent, name);
	struct dcache_slot *s;

	if (d) {
		dcache_unhook(fs, d);
		dcache_hook(fs, d);
		*ret_kind = d->kind;
		*ret_id = d->id;
		return true;
	}
	s = files_find(fs, fs_dcache_file_key(parent, name));
	if (!s)
		return false;
	*ret_kind = META_FILE;
	*ret_id = s->id;
	return true;
}

void fs_dcache_free_all(struct fs *fs)
{
	struct dentry *d, *tmp;

	HASH_ITER (hh, fs->dcache, d, tmp) {
		HASH_DELETE(hh, fs->dcache, d);
		free(d);
	}
	fs->n_dcache = 0;
	fs->dcache_lru = fs->dcache_cold = NULL;
	util_table_free(fs->dcache_files, fs->dcache_nslots * sizeof(*fs->dcache_files));
	fs->dcache_files = NULL;
	fs->dcache_nslots = fs->n_dcache_files = 0;
}

void fs_dcache_learn(struct fs *fs, uint64_t parent, const char *name, enum meta_kind kind,
		     uint64_t id)
{
	pthread_mutex_lock(&fs->lock);
	fs_dcache_put(fs, parent, name, kind, id);
	pthread_mutex_unlock(&fs->lock);
}

void fs_dcache_seen(struct fs *fs, uint64_t parent, const char *name, enum meta_kind kind,
		    uint64_t id)
{
	/* a link is not held here: offline, it could not be read */
	if ((kind == META_FILE && !node_holds(fs->nd, id)) || kind == META_LINK)
		fs_dcache_del(fs, parent, name);
	else
		fs_dcache_put(fs, parent, name, kind, id);
}

void fs_dcache_learn_file(struct fs *fs, uint64_t parent, const char *name, uint64_t id)
{
	pthread_mutex_lock(&fs->lock);
	fs_dcache_seen(fs, parent, name, META_FILE, id);
	pthread_mutex_unlock(&fs->lock);
}

void fs_dcache_forget(struct fs *fs, uint64_t parent, const char *name)
{
	pthread_mutex_lock(&fs->lock);
	fs_dcache_del(fs, parent, name);
	pthread_mutex_unlock(&fs->lock);
}

void fs_inode_update(struct fs *fs, struct inode *in, const struct meta_entry *e)
{
	if (e->kind == META_DIR) {
		in->dir_mtime = e->obj.mtime_ns;
		in->dir_nsub = e->nsub;
		in->dir_at = util_mono_ns();
		in->attr = e->attr;
		in->attr_stale = false;
	} else if (e->kind == META_LINK) {
		in->obj.size = e->obj.size; /* the target's length */
		in->obj.mtime_ns = e->obj.mtime_ns;
		in->attr = e->attr;
		in->attr_stale = false;
	} else if (!in->pending) {
		in->sealed = true;
		fs_inode_set_rec(fs, in, &e->obj);
		in->attr = e->attr;
		in->attr_stale = false;
	}
}

void fs_inode_update_as_of(struct fs *fs, struct inode *in, const struct meta_entry *e,
			   uint64_t seen)
{
	struct meta_attr keep = in->attr;
	bool stale = in->attr_stale;

	fs_inode_update(fs, in, e);
	if (in->attr_seq > seen) {
		in->attr = keep;
		in->attr_stale = stale;
	}
}

void fs_inode_attr_changed(struct fs *fs, struct inode *in)
{
	in->attr_seq = ++fs->attr_seq;
}

/* @name kept once for the fs's life; "" if out of memory (a record
 * without its origin: a fetch then asks Redis for the holders). */
static const char *origin_intern(struct fs *fs, const char *name)
{
	struct origin_name *o;
	size_t len = strnlen(name, OBJFS_NODE_MAX - 1);

	HASH_FIND(hh, fs->origins, name, len, o);
	if (o)
		return o->name;
	o = malloc(sizeof(*o) + len + 1);
	if (!o)
		return "";
	memcpy(o->name, name, len);
	o->name[len] = '\0';
	HASH_ADD_KEYPTR(hh, fs->origins, o->name, len, o);
	if (!o->hh.tbl) {
		free(o);
		return "";
	}
	return o->name;
}

void fs_inode_set_rec(struct fs *fs, struct inode *in, const struct meta_obj *mo)
{
	in->obj.size = mo->size;
	in->obj.mtime_ns = mo->mtime_ns;
	memcpy(in->obj.csum, mo->csum, sizeof(in->obj.csum));
	in->obj.origin = mo->origin[0] ? origin_intern(fs, mo->origin) : "";
}

void fs_inode_get_rec(const struct inode *in, struct meta_obj *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->id = in->ino;
	ret->size = in->obj.size;
	ret->mtime_ns = in->obj.mtime_ns;
	memcpy(ret->csum, in->obj.csum, sizeof(ret->csum));
	snprintf(ret->origin, sizeof(ret->origin), "%s", in->obj.origin ? in->obj.origin : "");
}

void fs_inode_origins_free(struct fs *fs)
{
	struct origin_name *o, *tmp;

	HASH_ITER (hh, fs->origins, o, tmp) {
		HASH_DELETE(hh, fs->origins, o);
		free(o);
	}
}

/* ---- pending objects ---- */

void fs_pending_free(struct fs *fs, struct pending *p)
{
	if (!p)
		return;
	node_discard(fs->nd, p->obj);
	store_obj_unref(p->obj);
	free(p);
}

/* A seal that failed at RELEASE and waits for its retry (seal_retry)
 * is not running: nothing waits for it. */
static bool unsettled(struct pending *p, bool *ret_sealing)
{
	*ret_sealing = p->sealing && !p->seal_retry;
	return *ret_sealing || (p->opens && p->flushed >= p->opens);
}

/*
 * The first case of the wait always ends soon (a checksum and one Redis
 * call, each bounded); the second may be a dup()ed descriptor still in
 * use, so it waits SETTLE_WAIT_MS at most.
 */
struct inode *fs_inode_find_settled(struct fs *fs, uint64_t ino)
{
	struct inode *in = fs_inode_find(fs, ino);

	if (in && in->pending)
		fs_pending_settle_locked(fs, in->pending);
	return fs_inode_find(fs, ino);
}

void fs_pending_settle_locked(struct fs *fs, struct pending *p)
{
	uint64_t id = p->id; /* @p may be freed while we wait */
	struct inode *in = fs_inode_find(fs, id);
	int64_t start = util_mono_ns();
	bool sealing;

	while (in && in->pending == p && unsettled(p, &sealing)) {
		int64_t limit = sealing ? SEAL_WAIT_NS : SETTLE_WAIT_MS * 1000000LL;
		struct timespec until;

		if (util_mono_ns() - start > limit)
			break;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 50 * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&fs->settle, &fs->lock, &until);
		in = fs_inode_find(fs, id);
	}
}

/* ---- replies ---- */

/* A program that retries in a loop must not flood the log: the same line
 * at most once in 10 s, at most 100 lines in 10 s. */
static struct log_ratelimit corrupt_rl =
    LOG_RATELIMIT_INIT("failed requests (corrupt records)", 10000, 100);
static struct log_ratelimit down_rl =
    LOG_RATELIMIT_INIT("failed requests (Redis unreachable)", 10000, 100);
static struct log_ratelimit bug_rl =
    LOG_RATELIMIT_INIT("failed requests (positive errnos)", 10000, 10);

int fs_kernel_errno(struct fs *fs, int r, const char *what, uint64_t parent, const char *name)
{
	const char *url = fs && fs->meta ? meta_url(fs->meta) : "-";

	if (r > 0) {
		/* a bug: the caller meant an error; never answer success */
		log_msg_limited(&bug_rl, LOGL_ERROR,
				"%s: a positive errno (%d) where a negative one was expected: "
				"returning EIO",
				what ? what : "a request", r);
		return EIO;
	}
	if (r == -EBADMSG) {
		log_msg_limited(&corrupt_rl, LOGL_ERROR,
				"corrupt record in Redis (%s) while handling %s of '%s' in "
				"directory %" PRIu64 ": returning EIO",
				url, what ? what : "a request", name ? name : "", parent);
		return EIO;
	}
	if (r == -EIO && what)
		log_msg_limited(&down_rl, LOGL_WARN,
				"%s of '%s' in directory %" PRIu64
				" failed: Redis at %s is unreachable",
				what, name ? name : "", parent, url);
	return -r;
}

void fs_reply_err_at(fuse_req_t req, int r, const char *what, uint64_t parent, const char *name)
{
	fuse_reply_err(req, fs_kernel_errno(fuse_req_userdata(req), r, what, parent, name));
}

void fs_reply_err(fuse_req_t req, int r)
{
	fs_reply_err_at(req, r, NULL, 0, NULL);
}

int fs_open_errno(int r)
{
	/* what a fetch or a local open may say that means something to the
	 * opener: the object is gone, there is no room for it, it is too
	 * big, memory; anything else (a peer, the wire, Redis) is EIO */
	if (r >= 0 || r == -ENOENT || r == -ENOSPC || r == -EFBIG || r == -ENOMEM)
		return r;
	return -EIO;
}

/* @ns in a timespec: tv_nsec is never negative, so a time before the
 * epoch rounds its seconds down */
static void set_time(struct timespec *ts, int64_t ns)
{
	int64_t sec = ns / 1000000000LL, nsec = ns % 1000000000LL;

	if (nsec < 0) {
		nsec += 1000000000LL;
		sec--;
	}
	ts->tv_sec = sec;
	ts->tv_nsec = nsec;
}

void fs_default_attr(struct fs *fs, enum meta_kind kind, int64_t mtime_ns, struct meta_attr *ret)
{
	*ret = (struct meta_attr){.set = true,
				  .uid = fs->cfg.uid,
				  .gid = fs->cfg.gid,
				  .mode = (kind == META_DIR ? 0777 : 0666) & ~fs->cfg.umask,
				  .atime_ns = mtime_ns,
				  .ctime_ns = mtime_ns};
}

void fs_shown_attr(struct fs *fs, const struct inode *in, struct meta_attr *ret)
{
	int64_t mtime = in->kind == META_DIR ? in->dir_mtime : in->obj.mtime_ns;

	if (in->attr.set)
		*ret = in->attr;
	else
		fs_default_attr(fs, in->kind, mtime, ret);
}

void fs_new_attr(struct fs *fs, fuse_req_t req, uint64_t parent, enum meta_kind kind, mode_t mode,
		 int64_t now, struct meta_attr *ret)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct inode *dir = fs_inode_find(fs, parent);
	struct meta_attr da;

	*ret = (struct meta_attr){.set = true,
				  .uid = ctx->uid,
				  .gid = ctx->gid,
				  .mode = mode & 07777,
				  .atime_ns = now,
				  .ctime_ns = now};
	/* a set-group-ID directory gives its group, and its bit to
	 * directories (as ext4 and tmpfs do) */
	if (dir && dir->kind == META_DIR) {
		fs_shown_attr(fs, dir, &da);
		if (da.mode & S_ISGID) {
			ret->gid = da.gid;
			if (kind == META_DIR)
				ret->mode |= S_ISGID;
		}
	}
}

void fs_fill_attr(struct fs *fs, struct inode *in, struct stat *st)
{
	struct meta_attr a;
	int64_t mtime;

	memset(st, 0, sizeof(*st));
	st->st_ino = in->ino;
	st->st_blksize = 1 << 20;
	if (in->kind == META_DIR) {
		fs_shown_attr(fs, in, &a);
		st->st_mode = S_IFDIR;
		st->st_nlink = 2 + in->dir_nsub;
		st->st_size = 4096;
		st->st_blocks = 8;
		mtime = in->dir_mtime;
		/* an entry made or removed moves the mtime, and the ctime */
		if (a.ctime_ns < mtime)
			a.ctime_ns = mtime;
	} else if (in->kind == META_LINK) {
		fs_shown_attr(fs, in, &a);
		a.mode = 0777; /* as Linux shows every link */
		st->st_mode = S_IFLNK;
		st->st_nlink = 1;
		st->st_size = (off_t)in->obj.size;
		mtime = in->obj.mtime_ns;
	} else if (in->pending) {
		const struct node_meta *md = &in->pending->md;
		uint64_t size = store_obj_size(in->pending->obj);

		mtime = md->mtime_set ? md->mtime_ns : util_now_ns();
		a = md->attr;
		if (!a.set)
			fs_default_attr(fs, META_FILE, mtime, &a);
		a.atime_ns = md->atime_set ? md->atime_ns : mtime;
		a.ctime_ns = mtime;
		st->st_mode = S_IFREG;
		st->st_nlink = 1;
		st->st_size = (off_t)size;
		st->st_blocks =
		    (blkcnt_t)((size + STORE_PAGE - 1) / STORE_PAGE * (STORE_PAGE / 512));
	} else {
		fs_shown_attr(fs, in, &a);
		/* sealed bytes never change: no write bits.  With
		 * allow_overwrite the name may be given to a new object by an
		 * O_TRUNC open, which the kernel checks against these bits
		 * (default_permissions) */
		if (!fs->cfg.allow_overwrite)
			a.mode &= ~0222u;
		st->st_mode = S_IFREG;
		st->st_nlink = a.nlink > 1 ? a.nlink : 1; /* its names */
		st->st_size = (off_t)in->obj.size;
		st->st_blocks =
		    (blkcnt_t)((in->obj.size + STORE_PAGE - 1) / STORE_PAGE * (STORE_PAGE / 512));
		mtime = in->obj.mtime_ns;
	}
	st->st_mode |= a.mode & 07777;
	st->st_uid = a.uid;
	st->st_gid = a.gid;
	set_time(&st->st_mtim, mtime);
	set_time(&st->st_atim, a.atime_ns);
	set_time(&st->st_ctim, a.ctime_ns);
}

double fs_attr_timeout(const struct inode *in)
{
	if (in->kind == META_DIR)
		return FS_DIR_ATTR_TIMEOUT;
	/* a pending file's size and mode change at seal: never cache them */
	return in->pending ? 0.0 : FS_FILE_ATTR_TIMEOUT;
}

void fs_fill_entry(struct fs *fs, struct inode *in, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = in->ino;
	e->generation = 1;
	fs_fill_attr(fs, in, &e->attr);
	e->attr_timeout = fs_attr_timeout(in);
	e->entry_timeout = FS_ENTRY_TIMEOUT;
}

int fs_reply_entry_unlock(fuse_req_t req, struct fs *fs, struct inode *in)
{
	struct fuse_entry_param e;

	in->nlookup++;
	fs_fill_entry(fs, in, &e);
	pthread_mutex_unlock(&fs->lock);
	return fuse_reply_entry(req, &e);
}

/* ESTALE if the kernel asks about an inode we do not have, ENOENT for a
 * write that was discarded. */
void fs_reply_attr(fuse_req_t req, struct fs *fs, fuse_ino_t ino)
{
	struct inode *in;
	struct stat st;
	double timeout;

	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find(fs, ino);
	if (in && in->kind == META_FILE && in->pending)
		fs_pending_settle_locked(fs, in->pending);
	if (!in || (in->kind == META_FILE && !in->pending && !in->sealed)) {
		pthread_mutex_unlock(&fs->lock);
		fs_reply_err(req, in ? -ENOENT : -ESTALE);
		return;
	}
	fs_fill_attr(fs, in, &st);
	timeout = fs_attr_timeout(in);
	pthread_mutex_unlock(&fs->lock);
	fuse_reply_attr(req, &st, timeout);
}
