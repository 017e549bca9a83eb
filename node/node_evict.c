/*
 * node_evict: use times of local objects, and eviction.
 *
 * Every open of a local object and every fetch that ends records a use
 * time (node_touch()).  When the store has no room (a fetch reserving
 * pages, a write growing a file), node_evict() gives up sealed objects
 * that nobody uses here, least recently used first, but only those that
 * live on another node too: meta_release_replica() removes this node from
 * the holders in one atomic step only if another live holder remains, so
 * two nodes evicting at once can never drop the last copy.  An object
 * that exists nowhere else stays, and the writer gets ENOSPC.  Nothing is
 * given up unless giving up copies makes the room asked for: an object
 * that cannot fit anyway costs this node none of its replicas.
 *
 * "Nobody uses it" is asked of the layer above (hooks->busy(): open,
 * being written), of the unpublished list and the seals in progress
 * (objects with no record yet), of the fetch table (a copy being
 * fetched, or just sealed and not yet registered) and of the store
 * (store_obj_in_use(): held by anyone but the store and the peers'
 * serving leases; its pages would not come free until they let go, so
 * giving it up would make no room).  It is asked again after Redis
 * agreed, since an open may have come meanwhile; then the holder entry
 * is put back and the object kept.
 *
 * Peers.  A serving lease (node_source.c) does not keep a copy: an
 * evicted copy's leases are taken back, and a peer that comes back for
 * more of it gets "not here" and fails over to another holder, which
 * Redis vouched for.  A copy whose GETs are being answered is given up
 * only after the idle ones, and then waited for (NODE_EVICT_WAIT_MS at
 * most): its pages, and any RDMA registration of them, stay until its
 * last GET in flight ends.
 *
 * When no room can be made, one line (rate limited) says what holds it:
 * copies open here, being fetched here, being sent to a peer, in use
 * here, the only copy in the cluster, deleted objects still read, each
 * with one object named.
 */
#include "node_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define LRU_MAX (1u << 20)
#define EVICT_ROUNDS 4 /* see node_evict() */

struct lru {
	uint64_t id;
	int64_t at; /* mono_ns() of the last use */
	UT_hash_handle hh;
};

static struct lru *lru_find_locked(struct node *nd, uint64_t id)
{
	struct lru *e = NULL;

	HASH_FIND(hh, nd->lru, &id, sizeof(id), e);
	return e;
}

void fetch_lru_free_all_locked(struct node *nd)
{
	struct lru *e, *tmp;

	HASH_ITER (hh, nd->lru, e, tmp) {
		HASH_DELETE(hh, nd->lru, e);
		free(e);
	}
}

void node_touch(struct node *nd, uint64_t id)
{
	struct lru *e;

	pthread_mutex_lock(&nd->lock);
	e = lru_find_locked(nd, id);
	if (!e) {
		if (HASH_COUNT(nd->lru) >= LRU_MAX)
			fetch_lru_free_all_locked(nd);
		e = calloc(1, sizeof(*e));
		if (e) {
			e->id = id;
			HASH_ADD(hh, nd->lru, id, sizeof(e->id), e);
			if (!lru_find_locked(nd, id)) { /* the table could not grow */
				free(e);
				e = NULL;
			}
		}
	}
	if (e)
		e->at = mono_ns();
	pthread_mutex_unlock(&nd->lock);
}

static void lru_del_locked(struct node *nd, uint64_t id)
{
	struct lru *e = lru_find_locked(nd, id);

	if (e) {
		HASH_DELETE(hh, nd->lru, e);
		free(e);
	}
}

void node_forget(struct node *nd, uint64_t id)
{
	pthread_mutex_lock(&nd->lock);
	lru_del_locked(nd, id);
	pthread_mutex_unlock(&nd->lock);
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

struct cand {
	uint64_t id;
	uint64_t size;
	int64_t at;
	enum keep why;
};

struct cands {
	struct cand *v;
	size_t n, cap;
};

/* The copies kept for one reason: how many, their bytes, one to name. */
struct kept {
	uint64_t n, bytes, id;
};

static int collect(struct store_obj *o, void *arg)
{
	struct cands *c = arg;

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
	c->v[c->n].why = KEEP_NOT;
	c->n++;
	return 0;
}

/* Idle copies first, then those being sent; least recently used first. */
static int cmp_cand(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	if (x->why != y->why)
		return x->why < y->why ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at ? 1 : 0;
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
 * keep its pages until they end), and if not, why?  *@ret_at gets its
 * last use.  Unlinking a copy frees its pages only if nobody but the
 * store holds it: a peer's serving lease does not count (eviction takes
 * it back), a GET being answered or a reader the busy hook has not heard
 * of yet does.  Takes nd->lock; calls the busy hook, the store and the
 * source without it.
 */
static enum keep keep_why(struct node *nd, uint64_t id, int64_t *ret_at)
{
	struct store_obj *o;
	struct lru *e;
	bool fetching, held;

	pthread_mutex_lock(&nd->lock);
	fetching = fetch_running_locked(nd, id);
	e = lru_find_locked(nd, id);
	*ret_at = e ? e->at : 0;
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

static void kept_add(struct kept *k, const struct cand *c)
{
	if (!k->n)
		k->id = c->id;
	k->n++;
	k->bytes += c->size;
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

/*
 * Could giving up every candidate make room for @want pages?  A cheap
 * upper bound, before asking Redis anything (some candidates may turn
 * out to be last copies).
 */
static bool may_help(struct node *nd, const struct cand *v, size_t n, uint64_t want)
{
	uint64_t room = free_pages(nd);
	size_t i;

	for (i = 0; i < n && room < want; i++)
		room += pages(v[i].size);
	return room >= want;
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
	struct store_stats ss;
	int why;

	store_stats(nd->store, &ss);
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
	static struct log_ratelimit rl = LOG_RATELIMIT_INIT("eviction: still sent", 10000, 5);

	node_forget(nd, c->id);
	(void)store_unlink_id(nd->store, c->id);
	node_source_revoke(nd->source, c->id);
	NODE_COUNT(nd, evictions, 1);
	log_info("evicted object %" PRIu64 " (%" PRIu64 " bytes; other nodes hold it)", c->id,
		 c->size);
	if (node_source_wait(nd->source, c->id, deadline_ns) < 0)
		log_msg_limited(&rl, LOGL_WARN,
				"evicted object %" PRIu64
				" is still being sent to a peer after %d ms:"
				" its pages come free when that GET ends",
				c->id, NODE_EVICT_WAIT_MS);
}

/*
 * Two steps, so that nothing is given up for nothing.  First Redis
 * agrees, object by object (idle copies before those being sent, least
 * recently used first), to drop this node from the holders of copies
 * that another live node holds, until the copies so released would make
 * room.  If they cannot, this node is put back as a holder of each and
 * no copy is dropped.  Then the released copies are dropped, unless one
 * was opened meanwhile (kept, and this node put back as its holder).
 */
static uint64_t evict_round(struct node *nd, uint64_t need)
{
	struct kept k[KEEP_N] = {{0}};
	struct cands c = {0};
	uint64_t room, freed = 0, spare = 0, want = pages(need);
	size_t i, n = 0, nrel = 0;
	char also[128] = "";
	int64_t at, deadline;
	int r;

	if (store_foreach(nd->store, collect, &c) < 0) {
		free(c.v);
		return 0;
	}
	for (i = 0; i < c.n; i++) {
		c.v[i].why = keep_why(nd, c.v[i].id, &c.v[i].at);
		if (may_go(c.v[i].why))
			c.v[n++] = c.v[i];
		else
			kept_add(&k[c.v[i].why], &c.v[i]);
	}
	if (!may_help(nd, c.v, n, want)) {
		for (i = 0; i < n; i++)
			spare += c.v[i].size;
		say_no_room(nd, need, k, spare, NULL);
		free(c.v);
		return 0;
	}
	if (n)
		qsort(c.v, n, sizeof(*c.v), cmp_cand);
	room = free_pages(nd);
	for (i = 0; i < n && room < want; i++) {
		r = meta_release_replica(nd->meta, c.v[i].id);
		if (r == -ENOENT) {
			/* deleted meanwhile: its copy is garbage anyway */
			(void)store_unlink_id(nd->store, c.v[i].id);
			node_forget(nd, c.v[i].id);
			freed += c.v[i].size;
			room += pages(c.v[i].size);
			continue;
		}
		if (r < 0) {
			snprintf(also, sizeof(also), "Redis is unreachable (%s)", strerror(-r));
			break;
		}
		if (r == 0) { /* the last copy in the cluster */
			kept_add(&k[KEEP_LAST], &c.v[i]);
			continue;
		}
		c.v[nrel++] = c.v[i]; /* released (nrel <= i) */
		room += pages(c.v[i].size);
	}
	if (room < want) {
		for (i = 0; i < nrel; i++) {
			meta_add_holder(nd->meta, c.v[i].id);
			spare += c.v[i].size;
		}
		say_no_room(nd, need, k, spare, also[0] ? also : NULL);
		free(c.v);
		return freed;
	}
	deadline = mono_ns() + (int64_t)NODE_EVICT_WAIT_MS * 1000000;
	for (i = 0; i < nrel; i++) {
		if (!may_go(keep_why(nd, c.v[i].id, &at))) {
			/* opened meanwhile: keep it, and say so */
			meta_add_holder(nd->meta, c.v[i].id);
			continue;
		}
		evict_one(nd, &c.v[i], deadline);
		freed += c.v[i].size;
	}
	free(c.v);
	return freed;
}

uint64_t node_evict(struct node *nd, uint64_t need)
{
	uint64_t freed = 0, got;
	int round;

	/* a copy that a process still maps (passthrough maps the store's
	 * file, and nobody here sees it) keeps its pages when it is given
	 * up (the store counts them as held): then the room is not there
	 * yet, and more copies must go */
	for (round = 0; round < EVICT_ROUNDS; round++) {
		got = evict_round(nd, need);
		freed += got;
		if (!got || free_pages(nd) >= pages(need))
			break;
	}
	return freed;
}
