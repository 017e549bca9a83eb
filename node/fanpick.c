/*
 * fanpick: the source choice of a fetch cut into blocks (fanpick.h has
 * the rules and the API).
 *
 * One call of fanpick_next() is one pass over the words of the NEED
 * bitmap.  For each word of 64 blocks it folds every source in:
 *
 *   owned  blocks some live partial source has
 *   avail  blocks some usable partial source has
 *   busy   blocks some live partial source fetches (or any block, for
 *          a partial source not yet told)
 *   given  blocks some live full holder gave out
 *   spare  blocks some usable full holder did not give out
 *   soon   blocks some usable partial source fetches (tune->park)
 *   cnt[]  how many live partial sources have each block, as bit
 *          slices (cnt[k] holds bit k of the 64 counts), so that the
 *          rarest blocks of the word come out of a few AND-NOTs
 *
 * and keeps, per word, the rarest available blocks, the fresh ones, the
 * soon ones, those given out by another full holder only and the
 * held-back ones (struct word_pick).  The rules then
 * draw from those in order; only when nothing else can start does it
 * walk the held-back blocks one by one, to start their clock or find
 * one whose wait is over.
 */
#include "fanpick.h"

#include <errno.h>
#include <stdlib.h>

/* counts of up to FANPICK_SRC_MAX (64) sources: 7 bits */
#define SLICES 7

struct fanpick {
	unsigned nblocks, nwords;
	unsigned left;	   /* NEED + RUNNING */
	uint64_t *need;	   /* not started (or failed back) */
	uint64_t *running; /* one request in flight */
	uint64_t *wanted;  /* a local reader waits on it */
	uint64_t *held;	   /* rule 3 holds it back since held_since[b] */
	int64_t *held_since;
};

/* ---- bits ---- */

static inline bool bit_get(const uint64_t *m, unsigned b)
{
	return (m[b / 64] >> (b % 64)) & 1;
}

static inline void bit_set(uint64_t *m, unsigned b)
{
	m[b / 64] |= 1ull << (b % 64);
}

static inline void bit_clear(uint64_t *m, unsigned b)
{
	m[b / 64] &= ~(1ull << (b % 64));
}

/* the blocks that exist in word @w */
static inline uint64_t word_mask(const struct fanpick *fp, unsigned w)
{
	unsigned rest = fp->nblocks - w * 64;

	return rest >= 64 ? ~0ull : (1ull << rest) - 1;
}

/* the @r-th (from 0) set bit of @x, which has more than @r */
static unsigned nth_bit(uint64_t x, unsigned r)
{
	while (r--)
		x &= x - 1;
	return (unsigned)__builtin_ctzll(x);
}

/* add the one-bit lanes of @x to the bit-sliced counters @cnt */
static inline void slices_add(uint64_t *cnt, uint64_t x)
{
	unsigned k;

	for (k = 0; k < SLICES && x; k++) {
		uint64_t carry = cnt[k] & x;

		cnt[k] ^= x;
		x = carry;
	}
}

/* The lanes of @m whose count is smallest; that count in *ret_min. */
static uint64_t slices_min(const uint64_t *cnt, uint64_t m, unsigned *ret_min)
{
	unsigned k, v = 0;

	for (k = SLICES; k-- > 0;) {
		uint64_t zero = m & ~cnt[k];

		if (zero)
			m = zero;
		else
			v |= 1u << k;
	}
	*ret_min = v;
	return m;
}

/* ---- the fetch's state ---- */

struct fanpick *fanpick_new(unsigned nblocks)
{
	struct fanpick *fp;
	unsigned w;

	if (!nblocks || nblocks > FANPICK_BLOCKS_MAX)
		return NULL;
	fp = calloc(1, sizeof(*fp));
	if (!fp)
		return NULL;
	fp->nblocks = nblocks;
	fp->nwords = FANPICK_WORDS(nblocks);
	fp->left = nblocks;
	fp->need = calloc(4 * (size_t)fp->nwords, sizeof(uint64_t));
	fp->held_since = calloc(nblocks, sizeof(int64_t));
	if (!fp->need || !fp->held_since) {
		fanpick_free(fp);
		return NULL;
	}
	fp->running = fp->need + fp->nwords;
	fp->wanted = fp->running + fp->nwords;
	fp->held = fp->wanted + fp->nwords;
	for (w = 0; w < fp->nwords; w++)
		fp->need[w] = word_mask(fp, w);
	return fp;
}

void fanpick_free(struct fanpick *fp)
{
	if (!fp)
		return;
	free(fp->need);
	free(fp->held_since);
	free(fp);
}

unsigned fanpick_nblocks(const struct fanpick *fp)
{
	return fp->nblocks;
}

unsigned fanpick_left(const struct fanpick *fp)
{
	return fp->left;
}

enum fanpick_state fanpick_state(const struct fanpick *fp, unsigned b)
{
	if (b >= fp->nblocks || bit_get(fp->need, b))
		return FANPICK_NEED;
	return bit_get(fp->running, b) ? FANPICK_RUNNING : FANPICK_VERIFIED;
}

int fanpick_want(struct fanpick *fp, unsigned b, bool on)
{
	if (b >= fp->nblocks)
		return -EINVAL;
	if (on)
		bit_set(fp->wanted, b);
	else
		bit_clear(fp->wanted, b);
	return 0;
}

void fanpick_copy_have(const struct fanpick *fp, uint64_t *dst)
{
	unsigned w;

	for (w = 0; w < fp->nwords; w++)
		dst[w] = word_mask(fp, w) & ~fp->need[w] & ~fp->running[w];
}

void fanpick_copy_fetching(const struct fanpick *fp, uint64_t *dst)
{
	unsigned w;

	for (w = 0; w < fp->nwords; w++)
		dst[w] = fp->running[w];
}

static int end_check(struct fanpick *fp, struct fanpick_src *src, unsigned nsrc, unsigned b,
		     unsigned s)
{
	if (!fp || !src || s >= nsrc || b >= fp->nblocks || !bit_get(fp->running, b) ||
	    !src[s].inflight)
		return -EINVAL;
	bit_clear(fp->running, b);
	src[s].inflight--;
	return 0;
}

int fanpick_done(struct fanpick *fp, struct fanpick_src *src, unsigned nsrc, unsigned b, unsigned s)
{
	int r = end_check(fp, src, nsrc, b, s);

	if (r)
		return r;
	fp->left--;
	return 0;
}

int fanpick_fail(struct fanpick *fp, struct fanpick_src *src, unsigned nsrc, unsigned b, unsigned s)
{
	int r = end_check(fp, src, nsrc, b, s);

	if (r)
		return r;
	bit_set(fp->need, b);
	/* its wait for another fetcher (rule 3) starts afresh */
	bit_clear(fp->held, b);
	return 0;
}

/* ---- choosing ---- */

/* what one call knows of its sources */
struct scan {
	const struct fanpick_src *src;
	unsigned nsrc;
	int64_t now;
	unsigned cap;
	bool full_ok;  /* some full holder can be asked now */
	bool hope;     /* some source has, fetches or may yet give a needed block */
	int64_t until; /* the earliest time a held-back source comes back */
};

/* May @s be asked now? */
static bool usable(const struct scan *sc, const struct fanpick_src *s)
{
	return s->avoid_until <= sc->now && s->busy_until <= sc->now && s->inflight < sc->cap;
}

static bool live(const struct scan *sc, const struct fanpick_src *s)
{
	return s->avoid_until <= sc->now;
}

/* per word of blocks, what the pass keeps for the draws */
struct word_pick {
	uint64_t avail;	     /* a usable partial source has it */
	uint64_t rare;	     /* the rarest of those */
	uint64_t soon;	     /* none has it, a usable partial source fetches it (tune->park) */
	uint64_t fresh;	     /* no partial source has or fetches it, no full holder gave it out */
	uint64_t other;	     /* the same, but some full holder gave it out, and a usable one
			      * did not */
	uint64_t held;	     /* rule 3 holds it back */
	uint64_t held_given; /* of those, the ones no partial source has or
			      * fetches: only a full holder's "given out" holds them */
	unsigned rare_n;     /* the count of the rare ones */
};

/* Fold the sources into word @w of @fp. */
static void scan_word(const struct fanpick *fp, struct scan *sc, bool park, unsigned w,
		      struct word_pick *wp)
{
	uint64_t need = fp->need[w], cnt[SLICES] = {0}, owned = 0, avail = 0, soon = 0, busy = 0;
	uint64_t given = 0, spare = 0, untold;
	unsigned i;

	for (i = 0; i < sc->nsrc; i++) {
		const struct fanpick_src *s = &sc->src[i];
		uint64_t h, f;

		if (s->full) {
			/* what it gave out: its fetchers will have it soon */
			uint64_t g = live(sc, s) && s->fetching ? s->fetching[w] : 0;

			given |= g;
			if (usable(sc, s))
				spare |= ~g;
			continue;
		}
		if (!live(sc, s)) {
			if (s->avoid_until != FANPICK_NEVER && s->have && (s->have[w] & need))
				sc->hope = true;
			continue;
		}
		if (!s->have) {
			/* it has told nothing yet: it may be fetching any block */
			busy = ~0ull;
			sc->hope = true;
			continue;
		}
		f = s->fetching ? s->fetching[w] & need : 0;
		busy |= f;
		if (park && !s->no_park && usable(sc, s))
			soon |= f;
		h = s->have[w] & need;
		if (!h)
			continue;
		sc->hope = true;
		owned |= h;
		slices_add(cnt, h);
		if (usable(sc, s))
			avail |= h;
	}
	if ((busy | given) & need)
		sc->hope = true;
	wp->avail = avail;
	wp->rare = avail ? slices_min(cnt, avail, &wp->rare_n) : 0;
	wp->soon = soon & ~avail;
	untold = sc->full_ok ? need & ~owned & ~busy : 0;
	wp->fresh = untold & ~given;
	/* a full holder gave it out, to someone we do not know: another
	 * one that did not is asked rather than wait (it sends each block
	 * once, as the first does) */
	wp->other = untold & given & spare;
	/* rule 3: a partial source has it or fetches it but may not be
	 * asked now, or every full holder that may be asked gave it out
	 * to someone we do not know: wait for them rather than load a full
	 * holder */
	wp->held = sc->full_ok ? need & ~avail & ~wp->soon & (owned | busy | (given & ~spare)) : 0;
	wp->held_given = wp->held & ~(owned | busy);
}

/* what pick_source() looks for */
enum want_src {
	SRC_HAS,  /* has the block: a partial source, or a full holder that did
		   * not give it out yet */
	SRC_LATE, /* has it, rule 3's wait over: any full holder too */
	SRC_SOON, /* fetches it: the request waits there until it is verified */
};

/* The usable source for block @b that is least loaded, random among
 * equals; -1 if none. */
static int pick_source(const struct scan *sc, const struct fanpick_tune *t, unsigned b,
		       enum want_src want, fanpick_rnd_fn rnd, void *rctx)
{
	unsigned i, ties = 0;
	uint64_t best = UINT64_MAX;
	int pick = -1;

	for (i = 0; i < sc->nsrc; i++) {
		const struct fanpick_src *s = &sc->src[i];
		uint64_t score;
		bool ok;

		if (!usable(sc, s))
			continue;
		if (want == SRC_SOON)
			ok = !s->full && !s->no_park && s->fetching && bit_get(s->fetching, b);
		else if (!s->full)
			ok = s->have && bit_get(s->have, b);
		else
			ok = want == SRC_LATE || !s->fetching || !bit_get(s->fetching, b);
		if (!ok)
			continue;
		score = (uint64_t)s->inflight + s->load + (s->full ? t->full_bias : 0);
		if (score < best) {
			best = score;
			ties = 1;
			pick = (int)i;
		} else if (score == best && rnd(rctx) % ++ties == 0) {
			pick = (int)i;
		}
	}
	return pick;
}

/* Draw uniformly one block of the masks @m[0..nwords) (@total bits). */
static unsigned draw(const uint64_t *m, unsigned nwords, unsigned total, fanpick_rnd_fn rnd,
		     void *rctx)
{
	unsigned w, r = (unsigned)(rnd(rctx) % total), c;

	for (w = 0; w < nwords; w++) {
		c = (unsigned)__builtin_popcountll(m[w]);
		if (r < c)
			return w * 64 + nth_bit(m[w], r);
		r -= c;
	}
	return 0; /* not reached: @total is the sum */
}

static int start(struct fanpick *fp, struct fanpick_src *src, unsigned b, int s, bool late,
		 struct fanpick_choice *ret)
{
	bit_clear(fp->need, b);
	bit_set(fp->running, b);
	bit_clear(fp->held, b);
	src[s].inflight++;
	*ret = (struct fanpick_choice){
	    .what = FANPICK_FETCH, .block = b, .src = (unsigned)s, .late = late};
	return 0;
}

/*
 * Rule 3 for the blocks held back: start the clock of those seen for the
 * first time; the first (wanted first) whose wait is over, or -1 and the
 * earliest end of a wait in *ret_until.
 */
static int held_over(struct fanpick *fp, const struct word_pick *wp, const struct fanpick_tune *t,
		     int64_t now, int64_t *ret_until)
{
	int64_t until = FANPICK_NEVER, end;
	int over = -1, pass;
	unsigned w;

	for (pass = 0; pass < 2 && over < 0; pass++) {
		for (w = 0; w < fp->nwords; w++) {
			uint64_t m = wp[w].held & (pass ? ~fp->wanted[w] : fp->wanted[w]);

			while (m) {
				unsigned b = w * 64 + (unsigned)__builtin_ctzll(m);

				m &= m - 1;
				if (!bit_get(fp->held, b)) {
					bit_set(fp->held, b);
					fp->held_since[b] = now;
				}
				end = fp->held_since[b] +
				      (t->given_ms > 0 && t->given_ms < t->defer_ms &&
					       bit_get(&wp[w].held_given, b % 64)
					   ? t->given_ms
					   : t->defer_ms);
				if (end <= now) {
					if (over < 0)
						over = (int)b;
				} else if (end < until) {
					until = end;
				}
			}
		}
	}
	*ret_until = until;
	return over;
}

/* Start one block of the masks @m (@total bits) drawn at random, from a
 * source of kind @want. */
static int start_drawn(struct fanpick *fp, struct fanpick_src *src, const struct scan *sc,
		       const struct fanpick_tune *t, const uint64_t *m, unsigned total,
		       enum want_src want, fanpick_rnd_fn rnd, void *rctx,
		       struct fanpick_choice *ret)
{
	unsigned b = draw(m, fp->nwords, total, rnd, rctx);
	int s = pick_source(sc, t, b, want, rnd, rctx);

	return s < 0 ? -ENOENT : start(fp, src, b, s, false, ret);
}

int fanpick_next(struct fanpick *fp, struct fanpick_src *src, unsigned nsrc,
		 const struct fanpick_tune *tune, int64_t now, fanpick_rnd_fn rnd, void *rctx,
		 struct fanpick_choice *ret)
{
	struct word_pick wp[FANPICK_WORDS(FANPICK_BLOCKS_MAX)];
	struct scan sc = {.src = src, .nsrc = nsrc, .now = now, .until = FANPICK_NEVER};
	unsigned w, i, rare_min = UINT32_MAX, rare_total = 0, fresh_total = 0, soon_total = 0,
		       other_total = 0;
	uint64_t m[FANPICK_WORDS(FANPICK_BLOCKS_MAX)];
	bool any_need = false, any_held = false;
	int64_t held_until;
	int s, b;

	if (!fp || (nsrc && !src) || nsrc > FANPICK_SRC_MAX || !tune || !tune->src_cap || !rnd ||
	    !ret)
		return -EINVAL;
	sc.cap = tune->src_cap;
	for (i = 0; i < nsrc; i++) {
		const struct fanpick_src *p = &src[i];

		if (p->full && usable(&sc, p))
			sc.full_ok = true;
		if (p->avoid_until == FANPICK_NEVER)
			continue;
		if (p->full)
			sc.hope = true; /* it has every block, now or later */
		/* when a source held back comes back */
		if (p->avoid_until > now && p->avoid_until < sc.until)
			sc.until = p->avoid_until;
		else if (p->avoid_until <= now && p->busy_until > now && p->busy_until < sc.until)
			sc.until = p->busy_until;
	}

	for (w = 0; w < fp->nwords; w++) {
		wp[w] = (struct word_pick){0};
		if (!fp->need[w])
			continue;
		any_need = true;
		scan_word(fp, &sc, tune->park, w, &wp[w]);
		/* a block not held back now starts its wait afresh next time */
		fp->held[w] &= wp[w].held;
		any_held |= wp[w].held != 0;
		fresh_total += (unsigned)__builtin_popcountll(wp[w].fresh);
		soon_total += (unsigned)__builtin_popcountll(wp[w].soon);
		other_total += (unsigned)__builtin_popcountll(wp[w].other);
		if (wp[w].rare && wp[w].rare_n <= rare_min) {
			if (wp[w].rare_n < rare_min) {
				rare_min = wp[w].rare_n;
				rare_total = 0;
			}
			rare_total += (unsigned)__builtin_popcountll(wp[w].rare);
		}
	}
	if (!any_need) {
		*ret = (struct fanpick_choice){.what = FANPICK_NONE};
		return 0;
	}

	/* 1. a block a reader waits on, lowest first, from a source that has
	 * it if one can be asked */
	for (w = 0; w < fp->nwords; w++) {
		uint64_t x = (wp[w].avail | wp[w].soon | wp[w].fresh | wp[w].other) & fp->wanted[w];

		if (!x)
			continue;
		b = (int)(w * 64 + (unsigned)__builtin_ctzll(x));
		s = pick_source(&sc, tune, (unsigned)b,
				bit_get(&wp[w].soon, (unsigned)b % 64) ? SRC_SOON : SRC_HAS, rnd,
				rctx);
		if (s >= 0)
			return start(fp, src, (unsigned)b, s, false, ret);
	}

	/* 2. rarest first among what partial sources have */
	if (rare_total) {
		for (w = 0; w < fp->nwords; w++)
			m[w] = wp[w].rare_n == rare_min ? wp[w].rare : 0;
		if (!start_drawn(fp, src, &sc, tune, m, rare_total, SRC_HAS, rnd, rctx, ret))
			return 0;
	}

	/* 3. what only full holders have, none gave out and no partial
	 * source fetches */
	if (fresh_total) {
		for (w = 0; w < fp->nwords; w++)
			m[w] = wp[w].fresh;
		if (!start_drawn(fp, src, &sc, tune, m, fresh_total, SRC_HAS, rnd, rctx, ret))
			return 0;
	}

	/* 4. what a partial source fetches: wait there for it */
	if (soon_total) {
		for (w = 0; w < fp->nwords; w++)
			m[w] = wp[w].soon;
		if (!start_drawn(fp, src, &sc, tune, m, soon_total, SRC_SOON, rnd, rctx, ret))
			return 0;
	}

	/* 5. what a full holder gave out, from one that did not */
	if (other_total) {
		for (w = 0; w < fp->nwords; w++)
			m[w] = wp[w].other;
		if (!start_drawn(fp, src, &sc, tune, m, other_total, SRC_HAS, rnd, rctx, ret))
			return 0;
	}

	/* 6. what rule 3 held back, once its wait is over */
	held_until = FANPICK_NEVER;
	if (any_held) {
		b = held_over(fp, wp, tune, now, &held_until);
		if (b >= 0) {
			s = pick_source(&sc, tune, (unsigned)b, SRC_LATE, rnd, rctx);
			if (s >= 0)
				return start(fp, src, (unsigned)b, s, true, ret);
		}
	}

	if (held_until < sc.until)
		sc.until = held_until;
	if (!sc.hope && !any_held) {
		*ret = (struct fanpick_choice){.what = FANPICK_NONE};
		return 0;
	}
	*ret = (struct fanpick_choice){.what = FANPICK_WAIT, .until = sc.until};
	return 0;
}
