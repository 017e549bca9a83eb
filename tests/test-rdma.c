/*
 * test-rdma: the RDMA backend against a real kernel RDMA stack (Soft-RoCE
 * in the test VM: tests/vm/one/10-rdma-transport.sh runs it there with
 * OBJFS_VM_IP set).  Skips where there is no RDMA device or no address
 * to serve on (every host run), and in builds without RDMA.
 *
 * A server transport of mode "auto" (TCP and RDMA) serves objects kept
 * in malloc()ed memory through a source that implements map() and
 * attach(); clients of mode "rdma" and "auto" fetch from it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tap.h"

#ifndef OBJFS_HAVE_RDMA
int main(void)
{
	(void)tap_case;
	tap_skip("objfs was built without RDMA");
	return 0;
}
#else

#include "rdma_i.h"

#define KiB 1024ULL
#define MiB (1024ULL * KiB)
#define NOBJ 10

static const uint8_t secret[] = "test-rdma-cluster-secret-0123456789";

struct obj {
	uint64_t id, size;
	uint8_t *mem;
	int fd;
	void *reg;
	void (*drop)(void *);
};

static struct obj objs[NOBJ];
static atomic_int pins, opens, drops;
static const char *ip;

static int src_open(void *ctx, const char *peer, uint64_t id, uint64_t *ret_size, void **ret)
{
	int i;

	for (i = 0; i < NOBJ; i++)
		if (objs[i].mem && objs[i].id == id) {
			*ret_size = objs[i].size;
			*ret = &objs[i];
			atomic_fetch_add(&pins, 1);
			atomic_fetch_add(&opens, 1);
			return 0;
		}
	return -ENOENT;
}

static int src_iov(void *token, uint64_t off, size_t len, struct iovec *iov, int max,
		   size_t *ret_bytes)
{
	struct obj *o = token;

	iov[0].iov_base = o->mem + off;
	iov[0].iov_len = len;
	*ret_bytes = len;
	return 1;
}

static void src_close(void *token)
{
	atomic_fetch_sub(&pins, 1);
}

static int src_map(void *token, void **ret_addr, uint64_t *ret_len, int *ret_fd)
{
	struct obj *o = token;

	*ret_addr = o->size ? o->mem : NULL;
	*ret_len = o->size;
	*ret_fd = o->fd;
	return 0;
}

/* single-threaded enough for a test: the server serves one connection */
static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;

static int src_attach(void *token, void *reg, void (*drop)(void *), void **ret_cur)
{
	struct obj *o = token;
	int err = 0;

	pthread_mutex_lock(&attach_lock);
	*ret_cur = o->reg;
	if (reg && o->reg)
		err = -EEXIST;
	else if (reg) {
		o->reg = reg;
		o->drop = drop;
	}
	pthread_mutex_unlock(&attach_lock);
	return err;
}

static const struct transport_source source = {
    .open = src_open,
    .iov = src_iov,
    .close = src_close,
    .map = src_map,
    .attach = src_attach,
};

static void objs_make(void)
{
	static const uint64_t sizes[NOBJ] = {
	    0,	     1,	       4 * KiB,	    32 * KiB - 1, 32 * KiB, 32 * KiB + 1,
	    1 * MiB, 64 * MiB, 3 * MiB + 7, 100};
	uint64_t j;
	uint8_t *w;
	int i;

	for (i = 0; i < NOBJ; i++) {
		objs[i].id = 1000 + (uint64_t)i;
		objs[i].size = sizes[i];
		/* like the store: the object's own shared-memory file, mapped
		 * read-only (which kernels before 6.2 cannot register) */
		objs[i].fd = memfd_create("test-rdma", MFD_CLOEXEC);
		if (objs[i].fd < 0 || ftruncate(objs[i].fd, (off_t)(sizes[i] ? sizes[i] : 1)))
			abort();
		w = mmap(NULL, sizes[i] ? sizes[i] : 1, PROT_READ | PROT_WRITE, MAP_SHARED,
			 objs[i].fd, 0);
		if (w == MAP_FAILED)
			abort();
		for (j = 0; j < sizes[i]; j++)
			w[j] = (uint8_t)(j * 7 + (uint64_t)i * 13 + (j >> 12));
		munmap(w, sizes[i] ? sizes[i] : 1);
		objs[i].mem =
		    mmap(NULL, sizes[i] ? sizes[i] : 1, PROT_READ, MAP_SHARED, objs[i].fd, 0);
		if (objs[i].mem == MAP_FAILED)
			abort();
	}
}

static void objs_free(void)
{
	int i;

	for (i = 0; i < NOBJ; i++) {
		if (objs[i].reg) {
			objs[i].drop(objs[i].reg);
			atomic_fetch_add(&drops, 1);
		}
		munmap(objs[i].mem, objs[i].size ? objs[i].size : 1);
		close(objs[i].fd);
		memset(&objs[i], 0, sizeof(objs[i]));
	}
}

static struct transport *server, *client;
static char tcp_addr[TRANSPORT_ADDR_MAX], rdma_addr_s[TRANSPORT_ADDR_MAX];

static struct transport *mk(const char *node, const char *backend, unsigned timeout_ms)
{
	struct transport_config cfg = {
	    .backend = backend,
	    .node = node,
	    .listen_host = ip,
	    .secret = secret,
	    .secret_len = sizeof(secret) - 1,
	    .io_timeout_ms = timeout_ms,
	};
	int err;
	struct transport *t = transport_new(&cfg, &err);

	if (!t)
		fprintf(stderr, "transport_new(%s): %s\n", backend, strerror(-err));
	return t;
}

static struct transport_stats st(struct transport *t)
{
	struct transport_stats s;

	transport_stats(t, &s);
	return s;
}

/* What progress calls a fetch made: never backwards, never past the
 * range, and the last one with the whole range (transport_i.h). */
struct prog {
	uint64_t last;
	unsigned calls;
	bool bad;
};

static void on_progress(void *arg, uint64_t done)
{
	struct prog *p = arg;

	if (done < p->last)
		p->bad = true;
	p->last = done;
	p->calls++;
}

/* Fetch all of object @o through @t into fresh memory and compare, and
 * check what progress said. */
static int fetch_cmp(struct transport *t, const struct obj *o, struct transport_region *region,
		     uint8_t *dst)
{
	bool own = !dst;
	struct iovec iov;
	struct transport_req req = {
	    .peer = "srv",
	    .addr = tcp_addr,
	    .rdma_addr = rdma_addr_s,
	    .region = region,
	    .id = o->id,
	    .len = o->size,
	    .iov = &iov,
	    .iovcnt = 1,
	    .progress = on_progress,
	};
	struct prog pg = {0};
	int err;

	req.arg = &pg;
	if (own)
		dst = calloc(1, o->size ? o->size : 1);
	iov.iov_base = dst;
	iov.iov_len = o->size;
	err = transport_fetch(t, &req);
	if (!err && memcmp(dst, o->mem, o->size))
		err = -EBADMSG;
	if (!err && (pg.bad || !pg.calls || pg.last != o->size)) {
		fprintf(stderr, "progress of object %" PRIu64 ": %u calls, last %" PRIu64 "%s\n",
			o->id, pg.calls, pg.last, pg.bad ? ", went back" : "");
		err = -EPIPE;
	}
	if (own)
		free(dst);
	return err;
}

/* Wait up to @ms for the server to hold no pins. */
static bool unpinned(int ms)
{
	while (atomic_load(&pins) && ms-- > 0)
		usleep(1000);
	return !atomic_load(&pins);
}

TEST(sizes)
{
	struct transport_stats a, b;
	int i;

	for (i = 0; i < NOBJ; i++) {
		a = st(client);
		CHECK_EQ(fetch_cmp(client, &objs[i], NULL, NULL), 0);
		b = st(client);
		if (objs[i].size <= 32 * KiB)
			CHECK(b.fetch_eager == a.fetch_eager + 1 && b.fetch_rdv == a.fetch_rdv);
		else
			CHECK(b.fetch_rdv == a.fetch_rdv + 1 && b.fetch_eager == a.fetch_eager);
		CHECK(b.fetch_tcp == a.fetch_tcp);
	}
	CHECK(unpinned(1000));
	CHECK_EQ(st(client).rdma_conns, 1);
	CHECK_EQ(st(client).rdma_fallbacks, 0);
}

TEST(ranges)
{
	const struct obj *o = &objs[7]; /* 64 MiB */
	static uint8_t buf[3 * MiB];
	struct iovec iov[2] = {{buf, 100}, {buf + 100, 2 * MiB}};
	struct transport_req req = {.peer = "srv",
				    .addr = tcp_addr,
				    .rdma_addr = rdma_addr_s,
				    .id = o->id,
				    .off = 5 * MiB + 3,
				    .len = 2 * MiB + 100,
				    .iov = iov,
				    .iovcnt = 2};

	CHECK_EQ(transport_fetch(client, &req), 0);
	CHECK(!memcmp(buf, o->mem + req.off, req.len));
	req.len = 20;
	iov[0].iov_len = 20;
	req.iovcnt = 1;
	CHECK_EQ(transport_fetch(client, &req), 0);
	CHECK(!memcmp(buf, o->mem + req.off, 20));
	/* not held, out of range: answers, and the connection stays */
	req.id = 4242;
	CHECK_EQ(transport_fetch(client, &req), -ENOENT);
	req.id = o->id;
	req.off = 64 * MiB - 10;
	CHECK_EQ(transport_fetch(client, &req), -ERANGE);
	iov[0].iov_len = 2 * MiB;
	req.len = 2 * MiB;
	CHECK_EQ(transport_fetch(client, &req), -ERANGE);
	CHECK_EQ(st(client).rdma_conns, 1);
	CHECK(unpinned(1000));
}

TEST(registration_once)
{
	const struct obj *o = &objs[6]; /* 1 MiB */
	struct transport_region *r = NULL;
	uint8_t *dst = aligned_alloc(4096, o->size);
	uint64_t regs;
	int i;

	/* the object's registration was made on its first serve */
	regs = st(server).rdma_regs;
	for (i = 0; i < 5; i++)
		CHECK_EQ(fetch_cmp(client, o, NULL, NULL), 0);
	CHECK_EQ(st(server).rdma_regs, regs);
	/* with a region the client registers nothing per fetch, without one
	 * once per fetch */
	CHECK_EQ(transport_region_new(client, dst, o->size, &r), 0);
	CHECK(r != NULL);
	regs = st(client).rdma_regs;
	for (i = 0; i < 5; i++) {
		memset(dst, 0, o->size);
		CHECK_EQ(fetch_cmp(client, o, r, dst), 0);
	}
	CHECK_EQ(st(client).rdma_regs, regs);
	CHECK_EQ(fetch_cmp(client, o, NULL, dst), 0);
	CHECK_EQ(st(client).rdma_regs, regs + 1);
	transport_region_free(r);
	free(dst);
}

struct many {
	int errors;
	unsigned seed;
};

static void *many_thread(void *arg)
{
	struct many *m = arg;
	int i;

	for (i = 0; i < 40; i++) {
		int k = (int)(rand_r(&m->seed) % 6); /* the small and the medium ones */

		if (fetch_cmp(client, &objs[k == 5 ? 9 : k], NULL, NULL))
			m->errors++;
	}
	return NULL;
}

/* More fetches at once than the connection has credits: they wait for
 * credits, never fail, and share one connection. */
TEST(many_in_flight)
{
	enum { N = 48 };
	pthread_t th[N];
	struct many m[N];
	int i, errors = 0;

	for (i = 0; i < N; i++) {
		m[i] = (struct many){.seed = (unsigned)i + 1};
		pthread_create(&th[i], NULL, many_thread, &m[i]);
	}
	for (i = 0; i < N; i++) {
		pthread_join(th[i], NULL);
		errors += m[i].errors;
	}
	CHECK_EQ(errors, 0);
	CHECK_EQ(st(client).rdma_conns, 1);
	CHECK(unpinned(1000));
}

/* OBJFS_RDMA_PATH forces one path (the benchmark's knob). */
TEST(forced_paths)
{
	struct transport_stats a, b;

	setenv("OBJFS_RDMA_PATH", "eager", 1);
	a = st(client);
	CHECK_EQ(fetch_cmp(client, &objs[8], NULL, NULL), 0); /* 3 MiB + 7 in pieces */
	b = st(client);
	CHECK(b.fetch_eager == a.fetch_eager + 1 && b.fetch_rdv == a.fetch_rdv);
	setenv("OBJFS_RDMA_PATH", "rendezvous", 1);
	CHECK_EQ(fetch_cmp(client, &objs[1], NULL, NULL), 0);
	a = st(client);
	CHECK(a.fetch_rdv == b.fetch_rdv + 1);
	unsetenv("OBJFS_RDMA_PATH");
	CHECK(unpinned(1000));
}

/* A wrong secret is refused over RDMA too. */
TEST(refused)
{
	struct transport_config cfg = {.backend = "rdma", .node = "bad", .io_timeout_ms = 2000};
	static const uint8_t other[] = "another-secret-entirely-0123456789";
	struct transport *t;
	int err;

	cfg.secret = other;
	cfg.secret_len = sizeof(other) - 1;
	t = transport_new(&cfg, &err);
	CHECK(t != NULL);
	if (t)
		CHECK_EQ(fetch_cmp(t, &objs[2], NULL, NULL), -EACCES);
	transport_free(t);
}

/* "auto" falls back to TCP when RDMA does not come up, and remembers. */
TEST(fallback)
{
	struct transport *t = mk("cli2", "auto", 1000);
	char saved[sizeof(rdma_addr_s)];
	struct transport_stats s;

	memcpy(saved, rdma_addr_s, sizeof(saved));
	snprintf(rdma_addr_s, sizeof(rdma_addr_s), "%s:1", ip); /* nobody listens */
	CHECK_EQ(fetch_cmp(t, &objs[7], NULL, NULL), 0);
	CHECK_EQ(fetch_cmp(t, &objs[2], NULL, NULL), 0);
	s = st(t);
	CHECK_EQ(s.rdma_fallbacks, 1); /* the second went straight to TCP */
	CHECK_EQ(s.fetch_tcp, 2);
	CHECK_EQ(s.fetch_eager + s.fetch_rdv, 0);
	memcpy(rdma_addr_s, saved, sizeof(saved));
	transport_free(t);
}

/* A client that never sends FIN: the server unpins at its timeout. */
TEST(no_fin)
{
	struct transport *t = mk("cli3", "rdma", 300);

	CHECK(t != NULL);
	if (!t)
		return;
	transport_rdma_test_no_fin = true;
	CHECK_EQ(fetch_cmp(t, &objs[6], NULL, NULL), 0);
	transport_rdma_test_no_fin = false;
	CHECK(atomic_load(&pins) == 1); /* held for the FIN that never comes */
	CHECK(unpinned(3000));
	transport_free(t);
}

struct slow {
	struct transport *t;
	int err;
	int64_t took_ns;
};

static void *slow_fetch(void *arg)
{
	struct slow *s = arg;
	int64_t t0 = util_mono_ns();

	s->err = fetch_cmp(s->t, &objs[7], NULL, NULL);
	s->took_ns = util_mono_ns() - t0;
	return NULL;
}

/* The server goes away in the middle of a 64 MiB READ: the fetch fails,
 * soon, and does not hang. */
TEST(server_gone_mid_read)
{
	struct slow s = {.t = mk("cli4", "rdma", 1000)};
	pthread_t th;
	uint64_t before;

	CHECK(s.t != NULL);
	if (!s.t)
		return;
	before = st(server).bytes_sent;
	pthread_create(&th, NULL, slow_fetch, &s);
	/* wait until the rendezvous is under way */
	for (int i = 0; i < 5000 && st(server).bytes_sent == before; i++)
		usleep(1000);
	usleep(20000);
	transport_free(server);
	server = NULL;
	pthread_join(th, NULL);
	CHECK(s.err != 0);
	CHECK(s.took_ns < 5000000000LL);
	fprintf(stderr, "fetch with the server gone: %s after %.2f s\n", strerror(-s.err),
		(double)s.took_ns / 1e9);
	transport_free(s.t);
}

/*
 * A node fetching object 7 (64 MiB): a source that holds it in part, in
 * blocks of 1 MiB of which the even ones are verified, in a writable
 * mapping as a pending object's; map() refuses it, as node_source.c's.
 */
#define PART_SHIFT 20
#define PART_BLOCKS 64
static uint8_t *part_mem;

static int psrc_open(void *ctx, const char *peer, uint64_t id, uint64_t *ret_size, void **ret)
{
	return id == objs[7].id ? src_open(ctx, peer, id, ret_size, ret) : -ENOENT;
}

static int psrc_iov(void *token, uint64_t off, size_t len, struct iovec *iov, int max,
		    size_t *ret_bytes)
{
	iov[0].iov_base = part_mem + off;
	iov[0].iov_len = len;
	*ret_bytes = len;
	return 1;
}

static int psrc_have(void *token, uint64_t off, uint64_t len, struct transport_have *ret)
{
	uint64_t b;
	bool all = true;

	ret->shift = PART_SHIFT;
	ret->nblocks = PART_BLOCKS;
	for (b = 0; b < PART_BLOCKS; b += 2)
		ret->have[b / 8] |= (uint8_t)(1u << (b % 8));
	ret->fetching[0] = 0x02; /* block 1 is on its way */
	if (!len)
		return 0;
	for (b = off >> PART_SHIFT; b <= (off + len - 1) >> PART_SHIFT; b++)
		all = all && !(b & 1);
	return all;
}

static int psrc_map(void *token, void **ret_addr, uint64_t *ret_len, int *ret_fd)
{
	return -EOPNOTSUPP; /* a registration would grant every byte */
}

/* Fetch [@off, @off + @len) of object 7 from the partial holder @peer at
 * @rdma (card @caps) into @dst with @flags. */
static int part_fetch(struct transport *t, const char *peer, const char *caps, const char *rdma,
		      uint64_t off, uint64_t len, unsigned flags, struct transport_have *h,
		      uint8_t *dst)
{
	struct iovec iov = {dst, len};
	struct transport_req req = {
	    .peer = peer,
	    .rdma_addr = rdma,
	    .caps = caps,
	    .flags = flags,
	    .have_out = h,
	    .id = objs[7].id,
	    .off = off,
	    .len = len,
	    .iov = &iov,
	    .iovcnt = 1,
	};

	if (h)
		memset(h, 0, sizeof(*h));
	return transport_fetch(t, &req);
}

/* RDMA version 2 ("rfan"): fan-out flags and HAVE answers, and the
 * verified blocks of an object held in part served by rendezvous through
 * a registration of exactly the range, for that GET alone. */
TEST(partial_v2)
{
	const unsigned fan = TRANSPORT_F_PARTIAL_OK | TRANSPORT_F_WANT_HAVE | TRANSPORT_F_BUSY_OK;
	struct transport *ps = mk("part", "rdma", 2000), *old = mk("part1", "rdma", 2000);
	char paddr[TRANSPORT_ADDR_MAX], oaddr[TRANSPORT_ADDR_MAX], caps[64];
	struct transport_source part_source;
	struct transport_have h;
	struct transport_stats a, b;
	uint8_t *dst = malloc(4 * MiB);

	CHECK(ps && old && dst);
	if (!ps || !old || !dst)
		goto out;
	part_source = source;
	part_source.open = psrc_open;
	part_source.iov = psrc_iov;
	part_source.have = psrc_have;
	part_source.map = psrc_map;
	/* (a copy: objs[7].fd went with its registration, see src_map()) */
	part_mem =
	    mmap(NULL, objs[7].size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(part_mem != MAP_FAILED);
	if (part_mem == MAP_FAILED)
		goto out;
	memcpy(part_mem, objs[7].mem, objs[7].size);
	CHECK_EQ(transport_serve(ps, &part_source), 0);
	CHECK_STR(transport_caps(ps), "tcp,rdma,fan1,fan2,rfan");
	CHECK_EQ(transport_addr_of(ps, "rdma", paddr, sizeof(paddr)), 0);
	snprintf(caps, sizeof(caps), "%s", transport_caps(ps));
	CHECK(transport_speaks_fan1(client, caps) && transport_speaks_fan2(client, caps));
	CHECK(!transport_plain_rdma(client, "part", caps, paddr));
	CHECK(transport_plain_rdma(client, "part", "tcp,rdma", paddr));

	/* a verified block, as a fan-out GET: by rendezvous, registered for it */
	a = st(ps);
	CHECK_EQ(part_fetch(client, "part", caps, paddr, 2 * MiB, MiB, fan, &h, dst), 0);
	CHECK(!memcmp(dst, objs[7].mem + 2 * MiB, MiB));
	CHECK_EQ(h.nblocks, 0); /* no HAVE before the bytes over RDMA */
	b = st(ps);
	CHECK_EQ(b.rdma_partial_regs, a.rdma_partial_regs + 1);
	CHECK_EQ(b.bytes_sent, a.bytes_sent + MiB);
	CHECK_EQ(b.rdma_regs_live, 0); /* nothing registered whole */
	/* two verified blocks, and a short range: eager */
	CHECK_EQ(part_fetch(client, "part", caps, paddr, 4 * MiB + 5, 100, fan, &h, dst), 0);
	CHECK(!memcmp(dst, objs[7].mem + 4 * MiB + 5, 100));
	CHECK_EQ(part_fetch(client, "part", caps, paddr, 6 * MiB, 3 * MiB, TRANSPORT_F_PARTIAL_OK,
			    &h, dst),
		 -EAGAIN); /* block 7 is not verified */
	/* a block not verified yet: "not yet", with what it has */
	CHECK_EQ(part_fetch(client, "part", caps, paddr, MiB, MiB, fan | TRANSPORT_F_PARK, &h, dst),
		 -EAGAIN);
	CHECK(h.nblocks == PART_BLOCKS && h.shift == PART_SHIFT &&
	      !(h.flags & TRANSPORT_HAVE_SEALED));
	CHECK(h.have[0] == 0x55 && h.fetching[0] == 0x02);
	CHECK_EQ(part_fetch(client, "part", caps, paddr, MiB, MiB, 0, &h, dst), -ENOENT);
	/* a query */
	CHECK_EQ(part_fetch(client, "part", caps, paddr, 0, 0, TRANSPORT_F_WANT_HAVE, &h, dst), 0);
	CHECK(h.nblocks == PART_BLOCKS && h.have[7] == 0x55);
	CHECK(unpinned(1000));
	b = st(ps);
	CHECK_EQ(b.rdma_partial_regs, a.rdma_partial_regs + 2);
	CHECK_EQ(st(client).fetch_tcp, 0);

	/* a client of version 1 (an old card, no "rfan") gets plain GETs
	 * served all the same; a query needs version 2 */
	CHECK_EQ(part_fetch(client, "part", "tcp,rdma", paddr, 0, MiB, 0, NULL, dst), 0);
	CHECK(!memcmp(dst, objs[7].mem, MiB));
	CHECK_EQ(
	    part_fetch(client, "part", "tcp,rdma", paddr, 0, 0, TRANSPORT_F_WANT_HAVE, &h, dst),
	    -EOPNOTSUPP);

	/* a server of version 1 accepts version 1 only, and says no "rfan" */
	old->rdma->wire_max = RMSG_V1;
	CHECK_EQ(transport_serve(old, &part_source), 0);
	CHECK_STR(transport_caps(old), "tcp,rdma,fan1,fan2");
	CHECK_EQ(transport_addr_of(old, "rdma", oaddr, sizeof(oaddr)), 0);
	CHECK_EQ(part_fetch(client, "part1", transport_caps(old), oaddr, 0, MiB, fan, &h, dst),
		 -EOPNOTSUPP); /* no HAVE from a server of version 1 */
	CHECK_EQ(part_fetch(client, "part1", transport_caps(old), oaddr, 0, MiB,
			    TRANSPORT_F_PARTIAL_OK | TRANSPORT_F_BUSY_OK, &h, dst),
		 0);
	CHECK(!memcmp(dst, objs[7].mem, MiB));
	CHECK(part_fetch(client, "part1", caps, oaddr, 0, MiB, fan, &h, dst) <
	      0); /* a card that lies */
	CHECK(unpinned(1000));
out:
	transport_free(old);
	transport_free(ps);
	if (part_mem && part_mem != MAP_FAILED)
		munmap(part_mem, objs[7].size);
	free(dst);
}

/* The message codec, which needs no device. */
TEST(codec)
{
	struct rmsg m = {.type = RM_GET,
			 .flags = RM_F_EAGER,
			 .credits = 7,
			 .tag = 99,
			 .id = 5,
			 .off = 10,
			 .len = 20};
	uint8_t buf[RMSG_HDR + 64];
	struct rmsg d;

	memset(buf, 0, sizeof(buf));
	transport_rmsg_encode(&m, buf);
	CHECK_EQ(transport_rmsg_decode(buf, RMSG_HDR, &d), 0);
	CHECK(d.type == RM_GET && d.flags == RM_F_EAGER && d.credits == 7 && d.tag == 99);
	CHECK(d.id == 5 && d.off == 10 && d.len == 20);
	CHECK_EQ(transport_rmsg_decode(buf, RMSG_HDR - 1, &d), -EPROTO); /* short */
	CHECK_EQ(transport_rmsg_decode(buf, RMSG_HDR + 1, &d), -EPROTO); /* a GET has no body */
	m.flags = 0x80;							 /* unknown flag */
	transport_rmsg_encode(&m, buf);
	CHECK_EQ(transport_rmsg_decode(buf, RMSG_HDR, &d), -EPROTO);
	m = (struct rmsg){.type = RM_DATA, .len = 40};
	transport_rmsg_encode(&m, buf);
	CHECK_EQ(transport_rmsg_decode(buf, RMSG_HDR + 40, &d), 0);
	CHECK_EQ(transport_rmsg_decode(buf, RMSG_HDR + 39, &d),
		 -EPROTO); /* payload shorter than said */
	m = (struct rmsg){.type = RM_ERR};
	transport_rmsg_encode(&m, buf);
	CHECK_EQ(transport_rmsg_decode(buf, RMSG_HDR, &d), -EPROTO); /* an ERR without an errno */
	m.status = ENOENT;
	transport_rmsg_encode(&m, buf);
	CHECK_EQ(transport_rmsg_decode(buf, RMSG_HDR, &d), 0);
	m = (struct rmsg){.type = RM_GET, .off = UINT64_MAX, .len = 2};
	transport_rmsg_encode(&m, buf);
	CHECK_EQ(transport_rmsg_decode(buf, RMSG_HDR, &d), -EPROTO); /* offset + length overflows */
	m = (struct rmsg){.type = 99};
	transport_rmsg_encode(&m, buf);
	CHECK_EQ(transport_rmsg_decode(buf, RMSG_HDR, &d), -EPROTO);
	m = (struct rmsg){.type = RM_FIN};
	transport_rmsg_encode(&m, buf);
	buf[4] = RMSG_V2 + 1;
	CHECK_EQ(transport_rmsg_decode(buf, RMSG_HDR, &d), -EPROTO); /* another version */
	/* version 2: GET flags (WANT_HAVE only for a query) and HAVE */
	m = (struct rmsg){.type = RM_GET, .flags = RM_F_PARTIAL_OK | RM_F_BUSY_OK, .len = 9};
	transport_rmsg_encode(&m, buf);
	CHECK_EQ(transport_rmsg_decode(buf, RMSG_HDR, &d), -EPROTO); /* not in version 1 */
	m.ver = RMSG_V2;
	transport_rmsg_encode(&m, buf);
	CHECK_EQ(transport_rmsg_decode(buf, RMSG_HDR, &d), 0);
	CHECK(d.ver == RMSG_V2 && d.flags == (RM_F_PARTIAL_OK | RM_F_BUSY_OK));
	m.flags = RM_F_WANT_HAVE;
	transport_rmsg_encode(&m, buf);
	CHECK_EQ(transport_rmsg_decode(buf, RMSG_HDR, &d), -EPROTO); /* a HAVE before bytes */
	m.len = 0;
	transport_rmsg_encode(&m, buf);
	CHECK_EQ(transport_rmsg_decode(buf, RMSG_HDR, &d), 0);
	m = (struct rmsg){.ver = RMSG_V1, .type = RM_HAVE, .len = 40};
	transport_rmsg_encode(&m, buf);
	CHECK_EQ(transport_rmsg_decode(buf, RMSG_HDR + 40, &d), -EPROTO); /* version 1 has none */
	m.ver = RMSG_V2;
	transport_rmsg_encode(&m, buf);
	CHECK_EQ(transport_rmsg_decode(buf, RMSG_HDR + 40, &d), -EPROTO); /* a header alone */
	m.len = 48;
	transport_rmsg_encode(&m, buf);
	CHECK_EQ(transport_rmsg_decode(buf, RMSG_HDR + 40, &d),
		 -EPROTO); /* body shorter than said */
	CHECK_EQ(transport_rdma_wc_errno(IBV_WC_SUCCESS), 0);
	CHECK_EQ(transport_rdma_wc_errno(IBV_WC_RETRY_EXC_ERR), -ETIMEDOUT);
	CHECK_EQ(transport_rdma_wc_errno(IBV_WC_WR_FLUSH_ERR), -ECONNRESET);
	CHECK_EQ(transport_rdma_wc_errno(IBV_WC_REM_ACCESS_ERR), -EPROTO);
}

int main(void)
{
	struct ibv_context **devs;
	int n = 0, err;

	RUN(codec);
	ip = getenv("OBJFS_VM_IP");
	devs = rdma_get_devices(&n);
	if (devs)
		rdma_free_devices(devs);
	if (n <= 0 || !ip) {
		/* the codec ran; the rest needs a device */
		printf("skip: %s\n", n <= 0 ? "no RDMA device" : "no OBJFS_VM_IP to serve on");
		return tap_failed ? 1 : 0;
	}
	objs_make();
	server = mk("srv", "auto", 2000);
	client = mk("cli", "rdma", 2000);
	if (!server || !client)
		return 1;
	err = transport_serve(server, &source);
	if (err) {
		fprintf(stderr, "serve: %s\n", strerror(-err));
		return 1;
	}
	/* "fan1" is TCP's wire version 2, "rfan" RDMA's */
	CHECK_STR(transport_caps(server), "tcp,rdma,fan1,fan2,rfan");
	CHECK(transport_speaks_fan1(server, "tcp,rdma,fan1"));
	CHECK(!transport_speaks_fan1(client, "tcp,rdma,fan1")); /* fetches over RDMA only */
	CHECK_STR(transport_rdma_state(server), "on");
	CHECK_EQ(transport_addr_of(server, "tcp", tcp_addr, sizeof(tcp_addr)), 0);
	CHECK_EQ(transport_addr_of(server, "rdma", rdma_addr_s, sizeof(rdma_addr_s)), 0);
	printf("serving on tcp %s, rdma %s\n", tcp_addr, rdma_addr_s);

	RUN(sizes);
	RUN(ranges);
	RUN(registration_once);
	RUN(many_in_flight);
	RUN(forced_paths);
	RUN(refused);
	RUN(fallback);
	RUN(no_fin);
	RUN(partial_v2);
	RUN(server_gone_mid_read);

	transport_free(client);
	transport_free(server);
	CHECK_EQ(atomic_load(&pins), 0);
	objs_free();
	CHECK(atomic_load(&drops) > 0);
	return tap_done();
}
#endif
