/*
 * meta_pool: how meta.c's calls reach Redis (the calls are in meta.c, the
 * Lua scripts in meta_scripts.c, struct meta in meta_i.h).
 *
 * Owns: the argument vector a command is sent as (struct args), the pool
 * of connections with its target, connect, reconnect and backoff, running
 * one command or script on a borrowed connection with the redirect and
 * failover retries, and parsing the Redis URL into struct meta.  One
 * connection to one server (opening it, AUTH and SELECT, a command, the
 * error maps, SIGPIPE, host:port) is meta_conn.c's, Redis Cluster's slot
 * map meta_route.c's, the sentinels' side meta_sentinel.c's.
 *
 * docs/design.md, "The connection pool", describes the engines, the
 * target and its generation, the pool and its backoff, the redirect and
 * retry rules with their bounds, and the error maps.
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
#define DEFAULT_SENTINEL_PORT 26379
/* the wait before retrying TRYAGAIN, CLUSTERDOWN or a failover doubles
 * from WAIT_MIN_MS up to WAIT_MAX_MS */
#define WAIT_MIN_MS 10
#define WAIT_MAX_MS 500

/* ---- argument vectors ---- */

const char meta_args_end[] = "";

/*
 * Append to @a as @fmt says, one letter an argument: 's' a string (not
 * copied), 'u' a uint64_t, 'i' an int64_t; then meta_args_end.
 */
void meta_args_vadd(struct args *a, const char *fmt, va_list ap)
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
		assert(a->v[a->n] != meta_args_end);
		a->len[a->n] = strlen(a->v[a->n]);
		a->n++;
	}
	end = va_arg(ap, const char *);
	assert(end == meta_args_end);
	(void)end;
}

void meta_args_add_(struct args *a, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	meta_args_vadd(a, fmt, ap);
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
int meta_args_script(const struct meta *m, struct args *a, bool self)
{
	int r = random_token(a->token);

	if (r < 0)
		return r;
	a->n = 3;
	a->keyed = false;
	meta_args_add(a, "ssis", m->prefix, a->token, util_now_ns(), self ? m->node : "-");
	return 0;
}

/* ---- errors ---- */

/* ---- SIGPIPE ---- */

/* ---- contexts ---- */

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
	int r = meta_conn_error(c->ctx, e, why, sizeof(why));

	log_debug("meta: connection to %s lost: %s", m->url, why);
	redisFree(c->ctx);
	c->ctx = NULL;
	note_error(m, why);
	return r == -ENOMEM ? r : -EIO;
}

/* ---- the target ---- */

uint64_t meta_pool_gen(struct meta *m)
{
	uint64_t gen;

	pthread_mutex_lock(&m->lock);
	gen = m->gen;
	pthread_mutex_unlock(&m->lock);
	return gen;
}

void meta_pool_target_set(struct meta *m, const struct addr *a, const char *why)
{
	bool moved;

	pthread_mutex_lock(&m->lock);
	moved = m->tgt.port != a->port || strcmp(m->tgt.host, a->host);
	if (moved) {
		m->tgt = *a;
		m->gen++;
		/* a new master owes us no backoff from the old one */
		m->backoff_ms = 0;
	}
	m->tgt_stale = false;
	pthread_mutex_unlock(&m->lock);
	if (moved)
		log_debug("meta: %s: Redis master of %s is now %s:%d", why, m->url, a->host,
			  a->port);
}

void meta_pool_target_stale(struct meta *m, uint64_t gen)
{
	pthread_mutex_lock(&m->lock);
	if (m->engine != ENGINE_REDIS && m->gen == gen)
		m->tgt_stale = true;
	pthread_mutex_unlock(&m->lock);
}

/*
 * Where to connect now: the target and its generation, resolved first if
 * it is unknown or stale (asking the sentinels or reading the slot map).
 * *@ret_sock: connect to the URL's unix socket.
 */
static int target_get(struct meta *m, struct addr *ret, bool *ret_sock, uint64_t *ret_gen,
		      char *why, size_t wlen)
{
	struct addr a;
	bool known;
	int r;

	pthread_mutex_lock(&m->lock);
	known = m->engine == ENGINE_REDIS || (m->tgt.port && !m->tgt_stale);
	pthread_mutex_unlock(&m->lock);
	if (!known) {
		if (m->engine == ENGINE_SENTINEL) {
			r = meta_sentinel_watch_start(m, meta_pool_target_set);
			if (r < 0)
				log_debug("meta: cannot start the sentinel watcher: %s",
					  strerror(-r));
			r = meta_sentinel_resolve(m, &a, why, wlen);
		} else {
			r = meta_route_resolve(m, NULL, &a, why, wlen);
		}
		if (r < 0)
			return r;
		meta_pool_target_set(m, &a, "resolved");
	}
	pthread_mutex_lock(&m->lock);
	*ret = m->tgt;
	*ret_gen = m->gen;
	pthread_mutex_unlock(&m->lock);
	*ret_sock = m->sock != NULL;
	return 0;
}

int meta_pool_connect(struct meta *m, unsigned timeout_ms, redisContext **ret, uint64_t *ret_gen,
		      char *why, size_t wlen)
{
	struct addr a;
	uint64_t gen;
	bool sock;
	int r;

	r = target_get(m, &a, &sock, &gen, why, wlen);
	if (r < 0)
		return r;
	r = meta_conn_open(m, sock ? NULL : &a, timeout_ms, true, ret, why, wlen);
	if (r < 0) {
		meta_pool_target_stale(m, gen);
		return r;
	}
	*ret_gen = gen;
	return 0;
}

/* ---- the pool ---- */

/*
 * The INFO server reply of a new connection: objfs needs Redis 7.0 or
 * later (sharded pub/sub: SPUBLISH and SSUBSCRIBE).
 */
static int check_version(struct meta *m, const redisReply *rep, char *why, size_t wlen)
{
	const char *v = rep->type == REDIS_REPLY_STRING ? strstr(rep->str, "redis_version:") : NULL;
	unsigned major = 0;

	/* the first command a server without our password refuses */
	if (rep->type == REDIS_REPLY_ERROR) {
		snprintf(why, wlen, "INFO server: %.200s", rep->str);
		return meta_conn_reply_errno(rep) == -EACCES ? -EACCES : -EIO;
	}
	if (v)
		v += strlen("redis_version:");
	if (!v || sscanf(v, "%u", &major) != 1) {
		snprintf(why, wlen, "INFO server: no redis_version");
		return -EIO;
	}
	if (major >= 7)
		return 0;
	snprintf(why, wlen, "objfs needs Redis 7.0 or later (SPUBLISH/SSUBSCRIBE); %s runs %.*s",
		 m->url, (int)strcspn(v, "\r\n"), v);
	return -EIO;
}

/* The ROLE reply of a new connection to what the sentinels call the
 * master: a replica that was demoted, or not yet promoted, will not do. */
static int check_role(const struct addr *a, const redisReply *rep, char *why, size_t wlen)
{
	const char *role = rep->type == REDIS_REPLY_ARRAY && rep->elements > 0
			       ? meta_rep_text(rep->element[0], 16)
			       : NULL;

	if (role && !strcmp(role, "master"))
		return 0;
	snprintf(why, wlen, "%.100s:%d is not a master (ROLE: %s)", a->host, a->port,
		 role ? role : "unexpected reply");
	return -EIO;
}

/*
 * Connect slot @c to @a (NULL: the unix socket) and prepare it: AUTH,
 * SELECT, INFO server (the version), ROLE (ENGINE_SENTINEL), SCRIPT LOAD
 * of every script and the namespace init, pipelined.  0, -EIO, -EACCES or
 * -ENOMEM, with a text in @why.
 */
static int conn_open(struct meta *m, struct conn *c, const struct addr *to, char *why, size_t wlen)
{
	const char *loadv[3] = {"SCRIPT", "LOAD", NULL};
	bool role = m->engine == ENGINE_SENTINEL;
	redisReply *rep = NULL;
	redisContext *ctx;
	struct args a;
	int r, i;

	r = meta_args_script(m, &a, false);
	if (r < 0) {
		snprintf(why, wlen, "no random token: %s", strerror(-r));
		return r;
	}
	r = meta_script_keys(m, MS_INIT, &a);
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

	r = meta_conn_connect(m, to, m->timeout_ms, true, &ctx, why, wlen);
	if (r < 0)
		return r;
	r = -ENOMEM;
	snprintf(why, wlen, "out of memory");
	if (redisAppendCommand(ctx, "INFO server") != REDIS_OK ||
	    (role && redisAppendCommand(ctx, "ROLE") != REDIS_OK))
		goto clean_ctx;
	for (i = 0; i < META_NSCRIPTS; i++) {
		loadv[2] = meta_script_src[i];
		if (redisAppendCommandArgv(ctx, 3, loadv, NULL) != REDIS_OK)
			goto clean_ctx;
	}
	if (redisAppendCommandArgv(ctx, a.n, a.v, a.len) != REDIS_OK)
		goto clean_ctx;

	/* the replies: [AUTH], [SELECT], INFO, [ROLE], the scripts, the init */
	r = meta_conn_auth(m, ctx, why, wlen);
	if (r < 0)
		goto clean_ctx;
	for (i = -2; i <= META_NSCRIPTS; i++) {
		if (i == -1 && !role)
			continue;
		r = meta_conn_read_reply(ctx, &rep, why, wlen);
		if (r < 0)
			goto clean_ctx;
		if (i == -2 || i == -1) {
			r = i == -2 ? check_version(m, rep, why, wlen)
				    : check_role(to, rep, why, wlen);
			if (r < 0)
				goto clean_rep;
			freeReplyObject(rep);
			continue;
		}
		if (rep->type == REDIS_REPLY_ERROR) {
			snprintf(why, wlen, "%s: %.200s",
				 i < META_NSCRIPTS ? "SCRIPT LOAD" : "cannot create the namespace",
				 rep->str);
			r = meta_conn_reply_errno(rep);
			goto clean_rep;
		}
		if (i < META_NSCRIPTS) {
			if (!meta_conn_is_sha(rep)) {
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

void meta_pool_put(struct meta *m, struct conn *c)
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
 * Make borrowed slot @c ready: drop its context if it is of an older
 * generation or was closed, and connect it to the target if it has none
 * (unless the pool is in backoff).  0, -EIO, -EACCES, -ENOMEM.
 */
static int conn_ready(struct meta *m, struct conn *c)
{
	uint64_t gen = 0;
	struct addr to;
	char why[256];
	bool probe = false, sock, old;
	int r;

	pthread_mutex_lock(&m->lock);
	old = c->ctx && c->gen != m->gen;
	pthread_mutex_unlock(&m->lock);
	if (c->ctx && (old || conn_dead(c))) {
		log_debug("meta: idle connection to %s was %s", m->url,
			  old ? "to an old target" : "closed");
		redisFree(c->ctx);
		c->ctx = NULL;
	}
	if (c->ctx)
		return 0;

	pthread_mutex_lock(&m->lock);
	if (m->backoff_ms) {
		if (m->probing || util_mono_ns() < m->retry_at) {
			pthread_mutex_unlock(&m->lock);
			return -EIO;
		}
		m->probing = probe = true;
	}
	pthread_mutex_unlock(&m->lock);
	r = target_get(m, &to, &sock, &gen, why, sizeof(why));
	if (r == 0)
		r = conn_open(m, c, sock ? NULL : &to, why, sizeof(why));
	if (r < 0) {
		log_debug("meta: cannot connect to %s: %s", m->url, why);
		meta_pool_target_stale(m, gen);
	}
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
		m->retry_at = util_mono_ns() + (int64_t)m->backoff_ms * 1000000;
		snprintf(m->last_err, sizeof(m->last_err), "%s", why);
		set_up(m, false);
		pthread_mutex_unlock(&m->lock);
		return r;
	}
	c->gen = gen;
	m->backoff_ms = 0;
	m->last_err[0] = '\0';
	set_up(m, true);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

/*
 * Borrow a connected slot.  0, -EIO (Redis unreachable, in backoff, or no
 * slot free within the timeout), -EACCES, -ENOMEM.
 */
int meta_pool_get(struct meta *m, struct conn **ret)
{
	struct timespec until;
	struct conn *c;
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
	r = conn_ready(m, c);
	if (r < 0) {
		meta_pool_put(m, c);
		return r;
	}
	*ret = c;
	return 0;
}

/* Send @a on @c once.  A failed context gives -EIO (or -ENOMEM) and is
 * dropped. */
static int cmd_once(struct meta *m, struct conn *c, struct args *a, redisReply **ret)
{
	struct meta_sigpipe_guard g;
	redisReply *rep;
	int e;

	meta_conn_sigpipe_block(&g);
	rep = redisCommandArgv(c->ctx, a->n, a->v, a->len);
	e = errno;
	meta_conn_sigpipe_unblock(&g, !rep);
	if (!rep)
		return conn_broken(m, c, e);
	set_up(m, true);
	*ret = rep;
	return 0;
}

/*
 * An ASK redirect: @a once more, on a connection of its own to @to,
 * after ASKING (which lets the importing node serve this one command).
 * A script that node does not know yet is loaded there first.  The reply
 * in *@ret (maybe an error reply), or -EIO/-ENOMEM.
 */
static int ask_once(struct meta *m, const struct addr *to, struct args *a, redisReply **ret)
{
	const char *asking[] = {"ASKING"}, *load[] = {"SCRIPT", "LOAD", a->src};
	redisReply *rep = NULL;
	redisContext *ctx = NULL;
	char why[256];
	int r, tries;

	r = meta_conn_open(m, to, m->timeout_ms, true, &ctx, why, sizeof(why));
	for (tries = 0; r == 0 && tries < 2; tries++) {
		r = meta_conn_cmd(ctx, 1, asking, &rep, why, sizeof(why));
		if (r < 0)
			break;
		freeReplyObject(rep);
		rep = NULL;
		if (redisAppendCommandArgv(ctx, a->n, a->v, a->len) != REDIS_OK) {
			r = -ENOMEM;
			break;
		}
		r = meta_conn_read_reply(ctx, &rep, why, sizeof(why));
		if (r < 0 || tries > 0 || meta_redirect_kind(rep, NULL) != RD_NOSCRIPT ||
		    strcmp(a->v[0], "EVALSHA") || !a->src)
			break;
		freeReplyObject(rep);
		rep = NULL;
		r = meta_conn_cmd(ctx, 3, load, &rep, why, sizeof(why));
		if (r == 0 && !meta_conn_is_sha(rep))
			r = -EIO;
		freeReplyObject(rep);
		rep = NULL;
	}
	if (ctx)
		redisFree(ctx);
	if (r < 0) {
		log_debug("meta: ASK redirect to %s:%d failed: %s", to->host, to->port, why);
		freeReplyObject(rep);
		return r == -ENOMEM ? r : -EIO;
	}
	*ret = rep;
	return 0;
}

/* Sleep *@wait_ms, or until @deadline if that comes first, and double
 * *@wait_ms for the next time (at most WAIT_MAX_MS). */
static void nap(int64_t deadline, unsigned *wait_ms)
{
	int64_t ns = deadline - util_mono_ns();
	struct timespec ts;

	if (ns > (int64_t)*wait_ms * 1000000)
		ns = (int64_t)*wait_ms * 1000000;
	if (ns > 0) {
		ts.tv_sec = ns / 1000000000;
		ts.tv_nsec = ns % 1000000000;
		nanosleep(&ts, NULL);
	}
	*wait_ms = *wait_ms * 2 > WAIT_MAX_MS ? WAIT_MAX_MS : *wait_ms * 2;
}

/*
 * One command on a borrowed slot, following redirects and failovers
 * (docs/design.md, "The connection pool", has the rules and bounds).
 * The reply may be an error reply; a failed context gives -EIO (or
 * -ENOMEM) and is dropped.
 */
int meta_pool_cmd(struct meta *m, struct conn *c, struct args *a, redisReply **ret)
{
	int64_t deadline = util_mono_ns() + (int64_t)m->timeout_ms * 2000000;
	unsigned wait_ms = WAIT_MIN_MS, tries;
	bool lost = false;
	enum redirect kind;
	redisReply *rep;
	struct addr to;
	char why[256];
	int r;

	r = meta_route_check(m, a);
	if (r < 0)
		return r;
	for (tries = 1;; tries++) {
		/* a retry goes where the target is now */
		if (tries > 1 || !c->ctx) {
			r = conn_ready(m, c);
			if (r < 0)
				return r == -ENOMEM ? r : -EIO;
		}
		r = cmd_once(m, c, a, &rep);
		if (r < 0) {
			/* once: the command may have run before the
			 * connection went; a new master may lack it anyway */
			if (r == -ENOMEM || m->engine == ENGINE_REDIS || lost ||
			    util_mono_ns() >= deadline)
				return r;
			lost = true;
			meta_pool_target_stale(m, c->gen);
			continue;
		}
		kind = meta_redirect_kind(rep, &to);
		if (kind == RD_NONE || kind == RD_NOSCRIPT || tries >= RETRY_MAX ||
		    util_mono_ns() >= deadline)
			break;
		log_debug("meta: %s on %s: %.200s", a->v[0], m->url, rep->str);
		freeReplyObject(rep);
		switch (kind) {
		case RD_ASK:
			r = ask_once(m, &to, a, &rep);
			if (r < 0)
				return r;
			*ret = rep;
			return 0;
		case RD_MOVED:
			/* the node that sent it knows the new map best */
			if (meta_route_resolve(m, &to, &to, why, sizeof(why)) < 0)
				log_debug("meta: after MOVED: %s", why);
			meta_pool_target_set(m, &to, "MOVED");
			break;
		case RD_RESOLVE:
		case RD_NONLOCAL:
		case RD_CLUSTERDOWN:
			meta_pool_target_stale(m, c->gen);
			redisFree(c->ctx);
			c->ctx = NULL;
			nap(deadline, &wait_ms);
			break;
		default:
			nap(deadline, &wait_ms);
			break;
		}
	}
	*ret = rep;
	return 0;
}

static int conn_load(struct meta *m, struct conn *c, enum meta_script s)
{
	redisReply *rep;
	struct args a = {0};
	int r;

	meta_args_add(&a, "sss", "SCRIPT", "LOAD", meta_script_src[s]);
	r = meta_pool_cmd(m, c, &a, &rep);
	if (r < 0)
		return r;
	if (meta_conn_is_sha(rep))
		memcpy(c->sha[s], rep->str, SHA_LEN + 1);
	else
		r = rep->type == REDIS_REPLY_ERROR ? meta_conn_reply_errno(rep) : -EIO;
	freeReplyObject(rep);
	return r;
}

/* Run script @s on a borrowed slot; an error reply becomes an errno. */
int meta_pool_script(struct meta *m, struct conn *c, enum meta_script s, struct args *a,
		     redisReply **ret)
{
	redisReply *rep;
	int r, tries;

	r = meta_script_keys(m, s, a);
	if (r < 0)
		return r;
	for (tries = 0;; tries++) {
		a->v[0] = "EVALSHA";
		a->len[0] = 7;
		a->v[1] = c->sha[s];
		a->len[1] = SHA_LEN;
		a->v[2] = a->nkeys;
		a->len[2] = strlen(a->nkeys);
		a->src = meta_script_src[s];
		r = meta_pool_cmd(m, c, a, &rep);
		if (r < 0)
			return r;
		/* Redis restarted, SCRIPT FLUSH, or a promoted replica (SCRIPT
		 * LOAD is not replicated): load it again, once */
		if (rep->type != REDIS_REPLY_ERROR || tries > 0 || strncmp(rep->str, "NOSCRIPT", 8))
			break;
		freeReplyObject(rep);
		r = conn_load(m, c, s);
		if (r < 0)
			return r;
	}
	if (rep->type == REDIS_REPLY_ERROR) {
		r = meta_conn_reply_errno(rep);
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

/* meta_pool_get() for a call other than meta_connect(): meta.h promises -EIO
 * for anything that keeps Redis from answering. */
int meta_pool_get_call(struct meta *m, struct conn **ret)
{
	int r = meta_pool_get(m, ret);

	return r < 0 && r != -ENOMEM ? -EIO : r;
}

void meta_pool_release(struct meta *m)
{
	meta_sentinel_watch_stop(m);
	meta_route_free(m->route);
	m->route = NULL;
	free(m->host);
	free(m->sock);
	free(m->password);
	free(m->master);
	free(m->url);
	m->host = m->sock = m->password = m->master = m->url = NULL;
}

/* ---- URL ---- */

/* The list "host:port[,host:port...]" of @len bytes at @s into m->seeds. */
static int parse_seeds(struct meta *m, const char *s, size_t len, int def_port, const char *what,
		       char *why, size_t wlen)
{
	const char *end = s + len, *comma;
	int r;

	while (s <= end) {
		comma = memchr(s, ',', (size_t)(end - s));
		if (!comma)
			comma = end;
		if (m->nseeds == SEEDS_MAX)
			return meta_conn_bad_url(why, wlen, "more than %d %ss", SEEDS_MAX, what);
		r = meta_addr_parse_why(s, (size_t)(comma - s), def_port, &m->seeds[m->nseeds], why,
					wlen);
		if (r < 0)
			return r;
		m->nseeds++;
		s = comma + 1;
	}
	return 0;
}

/* "/db" at @s (or ""). */
static int parse_db(struct meta *m, const char *s, char *why, size_t wlen)
{
	uint64_t v;

	if (!*s)
		return 0;
	if (*s != '/' || meta_conn_parse_range(s + 1, strlen(s + 1), 0, INT_MAX, &v) < 0)
		return meta_conn_bad_url(why, wlen,
					 "bad database '%.40s': must be a number 0-%d after '/'",
					 *s == '/' ? s + 1 : s, INT_MAX);
	m->db = (unsigned)v;
	return 0;
}

/*
 * unix:/abs/path.sock, redis://[:password@]host[:port][/db],
 * redis-sentinel://[:password@]host[:port][,host[:port]...]/master[/db]
 * or redis-cluster://[:password@]host[:port][,host[:port]...], with host
 * a name, an IPv4 address or [IPv6].  0, -EINVAL (@why says why) or
 * -ENOMEM.
 */
int meta_pool_parse_url(struct meta *m, const char *url, char *why, size_t wlen)
{
	static const struct {
		const char *scheme;
		enum meta_engine engine;
		int port;
	} schemes[] = {
	    {"redis://", ENGINE_REDIS, DEFAULT_PORT},
	    {"redis-sentinel://", ENGINE_SENTINEL, DEFAULT_SENTINEL_PORT},
	    {"redis-cluster://", ENGINE_CLUSTER, DEFAULT_PORT},
	};
	const char *p, *at, *slash, *name;
	size_t i, n, nlen;
	int r;

	if (!strncmp(url, "unix:", 5)) {
		p = url + 5;
		if (p[0] != '/' || strlen(p) >= sizeof(((struct sockaddr_un *)0)->sun_path))
			return meta_conn_bad_url(
			    why, wlen, "unix: needs an absolute socket path of at most %zu bytes",
			    sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
		m->sock = strdup(p);
		m->url = strdup(url);
		return m->sock && m->url ? 0 : -ENOMEM;
	}
	for (i = 0; i < ARRAY_SIZE(schemes); i++)
		if (!strncmp(url, schemes[i].scheme, strlen(schemes[i].scheme)))
			break;
	if (i == ARRAY_SIZE(schemes))
		return meta_conn_bad_url(
		    why, wlen, "not unix:, redis://, redis-sentinel:// or redis-cluster://");
	m->engine = schemes[i].engine;
	p = url + strlen(schemes[i].scheme);
	at = strrchr(p, '@');
	if (at) {
		/* only ":password@"; no ACL user names */
		if (p[0] != ':' || at == p + 1)
			return meta_conn_bad_url(why, wlen,
						 "only ':password@' may come before the address");
		m->password = strndup(p + 1, (size_t)(at - p - 1));
		if (!m->password)
			return -ENOMEM;
		p = at + 1;
	}
	slash = p + strcspn(p, "/");
	r = parse_seeds(m, p, (size_t)(slash - p), schemes[i].port,
			m->engine == ENGINE_SENTINEL ? "sentinel" : "node", why, wlen);
	if (r < 0)
		return r;
	switch (m->engine) {
	case ENGINE_REDIS:
		if (m->nseeds != 1)
			return meta_conn_bad_url(
			    why, wlen,
			    "redis:// takes one address (redis-cluster:// takes several)");
		r = parse_db(m, slash, why, wlen);
		m->tgt = m->seeds[0];
		m->host = strdup(m->tgt.host);
		m->port = m->tgt.port;
		if (!m->host)
			return -ENOMEM;
		break;
	case ENGINE_SENTINEL:
		name = *slash ? slash + 1 : slash;
		nlen = strcspn(name, "/");
		if (!nlen)
			return meta_conn_bad_url(
			    why, wlen,
			    "no master name: redis-sentinel:// needs /MASTER after the "
			    "sentinels");
		if (!chars_in(name, nlen, 64, ALNUM "._-"))
			return meta_conn_bad_url(
			    why, wlen, "bad master name '%.*s': use 1-64 of [A-Za-z0-9._-]",
			    META_SHOWN(nlen), name);
		m->master = strndup(name, nlen);
		if (!m->master)
			return -ENOMEM;
		r = parse_db(m, name + nlen, why, wlen);
		break;
	case ENGINE_CLUSTER:
		if (*slash)
			return meta_conn_bad_url(
			    why, wlen, "redis-cluster:// takes no /db: a cluster has only db 0");
		break;
	}
	if (r < 0)
		return r;
	if (m->password) {
		n = strlen(at + 1) + strlen(schemes[i].scheme) + sizeof(":***@");
		m->url = malloc(n);
		if (m->url)
			snprintf(m->url, n, "%s:***@%s", schemes[i].scheme, at + 1);
	} else {
		m->url = strdup(url);
	}
	return m->url ? 0 : -ENOMEM;
}

/* Run script @s with its own arguments as @fmt says (see meta_args_vadd()). */
int meta_script_(struct meta *m, enum meta_script s, bool self, redisReply **ret, const char *fmt,
		 ...)
{
	struct args a;
	struct conn *c;
	va_list ap;
	int r;

	r = meta_args_script(m, &a, self);
	if (r < 0)
		return r;
	va_start(ap, fmt);
	meta_args_vadd(&a, fmt, ap);
	va_end(ap);
	r = meta_pool_get_call(m, &c);
	if (r < 0)
		return r;
	r = meta_pool_script(m, c, s, &a, ret);
	meta_pool_put(m, c);
	return r;
}

/* One plain command built as @fmt says; an error reply becomes an errno. */
int meta_command_(struct meta *m, redisReply **ret, const char *fmt, ...)
{
	struct args a = {0};
	redisReply *rep;
	struct conn *c;
	va_list ap;
	int r;

	va_start(ap, fmt);
	meta_args_vadd(&a, fmt, ap);
	va_end(ap);
	r = meta_pool_get_call(m, &c);
	if (r < 0)
		return r;
	r = meta_pool_cmd(m, c, &a, &rep);
	meta_pool_put(m, c);
	if (r < 0)
		return r;
	if (rep->type == REDIS_REPLY_ERROR) {
		r = meta_conn_reply_errno(rep);
		if (r == -EBADMSG)
			meta_log_bad_reply(a.v[0], a.n > 1 ? a.v[1] : NULL, rep->str);
		else
			log_debug("meta: %s: %.200s", a.v[0], rep->str);
		freeReplyObject(rep);
		return r;
	}
	*ret = rep;
	return 0;
}
