/*
 * tcp: the TCP backend.
 *
 * Server: one listening socket, one accept thread, and one thread per
 * connection, within the limits transport_i.h describes; each runs the
 * handshake (auth.c), then writes what serve.c answers to each GET, the
 * payload with sendmsg() straight from the source's shared memory.
 * Client: a connection used by one fetch at a time (the cache in
 * transport.c), GET, a checked reply, readv() straight into the caller's
 * iovecs.  Sockets are non-blocking, and every wait is a bounded poll().
 * docs/protocol.md has the wire; docs/design.md, "The TCP backend", the
 * threads and limits, versions, tuning, timeouts and stopping.
 */
#define _GNU_SOURCE
#include "tcp_i.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define TCP_BACKLOG 128
#define TCP_CHUNK (1024 * 1024)
#define TCP_IOV_MAX 64
#define TCP_IDLE_MS (5 * 60 * 1000)
#define TCP_PROGRESS_STEP (256 * 1024)
/* the accept thread reports what the log rate limits held back */
#define TCP_FLUSH_MS 1000
#define TCP_STREAMS_PER_PEER 2
#define TCP_RANGE_MIN (8ULL << 20)

struct tcp_server;

/* One accepted connection. */
struct srv_conn {
	struct tcp_server *srv;
	pthread_t thread;
	int fd;			       /* -1 once its thread closed it (srv->lock) */
	bool done;		       /* its thread has finished (srv->lock) */
	bool authed;		       /* the handshake is over (srv->lock) */
	bool idle;		       /* waiting for the next request (srv->lock) */
	bool evicted;		       /* closed to make room, no longer counted (srv->lock) */
	int64_t since;		       /* mono ns: accepted, or idle since (srv->lock) */
	char node[OBJFS_NODE_MAX];     /* the peer's name, once authed (srv->lock) */
	char name[TRANSPORT_ADDR_MAX]; /* its address, for logs (fixed) */
	struct sockaddr_storage peer;
	socklen_t peer_len;
	struct srv_conn *next; /* srv->conns (srv->lock) */
};

struct tcp_server {
	struct transport *t;
	int listen_fd;
	int wake_fd; /* eventfd: wakes the accept thread */
	pthread_t accept_thread;
	atomic_bool stop;
	pthread_mutex_t lock;
	struct srv_conn *conns; /* every thread not yet joined (lock) */
	unsigned n_live;	/* connections counted: not evicted (lock) */
	unsigned n_hs;		/* of them, still in the handshake (lock) */
};

/* One client connection. */
struct tcp_conn {
	struct tconn base; /* first: transport.c sees only this */
	int fd;
	uint8_t ver; /* the wire version it speaks (its HELLO's) */
	uint32_t next_reqid;
	char peer[TRANSPORT_ADDR_MAX];
};

/* ---- socket I/O ---- */

/* The one map from socket errors to what transport.h promises. */
static int sock_err(int e)
{
	switch (e) {
	case EPIPE:
	case ECONNRESET:
	case ENOTCONN:
	case ECONNABORTED:
	case ESHUTDOWN:
		return -ECONNRESET;
	case EAGAIN:
	case ETIMEDOUT:
		return -ETIMEDOUT;
	default:
		return -e;
	}
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0))
		return -errno;
	return 0;
}

/* Wait up to @ms for @events.  0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, int ms)
{
	struct pollfd p = {.fd = fd, .events = events};

	for (;;) {
		int n = poll(&p, 1, ms);

		if (n > 0)
			return 0; /* ready, or an error the next call reports */
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* @ms, cut to what is left before @deadline (0: no deadline). */
static int wait_ms(int ms, int64_t deadline)
{
	int left;

	if (!deadline)
		return ms;
	left = transport_ms_left(deadline);
	return left < ms ? left : ms;
}

/* Read at least one byte into @iov.  EOF is -ECONNRESET. */
static int recv_some(int fd, const struct iovec *iov, int cnt, int ms, int64_t deadline,
		     size_t *ret_n)
{
	for (;;) {
		ssize_t n = readv(fd, iov, cnt);
		int err;

		if (n > 0) {
			*ret_n = (size_t)n;
			return 0;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return sock_err(errno);
		err = wait_fd(fd, POLLIN, wait_ms(ms, deadline));
		if (err)
			return err;
	}
}

/* Read exactly @len bytes; *@ret_got says how many came before a failure. */
static int recv_buf(int fd, void *buf, size_t len, int ms, int64_t deadline, size_t *ret_got)
{
	size_t got = 0, n;
	int err = 0;

	while (got < len) {
		struct iovec v = {.iov_base = (char *)buf + got, .iov_len = len - got};

		err = recv_some(fd, &v, 1, ms, deadline, &n);
		if (err)
			break;
		got += n;
	}
	if (ret_got)
		*ret_got = got;
	return err;
}

/* Write all of @iov (which is used up in place). */
static int send_iov(int fd, struct iovec *iov, int cnt, int ms, int64_t deadline)
{
	while (cnt > 0) {
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)cnt};
		ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
		int err;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return sock_err(errno);
			err = wait_fd(fd, POLLOUT, wait_ms(ms, deadline));
			if (err)
				return err;
			continue;
		}
		while (cnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

static int send_msg(int fd, const struct wire_msg *m, int ms, int64_t deadline)
{
	uint8_t buf[WIRE_MSG_MAX_V2];
	struct iovec v;
	int n = transport_wire_encode(m, buf, sizeof(buf));

	if (n < 0)
		return n;
	v.iov_base = buf;
	v.iov_len = (size_t)n;
	return send_iov(fd, &v, 1, ms, deadline);
}

/*
 * Read one message, header and body.  *@ret_got: bytes of it that came.
 * -EPROTO malformed, else as recv_buf().
 */
static int recv_msg(int fd, struct wire_msg *ret, int ms, int64_t deadline, size_t *ret_got)
{
	uint8_t buf[WIRE_HDR_LEN + WIRE_BODY_MAX_V2];
	size_t body, got = 0, got2 = 0;
	int err;

	err = recv_buf(fd, buf, WIRE_HDR_LEN, ms, deadline, &got);
	if (!err)
		err = transport_wire_decode_hdr(buf, ret, &body);
	if (!err && body)
		err = recv_buf(fd, buf + WIRE_HDR_LEN, body, ms, deadline, &got2);
	if (!err)
		err = transport_wire_decode_body(ret, buf + WIRE_HDR_LEN, body);
	if (ret_got)
		*ret_got = got + got2;
	return err;
}

/* ---- iovec cursor (the caller's iovecs are const) ---- */

struct iov_cur {
	const struct iovec *iov;
	int cnt;
	size_t skip; /* bytes of iov[0] already filled */
};

/* Point @out at the next at most @limit bytes; skips empty entries. */
static int cur_fill(const struct iov_cur *c, struct iovec *out, int max, uint64_t limit)
{
	size_t skip = c->skip;
	uint64_t bytes = 0;
	int i = 0, k;

	for (k = 0; k < c->cnt && i < max && bytes < limit; k++) {
		size_t l = c->iov[k].iov_len - skip;

		if (l > limit - bytes)
			l = (size_t)(limit - bytes);
		if (l) {
			out[i].iov_base = (char *)c->iov[k].iov_base + skip;
			out[i].iov_len = l;
			i++;
			bytes += l;
		}
		skip = 0;
	}
	return i;
}

static void cur_advance(struct iov_cur *c, size_t n)
{
	while (n && c->cnt) {
		size_t l = c->iov[0].iov_len - c->skip;

		if (n < l) {
			c->skip += n;
			return;
		}
		n -= l;
		c->iov++;
		c->cnt--;
		c->skip = 0;
	}
}

/* ---- client ---- */

struct prog {
	transport_progress_fn fn;
	void *arg;
	uint64_t done; /* bytes in place, from the start of the whole range */
	uint64_t reported;
};

static void prog_add(struct prog *p, uint64_t n)
{
	p->done += n;
	if (p->fn && p->done - p->reported >= TCP_PROGRESS_STEP) {
		p->fn(p->arg, p->done);
		p->reported = p->done;
	}
}

int transport_tcp_client_handshake(struct transport *t, int fd, unsigned ver)
{
	int64_t deadline = util_mono_ns() + (int64_t)t->io_timeout_ms * 1000000;
	int ms = (int)t->io_timeout_ms, err;
	struct wire_msg out, in;
	struct auth_cli a;

	err = set_nonblock(fd);
	if (!err)
		err = transport_auth_cli_hello(t, &a, (uint8_t)ver, &out);
	if (err)
		return err;
	for (;;) {
		err = send_msg(fd, &out, ms, deadline);
		if (!err)
			err = recv_msg(fd, &in, ms, deadline, NULL);
		if (!err)
			err = transport_auth_cli_step(t, &a, &in, &out);
		if (err < 0 && a.refused)
			return -EACCES;
		if (err != 1)
			return err;
	}
}

/* Split "HOST:PORT" or "[V6]:PORT" into @host and @port. */
/* Connect to one address within @ms.  A socket, or -errno. */
static int connect_one(const struct addrinfo *ai, int ms)
{
	socklen_t len = sizeof(int);
	int fd, err = 0, one = 1;

	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		if (errno != EINPROGRESS && errno != EINTR) {
			err = -errno;
			goto close_fd;
		}
		err = wait_fd(fd, POLLOUT, ms);
		if (err)
			goto close_fd;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err) {
			err = -err;
			goto close_fd;
		}
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	return fd;

close_fd:
	close(fd);
	return err;
}

static int tcp_connect(struct transport *t, const char *addr, unsigned ver, struct tconn **ret)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	char host[TRANSPORT_ADDR_MAX], port[8];
	struct addrinfo *res, *ai;
	struct tcp_conn *c;
	int fd = -EHOSTUNREACH, err;

	err = transport_addr_split(addr, host, sizeof(host), port, sizeof(port));
	if (err)
		return err;
	err = getaddrinfo(host, port, &hints, &res);
	if (err)
		return transport_gai_err(err);
	for (ai = res; ai; ai = ai->ai_next) {
		fd = connect_one(ai, (int)t->io_timeout_ms);
		if (fd >= 0)
			break;
	}
	freeaddrinfo(res);
	/* -EACCES means "authentication failed" to callers, not "firewall" */
	if (fd == -EACCES || fd == -EPERM)
		return -ECONNREFUSED;
	if (fd < 0)
		return sock_err(-fd);

	err = transport_tcp_client_handshake(t, fd, ver);
	if (err) {
		log_debug("transport: handshake with %s failed: %s", addr, strerror(-err));
		goto close_fd;
	}
	err = -ENOMEM;
	c = calloc(1, sizeof(*c));
	if (!c)
		goto close_fd;
	c->fd = fd;
	c->ver = (uint8_t)ver;
	snprintf(c->peer, sizeof(c->peer), "%s", addr);
	*ret = &c->base;
	return 0;

close_fd:
	close(fd);
	return err;
}

static int status_err(int status)
{
	switch (status) {
	case ENOENT:
	case ERANGE:
	case EINVAL:
	case EIO:
	case ENOMEM:
	case EBUSY:
		return -status;
	default:
		return -EIO;
	}
}

/* Read @len payload bytes into the caller's memory at @cur. */
static int recv_payload(struct tcp_conn *c, struct iov_cur *cur, uint64_t len, struct prog *pg)
{
	struct transport *t = c->base.t;
	struct iovec win[TCP_IOV_MAX];
	size_t got;
	int err;

	while (len) {
		int n = cur_fill(cur, win, TCP_IOV_MAX, len);

		err = recv_some(c->fd, win, n, (int)t->io_timeout_ms, 0, &got);
		if (err)
			return err;
		cur_advance(cur, got);
		len -= got;
		COUNT_ADD(t, bytes_received, got);
		prog_add(pg, got);
	}
	return 0;
}

/* The flags a GET of @req carries on @c: none in version 1. */
static uint16_t get_flags(const struct tcp_conn *c, const struct transport_req *req)
{
	uint16_t f = 0;

	if (c->ver < WIRE_V2)
		return 0;
	if (req->flags & TRANSPORT_F_PARTIAL_OK)
		f |= WIRE_F_PARTIAL_OK;
	if (req->flags & TRANSPORT_F_WANT_HAVE)
		f |= WIRE_F_WANT_HAVE;
	if (req->flags & TRANSPORT_F_BUSY_OK)
		f |= WIRE_F_BUSY_OK;
	if (req->flags & TRANSPORT_F_PARK)
		f |= WIRE_F_PARK;
	return f;
}

/*
 * May @in, a HAVE, answer @get?  Alone: only after PARTIAL_OK or
 * BUSY_OK, or as the answer to a query; marked "DATA follows": only after
 * WANT_HAVE, for a range with bytes.  Busy: only after BUSY_OK, alone.
 */
static bool have_fits(const struct wire_msg *get, const struct wire_msg *in)
{
	if (in->have.flags & TRANSPORT_HAVE_BUSY)
		return (get->flags & WIRE_F_BUSY_OK) && get->len && !(in->flags & WIRE_F_HAVE_DATA);
	if (in->flags & WIRE_F_HAVE_DATA)
		return (get->flags & WIRE_F_WANT_HAVE) && get->len;
	return (get->flags & WIRE_F_PARTIAL_OK) || ((get->flags & WIRE_F_WANT_HAVE) && !get->len);
}

/* Does @in echo @get (and speak the connection's version)? */
static bool echoes(const struct tcp_conn *c, const struct wire_msg *get, const struct wire_msg *in)
{
	return in->ver == c->ver && in->reqid == get->reqid && in->id == get->id &&
	       in->off == get->off;
}

/*
 * One GET of at most t->get_max bytes, with wire flags @flags.  0, 1 if
 * the server answered ERR (its status in *@ret_status), 2 if it answered
 * HAVE without the bytes, or -errno.  A HAVE goes to @have_out (if not
 * NULL).
 */
static int fetch_one(struct tcp_conn *c, uint64_t id, uint64_t off, uint64_t len, uint16_t flags,
		     struct transport_have *have_out, struct iov_cur *cur, struct prog *pg,
		     int *ret_status)
{
	struct transport *t = c->base.t;
	int ms = (int)t->io_timeout_ms, err;
	struct wire_msg get, in;
	size_t got = 0;

	memset(&get, 0, sizeof(get));
	get.ver = c->ver;
	get.type = WIRE_GET;
	get.flags = flags;
	get.reqid = ++c->next_reqid;
	get.id = id;
	get.off = off;
	get.len = len;
	err = send_msg(c->fd, &get, ms, 0);
	if (err)
		return err;
	COUNT_ADD(t, requests_sent, 1);

	err = recv_msg(c->fd, &in, ms, 0, &got);
	if (got)
		c->base.answered = true;
	if (err)
		return err;
	if (!echoes(c, &get, &in))
		return -EPROTO;
	if (in.type == WIRE_ERR) {
		*ret_status = in.status;
		return 1;
	}
	if (in.type == WIRE_HAVE) {
		if (!have_fits(&get, &in))
			return -EPROTO;
		if (have_out)
			*have_out = in.have;
		if (!(in.flags & WIRE_F_HAVE_DATA))
			return len ? 2 : 0;
		err = recv_msg(c->fd, &in, ms, 0, NULL);
		if (err)
			return err;
		if (!echoes(c, &get, &in))
			return -EPROTO;
	} else if (flags & WIRE_F_WANT_HAVE) {
		return -EPROTO; /* the HAVE it was asked for is missing */
	}
	if (in.type != WIRE_DATA || in.len != len)
		return -EPROTO;
	return recv_payload(c, cur, len, pg);
}

static int tcp_fetch(struct tconn *tc, const struct transport_req *req)
{
	struct tcp_conn *c = (struct tcp_conn *)tc;
	struct transport *t = tc->t;
	struct iov_cur cur = {.iov = req->iov, .cnt = req->iovcnt};
	struct prog pg = {.fn = req->progress, .arg = req->arg};
	uint64_t done = 0, len = req->len;
	uint16_t flags = get_flags(c, req);
	int err, status = EIO;

	do {
		uint64_t piece = len - done < t->get_max ? len - done : t->get_max;

		err = fetch_one(c, req->id, req->off + done, piece, flags, req->have_out, &cur, &pg,
				&status);
		if (err == 1) /* ERR: the connection is still in step */
			return status_err(status);
		if (err == 2) /* HAVE: so is it */
			return -EAGAIN;
		if (err) {
			tc->broken = true;
			if (err != -ETIMEDOUT && err != -EPROTO)
				log_debug("transport: fetch from %s failed: %s", c->peer,
					  strerror(-err));
			return err;
		}
		done += piece;
		/* the HAVE came with the first piece */
		flags &= (uint16_t)~WIRE_F_WANT_HAVE;
	} while (done < len);
	if (req->progress && (pg.reported != len || !len))
		req->progress(req->arg, len);
	return 0;
}

static bool tcp_idle_ok(struct tconn *tc)
{
	struct tcp_conn *c = (struct tcp_conn *)tc;
	struct pollfd p = {.fd = c->fd, .events = POLLIN | POLLRDHUP};

	/* an idle connection has nothing to read: anything is EOF or junk */
	return poll(&p, 1, 0) == 0;
}

static void tcp_close(struct tconn *tc)
{
	struct tcp_conn *c = (struct tcp_conn *)tc;

	close(c->fd);
	free(c);
}

/* ---- server: limits ---- */

/*
 * The longest-idle authenticated connection that may be closed to make
 * room, other than @self: one of @node's, however briefly idle; or, with
 * @node NULL, one of any node's that has been idle for
 * TRANSPORT_IDLE_EVICT_MS.  NULL if none.  Called with srv->lock.
 */
static struct srv_conn *idlest_locked(struct tcp_server *srv, const char *node,
				      const struct srv_conn *self, int64_t now)
{
	struct srv_conn *c, *best = NULL;

	for (c = srv->conns; c; c = c->next) {
		if (c == self || c->done || c->evicted || !c->authed || !c->idle)
			continue;
		if (node ? strcmp(c->node, node) != 0
			 : now - c->since < TRANSPORT_IDLE_EVICT_MS * 1000000LL)
			continue;
		if (!best || c->since < best->since)
			best = c;
	}
	return best;
}

/* The connection longest in the handshake.  Called with srv->lock. */
static struct srv_conn *oldest_hs_locked(struct tcp_server *srv)
{
	struct srv_conn *c, *best = NULL;

	for (c = srv->conns; c; c = c->next)
		if (!c->done && !c->evicted && !c->authed && (!best || c->since < best->since))
			best = c;
	return best;
}

/*
 * Close @c to make room: wake its thread out of its socket (the thread
 * then ends without a word); from now on it does not count.  What names
 * it goes to @who, for the caller to log once the lock is dropped.
 * Called with srv->lock.
 */
static void evict_locked(struct tcp_server *srv, struct srv_conn *c, char *who, size_t len)
{
	c->evicted = true;
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR);
	srv->n_live--;
	if (c->authed) {
		snprintf(who, len, "%s ('%s')", c->name, c->node);
	} else {
		srv->n_hs--;
		snprintf(who, len, "%s", c->name);
	}
}

/*
 * The handshake of @c is over: count it as a connection of @node, closing
 * the longest idle of @node's if it has its limit already.  0; -EBUSY if
 * it has its limit and none of them is idle; -ECONNRESET if @c was
 * closed to make room meanwhile.
 */
static int conn_admit(struct srv_conn *c, const char *node)
{
	struct tcp_server *srv = c->srv;
	struct transport *t = srv->t;
	char who[TRANSPORT_ADDR_MAX + OBJFS_NODE_MAX + 8] = "";
	struct srv_conn *o;
	unsigned n = 0;
	int r = 0;

	pthread_mutex_lock(&srv->lock);
	if (c->evicted) {
		pthread_mutex_unlock(&srv->lock);
		return -ECONNRESET;
	}
	for (o = srv->conns; o; o = o->next)
		n += o != c && !o->done && !o->evicted && o->authed && !strcmp(o->node, node);
	if (n >= t->serve_conns_per_node) {
		o = idlest_locked(srv, node, c, util_mono_ns());
		if (o)
			evict_locked(srv, o, who, sizeof(who));
		else
			r = -EBUSY;
	}
	if (!r) {
		c->authed = true;
		snprintf(c->node, sizeof(c->node), "%s", node);
		srv->n_hs--;
	}
	pthread_mutex_unlock(&srv->lock);
	if (who[0])
		transport_log(t, TLOG_EVICT, LOGL_INFO,
			      "transport: node '%s' has %u connections: closing its longest idle "
			      "one, from %s",
			      node, n, who);
	return r;
}

/* @c waits for its next request (@idle), or has one.  false if it was
 * closed to make room meanwhile.  NULL (no server: a test) is fine. */
static bool conn_set_idle(struct srv_conn *c, bool idle)
{
	bool ok;

	if (!c)
		return true;
	pthread_mutex_lock(&c->srv->lock);
	ok = !c->evicted;
	c->idle = idle;
	if (idle)
		c->since = util_mono_ns();
	pthread_mutex_unlock(&c->srv->lock);
	return ok;
}

/* Was @c closed to make room?  Then its end is not worth a log line. */
static bool conn_evicted(struct srv_conn *c)
{
	return !conn_set_idle(c, false);
}

/* ---- server ---- */

/* Close this connection for what the peer sent: count it, say so. */
static void bad_frame(struct transport *t, const char *peer, const char *what)
{
	COUNT_ADD(t, bad_frames, 1);
	transport_log(t, TLOG_BAD_FRAME, LOGL_WARN, "transport: closing connection from %s: %s",
		      peer, what);
}

/*
 * Answer one GET (serve.c decides what with).  0: go on with the
 * connection; -errno: close it (an I/O error, or the source failed after
 * the DATA header went out).
 */
static int answer_get(struct transport *t, int fd, const struct wire_msg *get, const char *peer,
		      const char *node, const atomic_bool *stop)
{
	struct iovec iov[1 + TCP_IOV_MAX];
	uint8_t hdr[WIRE_HDR_LEN];
	struct serve_ctx ctx;
	struct wire_msg reply;
	int first = 0, n, r, err = 0;
	size_t bytes;

	r = transport_serve_begin(t, get, peer, node, stop, &ctx, &reply);
	if (r == 1)
		return send_msg(fd, &reply, (int)t->io_timeout_ms, 0);
	if (r == 2) {
		/* the HAVE first, then the DATA header with the first piece */
		err = send_msg(fd, &reply, (int)t->io_timeout_ms, 0);
		if (err) {
			transport_serve_end(&ctx);
			return err;
		}
		transport_serve_data_hdr(&ctx, &reply);
	}
	if (transport_wire_encode(&reply, hdr, sizeof(hdr)) != WIRE_HDR_LEN) {
		transport_serve_end(&ctx);
		return -EIO;
	}
	iov[0].iov_base = hdr;
	iov[0].iov_len = sizeof(hdr);
	while (transport_serve_more(&ctx)) {
		n = transport_serve_next(&ctx, TCP_CHUNK, iov + 1, TCP_IOV_MAX, &bytes, stop);
		if (n < 0) {
			err = n;
			break;
		}
		err = send_iov(fd, iov + first, n + 1 - first, (int)t->io_timeout_ms, 0);
		if (err) {
			transport_serve_unsent(&ctx, bytes, err);
			break;
		}
		first = 1; /* the header went with the first piece */
	}
	transport_serve_end(&ctx);
	return err;
}

/*
 * Serve one connection until the peer closes, misbehaves or stalls, or
 * *@stop.  @sc is the server's record of it, for the connection limits
 * (NULL: none, as when a test drives transport_tcp_serve_fd()).
 */
static void serve_conn(struct transport *t, int fd, const struct sockaddr *peer, socklen_t peer_len,
		       const atomic_bool *stop, struct srv_conn *sc)
{
	unsigned hs_ms = t->io_timeout_ms < TRANSPORT_HANDSHAKE_MAX_MS ? t->io_timeout_ms
								       : TRANSPORT_HANDSHAKE_MAX_MS;
	int64_t hs_deadline = util_mono_ns() + (int64_t)hs_ms * 1000000;
	int ms = (int)t->io_timeout_ms, err;
	char name[TRANSPORT_ADDR_MAX + OBJFS_NODE_MAX + 8];
	struct wire_msg in, reply;
	struct auth_srv a;
	size_t got;
	bool ready, close_after;

	transport_auth_addr_str(peer, peer_len, name, sizeof(name));
	transport_auth_srv_init(&a, transport_auth_peer_is_local(peer, peer_len));
	err = set_nonblock(fd);
	if (err) {
		transport_log(t, TLOG_CONN, LOGL_WARN, "transport: connection from %s: %s", name,
			      strerror(-err));
		return;
	}
	while (!(stop && atomic_load(stop))) {
		ready = transport_auth_srv_ready(&a);
		if (ready) {
			/* between requests a pooled connection may idle */
			if (!conn_set_idle(sc, true))
				return;
			err = wait_fd(fd, POLLIN, TCP_IDLE_MS);
			if (err) {
				log_debug("transport: closing idle connection from %s", name);
				return;
			}
			if (!conn_set_idle(sc, false))
				return;
		}
		err = recv_msg(fd, &in, ms, ready ? 0 : hs_deadline, &got);
		/* a version we do not speak is malformed, as for an old server */
		if (!err && in.ver > t->wire_max)
			err = -EPROTO;
		if (err && conn_evicted(sc))
			return;
		if (err == -EPROTO) {
			bad_frame(t, name, "malformed message");
			return;
		}
		if (err && got) {
			bad_frame(t, name,
				  err == -ETIMEDOUT ? "stalled inside a message"
						    : "closed inside a message");
			return;
		}
		if (err) {
			if (!ready)
				transport_log(t, TLOG_HANDSHAKE, LOGL_INFO,
					      "transport: connection from %s: %s", name,
					      err == -ETIMEDOUT ? "no handshake in time"
								: "closed during the handshake");
			else if (err != -ECONNRESET)
				transport_log(t, TLOG_CONN, LOGL_INFO,
					      "transport: connection from %s: %s", name,
					      strerror(-err));
			else
				log_debug("transport: %s closed its connection", name);
			return;
		}

		if (ready) {
			if (in.type != WIRE_GET) {
				bad_frame(t, name, "unexpected message");
				return;
			}
			if (in.ver != a.ver) {
				bad_frame(t, name, "a GET in another version than its HELLO's");
				return;
			}
			if (!t->fan2 && (in.flags & (WIRE_F_BUSY_OK | WIRE_F_PARK))) {
				bad_frame(t, name, "GET flags of a later version 2");
				return;
			}
			if (answer_get(t, fd, &in, name, a.node, stop))
				return;
			continue;
		}

		err = transport_auth_srv_step(t, &a, &in, &reply, &close_after);
		if (err == -EPROTO) {
			bad_frame(t, name,
				  in.type == WIRE_GET ? "GET before authentication"
						      : "message out of place in the handshake");
			return;
		}
		if (err) {
			transport_log(t, TLOG_HANDSHAKE, LOGL_WARN,
				      "transport: handshake with %s: %s", name, strerror(-err));
			return;
		}
		if (in.type == WIRE_HELLO) {
			/* from now on, logs name the peer as it named itself */
			size_t l = strlen(name);

			snprintf(name + l, sizeof(name) - l, " ('%s')", a.node);
		}
		if (transport_auth_srv_ready(&a) && sc) {
			err = conn_admit(sc, a.node);
			if (err == -EBUSY)
				transport_log(t, TLOG_LIMIT, LOGL_WARN,
					      "transport: refusing %s: its node has %u connections "
					      "open, none of them idle",
					      name, t->serve_conns_per_node);
			if (err)
				return;
		}
		err = send_msg(fd, &reply, ms, hs_deadline);
		if (close_after) {
			transport_log(t, TLOG_REFUSED, LOGL_WARN, "transport: refused %s: %s", name,
				      a.why);
			return;
		}
		if (err) {
			transport_log(t, TLOG_HANDSHAKE, LOGL_INFO,
				      "transport: connection from %s: %s", name, strerror(-err));
			return;
		}
	}
}

void transport_tcp_serve_fd(struct transport *t, int fd, const struct sockaddr *peer,
			    socklen_t peer_len, const atomic_bool *stop)
{
	serve_conn(t, fd, peer, peer_len, stop, NULL);
}

static void kick(int fd)
{
	uint64_t one = 1;
	ssize_t n;

	do
		n = write(fd, &one, sizeof(one));
	while (n < 0 && errno == EINTR);
}

static void *conn_thread(void *arg)
{
	struct srv_conn *c = arg;
	struct tcp_server *srv = c->srv;

	serve_conn(srv->t, c->fd, (struct sockaddr *)&c->peer, c->peer_len, &srv->stop, c);
	pthread_mutex_lock(&srv->lock);
	close(c->fd);
	c->fd = -1;
	c->done = true;
	if (!c->evicted) {
		srv->n_live--;
		if (!c->authed)
			srv->n_hs--;
	}
	pthread_mutex_unlock(&srv->lock);
	COUNT_SUB(srv->t, conns_open, 1);
	COUNT_SUB(srv->t, serve_open, 1);
	kick(srv->wake_fd);
	return NULL;
}

/* Join the connection threads that have finished (accept thread). */
static void reap(struct tcp_server *srv)
{
	struct srv_conn **pp, *c, *done = NULL;

	pthread_mutex_lock(&srv->lock);
	for (pp = &srv->conns; (c = *pp);) {
		if (c->done) {
			*pp = c->next;
			c->next = done;
			done = c;
		} else {
			pp = &c->next;
		}
	}
	pthread_mutex_unlock(&srv->lock);
	while ((c = done)) {
		done = c->next;
		pthread_join(c->thread, NULL);
		free(c);
	}
}

/*
 * Accept one connection and start its thread, within the limits: with
 * TRANSPORT_SERVE_HANDSHAKES connections in the handshake, the oldest of
 * them is closed; with serve_conns open, the longest idle (see
 * idlest_locked()), or if none is idle the new one is refused.
 */
static void accept_one(struct tcp_server *srv)
{
	struct transport *t = srv->t;
	char hs_who[TRANSPORT_ADDR_MAX] = "", who[TRANSPORT_ADDR_MAX + OBJFS_NODE_MAX + 8] = "";
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct srv_conn *c, *v;
	int fd, one = 1, err;

	fd = accept4(srv->listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
			return;
		transport_log(t, TLOG_CONN, LOGL_WARN, "transport: accept: %s", strerror(errno));
		/* out of descriptors or memory: do not spin */
		poll(NULL, 0, 100);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	transport_auth_addr_str((struct sockaddr *)&ss, len, c->name, sizeof(c->name));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	c->srv = srv;
	c->fd = fd;
	memcpy(&c->peer, &ss, len);
	c->peer_len = len;

	pthread_mutex_lock(&srv->lock);
	c->since = util_mono_ns();
	if (srv->n_hs >= t->serve_handshakes && (v = oldest_hs_locked(srv)))
		evict_locked(srv, v, hs_who, sizeof(hs_who));
	if (srv->n_live >= t->serve_conns) {
		v = idlest_locked(srv, NULL, NULL, c->since);
		if (!v) {
			pthread_mutex_unlock(&srv->lock);
			transport_log(t, TLOG_LIMIT, LOGL_WARN,
				      "transport: refusing %s: %u connections open, none idle for "
				      "%d ms",
				      c->name, t->serve_conns, TRANSPORT_IDLE_EVICT_MS);
			close(fd);
			free(c);
			return;
		}
		evict_locked(srv, v, who, sizeof(who));
	}
	/* counted first: the thread may be done before pthread_create returns */
	COUNT_ADD(t, conns_accepted, 1);
	COUNT_ADD(t, conns_open, 1);
	COUNT_ADD(t, serve_open, 1);
	err = pthread_create(&c->thread, NULL, conn_thread, c);
	if (err) {
		pthread_mutex_unlock(&srv->lock);
		COUNT_SUB(t, conns_accepted, 1);
		COUNT_SUB(t, conns_open, 1);
		COUNT_SUB(t, serve_open, 1);
		transport_log(t, TLOG_CONN, LOGL_WARN,
			      "transport: cannot start a thread for %s: %s", c->name,
			      strerror(err));
		close(fd);
		free(c);
		return;
	}
	c->next = srv->conns;
	srv->conns = c;
	srv->n_live++;
	srv->n_hs++;
	pthread_mutex_unlock(&srv->lock);
	if (hs_who[0])
		transport_log(
		    t, TLOG_EVICT, LOGL_WARN,
		    "transport: %u connections in the handshake: closing the oldest, from %s",
		    t->serve_handshakes, hs_who);
	if (who[0])
		transport_log(
		    t, TLOG_EVICT, LOGL_INFO,
		    "transport: %u connections open: closing the longest idle one, from %s, "
		    "for %s",
		    t->serve_conns, who, c->name);
	log_debug("transport: connection from %s", c->name);
}

static void *accept_thread(void *arg)
{
	struct tcp_server *srv = arg;
	struct pollfd p[2] = {
	    {.fd = srv->listen_fd, .events = POLLIN},
	    {.fd = srv->wake_fd, .events = POLLIN},
	};

	while (!atomic_load(&srv->stop)) {
		uint64_t v;

		if (poll(p, 2, TCP_FLUSH_MS) < 0) {
			if (errno != EINTR)
				poll(NULL, 0, 100);
			continue;
		}
		if (atomic_load(&srv->stop))
			break;
		transport_log_flush(srv->t);
		if (p[1].revents && read(srv->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			log_debug("transport: eventfd: %s", strerror(errno));
		reap(srv);
		if (p[0].revents)
			accept_one(srv);
	}
	return NULL;
}

static int listen_on(const char *host, uint16_t port, int *ret_fd)
{
	struct addrinfo hints = {
	    .ai_socktype = SOCK_STREAM,
	    .ai_flags = AI_PASSIVE | AI_NUMERICSERV,
	};
	struct addrinfo *res, *ai;
	char port_str[8];
	int fd, one = 1, err = -EADDRNOTAVAIL;

	snprintf(port_str, sizeof(port_str), "%u", port);
	err = getaddrinfo(host, port_str, &hints, &res);
	if (err)
		return err == EAI_MEMORY ? -ENOMEM : -EADDRNOTAVAIL;
	err = -EADDRNOTAVAIL;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			err = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, TCP_BACKLOG) == 0) {
			freeaddrinfo(res);
			*ret_fd = fd;
			return 0;
		}
		err = -errno;
		close(fd);
	}
	freeaddrinfo(res);
	return err;
}

static int tcp_serve(struct transport *t)
{
	struct tcp_server *srv;
	int err;

	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->t = t;
	atomic_init(&srv->stop, false);
	err = listen_on(t->listen_host, t->listen_port, &srv->listen_fd);
	if (err)
		goto free_srv;
	srv->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (srv->wake_fd < 0) {
		err = -errno;
		goto close_listen;
	}
	pthread_mutex_init(&srv->lock, NULL);
	err = -pthread_create(&srv->accept_thread, NULL, accept_thread, srv);
	if (err)
		goto destroy_lock;
	t->srv = srv;
	return 0;

destroy_lock:
	pthread_mutex_destroy(&srv->lock);
	close(srv->wake_fd);
close_listen:
	close(srv->listen_fd);
free_srv:
	free(srv);
	return err;
}

static void tcp_stop(struct transport *t)
{
	struct tcp_server *srv = t->srv;
	struct srv_conn *c;

	if (!srv)
		return;
	atomic_store(&srv->stop, true);
	kick(srv->wake_fd);
	pthread_join(srv->accept_thread, NULL);

	/* no new connections now; wake every thread out of its socket */
	pthread_mutex_lock(&srv->lock);
	for (c = srv->conns; c; c = c->next)
		if (c->fd >= 0)
			shutdown(c->fd, SHUT_RDWR);
	pthread_mutex_unlock(&srv->lock);
	while ((c = srv->conns)) {
		srv->conns = c->next;
		pthread_join(c->thread, NULL);
		free(c);
	}
	pthread_mutex_destroy(&srv->lock);
	close(srv->wake_fd);
	close(srv->listen_fd);
	free(srv);
	t->srv = NULL;
}

static int tcp_addr(const struct transport *t, char *buf, size_t len)
{
	const struct tcp_server *srv = t->srv;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char s[TRANSPORT_ADDR_MAX];

	if (getsockname(srv->listen_fd, (struct sockaddr *)&ss, &sl) < 0)
		return -errno;
	transport_auth_addr_str((struct sockaddr *)&ss, sl, s, sizeof(s));
	if (strlen(s) >= len)
		return -ERANGE;
	memcpy(buf, s, strlen(s) + 1);
	return 0;
}

const struct transport_ops transport_tcp_ops = {
    .name = "tcp",
    .caps = "tcp",
    .streams_per_peer = TCP_STREAMS_PER_PEER,
    .range_min = TCP_RANGE_MIN,
    .wire_max = WIRE_V2,
    .v2_token = "fan1",
    .serve = tcp_serve,
    .stop = tcp_stop,
    .addr = tcp_addr,
    .connect = tcp_connect,
    .fetch = tcp_fetch,
    .idle_ok = tcp_idle_ok,
    .close = tcp_close,
};
