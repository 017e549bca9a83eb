/*
 * fs_publish: the life of an object written here, from its last close.
 *
 *   last release ──► store_seal (checksum, catalog record)
 *                ──► meta_publish (the name becomes visible to every node)
 *                ──► sealed, mode 0444, immutable
 *
 * Publishing never loses the object: a name taken meanwhile on another
 * node gives it "<name>.objfs-<id>"; a directory that vanished gives it
 * /lost+found; Redis being unreachable keeps it on the unpublished list,
 * and the next tick (or Redis coming back) publishes it.
 *
 * Replacement objects (allow_overwrite) that the writer never opened are
 * reaped after REAP_AFTER_NS.
 */
#include "fs_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REAP_AFTER_NS (10 * 1000000000LL)

/* Publish @p under a name that does not collide with @name. */
static int publish_conflict(struct fs *fs, struct pending *p, const struct meta_obj *mo, char *path)
{
	char alt[OBJFS_NAME_MAX + 1];
	int r;

	snprintf(alt, sizeof(alt), "%.*s.objfs-%" PRIu64, OBJFS_NAME_MAX - 28, p->name, p->id);
	r = meta_publish(fs->meta, p->parent, alt, mo, false, NULL, path);
	if (r == 0)
		log_warn("'%s' was created elsewhere while object %" PRIu64
			 " was written here; kept it as '%s'",
			 p->name, p->id, alt);
	return r;
}

static void remember_unpublished(struct fs *fs, struct pending *p)
{
	struct unpublished *u = calloc(1, sizeof(*u));

	if (!u) {
		log_error("out of memory: object %" PRIu64 " stays unpublished until restart",
			  p->id);
		return;
	}
	u->id = p->id;
	u->parent = p->parent;
	memcpy(u->name, p->name, sizeof(u->name));
	u->replace = p->replace;
	pthread_mutex_lock(&fs->lock);
	u->next = fs->unpublished;
	fs->unpublished = u;
	pthread_mutex_unlock(&fs->lock);
}

/* Link a sealed object's name in Redis, handling every way that can fail
 * without losing the object.  Returns 0, or -EIO if Redis is away (the
 * caller keeps it for a later retry). */
static int publish(struct fs *fs, uint64_t id, uint64_t parent, const char *name, bool replace,
		   struct store_obj *obj)
{
	char path[OBJFS_PATH_MAX];
	struct pending tmp = {.id = id, .parent = parent};
	uint64_t replaced = 0;
	bool as_named;
	struct meta_obj mo;
	int r;

	memset(&mo, 0, sizeof(mo));
	mo.id = id;
	mo.size = store_obj_size(obj);
	mo.mtime_ns = store_obj_mtime(obj);
	store_obj_csum(obj, mo.csum);
	snprintf(mo.origin, sizeof(mo.origin), "%s", fs->cfg.node);
	snprintf(tmp.name, sizeof(tmp.name), "%s", name);

	path[0] = '\0';
	r = meta_publish(fs->meta, parent, name, &mo, replace, &replaced, path);
	as_named = r == 0;
	if (r == -EEXIST || r == -EISDIR)
		r = publish_conflict(fs, &tmp, &mo, path);
	if (r == -ENOENT || r == -ENOTDIR) {
		snprintf(path, sizeof(path), "/lost+found/%s", name);
		r = meta_reregister(fs->meta, &mo, path);
		if (r >= 0) {
			log_warn("directory of '%s' vanished while object %" PRIu64
				 " was written; it is in /lost+found",
				 name, id);
			r = 0;
		}
	}
	if (r < 0) {
		if (r != -EIO)
			log_error("cannot publish object %" PRIu64 " as '%s': %s; will retry", id,
				  name, strerror(-r));
		return -EIO;
	}
	if (path[0])
		store_set_path(obj, path);
	if (as_named) {
		pthread_mutex_lock(&fs->lock);
		dcache_put(fs, parent, name, META_FILE, id);
		pthread_mutex_unlock(&fs->lock);
	}
	if (replaced)
		(void)store_unlink_id(fs->store, replaced); /* its name is gone */
	return 0;
}

void fs_seal_pending(struct fs *fs, struct pending *p)
{
	struct inode *in;
	bool discard;
	int r = 0;

	pthread_mutex_lock(&fs->lock);
	discard = p->failed || p->unlinked;
	pthread_mutex_unlock(&fs->lock);
	if (!discard) {
		r = store_seal(p->obj, "", now_ns());
		if (r < 0)
			log_error("cannot seal object %" PRIu64 " ('%s'): %s; discarding it", p->id,
				  p->name, strerror(-r));
	}
	if (!discard && r == 0 && publish(fs, p->id, p->parent, p->name, p->replace, p->obj) < 0) {
		log_warn("Redis unreachable: object %" PRIu64 " ('%s') sealed on this node, "
			 "published when Redis is back",
			 p->id, p->name);
		remember_unpublished(fs, p);
	}

	pthread_mutex_lock(&fs->lock);
	pending_remove(fs, p);
	in = inode_find(fs, p->id);
	if (in && in->pending == p) {
		in->pending = NULL;
		if (!discard && r == 0) {
			in->sealed = true;
			in->obj.id = p->id;
			in->obj.size = store_obj_size(p->obj);
			in->obj.mtime_ns = store_obj_mtime(p->obj);
			store_obj_csum(p->obj, in->obj.csum);
			snprintf(in->obj.origin, sizeof(in->obj.origin), "%s", fs->cfg.node);
		}
	}
	pthread_cond_broadcast(&fs->settle);
	pthread_mutex_unlock(&fs->lock);
	FS_COUNT(fs, sealed, 1);

	if (discard || r < 0) {
		fs_notify_gone(fs, p->parent, p->name);
		pending_free(p);
	} else {
		store_obj_unref(p->obj);
		free(p);
	}
}

/* ---- later ---- */

void fs_publish_retry(struct fs *fs)
{
	struct unpublished *list, *u, *keep = NULL;

	pthread_mutex_lock(&fs->lock);
	list = fs->unpublished;
	fs->unpublished = NULL;
	pthread_mutex_unlock(&fs->lock);

	while ((u = list)) {
		struct store_obj *obj = store_lookup(fs->store, u->id);

		list = u->next;
		if (!obj) {
			free(u); /* unlinked meanwhile */
			continue;
		}
		if (publish(fs, u->id, u->parent, u->name, u->replace, obj) == 0) {
			log_info("published object %" PRIu64 " as '%s' now that Redis is back",
				 u->id, u->name);
			FS_COUNT(fs, published_late, 1);
			free(u);
		} else {
			u->next = keep;
			keep = u;
		}
		store_obj_unref(obj);
	}
	if (keep) {
		pthread_mutex_lock(&fs->lock);
		for (u = keep; u->next; u = u->next)
			;
		u->next = fs->unpublished;
		fs->unpublished = keep;
		pthread_mutex_unlock(&fs->lock);
	}
}

void fs_reap_pending(struct fs *fs)
{
	struct pending *p, *dead = NULL, *next;
	int64_t now = mono_ns();

	pthread_mutex_lock(&fs->lock);
	for (p = fs->pending; p; p = next) {
		next = p->next;
		if (p->opens == 0 && !p->sealing && now - p->created_ns > REAP_AFTER_NS) {
			struct inode *in = inode_find(fs, p->id);

			pending_remove(fs, p);
			if (in && in->pending == p)
				in->pending = NULL;
			p->next = dead;
			dead = p;
		}
	}
	pthread_mutex_unlock(&fs->lock);
	while ((p = dead)) {
		dead = p->next;
		pending_free(p);
	}
}
