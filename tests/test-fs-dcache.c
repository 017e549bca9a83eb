/*
 * test-fs-dcache: the name cache of fs/ (fs_inode.c), which remembers
 * what names meant for lookups while Redis is away, is bounded by
 * evicting its least recently used entry, never by starting over (issue
 * 21: it dropped all of its 2^20 entries at once).
 */
#include <stdio.h>
#include <stdlib.h>

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

int main(void)
{
	RUN(bounded_lru);
	return tap_done();
}
