/*
 * test-node-evict: unit tests of eviction and serving (node/node_evict.c,
 * node/node_source.c), with the harness of test-node.c
 * (node-harness.h): eviction that never drops the last copy and gives
 * nothing up for nothing, an object deleted mid-fetch, serving leases
 * (driven through the source's callbacks as the transport's server would,
 * and once over the real TCP transport on loopback), eviction of copies
 * that peers hold leases on or are being sent, and a holder that evicts
 * its copy mid-fetch.
 */
#include "node-harness.h"

TEST(eviction)
{
	struct node_stats st;
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
	node_touch(w.nd, mine.id);
	node_touch(w.nd, a.id); /* b is now the least recently used */

	/* b is in use above: a goes first */
	pthread_mutex_lock(&F.lock);
	F.busy_id = b.id;
	pthread_mutex_unlock(&F.lock);
	CHECK_EQ(node_evict(w.nd, 512 * 1024), 0); /* free already */
	CHECK_EQ(node_evict(w.nd, 1024 * 1024), 512 * 1024);
	CHECK(store_lookup(w.s, a.id) == NULL);
	CHECK(!held_here(&w, a.id));
	CHECK(local_copy_ok(&w, &b));
	/* whatever is asked, the last copy stays */
	pthread_mutex_lock(&F.lock);
	F.busy_id = 0;
	pthread_mutex_unlock(&F.lock);
	CHECK_EQ(node_evict(w.nd, 1536 * 1024), 512 * 1024);
	CHECK(store_lookup(w.s, b.id) == NULL);
	o = store_lookup(w.s, mine.id);
	CHECK(o != NULL);
	store_obj_unref(o);
	CHECK(held_here(&w, mine.id));
	CHECK_EQ(node_evict(w.nd, 2u << 20), 0);
	node_stats(w.nd, &st);
	CHECK_EQ(st.evictions, 2);

	/* a copy being fetched is not evicted, though giving it up would
	 * make the room: the fetch holds it until its copy is registered */
	{
		struct meta_obj d = put_object(&w, "ev-d", 512 * 1024, 0, 0);
		struct node_fetch *f = NULL;

		o = NULL;
		gate(false);
		F.h[0].gate_off = 4 * RANGE;
		CHECK_EQ(node_fetch_open(w.nd, d.id, NULL, 0, NULL, &f, &o), 0);
		node_fetch_opened(node_fetch_ref(f));
		wait_gated(1);
		CHECK_EQ(node_evict(w.nd, 1536 * 1024), 0);
		CHECK(in_store(&w, d.id));
		gate(true);
		CHECK_EQ(node_fetch_wait(f, 0, d.size), 0);
		node_fetch_put(f);
		store_obj_unref(o);
		WAIT_FOR(held_here(&w, d.id));
		WAIT_FOR(copy_let_go(&w, d.id));
		CHECK(local_copy_ok(&w, &d));
		CHECK_EQ(node_evict(w.nd, 1536 * 1024), 512 * 1024); /* registered: may go */
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
	struct node_stats st;
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
	CHECK_EQ(node_evict(w.nd, 1792 * 1024), 0);
	node_stats(w.nd, &st);
	CHECK_EQ(st.evictions, 0);
	CHECK(local_copy_ok(&w, &a));
	CHECK(local_copy_ok(&w, &b));
	CHECK(held_here(&w, a.id) && held_here(&w, b.id));
	/* one that eviction can make room for */
	fits = put_object(&w, "h-fits", 1280 * 1024, 1, 0);
	CHECK_EQ(fetch_all(&w, &fits), 0);
	CHECK(local_copy_ok(&w, &fits));
	node_stats(w.nd, &st);
	CHECK_EQ(st.evictions, 2);
	CHECK(held_here(&w, mine.id));
	world_release(&w);
}

/* An object deleted while it is fetched here: the reader gets every
 * byte, and the copy goes with the reader (no holder entry, no record,
 * nothing a later lookup finds). */
TEST(deleted_while_fetched)
{
	struct world w;
	struct meta_obj rec;
	struct store_obj *o;
	struct node_fetch *f;
	uint64_t id = 0;
	uint8_t *want, *got;

	world_init(&w, 16u << 20);
	rec = put_object(&w, "del", 8 * RANGE, 0, 0);
	gate(false);
	F.h[0].gate_off = 2 * RANGE;
	CHECK_EQ(node_fetch_open(w.nd, rec.id, NULL, 0, NULL, &f, &o), 0);
	node_fetch_opened(node_fetch_ref(f));
	wait_gated(1);
	CHECK_EQ(meta_unlink(F.h[0].m, META_ROOT_ID, "del", &id), 0);
	CHECK_EQ(id, rec.id);
	gate(true); /* the holder still serves what was asked before */
	CHECK_EQ(node_fetch_wait(f, 0, rec.size), 0);
	WAIT_FOR(!in_store(&w, rec.id));
	CHECK(!held_here(&w, rec.id));
	want = malloc(rec.size);
	got = malloc(rec.size);
	fill(want, rec.size, rec.id);
	CHECK_EQ(store_read(o, got, rec.size, 0), (long long)rec.size);
	CHECK(!memcmp(want, got, rec.size));
	{
		struct store_stats ss;

		store_stats(w.s, &ss);
		CHECK_EQ(ss.draining, rec.size);
		node_fetch_put(f);
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
 * Serving leases (node_source.c): a peer that fetched from an object
 * before it was unlinked here is still served it, nobody else is, and
 * the pages go once the lease lapses.
 */
TEST(serving_leases)
{
	struct transport_source ts;
	struct node_source *src;
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
	node_source_init(&ts, src);

	CHECK_EQ(serve_one(&ts, "peer-1", a.id, a.size, NULL), 0);
	CHECK_EQ(serve_one(&ts, "peer-1", b.id, b.size, NULL), 0);
	CHECK_EQ(serve_one(&ts, "peer-1", 999999, 0, NULL), -ENOENT);
	CHECK_EQ(node_source_leases(src), 2);
	CHECK(local_copy_ok(&w, &a));

	/* a is deleted here: peer-1 goes on, peer-2 never started */
	CHECK_EQ(store_unlink_id(w.s, a.id), 0);
	store_stats(w.s, &ss);
	CHECK_EQ(ss.draining, a.size);
	CHECK_EQ(serve_one(&ts, "peer-1", a.id, a.size, &tok), 0);
	CHECK_EQ(serve_one(&ts, "peer-2", a.id, a.size, NULL), -ENOENT);
	CHECK_EQ(node_source_leases(src), 2);
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
	CHECK_EQ(node_source_expire(src), 1); /* b's */
	ts.close(tok);
	CHECK_EQ(node_source_expire(src), 0);
	CHECK_EQ(serve_one(&ts, "peer-1", a.id, a.size, NULL), 0);
	store_stats(w.s, &ss);
	CHECK_EQ(ss.draining, a.size);
	usleep(300 * 1000);
	/* lapsed: no GET finds it any more, even before the sweep */
	CHECK_EQ(src_drops, 0);
	CHECK_EQ(serve_one(&ts, "peer-1", a.id, a.size, NULL), -ENOENT);
	CHECK_EQ(node_source_leases(src), 0);
	CHECK_EQ(src_drops, 1); /* with the object */
	store_stats(w.s, &ss);
	CHECK_EQ(ss.draining, 0);
	CHECK_EQ(ss.used, b.size);

	CHECK_EQ(node_evict(w.nd, 4u << 20), b.size);
	node_source_free(NULL);
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
	struct node_source *src;
	struct transport *t;
	struct store_obj *o;
	struct store *s;
	char dir[128], addr[64];
	uint8_t *buf = malloc(RANGE);

	F.seq++;
	s = open_store(dir, sizeof(dir), "srv", 4u << 20, 0);
	o = store_create(s, 42, NULL);
	fill(buf, RANGE, 42);
	CHECK(o && store_write(o, buf, RANGE, 0) == 0 && store_seal(o, "/x", 1) == 0);
	store_obj_unref(o);
	src = node_source_new(s, 60000);
	node_source_init(&ts, src);
	t = transport_new(&cfg, NULL);
	CHECK(t && transport_serve(t, &ts) == 0 && transport_addr(t, addr, sizeof(addr)) == 0);

	CHECK_EQ(tcp_get("peer-1", addr, 42, RANGE), 0);
	CHECK_EQ(node_source_leases(src), 1);
	CHECK_EQ(store_unlink_id(s, 42), 0);
	CHECK_EQ(tcp_get("peer-2", addr, 42, RANGE), -ENOENT);
	CHECK_EQ(tcp_get("peer-1", addr, 42, RANGE), 0); /* a new connection, too */
	/* evicted rather than deleted: the lease is taken back, and the peer
	 * is told that the object is not here (it fails over) */
	node_source_revoke(src, 42);
	CHECK_EQ(tcp_get("peer-1", addr, 42, RANGE), -ENOENT);
	/* at once, or when the server is done with the last GET */
	WAIT_FOR(node_source_leases(src) == 0);
	transport_free(t);
	node_source_free(src);
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
	node_source_init(&ts, w.src);

	/* idle leases: a, the least recently used copy, goes at once */
	CHECK_EQ(serve_one(&ts, "peer-1", a.id, a.size, NULL), 0);
	CHECK_EQ(serve_one(&ts, "peer-1", b.id, b.size, NULL), 0);
	CHECK_EQ(node_source_leases(w.src), 2);
	CHECK_EQ(node_evict(w.nd, 1024 * 1024), a.size);
	CHECK(!in_store(&w, a.id));
	CHECK(!held_here(&w, a.id));
	store_stats(w.s, &ss);
	CHECK_EQ(ss.used, b.size + mine.size);
	CHECK_EQ(ss.draining, 0);
	CHECK_EQ(node_source_leases(w.src), 1);
	CHECK_EQ(serve_one(&ts, "peer-1", a.id, a.size, NULL), -ENOENT);

	/* b is being sent to peer-2, c is idle: c goes */
	c = put_object(&w, "el-c", 512 * 1024, 0, 0);
	CHECK_EQ(fetch_all(&w, &c), 0);
	CHECK_EQ(serve_one(&ts, "peer-2", b.id, b.size, &tok), 0);
	CHECK_EQ(ts.attach(tok, &reg, src_drop, &cur), 0);
	src_drops = 0;
	CHECK_EQ(node_evict(w.nd, 1024 * 1024), c.size);
	CHECK(!in_store(&w, c.id));
	CHECK(local_copy_ok(&w, &b));

	/* only b can make room now: it goes, and eviction waits for its GET */
	cl = (struct closer){.w = &w, .ts = &ts, .tok = tok, .id = b.id};
	CHECK_EQ(pthread_create(&th, NULL, close_thread, &cl), 0);
	CHECK_EQ(node_evict(w.nd, 1536 * 1024), b.size);
	pthread_join(th, NULL);
	CHECK(cl.bytes_ok);
	CHECK_EQ(cl.drops_before, 0);
	WAIT_FOR(src_drops == 1);
	store_stats(w.s, &ss);
	CHECK_EQ(ss.used, mine.size);
	CHECK_EQ(ss.draining, 0);
	CHECK_EQ(node_source_leases(w.src), 0);
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
	struct node_stats st;
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
	CHECK_EQ(node_fetch_wait(op.f, 0, rec.size), 0);
	node_fetch_opened(op.f);
	store_obj_unref(op.o);
	CHECK(local_copy_ok(&w, &rec));
	CHECK_EQ(F.h[0].served, RANGE);
	CHECK_EQ(F.h[1].served, rec.size - RANGE);
	node_stats(w.nd, &st);
	CHECK(st.failovers >= 1);
	CHECK_EQ(locked_read(&F.n_failed), 0);
	WAIT_FOR(held_here(&w, rec.id));
	world_release(&w);
}

/* A sealed object of a page, "<prefix><i>", published at the root from
 * here, and held by a peer too if @replica.  Its id. */
static uint64_t make_published(struct world *w, const char *prefix, int i, bool replica)
{
	struct meta_obj rec;
	struct store_obj *o;
	char name[32];
	int err = 0;

	memset(&rec, 0, sizeof(rec));
	CHECK_EQ(meta_alloc_id(w->m, &rec.id), 0);
	snprintf(name, sizeof(name), "%s%d", prefix, i);
	o = store_create(w->s, rec.id, &err);
	CHECK(o != NULL);
	if (!o)
		return 0;
	CHECK_EQ(store_write(o, name, strlen(name), 0), 0);
	CHECK_EQ(store_seal(o, name, 1), 0);
	store_obj_csum(o, rec.csum);
	rec.size = strlen(name);
	snprintf(rec.origin, sizeof(rec.origin), "local");
	CHECK_EQ(meta_publish(w->m, META_ROOT_ID, name, &rec, false, NULL, NULL), 0);
	if (replica)
		CHECK_EQ(meta_add_holder(F.h[1].m, rec.id), 0);
	store_obj_unref(o);
	return rec.id;
}

/* A world whose store is full: @n objects of a page from make_published(),
 * their ids in @ids. */
static void fill_world(struct world *w, uint64_t *ids, int n, const char *prefix, bool replica)
{
	int i;

	world_init(w, (uint64_t)n * STORE_PAGE);
	for (i = 0; i < n; i++)
		ids[i] = make_published(w, prefix, i, replica);
}

/* Eviction looks at the coldest objects, not at all of them: with 2,000
 * replicas in a full store, making room for one page asks about a batch
 * (the busy hook: it asked about every object before), and gives up the
 * least recently used one. */
TEST(evict_walks_few)
{
	enum { N = 2000 };
	uint64_t ids[N];
	struct world w;
	unsigned asked;

	fill_world(&w, ids, N, "w", true); /* a replica */
	node_touch(w.nd, ids[0]);	   /* ids[1] is the least recently used now */
	pthread_mutex_lock(&F.lock);
	F.n_busy = 0;
	pthread_mutex_unlock(&F.lock);
	CHECK_EQ(node_evict(w.nd, STORE_PAGE), strlen("w1"));
	pthread_mutex_lock(&F.lock);
	asked = F.n_busy;
	pthread_mutex_unlock(&F.lock);
	printf("# evicting one of %d objects asked about %u\n", N, asked);
	CHECK(asked <= 2 * 64);
	CHECK(!in_store(&w, ids[1]));
	CHECK(in_store(&w, ids[0]));
	CHECK(in_store(&w, ids[2]));
	world_release(&w);
}

/* Objects only this node holds (written here) are asked of Redis once:
 * eviction then passes over them without walking them again, and each
 * later eviction costs the copies it looks at, not the node's own. */
TEST(evict_past_last_copies)
{
	enum { N = 2000, R = 40 };
	uint64_t ids[N + R];
	struct store_stats st;
	struct world w;
	unsigned asked, worst = 0;
	int i, k;

	world_init(&w, (uint64_t)(N + R) * STORE_PAGE);
	/* the newest R are replicas: a peer holds them too */
	for (i = 0; i < N + R; i++)
		ids[i] = make_published(&w, "s", i, i >= N);
	/* the first eviction learns that the N oldest are the only copies */
	CHECK(node_evict(w.nd, STORE_PAGE) > 0);
	store_stats(w.s, &st);
	CHECK_EQ(st.sole, N);
	for (k = 0; k < 10; k++) {
		pthread_mutex_lock(&F.lock);
		F.n_busy = 0;
		pthread_mutex_unlock(&F.lock);
		/* one page more than the room the evictions so far made */
		CHECK(node_evict(w.nd, (uint64_t)(k + 2) * STORE_PAGE) > 0);
		pthread_mutex_lock(&F.lock);
		asked = F.n_busy;
		pthread_mutex_unlock(&F.lock);
		if (asked > worst)
			worst = asked;
	}
	printf("# evicting past %d only copies asked about %u objects at most\n", N, worst);
	CHECK(worst <= 2 * 64);
	for (i = 0; i < N; i++)
		CHECK(in_store(&w, ids[i]));
	for (i = N; i < N + 11; i++)
		CHECK(!in_store(&w, ids[i]));
	/* a peer fetching one makes it a candidate again */
	store_set_sole(w.s, ids[0], false);
	store_stats(w.s, &st);
	CHECK_EQ(st.sole, N - 1);
	world_release(&w);
}

/*
 * Packed copies go by the page: a 1 KiB copy whose page it shares with
 * this node's own objects would free nothing, so none is given up for a
 * new page; copies that fill pages by themselves are given up a page at
 * a time, and none of them if one is opened while Redis is asked.
 */
TEST(evict_by_page)
{
	enum { PAGES = 256 }; /* a store of 1 MiB, the least */
	struct meta_obj r[8], m[8];
	struct node_stats st;
	struct store_stats ss;
	struct world w;
	int i, k;

	for (k = 0; k < 3; k++) {
		F.pack_max = 32u << 10;
		world_init(&w, PAGES * STORE_PAGE);
		F.pack_max = 0;
		/* k 0: page 0 holds r0 m0 r1 m1, page 1 r2 m2 r3 m3 (a slot
		 * each, lowest first); k 1: page 0 holds r0 r1 r2 r3 */
		for (i = 0; i < 4; i++) {
			char name[32];

			snprintf(name, sizeof(name), "p%d-r%d", k, i);
			r[i] = put_object(&w, name, 1024, 0, 0);
			CHECK_EQ(fetch_all(&w, &r[i]), 0);
			if (k == 0) {
				snprintf(name, sizeof(name), "p%d-m%d", k, i);
				m[i] = put_local_object(&w, name, 1024);
			}
		}
		/* own objects of a page each fill the rest */
		for (i = 0; i < PAGES - (k == 0 ? 2 : 1); i++) {
			char name[32];

			snprintf(name, sizeof(name), "p%d-f%d", k, i);
			(void)put_local_object(&w, name, STORE_PAGE);
		}
		store_stats(w.s, &ss);
		/* the fillers are packed too, a page-long slot each */
		CHECK_EQ(ss.packed, (uint64_t)(k == 0 ? 8 + PAGES - 2 : 4 + PAGES - 1));
		CHECK(!store_fits(w.s, STORE_PAGE));
		if (k == 2) {
			/* r1 is opened after the walk found it */
			pthread_mutex_lock(&F.lock);
			F.busy_id = r[1].id;
			F.busy_late = 1;
			pthread_mutex_unlock(&F.lock);
		}
		node_evict(w.nd, STORE_PAGE);
		node_stats(w.nd, &st);
		if (k == 0) {
			/* giving any copy up would free no page */
			CHECK_EQ(st.evictions, 0);
			CHECK(!store_fits(w.s, STORE_PAGE));
			for (i = 0; i < 4; i++) {
				CHECK(local_copy_ok(&w, &r[i]));
				CHECK(held_here(&w, r[i].id));
				CHECK(in_store(&w, m[i].id));
			}
		} else if (k == 2) {
			/* the page stays with r1: so do the other three */
			CHECK_EQ(st.evictions, 0);
			for (i = 0; i < 4; i++) {
				CHECK(local_copy_ok(&w, &r[i]));
				CHECK(held_here(&w, r[i].id));
			}
		} else {
			/* the page of the four goes, and with it the four */
			CHECK_EQ(st.evictions, 4);
			CHECK(store_fits(w.s, STORE_PAGE));
			for (i = 0; i < 4; i++)
				CHECK(!held_here(&w, r[i].id));
		}
		world_release(&w);
	}
}

/* A peer whose card lapsed for a while (it restarted) is no live
 * holder, so eviction keeps the copies it holds too; but they are not
 * the only copies in the cluster: once the peer is back, eviction gives
 * them up again (they must not stay off the use order for good, which
 * would fill the store with copies nothing may evict). */
TEST(evict_after_peer_restart)
{
	enum { N = 256 }; /* a store of 1 MiB, the least */
	uint64_t ids[N];
	struct store_stats st;
	struct world w;
	int i;

	fill_world(&w, ids, N, "p", true); /* holder-b has it too */
	/* holder-b restarts: its card is gone meanwhile */
	CHECK_EQ(meta_node_release(F.h[1].m, F.h[1].instance), 0);
	CHECK_EQ(node_evict(w.nd, STORE_PAGE), 0);
	for (i = 0; i < N; i++)
		CHECK(in_store(&w, ids[i]));
	store_stats(w.s, &st);
	CHECK_EQ(st.sole, 0);
	/* back, with its copies */
	claim(F.h[1].m, F.h[1].node, F.h[1].instance, sizeof(F.h[1].instance));
	CHECK_EQ(node_evict(w.nd, STORE_PAGE), strlen("p0"));
	CHECK(!in_store(&w, ids[0]));
	world_release(&w);
}

/* A peer fetched a copy and registers it a moment after its last GET:
 * an eviction round in between hears from Redis that this copy is the
 * last, but it must not take that for good (the peer's serving lease
 * says a copy is on its way): once the peer is a holder, the copy may
 * go. */
TEST(evict_while_peer_registers)
{
	enum { N = 256 }; /* a store of 1 MiB, the least */
	struct transport_source ts;
	uint64_t ids[N], size = 0;
	struct store_stats st;
	struct world w;
	void *tok = NULL;

	fill_world(&w, ids, N, "q", false); /* only here */
	node_source_init(&ts, w.src);
	/* holder-b's last GET of the coldest one */
	CHECK_EQ(ts.open(ts.ctx, F.h[1].node, ids[0], &size, &tok), 0);
	CHECK_EQ(size, strlen("q0"));
	ts.close(tok);
	CHECK_EQ(node_evict(w.nd, STORE_PAGE), 0);
	store_stats(w.s, &st);
	CHECK_EQ(st.sole, N - 1);
	/* its copy is registered */
	CHECK_EQ(meta_add_holder(F.h[1].m, ids[0]), 0);
	CHECK_EQ(node_evict(w.nd, STORE_PAGE), strlen("q0"));
	CHECK(!in_store(&w, ids[0]));
	world_release(&w);
}

/* A peer restarts: while its card is gone, a fetch elsewhere drops it
 * from the holders as stale, so Redis says this node's copies are the
 * last; the peer comes back and registers its copies again (its
 * reconcile).  Nothing tells this node: only asking again does, once a
 * while when no room can be made (nd->sole_checked_ns), or those copies
 * would stay for good. */
TEST(evict_after_holder_pruned)
{
	enum { N = 256 }; /* a store of 1 MiB, the least */
	uint64_t ids[N];
	struct store_stats st;
	struct world w;
	int i;

	fill_world(&w, ids, N, "r", true); /* holder-b has it too */
	CHECK_EQ(meta_node_release(F.h[1].m, F.h[1].instance), 0);
	for (i = 0; i < N; i++) {
		struct meta_holder *hs = NULL;
		struct meta_obj rec;
		size_t n = 0;

		CHECK_EQ(meta_locate(F.h[2].m, ids[i], &rec, &hs, &n, NULL), 0);
		free(hs);
	}
	CHECK_EQ(node_evict(w.nd, STORE_PAGE), 0);
	store_stats(w.s, &st);
	CHECK_EQ(st.sole, N);
	/* back: its reconcile registers its copies again */
	claim(F.h[1].m, F.h[1].node, F.h[1].instance, sizeof(F.h[1].instance));
	for (i = 0; i < N; i++)
		CHECK_EQ(meta_add_holder(F.h[1].m, ids[i]), 0);
	/* within the minute: what this node knew stands */
	CHECK_EQ(node_evict(w.nd, STORE_PAGE), 0);
	/* a minute later */
	w.nd->sole_checked_ns -= 61 * 1000000000LL;
	CHECK_EQ(node_evict(w.nd, STORE_PAGE), strlen("r0"));
	store_stats(w.s, &st);
	CHECK_EQ(st.sole, 0);
	world_release(&w);
}

/* A sealed copy sends each block once to the fan-out GETs (give()); a
 * second one, and a query, are told which blocks went out. */
TEST(given_out)
{
	struct transport_source ts;
	struct transport_have h;
	struct world w;
	struct meta_obj a;
	uint64_t size = 0;
	const uint64_t B = 8u << 20;
	void *tok, *tok2;

	world_init(&w, 40u << 20);
	a = put_object(&w, "given-a", 2 * B + 4096, 0, 0); /* 3 blocks */
	CHECK_EQ(fetch_all(&w, &a), 0);
	node_source_init(&ts, w.src);
	CHECK(ts.give != NULL);
	CHECK_EQ(ts.open(ts.ctx, "peer-1", a.id, &size, &tok), 0);
	CHECK_EQ(ts.open(ts.ctx, "peer-2", a.id, &size, &tok2), 0);
	CHECK_EQ(size, a.size);
	memset(&h, 0, sizeof(h));
	CHECK_EQ(ts.have(tok, 0, 0, &h), 1);
	CHECK(h.flags == TRANSPORT_HAVE_SEALED && h.nblocks == 0); /* nothing given out */
	CHECK_EQ(ts.give(tok, 0, B, &h), 1);
	CHECK_EQ(ts.give(tok, 2 * B, 4096, &h), 1);
	/* another peer is told who has them: blocks 0 and 2 went out */
	memset(&h, 0, sizeof(h));
	CHECK_EQ(ts.give(tok2, 0, B, &h), 0);
	CHECK(h.flags == TRANSPORT_HAVE_SEALED && h.nblocks == 3 && h.shift == 23);
	CHECK_EQ(h.fetching[0], 0x05);
	CHECK_EQ(h.have[0], 0);
	memset(&h, 0, sizeof(h));
	CHECK_EQ(ts.have(tok2, B, B, &h), 1);
	CHECK(h.nblocks == 3 && h.fetching[0] == 0x05);
	/* the peer it went to is served again: asking again, it has lost
	 * it (a fetch that failed, a copy evicted and read again) */
	CHECK_EQ(ts.give(tok, 0, B, &h), 1);
	/* a range over a given block and a new one: refused, nothing marked */
	CHECK_EQ(ts.give(tok2, B, B + 1, &h), 0);
	CHECK_EQ(ts.give(tok2, B, B, &h), 1);
	memset(&h, 0, sizeof(h));
	CHECK_EQ(ts.give(tok, B, B, &h), 0);
	CHECK_EQ(h.fetching[0], 0x07);
	/* the second piece of a block (a GET longer than get_max) is served */
	CHECK_EQ(ts.give(tok2, B + 4096, B - 4096, &h), 1);
	/* a GET whose bytes did not all go out gives its block back */
	ts.ungive(tok2, B, B);
	CHECK_EQ(ts.give(tok, B, B, &h), 1);
	CHECK_EQ(ts.give(tok2, B, B, &h), 0); /* peer-1's now */
	CHECK_EQ(ts.give(tok, B, B, &h), 1);
	ts.close(tok2);
	ts.close(tok);
	world_release(&w);
}

int main(void)
{
	harness_begin("fetch-evict");
	snprintf(F.root, sizeof(F.root), "/dev/shm/objfs-test-node-evict-XXXXXX");
	if (!mkdtemp(F.root)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(eviction);
	RUN(evict_past_last_copies);
	RUN(evict_after_peer_restart);
	RUN(evict_while_peer_registers);
	RUN(evict_after_holder_pruned);
	RUN(evict_only_if_it_helps);
	RUN(evict_by_page);
	RUN(deleted_while_fetched);
	RUN(serving_leases);
	RUN(serving_leases_tcp);
	RUN(evict_leased);
	RUN(holder_evicts_mid_fetch);
	RUN(evict_walks_few);
	RUN(given_out);
	rm_dir(F.root);
	return harness_end();
}
