/*
 * meta-harness.h: what the meta unit tests (test-meta.c,
 * test-meta-cluster.c) share: a private redis-server on a unix socket in
 * a mkdtemp() directory (harness_begin() skips the test program if
 * redis-server is not installed; harness_end() kills it), a raw hiredis
 * connection for damaging records behind meta's back, and helpers.
 * Included by exactly one source file per test program.
 */
#ifndef OBJFS_META_HARNESS_H
#define OBJFS_META_HARNESS_H

#pragma GCC diagnostic ignored "-Wunused-function"

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "meta.h"
#include "tap.h"
#include "util.h"

static struct {
	char dir[64];
	char sock[128];
	char url[160];
	pid_t pid;
} R;

static redisContext *raw;

static bool have_redis_server(void)
{
	const char *path = getenv("PATH");
	char buf[4096], *save, *d;

	snprintf(buf, sizeof(buf), "%s", path ? path : "/usr/local/bin:/usr/bin:/bin");
	for (d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		char exe[4200];

		snprintf(exe, sizeof(exe), "%s/redis-server", d);
		if (access(exe, X_OK) == 0)
			return true;
	}
	return false;
}

static bool redis_answers(void)
{
	struct timeval tv = {1, 0};
	redisContext *c = redisConnectUnixWithTimeout(R.sock, tv);
	redisReply *rep;
	bool ok = false;

	if (c && !c->err) {
		rep = redisCommand(c, "PING");
		ok = rep && rep->type == REDIS_REPLY_STATUS && !strcmp(rep->str, "PONG");
		if (rep)
			freeReplyObject(rep);
	}
	if (c)
		redisFree(c);
	return ok;
}

static void raw_close(void)
{
	if (raw)
		redisFree(raw);
	raw = NULL;
}

static void redis_start(void)
{
	char log[128];
	int i;

	unlink(R.sock);
	snprintf(log, sizeof(log), "%s/redis.log", R.dir);
	R.pid = fork();
	if (R.pid < 0) {
		perror("fork");
		exit(1);
	}
	if (R.pid == 0) {
		int fd = open("/dev/null", O_RDWR);

		/* no orphan server if the test crashes */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", R.sock,
		       "--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", R.dir,
		       "--logfile", log, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 500; i++) {
		if (redis_answers())
			break;
		usleep(20000);
	}
	if (i == 500) {
		fprintf(stderr, "redis-server did not start\n");
		kill(R.pid, SIGKILL);
		exit(1);
	}
	raw_close();
	raw = redisConnectUnix(R.sock);
	if (!raw || raw->err) {
		fprintf(stderr, "cannot connect to the test redis-server\n");
		exit(1);
	}
}

static void redis_kill(void)
{
	raw_close();
	if (R.pid > 0) {
		kill(R.pid, SIGKILL);
		waitpid(R.pid, NULL, 0);
	}
	R.pid = 0;
}

static void rdo(const char *fmt, ...)
{
	redisReply *rep;
	va_list ap;

	va_start(ap, fmt);
	rep = redisvCommand(raw, fmt, ap);
	va_end(ap);
	if (!rep) {
		fprintf(stderr, "raw redis command failed: %s\n", raw->errstr);
		exit(1);
	}
	if (rep->type == REDIS_REPLY_ERROR)
		fprintf(stderr, "raw redis command '%s': %s\n", fmt, rep->str);
	freeReplyObject(rep);
}

/* A string field, or "" */
static void rget(char *buf, size_t len, const char *fmt, ...)
{
	redisReply *rep;
	va_list ap;

	va_start(ap, fmt);
	rep = redisvCommand(raw, fmt, ap);
	va_end(ap);
	buf[0] = '\0';
	if (rep && rep->type == REDIS_REPLY_STRING)
		snprintf(buf, len, "%s", rep->str);
	else if (rep && rep->type == REDIS_REPLY_INTEGER)
		snprintf(buf, len, "%lld", rep->integer);
	if (rep)
		freeReplyObject(rep);
}

/* The bucket of object @id's record in namespace @prefix (meta.h,
 * layout 3: {P}:r:<last 4 digits>), and the field */
static void __attribute__((unused))
bucket_of(const char *prefix, uint64_t id, char key[96], char field[24])
{
	size_t n = (size_t)snprintf(field, 24, "%" PRIu64, id);

	snprintf(key, 96, "{%s}:r:%s", prefix, field + (n > 4 ? n - 4 : 0));
}

/* Object @id's record, "<parent>/<name>[/@<node>...]", or "" */
static void __attribute__((unused)) rec_get(const char *prefix, uint64_t id, char *buf, size_t len)
{
	char key[96], field[24];

	bucket_of(prefix, id, key, field);
	rget(buf, len, "HGET %s %s", key, field);
}

static void __attribute__((unused)) rec_set(const char *prefix, uint64_t id, const char *v)
{
	char key[96], field[24];

	bucket_of(prefix, id, key, field);
	rdo("HSET %s %s %s", key, field, v);
}

/* 1 if object @id has a record, else 0 */
static int __attribute__((unused)) rec_exists(const char *prefix, uint64_t id)
{
	char key[96], field[24], buf[8];

	bucket_of(prefix, id, key, field);
	rget(buf, sizeof(buf), "HEXISTS %s %s", key, field);
	return atoi(buf);
}

/* Adds "/@<@node>" to the record (@node may be anything a damaged
 * record could hold) */
static void __attribute__((unused)) rec_hold(const char *prefix, uint64_t id, const char *node)
{
	char v[4096];

	rec_get(prefix, id, v, sizeof(v));
	snprintf(v + strlen(v), sizeof(v) - strlen(v), "/@%s", node);
	rec_set(prefix, id, v);
}

/* Where "/@<@node>" is in record @v (NULL: nowhere); its length in *@len */
static char *rec_holder_at(char *v, const char *node, size_t *len)
{
	char h[128];
	char *at;

	snprintf(h, sizeof(h), "/@%s", node);
	*len = strlen(h);
	/* the holders come after the parent and the name */
	at = strchr(v, '/');
	at = at ? strchr(at + 1, '/') : NULL;
	for (at = at ? strstr(at, h) : NULL; at; at = strstr(at + 1, h))
		if (at[*len] == '/' || at[*len] == '\0')
			return at;
	return NULL;
}

/* Takes "/@<@node>" out of the record */
static void __attribute__((unused)) rec_unhold(const char *prefix, uint64_t id, const char *node)
{
	char v[4096];
	size_t len;
	char *at;

	rec_get(prefix, id, v, sizeof(v));
	at = rec_holder_at(v, node, &len);
	if (at)
		memmove(at, at + len, strlen(at + len) + 1);
	rec_set(prefix, id, v);
}

/* 1 if the record says node @node holds a copy, else 0 */
static int __attribute__((unused)) rec_holds(const char *prefix, uint64_t id, const char *node)
{
	char v[4096];
	size_t len;

	rec_get(prefix, id, v, sizeof(v));
	return rec_holder_at(v, node, &len) != NULL;
}

/* The record's name becomes @name (its parent and holders stay) */
static void __attribute__((unused)) rec_rename(const char *prefix, uint64_t id, const char *name)
{
	char v[4096], out[4200];
	char *n, *rest;

	rec_get(prefix, id, v, sizeof(v));
	n = strchr(v, '/');
	if (!n)
		return;
	*n++ = '\0';
	rest = strchrnul(n, '/');
	snprintf(out, sizeof(out), "%s/%s%s", v, name, rest);
	rec_set(prefix, id, out);
}

/* How many fields of object @id's extras x:<id> (namespace @prefix)
 * start with @start ("=", "bsum", "~p:"; layout 3) */
static int __attribute__((unused)) nfields(const char *prefix, uint64_t id, const char *start)
{
	redisReply *rep = redisCommand(raw, "HKEYS {%s}:x:%" PRIu64, prefix, id);
	int n = 0;
	size_t i;

	if (rep && rep->type == REDIS_REPLY_ARRAY)
		for (i = 0; i < rep->elements; i++)
			n += rep->element[i]->type == REDIS_REPLY_STRING &&
			     !strncmp(rep->element[i]->str, start, strlen(start));
	if (rep)
		freeReplyObject(rep);
	return n;
}

/* How many nodes hold it: the "/@<node>" of its record */
static int __attribute__((unused)) nholders(const char *prefix, uint64_t id)
{
	char v[4096];
	int n = 0;
	char *at;

	rec_get(prefix, id, v, sizeof(v));
	at = strchr(v, '/');
	at = at ? strchr(at + 1, '/') : NULL;
	for (at = at ? strstr(at, "/@") : NULL; at; at = strstr(at + 2, "/@"))
		n++;
	return n;
}

static struct meta *mk(const char *prefix, const char *node, unsigned pool, unsigned timeout_ms)
{
	struct meta_config cfg = {
	    .url = R.url,
	    .prefix = prefix,
	    .node = node,
	    .pool_size = pool,
	    .timeout_ms = timeout_ms,
	};
	struct meta *m;
	int err = 0;

	m = meta_new(&cfg, &err);
	if (!m) {
		fprintf(stderr, "meta_new: %s\n", strerror(-err));
		exit(1);
	}
	return m;
}

static struct meta *mk_connected(const char *prefix)
{
	struct meta *m = mk(prefix, "node-a", 0, 0);

	CHECK_EQ(meta_connect(m), 0);
	return m;
}

static void mkobj(struct meta *m, struct meta_obj *o, uint64_t size)
{
	char data[64];

	memset(o, 0, sizeof(*o));
	CHECK_EQ(meta_alloc_id(m, &o->id), 0);
	o->size = size;
	o->mtime_ns = 1700000000123456789LL;
	snprintf(data, sizeof(data), "object %" PRIu64, o->id);
	util_csum_buf(data, strlen(data), o->csum);
	snprintf(o->origin, sizeof(o->origin), "node-a");
}

static uint64_t lookup_id(struct meta *m, uint64_t parent, const char *name)
{
	struct meta_entry e;

	if (meta_lookup(m, parent, name, &e) < 0)
		return 0;
	return e.id;
}

static int64_t ms_since(int64_t t0)
{
	return (util_mono_ns() - t0) / 1000000;
}

/* What a subscriber saw; a gap (NULL event) is recorded as kind "(gap)". */
struct inval_log {
	pthread_mutex_t lock;
	struct meta_inval ev[64];
	int n;
	int calls;
	int resyncs; /* "resync" events, not in ev[] */
};

static void inval_init(struct inval_log *l)
{
	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->lock, NULL);
}

static void inval_cb(void *arg, const struct meta_inval *ev)
{
	struct inval_log *l = arg;

	pthread_mutex_lock(&l->lock);
	if (ev && !strcmp(ev->kind, "resync")) {
		/* Redis lost writes: counted apart, since when it comes
		 * relative to the gap depends on timing */
		l->resyncs++;
		pthread_mutex_unlock(&l->lock);
		return;
	}
	if (l->n < (int)ARRAY_SIZE(l->ev)) {
		if (ev) {
			l->ev[l->n] = *ev;
		} else {
			memset(&l->ev[l->n], 0, sizeof(l->ev[0]));
			snprintf(l->ev[l->n].kind, sizeof(l->ev[0].kind), "(gap)");
		}
		l->n++;
	}
	l->calls++;
	pthread_mutex_unlock(&l->lock);
}

static int inval_count(struct inval_log *l)
{
	int n;

	pthread_mutex_lock(&l->lock);
	n = l->calls;
	pthread_mutex_unlock(&l->lock);
	return n;
}

/* Wait up to @ms for @n events; the number seen. */
static int inval_wait(struct inval_log *l, int n, int ms)
{
	int64_t t0 = util_mono_ns();

	while (inval_count(l) < n && ms_since(t0) < ms)
		usleep(2000);
	return inval_count(l);
}

#define CHECK_EV(l, i, k, p, nm, x)                     \
	do {                                            \
		CHECK((i) < (l)->n);                    \
		if ((i) < (l)->n) {                     \
			CHECK_STR((l)->ev[i].kind, k);  \
			CHECK_EQ((l)->ev[i].parent, p); \
			CHECK_STR((l)->ev[i].name, nm); \
			CHECK_EQ((l)->ev[i].id, x);     \
		}                                       \
	} while (0)

/* ---- cases ---- */

static int free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static int connect_url(const char *url, char *err, size_t len)
{
	struct meta_config cfg = {.url = url, .prefix = "t-auth", .node = "n1"};
	struct meta *m = meta_new(&cfg, NULL);
	struct meta_entry e;
	int r;

	if (!m)
		return -EINVAL;
	r = meta_connect(m);
	meta_last_error(m, err, len);
	if (r == 0)
		r = meta_mkdir(m, 1, "here", 1, &e);
	meta_free(m);
	return r;
}

/* AUTH and SELECT, over TCP: the server listens on a port for a while. */
static int rm_dir(const char *dir)
{
	char cmd[200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd);
}

static void harness_begin(const char *name)
{
	if (!have_redis_server())
		tap_skip("redis-server is not installed");
	signal(SIGPIPE, SIG_DFL); /* meta must cope on its own */
	snprintf(R.dir, sizeof(R.dir), "/tmp/objfs-%s-XXXXXX", name);
	if (!mkdtemp(R.dir)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(R.sock, sizeof(R.sock), "%s/redis.sock", R.dir);
	snprintf(R.url, sizeof(R.url), "unix:%s", R.sock);
	redis_start();
}

static int harness_end(void)
{
	int r;

	redis_kill();
	r = tap_done();
	rm_dir(R.dir);
	return r;
}

#endif
