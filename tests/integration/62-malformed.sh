#!/bin/bash
# A peer that speaks nonsense: garbage, a bad magic or version, a GET before
# the handshake, absurd lengths, truncated frames, unknown types, a flood of
# idle connections.  Each bad connection is closed and counted; the daemon
# keeps serving everyone else.  A well-formed client written here from
# docs/protocol.md gets the right bytes, ENOENT and ERANGE.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 getfattr
start_redis
mount_objfs a "$REDIS_URL" "capacity=128M,io_timeout=1000"
mount_objfs b "$REDIS_URL" "capacity=128M"
A=$(mnt_of a)
B=$(mnt_of b)
mkdata "$T/obj" 300000
cp "$T/obj" "$A/obj"
id=$(xattr "$A/obj" user.objfs.id)
port=$(status_of a listen | sed 's/.*://')

step "a hostile client against a (port $port)"
timeout -k 5 120 python3 - "$port" "$id" "$T/obj" <<'PY'
import os, socket, struct, sys, time

port, oid, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
data = open(path, "rb").read()
MAGIC = b"OBJF"
HELLO, CHALLENGE, AUTH, READY, GET, DATA, ERR = 1, 2, 3, 4, 5, 6, 7

def hdr(typ, flags=0, status=0, reqid=0, oid=0, off=0, length=0, magic=MAGIC, version=1):
    return magic + struct.pack("<BBHiIQQQ", version, typ, flags, status, reqid, oid, off, length)

def conn():
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    return s

def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("closed after %d of %d bytes" % (len(b), n))
        b += c
    return b

def closed(s, what):
    """The server must close this connection (EOF or reset) within 5 s."""
    s.settimeout(5)
    try:
        while True:
            c = s.recv(65536)
            if not c:
                return
    except ConnectionResetError:
        return
    except socket.timeout:
        sys.exit("FAIL: connection not closed after " + what)

def hello(s, name=b"tester"):
    body = os.urandom(32) + name
    s.sendall(hdr(HELLO, length=len(body)) + body)
    h = recv_exact(s, 40)
    assert h[:4] == MAGIC, h
    ver, typ, flags, status = struct.unpack("<BBHi", h[4:12])
    assert typ == READY and status == 0, (typ, status)

def parse(h):
    assert h[:4] == MAGIC, h
    return struct.unpack("<BBHiIQQQ", h[4:])

# 1. well-formed: the whole object, a range, ENOENT, ERANGE
s = conn()
hello(s)
s.sendall(hdr(GET, reqid=7, oid=oid, off=0, length=len(data)))
ver, typ, flags, status, reqid, rid, off, length = parse(recv_exact(s, 40))
assert (typ, reqid, rid, off, length) == (DATA, 7, oid, 0, len(data)), (typ, reqid, rid, off, length)
assert recv_exact(s, len(data)) == data, "payload differs"
s.sendall(hdr(GET, reqid=8, oid=oid, off=1000, length=5000))
ver, typ, flags, status, reqid, rid, off, length = parse(recv_exact(s, 40))
assert typ == DATA and length == 5000
assert recv_exact(s, 5000) == data[1000:6000]
s.sendall(hdr(GET, reqid=9, oid=oid + 1000000, off=0, length=10))
ver, typ, flags, status, reqid, rid, off, length = parse(recv_exact(s, 40))
assert typ == ERR and status == 2, ("ENOENT expected", typ, status)
s.sendall(hdr(GET, reqid=10, oid=oid, off=len(data) - 10, length=11))
ver, typ, flags, status, reqid, rid, off, length = parse(recv_exact(s, 40))
assert typ == ERR and status == 34, ("ERANGE expected", typ, status)
s.close()
print("well-formed client: ok")

bad = []
# 2. garbage
bad.append(("garbage", lambda s: s.sendall(os.urandom(4096))))
# 3. bad magic, bad version, unknown type
bad.append(("bad magic", lambda s: s.sendall(hdr(HELLO, magic=b"XXXX", length=40) + os.urandom(40))))
bad.append(("bad version", lambda s: s.sendall(hdr(HELLO, version=99, length=40) + os.urandom(40))))
bad.append(("unknown type", lambda s: s.sendall(hdr(200))))
# 4. GET before the handshake
bad.append(("GET before HELLO", lambda s: s.sendall(hdr(GET, reqid=1, oid=oid, length=10))))
# 5. absurd lengths
bad.append(("HELLO body of 2^40", lambda s: s.sendall(hdr(HELLO, length=1 << 40))))
def absurd_get(s):
    hello(s)
    s.sendall(hdr(GET, reqid=1, oid=oid, off=0, length=1 << 62))
bad.append(("GET of 2^62 bytes", absurd_get))
def overflow_get(s):
    hello(s)
    s.sendall(hdr(GET, reqid=1, oid=oid, off=(1 << 64) - 5, length=100))
bad.append(("GET whose range overflows", overflow_get))
def second_hello(s):
    hello(s)
    s.sendall(hdr(HELLO, length=40) + os.urandom(40))
bad.append(("HELLO after READY", second_hello))
def data_from_client(s):
    hello(s)
    s.sendall(hdr(DATA, reqid=1, oid=oid, length=100) + os.urandom(100))
bad.append(("DATA from a client", data_from_client))
# 6. a truncated header, then nothing: the server's timeout closes it
bad.append(("truncated header", lambda s: s.sendall(hdr(HELLO, length=40)[:17])))
bad.append(("HELLO with a bad node name", lambda s: s.sendall(hdr(HELLO, length=35) + os.urandom(32) + b"a/b")))

for what, fn in bad:
    s = conn()
    try:
        fn(s)
    except (BrokenPipeError, ConnectionResetError):
        pass
    closed(s, what)
    s.close()
    print("closed after:", what)

# 7. a flood of idle connections, then a real request still works
idle = [conn() for _ in range(64)]
s = conn()
hello(s)
s.sendall(hdr(GET, reqid=1, oid=oid, off=0, length=100))
ver, typ, flags, status, reqid, rid, off, length = parse(recv_exact(s, 40))
assert typ == DATA and recv_exact(s, 100) == data[:100]
s.close()
for c in idle:
    c.close()
print("served while 64 idle connections were open")
PY
[ $? = 0 ] || fail "the hostile client failed"
bf=$(status_of a bad_frames)
[ "$bf" -ge 8 ] || fail "a counted $bf bad frames, expected at least 8"

step "a still serves other nodes, and is still mounted and well"
eventually 10 ls_has "$B" obj
assert_ok cmp "$T/obj" "$B/obj"
is_mounted "$A" || fail "a is no longer mounted"
assert_ok cmp "$T/obj" "$A/obj"
