/*
 * test-fanpick: unit tests of node/fanpick.c, the source choice of a
 * fetch cut into blocks.  Pure: a deterministic random function, times
 * made up by the test.  One case per rule of fanpick.h at least (wanted
 * first, rarest first, fresh blocks from a full holder, waiting at a
 * fetcher, a block one full holder gave out taken from another, rule 3's
 * hold and its bound, least loaded, avoided and busy sources), then the
 * bookkeeping (done, fail, the caps) and a fetch of 4096 blocks from 64
 * sources to the end.
 */
#include "tap.h"

#include <errno.h>

#include "fanpick.h"

static uint64_t rng;

static uint64_t rnd(void *ctx)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

	(void)ctx;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static const struct fanpick_tune tune = {.src_cap = 8, .defer_ms = 1000, .park = true};

/* a bitmap of up to 64 blocks, bit i for block i */
#define BITS(x) ((uint64_t)(x))

static struct fanpick_choice next(struct fanpick *fp, struct fanpick_src *src, unsigned n,
				  const struct fanpick_tune *t, int64_t now)
{
	struct fanpick_choice ch = {.what = 99};

	CHECK_EQ(fanpick_next(fp, src, n, t, now, rnd, NULL, &ch), 0);
	return ch;
}

TEST(state)
{
	struct fanpick *fp;
	uint64_t have[2] = {~0ull, ~0ull}, fetching[2] = {~0ull, ~0ull};
	struct fanpick_src full = {.full = true};
	struct fanpick_choice ch;

	CHECK(fanpick_new(0) == NULL);
	CHECK(fanpick_new(FANPICK_BLOCKS_MAX + 1) == NULL);
	fanpick_free(NULL);
	fp = fanpick_new(70);
	CHECK_EQ(fanpick_nblocks(fp), 70);
	CHECK_EQ(fanpick_left(fp), 70);
	CHECK_EQ(fanpick_want(fp, 70, true), -EINVAL);
	CHECK_EQ(fanpick_state(fp, 3), FANPICK_NEED);
	fanpick_copy_have(fp, have);
	CHECK(have[0] == 0 && have[1] == 0);

	ch = next(fp, &full, 1, &tune, 0);
	CHECK_EQ(ch.what, FANPICK_FETCH);
	CHECK_EQ(fanpick_state(fp, ch.block), FANPICK_RUNNING);
	CHECK_EQ(full.inflight, 1);
	fanpick_copy_fetching(fp, fetching);
	CHECK(fetching[ch.block / 64] == 1ull << (ch.block % 64));
	CHECK(fetching[1 - ch.block / 64] == 0);
	/* the end of a request that was not made is refused */
	CHECK_EQ(fanpick_done(fp, &full, 1, (ch.block + 1) % 70, 0), -EINVAL);
	CHECK_EQ(fanpick_done(fp, &full, 1, ch.block, 1), -EINVAL);
	CHECK_EQ(fanpick_done(fp, &full, 1, ch.block, 0), 0);
	CHECK_EQ(full.inflight, 0);
	CHECK_EQ(fanpick_state(fp, ch.block), FANPICK_VERIFIED);
	CHECK_EQ(fanpick_left(fp), 69);
	CHECK_EQ(fanpick_done(fp, &full, 1, ch.block, 0), -EINVAL);
	fanpick_copy_have(fp, have);
	CHECK(have[ch.block / 64] == 1ull << (ch.block % 64));
	/* a failed block is NEED again */
	ch = next(fp, &full, 1, &tune, 0);
	CHECK_EQ(fanpick_fail(fp, &full, 1, ch.block, 0), 0);
	CHECK_EQ(fanpick_state(fp, ch.block), FANPICK_NEED);
	CHECK_EQ(fanpick_left(fp), 69);
	CHECK_EQ(full.inflight, 0);
	/* bad arguments */
	CHECK_EQ(fanpick_next(fp, &full, 1, NULL, 0, rnd, NULL, &ch), -EINVAL);
	CHECK_EQ(fanpick_next(fp, &full, FANPICK_SRC_MAX + 1, &tune, 0, rnd, NULL, &ch), -EINVAL);
	CHECK_EQ(fanpick_next(fp, &full, 1, &tune, 0, NULL, NULL, &ch), -EINVAL);
	fanpick_free(fp);
}

/* Rule 1: what a reader waits on comes first, lowest first. */
TEST(wanted_first)
{
	struct fanpick *fp = fanpick_new(8);
	struct fanpick_src full = {.full = true};
	struct fanpick_choice ch;

	CHECK_EQ(fanpick_want(fp, 6, true), 0);
	CHECK_EQ(fanpick_want(fp, 5, true), 0);
	ch = next(fp, &full, 1, &tune, 0);
	CHECK_EQ(ch.what, FANPICK_FETCH);
	CHECK_EQ(ch.block, 5);
	CHECK_EQ(ch.src, 0);
	ch = next(fp, &full, 1, &tune, 0);
	CHECK_EQ(ch.block, 6);
	/* no longer wanted: the order is the random one again */
	CHECK_EQ(fanpick_want(fp, 7, true), 0);
	CHECK_EQ(fanpick_want(fp, 7, false), 0);
	CHECK_EQ(fanpick_want(fp, 2, true), 0);
	ch = next(fp, &full, 1, &tune, 0);
	CHECK_EQ(ch.block, 2);
	fanpick_free(fp);
}

/* Rule 2: rarest first among what partial sources have, and rule 4:
 * from the least loaded of those that have it. */
TEST(rarest_first)
{
	struct fanpick *fp = fanpick_new(4);
	uint64_t ha = BITS(0x7), hb = BITS(0x3), hc = BITS(0x1), none = 0;
	struct fanpick_src src[3] = {
	    {.have = &ha, .fetching = &none},
	    {.have = &hb, .fetching = &none},
	    {.have = &hc, .fetching = &none},
	};
	struct fanpick_choice ch;

	/* block 2: only A has it */
	ch = next(fp, src, 3, &tune, 0);
	CHECK_EQ(ch.what, FANPICK_FETCH);
	CHECK_EQ(ch.block, 2);
	CHECK_EQ(ch.src, 0);
	/* block 1: A and B; A has one of ours in flight */
	ch = next(fp, src, 3, &tune, 0);
	CHECK_EQ(ch.block, 1);
	CHECK_EQ(ch.src, 1);
	/* block 0: all three; C is the least loaded */
	ch = next(fp, src, 3, &tune, 0);
	CHECK_EQ(ch.block, 0);
	CHECK_EQ(ch.src, 2);
	/* block 3: nobody has it, nobody fetches it, no full holder: there
	 * is nothing to wait for */
	ch = next(fp, src, 3, &tune, 0);
	CHECK_EQ(ch.what, FANPICK_NONE);
	CHECK_EQ(fanpick_left(fp), 4);
	fanpick_free(fp);
}

/* Rule 2 breaks ties with the random function: both equals come out. */
TEST(rarest_ties_random)
{
	uint64_t h = BITS(0x3), none = 0;
	unsigned first[2] = {0, 0}, i;

	for (i = 0; i < 64; i++) {
		struct fanpick *fp = fanpick_new(2);
		struct fanpick_src src = {.have = &h, .fetching = &none};
		struct fanpick_choice ch = next(fp, &src, 1, &tune, 0);

		CHECK_EQ(ch.what, FANPICK_FETCH);
		first[ch.block & 1]++;
		fanpick_free(fp);
	}
	CHECK(first[0] > 8 && first[1] > 8);
}

/* Rule 3: what only a full holder has goes there only if no partial
 * source fetches it and the holder did not give it out; the rest waits
 * defer_ms in a row, then goes there anyway ("late"). */
TEST(origin_held_back)
{
	struct fanpick *fp = fanpick_new(8);
	uint64_t have = 0, fetching = BITS(0x03), given = BITS(0x08);
	struct fanpick_src src[2] = {
	    {.full = true, .fetching = &given}, {.have = NULL}, /* told nothing yet */
	};
	struct fanpick_tune t = tune;
	struct fanpick_choice ch;
	unsigned i, got = 0;

	t.park = false; /* else 0 and 1 would be asked of the fetcher */
	/* the partial source may be fetching anything: wait for it */
	ch = next(fp, src, 2, &t, 100);
	CHECK_EQ(ch.what, FANPICK_WAIT);
	CHECK_EQ(ch.until, 1100);
	/* it told: it fetches 0 and 1; the origin gave 3 out */
	src[1].have = &have;
	src[1].fetching = &fetching;
	for (i = 0; i < 5; i++) {
		ch = next(fp, src, 2, &t, 200);
		CHECK_EQ(ch.what, FANPICK_FETCH);
		CHECK_EQ(ch.src, 0);
		CHECK(!ch.late);
		got |= 1u << ch.block;
	}
	CHECK_EQ(got, 0xf4);
	/* 0, 1 and 3 have been held back since 100 */
	ch = next(fp, src, 2, &t, 300);
	CHECK_EQ(ch.what, FANPICK_WAIT);
	CHECK_EQ(ch.until, 1100);
	/* the wait is over: lowest first, from the full holder, late */
	for (i = 0; i < 3; i++) {
		ch = next(fp, src, 2, &t, 1100);
		CHECK_EQ(ch.what, FANPICK_FETCH);
		CHECK_EQ(ch.block, i < 2 ? i : 3);
		CHECK_EQ(ch.src, 0);
		CHECK(ch.late);
	}
	ch = next(fp, src, 2, &t, 1100);
	CHECK_EQ(ch.what, FANPICK_NONE);
	/* a block that failed waits afresh */
	CHECK_EQ(fanpick_fail(fp, src, 2, 3, 0), 0);
	ch = next(fp, src, 2, &t, 1150);
	CHECK_EQ(ch.what, FANPICK_WAIT);
	CHECK_EQ(ch.until, 2150);
	/* no longer given out: fresh, not late */
	given = 0;
	ch = next(fp, src, 2, &t, 1160);
	CHECK_EQ(ch.what, FANPICK_FETCH);
	CHECK_EQ(ch.block, 3);
	CHECK(!ch.late);
	CHECK_EQ(fanpick_fail(fp, src, 2, 3, 0), 0);
	given = BITS(0x08);
	ch = next(fp, src, 2, &t, 1170);
	CHECK_EQ(ch.what, FANPICK_WAIT);
	CHECK_EQ(ch.until, 2170);
	fanpick_free(fp);
}

/* A block every full holder gave out that none of our partial sources
 * has or fetches (its fetcher is one we do not know, maybe one gone)
 * waits given_ms, not defer_ms; one that a partial source fetches still
 * waits defer_ms. */
TEST(given_unknown_fetcher)
{
	struct fanpick *fp = fanpick_new(4);
	uint64_t have = 0, fetching = BITS(0x01), given = BITS(0x03);
	struct fanpick_src src[2] = {
	    {.full = true, .fetching = &given},
	    {.have = &have, .fetching = &fetching},
	};
	struct fanpick_tune t = tune;
	struct fanpick_choice ch;
	unsigned i, got = 0;

	t.park = false;
	t.given_ms = 200;
	/* 2 and 3 are fresh */
	for (i = 0; i < 2; i++) {
		ch = next(fp, src, 2, &t, 100);
		CHECK_EQ(ch.what, FANPICK_FETCH);
		CHECK(!ch.late);
		got |= 1u << ch.block;
	}
	CHECK_EQ(got, 0x0c);
	/* 0 (fetched by a source we know) and 1 (given to one we do not)
	 * are held back since 100: 1 for given_ms */
	ch = next(fp, src, 2, &t, 100);
	CHECK_EQ(ch.what, FANPICK_WAIT);
	CHECK_EQ(ch.until, 300);
	ch = next(fp, src, 2, &t, 300);
	CHECK_EQ(ch.what, FANPICK_FETCH);
	CHECK_EQ(ch.block, 1);
	CHECK_EQ(ch.src, 0);
	CHECK(ch.late);
	/* 0 waits for its fetcher until defer_ms */
	ch = next(fp, src, 2, &t, 300);
	CHECK_EQ(ch.what, FANPICK_WAIT);
	CHECK_EQ(ch.until, 1100);
	/* a given_ms above defer_ms is defer_ms */
	fanpick_free(fp);
	fp = fanpick_new(4);
	t.given_ms = 5000;
	fetching = 0;
	given = BITS(0x0f);
	ch = next(fp, src, 2, &t, 0);
	CHECK_EQ(ch.what, FANPICK_WAIT);
	CHECK_EQ(ch.until, 1000);
	fanpick_free(fp);
}

/* Rule 3 holds a block a full holder gave out only while no other full
 * holder can send it: one that did not give it out is asked at once
 * (not late), after the fresh blocks; the wait stays for a block every
 * usable holder gave out, and for one a partial source fetches. */
TEST(given_out_elsewhere)
{
	struct fanpick *fp = fanpick_new(3);
	uint64_t given_a = BITS(0x3), given_b = 0, have = 0, fetching = BITS(0x2);
	struct fanpick_src src[3] = {
	    {.full = true, .fetching = &given_a},
	    {.full = true, .fetching = &given_b},
	    {.have = &have, .fetching = &fetching, .busy_until = 5000},
	};
	struct fanpick_tune t = tune;
	struct fanpick_choice ch;

	t.park = false;
	/* 2: fresh, from either */
	ch = next(fp, src, 3, &t, 0);
	CHECK_EQ(ch.what, FANPICK_FETCH);
	CHECK_EQ(ch.block, 2);
	CHECK(!ch.late);
	/* 0: A gave it out, B did not: from B now */
	ch = next(fp, src, 3, &t, 0);
	CHECK_EQ(ch.what, FANPICK_FETCH);
	CHECK_EQ(ch.block, 0);
	CHECK_EQ(ch.src, 1);
	CHECK(!ch.late);
	/* 1: the partial source fetches it: wait for it */
	ch = next(fp, src, 3, &t, 0);
	CHECK_EQ(ch.what, FANPICK_WAIT);
	CHECK_EQ(ch.until, 1000);
	fanpick_free(fp);

	/* both gave 0 out, or B cannot be asked: wait for the fetchers */
	fp = fanpick_new(1);
	given_b = BITS(0x1);
	ch = next(fp, src, 2, &t, 0);
	CHECK_EQ(ch.what, FANPICK_WAIT);
	CHECK_EQ(ch.until, 1000);
	given_b = 0;
	src[1].avoid_until = 500;
	ch = next(fp, src, 2, &t, 100);
	CHECK_EQ(ch.what, FANPICK_WAIT);
	CHECK_EQ(ch.until, 500);
	/* B is back */
	ch = next(fp, src, 2, &t, 500);
	CHECK_EQ(ch.what, FANPICK_FETCH);
	CHECK_EQ(ch.src, 1);
	CHECK(!ch.late);
	fanpick_free(fp);

	/* a block a reader waits on, too */
	fp = fanpick_new(2);
	src[1].avoid_until = 0;
	given_a = BITS(0x3);
	CHECK_EQ(fanpick_want(fp, 1, true), 0);
	ch = next(fp, src, 2, &t, 0);
	CHECK_EQ(ch.what, FANPICK_FETCH);
	CHECK_EQ(ch.block, 1);
	CHECK_EQ(ch.src, 1);
	CHECK(!ch.late);
	fanpick_free(fp);
}

/* Rule 3 again: a partial source has the block but cannot be asked
 * (busy, or at our cap): the full holder is not used until the wait is
 * over. */
TEST(partial_busy_held_back)
{
	struct fanpick *fp = fanpick_new(1);
	uint64_t have = 1, none = 0;
	struct fanpick_src src[2] = {
	    {.full = true},
	    {.have = &have, .fetching = &none, .busy_until = 500},
	};
	struct fanpick_tune t = tune;
	struct fanpick_choice ch;

	t.full_bias = 1; /* else the holder ties with the source (rule 4) */
	ch = next(fp, src, 2, &t, 0);
	CHECK_EQ(ch.what, FANPICK_WAIT);
	CHECK_EQ(ch.until, 500); /* the busy one comes back first */
	ch = next(fp, src, 2, &t, 500);
	CHECK_EQ(ch.what, FANPICK_FETCH);
	CHECK_EQ(ch.src, 1);
	fanpick_free(fp);
}

/* With park, a block a partial source is fetching is asked of it (after
 * what can be had now); without, or of a source that does not park, it
 * waits. */
TEST(park_at_fetcher)
{
	struct fanpick *fp = fanpick_new(4);
	uint64_t have = BITS(0x1), fetching = BITS(0x2);
	struct fanpick_src src = {.have = &have, .fetching = &fetching};
	struct fanpick_tune nopark = tune;
	struct fanpick_choice ch;

	nopark.park = false;
	ch = next(fp, &src, 1, &tune, 0);
	CHECK_EQ(ch.what, FANPICK_FETCH);
	CHECK_EQ(ch.block, 0);
	ch = next(fp, &src, 1, &nopark, 0);
	CHECK_EQ(ch.what, FANPICK_WAIT);
	CHECK_EQ(ch.until, FANPICK_NEVER);
	/* a source that does not park (over RDMA): as without park */
	src.no_park = true;
	ch = next(fp, &src, 1, &tune, 0);
	CHECK_EQ(ch.what, FANPICK_WAIT);
	src.no_park = false;
	ch = next(fp, &src, 1, &tune, 0);
	CHECK_EQ(ch.what, FANPICK_FETCH);
	CHECK_EQ(ch.block, 1);
	CHECK_EQ(src.inflight, 2);
	/* 2 and 3: nobody has or fetches them */
	ch = next(fp, &src, 1, &tune, 0);
	CHECK_EQ(ch.what, FANPICK_NONE);
	fanpick_free(fp);
}

/* Rule 4: the least loaded source, our requests and its load; a full
 * holder counts full_bias on top; the cap per source. */
TEST(least_loaded)
{
	struct fanpick *fp = fanpick_new(3);
	uint64_t h = BITS(0x7), none = 0;
	struct fanpick_src src[3] = {
	    {.have = &h, .fetching = &none, .load = 5},
	    {.have = &h, .fetching = &none, .load = 1},
	    {.full = true, .load = 0},
	};
	struct fanpick_tune t = tune;
	struct fanpick_choice ch;

	t.full_bias = 2;
	t.src_cap = 1;
	ch = next(fp, src, 3, &t, 0);
	CHECK_EQ(ch.src, 1); /* 1 < 0 + 2 < 5 */
	ch = next(fp, src, 3, &t, 0);
	CHECK_EQ(ch.src, 2); /* 1 is at the cap */
	ch = next(fp, src, 3, &t, 0);
	CHECK_EQ(ch.src, 0);
	CHECK_EQ(fanpick_left(fp), 3);
	fanpick_done(fp, src, 3, ch.block, 0);
	fanpick_free(fp);

	/* every source at the cap: wait for a request to end */
	fp = fanpick_new(3);
	t.src_cap = 1;
	ch = next(fp, src, 1, &t, 0);
	CHECK_EQ(ch.what, FANPICK_FETCH);
	ch = next(fp, src, 1, &t, 0);
	CHECK_EQ(ch.what, FANPICK_WAIT);
	CHECK_EQ(ch.until, FANPICK_NEVER);
	fanpick_free(fp);
}

/* Rule 5: an avoided source is not asked and does not count; the wait
 * ends when it comes back; a source avoided for ever leaves nothing. */
TEST(avoided)
{
	struct fanpick *fp = fanpick_new(2);
	uint64_t h = BITS(0x3), h1 = BITS(0x1), none = 0;
	struct fanpick_src src[2] = {
	    {.have = &h, .fetching = &none, .avoid_until = 700},
	    {.have = &h1, .fetching = &none},
	};
	struct fanpick_choice ch;

	/* block 0 from the one not avoided; block 1 only the avoided has */
	ch = next(fp, src, 2, &tune, 0);
	CHECK_EQ(ch.what, FANPICK_FETCH);
	CHECK_EQ(ch.block, 0);
	CHECK_EQ(ch.src, 1);
	ch = next(fp, src, 2, &tune, 0);
	CHECK_EQ(ch.what, FANPICK_WAIT);
	CHECK_EQ(ch.until, 700);
	ch = next(fp, src, 2, &tune, 700);
	CHECK_EQ(ch.what, FANPICK_FETCH);
	CHECK_EQ(ch.block, 1);
	CHECK_EQ(ch.src, 0);
	/* it died with the block: nobody else has it */
	CHECK_EQ(fanpick_fail(fp, src, 2, 1, 0), 0);
	src[0].avoid_until = FANPICK_NEVER;
	ch = next(fp, src, 2, &tune, 800);
	CHECK_EQ(ch.what, FANPICK_NONE);
	CHECK_EQ(fanpick_left(fp), 2);
	/* nothing left to start at all */
	CHECK_EQ(fanpick_done(fp, src, 2, 0, 1), 0);
	CHECK_EQ(fanpick_left(fp), 1);
	fanpick_free(fp);
}

/* A busy source (it refused for load) is not asked, but what it fetches
 * still holds the full holder back (rule 3). */
TEST(busy_still_counts)
{
	struct fanpick *fp = fanpick_new(1);
	uint64_t have = 0, fetching = 1;
	struct fanpick_src src[2] = {
	    {.full = true},
	    {.have = &have, .fetching = &fetching, .busy_until = 50},
	};
	struct fanpick_choice ch;

	ch = next(fp, src, 2, &tune, 0);
	CHECK_EQ(ch.what, FANPICK_WAIT);
	CHECK_EQ(ch.until, 50);
	/* an avoided one does not */
	src[1].avoid_until = 5000;
	ch = next(fp, src, 2, &tune, 0);
	CHECK_EQ(ch.what, FANPICK_FETCH);
	CHECK_EQ(ch.src, 0);
	CHECK(!ch.late);
	fanpick_free(fp);
}

/* 4096 blocks from 64 partial sources with random holdings, to the end:
 * every block once, rarest first throughout. */
TEST(whole_fetch)
{
	enum { NB = FANPICK_BLOCKS_MAX, NS = FANPICK_SRC_MAX, W = FANPICK_WORDS(NB) };
	static uint64_t have[NS][W], none[W];
	static unsigned count[NB];
	struct fanpick_src src[NS];
	struct fanpick *fp = fanpick_new(NB);
	unsigned s, b, n = 0, worse = 0, last = 0;

	rng = 42;
	for (s = 0; s < NS; s++) {
		for (b = 0; b < W; b++)
			have[s][b] = rnd(NULL) & rnd(NULL); /* a quarter of the blocks */
		src[s] = (struct fanpick_src){.have = have[s], .fetching = none};
	}
	/* make sure every block is somewhere */
	for (b = 0; b < W; b++)
		have[0][b] = ~0ull;
	for (b = 0; b < NB; b++)
		for (s = 0; s < NS; s++)
			count[b] += (have[s][b / 64] >> (b % 64)) & 1;
	for (;;) {
		struct fanpick_choice ch = next(fp, src, NS, &tune, 0);

		if (ch.what != FANPICK_FETCH)
			break;
		CHECK((have[ch.src][ch.block / 64] >> (ch.block % 64)) & 1);
		/* rarest first: never a commoner block before a rarer one */
		worse += count[ch.block] < last;
		last = count[ch.block];
		CHECK_EQ(fanpick_done(fp, src, NS, ch.block, ch.src), 0);
		n++;
	}
	CHECK_EQ(n, NB);
	CHECK_EQ(worse, 0);
	CHECK_EQ(fanpick_left(fp), 0);
	for (s = 0; s < NS; s++)
		CHECK_EQ(src[s].inflight, 0);
	fanpick_free(fp);
}

int main(void)
{
	rng = 1;
	RUN(state);
	RUN(wanted_first);
	RUN(rarest_first);
	RUN(rarest_ties_random);
	RUN(origin_held_back);
	RUN(given_unknown_fetcher);
	RUN(given_out_elsewhere);
	RUN(partial_busy_held_back);
	RUN(park_at_fetcher);
	RUN(least_loaded);
	RUN(avoided);
	RUN(busy_still_counts);
	RUN(whole_fetch);
	return tap_done();
}
