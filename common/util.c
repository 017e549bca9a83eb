/*
 * util: parsing and validation of sizes, names and checksums; clocks; the
 * liveness of a process from /proc; how the open-files limit is shared.
 */
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "xxh.h"

int util_parse_u64(const char *s, uint64_t *ret)
{
	uint64_t v = 0;

	if (!s || !*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*ret = v;
	return 0;
}

int util_parse_size(const char *s, uint64_t *ret_size)
{
	char digits[32];
	const char *p = s;
	uint64_t v, mult = 1;
	size_t n;
	int r;

	if (!s)
		return -EINVAL;
	while (*p >= '0' && *p <= '9')
		p++;
	n = (size_t)(p - s);
	if (n == 0 || n >= sizeof(digits))
		return n ? -ERANGE : -EINVAL;
	memcpy(digits, s, n);
	digits[n] = '\0';
	r = util_parse_u64(digits, &v);
	if (r < 0)
		return r;
	switch (toupper((unsigned char)*p)) {
	case '\0':
		break;
	case 'K':
		mult = 1ULL << 10;
		break;
	case 'M':
		mult = 1ULL << 20;
		break;
	case 'G':
		mult = 1ULL << 30;
		break;
	case 'T':
		mult = 1ULL << 40;
		break;
	case 'B':
		break;
	default:
		return -EINVAL;
	}
	if (*p) {
		bool was_b = toupper((unsigned char)*p) == 'B';

		p++;
		if (!was_b && *p == 'i')
			p++;
		if (!was_b && toupper((unsigned char)*p) == 'B')
			p++;
		if (*p)
			return -EINVAL;
	}
	if (v > UINT64_MAX / mult)
		return -ERANGE;
	*ret_size = v * mult;
	return 0;
}

void util_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "KMGTP";
	uint64_t unit = 1;
	int u = -1;

	while (u < (int)sizeof(units) - 2 && bytes >= unit << 10) {
		unit <<= 10;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%" PRIu64, bytes);
	else if (bytes % unit == 0)
		snprintf(buf, len, "%" PRIu64 "%c", bytes / unit, units[u]);
	else
		snprintf(buf, len, "%" PRIu64 ".%" PRIu64 "%c", bytes / unit,
			 bytes % unit * 10 / unit, units[u]);
}

bool util_utf8_valid(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	while (i < len) {
		unsigned char c = s[i];
		uint32_t cp;
		size_t n, k;

		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			n = 1;
			cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			n = 2;
			cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			n = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (n >= len - i)
			return false;
		for (k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n + 1;
	}
	return true;
}

int util_name_validate(const char *name)
{
	size_t len;

	if (!name)
		return -EINVAL;
	len = strlen(name);
	if (len == 0 || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return -EINVAL;
	if (len > OBJFS_NAME_MAX)
		return -ENAMETOOLONG;
	if (!util_utf8_valid(name, len))
		return -EILSEQ;
	return 0;
}

int util_node_name_validate(const char *name)
{
	size_t len, i;

	if (!name)
		return -EINVAL;
	len = strlen(name);
	if (len == 0 || len >= OBJFS_NODE_MAX || name[0] == '.' || name[0] == '-')
		return -EINVAL;
	for (i = 0; i < len; i++) {
		char c = name[i];

		if (!isalnum((unsigned char)c) && c != '.' && c != '_' && c != '-')
			return -EINVAL;
	}
	return 0;
}

void util_csum_to_hex(const uint8_t csum[OBJFS_CSUM_LEN], char out[OBJFS_CSUM_HEX])
{
	static const char hex[] = "0123456789abcdef";
	int i;

	for (i = 0; i < OBJFS_CSUM_LEN; i++) {
		out[2 * i] = hex[csum[i] >> 4];
		out[2 * i + 1] = hex[csum[i] & 0xf];
	}
	out[2 * OBJFS_CSUM_LEN] = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int util_csum_from_hex(const char *hex, uint8_t ret_csum[OBJFS_CSUM_LEN])
{
	uint8_t out[OBJFS_CSUM_LEN];
	int i;

	if (!hex || strlen(hex) != 2 * OBJFS_CSUM_LEN)
		return -EINVAL;
	for (i = 0; i < OBJFS_CSUM_LEN; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	memcpy(ret_csum, out, sizeof(out));
	return 0;
}

void util_csum_buf(const void *buf, size_t len, uint8_t ret_csum[OBJFS_CSUM_LEN])
{
	XXH128_hash_t h = XXH3_128bits(buf, len);
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, h);
	memcpy(ret_csum, c.digest, OBJFS_CSUM_LEN);
}

int64_t util_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

uint64_t util_node_name_key(const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull;

	if (!name || !*name)
		return 0;
	for (; *name; name++)
		h = (h ^ (uint8_t)*name) * 0x100000001b3ull;
	return h ? h : 1;
}

int64_t util_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Start of process @pid in CLOCK_REALTIME ns from /proc/PID/stat (field 22,
 * clock ticks after boot), and its state letter.  0, -ESRCH or -EBADMSG. */
static int proc_stat(int pid, char *ret_state, int64_t *ret_start_ns)
{
	char path[32], buf[1024], *p, *end;
	unsigned long long ticks;
	struct timespec real, boot;
	long hz = sysconf(_SC_CLK_TCK);
	ssize_t n;
	int fd, i;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return errno == ESRCH ? -ESRCH : -errno;
	buf[n] = '\0';
	/* "PID (COMM) S PPID ...": COMM may hold spaces and parentheses */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2] || hz <= 0)
		return -EBADMSG;
	*ret_state = p[2];
	p += 3;
	/* fields 4 to 21, then starttime */
	for (i = 4; i <= 22; i++) {
		p = strchr(p, ' ');
		if (!p)
			return -EBADMSG;
		p++;
	}
	errno = 0;
	ticks = strtoull(p, &end, 10);
	if (errno || end == p || (*end != ' ' && *end != '\n' && *end))
		return -EBADMSG;
	clock_gettime(CLOCK_REALTIME, &real);
	clock_gettime(CLOCK_BOOTTIME, &boot);
	*ret_start_ns = (int64_t)real.tv_sec * 1000000000LL + real.tv_nsec -
			((int64_t)boot.tv_sec * 1000000000LL + boot.tv_nsec) +
			(int64_t)(ticks * (1000000000ULL / (unsigned long long)hz));
	return 0;
}

bool util_proc_gone(int pid, int64_t started_ns)
{
	int64_t start_ns;
	char state;
	int r;

	if (pid <= 0)
		return false;
	r = proc_stat(pid, &state, &start_ns);
	if (r == -ESRCH)
		return true;
	if (r < 0)
		return false;
	if (state == 'Z' || state == 'X' || state == 'x')
		return true;
	return started_ns > 0 && start_ns > started_ns + PROC_START_SLACK_NS;
}

int util_write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

uint64_t util_nofile_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	return (uint64_t)rl.rlim_cur;
}

static uint64_t clamp_u64(uint64_t v, uint64_t lo, uint64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

void util_fd_budget(uint64_t nofile, struct util_fd_budget *ret)
{
	uint64_t spare;

	ret->serve_conns = nofile ? (unsigned)clamp_u64(nofile / 8, 16, 256) : 256;
	ret->serve_conns_per_node = ret->serve_conns / 2 < 32 ? ret->serve_conns / 2 : 32;
	if (!nofile) {
		ret->open_max = UINT64_MAX;
		return;
	}
	spare = clamp_u64(nofile / 4, 64, 1024);
	ret->open_max = nofile > 2 * spare ? nofile - spare : nofile / 2;
}

void *util_table_alloc(size_t len)
{
	void *p;

	if (!len)
		return NULL;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void util_table_free(void *p, size_t len)
{
	if (p)
		munmap(p, len);
}
