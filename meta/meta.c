/*
 * meta: the Redis location service (model and key schema in meta.h, the
 * Lua scripts in meta_scripts.c).
 *
 * Data flow: a public call checks its arguments, builds an argument vector
 * (struct args), borrows a connection from the pool, runs one script with
 * EVALSHA (or one plain command), gives the connection back, validates the
 * whole reply, and only then writes the caller's output parameters.
 *
 * Pool: pool_size slots, each holding a blocking redisContext with send
 * and receive timeouts of timeout_ms, or NULL while down.  A slot is
 * borrowed under m->lock; the borrower owns its context until it gives the
 * slot back, so no context is ever used by two threads at once.  Borrowing
 * a slot without a context connects it: connect, then one pipelined round
 * trip of AUTH, SELECT, SCRIPT LOAD of every script and the namespace
 * init, so that a Redis that restarted empty is healed on reconnect (every
 * namespace script also heals a FLUSHALL on its own).  A context that fails
 * (I/O error, EOF, timeout, protocol error) is freed, and so is an idle one
 * found closed when it is borrowed (Redis restarted).  A failed connect
 * starts a backoff shared by the pool, 100 ms doubling to 5 s and reset by
 * a successful connect: until it expires, a call that would have to
 * connect fails with -EIO at once, and afterwards one call at a time
 * probes.  So no call waits much longer than timeout_ms (a connect plus one
 * round trip when Redis hangs).
 *
 * Errors: ctx_error() is the one map from hiredis context errors and
 * reply_errno() the one map from error replies.  A lost connection is -EIO
 * to callers, as meta.h promises; the detail goes to meta_last_error().
 *
 * hiredis writes with write(2), so a Redis that went away could raise
 * SIGPIPE: each command blocks SIGPIPE in the calling thread and swallows
 * one that it caused (as libpq does).
 */
#define _GNU_SOURCE
#include "meta.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "log.h"
#include "meta_i.h"

#define POOL_DEFAULT 4
#define POOL_MAX 64
#define TIMEOUT_DEFAULT_MS 2000
#define TIMEOUT_MAX_MS 600000
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define PREFIX_MAX 64
#define DEFAULT_PORT 6379
/* a listing larger than this gives -EFBIG rather than a huge allocation */
#define DIR_MAX (1u << 20)
#define HOLDERS_MAX 4096
#define EPOCH_MAX 64
#define SHA_LEN 40

struct conn {
	redisContext *ctx;		/* NULL while down; used only by the borrower */
	char sha[META_NSCRIPTS][SHA_LEN + 1];	/* used only by the borrower */
	bool busy;			/* guarded by meta.lock */
};

struct meta {
	/* set by meta_new(), read-only afterwards */
	char *url;			/* redacted */
	char *host;			/* redis:// */
	int port;
	char *sock;			/* unix: */
	char *password;			/* NULL: no AUTH */
	unsigned db;
	char *prefix;
	char *node;
	unsigned pool_size;
	unsigned timeout_ms;

	pthread_mutex_t lock;
	pthread_cond_t freed;		/* a slot went back to the pool */
	struct conn *conns;		/* [pool_size]; busy flags guarded by lock */
	unsigned backoff_ms;		/* guarded by lock; 0 while healthy */
	int64_t retry_at;		/* guarded by lock; mono ns */
	bool probing;			/* guarded by lock */
	char last_err[256];		/* guarded by lock */
	bool up;			/* atomic */
};

/* ---- argument vectors ---- */

#define ARGS_MAX 20

struct args {
	int n;
	const char *v[ARGS_MAX];
	size_t len[ARGS_MAX];
	char num[ARGS_MAX][24];
	char token[2 * 16 + 1];
};

/* Ends the arguments of args_add(), script() and command(), so that a
 * format that does not match its arguments trips an assertion. */
static const char args_end[] = "";

/*
 * Append to @a as @fmt says, one letter an argument: 's' a string (not
 * copied), 'u' a uint64_t, 'i' an int64_t; then args_end.
 */
static void args_vadd(struct args *a, const char *fmt, va_list ap)
{
	const char *end;

	for (; *fmt; fmt++) {
		assert(a->n < ARGS_MAX);
		if (*fmt == 's')
			a->v[a->n] = va_arg(ap, const char *);
		else if (*fmt == 'u')
			snprintf(a->num[a->n], sizeof(a->num[0]), "%" PRIu64, va_arg(ap, uint64_t));
		else
			snprintf(a->num[a->n], sizeof(a->num[0]), "%" PRId64, va_arg(ap, int64_t));
		if (*fmt != 's')
			a->v[a->n] = a->num[a->n];
		assert(a->v[a->n] != args_end);
		a->len[a->n] = strlen(a->v[a->n]);
		a->n++;
	}
	end = va_arg(ap, const char *);
	assert(end == args_end);
	(void)end;
}

static void args_add_(struct args *a, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	args_vadd(a, fmt, ap);
	va_end(ap);
}

#define args_add(a, fmt, ...) args_add_(a, fmt, ##__VA_ARGS__, args_end)

/* 32 random hex digits (the epoch, should this call have to create it). */
static int random_token(char out[2 * 16 + 1])
{
	uint8_t raw[16];
	ssize_t n;
	int i;

	do
		n = getrandom(raw, sizeof(raw), 0);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(raw))
		return n < 0 ? -errno : -EIO;
	for (i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	return 0;
}

/* Start the ARGV of a script: three slots for EVALSHA sha 0, then the
 * header of meta_i.h. */
static int args_script(const struct meta *m, struct args *a)
{
	int r = random_token(a->token);

	if (r < 0)
		return r;
	a->n = 3;
	args_add(a, "ssi", m->prefix, a->token, now_ns());
	return 0;
}

/* ---- errors ---- */

/*
 * The one map from a failed hiredis context to an errno, with a text for
 * meta_last_error().  @e is errno right after the failing call.
 */
static int ctx_error(const redisContext *ctx, int e, char *why, size_t len)
{
	int r;

	switch (ctx->err) {
	case REDIS_ERR_IO:
		/* hiredis 0.14 reports a timeout as EAGAIN from read(2) */
		if (e == EAGAIN || e == EWOULDBLOCK || e == EINPROGRESS || e == ETIMEDOUT ||
		    !strcmp(ctx->errstr, strerror(EAGAIN))) {
			snprintf(why, len, "%s", strerror(ETIMEDOUT));
			return -ETIMEDOUT;
		}
		r = e > 0 ? -e : -EIO;
		break;
	case REDIS_ERR_EOF:
		snprintf(why, len, "connection closed by server");
		return -ECONNRESET;
	case REDIS_ERR_PROTOCOL:
		r = -EPROTO;
		break;
	case REDIS_ERR_OOM:
		r = -ENOMEM;
		break;
	default:
		r = -EIO;
		break;
	}
	snprintf(why, len, "%s", ctx->errstr[0] ? ctx->errstr : strerror(-r));
	return r;
}

/*
 * The one map from an error reply to an errno.  Scripts answer with an
 * errno name as the first word ("ENOENT", or "ERR ENOENT ..." from
 * redis.error_reply() on Redis 7).
 */
static int reply_errno(const redisReply *rep)
{
	static const struct {
		const char *name;
		int err;
	} codes[] = {
		{ "ENOENT", ENOENT },	  { "EEXIST", EEXIST },	    { "ENOTDIR", ENOTDIR },
		{ "EISDIR", EISDIR },	  { "ENOTEMPTY", ENOTEMPTY }, { "EINVAL", EINVAL },
		{ "EBADMSG", EBADMSG },	  { "EADDRINUSE", EADDRINUSE }, { "ELOOP", ELOOP },
	};
	const char *s = rep->str ? rep->str : "";
	size_t i, n;

	if (!strncmp(s, "NOAUTH", 6) || !strncmp(s, "WRONGPASS", 9))
		return -EACCES;
	if (!strncmp(s, "ERR ", 4))
		s += 4;
	n = strcspn(s, " ");
	for (i = 0; i < ARRAY_SIZE(codes); i++)
		if (strlen(codes[i].name) == n && !strncmp(s, codes[i].name, n))
			return -codes[i].err;
	return -EIO;
}

/* ---- SIGPIPE ---- */

struct sigpipe_guard {
	sigset_t old;
	bool was_pending;
};

static void sigpipe_block(struct sigpipe_guard *g)
{
	sigset_t set, pend;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, &g->old);
	g->was_pending = sigpending(&pend) == 0 && sigismember(&pend, SIGPIPE) == 1;
}

/* @failed: the command failed, so it may have raised SIGPIPE. */
static void sigpipe_unblock(struct sigpipe_guard *g, bool failed)
{
	static const struct timespec zero;
	sigset_t set, pend;

	if (failed && !g->was_pending && sigpending(&pend) == 0 &&
	    sigismember(&pend, SIGPIPE) == 1) {
		sigemptyset(&set);
		sigaddset(&set, SIGPIPE);
		sigtimedwait(&set, NULL, &zero);
	}
	pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* ---- the pool ---- */

static void set_up(struct meta *m, bool up)
{
	__atomic_store_n(&m->up, up, __ATOMIC_RELAXED);
}

static void note_error(struct meta *m, const char *why)
{
	pthread_mutex_lock(&m->lock);
	snprintf(m->last_err, sizeof(m->last_err), "%s", why);
	pthread_mutex_unlock(&m->lock);
	set_up(m, false);
}

/* The context of @c failed in a call that set errno @e: drop it. */
static int conn_broken(struct meta *m, struct conn *c, int e)
{
	char why[256];
	int r = ctx_error(c->ctx, e, why, sizeof(why));

	log_debug("meta: connection to %s lost: %s", m->url, why);
	redisFree(c->ctx);
	c->ctx = NULL;
	note_error(m, why);
	return r == -ENOMEM ? r : -EIO;
}

/* Read the next pipelined reply; on failure the context is unusable. */
static int read_reply(redisContext *ctx, redisReply **ret, char *why, size_t len)
{
	struct sigpipe_guard g;
	void *rep = NULL;
	int ok, e;

	sigpipe_block(&g);
	ok = redisGetReply(ctx, &rep);
	e = errno;
	sigpipe_unblock(&g, ok != REDIS_OK);
	if (ok != REDIS_OK || !rep)
		return ctx_error(ctx, e, why, len);
	*ret = rep;
	return 0;
}

static bool is_sha(const redisReply *rep)
{
	size_t i;

	if (rep->type != REDIS_REPLY_STRING || rep->len != SHA_LEN)
		return false;
	for (i = 0; i < SHA_LEN; i++)
		if (!isxdigit((unsigned char)rep->str[i]))
			return false;
	return true;
}

/*
 * Connect slot @c and prepare it: AUTH, SELECT, SCRIPT LOAD of every
 * script and the namespace init, pipelined.  0, -EIO, -EACCES or -ENOMEM,
 * with a text in @why.
 */
static int conn_open(struct meta *m, struct conn *c, char *why, size_t wlen)
{
	struct timeval tv = {
		.tv_sec = m->timeout_ms / 1000,
		.tv_usec = (m->timeout_ms % 1000) * 1000,
	};
	const char *loadv[3] = { "SCRIPT", "LOAD", NULL };
	redisReply *rep = NULL;
	redisContext *ctx;
	struct args a;
	int r, i;

	r = args_script(m, &a);
	if (r < 0) {
		snprintf(why, wlen, "no random token: %s", strerror(-r));
		return r;
	}
	a.v[0] = "EVAL";
	a.len[0] = 4;
	a.v[1] = meta_script_src[MS_EPOCH];
	a.len[1] = strlen(a.v[1]);
	a.v[2] = "0";
	a.len[2] = 1;

	if (m->sock)
		ctx = redisConnectUnixWithTimeout(m->sock, tv);
	else
		ctx = redisConnectWithTimeout(m->host, m->port, tv);
	if (!ctx) {
		snprintf(why, wlen, "out of memory");
		return -ENOMEM;
	}
	if (ctx->err || redisSetTimeout(ctx, tv) != REDIS_OK) {
		r = ctx_error(ctx, errno, why, wlen);
		goto clean_ctx;
	}
	/* hiredis 0.14 keeps at most 16 KiB of unused read buffer and
	 * moves the rest on every read: big replies get quadratic */
	ctx->reader->maxbuf = 0;

	r = -ENOMEM;
	snprintf(why, wlen, "out of memory");
	if (m->password && redisAppendCommand(ctx, "AUTH %s", m->password) != REDIS_OK)
		goto clean_ctx;
	if (m->db && redisAppendCommand(ctx, "SELECT %u", m->db) != REDIS_OK)
		goto clean_ctx;
	for (i = 0; i < META_NSCRIPTS; i++) {
		loadv[2] = meta_script_src[i];
		if (redisAppendCommandArgv(ctx, 3, loadv, NULL) != REDIS_OK)
			goto clean_ctx;
	}
	if (redisAppendCommandArgv(ctx, a.n, a.v, a.len) != REDIS_OK)
		goto clean_ctx;

	/* the replies: [AUTH] (-2), [SELECT] (-1), the scripts, the init */
	for (i = -2; i <= META_NSCRIPTS; i++) {
		if ((i == -2 && !m->password) || (i == -1 && !m->db))
			continue;
		r = read_reply(ctx, &rep, why, wlen);
		if (r < 0)
			goto clean_ctx;
		if (rep->type == REDIS_REPLY_ERROR) {
			static const char *const what[] = {
				"authentication failed", "SELECT", "SCRIPT LOAD",
				"cannot create the namespace",
			};

			snprintf(why, wlen, "%s: %.200s",
				 what[i < 0 ? i + 2 : i < META_NSCRIPTS ? 2 : 3], rep->str);
			r = i == -2 ? -EACCES : reply_errno(rep);
			goto clean_rep;
		}
		if (i >= 0 && i < META_NSCRIPTS) {
			if (!is_sha(rep)) {
				snprintf(why, wlen, "SCRIPT LOAD: unexpected reply");
				r = -EIO;
				goto clean_rep;
			}
			memcpy(c->sha[i], rep->str, SHA_LEN + 1);
		}
		freeReplyObject(rep);
	}
	c->ctx = ctx;
	why[0] = '\0';
	return 0;

clean_rep:
	freeReplyObject(rep);
clean_ctx:
	redisFree(ctx);
	return r == -EACCES || r == -ENOMEM ? r : -EIO;
}

/* A free slot, one with a context if possible.  Called with m->lock. */
static struct conn *pool_pick(struct meta *m)
{
	struct conn *down = NULL;
	unsigned i;

	for (i = 0; i < m->pool_size; i++) {
		struct conn *c = &m->conns[i];

		if (c->busy)
			continue;
		if (c->ctx)
			return c;
		if (!down)
			down = c;
	}
	return down;
}

static void conn_put(struct meta *m, struct conn *c)
{
	pthread_mutex_lock(&m->lock);
	c->busy = false;
	pthread_cond_signal(&m->freed);
	pthread_mutex_unlock(&m->lock);
}

/*
 * Is the idle context of @c dead?  Nothing is due on an idle connection,
 * so anything readable is an EOF or an error: Redis restarted, or closed
 * an idle client.  Checking now saves a call that would fail.
 */
static bool conn_dead(const struct conn *c)
{
	struct pollfd p = { .fd = c->ctx->fd, .events = POLLIN };

	return poll(&p, 1, 0) != 0;
}

/*
 * Borrow a connected slot.  0, -EIO (Redis unreachable, in backoff, or no
 * slot free within the timeout), -EACCES, -ENOMEM.
 */
static int conn_get(struct meta *m, struct conn **ret)
{
	struct timespec until;
	struct conn *c;
	char why[256];
	bool probe = false;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += m->timeout_ms / 1000;
	until.tv_nsec += (long)(m->timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}

	pthread_mutex_lock(&m->lock);
	while (!(c = pool_pick(m))) {
		if (pthread_cond_timedwait(&m->freed, &m->lock, &until) == ETIMEDOUT) {
			pthread_mutex_unlock(&m->lock);
			log_debug("meta: no free connection to %s within %u ms", m->url,
				  m->timeout_ms);
			return -EIO;
		}
	}
	c->busy = true;
	pthread_mutex_unlock(&m->lock);
	if (c->ctx && conn_dead(c)) {
		log_debug("meta: idle connection to %s was closed", m->url);
		redisFree(c->ctx);
		c->ctx = NULL;
	}
	if (c->ctx) {
		*ret = c;
		return 0;
	}

	pthread_mutex_lock(&m->lock);
	if (m->backoff_ms) {
		if (m->probing || mono_ns() < m->retry_at) {
			c->busy = false;
			pthread_cond_signal(&m->freed);
			pthread_mutex_unlock(&m->lock);
			return -EIO;
		}
		m->probing = probe = true;
	}
	pthread_mutex_unlock(&m->lock);
	r = conn_open(m, c, why, sizeof(why));
	if (r < 0)
		log_debug("meta: cannot connect to %s: %s", m->url, why);
	pthread_mutex_lock(&m->lock);
	if (probe)
		m->probing = false;
	if (r < 0) {
		/* only a failed probe doubles: threads that tried at the
		 * same moment do not count several times */
		if (!m->backoff_ms)
			m->backoff_ms = BACKOFF_MIN_MS;
		else if (probe)
			m->backoff_ms = m->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
									   : m->backoff_ms * 2;
		m->retry_at = mono_ns() + (int64_t)m->backoff_ms * 1000000;
		snprintf(m->last_err, sizeof(m->last_err), "%s", why);
		set_up(m, false);
		c->busy = false;
		pthread_cond_signal(&m->freed);
		pthread_mutex_unlock(&m->lock);
		return r;
	}
	m->backoff_ms = 0;
	m->last_err[0] = '\0';
	set_up(m, true);
	pthread_mutex_unlock(&m->lock);
	*ret = c;
	return 0;
}

/* One command on a borrowed slot.  The reply may be an error reply;
 * a failed context gives -EIO (or -ENOMEM) and is dropped. */
static int conn_cmd(struct meta *m, struct conn *c, struct args *a, redisReply **ret)
{
	struct sigpipe_guard g;
	redisReply *rep;
	int e;

	sigpipe_block(&g);
	rep = redisCommandArgv(c->ctx, a->n, a->v, a->len);
	e = errno;
	sigpipe_unblock(&g, !rep);
	if (!rep)
		return conn_broken(m, c, e);
	set_up(m, true);
	*ret = rep;
	return 0;
}

static int conn_load(struct meta *m, struct conn *c, enum meta_script s)
{
	redisReply *rep;
	struct args a = { 0 };
	int r;

	args_add(&a, "sss", "SCRIPT", "LOAD", meta_script_src[s]);
	r = conn_cmd(m, c, &a, &rep);
	if (r < 0)
		return r;
	if (is_sha(rep))
		memcpy(c->sha[s], rep->str, SHA_LEN + 1);
	else
		r = rep->type == REDIS_REPLY_ERROR ? reply_errno(rep) : -EIO;
	freeReplyObject(rep);
	return r;
}

/* Run script @s on a borrowed slot; an error reply becomes an errno. */
static int conn_script(struct meta *m, struct conn *c, enum meta_script s, struct args *a,
		       redisReply **ret)
{
	redisReply *rep;
	int r, tries;

	for (tries = 0;; tries++) {
		a->v[0] = "EVALSHA";
		a->len[0] = 7;
		a->v[1] = c->sha[s];
		a->len[1] = SHA_LEN;
		a->v[2] = "0";
		a->len[2] = 1;
		r = conn_cmd(m, c, a, &rep);
		if (r < 0)
			return r;
		/* Redis restarted, or SCRIPT FLUSH: load it again, once */
		if (rep->type != REDIS_REPLY_ERROR || tries > 0 || strncmp(rep->str, "NOSCRIPT", 8))
			break;
		freeReplyObject(rep);
		r = conn_load(m, c, s);
		if (r < 0)
			return r;
	}
	if (rep->type == REDIS_REPLY_ERROR) {
		r = reply_errno(rep);
		log_debug("meta: script %s: %.200s", meta_script_name[s], rep->str);
		freeReplyObject(rep);
		return r;
	}
	*ret = rep;
	return 0;
}

/* conn_get() for a call other than meta_connect(): meta.h promises -EIO
 * for anything that keeps Redis from answering. */
static int conn_get_call(struct meta *m, struct conn **ret)
{
	int r = conn_get(m, ret);

	return r < 0 && r != -ENOMEM ? -EIO : r;
}

/* Run script @s with its own arguments as @fmt says (see args_vadd()). */
static int script_(struct meta *m, enum meta_script s, redisReply **ret, const char *fmt, ...)
{
	struct args a;
	struct conn *c;
	va_list ap;
	int r;

	r = args_script(m, &a);
	if (r < 0)
		return r;
	va_start(ap, fmt);
	args_vadd(&a, fmt, ap);
	va_end(ap);
	r = conn_get_call(m, &c);
	if (r < 0)
		return r;
	r = conn_script(m, c, s, &a, ret);
	conn_put(m, c);
	return r;
}

/* One plain command built as @fmt says; an error reply becomes an errno. */
static int command_(struct meta *m, redisReply **ret, const char *fmt, ...)
{
	struct args a = { 0 };
	redisReply *rep;
	struct conn *c;
	va_list ap;
	int r;

	va_start(ap, fmt);
	args_vadd(&a, fmt, ap);
	va_end(ap);
	r = conn_get_call(m, &c);
	if (r < 0)
		return r;
	r = conn_cmd(m, c, &a, &rep);
	conn_put(m, c);
	if (r < 0)
		return r;
	if (rep->type == REDIS_REPLY_ERROR) {
		r = reply_errno(rep);
		log_debug("meta: %s: %.200s", a.v[0], rep->str);
		freeReplyObject(rep);
		return r;
	}
	*ret = rep;
	return 0;
}

#define script(m, s, ret, fmt, ...) script_(m, s, ret, fmt, ##__VA_ARGS__, args_end)
#define command(m, ret, fmt, ...) command_(m, ret, fmt, ##__VA_ARGS__, args_end)

/* ---- reply validation ---- */

/* A bulk string of at most @max bytes and without NULs, or NULL. */
static const char *rep_text(const redisReply *r, size_t max)
{
	if (!r || r->type != REDIS_REPLY_STRING || !r->str || r->len > max ||
	    strlen(r->str) != r->len)
		return NULL;
	return r->str;
}

static int rep_u64(const redisReply *r, uint64_t *ret)
{
	const char *s = rep_text(r, 20);

	if (!s || parse_u64(s, ret) < 0)
		return -EBADMSG;
	return 0;
}

static int rep_i64(const redisReply *r, int64_t *ret)
{
	const char *s = rep_text(r, 20);
	bool neg;
	uint64_t v;

	if (!s)
		return -EBADMSG;
	neg = *s == '-';
	if (parse_u64(s + neg, &v) < 0 || v > (uint64_t)INT64_MAX + neg)
		return -EBADMSG;
	*ret = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

/* An id: decimal, no leading zero, 1 .. UINT64_MAX. */
static int parse_id(const char *s, uint64_t *ret)
{
	if (*s < '1' || *s > '9' || parse_u64(s, ret) < 0)
		return -EBADMSG;
	return 0;
}

static int rep_id(const redisReply *r, uint64_t *ret)
{
	const char *s = rep_text(r, 20);

	return s ? parse_id(s, ret) : -EBADMSG;
}

/* "d<id>" or "f<id>" */
static int rep_entry(const redisReply *r, enum meta_kind *kind, uint64_t *id)
{
	const char *s = rep_text(r, 21);

	if (!s || (s[0] != 'd' && s[0] != 'f') || parse_id(s + 1, id) < 0)
		return -EBADMSG;
	*kind = s[0] == 'd' ? META_DIR : META_FILE;
	return 0;
}

/* size, csum, mtime, origin */
static int rep_obj(redisReply *const *f, uint64_t id, struct meta_obj *ret)
{
	struct meta_obj o;
	const char *csum, *origin;

	memset(&o, 0, sizeof(o));
	o.id = id;
	csum = rep_text(f[1], 2 * OBJFS_CSUM_LEN);
	origin = rep_text(f[3], OBJFS_NODE_MAX - 1);
	if (rep_u64(f[0], &o.size) < 0 || !csum || csum_from_hex(csum, o.csum) < 0 ||
	    rep_i64(f[2], &o.mtime_ns) < 0 || !origin || node_name_validate(origin) < 0)
		return -EBADMSG;
	memcpy(o.origin, origin, strlen(origin) + 1);
	*ret = o;
	return 0;
}

/* {"d<id>", mtime, nsub} or {"f<id>", size, csum, mtime, origin} */
static int rep_lookup(const redisReply *rep, struct meta_entry *ret)
{
	struct meta_entry e;

	memset(&e, 0, sizeof(e));
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
	    rep_entry(rep->element[0], &e.kind, &e.id) < 0)
		return -EBADMSG;
	if (e.kind == META_DIR) {
		if (rep->elements != 3 || rep_i64(rep->element[1], &e.obj.mtime_ns) < 0 ||
		    rep_u64(rep->element[2], &e.nsub) < 0)
			return -EBADMSG;
		e.obj.id = e.id;
	} else if (rep->elements != 5 || rep_obj(rep->element + 1, e.id, &e.obj) < 0) {
		return -EBADMSG;
	}
	*ret = e;
	return 0;
}

/* An integer reply of 0 or 1 */
static int rep_bool(const redisReply *rep)
{
	if (rep->type != REDIS_REPLY_INTEGER || (rep->integer != 0 && rep->integer != 1))
		return -EBADMSG;
	return (int)rep->integer;
}

/* ---- construction ---- */

#define ALNUM "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

/* Are the @len bytes at @s 1..@max characters out of @set? */
static bool chars_in(const char *s, size_t len, size_t max, const char *set)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (!s[i] || !strchr(set, s[i]))
			return false;
	return len > 0 && len <= max;
}

/* Whole decimal number in [min, max]. */
static int parse_range(const char *s, size_t len, uint64_t min, uint64_t max, uint64_t *ret)
{
	char buf[24];
	uint64_t v;

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (parse_u64(buf, &v) < 0 || v < min || v > max)
		return -EINVAL;
	*ret = v;
	return 0;
}

/*
 * unix:/abs/path.sock or redis://[:password@]host[:port][/db], with host
 * a name, an IPv4 address or [IPv6].  0, -EINVAL or -ENOMEM.
 */
static int parse_url(struct meta *m, const char *url)
{
	const char *p, *at, *host, *end, *q;
	size_t hlen;
	uint64_t v;
	bool v6 = false;

	if (!strncmp(url, "unix:", 5)) {
		p = url + 5;
		if (p[0] != '/' || strlen(p) >= sizeof(((struct sockaddr_un *)0)->sun_path))
			return -EINVAL;
		m->sock = strdup(p);
		m->url = strdup(url);
		return m->sock && m->url ? 0 : -ENOMEM;
	}
	if (strncmp(url, "redis://", 8))
		return -EINVAL;
	p = url + 8;
	at = strrchr(p, '@');
	if (at) {
		/* only ":password@"; no ACL user names */
		if (p[0] != ':' || at == p + 1)
			return -EINVAL;
		m->password = strndup(p + 1, (size_t)(at - p - 1));
		if (!m->password)
			return -ENOMEM;
		p = at + 1;
	}
	if (*p == '[') {
		host = p + 1;
		end = strchr(host, ']');
		if (!end)
			return -EINVAL;
		q = end + 1;
		v6 = true;
	} else {
		host = p;
		end = p + strcspn(p, ":/");
		q = end;
	}
	hlen = (size_t)(end - host);
	if (!chars_in(host, hlen, 253, v6 ? "0123456789abcdefABCDEF:." : ALNUM ".-_"))
		return -EINVAL;
	m->port = DEFAULT_PORT;
	if (*q == ':') {
		p = q + 1;
		q = p + strcspn(p, "/");
		if (parse_range(p, (size_t)(q - p), 1, 65535, &v) < 0)
			return -EINVAL;
		m->port = (int)v;
	}
	if (*q == '/') {
		if (parse_range(q + 1, strlen(q + 1), 0, INT_MAX, &v) < 0)
			return -EINVAL;
		m->db = (unsigned)v;
	} else if (*q) {
		return -EINVAL;
	}
	m->host = strndup(host, hlen);
	if (!m->host)
		return -ENOMEM;
	if (m->password) {
		size_t n = strlen(at + 1) + sizeof("redis://:***@");

		m->url = malloc(n);
		if (m->url)
			snprintf(m->url, n, "redis://:***@%s", at + 1);
	} else {
		m->url = strdup(url);
	}
	return m->url ? 0 : -ENOMEM;
}

struct meta *meta_new(const struct meta_config *cfg, int *ret_err)
{
	pthread_condattr_t ca;
	struct meta *m;
	int r = -EINVAL;

	if (!cfg || !cfg->url || node_name_validate(cfg->node) < 0 ||
	    cfg->pool_size > POOL_MAX || cfg->timeout_ms > TIMEOUT_MAX_MS ||
	    (cfg->prefix && !chars_in(cfg->prefix, strlen(cfg->prefix), PREFIX_MAX, ALNUM "._-")))
		goto fail;
	r = -ENOMEM;
	m = calloc(1, sizeof(*m));
	if (!m)
		goto fail;
	pthread_mutex_init(&m->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->freed, &ca);
	pthread_condattr_destroy(&ca);
	m->pool_size = cfg->pool_size ? cfg->pool_size : POOL_DEFAULT;
	m->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : TIMEOUT_DEFAULT_MS;
	r = parse_url(m, cfg->url);
	if (r < 0)
		goto clean_m;
	r = -ENOMEM;
	m->prefix = strdup(cfg->prefix ? cfg->prefix : "objfs");
	m->node = strdup(cfg->node);
	m->conns = calloc(m->pool_size, sizeof(*m->conns));
	if (!m->prefix || !m->node || !m->conns)
		goto clean_m;
	return m;

clean_m:
	meta_free(m);
fail:
	if (ret_err)
		*ret_err = r;
	return NULL;
}

void meta_free(struct meta *m)
{
	unsigned i;

	if (!m)
		return;
	for (i = 0; m->conns && i < m->pool_size; i++)
		if (m->conns[i].ctx)
			redisFree(m->conns[i].ctx);
	free(m->conns);
	pthread_cond_destroy(&m->freed);
	pthread_mutex_destroy(&m->lock);
	free(m->node);
	free(m->prefix);
	free(m->host);
	free(m->sock);
	free(m->password);
	free(m->url);
	free(m);
}

int meta_connect(struct meta *m)
{
	redisReply *rep;
	struct conn *c;
	struct args a;
	int r;

	r = args_script(m, &a);
	if (r < 0)
		return r;
	r = conn_get(m, &c);
	if (r < 0)
		return r == -EACCES || r == -ENOMEM ? r : -EIO;
	/* a slot that was up already has not run the init lately */
	r = conn_script(m, c, MS_EPOCH, &a, &rep);
	conn_put(m, c);
	if (r < 0)
		return r;
	freeReplyObject(rep);
	return 0;
}

const char *meta_url(const struct meta *m)
{
	return m->url;
}

bool meta_is_up(const struct meta *m)
{
	return __atomic_load_n(&m->up, __ATOMIC_RELAXED);
}

void meta_last_error(const struct meta *m, char *buf, size_t len)
{
	struct meta *mm = (struct meta *)m;

	if (!len)
		return;
	pthread_mutex_lock(&mm->lock);
	snprintf(buf, len, "%s", mm->last_err);
	pthread_mutex_unlock(&mm->lock);
}

/* ---- namespace ---- */

int meta_lookup(struct meta *m, uint64_t parent, const char *name, struct meta_entry *ret)
{
	redisReply *rep;
	int r;

	r = parent ? name_validate(name) : -EINVAL;
	if (r == 0)
		r = script(m, MS_LOOKUP, &rep, "us", parent, name);
	if (r < 0)
		return r;
	r = rep_lookup(rep, ret);
	freeReplyObject(rep);
	return r;
}

int meta_getattr(struct meta *m, uint64_t id, struct meta_entry *ret)
{
	struct meta_entry e;
	redisReply *rep;
	int r;

	r = id ? script(m, MS_GETATTR, &rep, "u", id) : -EINVAL;
	if (r < 0)
		return r;
	r = rep_lookup(rep, &e);
	freeReplyObject(rep);
	if (r == 0 && e.id != id)
		r = -EBADMSG;
	if (r == 0)
		*ret = e;
	return r;
}

static void obj_key(const struct meta *m, char kind, uint64_t id, char *buf, size_t len)
{
	snprintf(buf, len, "%s:%c:{%" PRIu64 "}", m->prefix, kind, id);
}

int meta_get_object(struct meta *m, uint64_t id, struct meta_obj *ret)
{
	char key[PREFIX_MAX + 32];
	redisReply *rep;
	size_t i, nil = 0;
	int r;

	obj_key(m, 'o', id, key, sizeof(key));
	r = id ? command(m, &rep, "ssssss", "HMGET", key, "size", "csum", "mtime", "origin")
	       : -EINVAL;
	if (r < 0)
		return r;
	r = -EBADMSG;
	if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 4) {
		for (i = 0; i < 4; i++)
			nil += rep->element[i]->type == REDIS_REPLY_NIL;
		r = nil == 4 ? -ENOENT : rep_obj(rep->element, id, ret);
	}
	freeReplyObject(rep);
	return r;
}

int meta_readdir(struct meta *m, uint64_t dir, struct meta_dirent **ret_ents, size_t *ret_n)
{
	struct meta_dirent *ents;
	redisReply *rep;
	size_t i, n = 0;
	int r;

	r = dir ? script(m, MS_READDIR, &rep, "u", dir) : -EINVAL;
	if (r < 0)
		return r;
	r = -EBADMSG;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements % 2)
		goto clean_rep;
	r = -EFBIG;
	if (rep->elements / 2 > DIR_MAX)
		goto clean_rep;
	r = -ENOMEM;
	ents = calloc(rep->elements / 2 + 1, sizeof(*ents));
	if (!ents)
		goto clean_rep;
	r = -EBADMSG;
	for (i = 0; i < rep->elements; i += 2) {
		const redisReply *f = rep->element[i];
		const char *name;

		/* the reserved fields ("/mtime", ...) */
		if (f->type == REDIS_REPLY_STRING && f->len && f->str[0] == '/')
			continue;
		name = rep_text(f, OBJFS_NAME_MAX);
		if (!name || name_validate(name) < 0 ||
		    rep_entry(rep->element[i + 1], &ents[n].kind, &ents[n].id) < 0)
			goto clean_ents;
		memcpy(ents[n].name, name, f->len + 1);
		n++;
	}
	freeReplyObject(rep);
	*ret_ents = ents;
	*ret_n = n;
	return 0;

clean_ents:
	free(ents);
clean_rep:
	freeReplyObject(rep);
	return r;
}

void meta_dirents_free(struct meta_dirent *ents)
{
	free(ents);
}

int meta_mkdir(struct meta *m, uint64_t parent, const char *name, int64_t mtime_ns,
	       struct meta_entry *ret)
{
	redisReply *rep;
	uint64_t id;
	int r;

	r = parent ? name_validate(name) : -EINVAL;
	if (r == 0)
		r = script(m, MS_MKDIR, &rep, "usi", parent, name, mtime_ns);
	if (r < 0)
		return r;
	r = rep_id(rep, &id);
	freeReplyObject(rep);
	if (r == 0 && ret) {
		memset(ret, 0, sizeof(*ret));
		ret->kind = META_DIR;
		ret->id = id;
		ret->obj.id = id;
		ret->obj.mtime_ns = mtime_ns;
	}
	return r;
}

/* rmdir and unlink: a name in, an id out */
static int remove_name(struct meta *m, enum meta_script s, uint64_t parent, const char *name,
		       uint64_t *ret_id)
{
	redisReply *rep;
	uint64_t id;
	int r;

	r = parent ? name_validate(name) : -EINVAL;
	if (r == 0)
		r = script(m, s, &rep, "us", parent, name);
	if (r < 0)
		return r;
	r = rep_id(rep, &id);
	freeReplyObject(rep);
	if (r == 0 && ret_id)
		*ret_id = id;
	return r;
}

int meta_rmdir(struct meta *m, uint64_t parent, const char *name, uint64_t *ret_id)
{
	return remove_name(m, MS_RMDIR, parent, name, ret_id);
}

int meta_unlink(struct meta *m, uint64_t parent, const char *name, uint64_t *ret_id)
{
	return remove_name(m, MS_UNLINK, parent, name, ret_id);
}

int meta_alloc_id(struct meta *m, uint64_t *ret_id)
{
	redisReply *rep;
	uint64_t id;
	int r;

	r = script(m, MS_ALLOC, &rep, "");
	if (r < 0)
		return r;
	r = rep_id(rep, &id);
	freeReplyObject(rep);
	if (r == 0 && id <= META_ROOT_ID)
		r = -EBADMSG;
	if (r == 0)
		*ret_id = id;
	return r;
}

/* Is @obj a record a caller may publish?  Fills @hex with its checksum. */
static int obj_check(const struct meta_obj *obj, char hex[OBJFS_CSUM_HEX])
{
	if (!obj || obj->id <= META_ROOT_ID || !memchr(obj->origin, '\0', OBJFS_NODE_MAX) ||
	    node_name_validate(obj->origin) < 0)
		return -EINVAL;
	csum_to_hex(obj->csum, hex);
	return 0;
}

int meta_publish(struct meta *m, uint64_t parent, const char *name, const struct meta_obj *obj,
		 bool replace, uint64_t *ret_replaced, char *ret_path)
{
	char hex[OBJFS_CSUM_HEX];
	const char *path;
	redisReply *rep;
	uint64_t old;
	int r;

	r = parent ? name_validate(name) : -EINVAL;
	if (r == 0)
		r = obj_check(obj, hex);
	if (r == 0)
		r = script(m, MS_PUBLISH, &rep, "usuusisss", parent, name, obj->id, obj->size,
			   hex, obj->mtime_ns, obj->origin, replace ? "1" : "0", m->node);
	if (r < 0)
		return r;
	r = -EBADMSG;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
	    rep_u64(rep->element[0], &old) < 0)
		goto clean_rep;
	path = rep_text(rep->element[1], OBJFS_PATH_MAX - 1);
	if (!path || (path[0] && path[0] != '/'))
		goto clean_rep;
	if (ret_replaced)
		*ret_replaced = old;
	if (ret_path)
		memcpy(ret_path, path, strlen(path) + 1);
	r = 0;
clean_rep:
	freeReplyObject(rep);
	return r;
}

int meta_rename(struct meta *m, uint64_t oparent, const char *oname, uint64_t nparent,
		const char *nname, unsigned flags, bool replace_files, uint64_t *ret_replaced)
{
	redisReply *rep;
	uint64_t old;
	int r;

	if (!oparent || !nparent || (flags & ~(META_RENAME_NOREPLACE | META_RENAME_EXCHANGE)) ||
	    flags == (META_RENAME_NOREPLACE | META_RENAME_EXCHANGE))
		return -EINVAL;
	r = name_validate(oname);
	if (r == 0)
		r = name_validate(nname);
	if (r == 0)
		r = script(m, MS_RENAME, &rep, "usussss", oparent, oname, nparent, nname,
			   flags & META_RENAME_NOREPLACE ? "1" : "0",
			   flags & META_RENAME_EXCHANGE ? "1" : "0", replace_files ? "1" : "0");
	if (r < 0)
		return r;
	r = rep_u64(rep, &old);
	freeReplyObject(rep);
	if (r == 0 && ret_replaced)
		*ret_replaced = old;
	return r;
}

int meta_holders(struct meta *m, uint64_t id, char (**ret_nodes)[OBJFS_NODE_MAX], size_t *ret_n)
{
	char key[PREFIX_MAX + 32];
	char(*nodes)[OBJFS_NODE_MAX];
	redisReply *rep;
	size_t i;
	int r;

	obj_key(m, 'h', id, key, sizeof(key));
	r = id ? command(m, &rep, "ss", "SMEMBERS", key) : -EINVAL;
	if (r < 0)
		return r;
	r = -EBADMSG;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements > HOLDERS_MAX)
		goto clean_rep;
	r = -ENOMEM;
	nodes = calloc(rep->elements + 1, sizeof(*nodes));
	if (!nodes)
		goto clean_rep;
	r = -EBADMSG;
	for (i = 0; i < rep->elements; i++) {
		const char *s = rep_text(rep->element[i], OBJFS_NODE_MAX - 1);

		if (!s || node_name_validate(s) < 0)
			goto clean_nodes;
		memcpy(nodes[i], s, strlen(s) + 1);
	}
	*ret_nodes = nodes;
	*ret_n = rep->elements;
	freeReplyObject(rep);
	return 0;

clean_nodes:
	free(nodes);
clean_rep:
	freeReplyObject(rep);
	return r;
}

static int holder_cmd(struct meta *m, const char *cmd, uint64_t id)
{
	char key[PREFIX_MAX + 32];
	redisReply *rep;
	int r;

	obj_key(m, 'h', id, key, sizeof(key));
	r = id ? command(m, &rep, "sss", cmd, key, m->node) : -EINVAL;
	if (r < 0)
		return r;
	r = rep->type == REDIS_REPLY_INTEGER ? 0 : -EBADMSG;
	freeReplyObject(rep);
	return r;
}

int meta_add_holder(struct meta *m, uint64_t id)
{
	return holder_cmd(m, "SADD", id);
}

int meta_del_holder(struct meta *m, uint64_t id)
{
	return holder_cmd(m, "SREM", id);
}

/* ---- recovery ---- */

int meta_epoch(struct meta *m, char *buf, size_t len)
{
	const char *s;
	redisReply *rep;
	int r;

	r = script(m, MS_EPOCH, &rep, "");
	if (r < 0)
		return r;
	s = rep_text(rep, EPOCH_MAX);
	r = s && chars_in(s, rep->len, EPOCH_MAX, ALNUM) ? 0 : -EBADMSG;
	if (r == 0 && rep->len >= len)
		r = -ERANGE;
	if (r == 0)
		memcpy(buf, s, rep->len + 1);
	freeReplyObject(rep);
	return r;
}

/* An absolute path of valid names: "/a/b/name". */
static int path_validate(const char *path)
{
	char name[OBJFS_NAME_MAX + 1];
	const char *p, *e;
	size_t n;

	if (!path || path[0] != '/' || strnlen(path, OBJFS_PATH_MAX) >= OBJFS_PATH_MAX)
		return -EINVAL;
	for (p = path + 1;; p = e + 1) {
		e = strchrnul(p, '/');
		n = (size_t)(e - p);
		if (n == 0 || n > OBJFS_NAME_MAX)
			return -EINVAL;
		memcpy(name, p, n);
		name[n] = '\0';
		if (name_validate(name) < 0)
			return -EINVAL;
		if (!*e)
			return 0;
	}
}

int meta_reregister(struct meta *m, const struct meta_obj *obj, const char *path)
{
	char hex[OBJFS_CSUM_HEX];
	redisReply *rep;
	int r;

	r = path_validate(path);
	if (r == 0)
		r = obj_check(obj, hex);
	if (r == 0)
		r = script(m, MS_REREGISTER, &rep, "uusisss", obj->id, obj->size, hex,
			   obj->mtime_ns, obj->origin, m->node, path);
	if (r < 0)
		return r;
	r = rep_bool(rep);
	freeReplyObject(rep);
	return r;
}

int meta_object_exists(struct meta *m, uint64_t id)
{
	char key[PREFIX_MAX + 32];
	redisReply *rep;
	int r;

	obj_key(m, 'o', id, key, sizeof(key));
	r = id ? command(m, &rep, "ss", "EXISTS", key) : -EINVAL;
	if (r < 0)
		return r;
	r = rep_bool(rep);
	freeReplyObject(rep);
	return r;
}

/* ---- node cards ---- */

static bool card_valid(const struct meta_card *card)
{
	return card && memchr(card->host, '\0', sizeof(card->host)) && card->host[0] &&
	       memchr(card->listen, '\0', sizeof(card->listen)) &&
	       memchr(card->instance, '\0', sizeof(card->instance)) &&
	       chars_in(card->instance, strlen(card->instance), sizeof(card->instance) - 1,
			ALNUM "-_") &&
	       card->pid > 0;
}

/* The ARGV of the claim and heartbeat scripts (see meta_scripts.c). */
static int args_card(struct meta *m, struct args *a, const struct meta_card *card,
		     const char *takeover, unsigned ttl_s)
{
	int r = args_script(m, a);

	if (r == 0)
		args_add(a, "sssusissiuu", m->node, card->instance, takeover, (uint64_t)ttl_s,
			 card->host, (int64_t)card->pid, card->listen, card->instance,
			 card->started_ns, card->capacity, card->used);
	return r;
}

/* host, pid, listen, instance, started, capacity, used */
static int rep_card(redisReply *const *f, struct meta_card *ret)
{
	const char *host = rep_text(f[0], sizeof(ret->host) - 1);
	const char *listen = rep_text(f[2], sizeof(ret->listen) - 1);
	const char *instance = rep_text(f[3], sizeof(ret->instance) - 1);
	struct meta_card c;
	int64_t pid;

	memset(&c, 0, sizeof(c));
	if (!host || !listen || !instance || rep_i64(f[1], &pid) < 0 || pid < 0 ||
	    pid > INT_MAX || rep_i64(f[4], &c.started_ns) < 0 || rep_u64(f[5], &c.capacity) < 0 ||
	    rep_u64(f[6], &c.used) < 0)
		return -EBADMSG;
	memcpy(c.host, host, strlen(host) + 1);
	memcpy(c.listen, listen, strlen(listen) + 1);
	memcpy(c.instance, instance, strlen(instance) + 1);
	c.pid = (int)pid;
	*ret = c;
	return 0;
}

/* One claim attempt: 0, or -EADDRINUSE with the holder's card. */
static int claim_once(struct meta *m, struct conn *c, const struct meta_card *card,
		      const char *takeover, unsigned ttl_s, struct meta_card *ret_other)
{
	redisReply *rep;
	struct args a;
	int r;

	r = args_card(m, &a, card, takeover, ttl_s);
	if (r == 0)
		r = conn_script(m, c, MS_CLAIM, &a, &rep);
	if (r < 0)
		return r;
	r = -EBADMSG;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
	    rep->element[0]->type != REDIS_REPLY_INTEGER)
		goto clean_rep;
	if (rep->element[0]->integer == 1 && rep->elements == 1)
		r = 0;
	else if (rep->element[0]->integer == 0 && rep->elements == 8 &&
		 rep_card(rep->element + 1, ret_other) == 0)
		r = -EADDRINUSE;
clean_rep:
	freeReplyObject(rep);
	return r;
}

/* Is @other a card left behind by a dead process on our own host? */
static bool card_stale(const struct meta_card *card, const struct meta_card *other)
{
	return !strcmp(card->host, other->host) && other->pid > 0 && kill(other->pid, 0) < 0 &&
	       errno == ESRCH;
}

int meta_node_claim(struct meta *m, const struct meta_card *card, unsigned ttl_s,
		    struct meta_card *ret_other)
{
	struct meta_card other;
	struct conn *c;
	int r;

	if (!card_valid(card) || !ttl_s)
		return -EINVAL;
	r = conn_get_call(m, &c);
	if (r < 0)
		return r;
	r = claim_once(m, c, card, "", ttl_s, &other);
	/* the second attempt replaces only the very card found stale */
	if (r == -EADDRINUSE && card_stale(card, &other)) {
		log_debug("meta: node '%s': taking over the card of dead pid %d", m->node,
			  other.pid);
		r = claim_once(m, c, card, other.instance, ttl_s, &other);
	}
	conn_put(m, c);
	if (r == -EADDRINUSE && ret_other)
		*ret_other = other;
	return r;
}

int meta_node_heartbeat(struct meta *m, const struct meta_card *card, unsigned ttl_s)
{
	redisReply *rep;
	struct conn *c;
	struct args a;
	int r;

	if (!card_valid(card) || !ttl_s)
		return -EINVAL;
	r = args_card(m, &a, card, "", ttl_s);
	if (r == 0)
		r = conn_get_call(m, &c);
	if (r < 0)
		return r;
	r = conn_script(m, c, MS_HEARTBEAT, &a, &rep);
	conn_put(m, c);
	if (r < 0)
		return r;
	r = rep->type == REDIS_REPLY_INTEGER ? 0 : -EBADMSG;
	freeReplyObject(rep);
	return r;
}

int meta_node_release(struct meta *m, const char *instance)
{
	redisReply *rep;
	int r;

	if (!instance || !instance[0] ||
	    strnlen(instance, sizeof(((struct meta_card *)0)->instance)) >=
		    sizeof(((struct meta_card *)0)->instance))
		return -EINVAL;
	r = script(m, MS_RELEASE, &rep, "ss", m->node, instance);
	if (r < 0)
		return r;
	r = rep_bool(rep);
	freeReplyObject(rep);
	return r < 0 ? r : 0;
}
