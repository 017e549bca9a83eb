/*
 * meta_pool: how meta.c's calls reach Redis (the calls are in meta.c, the
 * Lua scripts in meta_scripts.c, struct meta in meta_i.h).
 *
 * Owns: the argument vector a command is sent as (struct args), the pool
 * of connections with its connect, reconnect and backoff, running one
 * command or script on a borrowed connection, the two maps from hiredis
 * errors to errno, SIGPIPE, and parsing the Redis URL into struct meta.
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
 * round trip when Redis hangs).  pool_connect() makes a connection outside
 * the pool the same way (for the invalidation subscriber), without the
 * scripts.
 *
 * Errors: pool_ctx_error() is the one map from hiredis context errors and
 * pool_reply_errno() the one map from error replies.  A lost connection is
 * -EIO to callers, as meta.h promises; the detail goes to meta_last_error().
 * An error reply is an answer, so the connection is up: a key of the
 * wrong type (WRONGTYPE) or a script's EBADMSG is a corrupt record
 * (-EBADMSG, logged by meta_log_bad_reply() with what the script said),
 * never a reason to reconnect or back off.  The namespace init that a new
 * connection runs reads no record, so a corrupt one cannot fail it.
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

#define DEFAULT_PORT 6379

/* ---- argument vectors ---- */

const char args_end[] = "";

/*
 * Append to @a as @fmt says, one letter an argument: 's' a string (not
 * copied), 'u' a uint64_t, 'i' an int64_t; then args_end.
 */
void args_vadd(struct args *a, const char *fmt, va_list ap)
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

void args_add_(struct args *a, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	args_vadd(a, fmt, ap);
	va_end(ap);
}

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

/* Start the ARGV of a script: three slots for EVALSHA sha numkeys, then
 * the header of meta_i.h. */
int args_script(const struct meta *m, struct args *a, bool self)
{
	int r = random_token(a->token);

	if (r < 0)
		return r;
	a->n = 3;
	a->keyed = false;
	args_add(a, "ssis", m->prefix, a->token, now_ns(), self ? m->node : "-");
	return 0;
}

/* ---- errors ---- */

/*
 * The one map from a failed hiredis context to an errno, with a text for
 * meta_last_error().  @e is errno right after the failing call.
 */
int pool_ctx_error(const redisContext *ctx, int e, char *why, size_t len)
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
int pool_reply_errno(const redisReply *rep)
{
	static const struct {
		const char *name;
		int err;
	} codes[] = {
	    {"ENOENT", ENOENT},	    {"EEXIST", EEXIST},		{"ENOTDIR", ENOTDIR},
	    {"EISDIR", EISDIR},	    {"ENOTEMPTY", ENOTEMPTY},	{"EINVAL", EINVAL},
	    {"EBADMSG", EBADMSG},   {"EADDRINUSE", EADDRINUSE}, {"ELOOP", ELOOP},
	    {"ENOTUNIQ", ENOTUNIQ}, {"EAGAIN", EAGAIN},
	};
	const char *s = rep->str ? rep->str : "";
	size_t i, n;

	if (!strncmp(s, "NOAUTH", 6) || !strncmp(s, "WRONGPASS", 9))
		return -EACCES;
	/* a key of the wrong type is a corrupt record, not a failure of Redis */
	if (!strncmp(s, "WRONGTYPE", 9))
		return -EBADMSG;
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
	atomic_store_explicit(&m->up, up, memory_order_relaxed);
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
	int r = pool_ctx_error(c->ctx, e, why, sizeof(why));

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
		return pool_ctx_error(ctx, e, why, len);
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
 * Connect to Redis with send and receive timeouts of @timeout_ms, and
 * queue AUTH and SELECT as the URL says (ctx_auth() reads their replies).
 */
static int ctx_open(struct meta *m, unsigned timeout_ms, redisContext **ret, char *why, size_t wlen)
{
	struct timeval tv = {
	    .tv_sec = timeout_ms / 1000,
	    .tv_usec = (timeout_ms % 1000) * 1000,
	};
	redisContext *ctx;
	int r;

	if (m->sock)
		ctx = redisConnectUnixWithTimeout(m->sock, tv);
	else
		ctx = redisConnectWithTimeout(m->host, m->port, tv);
	if (!ctx) {
		snprintf(why, wlen, "out of memory");
		return -ENOMEM;
	}
	if (ctx->err || redisSetTimeout(ctx, tv) != REDIS_OK) {
		r = pool_ctx_error(ctx, errno, why, wlen);
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
	*ret = ctx;
	return 0;

clean_ctx:
	redisFree(ctx);
	return r == -ENOMEM ? r : -EIO;
}

/* Read the replies of the AUTH and SELECT that ctx_open() queued. */
static int ctx_auth(struct meta *m, redisContext *ctx, char *why, size_t wlen)
{
	redisReply *rep;
	int i, r;

	for (i = 0; i < 2; i++) {
		if ((i == 0 && !m->password) || (i == 1 && !m->db))
			continue;
		r = read_reply(ctx, &rep, why, wlen);
		if (r < 0)
			return r == -ENOMEM ? r : -EIO;
		if (rep->type == REDIS_REPLY_ERROR) {
			snprintf(why, wlen, "%s: %.200s",
				 i == 0 ? "authentication failed" : "SELECT", rep->str);
			r = i == 0 ? -EACCES : pool_reply_errno(rep);
			freeReplyObject(rep);
			return r == -EACCES || r == -ENOMEM ? r : -EIO;
		}
		freeReplyObject(rep);
	}
	return 0;
}

int pool_connect(struct meta *m, unsigned timeout_ms, redisContext **ret, char *why, size_t wlen)
{
	redisContext *ctx;
	int r;

	r = ctx_open(m, timeout_ms, &ctx, why, wlen);
	if (r < 0)
		return r;
	r = ctx_auth(m, ctx, why, wlen);
	if (r < 0) {
		redisFree(ctx);
		return r;
	}
	why[0] = '\0';
	*ret = ctx;
	return 0;
}

/*
 * Connect slot @c and prepare it: AUTH, SELECT, SCRIPT LOAD of every
 * script and the namespace init, pipelined.  0, -EIO, -EACCES or -ENOMEM,
 * with a text in @why.
 */
static int conn_open(struct meta *m, struct conn *c, char *why, size_t wlen)
{
	const char *loadv[3] = {"SCRIPT", "LOAD", NULL};
	redisReply *rep = NULL;
	redisContext *ctx;
	struct args a;
	int r, i;

	r = args_script(m, &a, false);
	if (r < 0) {
		snprintf(why, wlen, "no random token: %s", strerror(-r));
		return r;
	}
	r = script_keys(m, MS_INIT, &a);
	if (r < 0) {
		snprintf(why, wlen, "cannot name the keys: %s", strerror(-r));
		return r;
	}
	a.v[0] = "EVAL";
	a.len[0] = 4;
	a.v[1] = meta_script_src[MS_INIT];
	a.len[1] = strlen(a.v[1]);
	a.v[2] = a.nkeys;
	a.len[2] = strlen(a.nkeys);

	r = ctx_open(m, m->timeout_ms, &ctx, why, wlen);
	if (r < 0)
		return r;
	r = -ENOMEM;
	snprintf(why, wlen, "out of memory");
	for (i = 0; i < META_NSCRIPTS; i++) {
		loadv[2] = meta_script_src[i];
		if (redisAppendCommandArgv(ctx, 3, loadv, NULL) != REDIS_OK)
			goto clean_ctx;
	}
	if (redisAppendCommandArgv(ctx, a.n, a.v, a.len) != REDIS_OK)
		goto clean_ctx;

	/* the replies: [AUTH], [SELECT], the scripts, the init */
	r = ctx_auth(m, ctx, why, wlen);
	if (r < 0)
		goto clean_ctx;
	for (i = 0; i <= META_NSCRIPTS; i++) {
		r = read_reply(ctx, &rep, why, wlen);
		if (r < 0)
			goto clean_ctx;
		if (rep->type == REDIS_REPLY_ERROR) {
			snprintf(why, wlen, "%s: %.200s",
				 i < META_NSCRIPTS ? "SCRIPT LOAD" : "cannot create the namespace",
				 rep->str);
			r = pool_reply_errno(rep);
			goto clean_rep;
		}
		if (i < META_NSCRIPTS) {
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

void pool_put(struct meta *m, struct conn *c)
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
	struct pollfd p = {.fd = c->ctx->fd, .events = POLLIN};

	return poll(&p, 1, 0) != 0;
}

/*
 * Borrow a connected slot.  0, -EIO (Redis unreachable, in backoff, or no
 * slot free within the timeout), -EACCES, -ENOMEM.
 */
int pool_get(struct meta *m, struct conn **ret)
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
			m->backoff_ms =
			    m->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : m->backoff_ms * 2;
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
int pool_cmd(struct meta *m, struct conn *c, struct args *a, redisReply **ret)
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
	struct args a = {0};
	int r;

	args_add(&a, "sss", "SCRIPT", "LOAD", meta_script_src[s]);
	r = pool_cmd(m, c, &a, &rep);
	if (r < 0)
		return r;
	if (is_sha(rep))
		memcpy(c->sha[s], rep->str, SHA_LEN + 1);
	else
		r = rep->type == REDIS_REPLY_ERROR ? pool_reply_errno(rep) : -EIO;
	freeReplyObject(rep);
	return r;
}

/* Run script @s on a borrowed slot; an error reply becomes an errno. */
int pool_script(struct meta *m, struct conn *c, enum meta_script s, struct args *a,
		redisReply **ret)
{
	redisReply *rep;
	int r, tries;

	r = script_keys(m, s, a);
	if (r < 0)
		return r;
	for (tries = 0;; tries++) {
		a->v[0] = "EVALSHA";
		a->len[0] = 7;
		a->v[1] = c->sha[s];
		a->len[1] = SHA_LEN;
		a->v[2] = a->nkeys;
		a->len[2] = strlen(a->nkeys);
		r = pool_cmd(m, c, a, &rep);
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
		r = pool_reply_errno(rep);
		if (r == -EBADMSG)
			meta_log_bad_reply(meta_script_name[s], NULL, rep->str);
		else
			log_debug("meta: script %s: %.200s", meta_script_name[s], rep->str);
		freeReplyObject(rep);
		return r;
	}
	*ret = rep;
	return 0;
}

/* pool_get() for a call other than meta_connect(): meta.h promises -EIO
 * for anything that keeps Redis from answering. */
int pool_get_call(struct meta *m, struct conn **ret)
{
	int r = pool_get(m, ret);

	return r < 0 && r != -ENOMEM ? -EIO : r;
}

/* ---- URL ---- */

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
int pool_parse_url(struct meta *m, const char *url)
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
