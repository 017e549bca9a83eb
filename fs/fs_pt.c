/*
 * fs_pt: FUSE passthrough through a custom I/O layer; see fs_pt.h.
 *
 * The kernel's side of the protocol (include/uapi/linux/fuse.h, 7.40 and
 * later) is spelled out below with our own names: libfuse 3.14 does not
 * install its fuse_kernel.h, and the system's linux/fuse.h may predate
 * passthrough.  Only the fields this file reads or writes are named.
 *
 * Replies are never edited in place: libfuse's buffers are its own.  An
 * edited reply is a copy of the argument with the same length, sent with
 * a copy of the iovec.
 */
#include "fs_pt.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "log.h"

/* ---- the kernel's protocol ---- */

#define PT_OP_INIT 26

struct pt_in_header {
	uint32_t len;
	uint32_t opcode;
	uint64_t unique;
	uint64_t nodeid;
	uint32_t uid, gid, pid;
	uint16_t total_extlen;
	uint16_t padding;
};

struct pt_init_in {
	uint32_t major;
	uint32_t minor;
	uint32_t max_readahead;
	uint32_t flags;
	uint32_t flags2; /* with PT_INIT_EXT in flags, since 7.36 */
};

struct pt_out_header {
	uint32_t len;
	int32_t error;
	uint64_t unique;
};

/* fuse_init_out up to the field we set (64 bytes in all since 7.23) */
struct pt_init_out {
	uint32_t major;
	uint32_t minor;
	uint32_t max_readahead;
	uint32_t flags;
	uint16_t max_background;
	uint16_t congestion_threshold;
	uint32_t max_write;
	uint32_t time_gran;
	uint16_t max_pages;
	uint16_t map_alignment;
	uint32_t flags2;
	uint32_t max_stack_depth; /* "unused[0]" to libfuse 3.14 */
};
#define PT_INIT_OUT_MAX 64

struct pt_open_out {
	uint64_t fh;
	uint32_t open_flags;
	int32_t backing_id; /* "padding" to libfuse 3.14 */
};

#define PT_INIT_EXT (1u << 30)
/* flags2 bits: bit 32 + n of the 64-bit flags */
#define PT_INIT2_DIRECT_IO_ALLOW_MMAP (1u << 4)
#define PT_INIT2_PASSTHROUGH (1u << 5)
/* the kernel's FILESYSTEM_MAX_STACK_DEPTH is 2; 1: backing files are on
 * a filesystem that stacks on nothing (the store's tmpfs) */
#define PT_MAX_STACK_DEPTH 1
#define PT_MIN_MINOR 40

#define PT_FOPEN_DIRECT_IO (1u << 0)
#define PT_FOPEN_NOFLUSH (1u << 5)
#define PT_FOPEN_PARALLEL_DIRECT_WRITES (1u << 6)
#define PT_FOPEN_PASSTHROUGH (1u << 7)
/* what the kernel accepts together with FOPEN_PASSTHROUGH (any other
 * flag, FOPEN_KEEP_CACHE first, fails the user's open with EIO) */
#define PT_FOPEN_MASK                                                                  \
	(PT_FOPEN_PASSTHROUGH | PT_FOPEN_DIRECT_IO | PT_FOPEN_PARALLEL_DIRECT_WRITES | \
	 PT_FOPEN_NOFLUSH)

struct pt_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
#define PT_DEV_IOC_MAGIC 229
#define PT_DEV_IOC_BACKING_OPEN _IOW(PT_DEV_IOC_MAGIC, 1, struct pt_backing_map)
#define PT_DEV_IOC_BACKING_CLOSE _IOW(PT_DEV_IOC_MAGIC, 2, uint32_t)

/* ---- the layer ---- */

struct fs_pt {
	bool want;		  /* fixed */
	atomic_int fd;		  /* the session's /dev/fuse fd; -1 until installed */
	atomic_int mode;	  /* enum fs_pt_mode */
	atomic_bool direct_mmap;  /* DIRECT_IO_ALLOW_MMAP accepted at INIT */
	atomic_bool offered;	  /* passthrough offered at INIT */
	atomic_bool offered_mmap; /* DIRECT_IO_ALLOW_MMAP offered at INIT */
	atomic_uint_fast64_t init_unique;
	/* why passthrough was turned off (FS_PT_REFUSED); written once, by
	 * the thread that turned it off, under off_lock */
	pthread_mutex_t off_lock;
	char off_why[96];
	atomic_uint_fast64_t backing_ids;
};

/*
 * The OPEN reply this thread is about to write (fs_pt_reply_open()):
 * libfuse writes a reply in the thread that calls fuse_reply_*(), before
 * that call returns, so the next writev of this thread is that reply.
 */
static _Thread_local struct {
	bool armed;
	bool edited;
	uint32_t id;
} pt_mark;

struct fs_pt *fs_pt_new(bool want)
{
	struct fs_pt *pt = calloc(1, sizeof(*pt));

	if (!pt)
		return NULL;
	pt->want = want;
	pthread_mutex_init(&pt->off_lock, NULL);
	atomic_init(&pt->fd, -1);
	atomic_init(&pt->mode, want ? FS_PT_WAITING : FS_PT_OFF);
	return pt;
}

void fs_pt_free(struct fs_pt *pt)
{
	if (!pt)
		return;
	pthread_mutex_destroy(&pt->off_lock);
	free(pt);
}

int fs_pt_install(struct fs_pt *pt, struct fuse_session *se,
		  ssize_t (*read)(int fd, void *buf, size_t len, void *userdata),
		  ssize_t (*writev)(int fd, struct iovec *iov, int count, void *userdata))
{
	struct fuse_custom_io io = {.read = read, .writev = writev};
	int fd = fuse_session_fd(se);
	int r;

	if (!pt->want)
		return 0;
	if (fd < 0)
		return -EBADF;
	r = fuse_session_custom_io(se, &io, fd);
	if (r < 0)
		return r;
	atomic_store(&pt->fd, fd);
	return 0;
}

/* A request came in: learn what the kernel offers from FUSE_INIT. */
static void look_at_request(struct fs_pt *pt, const void *buf, size_t n)
{
	struct pt_in_header h;
	struct pt_init_in in = {0};
	size_t arg;

	if (n < sizeof(h))
		return;
	memcpy(&h, buf, sizeof(h));
	if (h.opcode != PT_OP_INIT)
		return;
	arg = n - sizeof(h);
	/* before 7.36 the request has no flags2 */
	memcpy(&in, (const char *)buf + sizeof(h), arg < sizeof(in) ? arg : sizeof(in));
	if (arg < sizeof(in) || !(in.flags & PT_INIT_EXT))
		in.flags2 = 0;
	atomic_store(&pt->offered, in.major == 7 && in.minor >= PT_MIN_MINOR &&
				       (in.flags2 & PT_INIT2_PASSTHROUGH));
	atomic_store(&pt->offered_mmap,
		     in.major == 7 && (in.flags2 & PT_INIT2_DIRECT_IO_ALLOW_MMAP));
	atomic_store(&pt->init_unique, h.unique);
	if (!atomic_load(&pt->offered))
		atomic_store(&pt->mode, FS_PT_NO_KERNEL);
}

ssize_t fs_pt_read(struct fs_pt *pt, int fd, void *buf, size_t len)
{
	ssize_t n = read(fd, buf, len);

	if (n > 0 && atomic_load_explicit(&pt->mode, memory_order_relaxed) == FS_PT_WAITING)
		look_at_request(pt, buf, (size_t)n);
	return n;
}

/* The INIT reply (header in iov[0], the whole fuse_init_out in iov[1]):
 * accept what was offered.  Writes an edited copy, or returns 1 to have
 * the caller write it as it is. */
static ssize_t edit_init(struct fs_pt *pt, int fd, struct iovec *iov, int count)
{
	struct pt_out_header h;
	struct pt_init_out out;
	unsigned char arg[PT_INIT_OUT_MAX] = {0};
	struct iovec edited[2];
	bool pass = atomic_load(&pt->offered), mmap_ok = atomic_load(&pt->offered_mmap);
	ssize_t n;

	if (count != 2 || iov[0].iov_len != sizeof(h) || iov[1].iov_len < sizeof(out) ||
	    iov[1].iov_len > sizeof(arg))
		return 1;
	memcpy(&h, iov[0].iov_base, sizeof(h));
	if (h.error != 0 || h.unique != atomic_load(&pt->init_unique))
		return 1;
	memcpy(arg, iov[1].iov_base, iov[1].iov_len);
	memcpy(&out, arg, sizeof(out));
	if (pass || mmap_ok)
		out.flags |= PT_INIT_EXT;
	if (pass) {
		out.flags2 |= PT_INIT2_PASSTHROUGH;
		out.max_stack_depth = PT_MAX_STACK_DEPTH;
	}
	if (mmap_ok)
		out.flags2 |= PT_INIT2_DIRECT_IO_ALLOW_MMAP;
	memcpy(arg, &out, sizeof(out));
	edited[0] = iov[0];
	edited[1].iov_base = arg;
	edited[1].iov_len = iov[1].iov_len;
	n = writev(fd, edited, 2);
	if (n >= 0) {
		atomic_store(&pt->direct_mmap, mmap_ok);
		/* the kernel's answer comes with the first BACKING_OPEN */
		atomic_store(&pt->mode, pass ? FS_PT_ON : FS_PT_NO_KERNEL);
	}
	return n;
}

/* The armed OPEN reply: header and a fuse_open_out, no error. */
static ssize_t edit_open(int fd, struct iovec *iov, int count)
{
	struct pt_out_header h;
	struct pt_open_out out;
	struct iovec edited[2];
	ssize_t n;

	if (count != 2 || iov[0].iov_len != sizeof(h) || iov[1].iov_len != sizeof(out))
		return 1;
	memcpy(&h, iov[0].iov_base, sizeof(h));
	if (h.error != 0 || h.len != sizeof(h) + sizeof(out))
		return 1;
	memcpy(&out, iov[1].iov_base, sizeof(out));
	out.open_flags = (out.open_flags & PT_FOPEN_MASK) | PT_FOPEN_PASSTHROUGH;
	out.backing_id = (int32_t)pt_mark.id;
	edited[0] = iov[0];
	edited[1].iov_base = &out;
	edited[1].iov_len = sizeof(out);
	n = writev(fd, edited, 2);
	if (n >= 0 || errno == ENOENT)
		pt_mark.edited = true;
	return n;
}

/* Passthrough is off for the mount from now on, because of @why (for
 * the status), said once. */
static void turn_off(struct fs_pt *pt, const char *why)
{
	int expect = FS_PT_ON;
	bool first;

	pthread_mutex_lock(&pt->off_lock);
	first = atomic_compare_exchange_strong(&pt->mode, &expect, FS_PT_REFUSED);
	if (first)
		snprintf(pt->off_why, sizeof(pt->off_why), "%s", why);
	pthread_mutex_unlock(&pt->off_lock);
	if (first)
		log_info("FUSE passthrough is off for this mount: %s; reads are served by the "
			 "daemon",
			 why);
}

ssize_t fs_pt_writev(struct fs_pt *pt, int fd, struct iovec *iov, int count)
{
	ssize_t n = 1;

	if (pt_mark.armed) {
		pt_mark.armed = false;
		n = edit_open(fd, iov, count);
		if (n == 1)
			turn_off(pt, "an OPEN reply was not the one libfuse 3.14 sends");
	} else if (atomic_load_explicit(&pt->mode, memory_order_relaxed) == FS_PT_WAITING) {
		n = edit_init(pt, fd, iov, count);
	}
	return n == 1 ? writev(fd, iov, count) : n;
}

enum fs_pt_mode fs_pt_mode(const struct fs_pt *pt)
{
	return (enum fs_pt_mode)atomic_load(&pt->mode);
}

bool fs_pt_usable(const struct fs_pt *pt)
{
	return atomic_load_explicit(&pt->mode, memory_order_relaxed) == FS_PT_ON;
}

bool fs_pt_direct_mmap(const struct fs_pt *pt)
{
	return atomic_load_explicit(&pt->direct_mmap, memory_order_relaxed);
}

void fs_pt_describe(struct fs_pt *pt, char *buf, size_t len)
{
	switch (fs_pt_mode(pt)) {
	case FS_PT_OFF:
		snprintf(buf, len, "off (passthrough=off)");
		break;
	case FS_PT_WAITING:
		snprintf(buf, len, "waiting (no INIT yet)");
		break;
	case FS_PT_NO_KERNEL:
		snprintf(buf, len, "unavailable (kernel offers no FUSE passthrough)");
		break;
	case FS_PT_REFUSED:
		pthread_mutex_lock(&pt->off_lock);
		snprintf(buf, len, "unavailable (%s)", pt->off_why);
		pthread_mutex_unlock(&pt->off_lock);
		break;
	case FS_PT_ON:
		snprintf(buf, len, "on");
		break;
	}
}

uint64_t fs_pt_backing_ids(const struct fs_pt *pt)
{
	return atomic_load_explicit(&pt->backing_ids, memory_order_relaxed);
}

int fs_pt_backing_open(struct fs_pt *pt, int fd, uint32_t *ret_id)
{
	struct pt_backing_map map = {.fd = fd};
	char why[96];
	int id, err;

	if (!fs_pt_usable(pt))
		return -EOPNOTSUPP;
	id = ioctl(atomic_load(&pt->fd), PT_DEV_IOC_BACKING_OPEN, &map);
	if (id < 0) {
		err = errno;
		if (err == ENOTTY || err == EPERM) {
			snprintf(why, sizeof(why), "backing open refused: %s", strerror(err));
			turn_off(pt, why);
		}
		return -err;
	}
	if (id == 0)
		return -EPROTO; /* ids start at 1: 0 means "none" to the caller */
	atomic_fetch_add(&pt->backing_ids, 1);
	*ret_id = (uint32_t)id;
	return 0;
}

int fs_pt_backing_close(struct fs_pt *pt, uint32_t id)
{
	if (ioctl(atomic_load(&pt->fd), PT_DEV_IOC_BACKING_CLOSE, &id) < 0)
		return -errno;
	atomic_fetch_sub(&pt->backing_ids, 1);
	return 0;
}

int fs_pt_reply_open(struct fs_pt *pt, fuse_req_t req, const struct fuse_file_info *fi, uint32_t id)
{
	int r;

	(void)pt; /* not installed: the mark is never consumed, and cleared below */
	pt_mark.armed = true;
	pt_mark.edited = false;
	pt_mark.id = id;
	r = fuse_reply_open(req, fi);
	pt_mark.armed = false;
	if (r < 0)
		return r;
	return pt_mark.edited ? 1 : 0;
}
