/*
 * rdma_msg: the RDMA backend's message codec (docs/protocol.md, "RDMA"),
 * no I/O, so that the fuzz target can take it alone.
 */
#include "rdma_i.h"

#include <errno.h>
#include <string.h>

void rmsg_encode(const struct rmsg *m, uint8_t *buf)
{
	put_u32(buf, RMSG_MAGIC);
	buf[4] = RMSG_VERSION;
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

int rmsg_decode(const uint8_t *buf, size_t len, struct rmsg *ret)
{
	size_t body;

	if (len < RMSG_HDR || get_u32(buf) != RMSG_MAGIC || buf[4] != RMSG_VERSION)
		return -EPROTO;
	if (buf[7] || buf[10] || buf[11])
		return -EPROTO;
	memset(ret, 0, sizeof(*ret));
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
		return !body && !(ret->flags & ~RM_F_EAGER) ? 0 : -EPROTO;
	case RM_RDV:
	case RM_FIN:
	case RM_CREDIT:
		return !body ? 0 : -EPROTO;
	default:
		return -EPROTO;
	}
}
