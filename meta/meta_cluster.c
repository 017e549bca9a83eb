/*
 * meta_cluster: the cluster view of the location service (API in meta.h,
 * scripts in meta_scripts.c).
 *
 * Owns: locating an object for a fetch (its record and live holders, with
 * stale holders pruned), giving up a replica, the member list, and the
 * invalidation subscriber.  The first three are one Lua script each, run
 * on a pool connection like meta.c's calls and validated with meta.c's
 * reply validators.
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

#define MEMBERS_MAX 65536
/* the subscriber's connect and AUTH wait at most this long, so that
 * meta_unsubscribe() does not wait longer for a thread that is connecting */
#define SUB_CONNECT_MS 1000
/* traffic-free time after which the subscriber checks its connection */
#define SUB_PING_MS 5000
/* the subscriber sees a change of the pool's target within this time */
#define SUB_GEN_MS 100
/* "<kind> <parent> <name> <id>" is at most 15 + 20 + 255 + 20 + 3 bytes */
#define INVAL_MAX 384

/* ---- locate ---- */

/* Stride of the locate script's holders: node, listen, caps, rdma. */
#define HOLDER_FIELDS 4
/* What comes before them: size, csum, mtime, origin, stale, block sums,
 * the number of holders (the nodes fetching it follow them). */
#define LOCATE_FIXED 7

/* node, listen, caps, rdma: 0, or -EBADMSG with the reason in @why.  A
 * malformed rdma address only costs the holder its RDMA (meta_rep_rdma()). */
static int rep_holder(redisReply *const *f, struct meta_holder *ret, const char **why)
{
	const char *node = meta_rep_text(f[0], OBJFS_NODE_MAX - 1);
	const char *addr = meta_rep_text(f[1], sizeof(ret->addr) - 1);
	const char *caps, *rdma;

	caps = f[2]->type == REDIS_REPLY_NIL ? "" : meta_rep_text(f[2], sizeof(ret->caps) - 1);

	*why = "holder name is not a node name";
	if (!node || util_node_name_validate(node) < 0)
		return -EBADMSG;
	*why = "no valid listen address";
	if (!addr || !addr[0])
		return -EBADMSG;
	*why = "malformed caps";
	if (!caps || !meta_caps_valid(caps, strlen(caps)))
		return -EBADMSG;
	rdma = meta_rep_rdma(f[3], node);
	memset(ret, 0, sizeof(*ret));
	memcpy(ret->node, node, strlen(node) + 1);
	memcpy(ret->addr, addr, strlen(addr) + 1);
	memcpy(ret->caps, caps, strlen(caps) + 1);
	memcpy(ret->rdma, rdma, strlen(rdma) + 1);
	return 0;
}

int meta_locate(struct meta *m, uint64_t id, struct meta_obj *ret_obj,
		struct meta_holder **ret_holders, size_t *ret_n, unsigned *ret_stale)
{
	return meta_locate_sums(m, id, ret_obj, ret_holders, ret_n, ret_stale, NULL);
}

/* The block sums of a locate's answer @f: 0 and a copy in *@ret_bsum
 * (NULL if none), or -ENOMEM.  Bad text is logged and taken as none. */
static int rep_bsum(const redisReply *f, uint64_t id, char **ret_bsum)
{
	const char *b;

	*ret_bsum = NULL;
	if (f->type == REDIS_REPLY_NIL)
		return 0;
	b = meta_rep_text(f, BSUM_TEXT_MAX);
	if (!b || !meta_bsum_text_ok(b)) {
		meta_log_corrupt("object %" PRIu64 ": its block sums (field 'bsum') are "
				 "malformed; fetching it without them",
				 id);
		return 0;
	}
	*ret_bsum = strdup(b);
	return *ret_bsum ? 0 : -ENOMEM;
}

/* The nodes of a locate's answer from @f on, @n of them, into @ret (which
 * has room): how many were good; the others are logged and skipped. */
static size_t rep_nodes(redisReply *const *f, size_t n, uint64_t id, struct meta_holder *ret)
{
	static struct log_ratelimit rl = LOG_RATELIMIT_INIT("meta: skipped holders", 1000, 1);
	size_t i, good = 0;

	for (i = 0; i < n; i++) {
		const char *why, *s;

		if (rep_holder(f + i * HOLDER_FIELDS, &ret[good], &why) == 0) {
			good++;
			continue;
		}
		s = meta_rep_text(f[i * HOLDER_FIELDS], OBJFS_NODE_MAX - 1);
		log_msg_limited(&rl, LOGL_WARN,
				"meta: object %" PRIu64 ": skipping holder '%s': %s", id,
				s && util_node_name_validate(s) == 0 ? s : "?", why);
	}
	return good;
}

int meta_locate_fan(struct meta *m, uint64_t id, unsigned flags, unsigned advertise_ms,
		    unsigned sample, struct meta_locate *ret)
{
	struct meta_locate l = {0};
	redisReply *rep, *const *e;
	size_t nodes, nh;
	int r;

	if (!id || !ret || sample > META_FAN_SAMPLE_MAX)
		return -EINVAL;
	r = meta_script(m, MS_LOCATE, &rep, "ussuu", id, m->node,
			(flags & META_LOCATE_SUMS) ? "1" : "0", (uint64_t)advertise_ms,
			(uint64_t)sample);
	if (r < 0)
		return r;
	r = -EBADMSG;
	e = rep->element;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < LOCATE_FIXED ||
	    (rep->elements - LOCATE_FIXED) % HOLDER_FIELDS)
		goto clean_rep;
	nodes = (rep->elements - LOCATE_FIXED) / HOLDER_FIELDS;
	if (meta_rep_obj(e, id, &l.obj) < 0 || e[4]->type != REDIS_REPLY_INTEGER ||
	    e[4]->integer < 0 || e[4]->integer > UINT_MAX || e[6]->type != REDIS_REPLY_INTEGER ||
	    e[6]->integer < 0 || (uint64_t)e[6]->integer > nodes ||
	    (uint64_t)e[6]->integer > HOLDERS_MAX || nodes - (size_t)e[6]->integer > sample)
		goto clean_rep;
	nh = (size_t)e[6]->integer;
	l.stale = (unsigned)e[4]->integer;
	r = (flags & META_LOCATE_SUMS) ? rep_bsum(e[5], id, &l.bsum) : 0;
	if (r < 0)
		goto clean_rep;
	r = -ENOMEM;
	l.holders = calloc(nh + 1, sizeof(*l.holders));
	l.partials = calloc(nodes - nh + 1, sizeof(*l.partials));
	if (!l.holders || !l.partials) {
		meta_locate_release(&l);
		goto clean_rep;
	}
	l.n = rep_nodes(e + LOCATE_FIXED, nh, id, l.holders);
	l.np = rep_nodes(e + LOCATE_FIXED + nh * HOLDER_FIELDS, nodes - nh, id, l.partials);
	*ret = l;
	r = 0;
clean_rep:
	freeReplyObject(rep);
	return r;
}

void meta_locate_release(struct meta_locate *l)
{
	if (!l)
		return;
	free(l->holders);
	free(l->partials);
	free(l->bsum);
	memset(l, 0, sizeof(*l));
}

int meta_locate_sums(struct meta *m, uint64_t id, struct meta_obj *ret_obj,
		     struct meta_holder **ret_holders, size_t *ret_n, unsigned *ret_stale,
		     char **ret_bsum)
{
	struct meta_locate l;
	int r;

	r = meta_locate_fan(m, id, ret_bsum ? META_LOCATE_SUMS : 0, 0, 0, &l);
	if (r < 0)
		return r;
	*ret_obj = l.obj;
	*ret_holders = l.holders;
	*ret_n = l.n;
	if (ret_stale)
		*ret_stale = l.stale;
	if (ret_bsum)
		*ret_bsum = l.bsum;
	else
		free(l.bsum);
	free(l.partials);
	return 0;
}

int meta_fan_leave(struct meta *m, uint64_t id)
{
	redisReply *rep;
	int r;

	r = id ? meta_script(m, MS_FAN_LEAVE, &rep, "us", id, m->node) : -EINVAL;
	if (r < 0)
		return r;
	freeReplyObject(rep);
	return 0;
}

/* Run a per-object script of this node that answers 0, 1 or 2. */
int meta_node_obj_script(struct meta *m, enum meta_script ms, uint64_t id)
{
	redisReply *rep;
	int r;

	r = id ? meta_script(m, ms, &rep, "us", id, m->node) : -EINVAL;
	if (r < 0)
		return r;
	if (rep->type != REDIS_REPLY_INTEGER || rep->integer < 0 || rep->integer > 2)
		r = -EBADMSG;
	else
		r = (int)rep->integer;
	freeReplyObject(rep);
	return r;
}

int meta_release_replica(struct meta *m, uint64_t id)
{
	return meta_node_obj_script(m, MS_RELEASE_REPLICA, id);
}

/* ---- members ---- */

/* Stride of the members script's reply: name, pttl, the card's fields. */
#define MEMBER_FIELDS (2 + META_CARD_FIELDS)

static int member_cmp(const void *a, const void *b)
{
	return strcmp(((const struct meta_member *)a)->node, ((const struct meta_member *)b)->node);
}

/* One member: 0, or -EBADMSG with the reason in @why. */
static int rep_member(redisReply *const *f, struct meta_member *ret, const char **why)
{
	const char *node = meta_rep_text(f[0], OBJFS_NODE_MAX - 1);
	struct meta_member mb;

	memset(&mb, 0, sizeof(mb));
	*why = "not a node name";
	if (!node || util_node_name_validate(node) < 0)
		return -EBADMSG;
	memcpy(mb.node, node, strlen(node) + 1);
	*why = "malformed card TTL";
	if (f[1]->type != REDIS_REPLY_INTEGER || f[1]->integer < -2)
		return -EBADMSG;
	mb.live = f[1]->integer != -2;
	mb.ttl_ms = mb.live ? f[1]->integer : -1;
	*why = "malformed card";
	if (mb.live && meta_rep_card(f + 2, mb.node, &mb.card) < 0)
		return -EBADMSG;
	*ret = mb;
	return 0;
}

int meta_members(struct meta *m, struct meta_member **ret, size_t *ret_n)
{
	static struct log_ratelimit rl = LOG_RATELIMIT_INIT("meta: skipped members", 1000, 1);
	struct meta_member *mbs;
	redisReply *rep;
	size_t i, n = 0;
	int r;

	r = meta_script(m, MS_MEMBERS, &rep, "");
	if (r < 0)
		return r;
	r = -EBADMSG;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements % MEMBER_FIELDS)
		goto clean_rep;
	r = -EFBIG;
	if (rep->elements / MEMBER_FIELDS > MEMBERS_MAX)
		goto clean_rep;
	r = -ENOMEM;
	mbs = calloc(rep->elements / MEMBER_FIELDS + 1, sizeof(*mbs));
	if (!mbs)
		goto clean_rep;
	for (i = 0; i < rep->elements; i += MEMBER_FIELDS) {
		const char *why;

		if (rep_member(rep->element + i, &mbs[n], &why) == 0) {
			n++;
			continue;
		}
		{
			const char *s = meta_rep_text(rep->element[i], OBJFS_NODE_MAX - 1);

			log_msg_limited(&rl, LOGL_WARN, "meta: skipping member '%s': %s",
					s && util_node_name_validate(s) == 0 ? s : "?", why);
		}
	}
	qsort(mbs, n, sizeof(*mbs), member_cmp);
	*ret = mbs;
	*ret_n = n;
	r = 0;
clean_rep:
	freeReplyObject(rep);
	return r;
}

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
	r = meta_pool_ctx_flush(ctx, why, wlen);
	if (r == 0)
		r = meta_pool_ctx_next(ctx, s->wake[0],
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
		r = rep->type == REDIS_REPLY_ERROR ? meta_pool_reply_errno(rep) : -EPROTO;
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
		r = meta_pool_ctx_next(ctx, s->wake[0], until, &rep, why, wlen);
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
			r = meta_pool_ctx_flush(ctx, why, wlen);
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
