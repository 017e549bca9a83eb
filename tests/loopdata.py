"""The bytes of the files a create loop of tests/lib.sh writes
(start_create_loop) and checks (check_create_loop): they depend on the
loop's id and the file's number only, so the check needs no copy."""

import hashlib


def loop_bytes(lid, n):
    seed = ("%s.%d" % (lid, n)).encode()
    size = 1 + int.from_bytes(hashlib.sha256(seed).digest()[:4], "big") % 20000
    return hashlib.shake_256(seed).digest(size)
