/*
 * wire: the transport's binary protocol, encode and decode only (no I/O).
 * docs/protocol.md is the full description; this is the short one.
 *
 * Every message starts with a fixed 40-byte header, little-endian:
 *
 *    0  u32 magic    "OBJF" (bytes 4f 42 4a 46)
 *    4  u8  version  WIRE_V1 or WIRE_V2 (the HELLO's, for the whole
 *                    connection)
 *    5  u8  type     enum wire_type
 *    6  u16 flags    HELLO: WIRE_F_SECRET; GET (v2): WIRE_F_PARTIAL_OK,
 *                    WIRE_F_WANT_HAVE, WIRE_F_BUSY_OK, WIRE_F_PARK; HAVE:
 *                    WIRE_F_HAVE_DATA; else 0
 *    8  i32 status   READY: 0 or EACCES; ERR: a positive errno; HAVE: its
 *                    retry_ms (1..60000 with the body's BUSY flag, else 0);
 *                    else 0
 *   12  u32 reqid    GET/DATA/ERR/HAVE: chosen by the client, echoed; else 0
 *   16  u64 id       GET/DATA/ERR/HAVE: the object; else 0
 *   24  u64 offset   GET/DATA/ERR/HAVE: the range start; else 0
 *   32  u64 length   HELLO/CHALLENGE/AUTH/HAVE: body bytes that follow;
 *                    GET: range length (no body); DATA: range length,
 *                    and exactly that many payload bytes follow;
 *                    READY/ERR: 0
 *
 * Bodies: HELLO is the client nonce then the client's node name (1..63
 * bytes, no NUL); CHALLENGE the server nonce then the server proof; AUTH
 * the client proof; HAVE (version 2 only) u8 block shift, u8 flags, u16
 * load, u32 nblocks, then the have and fetching bitmaps of
 * ceil(nblocks/8) bytes each.  A DATA payload is not a body: the
 * transport moves it straight between shared memory and the socket.
 *
 * Decoding checks every field against its type and version and returns
 * -EPROTO for anything else, so a decoded message can be used without
 * further checks: a version 1 message never has a version 2 type or
 * flag.  The largest handshake body is WIRE_BODY_MAX bytes, the largest
 * body of all WIRE_BODY_MAX_V2 (a HAVE); a range is at most WIRE_LEN_MAX
 * bytes and offset + length never overflows.  Encoding applies the same
 * rules (-EINVAL), so we never send what we would reject.
 */
#ifndef OBJFS_WIRE_H
#define OBJFS_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport.h"
#include "util.h"

#define WIRE_MAGIC 0x464a424fU /* "OBJF" read as a little-endian u32 */
#define WIRE_V1 1	       /* every peer; RDMA; a peer whose card lacks "fan1" */
#define WIRE_V2 2	       /* adds GET flags and HAVE (TCP, peers with "fan1") */
#define WIRE_HDR_LEN 40
#define WIRE_NONCE_LEN 32
#define WIRE_PROOF_LEN 32	  /* HMAC-SHA256 */
#define WIRE_LEN_MAX (1ULL << 30) /* one GET / DATA */
#define WIRE_NODE_MAX (OBJFS_NODE_MAX - 1)
/* a handshake body; a handshake message (what RDMA carries) */
#define WIRE_BODY_MAX (WIRE_NONCE_LEN + WIRE_NODE_MAX)
#define WIRE_MSG_MAX (WIRE_HDR_LEN + WIRE_BODY_MAX)
/* a HAVE body: 8 bytes, then two bitmaps of at most 512 bytes */
#define WIRE_HAVE_FIXED 8
#define WIRE_HAVE_BODY_MAX (WIRE_HAVE_FIXED + 2 * (TRANSPORT_HAVE_BLOCKS_MAX / 8))
/* the largest body and message of either version */
#define WIRE_BODY_MAX_V2 WIRE_HAVE_BODY_MAX
#define WIRE_MSG_MAX_V2 (WIRE_HDR_LEN + WIRE_BODY_MAX_V2)
#define WIRE_STATUS_MAX 4095

enum wire_type {
	WIRE_HELLO = 1,	    /* client -> server: nonce, node name */
	WIRE_CHALLENGE = 2, /* server -> client: nonce, server proof */
	WIRE_AUTH = 3,	    /* client -> server: client proof */
	WIRE_READY = 4,	    /* server -> client: status 0 or EACCES */
	WIRE_GET = 5,	    /* client -> server: id, offset, length */
	WIRE_DATA = 6,	    /* server -> client: echo of the GET, then payload */
	WIRE_ERR = 7,	    /* server -> client: echo of the GET, status */
	WIRE_HAVE = 8,	    /* v2, server -> client: echo of the GET, what it holds */
};

#define WIRE_F_SECRET 0x0001	 /* HELLO: the client has a cluster secret */
#define WIRE_F_PARTIAL_OK 0x0001 /* GET (v2): lacking part of the range, answer HAVE */
#define WIRE_F_WANT_HAVE 0x0002	 /* GET (v2): a HAVE first; with length 0, only that */
#define WIRE_F_BUSY_OK 0x0004	 /* GET (v2): at its slots, the server may answer HAVE, busy */
#define WIRE_F_PARK 0x0008	 /* GET (v2): a range the server receives: answer once it has it */
#define WIRE_F_HAVE_DATA 0x0001	 /* HAVE: the DATA of the same GET follows */

/*
 * One message.  Header fields first; nonce, proof, node and have are the
 * body (HELLO: nonce and node; CHALLENGE: nonce and proof; AUTH: proof;
 * HAVE: have, whose bitmaps beyond nblocks are zero).  For HELLO,
 * CHALLENGE, AUTH and HAVE, len is the body length: transport_wire_encode() sets it
 * on the wire itself and the decoders report it.  ver 0 encodes as
 * WIRE_V1; the decoders set WIRE_V1 or WIRE_V2.
 */
struct wire_msg {
	uint8_t ver;
	uint8_t type;
	uint16_t flags;
	int32_t status;
	uint32_t reqid;
	uint64_t id;
	uint64_t off;
	uint64_t len;
	uint8_t nonce[WIRE_NONCE_LEN];
	uint8_t proof[WIRE_PROOF_LEN];
	char node[OBJFS_NODE_MAX];
	struct transport_have have;
};

/* "HELLO", ..., or "unknown" */
const char *transport_wire_type_name(unsigned type);

/*
 * Is @h a HAVE we send and accept: flags TRANSPORT_HAVE_SEALED and
 * TRANSPORT_HAVE_BUSY at most, retry_ms 1..TRANSPORT_RETRY_MS_MAX when
 * busy and 0 otherwise, shift below 64, nblocks at most
 * TRANSPORT_HAVE_BLOCKS_MAX and 0 only when sealed, and no bit set
 * beyond nblocks?
 */
bool transport_wire_have_ok(const struct transport_have *h);

/*
 * Encode header and body into @buf (@size bytes; WIRE_MSG_MAX always
 * suffices for a handshake message, WIRE_MSG_MAX_V2 for any).  Returns
 * the bytes written, or -EINVAL if @m breaks a rule of its type or @buf
 * is too small.
 */
int transport_wire_encode(const struct wire_msg *m, uint8_t *buf, size_t size);

/*
 * Decode the WIRE_HDR_LEN bytes of a header into @ret (body fields
 * zeroed) and set *ret_body to the body bytes that follow (0 for all but
 * HELLO, CHALLENGE, AUTH and HAVE; at most WIRE_BODY_MAX_V2).  0 or
 * -EPROTO.
 */
int transport_wire_decode_hdr(const uint8_t *buf, struct wire_msg *ret, size_t *ret_body);

/*
 * Decode the @len body bytes of the message whose header @m holds into
 * its body fields.  0, or -EPROTO if @len is not what the header said or
 * the body breaks a rule (a node name that util_node_name_validate() refuses;
 * a HAVE that transport_wire_have_ok() refuses, or whose length is not that of its
 * nblocks).
 */
int transport_wire_decode_body(struct wire_msg *m, const uint8_t *body, size_t len);

/*
 * Decode one whole message (header and body) from the start of @buf.
 * Returns the bytes it took, -EAGAIN if @buf holds only part of a message
 * that is well formed so far, or -EPROTO.
 */
int transport_wire_decode(const uint8_t *buf, size_t len, struct wire_msg *ret);

/* Little-endian integers, for every codec of the transport. */

static inline void put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void put_u32(uint8_t *p, uint32_t v)
{
	put_u16(p, (uint16_t)v);
	put_u16(p + 2, (uint16_t)(v >> 16));
}

static inline void put_u64(uint8_t *p, uint64_t v)
{
	put_u32(p, (uint32_t)v);
	put_u32(p + 4, (uint32_t)(v >> 32));
}

static inline uint16_t get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)get_u16(p) | (uint32_t)get_u16(p + 2) << 16;
}

static inline uint64_t get_u64(const uint8_t *p)
{
	return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

#endif
