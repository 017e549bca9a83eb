/*
 * meta_sentinel: Redis Sentinel's side of the pool (the pool is
 * meta_pool.c's).
 *
 * Owns: finding the master from the sentinels of a redis-sentinel:// URL,
 * and the watcher thread that follows +switch-master.
 *
 * Resolve: meta_sentinel_resolve() asks the sentinels one after the other,
 * starting with the one that answered last, "SENTINEL
 * get-master-addr-by-name NAME", each within one connect and two round
 * trips of timeout_ms (a sentinel that answers NOAUTH gets AUTH with the
 * URL's password, then the question again).  The first address wins; the
 * pool then confirms it on every new connection with ROLE (meta_pool.c),
 * so that a replica the sentinels have not yet promoted, or a master they
 * demoted, is never written to: it counts as a failed connect, the target
 * goes stale and the next connect asks again.
 *
 * Watcher: one thread (struct watch) with a connection to one sentinel at
 * a time, subscribed to +switch-master.  On each (re)connect it asks that
 * sentinel for the master first, so a switch it missed while away is
 * caught up.  A message "NAME old-ip old-port new-ip new-port" that names
 * our master sets the pool's target (with the function the pool gave,
 * meta_pool_target_set(): the generation moves, every pool connection
 * and the invalidation subscriber reconnect to the new master) before
 * any call had to fail on the old one.  The thread polls its socket and
 * a wake pipe (as the invalidation subscriber does, meta_subscriber.c),
 * PINGs after WATCH_PING_MS without traffic, moves on to the next
 * sentinel when one fails, and backs off 100 ms doubling to 5 s once
 * every sentinel failed in a row.  It runs with every signal blocked;
 * meta_free() stops it (a byte in the pipe) and joins it.
 */
#define _GNU_SOURCE
#include "meta.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "log.h"
#include "meta_i.h"

/* a sentinel's connect waits at most this long in the watcher */
#define WATCH_CONNECT_MS 1000
/* traffic-free time after which the watcher checks its sentinel */
#define WATCH_PING_MS 5000

struct watch {
	struct meta *m;
	meta_target_fn *moved; /* the pool's: where the master is now */
	pthread_t thread;
	int wake[2]; /* a byte in wake[0]: stop */
};

/* {ip, port} of get-master-addr-by-name, or the "ip port" of a message. */
static int master_addr(const char *host, size_t hlen, const char *port, size_t plen,
		       struct addr *ret)
{
	char buf[HOST_MAX + 8];

	if (hlen + plen + 2 > sizeof(buf))
		return -EBADMSG;
	/* an IPv6 address is bare in a sentinel's answers */
	snprintf(buf, sizeof(buf), "%s%.*s%s:%.*s", memchr(host, ':', hlen) ? "[" : "", (int)hlen,
		 host, memchr(host, ':', hlen) ? "]" : "", (int)plen, port);
	return meta_addr_parse(buf, strlen(buf), 0, ret) < 0 || !ret->port ? -EBADMSG : 0;
}

/* One command to a sentinel; a NOAUTH gets AUTH with the URL's password
 * and the command once more. */
static int sentinel_cmd(struct meta *m, redisContext *ctx, int argc, const char **argv,
			redisReply **ret, char *why, size_t wlen)
{
	const char *auth[] = {"AUTH", m->password};
	redisReply *rep;
	int r;

	r = meta_conn_cmd(ctx, argc, argv, &rep, why, wlen);
	if (r < 0 || rep->type != REDIS_REPLY_ERROR || strncmp(rep->str, "NOAUTH", 6) ||
	    !m->password) {
		if (r == 0)
			*ret = rep;
		return r;
	}
	freeReplyObject(rep);
	r = meta_conn_cmd(ctx, 2, auth, &rep, why, wlen);
	if (r < 0)
		return r;
	if (rep->type == REDIS_REPLY_ERROR) {
		snprintf(why, wlen, "sentinel authentication failed: %.200s", rep->str);
		freeReplyObject(rep);
		return -EACCES;
	}
	freeReplyObject(rep);
	return meta_conn_cmd(ctx, argc, argv, ret, why, wlen);
}

/* Ask the sentinel on @ctx (@s, for messages) where the master is. */
static int sentinel_ask(struct meta *m, redisContext *ctx, const struct addr *s, struct addr *ret,
			char *why, size_t wlen)
{
	const char *argv[] = {"SENTINEL", "get-master-addr-by-name", m->master};
	redisReply *rep;
	int r;

	r = sentinel_cmd(m, ctx, 3, argv, &rep, why, wlen);
	if (r < 0)
		return r;
	r = -EIO;
	if (rep->type == REDIS_REPLY_NIL)
		snprintf(why, wlen, "sentinel %s:%d knows no master '%s'", s->host, s->port,
			 m->master);
	else if (rep->type == REDIS_REPLY_ERROR)
		snprintf(why, wlen, "sentinel %s:%d: %.200s", s->host, s->port, rep->str);
	else if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
		 !meta_rep_text(rep->element[0], HOST_MAX - 1) ||
		 !meta_rep_text(rep->element[1], 5) ||
		 master_addr(rep->element[0]->str, rep->element[0]->len, rep->element[1]->str,
			     rep->element[1]->len, ret) < 0)
		snprintf(why, wlen, "sentinel %s:%d: malformed master address", s->host, s->port);
	else
		r = 0;
	freeReplyObject(rep);
	return r;
}

int meta_sentinel_resolve(struct meta *m, struct addr *ret, char *why, size_t wlen)
{
	redisContext *ctx;
	unsigned first, i, k;
	int r = -EIO;

	pthread_mutex_lock(&m->lock);
	first = m->sentinel_at;
	pthread_mutex_unlock(&m->lock);
	for (k = 0; k < m->nseeds; k++) {
		i = (first + k) % m->nseeds;
		r = meta_conn_open(m, &m->seeds[i], m->timeout_ms, false, &ctx, why, wlen);
		if (r == 0) {
			r = sentinel_ask(m, ctx, &m->seeds[i], ret, why, wlen);
			redisFree(ctx);
		}
		if (r == 0) {
			pthread_mutex_lock(&m->lock);
			m->sentinel_at = i;
			pthread_mutex_unlock(&m->lock);
			return 0;
		}
		if (r == -ENOMEM)
			return r;
		log_debug("meta: sentinel %s:%d: %s", m->seeds[i].host, m->seeds[i].port, why);
	}
	return -EIO;
}

/* A +switch-master message: follow it if it names our master. */
static void watch_message(struct watch *w, const redisReply *rep)
{
	struct meta *m = w->m;
	const char *s, *f[5];
	size_t len[5], n;
	struct addr a;
	int i;

	if (rep->elements != 3 || !(s = meta_rep_text(rep->element[2], 2 * HOST_MAX + 100)))
		return;
	for (i = 0; i < 5; i++) {
		n = strcspn(s, " ");
		f[i] = s;
		len[i] = n;
		s += n;
		if (*s)
			s++;
	}
	if (len[0] != strlen(m->master) || memcmp(f[0], m->master, len[0]))
		return;
	if (master_addr(f[3], len[3], f[4], len[4], &a) < 0) {
		log_debug("meta: malformed +switch-master for '%s'", m->master);
		return;
	}
	w->moved(m, &a, "+switch-master");
}

/* Is @rep the array {@kind, ...}? */
static bool push_is(const redisReply *rep, const char *kind)
{
	const char *s;

	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1)
		return false;
	s = meta_rep_text(rep->element[0], 16);
	return s && !strcmp(s, kind);
}

/* Connect to sentinel @i, catch up with where the master is, subscribe
 * and follow until the connection fails (a negative errno, the reason in
 * @why) or the thread is to stop (-ECANCELED). */
static int watch_one(struct watch *w, unsigned i, char *why, size_t wlen)
{
	const char *sub[] = {"SUBSCRIBE", "+switch-master"};
	struct meta *m = w->m;
	const struct addr *s = &m->seeds[i];
	int64_t ping_at, pong_by = 0;
	redisContext *ctx;
	redisReply *rep;
	struct addr a;
	int r;

	r = meta_conn_open(m, s,
			   m->timeout_ms < WATCH_CONNECT_MS ? m->timeout_ms : WATCH_CONNECT_MS,
			   false, &ctx, why, wlen);
	if (r < 0)
		return r;
	r = sentinel_ask(m, ctx, s, &a, why, wlen);
	if (r == 0)
		w->moved(m, &a, "sentinel");
	if (r == 0)
		r = sentinel_cmd(m, ctx, 2, sub, &rep, why, wlen);
	if (r < 0)
		goto clean_ctx;
	r = push_is(rep, "subscribe") ? 0 : -EPROTO;
	if (r < 0)
		snprintf(why, wlen, "SUBSCRIBE: %.200s",
			 rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
	freeReplyObject(rep);
	if (r < 0)
		goto clean_ctx;
	log_debug("meta: following +switch-master of '%s' on sentinel %s:%d", m->master, s->host,
		  s->port);
	ping_at = util_mono_ns() + (int64_t)WATCH_PING_MS * 1000000;
	for (;;) {
		r = meta_conn_next(ctx, w->wake[0], pong_by ? pong_by : ping_at, &rep, why, wlen);
		if (r == -ETIMEDOUT && pong_by) {
			snprintf(why, wlen, "no answer to PING within %u ms", m->timeout_ms);
			break;
		}
		if (r == -ETIMEDOUT) {
			r = redisAppendCommand(ctx, "PING") == REDIS_OK ? 0 : -ENOMEM;
			if (r == 0)
				r = meta_conn_flush(ctx, why, wlen);
			if (r < 0)
				break;
			pong_by = util_mono_ns() + (int64_t)m->timeout_ms * 1000000;
			continue;
		}
		if (r < 0)
			break;
		if (push_is(rep, "message"))
			watch_message(w, rep);
		else if (push_is(rep, "pong"))
			pong_by = 0;
		freeReplyObject(rep);
		if (!pong_by)
			ping_at = util_mono_ns() + (int64_t)WATCH_PING_MS * 1000000;
	}
clean_ctx:
	redisFree(ctx);
	return r;
}

static void *watch_main(void *arg)
{
	struct watch *w = arg;
	struct pollfd p = {.fd = w->wake[0], .events = POLLIN};
	unsigned i = 0, failed = 0, backoff = 0;
	char why[256];
	int r;

	for (;;) {
		r = watch_one(w, i, why, sizeof(why));
		if (r == -ECANCELED)
			break;
		log_debug("meta: sentinel %s:%d: %s", w->m->seeds[i].host, w->m->seeds[i].port,
			  why);
		i = (i + 1) % w->m->nseeds;
		/* a subscription that held for a while was no failure */
		failed = r == -ETIMEDOUT || r == -ECONNRESET ? 0 : failed + 1;
		if (failed < w->m->nseeds) {
			backoff = 0;
			if (poll(&p, 1, 0) > 0)
				break;
			continue;
		}
		backoff = backoff ? backoff * 2 : BACKOFF_MIN_MS;
		if (backoff > BACKOFF_MAX_MS)
			backoff = BACKOFF_MAX_MS;
		if (poll(&p, 1, (int)backoff) > 0)
			break;
	}
	return NULL;
}

int meta_sentinel_watch_start(struct meta *m, meta_target_fn *moved)
{
	sigset_t all, old;
	struct watch *w;
	int r = 0;

	pthread_mutex_lock(&m->lock);
	if (m->watch)
		goto out;
	r = -ENOMEM;
	w = calloc(1, sizeof(*w));
	if (!w)
		goto out;
	w->m = m;
	w->moved = moved;
	if (pipe2(w->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		r = -errno;
		free(w);
		goto out;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = -pthread_create(&w->thread, NULL, watch_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		close(w->wake[0]);
		close(w->wake[1]);
		free(w);
		goto out;
	}
	m->watch = w;
out:
	pthread_mutex_unlock(&m->lock);
	return r;
}

void meta_sentinel_watch_stop(struct meta *m)
{
	struct watch *w;

	pthread_mutex_lock(&m->lock);
	w = m->watch;
	m->watch = NULL;
	pthread_mutex_unlock(&m->lock);
	if (!w)
		return;
	/* the byte stays in the pipe: every later poll sees it */
	while (write(w->wake[1], "x", 1) < 0 && errno == EINTR)
		;
	pthread_join(w->thread, NULL);
	close(w->wake[0]);
	close(w->wake[1]);
	free(w);
}
