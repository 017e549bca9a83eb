/*
 * fs_inode: the table of inodes the kernel holds references to, and the
 * overlay of files being written on this node.
 *
 * An inode lives while the kernel has looked it up (nlookup > 0) or a
 * handle is open on it.  Inode numbers are meta ids, so the same object
 * has the same inode number on every node and across remounts.
 * The name cache (dcache_*) remembers what names meant, past the
 * kernel's FORGET, for lookups while Redis is unreachable.  It is bounded:
 * when it reaches DCACHE_MAX entries it starts over.
 *
 * All functions here are called with fs->lock held.
 */
#include "fs_i.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DCACHE_MAX (1u << 20)

struct inode *inode_find(struct fs *fs, uint64_t ino)
{
	struct inode *in = NULL;

	HASH_FIND(hh, fs->inodes, &ino, sizeof(ino), in);
	return in;
}

/* Find or make the inode @ino; NULL only on allocation failure. */
struct inode *inode_get(struct fs *fs, uint64_t ino, enum meta_kind kind)
{
	struct inode *in = inode_find(fs, ino);

	if (in) {
		in->kind = kind;
		return in;
	}
	in = calloc(1, sizeof(*in));
	if (!in)
		return NULL;
	in->ino = ino;
	in->kind = kind;
	HASH_ADD(hh, fs->inodes, ino, sizeof(in->ino), in);
	if (inode_find(fs, ino) != in) {	/* the table could not grow */
		free(in);
		return NULL;
	}
	return in;
}

static void inode_maybe_free(struct fs *fs, struct inode *in)
{
	if (in->nlookup || in->handles || in->pending || in->ino == META_ROOT_ID)
		return;
	HASH_DELETE(hh, fs->inodes, in);
	free(in->name);
	free(in);
}

/* Remember the name @in was looked up by (best effort). */
void inode_set_name(struct inode *in, uint64_t parent, const char *name)
{
	if (in->name && in->parent == parent && !strcmp(in->name, name))
		return;
	free(in->name);
	in->name = strdup(name);
	in->parent = parent;
}

void inode_forget(struct fs *fs, uint64_t ino, uint64_t n)
{
	struct inode *in = inode_find(fs, ino);

	if (!in)
		return;
	in->nlookup = in->nlookup > n ? in->nlookup - n : 0;
	inode_maybe_free(fs, in);
}

/* Drop a handle's hold on an inode (see struct inode.handles). */
void inode_put_handle(struct fs *fs, uint64_t ino)
{
	struct inode *in = inode_find(fs, ino);

	if (!in)
		return;
	if (in->handles)
		in->handles--;
	inode_maybe_free(fs, in);
}

void inode_free_all(struct fs *fs)
{
	struct inode *in, *tmp;

	HASH_ITER(hh, fs->inodes, in, tmp) {
		HASH_DELETE(hh, fs->inodes, in);
		free(in->name);
		free(in);
	}
}

struct pending *pending_find(struct fs *fs, uint64_t parent, const char *name)
{
	struct pending *p;

	for (p = fs->pending; p; p = p->next)
		if (p->parent == parent && !p->unlinked && !strcmp(p->name, name))
			return p;
	return NULL;
}

/* Unlink @p from the overlay; the caller still owns it. */
void pending_remove(struct fs *fs, struct pending *p)
{
	struct pending **pp;

	for (pp = &fs->pending; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			p->next = NULL;
			return;
		}
	}
}

static void dcache_key(char *buf, size_t len, uint64_t parent, const char *name)
{
	snprintf(buf, len, "%" PRIu64 "/%s", parent, name);
}

static struct dentry *dcache_find(struct fs *fs, uint64_t parent, const char *name)
{
	char key[32 + OBJFS_NAME_MAX];
	struct dentry *d = NULL;

	dcache_key(key, sizeof(key), parent, name);
	HASH_FIND_STR(fs->dcache, key, d);
	return d;
}

void dcache_put(struct fs *fs, uint64_t parent, const char *name, enum meta_kind kind,
		uint64_t id)
{
	char key[32 + OBJFS_NAME_MAX];
	struct dentry *d = dcache_find(fs, parent, name);

	if (!d) {
		if (fs->n_dcache >= DCACHE_MAX)
			dcache_free_all(fs);
		d = calloc(1, sizeof(*d));
		dcache_key(key, sizeof(key), parent, name);
		if (!d || !(d->key = strdup(key))) {
			free(d);
			return;	/* only a fallback: losing an entry is fine */
		}
		HASH_ADD_KEYPTR(hh, fs->dcache, d->key, strlen(d->key), d);
		if (dcache_find(fs, parent, name) != d) {
			free(d->key);
			free(d);
			return;
		}
		fs->n_dcache++;
	}
	d->kind = kind;
	d->id = id;
}

void dcache_del(struct fs *fs, uint64_t parent, const char *name)
{
	struct dentry *d = dcache_find(fs, parent, name);

	if (!d)
		return;
	HASH_DELETE(hh, fs->dcache, d);
	fs->n_dcache--;
	free(d->key);
	free(d);
}

bool dcache_get(struct fs *fs, uint64_t parent, const char *name, enum meta_kind *ret_kind,
		uint64_t *ret_id)
{
	struct dentry *d = dcache_find(fs, parent, name);

	if (!d)
		return false;
	*ret_kind = d->kind;
	*ret_id = d->id;
	return true;
}

void dcache_free_all(struct fs *fs)
{
	struct dentry *d, *tmp;

	HASH_ITER(hh, fs->dcache, d, tmp) {
		HASH_DELETE(hh, fs->dcache, d);
		free(d->key);
		free(d);
	}
	fs->n_dcache = 0;
}
