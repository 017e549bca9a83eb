/*
 * meta_reply: what Redis answers, checked before anyone believes it.
 *
 * Owns: the validators of replies (meta_rep_*: a bounded string, an
 * integer, an object record, a name's entry, a node card), the escaping
 * of Redis text for the log, and the rate-limited reports of corrupt
 * records and bad replies.  Below everything else in meta/: the pool,
 * the cluster and sentinel code and meta.c's calls all use it, and it
 * calls none of them.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "bsum.h"
#include "log.h"
#include "meta_i.h"

/* A loop over a bad record must not flood the log: the same line at most
 * once in 10 s, and at most 100 lines in 10 s. */
static struct log_ratelimit corrupt_rl = LOG_RATELIMIT_INIT("corrupt records in Redis", 10000, 100);

void meta_log_corrupt(const char *fmt, ...)
{
	char what[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	log_msg_limited(&corrupt_rl, LOGL_ERROR, "corrupt record in Redis: %s", what);
}

const char *meta_esc(const char *s, size_t len, char *buf, size_t size)
{
	bool utf8 = util_utf8_valid(s, len);
	size_t i, n = 0;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (n + 8 > size) {
			memcpy(buf + n, "...", 4);
			return buf;
		}
		if ((c >= 0x20 && c < 0x7f && c != '\\') || (c >= 0x80 && utf8))
			buf[n++] = (char)c;
		else
			n += (size_t)snprintf(buf + n, size - n, "\\x%02x", c);
	}
	buf[n] = '\0';
	return buf;
}

const char *meta_rep_shown(const redisReply *r, char *buf, size_t size)
{
	char esc[META_SHOWN_MAX];

	if (!r || r->type == REDIS_REPLY_NIL)
		return "missing";
	if (r->type == REDIS_REPLY_INTEGER)
		snprintf(buf, size, "%lld", r->integer);
	else if (r->type == REDIS_REPLY_STRING)
		snprintf(buf, size, "'%s'", meta_esc(r->str, r->len, esc, sizeof(esc) - 2));
	else
		snprintf(buf, size, "a reply of type %d", r->type);
	return buf;
}

void meta_log_bad_reply(const char *what, const char *key, const char *str)
{
	char esc[1024];
	const char *s = str, *end;
	size_t len;

	if (!strncmp(s, "ERR ", 4))
		s += 4;
	if (!strncmp(s, "WRONGTYPE", 9)) {
		if (key)
			meta_log_corrupt("key '%s' has the wrong type for %s", key, what);
		else
			meta_log_corrupt("%s met a key of the wrong type", what);
		return;
	}
	if (!strncmp(s, "EBADMSG", 7))
		s += 7;
	s += strspn(s, " ");
	/* Redis 7 appends where in the script the error was raised */
	end = strstr(s, " script: ");
	len = end ? (size_t)(end - s) : strlen(s);
	if (!len)
		meta_log_corrupt("script %s found a malformed value", what);
	else
		meta_log_corrupt("%s", meta_esc(s, len, esc, sizeof(esc)));
}

int meta_rep_bad_field(const char *kind, uint64_t id, const char *field, const redisReply *r)
{
	char shown[META_SHOWN_MAX];

	meta_log_corrupt("%s %" PRIu64 ": field '%s' is %s", kind, id, field,
			 meta_rep_shown(r, shown, sizeof(shown)));
	return -EBADMSG;
}

/* A bulk string of at most @max bytes and without NULs, or NULL. */
const char *meta_rep_text(const redisReply *r, size_t max)
{
	if (!r || r->type != REDIS_REPLY_STRING || !r->str || r->len > max ||
	    strlen(r->str) != r->len)
		return NULL;
	return r->str;
}

int meta_rep_u64(const redisReply *r, uint64_t *ret)
{
	const char *s = meta_rep_text(r, 20);

	if (!s || util_parse_u64(s, ret) < 0)
		return -EBADMSG;
	return 0;
}

int meta_rep_i64(const redisReply *r, int64_t *ret)
{
	const char *s = meta_rep_text(r, 20);
	bool neg;
	uint64_t v;

	if (!s)
		return -EBADMSG;
	neg = *s == '-';
	if (util_parse_u64(s + neg, &v) < 0 || v > (uint64_t)INT64_MAX + neg)
		return -EBADMSG;
	*ret = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

/* An id: decimal, no leading zero, 1 .. UINT64_MAX. */
int meta_parse_id(const char *s, uint64_t *ret)
{
	if (*s < '1' || *s > '9' || util_parse_u64(s, ret) < 0)
		return -EBADMSG;
	return 0;
}

int meta_rep_id(const redisReply *r, uint64_t *ret)
{
	const char *s = meta_rep_text(r, 20);

	return s ? meta_parse_id(s, ret) : -EBADMSG;
}

/* "d<id>", "f<id>", or a file entry with its attributes, "f<id> <size>
 * <mtime> <csum> <origin>" (the scripts check those; only the kind and
 * id are read here) */
int meta_rep_entry(const redisReply *r, enum meta_kind *kind, uint64_t *id)
{
	const char *s = meta_rep_text(r, 256), *sp;
	char buf[22];
	size_t n;

	if (!s || (s[0] != 'd' && s[0] != 'f' && s[0] != 'l'))
		return -EBADMSG;
	sp = strchr(s, ' ');
	n = sp ? (size_t)(sp - s - 1) : strlen(s + 1);
	if ((sp && s[0] != 'f') || n >= sizeof(buf))
		return -EBADMSG;
	memcpy(buf, s + 1, n);
	buf[n] = '\0';
	if (meta_parse_id(buf, id) < 0)
		return -EBADMSG;
	*kind = s[0] == 'd' ? META_DIR : s[0] == 'l' ? META_LINK : META_FILE;
	return 0;
}

/* size, csum, mtime, origin.  A size must fit an off_t: the kernel
 * refuses larger ones. */
int meta_rep_obj(redisReply *const *f, uint64_t id, struct meta_obj *ret)
{
	struct meta_obj o;
	const char *csum, *origin;

	memset(&o, 0, sizeof(o));
	o.id = id;
	csum = meta_rep_text(f[1], 2 * OBJFS_CSUM_LEN);
	origin = meta_rep_text(f[3], OBJFS_NODE_MAX - 1);
	if (meta_rep_u64(f[0], &o.size) < 0 || o.size > INT64_MAX)
		return meta_rep_bad_field("object", id, "size", f[0]);
	if (!csum || util_csum_from_hex(csum, o.csum) < 0)
		return meta_rep_bad_field("object", id, "csum", f[1]);
	if (meta_rep_i64(f[2], &o.mtime_ns) < 0)
		return meta_rep_bad_field("object", id, "mtime", f[2]);
	if (!origin || util_node_name_validate(origin) < 0)
		return meta_rep_bad_field("object", id, "origin", f[3]);
	memcpy(o.origin, origin, strlen(origin) + 1);
	*ret = o;
	return 0;
}

/* The attributes of @kind @id, whose mtime is @mtime_ns, as
 * meta_attr_text() writes them; nil: none.  -EBADMSG (logged) if not
 * that. */
static int rep_attr(const redisReply *r, const char *kind, uint64_t id, int64_t mtime_ns,
		    struct meta_attr *ret)
{
	const char *t = meta_rep_text(r, META_ATTR_TEXT_MAX - 1);

	memset(ret, 0, sizeof(*ret));
	if (r && r->type == REDIS_REPLY_NIL)
		return 0;
	if (!t || meta_attr_parse(t, mtime_ns, ret) < 0)
		return meta_rep_bad_field(kind, id, "attr", r);
	return 0;
}

/* {"d<id>", mtime, nsub[, attr]} or {"f<id>", size, csum, mtime, origin[,
 * attr]} (attr nil: none) */
int meta_rep_lookup(const redisReply *rep, struct meta_entry *ret)
{
	struct meta_entry e;

	memset(&e, 0, sizeof(e));
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
	    meta_rep_entry(rep->element[0], &e.kind, &e.id) < 0)
		return -EBADMSG;
	if (e.kind == META_DIR) {
		if (rep->elements != 3 && rep->elements != 4)
			return -EBADMSG;
		if (meta_rep_i64(rep->element[1], &e.obj.mtime_ns) < 0)
			return meta_rep_bad_field("directory", e.id, "/mtime", rep->element[1]);
		if (meta_rep_u64(rep->element[2], &e.nsub) < 0)
			return meta_rep_bad_field("directory", e.id, "/nsub", rep->element[2]);
		if (rep->elements == 4 &&
		    rep_attr(rep->element[3], "directory", e.id, e.obj.mtime_ns, &e.attr) < 0)
			return -EBADMSG;
		e.obj.id = e.id;
	} else if (e.kind == META_LINK) {
		/* {"l<id>", mtime, size (the target's length), attr} */
		if (rep->elements != 4)
			return -EBADMSG;
		if (meta_rep_i64(rep->element[1], &e.obj.mtime_ns) < 0)
			return meta_rep_bad_field("symbolic link", e.id, "m", rep->element[1]);
		if (meta_rep_u64(rep->element[2], &e.obj.size) < 0 || !e.obj.size ||
		    e.obj.size > META_LINK_MAX)
			return meta_rep_bad_field("symbolic link", e.id, "t", rep->element[2]);
		if (rep_attr(rep->element[3], "symbolic link", e.id, e.obj.mtime_ns, &e.attr) < 0)
			return -EBADMSG;
		e.obj.id = e.id;
	} else if ((rep->elements != 5 && rep->elements != 6) ||
		   meta_rep_obj(rep->element + 1, e.id, &e.obj) < 0 ||
		   (rep->elements == 6 &&
		    rep_attr(rep->element[5], "object", e.id, e.obj.mtime_ns, &e.attr) < 0)) {
		return -EBADMSG;
	}
	*ret = e;
	return 0;
}

int meta_rep_entry_of(redisReply *rep, enum meta_kind kind, uint64_t id, struct meta_entry *ret)
{
	struct meta_entry e;
	int r = meta_rep_lookup(rep, &e);

	freeReplyObject(rep);
	if (r == 0 && (e.id != id || (kind && e.kind != kind)))
		r = -EBADMSG;
	if (r == 0 && ret)
		*ret = e;
	return r;
}

/* Block sums as text that a script may store: digits, ':' and lower-case
 * hex, bounded (bsum.h; the node checks them against the size). */
bool meta_bsum_text_ok(const char *b)
{
	size_t len = b ? strnlen(b, BSUM_TEXT_MAX + 1) : 0;

	return len <= BSUM_TEXT_MAX && strspn(b ? b : "", "0123456789abcdef:") == len;
}

bool meta_caps_valid(const char *s, size_t len)
{
	return len == 0 ||
	       chars_in(s, len, sizeof(((struct meta_card *)0)->caps) - 1, ALNUM ",._-");
}

/* Is @s (@len bytes) a port number, 1..65535, digits only? */
static bool port_valid(const char *s, size_t len)
{
	unsigned long port = 0;
	size_t i;

	if (!chars_in(s, len, 5, "0123456789"))
		return false;
	for (i = 0; i < len; i++)
		port = port * 10 + (unsigned long)(s[i] - '0');
	return port >= 1 && port <= 65535;
}

bool meta_hostport_valid(const char *s)
{
	size_t len = s ? strnlen(s, sizeof(((struct meta_card *)0)->rdma)) : 0;
	const char *colon, *close;

	if (!len || len >= sizeof(((struct meta_card *)0)->rdma))
		return false;
	if (s[0] == '[') {
		/* an IPv6 address, perhaps with a zone ("%eth0") */
		close = memchr(s, ']', len);
		return close && close[1] == ':' &&
		       chars_in(s + 1, (size_t)(close - s - 1), len, ALNUM ":.%_-") &&
		       port_valid(close + 2, len - (size_t)(close + 2 - s));
	}
	colon = memchr(s, ':', len);
	return colon && chars_in(s, (size_t)(colon - s), len, ALNUM "._-") &&
	       port_valid(colon + 1, len - (size_t)(colon + 1 - s));
}

const char *meta_rep_rdma(const redisReply *r, const char *node)
{
	static struct log_ratelimit rl =
	    LOG_RATELIMIT_INIT("meta: ignored rdma addresses", 10000, 4);
	const char *addr;
	char shown[META_SHOWN_MAX];

	/* cards of nodes older than RDMA have none */
	if (r->type == REDIS_REPLY_NIL)
		return "";
	addr = meta_rep_text(r, sizeof(((struct meta_card *)0)->rdma) - 1);
	if (addr && (!addr[0] || meta_hostport_valid(addr)))
		return addr;
	/* the TCP address may still be good: only RDMA is given up */
	log_msg_limited(&rl, LOGL_WARN,
			"meta: node '%s': ignoring the malformed rdma address %s on its card", node,
			meta_rep_shown(r, shown, sizeof(shown)));
	return "";
}

/* host, pid, listen, instance, started, capacity, used, caps, rdma (caps
 * and rdma are nil on the cards of older nodes: "") */
int meta_rep_card(redisReply *const *f, const char *node, struct meta_card *ret)
{
	const char *host = meta_rep_text(f[0], sizeof(ret->host) - 1);
	const char *listen = meta_rep_text(f[2], sizeof(ret->listen) - 1);
	const char *instance = meta_rep_text(f[3], sizeof(ret->instance) - 1);
	const char *caps, *rdma;
	struct meta_card c;
	int64_t pid;

	caps = f[7]->type == REDIS_REPLY_NIL ? "" : meta_rep_text(f[7], sizeof(ret->caps) - 1);
	memset(&c, 0, sizeof(c));
	if (!host || !listen || !instance || meta_rep_i64(f[1], &pid) < 0 || pid < 0 ||
	    pid > INT_MAX || meta_rep_i64(f[4], &c.started_ns) < 0 ||
	    meta_rep_u64(f[5], &c.capacity) < 0 || meta_rep_u64(f[6], &c.used) < 0 || !caps ||
	    !meta_caps_valid(caps, strlen(caps)))
		return -EBADMSG;
	memcpy(c.host, host, strlen(host) + 1);
	memcpy(c.listen, listen, strlen(listen) + 1);
	memcpy(c.instance, instance, strlen(instance) + 1);
	memcpy(c.caps, caps, strlen(caps) + 1);
	rdma = meta_rep_rdma(f[8], node);
	memcpy(c.rdma, rdma, strlen(rdma) + 1);
	c.pid = (int)pid;
	*ret = c;
	return 0;
}
