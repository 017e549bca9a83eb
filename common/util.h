/*
 * util: small helpers shared by every module.  No state.
 */
#ifndef OBJFS_UTIL_H
#define OBJFS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OBJFS_NAME_MAX 255  /* bytes per path component */
#define OBJFS_PATH_MAX 4096 /* bytes per path, terminating NUL included */
#define OBJFS_NODE_MAX 64   /* bytes per node name, NUL included */
#define OBJFS_CSUM_LEN 16   /* xxh3-128 */
#define OBJFS_CSUM_HEX (2 * OBJFS_CSUM_LEN + 1)

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Parse a size with an optional binary suffix (K, M, G, T, optionally
 * followed by "i" and/or "B": 512M, 4GiB, 1024).  0 or -EINVAL/-ERANGE.
 */
int util_parse_size(const char *s, uint64_t *ret_size);

/*
 * A size for messages, the way util_parse_size() reads them: in the largest
 * binary unit it reaches (K, M, G, T, P), whole if exact, else with one
 * decimal, cut (not rounded): "1T", "23.5G", "300M", "512".
 */
void util_format_size(uint64_t bytes, char *buf, size_t len);

/* Parse a whole decimal uint64 (no sign, no junk).  0 or -EINVAL/-ERANGE. */
int util_parse_u64(const char *s, uint64_t *ret);

/*
 * Check one path component from a user: not empty, not "." or "..", no
 * '/', valid UTF-8, at most OBJFS_NAME_MAX bytes.  Returns 0,
 * -ENAMETOOLONG, -EILSEQ or -EINVAL.
 */
int util_name_validate(const char *name);

/* Is @s (of @len bytes) well-formed UTF-8?  Overlongs and surrogates fail. */
bool util_utf8_valid(const char *s, size_t len);

/*
 * Check a node name: 1..63 bytes of [A-Za-z0-9._-], not starting with '.'
 * or '-'.  0 or -EINVAL.
 */
int util_node_name_validate(const char *name);

/* Lower-case hex of a checksum into @out (OBJFS_CSUM_HEX bytes). */
void util_csum_to_hex(const uint8_t csum[OBJFS_CSUM_LEN], char out[OBJFS_CSUM_HEX]);
/* Parse exactly 32 hex digits.  0 or -EINVAL. */
int util_csum_from_hex(const char *hex, uint8_t ret_csum[OBJFS_CSUM_LEN]);

/* xxh3-128 of one buffer. */
void util_csum_buf(const void *buf, size_t len, uint8_t ret_csum[OBJFS_CSUM_LEN]);

/* CLOCK_REALTIME in nanoseconds. */
int64_t util_now_ns(void);
/* A 64-bit hash of a node name (FNV-1a), never 0; 0 for NULL or "". */
uint64_t util_node_name_key(const char *name);

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t util_mono_ns(void);

/*
 * Is process @pid (of this pid namespace) gone, as far as this host can
 * tell from /proc?  True if there is no such process, if it is a zombie or
 * dead (state Z or X in /proc/PID/stat: killed but not yet reaped), or if
 * the process now at @pid started more than PROC_START_SLACK_NS after
 * @started_ns (CLOCK_REALTIME ns, taken by the process it ought to be,
 * after it started): then the pid was reused.  @started_ns <= 0 skips
 * that comparison.  False if it lives, and whenever /proc cannot tell: in
 * doubt, alive.  Meaningful only for a process of this host.
 */
#define PROC_START_SLACK_NS (2 * 1000000000LL)
bool util_proc_gone(int pid, int64_t started_ns);

/* Write all of @len bytes, retrying short writes and EINTR; 0 or -errno. */
int util_write_full(int fd, const void *buf, size_t len);

/* The soft limit on open files (RLIMIT_NOFILE) now; 0 if unlimited or
 * unknown. */
uint64_t util_nofile_limit(void);

/*
 * How objfsd shares an open-files limit of @nofile (util_nofile_limit(); 0:
 * unlimited) between the two things that hold descriptors in numbers:
 * the store's objects being written or fetched (store_stats' open_max)
 * and the connections the transport serves.  What both leave is for the
 * rest (FUSE, Redis, connections to peers, the store's and the log's own
 * files, passthrough's and mapping's transient opens, /proc reads).
 *
 *	serve_conns = nofile / 8, within [16, 256]
 *	open_max    = nofile - nofile / 4 (the quarter within [64, 1024];
 *		      nofile / 2 below 128)
 *
 * so open_max + serve_conns leaves the rest at least 16 descriptors
 * from a limit of 64, an eighth of the limit from 256, and 768 from
 * 4096.  Below 64 nothing is left to share.
 */
struct util_fd_budget {
	uint64_t open_max;	       /* UINT64_MAX when unlimited */
	unsigned serve_conns;	       /* connections served at once */
	unsigned serve_conns_per_node; /* of which from one node: min(32, half) */
};
void util_fd_budget(uint64_t nofile, struct util_fd_budget *ret);

/*
 * @len zeroed bytes mapped from the kernel, page-aligned, for a table that
 * is replaced whole when it grows: its pages go back at util_table_free(),
 * where malloc() would keep the hole in its heap (glibc raises its mmap
 * threshold as big blocks are freed, so doubled tables end up there).
 * NULL if out of memory.
 */
void *util_table_alloc(size_t len);
/* Unmap what util_table_alloc(@len) gave (NULL: nothing). */
void util_table_free(void *p, size_t len);

#endif
