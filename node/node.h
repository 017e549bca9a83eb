/*
 * fetch: bringing other nodes' objects into this node's store, and giving
 * up copies when the store needs room.
 *
 *   open ──► node_fetch_open(): join the fetch of this id if one runs (single
 *            flight), else locate the object (record and live holders),
 *            reserve its pages in the store and start one
 *   fetch ──► ranges of the object go to a pool of worker threads; each
 *            borrows a transport connection to one holder and receives
 *            the bytes straight into the reserved store pages
 *   read ──► node_fetch_wait(): waits only until the ranges covering its bytes
 *            have arrived (streaming)
 *   last range ──► seal: the checksum is compared with the record (a
 *            mismatch discards the copy and fails the fetch), then this
 *            node is added to the holders
 *
 * The node knows the store, meta (Redis) and the transport.  It knows
 * nothing of FUSE: what it must tell the layer above, or ask it, goes
 * through struct node_hooks.
 *
 * Eviction.  When the store has no room, node_evict() gives up sealed
 * copies that nobody uses (hooks->busy() says so) and that live on
 * another node too, least recently used first; the last copy in the
 * cluster is never given up (meta_release_replica() decides atomically).
 * A peer's serving lease does not keep a copy (node_source_revoke()).
 *
 * Threading: every function but node_stop() and node_free() is
 * thread-safe; those two belong to the node's owner.  Hooks are called
 * without any lock of the node held, from fetch workers or from the
 * thread that called into the node.
 *
 * Errors: 0 or a negative errno.
 */
#ifndef OBJFS_FETCH_H
#define OBJFS_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct node_fetch;
struct node;
struct meta;
struct meta_obj;
struct store;
struct store_obj;
struct transport;
struct transport_source;

/* What the node tells the layer above, and asks it. */
struct node_hooks {
	/*
	 * The fetch of @id failed after readers may have been given some
	 * of its bytes: they may be cached above, and must be dropped.
	 * Called from a fetch worker, which serves no reader, so the hook
	 * may wait for a reader's request to finish.
	 */
	void (*failed)(void *ctx, uint64_t id);
	/*
	 * A copy of @id fetched here is sealed and verified, and this node
	 * was registered as a holder (or that failed: Redis is away; an
	 * object deleted meanwhile is dropped instead, once its readers
	 * close it, and not told of): write the path it is known
	 * by into @ret_path (@len bytes) for its catalog record, or leave
	 * it "" if unknown.  Called from a worker, from node_fetch_opened(), or,
	 * for an empty object, from node_fetch_open() itself.
	 */
	void (*sealed)(void *ctx, uint64_t id, char *ret_path, size_t len);
	/* Is @id in use above (open, being written, not yet published)?
	 * Then it is not evicted. */
	bool (*busy)(void *ctx, uint64_t id);
	void *ctx;
};

struct node_config {
	const char *node; /* this node's name (copied) */
	/* none owned; all must outlive the node.  @transport may be
	 * NULL: fetches then fail with -EIO (no workers are started) */
	struct meta *meta;
	struct store *store;
	struct transport *transport;
	struct node_hooks hooks; /* any hook may be NULL */
	/* what this node serves peers from (not owned; may be NULL): eviction
	 * takes its leases on an evicted copy back, and waits boundedly
	 * for GETs in flight of a copy it needs to give up */
	struct node_source *source;
	/* objects up to this size are fetched by the opening thread
	 * itself, before node_fetch_open() returns (0: 1 MiB; never more than
	 * the backend's range_min) */
	uint64_t sync_max;
	unsigned workers; /* 0: 8 */
};

/* Start the node and its workers.  NULL and *ret_err on failure. */
struct node *node_new(const struct node_config *cfg, int *ret_err);

/* Stop the workers and fail the fetches in flight (their readers get
 * EIO).  Call before freeing the transport.  Idempotent. */
void node_stop(struct node *nd);

/* node_stop(), then free.  NULL is fine. */
void node_free(struct node *nd);

/*
 * Open object @id for reading when it is not sealed here.  Joins the
 * fetch of @id if one runs, or starts one; @rec (may be NULL) is the
 * object record if the caller has it, which lets a small object go
 * straight to its origin node without asking Redis.  Returns the fetch
 * with a reference for the caller, which it must hand to node_fetch_opened()
 * once the open is answered (or given up) and, in
 * *@ret_obj, a reference on the object's store object, which is pending
 * until the fetch ends.  Objects up to sync_max are complete when this
 * returns.  -ENOENT no such object; -EIO no holder can be reached or the
 * fetch failed, or the node is stopping; -EFBIG bigger than the whole
 * store (nothing is evicted); -ENOSPC no room even after eviction;
 * -ENOMEM.
 */
int node_fetch_open(struct node *nd, uint64_t id, const struct meta_obj *rec,
		    struct node_fetch **ret_f, struct store_obj **ret_obj);

/* Take another reference on @f (NULL is fine, and returned). */
struct node_fetch *node_fetch_ref(struct node_fetch *f);

/* Drop a reference.  NULL is fine. */
void node_fetch_put(struct node_fetch *f);

/*
 * The open has been answered: finish what a fetch completed inside
 * node_fetch_open() left to do off the reader's path (registering this node
 * as a holder, the catalog record), then drop one reference.  NULL is
 * fine.
 */
void node_fetch_opened(struct node_fetch *f);

/*
 * Wait until [@off, @off + @len) of the object (clipped to its size) has
 * arrived.  A range that reaches the end of the object waits for the
 * whole fetch and its checksum, so that a reader of the whole object gets
 * an error rather than the end of a bad copy.  0, or -EIO if the fetch
 * failed.  Never waits without a bound: every transfer step is bounded
 * by the transport's timeout, and a stalled holder is retried a bounded
 * number of times (FETCH_STALL_RETRIES).
 */
int node_fetch_wait(struct node_fetch *f, uint64_t off, uint64_t len);

/* Bytes of @id in place so far and its size (0 while the fetch is being
 * set up), if a fetch of @id runs; else -ENOENT. */
int node_fetch_progress(struct node *nd, uint64_t id, uint64_t *ret_done, uint64_t *ret_size);

/* ---- use and eviction (node_evict.c) ---- */

/* Object @id was used now (for least-recently-used eviction). */
void node_touch(struct node *nd, uint64_t id);

/* Forget the use time of @id (its copy is gone). */
void node_forget(struct node *nd, uint64_t id);

/*
 * Make @need bytes free in the store: give up sealed copies that no one
 * uses and that another live node holds, least recently used first, and
 * only if giving them up makes that much room (otherwise none is given
 * up, and the log says what holds the room).  A copy being sent to a
 * peer is waited for, NODE_EVICT_WAIT_MS at most, if it is needed.  A
 * copy that a process still maps keeps its pages when given up
 * (passthrough: nothing here sees the mapping): then more go, in a few
 * rounds at most.  Returns the bytes of the copies given up: 0 if there
 * was room already, if nothing could go, or if nothing would have helped.
 */
#define NODE_EVICT_WAIT_MS 2000
uint64_t node_evict(struct node *nd, uint64_t need);
/* The store holds as many objects as it may (store_create() gave
 * -EMFILE): give up one copy as node_evict() would.  True if the store
 * may take an object now. */
bool node_evict_slot(struct node *nd);

struct node_stats {
	uint64_t fetches; /* started */
	uint64_t direct;  /* went to the origin at a remembered address */
	uint64_t done;
	uint64_t failed;
	uint64_t bytes;	    /* received */
	uint64_t failovers; /* a range moved to another holder */
	uint64_t csum_failures;
	uint64_t stale_holders; /* holder entries of dead nodes dropped */
	uint64_t evictions;
};
void node_stats(struct node *nd, struct node_stats *ret);

/* ---- serving (node_source.c) ---- */

/*
 * The source the transport serves this node's sealed objects from.  A
 * store reference pins an object while its pages are on the wire, and a
 * lease per (peer, object) keeps them for lease_ms after that peer's
 * last GET: a peer that began fetching an object before it was deleted
 * or replaced here gets the rest of it, while nothing and nobody else
 * can find it any more.  Pages of an unlinked object go once its last
 * lease lapses (node_source_expire()).  A lease does not keep a copy
 * from eviction: eviction takes it back (node_source_revoke()), and the
 * peer fetches the rest from another holder.
 */
struct node_source;

#define NODE_LEASE_MS_DEFAULT 10000

/* A source over @s, which must outlive it; @lease_ms 0 means
 * NODE_LEASE_MS_DEFAULT.  NULL on ENOMEM. */
struct node_source *node_source_new(struct store *s, unsigned lease_ms);

/* Drop every lease and free.  Only once the transport serves from it no
 * more (transport_free()).  NULL is fine. */
void node_source_free(struct node_source *src);

/* Fill in the transport's view of @src (for transport_serve()). */
void node_source_init(struct transport_source *ret, struct node_source *src);

/* Drop the leases no GET used for lease_ms, freeing the pages of
 * unlinked objects whose last holder they were.  Call every few seconds:
 * that bounds how long a peer that died mid-fetch keeps pages here.
 * Returns how many went. */
unsigned node_source_expire(struct node_source *src);

/* Leases held now. */
unsigned node_source_leases(struct node_source *src);

/*
 * Copy @id was evicted (unlinked): take its leases back.  Idle ones go
 * now, with the pages they held; one under a GET serves that GET and
 * goes when it ends.  A peer's next GET of @id then gets -ENOENT, and
 * its fetch fails over.  NULL is fine.
 */
void node_source_revoke(struct node_source *src, uint64_t id);

/* Is a GET of @id being answered now?  NULL is fine (false). */
bool node_source_sending(struct node_source *src, uint64_t id);

/* Wait until no GET of @id is being answered, or until @deadline_ns
 * (mono_ns()): 0 or -ETIMEDOUT.  NULL is fine. */
int node_source_wait(struct node_source *src, uint64_t id, int64_t deadline_ns);

#endif
