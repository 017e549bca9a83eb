/*
 * tcp_i.h: the TCP backend's internals that the unit tests and the fuzz
 * target drive directly, without a listening socket.  transport.c knows
 * the backend only as transport_tcp_ops (transport_i.h).
 */
#ifndef OBJFS_TCP_I_H
#define OBJFS_TCP_I_H

#include <stdatomic.h>
#include <sys/socket.h>

#include "transport_i.h"

/*
 * Serve one already-connected stream socket @fd, whose peer is @peer
 * (used for the loopback rule and logs), as a server thread would: until
 * the peer closes, misbehaves or stalls, or *@stop becomes true.  Does
 * not close @fd.  Needs t->src.
 */
void transport_tcp_serve_fd(struct transport *t, int fd, const struct sockaddr *peer,
			    socklen_t peer_len, const atomic_bool *stop);

/* Run the client side of the handshake on a connected socket @fd, in
 * wire version @ver (WIRE_V1, or WIRE_V2 if t->wire_max allows). */
int transport_tcp_client_handshake(struct transport *t, int fd, unsigned ver);

#endif
