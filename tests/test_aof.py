"""The append-only file (Redis 7.0's multi-part AOF), against stock redis-server 7.0.15:
the same commands go to both servers, the AOF is loaded back (DEBUG LOADAOF, a restart
with appendonly yes, after BGREWRITEAOF), and both datasets must read back the same as
before, and the same as each other. Every type is covered, streams with consumer groups,
pending entries and consumers without any; several databases; TTLs; transactions.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import RespError, ServerProcess

Start = Callable[..., ServerProcess]


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Start]:
    """start(kind, name, *args): a server whose data directory is tmp_path/name (the same
    name again: a restart on the same files). Stopped at the end."""
    live: list[ServerProcess] = []

    def go(kind: str, name: str, *args: str) -> ServerProcess:
        d = tmp_path / name
        d.mkdir(exist_ok=True)
        extra = args if kind == "redis" else ("--dir", str(d), *args)
        srv = ServerProcess(kind, d, tuple(extra))
        live.append(srv)
        return srv

    yield go
    for srv in live:
        if srv.alive():
            srv.stop()


def aof_on(c: Any) -> None:
    """CONFIG SET appendonly yes, then wait for its rewrite (as the Tcl suite does)."""
    assert c.call("CONFIG", "SET", "appendonly", "yes") == "OK"
    wait_rewrite(c)


def persistence(c: Any) -> dict[str, str]:
    text = c.call("INFO", "persistence").decode()
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def wait_rewrite(c: Any) -> None:
    deadline = time.monotonic() + 20
    while persistence(c)["aof_rewrite_in_progress"] == "1":
        assert time.monotonic() < deadline, "the AOF rewrite did not finish"
        time.sleep(0.02)


POPULATE: list[tuple[str, ...]] = [
    ("SET", "str", "hello"), ("SET", "int", "12345"), ("INCRBYFLOAT", "float", "1.5"),
    ("SET", "ttl", "v", "EX", "100000"), ("APPEND", "str", " world"),
    ("SETRANGE", "str", "1", "E"), ("SETBIT", "bits", "77", "1"),
    ("RPUSH", "list", "a", "b", "c", "d"), ("LPUSH", "list", "z"), ("LPOP", "list"),
    ("LINSERT", "list", "BEFORE", "c", "bb"),
    ("SADD", "set", "x", "y", "z", "1"), ("SREM", "set", "y"), ("SADD", "iset", "1", "2", "3"),
    ("ZADD", "zset", "1", "a", "2.5", "b", "-3", "c"), ("ZINCRBY", "zset", "10", "a"),
    ("HSET", "hash", "f1", "v1", "f2", "v2"), ("HINCRBY", "hash", "n", "7"), ("HDEL", "hash", "f2"),
    ("PFADD", "hll", "a", "b", "c"),
    ("EXPIRE", "list", "100000"), ("PEXPIREAT", "hash", "99999999999999"),
    ("XADD", "st", "1-1", "a", "1"), ("XADD", "st", "2-1", "b", "2"),
    ("XADD", "st", "3-1", "c", "3"), ("XADD", "st", "4-1", "d", "4"),
    ("XDEL", "st", "2-1"),
    ("XGROUP", "CREATE", "st", "g1", "0"), ("XGROUP", "CREATE", "st", "g2", "$"),
    ("XREADGROUP", "GROUP", "g1", "alice", "COUNT", "2", "STREAMS", "st", ">"),
    ("XACK", "st", "g1", "1-1"), ("XGROUP", "CREATECONSUMER", "st", "g1", "bob"),
    ("XCLAIM", "st", "g1", "bob", "0", "3-1"),
    ("XADD", "st", "MAXLEN", "3", "5-1", "e", "5"),
    ("XADD", "empty", "MAXLEN", "0", "7-1", "x", "y"), ("XSETID", "empty", "9-9"),
    ("MULTI",), ("SET", "tx1", "a"), ("INCR", "tx2"), ("EXEC",),
    ("SELECT", "5"), ("SET", "db5", "five"), ("RPUSH", "l5", "1", "2"), ("SELECT", "9"),
    ("SET", "gone", "x"), ("DEL", "gone"), ("SET", "expired", "x", "PX", "1"),
    ("RENAME", "str", "str2"),
]


def run(c: Any, cmds: list[tuple[str, ...]]) -> list[Any]:
    out = [c.call(*cmd) for cmd in cmds]
    time.sleep(0.01)  # "expired" expires
    return out


def state(c: Any) -> dict[str, Any]:
    """What the dataset reads back as, without times that move."""
    out: dict[str, Any] = {}
    for db in (0, 5, 9):
        c.call("SELECT", str(db))
        for k in sorted(c.call("KEYS", "*")):
            t = c.call("TYPE", k)
            if t == "none":
                continue
            ttl = c.call("PTTL", k)
            v: Any
            if t == "string":
                v = c.call("GET", k)
            elif t == "list":
                v = c.call("LRANGE", k, "0", "-1")
            elif t == "set":
                v = sorted(c.call("SMEMBERS", k))
            elif t == "zset":
                v = c.call("ZRANGE", k, "0", "-1", "WITHSCORES")
            elif t == "hash":
                v = sorted(c.call("HGETALL", k))
            else:
                info = c.call("XINFO", "STREAM", k)
                groups = c.call("XINFO", "GROUPS", k)
                pending = [c.call("XPENDING", k, g[1]) for g in groups]
                consumers = [[x[1] for x in c.call("XINFO", "CONSUMERS", k, g[1])]
                             for g in groups]
                v = (c.call("XRANGE", k, "-", "+"), info, groups, pending, consumers)
            out[f"{db}/{k.decode()}"] = (t, ttl > 0 if ttl != -1 else -1, v)
    c.call("SELECT", "9")
    return out


def pair_started(start: Start, *args: str) -> tuple[ServerProcess, ServerProcess]:
    return start("redis", "redis", *args), start("inreplay", "inreplay",
                                                 *(["--appendonly"] if args else []))


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_debug_loadaof_keeps_every_type(start: Start, preamble: str) -> None:
    ref, ours = pair_started(start)
    states = []
    for srv in (ref, ours):
        with srv.raw() as c:
            c.call("SELECT", "9")
            assert c.call("CONFIG", "SET", "aof-use-rdb-preamble", preamble) == "OK"
            aof_on(c)
            replies = run(c, POPULATE)
            before = state(c)
            assert c.call("DEBUG", "LOADAOF") == "OK"
            c.call("SELECT", "9")
            after = state(c)
            assert after == before, srv.kind
            # the whole dataset in the base (an RDB image, or commands), then loaded
            assert c.call("BGREWRITEAOF") == "Background append only file rewriting started"
            wait_rewrite(c)
            assert c.call("DEBUG", "LOADAOF") == "OK"
            c.call("SELECT", "9")
            assert state(c) == before, srv.kind
            # and it goes on appending after the load
            c.call("XADD", "st", "6-1", "f", "6")
            assert c.call("DEBUG", "LOADAOF") == "OK"
            c.call("SELECT", "9")
            states.append((replies, state(c)))
    assert states[1] == states[0]


def test_restart_with_appendonly_reloads(start: Start) -> None:
    ref, ours = pair_started(start)
    states = []
    for srv in (ref, ours):
        with srv.raw() as c:
            c.call("SELECT", "9")
            aof_on(c)
            run(c, POPULATE)
            c.call("SELECT", "9")
            states.append(state(c))
        assert srv.stop() == 0
    assert states[1] == states[0]
    ref2, ours2 = pair_started(start, "--appendonly", "yes")
    for srv, want in zip((ref2, ours2), states, strict=True):
        with srv.raw() as c:
            c.call("SELECT", "9")
            assert state(c) == want, srv.kind
            assert persistence(c)["aof_enabled"] == "1"


def files(d: Path) -> list[str]:
    return sorted(p.name for p in (d / "appendonlydir").iterdir())


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_bgrewriteaof_then_restart(start: Start, tmp_path: Path, preamble: str) -> None:
    ref, ours = pair_started(start)
    states = []
    for srv in (ref, ours):
        with srv.raw() as c:
            c.call("SELECT", "9")
            assert c.call("CONFIG", "SET", "aof-use-rdb-preamble", preamble) == "OK"
            c.call("FUNCTION", "LOAD",
                   "#!lua name=lib\nredis.register_function('f', function() return 1 end)")
            aof_on(c)
            run(c, POPULATE[:30])
            assert c.call("BGREWRITEAOF") == "Background append only file rewriting started"
            wait_rewrite(c)
            run(c, POPULATE[30:])
            c.call("SELECT", "9")
            states.append(state(c))
            p = persistence(c)
            assert p["aof_last_bgrewrite_status"] == "ok"
            assert p["aof_rewrite_in_progress"] == "0"
        assert srv.stop() == 0
    assert states[1] == states[0]
    # the same files: base 2 (an RDB image, or commands), incr 2, the manifest naming them
    base = f"appendonly.aof.2.base.{'rdb' if preamble == 'yes' else 'aof'}"
    want = [base, "appendonly.aof.2.incr.aof", "appendonly.aof.manifest"]
    for name in ("redis", "inreplay"):
        assert files(tmp_path / name) == want, name
        manifest = (tmp_path / name / "appendonlydir" / "appendonly.aof.manifest").read_text()
        assert manifest.splitlines() == [f"file {base} seq 2 type b",
                                         "file appendonly.aof.2.incr.aof seq 2 type i"], name
    ref2, ours2 = pair_started(start, "--appendonly", "yes")
    for srv, want_state in zip((ref2, ours2), states, strict=True):
        with srv.raw() as c:
            c.call("SELECT", "9")
            assert state(c) == want_state, srv.kind
            assert c.call("FCALL", "f", "0") == 1


def test_appendfsync_always_survives_a_kill(start: Start) -> None:
    ref, ours = pair_started(start)
    for srv in (ref, ours):
        with srv.raw() as c:
            aof_on(c)
            assert c.call("CONFIG", "SET", "appendfsync", "always") == "OK"
            assert c.call("CONFIG", "GET", "appendfsync") == [b"appendfsync", b"always"]
            for i in range(50):
                c.call("RPUSH", "l", str(i))
        os.killpg(srv.proc.pid, signal.SIGKILL)
        srv.proc.wait()
    ref2, ours2 = pair_started(start, "--appendonly", "yes")
    for srv in (ref2, ours2):
        with srv.raw() as c:
            assert c.call("LRANGE", "l", "0", "-1") == [str(i).encode() for i in range(50)]


TAILS = [b"*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$3\r\nxy",  # a command cut short
         b"*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n2\r\n"]  # no EXEC


@pytest.mark.parametrize("tail", TAILS, ids=["command", "transaction"])
def test_truncated_tail_is_cut_as_redis(start: Start, tmp_path: Path, tail: bytes) -> None:
    ref, ours = pair_started(start)
    for srv in (ref, ours):
        with srv.raw() as c:
            aof_on(c)
            c.call("SET", "a", "1")
        assert srv.stop() == 0
    sizes = []
    for name in ("redis", "inreplay"):
        incr = tmp_path / name / "appendonlydir" / "appendonly.aof.1.incr.aof"
        sizes.append(incr.stat().st_size)
        with open(incr, "ab") as f:
            f.write(tail)
    ref2, ours2 = pair_started(start, "--appendonly", "yes")
    for name, size in zip(("redis", "inreplay"), sizes, strict=True):  # cut where it began
        incr = tmp_path / name / "appendonlydir" / "appendonly.aof.1.incr.aof"
        assert incr.stat().st_size == size, name
    for srv in (ref2, ours2):
        with srv.raw() as c:
            assert c.call("MGET", "a", "b") == [b"1", None]
            c.call("SET", "c", "3")  # appended after the cut, not after the partial command
            assert c.call("DEBUG", "LOADAOF") == "OK"
            assert c.call("MGET", "a", "b", "c") == [b"1", None, b"3"]


def test_bad_aof_refuses_to_start(start: Start, tmp_path: Path) -> None:
    srv = start("inreplay", "bad")
    with srv.raw() as c:
        aof_on(c)
        c.call("SET", "a", "1")
    assert srv.stop() == 0
    with open(tmp_path / "bad" / "appendonlydir" / "appendonly.aof.1.incr.aof", "ab") as f:
        f.write(b"+junk\r\n")
    with pytest.raises(RuntimeError, match="Bad file format reading the append only file"):
        start("inreplay", "bad", "--appendonly")
    (tmp_path / "bad" / "appendonlydir" / "appendonly.aof.manifest").write_text("nonsense\n")
    with pytest.raises(RuntimeError, match="Invalid AOF manifest file format"):
        start("inreplay", "bad", "--appendonly")


def test_loadaof_without_an_aof_is_an_error_not_an_exit(start: Start) -> None:
    srv = start("inreplay", "none")
    with srv.raw() as c:
        c.call("SET", "k", "v")
        got = c.call("DEBUG", "LOADAOF")
        assert isinstance(got, RespError) and b"no AOF manifest" in got.message
        assert c.call("GET", "k") == b"v"  # the dataset is left alone
        c.call("CONFIG", "SET", "appendonly", "yes")
        wait_rewrite(c)
        assert c.call("CONFIG", "SET", "appendonly", "no") == "OK"
        assert persistence(c)["aof_enabled"] == "0"
        c.call("SET", "k", "after")  # not in the AOF: it is off
        assert c.call("DEBUG", "LOADAOF") == "OK"
        assert c.call("GET", "k") == b"v"


def test_info_and_config_as_redis(start: Start) -> None:
    ref, ours = pair_started(start)
    names = ("appendonly", "appendfsync", "appendfilename", "appenddirname",
             "aof-use-rdb-preamble", "aof-load-truncated", "aof-timestamp-enabled",
             "auto-aof-rewrite-percentage", "auto-aof-rewrite-min-size")
    got = []
    for srv in (ref, ours):
        with srv.raw() as c:
            got.append([c.call("CONFIG", "GET", n) for n in names] +
                       [c.call("CONFIG", "SET", "appendfilename", "x"),
                        c.call("CONFIG", "SET", "appendfsync", "sometimes")])
            p = persistence(c)
            assert {k: p[k] for k in ("aof_enabled", "aof_rewrite_in_progress",
                                      "aof_last_bgrewrite_status", "aof_last_write_status")} == {
                "aof_enabled": "0", "aof_rewrite_in_progress": "0",
                "aof_last_bgrewrite_status": "ok", "aof_last_write_status": "ok"}
    assert got[1] == got[0]


def test_replay_tables_are_not_in_the_aof(start: Start) -> None:
    srv = start("inreplay", "tables")
    with srv.raw() as c:
        aof_on(c)
        assert c.call("REPLAY.CREATE", "t", "CAPACITY", "8") == "OK"
        c.call("SET", "k", "v")
        assert c.call("DEBUG", "LOADAOF") == "OK"
        assert c.call("GET", "k") == b"v"
        assert c.call("REPLAY.INFO", "t")  # the table is untouched by the load


def incr_commands(path: Path) -> list[str]:
    """The commands of an incr file, each as its words."""
    data, out, i = path.read_bytes(), [], 0
    while i < len(data):
        end = data.index(b"\r\n", i)
        n, i, words = int(data[i + 1:end]), end + 2, []
        for _ in range(n):
            end = data.index(b"\r\n", i)
            ln = int(data[i + 1:end])
            words.append(data[end + 2:end + 2 + ln].decode())
            i = end + 4 + ln
        out.append(" ".join(words))
    return out


def test_replicas_and_the_aof_take_the_same_stream(start: Start, tmp_path: Path) -> None:
    from test_replication import attach, read_stream

    srv = start("inreplay", "repl")
    r = srv.client()
    with srv.raw() as c:
        aof_on(c)
        before = r.info("replication")["master_repl_offset"]
        c.call("SET", "a", "1")  # the AOF's alone: no replica, no replication offset
        assert r.info("replication")["master_repl_offset"] == before
        rc, _ = attach(srv)
        c.call("SELECT", "3")
        c.call("SET", "b", "2")
        c.call("SELECT", "0")
        c.call("INCRBYFLOAT", "f", "1.5")
        assert read_stream(rc, 4) == ["SELECT 3", "SET b 2", "SELECT 0", "SET f 1.5 KEEPTTL"]
        rc.close()
        assert incr_commands(tmp_path / "repl" / "appendonlydir" / "appendonly.aof.1.incr.aof") \
            == ["SELECT 0", "SET a 1", "SELECT 3", "SET b 2", "SELECT 0", "SET f 1.5 KEEPTTL"]
        assert c.call("DEBUG", "LOADAOF") == "OK"
        assert c.call("MGET", "a", "f") == [b"1", b"1.5"]
        c.call("SELECT", "3")
        assert c.call("GET", "b") == b"2"
    r.close()


def test_rewrite_while_one_runs_is_refused(start: Start) -> None:
    srv = start("inreplay", "busy")
    with srv.raw() as c:
        c.call("EVAL", "for i = 1, 200000 do redis.call('SET', 'k' .. i, i) end", "0")
        assert c.call("BGREWRITEAOF") == "Background append only file rewriting started"
        # refused while the child runs (the first may be done already on a fast machine)
        assert c.call("BGREWRITEAOF") in (
            RespError(b"ERR Background append only file rewriting already in progress"),
            "Background append only file rewriting started")
        wait_rewrite(c)
        assert persistence(c)["aof_last_bgrewrite_status"] == "ok"
        aof_on(c)
        assert c.call("DEBUG", "LOADAOF") == "OK"
        assert c.call("DBSIZE") == 200000


def test_write_errors_refuse_writes_with_misconf(start: Start, tmp_path: Path) -> None:
    """A full disk (the incr file is /dev/full): writes get Redis's -MISCONF, reads go on,
    and turning the AOF off lets writes in again."""
    srv = start("inreplay", "full")
    with srv.raw() as c:
        aof_on(c)
    assert srv.stop() == 0
    incr = tmp_path / "full" / "appendonlydir" / "appendonly.aof.1.incr.aof"
    incr.unlink()
    incr.symlink_to("/dev/full")
    srv = start("inreplay", "full", "--appendonly")
    with srv.raw() as c:
        assert c.call("SET", "a", "1") == "OK"  # run, but its AOF write failed
        misconf = RespError(b"MISCONF Errors writing to the AOF file: No space left on device")
        assert c.call("SET", "b", "2") == misconf
        assert c.call("PING") == misconf
        assert c.call("GET", "a") == b"1"
        assert persistence(c)["aof_last_write_status"] == "err"
        assert c.call("CONFIG", "SET", "appendonly", "no") == "OK"
        assert c.call("SET", "b", "2") == "OK"
        assert persistence(c)["aof_last_write_status"] == "ok"


def test_appendonly_yes_without_a_usable_dir_is_refused_as_redis(start: Start,
                                                                 tmp_path: Path) -> None:
    srv = start("inreplay", "nodir")
    (tmp_path / "nodir" / "appendonlydir").write_text("a file where the directory goes")
    with srv.raw() as c:
        assert c.call("CONFIG", "SET", "appendonly", "yes") == RespError(
            b"ERR CONFIG SET failed (possibly related to argument 'appendonly') - Unable to "
            b"turn on AOF. Check server logs.")
        assert c.call("CONFIG", "GET", "appendonly") == [b"appendonly", b"no"]
        assert persistence(c)["aof_enabled"] == "0"
