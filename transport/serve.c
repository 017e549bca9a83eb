/*
 * serve: answering a GET, for every backend.  A backend reads requests
 * and writes replies on its own kind of connection; what a reply holds,
 * and what serving it costs and counts, is decided here, the same way
 * for all of them: transport_serve_begin() answers ERR or HAVE, or pins
 * the object for a DATA header; transport_serve_next() hands out each
 * piece, transport_serve_unsent() takes back what was not sent, and
 * transport_serve_end() unpins (tcp.c's serve loop is the model).  Only
 * sealed or verified bytes ever go out.  The node's serving slots, parked
 * GETs and the bandwidth bucket live here too.  docs/design.md, "Serving
 * a GET", has the flow and the rules: what a peer may get, slots,
 * parking, the bucket.
 */
#define _GNU_SOURCE
#include "transport_i.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define BUCKET_BURST_MIN (64 * 1024)
#define BUCKET_BURST_MAX (1024 * 1024)
#define BUCKET_SLICE_NS (50 * 1000 * 1000)
/* a parked GET waits in slices of this (so that a stop is seen) ... */
#define PARK_SLICE_MS 50
/* ... for at most io_timeout_ms / PARK_SHARE in all */
#define PARK_SHARE 2
/* a slot's rate is guessed only after it ran this long; before, a busy
 * answer says RETRY_GUESS_MS */
#define RATE_MIN_NS (2 * 1000 * 1000)
#define RETRY_GUESS_MS 10
/* a GET waits for a slot (slot_take()) at most io_timeout_ms / this */
#define SLOT_WAIT_SHARE 4

/* ---- bandwidth bucket ---- */

void transport_tbucket_init(struct tbucket *b, uint64_t rate)
{
	pthread_mutex_init(&b->lock, NULL);
	b->rate = rate;
	b->burst = rate / 8;
	if (b->burst < BUCKET_BURST_MIN)
		b->burst = BUCKET_BURST_MIN;
	if (b->burst > BUCKET_BURST_MAX)
		b->burst = BUCKET_BURST_MAX;
	b->tokens = (double)b->burst;
	b->last_ns = util_mono_ns();
}

void transport_tbucket_release(struct tbucket *b)
{
	pthread_mutex_destroy(&b->lock);
}

/*
 * Take @n bytes from the bucket, sleeping off any debt, in slices so
 * that *@stop (set by a server that is stopping) ends the wait early.
 */
static void tbucket_take(struct tbucket *b, uint64_t n, const atomic_bool *stop)
{
	int64_t now, wait_ns, until;

	if (!b->rate)
		return;
	pthread_mutex_lock(&b->lock);
	now = util_mono_ns();
	b->tokens += (double)(now - b->last_ns) * (double)b->rate / 1e9;
	if (b->tokens > (double)b->burst)
		b->tokens = (double)b->burst;
	b->last_ns = now;
	b->tokens -= (double)n;
	wait_ns = b->tokens < 0 ? (int64_t)(-b->tokens * 1e9 / (double)b->rate) : 0;
	pthread_mutex_unlock(&b->lock);

	until = now + wait_ns;
	while (!(stop && atomic_load(stop))) {
		int64_t left = until - util_mono_ns();
		struct timespec ts;

		if (left <= 0)
			break;
		if (left > BUCKET_SLICE_NS)
			left = BUCKET_SLICE_NS;
		ts.tv_sec = 0;
		ts.tv_nsec = left;
		nanosleep(&ts, NULL);
	}
}

/* ---- serving slots ---- */

/* The node's transport: an RDMA half counts and limits with its parent. */
static struct transport *node_of(struct transport *t)
{
	return t->parent ? t->parent : t;
}

void transport_tslots_init(struct tslots *s, unsigned max)
{
	pthread_condattr_t ca;

	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	/* slot_take() waits against CLOCK_MONOTONIC (util_mono_ns()) */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->freed, &ca);
	pthread_condattr_destroy(&ca);
	s->max = max;
}

void transport_tslots_release(struct tslots *s)
{
	pthread_cond_destroy(&s->freed);
	pthread_mutex_destroy(&s->lock);
}

/* Does @peer hold every slot in use?  s->lock held. */
static bool slots_all_peer(const struct tslots *s, uint64_t peer)
{
	unsigned n = 0;

	for (unsigned i = 0; i < TSLOT_TRACK; i++) {
		if (!s->s[i].used)
			continue;
		if (s->s[i].peer != peer)
			return false;
		n++;
	}
	return n == s->busy;
}

/* When a slot likely frees, in ms: the soonest end of the tracked GETs,
 * each at an equal share of the bucket's @rate among the node's @sending
 * GETs, or at the rate it got so far if there is no limit; times 1 to
 * 1.5 at random, so that the GETs refused meanwhile do not all come back
 * together.  s->lock held. */
static unsigned slot_retry_ms(const struct tslots *s, uint64_t rate, uint64_t sending)
{
	int64_t now = util_mono_ns();
	double best = -1;

	for (unsigned i = 0; i < TSLOT_TRACK; i++) {
		const struct tslot *sl = &s->s[i];
		uint64_t sent, left;
		int64_t ran;
		double bps, ms;

		if (!sl->used)
			continue;
		sent = atomic_load_explicit(&sl->sent, memory_order_relaxed);
		left = sl->len > sent ? sl->len - sent : 0;
		ran = now - sl->t0_ns;
		if (rate)
			bps = (double)rate / (double)(sending ? sending : 1);
		else
			bps = ran >= RATE_MIN_NS && sent ? (double)sent * 1e9 / (double)ran : 0;
		ms = bps > 0 ? (double)left * 1e3 / bps : RETRY_GUESS_MS;
		/* over RDMA the bytes are all handed out before the peer
		 * reads them: the slot frees at its FIN, some time later */
		if (!left && sl->rdma)
			ms = RETRY_GUESS_MS;
		if (best < 0 || ms < best)
			best = ms;
	}
	if (best < 0)
		best = RETRY_GUESS_MS;
	/* spread: the GETs refused meanwhile are not all back at once */
	best *= 1.0 + (double)(util_mono_ns() & 1023) / 2048.0;
	if (best < 1)
		return 1;
	return best > TRANSPORT_RETRY_MS_MAX ? TRANSPORT_RETRY_MS_MAX : (unsigned)best;
}

/*
 * Take a slot for @ctx, a GET of ctx->get_len bytes from @node, or
 * -EBUSY when every slot is taken, with when to ask again in *@ret_ms.
 * With @may_wait, a GET from the peer that holds every slot waits for
 * one while no other peer is being refused (docs/design.md, "Serving a
 * GET", "Slots").
 */
static int slot_take(struct serve_ctx *ctx, const char *node, bool may_wait,
		     const atomic_bool *stop, unsigned *ret_ms)
{
	struct transport *n = node_of(ctx->t);
	struct tslots *s = &n->slots;
	uint64_t peer = util_node_name_key(node); /* 0: unknown, never waits */
	int64_t now = util_mono_ns(), end = 0;
	struct timespec ts;
	unsigned ms;

	ctx->slot = -1;
	pthread_mutex_lock(&s->lock);
	while (s->max && s->busy >= s->max) {
		now = util_mono_ns();
		/* never long enough for the client to take it for a stall */
		if (!end)
			end = now + (int64_t)n->io_timeout_ms * 1000000 / SLOT_WAIT_SHARE;
		if (may_wait && peer && !s->waiting && now < end && now >= s->contended_until &&
		    slots_all_peer(s, peer) &&
		    !(stop && atomic_load_explicit(stop, memory_order_relaxed))) {
			int64_t until = now + (int64_t)PARK_SLICE_MS * 1000000;

			s->waiting++;
			if (until > end)
				until = end;
			ts.tv_sec = (time_t)(until / 1000000000);
			ts.tv_nsec = (long)(until % 1000000000);
			pthread_cond_timedwait(&s->freed, &s->lock, &ts);
			s->waiting--;
			continue;
		}
		ms = slot_retry_ms(s, n->bucket.rate,
				   atomic_load_explicit(&n->cnt.serving, memory_order_relaxed));
		/* another peer waits for this node: no queueing until it is
		 * back, and a little after */
		if (!slots_all_peer(s, peer) || !peer)
			s->contended_until = now + (int64_t)ms * 1500000 + 10000000;
		*ret_ms = ms;
		pthread_mutex_unlock(&s->lock);
		return -EBUSY;
	}
	s->busy++;
	for (unsigned i = 0; i < TSLOT_TRACK; i++)
		if (!s->s[i].used) {
			s->s[i].used = true;
			s->s[i].peer = peer;
			s->s[i].t0_ns = util_mono_ns();
			s->s[i].len = ctx->get_len;
			s->s[i].rdma = ctx->t->parent != NULL;
			atomic_store_explicit(&s->s[i].sent, 0, memory_order_relaxed);
			ctx->slot = (int)i;
			break;
		}
	pthread_mutex_unlock(&s->lock);
	ctx->slotted = true;
	return 0;
}

static void slot_give(struct serve_ctx *ctx)
{
	struct tslots *s = &node_of(ctx->t)->slots;

	if (!ctx->slotted)
		return;
	pthread_mutex_lock(&s->lock);
	s->busy--;
	if (ctx->slot >= 0)
		s->s[ctx->slot].used = false;
	pthread_cond_signal(&s->freed);
	pthread_mutex_unlock(&s->lock);
	ctx->slotted = false;
	ctx->slot = -1;
}

/* ---- one GET ---- */

/* A reply of @type to @get, echoing it, in its version. */
static void reply_to(const struct wire_msg *get, uint8_t type, struct wire_msg *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->ver = get->ver;
	ret->type = type;
	ret->reqid = get->reqid;
	ret->id = get->id;
	ret->off = get->off;
}

/*
 * Ask the source whether [off, off+len) of @token is servable: 1 or 0,
 * with what a HAVE would say in *@h, or -errno.  Without have(), every
 * byte is (a sealed object, as far as a HAVE can tell).
 */
static int range_servable(struct transport *t, const struct wire_msg *get, void *token,
			  struct transport_have *h)
{
	const struct transport_source *src = &t->src;
	uint64_t load = atomic_load_explicit(&node_of(t)->cnt.serving, memory_order_relaxed);
	int r = 1;

	memset(h, 0, sizeof(*h));
	if (src->have)
		r = src->have(token, get->off, get->len, h);
	else
		h->flags = TRANSPORT_HAVE_SEALED;
	h->load = load > UINT16_MAX ? UINT16_MAX : (uint16_t)load;
	return r > 1 ? -EIO : r;
}

/* A HAVE the source filled in, checked before it goes out: 0 or -EIO. */
static int have_check(struct transport *t, uint64_t id, const struct transport_have *h)
{
	if (transport_wire_have_ok(h))
		return 0;
	transport_log(t, TLOG_CONN, LOGL_WARN,
		      "transport: the source's blocks of object %" PRIu64 " make no HAVE (%" PRIu32
		      " blocks, flags %#x)",
		      id, h->nblocks, h->flags);
	return -EIO;
}

/*
 * Park @get (WIRE_F_PARK) until its range is servable, the source stops
 * receiving it, *@stop, or io_timeout_ms / PARK_SHARE: then what
 * range_servable() says, fresh in *@h.
 */
static int park(struct transport *t, const struct wire_msg *get, void *token,
		const atomic_bool *stop, struct transport_have *h)
{
	int64_t until = util_mono_ns() + (int64_t)t->io_timeout_ms * 1000000 / PARK_SHARE, left;
	int r;

	do {
		left = (until - util_mono_ns()) / 1000000;
		r = t->src.wait(token, get->off, get->len,
				left < 1	       ? 1
				: left < PARK_SLICE_MS ? (unsigned)left
						       : PARK_SLICE_MS);
		if (r < 0)
			return r;
	} while (r == 2 && util_mono_ns() < until && !(stop && atomic_load(stop)));
	return range_servable(t, get, token, h);
}

int transport_serve_begin(struct transport *t, const struct wire_msg *get, const char *peer,
			  const char *node, const atomic_bool *stop, struct serve_ctx *ret_ctx,
			  struct wire_msg *ret_reply)
{
	const struct transport_source *src = &t->src;
	bool query = (get->flags & WIRE_F_WANT_HAVE) && !get->len;
	struct transport_have h, gh;
	bool have_only, have_first;
	unsigned retry_ms = 0;
	uint64_t size;
	void *token;
	int err, ok = 1;

	err = src->open(src->ctx, node ? node : "", get->id, &size, &token);
	if (err)
		goto reply_err;
	if (get->off > size || get->len > size - get->off) {
		err = -ERANGE;
		goto close_token;
	}
	/* an empty range is servable whatever the source holds */
	if (get->len || query) {
		ok = range_servable(t, get, token, &h);
		if (!ok && get->len && (get->flags & WIRE_F_PARK) && src->wait) {
			COUNT_ADD(node_of(t), parked, 1);
			ok = park(t, get, token, stop, &h);
		}
		if (ok < 0) {
			err = ok;
			goto close_token;
		}
	}
	memset(ret_ctx, 0, sizeof(*ret_ctx));
	ret_ctx->t = t;
	ret_ctx->get_len = get->len;
	ret_ctx->slot = -1;
	/* (have() says SEALED of a sealed object; an empty range has no
	 * bytes to register) */
	ret_ctx->partial = (get->len || query) && !(h.flags & TRANSPORT_HAVE_SEALED);
	if (ok && get->len && (get->flags & WIRE_F_BUSY_OK) &&
	    slot_take(ret_ctx, node, get->flags & WIRE_F_PARK, stop, &retry_ms) == -EBUSY) {
		h.flags |= TRANSPORT_HAVE_BUSY;
		h.retry_ms = (uint16_t)retry_ms;
		COUNT_ADD(node_of(t), busy_sent, 1);
	} else if (ok && get->len && (get->flags & WIRE_F_BUSY_OK) &&
		   (get->flags & WIRE_F_PARTIAL_OK) && src->give) {
		/* a block this node gave out already: its fetcher has it */
		uint16_t load = h.load;

		memset(&gh, 0, sizeof(gh));
		ok = src->give(token, get->off, get->len, &gh);
		if (ok <= 0)
			slot_give(ret_ctx);
		if (ok < 0) {
			err = ok;
			goto close_token;
		}
		if (!ok) {
			h = gh;
			h.load = load;
			COUNT_ADD(node_of(t), given_refused, 1);
		}
		ret_ctx->given = ok == 1;
	}
	have_only = query || (!ok && (get->flags & WIRE_F_PARTIAL_OK)) || retry_ms;
	have_first = !have_only && ok && (get->flags & WIRE_F_WANT_HAVE);
	if (!ok && !have_only) {
		err = -ENOENT;
		goto close_token;
	}
	if (have_only || have_first) {
		err = have_check(t, get->id, &h);
		if (err)
			goto give_slot;
	}
	if (have_only) {
		src->close(token);
		reply_to(get, WIRE_HAVE, ret_reply);
		ret_reply->have = h;
		COUNT_ADD(t, requests_served, 1);
		return 1;
	}
	ret_ctx->peer = peer;
	ret_ctx->ver = get->ver;
	ret_ctx->reqid = get->reqid;
	ret_ctx->get_off = get->off;
	ret_ctx->id = get->id;
	ret_ctx->token = token;
	ret_ctx->off = get->off;
	ret_ctx->left = get->len;
	ret_ctx->more = true;
	COUNT_ADD(node_of(t), serving, 1);
	if (have_first) {
		reply_to(get, WIRE_HAVE, ret_reply);
		ret_reply->flags = WIRE_F_HAVE_DATA;
		ret_reply->have = h;
		return 2;
	}
	transport_serve_data_hdr(ret_ctx, ret_reply);
	return 0;

give_slot:
	slot_give(ret_ctx);
close_token:
	src->close(token);
reply_err:
	reply_to(get, WIRE_ERR, ret_reply);
	ret_reply->status = -err > 0 && -err <= WIRE_STATUS_MAX ? -err : EIO;
	COUNT_ADD(t, requests_served, 1);
	return 1;
}

void transport_serve_data_hdr(const struct serve_ctx *ctx, struct wire_msg *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->ver = ctx->ver;
	ret->type = WIRE_DATA;
	ret->reqid = ctx->reqid;
	ret->id = ctx->id;
	ret->off = ctx->get_off;
	ret->len = ctx->get_len;
}

bool transport_serve_more(const struct serve_ctx *ctx)
{
	return ctx->more;
}

int transport_serve_next(struct serve_ctx *ctx, size_t max, struct iovec *iov, int max_iov,
			 size_t *ret_bytes, const atomic_bool *stop)
{
	struct transport *t = ctx->t;
	/* the node's one limit: an RDMA half takes from its parent's bucket */
	struct tbucket *b = t->parent ? &t->parent->bucket : &t->bucket;
	size_t want, bytes = 0;
	int n = 0, err;

	if (b->rate && max > b->burst)
		max = (size_t)b->burst;
	want = ctx->left < max ? (size_t)ctx->left : max;
	if (want) {
		n = t->src.iov(ctx->token, ctx->off, want, iov, max_iov, &bytes);
		if (n <= 0 || n > max_iov || bytes == 0 || bytes > want) {
			err = n < 0 ? n : -EIO;
			transport_log(t, TLOG_CONN, LOGL_WARN,
				      "transport: cannot read object %" PRIu64
				      " for %s at offset %" PRIu64 ": %s",
				      ctx->id, ctx->peer, ctx->off, strerror(-err));
			ctx->more = false;
			return err;
		}
		tbucket_take(b, bytes, stop);
		if (ctx->slot >= 0)
			atomic_fetch_add_explicit(&node_of(t)->slots.s[ctx->slot].sent, bytes,
						  memory_order_relaxed);
	}
	COUNT_ADD(t, bytes_sent, bytes);
	if (bytes == ctx->left) {
		COUNT_ADD(t, requests_served, 1);
		ctx->served = true;
	}
	ctx->off += bytes;
	ctx->left -= bytes;
	ctx->more = ctx->left != 0;
	*ret_bytes = bytes;
	return n;
}

void transport_serve_unsent(struct serve_ctx *ctx, size_t bytes, int err)
{
	struct transport *t = ctx->t;

	COUNT_SUB(t, bytes_sent, bytes);
	if (ctx->served)
		COUNT_SUB(t, requests_served, 1);
	ctx->served = false;
	ctx->more = false;
	transport_log(t, TLOG_CONN, LOGL_INFO,
		      "transport: sending object %" PRIu64 " to %s failed: %s", ctx->id, ctx->peer,
		      strerror(-err));
}

void transport_serve_end(struct serve_ctx *ctx)
{
	/* not all of it went out: its blocks are not given out after all */
	if (ctx->given && !ctx->served && ctx->t->src.ungive)
		ctx->t->src.ungive(ctx->token, ctx->get_off, ctx->get_len);
	slot_give(ctx);
	ctx->t->src.close(ctx->token);
	ctx->token = NULL;
	COUNT_SUB(node_of(ctx->t), serving, 1);
}
