/*
 * node-harness.h: what test-node.c and test-node-evict.c share: a real
 * store, a private redis-server (meta-harness.h) and a fake transport
 * backend whose holders are nodes with a card in Redis and a store of
 * their own (see test-node.c for what the fake can be asked to do).
 * The local node reaches Redis through a link to its socket, so that
 * Redis can go away for it alone (redis_away(), redis_back()).  Hooks
 * and node_config.wake_tick count their calls (F).
 * Include it once, from the test program.
 */
#ifndef OBJFS_NODE_HARNESS_H
#define OBJFS_NODE_HARNESS_H

/* each program uses some of these helpers */
#pragma GCC diagnostic ignored "-Wunused-function"

#include "meta-harness.h"

#include <sys/uio.h>

#include "node.h"
#include "node_i.h"
#include "store.h"
#include "transport_i.h"

#define RANGE (64 * 1024)
#define NHOLDERS 3

/* ---- the holders ---- */

struct holder {
	const char *node; /* also its address on the fake transport */
	struct meta *m;
	struct store *s;
	char dir[128];
	/* failures; all under F.lock */
	int64_t fail_after; /* go away after this many bytes served; -1 never */
	bool missing;	    /* answer ENOENT */
	bool corrupt;	    /* flip the first byte of each GET it serves */
	uint64_t gate_off;  /* ranges at or past this offset wait for the gate */
	unsigned stalls;    /* stall (-ETIMEDOUT) on this many GETs at once */
	uint64_t stall_at;  /* stall on each GET once it served this many bytes; 0 never */
	bool gone_on_stall; /* its card goes at its first stall (node released) */
	char instance[64];  /* its card's */
	/* what it did; F.lock */
	uint64_t served; /* bytes copied to the node */
	unsigned gets;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool gate_open; /* lock */
	unsigned gated; /* GETs waiting at the gate; lock */
	struct holder h[NHOLDERS];
	/* hooks */
	unsigned n_failed; /* lock */
	uint64_t busy_id;  /* lock */
	/* busy_id is busy only from its (busy_late + 1)th look on (an open
	 * that comes in the middle of an eviction round); lock */
	unsigned busy_late, busy_looks;
	unsigned n_busy; /* calls of the busy hook; lock */
	/* the published hook: its calls, and the last one's arguments; lock */
	unsigned n_published;
	uint64_t pub_parent, pub_id;
	unsigned pub_how;
	char pub_name[OBJFS_NAME_MAX + 1];
	unsigned n_wake; /* node_config.wake_tick calls; lock */
	/* the published hook evicts (up to this many bytes made free) when
	 * an object is published under its name (0: it does not), and adds
	 * what that gave up; lock */
	uint64_t evict_on_publish, evicted_on_publish;
	/* destinations registered (transport_region_new()) and freed, and
	 * GETs of bytes whose destination no region covered; lock */
	unsigned regions_new, regions_freed, unregistered;
	char root[64];
	unsigned seq;
	unsigned io_timeout_ms; /* the next world's transport's (0: 2000) */
	bool no_sums;		/* put_object() publishes no block sums */
	uint64_t pack_max;	/* the local store's store_config.pack_max */
} F = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static struct holder *holder_by_addr(const char *addr)
{
	int i;

	for (i = 0; i < NHOLDERS; i++)
		if (F.h[i].node && !strcmp(F.h[i].node, addr))
			return &F.h[i];
	return NULL;
}

/* ---- the fake backend ---- */

struct fake_conn {
	struct tconn base; /* first, as transport.c wants */
	struct holder *h;
};

static int fake_connect(struct transport *t, const char *addr, unsigned ver, struct tconn **ret)
{
	struct holder *h = holder_by_addr(addr);
	struct fake_conn *c;

	if (!h)
		return -EHOSTUNREACH;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->h = h;
	*ret = &c->base;
	return 0;
}

/* Copy up to @n bytes at @off of @o into the request's iovecs, from byte
 * @done of the range on.  Returns bytes copied. */
static uint64_t copy_out(struct store_obj *o, const struct transport_req *req, uint64_t done,
			 uint64_t n, bool corrupt)
{
	uint64_t pos = 0, copied = 0;
	int i;

	for (i = 0; i < req->iovcnt && copied < n; i++) {
		uint64_t len = req->iov[i].iov_len, skip = 0;

		if (pos + len <= done) {
			pos += len;
			continue;
		}
		if (done > pos)
			skip = done - pos;
		len -= skip;
		if (len > n - copied)
			len = n - copied;
		CHECK_EQ(store_read(o, (char *)req->iov[i].iov_base + skip, len,
				    req->off + done + copied),
			 (long long)len);
		if (corrupt && done + copied == 0)
			((char *)req->iov[i].iov_base)[skip] ^= 0x5a;
		copied += len;
		pos += skip + len;
	}
	return copied;
}

/* A registered destination, as a backend that registers memory (RDMA)
 * would keep it. */
struct fake_region {
	struct transport_region base; /* first, as transport.c wants */
	uint8_t *addr;
	uint64_t len;
};

static int fake_region_new(struct transport *t, void *addr, uint64_t len,
			   struct transport_region **ret)
{
	struct fake_region *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->base.ops = t->ops;
	r->addr = addr;
	r->len = len;
	pthread_mutex_lock(&F.lock);
	F.regions_new++;
	pthread_mutex_unlock(&F.lock);
	*ret = &r->base;
	return 0;
}

static void fake_region_free(struct transport_region *base)
{
	struct fake_region *r = (struct fake_region *)base;
	volatile uint8_t *p = r->addr;

	/* still the object's memory: a region must go before the pages */
	(void)p[0];
	(void)p[r->len - 1];
	pthread_mutex_lock(&F.lock);
	F.regions_freed++;
	pthread_mutex_unlock(&F.lock);
	free(r);
}

/* Does the request's region cover every byte of its iovecs?  An object
 * within the eager size has none (transport_region_new() skips it: such
 * ranges are copied out of receive buffers), and its ranges end there. */
static bool region_covers(const struct transport_req *req)
{
	const struct fake_region *r = (const struct fake_region *)req->region;
	int i;

	if (!r)
		return req->off + req->len <= TRANSPORT_RDMA_EAGER_DEFAULT;

	for (i = 0; r && i < req->iovcnt; i++) {
		const uint8_t *b = req->iov[i].iov_base;

		if (b < r->addr || req->iov[i].iov_len > r->len ||
		    (uint64_t)(b - r->addr) > r->len - req->iov[i].iov_len)
			return false;
	}
	return r != NULL;
}

static int fake_fetch(struct tconn *tc, const struct transport_req *req)
{
	struct holder *h = ((struct fake_conn *)tc)->h;
	struct store_obj *o;
	uint64_t done = 0, step, allowed;
	bool corrupt, stall;
	int err = 0;

	tc->answered = true;
	pthread_mutex_lock(&F.lock);
	h->gets++;
	if (!region_covers(req))
		F.unregistered++;
	if (req->off >= h->gate_off) {
		F.gated++;
		pthread_cond_broadcast(&F.cond);
		while (!F.gate_open)
			pthread_cond_wait(&F.cond, &F.lock);
		F.gated--;
	}
	if (h->missing) {
		pthread_mutex_unlock(&F.lock);
		return -ENOENT;
	}
	if (h->stalls) {
		bool gone = h->gone_on_stall;

		h->stalls--;
		h->gone_on_stall = false;
		pthread_mutex_unlock(&F.lock);
		if (gone)
			CHECK_EQ(meta_node_release(h->m, h->instance), 0);
		tc->broken = true;
		return -ETIMEDOUT;
	}
	corrupt = h->corrupt;
	pthread_mutex_unlock(&F.lock);

	o = store_lookup(h->s, req->id);
	if (!o)
		return -ENOENT;
	if (req->off + req->len > store_obj_size(o)) {
		store_obj_unref(o);
		return -ERANGE;
	}
	/* in steps, with progress, as a real backend would */
	while (done < req->len) {
		step = req->len - done < 16384 ? req->len - done : 16384;
		pthread_mutex_lock(&F.lock);
		allowed = h->fail_after < 0 ? step
			  : h->served >= (uint64_t)h->fail_after
			      ? 0
			      : (uint64_t)h->fail_after - h->served;
		if (allowed < step)
			step = allowed;
		stall = h->stall_at && done + step > h->stall_at;
		if (stall)
			step = h->stall_at - done;
		h->served += step;
		pthread_mutex_unlock(&F.lock);
		if (!step) {
			err = stall ? -ETIMEDOUT : -ECONNRESET;
			tc->broken = true;
			break;
		}
		done += copy_out(o, req, done, step, corrupt);
		if (req->progress)
			req->progress(req->arg, done);
	}
	store_obj_unref(o);
	return err;
}

static bool fake_idle_ok(struct tconn *c)
{
	return true;
}

static void fake_close(struct tconn *c)
{
	free(c);
}

static const struct transport_ops fake_ops = {
    .name = "fake",
    .caps = "fake",
    .streams_per_peer = 1,
    .range_min = RANGE,
    .connect = fake_connect,
    .fetch = fake_fetch,
    .idle_ok = fake_idle_ok,
    .close = fake_close,
    .region_new = fake_region_new,
    .region_free = fake_region_free,
};

/* ---- hooks ---- */

static void hook_failed(void *ctx, uint64_t id)
{
	pthread_mutex_lock(&F.lock);
	F.n_failed++;
	pthread_mutex_unlock(&F.lock);
}

static void hook_published(void *ctx, uint64_t parent, const char *name, uint64_t id, unsigned how)
{
	uint64_t need, freed = 0;

	pthread_mutex_lock(&F.lock);
	F.n_published++;
	F.pub_parent = parent;
	F.pub_id = id;
	F.pub_how = how;
	snprintf(F.pub_name, sizeof(F.pub_name), "%s", name);
	need = (how & NODE_PUB_NAMED) ? F.evict_on_publish : 0;
	pthread_mutex_unlock(&F.lock);
	/* ctx: the world's node, wherever it is now; no lock of the node is
	 * held here */
	if (need)
		freed = node_evict(*(struct node **)ctx, need);
	pthread_mutex_lock(&F.lock);
	F.evicted_on_publish += freed;
	pthread_mutex_unlock(&F.lock);
}

static void hook_wake_tick(void *ctx)
{
	pthread_mutex_lock(&F.lock);
	F.n_wake++;
	pthread_mutex_unlock(&F.lock);
}

static bool hook_busy(void *ctx, uint64_t id)
{
	bool busy;

	pthread_mutex_lock(&F.lock);
	busy = F.busy_id == id && F.busy_looks++ >= F.busy_late;
	F.n_busy++;
	pthread_mutex_unlock(&F.lock);
	return busy;
}

/*
 * Readers are woken before a fetch's last steps (registering the copy,
 * the hooks), which run on a worker: wait, boundedly, for what a case
 * expects of them.
 */
#define WAIT_FOR(cond)                                                  \
	do {                                                            \
		int wait_i_;                                            \
		for (wait_i_ = 0; wait_i_ < 5000 && !(cond); wait_i_++) \
			usleep(1000);                                   \
		CHECK(cond);                                            \
	} while (0)

static unsigned locked_read(const unsigned *v)
{
	unsigned x;

	pthread_mutex_lock(&F.lock);
	x = *v;
	pthread_mutex_unlock(&F.lock);
	return x;
}

/* ---- one world per case: holders, the local node, its node ---- */

struct world {
	char prefix[32];
	struct meta *m; /* the local node's, through @link */
	/* the local node reaches Redis through this symbolic link to its
	 * socket: redis_away() removes it */
	char link[160];
	struct store *s;
	char dir[128];
	struct transport *t;
	struct node_source *src; /* the local node's, for its eviction; lease_ms 200 */
	struct node *nd;
};

static struct store *open_store(char *dir, size_t len, const char *name, uint64_t capacity,
				uint64_t pack_max)
{
	struct store_config cfg = {.capacity = capacity, .pack_max = pack_max};
	struct store *s;
	int err = 0;

	snprintf(dir, len, "%s/%s-%u", F.root, name, F.seq);
	cfg.dir = dir;
	s = store_open(&cfg, &err, NULL);
	if (!s) {
		fprintf(stderr, "store_open %s: %s\n", dir, strerror(-err));
		exit(1);
	}
	return s;
}

/* Claim node @listen's name (also its address); its instance token goes
 * to @ret_instance (@len bytes) unless NULL. */
static void claim(struct meta *m, const char *listen, char *ret_instance, size_t len)
{
	struct meta_card c, other;

	memset(&c, 0, sizeof(c));
	snprintf(c.host, sizeof(c.host), "test");
	snprintf(c.listen, sizeof(c.listen), "%s", listen);
	snprintf(c.caps, sizeof(c.caps), "fake");
	snprintf(c.instance, sizeof(c.instance), "i-%s-%u", listen, F.seq);
	c.pid = getpid();
	CHECK_EQ(meta_node_claim(m, &c, 60, &other), 0);
	if (ret_instance)
		snprintf(ret_instance, len, "%s", c.instance);
}

/* A meta client like mk()'s that reaches Redis through @sock. */
static struct meta *mk_url(const char *sock, const char *prefix, const char *node)
{
	char url[200];
	struct meta_config cfg = {.url = url, .prefix = prefix, .node = node};
	struct meta *m;
	int err = 0;

	snprintf(url, sizeof(url), "unix:%s", sock);
	m = meta_new(&cfg, &err);
	if (!m) {
		fprintf(stderr, "meta_new: %s\n", strerror(-err));
		exit(1);
	}
	return m;
}

static void world_init(struct world *w, uint64_t local_capacity)
{
	static const char *names[NHOLDERS] = {"holder-a", "holder-b", "holder-c"};
	struct transport_config tc = {.node = "local",
				      .io_timeout_ms = F.io_timeout_ms ? F.io_timeout_ms : 2000};
	struct node_config fc;
	int i, err = 0;

	F.seq++;
	snprintf(w->prefix, sizeof(w->prefix), "t-fetch-%u", F.seq);
	pthread_mutex_lock(&F.lock);
	F.gate_open = true;
	F.n_failed = 0;
	F.busy_id = 0;
	F.busy_late = F.busy_looks = 0;
	F.n_busy = 0;
	F.n_published = F.pub_how = F.n_wake = 0;
	F.evict_on_publish = F.evicted_on_publish = 0;
	F.pub_parent = F.pub_id = 0;
	F.pub_name[0] = '\0';
	F.regions_new = F.regions_freed = F.unregistered = 0;
	pthread_mutex_unlock(&F.lock);
	for (i = 0; i < NHOLDERS; i++) {
		struct holder *h = &F.h[i];

		memset(h, 0, sizeof(*h));
		h->node = names[i];
		h->fail_after = -1;
		h->gate_off = UINT64_MAX;
		h->m = mk(w->prefix, h->node, 0, 0);
		CHECK_EQ(meta_connect(h->m), 0);
		claim(h->m, h->node, h->instance, sizeof(h->instance));
		h->s = open_store(h->dir, sizeof(h->dir), h->node, 40u << 20, 0);
	}
	snprintf(w->link, sizeof(w->link), "%s/local-%u.sock", R.dir, F.seq);
	if (symlink(R.sock, w->link) < 0) {
		perror("symlink");
		exit(1);
	}
	w->m = mk_url(w->link, w->prefix, "local");
	CHECK_EQ(meta_connect(w->m), 0);
	claim(w->m, "local", NULL, 0);
	w->s = open_store(w->dir, sizeof(w->dir), "local", local_capacity, F.pack_max);
	w->t = transport_new_ops(&tc, &fake_ops, &err);
	CHECK(w->t != NULL);
	w->src = node_source_new(w->s, 200);
	CHECK(w->src != NULL);
	fc = (struct node_config){
	    .node = "local",
	    .meta = w->m,
	    .store = w->s,
	    .transport = w->t,
	    .source = w->src,
	    .hooks = {.failed = hook_failed,
		      .busy = hook_busy,
		      .published = hook_published,
		      .ctx = &w->nd},
	    .sync_max = 4096,
	    .workers = 4,
	    .wake_tick = hook_wake_tick,
	};
	w->nd = node_new(&fc, &err);
	if (!w->nd) {
		fprintf(stderr, "node_new: %s\n", strerror(-err));
		exit(1);
	}
}

static void world_release(struct world *w)
{
	int i;

	node_free(w->nd);
	node_source_free(w->src);
	/* every fetch registered its destination once, fetched into it only,
	 * and gave it back (before the pages: fake_region_free()) */
	CHECK_EQ(locked_read(&F.regions_new), locked_read(&F.regions_freed));
	CHECK_EQ(locked_read(&F.unregistered), 0);
	transport_free(w->t);
	store_close(w->s);
	meta_free(w->m);
	unlink(w->link);
	rm_dir(w->dir);
	for (i = 0; i < NHOLDERS; i++) {
		store_close(F.h[i].s);
		meta_free(F.h[i].m);
		rm_dir(F.h[i].dir);
	}
}

/*
 * Redis goes away for the local node only: its socket link goes (a
 * connect fails at once) and every connection but the raw one is closed
 * (the holders' reconnect when next used: meta sees an idle connection
 * closed).  No call waits for a timeout.
 */
static void redis_away(struct world *w)
{
	CHECK_EQ(unlink(w->link), 0);
	rdo("CLIENT KILL TYPE normal SKIPME yes");
}

/* Redis is back for the local node: true once its meta client answers
 * again (after meta's reconnect backoff, 5 s at most; bounded). */
static bool redis_back(struct world *w)
{
	char epoch[64];
	int i;

	CHECK_EQ(symlink(R.sock, w->link), 0);
	for (i = 0; i < 1000; i++) {
		if (meta_epoch(w->m, epoch, sizeof(epoch)) == 0)
			return true;
		usleep(10000);
	}
	return false;
}

static void fill(uint8_t *buf, size_t size, uint64_t seed)
{
	size_t i;

	for (i = 0; i < size; i++)
		buf[i] = (uint8_t)((i * 131 + seed * 7 + (i >> 12)) & 0xff);
}

/*
 * Write an object of @size bytes on holder @first (published under @name
 * there), copy it to the holders in @also (bit i: holder i).  Returns its
 * record.
 */
static struct meta_obj put_object(struct world *w, const char *name, size_t size, int first,
				  unsigned also)
{
	uint8_t *buf = malloc(size ? size : 1);
	struct bsums *sums = NULL;
	struct meta_obj rec;
	char *text;
	int i, err = 0;

	memset(&rec, 0, sizeof(rec));
	CHECK_EQ(meta_alloc_id(F.h[first].m, &rec.id), 0);
	fill(buf, size, rec.id);
	for (i = 0; i < NHOLDERS; i++) {
		struct store_obj *o;

		if (i != first && !(also & (1u << i)))
			continue;
		o = store_create(F.h[i].s, rec.id, &err);
		CHECK(o != NULL);
		if (!o)
			continue;
		CHECK_EQ(store_write(o, buf, size, 0), 0);
		CHECK_EQ(store_seal_sums(o, name, 1700000000000000000LL, sums ? NULL : &sums), 0);
		store_obj_csum(o, rec.csum);
		store_obj_unref(o);
	}
	rec.size = size;
	rec.mtime_ns = 1700000000000000000LL;
	snprintf(rec.origin, sizeof(rec.origin), "%s", F.h[first].node);
	/* with its block sums, as a writer publishes it (F.no_sums: as an
	 * older one did) */
	text = F.no_sums ? NULL : node_bsum_text(sums);
	CHECK_EQ(meta_publish_sums(F.h[first].m, META_ROOT_ID, name, &rec, text, false, NULL, NULL),
		 0);
	free(text);
	free(sums);
	for (i = 0; i < NHOLDERS; i++)
		if (i != first && (also & (1u << i)))
			CHECK_EQ(meta_add_holder(F.h[i].m, rec.id), 0);
	free(buf);
	return rec;
}

/* An object of @size zero bytes, written and published by the local node
 * only: the last copy in the cluster. */
static struct meta_obj put_local_object(struct world *w, const char *name, uint64_t size)
{
	char path[OBJFS_NAME_MAX + 2];
	struct store_obj *o;
	struct meta_obj rec;
	int err = 0;

	memset(&rec, 0, sizeof(rec));
	CHECK_EQ(meta_alloc_id(w->m, &rec.id), 0);
	o = store_create(w->s, rec.id, &err);
	CHECK(o != NULL);
	if (!o)
		return rec;
	snprintf(path, sizeof(path), "/%s", name);
	CHECK_EQ(store_truncate(o, size), 0);
	CHECK_EQ(store_seal(o, path, 1), 0);
	store_obj_csum(o, rec.csum);
	rec.size = size;
	snprintf(rec.origin, sizeof(rec.origin), "local");
	CHECK_EQ(meta_publish(w->m, META_ROOT_ID, name, &rec, false, NULL, NULL), 0);
	store_obj_unref(o);
	return rec;
}

/* Does the local copy of @rec hold exactly the right bytes? */
static bool local_copy_ok(struct world *w, const struct meta_obj *rec)
{
	struct store_obj *o = store_lookup(w->s, rec->id);
	uint8_t *want = malloc(rec->size + 1), *got = malloc(rec->size + 1);
	bool ok;

	ok = o && store_obj_sealed(o) && store_obj_size(o) == rec->size && want && got;
	if (ok) {
		fill(want, rec->size, rec->id);
		ok = store_read(o, got, rec->size, 0) == (ssize_t)rec->size &&
		     !memcmp(want, got, rec->size);
	}
	store_obj_unref(o);
	free(want);
	free(got);
	return ok;
}

/* Is the local node among the holders of @id in Redis? */
static bool held_here(struct world *w, uint64_t id)
{
	char(*nodes)[OBJFS_NODE_MAX] = NULL;
	size_t n = 0, i;
	bool found = false;

	if (meta_holders(w->m, id, &nodes, &n) < 0)
		return false;
	for (i = 0; i < n; i++)
		found |= !strcmp(nodes[i], "local");
	free(nodes);
	return found;
}

/* Does the local store have @id (linked)? */
static bool in_store(struct world *w, uint64_t id)
{
	struct store_obj *o = store_lookup(w->s, id);

	store_obj_unref(o);
	return o != NULL;
}

/* Is no fetch of @id running (every byte in and checked, or the fetch
 * failed)?  A fetch that is done may still be registering its copy:
 * held_here() and copy_let_go() say when that is over. */
static bool fetch_ended(struct world *w, uint64_t id)
{
	uint64_t done, size;

	return node_fetch_progress(w->nd, id, &done, &size) == -ENOENT;
}

/* Has everyone but the store let go of the local copy of @id (the fetch
 * too: it holds the copy until its worker is done with it)? */
static bool copy_let_go(struct world *w, uint64_t id)
{
	struct store_obj *o = store_lookup(w->s, id);
	bool r = !o || !store_obj_in_use(o);

	store_obj_unref(o);
	return r;
}

/* Open, read all, drop: the result of a whole-object read, once the
 * fetch is over (the copy registered and the fetch freed). */
static int fetch_all(struct world *w, const struct meta_obj *rec)
{
	struct store_obj *o = NULL;
	struct node_fetch *f = NULL;
	int r;

	r = node_fetch_open(w->nd, rec->id, NULL, 0, NULL, &f, &o);
	if (r < 0)
		return r;
	node_fetch_opened(node_fetch_ref(f));
	r = node_fetch_wait(f, 0, rec->size);
	node_fetch_put(f);
	store_obj_unref(o);
	if (r == 0) {
		WAIT_FOR(held_here(w, rec->id));
		WAIT_FOR(copy_let_go(w, rec->id));
	}
	return r;
}

static void wait_gated(unsigned n)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&F.lock);
	while (F.gated < n)
		if (pthread_cond_timedwait(&F.cond, &F.lock, &until))
			break;
	CHECK(F.gated >= n);
	pthread_mutex_unlock(&F.lock);
}

static void gate(bool open)
{
	pthread_mutex_lock(&F.lock);
	F.gate_open = open;
	pthread_cond_broadcast(&F.cond);
	pthread_mutex_unlock(&F.lock);
}

/* ---- cases ---- */

struct opener {
	struct world *w;
	uint64_t id;
	struct node_fetch *f;
	struct store_obj *o;
	int r;
};

static void *open_thread(void *arg)
{
	struct opener *op = arg;

	op->r = node_fetch_open(op->w->nd, op->id, NULL, 0, NULL, &op->f, &op->o);
	return NULL;
}

/* Concurrent opens of one object share one fetch; every byte is
 * transferred once. */

#endif
