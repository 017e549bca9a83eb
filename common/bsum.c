/*
 * bsum: block sums (see bsum.h for the scheme).
 */
#include "bsum.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "xxh.h"

unsigned bsum_shift(uint64_t size)
{
	unsigned shift = BSUM_SUB_SHIFT;

	while (shift < 63 && (size >> shift) >= BSUM_BLOCKS_MAX)
		shift++;
	return shift;
}

uint32_t bsum_blocks(uint64_t size)
{
	unsigned shift = bsum_shift(size);

	return (uint32_t)((size >> shift) + ((size & (((uint64_t)1 << shift) - 1)) != 0));
}

uint64_t bsum_block_len(uint64_t size, uint32_t i)
{
	unsigned shift = bsum_shift(size);
	uint64_t off = (uint64_t)i << shift;

	if (i >= bsum_blocks(size))
		return 0;
	return size - off < ((uint64_t)1 << shift) ? size - off : (uint64_t)1 << shift;
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* XXH3_64 of the little-endian sums @sub[0..@n), or, with @sub NULL, of
 * the sums of the 8 MiB pieces of the @len bytes at @p.  0 if out of
 * memory (a sum that then fails its check: the block is fetched again). */
static uint64_t fold_subs(const uint64_t *sub, size_t n, const uint8_t *p, uint64_t len)
{
	XXH3_state_t *st = XXH3_createState();
	uint8_t le[8];
	uint64_t v, off;
	size_t i;

	if (!st)
		return 0;
	XXH3_64bits_reset(st);
	if (!sub)
		n = (size_t)((len + BSUM_SUB - 1) / BSUM_SUB);
	for (i = 0, off = 0; i < n; i++, off += BSUM_SUB) {
		v = sub ? sub[i]
			: XXH3_64bits(p + off,
				      (size_t)(len - off < BSUM_SUB ? len - off : BSUM_SUB));
		put_le64(le, v);
		XXH3_64bits_update(st, le, sizeof(le));
	}
	v = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return v;
}

uint64_t bsum_block(const void *p, uint64_t size, uint32_t i)
{
	uint64_t len = bsum_block_len(size, i);

	if (bsum_shift(size) == BSUM_SUB_SHIFT)
		return XXH3_64bits(p, (size_t)len);
	return fold_subs(NULL, 0, p, len);
}

uint64_t bsum_block_iov(const struct iovec *iov, int cnt, uint64_t size, uint32_t i)
{
	uint64_t len = bsum_block_len(size, i), at = 0, v = 0;
	bool tree = bsum_shift(size) > BSUM_SUB_SHIFT;
	XXH3_state_t *st = XXH3_createState(), *fold = tree ? XXH3_createState() : NULL;
	uint8_t le[8];
	int k;

	if (!st || (tree && !fold))
		goto out;
	XXH3_64bits_reset(st);
	if (fold)
		XXH3_64bits_reset(fold);
	for (k = 0; k < cnt && at < len; k++) {
		const uint8_t *p = iov[k].iov_base;
		uint64_t left = iov[k].iov_len < len - at ? iov[k].iov_len : len - at;

		while (left) {
			uint64_t room = BSUM_SUB - (at & (BSUM_SUB - 1));
			size_t n = (size_t)(left < room ? left : room);

			XXH3_64bits_update(st, p, n);
			p += n;
			at += n;
			left -= n;
			if (fold && (!(at & (BSUM_SUB - 1)) || at == len)) {
				put_le64(le, XXH3_64bits_digest(st));
				XXH3_64bits_update(fold, le, sizeof(le));
				XXH3_64bits_reset(st);
			}
		}
	}
	if (at == len)
		v = fold ? XXH3_64bits_digest(fold) : XXH3_64bits_digest(st);
out:
	if (fold)
		XXH3_freeState(fold);
	if (st)
		XXH3_freeState(st);
	return v;
}

struct bsums *bsum_fold(const uint64_t *sub, size_t nsub, uint64_t size)
{
	uint32_t n = bsum_blocks(size), i;
	unsigned shift = bsum_shift(size);
	size_t per = (size_t)1 << (shift - BSUM_SUB_SHIFT);
	struct bsums *b;

	if (n < 2 || nsub != (size + BSUM_SUB - 1) / BSUM_SUB)
		return NULL;
	b = malloc(sizeof(*b) + n * sizeof(b->sum[0]));
	if (!b)
		return NULL;
	b->shift = (uint8_t)shift;
	b->n = n;
	for (i = 0; i < n; i++) {
		size_t first = i * per, k = nsub - first < per ? nsub - first : per;

		b->sum[i] = per == 1 ? sub[first] : fold_subs(sub + first, k, NULL, 0);
	}
	return b;
}

size_t bsum_to_text(const struct bsums *b, char *buf, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t at;
	uint32_t i;

	if (len < 4 + 16 * (size_t)b->n)
		return 0;
	at = (size_t)(b->shift >= 10 ? 2 : 1);
	buf[0] = b->shift >= 10 ? (char)('0' + b->shift / 10) : (char)('0' + b->shift);
	if (at == 2)
		buf[1] = (char)('0' + b->shift % 10);
	buf[at++] = ':';
	for (i = 0; i < b->n; i++)
		for (int d = 15; d >= 0; d--)
			buf[at++] = hex[(b->sum[i] >> (4 * d)) & 15];
	buf[at] = '\0';
	return at;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int bsum_from_text(const char *text, size_t len, uint64_t size, struct bsums **ret_b)
{
	uint32_t n = bsum_blocks(size), i;
	unsigned shift = 0;
	struct bsums *b;
	size_t at = 0;

	while (at < len && at < 2 && text[at] >= '0' && text[at] <= '9')
		shift = shift * 10 + (unsigned)(text[at++] - '0');
	if (!at || at >= len || text[at++] != ':' || n < 2 || shift != bsum_shift(size) ||
	    len - at != 16 * (size_t)n)
		return -EINVAL;
	b = malloc(sizeof(*b) + n * sizeof(b->sum[0]));
	if (!b)
		return -ENOMEM;
	b->shift = (uint8_t)shift;
	b->n = n;
	for (i = 0; i < n; i++) {
		uint64_t v = 0;

		for (int d = 0; d < 16; d++) {
			int x = hexval(text[at++]);

			if (x < 0) {
				free(b);
				return -EINVAL;
			}
			v = v << 4 | (uint64_t)x;
		}
		b->sum[i] = v;
	}
	*ret_b = b;
	return 0;
}

/* ---- streaming ---- */

void bsum_stream_reset(struct bsum_stream *bs)
{
	bs->pos = 0;
	bs->nsub = 0;
}

static int push_sub(struct bsum_stream *bs, uint64_t v)
{
	if (bs->nsub == bs->cap) {
		size_t cap = bs->cap ? 2 * bs->cap : 16;
		uint64_t *sub = realloc(bs->sub, cap * sizeof(*sub));

		if (!sub)
			return -ENOMEM;
		bs->sub = sub;
		bs->cap = cap;
	}
	bs->sub[bs->nsub++] = v;
	return 0;
}

int bsum_stream_update(struct bsum_stream *bs, const void *p, size_t len)
{
	const uint8_t *q = p;

	while (len) {
		uint64_t in_sub = bs->pos & (BSUM_SUB - 1);
		size_t k = (size_t)(BSUM_SUB - in_sub < len ? BSUM_SUB - in_sub : len);

		if (bs->pos < BSUM_SUB) {
			/* the first sub-block: summed at the finish if need be */
			if (!bs->nsub && push_sub(bs, 0) < 0)
				return -ENOMEM;
		} else {
			if (!bs->st && !(bs->st = XXH3_createState()))
				return -ENOMEM;
			if (!in_sub)
				XXH3_64bits_reset(bs->st);
			XXH3_64bits_update(bs->st, q, k);
			if (in_sub + k == BSUM_SUB && push_sub(bs, XXH3_64bits_digest(bs->st)) < 0)
				return -ENOMEM;
		}
		bs->pos += k;
		q += k;
		len -= k;
	}
	return 0;
}

struct bsums *bsum_stream_finish(struct bsum_stream *bs, const void *all, uint64_t size)
{
	const uint8_t *p = all;
	struct bsums *b = NULL;
	uint64_t nsub = (size + BSUM_SUB - 1) / BSUM_SUB;

	if (bsum_blocks(size) < 2 || bs->pos > size)
		goto out;
	if (bsum_stream_update(bs, p + bs->pos, (size_t)(size - bs->pos)) < 0)
		goto out;
	/* the sub-block the end cut short */
	if ((size & (BSUM_SUB - 1)) && push_sub(bs, XXH3_64bits_digest(bs->st)) < 0)
		goto out;
	if (bs->nsub != nsub)
		goto out;
	bs->sub[0] = XXH3_64bits(p, BSUM_SUB);
	b = bsum_fold(bs->sub, bs->nsub, size);
out:
	bsum_stream_reset(bs);
	return b;
}

void bsum_stream_release(struct bsum_stream *bs)
{
	if (bs->st)
		XXH3_freeState(bs->st);
	free(bs->sub);
	memset(bs, 0, sizeof(*bs));
}
