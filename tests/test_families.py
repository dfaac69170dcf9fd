"""Differential tests of the command families and RESP3: every case runs the
same commands against stock redis-server and inreplay, on raw connections,
and compares the replies byte for byte (or, for replies whose order Redis
leaves open, as sets).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
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
        ("SCAN", "x"), ("SCAN", " 1"), ("SCAN", "99999999999999999999"), ("SCAN", "0", "COUNT", "0"), ("SCAN", "0", "COUNT", "x"),
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
