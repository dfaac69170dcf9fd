"""DEBUG subcommands and the keyspace counters, against both servers.

Each test runs against stock redis-server 7.0.15 (started with
``--enable-debug-command yes``, as Redis's test suite does) and inreplay with
the same expectations over raw RESP connections. Digests are compared by
their properties only: inreplay's hash is its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from conftest import RespError, ServerProcess, own_server

KINDS = ("redis", "inreplay")


@pytest.fixture(scope="module", params=KINDS)
def dsrv(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[ServerProcess]:
    kind = str(request.param)
    with own_server(kind, tmp_path_factory.mktemp(f"debug-{kind}")) as srv:
        yield srv


@pytest.fixture
def conn(dsrv: ServerProcess) -> Iterator[Callable[..., object]]:
    c = dsrv.raw()
    c.call("FLUSHALL")
    try:
        yield c.call
    finally:
        c.close()


def err(text: str) -> RespError:
    return RespError(text.encode())


def info_field(call: Callable[..., object], name: str) -> int:
    text = call("INFO", "stats")
    assert isinstance(text, bytes)
    for line in text.decode().splitlines():
        if line.startswith(name + ":"):
            return int(line.split(":", 1)[1])
    raise AssertionError(f"{name} not in INFO stats")


def test_debug_log_and_unknown(conn: Callable[..., object], dsrv: ServerProcess) -> None:
    assert conn("DEBUG", "LOG", "hello-from-test_debug") == "OK"
    assert "DEBUG LOG: hello-from-test_debug" in dsrv.log_tail(20000)
    assert conn("DEBUG", "NOSUCH") == err(
        "ERR unknown subcommand or wrong number of arguments for 'NOSUCH'. Try DEBUG HELP.")
    assert conn("DEBUG", "LOG") == err(
        "ERR unknown subcommand or wrong number of arguments for 'LOG'. Try DEBUG HELP.")
    assert conn("DEBUG") == err("ERR wrong number of arguments for 'debug' command")
    assert conn("DEBUG", "CHANGE-REPL-ID") == "OK"


def test_debug_sleep_blocks_the_server(conn: Callable[..., object], dsrv: ServerProcess) -> None:
    t0 = time.monotonic()
    assert conn("DEBUG", "SLEEP", "0.3") == "OK"
    assert time.monotonic() - t0 >= 0.25
    assert conn("DEBUG", "SLEEP", "0") == "OK"
    assert conn("DEBUG", "SLEEP", "junk") == "OK"  # strtod reads 0, as Redis


def test_debug_set_active_expire(conn: Callable[..., object]) -> None:
    assert conn("DEBUG", "SET-ACTIVE-EXPIRE", "0") == "OK"
    try:
        for i in range(20):
            conn("SET", f"ae{i}", "v", "PX", "10")
        time.sleep(0.4)
        # nothing touched them and active expiry is off: still counted
        assert conn("DBSIZE") == 20
        assert conn("GET", "ae0") is None  # lazy expiry still works
        assert conn("DBSIZE") == 19
    finally:
        assert conn("DEBUG", "SET-ACTIVE-EXPIRE", "1") == "OK"
    deadline = time.monotonic() + 5
    while conn("DBSIZE") != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert conn("DBSIZE") == 0


def test_debug_quicklist_packed_threshold(conn: Callable[..., object]) -> None:
    assert conn("DEBUG", "QUICKLIST-PACKED-THRESHOLD", "100") == "OK"
    assert conn("DEBUG", "QUICKLIST-PACKED-THRESHOLD", "1mb") == "OK"
    assert conn("DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0") == "OK"
    bad = err("ERR argument must be a memory value bigger than 1 and smaller than 4gb")
    assert conn("DEBUG", "QUICKLIST-PACKED-THRESHOLD", "5gb") == bad
    assert conn("DEBUG", "QUICKLIST-PACKED-THRESHOLD", "abc") == bad
    assert conn("DEBUG", "QUICKLIST-PACKED-THRESHOLD", "1gb") == "OK"


PROTOCOL_TYPES = ("string", "integer", "double", "bignum", "null", "array", "set", "map",
                  "attrib", "push", "verbatim", "true", "false")


@pytest.mark.parametrize("proto", (2, 3))
def test_debug_protocol_bytes(dsrv: ServerProcess, proto: int) -> None:
    """The exact bytes of every type, in both protocols (compared with stock
    by running the same expectations on both)."""
    expected2 = {
        "string": b"$11\r\nHello World\r\n",
        "integer": b":12345\r\n",
        "double": b"$5\r\n3.141\r\n",
        "bignum": b"$37\r\n1234567999999999999999999999999999999\r\n",
        "null": b"$-1\r\n",
        "array": b"*3\r\n:0\r\n:1\r\n:2\r\n",
        "set": b"*3\r\n:0\r\n:1\r\n:2\r\n",
        "map": b"*6\r\n:0\r\n:0\r\n:1\r\n:1\r\n:2\r\n:0\r\n",
        "attrib": b"$39\r\nSome real reply following the attribute\r\n",
        "push": b"-ERR RESP2 is not supported by this command\r\n",
        "verbatim": b"$25\r\nThis is a verbatim\nstring\r\n",
        "true": b":1\r\n",
        "false": b":0\r\n",
    }
    expected3 = {
        "double": b",3.141\r\n",
        "bignum": b"(1234567999999999999999999999999999999\r\n",
        "null": b"_\r\n",
        "set": b"~3\r\n:0\r\n:1\r\n:2\r\n",
        "map": b"%3\r\n:0\r\n#f\r\n:1\r\n#t\r\n:2\r\n#f\r\n",
        "attrib": b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n"
                  b"$39\r\nSome real reply following the attribute\r\n",
        "push": b">2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n"
                b"$40\r\nSome real reply following the push reply\r\n",
        "verbatim": b"=29\r\ntxt:This is a verbatim\nstring\r\n",
        "true": b"#t\r\n",
        "false": b"#f\r\n",
    }
    with dsrv.raw() as c:
        if proto == 3:
            c.call("HELLO", "3")
        for t in PROTOCOL_TYPES:
            want = expected3.get(t, expected2[t]) if proto == 3 else expected2[t]
            c.send(f"*3\r\n$5\r\nDEBUG\r\n$8\r\nPROTOCOL\r\n${len(t)}\r\n{t}\r\n".encode())
            c.expect(want)
        c.send(b"*3\r\n$5\r\nDEBUG\r\n$8\r\nPROTOCOL\r\n$4\r\nnope\r\n")
        c.expect(b"-ERR Wrong protocol type name. Please use one of the following: "
                 b"string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|"
                 b"true|false\r\n")


def test_debug_object(conn: Callable[..., object]) -> None:
    conn("SET", "o:int", "12345")
    conn("RPUSH", "o:list", "a", "b")
    line = conn("DEBUG", "OBJECT", "o:int")
    assert isinstance(line, str)
    assert line.startswith("Value at:")
    assert " refcount:1 encoding:int serializedlength:" in line
    assert " lru_seconds_idle:" in line
    line = conn("DEBUG", "OBJECT", "o:list")
    assert isinstance(line, str)
    assert "encoding:quicklist" in line and " ql_nodes:" in line
    assert conn("DEBUG", "OBJECT", "o:none") == err("ERR no such key")


def test_debug_digest(conn: Callable[..., object]) -> None:
    zero = "0" * 40
    assert conn("DEBUG", "DIGEST") == zero
    assert conn("DEBUG", "DIGEST-VALUE", "nope") == [zero]
    assert conn("DEBUG", "DIGEST-VALUE") == []
    conn("SET", "d:s", "v")
    conn("RPUSH", "d:l", "1", "2")
    conn("SADD", "d:set", "x", "y")
    conn("HSET", "d:h", "f", "v")
    d1 = conn("DEBUG", "DIGEST")
    assert isinstance(d1, str) and len(d1) == 40 and d1 != zero
    v = conn("DEBUG", "DIGEST-VALUE", "d:s", "d:l", "nope")
    assert isinstance(v, list) and len(v) == 3 and v[2] == zero and v[0] != v[1]
    conn("RPUSH", "d:l", "3")
    d2 = conn("DEBUG", "DIGEST")
    assert d2 != d1
    conn("RPOP", "d:l")
    assert conn("DEBUG", "DIGEST") == d1
    conn("EXPIRE", "d:s", "100")
    assert conn("DEBUG", "DIGEST") != d1
    # a value's digest does not depend on its key's name
    conn("COPY", "d:l", "d:l2")
    conn("COPY", "d:h", "d:h2")
    conn("COPY", "d:set", "d:set2")
    for a, b in (("d:l", "d:l2"), ("d:h", "d:h2"), ("d:set", "d:set2")):
        va, vb = conn("DEBUG", "DIGEST-VALUE", a, b)  # type: ignore[misc]
        assert va == vb != zero


def test_debug_reload_keeps_data_and_ttls(conn: Callable[..., object]) -> None:
    conn("SET", "r:s", "v")
    conn("SET", "r:t", "v", "EX", "1000")
    conn("RPUSH", "r:l", "a", "b", "c")
    conn("SADD", "r:set", "1", "2")
    conn("HSET", "r:h", "f", "v")
    conn("SELECT", "3")
    conn("SET", "r:other", "x")
    conn("SELECT", "0")
    before = conn("DEBUG", "DIGEST")
    assert conn("DEBUG", "RELOAD") == "OK"
    assert conn("DEBUG", "DIGEST") == before
    assert conn("GET", "r:s") == b"v"
    ttl = conn("TTL", "r:t")
    assert isinstance(ttl, int) and 990 < ttl <= 1000
    assert conn("LRANGE", "r:l", "0", "-1") == [b"a", b"b", b"c"]
    conn("SELECT", "3")
    assert conn("GET", "r:other") == b"x"
    conn("SELECT", "0")
    assert conn("DEBUG", "RELOAD", "bogus") == err(
        "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.")


def test_debug_reload_touches_watchers(dsrv: ServerProcess) -> None:
    with dsrv.raw() as a:
        a.call("FLUSHALL")
        a.call("SET", "w", "1")
        a.call("WATCH", "w")
        with dsrv.raw() as b:
            assert b.call("DEBUG", "RELOAD") == "OK"
        assert a.call("MULTI") == "OK"
        a.call("GET", "w")
        assert a.call("EXEC") is None


def test_keyspace_hits_and_misses(conn: Callable[..., object]) -> None:
    conn("CONFIG", "RESETSTAT")
    conn("SET", "h:a", "1")            # a write: not counted
    conn("INCR", "h:a")
    conn("DEL", "h:zz")
    assert (info_field(conn, "keyspace_hits"), info_field(conn, "keyspace_misses")) == (0, 0)
    conn("GET", "h:a")                 # hit
    conn("GET", "h:b")                 # miss
    conn("MGET", "h:a", "h:b", "h:c")  # 1 hit, 2 misses
    conn("EXISTS", "h:a")              # hit
    conn("TYPE", "h:b")                # miss
    conn("TTL", "h:a")                 # hit
    conn("STRLEN", "h:a")              # hit
    conn("LRANGE", "h:l", "0", "-1")   # miss
    conn("GETEX", "h:a")               # hit (a write that reads)
    conn("SET", "h:a", "2", "GET")     # hit
    conn("SET", "h:a", "3")            # not counted
    conn("COPY", "h:a", "h:copy")      # hit on the source
    conn("COPY", "h:none", "h:copy2")  # miss on the source
    conn("HGET", "h:hash", "f")        # miss
    assert info_field(conn, "keyspace_hits") == 8
    assert info_field(conn, "keyspace_misses") == 7
    conn("MULTI")                      # queued commands count as they run
    conn("GET", "h:a")
    conn("SET", "h:a", "4")
    conn("EXISTS", "h:none")
    conn("EXEC")
    assert info_field(conn, "keyspace_hits") == 9
    assert info_field(conn, "keyspace_misses") == 8
    conn("CONFIG", "RESETSTAT")
    assert info_field(conn, "keyspace_hits") == 0


def test_keyspace_hits_of_scan_with_type(conn: Callable[..., object]) -> None:
    conn("SET", "s1", "v")
    conn("SET", "s2", "v")
    conn("RPUSH", "l1", "v")
    conn("CONFIG", "RESETSTAT")
    reply = conn("SCAN", "0", "MATCH", "s*", "COUNT", "1000", "TYPE", "list")
    assert reply == [b"0", []]
    # each key the pattern lets through is looked up for its type
    assert info_field(conn, "keyspace_hits") == 2
    conn("SCAN", "0", "COUNT", "1000")  # no TYPE: no lookups
    assert info_field(conn, "keyspace_hits") == 2
    assert info_field(conn, "keyspace_misses") == 0


def test_expired_keys_counts_every_database(conn: Callable[..., object]) -> None:
    conn("CONFIG", "RESETSTAT")
    conn("SELECT", "5")
    conn("SET", "e:x", "v", "PX", "1")
    conn("SELECT", "0")
    conn("SET", "e:y", "v", "PX", "1")
    time.sleep(0.05)
    conn("SELECT", "5")
    assert conn("GET", "e:x") is None
    conn("SELECT", "0")
    assert conn("GET", "e:y") is None
    assert info_field(conn, "expired_keys") == 2
    conn("CONFIG", "RESETSTAT")  # every database's count
    assert info_field(conn, "expired_keys") == 0


def test_client_list_db_and_reset(conn: Callable[..., object]) -> None:
    conn("SELECT", "7")
    line = conn("CLIENT", "LIST", "ID", str(conn("CLIENT", "ID")))
    assert isinstance(line, bytes) and b" db=7 " in line
    conn("SET", "in7", "x")
    assert conn("RESET") == "RESET"
    assert conn("GET", "in7") is None  # back in database 0
    line = conn("CLIENT", "LIST", "ID", str(conn("CLIENT", "ID")))
    assert isinstance(line, bytes) and b" db=0 " in line
    conn("SELECT", "7")
    conn("DEL", "in7")


def test_reset_ends_monitor(dsrv: ServerProcess) -> None:
    with dsrv.raw() as m, dsrv.raw() as o:
        assert m.call("MONITOR") == "OK"
        assert m.call("RESET") == "RESET"
        o.call("SET", "mon", "1")
        m.expect_silence(0.3)  # neither its own RESET nor the SET is fed to it
        assert m.call("PING") == "PONG"
        o.call("DEL", "mon")
