"""Redis 7.0 functions (FUNCTION LOAD/LIST/DELETE/FLUSH/DUMP/RESTORE/STATS/KILL,
FCALL, FCALL_RO) against stock redis-server 7.0.15.

``test_same_reply_as_redis`` runs each case on stock Redis and on inreplay and
compares the exact reply bytes: the library shebang, redis.register_function
(both forms, flags), the load-time sandbox, Redis's error texts, FUNCTION
LIST's maps. The redis-py tests take the ``server`` fixture (both servers, the
same expectations): load, call, list, dump/restore across servers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import redis
from test_scripting import BUSY_FCALL, BYTECODE, run_busy, wait_done

if TYPE_CHECKING:
    from conftest import ServerPool, ServerProcess

Cmd = tuple[str | int | bytes, ...]


def lib(name: str, body: str) -> str:
    return f"#!lua name={name}\n{body}"


def fn(libname: str, fname: str, body: str) -> str:
    return lib(libname, f"redis.register_function('{fname}', function(KEYS, ARGV)\n {body} \nend)")


def ro_fn(libname: str, fname: str, body: str) -> str:
    return lib(libname, f"redis.register_function{{function_name='{fname}', "
                        f"callback=function(KEYS, ARGV)\n {body} \nend, flags={{'no-writes'}}}}")


def load(body: str) -> Cmd:
    """FUNCTION LOAD of library 'lib' with this body."""
    return ("FUNCTION", "LOAD", lib("lib", body))


REG = "redis.register_function"
SET_X = "return redis.call('set', 'x', '1')"


HELLO = fn("test", "test", "return 'hello'")
LOAD: Cmd = ("FUNCTION", "LOAD", HELLO)

# (setup commands, the command whose reply is compared); every case starts with
# no keys and no libraries.
CASES: list[tuple[list[Cmd], Cmd]] = [
    # a library is Lua source: bytecode after the shebang, or inside it, never loads
    ([], ("FUNCTION", "LOAD", b"#!lua name=bc\n" + BYTECODE)),
    ([("FUNCTION", "LOAD", "#!lua name=bc\nredis.register_function('bc', function(keys, args)"
       " local f, e = loadstring(args[1]); return {tostring(f), e} end)")],
     ("FCALL", "bc", 0, BYTECODE)),
    ([], LOAD),
    ([LOAD], ("FCALL", "test", 0)),
    ([LOAD], ("FCALL", "TEST", 0)),
    ([LOAD], LOAD),
    ([LOAD], ("FUNCTION", "LOAD", "REPLACE", fn("test", "test", "return 'hello1'"))),
    ([], ("FUNCTION", "LOAD", "foo", "bar", HELLO)),
    ([], ("FUNCTION", "LOAD", "REPLACE")),
    ([], ("FUNCTION", "LOAD")),
    ([], ("FUNCTION", "LOAD", fn("bad\\0format", "test", "return 1"))),
    ([], ("FUNCTION", "LOAD", fn("bad-name", "test", "return 1"))),
    ([], ("FUNCTION", "LOAD", "#!bad_engine name=test\nreturn 1")),
    ([], ("FUNCTION", "LOAD", "#! name=test\nreturn 1")),
    ([], ("FUNCTION", "LOAD", "#!LUA name=test\n" + REG + "('f', function() return 1 end)")),
    ([], ("FUNCTION", "LOAD", "#!lua name=test foo=bar\nreturn 1")),
    ([], ("FUNCTION", "LOAD", "#!lua\nreturn 1")),
    ([], ("FUNCTION", "LOAD", "#!lua name=a name=b\nreturn 1")),
    ([], ("FUNCTION", "LOAD", "#!lua name=\"foo\"\n" + REG + "('foo', function() return 1 end)")),
    ([], ("FUNCTION", "LOAD", "#!lua name=\"foo\nreturn 1")),
    ([], ("FUNCTION", "LOAD", "return 1")),
    ([], ("FUNCTION", "LOAD", "#!lua name=x")),
    ([], ("FUNCTION", "LOAD", fn("test", "test", "bad script"))),
    ([], ("FUNCTION", "LOAD", lib("lib", "return 1"))),
    ([], ("FUNCTION", "LOAD", lib("lib", "a = 1"))),
    ([], ("FUNCTION", "LOAD", lib("lib", "return math.random()"))),
    ([], ("FUNCTION", "LOAD", lib("lib", "return redis.call('ping')"))),
    ([], ("FUNCTION", "LOAD", lib("lib", "return redis.setresp(3)"))),
    ([], ("FUNCTION", "LOAD", lib("lib", "mt = getmetatable(_G)"))),
    ([], ("FUNCTION", "LOAD", lib("lib", "local x = string.len('a')"))),
    ([], ("FUNCTION", "LOAD", lib("lib", "error('boom')"))),
    ([], ("FUNCTION", "LOAD", lib("lib", "error({err='MYERR custom'})"))),
    ([], ("FUNCTION", "LOAD", lib("lib", "redis.log(redis.LOG_NOTICE, 'hi')\n"
                                         "redis.register_function('f', function() return 1 end)"))),
    ([], load(REG + "()")),
    ([], load(REG + "('f1')")),
    ([], load(REG + "('f1', function() end, {}, 'd', 'x')")),
    ([], load(REG + "(nil, function() return 1 end)")),
    ([], load(REG + "('a\\0b', function() return 1 end)")),
    ([], load(REG + "('', function() return 1 end)")),
    ([], load(REG + "('f1', 'not a function')")),
    ([], load(REG + "('f1', function() return 1 end)\n"
                                         "redis.register_function('f1', function() return 2 end)")),
    ([], load(REG + "{function_name=function() end, "
                                         "callback=function() end}")),
    ([], load(REG + "{function_name='f', callback='bad'}")),
    ([], load(REG + "{function_name='f', "
                                         "callback=function() end, description=function() end}")),
    ([], load(REG + "{function_name='f', "
                                         "callback=function() end, some_unknown='x'}")),
    ([], load(REG + "{callback=function() end}")),
    ([], load(REG + "{function_name='f'}")),
    ([], load(REG + "{function_name='f', "
                                         "callback=function() end, flags='bad'}")),
    ([], load(REG + "{function_name='f', "
                                         "callback=function() end, flags={'unknown'}}")),
    ([], load(REG + "{function_name='f', "
                                         "callback=function() end, flags={function() end}}")),
    ([], load(REG + "{function_name='f', "
                                         "callback=function() end, [1]='x'}")),
    ([], ("FUNCTION", "LOAD", lib("lib", "local a = 1 while true do a = a + 1 end"))),
    # FUNCTION LIST
    ([load(REG + "{function_name='f1', "
                                      "callback=function() return 1 end, description='some desc', "
                                      "flags={'no-writes', 'allow-oom', 'allow-stale', "
                                      "'no-cluster', 'allow-cross-slot-keys'}}")],
     ("FUNCTION", "LIST")),
    ([LOAD], ("FUNCTION", "LIST", "WITHCODE")),
    ([LOAD], ("FUNCTION", "LIST", "LIBRARYNAME", "te*")),
    ([LOAD], ("FUNCTION", "LIST", "LIBRARYNAME", "x*")),
    ([LOAD], ("FUNCTION", "LIST", "LIBRARYNAME")),
    ([LOAD], ("FUNCTION", "LIST", "bad_argument")),
    ([LOAD], ("FUNCTION", "LIST", "WITHCODE", "WITHCODE")),
    ([LOAD], ("FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "a", "LIBRARYNAME", "b")),
    ([LOAD], ("FUNCTION", "LIST", "X\r\n+INJECTED")),
    ([], ("FUNCTION", "LIST")),
    # DELETE, FLUSH, STATS, KILL, errors
    ([LOAD], ("FUNCTION", "DELETE", "test")),
    ([], ("FUNCTION", "DELETE", "test")),
    ([LOAD, ("FUNCTION", "DELETE", "test")], ("FCALL", "test", 0)),
    ([LOAD], ("FUNCTION", "FLUSH")),
    ([LOAD], ("FUNCTION", "FLUSH", "ASYNC")),
    ([LOAD], ("FUNCTION", "FLUSH", "bad_arg")),
    ([LOAD], ("FUNCTION", "FLUSH", "sync", "extra")),
    ([LOAD], ("FUNCTION", "STATS")),
    ([], ("FUNCTION", "KILL")),
    ([], ("FUNCTION", "bad_subcommand")),
    ([], ("FUNCTION", "DELETE")),
    ([], ("FUNCTION", "RESTORE", "a", "b", "c")),
    ([], ("FUNCTION", "RESTORE", "bad_payload")),
    ([], ("FUNCTION", "RESTORE", "x", "bad_policy")),
    # FCALL
    ([LOAD], ("FCALL", "test", "bad_arg")),
    ([LOAD], ("FCALL", "test", 10, "key1")),
    ([LOAD], ("FCALL", "test", -1, "key1")),
    ([], ("FCALL", "nope", 0)),
    ([("FUNCTION", "LOAD", fn("t", "f", "return {KEYS[1], ARGV[1], #KEYS, #ARGV}"))],
     ("FCALL", "f", 1, "k", "a", "b")),
    ([("FUNCTION", "LOAD", fn("t", "f", "return redis.call('set', KEYS[1], ARGV[1])"))],
     ("FCALL", "f", 1, "x", "foo")),
    ([("FUNCTION", "LOAD", fn("t", "f", SET_X))], ("FCALL_RO", "f", 0)),
    ([("FUNCTION", "LOAD", ro_fn("t", "f", SET_X))], ("FCALL_RO", "f", 0)),
    ([("FUNCTION", "LOAD", ro_fn("t", "f", SET_X))], ("FCALL", "f", 0)),
    ([("SET", "x", "1"), ("FUNCTION", "LOAD", ro_fn("t", "f", "return redis.call('get', 'x')"))],
     ("FCALL_RO", "f", 0)),
    ([("FUNCTION", "LOAD", fn("t", "f", "return redis.call('nosuchcommand')"))], ("FCALL", "f", 0)),
    ([("FUNCTION", "LOAD", fn("t", "f", "error('boom')"))], ("FCALL", "f", 0)),
    ([("FUNCTION", "LOAD", fn("t", "f", "return redis.register_function('g', function() end)"))],
     ("FCALL", "f", 0)),
    ([("FUNCTION", "LOAD", fn("t", "f", "mt = getmetatable(_G)"))], ("FCALL", "f", 0)),
    ([("FUNCTION", "LOAD", fn("t", "f", "return string.format('%s.%s', 1, redis.REDIS_VERSION)"))],
     ("FCALL", "f", 0)),
    ([("FUNCTION", "LOAD", lib("lib1", "local lib = redis\n"
                                       "lib.register_function('f1', function() "
                                       "lib.redis = redis end)\n"
                                       "lib.register_function('f2', function() "
                                       "lib.register_function('f3', function() end) end)"))],
     ("FCALL", "f1", 0)),
    ([("FUNCTION", "LOAD", lib("lib1", "local lib = redis\n"
                                       "lib.register_function('f2', function() "
                                       "lib.register_function('f3', function() end) end)"))],
     ("FCALL", "f2", 0)),
    ([("FUNCTION", "LOAD", lib("lib1", "local function ping() return redis.call('ping') end\n"
                                       "redis.register_function('f1', function() "
                                       "return ping() end)"))],
     ("FCALL", "f1", 0)),
    # collisions
    ([("FUNCTION", "LOAD", fn("lib1", "f1", "return 1"))],
     ("FUNCTION", "LOAD", fn("lib2", "F1", "return 2"))),
    ([("FUNCTION", "LOAD", fn("lib1", "f1", "return 1"))],
     ("FUNCTION", "LOAD", "REPLACE", fn("lib1", "f1", "return 2"))),
    # COMMAND's view
    ([], ("COMMAND", "GETKEYS", "FCALL", "test", 1, "x", "foo")),
    ([], ("COMMAND", "GETKEYS", "FCALL_RO", "test", 2, "x", "y", "foo")),
]  # fmt: skip


def _flush(srv: ServerProcess) -> None:
    with srv.raw() as c:
        assert c.call("FLUSHALL") == "OK"
        assert c.call("FUNCTION", "FLUSH") == "OK"


def _reply(srv: ServerProcess, setup: list[Cmd], cmd: Cmd) -> bytes:
    _flush(srv)
    with srv.raw() as c:
        for s in setup:
            c.call(*s)
        c.send(c.command(*cmd))
        return c.read_reply_bytes()


@pytest.fixture
def stock(server_pool: ServerPool) -> Iterator[ServerProcess]:
    """The session's stock redis-server, the reference."""
    yield server_pool.get("redis")


@pytest.mark.parametrize(("setup", "cmd"), CASES, ids=[repr(c)[:70] for _, c in CASES])
def test_same_reply_as_redis(
    setup: list[Cmd], cmd: Cmd, stock: ServerProcess, srv: ServerProcess
) -> None:
    want = _reply(stock, setup, cmd)
    got = _reply(srv, setup, cmd)
    assert got == want, f"{cmd!r}: redis {want[:300]!r}, inreplay {got[:300]!r}"


def test_resp3_list_and_stats(stock: ServerProcess, srv: ServerProcess) -> None:
    """FUNCTION LIST's maps and flag sets, FUNCTION STATS in RESP3."""
    code = lib("lib", "redis.register_function{function_name='f1', "
                      "callback=function() return 1 end, "
                      "flags={'no-writes', 'allow-oom'}}")
    replies = []
    for s in (stock, srv):
        _flush(s)
        with s.raw() as c:
            c.call("HELLO", 3)
            c.call("FUNCTION", "LOAD", code)
            out = b""
            for cmd in (("FUNCTION", "LIST"), ("FUNCTION", "STATS"), ("FCALL", "f1", 0)):
                c.send(c.command(*cmd))
                out += c.read_reply_bytes()
            replies.append(out)
    assert replies[1] == replies[0]


def test_dump_restore_between_servers(stock: ServerProcess, srv: ServerProcess) -> None:
    """A FUNCTION DUMP payload restores on the other server, both ways, with
    each policy; a long library (Redis compresses it with LZF) too."""
    long_body = "\n".join(f"local v{i} = 'padding padding padding {i}'" for i in range(50))
    libs = [fn("lib1", "f1", "return 1"), lib("lib2", long_body + "\nredis.register_function('f2', "
                                                                  "function() return v49 end)")]
    for a, b in ((stock, srv), (srv, stock)):
        _flush(a)
        _flush(b)
        ra, rb = a.client(), b.client()
        try:
            for code in libs:
                ra.function_load(code)
            payload = ra.function_dump()
            assert rb.function_restore(payload)
            assert rb.fcall("f1", 0) == 1
            assert rb.fcall("f2", 0) == b"padding padding padding 49"
            with pytest.raises(redis.ResponseError, match=r"Library lib[12] already exists"):
                rb.function_restore(payload)
            assert rb.function_restore(payload, "REPLACE")
            rb.function_delete("lib1")
            rb.function_load(fn("other", "f1", "return 2"))
            with pytest.raises(redis.ResponseError, match="Function f1 already exists"):
                rb.function_restore(payload, "REPLACE")
            assert rb.function_restore(payload, "FLUSH")
            assert sorted(x[b"library_name"] for x in _list(rb)) == [b"lib1", b"lib2"]
        finally:
            ra.close()
            rb.close()


def _list(r: redis.Redis) -> list[dict[bytes, object]]:
    return [dict(zip(x[::2], x[1::2], strict=True)) for x in r.function_list()]


@pytest.fixture
def r(server: ServerProcess) -> Iterator[redis.Redis]:
    server.client().function_flush()
    client = server.client()
    try:
        yield client
    finally:
        client.close()


def test_redis_py_load_call_list(r: redis.Redis) -> None:
    code = lib("mylib", "local function add1(a) return a + 1 end\n"
                        "redis.register_function('f1', function(keys, args) "
                        "return add1(tonumber(args[1])) end)\n"
                        "redis.register_function{function_name='getk', description='reads a key', "
                        "callback=function(keys) return redis.call('get', keys[1]) end, "
                        "flags={'no-writes'}}")
    assert r.function_load(code) == b"mylib"
    assert r.fcall("f1", 0, 41) == 42
    r.set("k", "v")
    assert r.fcall_ro("getk", 1, "k") == b"v"
    [entry] = _list(r)
    assert entry[b"library_name"] == b"mylib" and entry[b"engine"] == b"LUA"
    maps = [dict(zip(f[::2], f[1::2], strict=True)) for f in entry[b"functions"]]  # type: ignore[attr-defined]
    funcs = {m[b"name"]: m for m in maps}
    assert funcs[b"getk"][b"description"] == b"reads a key"
    assert funcs[b"getk"][b"flags"] == [b"no-writes"]
    assert funcs[b"f1"][b"description"] is None
    with pytest.raises(redis.ResponseError, match="Can not execute a script with write flag"):
        r.fcall_ro("f1", 0, 1)
    stats = r.function_stats()
    engines = stats[stats.index(b"engines") + 1]
    assert engines == [b"LUA", [b"libraries_count", 1, b"functions_count", 2]]
    mem = r.info("memory")
    assert (mem["number_of_functions"], mem["number_of_libraries"]) == (2, 1)
    assert mem["used_memory_vm_functions"] > 0
    assert r.function_delete("mylib")
    assert r.function_list() == []


def test_functions_survive_flushall_and_script_flush(r: redis.Redis) -> None:
    r.function_load(fn("test", "test", "return redis.call('set', 'x', '1')"))
    r.flushall()
    r.script_flush()
    assert r.fcall("test", 0) == b"OK"
    assert r.get("x") == b"1"


# ---- persistence: snapshots and the RDB image of a full sync ----------------

LIBS = [
    fn("lib1", "f1", "return 'one'"),
    lib("lib2", "redis.register_function{function_name='f2', description='d', flags={'no-writes'}, "
                "callback=function(keys) return redis.call('get', keys[1]) end}"),
]


def _start_inreplay(server_factory: Callable[..., ServerProcess], *flags: str) -> ServerProcess:
    return server_factory("inreplay", *flags)


def test_snapshot_keeps_libraries(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    """SAVE writes the libraries (record FUNC); a server restored from it has them,
    with their flags and descriptions; BGSAVE's child writes them too."""
    d = tmp_path / "snap"
    d.mkdir()
    a = _start_inreplay(server_factory, "--dir", str(d))
    ra = a.client()
    for code in LIBS:
        ra.function_load(code)
    ra.set("k", "v")
    assert ra.save()
    listing = ra.function_list(withcode=True)
    ra.close()
    assert a.stop() == 0, a.log_tail()
    b = _start_inreplay(server_factory, "--restore", str(d), "--dir", str(d))
    rb = b.client()
    try:
        assert rb.function_list(withcode=True) == listing
        assert rb.fcall("f1", 0) == b"one"
        assert rb.fcall_ro("f2", 1, "k") == b"v"
        # DEBUG RELOAD goes through a snapshot: the libraries are the snapshot's
        rb.function_load(fn("lib3", "f3", "return 3"))
        assert rb.execute_command("DEBUG", "RELOAD")
        assert rb.fcall("f3", 0) == 3
        rb.function_delete("lib3")
        rb.bgsave()
        deadline = time.monotonic() + 20
        while rb.info("persistence")["rdb_bgsave_in_progress"] and time.monotonic() < deadline:
            time.sleep(0.02)
        rb.function_flush()
        assert rb.execute_command("DEBUG", "RELOAD", "NOSAVE")
        assert sorted(x[b"library_name"] for x in _list(rb)) == [b"lib1", b"lib2"]
    finally:
        rb.close()


def test_replica_gets_libraries(
    server_factory: Callable[..., ServerProcess], stock: ServerProcess
) -> None:
    """A stock redis-server replica of inreplay loads the libraries from the
    RDB image, then FUNCTION LOAD/DELETE/FLUSH/RESTORE and FCALL's writes from
    the stream."""
    a = _start_inreplay(server_factory)
    ra = a.client()
    rep = server_factory("redis")
    rr = rep.client()
    try:
        ra.function_load(LIBS[0])
        rr.replicaof(a.host, a.port)

        def until(pred: Callable[[], bool]) -> None:
            deadline = time.monotonic() + 20
            while not pred():
                assert time.monotonic() < deadline, "replica did not catch up:\n" + rep.log_tail()
                time.sleep(0.05)

        until(lambda: rr.function_list() != []
              and rr.info("replication")["master_link_status"] == "up")
        ra.function_load(LIBS[1])
        until(lambda: len(rr.function_list()) == 2)
        assert rr.fcall_ro("f2", 1, "nokey") is None  # no-writes: runs on a read-only replica
        ra.function_load(fn("w", "w", "return redis.call('set', KEYS[1], ARGV[1])"))
        ra.fcall("w", 1, "x", "7")
        until(lambda: rr.get("x") == b"7")
        payload = ra.function_dump()
        ra.function_flush()
        until(lambda: rr.function_list() == [])
        ra.function_restore(payload)
        until(lambda: len(rr.function_list()) == 3)
        ra.function_delete("w")
        until(lambda: len(rr.function_list()) == 2)
    finally:
        rr.close()
        ra.close()


def test_help_and_command_info(stock: ServerProcess, srv: ServerProcess) -> None:
    """FUNCTION HELP as Redis's; COMMAND INFO gives FCALL, FCALL_RO and FUNCTION
    (with its subcommands) Redis's arity, flags, key positions and key specs."""
    with stock.raw() as a, srv.raw() as b:
        assert b.call("FUNCTION", "HELP") == a.call("FUNCTION", "HELP")
        for name in ("fcall", "fcall_ro", "function"):
            want, got = a.call("COMMAND", "INFO", name)[0], b.call("COMMAND", "INFO", name)[0]
            assert got[:6] == want[:6], name  # name, arity, flags, first, last, step
            # key specs (their free-text notes are not kept, as for EVAL)
            assert got[8] == [_without_notes(k) for k in want[8]], name
            assert sorted(s[:6] for s in got[9]) == sorted(s[:6] for s in want[9]), name


def _without_notes(spec: list[object]) -> list[object]:
    i = spec.index(b"notes") if b"notes" in spec else -1
    return spec if i < 0 else spec[:i] + spec[i + 2 :]


def test_busy_function_stats_and_kill(server: ServerProcess) -> None:
    """A function past busy-reply-threshold is busy as in Redis: BUSY (FUNCTION
    KILL's text) to others, FUNCTION STATS names it and its command, SCRIPT
    KILL refuses it, FUNCTION KILL stops it."""
    r, other = server.client(), server.client()
    try:
        other.function_flush()
        other.function_load(fn("busy", "spin", "local a = 1 while true do a = a + 1 end"))
        other.config_set("busy-reply-threshold", 50)
        if server.kind == "dpdk":  # stopped at the limit instead (see test_scripting)
            with pytest.raises(redis.ResponseError, match="ran longer than lua-time-limit"):
                r.fcall("spin", 0)
            return
        out = run_busy(r, other, "FCALL", "spin", 0)
        with pytest.raises(redis.ResponseError) as e:
            other.get("k")
        assert str(e.value) == BUSY_FCALL
        with pytest.raises(redis.ResponseError) as e:
            other.script_kill()
        assert str(e.value) == BUSY_FCALL
        stats = other.function_stats()
        running = stats[stats.index(b"running_script") + 1]
        assert running[:4] == [b"name", b"spin", b"command", [b"FCALL", b"spin", b"0"]]
        assert running[4] == b"duration_ms" and running[5] >= 50
        assert other.function_kill()
        err = wait_done(out)
        assert isinstance(err, redis.ResponseError)
        assert str(err).startswith("Script killed by user with SCRIPT KILL...")
        assert other.ping()
        with pytest.raises(redis.ResponseError, match=r"^NOTBUSY No scripts in execution"):
            other.function_kill()
    finally:
        other.config_set("busy-reply-threshold", 5000)
        other.function_flush()
        r.close()
        other.close()


def test_restore_of_a_library_that_never_returns(srv: ServerProcess) -> None:
    """A payload whose library loops at load time (crafted: LOAD would have
    refused it) is refused after LOAD's 500 ms instead of hanging the server."""
    code = lib("evil", "while true do end")
    body = bytes([245]) + _rdb_len(len(code)) + code.encode()
    body += (10).to_bytes(2, "little")
    payload = body + _crc64(body).to_bytes(8, "little")
    r = srv.client()
    try:
        t0 = time.monotonic()
        with pytest.raises(redis.ResponseError, match="FUNCTION LOAD timeout"):
            r.function_restore(payload)
        assert time.monotonic() - t0 < 5
        assert r.ping()
    finally:
        r.close()


def _rdb_len(n: int) -> bytes:
    assert n < 16384
    return bytes([n]) if n < 64 else bytes([0x40 | (n >> 8), n & 0xFF])


def _crc64(data: bytes) -> int:
    """Redis's CRC-64 (Jones polynomial, reflected)."""
    poly = 0x95AC9329AC4BC9B5
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
    return crc
