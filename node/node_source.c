/*
 * node_source: this node's store as the source the transport serves
 * other nodes from.
 *
 * A GET pins a sealed object with a store reference for as long as its
 * pages are on the wire; objects being written here are not served
 * (-ENOENT), so a peer never reads bytes that are not final.  An object
 * being fetched here with block sums is served in part (its checked
 * blocks only); a sealed one gives each of its blocks out once to
 * fan-out fetches; and every GET takes a lease, keyed by (peer, id), so
 * that a peer gets the rest of an object unlinked here meanwhile.
 * docs/design.md, "Serving from this node", has the rules: partial
 * objects, given out, leases, registrations, eviction, the test hook.
 *
 * Locking: src->lock guards the tables of leases, partial objects and
 * blocks given out.  It is a leaf: no store call that may take a store
 * lock runs under it (references are dropped after it is released).
 */
#include "node_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define LEASES_MAX 4096
#define GIVEN_MAX 256
#define GIVEN_IDLE_NS (10 * 1000000000LL)

/* The blocks of one sealed object given out to fan-out fetches. */
struct given {
	uint64_t id;
	uint64_t size;
	int64_t last_ns; /* util_mono_ns() of its last fan-out GET */
	uint32_t n;	 /* blocks */
	UT_hash_handle hh;
	/* per block, who got it: util_node_name_key() of the peer, 0 if nobody
	 * (that peer asking again is served: it lost the block) */
	uint64_t to[];
};

struct lease_key {
	uint64_t id;
	char peer[OBJFS_NODE_MAX]; /* zero-padded: the key is compared whole */
};

struct lease {
	struct lease_key key;
	struct store_obj *o; /* one lease reference, the lease's own */
	int64_t last_ns;     /* util_mono_ns() at the start or end of the last GET */
	unsigned inflight;   /* GETs being answered under it */
	bool revoked;	     /* taken back: serves no new GET, goes when inflight is 0 */
	UT_hash_handle hh;
};

/* An object being fetched here, served in part. */
struct node_partial {
	uint64_t id;
	struct store_obj *o; /* a reference of its own: the pending object */
	uint64_t size;
	uint8_t shift;	  /* log2 of its block size */
	uint32_t nblocks; /* at most BSUM_BLOCKS_MAX */
	unsigned refs;	  /* the table's, and each pin's; src->lock */
	bool in_table;	  /* src->lock */
	/* bit i: block i checked (have), or being fetched here; set and
	 * read without the lock (a have bit is set only once the block's
	 * bytes are final: release, acquire) */
	_Atomic uint64_t have[BSUM_BLOCKS_MAX / 64];
	_Atomic uint64_t fetching[BSUM_BLOCKS_MAX / 64];
	/* GETs parked here (src_wait()) wait on park_cond for a bit to
	 * change; park_lock is a leaf, held only around the wait and the
	 * broadcast (CLOCK_MONOTONIC) */
	pthread_mutex_t park_lock;
	pthread_cond_t park_cond;
	UT_hash_handle hh;
};

struct node_source {
	struct store *store;
	int64_t lease_ns;
	pthread_mutex_t lock;
	pthread_cond_t ended;	       /* a GET under a lease ended; lock, CLOCK_MONOTONIC */
	struct lease *leases;	       /* lock; uthash by key */
	uint64_t nleases;	       /* lock */
	struct node_partial *partials; /* lock; uthash by id */
	struct given *given;	       /* lock; uthash by id */
	unsigned ngiven;	       /* lock */
	bool test_corrupt;	       /* set before serving; never changes after */
};

/* What a GET holds from open() to close(). */
struct pin {
	struct node_source *src;
	struct store_obj *o;	   /* one reference, the GET's own */
	struct lease *l;	   /* NULL if the table was full; lives while inflight */
	struct node_partial *part; /* an object served in part, or NULL; one reference */
	bool corrupt;		   /* test hook: the next piece's first byte goes out flipped */
	uint8_t bad;		   /* that byte, flipped, while it is on the wire */
	char peer[OBJFS_NODE_MAX]; /* who asked (given out; the test hook's log line) */
};

static void partial_free(struct node_partial *p)
{
	pthread_cond_destroy(&p->park_cond);
	pthread_mutex_destroy(&p->park_lock);
	store_obj_unref(p->o);
	free(p);
}

/* Wake the GETs parked on @p: a bit of it changed. */
static void partial_kick(struct node_partial *p)
{
	pthread_mutex_lock(&p->park_lock);
	pthread_cond_broadcast(&p->park_cond);
	pthread_mutex_unlock(&p->park_lock);
}

/* Drop a reference on @p (NULL is fine); the last frees it.  Takes
 * src->lock. */
static void partial_put(struct node_source *src, struct node_partial *p)
{
	bool last;

	if (!p)
		return;
	pthread_mutex_lock(&src->lock);
	last = --p->refs == 0;
	pthread_mutex_unlock(&src->lock);
	if (last)
		partial_free(p);
}

struct node_partial *node_source_partial_add(struct node_source *src, struct store_obj *o,
					     uint64_t size, unsigned shift)
{
	uint64_t nblocks = size ? ((size - 1) >> shift) + 1 : 0;
	struct node_partial *p, *old, *added;
	pthread_condattr_t ca;

	if (!src || !o || shift >= 64 || nblocks < 2 || nblocks > BSUM_BLOCKS_MAX)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	pthread_mutex_init(&p->park_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->park_cond, &ca);
	pthread_condattr_destroy(&ca);
	p->id = store_obj_id(o);
	p->o = store_obj_ref(o);
	p->size = size;
	p->shift = (uint8_t)shift;
	p->nblocks = (uint32_t)nblocks;
	p->refs = 2; /* the table, the caller */
	p->in_table = true;
	pthread_mutex_lock(&src->lock);
	HASH_FIND(hh, src->partials, &p->id, sizeof(p->id), old);
	if (old) { /* one fetch per id: an old one that did not end */
		HASH_DELETE(hh, src->partials, old);
		old->in_table = false;
	}
	HASH_ADD(hh, src->partials, id, sizeof(p->id), p);
	HASH_FIND(hh, src->partials, &p->id, sizeof(p->id), added);
	pthread_mutex_unlock(&src->lock);
	if (old)
		partial_put(src, old);
	if (!added) { /* the table could not grow */
		partial_free(p);
		return NULL;
	}
	return p;
}

void node_source_partial_have(struct node_partial *p, uint32_t block)
{
	if (p && block < p->nblocks) {
		/* checked, then no longer arriving (release: who sees the
		 * second sees the first, range_state()) */
		atomic_fetch_or_explicit(&p->have[block / 64], 1ull << (block % 64),
					 memory_order_release);
		atomic_fetch_and_explicit(&p->fetching[block / 64], ~(1ull << (block % 64)),
					  memory_order_release);
		partial_kick(p);
	}
}

void node_source_partial_fetching(struct node_partial *p, uint32_t block, bool on)
{
	if (!p || block >= p->nblocks)
		return;
	if (on)
		atomic_fetch_or_explicit(&p->fetching[block / 64], 1ull << (block % 64),
					 memory_order_relaxed);
	else if (atomic_fetch_and_explicit(&p->fetching[block / 64], ~(1ull << (block % 64)),
					   memory_order_relaxed) &
		 (1ull << (block % 64)))
		partial_kick(p);
}

void node_source_partial_end(struct node_source *src, struct node_partial *p)
{
	bool drop = false;

	if (!src || !p)
		return;
	pthread_mutex_lock(&src->lock);
	if (p->in_table) {
		HASH_DELETE(hh, src->partials, p);
		p->in_table = false;
		drop = true;
	}
	pthread_mutex_unlock(&src->lock);
	/* nothing arrives any more: a GET parked here stops waiting */
	for (uint32_t i = 0; i < (p->nblocks + 63) / 64; i++)
		atomic_store_explicit(&p->fetching[i], 0, memory_order_relaxed);
	partial_kick(p);
	if (drop)
		partial_put(src, p); /* the table's */
	partial_put(src, p);	     /* the caller's */
}

static void key_init(struct lease_key *k, const char *peer, uint64_t id)
{
	memset(k, 0, sizeof(*k));
	k->id = id;
	snprintf(k->peer, sizeof(k->peer), "%s", peer ? peer : "");
}

static bool lapsed(const struct node_source *src, const struct lease *l, int64_t now)
{
	return !l->inflight && (l->revoked || now - l->last_ns >= src->lease_ns);
}

/* Take @l out of the table; the caller drops its reference.  lock held. */
static struct store_obj *lease_del_locked(struct node_source *src, struct lease *l)
{
	struct store_obj *o = l->o;

	HASH_DELETE(hh, src->leases, l);
	src->nleases--;
	free(l);
	return o;
}

/*
 * The lease of (@k), made if missing (with a lease reference on @o) and
 * renewed; it holds @o (the object the store has now, if it has one).
 * NULL if the table is full.  *@ret_drop gets a lease reference the
 * caller must drop once the lock is released (a lease that held another
 * object under the same id), or NULL; *@ret_fresh is true if the lease
 * did not hold @o before.  lock held.
 */
static struct lease *lease_take_locked(struct node_source *src, const struct lease_key *k,
				       struct store_obj *o, int64_t now,
				       struct store_obj **ret_drop, bool *ret_fresh)
{
	struct lease *l, *added;

	*ret_drop = NULL;
	*ret_fresh = false;
	HASH_FIND(hh, src->leases, k, sizeof(*k), l);
	if (!l) {
		if (src->nleases >= LEASES_MAX)
			return NULL;
		l = calloc(1, sizeof(*l));
		if (!l)
			return NULL;
		l->key = *k;
		HASH_ADD(hh, src->leases, key, sizeof(l->key), l);
		HASH_FIND(hh, src->leases, k, sizeof(*k), added);
		if (!added) { /* the table could not grow */
			free(l);
			return NULL;
		}
		src->nleases++;
	}
	if (l->o != o) {
		*ret_drop = l->o;
		l->o = store_obj_ref_lease(o);
		l->revoked = false;
		*ret_fresh = true;
	}
	l->last_ns = now;
	l->inflight++;
	return l;
}

/*
 * @l was just given @o, which the store had when this GET began: if the
 * store no longer has it (unlinked meanwhile, by a delete or an
 * eviction that may have revoked the leases before @l held it), @l
 * serves this GET only.
 */
static void lease_check_linked(struct node_source *src, struct lease *l, struct store_obj *o)
{
	struct store_obj *cur = store_lookup(src->store, store_obj_id(o));

	store_obj_unref(cur);
	if (cur == o)
		return;
	pthread_mutex_lock(&src->lock);
	if (l->o == o)
		l->revoked = true;
	pthread_mutex_unlock(&src->lock);
}

static int src_open(void *ctx, const char *peer, uint64_t id, uint64_t *ret_size, void **ret_token)
{
	struct node_source *src = ctx;
	struct store_obj *o, *drop = NULL;
	struct lease_key k;
	struct lease *l;
	struct pin *pin;
	int64_t now = util_mono_ns();
	bool fresh = false;

	pin = calloc(1, sizeof(*pin));
	if (!pin)
		return -ENOMEM;
	key_init(&k, peer, id);
	o = store_lookup(src->store, id);
	if (o && !store_obj_sealed(o)) {
		store_obj_unref(o);
		o = NULL;
		/* being fetched here: served in part, if it has blocks */
		pthread_mutex_lock(&src->lock);
		HASH_FIND(hh, src->partials, &id, sizeof(id), pin->part);
		if (pin->part)
			pin->part->refs++;
		pthread_mutex_unlock(&src->lock);
		if (pin->part) {
			pin->src = src;
			pin->o = store_obj_ref(pin->part->o);
			pin->corrupt = src->test_corrupt;
			snprintf(pin->peer, sizeof(pin->peer), "%s", peer ? peer : "");
			*ret_size = pin->part->size;
			*ret_token = pin;
			return 0;
		}
	}
	pthread_mutex_lock(&src->lock);
	if (o) {
		l = lease_take_locked(src, &k, o, now, &drop, &fresh);
	} else {
		/* unlinked here since this peer's last GET: serve what it began,
		 * unless eviction took the lease back (the peer fails over) */
		HASH_FIND(hh, src->leases, &k, sizeof(k), l);
		if (l && lapsed(src, l, now)) {
			drop = lease_del_locked(src, l);
			l = NULL;
		}
		if (l && !l->revoked) {
			o = store_obj_ref(l->o);
			l->last_ns = now;
			l->inflight++;
		} else {
			l = NULL;
		}
	}
	pthread_mutex_unlock(&src->lock);
	store_obj_unref_lease(drop);
	if (!o) {
		free(pin);
		return -ENOENT;
	}
	/* a peer is fetching it: it may be given up once the peer holds
	 * it.  After the lease is taken: eviction marks a copy the only
	 * one only if no lease of it is there (node_source_leased()) */
	store_set_sole(src->store, id, false);
	if (l && fresh)
		lease_check_linked(src, l, o);
	pin->src = src;
	pin->o = o;
	pin->l = l;
	snprintf(pin->peer, sizeof(pin->peer), "%s", peer ? peer : "");
	*ret_size = store_obj_size(o);
	*ret_token = pin;
	return 0;
}

/* The given-out entry of the object @pin holds (sealed, of at least two
 * blocks), made if @make, started afresh if idle.  NULL if none.
 * src->lock held. */
static struct given *given_find_locked(struct pin *pin, bool make)
{
	struct node_source *src = pin->src;
	uint64_t id = store_obj_id(pin->o), size = store_obj_size(pin->o);
	uint32_t n = bsum_blocks(size);
	int64_t now = util_mono_ns();
	struct given *g, *tmp, *old = NULL;

	HASH_FIND(hh, src->given, &id, sizeof(id), g);
	if (g && g->size != size) {
		/* another object under the id: start afresh */
		HASH_DELETE(hh, src->given, g);
		free(g);
		src->ngiven--;
		g = NULL;
	}
	if (g && now - g->last_ns > GIVEN_IDLE_NS)
		memset(g->to, 0, g->n * sizeof(g->to[0]));
	if (g || !make || n < 2 || n > BSUM_BLOCKS_MAX)
		return g;
	if (src->ngiven >= GIVEN_MAX) {
		HASH_ITER (hh, src->given, g, tmp)
			if (!old || g->last_ns < old->last_ns)
				old = g;
		HASH_DELETE(hh, src->given, old);
		free(old);
		src->ngiven--;
	}
	g = calloc(1, sizeof(*g) + n * sizeof(g->to[0]));
	if (!g)
		return NULL;
	g->id = id;
	g->size = size;
	g->n = n;
	g->last_ns = now;
	HASH_ADD(hh, src->given, id, sizeof(g->id), g);
	src->ngiven++;
	return g;
}

/* What a HAVE of a sealed object says: every byte, and, if it gave
 * blocks out, which.  src->lock held. */
static void given_have_locked(const struct given *g, struct transport_have *ret)
{
	uint32_t n;

	ret->flags = TRANSPORT_HAVE_SEALED;
	ret->nblocks = 0;
	if (!g)
		return;
	n = g->n;
	ret->shift = (uint8_t)bsum_shift(g->size);
	ret->nblocks = n;
	for (uint32_t i = 0; i < n; i++)
		if (g->to[i])
			ret->fetching[i / 8] |= (uint8_t)(1u << (i % 8));
}

/* The blocks of @g that start in [@off, @off + @len), as [*@first,
 * *@end) (a block longer than one GET comes in several, and only the
 * first carries it). */
static void given_blocks(const struct given *g, uint64_t off, uint64_t len, uint64_t *first,
			 uint64_t *end)
{
	unsigned shift = bsum_shift(g->size);
	uint64_t last = (off + len - 1) >> shift;

	*first = ((off >> shift) << shift) == off ? off >> shift : (off >> shift) + 1;
	*end = last + 1 < g->n ? last + 1 : g->n;
	if (*first > *end)
		*first = *end;
}

/* A fan-out GET of [@off, @off + @len) of the pinned object: serve it
 * (1: its blocks are given out now) unless a block of it was given out
 * before (0, with the HAVE that says so in *@ret). */
static int src_give(void *token, uint64_t off, uint64_t len, struct transport_have *ret)
{
	struct pin *pin = token;
	struct node_source *src = pin->src;
	uint64_t first, end, b, me;
	struct given *g;
	int r = 1;

	if (pin->part || !len)
		return 1; /* a partial object serves what it checked, as often as asked */
	/* (a peer that did not name itself counts as one) */
	me = util_node_name_key(pin->peer) ? util_node_name_key(pin->peer) : 1;
	pthread_mutex_lock(&src->lock);
	g = given_find_locked(pin, true);
	if (g) {
		given_blocks(g, off, len, &first, &end);
		for (b = first; b < end; b++)
			if (g->to[b] && g->to[b] != me)
				r = 0;
		if (r) {
			for (b = first; b < end; b++)
				g->to[b] = me;
			/* (a refusal does not count: the table forgets blocks
			 * whose fetcher may have died GIVEN_IDLE_NS after the
			 * last one it gave out) */
			g->last_ns = util_mono_ns();
		} else {
			given_have_locked(g, ret);
		}
	}
	pthread_mutex_unlock(&src->lock);
	return r;
}

/* The GET that @off, @len were given out to did not get them all. */
static void src_ungive(void *token, uint64_t off, uint64_t len)
{
	struct pin *pin = token;
	uint64_t first, end, b,
	    me = util_node_name_key(pin->peer) ? util_node_name_key(pin->peer) : 1;
	struct given *g;

	if (pin->part || !len)
		return;
	pthread_mutex_lock(&pin->src->lock);
	g = given_find_locked(pin, false);
	if (g) {
		given_blocks(g, off, len, &first, &end);
		for (b = first; b < end; b++)
			if (g->to[b] == me)
				g->to[b] = 0;
	}
	pthread_mutex_unlock(&pin->src->lock);
}

/* Is [@off, @off + @len) of the pinned object servable?  A sealed one
 * wholly; one being fetched, if every block of the range checked out. */
static int src_have(void *token, uint64_t off, uint64_t len, struct transport_have *ret)
{
	struct pin *pin = token;
	struct node_partial *p = pin->part;
	uint64_t first, last, i;
	bool all = true;

	if (!p) {
		pthread_mutex_lock(&pin->src->lock);
		given_have_locked(given_find_locked(pin, false), ret);
		pthread_mutex_unlock(&pin->src->lock);
		return 1;
	}
	ret->shift = p->shift;
	ret->nblocks = p->nblocks;
	for (i = 0; i < (p->nblocks + 63) / 64; i++) {
		uint64_t h = atomic_load_explicit(&p->have[i], memory_order_acquire);
		uint64_t f = atomic_load_explicit(&p->fetching[i], memory_order_relaxed);

		for (int b = 0; b < 8; b++) {
			ret->have[i * 8 + b] = (uint8_t)(h >> (8 * b));
			ret->fetching[i * 8 + b] = (uint8_t)(f >> (8 * b));
		}
	}
	if (len == 0 || off >= p->size)
		return 0; /* a query: the bitmaps are the answer */
	first = off >> p->shift;
	last = (off + len - 1 < p->size ? off + len - 1 : p->size - 1) >> p->shift;
	for (i = first; i <= last && all; i++)
		all = (ret->have[i / 8] >> (i % 8)) & 1;
	return all;
}

/* Where [@off, @off + @len) of @p stands: 1 every block checked, 0 a
 * block neither checked nor arriving, 2 else (some arriving). */
static int range_state(struct node_partial *p, uint64_t off, uint64_t len)
{
	uint64_t first = off >> p->shift, last = (off + len - 1) >> p->shift, b;
	int r = 1;

	if (last >= p->nblocks)
		last = p->nblocks - 1;
	for (b = first; b <= last; b++) {
		uint64_t bit = 1ull << (b % 64);
		/* arriving first: a block that stopped arriving because it
		 * checked out shows as checked below */
		uint64_t f = atomic_load_explicit(&p->fetching[b / 64], memory_order_acquire);

		if (atomic_load_explicit(&p->have[b / 64], memory_order_acquire) & bit)
			continue;
		if (!(f & bit))
			return 0;
		r = 2;
	}
	return r;
}

/* Park a GET (transport.h): wait up to @ms for the range to check out
 * while its missing blocks arrive here. */
static int src_wait(void *token, uint64_t off, uint64_t len, unsigned ms)
{
	struct node_partial *p = ((struct pin *)token)->part;
	struct timespec until;
	int r;

	if (!p)
		return 1;
	if (!len || off >= p->size)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&p->park_lock);
	while ((r = range_state(p, off, len)) == 2)
		if (pthread_cond_timedwait(&p->park_cond, &p->park_lock, &until) == ETIMEDOUT) {
			r = range_state(p, off, len);
			break;
		}
	pthread_mutex_unlock(&p->park_lock);
	return r;
}

/*
 * The test hook: the first piece of a range served from a partial
 * object starts with its first byte flipped, out of pin->bad (which
 * lives until src_close(), after the piece is sent), and then points
 * into the object as usual.
 */
static int iov_corrupt(struct pin *pin, uint64_t off, size_t len, struct iovec *iov, int max_iov,
		       size_t *ret_bytes)
{
	struct iovec one;
	size_t got = 0, rest = 0;
	int n = 0;

	if (store_obj_iov(pin->o, off, 1, &one, 1, &got) != 1 || got != 1)
		return -EIO;
	pin->corrupt = false;
	pin->bad = *(const uint8_t *)one.iov_base ^ 0xff;
	iov[0].iov_base = &pin->bad;
	iov[0].iov_len = 1;
	if (len > 1 && max_iov > 1) {
		n = store_obj_iov(pin->o, off + 1, len - 1, iov + 1, max_iov - 1, &rest);
		if (n < 0)
			return n;
	}
	log_warn("test_corrupt_serve: object %" PRIu64 " block %" PRIu64
		 ": flipped the byte at offset %" PRIu64 " sent to '%s'",
		 pin->part->id, off >> pin->part->shift, off, pin->peer);
	*ret_bytes = 1 + rest;
	return 1 + n;
}

static int src_iov(void *token, uint64_t off, size_t len, struct iovec *iov, int max_iov,
		   size_t *ret_bytes)
{
	struct pin *pin = token;

	if (pin->corrupt && len > 0 && max_iov > 0)
		return iov_corrupt(pin, off, len, iov, max_iov, ret_bytes);
	return store_obj_iov(pin->o, off, len, iov, max_iov, ret_bytes);
}

/* The whole object, for a backend that registers it once (RDMA).  The
 * mapping lives as long as the object, past this GET's close(). */
static int src_map(void *token, void **ret_addr, uint64_t *ret_len, int *ret_fd)
{
	struct pin *pin = token;
	struct store_map m;
	int r;

	if (pin->part)
		return -EOPNOTSUPP; /* a registration would grant every byte */
	r = store_obj_map(pin->o, &m);
	if (r < 0)
		return r;
	*ret_addr = m.addr;
	*ret_len = m.len;
	*ret_fd = m.fd; /* the backend closes it, and only maps it */
	return 0;
}

/* That registration hangs on the object itself, not on the GET or the
 * lease: it lives until the store frees the object (store_obj_attach()). */
static int src_attach(void *token, void *reg, void (*drop)(void *reg), void **ret_cur)
{
	struct pin *pin = token;

	return store_obj_attach(pin->o, reg, drop, ret_cur);
}

static void src_close(void *token)
{
	struct pin *pin = token;
	struct node_source *src = pin->src;
	struct store_obj *drop = NULL;
	struct lease *l = pin->l;

	/* first: whoever sees this GET ended sees its reference gone */
	store_obj_unref(pin->o);
	partial_put(src, pin->part);
	if (l) {
		pthread_mutex_lock(&src->lock);
		l->inflight--;
		l->last_ns = util_mono_ns();
		if (!l->inflight && l->revoked)
			drop = lease_del_locked(src, l);
		pthread_cond_broadcast(&src->ended);
		pthread_mutex_unlock(&src->lock);
	}
	/* the pages of an evicted copy go here if this was its last GET */
	store_obj_unref_lease(drop);
	free(pin);
}

struct node_source *node_source_new(struct store *s, unsigned lease_ms)
{
	struct node_source *src = calloc(1, sizeof(*src));
	pthread_condattr_t ca;

	if (!src)
		return NULL;
	src->store = s;
	src->lease_ns = (int64_t)(lease_ms ? lease_ms : NODE_LEASE_MS_DEFAULT) * 1000000;
	pthread_mutex_init(&src->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&src->ended, &ca);
	pthread_condattr_destroy(&ca);
	return src;
}

/*
 * Drop the leases that have lapsed, after taking back those of @id if
 * @revoke (a revoked lease lapses once no GET runs under it; one under
 * a GET goes with its last GET, src_close()).  Returns how many went.
 */
static unsigned sweep(struct node_source *src, bool revoke, uint64_t id)
{
	struct store_obj **objs;
	struct lease *l, *tmp;
	int64_t now = util_mono_ns();
	size_t n = 0, i;

	pthread_mutex_lock(&src->lock);
	/* without it, the next sweep drops what lapsed */
	objs = malloc((src->nleases ? src->nleases : 1) * sizeof(*objs));
	HASH_ITER (hh, src->leases, l, tmp) {
		if (revoke && l->key.id == id)
			l->revoked = true;
		if (objs && lapsed(src, l, now))
			objs[n++] = lease_del_locked(src, l);
	}
	pthread_mutex_unlock(&src->lock);
	/* the last reference of an unlinked object frees its pages */
	for (i = 0; i < n; i++)
		store_obj_unref_lease(objs[i]);
	free(objs);
	return (unsigned)n;
}

unsigned node_source_expire(struct node_source *src)
{
	return src ? sweep(src, false, 0) : 0;
}

void node_source_revoke(struct node_source *src, uint64_t id)
{
	if (src)
		sweep(src, true, id);
}

/* Is a GET of @id in flight under a lease?  lock held. */
static bool sending_locked(struct node_source *src, uint64_t id)
{
	struct lease *l, *tmp;

	HASH_ITER (hh, src->leases, l, tmp) {
		if (l->key.id == id && l->inflight)
			return true;
	}
	return false;
}

bool node_source_sending(struct node_source *src, uint64_t id)
{
	bool r;

	if (!src)
		return false;
	pthread_mutex_lock(&src->lock);
	r = sending_locked(src, id);
	pthread_mutex_unlock(&src->lock);
	return r;
}

bool node_source_leased(struct node_source *src, uint64_t id)
{
	int64_t now = util_mono_ns();
	struct lease *l, *tmp;
	bool r = false;

	if (!src)
		return false;
	pthread_mutex_lock(&src->lock);
	HASH_ITER (hh, src->leases, l, tmp) {
		if (l->key.id == id && !l->revoked && !lapsed(src, l, now)) {
			r = true;
			break;
		}
	}
	pthread_mutex_unlock(&src->lock);
	return r;
}

int node_source_wait(struct node_source *src, uint64_t id, int64_t deadline_ns)
{
	struct timespec until = {
	    .tv_sec = deadline_ns / 1000000000,
	    .tv_nsec = deadline_ns % 1000000000,
	};
	int r = 0;

	if (!src)
		return 0;
	pthread_mutex_lock(&src->lock);
	while (sending_locked(src, id)) {
		if (pthread_cond_timedwait(&src->ended, &src->lock, &until) == ETIMEDOUT &&
		    sending_locked(src, id)) {
			r = -ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&src->lock);
	return r;
}

unsigned node_source_leases(struct node_source *src)
{
	unsigned n;

	if (!src)
		return 0;
	pthread_mutex_lock(&src->lock);
	n = (unsigned)src->nleases;
	pthread_mutex_unlock(&src->lock);
	return n;
}

void node_source_free(struct node_source *src)
{
	struct lease *l, *tmp;

	if (!src)
		return;
	/* nothing serves from it any more: no lock needed */
	HASH_ITER (hh, src->leases, l, tmp)
		store_obj_unref_lease(lease_del_locked(src, l));
	{
		struct node_partial *p, *ptmp;

		/* fetches left them (node_fetch_drop_all() ends them first) */
		HASH_ITER (hh, src->partials, p, ptmp) {
			HASH_DELETE(hh, src->partials, p);
			p->in_table = false;
			partial_put(src, p);
		}
	}
	{
		struct given *g, *gtmp;

		HASH_ITER (hh, src->given, g, gtmp) {
			HASH_DELETE(hh, src->given, g);
			free(g);
		}
	}
	pthread_cond_destroy(&src->ended);
	pthread_mutex_destroy(&src->lock);
	free(src);
}

void node_source_test_corrupt(struct node_source *src)
{
	if (src)
		src->test_corrupt = true;
}

void node_source_init(struct transport_source *ret, struct node_source *src)
{
	ret->open = src_open;
	ret->iov = src_iov;
	ret->close = src_close;
	ret->have = src_have;
	ret->wait = src_wait;
	ret->give = src_give;
	ret->ungive = src_ungive;
	ret->map = src_map;
	ret->attach = src_attach;
	ret->ctx = src;
}
