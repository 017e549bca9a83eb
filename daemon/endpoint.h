/*
 * endpoint: this node's transport, as the daemon sets it up: the cluster
 * secret, the listener, and the address other nodes are told to use
 * (the "listen" field of the node card).
 */
#ifndef OBJFS_ENDPOINT_H
#define OBJFS_ENDPOINT_H

#include <stddef.h>

#include "config.h"
#include "transport.h"

/*
 * Create the transport from the options (transport=, rdma_eager_max=,
 * listen=, secret_file=, io_timeout=, serve_bwlimit=).  NULL with a
 * message in @err if the secret file is unusable, an option is bad, or
 * transport=rdma was asked of a build without RDMA.
 */
struct transport *endpoint_new(const struct config *c, char *err, size_t errlen);

/*
 * Start serving @src and put the addresses peers should use, "HOST:PORT",
 * in @ret_addr (TCP: the card's "listen") and @ret_rdma (the card's
 * "rdma"; "" if RDMA does not serve): the host is advertise= if given,
 * else the listen address if it is a specific one, else this host's
 * first non-loopback IPv4 address (else 127.0.0.1); the port the
 * backend is bound to (the real one when listen= asked for port 0).
 * -errno with a message in @err (with transport=rdma, also when this
 * host cannot serve RDMA).
 */
int endpoint_serve(struct transport *t, const struct config *c, const struct transport_source *src,
		   char *ret_addr, size_t addrlen, char *ret_rdma, size_t rdmalen, char *err,
		   size_t errlen);

#endif
