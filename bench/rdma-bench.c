/*
 * objfs-rdma-bench: the RDMA transport's benchmark ("the thesis's
 * figures, redrawn"), run inside the Soft-RoCE VM by bench/run-bench
 * rdma.  One process serves 21 objects, 64 B to 64 MiB, over TCP and
 * RDMA and fetches them with a client per path (tcp, eager, rendezvous,
 * hybrid) in rotating rounds; its modes (latency, redis, sweep,
 * throughput, poll) print tables and write .dat files for
 * bench/rdma-plots.  usage() lists the options; docs/benchmarks.md,
 * "objfs-rdma-bench", describes the modes, the method, the targets, the
 * output and the exit status.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef OBJFS_HAVE_RDMA
int main(void)
{
	fprintf(stderr, "objfs-rdma-bench: objfs was built without RDMA\n");
	return 77;
}
#else

#include "rdma_i.h"

#define KiB ((uint64_t)1024)
#define MiB (1024 * KiB)
#define NOBJ 21	   /* 64 B << 0 .. 20: 64 B .. 64 MiB */
#define SMALL_N 10 /* objs[0..9]: 64 B .. 32 KiB */
#define NMAX 1000  /* timed fetches per point, at most */
#define EAGER_32K (32u << 10)
#define N_SWEEP 7
#define N_SENDLAT 7 /* 64 B .. 4 KiB */
#define PERFTEST_PORT 18515
#define MAX_SET 8 /* clients measured together */

static const uint8_t secret[] = "objfs-rdma-bench-cluster-secret-0123456789";

/* ---- the objects and their source ---- */

struct obj {
	uint64_t id, size;
	uint8_t *mem;
	void *reg; /* attach_lock */
	void (*drop)(void *);
};

static struct obj objs[NOBJ];
static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;

static int src_open(void *ctx, const char *peer, uint64_t id, uint64_t *ret_size, void **ret)
{
	if (id < 1 || id > NOBJ)
		return -ENOENT;
	*ret_size = objs[id - 1].size;
	*ret = &objs[id - 1];
	return 0;
}

static int src_iov(void *token, uint64_t off, size_t len, struct iovec *iov, int max,
		   size_t *ret_bytes)
{
	struct obj *o = token;

	iov[0].iov_base = o->mem + off;
	iov[0].iov_len = len;
	*ret_bytes = len;
	return 1;
}

static void src_close(void *token)
{
}

static int src_map(void *token, void **ret_addr, uint64_t *ret_len, int *ret_fd)
{
	struct obj *o = token;

	*ret_addr = o->mem;
	*ret_len = o->size;
	*ret_fd = -1; /* writable memory: registers as it is */
	return 0;
}

static int src_attach(void *token, void *reg, void (*drop)(void *), void **ret_cur)
{
	struct obj *o = token;
	int err = 0;

	pthread_mutex_lock(&attach_lock);
	*ret_cur = o->reg;
	if (reg && o->reg) {
		err = -EEXIST;
	} else if (reg) {
		o->reg = reg;
		o->drop = drop;
	}
	pthread_mutex_unlock(&attach_lock);
	return err;
}

static const struct transport_source source = {
    .open = src_open,
    .iov = src_iov,
    .close = src_close,
    .map = src_map,
    .attach = src_attach,
};

static int objs_make(void)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL, j;
	int i;

	for (i = 0; i < NOBJ; i++) {
		objs[i].id = (uint64_t)i + 1;
		objs[i].size = 64ULL << i;
		objs[i].mem = aligned_alloc(4096, objs[i].size < 4096 ? 4096 : objs[i].size);
		if (!objs[i].mem)
			return -ENOMEM;
		for (j = 0; j + 8 <= objs[i].size; j += 8) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			memcpy(objs[i].mem + j, &x, 8);
		}
	}
	return 0;
}

/* After the server is gone: nothing can serve them any more. */
static void objs_free(void)
{
	int i;

	for (i = 0; i < NOBJ; i++) {
		if (objs[i].reg)
			objs[i].drop(objs[i].reg);
		free(objs[i].mem);
	}
}

/* ---- options, clients ---- */

static struct {
	const char *ip, *dev, *out, *redis_url;
	int gid;
	int pin;		       /* the CPU this process runs on, or -1 */
	unsigned poll_us, srv_poll_us; /* poll mode's client; the server's */
	char all_cpus[32];	       /* "0-N": what perftest's polling runs may use */
	double budget_s;
	int64_t deadline; /* util_mono_ns() */
} opt = {.out = ".", .gid = 1, .pin = -1, .budget_s = 0.5, .poll_us = 50};

static struct transport *server;
static char tcp_addr[TRANSPORT_ADDR_MAX], rdma_addr[TRANSPORT_ADDR_MAX];
static uint8_t *dst; /* 64 MiB, every fetch's destination */
static FILE *targets;
static int warnings;

enum { C_TCP, C_EAGER, C_RDV, C_HYBRID, N_CLIENTS };

struct client {
	const char *label;
	const char *backend;
	const char *force; /* OBJFS_RDMA_PATH, or NULL */
	uint32_t eager_max;
	uint32_t poll_us; /* rdma_poll_us */
	struct transport *t;
	struct transport_region *region;
	redisContext *redis; /* not a transport: GETs from this Redis */
};

static struct client clients[N_CLIENTS] = {
    [C_TCP] = {"tcp", "tcp", NULL, 0},
    [C_EAGER] = {"eager", "rdma", "eager", EAGER_32K},
    [C_RDV] = {"rendezvous", "rdma", "rendezvous", 0},
    [C_HYBRID] = {"hybrid", "auto", NULL, 0},
};

static const uint32_t sweep_kib[N_SWEEP] = {4, 8, 16, 32, 64, 128, 256};
static struct client sweep[N_SWEEP];
static char sweep_label[N_SWEEP][16];

static void complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void complain(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("objfs-rdma-bench: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	warnings++;
}

static bool out_of_time(void)
{
	return util_mono_ns() > opt.deadline;
}

/* Open DIR/NAME for writing, or NULL (warned). */
static FILE *out_file(const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", opt.out, name);
	f = fopen(path, "w");
	if (!f)
		complain("cannot write '%s': %s", path, strerror(errno));
	return f;
}

static int client_open(struct client *c, const char *node)
{
	struct transport_config cfg = {
	    .backend = c->backend,
	    .node = node,
	    .secret = secret,
	    .secret_len = sizeof(secret) - 1,
	    .io_timeout_ms = 5000,
	    .rdma_eager_max = c->eager_max,
	    .rdma_poll_us = c->poll_us,
	};
	int err;

	c->t = transport_new(&cfg, &err);
	if (!c->t) {
		complain("transport_new(%s): %s", c->backend, strerror(-err));
		return err;
	}
	err = transport_region_new(c->t, dst, 64 * MiB, &c->region);
	if (err) {
		complain("cannot register the destination for '%s': %s", c->label, strerror(-err));
		return err;
	}
	if (strcmp(c->backend, "tcp") && !c->region) {
		complain("'%s': no region: RDMA fetches would register per transfer", c->label);
		return -ENODEV;
	}
	return 0;
}

static void client_close(struct client *c)
{
	transport_region_free(c->region);
	transport_free(c->t);
	c->region = NULL;
	c->t = NULL;
}

static int redis_get(redisContext *c, const struct obj *o, bool check);

static int fetch(const struct client *c, const struct obj *o)
{
	struct iovec iov = {dst, o->size};
	struct transport_req req = {
	    .peer = "srv",
	    .addr = tcp_addr,
	    .rdma_addr = strcmp(c->backend, "tcp") ? rdma_addr : NULL,
	    .region = c->region,
	    .id = o->id,
	    .len = o->size,
	    .iov = &iov,
	    .iovcnt = 1,
	};

	if (c->redis)
		return redis_get(c->redis, o, false);
	return transport_fetch(c->t, &req);
}

static void path_set(const struct client *c)
{
	if (c->force)
		setenv("OBJFS_RDMA_PATH", c->force, 1);
	else
		unsetenv("OBJFS_RDMA_PATH");
}

/* ---- one point ---- */

struct lat {
	long n;
	double p50, p90, mean; /* microseconds */
	bool odd;	       /* went another way than it should have */
	bool done;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Nearest rank, of sorted @v. */
static double pct(const double *v, long n, double p)
{
	long k = (long)ceil(p * (double)n) - 1;

	return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

static void lat_of(double *us, long n, struct lat *ret)
{
	double sum = 0;
	long i;

	qsort(us, (size_t)n, sizeof(*us), cmp_double);
	for (i = 0; i < n; i++)
		sum += us[i];
	ret->n = n;
	ret->p50 = pct(us, n, 0.5);
	ret->p90 = pct(us, n, 0.9);
	ret->mean = sum / (double)n;
	ret->done = true;
}

static long nmin_of(uint64_t size)
{
	return size >= 4 * MiB ? 3 : size >= 256 * KiB ? 5 : 10;
}

/* How many timed runs, from one that took @t seconds. */
static long n_for(double t, uint64_t size)
{
	double n = t > 0 ? opt.budget_s / t : NMAX;
	long lo = nmin_of(size);

	return n < (double)lo ? lo : n > NMAX ? NMAX : (long)n;
}

/* The path counter a fetch by @c of @size bytes must move. */
static uint64_t path_count(const struct client *c, const struct transport_stats *s, uint64_t size)
{
	uint32_t em = c->eager_max ? c->eager_max : TRANSPORT_RDMA_EAGER_DEFAULT;

	if (!strcmp(c->backend, "tcp"))
		return s->fetch_tcp;
	if (c->force)
		return !strcmp(c->force, "eager") ? s->fetch_eager : s->fetch_rdv;
	return size <= em ? s->fetch_eager : s->fetch_rdv;
}

/* The first fetch of a point, checked byte for byte, then warm-up ones;
 * the time of the last, in seconds, or -errno. */
static double warm_up(const struct client *c, const struct obj *o)
{
	long i, warm = o->size >= MiB ? 1 : 3;
	int64_t t0 = 0;
	int err;

	path_set(c);
	if (c->redis) {
		err = redis_get(c->redis, o, true);
	} else {
		memset(dst, 0x5a, o->size);
		err = fetch(c, o);
		if (!err && memcmp(dst, o->mem, o->size))
			err = -EBADMSG;
	}
	for (i = 0; i < warm && !err; i++) {
		t0 = util_mono_ns();
		err = fetch(c, o);
	}
	if (err) {
		complain("%s: fetch of %" PRIu64 " bytes: %s", c->label, o->size, strerror(-err));
		return err;
	}
	return (double)(util_mono_ns() - t0) / 1e9;
}

/*
 * Measure fetches of @o by each of the @nc clients @cs into @ret[]:
 * warm-up, then N rounds in each of which every client fetches once, in
 * an order that rotates, so that whatever else this VM and its host are
 * doing hits all clients alike.  N = n_for() of the sum of the warm-up
 * times over @nc budgets; a point stops early after 3 x @nc budgets.
 * 0, or -errno of a failed fetch, -EBADMSG if the bytes differ, -ETIME
 * when out of time.
 */
static int measure(struct client *const *cs, int nc, const struct obj *o, struct lat *ret)
{
	struct transport_stats a[MAX_SET], b;
	double *us[MAX_SET] = {0}, t = 0, w;
	int64_t t0, stop;
	long i, n;
	int j, k, err = 0;

	memset(ret, 0, sizeof(*ret) * (size_t)nc);
	if (out_of_time())
		return -ETIME;
	for (k = 0; k < nc; k++) {
		w = warm_up(cs[k], o);
		if (w < 0)
			return (int)w;
		t += w;
	}
	n = n_for(t / nc, o->size);
	for (k = 0; k < nc; k++) {
		us[k] = calloc((size_t)n, sizeof(double));
		if (!us[k]) {
			err = -ENOMEM;
			goto out;
		}
		if (cs[k]->t)
			transport_stats(cs[k]->t, &a[k]);
	}
	stop = util_mono_ns() + (int64_t)(3 * nc * opt.budget_s * 1e9);
	for (i = 0; i < n && !err; i++) {
		for (j = 0; j < nc && !err; j++) {
			k = (int)((i + j) % nc);
			path_set(cs[k]);
			t0 = util_mono_ns();
			err = fetch(cs[k], o);
			us[k][i] = (double)(util_mono_ns() - t0) / 1e3;
			if (err)
				complain("%s: fetch of %" PRIu64 " bytes: %s", cs[k]->label,
					 o->size, strerror(-err));
		}
		if (i + 1 >= nmin_of(o->size) && util_mono_ns() > stop) {
			i++;
			break;
		}
	}
	if (err)
		goto out;
	for (k = 0; k < nc; k++) {
		struct client *c = cs[k];
		uint64_t moved;

		lat_of(us[k], i, &ret[k]);
		if (!c->t)
			continue;
		transport_stats(c->t, &b);
		moved = path_count(c, &b, o->size) - path_count(c, &a[k], o->size);
		if (moved != (uint64_t)i || b.rdma_fallbacks != a[k].rdma_fallbacks) {
			ret[k].odd = true;
			complain("%s, %" PRIu64 " bytes: %" PRIu64 " of %ld fetches went the "
				 "expected way, %" PRIu64 " fell back to TCP",
				 c->label, o->size, moved, i,
				 b.rdma_fallbacks - a[k].rdma_fallbacks);
		}
	}
out:
	for (k = 0; k < nc; k++)
		free(us[k]);
	return err;
}

/* One client alone. */
static int measure1(struct client *c, const struct obj *o, struct lat *ret)
{
	return measure(&c, 1, o, ret);
}

/* ---- formatting ---- */

/* @v microseconds, in 9 characters at most ("123.4us", "12.3ms", "1.23s"). */
static const char *fmt_us(double v)
{
	static char buf[16][16];
	static int k;
	char *b = buf[k++ % 16];

	if (v < 0)
		snprintf(b, 16, "-");
	else if (v < 1000)
		snprintf(b, 16, "%.1fus", v);
	else if (v < 1e6)
		snprintf(b, 16, "%.*fms", v < 1e4 ? 2 : 1, v / 1e3);
	else
		snprintf(b, 16, "%.2fs", v / 1e6);
	return b;
}

static const char *fmt_size(uint64_t s)
{
	static char buf[8][24];
	static int k;
	char *b = buf[k++ % 8];

	if (s >= MiB)
		snprintf(b, 24, "%" PRIu64 " MiB", s / MiB);
	else if (s >= KiB)
		snprintf(b, 24, "%" PRIu64 " KiB", s / KiB);
	else
		snprintf(b, 24, "%" PRIu64 " B", s);
	return b;
}

/* @v with 2 decimals and @unit, or "-" if it is negative (not measured). */
static const char *fmt_num(double v, const char *unit)
{
	static char buf[16][24];
	static int k;
	char *b = buf[k++ % 16];

	if (v < 0)
		snprintf(b, 24, "-");
	else
		snprintf(b, 24, "%.2f%s", v, unit);
	return b;
}

static const char *fmt_lat(const struct lat *l)
{
	static char buf[8][32];
	static int k;
	char *b = buf[k++ % 8];

	if (!l->done)
		snprintf(b, 32, "-");
	else
		snprintf(b, 32, "%s/%s%s", fmt_us(l->p50), fmt_us(l->p90), l->odd ? "!" : "");
	return b;
}

static void target(const char *name, bool pass, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void target(const char *name, bool pass, const char *fmt, ...)
{
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	printf("target %s: %s  %s\n", name, what, pass ? "PASS" : "MISS");
	if (targets) {
		fprintf(targets, "target %s: %s  %s\n", name, what, pass ? "PASS" : "MISS");
		fflush(targets);
	}
}

/* ---- latency ---- */

static struct lat lat[NOBJ][N_CLIENTS];

static void lat_table(int from, int to, const char *file)
{
	FILE *f = out_file(file);
	int i, k;

	printf("%-8s", "size");
	for (k = 0; k < N_CLIENTS; k++)
		printf(" %-20s", clients[k].label);
	printf(" %9s %s\n", "hyb/tcp", "n (tcp eager rdv hybrid)");
	if (f)
		fprintf(f, "# size_bytes tcp_p50 tcp_p90 eager_p50 eager_p90 rdv_p50 rdv_p90 "
			   "hybrid_p50 hybrid_p90 (microseconds; -1: not measured)\n");
	for (i = from; i < to; i++) {
		const struct lat *l = lat[i];

		printf("%-8s", fmt_size(objs[i].size));
		for (k = 0; k < N_CLIENTS; k++)
			printf(" %-20s", fmt_lat(&l[k]));
		if (l[C_TCP].done && l[C_HYBRID].done)
			printf(" %8.2fx", l[C_HYBRID].p50 / l[C_TCP].p50);
		else
			printf(" %9s", "-");
		printf(" %ld %ld %ld %ld\n", l[0].n, l[1].n, l[2].n, l[3].n);
		if (!f)
			continue;
		fprintf(f, "%" PRIu64, objs[i].size);
		for (k = 0; k < N_CLIENTS; k++)
			fprintf(f, " %.2f %.2f", l[k].done ? l[k].p50 : -1,
				l[k].done ? l[k].p90 : -1);
		fprintf(f, "\n");
	}
	if (f)
		fclose(f);
}

static int mode_latency(void)
{
	struct client *set[N_CLIENTS];
	char slower[1024] = "";
	size_t used = 0;
	int i, k, err = 0, measured = 0;

	printf("\n== latency: one whole object per fetch, p50/p90 (\"!\": not all by the "
	       "expected path)\n");
	fflush(stdout);
	for (k = 0; k < N_CLIENTS; k++)
		set[k] = &clients[k];
	for (i = 0; i < NOBJ && !err; i++) {
		err = measure(set, N_CLIENTS, &objs[i], lat[i]);
		if (!err)
			measured = i + 1;
		fprintf(stderr, "latency: %s done\n", fmt_size(objs[i].size));
	}
	unsetenv("OBJFS_RDMA_PATH");
	printf("\nsmall objects (figure 4.3)\n");
	lat_table(0, SMALL_N, "lat-small.dat");
	printf("\nlarge objects (figure 4.4)\n");
	lat_table(SMALL_N, NOBJ, "lat-large.dat");
	for (i = 0; i < measured; i++)
		if (lat[i][C_HYBRID].p50 > lat[i][C_TCP].p50 && used < sizeof(slower) - 64)
			used += (size_t)snprintf(
			    slower + used, sizeof(slower) - used, "%s%s (%.2fx)", used ? ", " : "",
			    fmt_size(objs[i].size), lat[i][C_HYBRID].p50 / lat[i][C_TCP].p50);
	if (measured < NOBJ)
		complain("latency: stopped after %d of %d sizes", measured, NOBJ);
	target("hybrid-vs-tcp", measured == NOBJ && !used,
	       "hybrid p50 no slower than tcp at any size, 64 B..64 MiB; slower at: %s",
	       used	  ? slower
	       : measured ? "none"
			  : "(not measured)");
	return err;
}

/* ---- redis ---- */

static redisContext *redis_open(const char *url)
{
	struct timeval tv = {5, 0};
	redisContext *c;
	char host[256];
	int port = 6379;

	if (!strncmp(url, "unix:", 5)) {
		c = redisConnectUnixWithTimeout(url + 5, tv);
	} else {
		const char *h = strncmp(url, "redis://", 8) ? url : url + 8;
		const char *colon = strrchr(h, ':');

		snprintf(host, sizeof(host), "%.*s", colon ? (int)(colon - h) : (int)strlen(h), h);
		if (colon)
			port = atoi(colon + 1);
		c = redisConnectWithTimeout(host, port, tv);
	}
	if (!c || c->err) {
		complain("cannot connect to redis '%s': %s", url, c ? c->errstr : "out of memory");
		redisFree(c);
		return NULL;
	}
	(void)redisSetTimeout(c, (struct timeval){30, 0});
	/* hiredis 0.14 otherwise frees its read buffer whenever more than
	 * 16 KiB of it is unused, and grows it again for every big reply */
	c->reader->maxbuf = 0;
	return c;
}

static int redis_get(redisContext *c, const struct obj *o, bool check)
{
	redisReply *r = redisCommand(c, "GET objfs-rdma-bench:%" PRIu64, o->size);
	int err = 0;

	if (!r)
		return -EIO;
	if (r->type != REDIS_REPLY_STRING || (uint64_t)r->len != o->size ||
	    (check && memcmp(r->str, o->mem, o->size)))
		err = -EBADMSG;
	freeReplyObject(r);
	return err;
}

static int mode_redis(void)
{
	struct client redis = {"redis", "redis", NULL, 0};
	struct client *set[2] = {&clients[C_HYBRID], &redis};
	struct lat l[NOBJ][2];
	redisReply *r;
	FILE *f;
	int i, err = 0, faster = 0, measured = 0;

	printf("\n== objfs (hybrid) against a Redis GET of the same size (figures 4.5, 4.6), "
	       "p50/p90\n");
	fflush(stdout);
	if (!opt.redis_url) {
		complain("redis: no --redis URL");
		return -EINVAL;
	}
	redis.redis = redis_open(opt.redis_url);
	if (!redis.redis)
		return -ECONNREFUSED;
	for (i = 0; i < NOBJ && !err; i++) {
		r = redisCommand(redis.redis, "SET objfs-rdma-bench:%" PRIu64 " %b", objs[i].size,
				 objs[i].mem, (size_t)objs[i].size);
		if (!r || r->type == REDIS_REPLY_ERROR) {
			complain("redis SET of %" PRIu64 " bytes: %s", objs[i].size,
				 r ? r->str : redis.redis->errstr);
			err = -EIO;
		}
		freeReplyObject(r);
		if (!err)
			err = measure(set, 2, &objs[i], l[i]);
		if (!err)
			measured++;
		freeReplyObject(
		    redisCommand(redis.redis, "DEL objfs-rdma-bench:%" PRIu64, objs[i].size));
		fprintf(stderr, "redis: %s done\n", fmt_size(objs[i].size));
	}
	redisFree(redis.redis);
	f = out_file("redis.dat");
	if (f)
		fprintf(f,
			"# size_bytes hybrid_p50 hybrid_p90 redis_p50 redis_p90 (microseconds)\n");
	printf("%-8s %-20s %-20s %11s %5s\n", "size", "objfs hybrid", "redis GET", "redis/objfs",
	       "n");
	for (i = 0; i < measured; i++) {
		printf("%-8s %-20s %-20s %10.2fx %5ld\n", fmt_size(objs[i].size), fmt_lat(&l[i][0]),
		       fmt_lat(&l[i][1]), l[i][1].p50 / l[i][0].p50, l[i][0].n);
		if (l[i][1].p50 > l[i][0].p50)
			faster++;
		if (f)
			fprintf(f, "%" PRIu64 " %.2f %.2f %.2f %.2f\n", objs[i].size, l[i][0].p50,
				l[i][0].p90, l[i][1].p50, l[i][1].p90);
	}
	if (f)
		fclose(f);
	printf("objfs faster than Redis (p50) at %d of %d sizes\n", faster, measured);
	return err;
}

/* ---- threshold sweep ---- */

#define SWEEP_FROM 6 /* objs[6]: 4 KiB */
#define SWEEP_TO 13  /* objs[12]: 256 KiB */

static int mode_sweep(void)
{
	struct lat l[SWEEP_TO - SWEEP_FROM][N_SWEEP] = {0};
	struct client *set[N_SWEEP];
	double total[N_SWEEP] = {0}, rel[N_SWEEP] = {0}, best;
	int i, k, err = 0, best_total = 0, best_rel = 0, def = 3, rows = 0;
	FILE *f;

	printf("\n== threshold sweep: hybrid p50 by rdma_eager_max (the thesis chose 32 KiB)\n");
	fflush(stdout);
	for (k = 0; k < N_SWEEP && !err; k++) {
		snprintf(sweep_label[k], sizeof(sweep_label[k]), "eager_max=%uK", sweep_kib[k]);
		sweep[k] = (struct client){sweep_label[k], "rdma", NULL, sweep_kib[k] << 10};
		err = client_open(&sweep[k], "sweep");
	}
	for (k = 0; k < N_SWEEP; k++)
		set[k] = &sweep[k];
	for (i = SWEEP_FROM; i < SWEEP_TO && !err; i++) {
		err = measure(set, N_SWEEP, &objs[i], l[i - SWEEP_FROM]);
		if (!err)
			rows++;
		fprintf(stderr, "sweep: %s done\n", fmt_size(objs[i].size));
	}
	for (k = 0; k < N_SWEEP; k++)
		client_close(&sweep[k]);
	if (!rows)
		return err ? err : -EIO;

	f = out_file("sweep.dat");
	printf("%-8s", "size");
	if (f)
		fprintf(f, "# size_bytes then p50 (microseconds) for eager_max (KiB):");
	for (k = 0; k < N_SWEEP; k++) {
		printf(" %9uK", sweep_kib[k]);
		if (f)
			fprintf(f, " %u", sweep_kib[k]);
	}
	printf("\n");
	if (f)
		fprintf(f, "\n");
	for (i = 0; i < rows; i++) {
		best = l[i][0].p50;
		for (k = 1; k < N_SWEEP; k++)
			if (l[i][k].p50 < best)
				best = l[i][k].p50;
		printf("%-8s", fmt_size(objs[SWEEP_FROM + i].size));
		if (f)
			fprintf(f, "%" PRIu64, objs[SWEEP_FROM + i].size);
		for (k = 0; k < N_SWEEP; k++) {
			total[k] += l[i][k].p50;
			rel[k] += l[i][k].p50 / best / rows;
			printf(" %9s%s", fmt_us(l[i][k].p50), l[i][k].odd ? "!" : " ");
			if (f)
				fprintf(f, " %.2f", l[i][k].p50);
		}
		printf("\n");
		if (f)
			fprintf(f, "\n");
	}
	if (f)
		fclose(f);
	for (k = 1; k < N_SWEEP; k++) {
		if (total[k] < total[best_total])
			best_total = k;
		if (rel[k] < rel[best_rel])
			best_rel = k;
	}
	printf("%-8s", "total");
	for (k = 0; k < N_SWEEP; k++)
		printf(" %9s ", fmt_us(total[k]));
	printf("\n%-8s", "vs best");
	for (k = 0; k < N_SWEEP; k++)
		printf(" %9.3fx", rel[k]);
	printf("\n(\"vs best\": the mean over the sizes of each p50 over the best p50 at that "
	       "size; every size counts alike)\n");
	f = out_file("sweep-score.dat");
	if (f) {
		fprintf(f, "# eager_max_kib total_p50_us mean_ratio_to_best\n");
		for (k = 0; k < N_SWEEP; k++)
			fprintf(f, "%u %.2f %.4f\n", sweep_kib[k], total[k], rel[k]);
		fclose(f);
	}
	printf("lowest total: %u KiB (%s; 32 KiB: %s, %+.1f%%); lowest mean ratio: %u KiB "
	       "(%.3fx; 32 KiB: %.3fx)\n",
	       sweep_kib[best_total], fmt_us(total[best_total]), fmt_us(total[def]),
	       100 * (total[def] / total[best_total] - 1), sweep_kib[best_rel], rel[best_rel],
	       rel[def]);
	printf("recommendation: the data says %u KiB; the default is 32 KiB%s\n",
	       sweep_kib[best_rel],
	       best_rel == def			 ? " (keep it)"
	       : rel[def] / rel[best_rel] < 1.05 ? " (within 5%: noise on this VM, keep it)"
						 : " (worth changing on this device)");
	return err;
}

/* ---- throughput: against perftest ---- */

static int perftest_runs;

/* sh -c @cmd, its output to @log; its pid or -1.  posix_spawn, not
 * fork: a fork would copy every page pinned by a registration */
static pid_t spawn_sh(const char *cmd, const char *log)
{
	char *argv[] = {(char *)"sh", (char *)"-c", (char *)cmd, NULL};
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int err;

	if (posix_spawn_file_actions_init(&fa))
		return -1;
	posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	err = posix_spawn(&pid, "/bin/sh", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	return err ? -1 : pid;
}

/* Wait up to @ms for @pid, then end it. */
static void reap(pid_t pid, int ms)
{
	int i;

	for (i = 0; i < ms / 50; i++) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return;
		usleep(50000);
	}
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
}

/*
 * Run perftest @tool with @args (no device, size, iterations or address)
 * for @size bytes, @iters iterations, once: its server in the background,
 * its client retried until the server listens (40 s at most).  The
 * numbers of the client's result row (the line that starts with @size) go
 * to @ret, at most @max; *@ret_clock is set if perftest doubted its clock
 * (its TSC rate, sampled against gettimeofday, disagreed with /proc/cpuinfo
 * or was too noisy).  The number of values, or -1.
 */
static int perftest_once(const char *tool, const char *args, uint64_t size, long iters, double *ret,
			 int max, bool *ret_clock)
{
	char srv[512], cli[640], log[4096], line[1024], cpus[16];
	int port = PERFTEST_PORT + perftest_runs++ % 200, attempt, n = -1;
	int64_t until = util_mono_ns() + 40000000000LL;
	const char *suffix = *args ? "-e" : "";
	pid_t pid;

	/* polling runs spin on both ends: give them every CPU; event
	 * runs sleep and wake like objfs: give them objfs's CPU */
	snprintf(cpus, sizeof(cpus), "%d", opt.pin);
	snprintf(srv, sizeof(srv),
		 "exec taskset -c %s timeout -k 2 60 %s -d %s -x %d -s %" PRIu64 " -n %ld -p %d %s",
		 *args && opt.pin >= 0 ? cpus : opt.all_cpus, tool, opt.dev, opt.gid, size, iters,
		 port, args);
	snprintf(cli, sizeof(cli), "%s %s 2>&1", srv + 5, opt.ip);
	snprintf(log, sizeof(log), "%s/perftest/%s-%" PRIu64 "%s-server.log", opt.out, tool, size,
		 suffix);
	pid = spawn_sh(srv, log);
	if (pid < 0)
		return -1;
	usleep(300000);
	for (attempt = 0; n < 0 && util_mono_ns() < until; attempt++) {
		FILE *p = popen(cli, "r");
		FILE *keep;

		if (!p)
			break;
		snprintf(log, sizeof(log), "%s/perftest/%s-%" PRIu64 "%s.log", opt.out, tool, size,
			 suffix);
		keep = fopen(log, "a");
		while (fgets(line, sizeof(line), p)) {
			char *s = line, *e;
			int k = 0;

			if (keep)
				fputs(line, keep);
			if (strstr(line, "differs from nominal") || strstr(line, "Correlation") ||
			    strstr(line, "Conflicting CPU"))
				*ret_clock = true;
			if (strtoull(s, &e, 10) != size || e == s || (*e != ' ' && *e != '\t'))
				continue;
			for (s = e; k < max; s = e) {
				double v = strtod(s, &e);

				if (e == s)
					break;
				ret[k++] = v;
			}
			n = k;
		}
		if (keep)
			fclose(keep);
		pclose(p);
		if (n >= 0)
			break;
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			/* the server gave up (a client that half-connected): again */
			pid = spawn_sh(srv, log);
			if (pid < 0)
				return -1;
		}
		usleep(500000);
	}
	reap(pid, 10000);
	return n;
}

/* perftest_once() until its numbers are finite, 3 runs at most. */
static int perftest(const char *tool, const char *args, uint64_t size, long iters, double *ret,
		    int max, bool *ret_clock)
{
	int run, n = -1, k;

	*ret_clock = false;
	for (run = 0; run < 3 && !out_of_time(); run++) {
		n = perftest_once(tool, args, size, iters, ret, max, ret_clock);
		for (k = 0; k < n && isfinite(ret[k]); k++)
			;
		if (n > 0 && k == n)
			return n;
		n = -1;
	}
	complain("%s -s %" PRIu64 "%s%s: no usable result in %d runs (logs in %s/perftest)", tool,
		 size, *args ? " " : "", args, run, opt.out);
	return -1;
}

/* ib_read_bw of @iters x 1 MiB: its average MB/s (2^20), or -1. */
static double read_bw(long iters)
{
	double v[4];
	bool clock;

	/* bytes iterations peak avg msgrate */
	if (perftest("ib_read_bw", "", MiB, iters, v, 4, &clock) < 3)
		return -1;
	if (clock)
		complain("ib_read_bw: perftest doubted its clock (see its log)");
	return v[2];
}

/* Put every thread of this process on CPU @cpu, or on every CPU if
 * @cpu < 0.  0 or -errno. */
static int cpus_set(int cpu)
{
	long i, ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct dirent *e;
	cpu_set_t set;
	DIR *d;
	int err = 0;

	CPU_ZERO(&set);
	for (i = 0; i < ncpu && i < CPU_SETSIZE; i++)
		if (cpu < 0 || i == cpu)
			CPU_SET(i, &set);
	d = opendir("/proc/self/task");
	if (!d)
		return -errno;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && sched_setaffinity(atoi(e->d_name), sizeof(set), &set))
			err = -errno;
	closedir(d);
	return err;
}

static double median_of(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n ? pct(v, n, 0.5) : -1;
}

#define TPUT_ROUNDS 3

static int mode_throughput(void)
{
	const struct obj *big = &objs[NOBJ - 1];
	struct lat rdv, tcp, eager[N_SENDLAT];
	double ib[TPUT_ROUNDS], ours[TPUT_ROUNDS], tcps[TPUT_ROUNDS], bw, mine, tcpbw;
	double sl[N_SENDLAT][2], sle[N_SENDLAT], v[7], worst = 0;
	bool clock[N_SENDLAT] = {false}, c2, doubted = false;
	int i, r, err = 0, ok = 0, n, nib = 0, nours = 0, ntcp = 0, over = 0;
	FILE *f;

	printf("\n== throughput: rendezvous against ib_read_bw; eager round trip against "
	       "ib_send_lat\n");
	fflush(stdout);
	/* rounds of ib_read_bw then one 64 MiB fetch by rendezvous and one by
	 * tcp, so that both see the same VM; and both on every CPU, as
	 * perftest's polling runs are (a deep pipeline of READs does not
	 * wait on hand-offs the way a small fetch does) */
	if (opt.pin >= 0 && cpus_set(-1))
		complain("throughput: cannot unpin the process");
	for (r = 0; r < TPUT_ROUNDS && !err && !out_of_time(); r++) {
		double t = read_bw(64);

		if (t > 0)
			ib[nib++] = t;
		err = measure1(&clients[C_RDV], big, &rdv);
		if (!err)
			ours[nours++] = (double)big->size / MiB / (rdv.p50 / 1e6);
		if (!err)
			err = measure1(&clients[C_TCP], big, &tcp);
		if (!err)
			tcps[ntcp++] = (double)big->size / MiB / (tcp.p50 / 1e6);
		fprintf(stderr, "throughput: round %d done\n", r + 1);
	}
	unsetenv("OBJFS_RDMA_PATH");
	if (opt.pin >= 0 && cpus_set(opt.pin))
		complain("throughput: cannot pin the process again");
	for (i = 0; i < nib; i++)
		printf("%s%.1f", i ? ", " : "ib_read_bw -s 1048576 -n 64, MB/s by round: ", ib[i]);
	for (i = 0; i < nours; i++)
		printf(
		    "%s%.1f",
		    i ? ", " : "\nobjfs rendezvous 64 MiB fetch (p50 of a point), MB/s: ", ours[i]);
	for (i = 0; i < ntcp; i++)
		printf("%s%.1f", i ? ", " : "\nobjfs tcp 64 MiB fetch, for scale, MB/s: ", tcps[i]);
	printf("\n");
	bw = median_of(ib, nib);
	mine = median_of(ours, nours);
	tcpbw = median_of(tcps, ntcp);
	printf("medians: objfs rendezvous %.1f MB/s, ib_read_bw %.1f MB/s, objfs tcp %.1f MB/s "
	       "(MB = 2^20 bytes, as perftest's; all on every CPU)\n",
	       mine, bw, tcpbw);
	f = out_file("tput.dat");
	if (f) {
		fprintf(f,
			"# label MB/s (2^20 bytes), medians of %d rounds\n\"ib_read_bw\" %.2f\n"
			"\"objfs rendezvous\" %.2f\n\"objfs tcp\" %.2f\n",
			TPUT_ROUNDS, bw, mine, tcpbw);
		fclose(f);
	}
	target("rendezvous-vs-ib_read_bw", bw > 0 && mine >= 0.8 * bw,
	       "objfs %.1f MB/s / ib_read_bw %.1f MB/s = %.2fx, target >= 0.80x", mine, bw,
	       bw > 0 ? mine / bw : 0);
	if (err)
		return err;

	/* the eager round trip */
	for (i = 0; i < N_SENDLAT && !err && !out_of_time(); i++) {
		const struct obj *o = &objs[i];

		/* bytes iters t_min t_max t_typical t_avg t_stdev p99 p99.9 */
		n = perftest("ib_send_lat", "", o->size, 1000, v, 7, &clock[i]);
		sl[i][0] = n >= 5 ? v[3] : -1; /* t_typical */
		sl[i][1] = n >= 5 ? v[4] : -1; /* t_avg */
		n = perftest("ib_send_lat", "-e", o->size, 1000, v, 7, &c2);
		sle[i] = n >= 5 ? v[3] : -1;
		clock[i] = clock[i] || c2;
		err = measure1(&clients[C_HYBRID], o, &eager[i]);
		if (!err)
			ok = i + 1;
		fprintf(stderr, "throughput: send_lat %s done\n", fmt_size(o->size));
	}
	printf("%-8s %-20s %12s %10s %11s %14s %13s %12s %13s\n", "size", "eager RTT p50/p90",
	       "ib_send_lat", "t_avg", "raw RTT", "eager/ib_lat", "eager/rawRTT", "ib -e",
	       "eager/-e RTT");
	printf("%-8s %-20s %12s %10s %11s %14s %13s %12s %13s\n", "", "(objfs hybrid)",
	       "t_typical 1w", "1-way", "2 x t_typ", "(target <= 2)", "(= /2)", "t_typ 1-way",
	       "(2 x t_typ)");
	f = out_file("sendlat.dat");
	if (f)
		fprintf(f, "# size_bytes eager_rtt_p50 eager_rtt_p90 ib_send_lat_typical "
			   "ib_send_lat_avg ib_send_lat_events_typical (microseconds; ib_send_lat "
			   "is one-way: RTT/2)\n");
	for (i = 0; i < ok; i++) {
		double x = sl[i][0] > 0 ? eager[i].p50 / sl[i][0] : -1;

		printf("%-8s %-20s %12s %10s %11s %13s %12s %12s %12s%s\n", fmt_size(objs[i].size),
		       fmt_lat(&eager[i]), fmt_num(sl[i][0], "us"), fmt_num(sl[i][1], "us"),
		       fmt_num(2 * sl[i][0], "us"), fmt_num(x, "x"), fmt_num(x / 2, "x"),
		       fmt_num(sle[i], "us"),
		       fmt_num(sle[i] > 0 ? eager[i].p50 / (2 * sle[i]) : -1, "x"),
		       clock[i] ? " ?" : "");
		doubted = doubted || clock[i];
		if (x < 0 || x > 2)
			over++;
		if (x > worst)
			worst = x;
		if (f)
			fprintf(f, "%" PRIu64 " %.2f %.2f %.2f %.2f %.2f\n", objs[i].size,
				eager[i].p50, eager[i].p90, sl[i][0], sl[i][1], sle[i]);
	}
	if (f)
		fclose(f);
	printf("ib_send_lat polls its completion queue on both ends (every CPU); with -e it "
	       "sleeps on completion\nevents, as objfs does, on objfs's CPU%s.  All its numbers "
	       "are one-way: half a round trip.\n",
	       opt.pin >= 0 ? "" : " (not pinned here)");
	if (doubted)
		printf(
		    "?: perftest doubted its clock in that row (its TSC rate, sampled, disagreed "
		    "with /proc/cpuinfo or was too noisy)\n");
	target("eager-vs-ib_send_lat", ok == N_SENDLAT && !over,
	       "hybrid eager round trip p50 / ib_send_lat t_typical (one-way), 64 B..4 KiB: "
	       "worst %.2fx, target <= 2.00x (i.e. <= the raw SEND round trip)",
	       worst);
	return err;
}

/* ---- polling ---- */

#define POLL_BLOCKS 3

/*
 * Hybrid whose connections sleep on completion events against hybrid
 * whose connections poll (rdma_poll_us, --poll-us), 64 B..4 KiB.  Each
 * client is measured in blocks of its own, POLL_BLOCKS each,
 * alternating (E P, P E, E P): a polling connection's thread spins on
 * after its last fetch, and in shared rounds it would compete with the
 * other client's fetches.  The server's connections poll for both with
 * --server-poll-us.  Reported: the median of the blocks' p50s and p90s.
 */
static int mode_poll(void)
{
	struct client pc = {"hybrid-poll", "auto", NULL, 0, opt.poll_us};
	struct client *set[2] = {&clients[C_HYBRID], &pc};
	double p50[2][POLL_BLOCKS], p90[2][POLL_BLOCKS], m[N_SENDLAT][2][2];
	struct lat l;
	int i, b, j, k, err, measured = 0;
	long n[N_SENDLAT] = {0};
	FILE *f;

	printf("\n== completion polling: hybrid with client connections on events against "
	       "polling %u us after each completion (server connections: %s), p50/p90, "
	       "medians of %d blocks each\n",
	       opt.poll_us, opt.srv_poll_us ? "poll" : "events", POLL_BLOCKS);
	if (opt.srv_poll_us)
		printf("the server's connections poll %u us for both clients\n", opt.srv_poll_us);
	fflush(stdout);
	err = client_open(&pc, "cli-poll");
	if (!err) {
		err = fetch(&pc, &objs[0]);
		if (err)
			complain("%s: first fetch: %s", pc.label, strerror(-err));
	}
	for (i = 0; i < N_SENDLAT && !err; i++) {
		for (b = 0; b < POLL_BLOCKS && !err; b++)
			for (j = 0; j < 2 && !err; j++) {
				k = (b + j) % 2;
				err = measure1(set[k], &objs[i], &l);
				p50[k][b] = l.p50;
				p90[k][b] = l.p90;
				n[i] += k ? 0 : l.n;
			}
		if (err)
			break;
		for (k = 0; k < 2; k++) {
			m[i][k][0] = median_of(p50[k], POLL_BLOCKS);
			m[i][k][1] = median_of(p90[k], POLL_BLOCKS);
		}
		measured++;
		fprintf(stderr, "poll: %s done\n", fmt_size(objs[i].size));
	}
	client_close(&pc);
	f = out_file("poll.dat");
	if (f)
		fprintf(f,
			"# size_bytes events_p50 events_p90 poll_p50 poll_p90 (microseconds, "
			"medians of %d blocks)\n",
			POLL_BLOCKS);
	printf("%-8s %-20s %-20s %11s %6s\n", "size", "events", "polling", "poll/events", "n");
	for (i = 0; i < measured; i++) {
		struct lat e = {.p50 = m[i][0][0], .p90 = m[i][0][1], .done = true};
		struct lat q = {.p50 = m[i][1][0], .p90 = m[i][1][1], .done = true};

		printf("%-8s %-20s %-20s %10.2fx %6ld\n", fmt_size(objs[i].size), fmt_lat(&e),
		       fmt_lat(&q), q.p50 / e.p50, n[i]);
		if (f)
			fprintf(f, "%" PRIu64 " %.2f %.2f %.2f %.2f\n", objs[i].size, e.p50, e.p90,
				q.p50, q.p90);
	}
	if (f)
		fclose(f);
	return err;
}

/* ---- main ---- */

static void usage(FILE *out)
{
	fprintf(out, "usage: objfs-rdma-bench [--out DIR] [--redis URL] [--budget-ms MS] "
		     "[--max-seconds S]\n"
		     "                        [--ip ADDR] [--dev DEV] [--gid N] [--pin CPU]\n"
		     "                        [--poll-us US] [--server-poll-us US]\n"
		     "                        [latency|redis|sweep|throughput|poll]...\n");
}

static int setup(void)
{
	struct transport_config cfg = {
	    .backend = "auto",
	    .node = "srv",
	    .listen_host = opt.ip,
	    .secret = secret,
	    .secret_len = sizeof(secret) - 1,
	    .io_timeout_ms = 5000,
	    .rdma_poll_us = opt.srv_poll_us,
	};
	int err, k;

	if (objs_make())
		return -ENOMEM;
	dst = aligned_alloc(4096, 64 * MiB);
	if (!dst)
		return -ENOMEM;
	memset(dst, 0, 64 * MiB);
	server = transport_new(&cfg, &err);
	if (!server) {
		complain("transport_new(auto): %s", strerror(-err));
		return err;
	}
	err = transport_serve(server, &source);
	if (err) {
		complain("cannot serve on %s: %s", opt.ip, strerror(-err));
		return err;
	}
	if (strcmp(transport_rdma_state(server), "on") ||
	    transport_addr_of(server, "tcp", tcp_addr, sizeof(tcp_addr)) ||
	    transport_addr_of(server, "rdma", rdma_addr, sizeof(rdma_addr))) {
		complain("the server does not serve RDMA: %s", transport_rdma_state(server));
		return -ENODEV;
	}
	printf("serving 21 objects (64 B..64 MiB) on tcp %s, rdma %s\n", tcp_addr, rdma_addr);
	if (opt.pin >= 0)
		printf("this process (server, clients, every thread) runs on CPU %d of %s\n",
		       opt.pin, opt.all_cpus);
	for (k = 0; k < N_CLIENTS; k++) {
		err = client_open(&clients[k], "cli");
		if (err)
			return err;
		/* the connection, outside every measurement */
		path_set(&clients[k]);
		err = fetch(&clients[k], &objs[0]);
		if (err) {
			complain("%s: first fetch: %s", clients[k].label, strerror(-err));
			return err;
		}
	}
	unsetenv("OBJFS_RDMA_PATH");
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const names[] = {"latency", "redis", "sweep", "throughput", "poll"};
	int (*const fns[])(void) = {mode_latency, mode_redis, mode_sweep, mode_throughput,
				    mode_poll};
	/* run when no mode is named */
	static const bool dflt[] = {true, true, true, true, false};
	bool want[ARRAY_SIZE(names)] = {false}, any = false;
	struct ibv_context **devs;
	double max_s = 900;
	int64_t t0 = util_mono_ns();
	int i, k, n = 0, rc = 0;

	opt.ip = getenv("OBJFS_VM_IP");
	opt.dev = getenv("OBJFS_VM_RDMA_DEV") ? getenv("OBJFS_VM_RDMA_DEV") : "rxe0";
	if (getenv("OBJFS_VM_GID_INDEX"))
		opt.gid = atoi(getenv("OBJFS_VM_GID_INDEX"));
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		}
		for (k = 0; k < (int)ARRAY_SIZE(names) && strcmp(a, names[k]); k++)
			;
		if (k < (int)ARRAY_SIZE(names)) {
			want[k] = any = true;
			continue;
		}
		if (!v || a[0] != '-' || a[1] != '-') {
			usage(stderr);
			return 2;
		}
		i++;
		if (!strcmp(a, "--out"))
			opt.out = v;
		else if (!strcmp(a, "--redis"))
			opt.redis_url = v;
		else if (!strcmp(a, "--budget-ms"))
			opt.budget_s = atof(v) / 1e3;
		else if (!strcmp(a, "--max-seconds"))
			max_s = atof(v);
		else if (!strcmp(a, "--ip"))
			opt.ip = v;
		else if (!strcmp(a, "--dev"))
			opt.dev = v;
		else if (!strcmp(a, "--gid"))
			opt.gid = atoi(v);
		else if (!strcmp(a, "--pin"))
			opt.pin = atoi(v);
		else if (!strcmp(a, "--poll-us") || !strcmp(a, "--server-poll-us")) {
			char *end;
			unsigned long us = strtoul(v, &end, 10);

			if (!isdigit((unsigned char)*v) || *end || us > TRANSPORT_RDMA_POLL_MAX) {
				fprintf(stderr,
					"objfs-rdma-bench: %s takes microseconds, 0 to %u\n", a,
					TRANSPORT_RDMA_POLL_MAX);
				return 2;
			}
			*(a[2] == 'p' ? &opt.poll_us : &opt.srv_poll_us) = (unsigned)us;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (opt.budget_s <= 0 || opt.budget_s > 10 || max_s <= 0) {
		usage(stderr);
		return 2;
	}
	opt.deadline = t0 + (int64_t)(max_s * 1e9);
	devs = rdma_get_devices(&n);
	if (devs)
		rdma_free_devices(devs);
	if (n <= 0 || !opt.ip) {
		fprintf(stderr, "objfs-rdma-bench: %s\n",
			n <= 0 ? "no RDMA device" : "no address: set OBJFS_VM_IP or --ip");
		return 77;
	}
	snprintf(opt.all_cpus, sizeof(opt.all_cpus), "0-%ld", sysconf(_SC_NPROCESSORS_ONLN) - 1);
	if (opt.pin >= 0) {
		cpu_set_t set;

		/* before any thread: every thread of the process inherits it */
		CPU_ZERO(&set);
		CPU_SET(opt.pin, &set);
		if (sched_setaffinity(0, sizeof(set), &set)) {
			fprintf(stderr, "objfs-rdma-bench: cannot run on CPU %d: %s\n", opt.pin,
				strerror(errno));
			return 2;
		}
	}
	mkdir(opt.out, 0755);
	{
		char pt[4096];

		snprintf(pt, sizeof(pt), "%s/perftest", opt.out);
		mkdir(pt, 0755);
	}
	log_setup(LOGL_WARN, stderr);
	signal(SIGPIPE, SIG_IGN);
	targets = out_file("targets.txt");
	if (setup()) {
		rc = 1;
		goto out;
	}
	for (k = 0; k < (int)ARRAY_SIZE(names); k++) {
		if (any ? !want[k] : !dflt[k])
			continue;
		if (out_of_time()) {
			complain("%s: skipped, out of time (--max-seconds %.0f)", names[k], max_s);
			rc = 1;
			continue;
		}
		if (fns[k]())
			rc = 1;
		fflush(stdout);
	}
out:
	for (k = 0; k < N_CLIENTS; k++)
		client_close(&clients[k]);
	transport_free(server);
	objs_free();
	free(dst);
	if (targets)
		fclose(targets);
	printf("\nobjfs-rdma-bench: %.0f s, %d warnings\n", (double)(util_mono_ns() - t0) / 1e9,
	       warnings);
	return rc;
}
#endif
