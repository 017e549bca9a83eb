/*
 * objfs-bench: the measuring half of bench/run-bench.  Its commands
 * (read, create, stat, tcp, redis-get, open-read, close, touch) each
 * print one line of key=value pairs per measurement: usage() lists their
 * arguments, docs/benchmarks.md, "objfs-bench", what each measures and
 * prints.
 *
 * Timing uses CLOCK_MONOTONIC.  Nothing here depends on objfs: the same
 * program measures the baselines.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define READ_CHUNK (1u << 20)
#define MAX_REPEAT 64
#define MAX_SAMPLES 100000
#define MAX_SIZE (64ull << 30)

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

/* Nearest-rank percentile @p (0..1] of @v[0..n), which is sorted. */
static double percentile(const double *v, long n, double p)
{
	long k = (long)ceil(p * (double)n);

	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

static void usage(FILE *out)
{
	fprintf(out, "usage: objfs-bench read FILE [--drop] [--repeat N] [--mmap]\n"
		     "       objfs-bench create DIR COUNT SIZE [--random]\n"
		     "       objfs-bench stat DIR COUNT [--passes N]\n"
		     "       objfs-bench tcp SIZE [--repeat N] [--buf SIZE]\n"
		     "       objfs-bench redis-get URL SIZE N\n"
		     "       objfs-bench open-read DIR COUNT [--no-stat]\n"
		     "       objfs-bench close DIR COUNT SIZE [--writers N] [--visible DIR2]\n"
		     "       objfs-bench touch SIZE [--repeat N] [--dir DIR]\n");
}

/* A pre-touched, page-aligned buffer of @size bytes, or NULL. */
static char *touched_alloc(size_t size)
{
	void *buf;

	if (posix_memalign(&buf, 4096, size)) {
		fprintf(stderr, "objfs-bench: out of memory (%zu bytes)\n", size);
		return NULL;
	}
	memset(buf, 0xa5, size);
	return buf;
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

/* "4096", "64K", "1M", "1G" (powers of 1024), 1..MAX_SIZE */
static int parse_size(const char *s, uint64_t *ret)
{
	unsigned long long v, mul = 1;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (!errno && end != s) {
		switch (*end) {
		case 'k':
		case 'K':
			mul = 1ull << 10;
			end++;
			break;
		case 'm':
		case 'M':
			mul = 1ull << 20;
			end++;
			break;
		case 'g':
		case 'G':
			mul = 1ull << 30;
			end++;
			break;
		}
		if (!*end && v >= 1 && v <= MAX_SIZE / mul) {
			*ret = v * mul;
			return 0;
		}
	}
	fprintf(stderr, "objfs-bench: bad size '%s' (want 1..64G, suffix K, M or G)\n", s);
	return -EINVAL;
}

/* Read @fd to its end into @buf: bytes read, or -errno. */
static int64_t read_all(int fd, const char *path, char *buf)
{
	uint64_t total = 0;

	for (;;) {
		ssize_t n = read(fd, buf, READ_CHUNK);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "objfs-bench: read '%s' at %" PRIu64 ": %s\n", path, total,
				strerror(errno));
			return -errno;
		}
		if (n == 0)
			return (int64_t)total;
		total += (uint64_t)n;
	}
}

/* Map @fd whole, read one byte of every 4 KiB page, unmap: its size, or
 * -errno. */
static int64_t map_all(int fd, const char *path)
{
	volatile unsigned char sink = 0;
	const unsigned char *p;
	struct stat st;
	uint64_t off;

	if (fstat(fd, &st) < 0) {
		fprintf(stderr, "objfs-bench: stat '%s': %s\n", path, strerror(errno));
		return -errno;
	}
	if (st.st_size == 0)
		return 0;
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "objfs-bench: mmap '%s': %s\n", path, strerror(errno));
		return -errno;
	}
	for (off = 0; off < (uint64_t)st.st_size; off += 4096)
		sink ^= p[off];
	munmap((void *)p, (size_t)st.st_size);
	(void)sink;
	return st.st_size;
}

/* One pass over @path, with read() or (@map) mmap: 0 with *ret_bytes and
 * *ret_secs set, or -errno. */
static int read_once(const char *path, char *buf, bool drop, bool map, uint64_t *ret_bytes,
		     double *ret_secs)
{
	int64_t total;
	double t0, t1;
	int fd, r;

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
	}
	t0 = now_s();
	total = map ? map_all(fd, path) : read_all(fd, path, buf);
	t1 = now_s();
	close(fd);
	if (total < 0)
		return (int)total;
	*ret_bytes = (uint64_t)total;
	*ret_secs = t1 - t0;
	return 0;
}

static int cmd_read(int argc, char **argv)
{
	double secs[MAX_REPEAT], rates[MAX_REPEAT];
	const char *path = NULL;
	uint64_t bytes = 0;
	bool drop = false, map = false;
	long repeat = 1;
	char *buf;
	int i, r;

	for (i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--drop")) {
			drop = true;
		} else if (!strcmp(argv[i], "--mmap")) {
			map = true;
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
		r = read_once(path, buf, drop, map, &bytes, &secs[i]);
		if (r < 0) {
			free(buf);
			return 1;
		}
		rates[i] = (double)bytes / secs[i] / (double)(1u << 30);
	}
	free(buf);
	printf("%s file=%s bytes=%" PRIu64 " seconds=%.6f gibps=%.3f\n", map ? "mmap" : "read",
	       path, bytes, median(secs, (int)repeat), median(rates, (int)repeat));
	return 0;
}

/* Fill @buf with pseudo-random bytes (xorshift64*), fast and different
 * for every @seed. */
static void fill_random(char *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
	size_t i;

	for (i = 0; i < len; i += 8) {
		uint64_t v;

		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		v = x * 0x2545f4914f6cdd1dull;
		memcpy(buf + i, &v, len - i < 8 ? len - i : 8);
	}
}

static int cmd_create(int argc, char **argv)
{
	long count, size, i;
	char path[4096], *buf;
	bool random = false;
	uint64_t seed;

	if (argc == 4 && !strcmp(argv[3], "--random")) {
		random = true;
		argc--;
	}
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
	seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	for (i = 0; i < count; i++) {
		int fd;

		if (random)
			fill_random(buf, (size_t)size, seed + (uint64_t)i);
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

/* ---- tcp: the loopback TCP ceiling ---- */

struct tcp_sender {
	int fd;
	uint64_t bytes;
	const char *buf; /* READ_CHUNK bytes, pre-touched */
	int err;	 /* 0 or a negative errno */
};

static void *tcp_send_main(void *arg)
{
	struct tcp_sender *s = arg;
	uint64_t left = s->bytes;

	while (left) {
		size_t want = left < READ_CHUNK ? (size_t)left : READ_CHUNK;
		ssize_t n = write(s->fd, s->buf, want);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			s->err = -errno;
			break;
		}
		left -= (uint64_t)n;
	}
	return NULL;
}

/* A listening socket on 127.0.0.1, any port: its fd and *ret_addr, or
 * -errno. */
static int tcp_listen(struct sockaddr_in *ret_addr)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	int fd, r;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 4) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	*ret_addr = sa;
	return fd;
}

/* One transfer of @bytes on a new connection: 0 with *ret_secs, or -errno. */
static int tcp_once(int lfd, const struct sockaddr_in *addr, const char *sbuf, char *rbuf,
		    size_t rbuf_size, uint64_t bytes, double *ret_secs)
{
	struct tcp_sender s = {.bytes = bytes, .buf = sbuf};
	uint64_t got = 0;
	size_t off = 0;
	pthread_t th;
	double t0, t1;
	int afd, r = 0;

	s.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s.fd < 0)
		return -errno;
	if (connect(s.fd, (const struct sockaddr *)addr, sizeof(*addr)) < 0) {
		r = -errno;
		close(s.fd);
		return r;
	}
	afd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (afd < 0) {
		r = -errno;
		close(s.fd);
		return r;
	}
	t0 = now_s();
	r = -pthread_create(&th, NULL, tcp_send_main, &s);
	if (r < 0)
		goto clean_fds;
	while (got < bytes) {
		size_t want = rbuf_size - off < READ_CHUNK ? rbuf_size - off : READ_CHUNK;
		ssize_t n = read(afd, rbuf + off, want);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (n == 0) {
			r = -EPIPE;
			break;
		}
		got += (uint64_t)n;
		off += (size_t)n;
		if (off == rbuf_size)
			off = 0;
	}
	t1 = now_s();
	if (r < 0)
		shutdown(afd, SHUT_RDWR); /* unblocks the sender */
	pthread_join(th, NULL);
	if (!r)
		r = s.err;
	if (!r)
		*ret_secs = t1 - t0;
clean_fds:
	close(afd);
	close(s.fd);
	return r;
}

static int cmd_tcp(int argc, char **argv)
{
	double rates[MAX_REPEAT], lo = 0, hi = 0;
	uint64_t bytes = 0, rbuf_size = READ_CHUNK;
	struct sockaddr_in addr;
	char *sbuf, *rbuf;
	long repeat = 5;
	int i, lfd, r = 0;

	for (i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
			if (parse_count(argv[++i], 1, MAX_REPEAT, &repeat) < 0)
				return 2;
		} else if (!strcmp(argv[i], "--buf") && i + 1 < argc) {
			if (parse_size(argv[++i], &rbuf_size) < 0)
				return 2;
		} else if (!bytes && argv[i][0] != '-') {
			if (parse_size(argv[i], &bytes) < 0)
				return 2;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (!bytes) {
		usage(stderr);
		return 2;
	}
	sbuf = touched_alloc(READ_CHUNK);
	rbuf = touched_alloc((size_t)rbuf_size);
	if (!sbuf || !rbuf) {
		free(sbuf);
		free(rbuf);
		return 1;
	}
	lfd = tcp_listen(&addr);
	if (lfd < 0) {
		fprintf(stderr, "objfs-bench: cannot listen on 127.0.0.1: %s\n", strerror(-lfd));
		r = lfd;
		goto out;
	}
	for (i = 0; i < repeat; i++) {
		double secs = 0;

		r = tcp_once(lfd, &addr, sbuf, rbuf, (size_t)rbuf_size, bytes, &secs);
		if (r < 0) {
			fprintf(stderr, "objfs-bench: loopback transfer: %s\n", strerror(-r));
			break;
		}
		rates[i] = (double)bytes / secs / (double)(1u << 30);
		if (!i || rates[i] < lo)
			lo = rates[i];
		if (rates[i] > hi)
			hi = rates[i];
	}
	close(lfd);
	if (!r)
		printf("tcp bytes=%" PRIu64 " runs=%ld rbuf=%" PRIu64
		       " gibps=%.3f min_gibps=%.3f max_gibps=%.3f\n",
		       bytes, repeat, rbuf_size, median(rates, (int)repeat), lo, hi);
out:
	free(sbuf);
	free(rbuf);
	return r < 0 ? 1 : 0;
}

/* ---- latency: Redis GET and open+read+close ---- */

/* Sort @us[0..n) and print "p50_us=.. p99_us=.. mean_us=.. max_us=..". */
static void print_latency(double *us, long n)
{
	double sum = 0;
	long i;

	for (i = 0; i < n; i++)
		sum += us[i];
	qsort(us, (size_t)n, sizeof(*us), cmp_double);
	printf("p50_us=%.1f p99_us=%.1f mean_us=%.1f max_us=%.1f\n", percentile(us, n, 0.50),
	       percentile(us, n, 0.99), sum / (double)n, us[n - 1]);
}

/* unix:/path.sock, redis://host[:port] or host:port; NULL on failure
 * (said on stderr). */
static redisContext *redis_connect_url(const char *url)
{
	struct timeval tv = {.tv_sec = 5};
	char host[256];
	const char *h = url, *colon;
	redisContext *c;
	long port = 6379;
	size_t hl;

	if (!strncmp(url, "unix:", 5)) {
		c = redisConnectUnixWithTimeout(url + 5, tv);
	} else {
		if (!strncmp(url, "redis://", 8))
			h += 8;
		colon = strrchr(h, ':');
		hl = colon ? (size_t)(colon - h) : strlen(h);
		if (hl == 0 || hl >= sizeof(host) ||
		    (colon && parse_count(colon + 1, 1, 65535, &port) < 0)) {
			fprintf(stderr, "objfs-bench: bad redis url '%s'\n", url);
			return NULL;
		}
		memcpy(host, h, hl);
		host[hl] = '\0';
		c = redisConnectWithTimeout(host, (int)port, tv);
	}
	if (!c || c->err) {
		fprintf(stderr, "objfs-bench: cannot connect to redis '%s': %s\n", url,
			c ? c->errstr : "out of memory");
		redisFree(c);
		return NULL;
	}
	return c;
}

/* GET @key, expecting @size bytes: 0 or -EIO (said on stderr). */
static int redis_get_once(redisContext *c, const char *key, uint64_t size)
{
	redisReply *rep = redisCommand(c, "GET %s", key);
	int r = 0;

	if (!rep) {
		fprintf(stderr, "objfs-bench: redis GET: %s\n", c->errstr);
		return -EIO;
	}
	if (rep->type != REDIS_REPLY_STRING || (uint64_t)rep->len != size) {
		fprintf(stderr, "objfs-bench: redis GET %s: unexpected reply (type %d)\n", key,
			rep->type);
		r = -EIO;
	}
	freeReplyObject(rep);
	return r;
}

static int cmd_redis_get(int argc, char **argv)
{
	redisContext *c = NULL;
	redisReply *rep;
	char key[64], *val = NULL;
	double *us = NULL;
	uint64_t size;
	long n, i;
	int rc = 1;

	if (argc != 3) {
		usage(stderr);
		return 2;
	}
	if (parse_size(argv[1], &size) < 0 || size > (512u << 20) ||
	    parse_count(argv[2], 1, MAX_SAMPLES, &n) < 0)
		return 2;
	us = calloc((size_t)n, sizeof(*us));
	val = malloc((size_t)size);
	if (!us || !val) {
		fprintf(stderr, "objfs-bench: out of memory\n");
		goto out;
	}
	fill_random(val, (size_t)size, size);
	c = redis_connect_url(argv[0]);
	if (!c)
		goto out;
	/* hiredis 0.14 otherwise frees its read buffer whenever more than
	 * 16 KiB of it is unused, and re-grows it for every big reply */
	c->reader->maxbuf = 0;
	snprintf(key, sizeof(key), "objfs-bench:get:%" PRIu64, size);
	rep = redisCommand(c, "SET %s %b", key, val, (size_t)size);
	if (!rep || rep->type == REDIS_REPLY_ERROR) {
		fprintf(stderr, "objfs-bench: redis SET: %s\n", rep ? rep->str : c->errstr);
		freeReplyObject(rep);
		goto out;
	}
	freeReplyObject(rep);
	for (i = 0; i < 2 + n / 10; i++)
		if (redis_get_once(c, key, size) < 0)
			goto out;
	for (i = 0; i < n; i++) {
		double t0 = now_s();

		if (redis_get_once(c, key, size) < 0)
			goto out;
		us[i] = (now_s() - t0) * 1e6;
	}
	freeReplyObject(redisCommand(c, "DEL %s", key));
	printf("redis-get size=%" PRIu64 " n=%ld ", size, n);
	print_latency(us, n);
	rc = 0;
out:
	redisFree(c);
	free(val);
	free(us);
	return rc;
}

/* open, read to the end into @buf (READ_CHUNK bytes), close: bytes read,
 * or -errno (said on stderr) */
static int64_t open_read_close(const char *path, char *buf)
{
	int64_t total = 0;
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		fprintf(stderr, "objfs-bench: cannot open '%s': %s\n", path, strerror(errno));
		return r;
	}
	for (;;) {
		ssize_t n = read(fd, buf, READ_CHUNK);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			fprintf(stderr, "objfs-bench: read '%s' at %" PRId64 ": %s\n", path, total,
				strerror(errno));
			close(fd);
			return r;
		}
		if (n == 0)
			break;
		total += n;
	}
	if (close(fd) < 0) {
		r = -errno;
		fprintf(stderr, "objfs-bench: close '%s': %s\n", path, strerror(errno));
		return r;
	}
	return total;
}

static int cmd_open_read(int argc, char **argv)
{
	char path[4096], *buf = NULL;
	bool warm_names = true;
	uint64_t bytes = 0;
	double *us = NULL;
	struct stat st;
	long n, i;
	int rc = 1;

	if (argc == 3 && !strcmp(argv[2], "--no-stat")) {
		warm_names = false;
		argc--;
	}
	if (argc != 2) {
		usage(stderr);
		return 2;
	}
	if (parse_count(argv[1], 1, MAX_SAMPLES, &n) < 0)
		return 2;
	us = calloc((size_t)n, sizeof(*us));
	buf = touched_alloc(READ_CHUNK);
	if (!us || !buf)
		goto out;
	for (i = 0; warm_names && i < n; i++) {
		snprintf(path, sizeof(path), "%s/f%05ld", argv[0], i);
		if (stat(path, &st) < 0) {
			fprintf(stderr, "objfs-bench: stat '%s': %s\n", path, strerror(errno));
			goto out;
		}
	}
	for (i = 0; i < n; i++) {
		double t0;
		int64_t got;

		snprintf(path, sizeof(path), "%s/f%05ld", argv[0], i);
		t0 = now_s();
		got = open_read_close(path, buf);
		if (got < 0)
			goto out;
		us[i] = (now_s() - t0) * 1e6;
		bytes += (uint64_t)got;
	}
	printf("open-read dir=%s n=%ld bytes=%" PRIu64 " ", argv[0], n, bytes);
	print_latency(us, n);
	rc = 0;
out:
	free(buf);
	free(us);
	return rc;
}

/* ---- close: what close() adds to a writer, and the create rate ---- */

#define MAX_WRITERS 64

struct close_job {
	const char *dir, *visible;
	uint64_t size;
	long first, count; /* files [first, first + count) */
	double *close_us, *visible_us;
	int err;
};

/* Spin until @path exists (bounded to 60 s): 0 or -ETIMEDOUT. */
static int wait_visible(const char *path)
{
	double until = now_s() + 60;
	struct stat st;

	while (stat(path, &st) < 0) {
		if (now_s() > until)
			return -ETIMEDOUT;
	}
	return 0;
}

static void *close_main(void *arg)
{
	struct close_job *j = arg;
	char path[4096];
	size_t chunk = j->size < READ_CHUNK ? (size_t)j->size : READ_CHUNK;
	char *buf = touched_alloc(chunk);
	long i;

	if (!buf) {
		j->err = -ENOMEM;
		return NULL;
	}
	for (i = 0; i < j->count && !j->err; i++) {
		long k = j->first + i;
		uint64_t left = j->size;
		double t0;
		int fd;

		fill_random(buf, chunk, (uint64_t)k ^ ((uint64_t)getpid() << 32));
		snprintf(path, sizeof(path), "%s/c%05ld", j->dir, k);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0) {
			j->err = -errno;
			fprintf(stderr, "objfs-bench: cannot create '%s': %s\n", path,
				strerror(errno));
			break;
		}
		while (left) {
			size_t n = left < chunk ? (size_t)left : chunk;

			if (write(fd, buf, n) != (ssize_t)n) {
				j->err = -EIO;
				fprintf(stderr, "objfs-bench: write '%s': %s\n", path,
					strerror(errno));
				break;
			}
			left -= n;
		}
		t0 = now_s();
		if (close(fd) < 0 && !j->err) {
			j->err = -errno;
			fprintf(stderr, "objfs-bench: close '%s': %s\n", path, strerror(errno));
		}
		j->close_us[i] = (now_s() - t0) * 1e6;
		if (j->visible && !j->err) {
			snprintf(path, sizeof(path), "%s/c%05ld", j->visible, k);
			if (wait_visible(path) < 0) {
				j->err = -ETIMEDOUT;
				fprintf(stderr, "objfs-bench: '%s' did not appear\n", path);
			}
			j->visible_us[i] = (now_s() - t0) * 1e6;
		}
	}
	free(buf);
	return NULL;
}

/* "NAME_p50_us=.. NAME_p99_us=.. NAME_max_us=.." of @us[0..n), sorted here */
static void print_pcts(const char *name, double *us, long n)
{
	qsort(us, (size_t)n, sizeof(*us), cmp_double);
	printf(" %s_p50_us=%.1f %s_p99_us=%.1f %s_max_us=%.1f", name, percentile(us, n, 0.50), name,
	       percentile(us, n, 0.99), name, us[n - 1]);
}

static int cmd_close(int argc, char **argv)
{
	struct close_job jobs[MAX_WRITERS];
	pthread_t th[MAX_WRITERS];
	const char *visible = NULL;
	double *close_us, *visible_us, t0, secs;
	long count, writers = 1, w, per, first = 0;
	uint64_t size;
	int rc = 1;

	while (argc > 3 && argv[argc - 2][0] == '-') {
		if (!strcmp(argv[argc - 2], "--writers")) {
			if (parse_count(argv[argc - 1], 1, MAX_WRITERS, &writers) < 0)
				return 2;
		} else if (!strcmp(argv[argc - 2], "--visible")) {
			visible = argv[argc - 1];
		} else {
			break;
		}
		argc -= 2;
	}
	if (argc != 3) {
		usage(stderr);
		return 2;
	}
	if (parse_count(argv[1], 1, MAX_SAMPLES, &count) < 0 || parse_size(argv[2], &size) < 0)
		return 2;
	if (writers > count)
		writers = count;
	close_us = calloc((size_t)count, sizeof(*close_us));
	visible_us = calloc((size_t)count, sizeof(*visible_us));
	if (!close_us || !visible_us) {
		fprintf(stderr, "objfs-bench: out of memory\n");
		goto out;
	}
	per = count / writers;
	for (w = 0; w < writers; w++) {
		long n = w == writers - 1 ? count - first : per;

		jobs[w] = (struct close_job){
		    argv[0], visible, size, first, n, close_us + first, visible_us + first, 0};
		first += n;
	}
	t0 = now_s();
	for (w = 0; w < writers; w++) {
		if (pthread_create(&th[w], NULL, close_main, &jobs[w])) {
			fprintf(stderr, "objfs-bench: cannot start a writer thread\n");
			jobs[w].err = -EAGAIN;
			writers = w;
			break;
		}
	}
	for (w = 0; w < writers; w++)
		pthread_join(th[w], NULL);
	secs = now_s() - t0;
	for (w = 0; w < writers; w++)
		if (jobs[w].err)
			goto out;
	printf("close dir=%s n=%ld size=%" PRIu64 " writers=%ld per_s=%.0f", argv[0], count, size,
	       writers, (double)count / secs);
	print_pcts("close", close_us, count);
	if (visible)
		print_pcts("visible", visible_us, count);
	printf("\n");
	rc = 0;
out:
	free(close_us);
	free(visible_us);
	return rc;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* one round of cmd_touch(): the five times into @t, 0 or -errno */
static int touch_round(const char *dir, const char *src, char *hot, size_t size, double t[5])
{
	char path[4096];
	volatile char sum = 0;
	double t0;
	char *m;
	size_t i;
	int fd, r = 0;

	t0 = now_s();
	memcpy(hot, src, size);
	t[0] = now_s() - t0;
	snprintf(path, sizeof(path), "%s/objfs-bench-touch.%ld", dir, (long)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return -errno;
	unlink(path);
	if (ftruncate(fd, (off_t)size) < 0 || fallocate(fd, 0, 0, (off_t)size) < 0) {
		r = -errno;
		goto out;
	}
	m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		r = -errno;
		goto out;
	}
	/* before Linux 5.14 there is no MADV_POPULATE_WRITE: a negative
	 * time, shown as "-" */
	t0 = now_s();
	t[1] = madvise(m, size, MADV_POPULATE_WRITE) < 0 ? -1.0 : now_s() - t0;
	t0 = now_s();
	memcpy(m, src, size);
	t[2] = now_s() - t0;
	t0 = now_s();
	memcpy(m, src, size);
	t[3] = now_s() - t0;
	munmap(m, size);
	m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		r = -errno;
		goto out;
	}
	t0 = now_s();
	for (i = 0; i < size; i += 4096)
		sum = (char)(sum + m[i]);
	t[4] = now_s() - t0;
	munmap(m, size);
out:
	close(fd);
	return r;
}

static int cmd_touch(int argc, char **argv)
{
	static const char *const names[] = {"hot", "populate", "first", "again", "read_touch"};
	const char *dir = "/dev/shm";
	long repeat = 9, i, k;
	uint64_t size;
	double *t[5] = {NULL}, round[5];
	char *src = NULL, *hot = NULL;
	int rc = 1, r;

	if (argc < 1 || parse_size(argv[0], &size) < 0 || !size || size > (1ULL << 30)) {
		fprintf(stderr, "objfs-bench touch: SIZE must be 1 to 1G\n");
		return 2;
	}
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
			if (parse_count(argv[++i], 1, 10000, &repeat) < 0) {
				fprintf(stderr, "objfs-bench touch: --repeat takes 1 to 10000\n");
				return 2;
			}
		} else if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
			dir = argv[++i];
		} else {
			fprintf(stderr, "objfs-bench touch: unknown argument '%s'\n", argv[i]);
			return 2;
		}
	}
	src = touched_alloc(size);
	hot = touched_alloc(size);
	for (k = 0; k < 5; k++)
		t[k] = calloc((size_t)repeat, sizeof(double));
	if (!src || !hot || !t[0] || !t[1] || !t[2] || !t[3] || !t[4])
		goto out;
	for (i = 0; i < repeat; i++) {
		r = touch_round(dir, src, hot, size, round);
		if (r < 0) {
			fprintf(stderr, "objfs-bench touch: a file in %s: %s\n", dir, strerror(-r));
			goto out;
		}
		for (k = 0; k < 5; k++)
			t[k][i] = round[k] * 1e6;
	}
	printf("touch size=%" PRIu64 " n=%ld", size, repeat);
	for (k = 0; k < 5; k++) {
		double med = median(t[k], (int)repeat);

		if (med < 0)
			printf(" %s_us=-", names[k]);
		else
			printf(" %s_us=%.1f", names[k], med);
	}
	printf("\n");
	rc = 0;
out:
	for (k = 0; k < 5; k++)
		free(t[k]);
	free(src);
	free(hot);
	return rc;
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
	if (!strcmp(argv[1], "tcp"))
		return cmd_tcp(argc - 2, argv + 2);
	if (!strcmp(argv[1], "redis-get"))
		return cmd_redis_get(argc - 2, argv + 2);
	if (!strcmp(argv[1], "open-read"))
		return cmd_open_read(argc - 2, argv + 2);
	if (!strcmp(argv[1], "close"))
		return cmd_close(argc - 2, argv + 2);
	if (!strcmp(argv[1], "touch"))
		return cmd_touch(argc - 2, argv + 2);
	usage(stderr);
	return 2;
}
