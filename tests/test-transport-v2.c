/*
 * test-transport-v2: wire version 2 over real loopback sockets, in one
 * process: the "fan1" card token that gates it, GET flags (PARTIAL_OK,
 * WANT_HAVE), the HAVE answer, and that nothing changes for peers that
 * speak version 1; then what "fan2" adds: a "busy" answer at the
 * server's serve_slots (BUSY_OK) and GETs parked for a block that is
 * arriving (PARK), and that a node of the first version 2 never sees
 * either flag.
 *
 * The server serves the harness's objects through a source with a have()
 * hook (psrc_*) that holds object 5 only in part (struct part: blocks of
 * 1 MiB) and counts any iov() for bytes it lacks, which must never
 * happen.  Clients follow a card that has "fan1" or not; a client or a
 * server whose wire_max is lowered to 1 plays a node from before version
 * 2.  Raw clients check the order of messages on the wire, a fake server
 * (fake2_*) answers a real client out of turn, and the handshake state
 * machines are driven directly to play a man in the middle.
 *
 * The source, the transports and the raw clients are
 * transport-harness.h's.
 */
#include "transport-harness.h"

#define PART_SHIFT 20 /* 1 MiB blocks: object 5 has 10 */

/* What the v2 source holds of object 5, and what it was asked. */
static struct {
	uint64_t id;
	uint32_t nblocks;
	uint8_t have[TRANSPORT_HAVE_BLOCKS_MAX / 8], fetching[TRANSPORT_HAVE_BLOCKS_MAX / 8];
	atomic_int asked, bad_iov, waits;
	pthread_mutex_t lock; /* the bitmaps, once a test changes them while serving */
} part = {.lock = PTHREAD_MUTEX_INITIALIZER};

static bool bit(const uint8_t *map, uint64_t i)
{
	return map[i / 8] >> (i % 8) & 1;
}

/* Does the source hold all of [off, off+len) of object 5? */
static bool part_holds(uint64_t off, uint64_t len)
{
	uint64_t b;

	for (b = off >> PART_SHIFT; len && b <= (off + len - 1) >> PART_SHIFT; b++)
		if (!bit(part.have, b))
			return false;
	return true;
}

static int psrc_have(void *token, uint64_t off, uint64_t len, struct transport_have *ret)
{
	struct mobj *o = token;

	int r;

	atomic_fetch_add(&part.asked, 1);
	if (o->id != part.id) {
		ret->flags = TRANSPORT_HAVE_SEALED;
		return 1;
	}
	ret->shift = PART_SHIFT;
	ret->nblocks = part.nblocks;
	pthread_mutex_lock(&part.lock);
	memcpy(ret->have, part.have, sizeof(ret->have));
	memcpy(ret->fetching, part.fetching, sizeof(ret->fetching));
	r = part_holds(off, len);
	pthread_mutex_unlock(&part.lock);
	return r;
}

static int psrc_iov(void *token, uint64_t off, size_t len, struct iovec *iov, int max_iov,
		    size_t *ret_bytes)
{
	struct mobj *o = token;

	pthread_mutex_lock(&part.lock);
	if (o->id == part.id && !part_holds(off, len))
		atomic_fetch_add(&part.bad_iov, 1);
	pthread_mutex_unlock(&part.lock);
	return msrc_iov(token, off, len, iov, max_iov, ret_bytes);
}

/* Where [off, off+len) of object 5 stands for a parked GET: 1 held, 0 a
 * block neither held nor being fetched, 2 some being fetched. */
static int part_state(uint64_t off, uint64_t len)
{
	uint64_t b;
	int r = 1;

	for (b = off >> PART_SHIFT; len && b <= (off + len - 1) >> PART_SHIFT; b++) {
		if (bit(part.have, b))
			continue;
		if (!bit(part.fetching, b))
			return 0;
		r = 2;
	}
	return r;
}

/* The source's wait() hook (polls; part.lock guards the bitmaps). */
static int psrc_wait(void *token, uint64_t off, uint64_t len, unsigned ms)
{
	struct mobj *o = token;
	int64_t until = util_mono_ns() + (int64_t)ms * 1000000;
	int r;

	if (o->id != part.id)
		return 1;
	atomic_fetch_add(&part.waits, 1);
	for (;;) {
		pthread_mutex_lock(&part.lock);
		r = part_state(off, len);
		pthread_mutex_unlock(&part.lock);
		if (r != 2 || util_mono_ns() >= until)
			return r;
		usleep(2000);
	}
}

/* Object 6 (64 KiB, sealed) in blocks of 16 KiB: which of them the
 * source gave out to fan-out GETs (its give() hook). */
#define GIVE_ID 6
#define GIVE_SHIFT 14
static uint8_t given6;

static int psrc_give(void *token, uint64_t off, uint64_t len, struct transport_have *ret)
{
	struct mobj *o = token;
	uint8_t want = 0;

	if (o->id != GIVE_ID)
		return 1;
	for (uint64_t b = off >> GIVE_SHIFT; b <= (off + len - 1) >> GIVE_SHIFT; b++)
		want |= (uint8_t)(1 << b);
	if (!(given6 & want)) {
		given6 |= want;
		return 1;
	}
	ret->flags = TRANSPORT_HAVE_SEALED;
	ret->shift = GIVE_SHIFT;
	ret->nblocks = 4;
	ret->fetching[0] = given6;
	return 0;
}

/* A server of the v2 source (its have() hook if @with_have) speaking wire
 * versions up to @wire_max, with @slots and @bwlimit; its address into
 * @addr. */
static struct transport *psrv_new_cfg(unsigned wire_max, bool with_have, unsigned slots,
				      uint64_t bwlimit, char *addr, size_t size)
{
	struct transport_config cfg = {.node = "psrv",
				       .listen_host = "127.0.0.1",
				       .io_timeout_ms = 1000,
				       .serve_slots = slots,
				       .serve_bwlimit = bwlimit};
	struct transport_source s = {.open = msrc_open,
				     .iov = psrc_iov,
				     .close = msrc_close,
				     .have = with_have ? psrc_have : NULL,
				     .wait = with_have ? psrc_wait : NULL,
				     .give = with_have ? psrc_give : NULL,
				     .ctx = &src};
	struct transport *t = transport_new(&cfg, NULL);

	if (!t)
		return NULL;
	t->wire_max = wire_max;
	if (transport_serve(t, &s) || transport_addr(t, addr, size)) {
		transport_free(t);
		return NULL;
	}
	return t;
}

static struct transport *psrv_new(unsigned wire_max, bool with_have, char *addr, size_t size)
{
	return psrv_new_cfg(wire_max, with_have, 0, 0, addr, size);
}

/* Object 5 held in blocks 0-2 and 5, block 3 being fetched. */
static void part_setup(void)
{
	pthread_mutex_lock(&part.lock);
	part.id = 5;
	memset(part.have, 0, sizeof(part.have));
	memset(part.fetching, 0, sizeof(part.fetching));
	atomic_store(&part.asked, 0);
	atomic_store(&part.bad_iov, 0);
	atomic_store(&part.waits, 0);
	part.nblocks = (uint32_t)((obj(5)->size + (1 << PART_SHIFT) - 1) >> PART_SHIFT);
	part.have[0] = 0x27;
	part.fetching[0] = 0x08;
	pthread_mutex_unlock(&part.lock);
}

/* Fetch [off, off+len) of @id from a peer whose card says @caps, with
 * @flags; the bytes are checked when it worked (-EBADMSG if wrong). */
static int fetch_v2(struct transport *c, const char *caps, const char *addr, uint64_t id,
		    uint64_t off, uint64_t len, unsigned flags, struct transport_have *have_out)
{
	uint8_t *buf = malloc(len ? len : 1);
	struct iovec v = {.iov_base = buf, .iov_len = len};
	struct transport_req req = {.peer = "psrv",
				    .addr = addr,
				    .caps = caps,
				    .flags = flags,
				    .have_out = have_out,
				    .id = id,
				    .off = off,
				    .len = len,
				    .iov = &v,
				    .iovcnt = 1};
	int err = transport_fetch(c, &req);

	if (!err && len && memcmp(buf, obj(id)->data + off, len))
		err = -EBADMSG;
	free(buf);
	return err;
}

/* Is @h what the v2 source says of object 5? */
static bool have_is_part(const struct transport_have *h)
{
	return h->shift == PART_SHIFT && h->flags == 0 && h->nblocks == 10 &&
	       !memcmp(h->have, part.have, sizeof(h->have)) &&
	       !memcmp(h->fetching, part.fetching, sizeof(h->fetching));
}

TEST(v2_partial)
{
	struct transport *s, *c = client_new("c-v2", NULL, 0, 0);
	struct transport_have h;
	char addr[64];
	const uint64_t B = 1 << PART_SHIFT;
	uint64_t served;

	part_setup();
	s = psrv_new(WIRE_V2, true, addr, sizeof(addr));
	CHECK(s != NULL);
	if (!s)
		return;
	CHECK_STR(transport_caps(s), "tcp,fan1,fan2");
	/* held: the bytes, whatever the flags */
	CHECK_EQ(fetch_v2(c, "tcp,fan1", addr, 5, 0, 3 * B, TRANSPORT_F_PARTIAL_OK, NULL), 0);
	CHECK_EQ(fetch_v2(c, "tcp,fan1", addr, 5, 5 * B + 1, 100, 0, NULL), 0);
	/* not all held, PARTIAL_OK: "not yet", and what it has */
	memset(&h, 0xee, sizeof(h));
	CHECK_EQ(fetch_v2(c, "tcp,fan1", addr, 5, 2 * B, 2 * B, TRANSPORT_F_PARTIAL_OK, &h),
		 -EAGAIN);
	CHECK(have_is_part(&h));
	CHECK_EQ(h.load, 0);
	CHECK_EQ(fetch_v2(c, "tcp,fan1", addr, 5, 9 * B, 7, TRANSPORT_F_PARTIAL_OK, NULL), -EAGAIN);
	/* without it: ENOENT, as to any peer */
	CHECK_EQ(fetch_v2(c, "tcp,fan1", addr, 5, 3 * B, 1, 0, NULL), -ENOENT);
	/* WANT_HAVE: the HAVE, then the bytes */
	memset(&h, 0, sizeof(h));
	CHECK_EQ(fetch_v2(c, "tcp,fan1", addr, 5, B, B + 5, TRANSPORT_F_WANT_HAVE, &h), 0);
	CHECK(have_is_part(&h));
	CHECK_EQ(fetch_v2(c, "tcp,fan1", addr, 5, 4 * B, 1, TRANSPORT_F_WANT_HAVE, &h), -ENOENT);
	CHECK_EQ(fetch_v2(c, "tcp,fan1", addr, 5, 4 * B, 1,
			  TRANSPORT_F_WANT_HAVE | TRANSPORT_F_PARTIAL_OK, &h),
		 -EAGAIN);
	/* a query: length 0, only the HAVE, even of blocks it lacks */
	memset(&h, 0, sizeof(h));
	CHECK_EQ(fetch_v2(c, "tcp,fan1", addr, 5, 9 * B, 0, TRANSPORT_F_WANT_HAVE, &h), 0);
	CHECK(have_is_part(&h));
	memset(&h, 0, sizeof(h));
	CHECK_EQ(fetch_v2(c, "tcp,fan1", addr, 4, 0, 0, TRANSPORT_F_WANT_HAVE, &h), 0);
	CHECK(h.flags == TRANSPORT_HAVE_SEALED && h.nblocks == 0);
	CHECK_EQ(fetch_v2(c, "tcp,fan1", addr, 99, 0, 0, TRANSPORT_F_WANT_HAVE, &h), -ENOENT);
	/* a whole sealed object with WANT_HAVE, over several GETs */
	c->get_max = 300 * KiB;
	memset(&h, 0, sizeof(h));
	CHECK_EQ(fetch_v2(c, "tcp,fan1", addr, 4, 0, obj(4)->size, TRANSPORT_F_WANT_HAVE, &h), 0);
	CHECK(h.flags == TRANSPORT_HAVE_SEALED);
	c->get_max = WIRE_LEN_MAX;
	/* every answer kept the one connection in step; no byte it lacks left */
	CHECK_EQ(stats(s).conns_accepted, 1);
	CHECK_EQ(stats(c).conns_open, 1);
	CHECK_EQ(stats(s).bad_frames, 0);
	CHECK_EQ(atomic_load(&part.bad_iov), 0);
	CHECK(atomic_load(&part.asked) >= 12);
	served = stats(s).requests_served;
	CHECK_EQ(served, stats(c).requests_sent);
	transport_free(c);
	transport_free(s);
}

/* A peer whose card lacks "fan1" (or a client that predates it) gets
 * version 1: PARTIAL_OK means nothing, a range not held is ENOENT, and
 * no byte of it goes out. */
TEST(v2_v1_client)
{
	struct transport *s, *c = client_new("c-v1", NULL, 0, 0), *old;
	struct transport_have h;
	struct wire_msg m;
	char addr[64];
	const uint64_t B = 1 << PART_SHIFT;
	int fd;

	part_setup();
	s = psrv_new(WIRE_V2, true, addr, sizeof(addr));
	CHECK(s != NULL);
	if (!s)
		return;
	CHECK_EQ(fetch_v2(c, "tcp", addr, 5, 0, 3 * B, TRANSPORT_F_PARTIAL_OK, NULL), 0);
	CHECK_EQ(fetch_v2(c, "tcp", addr, 5, 0, 4 * B, TRANSPORT_F_PARTIAL_OK, NULL), -ENOENT);
	CHECK_EQ(fetch_v2(c, NULL, addr, 5, 9 * B, 1, TRANSPORT_F_PARTIAL_OK, NULL), -ENOENT);
	CHECK_EQ(fetch_v2(c, "tcp", addr, 5, 0, 1, TRANSPORT_F_WANT_HAVE, &h), -EOPNOTSUPP);
	/* a client that speaks version 1 only, whatever the card says */
	old = client_new("c-old", NULL, 0, 0);
	old->wire_max = WIRE_V1;
	CHECK(!transport_speaks_fan1(old, "tcp,fan1"));
	CHECK_EQ(fetch_v2(old, "tcp,fan1", addr, 5, 0, 4 * B, TRANSPORT_F_PARTIAL_OK, NULL),
		 -ENOENT);
	CHECK_EQ(fetch_v2(old, "tcp,fan1", addr, 5, 5 * B, 10, 0, NULL), 0);
	transport_free(old);
	/* on the wire: a version 1 GET of a range not held is ERR ENOENT */
	fd = raw_connect(addr);
	raw_hello(fd, 0);
	CHECK_EQ(raw_recv_msg(fd, &m), WIRE_HDR_LEN);
	CHECK(m.type == WIRE_READY && m.ver == WIRE_V1);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_GET;
	m.reqid = 1;
	m.id = 5;
	m.off = 3 * B;
	m.len = 1;
	raw_send_msg(fd, &m);
	CHECK_EQ(raw_recv_msg(fd, &m), WIRE_HDR_LEN);
	CHECK(m.type == WIRE_ERR && m.status == ENOENT && m.ver == WIRE_V1);
	/* and version 2 within a version 1 connection closes it */
	memset(&m, 0, sizeof(m));
	m.ver = WIRE_V2;
	m.type = WIRE_GET;
	m.id = 5;
	raw_send_msg(fd, &m);
	raw_expect_close(fd);
	CHECK_EQ(stats(s).bad_frames, 1);
	CHECK_EQ(atomic_load(&part.bad_iov), 0);
	transport_free(c);
	transport_free(s);
}

/* A node from before version 2 (wire_max 1, no have(), no "fan1"): a
 * client that follows its card speaks version 1 to it and is served; a
 * version 2 HELLO is closed as malformed, as such a node does. */
TEST(v2_old_server)
{
	struct transport *s, *c = client_new("c-new", NULL, 0, 0);
	struct transport_have h;
	char addr[64];
	int fd;

	s = psrv_new(WIRE_V1, false, addr, sizeof(addr));
	CHECK(s != NULL);
	if (!s)
		return;
	CHECK_STR(transport_caps(s), "tcp");
	CHECK_EQ(
	    fetch_v2(c, transport_caps(s), addr, 5, 0, obj(5)->size, TRANSPORT_F_PARTIAL_OK, NULL),
	    0);
	CHECK_EQ(fetch_v2(c, transport_caps(s), addr, 99, 0, 1, TRANSPORT_F_PARTIAL_OK, NULL),
		 -ENOENT);
	CHECK_EQ(fetch_v2(c, transport_caps(s), addr, 4, 0, 0, TRANSPORT_F_WANT_HAVE, &h),
		 -EOPNOTSUPP);
	CHECK_EQ(stats(s).bad_frames, 0);
	fd = raw_connect(addr);
	{
		struct wire_msg m = {.ver = WIRE_V2, .type = WIRE_HELLO};

		strcpy(m.node, "raw");
		raw_send_msg(fd, &m);
	}
	raw_expect_close(fd);
	CHECK_EQ(stats(s).bad_frames, 1);
	/* a card that wrongly claims "fan1" fails the fetch, never the server */
	CHECK(fetch_v2(c, "tcp,fan1", addr, 5, 0, 10, 0, NULL) < 0);
	CHECK_EQ(fetch_v2(c, "tcp", addr, 5, 0, 10, 0, NULL), 0);
	transport_free(c);
	transport_free(s);
}

/* WANT_HAVE on the wire: HAVE (marked "DATA follows") comes before the
 * DATA header and its bytes; a HAVE alone leaves the connection in step;
 * every reply is in version 2. */
TEST(v2_want_have_order)
{
	struct transport *s;
	struct wire_msg m;
	char addr[64];
	uint8_t got[100];
	const uint64_t B = 1 << PART_SHIFT;
	int fd;

	part_setup();
	s = psrv_new(WIRE_V2, true, addr, sizeof(addr));
	CHECK(s != NULL);
	if (!s)
		return;
	fd = raw_connect(addr);
	memset(&m, 0, sizeof(m));
	m.ver = WIRE_V2;
	m.type = WIRE_HELLO;
	strcpy(m.node, "raw2");
	raw_send_msg(fd, &m);
	CHECK_EQ(raw_recv_msg(fd, &m), WIRE_HDR_LEN);
	CHECK(m.type == WIRE_READY && m.ver == WIRE_V2 && m.status == 0);

	memset(&m, 0, sizeof(m));
	m.ver = WIRE_V2;
	m.type = WIRE_GET;
	m.flags = WIRE_F_WANT_HAVE;
	m.reqid = 11;
	m.id = 5;
	m.off = 5 * B;
	m.len = sizeof(got);
	raw_send_msg(fd, &m);
	CHECK_EQ(raw_recv_msg(fd, &m), WIRE_HDR_LEN + WIRE_HAVE_FIXED + 4);
	CHECK(m.type == WIRE_HAVE && m.ver == WIRE_V2 && m.flags == WIRE_F_HAVE_DATA);
	CHECK(m.reqid == 11 && m.id == 5 && m.off == 5 * B);
	CHECK(have_is_part(&m.have));
	CHECK_EQ(raw_recv_msg(fd, &m), WIRE_HDR_LEN);
	CHECK(m.type == WIRE_DATA && m.ver == WIRE_V2 && m.flags == 0);
	CHECK(m.reqid == 11 && m.len == sizeof(got));
	CHECK_EQ(recv(fd, got, sizeof(got), MSG_WAITALL), (ssize_t)sizeof(got));
	CHECK(!memcmp(got, obj(5)->data + 5 * B, sizeof(got)));

	/* PARTIAL_OK for a block it lacks: a HAVE alone */
	memset(&m, 0, sizeof(m));
	m.ver = WIRE_V2;
	m.type = WIRE_GET;
	m.flags = WIRE_F_PARTIAL_OK;
	m.reqid = 12;
	m.id = 5;
	m.off = 3 * B;
	m.len = 10;
	raw_send_msg(fd, &m);
	CHECK(raw_recv_msg(fd, &m) > WIRE_HDR_LEN);
	CHECK(m.type == WIRE_HAVE && m.flags == 0 && m.reqid == 12);
	/* still in step: the next GET is answered */
	memset(&m, 0, sizeof(m));
	m.ver = WIRE_V2;
	m.type = WIRE_GET;
	m.reqid = 13;
	m.id = 2;
	m.len = 1;
	raw_send_msg(fd, &m);
	CHECK_EQ(raw_recv_msg(fd, &m), WIRE_HDR_LEN);
	CHECK(m.type == WIRE_DATA && m.reqid == 13 && m.ver == WIRE_V2);
	CHECK_EQ(recv(fd, got, 1, MSG_WAITALL), 1);
	CHECK_EQ(got[0], obj(2)->data[0]);
	/* a version 1 GET on this version 2 connection closes it */
	memset(&m, 0, sizeof(m));
	m.type = WIRE_GET;
	m.id = 2;
	raw_send_msg(fd, &m);
	raw_expect_close(fd);
	CHECK_EQ(stats(s).bad_frames, 1);
	CHECK_EQ(atomic_load(&part.bad_iov), 0);
	transport_free(s);
}

/*
 * A man in the middle turns a version 2 HELLO into version 1 and the
 * answer back: with a secret the proofs cover the version, so the client
 * refuses the server.  Driven through the handshake state machines.
 */
TEST(v2_downgrade)
{
	struct transport *s = client_new("srv", secret_a, sizeof(secret_a) - 1, 0);
	struct transport *c = client_new("c-mitm", secret_a, sizeof(secret_a) - 1, 0);
	struct wire_msg hello, reply, auth;
	struct auth_srv as;
	struct auth_cli ac;
	bool close_after;

	/* untouched, version 2 gets through */
	transport_auth_srv_init(&as, true);
	CHECK_EQ(transport_auth_cli_hello(c, &ac, WIRE_V2, &hello), 0);
	CHECK_EQ(transport_auth_srv_step(s, &as, &hello, &reply, &close_after), 0);
	CHECK(reply.type == WIRE_CHALLENGE && reply.ver == WIRE_V2);
	CHECK_EQ(transport_auth_cli_step(c, &ac, &reply, &auth), 1);
	CHECK_EQ(auth.ver, WIRE_V2);
	CHECK_EQ(transport_auth_srv_step(s, &as, &auth, &reply, &close_after), 0);
	CHECK(reply.type == WIRE_READY && reply.status == 0 && !close_after);
	CHECK_EQ(transport_auth_cli_step(c, &ac, &reply, &auth), 0);

	/* downgraded on the way in, restored on the way out */
	transport_auth_srv_init(&as, true);
	CHECK_EQ(transport_auth_cli_hello(c, &ac, WIRE_V2, &hello), 0);
	hello.ver = WIRE_V1;
	CHECK_EQ(transport_auth_srv_step(s, &as, &hello, &reply, &close_after), 0);
	CHECK_EQ(reply.ver, WIRE_V1);
	reply.ver = WIRE_V2;
	CHECK_EQ(transport_auth_cli_step(c, &ac, &reply, &auth), 1);
	CHECK(ac.refused);
	auth.ver = WIRE_V1;
	CHECK_EQ(transport_auth_srv_step(s, &as, &auth, &reply, &close_after), 0);
	CHECK(reply.status == EACCES && close_after);
	reply.ver = WIRE_V2;
	CHECK_EQ(transport_auth_cli_step(c, &ac, &reply, &auth), -EACCES);
	/* not restored: an answer in another version is malformed */
	transport_auth_srv_init(&as, true);
	CHECK_EQ(transport_auth_cli_hello(c, &ac, WIRE_V2, &hello), 0);
	hello.ver = WIRE_V1;
	CHECK_EQ(transport_auth_srv_step(s, &as, &hello, &reply, &close_after), 0);
	CHECK_EQ(transport_auth_cli_step(c, &ac, &reply, &auth), -EPROTO);
	/* a transport that speaks version 1 only takes no version 2 HELLO */
	s->wire_max = WIRE_V1;
	transport_auth_srv_init(&as, true);
	CHECK_EQ(transport_auth_cli_hello(c, &ac, WIRE_V2, &hello), 0);
	CHECK_EQ(transport_auth_srv_step(s, &as, &hello, &reply, &close_after), -EPROTO);
	CHECK_EQ(transport_auth_cli_hello(s, &ac, WIRE_V2, &hello), -EINVAL);
	transport_free(c);
	transport_free(s);
}

/* ---- a fake version 2 server that answers one GET wrongly ---- */

enum fake2_mode {
	FAKE2_HAVE_UNASKED, /* a HAVE alone, to a GET with no flags */
	FAKE2_HAVE_DATA,    /* "DATA follows" to a GET without WANT_HAVE */
	FAKE2_NO_HAVE,	    /* DATA without the HAVE WANT_HAVE asked for */
	FAKE2_V1_REPLY,	    /* a version 1 DATA on a version 2 connection */
	FAKE2_V1_READY,	    /* READY in version 1 to a version 2 HELLO */
	FAKE2_HAVE_DATA_OK, /* HAVE then DATA, as asked: the control */
};

struct fake2 {
	int lfd;
	enum fake2_mode mode;
	pthread_t th;
	char addr[64];
};

/* Send @m, whether or not the client is still there (it may have hung
 * up on an earlier message, as it should). */
static void quiet_send_msg(int fd, const struct wire_msg *m)
{
	uint8_t buf[WIRE_MSG_MAX_V2];
	int n = transport_wire_encode(m, buf, sizeof(buf));

	CHECK(n > 0);
	if (n > 0)
		(void)!send(fd, buf, (size_t)n, MSG_NOSIGNAL);
}

static void *fake2_thread(void *arg)
{
	struct fake2 *f = arg;
	static uint8_t payload[64];
	struct wire_msg m, get;
	int fd = accept(f->lfd, NULL, NULL);

	if (fd < 0)
		return NULL;
	if (raw_recv_msg(fd, &m) <= 0 || m.type != WIRE_HELLO)
		goto out;
	memset(&m, 0, sizeof(m));
	m.ver = f->mode == FAKE2_V1_READY ? WIRE_V1 : WIRE_V2;
	m.type = WIRE_READY;
	quiet_send_msg(fd, &m);
	if (raw_recv_msg(fd, &get) != WIRE_HDR_LEN || get.type != WIRE_GET)
		goto out;
	memset(&m, 0, sizeof(m));
	m.ver = WIRE_V2;
	m.type = WIRE_HAVE;
	m.reqid = get.reqid;
	m.id = get.id;
	m.off = get.off;
	m.have.flags = TRANSPORT_HAVE_SEALED;
	if (f->mode == FAKE2_HAVE_DATA || f->mode == FAKE2_HAVE_DATA_OK)
		m.flags = WIRE_F_HAVE_DATA;
	if (f->mode != FAKE2_NO_HAVE && f->mode != FAKE2_V1_REPLY)
		quiet_send_msg(fd, &m);
	if (f->mode != FAKE2_HAVE_UNASKED) {
		m = get;
		m.flags = 0;
		m.type = WIRE_DATA;
		if (f->mode == FAKE2_V1_REPLY)
			m.ver = WIRE_V1;
		quiet_send_msg(fd, &m);
		(void)!send(fd, payload, (size_t)get.len, MSG_NOSIGNAL);
	}
	/* wait for the client to close */
	(void)raw_until_closed(fd, NULL, 0);
out:
	close(fd);
	return NULL;
}

/* One fetch of 64 bytes with @flags from a fake server in @mode. */
static int fake2_fetch(enum fake2_mode mode, unsigned flags)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	struct transport *c = client_new("c-fake2", NULL, 0, 1000);
	struct transport_have h;
	struct fake2 f = {.mode = mode};
	int err;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(!bind(f.lfd, (struct sockaddr *)&sa, sizeof(sa)));
	CHECK(!listen(f.lfd, 4));
	getsockname(f.lfd, (struct sockaddr *)&sa, &len);
	snprintf(f.addr, sizeof(f.addr), "127.0.0.1:%u", ntohs(sa.sin_port));
	pthread_create(&f.th, NULL, fake2_thread, &f);
	{
		uint8_t buf[64];
		struct iovec v = {.iov_base = buf, .iov_len = sizeof(buf)};
		struct transport_req req = {.peer = "fake2",
					    .addr = f.addr,
					    .caps = "tcp,fan1",
					    .flags = flags,
					    .have_out = &h,
					    .id = 1,
					    .len = sizeof(buf),
					    .iov = &v,
					    .iovcnt = 1};

		err = transport_fetch(c, &req);
	}
	transport_free(c); /* closes the connection: the fake thread ends */
	pthread_join(f.th, NULL);
	close(f.lfd);
	return err;
}

/* The client takes a HAVE only where its GET allowed one, and only
 * replies in its connection's version. */
TEST(v2_bad_replies)
{
	CHECK_EQ(fake2_fetch(FAKE2_HAVE_DATA_OK, TRANSPORT_F_WANT_HAVE), 0);
	CHECK_EQ(fake2_fetch(FAKE2_HAVE_UNASKED, 0), -EPROTO);
	CHECK_EQ(fake2_fetch(FAKE2_HAVE_DATA, TRANSPORT_F_PARTIAL_OK), -EPROTO);
	CHECK_EQ(fake2_fetch(FAKE2_NO_HAVE, TRANSPORT_F_WANT_HAVE), -EPROTO);
	CHECK_EQ(fake2_fetch(FAKE2_V1_REPLY, 0), -EPROTO);
	CHECK_EQ(fake2_fetch(FAKE2_V1_READY, 0), -EPROTO);
}

/* A fetch of [off, off+len) of object @id in a thread of its own. */
struct bg_fetch {
	struct transport *c;
	const char *caps, *addr;
	uint64_t id, off, len;
	unsigned flags;
	pthread_t th;
	int result;
};

static void *bg_main(void *arg)
{
	struct bg_fetch *b = arg;

	b->result = fetch_v2(b->c, b->caps, b->addr, b->id, b->off, b->len, b->flags, NULL);
	return NULL;
}

/* Wait (at most 5 s) until @s has sent some bytes of a GET. */
static bool sending(struct transport *s, uint64_t before)
{
	for (int i = 0; i < 500; i++) {
		if (stats(s).bytes_sent > before)
			return true;
		usleep(10000);
	}
	return false;
}

/* serve_slots 1: while one fan-out GET (BUSY_OK) sends, another is told
 * "busy" (with when to ask again), every other GET is served, and a
 * query is answered; once the slot is free, the same GET is served.  A
 * plain GET takes no slot. */
TEST(v2_busy)
{
	struct transport *s, *c = client_new("c-busy", NULL, 0, 0);
	struct transport *c2 = client_new("c-busy2", NULL, 0, 0);
	const uint64_t B = 1 << PART_SHIFT;
	struct bg_fetch bg;
	struct transport_have h;
	const char *caps;
	char addr[64];

	part_setup();
	/* 2 MiB/s: the first GET, 1 MiB of object 4, takes about half a second */
	s = psrv_new_cfg(WIRE_V2, true, 1, 2 * MiB, addr, sizeof(addr));
	CHECK(s != NULL);
	if (!s)
		return;
	caps = transport_caps(s);
	CHECK_STR(caps, "tcp,fan1,fan2");
	CHECK(transport_speaks_fan2(c, caps) && !transport_speaks_fan2(c, "tcp,fan1"));
	bg = (struct bg_fetch){.c = c2,
			       .caps = caps,
			       .addr = addr,
			       .id = 4,
			       .len = obj(4)->size,
			       .flags = TRANSPORT_F_BUSY_OK};
	pthread_create(&bg.th, NULL, bg_main, &bg);
	CHECK(sending(s, 0));
	memset(&h, 0, sizeof(h));
	CHECK_EQ(fetch_v2(c, caps, addr, 5, 0, B, TRANSPORT_F_BUSY_OK | TRANSPORT_F_WANT_HAVE, &h),
		 -EAGAIN);
	CHECK(h.flags & TRANSPORT_HAVE_BUSY);
	/* the rest of 1 MiB at 2 MiB/s: at most half a second, spread */
	CHECK(h.retry_ms >= 1 && h.retry_ms <= 900);		     /* (times 1 to 1.5) */
	CHECK(h.nblocks == 10 && bit(h.have, 0) && !bit(h.have, 3)); /* what it has, too */
	CHECK_EQ(stats(s).busy_sent, 1);
	CHECK_EQ(stats(c).busy_received, 1);
	/* a partial GET it cannot serve is "not yet", not "busy" */
	memset(&h, 0, sizeof(h));
	CHECK_EQ(
	    fetch_v2(c, caps, addr, 5, 3 * B, 1, TRANSPORT_F_BUSY_OK | TRANSPORT_F_PARTIAL_OK, &h),
	    -EAGAIN);
	CHECK(!(h.flags & TRANSPORT_HAVE_BUSY) && h.retry_ms == 0);
	/* a query is answered */
	CHECK_EQ(fetch_v2(c, caps, addr, 5, 0, 0, TRANSPORT_F_WANT_HAVE | TRANSPORT_F_BUSY_OK, &h),
		 0);
	CHECK(!(h.flags & TRANSPORT_HAVE_BUSY));
	/* a plain GET is served at once, sharing the rate */
	CHECK_EQ(fetch_v2(c, caps, addr, 6, 0, obj(6)->size, 0, NULL), 0);
	pthread_join(bg.th, NULL);
	CHECK_EQ(bg.result, 0);
	/* the slot is free: served */
	CHECK_EQ(fetch_v2(c, caps, addr, 5, 0, 64 * KiB, TRANSPORT_F_BUSY_OK, NULL), 0);
	CHECK_EQ(stats(s).busy_sent, 1);
	/* while a plain GET sends, the slot is still free */
	bg.flags = 0;
	pthread_create(&bg.th, NULL, bg_main, &bg);
	CHECK(sending(s, stats(s).bytes_sent));
	CHECK_EQ(fetch_v2(c, caps, addr, 5, 0, 64 * KiB, TRANSPORT_F_BUSY_OK, NULL), 0);
	pthread_join(bg.th, NULL);
	CHECK_EQ(bg.result, 0);
	CHECK_EQ(stats(s).busy_sent, 1);
	CHECK_EQ(stats(s).bad_frames, 0);
	CHECK_EQ(atomic_load(&part.bad_iov), 0);
	transport_free(c);
	transport_free(c2);
	transport_free(s);
}

static void *finish_block3(void *arg)
{
	usleep(200 * 1000);
	pthread_mutex_lock(&part.lock);
	part.have[0] |= 0x08;
	part.fetching[0] &= (uint8_t)~0x08;
	pthread_mutex_unlock(&part.lock);
	return arg;
}

/* PARK: a GET for a block being fetched there is answered once the block
 * is in; one for a block not arriving is "not yet" at once; one whose
 * block never comes is "not yet" after the server's bound, before the
 * client gives up. */
TEST(v2_park)
{
	struct transport *s, *c = client_new("c-park", NULL, 0, 0);
	const uint64_t B = 1 << PART_SHIFT;
	const unsigned fl = TRANSPORT_F_PARTIAL_OK | TRANSPORT_F_PARK;
	struct transport_have h;
	pthread_t th;
	int64_t t0;
	char addr[64];

	part_setup();
	s = psrv_new(WIRE_V2, true, addr, sizeof(addr));
	CHECK(s != NULL);
	if (!s)
		return;
	pthread_create(&th, NULL, finish_block3, NULL);
	CHECK_EQ(fetch_v2(c, "tcp,fan1,fan2", addr, 5, 3 * B, B, fl, NULL), 0);
	pthread_join(th, NULL);
	CHECK_EQ(stats(s).parked, 1);
	/* block 4: not held, not arriving */
	t0 = util_mono_ns();
	CHECK_EQ(fetch_v2(c, "tcp,fan1,fan2", addr, 5, 4 * B, B, fl, &h), -EAGAIN);
	CHECK(util_mono_ns() - t0 < 400 * 1000000LL);
	/* block 6 arrives, but never checks out: io_timeout 1000 ms, half of it */
	pthread_mutex_lock(&part.lock);
	part.fetching[0] |= 0x40;
	pthread_mutex_unlock(&part.lock);
	t0 = util_mono_ns();
	CHECK_EQ(fetch_v2(c, "tcp,fan1,fan2", addr, 5, 6 * B, B, fl, &h), -EAGAIN);
	CHECK(util_mono_ns() - t0 >= 450 * 1000000LL);
	CHECK(bit(h.fetching, 6) && !bit(h.have, 6));
	/* without PARK, or without "fan2" on the card: "not yet" at once */
	t0 = util_mono_ns();
	CHECK_EQ(fetch_v2(c, "tcp,fan1,fan2", addr, 5, 6 * B, B, TRANSPORT_F_PARTIAL_OK, NULL),
		 -EAGAIN);
	CHECK_EQ(fetch_v2(c, "tcp,fan1", addr, 5, 6 * B, B, fl, NULL), -EAGAIN);
	CHECK(util_mono_ns() - t0 < 400 * 1000000LL);
	CHECK_EQ(stats(s).parked, 3);
	CHECK_EQ(stats(c).conns_open, 1); /* all in step on one connection */
	CHECK_EQ(atomic_load(&part.bad_iov), 0);
	transport_free(c);
	transport_free(s);
}

/* A sealed holder sends each block once to the fan-out GETs (BUSY_OK
 * and PARTIAL_OK); a second one is told who has it ("given out", as
 * fetching), and a plain or late GET is always served. */
TEST(v2_given)
{
	struct transport *s, *c = client_new("c-given", NULL, 0, 0);
	const unsigned fan = TRANSPORT_F_BUSY_OK | TRANSPORT_F_PARTIAL_OK | TRANSPORT_F_WANT_HAVE;
	const uint64_t B = 1 << GIVE_SHIFT;
	struct transport_have h;
	const char *caps = "tcp,fan1,fan2";
	char addr[64];

	part_setup();
	given6 = 0;
	s = psrv_new(WIRE_V2, true, addr, sizeof(addr));
	CHECK(s != NULL);
	if (!s)
		return;
	CHECK_EQ(fetch_v2(c, caps, addr, GIVE_ID, 0, B, fan, &h), 0);
	CHECK(h.flags == TRANSPORT_HAVE_SEALED); /* nothing given out before it */
	memset(&h, 0, sizeof(h));
	CHECK_EQ(fetch_v2(c, caps, addr, GIVE_ID, 0, B, fan, &h), -EAGAIN);
	CHECK(h.flags == TRANSPORT_HAVE_SEALED && h.nblocks == 4 && h.shift == GIVE_SHIFT);
	CHECK_EQ(h.fetching[0], 0x01);
	CHECK_EQ(stats(s).given_refused, 1);
	/* another block is served; then both are given out */
	CHECK_EQ(fetch_v2(c, caps, addr, GIVE_ID, 2 * B, B, fan, &h), 0);
	CHECK_EQ(fetch_v2(c, caps, addr, GIVE_ID, 2 * B, B, fan, &h), -EAGAIN);
	CHECK_EQ(h.fetching[0], 0x05);
	/* a plain GET, a late one (no BUSY_OK) or one that cannot take a HAVE
	 * alone (no PARTIAL_OK) is served */
	CHECK_EQ(fetch_v2(c, caps, addr, GIVE_ID, 0, B, 0, NULL), 0);
	CHECK_EQ(fetch_v2(c, caps, addr, GIVE_ID, 0, B, TRANSPORT_F_PARTIAL_OK, NULL), 0);
	CHECK_EQ(fetch_v2(c, caps, addr, GIVE_ID, 0, B, TRANSPORT_F_BUSY_OK, NULL), 0);
	/* and a peer without "fan2" never sends BUSY_OK: served */
	CHECK_EQ(fetch_v2(c, "tcp,fan1", addr, GIVE_ID, 0, B, fan, &h), 0);
	CHECK_EQ(stats(s).given_refused, 2);
	CHECK_EQ(stats(s).bad_frames, 0);
	transport_free(c);
	transport_free(s);
}

/* A node of the first version 2 ("fan1" without "fan2") closes a
 * connection that sends BUSY_OK or PARK; a client that follows its card
 * never sends them. */
TEST(v2_fan1_server)
{
	struct transport *s, *c = client_new("c-fan1", NULL, 0, 0);
	const uint64_t B = 1 << PART_SHIFT;
	const unsigned all =
	    TRANSPORT_F_PARTIAL_OK | TRANSPORT_F_WANT_HAVE | TRANSPORT_F_BUSY_OK | TRANSPORT_F_PARK;
	struct transport_have h;
	char addr[64];

	part_setup();
	s = transport_new(&(struct transport_config){.node = "psrv",
						     .listen_host = "127.0.0.1",
						     .io_timeout_ms = 1000,
						     .serve_slots = 1},
			  NULL);
	CHECK(s != NULL);
	if (!s)
		return;
	s->fan2 = false;
	CHECK_EQ(transport_serve(s, &(struct transport_source){.open = msrc_open,
							       .iov = psrc_iov,
							       .close = msrc_close,
							       .have = psrc_have,
							       .ctx = &src}),
		 0);
	CHECK_EQ(transport_addr(s, addr, sizeof(addr)), 0);
	CHECK_STR(transport_caps(s), "tcp,fan1");
	CHECK_EQ(fetch_v2(c, transport_caps(s), addr, 5, 0, 3 * B, all, &h), 0);
	CHECK_EQ(fetch_v2(c, transport_caps(s), addr, 5, 3 * B, B, all, &h), -EAGAIN);
	CHECK_EQ(stats(s).bad_frames, 0);
	/* a card that wrongly claims "fan2": the fetch fails, the server goes on */
	CHECK(fetch_v2(c, "tcp,fan1,fan2", addr, 5, 0, B, all, &h) < 0);
	CHECK(stats(s).bad_frames >= 1); /* (a cached connection is tried, then a new one) */
	CHECK_EQ(fetch_v2(c, transport_caps(s), addr, 5, 0, B, all, &h), 0);
	transport_free(c);
	transport_free(s);
}

int main(void)
{
	harness_begin();

	RUN(v2_partial);
	RUN(v2_v1_client);
	RUN(v2_old_server);
	RUN(v2_want_have_order);
	RUN(v2_downgrade);
	RUN(v2_bad_replies);
	RUN(v2_busy);
	RUN(v2_park);
	RUN(v2_fan1_server);
	RUN(v2_given);
	return harness_end();
}
