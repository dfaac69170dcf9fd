"""RESTORE allocates only what the payload can fill.

Each payload below is a few bytes with a valid RDB version and CRC-64 trailer,
but declares a length (a string's, an LZF string's uncompressed size, a
collection's element count, a stream's node, group, PEL or consumer count) far
beyond the bytes that follow it. Stock Redis 7.0 and inreplay must both refuse
it with Redis's error for a bad payload, stay up, and not grow: a server that
sized an allocation by the declared length would abort or touch gigabytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import RespError, ServerProcess
from helpers import dump_payload

BAD = RespError(b"ERR Bad data format")
RSS_SLACK_KIB = 64 * 1024  # +64 MiB: far below any declared length here
# the peak of the address space: an allocation sized by a declared length
# shows there even when nothing touches it (the 4 GiB a lying LZF string asks)
VM_SLACK_KIB = 1024 * 1024


def len32(n: int) -> bytes:
    """An RDB length as 0x80 + 32-bit big-endian."""
    return b"\x80" + struct.pack(">I", n)


def len64(n: int) -> bytes:
    """An RDB length as 0x81 + 64-bit big-endian."""
    return b"\x81" + struct.pack(">Q", n)


HUGE32 = 0xFFFFFFFF
HUGE64 = 1 << 40

# a one-entry stream node as Redis writes it: the master ID (0-0) as its key,
# then a listpack: count 1, deleted 0, one master field "f", the master
# terminator 0, one entry (flags SAMEFIELDS, ID deltas 0 and 1, value "v",
# lp-count 4)
def _lp(*elems: bytes) -> bytes:
    body = b"".join(elems)
    return struct.pack("<IH", 6 + len(body) + 1, len(elems)) + body + b"\xff"


def _lpint(v: int) -> bytes:
    return bytes([v, 1])  # 7-bit unsigned integer, back length 1


def _lpstr(s: bytes) -> bytes:
    return bytes([0x80 | len(s)]) + s + bytes([1 + len(s)])


_LP = _lp(
    _lpint(1), _lpint(0), _lpint(1), _lpstr(b"f"), _lpint(0),
    _lpint(2), _lpint(0), _lpint(1), _lpstr(b"v"), _lpint(4),
)  # fmt: skip
_NODE = b"\x10" + bytes(16) + bytes([len(_LP)]) + _LP
# after the nodes: length 1, last ID 0-1 (v1)
_STREAM_META = b"\x01\x00\x01"

CASES = {
    # strings: raw length, LZF uncompressed length and LZF compressed length
    "string_raw_len32": b"\x00" + len32(HUGE32) + b"abc",
    "string_raw_len64": b"\x00" + len64(HUGE64) + b"abc",
    "string_lzf_ulen": b"\x00\xc3" + b"\x02" + len32(HUGE32) + b"\x00ab",
    "string_lzf_ulen64": b"\x00\xc3" + b"\x02" + len64(1 << 32) + b"\x00ab",
    "string_lzf_clen": b"\x00\xc3" + len32(HUGE32) + b"\x05" + b"\x04hello",
    # collections: element counts
    "list_count": b"\x01" + len32(HUGE32) + b"\x01a",
    "list_count64": b"\x01" + len64(HUGE64) + b"\x01a",
    "set_count": b"\x02" + len32(HUGE32) + b"\x01a",
    "hash_count": b"\x04" + len32(HUGE32) + b"\x01f\x01v",
    "zset_count": b"\x05" + len32(HUGE32) + b"\x01m" + struct.pack("<d", 1.0),
    "zset_count64": b"\x05" + len64(HUGE64) + b"\x01m" + struct.pack("<d", 1.0),
    # a list element, a set member, a hash value: an LZF string that lies
    "list_lzf_elem": b"\x01\x01\xc3\x02" + len32(HUGE32) + b"\x00a",
    "hash_lzf_value": b"\x04\x01\x01f\xc3\x02" + len32(HUGE32) + b"\x00a",
    # streams: node count, a listpack's length, groups, PEL, consumers
    "stream_nodes": b"\x0f" + len32(HUGE32) + _NODE,
    "stream_lp_len": b"\x0f\x01\x10" + bytes(16) + len32(HUGE32) + _LP,
    "stream_lp_lzf": b"\x0f\x01\x10" + bytes(16) + b"\xc3\x02" + len32(HUGE32) + b"\x00a",
    "stream_groups": b"\x0f\x01" + _NODE + _STREAM_META + len32(HUGE32) + b"\x01g\x00\x00",
    "stream_pel": b"\x0f\x01" + _NODE + _STREAM_META + b"\x01\x01g\x00\x00" + len32(HUGE32),
    "stream_consumers": (
        b"\x0f\x01" + _NODE + _STREAM_META + b"\x01\x01g\x00\x00\x00" + len32(HUGE32) + b"\x01c"
    ),
    "stream_consumer_pel": (
        b"\x0f\x01" + _NODE + _STREAM_META + b"\x01\x01g\x00\x00\x00\x01\x01c"
        + bytes(8) + len32(HUGE32)
    ),
}

# Stock Redis 7.0 pre-sizes a set's, a hash's and a sorted set's dict by the
# declared count (dictTryExpand: tens of GB, seconds of page faults), so it is
# the inreplay servers alone that these cases check.
REDIS_PRESIZES = {"set_count", "hash_count", "zset_count", "zset_count64"}


def _memory_kib(srv: ServerProcess) -> tuple[int, int, int]:
    """The server process's VmRSS, VmHWM (peak RSS) and VmPeak in KiB."""
    r = srv.client()
    try:
        pid = int(r.info("server")["process_id"])
    finally:
        r.close()
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM", "VmPeak"):
            fields[name] = int(value.split()[0])
    return fields["VmRSS"], fields["VmHWM"], fields["VmPeak"]


def test_the_well_formed_stream_restores(server: ServerProcess) -> None:
    """The stream the cases below corrupt is a payload both servers accept."""
    r = server.client()
    try:
        body = b"\x0f\x01" + _NODE + _STREAM_META + b"\x00"
        assert r.restore("s", 0, dump_payload(body)) == b"OK"
        assert r.xrange("s") == [(b"0-1", {b"f": b"v"})]
    finally:
        r.close()


@pytest.mark.parametrize("case", sorted(CASES))
def test_restore_refuses_a_declared_length_the_payload_cannot_fill(
    server: ServerProcess, case: str
) -> None:
    if server.kind == "redis" and case in REDIS_PRESIZES:
        pytest.skip("stock Redis 7.0 sizes its dict by this count (dictTryExpand) and stalls")
    rss0, hwm0, peak0 = _memory_kib(server)
    with server.raw() as c:
        reply = c.call("RESTORE", "k", "0", dump_payload(CASES[case]))
        assert reply == BAD, (case, reply)
        assert c.call("EXISTS", "k") == 0
        assert c.call("PING") == "PONG"
    assert server.alive()
    rss1, hwm1, peak1 = _memory_kib(server)
    assert rss1 - rss0 < RSS_SLACK_KIB, (case, rss0, rss1)
    assert hwm1 - hwm0 < RSS_SLACK_KIB, (case, hwm0, hwm1)
    if server.kind != "redis":  # Redis reserves (untouched) what the lengths say
        assert peak1 - peak0 < VM_SLACK_KIB, (case, peak0, peak1)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_fresh_server_reserves_nothing_for_a_lying_length(
    server_factory: Callable[..., ServerProcess], case: str
) -> None:
    """VmPeak only rises: the shared server above shows an allocation the first
    time, a fresh inreplay shows it for each case."""
    srv = server_factory("inreplay")
    _, _, peak0 = _memory_kib(srv)
    with srv.raw() as c:
        assert c.call("RESTORE", "k", "0", dump_payload(CASES[case])) == BAD
    _, _, peak1 = _memory_kib(srv)
    assert peak1 - peak0 < VM_SLACK_KIB, (case, peak0, peak1)


def _lpuint(v: int) -> bytes:
    """A listpack unsigned integer: 7-bit, 13-bit or 24-bit with its back length."""
    if v < 128:
        return _lpint(v)
    if v < 4096:
        return bytes([0xC0 | (v >> 8), v & 0xFF, 2])
    return b"\xf2" + v.to_bytes(3, "little") + b"\x04"


def _lpbigstr(s: bytes) -> bytes:
    """A listpack string with a 32-bit length; its back length as Redis encodes it."""
    enc = b"\xf0" + struct.pack("<I", len(s)) + s
    n, back = len(enc), []
    while True:
        back.append(n & 127)
        n >>= 7
        if not n:
            break
    # the high bits first, bare; each lower group after them with 128 set (lpEncodeBacklen)
    top = len(back) - 1
    return enc + bytes(b if i == top else b | 128 for i, b in enumerate(back))[::-1]


def test_a_stream_whose_shared_fields_expand_past_memory_is_refused(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """A stream node writes its master fields once and each SAMEFIELDS entry shares them;
    inreplay gives every entry its own copy. A 2 MB node of n entries sharing one field of
    8n bytes asks for twice the machine's memory: it is refused before anything is copied
    (stock Redis keeps the listpack as it is, and takes it). The server runs with a 4 GiB
    address-space limit, so a regression aborts it instead of filling the machine."""
    import resource

    memtotal = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    n = int((2 * memtotal / 8) ** 0.5) + 1
    field = b"x" * (8 * n)
    elems = [_lpuint(n), _lpint(0), _lpint(1), _lpbigstr(field), _lpint(0)]
    for i in range(n):  # SAMEFIELDS, ID 0-(i+1), value "v", lp-count 4
        elems += [_lpint(2), _lpint(0), _lpuint(i + 1), _lpstr(b"v"), _lpint(4)]
    body = b"".join(elems)
    lp = struct.pack("<IH", 6 + len(body) + 1, 65535) + body + b"\xff"
    count = b"\x80" + struct.pack(">I", n)
    pl = dump_payload(
        b"\x0f\x01\x10" + bytes(16) + b"\x80" + struct.pack(">I", len(lp)) + lp
        + count + b"\x00" + count + b"\x00" + b"\x00"
    )  # fmt: skip
    redis_srv = server_factory("redis")  # well formed: stock Redis takes it
    with redis_srv.raw(timeout=60) as c:
        assert c.call("RESTORE", "s", "0", pl) == "OK"
        assert c.call("XLEN", "s") == n
    redis_srv.stop()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, hard))
    try:
        srv = server_factory("inreplay")
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    rss0, _, _ = _memory_kib(srv)
    with srv.raw(timeout=60) as c:
        assert c.call("RESTORE", "s", "0", pl) == BAD
        assert c.call("EXISTS", "s") == 0
    assert srv.alive()
    rss1, _, _ = _memory_kib(srv)
    assert rss1 - rss0 < RSS_SLACK_KIB, (rss0, rss1)
