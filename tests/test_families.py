"""Differential tests of the command families and RESP3: every case runs the
same commands against stock redis-server and inreplay, on raw connections,
and compares the replies byte for byte (or, for replies whose order Redis
leaves open, as sets).
"""

from __future__ import annotations

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
