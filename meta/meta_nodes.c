/*
 * meta_nodes: the calls about the cluster's nodes (API in meta.h,
 * scripts in meta_scripts.c).
 *
 * Owns: locating an object for a fetch (its record and live holders, with
 * stale holders pruned), giving up a replica, and the member list.  Each
 * is one Lua script, run on a pool connection like meta.c's calls and
 * validated with meta_reply.c's validators.  The invalidation subscriber
 * is meta_subscriber.c's; Redis Cluster (slots, MOVED) is meta_route.c's.
 */
#define _GNU_SOURCE
#include "meta.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bsum.h"
#include "log.h"
#include "meta_i.h"

#define MEMBERS_MAX 65536

/* ---- locate ---- */

/* Stride of the locate script's holders: node, listen, caps, rdma. */
#define HOLDER_FIELDS 4
/* What comes before them: size, csum, mtime, origin, stale, block sums,
 * the number of holders (the nodes fetching it follow them). */
#define LOCATE_FIXED 7

/* node, listen, caps, rdma: 0, or -EBADMSG with the reason in @why.  A
 * malformed rdma address only costs the holder its RDMA (meta_rep_rdma()). */
static int rep_holder(redisReply *const *f, struct meta_holder *ret, const char **why)
{
	const char *node = meta_rep_text(f[0], OBJFS_NODE_MAX - 1);
	const char *addr = meta_rep_text(f[1], sizeof(ret->addr) - 1);
	const char *caps, *rdma;

	caps = f[2]->type == REDIS_REPLY_NIL ? "" : meta_rep_text(f[2], sizeof(ret->caps) - 1);

	*why = "holder name is not a node name";
	if (!node || util_node_name_validate(node) < 0)
		return -EBADMSG;
	*why = "no valid listen address";
	if (!addr || !addr[0])
		return -EBADMSG;
	*why = "malformed caps";
	if (!caps || !meta_caps_valid(caps, strlen(caps)))
		return -EBADMSG;
	rdma = meta_rep_rdma(f[3], node);
	memset(ret, 0, sizeof(*ret));
	memcpy(ret->node, node, strlen(node) + 1);
	memcpy(ret->addr, addr, strlen(addr) + 1);
	memcpy(ret->caps, caps, strlen(caps) + 1);
	memcpy(ret->rdma, rdma, strlen(rdma) + 1);
	return 0;
}

int meta_locate(struct meta *m, uint64_t id, struct meta_obj *ret_obj,
		struct meta_holder **ret_holders, size_t *ret_n, unsigned *ret_stale)
{
	return meta_locate_sums(m, id, ret_obj, ret_holders, ret_n, ret_stale, NULL);
}

/* The block sums of a locate's answer @f: 0 and a copy in *@ret_bsum
 * (NULL if none), or -ENOMEM.  Bad text is logged and taken as none. */
static int rep_bsum(const redisReply *f, uint64_t id, char **ret_bsum)
{
	const char *b;

	*ret_bsum = NULL;
	if (f->type == REDIS_REPLY_NIL)
		return 0;
	b = meta_rep_text(f, BSUM_TEXT_MAX);
	if (!b || !meta_bsum_text_ok(b)) {
		meta_log_corrupt("object %" PRIu64 ": its block sums (field 'bsum') are "
				 "malformed; fetching it without them",
				 id);
		return 0;
	}
	*ret_bsum = strdup(b);
	return *ret_bsum ? 0 : -ENOMEM;
}

/* The nodes of a locate's answer from @f on, @n of them, into @ret (which
 * has room): how many were good; the others are logged and skipped. */
static size_t rep_nodes(redisReply *const *f, size_t n, uint64_t id, struct meta_holder *ret)
{
	static struct log_ratelimit rl = LOG_RATELIMIT_INIT("meta: skipped holders", 1000, 1);
	size_t i, good = 0;

	for (i = 0; i < n; i++) {
		const char *why, *s;

		if (rep_holder(f + i * HOLDER_FIELDS, &ret[good], &why) == 0) {
			good++;
			continue;
		}
		s = meta_rep_text(f[i * HOLDER_FIELDS], OBJFS_NODE_MAX - 1);
		log_msg_limited(&rl, LOGL_WARN,
				"meta: object %" PRIu64 ": skipping holder '%s': %s", id,
				s && util_node_name_validate(s) == 0 ? s : "?", why);
	}
	return good;
}

int meta_locate_fan(struct meta *m, uint64_t id, unsigned flags, unsigned advertise_ms,
		    unsigned sample, struct meta_locate *ret)
{
	struct meta_locate l = {0};
	redisReply *rep, *const *e;
	size_t nodes, nh;
	int r;

	if (!id || !ret || sample > META_FAN_SAMPLE_MAX)
		return -EINVAL;
	r = meta_script(m, MS_LOCATE, &rep, "ussuu", id, m->node,
			(flags & META_LOCATE_SUMS) ? "1" : "0", (uint64_t)advertise_ms,
			(uint64_t)sample);
	if (r < 0)
		return r;
	r = -EBADMSG;
	e = rep->element;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < LOCATE_FIXED ||
	    (rep->elements - LOCATE_FIXED) % HOLDER_FIELDS)
		goto clean_rep;
	nodes = (rep->elements - LOCATE_FIXED) / HOLDER_FIELDS;
	if (meta_rep_obj(e, id, &l.obj) < 0 || e[4]->type != REDIS_REPLY_INTEGER ||
	    e[4]->integer < 0 || e[4]->integer > UINT_MAX || e[6]->type != REDIS_REPLY_INTEGER ||
	    e[6]->integer < 0 || (uint64_t)e[6]->integer > nodes ||
	    (uint64_t)e[6]->integer > HOLDERS_MAX || nodes - (size_t)e[6]->integer > sample)
		goto clean_rep;
	nh = (size_t)e[6]->integer;
	l.stale = (unsigned)e[4]->integer;
	r = (flags & META_LOCATE_SUMS) ? rep_bsum(e[5], id, &l.bsum) : 0;
	if (r < 0)
		goto clean_rep;
	r = -ENOMEM;
	l.holders = calloc(nh + 1, sizeof(*l.holders));
	l.partials = calloc(nodes - nh + 1, sizeof(*l.partials));
	if (!l.holders || !l.partials) {
		meta_locate_release(&l);
		goto clean_rep;
	}
	l.n = rep_nodes(e + LOCATE_FIXED, nh, id, l.holders);
	l.np = rep_nodes(e + LOCATE_FIXED + nh * HOLDER_FIELDS, nodes - nh, id, l.partials);
	*ret = l;
	r = 0;
clean_rep:
	freeReplyObject(rep);
	return r;
}

void meta_locate_release(struct meta_locate *l)
{
	if (!l)
		return;
	free(l->holders);
	free(l->partials);
	free(l->bsum);
	memset(l, 0, sizeof(*l));
}

int meta_locate_sums(struct meta *m, uint64_t id, struct meta_obj *ret_obj,
		     struct meta_holder **ret_holders, size_t *ret_n, unsigned *ret_stale,
		     char **ret_bsum)
{
	struct meta_locate l;
	int r;

	r = meta_locate_fan(m, id, ret_bsum ? META_LOCATE_SUMS : 0, 0, 0, &l);
	if (r < 0)
		return r;
	*ret_obj = l.obj;
	*ret_holders = l.holders;
	*ret_n = l.n;
	if (ret_stale)
		*ret_stale = l.stale;
	if (ret_bsum)
		*ret_bsum = l.bsum;
	else
		free(l.bsum);
	free(l.partials);
	return 0;
}

int meta_fan_leave(struct meta *m, uint64_t id)
{
	redisReply *rep;
	int r;

	r = id ? meta_script(m, MS_FAN_LEAVE, &rep, "us", id, m->node) : -EINVAL;
	if (r < 0)
		return r;
	freeReplyObject(rep);
	return 0;
}

/* Run a per-object script of this node that answers 0, 1 or 2. */
int meta_node_obj_script(struct meta *m, enum meta_script ms, uint64_t id)
{
	redisReply *rep;
	int r;

	r = id ? meta_script(m, ms, &rep, "us", id, m->node) : -EINVAL;
	if (r < 0)
		return r;
	if (rep->type != REDIS_REPLY_INTEGER || rep->integer < 0 || rep->integer > 2)
		r = -EBADMSG;
	else
		r = (int)rep->integer;
	freeReplyObject(rep);
	return r;
}

int meta_release_replica(struct meta *m, uint64_t id)
{
	return meta_node_obj_script(m, MS_RELEASE_REPLICA, id);
}

/* ---- members ---- */

/* Stride of the members script's reply: name, pttl, the card's fields. */
#define MEMBER_FIELDS (2 + META_CARD_FIELDS)

static int member_cmp(const void *a, const void *b)
{
	return strcmp(((const struct meta_member *)a)->node, ((const struct meta_member *)b)->node);
}

/* One member: 0, or -EBADMSG with the reason in @why. */
static int rep_member(redisReply *const *f, struct meta_member *ret, const char **why)
{
	const char *node = meta_rep_text(f[0], OBJFS_NODE_MAX - 1);
	struct meta_member mb;

	memset(&mb, 0, sizeof(mb));
	*why = "not a node name";
	if (!node || util_node_name_validate(node) < 0)
		return -EBADMSG;
	memcpy(mb.node, node, strlen(node) + 1);
	*why = "malformed card TTL";
	if (f[1]->type != REDIS_REPLY_INTEGER || f[1]->integer < -2)
		return -EBADMSG;
	mb.live = f[1]->integer != -2;
	mb.ttl_ms = mb.live ? f[1]->integer : -1;
	*why = "malformed card";
	if (mb.live && meta_rep_card(f + 2, mb.node, &mb.card) < 0)
		return -EBADMSG;
	*ret = mb;
	return 0;
}

int meta_members(struct meta *m, struct meta_member **ret, size_t *ret_n)
{
	static struct log_ratelimit rl = LOG_RATELIMIT_INIT("meta: skipped members", 1000, 1);
	struct meta_member *mbs;
	redisReply *rep;
	size_t i, n = 0;
	int r;

	r = meta_script(m, MS_MEMBERS, &rep, "");
	if (r < 0)
		return r;
	r = -EBADMSG;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements % MEMBER_FIELDS)
		goto clean_rep;
	r = -EFBIG;
	if (rep->elements / MEMBER_FIELDS > MEMBERS_MAX)
		goto clean_rep;
	r = -ENOMEM;
	mbs = calloc(rep->elements / MEMBER_FIELDS + 1, sizeof(*mbs));
	if (!mbs)
		goto clean_rep;
	for (i = 0; i < rep->elements; i += MEMBER_FIELDS) {
		const char *why;

		if (rep_member(rep->element + i, &mbs[n], &why) == 0) {
			n++;
			continue;
		}
		{
			const char *s = meta_rep_text(rep->element[i], OBJFS_NODE_MAX - 1);

			log_msg_limited(&rl, LOGL_WARN, "meta: skipping member '%s': %s",
					s && util_node_name_validate(s) == 0 ? s : "?", why);
		}
	}
	qsort(mbs, n, sizeof(*mbs), member_cmp);
	*ret = mbs;
	*ret_n = n;
	r = 0;
clean_rep:
	freeReplyObject(rep);
	return r;
}
