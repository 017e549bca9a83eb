/*
 * test-transport: the transport over real loopback sockets, in one
 * process.
 *
 * A server transport serves an in-memory source (struct msrc: a few
 * objects of patterned bytes, handed out in fragments so that a range
 * spans many iovecs); client transports fetch from it into malloc()ed
 * buffers split into uneven iovecs.  Misbehaving peers are played by raw
 * sockets: raw clients that send junk to the real server, and a fake
 * server thread (fake_*) that answers a real client wrongly or stalls.
 * Some cases reach into the internals: transport_tcp_serve_fd() (tcp_i.h) over a
 * socketpair stands in for a peer that is not on this host, and a fake
 * backend (transport_new_ops()) shows what transport.c hands a backend.
 * Wire version 2 (GET flags, HAVE, the "fan1" card token) has its own
 * program, test-transport-v2.c.
 *
 * The source, the transports, the checked fetch and the raw clients are
 * transport-harness.h's (shared with test-tcp-limits.c, which has the
 * server's connection limits).
 *
 * Every socket is on 127.0.0.1 (or ::1), every wait is bounded, and an
 * alarm ends the program if something hangs anyway.
 */
#include "transport-harness.h"

/* ---- cases ---- */

TEST(config)
{
	struct transport_config cfg = {.node = "n1"};
	struct transport *t;
	char addr[64];
	int err = 0;

	t = transport_new(&cfg, &err);
	CHECK(t && !err);
	CHECK_STR(transport_name(t), "tcp");
	CHECK_EQ(transport_addr(t, addr, sizeof(addr)), -ENOTCONN);
	transport_free(t);
	transport_free(NULL);

	cfg.backend = "infiniband";
	CHECK(!transport_new(&cfg, &err));
	CHECK_EQ(err, -EINVAL);
	cfg.backend = "rdma";
	t = transport_new(&cfg, &err);
#ifdef OBJFS_HAVE_RDMA
	CHECK(t && !err);
	CHECK_STR(transport_name(t), "rdma");
	CHECK_STR(transport_rdma_state(t), "on");
#else
	CHECK(!t && err == -EOPNOTSUPP);
#endif
	transport_free(t);
	cfg.backend = "auto";
	t = transport_new(&cfg, &err);
	CHECK(t && !err);
	CHECK_STR(transport_name(t), "auto");
	CHECK_STR(transport_caps(t), "tcp");
	transport_free(t);
	cfg.rdma_eager_max = TRANSPORT_RDMA_EAGER_MAX + 1;
	CHECK(!transport_new(&cfg, &err));
	CHECK_EQ(err, -EINVAL);
	cfg.rdma_eager_max = 0;
	cfg.rdma_poll_us = TRANSPORT_RDMA_POLL_MAX + 1;
	CHECK(!transport_new(&cfg, &err));
	CHECK_EQ(err, -EINVAL);
	cfg.rdma_poll_us = TRANSPORT_RDMA_POLL_MAX;
	t = transport_new(&cfg, &err);
	CHECK(t && !err);
	transport_free(t);
	cfg.rdma_poll_us = 0;
	cfg.backend = "tcp";
	cfg.secret = secret_a;
	cfg.secret_len = TRANSPORT_SECRET_MIN - 1;
	CHECK(!transport_new(&cfg, &err));
	CHECK_EQ(err, -EINVAL);
	cfg.secret_len = TRANSPORT_SECRET_MAX + 1;
	CHECK(!transport_new(&cfg, &err));
	cfg.secret = NULL;
	cfg.secret_len = 16;
	CHECK(!transport_new(&cfg, &err));
	cfg.secret_len = 0;
	cfg.node = "bad/name";
	CHECK(!transport_new(&cfg, &err));
	cfg.node = NULL;
	CHECK(!transport_new(&cfg, &err));
	CHECK(!transport_new(NULL, &err));
}

/* ---- a backend of the test's own, through transport_new_ops() ---- */

/* What the fake backend saw and did (one fetch at a time). */
static struct {
	struct transport_req req; /* the last request fetch() was given */
	int connects, fetches, closes;
	int result; /* what fetch() returns */
} fb;

static int fb_connect(struct transport *t, const char *addr, unsigned ver, struct tconn **ret)
{
	*ret = calloc(1, sizeof(**ret));
	fb.connects += !!*ret;
	return *ret ? 0 : -ENOMEM;
}

static int fb_fetch(struct tconn *c, const struct transport_req *req)
{
	int i;

	fb.fetches++;
	fb.req = *req;
	c->answered = true;
	c->broken = fb.result && fb.result != -ENOENT; /* ERR keeps it in step */
	for (i = 0; !fb.result && i < req->iovcnt; i++)
		memset(req->iov[i].iov_base, 0x5a, req->iov[i].iov_len);
	if (!fb.result && req->progress)
		req->progress(req->arg, req->len);
	return fb.result;
}

static bool fb_idle_ok(struct tconn *c)
{
	return true;
}

static void fb_close(struct tconn *c)
{
	fb.closes++;
	free(c);
}

static const struct transport_ops fake_ops = {
    .name = "fake",
    .caps = "fake",
    .streams_per_peer = 5,
    .range_min = 3 * MiB,
    .connect = fb_connect,
    .fetch = fb_fetch,
    .idle_ok = fb_idle_ok,
    .close = fb_close,
};

TEST(backend_ops)
{
	static const struct {
		const char *caps, *addr;
		bool tcp, fake; /* does a tcp, a fake transport reach it? */
	} cards[] = {
	    {"tcp", "h:1", true, false},       {"tcp,rdma", "h:1", true, false},
	    {"rdma,tcp", "h:1", true, false},  {"", "h:1", true, false}, /* an old node */
	    {NULL, "h:1", true, false},	       {"rdma", "h:1", false, false},
	    {"tcpx", "h:1", false, false},     {"xtcp,rdma", "h:1", false, false},
	    {"tc", "h:1", false, false},       {"tcp,fake", "h:1", true, true},
	    {"fakes,tcp", "h:1", true, false}, {"tcp", "", false, false},
	    {"fake", NULL, false, false},      {"fake", "h:1", false, true},
	};
	struct transport_config cfg = {.node = "c-ops", .backend = "no-such-backend"};
	struct transport *tcp = client_new("c-caps", NULL, 0, 0);
	struct transport_source s = {.open = msrc_open, .iov = msrc_iov, .close = msrc_close};
	struct transport_ops broken_ops = fake_ops;
	struct progress_log pl = {.monotonic = true, .len = 10};
	struct transport_tuning tu;
	struct transport *t;
	uint8_t buf[10], want[10];
	struct iovec v[2] = {{buf, 4}, {buf + 4, 6}};
	struct transport_req req = {.peer = "p1",
				    .addr = "an address only the backend reads",
				    .id = 0x0123456789abcdefULL,
				    .off = 77,
				    .len = sizeof(buf),
				    .iov = v,
				    .iovcnt = 2,
				    .progress = on_progress,
				    .arg = &pl};
	char addr[64];
	int err = 1;
	size_t i;

	t = transport_new_ops(&cfg, &fake_ops, &err);
	CHECK(t && !err);
	if (!t)
		return;
	CHECK_STR(transport_name(t), "fake");
	CHECK_STR(transport_caps(t), "fake");
	transport_tuning(t, &tu);
	CHECK(tu.streams_per_peer == 5 && tu.range_min == 3 * MiB);
	/* it cannot serve, and says so */
	CHECK_EQ(transport_serve(t, &s), -EOPNOTSUPP);
	CHECK_EQ(transport_addr(t, addr, sizeof(addr)), -ENOTCONN);

	/* the request reaches the backend as it was given */
	memset(buf, 0, sizeof(buf));
	memset(want, 0x5a, sizeof(want));
	CHECK_EQ(transport_fetch(t, &req), 0);
	CHECK(fb.fetches == 1 && fb.req.peer == req.peer && fb.req.addr == req.addr);
	CHECK(fb.req.id == req.id && fb.req.off == 77 && fb.req.len == sizeof(buf));
	CHECK(fb.req.iov == v && fb.req.iovcnt == 2 && fb.req.progress == on_progress);
	CHECK(fb.req.arg == &pl);
	CHECK(!memcmp(buf, want, sizeof(buf)));
	CHECK(pl.monotonic && pl.calls == 1 && pl.last == sizeof(buf));
	CHECK_EQ(stats(t).conns_open, 1);

	/* the connection is cached; an ERR answer keeps it, a failure not */
	fb.result = -ENOENT;
	CHECK_EQ(transport_fetch(t, &req), -ENOENT);
	CHECK(fb.connects == 1 && stats(t).conns_open == 1);
	fb.result = -ETIMEDOUT;
	CHECK_EQ(transport_fetch(t, &req), -ETIMEDOUT);
	CHECK(fb.closes == 1 && stats(t).conns_open == 0);

	/* bad arguments never reach the backend */
	req.len = 11;
	CHECK_EQ(transport_fetch(t, &req), -EINVAL);
	CHECK_EQ(fb.fetches, 3);
	req.len = sizeof(buf);
	req.flags = 16;
	CHECK_EQ(transport_fetch(t, &req), -EINVAL);
	req.flags = TRANSPORT_F_WANT_HAVE; /* and no have_out */
	CHECK_EQ(transport_fetch(t, &req), -EINVAL);
	/* a backend that speaks version 1 only: no HAVE, whatever the card says */
	{
		struct transport_have h;

		req.caps = "fake,fan1";
		req.have_out = &h;
		CHECK_EQ(transport_fetch(t, &req), -EOPNOTSUPP);
		CHECK(!transport_speaks_fan1(t, "fake,fan1"));
		req.flags = TRANSPORT_F_PARTIAL_OK; /* passed on, for it to ignore */
		fb.result = 0;
		CHECK_EQ(transport_fetch(t, &req), 0);
		CHECK(fb.req.flags == TRANSPORT_F_PARTIAL_OK && fb.req.caps == req.caps);
		CHECK_EQ(fb.fetches, 4);
		req.flags = 0;
		req.caps = NULL;
		req.have_out = NULL;
	}

	/* which cards each reaches: caps are matched as whole names */
	CHECK_STR(transport_caps(tcp), "tcp");
	transport_tuning(tcp, &tu);
	CHECK(tu.streams_per_peer == 2 && tu.range_min == 8 * MiB);
	for (i = 0; i < ARRAY_SIZE(cards); i++) {
		CHECK(transport_reaches(tcp, cards[i].caps, cards[i].addr, NULL) == cards[i].tcp);
		CHECK(transport_reaches(t, cards[i].caps, cards[i].addr, NULL) == cards[i].fake);
	}
	/* "fan1" is a feature, not a transport: ignored by reaches */
	CHECK(transport_reaches(tcp, "tcp,fan1", "h:1", NULL));
	CHECK(transport_reaches(tcp, "fan1,tcp", "h:1", NULL));
	CHECK(!transport_reaches(tcp, "fan1", "h:1", NULL));
	CHECK(transport_speaks_fan1(tcp, "tcp,fan1"));
	CHECK(transport_speaks_fan1(tcp, "tcp,rdma,fan1"));
	CHECK(!transport_speaks_fan1(tcp, "tcp"));
	CHECK(!transport_speaks_fan1(tcp, "tcp,fan12"));
	CHECK(!transport_speaks_fan1(tcp, ""));
	CHECK(!transport_speaks_fan1(tcp, NULL));
	CHECK(!transport_speaks_fan1(NULL, "tcp,fan1"));
	CHECK(!transport_reaches(NULL, "tcp", "h:1", NULL));
	transport_free(tcp);
	transport_free(t);
	CHECK_EQ(fb.closes, fb.connects);

	/* an ops table short of what a client needs */
	broken_ops.fetch = NULL;
	CHECK(!transport_new_ops(&cfg, &broken_ops, &err) && err == -EINVAL);
	CHECK(!transport_new_ops(&cfg, NULL, &err));
}

TEST(serve_errors)
{
	struct transport_source s = {
	    .open = msrc_open,
	    .iov = msrc_iov,
	    .close = msrc_close,
	    .ctx = &src,
	};
	struct transport_config cfg = {.node = "s2", .listen_host = "127.0.0.1"};
	struct transport *a, *b;
	char addr[64];
	unsigned port;

	a = server_new("127.0.0.1", 0, NULL, 0, 0, 0, addr, sizeof(addr));
	CHECK(a != NULL);
	if (!a)
		return;
	CHECK(!strncmp(addr, "127.0.0.1:", 10));
	port = (unsigned)atoi(addr + 10);
	CHECK(port > 0 && port < 65536);
	CHECK_EQ(transport_serve(a, &s), -EBUSY);
	CHECK_EQ(transport_addr(a, addr, 8), -ERANGE);

	cfg.listen_port = (uint16_t)port;
	b = transport_new(&cfg, NULL);
	CHECK_EQ(transport_serve(b, &s), -EADDRINUSE);
	s.iov = NULL;
	CHECK_EQ(transport_serve(b, &s), -EINVAL);
	transport_free(b);

	cfg.listen_port = 0;
	cfg.listen_host = "192.0.2.1"; /* TEST-NET: not on this host */
	b = transport_new(&cfg, NULL);
	s.iov = msrc_iov;
	CHECK_EQ(transport_serve(b, &s), -EADDRNOTAVAIL);
	transport_free(b);
	transport_free(a);
}

static struct transport *srv; /* plain server: no secret, 127.0.0.1 */
static char srv_addr[64];

TEST(sizes)
{
	struct transport *c = client_new("c-sizes", NULL, 0, 0);
	size_t i;

	for (i = 0; i < ARRAY_SIZE(objects); i++) {
		CHECK_EQ(
		    fetch_check(c, "srv", srv_addr, objects[i].id, 0, objects[i].size, 1, NULL), 0);
		CHECK_EQ(
		    fetch_check(c, "srv", srv_addr, objects[i].id, 0, objects[i].size, 5, NULL), 0);
	}
	/* a thousand small iovecs */
	CHECK_EQ(fetch_check(c, "srv", srv_addr, 4, 0, obj(4)->size, 1000, NULL), 0);
	CHECK_EQ(stats(c).requests_sent, 2 * ARRAY_SIZE(objects) + 1);
	CHECK_EQ(stats(c).bytes_received,
		 2 * (0 + 1 + 4095 + 1 * MiB + 13 + 9 * MiB + 7 + 64 * KiB) + 1 * MiB + 13);
	transport_free(c);
}

TEST(ranges)
{
	static uint8_t b;
	static const struct iovec v = {&b, 1};
	static const struct transport_req bad[] = {
	    {.peer = "srv", .addr = srv_addr, .len = 2, .iov = &v, .iovcnt = 1}, /* iov too short */
	    {.peer = "srv", .addr = srv_addr, .len = 1, .iovcnt = 1},
	    {.peer = "srv", .addr = srv_addr, .off = UINT64_MAX, .len = 1, .iov = &v, .iovcnt = 1},
	    {.peer = "a/b", .addr = srv_addr, .len = 1, .iov = &v, .iovcnt = 1},
	    {.addr = srv_addr, .len = 1, .iov = &v, .iovcnt = 1},
	    {.peer = "x", .addr = "127.0.0.1", .len = 1, .iov = &v, .iovcnt = 1},
	    {.peer = "x", .addr = "127.0.0.1:0", .len = 1, .iov = &v, .iovcnt = 1},
	    {.peer = "x", .addr = "127.0.0.1:65536", .len = 1, .iov = &v, .iovcnt = 1},
	    {.peer = "x", .addr = "::1:80", .len = 1, .iov = &v, .iovcnt = 1},
	    {.peer = "x", .addr = "[::1]80", .len = 1, .iov = &v, .iovcnt = 1},
	    {.peer = "x", .addr = "", .len = 1, .iov = &v, .iovcnt = 1},
	    {.peer = "x", .len = 1, .iov = &v, .iovcnt = 1},
	};
	struct transport *c = client_new("c-ranges", NULL, 0, 0);
	uint64_t size = obj(5)->size, accepted = stats(srv).conns_accepted;
	size_t i;

	CHECK_EQ(fetch_check(c, "srv", srv_addr, 5, 1, 1, 1, NULL), 0);
	CHECK_EQ(fetch_check(c, "srv", srv_addr, 5, 4095, 8193, 3, NULL), 0);
	CHECK_EQ(fetch_check(c, "srv", srv_addr, 5, size - 100, 100, 2, NULL), 0);
	CHECK_EQ(fetch_check(c, "srv", srv_addr, 5, 3 * MiB + 1, 5 * MiB, 4, NULL), 0);
	CHECK_EQ(fetch_check(c, "srv", srv_addr, 5, size, 0, 1, NULL), 0);
	CHECK_EQ(fetch_check(c, "srv", srv_addr, 5, size + 1, 0, 1, NULL), -ERANGE);
	CHECK_EQ(fetch_check(c, "srv", srv_addr, 5, size - 1, 2, 1, NULL), -ERANGE);
	CHECK_EQ(fetch_check(c, "srv", srv_addr, 2, 0, 2, 1, NULL), -ERANGE);
	CHECK_EQ(fetch_check(c, "srv", srv_addr, 99, 0, 1, 1, NULL), -ENOENT);
	CHECK_EQ(fetch_check(c, "srv", srv_addr, 99, 0, 0, 1, NULL), -ENOENT);
	CHECK_EQ(fetch_check(c, "srv", srv_addr, 2, 0, 1, 1, NULL), 0);
	/* an ERR leaves the connection usable: still one connection */
	CHECK_EQ(stats(srv).conns_accepted - accepted, 1);
	CHECK_EQ(stats(c).conns_open, 1);

	/* bad arguments, refused before anything is sent */
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		CHECK_EQ(transport_fetch(c, &bad[i]), -EINVAL);
	CHECK_EQ(transport_fetch(c, NULL), -EINVAL);
	CHECK_EQ(stats(c).requests_sent, 11);
	transport_free(c);
}

TEST(progress)
{
	struct transport *c = client_new("c-progress", NULL, 0, 0);
	struct progress_log pl;
	uint64_t len = obj(5)->size;

	CHECK_EQ(fetch_check(c, "srv", srv_addr, 5, 0, len, 3, &pl), 0);
	CHECK(pl.monotonic);
	CHECK(pl.last == len);
	CHECK(pl.calls >= 2);
	CHECK(pl.calls <= len / (256 * KiB) + 2);

	CHECK_EQ(fetch_check(c, "srv", srv_addr, 2, 0, 1, 1, &pl), 0);
	CHECK_EQ(pl.calls, 1);
	CHECK_EQ(pl.last, 1);
	CHECK_EQ(fetch_check(c, "srv", srv_addr, 1, 0, 0, 1, &pl), 0);
	CHECK_EQ(pl.calls, 1);
	CHECK_EQ(pl.last, 0);
	CHECK_EQ(fetch_check(c, "srv", srv_addr, 99, 0, 10, 1, &pl), -ENOENT);
	CHECK_EQ(pl.calls, 0);
	transport_free(c);
}

TEST(reuse)
{
	struct transport *c = client_new("c-reuse", NULL, 0, 0);
	uint64_t accepted = stats(srv).conns_accepted, served = stats(srv).requests_served;
	int i;

	for (i = 0; i < 20; i++)
		CHECK_EQ(fetch_check(c, "srv", srv_addr, 6, (uint64_t)i * 100, 1000, 2, NULL), 0);
	CHECK_EQ(stats(c).requests_sent, 20);
	CHECK_EQ(stats(c).conns_open, 1);
	CHECK_EQ(stats(srv).conns_accepted - accepted, 1);
	CHECK_EQ(stats(srv).requests_served - served, 20);

	/* forgetting the peer closes its connection; the next fetch makes one */
	transport_forget_peer(c, "srv");
	transport_forget_peer(c, "nobody");
	CHECK_EQ(stats(c).conns_open, 0);
	CHECK_EQ(fetch_check(c, "srv", srv_addr, 6, 0, 10, 1, NULL), 0);
	CHECK_EQ(stats(srv).conns_accepted - accepted, 2);
	transport_free(c);
}

/* a client whose requests are smaller than WIRE_LEN_MAX: the split path */
TEST(split)
{
	struct transport *c = client_new("c-split", NULL, 0, 0);
	struct progress_log pl;
	uint64_t len = obj(5)->size;

	c->get_max = 100000;
	CHECK_EQ(fetch_check(c, "srv", srv_addr, 5, 0, len, 7, &pl), 0);
	CHECK_EQ(stats(c).requests_sent, (len + 99999) / 100000);
	CHECK(pl.monotonic);
	CHECK(pl.last == len);
	CHECK_EQ(fetch_check(c, "srv", srv_addr, 5, len - 150000, 150001, 1, NULL), -ERANGE);
	CHECK_EQ(fetch_check(c, "srv", srv_addr, 5, len - 150000, 150000, 1, NULL), 0);
	transport_free(c);
}

struct par {
	struct transport *c;
	int errors;
	uint64_t seed;
};

static void *par_thread(void *arg)
{
	struct par *p = arg;
	uint64_t size = obj(5)->size;
	int i;

	for (i = 0; i < 25; i++) {
		uint64_t off, len;

		p->seed = p->seed * 6364136223846793005ULL + 1442695040888963407ULL;
		off = (p->seed >> 20) % size;
		len = (p->seed >> 7) % (size - off < 2 * MiB ? size - off : 2 * MiB) + 1;
		if (off + len > size)
			len = size - off;
		if (fetch_check(p->c, "srv", srv_addr, 5, off, len, 1 + i % 4, NULL))
			p->errors++;
	}
	return NULL;
}

TEST(parallel)
{
	struct transport_config cfg = {.node = "c-par", .conns_per_peer = 3};
	struct transport *c = transport_new(&cfg, NULL);
	pthread_t th[8];
	struct par p[8];
	int i;

	for (i = 0; i < 8; i++) {
		p[i].c = c;
		p[i].errors = 0;
		p[i].seed = (uint64_t)i * 977 + 1;
		pthread_create(&th[i], NULL, par_thread, &p[i]);
	}
	for (i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(p[i].errors, 0);
	}
	CHECK_EQ(stats(c).requests_sent, 8 * 25);
	/* at most conns_per_peer are kept once everyone is done */
	CHECK(stats(c).conns_open >= 1 && stats(c).conns_open <= 3);
	transport_free(c);
}

TEST(secret)
{
	struct transport *s, *c;
	char addr[64];
	uint64_t fails;

	s = server_new("127.0.0.1", 0, secret_a, sizeof(secret_a) - 1, 0, 0, addr, sizeof(addr));
	CHECK(s != NULL);
	if (!s)
		return;

	c = client_new("c-good", secret_a, sizeof(secret_a) - 1, 0);
	CHECK_EQ(fetch_check(c, "srv", addr, 4, 0, obj(4)->size, 2, NULL), 0);
	CHECK_EQ(fetch_check(c, "srv", addr, 3, 0, 4095, 1, NULL), 0);
	CHECK_EQ(stats(s).auth_failures, 0);
	CHECK_EQ(stats(s).conns_accepted, 1);
	transport_free(c);

	fails = stats(s).auth_failures;
	c = client_new("c-wrong", secret_b, sizeof(secret_b) - 1, 0);
	CHECK_EQ(fetch_check(c, "srv", addr, 3, 0, 4095, 1, NULL), -EACCES);
	CHECK_EQ(stats(s).auth_failures - fails, 1);
	CHECK_EQ(stats(c).conns_open, 0);
	transport_free(c);

	/* same prefix, one byte shorter: still the wrong secret */
	c = client_new("c-short", secret_a, sizeof(secret_a) - 2, 0);
	CHECK_EQ(fetch_check(c, "srv", addr, 3, 0, 4095, 1, NULL), -EACCES);
	CHECK_EQ(stats(s).auth_failures - fails, 2);
	transport_free(c);

	c = client_new("c-none", NULL, 0, 0);
	CHECK_EQ(fetch_check(c, "srv", addr, 3, 0, 4095, 1, NULL), -EACCES);
	CHECK_EQ(stats(s).auth_failures - fails, 3);
	CHECK_EQ(stats(s).requests_served, 2);
	transport_free(c);

	/* a client with a secret does not trust a server without one */
	c = client_new("c-strict", secret_a, sizeof(secret_a) - 1, 0);
	CHECK_EQ(fetch_check(c, "srv", srv_addr, 3, 0, 4095, 1, NULL), -EACCES);
	transport_free(c);
	transport_free(s);
}

/* transport_tcp_serve_fd() on one end of a socketpair, as if the peer were @sa */
struct fake_peer {
	struct transport *t;
	int fd;
	struct sockaddr_storage sa;
	socklen_t len;
};

static void *serve_fd_thread(void *arg)
{
	struct fake_peer *f = arg;

	transport_tcp_serve_fd(f->t, f->fd, (struct sockaddr *)&f->sa, f->len, NULL);
	close(f->fd);
	return NULL;
}

static int handshake_as(struct transport *server, struct transport *client, const char *ip)
{
	struct fake_peer f = {.t = server};
	struct sockaddr_in *in4 = (struct sockaddr_in *)&f.sa;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&f.sa;
	pthread_t th;
	int sv[2], err;

	if (strchr(ip, ':')) {
		in6->sin6_family = AF_INET6;
		inet_pton(AF_INET6, ip, &in6->sin6_addr);
		f.len = sizeof(*in6);
	} else {
		in4->sin_family = AF_INET;
		inet_pton(AF_INET, ip, &in4->sin_addr);
		f.len = sizeof(*in4);
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -errno;
	f.fd = sv[0];
	pthread_create(&th, NULL, serve_fd_thread, &f);
	err = transport_tcp_client_handshake(client, sv[1], WIRE_V1);
	close(sv[1]);
	pthread_join(th, NULL);
	return err;
}

TEST(loopback_only)
{
	struct transport *c = client_new("c-remote", NULL, 0, 0);
	uint64_t fails = stats(srv).auth_failures;

	CHECK_EQ(handshake_as(srv, c, "127.0.0.1"), 0);
	CHECK_EQ(handshake_as(srv, c, "127.255.0.9"), 0);
	CHECK_EQ(handshake_as(srv, c, "::1"), 0);
	CHECK_EQ(handshake_as(srv, c, "::ffff:127.0.0.1"), 0);
	CHECK_EQ(stats(srv).auth_failures - fails, 0);
	CHECK_EQ(handshake_as(srv, c, "192.0.2.1"), -EACCES);
	CHECK_EQ(handshake_as(srv, c, "10.0.0.1"), -EACCES);
	CHECK_EQ(handshake_as(srv, c, "128.0.0.1"), -EACCES);
	CHECK_EQ(handshake_as(srv, c, "::ffff:10.0.0.1"), -EACCES);
	CHECK_EQ(handshake_as(srv, c, "2001:db8::1"), -EACCES);
	CHECK_EQ(handshake_as(srv, c, "::2"), -EACCES);
	CHECK_EQ(stats(srv).auth_failures - fails, 6);
	transport_free(c);
}

TEST(bad_frames)
{
	static const char junk[] = "GET / HTTP/1.1\r\nHost: objfs\r\n\r\n0123456789";
	uint64_t bad = stats(srv).bad_frames, served = stats(srv).requests_served;
	struct transport *c = client_new("c-bad", NULL, 0, 0);
	struct wire_msg m;
	uint8_t hdr[WIRE_MSG_MAX_V2], got[64];
	int fd;

	/* junk */
	fd = raw_connect(srv_addr);
	raw_send(fd, junk, sizeof(junk));
	raw_expect_close(fd);
	CHECK_EQ(stats(srv).bad_frames - bad, 1);

	/* a truncated header, then the peer hangs up */
	memset(&m, 0, sizeof(m));
	m.type = WIRE_HELLO;
	strcpy(m.node, "raw");
	CHECK(transport_wire_encode(&m, hdr, sizeof(hdr)) > 0);
	fd = raw_connect(srv_addr);
	raw_send(fd, hdr, 20);
	shutdown(fd, SHUT_WR);
	raw_expect_close(fd);
	CHECK_EQ(stats(srv).bad_frames - bad, 2);

	/* a HELLO whose body never comes */
	fd = raw_connect(srv_addr);
	raw_send(fd, hdr, WIRE_HDR_LEN + 3);
	shutdown(fd, SHUT_WR);
	raw_expect_close(fd);
	CHECK_EQ(stats(srv).bad_frames - bad, 3);

	/* a HELLO with an absurd body length */
	fd = raw_connect(srv_addr);
	hdr[32 + 5] = 1; /* length += 1 TiB */
	raw_send(fd, hdr, WIRE_HDR_LEN);
	raw_expect_close(fd);
	CHECK_EQ(stats(srv).bad_frames - bad, 4);

	/* GET before any handshake: closed, nothing served */
	fd = raw_connect(srv_addr);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_GET;
	m.id = 3;
	m.len = 10;
	raw_send_msg(fd, &m);
	raw_expect_close(fd);
	CHECK_EQ(stats(srv).bad_frames - bad, 5);

	/* authenticated, then a GET of 2 GiB */
	fd = raw_connect(srv_addr);
	raw_hello(fd, 0);
	CHECK_EQ(raw_recv_msg(fd, &m), WIRE_HDR_LEN);
	CHECK_EQ(m.type, WIRE_READY);
	CHECK_EQ(m.status, 0);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_GET;
	m.id = 5;
	m.len = 1;
	raw_send_msg(fd, &m); /* a good one first */
	CHECK_EQ(raw_recv_msg(fd, &m), WIRE_HDR_LEN);
	CHECK_EQ(m.type, WIRE_DATA);
	CHECK_EQ(recv(fd, got, 1, MSG_WAITALL), 1);
	CHECK_EQ(got[0], obj(5)->data[0]);
	memset(hdr, 0, sizeof(hdr));
	memset(&m, 0, sizeof(m));
	m.type = WIRE_GET;
	m.id = 5;
	m.len = 1;
	CHECK_EQ(transport_wire_encode(&m, hdr, sizeof(hdr)), WIRE_HDR_LEN);
	hdr[32 + 3] = 0x80; /* length = 2 GiB + 1 */
	raw_send(fd, hdr, WIRE_HDR_LEN);
	raw_expect_close(fd);
	CHECK_EQ(stats(srv).bad_frames - bad, 6);

	/* a second HELLO after READY */
	fd = raw_connect(srv_addr);
	raw_hello(fd, 0);
	CHECK_EQ(raw_recv_msg(fd, &m), WIRE_HDR_LEN);
	raw_hello(fd, 0);
	raw_expect_close(fd);
	CHECK_EQ(stats(srv).bad_frames - bad, 7);

	/* a server reply sent to the server */
	fd = raw_connect(srv_addr);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_READY;
	raw_send_msg(fd, &m);
	CHECK_EQ(raw_until_closed(fd, got, sizeof(got)), 0);
	close(fd);
	CHECK_EQ(stats(srv).bad_frames - bad, 8);

	CHECK_EQ(stats(srv).requests_served - served, 1);
	/* and everybody else is still served */
	CHECK_EQ(fetch_check(c, "srv", srv_addr, 4, 0, obj(4)->size, 3, NULL), 0);
	transport_free(c);
}

TEST(bad_frames_secret)
{
	struct transport *s;
	struct wire_msg m;
	char addr[64];
	int fd;

	s = server_new("127.0.0.1", 0, secret_a, sizeof(secret_a) - 1, 0, 0, addr, sizeof(addr));
	CHECK(s != NULL);
	if (!s)
		return;

	/* GET instead of AUTH */
	fd = raw_connect(addr);
	raw_hello(fd, WIRE_F_SECRET);
	CHECK(raw_recv_msg(fd, &m) > 0);
	CHECK_EQ(m.type, WIRE_CHALLENGE);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_GET;
	m.id = 3;
	raw_send_msg(fd, &m);
	raw_expect_close(fd);
	CHECK_EQ(stats(s).bad_frames, 1);
	CHECK_EQ(stats(s).auth_failures, 0);

	/* a made-up proof */
	fd = raw_connect(addr);
	raw_hello(fd, WIRE_F_SECRET);
	CHECK(raw_recv_msg(fd, &m) > 0);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_AUTH;
	memset(m.proof, 0x42, sizeof(m.proof));
	raw_send_msg(fd, &m);
	CHECK_EQ(raw_recv_msg(fd, &m), WIRE_HDR_LEN);
	CHECK_EQ(m.type, WIRE_READY);
	CHECK_EQ(m.status, EACCES);
	raw_expect_close(fd);
	CHECK_EQ(stats(s).auth_failures, 1);

	/* the server's own proof sent back (reflection) */
	fd = raw_connect(addr);
	raw_hello(fd, WIRE_F_SECRET);
	CHECK(raw_recv_msg(fd, &m) > 0);
	m.type = WIRE_AUTH;
	memset(m.nonce, 0, sizeof(m.nonce));
	raw_send_msg(fd, &m);
	CHECK_EQ(raw_recv_msg(fd, &m), WIRE_HDR_LEN);
	CHECK_EQ(m.status, EACCES);
	close(fd);
	WAIT_FOR(stats(s).auth_failures == 2);
	CHECK_EQ(stats(s).auth_failures, 2);

	/* no HELLO at all within io_timeout: the server hangs up */
	fd = raw_connect(addr);
	raw_expect_close(fd);
	CHECK_EQ(stats(s).requests_served, 0);
	transport_free(s);
}

/* ---- a fake server for a real client ---- */

enum fake_mode {
	FAKE_STALL,	  /* half the payload, then nothing */
	FAKE_CLOSE,	  /* half the payload, then close */
	FAKE_BAD_OFF,	  /* DATA for another offset */
	FAKE_BAD_REQID,	  /* ERR for another request */
	FAKE_BAD_LEN,	  /* DATA of another length */
	FAKE_JUNK,	  /* not a message at all */
	FAKE_CLOSE_EARLY, /* close right after reading GET */
};

struct fake {
	int lfd;
	int release[2]; /* a byte (or EOF) here ends a stall */
	enum fake_mode mode;
	pthread_t th;
	char addr[64];
};

static void *fake_thread(void *arg)
{
	struct fake *f = arg;
	static uint8_t payload[256 * 1024];
	struct wire_msg m, get;
	struct pollfd p;
	int fd;

	fd = accept(f->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	if (raw_recv_msg(fd, &m) <= 0 || m.type != WIRE_HELLO)
		goto out;
	memset(&m, 0, sizeof(m));
	m.type = WIRE_READY;
	raw_send_msg(fd, &m);
	if (raw_recv_msg(fd, &get) != WIRE_HDR_LEN || get.type != WIRE_GET)
		goto out;
	m = get;
	m.type = WIRE_DATA;
	switch (f->mode) {
	case FAKE_STALL:
	case FAKE_CLOSE:
		raw_send_msg(fd, &m);
		raw_send(fd, payload, (size_t)get.len / 2);
		if (f->mode == FAKE_STALL) {
			p.fd = f->release[0];
			p.events = POLLIN;
			poll(&p, 1, 10000);
		}
		break;
	case FAKE_BAD_OFF:
		m.off++;
		raw_send_msg(fd, &m);
		break;
	case FAKE_BAD_LEN:
		m.len--;
		raw_send_msg(fd, &m);
		break;
	case FAKE_BAD_REQID:
		m.type = WIRE_ERR;
		m.len = 0;
		m.status = ENOENT;
		m.reqid++;
		raw_send_msg(fd, &m);
		break;
	case FAKE_JUNK:
		raw_send(fd, "this is not a header at all, no sir, no", 40);
		break;
	case FAKE_CLOSE_EARLY:
		break;
	}
out:
	close(fd);
	return NULL;
}

static void fake_start(struct fake *f, enum fake_mode mode)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);

	f->mode = mode;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(!bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)));
	CHECK(!listen(f->lfd, 4));
	getsockname(f->lfd, (struct sockaddr *)&sa, &len);
	snprintf(f->addr, sizeof(f->addr), "127.0.0.1:%u", ntohs(sa.sin_port));
	CHECK(!pipe(f->release));
	pthread_create(&f->th, NULL, fake_thread, f);
}

static void fake_stop(struct fake *f)
{
	close(f->release[1]);
	pthread_join(f->th, NULL);
	close(f->release[0]);
	close(f->lfd);
}

/* fetch 200 KiB from a fake server in @mode; the time it took in *@secs */
static int fake_fetch(enum fake_mode mode, unsigned timeout_ms, double *secs,
		      struct progress_log *pl)
{
	struct transport *c = client_new("c-fake", NULL, 0, timeout_ms);
	static uint8_t buf[200 * 1024];
	struct iovec v = {.iov_base = buf, .iov_len = sizeof(buf)};
	struct transport_req req = {.peer = "fake", .id = 1, .len = sizeof(buf), .iov = &v};
	struct fake f;
	double t0;
	int err;

	fake_start(&f, mode);
	memset(pl, 0, sizeof(*pl));
	pl->monotonic = true;
	pl->len = sizeof(buf);
	t0 = now_s();
	req.addr = f.addr;
	req.iovcnt = 1;
	req.progress = on_progress;
	req.arg = pl;
	err = transport_fetch(c, &req);
	if (secs)
		*secs = now_s() - t0;
	CHECK_EQ(stats(c).conns_open, 0); /* a failed connection is not kept */
	transport_free(c);
	fake_stop(&f);
	return err;
}

TEST(stall)
{
	struct progress_log pl;
	double secs;

	CHECK_EQ(fake_fetch(FAKE_STALL, 300, &secs, &pl), -ETIMEDOUT);
	CHECK(secs >= 0.25 && secs < 1.5);
	CHECK(pl.last < 200 * 1024);
	fprintf(stderr, "stall detected after %.3f s (io_timeout 0.3 s)\n", secs);
}

TEST(reset)
{
	struct progress_log pl;
	double secs;

	CHECK_EQ(fake_fetch(FAKE_CLOSE, 2000, &secs, &pl), -ECONNRESET);
	CHECK(secs < 1.5);
	CHECK_EQ(fake_fetch(FAKE_CLOSE_EARLY, 2000, &secs, &pl), -ECONNRESET);
}

TEST(bad_replies)
{
	struct progress_log pl;

	CHECK_EQ(fake_fetch(FAKE_BAD_OFF, 2000, NULL, &pl), -EPROTO);
	CHECK_EQ(fake_fetch(FAKE_BAD_LEN, 2000, NULL, &pl), -EPROTO);
	CHECK_EQ(fake_fetch(FAKE_BAD_REQID, 2000, NULL, &pl), -EPROTO);
	CHECK_EQ(fake_fetch(FAKE_JUNK, 2000, NULL, &pl), -EPROTO);
	CHECK_EQ(pl.calls, 0);
}

TEST(refused)
{
	struct transport *c = client_new("c-refused", NULL, 0, 1000);
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	char addr[64];
	uint8_t b;
	struct iovec v = {.iov_base = &b, .iov_len = 1};
	struct transport_req req = {.peer = "gone", .id = 1, .len = 1, .iov = &v, .iovcnt = 1};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	/* a port that was free a moment ago */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	getsockname(fd, (struct sockaddr *)&sa, &len);
	close(fd);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(sa.sin_port));
	req.addr = addr;
	CHECK_EQ(transport_fetch(c, &req), -ECONNREFUSED);
	req.addr = "no-such-host.invalid:80";
	CHECK_EQ(transport_fetch(c, &req), -EHOSTUNREACH);
	CHECK_EQ(stats(c).conns_open, 0);
	transport_free(c);
}

/* the peer restarts on the same port, then moves to another */
TEST(stale)
{
	struct transport *c = client_new("c-stale", NULL, 0, 0), *a, *b;
	char addr[64], addr2[64];
	unsigned port;

	a = server_new("127.0.0.1", 0, NULL, 0, 0, 0, addr, sizeof(addr));
	CHECK(a != NULL);
	if (!a)
		return;
	port = (unsigned)atoi(strrchr(addr, ':') + 1);
	CHECK_EQ(fetch_check(c, "moving", addr, 3, 0, 4095, 1, NULL), 0);
	CHECK_EQ(stats(c).conns_open, 1);
	transport_free(a);

	a = server_new("127.0.0.1", (uint16_t)port, NULL, 0, 0, 0, addr2, sizeof(addr2));
	CHECK(a != NULL);
	if (!a)
		return;
	CHECK_STR(addr, addr2);
	CHECK_EQ(fetch_check(c, "moving", addr, 3, 0, 4095, 1, NULL), 0);
	CHECK_EQ(stats(c).conns_open, 1);
	CHECK_EQ(stats(a).conns_accepted, 1);

	b = server_new("127.0.0.1", 0, NULL, 0, 0, 0, addr2, sizeof(addr2));
	CHECK(b != NULL);
	CHECK_EQ(fetch_check(c, "moving", addr2, 6, 0, 64 * KiB, 1, NULL), 0);
	/* the connection to the old address was dropped, not kept */
	CHECK_EQ(stats(c).conns_open, 1);
	WAIT_FOR(stats(a).conns_open == 0);
	CHECK_EQ(stats(a).conns_open, 0);
	CHECK_EQ(stats(b).conns_accepted, 1);
	transport_free(c);
	transport_free(b);
	transport_free(a);
}

TEST(bwlimit)
{
	struct transport *s, *c = client_new("c-bw", NULL, 0, 0);
	char addr[64];
	double t0, secs;

	s = server_new("127.0.0.1", 0, NULL, 0, 0, 8 * MiB, addr, sizeof(addr));
	CHECK(s != NULL);
	if (!s)
		return;
	t0 = now_s();
	CHECK_EQ(fetch_check(c, "bw", addr, 5, 0, 4 * MiB, 1, NULL), 0);
	secs = now_s() - t0;
	/* 4 MiB at 8 MiB/s, less a burst of 1 MiB: at least 0.375 s */
	CHECK(secs > 0.3 && secs < 3);
	fprintf(stderr, "4 MiB at 8 MiB/s took %.3f s\n", secs);
	transport_free(c);
	transport_free(s);
}

/* The RDMA half of a transport (transport_new() makes it a transport of
 * its own, with the same config) serves within the node's one bandwidth
 * limit: what it sends is taken from the bucket of the transport it
 * belongs to, so TCP and RDMA together never serve more than
 * serve_bwlimit. */
TEST(bwlimit_shared)
{
	/* 8 KiB/s: a burst of 64 KiB (the least), refilled at 8 KiB/s, so the
	 * checks below hold unless the test stalls for seconds */
	struct transport_config cfg = {.node = "bw-halves", .serve_bwlimit = 8 * KiB};
	struct msrc ms = {0};
	struct wire_msg get = {.type = WIRE_GET, .reqid = 1, .id = 0xb0, .off = 0, .len = 64 * KiB};
	struct wire_msg reply;
	struct transport *node, *half;
	struct serve_ctx ctx;
	struct iovec iov[16];
	double node_before, half_before;
	size_t bytes, sent = 0;
	int err = 0;

	msrc_add(&ms, 0xb0, 64 * KiB, 16 * KiB);
	node = transport_new_ops(&cfg, &fake_ops, &err);
	half = transport_new_ops(&cfg, &fake_ops, &err);
	CHECK(node && half);
	if (!node || !half)
		return;
	half->parent = node; /* as transport_new() links its RDMA half */
	half->src = (struct transport_source){
	    .open = msrc_open, .iov = msrc_iov, .close = msrc_close, .ctx = &ms};
	node_before = node->bucket.tokens;
	half_before = half->bucket.tokens;
	CHECK_EQ(transport_serve_begin(half, &get, "peer", "peer", NULL, &ctx, &reply), 0);
	while (transport_serve_more(&ctx) &&
	       transport_serve_next(&ctx, MiB, iov, 16, &bytes, NULL) > 0)
		sent += bytes;
	transport_serve_end(&ctx);
	CHECK_EQ(sent, 64 * KiB);
	/* one burst, taken from the node's bucket (what refilled meanwhile
	 * is 8 KiB a second) */
	CHECK(node->bucket.tokens < node_before - 32.0 * KiB);
	CHECK(half->bucket.tokens == half_before);
	half->parent = NULL;
	transport_free(half);
	transport_free(node);
	free(ms.objs[0].data);
}

/* transport_free() of a busy server is prompt */
TEST(free_prompt)
{
	struct transport *s, *c[3];
	char addr[64];
	double t0;
	int i, raw;

	s = server_new("127.0.0.1", 0, NULL, 0, 5000, 0, addr, sizeof(addr));
	CHECK(s != NULL);
	if (!s)
		return;
	for (i = 0; i < 3; i++) {
		char name[16];

		snprintf(name, sizeof(name), "c-free%d", i);
		c[i] = client_new(name, NULL, 0, 0);
		CHECK_EQ(fetch_check(c[i], "s", addr, 2, 0, 1, 1, NULL), 0);
	}
	raw = raw_connect(addr); /* mid-handshake, silent */
	WAIT_FOR(stats(s).conns_open == 4);
	CHECK_EQ(stats(s).conns_open, 4);
	t0 = now_s();
	transport_free(s);
	CHECK(now_s() - t0 < 1.0);
	CHECK_EQ(raw_until_closed(raw, NULL, 0), 0);
	close(raw);
	/* the clients find their cached connections dead and say so */
	for (i = 0; i < 3; i++) {
		CHECK_EQ(fetch_check(c[i], "s", addr, 2, 0, 1, 1, NULL), -ECONNREFUSED);
		transport_free(c[i]);
	}
}

TEST(ipv6)
{
	struct transport *s, *c;
	char addr[64];
	int fd = socket(AF_INET6, SOCK_STREAM, 0);
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		printf("# no ::1 here, skipping ipv6\n");
		if (fd >= 0)
			close(fd);
		return;
	}
	close(fd);
	s = server_new("::1", 0, NULL, 0, 0, 0, addr, sizeof(addr));
	CHECK(s != NULL);
	if (!s)
		return;
	CHECK(!strncmp(addr, "[::1]:", 6));
	c = client_new("c-v6", NULL, 0, 0);
	CHECK_EQ(fetch_check(c, "v6", addr, 4, 0, obj(4)->size, 2, NULL), 0);
	transport_free(c);
	transport_free(s);
}

/* Replace the contents of @path with @len bytes of @data. */
static void put_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "w");

	CHECK(f && fwrite(data, 1, len, f) == len);
	if (f)
		fclose(f);
}

TEST(read_secret)
{
	char dir[] = "/tmp/objfs-test-secret-XXXXXX", path[64];
	uint8_t *sec = NULL;
	size_t len = 0;
	char big[TRANSPORT_SECRET_MAX + 2];

	if (!mkdtemp(dir)) {
		CHECK(0);
		return;
	}
	snprintf(path, sizeof(path), "%s/secret", dir);
	put_file(path, "0123456789abcdefXYZ\n", 20);
	chmod(path, 0600);
	CHECK_EQ(transport_read_secret(path, &sec, &len), 0);
	CHECK_EQ(len, 19);
	CHECK(sec && !memcmp(sec, "0123456789abcdefXYZ", 19));
	free(sec);

	chmod(path, 0644);
	CHECK_EQ(transport_read_secret(path, &sec, &len), -EPERM);
	chmod(path, 0640);
	CHECK_EQ(transport_read_secret(path, &sec, &len), 0);
	free(sec);

	put_file(path, "short\n", 6);
	CHECK_EQ(transport_read_secret(path, &sec, &len), -EINVAL);
	put_file(path, "0123456789abcdef\n\n", 18); /* one newline goes, the other stays */
	CHECK_EQ(transport_read_secret(path, &sec, &len), 0);
	CHECK_EQ(len, 17);
	free(sec);

	memset(big, 'k', sizeof(big));
	big[TRANSPORT_SECRET_MAX] = '\n';
	put_file(path, big, TRANSPORT_SECRET_MAX + 1);
	CHECK_EQ(transport_read_secret(path, &sec, &len), 0);
	CHECK_EQ(len, TRANSPORT_SECRET_MAX);
	free(sec);
	big[TRANSPORT_SECRET_MAX] = 'k';
	put_file(path, big, TRANSPORT_SECRET_MAX + 1);
	CHECK_EQ(transport_read_secret(path, &sec, &len), -EINVAL);

	unlink(path);
	CHECK_EQ(transport_read_secret(path, &sec, &len), -ENOENT);
	rmdir(dir);
}

int main(void)
{
	harness_begin();

	RUN(config);
	RUN(backend_ops);
	RUN(serve_errors);
	srv = server_new("127.0.0.1", 0, NULL, 0, 1000, 0, srv_addr, sizeof(srv_addr));
	if (!srv) {
		fprintf(stderr, "cannot start the test server\n");
		return 1;
	}
	RUN(sizes);
	RUN(ranges);
	RUN(progress);
	RUN(reuse);
	RUN(split);
	RUN(parallel);
	RUN(secret);
	RUN(loopback_only);
	RUN(bad_frames);
	RUN(bad_frames_secret);
	RUN(stall);
	RUN(reset);
	RUN(bad_replies);
	RUN(refused);
	RUN(stale);
	RUN(bwlimit);
	RUN(bwlimit_shared);
	RUN(free_prompt);
	RUN(ipv6);
	RUN(read_secret);

	transport_free(srv);
	CHECK(atomic_load(&src.opens) > 0);
	return harness_end();
}
