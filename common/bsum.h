/*
 * bsum: the block sums of an object.  No state, no locks.
 *
 * An object of more than one block carries a 64-bit sum per block of B
 * bytes, B = 8 MiB doubled until the object has at most BSUM_BLOCKS_MAX
 * blocks (the rule a fetch cuts its ranges by).  A fetcher checks each
 * block as it lands, before a reader or another node may see it; the
 * object's xxh3-128 stays its identity.
 *
 * Every sum is built from 8 MiB sub-blocks, so that a writer can sum as
 * it writes, before it knows the size and so B: the sum of a sub-block
 * is XXH3_64 of its bytes, and the sum of a block of B > 8 MiB is XXH3_64
 * of its sub-blocks' sums, each 8 bytes little-endian.  For B = 8 MiB
 * the two are the same.
 *
 * Their text, a field of the object's record in Redis, is
 * "<log2 B>:" followed by 16 lower-case hex digits per block.
 */
#ifndef OBJFS_BSUM_H
#define OBJFS_BSUM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define BSUM_SUB_SHIFT 23 /* 8 MiB */
#define BSUM_SUB ((uint64_t)1 << BSUM_SUB_SHIFT)
#define BSUM_BLOCKS_MAX 4096
/* the longest text: a shift of two digits, ':', 16 digits a block */
#define BSUM_TEXT_MAX (3 + 16 * BSUM_BLOCKS_MAX)

struct bsums {
	uint8_t shift; /* log2 of the block size */
	uint32_t n;    /* blocks, >= 2 */
	uint64_t sum[];
};

/* log2 of the block size of an object of @size bytes. */
unsigned bsum_shift(uint64_t size);
/* The blocks of an object of @size bytes (0 for an empty one); objects
 * of fewer than 2 carry no sums. */
uint32_t bsum_blocks(uint64_t size);

/* The sum of block @i of an object of @size bytes, from its bytes (@p,
 * the block's bytes, bsum_block_len() of them). */
uint64_t bsum_block(const void *p, uint64_t size, uint32_t i);
/* The length of block @i of an object of @size bytes (0 past the end). */
uint64_t bsum_block_len(uint64_t size, uint32_t i);
/* bsum_block() of bytes in @cnt pieces (which must hold the block's
 * bytes, in order; more is ignored).  0 if out of memory, which fails
 * the check: the block is fetched again. */
uint64_t bsum_block_iov(const struct iovec *iov, int cnt, uint64_t size, uint32_t i);

/*
 * The sums of an object of @size bytes from the sums of its @nsub 8 MiB
 * sub-blocks (which must be ceil(@size / 8 MiB)).  NULL if it has fewer
 * than 2 blocks, @nsub is wrong, or out of memory; caller frees.
 */
struct bsums *bsum_fold(const uint64_t *sub, size_t nsub, uint64_t size);

/* @b as text into @buf (at least 4 + 16 * b->n bytes).  Its length. */
size_t bsum_to_text(const struct bsums *b, char *buf, size_t len);
/*
 * Parse @len bytes of text for an object of @size bytes: the shift must
 * be the rule's for @size and the count its block count.  0 and
 * *ret_b (caller frees), or -EINVAL.
 */
int bsum_from_text(const char *text, size_t len, uint64_t size, struct bsums **ret_b);

/*
 * A running sum of 8 MiB sub-blocks over bytes fed in order from 0.  The
 * first sub-block is left out while streaming (an object that ends
 * within it has no sums; bsum_stream_finish() sums it from the whole
 * bytes when needed), so small objects cost nothing.
 */
struct bsum_stream {
	void *st;      /* an XXH3 state, NULL until the second sub-block */
	uint64_t pos;  /* bytes fed */
	uint64_t *sub; /* sums of the sub-blocks done; [0] unset */
	size_t nsub, cap;
};

/* Restart @bs at 0 (keeps what it allocated). */
void bsum_stream_reset(struct bsum_stream *bs);
/* Feed the @len bytes at @p, which follow what was fed.  0 or -ENOMEM. */
int bsum_stream_update(struct bsum_stream *bs, const void *p, size_t len);
/*
 * The sums of the @size bytes at @all, @bs having been fed a prefix of
 * them (the rest is fed here).  NULL for fewer than 2 blocks or out of
 * memory.  @bs is reset.
 */
struct bsums *bsum_stream_finish(struct bsum_stream *bs, const void *all, uint64_t size);
/* Free what @bs holds (it stays usable, empty). */
void bsum_stream_release(struct bsum_stream *bs);

#endif
