"""Differential tests of the command families and RESP3: every case runs the
same commands against stock redis-server and inreplay, on raw connections,
and compares the replies byte for byte (or, for replies whose order Redis
leaves open, as sets).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import redis

if TYPE_CHECKING:
    from conftest import RawConn, ServerPool, ServerProcess

    Pair = tuple[ServerProcess, ServerProcess]

Cmd = Sequence[bytes | str | int]


@pytest.fixture
def pair(server_pool: ServerPool) -> Iterator[Pair]:
    """Stock Redis and inreplay, both flushed (every database)."""
    ref, ours = server_pool.get("redis"), server_pool.get("inreplay")
    for s in (ref, ours):
        s.flushall()
    yield ref, ours
    for s in (ref, ours):
        assert s.alive(), f"{s} died during this test:\n{s.log_tail()}"


class Both:
    """One raw connection to each server; run() sends a command to both."""

    def __init__(self, pair: Pair, resp: int = 2) -> None:
        self.conns: list[RawConn] = [s.raw() for s in pair]
        if resp == 3:
            for c in self.conns:
                assert c.call("HELLO", "3")[b"proto"] == 3

    def close(self) -> None:
        for c in self.conns:
            c.close()

    def replies(self, *cmd: bytes | str | int) -> tuple[Any, Any]:
        out = []
        for c in self.conns:
            c.send(c.command(*cmd))
            out.append(c.read_reply())
        return out[0], out[1]

    def run(self, *cmd: bytes | str | int) -> bytes:
        """The same bytes from both servers; returns them."""
        got = []
        for c in self.conns:
            c.send(c.command(*cmd))
            got.append(c.read_reply_bytes())
        assert got[1] == got[0], f"{cmd!r}: redis {got[0]!r}, inreplay {got[1]!r}"
        return got[0]

    def run_all(self, cmds: Sequence[Cmd]) -> None:
        for cmd in cmds:
            self.run(*cmd)

    def same_set(self, *cmd: bytes | str | int) -> Any:
        """Replies equal as multisets (an array whose order is unspecified)."""
        a, b = self.replies(*cmd)
        if isinstance(a, list) and isinstance(b, list):
            assert sorted(map(repr, a)) == sorted(map(repr, b)), f"{cmd!r}: {a!r} vs {b!r}"
        else:
            assert a == b, f"{cmd!r}: {a!r} vs {b!r}"
        return a


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def both(request: pytest.FixtureRequest, pair: Pair) -> Iterator[Both]:
    b = Both(pair, int(request.param))
    yield b
    b.close()


@pytest.fixture
def both3(pair: Pair) -> Iterator[Both]:
    b = Both(pair, 3)
    yield b
    b.close()


# --------------------------------------------------------------------------
# RESP3
# --------------------------------------------------------------------------


def test_hello_switches_protocol_both_ways(pair: Pair) -> None:
    for srv in pair:
        with srv.raw() as c:
            c.send(c.command("HELLO", "3"))
            head = c.read_reply_bytes()
            assert head.startswith(b"%7\r\n$6\r\nserver\r\n"), head
            c.send(c.command("GET", "nokey"))
            c.expect(b"_\r\n")
            assert c.call("HELLO")[b"proto"] == 3  # no version: the protocol stays
            reply = c.call("HELLO", "2")
            assert isinstance(reply, list) and reply[reply.index(b"proto") + 1] == 2
            c.send(c.command("GET", "nokey"))
            c.expect(b"$-1\r\n")


def test_hello_setname_checked_like_client_setname(pair: Pair) -> None:
    for srv in pair:
        with srv.raw() as c:
            c.send(c.command("HELLO", "3", "SETNAME", "a b"))
            c.expect(b"-ERR Client names cannot contain spaces, newlines or special characters."
                     b"\r\n")
            c.send(c.command("GET", "x"))  # the failed HELLO switched nothing
            c.expect(b"$-1\r\n")
            assert c.call("CLIENT", "GETNAME") is None
            assert c.call("HELLO", "3", "SETNAME", "ok-name")[b"proto"] == 3
            assert c.call("CLIENT", "GETNAME") == b"ok-name"


def test_resp3_nulls_and_maps(both3: Both) -> None:
    both3.run_all([
        ("GET", "nokey"),
        ("SET", "k", "v"),
        ("SET", "k", "w", "NX"),
        ("SET", "k", "w", "NX", "GET"),
        ("MGET", "k", "nokey"),
        ("LPOP", "nolist"),
        ("RPUSH", "l", "a"),
        ("LPOP", "nolist", "2"),
        ("CONFIG", "GET", "maxmemory"),
        ("COMMAND", "INFO", "no-such-command"),
        ("TTL", "k"),
        ("EXISTS", "k", "nokey"),
    ])


def test_redis_py_default_protocol_against_both(
    pair: Pair,
) -> None:
    """redis-py 8 with its defaults (HELLO 3 on connect) gets the same answers."""
    assert int(redis.__version__.split(".")[0]) >= 8, "the test needs redis-py 8"
    results = []
    for srv in pair:
        r = redis.Redis(host=srv.host, port=srv.port, socket_timeout=10)
        try:
            r.set("a", "1")
            out = [r.get("a"), r.get("missing"), r.incr("a"), r.rpush("l", "x", "y"),
                   r.lrange("l", 0, -1), r.config_get("maxmemory"), r.ttl("a"),
                   r.execute_command("HELLO")[b"proto"]]
            results.append(out)
        finally:
            r.close()
    assert results[1] == results[0]
    assert results[0][-1] == 3


# --------------------------------------------------------------------------
# databases
# --------------------------------------------------------------------------


def test_databases_select_move_swapdb_flush(both: Both) -> None:
    both.run_all([
        ("SELECT", "16"), ("SELECT", "-1"), ("SELECT", "x"), ("SELECT", "99999999999"),
        ("SET", "k", "zero"), ("SELECT", "1"), ("GET", "k"), ("SET", "k", "one"),
        ("SET", "only1", "v"), ("DBSIZE",), ("SELECT", "0"), ("GET", "k"), ("DBSIZE",),
        ("MOVE", "k", "1"), ("MOVE", "k", "0"), ("MOVE", "nokey", "1"), ("MOVE", "k", "16"),
        ("MOVE", "k", "x"), ("SET", "m", "moved"), ("EXPIRE", "m", "100"), ("MOVE", "m", "2"),
        ("EXISTS", "m"), ("SELECT", "2"), ("GET", "m"), ("TTL", "m"),
        ("SWAPDB", "0", "1"), ("SWAPDB", "0", "16"), ("SWAPDB", "x", "1"), ("SWAPDB", "1", "x"),
        ("SWAPDB", "3", "3"), ("SELECT", "0"), ("GET", "k"), ("GET", "only1"),
        ("SELECT", "1"), ("GET", "k"), ("FLUSHDB",), ("DBSIZE",), ("SELECT", "0"),
        ("DBSIZE",), ("CONFIG", "GET", "databases"),
        ("RPUSH", "l", "a"), ("COPY", "l", "l", "DB", "3"), ("COPY", "l", "l"),
        ("COPY", "l", "l", "DB", "16"), ("COPY", "l", "l", "DB", "x"), ("SELECT", "3"),
        ("LRANGE", "l", "0", "-1"), ("FLUSHALL",), ("DBSIZE",), ("SELECT", "0"), ("DBSIZE",),
    ])


def test_info_keyspace_per_database(pair: Pair) -> None:
    for srv in pair:
        with srv.raw() as c:
            for db, n in ((0, 2), (1, 1), (5, 3)):
                c.call("SELECT", str(db))
                for i in range(n):
                    c.call("SET", f"k{i}", "v")
            c.call("EXPIRE", "k0", "100")
            lines = [ln for ln in c.call("INFO", "keyspace").decode().splitlines()
                     if ln.startswith("db")]
            assert [ln.split(",")[:2] for ln in lines] == [
                ["db0:keys=2", "expires=0"], ["db1:keys=1", "expires=0"],
                ["db5:keys=3", "expires=1"]], (srv.kind, lines)


def test_expiry_in_every_database(pair: Pair) -> None:
    """Active expiry reaps keys in databases other than 0."""
    for srv in pair:
        with srv.raw() as c:
            c.call("SELECT", "7")
            for i in range(20):
                c.call("SET", f"e{i}", "v", "PX", "50")
            time.sleep(1.0)  # no access: only the cron can reap them
            assert c.call("DBSIZE") == 0, srv.kind


def test_redis_py_db_url(pair: Pair) -> None:
    for srv in pair:
        r = redis.Redis.from_url(f"redis://{srv.host}:{srv.port}/1", socket_timeout=10)
        try:
            r.set("x", "in-db-1")
            assert r.get("x") == b"in-db-1"
        finally:
            r.close()
        with srv.raw() as c:
            assert c.call("GET", "x") is None
            c.call("SELECT", "1")
            assert c.call("GET", "x") == b"in-db-1"


# --------------------------------------------------------------------------
# strings
# --------------------------------------------------------------------------


def test_strings(both: Both) -> None:
    both.run_all([
        ("SET", "s", "hello"), ("APPEND", "s", " world"), ("GET", "s"), ("APPEND", "new", "x"),
        ("STRLEN", "s"), ("GETRANGE", "s", "0", "4"), ("GETRANGE", "s", "-5", "-1"),
        ("GETRANGE", "s", "-1", "-5"), ("GETRANGE", "s", "5", "3"), ("GETRANGE", "s", "0", "100"),
        ("GETRANGE", "nokey", "0", "1"), ("GETRANGE", "s", "x", "1"), ("SUBSTR", "s", "0", "1"),
        ("SETRANGE", "s", "6", "WORLD"), ("GET", "s"), ("SETRANGE", "s", "15", "!"), ("GET", "s"),
        ("SETRANGE", "s", "-1", "x"), ("SETRANGE", "s", "1", ""), ("SETRANGE", "nokey2", "0", ""),
        ("EXISTS", "nokey2"), ("SETRANGE", "pad", "3", "x"), ("GET", "pad"),
        ("SETRANGE", "big", "536870911", "xx"),
        ("SETNX", "s", "x"), ("SETNX", "nx", "x"), ("GETSET", "nx", "y"), ("GETSET", "gs", "1"),
        ("SETEX", "ex", "100", "v"), ("TTL", "ex"), ("SETEX", "ex", "0", "v"),
        ("SETEX", "ex", "-5", "v"), ("SETEX", "ex", "x", "v"), ("PSETEX", "px", "100000", "v"),
        ("EXISTS", "px"), ("PSETEX", "px", "0", "v"),
        ("GETSET", "ex", "z"), ("TTL", "ex"),
        ("GETDEL", "nx"), ("GETDEL", "nx"), ("EXISTS", "nx"),
        ("MSETNX", "a", "1", "b", "2"), ("MSETNX", "b", "3", "c", "4"), ("MGET", "a", "b", "c"),
        ("MSETNX", "a"), ("MSETNX", "q", "1", "r"),
        ("SET", "f", "10.5"), ("INCRBYFLOAT", "f", "0.1"), ("INCRBYFLOAT", "f", "-5"),
        ("INCRBYFLOAT", "f", "5.0e3"), ("INCRBYFLOAT", "nf", "3"), ("INCRBYFLOAT", "nf", "abc"),
        ("INCRBYFLOAT", "s", "1"), ("INCRBYFLOAT", "nf", " 1"), ("INCRBYFLOAT", "nf", "1e400"),
        ("SET", "inf", "1.7e308"), ("INCRBYFLOAT", "inf", "1.7e308"),
        ("INCRBYFLOAT", "nf", "-3"), ("GET", "nf"),
        ("SET", "t", "v", "EX", "100"), ("GETEX", "t"), ("GETEX", "t", "PERSIST"), ("TTL", "t"),
        ("GETEX", "t", "EX", "50"), ("TTL", "t"), ("GETEX", "t", "PX", "50000"), ("TTL", "t"),
        ("GETEX", "t", "EXAT", "99999999999"), ("EXPIRETIME", "t"),
        ("GETEX", "t", "PXAT", "99999999999000"), ("PEXPIRETIME", "t"),
        ("GETEX", "t", "EX", "0"), ("GETEX", "t", "EX", "-1"), ("GETEX", "t", "EX"),
        ("GETEX", "t", "EX", "1", "PX", "1"), ("GETEX", "t", "FOO"), ("GETEX", "nokey"),
        ("GETEX", "t", "EXAT", "1"), ("EXISTS", "t"),
        ("RPUSH", "list", "x"), ("GETEX", "list"), ("GETDEL", "list"), ("GETSET", "list", "v"),
        ("APPEND", "list", "v"), ("SETRANGE", "list", "0", "v"), ("GETRANGE", "list", "0", "1"),
        ("SETNX", "list", "v"), ("STRLEN", "list"),
    ])


def test_setbit_getbit(both: Both) -> None:
    both.run_all([
        ("SETBIT", "b", "7", "1"), ("GET", "b"), ("SETBIT", "b", "7", "1"),
        ("SETBIT", "b", "7", "0"),
        ("SETBIT", "b", "100", "1"), ("STRLEN", "b"), ("GETBIT", "b", "100"), ("GETBIT", "b", "99"),
        ("GETBIT", "b", "100000"), ("GETBIT", "nokey", "3"), ("SET", "i", "12"),
        ("GETBIT", "i", "2"), ("GETBIT", "i", "3"), ("SETBIT", "i", "6", "1"), ("GET", "i"),
        ("OBJECT", "ENCODING", "i"), ("SETBIT", "b", "-1", "1"), ("SETBIT", "b", "x", "1"),
        ("SETBIT", "b", "4294967296", "1"), ("SETBIT", "b", "0", "2"), ("SETBIT", "b", "0", "-1"),
        ("SETBIT", "b", "0", "x"), ("GETBIT", "b", "-1"), ("RPUSH", "l", "x"),
        ("SETBIT", "l", "0", "1"), ("GETBIT", "l", "0"),
    ])


def test_lcs(both: Both) -> None:
    both.run_all([
        ("SET", "a", "ohmytext"), ("SET", "b", "mynewtext"), ("LCS", "a", "b"),
        ("LCS", "a", "b", "LEN"), ("LCS", "a", "b", "IDX"),
        ("LCS", "a", "b", "IDX", "WITHMATCHLEN"),
        ("LCS", "a", "b", "IDX", "MINMATCHLEN", "4"),
        ("LCS", "a", "b", "IDX", "MINMATCHLEN", "-4", "WITHMATCHLEN"),
        ("LCS", "a", "nokey"), ("LCS", "nokey", "nokey2", "IDX"), ("LCS", "a", "b", "LEN", "IDX"),
        ("LCS", "a", "b", "FOO"), ("LCS", "a", "b", "MINMATCHLEN"),
        ("LCS", "a", "b", "MINMATCHLEN", "x"), ("RPUSH", "l", "x"), ("LCS", "a", "l"),
        ("SET", "n", "12345"), ("SET", "m", "2x4"), ("LCS", "n", "m", "IDX"),
        ("SET", "big1", "ab" * 3000), ("SET", "big2", "ba" * 3000), ("LCS", "big1", "big2", "LEN"),
        ("LCS", "big1", "big2"),
    ])


def test_object_encoding_and_refcount(both: Both) -> None:
    both.run_all([
        ("SET", "i", "12345"), ("OBJECT", "ENCODING", "i"), ("OBJECT", "REFCOUNT", "i"),
        ("SET", "i2", "123456"), ("OBJECT", "REFCOUNT", "i2"),
        ("SET", "e", "short string"), ("OBJECT", "ENCODING", "e"),
        ("SET", "r", "x" * 45), ("OBJECT", "ENCODING", "r"),
        ("SET", "a", "1"), ("APPEND", "a", "2"), ("OBJECT", "ENCODING", "a"),
        ("INCR", "n"), ("OBJECT", "ENCODING", "n"), ("INCRBYFLOAT", "fl", "3"),
        ("OBJECT", "ENCODING", "fl"), ("RPUSH", "l", "x"), ("OBJECT", "ENCODING", "l"),
        ("HSET", "h", "f", "v"), ("OBJECT", "ENCODING", "h"),
        ("HSET", "h", "long", "v" * 65), ("OBJECT", "ENCODING", "h"),
        ("SADD", "si", "1", "2"), ("OBJECT", "ENCODING", "si"),
        ("SADD", "si", "x"), ("OBJECT", "ENCODING", "si"), ("SREM", "si", "x"),
        ("OBJECT", "ENCODING", "si"),
        ("SETRANGE", "sr", "2", "ab"), ("OBJECT", "ENCODING", "sr"), ("SET", "sr", "12"),
        ("OBJECT", "ENCODING", "sr"), ("SETBIT", "sb", "3", "1"), ("OBJECT", "ENCODING", "sb"),
        ("GETSET", "a", "77"), ("OBJECT", "ENCODING", "a"), ("APPEND", "ap", "5"),
        ("OBJECT", "ENCODING", "ap"), ("SETEX", "se", "100", "5"), ("OBJECT", "ENCODING", "se"),
        ("MSET", "m1", "x" * 44, "m2", "x" * 45), ("OBJECT", "ENCODING", "m1"),
        ("OBJECT", "ENCODING", "m2"), ("INCRBYFLOAT", "fl2", "1e30"), ("OBJECT", "ENCODING", "fl2"),
        ("SET", "neg", "-5"), ("OBJECT", "REFCOUNT", "neg"), ("SET", "z", "0"),
        ("OBJECT", "REFCOUNT", "z"), ("SET", "lead", "007"), ("OBJECT", "ENCODING", "lead"),
        ("SADD", "sbig", *[str(i) for i in range(513)]), ("OBJECT", "ENCODING", "sbig"),
        ("HSET", "hbig", *[x for i in range(512) for x in (f"f{i}", "v")]),
        ("OBJECT", "ENCODING", "hbig"), ("HSET", "hbig", "one-more", "v"),
        ("OBJECT", "ENCODING", "hbig"), ("COPY", "hbig", "hbig2"), ("OBJECT", "ENCODING", "hbig2"),
        ("SINTERSTORE", "sst", "si"), ("OBJECT", "ENCODING", "sst"),
        ("OBJECT", "ENCODING", "nokey"), ("OBJECT", "FREQ", "i"), ("OBJECT", "NOPE", "i"),
        ("OBJECT", "ENCODING"), ("OBJECT", "ENCODING", "i", "j"),
    ])


# --------------------------------------------------------------------------
# keyspace
# --------------------------------------------------------------------------


def test_keyspace(both: Both) -> None:
    both.run_all([
        ("SET", "a", "1"), ("RENAME", "a", "b"), ("GET", "b"), ("RENAME", "nokey", "x"),
        ("RENAME", "b", "b"), ("RENAMENX", "b", "b"), ("SET", "c", "3"), ("RENAMENX", "b", "c"),
        ("RENAMENX", "b", "d"), ("RENAME", "d", "c"), ("GET", "c"), ("EXISTS", "d"),
        ("SET", "big", "x" * 5000), ("EXPIRE", "big", "100"), ("RENAME", "big", "big2"),
        ("TTL", "big2"), ("STRLEN", "big2"),
        ("SET", "emb", "tiny"), ("RENAME", "emb", "a-much-longer-key-name-than-before"),
        ("GET", "a-much-longer-key-name-than-before"),
        ("COPY", "c", "c2"), ("GET", "c2"), ("COPY", "c", "c2"), ("COPY", "c", "c2", "REPLACE"),
        ("COPY", "c", "c3", "FOO"), ("COPY", "nokey", "x"),
        ("RPUSH", "l", "a", "b"), ("COPY", "l", "l2"), ("LRANGE", "l2", "0", "-1"),
        ("HSET", "h", "f", "v"), ("COPY", "h", "h2"), ("HGETALL", "h2"),
        ("SADD", "s", "m"), ("COPY", "s", "s2"), ("SMEMBERS", "s2"),
        ("TOUCH", "c", "c2", "nokey"), ("UNLINK", "c", "c2", "nokey"), ("EXISTS", "c"),
        ("TYPE", "l"), ("TYPE", "h"), ("TYPE", "s"), ("TYPE", "big2"), ("TYPE", "nokey"),
        ("EXPIREAT", "l", "99999999999"), ("EXPIRETIME", "l"), ("PEXPIRETIME", "l"),
        ("PEXPIREAT", "l", "99999999999123"), ("PEXPIRETIME", "l"), ("EXPIRETIME", "l"),
        ("EXPIRETIME", "h"), ("EXPIRETIME", "nokey"), ("PEXPIRETIME", "nokey"),
        ("EXPIREAT", "h", "1"), ("EXISTS", "h"), ("EXPIREAT", "nokey", "99999999999"),
        ("EXPIREAT", "l", "99999999999999999"), ("EXPIREAT", "l", "x"),
        ("EXPIRE", "s", "100", "XX"), ("EXPIRE", "s", "100", "NX"), ("EXPIRE", "s", "50", "NX"),
        ("EXPIRE", "s", "50", "GT"), ("EXPIRE", "s", "200", "GT"), ("EXPIRE", "s", "300", "LT"),
        ("EXPIRE", "s", "10", "LT"), ("TTL", "s"), ("EXPIRE", "s", "10", "NX", "XX"),
        ("EXPIRE", "s", "10", "GT", "LT"), ("EXPIRE", "s", "10", "FOO"),
        ("PEXPIREAT", "s", "100", "NX", "GT"), ("PERSIST", "s"), ("PERSIST", "s"),
        ("SCAN", "x"), ("SCAN", " 1"), ("SCAN", "99999999999999999999"),
        ("SCAN", "0", "COUNT", "0"), ("SCAN", "0", "COUNT", "x"),
        ("SCAN", "0", "FOO", "1"), ("SCAN", "0", "MATCH"),
    ])


def full_scan(c: RawConn, *cmd: str) -> list[bytes]:
    """A whole SCAN (cmd = "SCAN", opts...) or HSCAN/SSCAN (cmd = name, key, opts...)."""
    cursor, out = b"0", []
    for _ in range(10000):
        if cmd[0] == "SCAN":
            cursor, batch = c.call("SCAN", cursor.decode(), *cmd[1:])
        else:
            cursor, batch = c.call(cmd[0], cmd[1], cursor.decode(), *cmd[2:])
        out += batch
        if cursor == b"0":
            return out
    raise AssertionError("SCAN never returned cursor 0")


def test_scan_properties(pair: Pair) -> None:
    for srv in pair:
        with srv.raw() as c:
            for i in range(300):
                c.call("SET", f"key:{i}", "v")
            c.call("RPUSH", "alist", "x")
            c.call("HSET", "ahash", "f", "v")
            everything = full_scan(c, "SCAN", "COUNT", "7")
            assert len(everything) >= 302 and set(everything) == (
                {f"key:{i}".encode() for i in range(300)} | {b"alist", b"ahash"}), srv.kind
            matched = set(full_scan(c, "SCAN", "MATCH", "key:1?", "COUNT", "50"))
            assert matched == {f"key:1{d}".encode() for d in range(10)}, srv.kind
            assert set(full_scan(c, "SCAN", "TYPE", "list")) == {b"alist"}
            assert set(full_scan(c, "SCAN", "TYPE", "HASH")) == {b"ahash"}
            # keys added during the scan may show up, keys present throughout always do
            cursor, seen = "0", set()
            for n in range(10000):
                cursor_b, batch = c.call("SCAN", cursor, "COUNT", "10")
                seen |= set(batch)
                c.call("SET", f"during:{n}", "v")
                cursor = cursor_b.decode()
                if cursor == "0":
                    break
            assert {f"key:{i}".encode() for i in range(300)} <= seen


def test_randomkey(pair: Pair) -> None:
    for srv in pair:
        with srv.raw() as c:
            assert c.call("RANDOMKEY") is None
            for i in range(20):
                c.call("SET", f"r{i}", "v")
            got = {c.call("RANDOMKEY") for _ in range(200)}
            assert got <= {f"r{i}".encode() for i in range(20)} and len(got) > 10
            c.call("FLUSHDB")
            c.call("SET", "gone", "v", "PX", "1")
            c.call("SET", "stays", "v")
            time.sleep(0.01)
            assert {c.call("RANDOMKEY") for _ in range(20)} == {b"stays"}


# --------------------------------------------------------------------------
# hashes
# --------------------------------------------------------------------------


def test_hashes(both: Both) -> None:
    both.run_all([
        ("HSET", "h", "a", "1", "b", "2"), ("HSET", "h", "a", "10", "c", "3"), ("HSET", "h", "x"),
        ("HMSET", "h", "d", "4"), ("HMSET", "h", "d"), ("HSETNX", "h", "a", "x"),
        ("HSETNX", "h", "e", "5"), ("HGET", "h", "a"), ("HGET", "h", "zz"), ("HGET", "nokey", "a"),
        ("HMGET", "h", "a", "zz", "b"), ("HMGET", "nokey", "a", "b"), ("HLEN", "h"),
        ("HLEN", "nokey"), ("HEXISTS", "h", "a"), ("HEXISTS", "h", "zz"), ("HSTRLEN", "h", "a"),
        ("HSTRLEN", "h", "zz"), ("HSTRLEN", "nokey", "a"), ("HDEL", "h", "a", "a", "zz"),
        ("HDEL", "nokey", "a"), ("HGETALL", "nokey"), ("HKEYS", "nokey"), ("HVALS", "nokey"),
        ("HINCRBY", "h", "b", "5"), ("HINCRBY", "h", "new", "-3"), ("HINCRBY", "h", "b", "x"),
        ("HSET", "h", "s", "abc"), ("HINCRBY", "h", "s", "1"),
        ("HSET", "h", "max", "9223372036854775807"), ("HINCRBY", "h", "max", "1"),
        ("HINCRBY", "nh", "f", "7"), ("HGETALL", "nh"),
        ("HINCRBYFLOAT", "h", "b", "1.5"), ("HINCRBYFLOAT", "h", "fl", "10.5"),
        ("HINCRBYFLOAT", "h", "fl", "-0.5"), ("HINCRBYFLOAT", "h", "s", "1"),
        ("HINCRBYFLOAT", "h", "b", "x"), ("HINCRBYFLOAT", "h", "b", "inf"),
        ("HSET", "h2", "only", "1"), ("HDEL", "h2", "only"), ("EXISTS", "h2"),
        ("HGET", "h", "b"), ("HGET", "h", "fl"),
        ("HSET", "h", "nul", "1\x002"), ("HINCRBYFLOAT", "h", "nul", "1"),
        ("HINCRBY", "h", "nul", "1"), ("SET", "snul", "1\x002"), ("INCRBYFLOAT", "snul", "1"),
        ("HSET", "hf", "f", "0"), ("OBJECT", "ENCODING", "hf"), ("HINCRBYFLOAT", "hf", "f", "1e70"),
        ("OBJECT", "ENCODING", "hf"), ("HINCRBY", "hf", "g", "1"), ("OBJECT", "ENCODING", "hf"),
        ("SET", "str", "v"), ("HSET", "str", "a", "1"), ("HGET", "str", "a"),
        ("HMGET", "str", "a"), ("HGETALL", "str"), ("HKEYS", "str"), ("HVALS", "str"),
        ("HLEN", "str"), ("HDEL", "str", "a"), ("HEXISTS", "str", "a"),
        ("HINCRBY", "str", "a", "1"),
        ("HINCRBYFLOAT", "str", "a", "1"), ("HSETNX", "str", "a", "1"), ("HSTRLEN", "str", "a"),
        ("HRANDFIELD", "str"), ("HSCAN", "str", "0"), ("TYPE", "h"),
        ("HRANDFIELD", "nokey"), ("HRANDFIELD", "nokey", "3"), ("HRANDFIELD", "h", "0"),
        ("HRANDFIELD", "h", "x"), ("HRANDFIELD", "h", "1", "FOO"),
        ("HRANDFIELD", "h", "1", "WITHVALUES", "x"), ("HRANDFIELD", "nokey", "-5", "WITHVALUES"),
        ("HRANDFIELD", "h", "-9223372036854775808"),
        ("HRANDFIELD", "h", "-9223372036854775807", "WITHVALUES"),
        ("HSCAN", "nokey", "0"), ("HSCAN", "h", "x"), ("HSCAN", "h", "0", "COUNT", "0"),
        ("HSCAN", "h", "0", "TYPE", "string"),
    ])
    # order is the server's own: compare as sets
    for cmd in (("HGETALL", "h"), ("HKEYS", "h"), ("HVALS", "h")):
        a, b = both.replies(*cmd)
        if isinstance(a, dict):
            assert a == b, cmd
        else:
            assert sorted(a) == sorted(b), cmd


def test_hrandfield_and_hscan_properties(pair: Pair) -> None:
    fields = {f"f{i}".encode(): f"v{i}".encode() for i in range(200)}
    for srv in pair:
        for proto in (2, 3):
            with srv.raw() as c:
                if proto == 3:
                    c.call("HELLO", "3")
                c.call("DEL", "h")
                c.call("HSET", "h", *[x for kv in fields.items() for x in kv])
                assert c.call("HRANDFIELD", "h") in fields
                some = c.call("HRANDFIELD", "h", "50")
                assert len(some) == 50 and len(set(some)) == 50 and set(some) <= set(fields)
                assert sorted(c.call("HRANDFIELD", "h", "500")) == sorted(fields)
                rep = c.call("HRANDFIELD", "h", "-300")
                assert len(rep) == 300 and set(rep) <= set(fields)
                wv = c.call("HRANDFIELD", "h", "5", "WITHVALUES")
                pairs = wv if proto == 3 else [wv[i:i + 2] for i in range(0, len(wv), 2)]
                assert len(pairs) == 5 and all(fields[f] == v for f, v in pairs), (srv.kind, wv)
                wv = c.call("HRANDFIELD", "h", "-7", "WITHVALUES")
                pairs = wv if proto == 3 else [wv[i:i + 2] for i in range(0, len(wv), 2)]
                assert len(pairs) == 7 and all(fields[f] == v for f, v in pairs)
                flat = full_scan(c, "HSCAN", "h", "COUNT", "9")
                got = dict(zip(flat[::2], flat[1::2], strict=True))
                assert got == fields, srv.kind
                flat = full_scan(c, "HSCAN", "h", "MATCH", "f1?")
                assert dict(zip(flat[::2], flat[1::2], strict=True)) == {
                    f"f1{d}".encode(): f"v1{d}".encode() for d in range(10)}


def chi_square(draws: list[bytes]) -> float:
    """Pearson's statistic of draws against a uniform choice among the distinct values."""
    counts: dict[bytes, int] = {}
    for d in draws:
        counts[d] = counts.get(d, 0) + 1
    expected = len(draws) / len(counts)
    return sum((n - expected) ** 2 / expected for n in counts.values())


def test_random_draws_are_uniform(pair: Pair) -> None:
    """Redis's own check (unit/type/hash.tcl, set.tcl): 1000 draws with
    repeats from 10 elements, chi-square below 40."""
    for srv in pair:
        with srv.raw() as c:
            c.call("HSET", "h10", *[x for i in range(10) for x in (f"f{i}", "v")])
            c.call("SADD", "s10", *[f"m{i}" for i in range(10)])
            c.call("HSET", "h300", *[x for i in range(300) for x in (f"f{i}", "v")])
            c.call("HDEL", "h300", *[f"f{i}" for i in range(10, 300)])  # sparse buckets
            for cmd in (("HRANDFIELD", "h10", "-1000"), ("SRANDMEMBER", "s10", "-1000"),
                        ("HRANDFIELD", "h300", "-1000")):
                draws = c.call(*cmd)
                assert len(set(draws)) == 10 and chi_square(draws) < 40, (srv.kind, cmd)
            singles = [c.call("HRANDFIELD", "h300") for _ in range(1000)]
            assert chi_square(singles) < 40, (srv.kind, chi_square(singles))


def test_setrange_far_offset_allocates_once(pair: Pair) -> None:
    """SETRANGE at a 192 MB offset is one allocation, not one per megabyte."""
    for srv in pair:
        with srv.raw(timeout=30) as c:
            start = time.monotonic()
            assert c.call("SETRANGE", "far", str(192 << 20), "x") == (192 << 20) + 1
            assert c.call("GETRANGE", "far", str((192 << 20) - 2), "-1") == b"\x00\x00x"
            assert time.monotonic() - start < 2.0, srv.kind
            c.call("DEL", "far")


def test_big_hash_values_by_reference(pair: Pair) -> None:
    """Values above the copy threshold are sent by reference: HSET over one
    and HDEL of one in the same pipeline still answer with the right bytes."""
    big = b"x" * 70000
    for srv in pair:
        with srv.raw() as c:
            c.call("HSET", "hb", "f", big, "g", big + b"y")
            c.send(c.command("HGET", "hb", "f") + c.command("HSET", "hb", "f", "small")
                   + c.command("HGETALL", "hb") + c.command("HDEL", "hb", "g"))
            assert c.read_reply() == big
            assert c.read_reply() == 0
            assert c.read_reply() in ([b"f", b"small", b"g", big + b"y"],
                                      [b"g", big + b"y", b"f", b"small"])
            assert c.read_reply() == 1


# --------------------------------------------------------------------------
# sets
# --------------------------------------------------------------------------


def test_sets(both: Both) -> None:
    both.run_all([
        ("SADD", "s", "a", "b", "c", "a"), ("SADD", "s", "d"), ("SREM", "s", "a", "zz"),
        ("SREM", "nokey", "a"), ("SCARD", "s"), ("SCARD", "nokey"), ("SISMEMBER", "s", "b"),
        ("SISMEMBER", "s", "zz"), ("SISMEMBER", "nokey", "b"), ("SMISMEMBER", "s", "b", "zz"),
        ("SMISMEMBER", "nokey", "b"), ("SMEMBERS", "nokey"),
        ("SADD", "t", "c", "d", "e"), ("SADD", "u", "d", "x"),
        ("SINTERCARD", "2", "s", "t"), ("SINTERCARD", "3", "s", "t", "u"),
        ("SINTERCARD", "2", "s", "nokey"), ("SINTERCARD", "2", "s", "t", "LIMIT", "1"),
        ("SINTERCARD", "0", "s"), ("SINTERCARD", "x", "s"), ("SINTERCARD", "3", "s", "t"),
        ("SINTERCARD", "1", "s", "LIMIT", "-1"), ("SINTERCARD", "1", "s", "LIMIT", "x"),
        ("SINTERCARD", "1", "s", "FOO"), ("SINTERCARD", "1", "s", "LIMIT"),
        ("SINTERSTORE", "dst", "s", "t", "u"), ("SMEMBERS", "dst"),
        ("SINTERSTORE", "dst", "s", "nokey"), ("EXISTS", "dst"),
        ("SUNIONSTORE", "dst", "s", "nokey"), ("SCARD", "dst"),
        ("SDIFFSTORE", "dst", "s", "t"), ("SMEMBERS", "dst"), ("SDIFFSTORE", "dst", "s", "s"),
        ("EXISTS", "dst"), ("SDIFF", "nokey", "s"), ("SINTER", "s", "nokey"),
        ("SUNIONSTORE", "s", "s", "u"), ("SCARD", "s"),
        ("SMOVE", "s", "t", "b"), ("SMOVE", "s", "t", "b"), ("SMOVE", "nokey", "t", "b"),
        ("SMOVE", "t", "t", "b"), ("SMOVE", "t", "t", "zz"), ("SMOVE", "u", "fresh", "x"),
        ("SMEMBERS", "fresh"), ("SMOVE", "fresh", "u", "x"), ("EXISTS", "fresh"),
        ("SPOP", "nokey"), ("SPOP", "nokey", "3"), ("SPOP", "s", "0"), ("SPOP", "s", "-1"),
        ("SPOP", "s", "x"), ("SPOP", "s", "1", "2"), ("SRANDMEMBER", "nokey"),
        ("SRANDMEMBER", "nokey", "5"), ("SRANDMEMBER", "s", "0"), ("SRANDMEMBER", "s", "x"),
        ("SRANDMEMBER", "s", "1", "2"), ("SRANDMEMBER", "s", "-9223372036854775808"),
        ("SADD", "one", "only"), ("SPOP", "one"), ("EXISTS", "one"),
        ("SSCAN", "nokey", "0"), ("SSCAN", "s", "x"), ("SSCAN", "s", "0", "TYPE", "set"),
        ("SET", "str", "v"), ("SADD", "str", "a"), ("SREM", "str", "a"), ("SMEMBERS", "str"),
        ("SISMEMBER", "str", "a"), ("SMISMEMBER", "str", "a"), ("SCARD", "str"),
        ("SPOP", "str"), ("SPOP", "str", "2"), ("SRANDMEMBER", "str"), ("SRANDMEMBER", "str", "2"),
        ("SMOVE", "str", "s", "a"), ("SMOVE", "s", "str", "a"), ("SINTER", "s", "str"),
        ("SINTER", "nokey", "str"), ("SUNION", "s", "str"), ("SDIFF", "s", "str"),
        ("SINTERSTORE", "d2", "s", "str"), ("SINTERCARD", "2", "s", "str"),
        ("SSCAN", "str", "0"), ("TYPE", "s"),
    ])
    both.run("SADD", "two", "p", "q")
    both.same_set("SPOP", "two", "5")
    both.run("EXISTS", "two")
    for cmd in (("SMEMBERS", "t"), ("SINTER", "t", "u"), ("SUNION", "s", "t", "u"),
                ("SDIFF", "t", "u"), ("SINTER", "t")):
        a, b = both.replies(*cmd)
        assert sorted(a) == sorted(b), cmd
    # the reply type: a set in RESP3, an array in RESP2
    for c in both.conns:
        c.send(c.command("SMEMBERS", "t"))
        head = c.read_reply_bytes()[:1]
        assert head in (b"*", b"~")
    heads = []
    for c in both.conns:
        c.send(c.command("SUNION", "t", "u"))
        heads.append(c.read_reply_bytes()[:1])
    assert heads[0] == heads[1]


def test_spop_srandmember_sscan_properties(pair: Pair) -> None:
    members = {str(i).encode() for i in range(600)} | {b"m" + str(i).encode() for i in range(100)}
    for srv in pair:
        with srv.raw() as c:
            c.call("SADD", "s", *members)
            assert c.call("SRANDMEMBER", "s") in members
            some = c.call("SRANDMEMBER", "s", "40")
            assert len(some) == 40 and len(set(some)) == 40 and set(some) <= members
            assert sorted(c.call("SRANDMEMBER", "s", "1000")) == sorted(members)
            rep = c.call("SRANDMEMBER", "s", "-1000")
            assert len(rep) == 1000 and set(rep) <= members
            assert set(full_scan(c, "SSCAN", "s", "COUNT", "20")) == members
            assert set(full_scan(c, "SSCAN", "s", "MATCH", "m1?")) == {
                b"m1" + str(d).encode() for d in range(10)}
            popped = c.call("SPOP", "s", "300")
            assert len(popped) == 300 and len(set(popped)) == 300 and set(popped) <= members
            one = c.call("SPOP", "s")
            assert one in members and one not in popped
            assert c.call("SCARD", "s") == len(members) - 301
            rest = set(c.call("SMEMBERS", "s"))
            assert rest == members - set(popped) - {one}
            assert set(c.call("SPOP", "s", "1000")) == rest
            assert c.call("EXISTS", "s") == 0
            c.call("SADD", "i", "1", "2", "3")
            assert c.call("OBJECT", "ENCODING", "i") == b"intset"
            c.call("SADD", "i", *[str(n) for n in range(4, 600)])
            assert c.call("OBJECT", "ENCODING", "i") == b"hashtable"


def test_big_members_popped_by_reference(pair: Pair) -> None:
    big = [bytes([65 + i]) * 50000 for i in range(3)]
    for srv in pair:
        with srv.raw() as c:
            c.call("SADD", "bs", *big)
            assert sorted([*c.call("SPOP", "bs", "2"), c.call("SPOP", "bs")]) == big
            c.call("SADD", "bs", big[0])
            c.call("SADD", "bt", big[0], big[1])
            assert c.call("SINTER", "bs", "bt") == [big[0]]
            assert sorted(c.call("SUNION", "bs", "bt")) == big[:2]


def test_memory_accounting_covers_hashes_and_sets(inreplay_server: ServerProcess) -> None:
    def dataset(c: RawConn) -> int:
        info = c.call("INFO", "memory").decode()
        return int(info.split("used_memory_dataset:")[1].split()[0])

    with inreplay_server.raw() as c:
        base = dataset(c)
        c.call("HSET", "mh", *[x for i in range(1000) for x in (f"f{i}", "v" * 100)])
        c.call("SADD", "ms", *[f"member-{i}" for i in range(1000)])
        c.call("SELECT", "3")
        c.call("SADD", "ms3", *[f"member-{i}" for i in range(1000)])
        grown = dataset(c)
        assert grown - base > 1000 * 100 + 2 * 1000 * 8
        c.call("MOVE", "ms3", "0")
        assert dataset(c) == grown
        c.call("SELECT", "0")
        c.call("COPY", "mh", "mh2")
        c.call("DEL", "mh", "ms", "ms3", "mh2")
        assert dataset(c) == base


# --------------------------------------------------------------------------
# snapshots hold hashes and sets
# --------------------------------------------------------------------------


def test_hashes_sets_and_databases_survive_a_snapshot(
    server_factory: Callable[..., ServerProcess], tmp_path: Path,
) -> None:
    d = tmp_path / "snap"
    d.mkdir()
    a = server_factory("inreplay", "--dir", str(d))
    with a.raw() as c:
        c.call("HSET", "h", "f", "v", b"bin\x00field", b"\x00\xff" * 40000, "n", "12")
        c.call("HSET", "big", *[x for i in range(600) for x in (f"f{i}", "v")])
        c.call("SADD", "ints", "1", "2", "3")
        c.call("SADD", "s", "a", b"b\x00", "c" * 70000)
        c.call("EXPIRE", "s", "1000")
        c.call("SADD", "gone", "x")
        c.call("PEXPIRE", "gone", "1")
        c.call("SET", "str", "plain")
        c.call("SELECT", "3")
        c.call("HSET", "h", "in", "db3")
        c.call("SET", "str", "three", "EX", "1000")
        c.call("SELECT", "15")
        c.call("RPUSH", "l", "a", "b")
        c.call("SELECT", "9")
        c.call("SET", "gone9", "x", "PX", "1")
        time.sleep(0.01)
        assert c.call("SAVE") == "OK"
    assert a.stop() == 0
    b = server_factory("inreplay", "--dir", str(d), "--restore", str(d))
    with b.raw() as c:
        flat = c.call("HGETALL", "h")
        assert dict(zip(flat[::2], flat[1::2], strict=True)) == {
            b"f": b"v", b"bin\x00field": b"\x00\xff" * 40000, b"n": b"12"}
        assert c.call("HINCRBY", "h", "n", "1") == 13
        assert c.call("HLEN", "big") == 600
        assert c.call("OBJECT", "ENCODING", "big") == b"hashtable"
        assert c.call("OBJECT", "ENCODING", "h") == b"hashtable"  # a value over 64 bytes
        assert sorted(c.call("SMEMBERS", "ints")) == [b"1", b"2", b"3"]
        assert c.call("OBJECT", "ENCODING", "ints") == b"intset"
        assert sorted(c.call("SMEMBERS", "s")) == sorted([b"a", b"b\x00", b"c" * 70000])
        assert 900 < c.call("TTL", "s") <= 1000
        assert c.call("EXISTS", "gone") == 0
        assert c.call("GET", "str") == b"plain"
        assert c.call("DBSIZE") == 5
        c.call("SELECT", "3")
        assert c.call("HGETALL", "h") == [b"in", b"db3"]
        assert c.call("GET", "str") == b"three" and 900 < c.call("TTL", "str") <= 1000
        assert c.call("DBSIZE") == 2
        c.call("SELECT", "15")
        assert c.call("LRANGE", "l", "0", "-1") == [b"a", b"b"]
        info = c.call("INFO", "keyspace").decode()
        assert [ln.split(",")[0] for ln in info.splitlines() if ln.startswith("db")] == [
            "db0:keys=5", "db3:keys=2", "db15:keys=1"]


def test_scan_while_keys_are_added_and_deleted(pair: Pair) -> None:
    """Every key present for the whole SCAN is returned while inserts grow the
    table under the cursor (a rehash in progress between calls), and while
    deletes empty it again."""
    for srv in pair:
        with srv.raw(timeout=30) as c:
            stable = [f"stable:{i}" for i in range(3000)]
            c.send(b"".join(c.command("SET", k, "v") for k in stable))
            for _ in stable:
                c.read_reply()
            for phase in ("grow", "shrink"):
                cursor, seen, n = "0", set(), 0
                while True:
                    nxt, batch = c.call("SCAN", cursor, "COUNT", "20")
                    seen |= set(batch)
                    if phase == "grow":
                        reqs = [c.command("SET", f"extra:{n + i}", "v") for i in range(60)]
                    else:
                        reqs = [c.command("DEL", f"extra:{n + i}") for i in range(60)]
                    n += 60
                    c.send(b"".join(reqs))
                    for _ in reqs:
                        c.read_reply()
                    cursor = nxt.decode()
                    if cursor == "0":
                        break
                missing = {k.encode() for k in stable} - seen
                assert not missing, (srv.kind, phase, len(missing))
