/*
 * meta: the Redis location service (model and key schema in meta.h).
 *
 * Owns: the life of struct meta (meta_new(), meta_free()) and the public
 * calls of the namespace, object records and holders, recovery and node
 * cards, each reply validated whole (with meta_reply.c's validators).
 * The calls about other nodes (locate, release a replica, members) are
 * meta_nodes.c's, the invalidation subscriber meta_subscriber.c's.  How a
 * command reaches Redis (the pool, reconnect and backoff, the URL) is
 * meta_pool.c's, one connection to one server meta_conn.c's; the Lua
 * scripts are in meta_scripts.c.
 *
 * Data flow: a public call checks its arguments, builds an argument vector
 * (struct args), borrows a connection from the pool, runs one script with
 * EVALSHA (or one plain command), gives the connection back, validates the
 * whole reply, and only then writes the caller's output parameters.
 */
#define _GNU_SOURCE
#include "meta.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "bsum.h"
#include <time.h>

#include <hiredis/hiredis.h>

#include "log.h"
#include "meta_i.h"

#define POOL_DEFAULT 4
#define POOL_MAX 64
#define TIMEOUT_DEFAULT_MS 2000
#define TIMEOUT_MAX_MS 600000
/* a listing larger than this gives -EFBIG rather than a huge allocation */
#define DIR_MAX (1u << 20)
#define EPOCH_MAX 64

/* every create repeats it (common/log.h) */
static struct log_ratelimit ids_rl = LOG_RATELIMIT_INIT("meta: ids not random", 10000, 10);

/* ---- calls ---- */

/* ---- reporting corrupt records ---- */

/* ---- reply validation ---- */

/* An integer reply of 0 or 1 */
static int rep_bool(const redisReply *rep)
{
	if (rep->type != REDIS_REPLY_INTEGER || (rep->integer != 0 && rep->integer != 1))
		return -EBADMSG;
	return (int)rep->integer;
}

/* ---- construction ---- */

struct meta *meta_new(const struct meta_config *cfg, int *ret_err)
{
	pthread_condattr_t ca;
	struct meta *m;
	int r = -EINVAL;

	if (!cfg || !cfg->url || util_node_name_validate(cfg->node) < 0 ||
	    cfg->pool_size > POOL_MAX || cfg->timeout_ms > TIMEOUT_MAX_MS ||
	    (cfg->prefix && !chars_in(cfg->prefix, strlen(cfg->prefix), PREFIX_MAX, ALNUM "._-")))
		goto fail;
	r = -ENOMEM;
	m = calloc(1, sizeof(*m));
	if (!m)
		goto fail;
	pthread_mutex_init(&m->lock, NULL);
	pthread_mutex_init(&m->id_lock, NULL);
	pthread_mutex_init(&m->sub_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->freed, &ca);
	pthread_condattr_destroy(&ca);
	m->pool_size = cfg->pool_size ? cfg->pool_size : POOL_DEFAULT;
	m->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : TIMEOUT_DEFAULT_MS;
	r = meta_pool_parse_url(m, cfg->url, NULL, 0);
	if (r < 0)
		goto clean_m;
	r = -ENOMEM;
	m->prefix = strdup(cfg->prefix ? cfg->prefix : "objfs");
	m->node = strdup(cfg->node);
	m->conns = calloc(m->pool_size, sizeof(*m->conns));
	if (!m->prefix || !m->node || !m->conns)
		goto clean_m;
	return m;

clean_m:
	meta_free(m);
fail:
	if (ret_err)
		*ret_err = r;
	return NULL;
}

int meta_url_check(const char *url, char *why, size_t wlen)
{
	struct meta *m;
	int r;

	if (why && wlen)
		why[0] = '\0';
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	r = meta_pool_parse_url(m, url, why, wlen);
	meta_pool_release(m);
	pthread_mutex_destroy(&m->lock);
	free(m);
	return r;
}

void meta_free(struct meta *m)
{
	unsigned i;

	if (!m)
		return;
	meta_unsubscribe(m);
	for (i = 0; m->conns && i < m->pool_size; i++)
		if (m->conns[i].ctx)
			redisFree(m->conns[i].ctx);
	free(m->conns);
	meta_pool_release(m);
	pthread_cond_destroy(&m->freed);
	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->id_lock);
	pthread_mutex_destroy(&m->sub_lock);
	free(m->node);
	free(m->prefix);
	free(m);
}

int meta_connect(struct meta *m)
{
	redisReply *rep;
	struct conn *c;
	struct args a;
	int r;

	r = meta_args_script(m, &a, false);
	if (r < 0)
		return r;
	r = meta_pool_get(m, &c);
	if (r < 0)
		return r == -EACCES || r == -ENOMEM ? r : -EIO;
	/* a slot that was up already has not run the init lately */
	r = meta_pool_script(m, c, MS_INIT, &a, &rep);
	meta_pool_put(m, c);
	if (r < 0)
		return r;
	freeReplyObject(rep);
	return 0;
}

const char *meta_url(const struct meta *m)
{
	return m->url;
}

bool meta_is_up(const struct meta *m)
{
	return atomic_load_explicit(&m->up, memory_order_relaxed);
}

void meta_last_error(const struct meta *m, char *buf, size_t len)
{
	struct meta *mm = (struct meta *)m;

	if (!len)
		return;
	pthread_mutex_lock(&mm->lock);
	snprintf(buf, len, "%s", mm->last_err);
	pthread_mutex_unlock(&mm->lock);
}

/* ---- namespace ---- */

int meta_lookup(struct meta *m, uint64_t parent, const char *name, struct meta_entry *ret)
{
	redisReply *rep;
	int r;

	r = parent ? util_name_validate(name) : -EINVAL;
	if (r == 0)
		r = meta_script(m, MS_LOOKUP, &rep, "us", parent, name);
	if (r < 0)
		return r;
	r = meta_rep_lookup(rep, ret);
	freeReplyObject(rep);
	return r;
}

int meta_getattr(struct meta *m, uint64_t id, struct meta_entry *ret)
{
	redisReply *rep;
	int r;

	r = id ? meta_script(m, MS_GETATTR, &rep, "u", id) : -EINVAL;
	if (r < 0)
		return r;
	return meta_rep_entry_of(rep, 0, id, ret);
}

static void obj_key(const struct meta *m, char kind, uint64_t id, char *buf, size_t len)
{
	snprintf(buf, len, "{%s}:%c:%" PRIu64, m->prefix, kind, id);
}

/* The bucket that holds @id's record (meta.h, {P}:r:<b>). */
static void rec_key(const struct meta *m, uint64_t id, char *buf, size_t len)
{
	char digits[24];
	size_t n = (size_t)snprintf(digits, sizeof(digits), "%" PRIu64, id);

	snprintf(buf, len, "{%s}:r:%s", m->prefix, digits + (n > 4 ? n - 4 : 0));
}

int meta_get_object(struct meta *m, uint64_t id, struct meta_obj *ret)
{
	struct meta_entry e;
	int r;

	/* layout 2 keeps an object's attributes in its entry: getattr
	 * follows the record there */
	r = meta_getattr(m, id, &e);
	if (r < 0)
		return r;
	if (e.kind != META_FILE)
		return -ENOENT;
	*ret = e.obj;
	return 0;
}

/*
 * Child @f -> @v of directory @dir, as a listing gives it.  0; -ENOENT
 * (silently) for a reserved field ("/mtime", ...); -EBADMSG, logged, for
 * a name or value that is not one: a bad entry hides itself only, not
 * the whole directory.
 */
static int rep_dirent(uint64_t dir, const redisReply *f, const redisReply *v,
		      struct meta_dirent *ret)
{
	char shown[META_SHOWN_MAX], esc[META_SHOWN_MAX];
	const char *name;

	if (f->type == REDIS_REPLY_STRING && f->len && f->str[0] == '/')
		return -ENOENT;
	name = meta_rep_text(f, OBJFS_NAME_MAX);
	if (!name || util_name_validate(name) < 0) {
		meta_log_corrupt("directory %" PRIu64 ": entry %s is not a valid name; skipping it",
				 dir, meta_rep_shown(f, shown, sizeof(shown)));
		return -EBADMSG;
	}
	if (meta_rep_entry(v, &ret->kind, &ret->id) < 0) {
		meta_log_corrupt("directory %" PRIu64 ": entry '%s' is %s; skipping it", dir,
				 meta_esc(name, f->len, esc, sizeof(esc)),
				 meta_rep_shown(v, shown, sizeof(shown)));
		return -EBADMSG;
	}
	memcpy(ret->name, name, f->len + 1);
	return 0;
}

/* An array for the entries of @list, name and value pairs: -EBADMSG if it
 * is not that, -EFBIG beyond DIR_MAX entries, -ENOMEM. */
static int dir_alloc(const redisReply *list, size_t size, void **ret)
{
	if (list->type != REDIS_REPLY_ARRAY || list->elements % 2)
		return -EBADMSG;
	if (list->elements / 2 > DIR_MAX)
		return -EFBIG;
	*ret = calloc(list->elements / 2 + 1, size);
	return *ret ? 0 : -ENOMEM;
}

int meta_readdir(struct meta *m, uint64_t dir, struct meta_dirent **ret_ents, size_t *ret_n)
{
	struct meta_dirent *ents;
	redisReply *rep;
	size_t i, n = 0;
	int r;

	r = dir ? meta_script(m, MS_READDIR, &rep, "u", dir) : -EINVAL;
	if (r < 0)
		return r;
	r = dir_alloc(rep, sizeof(*ents), (void **)&ents);
	if (r < 0)
		goto clean_rep;
	for (i = 0; i < rep->elements; i += 2)
		if (rep_dirent(dir, rep->element[i], rep->element[i + 1], &ents[n]) == 0)
			n++;
	freeReplyObject(rep);
	*ret_ents = ents;
	*ret_n = n;
	return 0;

clean_rep:
	freeReplyObject(rep);
	return r;
}

/* One entry of a listing page: @f, the name, and @a, what lookup returns
 * for it (see script_readdir_page).  0, -ENOENT (a reserved field),
 * -EBADMSG (logged: skip it); attributes that do not parse (logged too)
 * leave the entry without them. */
static int rep_dirent_plus(uint64_t dir, const redisReply *f, const redisReply *a,
			   struct meta_dirent_plus *ret)
{
	struct meta_dirent d;
	int r;

	if (a->type != REDIS_REPLY_ARRAY || a->elements < 1)
		return -EBADMSG;
	r = rep_dirent(dir, f, a->element[0], &d);
	if (r < 0)
		return r;
	memset(ret, 0, sizeof(*ret));
	memcpy(ret->name, d.name, strlen(d.name) + 1);
	ret->attr = meta_rep_lookup(a, &ret->e) == 0 && ret->e.id == d.id;
	ret->e.kind = d.kind;
	ret->e.id = d.id;
	return 0;
}

int meta_readdir_page(struct meta *m, uint64_t dir, uint64_t *cursor, struct meta_dirent_plus **ret,
		      size_t *ret_n)
{
	struct meta_dirent_plus *ents;
	const redisReply *list;
	redisReply *rep;
	uint64_t next;
	size_t i, n = 0;
	int r;

	r = dir && cursor ? meta_script(m, MS_READDIR_PAGE, &rep, "uu", dir, *cursor) : -EINVAL;
	if (r < 0)
		return r;
	r = -EBADMSG;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
	    meta_rep_u64(rep->element[0], &next) < 0)
		goto clean_rep;
	list = rep->element[1];
	r = dir_alloc(list, sizeof(*ents), (void **)&ents);
	if (r < 0)
		goto clean_rep;
	for (i = 0; i < list->elements; i += 2) {
		r = rep_dirent_plus(dir, list->element[i], list->element[i + 1], &ents[n]);
		if (r == 0)
			n++;
		else if (list->element[i + 1]->type != REDIS_REPLY_ARRAY)
			goto clean_ents; /* not the script's reply: Redis is not ours */
	}
	freeReplyObject(rep);
	*cursor = next;
	*ret = ents;
	*ret_n = n;
	return 0;

clean_ents:
	free(ents);
	r = -EBADMSG;
clean_rep:
	freeReplyObject(rep);
	return r;
}

void meta_dirents_free(struct meta_dirent *ents)
{
	free(ents);
}

int meta_draw_id(uint64_t *ret_id)
{
	uint64_t v;
	ssize_t n;

	do {
		n = getrandom(&v, sizeof(v), 0);
		v >>= 1; /* 63 bits, uniform; below META_ID_MIN: draw again */
	} while ((n < 0 && errno == EINTR) || (n == (ssize_t)sizeof(v) && v < META_ID_MIN));
	if (n != (ssize_t)sizeof(v))
		return n < 0 ? -errno : -EIO;
	*ret_id = v;
	return 0;
}

int meta_mkdir(struct meta *m, uint64_t parent, const char *name, int64_t mtime_ns,
	       struct meta_entry *ret)
{
	return meta_mkdir_attr(m, parent, name, mtime_ns, NULL, ret);
}

int meta_mkdir_attr(struct meta *m, uint64_t parent, const char *name, int64_t mtime_ns,
		    const struct meta_attr *attr, struct meta_entry *ret)
{
	char at[META_ATTR_TEXT_MAX];
	redisReply *rep;
	uint64_t id;
	int i, r;

	r = parent ? util_name_validate(name) : -EINVAL;
	if (r == 0)
		r = meta_attr_text(attr, mtime_ns, at);
	for (i = 0; r == 0 || (r == -EAGAIN && i < ID_TRIES); i++) {
		r = meta_draw_id(&id);
		if (r == 0)
			r = meta_script_self(m, MS_MKDIR, &rep, "usius", parent, name, mtime_ns, id,
					     at);
		if (r == 0)
			break;
	}
	if (r < 0)
		return r;
	r = meta_rep_id(rep, &id);
	freeReplyObject(rep);
	if (r == 0 && ret) {
		memset(ret, 0, sizeof(*ret));
		ret->kind = META_DIR;
		ret->id = id;
		ret->obj.id = id;
		ret->obj.mtime_ns = mtime_ns;
		if (attr && attr->set)
			ret->attr = *attr;
	}
	return r;
}

/* rmdir and unlink: a name in, an id out */
static int remove_name(struct meta *m, enum meta_script s, uint64_t parent, const char *name,
		       uint64_t *ret_id)
{
	redisReply *rep;
	uint64_t id;
	int r;

	r = parent ? util_name_validate(name) : -EINVAL;
	if (r == 0)
		r = meta_script_self(m, s, &rep, "us", parent, name);
	if (r < 0)
		return r;
	/* unlink of a file with other names: {id, "1"} */
	if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2) {
		const char *lives = meta_rep_text(rep->element[1], 1);

		r = lives && !strcmp(lives, "1") ? meta_rep_id(rep->element[0], &id) : -EBADMSG;
		if (r == 0)
			r = 1;
	} else {
		r = meta_rep_id(rep, &id);
	}
	freeReplyObject(rep);
	if (r >= 0 && ret_id)
		*ret_id = id;
	return r;
}

int meta_rmdir(struct meta *m, uint64_t parent, const char *name, uint64_t *ret_id)
{
	return remove_name(m, MS_RMDIR, parent, name, ret_id);
}

int meta_unlink(struct meta *m, uint64_t parent, const char *name, uint64_t *ret_id)
{
	return remove_name(m, MS_UNLINK, parent, name, ret_id);
}

/* Hand out a checked id of the block, if it is fresh. */
static bool ids_take(struct meta *m, uint64_t *ret_id)
{
	bool got = false;

	pthread_mutex_lock(&m->id_lock);
	if (m->nids && util_mono_ns() - m->ids_at > ID_BLOCK_TTL_NS)
		m->nids = 0;
	if (m->nids) {
		*ret_id = m->ids[--m->nids];
		got = true;
	}
	pthread_mutex_unlock(&m->id_lock);
	return got;
}

/*
 * Check a block of ID_BLOCK random ids in one round trip and keep the
 * unused ones (all of them, unless Redis's ids are not random).  A
 * block stays usable for ID_BLOCK_TTL_NS: the check is as good as one
 * made per id, since only a random draw of another node could take one
 * meanwhile, and publish refuses an id that has a record or tombstone
 * anyway.
 */
static int ids_refill(struct meta *m)
{
	char list[ID_BLOCK * 21];
	uint64_t got[ID_BLOCK];
	redisReply *rep;
	size_t len = 0, i, n = 0;
	int r;

	for (i = 0; i < ID_BLOCK; i++) {
		uint64_t id;

		r = meta_draw_id(&id);
		if (r < 0)
			return r;
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%" PRIu64, i ? " " : "",
					id);
	}
	r = meta_script(m, MS_ALLOC, &rep, "s", list);
	if (r < 0)
		return r;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements > ID_BLOCK) {
		char shown[META_SHOWN_MAX];

		meta_log_corrupt("the id check answered %s",
				 meta_rep_shown(rep, shown, sizeof(shown)));
		freeReplyObject(rep);
		return -EBADMSG;
	}
	for (i = 0; i < rep->elements; i++)
		if (meta_rep_u64(rep->element[i], &got[n]) == 0 && got[n] >= META_ID_MIN)
			n++;
	freeReplyObject(rep);
	if (!n)
		return -EAGAIN;
	pthread_mutex_lock(&m->id_lock);
	memcpy(m->ids, got, n * sizeof(got[0]));
	m->nids = (unsigned)n;
	m->ids_at = util_mono_ns();
	pthread_mutex_unlock(&m->id_lock);
	return 0;
}

int meta_alloc_id(struct meta *m, uint64_t *ret_id)
{
	int i, r = 0;

	for (i = 0; i < ID_TRIES && r == 0; i++) {
		if (ids_take(m, ret_id))
			return 0;
		r = ids_refill(m);
		if (r == -EAGAIN)
			r = 0; /* a whole block in use: draw another */
	}
	if (r == 0) {
		log_msg_limited(&ids_rl, LOGL_ERROR,
				"%d blocks of random ids in a row are in use in Redis: its ids are "
				"not random",
				i);
		r = -EAGAIN;
	}
	return r;
}

/* Is @obj a record a caller may publish?  Fills @hex with its checksum. */
int meta_obj_check(const struct meta_obj *obj, char hex[OBJFS_CSUM_HEX])
{
	if (!obj || obj->id <= META_ROOT_ID || !memchr(obj->origin, '\0', OBJFS_NODE_MAX) ||
	    util_node_name_validate(obj->origin) < 0)
		return -EINVAL;
	util_csum_to_hex(obj->csum, hex);
	return 0;
}

int meta_publish(struct meta *m, uint64_t parent, const char *name, const struct meta_obj *obj,
		 unsigned flags, uint64_t *ret_replaced, char *ret_path)
{
	return meta_publish_sums(m, parent, name, obj, NULL, flags, ret_replaced, ret_path);
}

int meta_publish_sums(struct meta *m, uint64_t parent, const char *name, const struct meta_obj *obj,
		      const char *bsum, unsigned flags, uint64_t *ret_replaced, char *ret_path)
{
	return meta_publish_attr(m, parent, name, obj, bsum, NULL, flags, ret_replaced, ret_path);
}

int meta_publish_attr(struct meta *m, uint64_t parent, const char *name, const struct meta_obj *obj,
		      const char *bsum, const struct meta_attr *attr, unsigned flags,
		      uint64_t *ret_replaced, char *ret_path)
{
	char hex[OBJFS_CSUM_HEX], at[META_ATTR_TEXT_MAX];
	const char *path;
	redisReply *rep;
	uint64_t old, seq;
	uint_fast64_t seen;
	int r;

	r = parent && meta_bsum_text_ok(bsum) ? util_name_validate(name) : -EINVAL;
	if (r == 0)
		r = meta_obj_check(obj, hex);
	if (r == 0)
		r = meta_attr_text(attr, obj->mtime_ns, at);
	if (r == 0)
		r = meta_script_(
		    m, MS_PUBLISH, (flags & META_PUBLISH_SELF) != 0, &rep, "usuusisssuss", parent,
		    name, obj->id, obj->size, hex, obj->mtime_ns, obj->origin,
		    (flags & META_PUBLISH_REPLACE) ? "1" : "0", m->node,
		    (uint64_t)atomic_load(&m->seq_seen), bsum ? bsum : "", at, meta_args_end);
	if (r < 0)
		return r;
	r = -EBADMSG;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 3 ||
	    meta_rep_u64(rep->element[0], &old) < 0 || meta_rep_u64(rep->element[2], &seq) < 0)
		goto clean_rep;
	seen = atomic_load(&m->seq_seen);
	while (seq > seen && !atomic_compare_exchange_weak(&m->seq_seen, &seen, seq))
		;
	path = meta_rep_text(rep->element[1], OBJFS_PATH_MAX - 1);
	if (!path || (path[0] && path[0] != '/'))
		goto clean_rep;
	if (ret_replaced)
		*ret_replaced = old;
	if (ret_path)
		memcpy(ret_path, path, strlen(path) + 1);
	r = 0;
clean_rep:
	freeReplyObject(rep);
	return r;
}

int meta_path(struct meta *m, uint64_t parent, const char *name, enum meta_kind *ret_kind,
	      uint64_t *ret_id, char *ret_path)
{
	const char *kind, *path;
	redisReply *rep;
	uint64_t id;
	int r;

	r = parent ? util_name_validate(name) : -EINVAL;
	if (r == 0)
		r = meta_script(m, MS_PATH, &rep, "us", parent, name);
	if (r < 0)
		return r;
	r = -EBADMSG;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 3 ||
	    meta_rep_u64(rep->element[1], &id) < 0 || id == 0)
		goto clean_rep;
	kind = meta_rep_text(rep->element[0], 1);
	path = meta_rep_text(rep->element[2], OBJFS_PATH_MAX - 1);
	if (!kind || (kind[0] != 'd' && kind[0] != 'f' && kind[0] != 'l') || !path ||
	    (path[0] && path[0] != '/'))
		goto clean_rep;
	*ret_kind = kind[0] == 'd' ? META_DIR : kind[0] == 'l' ? META_LINK : META_FILE;
	*ret_id = id;
	memcpy(ret_path, path, strlen(path) + 1);
	r = 0;
clean_rep:
	freeReplyObject(rep);
	return r;
}

int meta_rename(struct meta *m, uint64_t oparent, const char *oname, uint64_t nparent,
		const char *nname, unsigned flags, bool replace_files, uint64_t *ret_replaced)
{
	redisReply *rep;
	uint64_t old;
	int r;

	if (!oparent || !nparent || (flags & ~(META_RENAME_NOREPLACE | META_RENAME_EXCHANGE)) ||
	    flags == (META_RENAME_NOREPLACE | META_RENAME_EXCHANGE))
		return -EINVAL;
	r = util_name_validate(oname);
	if (r == 0)
		r = util_name_validate(nname);
	if (r == 0)
		r = meta_script_self(m, MS_RENAME, &rep, "usussss", oparent, oname, nparent, nname,
				     flags & META_RENAME_NOREPLACE ? "1" : "0",
				     flags & META_RENAME_EXCHANGE ? "1" : "0",
				     replace_files ? "1" : "0");
	if (r < 0)
		return r;
	r = meta_rep_u64(rep, &old);
	freeReplyObject(rep);
	if (r == 0 && ret_replaced)
		*ret_replaced = old;
	return r;
}

int meta_holders(struct meta *m, uint64_t id, char (**ret_nodes)[OBJFS_NODE_MAX], size_t *ret_n)
{
	char key[PREFIX_MAX + 32], field[24];
	char(*nodes)[OBJFS_NODE_MAX];
	const char *at, *end;
	redisReply *rep;
	size_t n = 0;
	int r;

	/* the record is "<parent>/<name>" and "/@<node>" for each holder */
	rec_key(m, id, key, sizeof(key));
	snprintf(field, sizeof(field), "%" PRIu64, id);
	r = id ? meta_command(m, &rep, "sss", "HGET", key, field) : -EINVAL;
	if (r < 0)
		return r;
	r = -EBADMSG;
	if (rep->type != REDIS_REPLY_STRING && rep->type != REDIS_REPLY_NIL)
		goto clean_rep;
	r = -ENOMEM;
	nodes = calloc(1, sizeof(*nodes));
	if (!nodes)
		goto clean_rep;
	at = rep->type == REDIS_REPLY_STRING ? rep->str : "";
	end = at + (rep->type == REDIS_REPLY_STRING ? rep->len : 0);
	/* skip the parent (digits), then the name: as rec() in meta_lua.h */
	if (at < end) {
		const char *slash = memchr(at, '/', (size_t)(end - at));
		const char *p = at;

		while (p < end && *p >= '0' && *p <= '9')
			p++;
		if (!slash || p != slash || p == at || slash + 1 >= end || slash[1] == '/') {
			meta_log_corrupt("bucket '%s', record %s: not '<parent>/<name>...'", key,
					 field);
			r = -EBADMSG;
			goto clean_nodes;
		}
		at = memchr(slash + 1, '/', (size_t)(end - slash - 1));
	}
	while (at && at < end) {
		const char *h = at + 1, *next = memchr(h, '/', (size_t)(end - h));
		size_t len = (size_t)((next ? next : end) - h);
		char shown[META_SHOWN_MAX];
		void *grown;

		at = next;
		r = -EBADMSG;
		if (len < 2 || h[0] != '@' || len > OBJFS_NODE_MAX || memchr(h, '\0', len)) {
			meta_log_corrupt("bucket '%s', record %s: holder '%.*s' is not a node name",
					 key, field, (int)(len < 64 ? len : 64), h);
			goto clean_nodes;
		}
		memcpy(shown, h + 1, len - 1);
		shown[len - 1] = '\0';
		if (util_node_name_validate(shown) < 0) {
			meta_log_corrupt("bucket '%s', record %s: holder '%s' is not a node name",
					 key, field, shown);
			goto clean_nodes;
		}
		if (n == HOLDERS_MAX)
			goto clean_nodes;
		r = -ENOMEM;
		grown = realloc(nodes, (n + 2) * sizeof(*nodes));
		if (!grown)
			goto clean_nodes;
		nodes = grown;
		memcpy(nodes[n++], shown, len); /* with its NUL */
		nodes[n][0] = '\0';		/* an empty name ends the list, as before */
	}
	*ret_nodes = nodes;
	*ret_n = n;
	freeReplyObject(rep);
	return 0;

clean_nodes:
	free(nodes);
clean_rep:
	freeReplyObject(rep);
	return r;
}

/*
 * Send @cmd about the key of kind @kind ('o', 'h', 't') of object @id, with
 * this node's name as an extra argument if @with_node, and return the
 * integer reply (>= 0) or a negative errno.
 */
static int obj_int_cmd(struct meta *m, const char *cmd, char kind, uint64_t id, bool with_node)
{
	char key[PREFIX_MAX + 32];
	redisReply *rep;
	int r;

	if (!id)
		return -EINVAL;
	obj_key(m, kind, id, key, sizeof(key));
	r = with_node ? meta_command(m, &rep, "sss", cmd, key, m->node)
		      : meta_command(m, &rep, "ss", cmd, key);
	if (r < 0)
		return r;
	r = rep_bool(rep);
	freeReplyObject(rep);
	return r;
}

/* ---- recovery ---- */

int meta_epoch(struct meta *m, char *buf, size_t len)
{
	const char *s;
	redisReply *rep;
	int r;

	r = meta_script(m, MS_EPOCH, &rep, "");
	if (r < 0)
		return r;
	s = meta_rep_text(rep, EPOCH_MAX);
	r = s && chars_in(s, rep->len, EPOCH_MAX, ALNUM) ? 0 : -EBADMSG;
	if (r < 0) {
		char shown[META_SHOWN_MAX];

		meta_log_corrupt("key '{%s}:epoch' is %s", m->prefix,
				 meta_rep_shown(rep, shown, sizeof(shown)));
	}
	if (r == 0 && rep->len >= len)
		r = -ERANGE;
	if (r == 0)
		memcpy(buf, s, rep->len + 1);
	freeReplyObject(rep);
	return r;
}

/* An absolute path of valid names: "/a/b/name". */
int meta_path_check(const char *path)
{
	char name[OBJFS_NAME_MAX + 1];
	const char *p, *e;
	size_t n;

	if (!path || path[0] != '/' || strnlen(path, OBJFS_PATH_MAX) >= OBJFS_PATH_MAX)
		return -EINVAL;
	for (p = path + 1;; p = e + 1) {
		e = strchrnul(p, '/');
		n = (size_t)(e - p);
		if (n == 0 || n > OBJFS_NAME_MAX)
			return -EINVAL;
		memcpy(name, p, n);
		name[n] = '\0';
		if (util_name_validate(name) < 0)
			return -EINVAL;
		if (!*e)
			return 0;
	}
}

int meta_reregister(struct meta *m, const struct meta_obj *obj, const char *path, char *ret_path)
{
	char hex[OBJFS_CSUM_HEX], *ids = NULL;
	const char *got;
	redisReply *rep;
	size_t len, cap = 0;
	int i, j, n = 1, r;

	r = meta_path_check(path);
	if (r == 0)
		r = meta_obj_check(obj, hex);
	/* a fresh id for each directory it may make: one per component
	 * above the name, or /lost+found */
	for (i = 1; r == 0 && path[i]; i++)
		n += path[i] == '/';
	if (r == 0) {
		cap = (size_t)n * 21;
		ids = malloc(cap);
		r = ids ? 0 : -ENOMEM;
	}
	for (i = 0; r == 0 || (r == -EAGAIN && i < ID_TRIES); i++) {
		uint64_t id;

		for (j = 0, len = 0, r = 0; j < n && r == 0; j++) {
			r = meta_draw_id(&id);
			len +=
			    (size_t)snprintf(ids + len, cap - len, "%s%" PRIu64, j ? " " : "", id);
		}
		if (r == 0)
			r = meta_script(m, MS_REREGISTER, &rep, "uusissss", obj->id, obj->size, hex,
					obj->mtime_ns, obj->origin, m->node, path, ids);
		if (r == 0)
			break;
	}
	free(ids);
	if (r < 0)
		return r;
	r = -EBADMSG;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
	    rep->element[0]->type != REDIS_REPLY_INTEGER ||
	    (rep->element[0]->integer != 0 && rep->element[0]->integer != 1))
		goto clean_rep;
	got = meta_rep_text(rep->element[1], OBJFS_PATH_MAX - 1);
	if (!got || (got[0] && got[0] != '/'))
		goto clean_rep;
	if (ret_path)
		memcpy(ret_path, got, strlen(got) + 1);
	r = (int)rep->element[0]->integer;
clean_rep:
	freeReplyObject(rep);
	return r;
}

int meta_object_path(struct meta *m, uint64_t id, char *ret_path)
{
	const char *path;
	redisReply *rep;
	int r;

	r = id ? meta_script(m, MS_OBJPATH, &rep, "u", id) : -EINVAL;
	if (r < 0)
		return r;
	path = meta_rep_text(rep, OBJFS_PATH_MAX - 1);
	r = path && (!path[0] || path[0] == '/') ? 0 : -EBADMSG;
	if (r == 0)
		memcpy(ret_path, path, strlen(path) + 1);
	freeReplyObject(rep);
	return r;
}

int meta_object_exists(struct meta *m, uint64_t id)
{
	char key[PREFIX_MAX + 32], field[24];
	redisReply *rep;
	int r;

	if (!id)
		return -EINVAL;
	rec_key(m, id, key, sizeof(key));
	snprintf(field, sizeof(field), "%" PRIu64, id);
	r = meta_command(m, &rep, "sss", "HEXISTS", key, field);
	if (r < 0)
		return r;
	r = rep_bool(rep);
	freeReplyObject(rep);
	return r;
}

int meta_object_deleted(struct meta *m, uint64_t id)
{
	return obj_int_cmd(m, "EXISTS", 't', id, false);
}

/* ---- node cards ---- */

static bool card_valid(const struct meta_card *card)
{
	return card && memchr(card->host, '\0', sizeof(card->host)) && card->host[0] &&
	       memchr(card->listen, '\0', sizeof(card->listen)) &&
	       memchr(card->instance, '\0', sizeof(card->instance)) &&
	       chars_in(card->instance, strlen(card->instance), sizeof(card->instance) - 1,
			ALNUM "-_") &&
	       memchr(card->caps, '\0', sizeof(card->caps)) &&
	       meta_caps_valid(card->caps, strlen(card->caps)) &&
	       memchr(card->rdma, '\0', sizeof(card->rdma)) &&
	       (!card->rdma[0] || meta_hostport_valid(card->rdma)) && card->pid > 0;
}

/* The ARGV of the claim and heartbeat scripts (see meta_scripts.c). */
static int args_card(struct meta *m, struct args *a, const struct meta_card *card,
		     const char *takeover, unsigned ttl_s)
{
	int r = meta_args_script(m, a, false);

	if (r == 0)
		meta_args_add(a, "sssusissiuuss", m->node, card->instance, takeover,
			      (uint64_t)ttl_s, card->host, (int64_t)card->pid, card->listen,
			      card->instance, card->started_ns, card->capacity, card->used,
			      card->caps, card->rdma);
	return r;
}

/* One claim attempt: 0, or -EADDRINUSE with the holder's card. */
static int claim_once(struct meta *m, struct conn *c, const struct meta_card *card,
		      const char *takeover, unsigned ttl_s, struct meta_card *ret_other)
{
	redisReply *rep;
	struct args a;
	int r;

	r = args_card(m, &a, card, takeover, ttl_s);
	if (r == 0)
		r = meta_pool_script(m, c, MS_CLAIM, &a, &rep);
	if (r < 0)
		return r;
	r = -EBADMSG;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
	    rep->element[0]->type != REDIS_REPLY_INTEGER)
		goto clean_rep;
	if (rep->element[0]->integer == 1 && rep->elements == 1)
		r = 0;
	else if (rep->element[0]->integer == 0 && rep->elements == 1 + META_CARD_FIELDS &&
		 meta_rep_card(rep->element + 1, m->node, ret_other) == 0)
		r = -EADDRINUSE;
clean_rep:
	freeReplyObject(rep);
	return r;
}

/*
 * Is @other a card left behind by a dead process on our own host?  Only a
 * card whose host is ours can be judged here: its pid must be gone, a
 * zombie, or now another process that started after the card did (see
 * util_proc_gone()).  A card of another host lives until its TTL runs out.
 */
static bool card_stale(const struct meta_card *card, const struct meta_card *other)
{
	return !strcmp(card->host, other->host) && util_proc_gone(other->pid, other->started_ns);
}

int meta_node_claim(struct meta *m, const struct meta_card *card, unsigned ttl_s,
		    struct meta_card *ret_other)
{
	struct meta_card other;
	struct conn *c;
	int r;

	if (!card_valid(card) || !ttl_s)
		return -EINVAL;
	r = meta_pool_get_call(m, &c);
	if (r < 0)
		return r;
	r = claim_once(m, c, card, "", ttl_s, &other);
	/* the second attempt replaces only the very card found stale */
	if (r == -EADDRINUSE && card_stale(card, &other)) {
		log_debug("meta: node '%s': taking over the card of dead pid %d", m->node,
			  other.pid);
		r = claim_once(m, c, card, other.instance, ttl_s, &other);
	}
	meta_pool_put(m, c);
	if (r == -EADDRINUSE && ret_other)
		*ret_other = other;
	return r;
}

int meta_node_heartbeat(struct meta *m, const struct meta_card *card, unsigned ttl_s)
{
	redisReply *rep;
	struct conn *c;
	struct args a;
	int r;

	if (!card_valid(card) || !ttl_s)
		return -EINVAL;
	r = args_card(m, &a, card, "", ttl_s);
	if (r == 0)
		r = meta_pool_get_call(m, &c);
	if (r < 0)
		return r;
	r = meta_pool_script(m, c, MS_HEARTBEAT, &a, &rep);
	meta_pool_put(m, c);
	if (r < 0)
		return r;
	r = rep->type == REDIS_REPLY_INTEGER ? 0 : -EBADMSG;
	freeReplyObject(rep);
	return r;
}

int meta_node_release(struct meta *m, const char *instance)
{
	redisReply *rep;
	int r;

	if (!instance || !instance[0] ||
	    strnlen(instance, sizeof(((struct meta_card *)0)->instance)) >=
		sizeof(((struct meta_card *)0)->instance))
		return -EINVAL;
	r = meta_script(m, MS_RELEASE, &rep, "ss", m->node, instance);
	if (r < 0)
		return r;
	r = rep_bool(rep);
	freeReplyObject(rep);
	return r < 0 ? r : 0;
}
