/*
 * objfs-bench: the measuring half of bench/run-bench.
 *
 *   objfs-bench read FILE [--drop] [--repeat N]
 *       Read FILE from start to end with 1 MiB read() calls into one
 *       reused, pre-touched buffer and report the throughput.  --drop
 *       first asks the kernel to forget the file's cached pages
 *       (posix_fadvise DONTNEED); the caller drops caches globally too if
 *       it wants a truly cold read.  With --repeat, N reads and the
 *       median.
 *
 *   objfs-bench create DIR COUNT SIZE
 *       Create DIR/f00000 .. DIR/f<COUNT-1> of SIZE bytes each (open,
 *       write, close), for the stat benchmark.
 *
 *   objfs-bench stat DIR COUNT [--passes N]
 *       stat() every DIR/fNNNNN once to warm the caches, then N timed
 *       passes (default 5); report the median pass in stats per second.
 *
 * Output is one line of key=value pairs per measurement, for scripts:
 *   read file=F bytes=B seconds=S gibps=G
 *   stat dir=D count=C passes=N median_per_s=R best_per_s=R
 *
 * Timing uses CLOCK_MONOTONIC.  Nothing here depends on objfs: the same
 * program measures the /dev/shm baseline.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define READ_CHUNK (1u << 20)
#define MAX_REPEAT 64

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: objfs-bench read FILE [--drop] [--repeat N]\n"
		     "       objfs-bench create DIR COUNT SIZE\n"
		     "       objfs-bench stat DIR COUNT [--passes N]\n");
}

static int parse_count(const char *s, long min, long max, long *ret)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max) {
		fprintf(stderr, "objfs-bench: bad number '%s' (want %ld..%ld)\n", s, min, max);
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

/* One pass over @path: 0 with *ret_bytes and *ret_secs set, or -errno. */
static int read_once(const char *path, char *buf, bool drop, uint64_t *ret_bytes,
		     double *ret_secs)
{
	uint64_t total = 0;
	double t0, t1;
	int fd, r = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		fprintf(stderr, "objfs-bench: cannot open '%s': %s\n", path, strerror(errno));
		return r;
	}
	if (drop) {
		r = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		if (r)
			fprintf(stderr, "objfs-bench: fadvise DONTNEED on '%s': %s\n", path,
				strerror(r));
		r = 0;
	}
	t0 = now_s();
	for (;;) {
		ssize_t n = read(fd, buf, READ_CHUNK);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			fprintf(stderr, "objfs-bench: read '%s' at %" PRIu64 ": %s\n", path, total,
				strerror(errno));
			break;
		}
		if (n == 0)
			break;
		total += (uint64_t)n;
	}
	t1 = now_s();
	close(fd);
	if (r < 0)
		return r;
	*ret_bytes = total;
	*ret_secs = t1 - t0;
	return 0;
}

static int cmd_read(int argc, char **argv)
{
	double secs[MAX_REPEAT], rates[MAX_REPEAT];
	const char *path = NULL;
	uint64_t bytes = 0;
	bool drop = false;
	long repeat = 1;
	char *buf;
	int i, r;

	for (i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--drop")) {
			drop = true;
		} else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
			if (parse_count(argv[++i], 1, MAX_REPEAT, &repeat) < 0)
				return 2;
		} else if (!path && argv[i][0] != '-') {
			path = argv[i];
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (!path) {
		usage(stderr);
		return 2;
	}
	/* aligned, and touched now so page faults stay out of the timing */
	if (posix_memalign((void **)&buf, 4096, READ_CHUNK)) {
		fprintf(stderr, "objfs-bench: out of memory\n");
		return 1;
	}
	memset(buf, 0xa5, READ_CHUNK);

	for (i = 0; i < repeat; i++) {
		r = read_once(path, buf, drop, &bytes, &secs[i]);
		if (r < 0) {
			free(buf);
			return 1;
		}
		rates[i] = (double)bytes / secs[i] / (double)(1u << 30);
	}
	free(buf);
	printf("read file=%s bytes=%" PRIu64 " seconds=%.6f gibps=%.3f\n", path, bytes,
	       median(secs, (int)repeat), median(rates, (int)repeat));
	return 0;
}

static int cmd_create(int argc, char **argv)
{
	long count, size, i;
	char path[4096], *buf;

	if (argc != 3) {
		usage(stderr);
		return 2;
	}
	if (parse_count(argv[1], 1, 1000000, &count) < 0 ||
	    parse_count(argv[2], 0, 1L << 30, &size) < 0)
		return 2;
	buf = malloc((size_t)size + 1);
	if (!buf) {
		fprintf(stderr, "objfs-bench: out of memory\n");
		return 1;
	}
	for (i = 0; i < size; i++)
		buf[i] = (char)('a' + i % 26);
	for (i = 0; i < count; i++) {
		int fd;

		snprintf(path, sizeof(path), "%s/f%05ld", argv[0], i);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0) {
			fprintf(stderr, "objfs-bench: cannot create '%s': %s\n", path,
				strerror(errno));
			free(buf);
			return 1;
		}
		if (size && write(fd, buf, (size_t)size) != size) {
			fprintf(stderr, "objfs-bench: write '%s': %s\n", path, strerror(errno));
			close(fd);
			free(buf);
			return 1;
		}
		if (close(fd) < 0) {
			fprintf(stderr, "objfs-bench: close '%s': %s\n", path, strerror(errno));
			free(buf);
			return 1;
		}
	}
	free(buf);
	printf("create dir=%s count=%ld size=%ld\n", argv[0], count, size);
	return 0;
}

static int stat_pass(char (*paths)[4096], long count)
{
	struct stat st;
	long i;

	for (i = 0; i < count; i++) {
		if (stat(paths[i], &st) < 0) {
			fprintf(stderr, "objfs-bench: stat '%s': %s\n", paths[i], strerror(errno));
			return -1;
		}
	}
	return 0;
}

static int cmd_stat(int argc, char **argv)
{
	double rates[MAX_REPEAT], best = 0;
	long count, passes = 5, i;
	char(*paths)[4096];

	if (argc != 2 && !(argc == 4 && !strcmp(argv[2], "--passes"))) {
		usage(stderr);
		return 2;
	}
	if (parse_count(argv[1], 1, 1000000, &count) < 0 ||
	    (argc == 4 && parse_count(argv[3], 1, MAX_REPEAT, &passes) < 0))
		return 2;
	paths = calloc((size_t)count, sizeof(*paths));
	if (!paths) {
		fprintf(stderr, "objfs-bench: out of memory\n");
		return 1;
	}
	for (i = 0; i < count; i++)
		snprintf(paths[i], sizeof(paths[i]), "%s/f%05ld", argv[0], i);

	/* warm: every entry and attribute looked up once */
	if (stat_pass(paths, count) < 0) {
		free(paths);
		return 1;
	}
	for (i = 0; i < passes; i++) {
		double t0 = now_s(), t1;

		if (stat_pass(paths, count) < 0) {
			free(paths);
			return 1;
		}
		t1 = now_s();
		rates[i] = (double)count / (t1 - t0);
		if (rates[i] > best)
			best = rates[i];
	}
	free(paths);
	printf("stat dir=%s count=%ld passes=%ld median_per_s=%.0f best_per_s=%.0f\n", argv[0],
	       count, passes, median(rates, (int)passes), best);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "read"))
		return cmd_read(argc - 2, argv + 2);
	if (!strcmp(argv[1], "create"))
		return cmd_create(argc - 2, argv + 2);
	if (!strcmp(argv[1], "stat"))
		return cmd_stat(argc - 2, argv + 2);
	usage(stderr);
	return 2;
}
