/*
 * node_i.h: what the files of the node room share.
 *
 * node may call meta, store, transport and common, never fs (fs gives it
 * hooks for what it needs of the mount).  It is the only room that joins
 * the store, Redis and the peers.  docs/design.md, "The node room's
 * files", lists its files and the order their calls go in.
 *
 * Locking: nd->pub_lock guards the unpublished list, the seals in
 * progress and the epoch last reconciled against; it is a leaf, never
 * held across a call out of the node.  nd->lock guards the fetch table,
 * the queue, every fetch's state, ranges, holders and refcount, the peer
 * address cache, the blamed peers and the memo of an eviction round (the
 * use order is the store's).  Readers, openers, workers waiting for
 * another worker's relocation and a worker backing off before it retries
 * a stalled holder wait on their fetch's own condition, idle workers on
 * nd->queue_cond, all with nd->lock.  Functions named *_locked are called
 * with nd->lock held.  nd->lock is taken after any lock of the layer
 * above (fs->lock) and is never held across a transfer, a Redis call, a
 * store call that may block (reserving, sealing, hashing) or a hook.
 * nd->retry_lock and nd->evict_lock come before every other lock
 * (docs/design.md, "Threads and locks").
 */
#ifndef OBJFS_NODE_I_H
#define OBJFS_NODE_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
/* uthash: report allocation failure instead of calling exit() */
#define HASH_NONFATAL_OOM 1
#include <uthash.h>
#include <utlist.h>

#include "bsum.h"
#include "meta.h"
#include "node.h"
#include "store.h"
#include "transport.h"
#include "util.h"

#define FETCH_SYNC_MAX_DEFAULT (1u << 20)
#define FETCH_WORKERS_DEFAULT 8
#define FETCH_WORKERS_MAX 64
#define FETCH_CHUNKS_MAX 4096
/* used when there is no transport to ask */
#define FETCH_RANGE_MIN_DEFAULT (8u << 20)
#define FETCH_STREAMS_DEFAULT 2
/*
 * A holder that stalls (moves no byte for io_timeout) when no other
 * holder is left is retried on a fresh connection, while its node card
 * is live, this many times in a row without a byte arriving, after a
 * backoff of io_timeout / 4, doubling, at most io_timeout; then the
 * fetch fails.  README, "Fetching", states the bound.
 */
#define FETCH_STALL_RETRIES 3

enum chunk_state {
	CHUNK_QUEUED,
	CHUNK_RUNNING,
	CHUNK_DONE,
};

/* One range of an object, fetched by one worker at a time. */
struct chunk {
	uint64_t off, len;
	uint64_t done;		/* bytes from off in place; nd->lock */
	enum chunk_state state; /* nd->lock */
	/* a fetch with block sums: in place and its sum checked, so that
	 * readers and the running checksum may have it; nd->lock */
	bool verified;
};

enum fetch_state {
	FETCH_STARTING, /* the first open is locating and reserving */
	FETCH_RUNNING,
	FETCH_DONE,
	FETCH_FAILED,
};

/* What a fetch knows of one of its holders; worst last. */
enum holder_mark {
	HOLDER_GOOD,
	HOLDER_STALLED, /* moved no byte for io_timeout: may be retried */
	HOLDER_BAD,	/* failed otherwise, or cannot be asked */
};

struct node_fetch {
	uint64_t id;
	struct node *nd;
	struct meta_obj rec; /* the object record; fixed once RUNNING */
	/* the record's block sums, NULL if it has none (then only the
	 * whole checksum is checked, at the end); each range is one block;
	 * fixed once RUNNING, owned */
	struct bsums *sums;
	/* the sums of the sealed copy, when the record had none:
	 * node_fetch_after_seal() records them; owned */
	struct bsums *copy_sums;
	/* with sums: served to other nodes in part (the blocks checked),
	 * from the setup until the fetch ends (node_fetch_end_serving()); NULL
	 * if not; owned */
	struct node_partial *part;
	/* with sums and a node to serve from: blocks from full and partial
	 * sources alike (node_fan.c); NULL for a plain fetch; nd->lock */
	struct node_fan *fan;
	/* a fan-out fetch that ran out of sources goes on as a plain one:
	 * its state, kept until node_fetch_free() */
	struct node_fan *fan_off;
	/* the other fetchers the first locate found, until node_fan_new() */
	struct meta_holder *first;
	size_t nfirst;
	struct store_obj *obj; /* reserved, pending until sealed; owned */
	/* obj's memory registered with the backends that need it (RDMA) for
	 * the life of the fetch, or NULL (TCP, or it could not be): set up
	 * with obj, before the fetch runs; freed by node_fetch_free(), once no
	 * worker uses it, before obj's reference goes */
	struct transport_region *region;
	unsigned refs;		/* table, handles, running workers, a small fetch's
				 * opening thread; nd->lock */
	enum fetch_state state; /* nd->lock */
	int err;		/* why it failed (-errno); nd->lock */
	pthread_cond_t cond;	/* readers and openers wait here */
	unsigned waiters;	/* nd->lock */
	struct chunk *chunks;	/* array fixed once RUNNING */
	unsigned nchunks;
	unsigned ndone;		     /* nd->lock */
	unsigned front;		     /* chunks before it are all in place; nd->lock */
	struct meta_holder *holders; /* nd->lock */
	enum holder_mark *mark;	     /* per holder; nd->lock */
	size_t nholders;	     /* nd->lock */
	unsigned rr;		     /* next holder, round robin; nd->lock */
	unsigned relocations;	     /* nd->lock */
	unsigned stall_retries;	     /* in a row, with no byte arriving; nd->lock */
	bool guessed;		     /* holders from the address cache, not Redis */
	bool relocating;	     /* a worker is locating holders again; nd->lock */
	unsigned gen;		     /* holder list replacements; nd->lock */
	bool queued;		     /* on nd->queue, which holds no reference; nd->lock */
	bool post_seal;		     /* sealed in open(): after_seal() still to run; nd->lock */
	bool in_table;		     /* in nd->fetches; nd->lock */
	int64_t started_ns;
	/* the name the first open came by (name[0] == 0: none), from which
	 * node_fetch_after_seal() resolves the copy's catalog path; fixed */
	uint64_t parent;
	char name[OBJFS_NAME_MAX + 1];
	struct node_fetch *qnext; /* nd->lock */
	UT_hash_handle hh;	  /* nd->fetches, by id; nd->lock */
};

struct peer_addr;

/*
 * A peer that sent a block whose sum did not match: counted, and
 * avoided by new fetches for PEER_AVOID_NS while another holder is there.
 */
#define PEER_AVOID_NS (60 * 1000000000LL)
#define PEER_BLAME_MAX 1024
struct peer_blame {
	char node[OBJFS_NODE_MAX];
	uint64_t csum_failures;
	int64_t avoid_until; /* util_mono_ns() */
	UT_hash_handle hh;
};

/* A published-later object: sealed while Redis was unreachable. */
struct unpublished {
	uint64_t id;
	uint64_t parent;
	char name[OBJFS_NAME_MAX + 1];
	bool replace;
	bool lost;	       /* its writer was killed: it goes to /lost+found, not @name */
	struct meta_attr attr; /* its owner, mode and times (not set: none) */
	/* on nd->unpublished (utlist DL_*) until it is published, also
	 * while node_publish_retry() publishes it: eviction and reconciling
	 * must see it all along (it has no record yet); pub_lock */
	struct unpublished *prev, *next;
};

/* A seal in progress (node_seal_publish()): reconciling leaves it alone. */
struct sealing {
	uint64_t id;
	struct sealing *next;
};

struct node {
	/* fixed after node_new() */
	char node[OBJFS_NODE_MAX];
	struct meta *meta;
	struct store *store;
	struct transport *transport;
	struct node_hooks hooks;
	struct node_source *source; /* may be NULL */
	uint64_t sync_max;
	uint64_t range_min; /* the backend's tuning */
	unsigned streams_per_holder;
	unsigned io_timeout_ms; /* the transport's: how long a stall takes */

	pthread_mutex_t lock;
	struct node_fetch *fetches; /* lock; uthash by id */
	pthread_cond_t queue_cond;  /* workers wait here; lock */
	/* fetches with ranges to hand out; a fetch leaves it when its last
	 * range is handed out, or it ends; lock */
	struct node_fetch *queue;
	bool stopping; /* lock */
	pthread_t workers[FETCH_WORKERS_MAX];
	unsigned nworkers; /* owner: node_new() and node_stop() */
	/* fan-out requests out that may park at their source (PARK): at
	 * most half the workers, so that a parked one never holds up the
	 * fetches of other objects for long */
	atomic_uint parking;
	struct peer_addr *peers;   /* lock; uthash by node */
	struct peer_blame *blamed; /* lock; uthash by node, at most PEER_BLAME_MAX */
	/* bumped at every use (node_touch()); a round of eviction that
	 * found no room answers at once until it moves, or evict_memo_ns */
	atomic_uint_fast64_t use_gen;
	int64_t evict_memo_ns; /* lock */
	/* evict_lock: util_mono_ns() when the copies known as the only ones
	 * were last put back in the use order to be asked about again
	 * (node_evict(): what made them so may have changed unseen) */
	int64_t sole_checked_ns;
	uint64_t evict_memo_gen;  /* lock */
	uint64_t evict_memo_need; /* lock */
	uint64_t evict_memo_room; /* lock: free pages then */
	/* one eviction round or reconcile batch at a time (see
	 * node_evict.c); taken with nothing held, held across Redis calls */
	pthread_mutex_t evict_lock;

	/* objects written here, and reconciling */
	void (*wake_tick)(void *ctx); /* fixed; may be NULL */
	void *wake_ctx;
	atomic_bool resync; /* Redis lost writes: node_tick() reconciles */
	/* one node_publish_retry() at a time: only it frees list entries;
	 * held across Redis calls and the published hook, taken with no
	 * other lock held */
	pthread_mutex_t retry_lock;
	pthread_mutex_t pub_lock;
	struct unpublished *unpublished; /* pub_lock */
	struct sealing *sealing;	 /* pub_lock */
	char epoch[64];			 /* last Redis epoch reconciled against; pub_lock */

	struct {
		atomic_uint_fast64_t fetches, direct, done, failed, bytes, failovers;
		atomic_uint_fast64_t csum_failures, stale_holders, evictions;
		atomic_uint_fast64_t seal_failed, killed_writers, published_late, reregistered;
	} cnt;
};

/* Is @id sealed here and waiting to be published, or being sealed now?
 * nd->pub_lock held. */
static inline bool node_publishing_locked(struct node *nd, uint64_t id)
{
	struct unpublished *u;
	struct sealing *g;

	for (u = nd->unpublished; u; u = u->next)
		if (u->id == id)
			return true;
	for (g = nd->sealing; g; g = g->next)
		if (g->id == id)
			return true;
	return false;
}

#define NODE_COUNT(nd, field, n) \
	atomic_fetch_add_explicit(&(nd)->cnt.field, (n), memory_order_relaxed)

/* Is a fetch of @id in the table?  nd->lock held. */
static inline bool fetch_running_locked(struct node *nd, uint64_t id)
{
	struct node_fetch *f;

	HASH_FIND(hh, nd->fetches, &id, sizeof(id), f);
	return f != NULL;
}

/* ---- node_publish.c ---- */

/* store_create() at the object limit: gives up one copy to make room,
 * and past that -ENOSPC (logged, rate-limited). */
struct store_obj *node_store_create(struct node *nd, uint64_t id, int *ret_err);
/*
 * Sealed object @o is not the object Redis knows by its id (Redis lost
 * writes and the id was used again, or its record was rewritten): copy it
 * to a fresh id, keeping its bytes, mtime and catalog path, and drop @o
 * from the store.  Returns the copy (a reference; not registered in
 * Redis), or NULL with *ret_err (@o is then left as it is).
 */
struct store_obj *node_rekey(struct node *nd, struct store_obj *o, int *ret_err);
/* @b as text for Redis (meta_publish_sums()); NULL for none or out of
 * memory.  Caller frees. */
char *node_bsum_text(const struct bsums *b);
/* Publish the objects that were sealed while Redis was unreachable. */
void node_publish_retry(struct node *nd);
/* Free the unpublished list (at node_free()). */
void node_unpublished_free_all(struct node *nd);

/* ---- node_worker.c ---- */

/* Free @f (no references left). */
void node_fetch_free(struct node_fetch *f);
/* Remove @f from the table (new opens then see the sealed object, or
 * start afresh after a failure), dropping the table's reference: @f may
 * be freed unless the caller holds one.  Takes nd->lock. */
void node_fetch_untable(struct node_fetch *f);
/* Put @f on the queue for the workers.  nd->lock held. */
void node_fetch_enqueue_locked(struct node_fetch *f);
/* Fail @f if it is running (else nothing): wake its readers, free its
 * pages, take it out of the table, call the failed hook if readers may
 * have had bytes.  The caller holds a reference. */
void node_fetch_fail(struct node_fetch *f, const char *why);
/* @f's blocks are served no more as a partial object (it sealed, or
 * @failed: then this node also withdraws as a fetcher in Redis).  Takes
 * nd->lock; no lock held. */
void node_fetch_end_serving(struct node_fetch *f, bool failed);
/*
 * Run range @ci of @f to its end, failing over between holders.  True if
 * the fetch is complete (the caller then calls node_fetch_finish()).  The
 * caller holds a reference on @f.
 */
bool node_fetch_run_chunk(struct node_fetch *f, unsigned ci);
/* Seal and verify a complete fetch.  True if the copy is good
 * (node_fetch_after_seal() is then still to run); false if discarded. */
bool node_fetch_finish(struct node_fetch *f);
/* Register this node as a holder, write the catalog record (the path
 * of the name the fetch was opened by, if it still names the object),
 * record a use, take @f out of the table.  If the object was deleted
 * meanwhile, unlink the copy instead (its readers keep it until they
 * close it). */
void node_fetch_after_seal(struct node_fetch *f);
/* Start @n workers (at most FETCH_WORKERS_MAX). */
int node_fetch_start_workers(struct node *nd, unsigned n);
void node_fetch_stop_workers(struct node *nd);
/* Fail the fetches still in the table (at stop; no reader is left). */
void node_fetch_drop_all(struct node *nd);

/* ---- node_fan.c: fetching from full and partial sources ---- */

/* how many other fetchers a locate returns */
#define FAN_SAMPLE 8

struct node_fan;
/* What a worker is to do for a fan-out fetch (node_fan_take_locked()). */
struct fan_task {
	enum {
		FAN_TASK_WAIT,
		FAN_TASK_BLOCK,	 /* fetch a block */
		FAN_TASK_QUERY,	 /* ask a source what it has */
		FAN_TASK_LOCATE, /* locate again */
		FAN_TASK_PLAIN,	 /* no source is left: go on as a plain fetch */
	} what;
	unsigned block, src;  /* FAN_TASK_BLOCK: which, from which source */
	struct meta_holder h; /* that source */
	bool full;	      /* it holds the whole object */
	bool late;	      /* a full holder asked after rule 3's wait: a plain GET */
	int64_t until;	      /* FAN_TASK_WAIT: mono ms to look again at the latest */
};
/* Make @f a fan-out fetch from its holders and the fetchers its first
 * locate found (f->first, freed here), if it has block sums (else
 * nothing).  Before it runs.  0 or -ENOMEM. */
int node_fan_new(struct node_fetch *f);
void node_fan_free(struct node_fan *fan);
/* A reader waits for [@off, @end): those blocks first.  nd->lock held. */
void node_fan_want_locked(struct node_fetch *f, uint64_t off, uint64_t end);
/* The next task of @f into *@ret: 1 (a task to run), 0 (nothing now:
 * ret->until says until when), -errno.  nd->lock held. */
int node_fan_take_locked(struct node_fetch *f, struct fan_task *ret);
/* Is every block of @f checked?  nd->lock held. */
bool node_fan_done_locked(const struct node_fetch *f);
/* Block task @t ended with @r (0: in place and checked; -EAGAIN: the
 * source has it not yet; -EBADE: it failed its sum; else the source
 * failed), the source's HAVE in @th if @got_have.  True if that was the
 * fetch's last block.  Takes nd->lock. */
bool node_fan_block_end(struct node_fetch *f, const struct fan_task *t, int r,
			const struct transport_have *th, bool got_have);
/* Query task @t ended with @r, the source's HAVE in @th if 0.  Takes
 * nd->lock. */
void node_fan_query_end(struct node_fetch *f, const struct fan_task *t, int r,
			const struct transport_have *th);
/* Locate again: renew this node's entry, learn new sources.  No lock. */
int node_fan_locate(struct node_fetch *f);

/* ---- node_source.c: objects served in part ---- */

struct node_partial;
/*
 * Serve pending @o, of @size bytes in blocks of 1 << @shift (at least
 * 2, at most BSUM_BLOCKS_MAX), in part: the blocks marked with
 * node_source_partial_have().  Replaces an entry of the same id left
 * behind.  Returns the entry with a reference for the caller, who ends
 * it with node_source_partial_end(); NULL if out of memory or bad
 * arguments (then it is simply not served).
 */
struct node_partial *node_source_partial_add(struct node_source *src, struct store_obj *o,
					     uint64_t size, unsigned shift);
/* Block @block checked out: peers may have it from now on. */
void node_source_partial_have(struct node_partial *p, uint32_t block);
/* Block @block is being fetched here (@on), or no longer. */
void node_source_partial_fetching(struct node_partial *p, uint32_t block, bool on);
/* Serve it no more (GETs under way finish), and drop the caller's
 * reference.  NULL is fine. */
void node_source_partial_end(struct node_source *src, struct node_partial *p);

/* ---- node_holders.c ---- */

/* What a holder's error @err means, for the log. */
const char *node_fetch_holder_errname(int err);
/* May @h be asked (it has an address our transport reaches)? */
bool node_fetch_holder_usable(struct node *nd, const struct meta_holder *h);
/* The next good holder of @f, round robin; -1 if none is good.
 * nd->lock held. */
int node_fetch_holder_pick_locked(struct node_fetch *f);
/* Mark holder @k of @f @m (never better than it is), if it is still @h
 * (the list may have been replaced meanwhile).  nd->lock held. */
void node_fetch_holder_mark_locked(struct node_fetch *f, int k, const struct meta_holder *h,
				   enum holder_mark m);
/* The first holder of @f marked stalled, or -1.  nd->lock held. */
int node_fetch_holder_stalled_locked(const struct node_fetch *f);
/*
 * Fill in @f's record and holders: from the address cache for a small
 * object whose origin is known (no Redis round trip), else from Redis.
 * -ENOENT, -EIO (no live holder, or Redis unreachable), -ENOMEM.
 */
int node_fetch_holder_locate(struct node_fetch *f, const struct meta_obj *rec);
/* Replace @f's holders with a fresh list from Redis (live cards only),
 * keeping those found bad marked bad, and those found stalled marked
 * stalled unless @unstall (they are asked again).  0 if at least one
 * good holder, -EHOSTUNREACH if none, or meta_locate()'s error. */
int node_fetch_holder_relocate(struct node_fetch *f, bool unstall);
/* How long this node's entry as a fetcher lives in Redis, renewed. */
unsigned node_fetch_fan_ttl_ms(const struct node *nd);
/* Forget the cached address of @node (it failed). */
void node_fetch_peer_del(struct node *nd, const char *node);
void node_fetch_peer_free_all(struct node *nd);
/* @node sent a block that failed its sum: count it, and avoid it for
 * PEER_AVOID_NS.  Takes nd->lock. */
void node_fetch_peer_blame(struct node *nd, const char *node);

/* ---- node_evict.c ---- */

#endif
