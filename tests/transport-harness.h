/*
 * transport-harness.h: what the transport unit tests (test-transport.c,
 * test-tcp-limits.c) share: an in-memory source (struct msrc: a few
 * objects of patterned bytes, handed out in fragments so that a range
 * spans many iovecs), server and client transports on loopback, a fetch
 * that checks every byte, and raw clients that speak the wire protocol
 * by hand.  Included by exactly one source file per test program.
 */
#ifndef OBJFS_TRANSPORT_HARNESS_H
#define OBJFS_TRANSPORT_HARNESS_H

#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "log.h"
#include "tap.h"
#include "tcp_i.h"
#include "transport.h"
#include "transport_i.h"
#include "util.h"
#include "wire.h"

#define KiB 1024ULL
#define MiB (1024ULL * 1024)

static const uint8_t secret_a[] = "0123456789abcdef-cluster-a";
static const uint8_t secret_b[] = "0123456789abcdef-cluster-b";

/* ---- in-memory source ---- */

struct msrc;

struct mobj {
	struct msrc *src;
	uint64_t id;
	uint64_t size;
	size_t frag; /* bytes per iovec entry at most */
	uint8_t *data;
};

struct msrc {
	struct mobj objs[8];
	int n;
	atomic_int opens, closes;
};

static uint8_t pattern(uint64_t id, uint64_t i)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ULL ^ id * 0xc2b2ae3d27d4eb4fULL;

	x ^= x >> 29;
	return (uint8_t)(x ^ x >> 17);
}

static void msrc_add(struct msrc *s, uint64_t id, uint64_t size, size_t frag)
{
	struct mobj *o = &s->objs[s->n++];
	uint64_t i;

	o->src = s;
	o->id = id;
	o->size = size;
	o->frag = frag;
	o->data = malloc(size ? size : 1);
	for (i = 0; i < size; i++)
		o->data[i] = pattern(id, i);
}

static int msrc_open(void *ctx, const char *peer, uint64_t id, uint64_t *ret_size, void **ret_token)
{
	struct msrc *s = ctx;
	int i;

	for (i = 0; i < s->n; i++) {
		if (s->objs[i].id == id) {
			atomic_fetch_add(&s->opens, 1);
			*ret_size = s->objs[i].size;
			*ret_token = &s->objs[i];
			return 0;
		}
	}
	return -ENOENT;
}

static int msrc_iov(void *token, uint64_t off, size_t len, struct iovec *iov, int max_iov,
		    size_t *ret_bytes)
{
	struct mobj *o = token;
	size_t bytes = 0;
	int n = 0;

	while (n < max_iov && bytes < len && off + bytes < o->size) {
		size_t l = len - bytes;

		if (l > o->frag)
			l = o->frag;
		if (l > o->size - off - bytes)
			l = (size_t)(o->size - off - bytes);
		iov[n].iov_base = o->data + off + bytes;
		iov[n].iov_len = l;
		n++;
		bytes += l;
	}
	*ret_bytes = bytes;
	return n;
}

static void msrc_close(void *token)
{
	struct mobj *o = token;

	atomic_fetch_add(&o->src->closes, 1);
}

static struct msrc src; /* the objects every server below serves */

static const struct {
	uint64_t id, size;
	size_t frag;
} objects[] = {
    {1, 0, 4096},
    {2, 1, 4096},
    {3, 4095, 4096},
    {4, 1 * MiB + 13, 4096}, /* 257 fragments: several iov() calls */
    {5, 9 * MiB + 7, 300 * KiB},
    {6, 64 * KiB, 1000},
};

static struct mobj *obj(uint64_t id)
{
	int i;

	for (i = 0; i < src.n; i++)
		if (src.objs[i].id == id)
			return &src.objs[i];
	return NULL;
}

/* ---- transports ---- */

/* Serve the source with @t (freed on failure), its address into @addr. */
static struct transport *server_serve(struct transport *t, char *addr, size_t addr_size)
{
	struct transport_source s = {
	    .open = msrc_open,
	    .iov = msrc_iov,
	    .close = msrc_close,
	    .ctx = &src,
	};
	int err;

	err = transport_serve(t, &s);
	if (!err)
		err = transport_addr(t, addr, addr_size);
	if (err) {
		fprintf(stderr, "serve: %s\n", strerror(-err));
		transport_free(t);
		return NULL;
	}
	return t;
}

static struct transport *server_new(const char *host, uint16_t port, const uint8_t *secret,
				    size_t slen, unsigned timeout_ms, uint64_t bwlimit, char *addr,
				    size_t addr_size)
{
	struct transport_config cfg = {
	    .node = "srv",
	    .listen_host = host,
	    .listen_port = port,
	    .secret = secret,
	    .secret_len = slen,
	    .io_timeout_ms = timeout_ms,
	    .serve_bwlimit = bwlimit,
	};
	struct transport *t;
	int err;

	t = transport_new(&cfg, &err);
	if (!t) {
		fprintf(stderr, "transport_new: %s\n", strerror(-err));
		return NULL;
	}
	return server_serve(t, addr, addr_size);
}

static struct transport *client_new(const char *node, const uint8_t *secret, size_t slen,
				    unsigned timeout_ms)
{
	struct transport_config cfg = {
	    .node = node,
	    .secret = secret,
	    .secret_len = slen,
	    .io_timeout_ms = timeout_ms,
	};

	return transport_new(&cfg, NULL);
}

static struct transport_stats stats(struct transport *t)
{
	struct transport_stats s;

	transport_stats(t, &s);
	return s;
}

/* Wait up to 3 s for a counter that another thread updates. */
#define WAIT_FOR(cond)                                                 \
	do {                                                           \
		int wait_i_;                                           \
		for (wait_i_ = 0; wait_i_ < 300 && !(cond); wait_i_++) \
			usleep(10000);                                 \
	} while (0)

static double now_s(void)
{
	return (double)util_mono_ns() / 1e9;
}

struct progress_log {
	uint64_t calls, last, len;
	bool monotonic;
};

static void on_progress(void *arg, uint64_t done)
{
	struct progress_log *p = arg;

	if (p->calls && done < p->last)
		p->monotonic = false;
	if (done > p->len)
		p->monotonic = false;
	p->last = done;
	p->calls++;
}

/*
 * Fetch [off, off+len) of @id into a fresh buffer cut into uneven
 * iovecs and check every byte when it worked.  Returns the result, or
 * -EBADMSG for wrong bytes.  No CHECK inside: threads call it.
 */
static int fetch_check(struct transport *c, const char *peer, const char *addr, uint64_t id,
		       uint64_t off, uint64_t len, int n_iov, struct progress_log *pl)
{
	uint8_t *buf = malloc(len ? len : 1);
	struct iovec *iov = calloc((size_t)n_iov, sizeof(*iov));
	struct transport_req req = {.peer = peer, .addr = addr, .id = id, .off = off, .len = len};
	uint64_t at = 0, i;
	struct mobj *o = obj(id);
	int k, err;

	/* uneven pieces; the last takes the rest */
	for (k = 0; k < n_iov; k++) {
		uint64_t piece = k == n_iov - 1 ? len - at : (len - at) / 3 + (uint64_t)k % 2;

		if (piece > len - at)
			piece = len - at;

		iov[k].iov_base = buf + at;
		iov[k].iov_len = piece;
		at += piece;
	}
	memset(buf, 0xcc, len ? len : 1);
	if (pl) {
		memset(pl, 0, sizeof(*pl));
		pl->monotonic = true;
		pl->len = len;
	}
	req.iov = iov;
	req.iovcnt = n_iov;
	req.progress = pl ? on_progress : NULL;
	req.arg = pl;
	err = transport_fetch(c, &req);
	if (!err) {
		for (i = 0; o && i < len; i++)
			if (buf[i] != o->data[off + i])
				break;
		if (!o || i != len) {
			fprintf(stderr,
				"object %" PRIu64 " [%" PRIu64 ", +%" PRIu64
				"): wrong byte at %" PRIu64 "\n",
				id, off, len, i);
			err = -EBADMSG;
		}
	}
	free(iov);
	free(buf);
	return err;
}

/* ---- raw clients against the real server ---- */

static int raw_connect(const char *addr)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	struct timeval tv = {.tv_sec = 5};
	const char *colon = strrchr(addr, ':');
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -1;
	}
	return fd;
}

static void raw_send(int fd, const void *buf, size_t len)
{
	CHECK_EQ(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
}

static void raw_send_msg(int fd, const struct wire_msg *m)
{
	uint8_t buf[WIRE_MSG_MAX_V2];
	int n = transport_wire_encode(m, buf, sizeof(buf));

	CHECK(n > 0);
	if (n > 0)
		raw_send(fd, buf, (size_t)n);
}

/* Read until the server closes; how many bytes came first (-1: no close). */
static ssize_t raw_until_closed(int fd, uint8_t *keep, size_t keep_len)
{
	uint8_t buf[4096];
	ssize_t total = 0;

	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return total;
		if (n < 0)
			return -1;
		if (keep && (size_t)total < keep_len)
			memcpy(keep + total, buf,
			       (size_t)n < keep_len - (size_t)total ? (size_t)n
								    : keep_len - (size_t)total);
		total += n;
	}
}

/* The server must close @fd without a byte more; close our end. */
static void raw_expect_close(int fd)
{
	CHECK_EQ(raw_until_closed(fd, NULL, 0), 0);
	close(fd);
}

static void raw_hello_as(int fd, uint16_t flags, const char *node)
{
	struct wire_msg m = {.type = WIRE_HELLO, .flags = flags};

	snprintf(m.node, sizeof(m.node), "%s", node);
	raw_send_msg(fd, &m);
}

static void raw_hello(int fd, uint16_t flags)
{
	raw_hello_as(fd, flags, "raw");
}

/* one message, read with a blocking socket */
static int raw_recv_msg(int fd, struct wire_msg *m)
{
	uint8_t buf[WIRE_MSG_MAX_V2];
	size_t have = 0;

	for (;;) {
		int n = transport_wire_decode(buf, have, m);
		ssize_t r;

		if (n != -EAGAIN)
			return n;
		r = recv(fd, buf + have, have < WIRE_HDR_LEN ? WIRE_HDR_LEN - have : 1, 0);
		if (r <= 0)
			return -ECONNRESET;
		have += (size_t)r;
	}
}

/* ---- the program ---- */

/* Start a test program: an alarm in case something hangs, the log on
 * stderr, the objects in the source. */
static void harness_begin(void)
{
	size_t i;

	alarm(110); /* tests/run gives a unit test 120 s */
	log_setup(LOGL_INFO, stderr);
	for (i = 0; i < ARRAY_SIZE(objects); i++)
		msrc_add(&src, objects[i].id, objects[i].size, objects[i].frag);
}

/* End it: every object the servers opened was closed again. */
static int harness_end(void)
{
	int i;

	CHECK_EQ(atomic_load(&src.opens), atomic_load(&src.closes));
	for (i = 0; i < src.n; i++)
		free(src.objs[i].data);
	return tap_done();
}

#endif
