/*
 * rdma_msg: the RDMA backend's message codec (docs/protocol.md, "RDMA"),
 * no I/O, so that the fuzz target can take it alone.
 */
#include "rdma_i.h"

#include <errno.h>
#include <string.h>

void transport_rmsg_encode(const struct rmsg *m, uint8_t *buf)
{
	put_u32(buf, RMSG_MAGIC);
	buf[4] = m->ver ? m->ver : RMSG_V1;
	buf[5] = m->type;
	buf[6] = m->flags;
	buf[7] = 0;
	put_u16(buf + 8, m->credits);
	put_u16(buf + 10, 0);
	put_u32(buf + 12, m->status);
	put_u64(buf + 16, m->tag);
	put_u64(buf + 24, m->id);
	put_u64(buf + 32, m->off);
	put_u64(buf + 40, m->len);
	put_u64(buf + 48, m->addr);
}

/* The flags a GET may carry in version @ver. */
static uint8_t get_flags_allowed(unsigned ver)
{
	return ver >= RMSG_V2 ? RM_F_EAGER | RM_F_PARTIAL_OK | RM_F_WANT_HAVE | RM_F_BUSY_OK
			      : RM_F_EAGER;
}

int transport_rmsg_decode(const uint8_t *buf, size_t len, struct rmsg *ret)
{
	size_t body;

	if (len < RMSG_HDR || get_u32(buf) != RMSG_MAGIC ||
	    (buf[4] != RMSG_V1 && buf[4] != RMSG_V2))
		return -EPROTO;
	if (buf[7] || buf[10] || buf[11])
		return -EPROTO;
	memset(ret, 0, sizeof(*ret));
	ret->ver = buf[4];
	ret->type = buf[5];
	ret->flags = buf[6];
	ret->credits = (uint16_t)(buf[8] | buf[9] << 8);
	ret->status = get_u32(buf + 12);
	ret->tag = get_u64(buf + 16);
	ret->id = get_u64(buf + 24);
	ret->off = get_u64(buf + 32);
	ret->len = get_u64(buf + 40);
	ret->addr = get_u64(buf + 48);
	body = len - RMSG_HDR;
	if (ret->off > UINT64_MAX - ret->len || ret->len > WIRE_LEN_MAX)
		return -EPROTO;
	switch (ret->type) {
	case RM_AUTH:
		return ret->len == body && body <= WIRE_MSG_MAX ? 0 : -EPROTO;
	case RM_DATA:
		return ret->len == body ? 0 : -EPROTO;
	case RM_ERR:
		return !body && ret->status && ret->status <= WIRE_STATUS_MAX ? 0 : -EPROTO;
	case RM_GET:
		if (body || ret->flags & ~get_flags_allowed(ret->ver))
			return -EPROTO;
		/* a HAVE before the bytes is TCP's alone */
		return (ret->flags & RM_F_WANT_HAVE) && ret->len ? -EPROTO : 0;
	case RM_HAVE:
		return ret->ver >= RMSG_V2 && !ret->flags && !ret->status && ret->len == body &&
			       body >= WIRE_HDR_LEN + WIRE_HAVE_FIXED && body <= WIRE_MSG_MAX_V2
			   ? 0
			   : -EPROTO;
	case RM_RDV:
	case RM_FIN:
	case RM_CREDIT:
		return !body ? 0 : -EPROTO;
	default:
		return -EPROTO;
	}
}
