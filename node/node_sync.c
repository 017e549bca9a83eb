/*
 * node_sync: keeping the store and Redis in agreement.
 *
 * The Redis epoch is a token written once when a namespace is created.
 * The store remembers the epoch it last agreed with (note "epoch").
 *
 *   same epoch     a local object whose record exists gets this node back
 *                  as a holder; one with a tombstone was deleted while this
 *                  node was away, and is dropped; one that Redis knows
 *                  nothing about (Redis restored from an older snapshot
 *                  keeps its epoch) is registered again: absence alone
 *                  never deletes data.
 *   other epoch    Redis lost its data (or this store was used with
 *                  another Redis): every local object is registered again
 *                  under the path recorded at its last publish.
 *
 * An object whose catalog path is empty was sealed here but never
 * published (Redis was down and the daemon stopped before it came back);
 * it is never dropped, and is registered under /lost+found.
 *
 * node_tick() runs this again when the epoch changes or node_resync()
 * asks for it, and retries publishing (node_publish.c).
 */
#include "node_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* A reconcile says a line per object it changes (common/log.h): at most
 * 10 of a kind in 10 s. */
static struct log_ratelimit moved_rl =
    LOG_RATELIMIT_INIT("reconcile: objects renamed elsewhere", 10000, 10);
static struct log_ratelimit deleted_rl =
    LOG_RATELIMIT_INIT("reconcile: objects deleted while away", 10000, 10);
static struct log_ratelimit unknown_rl =
    LOG_RATELIMIT_INIT("reconcile: objects Redis did not know", 10000, 10);
static struct log_ratelimit rereg_rl =
    LOG_RATELIMIT_INIT("reconcile: objects registered under a new name", 10000, 10);

struct idlist {
	uint64_t *ids;
	size_t n, cap;
};

static int collect_id(struct store_obj *o, void *arg)
{
	struct idlist *l = arg;

	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 256;
		uint64_t *ids = realloc(l->ids, cap * sizeof(*ids));

		if (!ids)
			return -ENOMEM;
		l->ids = ids;
		l->cap = cap;
	}
	l->ids[l->n++] = store_obj_id(o);
	return 0;
}

/* What registering @o again under @path (made up for it if @lost: it
 * never had one) came to: Redis answered @r (0, or 1: it went elsewhere)
 * and the path it has, @got ("" if its record was there). */
static void reregistered(struct store_obj *o, uint64_t id, const char *path, bool lost, int r,
			 const char *got)
{
	if (r == 1)
		log_msg_limited(&rereg_rl, LOGL_WARN,
				"object %" PRIu64 ": '%s' is taken; registered it as '%s'", id,
				path, got);
	if (got[0] && strcmp(got, path))
		store_set_path(o, got);
	else if (lost)
		store_set_path(o, path);
	if (lost)
		log_msg_limited(&rereg_rl, LOGL_WARN,
				"object %" PRIu64 " was never published; registered it as '%s'", id,
				got[0] ? got : path);
}

/* Register @o again under @path ("" if it never had one: /lost+found).
 * If its id turns out to be another object's, it is copied to a fresh id
 * first (node_rekey()). */
static int reregister(struct node *nd, struct store_obj *o, const char *path)
{
	char lost[OBJFS_PATH_MAX], got[OBJFS_PATH_MAX];
	struct store_obj *n = NULL;
	struct meta_obj mo;
	int r;

	if (!path[0]) {
		snprintf(lost, sizeof(lost), "/lost+found/objfs-%" PRIu64, store_obj_id(o));
		path = lost;
	}
	node_record_of(nd, o, &mo);
	r = meta_reregister(nd->meta, &mo, path, got);
	if (r == -ENOTUNIQ) {
		n = node_rekey(nd, o, &r);
		if (!n)
			return r;
		node_record_of(nd, n, &mo);
		r = meta_reregister(nd->meta, &mo, path, got);
		o = n;
	}
	if (r >= 0)
		reregistered(o, mo.id, path, path == lost, r, got);
	store_obj_unref(n);
	return r < 0 ? r : 0;
}

/*
 * Register @k objects of @objs again, under their catalog paths (or
 * /lost+found), with one Redis call for the lot; those the batch could
 * not take (an id that is another object's now, a directory id in use,
 * a path Redis refused) one at a time, as reregister() does.  Adds those
 * registered to *@ret_n; 0 or a negative errno (-EIO: Redis went away).
 */
static int reregister_batch(struct node *nd, struct store_obj *const *objs, size_t k,
			    unsigned *ret_n)
{
	struct meta_obj *recs = calloc(k ? k : 1, sizeof(*recs));
	struct meta_rereg *res = calloc(k ? k : 1, sizeof(*res));
	char **paths = calloc(k ? k : 1, sizeof(*paths));
	bool *lost = calloc(k ? k : 1, sizeof(*lost));
	char path[OBJFS_PATH_MAX];
	int r = 0, one, err = 0;
	size_t i;

	if (!recs || !res || !paths || !lost)
		r = -ENOMEM;
	for (i = 0; i < k && r == 0; i++) {
		uint64_t id = store_obj_id(objs[i]);

		store_obj_path(objs[i], path, sizeof(path));
		lost[i] = !path[0];
		if (lost[i])
			snprintf(path, sizeof(path), "/lost+found/objfs-%" PRIu64, id);
		paths[i] = strdup(path);
		if (!paths[i])
			r = -ENOMEM;
		node_record_of(nd, objs[i], &recs[i]);
	}
	if (r == -ENOMEM)
		goto out;
	r = meta_reregister_batch(nd->meta, recs, (const char *const *)paths, k, res);
	if (r == -EIO) {
		err = r;
		goto out;
	}
	for (i = 0; i < k; i++) {
		/* a batch that failed whole (a bad answer, a path Redis
		 * would refuse) goes one at a time: only the bad one fails */
		one = r < 0 ? r : res[i].r;
		if (one >= 0) {
			reregistered(objs[i], recs[i].id, paths[i], lost[i], one,
				     res[i].path ? res[i].path : "");
			(*ret_n)++;
			continue;
		}
		one = reregister(nd, objs[i], lost[i] ? "" : paths[i]);
		if (one == 0)
			(*ret_n)++;
		else
			err = one;
		if (one == -EIO)
			break;
	}
	if (r == 0)
		meta_rereg_release(res, k);
out:
	for (i = 0; paths && i < k; i++)
		free(paths[i]);
	free(paths);
	free(lost);
	free(recs);
	free(res);
	return r == -ENOMEM ? r : err;
}

enum obj_state {
	OBJ_UNKNOWN = 0, /* neither record nor tombstone */
	OBJ_LIVE = 1,
	OBJ_DELETED = 2,
};

/* What Redis says of object @id: an enum obj_state or a negative errno. */
static int object_state(struct node *nd, uint64_t id)
{
	int r = meta_object_exists(nd->meta, id);

	if (r != 0)
		return r < 0 ? r : OBJ_LIVE;
	r = meta_object_deleted(nd->meta, id);
	if (r != 0)
		return r < 0 ? r : OBJ_DELETED;
	return OBJ_UNKNOWN;
}

/* Is @id waiting to be published (sealed while Redis was away, or being
 * sealed right now)?  Then reconciling must leave it alone.  (An object
 * still being written is not sealed: store_foreach() skips it.) */
static bool publish_pending(struct node *nd, uint64_t id)
{
	bool found;

	pthread_mutex_lock(&nd->pub_lock);
	found = node_publishing_locked(nd, id);
	pthread_mutex_unlock(&nd->pub_lock);
	return found;
}

/*
 * Reconcile one object.  Returns 1 if it was registered again, 0 if it
 * was checked (or dropped), or a negative errno.
 */
static int reconcile_one(struct node *nd, uint64_t id, bool same_epoch)
{
	char path[OBJFS_PATH_MAX];
	struct store_obj *o;
	int r;

	if (publish_pending(nd, id))
		return 0; /* node_publish_retry() or a running seal publishes it */
	o = store_lookup(nd->store, id);
	if (!o)
		return 0; /* unlinked meanwhile */
	store_obj_path(o, path, sizeof(path));
	r = same_epoch ? object_state(nd, id) : OBJ_UNKNOWN;
	switch (r) {
	case OBJ_LIVE: {
		char now[OBJFS_PATH_MAX];
		struct meta_obj mo;

		node_record_of(nd, o, &mo);
		r = meta_add_holder_of(nd->meta, &mo);
		/* the catalog learns where the object lives now: renames
		 * made on other nodes, or a crash between publishing and
		 * recording the path */
		if (r == 0 && meta_object_path(nd->meta, id, now) == 0 && now[0] &&
		    strcmp(now, path) && store_set_path(o, now) == 0)
			log_msg_limited(&moved_rl, LOGL_INFO,
					"object %" PRIu64 " is '%s' now (the catalog said '%s')",
					id, now, path);
		if (r != -ENOTUNIQ)
			break;
		/* Redis lost this object, and its id was used again for
		 * other bytes: this copy is not that object */
		r = reregister(nd, o, path);
		if (r == 0)
			r = 1;
		break;
	}
	case OBJ_DELETED:
		log_msg_limited(
		    &deleted_rl, LOGL_INFO,
		    "object %" PRIu64 " was deleted while this node was away; dropping it", id);
		store_unlink(o);
		r = 0;
		break;
	case OBJ_UNKNOWN:
		if (same_epoch && path[0])
			log_msg_limited(&unknown_rl, LOGL_WARN,
					"Redis does not know object %" PRIu64
					" ('%s') although its "
					"epoch is unchanged (restored from an older snapshot?); "
					"registering it again",
					id, path);
		r = reregister(nd, o, path);
		if (r == 0)
			r = 1;
		break;
	}
	store_obj_unref(o);
	return r;
}

/*
 * Reconcile @n objects of @ids with a Redis call or two.  The same
 * epoch: each becomes a holder again if Redis has its record, and is
 * then acted on as reconcile_one() would (a batch whose answer is
 * corrupt, a bad record on the way, is checked one object at a time).
 * Another epoch (Redis lost its data): each is registered again.  Those
 * Redis does not know are registered again in one more call
 * (reregister_batch()).  Adds the objects registered again to *@ret_n;
 * 0 or a negative errno (-EIO: Redis went away).
 */
static int reconcile_batch(struct node *nd, const uint64_t *ids, size_t n, bool same,
			   unsigned *ret_n)
{
	struct store_obj **objs = calloc(n, sizeof(*objs));
	struct store_obj **todo = calloc(n, sizeof(*todo));
	struct meta_obj *recs = calloc(n, sizeof(*recs));
	struct meta_sync *res = calloc(n, sizeof(*res));
	char path[OBJFS_PATH_MAX];
	size_t k = 0, ntodo = 0, i;
	int r, err = 0;

	if (!objs || !todo || !recs || !res) {
		free(objs);
		free(todo);
		free(recs);
		free(res);
		return -ENOMEM;
	}
	/* eviction takes turns with this: it must not drop a copy this
	 * batch is registering as held */
	pthread_mutex_lock(&nd->evict_lock);
	for (i = 0; i < n; i++) {
		if (publish_pending(nd, ids[i]))
			continue; /* node_publish_retry() or a running seal publishes it */
		objs[k] = store_lookup(nd->store, ids[i]);
		if (objs[k])
			node_record_of(nd, objs[k], &recs[k]), k++;
	}
	if (!same) {
		memcpy(todo, objs, k * sizeof(*todo));
		ntodo = k;
		goto again;
	}
	r = meta_sync_holders(nd->meta, recs, k, res);
	if (r == -EBADMSG) {
		/* one at a time: only the bad one fails */
		for (i = 0; i < k && err != -EIO; i++) {
			r = reconcile_one(nd, store_obj_id(objs[i]), true);
			if (r == 1)
				(*ret_n)++;
			else if (r < 0)
				err = r;
		}
		goto out;
	}
	if (r < 0) {
		err = r;
		goto out;
	}
	for (i = 0; i < k; i++) {
		struct store_obj *o = objs[i];
		uint64_t id = store_obj_id(o);

		store_obj_path(o, path, sizeof(path));
		switch (res[i].state) {
		case META_SYNC_LIVE:
			/* eviction need not ask of an only copy */
			if (res[i].sole)
				store_set_sole(nd->store, id, true);
			/* the catalog learns where the object lives now */
			if (res[i].path && strcmp(res[i].path, path) &&
			    store_set_path(o, res[i].path) == 0)
				log_msg_limited(&moved_rl, LOGL_INFO,
						"object %" PRIu64
						" is '%s' now (the catalog said '%s')",
						id, res[i].path, path);
			continue;
		case META_SYNC_DELETED:
			log_msg_limited(&deleted_rl, LOGL_INFO,
					"object %" PRIu64 " was deleted while this node was away; "
					"dropping it",
					id);
			store_unlink(o);
			continue;
		case META_SYNC_UNKNOWN:
			if (path[0])
				log_msg_limited(
				    &unknown_rl, LOGL_WARN,
				    "Redis does not know object %" PRIu64 " ('%s') although its "
				    "epoch is unchanged (restored from an older snapshot?); "
				    "registering it again",
				    id, path);
			break;
		case META_SYNC_OTHER:
			/* Redis lost this object, and its id was used again
			 * for other bytes: this copy is not that object */
			break;
		}
		todo[ntodo++] = o;
	}
	meta_sync_release(res, k);
again:
	if (ntodo)
		err = reregister_batch(nd, todo, ntodo, ret_n);
out:
	pthread_mutex_unlock(&nd->evict_lock);
	for (i = 0; i < k; i++)
		store_obj_unref(objs[i]);
	free(objs);
	free(todo);
	free(recs);
	free(res);
	return err;
}

int node_reconcile(struct node *nd, unsigned *ret_n)
{
	struct idlist l = {0};
	char epoch[64], seen[64];
	unsigned n = 0;
	bool same;
	size_t i;
	int r, err = 0;

	r = meta_epoch(nd->meta, epoch, sizeof(epoch));
	if (r < 0)
		return r;
	same = store_note_get(nd->store, "epoch", seen, sizeof(seen)) == 0 && !strcmp(seen, epoch);
	/* objects sealed while Redis was away get their real names first */
	node_publish_retry(nd);
	/* Redis lost its data: which copies are the only ones is asked again */
	if (!same)
		store_sole_forget(nd->store, UINT64_MAX);
	r = store_foreach(nd->store, collect_id, &l);
	if (r < 0) {
		free(l.ids);
		return r;
	}
	/* with another epoch Redis lost its data: every object is
	 * registered again */
	for (i = 0; i < l.n; i += META_SYNC_BATCH) {
		r = reconcile_batch(
		    nd, l.ids + i, l.n - i < META_SYNC_BATCH ? l.n - i : META_SYNC_BATCH, same, &n);
		if (r < 0)
			err = r;
		if (r == -EIO)
			break; /* Redis went away: try again on the next tick */
	}
	free(l.ids);
	if (err == -EIO)
		return err;
	if (err)
		log_warn("reconciling with Redis: %s", strerror(-err));
	r = store_note_set(nd->store, "epoch", epoch);
	if (r < 0)
		return r;
	pthread_mutex_lock(&nd->pub_lock);
	snprintf(nd->epoch, sizeof(nd->epoch), "%s", epoch);
	pthread_mutex_unlock(&nd->pub_lock);
	NODE_COUNT(nd, reregistered, n);
	node_publish_retry(nd);
	if (ret_n)
		*ret_n = n;
	return 0;
}

void node_tick(struct node *nd)
{
	char epoch[64];
	bool changed, retry, resync;
	unsigned n = 0;
	int r;

	/* the store's own housekeeping needs no Redis */
	store_tick(nd->store);
	resync = atomic_exchange(&nd->resync, false);
	r = meta_epoch(nd->meta, epoch, sizeof(epoch));
	/* the namespace lost its layout key (a restore of a snapshot older
	 * than the migration): migrate it again, as a mount would */
	if (r == -EPROTO && meta_layout_settle(nd->meta) == 0)
		r = meta_epoch(nd->meta, epoch, sizeof(epoch));
	if (r < 0) {
		if (resync)
			atomic_store(&nd->resync, true);
		return;
	}
	pthread_mutex_lock(&nd->pub_lock);
	/* before the first reconcile there is nothing to compare with */
	changed = nd->epoch[0] && strcmp(epoch, nd->epoch) != 0;
	retry = nd->unpublished != NULL;
	pthread_mutex_unlock(&nd->pub_lock);
	if (changed || resync) {
		if (changed)
			log_warn("Redis at %s lost its data; registering this node's objects again",
				 meta_url(nd->meta));
		static struct log_ratelimit rl = LOG_RATELIMIT_INIT("failed reconciles", 60000, 3);
		int64_t t0 = util_mono_ns();
		struct store_stats ss;

		store_stats(nd->store, &ss);
		r = node_reconcile(nd, &n);
		if (r == 0) {
			log_info("reconciled %" PRIu64
				 " objects with Redis in %.1f s: %u registered "
				 "again",
				 ss.objects, (double)(util_mono_ns() - t0) / 1e9, n);
		} else {
			/* Redis away is said elsewhere; anything else here */
			if (r != -EIO)
				log_msg_limited(&rl, LOGL_WARN,
						"reconciling with Redis failed: %s; trying again "
						"at the next tick",
						strerror(-r));
			atomic_store(&nd->resync, true); /* the next tick tries again */
		}
	} else if (retry) {
		node_publish_retry(nd);
	}
}

void node_resync(struct node *nd)
{
	atomic_store(&nd->resync, true);
	if (nd->wake_tick)
		nd->wake_tick(nd->wake_ctx);
}
