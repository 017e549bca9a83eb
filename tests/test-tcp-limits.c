/*
 * test-tcp-limits: what a TCP server holds at once (transport_i.h,
 * TRANSPORT_SERVE_*), over real loopback sockets: idle authenticated
 * connections make room for new peers instead of starving them, one
 * node cannot take more than its share, and connections that never
 * finish their handshake are closed early and cannot crowd out the rest.
 * Some cases lower the limits in struct transport before serving.
 *
 * Every socket is on 127.0.0.1, every wait is bounded, and an alarm ends
 * the program if something hangs anyway.
 */
#include "transport-harness.h"

#include <sys/resource.h>

/* A server whose limits are lowered to @conns, @per_node, @hs. */
static struct transport *limited_server(unsigned timeout_ms, unsigned conns, unsigned per_node,
					unsigned hs, char *addr, size_t addr_size)
{
	struct transport_config cfg = {
	    .node = "srv",
	    .listen_host = "127.0.0.1",
	    .io_timeout_ms = timeout_ms,
	};
	struct transport *t = transport_new(&cfg, NULL);

	if (!t)
		return NULL;
	t->serve_conns = conns;
	t->serve_conns_per_node = per_node;
	t->serve_handshakes = hs;
	return server_serve(t, addr, addr_size);
}

/* A raw connection that said HELLO as @node and got READY(0), or -1. */
static int raw_authed(const char *addr, const char *node)
{
	struct wire_msg m;
	int fd = raw_connect(addr);

	if (fd < 0)
		return -1;
	raw_hello_as(fd, 0, node);
	if (raw_recv_msg(fd, &m) != WIRE_HDR_LEN || m.type != WIRE_READY || m.status) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Has the server left @fd open (nothing to read, no hang-up)? */
static bool still_open(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};

	return poll(&p, 1, 100) == 0;
}

/*
 * The case of issue 9: the server full of idle authenticated
 * connections.  While none has been idle for a second a new one is
 * refused at once; then the longest idle makes room for it.
 */
TEST(idle_make_room)
{
	struct transport *s, *c = client_new("c-room", NULL, 0, 0);
	int fds[256], fd, i, n = 0, max;
	char addr[64], node[16];

	s = server_new("127.0.0.1", 0, NULL, 0, 10000, 0, addr, sizeof(addr));
	CHECK(s != NULL);
	if (!s)
		return;
	/* the cap the open-files limit gave (util_fd_budget()) */
	max = (int)stats(s).serve_conns;
	CHECK(max >= 16 && max <= (int)ARRAY_SIZE(fds));
	for (i = 0; i < max; i++) {
		snprintf(node, sizeof(node), "idle%d", i / 8);
		fds[i] = raw_authed(addr, node);
		n += fds[i] >= 0;
	}
	CHECK_EQ(n, max);
	CHECK_EQ(stats(s).conns_open, max);
	CHECK_EQ(stats(s).serve_conns_open, max);
	fd = raw_connect(addr);
	CHECK_EQ(raw_until_closed(fd, NULL, 0), 0);
	close(fd);
	CHECK_EQ(stats(s).conns_accepted, max);

	usleep((TRANSPORT_IDLE_EVICT_MS + 200) * 1000);
	CHECK_EQ(fetch_check(c, "srv", addr, 3, 0, 4095, 1, NULL), 0);
	/* the first one was idle longest; the others are still there */
	CHECK_EQ(raw_until_closed(fds[0], NULL, 0), 0);
	CHECK(still_open(fds[1]));
	CHECK(still_open(fds[max - 1]));
	WAIT_FOR(stats(s).conns_open == (uint64_t)max);
	CHECK_EQ(stats(s).conns_open, max);
	for (i = 0; i < max; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	transport_free(c);
	WAIT_FOR(stats(s).conns_open == 0);
	CHECK_EQ(stats(s).conns_open, 0);
	CHECK_EQ(stats(s).serve_conns_open, 0);
	transport_free(s);
}

/*
 * Issue 21: a transport made under an open-files limit of 256 serves at
 * most 32 connections, 16 from one node (util_fd_budget()), and still serves
 * under it; one made under a limit of 64 keeps to the floor of 16.
 */
TEST(sized_from_nofile)
{
	struct transport_config cfg = {.node = "srv", .listen_host = "127.0.0.1"};
	struct rlimit old, low;
	struct transport *t, *s, *c;
	char addr[64];

	CHECK_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = 256;
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
	t = transport_new(&cfg, NULL);
	s = server_new("127.0.0.1", 0, NULL, 0, 2000, 0, addr, sizeof(addr));
	low.rlim_cur = 64;
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
	c = transport_new(&cfg, NULL);
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
	CHECK(t && s && c);
	if (!t || !s || !c)
		goto out;
	CHECK_EQ(stats(t).serve_conns, 32);
	CHECK_EQ(stats(t).serve_conns_per_node, 16);
	CHECK_EQ(stats(c).serve_conns, 16);
	CHECK_EQ(stats(c).serve_conns_per_node, 8);
	transport_free(c);
	c = client_new("c-low", NULL, 0, 0);
	CHECK_EQ(stats(s).serve_conns, 32);
	CHECK_EQ(fetch_check(c, "srv", addr, 3, 0, 4095, 1, NULL), 0);
	CHECK_EQ(stats(s).serve_conns_open, 1);
out:
	transport_free(c);
	transport_free(s);
	transport_free(t);
}

/* Keep the server busy on @fd: ask for 9 MiB and read none of it. */
static void raw_busy(int fd)
{
	struct wire_msg m = {.type = WIRE_GET, .reqid = 1, .id = 5};
	int small = 4096;

	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	m.len = obj(5)->size;
	raw_send_msg(fd, &m);
}

/* One node gets serve_conns_per_node connections: a new one of its own
 * closes its longest idle one, or is refused if none is idle. */
TEST(per_node)
{
	struct transport *s, *c = client_new("c-other", NULL, 0, 0);
	int fds[5], fd, i;
	char addr[64];

	s = limited_server(10000, 64, 4, 64, addr, sizeof(addr));
	CHECK(s != NULL);
	if (!s)
		return;
	for (i = 0; i < 4; i++)
		CHECK((fds[i] = raw_authed(addr, "greedy")) >= 0);
	fds[4] = raw_authed(addr, "greedy");
	CHECK(fds[4] >= 0);
	CHECK_EQ(raw_until_closed(fds[0], NULL, 0), 0);
	close(fds[0]);
	CHECK(still_open(fds[1]));
	/* other nodes do not count */
	CHECK_EQ(fetch_check(c, "srv", addr, 3, 0, 4095, 1, NULL), 0);

	/* all four busy: the next one of that node is refused, before READY */
	for (i = 1; i < 5; i++)
		raw_busy(fds[i]);
	usleep(200 * 1000);
	fd = raw_connect(addr);
	raw_hello_as(fd, 0, "greedy");
	CHECK_EQ(raw_until_closed(fd, NULL, 0), 0);
	close(fd);
	for (i = 1; i < 5; i++)
		close(fds[i]);
	fd = raw_authed(addr, "greedy");
	CHECK(fd >= 0);
	close(fd);
	transport_free(c);
	transport_free(s);
}

/*
 * Connections in the handshake: beyond serve_handshakes the oldest is
 * closed, so silent ones cannot crowd out a real peer; and one is closed
 * after TRANSPORT_HANDSHAKE_MAX_MS even with a long io_timeout.
 */
TEST(handshakes)
{
	struct transport *s, *c = client_new("c-hs", NULL, 0, 0);
	struct timeval tv = {.tv_sec = TRANSPORT_HANDSHAKE_MAX_MS / 1000 + 3};
	int fds[9], i;
	char addr[64];
	double t0;

	s = limited_server(60000, 64, 16, 8, addr, sizeof(addr));
	CHECK(s != NULL);
	if (!s)
		return;
	t0 = now_s();
	for (i = 0; i < 8; i++)
		fds[i] = raw_connect(addr);
	WAIT_FOR(stats(s).conns_open == 8);
	CHECK_EQ(stats(s).conns_open, 8);
	fds[8] = raw_connect(addr);
	CHECK_EQ(raw_until_closed(fds[0], NULL, 0), 0);
	CHECK(still_open(fds[1]));
	/* a real peer gets through (the next oldest makes room for it) */
	CHECK_EQ(fetch_check(c, "srv", addr, 4, 0, obj(4)->size, 2, NULL), 0);
	CHECK_EQ(raw_until_closed(fds[1], NULL, 0), 0);
	/* the silent ones go within the handshake deadline, not io_timeout */
	setsockopt(fds[8], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	CHECK_EQ(raw_until_closed(fds[8], NULL, 0), 0);
	CHECK(now_s() - t0 < TRANSPORT_HANDSHAKE_MAX_MS / 1000.0 + 1.5);
	for (i = 0; i < 9; i++)
		close(fds[i]);
	transport_free(c);
	transport_free(s);
}

int main(void)
{
	harness_begin();
	RUN(idle_make_room);
	RUN(per_node);
	RUN(handshakes);
	RUN(sized_from_nofile);
	return harness_end();
}
