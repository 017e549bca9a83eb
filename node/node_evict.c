/*
 * node_evict: use order of local objects, and eviction.
 *
 * Every open of a local object and every fetch that ends moves it to the
 * hot end of the store's use order (node_touch(), store_touch()).  When
 * the store has no room, node_evict() walks that order from the cold
 * end and gives up sealed copies that nobody uses here and that live on
 * another node too (meta_release_replica(): one atomic step, so that two
 * nodes evicting at once never drop the last copy), and only if that
 * makes the room asked for.  docs/design.md, "Eviction", has the rules:
 * what "nobody uses it" means, packed copies by the page, copies being
 * sent to a peer, and what is logged when no room can be made.
 */
#include "node_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define EVICT_ROUNDS 4		   /* see node_evict() */
#define EVICT_BATCH 64		   /* objects looked at per walk step */
#define EVICT_MEMO_NS 1000000000LL /* a round that found no room stands this long */
/* the only copies known as such are asked about again this often, at
 * most, when no room can be made */
#define SOLE_RECHECK_NS (60 * 1000000000LL)
/* and at most this many of them at a time (each may cost a Redis call):
 * the longest known first, so that all of them come round in turn */
#define SOLE_RECHECK_MAX 1024

void node_touch(struct node *nd, uint64_t id)
{
	store_touch(nd->store, id);
	atomic_fetch_add_explicit(&nd->use_gen, 1, memory_order_relaxed);
}

/* ---- eviction ---- */

/* Why a copy stays, as the log says it when no room can be made. */
enum keep {
	KEEP_NOT,      /* it may go */
	KEEP_SENDING,  /* it may go, but a GET of it is being answered */
	KEEP_OPEN,     /* in use above: open, being written, not yet published */
	KEEP_FETCHING, /* being fetched here, or fetched and not yet registered */
	KEEP_HELD,     /* referenced here otherwise: its pages would stay */
	KEEP_LAST,     /* the only copy in the cluster (Redis said so) */
	KEEP_N,
};

static const char *const keep_what[KEEP_N][2] = {
    [KEEP_SENDING] = {"is being sent to a peer", "are being sent to peers"},
    [KEEP_OPEN] = {"is open here", "are open here"},
    [KEEP_FETCHING] = {"is being fetched here", "are being fetched here"},
    [KEEP_HELD] = {"is in use here", "are in use here"},
    [KEEP_LAST] = {"is the only copy in the cluster", "are the only copies in the cluster"},
};

/*
 * A page of the store's chunks that copies found by a round share with
 * other slots (store_obj_pages()): it comes free only with every used
 * slot on it.
 */
struct page {
	uint64_t key;
	uint32_t used;	 /* used slots on it (the most a look saw) */
	uint32_t found;	 /* copies found on it that may go */
	uint32_t agreed; /* of those, released by Redis */
	bool complete;	 /* found reached used: it counts in round.ready_pages */
	bool counted;	 /* agreed reached used: it counts in round.room */
	bool broken;	 /* a copy on it stays: so does the page */
	/* at the end (settle()): released copies on it that go, and the
	 * used slots on it now */
	uint32_t going, now;
	size_t *mem; /* the copies found on it (indexes in round.all) */
	size_t n, cap;
	UT_hash_handle hh;
};

/* A copy a round found that may go. */
struct cand {
	uint64_t id, size;
	uint64_t own;	    /* pages that come free with it alone */
	struct page *pg[2]; /* pages it shares with other slots, or NULL */
	bool sending;	    /* a GET of it was being answered */
	bool queued;	    /* on round.ready */
	bool released;	    /* Redis agreed: on round.rel */
	bool kept;	    /* released, but opened meanwhile: it stays */
};

struct cands {
	struct cand *v;
	size_t n, cap;
};

/* Indexes in round.all. */
struct idxs {
	size_t *v;
	size_t n, cap;
};

/* The copies kept for one reason: how many, their bytes, one to name. */
struct kept {
	uint64_t n, bytes, id;
};

static int grow(void **v, size_t *cap, size_t n, size_t each)
{
	size_t c = *cap ? *cap * 2 : 16;
	void *p;

	if (n < *cap)
		return 0;
	p = realloc(*v, c * each);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = c;
	return 0;
}

static int idxs_add(struct idxs *l, size_t i)
{
	if (grow((void **)&l->v, &l->cap, l->n, sizeof(*l->v)) < 0)
		return -ENOMEM;
	l->v[l->n++] = i;
	return 0;
}

/* Ids a round looked at already (its walk may begin again). */
struct seen {
	uint64_t id;
	UT_hash_handle hh;
};

/* Was @id seen already?  Marks it seen. */
static bool seen_before(struct seen **set, uint64_t id)
{
	struct seen *e;

	HASH_FIND(hh, *set, &id, sizeof(id), e);
	if (e)
		return true;
	e = malloc(sizeof(*e));
	if (!e)
		return false; /* looked at twice at worst */
	e->id = id;
	HASH_ADD(hh, *set, id, sizeof(e->id), e);
	if (!e->hh.tbl)
		free(e);
	return false;
}

static void seen_free(struct seen **set)
{
	struct seen *e, *tmp;

	HASH_ITER (hh, *set, e, tmp) {
		HASH_DELETE(hh, *set, e);
		free(e);
	}
}

/* In use above (the busy hook: open, being written), or sealed here and
 * not yet published (Redis does not know it yet)? */
static bool busy_above(struct node *nd, uint64_t id)
{
	bool publishing;

	pthread_mutex_lock(&nd->pub_lock);
	publishing = node_publishing_locked(nd, id);
	pthread_mutex_unlock(&nd->pub_lock);
	return publishing || (nd->hooks.busy && nd->hooks.busy(nd->hooks.ctx, id));
}

/*
 * May @id be evicted now (KEEP_NOT, or KEEP_SENDING: the GETs in flight
 * keep its pages until they end), and if not, why?  Unlinking a copy frees its pages only if nobody
 * but the store holds it: a peer's serving lease does not count (eviction takes it back), a GET
 * being answered or a reader the busy hook has not heard of yet does.  Takes nd->lock; calls the
 * busy hook, the store and the source without it.
 */
static enum keep keep_why(struct node *nd, uint64_t id)
{
	struct store_obj *o;
	bool fetching, held;

	pthread_mutex_lock(&nd->lock);
	fetching = fetch_running_locked(nd, id);
	pthread_mutex_unlock(&nd->lock);
	if (busy_above(nd, id))
		return KEEP_OPEN;
	if (fetching)
		return KEEP_FETCHING;
	o = store_lookup(nd->store, id);
	held = o && store_obj_in_use(o);
	store_obj_unref(o);
	if (!held)
		return KEEP_NOT;
	return node_source_sending(nd->source, id) ? KEEP_SENDING : KEEP_HELD;
}

static bool may_go(enum keep why)
{
	return why == KEEP_NOT || why == KEEP_SENDING;
}

static void kept_add(struct kept *k, uint64_t id, uint64_t size)
{
	if (!k->n)
		k->id = id;
	k->n++;
	k->bytes += size;
}

static uint64_t pages(uint64_t bytes)
{
	return bytes / STORE_PAGE + (bytes % STORE_PAGE != 0);
}

/* Free pages in the store now (used counts deleted objects still mapped,
 * and may pass the capacity). */
static uint64_t free_pages(struct node *nd)
{
	struct store_stats ss;

	store_stats(nd->store, &ss);
	return pages(ss.capacity) > pages(ss.used) ? pages(ss.capacity) - pages(ss.used) : 0;
}

/* Append to @buf (@len bytes, NUL-terminated, truncated if need be). */
static void __attribute__((format(printf, 3, 4))) addf(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strlen(buf);
	va_list ap;

	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

/* "object ID '/path' (N bytes)", the path if the catalog has one. */
static void add_obj(struct node *nd, char *buf, size_t len, uint64_t id, bool size)
{
	struct store_obj *o = store_lookup(nd->store, id);
	char path[OBJFS_PATH_MAX] = "";

	if (o)
		store_obj_path(o, path, sizeof(path));
	addf(buf, len, "object %" PRIu64, id);
	if (path[0])
		addf(buf, len, " '%s'", path);
	if (o && size)
		addf(buf, len, " (%" PRIu64 " bytes)", store_obj_size(o));
	store_obj_unref(o);
}

/*
 * Say why @need bytes cannot be made free: what stays, and why (@k),
 * @spare bytes of copies that could go but would not make room, what
 * deleted objects still hold, and @also (may be NULL).
 */
static void say_no_room(struct node *nd, uint64_t need, const struct kept *k, uint64_t spare,
			const char *also)
{
	static struct log_ratelimit rl = LOG_RATELIMIT_INIT("eviction: no room", 10000, 10);
	char msg[2048] = "";
	struct kept k2[KEEP_N];
	struct store_stats ss;
	int why;

	store_stats(nd->store, &ss);
	/* the only copies known as such (those this round found among
	 * them) are not walked, so the store counts them */
	if (k[KEEP_LAST].n < ss.sole) {
		memcpy(k2, k, sizeof(k2));
		k2[KEEP_LAST].n = ss.sole;
		k2[KEEP_LAST].bytes = ss.sole_bytes;
		if (!k[KEEP_LAST].n)
			k2[KEEP_LAST].id = ss.sole_one;
		k = k2;
	}
	for (why = KEEP_SENDING; why < KEEP_N; why++) {
		if (!k[why].n)
			continue;
		addf(msg, sizeof(msg), "%s", msg[0] ? "; " : ": ");
		if (k[why].n == 1) {
			add_obj(nd, msg, sizeof(msg), k[why].id, true);
			addf(msg, sizeof(msg), " %s", keep_what[why][0]);
		} else {
			addf(msg, sizeof(msg),
			     "%" PRIu64 " objects (%" PRIu64 " bytes) %s, among them ", k[why].n,
			     k[why].bytes, keep_what[why][1]);
			add_obj(nd, msg, sizeof(msg), k[why].id, false);
		}
	}
	if (spare)
		addf(msg, sizeof(msg),
		     "%s%" PRIu64 " bytes of copies nobody uses here would not make room",
		     msg[0] ? "; " : ": ", spare);
	if (ss.draining)
		addf(msg, sizeof(msg),
		     "%s%" PRIu64
		     " bytes of deleted objects wait for their last reader here or peer",
		     msg[0] ? "; " : ": ", ss.draining);
	if (also)
		addf(msg, sizeof(msg), "%s%s", msg[0] ? "; " : ": ", also);
	log_msg_limited(&rl, LOGL_WARN,
			"no room for %" PRIu64 " bytes in the store (%" PRIu64 " of %" PRIu64
			" bytes used)%s",
			need, ss.used, ss.capacity, msg[0] ? msg : ": nothing here could go");
}

/*
 * Give up copy @c (Redis agreed), and take back the peers' leases on it:
 * a peer that comes back for more of it fails over to another holder.
 * If GETs of it are being answered, wait for them until @deadline_ns:
 * its pages come free with the last one.
 */
static void evict_one(struct node *nd, const struct cand *c, int64_t deadline_ns)
{
	static struct log_ratelimit evicted_rl =
	    LOG_RATELIMIT_INIT("eviction: evicted objects", 10000, 10);
	static struct log_ratelimit rl = LOG_RATELIMIT_INIT("eviction: still sent", 10000, 5);

	(void)store_unlink_id(nd->store, c->id);
	node_source_revoke(nd->source, c->id);
	NODE_COUNT(nd, evictions, 1);
	log_msg_limited(&evicted_rl, LOGL_INFO,
			"evicted object %" PRIu64 " (%" PRIu64 " bytes; other nodes hold it)",
			c->id, c->size);
	if (node_source_wait(nd->source, c->id, deadline_ns) < 0)
		log_msg_limited(&rl, LOGL_WARN,
				"evicted object %" PRIu64
				" is still being sent to a peer after %d ms:"
				" its pages come free when that GET ends",
				c->id, NODE_EVICT_WAIT_MS);
}

/* What a round has so far. */
struct round {
	struct kept k[KEEP_N];
	struct cands all;	/* every copy found that may go */
	struct page *pages;	/* the pages they share, by key */
	struct idxs ready;	/* to be asked of Redis, in this order */
	size_t next_ready;	/* ready[next_ready...] not asked yet */
	uint64_t ready_pages;	/* what those would free */
	struct idxs sending;	/* copies being sent: found once all the others were */
	uint64_t sending_pages; /* what those would free, at most */
	struct idxs rel;	/* released by Redis, to be dropped */
	uint64_t room, want, freed;
	char also[128];
	/* the walk */
	struct store_walk w;
	struct seen *seen;
	uint64_t walked, limit;
	bool done; /* every object looked at */
};

/* *@v less @n, never below 0. */
static void less(uint64_t *v, uint64_t n)
{
	*v = *v > n ? *v - n : 0;
}

static void round_free(struct round *rd)
{
	struct page *p, *tmp;

	HASH_ITER (hh, rd->pages, p, tmp) {
		HASH_DELETE(hh, rd->pages, p);
		free(p->mem);
		free(p);
	}
	store_walk_end(&rd->w);
	seen_free(&rd->seen);
	free(rd->all.v);
	free(rd->ready.v);
	free(rd->sending.v);
	free(rd->rel.v);
}

/* Shared page @key, with @used slots on it: the round's entry, made at
 * its first sight.  NULL if out of memory. */
static struct page *page_get(struct round *rd, uint64_t key, uint32_t used)
{
	struct page *p;

	HASH_FIND(hh, rd->pages, &key, sizeof(key), p);
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return NULL;
		p->key = key;
		HASH_ADD(hh, rd->pages, key, sizeof(p->key), p);
		if (!p->hh.tbl) {
			free(p);
			return NULL;
		}
	}
	/* a slot taken meanwhile keeps the page: the most is what counts */
	if (used > p->used)
		p->used = used;
	return p;
}

/*
 * Add copy @id (@size bytes) to rd->all: what it alone frees, and the
 * pages it shares.  Its index, or -1 if out of memory (it is not given
 * up, then).
 */
static long cand_add(struct node *nd, struct round *rd, uint64_t id, uint64_t size, bool sending)
{
	struct cand c = {.id = id, .size = size, .own = pages(size), .sending = sending};
	struct store_obj *o = store_lookup(nd->store, id);
	struct store_pages sp;
	int i;

	if (o && store_obj_pages(o, &sp) == 0) {
		c.own = sp.own;
		for (i = 0; i < sp.nshared; i++)
			if (!(c.pg[i] = page_get(rd, sp.shared[i].key, sp.shared[i].used))) {
				store_obj_unref(o);
				return -1;
			}
	}
	store_obj_unref(o);
	if (grow((void **)&rd->all.v, &rd->all.cap, rd->all.n, sizeof(c)) < 0)
		return -1;
	rd->all.v[rd->all.n] = c;
	return (long)rd->all.n++;
}

static void queue(struct round *rd, size_t i)
{
	struct cand *c = &rd->all.v[i];

	if (c->queued || idxs_add(&rd->ready, i) < 0)
		return;
	c->queued = true;
	rd->ready_pages += c->own;
}

/*
 * Copy @i was found: queue it if it frees pages of its own, and every
 * copy of a shared page once all the page's slots were found.  Without
 * this, giving up a packed copy whose neighbours stay would free no page
 * and cost a replica.
 */
static void found(struct round *rd, size_t i)
{
	struct cand *c = &rd->all.v[i];
	struct page *p;
	size_t k;
	int j;

	if (c->own)
		queue(rd, i);
	for (j = 0; j < 2 && (p = c->pg[j]); j++) {
		if (grow((void **)&p->mem, &p->cap, p->n, sizeof(*p->mem)) < 0) {
			p->broken = true; /* cannot list its copies: it stays */
			continue;
		}
		p->mem[p->n++] = i;
		if (++p->found < p->used || p->complete || p->broken)
			continue;
		p->complete = true;
		rd->ready_pages++;
		for (k = 0; k < p->n; k++)
			queue(rd, p->mem[k]);
	}
}

/* Would giving up copy @c free a page: one of its own, or a shared one
 * all of whose slots were found (@agreed: and released by Redis)? */
static bool frees_pages(const struct cand *c, bool agreed)
{
	int j;

	if (c->own)
		return true;
	for (j = 0; j < 2 && c->pg[j]; j++)
		if (!c->pg[j]->broken && (agreed ? c->pg[j]->counted : c->pg[j]->complete))
			return true;
	return false;
}

/* Redis's answer on copy @c: its pages count as room once every slot on
 * them is released, and never once one stays. */
static void answered(struct round *rd, struct cand *c, bool agreed)
{
	struct page *p;
	int j;

	if (agreed)
		rd->room += c->own;
	for (j = 0; j < 2 && (p = c->pg[j]); j++) {
		if (p->broken)
			continue;
		if (!agreed) {
			/* counted already if a slot of it was found twice
			 * (freed and taken again meanwhile) */
			if (p->counted)
				less(&rd->room, 1);
			else if (p->complete)
				less(&rd->ready_pages, 1);
			p->broken = true;
			p->counted = false;
		} else if (!p->counted && ++p->agreed >= p->used) {
			p->counted = true;
			rd->room++;
			less(&rd->ready_pages, 1);
		}
	}
}

/*
 * Ask Redis to release copy @i: this node stops being one of its holders
 * if another live node holds it.  False once Redis is unreachable (the
 * round stops).
 */
static bool release(struct node *nd, struct round *rd, size_t i)
{
	struct cand *c = &rd->all.v[i];
	int r;

	less(&rd->ready_pages, c->own);
	if (!frees_pages(c, false))
		return true; /* a neighbour stays: it would free nothing */
	r = meta_release_replica(nd->meta, c->id);
	if (r == -ENOENT) {
		/* deleted meanwhile: its copy is garbage anyway */
		(void)store_unlink_id(nd->store, c->id);
		rd->freed += c->size;
		answered(rd, c, true);
		return true;
	}
	if (r < 0) {
		snprintf(rd->also, sizeof(rd->also), "Redis is unreachable (%s)", strerror(-r));
		rd->ready_pages += c->own;
		return false;
	}
	if (r == 0 || r == 2) {
		kept_add(&rd->k[KEEP_LAST], c->id, c->size);
		/* the only copy in the cluster: not walked again; a copy
		 * whose other holders are away (restarting), or that a
		 * peer fetched lately (it may not be registered yet), is
		 * asked about again, or it would stay once they hold it */
		if (r == 0 && !node_source_leased(nd->source, c->id))
			store_set_sole(nd->store, c->id, true);
		answered(rd, c, false);
		return true;
	}
	if (idxs_add(&rd->rel, i) < 0) {
		meta_add_holder(nd->meta, c->id);
		answered(rd, c, false);
		return true;
	}
	c->released = true;
	answered(rd, c, true);
	return true;
}

/* Walk on until the copies found and not yet asked of Redis would, with
 * rd->room, make rd->want pages, or every object was looked at.  No
 * Redis call: the busy hook, the fetch table, the store. */
static void gather_more(struct node *nd, struct round *rd)
{
	struct store_cold batch[EVICT_BATCH];
	size_t i, n;
	long c;

	while (!rd->done && rd->room + rd->ready_pages < rd->want) {
		if (rd->walked >= rd->limit ||
		    !(n = store_walk_cold(nd->store, &rd->w, batch, EVICT_BATCH))) {
			rd->done = true;
			break;
		}
		for (i = 0; i < n; i++) {
			enum keep why;

			rd->walked++;
			if (seen_before(&rd->seen, batch[i].id))
				continue;
			why = keep_why(nd, batch[i].id);
			if (!may_go(why)) {
				kept_add(&rd->k[why], batch[i].id, batch[i].size);
				continue;
			}
			c = cand_add(nd, rd, batch[i].id, batch[i].size, why == KEEP_SENDING);
			if (c < 0)
				continue;
			if (why == KEEP_NOT)
				found(rd, (size_t)c);
			else if (idxs_add(&rd->sending, (size_t)c) == 0)
				rd->sending_pages += rd->all.v[c].own + 2;
		}
	}
}

/*
 * Before the released copies go: those opened meanwhile stay (kept), and
 * so does every copy whose shared pages would not come free after all:
 * a page stays unless the copies going from it are at least the slots
 * used on it now (read again: a slot found twice, freed and taken again
 * meanwhile, or one taken since, keeps it).
 */
static void settle(struct node *nd, struct round *rd)
{
	struct store_pages sp;
	struct store_obj *o;
	struct cand *c;
	size_t i;
	int j;

	for (i = 0; i < rd->rel.n; i++) {
		c = &rd->all.v[rd->rel.v[i]];
		c->kept = !may_go(keep_why(nd, c->id));
		for (j = 0; !c->kept && j < 2 && c->pg[j]; j++)
			c->pg[j]->going++;
	}
	for (i = 0; i < rd->rel.n; i++) {
		c = &rd->all.v[rd->rel.v[i]];
		if (c->kept || !c->pg[0])
			continue;
		o = store_lookup(nd->store, c->id);
		if (o && store_obj_pages(o, &sp) == 0)
			for (j = 0; j < sp.nshared && j < 2 && c->pg[j]; j++)
				if (c->pg[j]->key == sp.shared[j].key &&
				    sp.shared[j].used > c->pg[j]->now)
					c->pg[j]->now = sp.shared[j].used;
		store_obj_unref(o);
	}
	for (i = 0; i < rd->rel.n; i++) {
		c = &rd->all.v[rd->rel.v[i]];
		for (j = 0; j < 2 && c->pg[j]; j++)
			c->pg[j]->counted = !c->pg[j]->broken && c->pg[j]->going >= c->pg[j]->now;
	}
}

/*
 * Two steps, so that nothing is given up for nothing.  First the use
 * order is walked from the least recently used (a batch at a time, no
 * Redis call) until the idle copies found could make room.  A copy in a
 * file of its own makes room alone; a packed copy's slot may share its
 * pages with others (store_obj_pages()), and such a page makes room only
 * once every slot on it was found: so packed copies go by the page, the
 * page whose last slot was found coldest first, and one whose page
 * holds anything that stays is not given up.  Only then does Redis
 * agree, object by object, to drop this node from the holders of copies
 * that another live node holds, until the copies so released make room
 * (a last copy does not count, nor does its page, and the walk goes on).
 * Copies being sent come last, once every idle one was found.  If the
 * released copies cannot make room, this node is put back as a holder
 * of each and no copy is dropped.  Then the released copies are dropped,
 * unless one was opened meanwhile, or its page kept a last copy (kept,
 * and this node put back as its holder).  Rounds take turns
 * (nd->evict_lock), and so do they with reconciling, so that a copy one
 * round (or a reconcile) puts back as held is never one another round is
 * dropping.  A round that walked 1,024 objects or more and found no room
 * answers at once for the next second, unless an object was used or the
 * store's free room grew meanwhile.
 */
static uint64_t evict_round(struct node *nd, uint64_t need)
{
	struct round rd = {.want = pages(need)};
	struct store_stats ss;
	uint64_t spare = 0, gen;
	int64_t deadline, now = util_mono_ns();
	size_t i;
	bool up = true;

	gen = atomic_load_explicit(&nd->use_gen, memory_order_relaxed);
	rd.room = free_pages(nd);
	pthread_mutex_lock(&nd->lock);
	if (nd->evict_memo_ns > now && nd->evict_memo_gen == gen && need >= nd->evict_memo_need &&
	    rd.room <= nd->evict_memo_room) {
		pthread_mutex_unlock(&nd->lock);
		return 0;
	}
	pthread_mutex_unlock(&nd->lock);
	store_stats(nd->store, &ss);
	/* every object once, and a walk that begins again a few times */
	rd.limit = 4 * ss.objects + EVICT_BATCH;
	while (up && rd.room < rd.want) {
		gather_more(nd, &rd);
		if (rd.room + rd.ready_pages < rd.want &&
		    (!rd.done || rd.room + rd.ready_pages + rd.sending_pages < rd.want))
			break; /* what could go would not make room: Redis is not asked */
		for (; up && rd.next_ready < rd.ready.n && rd.room < rd.want; rd.next_ready++)
			up = release(nd, &rd, rd.ready.v[rd.next_ready]);
		if (rd.next_ready == rd.ready.n)
			rd.ready_pages = 0; /* every copy queued was asked */
		if (rd.room >= rd.want || !rd.done || !up)
			continue;
		if (!rd.sending.n)
			break;
		/* every idle copy was asked: those being sent come free last */
		for (i = 0; i < rd.sending.n; i++)
			found(&rd, rd.sending.v[i]);
		rd.sending.n = 0;
		rd.sending_pages = 0;
	}
	for (i = rd.next_ready; i < rd.ready.n; i++) {
		struct cand *c = &rd.all.v[rd.ready.v[i]];

		if (c->sending)
			kept_add(&rd.k[KEEP_SENDING], c->id, c->size);
		else
			spare += c->size;
	}
	for (i = 0; i < rd.all.n; i++) {
		struct cand *c = &rd.all.v[i];

		if (c->queued)
			continue;
		if (c->sending)
			kept_add(&rd.k[KEEP_SENDING], c->id, c->size);
		else
			spare += c->size;
	}
	if (rd.room < rd.want) {
		for (i = 0; i < rd.rel.n; i++) {
			meta_add_holder(nd->meta, rd.all.v[rd.rel.v[i]].id);
			spare += rd.all.v[rd.rel.v[i]].size;
		}
		say_no_room(nd, need, rd.k, spare, rd.also[0] ? rd.also : NULL);
		/* a long walk for nothing is not walked again at once */
		if (up && rd.walked >= 1024) {
			pthread_mutex_lock(&nd->lock);
			nd->evict_memo_ns = util_mono_ns() + EVICT_MEMO_NS;
			nd->evict_memo_gen = gen;
			nd->evict_memo_need = need;
			nd->evict_memo_room = free_pages(nd);
			pthread_mutex_unlock(&nd->lock);
		}
		round_free(&rd);
		return rd.freed;
	}
	settle(nd, &rd);
	deadline = util_mono_ns() + (int64_t)NODE_EVICT_WAIT_MS * 1000000;
	for (i = 0; i < rd.rel.n; i++) {
		struct cand *c = &rd.all.v[rd.rel.v[i]];

		/* opened meanwhile, or its page stays: keep it */
		if (c->kept || !frees_pages(c, true)) {
			meta_add_holder(nd->meta, c->id);
			continue;
		}
		evict_one(nd, c, deadline);
		rd.freed += c->size;
	}
	round_free(&rd);
	return rd.freed;
}

/*
 * No room was made, and copies known as the only ones in the cluster are
 * not walked: put SOLE_RECHECK_MAX of them (those known longest) back in
 * the use order, so that the next round asks Redis about them again, if
 * that was last done SOLE_RECHECK_NS ago or more (a node full of its own
 * objects so costs a bounded number of calls a minute, and each comes
 * round in turn).  What made one the only copy may have changed without a word to
 * this node: a holder that was away (and dropped from the holders as
 * stale meanwhile) registered its copy again.  True if it did.
 * nd->evict_lock held.
 */
static bool sole_recheck(struct node *nd)
{
	struct store_stats ss;
	int64_t now = util_mono_ns();

	if (now - nd->sole_checked_ns < SOLE_RECHECK_NS)
		return false;
	store_stats(nd->store, &ss);
	if (!ss.sole)
		return false;
	nd->sole_checked_ns = now;
	store_sole_forget(nd->store, SOLE_RECHECK_MAX);
	/* a round that found no room must not answer for this one */
	atomic_fetch_add_explicit(&nd->use_gen, 1, memory_order_relaxed);
	return true;
}

uint64_t node_evict(struct node *nd, uint64_t need)
{
	uint64_t freed = 0, got;
	int round;

	/* a copy that a process still maps (passthrough maps the store's
	 * file, and nobody here sees it) keeps its pages when it is given
	 * up (the store counts them as held): then the room is not there
	 * yet, and more copies must go */
	pthread_mutex_lock(&nd->evict_lock);
	for (round = 0; round < EVICT_ROUNDS; round++) {
		got = evict_round(nd, need);
		freed += got;
		/* a packed copy frees a slot, and its page only with its
		 * neighbours: the store says when the object would fit */
		if (!got || store_fits(nd->store, need))
			break;
	}
	if (!store_fits(nd->store, need) && sole_recheck(nd))
		freed += evict_round(nd, need);
	pthread_mutex_unlock(&nd->evict_lock);
	return freed;
}
