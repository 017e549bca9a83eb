/*
 * bench/fuse-floor.c: the floor under a create through FUSE on this
 * machine.  A FUSE filesystem that keeps its files in memory and does
 * nothing else, answering the kernel exactly as objfsd does for a create
 * (so the kernel sends it the same requests): a negative LOOKUP not
 * cached, CREATE with a direct-I/O handle and an attribute timeout of 0
 * while the file is being written, WRITE, FLUSH, RELEASE, a directory's
 * attributes kept a second, default_permissions, the same threads
 * (libfuse's multi-threaded loop, 8 idle, 64 at most).  No Redis, no
 * store, no hashing, no /proc: what a create costs in FUSE requests,
 * replies and wake-ups alone.  bench/run-bench meta prints its creates/s
 * next to objfsd's and Redis's SET/s.
 *
 *   objfs-fuse-floor [--lean] MOUNTPOINT   (stays in the foreground;
 *                                           unmount with umount)
 *
 * --lean caches what objfsd may not (a negative entry would hide a name
 * another node publishes; a writer's attributes change at the seal) and
 * writes through the page cache: the floor of any FUSE create here.
 *
 * One directory (the root) of regular files; mkdir, unlink and the rest
 * answer ENOSYS or EPERM.  Names and data live until the unmount.
 */
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "uthash.h"

#define FLOOR_ENTRY_TIMEOUT 3600.0
#define FLOOR_FILE_ATTR_TIMEOUT 3600.0
#define FLOOR_DIR_ATTR_TIMEOUT 1.0
#define FLOOR_MAX_SIZE (64u << 20)

struct floor_file {
	UT_hash_handle hh_name; /* floor.by_name */
	UT_hash_handle hh_ino;	/* floor.by_ino */
	fuse_ino_t ino;
	char *name;
	char *data;
	size_t size;
	size_t cap;
	mode_t mode;
	uid_t uid;
	gid_t gid;
	bool writing; /* created and not yet released: attributes not cached */
};

static struct {
	bool lean;	      /* --lean: cache what objfsd may not (set before the loop) */
	pthread_mutex_t lock; /* guards everything below */
	struct floor_file *by_name;
	struct floor_file *by_ino;
	fuse_ino_t next_ino;
	struct timespec dir_mtime;
} floor_fs = {.lock = PTHREAD_MUTEX_INITIALIZER, .next_ino = FUSE_ROOT_ID + 1};

static void floor_root_attr_locked(struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = FUSE_ROOT_ID;
	st->st_mode = S_IFDIR | 0755;
	st->st_nlink = 2;
	st->st_mtim = floor_fs.dir_mtime;
	st->st_ctim = floor_fs.dir_mtime;
}

static void floor_file_attr_locked(const struct floor_file *f, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = f->ino;
	st->st_mode = S_IFREG | f->mode;
	st->st_nlink = 1;
	st->st_uid = f->uid;
	st->st_gid = f->gid;
	st->st_size = (off_t)f->size;
	st->st_blocks = (blkcnt_t)((f->size + 511) / 512);
}

static void floor_entry_locked(const struct floor_file *f, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = f->ino;
	e->generation = 1;
	floor_file_attr_locked(f, &e->attr);
	e->attr_timeout = f->writing && !floor_fs.lean ? 0.0 : FLOOR_FILE_ATTR_TIMEOUT;
	e->entry_timeout = FLOOR_ENTRY_TIMEOUT;
}

static void floor_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	struct floor_file *f;

	if (parent != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	pthread_mutex_lock(&floor_fs.lock);
	HASH_FIND(hh_name, floor_fs.by_name, name, strlen(name), f);
	if (f)
		floor_entry_locked(f, &e);
	pthread_mutex_unlock(&floor_fs.lock);
	if (!f && floor_fs.lean) {
		/* a negative entry the kernel keeps: no LOOKUP before a CREATE */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = FLOOR_ENTRY_TIMEOUT;
	} else if (!f) {
		fuse_reply_err(req, ENOENT); /* not cached, as objfsd does */
		return;
	}
	fuse_reply_entry(req, &e);
}

static void floor_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct floor_file *f = NULL;
	struct stat st;
	double timeout = FLOOR_DIR_ATTR_TIMEOUT;

	(void)fi;
	pthread_mutex_lock(&floor_fs.lock);
	if (ino == FUSE_ROOT_ID) {
		floor_root_attr_locked(&st);
	} else {
		HASH_FIND(hh_ino, floor_fs.by_ino, &ino, sizeof(ino), f);
		if (f) {
			floor_file_attr_locked(f, &st);
			timeout = f->writing && !floor_fs.lean ? 0.0 : FLOOR_FILE_ATTR_TIMEOUT;
		}
	}
	pthread_mutex_unlock(&floor_fs.lock);
	if (ino != FUSE_ROOT_ID && !f) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fuse_reply_attr(req, &st, timeout);
}

static void floor_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			 struct fuse_file_info *fi)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fuse_entry_param e;
	struct floor_file *f, *old;

	if (parent != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	f = calloc(1, sizeof(*f));
	if (!f || !(f->name = strdup(name))) {
		free(f);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	f->mode = mode & 07777;
	f->uid = ctx->uid;
	f->gid = ctx->gid;
	f->writing = true;
	pthread_mutex_lock(&floor_fs.lock);
	HASH_FIND(hh_name, floor_fs.by_name, name, strlen(name), old);
	if (old) {
		pthread_mutex_unlock(&floor_fs.lock);
		free(f->name);
		free(f);
		fuse_reply_err(req, EEXIST);
		return;
	}
	f->ino = floor_fs.next_ino++;
	HASH_ADD_KEYPTR(hh_name, floor_fs.by_name, f->name, strlen(f->name), f);
	HASH_ADD(hh_ino, floor_fs.by_ino, ino, sizeof(f->ino), f);
	clock_gettime(CLOCK_REALTIME, &floor_fs.dir_mtime);
	floor_entry_locked(f, &e);
	pthread_mutex_unlock(&floor_fs.lock);
	fi->direct_io = !floor_fs.lean; /* objfsd's writer handles are direct I/O */
	fi->keep_cache = 0;
	fuse_reply_create(req, &e, fi);
}

static void floor_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct floor_file *f;

	pthread_mutex_lock(&floor_fs.lock);
	HASH_FIND(hh_ino, floor_fs.by_ino, &ino, sizeof(ino), f);
	pthread_mutex_unlock(&floor_fs.lock);
	if (!f) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EPERM); /* immutable once written, as objfs */
		return;
	}
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void floor_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	struct floor_file *f;
	size_t end;
	int err = 0;

	(void)fi;
	if (off < 0 || (size_t)off > FLOOR_MAX_SIZE || size > FLOOR_MAX_SIZE - (size_t)off) {
		fuse_reply_err(req, EFBIG);
		return;
	}
	end = (size_t)off + size;
	pthread_mutex_lock(&floor_fs.lock);
	HASH_FIND(hh_ino, floor_fs.by_ino, &ino, sizeof(ino), f);
	if (!f) {
		err = ENOENT;
	} else if (end > f->cap) {
		size_t cap = f->cap ? f->cap : 4096;
		char *p;

		while (cap < end)
			cap *= 2;
		p = realloc(f->data, cap);
		if (!p)
			err = ENOMEM;
		else {
			f->data = p;
			f->cap = cap;
		}
	}
	if (!err && size) {
		if ((size_t)off > f->size)
			memset(f->data + f->size, 0, (size_t)off - f->size);
		memcpy(f->data + off, buf, size);
		if (end > f->size)
			f->size = end;
	}
	pthread_mutex_unlock(&floor_fs.lock);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_write(req, size);
}

static void floor_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct floor_file *f;
	char *copy = NULL;
	size_t n = 0;

	(void)fi;
	pthread_mutex_lock(&floor_fs.lock);
	HASH_FIND(hh_ino, floor_fs.by_ino, &ino, sizeof(ino), f);
	if (f && off >= 0 && (size_t)off < f->size) {
		n = f->size - (size_t)off < size ? f->size - (size_t)off : size;
		copy = malloc(n);
		if (copy)
			memcpy(copy, f->data + off, n);
	}
	pthread_mutex_unlock(&floor_fs.lock);
	if (n && !copy) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fuse_reply_buf(req, copy, n);
	free(copy);
}

static void floor_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void floor_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct floor_file *f;

	pthread_mutex_lock(&floor_fs.lock);
	HASH_FIND(hh_ino, floor_fs.by_ino, &ino, sizeof(ino), f);
	if (f && (fi->flags & O_ACCMODE) != O_RDONLY)
		f->writing = false;
	pthread_mutex_unlock(&floor_fs.lock);
	fuse_reply_err(req, 0);
}

static void floor_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	fuse_reply_open(req, fi);
}

static void floor_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			  struct fuse_file_info *fi)
{
	/* the benchmark never lists; . and .. only, so ls works */
	char buf[256];
	size_t n = 0;
	struct stat st = {.st_ino = FUSE_ROOT_ID, .st_mode = S_IFDIR};

	(void)ino;
	(void)fi;
	if (off < 1)
		n += fuse_add_direntry(req, buf + n, sizeof(buf) - n, ".", &st, 1);
	if (off < 2)
		n += fuse_add_direntry(req, buf + n, sizeof(buf) - n, "..", &st, 2);
	fuse_reply_buf(req, buf, n <= size ? n : 0);
}

static void floor_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* objfsd's choice of capabilities (fs/fs.c) */
	conn->want |= FUSE_CAP_ASYNC_READ;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	conn->want &=
	    ~(unsigned)(FUSE_CAP_AUTO_INVAL_DATA | FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
			FUSE_CAP_SPLICE_MOVE | FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_POSIX_LOCKS |
			FUSE_CAP_FLOCK_LOCKS);
}

static const struct fuse_lowlevel_ops floor_ops = {
    .init = floor_init,
    .lookup = floor_lookup,
    .getattr = floor_getattr,
    .create = floor_create,
    .open = floor_open,
    .read = floor_read,
    .write = floor_write,
    .flush = floor_flush,
    .release = floor_release,
    .opendir = floor_opendir,
    .readdir = floor_readdir,
};

static void usage(FILE *to)
{
	fprintf(to, "usage: objfs-fuse-floor [--lean] MOUNTPOINT\n"
		    "  an in-memory FUSE filesystem that answers a create as objfsd does\n"
		    "  and does nothing else: the floor of a create through FUSE here\n"
		    "  (bench/run-bench meta).  Stays in the foreground until unmounted.\n"
		    "  --lean  cache what objfsd may not: negative entries (no LOOKUP\n"
		    "          before a create) and a new file's attributes, and write\n"
		    "          through the page cache: the floor of any FUSE create here\n");
}

int main(int argc, char **argv)
{
	char o[] = "-o", opts[] = "fsname=objfs-floor,subtype=floor,default_permissions";
	char *fargv[] = {argv[0], o, opts, NULL};
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	struct fuse_loop_config *lc;
	struct fuse_session *se;
	int r = 1;

	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "--lean")) {
		floor_fs.lean = true;
		argv++;
		argc--;
	}
	if (argc != 2 || argv[1][0] == '-') {
		usage(stderr);
		return 2;
	}
	clock_gettime(CLOCK_REALTIME, &floor_fs.dir_mtime);
	se = fuse_session_new(&args, &floor_ops, sizeof(floor_ops), NULL);
	if (!se) {
		fprintf(stderr, "objfs-fuse-floor: fuse_session_new failed\n");
		return 1;
	}
	if (fuse_set_signal_handlers(se) < 0 || fuse_session_mount(se, argv[1]) < 0) {
		fprintf(stderr, "objfs-fuse-floor: cannot mount on %s\n", argv[1]);
		fuse_session_destroy(se);
		return 1;
	}
	lc = fuse_loop_cfg_create();
	if (lc) {
		fuse_loop_cfg_set_idle_threads(lc, 8);
		fuse_loop_cfg_set_max_threads(lc, 64);
		r = fuse_session_loop_mt(se, lc) < 0;
		fuse_loop_cfg_destroy(lc);
	}
	fuse_remove_signal_handlers(se);
	fuse_session_unmount(se);
	fuse_session_destroy(se);
	return r;
}
