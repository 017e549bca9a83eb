/*
 * meta_attr: owners, modes and times as the location service stores
 * them (struct meta_attr in meta.h): the text and back.  A leaf: it
 * knows no Redis.
 */
#include "meta.h"
#include "meta_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int meta_attr_text(const struct meta_attr *a, int64_t mtime_ns, char buf[META_ATTR_TEXT_MAX])
{
	int n;

	buf[0] = '\0';
	if (!a || !a->set)
		return 0;
	if (a->uid == UINT32_MAX || a->gid == UINT32_MAX || a->mode > 07777)
		return -EINVAL;
	if (a->nlink > 1)
		n = snprintf(buf, META_ATTR_TEXT_MAX,
			     "%" PRIu32 " %" PRIu32 " %" PRIo32 " %" PRId64 " %" PRId64 " %" PRIu32,
			     a->uid, a->gid, a->mode, a->atime_ns, a->ctime_ns, a->nlink);
	else if (a->atime_ns == mtime_ns && a->ctime_ns == mtime_ns)
		n = snprintf(buf, META_ATTR_TEXT_MAX, "%" PRIu32 " %" PRIu32 " %" PRIo32, a->uid,
			     a->gid, a->mode);
	else
		n = snprintf(buf, META_ATTR_TEXT_MAX,
			     "%" PRIu32 " %" PRIu32 " %" PRIo32 " %" PRId64 " %" PRId64, a->uid,
			     a->gid, a->mode, a->atime_ns, a->ctime_ns);
	if (n < 0 || n >= META_ATTR_TEXT_MAX) {
		buf[0] = '\0';
		return -EINVAL;
	}
	return 0;
}

/* One space-separated field of @s at *@at: a decimal (@base 10, or 8)
 * of at most @max, or with @neg a signed one. */
static int attr_field(const char *s, size_t *at, int base, uint64_t max, bool neg, int64_t *ret)
{
	const char *p = s + *at;
	bool minus = neg && *p == '-';
	uint64_t v = 0;
	size_t n = 0;

	p += minus;
	for (; p[n] >= '0' && p[n] <= (base == 8 ? '7' : '9'); n++) {
		unsigned d = (unsigned)(p[n] - '0');

		if (n >= 20 || v > (UINT64_MAX - d) / (unsigned)base)
			return -EBADMSG;
		v = v * (unsigned)base + d;
	}
	if (!n || (p[n] != ' ' && p[n] != '\0') || v > max + minus)
		return -EBADMSG;
	*ret = minus ? (int64_t)(0 - v) : (int64_t)v;
	*at = (size_t)(p + n - s) + (p[n] == ' ');
	return p[n] == ' ' ? 1 : 0;
}

int meta_attr_parse(const char *t, int64_t mtime_ns, struct meta_attr *ret)
{
	/* uid, gid, mode (octal), atime, ctime, names */
	static const uint64_t max[6] = {UINT32_MAX - 1, UINT32_MAX - 1, 07777,
					INT64_MAX,	INT64_MAX,	UINT32_MAX};
	int64_t v[6];
	size_t at = 0;
	int i, more = 1;

	for (i = 0; i < 6 && more == 1; i++)
		more = attr_field(t, &at, i == 2 ? 8 : 10, max[i], i == 3 || i == 4, &v[i]);
	if (i == 3 && more == 0) {
		v[3] = v[4] = mtime_ns; /* both the mtime */
		i = 5;
	}
	if (i == 5 && more == 0)
		v[5] = 1;
	else if (i != 6 || more != 0 || v[5] < 2)
		return -EBADMSG;
	*ret = (struct meta_attr){.set = true,
				  .uid = (uint32_t)v[0],
				  .gid = (uint32_t)v[1],
				  .mode = (uint32_t)v[2],
				  .atime_ns = v[3],
				  .ctime_ns = v[4],
				  .nlink = (uint32_t)v[5]};
	return 0;
}
