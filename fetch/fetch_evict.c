/*
 * fetch_evict: use times of local objects, and eviction.
 *
 * Every open of a local object and every fetch that ends records a use
 * time (fetcher_touch()).  When the store has no room (a fetch reserving
 * pages, a write growing a file), fetcher_evict() gives up sealed objects
 * that nobody uses here, least recently used first, but only those that
 * live on another node too: meta_release_replica() removes this node from
 * the holders in one atomic step only if another live holder remains, so
 * two nodes evicting at once can never drop the last copy.  An object
 * that exists nowhere else stays, and the writer gets ENOSPC.  Nothing is
 * given up unless giving up copies makes the room asked for: an object
 * that cannot fit anyway costs this node none of its replicas.
 *
 * "Nobody uses it" is asked of the layer above (hooks->busy(): open,
 * being written, not yet published), of the fetch table (a copy being
 * fetched, or just sealed and not yet registered) and of the store
 * (store_obj_in_use(): a peer is being sent it, or holds a serving lease
 * on it, fetch_source.c; its pages would not come free until they let
 * go, so giving it up would make no room).  It is asked again
 * after Redis agreed, since an open may have come meanwhile; then the
 * holder entry is put back and the object kept.
 */
#include "fetch_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define LRU_MAX (1u << 20)
#define EVICT_ROUNDS 4 /* see fetcher_evict() */

struct lru {
	uint64_t id;
	int64_t at; /* mono_ns() of the last use */
	UT_hash_handle hh;
};

static struct lru *lru_find_locked(struct fetcher *fr, uint64_t id)
{
	struct lru *e = NULL;

	HASH_FIND(hh, fr->lru, &id, sizeof(id), e);
	return e;
}

void fetch_lru_free_all_locked(struct fetcher *fr)
{
	struct lru *e, *tmp;

	HASH_ITER (hh, fr->lru, e, tmp) {
		HASH_DELETE(hh, fr->lru, e);
		free(e);
	}
}

void fetcher_touch(struct fetcher *fr, uint64_t id)
{
	struct lru *e;

	pthread_mutex_lock(&fr->lock);
	e = lru_find_locked(fr, id);
	if (!e) {
		if (HASH_COUNT(fr->lru) >= LRU_MAX)
			fetch_lru_free_all_locked(fr);
		e = calloc(1, sizeof(*e));
		if (e) {
			e->id = id;
			HASH_ADD(hh, fr->lru, id, sizeof(e->id), e);
			if (!lru_find_locked(fr, id)) { /* the table could not grow */
				free(e);
				e = NULL;
			}
		}
	}
	if (e)
		e->at = mono_ns();
	pthread_mutex_unlock(&fr->lock);
}

static void lru_del_locked(struct fetcher *fr, uint64_t id)
{
	struct lru *e = lru_find_locked(fr, id);

	if (e) {
		HASH_DELETE(hh, fr->lru, e);
		free(e);
	}
}

void fetcher_forget(struct fetcher *fr, uint64_t id)
{
	pthread_mutex_lock(&fr->lock);
	lru_del_locked(fr, id);
	pthread_mutex_unlock(&fr->lock);
}

/* ---- eviction ---- */

struct cand {
	uint64_t id;
	uint64_t size;
	int64_t at;
};

struct cands {
	struct cand *v;
	size_t n, cap;
};

static int collect(struct store_obj *o, void *arg)
{
	struct cands *c = arg;

	if (store_obj_in_use(o))
		return 0; /* its pages would outlive its unlink */
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 256;
		struct cand *v = realloc(c->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n].id = store_obj_id(o);
	c->v[c->n].size = store_obj_size(o);
	c->v[c->n].at = 0;
	c->n++;
	return 0;
}

static int cmp_at(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	return x->at < y->at ? -1 : x->at > y->at ? 1 : 0;
}

static bool busy_above(struct fetcher *fr, uint64_t id)
{
	return fr->hooks.busy && fr->hooks.busy(fr->hooks.ctx, id);
}

/* Would unlinking @id free its pages now?  Not if anyone holds it but
 * the store: a transfer to a peer, a peer's serving lease (fetch_source.c),
 * a reader the busy hook has not heard of yet. */
static bool pinned(struct fetcher *fr, uint64_t id)
{
	struct store_obj *o = store_lookup(fr->store, id);
	bool r = o && store_obj_in_use(o);

	store_obj_unref(o);
	return r;
}

/* May @id be evicted now?  If so, *@ret_at gets its last use.  Takes
 * fr->lock; calls the busy hook and the store without it. */
static bool evictable(struct fetcher *fr, uint64_t id, int64_t *ret_at)
{
	struct lru *e;
	bool ok;

	if (busy_above(fr, id) || pinned(fr, id))
		return false;
	pthread_mutex_lock(&fr->lock);
	ok = !fetch_running_locked(fr, id);
	e = lru_find_locked(fr, id);
	*ret_at = e ? e->at : 0;
	pthread_mutex_unlock(&fr->lock);
	return ok;
}

static uint64_t pages(uint64_t bytes)
{
	return bytes / STORE_PAGE + (bytes % STORE_PAGE != 0);
}

/* Free pages in the store now (used counts deleted objects still mapped,
 * and may pass the capacity). */
static uint64_t free_pages(struct fetcher *fr)
{
	struct store_stats ss;

	store_stats(fr->store, &ss);
	return pages(ss.capacity) > pages(ss.used) ? pages(ss.capacity) - pages(ss.used) : 0;
}

/*
 * Could giving up every candidate make room for @want pages?  A cheap
 * upper bound, before asking Redis anything (some candidates may turn
 * out to be last copies).
 */
static bool may_help(struct fetcher *fr, const struct cand *v, size_t n, uint64_t want)
{
	uint64_t room = free_pages(fr);
	size_t i;

	for (i = 0; i < n && room < want; i++)
		room += pages(v[i].size);
	return room >= want;
}

static void evict_one(struct fetcher *fr, const struct cand *c)
{
	fetcher_forget(fr, c->id);
	(void)store_unlink_id(fr->store, c->id);
	FETCH_COUNT(fr, evictions, 1);
	log_info("evicted object %" PRIu64 " (%" PRIu64 " bytes; other nodes hold it)", c->id,
		 c->size);
}

/*
 * Two steps, so that nothing is given up for nothing.  First Redis
 * agrees, object by object (least recently used first), to drop this
 * node from the holders of copies that another live node holds, until
 * the copies so released would make room.  If they cannot, this node is
 * put back as a holder of each and no copy is dropped.  Then the released
 * copies are dropped, unless one was opened meanwhile (kept, and this
 * node put back as its holder).
 */
static uint64_t evict_round(struct fetcher *fr, uint64_t need)
{
	struct cands c = {0};
	uint64_t room, freed = 0, want = pages(need);
	size_t i, k = 0, nrel = 0;
	int64_t at;
	int r;

	if (store_foreach(fr->store, collect, &c) < 0) {
		free(c.v);
		return 0;
	}
	for (i = 0; i < c.n; i++)
		if (evictable(fr, c.v[i].id, &c.v[i].at))
			c.v[k++] = c.v[i];
	if (!may_help(fr, c.v, k, want)) {
		log_info("not evicting: %" PRIu64 " bytes are wanted, more than the store "
			 "could free",
			 need);
		free(c.v);
		return 0;
	}
	if (k)
		qsort(c.v, k, sizeof(*c.v), cmp_at);
	room = free_pages(fr);
	for (i = 0; i < k && room < want; i++) {
		r = meta_release_replica(fr->meta, c.v[i].id);
		if (r == -ENOENT) {
			/* deleted meanwhile: its copy is garbage anyway */
			(void)store_unlink_id(fr->store, c.v[i].id);
			fetcher_forget(fr, c.v[i].id);
			freed += c.v[i].size;
			room += pages(c.v[i].size);
			continue;
		}
		if (r < 0) {
			log_warn("cannot evict: Redis is unreachable (%s)", strerror(-r));
			break;
		}
		if (r == 0)
			continue;     /* the last copy in the cluster */
		c.v[nrel++] = c.v[i]; /* released (nrel <= i) */
		room += pages(c.v[i].size);
	}
	if (room < want) {
		for (i = 0; i < nrel; i++)
			meta_add_holder(fr->meta, c.v[i].id);
		if (nrel)
			log_info("not evicting: the %zu copies that other nodes also hold would "
				 "not make room for %" PRIu64 " bytes",
				 nrel, need);
		free(c.v);
		return freed;
	}
	for (i = 0; i < nrel; i++) {
		if (!evictable(fr, c.v[i].id, &at)) {
			/* opened meanwhile: keep it, and say so */
			meta_add_holder(fr->meta, c.v[i].id);
			continue;
		}
		evict_one(fr, &c.v[i]);
		freed += c.v[i].size;
	}
	free(c.v);
	return freed;
}

uint64_t fetcher_evict(struct fetcher *fr, uint64_t need)
{
	uint64_t freed = 0, got;
	int round;

	/* a copy that a process still maps (passthrough maps the store's
	 * file, and nobody here sees it) keeps its pages when it is given
	 * up (the store counts them as held): then the room is not there
	 * yet, and more copies must go */
	for (round = 0; round < EVICT_ROUNDS; round++) {
		got = evict_round(fr, need);
		freed += got;
		if (!got || free_pages(fr) >= pages(need))
			break;
	}
	return freed;
}
