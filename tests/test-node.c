/*
 * test-node: unit tests of the node room (node/), run against a real
 * store, a private redis-server (meta-harness.h) and a fake transport
 * backend: no FUSE, no root, and sockets only on loopback (one case).
 *
 * The fake backend plays the holders.  Each holder is a node with a card
 * in Redis and a store of its own; a GET is answered by copying from the
 * holder's store into the node's iovecs, with the failures a test
 * asks for: a holder that goes away after so many bytes, one that no
 * longer has the object, one whose bytes are corrupt, and a gate that
 * holds a range back until the test opens it (to see a reader served
 * before the whole object has arrived).  It registers destinations as
 * RDMA would (transport_region_new()), and every case checks that each
 * fetch fetched into its region only and gave it back while the
 * object's pages were still there.
 *
 * Cases here: single flight, streaming, failover mid-range, relocation when
 * every holder fails (and the failure when none is left), retries of a
 * stalled holder (and their bound), a checksum mismatch, a sync_max above
 * the range, and no transport.  Eviction and serving are in
 * test-node-evict.c.
 */
#include "node-harness.h"

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
		CHECK_EQ(node_fetch_wait(op[i].f, 0, rec.size), 0);
	}
	CHECK(local_copy_ok(&w, &rec));
	CHECK_EQ(F.h[0].served, rec.size);
	CHECK_EQ(F.h[0].gets, 5); /* one GET per range */
	for (i = 0; i < 4; i++) {
		node_fetch_opened(op[i].f);
		store_obj_unref(op[i].o);
	}
	WAIT_FOR(held_here(&w, rec.id));
	{
		struct node_stats st;

		node_stats(w.nd, &st);
		CHECK_EQ(st.fetches, 1);
		CHECK_EQ(st.done, 1);
		CHECK_EQ(st.bytes, rec.size);
	}
	/* a small object (up to sync_max) is complete when the open returns */
	{
		struct meta_obj small = put_object(&w, "small", 1000, 1, 0);
		struct store_obj *o;
		struct node_fetch *f;

		CHECK_EQ(node_fetch_open(w.nd, small.id, &small, 0, NULL, &f, &o), 0);
		CHECK(store_obj_sealed(o));
		node_fetch_opened(f);
		store_obj_unref(o);
		CHECK(local_copy_ok(&w, &small));
		CHECK(held_here(&w, small.id)); /* node_fetch_opened() did it */
	}
	WAIT_FOR(fetch_ended(&w, rec.id));
	world_release(&w);
}

/* A reader waits only for its own range: the head of an object is there
 * while its tail is held back. */
TEST(streaming)
{
	struct world w;
	struct meta_obj rec;
	struct store_obj *o;
	struct node_fetch *f;
	uint64_t done = 0, size = 0;
	uint8_t head[100], want[100];

	world_init(&w, 16u << 20);
	rec = put_object(&w, "stream", 8 * RANGE, 0, 0);
	gate(false);
	F.h[0].gate_off = 2 * RANGE;
	CHECK_EQ(node_fetch_open(w.nd, rec.id, NULL, 0, NULL, &f, &o), 0);
	CHECK_EQ(node_fetch_wait(f, 0, sizeof(head)), 0);
	CHECK_EQ(node_fetch_wait(f, RANGE, RANGE), 0);
	wait_gated(1);
	CHECK_EQ(store_read(o, head, sizeof(head), 0), (long long)sizeof(head));
	fill(want, sizeof(want), rec.id);
	CHECK(!memcmp(head, want, sizeof(head)));
	CHECK_EQ(node_fetch_progress(w.nd, rec.id, &done, &size), 0);
	CHECK_EQ(size, rec.size);
	CHECK(done >= 2 * RANGE && done < rec.size);
	CHECK(!store_obj_sealed(o));
	gate(true);
	CHECK_EQ(node_fetch_wait(f, 0, rec.size), 0);
	CHECK(store_obj_sealed(o));
	node_fetch_opened(f);
	store_obj_unref(o);
	CHECK(local_copy_ok(&w, &rec));
	WAIT_FOR(node_fetch_progress(w.nd, rec.id, &done, &size) == -ENOENT);
	world_release(&w);
}

/* A holder that goes away mid-range: another one continues from the byte
 * where it stopped. */
TEST(failover)
{
	struct node_stats st;
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
	node_stats(w.nd, &st);
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
		CHECK_EQ(node_fetch_wait(op.f, 0, rec.size), 0);
		node_fetch_opened(op.f);
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
	struct node_stats st;
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
		struct node_fetch *f = NULL;

		CHECK_EQ(node_fetch_open(w.nd, small.id, NULL, 0, NULL, &f, &o), -EIO);
		CHECK(store_lookup(w.s, small.id) == NULL);
	}
	node_stats(w.nd, &st);
	CHECK_EQ(st.csum_failures, 2);
	CHECK_EQ(st.done, 0);
	world_release(&w);
}

/* Eviction gives up copies that live elsewhere too, least recently used
 * first, and never the last copy nor one in use. */
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
 * range size), and a node refuses new fetches once stopped. */
TEST(sync_max_above_range)
{
	struct node_config fc;
	struct node *small_range;
	struct world w;
	struct meta_obj rec;
	struct reader rd;
	pthread_t th;
	int err = 0;

	world_init(&w, 16u << 20);
	rec = put_object(&w, "sync-big", 3 * RANGE + 10, 0, 0);
	fc = (struct node_config){
	    .node = "local", .meta = w.m, .store = w.s, .transport = w.t, .sync_max = 1u << 20};
	small_range = node_new(&fc, &err);
	CHECK(small_range != NULL);
	node_free(w.nd);
	w.nd = small_range;
	rd = (struct reader){.w = &w, .rec = &rec};
	CHECK_EQ(pthread_create(&th, NULL, read_thread, &rd), 0);
	WAIT_FOR(reader_done(&rd));
	node_stop(w.nd); /* a stuck fetch fails, and its reader returns */
	pthread_join(th, NULL);
	CHECK_EQ(rd.r, 0);
	CHECK(local_copy_ok(&w, &rec));
	/* stopped: no new fetch */
	rec = put_object(&w, "after-stop", 100, 0, 0);
	CHECK_EQ(fetch_all(&w, &rec), -EIO);
	CHECK(store_lookup(w.s, rec.id) == NULL);
	world_release(&w);
}

/* A node without a transport fails fetches at once, cleanly. */
TEST(no_transport)
{
	struct node_config fc;
	struct store_obj *o = NULL;
	struct node *nd;
	struct node_fetch *f = NULL;
	struct world w;
	struct meta_obj rec;
	int err = 0;

	world_init(&w, 16u << 20);
	rec = put_object(&w, "nt", 1000, 0, 0);
	fc = (struct node_config){.node = "local", .meta = w.m, .store = w.s};
	nd = node_new(&fc, &err);
	CHECK(nd != NULL);
	CHECK_EQ(node_fetch_open(nd, rec.id, NULL, 0, NULL, &f, &o), -EIO);
	CHECK(store_lookup(w.s, rec.id) == NULL);
	node_free(nd);
	fc.meta = NULL;
	CHECK(node_new(&fc, &err) == NULL);
	CHECK_EQ(err, -EINVAL);
	world_release(&w);
}

int main(void)
{
	harness_begin("fetch");
	snprintf(F.root, sizeof(F.root), "/dev/shm/objfs-test-node-XXXXXX");
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
	RUN(sync_max_above_range);
	RUN(no_transport);
	rm_dir(F.root);
	return harness_end();
}
