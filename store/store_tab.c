/*
 * store_tab: objects by id, chained through obj->hnext (8 bytes an
 * object, and a bucket pointer for every two).  The buckets double while
 * objects outnumber them twice (chains of two on average: a lookup is
 * still a cache miss or two); if the memory for that is missing the
 * chains just grow longer, so an add fails only when the table has no
 * bucket at all.
 *
 * Touches struct store_obj's id and hnext only.  The caller's lock
 * guards a table (s->lock for s->table; adoption's own before the store
 * is shared).
 */
#include "store_i.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>

#define TAB_FIRST_SHIFT (64 - 10) /* 1,024 buckets */

static inline size_t bucket_of(unsigned shift, uint64_t id)
{
	return (size_t)((id * 0x9E3779B97F4A7C15ull) >> shift);
}

static inline size_t nbuckets(const struct store_tab *t)
{
	return t->b ? (size_t)1 << (64 - t->shift) : 0;
}

struct store_obj *store_tab_find_i(const struct store_tab *t, uint64_t id)
{
	struct store_obj *o;

	if (!t->b)
		return NULL;
	for (o = t->b[bucket_of(t->shift, id)]; o; o = o->hnext)
		if (o->id == id)
			return o;
	return NULL;
}

static void grow(struct store_tab *t)
{
	unsigned shift = t->b ? t->shift - 1 : TAB_FIRST_SHIFT;
	size_t n = (size_t)1 << (64 - shift), i;
	struct store_obj **b, *o, *next;

	if (shift < 64 - 40)
		return; /* 2^40 buckets: more than any memory */
	b = util_table_alloc(n * sizeof(*b));
	if (!b)
		return;
	for (i = 0; i < nbuckets(t); i++)
		for (o = t->b[i]; o; o = next) {
			size_t k = bucket_of(shift, o->id);

			next = o->hnext;
			o->hnext = b[k];
			b[k] = o;
		}
	util_table_free(t->b, nbuckets(t) * sizeof(*b));
	t->b = b;
	t->shift = shift;
}

int store_tab_add_i(struct store_tab *t, struct store_obj *o)
{
	size_t k;

	if (t->count >= 2 * nbuckets(t))
		grow(t);
	if (!t->b)
		return -ENOMEM;
	k = bucket_of(t->shift, o->id);
	o->hnext = t->b[k];
	t->b[k] = o;
	t->count++;
	return 0;
}

void store_tab_del_i(struct store_tab *t, struct store_obj *o)
{
	struct store_obj **p;

	if (!t->b)
		return;
	for (p = &t->b[bucket_of(t->shift, o->id)]; *p; p = &(*p)->hnext)
		if (*p == o) {
			*p = o->hnext;
			o->hnext = NULL;
			t->count--;
			return;
		}
}

struct store_obj *store_tab_next_i(const struct store_tab *t, struct store_obj *o, size_t *at)
{
	if (o && o->hnext)
		return o->hnext;
	for (*at = o ? *at + 1 : 0; *at < nbuckets(t); (*at)++)
		if (t->b[*at])
			return t->b[*at];
	return NULL;
}

void store_tab_free_i(struct store_tab *t)
{
	util_table_free(t->b, nbuckets(t) * sizeof(*t->b));
	t->b = NULL;
	t->count = 0;
}
