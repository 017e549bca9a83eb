/*
 * endpoint: see endpoint.h.
 */
#include "endpoint.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct transport *endpoint_new(const struct config *c, char *err, size_t errlen)
{
	struct transport_config tc = {
	    .backend = c->transport,
	    .rdma_eager_max = c->rdma_eager_max,
	    .rdma_poll_us = c->rdma_poll_us,
	    .node = c->node,
	    .listen_host = c->listen_host,
	    .listen_port = c->listen_port,
	    .io_timeout_ms = c->io_timeout_ms,
	    .serve_bwlimit = c->serve_bwlimit,
	    .serve_slots = c->serve_slots,
	};
	struct transport *t;
	uint8_t *secret = NULL;
	size_t len = 0;
	int r;

	if (c->secret_file) {
		r = transport_read_secret(c->secret_file, &secret, &len);
		if (r == -EPERM)
			snprintf(err, errlen,
				 "secret_file %s is readable by other users; make it private "
				 "(chmod 600)",
				 c->secret_file);
		else if (r == -EINVAL)
			snprintf(err, errlen, "secret_file %s must hold %d to %d bytes",
				 c->secret_file, TRANSPORT_SECRET_MIN, TRANSPORT_SECRET_MAX);
		else if (r < 0)
			snprintf(err, errlen, "cannot read secret_file %s: %s", c->secret_file,
				 strerror(-r));
		if (r < 0)
			return NULL;
		tc.secret = secret;
		tc.secret_len = len;
	}
	t = transport_new(&tc, &r);
	if (secret) {
		explicit_bzero(secret, len);
		free(secret);
	}
	if (!t && r == -EOPNOTSUPP)
		snprintf(err, errlen,
			 "transport=%s: this objfs was built without RDMA (meson -Drdma=enabled "
			 "needs libibverbs-dev and librdmacm-dev)",
			 c->transport);
	else if (!t)
		snprintf(err, errlen, "cannot set up the transport (transport=%s): %s",
			 c->transport ? c->transport : "tcp", strerror(-r));
	return t;
}

static bool wildcard(const char *host)
{
	return !host || !host[0] || !strcmp(host, "0.0.0.0") || !strcmp(host, "::");
}

/* This host's first non-loopback IPv4 address that is up. */
static int first_address(char *buf, size_t len)
{
	struct ifaddrs *ifs, *i;
	int r = -ENOENT;

	if (getifaddrs(&ifs) < 0)
		return -errno;
	for (i = ifs; i && r < 0; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		if ((i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP))
			continue;
		if (inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, buf,
			      (socklen_t)len))
			r = 0;
	}
	freeifaddrs(ifs);
	return r;
}

/* The host peers are told to reach this node at: advertise=, else a
 * specific listen address, else this host's first IPv4 address. */
static void advertised_host(const struct config *c, char *host, size_t len)
{
	if (c->advertise)
		snprintf(host, len, "%s", c->advertise);
	else if (!wildcard(c->listen_host))
		snprintf(host, len, "%s", c->listen_host);
	else if (first_address(host, len) < 0)
		snprintf(host, len, "127.0.0.1");
}

/*
 * What peers reach backend @backend of @t at, "HOST:PORT" into @ret: the
 * advertised @host and the port it is bound to.  Logs it.  -ENOTCONN if
 * that backend does not serve, -EIO if its address has no port.
 */
static int reach_addr(struct transport *t, const char *backend, const char *host, char *ret,
		      size_t len)
{
	char bound[300];
	const char *port;
	int r;

	r = transport_addr_of(t, backend, bound, sizeof(bound));
	if (r < 0)
		return r;
	port = strrchr(bound, ':');
	if (!port)
		return -EIO;
	if (strchr(host, ':') && host[0] != '[')
		snprintf(ret, len, "[%s]%s", host, port);
	else
		snprintf(ret, len, "%s%s", host, port);
	log_info("serving objects over %s on %s; peers reach this node at %s", backend, bound, ret);
	return 0;
}

int endpoint_serve(struct transport *t, const struct config *c, const struct transport_source *src,
		   char *ret_addr, size_t addrlen, char *ret_rdma, size_t rdmalen, char *err,
		   size_t errlen)
{
	struct transport_stats ts;
	char host[256], lim[24];
	uint64_t nofile;
	int r;

	r = transport_serve(t, src);
	if (r < 0 && c->transport && !strcmp(c->transport, "rdma")) {
		snprintf(err, errlen,
			 "cannot serve on %s:%u with transport=rdma: %s (it needs an RDMA device "
			 "for the listen address; transport=auto uses TCP without one)",
			 c->listen_host, c->listen_port, strerror(-r));
		return r;
	}
	if (r < 0) {
		snprintf(err, errlen, "cannot listen on %s:%u: %s%s", c->listen_host,
			 c->listen_port, strerror(-r),
			 r == -EADDRINUSE ? " (another node on this host? give each its own "
					    "listen=HOST:PORT)"
					  : "");
		return r;
	}
	transport_stats(t, &ts);
	nofile = util_nofile_limit();
	if (nofile)
		snprintf(lim, sizeof(lim), "%" PRIu64, nofile);
	else
		snprintf(lim, sizeof(lim), "unlimited");
	log_info("transport: serving at most %u connections at once, %u from one node (from the "
		 "open-files limit, %s)",
		 ts.serve_conns, ts.serve_conns_per_node, lim);
	advertised_host(c, host, sizeof(host));
	if (reach_addr(t, "tcp", host, ret_addr, addrlen) < 0) {
		snprintf(err, errlen, "cannot tell the transport's address");
		return -EIO;
	}
	r = reach_addr(t, "rdma", host, ret_rdma, rdmalen);
	if (r == -ENOTCONN) {
		/* RDMA does not serve (transport=tcp, no device, a build
		 * without it): "" on the card */
		ret_rdma[0] = '\0';
		return 0;
	}
	if (r < 0)
		snprintf(err, errlen, "cannot tell the RDMA transport's address: %s", strerror(-r));
	return r;
}
