/*
 * wire: encode and decode the messages described in wire.h and
 * docs/protocol.md.
 *
 * One function, check_hdr(), holds every rule about header fields; both
 * wire_encode() (-EINVAL) and wire_decode_hdr() (-EPROTO) go through it,
 * so what we send and what we accept cannot drift apart.  Integers are
 * read and written byte by byte, so the code does not care about the
 * host's byte order or alignment.  Nothing here allocates: the largest
 * thing a peer can make us hold is a WIRE_BODY_MAX body, in a buffer the
 * caller owns.
 */
#include "wire.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

const char *wire_type_name(unsigned type)
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
	}
	return "unknown";
}

/* ---- the rules ---- */

static bool is_handshake(unsigned type)
{
	return type >= WIRE_HELLO && type <= WIRE_READY;
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
 * Every rule about the header fields of @m, whose length field on the
 * wire is @len.  The version and magic are the decoder's business.
 */
static bool check_hdr(const struct wire_msg *m, uint64_t len)
{
	if (m->type < WIRE_HELLO || m->type > WIRE_ERR)
		return false;
	if (m->flags & ~(m->type == WIRE_HELLO ? WIRE_F_SECRET : 0))
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
	default:
		if (m->status)
			return false;
	}
	if (is_handshake(m->type))
		return !m->reqid && !m->id && !m->off && body_len_ok(m->type, len);
	if (m->type == WIRE_ERR)
		return len == 0;
	/* GET, DATA */
	return len <= WIRE_LEN_MAX && m->off <= UINT64_MAX - len;
}

/* ---- encode ---- */

int wire_encode(const struct wire_msg *m, uint8_t *buf, size_t size)
{
	uint64_t len = m->len;
	size_t node_len = 0;
	uint8_t *body = buf + WIRE_HDR_LEN;

	if (m->type == WIRE_HELLO) {
		node_len = strnlen(m->node, sizeof(m->node));
		if (node_len == sizeof(m->node) || node_name_validate(m->node))
			return -EINVAL;
		len = WIRE_NONCE_LEN + node_len;
	} else if (m->type == WIRE_CHALLENGE) {
		len = WIRE_NONCE_LEN + WIRE_PROOF_LEN;
	} else if (m->type == WIRE_AUTH) {
		len = WIRE_PROOF_LEN;
	}
	if (!check_hdr(m, len))
		return -EINVAL;
	if (is_handshake(m->type) && size < WIRE_HDR_LEN + len)
		return -EINVAL;
	if (size < WIRE_HDR_LEN)
		return -EINVAL;

	put_u32(buf, WIRE_MAGIC);
	buf[4] = WIRE_VERSION;
	buf[5] = m->type;
	put_u16(buf + 6, m->flags);
	put_u32(buf + 8, (uint32_t)m->status);
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
	default:
		return WIRE_HDR_LEN;
	}
	return WIRE_HDR_LEN + (int)len;
}

/* ---- decode ---- */

int wire_decode_hdr(const uint8_t *buf, struct wire_msg *ret, size_t *ret_body)
{
	struct wire_msg m;

	if (get_u32(buf) != WIRE_MAGIC || buf[4] != WIRE_VERSION)
		return -EPROTO;
	memset(&m, 0, sizeof(m));
	m.type = buf[5];
	m.flags = get_u16(buf + 6);
	m.status = (int32_t)get_u32(buf + 8);
	m.reqid = get_u32(buf + 12);
	m.id = get_u64(buf + 16);
	m.off = get_u64(buf + 24);
	m.len = get_u64(buf + 32);
	if (!check_hdr(&m, m.len))
		return -EPROTO;
	*ret = m;
	*ret_body = is_handshake(m.type) ? (size_t)m.len : 0;
	return 0;
}

int wire_decode_body(struct wire_msg *m, const uint8_t *body, size_t len)
{
	size_t node_len;

	if (!is_handshake(m->type) ? len != 0 : len != m->len)
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
		if (node_name_validate(m->node))
			return -EPROTO;
		break;
	case WIRE_CHALLENGE:
		memcpy(m->nonce, body, WIRE_NONCE_LEN);
		memcpy(m->proof, body + WIRE_NONCE_LEN, WIRE_PROOF_LEN);
		break;
	case WIRE_AUTH:
		memcpy(m->proof, body, WIRE_PROOF_LEN);
		break;
	}
	return 0;
}

int wire_decode(const uint8_t *buf, size_t len, struct wire_msg *ret)
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
		if (len >= 5 && hdr[4] != WIRE_VERSION)
			return -EPROTO;
		if (len >= 6 && (hdr[5] < WIRE_HELLO || hdr[5] > WIRE_ERR))
			return -EPROTO;
		return -EAGAIN;
	}
	err = wire_decode_hdr(buf, &m, &body);
	if (err)
		return err;
	if (len - WIRE_HDR_LEN < body)
		return -EAGAIN;
	err = wire_decode_body(&m, buf + WIRE_HDR_LEN, body);
	if (err)
		return err;
	*ret = m;
	return WIRE_HDR_LEN + (int)body;
}
