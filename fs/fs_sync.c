/*
 * fs_sync: keeping the store and Redis in agreement.
 *
 * The Redis epoch is a token written once when a namespace is created.
 * The store remembers the epoch it last agreed with (note "epoch").
 *
 *   same epoch     Redis is authoritative: a local object whose record is
 *                  gone was deleted while this node was away, and is
 *                  dropped; the others get this node back as a holder.
 *   other epoch    Redis lost its data (or this store was used with
 *                  another Redis): every local object is registered again
 *                  under the path recorded at its last publish.
 *
 * An object whose catalog path is empty was sealed here but never
 * published (Redis was down and the daemon stopped before it came back);
 * it is never dropped, and is registered under /lost+found.
 */
#include "fs_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct reconcile {
	struct fs *fs;
	bool same_epoch;
	unsigned reregistered;
	uint64_t *drop;		/* ids to drop after the walk */
	size_t ndrop, capdrop;
	int err;
};

static int reregister(struct fs *fs, struct store_obj *o, const char *path)
{
	char lost[OBJFS_PATH_MAX];
	struct meta_obj mo;
	int r;

	memset(&mo, 0, sizeof(mo));
	mo.id = store_obj_id(o);
	mo.size = store_obj_size(o);
	mo.mtime_ns = store_obj_mtime(o);
	store_obj_csum(o, mo.csum);
	snprintf(mo.origin, sizeof(mo.origin), "%s", fs->cfg.node);
	if (!path[0]) {
		snprintf(lost, sizeof(lost), "/lost+found/objfs-%" PRIu64, mo.id);
		path = lost;
	}
	r = meta_reregister(fs->meta, &mo, path);
	if (r == 1)
		log_warn("object %" PRIu64 ": '%s' is taken; registered it under another name",
			 mo.id, path);
	if (r >= 0 && path == lost) {
		store_set_path(o, path);
		log_warn("object %" PRIu64 " was never published; registered it as '%s'", mo.id,
			 path);
	}
	return r < 0 ? r : 0;
}

static int reconcile_one(struct store_obj *o, void *arg)
{
	struct reconcile *rc = arg;
	char path[OBJFS_PATH_MAX];
	uint64_t id = store_obj_id(o);
	int r;

	store_obj_path(o, path, sizeof(path));
	if (rc->same_epoch && path[0]) {
		r = meta_object_exists(rc->fs->meta, id);
		if (r == 0) {
			if (rc->ndrop == rc->capdrop) {
				size_t cap = rc->capdrop ? 2 * rc->capdrop : 64;
				uint64_t *d = realloc(rc->drop, cap * sizeof(*d));

				if (!d)
					return -ENOMEM;
				rc->drop = d;
				rc->capdrop = cap;
			}
			rc->drop[rc->ndrop++] = id;
			return 0;
		}
		if (r == 1)
			r = meta_add_holder(rc->fs->meta, id);
	} else {
		r = reregister(rc->fs, o, path);
		if (r == 0)
			rc->reregistered++;
	}
	if (r < 0)
		rc->err = r;
	return r == -EIO ? r : 0;	/* stop only when Redis is gone */
}

int fs_reconcile(struct fs *fs, unsigned *ret_n)
{
	struct reconcile rc = { .fs = fs };
	char epoch[64], seen[64];
	size_t i;
	int r;

	r = meta_epoch(fs->meta, epoch, sizeof(epoch));
	if (r < 0)
		return r;
	rc.same_epoch = store_note_get(fs->store, "epoch", seen, sizeof(seen)) == 0 &&
			!strcmp(seen, epoch);
	r = store_foreach(fs->store, reconcile_one, &rc);
	for (i = 0; i < rc.ndrop; i++) {
		log_info("object %" PRIu64 " was deleted while this node was away; dropping it",
			 rc.drop[i]);
		fs_forget_local(fs, rc.drop[i]);
	}
	free(rc.drop);
	if (r < 0)
		return r;
	if (rc.err)
		log_warn("reconciling with Redis: %s", strerror(-rc.err));
	r = store_note_set(fs->store, "epoch", epoch);
	if (r < 0)
		return r;
	pthread_mutex_lock(&fs->lock);
	snprintf(fs->epoch, sizeof(fs->epoch), "%s", epoch);
	pthread_mutex_unlock(&fs->lock);
	__atomic_add_fetch(&fs->n_reregistered, rc.reregistered, __ATOMIC_RELAXED);
	fs_publish_retry(fs);
	if (ret_n)
		*ret_n = rc.reregistered;
	return 0;
}

void fs_tick(struct fs *fs)
{
	char epoch[64];
	bool changed, retry;
	unsigned n = 0;

	fs_reap_pending(fs);
	if (meta_epoch(fs->meta, epoch, sizeof(epoch)) < 0)
		return;
	pthread_mutex_lock(&fs->lock);
	changed = strcmp(epoch, fs->epoch) != 0;
	retry = fs->unpublished != NULL;
	pthread_mutex_unlock(&fs->lock);
	if (changed) {
		log_warn("Redis at %s lost its data; registering this node's objects again",
			 meta_url(fs->meta));
		if (fs_reconcile(fs, &n) == 0)
			log_info("registered %u objects again", n);
	} else if (retry) {
		fs_publish_retry(fs);
	}
}

size_t fs_status(struct fs *fs, char *buf, size_t len)
{
	struct store_stats ss;
	char err[256];
	size_t n = 0, npub = 0;
	struct unpublished *u;
	bool up = meta_is_up(fs->meta);

	store_stats(fs->store, &ss);
	pthread_mutex_lock(&fs->lock);
	for (u = fs->unpublished; u; u = u->next)
		npub++;
	pthread_mutex_unlock(&fs->lock);
	err[0] = '\0';
	if (!up)
		meta_last_error(fs->meta, err, sizeof(err));

#define OUT(...)                                                                                \
	do {                                                                                    \
		if (n < len)                                                                    \
			n += (size_t)snprintf(buf + n, len - n, __VA_ARGS__);                   \
	} while (0)
	OUT("mountpoint: %s\n", fs->cfg.mountpoint);
	OUT("node: %s\n", fs->cfg.node);
	OUT("redis: %s %s%s%s\n", up ? "up" : "down", meta_url(fs->meta), err[0] ? " " : "", err);
	OUT("store: %s\n", fs->cfg.store_dir);
	OUT("capacity: %" PRIu64 "\n", ss.capacity);
	OUT("used: %" PRIu64 "\n", ss.used);
	OUT("objects: %" PRIu64 "\n", ss.objects);
	OUT("pending: %" PRIu64 "\n", ss.pending);
	OUT("unpublished: %zu\n", npub);
	OUT("bad_records: %" PRIu64 "\n", ss.bad_records);
	OUT("sealed: %" PRIu64 "\n", __atomic_load_n(&fs->n_sealed, __ATOMIC_RELAXED));
	OUT("reregistered: %" PRIu64 "\n", __atomic_load_n(&fs->n_reregistered, __ATOMIC_RELAXED));
	OUT("overwrite: %s\n", fs->cfg.allow_overwrite ? "allowed" : "refused");
#undef OUT
	return n < len ? n : len - 1;
}
