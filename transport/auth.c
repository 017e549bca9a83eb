/*
 * auth: the handshake that comes before any object is served, as two
 * small state machines (server and client) that consume and produce
 * struct wire_msg, so any backend can carry them over its own channel.
 *
 *   client                                 server
 *   HELLO(cnonce, node, F_SECRET?)  --->
 *                                   <---   CHALLENGE(snonce, sproof)   [secret]
 *   AUTH(cproof)                    --->
 *                                   <---   READY(0 or EACCES)
 *
 * With a secret:  sproof = HMAC-SHA256(secret, "objfs-srv" T)
 *                 cproof = HMAC-SHA256(secret, "objfs-cli" T)
 *   where T = version (1 byte) || cnonce || snonce || len(node) (1 byte)
 *   || node, node being the client's name from HELLO and version the
 *   HELLO's (the connection's: every message of it carries that one).
 * Each side picks a fresh 32-byte nonce per connection, so a proof is
 * good for one connection only; the labels differ, so a proof made by
 * one side is never accepted as the other side's (no reflection); the
 * client's name is covered, so the name the server logs is the one the
 * secret holder sent.  The server proves itself first, but only over a
 * label a client never signs, which teaches a prober nothing it can use.
 * The version is covered so that a man in the middle who rewrites a
 * version 2 HELLO into version 1 (to keep the peers from version 2) is
 * caught: the two ends then sign different versions.  Proofs are
 * compared with CRYPTO_memcmp().
 *
 * Without a secret the server skips the challenge and answers HELLO with
 * READY(0) if the peer is on this host, READY(EACCES) otherwise.  A
 * client with a secret insists on a CHALLENGE: a server that cannot prove
 * the secret is refused (-EACCES), so both ends must be configured alike.
 *
 * This authenticates the two ends when the connection starts; it does
 * not encrypt or sign the bytes that follow (see docs/protocol.md).
 */
#define _GNU_SOURCE
#include "transport_i.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/un.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "log.h"

enum {
	AUTH_SRV_HELLO, /* waiting for HELLO */
	AUTH_SRV_AUTH,	/* CHALLENGE sent, waiting for AUTH */
	AUTH_SRV_READY, /* authenticated */
	AUTH_SRV_REFUSED,
};

enum {
	AUTH_CLI_HELLO, /* HELLO sent */
	AUTH_CLI_AUTH,	/* AUTH sent */
	AUTH_CLI_DONE,
};

#define LABEL_SRV "objfs-srv"
#define LABEL_CLI "objfs-cli"
#define LABEL_LEN 9

/* ---- addresses ---- */

bool transport_auth_peer_is_local(const struct sockaddr *sa, socklen_t len)
{
	const struct sockaddr_in *in4 = (const struct sockaddr_in *)sa;
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

	if (!sa || len < sizeof(sa_family_t))
		return false;
	switch (sa->sa_family) {
	case AF_UNIX:
		return true;
	case AF_INET:
		return len >= sizeof(*in4) && (ntohl(in4->sin_addr.s_addr) >> 24) == 127;
	case AF_INET6:
		if (len < sizeof(*in6))
			return false;
		if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
			return true;
		return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
	}
	return false;
}

void transport_auth_addr_str(const struct sockaddr *sa, socklen_t len, char *buf, size_t size)
{
	const struct sockaddr_in *in4 = (const struct sockaddr_in *)sa;
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
	char host[INET6_ADDRSTRLEN];

	if (sa && sa->sa_family == AF_INET && len >= sizeof(*in4) &&
	    inet_ntop(AF_INET, &in4->sin_addr, host, sizeof(host)))
		snprintf(buf, size, "%s:%u", host, ntohs(in4->sin_port));
	else if (sa && sa->sa_family == AF_INET6 && len >= sizeof(*in6) &&
		 inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host)))
		snprintf(buf, size, "[%s]:%u", host, ntohs(in6->sin6_port));
	else if (sa && sa->sa_family == AF_UNIX)
		snprintf(buf, size, "unix");
	else
		snprintf(buf, size, "?");
}

/* ---- proofs ---- */

static int nonce_new(uint8_t out[WIRE_NONCE_LEN])
{
	size_t got = 0;

	while (got < WIRE_NONCE_LEN) {
		ssize_t n = getrandom(out + got, WIRE_NONCE_LEN - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		got += (size_t)n;
	}
	return 0;
}

/* HMAC-SHA256(secret, label T), T as the top of this file says. */
static int proof_make(const struct transport *t, const char *label, uint8_t ver,
		      const uint8_t cnonce[WIRE_NONCE_LEN], const uint8_t snonce[WIRE_NONCE_LEN],
		      const char *node, uint8_t out[WIRE_PROOF_LEN])
{
	uint8_t msg[LABEL_LEN + 1 + 2 * WIRE_NONCE_LEN + 1 + WIRE_NODE_MAX];
	size_t node_len = strnlen(node, WIRE_NODE_MAX + 1), n = 0;
	unsigned out_len = 0;

	if (node_len > WIRE_NODE_MAX)
		return -EINVAL;
	memcpy(msg, label, LABEL_LEN);
	n += LABEL_LEN;
	msg[n++] = ver;
	memcpy(msg + n, cnonce, WIRE_NONCE_LEN);
	n += WIRE_NONCE_LEN;
	memcpy(msg + n, snonce, WIRE_NONCE_LEN);
	n += WIRE_NONCE_LEN;
	msg[n++] = (uint8_t)node_len;
	memcpy(msg + n, node, node_len);
	n += node_len;
	if (!HMAC(EVP_sha256(), t->secret, (int)t->secret_len, msg, n, out, &out_len) ||
	    out_len != WIRE_PROOF_LEN)
		return -EIO;
	return 0;
}

static bool proof_ok(const struct transport *t, const char *label, uint8_t ver,
		     const uint8_t cnonce[WIRE_NONCE_LEN], const uint8_t snonce[WIRE_NONCE_LEN],
		     const char *node, const uint8_t proof[WIRE_PROOF_LEN])
{
	uint8_t want[WIRE_PROOF_LEN];
	bool ok;

	if (proof_make(t, label, ver, cnonce, snonce, node, want))
		return false;
	ok = CRYPTO_memcmp(want, proof, WIRE_PROOF_LEN) == 0;
	OPENSSL_cleanse(want, sizeof(want));
	return ok;
}

/* ---- server ---- */

void transport_auth_srv_init(struct auth_srv *a, bool local)
{
	memset(a, 0, sizeof(*a));
	a->state = AUTH_SRV_HELLO;
	a->local = local;
}

bool transport_auth_srv_ready(const struct auth_srv *a)
{
	return a->state == AUTH_SRV_READY;
}

static void ready(const struct auth_srv *a, struct wire_msg *reply, int status)
{
	memset(reply, 0, sizeof(*reply));
	reply->ver = a->ver;
	reply->type = WIRE_READY;
	reply->status = status;
}

static void srv_refuse(struct transport *t, struct auth_srv *a, const char *why,
		       struct wire_msg *reply, bool *ret_close)
{
	a->state = AUTH_SRV_REFUSED;
	a->why = why;
	ready(a, reply, EACCES);
	*ret_close = true;
	COUNT_ADD(t, auth_failures, 1);
}

int transport_auth_srv_step(struct transport *t, struct auth_srv *a, const struct wire_msg *in,
			    struct wire_msg *reply, bool *ret_close)
{
	int err;

	*ret_close = false;
	switch (a->state) {
	case AUTH_SRV_HELLO:
		/* a version this transport does not speak is what an old
		 * server would close on too */
		if (in->type != WIRE_HELLO || in->ver > t->wire_max)
			return -EPROTO;
		a->ver = in->ver;
		memcpy(a->cnonce, in->nonce, WIRE_NONCE_LEN);
		snprintf(a->node, sizeof(a->node), "%s", in->node);
		if (!t->secret) {
			if (!a->local) {
				srv_refuse(t, a,
					   "not a loopback peer, and no cluster secret is set",
					   reply, ret_close);
				return 0;
			}
			a->state = AUTH_SRV_READY;
			ready(a, reply, 0);
			return 0;
		}
		if (!(in->flags & WIRE_F_SECRET)) {
			srv_refuse(t, a, "the peer has no cluster secret", reply, ret_close);
			return 0;
		}
		err = nonce_new(a->snonce);
		if (err)
			return err;
		memset(reply, 0, sizeof(*reply));
		reply->ver = a->ver;
		reply->type = WIRE_CHALLENGE;
		memcpy(reply->nonce, a->snonce, WIRE_NONCE_LEN);
		err = proof_make(t, LABEL_SRV, a->ver, a->cnonce, a->snonce, a->node, reply->proof);
		if (err)
			return err;
		a->state = AUTH_SRV_AUTH;
		return 0;
	case AUTH_SRV_AUTH:
		if (in->type != WIRE_AUTH || in->ver != a->ver)
			return -EPROTO;
		if (!proof_ok(t, LABEL_CLI, a->ver, a->cnonce, a->snonce, a->node, in->proof)) {
			srv_refuse(t, a, "wrong cluster secret", reply, ret_close);
			return 0;
		}
		a->state = AUTH_SRV_READY;
		ready(a, reply, 0);
		return 0;
	}
	return -EPROTO;
}

/* ---- client ---- */

int transport_auth_cli_hello(struct transport *t, struct auth_cli *a, uint8_t ver,
			     struct wire_msg *ret_hello)
{
	int err;

	if (ver != WIRE_V1 && (ver != WIRE_V2 || t->wire_max < WIRE_V2))
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	a->state = AUTH_CLI_HELLO;
	a->ver = ver;
	err = nonce_new(a->cnonce);
	if (err)
		return err;
	memset(ret_hello, 0, sizeof(*ret_hello));
	ret_hello->ver = ver;
	ret_hello->type = WIRE_HELLO;
	ret_hello->flags = t->secret ? WIRE_F_SECRET : 0;
	memcpy(ret_hello->nonce, a->cnonce, WIRE_NONCE_LEN);
	snprintf(ret_hello->node, sizeof(ret_hello->node), "%s", t->node);
	return 0;
}

int transport_auth_cli_step(struct transport *t, struct auth_cli *a, const struct wire_msg *in,
			    struct wire_msg *reply)
{
	int err;

	/* the server answers in our HELLO's version, or is not one we know */
	if (in->ver != a->ver)
		return -EPROTO;
	if (a->state == AUTH_CLI_HELLO && in->type == WIRE_CHALLENGE) {
		/* a server that wants a secret we did not claim to have */
		if (!t->secret)
			return -EPROTO;
		memset(reply, 0, sizeof(*reply));
		reply->ver = a->ver;
		reply->type = WIRE_AUTH;
		a->state = AUTH_CLI_AUTH;
		if (!proof_ok(t, LABEL_SRV, a->ver, a->cnonce, in->nonce, t->node, in->proof)) {
			/*
			 * Never sign for a server that has not proved the
			 * secret: answer with a zero proof, which the server
			 * refuses, so that it counts and logs the mismatch.
			 */
			log_debug("transport: server failed to prove the cluster secret");
			a->refused = true;
			return 1;
		}
		err = proof_make(t, LABEL_CLI, a->ver, a->cnonce, in->nonce, t->node, reply->proof);
		if (err)
			return err;
		return 1;
	}
	if (a->state == AUTH_CLI_DONE || in->type != WIRE_READY)
		return -EPROTO;
	if (in->status || a->refused)
		return -EACCES;
	if (a->state == AUTH_CLI_HELLO && t->secret) {
		log_debug("transport: server did not ask for the cluster secret");
		return -EACCES;
	}
	a->state = AUTH_CLI_DONE;
	return 0;
}
