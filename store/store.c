/*
 * store: the objects of the store, and opening and closing it.
 *
 * This file owns struct store_obj: creating and finding objects by id,
 * their references, writing, resizing and reading a pending object,
 * the checksum (hash-ahead and sealing), paths, unlink, foreach and the
 * counters.  Each object's bytes live in its own file, mapped
 * (store_files.c); the records beside them come from store_catalog.c.
 *
 * Data flow.  A write takes obj->lock, has the file grown if it must
 * (store_file_grow_i(), all or nothing), then copies straight into the
 * mapping.  Bytes past the end of a pending object may hold stale bytes
 * (a reused file, a shrunk object): whenever the size grows, the gap
 * between the old size and the new bytes is zeroed, so unwritten bytes
 * read as zeros (store_reserve() alone skips that, for receivers that
 * write every byte).  A receiver may fold a prefix into the checksum
 * early (store_hash_ahead()).  Sealing hashes what hash-ahead left
 * (xxh3-128, the same digest as util_csum_buf()), cuts the file to the size,
 * writes the catalog record (store_catalog.c), maps the object
 * read-only and then publishes obj->sealed with release order; from then
 * on the mapping never changes, so readers of a sealed object load
 * sealed with acquire order and use it without a lock.
 *
 * The id table holds one reference on every linked object; the last
 * unref of an unlinked object gives its file back (see store_i.h for
 * references and locks).
 *
 * Opening: the directory and its lock (store_catalog.c), the objects'
 * filesystem (store_files.c), adoption of the catalog's records, then
 * files nobody claims are swept.
 */
#include "store_i.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "xxh.h"

#ifndef NDEBUG
_Thread_local unsigned store_obj_locks_held;
#endif

/* ---- the bytes of an object (o->lock held, or @o sealed) ---- */

static void obj_zero(const struct store_obj *o, uint64_t off, uint64_t end)
{
	if (end > off)
		memset(o->map + off, 0, end - off);
}

static void hash_digest(XXH3_state_t *st, uint8_t ret_csum[OBJFS_CSUM_LEN])
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
	memcpy(ret_csum, c.digest, OBJFS_CSUM_LEN);
}

void store_hash_i(const void *p, uint64_t len, uint8_t ret_csum[OBJFS_CSUM_LEN])
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits(len ? p : "", len));
	memcpy(ret_csum, c.digest, OBJFS_CSUM_LEN);
}

/* ---- object lifetime ---- */

/* Without a lock: acquire pairs with the release in store_seal(), so a
 * true answer makes the final extents, size and checksum visible. */
static bool obj_is_sealed(const struct store_obj *o)
{
	return atomic_load_explicit(&o->sealed, memory_order_acquire);
}

/* o->lock or s->lock held: sealed is written only under both. */
static bool obj_sealed_locked(const struct store_obj *o)
{
	return atomic_load_explicit(&o->sealed, memory_order_relaxed);
}

static uint64_t obj_size(const struct store_obj *o)
{
	return atomic_load_explicit(&o->size, memory_order_relaxed);
}

static void obj_set_size(struct store_obj *o, uint64_t size)
{
	atomic_store_explicit(&o->size, size, memory_order_relaxed);
}

/*
 * Give back the registration hanging on @o, if any: once, and before its
 * memory can serve anything else (an rkey must never reach the bytes of
 * another object), so before the mapping and the file go.  Called with
 * no store lock held: the drop is a syscall (ibv_dereg_mr()), and may
 * take locks of the transport that nest above the store's.
 */
static void obj_drop_reg(struct store_obj *o)
{
	void (*drop)(void *reg);
	void *reg;

	obj_lock(o);
	reg = o->reg;
	o->reg = NULL;
	obj_unlock(o);
	if (!reg)
		return;
	pthread_mutex_lock(&obj_store(o)->lock);
	drop = obj_store(o)->reg_drop;
	pthread_mutex_unlock(&obj_store(o)->lock);
	drop(reg);
}

void store_obj_free_i(struct store_obj *o)
{
	struct store *s = obj_store(o);

	/* at store_close(), objects still in the store end here */
	obj_drop_reg(o);
	store_file_close_i(o);
	if (o->w) {
		XXH3_freeState(o->w->hst);
		bsum_stream_release(&o->w->bs);
	}
	free(o->w);
	free(obj_path_str(o));
	pthread_mutex_lock(&s->obj_pool_lock);
	slab_free(s->obj_pool, o);
	pthread_mutex_unlock(&s->obj_pool_lock);
}

struct store_obj *store_obj_new_i(struct store *s, uint64_t id)
{
	struct store_obj *o;

	pthread_mutex_lock(&s->obj_pool_lock);
	o = slab_alloc(s->obj_pool); /* zeroed */
	pthread_mutex_unlock(&s->obj_pool_lock);
	if (!o)
		return NULL;
	o->id = id;
	o->fd = -1;
	o->recyclable = true;
	atomic_init(&o->refs, 0);
	atomic_init(&o->lease_refs, 0);
	atomic_init(&o->sealed, false);
	atomic_init(&o->map_used, false);
	atomic_init(&o->size, 0);
	return o;
}

/* ---- use order (s->lock held) ---- */

static void lru_del_locked(struct store *s, struct store_obj *o)
{
	if (o->lru_list == LRU_SOLE) {
		store_list_del_i(&s->sole, &s->sole_tail, o);
		s->nsole--;
		s->sole_bytes -= obj_size(o);
	} else if (o->lru_list == LRU_USE) {
		store_list_del_i(&s->lru, &s->lru_cold, o);
	} else if (o->lru_list == LRU_GONE) {
		store_list_del_i(&s->gone, NULL, o);
	}
	o->lprev = o->lnext = NULL;
	o->lru_list = LRU_NONE;
}

static void lru_push_locked(struct store *s, struct store_obj *o)
{
	lru_del_locked(s, o);
	o->lprev = NULL;
	o->lnext = s->lru;
	if (s->lru)
		s->lru->lprev = o;
	else
		s->lru_cold = o;
	s->lru = o;
	o->lru_list = LRU_USE;
	o->lru_stamp = ++s->lru_stamp;
}

void store_touch(struct store *s, uint64_t id)
{
	struct store_obj *o;

	pthread_mutex_lock(&s->lock);
	o = store_tab_find_i(&s->table, id);
	if (o && o->lru_list == LRU_USE)
		lru_push_locked(s, o);
	pthread_mutex_unlock(&s->lock);
}

void store_set_sole(struct store *s, uint64_t id, bool sole)
{
	struct store_obj *o;

	pthread_mutex_lock(&s->lock);
	o = store_tab_find_i(&s->table, id);
	if (o && sole && o->lru_list == LRU_USE) {
		lru_del_locked(s, o);
		o->lnext = s->sole;
		if (s->sole)
			s->sole->lprev = o;
		else
			s->sole_tail = o;
		s->sole = o;
		o->lru_list = LRU_SOLE;
		s->nsole++;
		s->sole_bytes += obj_size(o);
	} else if (o && !sole && o->lru_list == LRU_SOLE) {
		lru_push_locked(s, o);
	}
	pthread_mutex_unlock(&s->lock);
}

void store_sole_forget(struct store *s, uint64_t max)
{
	uint64_t n;

	pthread_mutex_lock(&s->lock);
	/* the longest known first: those marked again go to the front */
	for (n = 0; s->sole_tail && n < max; n++)
		lru_push_locked(s, s->sole_tail);
	pthread_mutex_unlock(&s->lock);
}

size_t store_walk_cold(struct store *s, struct store_walk *w, struct store_cold *ret, size_t n)
{
	struct store_obj *o, *last = NULL, *prev = w->at;
	size_t k = 0;

	pthread_mutex_lock(&s->lock);
	/* on from where the last call stopped, if that object did not move */
	o = prev && prev->lru_list == LRU_USE && prev->lru_stamp == w->stamp ? prev->lprev
									     : s->lru_cold;
	for (; o && k < n; o = o->lprev) {
		ret[k].id = o->id;
		ret[k].size = obj_size(o);
		k++;
		last = o;
	}
	/* a lease reference: the walk does not make it "in use" */
	w->at = store_obj_ref_lease(last);
	w->stamp = last ? last->lru_stamp : 0;
	pthread_mutex_unlock(&s->lock);
	store_obj_unref_lease(prev);
	return k;
}

void store_walk_end(struct store_walk *w)
{
	store_obj_unref_lease(w->at);
	w->at = NULL;
}

int store_table_add_i(struct store *s, struct store_obj *o)
{
	if (store_tab_add_i(&s->table, o) < 0)
		return -ENOMEM;
	o->linked = true;
	atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
	s->nall++;
	if (obj_sealed_locked(o)) {
		s->nobjects++;
		lru_push_locked(s, o); /* adopted in the catalog's order */
	} else {
		s->npending++;
		o->counted_open = true;
		s->nopen++;
	}
	return 0;
}

static void regd_del_locked(struct store *s, struct store_obj *o);

/* Last reference gone (so @o is unlinked): give back its file and memory. */
static void obj_destroy(struct store_obj *o)
{
	struct store *s = obj_store(o);

	/* first: store_file_free_i() may hand the file to the pool */
	obj_drop_reg(o);
	store_file_free_i(o);
	pthread_mutex_lock(&s->lock);
	store_file_mapped_del_i(s, o);
	lru_del_locked(s, o);
	regd_del_locked(s, o);
	if (o->counted_open) {
		o->counted_open = false;
		s->nopen--;
	}
	s->nall--;
	pthread_mutex_unlock(&s->lock);
	store_obj_free_i(o);
}

struct store_obj *store_obj_ref(struct store_obj *o)
{
	if (o)
		atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
	return o;
}

void store_obj_unref(struct store_obj *o)
{
	if (!o)
		return;
	/* the old count: 1 means this was the last reference */
	if (atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) == 1)
		obj_destroy(o);
}

/* Counted in refs first and out of it last (see store_obj_in_use()). */
struct store_obj *store_obj_ref_lease(struct store_obj *o)
{
	if (o) {
		atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&o->lease_refs, 1, memory_order_release);
	}
	return o;
}

void store_obj_unref_lease(struct store_obj *o)
{
	if (!o)
		return;
	atomic_fetch_sub_explicit(&o->lease_refs, 1, memory_order_release);
	store_obj_unref(o);
}

struct store_obj *store_create(struct store *s, uint64_t id, int *ret_err)
{
	struct store_obj *o, *found;
	int r;

	o = store_obj_new_i(s, id);
	if (o && !(o->w = calloc(1, sizeof(*o->w)))) {
		store_obj_free_i(o);
		o = NULL;
	}
	if (!o) {
		r = -ENOMEM;
		goto fail;
	}
	atomic_store_explicit(&o->refs, 1, memory_order_relaxed);
	pthread_mutex_lock(&s->lock);
	found = store_tab_find_i(&s->table, id);
	if (found)
		r = -EEXIST;
	else if (s->nopen >= s->open_max)
		r = -EMFILE; /* every descriptor the limit leaves writers is taken */
	else
		r = store_table_add_i(s, o);
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

bool store_fits(struct store *s, uint64_t size)
{
	uint64_t free_bytes, need;
	bool packed;

	need = store_pack_need_i(s, size, &packed);
	if (!packed)
		need = (size + s->unit - 1) / s->unit * s->unit;
	else if (!need)
		return true;
	pthread_mutex_lock(&s->lock);
	free_bytes = store_files_free_locked_i(s);
	pthread_mutex_unlock(&s->lock);
	return free_bytes >= need;
}

struct store_obj *store_lookup(struct store *s, uint64_t id)
{
	struct store_obj *o;

	pthread_mutex_lock(&s->lock);
	o = store_tab_find_i(&s->table, id);
	/* the table's own reference keeps it alive */
	store_obj_ref(o);
	pthread_mutex_unlock(&s->lock);
	return o;
}

bool store_has(struct store *s, uint64_t id)
{
	struct store_obj *o;

	pthread_mutex_lock(&s->lock);
	o = store_tab_find_i(&s->table, id);
	pthread_mutex_unlock(&s->lock);
	return o != NULL;
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

bool store_obj_in_use(const struct store_obj *o)
{
	unsigned own;

	unsigned leases, again, refs;

	obj_lock(o);
	own = o->linked ? 2 : 1; /* the caller's, and the table's if linked */
	obj_unlock(o);
	/* Lease references are counted in refs before lease_refs and out of
	 * it after: the fewer of the leases seen before and after refs are
	 * all in refs, so a lease taken or dropped meanwhile errs towards
	 * "in use". */
	leases = atomic_load_explicit(&o->lease_refs, memory_order_acquire);
	refs = atomic_load_explicit(&o->refs, memory_order_acquire);
	again = atomic_load_explicit(&o->lease_refs, memory_order_acquire);
	if (again < leases)
		leases = again;
	return refs > own + leases;
}

/* ---- the registrations that hang on objects ---- */

#define REGS_LOOK 16 /* objects the hand passes per new registration, at most */

static void regd_link_locked(struct store *s, struct store_obj *o)
{
	o->mprev = NULL;
	o->mnext = s->regd;
	if (s->regd)
		s->regd->mprev = o;
	else
		s->regd_tail = o;
	s->regd = o;
}

static void regd_unlink_locked(struct store *s, struct store_obj *o)
{
	if (o->mprev)
		o->mprev->mnext = o->mnext;
	else
		s->regd = o->mnext;
	if (o->mnext)
		o->mnext->mprev = o->mprev;
	else
		s->regd_tail = o->mprev;
	o->mprev = o->mnext = NULL;
}

static void regd_push_locked(struct store *s, struct store_obj *o)
{
	regd_link_locked(s, o);
	o->pinned = true;
	s->npinned++;
}

static void regd_del_locked(struct store *s, struct store_obj *o)
{
	if (!o->pinned)
		return;
	regd_unlink_locked(s, o);
	o->pinned = false;
	s->npinned--;
}

/*
 * Does nobody use @o but the table (if linked), its leases and @extra
 * references the caller knows of?  Leases are read before and after refs,
 * as in store_obj_in_use(): a race errs towards "in use".
 */
static bool obj_idle(const struct store_obj *o, unsigned extra)
{
	unsigned leases, again, refs;

	leases = atomic_load_explicit(&o->lease_refs, memory_order_acquire);
	refs = atomic_load_explicit(&o->refs, memory_order_acquire);
	again = atomic_load_explicit(&o->lease_refs, memory_order_acquire);
	if (again < leases)
		leases = again;
	return refs <= (o->linked ? 1u : 0u) + extra + leases;
}

/*
 * The hand of the registrations' clock, at the cold end of s->regd:
 * NULL if the store keeps no more than regs_max, else the object it
 * passes, moved to the hot end, with a reference for the caller if its
 * registration may go (not used since the hand last passed, linked, and
 * idle: see regs_trim()).
 */
static struct store_obj *regs_hand(struct store *s, bool *ret_more)
{
	struct store_obj *o;

	pthread_mutex_lock(&s->lock);
	o = s->npinned > s->regs_max ? s->regd_tail : NULL;
	*ret_more = o != NULL;
	if (o) {
		regd_unlink_locked(s, o);
		regd_link_locked(s, o);
		/* an unlinked object may be at its last reference: not
		 * ours to take (it goes soon, and its registration with it) */
		if (atomic_exchange_explicit(&o->map_used, false, memory_order_relaxed) ||
		    !o->linked || !obj_idle(o, 0))
			o = NULL;
		else
			atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
	}
	pthread_mutex_unlock(&s->lock);
	return o;
}

/*
 * Keep at most s->regs_max registrations: drop those of idle objects
 * from the cold end (a clock, as the idle mappings'), up to REGS_LOOK of
 * them looked at.  An object is idle when nobody holds it but the table
 * and leases: a transport uses a registration only while it holds a
 * reference (a GET in flight, a rendezvous until FIN), and looks for one
 * (store_obj_attach(NULL)) only under obj->lock after taking it, so
 * either the check below sees that reference or the transport finds the
 * slot empty and registers anew.  The registration is dropped with no
 * lock held, before the mapping may go back to the cache of idle ones
 * (our reference keeps it from being taken away meanwhile).
 */
static void regs_trim(struct store *s)
{
	void (*drop)(void *reg) = NULL;
	struct store_obj *o;
	unsigned looked;
	bool more = true;
	void *reg;

	for (looked = 0; looked < REGS_LOOK && more; looked++) {
		o = regs_hand(s, &more);
		if (!o)
			continue;
		reg = NULL;
		obj_lock(o);
		if (o->reg && obj_idle(o, 1)) {
			reg = o->reg;
			o->reg = NULL;
			pthread_mutex_lock(&s->lock);
			drop = s->reg_drop;
			regd_del_locked(s, o);
			s->regs_dropped++;
			pthread_mutex_unlock(&s->lock);
		}
		obj_unlock(o);
		if (reg) {
			drop(reg);
			store_file_mapped_add_i(o);
		}
		store_obj_unref(o);
	}
}

int store_obj_attach(struct store_obj *o, void *reg, void (*drop)(void *reg), void **ret_cur)
{
	struct store *s;
	int r = 0;

	if (!o || (reg && !drop))
		return -EINVAL;
	/* a pending object's memory is not final, nor served */
	if (!obj_is_sealed(o))
		return -EINVAL;
	if (o->packed)
		return -EOPNOTSUPP; /* never registered whole: see store_pack.c */
	s = obj_store(o);
	obj_lock(o);
	if (reg && !o->reg) {
		pthread_mutex_lock(&s->lock);
		/* one drop for all of a store's registrations, the first's */
		if (s->reg_drop && s->reg_drop != drop) {
			pthread_mutex_unlock(&s->lock);
			obj_unlock(o);
			return -EINVAL;
		}
		s->reg_drop = drop;
		o->reg = reg;
		/* it reaches the mapping: never taken away while it hangs
		 * (the object leaves the cache of idle mappings meanwhile) */
		store_file_mapped_del_i(s, o);
		regd_push_locked(s, o);
		atomic_store_explicit(&o->map_used, false, memory_order_relaxed);
		pthread_mutex_unlock(&s->lock);
	} else {
		r = reg ? -EEXIST : 0;
		if (ret_cur)
			*ret_cur = o->reg;
		/* for the clock (regs_trim()) */
		if (o->reg)
			atomic_store_explicit(&o->map_used, true, memory_order_relaxed);
	}
	obj_unlock(o);
	if (reg && !r)
		regs_trim(s);
	return r;
}

bool store_obj_packed(const struct store_obj *o)
{
	/* immutable once sealed (the acquire orders it) */
	return obj_is_sealed(o) && o->packed;
}

int store_obj_pages(struct store_obj *o, struct store_pages *ret)
{
	if (!store_obj_packed(o))
		return -EINVAL;
	store_pack_pages_i(o, ret);
	return 0;
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
	if (!buf || !len)
		return;
	/* the log's lock is not part of the object's value */
	store_catalog_path_i((struct store_obj *)o, buf, len);
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

	obj_lock(o);
	if (obj_sealed_locked(o)) {
		r = -EACCES;
		goto out;
	}
	if (!len)
		goto out;
	r = store_file_grow_i(o, end, false);
	if (r < 0)
		goto out;
	size = obj_size(o);
	/* bytes the running checksum already holds change: it starts over;
	 * a write past them (appending) keeps it */
	if (off < o->w->hash_claim) {
		o->w->gen++;
		o->w->hash_claim = 0;
	}
	if (off > size)
		obj_zero(o, size, off);
	memcpy(o->map + off, buf, len);
	if (end > size)
		obj_set_size(o, end);
out:
	obj_unlock(o);
	return r;
}

/* Set the size of a pending object; growth is zeroed if @zero, else left
 * as the pages had it (the caller writes every byte).  o->lock held. */
static int obj_resize(struct store_obj *o, uint64_t size, bool zero)
{
	uint64_t old = obj_size(o);
	int r;

	if (obj_sealed_locked(o))
		return -EACCES;
	r = check_range(size, 0);
	if (r < 0)
		return r;
	o->w->gen++;
	o->w->hash_claim = 0;
	/* a shrinking object keeps its file's length until the seal */
	if (size > old) {
		r = store_file_grow_i(o, size, true);
		if (r < 0)
			return r;
		if (zero)
			obj_zero(o, old, size);
	}
	obj_set_size(o, size);
	return 0;
}

static int resize_locked(struct store_obj *o, uint64_t size, bool zero)
{
	int r;

	if (!o)
		return -EINVAL;
	obj_lock(o);
	r = obj_resize(o, size, zero);
	obj_unlock(o);
	return r;
}

int store_truncate(struct store_obj *o, uint64_t size)
{
	return resize_locked(o, size, true);
}

int store_reserve(struct store_obj *o, uint64_t size)
{
	/* zeroing the pages the receiver is about to overwrite would cost
	 * the open a pass over all of them (docs/benchmarks.md,
	 * store_reserve()); what the pages held stays unreadable, because
	 * readers of a pending fetched object wait for the bytes they ask
	 * for, and only a sealed object is served to others */
	return resize_locked(o, size, false);
}

/* ---- reading ---- */

ssize_t store_read(struct store_obj *o, void *buf, size_t len, uint64_t off)
{
	bool sealed;
	uint64_t size, n = 0;
	uint8_t *map = NULL;
	int r;

	if (!o || (!buf && len))
		return -EINVAL;
	sealed = obj_is_sealed(o);
	if (sealed) {
		r = store_file_mapping_i(o, &map);
		if (r < 0)
			return r;
	} else {
		obj_lock(o);
		map = o->map;
	}
	size = obj_size(o);
	if (off < size) {
		n = min_u64(min_u64(len, size - off), SSIZE_MAX);
		memcpy(buf, map + off, n);
	}
	if (!sealed)
		obj_unlock(o);
	return (ssize_t)n;
}

/* Point @iov at [off, off+len) of @o (clipped to its size), whose bytes
 * are at @map.  o->lock held, or @o sealed.  The number of entries used;
 * *@ret_bytes their total. */
static int obj_iov(const struct store_obj *o, uint8_t *map, uint64_t off, size_t len,
		   struct iovec *iov, int max_iov, size_t *ret_bytes)
{
	uint64_t size = obj_size(o);
	size_t n = off < size ? (size_t)min_u64(len, size - off) : 0;

	*ret_bytes = 0;
	if (!n || !max_iov)
		return 0;
	iov[0].iov_base = map + off;
	iov[0].iov_len = n;
	*ret_bytes = n;
	return 1;
}

int store_obj_iov(struct store_obj *o, uint64_t off, size_t len, struct iovec *iov, int max_iov,
		  size_t *ret_bytes)
{
	bool sealed;
	size_t bytes;
	uint8_t *map;
	int used;

	if (!o || max_iov < 0 || (!iov && max_iov))
		return -EINVAL;
	sealed = obj_is_sealed(o);
	if (sealed) {
		used = store_file_mapping_i(o, &map);
		if (used < 0)
			return used;
	} else {
		obj_lock(o);
		map = o->map;
	}
	used = obj_iov(o, map, off, len, iov, max_iov, &bytes);
	if (!sealed)
		obj_unlock(o);
	if (ret_bytes)
		*ret_bytes = bytes;
	return used;
}

#define HASH_AHEAD_IOV 16

/*
 * Fold [w->hashed, @end) into the running checksum (see store_hash_ahead()
 * and store_hash_follow()).  With @follow, only if a write from @from
 * continues what is folded, and starting over only from 0.
 */
static int hash_ahead(struct store_obj *o, uint64_t end, bool follow, uint64_t from)
{
	struct iovec iov[HASH_AHEAD_IOV];
	struct store_writing *w;
	size_t bytes;
	int r = 0, n, i;

	if (!o)
		return -EINVAL;
	if (pthread_mutex_trylock(obj_hash_lock(o)))
		return 0; /* another thread is at it; sealing hashes what is left */
	for (;;) {
		obj_lock(o);
		if (obj_sealed_locked(o) || !o->w) {
			obj_unlock(o);
			r = -EACCES;
			break;
		}
		w = o->w; /* stays until the seal, which takes our hash lock */
		if (!w->hst || w->hash_gen != w->gen) {
			/* first use, or the bytes changed since: start over
			 * (a writer only from 0, so that each of its bytes is
			 * hashed at most once) */
			if (follow && from) {
				obj_unlock(o);
				break;
			}
			if (!w->hst && !(w->hst = XXH3_createState())) {
				obj_unlock(o);
				r = -ENOMEM;
				break;
			}
			XXH3_128bits_reset(w->hst);
			bsum_stream_reset(&w->bs);
			w->hashed = 0;
			w->hash_gen = w->gen;
		}
		n = 0;
		/* a writer past the end of what is folded left a gap that
		 * another write may still fill */
		if (w->hashed < end && !(follow && w->hashed < from))
			n = obj_iov(o, o->map, w->hashed,
				    (size_t)min_u64(end - w->hashed, SIZE_MAX), iov, HASH_AHEAD_IOV,
				    &bytes);
		if (n > 0)
			w->hash_claim = w->hashed + bytes;
		obj_unlock(o);
		if (n <= 0)
			break;
		/* outside o->lock: a pending object's mappings stay until it
		 * is sealed (which takes our hash lock), and a change to the
		 * bytes moves w->gen on */
		for (i = 0; i < n && r == 0; i++) {
			XXH3_128bits_update(w->hst, iov[i].iov_base, iov[i].iov_len);
			if (!w->no_sums)
				r = bsum_stream_update(&w->bs, iov[i].iov_base, iov[i].iov_len);
		}
		if (r < 0) {
			w->hash_gen = w->gen - 1; /* start over at the seal */
			break;
		}
		w->hashed += bytes;
		follow = false; /* the rest of [from, end) is contiguous */
	}
	pthread_mutex_unlock(obj_hash_lock(o));
	return r;
}

void store_skip_sums(struct store_obj *o)
{
	obj_lock(o);
	if (o->w)
		o->w->no_sums = true;
	obj_unlock(o);
}

int store_hash_ahead(struct store_obj *o, uint64_t end)
{
	return hash_ahead(o, end, false, 0);
}

int store_hash_follow(struct store_obj *o, uint64_t off, uint64_t end)
{
	return hash_ahead(o, end, true, off);
}

/* The checksum of [0, size) into o->csum, and its block sums into
 * *@ret_sums if asked (NULL for an object of one block, or out of
 * memory: the sums are a help, never the identity), from what
 * store_hash_ahead() did if it still holds.  The object's hash lock and
 * o->lock held. */
static int obj_hash(struct store_obj *o, uint64_t size, struct bsums **ret_sums)
{
	struct store_writing *w = o->w;
	struct bsum_stream fresh = {0}, *bs = &fresh;

	if (w && w->hst && w->hash_gen == w->gen && w->hashed <= size) {
		XXH3_128bits_update(w->hst, o->map + w->hashed, size - w->hashed);
		hash_digest(w->hst, o->csum);
		bs = &w->bs;
	} else {
		store_hash_i(o->map, size, o->csum);
	}
	if (ret_sums)
		*ret_sums = bsum_stream_finish(bs, o->map, size);
	bsum_stream_release(&fresh);
	if (w && w->hst) {
		XXH3_freeState(w->hst);
		w->hst = NULL;
	}
	if (w)
		bsum_stream_release(&w->bs);
	return 0;
}

/* ---- seal, rename, unlink ---- */

int store_seal(struct store_obj *o, const char *path, int64_t mtime_ns)
{
	return store_seal_sums(o, path, mtime_ns, NULL);
}

int store_seal_sums(struct store_obj *o, const char *path, int64_t mtime_ns,
		    struct bsums **ret_sums)
{
	struct bsums *sums = NULL;
	struct store *s;
	uint64_t size;
	int r;

	if (!o)
		return -EINVAL;
	if (path && strnlen(path, OBJFS_PATH_MAX) >= OBJFS_PATH_MAX)
		return -ENAMETOOLONG;
	s = obj_store(o);
	pthread_mutex_lock(obj_hash_lock(o));
	obj_lock(o);
	if (obj_sealed_locked(o)) {
		r = -EACCES;
		goto out;
	}
	if (!o->linked) {
		r = -ENOENT;
		goto out;
	}
	size = obj_size(o);
	r = store_file_seal_i(o);
	if (r < 0)
		goto out;
	r = obj_hash(o, size, ret_sums ? &sums : NULL);
	if (r < 0)
		goto out;
	o->mtime_ns = mtime_ns;
	if (path) {
		r = store_catalog_write_i(o, path); /* the log keeps the path */
		if (r < 0)
			goto out;
	} else {
		store_catalog_set_path_i(o, NULL); /* "", and not recorded */
	}
	store_file_freeze_i(o);
	pthread_mutex_lock(&s->lock);
	s->npending--;
	s->nobjects++;
	if (o->counted_open) {
		o->counted_open = false; /* its descriptor is closed */
		s->nopen--;
	}
	/* publish the final mapping to lock-free readers */
	atomic_store_explicit(&o->sealed, true, memory_order_release);
	lru_push_locked(s, o);
	pthread_mutex_unlock(&s->lock);
	/* the writer's mapping joins the cache of idle ones */
	store_file_mapped_add_i(o);
out:
	if (!r) {
		/* what only writing needed (its old mappings went with the
		 * seal's file work) */
		free(o->w);
		o->w = NULL;
	}
	obj_unlock(o);
	pthread_mutex_unlock(obj_hash_lock(o));
	if (!r && ret_sums)
		*ret_sums = sums;
	else
		free(sums);
	return r;
}

int store_set_path(struct store_obj *o, const char *path)
{
	int r;

	if (!o)
		return -EINVAL;
	if (!path)
		path = "";
	if (strnlen(path, OBJFS_PATH_MAX) >= OBJFS_PATH_MAX)
		return -ENAMETOOLONG;
	obj_lock(o);
	if (!obj_sealed_locked(o))
		r = -EINVAL;
	else if (!o->linked)
		r = -ENOENT;
	else
		r = store_catalog_write_i(o, path);
	obj_unlock(o);
	return r;
}

void store_unlink(struct store_obj *o)
{
	uint64_t seq = 0;
	struct store *s;
	bool renamed;
	int r;

	if (!o)
		return;
	s = obj_store(o);
	obj_lock(o);
	if (!o->linked) {
		obj_unlock(o);
		return;
	}
	/* the record goes first, so a new object with this id cannot lose its own */
	if (obj_sealed_locked(o)) {
		r = store_catalog_remove_i(o);
		if (r < 0)
			log_debug("store: cannot remove record of %016" PRIx64 ": %s", o->id,
				  strerror(-r));
	}
	renamed = store_file_unlink_i(o, &seq);
	pthread_mutex_lock(&s->lock);
	store_tab_del_i(&s->table, o);
	if (renamed)
		o->gone_seq = seq; /* hnext's word: out of the table now */
	o->linked = false;
	o->unlinked = true;
	/* its mapping stays until the last reference goes */
	store_file_mapped_del_i(s, o);
	lru_del_locked(s, o);
	/* on s->gone until freed, for store_close() */
	o->lnext = s->gone;
	if (s->gone)
		s->gone->lprev = o;
	s->gone = o;
	o->lru_list = LRU_GONE;
	/* until the last reference goes: a reader here, a peer being served */
	s->draining += o->alloc;
	if (obj_sealed_locked(o))
		s->nobjects--;
	else
		s->npending--;
	pthread_mutex_unlock(&s->lock);
	obj_unlock(o);
	store_obj_unref(o);
}

int store_unlink_id(struct store *s, uint64_t id)
{
	struct store_obj *o = store_lookup(s, id);

	if (!o)
		return -ENOENT;
	store_unlink(o);
	store_obj_unref(o);
	return 0;
}

int store_foreach(struct store *s, int (*cb)(struct store_obj *o, void *arg), void *arg)
{
	struct store_obj **list, *o;
	size_t n = 0, i, at = 0;
	int r = 0;

	pthread_mutex_lock(&s->lock);
	list = malloc((s->table.count + 1) * sizeof(*list));
	if (list) {
		for (o = store_tab_next_i(&s->table, NULL, &at); o;
		     o = store_tab_next_i(&s->table, o, &at)) {
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
	/* first: it takes s->lock itself */
	uint64_t held = store_files_held_i(s);
	struct slab_stats slab;

	store_files_inodes_i(s, &ret->inodes, &ret->inodes_free);

	pthread_mutex_lock(&s->lock);
	ret->capacity = s->capacity;
	ret->used = s->used + held;
	ret->draining = s->draining + held;
	ret->held = held;
	ret->pool = s->pool_bytes + s->prefault_hold;
	ret->files_new = s->files_new;
	ret->files_reused = s->files_reused;
	ret->fs = s->kind;
	ret->page = s->unit;
	ret->objects = s->nobjects;
	ret->pending = s->npending;
	ret->objects_all = s->nall;
	ret->objects_mem =
	    (uint64_t)(s->table.b ? sizeof(*s->table.b) << (64 - s->table.shift) : 0);
	pthread_mutex_lock(&s->obj_pool_lock);
	slab_stats(s->obj_pool, &slab);
	pthread_mutex_unlock(&s->obj_pool_lock);
	ret->objects_mem += (slab.blocks - slab.empty) * SLAB_BYTES;
	ret->open = s->nopen;
	ret->open_max = s->open_max;
	ret->mapped = s->nmapped;
	ret->pinned = s->npinned;
	ret->sole = s->nsole;
	ret->sole_bytes = s->sole_bytes;
	ret->sole_one = s->sole ? s->sole->id : 0;
	ret->regs_max = s->regs_max;
	ret->regs_dropped = s->regs_dropped;
	ret->map_cache = s->map_cache;
	ret->maps_made = s->maps_made;
	ret->maps_dropped = s->maps_dropped;
	ret->bad_records = s->bad_records;
	pthread_mutex_unlock(&s->lock);
	store_pack_stats_i(s, ret);
	pthread_mutex_lock(&s->log_lock);
	ret->catalog_bytes = s->log_size;
	ret->catalog_lines = s->log_lines;
	ret->catalog_live = s->log_live;
	ret->compactions = s->compactions;
	pthread_mutex_unlock(&s->log_lock);
}

static uint64_t mib_up(uint64_t bytes)
{
	return (bytes + (1ULL << 20) - 1) >> 20;
}

void store_describe_use(struct store *s, char *buf, size_t len)
{
	struct store_stats st;
	int n;

	store_stats(s, &st);
	n = snprintf(buf, len, "%" PRIu64 " of %" PRIu64 " MiB used", mib_up(st.used),
		     mib_up(st.capacity));
	if (st.draining && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n,
			      "; %" PRIu64 " MiB held by deleted objects still mapped or open",
			      mib_up(st.draining));
	if (st.inodes && !st.inodes_free && n >= 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, "; no inode left on the store's filesystem");
}

/* ---- open and close ---- */

/* What a limit of @n leaves for objects once @spare (within [@lo, @hi])
 * is kept for everything else. */
static uint64_t limit_left(uint64_t n, uint64_t spare, uint64_t lo, uint64_t hi)
{
	spare = spare < lo ? lo : spare > hi ? hi : spare;
	return n > 2 * spare ? n - spare : n / 2;
}

/* vm.max_map_count, or 0 if unknown. */
static uint64_t max_map_count(void)
{
	uint64_t n = 0;
	FILE *f = fopen("/proc/sys/vm/max_map_count", "re");

	if (f) {
		if (fscanf(f, "%" SCNu64, &n) != 1)
			n = 0;
		fclose(f);
	}
	return n;
}

/*
 * How many objects may be written or fetched at once: each holds a
 * descriptor and a mapping until it is sealed (a sealed object holds
 * neither at rest), so the open-files limit and vm.max_map_count bound
 * them.  Of the open-files limit, util_fd_budget() (common/util.h) keeps a
 * quarter (64 to 1024) for everything else, the transport's served
 * connections among it (an eighth, 16 to 256, sized by the same rule),
 * so that both add up below the limit.  Of vm.max_map_count, an eighth
 * (1024 to 8192) is kept for libraries, thread stacks, the allocator,
 * and the cache of mapped objects.
 */
static uint64_t open_max(uint64_t map_cache)
{
	uint64_t max, n = max_map_count();
	struct util_fd_budget b;

	util_fd_budget(util_nofile_limit(), &b);
	max = b.open_max;
	if (n > map_cache)
		max = min_u64(max, limit_left(n - map_cache, n / 8, 1024, 8192));
	return max;
}

/* The default of store_config.map_cache: 256, and at most 1/64 of
 * vm.max_map_count. */
static uint64_t map_cache_default(void)
{
	uint64_t n = max_map_count();

	return n ? min_u64(STORE_MAP_CACHE_DEFAULT, max_u64(n / 64, 1)) : STORE_MAP_CACHE_DEFAULT;
}

/* Tear down a store, whole or half built.  Objects go whatever their refs. */
static void store_free(struct store *s)
{
	struct store_obj *o, *next;
	size_t at = 0;
	unsigned i;

	if (!s)
		return;
	for (o = store_tab_next_i(&s->table, NULL, &at); o; o = next) {
		next = store_tab_next_i(&s->table, o, &at);
		store_obj_free_i(o);
	}
	store_tab_free_i(&s->table);
	for (o = s->gone; o; o = next) {
		next = o->lnext;
		store_obj_free_i(o);
	}
	store_pack_close_i(s);
	store_files_close_i(s);
	if (s->notes_fd >= 0)
		close(s->notes_fd);
	if (s->objects_fd >= 0)
		close(s->objects_fd);
	if (s->log_fd >= 0)
		close(s->log_fd);
	/* closing the lock file releases the flock */
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	if (s->dir_fd >= 0)
		close(s->dir_fd);
	pthread_mutex_destroy(&s->note_lock);
	for (i = 0; i < STORE_HASH_LOCKS; i++)
		pthread_mutex_destroy(&s->hash_locks[i]);
	for (i = 0; i < STORE_OBJ_LOCKS; i++)
		pthread_mutex_destroy(&s->obj_locks[i]);
	slab_pool_free(s->obj_pool);
	pthread_mutex_destroy(&s->obj_pool_lock);
	pthread_mutex_destroy(&s->log_lock);
	pthread_mutex_destroy(&s->pack_lock);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void store_close(struct store *s)
{
	store_free(s);
}

/* Give up pooled files until the pool fits beside the objects.  At open. */
static void pool_fit(struct store *s)
{
	while (s->npool && s->used + s->pool_bytes > s->capacity) {
		struct store_pooled *p = &s->pool[--s->npool];
		char name[32];

		snprintf(name, sizeof(name), ".free-%016" PRIx64, p->seq);
		unlinkat(s->data_fd, name, 0);
		s->pool_bytes -= p->len;
	}
}

struct store *store_open(const struct store_config *cfg, int *ret_err, uint64_t *ret_err_detail)
{
	struct store *s = NULL;
	uint64_t cap, adopted = 0;
	unsigned i;
	int r;

	if (!cfg || !cfg->dir || !*cfg->dir) {
		r = -EINVAL;
		goto fail;
	}
	cap = cfg->capacity / STORE_PAGE * STORE_PAGE;
	if (cap < (1ULL << 20) || cap > STORE_CAPACITY_MAX ||
	    cfg->pack_max > STORE_PACK_MAX_LIMIT) {
		r = -EINVAL;
		goto fail;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		r = -ENOMEM;
		goto fail;
	}
	s->dir_fd = s->objects_fd = s->notes_fd = s->lock_fd = s->data_fd = s->log_fd = -1;
	s->capacity = cap;
	s->map_cache = cfg->map_cache ? cfg->map_cache : map_cache_default();
	/* leave the rest of vm.max_map_count to writers and the process */
	if (max_map_count() && s->map_cache > max_map_count() / 2)
		s->map_cache = max_map_count() / 2;
	s->regs_max = cfg->regs_max ? cfg->regs_max : STORE_REGS_DEFAULT;
	/* each may map its object twice (transport_rreg_object()): an eighth of
	 * vm.max_map_count at most */
	if (max_map_count() && s->regs_max > max_map_count() / 16)
		s->regs_max = max_u64(max_map_count() / 16, 1);
	/* a registered object may map its file twice (transport_rreg_object()), and
	 * each chunk of packed objects is mapped while the store is open: as
	 * many as the capacity holds, and a class each besides */
	s->open_max = open_max(
	    s->map_cache + 2 * s->regs_max +
	    (cfg->pack_max ? cap / store_pack_chunk_len(cap) + STORE_PACK_CLASSES_MAX : 0));
	s->verify = cfg->verify;
	s->reuse = !cfg->no_reuse;
	/* default attributes: initialization cannot fail on Linux */
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->note_lock, NULL);
	for (i = 0; i < STORE_HASH_LOCKS; i++)
		pthread_mutex_init(&s->hash_locks[i], NULL);
	for (i = 0; i < STORE_OBJ_LOCKS; i++)
		pthread_mutex_init(&s->obj_locks[i], NULL);
	pthread_mutex_init(&s->obj_pool_lock, NULL);
	pthread_mutex_init(&s->log_lock, NULL);
	pthread_mutex_init(&s->pack_lock, NULL);
	s->obj_pool = slab_pool_new_owned(sizeof(struct store_obj), s);
	if (!s->obj_pool) {
		r = -ENOMEM;
		goto fail;
	}

	r = store_dir_open_i(s, cfg->dir);
	if (r < 0)
		goto fail;
	r = store_files_open_i(s, cfg->dir, cfg->own_tmpfs);
	if (r < 0)
		goto fail;
	/* slot sizes are multiples of 64 bytes */
	r = store_pack_open_i(s, (cfg->pack_max + 63) / 64 * 64);
	if (r < 0)
		goto fail;
	r = store_catalog_adopt_i(s, &adopted);
	if (r < 0)
		goto fail;
	if (adopted > s->capacity) {
		r = -EFBIG;
		if (ret_err_detail)
			*ret_err_detail = adopted;
		goto fail;
	}
	pool_fit(s);
	store_files_sweep_i(s);
	store_notes_cleanup_i(s);
	/* files an earlier run left may still be mapped by its readers */
	(void)store_files_held_i(s);
	log_debug("store: opened %s, %" PRIu64 " bytes, %" PRIu64 " objects adopted, %" PRIu64
		  " bad records",
		  cfg->dir, s->capacity, s->nobjects, s->bad_records);
	return s;

fail:
	store_free(s);
	if (ret_err)
		*ret_err = r;
	return NULL;
}
