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
 * the range, and no transport.  Then an object's life here, as fs/ drives
 * it: node_create() and node_seal_publish() (published under its name,
 * beside a name taken meanwhile, replacing, in /lost+found when its
 * directory vanished or its writer was killed, kept for node_tick() while
 * Redis is away, a seal the store cannot make), and node_open() (the
 * local copy, a fetch whose copy gets the catalog path of the name it was
 * opened by, a stranger copy moved aside).  Eviction and serving are in
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

/* ---- an object's life here: node_create, node_seal_publish, node_open ---- */

/* A new object written here (node_create()), @size bytes of fill(id). */
static struct store_obj *write_object(struct world *w, size_t size, uint64_t *ret_id)
{
	uint8_t *buf = malloc(size ? size : 1);
	struct store_obj *o = NULL;

	*ret_id = 0;
	CHECK_EQ(node_create(w->nd, ret_id, &o), 0);
	CHECK(o != NULL && *ret_id != 0);
	if (o) {
		CHECK_EQ(store_obj_id(o), *ret_id);
		fill(buf, size, *ret_id);
		CHECK_EQ(store_write(o, buf, size, 0), 0);
	}
	free(buf);
	return o;
}

/* The catalog path of the local copy of @id ("(none)" if there is none). */
static const char *local_path(struct world *w, uint64_t id, char buf[OBJFS_PATH_MAX])
{
	struct store_obj *o = store_lookup(w->s, id);

	snprintf(buf, OBJFS_PATH_MAX, "(none)");
	if (o)
		store_obj_path(o, buf, OBJFS_PATH_MAX);
	store_obj_unref(o);
	return buf;
}

static struct node_stats stats_of(struct world *w)
{
	struct node_stats st;

	node_stats(w->nd, &st);
	return st;
}

/* The last call of the published hook was for @id as @name in @parent. */
static bool published_as(uint64_t parent, const char *name, uint64_t id, unsigned how)
{
	bool r;

	pthread_mutex_lock(&F.lock);
	r = F.pub_parent == parent && !strcmp(F.pub_name, name) && F.pub_id == id &&
	    F.pub_how == how;
	if (!r)
		fprintf(stderr, "published hook: %" PRIu64 " '%s' %" PRIu64 " how %u\n",
			F.pub_parent, F.pub_name, F.pub_id, F.pub_how);
	pthread_mutex_unlock(&F.lock);
	return r;
}

/* A file written here is sealed and published under its name (which
 * every node sees, with its size and checksum), this node holds it, its
 * copy's catalog path is the name's, and the layer above is told. */
TEST(seal_publish)
{
	char path[OBJFS_PATH_MAX];
	enum node_sealed how = NODE_SEAL_FAILED;
	uint8_t csum[OBJFS_CSUM_LEN];
	struct meta_entry e, d;
	struct store_obj *o, *l;
	struct node_stats st;
	struct world w;
	uint64_t id, id2;

	world_init(&w, 16u << 20);
	o = write_object(&w, 3 * RANGE + 7, &id);
	CHECK(!store_obj_sealed(o));
	CHECK(node_local(w.nd, id) == NULL); /* pending: nobody reads it yet */
	CHECK_EQ(node_seal_publish(w.nd, o, META_ROOT_ID, "written", NODE_SEAL_TOLD, 0, &how), 0);
	CHECK_EQ(how, NODE_SEAL_PUBLISHED);
	CHECK(store_obj_sealed(o));
	store_obj_csum(o, csum);
	CHECK_EQ(meta_lookup(F.h[1].m, META_ROOT_ID, "written", &e), 0);
	CHECK_EQ(e.kind, META_FILE);
	CHECK_EQ(e.id, id);
	CHECK_EQ(e.obj.size, 3 * RANGE + 7);
	CHECK(!memcmp(e.obj.csum, csum, sizeof(csum)));
	CHECK_STR(e.obj.origin, "local");
	CHECK(held_here(&w, id));
	store_obj_path(o, path, sizeof(path));
	CHECK_STR(path, "/written");
	CHECK_EQ(locked_read(&F.n_published), 1);
	CHECK(published_as(META_ROOT_ID, "written", id, NODE_PUB_NAMED));
	l = node_local(w.nd, id);
	CHECK(l == o);
	store_obj_unref(l);
	store_obj_unref(o);

	/* in a directory: the catalog path is the full one */
	CHECK_EQ(meta_mkdir(F.h[0].m, META_ROOT_ID, "dir", 1, &d), 0);
	o = write_object(&w, 100, &id2);
	CHECK_EQ(node_seal_publish(w.nd, o, d.id, "inner", NODE_SEAL_TOLD, 0, &how), 0);
	CHECK_EQ(how, NODE_SEAL_PUBLISHED);
	CHECK_EQ(lookup_id(F.h[2].m, d.id, "inner"), id2);
	CHECK_STR(local_path(&w, id2, path), "/dir/inner");
	CHECK_EQ(locked_read(&F.n_published), 2);
	CHECK(published_as(d.id, "inner", id2, NODE_PUB_NAMED));
	store_obj_unref(o);

	st = stats_of(&w);
	CHECK_EQ(st.unpublished, 0);
	CHECK_EQ(st.killed_writers, 0);
	CHECK_EQ(st.seal_failed, 0);
	CHECK_EQ(st.published_late, 0);
	world_release(&w);
}

/* A name taken meanwhile on another node (by a file, or a directory)
 * gives "NAME.objfs-ID"; with NODE_SEAL_REPLACE the name is taken over
 * and the object it named is gone; a directory that vanished gives
 * /lost+found/NAME. */
TEST(seal_name_taken)
{
	char alt[OBJFS_NAME_MAX + 1], path[OBJFS_PATH_MAX], want[OBJFS_PATH_MAX];
	enum node_sealed how = NODE_SEAL_FAILED;
	struct meta_entry d;
	struct meta_obj other, mo;
	struct store_obj *o;
	struct world w;
	uint64_t id, lf;

	world_init(&w, 16u << 20);
	other = put_object(&w, "taken", 1000, 0, 0);
	o = write_object(&w, 2000, &id);
	CHECK_EQ(node_seal_publish(w.nd, o, META_ROOT_ID, "taken", NODE_SEAL_TOLD, 0, &how), 0);
	CHECK_EQ(how, NODE_SEAL_PUBLISHED);
	CHECK_EQ(lookup_id(F.h[0].m, META_ROOT_ID, "taken"), other.id);
	snprintf(alt, sizeof(alt), "taken.objfs-%" PRIu64, id);
	CHECK_EQ(lookup_id(F.h[0].m, META_ROOT_ID, alt), id);
	snprintf(want, sizeof(want), "/%s", alt);
	CHECK_STR(local_path(&w, id, path), want);
	CHECK(held_here(&w, id));
	CHECK_EQ(locked_read(&F.n_published), 1);
	CHECK(published_as(META_ROOT_ID, "taken", id, 0)); /* beside the name */
	store_obj_unref(o);

	/* allowed to replace: the name is this object's now */
	o = write_object(&w, 3000, &id);
	CHECK_EQ(node_seal_publish(w.nd, o, META_ROOT_ID, "taken",
				   NODE_SEAL_TOLD | NODE_SEAL_REPLACE, 0, &how),
		 0);
	CHECK_EQ(how, NODE_SEAL_PUBLISHED);
	CHECK_EQ(lookup_id(F.h[0].m, META_ROOT_ID, "taken"), id);
	CHECK_EQ(meta_get_object(F.h[0].m, other.id, &mo), -ENOENT);
	CHECK_STR(local_path(&w, id, path), "/taken");
	CHECK_EQ(locked_read(&F.n_published), 2);
	CHECK(published_as(META_ROOT_ID, "taken", id, NODE_PUB_NAMED | NODE_PUB_REPLACED));
	store_obj_unref(o);

	/* a directory has the name */
	CHECK_EQ(meta_mkdir(F.h[1].m, META_ROOT_ID, "a-dir", 1, &d), 0);
	o = write_object(&w, 10, &id);
	CHECK_EQ(node_seal_publish(w.nd, o, META_ROOT_ID, "a-dir",
				   NODE_SEAL_TOLD | NODE_SEAL_REPLACE, 0, &how),
		 0);
	CHECK_EQ(how, NODE_SEAL_PUBLISHED);
	CHECK_EQ(lookup_id(F.h[0].m, META_ROOT_ID, "a-dir"), d.id);
	snprintf(alt, sizeof(alt), "a-dir.objfs-%" PRIu64, id);
	CHECK_EQ(lookup_id(F.h[0].m, META_ROOT_ID, alt), id);
	CHECK(published_as(META_ROOT_ID, "a-dir", id, 0));
	store_obj_unref(o);

	/* its directory was removed while it was written */
	CHECK_EQ(meta_mkdir(F.h[1].m, META_ROOT_ID, "gone", 1, &d), 0);
	CHECK_EQ(meta_rmdir(F.h[1].m, META_ROOT_ID, "gone", NULL), 0);
	o = write_object(&w, 10, &id);
	CHECK_EQ(node_seal_publish(w.nd, o, d.id, "orphan", NODE_SEAL_TOLD, 0, &how), 0);
	CHECK_EQ(how, NODE_SEAL_PUBLISHED);
	lf = lookup_id(F.h[0].m, META_ROOT_ID, "lost+found");
	CHECK(lf != 0);
	CHECK_EQ(lookup_id(F.h[0].m, lf, "orphan"), id);
	CHECK_STR(local_path(&w, id, path), "/lost+found/orphan");
	CHECK(held_here(&w, id));
	CHECK_EQ(locked_read(&F.n_published), 4);
	CHECK(published_as(d.id, "orphan", id, 0));
	store_obj_unref(o);
	CHECK_EQ(stats_of(&w).unpublished, 0);
	world_release(&w);
}

/* The object of a writer killed by a signal may be cut short: it is kept
 * as /lost+found/NAME.objfs-ID, never under its name. */
TEST(seal_killed_writer)
{
	char alt[OBJFS_NAME_MAX + 1], path[OBJFS_PATH_MAX], want[OBJFS_PATH_MAX];
	enum node_sealed how = NODE_SEAL_FAILED;
	struct meta_entry e;
	enum meta_kind kind;
	struct store_obj *o;
	struct node_stats st;
	struct world w;
	uint64_t id, found = 0;

	world_init(&w, 16u << 20);
	o = write_object(&w, RANGE, &id);
	CHECK_EQ(node_seal_publish(w.nd, o, META_ROOT_ID, "cut", NODE_SEAL_TOLD, SIGKILL, &how), 0);
	CHECK_EQ(how, NODE_SEAL_LOST);
	CHECK(store_obj_sealed(o));
	CHECK_EQ(meta_lookup(F.h[0].m, META_ROOT_ID, "cut", &e), -ENOENT);
	CHECK_EQ(meta_lookup(F.h[0].m, META_ROOT_ID, "lost+found", &e), 0);
	CHECK_EQ(e.kind, META_DIR);
	snprintf(alt, sizeof(alt), "cut.objfs-%" PRIu64, id);
	snprintf(want, sizeof(want), "/lost+found/%s", alt);
	CHECK_EQ(meta_path(F.h[0].m, e.id, alt, &kind, &found, path), 0);
	CHECK_EQ(kind, META_FILE);
	CHECK_EQ(found, id);
	CHECK_STR(path, want);
	CHECK_STR(local_path(&w, id, path), want);
	CHECK(held_here(&w, id));
	/* no name above changed to this object: the layer above drops the
	 * name the kernel knows itself */
	CHECK_EQ(locked_read(&F.n_published), 0);
	st = stats_of(&w);
	CHECK_EQ(st.killed_writers, 1);
	CHECK_EQ(st.unpublished, 0);
	store_obj_unref(o);
	world_release(&w);
}

/* Redis away at the seal: the object is sealed and kept here (the layer
 * above is told to show it under its name meanwhile), never evicted (no
 * record of it in Redis: it would be taken for deleted), and the tick
 * publishes it once Redis is back; a killed writer's object goes to
 * /lost+found then. */
TEST(seal_redis_away)
{
	char alt[OBJFS_NAME_MAX + 1], path[OBJFS_PATH_MAX], want[OBJFS_PATH_MAX];
	enum node_sealed how = NODE_SEAL_FAILED;
	struct store_obj *o, *k;
	struct node_stats st;
	struct world w;
	uint64_t id, kid, lf;
	unsigned n = 1;

	world_init(&w, 1u << 20);
	/* the epoch is known: a tick then only publishes what waits */
	CHECK_EQ(node_reconcile(w.nd, &n), 0);
	CHECK_EQ(n, 0);
	o = write_object(&w, RANGE, &id);
	k = write_object(&w, 1000, &kid);
	redis_away(&w);

	CHECK_EQ(node_seal_publish(w.nd, o, META_ROOT_ID, "later", NODE_SEAL_TOLD, 0, &how), -EIO);
	CHECK_EQ(how, NODE_SEAL_LATER);
	CHECK(!meta_is_up(w.m));
	CHECK(store_obj_sealed(o));
	CHECK_EQ(locked_read(&F.n_published), 1);
	CHECK(published_as(META_ROOT_ID, "later", id, NODE_PUB_LATER));
	CHECK_EQ(node_seal_publish(w.nd, k, META_ROOT_ID, "cut", NODE_SEAL_TOLD, SIGKILL, &how),
		 -EIO);
	CHECK_EQ(how, NODE_SEAL_LOST);
	CHECK_EQ(locked_read(&F.n_published), 1);
	/* their writers are gone: only the store holds them */
	store_obj_unref(o);
	store_obj_unref(k);
	st = stats_of(&w);
	CHECK_EQ(st.unpublished, 2);
	CHECK_EQ(st.killed_writers, 1);
	CHECK_EQ(st.published_late, 0);
	/* a tick while Redis is away changes nothing */
	node_tick(w.nd);
	CHECK_EQ(stats_of(&w).unpublished, 2);
	CHECK_EQ(node_evict(w.nd, 1u << 20), 0);
	CHECK(in_store(&w, id));
	CHECK(in_store(&w, kid));

	CHECK(redis_back(&w));
	/* back, not yet published: Redis has no record of them, and
	 * eviction must not take that for a deletion */
	CHECK_EQ(lookup_id(F.h[0].m, META_ROOT_ID, "later"), 0);
	CHECK_EQ(node_evict(w.nd, 1u << 20), 0);
	CHECK(in_store(&w, id));
	CHECK(in_store(&w, kid));
	CHECK_EQ(stats_of(&w).evictions, 0);

	node_tick(w.nd);
	st = stats_of(&w);
	CHECK_EQ(st.unpublished, 0);
	CHECK_EQ(st.published_late, 2);
	CHECK_EQ(lookup_id(F.h[0].m, META_ROOT_ID, "later"), id);
	CHECK(held_here(&w, id));
	CHECK_STR(local_path(&w, id, path), "/later");
	CHECK_EQ(locked_read(&F.n_published), 2);
	CHECK(published_as(META_ROOT_ID, "later", id, NODE_PUB_NAMED));
	CHECK_EQ(lookup_id(F.h[0].m, META_ROOT_ID, "cut"), 0);
	lf = lookup_id(F.h[0].m, META_ROOT_ID, "lost+found");
	snprintf(alt, sizeof(alt), "cut.objfs-%" PRIu64, kid);
	CHECK(lf != 0);
	CHECK_EQ(lookup_id(F.h[0].m, lf, alt), kid);
	snprintf(want, sizeof(want), "/lost+found/%s", alt);
	CHECK_STR(local_path(&w, kid, path), want);
	CHECK(held_here(&w, kid));
	world_release(&w);
}

/*
 * Objects sealed while Redis was away, published by a tick once it is
 * back: while the first is published, the others are still waiting, with
 * no record in Redis, and eviction (here from the published hook, as a
 * write on another thread could) must not take them for deleted ones.
 */
TEST(publish_retry_keeps_the_rest)
{
	enum node_sealed how = NODE_SEAL_FAILED;
	struct store_obj *o[3];
	char name[16];
	struct world w;
	uint64_t id[3];
	unsigned n = 1;
	int i;

	world_init(&w, 1u << 20);
	CHECK_EQ(node_reconcile(w.nd, &n), 0);
	for (i = 0; i < 3; i++)
		o[i] = write_object(&w, 4 * RANGE, &id[i]);
	redis_away(&w);
	for (i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "wait-%d", i);
		CHECK_EQ(node_seal_publish(w.nd, o[i], META_ROOT_ID, name, NODE_SEAL_TOLD, 0, &how),
			 -EIO);
		CHECK_EQ(how, NODE_SEAL_LATER);
		node_touch(w.nd, id[i]);
		store_obj_unref(o[i]);
	}
	CHECK(redis_back(&w));
	/* all but one object's room: giving up the two still waiting would
	 * make it (the one just published is the last copy, and stays) */
	pthread_mutex_lock(&F.lock);
	F.evict_on_publish = (1u << 20) - 4 * RANGE;
	pthread_mutex_unlock(&F.lock);
	node_tick(w.nd);
	pthread_mutex_lock(&F.lock);
	F.evict_on_publish = 0;
	CHECK_EQ(F.evicted_on_publish, 0);
	pthread_mutex_unlock(&F.lock);
	CHECK_EQ(stats_of(&w).unpublished, 0);
	CHECK_EQ(stats_of(&w).published_late, 3);
	for (i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "wait-%d", i);
		CHECK(in_store(&w, id[i]));
		CHECK_EQ(lookup_id(F.h[0].m, META_ROOT_ID, name), id[i]);
	}
	world_release(&w);
}

/* A seal the store cannot make (the object was unlinked meanwhile):
 * nothing is published, and nothing is kept for later. */
TEST(seal_fails)
{
	enum node_sealed how = NODE_SEAL_PUBLISHED;
	struct meta_obj mo;
	struct store_obj *o;
	struct node_stats st;
	struct world w;
	uint64_t id;

	world_init(&w, 16u << 20);
	o = write_object(&w, 1000, &id);
	store_unlink(o);
	CHECK_EQ(node_seal_publish(w.nd, o, META_ROOT_ID, "never", NODE_SEAL_TOLD, 0, &how), -EIO);
	CHECK_EQ(how, NODE_SEAL_FAILED);
	CHECK(!store_obj_sealed(o));
	CHECK_EQ(lookup_id(F.h[0].m, META_ROOT_ID, "never"), 0);
	CHECK_EQ(meta_get_object(F.h[0].m, id, &mo), -ENOENT);
	CHECK_EQ(locked_read(&F.n_published), 0);
	st = stats_of(&w);
	CHECK_EQ(st.seal_failed, 1);
	CHECK_EQ(st.unpublished, 0);
	store_obj_unref(o);
	world_release(&w);
}

/* Wait until the fetch of @id has registered its copy: held here, and
 * the fetch gone (it holds the copy until its worker is done with it,
 * which is after the catalog path is written). */
static void wait_registered(struct world *w, uint64_t id)
{
	WAIT_FOR(held_here(w, id));
	WAIT_FOR(copy_let_go(w, id));
}

/* Open, wait for every byte, answer the open, drop: the copy is
 * registered. */
static void open_fetched(struct world *w, const struct meta_obj *rec, uint64_t parent,
			 const char *name)
{
	struct store_obj *o = NULL;
	struct node_fetch *f = NULL;

	CHECK_EQ(node_open(w->nd, rec->id, rec, parent, name, &o, &f), 0);
	CHECK(f != NULL);
	CHECK(o != NULL && store_obj_id(o) == rec->id);
	if (f) {
		CHECK_EQ(node_fetch_wait(f, 0, rec->size), 0);
		node_fetch_opened(f);
	}
	store_obj_unref(o);
	wait_registered(w, rec->id);
	CHECK(local_copy_ok(w, rec));
}

/* A local copy that is the record's object is opened as it is; an
 * object held elsewhere is fetched, and its copy's catalog path is the
 * full path of the name it was opened by (none if it was opened by no
 * name, or by a name that does not name it). */
TEST(open_local_or_fetch)
{
	char path[OBJFS_PATH_MAX];
	struct meta_obj mine, far, near, anon, stale;
	struct store_obj *o, *l;
	struct node_fetch *f;
	struct meta_entry d;
	struct world w;

	world_init(&w, 16u << 20);
	mine = put_local_object(&w, "mine", 5000);
	CHECK_EQ(node_open(w.nd, mine.id, &mine, META_ROOT_ID, "mine", &o, &f), 0);
	CHECK(f == NULL);
	l = store_lookup(w.s, mine.id);
	CHECK(o != NULL && o == l);
	store_obj_unref(l);
	store_obj_unref(o);
	CHECK_EQ(node_open(w.nd, mine.id, NULL, 0, NULL, &o, &f), 0);
	CHECK(f == NULL);
	CHECK(o != NULL && store_obj_id(o) == mine.id);
	store_obj_unref(o);
	CHECK_EQ(stats_of(&w).fetches, 0);

	/* held by a holder only, in a directory: fetched by the workers */
	CHECK_EQ(meta_mkdir(F.h[0].m, META_ROOT_ID, "sub", 1, &d), 0);
	far = put_object(&w, "far", 3 * RANGE + 5, 0, 0);
	CHECK_EQ(meta_rename(F.h[0].m, META_ROOT_ID, "far", d.id, "far", 0, false, NULL), 0);
	open_fetched(&w, &far, d.id, "far");
	CHECK_STR(local_path(&w, far.id, path), "/sub/far");
	/* opened again: the copy here */
	CHECK_EQ(node_open(w.nd, far.id, &far, d.id, "far", &o, &f), 0);
	CHECK(f == NULL);
	CHECK(o != NULL && store_obj_sealed(o));
	store_obj_unref(o);

	/* small: fetched by the opening thread, registered once the open
	 * is answered */
	near = put_object(&w, "near", 1000, 1, 0);
	CHECK_EQ(node_open(w.nd, near.id, &near, META_ROOT_ID, "near", &o, &f), 0);
	CHECK(f != NULL);
	CHECK(o != NULL && store_obj_sealed(o));
	node_fetch_opened(f);
	store_obj_unref(o);
	CHECK(held_here(&w, near.id));
	CHECK_STR(local_path(&w, near.id, path), "/near");

	/* opened by no name: where its record says it was published */
	anon = put_object(&w, "anon", 2 * RANGE, 2, 0);
	open_fetched(&w, &anon, 0, NULL);
	CHECK_STR(local_path(&w, anon.id, path), "/anon");
	/* by a name that names another object now (renamed meanwhile): the
	 * record's path again */
	stale = put_object(&w, "stale", 2 * RANGE, 0, 0);
	open_fetched(&w, &stale, META_ROOT_ID, "near");
	CHECK_STR(local_path(&w, stale.id, path), "/stale");
	CHECK_EQ(stats_of(&w).done, 4);
	CHECK_EQ(locked_read(&F.n_wake), 0);
	world_release(&w);
}

static int collect_ids(struct store_obj *o, void *arg)
{
	uint64_t *ids = arg;
	int i;

	for (i = 0; i < 7 && ids[i]; i++)
		;
	ids[i] = store_obj_id(o);
	return 0;
}

/* A copy here of other bytes than its id's record (Redis lost writes and
 * the id was used again) is never served as that object: it moves to a
 * fresh id, keeping its bytes and catalog path, the real object is
 * fetched, a tick is asked for, and it registers the moved copy. */
TEST(open_stranger_copy)
{
	char path[OBJFS_PATH_MAX];
	uint8_t csum[OBJFS_CSUM_LEN], got[OBJFS_CSUM_LEN];
	uint64_t ids[8] = {0}, moved = 0;
	struct store_obj *so, *o, *l;
	struct node_fetch *f;
	struct meta_obj rec;
	struct world w;
	uint8_t *buf;
	unsigned n = 1;
	int i, err = 0;

	world_init(&w, 16u << 20);
	CHECK_EQ(node_reconcile(w.nd, &n), 0);
	CHECK_EQ(n, 0);
	rec = put_object(&w, "real", 2 * RANGE, 0, 0);
	buf = malloc(rec.size);
	fill(buf, rec.size, rec.id + 1);
	so = store_create(w.s, rec.id, &err);
	CHECK(so != NULL);
	CHECK_EQ(store_write(so, buf, rec.size, 0), 0);
	CHECK_EQ(store_seal(so, "/stranger", 1700000000000000000LL), 0);
	store_obj_csum(so, csum);
	CHECK(memcmp(csum, rec.csum, sizeof(csum)) != 0);

	CHECK_EQ(node_open(w.nd, rec.id, &rec, META_ROOT_ID, "real", &o, &f), 0);
	CHECK(f != NULL); /* not the stranger */
	CHECK(o != NULL && o != so);
	l = store_lookup(w.s, rec.id);
	CHECK(l == o);
	store_obj_unref(l);
	store_obj_unref(so);
	CHECK_EQ(locked_read(&F.n_wake), 1);
	if (f) {
		CHECK_EQ(node_fetch_wait(f, 0, rec.size), 0);
		node_fetch_opened(f);
	}
	store_obj_unref(o);
	wait_registered(&w, rec.id);
	CHECK(local_copy_ok(&w, &rec));
	CHECK_STR(local_path(&w, rec.id, path), "/real");

	/* the stranger's bytes: under a fresh id, with its path */
	CHECK_EQ(store_foreach(w.s, collect_ids, ids), 0);
	for (i = 0; i < 8 && ids[i]; i++)
		if (ids[i] != rec.id)
			moved = ids[i];
	CHECK_EQ(i, 2);
	CHECK(moved != 0);
	l = store_lookup(w.s, moved);
	CHECK(l != NULL && store_obj_sealed(l) && store_obj_size(l) == rec.size);
	if (l) {
		uint8_t *back = malloc(rec.size);

		store_obj_csum(l, got);
		CHECK(!memcmp(got, csum, sizeof(csum)));
		CHECK_EQ(store_read(l, back, rec.size, 0), (long long)rec.size);
		CHECK(!memcmp(back, buf, rec.size));
		free(back);
	}
	store_obj_unref(l);
	CHECK_STR(local_path(&w, moved, path), "/stranger");
	CHECK_EQ(lookup_id(F.h[0].m, META_ROOT_ID, "stranger"), 0);

	/* the tick it asked for registers the moved copy under its path */
	node_tick(w.nd);
	CHECK_EQ(lookup_id(F.h[0].m, META_ROOT_ID, "stranger"), moved);
	CHECK(held_here(&w, moved));
	CHECK_EQ(lookup_id(F.h[0].m, META_ROOT_ID, "real"), rec.id);
	CHECK_EQ(stats_of(&w).reregistered, 1);
	free(buf);
	world_release(&w);
}

/*
 * Issue 22: a fetch with block sums checks each block as it lands.  A
 * holder that sends bad blocks (every GET's first byte flipped) is
 * blamed, counted per peer and dropped for this fetch; its blocks come
 * again, whole, from the other holder, and the copy is right.
 */
TEST(block_refetch)
{
	const size_t size = (8u << 20) + 4096; /* two blocks */
	char by[256];
	struct node_stats st;
	struct world w;
	struct meta_obj rec;
	struct reader rd;
	pthread_t th;

	world_init(&w, 32u << 20);
	rec = put_object(&w, "blocks", size, 0, 2);
	F.h[0].corrupt = true;
	/* the good holder waits until the bad one was caught */
	pthread_mutex_lock(&F.lock);
	F.h[1].gate_off = 0;
	F.gate_open = false;
	pthread_mutex_unlock(&F.lock);
	rd = (struct reader){.w = &w, .rec = &rec};
	CHECK_EQ(pthread_create(&th, NULL, read_thread, &rd), 0);
	WAIT_FOR((node_stats(w.nd, &st), st.csum_failures >= 1));
	gate(true);
	pthread_join(th, NULL);
	CHECK_EQ(rd.r, 0);
	CHECK(local_copy_ok(&w, &rec));
	node_stats(w.nd, &st);
	CHECK(st.csum_failures >= 1 && st.csum_failures <= 2);
	CHECK_EQ(st.failed, 0);
	CHECK_EQ(node_peer_csum_failures(w.nd, by, sizeof(by)), 1);
	{
		char want[64];

		snprintf(want, sizeof(want), "holder-a=%" PRIu64, st.csum_failures);
		CHECK_STR(by, want);
	}
	/* the only holder sends bad blocks: the fetch fails, nothing kept */
	rec = put_object(&w, "blocks-bad", size, 0, 0);
	CHECK_EQ(fetch_all(&w, &rec), -EIO);
	WAIT_FOR(!in_store(&w, rec.id));
	world_release(&w);
}

/*
 * An object published without block sums (by an older node) gets them
 * from its first fetch, summed from the verified copy; sums in the
 * record that do not fit the size are a corrupt record: fetched
 * without, and left as they are.
 */
TEST(block_sums_recorded)
{
	const size_t size = 2 * (8u << 20) + 100;
	struct meta_holder *hs = NULL;
	struct meta_obj rec, got;
	struct bsums *want = NULL;
	char *text = NULL, *wtext;
	uint8_t *buf = malloc(size);
	struct world w;
	size_t n;

	world_init(&w, 64u << 20);
	F.no_sums = true;
	rec = put_object(&w, "old", size, 1, 0);
	F.no_sums = false;
	CHECK_EQ(meta_locate_sums(w.m, rec.id, &got, &hs, &n, NULL, &text), 0);
	CHECK(text == NULL);
	free(hs);
	CHECK_EQ(fetch_all(&w, &rec), 0);
	CHECK(local_copy_ok(&w, &rec));
	fill(buf, size, rec.id);
	{
		struct bsum_stream bs = {0};

		want = bsum_stream_finish(&bs, buf, size);
		bsum_stream_release(&bs);
	}
	wtext = node_bsum_text(want);
	CHECK_EQ(meta_locate_sums(w.m, rec.id, &got, &hs, &n, NULL, &text), 0);
	CHECK(text && wtext && !strcmp(text, wtext));
	free(hs);
	free(text);
	free(wtext);
	free(want);
	world_release(&w);

	/* sums of the wrong count: ignored, and the copy is still right */
	world_init(&w, 64u << 20);
	F.no_sums = true;
	rec = put_object(&w, "odd", size, 2, 0);
	F.no_sums = false;
	rdo("HSET {%s}:x:%" PRIu64 " bsum 23:00000000000000010000000000000002", w.prefix, rec.id);
	CHECK_EQ(fetch_all(&w, &rec), 0);
	CHECK(local_copy_ok(&w, &rec));
	CHECK_EQ(meta_locate_sums(w.m, rec.id, &got, &hs, &n, NULL, &text), 0);
	CHECK(text && !strcmp(text, "23:00000000000000010000000000000002"));
	free(hs);
	free(text);
	world_release(&w);
	free(buf);
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
	RUN(block_refetch);
	RUN(block_sums_recorded);
	RUN(sync_max_above_range);
	RUN(no_transport);
	RUN(seal_publish);
	RUN(seal_name_taken);
	RUN(seal_killed_writer);
	RUN(seal_redis_away);
	RUN(publish_retry_keeps_the_rest);
	RUN(seal_fails);
	RUN(open_local_or_fetch);
	RUN(open_stranger_copy);
	rm_dir(F.root);
	return harness_end();
}
