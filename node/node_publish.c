/*
 * node_publish: an object written here, from its writer's last close.
 *
 *   node_seal_publish()
 *                ──► store_seal (checksum, catalog record)
 *                ──► meta_publish (the name becomes visible to every node)
 *                ──► sealed, mode 0444, immutable
 *
 * Publishing never loses the object: a name taken meanwhile on another
 * node gives it "<name>.objfs-<id>"; a directory that vanished gives it
 * /lost+found; Redis being unreachable keeps it on the unpublished list,
 * and the next tick (or Redis coming back) publishes it.  The object of
 * a writer killed by a signal goes to /lost+found/<name>.objfs-<id>: it
 * may be cut short.  An object whose id turns out to be another object's
 * (Redis lost writes) is copied to a fresh id (node_rekey()).  Every Redis
 * call is bounded by the meta timeout, which the daemon sets to
 * io_timeout.
 */
#include "node_i.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "log.h"

static struct log_ratelimit seal_rl = LOG_RATELIMIT_INIT("failed seals", 60000, 10);
static struct log_ratelimit limit_rl =
    LOG_RATELIMIT_INIT("creates over the object limit", 10000, 5);
/* Lines that objects repeat (common/log.h): at most a burst in 10 s. */
static struct log_ratelimit told_rl =
    LOG_RATELIMIT_INIT("failed seals (their close(2) failed)", 10000, 100);
static struct log_ratelimit rekey_rl =
    LOG_RATELIMIT_INIT("objects whose id was another object's", 10000, 100);
static struct log_ratelimit conflict_rl =
    LOG_RATELIMIT_INIT("objects published under another name", 10000, 10);
static struct log_ratelimit killed_rl = LOG_RATELIMIT_INIT("objects of killed writers", 10000, 10);
static struct log_ratelimit unpub_rl = LOG_RATELIMIT_INIT("objects left unpublished", 10000, 10);
static struct log_ratelimit retry_rl = LOG_RATELIMIT_INIT("publishes to be retried", 10000, 10);
static struct log_ratelimit late_rl = LOG_RATELIMIT_INIT("objects published late", 10000, 10);

/* The name an object is kept under in /lost+found (a killed writer's, or one whose id was another
 * object's). */
static void lost_path(char *buf, size_t len, const char *name, uint64_t id)
{
	snprintf(buf, len, "/lost+found/%.*s.objfs-%" PRIu64, OBJFS_NAME_MAX - 28, name, id);
}

void node_record_of(struct node *nd, struct store_obj *o, struct meta_obj *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->id = store_obj_id(o);
	ret->size = store_obj_size(o);
	ret->mtime_ns = store_obj_mtime(o);
	store_obj_csum(o, ret->csum);
	snprintf(ret->origin, sizeof(ret->origin), "%s", nd->node);
}

struct store_obj *node_rekey(struct node *nd, struct store_obj *o, int *ret_err)
{
	uint64_t size = store_obj_size(o), off = 0, id = 0;
	char path[OBJFS_PATH_MAX];
	struct store_obj *n = NULL;
	int i, r;

	for (i = 0, r = -EEXIST; i < 4 && r == -EEXIST; i++) {
		r = meta_alloc_id(nd->meta, &id);
		if (r == 0)
			n = node_store_create(nd, id, &r);
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
		log_msg_limited(&rekey_rl, LOGL_ERROR,
				"object %" PRIu64 " is not the object its id names, and it cannot "
				"be copied to another id: %s; kept as it is, unregistered",
				store_obj_id(o), strerror(-r));
		if (n) {
			store_unlink(n);
			store_obj_unref(n);
		}
		*ret_err = r;
		return NULL;
	}
	log_msg_limited(&rekey_rl, LOGL_WARN,
			"object %" PRIu64 " ('%s') is not the object Redis knows by that id (Redis "
			"lost writes and the id was used again); it is object %" PRIu64 " now",
			store_obj_id(o), path, id);
	store_unlink(o);
	return n;
}

char *node_bsum_text(const struct bsums *b)
{
	size_t len = b ? 4 + 16 * (size_t)b->n : 0;
	char *t = len ? malloc(len) : NULL;

	if (t && !bsum_to_text(b, t, len)) {
		free(t);
		t = NULL;
	}
	return t;
}

/* Publish @mo in @parent under a name that does not collide with @name. */
static int publish_conflict(struct node *nd, uint64_t parent, const char *name,
			    const struct meta_obj *mo, const char *bsum,
			    const struct meta_attr *attr, char *path)
{
	char alt[OBJFS_NAME_MAX + 1];
	int r;

	snprintf(alt, sizeof(alt), "%.*s.objfs-%" PRIu64, OBJFS_NAME_MAX - 28, name, mo->id);
	r = meta_publish_attr(nd->meta, parent, alt, mo, bsum, attr, 0, NULL, path);
	if (r == 0)
		log_msg_limited(&conflict_rl, LOGL_WARN,
				"'%s' was created elsewhere while object %" PRIu64
				" was written here; kept it as '%s'",
				name, mo->id, alt);
	return r;
}

static void remember_unpublished(struct node *nd, uint64_t id, uint64_t parent, const char *name,
				 bool replace, bool lost, const struct meta_attr *attr)
{
	struct unpublished *u = calloc(1, sizeof(*u));

	if (!u) {
		log_msg_limited(&unpub_rl, LOGL_ERROR,
				"out of memory: object %" PRIu64 " stays unpublished until restart",
				id);
		return;
	}
	u->id = id;
	u->parent = parent;
	snprintf(u->name, sizeof(u->name), "%s", name);
	u->replace = replace;
	u->lost = lost;
	u->attr = *attr;
	pthread_mutex_lock(&nd->pub_lock);
	DL_PREPEND(nd->unpublished, u);
	pthread_mutex_unlock(&nd->pub_lock);
	/* while Redis is away, lookups of the name find it here */
	if (!lost && nd->hooks.published)
		nd->hooks.published(nd->hooks.ctx, parent, name, id, NODE_PUB_LATER);
}

/* @obj's id is another object's: keep its bytes under a fresh id in
 * /lost+found.  Returns -ENOTUNIQ (the name was not published), or -EIO
 * if that too failed and @obj must be kept for a retry. */
static int publish_rekeyed(struct node *nd, struct store_obj *obj, const char *name)
{
	char path[OBJFS_PATH_MAX], got[OBJFS_PATH_MAX];
	struct store_obj *n;
	struct meta_obj mo;
	int r;

	store_set_path(obj, "");
	n = node_rekey(nd, obj, &r);
	if (!n)
		return -EIO;
	node_record_of(nd, n, &mo);
	lost_path(path, sizeof(path), name, mo.id);
	r = meta_reregister(nd->meta, &mo, path, got);
	if (r >= 0) {
		store_set_path(n, got);
		log_msg_limited(&rekey_rl, LOGL_ERROR,
				"object written as '%s' kept as '%s': its id was another object's",
				name, got);
	} else {
		/* the catalog path is "": the next reconcile registers it */
		log_msg_limited(&rekey_rl, LOGL_ERROR,
				"object written as '%s' is kept as object %" PRIu64
				" until Redis takes it: %s",
				name, mo.id, strerror(-r));
	}
	store_obj_unref(n);
	return -ENOTUNIQ;
}

static int publish_named(struct node *nd, uint64_t id, uint64_t parent, const char *name,
			 bool replace, struct store_obj *obj, const char *bsum,
			 const struct meta_attr *attr)
{
	char path[OBJFS_PATH_MAX];
	uint64_t replaced = 0;
	bool as_named;
	struct meta_obj mo;
	int r;

	node_record_of(nd, obj, &mo); /* mo.id is @id */
	/* written here: nobody else holds it until a peer fetches it,
	 * which it cannot before the name is published (a peer's GET then
	 * puts it back in the use order, src_open()) */
	store_set_sole(nd->store, id, true);

	path[0] = '\0';
	/* the kernel made this name: it needs no invalidation of ours */
	r = meta_publish_attr(nd->meta, parent, name, &mo, bsum, attr,
			      (replace ? META_PUBLISH_REPLACE : 0) | META_PUBLISH_SELF, &replaced,
			      path);
	if (r == -ENOTUNIQ)
		return publish_rekeyed(nd, obj, name);
	as_named = r == 0;
	if (r == -EEXIST || r == -EISDIR)
		r = publish_conflict(nd, parent, name, &mo, bsum, attr, path);
	if (r == -ENOTUNIQ)
		return publish_rekeyed(nd, obj, name);
	if (r == -ENOENT || r == -ENOTDIR) {
		char want[OBJFS_PATH_MAX];

		snprintf(want, sizeof(want), "/lost+found/%s", name);
		r = meta_reregister(nd->meta, &mo, want, path);
		if (r == -ENOTUNIQ)
			return publish_rekeyed(nd, obj, name);
		if (r >= 0) {
			log_msg_limited(&conflict_rl, LOGL_WARN,
					"directory of '%s' vanished while object %" PRIu64
					" was written; it is in /lost+found",
					name, id);
			r = 0;
		}
	}
	if (r < 0) {
		if (r != -EIO)
			log_msg_limited(&retry_rl, LOGL_ERROR,
					"cannot publish object %" PRIu64 " as '%s': %s; will retry",
					id, name, strerror(-r));
		return -EIO;
	}
	if (path[0])
		store_set_path(obj, path);
	if (nd->hooks.published)
		nd->hooks.published(nd->hooks.ctx, parent, name, id,
				    (as_named ? NODE_PUB_NAMED : 0) |
					(replaced ? NODE_PUB_REPLACED : 0));
	if (replaced)
		(void)store_unlink_id(nd->store, replaced); /* its name is gone */
	return 0;
}

/* Link a sealed object's name in Redis, handling every way that can fail
 * without losing the object, with its block sums @sums if known (NULL:
 * the first node that fetches it sums them).  Returns 0, -EIO if Redis
 * is away (the caller keeps it for a later retry), or -ENOTUNIQ if its
 * id turned out to be another object's: the object was moved to a fresh
 * id in /lost+found, and @id is gone from the store. */
static int publish(struct node *nd, uint64_t id, uint64_t parent, const char *name, bool replace,
		   struct store_obj *obj, const struct bsums *sums, const struct meta_attr *attr)
{
	char *bsum = node_bsum_text(sums);
	int r = publish_named(nd, id, parent, name, replace, obj, bsum, attr);

	free(bsum);
	return r;
}

/* Register @obj, whose writer was killed, as /lost+found/NAME.objfs-ID
 * rather than under its name.  0, or -EIO if Redis is away (the caller
 * keeps it for a later retry). */
static int publish_lost(struct node *nd, struct store_obj *obj, const char *name)
{
	char want[OBJFS_PATH_MAX], got[OBJFS_PATH_MAX];
	struct meta_obj mo;
	int r;

	node_record_of(nd, obj, &mo);
	lost_path(want, sizeof(want), name, mo.id);
	got[0] = '\0';
	r = meta_reregister(nd->meta, &mo, want, got);
	if (r == -ENOTUNIQ)
		return publish_rekeyed(nd, obj, name);
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

/* Seal @o's bytes, its block sums into *@ret_sums (see store_seal_sums()).
 * 0, or a negative errno (logged). */
static int seal_bytes(struct node *nd, struct store_obj *o, const char *name, bool told,
		      int64_t mtime_ns, struct bsums **ret_sums)
{
	int r = store_seal_sums(o, "", mtime_ns, ret_sums);

	if (r < 0) {
		NODE_COUNT(nd, seal_failed, 1);
		if (told)
			log_msg_limited(&told_rl, LOGL_ERROR,
					"cannot seal object %" PRIu64
					" ('%s'): %s; discarding it, and "
					"its close(2) fails",
					store_obj_id(o), name, strerror(-r));
		else
			log_msg_limited(&seal_rl, LOGL_ERROR,
					"cannot seal object %" PRIu64 " ('%s'): %s; kept, and "
					"tried again",
					store_obj_id(o), name, strerror(-r));
	}
	return r;
}

static int seal_publish(struct node *nd, struct store_obj *o, uint64_t parent, const char *name,
			unsigned flags, int sig, struct node_meta *md, enum node_sealed *ret)
{
	bool told = flags & NODE_SEAL_TOLD, replace = flags & NODE_SEAL_REPLACE;
	uint64_t id = store_obj_id(o);
	int64_t now = util_now_ns(), mtime = md && md->mtime_set ? md->mtime_ns : now;
	struct bsums *sums = NULL;
	struct meta_attr attr = {0};
	int r, pr;

	/* owner and mode as given; atime the mtime unless set, ctime now */
	if (md && md->attr.set) {
		attr = md->attr;
		attr.atime_ns = md->atime_set ? md->atime_ns : mtime;
		attr.ctime_ns = now;
		md->attr = attr; /* as published */
	}
	*ret = NODE_SEAL_FAILED;
	r = seal_bytes(nd, o, name, told, mtime, &sums);
	if (r < 0)
		return told ? (r == -ENOSPC ? -ENOSPC : -EIO) : r;
	if (sig) {
		*ret = NODE_SEAL_LOST;
		NODE_COUNT(nd, killed_writers, 1);
		log_msg_limited(&killed_rl, LOGL_WARN,
				"the writer of '%s' (object %" PRIu64 ", %" PRIu64
				" bytes) was killed "
				"by %s: kept on this node as '/lost+found/%s.objfs-%" PRIu64
				"', not published under its name",
				name, id, store_obj_size(o), sig_name(sig), name, id);
		pr = publish_lost(nd, o, name);
	} else {
		*ret = NODE_SEAL_PUBLISHED;
		pr = publish(nd, id, parent, name, replace, o, sums, &attr);
	}
	free(sums);
	if (pr == -ENOTUNIQ) {
		*ret = NODE_SEAL_MOVED; /* kept under another id in /lost+found */
		return -EIO;
	}
	if (pr < 0) {
		log_msg_limited(&unpub_rl, LOGL_WARN,
				"Redis unreachable: object %" PRIu64 " ('%s') sealed on this node, "
				"published when Redis is back",
				id, name);
		remember_unpublished(nd, id, parent, name, replace, sig != 0, &attr);
		if (!sig)
			*ret = NODE_SEAL_LATER;
		return -EIO;
	}
	return 0;
}

int node_seal_publish(struct node *nd, struct store_obj *o, uint64_t parent, const char *name,
		      unsigned flags, int killed_sig, enum node_sealed *ret)
{
	return node_seal_publish_meta(nd, o, parent, name, flags, killed_sig, NULL, ret);
}

int node_seal_publish_meta(struct node *nd, struct store_obj *o, uint64_t parent, const char *name,
			   unsigned flags, int killed_sig, struct node_meta *md,
			   enum node_sealed *ret)
{
	struct sealing me = {.id = store_obj_id(o)}, **pp;
	int r;

	/* reconciling leaves it alone until it is published or on the
	 * unpublished list */
	pthread_mutex_lock(&nd->pub_lock);
	me.next = nd->sealing;
	nd->sealing = &me;
	pthread_mutex_unlock(&nd->pub_lock);
	r = seal_publish(nd, o, parent, name, flags, killed_sig, md, ret);
	pthread_mutex_lock(&nd->pub_lock);
	for (pp = &nd->sealing; *pp != &me; pp = &(*pp)->next)
		;
	*pp = me.next;
	pthread_mutex_unlock(&nd->pub_lock);
	return r;
}

struct store_obj *node_store_create(struct node *nd, uint64_t id, int *ret_err)
{
	struct store_obj *o = store_create(nd->store, id, ret_err);
	struct rlimit rl;
	struct store_stats ss;

	if (o || *ret_err != -EMFILE)
		return o;
	store_stats(nd->store, &ss);
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		rl.rlim_cur = 0;
	log_msg_limited(&limit_rl, LOGL_WARN,
			"cannot create an object: %" PRIu64
			" objects are being written or fetched on this node, the most its "
			"open-files limit (%llu) and vm.max_map_count leave room for (open_max); "
			"raise the limit (LimitNOFILE=, ulimit -n, prlimit --nofile)",
			ss.open, (unsigned long long)rl.rlim_cur);
	*ret_err = -ENOSPC;
	return NULL;
}

/* ---- later ---- */

void node_publish_retry(struct node *nd)
{
	struct unpublished *u, *next;
	int r;

	/* entries stay on the list until they are published, so that
	 * eviction and reconciling see them meanwhile; only this function
	 * takes them off, one call at a time, and new ones go in front */
	pthread_mutex_lock(&nd->retry_lock);
	pthread_mutex_lock(&nd->pub_lock);
	u = nd->unpublished;
	pthread_mutex_unlock(&nd->pub_lock);
	for (; u; u = next) {
		struct store_obj *obj = store_lookup(nd->store, u->id);
		bool done = true; /* no copy: unlinked meanwhile */

		if (obj) {
			if (u->lost)
				r = publish_lost(nd, obj, u->name);
			else
				r = publish(nd, u->id, u->parent, u->name, u->replace, obj, NULL,
					    &u->attr);
			if (r == 0) {
				log_msg_limited(&late_rl, LOGL_INFO,
						"published object %" PRIu64
						" as '%s' now that Redis is back",
						u->id, u->name);
				NODE_COUNT(nd, published_late, 1);
			}
			/* -ENOTUNIQ: kept under another id in /lost+found */
			done = r == 0 || r == -ENOTUNIQ;
			store_obj_unref(obj);
		}
		pthread_mutex_lock(&nd->pub_lock);
		next = u->next;
		if (done)
			DL_DELETE(nd->unpublished, u);
		pthread_mutex_unlock(&nd->pub_lock);
		if (done)
			free(u);
	}
	pthread_mutex_unlock(&nd->retry_lock);
}

void node_unpublished_free_all(struct node *nd)
{
	struct unpublished *u;

	while ((u = nd->unpublished)) {
		nd->unpublished = u->next;
		free(u);
	}
}
