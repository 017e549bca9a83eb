/*
 * meta_sync: this node's copies as Redis knows them.  Adding and dropping
 * this node as a holder of one (meta_add_holder() and friends), with the
 * object's path in the same call for a copy just fetched
 * (meta_add_holder_at(): one round trip where there were two or three);
 * what a restarted node asks Redis of its objects, a batch at a time
 * (meta_sync_holders()): one script call per batch of up to
 * META_SYNC_BATCH objects, where checking one object used to cost three
 * calls (its record, its tombstone, adding the holder, its path); and
 * registering a batch again once Redis lost them
 * (meta_reregister_batch()), where each cost a call.
 */
#include "meta_i.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

/* @obj NULL: whatever the record says.  With @ret_path, also the path
 * (meta_add_holder_at()). */
static int add_holder(struct meta *m, uint64_t id, const struct meta_obj *obj, bool prune,
		      const char *bsum, unsigned *ret_stale, uint64_t parent, const char *name,
		      char *ret_path)
{
	char hex[OBJFS_CSUM_HEX] = "", size[24] = "";
	const redisReply *n = NULL;
	const char *path = NULL;
	redisReply *rep;
	int r;

	if (obj) {
		util_csum_to_hex(obj->csum, hex);
		snprintf(size, sizeof(size), "%" PRIu64, obj->size);
	}
	r = id && meta_bsum_text_ok(bsum) && (!bsum || obj)
		? meta_script(m, MS_ADD_HOLDER, &rep, "ussssssus", id, m->node, prune ? "1" : "0",
			      size, hex, bsum ? bsum : "", ret_path ? "1" : "0", parent,
			      name ? name : "")
		: -EINVAL;
	if (r < 0)
		return r;
	if (!ret_path) {
		n = rep;
	} else if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2) {
		n = rep->element[0];
		path = meta_rep_text(rep->element[1], OBJFS_PATH_MAX - 1);
		if (!path || (path[0] && path[0] != '/'))
			n = NULL;
	}
	if (!n || n->type != REDIS_REPLY_INTEGER || n->integer < -2 || n->integer > INT_MAX) {
		r = -EBADMSG;
	} else if (n->integer == -1) {
		r = -ENOENT;
	} else if (n->integer == -2) {
		r = -ENOTUNIQ;
	} else {
		if (ret_stale)
			*ret_stale = (unsigned)n->integer;
		if (ret_path)
			memcpy(ret_path, path, strlen(path) + 1);
	}
	freeReplyObject(rep);
	return r;
}

int meta_add_holder_prune(struct meta *m, const struct meta_obj *obj, unsigned *ret_stale)
{
	return obj ? add_holder(m, obj->id, obj, true, NULL, ret_stale, 0, NULL, NULL) : -EINVAL;
}

int meta_add_holder_sums(struct meta *m, const struct meta_obj *obj, const char *bsum,
			 unsigned *ret_stale)
{
	return obj ? add_holder(m, obj->id, obj, true, bsum, ret_stale, 0, NULL, NULL) : -EINVAL;
}

int meta_add_holder_at(struct meta *m, const struct meta_obj *obj, const char *bsum,
		       uint64_t parent, const char *name, unsigned *ret_stale, char *ret_path)
{
	if (!obj || !ret_path)
		return -EINVAL;
	ret_path[0] = '\0';
	return add_holder(m, obj->id, obj, true, bsum, ret_stale, parent, name, ret_path);
}

int meta_add_holder(struct meta *m, uint64_t id)
{
	return add_holder(m, id, NULL, false, NULL, NULL, 0, NULL, NULL);
}

int meta_add_holder_of(struct meta *m, const struct meta_obj *obj)
{
	return obj ? add_holder(m, obj->id, obj, false, NULL, NULL, 0, NULL, NULL) : -EINVAL;
}

int meta_del_holder(struct meta *m, uint64_t id)
{
	int r = meta_node_obj_script(m, MS_DEL_HOLDER, id);

	return r < 0 ? r : 0;
}

void meta_sync_release(struct meta_sync *v, size_t n)
{
	size_t i;

	for (i = 0; v && i < n; i++) {
		free(v[i].path);
		v[i].path = NULL;
	}
}

/* Parse the script's reply for @n objects into @ret.  0 or -EBADMSG. */
static int sync_parse(const redisReply *rep, size_t n, struct meta_sync *ret)
{
	const char *st, *path;
	size_t i;

	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 * n)
		return -EBADMSG;
	for (i = 0; i < n; i++) {
		st = meta_rep_text(rep->element[2 * i], 1);
		path = meta_rep_text(rep->element[2 * i + 1], OBJFS_PATH_MAX - 1);
		if (!st || !path || (path[0] && path[0] != '/'))
			return -EBADMSG;
		switch (st[0]) {
		case 'L':
		case 'S':
			ret[i].state = META_SYNC_LIVE;
			ret[i].sole = st[0] == 'S';
			break;
		case 'X':
			ret[i].state = META_SYNC_OTHER;
			break;
		case 'D':
			ret[i].state = META_SYNC_DELETED;
			break;
		case 'U':
			ret[i].state = META_SYNC_UNKNOWN;
			break;
		default:
			return -EBADMSG;
		}
		ret[i].path = path[0] ? strdup(path) : NULL;
		if (path[0] && !ret[i].path)
			return -ENOMEM;
	}
	return 0;
}

int meta_sync_holders(struct meta *m, const struct meta_obj *objs, size_t n, struct meta_sync *ret)
{
	char hex[OBJFS_CSUM_HEX], *buf, *p;
	redisReply *rep;
	size_t i;
	int r;

	if (!m || (n && (!objs || !ret)) || n > META_SYNC_BATCH)
		return -EINVAL;
	memset(ret, 0, n * sizeof(*ret));
	if (!n)
		return 0;
	/* "<20 digits> <20 digits> <32 hex>;" per object */
	buf = malloc(n * 80 + 1);
	if (!buf)
		return -ENOMEM;
	p = buf;
	for (i = 0; i < n; i++) {
		if (!objs[i].id) {
			free(buf);
			return -EINVAL;
		}
		util_csum_to_hex(objs[i].csum, hex);
		p += sprintf(p, "%" PRIu64 " %" PRIu64 " %s;", objs[i].id, objs[i].size, hex);
	}
	r = meta_script(m, MS_SYNC_HOLDERS, &rep, "ss", m->node, buf);
	free(buf);
	if (r < 0)
		return r;
	r = sync_parse(rep, n, ret);
	if (r == -EBADMSG)
		meta_log_corrupt("the answer to a batch of %zu holder checks is malformed", n);
	if (r < 0)
		meta_sync_release(ret, n);
	freeReplyObject(rep);
	return r;
}

void meta_rereg_release(struct meta_rereg *v, size_t n)
{
	size_t i;

	for (i = 0; v && i < n; i++) {
		free(v[i].path);
		v[i].path = NULL;
	}
}

/* Parse the batch script's reply for @n objects into @ret.  0 or -EBADMSG. */
static int rereg_parse(const redisReply *rep, size_t n, struct meta_rereg *ret)
{
	const char *code, *path;
	size_t i;

	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 * n)
		return -EBADMSG;
	for (i = 0; i < n; i++) {
		code = meta_rep_text(rep->element[2 * i], 200);
		path = meta_rep_text(rep->element[2 * i + 1], OBJFS_PATH_MAX - 1);
		if (!code || !path || (path[0] && path[0] != '/'))
			return -EBADMSG;
		if (!strcmp(code, "0") || !strcmp(code, "1")) {
			ret[i].r = code[0] - '0';
		} else {
			ret[i].r = meta_conn_errno_of(code);
			if (ret[i].r == -EBADMSG)
				meta_log_corrupt("registering one of a batch again: %s", code);
			continue;
		}
		ret[i].path = path[0] ? strdup(path) : NULL;
		if (path[0] && !ret[i].path)
			return -ENOMEM;
	}
	return 0;
}

int meta_reregister_batch(struct meta *m, const struct meta_obj *objs, const char *const *paths,
			  size_t n, struct meta_rereg *ret)
{
	char hex[OBJFS_CSUM_HEX], *buf = NULL, *ids = NULL;
	size_t i, len = 0, cap = 0, nids = 0, idlen = 0, pl;
	redisReply *rep;
	uint64_t id;
	int r = 0;

	if (!m || (n && (!objs || !paths || !ret)) || n > META_SYNC_BATCH)
		return -EINVAL;
	memset(ret, 0, n * sizeof(*ret));
	if (!n)
		return 0;
	for (i = 0; i < n && r == 0; i++) {
		const char *p = paths[i];

		r = meta_path_check(p);
		if (r == 0)
			r = meta_obj_check(&objs[i], hex);
		if (r < 0)
			break;
		/* a fresh id for each directory it may make: one per
		 * component above the name, or /lost+found */
		nids++;
		for (pl = 1; p[pl]; pl++)
			nids += p[pl] == '/';
		/* "<20> <20> <32 hex> <20> <origin> <len>:<path>" */
		cap += 4 * 21 + OBJFS_CSUM_HEX + OBJFS_NODE_MAX + pl + 2;
	}
	if (r < 0)
		return r;
	buf = malloc(cap + 1);
	ids = malloc(nids * 21 + 1);
	if (!buf || !ids) {
		r = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		meta_obj_check(&objs[i], hex);
		len += (size_t)snprintf(buf + len, cap + 1 - len,
					"%" PRIu64 " %" PRIu64 " %s %" PRId64 " %s %zu:%s",
					objs[i].id, objs[i].size, hex, objs[i].mtime_ns,
					objs[i].origin, strlen(paths[i]), paths[i]);
	}
	ids[0] = '\0';
	for (i = 0; i < nids && r == 0; i++) {
		r = meta_draw_id(&id);
		idlen += (size_t)snprintf(ids + idlen, nids * 21 + 1 - idlen, "%s%" PRIu64,
					  i ? " " : "", id);
	}
	if (r < 0)
		goto out;
	r = meta_script(m, MS_REREGISTER_BATCH, &rep, "sss", m->node, buf, ids);
	if (r < 0)
		goto out;
	r = rereg_parse(rep, n, ret);
	if (r == -EBADMSG)
		meta_log_corrupt("the answer to a batch of %zu registrations is malformed", n);
	if (r < 0)
		meta_rereg_release(ret, n);
	freeReplyObject(rep);
out:
	free(buf);
	free(ids);
	return r;
}
