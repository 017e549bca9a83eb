/*
 * fs: the FUSE session, the ops table and connection tuning, and the
 * node's hooks (what only FUSE knows).  The operations themselves live in fs_dir.c,
 * fs_file.c and fs_xattr.c; see fs_i.h for the map of this directory.
 */
#include "fs_i.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- session ---- */

/*
 * Read-ahead of the mount, in KiB.  The kernel applies the INIT reply as
 * bdi->ra_pages = min(bdi->ra_pages, max_readahead / PAGE_SIZE), once the
 * session loop answers INIT, i.e. after fs_mount() has returned.  So the
 * bdi is raised in fs_mount() (find_mount_raise_readahead()) and op_init asks for the
 * same amount; asking for less would lower the raised value again.
 * libfuse clamps conn->max_readahead to the kernel's offer (the bdi's
 * 128 KiB at mount time) before op_init but not after.
 */
#define FS_READAHEAD_KB 4096u

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	conn->max_write = 1 << 20;
	conn->max_readahead = FS_READAHEAD_KB << 10;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	conn->time_gran = 1;
	conn->want |= FUSE_CAP_ASYNC_READ;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/* a listing hands the kernel every entry's attributes: `ls -l` then
	 * needs no LOOKUP per name.  "Auto" lets the kernel ask for them
	 * past the first batch only once a name was stat()ed: `ls -l` is as
	 * fast as without it, and plain `ls` faster, since the kernel makes
	 * no inodes for it (docs/benchmarks.md, "Figures behind
	 * constants"). */
	/* a symbolic link's target never changes: the kernel may keep it */
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	if (conn->capable & FUSE_CAP_READDIRPLUS_AUTO)
		conn->want |= FUSE_CAP_READDIRPLUS_AUTO;
	/* immutable data: the kernel never needs to drop cached pages on its
	 * own; splice cannot carry 1 MiB replies here (see notes) */
	conn->want &=
	    ~(unsigned)(FUSE_CAP_AUTO_INVAL_DATA | FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
			FUSE_CAP_SPLICE_MOVE | FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_POSIX_LOCKS |
			FUSE_CAP_FLOCK_LOCKS);
}

static const struct fuse_lowlevel_ops fs_ops = {
    .init = op_init,
    .lookup = fs_op_lookup,
    .forget = fs_op_forget,
    .forget_multi = fs_op_forget_multi,
    .getattr = fs_op_getattr,
    .setattr = fs_op_setattr,
    .opendir = fs_op_opendir,
    .readdir = fs_op_readdir,
    .readdirplus = fs_op_readdirplus,
    .releasedir = fs_op_releasedir,
    .mknod = fs_op_mknod,
    .symlink = fs_op_symlink,
    .readlink = fs_op_readlink,
    .link = fs_op_link,
    .mkdir = fs_op_mkdir,
    .rmdir = fs_op_rmdir,
    .unlink = fs_op_unlink,
    .rename = fs_op_rename,
    .create = fs_op_create,
    .open = fs_op_open,
    .read = fs_op_read,
    .write = fs_op_write,
    .flush = fs_op_flush,
    .release = fs_op_release,
    .fsync = fs_op_fsync,
    .statfs = fs_op_statfs,
    .getxattr = fs_op_getxattr,
    .listxattr = fs_op_listxattr,
    .setxattr = fs_op_setxattr,
    .removexattr = fs_op_removexattr,
};

/* ---- the passthrough layer's hooks (fs_pt.h): libfuse hands custom
 * I/O the session's userdata, which is the fs ---- */

static ssize_t pt_read(int fd, void *buf, size_t len, void *userdata)
{
	struct fs *fs = userdata;

	return fs_pt_read(fs->pt, fd, buf, len);
}

static ssize_t pt_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct fs *fs = userdata;

	return fs_pt_writev(fs->pt, fd, iov, count);
}

/* ---- the node's hooks ---- */

/* Pages of a failed fetch that readers got may sit in the kernel's
 * cache, and may be bad: drop them, so that the next open reads what the
 * next fetch brings. */
static void hook_failed(void *ctx, uint64_t id)
{
	fs_notify_data_gone(ctx, id);
}

/* Open here, or being written here: not to be evicted. */
static bool hook_busy(void *ctx, uint64_t id)
{
	struct fs *fs = ctx;
	struct inode *in;
	bool busy;

	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find(fs, id);
	busy = in && (in->handles || in->pending);
	pthread_mutex_unlock(&fs->lock);
	return busy;
}

/* An object written here was published (or is waiting for Redis): the
 * name cache learns the name, and listings of @parent cached here showed
 * the name as this file (the overlay): it may name something else now,
 * or another id. */
static void hook_published(void *ctx, uint64_t parent, const char *name, uint64_t id, unsigned how)
{
	struct fs *fs = ctx;

	pthread_mutex_lock(&fs->lock);
	if (how & (NODE_PUB_NAMED | NODE_PUB_LATER))
		fs_dcache_put(fs, parent, name, META_FILE, id);
	if (!(how & NODE_PUB_LATER))
		fs_dir_touched_locked(fs, parent, false);
	pthread_mutex_unlock(&fs->lock);
	if (!(how & NODE_PUB_LATER) && (!(how & NODE_PUB_NAMED) || (how & NODE_PUB_REPLACED)))
		fs_notify_dir(fs, parent);
}

struct fs *fs_new(const struct fs_config *cfg, struct meta *m, struct store *s, struct node *nd,
		  int *ret_err)
{
	struct fs *fs = calloc(1, sizeof(*fs));
	struct node_hooks hooks;

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
	fs->pt = fs_pt_new(cfg->passthrough);
	fs->inode_slab = slab_pool_new(sizeof(struct inode));
	if (!fs->pt || !fs->inode_slab) {
		fs_free(fs);
		*ret_err = -ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&fs->lock, NULL);
	pthread_cond_init(&fs->settle, NULL);
	fs->nd = nd;
	hooks = (struct node_hooks){
	    .failed = hook_failed,
	    .busy = hook_busy,
	    .published = hook_published,
	    .ctx = fs,
	};
	node_set_hooks(nd, &hooks);
	return fs;
}

void fs_free(struct fs *fs)
{
	struct pending *p;

	if (!fs)
		return;
	/* seals that failed at a RELEASE: a last try; what still fails has
	 * no catalog record, and the store's next open drops its bytes */
	fs_seal_retry(fs);
	/* the node's workers are stopped (node_stop()), and the node
	 * outlives the fs: it must not call it any more */
	if (fs->nd)
		node_set_hooks(fs->nd, &(struct node_hooks){0});
	for (p = fs->pending; p; p = p->next)
		if (p->seal_retry)
			log_error("object %" PRIu64 " ('%s') is lost: its seal failed until the "
				  "unmount (see above), though its writer's close(2) returned 0",
				  p->id, p->name);
	if (fs->se) {
		if (atomic_load(&fs->mounted))
			fuse_session_unmount(fs->se);
		fuse_session_destroy(fs->se);
	}
	fs_pt_free(fs->pt);
	while (fs->pending) {
		p = fs->pending;
		fs->pending = p->next;
		store_obj_unref(p->obj);
		free(p);
	}
	fs_inode_free_all(fs);
	slab_pool_free(fs->inode_slab);
	fs_inode_origins_free(fs);
	fs_dcache_free_all(fs);
	pthread_mutex_destroy(&fs->lock);
	pthread_cond_destroy(&fs->settle);
	free((char *)fs->cfg.mountpoint);
	free((char *)fs->cfg.node);
	free((char *)fs->cfg.fsname);
	free((char *)fs->cfg.store_dir);
	free(fs);
}

/*
 * Find the mount's id and device in /proc/self/mountinfo (for FLUSH, see
 * fs_file.c).  The kernel offers only 128 KiB of read-ahead at INIT;
 * raising the mount's bdi setting speeds up cold reads a lot
 * (docs/benchmarks.md, "Figures behind constants").
 * Done before the session loop answers INIT (see FS_READAHEAD_KB), so the
 * value holds from before the daemon reports the mount ready.
 */
static void find_mount_raise_readahead(struct fs *fs)
{
	char line[4096], path[128], mnt[OBJFS_PATH_MAX], val[16];
	unsigned maj, min;
	bool found = false;
	FILE *f;
	int fd, n, id;

	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		/* id parent maj:min root mountpoint ... */
		if (sscanf(line, "%d %*u %u:%u %*s %4095s", &id, &maj, &min, mnt) == 4 &&
		    !strcmp(mnt, fs->cfg.mountpoint)) {
			/* the last match is the top mount */
			found = true;
			fs->mnt_id = id;
			fs->mnt_major = maj;
			fs->mnt_minor = min;
		}
	}
	fclose(f);
	if (!found)
		return;
	maj = fs->mnt_major;
	min = fs->mnt_minor;
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", maj, min);
	n = snprintf(val, sizeof(val), "%u\n", FS_READAHEAD_KB);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || util_write_full(fd, val, (size_t)n) < 0)
		log_info("cannot raise read-ahead in %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

int fs_mount(struct fs *fs)
{
	char opts[1024], name[512];
	char *argv[4];
	struct fuse_args args;
	const char *p;
	size_t n = 0;
	int argc = 0;

	/* libfuse splits -o at commas (a redis-cluster:// SPEC has some)
	 * unless a backslash escapes them */
	for (p = fs->cfg.fsname; *p && n + 2 < sizeof(name); p++) {
		if (*p == ',' || *p == '\\')
			name[n++] = '\\';
		name[n++] = *p;
	}
	name[n] = '\0';
	snprintf(opts, sizeof(opts), "fsname=%s,subtype=objfs,default_permissions%s%s%s%s%s%s",
		 name, fs->cfg.allow_other ? ",allow_other" : "", fs->cfg.read_only ? ",ro" : "",
		 fs->cfg.nosuid ? ",nosuid" : "", fs->cfg.nodev ? ",nodev" : "",
		 fs->cfg.noexec ? ",noexec" : "", fs->cfg.noatime ? ",noatime" : "");
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
	atomic_store(&fs->mounted, true);
	find_mount_raise_readahead(fs);
	/* before the session loop reads INIT */
	return fs_pt_install(fs->pt, fs->se, pt_read, pt_writev);
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
	atomic_store(&fs->mounted, false);
	return r < 0 ? -EIO : 0;
}
