/*
 * node_fan: fetching an object from every node that has blocks of it.
 *
 * A fetch whose record has block sums advertises this node as fetching
 * it (meta_locate_fan(): a field of the record with a deadline) and
 * learns the holders and a sample of the other nodes fetching it.  Its
 * sources are both: full holders (sealed copies) and partial ones, which
 * serve the blocks they have checked (node_source.c).  Which block to
 * start next, and from which source, is fanpick's choice (fanpick.h),
 * made under nd->lock from what this fetch knows:
 *
 *   a partial source's blocks ──► from the HAVE it sends with every
 *           answer (a version 2 GET with PARTIAL_OK | WANT_HAVE): a GET
 *           of a block it lacks is answered HAVE alone (-EAGAIN), which
 *           is no failure
 *   new fetchers, finished ones ──► a locate again, soon after the start
 *           and then less and less often (FAN_RENEW_*), which also
 *           renews this node's own entry
 *   a block that fails its sum ──► its sender is blamed and not asked
 *           again by this fetch; the block is fetched again, whole
 *   a source that fails or stalls ──► not asked for a while
 *           (FAN_AVOID_MS), a partial one for good; its blocks go to
 *           others ("replaced at the block")
 *
 * With no source left that may be asked, the holders are located once
 * more; after FAN_FAILS_MAX failures in a row with no block arriving
 * the fetch fails as any other does.
 */
#include "node_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fanpick.h"
#include "log.h"

/* Lines that fetches repeat (common/log.h): at most 10 in 10 s. */
static struct log_ratelimit alone_rl =
    LOG_RATELIMIT_INIT("fan-out fetches left to the holders", 10000, 10);
static struct log_ratelimit failover_rl =
    LOG_RATELIMIT_INIT("fan-out blocks fetched elsewhere", 10000, 10);

/* the first re-locate after the start, doubling up to FAN_RENEW_MAX_MS:
 * fetchers that start later are found that soon */
#define FAN_RENEW_FIRST_MS 250
#define FAN_RENEW_MAX_MS 1000
/* a full holder that stalled is not asked for this long (it may have
 * been a hiccup); any other source that failed is dropped for good */
#define FAN_AVOID_MS 2000
/* failures in a row, with no block arriving, before the fetch fails */
#define FAN_FAILS_MAX 12
/* a source is asked what it has (and fetches, or gave out) this often */
#define FAN_POLL_MS 100
/* fanpick's given_ms: a block a full holder gave out, which no source we
 * know has or fetches, waits this long for us to learn of its fetcher
 * (the locates above find a live one within FAN_RENEW_MAX_MS), then is
 * asked of a full holder plainly (the fetcher may be gone) */
#define FAN_GIVEN_MS (2 * FAN_RENEW_MAX_MS)

struct fan_src {
	struct meta_holder h;
	int64_t asked_at; /* mono ms of the last HAVE query sent */
	bool asking;	  /* a query is out */
	bool v2;	  /* it speaks wire version 2: it can tell what it has */
	uint64_t have[FANPICK_WORDS(FANPICK_BLOCKS_MAX)];
	uint64_t fetching[FANPICK_WORDS(FANPICK_BLOCKS_MAX)];
};

struct node_fan {
	struct fanpick *fp;
	struct fanpick_tune tune;
	struct fanpick_src view[FANPICK_SRC_MAX]; /* what fanpick sees */
	struct fan_src *src[FANPICK_SRC_MAX];	  /* who they are; owned */
	unsigned nsrc;
	unsigned ttl_ms;   /* of this node's entry in Redis */
	int64_t t0;	   /* mono ms of the start */
	int64_t renew_at;  /* mono ms of the next locate */
	unsigned renew_ms; /* the gap to the one after */
	bool renewing;	   /* a worker is locating */
	bool relocated;	   /* located again after running out of sources */
	unsigned fails;	   /* in a row, with no block arriving */
	unsigned running;  /* requests in flight */
	unsigned asking;   /* queries in flight */
	uint64_t rnd;	   /* xorshift state */
};

static int64_t now_ms(void)
{
	return util_mono_ns() / 1000000;
}

static uint64_t fan_rnd(void *ctx)
{
	uint64_t *x = ctx;

	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* The source of node @node, or -1.  nd->lock held (or not yet shared). */
static int src_find(struct node_fan *fan, const char *node)
{
	for (unsigned i = 0; i < fan->nsrc; i++)
		if (!strcmp(fan->src[i]->h.node, node))
			return (int)i;
	return -1;
}

/* Add @h as a source (@full: a sealed copy), or update the one of its
 * node (a partial one that became full).  nd->lock held (or not yet
 * shared). */
static void src_add(struct node *nd, struct node_fan *fan, const struct meta_holder *h, bool full)
{
	int k = src_find(fan, h->node);
	struct fan_src *s;

	if (k >= 0) {
		if (full && !fan->view[k].full) {
			fan->view[k].full = true;
			fan->view[k].have = NULL;
			fan->view[k].fetching = NULL;
		}
		return;
	}
	if (fan->nsrc >= FANPICK_SRC_MAX || !node_fetch_holder_usable(nd, h))
		return;
	s = calloc(1, sizeof(*s));
	if (!s)
		return;
	s->h = *h;
	s->v2 = transport_speaks_fan1(nd->transport, h->caps);
	k = (int)fan->nsrc++;
	fan->src[k] = s;
	memset(&fan->view[k], 0, sizeof(fan->view[k]));
	fan->view[k].full = full;
	/* (over RDMA a block it is still fetching is "not yet" at once:
	 * asking for it again and again would only spin) */
	fan->view[k].no_park = !transport_parks(nd->transport, h->node, h->caps, h->rdma);
}

void node_fan_free(struct node_fan *fan)
{
	if (!fan)
		return;
	for (unsigned i = 0; i < fan->nsrc; i++)
		free(fan->src[i]);
	fanpick_free(fan->fp);
	free(fan);
}

int node_fan_new(struct node_fetch *f)
{
	struct node *nd = f->nd;
	struct node_fan *fan;
	size_t i;

	if (!f->sums || f->sums->n > FANPICK_BLOCKS_MAX)
		return 0;
	fan = calloc(1, sizeof(*fan));
	if (!fan)
		return -ENOMEM;
	fan->fp = fanpick_new(f->sums->n);
	if (!fan->fp) {
		free(fan);
		return -ENOMEM;
	}
	fan->tune = (struct fanpick_tune){
	    .src_cap = nd->streams_per_holder ? nd->streams_per_holder : 2,
	    .defer_ms = 5 * (int64_t)nd->io_timeout_ms,
	    .given_ms = FAN_GIVEN_MS,
	    .full_bias = 1,
	    .park = true,
	};
	fan->ttl_ms = node_fetch_fan_ttl_ms(nd);
	fan->t0 = now_ms();
	fan->renew_ms = FAN_RENEW_FIRST_MS;
	fan->renew_at = fan->t0 + fan->renew_ms;
	fan->rnd = (uint64_t)util_mono_ns() ^ (f->id * 0x9e3779b97f4a7c15ull) ^ (uintptr_t)fan;
	if (!fan->rnd)
		fan->rnd = 1;
	for (i = 0; i < f->nholders; i++)
		src_add(nd, fan, &f->holders[i], true);
	for (i = 0; i < f->nfirst; i++)
		src_add(nd, fan, &f->first[i], false);
	free(f->first);
	f->first = NULL;
	f->nfirst = 0;
	f->fan = fan;
	return 0;
}

void node_fan_want_locked(struct node_fetch *f, uint64_t off, uint64_t end)
{
	unsigned shift = f->sums->shift, b;
	bool any = false;

	if (!f->fan || end <= off)
		return;
	for (b = (unsigned)(off >> shift); (uint64_t)b << shift < end && b < f->nchunks; b++)
		if (!f->chunks[b].verified) {
			fanpick_want(f->fan->fp, b, true);
			any = true;
		}
	if (any)
		pthread_cond_broadcast(&f->nd->queue_cond);
}

int node_fan_take_locked(struct node_fetch *f, struct fan_task *ret)
{
	struct node_fan *fan = f->fan;
	struct fanpick_choice c;
	int64_t now = now_ms();
	int r;

	if (!fan->renewing && now >= fan->renew_at) {
		fan->renewing = true;
		ret->what = FAN_TASK_LOCATE;
		return 1;
	}
	/* what the sources have, and fetch or gave out: asked now and then */
	for (unsigned i = 0; i < fan->nsrc; i++) {
		struct fan_src *s = fan->src[i];

		/* (one that just said "busy" told what it has with that) */
		if (s->v2 && !s->asking && now - s->asked_at >= FAN_POLL_MS &&
		    fan->view[i].avoid_until <= now && fan->view[i].busy_until <= now &&
		    !fan->view[i].inflight) {
			s->asking = true;
			s->asked_at = now;
			fan->asking++;
			ret->what = FAN_TASK_QUERY;
			ret->src = i;
			ret->h = s->h;
			ret->full = fan->view[i].full;
			return 1;
		}
	}
	if (fan->fails > FAN_FAILS_MAX) {
		/* failure after failure: let what runs end, then go plain */
		c.what = fan->running || fan->asking ? FANPICK_WAIT : FANPICK_NONE;
		c.until = FANPICK_NEVER;
	} else {
		r = fanpick_next(fan->fp, fan->view, fan->nsrc, &fan->tune, now, fan_rnd, &fan->rnd,
				 &c);
		if (r < 0)
			return r;
	}
	if (c.what == FANPICK_FETCH) {
		ret->what = FAN_TASK_BLOCK;
		ret->block = c.block;
		ret->src = c.src;
		ret->h = fan->src[c.src]->h;
		ret->full = fan->view[c.src].full;
		f->chunks[c.block].state = CHUNK_RUNNING;
		ret->late = c.late;
		fan->running++;
		return 1;
	}
	ret->until = c.what == FANPICK_WAIT ? c.until : FANPICK_NEVER;
	/* and look again when a source is due to be asked, or Redis */
	if (fan->renew_at < ret->until && !fan->renewing)
		ret->until = fan->renew_at;
	for (unsigned i = 0; i < fan->nsrc; i++) {
		struct fan_src *s = fan->src[i];
		int64_t due = s->asked_at + FAN_POLL_MS;

		/* when the loop above will ask it (a request of ours to it
		 * wakes us when it ends) */
		if (fan->view[i].inflight || fan->view[i].avoid_until == FANPICK_NEVER)
			continue;
		if (due < fan->view[i].busy_until)
			due = fan->view[i].busy_until;
		if (due < fan->view[i].avoid_until)
			due = fan->view[i].avoid_until;
		if (s->v2 && !s->asking && due < ret->until)
			ret->until = due;
	}
	if (log_enabled(LOGL_DEBUG) && !fan->running)
		log_debug("object %" PRIu64 ": %s with nothing running, %u blocks left, %u sources",
			  f->id, c.what == FANPICK_WAIT ? "waiting" : "nothing to start",
			  fanpick_left(fan->fp), fan->nsrc);
	if (!fan->running && !fan->asking && fanpick_left(fan->fp) && !fan->renewing &&
	    (c.what == FANPICK_NONE || fan->fails > FAN_FAILS_MAX)) {
		/* nobody to ask: locate again, once; then the rest is a plain
		 * fetch from the holders, with its retries of stalled ones
		 * and its end (node_worker.c) */
		if (!fan->relocated && fan->fails <= FAN_FAILS_MAX) {
			fan->renewing = true;
			fan->relocated = true;
			ret->what = FAN_TASK_LOCATE;
			return 1;
		}
		log_msg_limited(&alone_rl, LOGL_INFO,
				"object %" PRIu64
				": no node fetching it can be asked; fetching the "
				"rest from its holders only",
				f->id);
		/* holders this fetch found bad stay so (a stalled one is
		 * the plain fetch's to retry) */
		for (unsigned i = 0; i < fan->nsrc; i++)
			for (size_t k = 0; k < f->nholders; k++)
				if (fan->view[i].avoid_until == FANPICK_NEVER &&
				    !strcmp(f->holders[k].node, fan->src[i]->h.node))
					f->mark[k] = HOLDER_BAD;
		f->fan = NULL;
		f->fan_off = fan;
		ret->what = FAN_TASK_PLAIN;
		return 0;
	}
	ret->what = FAN_TASK_WAIT;
	return 0;
}

bool node_fan_done_locked(const struct node_fetch *f)
{
	return !f->fan || fanpick_left(f->fan->fp) == 0;
}

/* A HAVE from source @k: what it has and fetches now.  nd->lock held. */
static void take_have_locked(struct node_fan *fan, unsigned k, const struct transport_have *th,
			     unsigned nblocks)
{
	struct fan_src *s = fan->src[k];
	unsigned w;

	fan->view[k].load = th->load;
	if (th->flags & TRANSPORT_HAVE_SEALED) {
		/* a full holder: what it has is all; what it gave out to
		 * other fetchers, if it says, rides as fetching */
		fan->view[k].full = true;
		fan->view[k].have = NULL;
		fan->view[k].fetching = NULL;
	}
	if (th->nblocks != nblocks)
		return; /* another idea of the object (or nothing given out) */
	for (w = 0; w < FANPICK_WORDS(nblocks); w++) {
		uint64_t h = 0, g = 0;

		for (int b = 7; b >= 0; b--) {
			h = h << 8 | th->have[w * 8 + (unsigned)b];
			g = g << 8 | th->fetching[w * 8 + (unsigned)b];
		}
		s->have[w] = h;
		s->fetching[w] = g;
	}
	if (!fan->view[k].full)
		fan->view[k].have = s->have;
	fan->view[k].fetching = s->fetching;
}

/* The source @t ran from is still at index t->src (sources are only ever
 * added)?  nd->lock held. */
static bool same_src(const struct node_fan *fan, const struct fan_task *t)
{
	return t->src < fan->nsrc && !strcmp(fan->src[t->src]->h.node, t->h.node);
}

bool node_fan_block_end(struct node_fetch *f, const struct fan_task *t, int r,
			const struct transport_have *th, bool got_have)
{
	struct node *nd = f->nd;
	struct node_fan *fan = f->fan;
	struct chunk *c = &f->chunks[t->block];
	int64_t now = now_ms();
	bool last = false;
	uint64_t front = 0;

	pthread_mutex_lock(&nd->lock);
	fan->running--;
	/* (a block that checked out stops "arriving" as it becomes
	 * "checked", in one step, below: a GET parked on it must not wake
	 * to find it neither) */
	if (r != 0)
		node_source_partial_fetching(f->part, t->block, false);
	if (got_have && same_src(fan, t))
		take_have_locked(fan, t->src, th, f->nchunks);
	if (r == 0) {
		fanpick_done(fan->fp, fan->view, fan->nsrc, t->block, t->src);
		c->state = CHUNK_DONE;
		c->verified = true;
		f->ndone++;
		fan->fails = 0;
		f->stall_retries = 0;
		node_source_partial_have(f->part, t->block);
		front = f->front;
		last = f->ndone == f->nchunks && f->state == FETCH_RUNNING;
	} else {
		fanpick_fail(fan->fp, fan->view, fan->nsrc, t->block, t->src);
		c->state = CHUNK_QUEUED;
		c->done = 0;
		if (r != -EAGAIN) {
			fan->fails++;
			/* a full holder that only stalled, or reset the
			 * connection (one at its connection limit does), is
			 * asked again after a while (and by the plain fetch's
			 * retries); any other failure ends a source for this
			 * fetch */
			if (same_src(fan, t))
				fan->view[t->src].avoid_until =
				    (r == -ETIMEDOUT || r == -ECONNRESET) && fan->view[t->src].full
					? now + FAN_AVOID_MS
					: FANPICK_NEVER;
		} else if (same_src(fan, t) && got_have && (th->flags & TRANSPORT_HAVE_BUSY)) {
			/* it sends all it will at once: ask again when it said */
			fan->view[t->src].busy_until = now + th->retry_ms;
		} else if (same_src(fan, t) && !got_have) {
			/* "not yet" without a word of what it has: not for a while */
			fan->view[t->src].busy_until = now + 100;
		}
	}
	pthread_cond_broadcast(&f->cond);
	pthread_cond_broadcast(&nd->queue_cond);
	pthread_mutex_unlock(&nd->lock);
	(void)front;
	if (r == -EBADE) {
		NODE_COUNT(nd, csum_failures, 1);
		node_fetch_peer_blame(nd, t->h.node);
	}
	if (r < 0 && r != -EAGAIN) {
		NODE_COUNT(nd, failovers, 1);
		log_msg_limited(&failover_rl, LOGL_WARN,
				"object %" PRIu64 ": %s '%s' (%s) %s at offset %" PRIu64
				" (block %u); fetching it elsewhere",
				f->id, t->full ? "holder" : "fetcher", t->h.node,
				t->h.addr[0] ? t->h.addr : t->h.rdma, node_fetch_holder_errname(r),
				(uint64_t)t->block << f->sums->shift, t->block);
	}
	return last;
}

void node_fan_query_end(struct node_fetch *f, const struct fan_task *t, int r,
			const struct transport_have *th)
{
	struct node *nd = f->nd;
	struct node_fan *fan = f->fan;

	pthread_mutex_lock(&nd->lock);
	fan->asking--; /* f->fan stays while a query is out */
	if (same_src(fan, t)) {
		fan->src[t->src]->asking = false;
		if (r == 0)
			take_have_locked(fan, t->src, th, f->nchunks);
		else if (fan->view[t->src].full && r == -ETIMEDOUT)
			/* a holder that stalled: not asked for a while */
			fan->view[t->src].avoid_until = now_ms() + FAN_AVOID_MS;
		else
			/* gone, or a fetcher done with it that let it go */
			fan->view[t->src].avoid_until = FANPICK_NEVER;
	}
	pthread_cond_broadcast(&nd->queue_cond);
	pthread_mutex_unlock(&nd->lock);
}

int node_fan_locate(struct node_fetch *f)
{
	struct node *nd = f->nd;
	struct node_fan *fan = f->fan;
	struct meta_locate l;
	size_t i;
	int r;

	r = meta_locate_fan(nd->meta, f->id, 0, fan->ttl_ms, FAN_SAMPLE, &l);
	pthread_mutex_lock(&nd->lock);
	fan->renewing = false;
	if (fan->renew_ms < FAN_RENEW_MAX_MS)
		fan->renew_ms *= 2;
	if (fan->renew_ms > FAN_RENEW_MAX_MS)
		fan->renew_ms = FAN_RENEW_MAX_MS;
	fan->renew_at = now_ms() + fan->renew_ms;
	if (r == 0) {
		for (i = 0; i < l.n; i++)
			src_add(nd, fan, &l.holders[i], true);
		for (i = 0; i < l.np; i++)
			src_add(nd, fan, &l.partials[i], false);
		/* located again after running dry: the full holders once more */
		for (i = 0; i < fan->nsrc; i++)
			if (fan->view[i].full && fan->view[i].avoid_until != FANPICK_NEVER)
				fan->view[i].avoid_until = 0;
	}
	pthread_cond_broadcast(&nd->queue_cond);
	pthread_mutex_unlock(&nd->lock);
	if (r == 0)
		meta_locate_release(&l);
	return r;
}
