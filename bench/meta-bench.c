/*
 * objfs-meta-bench: the measuring half of `bench/run-bench meta`.
 *
 *   objfs-meta-bench OP DIR COUNT [--workers N] [--per-worker-dir]
 *                    [--size SIZE] [--prefix P] [--to P] [--first I]
 *                    [--max-seconds S]
 *
 * OP is one of
 *   create   open(O_CREAT|O_EXCL), write SIZE bytes (default 4096), close:
 *            a create counts only when close() succeeds too
 *   stat     stat() each name once (on a mount that has never seen the
 *            names, every one is a lookup that goes to Redis)
 *   unlink   unlink() each name
 *   rename   rename() each name to the same index with prefix --to
 *            (default "r"), in the same directory
 *
 * on the names DIR/<P><I> .. DIR/<P><I+COUNT-1> (P: --prefix, default
 * "f"; I: --first, default 0; numbers in 7 digits or more), shared out in
 * contiguous ranges between N worker processes (default 1): worker k
 * takes [I + k*COUNT/N, I + (k+1)*COUNT/N).  --first lets several
 * processes (or several objfs nodes) make one directory's names between
 * them.  With
 * --per-worker-dir, worker k works in DIR/wKK instead (create makes it,
 * untimed), so the same layout serves every OP.
 *
 * Workers are fork()ed processes, not threads: objfs seals an object at
 * FLUSH and looks at the opener's file table there (docs/design.md, "The
 * write path and sealing"), so writers that share one table are not the
 * workload being measured.  Every worker prepares (buffer, directory),
 * says it is ready, and waits on a pipe; the parent starts the clock and
 * releases them all at once by closing the pipe, and the time is until
 * the last worker has finished.  A worker stops at --max-seconds
 * (default 300) whatever is left; those names count as skipped.
 *
 * It prints one line of key=value pairs; docs/benchmarks.md,
 * "objfs-meta-bench", has its fields and the exit status.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define MAX_WORKERS 256
#define MAX_COUNT 10000000L
#define MAX_FILE_SIZE (64L << 20)
#define MAX_PREFIX 16
/* failures a worker prints; the rest are only counted */
#define ERRORS_SHOWN 3
/* how long workers may take to get ready (fork, mkdir on a slow mount) */
#define READY_SECONDS 60

enum meta_op { OP_CREATE, OP_STAT, OP_UNLINK, OP_RENAME };

static const char *const op_names[] = {"create", "stat", "unlink", "rename"};

struct meta_job {
	enum meta_op op;
	const char *dir;
	long count;
	int workers;
	bool per_dir;
	long size;
	const char *prefix;
	const char *to;
	long first;
	double max_seconds;
};

/* What a worker writes to the result pipe when done: one write, smaller
 * than PIPE_BUF, so the workers' reports never interleave. */
struct meta_result {
	int worker;
	long ok, failed, skipped;
	int64_t end_ns;
};

static void usage(FILE *out)
{
	fprintf(out, "usage: objfs-meta-bench create|stat|unlink|rename DIR COUNT [--workers N]\n"
		     "         [--per-worker-dir] [--size SIZE] [--prefix P] [--to P]\n"
		     "         [--first I] [--max-seconds S]\n");
}

/* A whole number in [min, max] from @s, with an optional K or M suffix
 * (powers of 1024) when @suffix is set. */
static int number_arg(const char *what, const char *s, long min, long max, bool suffix, long *ret)
{
	long v, mul = 1;
	char *end;

	errno = 0;
	v = strtol(s, &end, 10);
	if (suffix && (*end == 'K' || *end == 'k'))
		mul = 1024, end++;
	else if (suffix && (*end == 'M' || *end == 'm'))
		mul = 1024 * 1024, end++;
	if (errno || end == s || *end || v < 0 || v > max / mul || v * mul < min) {
		fprintf(stderr, "objfs-meta-bench: bad %s '%s' (want %ld..%ld)\n", what, s, min,
			max);
		return -EINVAL;
	}
	*ret = v * mul;
	return 0;
}

/* A name prefix: 1..MAX_PREFIX of [A-Za-z0-9._-], so it never makes a
 * path of its own. */
static int prefix_arg(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > MAX_PREFIX ||
	    strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		      "0123456789._-") != n) {
		fprintf(stderr, "objfs-meta-bench: bad name prefix '%s' (1-%d of [A-Za-z0-9._-])\n",
			s, MAX_PREFIX);
		return -EINVAL;
	}
	return 0;
}

static int parse_job(int argc, char **argv, struct meta_job *job)
{
	static const struct option longopts[] = {
	    {"workers", required_argument, NULL, 'w'},
	    {"per-worker-dir", no_argument, NULL, 'd'},
	    {"size", required_argument, NULL, 's'},
	    {"prefix", required_argument, NULL, 'p'},
	    {"to", required_argument, NULL, 't'},
	    {"first", required_argument, NULL, 'f'},
	    {"max-seconds", required_argument, NULL, 'm'},
	    {NULL, 0, NULL, 0},
	};
	long v;
	int c, i;

	*job = (struct meta_job){
	    .workers = 1, .size = 4096, .prefix = "f", .to = "r", .max_seconds = 300};
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'w':
			if (number_arg("worker count", optarg, 1, MAX_WORKERS, false, &v) < 0)
				return -EINVAL;
			job->workers = (int)v;
			break;
		case 'd':
			job->per_dir = true;
			break;
		case 's':
			if (number_arg("size", optarg, 0, MAX_FILE_SIZE, true, &job->size) < 0)
				return -EINVAL;
			break;
		case 'p':
			if (prefix_arg(optarg) < 0)
				return -EINVAL;
			job->prefix = optarg;
			break;
		case 't':
			if (prefix_arg(optarg) < 0)
				return -EINVAL;
			job->to = optarg;
			break;
		case 'f':
			if (number_arg("first index", optarg, 0, MAX_COUNT, false, &job->first) < 0)
				return -EINVAL;
			break;
		case 'm':
			if (number_arg("seconds", optarg, 1, 86400, false, &v) < 0)
				return -EINVAL;
			job->max_seconds = (double)v;
			break;
		default:
			return -EINVAL;
		}
	}
	if (argc - optind != 3)
		return -EINVAL;
	for (i = 0; i < 4; i++)
		if (!strcmp(argv[optind], op_names[i]))
			break;
	if (i == 4) {
		fprintf(stderr, "objfs-meta-bench: unknown operation '%s'\n", argv[optind]);
		return -EINVAL;
	}
	job->op = (enum meta_op)i;
	job->dir = argv[optind + 1];
	if (strlen(job->dir) > PATH_MAX - 64) {
		fprintf(stderr, "objfs-meta-bench: directory name too long\n");
		return -ENAMETOOLONG;
	}
	if (number_arg("count", argv[optind + 2], 1, MAX_COUNT, false, &job->count) < 0)
		return -EINVAL;
	if (!strcmp(job->prefix, job->to) && job->op == OP_RENAME) {
		fprintf(stderr, "objfs-meta-bench: rename needs --to other than --prefix\n");
		return -EINVAL;
	}
	return 0;
}

/* One create: open, write @size bytes of @buf, close.  0 or -errno, the
 * errno of the first step that failed; close() is part of the create. */
static int create_one(const char *path, char *buf, long size, long index)
{
	int fd, r = 0;

	/* different bytes in every file, so that no two objects are alike */
	if (size >= (long)sizeof(index))
		memcpy(buf, &index, sizeof(index));
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (size)
		r = util_write_full(fd, buf, (size_t)size);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	return r;
}

/* Operation @job->op on name @index, in @dir: 0 or -errno. */
static int op_one(const struct meta_job *job, const char *dir, long index, char *buf)
{
	char path[PATH_MAX + 64], to[PATH_MAX + 64];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s%07ld", dir, job->prefix, index);
	switch (job->op) {
	case OP_CREATE:
		return create_one(path, buf, job->size, index);
	case OP_STAT:
		return stat(path, &st) < 0 ? -errno : 0;
	case OP_UNLINK:
		return unlink(path) < 0 ? -errno : 0;
	case OP_RENAME:
		snprintf(to, sizeof(to), "%s/%s%07ld", dir, job->to, index);
		return rename(path, to) < 0 ? -errno : 0;
	}
	return -EINVAL;
}

/* The body of worker @k: set up, report ready on @ready_fd, wait for the
 * start (EOF on @go_fd), run its range, report on @res_fd.  Never
 * returns. */
static void worker_run(const struct meta_job *job, int k, int ready_fd, int go_fd, int res_fd)
{
	struct meta_result res = {.worker = k};
	long lo = job->first + (long)((int64_t)job->count * k / job->workers);
	long hi = job->first + (long)((int64_t)job->count * (k + 1) / job->workers);
	char dir[PATH_MAX - 32], *buf = NULL, c;
	int64_t deadline;
	long i;
	int r;

	if (job->per_dir)
		snprintf(dir, sizeof(dir), "%s/w%02d", job->dir, k);
	else
		snprintf(dir, sizeof(dir), "%s", job->dir);
	if (job->per_dir && job->op == OP_CREATE && mkdir(dir, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "objfs-meta-bench: worker %d: cannot make '%s': %s\n", k, dir,
			strerror(errno));
		_exit(1);
	}
	if (job->op == OP_CREATE) {
		buf = malloc((size_t)job->size + sizeof(long));
		if (!buf) {
			fprintf(stderr, "objfs-meta-bench: worker %d: out of memory\n", k);
			_exit(1);
		}
		memset(buf, 'm', (size_t)job->size + sizeof(long));
	}
	if (write(ready_fd, "r", 1) != 1)
		_exit(1);
	/* the parent closes its end to start everyone at once */
	while (read(go_fd, &c, 1) < 0 && errno == EINTR)
		;

	deadline = util_mono_ns() + (int64_t)(job->max_seconds * 1e9);
	for (i = lo; i < hi; i++) {
		if (util_mono_ns() > deadline) {
			res.skipped = hi - i;
			break;
		}
		r = op_one(job, dir, i, buf);
		if (r == 0) {
			res.ok++;
			continue;
		}
		if (res.failed++ < ERRORS_SHOWN)
			fprintf(stderr, "objfs-meta-bench: worker %d: %s '%s/%s%07ld': %s\n", k,
				op_names[job->op], dir, job->prefix, i, strerror(-r));
	}
	res.end_ns = util_mono_ns();
	free(buf);
	_exit(write(res_fd, &res, sizeof(res)) == sizeof(res) ? 0 : 1);
}

/* Read exactly @len bytes from @fd within @deadline_ns (util_mono_ns()): 0,
 * or -ETIMEDOUT, -EPIPE (every writer gone) or -errno. */
static int read_by(int fd, void *buf, size_t len, int64_t deadline_ns)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	size_t got = 0;
	int64_t left;
	ssize_t n;
	int r;

	while (got < len) {
		left = deadline_ns - util_mono_ns();
		if (left <= 0)
			return -ETIMEDOUT;
		r = poll(&pfd, 1, (int)(left / 1000000) + 1);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0)
			continue;
		n = read(fd, (char *)buf + got, len - got);
		if (n == 0)
			return -EPIPE;
		if (n > 0)
			got += (size_t)n;
		else if (errno != EINTR)
			return -errno;
	}
	return 0;
}

/* Kill (when @kill_them) and reap the @n workers in @pids: the number
 * that did not exit with status 0. */
static int reap_workers(const pid_t *pids, int n, bool kill_them)
{
	int i, status, bad = 0;

	for (i = 0; i < n; i++) {
		if (kill_them)
			kill(pids[i], SIGKILL);
		if (waitpid(pids[i], &status, 0) < 0 || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			bad++;
	}
	return bad;
}

/* Fork the workers, start them together, collect their results: 0 with
 * *ret_total filled (ok, failed, skipped summed; end_ns the last) and
 * *ret_start_ns, or -errno. */
static int run_workers(const struct meta_job *job, struct meta_result *ret_total,
		       int64_t *ret_start_ns)
{
	struct meta_result total = {0}, res;
	int ready[2], go[2], out[2], i, n = 0, r = 0;
	pid_t pids[MAX_WORKERS];
	int64_t start = 0;
	char buf[MAX_WORKERS];

	if (pipe2(ready, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(go, O_CLOEXEC) < 0) {
		r = -errno;
		goto close_ready;
	}
	if (pipe2(out, O_CLOEXEC) < 0) {
		r = -errno;
		goto close_go;
	}
	/* stdio buffers are not carried into the children twice */
	fflush(NULL);
	for (n = 0; n < job->workers; n++) {
		pids[n] = fork();
		if (pids[n] < 0) {
			r = -errno;
			fprintf(stderr, "objfs-meta-bench: fork: %s\n", strerror(errno));
			break;
		}
		if (pids[n] == 0) {
			close(ready[0]);
			close(go[1]);
			close(out[0]);
			worker_run(job, n, ready[1], go[0], out[1]);
		}
	}
	close(ready[1]);
	close(go[0]);
	close(out[1]);
	if (r == 0) {
		r = read_by(ready[0], buf, (size_t)n,
			    util_mono_ns() + READY_SECONDS * 1000000000ll);
		if (r < 0)
			fprintf(stderr, "objfs-meta-bench: the workers did not get ready: %s\n",
				strerror(-r));
	}
	start = util_mono_ns();
	/* the release: every worker's read() on go[0] returns 0 */
	close(go[1]);
	for (i = 0; r == 0 && i < n; i++) {
		r = read_by(out[0], &res, sizeof(res),
			    start + (int64_t)((job->max_seconds + 60) * 1e9));
		if (r < 0) {
			fprintf(stderr, "objfs-meta-bench: %d of %d workers did not report: %s\n",
				n - i, n, strerror(-r));
			break;
		}
		total.ok += res.ok;
		total.failed += res.failed;
		total.skipped += res.skipped;
		if (res.end_ns > total.end_ns)
			total.end_ns = res.end_ns;
	}
	if (reap_workers(pids, n, r < 0) && r == 0) {
		fprintf(stderr, "objfs-meta-bench: a worker exited with an error\n");
		r = -ECHILD;
	}
	close(out[0]);
	close(ready[0]);
	if (r == 0) {
		*ret_total = total;
		*ret_start_ns = start;
	}
	return r;
close_go:
	close(go[0]);
	close(go[1]);
close_ready:
	close(ready[0]);
	close(ready[1]);
	return r;
}

int main(int argc, char **argv)
{
	struct meta_result total;
	struct meta_job job;
	int64_t start;
	double secs;

	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}
	if (parse_job(argc, argv, &job) < 0) {
		usage(stderr);
		return 2;
	}
	if (run_workers(&job, &total, &start) < 0)
		return 1;
	secs = (double)(total.end_ns - start) / 1e9;
	printf(
	    "%s dir=%s first=%ld count=%ld workers=%d per_worker_dir=%d size=%ld ok=%ld failed=%ld "
	    "skipped=%ld seconds=%.4f per_s=%.0f\n",
	    op_names[job.op], job.dir, job.first, job.count, job.workers, job.per_dir ? 1 : 0,
	    job.size, total.ok, total.failed, total.skipped, secs,
	    secs > 0 ? (double)total.ok / secs : 0);
	return 0;
}
