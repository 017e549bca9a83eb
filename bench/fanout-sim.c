/*
 * fanout-sim: a discrete-event simulation of one object read by many
 * nodes at once, driving node/fanpick.c unchanged, with one binary heap
 * of events.  The options are a table in fanout-sim-opts.c (--help);
 * docs/benchmarks.md, "objfs-fanout-sim", describes the model (the
 * nodes, the reader, what it knows, the server side of a GET, faults)
 * and the output.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fanout-sim.h"
#include "fanpick.h"

#define MIB (1024.0 * 1024.0)
#define BLOCK_MIN (8ull << 20)
#define NODES_MAX 100000u

static struct fsim_opts O;

/* ---- random numbers (splitmix64) ---- */

static uint64_t rng_state;

static uint64_t rnd(void *ctx)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	(void)ctx;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double rnd_unit(void)
{
	return (double)(rnd(NULL) >> 11) / 9007199254740992.0;
}

static unsigned rnd_below(unsigned n)
{
	return (unsigned)(rnd(NULL) % n);
}

/* ---- events: a binary heap ordered by time, then by insertion ---- */

enum ev_type {
	EV_START,	 /* a: reader */
	EV_LOCATE_EXEC,	 /* a: reader; its locate runs at Redis */
	EV_LOCATE_REPLY, /* a: reader */
	EV_GET,		 /* a: server, b: reader, c: block, d: source; ver: late */
	EV_BUSY,	 /* a: reader, b: enum refusal, c: block, d: source */
	EV_FAIL,	 /* a: reader, c: block, d: source index */
	EV_SERVER,	 /* a: server; ver: its next completion */
	EV_TRY,		 /* a: reader */
	EV_POLL,	 /* a: reader */
	EV_RELOCATE,	 /* a: reader; ver: its renewal */
	EV_HAVE,	 /* a: reader, d: source index, or -1u: those of a poll */
	EV_TIMEOUT,	 /* a: flow; ver: its generation */
	EV_DIE,		 /* a: node */
	EV_STALL,	 /* a: node */
	EV_UNSTALL,	 /* a: node */
};

/* why a GET was refused (each answer carries the server's HAVE) */
enum refusal {
	REF_GIVEN,   /* the origin gave the block out already */
	REF_BUSY,    /* every slot taken */
	REF_NOT_YET, /* it does not have the block, nor bytes of it flowing in */
};

struct event {
	double t;
	uint64_t seq, ver;
	enum ev_type type;
	unsigned a, b, c, d;
};

static struct event *heap;
static size_t heap_n, heap_cap;
static uint64_t heap_seq, nevents;

static bool ev_before(const struct event *x, const struct event *y)
{
	return x->t < y->t || (x->t == y->t && x->seq < y->seq);
}

static void push(double t, enum ev_type type, unsigned a, unsigned b, unsigned c, unsigned d,
		 uint64_t ver)
{
	size_t i;

	if (heap_n == heap_cap) {
		heap_cap = heap_cap ? 2 * heap_cap : 1024;
		heap = realloc(heap, heap_cap * sizeof(*heap));
		if (!heap) {
			perror("realloc");
			exit(1);
		}
	}
	i = heap_n++;
	heap[i] = (struct event){t, heap_seq++, ver, type, a, b, c, d};
	while (i && ev_before(&heap[i], &heap[(i - 1) / 2])) {
		struct event tmp = heap[i];

		heap[i] = heap[(i - 1) / 2];
		heap[(i - 1) / 2] = tmp;
		i = (i - 1) / 2;
	}
}

static struct event pop(void)
{
	struct event top = heap[0];
	size_t i = 0;

	heap[0] = heap[--heap_n];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < heap_n && ev_before(&heap[l], &heap[m]))
			m = l;
		if (r < heap_n && ev_before(&heap[r], &heap[m]))
			m = r;
		if (m == i)
			break;
		struct event tmp = heap[i];
		heap[i] = heap[m];
		heap[m] = tmp;
		i = m;
	}
	return top;
}

/* ---- the world ---- */

/* a block on its way from a server to a reader */
struct flow {
	unsigned server, reader, block, srci;
	double rem, rate, last, start; /* bytes left, bytes/s, when rem was right */
	uint64_t gen;
	bool live;
};

/* a source as one reader knows it: fanpick's view plus the snapshot */
struct known {
	unsigned node;
	uint64_t *have, *fetching; /* the last HAVE's bitmaps */
	double backoff_ms;	   /* the next busy back-off */
	bool polling;		   /* a HAVE query is out */
	bool batched;		   /* it is one of a --poll-all tick's */
	unsigned ours;		   /* flows from it to us */
	bool met;		   /* it knows us as one of its sources */
	uint64_t hver;		   /* its node's hver at the last HAVE */
	double told;		   /* when the last HAVE came */
	double asked;		   /* when the last HAVE query went (--poll-all) */
};

struct ids {
	unsigned *v, n, cap;
};

struct node {
	/* as a server */
	struct ids up; /* flows it sends */
	uint64_t ev_ver;
	double served; /* bytes */
	bool stalled, alive, sealed;
	/* as a reader */
	struct fanpick *fp;
	/* its sources (FANPICK_SRC_MAX each, on the heap: a small node
	 * keeps the servers' fields of N nodes in cache) */
	struct known *ks;
	struct fanpick_src *fs;
	unsigned *ksnode; /* ks[i].node, packed for learn() */
	unsigned nks;
	struct ids down; /* flows it receives */
	unsigned inflight;
	double start, done, last_locate, idle_since, try_at;
	double renew_ms; /* --relocate-first: the gap to the next locate */
	uint64_t renew_ver;
	bool started, poll_pending, locate_pending;
	unsigned pend[64], npend; /* a locate's answer on its way */
	unsigned cat_pos;
	/* refused: "not yet", given out */
	unsigned locates, haves, busy, refused;
	/* as a full holder: the blocks it gave out to a fetcher */
	uint64_t *sent;
	unsigned *rcpt; /* per block: the last O.hints nodes it sent it to */
	struct parked {
		unsigned reader, block, srci;
		bool late;
	} * parked; /* GETs waiting for a block it fetches */
	unsigned nparked, parkcap;
	struct parked *queue; /* GETs waiting for a slot (--queue of them) */
	unsigned nqueue;
	/* bumped whenever what its HAVE tells may change (blocks, flows,
	 * queue, given out): a HAVE of the same version is not copied */
	uint64_t hver;
	uint8_t *hop;	   /* per block: store-and-forward hops from the origin */
	uint16_t *sent_to; /* per block: how many nodes it sent it to */
	int preg, sreg;	   /* index in the partial / sealed registry, or -1 */
};

static struct world {
	unsigned n, nholders, nblocks, nwords;
	uint64_t bsize;
	struct node *nd;
	struct flow *fl;
	unsigned nfl, flcap, *flfree, nflfree;
	uint64_t flgen;
	unsigned *preg, npreg; /* partial holders, as Redis has them */
	double *preg_vis;
	unsigned *sreg, nsreg; /* sealed holders */
	double *sreg_vis;
	double redis_free;
	unsigned readers_left;
	double hop_time_sum, origin_last;
	struct fanpick_tune tune;
} W;

/* Does node @n hold the object from the start (an origin)? */
static bool holder(unsigned n)
{
	return n < W.nholders;
}

/* Does node @n answer as a full holder (what it gave out, refusals)? */
static bool as_full(unsigned n)
{
	return holder(n) || (O.sealed_full && W.nd[n].sealed);
}

static uint64_t block_len(unsigned b)
{
	uint64_t off = (uint64_t)b * W.bsize;

	return O.size - off < W.bsize ? O.size - off : W.bsize;
}

static int64_t ms(double t)
{
	return (int64_t)floor(t * 1000.0);
}

static void ids_add(struct ids *s, unsigned v)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 8;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		if (!s->v) {
			perror("realloc");
			exit(1);
		}
	}
	s->v[s->n++] = v;
}

static void ids_del(struct ids *s, unsigned v)
{
	unsigned i;

	for (i = 0; i < s->n; i++)
		if (s->v[i] == v) {
			s->v[i] = s->v[--s->n];
			return;
		}
}

/* the registries: an array with swap-removal, each node keeping its index */
static void reg_add(unsigned *arr, double *vis, unsigned *n, int *idx, unsigned node, double at)
{
	*idx = (int)*n;
	arr[*n] = node;
	vis[(*n)++] = at;
}

static void reg_del(unsigned *arr, double *vis, unsigned *n, unsigned node, bool sealed)
{
	struct node *p = &W.nd[node];
	int *idx = sealed ? &p->sreg : &p->preg;
	unsigned i = (unsigned)*idx, last;

	if (*idx < 0)
		return;
	last = arr[--*n];
	arr[i] = last;
	vis[i] = vis[*n];
	if (sealed)
		W.nd[last].sreg = (int)i;
	else
		W.nd[last].preg = (int)i;
	*idx = -1;
}

/* ---- flows: each server's bandwidth shared equally by its flows ---- */

static void flow_settle(struct flow *f, double now)
{
	f->rem -= f->rate * (now - f->last);
	if (f->rem < 0)
		f->rem = 0;
	f->last = now;
}

static double flow_rate(const struct flow *f)
{
	const struct node *s = &W.nd[f->server];
	double r = s->stalled ? 0 : (double)O.bw / s->up.n;

	if (O.rx) {
		double rx = (double)O.bw / W.nd[f->reader].down.n;

		if (rx < r)
			r = rx;
	}
	return r;
}

/* Schedule @s's next flow completion. */
static void server_resched(unsigned s, double now)
{
	struct node *p = &W.nd[s];
	double best = INFINITY;
	unsigned i;

	p->ev_ver++;
	for (i = 0; i < p->up.n; i++) {
		const struct flow *f = &W.fl[p->up.v[i]];
		double end;

		if (f->rate <= 0)
			continue;
		end = f->last + f->rem / f->rate;
		if (end < best)
			best = end;
	}
	if (best < INFINITY)
		push(best < now ? now : best, EV_SERVER, s, 0, 0, 0, p->ev_ver);
}

/* The flows of server @s changed: new rates, and so do, with --rx, the
 * flows of reader @r (if not -1u). */
static void rerate(unsigned s, unsigned r, double now)
{
	struct node *p;
	unsigned i;

	if (s != -1u) {
		p = &W.nd[s];
		for (i = 0; i < p->up.n; i++) {
			struct flow *f = &W.fl[p->up.v[i]];

			flow_settle(f, now);
			f->rate = flow_rate(f);
		}
		server_resched(s, now);
	}
	if (O.rx && r != -1u) {
		p = &W.nd[r];
		for (i = 0; i < p->down.n; i++) {
			struct flow *f = &W.fl[p->down.v[i]];

			flow_settle(f, now);
			f->rate = flow_rate(f);
			if (f->server != s)
				server_resched(f->server, now);
		}
	}
}

static unsigned flow_new(unsigned s, unsigned r, unsigned b, unsigned srci, double now)
{
	unsigned id;
	struct flow *f;

	if (W.nflfree) {
		id = W.flfree[--W.nflfree];
	} else {
		if (W.nfl == W.flcap) {
			W.flcap = W.flcap ? 2 * W.flcap : 1024;
			W.fl = realloc(W.fl, W.flcap * sizeof(*W.fl));
			W.flfree = realloc(W.flfree, W.flcap * sizeof(*W.flfree));
			if (!W.fl || !W.flfree) {
				perror("realloc");
				exit(1);
			}
		}
		id = W.nfl++;
	}
	f = &W.fl[id];
	*f = (struct flow){.server = s,
			   .reader = r,
			   .block = b,
			   .srci = srci,
			   .last = now,
			   .start = now,
			   .gen = ++W.flgen,
			   .live = true};
	f->rem = (double)block_len(b);
	ids_add(&W.nd[s].up, id);
	ids_add(&W.nd[r].down, id);
	W.nd[r].ks[srci].ours++;
	W.nd[s].hver++;
	W.nd[r].hver++;
	rerate(s, r, now);
	if (W.nd[s].stalled)
		push(now + O.io_timeout_ms / 1000, EV_TIMEOUT, id, 0, 0, 0, f->gen);
	return id;
}

/* Take flow @id off its server and reader (bytes sent so far counted). */
static void on_get(unsigned s, unsigned r, unsigned b, unsigned i, bool late, double now);

/* A slot of @s is free: the GETs waiting for one go on. */
static void dequeue(unsigned s, double now)
{
	struct node *sv = &W.nd[s];

	while (sv->nqueue && sv->up.n < O.slots) {
		struct parked q = sv->queue[0];

		memmove(sv->queue, sv->queue + 1, --sv->nqueue * sizeof(*sv->queue));
		sv->hver++;
		on_get(s, q.reader, q.block, q.srci, q.late, now);
	}
}

static void flow_end(unsigned id, double now)
{
	struct flow *f = &W.fl[id];

	flow_settle(f, now);
	W.nd[f->server].served += (double)block_len(f->block) - f->rem;
	ids_del(&W.nd[f->server].up, id);
	ids_del(&W.nd[f->reader].down, id);
	W.nd[f->reader].ks[f->srci].ours--;
	W.nd[f->server].hver++;
	W.nd[f->reader].hver++;
	f->live = false;
	W.flfree[W.nflfree++] = id;
	rerate(f->server, f->reader, now);
	if (W.nd[f->server].alive)
		dequeue(f->server, now);
}

/* In how long the first flow of @s should end (a busy answer's hint). */
static double free_in(unsigned s, double now)
{
	const struct node *p = &W.nd[s];
	double best = INFINITY;
	unsigned j;

	for (j = 0; j < p->up.n; j++) {
		const struct flow *f = &W.fl[p->up.v[j]];
		double end =
		    f->rate > 0 ? f->last + f->rem / f->rate - now : O.io_timeout_ms / 1000;

		if (end < best)
			best = end;
	}
	return best < INFINITY ? best : 0;
}

/* ---- what readers learn ---- */

/* Reader @r learns the state of its source @i (a HAVE). */
static void snapshot(unsigned r, unsigned i, double now)
{
	struct node *p = &W.nd[r];
	struct known *k = &p->ks[i];
	struct fanpick_src *fs = &p->fs[i];
	struct node *s = &W.nd[k->node];
	unsigned j;

	if (!s->alive) {
		fs->avoid_until = FANPICK_NEVER;
		return;
	}
	k->told = now;
	if (k->hver == s->hver)
		return;
	k->hver = s->hver;
	fs->load = s->up.n + s->nqueue - k->ours;
	if (as_full(k->node)) {
		fs->full = true;
		fs->have = NULL;
		memcpy(k->fetching, s->sent, W.nwords * sizeof(uint64_t));
		fs->fetching = O.hide_given ? NULL : k->fetching;
		return;
	}
	/* without --sealed-full, a partial holder that sealed meanwhile
	 * stays a partial source with every block: rule 3 keeps guarding
	 * the full holders only */
	fanpick_copy_have(s->fp, k->have);
	/* what it fetches: the blocks whose bytes flow in (not those asked
	 * for and refused, or parked): what a GET may wait for there */
	memset(k->fetching, 0, W.nwords * sizeof(uint64_t));
	for (j = 0; j < s->down.n; j++) {
		unsigned b = W.fl[s->down.v[j]].block;

		k->fetching[b / 64] |= 1ull << (b % 64);
	}
	fs->have = k->have;
	fs->fetching = k->fetching;
}

/* Add node @n to what @r knows (a locate's answer). */
static int learn(unsigned r, unsigned n, bool query, double now)
{
	struct node *p = &W.nd[r];
	struct known *k;
	unsigned i;

	for (i = 0; i < p->nks; i++)
		if (p->ksnode[i] == n)
			return (int)i;
	if (p->nks == FANPICK_SRC_MAX) {
		/* room only in place of a source known dead with nothing
		 * in flight */
		for (i = 0; i < p->nks; i++)
			if (p->fs[i].avoid_until == FANPICK_NEVER && !p->fs[i].inflight &&
			    !p->ks[i].polling)
				break;
		if (i == p->nks)
			return -1;
	} else {
		i = p->nks++;
	}
	k = &p->ks[i];
	k->node = p->ksnode[i] = n;
	k->ours = 0;
	k->met = false;
	k->hver = 0;
	k->backoff_ms = O.busy_ms;
	k->polling = false;
	k->told = k->asked = -INFINITY;
	p->fs[i] = (struct fanpick_src){.full = W.nd[n].sealed};
	if (!p->fs[i].full && query) {
		/* ask it what it has */
		k->polling = true;
		k->asked = now;
		p->haves++;
		push(now + O.rtt_ms / 1000, EV_HAVE, r, 0, 0, i, 0);
	}
	return (int)i;
}

/* @r heard that node @n has or fetches block @b (a hint in a refusal). */
static void hinted(unsigned r, unsigned n, unsigned b, double now)
{
	struct node *p = &W.nd[r];
	int i;

	if (n == r || holder(n))
		return;
	i = learn(r, n, false, now);
	if (i < 0 || p->fs[i].full)
		return;
	if (!p->fs[i].have) {
		memset(p->ks[i].have, 0, 2 * W.nwords * sizeof(uint64_t));
		p->fs[i].have = p->ks[i].have;
		p->fs[i].fetching = p->ks[i].fetching;
	}
	if (!((p->ks[i].have[b / 64] >> (b % 64)) & 1))
		p->ks[i].fetching[b / 64] |= 1ull << (b % 64);
	p->ks[i].hver = 0; /* the next HAVE replaces what the hint added */
}

/*
 * Reader @r asked @s something (a HAVE query or a GET, which say that @r
 * fetches the object too): if @s is fetching it, @r becomes one of its
 * sources.  Without this, knowledge follows the order of the locates
 * only: the first fetcher would never hear of the later ones.
 */
static void met(unsigned r, unsigned i, double now)
{
	struct known *k = &W.nd[r].ks[i];
	struct node *p = &W.nd[k->node];

	if (O.no_discover || k->met)
		return;
	if (p->sealed)
		k->met = true; /* it fetches nothing, now or later */
	else if (p->alive && p->started)
		k->met = learn(k->node, r, true, now) >= 0;
}

static void locate(unsigned r, double now)
{
	struct node *p = &W.nd[r];
	double exec = now + O.rtt_ms / 2000;

	if (p->locate_pending)
		return;
	p->locate_pending = true;
	p->locates++;
	p->last_locate = now;
	if (exec < W.redis_free)
		exec = W.redis_free;
	W.redis_free = exec + O.redis_us / 1e6;
	push(exec, EV_LOCATE_EXEC, r, 0, 0, 0, 0);
}

/* Draw up to @k entries of a registry that are visible at @now. */
static void sample(unsigned r, const unsigned *arr, const double *vis, unsigned n, unsigned k,
		   double now)
{
	struct node *p = &W.nd[r];
	unsigned tries, got = 0, j;

	for (tries = 0; tries < 8 * k + 16 && got < k && n; tries++) {
		unsigned x = rnd_below(n), m = arr[x];

		if (vis[x] > now || m == r || p->npend == 64)
			continue;
		for (j = 0; j < p->npend; j++)
			if (p->pend[j] == m)
				break;
		if (j < p->npend)
			continue;
		p->pend[p->npend++] = m;
		got++;
	}
}

/* ---- a reader's fetch ---- */

static void try_start(unsigned r, double now);

static void schedule_try(unsigned r, double at)
{
	struct node *p = &W.nd[r];

	if (p->try_at <= at)
		return;
	p->try_at = at;
	push(at, EV_TRY, r, 0, 0, 0, 0);
}

static void finish(unsigned r, double now)
{
	struct node *p = &W.nd[r];

	p->sealed = true;
	p->done = now;
	p->hver++;
	reg_del(W.preg, W.preg_vis, &W.npreg, r, false);
	reg_add(W.sreg, W.sreg_vis, &W.nsreg, &p->sreg, r, now + O.adv_ms / 1000);
	W.readers_left--;
}

static void try_start(unsigned r, double now)
{
	struct node *p = &W.nd[r];
	struct fanpick_choice ch = {.what = FANPICK_NONE};

	if (!p->alive || p->sealed || !p->started)
		return;
	if (O.cat) {
		while (p->cat_pos < W.nblocks &&
		       fanpick_state(p->fp, p->cat_pos) == FANPICK_VERIFIED)
			fanpick_want(p->fp, p->cat_pos++, false);
		if (p->cat_pos < W.nblocks)
			fanpick_want(p->fp, p->cat_pos, true);
	}
	while (p->inflight < O.streams) {
		if (fanpick_next(p->fp, p->fs, p->nks, &W.tune, ms(now), rnd, NULL, &ch)) {
			fprintf(stderr, "fanpick_next failed\n");
			exit(1);
		}
		if (ch.what != FANPICK_FETCH)
			break;
		p->inflight++;
		push(now + O.rtt_ms / 2000, EV_GET, p->ks[ch.src].node, r, ch.block, ch.src,
		     ch.late);
	}
	if (p->inflight)
		p->idle_since = -1;
	else if (p->idle_since < 0)
		p->idle_since = now;
	if (ch.what == FANPICK_FETCH)
		return;
	if (ch.what == FANPICK_WAIT && ch.until != FANPICK_NEVER)
		schedule_try(r, ((double)ch.until + 0.5) / 1000);
	if (!p->poll_pending && !p->inflight && !O.poll_all) {
		p->poll_pending = true;
		push(now + O.poll_ms / 1000, EV_POLL, r, 0, 0, 0, 0);
	}
	if (p->idle_since >= 0 && now - p->idle_since >= O.starve_ms / 1000 &&
	    now - p->last_locate >= O.starve_ms / 1000)
		locate(r, now);
}

/* ---- events ---- */

static void on_locate_exec(unsigned r, double now)
{
	struct node *p = &W.nd[r];

	if (p->preg < 0 && !p->sealed)
		reg_add(W.preg, W.preg_vis, &W.npreg, &p->preg, r, now + O.adv_ms / 1000);
	for (p->npend = 0; p->npend < W.nholders; p->npend++)
		p->pend[p->npend] = p->npend;
	sample(r, W.sreg, W.sreg_vis, W.nsreg, O.full_sample, now);
	sample(r, W.preg, W.preg_vis, W.npreg, O.sample, now);
	push(now + O.rtt_ms / 2000, EV_LOCATE_REPLY, r, 0, 0, 0, 0);
}

static void on_locate_reply(unsigned r, double now)
{
	struct node *p = &W.nd[r];
	unsigned i;

	p->locate_pending = false;
	if (!p->alive)
		return;
	for (i = 0; i < p->npend; i++)
		if (W.nd[p->pend[i]].alive)
			learn(r, p->pend[i], true, now);
	if (O.poll_all && !p->started)
		push(now + O.poll_ms / 1000, EV_POLL, r, 0, 0, 0, 0);
	p->started = true;
	if (O.relocate_first_ms > 0) {
		/* the daemon's renewal: from the end of the last locate, the
		 * gap doubling up to --relocate */
		p->renew_ms = !p->renew_ms ? O.relocate_first_ms : 2 * p->renew_ms;
		if (p->renew_ms > O.relocate_ms)
			p->renew_ms = O.relocate_ms;
		push(now + p->renew_ms / 1000, EV_RELOCATE, r, 0, 0, 0, ++p->renew_ver);
	}
	try_start(r, now);
}

/* With --fill, may @s take one more GET beyond --slots, its flows not
 * using its bandwidth (their readers' intake is the limit)? */
static bool underused(unsigned s)
{
	const struct node *p = &W.nd[s];
	double sum = 0;
	unsigned j;

	if (!O.fill || p->stalled || p->up.n >= 4 * O.slots)
		return false;
	for (j = 0; j < p->up.n; j++)
		sum += W.fl[p->up.v[j]].rate;
	return sum < 0.9 * (double)O.bw;
}

/* Is @s receiving block @b (a flow to it)? */
static bool receiving(unsigned s, unsigned b)
{
	const struct node *p = &W.nd[s];
	unsigned j;

	for (j = 0; j < p->down.n; j++)
		if (W.fl[p->down.v[j]].block == b)
			return true;
	return false;
}

static void on_get(unsigned s, unsigned r, unsigned b, unsigned i, bool late, double now)
{
	struct node *sv = &W.nd[s];
	struct node *rd = &W.nd[r];
	enum fanpick_state st = holder(s) ? FANPICK_VERIFIED : fanpick_state(sv->fp, b);
	unsigned k;

	if (!rd->alive)
		return;
	if (!sv->alive) {
		push(now + O.rtt_ms / 2000, EV_FAIL, r, 0, b, i, 0);
		return;
	}
	met(r, i, now);
	if (st == FANPICK_RUNNING && O.park && receiving(s, b)) {
		/* it comes: answer once it is verified here.  Only while its
		 * bytes flow in, never while its own request waits somewhere:
		 * two fetchers could otherwise wait for each other */
		if (sv->nparked == sv->parkcap) {
			sv->parkcap = sv->parkcap ? 2 * sv->parkcap : 16;
			sv->parked = realloc(sv->parked, sv->parkcap * sizeof(*sv->parked));
			if (!sv->parked) {
				perror("realloc");
				exit(1);
			}
		}
		sv->parked[sv->nparked++] = (struct parked){r, b, i, late};
		return;
	}
	if (st != FANPICK_VERIFIED) {
		push(now + O.rtt_ms / 2000, EV_BUSY, r, REF_NOT_YET, b, i, 0);
		return;
	}
	if (as_full(s) && !late && !O.no_sent && !O.hide_given &&
	    ((sv->sent[b / 64] >> (b % 64)) & 1)) {
		/* given out already: "get it from the fetchers" */
		push(now + O.rtt_ms / 2000, EV_BUSY, r, REF_GIVEN, b, i, 0);
		return;
	}
	if (O.slots && sv->up.n >= O.slots && !underused(s)) {
		if (sv->nqueue < O.queue) {
			sv->queue[sv->nqueue++] = (struct parked){r, b, i, late};
			sv->hver++;
			return;
		}
		push(now + O.rtt_ms / 2000, EV_BUSY, r, REF_BUSY, b, i, 0);
		return;
	}
	if (as_full(s)) {
		sv->sent[b / 64] |= 1ull << (b % 64);
		sv->hver++;
	}
	if (O.hints) {
		unsigned *rc = &sv->rcpt[(size_t)b * O.hints];

		for (k = O.hints - 1; k > 0; k--)
			rc[k] = rc[k - 1];
		rc[0] = r;
	}
	/* the HAVE that comes before the DATA */
	snapshot(r, i, now);
	flow_new(s, r, b, i, now);
}

/* Node @s has block @b now, or no longer fetches it (@ok false): the GETs
 * that waited for it there go on. */
static void unpark(unsigned s, unsigned b, bool ok, double now)
{
	struct node *sv = &W.nd[s];
	unsigned j = 0;

	while (j < sv->nparked) {
		struct parked q = sv->parked[j];

		if (q.block != b) {
			j++;
			continue;
		}
		sv->parked[j] = sv->parked[--sv->nparked];
		if (!ok)
			push(now + O.rtt_ms / 2000, sv->alive ? EV_BUSY : EV_FAIL, q.reader,
			     REF_NOT_YET, b, q.srci, 0);
		else
			on_get(s, q.reader, b, q.srci, q.late, now);
	}
}

/* Reader @r's request for block @b from its source @i ended. */
static void request_end(unsigned r, unsigned i, unsigned b, bool ok, double now)
{
	struct node *p = &W.nd[r];
	int e;

	p->inflight--;
	p->hver++;
	e = ok ? fanpick_done(p->fp, p->fs, p->nks, b, i)
	       : fanpick_fail(p->fp, p->fs, p->nks, b, i);
	if (e) {
		fprintf(stderr, "fanpick_%s: %d\n", ok ? "done" : "fail", e);
		exit(1);
	}
	unpark(r, b, ok, now);
}

static void on_server(unsigned s, uint64_t ver, double now)
{
	struct node *sv = &W.nd[s];
	unsigned i, done[FANPICK_SRC_MAX * 2], nd = 0;

	if (ver != sv->ev_ver)
		return;
	for (i = 0; i < sv->up.n && nd < FANPICK_SRC_MAX * 2; i++) {
		struct flow *f = &W.fl[sv->up.v[i]];

		flow_settle(f, now);
		if (f->rem <= 1.0)
			done[nd++] = sv->up.v[i];
	}
	if (!nd) {
		server_resched(s, now);
		return;
	}
	for (i = 0; i < nd; i++) {
		struct flow *f = &W.fl[done[i]];
		unsigned r = f->reader, b = f->block, srci = f->srci;
		struct node *p = &W.nd[r];

		f->rem = 0;
		W.hop_time_sum += now - f->start;
		flow_end(done[i], now);
		p->hop[b] = (uint8_t)(holder(s) ? 1 : sv->hop[b] < 255 ? sv->hop[b] + 1 : 255);
		sv->sent_to[b]++;
		if (holder(s))
			W.origin_last = now;
		p->ks[srci].backoff_ms = O.busy_ms;
		request_end(r, srci, b, true, now);
		if (!fanpick_left(p->fp))
			finish(r, now);
		else
			try_start(r, now);
	}
}

static void on_poll(unsigned r, double now)
{
	struct node *p = &W.nd[r];
	unsigned i;

	p->poll_pending = false;
	if (!p->alive || p->sealed)
		return;
	/* only a reader with nothing in flight asks: the others hear from
	 * their sources with every answer; and not a source that just said
	 * it was busy, with its state */
	for (i = 0; i < p->nks && !p->inflight; i++) {
		struct known *k = &p->ks[i];

		if (p->fs[i].full || p->fs[i].avoid_until == FANPICK_NEVER || k->polling ||
		    p->fs[i].busy_until > ms(now) || now - k->told < O.poll_ms / 2000)
			continue;
		k->polling = true;
		p->haves++;
		push(now + O.rtt_ms / 1000, EV_HAVE, r, 0, 0, i, 0);
	}
	if (!O.relocate_first_ms && now - p->last_locate >= O.relocate_ms / 1000)
		locate(r, now);
	try_start(r, now);
}

/* --poll-all, every --poll ms: the daemon asks every source with none
 * of our requests in flight what it has (busy ones excepted: it would
 * answer so). */
static void on_poll_all(unsigned r, double now)
{
	struct node *p = &W.nd[r];
	bool any = false;
	unsigned i;

	if (!p->alive || p->sealed)
		return;
	for (i = 0; i < p->nks; i++) {
		struct known *k = &p->ks[i];
		const struct fanpick_src *fs = &p->fs[i];

		if (fs->inflight || fs->avoid_until > ms(now) || fs->busy_until > ms(now) ||
		    k->polling || now - k->asked < O.poll_ms / 1000 - 1e-9)
			continue;
		k->polling = k->batched = true;
		k->asked = now;
		p->haves++;
		any = true;
	}
	/* the answers come back together: one event */
	if (any)
		push(now + O.rtt_ms / 1000, EV_HAVE, r, 0, 0, -1u, 0);
	push(now + O.poll_ms / 1000, EV_POLL, r, 0, 0, 0, 0);
}

static void kill_flows(unsigned n, double now)
{
	struct node *p = &W.nd[n];

	while (p->up.n) {
		struct flow *f = &W.fl[p->up.v[0]];
		unsigned r = f->reader, b = f->block, i = f->srci;

		flow_end(p->up.v[0], now);
		push(now + O.rtt_ms / 2000, EV_FAIL, r, 0, b, i, 0);
	}
	while (p->down.n)
		flow_end(p->down.v[0], now);
}

static void on_timeout(unsigned id, uint64_t gen, double now)
{
	struct flow *f = &W.fl[id];
	unsigned r, i, b;

	if (!f->live || f->gen != gen || !W.nd[f->server].stalled)
		return;
	r = f->reader, i = f->srci, b = f->block;
	flow_end(id, now);
	W.nd[r].fs[i].avoid_until = ms(now + O.avoid_ms / 1000);
	request_end(r, i, b, false, now);
	try_start(r, now);
}

static void dispatch(const struct event *e)
{
	double now = e->t;
	struct node *p = &W.nd[e->a];
	unsigned j;

	switch (e->type) {
	case EV_START:
		p->start = now;
		locate(e->a, now);
		break;
	case EV_LOCATE_EXEC:
		on_locate_exec(e->a, now);
		break;
	case EV_LOCATE_REPLY:
		on_locate_reply(e->a, now);
		break;
	case EV_GET:
		on_get(e->a, e->b, e->c, e->d, e->ver != 0, now);
		break;
	case EV_BUSY:
		if (!p->alive)
			break;
		if (e->b == REF_BUSY)
			p->busy++;
		else
			p->refused++;
		request_end(e->a, e->d, e->c, false, now);
		snapshot(e->a, e->d, now);
		if (e->b != REF_NOT_YET) {
			/* the refusal names the nodes it gave the block to */
			const struct node *sv = &W.nd[p->ks[e->d].node];

			for (j = 0; j < O.hints; j++)
				if (sv->rcpt[(size_t)e->c * O.hints + j])
					hinted(e->a, sv->rcpt[(size_t)e->c * O.hints + j], e->c,
					       now);
		}
		if (e->b == REF_BUSY) {
			double wait = p->ks[e->d].backoff_ms / 1000;

			if (O.retry_after) {
				/* the refusal says when its first slot frees */
				wait = free_in(p->ks[e->d].node, now) * (0.9 + 0.2 * rnd_unit());
				if (wait < O.rtt_ms / 1000)
					wait = O.rtt_ms / 1000;
			}
			p->fs[e->d].busy_until = ms(now + wait) + 1;
			p->ks[e->d].backoff_ms *= 2;
			if (p->ks[e->d].backoff_ms > O.io_timeout_ms)
				p->ks[e->d].backoff_ms = O.io_timeout_ms;
		}
		try_start(e->a, now);
		break;
	case EV_FAIL:
		if (!p->alive)
			break;
		request_end(e->a, e->d, e->c, false, now);
		p->fs[e->d].avoid_until = FANPICK_NEVER;
		try_start(e->a, now);
		break;
	case EV_SERVER:
		on_server(e->a, e->ver, now);
		break;
	case EV_TRY:
		if (p->try_at == now)
			p->try_at = INFINITY;
		try_start(e->a, now);
		break;
	case EV_POLL:
		if (O.poll_all)
			on_poll_all(e->a, now);
		else
			on_poll(e->a, now);
		break;
	case EV_RELOCATE:
		if (p->alive && !p->sealed && e->ver == p->renew_ver)
			locate(e->a, now);
		break;
	case EV_HAVE:
		if (!p->alive)
			break;
		for (j = e->d == -1u ? 0 : e->d; j < p->nks; j++) {
			struct known *k = &p->ks[j];

			if (e->d == -1u && !k->batched)
				continue;
			k->polling = k->batched = false;
			snapshot(e->a, j, now);
			met(e->a, j, now);
			if (e->d != -1u)
				break;
		}
		try_start(e->a, now);
		break;
	case EV_TIMEOUT:
		on_timeout(e->a, e->ver, now);
		break;
	case EV_DIE:
		if (p->sealed || !p->alive)
			break; /* the churn is among fetchers */
		p->alive = false;
		reg_del(W.preg, W.preg_vis, &W.npreg, e->a, false);
		kill_flows(e->a, now);
		while (p->nparked)
			unpark(e->a, p->parked[0].block, false, now);
		for (j = 0; j < p->nqueue; j++)
			push(now + O.rtt_ms / 2000, EV_FAIL, p->queue[j].reader, 0,
			     p->queue[j].block, p->queue[j].srci, 0);
		p->nqueue = 0;
		p->hver++;
		W.readers_left--;
		break;
	case EV_STALL:
		if (p->stalled)
			break;
		p->stalled = true;
		rerate(e->a, -1u, now);
		for (j = 0; j < p->up.n; j++)
			push(now + O.io_timeout_ms / 1000, EV_TIMEOUT, p->up.v[j], 0, 0, 0,
			     W.fl[p->up.v[j]].gen);
		break;
	case EV_UNSTALL:
		p->stalled = false;
		rerate(e->a, -1u, now);
		break;
	}
}

/* ---- one run ---- */

struct result {
	double t_all, t_own, t_med, t_origin, origin, max_served, locates, haves, busy, refused,
	    hop_mean, fan, hop_time;
	unsigned hop_max;
	uint64_t events;
	double wall_ms;
	bool stuck;
};

static void world_free(void)
{
	unsigned i, k;

	for (i = 0; i < W.n; i++) {
		struct node *p = &W.nd[i];

		for (k = 0; p->ks && k < FANPICK_SRC_MAX; k++)
			free(p->ks[k].have);
		free(p->ks);
		free(p->fs);
		free(p->ksnode);
		fanpick_free(p->fp);
		free(p->up.v);
		free(p->down.v);
		free(p->hop);
		free(p->sent_to);
		free(p->sent);
		free(p->rcpt);
		free(p->parked);
		free(p->queue);
	}
	free(W.nd);
	free(W.fl);
	free(W.flfree);
	free(W.preg);
	free(W.preg_vis);
	free(W.sreg);
	free(W.sreg_vis);
	free(heap);
	heap = NULL;
	heap_n = heap_cap = 0;
	memset(&W, 0, sizeof(W));
}

static void world_init(unsigned n)
{
	unsigned i, k, nbad;

	memset(&W, 0, sizeof(W));
	W.n = n;
	W.nholders = O.holders;
	W.bsize = BLOCK_MIN;
	while (O.size / W.bsize >= FANPICK_BLOCKS_MAX)
		W.bsize *= 2;
	W.nblocks = (unsigned)((O.size + W.bsize - 1) / W.bsize);
	W.nwords = FANPICK_WORDS(W.nblocks);
	W.tune = (struct fanpick_tune){.src_cap = O.cap,
				       .defer_ms = (int64_t)O.defer_ms,
				       .given_ms = (int64_t)O.given_ms,
				       .full_bias = O.bias,
				       .park = O.park != 0};
	W.nd = calloc(n, sizeof(*W.nd));
	W.preg = calloc(n, sizeof(unsigned));
	W.preg_vis = calloc(n, sizeof(double));
	W.sreg = calloc(n, sizeof(unsigned));
	W.sreg_vis = calloc(n, sizeof(double));
	if (!W.nd || !W.preg || !W.preg_vis || !W.sreg || !W.sreg_vis)
		goto oom;
	for (i = 0; i < n; i++) {
		struct node *p = &W.nd[i];

		p->alive = true;
		p->hver = 1;
		p->preg = p->sreg = -1;
		p->try_at = INFINITY;
		p->idle_since = -1;
		p->last_locate = -INFINITY;
		p->fp = fanpick_new(W.nblocks);
		p->hop = calloc(W.nblocks, 1);
		p->sent_to = calloc(W.nblocks, sizeof(uint16_t));
		p->sent = calloc(W.nwords, sizeof(uint64_t));
		p->rcpt = calloc((size_t)W.nblocks * (O.hints ? O.hints : 1), sizeof(unsigned));
		p->queue = calloc(O.queue ? O.queue : 1, sizeof(*p->queue));
		p->ks = calloc(FANPICK_SRC_MAX, sizeof(*p->ks));
		p->fs = calloc(FANPICK_SRC_MAX, sizeof(*p->fs));
		p->ksnode = calloc(FANPICK_SRC_MAX, sizeof(*p->ksnode));
		if (!p->fp || !p->hop || !p->sent_to || !p->sent || !p->rcpt || !p->queue ||
		    !p->ks || !p->fs || !p->ksnode)
			goto oom;
		for (k = 0; k < FANPICK_SRC_MAX; k++) {
			p->ks[k].have = calloc(2 * W.nwords, sizeof(uint64_t));
			if (!p->ks[k].have)
				goto oom;
			p->ks[k].fetching = p->ks[k].have + W.nwords;
		}
	}
	for (i = 0; i < W.nholders; i++)
		W.nd[i].sealed = true;
	W.readers_left = n - W.nholders;
	for (i = W.nholders; i < n; i++)
		push(O.stagger_ms > 0 ? rnd_unit() * O.stagger_ms / 1000 : 0, EV_START, i, 0, 0, 0,
		     0);
	/* faults among the readers, at random times within S/BW */
	nbad = (unsigned)(O.churn * W.readers_left + 0.5);
	for (i = 0; i < nbad; i++)
		push(rnd_unit() * (double)O.size / (double)O.bw, EV_DIE,
		     W.nholders + rnd_below(W.readers_left), 0, 0, 0, 0);
	nbad = (unsigned)(O.stall * W.readers_left + 0.5);
	for (i = 0; i < nbad; i++) {
		double at = rnd_unit() * (double)O.size / (double)O.bw;
		unsigned who = W.nholders + rnd_below(W.readers_left);

		push(at, EV_STALL, who, 0, 0, 0, 0);
		push(at + O.stall_ms / 1000, EV_UNSTALL, who, 0, 0, 0, 0);
	}
	return;
oom:
	fprintf(stderr, "out of memory\n");
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* When the median live reader had every block. */
static double median_done(void)
{
	double *d = calloc(W.n, sizeof(double)), med;
	unsigned i, m = 0;

	if (!d)
		return 0;
	for (i = W.nholders; i < W.n; i++)
		if (W.nd[i].alive && W.nd[i].sealed)
			d[m++] = W.nd[i].done;
	qsort(d, m, sizeof(*d), cmp_double);
	med = m ? d[m / 2] : 0;
	free(d);
	return med;
}

static void run(unsigned n, struct result *res)
{
	struct timespec t0, t1;
	double ideal = (double)O.size / (double)O.bw, now = 0, hop_sum = 0;
	uint64_t pairs = 0, sends = 0, cells = 0;
	unsigned i, b, nreaders = n - O.holders;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	rng_state = O.seed * 0x2545f4914f6cdd1dull + n;
	world_init(n);
	nevents = 0;
	while (heap_n && W.readers_left) {
		struct event e = pop();

		now = e.t;
		if (now > 1000 * ideal || nevents > 200000000)
			break;
		nevents++;
		dispatch(&e);
	}
	*res = (struct result){.stuck = W.readers_left != 0, .events = nevents};
	for (i = W.nholders; i < n; i++) {
		struct node *p = &W.nd[i];

		res->locates += p->locates;
		res->haves += p->haves;
		res->busy += p->busy;
		res->refused += p->refused;
		if (!p->alive || !p->sealed)
			continue;
		if (p->done > res->t_all)
			res->t_all = p->done;
		if (p->done - p->start > res->t_own)
			res->t_own = p->done - p->start;
		for (b = 0; b < W.nblocks; b++) {
			hop_sum += p->hop[b];
			cells++;
			if (p->hop[b] > res->hop_max)
				res->hop_max = p->hop[b];
		}
	}
	for (i = 0; i < n; i++) {
		for (b = 0; b < W.nblocks; b++)
			if (W.nd[i].sent_to[b]) {
				pairs++;
				sends += W.nd[i].sent_to[b];
			}
		if (W.nd[i].served > res->max_served)
			res->max_served = W.nd[i].served;
		if (holder(i) && W.nd[i].served > res->origin)
			res->origin = W.nd[i].served;
	}
	res->t_med = median_done() / ideal;
	res->t_origin = W.origin_last / ideal;
	res->t_all /= ideal;
	res->t_own /= ideal;
	res->origin /= (double)O.size;
	res->max_served /= (double)O.size;
	res->locates /= nreaders;
	res->haves /= nreaders;
	res->busy /= nreaders;
	res->refused /= nreaders;
	res->hop_mean = cells ? hop_sum / (double)cells : 0;
	res->fan = pairs ? (double)sends / (double)pairs : 0;
	res->hop_time =
	    sends ? W.hop_time_sum / (double)sends / ((double)W.bsize / (double)O.bw) : 0;
	world_free();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	res->wall_ms =
	    (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
}

int main(int argc, char **argv)
{
	const char *p;
	uint64_t bsize = BLOCK_MIN;

	if (fsim_opts_parse(&O, argc, argv)) {
		fsim_opts_usage(stderr);
		return 2;
	}
	while (O.size / bsize >= FANPICK_BLOCKS_MAX)
		bsize *= 2;
	printf("# B=%.0f MiB blocks=%" PRIu64 " S/BW=%.2f s\n", (double)bsize / MIB,
	       (O.size + bsize - 1) / bsize, (double)O.size / (double)O.bw);
	fsim_opts_print(&O, stdout);
	/* the first columns (time/ideal $2, origin/S $5) are what
	 * bench/run-bench-fanout.sh reads */
	printf("# %6s %9s %6s %6s %8s %8s %6s %7s %7s %7s %7s %9s %5s %7s %9s %7s\n", "N",
	       "time/ideal", "med", "orig_t", "origin/S", "maxsrv/S", "own", "locates", "haves",
	       "busy", "nyet", "hops", "fan", "hop/tau", "events", "wall_ms");
	for (p = O.nodes; *p;) {
		char *end;
		unsigned long n = strtoul(p, &end, 10);
		struct result res;

		if (end == p || n <= O.holders || n > NODES_MAX) {
			fprintf(stderr, "objfs-fanout-sim: bad node count in '%s'\n", O.nodes);
			return 2;
		}
		run((unsigned)n, &res);
		printf("  %6lu %8.2f%s %6.2f %6.2f %8.2f %8.2f %6.2f %7.1f %7.1f %7.1f %7.1f "
		       "%5.1f/%-3u %5.1f %7.2f %9" PRIu64 " %7.0f\n",
		       n, res.t_all, res.stuck ? "!" : " ", res.t_med, res.t_origin, res.origin,
		       res.max_served, res.t_own, res.locates, res.haves, res.busy, res.refused,
		       res.hop_mean, res.hop_max, res.fan, res.hop_time, res.events, res.wall_ms);
		fflush(stdout);
		p = *end == ',' ? end + 1 : end;
	}
	return 0;
}
