/*
 * store_files: the object files, the filesystem they live on, and the
 * pool of freed files.
 *
 * The filesystem.  Every object is its own file in DIR/data.  If DIR is
 * itself a tmpfs or hugetlbfs mount (the user's), data/ is a plain
 * directory on it.  Otherwise the store mounts a tmpfs on DIR/data
 * (source "objfs-store", huge=within_size so that a file of 2 MiB and
 * more gets huge pages, size = capacity plus a little), or finds the one
 * an earlier run mounted, and resizes it to the capacity; where it may
 * not mount (not root), data/ is a plain directory.  The capacity itself
 * is counted here, not by the filesystem: an object is charged its alloc
 * (store_i.h), the pool its files' lengths, and the sum never passes the
 * capacity.  On its own tmpfs the store also measures the pages of
 * deleted objects that someone else still maps (store_files_held_i()),
 * and takes them from the free capacity as well.
 *
 * An object's file.  Pending, it is data/<id>, as long as o->alloc and
 * mapped read-write; growth charges the capacity first, then lengthens
 * the file, allocates its pages (fallocate: a full filesystem says
 * ENOSPC here rather than SIGBUS on a store to the mapping), and maps it
 * again, populating the page tables in one call.  Sealed, it is cut to
 * the object's size (whole huge pages on hugetlbfs, which cannot do
 * better), chmod 0400 and mapped read-only.  At unlink it becomes
 * data/.gone-<n> (a new object may take the id while readers still use
 * it); when the last reference goes it becomes data/.free-<n> in the
 * pool, or is deleted.
 *
 * The pool.  A freed file of STORE_POOL_MIN bytes or more keeps its
 * pages and goes to the pool if nobody else holds it open (file_alone():
 * a passthrough mmap maps the store file itself and outlives the
 * handle's RELEASE, and even the daemon that served it).  An object that
 * needs at least STORE_POOL_MIN bytes takes the smallest pooled file that
 * holds it (cutting off the rest), else the largest that holds half of
 * it (and grows it).  Pooled files are the first thing given up when the
 * capacity runs short.  store_prefault() fills the pool with the free
 * capacity, in files of halving sizes (a half, a quarter, ...), so that
 * most objects find one that fits them within a factor of two.
 */
#define _GNU_SOURCE /* fallocate, statx */
#include "store_i.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "log.h"

#ifndef STATX_ATTR_MOUNT_ROOT
#define STATX_ATTR_MOUNT_ROOT 0x00002000
#endif

/* tmpfs size beyond the capacity: a prefault step given up by a writer is
 * still allocated for a moment (see charge_locked()) */
#define STORE_TMPFS_SLACK ((16ULL << 20) + PREFAULT_STEP)
#define STORE_TMPFS_SOURCE "objfs-store"

static struct log_ratelimit file_rl =
    LOG_RATELIMIT_INIT("object files that could not be made or mapped", 10000, 5);
static struct log_ratelimit inode_rl =
    LOG_RATELIMIT_INIT("object files refused for the store's inodes", 10000, 1);

static uint64_t round_up(uint64_t n, uint64_t unit);

/* What sealed @o's mapping covers: its size in whole pages (whole huge
 * pages on hugetlbfs).  A function of the size, kept nowhere (8 B an
 * object at rest); a pending object's is o->w->map_len. */
static uint64_t sealed_map_len(const struct store_obj *o)
{
	const struct store *s = obj_store(o);
	uint64_t size = atomic_load_explicit(&o->size, memory_order_relaxed);

	return round_up(s->kind == STORE_FS_HUGETLBFS ? round_up(size, s->unit) : size, STORE_PAGE);
}

/* @o's mapping length, pending or sealed: o->lock held, or the last
 * reference (a sealed object's w is gone by then). */
static uint64_t map_len_of(const struct store_obj *o)
{
	return o->w ? o->w->map_len : sealed_map_len(o);
}

static uint64_t round_up(uint64_t n, uint64_t unit)
{
	return (n + unit - 1) / unit * unit;
}

const char *store_fs_name(enum store_fs fs)
{
	switch (fs) {
	case STORE_FS_OWN_TMPFS:
		return "tmpfs (mounted by objfs, huge=within_size)";
	case STORE_FS_TMPFS:
		return "tmpfs (the user's)";
	case STORE_FS_HUGETLBFS:
		return "hugetlbfs (the user's, on DIR/data)";
	case STORE_FS_DIR:
		break;
	}
	return "directory (no tmpfs of its own)";
}

void store_file_name_i(uint64_t id, char buf[STORE_ID_HEX + 1])
{
	snprintf(buf, STORE_ID_HEX + 1, "%016" PRIx64, id);
}

void store_files_seq_name_i(const char *prefix, uint64_t seq, char *buf, size_t len)
{
	snprintf(buf, len, "%s%016" PRIx64, prefix, seq);
}

/* ---- the filesystem ---- */

/* Is @fd the root of a mount?  statx() knows since Linux 5.8; before
 * that, a device different from the parent's says so. */
static bool is_mount_root(int fd)
{
	struct statx stx;
	struct stat a, b;

	if (statx(fd, "", AT_EMPTY_PATH, 0, &stx) == 0 &&
	    (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return stx.stx_attributes & STATX_ATTR_MOUNT_ROOT;
	if (fstat(fd, &a) < 0 || fstatat(fd, "..", &b, 0) < 0)
		return false;
	return a.st_dev != b.st_dev;
}

/* data/, listed (closedir() it); NULL if it cannot be read. */
static DIR *data_list(struct store *s)
{
	int fd = openat(s->data_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;

	if (fd < 0)
		return NULL;
	d = fdopendir(fd);
	if (!d)
		close(fd);
	return d;
}

/* Mount (or resize) the store's tmpfs on @path.  0 or -errno. */
static int mount_tmpfs(const char *path, uint64_t capacity, bool remount)
{
	unsigned long flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
	char opts[128];
	uint64_t size = capacity + STORE_TMPFS_SLACK;

	if (remount) {
		snprintf(opts, sizeof(opts), "size=%" PRIu64, size);
		return mount(NULL, path, NULL, MS_REMOUNT | flags, opts) < 0 ? -errno : 0;
	}
	snprintf(opts, sizeof(opts), "size=%" PRIu64 ",mode=0700,huge=within_size", size);
	if (mount(STORE_TMPFS_SOURCE, path, "tmpfs", flags, opts) == 0)
		return 0;
	if (errno != EINVAL)
		return -errno;
	/* a kernel without transparent huge pages for tmpfs */
	snprintf(opts, sizeof(opts), "size=%" PRIu64 ",mode=0700", size);
	return mount(STORE_TMPFS_SOURCE, path, "tmpfs", flags, opts) < 0 ? -errno : 0;
}

/* Set up data/ when DIR is not a tmpfs of its own: a hugetlbfs (or a
 * tmpfs) mounted there, else, with @own_tmpfs, the store's own tmpfs. */
static int open_own_tmpfs(struct store *s, const char *dir, bool own_tmpfs)
{
	char path[4096];
	struct statfs sf;
	int r;

	r = store_subdir_open_i(s->dir_fd, "data", &s->data_fd);
	if (r < 0)
		return r;
	s->kind = STORE_FS_DIR;
	if ((size_t)snprintf(path, sizeof(path), "%s/data", dir) >= sizeof(path))
		return -ENAMETOOLONG;
	if (is_mount_root(s->data_fd)) {
		if (fstatfs(s->data_fd, &sf) < 0)
			return -errno;
		if (sf.f_type == HUGETLBFS_MAGIC) {
			s->kind = STORE_FS_HUGETLBFS;
			return 0;
		}
		if (sf.f_type != TMPFS_MAGIC) {
			log_warn("store: %s is a mount of another kind: used as a plain directory",
				 path);
			return 0;
		}
		s->kind = STORE_FS_OWN_TMPFS;
		if (!own_tmpfs)
			return 0;
		/* an earlier run's: fit it to this capacity */
		r = mount_tmpfs(path, s->capacity, true);
		if (r < 0)
			log_warn("store: cannot resize the tmpfs on %s: %s", path, strerror(-r));
		return 0;
	}
	if (!own_tmpfs)
		return 0;
	r = mount_tmpfs(path, s->capacity, false);
	if (r < 0) {
		log_warn("store: cannot mount a tmpfs on %s (%s): objects live in a plain "
			 "directory, on 4 KiB pages",
			 path, strerror(-r));
		return 0;
	}
	close(s->data_fd);
	s->data_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->data_fd < 0)
		return -errno;
	s->kind = STORE_FS_OWN_TMPFS;
	return 0;
}

/* Take the pool files an earlier run left (data/.free-<n>). */
static void pool_adopt(struct store *s)
{
	struct dirent *de;
	struct stat st;
	uint64_t seq;
	char *end;
	DIR *d;

	d = data_list(s);
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, FREE_PREFIX, strlen(FREE_PREFIX)))
			continue;
		seq = strtoull(de->d_name + strlen(FREE_PREFIX), &end, 16);
		if (*end)
			continue;
		if (fstatat(s->data_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode) && (uint64_t)st.st_size >= STORE_POOL_MIN &&
		    st.st_size % (off_t)s->unit == 0 && s->npool < STORE_POOL_MAX) {
			s->pool[s->npool++] = (struct store_pooled){(uint64_t)st.st_size, seq};
			s->pool_bytes += (uint64_t)st.st_size;
			if (seq >= s->seq)
				s->seq = seq + 1;
			continue;
		}
		unlinkat(s->data_fd, de->d_name, 0);
	}
	closedir(d);
}

int store_files_open_i(struct store *s, const char *dir, bool own_tmpfs)
{
	struct statfs sf;
	int r;

	if (fstatfs(s->dir_fd, &sf) < 0)
		return -errno;
	if (sf.f_type == HUGETLBFS_MAGIC) {
		/* no write(2) there: records and notes cannot be written */
		log_error("store: %s is on a hugetlbfs, which holds only mappable files; mount "
			  "the hugetlbfs on %s/data instead",
			  dir, dir);
		return -EMEDIUMTYPE;
	}
	if (sf.f_type == TMPFS_MAGIC && is_mount_root(s->dir_fd)) {
		r = store_subdir_open_i(s->dir_fd, "data", &s->data_fd);
		if (r < 0)
			return r;
		s->kind = STORE_FS_TMPFS;
	} else {
		r = open_own_tmpfs(s, dir, own_tmpfs);
		if (r < 0)
			return r;
	}
	s->unit = STORE_PAGE;
	if (s->kind == STORE_FS_HUGETLBFS) {
		if (fstatfs(s->data_fd, &sf) < 0)
			return -errno;
		s->unit = (uint64_t)sf.f_bsize;
		if (s->unit < STORE_PAGE || (s->unit & (s->unit - 1)))
			return -EINVAL;
	}
	s->capacity = s->capacity / s->unit * s->unit;
	if (s->capacity < s->unit)
		return -EINVAL;
	log_debug("store: objects in %s/data: %s", dir, store_fs_name(s->kind));
	pool_adopt(s);
	return 0;
}

void store_files_close_i(struct store *s)
{
	s->npool = 0;
	if (s->data_fd >= 0)
		close(s->data_fd);
	s->data_fd = -1;
}

/* Is @name the file of a linked object, or of the pool?  s->lock held or
 * single threaded. */
static bool file_claimed(struct store *s, const char *name)
{
	struct store_obj *o;
	uint64_t id;
	char *end;
	size_t i;

	if (!strncmp(name, FREE_PREFIX, strlen(FREE_PREFIX))) {
		uint64_t seq = strtoull(name + strlen(FREE_PREFIX), &end, 16);

		for (i = 0; i < s->npool; i++)
			if (s->pool[i].seq == seq)
				return true;
		return false;
	}
	if (strlen(name) != STORE_ID_HEX)
		return true; /* not one of ours: left alone */
	id = strtoull(name, &end, 16);
	if (*end)
		return true;
	o = store_tab_find_i(&s->table, id);
	return o != NULL;
}

void store_files_sweep_i(struct store *s)
{
	struct dirent *de;
	DIR *d;

	d = data_list(s);
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (de->d_name[0] == '.' && strncmp(de->d_name, GONE_PREFIX, strlen(GONE_PREFIX)) &&
		    strncmp(de->d_name, FREE_PREFIX, strlen(FREE_PREFIX)))
			continue;
		if (file_claimed(s, de->d_name))
			continue;
		log_debug("store: deleting data/%s, which no record claims", de->d_name);
		unlinkat(s->data_fd, de->d_name, 0);
	}
	closedir(d);
}

/*
 * The inodes of data/'s filesystem: every object's file takes one, and
 * so do pooled and gone files.  0 and 0 when it has no such limit (a
 * tmpfs with nr_inodes=0 says f_files 0) or cannot tell.  No lock:
 * data_fd is fixed while the store is open.
 */
void store_files_inodes_i(struct store *s, uint64_t *ret_total, uint64_t *ret_free)
{
	struct statvfs sv;

	*ret_total = *ret_free = 0;
	if (s->data_fd < 0 || fstatvfs(s->data_fd, &sv) < 0 || !sv.f_files)
		return;
	*ret_total = (uint64_t)sv.f_files;
	*ret_free = (uint64_t)sv.f_ffree < *ret_total ? (uint64_t)sv.f_ffree : *ret_total;
}

/* A new file was refused (-@err): name the store filesystem's inodes
 * when they ran out, else the error. */
static void say_no_file(struct store *s, const char *name, int err)
{
	uint64_t total, left, n;

	if (err == ENOSPC) {
		store_files_inodes_i(s, &total, &left);
		if (total && !left) {
			pthread_mutex_lock(&s->lock);
			n = s->nall;
			pthread_mutex_unlock(&s->lock);
			log_msg_limited(&inode_rl, LOGL_WARN,
					"store: the store's filesystem has no inode left (%" PRIu64
					" objects): new objects cannot be written or fetched "
					"until some go",
					n);
			return;
		}
	}
	log_msg_limited(&file_rl, LOGL_WARN, "store: cannot create data/%s: %s", name,
			strerror(err));
}

/* ---- capacity and the pool (s->lock held) ---- */

/* Capacity taken: by objects, the pool, a prefault, and pages of deleted
 * objects still mapped (as last measured).  May pass the capacity. */
static uint64_t taken_locked(const struct store *s)
{
	return s->used + s->pool_bytes + s->prefault_hold + s->held;
}

/* Capacity nobody holds. */
uint64_t store_files_free_locked_i(const struct store *s)
{
	uint64_t taken = taken_locked(s);

	return s->capacity > taken ? s->capacity - taken : 0;
}

/*
 * What the filesystem holds for the store's own files, as far as the
 * store knows: objects' charges, the pool, a running prefault's file,
 * files being deleted (limbo), and pages sealed objects hold beyond
 * their charge.  Every change that allocates pages counts them here
 * first, and every one that frees pages uncounts them only after they
 * are gone, so this is never less than what those files hold.
 */
static uint64_t known_locked(const struct store *s)
{
	return s->used + s->pool_bytes + max_u64(s->prefault_hold, s->prefault_alloc) + s->limbo +
	       s->extra;
}

/*
 * Pages of deleted objects that someone else still maps or holds open
 * (a passthrough mmap maps an object's file itself, and outlives the FUSE
 * handle and even the daemon): the store let go of them, the tmpfs still
 * holds them.  The store's own tmpfs holds only data/ (catalog records
 * and notes live in DIR), so
 *
 *	held = tmpfs used - known_locked()
 *
 * where tmpfs used is statfs's (f_blocks - f_bfree) pages, which counts
 * huge pages as the pages they span.  Pooled and prefaulted files are in
 * known_locked() (the pool), and so are huge page tails a seal could not
 * split (extra).  known_locked() is read before and after the statfs and
 * the larger taken, so that a file allocated or freed meanwhile is not
 * taken for held pages.  Elsewhere (a user's tmpfs, shared with the
 * catalog and anything else; hugetlbfs; a plain directory) 0: the
 * filesystem's use says nothing about the store's files alone.
 */
uint64_t store_files_held_i(struct store *s)
{
	uint64_t before, after, fs_used, held;
	struct statfs sf;

	if (s->kind != STORE_FS_OWN_TMPFS)
		return 0;
	pthread_mutex_lock(&s->lock);
	before = known_locked(s);
	pthread_mutex_unlock(&s->lock);
	if (fstatfs(s->data_fd, &sf) < 0 || sf.f_blocks < sf.f_bfree)
		return 0;
	fs_used = (uint64_t)(sf.f_blocks - sf.f_bfree) * (uint64_t)sf.f_bsize;
	pthread_mutex_lock(&s->lock);
	after = max_u64(before, known_locked(s));
	s->held = fs_used > after ? fs_used - after : 0;
	held = s->held;
	pthread_mutex_unlock(&s->lock);
	return held;
}

/* Take pool entry @i out of the pool into *@ret. */
static void pool_take_locked(struct store *s, size_t i, struct store_pooled *ret)
{
	*ret = s->pool[i];
	s->pool_bytes -= s->pool[i].len;
	s->pool[i] = s->pool[--s->npool];
}

/* Take pool entry @i out of the pool into @drop[*@ndrop], to be deleted
 * by drop_files(); its pages are in limbo until then. */
static void pool_drop_locked(struct store *s, size_t i, struct store_pooled *drop, size_t *ndrop)
{
	pool_take_locked(s, i, &drop[*ndrop]);
	s->limbo += drop[(*ndrop)++].len;
}

/*
 * Charge @n bytes to the capacity (for @o, or the store's own use if
 * NULL), giving up pooled files (largest first)
 * if that is what it takes; they are moved to @drop (*@ndrop of them) for
 * the caller to delete once it has let go of s->lock.  -ENOSPC.
 */
static int charge_locked(struct store *s, struct store_obj *o, uint64_t n,
			 struct store_pooled *drop, size_t *ndrop)
{
	while (store_files_free_locked_i(s) < n && s->npool) {
		size_t i, big = 0;

		for (i = 1; i < s->npool; i++)
			if (s->pool[i].len > s->pool[big].len)
				big = i;
		pool_drop_locked(s, big, drop, ndrop);
	}
	if (store_files_free_locked_i(s) < n && s->prefault_hold) {
		/* objects first: the prefault gives up the file it makes */
		s->prefault_cancel = true;
		s->prefault_hold = 0;
	}
	if (store_files_free_locked_i(s) < n)
		return -ENOSPC;
	s->used += n;
	if (o && !o->linked)
		s->draining += n;
	return 0;
}

static void uncharge_locked(struct store *s, struct store_obj *o, uint64_t n)
{
	s->used -= n;
	if (o && !o->linked)
		s->draining -= n;
}

static void drop_files(struct store *s, struct store_pooled *drop, size_t n);

static bool held_changed(struct store *s);

int store_files_charge_i(struct store *s, uint64_t n)
{
	struct store_pooled drop[STORE_POOL_MAX];
	size_t ndrop = 0;
	int r, tries;

	/* pages of deleted objects still mapped, measured a while ago, may
	 * have gone meanwhile: measured again, and tried once more */
	for (tries = 0; tries < 2; tries++) {
		pthread_mutex_lock(&s->lock);
		r = charge_locked(s, NULL, n, drop, &ndrop);
		pthread_mutex_unlock(&s->lock);
		drop_files(s, drop, ndrop);
		ndrop = 0;
		if (r != -ENOSPC || !held_changed(s))
			break;
	}
	return r;
}

void store_files_uncharge_i(struct store *s, uint64_t n)
{
	pthread_mutex_lock(&s->lock);
	uncharge_locked(s, NULL, n);
	pthread_mutex_unlock(&s->lock);
}

/* Delete pooled files given up under s->lock, and take them out of
 * limbo once their pages are gone.  No lock held. */
static void drop_files(struct store *s, struct store_pooled *drop, size_t n)
{
	uint64_t bytes = 0;
	char name[32];
	size_t i;

	for (i = 0; i < n; i++) {
		store_files_seq_name_i(FREE_PREFIX, drop[i].seq, name, sizeof(name));
		unlinkat(s->data_fd, name, 0);
		bytes += drop[i].len;
	}
	if (!bytes)
		return;
	pthread_mutex_lock(&s->lock);
	s->limbo -= bytes;
	pthread_mutex_unlock(&s->lock);
}

/* Allocate the pages of [@from, @to) of @fd.  0 or -errno. */
static int file_allocate(int fd, uint64_t from, uint64_t to)
{
	if (fallocate(fd, 0, (off_t)from, (off_t)(to - from)) < 0 && errno != EOPNOTSUPP)
		return -errno;
	return 0;
}

/*
 * Measure the pages of deleted objects still mapped again (they come
 * when such an object is freed, and go when its last mapping does,
 * which nobody tells the store): true if that changed them.
 */
static bool held_changed(struct store *s)
{
	uint64_t before;

	pthread_mutex_lock(&s->lock);
	before = s->held;
	pthread_mutex_unlock(&s->lock);
	return store_files_held_i(s) != before;
}

/* The pooled file for an object of @need bytes (see the top), or -1. */
static ssize_t pool_pick_locked(struct store *s, uint64_t need)
{
	ssize_t best = -1, big = -1;
	size_t i;

	if (need < STORE_POOL_MIN)
		return -1;
	for (i = 0; i < s->npool; i++) {
		uint64_t len = s->pool[i].len;

		if (len >= need && (best < 0 || len < s->pool[best].len))
			best = (ssize_t)i;
		if (len >= need / 2 && (big < 0 || len > s->pool[big].len))
			big = (ssize_t)i;
	}
	return best >= 0 ? best : big;
}

/* ---- an object's file ---- */

/* Give @o a file for @goal bytes: a pooled one if one fits, else a new
 * one.  Sets o->fd and *@ret_len to the file's current length. */
static int file_get(struct store_obj *o, uint64_t goal, uint64_t *ret_len)
{
	struct store *s = obj_store(o);
	struct store_pooled got = {0, 0};
	char name[32], from[32];
	bool gone;
	ssize_t i;
	int fd;

	pthread_mutex_lock(&s->lock);
	/* unlinked before it had a file (a write discarded, a fetch of an
	 * object deleted meanwhile): data/<id> may be another object's by
	 * now, so it gets its gone name at once */
	gone = o->unlinked;
	if (gone)
		o->gone_seq = s->seq++;
	i = pool_pick_locked(s, goal);
	if (i >= 0) {
		pool_take_locked(s, (size_t)i, &got);
		/* its bytes are the object's now, up to its length */
		s->used += got.len;
		if (!o->linked)
			s->draining += got.len;
		s->files_reused++;
	} else {
		s->files_new++;
	}
	pthread_mutex_unlock(&s->lock);
	if (gone)
		store_files_seq_name_i(GONE_PREFIX, o->gone_seq, name, sizeof(name));
	else
		store_file_name_i(o->id, name);
	if (got.len) {
		store_files_seq_name_i(FREE_PREFIX, got.seq, from, sizeof(from));
		fd = -1;
		if (renameat(s->data_fd, from, s->data_fd, name) == 0) {
			fd = openat(s->data_fd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
			if (fd >= 0) {
				o->fd = fd;
				o->has_file = true;
				o->renamed = gone;
				o->alloc = got.len;
				*ret_len = got.len;
				return 0;
			}
			memcpy(from, name, sizeof(from)); /* the name to delete */
		}
		log_debug("store: cannot reuse data/%s: %s", from, strerror(errno));
		unlinkat(s->data_fd, from, 0);
		pthread_mutex_lock(&s->lock);
		uncharge_locked(s, o, got.len);
		pthread_mutex_unlock(&s->lock);
	}
	/* never over a file that is there: only the sweep at open deletes
	 * files, and a linked object is the only one with its id's name */
	fd = openat(s->data_fd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		fd = -errno;
		say_no_file(s, name, -fd);
		return fd;
	}
	o->fd = fd;
	o->has_file = true;
	o->renamed = gone;
	o->alloc = 0;
	*ret_len = 0;
	return 0;
}

/* Replace o->map with a mapping of the file's first @len bytes, keeping
 * the old one on o->w->old_maps; populate [@from, @len). */
static int remap(struct store_obj *o, uint64_t len, uint64_t from)
{
	struct store_old_map *old = NULL;
	void *p;

	if (o->map) {
		old = malloc(sizeof(*old));
		if (!old)
			return -ENOMEM;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, o->fd, 0);
	if (p == MAP_FAILED) {
		free(old);
		return -errno;
	}
	/* page tables now, in one call, rather than a fault per page */
	if (len > from)
		(void)madvise((uint8_t *)p + from / STORE_PAGE * STORE_PAGE,
			      len - from / STORE_PAGE * STORE_PAGE, MADV_POPULATE_WRITE);
	if (old) {
		*old = (struct store_old_map){o->map, o->w->map_len, o->w->old_maps};
		o->w->old_maps = old;
	}
	o->map = p;
	o->w->map_len = len;
	return 0;
}

/*
 * Charge and allocate [@len, *@goal) of pending @o's file, whose charge
 * is @old_alloc: all of it, or only up to @need if that is what fits.  A
 * refused charge, or a full filesystem, may come from pages of deleted
 * objects still mapped that were measured a while ago: they are measured
 * again and, if that changed them, it is tried once more.  Sets *@goal
 * and *@charged.  0 or -errno (then nothing is charged, and the file is
 * @len bytes long).
 */
static int grow_charged(struct store_obj *o, uint64_t len, uint64_t old_alloc, uint64_t need,
			uint64_t *goal, uint64_t *charged)
{
	struct store *s = obj_store(o);
	struct store_pooled drop[STORE_POOL_MAX];
	uint64_t got;
	size_t ndrop;
	int r, tries;

	for (tries = 0;; tries++) {
		got = *goal;
		ndrop = 0;
		pthread_mutex_lock(&s->lock);
		r = charge_locked(s, o, got - old_alloc, drop, &ndrop);
		if (r == -ENOSPC && got > need && need > old_alloc) {
			got = need;
			r = charge_locked(s, o, got - old_alloc, drop, &ndrop);
		}
		pthread_mutex_unlock(&s->lock);
		drop_files(s, drop, ndrop);
		if (r == 0) {
			r = ftruncate(o->fd, (off_t)got) < 0 ? -errno
							     : file_allocate(o->fd, len, got);
			if (r == 0) {
				*goal = got;
				*charged = got - old_alloc;
				return 0;
			}
			(void)ftruncate(o->fd, (off_t)len);
			pthread_mutex_lock(&s->lock);
			uncharge_locked(s, o, got - old_alloc);
			pthread_mutex_unlock(&s->lock);
		}
		if (r != -ENOSPC || tries || !held_changed(s))
			return r;
	}
}

int store_file_grow_i(struct store_obj *o, uint64_t want, bool exact)
{
	struct store *s = obj_store(o);
	uint64_t need, goal, len = o->alloc, old_alloc = o->alloc, charged = 0;
	bool fresh = o->fd < 0;
	int r;

	if (store_pack_wants_i(o, want))
		return store_pack_grow_i(o, want, exact);
	if (want <= o->alloc && o->fd >= 0)
		return 0;
	need = round_up(want, s->unit);
	goal = exact ? need
		     : max_u64(need,
			       round_up(min_u64(2 * o->alloc, o->alloc + STORE_GROW_MAX), s->unit));
	if (fresh) {
		r = file_get(o, goal, &len);
		if (r < 0)
			return r;
		old_alloc = o->alloc; /* a pooled file comes charged */
		if (len > goal && exact) {
			/* more than the object will ever need */
			if (ftruncate(o->fd, (off_t)goal) == 0) {
				pthread_mutex_lock(&s->lock);
				uncharge_locked(s, o, len - goal);
				pthread_mutex_unlock(&s->lock);
				o->alloc = old_alloc = len = goal;
			}
		}
		goal = max_u64(goal, len);
	}
	if (goal > old_alloc) {
		r = grow_charged(o, len, old_alloc, need, &goal, &charged);
		if (r < 0)
			return r;
	}
	if (goal > o->w->map_len || !o->map) {
		r = goal ? remap(o, goal, fresh ? 0 : o->w->map_len) : 0;
		if (r < 0) {
			(void)ftruncate(o->fd, (off_t)len);
			goto fail;
		}
	}
	o->alloc = goal;
	return 0;

fail:
	if (charged) {
		pthread_mutex_lock(&s->lock);
		uncharge_locked(s, o, charged);
		pthread_mutex_unlock(&s->lock);
	}
	return r;
}

/* What file @fd holds beyond @charge bytes (0 if it cannot tell). */
static uint64_t file_extra(int fd, uint64_t charge)
{
	struct stat st;
	uint64_t held;

	if (fstat(fd, &st) < 0)
		return 0;
	held = (uint64_t)st.st_blocks * 512;
	return held > charge ? held - charge : 0;
}

static void unmap_old(struct store_obj *o)
{
	struct store_old_map *m, *next;

	if (!o->w)
		return;
	for (m = o->w->old_maps; m; m = next) {
		next = m->next;
		munmap(m->addr, m->len);
		free(m);
	}
	o->w->old_maps = NULL;
}

int store_file_seal_i(struct store_obj *o)
{
	struct store *s = obj_store(o);
	uint64_t size = atomic_load_explicit(&o->size, memory_order_relaxed);
	uint64_t keep, charge, extra;
	int r;

	if (o->packed)
		return store_pack_seal_i(o);
	if (o->fd < 0) {
		r = store_file_grow_i(o, 0, true);
		if (r < 0)
			return r;
	}
	charge = round_up(size, s->unit);
	keep = s->kind == STORE_FS_HUGETLBFS ? charge : size;
	/* hugetlbfs keeps whole pages: the tail must read as zeros */
	if (keep > size)
		memset(o->map + size, 0, keep - size);
	if (keep != o->alloc && ftruncate(o->fd, (off_t)keep) < 0)
		return -errno;
	/* a huge page the cut could not split keeps its tail: what the
	 * filesystem holds beyond the charge (store_files_held_i()) */
	extra = s->kind == STORE_FS_OWN_TMPFS ? file_extra(o->fd, charge) : 0;
	/* the mapping past the new end is never touched: writes grow the
	 * file again first (store_file_grow_i()) if the seal fails */
	pthread_mutex_lock(&s->lock);
	uncharge_locked(s, o, o->alloc - charge);
	s->extra -= o->extra;
	s->extra += extra;
	o->extra = extra;
	pthread_mutex_unlock(&s->lock);
	o->alloc = charge;
	return 0;
}

void store_file_freeze_i(struct store_obj *o)
{
	uint64_t maplen = sealed_map_len(o);

	store_pack_freeze_i(o); /* the slots it left (see store_pack.c) */
	if (o->packed)
		return;
	(void)fchmod(o->fd, 0400);
	unmap_old(o);
	if (o->map && maplen < o->w->map_len)
		munmap(o->map + maplen, o->w->map_len - maplen);
	if (maplen == 0 && o->map) {
		munmap(o->map, o->w->map_len);
		o->map = NULL;
	} else if (o->map && mprotect(o->map, maplen, PROT_READ) < 0) {
		log_debug("store: cannot make object %016" PRIx64 " read-only: %s", o->id,
			  strerror(errno));
	}
	o->w->map_len = maplen; /* sealed_map_len() once w goes */
	/* at rest a sealed object holds no descriptor: opened by name */
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
}

bool store_file_unlink_i(struct store_obj *o, uint64_t *ret_seq)
{
	struct store *s = obj_store(o);
	char name[STORE_ID_HEX + 1], gone[32];
	uint64_t seq;

	if (!o->has_file || o->renamed)
		return false;
	pthread_mutex_lock(&s->lock);
	seq = s->seq++;
	pthread_mutex_unlock(&s->lock);
	store_file_name_i(o->id, name);
	store_files_seq_name_i(GONE_PREFIX, seq, gone, sizeof(gone));
	if (renameat(s->data_fd, name, s->data_fd, gone) == 0) {
		o->renamed = true;
		*ret_seq = seq;
		return true;
	}
	log_debug("store: cannot rename data/%s: %s", name, strerror(errno));
	/* the name must go (a new object may take the id): the file lives
	 * on through a descriptor until the last reference */
	if (o->fd < 0) {
		o->fd = openat(s->data_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		pthread_mutex_lock(&s->lock);
		if (o->fd >= 0 && !o->counted_open) {
			o->counted_open = true; /* it holds a descriptor now */
			s->nopen++;
		}
		pthread_mutex_unlock(&s->lock);
	}
	unlinkat(s->data_fd, name, 0);
	o->has_file = o->fd >= 0;
	o->recyclable = false;
	return false;
}

void store_file_abandon_i(struct store_obj *o)
{
	struct store *s = obj_store(o);
	char name[32];

	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	if (o->has_file) {
		if (o->renamed)
			store_files_seq_name_i(GONE_PREFIX, o->gone_seq, name, sizeof(name));
		else
			store_file_name_i(o->id, name);
		unlinkat(s->data_fd, name, 0);
		o->has_file = false;
		o->renamed = false;
	}
	pthread_mutex_lock(&s->lock);
	uncharge_locked(s, o, o->alloc);
	pthread_mutex_unlock(&s->lock);
	o->alloc = 0;
}

void store_file_close_i(struct store_obj *o)
{
	store_pack_forget_i(o);
	unmap_old(o);
	if (o->map)
		munmap(o->map, map_len_of(o));
	o->map = NULL;
	if (o->w)
		o->w->map_len = 0;
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
}

/*
 * Does nobody but the store hold @fd's file open?  Not a process, and not
 * the kernel for a passthrough mmap, which maps the store file itself and
 * outlives the handle's RELEASE (its process closed the descriptor), even
 * the daemon that served it.  A write lease is granted only to the one
 * open file description of a file (mappings made through our own
 * descriptor do not count), and taking it needs no other party.
 */
static bool file_alone(int fd)
{
	if (fcntl(fd, F_SETLEASE, F_WRLCK) < 0)
		return false;
	(void)fcntl(fd, F_SETLEASE, F_UNLCK);
	return true;
}

/* @o's file and pages are no longer the object's.  s->lock held. */
static void uncharge_file_locked(struct store *s, struct store_obj *o)
{
	s->used -= o->alloc;
	s->draining -= o->alloc;
	s->extra -= o->extra;
	o->alloc = o->extra = 0;
}

/*
 * Make @o's file (named @gone, or held by o->fd) a pooled file named
 * @name, @len bytes long, if nobody else holds it open.  True if it now
 * is; the caller pools it or deletes it.
 */
static bool pool_prepare(struct store_obj *o, const char *gone, const char *name, uint64_t len)
{
	struct store *s = obj_store(o);
	bool ok = false;
	char path[64];
	struct stat st;
	int fd = o->fd, wfd = -1;

	/* read-only will do: a write lease needs no writable descriptor */
	if (fd < 0)
		fd = openat(s->data_fd, gone, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) < 0 || !file_alone(fd))
		goto out;
	/* a pooled file's length is whole pages: what was charged */
	if ((uint64_t)st.st_size != len) {
		if (fchmod(fd, 0600) < 0)
			goto out;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		wfd = open(path, O_WRONLY | O_CLOEXEC);
		if (wfd < 0 || ftruncate(wfd, (off_t)len) < 0)
			goto out;
	}
	ok = fchmod(fd, 0600) == 0 && renameat(s->data_fd, gone, s->data_fd, name) == 0;
out:
	if (wfd >= 0)
		close(wfd);
	if (fd >= 0 && fd != o->fd)
		close(fd);
	return ok;
}

void store_file_free_i(struct store_obj *o)
{
	struct store *s = obj_store(o);
	char gone[32], name[32];
	bool pooled = false, kept = false, had_file = o->has_file;
	/* the file's length rounded up to whole units: what was charged */
	uint64_t len = o->alloc;

	if (o->packed || (o->w && o->w->old_slots)) {
		store_pack_free_i(o);
		if (!o->has_file && o->fd < 0)
			return;
	}
	unmap_old(o);
	if (o->map)
		munmap(o->map, map_len_of(o));
	o->map = NULL;
	store_files_seq_name_i(GONE_PREFIX, o->gone_seq, gone, sizeof(gone));
	store_files_seq_name_i(FREE_PREFIX, o->gone_seq, name, sizeof(name));
	/* a file with extra pages would hold more than the pool counts; a
	 * file that lost its name (not renamed) cannot be pooled */
	if (had_file && o->renamed && s->reuse && o->recyclable && !o->extra &&
	    len >= STORE_POOL_MIN)
		pooled = pool_prepare(o, gone, name, len);
	/* the pool takes the file and its pages over at once; otherwise the
	 * pages go before their charge does, so that store_files_held_i()
	 * never finds pages that nothing counts */
	pthread_mutex_lock(&s->lock);
	if (pooled && s->npool < STORE_POOL_MAX &&
	    taken_locked(s) - o->alloc + len <= s->capacity) {
		s->pool[s->npool++] = (struct store_pooled){len, o->gone_seq};
		s->pool_bytes += len;
		uncharge_file_locked(s, o);
		kept = true;
	}
	pthread_mutex_unlock(&s->lock);
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	if (kept)
		return;
	if (had_file && o->renamed)
		unlinkat(s->data_fd, pooled ? name : gone, 0);
	pthread_mutex_lock(&s->lock);
	uncharge_file_locked(s, o);
	pthread_mutex_unlock(&s->lock);
	/* if someone else holds the file, its pages stay: held from now */
	if (had_file)
		(void)store_files_held_i(s);
}

/* The hash of @fd's first @size bytes, read with pread(2). */
static int file_hash(int fd, uint64_t size, uint8_t ret_csum[OBJFS_CSUM_LEN])
{
	enum { CHUNK = 1 << 20 };
	XXH3_state_t *st = XXH3_createState();
	uint8_t *buf = malloc(CHUNK);
	XXH128_canonical_t c;
	uint64_t off = 0;
	ssize_t n;
	int r = 0;

	if (!st || !buf) {
		r = -ENOMEM;
		goto out;
	}
	XXH3_128bits_reset(st);
	while (off < size) {
		n = pread(fd, buf, (size_t)min_u64(CHUNK, size - off), (off_t)off);
		if (n <= 0) {
			r = n < 0 ? -errno : -EBADMSG;
			goto out;
		}
		XXH3_128bits_update(st, buf, (size_t)n);
		off += (uint64_t)n;
	}
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
	memcpy(ret_csum, c.digest, OBJFS_CSUM_LEN);
out:
	free(buf);
	XXH3_freeState(st);
	return r;
}

int store_file_adopt_i(struct store_obj *o, const uint8_t *csum)
{
	struct store *s = obj_store(o);
	uint64_t size = atomic_load_explicit(&o->size, memory_order_relaxed);
	uint64_t want = s->kind == STORE_FS_HUGETLBFS ? round_up(size, s->unit) : size;
	uint8_t got[OBJFS_CSUM_LEN];
	char name[STORE_ID_HEX + 1];
	struct stat st;
	uint64_t held;
	int fd, r;

	store_file_name_i(o->id, name);
	if (fstatat(s->data_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? -EBADMSG : -errno;
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != want)
		return -EBADMSG;
	if (csum) {
		fd = openat(s->data_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			return -errno;
		r = file_hash(fd, size, got);
		close(fd);
		if (r < 0)
			return r;
		if (memcmp(got, csum, OBJFS_CSUM_LEN))
			return -EBADMSG;
	}
	o->has_file = true;
	o->alloc = round_up(size, s->unit);
	held = (uint64_t)st.st_blocks * 512;
	o->extra = s->kind == STORE_FS_OWN_TMPFS && held > o->alloc ? held - o->alloc : 0;
	return 0;
}

void store_file_rest_i(struct store_obj *o)
{
	if (o->map && !o->packed)
		munmap(o->map, sealed_map_len(o));
	o->map = NULL;
}

int store_file_open_i(struct store_obj *o, int flags)
{
	char name[32];
	int fd;

	if (o->fd >= 0) {
		/* the file lost its name: only this descriptor reaches it */
		snprintf(name, sizeof(name), "/proc/self/fd/%d", o->fd);
		fd = open(name, flags | O_CLOEXEC);
	} else if (!o->has_file) {
		return -ENOENT;
	} else {
		if (o->renamed)
			store_files_seq_name_i(GONE_PREFIX, o->gone_seq, name, sizeof(name));
		else
			store_file_name_i(o->id, name);
		fd = openat(obj_store(o)->data_fd, name, flags | O_CLOEXEC | O_NOFOLLOW);
	}
	return fd < 0 ? -errno : fd;
}

/* ---- the mappings of sealed objects ---- */

#define UNMAP_BATCH 16 /* idle mappings taken away per new one, at most */

struct unmap {
	void *addr;
	size_t len;
};

void store_file_mapped_del_i(struct store *s, struct store_obj *o)
{
	if (!o->on_mapped)
		return;
	if (o->mprev)
		o->mprev->mnext = o->mnext;
	else
		s->mapped = o->mnext;
	if (o->mnext)
		o->mnext->mprev = o->mprev;
	else
		s->mapped_tail = o->mprev;
	o->mprev = o->mnext = NULL;
	o->on_mapped = false;
	s->nmapped--;
}

static void mapped_push_locked(struct store *s, struct store_obj *o)
{
	o->mprev = NULL;
	o->mnext = s->mapped;
	if (s->mapped)
		s->mapped->mprev = o;
	else
		s->mapped_tail = o;
	s->mapped = o;
	o->on_mapped = true;
	s->nmapped++;
}

/*
 * While more than s->map_cache objects are mapped, take mappings away
 * from the cold end (a clock: an object read since the hand last passed
 * goes back to the hot end once): from objects only the table holds
 * (refs 1: docs/design.md, "Locks and references").  One in use goes to
 * the hot end too.  Looks at UNMAP_BATCH objects at most; the mappings
 * to unmap go in @ret (*@n of them), for after s->lock.
 */
static void mapped_trim_locked(struct store *s, struct unmap *ret, size_t *n)
{
	struct store_obj *o;
	size_t looked;

	*n = 0;
	for (looked = 0; looked < UNMAP_BATCH && s->nmapped > s->map_cache; looked++) {
		o = s->mapped_tail;
		if (!o)
			break;
		store_file_mapped_del_i(s, o);
		if (atomic_exchange_explicit(&o->map_used, false, memory_order_relaxed) ||
		    !o->linked || atomic_load_explicit(&o->refs, memory_order_acquire) != 1) {
			mapped_push_locked(s, o);
			continue;
		}
		ret[(*n)++] = (struct unmap){o->map, sealed_map_len(o)};
		atomic_store_explicit(&o->map, NULL, memory_order_relaxed);
		s->maps_dropped++;
	}
}

static void unmap_all(struct unmap *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		munmap(v[i].addr, v[i].len);
}

void store_file_mapped_add_i(struct store_obj *o)
{
	struct store *s = obj_store(o);
	struct unmap v[UNMAP_BATCH];
	size_t n = 0;

	if (!o->map || o->packed)
		return; /* a packed object's chunk is mapped for good */
	pthread_mutex_lock(&s->lock);
	if (o->linked && !o->on_mapped && !o->pinned)
		mapped_push_locked(s, o);
	mapped_trim_locked(s, v, &n);
	pthread_mutex_unlock(&s->lock);
	unmap_all(v, n);
}

int store_file_map_i(struct store_obj *o)
{
	struct store *s = obj_store(o);
	struct unmap v[UNMAP_BATCH];
	size_t n = 0;
	void *p;
	int fd;

	fd = store_file_open_i(o, O_RDONLY);
	if (fd < 0)
		return fd;
	p = mmap(NULL, sealed_map_len(o), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -errno;
	pthread_mutex_lock(&s->lock);
	atomic_store_explicit(&o->map, p, memory_order_release);
	s->maps_made++;
	/* an unlinked object keeps its mapping until it is freed, and so
	 * does one a transport registered */
	if (o->linked && !o->pinned)
		mapped_push_locked(s, o);
	mapped_trim_locked(s, v, &n);
	pthread_mutex_unlock(&s->lock);
	unmap_all(v, n);
	return 0;
}

int store_file_mapping_i(struct store_obj *o, uint8_t **ret)
{
	uint8_t *p = atomic_load_explicit(&o->map, memory_order_acquire);
	int r = 0;

	if (p || !sealed_map_len(o)) {
		/* for the clock (mapped_trim_locked()); a load first, so
		 * that readers of a hot object share its cache line */
		if (p && !atomic_load_explicit(&o->map_used, memory_order_relaxed))
			atomic_store_explicit(&o->map_used, true, memory_order_relaxed);
		*ret = p;
		return 0;
	}
	obj_lock(o);
	if (!atomic_load_explicit(&o->map, memory_order_relaxed))
		r = store_file_map_i(o);
	p = atomic_load_explicit(&o->map, memory_order_relaxed);
	obj_unlock(o);
	if (r < 0) {
		log_msg_limited(&file_rl, LOGL_WARN, "store: cannot map object %016" PRIx64 ": %s",
				o->id, strerror(-r));
		/* the daemon's own limit, not the reader's doing */
		if (r == -EMFILE || r == -ENFILE)
			r = -EIO;
	}
	*ret = p;
	return r;
}

/* ---- what the rest of objfs sees ---- */

int store_obj_map(struct store_obj *o, struct store_map *ret)
{
	uint8_t *p;
	int r;

	if (!o || !ret || !store_obj_sealed(o))
		return -EINVAL;
	if (o->packed)
		return -EOPNOTSUPP; /* its chunk holds other objects */
	r = store_file_mapping_i(o, &p);
	if (r < 0)
		return r;
	obj_lock(o);
	/* may fail (EACCES on a 0400 file when not root): then -1 */
	ret->fd = store_file_open_i(o, O_RDWR);
	if (ret->fd < 0)
		ret->fd = -1;
	obj_unlock(o);
	ret->addr = p;
	ret->len = store_obj_size(o);
	return 0;
}

int store_obj_open_fd(struct store_obj *o)
{
	int fd;

	if (!o || !store_obj_sealed(o))
		return -EINVAL;
	if (obj_store(o)->kind == STORE_FS_HUGETLBFS || o->packed)
		return -EOPNOTSUPP;
	obj_lock(o);
	fd = store_file_open_i(o, O_RDONLY);
	obj_unlock(o);
	/* the file may now be mapped by processes the store never hears of
	 * (a passthrough mmap maps this file itself, and its handle is
	 * released at close(2), before munmap): file_alone() sees them */
	return fd;
}
