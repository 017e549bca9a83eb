/*
 * fetch_source: this node's store as the source the transport serves
 * other nodes from.  open() pins a sealed object with a store reference
 * for as long as its pages are on the wire; objects being written or
 * fetched here are not served (-ENOENT), so a peer never reads bytes that
 * are not final.
 */
#include "fetch_i.h"

#include <errno.h>

static int src_open(void *ctx, uint64_t id, uint64_t *ret_size, void **ret_token)
{
	struct store_obj *o = store_lookup(ctx, id);

	if (!o)
		return -ENOENT;
	if (!store_obj_sealed(o)) {
		store_obj_unref(o);
		return -ENOENT;
	}
	*ret_size = store_obj_size(o);
	*ret_token = o;
	return 0;
}

static int src_iov(void *token, uint64_t off, size_t len, struct iovec *iov, int max_iov,
		   size_t *ret_bytes)
{
	return store_obj_iov(token, off, len, iov, max_iov, ret_bytes);
}

static void src_close(void *token)
{
	store_obj_unref(token);
}

void fetch_source_init(struct transport_source *ret, struct store *s)
{
	ret->open = src_open;
	ret->iov = src_iov;
	ret->close = src_close;
	ret->ctx = s;
}
