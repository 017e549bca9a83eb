/*
 * test-fs-dcache: the name cache of fs/ (fs_inode.c), which remembers
 * what names meant for lookups while Redis is away.  Directories stay in
 * an LRU bounded by evicting its least recently used entry, never by
 * starting over (issue 21: it dropped all of its 2^20 entries at once).
 * Files go to a set-associative table of 16 B slots, bounded by replacing
 * entries within a bucket.
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs_i.h"
#include "tap.h"

static bool has_kind(struct fs *fs, uint64_t i, enum meta_kind want)
{
	char name[32];
	enum meta_kind kind;
	uint64_t id = 0;

	snprintf(name, sizeof(name), "n%llu", (unsigned long long)i);
	return fs_dcache_get(fs, i % 7 + 1, name, &kind, &id) && kind == want && id == i + 100;
}

static bool has(struct fs *fs, uint64_t i)
{
	return has_kind(fs, i, META_DIR);
}

static void put(struct fs *fs, uint64_t i, enum meta_kind kind)
{
	char name[32];

	snprintf(name, sizeof(name), "n%llu", (unsigned long long)i);
	fs_dcache_put(fs, i % 7 + 1, name, kind, i + 100);
}

TEST(directories_lru)
{
	struct fs *fs = calloc(1, sizeof(*fs));
	uint64_t i, n = DCACHE_MAX + 1000;

	for (i = 0; i < n; i++) {
		put(fs, i, META_DIR);
		if (i == DCACHE_MAX - 1000)
			CHECK(has(fs, 0)); /* used: kept past the others */
	}
	CHECK_EQ(fs->n_dcache, DCACHE_MAX);
	CHECK_EQ(fs->n_dcache_files, 0);
	CHECK(has(fs, 0));
	CHECK(!has(fs, 1)); /* the least recently used went first */
	CHECK(!has(fs, 1000));
	CHECK(has(fs, 1001));
	CHECK(has(fs, DCACHE_MAX - 1)); /* put just before the cap was hit */
	CHECK(has(fs, n - 1));
	fs_dcache_free_all(fs);
	CHECK_EQ(fs->n_dcache, 0);
	free(fs);
}

/* Three times as many file names as the table has slots at most. */
TEST(files_bounded)
{
	struct fs *fs = calloc(1, sizeof(*fs));
	uint64_t i, n = 3ull * DCACHE_FILES_MAX, found = 0;
	bool bounded = true;

	for (i = 0; i < n; i++) {
		put(fs, i, META_FILE);
		if (fs->n_dcache_files > fs->dcache_nslots || fs->dcache_nslots > DCACHE_FILES_MAX)
			bounded = false;
	}
	CHECK(bounded);
	CHECK_EQ(fs->dcache_nslots, DCACHE_FILES_MAX);
	CHECK_EQ(fs->n_dcache, 0);
	/* nearly full: names are replaced only when both buckets are */
	CHECK(fs->n_dcache_files >= DCACHE_FILES_MAX / 10 * 9);
	for (i = n - 100; i < n; i++)
		CHECK(has_kind(fs, i, META_FILE)); /* the most recent */
	for (i = n - 10000; i < n; i++)
		found += has_kind(fs, i, META_FILE);
	CHECK(found >= 9900);
	printf("# %zu file names kept in %zu slots after %llu puts; %llu of the last 10000\n",
	       fs->n_dcache_files, fs->dcache_nslots, (unsigned long long)n,
	       (unsigned long long)found);
	fs_dcache_free_all(fs);
	CHECK_EQ(fs->n_dcache_files, 0);
	CHECK_EQ(fs->dcache_nslots, 0);
	free(fs);
}

static bool names(struct fs *fs, uint64_t parent, const char *name, uint64_t id);

TEST(files_put_get_del)
{
	struct fs *fs = calloc(1, sizeof(*fs));
	enum meta_kind kind;
	uint64_t id;

	fs_dcache_put(fs, 1, "f", META_FILE, 10);
	CHECK(names(fs, 1, "f", 10));
	CHECK(!names(fs, 2, "f", 10)); /* another directory */
	CHECK(!fs_dcache_get(fs, 1, "g", &kind, &id));
	fs_dcache_put(fs, 1, "f", META_FILE, 11); /* put again: the new id */
	CHECK(names(fs, 1, "f", 11));
	CHECK_EQ(fs->n_dcache_files, 1);
	fs_dcache_del(fs, 1, "f");
	CHECK(!fs_dcache_get(fs, 1, "f", &kind, &id));
	CHECK_EQ(fs->n_dcache_files, 0);

	/* a name that changes kind lives in one table only */
	fs_dcache_put(fs, 1, "x", META_FILE, 20);
	fs_dcache_put(fs, 1, "x", META_DIR, 21);
	CHECK(fs_dcache_get(fs, 1, "x", &kind, &id) && kind == META_DIR && id == 21);
	CHECK_EQ(fs->n_dcache_files, 0);
	CHECK_EQ(fs->n_dcache, 1);
	fs_dcache_put(fs, 1, "x", META_FILE, 22);
	CHECK(names(fs, 1, "x", 22));
	CHECK_EQ(fs->n_dcache, 0);
	CHECK_EQ(fs->n_dcache_files, 1);
	fs_dcache_put(fs, 1, "y", META_DIR, 30);
	fs_dcache_forget(fs, 1, "x");
	fs_dcache_forget(fs, 1, "y");
	CHECK(!fs_dcache_get(fs, 1, "x", &kind, &id));
	CHECK(!fs_dcache_get(fs, 1, "y", &kind, &id));
	CHECK_EQ(fs->n_dcache + fs->n_dcache_files, 0);
	fs_dcache_free_all(fs);
	free(fs);
}

static void bucket_pair(struct fs *fs, const char *name, size_t *b)
{
	uint64_t key = fs_dcache_file_key(1, name);
	size_t nb = fs->dcache_nslots / DCACHE_WAYS;

	b[0] = dcache_bucket(key, nb, 0);
	b[1] = dcache_bucket(key, nb, 1);
}

/*
 * Names whose keys differ but share both buckets: a full bucket replaces
 * one of its entries and nothing else; no name answers with another's
 * id.
 */
TEST(files_same_bucket)
{
	struct fs *fs = calloc(1, sizeof(*fs));
	char cand[32], names_[DCACHE_WAYS * 2 + 1][32];
	size_t want[2], b[2], n = 0, kept = 0, i, tries;
	enum meta_kind kind;
	uint64_t id;

	/* the first name: two distinct buckets */
	for (i = 0;; i++) {
		snprintf(names_[0], sizeof(names_[0]), "first%zu", i);
		fs_dcache_put(fs, 1, names_[0], META_FILE, 1000);
		bucket_pair(fs, names_[0], want);
		fs_dcache_del(fs, 1, names_[0]);
		if (want[0] != want[1])
			break;
	}
	CHECK_EQ(fs->dcache_nslots, DCACHE_FILES_MIN);
	n = 1;
	for (tries = 0; n < DCACHE_WAYS * 2 + 1 && tries < 100000000; tries++) {
		snprintf(cand, sizeof(cand), "c%zu", tries);
		bucket_pair(fs, cand, b);
		if (b[0] == want[0] && b[1] == want[1])
			snprintf(names_[n++], sizeof(names_[n]), "%s", cand);
	}
	CHECK_EQ(n, DCACHE_WAYS * 2 + 1);
	for (i = 0; i < n; i++)
		fs_dcache_put(fs, 1, names_[i], META_FILE, 1000 + i);
	CHECK_EQ(fs->dcache_nslots, DCACHE_FILES_MIN); /* no growth: few names */
	CHECK_EQ(fs->n_dcache_files, DCACHE_WAYS * 2); /* one replaced */
	CHECK(names(fs, 1, names_[n - 1], 1000 + n - 1));
	for (i = 0; i < n; i++) {
		if (!fs_dcache_get(fs, 1, names_[i], &kind, &id))
			continue;
		kept++;
		CHECK_EQ(id, 1000 + i);
		CHECK(kind == META_FILE);
	}
	CHECK_EQ(kept, DCACHE_WAYS * 2);
	/* one more name of these buckets, never put: not found */
	for (; tries < 100000000; tries++) {
		snprintf(cand, sizeof(cand), "c%zu", tries);
		bucket_pair(fs, cand, b);
		if (b[0] == want[0] || b[1] == want[0])
			break;
	}
	CHECK(!fs_dcache_get(fs, 1, cand, &kind, &id));
	fs_dcache_free_all(fs);
	free(fs);
}

static size_t heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

/*
 * What a file name costs: 16 B a slot, and at least 3/8 of the slots used
 * once the table has grown (it doubles at 3/4), so at most 43 B a name,
 * where a struct dentry took about 128 B.
 */
TEST(files_bytes_per_name)
{
	static const uint64_t at[] = {25000, 50000, 98000, 100000, 150000, 200000, 400000};
	struct fs *fs = calloc(1, sizeof(*fs));
	size_t before = heap_bytes(), k = 0;
	uint64_t i;

	CHECK_EQ(sizeof(struct dcache_slot), 16);
	for (i = 0; k < sizeof(at) / sizeof(at[0]); i++) {
		put(fs, i, META_FILE);
		if (i + 1 == at[k]) {
			size_t heap = heap_bytes() - before;
			double per_slot = 16.0 * fs->dcache_nslots / fs->n_dcache_files;

			printf("# %llu names: %zu slots, %.1f B a name (slots), %.1f B (heap)\n",
			       (unsigned long long)at[k], fs->dcache_nslots, per_slot,
			       (double)heap / fs->n_dcache_files);
			CHECK_EQ(fs->n_dcache_files, at[k]); /* none lost below the cap */
			CHECK(fs->n_dcache_files * 8 >= fs->dcache_nslots * 3);
			CHECK(per_slot <= 44.0);
			/* 0 under a sanitizer, whose allocator mallinfo2() does
			 * not see */
			CHECK(heap <= 44 * fs->n_dcache_files);
			k++;
		}
	}
	fs_dcache_free_all(fs);
	free(fs);
}

static bool names(struct fs *fs, uint64_t parent, const char *name, uint64_t id)
{
	enum meta_kind kind;
	uint64_t got = 0;

	return fs_dcache_get(fs, parent, name, &kind, &got) && kind == META_FILE && got == id;
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
	fs_dcache_put(fs, 1, "f", META_FILE, 42);
	/* Redis says what d/f and d/g are meanwhile */
	fs_dcache_seen(fs, 1, "f", META_FILE, 42);
	fs_dcache_seen(fs, 1, "g", META_FILE, 43); /* held elsewhere only */
	CHECK(!names(fs, 1, "g", 43));
	/* the fetch ends */
	CHECK_EQ(store_write(o, "bytes", 5, 0), 0);
	CHECK_EQ(store_seal(o, "/d/f", 1), 0);
	store_obj_unref(o);
	CHECK(names(fs, 1, "f", 42));
	fs_dcache_seen(fs, 1, "f", META_FILE, 42);
	CHECK(names(fs, 1, "f", 42));

	fs_dcache_free_all(fs);
	node_free(fs->nd);
	meta_free(nc.meta);
	store_close(nc.store);
	free(fs);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK_EQ(system(cmd), 0);
}

int main(void)
{
	RUN(directories_lru);
	RUN(files_bounded);
	RUN(files_put_get_del);
	RUN(files_same_bucket);
	RUN(files_bytes_per_name);
	RUN(names_of_copies_being_fetched);
	return tap_done();
}
