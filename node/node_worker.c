/*
 * node_worker: the queue of ranges, the worker threads that move them,
 * and the end of a fetch.
 *
 *   queue ──► fetches with ranges not yet handed out, oldest first; a
 *             worker takes the lowest queued range of the first fetch
 *             that is below its stream limit (the backend's streams per
 *             holder, times the good holders), so that a reader at the
 *             head of an object is served first
 *   range ──► from the next good holder (node_holders.c), received by
 *             the transport straight into the object's reserved store
 *             pages; each arrival moves the range's "done" mark, wakes
 *             readers waiting for it, and folds the bytes now in place
 *             from the start of the object into the running checksum
 *   failure ──► the holder is marked bad for this fetch and the range
 *             continues where it stopped with another holder; with no
 *             good holder left the holders are located once more, then
 *             the fetch fails: readers get EIO, the pages are freed
 *   stall ──► a holder that moved no byte for io_timeout is alive as
 *             far as anyone knows: with no good holder left it is
 *             asked again on a fresh connection (its connections were
 *             dropped) after a backoff, if its node card is still live
 *             (located afresh), up to FETCH_STALL_RETRIES times in a
 *             row without a byte arriving; a holder refused, reset or
 *             gone from Redis is not retried
 *   last range ──► seal; the checksum is compared with the record (a
 *             mismatch fails the fetch); readers are woken; then, off
 *             their path, this node is registered as a holder and the
 *             catalog record written
 *
 * Small objects (up to sync_max) are run by the opening thread itself
 * through node_fetch_run_chunk(), with no worker involved.
 */
#include "node_i.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Lines that fetches repeat (common/log.h): at most a burst in 10 s. */
static struct log_ratelimit failed_rl = LOG_RATELIMIT_INIT("failed fetches", 10000, 100);
static struct log_ratelimit csum_rl =
    LOG_RATELIMIT_INIT("fetched copies with another checksum", 10000, 100);
static struct log_ratelimit stale_rl =
    LOG_RATELIMIT_INIT("holder entries of nodes that are gone", 10000, 10);
static struct log_ratelimit dropped_rl = LOG_RATELIMIT_INIT("fetched copies dropped", 10000, 10);
static struct log_ratelimit register_rl =
    LOG_RATELIMIT_INIT("fetched copies not recorded", 10000, 10);
static struct log_ratelimit stall_rl = LOG_RATELIMIT_INIT("stalled holders asked again", 10000, 10);

#define FETCH_IOV_MAX 64
#define RELOCATE_MAX 1

/* ---- references ---- */

void node_fetch_free(struct node_fetch *f)
{
	/* no worker is left (each held a reference); the memory it covers
	 * is still mapped: f's own reference on the object goes next */
	transport_region_free(f->region);
	node_source_partial_end(f->nd->source, f->part); /* a fetch that never ran */
	node_fan_free(f->fan);
	node_fan_free(f->fan_off);
	free(f->first);
	store_obj_unref(f->obj);
	free(f->sums);
	free(f->copy_sums);
	pthread_cond_destroy(&f->cond);
	free(f->chunks);
	free(f->holders);
	free(f->mark);
	free(f);
}

struct node_fetch *node_fetch_ref(struct node_fetch *f)
{
	if (f) {
		pthread_mutex_lock(&f->nd->lock);
		f->refs++;
		pthread_mutex_unlock(&f->nd->lock);
	}
	return f;
}

void node_fetch_put(struct node_fetch *f)
{
	bool last;

	if (!f)
		return;
	pthread_mutex_lock(&f->nd->lock);
	last = --f->refs == 0;
	pthread_mutex_unlock(&f->nd->lock);
	if (last)
		node_fetch_free(f);
}

void node_fetch_untable(struct node_fetch *f)
{
	struct node *nd = f->nd;
	bool drop = false;

	pthread_mutex_lock(&nd->lock);
	if (f->in_table) {
		HASH_DELETE(hh, nd->fetches, f);
		f->in_table = false;
		drop = true;
	}
	pthread_mutex_unlock(&nd->lock);
	if (drop)
		node_fetch_put(f);
}

/* ---- the queue ---- */

void node_fetch_enqueue_locked(struct node_fetch *f)
{
	struct node *nd = f->nd;
	struct node_fetch **pp;

	if (f->queued)
		return;
	for (pp = &nd->queue; *pp; pp = &(*pp)->qnext)
		;
	f->qnext = NULL;
	*pp = f;
	f->queued = true;
	pthread_cond_broadcast(&nd->queue_cond);
}

static void dequeue_locked(struct node_fetch *f)
{
	struct node_fetch **pp;

	if (!f->queued)
		return;
	for (pp = &f->nd->queue; *pp && *pp != f; pp = &(*pp)->qnext)
		;
	if (*pp)
		*pp = f->qnext;
	f->queued = false;
}

/* How many holders of @f are good.  nd->lock held. */
static size_t good_locked(const struct node_fetch *f)
{
	size_t i, good = 0;

	for (i = 0; i < f->nholders; i++)
		good += f->mark[i] == HOLDER_GOOD;
	return good;
}

/* How many ranges of @f may run at once.  nd->lock held. */
static unsigned stream_limit_locked(const struct node_fetch *f)
{
	size_t good = good_locked(f);

	return f->nd->streams_per_holder * (unsigned)(good ? good : 1);
}

/* What a worker runs next: a range of a plain fetch, or a task of a
 * fan-out one; with a reference on the fetch. */
struct task {
	struct node_fetch *f;
	unsigned ci;
	struct fan_task ft; /* f->fan: the task */
};

/* The next task to run into *@ret, or false (then *@ret_until: the
 * mono ms by which to look again, FANPICK_NEVER-like INT64_MAX if only
 * news may help).  nd->lock held. */
static bool take_task_locked(struct node *nd, struct task *ret, int64_t *ret_until)
{
	struct node_fetch *f, *next;
	unsigned i, queued, running;

	*ret_until = INT64_MAX;
	for (f = nd->queue; f; f = next) {
		next = f->qnext;
		if (f->fan) {
			if (f->state != FETCH_RUNNING || node_fan_done_locked(f)) {
				dequeue_locked(f);
				continue;
			}
			if (node_fan_take_locked(f, &ret->ft) == 1) {
				f->refs++;
				ret->f = f;
				ret->ci = ret->ft.block;
				return true;
			}
			if (ret->ft.what != FAN_TASK_PLAIN) {
				if (ret->ft.until < *ret_until)
					*ret_until = ret->ft.until;
				continue;
			}
			/* a plain fetch from here on: its queued ranges below */
		}
		queued = f->nchunks;
		running = 0;
		for (i = 0; i < f->nchunks; i++) {
			if (f->chunks[i].state == CHUNK_QUEUED && queued == f->nchunks)
				queued = i;
			running += f->chunks[i].state == CHUNK_RUNNING;
		}
		if (f->state != FETCH_RUNNING || queued == f->nchunks) {
			dequeue_locked(f);
			continue;
		}
		if (running >= stream_limit_locked(f))
			continue; /* a worker that finishes one takes the next */
		f->chunks[queued].state = CHUNK_RUNNING;
		f->refs++;
		/* the queue holds no reference: a fetch leaves it as soon as
		 * nothing of it is left to hand out, so that it is never
		 * found there once its last reference is gone */
		for (i = queued + 1; i < f->nchunks; i++)
			if (f->chunks[i].state == CHUNK_QUEUED)
				break;
		if (i == f->nchunks)
			dequeue_locked(f);
		ret->f = f;
		ret->ci = queued;
		ret->ft.what = FAN_TASK_WAIT;
		return true;
	}
	return false;
}

/* ---- moving bytes ---- */

struct progress {
	struct node_fetch *f;
	struct chunk *c;
	uint64_t base; /* c->done when this transfer started */
	/* a fan-out block: told as arriving (node_source_partial_fetching())
	 * once its first bytes are in, not before, so that a GET parked at
	 * this node never waits on a request parked elsewhere */
	bool fan, arriving;
};

/* How many bytes from the start of @f are in place, and final: with
 * block sums, only blocks whose sum was checked (a bad one is fetched
 * again).  nd->lock held. */
static uint64_t in_place_locked(struct node_fetch *f)
{
	while (f->front < f->nchunks &&
	       (f->sums ? f->chunks[f->front].verified
			: f->chunks[f->front].done >= f->chunks[f->front].len))
		f->front++;
	if (f->front == f->nchunks)
		return f->rec.size;
	return f->chunks[f->front].off + (f->sums ? 0 : f->chunks[f->front].done);
}

static void on_progress(void *arg, uint64_t done)
{
	struct progress *p = arg;
	struct node *nd = p->f->nd;
	uint64_t front;

	pthread_mutex_lock(&nd->lock);
	if (p->base + done > p->c->done) {
		p->c->done = p->base + done;
		p->f->stall_retries = 0; /* the holders move again */
	}
	if (p->fan && !p->arriving && done) {
		p->arriving = true;
		node_source_partial_fetching(p->f->part, (uint32_t)(p->c - p->f->chunks), true);
	}
	if (p->f->waiters)
		pthread_cond_broadcast(&p->f->cond);
	front = in_place_locked(p->f);
	pthread_mutex_unlock(&nd->lock);
	/* checksum the bytes at the front as they come, while they are in
	 * the cache, so that sealing has little left to do; bytes in place
	 * are final (a resumed range starts where the last one stopped, and
	 * with block sums the front moves only over checked blocks) */
	(void)store_hash_ahead(p->f->obj, front);
}

/* Check the sum of block @c (number @ci) of @f, received whole: 0, or
 * -EBADE if it does not match (or cannot be computed). */
static int verify_block(struct node_fetch *f, struct chunk *c, unsigned ci)
{
	struct iovec iov[FETCH_IOV_MAX];
	size_t bytes = 0;
	int cnt;

	cnt = store_obj_iov(f->obj, c->off, c->len, iov, FETCH_IOV_MAX, &bytes);
	if (cnt <= 0 || bytes != c->len)
		return -EBADE;
	return bsum_block_iov(iov, cnt, f->rec.size, ci) == f->sums->sum[ci] ? 0 : -EBADE;
}

/* Receive what is missing of range @c from holder @h, straight into the
 * store pages of the object; with @flags (wire version 2), a HAVE into
 * @th. */
static int pull_flags(struct node_fetch *f, struct chunk *c, const struct meta_holder *h, bool fan,
		      unsigned flags, struct transport_have *th);

static int pull_chunk(struct node_fetch *f, struct chunk *c, const struct meta_holder *h)
{
	return pull_flags(f, c, h, false, 0, NULL);
}

static int pull_flags(struct node_fetch *f, struct chunk *c, const struct meta_holder *h, bool fan,
		      unsigned flags, struct transport_have *th)
{
	struct node *nd = f->nd;
	struct iovec iov[FETCH_IOV_MAX];
	struct progress p = {.f = f, .c = c, .fan = fan};
	struct transport_req req = {
	    .peer = h->node,
	    .addr = h->addr,
	    .rdma_addr = h->rdma,
	    .caps = h->caps,
	    .flags = flags,
	    .have_out = th,
	    .region = f->region,
	    .id = f->id,
	    .iov = iov,
	    .progress = on_progress,
	    .arg = &p,
	};
	uint64_t pos, end = c->off + c->len;
	size_t bytes;
	int cnt, r;

	for (;;) {
		pthread_mutex_lock(&nd->lock);
		p.base = c->done;
		pthread_mutex_unlock(&nd->lock);
		pos = c->off + p.base;
		if (pos >= end)
			return 0;
		cnt = store_obj_iov(f->obj, pos, end - pos, iov, FETCH_IOV_MAX, &bytes);
		if (cnt < 0)
			return cnt;
		if (cnt == 0 || bytes == 0)
			return -EIO; /* the reservation does not cover the range */
		req.off = pos;
		req.len = bytes;
		req.iovcnt = cnt;
		r = transport_fetch(nd->transport, &req);
		if (r < 0)
			return r;
		NODE_COUNT(nd, bytes, bytes);
	}
}

/* ---- the end of a fetch ---- */

void node_fetch_end_serving(struct node_fetch *f, bool failed)
{
	struct node_partial *p;

	pthread_mutex_lock(&f->nd->lock);
	p = f->part;
	f->part = NULL;
	pthread_mutex_unlock(&f->nd->lock);
	if (!p)
		return;
	node_source_partial_end(f->nd->source, p);
	/* a sealed copy's registration as a holder removes its entry */
	if (failed && meta_fan_leave(f->nd->meta, f->id) < 0)
		log_debug("object %" PRIu64 ": cannot withdraw this node as a fetcher from "
			  "Redis; the entry lapses",
			  f->id);
}

void node_fetch_fail(struct node_fetch *f, const char *why)
{
	struct node *nd = f->nd;
	bool was_running;

	pthread_mutex_lock(&nd->lock);
	was_running = f->state == FETCH_RUNNING;
	if (was_running) {
		f->state = FETCH_FAILED;
		f->err = -EIO;
		dequeue_locked(f);
		pthread_cond_broadcast(&f->cond);
	}
	pthread_mutex_unlock(&nd->lock);
	if (!was_running)
		return;
	log_msg_limited(&failed_rl, LOGL_ERROR,
			"fetch of object %" PRIu64 " (%" PRIu64 " bytes) failed: %s; reads get EIO",
			f->id, f->rec.size, why);
	NODE_COUNT(nd, failed, 1);
	node_fetch_end_serving(f, true);
	store_unlink(f->obj);
	node_fetch_untable(f);
	/* Bytes that readers got before the failure may be cached above,
	 * and may be bad.  Only fetches run by the workers can have given
	 * any out (a small one ends before its open is answered), and only
	 * a worker may wait for the layer above here. */
	if (f->rec.size > nd->sync_max && nd->hooks.failed)
		nd->hooks.failed(nd->hooks.ctx, f->id);
}

void node_fetch_after_seal(struct node_fetch *f)
{
	struct node *nd = f->nd;
	char path[OBJFS_PATH_MAX];
	unsigned stale = 0;
	int r;

	/* one round trip: the holder, and the catalog path of the copy (the
	 * full path of the name its first open came by if that name still
	 * names it, else where its record says it is, else "": reconciling
	 * fixes it later) */
	path[0] = '\0';
	if (f->copy_sums) {
		char *text = node_bsum_text(f->copy_sums);

		r = meta_add_holder_at(nd->meta, &f->rec, text, f->parent, f->name, &stale, path);
		free(text);
	} else {
		r = meta_add_holder_at(nd->meta, &f->rec, NULL, f->parent, f->name, &stale, path);
	}
	if (stale) {
		NODE_COUNT(nd, stale_holders, stale);
		log_msg_limited(&stale_rl, LOGL_INFO,
				"object %" PRIu64
				": dropped %u holder entries of nodes that are gone",
				f->id, stale);
	}
	if (r == -ENOENT) {
		/* its readers keep it until they close it; nobody else may
		 * find it here, and no record must bring it back */
		log_msg_limited(&dropped_rl, LOGL_INFO,
				"object %" PRIu64 " was deleted while it was fetched; "
				"dropping the copy once its readers close it",
				f->id);
	} else if (r == -ENOTUNIQ) {
		/* Redis lost the object and its id now names other bytes:
		 * this copy is not that object, and no one else may get it */
		log_msg_limited(&dropped_rl, LOGL_WARN,
				"object %" PRIu64
				" was fetched, but its record now describes other "
				"bytes; dropping the copy once its readers close it",
				f->id);
	}
	if (r == -ENOENT || r == -ENOTUNIQ) {
		store_unlink(f->obj);
		node_fetch_untable(f);
		return;
	}
	if (r < 0)
		log_msg_limited(&register_rl, LOGL_WARN,
				"object %" PRIu64
				" was fetched but could not be registered as held "
				"here: %s",
				f->id, strerror(-r));
	/* the catalog record: from now on the copy survives a restart */
	r = store_set_path(f->obj, path);
	if (r < 0 && r != -ENOENT)
		log_msg_limited(&register_rl, LOGL_WARN,
				"object %" PRIu64 ": cannot write its catalog record: %s", f->id,
				strerror(-r));
	node_touch(nd, f->id);
	node_fetch_untable(f);
}

bool node_fetch_finish(struct node_fetch *f)
{
	struct node *nd = f->nd;
	char want[OBJFS_CSUM_HEX], got[OBJFS_CSUM_HEX];
	uint8_t csum[OBJFS_CSUM_LEN];
	int r;

	/* a record without block sums gets them from this copy, once its
	 * whole checksum matched (node_fetch_after_seal()) */
	r = store_seal_sums(f->obj, NULL, f->rec.mtime_ns,
			    f->sums || f->rec.size <= nd->sync_max ? NULL : &f->copy_sums);
	if (r < 0) {
		node_fetch_fail(f, strerror(-r));
		return false;
	}
	store_obj_csum(f->obj, csum);
	if (memcmp(csum, f->rec.csum, OBJFS_CSUM_LEN)) {
		util_csum_to_hex(f->rec.csum, want);
		util_csum_to_hex(csum, got);
		NODE_COUNT(nd, csum_failures, 1);
		log_msg_limited(&csum_rl, LOGL_ERROR,
				"object %" PRIu64
				": the fetched bytes have checksum %s, the record "
				"says %s; discarding the copy",
				f->id, got, want);
		node_fetch_fail(f, "checksum mismatch");
		return false;
	}
	pthread_mutex_lock(&nd->lock);
	f->state = FETCH_DONE;
	dequeue_locked(f);
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&nd->lock);
	/* sealed: served whole from now on */
	node_fetch_end_serving(f, false);
	NODE_COUNT(nd, done, 1);
	log_debug("fetched object %" PRIu64 " (%" PRIu64 " bytes) in %.1f ms", f->id, f->rec.size,
		  (double)(util_mono_ns() - f->started_ns) / 1e6);
	/* it stays in the table until node_fetch_after_seal() has registered
	 * it: until then eviction must leave the copy alone */
	return true;
}

/* The backoff before retry @n (from 1) of a stalled holder. */
static unsigned stall_backoff_ms(const struct node *nd, unsigned n)
{
	unsigned ms = nd->io_timeout_ms / 4;

	while (--n && ms < nd->io_timeout_ms)
		ms *= 2;
	return ms < nd->io_timeout_ms ? ms : nd->io_timeout_ms;
}

/* Wait @ms, or less if @f stops running or the node stops.  True if
 * @f is still to run. */
static bool backoff(struct node_fetch *f, unsigned ms)
{
	struct node *nd = f->nd;
	int64_t end = util_mono_ns() + (int64_t)ms * 1000000, left;
	struct timespec until;
	bool run;

	pthread_mutex_lock(&nd->lock);
	while ((run = f->state == FETCH_RUNNING && !nd->stopping) &&
	       (left = end - util_mono_ns()) > 0) {
		/* the deadline is monotonic; the condition's clock is not */
		clock_gettime(CLOCK_REALTIME, &until);
		left += until.tv_nsec;
		until.tv_sec += left / 1000000000;
		until.tv_nsec = left % 1000000000;
		pthread_cond_timedwait(&f->cond, &nd->lock, &until);
	}
	pthread_mutex_unlock(&nd->lock);
	return run;
}

/*
 * No holder of @f is good: if one of them stalled, ask it again (see
 * FETCH_STALL_RETRIES); else locate them once more, unless that was done
 * often enough already.  Nothing if another worker is at it.  0 to look
 * again, or -errno (the fetch is then failed here).
 */
static int relocate_or_fail(struct node_fetch *f, unsigned gen)
{
	struct node *nd = f->nd;
	char why[192], stalled[OBJFS_NODE_MAX] = "";
	unsigned retry = 0, ms;
	bool again;
	int k, r;

	pthread_mutex_lock(&nd->lock);
	if (f->relocating || f->gen != gen) {
		pthread_mutex_unlock(&nd->lock);
		return 0; /* the list changed: look again */
	}
	k = node_fetch_holder_stalled_locked(f);
	if (k >= 0)
		snprintf(stalled, sizeof(stalled), "%s", f->holders[k].node);
	if (k >= 0 && f->stall_retries < FETCH_STALL_RETRIES) {
		retry = ++f->stall_retries;
		again = true;
	} else {
		again = f->relocations++ < RELOCATE_MAX + (f->guessed ? 1 : 0);
	}
	f->relocating = again;
	pthread_mutex_unlock(&nd->lock);
	if (retry) {
		ms = stall_backoff_ms(nd, retry);
		log_msg_limited(&stall_rl, LOGL_WARN,
				"object %" PRIu64
				": no holder left but '%s', which stalled; asking it "
				"again on a fresh connection in %u ms if its node card is live "
				"(retry %u of %u)",
				f->id, stalled, ms, retry, FETCH_STALL_RETRIES);
		r = backoff(f, ms) ? node_fetch_holder_relocate(f, true) : -ECANCELED;
	} else {
		r = again ? node_fetch_holder_relocate(f, false) : -EHOSTUNREACH;
	}
	if (again) {
		pthread_mutex_lock(&nd->lock);
		f->relocating = false;
		f->gen++;
		pthread_cond_broadcast(&f->cond);
		pthread_mutex_unlock(&nd->lock);
	}
	if (r == 0)
		return 0;
	if (r == -ECANCELED)
		snprintf(why, sizeof(why), "the node is stopping");
	else if (r == -EIO)
		snprintf(why, sizeof(why),
			 "no holder of it is reachable (and Redis is unreachable)");
	else if (stalled[0] && !retry)
		snprintf(why, sizeof(why),
			 "no holder of it is reachable (holder '%s' stalled %u more times on "
			 "fresh connections)",
			 stalled, FETCH_STALL_RETRIES);
	else
		snprintf(why, sizeof(why), "no holder of it is reachable");
	node_fetch_fail(f, why);
	return r;
}

bool node_fetch_run_chunk(struct node_fetch *f, unsigned ci)
{
	struct node *nd = f->nd;
	struct chunk *c = &f->chunks[ci];
	struct meta_holder h;
	uint64_t front, at;
	unsigned gen;
	size_t left;
	int k, r;

	for (;;) {
		pthread_mutex_lock(&nd->lock);
		/* another worker is asking Redis for holders: use its answer */
		while (f->relocating && f->state == FETCH_RUNNING)
			pthread_cond_wait(&f->cond, &nd->lock);
		if (f->state != FETCH_RUNNING) {
			pthread_mutex_unlock(&nd->lock);
			return false;
		}
		k = node_fetch_holder_pick_locked(f);
		if (k >= 0)
			h = f->holders[k];
		gen = f->gen;
		pthread_mutex_unlock(&nd->lock);
		if (k < 0) {
			if (relocate_or_fail(f, gen) < 0)
				return false;
			continue;
		}
		r = pull_chunk(f, c, &h);
		if (r == 0 && f->sums)
			r = verify_block(f, c, ci);
		pthread_mutex_lock(&nd->lock);
		if (r == 0) {
			c->state = CHUNK_DONE;
			c->verified = f->sums != NULL;
			node_source_partial_have(f->part, ci);
			f->ndone++;
			pthread_cond_broadcast(&f->cond);
			front = in_place_locked(f);
			r = f->ndone == f->nchunks && f->state == FETCH_RUNNING;
			pthread_mutex_unlock(&nd->lock);
			if (f->sums)
				(void)store_hash_ahead(f->obj, front);
			return r;
		}
		if (f->state != FETCH_RUNNING) {
			pthread_mutex_unlock(&nd->lock);
			return false;
		}
		/* a block comes whole from one holder, so that a bad one has
		 * one sender to blame */
		at = r == -EBADE ? c->off : c->off + c->done;
		if (f->sums)
			c->done = 0;
		/* a stall may be retried (relocate_or_fail()) */
		node_fetch_holder_mark_locked(f, k, &h,
					      r == -ETIMEDOUT ? HOLDER_STALLED : HOLDER_BAD);
		left = good_locked(f);
		pthread_mutex_unlock(&nd->lock);
		if (r == -EBADE) {
			NODE_COUNT(nd, csum_failures, 1);
			node_fetch_peer_blame(nd, h.node);
		} else if (r != -ENOENT && r != -ERANGE) {
			transport_forget_peer(nd->transport, h.node);
			node_fetch_peer_del(nd, h.node);
		}
		NODE_COUNT(nd, failovers, 1);
		log_warn("object %" PRIu64 ": holder '%s' (%s) %s at offset %" PRIu64 "; %s", f->id,
			 h.node, h.addr[0] ? h.addr : h.rdma, node_fetch_holder_errname(r), at,
			 left ? "trying another holder" : "no other holder is left");
	}
}

/* ---- workers ---- */

/*
 * Run block task @t of fan-out fetch @f: the block whole from one
 * source, then its sum.  A source of wire version 2 is asked with
 * WANT_HAVE (what it has comes with every answer) and BUSY_OK (at its
 * serve_slots it answers "busy, ask again after ..." rather than share
 * its rate) and PARTIAL_OK (a partial source answers HAVE alone if it
 * has not the block yet, a full one if it gave the block out to another
 * fetcher already), a partial one also with PARK (a block arriving
 * there is sent once it checks out).  A late GET to a full holder (fanpick's rule 3
 * waited long enough) is a plain one, which every holder serves.  True
 * if that was the last block.
 */
/* TRANSPORT_F_PARK for a GET of @t if the source can hold it (not over
 * RDMA: its server answers on one thread) and a share of the fetch
 * workers is left for parked GETs (then it takes one: nd->parking,
 * given back after the GET), else 0. */
static unsigned park_flag(struct node *nd, const struct fan_task *t)
{
	if (!transport_parks(nd->transport, t->h.node, t->h.caps, t->h.rdma))
		return 0;
	if (atomic_fetch_add(&nd->parking, 1) < (nd->nworkers + 1) / 2)
		return TRANSPORT_F_PARK;
	atomic_fetch_sub(&nd->parking, 1);
	return 0;
}

static bool fan_run(struct node_fetch *f, const struct fan_task *t)
{
	struct node *nd = f->nd;
	struct chunk *c = &f->chunks[t->block];
	struct transport_have th;
	unsigned flags = 0;
	uint64_t front;
	bool last, v2;
	int r;

	memset(&th, 0, sizeof(th));
	th.shift = 0xff; /* no HAVE yet */
	v2 = transport_speaks_fan1(nd->transport, t->h.caps);
	if (v2 && !t->full) {
		flags = TRANSPORT_F_PARTIAL_OK | TRANSPORT_F_WANT_HAVE | TRANSPORT_F_BUSY_OK |
			park_flag(nd, t);
	} else if (v2 && !t->late &&
		   !transport_plain_rdma(nd->transport, t->h.node, t->h.caps, t->h.rdma)) {
		/* (flags would take it off RDMA to a holder without "rfan":
		 * a plain GET there); PARTIAL_OK: a block it gave out to
		 * another fetcher is "ask that one"; PARK: if this node alone
		 * asks it, the GET waits there for a slot */
		flags = TRANSPORT_F_PARTIAL_OK | TRANSPORT_F_WANT_HAVE | TRANSPORT_F_BUSY_OK |
			park_flag(nd, t);
	}
	pthread_mutex_lock(&nd->lock);
	c->done = 0;
	pthread_mutex_unlock(&nd->lock);
	r = pull_flags(f, c, &t->h, true, flags, flags ? &th : NULL);
	if (flags & TRANSPORT_F_PARK)
		atomic_fetch_sub(&nd->parking, 1);
	if (r == 0)
		r = verify_block(f, c, t->block);
	if (r == -ENOENT && !t->full)
		r = -EAGAIN; /* a fetcher of wire version 1, or done with it */
	last = node_fan_block_end(f, t, r, &th, th.shift != 0xff);
	pthread_mutex_lock(&nd->lock);
	front = in_place_locked(f);
	pthread_mutex_unlock(&nd->lock);
	if (r == 0)
		(void)store_hash_ahead(f->obj, front);
	return last;
}

/* Ask source @t of @f what it has: a zero-length GET with WANT_HAVE. */
static void fan_query(struct node_fetch *f, const struct fan_task *t)
{
	struct transport_have th;
	struct transport_req req = {
	    .peer = t->h.node,
	    .addr = t->h.addr,
	    .rdma_addr = t->h.rdma,
	    .caps = t->h.caps,
	    .flags = TRANSPORT_F_WANT_HAVE,
	    .have_out = &th,
	    .id = f->id,
	};
	int r;

	memset(&th, 0, sizeof(th));
	r = transport_fetch(f->nd->transport, &req);
	node_fan_query_end(f, t, r, &th);
}

/* Run @t; true if the fetch's last block came in with it. */
static bool run_task(struct task *t)
{
	switch (t->ft.what) {
	case FAN_TASK_BLOCK:
		return fan_run(t->f, &t->ft);
	case FAN_TASK_QUERY:
		fan_query(t->f, &t->ft);
		return false;
	case FAN_TASK_LOCATE:
		(void)node_fan_locate(t->f);
		return false;
	default:
		return node_fetch_run_chunk(t->f, t->ci);
	}
}

static void *worker_main(void *arg)
{
	struct node *nd = arg;
	struct timespec until;
	struct task t;
	int64_t wake;

	pthread_mutex_lock(&nd->lock);
	while (!nd->stopping) {
		if (!take_task_locked(nd, &t, &wake)) {
			if (wake == INT64_MAX) {
				pthread_cond_wait(&nd->queue_cond, &nd->lock);
				continue;
			}
			/* a fan-out fetch holds a block back until then */
			wake -= util_mono_ns() / 1000000;
			clock_gettime(CLOCK_REALTIME, &until);
			wake = wake < 1 ? 1 : wake;
			until.tv_sec += wake / 1000;
			until.tv_nsec += (wake % 1000) * 1000000;
			if (until.tv_nsec >= 1000000000) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&nd->queue_cond, &nd->lock, &until);
			continue;
		}
		pthread_mutex_unlock(&nd->lock);
		if (run_task(&t) && node_fetch_finish(t.f))
			node_fetch_after_seal(t.f);
		node_fetch_put(t.f);
		pthread_mutex_lock(&nd->lock);
	}
	pthread_mutex_unlock(&nd->lock);
	return NULL;
}

int node_fetch_start_workers(struct node *nd, unsigned n)
{
	sigset_t all, old;
	unsigned i;
	int r = 0;

	/* signals belong to the threads of the layer above */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (i = 0; i < n && i < FETCH_WORKERS_MAX; i++) {
		r = -pthread_create(&nd->workers[i], NULL, worker_main, nd);
		if (r)
			break;
		nd->nworkers++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
}

void node_fetch_stop_workers(struct node *nd)
{
	struct node_fetch *f, *tmp;
	unsigned i;

	pthread_mutex_lock(&nd->lock);
	nd->stopping = true;
	pthread_cond_broadcast(&nd->queue_cond);
	/* workers backing off before a retry */
	HASH_ITER (hh, nd->fetches, f, tmp)
		pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&nd->lock);
	for (i = 0; i < nd->nworkers; i++)
		pthread_join(nd->workers[i], NULL);
	nd->nworkers = 0;
}

void node_fetch_drop_all(struct node *nd)
{
	struct node_fetch *f;
	bool failed;

	pthread_mutex_lock(&nd->lock);
	while ((f = nd->fetches)) {
		HASH_DELETE(hh, nd->fetches, f);
		f->in_table = false;
		if (f->state == FETCH_RUNNING)
			f->state = FETCH_FAILED;
		failed = f->state == FETCH_FAILED;
		dequeue_locked(f);
		pthread_cond_broadcast(&f->cond);
		pthread_mutex_unlock(&nd->lock);
		node_fetch_end_serving(f, failed);
		if (failed)
			store_unlink(f->obj);
		node_fetch_put(f);
		pthread_mutex_lock(&nd->lock);
	}
	pthread_mutex_unlock(&nd->lock);
}
