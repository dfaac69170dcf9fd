"""What Redis's own test suite showed missing, against both servers: MEMORY, SORT,
DUMP/RESTORE,
OBJECT IDLETIME, COMMAND GETKEYS/GETKEYSANDFLAGS and key specs, COMMAND LIST's
syntax errors, wake-ups of blocked clients by RENAME/MOVE/COPY/SWAPDB, the
0.001 s blocking timeout, CLIENT UNBLOCK, WATCH of keys already expired when
watched (FLUSHDB/FLUSHALL/SWAPDB), EXEC over maxmemory, CONFIG SET save and
CONFIG SET port onto a taken port.

Each test runs against stock redis-server 7.0.15 (with ``--enable-debug-command
yes``, as Redis's suite runs it) and inreplay with the same expectations over
raw RESP connections; where both answer with numbers of their own (MEMORY),
the shape and the relations are compared. Tests of both at once compare the
two replies directly.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import HOST, RawConn, RespError, ServerProcess, own_server
from helpers import crc64, dump_payload

KINDS = ("redis", "inreplay")
Call = Callable[..., Any]


@pytest.fixture(scope="module", params=KINDS)
def ssrv(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[ServerProcess]:
    kind = str(request.param)
    with own_server(kind, tmp_path_factory.mktemp(f"suitefix-{kind}")) as srv:
        yield srv


@pytest.fixture
def conns(ssrv: ServerProcess) -> Iterator[Callable[[], RawConn]]:
    made: list[RawConn] = []

    def make() -> RawConn:
        c = ssrv.raw()
        made.append(c)
        return c

    first = make()
    first.call("FLUSHALL")
    first.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
    try:
        yield make
    finally:
        first.call("CONFIG", "SET", "maxmemory", "0")
        first.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        for c in made:
            c.close()


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RawConn, RawConn]]:
    """One connection to each server, for replies compared with each other."""
    work: Path = tmp_path_factory.mktemp("suitefix-both")
    srvs = [ServerProcess("redis", work / "r"), ServerProcess("inreplay", work / "i")]
    cs = [s.raw() for s in srvs]
    try:
        yield cs[0], cs[1]
    finally:
        for c in cs:
            c.close()
        for s in srvs:
            assert s.stop() == 0


def err(text: str) -> RespError:
    return RespError(text.encode())


def kv(reply: list[Any]) -> dict[bytes, Any]:
    return dict(zip(reply[0::2], reply[1::2], strict=True))


# --------------------------------------------------------------------------
# MEMORY
# --------------------------------------------------------------------------


def test_memory_usage(conns: Callable[[], RawConn]) -> None:
    c = conns()
    c.call("SET", "small", "x")
    c.call("SET", "big", "x" * 10000)
    small, big = c.call("MEMORY", "USAGE", "small"), c.call("MEMORY", "USAGE", "big")
    assert isinstance(small, int) and small > 0
    assert big > 10000 and big > small
    assert c.call("MEMORY", "USAGE", "nokey") is None
    for i in range(200):
        c.call("HSET", "h", f"field{i}", "v" * 50)
        c.call("RPUSH", "l", "e" * 50)
        c.call("SADD", "s", f"member{i}")
    for key in ("h", "l", "s"):
        sampled = c.call("MEMORY", "USAGE", key)
        every = c.call("MEMORY", "USAGE", key, "SAMPLES", "0")
        assert every > 200 * 10, key
        assert 0.5 < sampled / every < 2, key
    assert c.call("MEMORY", "USAGE", "small", "SAMPLES", "-1") == err("ERR syntax error")
    assert c.call("MEMORY", "USAGE", "small", "SAMPLES", "x") == err(
        "ERR value is not an integer or out of range")
    assert c.call("MEMORY", "USAGE", "small", "extra") == err("ERR syntax error")
    assert c.call("MEMORY", "USAGE") == err(
        "ERR wrong number of arguments for 'memory|usage' command")
    assert c.call("MEMORY", "STATS", "x") == err(
        "ERR wrong number of arguments for 'memory|stats' command")
    assert c.call("MEMORY", "NOSUCH") == err("ERR unknown subcommand 'NOSUCH'. Try MEMORY HELP.")


def test_memory_stats_doctor_purge_help(conns: Callable[[], RawConn]) -> None:
    c = conns()
    c.call("SET", "a", "1")
    c.call("SELECT", "3")
    c.call("SET", "b", "1")
    c.call("EXPIRE", "b", "100")
    stats = kv(c.call("MEMORY", "STATS"))
    assert list(stats) == [
        b"peak.allocated", b"total.allocated", b"startup.allocated", b"replication.backlog",
        b"clients.slaves", b"clients.normal", b"cluster.links", b"aof.buffer", b"lua.caches",
        b"functions.caches", b"db.0", b"db.3", b"overhead.total", b"keys.count",
        b"keys.bytes-per-key", b"dataset.bytes", b"dataset.percentage", b"peak.percentage",
        b"allocator.allocated", b"allocator.active", b"allocator.resident",
        b"allocator-fragmentation.ratio", b"allocator-fragmentation.bytes",
        b"allocator-rss.ratio", b"allocator-rss.bytes", b"rss-overhead.ratio",
        b"rss-overhead.bytes", b"fragmentation", b"fragmentation.bytes"]
    assert list(kv(stats[b"db.3"])) == [b"overhead.hashtable.main",
                                        b"overhead.hashtable.expires",
                                        b"overhead.hashtable.slot-to-keys"]
    assert stats[b"keys.count"] == 2
    assert stats[b"total.allocated"] <= stats[b"peak.allocated"]
    assert 0 < float(stats[b"peak.percentage"]) <= 100
    doctor = c.call("MEMORY", "DOCTOR")
    assert isinstance(doctor, bytes) and doctor.startswith(b"Hi Sam, ")
    assert isinstance(c.call("MEMORY", "MALLOC-STATS"), bytes)
    assert c.call("MEMORY", "PURGE") == "OK"
    help_ = c.call("MEMORY", "HELP")
    assert help_[0] == "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    assert "USAGE <key> [SAMPLES <count>]" in help_


# --------------------------------------------------------------------------
# OBJECT IDLETIME
# --------------------------------------------------------------------------


def test_object_idletime_counts_accesses_only(conns: Callable[[], RawConn]) -> None:
    c = conns()
    c.call("SET", "foo", "bar")
    c.call("SET", "other", "x")
    assert c.call("OBJECT", "IDLETIME", "foo") == 0
    time.sleep(2.2)
    for cmd in (("TTL", "foo"), ("PTTL", "foo"), ("TYPE", "foo"), ("EXISTS", "foo"),
                ("OBJECT", "ENCODING", "foo"), ("MEMORY", "USAGE", "foo")):
        c.call(*cmd)
    assert c.call("OBJECT", "IDLETIME", "foo") >= 2
    assert c.call("OBJECT", "IDLETIME", "other") >= 2
    c.call("TOUCH", "foo")
    c.call("GET", "other")
    assert c.call("OBJECT", "IDLETIME", "foo") == 0
    assert c.call("OBJECT", "IDLETIME", "other") == 0
    assert c.call("OBJECT", "IDLETIME", "nokey") is None
    assert c.call("OBJECT", "FREQ", "foo") == err(
        "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please "
        "note that when switching between policies at runtime LRU and LFU data will take some "
        "time to adjust.")
    assert "IDLETIME <key>" in c.call("OBJECT", "HELP")


# --------------------------------------------------------------------------
# COMMAND
# --------------------------------------------------------------------------

GETKEYS_CASES = [
    ("get", "k"), ("set", "k", "v"), ("set", "k", "v", "GET"), ("set", "k", "v", "nx", "get"),
    ("mset", "a", "1", "b", "2"), ("mset", "a", "1", "b"), ("del", "a", "b", "c"),
    ("lmove", "a", "b", "left", "right"), ("blmove", "a", "b", "left", "right", "0"),
    ("blpop", "a", "b", "0"), ("lmpop", "2", "a", "b", "left"), ("lmpop", "2", "a", "left"),
    ("lmpop", "x", "a", "left"), ("lmpop", "-1", "a", "left"),
    ("blmpop", "0", "2", "a", "b", "left"), ("sintercard", "2", "a", "b"),
    ("sinterstore", "d", "a", "b"), ("sdiffstore", "d", "a"), ("copy", "a", "b"),
    ("rename", "a", "b"), ("renamenx", "a", "b"), ("lcs", "a", "b"), ("smove", "a", "b", "m"),
    ("memory", "usage", "k"), ("memory", "usage", "k", "samples", "5"),
    ("object", "encoding", "k"), ("object", "idletime", "k"), ("memory", "stats"),
    ("object", "help"), ("ping",), ("nosuch", "x"), ("get",), ("get", "a", "b"),
    ("hset", "h", "f", "v"), ("watch", "a", "b"), ("msetnx", "a", "1"), ("getex", "k"),
    ("expire", "k", "10"), ("touch", "a"), ("unlink", "a", "b"), ("incrbyfloat", "k", "1"),
    ("rpoplpush", "a", "b"), ("brpoplpush", "a", "b", "0"), ("hsetnx", "h", "f", "v"),
    ("linsert", "l", "before", "a", "b"), ("psetex", "k", "10", "v"), ("getdel", "k"),
    ("sort", "k1", "store", "k2"), ("sort", "k1", "limit", "0", "1", "store", "k2", "store", "k3"),
    ("sort", "k1", "by", "store"), ("sort_ro", "k1"),
]  # fmt: skip


@pytest.mark.parametrize("args", GETKEYS_CASES, ids=" ".join)
def test_command_getkeys_and_flags_as_redis(both: tuple[RawConn, RawConn],
                                            args: tuple[str, ...]) -> None:
    ref, ours = both
    for sub in ("GETKEYS", "GETKEYSANDFLAGS"):
        assert ours.call("COMMAND", sub, *args) == ref.call("COMMAND", sub, *args), sub


def without_notes(specs: list[list[Any]]) -> list[list[Any]]:
    """Key specs less Redis's free-text "notes" (documentation, not kept here)."""
    out = []
    for spec in specs:
        d = kv(spec)
        d.pop(b"notes", None)
        out.append([x for pair in d.items() for x in pair])
    return out


def test_command_info_key_specs_as_redis(both: tuple[RawConn, RawConn]) -> None:
    ref, ours = both
    names = [n for n in ours.call("COMMAND", "LIST")
             if not n.startswith((b"replay.", b"param.")) and n != b"client|setinfo"]
    theirs = ref.call("COMMAND", "INFO", *names)
    for info, mine in zip(theirs, ours.call("COMMAND", "INFO", *names), strict=True):
        assert mine[0] == info[0]
        # first/last/step and the key specs, the subcommands' too (in any order)
        assert (mine[3:6], mine[8]) == (info[3:6], without_notes(info[8])), info[0]
        subs = {s[0]: (s[3:6], without_notes(s[8])) for s in info[9]}
        mine_subs = {s[0]: (s[3:6], s[8]) for s in mine[9] if s[0] != b"client|setinfo"}
        assert mine_subs == {k: v for k, v in subs.items() if k in mine_subs}, info[0]


def test_command_list_syntax_errors(conns: Callable[[], RawConn]) -> None:
    c = conns()
    for args in (("bad_arg",), ("filterby", "bad_arg"), ("filterby", "bad_arg", "bad_arg2"),
                 ("filterby", "pattern", "x", "y"), ("filterby", "pattern")):
        assert c.call("COMMAND", "LIST", *args) == err("ERR syntax error"), args
    assert c.call("COMMAND", "LIST", "FILTERBY", "PATTERN", "memory|us*") == [b"memory|usage"]
    assert c.call("COMMAND", "GETKEYS", "get") == err(
        "ERR wrong number of arguments for 'command|getkeys' command")


# --------------------------------------------------------------------------
# blocked clients woken by keys moved into place
# --------------------------------------------------------------------------


def blocked_call(c: RawConn, *args: str) -> threading.Thread:
    out: list[Any] = []

    def run() -> None:
        out.append(c.call(*args))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.out = out  # type: ignore[attr-defined]
    return t


def wait_blocked(c: RawConn, n: int) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        info = c.call("INFO", "clients").decode()
        if f"blocked_clients:{n}\r" in info:
            return
        time.sleep(0.01)
    raise AssertionError(f"not {n} blocked clients")


@pytest.mark.parametrize("how", ["rename", "move", "copy", "swapdb"])
def test_blocked_client_woken_by_a_list_moved_into_place(conns: Callable[[], RawConn],
                                                         how: str) -> None:
    c, waiter = conns(), conns()
    if how in ("move", "swapdb"):
        waiter.call("SELECT", "1")
    t = blocked_call(waiter, "BLPOP", "foo", "5")
    wait_blocked(c, 1)
    c.call("RPUSH", "bob" if how in ("rename", "copy") else "foo", "abc", "def", "hij")
    if how == "rename":
        assert c.call("RENAME", "bob", "foo") == "OK"
    elif how == "move":
        assert c.call("MOVE", "foo", "1") == 1
    elif how == "copy":
        assert c.call("COPY", "bob", "foo") == 1
    else:
        assert c.call("SWAPDB", "0", "1") == "OK"
    t.join(5)
    assert t.out == [[b"foo", b"abc"]]  # type: ignore[attr-defined]


def test_a_string_moved_into_place_leaves_the_client_blocked(conns: Callable[[], RawConn]
                                                             ) -> None:
    c, waiter = conns(), conns()
    t = blocked_call(waiter, "BLPOP", "foo", "1")
    wait_blocked(c, 1)
    c.call("SET", "bob", "x")
    c.call("RENAME", "bob", "foo")
    t.join(5)
    assert t.out == [None]  # type: ignore[attr-defined]


def test_a_millisecond_timeout_does_not_block_forever(conns: Callable[[], RawConn]) -> None:
    c = conns()
    for cmd in (("BLPOP", "nolist", "0.001"), ("BRPOP", "nolist", "0.0001"),
                ("BLMPOP", "0.001", "1", "nolist", "LEFT"),
                ("BLMOVE", "nolist", "dst", "LEFT", "LEFT", "0.001")):
        assert c.call(*cmd) is None, cmd


def test_client_unblock(conns: Callable[[], RawConn]) -> None:
    c, waiter = conns(), conns()
    wid = waiter.call("CLIENT", "ID")
    for reason, reply in ((), None), (("TIMEOUT",), None), (
            ("ERROR",), err("UNBLOCKED client unblocked via CLIENT UNBLOCK")):
        t = blocked_call(waiter, "BLPOP", "l", "0")
        wait_blocked(c, 1)
        assert c.call("CLIENT", "UNBLOCK", wid, *reason) == 1
        t.join(5)
        assert t.out == [reply]  # type: ignore[attr-defined]
    assert c.call("CLIENT", "UNBLOCK", wid) == 0
    assert c.call("CLIENT", "UNBLOCK", "asd") == err("ERR value is not an integer or out of range")
    assert c.call("CLIENT", "UNBLOCK", wid, "maybe") == err(
        "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
    c.call("RPUSH", "l", "x")
    assert waiter.call("BLPOP", "l", "0") == [b"l", b"x"]


# --------------------------------------------------------------------------
# WATCH of stale keys, EXEC over maxmemory
# --------------------------------------------------------------------------


def stale_key(c: RawConn, key: str, value: str = "foo") -> None:
    c.call("SET", key, value, "PX", "1")
    time.sleep(0.01)


def watch_then(c: RawConn, key: str, *between: tuple[str, ...]) -> Any:
    assert c.call("WATCH", key) == "OK"
    for cmd in between:
        c.call(*cmd)
    c.call("MULTI")
    c.call("PING")
    return c.call("EXEC")


def test_flushes_do_not_fail_exec_for_absent_or_stale_watched_keys(
        conns: Callable[[], RawConn]) -> None:
    c = conns()
    c.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    c.call("DEL", "x")
    assert watch_then(c, "x", ("FLUSHALL",)) == ["PONG"]
    assert watch_then(c, "x", ("FLUSHDB",)) == ["PONG"]
    stale_key(c, "x")
    assert watch_then(c, "x", ("FLUSHDB",)) == ["PONG"]
    c.call("SET", "x", "30")
    assert watch_then(c, "x", ("FLUSHDB",)) is None


def test_swapdb_and_stale_watched_keys(conns: Callable[[], RawConn]) -> None:
    c = conns()
    c.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    # an expired key replaced by no key
    c.call("SELECT", "1")
    stale_key(c, "x")
    assert watch_then(c, "x", ("SWAPDB", "0", "1")) == ["PONG"]
    # no key replaced by an expired one
    c.call("FLUSHALL")
    c.call("SELECT", "0")
    stale_key(c, "x")
    c.call("SELECT", "1")
    assert watch_then(c, "x", ("SWAPDB", "0", "1")) == ["PONG"]
    # an expired key replaced by another expired key
    c.call("FLUSHALL")
    stale_key(c, "x", "foo")
    c.call("SELECT", "0")
    stale_key(c, "x", "bar")
    c.call("SELECT", "1")
    assert watch_then(c, "x", ("SWAPDB", "0", "1")) == ["PONG"]
    # a live key replaced: EXEC fails
    c.call("FLUSHALL")
    c.call("SET", "x", "1")
    assert watch_then(c, "x", ("SWAPDB", "0", "1")) is None


def test_exec_with_a_denyoom_command_over_maxmemory_aborts(conns: Callable[[], RawConn]) -> None:
    c, admin = conns(), conns()
    c.call("SET", "x", "value")
    c.call("MULTI")
    c.call("GET", "x")
    admin.call("CONFIG", "SET", "maxmemory", "1")
    assert c.call("EXEC") == [b"value"]
    admin.call("CONFIG", "SET", "maxmemory", "0")
    c.call("MULTI")
    c.call("SET", "x", "1")
    admin.call("CONFIG", "SET", "maxmemory", "1")
    assert c.call("EXEC") == err("EXECABORT Transaction discarded because of: OOM command not "
                                 "allowed when used memory > 'maxmemory'.")
    admin.call("CONFIG", "SET", "maxmemory", "0")
    assert c.call("GET", "x") == b"value"
    assert c.call("EXEC") == err("ERR EXEC without MULTI")


# --------------------------------------------------------------------------
# CONFIG SET save and port
# --------------------------------------------------------------------------


def test_config_set_port_onto_a_taken_port(conns: Callable[[], RawConn]) -> None:
    c = conns()
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        before = c.call("CONFIG", "GET", "port", "maxmemory")
        assert c.call("CONFIG", "SET", "maxmemory", "10000001", "port", str(port)) == err(
            "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on "
            "this port. Check server logs.")
        assert c.call("CONFIG", "GET", "port", "maxmemory") == before
    assert c.call("PING") == "PONG"


def test_config_set_save_starts_background_saves(conns: Callable[[], RawConn],
                                                 ssrv: ServerProcess, tmp_path: Path) -> None:
    c = conns()
    if ssrv.kind == "redis":
        pytest.skip("inreplay's snapshots: the same rule, its own files")
    old_dir = c.call("CONFIG", "GET", "dir")[1]
    assert c.call("CONFIG", "SET", "dir", str(tmp_path)) == "OK"
    try:
        assert c.call("SAVE") == "OK"  # changes count from the last save
        assert len(list(tmp_path.glob("*.snap"))) == 1
        assert c.call("CONFIG", "SET", "save", "1 3 3600 1") == "OK"
        assert c.call("CONFIG", "GET", "save") == [b"save", b"1 3 3600 1"]
        c.call("SET", "a", "1")
        c.call("SET", "b", "2")
        time.sleep(1.5)
        assert len(list(tmp_path.glob("*.snap"))) == 1, "2 changes: no rule matched yet"
        c.call("SET", "c", "3")
        deadline = time.monotonic() + 5
        while len(list(tmp_path.glob("*.snap"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(list(tmp_path.glob("*.snap"))) == 2
        while b"rdb_changes_since_last_save:0\r" not in c.call("INFO", "persistence"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        assert c.call("CONFIG", "SET", "save", "", "dir", old_dir) == "OK"


def test_save_and_shutdown_are_refused_inside_multi(conns: Callable[[], RawConn]) -> None:
    c = conns()
    c.call("DEL", "foo")
    assert c.call("MULTI") == "OK"
    assert c.call("SET", "foo", "bar") == "QUEUED"
    for cmd in ("SAVE", "SHUTDOWN"):
        assert c.call(cmd) == err("ERR Command not allowed inside a transaction")
    assert c.call("EXEC") == err("EXECABORT Transaction discarded because of previous errors.")
    assert c.call("GET", "foo") is None


# --------------------------------------------------------------------------
# SORT
# --------------------------------------------------------------------------

SORT_SETUP = [
    ("RPUSH", "l", "3", "1", "2", "10", "-5", "1.5"), ("SADD", "s", "b", "a", "c", "d"),
    ("RPUSH", "w", "x", "y", "z"), ("SET", "w_x", "3"), ("SET", "w_y", "1"), ("SET", "w_z", "2"),
    ("HSET", "h_x", "f", "9"), ("HSET", "h_y", "f", "7"), ("SET", "str", "v"),
    ("RPUSH", "al", "banana", "apple", "Cherry", "apple"), ("RPUSH", "bad", "1", "x"),
]  # fmt: skip
SORT_CASES = [
    ("SORT", "l"), ("SORT", "l", "DESC"), ("SORT", "l", "LIMIT", "1", "2"),
    ("SORT", "l", "LIMIT", "-1", "2"), ("SORT", "l", "LIMIT", "10", "2"),
    ("SORT", "l", "LIMIT", "0", "-1"), ("SORT", "s", "ALPHA"), ("SORT", "s"),
    ("SORT", "al", "ALPHA"), ("SORT", "al", "ALPHA", "DESC"), ("SORT", "w", "BY", "w_*"),
    ("SORT", "w", "BY", "w_*", "GET", "#", "GET", "h_*->f"), ("SORT", "w", "BY", "nosort"),
    ("SORT", "w", "BY", "h_*->f"), ("SORT", "w", "BY", "h_*->f", "ALPHA"),
    ("SORT", "w", "BY", "w_*", "DESC", "LIMIT", "0", "2", "GET", "#"), ("SORT", "str"),
    ("SORT", "nokey"), ("SORT", "bad"), ("SORT", "l", "foo"), ("SORT", "l", "LIMIT", "x", "1"),
    ("SORT", "w", "GET"), ("SORT_RO", "l"), ("SORT_RO", "l", "STORE", "x"),
    ("SORT", "l", "STORE", "dst"), ("LRANGE", "dst", "0", "-1"),
    ("SORT", "s", "BY", "nosort", "STORE", "dst2"), ("LRANGE", "dst2", "0", "-1"),
    ("SORT", "w", "GET", "w_*", "GET", "missing_*", "STORE", "d3"), ("LRANGE", "d3", "0", "-1"),
    ("SORT", "nokey", "STORE", "dst"), ("EXISTS", "dst"), ("SORT", "l", "STORE", "l"),
    ("LRANGE", "l", "0", "-1"),
]  # fmt: skip


def test_sort_as_redis(both: tuple[RawConn, RawConn]) -> None:
    ref, ours = both
    for c in (ref, ours):
        c.call("FLUSHALL")
        for cmd in SORT_SETUP:
            c.call(*cmd)
    for cmd in SORT_CASES:
        assert ours.call(*cmd) == ref.call(*cmd), cmd


def test_sort_store_wakes_and_touches(conns: Callable[[], RawConn]) -> None:
    c, waiter = conns(), conns()
    t = blocked_call(waiter, "BLPOP", "foo", "5")
    wait_blocked(c, 1)
    c.call("LPUSH", "notfoo", "hello", "hola", "aguacate")
    assert c.call("SORT", "notfoo", "ALPHA", "STORE", "foo") == 3
    t.join(5)
    assert t.out == [[b"foo", b"aguacate"]]  # type: ignore[attr-defined]
    # an empty result deletes the destination, which a WATCH sees
    c.call("LPUSH", "foo", "bar")
    assert watch_then(c, "foo", ("SORT", "emptylist", "STORE", "foo")) is None
    assert c.call("EXISTS", "foo") == 0


# --------------------------------------------------------------------------
# DUMP / RESTORE
# --------------------------------------------------------------------------

DUMP_SETUP = [
    ("SET", "s", "hello"), ("SET", "i", "12345"), ("SET", "neg", "-7"), ("SET", "big", "x" * 1000),
    ("RPUSH", "l", "a", "b", "9223372036854775808", "x" * 70000), ("HSET", "h", "f", "v", "g", "w"),
    ("SADD", "st", "x", "y", "1"),
]  # fmt: skip


def test_dump_restore_round_trip(conns: Callable[[], RawConn]) -> None:
    c = conns()
    for cmd in DUMP_SETUP:
        c.call(*cmd)
    reads = {"s": "GET", "i": "GET", "neg": "GET", "big": "GET", "l": "LRANGE", "h": "HGETALL",
             "st": "SMEMBERS"}
    for key, read in reads.items():
        payload = c.call("DUMP", key)
        assert c.call("RESTORE", key + "2", "0", payload) == "OK"
        args = (0, -1) if read == "LRANGE" else ()
        a, b = c.call(read, key, *args), c.call(read, key + "2", *args)
        assert (sorted(a) if read in ("HGETALL", "SMEMBERS") else a) == \
            (sorted(b) if read in ("HGETALL", "SMEMBERS") else b), key
        assert c.call("RESTORE", key + "2", "0", payload) == err(
            "BUSYKEY Target key name already exists.")
        assert c.call("RESTORE", key + "2", "0", payload, "REPLACE") == "OK"
    payload = c.call("DUMP", "s")
    assert c.call("RESTORE", "t", "100000", payload) == "OK"
    assert 90000 < c.call("PTTL", "t") <= 100000
    assert c.call("RESTORE", "gone", "1", payload, "ABSTTL") == "OK"
    assert c.call("EXISTS", "gone") == 0
    assert c.call("RESTORE", "idle", "0", payload, "IDLETIME", "1000") == "OK"
    assert c.call("OBJECT", "IDLETIME", "idle") >= 1000
    assert c.call("DUMP", "nokey") is None
    broken = bytearray(payload)
    broken[1] ^= 1
    for args, reply in [
        (("s", "0", payload), "BUSYKEY Target key name already exists."),
        (("n", "0", "x"), "ERR DUMP payload version or checksum are wrong"),
        (("n", "0", bytes(broken)), "ERR DUMP payload version or checksum are wrong"),
        (("n", "-1", payload), "ERR Invalid TTL value, must be >= 0"),
        (("n", "x", payload), "ERR value is not an integer or out of range"),
        (("n", "0", payload, "foo"), "ERR syntax error"),
        (("n", "0", payload, "IDLETIME", "-1"), "ERR Invalid IDLETIME value, must be >= 0"),
        (("n", "0", payload, "FREQ", "300"), "ERR Invalid FREQ value, must be >= 0 and <= 255"),
        (("n", "0", payload, "IDLETIME", "1", "FREQ", "3"), "ERR syntax error"),
    ]:
        assert c.call("RESTORE", *args) == err(reply), args


def test_dump_payloads_cross_between_servers(both: tuple[RawConn, RawConn]) -> None:
    """inreplay's payloads restore into stock Redis; Redis's string payloads
    (integer and LZF encodings included) restore into inreplay."""
    ref, ours = both
    for c in (ref, ours):
        c.call("FLUSHALL")
        for cmd in DUMP_SETUP:
            c.call(*cmd)
    for key in ("s", "i", "neg", "big", "l", "h", "st"):
        assert ref.call("RESTORE", key + "x", "0", ours.call("DUMP", key)) == "OK", key
        assert ref.call("DUMP", key + "x") is not None
    assert ref.call("LRANGE", "lx", "0", "-1") == ours.call("LRANGE", "l", "0", "-1")
    assert sorted(ref.call("HGETALL", "hx")) == sorted(ours.call("HGETALL", "h"))
    for key in ("s", "i", "neg", "big"):
        assert ours.call("RESTORE", key + "y", "0", ref.call("DUMP", key)) == "OK", key
        assert ours.call("GET", key + "y") == ref.call("GET", key)




def test_restore_refuses_malformed_payloads_with_a_valid_checksum(
        conns: Callable[[], RawConn]) -> None:
    c = conns()
    assert crc64(b"123456789") == 0xE9C6D914C4B8D9CA
    c.call("SET", "k", "kept")
    for body in (
        b"\x00\xc3\x02\x05\x20\x00",  # an LZF back reference before any output
        b"\x00\xc3\x09\x05\x00a",  # LZF: shorter than its length says
        b"\x02\x02\x01a\x01a",  # a set with a duplicate member
        b"\x04\x01\x01f",  # a hash field without its value
        b"\x09\x00",  # a type neither server has
    ):
        assert c.call("RESTORE", "k", "0", dump_payload(body), "REPLACE") == err(
            "ERR Bad data format"), body
        assert c.call("GET", "k") == b"kept"
    assert c.call("RESTORE", "k", "0", dump_payload(b"\x00\x02hi"), "REPLACE") == "OK"
    assert c.call("GET", "k") == b"hi"
