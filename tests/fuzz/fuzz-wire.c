/*
 * fuzz-wire: libFuzzer target for everything in the transport that reads
 * bytes from a peer.  Built only with -Dfuzz=true and clang; run by
 * tests/fuzz/run-wire.sh.
 *
 * Every input first goes through the decoder as a stream of messages
 * (transport_wire_decode() until it stops), and every message it accepts must
 * encode back to the very same bytes; and whole, through the RDMA
 * backend's decoder (transport_rmsg_decode(), when built with RDMA), under the
 * same rule.  Then byte 0 of the input picks a
 * mode and the rest is what a malicious peer sends over a socketpair:
 *
 *   0  to the real server connection handler (transport_tcp_serve_fd()), no secret,
 *      the peer counted as loopback
 *   1  to the handler of a server with a secret: the pre-auth states
 *   2  the same, but the harness authenticates first (with the real
 *      client handshake and the right secret), so the bytes land in the
 *      GET loop of an authenticated connection
 *   3  to a server without a secret, the peer claiming to be 192.0.2.1
 *   4  to the client handshake (the bytes are the "server"), no secret
 *   5  the same, the client holding a secret
 *   6  as 2, but the harness authenticates in wire version 2, so the
 *      bytes land in the GET loop of a version 2 connection
 *   7  to the client handshake in version 2, no secret
 *
 * The server serves an in-memory source of a few small objects cut into
 * fragments, through a have() hook that holds object 4 only in part
 * (blocks of 4 KiB): a GET of its missing blocks must be answered HAVE
 * or ENOENT, and iov() for bytes the source lacks is a crash.  The
 * harness writes the input while draining whatever comes back, so
 * neither side can block the other; the handler ends at EOF.
 *
 * With OBJFS_FUZZ_SEEDS=DIR in the environment the program instead writes
 * a seed corpus of valid conversations into DIR (made with the real
 * encoder, so the seeds follow the codec) and exits.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "tcp_i.h"
#include "wire.h"
#ifdef OBJFS_HAVE_RDMA
#include "rdma_i.h"
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t fuzz_secret[] = "fuzzing-secret-0123456789";

/* A broken invariant: say which, then crash so that libFuzzer keeps the input. */
static void __attribute__((noreturn)) fail(const char *why)
{
	fprintf(stderr, "fuzz-wire: %s\n", why);
	abort();
}

/* ---- in-memory source ---- */

struct fobj {
	uint64_t id, size;
	size_t frag;
	uint8_t *data;
};

static struct fobj objs[] = {
    {1, 0, 16, NULL},
    {2, 100, 7, NULL},
    {3, 5000, 1000, NULL},
    {4, 20000, 4096, NULL},
};

static int src_open(void *ctx, const char *peer, uint64_t id, uint64_t *ret_size, void **ret_token)
{
	size_t i;

	for (i = 0; i < sizeof(objs) / sizeof(objs[0]); i++) {
		if (objs[i].id == id) {
			*ret_size = objs[i].size;
			*ret_token = &objs[i];
			return 0;
		}
	}
	return -ENOENT;
}

/* Object 4 (5 blocks of 4 KiB) is held in blocks 0, 2 and 4; 1 is
 * being fetched. */
#define PART_ID 4
#define PART_SHIFT 12
#define PART_HAVE 0x15
#define PART_FETCHING 0x02

static bool part_holds(uint64_t off, uint64_t len)
{
	uint64_t b;

	for (b = off >> PART_SHIFT; len && b <= (off + len - 1) >> PART_SHIFT; b++)
		if (!(PART_HAVE >> b & 1))
			return false;
	return true;
}

static int src_have(void *token, uint64_t off, uint64_t len, struct transport_have *ret)
{
	struct fobj *o = token;

	if (o->id != PART_ID) {
		ret->flags = TRANSPORT_HAVE_SEALED;
		return 1;
	}
	ret->shift = PART_SHIFT;
	ret->nblocks = (uint32_t)((o->size + (1 << PART_SHIFT) - 1) >> PART_SHIFT);
	ret->have[0] = PART_HAVE;
	ret->fetching[0] = PART_FETCHING;
	return part_holds(off, len);
}

/* A parked GET: block 1 is "being fetched" but never arrives (so that
 * no input waits): it is answered at once. */
static int src_wait(void *token, uint64_t off, uint64_t len, unsigned ms)
{
	struct fobj *o = token;

	return o->id != PART_ID || part_holds(off, len);
}

static int src_iov(void *token, uint64_t off, size_t len, struct iovec *iov, int max_iov,
		   size_t *ret_bytes)
{
	struct fobj *o = token;
	size_t bytes = 0;
	int n = 0;

	if (off > o->size || len > o->size - off)
		fail("iov() called outside the object: the range check was skipped");
	if (o->id == PART_ID && !part_holds(off, len))
		fail("iov() called for bytes the source does not hold: have() was not heeded");
	while (n < max_iov && bytes < len) {
		size_t l = len - bytes < o->frag ? len - bytes : o->frag;

		iov[n].iov_base = o->data + off + bytes;
		iov[n].iov_len = l;
		n++;
		bytes += l;
	}
	*ret_bytes = bytes;
	return n;
}

static void src_close(void *token)
{
}

/* ---- transports, made once ---- */

static struct transport *srv_plain, *srv_secret, *cli_plain, *cli_secret;

static struct transport *make(const char *node, bool secret)
{
	struct transport_config cfg = {
	    .node = node,
	    .secret = secret ? fuzz_secret : NULL,
	    .secret_len = secret ? sizeof(fuzz_secret) - 1 : 0,
	    /* no input waits for it (each ends in EOF, and a parked GET is
	     * answered at once): it only has to outlast a loaded machine,
	     * where 200 ms once failed the harness's own handshake */
	    .io_timeout_ms = TRANSPORT_HANDSHAKE_MAX_MS,
	};
	struct transport *t = transport_new(&cfg, NULL);

	if (!t)
		abort();
	/* the handler is driven directly: no listening socket */
	t->src.open = src_open;
	t->src.iov = src_iov;
	t->src.close = src_close;
	t->src.have = src_have;
	t->src.wait = src_wait;
	return t;
}

/* ---- seeds ---- */

struct seed {
	uint8_t buf[4096];
	size_t len;
};

static void seed_byte(struct seed *s, uint8_t b)
{
	s->buf[s->len++] = b;
}

static void seed_msg(struct seed *s, const struct wire_msg *m)
{
	int n = transport_wire_encode(m, s->buf + s->len, sizeof(s->buf) - s->len);

	if (n < 0)
		abort();
	s->len += (size_t)n;
}

static void seed_hello_v(struct seed *s, uint8_t ver, uint16_t flags)
{
	struct wire_msg m = {.ver = ver, .type = WIRE_HELLO, .flags = flags};

	memset(m.nonce, 0x11, sizeof(m.nonce));
	strcpy(m.node, "fuzz-peer");
	seed_msg(s, &m);
}

static void seed_hello(struct seed *s, uint16_t flags)
{
	seed_hello_v(s, WIRE_V1, flags);
}

static void seed_get_v2(struct seed *s, uint32_t reqid, uint16_t flags, uint64_t id, uint64_t off,
			uint64_t len)
{
	struct wire_msg m = {.ver = WIRE_V2,
			     .type = WIRE_GET,
			     .flags = flags,
			     .reqid = reqid,
			     .id = id,
			     .off = off,
			     .len = len};

	seed_msg(s, &m);
}

static void seed_get(struct seed *s, uint32_t reqid, uint64_t id, uint64_t off, uint64_t len)
{
	struct wire_msg m = {.type = WIRE_GET, .reqid = reqid, .id = id, .off = off, .len = len};

	seed_msg(s, &m);
}

static void seed_simple_v(struct seed *s, uint8_t ver, uint8_t type, int status)
{
	struct wire_msg m = {.ver = ver, .type = type, .status = status};

	memset(m.nonce, 0x22, sizeof(m.nonce));
	memset(m.proof, 0x33, sizeof(m.proof));
	seed_msg(s, &m);
}

static void seed_simple(struct seed *s, uint8_t type, int status)
{
	seed_simple_v(s, WIRE_V1, type, status);
}

static void seed_write(const char *dir, int n, const struct seed *s)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/seed-%02d", dir, n);
	f = fopen(path, "w");
	if (!f || fwrite(s->buf, 1, s->len, f) != s->len || fclose(f)) {
		perror(path);
		exit(1);
	}
}

static void write_seeds(const char *dir)
{
	struct seed s;
	int n = 0;

	mkdir(dir, 0755);
	/* 0: a whole conversation */
	s.len = 0;
	seed_byte(&s, 0);
	seed_hello(&s, 0);
	seed_get(&s, 1, 2, 0, 100);
	seed_get(&s, 2, 3, 10, 4000);
	seed_get(&s, 3, 9, 0, 1);    /* ENOENT */
	seed_get(&s, 4, 2, 50, 100); /* ERANGE */
	seed_get(&s, 5, 1, 0, 0);
	seed_get(&s, 6, 4, 0, 20000);
	seed_write(dir, n++, &s);
	/* 0: GET before HELLO */
	s.len = 0;
	seed_byte(&s, 0);
	seed_get(&s, 1, 2, 0, 100);
	seed_write(dir, n++, &s);
	/* 1: with a secret, a made-up proof; and no secret at all */
	s.len = 0;
	seed_byte(&s, 1);
	seed_hello(&s, WIRE_F_SECRET);
	seed_simple(&s, WIRE_AUTH, 0);
	seed_get(&s, 1, 2, 0, 100);
	seed_write(dir, n++, &s);
	s.len = 0;
	seed_byte(&s, 1);
	seed_hello(&s, 0);
	seed_write(dir, n++, &s);
	/* 2: authenticated by the harness, then GETs */
	s.len = 0;
	seed_byte(&s, 2);
	seed_get(&s, 7, 4, 100, 19900);
	seed_get(&s, 8, 3, 4999, 1);
	seed_get(&s, 9, 2, 0, 101);
	seed_write(dir, n++, &s);
	/* 3: not loopback */
	s.len = 0;
	seed_byte(&s, 3);
	seed_hello(&s, 0);
	seed_get(&s, 1, 2, 0, 100);
	seed_write(dir, n++, &s);
	/* 4, 5: server replies for the client handshake */
	s.len = 0;
	seed_byte(&s, 4);
	seed_simple(&s, WIRE_READY, 0);
	seed_write(dir, n++, &s);
	s.len = 0;
	seed_byte(&s, 5);
	seed_simple(&s, WIRE_CHALLENGE, 0);
	seed_simple(&s, WIRE_READY, 0);
	seed_write(dir, n++, &s);
	s.len = 0;
	seed_byte(&s, 4);
	seed_simple(&s, WIRE_READY, EACCES);
	seed_write(dir, n++, &s);
	/* replies, for the decoder */
	s.len = 0;
	seed_byte(&s, 0);
	{
		struct wire_msg m = {.type = WIRE_DATA, .reqid = 1, .id = 2, .len = 3};
		struct wire_msg e = {.type = WIRE_ERR, .reqid = 2, .id = 2, .status = ENOENT};

		seed_msg(&s, &m);
		seed_msg(&s, &e);
	}
	seed_write(dir, n++, &s);
	/* 0: a version 2 conversation: every flag, the partial object */
	s.len = 0;
	seed_byte(&s, 0);
	seed_hello_v(&s, WIRE_V2, 0);
	seed_get_v2(&s, 1, 0, 2, 0, 100);
	seed_get_v2(&s, 2, WIRE_F_PARTIAL_OK, 4, 0, 20000);		    /* HAVE */
	seed_get_v2(&s, 3, WIRE_F_PARTIAL_OK, 4, 8192, 4096);		    /* DATA */
	seed_get_v2(&s, 4, WIRE_F_WANT_HAVE, 4, 16384, 20000 - 16384);	    /* HAVE, DATA */
	seed_get_v2(&s, 5, WIRE_F_WANT_HAVE, 4, 4096, 1);		    /* ENOENT */
	seed_get_v2(&s, 6, WIRE_F_WANT_HAVE, 4, 100, 0);		    /* a query */
	seed_get_v2(&s, 7, WIRE_F_WANT_HAVE | WIRE_F_PARTIAL_OK, 3, 0, 10); /* sealed */
	seed_get_v2(&s, 8, 0, 4, 4096, 10);				    /* ENOENT */
	seed_get_v2(&s, 9, WIRE_F_PARTIAL_OK | WIRE_F_PARK | WIRE_F_BUSY_OK, 4, 4096,
		    10);						  /* parked */
	seed_get_v2(&s, 10, WIRE_F_BUSY_OK | WIRE_F_WANT_HAVE, 3, 0, 10); /* a slot is free */
	seed_get(&s, 9, 2, 0, 1); /* version 1 inside version 2: closed */
	seed_write(dir, n++, &s);
	/* 6: authenticated in version 2 by the harness, then GETs */
	s.len = 0;
	seed_byte(&s, 6);
	seed_get_v2(&s, 1, WIRE_F_PARTIAL_OK | WIRE_F_WANT_HAVE, 4, 0, 20000);
	seed_get_v2(&s, 2, WIRE_F_WANT_HAVE, 4, 0, 4096);
	seed_get_v2(&s, 3, 0, 4, 0, 4096);
	seed_write(dir, n++, &s);
	/* 1: version 2 with a secret */
	s.len = 0;
	seed_byte(&s, 1);
	seed_hello_v(&s, WIRE_V2, WIRE_F_SECRET);
	seed_simple_v(&s, WIRE_V2, WIRE_AUTH, 0);
	seed_write(dir, n++, &s);
	/* 7: server replies for a version 2 client handshake */
	s.len = 0;
	seed_byte(&s, 7);
	seed_simple_v(&s, WIRE_V2, WIRE_READY, 0);
	seed_write(dir, n++, &s);
	/* HAVE answers, for the decoder */
	s.len = 0;
	seed_byte(&s, 4);
	{
		struct wire_msg m = {.ver = WIRE_V2, .type = WIRE_HAVE, .reqid = 1, .id = 4};
		struct wire_msg d = {
		    .ver = WIRE_V2, .type = WIRE_DATA, .reqid = 1, .id = 4, .len = 1};

		m.have.shift = PART_SHIFT;
		m.have.nblocks = 5;
		m.have.have[0] = PART_HAVE;
		m.have.fetching[0] = PART_FETCHING;
		seed_msg(&s, &m);
		m.flags = WIRE_F_HAVE_DATA;
		m.have.nblocks = TRANSPORT_HAVE_BLOCKS_MAX;
		memset(m.have.have, 0x5a, sizeof(m.have.have));
		seed_msg(&s, &m);
		seed_msg(&s, &d);
		memset(&m.have, 0, sizeof(m.have));
		m.have.flags = TRANSPORT_HAVE_SEALED;
		seed_msg(&s, &m);
	}
	seed_write(dir, n++, &s);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seeds = getenv("OBJFS_FUZZ_SEEDS");
	size_t i, k;

	if (seeds) {
		write_seeds(seeds);
		exit(0);
	}
	log_setup(LOGL_ERROR, stderr);
	for (i = 0; i < sizeof(objs) / sizeof(objs[0]); i++) {
		objs[i].data = malloc(objs[i].size + 1);
		for (k = 0; k < objs[i].size; k++)
			objs[i].data[k] = (uint8_t)(k * 31 + i);
	}
	srv_plain = make("fuzz-srv", false);
	srv_secret = make("fuzz-srv", true);
	cli_plain = make("fuzz-cli", false);
	cli_secret = make("fuzz-cli", true);
	return 0;
}

/* ---- one input ---- */

/* The decoder over the whole input, and the encode-back invariant. */
static void fuzz_decoder(const uint8_t *data, size_t size)
{
	size_t off = 0;

	while (off < size) {
		uint8_t again[WIRE_MSG_MAX_V2];
		struct wire_msg m;
		int n = transport_wire_decode(data + off, size - off, &m);

		if (n <= 0) {
			if (n != -EAGAIN && n != -EPROTO)
				fail("transport_wire_decode() returned an unexpected error");
			break;
		}
		if (transport_wire_encode(&m, again, sizeof(again)) != n ||
		    memcmp(again, data + off, (size_t)n))
			fail("a decoded message does not encode back to its bytes");
		off += (size_t)n;
	}
}

struct handler {
	struct transport *t;
	int fd;
	struct sockaddr_storage sa;
	socklen_t sa_len;
};

static void *handler_thread(void *arg)
{
	struct handler *h = arg;

	transport_tcp_serve_fd(h->t, h->fd, (struct sockaddr *)&h->sa, h->sa_len, NULL);
	close(h->fd);
	return NULL;
}

/* Write @data to @fd while reading and dropping what comes back, to EOF. */
static void pump(int fd, const uint8_t *data, size_t size)
{
	uint8_t sink[65536];
	bool writing = true;

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	if (!size) {
		shutdown(fd, SHUT_WR);
		writing = false;
	}
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN | (writing ? POLLOUT : 0)};
		ssize_t n;
		int r = poll(&p, 1, 10000);

		/* libFuzzer's -timeout ticks with SIGALRM: EINTR is normal */
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			fail("the connection handler hung for 10 s");
		if (writing && (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
			n = send(fd, data, size, MSG_NOSIGNAL);
			if (n > 0) {
				data += n;
				size -= (size_t)n;
			}
			if ((n < 0 && errno != EAGAIN && errno != EINTR) || !size) {
				shutdown(fd, SHUT_WR);
				writing = false;
			}
		}
		n = recv(fd, sink, sizeof(sink), 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return;
	}
}

static void fuzz_server(int mode, const uint8_t *data, size_t size)
{
	struct handler h = {0};
	struct sockaddr_in *in4 = (struct sockaddr_in *)&h.sa;
	pthread_t th;
	int sv[2], err;

	h.t = mode == 1 || mode == 2 || mode == 6 ? srv_secret : srv_plain;
	in4->sin_family = AF_INET;
	in4->sin_addr.s_addr = mode == 3 ? inet_addr("192.0.2.1") : htonl(INADDR_LOOPBACK);
	h.sa_len = sizeof(*in4);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		abort();
	h.fd = sv[0];
	if (pthread_create(&th, NULL, handler_thread, &h))
		abort();
	if (mode == 2 || mode == 6) {
		err = transport_tcp_client_handshake(cli_secret, sv[1],
						     mode == 6 ? WIRE_V2 : WIRE_V1);
		if (err) {
			fprintf(stderr, "fuzz-wire: handshake: %s\n", strerror(-err));
			fail("the right secret did not get in");
		}
	}
	pump(sv[1], data, size);
	pthread_join(th, NULL);
	close(sv[1]);
}

static void fuzz_client(int mode, const uint8_t *data, size_t size)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		abort();
	/* the whole "server" side up front: inputs are far smaller than the
	 * socket buffer; the client's own writes land in sv[0] unread */
	if (size && send(sv[0], data, size, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)size) {
		close(sv[0]);
		close(sv[1]);
		return;
	}
	shutdown(sv[0], SHUT_WR);
	transport_tcp_client_handshake(mode == 5 ? cli_secret : cli_plain, sv[1],
				       mode == 7 ? WIRE_V2 : WIRE_V1);
	close(sv[0]);
	close(sv[1]);
}

/* The RDMA messages' decoder: a message it accepts encodes back to the
 * same header. */
static void fuzz_rdma_decoder(const uint8_t *data, size_t size)
{
#ifdef OBJFS_HAVE_RDMA
	uint8_t again[RMSG_HDR];
	struct rmsg m;

	if (transport_rmsg_decode(data, size, &m))
		return;
	transport_rmsg_encode(&m, again);
	if (memcmp(again, data, RMSG_HDR))
		fail("an RDMA message does not encode back to its bytes");
	if (m.type == RM_DATA && m.len != size - RMSG_HDR)
		fail("an RDMA DATA message with a length other than its payload");
#else
	(void)data;
	(void)size;
#endif
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int mode;

	fuzz_decoder(data, size);
	fuzz_rdma_decoder(data, size);
	if (size < 1 || size > 65536)
		return 0;
	mode = data[0] % 8;
	if (mode <= 3 || mode == 6)
		fuzz_server(mode, data + 1, size - 1);
	else
		fuzz_client(mode, data + 1, size - 1);
	return 0;
}
