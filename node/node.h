/*
 * node: the life of objects on this node, below FUSE and above the store,
 * meta (Redis) and the transport.
 *
 *   create ──► node_create(): a fresh id and its pending store object
 *   close ──► node_seal_publish(): seal the bytes, publish the name
 *            (or keep it for node_tick() while Redis is away)
 *   open ──► node_open(): this node's copy, checked against the record,
 *            or a fetch from the nodes that hold it
 *   unlink, rename, another node's "gone" ──► node_unlinked(),
 *            node_renamed(), node_gone()
 *   start, Redis back or lost data ──► node_reconcile(), node_tick()
 *
 * Fetching other nodes' objects:
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
 *            node is added to the holders, and the copy's catalog path
 *            is resolved from the name it was opened by
 *
 * The node knows the store, meta (Redis) and the transport.  It knows
 * nothing of FUSE: what only the layer above knows (is an object open
 * there; dropping what the kernel cached) goes through struct
 * node_hooks.
 *
 * Eviction.  When the store has no room, node_evict() gives up sealed
 * copies that nobody uses (hooks->busy() says so, and that are not
 * waiting to be published or being sealed) and that live on
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
#ifndef OBJFS_NODE_H
#define OBJFS_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "meta.h"

struct node_fetch;
struct node;
struct meta;
struct meta_obj;
struct store;
struct store_obj;
struct transport;
struct transport_source;

/* What the node tells the layer above, and asks it: only what that
 * layer alone knows. */
struct node_hooks {
	/*
	 * The fetch of @id failed after readers may have been given some
	 * of its bytes: they may be cached above, and must be dropped.
	 * Called from a fetch worker, which serves no reader, so the hook
	 * may wait for a reader's request to finish.
	 */
	void (*failed)(void *ctx, uint64_t id);
	/* Is @id in use above (open, or being written)?  Then it is not
	 * evicted. */
	bool (*busy)(void *ctx, uint64_t id);
	/*
	 * Object @id, written here as @name in directory @parent, was
	 * published (@how: NODE_PUB_*): what is cached above of @parent's
	 * listing, and of the name, may be stale.  Called from
	 * node_seal_publish() and from node_tick() (published later); not
	 * for a killed writer's object, which never takes @name.
	 */
	void (*published)(void *ctx, uint64_t parent, const char *name, uint64_t id, unsigned how);
	void *ctx;
};

/*
 * node_hooks.published(): how.  NODE_PUB_NAMED: under @name itself (else
 * beside it, or in /lost+found because its directory vanished);
 * NODE_PUB_REPLACED: @name named another object, which it replaced;
 * NODE_PUB_LATER: not yet, Redis is away and node_tick() publishes it:
 * @name should find it here meanwhile.
 */
#define NODE_PUB_NAMED 1u
#define NODE_PUB_REPLACED 2u
#define NODE_PUB_LATER 4u

struct node_config {
	const char *node; /* this node's name (copied) */
	/* none owned; all must outlive the node.  @transport may be
	 * NULL: fetches then fail with -EIO (no workers are started) */
	struct meta *meta;
	struct store *store;
	struct transport *transport;
	struct node_hooks hooks; /* any hook may be NULL; see node_set_hooks() */
	/* what this node serves peers from (not owned; may be NULL): eviction
	 * takes its leases on an evicted copy back, and waits boundedly
	 * for GETs in flight of a copy it needs to give up */
	struct node_source *source;
	/* objects up to this size are fetched by the opening thread
	 * itself, before node_fetch_open() returns (0: 1 MiB; never more than
	 * the backend's range_min) */
	uint64_t sync_max;
	unsigned workers; /* 0: 8 */
	/* asks the owner to call node_tick() soon (a copy here turned out
	 * to be other bytes than its id names: Redis lost writes); called
	 * with no lock of the node held; NULL: the next tick */
	void (*wake_tick)(void *ctx);
	void *wake_ctx;
};

/* Start the node and its workers.  NULL and *ret_err on failure. */
struct node *node_new(const struct node_config *cfg, int *ret_err);

/* Set the hooks, for a layer above made after the node: before the node
 * is used (no fetch, seal or tick yet).  The layer above that goes before
 * the node sets them to none, after node_stop() (no worker calls them
 * any more) and once nothing else calls into the node. */
void node_set_hooks(struct node *nd, const struct node_hooks *hooks);

/* Stop the workers and fail the fetches in flight (their readers get
 * EIO).  Call before freeing the transport.  Idempotent. */
void node_stop(struct node *nd);

/* node_stop(), then free.  NULL is fine. */
void node_free(struct node *nd);

/* ---- an object's life here (node.c, node_publish.c) ---- */

/*
 * Open sealed object @id for reading.  @rec (may be NULL) is its record
 * if the caller has it; @parent and @name (NULL: unknown) the name it is
 * opened by, which becomes a fetched copy's catalog path.  This node's
 * copy if it has one, and if it is the object @rec describes: a copy of
 * other bytes (Redis lost writes and the id was used again) is never
 * served as it; it moves to a fresh id, and a reconcile is asked for
 * (cfg.wake_tick).  Otherwise as node_fetch_open().  *@ret_obj gets a
 * reference, *@ret_f the fetch (a reference, for node_fetch_opened()) or
 * NULL for a local copy.  Errors as node_fetch_open(), and -EIO if a
 * stranger copy could not be moved.
 */
int node_open(struct node *nd, uint64_t id, const struct meta_obj *rec, uint64_t parent,
	      const char *name, struct store_obj **ret_obj, struct node_fetch **ret_f);

/*
 * A new object for a writer: a fresh id from Redis and its pending store
 * object (*@ret_obj, a reference).  With as many objects being written or
 * fetched at once as the open-files limit allows (store_stats'
 * open_max), -ENOSPC, logged with the limit.  -EIO Redis unreachable,
 * -ENOSPC, -ENOMEM.
 */
int node_create(struct node *nd, uint64_t *ret_id, struct store_obj **ret_obj);

/* Give up pending object @o (its write was discarded): its bytes go once
 * the last reference does. */
void node_discard(struct node *nd, struct store_obj *o);

/* How node_seal_publish() left an object. */
enum node_sealed {
	NODE_SEAL_FAILED,    /* not sealed: the store could not */
	NODE_SEAL_PUBLISHED, /* sealed and published (maybe beside @name, or in
			      * /lost+found if its directory vanished) */
	NODE_SEAL_LATER,     /* sealed; Redis is away: node_tick() publishes it */
	NODE_SEAL_LOST,	     /* sealed into /lost+found/NAME.objfs-ID (a killed
			      * writer's), or kept for node_tick() to put there */
	NODE_SEAL_MOVED,     /* sealed, but its id was another object's: kept under
			      * a fresh id in /lost+found, and gone from this id */
};

/* node_seal_publish() flags */
#define NODE_SEAL_REPLACE 1u /* @name may replace the object it names (allow_overwrite) */
#define NODE_SEAL_TOLD 2u    /* the result reaches the writer (its close(2)) */

/*
 * The last writer of pending object @o is done: seal its bytes, then
 * publish it as @name in directory @parent, or, if @killed_sig (the
 * signal that killed its last writer), as /lost+found/NAME.objfs-ID.
 * Publishing never loses the object: a name taken meanwhile gives it
 * "NAME.objfs-ID", a vanished directory /lost+found, and Redis being
 * away keeps it for node_tick().  *@ret says how it ended.  0 published
 * (or, for a killed writer, kept in /lost+found); -EIO sealed but not
 * published (LATER, MOVED, or LOST kept for node_tick()) or not sealed;
 * -ENOSPC not sealed for want of room; without NODE_SEAL_TOLD, a seal
 * that fails gives the store's own error.  A failed seal is logged: as
 * final with NODE_SEAL_TOLD (the caller discards @o), else as to be
 * tried again.
 */
int node_seal_publish(struct node *nd, struct store_obj *o, uint64_t parent, const char *name,
		      unsigned flags, int killed_sig, enum node_sealed *ret);

/* What a writer asked of a file's metadata while it wrote it: its owner
 * and mode (attr; its atime and ctime are ignored), and the times it set
 * (utimensat before the seal, as cp -p does). */
struct node_meta {
	struct meta_attr attr; /* not set: none recorded (the mount's defaults) */
	bool atime_set, mtime_set;
	int64_t atime_ns, mtime_ns;
};
/* node_seal_publish(), publishing @md with the object (NULL: none): its
 * mtime is @md's if set (else the seal's time), its atime too, its ctime
 * the seal's time; md->attr gets them, as published. */
int node_seal_publish_meta(struct node *nd, struct store_obj *o, uint64_t parent, const char *name,
			   unsigned flags, int killed_sig, struct node_meta *md,
			   enum node_sealed *ret);

/* Object @id lost its name here (unlinked, or replaced by another): its
 * copy goes once its readers close it. */
void node_unlinked(struct node *nd, uint64_t id);

/* Another node deleted object @id: this node's sealed copy goes once its
 * readers close it (a fetch of it in flight ends on its own). */
void node_gone(struct node *nd, uint64_t id);

/* @name in @parent was renamed to here: keep the catalog path of this
 * node's copy current (a re-registration after Redis lost its data uses
 * it).  Objects below a renamed directory keep their old paths. */
void node_renamed(struct node *nd, uint64_t parent, const char *name);

/* This node's sealed copy of @id (a reference), or NULL. */
struct store_obj *node_local(struct node *nd, uint64_t id);
/* Does this node hold a copy of @id, or is it getting one (being
 * fetched or written here)?  Takes no reference (and so may be called
 * under fs->lock). */
bool node_holds(struct node *nd, uint64_t id);

/* The record of sealed object @o, as this node publishes it (origin:
 * this node). */
void node_record_of(struct node *nd, struct store_obj *o, struct meta_obj *ret);

/* ---- reconciling (node_sync.c) ---- */

/*
 * Bring the store and Redis into agreement.  If the Redis epoch is the one
 * the store saw last, local objects that Redis no longer has were deleted
 * while this node was away and are dropped; the others get this node as a
 * holder.  If the epoch changed (Redis lost its data), every local object
 * is registered again under its last known path.  Then objects whose
 * publish failed while Redis was down are published.
 * Returns 0 or -errno; *ret_n (may be NULL) gets objects re-registered.
 */
int node_reconcile(struct node *nd, unsigned *ret_n);

/*
 * Periodic work (every few seconds, and at once after cfg.wake_tick()):
 * publish objects sealed while Redis was down, and reconcile the store
 * with Redis if the Redis epoch changed or node_resync() was called.
 */
void node_tick(struct node *nd);

/* Redis may have lost writes: reconcile at the next node_tick(), which
 * cfg.wake_tick asks for now. */
void node_resync(struct node *nd);

/* ---- fetching (node_fetch.c, node_worker.c, node_holders.c) ---- */

/*
 * Open object @id for reading when it is not sealed here.  Joins the
 * fetch of @id if one runs, or starts one; @rec (may be NULL) is the
 * object record if the caller has it, which lets a small object go
 * straight to its origin node without asking Redis; @parent and @name
 * (NULL: unknown) as for node_open().  Returns the fetch
 * with a reference for the caller, which it must hand to node_fetch_opened()
 * once the open is answered (or given up) and, in
 * *@ret_obj, a reference on the object's store object, which is pending
 * until the fetch ends.  Objects up to sync_max are complete when this
 * returns.  -ENOENT no such object; -EIO no holder can be reached or the
 * fetch failed, or the node is stopping; -EFBIG bigger than the whole
 * store (nothing is evicted); -ENOSPC no room even after eviction;
 * -ENOMEM.
 */
int node_fetch_open(struct node *nd, uint64_t id, const struct meta_obj *rec, uint64_t parent,
		    const char *name, struct node_fetch **ret_f, struct store_obj **ret_obj);

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

/* Object @id was used now (for least-recently-used eviction: it goes to
 * the hot end of the store's use order). */
void node_touch(struct node *nd, uint64_t id);

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
	/* sealing and publishing objects written here */
	uint64_t seal_failed;	 /* seals that failed (reported to close(2), or retried) */
	uint64_t killed_writers; /* kept in /lost+found: their last writer was killed */
	uint64_t published_late; /* published once Redis was back */
	uint64_t reregistered;	 /* registered again by reconciling */
	uint64_t unpublished;	 /* sealed, waiting for Redis (now) */
};
void node_stats(struct node *nd, struct node_stats *ret);
/*
 * The peers that sent this node blocks that failed their sums, with how
 * many each ("a=1 c=2", by name, as many whole entries as @len holds)
 * into @buf.  Returns how many peers there are.
 */
size_t node_peer_csum_failures(struct node *nd, char *buf, size_t len);

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

/* TESTS ONLY (mount option test_corrupt_serve): from now on, the first
 * byte of every range served from an object this node is still
 * fetching goes out flipped; the store's copy is left as it is.  Call
 * before transport_serve(). */
void node_source_test_corrupt(struct node_source *src);

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
/* Did a peer fetch @id lately (a lease of it that has not lapsed nor
 * been taken back)?  Then a copy may be on its way to a holder that
 * Redis does not list yet.  NULL is fine (false). */
bool node_source_leased(struct node_source *src, uint64_t id);

/* Wait until no GET of @id is being answered, or until @deadline_ns
 * (util_mono_ns()): 0 or -ETIMEDOUT.  NULL is fine. */
int node_source_wait(struct node_source *src, uint64_t id, int64_t deadline_ns);

#endif
