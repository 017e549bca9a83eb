/*
 * mountpoint: inspecting a mount point, and detaching dead objfs mounts.
 *
 * The path is opened with O_PATH, which walks to the root of a dead FUSE
 * mount without asking its (gone) daemon anything.  Then:
 *   - /proc/self/fdinfo/FD names the mount the descriptor is on (mnt_id),
 *     and /proc/self/mountinfo gives that mount's type, source and mount
 *     point;
 *   - readlink(/proc/self/fd/FD) says where the descriptor is, which is
 *     the mount point only at the mount's root;
 *   - statx(FD, AT_STATX_FORCE_SYNC) tells live from dead: a FUSE mount
 *     whose daemon is gone answers ENOTCONN (plain fstat(2) may answer
 *     from the attributes the kernel still caches);
 *   - umount2(/proc/self/fd/FD, MNT_DETACH) detaches the mount the
 *     descriptor is on, and no other, even if something was mounted on
 *     the path in the meantime.
 * Mounts may be stacked, so this repeats until the path is no dead objfs
 * mount.
 */
#define _GNU_SOURCE
#include "mountpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* dead mounts detached on one path at the most */
#define MAX_STACKED 16

struct mount_entry {
	char point[PATH_MAX];
	char type[64];
	char source[256];
};

static int fail(char *err, size_t errlen, int r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return r;
}

/* The mount id of the mount @fd is on.  0, -EBADMSG or -errno. */
static int fd_mount_id(int fd, int *ret_id)
{
	char path[64], line[256];
	int r = -EBADMSG, id;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "mnt_id: %d", &id) == 1) {
			*ret_id = id;
			r = 0;
			break;
		}
	}
	fclose(f);
	return r;
}

/* mountinfo writes ' ', '\t', '\n' and '\\' as \ooo.  In place. */
static void unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

static int copy_field(char *dst, size_t len, const char *src)
{
	if (!src || strlen(src) >= len)
		return -EBADMSG;
	memcpy(dst, src, strlen(src) + 1);
	unescape(dst);
	return 0;
}

/*
 * One line of /proc/self/mountinfo:
 *   ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER
 * 0 if it is mount @id (filled in), 1 if another, -EBADMSG.
 */
static int parse_line(char *line, int id, struct mount_entry *ret)
{
	char *sep, *save = NULL, *tok;
	int i, r;

	if (sscanf(line, "%d ", &i) != 1)
		return -EBADMSG;
	if (i != id)
		return 1;
	sep = strstr(line, " - ");
	if (!sep)
		return -EBADMSG;
	*sep = '\0';
	tok = strtok_r(line, " ", &save);
	for (i = 0; i < 4 && tok; i++)
		tok = strtok_r(NULL, " ", &save);
	r = copy_field(ret->point, sizeof(ret->point), tok);
	save = NULL;
	tok = strtok_r(sep + 3, " \n", &save);
	if (r == 0)
		r = copy_field(ret->type, sizeof(ret->type), tok);
	tok = strtok_r(NULL, " \n", &save);
	if (r == 0)
		r = copy_field(ret->source, sizeof(ret->source), tok);
	return r;
}

/* The mount @fd is on.  0, -ENOENT, -EBADMSG or -errno. */
static int fd_mount(int fd, struct mount_entry *ret)
{
	char *line = NULL;
	size_t cap = 0;
	int id, r;
	FILE *f;

	r = fd_mount_id(fd, &id);
	if (r < 0)
		return r;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	r = -ENOENT;
	while (getline(&line, &cap, f) > 0) {
		r = parse_line(line, id, ret);
		if (r <= 0)
			break;
		r = -ENOENT;
	}
	free(line);
	fclose(f);
	return r;
}

static bool is_objfs(const struct mount_entry *e)
{
	return !strcmp(e->type, "fuse.objfs") ||
	       (!strcmp(e->type, "fuse") && !strncmp(e->source, "objfs:", 6));
}

/*
 * One look at @path.  0 for a directory objfsd may mount on (*ret_fd -1),
 * or for the root of a dead objfs mount (*ret_fd an O_PATH descriptor of
 * it, which the caller closes); @ret_path gets the absolute path.
 */
static int inspect(const char *path, int *ret_fd, char *ret_path, char *err, size_t errlen)
{
	char self[64], where[PATH_MAX];
	struct mount_entry e;
	struct statx st;
	ssize_t n;
	int fd, r;

	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		return fail(err, errlen, r, "mount point %s: %s", path, strerror(-r));
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	n = readlink(self, where, sizeof(where) - 1);
	if (n < 0 || n >= (ssize_t)sizeof(where) - 1 || where[0] != '/') {
		r = n < 0 ? -errno : -ENAMETOOLONG;
		close(fd);
		return fail(err, errlen, r, "mount point %s: cannot resolve it: %s", path,
			    strerror(-r));
	}
	where[n] = '\0';
	r = statx(fd, "", AT_EMPTY_PATH | AT_STATX_FORCE_SYNC, STATX_TYPE, &st) < 0 ? -errno : 0;
	if (r != -ENOTCONN) {
		/* a daemon that answers, even with an error, is alive */
		if (fd_mount(fd, &e) == 0 && is_objfs(&e) && !strcmp(e.point, where))
			r = fail(err, errlen, -EBUSY,
				 "%s is already mounted by a live objfsd (%s); unmount it first",
				 where, e.source);
		else if (r < 0)
			r = fail(err, errlen, r, "mount point %s: %s", path, strerror(-r));
		else if (!S_ISDIR(st.stx_mode))
			r = fail(err, errlen, -ENOTDIR, "mount point %s is not a directory", path);
		close(fd);
		if (r == 0) {
			memcpy(ret_path, where, (size_t)n + 1);
			*ret_fd = -1;
		}
		return r;
	}
	r = fd_mount(fd, &e);
	if (r < 0)
		r = fail(err, errlen, -ENOTCONN,
			 "mount point %s: %s, and /proc does not say which mount it is (%s)", path,
			 strerror(ENOTCONN), strerror(-r));
	else if (!is_objfs(&e))
		r = fail(err, errlen, -ENOTCONN,
			 "mount point %s is a dead %s mount (source %s) of another filesystem; "
			 "not touching it: unmount it first",
			 where, e.type, e.source);
	else if (strcmp(e.point, where))
		r = fail(err, errlen, -ENOTCONN,
			 "mount point %s lies inside the dead objfs mount on %s; unmount that "
			 "or mount on %s",
			 where, e.point, e.point);
	if (r < 0) {
		close(fd);
		return r;
	}
	memcpy(ret_path, where, (size_t)n + 1);
	*ret_fd = fd;
	return 0;
}

int mountpoint_prepare(const char *path, bool detach, char *ret_path, size_t pathlen,
		       unsigned *ret_detached, char *err, size_t errlen)
{
	char where[PATH_MAX], self[64];
	unsigned n = 0;
	int fd = -1, r;

	for (;;) {
		r = inspect(path, &fd, where, err, errlen);
		if (r < 0)
			return r;
		if (fd < 0)
			break;
		n++;
		if (!detach || n > MAX_STACKED) {
			close(fd);
			if (detach)
				return fail(
				    err, errlen, -ELOOP,
				    "mount point %s: more than %d dead objfs mounts stacked", where,
				    MAX_STACKED);
			break;
		}
		snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
		r = umount2(self, MNT_DETACH) < 0 ? -errno : 0;
		close(fd);
		if (r < 0)
			return fail(err, errlen, r, "cannot detach the dead objfs mount on %s: %s",
				    where, strerror(-r));
	}
	if (strlen(where) >= pathlen)
		return fail(err, errlen, -ENAMETOOLONG, "mount point %s: path too long", where);
	memcpy(ret_path, where, strlen(where) + 1);
	if (ret_detached)
		*ret_detached = n;
	return 0;
}
