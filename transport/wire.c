/*
 * wire: encode and decode the messages described in wire.h and
 * docs/protocol.md.
 *
 * One function, check_hdr(), holds every rule about header fields, and
 * one, transport_wire_have_ok(), every rule about a HAVE body; both transport_wire_encode()
 * (-EINVAL) and the decoders (-EPROTO) go through them, so what we send
 * and what we accept cannot drift apart.  The rules depend on the
 * version: version 1 knows neither HAVE nor GET flags, so a version 1
 * message decoded here is exactly what a version 1 peer would accept.
 * Integers are read and written byte by byte, so the code does not care
 * about the host's byte order or alignment.  Nothing here allocates: the
 * largest thing a peer can make us hold is a WIRE_BODY_MAX_V2 body, in a
 * buffer the caller owns, decoded into the fixed struct transport_have.
 */
#include "wire.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

const char *transport_wire_type_name(unsigned type)
{
	switch (type) {
	case WIRE_HELLO:
		return "HELLO";
	case WIRE_CHALLENGE:
		return "CHALLENGE";
	case WIRE_AUTH:
		return "AUTH";
	case WIRE_READY:
		return "READY";
	case WIRE_GET:
		return "GET";
	case WIRE_DATA:
		return "DATA";
	case WIRE_ERR:
		return "ERR";
	case WIRE_HAVE:
		return "HAVE";
	}
	return "unknown";
}

/* ---- the rules ---- */

static bool is_handshake(unsigned type)
{
	return type >= WIRE_HELLO && type <= WIRE_READY;
}

/* Does a message of @type carry a body (whose length is its length field)? */
static bool has_body(unsigned type)
{
	return is_handshake(type) || type == WIRE_HAVE;
}

static unsigned type_max(unsigned ver)
{
	return ver == WIRE_V2 ? WIRE_HAVE : WIRE_ERR;
}

/* The flags a message of @type may have in version @ver. */
static uint16_t flags_allowed(unsigned ver, unsigned type)
{
	switch (type) {
	case WIRE_HELLO:
		return WIRE_F_SECRET;
	case WIRE_GET:
		return ver == WIRE_V2
			   ? WIRE_F_PARTIAL_OK | WIRE_F_WANT_HAVE | WIRE_F_BUSY_OK | WIRE_F_PARK
			   : 0;
	case WIRE_HAVE:
		return WIRE_F_HAVE_DATA;
	default:
		return 0;
	}
}

static size_t have_map_len(uint32_t nblocks)
{
	return (nblocks + 7) / 8;
}

static size_t have_body_len(uint32_t nblocks)
{
	return WIRE_HAVE_FIXED + 2 * have_map_len(nblocks);
}

/* No bit at @nblocks or beyond in @map. */
static bool map_tail_clear(const uint8_t *map, uint32_t nblocks)
{
	size_t i = nblocks / 8;

	if (nblocks % 8 && (map[i++] >> (nblocks % 8)))
		return false;
	for (; i < TRANSPORT_HAVE_BLOCKS_MAX / 8; i++)
		if (map[i])
			return false;
	return true;
}

bool transport_wire_have_ok(const struct transport_have *h)
{
	if (h->flags & ~(TRANSPORT_HAVE_SEALED | TRANSPORT_HAVE_BUSY) || h->shift >= 64)
		return false;
	/* busy: says when to ask again; else nothing there */
	if ((h->flags & TRANSPORT_HAVE_BUSY) ? !h->retry_ms || h->retry_ms > TRANSPORT_RETRY_MS_MAX
					     : h->retry_ms)
		return false;
	if (h->nblocks > TRANSPORT_HAVE_BLOCKS_MAX)
		return false;
	if (!h->nblocks && !(h->flags & TRANSPORT_HAVE_SEALED))
		return false;
	return map_tail_clear(h->have, h->nblocks) && map_tail_clear(h->fetching, h->nblocks);
}

/* The body length a handshake message of @type may have. */
static bool body_len_ok(unsigned type, uint64_t len)
{
	switch (type) {
	case WIRE_HELLO:
		return len > WIRE_NONCE_LEN && len <= WIRE_NONCE_LEN + WIRE_NODE_MAX;
	case WIRE_CHALLENGE:
		return len == WIRE_NONCE_LEN + WIRE_PROOF_LEN;
	case WIRE_AUTH:
		return len == WIRE_PROOF_LEN;
	default:
		return len == 0;
	}
}

/*
 * Every rule about the header fields of @m, in version @ver, whose length
 * field on the wire is @len.  The magic is the decoder's business.
 */
static bool check_hdr(const struct wire_msg *m, unsigned ver, uint64_t len)
{
	if (ver != WIRE_V1 && ver != WIRE_V2)
		return false;
	if (m->type < WIRE_HELLO || m->type > type_max(ver))
		return false;
	if (m->flags & ~flags_allowed(ver, m->type))
		return false;
	switch (m->type) {
	case WIRE_READY:
		if (m->status != 0 && m->status != EACCES)
			return false;
		break;
	case WIRE_ERR:
		if (m->status <= 0 || m->status > WIRE_STATUS_MAX)
			return false;
		break;
	case WIRE_HAVE: /* its retry_ms: the body says whether it may be set */
		if (m->status < 0 || m->status > TRANSPORT_RETRY_MS_MAX)
			return false;
		break;
	default:
		if (m->status)
			return false;
	}
	if (is_handshake(m->type))
		return !m->reqid && !m->id && !m->off && body_len_ok(m->type, len);
	if (m->type == WIRE_ERR)
		return len == 0;
	if (m->type == WIRE_HAVE)
		return len >= have_body_len(0) && len <= WIRE_HAVE_BODY_MAX &&
		       (len - WIRE_HAVE_FIXED) % 2 == 0;
	/* GET, DATA */
	return len <= WIRE_LEN_MAX && m->off <= UINT64_MAX - len;
}

/* ---- encode ---- */

int transport_wire_encode(const struct wire_msg *m, uint8_t *buf, size_t size)
{
	unsigned ver = m->ver ? m->ver : WIRE_V1;
	const struct transport_have *h = &m->have;
	uint64_t len = m->len;
	size_t node_len = 0, map;
	uint8_t *body = buf + WIRE_HDR_LEN;

	if (m->type == WIRE_HELLO) {
		node_len = strnlen(m->node, sizeof(m->node));
		if (node_len == sizeof(m->node) || util_node_name_validate(m->node))
			return -EINVAL;
		len = WIRE_NONCE_LEN + node_len;
	} else if (m->type == WIRE_CHALLENGE) {
		len = WIRE_NONCE_LEN + WIRE_PROOF_LEN;
	} else if (m->type == WIRE_AUTH) {
		len = WIRE_PROOF_LEN;
	} else if (m->type == WIRE_HAVE) {
		/* its status on the wire is have.retry_ms */
		if (!transport_wire_have_ok(h) || m->status)
			return -EINVAL;
		len = have_body_len(h->nblocks);
	}
	if (!check_hdr(m, ver, len))
		return -EINVAL;
	if (has_body(m->type) && size < WIRE_HDR_LEN + len)
		return -EINVAL;
	if (size < WIRE_HDR_LEN)
		return -EINVAL;

	put_u32(buf, WIRE_MAGIC);
	buf[4] = (uint8_t)ver;
	buf[5] = m->type;
	put_u16(buf + 6, m->flags);
	put_u32(buf + 8, m->type == WIRE_HAVE ? h->retry_ms : (uint32_t)m->status);
	put_u32(buf + 12, m->reqid);
	put_u64(buf + 16, m->id);
	put_u64(buf + 24, m->off);
	put_u64(buf + 32, len);

	switch (m->type) {
	case WIRE_HELLO:
		memcpy(body, m->nonce, WIRE_NONCE_LEN);
		memcpy(body + WIRE_NONCE_LEN, m->node, node_len);
		break;
	case WIRE_CHALLENGE:
		memcpy(body, m->nonce, WIRE_NONCE_LEN);
		memcpy(body + WIRE_NONCE_LEN, m->proof, WIRE_PROOF_LEN);
		break;
	case WIRE_AUTH:
		memcpy(body, m->proof, WIRE_PROOF_LEN);
		break;
	case WIRE_HAVE:
		map = have_map_len(h->nblocks);
		body[0] = h->shift;
		body[1] = h->flags;
		put_u16(body + 2, h->load);
		put_u32(body + 4, h->nblocks);
		memcpy(body + WIRE_HAVE_FIXED, h->have, map);
		memcpy(body + WIRE_HAVE_FIXED + map, h->fetching, map);
		break;
	default:
		return WIRE_HDR_LEN;
	}
	return WIRE_HDR_LEN + (int)len;
}

/* ---- decode ---- */

int transport_wire_decode_hdr(const uint8_t *buf, struct wire_msg *ret, size_t *ret_body)
{
	struct wire_msg m;

	if (get_u32(buf) != WIRE_MAGIC)
		return -EPROTO;
	memset(&m, 0, sizeof(m));
	m.ver = buf[4];
	m.type = buf[5];
	m.flags = get_u16(buf + 6);
	m.status = (int32_t)get_u32(buf + 8);
	m.reqid = get_u32(buf + 12);
	m.id = get_u64(buf + 16);
	m.off = get_u64(buf + 24);
	m.len = get_u64(buf + 32);
	if (!check_hdr(&m, m.ver, m.len))
		return -EPROTO;
	*ret = m;
	*ret_body = has_body(m.type) ? (size_t)m.len : 0;
	return 0;
}

/* A HAVE body: its length must be that of the nblocks it gives; the
 * header's status is its retry_ms. */
static int decode_have(struct transport_have *h, int32_t status, const uint8_t *body, size_t len)
{
	uint32_t nblocks = get_u32(body + 4);
	size_t map;

	if (nblocks > TRANSPORT_HAVE_BLOCKS_MAX || len != have_body_len(nblocks))
		return -EPROTO;
	map = have_map_len(nblocks);
	memset(h, 0, sizeof(*h));
	h->shift = body[0];
	h->flags = body[1];
	h->load = get_u16(body + 2);
	h->nblocks = nblocks;
	h->retry_ms = (uint16_t)status; /* check_hdr() bounded it */
	memcpy(h->have, body + WIRE_HAVE_FIXED, map);
	memcpy(h->fetching, body + WIRE_HAVE_FIXED + map, map);
	return transport_wire_have_ok(h) ? 0 : -EPROTO;
}

int transport_wire_decode_body(struct wire_msg *m, const uint8_t *body, size_t len)
{
	size_t node_len;

	if (!has_body(m->type) ? len != 0 : len != m->len)
		return -EPROTO;
	switch (m->type) {
	case WIRE_HELLO:
		node_len = len - WIRE_NONCE_LEN;
		/* check_hdr() bounded it; a NUL inside would hide the rest */
		if (node_len >= sizeof(m->node) || memchr(body + WIRE_NONCE_LEN, 0, node_len))
			return -EPROTO;
		memcpy(m->nonce, body, WIRE_NONCE_LEN);
		memcpy(m->node, body + WIRE_NONCE_LEN, node_len);
		m->node[node_len] = 0;
		if (util_node_name_validate(m->node))
			return -EPROTO;
		break;
	case WIRE_CHALLENGE:
		memcpy(m->nonce, body, WIRE_NONCE_LEN);
		memcpy(m->proof, body + WIRE_NONCE_LEN, WIRE_PROOF_LEN);
		break;
	case WIRE_AUTH:
		memcpy(m->proof, body, WIRE_PROOF_LEN);
		break;
	case WIRE_HAVE: {
		int r = decode_have(&m->have, m->status, body, len);

		/* the header's status was have.retry_ms: the message itself
		 * has none (transport_wire_encode() refuses one), so that it encodes
		 * back to its bytes */
		if (r == 0)
			m->status = 0;
		return r;
	}
	}
	return 0;
}

int transport_wire_decode(const uint8_t *buf, size_t len, struct wire_msg *ret)
{
	struct wire_msg m;
	size_t body;
	int err;

	if (len < WIRE_HDR_LEN) {
		uint8_t hdr[WIRE_HDR_LEN];

		/* a well-formed prefix is incomplete, anything else is bad:
		 * check what there is against a header with the rest zero */
		memset(hdr, 0, sizeof(hdr));
		memcpy(hdr, buf, len);
		if (len >= 4 && get_u32(hdr) != WIRE_MAGIC)
			return -EPROTO;
		if (len < 4 && memcmp(hdr, "OBJF", len))
			return -EPROTO;
		if (len >= 5 && hdr[4] != WIRE_V1 && hdr[4] != WIRE_V2)
			return -EPROTO;
		if (len >= 6 && (hdr[5] < WIRE_HELLO || hdr[5] > type_max(hdr[4])))
			return -EPROTO;
		return -EAGAIN;
	}
	err = transport_wire_decode_hdr(buf, &m, &body);
	if (err)
		return err;
	if (len - WIRE_HDR_LEN < body)
		return -EAGAIN;
	err = transport_wire_decode_body(&m, buf + WIRE_HDR_LEN, body);
	if (err)
		return err;
	*ret = m;
	return WIRE_HDR_LEN + (int)body;
}
