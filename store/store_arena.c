/*
 * store_arena: the arena, its page bitmap and the extents of objects.
 *
 * The arena is one file of `capacity` bytes in the store directory,
 * mapped once MAP_SHARED (store->base).  A bitmap (one bit per 4 KiB
 * page, guarded by store->lock) says which pages belong to some object.
 * Allocation is first fit from the lowest free page (store->hint
 * remembers where that is), so freed pages, which stay resident in the
 * tmpfs, are the first to be handed out again.
 *
 * An object is an array of extents (runs of arena pages), each saying
 * which object pages it holds, so an offset is found by binary search.
 * A pending object grows when a write needs more pages: first by
 * extending its last extent in place, else by a new extent as large as
 * what it already holds (geometric, capped at STORE_GROW_MAX_PAGES), else
 * by just the pages needed, in as many pieces as it takes.  The free page
 * count is checked first under store->lock, so growth either succeeds or
 * changes nothing (-ENOSPC).
 *
 * Data flow: store.c asks for pages (store_ext_grow_i()), gives them back
 * (store_ext_trim_i(), store_pages_release_i()) and walks an object's
 * bytes in the arena with a store_span; store_catalog.c claims the pages
 * of adopted records (store_pages_claim_i()).  At open the arena is
 * mapped with a bitmap wide enough for every page a record may name
 * (store_arena_open_i()) and cut down to the capacity once adoption is
 * done (store_arena_fit_i()).
 */
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define NO_PAGE UINT64_MAX

/* ---- page bitmap (s->lock held) ---- */

static uint64_t word_mask(uint64_t bit, uint64_t n)
{
	return (n >= 64 ? ~0ULL : (1ULL << n) - 1) << bit;
}

static void bm_set(uint64_t *bm, uint64_t page, uint64_t n)
{
	while (n) {
		uint64_t bit = page % 64, k = min_u64(64 - bit, n);

		bm[page / 64] |= word_mask(bit, k);
		page += k;
		n -= k;
	}
}

static void bm_clear(uint64_t *bm, uint64_t page, uint64_t n)
{
	while (n) {
		uint64_t bit = page % 64, k = min_u64(64 - bit, n);

		bm[page / 64] &= ~word_mask(bit, k);
		page += k;
		n -= k;
	}
}

/* First free page at or after @from, or s->npages if there is none. */
static uint64_t bm_next_free(const struct store *s, uint64_t from)
{
	uint64_t w = from / 64, nwords = (s->npages + 63) / 64, word;

	if (from >= s->npages)
		return s->npages;
	word = ~s->bitmap[w] & (~0ULL << (from % 64));
	while (!word) {
		if (++w >= nwords)
			return s->npages;
		word = ~s->bitmap[w];
	}
	return min_u64(w * 64 + (uint64_t)__builtin_ctzll(word), s->npages);
}

/* First page in use in [from, limit), or limit (clipped to s->npages). */
static uint64_t bm_next_used(const struct store *s, uint64_t from, uint64_t limit)
{
	uint64_t w, last, word;

	limit = min_u64(limit, s->npages);
	if (from >= limit)
		return limit;
	w = from / 64;
	last = (limit - 1) / 64;
	word = s->bitmap[w] & (~0ULL << (from % 64));
	while (!word) {
		if (++w > last)
			return limit;
		word = s->bitmap[w];
	}
	return min_u64(w * 64 + (uint64_t)__builtin_ctzll(word), limit);
}

/* Lowest free page, moving the hint up to it. */
static uint64_t first_free(struct store *s)
{
	s->hint = bm_next_free(s, s->hint);
	return s->hint;
}

/* First fit: lowest run of @n free pages, or NO_PAGE. */
static uint64_t find_run(struct store *s, uint64_t n)
{
	uint64_t p = first_free(s);

	while (p < s->npages) {
		uint64_t e = bm_next_used(s, p, p + n);

		if (e - p >= n)
			return p;
		p = bm_next_free(s, e);
	}
	return NO_PAGE;
}

static void pages_take(struct store *s, uint64_t page, uint64_t n)
{
	bm_set(s->bitmap, page, n);
	s->used_pages += n;
}

static void pages_give(struct store *s, uint64_t page, uint64_t n)
{
	bm_clear(s->bitmap, page, n);
	s->used_pages -= n;
	if (page < s->hint)
		s->hint = page;
}

int store_pages_claim_i(struct store *s, uint64_t page, uint64_t n)
{
	if (bm_next_used(s, page, page + n) != page + n)
		return -EEXIST;
	pages_take(s, page, n);
	return 0;
}

void store_pages_release_i(struct store *s, const struct store_ext *ext, size_t n_ext)
{
	size_t i;

	for (i = 0; i < n_ext; i++)
		pages_give(s, ext[i].page, ext[i].npages);
}

/* ---- extents (o->lock held while pending) ---- */

/* Index of the extent holding object page @pg (pg < o->npages). */
static size_t ext_find(const struct store_obj *o, uint64_t pg)
{
	size_t lo = 0, hi = o->n_ext;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (o->ext[mid].opage <= pg)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Append free pages [page, page + n) to @o.  s->lock held. */
static int ext_push(struct store_obj *o, uint64_t page, uint64_t n)
{
	struct store_ext *last = o->n_ext ? &o->ext[o->n_ext - 1] : NULL;

	if (last && last->page + last->npages == page) {
		last->npages += n;
	} else {
		if (o->n_ext == o->cap_ext) {
			size_t cap = o->cap_ext ? 2 * o->cap_ext : 4;
			struct store_ext *ext = realloc(o->ext, cap * sizeof(*ext));

			if (!ext)
				return -ENOMEM;
			o->ext = ext;
			o->cap_ext = cap;
		}
		o->ext[o->n_ext++] = (struct store_ext){page, n, o->npages};
	}
	pages_take(o->s, page, n);
	if (!o->linked)
		o->s->draining_pages += n;
	o->npages += n;
	return 0;
}

/* Give back every page of @o past its first @keep.  s->lock held. */
static void ext_trim_locked(struct store_obj *o, uint64_t keep)
{
	if (!o->linked && o->npages > keep)
		o->s->draining_pages -= o->npages - keep;
	while (o->n_ext) {
		struct store_ext *x = &o->ext[o->n_ext - 1];
		uint64_t cut;

		if (x->opage >= keep) {
			pages_give(o->s, x->page, x->npages);
			o->n_ext--;
			continue;
		}
		if (x->opage + x->npages > keep) {
			cut = x->opage + x->npages - keep;
			pages_give(o->s, x->page + x->npages - cut, cut);
			x->npages -= cut;
		}
		break;
	}
	o->npages = min_u64(o->npages, keep);
}

void store_ext_trim_i(struct store_obj *o, uint64_t keep)
{
	pthread_mutex_lock(&o->s->lock);
	ext_trim_locked(o, keep);
	pthread_mutex_unlock(&o->s->lock);
}

int store_ext_grow_i(struct store_obj *o, uint64_t want, bool exact)
{
	struct store *s = o->s;
	uint64_t need, goal, avail, old = o->npages, p, e;
	int r = 0;

	if (want <= o->npages)
		return 0;
	need = want - o->npages;

	pthread_mutex_lock(&s->lock);
	avail = s->npages - s->used_pages;
	if (avail < need) {
		r = -ENOSPC;
		goto out;
	}
	goal = exact ? need : max_u64(need, min_u64(o->npages, STORE_GROW_MAX_PAGES));
	if (goal > avail)
		goal = need;

	/* in place: the pages after the last extent */
	if (o->n_ext) {
		struct store_ext *last = &o->ext[o->n_ext - 1];

		p = last->page + last->npages;
		e = bm_next_used(s, p, p + goal);
		if (e - p >= need) {
			r = ext_push(o, p, e - p);
			goto out;
		}
	}

	/* one new extent: of @goal pages, else of just what is needed */
	p = find_run(s, goal);
	if (p == NO_PAGE && goal > need) {
		goal = need;
		p = find_run(s, goal);
	}
	if (p != NO_PAGE) {
		r = ext_push(o, p, goal);
		goto out;
	}

	/* the free pages are there but scattered: take them piece by piece */
	if (o->n_ext) {
		struct store_ext *last = &o->ext[o->n_ext - 1];

		p = last->page + last->npages;
		e = bm_next_used(s, p, p + need);
		if (e > p)
			r = ext_push(o, p, e - p);
	}
	while (!r && o->npages < want) {
		p = first_free(s);
		if (p >= s->npages) {
			r = -ENOSPC; /* cannot happen: avail was checked */
			break;
		}
		e = bm_next_used(s, p, p + (want - o->npages));
		r = ext_push(o, p, e - p);
	}
	if (r)
		ext_trim_locked(o, old);
out:
	pthread_mutex_unlock(&s->lock);
	return r;
}

/* ---- walking the bytes of an object ---- */

void store_span_init_i(struct store_span *sp, const struct store_obj *o, uint64_t off, uint64_t end)
{
	sp->o = o;
	sp->off = off;
	sp->end = end;
	sp->i = off < end ? ext_find(o, off / STORE_PAGE) : 0;
}

bool store_span_next_i(struct store_span *sp, uint8_t **ret_p, size_t *ret_n)
{
	const struct store_ext *x;
	uint64_t xoff, n;

	if (sp->off >= sp->end)
		return false;
	x = &sp->o->ext[sp->i++];
	xoff = sp->off - x->opage * STORE_PAGE;
	n = min_u64(x->npages * STORE_PAGE - xoff, sp->end - sp->off);
	*ret_p = sp->o->s->base + x->page * STORE_PAGE + xoff;
	*ret_n = (size_t)n;
	sp->off += n;
	return true;
}

/* ---- the mapping ---- */

/*
 * Open the arena file and map it.  It is grown to the capacity now, but
 * shrunk only after adoption shows nothing lies past the capacity; until
 * then the whole old file stays mapped.  Sets *ret_old to the size the
 * file had (records may point at the pages it held).
 */
static int map_arena(struct store *s, uint64_t *ret_old)
{
	struct stat st;
	uint64_t old, len;
	void *base;

	s->arena_fd = openat(s->dir_fd, "arena", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (s->arena_fd < 0)
		return -errno;
	if (fstat(s->arena_fd, &st) < 0)
		return -errno;
	old = (uint64_t)st.st_size;
	if (old < s->capacity && ftruncate(s->arena_fd, (off_t)s->capacity) < 0)
		return -errno;
	len = max_u64(store_pages(old) * STORE_PAGE, s->capacity);
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, s->arena_fd, 0);
	if (base == MAP_FAILED)
		return -errno;
	s->base = base;
	s->map_len = len;
	/* huge pages help when the tmpfs allows them; not required */
	(void)madvise(base, len, MADV_HUGEPAGE);
	*ret_old = old;
	return 0;
}

int store_arena_open_i(struct store *s, uint64_t *ret_valid_pages)
{
	uint64_t old_size = 0, valid_pages, bm_pages;
	int r;

	r = map_arena(s, &old_size);
	if (r < 0)
		return r;
	valid_pages = old_size / STORE_PAGE;

	/* the bitmap first spans every page a record may name */
	bm_pages = max_u64(valid_pages, s->capacity / STORE_PAGE);
	s->bitmap = calloc((bm_pages + 63) / 64, sizeof(uint64_t));
	if (!s->bitmap)
		return -ENOMEM;
	s->npages = bm_pages;
	*ret_valid_pages = valid_pages;
	return 0;
}

int store_arena_fit_i(struct store *s)
{
	s->npages = s->capacity / STORE_PAGE;
	/* the mapping is longer than the capacity only if the file was */
	if (s->map_len <= s->capacity)
		return 0;
	if (munmap(s->base + s->capacity, s->map_len - s->capacity) < 0)
		return -errno;
	s->map_len = s->capacity;
	if (ftruncate(s->arena_fd, (off_t)s->capacity) < 0)
		return -errno;
	return 0;
}

void store_arena_close_i(struct store *s)
{
	free(s->bitmap);
	if (s->base)
		munmap(s->base, s->map_len);
	if (s->arena_fd >= 0)
		close(s->arena_fd);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define PREFAULT_STEP (64ULL << 20)

int store_prefault(struct store *s, const atomic_bool *stop)
{
	uint64_t off, len;

	for (off = 0; off < s->capacity; off += PREFAULT_STEP) {
		if (stop && atomic_load_explicit(stop, memory_order_relaxed))
			return -ECANCELED;
		len = s->capacity - off < PREFAULT_STEP ? s->capacity - off : PREFAULT_STEP;
		if (madvise(s->base + off, len, MADV_POPULATE_WRITE) < 0)
			return -errno;
	}
	return 0;
}
