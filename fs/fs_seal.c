/*
 * fs_seal: the end of a file written through this mount, as the overlay
 * sees it.
 *
 *   last writer done (its opener's last close, a FLUSH; or the RELEASE of
 *   its handle, see fs_file.c) ──► fs_seal_pending() ──► node_seal_publish()
 *   (node/: seal, publish, or keep for later) ──► out of the overlay:
 *   sealed (mode 0444, immutable) or discarded
 *
 * The seal's result goes back to close(2) when a FLUSH sealed it: EIO for
 * an object kept unpublished or not sealed, ENOSPC for a lost write.  A
 * seal that fails at a RELEASE (the writer's close(2) returned 0 already)
 * keeps the object pending, and the tick tries again (fs_seal_retry()).
 *
 * Replacement objects (allow_overwrite) that the writer never opened are
 * reaped after REAP_AFTER_NS.
 */
#include "fs_i.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REAP_AFTER_NS (10 * 1000000000LL)

int fs_seal_pending(struct fs *fs, struct pending *p, bool told)
{
	char name[OBJFS_NAME_MAX + 1];
	bool discard, failed, free_now, lost = false, unsealed = false;
	enum node_sealed how = NODE_SEAL_FAILED;
	struct node_meta md;
	unsigned flags;
	uint64_t parent;
	struct inode *in;
	int r = 0, ret = 0, sig;

	pthread_mutex_lock(&fs->lock);
	failed = p->failed;
	discard = p->failed || p->unlinked;
	sig = p->killed_sig;
	p->seal_retry = false;
	/* the seal runs with no lock: p->sealing keeps the name and the
	 * flags as they are (rename_pending() waits for it) */
	parent = p->parent;
	memcpy(name, p->name, sizeof(name));
	flags = (p->replace ? NODE_SEAL_REPLACE : 0) | (told ? NODE_SEAL_TOLD : 0);
	md = p->md;
	pthread_mutex_unlock(&fs->lock);
	if (!discard) {
		r = node_seal_publish_meta(fs->nd, p->obj, parent, name, flags, sig, &md, &how);
		if (how == NODE_SEAL_FAILED && !told) {
			/* the writer's close(2) returned 0: keep it, and try again */
			pthread_mutex_lock(&fs->lock);
			p->seal_retry = true;
			pthread_mutex_unlock(&fs->lock);
			return r;
		}
		ret = r;
		unsealed = how == NODE_SEAL_FAILED;
		lost = how == NODE_SEAL_LOST;
		if (how == NODE_SEAL_MOVED)
			discard = true; /* kept under another id in /lost+found */
	}
	if (failed)
		ret = -ENOSPC;

	pthread_mutex_lock(&fs->lock);
	fs_pending_remove(fs, p);
	in = fs_inode_find(fs, p->id);
	if (in && in->pending == p) {
		in->pending = NULL;
		if (!discard && !unsealed) {
			struct meta_obj mo;

			in->sealed = true;
			node_record_of(fs->nd, p->obj, &mo);
			fs_inode_set_rec(fs, in, &mo);
			/* as node_seal_publish_meta() published it */
			in->attr = md.attr;
			if (lost)
				in->attr.set = false;
		}
	}
	p->sealing = false;
	if (!discard && !unsealed) {
		p->sealed = true;
	} else {
		p->discarded = true;
		if (unsealed)
			p->seal_err = ret;
	}
	/* handles still open on it (a FLUSH sealed it) free it at their
	 * last release; from here on it is theirs */
	free_now = p->opens == 0;
	pthread_cond_broadcast(&fs->settle);
	pthread_mutex_unlock(&fs->lock);
	if (!unsealed && !discard) {
		FS_COUNT(fs, sealed, 1);
		if (told)
			FS_COUNT(fs, sealed_at_close, 1);
	}

	/* a killed writer's object does not keep the name the kernel knows */
	if (discard || unsealed || lost)
		fs_notify_gone(fs, parent, name);
	if (discard || unsealed)
		node_discard(fs->nd, p->obj);
	if (free_now) {
		store_obj_unref(p->obj);
		free(p);
	}
	return ret;
}

void fs_seal_retry(struct fs *fs)
{
	struct pending *p, *todo[16];
	size_t n = 0, i;

	pthread_mutex_lock(&fs->lock);
	for (p = fs->pending; p && n < ARRAY_SIZE(todo); p = p->next) {
		if (p->seal_retry) {
			p->seal_retry = false;
			todo[n++] = p;
		}
	}
	pthread_mutex_unlock(&fs->lock);
	/* p->sealing is still set: nothing else seals or frees them */
	for (i = 0; i < n; i++)
		(void)fs_seal_pending(fs, todo[i], false);
}

void fs_reap_pending(struct fs *fs)
{
	struct pending *p, *dead = NULL, *next;
	int64_t now = util_mono_ns();

	pthread_mutex_lock(&fs->lock);
	for (p = fs->pending; p; p = next) {
		next = p->next;
		if (p->opens == 0 && !p->sealing && now - p->created_ns > REAP_AFTER_NS) {
			struct inode *in = fs_inode_find(fs, p->id);

			fs_pending_remove(fs, p);
			if (in && in->pending == p)
				in->pending = NULL;
			p->next = dead;
			dead = p;
		}
	}
	pthread_mutex_unlock(&fs->lock);
	while ((p = dead)) {
		dead = p->next;
		fs_pending_free(fs, p);
	}
}

/*
 * Once the kernel forgot many inodes (it does so by the thousand under
 * memory pressure, or at drop_caches), what they held (names, handles,
 * the replies that made them) is free in the allocator's heaps but still
 * resident, between live chunks: malloc_trim() gives those pages back.
 */
#define TRIM_AFTER_FORGOTTEN 4096

static void heap_trim(struct fs *fs)
{
	bool trim;

	pthread_mutex_lock(&fs->lock);
	trim = fs->inodes_freed >= TRIM_AFTER_FORGOTTEN;
	if (trim) {
		fs->inodes_freed = 0;
		fs->heap_trims++;
	}
	pthread_mutex_unlock(&fs->lock);
	if (trim)
		malloc_trim(0);
}

void fs_tick(struct fs *fs)
{
	fs_reap_pending(fs);
	fs_seal_retry(fs);
	heap_trim(fs);
}
