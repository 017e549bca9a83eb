/*
 * fs_lastclose: what FLUSH reads of /proc about the process closing a
 * file being written (docs/design.md, "When a writer is done", has the
 * rules that use it): whether the process that opened the handle, or one
 * of its children, still holds the file, by descriptor or by a writable
 * shared mapping (fs_flush_verdict()), and whether the closing thread is
 * dying from a signal (fs_task_killed_by()).  Reading /proc sends nothing
 * to this filesystem (readlink and fdinfo, never stat).  It takes no lock
 * and knows no inode.
 */
#include "fs_i.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* descriptors FLUSH looks at, at most, before it seals anyway */
#define FLUSH_SCAN_MAX 1024
/* bytes of /proc/<pid>/maps read at once (see maps_hold_ino()) */
#define MAPS_READ (64 * 1024)

/* What FLUSH looks for in other descriptor tables. */
struct fd_scan {
	const struct fs *fs;
	uint64_t ino;	 /* the file's inode number */
	unsigned budget; /* descriptors still to look at */
	pid_t mapper;	 /* found: a thread that maps the file shared and writable */
	bool maps;	 /* look for such mappings too (see struct pending's mappable) */
};

/* The mount id and inode number in /proc/<tid>/fdinfo/<fd> (@dfd: that
 * fdinfo directory).  0, -ENOENT (closed meanwhile), -ENODATA (no "ino:"
 * line: before Linux 5.14). */
static int fdinfo_read(int dfd, const char *fd, int *ret_mnt, uint64_t *ret_ino)
{
	char buf[512], *at;
	ssize_t n;
	int f;

	f = openat(dfd, fd, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return -errno;
	n = read(f, buf, sizeof(buf) - 1);
	close(f);
	if (n < 0)
		return -ENOENT;
	buf[n] = '\0';
	at = strstr(buf, "\nino:");
	if (!at)
		return -ENODATA;
	*ret_ino = strtoull(at + 5, NULL, 10);
	at = strstr(buf, "\nmnt_id:");
	*ret_mnt = at ? (int)strtol(at + 8, NULL, 10) : 0;
	return 0;
}

/* Is mount @mnt_id, as thread @tid sees the mounts (another mount
 * namespace has other ids), our filesystem?  When it cannot tell, yes. */
static bool mnt_is_ours(const struct fs *fs, pid_t tid, int mnt_id)
{
	char path[64], line[4096];
	unsigned maj, min;
	bool ours = true;
	FILE *f;
	int id;

	if (!fs->mnt_id)
		return true;
	if (mnt_id == fs->mnt_id)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return true;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%d %*u %u:%u", &id, &maj, &min) == 3 && id == mnt_id) {
			ours = maj == fs->mnt_major && min == fs->mnt_minor;
			break;
		}
	}
	fclose(f);
	return ours;
}

/*
 * Does the descriptor table of thread @tid hold a file of ours with the
 * inode number sc->ino?  1 yes, 0 no, -errno if it cannot tell; -E2BIG
 * when sc->budget runs out.
 */
static int fds_hold_ino(struct fd_scan *sc, pid_t tid)
{
	char path[64], link[8];
	struct dirent *de;
	int dfd, ifd, r = 0, mnt = 0;
	uint64_t found = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)tid);
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? 0 : -errno; /* gone: holds nothing */
	snprintf(path, sizeof(path), "/proc/%d/fdinfo", (int)tid);
	ifd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ifd < 0)
		r = errno == ENOENT ? 0 : -errno;
	d = ifd < 0 ? NULL : fdopendir(dfd);
	if (!d) {
		close(dfd);
		if (ifd >= 0)
			close(ifd);
		return ifd < 0 ? r : -ENOMEM;
	}
	while (r == 0 && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (sc->budget == 0) {
			r = -E2BIG;
			break;
		}
		sc->budget--;
		/* pipe:[N], socket:[N], anon_inode:...: never a file of ours */
		if (readlinkat(dfd, de->d_name, link, sizeof(link)) > 0 && link[0] != '/')
			continue;
		r = fdinfo_read(ifd, de->d_name, &mnt, &found);
		if (r == -ENOENT)
			r = 0;
		else if (r == 0 && found == sc->ino && mnt_is_ours(sc->fs, tid, mnt))
			r = 1;
	}
	closedir(d);
	close(ifd);
	return r;
}

/*
 * Does thread @tid map the file shared and writable (/proc/<tid>/maps:
 * "start-end rw-s offset MAJ:MIN inode path")?  Such a mapping holds the
 * file open like a descriptor does: its stores reach the daemon as WRITE
 * requests when it is unmapped (the kernel writes its dirty pages back
 * then), before the RELEASE that comes once the last mapping is gone.  1
 * yes, 0 no, -errno if it cannot tell.
 */
static int maps_hold_ino(struct fd_scan *sc, pid_t tid)
{
	unsigned long long ino;
	char path[64], line[512], perms[8], *big;
	unsigned maj, min;
	int r = 0, ok;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT || errno == ESRCH ? 0 : -errno;
	/* each read() of /proc makes the kernel walk the mappings again:
	 * few and large ones (small reads of a Python process's lines made
	 * each close much slower: docs/benchmarks.md, MAPS_READ) */
	big = malloc(MAPS_READ);
	if (big)
		(void)setvbuf(f, big, _IOFBF, MAPS_READ);
	while (r == 0 && fgets(line, sizeof(line), f)) {
		ok = sscanf(line, "%*x-%*x %7s %*x %x:%x %llu", perms, &maj, &min, &ino) == 4;
		/* a long path leaves the rest of its line for the next fgets */
		if (!strchr(line, '\n') && !feof(f)) {
			int c;

			while ((c = getc(f)) != EOF && c != '\n')
				;
		}
		if (!ok || perms[1] != 'w' || perms[3] != 's' || ino != sc->ino)
			continue;
		if (!sc->fs->mnt_id || (maj == sc->fs->mnt_major && min == sc->fs->mnt_minor)) {
			sc->mapper = tid;
			r = 1;
		}
	}
	fclose(f);
	free(big);
	return r;
}

/* Does thread @tid hold the file, by a descriptor or a writable shared
 * mapping?  As fds_hold_ino(). */
static int task_holds_ino(struct fd_scan *sc, pid_t tid)
{
	int r = fds_hold_ino(sc, tid);

	return r == 0 && sc->maps ? maps_hold_ino(sc, tid) : r;
}

/* Do the direct children of the thread group of @tid hold the file?  As
 * fds_hold_ino(); a kernel without CONFIG_PROC_CHILDREN shows none. */
static int children_hold_ino(struct fd_scan *sc, pid_t tid)
{
	char path[96], buf[4096], *s, *end;
	struct dirent *de;
	int r = 0, f;
	ssize_t n;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)tid);
	d = opendir(path);
	if (!d)
		return 0;
	while (r == 0 && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/children", (int)tid, de->d_name);
		f = open(path, O_RDONLY | O_CLOEXEC);
		if (f < 0)
			continue;
		n = read(f, buf, sizeof(buf) - 1);
		close(f);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		/* a full buffer may end in half a pid: drop it */
		if ((size_t)n == sizeof(buf) - 1 && (s = strrchr(buf, ' ')))
			*s = '\0';
		for (s = buf; r == 0 && *s;) {
			long child = strtol(s, &end, 10);

			if (end == s)
				break;
			s = end;
			if (child > 0)
				r = task_holds_ino(sc, (pid_t)child);
		}
	}
	closedir(d);
	return r;
}

enum flush_verdict fs_flush_verdict(fuse_req_t req, const struct handle *h, uint64_t ino, bool maps,
				    pid_t *ret_mapper)
{
	struct fd_scan sc = {fuse_req_userdata(req), ino, FLUSH_SCAN_MAX, 0, maps};
	pid_t tid = fuse_req_ctx(req)->pid;
	char path[64];
	int r;

	if (tid <= 0 || h->opener <= 0)
		return FLUSH_BLIND;
	if (tid != h->opener) {
		snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)tid, (int)h->opener);
		/* another process, unless the opener thread ended and this is
		 * another thread of its process */
		if (access(path, F_OK) < 0 &&
		    (!h->opener_tgid || fs_task_tgid(tid) != h->opener_tgid))
			return FLUSH_NOT_LAST;
	}
	r = task_holds_ino(&sc, tid);
	if (r == 0)
		r = children_hold_ino(&sc, tid);
	if (r == 1) {
		*ret_mapper = sc.mapper;
		return FLUSH_NOT_LAST;
	}
	if (r == -E2BIG) {
		log_debug("flush of object %" PRIu64 ": over %u descriptors to look at; sealing",
			  ino, FLUSH_SCAN_MAX);
		return FLUSH_LAST;
	}
	if (r == -EACCES || r == -EPERM || r == -ENODATA) {
		log_debug("flush of object %" PRIu64 ": cannot see the descriptors of %d: %s", ino,
			  (int)tid, strerror(-r));
		return FLUSH_BLIND;
	}
	if (r < 0)
		log_debug("flush of object %" PRIu64 ": cannot look at the descriptors of %d: %s; "
			  "sealing now",
			  ino, (int)tid, strerror(-r));
	return FLUSH_LAST;
}

int fs_task_killed_by(pid_t tid)
{
	char path[64], buf[1024], *s;
	unsigned long long flags = 0;
	long long code = 0;
	ssize_t n;
	int f, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)tid);
	f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return -errno;
	n = read(f, buf, sizeof(buf) - 1);
	close(f);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	/* "pid (comm) state ...": comm may hold spaces and parentheses */
	s = strrchr(buf, ')');
	if (!s)
		return -EIO;
	for (field = 3, s++; *s && field <= 52; field++) {
		while (*s == ' ')
			s++;
		if (field == 9)
			flags = strtoull(s, NULL, 10);
		else if (field == 52)
			code = strtoll(s, NULL, 10);
		while (*s && *s != ' ')
			s++;
	}
	if (field <= 52)
		return -ENODATA; /* a kernel before 3.5 */
	if (!(flags & 0x4))	 /* PF_EXITING */
		return 0;
	return (int)(code & 0x7f);
}

pid_t fs_task_tgid(pid_t tid)
{
	char path[64], buf[512], *at;
	ssize_t n;
	int f;

	if (tid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return 0;
	n = read(f, buf, sizeof(buf) - 1);
	close(f);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	at = strstr(buf, "\nTgid:");
	return at ? (pid_t)strtol(at + 6, NULL, 10) : 0;
}
