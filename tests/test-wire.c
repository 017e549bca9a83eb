/*
 * test-wire: the transport's message codec (transport/wire.c).
 *
 * Headers are built here byte by byte (raw_hdr(), raw_have()),
 * independently of the encoder, so the layout in docs/protocol.md is what
 * is checked, for version 1 and version 2 (GET flags, HAVE).  Every
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

/* a valid header of @type in version @ver (bodies: the shortest legal
 * length; a HAVE's is that of 1..8 blocks) */
static struct raw good_v(uint8_t ver, uint8_t type)
{
	struct raw r = {.magic = WIRE_MAGIC, .version = ver, .type = type};

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
	case WIRE_HAVE:
		r.reqid = 7;
		r.id = 0x1234;
		r.off = 4096;
		r.len = WIRE_HAVE_FIXED + 2;
		break;
	}
	return r;
}

static struct raw good(uint8_t type)
{
	return good_v(WIRE_V1, type);
}

/* decode_hdr of exactly these 40 bytes, from an exact-size heap copy */
static int decode_raw(const struct raw *r, struct wire_msg *m, size_t *body)
{
	uint8_t *buf = malloc(WIRE_HDR_LEN);
	int err;

	raw_hdr(r, buf);
	err = transport_wire_decode_hdr(buf, m, body);
	free(buf);
	return err;
}

static int decode_exact(const uint8_t *src, size_t len, struct wire_msg *m)
{
	uint8_t *buf = malloc(len ? len : 1);
	int n;

	memcpy(buf, src, len);
	n = transport_wire_decode(buf, len, m);
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
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), WIRE_HDR_LEN);
	CHECK(!memcmp(buf, want, sizeof(want)));
	CHECK_STR(transport_wire_type_name(WIRE_CHALLENGE), "CHALLENGE");
	CHECK_STR(transport_wire_type_name(0), "unknown");
	CHECK_STR(transport_wire_type_name(200), "unknown");
}

static void roundtrip(const struct wire_msg *m, int want_len)
{
	uint8_t buf[WIRE_MSG_MAX];
	struct wire_msg out;
	int n = transport_wire_encode(m, buf, sizeof(buf));

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
		BAD(r.version = 3);
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
	BAD(r.type = WIRE_ERR + 1); /* HAVE is version 2's */
	BAD(r.type = 255);
	/* version 1 knows no GET flags */
	BAD(r.flags = WIRE_F_PARTIAL_OK);
	BAD(r.flags = WIRE_F_WANT_HAVE);
#undef BAD
	/* the edges that are fine */
	r = good(WIRE_GET);
	r.off = UINT64_MAX - 100;
	r.len = 100;
	CHECK_EQ(decode_raw(&r, &m, &body), 0);
	CHECK_EQ(m.ver, WIRE_V1);
	r.len = WIRE_LEN_MAX;
	r.off = 0;
	CHECK_EQ(decode_raw(&r, &m, &body), 0);
	r = good(WIRE_HELLO);
	r.flags = WIRE_F_SECRET;
	r.len = WIRE_BODY_MAX;
	CHECK_EQ(decode_raw(&r, &m, &body), 0);
	CHECK_EQ(body, WIRE_BODY_MAX);
}

/* Version 2: every type of version 1, under the same rules, plus GET
 * flags and HAVE. */
TEST(headers_v2)
{
	struct wire_msg m;
	struct raw r;
	size_t body;
	uint8_t t;

#define BAD(expr)                                             \
	do {                                                  \
		r = good_v(WIRE_V2, t);                       \
		expr;                                         \
		CHECK_EQ(decode_raw(&r, &m, &body), -EPROTO); \
	} while (0)

	for (t = WIRE_HELLO; t <= WIRE_HAVE; t++) {
		r = good_v(WIRE_V2, t);
		CHECK_EQ(decode_raw(&r, &m, &body), 0);
		CHECK_EQ(m.ver, WIRE_V2);
		CHECK_EQ(m.type, t);
		CHECK_EQ(body, t <= WIRE_AUTH || t == WIRE_HAVE ? r.len : 0);
		BAD(r.flags = 0x8000);
		BAD(r.flags = 0x0010);
		if (t != WIRE_ERR && t != WIRE_HAVE)
			BAD(r.status = 1);
		if (t != WIRE_ERR)
			BAD(r.status = -1);
		if (t != WIRE_GET && t != WIRE_HELLO)
			BAD(r.flags = WIRE_F_BUSY_OK);
		if (t != WIRE_GET && t != WIRE_HELLO)
			BAD(r.flags = WIRE_F_WANT_HAVE);
		if (t != WIRE_GET && t != WIRE_HELLO && t != WIRE_HAVE)
			BAD(r.flags = WIRE_F_PARTIAL_OK);
		BAD(r.len = UINT64_MAX);
	}
	t = WIRE_GET;
	r = good_v(WIRE_V2, t);
	r.flags = WIRE_F_PARTIAL_OK | WIRE_F_WANT_HAVE | WIRE_F_BUSY_OK | WIRE_F_PARK;
	CHECK_EQ(decode_raw(&r, &m, &body), 0);
	CHECK_EQ(m.flags, WIRE_F_PARTIAL_OK | WIRE_F_WANT_HAVE | WIRE_F_BUSY_OK | WIRE_F_PARK);
	r.len = 0; /* a query */
	CHECK_EQ(decode_raw(&r, &m, &body), 0);
	t = WIRE_HAVE;
	r = good_v(WIRE_V2, t);
	r.flags = WIRE_F_HAVE_DATA;
	CHECK_EQ(decode_raw(&r, &m, &body), 0);
	r.len = WIRE_HAVE_BODY_MAX;
	CHECK_EQ(decode_raw(&r, &m, &body), 0);
	CHECK_EQ(body, WIRE_HAVE_BODY_MAX);
	CHECK_EQ(WIRE_HAVE_BODY_MAX, 8 + 2 * 512);
	CHECK_EQ(WIRE_BODY_MAX_V2, WIRE_HAVE_BODY_MAX);
	BAD(r.len = WIRE_HAVE_FIXED - 1);
	BAD(r.len = WIRE_HAVE_FIXED + 1); /* two bitmaps of one size */
	BAD(r.len = WIRE_HAVE_BODY_MAX + 2);
	BAD(r.len = 1ULL << 32);
	/* the status of a HAVE is its retry_ms: the body says if it may be
	 * set (have_bounds) */
	r = good_v(WIRE_V2, t);
	r.status = TRANSPORT_RETRY_MS_MAX;
	CHECK_EQ(decode_raw(&r, &m, &body), 0);
	BAD(r.status = TRANSPORT_RETRY_MS_MAX + 1);
	/* a HAVE is version 2 only, whatever else is right */
	r = good_v(WIRE_V1, WIRE_HAVE);
	CHECK_EQ(decode_raw(&r, &m, &body), -EPROTO);
#undef BAD
}

/* A HAVE, byte by byte: header then body; returns the length. */
static size_t raw_have(uint8_t *out, uint8_t ver, uint16_t hflags, uint8_t shift, uint8_t flags,
		       uint16_t load, uint32_t nblocks, uint64_t body_len, const uint8_t *have,
		       const uint8_t *fetching, size_t map)
{
	struct raw r = good_v(ver, WIRE_HAVE);

	r.flags = hflags;
	r.len = body_len;
	raw_hdr(&r, out);
	out[WIRE_HDR_LEN] = shift;
	out[WIRE_HDR_LEN + 1] = flags;
	le(out + WIRE_HDR_LEN + 2, load, 2);
	le(out + WIRE_HDR_LEN + 4, nblocks, 4);
	memcpy(out + WIRE_HDR_LEN + 8, have, map);
	memcpy(out + WIRE_HDR_LEN + 8 + map, fetching, map);
	return WIRE_HDR_LEN + WIRE_HAVE_FIXED + 2 * map;
}

TEST(layout_v2)
{
	static const uint8_t want_get[WIRE_HDR_LEN] = {
	    'O', 'B', 'J', 'F', 2, WIRE_GET, 0x03, 0, /* version 2, PARTIAL_OK | WANT_HAVE */
	    0,	 0,   0,   0,	9, 0,	     0,	   0, /* status, reqid 9 */
	    5,	 0,   0,   0,	0, 0,	     0,	   0, /* id 5 */
	    0,	 0,   0,   0,	0, 0,	     0,	   0, /* offset 0 */
	    0,	 0,   0,   0,	0, 0,	     0,	   0, /* length 0: a query */
	};
	struct wire_msg m = {.ver = WIRE_V2,
			     .type = WIRE_GET,
			     .flags = WIRE_F_PARTIAL_OK | WIRE_F_WANT_HAVE,
			     .reqid = 9,
			     .id = 5};
	uint8_t buf[WIRE_MSG_MAX_V2], want[WIRE_MSG_MAX_V2];
	uint8_t have[2] = {0xa5, 0x03}, fetching[2] = {0x40, 0x00};
	size_t n;

	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), WIRE_HDR_LEN);
	CHECK(!memcmp(buf, want_get, sizeof(want_get)));
	CHECK_STR(transport_wire_type_name(WIRE_HAVE), "HAVE");

	/* a HAVE of 10 blocks of 8 MiB: 2 bytes per bitmap */
	memset(&m, 0, sizeof(m));
	m.ver = WIRE_V2;
	m.type = WIRE_HAVE;
	m.flags = WIRE_F_HAVE_DATA;
	m.reqid = 7;
	m.id = 0x1234;
	m.off = 4096;
	m.have.shift = 23;
	m.have.load = 0x0102;
	m.have.nblocks = 10;
	memcpy(m.have.have, have, 2);
	memcpy(m.have.fetching, fetching, 2);
	n = raw_have(want, WIRE_V2, WIRE_F_HAVE_DATA, 23, 0, 0x0102, 10, WIRE_HAVE_FIXED + 4, have,
		     fetching, 2);
	CHECK_EQ(n, WIRE_HDR_LEN + 12);
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), (int)n);
	CHECK(!memcmp(buf, want, n));
	/* too small a buffer for the body */
	CHECK_EQ(transport_wire_encode(&m, buf, n - 1), -EINVAL);
	/* version 1 has no HAVE, and no GET flags */
	m.ver = WIRE_V1;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_GET;
	m.flags = WIRE_F_PARTIAL_OK;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.ver = WIRE_V2;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), WIRE_HDR_LEN);
	m.flags = WIRE_F_BUSY_OK | WIRE_F_PARK;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), WIRE_HDR_LEN);
	m.flags = 16;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.flags = 0;
	m.ver = 3;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
}

/* @h encoded, decoded from an exact-size copy, is @h again */
static void have_roundtrip(const struct transport_have *h)
{
	struct wire_msg m = {.ver = WIRE_V2, .type = WIRE_HAVE, .reqid = 3, .id = 4, .off = 5};
	uint8_t buf[WIRE_MSG_MAX_V2];
	struct wire_msg out;
	int n;

	m.have = *h;
	n = transport_wire_encode(&m, buf, sizeof(buf));
	CHECK_EQ(n, WIRE_HDR_LEN + WIRE_HAVE_FIXED + 2 * ((h->nblocks + 7) / 8));
	if (n < 0)
		return;
	memset(&out, 0xa5, sizeof(out));
	CHECK_EQ(decode_exact(buf, (size_t)n, &out), n);
	CHECK_EQ(out.ver, WIRE_V2);
	CHECK_EQ(out.type, WIRE_HAVE);
	CHECK(out.reqid == 3 && out.id == 4 && out.off == 5);
	CHECK_EQ(out.len, n - WIRE_HDR_LEN);
	CHECK(!memcmp(&out.have, h, sizeof(*h)));
	/* and encodes back to the same bytes: the header's status was its
	 * retry_ms, the message has none (the fuzzer found a busy HAVE that
	 * did not) */
	CHECK_EQ(out.status, 0);
	{
		uint8_t again[WIRE_MSG_MAX_V2];

		CHECK_EQ(transport_wire_encode(&out, again, sizeof(again)), n);
		CHECK(!memcmp(again, buf, (size_t)n));
	}
}

TEST(have_codec)
{
	static const uint32_t counts[] = {1, 7, 8, 9, 63, 64, 65, 1000, 4095, 4096};
	struct transport_have h;
	size_t i, k;

	for (i = 0; i < ARRAY_SIZE(counts); i++) {
		memset(&h, 0, sizeof(h));
		h.shift = (uint8_t)(20 + i);
		h.load = (uint16_t)(i * 1000);
		h.nblocks = counts[i];
		for (k = 0; k < counts[i]; k++) {
			if ((k * 7 + i) % 3 == 0)
				h.have[k / 8] |= (uint8_t)(1 << (k % 8));
			else if ((k + i) % 5 == 0)
				h.fetching[k / 8] |= (uint8_t)(1 << (k % 8));
		}
		have_roundtrip(&h);
		h.flags = TRANSPORT_HAVE_SEALED;
		have_roundtrip(&h);
		h.flags = TRANSPORT_HAVE_BUSY;
		h.retry_ms = (uint16_t)(50 + i);
		have_roundtrip(&h);
		h.retry_ms = 0;
	}
	/* a sealed holder may say nothing of blocks */
	memset(&h, 0, sizeof(h));
	h.flags = TRANSPORT_HAVE_SEALED;
	h.load = UINT16_MAX;
	have_roundtrip(&h);
	CHECK(transport_wire_have_ok(&h));
	/* every bit of the largest */
	memset(&h, 0, sizeof(h));
	h.shift = 63;
	h.nblocks = TRANSPORT_HAVE_BLOCKS_MAX;
	memset(h.have, 0xff, sizeof(h.have));
	memset(h.fetching, 0xff, sizeof(h.fetching));
	have_roundtrip(&h);
	CHECK_EQ(sizeof(h.have), 512);
}

/* decode of a HAVE built by hand, with @status in its header: the
 * result, and the retry_ms decoded in *@ret_retry (if not NULL) */
static int have_decode_st(int32_t status, uint32_t nblocks, uint64_t body_len, uint8_t shift,
			  uint8_t flags, const uint8_t *have, const uint8_t *fetching, size_t map,
			  unsigned *ret_retry)
{
	uint8_t buf[WIRE_HDR_LEN + WIRE_HAVE_BODY_MAX + 64];
	struct wire_msg m;
	size_t n;
	int r;

	n = raw_have(buf, WIRE_V2, 0, shift, flags, 1, nblocks, body_len, have, fetching, map);
	le(buf + 8, (uint32_t)status, 4);
	memset(&m, 0, sizeof(m));
	r = decode_exact(buf, n, &m);
	if (ret_retry)
		*ret_retry = m.have.retry_ms;
	return r;
}

static int have_decode(uint32_t nblocks, uint64_t body_len, uint8_t shift, uint8_t flags,
		       const uint8_t *have, const uint8_t *fetching, size_t map)
{
	return have_decode_st(0, nblocks, body_len, shift, flags, have, fetching, map, NULL);
}

TEST(have_bounds)
{
	static uint8_t ones[520], zeros[520];
	struct transport_have h;
	struct wire_msg m = {.ver = WIRE_V2, .type = WIRE_HAVE};
	uint8_t buf[WIRE_MSG_MAX_V2];
	uint8_t edge[2] = {0xff, 0x01};

	memset(ones, 0xff, sizeof(ones));
	/* the good ones, for contrast */
	CHECK_EQ(have_decode(9, 8 + 4, 23, 0, edge, edge, 2), WIRE_HDR_LEN + 12);
	CHECK_EQ(have_decode(4096, 8 + 1024, 23, 0, ones, ones, 512), WIRE_HDR_LEN + 1032);
	CHECK_EQ(have_decode(0, 8, 0, TRANSPORT_HAVE_SEALED, zeros, zeros, 0), WIRE_HDR_LEN + 8);
	/* nblocks 0 of a holder that is not sealed says nothing */
	CHECK_EQ(have_decode(0, 8, 23, 0, zeros, zeros, 0), -EPROTO);
	/* more blocks than a HAVE may have: 4097, whatever the length says */
	CHECK_EQ(have_decode(4097, 8 + 1026, 23, 0, zeros, zeros, 513), -EPROTO);
	CHECK_EQ(have_decode(4097, 8 + 1024, 23, 0, zeros, zeros, 512), -EPROTO);
	CHECK_EQ(have_decode(UINT32_MAX, 8 + 1024, 23, 0, zeros, zeros, 512), -EPROTO);
	/* truncated bitmaps: a length short of what nblocks needs */
	CHECK_EQ(have_decode(16, 8 + 2, 23, 0, zeros, zeros, 1), -EPROTO);
	CHECK_EQ(have_decode(4096, 8 + 1022, 23, 0, zeros, zeros, 511), -EPROTO);
	CHECK_EQ(have_decode(1, 8, 23, 0, zeros, zeros, 0), -EPROTO);
	/* and longer */
	CHECK_EQ(have_decode(8, 8 + 4, 23, 0, zeros, zeros, 2), -EPROTO);
	/* bits beyond nblocks, in either bitmap */
	CHECK_EQ(have_decode(9, 8 + 4, 23, 0, (const uint8_t[]){0, 2}, zeros, 2), -EPROTO);
	CHECK_EQ(have_decode(9, 8 + 4, 23, 0, zeros, (const uint8_t[]){0, 0x80}, 2), -EPROTO);
	/* unknown flags; a shift past 63 */
	CHECK_EQ(have_decode(9, 8 + 4, 23, 4, zeros, zeros, 2), -EPROTO);
	/* busy: with a retry_ms in 1..60000, and only then */
	{
		unsigned retry = 0;

		CHECK_EQ(
		    have_decode_st(250, 9, 8 + 4, 23, TRANSPORT_HAVE_BUSY, zeros, zeros, 2, &retry),
		    WIRE_HDR_LEN + 12);
		CHECK_EQ(retry, 250);
		CHECK_EQ(have_decode_st(TRANSPORT_RETRY_MS_MAX, 0, 8, 0,
					TRANSPORT_HAVE_SEALED | TRANSPORT_HAVE_BUSY, zeros, zeros,
					0, NULL),
			 WIRE_HDR_LEN + 8);
		CHECK_EQ(have_decode(9, 8 + 4, 23, TRANSPORT_HAVE_BUSY, zeros, zeros, 2), -EPROTO);
		CHECK_EQ(have_decode_st(1, 9, 8 + 4, 23, 0, zeros, zeros, 2, NULL), -EPROTO);
		CHECK_EQ(have_decode_st(TRANSPORT_RETRY_MS_MAX + 1, 9, 8 + 4, 23,
					TRANSPORT_HAVE_BUSY, zeros, zeros, 2, NULL),
			 -EPROTO);
		CHECK_EQ(
		    have_decode_st(-1, 9, 8 + 4, 23, TRANSPORT_HAVE_BUSY, zeros, zeros, 2, NULL),
		    -EPROTO);
	}
	CHECK_EQ(have_decode(9, 8 + 4, 64, 0, zeros, zeros, 2), -EPROTO);

	/* the encoder keeps the same rules */
	memset(&h, 0, sizeof(h));
	m.have = h;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL); /* nblocks 0, not sealed */
	m.have.nblocks = TRANSPORT_HAVE_BLOCKS_MAX + 1;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.have.nblocks = 9;
	m.have.have[1] = 2;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.have.have[1] = 1;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), WIRE_HDR_LEN + 12);
	m.have.fetching[511] = 1;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.have.fetching[511] = 0;
	m.have.shift = 64;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.have.shift = 0;
	m.status = 1; /* a HAVE's status is its have.retry_ms */
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.status = 0;
	m.have.retry_ms = 5; /* without BUSY */
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.have.flags = TRANSPORT_HAVE_BUSY;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), WIRE_HDR_LEN + 12);
	CHECK_EQ(buf[8], 5); /* in the header's status */
	m.have.retry_ms = 0;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.have.retry_ms = TRANSPORT_RETRY_MS_MAX + 1;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
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
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), WIRE_HDR_LEN + WIRE_PROOF_LEN);
	CHECK_EQ(transport_wire_decode_hdr(buf, &d, &body), 0);
	CHECK_EQ(body, WIRE_PROOF_LEN);
	CHECK_EQ(transport_wire_decode_body(&d, buf + WIRE_HDR_LEN, body - 1), -EPROTO);
	CHECK_EQ(transport_wire_decode_body(&d, buf + WIRE_HDR_LEN, body), 0);
	m.type = WIRE_GET;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), WIRE_HDR_LEN);
	CHECK_EQ(transport_wire_decode_hdr(buf, &d, &body), 0);
	CHECK_EQ(body, 0);
	CHECK_EQ(transport_wire_decode_body(&d, buf, 1), -EPROTO);
}

TEST(encode_rejects)
{
	struct wire_msg m;
	uint8_t buf[WIRE_MSG_MAX];

	memset(&m, 0, sizeof(m));
	m.type = WIRE_HELLO;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL); /* no name */
	strcpy(m.node, "..");
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	strcpy(m.node, "ok");
	CHECK_EQ(transport_wire_encode(&m, buf, WIRE_HDR_LEN + WIRE_NONCE_LEN + 1),
		 -EINVAL); /* small */
	CHECK_EQ(transport_wire_encode(&m, buf, WIRE_HDR_LEN + WIRE_NONCE_LEN + 2), 74);
	memset(m.node, 'n', sizeof(m.node)); /* not terminated */
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	strcpy(m.node, "ok");
	m.reqid = 1;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.reqid = 0;
	m.flags = 2;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_GET;
	m.len = WIRE_LEN_MAX + 1;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.len = 2;
	m.off = UINT64_MAX - 1;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.off = 0;
	CHECK_EQ(transport_wire_encode(&m, buf, WIRE_HDR_LEN - 1), -EINVAL);
	m.status = 5;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_ERR;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL); /* status 0 */
	m.status = ENOENT;
	m.len = 1;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.type = WIRE_READY;
	m.len = 0;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL); /* READY ENOENT */
	m.type = 0;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.type = WIRE_HAVE; /* version 1 (0 is 1) */
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
	m.ver = WIRE_V2;
	m.type = WIRE_HAVE + 1;
	CHECK_EQ(transport_wire_encode(&m, buf, sizeof(buf)), -EINVAL);
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
	n = transport_wire_encode(&m, buf, sizeof(buf));
	CHECK(n > WIRE_HDR_LEN);
	for (i = 0; i < (size_t)n; i++)
		CHECK_EQ(decode_exact(buf, i, &m), -EAGAIN);
	CHECK_EQ(decode_exact(buf, (size_t)n, &m), n);
	/* trailing bytes are the next message's business */
	CHECK_EQ(transport_wire_decode(buf, sizeof(buf), &m), n);

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
	/* HAVE: a prefix of version 2 may grow into one, of version 1 never */
	memcpy(bad, buf, sizeof(bad));
	bad[4] = WIRE_V2;
	bad[5] = WIRE_HAVE;
	CHECK_EQ(decode_exact(bad, 6, &m), -EAGAIN);
	bad[4] = WIRE_V1;
	CHECK_EQ(decode_exact(bad, 6, &m), -EPROTO);
	{
		uint8_t hb[WIRE_MSG_MAX_V2];
		struct wire_msg h = {.ver = WIRE_V2, .type = WIRE_HAVE};

		h.have.nblocks = 100;
		h.have.have[3] = 0x11;
		n = transport_wire_encode(&h, hb, sizeof(hb));
		CHECK_EQ(n, WIRE_HDR_LEN + 8 + 26);
		for (i = 0; i < (size_t)n; i += 3)
			CHECK_EQ(decode_exact(hb, i, &m), -EAGAIN);
		CHECK_EQ(decode_exact(hb, (size_t)n, &m), n);
	}
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
		uint8_t src[WIRE_MSG_MAX_V2], again[WIRE_MSG_MAX_V2];
		uint8_t ver = round % 2 ? WIRE_V2 : WIRE_V1;
		struct raw r = good_v(ver, (uint8_t)(1 + rnd() % (ver == WIRE_V2 ? 8 : 7)));
		size_t len = WIRE_HDR_LEN + rnd() % (WIRE_BODY_MAX_V2 + 1), i;
		struct wire_msg m;
		int n;

		if (r.type == WIRE_HAVE) {
			/* a well-formed body, mostly: bits only below nblocks */
			uint32_t nb = (uint32_t)(1 + rnd() % TRANSPORT_HAVE_BLOCKS_MAX);

			r.len = WIRE_HAVE_FIXED + 2 * ((nb + 7) / 8);
			len = WIRE_HDR_LEN + (size_t)r.len;
			memset(src, 0, sizeof(src));
			le(src + WIRE_HDR_LEN + 4, nb, 4);
			for (i = 0; i < nb; i += 1 + rnd() % 16)
				src[WIRE_HDR_LEN + 8 + i / 8] |= (uint8_t)(1 << (i % 8));
			raw_hdr(&r, src);
		} else {
			raw_hdr(&r, src);
			for (i = WIRE_HDR_LEN; i < sizeof(src); i++)
				src[i] = (uint8_t)('a' + rnd() % 26);
		}
		if (round % 3 == 0)
			src[rnd() % WIRE_HDR_LEN] = (uint8_t)rnd();
		else if (round % 3 == 1)
			for (i = 0; i < len; i++)
				src[i] = (uint8_t)rnd();
		n = decode_exact(src, len, &m);
		if (n > 0) {
			accepted++;
			CHECK_EQ(transport_wire_encode(&m, again, sizeof(again)), n);
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
	RUN(headers_v2);
	RUN(layout_v2);
	RUN(have_codec);
	RUN(have_bounds);
	RUN(bodies);
	RUN(encode_rejects);
	RUN(partial);
	RUN(junk);
	return tap_done();
}
