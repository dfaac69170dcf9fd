"""The exact bytes of inreplay's two RDB encodings, pinned: DUMP payloads and
the keyspace part of the replication RDB image.

DUMP and the RDB image share one value encoder (fstack_redis/rdb.c); these
tests hold both to the bytes each wrote before they shared it, so the sharing
changes nothing a replica, RESTORE or redis-check-rdb sees. The two differ on
purpose in one point: DUMP writes every string raw (length + bytes), the image
writes decimal integers in Redis's integer encodings (0xC0/0xC1/0xC2).

Members of sets and fields of hashes come in the order of a hash table with a
random seed, so for those each order of the listed members is accepted.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from test_replication import attach, crc64_jones

if TYPE_CHECKING:
    from conftest import ServerProcess

SETUP: list[tuple[str, ...]] = [
    ("SET", "s", "hello"), ("SET", "n", "12345"), ("SET", "neg", "-7"), ("SET", "big", "x" * 100),
    ("SET", "huge", "y" * 20000), ("RPUSH", "l", "a", "12", "x" * 70),
    ("SADD", "st", "m", "7"), ("HSET", "h", "f", "v", "g", "1"),
]  # fmt: skip


def variants(head: bytes, parts: list[bytes]) -> set[bytes]:
    """head then the parts in any order."""
    return {head + b"".join(p) for p in itertools.permutations(parts)}


# DUMP's value bytes (type + value), before version and checksum
DUMP_BODIES: dict[str, set[bytes]] = {
    "s": {b"\x00\x05hello"},
    "n": {b"\x00\x0512345"},  # raw, not integer-encoded
    "neg": {b"\x00\x02-7"},
    "big": {b"\x00\x40\x64" + b"x" * 100},  # 14-bit length
    "huge": {b"\x00\x80\x00\x00\x4e\x20" + b"y" * 20000},  # 32-bit length
    "l": {b"\x01\x03\x01a\x0212\x40\x46" + b"x" * 70},
    "st": variants(b"\x02\x02", [b"\x01m", b"\x017"]),
    "h": variants(b"\x04\x02", [b"\x01f\x01v", b"\x01g\x011"]),
}


def trailer(body: bytes) -> bytes:
    """RDB version 10 (2 bytes LE) and the CRC-64 of all before it (8 bytes LE)."""
    head = body + b"\x0a\x00"
    return head + crc64_jones(head).to_bytes(8, "little")


def test_dump_bytes_are_pinned(inreplay_server: ServerProcess) -> None:
    c = inreplay_server.raw()
    c.call("FLUSHALL")
    for cmd in SETUP:
        c.call(*cmd)
    # one payload spelled out whole, checksum included
    assert c.call("DUMP", "s") == bytes.fromhex("000568656c6c6f" "0a00" "6372df766534200a")
    for key, bodies in DUMP_BODIES.items():
        got = c.call("DUMP", key)
        assert got in {trailer(b) for b in bodies}, (key, got[:40])
    c.close()


EXPIRE_AT = 4102444800000  # 2100-01-01, in unix ms

# the image's records (type, key, value; [expire]) of database 0
RDB_RECORDS: dict[str, set[bytes]] = {
    "s": {b"\x00\x01s\x05hello"},
    "n": {b"\x00\x01n\xc1\x39\x30"},  # 16-bit integer encoding
    "neg": {b"\x00\x03neg\xc0\xf9"},  # 8-bit
    "big": {b"\x00\x03big\x40\x64" + b"x" * 100},
    "huge": {b"\x00\x04huge\x80\x00\x00\x4e\x20" + b"y" * 20000},
    "l": {b"\x01\x01l\x03\x01a\xc0\x0c\x40\x46" + b"x" * 70},
    "st": variants(b"\x02\x02st\x02", [b"\x01m", b"\xc0\x07"]),
    "h": variants(b"\x04\x01h\x02", [b"\x01f\x01v", b"\x01g\xc0\x01"]),
    "t": {b"\xfc" + EXPIRE_AT.to_bytes(8, "little") + b"\x00\x01t\xc2\x40\xe2\x01\x00"},
}


def test_rdb_image_bytes_are_pinned(inreplay_server: ServerProcess, tmp_path: Path) -> None:
    r = inreplay_server.raw()
    r.call("FLUSHALL")
    for cmd in SETUP:
        r.call(*cmd)
    r.call("SET", "t", "123456", "PXAT", str(EXPIRE_AT))
    r.call("SELECT", "3")
    r.call("SET", "five", "5")
    c, image = attach(inreplay_server)
    c.close()
    r.close()
    aux_end = b"\xfa\x08aof-base\xc0\x00"
    assert image.count(aux_end) == 1
    body = image[image.index(aux_end) + len(aux_end) :]
    head = b"\xfe\x00\xfb\x09\x01"  # SELECTDB 0, RESIZEDB 9 keys, 1 with a TTL
    assert body.startswith(head), body[:16]
    rest = body[len(head) :]
    left = dict(RDB_RECORDS)
    while left:  # the records of database 0 in any order, each once
        key = next((k for k, vs in left.items() if any(rest.startswith(v) for v in vs)), None)
        assert key is not None, (sorted(left), rest[:40])
        rest = rest[len(next(v for v in left.pop(key) if rest.startswith(v))) :]
    tail = b"\xfe\x03\xfb\x01\x00\x00\x04five\xc0\x05\xff"
    assert rest == tail + crc64_jones(image[: len(image) - 8]).to_bytes(8, "little")
    checker = shutil.which("redis-check-rdb")
    if checker:
        (tmp_path / "dump.rdb").write_bytes(image)
        out = subprocess.run([checker, str(tmp_path / "dump.rdb")], capture_output=True, text=True)
        assert out.returncode == 0 and "RDB looks OK" in out.stdout, out.stdout + out.stderr
        assert "10 keys read" in out.stdout and "1 expires" in out.stdout, out.stdout
