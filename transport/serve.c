/*
 * serve: answering a GET, for every backend.  A backend reads requests
 * and writes replies on its own kind of connection; what a reply holds,
 * and what serving it costs and counts, is decided here, the same way
 * for all of them.
 *
 * One GET flows like this (tcp.c's serve loop is the model):
 *
 *   serve_begin()   pins the object through t->src.open() and checks the
 *                   range.  The reply is an ERR (nothing pinned, the
 *                   request already counted as served) or a DATA header.
 *   serve_next()    while serve_more(): points iovecs at the next piece
 *                   of the pinned object (t->src.iov()), takes its bytes
 *                   from the bandwidth bucket and counts them as sent
 *                   (and, with the last piece, the request as served)
 *                   before the backend sends them, so that the counters
 *                   are up to date by the time the client has the bytes.
 *   serve_unsent()  sending failed: takes those counts back, logs.
 *   serve_end()     unpins.
 *
 * An empty range still has one piece, of no bytes, so that a backend
 * that sends the DATA header with the first piece sends it once.
 *
 * The bandwidth bucket (serve_bwlimit) is shared by every server
 * connection of a transport, under its own mutex.  Pieces shrink to the
 * bucket's burst, so that no single wait is long, and a wait is cut into
 * slices so that a server that is stopping is not held up by it.
 */
#define _GNU_SOURCE
#include "transport_i.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define BUCKET_BURST_MIN (64 * 1024)
#define BUCKET_BURST_MAX (1024 * 1024)
#define BUCKET_SLICE_NS (50 * 1000 * 1000)

/* ---- bandwidth bucket ---- */

void tbucket_init(struct tbucket *b, uint64_t rate)
{
	pthread_mutex_init(&b->lock, NULL);
	b->rate = rate;
	b->burst = rate / 8;
	if (b->burst < BUCKET_BURST_MIN)
		b->burst = BUCKET_BURST_MIN;
	if (b->burst > BUCKET_BURST_MAX)
		b->burst = BUCKET_BURST_MAX;
	b->tokens = (double)b->burst;
	b->last_ns = mono_ns();
}

void tbucket_release(struct tbucket *b)
{
	pthread_mutex_destroy(&b->lock);
}

/*
 * Take @n bytes from the bucket, sleeping off any debt, in slices so
 * that *@stop (set by a server that is stopping) ends the wait early.
 */
static void tbucket_take(struct tbucket *b, uint64_t n, const atomic_bool *stop)
{
	int64_t now, wait_ns, until;

	if (!b->rate)
		return;
	pthread_mutex_lock(&b->lock);
	now = mono_ns();
	b->tokens += (double)(now - b->last_ns) * (double)b->rate / 1e9;
	if (b->tokens > (double)b->burst)
		b->tokens = (double)b->burst;
	b->last_ns = now;
	b->tokens -= (double)n;
	wait_ns = b->tokens < 0 ? (int64_t)(-b->tokens * 1e9 / (double)b->rate) : 0;
	pthread_mutex_unlock(&b->lock);

	until = now + wait_ns;
	while (!(stop && atomic_load(stop))) {
		int64_t left = until - mono_ns();
		struct timespec ts;

		if (left <= 0)
			break;
		if (left > BUCKET_SLICE_NS)
			left = BUCKET_SLICE_NS;
		ts.tv_sec = 0;
		ts.tv_nsec = left;
		nanosleep(&ts, NULL);
	}
}

/* ---- one GET ---- */

int serve_begin(struct transport *t, const struct wire_msg *get, const char *peer, const char *node,
		struct serve_ctx *ret_ctx, struct wire_msg *ret_reply)
{
	const struct transport_source *src = &t->src;
	uint64_t size;
	void *token;
	int err;

	err = src->open(src->ctx, node ? node : "", get->id, &size, &token);
	if (err)
		goto reply_err;
	if (get->off > size || get->len > size - get->off) {
		src->close(token);
		err = -ERANGE;
		goto reply_err;
	}
	memset(ret_ctx, 0, sizeof(*ret_ctx));
	ret_ctx->t = t;
	ret_ctx->peer = peer;
	ret_ctx->id = get->id;
	ret_ctx->token = token;
	ret_ctx->off = get->off;
	ret_ctx->left = get->len;
	ret_ctx->more = true;
	*ret_reply = *get;
	ret_reply->type = WIRE_DATA;
	return 0;

reply_err:
	memset(ret_reply, 0, sizeof(*ret_reply));
	ret_reply->type = WIRE_ERR;
	ret_reply->reqid = get->reqid;
	ret_reply->id = get->id;
	ret_reply->off = get->off;
	ret_reply->status = -err > 0 && -err <= WIRE_STATUS_MAX ? -err : EIO;
	COUNT_ADD(t, requests_served, 1);
	return 1;
}

bool serve_more(const struct serve_ctx *ctx)
{
	return ctx->more;
}

int serve_next(struct serve_ctx *ctx, size_t max, struct iovec *iov, int max_iov, size_t *ret_bytes,
	       const atomic_bool *stop)
{
	struct transport *t = ctx->t;
	/* the node's one limit: an RDMA half takes from its parent's bucket */
	struct tbucket *b = t->parent ? &t->parent->bucket : &t->bucket;
	size_t want, bytes = 0;
	int n = 0, err;

	if (b->rate && max > b->burst)
		max = (size_t)b->burst;
	want = ctx->left < max ? (size_t)ctx->left : max;
	if (want) {
		n = t->src.iov(ctx->token, ctx->off, want, iov, max_iov, &bytes);
		if (n <= 0 || n > max_iov || bytes == 0 || bytes > want) {
			err = n < 0 ? n : -EIO;
			transport_log(t, TLOG_CONN, LOGL_WARN,
				      "transport: cannot read object %" PRIu64
				      " for %s at offset %" PRIu64 ": %s",
				      ctx->id, ctx->peer, ctx->off, strerror(-err));
			ctx->more = false;
			return err;
		}
		tbucket_take(b, bytes, stop);
	}
	COUNT_ADD(t, bytes_sent, bytes);
	if (bytes == ctx->left) {
		COUNT_ADD(t, requests_served, 1);
		ctx->served = true;
	}
	ctx->off += bytes;
	ctx->left -= bytes;
	ctx->more = ctx->left != 0;
	*ret_bytes = bytes;
	return n;
}

void serve_unsent(struct serve_ctx *ctx, size_t bytes, int err)
{
	struct transport *t = ctx->t;

	COUNT_SUB(t, bytes_sent, bytes);
	if (ctx->served)
		COUNT_SUB(t, requests_served, 1);
	ctx->served = false;
	ctx->more = false;
	transport_log(t, TLOG_CONN, LOGL_INFO,
		      "transport: sending object %" PRIu64 " to %s failed: %s", ctx->id, ctx->peer,
		      strerror(-err));
}

void serve_end(struct serve_ctx *ctx)
{
	ctx->t->src.close(ctx->token);
	ctx->token = NULL;
}
