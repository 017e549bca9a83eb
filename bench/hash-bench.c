/*
 * objfs-hash-bench: what hashing costs a writer and a fetcher, per GiB,
 * with xxhash's plain entry points (the baseline: the library's SSE2
 * path, which objfs used before common/xxh.h) and with what objfs uses
 * now (its x86 run-time dispatch where the library has it).
 *
 *   xxh3-128            the object's identity, over all its bytes
 *   writer: +sums       xxh3-128 plus the streamed 8 MiB sub-block sums
 *                       (store.c's hash-ahead pass), 1 MiB at a time
 *   fetcher: check      each 8 MiB block's XXH3_64 (node_worker.c's
 *                       check as a block lands)
 *
 * Each is run over one buffer already touched, old and new in turn,
 * --rounds times; medians and min-max are printed, and "new / old".
 *
 * Usage: objfs-hash-bench [--size MIB] [--rounds N]
 */
#define XXH_DISPATCH_DISABLE_REPLACE /* both the plain and the dispatched names */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bsum.h"
#include "xxh.h"

#define PIECE (1u << 20)
#define ROUNDS_MAX 99

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static volatile uint64_t sink; /* keeps the results alive */

static void old_xxh128(const uint8_t *p, size_t n)
{
	sink ^= XXH3_128bits(p, n).low64;
}

static void new_xxh128(const uint8_t *p, size_t n)
{
#ifdef OBJFS_XXH_DISPATCH
	sink ^= XXH3_128bits_dispatch(p, n).low64;
#else
	sink ^= XXH3_128bits(p, n).low64;
#endif
}

/* the writer's pass before: xxh3-128 and the sub-block sums, plain */
static void old_writer(const uint8_t *p, size_t n)
{
	XXH3_state_t *h = XXH3_createState(), *s = XXH3_createState();

	XXH3_128bits_reset(h);
	for (size_t o = 0; o < n; o += PIECE) {
		size_t k = n - o < PIECE ? n - o : PIECE;

		XXH3_128bits_update(h, p + o, k);
		if (o % BSUM_SUB == 0)
			XXH3_64bits_reset(s);
		XXH3_64bits_update(s, p + o, k);
		if ((o + k) % BSUM_SUB == 0)
			sink ^= XXH3_64bits_digest(s);
	}
	sink ^= XXH3_128bits_digest(h).low64;
	XXH3_freeState(h);
	XXH3_freeState(s);
}

/* now: the store's calls (common/bsum.c is built with xxh.h) */
static void new_writer(const uint8_t *p, size_t n)
{
	XXH3_state_t *h = XXH3_createState();
	struct bsum_stream bs = {0};
	struct bsums *b;

	XXH3_128bits_reset(h);
	for (size_t o = 0; o < n; o += PIECE) {
		size_t k = n - o < PIECE ? n - o : PIECE;

#ifdef OBJFS_XXH_DISPATCH
		XXH3_128bits_update_dispatch(h, p + o, k);
#else
		XXH3_128bits_update(h, p + o, k);
#endif
		if (bsum_stream_update(&bs, p + o, k) < 0)
			abort();
	}
	sink ^= XXH3_128bits_digest(h).low64;
	b = bsum_stream_finish(&bs, p, n);
	free(b);
	bsum_stream_release(&bs);
	XXH3_freeState(h);
}

static void old_check(const uint8_t *p, size_t n)
{
	for (size_t o = 0; o < n; o += BSUM_SUB)
		sink ^= XXH3_64bits(p + o, n - o < BSUM_SUB ? n - o : BSUM_SUB);
}

static void new_check(const uint8_t *p, size_t n)
{
	for (uint32_t i = 0; (uint64_t)i * BSUM_SUB < n; i++)
		sink ^= bsum_block(p + (uint64_t)i * BSUM_SUB, n, i);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*old)(const uint8_t *, size_t), (*now)(const uint8_t *, size_t);
	} rows[] = {
	    {"xxh3-128", old_xxh128, new_xxh128},
	    {"writer: xxh3-128 + sums", old_writer, new_writer},
	    {"fetcher: block check", old_check, new_check},
	};
	enum { NROWS = sizeof(rows) / sizeof(rows[0]) };
	double t[NROWS][2][ROUNDS_MAX];
	unsigned long mib = 1024, rounds = 7;
	size_t n;
	uint8_t *p;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--size") && i + 1 < argc) {
			mib = strtoul(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
			rounds = strtoul(argv[++i], NULL, 10);
		} else {
			printf("usage: %s [--size MIB] [--rounds N]\n"
			       "  xxh3-128, the writer's hash with block sums and the fetcher's\n"
			       "  block check over MIB MiB (default 1024), with xxhash's plain\n"
			       "  entry points (old) and objfs's (new: x86 run-time dispatch),\n"
			       "  in turn, N rounds (default 7, at most %d); ms per GiB\n",
			       argv[0], ROUNDS_MAX);
			return strcmp(argv[i], "--help") && strcmp(argv[i], "-h") ? 2 : 0;
		}
	}
	if (mib < 16 || mib > (1ul << 20) || rounds < 1 || rounds > ROUNDS_MAX) {
		fprintf(stderr, "%s: --size takes 16 to 1048576 (MiB), --rounds 1 to %d\n", argv[0],
			ROUNDS_MAX);
		return 2;
	}
	n = (size_t)mib << 20;
	p = malloc(n);
	if (!p) {
		fprintf(stderr, "%s: cannot allocate %lu MiB\n", argv[0], mib);
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 131 + (i >> 20));
#ifdef OBJFS_XXH_DISPATCH
	printf("xxhash run-time dispatch: yes\n");
#else
	printf("xxhash run-time dispatch: no (new is old)\n");
#endif
	for (unsigned long r = 0; r < rounds; r++)
		for (int k = 0; k < NROWS; k++)
			for (int v = 0; v < 2; v++) {
				double t0 = now_s();

				(v ? rows[k].now : rows[k].old)(p, n);
				t[k][v][r] = (now_s() - t0) * 1000 * 1024 / (double)mib;
			}
	printf("%-26s %22s %22s %9s\n", "ms per GiB, median [min-max]", "old", "new", "new/old");
	for (int k = 0; k < NROWS; k++) {
		double m[2];

		printf("%-26s", rows[k].name);
		for (int v = 0; v < 2; v++) {
			qsort(t[k][v], rounds, sizeof(double), cmp_d);
			m[v] = t[k][v][rounds / 2];
			printf(" %7.1f [%5.1f-%5.1f]", m[v], t[k][v][0], t[k][v][rounds - 1]);
		}
		printf(" %9.2f\n", m[1] / m[0]);
	}
	free(p);
	return 0;
}
