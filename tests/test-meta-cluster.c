/*
 * test-meta-cluster: unit tests of meta's cluster calls: node card
 * capabilities, locating holders, giving up replicas (also racing),
 * members, and the invalidation subscription (including gaps and a hung
 * Redis).  See meta-harness.h for the private redis-server.
 */

#include "meta-harness.h"

static void card_init(struct meta_card *c, const char *host, const char *listen,
		      const char *instance, const char *caps)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->host, sizeof(c->host), "%s", host);
	snprintf(c->listen, sizeof(c->listen), "%s", listen);
	c->pid = getpid();
	snprintf(c->instance, sizeof(c->instance), "%s", instance);
	c->started_ns = 1700000000000000000LL;
	c->capacity = 1ull << 40;
	c->used = 12345;
	snprintf(c->caps, sizeof(c->caps), "%s", caps);
}

/* Claim a card for the node of @m, listening on @listen. */
static void claim_card(struct meta *m, const char *listen, const char *caps)
{
	static unsigned seq;
	struct meta_card c, other;
	char inst[40];

	snprintf(inst, sizeof(inst), "inst%u", ++seq);
	card_init(&c, "host-x", listen, inst, caps);
	CHECK_EQ(meta_node_claim(m, &c, 30, &other), 0);
}

/* Try to claim @c's name with @m (held by another card): the result, and
 * that other card in *@other (poisoned first, so that every field
 * checked was written). */
static int claim_taken(struct meta *m, struct meta_card *c, struct meta_card *other)
{
	memset(other, 0x55, sizeof(*other));
	return meta_node_claim(m, c, 30, other);
}

static const struct meta_holder *find_holder(const struct meta_holder *hs, size_t n,
					     const char *node)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(hs[i].node, node))
			return &hs[i];
	return NULL;
}

TEST(caps)
{
	struct meta *m1 = mk("t-caps", "alpha", 0, 0);
	struct meta *m2 = mk("t-caps", "alpha", 0, 0);
	struct meta_card a, b, other;
	char buf[80];

	card_init(&a, "host-1", "10.0.0.1:7000", "aaaa1111", "tcp");
	card_init(&b, "host-2", "10.0.0.2:7000", "bbbb2222", "tcp");
	CHECK_EQ(meta_node_claim(m1, &a, 30, &other), 0);
	rget(buf, sizeof(buf), "HGET {t-caps}:node:alpha caps");
	CHECK_STR(buf, "tcp");
	snprintf(a.caps, sizeof(a.caps), "tcp,rdma");
	CHECK_EQ(meta_node_heartbeat(m1, &a, 30), 0);
	rget(buf, sizeof(buf), "HGET {t-caps}:node:alpha caps");
	CHECK_STR(buf, "tcp,rdma");
	/* the other card comes back with its caps */
	CHECK_EQ(claim_taken(m2, &b, &other), -EADDRINUSE);
	CHECK_STR(other.caps, "tcp,rdma");
	CHECK_STR(other.listen, "10.0.0.1:7000");
	/* a card of an older node, without caps */
	rdo("HDEL {t-caps}:node:alpha caps");
	CHECK_EQ(claim_taken(m2, &b, &other), -EADDRINUSE);
	CHECK_STR(other.caps, "");
	CHECK_STR(other.instance, "aaaa1111");
	/* damaged caps */
	rdo("HSET {t-caps}:node:alpha caps %s", "tcp rdma");
	CHECK_EQ(meta_node_claim(m2, &b, 30, &other), -EBADMSG);
	memset(buf, 'c', 70);
	buf[70] = '\0';
	rdo("HSET {t-caps}:node:alpha caps %s", buf);
	CHECK_EQ(meta_node_claim(m2, &b, 30, &other), -EBADMSG);

	/* caps that a card cannot carry */
	snprintf(a.caps, sizeof(a.caps), "tcp rdma");
	CHECK_EQ(meta_node_heartbeat(m1, &a, 30), -EINVAL);
	snprintf(a.caps, sizeof(a.caps), "tcp;rdma");
	CHECK_EQ(meta_node_claim(m1, &a, 30, &other), -EINVAL);
	memset(a.caps, 'c', sizeof(a.caps)); /* no NUL */
	CHECK_EQ(meta_node_heartbeat(m1, &a, 30), -EINVAL);
	a.caps[sizeof(a.caps) - 1] = '\0'; /* 63 bytes: fine */
	CHECK_EQ(meta_node_heartbeat(m1, &a, 30), 0);
	rget(buf, sizeof(buf), "HGET {t-caps}:node:alpha caps");
	CHECK_EQ(strlen(buf), 63);
	a.caps[0] = '\0'; /* none: fine */
	CHECK_EQ(meta_node_heartbeat(m1, &a, 30), 0);
	rget(buf, sizeof(buf), "HEXISTS {t-caps}:node:alpha caps");
	CHECK_STR(buf, "1");
	meta_free(m1);
	meta_free(m2);
}

/* The card's RDMA address: written, read back, absent on older cards,
 * refused when malformed on our own card, ignored on another's. */
TEST(card_rdma)
{
	static const char *const good[] = {
	    "10.0.0.1:7001", "node-1.example:1", "h:65535", "[::1]:7001", "[fe80::1%eth0]:9",
	};
	static const char *const bad[] = {
	    "",	      "10.0.0.1",  "10.0.0.1:", ":7001",    "10.0.0.1:0", "10.0.0.1:65536",
	    "h:+1",   "h:-1",	   "h:1x",	"h:123456", "a b:1",	  "a/b:1",
	    "::1:70", "[::1]7001", "[::1]:",	"[]:1",	    "[::1:1",	  "h:1:2",
	};
	struct meta *m1 = mk("t-rdma", "alpha", 0, 0);
	struct meta *m2 = mk("t-rdma", "alpha", 0, 0);
	struct meta_card a, b, other;
	char buf[160];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(good); i++) {
		if (!meta_hostport_valid(good[i]))
			fprintf(stderr, "  refused: %s\n", good[i]);
		CHECK(meta_hostport_valid(good[i]));
	}
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		if (meta_hostport_valid(bad[i]))
			fprintf(stderr, "  accepted: %s\n", bad[i]);
		CHECK(!meta_hostport_valid(bad[i]));
	}
	CHECK(!meta_hostport_valid(NULL));
	memset(buf, 'h', sizeof(buf));
	memcpy(buf + 122, ":7001", 6); /* 127 bytes: fine */
	CHECK(meta_hostport_valid(buf));
	memset(buf, 'h', sizeof(buf));
	memcpy(buf + 123, ":7001", 6); /* 128: too long for a card */
	CHECK(!meta_hostport_valid(buf));

	card_init(&a, "host-1", "10.0.0.1:7000", "aaaa1111", "tcp,rdma");
	card_init(&b, "host-2", "10.0.0.2:7000", "bbbb2222", "tcp");
	snprintf(a.rdma, sizeof(a.rdma), "10.0.0.1:7001");
	CHECK_EQ(meta_node_claim(m1, &a, 30, &other), 0);
	rget(buf, sizeof(buf), "HGET {t-rdma}:node:alpha rdma");
	CHECK_STR(buf, "10.0.0.1:7001");
	CHECK_EQ(claim_taken(m2, &b, &other), -EADDRINUSE);
	CHECK_STR(other.rdma, "10.0.0.1:7001");
	/* no RDMA served (any more): the field is there, empty */
	a.rdma[0] = '\0';
	CHECK_EQ(meta_node_heartbeat(m1, &a, 30), 0);
	rget(buf, sizeof(buf), "HEXISTS {t-rdma}:node:alpha rdma");
	CHECK_STR(buf, "1");
	CHECK_EQ(claim_taken(m2, &b, &other), -EADDRINUSE);
	CHECK_STR(other.rdma, "");
	/* a card of an older node has none */
	rdo("HDEL {t-rdma}:node:alpha rdma");
	CHECK_EQ(claim_taken(m2, &b, &other), -EADDRINUSE);
	CHECK_STR(other.rdma, "");
	CHECK_STR(other.listen, "10.0.0.1:7000");
	/* a damaged one is ignored, the rest of the card is good */
	rdo("HSET {t-rdma}:node:alpha rdma %s", "10.0.0.1:7001 junk");
	CHECK_EQ(claim_taken(m2, &b, &other), -EADDRINUSE);
	CHECK_STR(other.rdma, "");
	CHECK_STR(other.instance, "aaaa1111");
	memset(buf, 'r', 150);
	buf[150] = '\0';
	rdo("HSET {t-rdma}:node:alpha rdma %s", buf);
	CHECK_EQ(claim_taken(m2, &b, &other), -EADDRINUSE);
	CHECK_STR(other.rdma, "");

	/* our own card cannot carry a malformed one */
	snprintf(a.rdma, sizeof(a.rdma), "10.0.0.1");
	CHECK_EQ(meta_node_heartbeat(m1, &a, 30), -EINVAL);
	CHECK_EQ(meta_node_claim(m1, &a, 30, &other), -EINVAL);
	memset(a.rdma, '1', sizeof(a.rdma)); /* no NUL */
	CHECK_EQ(meta_node_heartbeat(m1, &a, 30), -EINVAL);
	snprintf(a.rdma, sizeof(a.rdma), "[::1]:7001");
	CHECK_EQ(meta_node_heartbeat(m1, &a, 30), 0);
	rget(buf, sizeof(buf), "HGET {t-rdma}:node:alpha rdma");
	CHECK_STR(buf, "[::1]:7001");
	meta_free(m1);
	meta_free(m2);
}

/* Who holds @o as the holders' cards come and go */
static void locate_holders(struct meta *a, struct meta *b, struct meta *c, struct meta_obj o)
{
	struct meta_holder *hs = NULL;
	const struct meta_holder *h;
	struct meta_obj got;
	unsigned stale = 99;
	size_t n = 99;
	char buf[64];

	/* only this node holds it: no one to ask */
	CHECK_EQ(meta_locate(a, o.id, &got, &hs, &n, &stale), 0);
	CHECK_EQ(n, 0);
	CHECK_EQ(stale, 0);
	CHECK(hs != NULL);
	CHECK_EQ(got.id, o.id);
	CHECK_EQ(got.size, 4096);
	CHECK_EQ(got.mtime_ns, o.mtime_ns);
	CHECK(!memcmp(got.csum, o.csum, OBJFS_CSUM_LEN));
	CHECK_STR(got.origin, "node-a");
	free(hs);

	/* one other holder */
	CHECK_EQ(meta_add_holder(b, o.id), 0);
	CHECK_EQ(meta_locate(a, o.id, &got, &hs, &n, &stale), 0);
	CHECK_EQ(n, 1);
	CHECK_EQ(stale, 0);
	if (n == 1) {
		CHECK_STR(hs[0].node, "node-b");
		CHECK_STR(hs[0].addr, "10.0.0.2:7000");
		CHECK_STR(hs[0].caps, "tcp,rdma");
		CHECK_STR(hs[0].rdma, "10.0.1.2:7001");
	}
	free(hs);
	/* seen from b: a is the other holder */
	CHECK_EQ(meta_locate(b, o.id, &got, &hs, &n, NULL), 0);
	CHECK_EQ(n, 1);
	if (n == 1)
		CHECK_STR(hs[0].addr, "10.0.0.1:7000");
	free(hs);

	/* two */
	CHECK_EQ(meta_add_holder(c, o.id), 0);
	CHECK_EQ(meta_locate(a, o.id, &got, &hs, &n, &stale), 0);
	CHECK_EQ(n, 2);
	CHECK_EQ(stale, 0);
	h = find_holder(hs, n, "node-b");
	CHECK(h && !strcmp(h->addr, "10.0.0.2:7000"));
	h = find_holder(hs, n, "node-c");
	CHECK(h && !strcmp(h->addr, "10.0.0.3:7001") && !strcmp(h->caps, "tcp"));
	CHECK(h && !strcmp(h->rdma, "")); /* a card without one */
	free(hs);

	/* c's card expires: its entry is stale, removed and counted */
	rdo("PEXPIRE {t-loc}:node:node-c 1");
	usleep(20000);
	CHECK_EQ(meta_locate(a, o.id, &got, &hs, &n, &stale), 0);
	CHECK_EQ(n, 1);
	CHECK_EQ(stale, 1);
	if (n == 1)
		CHECK_STR(hs[0].node, "node-b");
	free(hs);
	snprintf(buf, sizeof(buf), "%d", rec_holds("t-loc", o.id, "node-c"));
	CHECK_STR(buf, "0");
	snprintf(buf, sizeof(buf), "%d", rec_holds("t-loc", o.id, "node-a"));
	CHECK_STR(buf, "1");
	CHECK_EQ(meta_locate(a, o.id, &got, &hs, &n, &stale), 0);
	CHECK_EQ(n, 1);
	CHECK_EQ(stale, 0);
	free(hs);

	/* this node's own card expired: it is left out, never pruned */
	rdo("DEL {t-loc}:node:node-a");
	rec_hold("t-loc", o.id, "node-d"); /* never had a card */
	CHECK_EQ(meta_locate(a, o.id, &got, &hs, &n, &stale), 0);
	CHECK_EQ(n, 1);
	CHECK_EQ(stale, 1);
	free(hs);
	snprintf(buf, sizeof(buf), "%d", rec_holds("t-loc", o.id, "node-a"));
	CHECK_STR(buf, "1");
	/* from b, a is now stale too */
	CHECK_EQ(meta_locate(b, o.id, &got, &hs, &n, &stale), 0);
	CHECK_EQ(n, 0);
	CHECK_EQ(stale, 1);
	free(hs);
	claim_card(a, "10.0.0.1:7000", "tcp");
	CHECK_EQ(meta_add_holder(a, o.id), 0);
}

/* Malformed cards and holder names are skipped, and left alone */
static void locate_bad_cards(struct meta *a, struct meta *e, struct meta_obj o)
{
	struct meta_holder *hs = NULL;
	const struct meta_holder *h;
	struct meta_obj got;
	unsigned stale = 99;
	size_t n = 99;

	/* malformed cards and names are skipped, and left alone */
	CHECK_EQ(meta_add_holder(e, o.id), 0);
	rec_hold("t-loc", o.id, "bad node!");
	{
		static const struct {
			const char *field, *value;
		} bad[] = {
		    {"listen", ""},
		    {"caps", "tcp rdma"},
		    {"caps", "0123456789012345678901234567890123456789"
			     "012345678901234567890123"}, /* 64 bytes */
		};
		size_t i;

		for (i = 0; i < ARRAY_SIZE(bad); i++) {
			rdo("HSET {t-loc}:node:node-e %s %s", bad[i].field, bad[i].value);
			CHECK_EQ(meta_locate(a, o.id, &got, &hs, &n, &stale), 0);
			CHECK_EQ(n, 1);
			CHECK_EQ(stale, 0);
			CHECK(find_holder(hs, n, "node-b") != NULL);
			free(hs);
			rdo("HSET {t-loc}:node:node-e listen 10.0.0.5:7000 caps tcp");
		}
		rdo("HDEL {t-loc}:node:node-e listen");
		CHECK_EQ(meta_locate(a, o.id, &got, &hs, &n, &stale), 0);
		CHECK_EQ(n, 1);
		free(hs);
		rdo("DEL {t-loc}:node:node-e");
		rdo("SET {t-loc}:node:node-e notahash");
		CHECK_EQ(meta_locate(a, o.id, &got, &hs, &n, &stale), 0);
		CHECK_EQ(n, 1);
		CHECK_EQ(stale, 0);
		free(hs);
		CHECK_EQ(nholders("t-loc", o.id), 4); /* a, b, e, "bad node!" */
		/* a card without caps (an older node) is fine */
		rdo("DEL {t-loc}:node:node-e");
		claim_card(e, "10.0.0.5:7000", "tcp");
		rdo("HDEL {t-loc}:node:node-e caps");
		CHECK_EQ(meta_locate(a, o.id, &got, &hs, &n, &stale), 0);
		CHECK_EQ(n, 2);
		h = find_holder(hs, n, "node-e");
		CHECK(h && !strcmp(h->caps, "") && !strcmp(h->addr, "10.0.0.5:7000"));
		CHECK(h && !strcmp(h->rdma, ""));
		free(hs);
		/* a malformed rdma address costs the holder its RDMA only */
		{
			static const char *const bad_rdma[] = {
			    "10.0.0.5",
			    "10.0.0.5:0",
			    "10.0.0.5:70000",
			    "a b:1",
			    "[::1:7000",
			    "0123456789012345678901234567890123456789012345678901234567890123"
			    "0123456789012345678901234567890123456789012345678901234567890123:1",
			};
			size_t i;

			for (i = 0; i < ARRAY_SIZE(bad_rdma); i++) {
				rdo("HSET {t-loc}:node:node-e rdma %s", bad_rdma[i]);
				CHECK_EQ(meta_locate(a, o.id, &got, &hs, &n, &stale), 0);
				CHECK_EQ(n, 2);
				h = find_holder(hs, n, "node-e");
				CHECK(h && !strcmp(h->rdma, "") &&
				      !strcmp(h->addr, "10.0.0.5:7000"));
				free(hs);
			}
			rdo("HSET {t-loc}:node:node-e rdma [fe80::1%%eth0]:7001");
			CHECK_EQ(meta_locate(a, o.id, &got, &hs, &n, &stale), 0);
			h = find_holder(hs, n, "node-e");
			CHECK(h && !strcmp(h->rdma, "[fe80::1%eth0]:7001"));
			free(hs);
		}
	}
}

/* No record, a damaged record */
static void locate_bad_records(struct meta *a, struct meta_obj o)
{
	struct meta_holder *hs = NULL;
	struct meta_obj got;
	unsigned stale = 99;
	size_t n = 99;

	/* no record; a damaged record */
	hs = NULL;
	CHECK_EQ(meta_locate(a, 987654, &got, &hs, &n, &stale), -ENOENT);
	CHECK(hs == NULL);
	CHECK_EQ(meta_locate(a, 0, &got, &hs, &n, &stale), -EINVAL);
	/* the attributes are the entry's (layout 2): a damaged entry, or a
	 * record that leads to no entry, is a damaged record */
	{
		char ent[256];

		rget(ent, sizeof(ent), "HGET {t-loc}:d:1 obj");
		char v[256];

		snprintf(v, sizeof(v), "f%" PRIu64 " abc 1 %s node-a", o.id,
			 "00000000000000000000000000000000");
		rdo("HSET {t-loc}:d:1 obj %s", v);
		CHECK_EQ(meta_locate(a, o.id, &got, &hs, &n, &stale), -EBADMSG);
		rdo("HSET {t-loc}:d:1 obj %s", ent);
		rec_rename("t-loc", o.id, "elsewhere");
		CHECK_EQ(meta_locate(a, o.id, &got, &hs, &n, &stale), -EBADMSG);
		rec_rename("t-loc", o.id, "obj");
		CHECK_EQ(meta_locate(a, o.id, &got, &hs, &n, &stale), 0);
	}
	free(hs);
}

TEST(locate)
{
	struct meta *a = mk_connected("t-loc");
	struct meta *b = mk("t-loc", "node-b", 0, 0);
	struct meta *c = mk("t-loc", "node-c", 0, 0);
	struct meta *e = mk("t-loc", "node-e", 0, 0);
	struct meta_obj o;

	claim_card(a, "10.0.0.1:7000", "tcp");
	claim_card(b, "10.0.0.2:7000", "tcp,rdma");
	rdo("HSET {t-loc}:node:node-b rdma 10.0.1.2:7001");
	claim_card(c, "10.0.0.3:7001", "tcp");
	claim_card(e, "10.0.0.5:7000", "tcp");
	mkobj(a, &o, 4096);
	CHECK_EQ(meta_publish(a, 1, "obj", &o, false, NULL, NULL), 0);
	locate_holders(a, b, c, o);
	locate_bad_cards(a, e, o);
	locate_bad_records(a, o);
	meta_free(a);
	meta_free(b);
	meta_free(c);
	meta_free(e);
}

TEST(release_replica)
{
	struct meta *a = mk_connected("t-rel");
	struct meta *b = mk("t-rel", "node-b", 0, 0);
	struct meta *c = mk("t-rel", "node-c", 0, 0);
	char buf[64];
	struct meta_obj o;

	claim_card(a, "10.0.0.1:7000", "tcp");
	claim_card(b, "10.0.0.2:7000", "tcp");
	mkobj(a, &o, 1);
	CHECK_EQ(meta_publish(a, 1, "r", &o, false, NULL, NULL), 0);

	/* the only holder */
	CHECK_EQ(meta_release_replica(a, o.id), 0);
	CHECK_EQ(nholders("t-rel", o.id), 1);

	/* the only other holder's card has expired: kept, but not the only
	 * copy (2) */
	CHECK_EQ(meta_add_holder(b, o.id), 0);
	rdo("DEL {t-rel}:node:node-b");
	CHECK_EQ(meta_release_replica(a, o.id), 2);
	CHECK_EQ(nholders("t-rel", o.id), 2);
	/* a card without a listen address does not count either */
	claim_card(b, "10.0.0.2:7000", "tcp");
	rdo("HSET {t-rel}:node:node-b listen %s", "");
	CHECK_EQ(meta_release_replica(a, o.id), 2);
	CHECK_EQ(nholders("t-rel", o.id), 2);
	/* nor a holder that is not a node */
	rec_hold("t-rel", o.id, "bad node!");
	rdo("HSET %s listen x:1", "{t-rel}:node:bad node!");
	CHECK_EQ(meta_release_replica(a, o.id), 2);
	rec_unhold("t-rel", o.id, "bad node!");

	/* two live holders: a goes, b stays, and b is now the last */
	rdo("DEL {t-rel}:node:node-b");
	claim_card(b, "10.0.0.2:7000", "tcp");
	CHECK_EQ(meta_release_replica(a, o.id), 1);
	snprintf(buf, sizeof(buf), "%d", rec_holds("t-rel", o.id, "node-a"));
	CHECK_STR(buf, "0");
	snprintf(buf, sizeof(buf), "%d", rec_holds("t-rel", o.id, "node-b"));
	CHECK_STR(buf, "1");
	CHECK_EQ(meta_release_replica(b, o.id), 0);
	CHECK_EQ(nholders("t-rel", o.id), 1);
	/* not a holder, and a live holder exists: nothing to do, may free */
	CHECK_EQ(meta_release_replica(a, o.id), 1);
	CHECK_EQ(nholders("t-rel", o.id), 1);
	/* not a holder, and no live holder: keep the copy */
	CHECK_EQ(meta_release_replica(c, o.id), 1);
	rdo("DEL {t-rel}:node:node-b");
	CHECK_EQ(meta_release_replica(c, o.id), 2);

	CHECK_EQ(meta_release_replica(a, 987654), -ENOENT);
	CHECK_EQ(meta_release_replica(a, 0), -EINVAL);
	{
		char key[96], field[24];

		bucket_of("t-rel", o.id, key, field);
		rdo("DEL %s", key);
		rdo("SET %s notahash", key);
	}
	CHECK(meta_release_replica(a, o.id) < 0);
	CHECK(meta_is_up(a));
	meta_free(a);
	meta_free(b);
	meta_free(c);
}

struct racer {
	struct meta *m;
	uint64_t id;
	pthread_barrier_t *start;
	int r;
};

static void *racer_main(void *arg)
{
	struct racer *r = arg;

	pthread_barrier_wait(r->start);
	r->r = meta_release_replica(r->m, r->id);
	return NULL;
}

/* Two nodes drop their copies of one object at once: exactly one may. */
TEST(release_race)
{
	struct meta *a = mk_connected("t-race");
	struct meta *b = mk("t-race", "node-b", 0, 0);
	pthread_barrier_t start;
	struct racer r[2];
	pthread_t t[2];
	struct meta_obj o;
	int i, k, ones;

	claim_card(a, "10.0.0.1:7000", "tcp");
	claim_card(b, "10.0.0.2:7000", "tcp");
	pthread_barrier_init(&start, NULL, 2);
	for (i = 0; i < 50; i++) {
		char name[32];

		mkobj(a, &o, 1);
		snprintf(name, sizeof(name), "race-%d", i);
		CHECK_EQ(meta_publish(a, 1, name, &o, false, NULL, NULL), 0);
		CHECK_EQ(meta_add_holder(b, o.id), 0);
		r[0] = (struct racer){.m = a, .id = o.id, .start = &start, .r = -1};
		r[1] = (struct racer){.m = b, .id = o.id, .start = &start, .r = -1};
		for (k = 0; k < 2; k++)
			pthread_create(&t[k], NULL, racer_main, &r[k]);
		for (k = 0; k < 2; k++)
			pthread_join(t[k], NULL);
		ones = (r[0].r == 1) + (r[1].r == 1);
		CHECK_EQ(ones, 1);
		CHECK_EQ((r[0].r == 0) + (r[1].r == 0), 1);
		CHECK_EQ(nholders("t-race", o.id), 1);
	}
	pthread_barrier_destroy(&start);
	meta_free(a);
	meta_free(b);
}

TEST(members)
{
	struct meta *al = mk("t-mem", "alpha", 0, 0);
	struct meta *be = mk("t-mem", "beta", 0, 0);
	struct meta *ga = mk("t-mem", "gamma", 0, 0);
	struct meta *de = mk("t-mem", "delta", 0, 0);
	struct meta *ep = mk("t-mem", "epsilon", 0, 0);
	struct meta *empty = mk("t-mem-empty", "alpha", 0, 0);
	struct meta_member *mb = NULL;
	struct meta_card ca, cb, cg, other;
	size_t n = 99;

	card_init(&ca, "host-a", "10.0.0.1:7000", "alpha1", "tcp");
	card_init(&cb, "host-b", "10.0.0.2:7000", "beta1", "tcp,rdma");
	card_init(&cg, "host-g", "10.0.0.3:7000", "gamma1", "tcp");
	cb.pid = 4242;
	cb.used = 77;
	snprintf(cb.rdma, sizeof(cb.rdma), "10.0.1.2:7001");
	CHECK_EQ(meta_node_claim(al, &ca, 30, &other), 0);
	CHECK_EQ(meta_node_claim(be, &cb, 10, &other), 0);
	CHECK_EQ(meta_node_claim(ga, &cg, 30, &other), 0);
	CHECK_EQ(meta_node_release(ga, "gamma1"), 0); /* gone */
	claim_card(de, "10.0.0.4:7000", "tcp");
	rdo("HSET {t-mem}:node:delta pid notapid"); /* damaged: skipped */
	claim_card(ep, "10.0.0.5:7000", "tcp");
	rdo("HDEL {t-mem}:node:epsilon caps"); /* older node: fine */
	rdo("PERSIST {t-mem}:node:epsilon");
	rdo("SADD {t-mem}:members %s", "bad name!");	      /* skipped */
	rdo("HSET {t-mem}:node:alpha rdma %s", "10.0.1.1:x"); /* ignored, card kept */

	CHECK_EQ(meta_members(al, &mb, &n), 0);
	CHECK_EQ(n, 4);
	if (n == 4) {
		CHECK_STR(mb[0].node, "alpha");
		CHECK(mb[0].live);
		CHECK(mb[0].ttl_ms > 25000 && mb[0].ttl_ms <= 30000);
		CHECK_STR(mb[0].card.host, "host-a");
		CHECK_STR(mb[0].card.listen, "10.0.0.1:7000");
		CHECK_STR(mb[0].card.instance, "alpha1");
		CHECK_STR(mb[0].card.caps, "tcp");
		CHECK_STR(mb[0].card.rdma, ""); /* malformed: ignored */
		CHECK_EQ(mb[0].card.pid, getpid());
		CHECK_EQ(mb[0].card.started_ns, 1700000000000000000LL);
		CHECK_EQ(mb[0].card.capacity, 1ull << 40);

		CHECK_STR(mb[1].node, "beta");
		CHECK(mb[1].live);
		CHECK(mb[1].ttl_ms > 5000 && mb[1].ttl_ms <= 10000);
		CHECK_STR(mb[1].card.caps, "tcp,rdma");
		CHECK_STR(mb[1].card.rdma, "10.0.1.2:7001");
		CHECK_EQ(mb[1].card.pid, 4242);
		CHECK_EQ(mb[1].card.used, 77);

		CHECK_STR(mb[2].node, "epsilon");
		CHECK(mb[2].live);
		CHECK_EQ(mb[2].ttl_ms, -1);
		CHECK_STR(mb[2].card.caps, "");
		CHECK_STR(mb[2].card.rdma, "");
		CHECK_STR(mb[2].card.listen, "10.0.0.5:7000");

		CHECK_STR(mb[3].node, "gamma");
		CHECK(!mb[3].live);
		CHECK_EQ(mb[3].ttl_ms, -1);
	}
	free(mb);

	/* a heartbeat with other caps; beta's card expires */
	snprintf(ca.caps, sizeof(ca.caps), "tcp,rdma");
	CHECK_EQ(meta_node_heartbeat(al, &ca, 30), 0);
	rdo("PEXPIRE {t-mem}:node:beta 1");
	usleep(20000);
	CHECK_EQ(meta_members(ep, &mb, &n), 0);
	CHECK_EQ(n, 4);
	if (n == 4) {
		CHECK_STR(mb[0].card.caps, "tcp,rdma");
		CHECK_STR(mb[1].node, "beta");
		CHECK(!mb[1].live);
		CHECK_EQ(mb[1].ttl_ms, -1);
	}
	free(mb);
	/* a card that is not a hash */
	rdo("DEL {t-mem}:node:alpha");
	rdo("SET {t-mem}:node:alpha x");
	CHECK_EQ(meta_members(ep, &mb, &n), 0);
	CHECK_EQ(n, 3);
	if (n == 3)
		CHECK_STR(mb[0].node, "beta");
	free(mb);

	mb = NULL;
	CHECK_EQ(meta_members(empty, &mb, &n), 0);
	CHECK_EQ(n, 0);
	CHECK(mb != NULL);
	free(mb);
	meta_free(al);
	meta_free(be);
	meta_free(ga);
	meta_free(de);
	meta_free(ep);
	meta_free(empty);
}

TEST(subscribe)
{
	static const char name[] = " a  name with spaces ";
	struct meta *m = mk_connected("t-sub");
	struct meta *b = mk("t-sub", "node-b", 0, 0);
	struct inval_log l, l2;
	struct meta_entry d;
	struct meta_obj o;
	char big[400];
	uint64_t id;
	int64_t t0;
	size_t i;
	static const char *const bad[] = {
	    "garbage",
	    "",
	    "- publish 1 x",
	    "- publish 01 x 5",
	    "- publish 1 x 0",
	    "- publish 1 x 05",
	    "- publish x y 5",
	    "- publish 1 a/b 5",
	    "- publish 1 .. 5",
	    "- publish 1  5",
	    "- Publish 1 x 5",
	    "- abcdefghijklmnop 1 x 5",
	    "- publish 1 x 18446744073709551616",
	    "- publish 18446744073709551616 x 1",
	    "- publish 1 x 5 ",
	    "-  publish 1 x 5",
	    "bad!node publish 1 x 5",
	    "publish 1 x 5",
	};

	inval_init(&l);
	t0 = util_mono_ns();
	CHECK_EQ(meta_subscribe(m, inval_cb, &l), 0);
	CHECK(ms_since(t0) < 1000);
	CHECK_EQ(meta_subscribe(m, inval_cb, &l), -EALREADY);
	CHECK_EQ(meta_subscribe(b, NULL, &l), -EINVAL);

	CHECK_EQ(meta_mkdir(m, 1, "d", 1, &d), 0);
	mkobj(m, &o, 1);
	/* from another node's connection: the same channel */
	CHECK_EQ(meta_publish(b, d.id, name, &o, false, NULL, NULL), 0);
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		rdo("SPUBLISH {t-sub}:inval %s", bad[i]);
	memset(big, 'n', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	memcpy(big, "- publish 1 ", 12);
	memcpy(big + sizeof(big) - 3, " 5", 2);
	rdo("SPUBLISH {t-sub}:inval %s", big); /* a name longer than a name */
	rdo("SPUBLISH {t-sub}:inval %b", "- publish 1 a\0b 5", (size_t)17);
	rdo("SPUBLISH {t-sub}:inval %b", "- publish 1 \xff\xfe 5", (size_t)16);
	rdo("SPUBLISH t-sub:other %s", "- publish 1 x 5");  /* not ours */
	rdo("PUBLISH {t-sub}:inval %s", "- publish 1 x 5"); /* not sharded: not ours */
	/* well-formed, of a kind this version does not know: passed on */
	rdo("SPUBLISH {t-sub}:inval %s", "node-z custom-kind 7 raw  name 9");
	CHECK_EQ(meta_rename(m, d.id, name, 1, "moved", 0, false, NULL), 0);
	CHECK_EQ(meta_unlink(m, 1, "moved", &id), 0);
	CHECK_EQ(meta_rmdir(m, 1, "d", NULL), 0);

	CHECK_EQ(inval_wait(&l, 8, 3000), 8);
	usleep(100000);
	CHECK_EQ(inval_count(&l), 8);
	CHECK_EV(&l, 0, "mkdir", 1, "d", d.id);
	CHECK_EV(&l, 1, "publish", d.id, name, o.id);
	CHECK_EV(&l, 2, "custom-kind", 7, "raw  name", 9);
	CHECK_EV(&l, 3, "rename-from", d.id, name, o.id);
	CHECK_EV(&l, 4, "rename-to", 1, "moved", o.id);
	CHECK_EV(&l, 5, "gone", 0, "-", o.id);	     /* the object is deleted... */
	CHECK_EV(&l, 6, "unlink", 1, "moved", o.id); /* ...and its name */
	CHECK_EV(&l, 7, "rmdir", 1, "d", d.id);
	/* who made each change: node-a's kernel (mkdir, rename, unlink and
	 * rmdir always come through one), nobody's (a publish without
	 * META_PUBLISH_SELF), or what the message says */
	CHECK_STR(l.ev[0].origin, "node-a");
	CHECK_STR(l.ev[1].origin, "");
	CHECK_STR(l.ev[2].origin, "node-z");
	CHECK_STR(l.ev[3].origin, "node-a");
	CHECK_STR(l.ev[5].origin, "node-a");
	CHECK_STR(l.ev[7].origin, "node-a");

	/* a replace, and an exchange (four events) */
	{
		struct meta_obj o2;
		struct meta_entry d2;

		CHECK_EQ(meta_mkdir(m, 1, "x", 1, &d2), 0);
		mkobj(m, &o, 1);
		mkobj(m, &o2, 1);
		CHECK_EQ(meta_publish(m, 1, "f", &o, false, NULL, NULL), 0);
		CHECK_EQ(meta_publish(m, 1, "f", &o2, true, NULL, NULL), 0);
		CHECK_EQ(meta_rename(m, 1, "f", 1, "x", META_RENAME_EXCHANGE, false, NULL), 0);
		CHECK_EQ(inval_wait(&l, 16, 3000), 16);
		CHECK_EV(&l, 8, "mkdir", 1, "x", d2.id);
		CHECK_EV(&l, 9, "publish", 1, "f", o.id);
		CHECK_EV(&l, 10, "gone", 0, "-", o.id); /* replaced */
		CHECK_EV(&l, 11, "replace", 1, "f", o2.id);
		CHECK_EV(&l, 12, "rename-from", 1, "f", o2.id);
		CHECK_EV(&l, 13, "rename-to", 1, "x", o2.id);
		CHECK_EV(&l, 14, "rename-from", 1, "x", d2.id);
		CHECK_EV(&l, 15, "rename-to", 1, "f", d2.id);
	}

	/* unsubscribe is prompt, and nothing comes afterwards */
	t0 = util_mono_ns();
	meta_unsubscribe(m);
	CHECK(ms_since(t0) < 200);
	CHECK_EQ(meta_mkdir(m, 1, "after", 1, NULL), 0);
	usleep(100000);
	CHECK_EQ(inval_count(&l), 16);
	meta_unsubscribe(m); /* again: nothing to do */

	/* subscribe again; meta_free() stops a live subscriber */
	inval_init(&l2);
	CHECK_EQ(meta_subscribe(m, inval_cb, &l2), 0);
	CHECK_EQ(meta_mkdir(b, 1, "again", 1, &d), 0);
	CHECK_EQ(inval_wait(&l2, 1, 3000), 1);
	CHECK_EV(&l2, 0, "mkdir", 1, "again", d.id);
	t0 = util_mono_ns();
	meta_free(m);
	CHECK(ms_since(t0) < 200);
	meta_free(b);
	CHECK_EQ(inval_count(&l), 16);
	pthread_mutex_destroy(&l.lock);
	pthread_mutex_destroy(&l2.lock);
}

/* The connection of the subscriber is killed: it comes back and says so. */
TEST(subscribe_gap)
{
	struct meta *m = mk_connected("t-gap");
	struct inval_log l;
	struct meta_entry d;
	char buf[32];

	inval_init(&l);
	CHECK_EQ(meta_subscribe(m, inval_cb, &l), 0);
	CHECK_EQ(meta_mkdir(m, 1, "before", 1, &d), 0);
	CHECK_EQ(inval_wait(&l, 1, 3000), 1);
	rget(buf, sizeof(buf), "CLIENT KILL TYPE pubsub");
	CHECK(atoi(buf) >= 1);
	CHECK_EQ(inval_wait(&l, 2, 3000), 2);
	CHECK_EV(&l, 1, "(gap)", 0, "", 0);
	CHECK_EQ(meta_mkdir(m, 1, "after", 1, &d), 0);
	CHECK_EQ(inval_wait(&l, 3, 3000), 3);
	CHECK_EV(&l, 2, "mkdir", 1, "after", d.id);
	meta_free(m);
	pthread_mutex_destroy(&l.lock);
}

TEST(subscribe_hung)
{
	struct meta *m = mk("t-subhung", "node-a", 1, 300);
	struct meta *m2 = mk("t-subhung", "node-b", 1, 1500);
	struct inval_log l, l2;
	struct meta_entry d;
	int64_t t0;

	inval_init(&l);
	inval_init(&l2);
	CHECK_EQ(meta_connect(m), 0);
	CHECK_EQ(meta_subscribe(m, inval_cb, &l), 0);
	kill(R.pid, SIGSTOP);
	t0 = util_mono_ns();
	CHECK_EQ(meta_subscribe(m2, inval_cb, &l2), 0);
	CHECK(ms_since(t0) >= 1400 && ms_since(t0) < 2500);
	/* in its second attempt, waiting for an answer to SUBSCRIBE */
	usleep(400000);
	t0 = util_mono_ns();
	meta_unsubscribe(m2);
	CHECK(ms_since(t0) < 100);
	CHECK_EQ(inval_count(&l2), 0);

	/* past the PING and its timeout */
	while (ms_since(t0) < 6000)
		usleep(50000);
	CHECK_EQ(inval_count(&l), 0);
	kill(R.pid, SIGCONT);
	CHECK_EQ(inval_wait(&l, 1, 8000), 1);
	CHECK_EV(&l, 0, "(gap)", 0, "", 0);
	CHECK_EQ(meta_mkdir(m, 1, "back", 1, &d), 0);
	CHECK_EQ(inval_wait(&l, 2, 3000), 2);
	CHECK_EV(&l, 1, "mkdir", 1, "back", d.id);
	t0 = util_mono_ns();
	meta_free(m);
	CHECK(ms_since(t0) < 100);
	meta_free(m2);
	pthread_mutex_destroy(&l.lock);
	pthread_mutex_destroy(&l2.lock);
}

/* Redis dies and comes back empty on the same socket. */
int main(void)
{
	harness_begin("test-meta-cluster");
	RUN(caps);
	RUN(card_rdma);
	RUN(locate);
	RUN(release_replica);
	RUN(release_race);
	RUN(members);
	RUN(subscribe);
	RUN(subscribe_gap);
	RUN(subscribe_hung);
	return harness_end();
}
