/*
 * meta_route: Redis Cluster's side of the pool (the pool is meta_pool.c's).
 *
 * Owns: the key slot of a key (CRC16/XMODEM and the hash tag rule, as the
 * Redis Cluster specification has them), the slot map read with CLUSTER
 * SLOTS, the check that a command stays in the namespace's slot, and the
 * reading of the error replies that redirect a command.
 *
 * Every key of an objfs namespace is "{P}:..." (meta.h), so the whole
 * namespace lives in the one slot CRC16(P) mod 16384, and the pool's
 * target is that slot's master: every pool connection goes to it, scripts
 * included.  The slot map is read at the first connect, after a MOVED
 * (asking the node that sent it first), and when the master of the slot
 * stops answering (meta_pool_target_stale()): meta_route_resolve() asks the node it
 * is given, then the masters it knew, then the seed nodes of the URL, one
 * connect and one round trip of timeout_ms each, and stops at the first
 * answer.  A command whose first key is in another slot is a bug of its
 * caller: meta_route_check() refuses it with -EXDEV rather than send it where
 * it could only be redirected.
 *
 * The map: owner[slot] is 1 + the index of the slot's master in nodes[]
 * (0: no master).  Guarded by meta.lock; replaced whole, never patched.
 */
#define _GNU_SOURCE
#include "meta.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "log.h"
#include "meta_i.h"

/* more masters than this in CLUSTER SLOTS is a reply we do not trust */
#define NODES_MAX 1024
/* meta_route_resolve() asks at most this many masters it knew */
#define KNOWN_ASKED 16

/* a bug that every command of its kind repeats (common/log.h) */
static struct log_ratelimit slot_rl =
    LOG_RATELIMIT_INIT("meta: commands on keys of other slots", 10000, 10);

struct route {
	uint16_t owner[SLOTS];
	struct addr *nodes;
	unsigned n;
};

uint16_t meta_route_crc16(const void *s, size_t len)
{
	const unsigned char *p = s;
	uint16_t crc = 0;
	size_t i;
	int b;

	for (i = 0; i < len; i++) {
		crc ^= (uint16_t)(p[i] << 8);
		for (b = 0; b < 8; b++)
			crc = crc & 0x8000 ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
	}
	return crc;
}

unsigned meta_route_keyslot(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len), *close;

	/* the tag is what lies between the first '{' and the first '}'
	 * after it, if that is not empty */
	if (open) {
		close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
		if (close && close > open + 1) {
			key = open + 1;
			len = (size_t)(close - key);
		}
	}
	return meta_route_crc16(key, len) & (SLOTS - 1);
}

unsigned meta_route_ns_slot(const struct meta *m)
{
	return meta_route_crc16(m->prefix, strlen(m->prefix)) & (SLOTS - 1);
}

void meta_route_free(struct route *r)
{
	if (!r)
		return;
	free(r->nodes);
	free(r);
}

/* A reply element that is an integer in [0, @max]. */
static bool rep_int(const redisReply *r, long long max)
{
	return r->type == REDIS_REPLY_INTEGER && r->integer >= 0 && r->integer <= max;
}

/* [host, port, ...] of CLUSTER SLOTS; an empty host is the node that
 * answered (@asked), as the specification says. */
static int node_addr(const redisReply *n, const struct addr *asked, struct addr *ret)
{
	const char *host;

	if (n->type != REDIS_REPLY_ARRAY || n->elements < 2 || !rep_int(n->element[1], 65535) ||
	    n->element[1]->integer == 0)
		return -EBADMSG;
	host = meta_rep_text(n->element[0], HOST_MAX - 1);
	if (!host)
		return -EBADMSG;
	if (!host[0] || !strcmp(host, "?"))
		host = asked->host;
	memset(ret, 0, sizeof(*ret));
	memcpy(ret->host, host, strlen(host) + 1);
	ret->port = (int)n->element[1]->integer;
	return 0;
}

/* A slot map from the reply of CLUSTER SLOTS. */
static int route_parse(const redisReply *rep, const struct addr *asked, struct route **ret)
{
	struct route *rt;
	struct addr a;
	size_t i;
	unsigned j, s;
	int r = -EBADMSG;

	if (rep->type != REDIS_REPLY_ARRAY || rep->elements > SLOTS)
		return -EBADMSG;
	rt = calloc(1, sizeof(*rt));
	if (!rt || !(rt->nodes = calloc(NODES_MAX, sizeof(*rt->nodes)))) {
		meta_route_free(rt);
		return -ENOMEM;
	}
	for (i = 0; i < rep->elements; i++) {
		const redisReply *e = rep->element[i];

		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
		    !rep_int(e->element[0], SLOTS - 1) || !rep_int(e->element[1], SLOTS - 1) ||
		    e->element[0]->integer > e->element[1]->integer ||
		    node_addr(e->element[2], asked, &a) < 0)
			goto clean_rt;
		for (j = 0; j < rt->n; j++)
			if (rt->nodes[j].port == a.port && !strcmp(rt->nodes[j].host, a.host))
				break;
		if (j == rt->n) {
			if (rt->n == NODES_MAX)
				goto clean_rt;
			rt->nodes[rt->n++] = a;
		}
		for (s = (unsigned)e->element[0]->integer; s <= (unsigned)e->element[1]->integer;
		     s++)
			rt->owner[s] = (uint16_t)(j + 1);
	}
	*ret = rt;
	return 0;

clean_rt:
	meta_route_free(rt);
	return r;
}

/* Read the slot map from the node at @a. */
static int route_read(struct meta *m, const struct addr *a, struct route **ret, char *why,
		      size_t wlen)
{
	const char *argv[] = {"CLUSTER", "SLOTS"};
	redisContext *ctx;
	redisReply *rep;
	int r;

	r = meta_conn_open(m, a, m->timeout_ms, true, &ctx, why, wlen);
	if (r < 0)
		return r;
	r = meta_conn_cmd(ctx, 2, argv, &rep, why, wlen);
	redisFree(ctx);
	if (r < 0)
		return r;
	if (rep->type == REDIS_REPLY_ERROR) {
		snprintf(why, wlen, "CLUSTER SLOTS on %s:%d: %.200s", a->host, a->port, rep->str);
		r = meta_conn_reply_errno(rep) == -EACCES ? -EACCES : -EIO;
	} else {
		r = route_parse(rep, a, ret);
		if (r == -EBADMSG)
			snprintf(why, wlen, "CLUSTER SLOTS on %s:%d: malformed reply", a->host,
				 a->port);
	}
	freeReplyObject(rep);
	return r;
}

int meta_route_resolve(struct meta *m, const struct addr *first, struct addr *ret, char *why,
		       size_t wlen)
{
	struct addr ask[1 + KNOWN_ASKED + SEEDS_MAX];
	unsigned n = 0, i, slot = meta_route_ns_slot(m);
	struct route *rt = NULL, *old;
	int r = -EIO;

	if (first)
		ask[n++] = *first;
	pthread_mutex_lock(&m->lock);
	for (i = 0; m->route && i < m->route->n && i < KNOWN_ASKED; i++)
		ask[n++] = m->route->nodes[i];
	pthread_mutex_unlock(&m->lock);
	for (i = 0; i < m->nseeds; i++)
		ask[n++] = m->seeds[i];
	snprintf(why, wlen, "no node to ask");
	for (i = 0; i < n; i++) {
		r = route_read(m, &ask[i], &rt, why, wlen);
		if (r == 0 || r == -ENOMEM)
			break;
		log_debug("meta: cannot read the slot map from %s:%d: %s", ask[i].host, ask[i].port,
			  why);
	}
	if (r < 0)
		return r == -ENOMEM || r == -EACCES ? r : -EIO;
	r = 0;
	if (!rt->owner[slot]) {
		snprintf(why, wlen, "slot %u of prefix '%s' has no master (CLUSTERDOWN)", slot,
			 m->prefix);
		r = -EIO;
	} else {
		*ret = rt->nodes[rt->owner[slot] - 1];
	}
	pthread_mutex_lock(&m->lock);
	old = m->route;
	m->route = rt;
	pthread_mutex_unlock(&m->lock);
	meta_route_free(old);
	return r;
}

/* Commands without a key: they go to the target as they are. */
static bool keyless(const char *cmd)
{
	static const char *const names[] = {
	    "SCRIPT", "PING", "INFO", "ROLE", "ASKING", "CLUSTER", "AUTH", "SELECT", "ECHO", "TIME",
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(names); i++)
		if (!strcasecmp(cmd, names[i]))
			return true;
	return false;
}

int meta_route_check(const struct meta *m, const struct args *a)
{
	const char *key;
	size_t len;
	unsigned slot;

	if (m->engine != ENGINE_CLUSTER || a->n < 2 || keyless(a->v[0]))
		return 0;
	if (!strcasecmp(a->v[0], "EVALSHA") || !strcasecmp(a->v[0], "EVAL")) {
		/* no declared key: the script runs where the target is */
		if (a->n < 4 || !strcmp(a->v[2], "0"))
			return 0;
		key = a->v[3];
		len = a->len[3];
	} else {
		key = a->v[1];
		len = a->len[1];
	}
	slot = meta_route_keyslot(key, len);
	if (slot == meta_route_ns_slot(m))
		return 0;
	log_msg_limited(
	    &slot_rl, LOGL_ERROR,
	    "meta: %s on key '%.*s' of slot %u, not of the namespace's slot %u: not sent", a->v[0],
	    (int)(len > 100 ? 100 : len), key, slot, meta_route_ns_slot(m));
	return -EXDEV;
}

/* "<slot> <host:port>" after MOVED or ASK. */
static enum redirect redirect_to(enum redirect kind, const char *s, struct addr *ret)
{
	const char *sp = strchr(s, ' ');

	if (!sp || meta_addr_parse(sp + 1, strlen(sp + 1), 0, ret) < 0 || !ret->port)
		return RD_NONE;
	return kind;
}

enum redirect meta_redirect_kind(const redisReply *rep, struct addr *ret)
{
	const char *s;

	if (rep->type != REDIS_REPLY_ERROR || !rep->str)
		return RD_NONE;
	s = rep->str;
	if (!strncmp(s, "MOVED ", 6))
		return redirect_to(RD_MOVED, s + 6, ret);
	if (!strncmp(s, "ASK ", 4))
		return redirect_to(RD_ASK, s + 4, ret);
	if (!strncmp(s, "TRYAGAIN", 8))
		return RD_TRYAGAIN;
	if (!strncmp(s, "CLUSTERDOWN", 11) || strstr(s, "while the cluster is down"))
		return RD_CLUSTERDOWN;
	if (!strncmp(s, "READONLY", 8) || !strncmp(s, "LOADING", 7) ||
	    !strncmp(s, "MASTERDOWN", 10))
		return RD_RESOLVE;
	if (!strncmp(s, "NOSCRIPT", 8))
		return RD_NOSCRIPT;
	/* Redis 7's words when a script's key lives on another node */
	if (strstr(s, "non local key"))
		return RD_NONLOCAL;
	return RD_NONE;
}
