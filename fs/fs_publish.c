/*
 * fs_publish: the life of an object written here, from its last close.
 *
 *   last writer done (its opener's last close, a FLUSH; or the RELEASE of
 *   its handle, see fs_file.c)
 *                ──► store_seal (checksum, catalog record)
 *                ──► meta_publish (the name becomes visible to every node)
 *                ──► sealed, mode 0444, immutable
 *
 * Publishing never loses the object: a name taken meanwhile on another
 * node gives it "<name>.objfs-<id>"; a directory that vanished gives it
 * /lost+found; Redis being unreachable keeps it on the unpublished list,
 * and the next tick (or Redis coming back) publishes it.  The seal's
 * result goes back to close(2) when a FLUSH sealed it: EIO for an object
 * kept unpublished (each Redis call is bounded by the meta timeout, which
 * the daemon sets to io_timeout), ENOSPC for a lost write.
 *
 * Replacement objects (allow_overwrite) that the writer never opened are
 * reaped after REAP_AFTER_NS.
 */
#include "fs_i.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define REAP_AFTER_NS (10 * 1000000000LL)

static struct log_ratelimit seal_rl = LOG_RATELIMIT_INIT("failed seals", 60000, 10);
static struct log_ratelimit limit_rl =
    LOG_RATELIMIT_INIT("creates over the object limit", 10000, 5);

/* The name an object is kept under in /lost+found (a killed writer's, or one whose id was another
 * object's). */
static void lost_path(char *buf, size_t len, const char *name, uint64_t id)
{
	snprintf(buf, len, "/lost+found/%.*s.objfs-%" PRIu64, OBJFS_NAME_MAX - 28, name, id);
}

void fs_record_of(struct fs *fs, struct store_obj *o, struct meta_obj *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->id = store_obj_id(o);
	ret->size = store_obj_size(o);
	ret->mtime_ns = store_obj_mtime(o);
	store_obj_csum(o, ret->csum);
	snprintf(ret->origin, sizeof(ret->origin), "%s", fs->cfg.node);
}

struct store_obj *fs_rekey(struct fs *fs, struct store_obj *o, int *ret_err)
{
	uint64_t size = store_obj_size(o), off = 0, id = 0;
	char path[OBJFS_PATH_MAX];
	struct store_obj *n = NULL;
	int i, r;

	for (i = 0, r = -EEXIST; i < 4 && r == -EEXIST; i++) {
		r = meta_alloc_id(fs->meta, &id);
		if (r == 0)
			n = fs_store_create(fs, id, &r);
	}
	while (r == 0 && off < size) {
		struct iovec iov[16];
		size_t got = 0;
		int k, cnt = store_obj_iov(o, off, size - off, iov, 16, &got);

		if (cnt <= 0 || got == 0) {
			r = cnt < 0 ? cnt : -EIO;
			break;
		}
		for (k = 0; k < cnt && r == 0; k++) {
			r = store_write(n, iov[k].iov_base, iov[k].iov_len, off);
			off += iov[k].iov_len;
		}
	}
	store_obj_path(o, path, sizeof(path));
	if (r == 0)
		r = store_seal(n, path, store_obj_mtime(o));
	if (r < 0) {
		log_error("object %" PRIu64 " is not the object its id names, and it cannot "
			  "be copied to another id: %s; kept as it is, unregistered",
			  store_obj_id(o), strerror(-r));
		if (n) {
			store_unlink(n);
			store_obj_unref(n);
		}
		*ret_err = r;
		return NULL;
	}
	log_warn("object %" PRIu64 " ('%s') is not the object Redis knows by that id (Redis "
		 "lost writes and the id was used again); it is object %" PRIu64 " now",
		 store_obj_id(o), path, id);
	store_unlink(o);
	return n;
}

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

static void remember_unpublished(struct fs *fs, struct pending *p, bool lost)
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
	u->lost = lost;
	pthread_mutex_lock(&fs->lock);
	u->next = fs->unpublished;
	fs->unpublished = u;
	/* while Redis is away, lookups of the name find it here */
	if (!lost)
		dcache_put(fs, p->parent, p->name, META_FILE, p->id);
	pthread_mutex_unlock(&fs->lock);
}

/* @obj's id is another object's: keep its bytes under a fresh id in
 * /lost+found.  Returns -ENOTUNIQ (the name was not published), or -EIO
 * if that too failed and @obj must be kept for a retry. */
static int publish_rekeyed(struct fs *fs, struct store_obj *obj, const char *name)
{
	char path[OBJFS_PATH_MAX], got[OBJFS_PATH_MAX];
	struct store_obj *n;
	struct meta_obj mo;
	int r;

	store_set_path(obj, "");
	n = fs_rekey(fs, obj, &r);
	if (!n)
		return -EIO;
	fs_record_of(fs, n, &mo);
	lost_path(path, sizeof(path), name, mo.id);
	r = meta_reregister(fs->meta, &mo, path, got);
	if (r >= 0) {
		store_set_path(n, got);
		log_error("object written as '%s' kept as '%s': its id was another object's", name,
			  got);
	} else {
		/* the catalog path is "": the next reconcile registers it */
		log_error("object written as '%s' is kept as object %" PRIu64
			  " until Redis takes it: %s",
			  name, mo.id, strerror(-r));
	}
	store_obj_unref(n);
	return -ENOTUNIQ;
}

/* Link a sealed object's name in Redis, handling every way that can fail
 * without losing the object.  Returns 0, -EIO if Redis is away (the
 * caller keeps it for a later retry), or -ENOTUNIQ if its id turned out
 * to be another object's: the object was moved to a fresh id in
 * /lost+found, and @id is gone from the store. */
static int publish(struct fs *fs, uint64_t id, uint64_t parent, const char *name, bool replace,
		   struct store_obj *obj)
{
	char path[OBJFS_PATH_MAX];
	struct pending tmp = {.id = id, .parent = parent};
	uint64_t replaced = 0;
	bool as_named;
	struct meta_obj mo;
	int r;

	fs_record_of(fs, obj, &mo); /* mo.id is @id */
	snprintf(tmp.name, sizeof(tmp.name), "%s", name);

	path[0] = '\0';
	/* the kernel made this name: it needs no invalidation of ours */
	r = meta_publish(fs->meta, parent, name, &mo,
			 (replace ? META_PUBLISH_REPLACE : 0) | META_PUBLISH_SELF, &replaced, path);
	if (r == -ENOTUNIQ)
		return publish_rekeyed(fs, obj, name);
	as_named = r == 0;
	if (r == -EEXIST || r == -EISDIR)
		r = publish_conflict(fs, &tmp, &mo, path);
	if (r == -ENOTUNIQ)
		return publish_rekeyed(fs, obj, name);
	if (r == -ENOENT || r == -ENOTDIR) {
		char want[OBJFS_PATH_MAX];

		snprintf(want, sizeof(want), "/lost+found/%s", name);
		r = meta_reregister(fs->meta, &mo, want, path);
		if (r == -ENOTUNIQ)
			return publish_rekeyed(fs, obj, name);
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
	pthread_mutex_lock(&fs->lock);
	if (as_named)
		dcache_put(fs, parent, name, META_FILE, id);
	dir_touched(fs, parent, false);
	pthread_mutex_unlock(&fs->lock);
	/* listings of @parent cached here showed the name as this file (the
	 * overlay): it now names something else, or another id */
	if (!as_named || replaced)
		fs_notify_dir(fs, parent);
	if (replaced)
		(void)store_unlink_id(fs->store, replaced); /* its name is gone */
	return 0;
}

/* Register @obj, whose writer was killed, as /lost+found/NAME.objfs-ID
 * rather than under its name.  0, or -EIO if Redis is away (the caller
 * keeps it for a later retry). */
static int publish_lost(struct fs *fs, struct store_obj *obj, const char *name)
{
	char want[OBJFS_PATH_MAX], got[OBJFS_PATH_MAX];
	struct meta_obj mo;
	int r;

	fs_record_of(fs, obj, &mo);
	lost_path(want, sizeof(want), name, mo.id);
	got[0] = '\0';
	r = meta_reregister(fs->meta, &mo, want, got);
	if (r == -ENOTUNIQ)
		return publish_rekeyed(fs, obj, name);
	if (r < 0)
		return -EIO;
	if (got[0])
		store_set_path(obj, got);
	return 0;
}

static const char *sig_name(int sig)
{
	static const char *const names[] = {
	    [SIGHUP] = "SIGHUP",   [SIGINT] = "SIGINT",	  [SIGQUIT] = "SIGQUIT",
	    [SIGILL] = "SIGILL",   [SIGTRAP] = "SIGTRAP", [SIGABRT] = "SIGABRT",
	    [SIGBUS] = "SIGBUS",   [SIGFPE] = "SIGFPE",	  [SIGKILL] = "SIGKILL",
	    [SIGUSR1] = "SIGUSR1", [SIGSEGV] = "SIGSEGV", [SIGUSR2] = "SIGUSR2",
	    [SIGPIPE] = "SIGPIPE", [SIGALRM] = "SIGALRM", [SIGTERM] = "SIGTERM",
	    [SIGXCPU] = "SIGXCPU", [SIGXFSZ] = "SIGXFSZ", [SIGSYS] = "SIGSYS",
	};

	if (sig > 0 && (size_t)sig < ARRAY_SIZE(names) && names[sig])
		return names[sig];
	return "a signal";
}

/* Seal @p's bytes.  0, or a negative errno (logged). */
static int seal_bytes(struct fs *fs, struct pending *p, bool told)
{
	int r = store_seal(p->obj, "", now_ns());

	if (r < 0) {
		FS_COUNT(fs, seal_failed, 1);
		if (told)
			log_error("cannot seal object %" PRIu64 " ('%s'): %s; discarding it, and "
				  "its close(2) fails",
				  p->id, p->name, strerror(-r));
		else
			log_msg_limited(&seal_rl, LOGL_ERROR,
					"cannot seal object %" PRIu64 " ('%s'): %s; kept, and "
					"tried again",
					p->id, p->name, strerror(-r));
	}
	return r;
}

int fs_seal_pending(struct fs *fs, struct pending *p, bool told)
{
	char name[OBJFS_NAME_MAX + 1];
	bool discard, failed, free_now, lost = false;
	uint64_t parent;
	struct inode *in;
	int r = 0, pr = 0, ret = 0, sig;

	pthread_mutex_lock(&fs->lock);
	failed = p->failed;
	discard = p->failed || p->unlinked;
	sig = p->killed_sig;
	p->seal_retry = false;
	pthread_mutex_unlock(&fs->lock);
	if (!discard) {
		r = seal_bytes(fs, p, told);
		if (r < 0 && !told) {
			/* the writer's close(2) returned 0: keep it, and try again */
			pthread_mutex_lock(&fs->lock);
			p->seal_retry = true;
			pthread_mutex_unlock(&fs->lock);
			return r;
		}
		if (r < 0)
			ret = r == -ENOSPC ? -ENOSPC : -EIO;
	}
	if (!discard && r == 0 && sig) {
		lost = true;
		FS_COUNT(fs, killed_writers, 1);
		log_warn("the writer of '%s' (object %" PRIu64 ", %" PRIu64 " bytes) was killed "
			 "by %s: kept on this node as '/lost+found/%s.objfs-%" PRIu64
			 "', not published under its name",
			 p->name, p->id, store_obj_size(p->obj), sig_name(sig), p->name, p->id);
		pr = publish_lost(fs, p->obj, p->name);
	} else if (!discard && r == 0) {
		pr = publish(fs, p->id, p->parent, p->name, p->replace, p->obj);
	}
	if (pr == -ENOTUNIQ) {
		discard = true; /* kept under another id in /lost+found */
		ret = -EIO;
	} else if (pr < 0) {
		log_warn("Redis unreachable: object %" PRIu64 " ('%s') sealed on this node, "
			 "published when Redis is back",
			 p->id, p->name);
		remember_unpublished(fs, p, lost);
		ret = -EIO;
	}
	if (failed)
		ret = -ENOSPC;

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
	p->sealing = false;
	if (!discard && r == 0) {
		p->sealed = true;
	} else {
		p->discarded = true;
		if (r < 0)
			p->seal_err = ret;
	}
	/* handles still open on it (a FLUSH sealed it) free it at their
	 * last release; from here on it is theirs */
	free_now = p->opens == 0;
	parent = p->parent;
	memcpy(name, p->name, sizeof(name));
	pthread_cond_broadcast(&fs->settle);
	pthread_mutex_unlock(&fs->lock);
	if (r == 0 && !discard) {
		FS_COUNT(fs, sealed, 1);
		if (told)
			FS_COUNT(fs, sealed_at_close, 1);
	}

	/* a killed writer's object does not keep the name the kernel knows */
	if (discard || r < 0 || lost)
		fs_notify_gone(fs, parent, name);
	if (discard || r < 0)
		store_unlink(p->obj);
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

struct store_obj *fs_store_create(struct fs *fs, uint64_t id, int *ret_err)
{
	struct store_obj *o = store_create(fs->store, id, ret_err);
	struct rlimit rl;
	struct store_stats ss;

	if (!o && *ret_err == -EMFILE && node_evict_slot(fs->nd))
		o = store_create(fs->store, id, ret_err);
	if (o || *ret_err != -EMFILE)
		return o;
	store_stats(fs->store, &ss);
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		rl.rlim_cur = 0;
	log_msg_limited(
	    &limit_rl, LOGL_WARN,
	    "cannot create an object: this node holds %" PRIu64
	    " objects, objects_max, the most its open-files limit (%llu) and "
	    "vm.max_map_count leave room for; raise the limit (LimitNOFILE=, ulimit -n, "
	    "prlimit --nofile) or remove objects",
	    ss.objects_all, (unsigned long long)rl.rlim_cur);
	*ret_err = -ENOSPC;
	return NULL;
}

/* ---- later ---- */

void fs_publish_retry(struct fs *fs)
{
	struct unpublished *list, *u, *keep = NULL;
	int r;

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
		if (u->lost)
			r = publish_lost(fs, obj, u->name);
		else
			r = publish(fs, u->id, u->parent, u->name, u->replace, obj);
		if (r == -ENOTUNIQ) {
			free(u); /* kept under another id in /lost+found */
		} else if (r == 0) {
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
