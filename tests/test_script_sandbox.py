"""What a client allowed to run scripts still cannot do, on inreplay (each stack).

Stock Redis's replies for the same scripts are compared in test_scripting.py and
test_functions.py (bytecode bodies, loadstring of bytecode, cmsgpack, struct,
cjson, the lexer's long brackets); these are the places inreplay is stricter
than Redis, or says more about itself, and the regression scripts for the CVEs
fixed in Redis's Lua (CVE-2025-49844, CVE-2025-46819), compared with stock Redis.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator

import pytest
import redis
from conftest import ServerPool, ServerProcess
from test_scripting import BYTECODE


def test_string_dump_is_gone(srv: ServerProcess) -> None:
    """Nothing in a script can make bytecode (Redis keeps string.dump; its Lua
    only refuses to load what it makes)."""
    r = srv.client()
    try:
        assert r.eval("return type(string.dump)", 0) == b"nil"
        assert r.eval("return rawget(string, 'dump') == nil and 1 or 0", 0) == 1
        r.execute_command(
            "FUNCTION", "LOAD",
            "#!lua name=sd\nredis.register_function('sd', function() return type(string.dump) end)")
        assert r.execute_command("FCALL", "sd", 0) == b"nil"
    finally:
        r.close()


def test_bytecode_body_never_runs_and_is_not_cached(srv: ServerProcess) -> None:
    r = srv.client()
    try:
        for cmd in (("EVAL", BYTECODE, 0), ("SCRIPT", "LOAD", BYTECODE)):
            with pytest.raises(redis.ResponseError, match="unexpected symbol near 'char\\(27\\)'"):
                r.execute_command(*cmd)
        sha = hashlib.sha1(BYTECODE).hexdigest()
        assert r.execute_command("SCRIPT", "EXISTS", sha) == [0]
        # what a loaded chunk would have returned never comes back through any path
        assert r.eval("local f = loadstring(ARGV[1]); return f and f() or 'refused'", 0,
                      BYTECODE) == b"refused"
    finally:
        r.close()


def test_info_says_which_lua_runs(srv: ServerProcess) -> None:
    """INFO server's lua field (pyctl status shows it: test_pyctl)."""
    r = srv.client()
    try:
        lua = r.info("server")["lua"]
    finally:
        r.close()
    # make deps unpacks Debian's redis source, so make's build runs Redis's own Lua
    assert str(lua).startswith("redis deps/lua (Debian redis "), lua


@pytest.fixture
def stock(server_pool: ServerPool) -> Iterator[ServerProcess]:
    """The session's stock redis-server (Debian's 7.0.15, which carries both fixes)."""
    yield server_pool.get("redis")


def _eval_reply(srv: ServerProcess, body: str) -> bytes:
    """The reply bytes of EVAL body 0 on a fresh Lua state (SCRIPT FLUSH first)."""
    with srv.raw(timeout=120) as c:
        assert c.call("SCRIPT", "FLUSH") == "OK"
        c.send(c.command("EVAL", body, 0))
        reply = c.read_reply_bytes()
        assert c.call("PING") == "PONG"  # and the server is still there
    return reply


# CVE-2025-49844: luaY_parser made the chunk name's string (luaS_new) without anchoring
# it on the Lua stack, so a collection while the chunk was being parsed could free it
# and the parser (and every error message naming the chunk) went on using freed memory.
# load() with a reader function runs Lua *inside* the parse: each reader call below runs
# a full collection, and "=(load)", load's default name, is a string only the parser
# holds. A freed name shows as garbage (or a crash) where the messages name the chunk.
PARSER_GC = {
    "load reader collects between pieces": """
        local parts = {'local t = {', '"k1", "k2", "k3",', '"k4"', '}', ' return #t .. t[4]'}
        local out = {}
        for round = 1, 50 do
            local i = 0
            local f, err = load(function()
                i = i + 1; collectgarbage('collect'); return parts[i]
            end)
            out[#out + 1] = f and f() or err
        end
        return table.concat(out, ',')""",
    "syntax error names the chunk after collections": """
        local out = {}
        for round = 1, 50 do
            local i = 0
            local f, err = load(function()
                i = i + 1; collectgarbage('collect')
                if i == 1 then return 'local a = "s' .. round .. '"' end
                if i == 2 then return ' return a +' end
            end)
            out[#out + 1] = err
        end
        return out""",
    "named chunks built at run time": """
        local out = {}
        for round = 1, 50 do
            local name = '=chunk' .. string.rep('n', round)
            local i = 0
            local f, err = load(function()
                i = i + 1; collectgarbage('collect')
                if i == 1 then return 'return 1 +' end
            end, name)
            name = nil
            out[#out + 1] = err
        end
        return out""",
    "a parse inside the reader of another": """
        local i = 0
        local inner = {}
        local f, err = load(function()
            i = i + 1
            collectgarbage('collect')
            local g, e = loadstring('return "' .. i .. '" ..', '=inner' .. i)
            inner[#inner + 1] = e
            collectgarbage('collect')
            if i == 1 then return 'return "outer' end
            if i == 2 then return '"' end
        end)
        return {f and f() or err, unpack(inner)}""",
    "every step a collection, many constants": """
        collectgarbage('setpause', 1)
        collectgarbage('setstepmul', 100000)
        local src = {'local t = {'}
        for k = 1, 2000 do src[#src + 1] = '"c' .. k .. '",' end
        src[#src + 1] = '} return #t'
        local code = table.concat(src)
        local n = 0
        for round = 1, 5 do
            local f = load(function() local c = code; code = nil; return c end)
            n = n + (f and f() or 0)
            code = table.concat(src)
        end
        collectgarbage('setpause', 200)
        collectgarbage('setstepmul', 200)
        return n""",
}


@pytest.mark.parametrize("case", sorted(PARSER_GC))
def test_chunk_name_outlives_collections_during_the_parse(
        case: str, stock: ServerProcess, srv: ServerProcess) -> None:
    """CVE-2025-49844 (Redis's patch adds no test): the same replies as stock Redis, and
    the chunk names intact in every message."""
    want = _eval_reply(stock, PARSER_GC[case])
    got = _eval_reply(srv, PARSER_GC[case])
    assert got == want, f"redis {want[:300]!r}, inreplay {got[:300]!r}"
    assert b"ERR" not in got[:4], got[:300]
    if "names" in case or "named" in case:
        assert got.count(b"(load):1:" if "names" in case else b"chunk") >= 50, got[:300]


# CVE-2025-46819: the lexer counted a long bracket's '=' in an int and computed the
# string's bounds as len - 2 * (2 + sep), which a separator of 2^30 overflows into an
# out-of-bounds read. The patched lexer (size_t counts, skip_sep returning count + 2,
# ls->t.token set before the first token) must read every malformed long string as stock
# Redis does; separators of 100,000 exercise the same arithmetic without 5 GB of memory.
SEP = "string.rep('=', 100000)"
LONG_BRACKETS = {
    "shorter closing bracket is text": "return loadstring('return [==[x]=]==]')()",
    "longer closing bracket is text": "return loadstring('return [==[x]===]==]')()",
    "closing bracket of another level": "return loadstring('return [=[a]]b]==]c]=]')()",
    "unfinished after a near miss": "return select(2, loadstring('return [==[x]=]'))",
    "long separator": f"local s = {SEP}; return loadstring('return [' .. s .. '[x]' .. s .. ']')()",
    "long separator, one short": (
        f"local s = {SEP}; "
        "return select(2, loadstring('return [' .. s .. '[x]' .. s:sub(2) .. ']'))"),
    "long separator without its second bracket": (
        f"return select(2, loadstring('return [' .. {SEP} .. 'x'))"),
    "long comment with a long separator": (
        f"local s = {SEP}; return loadstring('--[' .. s .. '[ c ]' .. s .. '] return 7')()"),
    "unfinished long comment with a long separator": (
        f"return select(2, loadstring('--[' .. {SEP} .. '[ c'))"),
    "bracket errors as the first token": (
        "return {select(2, loadstring('[=')), select(2, loadstring('\\n\\n[==x'))}"),
    "empty long string": "return #loadstring('return [====[]====]')()",
}


@pytest.mark.parametrize("case", sorted(LONG_BRACKETS))
def test_malformed_long_strings_read_as_redis_reads_them(
        case: str, stock: ServerProcess, srv: ServerProcess) -> None:
    """CVE-2025-46819: the lexer's long brackets, well and badly formed, as stock Redis."""
    want = _eval_reply(stock, LONG_BRACKETS[case])
    got = _eval_reply(srv, LONG_BRACKETS[case])
    assert got == want, f"redis {want[:300]!r}, inreplay {got[:300]!r}"


@pytest.mark.skipif(not os.environ.get("INREPLAY_LARGE_MEMORY_TESTS"),
                    reason="needs about 6 GB per server: set INREPLAY_LARGE_MEMORY_TESTS=1")
def test_one_gigabyte_long_bracket_separator(stock: ServerProcess, srv: ServerProcess) -> None:
    """Redis's own test for CVE-2025-46819 (tagged large-memory there): a separator of
    2^30 '=' overflowed the unpatched lexer's int arithmetic."""
    body = """
        local s = string.rep('=', 1024 * 1024)
        local t = {} for i = 1, 1024 do t[i] = s end
        local sep = table.concat(t)
        collectgarbage('collect')
        local code = table.concat({'return [', sep, '[x]', sep, ']'})
        collectgarbage('collect')
        return #loadstring(code)()"""
    assert _eval_reply(stock, body) == b":1\r\n"
    assert _eval_reply(srv, body) == b":1\r\n"
