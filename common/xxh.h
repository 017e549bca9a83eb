/*
 * xxh: xxhash, by way of its x86 run-time dispatch where the library has
 * it (meson sets OBJFS_XXH_DISPATCH).  The library's plain XXH3 entry
 * points use SSE2; the dispatched ones pick AVX2 or AVX-512 when the CPU
 * has them, with the same results.  On this machine kind that about
 * halves every xxh3 pass (bench/hash-bench; docs/benchmarks.md,
 * OBJFS_XXH_DISPATCH).  Include this, never <xxhash.h> alone.
 */
#ifndef OBJFS_XXH_H
#define OBJFS_XXH_H

#include <xxhash.h>
#ifdef OBJFS_XXH_DISPATCH
#include <xxh_x86dispatch.h>
#endif

#endif
