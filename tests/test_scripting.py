"""Lua scripting (EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT) against stock Redis.

``test_same_reply_as_redis`` runs each script on stock redis-server 7.0.15 and on
inreplay (each stack) and compares the exact reply bytes: the RESP2/RESP3 <-> Lua
conversions, Redis's error texts (with the script's SHA1 and line), the sandbox
and the commands refused inside scripts. The other tests take the ``server``
fixture (both servers, same expectations) or ``replay_server`` (both REPLAY hosts) for REPLAY.*
called from scripts.
"""

from __future__ import annotations

import hashlib
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
import redis
from test_replication import attach, expect_stream

if TYPE_CHECKING:
    from conftest import RawConn, ServerPool, ServerProcess

Raw = Callable[[], "RawConn"]
Cmd = tuple[str | int | bytes, ...]

SHA_RETURN_1 = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"  # SHA1 of "return 1"
BIG = "v" * 100_000  # a value replies send by reference (>= IR_REF_MIN)


def lua_bytecode() -> bytes:
    """A valid Lua 5.1 chunk for x86-64 (what luac5.1 writes for "return 42"):
    a server on Debian's liblua5.1 runs it as a script body; Redis's Lua has no
    loader for bytecode and refuses it as a syntax error."""

    def i32(x: int) -> bytes:
        return struct.pack("<i", x)

    header = b"\x1bLua\x51\x00\x01\x04\x08\x04\x08\x00"
    code = [1, 30 | (2 << 23), 30 | (1 << 23)]  # LOADK 0 K0; RETURN 0 2; RETURN 0 1
    return (header + struct.pack("<Q", 0) + i32(0) + i32(0) + bytes([0, 0, 2, 2])
            + i32(len(code)) + b"".join(struct.pack("<I", c) for c in code)
            + i32(1) + b"\x03" + struct.pack("<d", 42.0)  # K0 = 42
            + i32(0) + i32(0) + i32(0) + i32(0))


BYTECODE = lua_bytecode()

# (setup commands, the command whose reply is compared). Every case starts on an
# empty server; the reply bytes of the last command must be equal.
CASES: list[tuple[list[Cmd], Cmd]] = [
    # Lua -> RESP: numbers truncate, arrays stop at the first nil, booleans
    ([], ("EVAL", "return 1", 0)),
    ([], ("EVAL", "return 3.99", 0)),
    ([], ("EVAL", "return -3.99", 0)),
    ([], ("EVAL", "return 'hello'", 0)),
    ([], ("EVAL", "return true", 0)),
    ([], ("EVAL", "return false", 0)),
    ([], ("EVAL", "return nil", 0)),
    ([], ("EVAL", "return {1, 2, 3, 'ciao', {1, 2}}", 0)),
    ([], ("EVAL", "return {1, 2, nil, 4}", 0)),
    ([], ("EVAL", "return {}", 0)),
    ([], ("EVAL", "return {1, true, false, 'x'}", 0)),
    ([], ("EVAL", "return {a=1, b=2}", 0)),
    ([], ("EVAL", "return {err='My Error'}", 0)),
    ([], ("EVAL", "return {ok='FINE'}", 0)),
    ([], ("EVAL", "return redis.error_reply('My Error')", 0)),
    ([], ("EVAL", "return redis.error_reply('-WRONG code')", 0)),
    ([], ("EVAL", "return redis.error_reply('nospace')", 0)),
    ([], ("EVAL", "return redis.status_reply('FINE')", 0)),
    ([], ("EVAL", "return redis.status_reply(1)", 0)),
    ([], ("EVAL", "return redis.sha1hex('Pizza & Mandolino')", 0)),
    ([], ("EVAL", "return redis.sha1hex('')", 0)),
    ([], ("EVAL", "return redis.sha1hex()", 0)),
    ([], ("EVAL", "return {KEYS[1], KEYS[2], ARGV[1], ARGV[2], #KEYS, #ARGV}",
          2, "a", "b", "c", "d")),
    ([], ("EVAL", "return #ARGV", 0, "x", "y", "z")),
    # RESP -> Lua: integers, bulks, nil bulk -> false, status -> {ok=}, error -> {err=}
    ([("SET", "k", "v")], ("EVAL", "return redis.call('get', KEYS[1])", 1, "k")),
    ([], ("EVAL", "return redis.call('get', 'nokey')", 0)),
    ([], ("EVAL", "return type(redis.call('get', 'nokey'))", 0)),
    ([], ("EVAL", "return tostring(redis.call('get', 'nokey'))", 0)),
    ([], ("EVAL", "return redis.call('incr', 'n')", 0)),
    ([], ("EVAL", "return type(redis.call('incr', 'n'))", 0)),
    ([], ("EVAL", "return redis.call('set', 'k', 'v')", 0)),
    ([], ("EVAL", "return redis.call('set', 'k', 'v')['ok']", 0)),
    ([], ("EVAL", "return redis.call('ping')", 0)),
    ([("RPUSH", "l", "a", "b", "c")], ("EVAL", "return redis.call('lrange', 'l', 0, -1)", 0)),
    ([("RPUSH", "l", "a", "b", "c")], ("EVAL", "return #redis.call('lrange', 'l', 0, -1)", 0)),
    ([("HSET", "h", "f", "v")], ("EVAL", "return redis.call('hgetall', 'h')", 0)),
    ([], ("EVAL", "return redis.call('mget', 'a', 'b')", 0)),
    ([("SET", "a", "1")], ("EVAL", "return redis.call('mget', 'a', 'nokey', 'a')", 0)),
    ([("SET", "k", "v")], ("EVAL", "return redis.pcall('incr', 'k')", 0)),
    ([("SET", "k", "v")], ("EVAL", "return redis.pcall('incr', 'k')['err']", 0)),
    ([("SET", "k", "v")], ("EVAL", "local e = redis.pcall('lpush', 'k', 1); return e['err']", 0)),
    ([("SET", "k", "v")], ("EVAL", "return redis.call('incr', 'k')", 0)),
    ([("SET", "k", "v")], ("EVAL", "return redis.call('lpush', 'k', 1)", 0)),
    ([("SET", "k", BIG)], ("EVAL", "return redis.call('get', 'k')", 0)),
    ([("SET", "k", BIG)], ("EVAL", "return #redis.call('get', 'k')", 0)),
    ([("RPUSH", "l", BIG, "x", BIG)], ("EVAL", "return redis.call('lrange', 'l', 0, -1)", 0)),
    # arguments: numbers as %.17g, only strings and numbers
    ([], ("EVAL", "redis.call('set', 'k', 3.5); return redis.call('get', 'k')", 0)),
    ([], ("EVAL", "redis.call('set', 'k', 10); return redis.call('get', 'k')", 0)),
    ([], ("EVAL", "redis.call('set', 'k', 0.1); return redis.call('get', 'k')", 0)),
    ([], ("EVAL", "return redis.call('set', 'k', {})", 0)),
    ([], ("EVAL", "return redis.pcall('set', 'k', true)", 0)),
    ([], ("EVAL", "return redis.call()", 0)),
    ([], ("EVAL", "return redis.pcall()", 0)),
    # errors: commands, arity, not allowed in scripts, runtime and compile errors
    ([], ("EVAL", "return redis.call('nosuchcommand')", 0)),
    ([], ("EVAL", "return redis.pcall('nosuchcommand')", 0)),
    ([], ("EVAL", "return redis.call('get')", 0)),
    ([], ("EVAL", "return redis.call('blpop', 'l', 0)", 0)),
    ([], ("EVAL", "return redis.call('multi')", 0)),
    ([], ("EVAL", "return redis.call('eval', 'return 1', 0)", 0)),
    ([], ("EVAL", "return redis.call('subscribe', 'ch')", 0)),
    ([], ("EVAL", "return redis.call('script', 'load', 'return 1')", 0)),
    ([], ("EVAL", "return redis.call('client', 'id')", 0)),
    ([], ("EVAL", "error('boom')", 0)),
    ([], ("EVAL", "error({err='CUSTOM my error'})", 0)),
    ([], ("EVAL", "\n\nerror('line three')", 0)),
    ([], ("EVAL", "local t = nil; return t.x", 0)),
    ([], ("EVAL", "return 'unfinished", 0)),
    ([], ("EVAL", "return +", 0)),
    ([], ("EVAL", "return {pcall(redis.call, 'nosuchcommand')}", 0)),
    ([], ("EVAL", "return {pcall(error, 'x')}", 0)),
    ([], ("EVAL", "return {pcall(function() error({err='T x'}) end)}", 0)),
    # the sandbox
    ([], ("EVAL", "a = 5", 0)),
    ([], ("EVAL", "return undefined_global", 0)),
    ([], ("EVAL", "redis = nil", 0)),
    ([], ("EVAL", "redis.call = function() end", 0)),
    ([], ("EVAL", "string.len = nil", 0)),
    ([], ("EVAL", "rawset(_G, 'x', 1)", 0)),
    ([], ("EVAL", "return os", 0)),
    ([], ("EVAL", "return io", 0)),
    ([], ("EVAL", "return loadfile", 0)),
    ([], ("EVAL", "return dofile", 0)),
    ([], ("EVAL", "return print", 0)),
    ([], ("EVAL", "return type(loadstring)", 0)),
    ([], ("EVAL", "return loadstring('return 7')()", 0)),
    ([], ("EVAL", "local x = 5; return x", 0)),
    ([], ("EVAL", "return type(string.format)", 0)),
    ([], ("EVAL", "return string.format('%d-%s', 7, 'x')", 0)),
    ([], ("EVAL", "return math.floor(7.9)", 0)),
    ([], ("EVAL", "return table.concat({'a', 'b'}, ',')", 0)),
    ([], ("EVAL", "return cjson.encode({1, 2, 3})", 0)),
    ([], ("EVAL", "return cjson.decode('{\"a\":[1,2]}').a[2]", 0)),
    ([], ("EVAL", "return bit.bxor(5, 3)", 0)),
    ([], ("EVAL", "return _VERSION", 0)),
    # bytecode: never loaded, whichever way it comes (string.dump is gone: test_script_sandbox)
    ([], ("EVAL", BYTECODE, 0)),
    ([], ("SCRIPT", "LOAD", BYTECODE)),
    ([], ("EVAL", "local f, e = loadstring(ARGV[1]); return {tostring(f), e}", 0, BYTECODE)),
    ([], ("EVAL", "local f, e = load(function() local s = ARGV[1]; ARGV[1] = nil; return s end);"
                  " return {tostring(f), e}", 0, BYTECODE)),
    # what CVE-2025-46818 and CVE-2025-67733 closed: no way to another script's
    # environment, no CR/LF injected into a reply
    ([], ("EVAL", "return {type(setfenv), type(getfenv), type(newproxy)}", 0)),
    ([], ("EVAL", "return redis.error_reply('bad\\r\\n+INJECTED')", 0)),
    ([], ("EVAL", "return redis.status_reply('ok\\r\\n+INJECTED')", 0)),
    ([], ("EVAL", "return {ok = 'ok\\r\\n:1'}", 0)),
    ([], ("EVAL", "return {err = 'ERR x\\n-y'}", 0)),
    # the lexer's long brackets (CVE-2025-46819's fix changed how they are read)
    ([], ("EVAL", "return [==[long]==]", 0)),
    ([], ("EVAL", "return [=", 0)),
    ([], ("EVAL", "return [==[unfinished", 0)),
    ([], ("EVAL", "local t = {1}; return t[ [[1]] ]", 0)),
    ([], ("EVAL", "return --[==[ comment ]==] 5", 0)),
    ([], ("EVAL", "return --[=[ unfinished comment", 0)),
    # Redis's own cmsgpack and struct, and its cjson
    ([], ("EVAL", "return cmsgpack.pack({1, 'a', {x = 2}}, 3.5, true)", 0)),
    ([], ("EVAL", "return cmsgpack.unpack(cmsgpack.pack({1, 'a', {x = 2}}))", 0)),
    ([], ("EVAL", "return {cmsgpack.unpack(ARGV[1])}", 0, b"\x93\x01\xa1b\xc3")),
    ([], ("EVAL", "return {pcall(cmsgpack.unpack, ARGV[1])}", 0, b"\xdc\xff")),
    ([], ("EVAL", "return cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2)", 0)),
    ([], ("EVAL", "return struct.pack('>I2i4', 513, -2)", 0)),
    ([], ("EVAL", "return {struct.unpack('>I2i4', ARGV[1])}", 0, b"\x02\x01\xff\xff\xff\xfe")),
    ([], ("EVAL", "return {pcall(struct.pack, 'i17', 1)}", 0)),
    ([], ("EVAL", "return {pcall(struct.unpack, 'I4', 'ab')}", 0)),
    ([], ("EVAL", "return struct.size('>I2i4d')", 0)),
    ([], ("EVAL", "cmsgpack.pack = nil", 0)),
    ([], ("EVAL", "struct.pack = nil", 0)),
    ([], ("EVAL", "return {pcall(cjson.encode, {[1] = 1, [1000] = 2})}", 0)),
    ([], ("EVAL", "return cjson.encode(cjson.decode('[1,{\"a\":null},\"x\\\\u00e9\"]'))", 0)),
    ([], ("EVAL", "return {pcall(cjson.decode, '[' .. string.rep('[', 1100))}", 0)),
    ([], ("EVAL", "return {pcall(cjson.encode, setmetatable({}, {__index = _G}))}", 0)),
    ([], ("EVAL", "return load(function() return nil end)", 0)),
    ([], ("EVAL", "local i = 0; return load(function() i = i + 1; "
                  "if i == 1 then return 'return 42' end end)()", 0)),
    ([], ("EVAL", "setmetatable(_G, {})", 0)),
    ([], ("EVAL", "local g = getmetatable(_G); g.__index = {}", 0)),
    ([], ("EVAL", "_G = {}", 0)),
    ([], ("EVAL", "getmetatable('').__index = function() return 1 end", 0)),
    ([], ("EVAL", "return ('abc'):len()", 0)),
    ([], ("EVAL", "return setmetatable({}, {__index = function() return 5 end}).x", 0)),
    ([], ("EVAL", "bit.lshift = function() return 1 end", 0)),
    ([], ("EVAL", "cjson.encode = function() return 1 end", 0)),
    # stock Lua 5.1's and lua-bitop's overflows, fixed as Redis fixed its copies
    ([], ("EVAL", "return {unpack({1, 2, 3}, -2, 2147483647)}", 0)),
    ([], ("EVAL", "return {unpack({1, 2, 3}, 0, 2147483647)}", 0)),
    ([], ("EVAL", "return {unpack({1, 2, 3}, -2147483648, -2)}", 0)),
    ([], ("EVAL", "return {unpack({1, 2, 3}, 2147483646, 2147483647)}", 0)),
    ([], ("EVAL", "return {unpack({1, 2, 3})}", 0)),
    ([], ("EVAL", "return {unpack({1, 2, 3}, 2)}", 0)),
    ([], ("EVAL", "return {bit.tohex(65535, -2147483648), bit.tohex(65535, 2147483648)}", 0)),
    ([], ("EVAL", "return {bit.tohex(65535), bit.tohex(-1, -4), bit.tohex(255, 2)}", 0)),
    # redis.log, redis.setresp
    ([], ("EVAL", "redis.log(redis.LOG_WARNING, 'from a script'); return 1", 0)),
    ([], ("EVAL", "redis.log(redis.LOG_DEBUG, 'quiet'); return 1", 0)),
    ([], ("EVAL", "redis.log('x', 'y')", 0)),
    ([], ("EVAL", "redis.log(redis.LOG_WARNING)", 0)),
    ([], ("EVAL", "redis.log(9, 'x')", 0)),
    ([], ("EVAL", "return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, "
                  "redis.LOG_WARNING}", 0)),
    ([], ("EVAL", "redis.setresp(4)", 0)),
    ([], ("EVAL", "redis.setresp()", 0)),
    ([("HSET", "h", "f", "v")], ("EVAL", "redis.setresp(3); return redis.call('hgetall', 'h')", 0)),
    ([("HSET", "h", "f", "v")],
     ("EVAL", "redis.setresp(3); return redis.call('hgetall', 'h')['map']['f']", 0)),
    ([], ("EVAL", "redis.setresp(3); return redis.call('get', 'nokey')", 0)),
    ([], ("EVAL", "redis.setresp(3); return type(redis.call('get', 'nokey'))", 0)),
    ([("SADD", "s", "a")], ("EVAL", "redis.setresp(3); return redis.call('smembers', 's')", 0)),
    ([("ZADD", "z", "1.5", "m")],
     ("EVAL", "redis.setresp(3); return redis.call('zscore', 'z', 'm')", 0)),
    ([("ZADD", "z", "1.5", "m")],
     ("EVAL", "redis.setresp(3); return redis.call('zscore', 'z', 'm')['double']", 0)),
    ([], ("EVAL", "redis.setresp(3); return true", 0)),
    ([], ("EVAL", "redis.setresp(3); return false", 0)),
    ([], ("EVAL", "return {double=3.5}", 0)),
    ([], ("EVAL", "return {big_number='123456789012345678901234567890'}", 0)),
    ([], ("EVAL", "return {verbatim_string={format='txt', string='hello'}}", 0)),
    ([], ("EVAL", "return {map={a=1}}", 0)),
    ([], ("EVAL", "return {set={a=true}}", 0)),
    ([], ("EVAL", "return redis.set_repl(redis.REPL_ALL)", 0)),
    ([], ("EVAL", "return redis.set_repl(99)", 0)),
    ([], ("EVAL", "return redis.replicate_commands()", 0)),
    # EVAL's own arguments
    ([], ("EVAL", "return 1", -1)),
    ([], ("EVAL", "return 1", 2, "a")),
    ([], ("EVAL", "return 1", "x")),
    ([], ("EVAL", "return 1")),
    ([], ("EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", 0)),
    ([], ("EVALSHA", "short", 0)),
    ([], ("EVALSHA", SHA_RETURN_1, 0)),
    ([("SCRIPT", "LOAD", "return 1")], ("EVALSHA", SHA_RETURN_1, 0)),
    ([("SCRIPT", "LOAD", "return 1")], ("EVALSHA", SHA_RETURN_1.upper(), 0)),
    ([("SCRIPT", "LOAD", "return 1")], ("EVALSHA_RO", SHA_RETURN_1, 0)),
    # read-only scripts and shebang flags
    ([], ("EVAL_RO", "return redis.call('set', 'k', 'v')", 1, "k")),
    ([], ("EVAL_RO", "return redis.call('publish', 'ch', 'm')", 0)),
    ([("SET", "k", "v")], ("EVAL_RO", "return redis.call('get', KEYS[1])", 1, "k")),
    ([], ("EVAL", "#!lua flags=no-writes\nreturn redis.call('set', 'k', 'v')", 0)),
    ([], ("EVAL", "#!lua flags=no-writes\nreturn redis.call('get', 'k')", 0)),
    ([], ("EVAL", "#!lua\nreturn 1", 0)),
    ([], ("EVAL", "#!lua\nerror('line two')", 0)),
    ([], ("EVAL_RO", "#!lua\nreturn 1", 0)),
    ([], ("EVAL_RO", "#!lua flags=no-writes\nreturn 1", 0)),
    ([], ("EVAL", "#!python\nreturn 1", 0)),
    ([], ("EVAL", "#!lua flags=bogus\nreturn 1", 0)),
    ([], ("EVAL", "#!lua other=1\nreturn 1", 0)),
    ([], ("EVAL", "#!lua flags=\nreturn 1", 0)),
    ([], ("EVAL", "#!lua flags=no-writes,,allow-oom\nreturn 1", 0)),
    ([], ("EVAL", "#!lua flags=no-writes,\nreturn 1", 0)),
    ([], ("EVAL", "#!lua flags=no-writes,allow-oom  \nreturn 1", 0)),
    ([], ("EVAL", "#!lua", 0)),
    ([], ("EVAL", "#!luax\nreturn 1", 0)),
    # SCRIPT
    ([], ("SCRIPT", "LOAD", "return 'loaded'")),
    ([], ("SCRIPT", "LOAD", "return +")),
    ([("SCRIPT", "LOAD", "return 1")],
     ("SCRIPT", "EXISTS", SHA_RETURN_1, SHA_RETURN_1.upper(), "nope")),
    ([("SCRIPT", "LOAD", "return 1"), ("SCRIPT", "FLUSH")],
     ("SCRIPT", "EXISTS", SHA_RETURN_1)),
    ([], ("SCRIPT", "FLUSH", "ASYNC")),
    ([], ("SCRIPT", "FLUSH", "SYNC")),
    ([], ("SCRIPT", "FLUSH", "NOW")),
    ([], ("SCRIPT", "KILL")),
    ([], ("SCRIPT", "NOSUCH")),
    ([], ("SCRIPT", "LOAD")),
    ([], ("SCRIPT", "EXISTS")),
    # a script's commands all see the time it started: a key does not expire during it
    ([], ("EVAL", "redis.call('set', 'key', 'v', 'PX', 1); local t = redis.call('time'); local n; "
                  "repeat n = redis.call('time') "
                  "until (n[1] - t[1]) * 1000000 + n[2] - t[2] > 5000; "
                  "return redis.call('exists', 'key')", 0)),
    # SORT BY a constant of a set is ordered inside scripts, as Redis orders it
    ([("SADD", "s", "c", "a", "b", "aa", "z")],
     ("EVAL", "return redis.call('sort', 's', 'by', 'nosort')", 0)),
    # the script's SELECT does not move the caller
    ([("SET", "k", "db0")], ("EVAL", "redis.call('select', 1); redis.call('set', 'k', 'db1'); "
                                      "return redis.call('get', 'k')", 0)),
    ([("SET", "k", "db0")], ("EVAL", "return redis.call('get', 'k')", 0)),
    # COMMAND's view of the scripting commands
    ([], ("COMMAND", "GETKEYS", "EVAL", "return 1", 2, "k1", "k2", "a")),
    # keyless calls: COMMAND GETKEYS answers [] for a no_mandatory_keys command
    ([], ("COMMAND", "GETKEYS", "EVAL", "return 1", 0)),
    ([], ("COMMAND", "GETKEYS", "EVAL", "return 1", 1, "k")),
    # BLOCK has no meaning inside a script: refused by name, as Redis does
    ([], ("EVAL", "return redis.pcall('xread','BLOCK',0,'STREAMS','s','$')", 1, "s")),
    ([], ("EVAL", "return redis.pcall('XREADGROUP','GROUP','g','c','BLOCK',0,'STREAMS','s','>')",
          1, "s")),
    # redis.acl_check_cmd: the script's user may run it (the default user may run anything)
    ([], ("EVAL", "return redis.acl_check_cmd('set','xx',1)", 1, "xx")),
    ([], ("EVAL", "return redis.acl_check_cmd('invalid-cmd','arg')", 0)),
    ([], ("EVAL", "return redis.acl_check_cmd()", 0)),
]  # fmt: skip


def test_script_help_and_command_info(stock: ServerProcess, srv: ServerProcess) -> None:
    """SCRIPT HELP lists what inreplay has of Redis's (not DEBUG); COMMAND INFO
    gives the scripting commands Redis's flags and key positions."""
    with stock.raw() as a, srv.raw() as b:
        ours = b.call("SCRIPT", "HELP")
        theirs = a.call("SCRIPT", "HELP")
        assert [line for line in theirs if "DEBUG" not in line and "debug mode" not in line] == ours
        for name in ("eval", "evalsha", "eval_ro", "evalsha_ro", "script"):
            want, got = a.call("COMMAND", "INFO", name)[0], b.call("COMMAND", "INFO", name)[0]
            assert got[:6] == want[:6], name  # name, arity, flags, first, last, step
            assert len(got[9]) == len(want[9]) - (name == "script"), name  # subcommands: no DEBUG


def _flush(srv: ServerProcess) -> None:
    with srv.raw() as c:
        assert c.call("FLUSHALL") == "OK"
        assert c.call("SCRIPT", "FLUSH") == "OK"


@pytest.fixture
def stock(server_pool: ServerPool) -> Iterator[ServerProcess]:
    """The session's stock redis-server, the reference."""
    srv = server_pool.get("redis")
    yield srv


def _reply(srv: ServerProcess, setup: list[Cmd], cmd: Cmd) -> bytes:
    _flush(srv)
    with srv.raw() as c:
        for s in setup:
            c.call(*s)
        c.send(c.command(*cmd))
        return c.read_reply_bytes()


@pytest.mark.parametrize(("setup", "cmd"), CASES, ids=[repr(c)[:60] for _, c in CASES])
def test_same_reply_as_redis(
    setup: list[Cmd], cmd: Cmd, stock: ServerProcess, srv: ServerProcess
) -> None:
    want = _reply(stock, setup, cmd)
    got = _reply(srv, setup, cmd)
    assert got == want, f"{cmd!r}: redis {want[:300]!r}, inreplay {got[:300]!r}"


def test_same_reply_in_resp3(stock: ServerProcess, srv: ServerProcess) -> None:
    """A RESP3 caller: booleans, maps, sets, doubles and nulls from scripts."""
    scripts = [
        "return true",
        "return false",
        "return nil",
        "redis.setresp(3); return true",
        "redis.setresp(3); return false",
        "redis.setresp(3); return redis.call('hgetall', 'h')",
        "redis.setresp(3); return redis.call('smembers', 's')",
        "redis.setresp(3); return redis.call('zscore', 'z', 'm')",
        "redis.setresp(3); return redis.call('get', 'nokey')",
        "return {map={a=1}}",
        "return {set={a=true}}",
        "return {double=1.5}",
        "return {verbatim_string={format='txt', string='hello'}}",
        "return redis.call('hgetall', 'h')",
    ]
    for script in scripts:
        replies = []
        for s in (stock, srv):
            _flush(s)
            with s.raw() as c:
                c.call("HELLO", 3)
                c.call("HSET", "h", "f", "v")
                c.call("SADD", "s", "a")
                c.call("ZADD", "z", "1.5", "m")
                c.send(c.command("EVAL", script, 0))
                replies.append(c.read_reply_bytes())
        assert replies[1] == replies[0], f"{script}: redis {replies[0]!r}, inreplay {replies[1]!r}"


# ---- redis-py: Lock, register_script --------------------------------------


def test_redis_py_lock(r: redis.Redis) -> None:
    lock = r.lock("job", timeout=10)
    assert lock.acquire(blocking=False)
    assert r.get("job") is not None
    other = r.lock("job", timeout=10)
    assert not other.acquire(blocking=False)  # held
    assert lock.owned()
    assert not other.owned()
    assert lock.extend(5)  # a script: PEXPIRE if the token matches
    assert 10_000 < r.pttl("job") <= 15_000
    assert lock.reacquire()  # a script: PEXPIRE to timeout
    assert 5_000 < r.pttl("job") <= 10_000
    with pytest.raises(redis.exceptions.LockError):
        other.release()  # never acquired: redis-py refuses before asking the server
    lock.release()  # the release script: DEL when the token matches
    assert r.get("job") is None
    with pytest.raises(redis.exceptions.LockError):
        lock.release()  # released already
    assert other.acquire(blocking=False)
    # someone else's token in the key: the scripts refuse to touch it
    r.set("job", "another-owner")
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        other.extend(5)
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        other.reacquire()
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        other.release()
    assert r.get("job") == b"another-owner"


def test_redis_py_lock_context_manager_and_blocking(r: redis.Redis) -> None:
    with r.lock("ctx", timeout=5, blocking_timeout=2):
        assert r.exists("ctx") == 1
    assert r.exists("ctx") == 0
    holder = r.lock("busy", timeout=1)
    assert holder.acquire()
    waiter = r.lock("busy", timeout=5, blocking_timeout=5, sleep=0.05)
    t0 = time.monotonic()
    assert waiter.acquire()  # the holder's lease runs out after 1 s
    assert time.monotonic() - t0 < 4.5
    waiter.release()


def test_redis_py_register_script(r: redis.Redis) -> None:
    add = r.register_script("return redis.call('incrby', KEYS[1], ARGV[1])")
    r.script_flush()
    assert add(keys=["counter"], args=[5]) == 5  # NOSCRIPT, then EVAL: redis-py retries
    assert add(keys=["counter"], args=[2]) == 7  # EVALSHA now
    assert r.script_exists(add.sha) == [True]
    assert add.sha == hashlib.sha1(add.script.encode()).hexdigest()
    pipe = r.pipeline()
    add(keys=["counter"], args=[1], client=pipe)
    pipe.get("counter")
    assert pipe.execute() == [8, b"8"]


def test_noscript_and_cache(r: redis.Redis) -> None:
    sha = r.script_load("return ARGV[1]")
    assert sha == hashlib.sha1(b"return ARGV[1]").hexdigest()
    assert r.evalsha(sha, 0, "x") == b"x"
    assert r.evalsha_ro(sha, 0, "y") == b"y"
    assert r.script_flush() is True
    with pytest.raises(
        redis.exceptions.NoScriptError, match=r"No matching script\. Please use EVAL\."
    ):
        r.evalsha(sha, 0, "x")
    assert r.eval("return ARGV[1]", 0, "z") == b"z"  # EVAL caches it
    assert r.evalsha(sha, 0, "x") == b"x"


def test_errors_inside_scripts(r: redis.Redis) -> None:
    r.set("s", "text")
    with pytest.raises(redis.exceptions.ResponseError, match=r"^WRONGTYPE Operation against a key"):
        r.eval("return redis.call('lpush', KEYS[1], 'x')", 1, "s")
    # the writes before the error stay (Redis scripts have no rollback)
    with pytest.raises(redis.exceptions.ResponseError, match="not an integer"):
        r.eval("redis.call('set', 'before', 1); return redis.call('incr', KEYS[1])", 1, "s")
    assert r.get("before") == b"1"
    # pcall catches it and the script goes on
    assert r.eval(
        "local e = redis.pcall('incr', KEYS[1]); return {e['err'], redis.call('get', KEYS[1])}",
        1,
        "s",
    ) == [b"ERR value is not an integer or out of range", b"text"]


def test_eval_inside_multi_and_the_blocking_forms(r: redis.Redis) -> None:
    pipe = r.pipeline(transaction=True)
    pipe.eval("return redis.call('incr', 'm')", 0)
    pipe.eval("return redis.call('incr', 'm')", 0)
    assert pipe.execute() == [1, 2]
    # BLMPOP may run in a script: it does not block there
    assert r.eval("return redis.call('blmpop', 0, 1, 'nolist', 'LEFT')", 0) is None


def test_script_is_atomic(server: ServerProcess) -> None:
    """Another client's commands never run between a script's commands."""
    c1, c2 = server.client(), server.client()
    stop = threading.Event()
    seen: list[Any] = []

    def reader() -> None:
        while not stop.is_set():
            seen.append(c2.mget("a", "b"))

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(300):
            c1.eval("redis.call('set', 'a', ARGV[1]); redis.call('set', 'b', ARGV[1])", 0, i)
    finally:
        stop.set()
        t.join()
        c1.close()
        c2.close()
    assert seen
    assert all(a == b for a, b in seen), [x for x in seen if x[0] != x[1]][:3]


def _stats(srv: ServerProcess) -> tuple[list[str], list[str]]:
    with srv.raw() as c:
        errors = [ln for ln in c.call("INFO", "errorstats").decode().splitlines() if ln[:1] == "e"]
        stats = c.call("INFO", "stats").decode().splitlines()
        cmds = c.call("INFO", "commandstats").decode().splitlines()
    keep = [ln for ln in stats if ln.startswith("total_error_replies")]
    for ln in cmds:  # calls, rejected_calls and failed_calls; not the times
        # (nor the AUTH with which a connection to a server with a password starts)
        if ln.startswith("cmdstat_") and not (srv.password and ln.startswith("cmdstat_auth:")):
            name, rest = ln.split(":", 1)
            kv = dict(x.split("=") for x in rest.split(","))
            keep.append(f"{name} {kv['calls']} {kv['rejected_calls']} {kv['failed_calls']}")
    return errors, sorted(keep)


def test_error_stats_as_redis(stock: ServerProcess, srv: ServerProcess) -> None:
    """A script's error that a command already counted is not counted twice
    (INFO errorstats, total_error_replies), and calls/failed_calls/rejected_calls
    are Redis's."""
    scripts = [
        "return redis.call('incr', 's')",
        "return redis.pcall('incr', 's')",
        "return redis.error_reply('MY err')",
        "error('x')",
        "return redis.call('nosuch')",
        "return redis.call('get')",
        "return redis.call('blpop', 'l', 0)",
        "return {err='OWN code'}",
        "return redis.call('set', 'k', 'v')",
    ]
    got = []
    for s in (stock, srv):
        _flush(s)
        with s.raw() as c:
            c.call("SET", "s", "text")
            c.call("CONFIG", "RESETSTAT")
            for script in scripts:
                c.call("EVAL", script, 0)
        got.append(_stats(s))
    assert got[1] == got[0]


def test_script_stats_and_info(server: ServerProcess) -> None:
    with server.raw() as c:
        c.call("SCRIPT", "FLUSH")
        c.call("CONFIG", "RESETSTAT")
        assert c.call("EVAL", "redis.call('set', 'k', 1); return redis.call('get', 'k')", 0) == b"1"
        info = c.call("INFO", "commandstats").decode()
        assert "cmdstat_eval:calls=1" in info
        assert "cmdstat_set:calls=1" in info and "cmdstat_get:calls=1" in info
        mem = c.call("INFO", "memory").decode()
        fields = dict(
            line.split(":", 1)
            for line in mem.splitlines()
            if ":" in line and not line.startswith("#")
        )
        assert int(fields["number_of_cached_scripts"]) == 1
        assert int(fields["used_memory_lua"]) > 0


# ---- REPLAY.* from scripts (both REPLAY hosts) ---------------------------------


def test_replay_commands_from_a_script(replay_server: ServerProcess) -> None:
    r = replay_server.client()
    try:
        r.execute_command("REPLAY.CREATE", "lt", "CAPACITY", 100)
        ids = r.eval(
            "return redis.call('REPLAY.ADD', KEYS[1], 1.0, ARGV[1], 2.0, ARGV[2])",
            1,
            "lt",
            "a",
            "b",
        )
        assert len(ids) == 2 and all(isinstance(i, int) for i in ids)
        # sample 4 and return the items: [ids, weights, items] arrives as a Lua table
        items = r.eval("local s = redis.call('REPLAY.SAMPLE', KEYS[1], 4); return s[3]", 1, "lt")
        assert len(items) == 4 and set(items) <= {b"a", b"b"}
        info = r.eval(
            "local i = redis.call('REPLAY.INFO', KEYS[1]);"
            "for k = 1, #i, 2 do if i[k] == 'size' then return i[k + 1] end end",
            1,
            "lt",
        )
        assert info == 2
        with pytest.raises(redis.exceptions.ResponseError, match=r"^NOTABLE"):
            r.eval("return redis.call('REPLAY.SAMPLE', 'nosuchtable', 1)", 0)
        with pytest.raises(redis.exceptions.ResponseError, match="Write commands are not allowed"):
            r.eval_ro("return redis.call('REPLAY.ADD', KEYS[1], 1.0, 'x')", 1, "lt")
        # a sample that would wait answers at once inside a script
        r.execute_command("REPLAY.CREATE", "lq", "QUEUE", 2)
        with pytest.raises(redis.exceptions.ResponseError, match=r"^RATELIMITED"):
            r.eval("return redis.call('REPLAY.SAMPLE', KEYS[1], 1, 'TIMEOUT', 0)", 1, "lq")
    finally:
        r.close()


BUSY = "BUSY Redis is busy running a script. You can only call {} KILL or SHUTDOWN NOSAVE."
BUSY_EVAL = BUSY.format("SCRIPT")
BUSY_FCALL = BUSY.format("FUNCTION")


def run_busy(r: redis.Redis, other: redis.Redis, *cmd: object) -> list[object]:
    """Send cmd on r in a thread; return once `other` gets BUSY. The list gets
    cmd's reply (or exception) when it ends."""
    out: list[object] = []

    def go() -> None:
        try:
            out.append(r.execute_command(*cmd))
        except redis.RedisError as e:
            out.append(e)

    threading.Thread(target=go, daemon=True).start()
    deadline = time.monotonic() + 10
    while True:
        try:
            other.ping()
        except redis.ResponseError as e:
            assert str(e).startswith("BUSY"), e
            return out
        assert time.monotonic() < deadline, "the script never became busy"
        time.sleep(0.02)


def wait_done(out: list[object]) -> object:
    deadline = time.monotonic() + 10
    while not out:
        assert time.monotonic() < deadline, "the script did not end"
        time.sleep(0.02)
    return out[0]


def test_busy_script_serves_others_and_script_kill(server: ServerProcess) -> None:
    """Past lua-time-limit a script is busy, as in Redis: other clients get BUSY
    (but SCRIPT KILL, FUNCTION STATS, MULTI ...), SCRIPT KILL stops a script
    that has not written (even one that catches errors with pcall),
    UNKILLABLE one that has, which runs to its end; FUNCTION KILL refuses an
    EVAL; SHUTDOWN without NOSAVE is refused."""
    r, other = server.client(), server.client()
    try:
        assert other.config_get("lua-time-limit") == {"lua-time-limit": "5000"}
        other.config_set("busy-reply-threshold", 50)
        if server.kind == "dpdk":
            # lwIP cannot be polled from inside a command: a script that has
            # not written is stopped at the limit instead
            with pytest.raises(redis.ResponseError, match="ran longer than lua-time-limit"):
                r.eval("while true do pcall(function() while true do end end) end", 0)
            assert r.eval("redis.call('set', 'k', 1); return 1", 0) == 1
            return
        spinners = ("while true do end", "while 1 do pcall(function() while true do end end) end")
        for script in spinners:
            out = run_busy(r, other, "EVAL", script, 0)
            with pytest.raises(redis.ResponseError) as e:
                other.get("k")
            assert str(e.value) == BUSY_EVAL
            with pytest.raises(redis.ResponseError) as e:
                other.execute_command("FUNCTION", "KILL")
            assert str(e.value) == BUSY_EVAL
            with pytest.raises(redis.ResponseError) as e:
                other.execute_command("FUNCTION", "STATS")
            assert str(e.value) == BUSY_EVAL
            with pytest.raises(redis.ResponseError) as e:
                other.execute_command("SHUTDOWN")
            assert str(e.value) == BUSY_EVAL
            assert other.script_kill()
            err = wait_done(out)
            assert isinstance(err, redis.ResponseError)
            assert str(err).startswith("Script killed by user with SCRIPT KILL...")
            assert other.ping()
        spin = (
            "local t = redis.call('time'); local n; "
            "repeat n = redis.call('time') until (n[1] - t[1]) * 1000000 + n[2] - t[2] > 600000; "
        )
        out = run_busy(r, other, "EVAL", "redis.call('set', 'k', 1); " + spin + "return 1", 0)
        with pytest.raises(redis.ResponseError, match=r"^UNKILLABLE Sorry the script already"):
            other.script_kill()
        assert wait_done(out) == 1
        assert other.get("k") == b"1"
        with pytest.raises(redis.ResponseError, match=r"^NOTBUSY No scripts in execution"):
            other.script_kill()
    finally:
        other.config_set("lua-time-limit", 5000)
        r.close()
        other.close()


def test_big_replies_through_the_script_client(inreplay_server: ServerProcess) -> None:
    """Large values reach the script client by reference (pinned): the script
    sees them whole, and other clients' replies are unaffected."""
    r = inreplay_server.client()
    try:
        big = bytes(range(256)) * 4096  # 1 MiB
        r.set("big", big)
        assert r.eval("return redis.call('get', KEYS[1])", 1, "big") == big
        assert r.eval("return #redis.call('get', KEYS[1])", 1, "big") == len(big)
        assert r.eval("return redis.sha1hex(redis.call('get', KEYS[1]))", 1, "big") == (
            hashlib.sha1(big).hexdigest().encode()
        )
        assert r.get("big") == big
    finally:
        r.close()


def test_script_writes_replicate_as_redis_does(server: ServerProcess) -> None:
    """A script's writes reach a replica as Redis 7.0 sends them: the commands
    themselves (effects), more than one wrapped in MULTI/EXEC; reads and
    refused commands not at all."""
    c, _ = attach(server)
    r = server.client()
    try:
        r.eval("return redis.call('set', KEYS[1], ARGV[1])", 1, "a", "1")
        r.eval(
            "redis.call('set', 'b', 2); redis.call('incr', 'b'); return redis.call('get', 'b')", 0
        )
        r.eval("return redis.call('get', 'a')", 0)
        r.eval("redis.pcall('set', 'a'); return 1", 0)
        r.eval("redis.call('select', 3); return redis.call('set', 'c', 3)", 0)
    finally:
        r.close()
    # the commands as the script wrote them (lower case)
    expect_stream(c, [
        "SELECT 0",
        "set a 1",
        "MULTI",
        "set b 2",
        "incr b",
        "EXEC",
        "SELECT 3",
        "set c 3",
    ])  # fmt: skip
    c.close()


def test_monitor_sees_eval_then_its_commands(server: ServerProcess) -> None:
    with server.raw() as mon, server.raw() as c:
        assert mon.call("MONITOR") == "OK"
        script = "redis.call('set', KEYS[1], 'v'); return redis.call('get', 'k')"
        assert c.call("EVAL", script, 1, "k") == b"v"
        lines = [mon.read_reply() for _ in range(3)]
    shown = [re.sub(r"^\d+\.\d+ \[0 [0-9.]+:\d+\]", "[0 client]", ln) for ln in lines]
    shown = [re.sub(r"^\d+\.\d+ ", "", ln) for ln in shown]
    assert shown == [
        f'[0 client] "EVAL" "{script}" "1" "k"',
        '[0 lua] "set" "k" "v"',
        '[0 lua] "get" "k"',
    ], lines


@pytest.mark.parametrize("script", [
    "getmetatable(_G).__index.x = 1; return 1",
    "getmetatable(redis).__index.call = function() return 7 end; return 1",
    "getmetatable('').__index.upper = nil; return 1",
    "local mt = getmetatable(getmetatable(_G)); return 1",
])
def test_metatables_do_not_reach_the_real_tables(r: redis.Redis, script: str) -> None:
    """Review finding: getmetatable(proxy) answered a read-only stand-in whose __index
    was the real table, so a script could create globals, replace redis.call for every
    later script, or edit the string library. Each is refused (stock refuses them too),
    and nothing changed behind it."""
    try:
        r.eval(script, 0)
    except redis.ResponseError:
        pass
    assert r.eval("return rawget(getmetatable(_G) or {}, 'x') == nil and 1 or 0", 0) == 1
    assert r.eval("return redis.call('PING')", 0) == b"PONG"
    assert r.eval("return ('ab'):upper()", 0) == b"AB"
    with pytest.raises(redis.ResponseError, match="nonexistent global"):
        r.eval("return x", 0)


def test_busy_script_caller_pipelines_or_goes_away(server: ServerProcess) -> None:
    """The busy script's own client is not read meanwhile: what it pipelined
    behind the script runs after it, in order; if it disconnects (RST) while
    the script runs, the script is still killed cleanly and the server lives."""
    if server.kind == "dpdk":
        pytest.skip("lwIP stops a script at the limit instead (see above)")
    other = server.client()
    spin = ("EVAL", "while true do end", 0)
    try:
        other.config_set("busy-reply-threshold", 50)
        with server.raw() as c:
            c.send(c.command(*spin) + c.command("PING"))
            _until_busy(other)
            c.send(c.command("ECHO", "after"))
            assert other.script_kill()
            killed = c.read_reply_bytes()
            assert killed.startswith(b"-ERR Script killed by user with SCRIPT KILL...")
            assert c.read_reply_bytes() == b"+PONG\r\n"
            assert c.read_reply_bytes() == b"$5\r\nafter\r\n"
        c = server.raw()
        c.send(c.command(*spin))
        _until_busy(other)
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()  # RST
        time.sleep(0.1)
        assert other.script_kill()
        _until_free(other)  # the kill lands at the script's next hook, not at once
    finally:
        other.config_set("busy-reply-threshold", 5000)
        other.close()


def test_exec_during_a_busy_script_aborts_the_transaction(server: ServerProcess) -> None:
    """EXEC arriving while a script is busy answers EXECABORT quoting BUSY, runs none
    of the transaction and leaves MULTI (Redis's unit/multi 'EXEC and script timeout':
    a plain BUSY left the client in MULTI, and every later test of the unit failed)."""
    if server.kind == "dpdk":
        pytest.skip("lwIP stops a script at the limit instead (see above)")
    other = server.client()
    try:
        other.set("xx", 1)
        other.config_set("busy-reply-threshold", 50)
        with server.raw() as tx, server.raw() as spin:
            tx.send(tx.command("MULTI") + tx.command("INCR", "xx"))
            assert tx.read_reply_bytes() == b"+OK\r\n"
            assert tx.read_reply_bytes() == b"+QUEUED\r\n"
            spin.send(spin.command("EVAL", "while true do end", 0))
            _until_busy(other)
            tx.send(tx.command("EXEC"))
            assert tx.read_reply_bytes() == (
                b"-EXECABORT Transaction discarded because of: BUSY Redis is busy running a "
                b"script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n")
            assert other.script_kill()
            assert spin.read_reply_bytes().startswith(b"-ERR Script killed by user")
            _until_free(other)
            tx.send(tx.command("PING", "asdf"))  # out of MULTI: answered, not queued
            assert tx.read_reply_bytes() == b"$4\r\nasdf\r\n"
        assert other.get("xx") == b"1"
    finally:
        other.config_set("busy-reply-threshold", 5000)
        other.close()


def _until_free(other: redis.Redis) -> None:
    """PING until it is answered (BUSY until the killed script has ended)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            assert other.ping()
            return
        except redis.ResponseError as e:
            assert str(e).startswith("BUSY"), e
        assert time.monotonic() < deadline, "the killed script never ended"
        time.sleep(0.02)


def _until_busy(other: redis.Redis) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            other.ping()
        except redis.ResponseError:
            return
        assert time.monotonic() < deadline, "the script never became busy"
        time.sleep(0.02)


def test_busy_script_and_shutdown_nosave(
    server_kind: str, server_factory: Callable[..., ServerProcess]
) -> None:
    """SHUTDOWN NOSAVE ends a busy script, even one that wrote, and the server
    exits cleanly (SHUTDOWN without NOSAVE gets BUSY)."""
    if server_kind == "dpdk":
        pytest.skip("lwIP stops a script at the limit instead")
    srv = server_factory(server_kind)
    other = srv.client()
    other.config_set("busy-reply-threshold", 50)
    c = srv.raw()
    c.send(c.command("EVAL", "redis.call('set', 'k', 1) while true do end", 0))
    _until_busy(other)
    with pytest.raises(redis.ResponseError, match=r"^UNKILLABLE"):
        other.script_kill()
    with pytest.raises(redis.ResponseError, match=r"^BUSY"):
        other.shutdown()
    other.shutdown(nosave=True)  # redis-py takes the closed connection as done
    deadline = time.monotonic() + 10
    while srv.alive():
        assert time.monotonic() < deadline, "the server did not exit"
        time.sleep(0.05)
    assert srv.stop() == 0, srv.log_tail()
    c.close()


def test_acl_check_cmd_answers_for_the_scripts_user(stock: ServerProcess,
                                                    srv: ServerProcess) -> None:
    """Redis's 'Script ACL check': a user limited to SET on x* keys."""
    scripts = [("return redis.acl_check_cmd('set','xx',1)", 1, "xx"),
               ("return redis.acl_check_cmd('hset','xx','f',1)", 1, "xx"),
               ("return redis.acl_check_cmd('set','yy',1)", 0)]
    for server in (stock, srv):
        _flush(server)
        with server.raw() as c:
            try:
                assert c.call("ACL", "LOG", "RESET") == "OK"
                assert c.call("ACL", "SETUSER", "bob", "on", ">123", "+@scripting", "+set",
                              "~x*") == "OK"
                assert c.call("AUTH", "bob", "123") == "OK"
                got = [c.call("EVAL", *sc) for sc in scripts]
                assert got == [1, None, None], (server, got)
                with server.raw() as admin:  # a check is not a denial: nothing logged
                    assert admin.call("ACL", "LOG") == [], server
            finally:
                with server.raw() as admin:
                    admin.call("ACL", "DELUSER", "bob")
