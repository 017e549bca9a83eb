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
 * Create the transport from the options (listen=, secret_file=,
 * io_timeout=, serve_bwlimit=).  NULL with a message in @err if the
 * secret file is unusable or an option is bad.
 */
struct transport *endpoint_new(const struct config *c, char *err, size_t errlen);

/*
 * Start serving @src and put the address peers should use, "HOST:PORT",
 * in @ret_addr: advertise= if given, else the listen address if it is a
 * specific one, else this host's first non-loopback IPv4 address (else
 * 127.0.0.1); with the real port when listen= asked for port 0.
 * -errno with a message in @err.
 */
int endpoint_serve(struct transport *t, const struct config *c, const struct transport_source *src,
		   char *ret_addr, size_t addrlen, char *err, size_t errlen);

#endif
