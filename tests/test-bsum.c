/*
 * test-bsum: block sizes, block sums from bytes, streamed and folded, and
 * their text (issue 22).
 */
#include <errno.h>
#include <sys/mman.h>

#include "bsum.h"
#include "tap.h"
#include "xxh.h"

#define MiB (1ull << 20)

static void fill(uint8_t *p, size_t len, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

TEST(sizes)
{
	CHECK_EQ(bsum_blocks(0), 0);
	CHECK_EQ(bsum_blocks(1), 1);
	CHECK_EQ(bsum_blocks(8 * MiB), 1);
	CHECK_EQ(bsum_blocks(8 * MiB + 1), 2);
	CHECK_EQ(bsum_shift(8 * MiB + 1), 23);
	/* up to 4096 blocks of 8 MiB (the rule a fetch cuts its ranges
	 * by: doubled while 4096 whole blocks fit), then 16 MiB */
	CHECK_EQ(bsum_blocks(4096 * 8 * MiB - 1), 4096);
	CHECK_EQ(bsum_shift(4096 * 8 * MiB - 1), 23);
	CHECK_EQ(bsum_shift(4096 * 8 * MiB), 24);
	CHECK_EQ(bsum_blocks(4096 * 8 * MiB), 2048);
	CHECK_EQ(bsum_blocks(4096 * 8 * MiB + 1), 2049);
	CHECK_EQ(bsum_block_len(20 * MiB, 0), 8 * MiB);
	CHECK_EQ(bsum_block_len(20 * MiB, 2), 4 * MiB);
	CHECK_EQ(bsum_block_len(20 * MiB, 3), 0);
	CHECK(bsum_blocks(UINT64_MAX) <= BSUM_BLOCKS_MAX);
}

/* Streamed in odd pieces, the sums are those of each block's bytes, and
 * a restart gives the same. */
TEST(streamed)
{
	uint64_t size = 2 * 8 * MiB + 12345;
	struct bsum_stream bs = {0};
	uint8_t *p = malloc(size);
	struct bsums *b;
	uint64_t at = 0;
	size_t k = 1;

	CHECK(p != NULL);
	fill(p, size, 7);
	while (at < size / 2) {
		CHECK_EQ(bsum_stream_update(&bs, p + at, k), 0);
		at += k;
		k = k * 3 + 1 > 3 * MiB ? 77 : k * 3 + 1;
	}
	b = bsum_stream_finish(&bs, p, size);
	CHECK(b != NULL);
	if (b) {
		CHECK_EQ(b->n, 3);
		CHECK_EQ(b->shift, 23);
		for (uint32_t i = 0; i < 3; i++)
			CHECK(b->sum[i] == XXH3_64bits(p + i * 8 * MiB, bsum_block_len(size, i)));
		CHECK(b->sum[1] == bsum_block(p + 8 * MiB, size, 1));
		/* in pieces, as a fetch's pages may be */
		{
			struct iovec iov[3] = {{p + 16 * MiB, 100},
					       {p + 16 * MiB + 100, 5000},
					       {p + 16 * MiB + 5100, 1 << 20}};

			CHECK(b->sum[2] == bsum_block_iov(iov, 3, size, 2));
			iov[2].iov_len = 1000; /* short: no sum */
			CHECK(bsum_block_iov(iov, 3, size, 2) != b->sum[2]);
		}
		free(b);
	}
	/* fed nothing: the finish sums it all */
	b = bsum_stream_finish(&bs, p, size);
	CHECK(b && b->sum[2] == bsum_block(p + 16 * MiB, size, 2));
	free(b);
	/* an object of one block has no sums */
	CHECK(bsum_stream_finish(&bs, p, 8 * MiB) == NULL);
	/* a byte changed changes that block's sum only */
	b = bsum_stream_finish(&bs, p, size);
	p[8 * MiB + 5] ^= 1;
	{
		struct bsums *c = bsum_stream_finish(&bs, p, size);

		CHECK(b && c && b->sum[0] == c->sum[0] && b->sum[1] != c->sum[1] &&
		      b->sum[2] == c->sum[2]);
		free(c);
	}
	free(b);
	bsum_stream_release(&bs);
	free(p);
}

/* Blocks of more than 8 MiB: a block's sum folds its 8 MiB pieces' sums,
 * from bytes (bsum_block()) as from sums (bsum_fold()).  The object is a
 * sparse mapping; only the block summed is touched. */
TEST(folded)
{
	uint64_t size = 4096 * 8 * MiB + 8 * MiB + 3, nsub = (size + 8 * MiB - 1) / (8 * MiB);
	uint64_t *sub = calloc(nsub, sizeof(*sub)), zero8 = XXH3_64bits(NULL, 0);
	uint8_t *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	struct bsums *b;
	uint32_t i = 5; /* the block summed from bytes */

	CHECK(p != MAP_FAILED && sub);
	if (p == MAP_FAILED || !sub)
		return;
	CHECK_EQ(bsum_shift(size), 24);
	fill(p + (uint64_t)i * 16 * MiB, 16 * MiB, 3);
	(void)zero8;
	for (uint64_t s = 0; s < nsub; s++)
		sub[s] = s / 2 == i ? XXH3_64bits(p + s * 8 * MiB, 8 * MiB) : s;
	b = bsum_fold(sub, nsub, size);
	CHECK(b != NULL);
	if (b) {
		CHECK_EQ(b->n, 2049);
		CHECK(b->sum[i] == bsum_block(p + (uint64_t)i * 16 * MiB, size, i));
		CHECK(b->sum[i] != XXH3_64bits(p + (uint64_t)i * 16 * MiB, 16 * MiB));
		{
			uint8_t *q = p + (uint64_t)i * 16 * MiB;
			struct iovec iov[2] = {{q, 8 * MiB + 3}, {q + 8 * MiB + 3, 8 * MiB - 3}};

			CHECK(b->sum[i] == bsum_block_iov(iov, 2, size, i));
		}
		/* the last block has one piece of 8 MiB + 3 bytes' sub-blocks */
		CHECK(b->sum[2048] != b->sum[2047]);
		free(b);
	}
	CHECK(bsum_fold(sub, nsub - 1, size) == NULL); /* a piece missing */
	munmap(p, size);
	free(sub);
}

TEST(text)
{
	uint64_t size = 3 * 8 * MiB, sub[3] = {1, 0xfedcba9876543210ull, 3};
	struct bsums *b = bsum_fold(sub, 3, size), *c = NULL;
	char buf[BSUM_TEXT_MAX + 1], bad[BSUM_TEXT_MAX + 1];
	size_t len;

	CHECK(b != NULL);
	if (!b)
		return;
	len = bsum_to_text(b, buf, sizeof(buf));
	CHECK_STR(buf, "23:0000000000000001fedcba98765432100000000000000003");
	CHECK_EQ(len, strlen(buf));
	CHECK_EQ(bsum_to_text(b, buf, 10), 0);
	len = bsum_to_text(b, buf, sizeof(buf));
	CHECK_EQ(bsum_from_text(buf, len, size, &c), 0);
	CHECK(c && c->n == 3 && c->shift == 23 && !memcmp(c->sum, sub, sizeof(sub)));
	free(c);
	/* a size of another block count or block size, bad digits, no shift */
	CHECK_EQ(bsum_from_text(buf, len, 2 * 8 * MiB, &c), -EINVAL);
	CHECK_EQ(bsum_from_text(buf, len, 8 * MiB, &c), -EINVAL);
	CHECK_EQ(bsum_from_text(buf, len - 1, size, &c), -EINVAL);
	memcpy(bad, buf, len + 1);
	bad[5] = 'A';
	CHECK_EQ(bsum_from_text(bad, len, size, &c), -EINVAL);
	bad[5] = 'g';
	CHECK_EQ(bsum_from_text(bad, len, size, &c), -EINVAL);
	memcpy(bad, buf, len + 1);
	bad[1] = '4';
	CHECK_EQ(bsum_from_text(bad, len, size, &c), -EINVAL);
	CHECK_EQ(bsum_from_text(buf + 3, len - 3, size, &c), -EINVAL);
	CHECK_EQ(bsum_from_text("", 0, size, &c), -EINVAL);
	CHECK_EQ(bsum_from_text("123:", 4, size, &c), -EINVAL);
	free(b);
}

/* The xxh3 objfs calls (common/xxh.h: the run-time dispatch, AVX2 here)
 * and the library's plain entry points agree, so that objects and sums
 * hashed by a node built without the dispatch check out on one built
 * with it, and back.  Last in the file: it takes back xxh.h's names. */
#ifdef OBJFS_XXH_DISPATCH
#undef XXH3_64bits
#undef XXH3_128bits
#undef XXH3_64bits_update
#endif
TEST(dispatch_agrees)
{
	static const size_t sizes[] = {0,   1,	 3,   16,   17,	       128,
				       129, 240, 241, 1024, 65536 + 7, (3u << 20) + 5};
	size_t max = (3u << 20) + 5;
	uint8_t *p = malloc(max);
	XXH3_state_t *a = XXH3_createState(), *b = XXH3_createState();

	CHECK(p && a && b);
	for (size_t i = 0; i < max; i++)
		p[i] = (uint8_t)(i * 2654435761u >> 13);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		XXH128_hash_t plain = XXH3_128bits(p, n), ours;

#ifdef OBJFS_XXH_DISPATCH
		ours = XXH3_128bits_dispatch(p, n);
		CHECK_EQ(XXH3_64bits_dispatch(p, n), XXH3_64bits(p, n));
#else
		ours = XXH3_128bits(p, n);
#endif
		CHECK(XXH128_isEqual(plain, ours));
		/* streamed, as the writer does, against one-shot */
		XXH3_64bits_reset(a);
		XXH3_64bits_reset(b);
		XXH3_64bits_update(a, p, n / 2);
		XXH3_64bits_update(a, p + n / 2, n - n / 2);
#ifdef OBJFS_XXH_DISPATCH
		XXH3_64bits_update_dispatch(b, p, n);
#else
		XXH3_64bits_update(b, p, n);
#endif
		CHECK_EQ(XXH3_64bits_digest(a), XXH3_64bits_digest(b));
		CHECK_EQ(XXH3_64bits_digest(a), XXH3_64bits(p, n));
	}
	XXH3_freeState(a);
	XXH3_freeState(b);
	free(p);
}

int main(void)
{
	RUN(sizes);
	RUN(streamed);
	RUN(folded);
	RUN(text);
	RUN(dispatch_agrees);
	return tap_done();
}
