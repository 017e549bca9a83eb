/*
 * memlimit: the memory this process may have (memlimit.h).
 *
 * The host's comes from /proc/meminfo.  The cgroups' from the memory
 * hierarchy this process is in: /proc/self/cgroup names its cgroup in
 * each hierarchy ("0::/a/b" for cgroup v2, "4:memory:/a/b" for the v1
 * memory controller), /proc/self/mountinfo where that hierarchy is
 * mounted (and which of its cgroups is the mount's root, inside a cgroup
 * namespace or a bind mount).  The cgroup and every ancestor visible
 * under the mount are read, since each one's limit applies: v2 first,
 * then v1 (a host may run the memory controller under either).
 */
#define _GNU_SOURCE
#include "memlimit.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* A v1 limit this high (PAGE_COUNTER_MAX pages) means none. */
#define V1_UNLIMITED (1ULL << 62)

/* The value of "@key: N kB" in /proc/meminfo, in bytes. */
static bool meminfo_value(const char *line, const char *key, uint64_t *ret)
{
	size_t n = strlen(key);
	unsigned long long kb;

	if (strncmp(line, key, n) || line[n] != ':' || sscanf(line + n + 1, "%llu", &kb) != 1)
		return false;
	*ret = (uint64_t)kb << 10;
	return true;
}

static int read_meminfo(struct memlimit *m)
{
	char line[256];
	bool total = false, avail = false;
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return -errno;
	while ((!total || !avail) && fgets(line, sizeof(line), f)) {
		total = total || meminfo_value(line, "MemTotal", &m->total);
		avail = avail || meminfo_value(line, "MemAvailable", &m->available);
	}
	fclose(f);
	if (!total)
		return -EINVAL;
	if (!avail) /* kernels before 3.14 */
		m->available = m->total;
	return 0;
}

/* One number (or "max") from file @name in @dir.  false if unreadable. */
static bool read_u64_at(const char *dir, const char *name, uint64_t *ret)
{
	char path[600], buf[64];
	bool ok = false;
	FILE *f;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		return false;
	f = fopen(path, "re");
	if (!f)
		return false;
	if (fgets(buf, sizeof(buf), f)) {
		buf[strcspn(buf, "\n")] = '\0';
		if (!strcmp(buf, "max")) {
			*ret = MEMLIMIT_NONE;
			ok = true;
		} else {
			ok = util_parse_u64(buf, ret) == 0;
		}
	}
	fclose(f);
	return ok;
}

/*
 * Where the hierarchy of @fstype ("cgroup2", or "cgroup" with super
 * option @opt) is mounted, and which cgroup is the mount's root.
 */
static bool find_mount(const char *fstype, const char *opt, char *mnt, size_t mlen, char *root,
		       size_t rlen)
{
	char line[4096], *f[16], *save, *sep;
	bool found = false;
	size_t n;
	FILE *fp = fopen("/proc/self/mountinfo", "re");

	if (!fp)
		return false;
	while (!found && fgets(line, sizeof(line), fp)) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS...] - FSTYPE SOURCE SUPEROPTS */
		sep = strstr(line, " - ");
		if (!sep)
			continue;
		*sep = '\0';
		n = 0;
		for (char *t = strtok_r(line, " ", &save); t && n < 5;
		     t = strtok_r(NULL, " ", &save))
			f[n++] = t;
		if (n < 5)
			continue;
		n = 5;
		for (char *t = strtok_r(sep + 3, " \n", &save); t && n < 8;
		     t = strtok_r(NULL, " \n", &save))
			f[n++] = t;
		if (n < 8 || strcmp(f[5], fstype))
			continue;
		if (opt) {
			char opts[512], want[64];

			snprintf(opts, sizeof(opts), ",%s,", f[7]);
			snprintf(want, sizeof(want), ",%s,", opt);
			if (!strstr(opts, want))
				continue;
		}
		found = strlen(f[4]) < mlen && strlen(f[3]) < rlen;
		if (found) {
			strcpy(mnt, f[4]);
			strcpy(root, f[3]);
		}
	}
	fclose(fp);
	return found;
}

/*
 * This process's cgroup in cgroup v2 ("0::PATH" in /proc/self/cgroup), or
 * in the v1 hierarchy of the memory controller ("N:...,memory,...:PATH").
 */
static bool find_cgroup(bool v2, char *path, size_t len)
{
	char line[4096], *c1, *c2;
	bool found = false;
	FILE *f = fopen("/proc/self/cgroup", "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		c1 = strchr(line, ':');
		c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		if (v2) {
			found = !strcmp(line, "0:");
		} else {
			char ctl[256];

			snprintf(ctl, sizeof(ctl), ",%s,", c1 + 1);
			found = strstr(ctl, ",memory,") != NULL;
		}
		found = found && strlen(c2 + 1) < len;
		if (found)
			strcpy(path, c2 + 1);
	}
	fclose(f);
	return found;
}

/* Fold cgroup @dir (limit @limit, usage @usage) into @m. */
static void take(struct memlimit *m, const char *dir, const char *file, uint64_t limit,
		 uint64_t usage)
{
	struct memlimit_cg cg = {.limit = limit, .usage = usage, .file = file};
	uint64_t room = limit > usage ? limit - usage : 0;
	uint64_t least =
	    m->tightest.limit > m->tightest.usage ? m->tightest.limit - m->tightest.usage : 0;

	snprintf(cg.dir, sizeof(cg.dir), "%s", dir);
	if (limit < m->lowest.limit)
		m->lowest = cg;
	if (m->tightest.limit == MEMLIMIT_NONE || room < least)
		m->tightest = cg;
}

/* Read the cgroups of one hierarchy.  false if this process has none there. */
static bool read_hierarchy(struct memlimit *m, bool v2)
{
	const char *limit_file = v2 ? "memory.max" : "memory.limit_in_bytes";
	const char *usage_file = v2 ? "memory.current" : "memory.usage_in_bytes";
	char mnt[256], root[512], path[512], dir[512], *slash;
	uint64_t limit, usage;
	size_t rl, ml;

	if (!find_cgroup(v2, path, sizeof(path)) ||
	    !find_mount(v2 ? "cgroup2" : "cgroup", v2 ? NULL : "memory", mnt, sizeof(mnt), root,
			sizeof(root)))
		return false;
	/* the part of the path below the mount's root; a path outside it
	 * (a cgroup namespace whose root was mounted) reads the root */
	rl = strcmp(root, "/") ? strlen(root) : 0;
	if (strncmp(path, root, rl) || (path[rl] && path[rl] != '/'))
		rl = strlen(path);
	ml = strlen(mnt);
	if ((size_t)snprintf(dir, sizeof(dir), "%s%s", mnt, path + rl) >= sizeof(dir))
		return false;
	for (;;) {
		if (read_u64_at(dir, limit_file, &limit) && read_u64_at(dir, usage_file, &usage) &&
		    limit < (v2 ? MEMLIMIT_NONE : V1_UNLIMITED))
			take(m, dir, limit_file, limit, usage);
		slash = strrchr(dir, '/');
		if (!slash || (size_t)(slash - dir) < ml)
			break;
		*slash = '\0';
	}
	return true;
}

int memlimit_read(struct memlimit *ret)
{
	struct memlimit m = {0};
	int r;

	m.lowest.limit = m.tightest.limit = MEMLIMIT_NONE;
	r = read_meminfo(&m);
	if (r < 0)
		return r;
	(void)read_hierarchy(&m, true);
	(void)read_hierarchy(&m, false);
	*ret = m;
	return 0;
}
