/*
 * test-wire: the transport's message codec (transport/wire.c).
 *
 * Headers are built here byte by byte (raw_hdr()), independently of the
 * encoder, so the layout in docs/protocol.md is what is checked.  Every
 * buffer handed to a decoder is malloc()ed at its exact length, so ASan
 * catches any read past the end.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "wire.h"

static void le(uint8_t *p, uint64_t v, int n)
{
	int i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

struct raw {
	uint32_t magic;
	uint8_t version, type;
	uint16_t flags;
	int32_t status;
	uint32_t reqid;
	uint64_t id, off, len;
};

static void raw_hdr(const struct raw *r, uint8_t out[WIRE_HDR_LEN])
{
	le(out, r->magic, 4);
	out[4] = r->version;
	out[5] = r->type;
	le(out + 6, r->flags, 2);
	le(out + 8, (uint32_t)r->status, 4);
	le(out + 12, r->reqid, 4);
	le(out + 16, r->id, 8);
	le(out + 24, r->off, 8);
	le(out + 32, r->len, 8);
}

/* a valid header of @type (bodies: the shortest legal length) */
static struct raw good(uint8_t type)
{
	struct raw r = {.magic = WIRE_MAGIC, .version = WIRE_VERSION, .type = type};

	switch (type) {
	case WIRE_HELLO:
		r.len = WIRE_NONCE_LEN + 1;
		break;
	case WIRE_CHALLENGE:
		r.len = WIRE_NONCE_LEN + WIRE_PROOF_LEN;
		break;
	case WIRE_AUTH:
		r.len = WIRE_PROOF_LEN;
		break;
	case WIRE_GET:
	case WIRE_DATA:
		r.reqid = 7;
		r.id = 0x1234;
		r.off = 4096;
		r.len = 100;
		break;
	case WIRE_ERR:
		r.reqid = 7;
		r.id = 0x1234;
		r.status = ENOENT;
		break;
	}
	return r;
}

/* decode_hdr of exactly these 40 bytes, from an exact-size heap copy */
static int decode_raw(const struct raw *r, struct wire_msg *m, size_t *body)
{
	uint8_t *buf = malloc(WIRE_HDR_LEN);
	int err;

	raw_hdr(r, buf);
	err = wire_decode_hdr(buf, m, body);
	free(buf);
	return err;
}

static int decode_exact(const uint8_t *src, size_t len, struct wire_msg *m)
{
	uint8_t *buf = malloc(len ? len : 1);
	int n;

	memcpy(buf, src, len);
	n = wire_decode(buf, len, m);
	free(buf);
	return n;
}

TEST(layout)
{
	static const uint8_t want[WIRE_HDR_LEN] = {
	    'O',  'B',	'J',  'F',  1,	  WIRE_GET, 0,	  0,	/* magic, version, type, flags */
	    0,	  0,	0,    0,    0x04, 0x03,	    0x02, 0x01, /* status, reqid */
	    0x88, 0x77, 0x66, 0x55, 0x44, 0x33,	    0x22, 0x11, /* id */
	    0x00, 0x10, 0,    0,    0,	  0,	    0,	  0,	/* offset 4096 */
	    0x00, 0x00, 0x10, 0,    0,	  0,	    0,	  0,	/* length 1 MiB */
	};
	struct wire_msg m = {.type = WIRE_GET,
			     .reqid = 0x01020304,
			     .id = 0x1122334455667788ULL,
			     .off = 4096,
			     .len = 1 << 20};
	uint8_t buf[WIRE_MSG_MAX];

	CHECK_EQ(WIRE_HDR_LEN, 40);
	CHECK_EQ(wire_encode(&m, buf, sizeof(buf)), WIRE_HDR_LEN);
	CHECK(!memcmp(buf, want, sizeof(want)));
	CHECK_STR(wire_type_name(WIRE_CHALLENGE), "CHALLENGE");
	CHECK_STR(wire_type_name(0), "unknown");
	CHECK_STR(wire_type_name(200), "unknown");
}

static void roundtrip(const struct wire_msg *m, int want_len)
{
	uint8_t buf[WIRE_MSG_MAX];
	struct wire_msg out;
	int n = wire_encode(m, buf, sizeof(buf));

	CHECK_EQ(n, want_len);
	if (n < 0)
		return;
	memset(&out, 0xa5, sizeof(out));
	CHECK_EQ(decode_exact(buf, (size_t)n, &out), n);
	CHECK_EQ(out.type, m->type);
	CHECK_EQ(out.flags, m->flags);
	CHECK_EQ(out.status, m->status);
	CHECK_EQ(out.reqid, m->reqid);
	CHECK(out.id == m->id);
	CHECK(out.off == m->off);
	if (m->type == WIRE_HELLO) {
		CHECK(!memcmp(out.nonce, m->nonce, WIRE_NONCE_LEN));
		CHECK_STR(out.node, m->node);
		CHECK_EQ(out.len, WIRE_NONCE_LEN + strlen(m->node));
	} else if (m->type == WIRE_CHALLENGE) {
		CHECK(!memcmp(out.nonce, m->nonce, WIRE_NONCE_LEN));
		CHECK(!memcmp(out.proof, m->proof, WIRE_PROOF_LEN));
	} else if (m->type == WIRE_AUTH) {
		CHECK(!memcmp(out.proof, m->proof, WIRE_PROOF_LEN));
	} else {
		CHECK(out.len == m->len);
	}
}

TEST(roundtrips)
{
	struct wire_msg m;
	int i;

	memset(&m, 0, sizeof(m));
	m.type = WIRE_HELLO;
	m.flags = WIRE_F_SECRET;
	for (i = 0; i < WIRE_NONCE_LEN; i++)
		m.nonce[i] = (uint8_t)(i * 7 + 1);
	strcpy(m.node, "node-1.example_A");
	roundtrip(&m, WIRE_HDR_LEN + WIRE_NONCE_LEN + 16);
	m.flags = 0;
	memset(m.node, 'x', WIRE_NODE_MAX);
	m.node[WIRE_NODE_MAX] = 0;
	roundtrip(&m, WIRE_MSG_MAX);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_CHALLENGE;
	for (i = 0; i < WIRE_NONCE_LEN; i++) {
		m.nonce[i] = (uint8_t)(255 - i);
		m.proof[i] = (uint8_t)(i * 3);
	}
	roundtrip(&m, WIRE_HDR_LEN + 64);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_AUTH;
	memset(m.proof, 0xee, sizeof(m.proof));
	roundtrip(&m, WIRE_HDR_LEN + 32);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_READY;
	roundtrip(&m, WIRE_HDR_LEN);
	m.status = EACCES;
	roundtrip(&m, WIRE_HDR_LEN);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_GET;
	m.reqid = UINT32_MAX;
	m.id = UINT64_MAX;
	m.off = UINT64_MAX - WIRE_LEN_MAX;
	m.len = WIRE_LEN_MAX;
	roundtrip(&m, WIRE_HDR_LEN);
	m.off = UINT64_MAX;
	m.len = 0;
	roundtrip(&m, WIRE_HDR_LEN);
	m.type = WIRE_DATA;
	roundtrip(&m, WIRE_HDR_LEN);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_ERR;
	m.reqid = 9;
	m.id = 42;
	m.off = 7;
	m.status = ERANGE;
	roundtrip(&m, WIRE_HDR_LEN);
	m.status = WIRE_STATUS_MAX;
	roundtrip(&m, WIRE_HDR_LEN);
}

TEST(good_headers)
{
	struct wire_msg m;
	size_t body;
	uint8_t t;

	for (t = WIRE_HELLO; t <= WIRE_ERR; t++) {
		struct raw r = good(t);

		CHECK_EQ(decode_raw(&r, &m, &body), 0);
		CHECK_EQ(m.type, t);
		CHECK_EQ(body, t <= WIRE_AUTH ? r.len : 0);
	}
}

TEST(bad_headers)
{
	struct wire_msg m;
	struct raw r;
	size_t body;
	uint8_t t;

#define BAD(expr)                                             \
	do {                                                  \
		r = good(t);                                  \
		expr;                                         \
		CHECK_EQ(decode_raw(&r, &m, &body), -EPROTO); \
	} while (0)

	for (t = WIRE_HELLO; t <= WIRE_ERR; t++) {
		BAD(r.magic = 0x4a42464f); /* byte-swapped */
		BAD(r.magic = 0);
		BAD(r.version = 0);
		BAD(r.version = 2);
		BAD(r.version = 255);
		BAD(r.flags = 0x8000);
		BAD(r.flags = 0x0002);
		if (t != WIRE_HELLO)
			BAD(r.flags = WIRE_F_SECRET);
		if (t != WIRE_ERR) {
			BAD(r.status = 1);
			BAD(r.status = -1);
		}
		if (t <= WIRE_READY) {
			BAD(r.reqid = 1);
			BAD(r.id = 1);
			BAD(r.off = 1);
		}
		if (t != WIRE_GET && t != WIRE_DATA && t != WIRE_HELLO)
			BAD(r.len = r.len + 1);
		if (t != WIRE_GET && t != WIRE_DATA && t != WIRE_READY && t != WIRE_ERR)
			BAD(r.len = r.len - 1);
		BAD(r.len = UINT64_MAX);
		BAD(r.len = 1ULL << 32);
	}
	t = WIRE_HELLO;
	BAD(r.len = WIRE_NONCE_LEN); /* empty node name */
	BAD(r.len = WIRE_BODY_MAX + 1);
	t = WIRE_READY;
	BAD(r.status = ENOENT);
	BAD(r.status = 0x10000 + EACCES);
	t = WIRE_ERR;
	BAD(r.status = 0);
	BAD(r.status = -ENOENT);
	BAD(r.status = WIRE_STATUS_MAX + 1);
	BAD(r.status = INT32_MIN);
	BAD(r.len = 1);
	for (t = WIRE_GET; t <= WIRE_DATA; t++) {
		BAD(r.len = WIRE_LEN_MAX + 1);
		BAD((r.off = UINT64_MAX, r.len = 1));
		BAD((r.off = UINT64_MAX - 99, r.len = 100));
		BAD((r.off = 1ULL << 63, r.len = 0, r.len = WIRE_LEN_MAX, r.off = UINT64_MAX));
	}
	/* unknown types */
	t = WIRE_GET;
	BAD(r.type = 0);
	BAD(r.type = WIRE_ERR + 1);
	BAD(r.type = 255);
#undef BAD
	/* the edges that are fine */
	r = good(WIRE_GET);
	r.off = UINT64_MAX - 100;
	r.len = 100;
	CHECK_EQ(decode_raw(&r, &m, &body), 0);
	r.len = WIRE_LEN_MAX;
	r.off = 0;
	CHECK_EQ(decode_raw(&r, &m, &body), 0);
	r = good(WIRE_HELLO);
	r.flags = WIRE_F_SECRET;
	r.len = WIRE_BODY_MAX;
	CHECK_EQ(decode_raw(&r, &m, &body), 0);
	CHECK_EQ(body, WIRE_BODY_MAX);
}

/* HELLO with @node as its name bytes (@n of them): decode result */
static int hello_with(const char *node, size_t n)
{
	uint8_t buf[WIRE_HDR_LEN + 128];
	struct raw r = good(WIRE_HELLO);
	struct wire_msg m;

	r.len = WIRE_NONCE_LEN + n;
	raw_hdr(&r, buf);
	memset(buf + WIRE_HDR_LEN, 0x5a, WIRE_NONCE_LEN);
	memcpy(buf + WIRE_HDR_LEN + WIRE_NONCE_LEN, node, n);
	return decode_exact(buf, WIRE_HDR_LEN + r.len, &m);
}

TEST(bodies)
{
	struct wire_msg m, d;
	uint8_t buf[WIRE_MSG_MAX];
	size_t body;

	CHECK_EQ(hello_with("a", 1), WIRE_HDR_LEN + WIRE_NONCE_LEN + 1);
	CHECK_EQ(hello_with("node-7", 6), WIRE_HDR_LEN + WIRE_NONCE_LEN + 6);
	CHECK_EQ(hello_with("no\0de", 5), -EPROTO);
	CHECK_EQ(hello_with("node\0", 5), -EPROTO);
	CHECK_EQ(hello_with(".node", 5), -EPROTO);
	CHECK_EQ(hello_with("-node", 5), -EPROTO);
	CHECK_EQ(hello_with("no/de", 5), -EPROTO);
	CHECK_EQ(hello_with("nöde", 5), -EPROTO);
	CHECK_EQ(hello_with("a b", 3), -EPROTO);

	/* decode_body insists on the length the header gave */
	memset(&m, 0, sizeof(m));
	m.type = WIRE_AUTH;
	CHECK_EQ(wire_encode(&m, buf, sizeof(buf)), WIRE_HDR_LEN + WIRE_PROOF_LEN);
	CHECK_EQ(wire_decode_hdr(buf, &d, &body), 0);
	CHECK_EQ(body, WIRE_PROOF_LEN);
	CHECK_EQ(wire_decode_body(&d, buf + WIRE_HDR_LEN, body - 1), -EPROTO);
	CHECK_EQ(wire_decode_body(&d, buf + WIRE_HDR_LEN, body), 0);
	m.type = WIRE_GET;
	CHECK_EQ(wire_encode(&m, buf, sizeof(buf)), WIRE_HDR_LEN);
	CHECK_EQ(wire_decode_hdr(buf, &d, &body), 0);
	CHECK_EQ(body, 0);
	CHECK_EQ(wire_decode_body(&d, buf, 1), -EPROTO);
}

TEST(encode_rejects)
{
	struct wire_msg m;
	uint8_t buf[WIRE_MSG_MAX];

	memset(&m, 0, sizeof(m));
	m.type = WIRE_HELLO;
	CHECK_EQ(wire_encode(&m, buf, sizeof(buf)), -EINVAL); /* no name */
	strcpy(m.node, "..");
	CHECK_EQ(wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	strcpy(m.node, "ok");
	CHECK_EQ(wire_encode(&m, buf, WIRE_HDR_LEN + WIRE_NONCE_LEN + 1), -EINVAL); /* small */
	CHECK_EQ(wire_encode(&m, buf, WIRE_HDR_LEN + WIRE_NONCE_LEN + 2), 74);
	memset(m.node, 'n', sizeof(m.node)); /* not terminated */
	CHECK_EQ(wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	strcpy(m.node, "ok");
	m.reqid = 1;
	CHECK_EQ(wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.reqid = 0;
	m.flags = 2;
	CHECK_EQ(wire_encode(&m, buf, sizeof(buf)), -EINVAL);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_GET;
	m.len = WIRE_LEN_MAX + 1;
	CHECK_EQ(wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.len = 2;
	m.off = UINT64_MAX - 1;
	CHECK_EQ(wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.off = 0;
	CHECK_EQ(wire_encode(&m, buf, WIRE_HDR_LEN - 1), -EINVAL);
	m.status = 5;
	CHECK_EQ(wire_encode(&m, buf, sizeof(buf)), -EINVAL);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_ERR;
	CHECK_EQ(wire_encode(&m, buf, sizeof(buf)), -EINVAL); /* status 0 */
	m.status = ENOENT;
	m.len = 1;
	CHECK_EQ(wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.type = WIRE_READY;
	m.len = 0;
	CHECK_EQ(wire_encode(&m, buf, sizeof(buf)), -EINVAL); /* READY ENOENT */
	m.type = 0;
	CHECK_EQ(wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.type = 8;
	CHECK_EQ(wire_encode(&m, buf, sizeof(buf)), -EINVAL);
}

TEST(partial)
{
	struct wire_msg m;
	uint8_t buf[WIRE_MSG_MAX], bad[WIRE_HDR_LEN];
	size_t i;
	int n;

	memset(&m, 0, sizeof(m));
	m.type = WIRE_HELLO;
	strcpy(m.node, "partial");
	n = wire_encode(&m, buf, sizeof(buf));
	CHECK(n > WIRE_HDR_LEN);
	for (i = 0; i < (size_t)n; i++)
		CHECK_EQ(decode_exact(buf, i, &m), -EAGAIN);
	CHECK_EQ(decode_exact(buf, (size_t)n, &m), n);
	/* trailing bytes are the next message's business */
	CHECK_EQ(wire_decode(buf, sizeof(buf), &m), n);

	/* a prefix that can never become a message is refused at once */
	memcpy(bad, buf, sizeof(bad));
	bad[1] = 'X';
	CHECK_EQ(decode_exact(bad, 2, &m), -EPROTO);
	memcpy(bad, buf, sizeof(bad));
	bad[4] = 9;
	CHECK_EQ(decode_exact(bad, 5, &m), -EPROTO);
	memcpy(bad, buf, sizeof(bad));
	bad[5] = 0;
	CHECK_EQ(decode_exact(bad, 6, &m), -EPROTO);
	CHECK_EQ(decode_exact(bad, 0, &m), -EAGAIN);
}

/* xorshift64*: deterministic junk */
static uint64_t rnd_state = 88172645463325252ULL;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state >> 12;
	rnd_state ^= rnd_state << 25;
	rnd_state ^= rnd_state >> 27;
	return rnd_state * 2685821657736338717ULL;
}

/*
 * Random messages, mostly near-valid (a good header with one byte
 * changed): the decoder never crashes, and whatever it accepts encodes
 * back to exactly the same bytes (one encoding per message).
 */
TEST(junk)
{
	int round, accepted = 0, refused = 0;

	for (round = 0; round < 200000; round++) {
		uint8_t src[WIRE_MSG_MAX], again[WIRE_MSG_MAX];
		struct raw r = good((uint8_t)(1 + rnd() % 7));
		size_t len = WIRE_HDR_LEN + rnd() % (WIRE_BODY_MAX + 1), i;
		struct wire_msg m;
		int n;

		raw_hdr(&r, src);
		for (i = WIRE_HDR_LEN; i < sizeof(src); i++)
			src[i] = (uint8_t)('a' + rnd() % 26);
		if (round % 3 == 0)
			src[rnd() % WIRE_HDR_LEN] = (uint8_t)rnd();
		else if (round % 3 == 1)
			for (i = 0; i < len; i++)
				src[i] = (uint8_t)rnd();
		n = decode_exact(src, len, &m);
		if (n > 0) {
			accepted++;
			CHECK_EQ(wire_encode(&m, again, sizeof(again)), n);
			CHECK(!memcmp(src, again, (size_t)n));
		} else {
			refused++;
			CHECK(n == -EPROTO || n == -EAGAIN);
		}
	}
	CHECK(accepted > 1000);
	CHECK(refused > 1000);
}

int main(void)
{
	RUN(layout);
	RUN(roundtrips);
	RUN(good_headers);
	RUN(bad_headers);
	RUN(bodies);
	RUN(encode_rejects);
	RUN(partial);
	RUN(junk);
	return tap_done();
}
