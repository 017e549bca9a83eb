/*
 * fs_fetch: bringing another node's object here, on open().
 *
 *   open ──► fetch_open: join the fetch of this id if one runs (single
 *            flight), else locate the object (record + live holders, one
 *            Redis call), reserve its pages in the store and start one
 *   fetch ──► chunks of the object go to a pool of worker threads; each
 *            worker borrows a connection to one holder (round robin over
 *            the live holders, so several holders serve one object) and
 *            receives the bytes straight into the reserved store pages
 *   read ──► fetch_wait: waits only until the chunks covering its range
 *            have arrived (streaming), then replies from the store pages
 *   last chunk ──► seal: checksum compared with the record (a mismatch
 *            discards the copy and fails the fetch with EIO), then this
 *            node is added to the holders
 *
 * Where to fetch from.  The object record comes with the inode (lookup
 * read it), and the addresses of the nodes seen as holders are kept for
 * PEER_CACHE_NS.  So an open of an object whose origin node's address is
 * known goes straight to that node, without a Redis round trip; only if
 * that node fails (it evicted the object, it died) are the holders
 * located in Redis, as they are when nothing is known.
 *
 * Objects up to FETCH_SYNC_MAX are fetched by the opening thread itself,
 * before open() returns: a hand-off to a worker would cost more than the
 * transfer.
 *
 * Failure.  A chunk that fails (connection refused or reset, a holder that
 * stalls past the transport's I/O timeout, a holder that no longer has the
 * object) marks that holder bad for this fetch and goes back to the
 * queue, resuming where it stopped; another holder finishes it.  When no
 * good holder is left, the holders are located once more (someone may have
 * fetched it meanwhile); if still none, the fetch fails: every waiting and
 * later read of it gets EIO, and the reserved pages are freed.  Nothing
 * waits without a bound: every transfer step is bounded by the transport's
 * timeout.
 *
 * Locking: fs->flock guards the queue, every fetch's state and chunks, and
 * the fetch refcounts; readers wait on the fetch's own condition.  Lock
 * order: fs->lock before fs->flock.  No lock is held across a transfer or
 * a Redis call.
 */
#include "fs_i.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "transport.h"

#define FETCH_SYNC_MAX (1u << 20)
#define CHUNK_MIN (8u << 20)
#define CHUNKS_MAX 4096
#define FETCH_IOV_MAX 64
/* Ranges of one object fetched at once from each holder.  Loopback
 * measurements: 2 streams moved 1 GiB in 0.30 s, 8 in 0.40 s (more
 * streams compete for the same cores, and the reader's next bytes and
 * the checksum's wait behind the others). */
#define STREAMS_PER_HOLDER 2
#define RELOCATE_MAX 1
#define PEER_CACHE_NS (10 * 1000000000LL)
#define PEER_CACHE_MAX 4096

enum chunk_state {
	CHUNK_QUEUED,
	CHUNK_RUNNING,
	CHUNK_DONE,
};

struct chunk {
	uint64_t off, len;
	uint64_t done;		/* bytes from off in place; fs->flock */
	enum chunk_state state;	/* fs->flock */
};

enum fetch_state {
	FETCH_STARTING,		/* the first open is locating and reserving */
	FETCH_RUNNING,
	FETCH_DONE,
	FETCH_FAILED,
};

struct fetch {
	uint64_t id;
	struct fs *fs;
	struct meta_obj rec;	/* the object record */
	struct store_obj *obj;	/* reserved, pending until sealed; owned */
	unsigned refs;		/* table, handles, running workers; fs->flock */
	enum fetch_state state;	/* fs->flock */
	int err;		/* why it failed (-errno); fs->flock */
	pthread_cond_t cond;	/* readers wait here */
	unsigned waiters;	/* fs->flock */
	struct chunk *chunks;
	unsigned nchunks, ndone;	/* fs->flock */
	unsigned front;		/* chunks before it are all in place; fs->flock */
	struct meta_holder *holders;	/* fs->flock */
	bool *bad;		/* per holder; fs->flock */
	size_t nholders;	/* fs->flock */
	unsigned rr;		/* next holder, round robin; fs->flock */
	unsigned relocations;	/* fs->flock */
	bool guessed;		/* holders from the address cache, not Redis */
	bool relocating;	/* a worker is locating holders again; fs->flock */
	unsigned gen;		/* holder list replacements; fs->flock */
	bool queued;		/* on fs->fq; fs->flock */
	bool post_seal;		/* sealed in open(): after_seal() still to run; fs->flock */
	bool in_table;		/* in fs->fetches; fs->lock */
	int64_t started_ns;
	struct fetch *qnext;	/* fs->flock */
	UT_hash_handle hh;	/* fs->fetches, by id; fs->lock */
};

/* ---- refcounts and lookups ---- */

static void fetch_free(struct fetch *f)
{
	store_obj_unref(f->obj);
	pthread_cond_destroy(&f->cond);
	free(f->chunks);
	free(f->holders);
	free(f->bad);
	free(f);
}

void fetch_put(struct fs *fs, struct fetch *f)
{
	bool last;

	if (!f)
		return;
	pthread_mutex_lock(&fs->flock);
	last = --f->refs == 0;
	pthread_mutex_unlock(&fs->flock);
	if (last)
		fetch_free(f);
}

/* Remove @f from the table of running fetches (new opens then see the
 * sealed object, or start afresh after a failure). */
static void untable(struct fs *fs, struct fetch *f)
{
	bool drop = false;

	pthread_mutex_lock(&fs->lock);
	if (f->in_table) {
		HASH_DELETE(hh, fs->fetches, f);
		f->in_table = false;
		drop = true;
	}
	pthread_mutex_unlock(&fs->lock);
	if (drop)
		fetch_put(fs, f);
}

/* ---- the queue ---- */

/* Called with fs->flock held. */
static void enqueue(struct fs *fs, struct fetch *f)
{
	struct fetch **pp;

	if (f->queued)
		return;
	for (pp = &fs->fq; *pp; pp = &(*pp)->qnext)
		;
	f->qnext = NULL;
	*pp = f;
	f->queued = true;
	pthread_cond_broadcast(&fs->fq_cond);
}

/* Called with fs->flock held. */
static void dequeue(struct fs *fs, struct fetch *f)
{
	struct fetch **pp;

	if (!f->queued)
		return;
	for (pp = &fs->fq; *pp && *pp != f; pp = &(*pp)->qnext)
		;
	if (*pp)
		*pp = f->qnext;
	f->queued = false;
}

/* How many chunks of one fetch may run at once: STREAMS_PER_HOLDER for
 * each holder not found bad.  fs->flock held. */
static unsigned stream_limit(const struct fetch *f)
{
	size_t i, good = 0;

	for (i = 0; i < f->nholders; i++)
		good += !f->bad[i];
	return STREAMS_PER_HOLDER * (unsigned)(good ? good : 1);
}

/* The first queued chunk of the first fetch in the queue that is below
 * its stream limit (lowest offset first, so that a reader at the head is
 * served first).  Called with fs->flock held; takes a reference on the
 * fetch. */
static bool take_task(struct fs *fs, struct fetch **ret_f, unsigned *ret_ci)
{
	struct fetch *f = fs->fq, *next;
	unsigned i, queued, running;

	for (; f; f = next) {
		next = f->qnext;
		queued = f->nchunks;
		running = 0;
		for (i = 0; i < f->nchunks; i++) {
			if (f->chunks[i].state == CHUNK_QUEUED && queued == f->nchunks)
				queued = i;
			running += f->chunks[i].state == CHUNK_RUNNING;
		}
		if (f->state != FETCH_RUNNING || queued == f->nchunks) {
			dequeue(fs, f);
			continue;
		}
		if (running >= stream_limit(f))
			continue;	/* a worker that finishes one takes the next */
		f->chunks[queued].state = CHUNK_RUNNING;
		f->refs++;
		*ret_f = f;
		*ret_ci = queued;
		return true;
	}
	return false;
}

/* ---- holders ---- */

/* A node's transport address, as a holder list from Redis gave it. */
struct peer_addr {
	char node[OBJFS_NODE_MAX];
	struct meta_holder h;
	int64_t at;		/* mono_ns() when learnt */
	UT_hash_handle hh;
};

static void peer_cache_put(struct fs *fs, const struct meta_holder *hs, size_t n)
{
	struct peer_addr *p;
	size_t i;

	pthread_mutex_lock(&fs->lock);
	for (i = 0; i < n; i++) {
		HASH_FIND_STR(fs->peer_addrs, hs[i].node, p);
		if (!p) {
			if (HASH_COUNT(fs->peer_addrs) >= PEER_CACHE_MAX)
				break;
			p = calloc(1, sizeof(*p));
			if (!p)
				break;
			snprintf(p->node, sizeof(p->node), "%s", hs[i].node);
			HASH_ADD_STR(fs->peer_addrs, node, p);
			{
				struct peer_addr *added;

				HASH_FIND_STR(fs->peer_addrs, hs[i].node, added);
				if (!added) {	/* the table could not grow */
					free(p);
					break;
				}
			}
		}
		p->h = hs[i];
		p->at = mono_ns();
	}
	pthread_mutex_unlock(&fs->lock);
}

static bool peer_cache_get(struct fs *fs, const char *node, struct meta_holder *ret)
{
	struct peer_addr *p;
	bool found = false;

	pthread_mutex_lock(&fs->lock);
	HASH_FIND_STR(fs->peer_addrs, node, p);
	if (p && mono_ns() - p->at < PEER_CACHE_NS) {
		*ret = p->h;
		found = true;
	}
	pthread_mutex_unlock(&fs->lock);
	return found;
}

static void peer_cache_del(struct fs *fs, const char *node)
{
	struct peer_addr *p;

	pthread_mutex_lock(&fs->lock);
	HASH_FIND_STR(fs->peer_addrs, node, p);
	if (p) {
		HASH_DELETE(hh, fs->peer_addrs, p);
		free(p);
	}
	pthread_mutex_unlock(&fs->lock);
}

void fetch_peer_cache_free(struct fs *fs)
{
	struct peer_addr *p, *tmp;

	HASH_ITER(hh, fs->peer_addrs, p, tmp) {
		HASH_DELETE(hh, fs->peer_addrs, p);
		free(p);
	}
}

/* Called with fs->flock held.  -1 if every holder is bad. */
static int pick_holder(struct fetch *f)
{
	size_t i, k;

	for (i = 0; i < f->nholders; i++) {
		k = (f->rr + i) % f->nholders;
		if (!f->bad[k]) {
			f->rr = (unsigned)(k + 1);
			return (int)k;
		}
	}
	return -1;
}

static bool usable_holder(const struct fs *fs, const struct meta_holder *h)
{
	return transport_reaches(fs->cfg.transport, h->caps, h->addr);
}

/* Replace the holder list of @f with a fresh one from Redis, keeping
 * holders already found bad marked bad (unless their address changed: a
 * node that restarted).  0 if at least one good holder. */
static int relocate(struct fs *fs, struct fetch *f)
{
	struct meta_holder *hs = NULL, *old;
	struct meta_obj rec;
	unsigned stale = 0;
	size_t n = 0, i, j, good = 0;
	bool *bad;
	int r;

	r = meta_locate(fs->meta, f->id, &rec, &hs, &n, &stale);
	if (stale)
		__atomic_add_fetch(&fs->n_stale_holders, stale, __ATOMIC_RELAXED);
	if (r < 0)
		return r;
	peer_cache_put(fs, hs, n);
	bad = calloc(n ? n : 1, sizeof(*bad));
	if (!bad) {
		free(hs);
		return -ENOMEM;
	}
	pthread_mutex_lock(&fs->flock);
	for (i = 0; i < n; i++) {
		for (j = 0; j < f->nholders; j++)
			if (f->bad[j] && !strcmp(f->holders[j].node, hs[i].node) &&
			    !strcmp(f->holders[j].addr, hs[i].addr))
				bad[i] = true;
		if (!usable_holder(fs, &hs[i]))
			bad[i] = true;
		if (!bad[i])
			good++;
	}
	old = f->holders;
	free(f->bad);
	f->holders = hs;
	f->bad = bad;
	f->nholders = n;
	pthread_mutex_unlock(&fs->flock);
	free(old);
	return good ? 0 : -EHOSTUNREACH;
}

/* ---- moving bytes ---- */

struct progress {
	struct fs *fs;
	struct fetch *f;
	struct chunk *c;
	uint64_t base;		/* c->done when this transfer started */
};

/* How many bytes from the start of @f are in place.  fs->flock held. */
static uint64_t in_place(struct fetch *f)
{
	while (f->front < f->nchunks && f->chunks[f->front].done >= f->chunks[f->front].len)
		f->front++;
	if (f->front == f->nchunks)
		return f->rec.size;
	return f->chunks[f->front].off + f->chunks[f->front].done;
}

static void on_progress(void *arg, uint64_t done)
{
	struct progress *p = arg;
	uint64_t front;

	pthread_mutex_lock(&p->fs->flock);
	if (p->base + done > p->c->done)
		p->c->done = p->base + done;
	if (p->f->waiters)
		pthread_cond_broadcast(&p->f->cond);
	front = in_place(p->f);
	pthread_mutex_unlock(&p->fs->flock);
	/* checksum the bytes at the front as they come, while they are in
	 * the cache, so that sealing has little left to do; bytes in place
	 * are final (a resumed range starts where the last one stopped) */
	(void)store_hash_ahead(p->f->obj, front);
}

/* Receive what is missing of chunk @c from holder @h, straight into the
 * store pages of the object. */
static int pull_chunk(struct fs *fs, struct fetch *f, struct chunk *c, const struct meta_holder *h)
{
	struct iovec iov[FETCH_IOV_MAX];
	struct progress p = { .fs = fs, .f = f, .c = c };
	struct transport_req req = { .peer = h->node, .addr = h->addr, .id = f->id, .iov = iov,
				     .progress = on_progress, .arg = &p };
	uint64_t pos, end = c->off + c->len;
	size_t bytes;
	int cnt, r;

	for (;;) {
		pthread_mutex_lock(&fs->flock);
		p.base = c->done;
		pthread_mutex_unlock(&fs->flock);
		pos = c->off + p.base;
		if (pos >= end)
			return 0;
		cnt = store_obj_iov(f->obj, pos, end - pos, iov, FETCH_IOV_MAX, &bytes);
		if (cnt < 0)
			return cnt;
		if (cnt == 0 || bytes == 0)
			return -EIO;	/* the reservation does not cover the range */
		req.off = pos;
		req.len = bytes;
		req.iovcnt = cnt;
		r = transport_fetch(fs->cfg.transport, &req);
		if (r < 0)
			return r;
		__atomic_add_fetch(&fs->n_fetch_bytes, bytes, __ATOMIC_RELAXED);
	}
}

static const char *errname(int err)
{
	switch (-err) {
	case ENOENT:
		return "does not hold it";
	case ETIMEDOUT:
		return "stalled";
	case ECONNREFUSED:
		return "refused the connection";
	case ECONNRESET:
		return "went away";
	case EACCES:
		return "refused authentication";
	case EPROTO:
		return "sent a malformed reply";
	default:
		return strerror(-err);
	}
}

/* ---- the end of a fetch ---- */

static void fail_fetch(struct fs *fs, struct fetch *f, const char *why)
{
	bool was_running;

	pthread_mutex_lock(&fs->flock);
	was_running = f->state == FETCH_RUNNING;
	if (was_running) {
		f->state = FETCH_FAILED;
		f->err = -EIO;
		dequeue(fs, f);
		pthread_cond_broadcast(&f->cond);
	}
	pthread_mutex_unlock(&fs->flock);
	if (!was_running)
		return;
	log_error("fetch of object %" PRIu64 " (%" PRIu64 " bytes) failed: %s; reads get EIO",
		  f->id, f->rec.size, why);
	__atomic_add_fetch(&fs->n_fetch_failed, 1, __ATOMIC_RELAXED);
	store_unlink(f->obj);
	untable(fs, f);
	/* Pages that readers got before the failure may sit in the kernel's
	 * cache, and may be bad: drop them, so that the next open reads what
	 * the next fetch brings.  Only fetches run by the workers can have
	 * such pages (a small one ends before its open is answered), and
	 * only a worker, which serves no FUSE request, may wait here for
	 * the kernel (the readers woken above answer theirs first). */
	if (f->rec.size > FETCH_SYNC_MAX && fs->se && fs->mounted)
		fuse_lowlevel_notify_inval_inode(fs->se, f->id, 0, 0);
}

/* Record where the object is known by, for the catalog (used if Redis
 * ever loses its data), and tell Redis this node holds it now.  After the
 * readers were woken: none of this is on their path. */
static void after_seal(struct fs *fs, struct fetch *f)
{
	char path[OBJFS_PATH_MAX];
	enum meta_kind kind;
	uint64_t parent = 0, id = 0;
	char *name = NULL;
	unsigned stale = 0;
	struct inode *in;
	int r;

	r = meta_add_holder_prune(fs->meta, f->id, &stale);
	if (stale) {
		__atomic_add_fetch(&fs->n_stale_holders, stale, __ATOMIC_RELAXED);
		log_info("object %" PRIu64 ": dropped %u holder entries of nodes that are gone",
			 f->id, stale);
	}
	if (r == -ENOENT)
		log_info("object %" PRIu64 " was deleted while it was fetched", f->id);
	else if (r < 0)
		log_warn("object %" PRIu64 " was fetched but could not be registered as held "
			 "here: %s",
			 f->id, strerror(-r));
	pthread_mutex_lock(&fs->lock);
	in = inode_find(fs, f->id);
	if (in && in->name) {
		parent = in->parent;
		name = strdup(in->name);
	}
	pthread_mutex_unlock(&fs->lock);
	if (!name || meta_path(fs->meta, parent, name, &kind, &id, path) < 0 || id != f->id)
		path[0] = '\0';
	free(name);
	/* the catalog record: from now on the copy survives a restart */
	r = store_set_path(f->obj, path);
	if (r < 0 && r != -ENOENT)
		log_warn("object %" PRIu64 ": cannot write its catalog record: %s", f->id,
			 strerror(-r));
	fs_lru_touch(fs, f->id);
}

/* The last chunk is in: seal, verify, publish.  Called without locks.
 * True if the copy is good (after_seal() is then still to run); false if
 * it was discarded. */
static bool finish_fetch(struct fs *fs, struct fetch *f)
{
	uint8_t csum[OBJFS_CSUM_LEN];
	char want[OBJFS_CSUM_LEN * 2 + 1], got[OBJFS_CSUM_LEN * 2 + 1];
	int r;

	r = store_seal(f->obj, NULL, f->rec.mtime_ns);
	if (r < 0) {
		fail_fetch(fs, f, strerror(-r));
		return false;
	}
	store_obj_csum(f->obj, csum);
	if (memcmp(csum, f->rec.csum, OBJFS_CSUM_LEN)) {
		csum_to_hex(f->rec.csum, want);
		csum_to_hex(csum, got);
		__atomic_add_fetch(&fs->n_csum_failures, 1, __ATOMIC_RELAXED);
		log_error("object %" PRIu64 ": the fetched bytes have checksum %s, the record "
			  "says %s; discarding the copy",
			  f->id, got, want);
		fail_fetch(fs, f, "checksum mismatch");
		return false;
	}
	pthread_mutex_lock(&fs->flock);
	f->state = FETCH_DONE;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&fs->flock);
	__atomic_add_fetch(&fs->n_fetch_done, 1, __ATOMIC_RELAXED);
	log_debug("fetched object %" PRIu64 " (%" PRIu64 " bytes) in %.1f ms", f->id,
		  f->rec.size, (double)(mono_ns() - f->started_ns) / 1e6);
	untable(fs, f);
	return true;
}

/*
 * Run chunk @ci of @f to its end: from the next good holder, failing
 * over as holders fail.  Returns true if the fetch is complete (the
 * caller then finishes it).  The caller holds a reference on @f.
 */
static bool run_chunk(struct fs *fs, struct fetch *f, unsigned ci)
{
	struct chunk *c = &f->chunks[ci];
	struct meta_holder h;
	char why[160];
	int k, r;

	for (;;) {
		unsigned gen;

		pthread_mutex_lock(&fs->flock);
		/* another worker is asking Redis for holders: use its answer */
		while (f->relocating && f->state == FETCH_RUNNING)
			pthread_cond_wait(&f->cond, &fs->flock);
		if (f->state != FETCH_RUNNING) {
			pthread_mutex_unlock(&fs->flock);
			return false;
		}
		k = pick_holder(f);
		if (k >= 0)
			h = f->holders[k];
		gen = f->gen;
		pthread_mutex_unlock(&fs->flock);
		if (k < 0) {
			bool again;

			pthread_mutex_lock(&fs->flock);
			if (f->relocating || f->gen != gen) {
				pthread_mutex_unlock(&fs->flock);
				continue;	/* the list changed: look again */
			}
			again = f->relocations++ < RELOCATE_MAX + (f->guessed ? 1 : 0);
			f->relocating = again;
			pthread_mutex_unlock(&fs->flock);
			r = again ? relocate(fs, f) : -EHOSTUNREACH;
			pthread_mutex_lock(&fs->flock);
			if (again) {
				f->relocating = false;
				f->gen++;
				pthread_cond_broadcast(&f->cond);
			}
			pthread_mutex_unlock(&fs->flock);
			if (r == 0)
				continue;
			snprintf(why, sizeof(why), "no holder of it is reachable%s",
				 r == -EIO ? " (and Redis is unreachable)" : "");
			fail_fetch(fs, f, why);
			return false;
		}
		r = pull_chunk(fs, f, c, &h);
		pthread_mutex_lock(&fs->flock);
		if (r == 0) {
			c->state = CHUNK_DONE;
			f->ndone++;
			pthread_cond_broadcast(&f->cond);
			r = f->ndone == f->nchunks && f->state == FETCH_RUNNING;
			pthread_mutex_unlock(&fs->flock);
			return r;
		}
		if (f->state != FETCH_RUNNING) {
			pthread_mutex_unlock(&fs->flock);
			return false;
		}
		/* (the list may have been replaced meanwhile) */
		if (k < (int)f->nholders && !strcmp(f->holders[k].node, h.node) &&
		    !strcmp(f->holders[k].addr, h.addr))
			f->bad[k] = true;
		pthread_mutex_unlock(&fs->flock);
		if (r != -ENOENT && r != -ERANGE) {
			transport_forget_peer(fs->cfg.transport, h.node);
			peer_cache_del(fs, h.node);
		}
		__atomic_add_fetch(&fs->n_failovers, 1, __ATOMIC_RELAXED);
		log_warn("object %" PRIu64 ": holder '%s' (%s) %s at offset %" PRIu64
			 "; trying another holder",
			 f->id, h.node, h.addr, errname(r), c->off + c->done);
	}
}

static void *worker_main(void *arg)
{
	struct fs *fs = arg;
	struct fetch *f;
	unsigned ci;

	pthread_mutex_lock(&fs->flock);
	while (!fs->fq_stop) {
		if (!take_task(fs, &f, &ci)) {
			pthread_cond_wait(&fs->fq_cond, &fs->flock);
			continue;
		}
		pthread_mutex_unlock(&fs->flock);
		if (run_chunk(fs, f, ci)) {
			if (finish_fetch(fs, f))
				after_seal(fs, f);
		}
		fetch_put(fs, f);
		pthread_mutex_lock(&fs->flock);
	}
	pthread_mutex_unlock(&fs->flock);
	return NULL;
}

int fetch_start_workers(struct fs *fs)
{
	sigset_t all, old;
	unsigned i;
	int r = 0;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (i = 0; i < FS_FETCH_WORKERS; i++) {
		r = -pthread_create(&fs->workers[i], NULL, worker_main, fs);
		if (r)
			break;
		fs->nworkers++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
}

void fetch_stop_workers(struct fs *fs)
{
	unsigned i;

	pthread_mutex_lock(&fs->flock);
	fs->fq_stop = true;
	pthread_cond_broadcast(&fs->fq_cond);
	pthread_mutex_unlock(&fs->flock);
	for (i = 0; i < fs->nworkers; i++)
		pthread_join(fs->workers[i], NULL);
	fs->nworkers = 0;
}

/* Drop the fetches still in the table (at unmount; no reader is left). */
void fetch_drop_all(struct fs *fs)
{
	struct fetch *f, *tmp;

	pthread_mutex_lock(&fs->lock);
	HASH_ITER(hh, fs->fetches, f, tmp) {
		HASH_DELETE(hh, fs->fetches, f);
		f->in_table = false;
		pthread_mutex_unlock(&fs->lock);
		pthread_mutex_lock(&fs->flock);
		f->state = f->state == FETCH_RUNNING ? FETCH_FAILED : f->state;
		dequeue(fs, f);
		pthread_cond_broadcast(&f->cond);
		pthread_mutex_unlock(&fs->flock);
		if (f->state == FETCH_FAILED)
			store_unlink(f->obj);
		fetch_put(fs, f);
		pthread_mutex_lock(&fs->lock);
	}
	pthread_mutex_unlock(&fs->lock);
}

/* ---- starting a fetch ---- */

static int split(struct fetch *f)
{
	uint64_t size = f->rec.size, csize = CHUNK_MIN, off;
	unsigned i, n;

	while (size / csize >= CHUNKS_MAX)
		csize *= 2;
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

/* Reserve the object's pages, making room by evicting replicas if the
 * store is full. */
static int reserve(struct fs *fs, struct fetch *f)
{
	int r, err;

	f->obj = store_create(fs->store, f->id, &err);
	if (!f->obj)
		return err;
	r = store_reserve(f->obj, f->rec.size);
	if (r == -ENOSPC && fs_evict(fs, f->rec.size) > 0)
		r = store_reserve(f->obj, f->rec.size);
	if (r < 0) {
		store_unlink(f->obj);
		store_obj_unref(f->obj);
		f->obj = NULL;
	}
	return r;
}

/* Find the object and its holders, and reserve its pages.  Called by
 * the open that created @f (state FETCH_STARTING), without locks. */
static int fetch_setup(struct fs *fs, struct fetch *f, const struct meta_obj *rec)
{
	struct meta_holder origin;
	unsigned stale = 0;
	size_t i, good = 0;
	int r;

	/* small objects only: for big ones a Redis round trip is nothing,
	 * and knowing every holder lets ranges come from several */
	if (rec && rec->id == f->id && rec->size <= FETCH_SYNC_MAX && rec->origin[0] &&
	    strcmp(rec->origin, fs->cfg.node) &&
	    peer_cache_get(fs, rec->origin, &origin) && usable_holder(fs, &origin) &&
	    (f->holders = malloc(sizeof(*f->holders)))) {
		/* the node that wrote it, at the address we know: no Redis */
		f->rec = *rec;
		f->holders[0] = origin;
		f->nholders = 1;
		f->guessed = true;
		__atomic_add_fetch(&fs->n_fetch_direct, 1, __ATOMIC_RELAXED);
	} else {
		r = meta_locate(fs->meta, f->id, &f->rec, &f->holders, &f->nholders, &stale);
		if (stale) {
			__atomic_add_fetch(&fs->n_stale_holders, stale, __ATOMIC_RELAXED);
			log_info("object %" PRIu64 ": dropped %u holder entries of nodes that "
				 "are gone",
				 f->id, stale);
		}
		if (r < 0)
			return r;
		peer_cache_put(fs, f->holders, f->nholders);
	}
	f->bad = calloc(f->nholders ? f->nholders : 1, sizeof(*f->bad));
	if (!f->bad)
		return -ENOMEM;
	for (i = 0; i < f->nholders; i++) {
		f->bad[i] = !usable_holder(fs, &f->holders[i]);
		good += !f->bad[i];
	}
	if (!good) {
		log_error("object %" PRIu64 " has no live holder to fetch it from", f->id);
		return -EIO;
	}
	f->rr = (unsigned)(mono_ns() / 1000) % (unsigned)f->nholders;
	r = split(f);
	if (r == 0)
		r = reserve(fs, f);
	return r;
}

/* Start the transfer of a set-up fetch: small objects right here, in the
 * opening thread; others by the workers. */
static void fetch_go(struct fs *fs, struct fetch *f)
{
	bool sync = f->rec.size <= FETCH_SYNC_MAX;

	pthread_mutex_lock(&fs->flock);
	if (sync && f->nchunks) {
		f->chunks[0].state = CHUNK_RUNNING;
		f->refs++;
	} else if (f->nchunks) {
		enqueue(fs, f);
	}
	pthread_mutex_unlock(&fs->flock);
	if (!f->nchunks) {
		if (finish_fetch(fs, f))
			after_seal(fs, f);
	} else if (sync) {
		/* the rest of the work (Redis, the catalog path) is done by
		 * fetch_opened() once the open has been answered */
		if (run_chunk(fs, f, 0) && finish_fetch(fs, f)) {
			pthread_mutex_lock(&fs->flock);
			f->post_seal = true;
			pthread_mutex_unlock(&fs->flock);
		}
		fetch_put(fs, f);
	}
}

struct fetch *fetch_ref(struct fs *fs, struct fetch *f)
{
	if (f) {
		pthread_mutex_lock(&fs->flock);
		f->refs++;
		pthread_mutex_unlock(&fs->flock);
	}
	return f;
}

void fetch_opened(struct fs *fs, struct fetch *f)
{
	bool post;

	if (!f)
		return;
	pthread_mutex_lock(&fs->flock);
	post = f->post_seal;
	f->post_seal = false;
	pthread_mutex_unlock(&fs->flock);
	if (post)
		after_seal(fs, f);
	fetch_put(fs, f);
}

/*
 * Open object @id for reading when it is not sealed here.  Joins the
 * fetch of @id if one runs or starts one (single flight: the first open
 * sets it up while later ones wait for that); returns it with a
 * reference for the caller, plus a reference on its (pending) store
 * object.  Small objects are complete when this returns.  -ENOENT: no such
 * object any more; -EIO: no holder can be reached or the fetch failed;
 * -ENOSPC: no room even after eviction.
 */
int fetch_open(struct fs *fs, uint64_t id, const struct meta_obj *rec, struct fetch **ret_f,
	       struct store_obj **ret_obj)
{
	struct fetch *f;
	bool creator = false;
	int r;

	pthread_mutex_lock(&fs->lock);
	HASH_FIND(hh, fs->fetches, &id, sizeof(id), f);
	if (f) {
		pthread_mutex_lock(&fs->flock);
		f->refs++;
		pthread_mutex_unlock(&fs->flock);
	} else {
		f = calloc(1, sizeof(*f));
		if (!f) {
			pthread_mutex_unlock(&fs->lock);
			return -ENOMEM;
		}
		f->id = id;
		f->fs = fs;
		f->started_ns = mono_ns();
		f->state = FETCH_STARTING;
		f->refs = 2;	/* the table, the caller */
		pthread_cond_init(&f->cond, NULL);
		HASH_ADD(hh, fs->fetches, id, sizeof(f->id), f);
		if (!fetch_running(fs, id)) {	/* the table could not grow */
			pthread_mutex_unlock(&fs->lock);
			fetch_free(f);
			return -ENOMEM;
		}
		f->in_table = true;
		creator = true;
	}
	pthread_mutex_unlock(&fs->lock);

	if (creator) {
		__atomic_add_fetch(&fs->n_fetches, 1, __ATOMIC_RELAXED);
		r = fetch_setup(fs, f, rec);
		pthread_mutex_lock(&fs->flock);
		f->state = r < 0 ? FETCH_FAILED : FETCH_RUNNING;
		f->err = r;
		pthread_cond_broadcast(&f->cond);
		pthread_mutex_unlock(&fs->flock);
		if (r < 0) {
			__atomic_add_fetch(&fs->n_fetch_failed, 1, __ATOMIC_RELAXED);
			untable(fs, f);
		} else {
			fetch_go(fs, f);
		}
	}

	pthread_mutex_lock(&fs->flock);
	while (f->state == FETCH_STARTING) {
		f->waiters++;
		pthread_cond_wait(&f->cond, &fs->flock);
		f->waiters--;
	}
	r = f->state == FETCH_FAILED ? (f->err < 0 ? f->err : -EIO) : 0;
	pthread_mutex_unlock(&fs->flock);
	if (r < 0) {
		fetch_put(fs, f);
		return r;
	}
	*ret_f = f;
	*ret_obj = store_obj_ref(f->obj);
	return 0;
}

/* Is [off, off+len) of @f in place?  Called with fs->flock held. */
static bool covered(struct fetch *f, uint64_t off, uint64_t end)
{
	unsigned i;

	for (i = 0; i < f->nchunks && off < end; i++) {
		struct chunk *c = &f->chunks[i];

		if (c->off + c->len <= off)
			continue;
		if (c->off + c->done < (end < c->off + c->len ? end : c->off + c->len))
			return false;
		off = c->off + c->len;
	}
	return true;
}

/*
 * Wait until [off, off+len) of the object (clipped to its size) has
 * arrived; a range that reaches the end of the object waits for the whole
 * fetch and its checksum, so that a reader of the whole object gets EIO
 * rather than the end of a copy that turns out bad.  0, or -EIO if the
 * fetch failed.  Never waits without a bound: the fetch itself ends, one
 * way or the other.
 */
int fetch_wait(struct fs *fs, struct fetch *f, uint64_t off, uint64_t len)
{
	uint64_t end = off + len;
	bool last;
	int r;

	if (end > f->rec.size || end < off)
		end = f->rec.size;
	last = end == f->rec.size;
	pthread_mutex_lock(&fs->flock);
	while (f->state == FETCH_RUNNING && (last || !covered(f, off, end))) {
		f->waiters++;
		pthread_cond_wait(&f->cond, &fs->flock);
		f->waiters--;
	}
	r = f->state == FETCH_FAILED ? -EIO : 0;
	pthread_mutex_unlock(&fs->flock);
	return r;
}

/* Progress of the fetch of @id: bytes in place and the size.  -ENOENT
 * if no fetch of @id is running. */
int fetch_progress(struct fs *fs, uint64_t id, uint64_t *ret_done, uint64_t *ret_size)
{
	struct fetch *f;
	uint64_t done = 0;
	unsigned i;

	pthread_mutex_lock(&fs->lock);
	HASH_FIND(hh, fs->fetches, &id, sizeof(id), f);
	if (!f) {
		pthread_mutex_unlock(&fs->lock);
		return -ENOENT;
	}
	pthread_mutex_lock(&fs->flock);
	for (i = 0; i < f->nchunks; i++)
		done += f->chunks[i].done;
	*ret_size = f->rec.size;
	pthread_mutex_unlock(&fs->flock);
	pthread_mutex_unlock(&fs->lock);
	*ret_done = done;
	return 0;
}

/* Is a fetch of @id running?  Called with fs->lock held. */
bool fetch_running(struct fs *fs, uint64_t id)
{
	struct fetch *f;

	HASH_FIND(hh, fs->fetches, &id, sizeof(id), f);
	return f != NULL;
}
