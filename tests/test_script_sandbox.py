"""What a client allowed to run scripts still cannot do, on inreplay (each stack).

Stock Redis's replies for the same scripts are compared in test_scripting.py and
test_functions.py (bytecode bodies, loadstring of bytecode, cmsgpack, struct,
cjson, the lexer's long brackets); these are the places inreplay is stricter
than Redis, or says more about itself.
"""

from __future__ import annotations

import hashlib

import pytest
import redis
from conftest import ServerProcess
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
