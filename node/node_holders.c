/*
 * node_holders: which node to fetch an object from.
 *
 * A fetch starts with the object record and the list of its live holders,
 * from Redis in one round trip (meta_locate()), with their transport
 * addresses.  The addresses seen are kept for PEER_CACHE_NS in a small
 * cache keyed by node, so that the open of a small object whose origin
 * node's address is known goes straight to that node without asking
 * Redis; only if that node fails (it evicted the object, it died) are the
 * holders located in Redis.
 *
 * Ranges are spread over the good holders round robin.  A holder that
 * fails is marked bad for this fetch, or stalled if it moved no byte for
 * io_timeout; when no holder is good, a worker locates the holders again
 * (someone may have fetched the object meanwhile), keeping those already
 * found bad marked bad unless their address changed (a node that
 * restarted).  A stalled holder is asked again if it is still in the
 * fresh list, which has live cards only, when the worker retries the
 * stalled ones (node_worker.c); else it stays marked.
 *
 * Whether a holder can be asked at all is the transport's call
 * (transport_reaches(): its card names a backend we speak).
 */
#include "node_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Lines that fetches repeat (common/log.h): at most a burst in 10 s. */
static struct log_ratelimit sums_rl =
    LOG_RATELIMIT_INIT("corrupt records in Redis (block sums)", 10000, 100);
static struct log_ratelimit stale_rl =
    LOG_RATELIMIT_INIT("holder entries of nodes that are gone", 10000, 10);
static struct log_ratelimit noholder_rl =
    LOG_RATELIMIT_INIT("fetches with no live holder", 10000, 100);
static struct log_ratelimit gone_rl = LOG_RATELIMIT_INIT("stalled holders given up", 10000, 10);

#define PEER_CACHE_NS (10 * 1000000000LL)
#define PEER_CACHE_MAX 4096

/* A node's transport addresses (TCP and RDMA) and caps: the whole holder
 * entry a holder list from Redis gave. */
struct peer_addr {
	char node[OBJFS_NODE_MAX];
	struct meta_holder h;
	int64_t at; /* util_mono_ns() when learnt */
	UT_hash_handle hh;
};

/* ---- the address cache ---- */

static void peer_put(struct node *nd, const struct meta_holder *hs, size_t n)
{
	struct peer_addr *p, *added;
	size_t i;

	pthread_mutex_lock(&nd->lock);
	for (i = 0; i < n; i++) {
		HASH_FIND_STR(nd->peers, hs[i].node, p);
		if (!p) {
			if (HASH_COUNT(nd->peers) >= PEER_CACHE_MAX)
				break;
			p = calloc(1, sizeof(*p));
			if (!p)
				break;
			snprintf(p->node, sizeof(p->node), "%s", hs[i].node);
			HASH_ADD_STR(nd->peers, node, p);
			HASH_FIND_STR(nd->peers, hs[i].node, added);
			if (!added) { /* the table could not grow */
				free(p);
				break;
			}
		}
		p->h = hs[i];
		p->at = util_mono_ns();
	}
	pthread_mutex_unlock(&nd->lock);
}

static bool peer_get(struct node *nd, const char *node, struct meta_holder *ret)
{
	struct peer_addr *p;
	bool found = false;

	pthread_mutex_lock(&nd->lock);
	HASH_FIND_STR(nd->peers, node, p);
	if (p && util_mono_ns() - p->at < PEER_CACHE_NS) {
		*ret = p->h;
		found = true;
	}
	pthread_mutex_unlock(&nd->lock);
	return found;
}

void node_fetch_peer_del(struct node *nd, const char *node)
{
	struct peer_addr *p;

	pthread_mutex_lock(&nd->lock);
	HASH_FIND_STR(nd->peers, node, p);
	if (p) {
		HASH_DELETE(hh, nd->peers, p);
		free(p);
	}
	pthread_mutex_unlock(&nd->lock);
}

void node_fetch_peer_free_all(struct node *nd)
{
	struct peer_addr *p, *tmp;
	struct peer_blame *b, *btmp;

	HASH_ITER (hh, nd->peers, p, tmp) {
		HASH_DELETE(hh, nd->peers, p);
		free(p);
	}
	HASH_ITER (hh, nd->blamed, b, btmp) {
		HASH_DELETE(hh, nd->blamed, b);
		free(b);
	}
}

/* ---- peers that sent bad blocks ---- */

void node_fetch_peer_blame(struct node *nd, const char *node)
{
	struct peer_blame *b;

	pthread_mutex_lock(&nd->lock);
	HASH_FIND_STR(nd->blamed, node, b);
	if (!b && HASH_COUNT(nd->blamed) < PEER_BLAME_MAX && (b = calloc(1, sizeof(*b)))) {
		snprintf(b->node, sizeof(b->node), "%s", node);
		HASH_ADD_STR(nd->blamed, node, b);
	}
	if (b) {
		b->csum_failures++;
		b->avoid_until = util_mono_ns() + PEER_AVOID_NS;
	}
	pthread_mutex_unlock(&nd->lock);
}

static bool avoided_locked(struct node *nd, const char *node, int64_t now)
{
	struct peer_blame *b;

	HASH_FIND_STR(nd->blamed, node, b);
	return b && b->avoid_until > now;
}

static int blame_cmp(const void *a, const void *b)
{
	return strcmp((*(struct peer_blame *const *)a)->node,
		      (*(struct peer_blame *const *)b)->node);
}

size_t node_peer_csum_failures(struct node *nd, char *buf, size_t len)
{
	struct peer_blame *b, *tmp, **v;
	size_t n = 0, i, at = 0;

	if (len)
		buf[0] = '\0';
	pthread_mutex_lock(&nd->lock);
	v = calloc(HASH_COUNT(nd->blamed) + 1, sizeof(*v));
	if (v)
		HASH_ITER (hh, nd->blamed, b, tmp)
			v[n++] = b;
	if (v)
		qsort(v, n, sizeof(*v), blame_cmp);
	for (i = 0; i < n && at < len; i++) {
		int k = snprintf(buf + at, len - at, "%s%s=%" PRIu64, i ? " " : "", v[i]->node,
				 v[i]->csum_failures);

		if (k < 0 || (size_t)k >= len - at) {
			buf[at] = '\0'; /* whole entries only */
			break;
		}
		at += (size_t)k;
	}
	pthread_mutex_unlock(&nd->lock);
	free(v);
	return n;
}

/*
 * Take the block sums of @f's record from their text @text (may be NULL):
 * sums that do not fit its size are a corrupt record, fetched without.
 */
static void take_sums(struct node_fetch *f, char *text)
{
	int r;

	if (text && bsum_blocks(f->rec.size) >= 2) {
		r = bsum_from_text(text, strlen(text), f->rec.size, &f->sums);
		if (r == -EINVAL)
			log_msg_limited(
			    &sums_rl, LOGL_ERROR,
			    "corrupt record in Redis: object %" PRIu64 ": its block sums do "
			    "not fit its size (%" PRIu64 " bytes); fetching it without them",
			    f->id, f->rec.size);
	}
	free(text);
}

/* ---- choosing ---- */

unsigned node_fetch_fan_ttl_ms(const struct node *nd)
{
	unsigned ttl = 4 * nd->io_timeout_ms;

	return ttl > 30000 ? ttl : 30000;
}

const char *node_fetch_holder_errname(int err)
{
	switch (-err) {
	case ENOENT:
		return "does not hold it";
	case ETIMEDOUT:
		return "stalled";
	case ECONNREFUSED:
		return "refused the connection";
	case ECONNRESET:
		return "went away";
	case EACCES:
		return "refused authentication";
	case EPROTO:
		return "sent a malformed reply";
	case EBADE:
		return "sent a block that failed its checksum";
	default:
		return strerror(-err);
	}
}

bool node_fetch_holder_usable(struct node *nd, const struct meta_holder *h)
{
	return nd->transport && (h->addr[0] || h->rdma[0]) &&
	       transport_reaches(nd->transport, h->caps, h->addr, h->rdma);
}

/* Is @a the holder @b, at the same addresses (not a node that restarted
 * elsewhere)? */
static bool holder_same(const struct meta_holder *a, const struct meta_holder *b)
{
	return !strcmp(a->node, b->node) && !strcmp(a->addr, b->addr) && !strcmp(a->rdma, b->rdma);
}

int node_fetch_holder_pick_locked(struct node_fetch *f)
{
	size_t i, k;

	for (i = 0; i < f->nholders; i++) {
		k = (f->rr + i) % f->nholders;
		if (f->mark[k] == HOLDER_GOOD) {
			f->rr = (unsigned)(k + 1);
			return (int)k;
		}
	}
	return -1;
}

void node_fetch_holder_mark_locked(struct node_fetch *f, int k, const struct meta_holder *h,
				   enum holder_mark m)
{
	if (k >= 0 && (size_t)k < f->nholders && holder_same(&f->holders[k], h) && f->mark[k] < m)
		f->mark[k] = m;
}

int node_fetch_holder_stalled_locked(const struct node_fetch *f)
{
	size_t i;

	for (i = 0; i < f->nholders; i++)
		if (f->mark[i] == HOLDER_STALLED)
			return (int)i;
	return -1;
}

static void count_stale(struct node *nd, uint64_t id, unsigned stale)
{
	if (!stale)
		return;
	NODE_COUNT(nd, stale_holders, stale);
	log_msg_limited(&stale_rl, LOGL_INFO,
			"object %" PRIu64 ": dropped %u holder entries of nodes that are gone", id,
			stale);
}

int node_fetch_holder_locate(struct node_fetch *f, const struct meta_obj *rec)
{
	struct node *nd = f->nd;
	struct meta_holder origin;
	int64_t now = util_mono_ns();
	size_t i, good = 0, avoided;
	int r;

	/* small objects only: for big ones a Redis round trip is nothing,
	 * and knowing every holder lets ranges come from several */
	if (rec && rec->id == f->id && rec->size <= nd->sync_max && rec->origin[0] &&
	    strcmp(rec->origin, nd->node) && peer_get(nd, rec->origin, &origin) &&
	    node_fetch_holder_usable(nd, &origin) && (f->holders = malloc(sizeof(*f->holders)))) {
		/* the node that wrote it, at the address we know: no Redis */
		f->rec = *rec;
		f->holders[0] = origin;
		f->nholders = 1;
		f->guessed = true;
		NODE_COUNT(nd, direct, 1);
	} else {
		struct meta_locate l;
		/* block sums only matter to an object of several blocks; a
		 * node that serves says it fetches it (partial holder) */
		bool multi = !rec || bsum_blocks(rec->size) >= 2;

		r = meta_locate_fan(nd->meta, f->id, multi ? META_LOCATE_SUMS : 0,
				    multi && nd->source ? node_fetch_fan_ttl_ms(nd) : 0,
				    multi ? FAN_SAMPLE : 0, &l);
		if (r < 0)
			return r;
		count_stale(nd, f->id, l.stale);
		f->rec = l.obj;
		f->holders = l.holders;
		f->nholders = l.n;
		l.holders = NULL;
		take_sums(f, l.bsum);
		l.bsum = NULL;
		peer_put(nd, f->holders, f->nholders);
		/* the fetchers found, for the fan-out (node_fan_new()) */
		f->first = l.partials;
		f->nfirst = l.np;
		l.partials = NULL;
		meta_locate_release(&l);
	}
	f->mark = calloc(f->nholders ? f->nholders : 1, sizeof(*f->mark));
	if (!f->mark)
		return -ENOMEM;
	pthread_mutex_lock(&nd->lock);
	for (i = 0, avoided = 0; i < f->nholders; i++) {
		f->mark[i] =
		    node_fetch_holder_usable(nd, &f->holders[i]) ? HOLDER_GOOD : HOLDER_BAD;
		if (f->mark[i] == HOLDER_GOOD && avoided_locked(nd, f->holders[i].node, now))
			avoided++;
		good += f->mark[i] == HOLDER_GOOD;
	}
	/* peers that sent bad blocks lately only if no other is there */
	for (i = 0; i < f->nholders && avoided < good; i++)
		if (f->mark[i] == HOLDER_GOOD && avoided_locked(nd, f->holders[i].node, now)) {
			f->mark[i] = HOLDER_BAD;
			good--;
			avoided--;
		}
	pthread_mutex_unlock(&nd->lock);
	if (!good) {
		log_msg_limited(&noholder_rl, LOGL_ERROR,
				"object %" PRIu64 " has no live holder to fetch it from", f->id);
		return -EIO;
	}
	f->rr = (unsigned)(util_mono_ns() / 1000) % (unsigned)f->nholders;
	return 0;
}

int node_fetch_holder_relocate(struct node_fetch *f, bool unstall)
{
	struct node *nd = f->nd;
	struct meta_holder *hs = NULL, *old;
	struct meta_obj rec;
	char gone[OBJFS_NODE_MAX] = "";
	unsigned stale = 0;
	size_t n = 0, i, j, good = 0;
	enum holder_mark *mark;
	bool found;
	int r;

	r = meta_locate(nd->meta, f->id, &rec, &hs, &n, &stale);
	count_stale(nd, f->id, stale);
	if (r < 0)
		return r;
	peer_put(nd, hs, n);
	mark = calloc(n ? n : 1, sizeof(*mark));
	if (!mark) {
		free(hs);
		return -ENOMEM;
	}
	pthread_mutex_lock(&nd->lock);
	for (i = 0; i < n; i++) {
		for (j = 0; j < f->nholders; j++)
			if (f->mark[j] > mark[i] && holder_same(&f->holders[j], &hs[i]))
				mark[i] = f->mark[j];
		if (unstall && mark[i] == HOLDER_STALLED)
			mark[i] = HOLDER_GOOD;
		if (!node_fetch_holder_usable(nd, &hs[i]))
			mark[i] = HOLDER_BAD;
		if (mark[i] == HOLDER_GOOD)
			good++;
	}
	/* a stalled holder missing from the list: its card is gone */
	for (j = 0; j < f->nholders && !gone[0]; j++) {
		if (f->mark[j] != HOLDER_STALLED)
			continue;
		for (i = 0, found = false; i < n && !found; i++)
			found = !strcmp(f->holders[j].node, hs[i].node);
		if (!found)
			snprintf(gone, sizeof(gone), "%s", f->holders[j].node);
	}
	old = f->holders;
	free(f->mark);
	f->holders = hs;
	f->mark = mark;
	f->nholders = n;
	pthread_mutex_unlock(&nd->lock);
	free(old);
	if (gone[0])
		log_msg_limited(&gone_rl, LOGL_WARN,
				"object %" PRIu64
				": holder '%s' stalled, and its node card is gone "
				"(or it holds the object no more): giving up on it",
				f->id, gone);
	return good ? 0 : -EHOSTUNREACH;
}
