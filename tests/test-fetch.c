/*
 * test-fetch: unit tests of the fetch engine (fetch/), run against a real
 * store, a private redis-server (meta-harness.h) and a fake transport
 * backend: no FUSE, no root, and sockets only on loopback (one case).
 *
 * The fake backend plays the holders.  Each holder is a node with a card
 * in Redis and a store of its own; a GET is answered by copying from the
 * holder's store into the fetcher's iovecs, with the failures a test
 * asks for: a holder that goes away after so many bytes, one that no
 * longer has the object, one whose bytes are corrupt, and a gate that
 * holds a range back until the test opens it (to see a reader served
 * before the whole object has arrived).  It registers destinations as
 * RDMA would (transport_region_new()), and every case checks that each
 * fetch fetched into its region only and gave it back while the
 * object's pages were still there.
 *
 * Cases: single flight, streaming, failover mid-range, relocation when
 * every holder fails (and the failure when none is left), retries of a
 * stalled holder (and their bound), a checksum
 * mismatch, eviction that never drops the last copy, the hooks, an
 * object deleted mid-fetch, serving leases (fetch_source.c, driven
 * through its callbacks as the transport's server would, and once over
 * the real TCP transport on loopback), eviction of copies that peers
 * hold leases on or are being sent, and a holder that evicts its copy
 * mid-fetch.
 */
#include "meta-harness.h"

#include <sys/uio.h>

#include "fetch.h"
#include "fetch_i.h"
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
	bool corrupt;	    /* flip the first byte it serves */
	uint64_t gate_off;  /* ranges at or past this offset wait for the gate */
	unsigned stalls;    /* stall (-ETIMEDOUT) on this many GETs at once */
	uint64_t stall_at;  /* stall on each GET once it served this many bytes; 0 never */
	bool gone_on_stall; /* its card goes at its first stall (node released) */
	char instance[64];  /* its card's */
	/* what it did; F.lock */
	uint64_t served; /* bytes copied to the fetcher */
	unsigned gets;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool gate_open; /* lock */
	unsigned gated; /* GETs waiting at the gate; lock */
	struct holder h[NHOLDERS];
	/* hooks */
	unsigned n_failed, n_sealed; /* lock */
	uint64_t busy_id;	     /* lock */
	/* the sealed hook tries to evict everything (while the copy is
	 * sealed but not yet out of the fetch table), and counts bytes freed */
	bool evict_on_seal;	  /* lock */
	uint64_t evicted_on_seal; /* lock */
	/* destinations registered (transport_region_new()) and freed, and
	 * GETs of bytes whose destination no region covered; lock */
	unsigned regions_new, regions_freed, unregistered;
	char root[64];
	unsigned seq;
	unsigned io_timeout_ms; /* the next world's transport's (0: 2000) */
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

static int fake_connect(struct transport *t, const char *addr, struct tconn **ret)
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
		if (corrupt && req->off + done + copied == 0)
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

static void hook_sealed(void *ctx, uint64_t id, char *ret_path, size_t len)
{
	uint64_t freed;
	bool evict;

	pthread_mutex_lock(&F.lock);
	evict = F.evict_on_seal;
	pthread_mutex_unlock(&F.lock);
	/* ctx: the world's fetcher, wherever it is now */
	freed = evict ? fetcher_evict(*(struct fetcher **)ctx, UINT64_MAX) : 0;
	pthread_mutex_lock(&F.lock);
	F.evicted_on_seal += freed;
	F.n_sealed++; /* last: a test that sees it sees the rest */
	pthread_mutex_unlock(&F.lock);
	snprintf(ret_path, len, "/fetched-%" PRIu64, id);
}

static bool hook_busy(void *ctx, uint64_t id)
{
	bool busy;

	pthread_mutex_lock(&F.lock);
	busy = F.busy_id == id;
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

/* ---- one world per case: holders, the local node, its fetcher ---- */

struct world {
	char prefix[32];
	struct meta *m; /* the local node's */
	struct store *s;
	char dir[128];
	struct transport *t;
	struct fetch_source *src; /* the local node's, for its eviction; lease_ms 200 */
	struct fetcher *fr;
};

static struct store *open_store(char *dir, size_t len, const char *name, uint64_t capacity)
{
	struct store_config cfg = {.capacity = capacity};
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

static void world_init(struct world *w, uint64_t local_capacity)
{
	static const char *names[NHOLDERS] = {"holder-a", "holder-b", "holder-c"};
	struct transport_config tc = {.node = "local",
				      .io_timeout_ms = F.io_timeout_ms ? F.io_timeout_ms : 2000};
	struct fetcher_config fc;
	int i, err = 0;

	F.seq++;
	snprintf(w->prefix, sizeof(w->prefix), "t-fetch-%u", F.seq);
	pthread_mutex_lock(&F.lock);
	F.gate_open = true;
	F.n_failed = F.n_sealed = 0;
	F.busy_id = 0;
	F.evict_on_seal = false;
	F.evicted_on_seal = 0;
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
		h->s = open_store(h->dir, sizeof(h->dir), h->node, 16u << 20);
	}
	w->m = mk(w->prefix, "local", 0, 0);
	CHECK_EQ(meta_connect(w->m), 0);
	claim(w->m, "local", NULL, 0);
	w->s = open_store(w->dir, sizeof(w->dir), "local", local_capacity);
	w->t = transport_new_ops(&tc, &fake_ops, &err);
	CHECK(w->t != NULL);
	w->src = fetch_source_new(w->s, 200);
	CHECK(w->src != NULL);
	fc = (struct fetcher_config){
	    .node = "local",
	    .meta = w->m,
	    .store = w->s,
	    .transport = w->t,
	    .source = w->src,
	    .hooks = {.failed = hook_failed,
		      .sealed = hook_sealed,
		      .busy = hook_busy,
		      .ctx = &w->fr},
	    .sync_max = 4096,
	    .workers = 4,
	};
	w->fr = fetcher_new(&fc, &err);
	if (!w->fr) {
		fprintf(stderr, "fetcher_new: %s\n", strerror(-err));
		exit(1);
	}
}

static void world_release(struct world *w)
{
	int i;

	fetcher_free(w->fr);
	fetch_source_free(w->src);
	/* every fetch registered its destination once, fetched into it only,
	 * and gave it back (before the pages: fake_region_free()) */
	CHECK_EQ(locked_read(&F.regions_new), locked_read(&F.regions_freed));
	CHECK_EQ(locked_read(&F.unregistered), 0);
	transport_free(w->t);
	store_close(w->s);
	meta_free(w->m);
	rm_dir(w->dir);
	for (i = 0; i < NHOLDERS; i++) {
		store_close(F.h[i].s);
		meta_free(F.h[i].m);
		rm_dir(F.h[i].dir);
	}
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
	struct meta_obj rec;
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
		CHECK_EQ(store_seal(o, name, 1700000000000000000LL), 0);
		store_obj_csum(o, rec.csum);
		store_obj_unref(o);
	}
	rec.size = size;
	rec.mtime_ns = 1700000000000000000LL;
	snprintf(rec.origin, sizeof(rec.origin), "%s", F.h[first].node);
	CHECK_EQ(meta_publish(F.h[first].m, META_ROOT_ID, name, &rec, false, NULL, NULL), 0);
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
	struct fetch *f = NULL;
	int r;

	r = fetcher_open(w->fr, rec->id, NULL, &f, &o);
	if (r < 0)
		return r;
	fetch_opened(fetch_ref(f));
	r = fetch_wait(f, 0, rec->size);
	fetch_put(f);
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
	struct fetch *f;
	struct store_obj *o;
	int r;
};

static void *open_thread(void *arg)
{
	struct opener *op = arg;

	op->r = fetcher_open(op->w->fr, op->id, NULL, &op->f, &op->o);
	return NULL;
}

/* Concurrent opens of one object share one fetch; every byte is
 * transferred once. */
TEST(single_flight)
{
	struct opener op[4];
	struct world w;
	struct meta_obj rec;
	pthread_t th[4];
	int i;

	world_init(&w, 16u << 20);
	rec = put_object(&w, "sf", 4 * RANGE + 100, 0, 0);
	gate(false);
	F.h[0].gate_off = 0; /* nothing arrives until every open is in */
	for (i = 0; i < 4; i++) {
		op[i] = (struct opener){.w = &w, .id = rec.id};
		CHECK_EQ(pthread_create(&th[i], NULL, open_thread, &op[i]), 0);
	}
	for (i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	wait_gated(1);
	gate(true);
	for (i = 0; i < 4; i++) {
		CHECK_EQ(op[i].r, 0);
		CHECK(op[i].f == op[0].f);
		CHECK(op[i].o == op[0].o);
		CHECK_EQ(fetch_wait(op[i].f, 0, rec.size), 0);
	}
	CHECK(local_copy_ok(&w, &rec));
	CHECK_EQ(F.h[0].served, rec.size);
	CHECK_EQ(F.h[0].gets, 5); /* one GET per range */
	for (i = 0; i < 4; i++) {
		fetch_opened(op[i].f);
		store_obj_unref(op[i].o);
	}
	WAIT_FOR(held_here(&w, rec.id));
	{
		struct fetcher_stats st;

		fetcher_stats(w.fr, &st);
		CHECK_EQ(st.fetches, 1);
		CHECK_EQ(st.done, 1);
		CHECK_EQ(st.bytes, rec.size);
	}
	/* a small object (up to sync_max) is complete when the open returns */
	{
		struct meta_obj small = put_object(&w, "small", 1000, 1, 0);
		struct store_obj *o;
		struct fetch *f;

		CHECK_EQ(fetcher_open(w.fr, small.id, &small, &f, &o), 0);
		CHECK(store_obj_sealed(o));
		fetch_opened(f);
		store_obj_unref(o);
		CHECK(local_copy_ok(&w, &small));
		CHECK(held_here(&w, small.id)); /* fetch_opened() did it */
	}
	WAIT_FOR(locked_read(&F.n_sealed) == 2);
	world_release(&w);
}

/* A reader waits only for its own range: the head of an object is there
 * while its tail is held back. */
TEST(streaming)
{
	struct world w;
	struct meta_obj rec;
	struct store_obj *o;
	struct fetch *f;
	uint64_t done = 0, size = 0;
	uint8_t head[100], want[100];

	world_init(&w, 16u << 20);
	rec = put_object(&w, "stream", 8 * RANGE, 0, 0);
	gate(false);
	F.h[0].gate_off = 2 * RANGE;
	CHECK_EQ(fetcher_open(w.fr, rec.id, NULL, &f, &o), 0);
	CHECK_EQ(fetch_wait(f, 0, sizeof(head)), 0);
	CHECK_EQ(fetch_wait(f, RANGE, RANGE), 0);
	wait_gated(1);
	CHECK_EQ(store_read(o, head, sizeof(head), 0), (long long)sizeof(head));
	fill(want, sizeof(want), rec.id);
	CHECK(!memcmp(head, want, sizeof(head)));
	CHECK_EQ(fetcher_progress(w.fr, rec.id, &done, &size), 0);
	CHECK_EQ(size, rec.size);
	CHECK(done >= 2 * RANGE && done < rec.size);
	CHECK(!store_obj_sealed(o));
	gate(true);
	CHECK_EQ(fetch_wait(f, 0, rec.size), 0);
	CHECK(store_obj_sealed(o));
	fetch_opened(f);
	store_obj_unref(o);
	CHECK(local_copy_ok(&w, &rec));
	WAIT_FOR(fetcher_progress(w.fr, rec.id, &done, &size) == -ENOENT);
	world_release(&w);
}

/* A holder that goes away mid-range: another one continues from the byte
 * where it stopped. */
TEST(failover)
{
	struct fetcher_stats st;
	struct world w;
	struct meta_obj rec;

	world_init(&w, 16u << 20);
	rec = put_object(&w, "fo", 4 * RANGE, 0, 1u << 1);
	F.h[0].fail_after = RANGE / 2;
	CHECK_EQ(fetch_all(&w, &rec), 0);
	CHECK(local_copy_ok(&w, &rec));
	/* each byte came once: ranges resumed, never restarted */
	CHECK_EQ(F.h[0].served + F.h[1].served, rec.size);
	CHECK_EQ(F.h[0].served, RANGE / 2);
	fetcher_stats(w.fr, &st);
	CHECK(st.failovers >= 1);
	CHECK_EQ(st.done, 1);
	world_release(&w);
}

/* Every holder known at the start fails: the holders are located again,
 * and a node that got a copy meanwhile finishes the fetch; when none is
 * left, the fetch fails and leaves nothing behind. */
TEST(relocation)
{
	struct world w;
	struct meta_obj rec;

	world_init(&w, 16u << 20);
	rec = put_object(&w, "reloc", 3 * RANGE, 0, 1u << 2);
	/* holder-c has a copy but is not registered yet */
	CHECK_EQ(meta_del_holder(F.h[2].m, rec.id), 0);
	F.h[0].missing = true;
	/* registered only after the fetch has located the holders once */
	gate(false);
	F.h[0].gate_off = 0;
	{
		struct opener op = {.w = &w, .id = rec.id};
		pthread_t th;

		CHECK_EQ(pthread_create(&th, NULL, open_thread, &op), 0);
		pthread_join(th, NULL);
		CHECK_EQ(op.r, 0);
		wait_gated(1);
		CHECK_EQ(meta_add_holder(F.h[2].m, rec.id), 0);
		gate(true);
		CHECK_EQ(fetch_wait(op.f, 0, rec.size), 0);
		fetch_opened(op.f);
		store_obj_unref(op.o);
	}
	CHECK(local_copy_ok(&w, &rec));
	CHECK_EQ(F.h[2].served, rec.size);

	/* nobody has it any more */
	rec = put_object(&w, "gone", 3 * RANGE, 1, 0);
	F.h[1].missing = true;
	CHECK_EQ(fetch_all(&w, &rec), -EIO);
	WAIT_FOR(locked_read(&F.n_failed) == 1); /* readers may have had bytes: said so */
	CHECK(store_lookup(w.s, rec.id) == NULL);
	CHECK(!held_here(&w, rec.id));
	/* a later open starts afresh, and succeeds once a holder is back */
	F.h[1].missing = false;
	CHECK_EQ(fetch_all(&w, &rec), 0);
	CHECK(local_copy_ok(&w, &rec));
	world_release(&w);
}

/* The only holder left stalls (moves no byte for io_timeout) while its
 * card is live: it is asked again on a fresh connection, after a
 * backoff, up to FETCH_STALL_RETRIES times in a row without a byte
 * arriving; bytes arriving start the count again; with another holder
 * left, that one takes over; a holder whose card is gone is not asked
 * again. */
TEST(stalled_holder)
{
	struct holder *h0 = &F.h[0], *h1 = &F.h[1];
	struct world w;
	struct meta_obj rec;
	unsigned gets;

	F.io_timeout_ms = 40; /* backoffs of 10, 20, 40 ms */
	world_init(&w, 16u << 20);
	F.io_timeout_ms = 0;

	/* stalls as often as it is retried, then serves */
	rec = put_object(&w, "st-retried", RANGE, 0, 0);
	h0->stalls = FETCH_STALL_RETRIES;
	CHECK_EQ(fetch_all(&w, &rec), 0);
	CHECK(local_copy_ok(&w, &rec));
	CHECK_EQ(h0->gets, FETCH_STALL_RETRIES + 1);

	/* one stall more: the fetch fails, and it was asked no more */
	rec = put_object(&w, "st-spent", RANGE, 0, 0);
	gets = h0->gets;
	h0->stalls = FETCH_STALL_RETRIES + 1;
	CHECK_EQ(fetch_all(&w, &rec), -EIO);
	CHECK_EQ(h0->gets - gets, FETCH_STALL_RETRIES + 1);
	WAIT_FOR(locked_read(&F.n_failed) == 1);
	CHECK(store_lookup(w.s, rec.id) == NULL);
	CHECK_EQ(h0->stalls, 0);

	/* a stall after each eighth of the range: bytes arrive in between,
	 * so the retries never run out; each byte comes once */
	rec = put_object(&w, "st-slow", RANGE, 0, 0);
	gets = h0->gets;
	h0->served = 0;
	h0->stall_at = RANGE / 8;
	CHECK_EQ(fetch_all(&w, &rec), 0);
	CHECK(local_copy_ok(&w, &rec));
	CHECK_EQ(h0->gets - gets, 8);
	CHECK_EQ(h0->served, RANGE);
	h0->stall_at = 0;

	/* another holder is left: it takes over, nobody waits for a retry */
	rec = put_object(&w, "st-other", RANGE, 0, 1u << 1);
	gets = h0->gets;
	h0->stalls = 1;
	h1->served = 0;
	CHECK_EQ(fetch_all(&w, &rec), 0);
	CHECK(local_copy_ok(&w, &rec));
	CHECK(h0->gets - gets <= 1);
	CHECK_EQ(h1->served, RANGE);
	h0->stalls = 0;

	/* its card goes at its first stall: given up at once */
	rec = put_object(&w, "st-gone", RANGE, 0, 0);
	gets = h0->gets;
	h0->stalls = FETCH_STALL_RETRIES + 1;
	h0->gone_on_stall = true;
	CHECK_EQ(fetch_all(&w, &rec), -EIO);
	CHECK_EQ(h0->gets - gets, 1);
	WAIT_FOR(locked_read(&F.n_failed) == 2);
	world_release(&w);
}

/* Bytes that do not match the record's checksum are never kept, and this
 * node never says it holds them. */
TEST(checksum_mismatch)
{
	struct fetcher_stats st;
	struct world w;
	struct meta_obj rec, small;

	world_init(&w, 16u << 20);
	rec = put_object(&w, "bad", 2 * RANGE, 0, 0);
	small = put_object(&w, "bad-small", 2000, 0, 0);
	F.h[0].corrupt = true;
	CHECK_EQ(fetch_all(&w, &rec), -EIO);
	WAIT_FOR(locked_read(&F.n_failed) == 1);
	CHECK(store_lookup(w.s, rec.id) == NULL);
	CHECK(!held_here(&w, rec.id));
	/* small: the open itself fails */
	{
		struct store_obj *o = NULL;
		struct fetch *f = NULL;

		CHECK_EQ(fetcher_open(w.fr, small.id, NULL, &f, &o), -EIO);
		CHECK(store_lookup(w.s, small.id) == NULL);
	}
	fetcher_stats(w.fr, &st);
	CHECK_EQ(st.csum_failures, 2);
	CHECK_EQ(st.done, 0);
	CHECK_EQ(F.n_sealed, 0);
	world_release(&w);
}

/* Eviction gives up copies that live elsewhere too, least recently used
 * first, and never the last copy nor one in use. */
TEST(eviction)
{
	struct fetcher_stats st;
	struct world w;
	struct meta_obj a, b, mine;
	struct store_obj *o;

	world_init(&w, 2u << 20);
	a = put_object(&w, "ev-a", 512 * 1024, 0, 0);
	b = put_object(&w, "ev-b", 512 * 1024, 0, 0);
	CHECK_EQ(fetch_all(&w, &a), 0);
	CHECK_EQ(fetch_all(&w, &b), 0);
	CHECK(held_here(&w, a.id) && held_here(&w, b.id));
	mine = put_local_object(&w, "mine", 512 * 1024); /* only this node has it */
	fetcher_touch(w.fr, mine.id);
	fetcher_touch(w.fr, a.id); /* b is now the least recently used */

	/* b is in use above: a goes first */
	pthread_mutex_lock(&F.lock);
	F.busy_id = b.id;
	pthread_mutex_unlock(&F.lock);
	CHECK_EQ(fetcher_evict(w.fr, 512 * 1024), 0); /* free already */
	CHECK_EQ(fetcher_evict(w.fr, 1024 * 1024), 512 * 1024);
	CHECK(store_lookup(w.s, a.id) == NULL);
	CHECK(!held_here(&w, a.id));
	CHECK(local_copy_ok(&w, &b));
	/* whatever is asked, the last copy stays */
	pthread_mutex_lock(&F.lock);
	F.busy_id = 0;
	pthread_mutex_unlock(&F.lock);
	CHECK_EQ(fetcher_evict(w.fr, 1536 * 1024), 512 * 1024);
	CHECK(store_lookup(w.s, b.id) == NULL);
	o = store_lookup(w.s, mine.id);
	CHECK(o != NULL);
	store_obj_unref(o);
	CHECK(held_here(&w, mine.id));
	CHECK_EQ(fetcher_evict(w.fr, 2u << 20), 0);
	fetcher_stats(w.fr, &st);
	CHECK_EQ(st.evictions, 2);

	/* a copy sealed but not yet registered is not evicted (the hook
	 * runs in that window, and nobody has the object open) */
	{
		struct meta_obj d = put_object(&w, "ev-d", 512 * 1024, 0, 0);

		pthread_mutex_lock(&F.lock);
		F.evict_on_seal = true;
		pthread_mutex_unlock(&F.lock);
		CHECK_EQ(fetch_all(&w, &d), 0);
		WAIT_FOR(locked_read(&F.n_sealed) >= 3);
		pthread_mutex_lock(&F.lock);
		F.evict_on_seal = false;
		CHECK_EQ(F.evicted_on_seal, 0);
		pthread_mutex_unlock(&F.lock);
		CHECK(local_copy_ok(&w, &d));
		CHECK_EQ(fetcher_evict(w.fr, 1536 * 1024), 512 * 1024); /* registered: may go */
		CHECK(store_lookup(w.s, d.id) == NULL);
	}

	/* a fetch that needs room makes it */
	{
		struct meta_obj big = put_object(&w, "ev-big", 1536 * 1024, 1, 0);
		struct meta_obj c = put_object(&w, "ev-c", 512 * 1024, 0, 0);

		CHECK_EQ(fetch_all(&w, &c), 0);
		CHECK_EQ(fetch_all(&w, &big), 0);
		CHECK(local_copy_ok(&w, &big));
		CHECK(store_lookup(w.s, c.id) == NULL);
		CHECK(held_here(&w, mine.id));
	}
	world_release(&w);
}

/* Eviction happens only when it can make the object fit: an object
 * bigger than the store, or than what eviction could free, fails at once
 * and every replica stays. */
TEST(evict_only_if_it_helps)
{
	struct fetcher_stats st;
	struct world w;
	struct meta_obj a, b, mine, huge, big, fits;

	world_init(&w, 2u << 20);
	a = put_object(&w, "h-a", 512 * 1024, 0, 0);
	b = put_object(&w, "h-b", 512 * 1024, 0, 0);
	CHECK_EQ(fetch_all(&w, &a), 0);
	CHECK_EQ(fetch_all(&w, &b), 0);
	mine = put_local_object(&w, "h-mine", 512 * 1024); /* never evicted */

	/* bigger than the whole store */
	huge = put_object(&w, "h-huge", 3u << 20, 1, 0);
	CHECK_EQ(fetch_all(&w, &huge), -EFBIG);
	/* fits the store, but not even with every replica gone: 512 KiB
	 * free + 1 MiB of replicas < 1.75 MiB */
	big = put_object(&w, "h-big", 1792 * 1024, 1, 0);
	CHECK_EQ(fetch_all(&w, &big), -ENOSPC);
	CHECK(store_lookup(w.s, big.id) == NULL);
	CHECK_EQ(fetcher_evict(w.fr, 1792 * 1024), 0);
	fetcher_stats(w.fr, &st);
	CHECK_EQ(st.evictions, 0);
	CHECK(local_copy_ok(&w, &a));
	CHECK(local_copy_ok(&w, &b));
	CHECK(held_here(&w, a.id) && held_here(&w, b.id));
	/* one that eviction can make room for */
	fits = put_object(&w, "h-fits", 1280 * 1024, 1, 0);
	CHECK_EQ(fetch_all(&w, &fits), 0);
	CHECK(local_copy_ok(&w, &fits));
	fetcher_stats(w.fr, &st);
	CHECK_EQ(st.evictions, 2);
	CHECK(held_here(&w, mine.id));
	world_release(&w);
}

/* Does the local store have @id (linked)? */
static bool in_store(struct world *w, uint64_t id)
{
	struct store_obj *o = store_lookup(w->s, id);

	store_obj_unref(o);
	return o != NULL;
}

/* An object deleted while it is fetched here: the reader gets every
 * byte, and the copy goes with the reader (no holder entry, no record,
 * nothing a later lookup finds). */
TEST(deleted_while_fetched)
{
	struct world w;
	struct meta_obj rec;
	struct store_obj *o;
	struct fetch *f;
	uint64_t id = 0;
	uint8_t *want, *got;

	world_init(&w, 16u << 20);
	rec = put_object(&w, "del", 8 * RANGE, 0, 0);
	gate(false);
	F.h[0].gate_off = 2 * RANGE;
	CHECK_EQ(fetcher_open(w.fr, rec.id, NULL, &f, &o), 0);
	fetch_opened(fetch_ref(f));
	wait_gated(1);
	CHECK_EQ(meta_unlink(F.h[0].m, META_ROOT_ID, "del", &id), 0);
	CHECK_EQ(id, rec.id);
	gate(true); /* the holder still serves what was asked before */
	CHECK_EQ(fetch_wait(f, 0, rec.size), 0);
	WAIT_FOR(!in_store(&w, rec.id));
	CHECK(!held_here(&w, rec.id));
	CHECK_EQ(locked_read(&F.n_sealed), 0);
	want = malloc(rec.size);
	got = malloc(rec.size);
	fill(want, rec.size, rec.id);
	CHECK_EQ(store_read(o, got, rec.size, 0), (long long)rec.size);
	CHECK(!memcmp(want, got, rec.size));
	{
		struct store_stats ss;

		store_stats(w.s, &ss);
		CHECK_EQ(ss.draining, rec.size);
		fetch_put(f);
		store_obj_unref(o);
		store_stats(w.s, &ss);
		CHECK_EQ(ss.draining, 0);
		CHECK_EQ(ss.used, 0);
	}
	free(want);
	free(got);
	world_release(&w);
}

/* Open (and read through) object @id for @peer on @ts, then close it
 * unless @ret_token is given.  The result of open(). */
static int serve_one(const struct transport_source *ts, const char *peer, uint64_t id,
		     uint64_t size, void **ret_token)
{
	struct iovec iov[4];
	uint64_t got_size = 0;
	size_t bytes = 0;
	uint8_t want[64];
	void *tok;
	int r, n;

	r = ts->open(ts->ctx, peer, id, &got_size, &tok);
	if (r < 0)
		return r;
	CHECK_EQ(got_size, size);
	n = ts->iov(tok, 0, sizeof(want), iov, 4, &bytes);
	CHECK(n >= 1 && bytes == sizeof(want));
	fill(want, sizeof(want), id);
	CHECK(n >= 1 && iov[0].iov_len >= sizeof(want) && !memcmp(iov[0].iov_base, want, 64));
	if (ret_token)
		*ret_token = tok;
	else
		ts->close(tok);
	return 0;
}

static unsigned src_drops;

static void src_drop(void *reg)
{
	src_drops++;
}

/*
 * Serving leases (fetch_source.c): a peer that fetched from an object
 * before it was unlinked here is still served it, nobody else is, and
 * the pages go once the lease lapses.
 */
TEST(serving_leases)
{
	struct transport_source ts;
	struct fetch_source *src;
	struct store_stats ss;
	struct world w;
	struct meta_obj a, b;
	void *tok;

	world_init(&w, 4u << 20);
	a = put_object(&w, "lease-a", 512 * 1024, 0, 0);
	b = put_object(&w, "lease-b", 512 * 1024, 0, 0);
	CHECK_EQ(fetch_all(&w, &a), 0);
	CHECK_EQ(fetch_all(&w, &b), 0);
	src = w.src;
	fetch_source_init(&ts, src);

	CHECK_EQ(serve_one(&ts, "peer-1", a.id, a.size, NULL), 0);
	CHECK_EQ(serve_one(&ts, "peer-1", b.id, b.size, NULL), 0);
	CHECK_EQ(serve_one(&ts, "peer-1", 999999, 0, NULL), -ENOENT);
	CHECK_EQ(fetch_source_leases(src), 2);
	CHECK(local_copy_ok(&w, &a));

	/* a is deleted here: peer-1 goes on, peer-2 never started */
	CHECK_EQ(store_unlink_id(w.s, a.id), 0);
	store_stats(w.s, &ss);
	CHECK_EQ(ss.draining, a.size);
	CHECK_EQ(serve_one(&ts, "peer-1", a.id, a.size, &tok), 0);
	CHECK_EQ(serve_one(&ts, "peer-2", a.id, a.size, NULL), -ENOENT);
	CHECK_EQ(fetch_source_leases(src), 2);
	/* what a backend that registers objects once (RDMA) sees of it: the
	 * whole object, and a slot dropped when its last holder lets go */
	{
		void *addr = NULL, *cur = &cur;
		uint64_t len = 0;
		int mfd = -1;
		static int reg1, reg2;

		CHECK_EQ(ts.map(tok, &addr, &len, &mfd), 0);
		CHECK(mfd >= 0);
		CHECK(addr != NULL);
		CHECK_EQ(len, a.size);
		CHECK_EQ(ts.attach(tok, NULL, NULL, &cur), 0);
		CHECK(cur == NULL);
		CHECK_EQ(ts.attach(tok, &reg1, src_drop, &cur), 0);
		CHECK_EQ(ts.attach(tok, &reg2, src_drop, &cur), -EEXIST);
		CHECK(cur == &reg1);
		src_drops = 0;
	}

	/* a lease does not lapse during a GET, only lease_ms after it */
	usleep(300 * 1000);
	CHECK_EQ(fetch_source_expire(src), 1); /* b's */
	ts.close(tok);
	CHECK_EQ(fetch_source_expire(src), 0);
	CHECK_EQ(serve_one(&ts, "peer-1", a.id, a.size, NULL), 0);
	store_stats(w.s, &ss);
	CHECK_EQ(ss.draining, a.size);
	usleep(300 * 1000);
	/* lapsed: no GET finds it any more, even before the sweep */
	CHECK_EQ(src_drops, 0);
	CHECK_EQ(serve_one(&ts, "peer-1", a.id, a.size, NULL), -ENOENT);
	CHECK_EQ(fetch_source_leases(src), 0);
	CHECK_EQ(src_drops, 1); /* with the object */
	store_stats(w.s, &ss);
	CHECK_EQ(ss.draining, 0);
	CHECK_EQ(ss.used, b.size);

	CHECK_EQ(fetcher_evict(w.fr, 4u << 20), b.size);
	fetch_source_free(NULL);
	world_release(&w);
}

/* GET @id (@size bytes) from @addr as node @node over TCP.  Its result. */
static int tcp_get(const char *node, const char *addr, uint64_t id, uint64_t size)
{
	struct transport_config cfg = {.node = node, .io_timeout_ms = 2000};
	struct transport *c = transport_new(&cfg, NULL);
	uint8_t *buf = malloc(size), *want = malloc(size);
	struct iovec iov = {.iov_base = buf, .iov_len = size};
	struct transport_req req = {
	    .peer = "srv", .addr = addr, .id = id, .len = size, .iov = &iov, .iovcnt = 1};
	int r;

	CHECK(c && buf && want);
	r = transport_fetch(c, &req);
	fill(want, size, id);
	if (r == 0)
		CHECK(!memcmp(buf, want, size));
	transport_free(c);
	free(buf);
	free(want);
	return r;
}

/* The same over the TCP transport: the lease is the peer's, by the name it
 * gave in the handshake. */
TEST(serving_leases_tcp)
{
	struct transport_config cfg = {
	    .node = "srv", .listen_host = "127.0.0.1", .io_timeout_ms = 2000};
	struct transport_source ts;
	struct fetch_source *src;
	struct transport *t;
	struct store_obj *o;
	struct store *s;
	char dir[128], addr[64];
	uint8_t *buf = malloc(RANGE);

	F.seq++;
	s = open_store(dir, sizeof(dir), "srv", 4u << 20);
	o = store_create(s, 42, NULL);
	fill(buf, RANGE, 42);
	CHECK(o && store_write(o, buf, RANGE, 0) == 0 && store_seal(o, "/x", 1) == 0);
	store_obj_unref(o);
	src = fetch_source_new(s, 60000);
	fetch_source_init(&ts, src);
	t = transport_new(&cfg, NULL);
	CHECK(t && transport_serve(t, &ts) == 0 && transport_addr(t, addr, sizeof(addr)) == 0);

	CHECK_EQ(tcp_get("peer-1", addr, 42, RANGE), 0);
	CHECK_EQ(fetch_source_leases(src), 1);
	CHECK_EQ(store_unlink_id(s, 42), 0);
	CHECK_EQ(tcp_get("peer-2", addr, 42, RANGE), -ENOENT);
	CHECK_EQ(tcp_get("peer-1", addr, 42, RANGE), 0); /* a new connection, too */
	/* evicted rather than deleted: the lease is taken back, and the peer
	 * is told that the object is not here (it fails over) */
	fetch_source_revoke(src, 42);
	CHECK_EQ(tcp_get("peer-1", addr, 42, RANGE), -ENOENT);
	/* at once, or when the server is done with the last GET */
	WAIT_FOR(fetch_source_leases(src) == 0);
	transport_free(t);
	fetch_source_free(src);
	{
		struct store_stats ss;

		store_stats(s, &ss);
		CHECK_EQ(ss.used, 0);
	}
	store_close(s);
	rm_dir(dir);
	free(buf);
}

/* A GET in flight of an object being evicted (evict_leased). */
struct closer {
	struct world *w;
	const struct transport_source *ts;
	void *tok;
	uint64_t id;
	bool bytes_ok;	       /* it still read the object's own bytes once unlinked */
	unsigned drops_before; /* registrations dropped before it ended */
};

/* Wait until @cl->id is evicted here, read through the GET in flight,
 * then end it. */
static void *close_thread(void *arg)
{
	struct closer *cl = arg;
	struct iovec iov[4];
	uint8_t want[64];
	size_t bytes = 0;
	int n;

	WAIT_FOR(!in_store(cl->w, cl->id));
	fill(want, sizeof(want), cl->id);
	n = cl->ts->iov(cl->tok, 0, sizeof(want), iov, 4, &bytes);
	cl->bytes_ok = n >= 1 && bytes == sizeof(want) && iov[0].iov_len >= sizeof(want) &&
		       !memcmp(iov[0].iov_base, want, sizeof(want));
	cl->drops_before = src_drops;
	cl->ts->close(cl->tok);
	return NULL;
}

/*
 * A peer's serving lease does not keep a copy from eviction (issue 19):
 * an idle lease is taken back with the copy, whose pages go at once,
 * and the peer's next GET gets -ENOENT (it fails over: the next case).
 * A copy being sent goes only after the idle ones; then its pages, and
 * the registration that reaches them (RDMA), stay until the GET in
 * flight ends, which eviction waits for.
 */
TEST(evict_leased)
{
	struct transport_source ts;
	struct store_stats ss;
	struct closer cl;
	struct world w;
	struct meta_obj a, b, c, mine;
	void *tok, *cur = NULL;
	static int reg;
	pthread_t th;

	world_init(&w, 2u << 20);
	a = put_object(&w, "el-a", 512 * 1024, 0, 0);
	b = put_object(&w, "el-b", 512 * 1024, 0, 0);
	CHECK_EQ(fetch_all(&w, &a), 0);
	CHECK_EQ(fetch_all(&w, &b), 0);
	mine = put_local_object(&w, "el-mine", 512 * 1024); /* the last copy */
	fetch_source_init(&ts, w.src);

	/* idle leases: a, the least recently used copy, goes at once */
	CHECK_EQ(serve_one(&ts, "peer-1", a.id, a.size, NULL), 0);
	CHECK_EQ(serve_one(&ts, "peer-1", b.id, b.size, NULL), 0);
	CHECK_EQ(fetch_source_leases(w.src), 2);
	CHECK_EQ(fetcher_evict(w.fr, 1024 * 1024), a.size);
	CHECK(!in_store(&w, a.id));
	CHECK(!held_here(&w, a.id));
	store_stats(w.s, &ss);
	CHECK_EQ(ss.used, b.size + mine.size);
	CHECK_EQ(ss.draining, 0);
	CHECK_EQ(fetch_source_leases(w.src), 1);
	CHECK_EQ(serve_one(&ts, "peer-1", a.id, a.size, NULL), -ENOENT);

	/* b is being sent to peer-2, c is idle: c goes */
	c = put_object(&w, "el-c", 512 * 1024, 0, 0);
	CHECK_EQ(fetch_all(&w, &c), 0);
	CHECK_EQ(serve_one(&ts, "peer-2", b.id, b.size, &tok), 0);
	CHECK_EQ(ts.attach(tok, &reg, src_drop, &cur), 0);
	src_drops = 0;
	CHECK_EQ(fetcher_evict(w.fr, 1024 * 1024), c.size);
	CHECK(!in_store(&w, c.id));
	CHECK(local_copy_ok(&w, &b));

	/* only b can make room now: it goes, and eviction waits for its GET */
	cl = (struct closer){.w = &w, .ts = &ts, .tok = tok, .id = b.id};
	CHECK_EQ(pthread_create(&th, NULL, close_thread, &cl), 0);
	CHECK_EQ(fetcher_evict(w.fr, 1536 * 1024), b.size);
	pthread_join(th, NULL);
	CHECK(cl.bytes_ok);
	CHECK_EQ(cl.drops_before, 0);
	WAIT_FOR(src_drops == 1);
	store_stats(w.s, &ss);
	CHECK_EQ(ss.used, mine.size);
	CHECK_EQ(ss.draining, 0);
	CHECK_EQ(fetch_source_leases(w.src), 0);
	CHECK_EQ(serve_one(&ts, "peer-2", b.id, b.size, NULL), -ENOENT);
	CHECK(in_store(&w, mine.id));
	CHECK(held_here(&w, mine.id));
	world_release(&w);
}

/*
 * A holder evicts its copy while this node fetches from it: it answers
 * "not here" (-ENOENT, as its source does once the lease is taken back:
 * evict_leased, serving_leases_tcp), and the fetch goes on from the
 * holder that Redis let it evict for, from the byte where it stopped.
 */
TEST(holder_evicts_mid_fetch)
{
	struct fetcher_stats st;
	struct opener op;
	struct world w;
	struct meta_obj rec;
	pthread_t th;

	world_init(&w, 16u << 20);
	rec = put_object(&w, "hemf", 3 * RANGE, 0, 1u << 1);
	/* holder-a alone at first: it serves the first range */
	CHECK_EQ(meta_del_holder(F.h[1].m, rec.id), 0);
	gate(false);
	F.h[0].gate_off = RANGE;
	op = (struct opener){.w = &w, .id = rec.id};
	CHECK_EQ(pthread_create(&th, NULL, open_thread, &op), 0);
	pthread_join(th, NULL);
	CHECK_EQ(op.r, 0);
	wait_gated(1);
	CHECK_EQ(locked_read(&F.h[0].gets), 2);
	/* holder-b holds it now, and holder-a evicts its copy */
	CHECK_EQ(meta_add_holder(F.h[1].m, rec.id), 0);
	CHECK_EQ(meta_release_replica(F.h[0].m, rec.id), 1);
	pthread_mutex_lock(&F.lock);
	F.h[0].missing = true;
	pthread_mutex_unlock(&F.lock);
	gate(true);
	CHECK_EQ(fetch_wait(op.f, 0, rec.size), 0);
	fetch_opened(op.f);
	store_obj_unref(op.o);
	CHECK(local_copy_ok(&w, &rec));
	CHECK_EQ(F.h[0].served, RANGE);
	CHECK_EQ(F.h[1].served, rec.size - RANGE);
	fetcher_stats(w.fr, &st);
	CHECK(st.failovers >= 1);
	CHECK_EQ(locked_read(&F.n_failed), 0);
	WAIT_FOR(held_here(&w, rec.id));
	world_release(&w);
}

struct reader {
	struct world *w;
	const struct meta_obj *rec;
	int r;
	bool done; /* F.lock */
};

static void *read_thread(void *arg)
{
	struct reader *rd = arg;
	int r = fetch_all(rd->w, rd->rec);

	pthread_mutex_lock(&F.lock);
	rd->r = r;
	rd->done = true;
	pthread_mutex_unlock(&F.lock);
	return NULL;
}

static bool reader_done(struct reader *rd)
{
	bool done;

	pthread_mutex_lock(&F.lock);
	done = rd->done;
	pthread_mutex_unlock(&F.lock);
	return done;
}

/* An object small enough for the opening thread but bigger than the
 * backend's range is still fetched whole (sync_max is capped at the
 * range size), and a fetcher refuses new fetches once stopped. */
TEST(sync_max_above_range)
{
	struct fetcher_config fc;
	struct fetcher *small_range;
	struct world w;
	struct meta_obj rec;
	struct reader rd;
	pthread_t th;
	int err = 0;

	world_init(&w, 16u << 20);
	rec = put_object(&w, "sync-big", 3 * RANGE + 10, 0, 0);
	fc = (struct fetcher_config){
	    .node = "local", .meta = w.m, .store = w.s, .transport = w.t, .sync_max = 1u << 20};
	small_range = fetcher_new(&fc, &err);
	CHECK(small_range != NULL);
	fetcher_free(w.fr);
	w.fr = small_range;
	rd = (struct reader){.w = &w, .rec = &rec};
	CHECK_EQ(pthread_create(&th, NULL, read_thread, &rd), 0);
	WAIT_FOR(reader_done(&rd));
	fetcher_stop(w.fr); /* a stuck fetch fails, and its reader returns */
	pthread_join(th, NULL);
	CHECK_EQ(rd.r, 0);
	CHECK(local_copy_ok(&w, &rec));
	/* stopped: no new fetch */
	rec = put_object(&w, "after-stop", 100, 0, 0);
	CHECK_EQ(fetch_all(&w, &rec), -EIO);
	CHECK(store_lookup(w.s, rec.id) == NULL);
	world_release(&w);
}

/* A fetcher without a transport fails fetches at once, cleanly. */
TEST(no_transport)
{
	struct fetcher_config fc;
	struct store_obj *o = NULL;
	struct fetcher *fr;
	struct fetch *f = NULL;
	struct world w;
	struct meta_obj rec;
	int err = 0;

	world_init(&w, 16u << 20);
	rec = put_object(&w, "nt", 1000, 0, 0);
	fc = (struct fetcher_config){.node = "local", .meta = w.m, .store = w.s};
	fr = fetcher_new(&fc, &err);
	CHECK(fr != NULL);
	CHECK_EQ(fetcher_open(fr, rec.id, NULL, &f, &o), -EIO);
	CHECK(store_lookup(w.s, rec.id) == NULL);
	fetcher_free(fr);
	fc.meta = NULL;
	CHECK(fetcher_new(&fc, &err) == NULL);
	CHECK_EQ(err, -EINVAL);
	world_release(&w);
}

int main(void)
{
	harness_begin("fetch");
	snprintf(F.root, sizeof(F.root), "/dev/shm/objfs-test-fetch-XXXXXX");
	if (!mkdtemp(F.root)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(single_flight);
	RUN(streaming);
	RUN(failover);
	RUN(relocation);
	RUN(stalled_holder);
	RUN(checksum_mismatch);
	RUN(eviction);
	RUN(evict_only_if_it_helps);
	RUN(deleted_while_fetched);
	RUN(serving_leases);
	RUN(serving_leases_tcp);
	RUN(evict_leased);
	RUN(holder_evicts_mid_fetch);
	RUN(sync_max_above_range);
	RUN(no_transport);
	rm_dir(F.root);
	return harness_end();
}
