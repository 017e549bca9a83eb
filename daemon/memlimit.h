/*
 * memlimit: how much memory this process may have, for the store's
 * capacity and prefault: the host's (MemTotal and MemAvailable of
 * /proc/meminfo) and that of its memory cgroup and the cgroup's
 * ancestors: cgroup v2's memory.max and memory.current, or the v1 memory
 * controller's memory.limit_in_bytes and memory.usage_in_bytes, found
 * through /proc/self/cgroup and /proc/self/mountinfo.  A limit that
 * cannot be read is no limit.  Reads files only; no state.
 */
#ifndef OBJFS_MEMLIMIT_H
#define OBJFS_MEMLIMIT_H

#include <stdint.h>

#define MEMLIMIT_NONE UINT64_MAX

/* One cgroup that limits this process's memory. */
struct memlimit_cg {
	uint64_t limit;	  /* bytes; MEMLIMIT_NONE: no cgroup limits it */
	uint64_t usage;	  /* bytes charged to it now */
	char dir[512];	  /* its directory, e.g. /sys/fs/cgroup/system.slice/x.service */
	const char *file; /* its limit's file: "memory.max" or "memory.limit_in_bytes" */
};

struct memlimit {
	uint64_t total;		     /* MemTotal, bytes */
	uint64_t available;	     /* MemAvailable, bytes */
	struct memlimit_cg lowest;   /* the cgroup with the lowest limit */
	struct memlimit_cg tightest; /* the one with the least room left (limit - usage) */
};

/* Read them now into *@ret.  0, or -errno if /proc/meminfo cannot be read. */
int memlimit_read(struct memlimit *ret);

#endif
