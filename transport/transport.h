/*
 * transport: moves an object's bytes from one node's shared memory to
 * another's.  It knows nothing of the store: the serving side is handed a
 * source (callbacks that pin an object and point iovecs at its bytes), the
 * fetching side is handed destination iovecs.  No bounce buffers on
 * either side.
 *
 * Backends.  A backend is an ops table (struct transport_ops in
 * transport_i.h): connect, serve, fetch a range into a region, close,
 * and the tuning the fetch engine should use with it.  This version has
 * TCP; the RDMA backend plugs in beside it.  Everything above the ops
 * table (the per-peer connection cache, authentication policy, what
 * serving a request means, counters) is shared.  A node advertises the
 * transports it serves on its card (transport_caps()); a fetch asks
 * transport_reaches() whether a peer's card is one it can use.
 *
 * Connections.  Made on demand, the first time a peer is needed, from the
 * address in the peer's endpoint card, and cached per peer (a uthash table
 * keyed by node name).  A peer has a small pool of connections so that
 * several ranges can be fetched from it in parallel; each fetch borrows
 * one, and a connection that failed is closed rather than returned.
 *
 * Authentication.  With a cluster secret, both ends prove knowledge of it
 * by HMAC-SHA256 challenge-response before any object is served.  Without
 * one, the server accepts loopback peers only (and says so in its log).
 * The wire protocol is documented in docs/protocol.md.
 *
 * Threading: all functions are thread-safe.  The source callbacks are
 * called from server threads, concurrently.
 *
 * Errors: 0 or a negative errno.
 */
#ifndef OBJFS_TRANSPORT_H
#define OBJFS_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct transport;

#define TRANSPORT_SECRET_MIN 16 /* bytes */
#define TRANSPORT_SECRET_MAX 4096
#define TRANSPORT_DEFAULT_TIMEOUT_MS 2000

struct transport_config {
	const char *backend;	 /* "tcp" (NULL means "tcp") */
	const char *node;	 /* this node's name, sent to peers */
	const char *listen_host; /* numeric IPv4/IPv6 or a host name */
	uint16_t listen_port;	 /* 0: any free port (see transport_addr) */
	/* cluster secret (copied); NULL: no secret, loopback peers only */
	const uint8_t *secret;
	size_t secret_len;
	/* a peer that sends or accepts nothing for this long is dead;
	 * default TRANSPORT_DEFAULT_TIMEOUT_MS when 0 */
	unsigned io_timeout_ms;
	/* cap on bytes per second served to all peers together; 0: none */
	uint64_t serve_bwlimit;
	/* connections kept per peer; default 4 when 0 */
	unsigned conns_per_peer;
};

/*
 * What the serving side reads objects through.  open() pins object @id
 * (sealed objects only) for the peer that named itself @peer in the
 * handshake ("" if unknown) and gives its size and a token; -ENOENT if
 * this node does not hold it.  iov() points @iov at [off, off+len) of
 * the pinned object, like store_obj_iov().  close() unpins.  Every GET
 * is one open() ... close(), on a server thread.
 */
struct transport_source {
	int (*open)(void *ctx, const char *peer, uint64_t id, uint64_t *ret_size, void **ret_token);
	int (*iov)(void *token, uint64_t off, size_t len, struct iovec *iov, int max_iov,
		   size_t *ret_bytes);
	void (*close)(void *token);
	void *ctx;
};

/*
 * Create a transport (client side only until transport_serve()).
 * -EINVAL for a bad config (unknown backend, short secret), -ENOMEM.
 * Free it with transport_free().
 */
struct transport *transport_new(const struct transport_config *cfg, int *ret_err);

/* Stop serving, close every connection, free.  NULL is fine. */
void transport_free(struct transport *t);

/* "tcp" */
const char *transport_name(const struct transport *t);

/*
 * Bind, listen and serve @src from background threads.  -EADDRINUSE,
 * -EADDRNOTAVAIL, ... from bind(); -EBUSY if already serving;
 * -EOPNOTSUPP if the backend cannot serve.  The source must stay valid
 * until transport_free().
 */
int transport_serve(struct transport *t, const struct transport_source *src);

/* The address the server is bound to, as "HOST:PORT" (IPv6 as
 * "[HOST]:PORT"), with the real port when 0 was asked.  -ENOTCONN if not
 * serving. */
int transport_addr(const struct transport *t, char *buf, size_t len);

/*
 * Called while bytes arrive: @done bytes from the start of the range are
 * in place (it grows monotonically; the last call has @done == range
 * length).  Called from the fetching thread.
 */
typedef void (*transport_progress_fn)(void *arg, uint64_t done);

/* One fetch: a byte range of one object from one peer, into memory the caller owns. */
struct transport_req {
	const char *peer; /* the peer's node name */
	const char *addr; /* its address for this transport, from its card ("HOST:PORT" for tcp) */
	uint64_t id;
	uint64_t off, len;
	const struct iovec *iov; /* must cover exactly len bytes */
	int iovcnt;
	transport_progress_fn progress; /* may be NULL */
	void *arg;
};

/*
 * Fetch [req->off, req->off + req->len) of object req->id from
 * req->peer into req->iov, calling req->progress(req->arg, done) as the
 * bytes arrive.  Borrows a cached connection to the peer or makes one
 * (and authenticates).  Blocks until done or failed; never longer than
 * about io_timeout_ms without progress.  @req is only read, and only
 * during the call.
 *
 * 0, or: -ENOENT the peer does not hold the object; -ERANGE the range is
 * outside the object; -ECONNREFUSED/-EHOSTUNREACH/-ENETUNREACH cannot
 * connect; -ETIMEDOUT the peer stalled; -ECONNRESET it went away;
 * -EACCES authentication failed; -EPROTO it sent something malformed;
 * -EINVAL bad arguments (a bad node name, an empty address, iovecs that
 * do not cover the range).  On error the range may be partly written.
 */
int transport_fetch(struct transport *t, const struct transport_req *req);

/* What the fetch engine should know of the backend. */
struct transport_tuning {
	unsigned streams_per_peer; /* ranges of one object fetched from one peer at once (tcp: 2) */
	uint64_t range_min;	   /* smallest range worth a stream of its own (tcp: 8 MiB) */
};

/* Fill *@ret with the tuning of @t's backend. */
void transport_tuning(const struct transport *t, struct transport_tuning *ret);

/*
 * May this transport fetch from a peer whose card advertises @caps
 * ("tcp", "tcp,rdma"; "" on cards of old nodes, which means tcp) at
 * @addr (non-empty)?  @caps is a comma-separated list of transport
 * names, matched whole (NULL is taken as "").  False for an empty or
 * NULL @addr.
 */
bool transport_reaches(const struct transport *t, const char *caps, const char *addr);

/* What this node advertises on its card ("tcp").  A static string. */
const char *transport_caps(const struct transport *t);

/* Close the cached connections to @peer (it died, or its card changed). */
void transport_forget_peer(struct transport *t, const char *peer);

struct transport_stats {
	uint64_t bytes_sent;	 /* object bytes served */
	uint64_t bytes_received; /* object bytes fetched */
	uint64_t requests_served;
	uint64_t requests_sent;
	uint64_t conns_accepted;
	uint64_t conns_open;	/* server + client, now */
	uint64_t auth_failures; /* peers refused (bad proof, or not loopback) */
	uint64_t bad_frames;	/* connections closed for malformed input */
};
void transport_stats(const struct transport *t, struct transport_stats *ret);

/*
 * Read a cluster secret file: its bytes minus one trailing newline.
 * -EPERM if the file is readable by others (mode & 004) , -EINVAL if
 * shorter than TRANSPORT_SECRET_MIN or longer than TRANSPORT_SECRET_MAX,
 * else the errno of open/read.  *ret is malloc()ed.
 */
int transport_read_secret(const char *path, uint8_t **ret, size_t *ret_len);

#endif
