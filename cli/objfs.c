/*
 * objfs: the command-line tool for a mounted objfs node.
 *
 * It talks to the daemon through the mount itself: the daemon answers
 * reads of the "user.objfs.*" extended attributes, so no extra socket or
 * credentials are needed, and anything that can read a file's xattrs can
 * script objfs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
    "usage: objfs COMMAND [ARGS]\n"
    "\n"
    "Commands:\n"
    "  status MOUNTPOINT   store capacity and use, object count, Redis state\n"
    "  stat PATH...        id, size, checksum, holders and local state of objects\n"
    "  nodes MOUNTPOINT    the cluster's nodes, live or down, and their addresses\n"
    "  prefetch [-q] PATH...\n"
    "                      stage objects (directories: everything below) onto\n"
    "                      this node before they are used, showing progress\n"
    "  help                this text\n";

/* Read xattr @name of @path into a heap string (caller frees). */
static char *get_xattr(const char *path, const char *name, int *ret_err)
{
	int tries;

	/* A value can grow between the size probe and the read (a fetch's
	 * progress does): ERANGE means probe again. */
	for (tries = 0; tries < 8; tries++) {
		ssize_t n = getxattr(path, name, NULL, 0);
		char *buf;

		if (n < 0) {
			*ret_err = errno;
			return NULL;
		}
		buf = malloc((size_t)n + 64);
		if (!buf) {
			*ret_err = ENOMEM;
			return NULL;
		}
		n = getxattr(path, name, buf, (size_t)n + 63);
		if (n >= 0) {
			buf[n] = '\0';
			return buf;
		}
		*ret_err = errno;
		free(buf);
		if (*ret_err != ERANGE)
			return NULL;
	}
	return NULL;
}

/* Read xattr @name of the mount root @mnt, or say why not (NULL). */
static char *root_xattr(const char *mnt, const char *name)
{
	char *text;
	int err;

	text = get_xattr(mnt, name, &err);
	if (!text) {
		if (err == ENODATA || err == ENOTSUP)
			fprintf(stderr, "objfs: %s is not the root of an objfs mount\n", mnt);
		else
			fprintf(stderr, "objfs: %s: %s\n", mnt, strerror(err));
	}
	return text;
}

static int cmd_status(int argc, char **argv)
{
	char *text;

	if (argc != 1) {
		fprintf(stderr, "usage: objfs status MOUNTPOINT\n");
		return 2;
	}
	text = root_xattr(argv[0], "user.objfs.status");
	if (!text)
		return 1;
	fputs(text, stdout);
	free(text);
	return 0;
}

static int stat_one(const char *path)
{
	char *id, *csum, *loc, *p;
	struct stat st;
	int err = 0;

	if (stat(path, &st) < 0) {
		fprintf(stderr, "objfs: %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "objfs: %s: not an object (a directory?)\n", path);
		return 1;
	}
	id = get_xattr(path, "user.objfs.id", &err);
	if (!id) {
		fprintf(stderr, "objfs: %s: not on an objfs mount (%s)\n", path, strerror(err));
		return 1;
	}
	csum = get_xattr(path, "user.objfs.checksum", &err);
	loc = get_xattr(path, "user.objfs.locations", &err);
	for (p = loc; p && *p; p++)
		if (*p == ',')
			*p = ' ';
	printf("path: %s\n", path);
	printf("id: %s\n", id);
	printf("size: %lld\n", (long long)st.st_size);
	printf("checksum: %s\n", csum ? csum : "(not sealed yet)");
	printf("holders: %s\n", loc ? loc : "(unknown: Redis unreachable)");
	{
		char *st_local = get_xattr(path, "user.objfs.fetch", &err);
		char state[16] = "";
		unsigned long long done = 0, total = 0;

		if (st_local && sscanf(st_local, "%15s %llu %llu", state, &done, &total) == 3)
			printf("here: %s%s", state, strcmp(state, "fetching") ? "\n" : "");
		if (st_local && !strcmp(state, "fetching"))
			printf(" (%llu of %llu bytes)\n", done, total);
		free(st_local);
	}
	free(id);
	free(csum);
	free(loc);
	return 0;
}

static int cmd_stat(int argc, char **argv)
{
	int i, rc = 0;

	if (argc < 1) {
		fprintf(stderr, "usage: objfs stat PATH...\n");
		return 2;
	}
	for (i = 0; i < argc; i++) {
		if (i)
			putchar('\n');
		rc |= stat_one(argv[i]);
	}
	return rc;
}

static int cmd_nodes(int argc, char **argv)
{
	char *text, *line, *save = NULL;

	if (argc != 1) {
		fprintf(stderr, "usage: objfs nodes MOUNTPOINT\n");
		return 2;
	}
	text = root_xattr(argv[0], "user.objfs.nodes");
	if (!text)
		return 1;
	printf("%-20s %-5s %7s %-22s %-8s %10s %10s %-22s %s\n", "NODE", "STATE", "TTL", "ADDRESS",
	       "CAPS", "USED", "CAPACITY", "RDMA", "HOST");
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char node[80], state[8], host[260], addr[160], caps[80], rdma[160] = "-";
		long long ttl;
		unsigned long long used, cap;

		/* the RDMA address is missing from the lines of older daemons */
		if (sscanf(line, "%79s %7s %lld %259s %159s %79s %llu %llu %159s", node, state,
			   &ttl, host, addr, caps, &used, &cap, rdma) < 8)
			continue;
		if (!strcmp(state, "live"))
			printf("%-20s %-5s %6.1fs %-22s %-8s %9.1fM %9.1fM %-22s %s\n", node, state,
			       (double)ttl / 1000, addr, caps, (double)used / (1 << 20),
			       (double)cap / (1 << 20), rdma, host);
		else
			printf("%-20s %-5s %7s %-22s %-8s %10s %10s %-22s %s\n", node, "down", "-",
			       "-", "-", "-", "-", "-", "-");
	}
	free(text);
	return 0;
}

/* ---- prefetch ---- */

#define PREFETCH_PARALLEL 16

struct job {
	char *path;
	int fd;
	uint64_t size, done;
	bool finished;
};

struct jobs {
	struct job *v;
	size_t n, cap;
	int bad; /* paths that could not be listed */
};

static struct jobs *g_jobs;

static int add_job(const char *path, const struct stat *st)
{
	struct jobs *j = g_jobs;

	if (j->n == j->cap) {
		size_t cap = j->cap ? j->cap * 2 : 64;
		struct job *v = realloc(j->v, cap * sizeof(*v));

		if (!v)
			return -1;
		j->v = v;
		j->cap = cap;
	}
	j->v[j->n] = (struct job){.path = strdup(path), .fd = -1, .size = (uint64_t)st->st_size};
	if (!j->v[j->n].path)
		return -1;
	j->n++;
	return 0;
}

static int walk_cb(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	if (type == FTW_F && S_ISREG(st->st_mode))
		return add_job(path, st) < 0 ? 1 : 0;
	if (type == FTW_DNR || type == FTW_NS) {
		fprintf(stderr, "objfs: %s: cannot read\n", path);
		g_jobs->bad++;
	}
	return 0;
}

/* "local", "fetching" or "remote" for @path, with bytes in place. */
static int fetch_state(const char *path, char *state, size_t len, uint64_t *done)
{
	char *v;
	unsigned long long d = 0, t = 0;
	char s[16];
	int err = 0;

	v = get_xattr(path, "user.objfs.fetch", &err);
	if (!v)
		return -err;
	if (sscanf(v, "%15s %llu %llu", s, &d, &t) != 3) {
		free(v);
		return -EBADMSG;
	}
	snprintf(state, len, "%s", s);
	*done = d;
	free(v);
	return 0;
}

static void human(double b, char *buf, size_t len)
{
	const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int i = 0;

	while (b >= 1024 && i < 4) {
		b /= 1024;
		i++;
	}
	snprintf(buf, len, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

static double secs_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Finish job @jb: 0 once its object is local here, else 1 (reported). */
static int poll_job(struct job *jb)
{
	char state[16];
	uint64_t done = 0;
	char c;
	int r;

	r = fetch_state(jb->path, state, sizeof(state), &done);
	if (r == -ENODATA) {
		/* being written on this node: it is here already */
		jb->done = jb->size;
		jb->finished = true;
		return 0;
	}
	if (r < 0) {
		fprintf(stderr, "objfs: %s: %s\n", jb->path, strerror(-r));
		jb->finished = true;
		return 1;
	}
	jb->done = done;
	if (!strcmp(state, "local")) {
		jb->done = jb->size;
		jb->finished = true;
		return 0;
	}
	if (!strcmp(state, "fetching"))
		return -1; /* not yet */
	/* "remote": the fetch ended without a copy here; a read says why */
	if (jb->size && pread(jb->fd, &c, 1, (off_t)jb->size - 1) < 0)
		fprintf(stderr, "objfs: %s: %s\n", jb->path, strerror(errno));
	else
		fprintf(stderr, "objfs: %s: the fetch did not complete\n", jb->path);
	jb->finished = true;
	return 1;
}

static int cmd_prefetch(int argc, char **argv)
{
	struct jobs jobs = {0};
	uint64_t total = 0, done_bytes = 0;
	size_t next = 0, running = 0, finished = 0, i;
	bool quiet = false, tty = isatty(2);
	struct timespec t0;
	int failed = 0, a;
	char b1[32], b2[32], b3[32];

	if (argc > 0 && !strcmp(argv[0], "-q")) {
		quiet = true;
		argc--;
		argv++;
	}
	if (argc < 1) {
		fprintf(stderr, "usage: objfs prefetch [-q] PATH...\n");
		return 2;
	}
	g_jobs = &jobs;
	for (a = 0; a < argc; a++) {
		struct stat st;

		if (stat(argv[a], &st) < 0) {
			fprintf(stderr, "objfs: %s: %s\n", argv[a], strerror(errno));
			failed++;
		} else if (S_ISDIR(st.st_mode)) {
			if (nftw(argv[a], walk_cb, 32, FTW_PHYS | FTW_MOUNT) != 0) {
				fprintf(stderr, "objfs: %s: cannot walk: %s\n", argv[a],
					strerror(errno ? errno : ENOMEM));
				failed++;
			}
		} else if (S_ISREG(st.st_mode)) {
			if (add_job(argv[a], &st) < 0) {
				fprintf(stderr, "objfs: out of memory\n");
				return 1;
			}
		} else {
			fprintf(stderr, "objfs: %s: not a file or directory\n", argv[a]);
			failed++;
		}
	}
	failed += jobs.bad;
	for (i = 0; i < jobs.n; i++)
		total += jobs.v[i].size;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (finished < jobs.n) {
		uint64_t now_bytes = done_bytes;

		/* opening starts the fetch; keep a bounded number in flight */
		while (next < jobs.n && running < PREFETCH_PARALLEL) {
			struct job *jb = &jobs.v[next++];

			jb->fd = open(jb->path, O_RDONLY | O_CLOEXEC);
			if (jb->fd < 0) {
				fprintf(stderr, "objfs: %s: %s\n", jb->path, strerror(errno));
				jb->finished = true;
				finished++;
				failed++;
				continue;
			}
			running++;
		}
		for (i = 0; i < next; i++) {
			struct job *jb = &jobs.v[i];
			int r;

			if (jb->finished || jb->fd < 0)
				continue;
			r = poll_job(jb);
			if (r >= 0) {
				close(jb->fd);
				jb->fd = -1;
				running--;
				finished++;
				failed += r;
				if (r == 0)
					done_bytes += jb->size;
				if (!quiet && !tty && r == 0)
					fprintf(stderr, "staged %s\n", jb->path);
				continue;
			}
			now_bytes += jb->done;
		}
		if (!quiet && tty) {
			double t = secs_since(&t0);

			human((double)now_bytes, b1, sizeof(b1));
			human((double)total, b2, sizeof(b2));
			human(t > 0 ? (double)now_bytes / t : 0, b3, sizeof(b3));
			fprintf(stderr, "\r%zu/%zu objects  %s / %s  %3.0f%%  %s/s   ", finished,
				jobs.n, b1, b2,
				total ? 100.0 * (double)now_bytes / (double)total : 100.0, b3);
		}
		if (finished < jobs.n)
			usleep(100000);
	}
	if (!quiet) {
		double t = secs_since(&t0);

		human((double)done_bytes, b1, sizeof(b1));
		human(t > 0 ? (double)done_bytes / t : 0, b3, sizeof(b3));
		fprintf(stderr, "%s%zu objects staged, %s in %.1f s (%s/s)%s\n", tty ? "\r" : "",
			jobs.n - (size_t)(failed > (int)jobs.n ? (int)jobs.n : failed), b1, t, b3,
			failed ? "; some failed (see above)" : "");
	}
	for (i = 0; i < jobs.n; i++)
		free(jobs.v[i].path);
	free(jobs.v);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "status"))
		return cmd_status(argc - 2, argv + 2);
	if (!strcmp(argv[1], "stat"))
		return cmd_stat(argc - 2, argv + 2);
	if (!strcmp(argv[1], "nodes"))
		return cmd_nodes(argc - 2, argv + 2);
	if (!strcmp(argv[1], "prefetch"))
		return cmd_prefetch(argc - 2, argv + 2);
	fprintf(stderr, "objfs: unknown command '%s' (see objfs --help)\n", argv[1]);
	return 2;
}
