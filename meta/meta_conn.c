/*
 * meta_conn: one connection to one Redis server, below the pool.
 *
 * Owns: opening a hiredis context to an address with a timeout, with the
 * AUTH and SELECT the URL asks for; sending a command and reading its
 * reply within a deadline; the SIGPIPE guard around a write; the map
 * from Redis's and hiredis's errors to errnos; parsing host:port.  The
 * pool (meta_pool.c), the cluster's slot map (meta_route.c), the
 * sentinels (meta_sentinel.c) and the subscriber (meta_cluster.c) talk
 * to Redis through it; it calls none of them.
 */
#define _GNU_SOURCE
#include "meta.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "log.h"
#include "meta_i.h"

/*
 * The one map from a failed hiredis context to an errno, with a text for
 * meta_last_error().  @e is errno right after the failing call.
 */
int meta_conn_error(const redisContext *ctx, int e, char *why, size_t len)
{
	int r;

	switch (ctx->err) {
	case REDIS_ERR_IO:
		/* hiredis 0.14 reports a timeout as EAGAIN from read(2) */
		if (e == EAGAIN || e == EWOULDBLOCK || e == EINPROGRESS || e == ETIMEDOUT ||
		    !strcmp(ctx->errstr, strerror(EAGAIN))) {
			snprintf(why, len, "%s", strerror(ETIMEDOUT));
			return -ETIMEDOUT;
		}
		r = e > 0 ? -e : -EIO;
		break;
	case REDIS_ERR_EOF:
		snprintf(why, len, "connection closed by server");
		return -ECONNRESET;
	case REDIS_ERR_PROTOCOL:
		r = -EPROTO;
		break;
	case REDIS_ERR_OOM:
		r = -ENOMEM;
		break;
	default:
		r = -EIO;
		break;
	}
	snprintf(why, len, "%s", ctx->errstr[0] ? ctx->errstr : strerror(-r));
	return r;
}

/*
 * The one map from an error reply to an errno.  Scripts answer with an
 * errno name as the first word ("ENOENT", or "ERR ENOENT ..." from
 * redis.error_reply() on Redis 7).
 */
int meta_conn_reply_errno(const redisReply *rep)
{
	return meta_conn_errno_of(rep->str);
}

int meta_conn_errno_of(const char *str)
{
	static const struct {
		const char *name;
		int err;
	} codes[] = {
	    {"ENOENT", ENOENT},	    {"EEXIST", EEXIST},		{"ENOTDIR", ENOTDIR},
	    {"EISDIR", EISDIR},	    {"ENOTEMPTY", ENOTEMPTY},	{"EINVAL", EINVAL},
	    {"EBADMSG", EBADMSG},   {"EADDRINUSE", EADDRINUSE}, {"ELOOP", ELOOP},
	    {"ENOTUNIQ", ENOTUNIQ}, {"EAGAIN", EAGAIN},		{"EPERM", EPERM},
	    {"EMLINK", EMLINK},	    {"EPROTO", EPROTO},		{"EBUSY", EBUSY},
	};
	const char *s = str ? str : "";
	size_t i, n;

	if (!strncmp(s, "NOAUTH", 6) || !strncmp(s, "WRONGPASS", 9))
		return -EACCES;
	/* a key of the wrong type is a corrupt record, not a failure of Redis */
	if (!strncmp(s, "WRONGTYPE", 9))
		return -EBADMSG;
	if (!strncmp(s, "ERR ", 4))
		s += 4;
	n = strcspn(s, " ");
	for (i = 0; i < ARRAY_SIZE(codes); i++)
		if (strlen(codes[i].name) == n && !strncmp(s, codes[i].name, n))
			return -codes[i].err;
	return -EIO;
}

void meta_conn_sigpipe_block(struct meta_sigpipe_guard *g)
{
	sigset_t set, pend;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, &g->old);
	g->was_pending = sigpending(&pend) == 0 && sigismember(&pend, SIGPIPE) == 1;
}

/* @failed: the command failed, so it may have raised SIGPIPE. */
void meta_conn_sigpipe_unblock(struct meta_sigpipe_guard *g, bool failed)
{
	static const struct timespec zero;
	sigset_t set, pend;

	if (failed && !g->was_pending && sigpending(&pend) == 0 &&
	    sigismember(&pend, SIGPIPE) == 1) {
		sigemptyset(&set);
		sigaddset(&set, SIGPIPE);
		sigtimedwait(&set, NULL, &zero);
	}
	pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* Read the next pipelined reply; on failure the context is unusable. */
int meta_conn_read_reply(redisContext *ctx, redisReply **ret, char *why, size_t len)
{
	struct meta_sigpipe_guard g;
	void *rep = NULL;
	int ok, e;

	meta_conn_sigpipe_block(&g);
	ok = redisGetReply(ctx, &rep);
	e = errno;
	meta_conn_sigpipe_unblock(&g, ok != REDIS_OK);
	if (ok != REDIS_OK || !rep)
		return meta_conn_error(ctx, e, why, len);
	*ret = rep;
	return 0;
}

int meta_conn_cmd(redisContext *ctx, int argc, const char **argv, redisReply **ret, char *why,
		  size_t wlen)
{
	if (redisAppendCommandArgv(ctx, argc, argv, NULL) != REDIS_OK) {
		snprintf(why, wlen, "out of memory");
		return -ENOMEM;
	}
	return meta_conn_read_reply(ctx, ret, why, wlen);
}

int meta_conn_flush(redisContext *ctx, char *why, size_t wlen)
{
	int done = 0;

	do {
		if (redisBufferWrite(ctx, &done) != REDIS_OK)
			return meta_conn_error(ctx, errno, why, wlen);
	} while (!done);
	return 0;
}

int meta_conn_next(redisContext *ctx, int wake_fd, int64_t deadline, redisReply **ret, char *why,
		   size_t wlen)
{
	struct pollfd p[2] = {
	    {.fd = wake_fd, .events = POLLIN},
	    {.fd = ctx->fd, .events = POLLIN},
	};
	void *rep;
	int64_t left;
	int n;

	for (;;) {
		if (redisGetReplyFromReader(ctx, &rep) != REDIS_OK)
			return meta_conn_error(ctx, errno, why, wlen);
		if (rep) {
			*ret = rep;
			return 0;
		}
		left = deadline - util_mono_ns();
		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(p, 2, (int)((left + 999999) / 1000000));
		if (n < 0 && errno != EINTR) {
			snprintf(why, wlen, "poll: %s", strerror(errno));
			return -errno;
		}
		if (n <= 0)
			continue;
		if (p[0].revents)
			return -ECANCELED;
		if (p[1].revents && redisBufferRead(ctx) != REDIS_OK)
			return meta_conn_error(ctx, errno, why, wlen);
	}
}

bool meta_conn_is_sha(const redisReply *rep)
{
	size_t i;

	if (rep->type != REDIS_REPLY_STRING || rep->len != SHA_LEN)
		return false;
	for (i = 0; i < SHA_LEN; i++)
		if (!isxdigit((unsigned char)rep->str[i]))
			return false;
	return true;
}

/*
 * Connect to @a (NULL: the URL's unix socket) with send and receive
 * timeouts of @timeout_ms and, with @auth, queue AUTH and SELECT as the
 * URL says (meta_conn_auth() reads their replies).
 */
int meta_conn_connect(struct meta *m, const struct addr *a, unsigned timeout_ms, bool auth,
		      redisContext **ret, char *why, size_t wlen)
{
	struct timeval tv = {
	    .tv_sec = timeout_ms / 1000,
	    .tv_usec = (timeout_ms % 1000) * 1000,
	};
	redisContext *ctx;
	int r;

	if (!a)
		ctx = redisConnectUnixWithTimeout(m->sock, tv);
	else
		ctx = redisConnectWithTimeout(a->host, a->port, tv);
	if (!ctx) {
		snprintf(why, wlen, "out of memory");
		return -ENOMEM;
	}
	if (ctx->err || redisSetTimeout(ctx, tv) != REDIS_OK) {
		r = meta_conn_error(ctx, errno, why, wlen);
		if (a) {
			size_t n = strlen(why);

			snprintf(why + n, wlen - n, " (%s:%d)", a->host, a->port);
		}
		goto clean_ctx;
	}
	/* hiredis 0.14 keeps at most 16 KiB of unused read buffer and
	 * moves the rest on every read: big replies get quadratic */
	ctx->reader->maxbuf = 0;
	r = -ENOMEM;
	snprintf(why, wlen, "out of memory");
	if (auth && m->password && redisAppendCommand(ctx, "AUTH %s", m->password) != REDIS_OK)
		goto clean_ctx;
	if (auth && m->db && redisAppendCommand(ctx, "SELECT %u", m->db) != REDIS_OK)
		goto clean_ctx;
	*ret = ctx;
	return 0;

clean_ctx:
	redisFree(ctx);
	return r == -ENOMEM ? r : -EIO;
}

/* Read the replies of the AUTH and SELECT that meta_conn_connect() queued. */
int meta_conn_auth(struct meta *m, redisContext *ctx, char *why, size_t wlen)
{
	redisReply *rep;
	int i, r;

	for (i = 0; i < 2; i++) {
		if ((i == 0 && !m->password) || (i == 1 && !m->db))
			continue;
		r = meta_conn_read_reply(ctx, &rep, why, wlen);
		if (r < 0)
			return r == -ENOMEM ? r : -EIO;
		if (rep->type == REDIS_REPLY_ERROR) {
			snprintf(why, wlen, "%s: %.200s",
				 i == 0 ? "authentication failed" : "SELECT", rep->str);
			r = i == 0 ? -EACCES : meta_conn_reply_errno(rep);
			freeReplyObject(rep);
			return r == -EACCES || r == -ENOMEM ? r : -EIO;
		}
		freeReplyObject(rep);
	}
	return 0;
}

int meta_conn_open(struct meta *m, const struct addr *a, unsigned timeout_ms, bool auth,
		   redisContext **ret, char *why, size_t wlen)
{
	redisContext *ctx;
	int r;

	r = meta_conn_connect(m, a, timeout_ms, auth, &ctx, why, wlen);
	if (r < 0)
		return r;
	r = auth ? meta_conn_auth(m, ctx, why, wlen) : 0;
	if (r < 0) {
		redisFree(ctx);
		return r;
	}
	why[0] = '\0';
	*ret = ctx;
	return 0;
}

/* Say in @why (may be NULL) what part of a URL is wrong, never the URL
 * itself (it may hold the password), and return -EINVAL. */
int __attribute__((format(printf, 3, 4)))
meta_conn_bad_url(char *why, size_t wlen, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	log_debug("meta: bad Redis URL: %s", what);
	if (why && wlen)
		snprintf(why, wlen, "%s", what);
	return -EINVAL;
}

/* Whole decimal number in [min, max]. */
int meta_conn_parse_range(const char *s, size_t len, uint64_t min, uint64_t max, uint64_t *ret)
{
	char buf[24];
	uint64_t v;

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (util_parse_u64(buf, &v) < 0 || v < min || v > max)
		return -EINVAL;
	*ret = v;
	return 0;
}

/* meta_addr_parse(), saying in @why (may be NULL) which part is wrong. */
int meta_addr_parse_why(const char *s, size_t len, int def_port, struct addr *ret, char *why,
			size_t wlen)
{
	const char *end = s + len, *host, *hend, *q;
	const char *set = ALNUM ".-_";
	struct addr a = {.port = def_port};
	uint64_t v;
	size_t hlen;

	if (len && *s == '[') {
		host = s + 1;
		hend = memchr(host, ']', len - 1);
		if (!hend)
			return meta_conn_bad_url(why, wlen, "bad address '%.*s': '[' without ']'",
						 META_SHOWN(len), s);
		q = hend + 1;
		set = "0123456789abcdefABCDEF:.";
	} else {
		host = s;
		hend = memchr(s, ':', len);
		/* "::1:6379": MOVED and ASK name IPv6 nodes without brackets */
		if (hend && !def_port && memchr(hend + 1, ':', (size_t)(end - hend - 1))) {
			hend = memrchr(s, ':', len);
			set = "0123456789abcdefABCDEF:.";
		}
		q = hend ? hend : end;
		hend = q;
	}
	hlen = (size_t)(hend - host);
	if (!hlen)
		return meta_conn_bad_url(why, wlen, "bad address '%.*s': expected host:port",
					 META_SHOWN(len), s);
	if (!chars_in(host, hlen, HOST_MAX - 3, set))
		return meta_conn_bad_url(
		    why, wlen,
		    "bad host '%.*s' in '%.*s': a name, an IPv4 address or [IPv6] "
		    "of at most %d characters",
		    META_SHOWN(hlen), host, META_SHOWN(len), s, HOST_MAX - 3);
	if (q < end) {
		if (*q != ':')
			return meta_conn_bad_url(why, wlen,
						 "bad address '%.*s': expected host:port",
						 META_SHOWN(len), s);
		if (meta_conn_parse_range(q + 1, (size_t)(end - q - 1), 1, 65535, &v) < 0)
			return meta_conn_bad_url(
			    why, wlen, "bad port '%.*s' in '%.*s': must be 1-65535",
			    META_SHOWN(end - q - 1), q + 1, META_SHOWN(len), s);
		a.port = (int)v;
	}
	memcpy(a.host, host, hlen);
	*ret = a;
	return 0;
}

int meta_addr_parse(const char *s, size_t len, int def_port, struct addr *ret)
{
	return meta_addr_parse_why(s, len, def_port, ret, NULL, 0);
}
