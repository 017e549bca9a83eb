/*
 * endpoint: see endpoint.h.
 */
#include "endpoint.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct transport *endpoint_new(const struct config *c, char *err, size_t errlen)
{
	struct transport_config tc = {
	    .node = c->node,
	    .listen_host = c->listen_host,
	    .listen_port = c->listen_port,
	    .io_timeout_ms = c->io_timeout_ms,
	    .serve_bwlimit = c->serve_bwlimit,
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
	if (!t)
		snprintf(err, errlen, "cannot set up the transport: %s", strerror(-r));
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

int endpoint_serve(struct transport *t, const struct config *c, const struct transport_source *src,
		   char *ret_addr, size_t addrlen, char *err, size_t errlen)
{
	char bound[300], host[256];
	const char *port;
	int r;

	r = transport_serve(t, src);
	if (r < 0) {
		snprintf(err, errlen, "cannot listen on %s:%u: %s%s", c->listen_host,
			 c->listen_port, strerror(-r),
			 r == -EADDRINUSE ? " (another node on this host? give each its own "
					    "listen=HOST:PORT)"
					  : "");
		return r;
	}
	r = transport_addr(t, bound, sizeof(bound));
	port = r == 0 ? strrchr(bound, ':') : NULL;
	if (!port) {
		snprintf(err, errlen, "cannot tell the transport's address");
		return -EIO;
	}
	if (c->advertise)
		snprintf(host, sizeof(host), "%s", c->advertise);
	else if (!wildcard(c->listen_host))
		snprintf(host, sizeof(host), "%s", c->listen_host);
	else if (first_address(host, sizeof(host)) < 0)
		snprintf(host, sizeof(host), "127.0.0.1");
	if (strchr(host, ':') && host[0] != '[')
		snprintf(ret_addr, addrlen, "[%s]%s", host, port);
	else
		snprintf(ret_addr, addrlen, "%s%s", host, port);
	log_info("serving objects over %s on %s; peers reach this node at %s", transport_name(t),
		 bound, ret_addr);
	return 0;
}
