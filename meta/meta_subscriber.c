/*
 * meta_subscriber: the invalidation subscriber (meta_subscribe(), meta.h).
 *
 * Subscriber: one thread (struct sub), with a blocking redisContext of its
 * own made by meta_pool_connect() (so it reaches the pool's target: the one
 * server of unix: and redis://, the master the sentinels name, or the
 * master of the namespace's cluster slot; with AUTH and SELECT as for the
 * pool) and a pipe whose read end, once written, tells the thread to
 * stop.  The thread never blocks in hiredis' reads: it polls the socket
 * and the pipe, then feeds hiredis' reader with redisBufferRead().  Only
 * the connect and the AUTH/SELECT round trip block, for at most
 * SUB_CONNECT_MS.
 *
 *   connect, SSUBSCRIBE {P}:inval (sharded pub/sub: on a cluster only
 *   the channel's slot master carries it), wait for the confirmation
 *     -> fails: back off (100 ms doubling to 5 s, as the pool), retry
 *     -> ok: if a gap came before (a lost connection, failed attempts),
 *            call fn(NULL); then for each message parse it and call fn;
 *            PING after SUB_PING_MS without traffic, and count the
 *            connection lost if no answer comes within the timeout
 *     -> lost, or an sunsubscribe (Redis sends it when the slot moves
 *        to another node), or the pool's generation moved (a failover,
 *        a MOVED: checked every SUB_GEN_MS): reconnect at once, to the
 *        target as it is now, and back off if that fails
 *
 * The thread runs with every signal blocked, so a write to a closed
 * connection cannot kill the process with SIGPIPE and the daemon's signals
 * go to its other threads.
 */
#define _GNU_SOURCE
#include "meta.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bsum.h"
#include "log.h"
#include "meta_i.h"

/* the subscriber's connect and AUTH wait at most this long, so that
 * meta_unsubscribe() does not wait longer for a thread that is connecting */
#define SUB_CONNECT_MS 1000
/* traffic-free time after which the subscriber checks its connection */
#define SUB_PING_MS 5000
/* the subscriber sees a change of the pool's target within this time */
#define SUB_GEN_MS 100
/* "<kind> <parent> <name> <id>" is at most 15 + 20 + 255 + 20 + 3 bytes */
#define INVAL_MAX 384

/* ---- invalidations ---- */

struct sub {
	/* set by meta_subscribe(), read-only afterwards */
	struct meta *m;
	meta_inval_fn fn;
	void *arg;
	pthread_t thread;
	int wake[2]; /* a byte in wake[0]: stop */
	char channel[PREFIX_MAX + sizeof("{}:inval")];
	uint64_t gen; /* the pool's generation it connected in; the thread's */

	pthread_mutex_t lock;
	pthread_cond_t tried; /* the first attempt is over */
	bool first_done;      /* guarded by lock */
};

/* A decimal id of @len bytes at @s (see meta_parse_id()). */
static int span_id(const char *s, size_t len, uint64_t *ret)
{
	char buf[24];

	if (len == 0 || len > 20)
		return -EBADMSG;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return meta_parse_id(buf, ret);
}

/*
 * "<origin> <kind> <parent> <name> <id>": the origin (a node name, or "-"),
 * kind and parent from the front, id from the end; the name (which may
 * hold spaces, never '/') is what is between.
 */
static int parse_inval(const char *s, size_t len, struct meta_inval *ret)
{
	const char *sp0, *sp1, *sp2, *last;
	struct meta_inval ev;
	size_t n;

	memset(&ev, 0, sizeof(ev));
	if (len > INVAL_MAX || memchr(s, '\0', len))
		return -EBADMSG;
	sp0 = memchr(s, ' ', len);
	if (!sp0 || sp0 - s >= OBJFS_NODE_MAX)
		return -EBADMSG;
	memcpy(ev.origin, s, (size_t)(sp0 - s));
	if (!strcmp(ev.origin, "-"))
		ev.origin[0] = '\0';
	else if (util_node_name_validate(ev.origin) < 0)
		return -EBADMSG;
	len -= (size_t)(sp0 + 1 - s);
	s = sp0 + 1;
	/* "resync 0 - 0": Redis lost writes; no name, no id */
	if (len == 12 && !memcmp(s, "resync 0 - 0", 12)) {
		memcpy(ev.kind, "resync", 7);
		*ret = ev;
		return 0;
	}
	sp1 = memchr(s, ' ', len);
	if (!sp1 ||
	    !chars_in(s, (size_t)(sp1 - s), sizeof(ev.kind) - 1, "abcdefghijklmnopqrstuvwxyz-"))
		return -EBADMSG;
	sp2 = memchr(sp1 + 1, ' ', len - (size_t)(sp1 + 1 - s));
	last = memrchr(s, ' ', len);
	if (!sp2 || last <= sp2 || span_id(last + 1, len - (size_t)(last + 1 - s), &ev.id) < 0)
		return -EBADMSG;
	/* "gone 0 - <id>": an object deleted, "attr 0 - <id>": its owner,
	 * mode or times changed; no name involved */
	if (sp1 - s == 4 && (!memcmp(s, "gone", 4) || !memcmp(s, "attr", 4)) && sp2 - sp1 == 2 &&
	    sp1[1] == '0')
		ev.parent = 0;
	else if (span_id(sp1 + 1, (size_t)(sp2 - sp1 - 1), &ev.parent) < 0)
		return -EBADMSG;
	n = (size_t)(last - sp2 - 1);
	if (n > OBJFS_NAME_MAX)
		return -EBADMSG;
	memcpy(ev.kind, s, (size_t)(sp1 - s));
	memcpy(ev.name, sp2 + 1, n);
	if (util_name_validate(ev.name) < 0)
		return -EBADMSG;
	*ret = ev;
	return 0;
}

/* Has meta_unsubscribe() asked the thread to stop? */
static bool sub_stopping(const struct sub *s)
{
	struct pollfd p = {.fd = s->wake[0], .events = POLLIN};

	return poll(&p, 1, 0) > 0;
}

/* Is @rep the array {@kind, ...} of at least @n elements? */
static bool push_is(const redisReply *rep, const char *kind, size_t n)
{
	const char *s;

	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < n || rep->elements < 1)
		return false;
	s = meta_rep_text(rep->element[0], 16);
	return s && !strcmp(s, kind);
}

/* Connect and subscribe: 0, -ECANCELED (stop) or a negative errno with
 * the reason in @why. */
static int sub_open(struct sub *s, redisContext **ret, char *why, size_t wlen)
{
	struct meta *m = s->m;
	redisContext *ctx;
	redisReply *rep;
	int r;

	r = meta_pool_connect(m, m->timeout_ms < SUB_CONNECT_MS ? m->timeout_ms : SUB_CONNECT_MS,
			      &ctx, &s->gen, why, wlen);
	if (r < 0)
		return r;
	r = -ENOMEM;
	snprintf(why, wlen, "out of memory");
	if (redisAppendCommand(ctx, "SSUBSCRIBE %s", s->channel) != REDIS_OK)
		goto clean_ctx;
	r = meta_conn_flush(ctx, why, wlen);
	if (r == 0)
		r = meta_conn_next(ctx, s->wake[0],
				   util_mono_ns() + (int64_t)m->timeout_ms * 1000000, &rep, why,
				   wlen);
	if (r == -ETIMEDOUT)
		snprintf(why, wlen, "no answer to SSUBSCRIBE within %u ms", m->timeout_ms);
	if (r < 0)
		goto clean_ctx;
	r = 0;
	if (!push_is(rep, "ssubscribe", 3) || !meta_rep_text(rep->element[1], sizeof(s->channel)) ||
	    strcmp(rep->element[1]->str, s->channel)) {
		snprintf(why, wlen, "SSUBSCRIBE: %.200s",
			 rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
		r = rep->type == REDIS_REPLY_ERROR ? meta_conn_reply_errno(rep) : -EPROTO;
		/* a MOVED: the slot's master is elsewhere now */
		meta_pool_target_stale(m, s->gen);
	}
	freeReplyObject(rep);
	if (r < 0)
		goto clean_ctx;
	*ret = ctx;
	return 0;

clean_ctx:
	redisFree(ctx);
	return r;
}

/* A message from the channel: call back with it, or skip a bad one. */
static void sub_message(struct sub *s, const redisReply *rep)
{
	static struct log_ratelimit rl =
	    LOG_RATELIMIT_INIT("meta: malformed invalidations", 1000, 1);
	struct meta_inval ev;
	const redisReply *p = rep->element[2];
	bool ok = p->type == REDIS_REPLY_STRING && p->len <= INVAL_MAX;
	char esc[INVAL_MAX + 8];

	if (rep->elements != 3 || !meta_rep_text(rep->element[1], sizeof(s->channel)) ||
	    strcmp(rep->element[1]->str, s->channel) || p->type != REDIS_REPLY_STRING ||
	    parse_inval(p->str, p->len, &ev) < 0) {
		log_msg_limited(&rl, LOGL_WARN,
				"meta: skipping a malformed invalidation on %s: '%s'", s->channel,
				ok ? meta_esc(p->str, p->len, esc, sizeof(esc)) : "");
		return;
	}
	s->fn(s->arg, &ev);
}

/* Read messages until the connection is lost (a negative errno, the
 * reason in @why), the slot moves away (sunsubscribe) or the pool's target
 * changes (-ESTALE), or the thread is to stop (-ECANCELED). */
static int sub_loop(struct sub *s, redisContext *ctx, char *why, size_t wlen)
{
	int64_t ping_at = util_mono_ns() + (int64_t)SUB_PING_MS * 1000000, pong_by = 0, until;
	redisReply *rep;
	int r;

	for (;;) {
		if (meta_pool_gen(s->m) != s->gen) {
			snprintf(why, wlen, "the Redis master changed");
			return -ESTALE;
		}
		until = pong_by ? pong_by : ping_at;
		if (until > util_mono_ns() + (int64_t)SUB_GEN_MS * 1000000)
			until = util_mono_ns() + (int64_t)SUB_GEN_MS * 1000000;
		r = meta_conn_next(ctx, s->wake[0], until, &rep, why, wlen);
		if (r == -ETIMEDOUT && util_mono_ns() < (pong_by ? pong_by : ping_at))
			continue;
		if (r == -ETIMEDOUT && pong_by) {
			snprintf(why, wlen, "no answer to PING within %u ms", s->m->timeout_ms);
			return r;
		}
		if (r == -ETIMEDOUT) {
			if (redisAppendCommand(ctx, "PING") != REDIS_OK) {
				snprintf(why, wlen, "out of memory");
				return -ENOMEM;
			}
			r = meta_conn_flush(ctx, why, wlen);
			if (r < 0)
				return r;
			pong_by = util_mono_ns() + (int64_t)s->m->timeout_ms * 1000000;
			continue;
		}
		if (r < 0)
			return r;
		if (push_is(rep, "smessage", 3)) {
			sub_message(s, rep);
		} else if (push_is(rep, "pong", 1)) {
			pong_by = 0;
		} else if (push_is(rep, "sunsubscribe", 1)) {
			/* Redis drops the subscription when the slot moves */
			freeReplyObject(rep);
			meta_pool_target_stale(s->m, s->gen);
			snprintf(why, wlen, "the slot of %s moved away", s->channel);
			return -ESTALE;
		} else {
			log_debug("meta: subscriber: unexpected reply of type %d", rep->type);
		}
		freeReplyObject(rep);
		if (!pong_by)
			ping_at = util_mono_ns() + (int64_t)SUB_PING_MS * 1000000;
	}
}

static void sub_tried(struct sub *s)
{
	pthread_mutex_lock(&s->lock);
	s->first_done = true;
	pthread_cond_signal(&s->tried);
	pthread_mutex_unlock(&s->lock);
}

/*
 * Back off @ms after a failed connect, in steps of SUB_GEN_MS: a new
 * target (the sentinels named a new master, a MOVED) ends the wait and
 * the backoff (*@backoff = 0).  true if the thread is to stop.
 */
static bool sub_wait(struct sub *s, unsigned ms, unsigned *backoff)
{
	struct pollfd p = {.fd = s->wake[0], .events = POLLIN};
	uint64_t gen = meta_pool_gen(s->m);
	unsigned waited;

	for (waited = 0; waited < ms; waited += SUB_GEN_MS) {
		if (poll(&p, 1, SUB_GEN_MS) > 0)
			return true;
		if (meta_pool_gen(s->m) != gen) {
			*backoff = 0;
			break;
		}
	}
	return false;
}

static void *sub_main(void *arg)
{
	struct sub *s = arg;
	redisContext *ctx;
	unsigned backoff = 0;
	bool gap = false;
	char why[256];
	int r;

	while (!sub_stopping(s)) {
		r = sub_open(s, &ctx, why, sizeof(why));
		sub_tried(s);
		if (r == -ECANCELED)
			break;
		if (r < 0) {
			log_debug("meta: subscriber cannot connect to %s: %s", s->m->url, why);
			gap = true;
			backoff = backoff ? backoff * 2 : BACKOFF_MIN_MS;
			if (backoff > BACKOFF_MAX_MS)
				backoff = BACKOFF_MAX_MS;
			if (sub_wait(s, backoff, &backoff))
				break;
			continue;
		}
		backoff = 0;
		log_debug("meta: subscribed to %s on %s%s", s->channel, s->m->url,
			  gap ? " after a gap" : "");
		if (gap)
			s->fn(s->arg, NULL);
		gap = true;
		r = sub_loop(s, ctx, why, sizeof(why));
		redisFree(ctx);
		if (r == -ECANCELED)
			break;
		log_debug("meta: subscription to %s lost: %s", s->m->url, why);
	}
	return NULL;
}

static void sub_free(struct sub *s)
{
	close(s->wake[0]);
	close(s->wake[1]);
	pthread_cond_destroy(&s->tried);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

int meta_subscribe(struct meta *m, meta_inval_fn fn, void *arg)
{
	sigset_t all, old;
	struct sub *s;
	int r;

	if (!fn)
		return -EINVAL;
	pthread_mutex_lock(&m->sub_lock);
	r = -EALREADY;
	if (m->sub)
		goto out;
	r = -ENOMEM;
	s = calloc(1, sizeof(*s));
	if (!s)
		goto out;
	if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		r = -errno;
		free(s);
		goto out;
	}
	s->m = m;
	s->fn = fn;
	s->arg = arg;
	snprintf(s->channel, sizeof(s->channel), "{%s}:inval", m->prefix);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->tried, NULL);

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = -pthread_create(&s->thread, NULL, sub_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		sub_free(s);
		goto out;
	}
	pthread_mutex_lock(&s->lock);
	while (!s->first_done)
		pthread_cond_wait(&s->tried, &s->lock);
	pthread_mutex_unlock(&s->lock);
	m->sub = s;
out:
	pthread_mutex_unlock(&m->sub_lock);
	return r;
}

void meta_unsubscribe(struct meta *m)
{
	struct sub *s;

	if (!m)
		return;
	pthread_mutex_lock(&m->sub_lock);
	s = m->sub;
	m->sub = NULL;
	if (s) {
		/* the byte stays in the pipe: every later poll sees it */
		while (write(s->wake[1], "x", 1) < 0 && errno == EINTR)
			;
		pthread_join(s->thread, NULL);
		sub_free(s);
	}
	pthread_mutex_unlock(&m->sub_lock);
}
