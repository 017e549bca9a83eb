/*
 * fs_cache: this node as one member of a cluster of caches.
 *
 * Serving.  The transport's server reads sealed objects through the
 * source defined here: a store reference pins the object while its pages
 * are on the wire.
 *
 * Eviction.  When the store has no room (a fetch reserving pages, a write
 * growing a file), sealed objects that nobody has open here are given up,
 * least recently used first — but only those that live on another node
 * too: meta_release_replica() removes this node from the holders in one
 * atomic step only if another live holder remains, so two nodes evicting
 * at once can never drop the last copy.  An object that exists nowhere
 * else stays, and the writer gets ENOSPC.
 *
 * Invalidation.  Every namespace change anywhere is published by Redis;
 * the subscriber thread of meta calls fs_on_inval(), which drops the
 * kernel's cached entries for the name (FUSE notify) and, for an object
 * that was deleted, this node's copy (its pages go once no reader has it
 * open).  After a gap in the subscription (Redis was away), every cached
 * name is dropped, since messages may have been missed.
 */
#include "fs_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport.h"

#define LRU_MAX (1u << 20)

/* ---- use times ---- */

struct lru {
	uint64_t id;
	int64_t at;
	UT_hash_handle hh;
};

static struct lru *lru_find(struct fs *fs, uint64_t id)
{
	struct lru *e = NULL;

	HASH_FIND(hh, fs->lru, &id, sizeof(id), e);
	return e;
}

void fs_lru_touch(struct fs *fs, uint64_t id)
{
	struct lru *e;

	pthread_mutex_lock(&fs->lock);
	e = lru_find(fs, id);
	if (!e) {
		if (HASH_COUNT(fs->lru) >= LRU_MAX)
			fs_lru_free_all(fs);
		e = calloc(1, sizeof(*e));
		if (e) {
			e->id = id;
			HASH_ADD(hh, fs->lru, id, sizeof(e->id), e);
			if (!lru_find(fs, id)) {	/* the table could not grow */
				free(e);
				e = NULL;
			}
		}
	}
	if (e)
		e->at = mono_ns();
	pthread_mutex_unlock(&fs->lock);
}

/* Called with fs->lock held. */
static void lru_del(struct fs *fs, uint64_t id)
{
	struct lru *e;

	HASH_FIND(hh, fs->lru, &id, sizeof(id), e);
	if (e) {
		HASH_DELETE(hh, fs->lru, e);
		free(e);
	}
}

void fs_lru_free_all(struct fs *fs)
{
	struct lru *e, *tmp;

	HASH_ITER(hh, fs->lru, e, tmp) {
		HASH_DELETE(hh, fs->lru, e);
		free(e);
	}
}

/* ---- eviction ---- */

struct cand {
	uint64_t id;
	uint64_t size;
	int64_t at;
};

struct cands {
	struct cand *v;
	size_t n, cap;
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
	c->n++;
	return 0;
}

static int cmp_at(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	return x->at < y->at ? -1 : x->at > y->at ? 1 : 0;
}

/* May @id be evicted now?  Called with fs->lock held. */
static bool evictable(struct fs *fs, uint64_t id, int64_t *ret_at)
{
	struct inode *in = inode_find(fs, id);
	struct unpublished *u;
	struct lru *e;

	if (in && (in->handles || in->pending))
		return false;
	/* sealed while Redis was away: Redis does not know it yet */
	for (u = fs->unpublished; u; u = u->next)
		if (u->id == id)
			return false;
	if (fetch_running(fs, id))
		return false;
	HASH_FIND(hh, fs->lru, &id, sizeof(id), e);
	*ret_at = e ? e->at : 0;
	return true;
}

uint64_t fs_evict(struct fs *fs, uint64_t need)
{
	struct cands c = { 0 };
	uint64_t freed = 0;
	size_t i, k = 0;
	int r;

	if (store_foreach(fs->store, collect, &c) < 0) {
		free(c.v);
		return 0;
	}
	pthread_mutex_lock(&fs->lock);
	for (i = 0; i < c.n; i++)
		if (evictable(fs, c.v[i].id, &c.v[i].at))
			c.v[k++] = c.v[i];
	pthread_mutex_unlock(&fs->lock);
	if (k)
		qsort(c.v, k, sizeof(*c.v), cmp_at);
	for (i = 0; i < k && freed < need; i++) {
		struct store_obj *o;
		bool ok;

		r = meta_release_replica(fs->meta, c.v[i].id);
		if (r == -ENOENT) {
			/* deleted meanwhile: its copy is garbage anyway */
			fs_forget_local(fs, c.v[i].id);
			freed += c.v[i].size;
			continue;
		}
		if (r < 0) {
			log_warn("cannot evict: Redis is unreachable (%s)", strerror(-r));
			break;
		}
		if (r == 0)
			continue;	/* the last copy in the cluster */
		pthread_mutex_lock(&fs->lock);
		ok = evictable(fs, c.v[i].id, &c.v[i].at);
		if (ok)
			lru_del(fs, c.v[i].id);
		pthread_mutex_unlock(&fs->lock);
		if (!ok) {
			/* opened meanwhile: keep it, and say so */
			meta_add_holder(fs->meta, c.v[i].id);
			continue;
		}
		o = store_lookup(fs->store, c.v[i].id);
		if (o) {
			store_unlink(o);
			store_obj_unref(o);
		}
		freed += c.v[i].size;
		__atomic_add_fetch(&fs->n_evictions, 1, __ATOMIC_RELAXED);
		log_info("evicted object %" PRIu64 " (%" PRIu64 " bytes; other nodes hold it)",
			 c.v[i].id, c.v[i].size);
	}
	free(c.v);
	return freed;
}

/* ---- serving ---- */

static int src_open(void *ctx, uint64_t id, uint64_t *ret_size, void **ret_token)
{
	struct fs *fs = ctx;
	struct store_obj *o = store_lookup(fs->store, id);

	if (!o)
		return -ENOENT;
	if (!store_obj_sealed(o)) {
		store_obj_unref(o);
		return -ENOENT;
	}
	*ret_size = store_obj_size(o);
	*ret_token = o;
	return 0;
}

static int src_iov(void *token, uint64_t off, size_t len, struct iovec *iov, int max_iov,
		   size_t *ret_bytes)
{
	return store_obj_iov(token, off, len, iov, max_iov, ret_bytes);
}

static void src_close(void *token)
{
	store_obj_unref(token);
}

void fs_source(struct fs *fs, struct transport_source *ret)
{
	ret->open = src_open;
	ret->iov = src_iov;
	ret->close = src_close;
	ret->ctx = fs;
}

/* ---- invalidation ---- */

/* Drop every name the kernel may have cached (messages were lost). */
static void inval_all(struct fs *fs)
{
	struct dentry *d, *tmp;
	char **keys = NULL;
	size_t n = 0, i;

	pthread_mutex_lock(&fs->lock);
	keys = calloc(fs->n_dcache ? fs->n_dcache : 1, sizeof(*keys));
	if (keys) {
		HASH_ITER(hh, fs->dcache, d, tmp) {
			if (n < fs->n_dcache && (keys[n] = strdup(d->key)))
				n++;
		}
	}
	pthread_mutex_unlock(&fs->lock);
	for (i = 0; i < n; i++) {
		char *slash = strchr(keys[i], '/');

		if (slash) {
			*slash = '\0';
			fs_notify_gone(fs, strtoull(keys[i], NULL, 10), slash + 1);
		}
		free(keys[i]);
	}
	free(keys);
	log_info("invalidation messages may have been missed; dropped %zu cached names", n);
}

/* Drop this node's copy of a deleted object, unless it is being written
 * here (an object with the same id cannot be, but be safe). */
static void drop_deleted(struct fs *fs, uint64_t id)
{
	struct store_obj *o;
	bool mine;

	pthread_mutex_lock(&fs->lock);
	{
		struct inode *in = inode_find(fs, id);

		mine = in && in->pending;
		if (!mine)
			lru_del(fs, id);
	}
	pthread_mutex_unlock(&fs->lock);
	if (mine)
		return;
	o = store_lookup(fs->store, id);
	if (!o)
		return;
	if (store_obj_sealed(o)) {
		log_debug("object %" PRIu64 " was deleted; dropping this node's copy", id);
		store_unlink(o);
	}
	store_obj_unref(o);
}

void fs_on_inval(void *arg, const struct meta_inval *ev)
{
	struct fs *fs = arg;

	if (!ev) {
		inval_all(fs);
		return;
	}
	__atomic_add_fetch(&fs->n_invalidations, 1, __ATOMIC_RELAXED);
	if (!strcmp(ev->kind, "gone")) {
		drop_deleted(fs, ev->id);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	dcache_del(fs, ev->parent, ev->name);
	pthread_mutex_unlock(&fs->lock);
	if (fs->se && fs->mounted) {
		fuse_lowlevel_notify_inval_entry(fs->se, ev->parent, ev->name, strlen(ev->name));
		/* the directory's mtime and link count changed */
		fuse_lowlevel_notify_inval_inode(fs->se, ev->parent, -1, 0);
	}
	if (!strcmp(ev->kind, "unlink"))
		drop_deleted(fs, ev->id);
}
