/*
 * node_fetch: single flight.  The table nd->fetches holds one fetch per object
 * id being brought here.  The first open of an object puts a fetch in it
 * before doing anything slow (state STARTING), so later opens find it and
 * wait for that first one to set it up: locate the holders
 * (node_holders.c), cut the object into ranges, reserve its pages in the
 * store (evicting replicas if the store is full) and register them once
 * with the transport (f->region: RDMA reads straight into them).  Then
 * small objects are pulled by the opening thread itself, bigger ones
 * queued for the workers (node_worker.c); readers wait on the fetch's
 * condition until the ranges they need are in place.
 *
 * References: the table holds one, each handle above one (node_fetch_open()
 * and node_fetch_ref()), each worker running one of its ranges one, and the
 * opening thread while it runs a small fetch.  The queue holds none.  A
 * fetch leaves the table when it fails, or once its copy is registered
 * (node_fetch_after_seal()): until then eviction leaves the copy alone, and
 * afterwards the next open sees the sealed object, or starts afresh
 * after a failure.
 */
#include "node_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

/* ---- setting a fetch up ---- */

static int split(struct node_fetch *f)
{
	uint64_t size = f->rec.size, csize = f->nd->range_min, off;
	unsigned i, n;

	while (size / csize >= FETCH_CHUNKS_MAX)
		csize *= 2;
	/* with block sums a range is a block, checked as it lands */
	if (f->sums)
		csize = (uint64_t)1 << f->sums->shift;
	n = size ? (unsigned)((size + csize - 1) / csize) : 0;
	f->chunks = calloc(n ? n : 1, sizeof(*f->chunks));
	if (!f->chunks)
		return -ENOMEM;
	for (i = 0, off = 0; i < n; i++, off += csize) {
		f->chunks[i].off = off;
		f->chunks[i].len = size - off < csize ? size - off : csize;
	}
	f->nchunks = n;
	return 0;
}

/*
 * Register the reserved destination once with the backends that need it
 * (RDMA), so that its ranges register nothing.  Without a region (TCP, an
 * error, a destination in more than one piece) a backend registers what
 * each transfer needs, or does without: so an error is only worth a
 * debug line.
 */
static void region_new(struct node_fetch *f)
{
	struct iovec iov;
	size_t bytes = 0;
	int r;

	if (store_obj_iov(f->obj, 0, f->rec.size, &iov, 1, &bytes) != 1 || bytes != f->rec.size)
		return;
	r = transport_region_new(f->nd->transport, iov.iov_base, bytes, &f->region);
	if (r < 0) {
		log_debug("object %" PRIu64 ": cannot register its %zu bytes with the transport: "
			  "%s; fetching without",
			  f->id, bytes, strerror(-r));
		f->region = NULL;
	}
}

/* a fetch with no room waits for the others this often, this long */
#define RESERVE_POLL_MS 20
#define RESERVE_WAIT_TIMEOUTS 5

/* Reserve the object's pages, making room by evicting replicas if the
 * store is full (and the fetches under way end, if need be). */
static struct log_ratelimit slots_rl =
    LOG_RATELIMIT_INIT("fetches over the object limit", 10000, 5);
static struct log_ratelimit big_rl =
    LOG_RATELIMIT_INIT("fetches of objects bigger than the store", 10000, 10);
static struct log_ratelimit room_rl = LOG_RATELIMIT_INIT("fetches with no room", 10000, 10);
static struct log_ratelimit notransport_rl =
    LOG_RATELIMIT_INIT("fetches without a transport", 10000, 10);

/* Fetches under way here that hold room (RUNNING: each holds what it
 * reserved until it ends, and its copy cannot be evicted before)?  Not
 * those still reserving, as @f is: they hold none, and two of them must
 * not wait for each other. */
static bool others_fetching(struct node_fetch *f)
{
	struct node_fetch *g, *tmp;
	bool others = false;

	pthread_mutex_lock(&f->nd->lock);
	HASH_ITER (hh, f->nd->fetches, g, tmp)
		if (g != f && g->state == FETCH_RUNNING) {
			others = true;
			break;
		}
	pthread_mutex_unlock(&f->nd->lock);
	return others;
}

/*
 * No room for @f, even after eviction: if other fetches are under way
 * here, the room they hold comes back (or their copies become evictable)
 * when they end.  Wait for that, trying again every RESERVE_POLL_MS, for
 * at most RESERVE_WAIT_TIMEOUTS x io_timeout.  Opens whose readers find
 * the bytes in the page cache (passthrough=off keeps it across an
 * eviction) return at once and leave their fetches running, so a reader
 * that goes through objects quickly can have several in flight on a
 * small store; an ENOSPC then would be about room that is on its way
 * back.  0, or -ENOSPC.
 */
static int reserve_wait(struct node_fetch *f)
{
	struct node *nd = f->nd;
	int64_t end = util_mono_ns() + (int64_t)RESERVE_WAIT_TIMEOUTS * nd->io_timeout_ms * 1000000;
	int r = -ENOSPC;

	while (r == -ENOSPC && others_fetching(f) && util_mono_ns() < end) {
		struct timespec ts = {0, RESERVE_POLL_MS * 1000000L};

		nanosleep(&ts, NULL);
		r = store_reserve(f->obj, f->rec.size);
		if (r == -ENOSPC && node_evict(nd, f->rec.size) > 0)
			r = store_reserve(f->obj, f->rec.size);
	}
	return r;
}

static int reserve(struct node_fetch *f)
{
	struct node *nd = f->nd;
	struct store_stats ss;
	char use[160];
	int r, err;

	/* never evict for an object that cannot fit at all (a huge object,
	 * or a corrupt size in its record) */
	store_stats(nd->store, &ss);
	if (f->rec.size > ss.capacity) {
		log_msg_limited(&big_rl, LOGL_ERROR,
				"object %" PRIu64 " is %" PRIu64
				" bytes, more than this node's whole "
				"store (%" PRIu64 " bytes): it cannot be fetched here",
				f->id, f->rec.size, ss.capacity);
		return -EFBIG;
	}
	f->obj = store_create(nd->store, f->id, &err);
	if (!f->obj && err == -EMFILE) {
		store_stats(nd->store, &ss);
		log_msg_limited(&slots_rl, LOGL_WARN,
				"cannot fetch object %" PRIu64 ": %" PRIu64
				" objects are being written or fetched on this node, the most its "
				"open-files limit and vm.max_map_count leave room for (open_max); "
				"raise the limit (LimitNOFILE=, ulimit -n, prlimit --nofile)",
				f->id, ss.open);
		return -ENOSPC;
	}
	if (!f->obj)
		return err;
	r = store_reserve(f->obj, f->rec.size);
	if (r == -ENOSPC && node_evict(nd, f->rec.size) > 0)
		r = store_reserve(f->obj, f->rec.size);
	if (r == -ENOSPC)
		r = reserve_wait(f);
	if (r == -ENOSPC) {
		store_describe_use(nd->store, use, sizeof(use));
		log_msg_limited(&room_rl, LOGL_WARN,
				"no room in the store for object %" PRIu64 " (%" PRIu64
				" bytes): %s",
				f->id, f->rec.size, use);
	}
	if (r < 0) {
		store_unlink(f->obj);
		store_obj_unref(f->obj);
		f->obj = NULL;
		return r;
	}
	region_new(f);
	return 0;
}

/* Find the object and its holders, and reserve its pages.  Called by the
 * open that created @f (state STARTING), without locks. */
static int setup(struct node_fetch *f, const struct meta_obj *rec)
{
	int r;

	if (!f->nd->transport) {
		log_msg_limited(&notransport_rl, LOGL_ERROR,
				"object %" PRIu64 " is not on this node, and this node has no "
				"transport to fetch it with",
				f->id);
		return -EIO;
	}
	r = node_fetch_holder_locate(f, rec);
	if (r == 0)
		r = split(f);
	if (r == 0)
		r = reserve(f);
	if (r == 0 && f->sums && f->nd->source)
		r = node_fan_new(f);
	if (r == 0 && f->sums) {
		store_skip_sums(f->obj); /* each block is checked as it lands */
		/* other nodes fetching it may have its checked blocks */
		if (f->nd->source)
			f->part = node_source_partial_add(f->nd->source, f->obj, f->rec.size,
							  f->sums->shift);
	}
	return r;
}

/* Start the transfer of a set-up fetch: small objects right here, in the
 * opening thread; others by the workers. */
static void go(struct node_fetch *f)
{
	struct node *nd = f->nd;
	bool sync = f->rec.size <= nd->sync_max;

	pthread_mutex_lock(&nd->lock);
	if (nd->stopping) {
		/* no worker will take it: fail it rather than queue it */
		pthread_mutex_unlock(&nd->lock);
		node_fetch_fail(f, "the node is shutting down");
		return;
	}
	if (sync && f->nchunks) {
		f->chunks[0].state = CHUNK_RUNNING;
		f->refs++;
	} else if (f->nchunks) {
		node_fetch_enqueue_locked(f);
	}
	pthread_mutex_unlock(&nd->lock);
	if (!f->nchunks) {
		if (node_fetch_finish(f))
			node_fetch_after_seal(f);
	} else if (sync) {
		/* the rest of the work (Redis, the catalog path) is done by
		 * node_fetch_opened() once the open has been answered */
		if (node_fetch_run_chunk(f, 0) && node_fetch_finish(f)) {
			pthread_mutex_lock(&nd->lock);
			f->post_seal = true;
			pthread_mutex_unlock(&nd->lock);
		}
		node_fetch_put(f);
	}
}

/* ---- opening ---- */

/* The fetch of @id from the table with a reference, or a new one (also
 * in the table) if none; *@ret_creator says which.  -EIO once the
 * node is stopping, -ENOMEM. */
static int find_or_add(struct node *nd, uint64_t id, uint64_t parent, const char *name,
		       struct node_fetch **ret_f, bool *ret_creator)
{
	struct node_fetch *f;

	pthread_mutex_lock(&nd->lock);
	if (nd->stopping) {
		pthread_mutex_unlock(&nd->lock);
		return -EIO;
	}
	HASH_FIND(hh, nd->fetches, &id, sizeof(id), f);
	if (f) {
		f->refs++;
		pthread_mutex_unlock(&nd->lock);
		*ret_f = f;
		*ret_creator = false;
		return 0;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		pthread_mutex_unlock(&nd->lock);
		return -ENOMEM;
	}
	f->id = id;
	f->nd = nd;
	f->started_ns = util_mono_ns();
	if (name) {
		f->parent = parent;
		snprintf(f->name, sizeof(f->name), "%s", name);
	}
	f->state = FETCH_STARTING;
	f->refs = 2; /* the table, the caller */
	pthread_cond_init(&f->cond, NULL);
	HASH_ADD(hh, nd->fetches, id, sizeof(f->id), f);
	if (!fetch_running_locked(nd, id)) { /* the table could not grow */
		pthread_mutex_unlock(&nd->lock);
		node_fetch_free(f);
		return -ENOMEM;
	}
	f->in_table = true;
	pthread_mutex_unlock(&nd->lock);
	*ret_f = f;
	*ret_creator = true;
	return 0;
}

int node_fetch_open(struct node *nd, uint64_t id, const struct meta_obj *rec, uint64_t parent,
		    const char *name, struct node_fetch **ret_f, struct store_obj **ret_obj)
{
	struct node_fetch *f;
	bool creator;
	int r;

	r = find_or_add(nd, id, parent, name, &f, &creator);
	if (r < 0)
		return r;
	if (creator) {
		NODE_COUNT(nd, fetches, 1);
		r = setup(f, rec);
		pthread_mutex_lock(&nd->lock);
		f->state = r < 0 ? FETCH_FAILED : FETCH_RUNNING;
		f->err = r;
		pthread_cond_broadcast(&f->cond);
		pthread_mutex_unlock(&nd->lock);
		if (r < 0) {
			NODE_COUNT(nd, failed, 1);
			node_fetch_untable(f);
		} else {
			go(f);
		}
	}

	pthread_mutex_lock(&nd->lock);
	while (f->state == FETCH_STARTING) {
		f->waiters++;
		pthread_cond_wait(&f->cond, &nd->lock);
		f->waiters--;
	}
	r = f->state == FETCH_FAILED ? (f->err < 0 ? f->err : -EIO) : 0;
	pthread_mutex_unlock(&nd->lock);
	if (r < 0) {
		node_fetch_put(f);
		return r;
	}
	*ret_f = f;
	*ret_obj = store_obj_ref(f->obj);
	return 0;
}

void node_fetch_opened(struct node_fetch *f)
{
	bool post;

	if (!f)
		return;
	pthread_mutex_lock(&f->nd->lock);
	post = f->post_seal;
	f->post_seal = false;
	pthread_mutex_unlock(&f->nd->lock);
	if (post)
		node_fetch_after_seal(f);
	node_fetch_put(f);
}

/* ---- reading ---- */

/* Is [off, end) of @f in place?  nd->lock held. */
static bool covered_locked(struct node_fetch *f, uint64_t off, uint64_t end)
{
	unsigned i;

	for (i = 0; i < f->nchunks && off < end; i++) {
		struct chunk *c = &f->chunks[i];

		if (c->off + c->len <= off)
			continue;
		if (f->sums ? !c->verified
			    : c->off + c->done < (end < c->off + c->len ? end : c->off + c->len))
			return false;
		off = c->off + c->len;
	}
	return true;
}

int node_fetch_wait(struct node_fetch *f, uint64_t off, uint64_t len)
{
	struct node *nd = f->nd;
	uint64_t end = off + len;
	bool last;
	int r;

	if (end > f->rec.size || end < off)
		end = f->rec.size;
	last = end == f->rec.size;
	pthread_mutex_lock(&nd->lock);
	if (f->fan && f->state == FETCH_RUNNING && !covered_locked(f, off, end))
		node_fan_want_locked(f, off, end);
	while (f->state == FETCH_RUNNING && (last || !covered_locked(f, off, end))) {
		f->waiters++;
		pthread_cond_wait(&f->cond, &nd->lock);
		f->waiters--;
	}
	r = f->state == FETCH_FAILED ? -EIO : 0;
	pthread_mutex_unlock(&nd->lock);
	return r;
}

int node_fetch_progress(struct node *nd, uint64_t id, uint64_t *ret_done, uint64_t *ret_size)
{
	struct node_fetch *f;
	uint64_t done = 0;
	unsigned i;

	pthread_mutex_lock(&nd->lock);
	HASH_FIND(hh, nd->fetches, &id, sizeof(id), f);
	if (!f || f->state == FETCH_DONE || f->state == FETCH_FAILED) {
		pthread_mutex_unlock(&nd->lock);
		return -ENOENT;
	}
	/* a fetch still being set up has no record or ranges yet */
	if (f->state != FETCH_STARTING)
		for (i = 0; i < f->nchunks; i++)
			done += f->chunks[i].done;
	*ret_size = f->state != FETCH_STARTING ? f->rec.size : 0;
	pthread_mutex_unlock(&nd->lock);
	*ret_done = done;
	return 0;
}
