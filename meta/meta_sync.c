/*
 * meta_sync: what a restarted node asks Redis of its objects, a batch at
 * a time (meta_sync_holders()).  One script call per batch of up to
 * META_SYNC_BATCH objects, where checking one object used to cost three
 * calls (its record, its tombstone, adding the holder, its path).
 */
#include "meta_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

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
		st = rep_text(rep->element[2 * i], 1);
		path = rep_text(rep->element[2 * i + 1], OBJFS_PATH_MAX - 1);
		if (!st || !path || (path[0] && path[0] != '/'))
			return -EBADMSG;
		switch (st[0]) {
		case 'L':
			ret[i].state = META_SYNC_LIVE;
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
		csum_to_hex(objs[i].csum, hex);
		p += sprintf(p, "%" PRIu64 " %" PRIu64 " %s;", objs[i].id, objs[i].size, hex);
	}
	r = script(m, MS_SYNC_HOLDERS, &rep, "ss", m->node, buf);
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
