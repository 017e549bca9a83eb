/*
 * node: the node itself (making, stopping, counters), and the calls that
 * make up an object's life here, as fs/ sees them:
 *
 *   node_create()   a fresh id (Redis) and a pending store object; at
 *                   the object limit, one copy is given up first
 *   node_seal_publish()   (node_publish.c)
 *   node_open()     the local copy if it is the object the record
 *                   describes; a stranger copy (Redis lost writes and
 *                   its id was used again) is moved to a fresh id and a
 *                   reconcile asked for; else a fetch (node_fetch.c)
 *   node_unlinked(), node_gone()   the copy goes, once its readers close it
 *   node_renamed()  the catalog path follows the name
 */
#include "node_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* ---- the node ---- */

struct node *node_new(const struct node_config *cfg, int *ret_err)
{
	struct transport_tuning tt = {
	    .streams_per_peer = FETCH_STREAMS_DEFAULT,
	    .range_min = FETCH_RANGE_MIN_DEFAULT,
	    .io_timeout_ms = TRANSPORT_DEFAULT_TIMEOUT_MS,
	};
	struct node *nd;
	int r;

	if (!cfg->node || !cfg->meta || !cfg->store) {
		*ret_err = -EINVAL;
		return NULL;
	}
	nd = calloc(1, sizeof(*nd));
	if (!nd) {
		*ret_err = -ENOMEM;
		return NULL;
	}
	snprintf(nd->node, sizeof(nd->node), "%s", cfg->node);
	nd->meta = cfg->meta;
	nd->store = cfg->store;
	nd->transport = cfg->transport;
	nd->hooks = cfg->hooks;
	nd->source = cfg->source;
	nd->wake_tick = cfg->wake_tick;
	nd->wake_ctx = cfg->wake_ctx;
	nd->sync_max = cfg->sync_max ? cfg->sync_max : FETCH_SYNC_MAX_DEFAULT;
	if (nd->transport)
		transport_tuning(nd->transport, &tt);
	nd->streams_per_holder = tt.streams_per_peer ? tt.streams_per_peer : 1;
	nd->range_min = tt.range_min ? tt.range_min : FETCH_RANGE_MIN_DEFAULT;
	nd->io_timeout_ms = tt.io_timeout_ms ? tt.io_timeout_ms : TRANSPORT_DEFAULT_TIMEOUT_MS;
	/* the opening thread runs one range: an object it fetches must fit
	 * in one */
	if (nd->sync_max > nd->range_min)
		nd->sync_max = nd->range_min;
	pthread_mutex_init(&nd->lock, NULL);
	pthread_mutex_init(&nd->pub_lock, NULL);
	pthread_mutex_init(&nd->retry_lock, NULL);
	pthread_mutex_init(&nd->evict_lock, NULL);
	pthread_cond_init(&nd->queue_cond, NULL);
	if (nd->transport) {
		r = node_fetch_start_workers(nd,
					     cfg->workers ? cfg->workers : FETCH_WORKERS_DEFAULT);
		if (r < 0) {
			node_free(nd);
			*ret_err = r;
			return NULL;
		}
	}
	return nd;
}

void node_stop(struct node *nd)
{
	if (!nd)
		return;
	node_fetch_stop_workers(nd);
	node_fetch_drop_all(nd);
}

void node_free(struct node *nd)
{
	if (!nd)
		return;
	node_stop(nd);
	node_fetch_peer_free_all(nd);
	node_unpublished_free_all(nd);
	pthread_mutex_destroy(&nd->lock);
	pthread_mutex_destroy(&nd->pub_lock);
	pthread_mutex_destroy(&nd->retry_lock);
	pthread_mutex_destroy(&nd->evict_lock);
	pthread_cond_destroy(&nd->queue_cond);
	free(nd);
}

void node_stats(struct node *nd, struct node_stats *ret)
{
#define LOAD(field) atomic_load_explicit(&nd->cnt.field, memory_order_relaxed)
	ret->fetches = LOAD(fetches);
	ret->direct = LOAD(direct);
	ret->done = LOAD(done);
	ret->failed = LOAD(failed);
	ret->bytes = LOAD(bytes);
	ret->failovers = LOAD(failovers);
	ret->csum_failures = LOAD(csum_failures);
	ret->stale_holders = LOAD(stale_holders);
	ret->evictions = LOAD(evictions);
	ret->seal_failed = LOAD(seal_failed);
	ret->killed_writers = LOAD(killed_writers);
	ret->published_late = LOAD(published_late);
	ret->reregistered = LOAD(reregistered);
#undef LOAD
	ret->unpublished = 0;
	pthread_mutex_lock(&nd->pub_lock);
	for (struct unpublished *u = nd->unpublished; u; u = u->next)
		ret->unpublished++;
	pthread_mutex_unlock(&nd->pub_lock);
}

void node_set_hooks(struct node *nd, const struct node_hooks *hooks)
{
	nd->hooks = *hooks;
}

/* ---- an object's life here ---- */

/* Is sealed @o the object @rec describes? */
static bool local_copy_is(struct store_obj *o, const struct meta_obj *rec)
{
	uint8_t csum[OBJFS_CSUM_LEN];

	store_obj_csum(o, csum);
	return store_obj_size(o) == rec->size && !memcmp(csum, rec->csum, sizeof(csum));
}

/* This node's copy of an id is other bytes than the id's record says
 * (Redis lost writes and the id was used again): it is never served as
 * that object.  Its bytes move to a fresh id, and the store is reconciled
 * with Redis to register them.  Drops the reference on @o.  0, or a
 * negative errno if they could not move (the copy stays as it is). */
static int set_stranger_aside(struct node *nd, struct store_obj *o)
{
	struct store_obj *n;
	int r = 0;

	n = node_rekey(nd, o, &r);
	store_obj_unref(n);
	store_obj_unref(o);
	node_resync(nd);
	return n ? 0 : r;
}

int node_open(struct node *nd, uint64_t id, const struct meta_obj *rec, uint64_t parent,
	      const char *name, struct store_obj **ret_obj, struct node_fetch **ret_f)
{
	struct store_obj *obj = store_lookup(nd->store, id);

	*ret_f = NULL;
	if (obj && !store_obj_sealed(obj)) {
		/* a fetch in flight (or one that just ended): go through it */
		store_obj_unref(obj);
		obj = NULL;
	}
	if (obj && rec && !local_copy_is(obj, rec)) {
		if (set_stranger_aside(nd, obj) < 0)
			return -EIO;
		obj = NULL;
	}
	if (!obj)
		return node_fetch_open(nd, id, rec, parent, name, ret_f, ret_obj);
	node_touch(nd, id);
	*ret_obj = obj;
	return 0;
}

int node_create(struct node *nd, uint64_t *ret_id, struct store_obj **ret_obj)
{
	uint64_t id;
	int r;

	r = meta_alloc_id(nd->meta, &id);
	if (r < 0)
		return r;
	*ret_obj = node_store_create(nd, id, &r);
	if (!*ret_obj)
		return r;
	*ret_id = id;
	return 0;
}

void node_discard(struct node *nd, struct store_obj *o)
{
	store_unlink(o);
}

void node_unlinked(struct node *nd, uint64_t id)
{
	(void)store_unlink_id(nd->store, id);
}

void node_gone(struct node *nd, uint64_t id)
{
	struct store_obj *o;

	o = store_lookup(nd->store, id);
	if (!o)
		return;
	if (store_obj_sealed(o)) {
		log_debug("object %" PRIu64 " was deleted; dropping this node's copy", id);
		store_unlink(o);
	}
	store_obj_unref(o);
}

void node_renamed(struct node *nd, uint64_t parent, const char *name)
{
	char path[OBJFS_PATH_MAX];
	enum meta_kind kind;
	struct store_obj *o;
	uint64_t id;

	if (meta_path(nd->meta, parent, name, &kind, &id, path) < 0 || kind != META_FILE ||
	    !path[0])
		return;
	o = store_lookup(nd->store, id);
	if (o && store_obj_sealed(o))
		store_set_path(o, path);
	store_obj_unref(o);
}

bool node_holds(struct node *nd, uint64_t id)
{
	return store_has(nd->store, id);
}

struct store_obj *node_local(struct node *nd, uint64_t id)
{
	struct store_obj *o = store_lookup(nd->store, id);

	if (o && !store_obj_sealed(o)) {
		store_obj_unref(o);
		return NULL;
	}
	return o;
}
