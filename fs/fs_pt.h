/*
 * fs_pt: FUSE passthrough (Linux 6.9+) on libfuse 3.14, which has no API
 * for it.
 *
 * The layer sits between libfuse and /dev/fuse as a custom I/O
 * (fuse_session_custom_io(), installed on the session's own fd after
 * fuse_session_mount()).  It edits two kinds of replies on their way out
 * and touches nothing else:
 *
 *   read    watches FUSE_INIT: does the kernel offer passthrough (minor
 *           >= 40, FUSE_INIT_EXT, flags2 bit 5) and mmap of direct-I/O
 *           handles (FUSE_DIRECT_IO_ALLOW_MMAP, flags2 bit 4)?
 *   writev  the INIT reply: accepts what was offered (FUSE_INIT_EXT, the
 *           passthrough bit with max_stack_depth 1, DIRECT_IO_ALLOW_MMAP);
 *           an OPEN reply that the replying thread armed just before
 *           fuse_reply_open() (fs_pt_reply_open(), a thread-local mark):
 *           FOPEN_PASSTHROUGH and the backing id.
 *
 * The kernel confirms passthrough only at the first FUSE_DEV_IOC_BACKING_
 * OPEN: ENOTTY (no such ioctl) or EPERM (not negotiated, or no
 * CAP_SYS_ADMIN) turn it off for the mount, logged once, and callers fall
 * back to the daemon's own replies.  FOPEN_PASSTHROUGH is never sent
 * without a backing id the kernel gave.
 *
 * The layer knows nothing of inodes or objects: which open gets which
 * mode, and when a backing id is closed, is the caller's (fs_file.c).
 *
 * Threading: all functions are thread-safe; the state is atomics.  The
 * owner of the session installs two hooks of its own that find its
 * struct fs_pt from the session's userdata and call fs_pt_read() and
 * fs_pt_writev() (libfuse hands custom I/O only that userdata).
 */
#ifndef OBJFS_FS_PT_H
#define OBJFS_FS_PT_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct fs_pt;

enum fs_pt_mode {
	FS_PT_OFF,	 /* not wanted (passthrough=off): the layer is not installed */
	FS_PT_WAITING,	 /* installed, INIT not seen yet */
	FS_PT_NO_KERNEL, /* the kernel offers no passthrough at INIT */
	FS_PT_REFUSED,	 /* accepted at INIT, then turned off: BACKING_OPEN refused, or
			    an OPEN reply not as libfuse 3.14 sends it */
	FS_PT_ON,	 /* accepted; confirmed by the first BACKING_OPEN */
};

/* A layer for one session; @want false: passthrough=off (install() then
 * installs nothing).  NULL on allocation failure. */
struct fs_pt *fs_pt_new(bool want);
/* NULL is fine.  Call after the session is destroyed. */
void fs_pt_free(struct fs_pt *pt);

/*
 * Install the layer on @se's fd (after fuse_session_mount(), before the
 * session loop).  @read and @writev are the owner's hooks (see the top of
 * this file).  0, or -errno from fuse_session_custom_io().  Does nothing
 * when not wanted.
 */
int fs_pt_install(struct fs_pt *pt, struct fuse_session *se,
		  ssize_t (*read)(int fd, void *buf, size_t len, void *userdata),
		  ssize_t (*writev)(int fd, struct iovec *iov, int count, void *userdata));

/* What the owner's hooks call: read(2) and writev(2) on @fd with the
 * layer's look and edits; -1 and errno on failure, as libfuse expects. */
ssize_t fs_pt_read(struct fs_pt *pt, int fd, void *buf, size_t len);
ssize_t fs_pt_writev(struct fs_pt *pt, int fd, struct iovec *iov, int count);

enum fs_pt_mode fs_pt_mode(const struct fs_pt *pt);
/* Can an open be answered in passthrough mode now (ON, or accepted at
 * INIT and not yet refused)? */
bool fs_pt_usable(const struct fs_pt *pt);
/* Was FUSE_DIRECT_IO_ALLOW_MMAP accepted at INIT: may FOPEN_DIRECT_IO
 * handles be mmapped MAP_SHARED?  (Without it such an mmap fails with
 * ENODEV, so direct I/O must not be used where mmap is expected.) */
bool fs_pt_direct_mmap(const struct fs_pt *pt);
/* The mode in words for a status report: "on", "off (passthrough=off)",
 * "unavailable (kernel offers no FUSE passthrough)", "unavailable
 * (backing open refused: <errno>)", "waiting (no INIT yet)".  Takes a
 * lock of @pt. */
void fs_pt_describe(struct fs_pt *pt, char *buf, size_t len);
/* Backing ids open now. */
uint64_t fs_pt_backing_ids(const struct fs_pt *pt);

/*
 * Register @fd (open for reading; the caller still owns and closes it)
 * as a backing file: the kernel keeps its own reference.  0 and *ret_id,
 * or -errno.  -ENOTTY or -EPERM turn passthrough off for the mount
 * (fs_pt_usable() is false from then on); -EOPNOTSUPP if it is not
 * usable.  Other errors (EBADF, EMFILE, ELOOP...) concern this file only.
 */
int fs_pt_backing_open(struct fs_pt *pt, int fd, uint32_t *ret_id);
/* Close a backing id (the kernel keeps the file for handles still open
 * on it).  0 or -errno. */
int fs_pt_backing_close(struct fs_pt *pt, uint32_t id);

/*
 * fuse_reply_open() of @req with @fi, edited on its way out to open in
 * passthrough mode on backing id @id (@fi->keep_cache must be 0; only
 * direct_io and noflush may go with passthrough, other open flags are
 * dropped).  Returns 1 if the reply went out in passthrough mode, 0 if it
 * went out as @fi says (the reply was not the OPEN reply this layer
 * expects: never seen with 3.14), or fuse_reply_open()'s negative errno
 * (-ENOENT: the open was interrupted, the kernel never saw it).
 */
int fs_pt_reply_open(struct fs_pt *pt, fuse_req_t req, const struct fuse_file_info *fi,
		     uint32_t id);

#endif
