/*
 * store: objects in one shared-memory arena.
 *
 * The arena is one file of `capacity` bytes in the store directory,
 * mapped once MAP_SHARED.  A bitmap (one bit per 4 KiB page, guarded by
 * store->lock) says which pages belong to some object.  Allocation is
 * first fit from the lowest free page (store->hint remembers where that
 * is), so freed pages, which stay resident in the tmpfs, are the first
 * to be handed out again.
 *
 * An object is an array of extents (runs of arena pages), each saying
 * which object pages it holds, so an offset is found by binary search.
 * A pending object grows when a write needs more pages: first by
 * extending its last extent in place, else by a new extent as large as
 * what it already holds (geometric, capped at STORE_GROW_MAX_PAGES), else
 * by just the pages needed, in as many pieces as it takes.  The free page
 * count is checked first under store->lock, so growth either succeeds or
 * changes nothing (-ENOSPC).  Pages past the end of a pending object hold
 * stale bytes from earlier objects: whenever the size grows, the gap
 * between the old size and the new bytes is zeroed, so unwritten bytes
 * read as zeros.
 *
 * Writes copy straight into the arena under obj->lock.  Sealing hashes
 * the bytes (xxh3-128, the same digest as csum_buf()), zeroes the tail of
 * the last page, gives back the pages past it, writes the catalog record
 * (store_catalog.c) and then publishes obj->sealed with release order;
 * from then on the extents never change, so readers of a sealed object
 * load sealed with acquire order and use the extents without a lock.
 *
 * The id table holds one reference on every linked object; the last
 * unref of an unlinked object gives its pages back (see store_i.h).
 */
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "log.h"

#define NO_PAGE UINT64_MAX

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

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

int store_pages_claim_i(struct store *s, uint64_t page, uint64_t n)
{
	if (bm_next_used(s, page, page + n) != page + n)
		return -EEXIST;
	pages_take(s, page, n);
	return 0;
}

void store_pages_release_i(struct store *s, uint64_t page, uint64_t n)
{
	bm_clear(s->bitmap, page, n);
	s->used_pages -= n;
	if (page < s->hint)
		s->hint = page;
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
	o->npages += n;
	return 0;
}

/* Give back every page of @o past its first @keep.  s->lock held. */
static void obj_trim(struct store_obj *o, uint64_t keep)
{
	while (o->n_ext) {
		struct store_ext *x = &o->ext[o->n_ext - 1];
		uint64_t cut;

		if (x->opage >= keep) {
			store_pages_release_i(o->s, x->page, x->npages);
			o->n_ext--;
			continue;
		}
		if (x->opage + x->npages > keep) {
			cut = x->opage + x->npages - keep;
			store_pages_release_i(o->s, x->page + x->npages - cut, cut);
			x->npages -= cut;
		}
		break;
	}
	o->npages = min_u64(o->npages, keep);
}

/*
 * Make @o hold at least @want pages; all or nothing.  @exact asks for no
 * speculative growth (the caller knows the final size).  o->lock held.
 */
static int obj_grow(struct store_obj *o, uint64_t want, bool exact)
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
		obj_trim(o, old);
out:
	pthread_mutex_unlock(&s->lock);
	return r;
}

/* ---- walking the bytes of an object ---- */

struct span {
	const struct store_obj *o;
	size_t i;
	uint64_t off, end;
};

/* [off, end) must lie within the pages @o holds. */
static void span_init(struct span *sp, const struct store_obj *o, uint64_t off, uint64_t end)
{
	sp->o = o;
	sp->off = off;
	sp->end = end;
	sp->i = off < end ? ext_find(o, off / STORE_PAGE) : 0;
}

static bool span_next(struct span *sp, uint8_t **ret_p, size_t *ret_n)
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

static void obj_zero(const struct store_obj *o, uint64_t off, uint64_t end)
{
	struct span sp;
	uint8_t *p;
	size_t n;

	span_init(&sp, o, off, end);
	while (span_next(&sp, &p, &n))
		memset(p, 0, n);
}

static void obj_copy_in(const struct store_obj *o, const uint8_t *buf, uint64_t off, uint64_t end)
{
	struct span sp;
	uint8_t *p;
	size_t n;

	span_init(&sp, o, off, end);
	while (span_next(&sp, &p, &n)) {
		memcpy(p, buf, n);
		buf += n;
	}
}

static void obj_copy_out(const struct store_obj *o, uint8_t *buf, uint64_t off, uint64_t end)
{
	struct span sp;
	uint8_t *p;
	size_t n;

	span_init(&sp, o, off, end);
	while (span_next(&sp, &p, &n)) {
		memcpy(buf, p, n);
		buf += n;
	}
}

static void hash_digest(XXH3_state_t *st, uint8_t ret_csum[OBJFS_CSUM_LEN])
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
	memcpy(ret_csum, c.digest, OBJFS_CSUM_LEN);
}

int store_hash_i(const struct store *s, const struct store_ext *ext, size_t n_ext, uint64_t size,
		 uint8_t ret_csum[OBJFS_CSUM_LEN])
{
	XXH3_state_t *st = XXH3_createState();
	size_t i;

	if (!st)
		return -ENOMEM;
	XXH3_128bits_reset(st);
	for (i = 0; i < n_ext && size; i++) {
		uint64_t n = min_u64(ext[i].npages * STORE_PAGE, size);

		XXH3_128bits_update(st, s->base + ext[i].page * STORE_PAGE, (size_t)n);
		size -= n;
	}
	hash_digest(st, ret_csum);
	XXH3_freeState(st);
	return 0;
}

/* ---- object lifetime ---- */

static bool obj_is_sealed(const struct store_obj *o)
{
	return __atomic_load_n(&o->sealed, __ATOMIC_ACQUIRE);
}

static uint64_t obj_size(const struct store_obj *o)
{
	return __atomic_load_n(&o->size, __ATOMIC_RELAXED);
}

static void obj_set_size(struct store_obj *o, uint64_t size)
{
	__atomic_store_n(&o->size, size, __ATOMIC_RELAXED);
}

void store_obj_free_i(struct store_obj *o)
{
	XXH3_freeState(o->hst);
	pthread_mutex_destroy(&o->hash_lock);
	pthread_mutex_destroy(&o->lock);
	free(o->ext);
	free(o->path);
	free(o);
}

struct store_obj *store_obj_new_i(struct store *s, uint64_t id)
{
	struct store_obj *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	/* default attributes: cannot fail on Linux */
	pthread_mutex_init(&o->lock, NULL);
	pthread_mutex_init(&o->hash_lock, NULL);
	o->s = s;
	o->id = id;
	return o;
}

int store_table_add_i(struct store *s, struct store_obj *o)
{
	HASH_ADD(hh, s->table, id, sizeof(o->id), o);
	if (!o->hh.tbl)
		return -ENOMEM;
	o->linked = true;
	o->refs++;
	o->prev = NULL;
	o->next = s->all;
	if (s->all)
		s->all->prev = o;
	s->all = o;
	if (o->sealed)
		s->nobjects++;
	else
		s->npending++;
	return 0;
}

/* Last reference gone (so @o is unlinked): give back pages and memory. */
static void obj_destroy(struct store_obj *o)
{
	struct store *s = o->s;
	size_t i;

	pthread_mutex_lock(&s->lock);
	for (i = 0; i < o->n_ext; i++)
		store_pages_release_i(s, o->ext[i].page, o->ext[i].npages);
	if (o->prev)
		o->prev->next = o->next;
	else
		s->all = o->next;
	if (o->next)
		o->next->prev = o->prev;
	pthread_mutex_unlock(&s->lock);
	store_obj_free_i(o);
}

struct store_obj *store_obj_ref(struct store_obj *o)
{
	if (o)
		__atomic_add_fetch(&o->refs, 1, __ATOMIC_RELAXED);
	return o;
}

void store_obj_unref(struct store_obj *o)
{
	if (!o)
		return;
	if (__atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL) == 0)
		obj_destroy(o);
}

struct store_obj *store_create(struct store *s, uint64_t id, int *ret_err)
{
	struct store_obj *o, *found;
	int r;

	o = store_obj_new_i(s, id);
	if (!o) {
		r = -ENOMEM;
		goto fail;
	}
	o->refs = 1;
	pthread_mutex_lock(&s->lock);
	HASH_FIND(hh, s->table, &id, sizeof(id), found);
	r = found ? -EEXIST : store_table_add_i(s, o);
	pthread_mutex_unlock(&s->lock);
	if (r < 0)
		goto free_obj;
	return o;

free_obj:
	store_obj_free_i(o);
fail:
	if (ret_err)
		*ret_err = r;
	return NULL;
}

struct store_obj *store_lookup(struct store *s, uint64_t id)
{
	struct store_obj *o;

	pthread_mutex_lock(&s->lock);
	HASH_FIND(hh, s->table, &id, sizeof(id), o);
	/* the table's own reference keeps it alive */
	store_obj_ref(o);
	pthread_mutex_unlock(&s->lock);
	return o;
}

uint64_t store_obj_id(const struct store_obj *o)
{
	return o->id;
}

uint64_t store_obj_size(const struct store_obj *o)
{
	return obj_size(o);
}

bool store_obj_sealed(const struct store_obj *o)
{
	return obj_is_sealed(o);
}

int64_t store_obj_mtime(const struct store_obj *o)
{
	return obj_is_sealed(o) ? o->mtime_ns : 0;
}

void store_obj_csum(const struct store_obj *o, uint8_t ret_csum[OBJFS_CSUM_LEN])
{
	if (obj_is_sealed(o))
		memcpy(ret_csum, o->csum, OBJFS_CSUM_LEN);
	else
		memset(ret_csum, 0, OBJFS_CSUM_LEN);
}

void store_obj_path(const struct store_obj *o, char *buf, size_t len)
{
	/* the lock is not part of the object's value */
	pthread_mutex_t *lock = (pthread_mutex_t *)&o->lock;
	const char *path;
	size_t n;

	if (!buf || !len)
		return;
	pthread_mutex_lock(lock);
	path = o->path ? o->path : "";
	n = strnlen(path, len - 1);
	memcpy(buf, path, n);
	buf[n] = '\0';
	pthread_mutex_unlock(lock);
}

/* ---- writing a pending object ---- */

static int check_range(uint64_t off, uint64_t len)
{
	if (off > STORE_SIZE_MAX || len > STORE_SIZE_MAX - off)
		return -EFBIG;
	return 0;
}

int store_write(struct store_obj *o, const void *buf, size_t len, uint64_t off)
{
	uint64_t size, end;
	int r;

	if (!o || (!buf && len))
		return -EINVAL;
	r = check_range(off, len);
	if (r < 0)
		return r;
	end = off + len;

	pthread_mutex_lock(&o->lock);
	if (o->sealed) {
		r = -EACCES;
		goto out;
	}
	if (!len)
		goto out;
	r = obj_grow(o, store_pages(end), false);
	if (r < 0)
		goto out;
	size = o->size;
	o->gen++;
	if (off > size)
		obj_zero(o, size, off);
	obj_copy_in(o, buf, off, end);
	if (end > size)
		obj_set_size(o, end);
out:
	pthread_mutex_unlock(&o->lock);
	return r;
}

/* Set the size of a pending object; growth is zeroed if @zero, else left
 * as the pages had it (the caller writes every byte).  o->lock held. */
static int obj_resize(struct store_obj *o, uint64_t size, bool zero)
{
	uint64_t old = o->size;
	int r;

	if (o->sealed)
		return -EACCES;
	r = check_range(size, 0);
	if (r < 0)
		return r;
	o->gen++;
	if (size > old) {
		r = obj_grow(o, store_pages(size), true);
		if (r < 0)
			return r;
		if (zero)
			obj_zero(o, old, size);
	} else {
		/* pages past the new end are of no use until written again */
		pthread_mutex_lock(&o->s->lock);
		obj_trim(o, store_pages(size));
		pthread_mutex_unlock(&o->s->lock);
	}
	obj_set_size(o, size);
	return 0;
}

static int resize_locked(struct store_obj *o, uint64_t size, bool zero)
{
	int r;

	if (!o)
		return -EINVAL;
	pthread_mutex_lock(&o->lock);
	r = obj_resize(o, size, zero);
	pthread_mutex_unlock(&o->lock);
	return r;
}

int store_truncate(struct store_obj *o, uint64_t size)
{
	return resize_locked(o, size, true);
}

int store_reserve(struct store_obj *o, uint64_t size)
{
	/* zeroing a gigabyte the receiver is about to overwrite would cost
	 * the open 0.1 s; what the pages held stays unreadable, because
	 * readers of a pending fetched object wait for the bytes they ask
	 * for, and only a sealed object is served to others */
	return resize_locked(o, size, false);
}

/* ---- reading ---- */

ssize_t store_read(struct store_obj *o, void *buf, size_t len, uint64_t off)
{
	bool sealed;
	uint64_t size, n = 0;

	if (!o || (!buf && len))
		return -EINVAL;
	sealed = obj_is_sealed(o);
	if (!sealed)
		pthread_mutex_lock(&o->lock);
	size = obj_size(o);
	if (off < size) {
		n = min_u64(min_u64(len, size - off), SSIZE_MAX);
		obj_copy_out(o, buf, off, off + n);
	}
	if (!sealed)
		pthread_mutex_unlock(&o->lock);
	return (ssize_t)n;
}

/* Point @iov at [off, off+len) of @o (clipped to its size).  o->lock held,
 * or @o sealed.  The number of entries used; *@ret_bytes their total. */
static int obj_iov(const struct store_obj *o, uint64_t off, size_t len, struct iovec *iov,
		   int max_iov, size_t *ret_bytes)
{
	uint64_t size = obj_size(o), end;
	struct span sp;
	size_t n, bytes = 0;
	uint8_t *p;
	int used = 0;

	end = off < size ? off + min_u64(len, size - off) : off;
	span_init(&sp, o, off, end);
	while (span_next(&sp, &p, &n)) {
		if (used && (uint8_t *)iov[used - 1].iov_base + iov[used - 1].iov_len == p) {
			iov[used - 1].iov_len += n;
		} else {
			if (used == max_iov)
				break;
			iov[used].iov_base = p;
			iov[used].iov_len = n;
			used++;
		}
		bytes += n;
	}
	*ret_bytes = bytes;
	return used;
}

int store_obj_iov(struct store_obj *o, uint64_t off, size_t len, struct iovec *iov, int max_iov,
		  size_t *ret_bytes)
{
	bool sealed;
	size_t bytes;
	int used;

	if (!o || max_iov < 0 || (!iov && max_iov))
		return -EINVAL;
	sealed = obj_is_sealed(o);
	if (!sealed)
		pthread_mutex_lock(&o->lock);
	used = obj_iov(o, off, len, iov, max_iov, &bytes);
	if (!sealed)
		pthread_mutex_unlock(&o->lock);
	if (ret_bytes)
		*ret_bytes = bytes;
	return used;
}

#define HASH_AHEAD_IOV 16

int store_hash_ahead(struct store_obj *o, uint64_t end)
{
	struct iovec iov[HASH_AHEAD_IOV];
	size_t bytes;
	int r = 0, n, i;

	if (!o)
		return -EINVAL;
	if (pthread_mutex_trylock(&o->hash_lock))
		return 0; /* another thread is at it; sealing hashes what is left */
	for (;;) {
		pthread_mutex_lock(&o->lock);
		if (o->sealed) {
			pthread_mutex_unlock(&o->lock);
			r = -EACCES;
			break;
		}
		if (!o->hst || o->hash_gen != o->gen) {
			/* first use, or the bytes changed since: start over */
			if (!o->hst && !(o->hst = XXH3_createState())) {
				pthread_mutex_unlock(&o->lock);
				r = -ENOMEM;
				break;
			}
			XXH3_128bits_reset(o->hst);
			o->hashed = 0;
			o->hash_gen = o->gen;
		}
		n = 0;
		if (o->hashed < end)
			n = obj_iov(o, o->hashed, (size_t)min_u64(end - o->hashed, SIZE_MAX), iov,
				    HASH_AHEAD_IOV, &bytes);
		pthread_mutex_unlock(&o->lock);
		if (n <= 0)
			break;
		/* outside o->lock: the pages of a pending object stay where
		 * they are, and a change to the bytes moves o->gen on */
		for (i = 0; i < n; i++)
			XXH3_128bits_update(o->hst, iov[i].iov_base, iov[i].iov_len);
		o->hashed += bytes;
	}
	pthread_mutex_unlock(&o->hash_lock);
	return r;
}

/* The checksum of [0, size) into o->csum, from what store_hash_ahead()
 * did if it still holds.  o->hash_lock and o->lock held. */
static int obj_hash(struct store_obj *o, uint64_t size)
{
	struct span sp;
	uint8_t *p;
	size_t n;
	int r = 0;

	if (o->hst && o->hash_gen == o->gen && o->hashed <= size) {
		span_init(&sp, o, o->hashed, size);
		while (span_next(&sp, &p, &n))
			XXH3_128bits_update(o->hst, p, n);
		hash_digest(o->hst, o->csum);
	} else {
		r = store_hash_i(o->s, o->ext, o->n_ext, size, o->csum);
	}
	if (o->hst) {
		XXH3_freeState(o->hst);
		o->hst = NULL;
	}
	return r;
}

/* ---- seal, rename, unlink ---- */

static int path_dup(const char *path, char **ret)
{
	char *p;

	if (!path)
		path = "";
	if (strnlen(path, OBJFS_PATH_MAX) >= OBJFS_PATH_MAX)
		return -ENAMETOOLONG;
	p = strdup(path);
	if (!p)
		return -ENOMEM;
	*ret = p;
	return 0;
}

int store_seal(struct store_obj *o, const char *path, int64_t mtime_ns)
{
	struct store *s;
	struct store_ext *ext;
	uint64_t size, keep;
	char *p = NULL;
	int r;

	if (!o)
		return -EINVAL;
	s = o->s;
	r = path_dup(path, &p);
	if (r < 0)
		return r;

	pthread_mutex_lock(&o->hash_lock);
	pthread_mutex_lock(&o->lock);
	if (o->sealed) {
		r = -EACCES;
		goto out;
	}
	if (!o->linked) {
		r = -ENOENT;
		goto out;
	}
	size = o->size;
	keep = store_pages(size);
	pthread_mutex_lock(&s->lock);
	obj_trim(o, keep);
	pthread_mutex_unlock(&s->lock);
	/* stale bytes after the end would otherwise sit in the last page */
	obj_zero(o, size, keep * STORE_PAGE);
	r = obj_hash(o, size);
	if (r < 0)
		goto out;
	o->mtime_ns = mtime_ns;
	r = path ? store_catalog_write_i(o, p) : 0;
	if (r < 0)
		goto out;

	free(o->path);
	o->path = p;
	p = NULL;
	if (o->n_ext < o->cap_ext) {
		ext = realloc(o->ext, (o->n_ext ? o->n_ext : 1) * sizeof(*ext));
		if (ext) {
			o->ext = ext;
			o->cap_ext = o->n_ext ? o->n_ext : 1;
		}
	}
	pthread_mutex_lock(&s->lock);
	s->npending--;
	s->nobjects++;
	/* publish the final extents to lock-free readers */
	__atomic_store_n(&o->sealed, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&s->lock);
out:
	pthread_mutex_unlock(&o->lock);
	pthread_mutex_unlock(&o->hash_lock);
	free(p);
	return r;
}

int store_set_path(struct store_obj *o, const char *path)
{
	char *p = NULL;
	int r;

	if (!o)
		return -EINVAL;
	r = path_dup(path, &p);
	if (r < 0)
		return r;
	pthread_mutex_lock(&o->lock);
	if (!o->sealed)
		r = -EINVAL;
	else if (!o->linked)
		r = -ENOENT;
	else
		r = store_catalog_write_i(o, p);
	if (r == 0) {
		free(o->path);
		o->path = p;
		p = NULL;
	}
	pthread_mutex_unlock(&o->lock);
	free(p);
	return r;
}

void store_unlink(struct store_obj *o)
{
	struct store *s;
	int r;

	if (!o)
		return;
	s = o->s;
	pthread_mutex_lock(&o->lock);
	if (!o->linked) {
		pthread_mutex_unlock(&o->lock);
		return;
	}
	/* the record goes first, so a new object with this id cannot lose its own */
	if (o->sealed) {
		r = store_catalog_remove_i(s, o->id);
		if (r < 0)
			log_debug("store: cannot remove record of %016" PRIx64 ": %s", o->id,
				  strerror(-r));
	}
	pthread_mutex_lock(&s->lock);
	HASH_DEL(s->table, o);
	o->linked = false;
	if (o->sealed)
		s->nobjects--;
	else
		s->npending--;
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_unlock(&o->lock);
	store_obj_unref(o);
}

int store_foreach(struct store *s, int (*cb)(struct store_obj *o, void *arg), void *arg)
{
	struct store_obj **list, *o;
	size_t n = 0, i;
	int r = 0;

	pthread_mutex_lock(&s->lock);
	list = malloc((HASH_COUNT(s->table) + 1) * sizeof(*list));
	if (list) {
		for (o = s->table; o; o = o->hh.next) {
			if (obj_is_sealed(o))
				list[n++] = store_obj_ref(o);
		}
	}
	pthread_mutex_unlock(&s->lock);
	if (!list)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		if (!r)
			r = cb(list[i], arg);
		store_obj_unref(list[i]);
	}
	free(list);
	return r;
}

void store_stats(struct store *s, struct store_stats *ret)
{
	pthread_mutex_lock(&s->lock);
	ret->capacity = s->capacity;
	ret->used = s->used_pages * STORE_PAGE;
	ret->objects = s->nobjects;
	ret->pending = s->npending;
	ret->bad_records = s->bad_records;
	pthread_mutex_unlock(&s->lock);
}

/* ---- open and close ---- */

/* Tear down a store, whole or half built.  Objects go whatever their refs. */
static void store_free(struct store *s)
{
	struct store_obj *o, *next;

	if (!s)
		return;
	HASH_CLEAR(hh, s->table);
	for (o = s->all; o; o = next) {
		next = o->next;
		store_obj_free_i(o);
	}
	free(s->bitmap);
	if (s->base)
		munmap(s->base, s->map_len);
	if (s->arena_fd >= 0)
		close(s->arena_fd);
	if (s->notes_fd >= 0)
		close(s->notes_fd);
	if (s->objects_fd >= 0)
		close(s->objects_fd);
	/* closing the lock file releases the flock */
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	if (s->dir_fd >= 0)
		close(s->dir_fd);
	pthread_mutex_destroy(&s->note_lock);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void store_close(struct store *s)
{
	store_free(s);
}

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

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define PREFAULT_STEP (64ULL << 20)

int store_prefault(struct store *s, const bool *stop)
{
	uint64_t off, len;

	for (off = 0; off < s->capacity; off += PREFAULT_STEP) {
		if (stop && __atomic_load_n(stop, __ATOMIC_RELAXED))
			return -ECANCELED;
		len = s->capacity - off < PREFAULT_STEP ? s->capacity - off : PREFAULT_STEP;
		if (madvise(s->base + off, len, MADV_POPULATE_WRITE) < 0)
			return -errno;
	}
	return 0;
}

/* Cut the arena file and mapping down to the capacity. */
static int shrink_arena(struct store *s)
{
	if (s->map_len > s->capacity) {
		if (munmap(s->base + s->capacity, s->map_len - s->capacity) < 0)
			return -errno;
		s->map_len = s->capacity;
	}
	if (ftruncate(s->arena_fd, (off_t)s->capacity) < 0)
		return -errno;
	return 0;
}

struct store *store_open(const struct store_config *cfg, int *ret_err, uint64_t *ret_err_detail)
{
	struct store *s = NULL;
	uint64_t cap, old_size = 0, valid_pages, max_end = 0, bm_pages;
	int r;

	if (!cfg || !cfg->dir || !*cfg->dir) {
		r = -EINVAL;
		goto fail;
	}
	cap = cfg->capacity / STORE_PAGE * STORE_PAGE;
	if (cap < (1ULL << 20) || cap > STORE_CAPACITY_MAX) {
		r = -EINVAL;
		goto fail;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		r = -ENOMEM;
		goto fail;
	}
	s->dir_fd = s->objects_fd = s->notes_fd = s->lock_fd = s->arena_fd = -1;
	s->capacity = cap;
	s->verify = cfg->verify;
	/* default attributes: initialization cannot fail on Linux */
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->note_lock, NULL);

	r = store_dir_open_i(s, cfg->dir);
	if (r < 0)
		goto fail;
	r = map_arena(s, &old_size);
	if (r < 0)
		goto fail;
	valid_pages = old_size / STORE_PAGE;

	/* the bitmap first spans every page a record may name */
	bm_pages = max_u64(valid_pages, cap / STORE_PAGE);
	s->bitmap = calloc((bm_pages + 63) / 64, sizeof(uint64_t));
	if (!s->bitmap) {
		r = -ENOMEM;
		goto fail;
	}
	s->npages = bm_pages;
	r = store_catalog_adopt_i(s, valid_pages, &max_end);
	if (r < 0)
		goto fail;
	if (max_end > cap / STORE_PAGE) {
		r = -EFBIG;
		if (ret_err_detail)
			*ret_err_detail = max_end * STORE_PAGE;
		goto fail;
	}
	s->npages = cap / STORE_PAGE;
	if (old_size > cap) {
		r = shrink_arena(s);
		if (r < 0)
			goto fail;
	}
	store_notes_cleanup_i(s);
	log_debug("store: opened %s, %" PRIu64 " bytes, %" PRIu64 " objects adopted, %" PRIu64
		  " bad records",
		  cfg->dir, cap, s->nobjects, s->bad_records);
	return s;

fail:
	store_free(s);
	if (ret_err)
		*ret_err = r;
	return NULL;
}
