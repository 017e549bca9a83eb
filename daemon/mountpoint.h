/*
 * mountpoint: what is mounted on a mount point before objfsd mounts there.
 *
 * A daemon that dies (kill -9, a crash) leaves its FUSE mount behind, and
 * the kernel answers ENOTCONN for it until someone unmounts it.  objfsd
 * detaches such a dead objfs mount itself, so that mounting again needs
 * no manual step; it never touches a live mount, nor a mount of another
 * filesystem.
 */
#ifndef OBJFS_MOUNTPOINT_H
#define OBJFS_MOUNTPOINT_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Check that objfsd may mount on @path, and with @detach, detach the dead
 * objfs mounts on it (MNT_DETACH of those very mounts, found through a
 * file descriptor: never the mount a path happens to name at the time).
 * A dead objfs mount is the root of a mount of type fuse.objfs (or fuse
 * with an "objfs:" source) on which stat(2), asking the daemon rather than
 * the kernel's cache, fails with ENOTCONN.
 *
 * On success @ret_path (@pathlen bytes, PATH_MAX is enough; it may be
 * @path itself) holds the absolute path, symlinks resolved, and *ret_detached (may be NULL) the
 * number of dead mounts detached (without @detach: found, and left).
 * Errors, each with a message naming the path in @err:
 *   -EBUSY     @path is the root of a live objfs mount
 *   -ENOTCONN  @path is a dead mount of another filesystem, or lies inside
 *              a dead objfs mount
 *   -ENOTDIR   @path is not a directory
 *   -errno     of open(2), statx(2), umount2(2) or reading /proc
 */
int mountpoint_prepare(const char *path, bool detach, char *ret_path, size_t pathlen,
		       unsigned *ret_detached, char *err, size_t errlen);

#endif
