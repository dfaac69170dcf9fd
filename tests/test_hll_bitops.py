"""Differential tests of the HyperLogLog (PFADD, PFCOUNT, PFMERGE, PFDEBUG,
PFSELFTEST) and bitmap (SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD,
BITFIELD_RO) families: the same commands against stock redis-server 7.0.15
and inreplay on raw connections (RESP2 and RESP3), replies compared byte for
byte. HLL values are compared as bytes too (GET), so the sparse and dense
encodings, the header and its cached cardinality must be Redis's own;
corrupted HLLs get the same errors (and nothing crashes).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
import test_families
from test_families import Both

if TYPE_CHECKING:
    from test_families import Pair

pair = test_families.pair
both = test_families.both

HDR = b"HYLL\x01" + b"\x00" * 11  # a sparse header, cached cardinality 0


@pytest.fixture
def sparse_limit(pair: Pair) -> Iterator[None]:
    """hll-sparse-max-bytes back at its default afterwards, on both servers."""
    yield
    for s in pair:
        with s.raw() as c:
            assert c.call("CONFIG", "SET", "hll-sparse-max-bytes", "3000") == "OK"


def rand_elements(rng: random.Random, n: int) -> list[str]:
    return [str(rng.random()) for _ in range(n)]


# --------------------------------------------------------------------------
# HyperLogLog
# --------------------------------------------------------------------------


def test_pf_commands_and_errors(both: Both) -> None:
    both.run_all([
        ("PFADD", "h"), ("GET", "h"), ("PFCOUNT", "h"), ("GET", "h"),
        ("PFADD", "h", "a", "b", "c"), ("PFADD", "h", "a", "b", "c"), ("PFADD", "h", ""),
        ("GET", "h"), ("PFCOUNT", "h"), ("GETRANGE", "h", "15", "15"),
        ("PFADD", "h", "1", "2", "3"), ("GETRANGE", "h", "15", "15"),
        ("PFDEBUG", "ENCODING", "h"), ("PFDEBUG", "DECODE", "h"), ("PFDEBUG", "foo", "h"),
        ("PFDEBUG", "GETREG", "nokey"), ("PFDEBUG", "GETREG"),
        ("PFCOUNT", "h", "nokey"), ("PFCOUNT", "nokey"), ("PFCOUNT",),
        ("PFMERGE", "m", "h"), ("GET", "m"), ("PFMERGE", "m2", "nokey"), ("GET", "m2"),
        ("PFMERGE", "m3"), ("GET", "m3"), ("PFMERGE",),
        ("SET", "s", "foo"), ("PFADD", "s", "x"), ("PFCOUNT", "s"), ("PFCOUNT", "h", "s"),
        ("PFMERGE", "s", "h"), ("PFMERGE", "h", "s"), ("PFDEBUG", "ENCODING", "s"),
        ("RPUSH", "l", "x"), ("PFADD", "l", "x"), ("PFCOUNT", "l"), ("PFMERGE", "h", "l"),
        ("PFDEBUG", "TODENSE", "h"), ("PFDEBUG", "TODENSE", "h"), ("PFDEBUG", "ENCODING", "h"),
        ("PFDEBUG", "DECODE", "h"), ("PFCOUNT", "h"), ("GET", "h"), ("PFADD", "h", "zz"),
        ("PFCOUNT", "h", "m"), ("PFMERGE", "m", "h"), ("PFDEBUG", "ENCODING", "m"), ("GET", "m"),
        ("PFDEBUG", "GETREG", "m"), ("TYPE", "h"),
    ])  # fmt: skip


def test_pfselftest(pair: Pair) -> None:
    for s in pair:
        with s.raw(timeout=120) as c:
            assert c.call("PFSELFTEST") == "OK"  # a status reply


@pytest.mark.parametrize("limit", [3000, 300])
def test_hll_bytes_match_redis(both: Both, limit: int, sparse_limit: None) -> None:
    """Random sets, sparse through dense: the values, counts and merges are byte-equal."""
    both.run("CONFIG", "SET", "hll-sparse-max-bytes", str(limit))
    rng = random.Random(limit)
    for round_ in range(12):
        n = rng.choice([0, 1, 5, 50, 200, 800, 2500])
        key = f"h{round_}"
        both.run("DEL", key)
        elements = rand_elements(rng, n)
        for i in range(0, max(n, 1), 100):
            both.run("PFADD", key, *elements[i:i + 100])
            both.run("GET", key)
        both.run("PFCOUNT", key)
        both.run("GET", key)  # the cache written into the header
        both.run("PFDEBUG", "ENCODING", key)
        both.run("PFCOUNT", key, *(f"h{j}" for j in range(round_)))
        both.run("PFMERGE", "merged", key)
        both.run("GET", "merged")
    both.run("PFMERGE", "all", *(f"h{j}" for j in range(12)))
    both.run("GET", "all")
    both.run("PFCOUNT", "all")


def test_hll_values_move_between_servers(pair: Pair) -> None:
    """An HLL made by one server counts and grows the same on the other."""
    rng = random.Random(7)
    ref, ours = (s.raw() for s in pair)
    try:
        for n in (3, 400, 5000):
            elements = rand_elements(rng, n)
            for src, dst in ((ref, ours), (ours, ref)):
                src.call("DEL", "x")
                src.call("PFADD", "x", *elements)
                dst.call("SET", "x", src.call("GET", "x"))
                assert dst.call("PFCOUNT", "x") == src.call("PFCOUNT", "x")
                more = rand_elements(rng, 50)
                assert dst.call("PFADD", "x", *more) == src.call("PFADD", "x", *more)
                assert dst.call("GET", "x") == src.call("GET", "x")
    finally:
        ref.close()
        ours.close()


def xzero(n: int) -> bytes:
    return bytes([0x40 | ((n - 1) >> 8), (n - 1) & 0xFF])


CORRUPT = {
    "tail": None,  # a valid HLL with bytes appended (built in the test)
    "magic": b"HYLX\x01" + b"\x00" * 11 + xzero(16384),
    "encoding": b"HYLL\x02" + b"\x00" * 11 + xzero(16384),
    "short": b"HYLL\x01\x00\x00",
    "dense-length": b"HYLL\x00" + b"\x00" * 11 + b"\x00" * 100,
    "overflow-xzero": HDR + xzero(16384) * 3 + b"\xff",
    "overflow-zero": HDR + b"\x3f" * 300 + b"\xff",
    "overflow-val": HDR + xzero(16383) + b"\x83",
    "underflow": HDR + xzero(100),
    "truncated-xzero": HDR + xzero(16000) + b"\x80" * 10 + b"\x41",
    "empty-opcodes": HDR,
    "stale-cache": b"HYLL\x01" + b"\x00" * 10 + b"\x80" + xzero(8000) + b"\xfc" + xzero(8383),
}


@pytest.mark.parametrize("kind", sorted(CORRUPT))
def test_corrupted_hll(both: Both, kind: str) -> None:
    value = CORRUPT[kind]
    if value is None:
        both.run("PFADD", "ok", "a", "b", "c")
        both.run("APPEND", "ok", "hello")
        value = b""
        key = "ok"
    else:
        key = "bad"
    for k in (key, "bad2"):
        if value:
            both.run("SET", k, value)
        else:
            both.run("COPY", key, k, "REPLACE")
    both.run_all([
        ("PFCOUNT", key), ("PFCOUNT", key, key), ("PFCOUNT", "nokey", key),
        ("PFDEBUG", "GETREG", "bad2"), ("GET", "bad2"), ("PFDEBUG", "DECODE", key),
        ("PFDEBUG", "ENCODING", key), ("PFMERGE", "dst", key), ("GET", "dst"),
        ("PFADD", key, "a", "b", "c", *map(str, range(200))), ("GET", key),
        ("PFCOUNT", key), ("GET", key), ("PING",),
    ])  # fmt: skip


def test_corrupted_hll_fuzz(both: Both) -> None:
    """Random bytes written over random HLLs: the same replies (errors or counts) and values."""
    rng = random.Random(2024)
    for _ in range(150):
        both.run("DEL", "h")
        both.run("PFADD", "h", *rand_elements(rng, rng.randrange(3000)))
        value = bytearray(both.run("GET", "h").split(b"\r\n", 1)[1][:-2])
        for _ in range(5):
            value[rng.randrange(len(value))] = rng.randrange(256)
            if rng.random() < 0.5:
                break
        if rng.random() < 0.2:
            del value[rng.randrange(len(value) + 1):]
        for k in ("h", "h2"):
            both.run("SET", k, bytes(value))
        both.run("PFCOUNT", "h")
        both.run("PFCOUNT", "h", "nokey")
        both.run("PFADD", "h", *rand_elements(rng, 30))
        both.run("GET", "h")
        both.run("PFMERGE", "m", "h2")
        both.run("GET", "m")
        both.run("DEL", "m")


# --------------------------------------------------------------------------
# bitmaps
# --------------------------------------------------------------------------


def test_bit_commands_and_errors(both: Both) -> None:
    both.run_all([
        ("SETBIT", "b", "7", "1"), ("SETBIT", "b", "30", "1"), ("GET", "b"),
        ("BITCOUNT", "b"), ("BITCOUNT", "b", "0"), ("BITCOUNT", "b", "0", "1", "foo"),
        ("BITCOUNT", "b", "0", "-1", "BIT"), ("BITCOUNT", "b", "1", "-2", "byte"),
        ("BITCOUNT", "b", "-1", "-2"), ("BITCOUNT", "b", "-1", "-2", "foo"),
        ("BITCOUNT", "nokey", "0"), ("BITCOUNT", "b", "x", "1"), ("BITCOUNT", "b", "0", "y"),
        ("BITCOUNT", "b", "0", "4294967296"), ("BITCOUNT", "b", "5", "30", "bit"),
        ("BITPOS", "b", "1"), ("BITPOS", "b", "0"), ("BITPOS", "b", "2"), ("BITPOS", "b", "x"),
        ("BITPOS", "nokey", "0"), ("BITPOS", "nokey", "1", "5", "9", "foo"),
        ("BITPOS", "b", "1", "0", "-1", "bit"), ("BITPOS", "b", "0", "0", "-1", "bit"),
        ("BITPOS", "b", "0", "0", "0", "foo"), ("BITPOS", "b", "0", "0", "0", "bit", "x"),
        ("BITPOS", "b", "1", "8", "-1", "bit"), ("BITPOS", "b", "0", "8", "15", "bit"),
        ("BITPOS", "b", "1", "2"), ("BITPOS", "b", "0", "9"), ("BITPOS", "b", "1", "x"),
        ("BITPOS", "b", "1", "0", "x"),
        ("SET", "e", ""), ("BITPOS", "e", "0"), ("BITPOS", "e", "1"), ("BITCOUNT", "e"),
        ("BITOP", "foo", "d", "b"), ("BITOP", "not", "d", "b", "b"), ("BITOP", "NOT", "d", "b"),
        ("GET", "d"), ("BITOP", "and", "d", "b", "nokey"), ("GET", "d"),
        ("BITOP", "or", "d", "nokey"), ("EXISTS", "d"), ("SET", "s", "12345"),
        ("BITOP", "xor", "d", "b", "s", "nokey"), ("GET", "d"), ("OBJECT", "ENCODING", "d"),
        ("EXPIRE", "d", "100"), ("BITOP", "or", "d", "s"), ("TTL", "d"),
        ("BITOP", "and", "d", "e"), ("EXISTS", "d"), ("BITOP", "and"),
        ("RPUSH", "l", "x"), ("BITOP", "and", "d", "b", "l"), ("BITOP", "and", "l", "b"),
        ("TYPE", "l"), ("BITCOUNT", "l"), ("BITPOS", "l", "1"), ("SETBIT", "l", "0", "1"),
        ("GETBIT", "l", "0"), ("BITFIELD", "l", "get", "u8", "0"),
        ("BITFIELD", "l", "set", "u8", "0", "1"), ("BITFIELD_RO", "l", "get", "u8", "0"),
        ("SETBIT", "b", "-1", "1"), ("SETBIT", "b", "4294967296", "1"), ("SETBIT", "b", "0", "2"),
        ("GETBIT", "b", "x"), ("GETBIT", "nokey", "100"),
    ])  # fmt: skip


def test_bitfield_commands_and_errors(both: Both) -> None:
    both.run_all([
        ("BITFIELD", "bf"), ("EXISTS", "bf"), ("BITFIELD", "bf", "get", "u8", "0"),
        ("BITFIELD", "bf", "set", "i8", "0", "-100", "get", "i8", "0", "incrby", "i8", "0", "300"),
        ("BITFIELD", "bf", "overflow", "sat", "incrby", "i8", "0", "300"),
        ("BITFIELD", "bf", "overflow", "fail", "incrby", "i8", "0", "300", "get", "u4", "2"),
        ("BITFIELD", "bf", "overflow", "foo", "incrby", "i8", "0", "300"),
        ("BITFIELD", "bf", "overflow"), ("BITFIELD", "bf", "get", "i8"),
        ("BITFIELD", "bf", "get", "u64", "0"), ("BITFIELD", "bf", "get", "i65", "0"),
        ("BITFIELD", "bf", "get", "x8", "0"), ("BITFIELD", "bf", "get", "i", "0"),
        ("BITFIELD", "bf", "get", "i0", "0"), ("BITFIELD", "bf", "get", "i8", "-1"),
        ("BITFIELD", "bf", "get", "i8", "#x"), ("BITFIELD", "bf", "set", "i8", "0", "x"),
        ("BITFIELD", "bf", "foo", "i8", "0"),
        ("BITFIELD", "bf", "set", "u8", "#3", "65", "get", "u8", "#3"), ("GET", "bf"),
        ("BITFIELD_RO", "bf", "get", "u8", "0", "get", "i13", "5"),
        ("BITFIELD_RO", "bf", "set", "u8", "0", "1"), ("BITFIELD_RO", "bf"),
        ("BITFIELD_RO", "bf", "incrby", "u8", "0", "1"),
        ("BITFIELD", "bf", "set", "i8", "0", "-9223372036854775808", "overflow", "sat",
         "set", "i8", "0", "-9223372036854775808", "get", "i8", "0"),
        ("BITFIELD", "bf", "overflow", "sat", "set", "u8", "0", "-1", "get", "u8", "0"),
        ("BITFIELD", "bf", "set", "i64", "0", "-1", "incrby", "i64", "0", "1",
         "incrby", "i64", "0", "-9223372036854775808", "incrby", "i64", "0", "-1"),
        ("BITFIELD", "bf", "overflow", "fail", "incrby", "i64", "0", "-1"),
        ("BITFIELD", "bf", "overflow", "sat", "set", "u63", "0", "-1", "get", "u63", "0",
         "incrby", "u63", "0", "5", "incrby", "u63", "0", "-9223372036854775808"),
        ("BITFIELD", "nokey", "overflow", "fail", "set", "u2", "100", "7"), ("EXISTS", "nokey"),
        ("BITFIELD", "bf", "get", "u8", "4294967296"),
        ("COMMAND", "GETKEYSANDFLAGS", "bitfield", "k", "get", "u8", "0"),
        ("COMMAND", "GETKEYSANDFLAGS", "bitfield", "k", "get", "u8", "0", "set", "u8", "0", "1"),
        ("COMMAND", "GETKEYSANDFLAGS", "bitfield", "k", "overflow", "sat", "foo"),
        ("COMMAND", "GETKEYSANDFLAGS", "bitop", "and", "d", "a", "b"),
        ("COMMAND", "GETKEYSANDFLAGS", "pfmerge", "d", "a", "b"),
        ("COMMAND", "GETKEYSANDFLAGS", "pfdebug", "getreg", "h"),
    ])  # fmt: skip


def test_bit_fuzz(both: Both) -> None:
    """BITCOUNT/BITPOS over random ranges and units, BITOP over random strings."""
    rng = random.Random(99)
    for _ in range(60):
        s = bytes(rng.choice([0, 255, rng.randrange(256)]) for _ in range(rng.randrange(40)))
        both.run("SET", "s", s)
        n = len(s) * 8 + 10
        for _ in range(10):
            a, b = rng.randrange(-n, n), rng.randrange(-n, n)
            unit = rng.choice([(), ("BIT",), ("BYTE",)])
            both.run("BITCOUNT", "s", a, b, *unit)
            bit = rng.randrange(2)
            both.run("BITPOS", "s", bit, a, b, *unit)
            both.run("BITPOS", "s", bit, a)
        both.run("BITPOS", "s", 0)
        both.run("BITPOS", "s", 1)
    for _ in range(40):
        keys = []
        for j in range(rng.randrange(1, 6)):
            keys.append(f"k{j}")
            both.run("SET", f"k{j}", bytes(rng.randrange(256) for _ in range(rng.randrange(80))))
        op = rng.choice(["AND", "OR", "XOR", "NOT"])
        both.run("BITOP", op, "dst", *(keys[:1] if op == "NOT" else [*keys, "missing"]))
        both.run("GET", "dst")


def test_bitfield_overflow_fuzz(both: Both) -> None:
    """Signed and unsigned fields of every width under WRAP, SAT and FAIL."""
    rng = random.Random(5)
    for _ in range(300):
        bits = rng.randrange(1, 65)
        sign = "i" if bits == 64 or rng.randrange(2) else "u"
        t = f"{sign}{bits}"
        lim = 2 ** (bits + 1)
        value = max(-(2**63), min(2**63 - 1, rng.randrange(-lim, lim)))
        incr = max(-(2**63), min(2**63 - 1, rng.randrange(-lim, lim)))
        ow = rng.choice(["WRAP", "SAT", "FAIL"])
        off = rng.randrange(20)
        both.run("DEL", "bf")
        both.run("BITFIELD", "bf", "OVERFLOW", ow, "SET", t, off, value, "GET", t, off)
        both.run("BITFIELD", "bf", "OVERFLOW", ow, "INCRBY", t, off, incr, "GET", t, off)
        both.run("GET", "bf")


def changes(info: bytes) -> int:
    return int(info.split(b"rdb_changes_since_last_save:")[1].split(b"\r\n")[0])


def test_changes_counted_as_redis(pair: Pair) -> None:
    """rdb_changes_since_last_save grows by what SETBIT, BITFIELD and PFADD changed
    (nothing for a call that changed nothing), as Redis counts them."""
    steps: list[tuple[str | int, ...]] = [
        ("SETBIT", "foo", 0, 0), ("SETBIT", "foo", 0, 0), ("SETBIT", "foo", 0, 1),
        ("SETBIT", "foo", 0, 1), ("SETBIT", "foo", 90, 0),
        ("BITFIELD", "bf", "SET", "i5", 0, 0), ("BITFIELD", "bf", "SET", "i5", 0, 0),
        ("BITFIELD", "bf", "SET", "i5", 0, 1, "SET", "u3", 9, 5),
        ("BITFIELD", "bf", "GET", "i5", 0),
        ("BITFIELD", "bf", "INCRBY", "i5", 0, 1), ("BITFIELD", "bf", "SET", "i5", 90, 0),
        ("BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "u2", 0, 9),
        ("PFADD", "h"), ("PFADD", "h", "a", "b", "c"), ("PFADD", "h", "a", "b", "c"),
        ("PFADD", "h", *map(str, range(50))),
    ]  # fmt: skip
    deltas = []
    for s in pair:
        with s.raw() as c:
            c.call("DEL", "foo", "bf", "h")
            seen = []
            for step in steps:
                before = changes(c.call("INFO", "persistence"))
                c.call(*step)
                seen.append(changes(c.call("INFO", "persistence")) - before)
            deltas.append(seen)
    assert deltas[1] == deltas[0]
