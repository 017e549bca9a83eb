/*
 * store_pack: small objects packed into slots of shared chunk files.
 *
 * An object of at most s->pack_max bytes has no file of its own: it sits
 * in a slot of a chunk, data/.pack-<n>-<slot size>, a sparse file mapped
 * read-write once for as long as the store is open.  This file owns the
 * chunks, their slots and the count of used slots on each page (a page
 * is charged to the capacity while a used slot touches it), a writer's
 * slot, and the chunks' adoption at open.  docs/design.md, "Packed
 * objects, in the code", has the size classes, the pages, an object's
 * life and the restart.
 *
 * Locks: s->pack_lock guards every chunk's bits, page counts and list,
 * the chunk table and the counts below; it is taken under obj->lock and
 * above s->lock (charges).  A slot's bytes belong to its object (o->lock,
 * or immutable once sealed).
 */
#define _GNU_SOURCE
#include "store_i.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "log.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define PACK_PREFIX ".pack-"
#define PACK_CHUNKS_MAX (1u << 24) /* chunk numbers: 8 hex digits, and room */

struct store_chunk {
	uint32_t no;	 /* data/.pack-<no>-<slot> */
	uint32_t slot;	 /* bytes a slot */
	int cls;	 /* its class in s->pack_cls, or -1 (an old T's) */
	uint32_t nslots; /* slots in the chunk */
	uint32_t nfree;	 /* pack_lock */
	uint32_t hint;	 /* pack_lock: no free slot in words below */
	uint8_t *map;	 /* len bytes, read-write */
	uint64_t len;	 /* the chunk file's length (s->pack_chunk when made) */
	/* pack_lock: on s->pack_free[cls] while it has a free slot */
	struct store_chunk *prev, *next;
	bool listed;
	uint16_t *pages; /* pack_lock: used slots touching each page (after bits) */
	uint64_t bits[]; /* pack_lock: used slots */
};

/* A slot an object left while pending (w->old_slots). */
struct store_slot {
	struct store_chunk *c;
	uint32_t off;
	struct store_slot *next;
};

static struct log_ratelimit pack_rl =
    LOG_RATELIMIT_INIT("chunk files that could not be made", 10000, 5);
static struct log_ratelimit badchunk_rl =
    LOG_RATELIMIT_INIT("chunk files deleted at open", 10000, 10);

/* ---- classes ---- */

static uint32_t up64(uint64_t n)
{
	return (uint32_t)((n + 63) / 64 * 64);
}

static void classes_make(struct store *s, uint32_t max)
{
	uint32_t c = 64;

	uint32_t next, page;

	s->pack_ncls = 0;
	while (c < max && s->pack_ncls < STORE_PACK_CLASSES_MAX - 1) {
		s->pack_cls[s->pack_ncls++] = c;
		next = c < 1024 ? c + 64 : up64((uint64_t)c * 5 / 4);
		/* whole pages in between too: objects of 4, 8, 16 KiB are
		 * common, and would waste a fifth of their slot */
		page = (c / STORE_PAGE + 1) * STORE_PAGE;
		c = page < next ? page : next;
	}
	s->pack_cls[s->pack_ncls++] = max;
}

/* The class of slots of @size bytes or more: the smallest. */
static int class_of(const struct store *s, uint64_t size)
{
	unsigned lo = 0, hi = s->pack_ncls - 1;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;

		if (s->pack_cls[mid] >= size)
			hi = mid;
		else
			lo = mid + 1;
	}
	return (int)lo;
}

/* ---- chunks ---- */

static void chunk_name(uint32_t no, uint32_t slot, char *buf, size_t len)
{
	snprintf(buf, len, PACK_PREFIX "%08" PRIx32 "-%" PRIu32, no, slot);
}

static struct store_chunk *chunk_alloc(uint32_t no, uint32_t slot, uint8_t *map, uint64_t len)
{
	uint32_t nslots = (uint32_t)(len / slot);
	size_t words = (nslots + 63) / 64;
	struct store_chunk *c =
	    calloc(1, sizeof(*c) + words * sizeof(uint64_t) + len / STORE_PAGE * sizeof(uint16_t));

	if (!c)
		return NULL;
	c->pages = (uint16_t *)(c->bits + words);
	c->len = len;
	c->no = no;
	c->slot = slot;
	c->nslots = c->nfree = nslots;
	c->map = map;
	c->cls = -1;
	return c;
}

/* Map chunk file @fd read-write, huge pages off (a page is the unit of
 * what a chunk holds). */
static uint8_t *chunk_map(int fd, uint64_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		return NULL;
	(void)madvise(p, len, MADV_NOHUGEPAGE);
	return p;
}

/* Put @c in the table at its number.  pack_lock held, or at open. */
static int table_put(struct store *s, struct store_chunk *c)
{
	if (c->no >= s->pack_nchunks_cap) {
		uint32_t cap = s->pack_nchunks_cap ? s->pack_nchunks_cap : 64;
		struct store_chunk **v;

		while (cap <= c->no)
			cap *= 2;
		v = realloc(s->pack_chunks, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		memset(v + s->pack_nchunks_cap, 0, (cap - s->pack_nchunks_cap) * sizeof(*v));
		s->pack_chunks = v;
		s->pack_nchunks_cap = cap;
	}
	s->pack_chunks[c->no] = c;
	s->pack_nchunks++;
	return 0;
}

static void list_add(struct store *s, struct store_chunk *c)
{
	if (c->listed || c->cls < 0)
		return;
	c->prev = NULL;
	c->next = s->pack_free[c->cls];
	if (c->next)
		c->next->prev = c;
	s->pack_free[c->cls] = c;
	c->listed = true;
}

static void list_del(struct store *s, struct store_chunk *c)
{
	if (!c->listed)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		s->pack_free[c->cls] = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
	c->listed = false;
}

/* A new empty chunk of class @cls.  pack_lock held. */
static int chunk_new(struct store *s, int cls, struct store_chunk **ret)
{
	uint32_t no, slot = s->pack_cls[cls];
	struct store_chunk *c;
	char name[48];
	uint8_t *map;
	int fd, r;

	for (no = 0; no < s->pack_nchunks_cap && s->pack_chunks[no]; no++)
		;
	if (no >= PACK_CHUNKS_MAX)
		return -ENOSPC;
	chunk_name(no, slot, name, sizeof(name));
	fd = openat(s->data_fd, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		r = -errno;
		goto fail;
	}
	if (ftruncate(fd, (off_t)s->pack_chunk) < 0 || !(map = chunk_map(fd, s->pack_chunk))) {
		r = -errno;
		close(fd);
		unlinkat(s->data_fd, name, 0);
		goto fail;
	}
	close(fd);
	c = chunk_alloc(no, slot, map, s->pack_chunk);
	if (!c || table_put(s, c) < 0) {
		free(c);
		munmap(map, s->pack_chunk);
		unlinkat(s->data_fd, name, 0);
		return -ENOMEM;
	}
	c->cls = cls;
	s->pack_chunks_made++;
	list_add(s, c);
	*ret = c;
	return 0;

fail:
	log_msg_limited(&pack_rl, LOGL_WARN, "store: cannot make chunk data/%s: %s", name,
			strerror(-r));
	return r;
}

/* Delete empty chunk @c.  pack_lock held. */
static void chunk_delete(struct store *s, struct store_chunk *c)
{
	char name[48];

	list_del(s, c);
	s->pack_chunks[c->no] = NULL;
	s->pack_nchunks--;
	munmap(c->map, c->len);
	chunk_name(c->no, c->slot, name, sizeof(name));
	unlinkat(s->data_fd, name, 0);
	free(c);
}

/* ---- pages ---- */

static void pages_of(const struct store_chunk *c, uint32_t off, uint32_t *first, uint32_t *last)
{
	*first = off / STORE_PAGE;
	*last = (off + c->slot - 1) / STORE_PAGE;
}

/* Punch out pages [@from, @to) of @c: their memory goes. */
static void pages_punch(struct store_chunk *c, uint32_t from, uint32_t to)
{
	if (from < to && madvise(c->map + (size_t)from * STORE_PAGE,
				 (size_t)(to - from) * STORE_PAGE, MADV_REMOVE) < 0)
		log_debug("store: cannot punch pages of chunk %" PRIu32 ": %s", c->no,
			  strerror(errno));
}

/*
 * Count slot @off of @c as used on its pages, charging and faulting in
 * those that were empty.  pack_lock held.  0, -ENOSPC.
 */
static int pages_get(struct store *s, struct store_chunk *c, uint32_t off)
{
	uint32_t first, last, p, n = 0, lo = UINT32_MAX, hi = 0;
	int r;

	pages_of(c, off, &first, &last);
	for (p = first; p <= last; p++)
		if (!c->pages[p]) {
			n++;
			lo = lo < p ? lo : p;
			hi = p;
		}
	if (n) {
		r = store_files_charge_i(s, (uint64_t)n * STORE_PAGE);
		if (r < 0)
			return r;
		/* the empty pages lie in [lo, hi], all but the slot's others */
		if (madvise(c->map + (size_t)lo * STORE_PAGE, (size_t)(hi - lo + 1) * STORE_PAGE,
			    MADV_POPULATE_WRITE) < 0 &&
		    errno != EINVAL) {
			r = errno == ENOMEM || errno == EFAULT ? -ENOSPC : -errno;
			store_files_uncharge_i(s, (uint64_t)n * STORE_PAGE);
			return r;
		}
		s->pack_pages += n;
	}
	for (p = first; p <= last; p++)
		c->pages[p]++;
	return 0;
}

/* Slot @off of @c is no longer used: punch out and uncharge the pages
 * it leaves empty.  pack_lock held. */
static void pages_put(struct store *s, struct store_chunk *c, uint32_t off)
{
	uint32_t first, last, p, run, n = 0;

	pages_of(c, off, &first, &last);
	for (p = first; p <= last; p++)
		c->pages[p]--;
	/* punch each run of pages left empty, before their charge goes */
	for (run = first, p = first; p <= last + 1; p++) {
		if (p <= last && !c->pages[p])
			continue;
		pages_punch(c, run, p);
		n += p - run;
		run = p + 1;
	}
	if (n) {
		store_files_uncharge_i(s, (uint64_t)n * STORE_PAGE);
		s->pack_pages -= n;
	}
}

/* ---- slots ---- */

static bool bit_get(const struct store_chunk *c, uint32_t i)
{
	return c->bits[i / 64] >> (i % 64) & 1;
}

static void bit_set(struct store_chunk *c, uint32_t i, bool v)
{
	if (v)
		c->bits[i / 64] |= 1ULL << (i % 64);
	else
		c->bits[i / 64] &= ~(1ULL << (i % 64));
}

/* The lowest free slot of @c, which has one. */
static uint32_t slot_find(struct store_chunk *c)
{
	uint32_t words = (c->nslots + 63) / 64, w;

	for (w = c->hint; w < words; w++)
		if (~c->bits[w]) {
			uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(~c->bits[w]);

			if (i < c->nslots) {
				c->hint = w;
				return i;
			}
		}
	return UINT32_MAX;
}

/* A slot of class @cls: *@ret_c and *@ret_off.  0, -ENOSPC, -ENOMEM, or
 * the errno of making a chunk. */
static int slot_get(struct store *s, int cls, struct store_chunk **ret_c, uint32_t *ret_off)
{
	struct store_chunk *c;
	uint32_t i;
	int r;

	pthread_mutex_lock(&s->pack_lock);
	c = s->pack_free[cls];
	if (!c) {
		r = chunk_new(s, cls, &c);
		if (r < 0)
			goto out;
	}
	i = slot_find(c);
	if (i == UINT32_MAX) {
		r = -EIO; /* the counts lie: never */
		goto out;
	}
	r = pages_get(s, c, i * c->slot);
	if (r < 0)
		goto out;
	bit_set(c, i, true);
	if (!--c->nfree)
		list_del(s, c);
	s->pack_slots++;
	*ret_c = c;
	*ret_off = i * c->slot;
out:
	pthread_mutex_unlock(&s->pack_lock);
	return r;
}

/* Free slot @off of @c.  pack_lock held. */
static void slot_put_locked(struct store *s, struct store_chunk *c, uint32_t off)
{
	uint32_t i = off / c->slot;

	if (!bit_get(c, i))
		return;
	bit_set(c, i, false);
	pages_put(s, c, off);
	s->pack_slots--;
	if (i / 64 < c->hint)
		c->hint = i / 64;
	if (c->nfree++ == 0)
		list_add(s, c);
	/* an empty chunk goes, unless its class would have none left */
	if (c->nfree == c->nslots && (c->cls < 0 || s->pack_free[c->cls] != c || c->next))
		chunk_delete(s, c);
}

static void slot_put(struct store *s, struct store_chunk *c, uint32_t off)
{
	pthread_mutex_lock(&s->pack_lock);
	slot_put_locked(s, c, off);
	pthread_mutex_unlock(&s->pack_lock);
}

static uint32_t slot_off(const struct store_obj *o)
{
	return (uint32_t)(o->map - o->chunk->map);
}

void store_pack_pages_i(struct store_obj *o, struct store_pages *ret)
{
	struct store *s = obj_store(o);
	struct store_chunk *c = o->chunk;
	uint32_t off = slot_off(o), first, last, p;

	memset(ret, 0, sizeof(*ret));
	pages_of(c, off, &first, &last);
	pthread_mutex_lock(&s->pack_lock);
	for (p = first; p <= last; p++) {
		if ((uint64_t)p * STORE_PAGE >= off &&
		    (uint64_t)(p + 1) * STORE_PAGE <= (uint64_t)off + c->slot) {
			ret->own++;
		} else if (ret->nshared < 2) {
			ret->shared[ret->nshared].key = (uint64_t)c->no << 32 | p;
			ret->shared[ret->nshared++].used = c->pages[p];
		}
	}
	pthread_mutex_unlock(&s->pack_lock);
}

/* Keep @o's slot until the seal or the end (docs/design.md, "Packed
 * objects, in the code": hashing ahead may still read it). */
static int slot_retire(struct store_obj *o)
{
	struct store_slot *old = malloc(sizeof(*old));

	if (!old)
		return -ENOMEM;
	old->c = o->chunk;
	old->off = slot_off(o);
	old->next = o->w->old_slots;
	o->w->old_slots = old;
	return 0;
}

/* Free the slots @o left while pending. */
static void slots_retired_put(struct store_obj *o, bool keep_pages)
{
	struct store *s = obj_store(o);
	struct store_slot *m, *next;

	if (!o->w)
		return;
	for (m = o->w->old_slots; m; m = next) {
		next = m->next;
		if (!keep_pages)
			slot_put(s, m->c, m->off);
		free(m);
	}
	o->w->old_slots = NULL;
}

/* ---- what store_files.c calls (o->lock held, unless said) ---- */

bool store_pack_wants_i(const struct store_obj *o, uint64_t want)
{
	const struct store *s = obj_store(o);

	return o->packed || (want && want <= s->pack_max && o->fd < 0 && !o->has_file && !o->map &&
			     o->w && !o->w->spilled);
}

/* Move pending @o to a file of its own for @want bytes. */
static int spill(struct store_obj *o, uint64_t want, bool exact)
{
	struct store_chunk *c = o->chunk;
	uint8_t *from = o->map;
	uint64_t size = atomic_load_explicit(&o->size, memory_order_relaxed);
	int r;

	r = slot_retire(o);
	if (r < 0)
		return r;
	o->packed = false;
	o->chunk = NULL;
	o->map = NULL;
	o->w->map_len = 0;
	o->w->spilled = true;
	r = store_file_grow_i(o, want, exact);
	if (r < 0) {
		struct store_slot *old = o->w->old_slots;

		store_file_abandon_i(o);
		o->w->old_slots = old->next;
		free(old);
		o->packed = true;
		o->chunk = c;
		o->map = from;
		o->w->map_len = c->slot;
		o->w->spilled = false;
		return r;
	}
	memcpy(o->map, from, size);
	return 0;
}

/* Move @o (packed or not yet) to a slot of class @cls, copying its bytes. */
static int move(struct store_obj *o, int cls)
{
	struct store *s = obj_store(o);
	uint64_t size = atomic_load_explicit(&o->size, memory_order_relaxed);
	struct store_chunk *c;
	uint32_t off;
	int r;

	r = slot_get(s, cls, &c, &off);
	if (r < 0)
		return r;
	if (o->packed) {
		r = slot_retire(o);
		if (r < 0) {
			slot_put(s, c, off);
			return r;
		}
		memcpy(c->map + off, o->map, size);
	}
	o->packed = true;
	o->chunk = c;
	o->map = c->map + off;
	o->w->map_len = c->slot;
	return 0;
}

int store_pack_grow_i(struct store_obj *o, uint64_t want, bool exact)
{
	struct store *s = obj_store(o);
	uint64_t goal;

	if (o->packed && want <= o->chunk->slot)
		return 0;
	if (want > s->pack_max)
		return spill(o, want, exact);
	goal = exact || !o->packed ? want : max_u64(want, 2 * (uint64_t)o->chunk->slot);
	return move(o, class_of(s, min_u64(goal, s->pack_max)));
}

int store_pack_seal_i(struct store_obj *o)
{
	struct store *s = obj_store(o);
	uint64_t size = atomic_load_explicit(&o->size, memory_order_relaxed);
	int cls = class_of(s, size);

	if (s->pack_cls[cls] == o->chunk->slot)
		return 0;
	/* a bigger slot than its size needs (it grew by doubling, or was
	 * cut): worth a copy, not worth failing the seal for (no room, no
	 * memory, no chunk could be made: it keeps the slot it has) */
	(void)move(o, cls);
	return 0;
}

void store_pack_freeze_i(struct store_obj *o)
{
	slots_retired_put(o, false);
}

void store_pack_free_i(struct store_obj *o)
{
	struct store *s = obj_store(o);

	slots_retired_put(o, false);
	if (!o->packed)
		return;
	slot_put(s, o->chunk, slot_off(o));
	o->map = NULL;
	o->chunk = NULL;
	o->packed = false;
}

void store_pack_forget_i(struct store_obj *o)
{
	slots_retired_put(o, true);
	if (o->packed)
		o->map = NULL;
}

void store_pack_slot_i(const struct store_obj *o, uint32_t *ret_no, uint32_t *ret_off)
{
	if (o->chunk) {
		*ret_no = o->chunk->no;
		*ret_off = slot_off(o);
	} else {
		/* not adopted yet: where its line said (store_pack_adopt_i()) */
		*ret_no = (uint32_t)(o->alloc >> 32);
		*ret_off = (uint32_t)o->alloc;
	}
}

/* ---- open, adoption, close (single threaded) ---- */

/*
 * Map chunk file @name of data/ into the table.  A file that cannot be a
 * chunk of ours (a name or a length no chunk has: a crash while one was
 * made, before any slot of it was used) is deleted; one that cannot be
 * opened or mapped now fails the open, and stays.  0 or -errno.
 */
static int chunk_adopt(struct store *s, const char *name)
{
	unsigned long long no, slot;
	struct store_chunk *c;
	struct stat st;
	uint64_t len;
	uint8_t *map;
	char *end;
	int fd, r;

	no = strtoull(name + strlen(PACK_PREFIX), &end, 16);
	if (end != name + strlen(PACK_PREFIX) + 8 || *end != '-')
		goto bad;
	slot = strtoull(end + 1, &end, 10);
	if (*end || no >= PACK_CHUNKS_MAX || slot < 64 || slot % 64 ||
	    slot > STORE_PACK_MAX_LIMIT || (no < s->pack_nchunks_cap && s->pack_chunks[no]))
		goto bad;
	fd = openat(s->data_fd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) < 0) {
		r = -errno;
		goto fail;
	}
	len = (uint64_t)st.st_size;
	if (!S_ISREG(st.st_mode) || len < STORE_PACK_CHUNK_MIN || len > STORE_PACK_CHUNK_MAX ||
	    (len & (len - 1))) {
		close(fd);
		goto bad;
	}
	map = chunk_map(fd, len);
	r = map ? 0 : -errno;
	close(fd);
	fd = -1;
	if (r < 0)
		goto fail;
	c = chunk_alloc((uint32_t)no, (uint32_t)slot, map, len);
	if (!c || table_put(s, c) < 0) {
		free(c);
		munmap(map, len);
		return -ENOMEM;
	}
	if (s->pack_max) {
		int cls = class_of(s, slot);

		if (s->pack_cls[cls] == slot)
			c->cls = cls;
	}
	return 0;
bad:
	log_msg_limited(&badchunk_rl, LOGL_WARN,
			"store: data/%s is no chunk file this store can use: deleted", name);
	unlinkat(s->data_fd, name, 0);
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	log_error("store: cannot open chunk data/%s: %s", name, strerror(-r));
	return r;
}

int store_pack_open_i(struct store *s, uint64_t pack_max)
{
	struct dirent *de;
	struct statfs sf;
	DIR *d;
	int fd, r = 0;

	/* a tmpfs, the store's or not: sparse files whose pages can be
	 * punched out, and no disk behind the chunks */
	if (pack_max && (fstatfs(s->data_fd, &sf) < 0 || sf.f_type != TMPFS_MAGIC)) {
		log_info("store: objects are not packed on a %s: each keeps a file",
			 s->kind == STORE_FS_HUGETLBFS ? "hugetlbfs"
						       : "filesystem other than tmpfs");
		pack_max = 0;
	}
	s->pack_max = (uint32_t)pack_max;
	if (pack_max)
		classes_make(s, (uint32_t)pack_max);
	s->pack_chunk = store_pack_chunk_len(s->capacity);
	/* chunks are adopted even with packing off: their objects stay */
	fd = openat(s->data_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while (!r && (de = readdir(d)))
		if (!strncmp(de->d_name, PACK_PREFIX, strlen(PACK_PREFIX)))
			r = chunk_adopt(s, de->d_name);
	closedir(d);
	return r;
}

/* The chunk of @o's slot, if its line names one that can hold it. */
static struct store_chunk *slot_chunk(struct store_obj *o, uint32_t *ret_off)
{
	struct store *s = obj_store(o);
	uint64_t size = atomic_load_explicit(&o->size, memory_order_relaxed);
	struct store_chunk *c;
	uint32_t no;

	store_pack_slot_i(o, &no, ret_off);
	c = no < s->pack_nchunks_cap ? s->pack_chunks[no] : NULL;
	if (!c || *ret_off % c->slot || *ret_off / c->slot >= c->nslots || size > c->slot)
		return NULL;
	return c;
}

int store_pack_claim_i(struct store_obj *o)
{
	struct store_chunk *c;
	uint32_t off;

	c = slot_chunk(o, &off);
	if (!c || bit_get(c, off / c->slot))
		return -EBADMSG;
	bit_set(c, off / c->slot, true);
	c->nfree--;
	return 0;
}

int store_pack_adopt_i(struct store_obj *o, const uint8_t *csum)
{
	struct store *s = obj_store(o);
	uint64_t size = atomic_load_explicit(&o->size, memory_order_relaxed);
	uint8_t got[OBJFS_CSUM_LEN];
	struct store_chunk *c;
	uint32_t off;

	c = slot_chunk(o, &off); /* claimed: store_pack_claim_i() */
	if (!c)
		return -EBADMSG;
	if (csum) {
		store_hash_i(c->map + off, size, got);
		if (memcmp(got, csum, OBJFS_CSUM_LEN)) {
			bit_set(c, off / c->slot, false);
			c->nfree++;
			return -EBADMSG;
		}
	}
	s->pack_slots++;
	o->alloc = 0;
	o->chunk = c;
	o->map = c->map + off;
	return 0;
}

void store_pack_settle_i(struct store *s)
{
	uint32_t no, i, p, first, last, run;

	for (no = 0; no < s->pack_nchunks_cap; no++) {
		struct store_chunk *c = s->pack_chunks[no];
		uint32_t npages;

		if (!c)
			continue;
		if (c->nfree == c->nslots) {
			chunk_delete(s, c);
			continue;
		}
		npages = (uint32_t)(c->len / STORE_PAGE);
		for (i = 0; i < c->nslots; i++)
			if (bit_get(c, i)) {
				pages_of(c, i * c->slot, &first, &last);
				for (p = first; p <= last; p++)
					c->pages[p]++;
			}
		for (run = 0, p = 0; p <= npages; p++) {
			if (p < npages && !c->pages[p])
				continue;
			pages_punch(c, run, p);
			run = p + 1;
			if (p < npages) {
				s->pack_pages++;
				s->used += STORE_PAGE;
			}
		}
		if (c->nfree)
			list_add(s, c);
	}
}

void store_pack_close_i(struct store *s)
{
	uint32_t no;

	for (no = 0; no < s->pack_nchunks_cap; no++) {
		struct store_chunk *c = s->pack_chunks[no];

		if (c) {
			munmap(c->map, c->len);
			free(c);
		}
	}
	free(s->pack_chunks);
	s->pack_chunks = NULL;
	s->pack_nchunks_cap = s->pack_nchunks = 0;
}

uint64_t store_pack_need_i(struct store *s, uint64_t size, bool *ret_packed)
{
	uint32_t first, last, p, i, n = 0;
	struct store_chunk *c;
	int cls;

	*ret_packed = size && size <= s->pack_max;
	if (!*ret_packed)
		return 0;
	cls = class_of(s, size);
	pthread_mutex_lock(&s->pack_lock);
	c = s->pack_free[cls];
	if (c) {
		/* the slot slot_get() would take, on pages that may have
		 * been punched out */
		i = slot_find(c);
		pages_of(c, i * c->slot, &first, &last);
		for (p = first; p <= last; p++)
			n += !c->pages[p];
	} else {
		n = (s->pack_cls[cls] + STORE_PAGE - 1) / STORE_PAGE; /* a new chunk's first */
	}
	pthread_mutex_unlock(&s->pack_lock);
	return (uint64_t)n * STORE_PAGE;
}

void store_pack_stats_i(struct store *s, struct store_stats *ret)
{
	pthread_mutex_lock(&s->pack_lock);
	ret->pack_max = s->pack_max;
	ret->packed = s->pack_slots;
	ret->chunks = s->pack_nchunks;
	ret->chunk_bytes = s->pack_pages * STORE_PAGE;
	pthread_mutex_unlock(&s->pack_lock);
}
