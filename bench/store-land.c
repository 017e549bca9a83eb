/*
 * objfs-store-land: how fast a fetched object lands in the store.
 *
 *   objfs-store-land DIR [--size SIZE_MIB] [--rounds N] [--gap SECONDS]
 *                        [--prefault] [--no-reuse] [--own-tmpfs]
 *
 * Opens a store in DIR (capacity: twice the object), and N times: creates
 * an object, reserves SIZE bytes (as a fetch does, knowing the size),
 * fills them through store_obj_iov() with memcpy from a 1 MiB buffer (as
 * a receiver's recv() into the store would), seals it and unlinks it.
 * Prints the seconds and GiB/s of each round: round 1 lands on memory
 * never touched (unless --prefault), the later ones on what the store
 * kept of the round before (the arena's pages; the pool's files), after
 * GAP seconds (a VM may hand free memory back to its host meanwhile:
 * docs/design.md, "The store", "Reuse").
 *
 * Built against the store of the tree it is in; the arena store of objfs
 * 0.x is measured by building this file there with -DOBJFS_ARENA_STORE.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int land(struct store *s, uint64_t id, uint64_t size, const uint8_t *buf)
{
	struct store_obj *o;
	struct iovec iov[64];
	uint64_t off = 0;
	size_t bytes;
	int r, n, i;

	o = store_create(s, id, &r);
	if (!o)
		return r;
	r = store_reserve(o, size);
	while (r == 0 && off < size) {
		n = store_obj_iov(o, off, 1 << 20, iov, 64, &bytes);
		if (n <= 0) {
			r = n < 0 ? n : -EIO;
			break;
		}
		for (i = 0; i < n; i++)
			memcpy(iov[i].iov_base, buf, iov[i].iov_len);
		off += bytes;
	}
	if (r == 0)
		r = store_seal(o, NULL, 0);
	store_unlink(o);
	store_obj_unref(o);
	return r;
}

int main(int argc, char **argv)
{
	struct store_config cfg = {0};
	uint64_t size = 1024ULL << 20;
	double gap = 0, t0, t;
	int rounds = 5, i, r = 0;
	bool prefault = false;
	struct store_prefault_report rep;
	struct store *s;
	uint8_t *buf;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fprintf(argc < 2 ? stderr : stdout,
			"usage: objfs-store-land DIR [--size MIB] [--rounds N] [--gap SECONDS]\n"
			"                        [--prefault] [--no-reuse] [--own-tmpfs]\n");
		return argc < 2 ? 2 : 0;
	}
	cfg.dir = argv[1];
	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--size") && i + 1 < argc)
			size = strtoull(argv[++i], NULL, 10) << 20;
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--gap") && i + 1 < argc)
			gap = atof(argv[++i]);
		else if (!strcmp(argv[i], "--prefault"))
			prefault = true;
#ifndef OBJFS_ARENA_STORE
		else if (!strcmp(argv[i], "--no-reuse"))
			cfg.no_reuse = true;
		else if (!strcmp(argv[i], "--own-tmpfs"))
			cfg.own_tmpfs = true;
#endif
		else {
			fprintf(stderr, "objfs-store-land: bad argument '%s'\n", argv[i]);
			return 2;
		}
	}
	cfg.capacity = 2 * size;
	s = store_open(&cfg, &r, NULL);
	if (!s) {
		fprintf(stderr, "objfs-store-land: cannot open store %s: %s\n", cfg.dir,
			strerror(-r));
		return 1;
	}
	buf = malloc(1 << 20);
	if (!buf)
		return 1;
	memset(buf, 0x5a, 1 << 20);
	if (prefault) {
		t0 = now();
		r = store_prefault(s, NULL, NULL, &rep);
		if (r == 0 && rep.end != STORE_PREFAULT_DONE)
			r = -ENOSPC;
		printf("prefault %.3f s%s\n", now() - t0, r ? " (failed, or stopped short)" : "");
	}
	for (i = 0; i < rounds; i++) {
		if (i && gap > 0)
			usleep((useconds_t)(gap * 1e6));
		t0 = now();
		r = land(s, (uint64_t)i + 1, size, buf);
		t = now() - t0;
		if (r < 0) {
			fprintf(stderr, "objfs-store-land: round %d: %s\n", i + 1, strerror(-r));
			break;
		}
		printf("round %d %.3f s %.2f GiB/s\n", i + 1, t, (double)size / t / (1 << 30));
	}
	store_close(s);
	free(buf);
	return r < 0;
}
