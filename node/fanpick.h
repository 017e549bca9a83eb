/*
 * fanpick: which block of a fetch to start next, and from which source
 * (source choice per block).
 *
 * A leaf: it includes libc only and knows nothing of threads, the clock,
 * the random source, the store, Redis or the transport.  The caller
 * passes the time (@now, in ms of its own clock) and a random function,
 * and owns every piece of state: the per-fetch block state (struct
 * fanpick, made here, freed by the caller) and the per-source view
 * (struct fanpick_src, the caller's array).  There is no global state, so
 * the fetch workers (under the node's lock) and bench/fanout-sim.c drive
 * the same code.
 *
 * A block is NEED (to be started), RUNNING (one request in flight) or
 * VERIFIED (in place, its checksum checked).  The caller asks
 * fanpick_next() what to start, which marks the block RUNNING and counts
 * the request on its source; then it reports the end of that request
 * with fanpick_done() (verified) or fanpick_fail() (anything else: the
 * block is NEED again and goes to another source).  That is "replaced
 * at the block": when a source dies or stalls, each request to it fails
 * on its own, and the caller sets the source's avoid_until.
 *
 * Rules (fanpick_next()).  A source is usable unless now < avoid_until
 * (dead, stalled, corrupt: it does not count at all; rule 5), now <
 * busy_until (it refused for load: what it has and fetches still counts)
 * or it has tune.src_cap of our requests.  The blocks, in this order:
 *  a. a block a local reader waits on (fanpick_want()), lowest first, so
 *     that reads still stream (rule 1);
 *  b. a block some usable partial source has, rarest first (the number
 *     of live partial sources that have it), ties broken at random
 *     (rule 2);
 *  c. a fresh block: no partial source has or fetches it and no full
 *     holder gave it out; from a full holder, at random;
 *  d. with tune.park, a block a usable partial source is fetching: the
 *     request waits there until the block is verified (not a source
 *     marked no_park);
 *  e. a block no partial source has or fetches, which a full holder
 *     gave out: from a usable full holder that did not give it out
 *     (each still sends a block once; waiting for a fetcher we do not
 *     know while another holder could send it now would only cost time);
 *  f. rule 3, what bounds the origin's load when many readers start
 *     together: a block that a partial source has or fetches but that
 *     cannot be asked of it now, or that every usable full holder gave
 *     out to a fetcher we do not know, is held back: it is taken from a
 *     full holder only once it has been held back for tune.defer_ms in
 *     a row ("late"), or tune.given_ms for a block that none of our
 *     partial sources has or fetches (the fetcher it was given to may be
 *     gone: we learn of a live one within a locate or two).  A partial
 *     source that has not told its state yet
 *     (have == NULL) may be fetching anything: it holds back every
 *     block this way.
 * The source (rule 4): of the usable ones that have the block (that
 * fetch it, for d.), the one with the least our-requests + load (+
 * tune.full_bias for a full holder), random among equals; a full holder
 * is not asked for a block it gave out unless the choice is late.
 *
 * What the caller tells (the in-band HAVE of wire version 2): for a partial
 * source, `have` = its verified blocks and `fetching` = the blocks whose
 * bytes are flowing to it now (not those merely asked for: a request parked
 * at it must not wait for a request parked elsewhere, or two fetchers could
 * wait for each other); for a full holder, `fetching` = the blocks it gave
 * out to a fan-out fetcher.  A full holder refuses a fan-out GET for a
 * block it gave out, answering its HAVE; a late GET is served.
 * bench/fanout-sim.c shows why each of these is needed.
 *
 * Cost: O(nblocks / 64 × nsrc) word operations per call (rarity is
 * counted with bit-sliced counters, one word of 64 blocks at a time),
 * plus one pass over the held-back blocks when nothing else can start.
 *
 * Errors: 0 or a negative errno.  Not thread-safe: the caller serialises
 * every call on one struct fanpick and its sources.
 */
#ifndef OBJFS_FANPICK_H
#define OBJFS_FANPICK_H

#include <stdbool.h>
#include <stdint.h>

#define FANPICK_BLOCKS_MAX 4096u
#define FANPICK_SRC_MAX 64u
/* words of a bitmap of @n blocks (bit b of word b / 64 is block b) */
#define FANPICK_WORDS(n) (((n) + 63u) / 64u)
/* a time that never comes: an avoid_until that does not end, a WAIT
 * with no deadline */
#define FANPICK_NEVER INT64_MAX

/* One fetch's blocks: NEED, RUNNING, VERIFIED, and which ones a local
 * reader waits on.  Opaque; fanpick_new()/fanpick_free(). */
struct fanpick;

/*
 * One source of the fetch, as the caller knows it.  The caller fills
 * every field but @inflight, which fanpick_next(), fanpick_done() and
 * fanpick_fail() keep (set it to 0 when adding a source), and keeps a
 * source at its index in the array while it has requests in flight.
 * The bitmaps hold FANPICK_WORDS(nblocks) words and belong to the
 * caller.
 */
struct fanpick_src {
	/* a partial source: its verified blocks, as last told; NULL while it
	 * has told nothing (it may then be fetching anything: rule 3) */
	const uint64_t *have;
	/* a partial source: the blocks it is fetching now; a full holder:
	 * the blocks it gave out to fetchers, who will have them soon; as
	 * last told (NULL: none) */
	const uint64_t *fetching;
	int64_t avoid_until; /* not used, nor counted, while now < this */
	int64_t busy_until;  /* not asked while now < this (it refused for load) */
	unsigned load;	     /* requests it serves, as last told */
	unsigned inflight;   /* our requests to it (kept by fanpick) */
	bool full;	     /* holds every block (sealed): @have unused */
	/* a partial source that answers at once, "not yet", for a block it
	 * is still fetching (reached over RDMA, which does not park): rule
	 * d never picks it; its fetching blocks are held back (rule 3) */
	bool no_park;
};

struct fanpick_tune {
	unsigned src_cap; /* our requests in flight per source, at most (>= 1) */
	int64_t defer_ms; /* rule 3: how long a block waits for a fetcher */
	/* rule 3 for a block held back only because every usable full
	 * holder gave it out and none of our partial sources has or fetches
	 * it: the fetcher that got it is one we do not know yet, or one
	 * gone; 0 (or more than defer_ms) is defer_ms */
	int64_t given_ms;
	unsigned full_bias; /* rule 4: load a full holder counts on top */
	/* a partial source may be asked for a block it is still fetching:
	 * it answers once the block is verified there */
	bool park;
};

enum fanpick_what {
	FANPICK_NONE,  /* nothing to start: every block is running or
			* verified, or no source has or fetches a needed one
			* (fanpick_left() tells which) */
	FANPICK_FETCH, /* start @block from source @src (now RUNNING) */
	FANPICK_WAIT,  /* nothing now: ask again when a request ends or a
			* source tells something new, or at @until at the
			* latest (FANPICK_NEVER: no deadline) */
};

struct fanpick_choice {
	enum fanpick_what what;
	unsigned block; /* FANPICK_FETCH */
	unsigned src;	/* FANPICK_FETCH: index into the caller's array */
	/* FANPICK_FETCH: from a full holder after rule 3's wait: ask it to
	 * send even a block it already gave out */
	bool late;
	int64_t until; /* FANPICK_WAIT */
};

/* A random 64-bit number (rules 2 and 4 break ties with it). */
typedef uint64_t (*fanpick_rnd_fn)(void *ctx);

/* The state of a fetch of @nblocks blocks (1..FANPICK_BLOCKS_MAX), all
 * NEED.  NULL if @nblocks is out of range or memory is short.  The
 * caller frees it with fanpick_free(). */
struct fanpick *fanpick_new(unsigned nblocks);

/* NULL is fine. */
void fanpick_free(struct fanpick *fp);

unsigned fanpick_nblocks(const struct fanpick *fp);

/* Blocks not yet verified (NEED or RUNNING). */
unsigned fanpick_left(const struct fanpick *fp);

enum fanpick_state { FANPICK_NEED, FANPICK_RUNNING, FANPICK_VERIFIED };

/* The state of block @b (FANPICK_NEED for a block out of range). */
enum fanpick_state fanpick_state(const struct fanpick *fp, unsigned b);

/* A local reader waits (@on) or no longer waits on block @b.  The caller
 * clears it once no reader waits on it (a verified block's mark is
 * ignored).  -EINVAL if @b is out of range. */
int fanpick_want(struct fanpick *fp, unsigned b, bool on);

/* Copy the verified blocks, or the running ones, into @dst
 * (FANPICK_WORDS(nblocks) words), for a HAVE answer.  What it tells as
 * fetching is only the running blocks whose bytes are flowing in, which
 * the caller knows and fanpick does not. */
void fanpick_copy_have(const struct fanpick *fp, uint64_t *dst);
void fanpick_copy_fetching(const struct fanpick *fp, uint64_t *dst);

/*
 * What to start next, from @src[0..nsrc) (nsrc <= FANPICK_SRC_MAX), at
 * time @now, into *@ret (see enum fanpick_what).  On FANPICK_FETCH the
 * block is RUNNING and src[ret->src].inflight counts it.  May note, in
 * @fp, when it first held a block back (rule 3).  -EINVAL on bad
 * arguments (*@ret untouched).
 */
int fanpick_next(struct fanpick *fp, struct fanpick_src *src, unsigned nsrc,
		 const struct fanpick_tune *tune, int64_t now, fanpick_rnd_fn rnd, void *rctx,
		 struct fanpick_choice *ret);

/* The request for block @b to source @s ended with the block verified.
 * -EINVAL if @b was not running or @s has no request of ours. */
int fanpick_done(struct fanpick *fp, struct fanpick_src *src, unsigned nsrc, unsigned b,
		 unsigned s);

/* It ended otherwise (failed, stalled, bad checksum, source busy): the
 * block is NEED again.  Whether to avoid the source is the caller's
 * choice (avoid_until, busy_until). */
int fanpick_fail(struct fanpick *fp, struct fanpick_src *src, unsigned nsrc, unsigned b,
		 unsigned s);

#endif
