/*
 * test-fs-dcache: the name cache of fs/ (fs_inode.c), which remembers
 * what names meant for lookups while Redis is away, is bounded by
 * evicting its least recently used entry, never by starting over (issue
 * 21: it dropped all of its 2^20 entries at once).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs_i.h"
#include "tap.h"

static bool has(struct fs *fs, uint64_t i)
{
	char name[32];
	enum meta_kind kind;
	uint64_t id = 0;

	snprintf(name, sizeof(name), "n%llu", (unsigned long long)i);
	return dcache_get(fs, i % 7 + 1, name, &kind, &id) && id == i + 100;
}

TEST(bounded_lru)
{
	struct fs *fs = calloc(1, sizeof(*fs));
	char name[32];
	uint64_t i, n = DCACHE_MAX + 1000;

	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "n%llu", (unsigned long long)i);
		dcache_put(fs, i % 7 + 1, name, META_FILE, i + 100);
		if (i == DCACHE_MAX - 1000)
			CHECK(has(fs, 0)); /* used: kept past the others */
	}
	CHECK_EQ(fs->n_dcache, DCACHE_MAX);
	CHECK(has(fs, 0));
	CHECK(!has(fs, 1)); /* the least recently used went first */
	CHECK(!has(fs, 1000));
	CHECK(has(fs, 1001));
	CHECK(has(fs, DCACHE_MAX - 1)); /* put just before the cap was hit */
	CHECK(has(fs, n - 1));
	dcache_free_all(fs);
	CHECK_EQ(fs->n_dcache, 0);
	free(fs);
}

static bool names(struct fs *fs, uint64_t parent, const char *name, uint64_t id)
{
	enum meta_kind kind;
	uint64_t got = 0;

	return dcache_get(fs, parent, name, &kind, &got) && kind == META_FILE && got == id;
}

/*
 * The name cache keeps the names of files this node holds: one being
 * fetched here is one (its open remembered the name), so what Redis
 * says of its name meanwhile (a lookup, an `ls -l`) keeps it, and the
 * name answers once the copy is sealed, while Redis is away.  A file
 * held elsewhere only is not kept.
 */
TEST(names_of_copies_being_fetched)
{
	char dir[] = "/dev/shm/objfs-test-fs-dcache-XXXXXX", cmd[128];
	struct store_config sc = {.dir = dir, .capacity = 1u << 20};
	struct meta_config mc = {.url = "unix:/nonexistent", .prefix = "t", .node = "n"};
	struct node_config nc = {.node = "n"};
	struct fs *fs = calloc(1, sizeof(*fs));
	struct store_obj *o;
	int err = 0;

	CHECK(mkdtemp(dir) != NULL);
	nc.store = store_open(&sc, &err, NULL);
	CHECK(nc.store != NULL);
	nc.meta = meta_new(&mc, &err);
	CHECK(nc.meta != NULL);
	fs->nd = node_new(&nc, &err);
	CHECK(fs->nd != NULL);
	if (!fs->nd || !nc.store)
		return;

	/* the open of d/f (object 42) begins a fetch, and remembers the name */
	o = store_create(nc.store, 42, &err);
	CHECK(o != NULL);
	dcache_put(fs, 1, "f", META_FILE, 42);
	/* Redis says what d/f and d/g are meanwhile */
	dcache_seen(fs, 1, "f", META_FILE, 42);
	dcache_seen(fs, 1, "g", META_FILE, 43); /* held elsewhere only */
	CHECK(!names(fs, 1, "g", 43));
	/* the fetch ends */
	CHECK_EQ(store_write(o, "bytes", 5, 0), 0);
	CHECK_EQ(store_seal(o, "/d/f", 1), 0);
	store_obj_unref(o);
	CHECK(names(fs, 1, "f", 42));
	dcache_seen(fs, 1, "f", META_FILE, 42);
	CHECK(names(fs, 1, "f", 42));

	dcache_free_all(fs);
	node_free(fs->nd);
	meta_free(nc.meta);
	store_close(nc.store);
	free(fs);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK_EQ(system(cmd), 0);
}

int main(void)
{
	RUN(bounded_lru);
	RUN(names_of_copies_being_fetched);
	return tap_done();
}
