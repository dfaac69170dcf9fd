"""Keyspace notifications (notify-keyspace-events), against stock Redis.

Each test subscribes to ``__key*__:*`` on stock redis-server 7.0.15 and on
inreplay, runs the same commands on both, and compares the messages the
subscribers received, in order: which events, on which channels, in which
order (``new`` before the command's own event, ``rename_from`` before
``rename_to``, a list emptied by LPOP gives ``lpop`` then ``del``), and that
commands that change nothing send nothing. A message on a marker channel
ends each collection, so no test waits on a timeout to prove silence.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pytest
from conftest import ServerProcess, own_server

if TYPE_CHECKING:
    from conftest import RawConn

Pair = tuple["ServerProcess", "ServerProcess"]
Cmd = Sequence[str | int | bytes]
END = "notify.end"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """Stock Redis (with DEBUG, for SET-ACTIVE-EXPIRE) and inreplay, for this module."""
    with (own_server("redis", tmp_path_factory.mktemp("notify-redis")) as ref,
          own_server("inreplay", tmp_path_factory.mktemp("notify-inreplay")) as ours):
        yield ref, ours


@pytest.fixture
def pair(servers: Pair) -> Iterator[Pair]:
    """Both servers flushed; notifications and active expiry as they were afterwards."""
    for s in servers:
        assert s.alive(), f"{s} is not running:\n{s.log_tail()}"
        s.flushall()
    yield servers
    for s in servers:
        assert s.alive(), f"{s} died during this test:\n{s.log_tail()}"
        with s.raw() as c:
            assert c.call("CONFIG", "SET", "notify-keyspace-events", "") == "OK"
            assert c.call("DEBUG", "SET-ACTIVE-EXPIRE", "1") == "OK"


class Side:
    """One server: a connection for commands and a subscriber to every keyspace channel."""

    def __init__(self, srv: ServerProcess, flags: str, resp: int = 2) -> None:
        self.srv = srv
        self.cmd: RawConn = srv.raw()
        self.sub: RawConn = srv.raw()
        assert self.cmd.call("CONFIG", "SET", "notify-keyspace-events", flags) == "OK"
        if resp == 3:
            assert self.sub.call("HELLO", "3")[b"proto"] == 3
        assert self.sub.call("PSUBSCRIBE", "__key*__:*") == [b"psubscribe", b"__key*__:*", 1]
        assert self.sub.call("SUBSCRIBE", END) == [b"subscribe", END.encode(), 2]

    def events(self) -> list[tuple[bytes, bytes]]:
        """(channel, message) of every notification so far, up to the end marker."""
        assert self.cmd.call("PUBLISH", END, "x") == 1
        out = []
        while True:
            m = self.sub.read_reply()
            if m == [b"message", END.encode(), b"x"]:
                return out
            assert m[0] == b"pmessage" and m[1] == b"__key*__:*", m
            out.append((m[2], m[3]))

    def close(self) -> None:
        self.cmd.close()
        self.sub.close()


class Both:
    """A Side on each server; run() sends a command to both and compares the replies."""

    def __init__(self, pair: Pair, flags: str = "KEA", resp: int = 2) -> None:
        self.sides = [Side(s, flags, resp) for s in pair]

    def run(self, *cmd: str | int | bytes, same: bool = True) -> Any:
        a, b = (s.cmd.call(*cmd) for s in self.sides)
        if same:
            assert b == a, f"{cmd!r}: redis {a!r}, inreplay {b!r}"
        return a

    def script(self, cmds: Sequence[Cmd], same: bool = True) -> None:
        for cmd in cmds:
            self.run(*cmd, same=same)

    def events(self) -> list[tuple[bytes, bytes]]:
        ref, ours = (s.events() for s in self.sides)
        assert ours == ref, f"redis sent {ref!r}\ninreplay sent {ours!r}"
        return ref

    def close(self) -> None:
        for s in self.sides:
            s.close()


@pytest.fixture(params=["KEA", "KEAnm"])
def both(request: pytest.FixtureRequest, pair: Pair) -> Iterator[Both]:
    """Every class Redis's A covers; then also new keys (n) and misses (m)."""
    b = Both(pair, str(request.param))
    yield b
    b.close()


def compare(both: Both, cmds: Sequence[Cmd], same: bool = True) -> list[tuple[bytes, bytes]]:
    both.script(cmds, same)
    ev = both.events()
    assert ev, "the script produced no notifications at all"
    return ev


def ks(key: str, db: int = 0) -> bytes:
    return f"__keyspace@{db}__:{key}".encode()


def ke(event: str, db: int = 0) -> bytes:
    return f"__keyevent@{db}__:{event}".encode()


# --------------------------------------------------------------------------
# the families
# --------------------------------------------------------------------------


def test_strings(both: Both) -> None:
    compare(both, [
        ("SET", "s", "1"), ("SET", "s", "2", "EX", "100"), ("SET", "s", "3", "KEEPTTL"),
        ("SET", "s", "4", "NX"), ("SET", "s2", "4", "XX"), ("SET", "s", "5", "GET"),
        ("SET", "s", "6", "PXAT", "1"), ("SETEX", "s", "100", "v"), ("PSETEX", "s", "100000", "v"),
        ("SETNX", "s", "x"), ("SETNX", "s3", "x"), ("GETSET", "s3", "y"), ("GETDEL", "s3"),
        ("GETDEL", "s3"), ("MSET", "a", "1", "b", "2"), ("MSETNX", "a", "1", "c", "3"),
        ("MSETNX", "c", "1", "d", "3"), ("INCR", "a"), ("DECR", "a"), ("INCRBY", "a", "5"),
        ("DECRBY", "a", "2"), ("INCRBYFLOAT", "f", "1.5"), ("INCR", "s"), ("APPEND", "ap", "x"),
        ("APPEND", "ap", "y"), ("SETRANGE", "ap", "5", "z"), ("SETRANGE", "ap", "1", ""),
        ("SETRANGE", "sr", "0", ""), ("SETBIT", "bits", "3", "1"), ("SETBIT", "bits", "3", "1"),
        ("SETBIT", "bits", "3", "0"), ("GETEX", "a", "EX", "100"), ("GETEX", "a", "PERSIST"),
        ("GETEX", "a", "PERSIST"), ("GETEX", "a"), ("GETEX", "b", "PXAT", "1"), ("GET", "nope"),
        ("GETRANGE", "ap", "0", "-1"), ("STRLEN", "ap"), ("MGET", "a", "zz"),
    ])  # fmt: skip


def test_lists(both: Both) -> None:
    compare(both, [
        ("LPUSH", "l", "a", "b", "c"), ("RPUSH", "l", "d"), ("LPUSHX", "l", "e"),
        ("RPUSHX", "l", "f"), ("LPUSHX", "nol", "e"), ("RPUSHX", "nol", "f"), ("LPOP", "l"),
        ("RPOP", "l"), ("LPOP", "l", "2"), ("LPOP", "l", "0"), ("LPOP", "nol"),
        ("RPOP", "nol", "3"), ("LSET", "l", "0", "x"), ("LINSERT", "l", "BEFORE", "x", "y"),
        ("LINSERT", "l", "AFTER", "nothere", "y"), ("LREM", "l", "0", "nothere"),
        ("LREM", "l", "1", "y"), ("LTRIM", "l", "0", "-1"), ("RPUSH", "l2", "1", "2", "3"),
        ("LMOVE", "l", "l2", "LEFT", "RIGHT"), ("LMOVE", "l2", "l2", "LEFT", "RIGHT"),
        ("RPOPLPUSH", "l2", "l3"), ("RPOPLPUSH", "nol", "l3"), ("LMPOP", "2", "nol", "l2", "LEFT"),
        ("LMPOP", "1", "l2", "RIGHT", "COUNT", "10"), ("LTRIM", "l3", "5", "6"),
        ("LPOP", "l"), ("RPUSH", "l4", "a", "a", "b"), ("LREM", "l4", "0", "a"), ("RPOP", "l4"),
        ("LRANGE", "l", "0", "-1"), ("LINDEX", "nol", "0"), ("LLEN", "nol"),
    ])  # fmt: skip


def test_list_emptied_by_lpop_gives_lpop_then_del(both: Both) -> None:
    ev = compare(both, [("RPUSH", "q", "a"), ("LPOP", "q")])
    assert [e for e in ev if b"new" not in (e[1], e[0][-3:])] == [
        (ks("q"), b"rpush"), (ke("rpush"), b"q"), (ks("q"), b"lpop"), (ke("lpop"), b"q"),
        (ks("q"), b"del"), (ke("del"), b"q"),
    ]  # fmt: skip


def _wait_blocked(side: Side, n: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        info = side.cmd.call("INFO", "clients").decode()
        if f"blocked_clients:{n}\r\n" in info:
            return
        time.sleep(0.01)
    raise AssertionError(f"{side.srv}: never saw {n} blocked clients")


@pytest.mark.parametrize("block", [
    ("BLPOP", "bk", "0"), ("BRPOP", "bk", "0"), ("BLMOVE", "bk", "bdst", "LEFT", "RIGHT", "0"),
    ("BRPOPLPUSH", "bk", "bdst", "0"), ("BLMPOP", "0", "1", "bk", "LEFT", "COUNT", "5"),
])  # fmt: skip
def test_blocking_pops_served(both: Both, block: Cmd) -> None:
    """The served pop's events follow the push that woke it; an emptied list goes."""
    waiters = [s.srv.raw() for s in both.sides]
    try:
        for w in waiters:
            w.send(w.command(*block))
        for s in both.sides:
            _wait_blocked(s, 1)
        both.run("RPUSH", "bk", "a", "b")
        replies = [w.read_reply() for w in waiters]
        assert replies[1] == replies[0]
        both.run("RPUSH", "bk2", "c")
        both.run("BLPOP", "bk", "bk2", "0")  # served at once: no blocking
        ev = both.events()
        assert ev
    finally:
        for w in waiters:
            w.close()


def test_hashes(both: Both) -> None:
    compare(both, [
        ("HSET", "h", "a", "1", "b", "2"), ("HSET", "h", "a", "1"), ("HMSET", "h", "c", "3"),
        ("HSETNX", "h", "a", "9"), ("HSETNX", "h", "d", "4"), ("HSETNX", "h2", "d", "4"),
        ("HDEL", "h", "nothere"), ("HDEL", "h", "a", "b"), ("HINCRBY", "h", "n", "5"),
        ("HINCRBY", "h3", "n", "5"), ("HINCRBYFLOAT", "h", "f", "1.5"),
        ("HINCRBYFLOAT", "h4", "f", "2"), ("HDEL", "h2", "d"), ("HDEL", "nohash", "x"),
        ("HGET", "nohash", "x"), ("HLEN", "h"), ("HLEN", "nohash"),
    ])  # fmt: skip


def test_sets(both: Both) -> None:
    compare(both, [
        ("SADD", "s1", "a", "b", "c"), ("SADD", "s1", "a"), ("SREM", "s1", "zz"),
        ("SREM", "nos", "a"), ("SREM", "s1", "c"), ("SADD", "s2", "b", "x"),
        ("SMOVE", "s1", "s2", "a"), ("SMOVE", "s1", "s2", "b"), ("SMOVE", "s2", "s3", "x"),
        ("SMOVE", "s2", "s2", "b"), ("SMOVE", "nos", "s2", "b"), ("SADD", "u", "1", "2"),
        ("SINTERSTORE", "dst", "s2", "u"), ("SUNIONSTORE", "dst", "s2", "u"),
        ("SUNIONSTORE", "dst", "s2", "u"), ("SDIFFSTORE", "dst2", "s2", "u"),
        ("SDIFFSTORE", "dst", "u", "u"), ("SINTERSTORE", "dst", "nos", "u"),
        ("SINTERSTORE", "dst2", "nos", "u"), ("SADD", "one", "m"), ("SREM", "one", "m"),
        ("SISMEMBER", "nos", "a"), ("SMEMBERS", "nos"),
    ])  # fmt: skip
    # SPOP picks at random: the events name the key, so they still match
    compare(both, [
        ("SADD", "p", "1", "2", "3", "4"), ("SPOP", "p"), ("SPOP", "p", "0"), ("SPOP", "p", "1"),
        ("SPOP", "p", "10"), ("SPOP", "p"), ("SPOP", "nos", "2"),
    ], same=False)  # fmt: skip


def test_zsets(both: Both) -> None:
    compare(both, [
        ("ZADD", "z", "1", "a", "2", "b", "3", "c"), ("ZADD", "z", "1", "a"),
        ("ZADD", "z", "5", "a"), ("ZADD", "z", "XX", "1", "nope"), ("ZINCRBY", "z", "1", "b"),
        ("ZADD", "z", "INCR", "1", "c"), ("ZREM", "z", "nope"), ("ZREM", "z", "a"),
        ("ZADD", "y", "1", "a", "2", "b", "3", "c", "4", "d"),
        ("ZREMRANGEBYSCORE", "y", "10", "20"), ("ZREMRANGEBYSCORE", "y", "1", "1"),
        ("ZREMRANGEBYRANK", "y", "0", "0"), ("ZREMRANGEBYLEX", "y", "[c", "[c"),
        ("ZREMRANGEBYLEX", "y", "-", "+"), ("ZPOPMIN", "z"), ("ZPOPMAX", "z", "5"),
        ("ZPOPMIN", "noz"), ("ZADD", "m", "1", "a", "2", "b"), ("ZMPOP", "1", "m", "MAX"),
        ("ZMPOP", "1", "m", "MIN", "COUNT", "3"), ("ZADD", "u", "1", "a", "2", "b"),
        ("ZUNIONSTORE", "d", "1", "u"), ("ZUNIONSTORE", "d", "1", "u"),
        ("ZINTERSTORE", "d", "2", "u", "noz"), ("ZINTERSTORE", "d2", "2", "u", "noz"),
        ("ZDIFFSTORE", "d", "1", "u"), ("ZRANGESTORE", "r", "u", "0", "0"),
        ("ZRANGESTORE", "r", "u", "5", "6"), ("ZRANGE", "u", "0", "-1"), ("ZSCORE", "noz", "a"),
    ])  # fmt: skip


def test_streams(both: Both) -> None:
    compare(both, [
        ("XADD", "x", "1-0", "f", "v"), ("XADD", "x", "MAXLEN", "1", "2-0", "f", "v"),
        ("XADD", "x", "NOMKSTREAM", "3-0", "f", "v"),
        ("XADD", "nox", "NOMKSTREAM", "1-0", "f", "v"),
        ("XADD", "x", "0-1", "f", "v"), ("XDEL", "x", "9-0"), ("XDEL", "x", "2-0"),
        ("XADD", "x", "4-0", "f", "v"), ("XTRIM", "x", "MAXLEN", "5"), ("XTRIM", "x", "MINID", "4"),
        ("XGROUP", "CREATE", "x", "g", "0"), ("XGROUP", "CREATE", "x", "g", "0"),
        ("XGROUP", "CREATE", "mk", "g", "$", "MKSTREAM"),
        ("XGROUP", "CREATECONSUMER", "x", "g", "c"), ("XGROUP", "CREATECONSUMER", "x", "g", "c"),
        ("XREADGROUP", "GROUP", "g", "d", "STREAMS", "x", ">"),
        ("XCLAIM", "x", "g", "e", "0", "4-0"), ("XAUTOCLAIM", "x", "g", "f", "0", "0"),
        ("XACK", "x", "g", "4-0"), ("XGROUP", "SETID", "x", "g", "0"),
        ("XGROUP", "DELCONSUMER", "x", "g", "c"), ("XGROUP", "DELCONSUMER", "x", "g", "zz"),
        ("XGROUP", "DESTROY", "x", "g"), ("XGROUP", "DESTROY", "x", "g"),
        ("XSETID", "x", "10-0"), ("XRANGE", "x", "-", "+"), ("XRANGE", "nox", "-", "+"),
        ("XREAD", "STREAMS", "nox", "0"), ("XLEN", "nox"), ("XACK", "nox", "g", "1-0"),
        ("XCLAIM", "nox", "g", "c", "0", "1-0"), ("XAUTOCLAIM", "nox", "g", "c", "0", "0"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "nox", ">"), ("XPENDING", "nox", "g"),
        ("XINFO", "STREAM", "nox"), ("XTRIM", "nox", "MAXLEN", "1"), ("XDEL", "nox", "1-0"),
        ("XSETID", "nox", "1-0"), ("XGROUP", "CREATE", "nox", "g", "$"), ("DEL", "x"),
    ])  # fmt: skip


def test_keyspace_commands(both: Both) -> None:
    ev = compare(both, [
        ("SET", "k", "v"), ("DEL", "k", "nothere"), ("SET", "k", "v"), ("UNLINK", "k"),
        ("SET", "k", "v"), ("EXPIRE", "k", "100"), ("EXPIRE", "k", "200", "NX"),
        ("PEXPIRE", "k", "100000", "XX"), ("EXPIREAT", "k", "9999999999"),
        ("PEXPIREAT", "k", "9999999999000", "GT"), ("PERSIST", "k"), ("PERSIST", "k"),
        ("EXPIRE", "nokey", "5"), ("RENAME", "k", "k2"), ("SET", "k3", "x"),
        ("RENAME", "k2", "k3"), ("RENAMENX", "k3", "k4"), ("RENAMENX", "k4", "k4"),
        ("SET", "k5", "y"), ("RENAMENX", "k4", "k5"), ("RENAME", "k4", "k4"),
        ("MOVE", "k4", "1"), ("MOVE", "k5", "1"), ("SET", "k5", "z"), ("MOVE", "k5", "1"),
        ("COPY", "k5", "c1"), ("COPY", "k5", "c1"), ("COPY", "k5", "c1", "REPLACE"),
        ("COPY", "k5", "c2", "DB", "2"), ("COPY", "nokey", "c3"), ("EXPIRE", "k5", "-1"),
        ("SET", "t", "1"), ("PEXPIREAT", "t", "1"), ("TOUCH", "c1"), ("EXISTS", "nokey"),
        ("TYPE", "nokey"), ("TTL", "nokey"), ("OBJECT", "ENCODING", "nokey"),
        ("OBJECT", "FREQ", "nokey"), ("SCAN", "0", "TYPE", "string"), ("KEYS", "*"),
        ("RANDOMKEY",), ("DBSIZE",), ("FLUSHDB",), ("SWAPDB", "0", "1"),
    ])  # fmt: skip
    names = [e for e in ev if e[0].startswith(b"__keyspace@0__:k3")]
    assert (ks("k3"), b"rename_to") in names
    i = ev.index((ks("k2"), b"rename_from"))
    assert ev[i + 2] == (ks("k3"), b"rename_to")  # keyspace, keyevent, then the target


def test_restore(both: Both) -> None:
    """RESTORE sends "restore"; one that replaces a key with an already-passed
    absolute TTL sends "del"; one that creates nothing sends nothing."""
    both.run("SET", "src", "bar")
    payload = both.sides[0].cmd.call("DUMP", "src")
    assert both.sides[1].cmd.call("DUMP", "src") == payload
    compare(both, [
        ("RESTORE", "r1", "0", payload), ("RESTORE", "r2", "100000", payload),
        ("RESTORE", "r1", "0", payload, "REPLACE"), ("RESTORE", "r3", "1", payload, "ABSTTL"),
        ("RESTORE", "r1", "1", payload, "ABSTTL", "REPLACE"),
    ])  # fmt: skip


def test_expired_on_access(both: Both) -> None:
    """A key found stale by a command: expired (then the command's own events)."""
    both.run("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    both.script(
        [
            ("SET", "e1", "v", "PX", "20"),
            ("SET", "e2", "v", "PX", "20"),
            ("RPUSH", "e3", "a"),
            ("PEXPIRE", "e3", "20"),
        ]
    )
    time.sleep(0.1)
    ev = compare(both, [("GET", "e1"), ("LPUSH", "e3", "b"), ("SET", "e2", "w")])
    assert (ks("e1"), b"expired") in ev
    # SCAN removes the stale keys it meets (with TYPE: a keymiss too); KEYS does not
    both.script(
        [
            ("SET", "sc1", "v", "PX", "20"),
            ("SET", "sc2", "v", "PX", "20"),
            ("SET", "sc3", "v", "PX", "20"),
        ]
    )
    time.sleep(0.1)
    ev = compare(
        both,
        [
            ("KEYS", "sc*"),
            ("SCAN", "0", "MATCH", "sc1", "COUNT", "100"),
            ("SCAN", "0", "MATCH", "sc2", "TYPE", "string", "COUNT", "100"),
            ("DBSIZE",),
        ],
    )
    assert [e[0] for e in ev if e[1] == b"expired"] == [ks("sc1"), ks("sc2")]


def test_expired_in_the_background(both: Both) -> None:
    both.script(
        [("SET", "bg1", "v", "PX", "30"), ("HSET", "bg2", "f", "v"), ("PEXPIRE", "bg2", "30")]
    )
    deadline = time.monotonic() + 10
    for s in both.sides:  # the active expiry cycle removes them without any access
        while s.cmd.call("DBSIZE") != 0:
            assert time.monotonic() < deadline, f"{s.srv}: keys never expired"
            time.sleep(0.02)
    # the cycle samples keys at random: the two expiries may come in either order
    ref, ours = (sorted(s.events()) for s in both.sides)
    assert ours == ref
    assert (ks("bg1"), b"expired") in ref and (ke("expired"), b"bg2") in ref


def test_multi_exec(both: Both) -> None:
    ev = compare(both, [
        ("MULTI",), ("SET", "m1", "a"), ("LPUSH", "m2", "x"), ("INCR", "m3"), ("DEL", "m1"),
        ("HSET", "m4", "f", "v"), ("SADD", "m5", "a"), ("LPOP", "m2"), ("EXEC",),
        ("MULTI",), ("SET", "m6", "a"), ("DISCARD",),
    ])  # fmt: skip
    assert (ks("m6"), b"set") not in ev


def test_other_databases_use_their_index(both: Both) -> None:
    ev = compare(
        both,
        [("SELECT", "3"), ("SET", "d", "1"), ("LPUSH", "dl", "x"), ("DEL", "d"), ("SELECT", "0")],
    )
    assert (ks("d", 3), b"set") in ev and (ke("del", 3), b"d") in ev


def test_debug_reload_loads_without_events(both: Both) -> None:
    """Keys read back from the snapshot are not new keys (Redis sends nothing)."""
    both.script([("SET", "rl", "v"), ("HSET", "rlh", "f", "v")])
    both.events()
    both.run("DEBUG", "RELOAD")
    assert both.events() == []
    assert both.run("GET", "rl") == b"v"


def test_binary_and_long_keys(both: Both) -> None:
    long_key = b"L" * 5000
    compare(both, [("SET", b"bin\x00\xff key", "v"), ("SET", long_key, "v"), ("DEL", long_key)])


def test_replay_tables_send_nothing(pair: Pair) -> None:
    """REPLAY.* is outside the keyspace: no notification, even with every class on."""
    side = Side(pair[1], "KEA")
    try:
        side.cmd.call("REPLAY.CREATE", "nt", "CAPACITY", "16")
        side.cmd.call("REPLAY.ADD", "nt", "1.0", "x")
        side.cmd.call("REPLAY.DROP", "nt")
        assert side.events() == []
    finally:
        side.close()


def test_subscriber_over_pubsub_limit_is_disconnected(pair: Pair) -> None:
    """A subscriber that stops reading is dropped at the pubsub output limit."""
    key = "big" + "k" * 50000
    for srv in pair:
        with srv.raw() as cmd, srv.raw() as sub:
            assert (
                cmd.call("CONFIG", "SET", "client-output-buffer-limit", "pubsub 256kb 0 0") == "OK"
            )
            assert cmd.call("CONFIG", "SET", "notify-keyspace-events", "K$") == "OK"
            assert sub.call("PSUBSCRIBE", "__keyspace@0__:*")[0] == b"psubscribe"
            try:
                for _ in range(400):  # 20 MB of channel names, more than the socket holds
                    assert cmd.call("SET", key, "v") == "OK"
                _, closed = sub.read_until_close(10)
                assert closed, f"{srv}: the subscriber was kept"
                assert cmd.call("PING") == "PONG"
            finally:
                cmd.call("CONFIG", "SET", "client-output-buffer-limit", "pubsub 32mb 8mb 60")


# --------------------------------------------------------------------------
# masking: K vs E, classes, A, n and m
# --------------------------------------------------------------------------

MIXED: list[Cmd] = [
    ("SET", "x", "1"),
    ("INCR", "x"),
    ("EXPIRE", "x", "100"),
    ("LPUSH", "ml", "a"),
    ("RPOP", "ml"),
    ("HSET", "mh", "f", "v"),
    ("SADD", "ms", "a"),
    ("RENAME", "x", "y"),
    ("GET", "missing"),
    ("EXISTS", "missing2"),
    ("DEL", "y"),
]


@pytest.mark.parametrize("flags", [
    "KEA", "K$", "El", "Kg", "Eh", "Ks", "Kn", "En$", "KEm", "KAn", "EA", "Kgl$shzxetd",
    "KE$lsh", "Em",
])  # fmt: skip
def test_masking(pair: Pair, flags: str) -> None:
    b = Both(pair, flags)
    try:
        compare(b, MIXED)
    finally:
        b.close()


def test_keymiss_on_every_read(pair: Pair) -> None:
    """m: each read of a missing key, as Redis's lookupKeyRead sends it."""
    b = Both(pair, "KEm")
    try:
        b.script(
            [
                ("SET", "str", "v"),
                ("RPUSH", "lst", "a"),
                ("HSET", "hh", "f", "v"),
                ("SADD", "ss", "a"),
            ]
        )
        compare(b, [
            ("GET", "m1"), ("MGET", "m1", "str", "m2"), ("STRLEN", "m1"),
            ("GETRANGE", "m1", "0", "1"), ("GETBIT", "m1", "0"), ("LCS", "m1", "m2"),
            ("GETEX", "m1"), ("GETDEL", "m1"),
            ("GETSET", "m1", "x"), ("SET", "m2", "x", "GET"), ("LLEN", "m3"),
            ("LRANGE", "m3", "0", "-1"), ("LINDEX", "m3", "0"), ("LPOS", "m3", "a"),
            ("HGET", "m4", "f"), ("HMGET", "m4", "f", "g"), ("HLEN", "m4"), ("HEXISTS", "m4", "f"),
            ("HSTRLEN", "m4", "f"), ("HGETALL", "m4"), ("HKEYS", "m4"), ("HVALS", "m4"),
            ("HRANDFIELD", "m4"), ("HSCAN", "m4", "0"), ("SCARD", "m5"), ("SMEMBERS", "m5"),
            ("SISMEMBER", "m5", "a"), ("SMISMEMBER", "m5", "a"), ("SRANDMEMBER", "m5"),
            ("SSCAN", "m5", "0"), ("SINTER", "ss", "m5"), ("SUNION", "m5", "ss"),
            ("SDIFF", "m5", "ss"), ("SINTERCARD", "2", "ss", "m5"), ("EXISTS", "m6", "str"),
            ("TOUCH", "m6"), ("TYPE", "m6"), ("TTL", "m6"), ("PTTL", "m6"),
            ("EXPIRETIME", "m6"), ("PEXPIRETIME", "m6"), ("OBJECT", "ENCODING", "m6"),
            ("COPY", "m6", "m7"), ("DEL", "m6"), ("EXPIRE", "m6", "5"), ("PERSIST", "m6"),
            ("RENAME", "m6", "m7"), ("LPOP", "m6"), ("HDEL", "m6", "f"), ("SREM", "m6", "a"),
            ("SMOVE", "m6", "ss", "a"), ("LMOVE", "m6", "lst", "LEFT", "LEFT"),
            ("SINTERSTORE", "d", "m6", "ss"), ("SUNIONSTORE", "d", "m6", "m7"),
            ("LMPOP", "1", "m6", "LEFT"), ("INCR", "m8"),
        ])  # fmt: skip
    finally:
        b.close()


@pytest.mark.parametrize("flags", ["A", "g$lshx", "K", "E", "Kz", "Ete", "KEx"])
def test_masking_that_sends_nothing(pair: Pair, flags: str) -> None:
    b = Both(pair, flags)
    try:
        b.script(MIXED)
        assert b.events() == []
    finally:
        b.close()


def test_k_and_e_channels(both: Both) -> None:
    both.run("CONFIG", "SET", "notify-keyspace-events", "K$")
    both.run("SET", "kv", "1")
    both.run("CONFIG", "SET", "notify-keyspace-events", "E$")
    both.run("SET", "kv", "2")
    assert both.events() == [(ks("kv"), b"set"), (ke("set"), b"kv")]


def test_resp3_subscriber_gets_pushes(pair: Pair) -> None:
    b = Both(pair, "KEA", resp=3)
    try:
        compare(b, [("SET", "r3", "v"), ("LPUSH", "r3l", "a"), ("DEL", "r3", "r3l")])
    finally:
        b.close()


def test_resp3_client_sees_its_own_events_where_redis_puts_them(pair: Pair) -> None:
    """A RESP3 client subscribed to keyevents gets its pushes and replies in Redis's order."""
    seqs = []
    for srv in pair:
        with srv.raw() as c:
            assert c.call("HELLO", "3")[b"proto"] == 3
            assert c.call("CONFIG", "SET", "notify-keyspace-events", "KEA") == "OK"
            assert c.call("PSUBSCRIBE", "__keyevent@0__:*")[0] == b"psubscribe"
            seq = []
            for cmd in (("SET", "own", "1"), ("RPUSH", "ownl", "a"), ("LPOP", "ownl")):
                c.send(c.command(*cmd))
                c.send(c.command("PING", "end"))
                while (r := c.read_reply()) != "end" and r != b"end":
                    seq.append(r)
            seqs.append(seq)
    assert seqs[1] == seqs[0]
    assert seqs[0]


# --------------------------------------------------------------------------
# CONFIG SET / GET
# --------------------------------------------------------------------------


@pytest.mark.parametrize("value", [
    "", "KEA", "AKE", "A", "An", "nA", "Kgn", "Ex", "g$lshzxetdn", "g$lshzxetd", "m", "Em",
    "KEAm", "KKK", "$", "Q", "K E", "a", "Kgx$q", "e", "t", "d", "z",
])  # fmt: skip
def test_config_set_get_as_redis(pair: Pair, value: str) -> None:
    got = []
    for srv in pair:
        with srv.raw() as c:
            c.call("CONFIG", "SET", "notify-keyspace-events", "Kl")
            reply = c.call("CONFIG", "SET", "notify-keyspace-events", value)
            got.append((reply, c.call("CONFIG", "GET", "notify-keyspace-events")))
    assert got[1] == got[0]
