"""Commands through redis-py (RESP2, hiredis parser), against both servers.

redis-server 7.0.15 is the reference: where inreplay deliberately differs
(one database, no RESP3, CLIENT SETINFO which 7.0 lacks) the test says so.
"""

from __future__ import annotations

import hashlib
import random
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
import redis
from redis.exceptions import ResponseError

# also over the same-host rings (server kind shm), against stock Redis as the others
pytestmark = pytest.mark.also_shm

if TYPE_CHECKING:
    from conftest import RawConn, ServerProcess

Raw = Callable[[], "RawConn"]

NOT_INTEGER = "value is not an integer or out of range"
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def error_of(fn: Callable[[], object]) -> str:
    with pytest.raises(ResponseError) as exc:
        fn()
    return str(exc.value)


# --------------------------------------------------------------------------
# connection
# --------------------------------------------------------------------------


def test_ping(r: redis.Redis, raw: Raw) -> None:
    assert r.ping() is True
    c = raw()  # redis-py turns any PING reply into a bool: check the bytes
    assert c.call("PING") == "PONG"
    assert c.call("PING", "hello") == b"hello"
    assert c.call("PING", b"") == b""


def test_echo_binary(r: redis.Redis) -> None:
    payload = bytes(range(256)) + b"\r\n\x00"
    assert r.echo(payload) == payload


def test_select(server: ServerProcess, r: redis.Redis) -> None:
    assert r.execute_command("SELECT", 0) is True
    assert r.execute_command("SELECT", 15) is True  # 16 databases on both
    assert error_of(lambda: r.execute_command("SELECT", 16)) == "DB index is out of range"
    assert error_of(lambda: r.execute_command("SELECT", -1)) == "DB index is out of range"
    assert error_of(lambda: r.execute_command("SELECT", "x")) == NOT_INTEGER
    assert r.ping()


def test_hello_default_and_2(r: redis.Redis) -> None:
    for args in ((), (2,)):
        reply = r.execute_command("HELLO", *args)
        assert isinstance(reply, list) and len(reply) % 2 == 0
        fields = dict(zip(reply[::2], reply[1::2], strict=True))
        assert fields[b"proto"] == 2
        assert {b"server", b"version", b"id", b"mode", b"role", b"modules"} <= set(fields)
        assert fields[b"id"] == r.client_id()
    assert r.ping()


def test_hello_unsupported_versions(raw: Raw) -> None:
    c = raw()
    for version in (b"1", b"4", b"0", b"-3"):
        c.send(c.command("HELLO", version))
        c.expect(b"-NOPROTO unsupported protocol version\r\n")
    c.send(c.command("HELLO", "abc"))
    c.expect(b"-ERR Protocol version is not an integer or out of range\r\n")
    c.expect_open()


def test_hello_3(server: ServerProcess, raw: Raw) -> None:
    c = raw()
    c.send(c.command("HELLO", "3"))
    reply = c.read_reply()
    assert isinstance(reply, dict) and reply[b"proto"] == 3


def test_default_redis_py_client_connects(server: ServerProcess) -> None:
    """redis-py >= 8 speaks RESP3 by default: it opens every connection with
    HELLO 3 and gives up if that fails. A stock client must work unchanged."""
    client = redis.Redis(host=server.host, port=server.port, socket_timeout=10,
                         password=server.password)
    try:
        assert client.set("default-client", "yes")
        assert client.get("default-client") == b"yes"
    finally:
        client.close()


def test_client_setname_getname_id(server: ServerProcess, r: redis.Redis) -> None:
    assert r.client_getname() is None
    assert r.client_setname("worker-1") is True
    assert r.client_getname() == "worker-1"
    msg = error_of(lambda: r.client_setname("has space"))
    assert msg == "Client names cannot contain spaces, newlines or special characters."
    assert r.client_getname() == "worker-1"
    my_id = r.client_id()
    assert isinstance(my_id, int) and my_id > 0
    assert r.client_id() == my_id
    other = server.client()
    try:
        assert other.client_id() > my_id  # ids grow with each connection
    finally:
        other.close()


def test_client_setinfo(server: ServerProcess, r: redis.Redis) -> None:
    if server.kind == "redis":
        pytest.skip("CLIENT SETINFO is Redis 7.2+; the reference is 7.0")
    assert r.execute_command("CLIENT", "SETINFO", "LIB-NAME", "inreplay-tests") == b"OK"
    assert r.execute_command("CLIENT", "SETINFO", "lib-ver", "1.2.3") == b"OK"
    with pytest.raises(ResponseError):
        r.execute_command("CLIENT", "SETINFO", "no-such-attr", "x")
    with pytest.raises(ResponseError):
        r.execute_command("CLIENT", "SETINFO", "LIB-NAME")
    assert r.ping()


def test_quit(raw: Raw) -> None:
    c = raw()
    c.send(c.command("SET", "before-quit", "1") + c.command("QUIT") + c.command("PING"))
    c.expect(b"+OK\r\n+OK\r\n")
    c.expect_close()


# --------------------------------------------------------------------------
# keyspace
# --------------------------------------------------------------------------


def test_dbsize_flushdb_flushall(r: redis.Redis) -> None:
    assert r.dbsize() == 0
    r.mset({"a": 1, "b": 2, "c": 3})
    r.rpush("l", "x")
    assert r.dbsize() == 4
    assert r.flushdb() is True
    assert r.dbsize() == 0
    assert r.get("a") is None
    r.set("a", 1)
    assert r.flushall() is True
    assert r.dbsize() == 0
    assert r.exists("a") == 0


def test_del_exists(r: redis.Redis) -> None:
    r.mset({"a": 1, "b": 2})
    r.rpush("l", "x")
    assert r.exists("a", "b", "l", "missing") == 3
    assert r.exists("a", "a") == 2  # each argument counts
    assert r.delete("a", "l", "missing") == 2
    assert r.exists("a", "l") == 0
    assert r.delete("missing") == 0
    assert r.get("b") == b"2"


def test_type(r: redis.Redis) -> None:
    r.set("s", "v")
    r.rpush("l", "x")
    assert r.type("s") == b"string"
    assert r.type("l") == b"list"
    assert r.type("missing") == b"none"


# --------------------------------------------------------------------------
# strings
# --------------------------------------------------------------------------


def test_get_set(r: redis.Redis) -> None:
    assert r.get("k") is None
    assert r.set("k", b"v\x00\r\n") is True
    assert r.get("k") == b"v\x00\r\n"
    assert r.set("k", "") is True
    assert r.get("k") == b""
    assert r.strlen("k") == 0


@pytest.mark.slow
def test_large_binary_value(r: redis.Redis) -> None:
    rng = random.Random(7)
    value = rng.randbytes(13 * 1024 * 1024) + b"\r\n\x00$-1\r\n"
    assert r.set("big", value) is True
    assert r.strlen("big") == len(value)
    got = r.get("big")
    assert got is not None
    assert hashlib.sha256(got).digest() == hashlib.sha256(value).digest()


def test_redis_py_pipeline(r: redis.Redis) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(1000):
        pipe.set(f"p:{i}", i)
        pipe.incr("p:count")
        pipe.get(f"p:{i}")
    results = pipe.execute()
    assert results[0::3] == [True] * 1000
    assert results[1::3] == list(range(1, 1001))
    assert results[2::3] == [str(i).encode() for i in range(1000)]


def test_set_nx_xx(r: redis.Redis) -> None:
    assert r.set("k", "1", xx=True) is None
    assert r.get("k") is None
    assert r.set("k", "1", nx=True) is True
    assert r.set("k", "2", nx=True) is None
    assert r.get("k") == b"1"
    assert r.set("k", "3", xx=True) is True
    assert r.get("k") == b"3"


def test_set_ex_px(r: redis.Redis) -> None:
    assert r.set("k", "v", ex=100) is True
    assert 99 <= r.ttl("k") <= 100
    assert r.set("k", "v", px=100_000) is True
    assert 99_000 < r.pttl("k") <= 100_000
    assert r.set("k", "v") is True  # a plain SET clears the TTL
    assert r.ttl("k") == -1


def test_set_px_really_expires(r: redis.Redis) -> None:
    assert r.set("short", "v", px=50) is True
    assert r.set("long", "v", ex=100) is True
    time.sleep(0.25)
    assert r.get("short") is None
    assert r.exists("short") == 0
    assert r.ttl("short") == -2
    assert r.get("long") == b"v"


def test_set_errors(r: redis.Redis) -> None:
    bad_expire = "invalid expire time in 'set' command"
    for args in (("EX", 0), ("EX", -1), ("PX", 0)):
        assert error_of(lambda a=args: r.execute_command("SET", "k", "v", *a)) == bad_expire
    assert error_of(lambda: r.execute_command("SET", "k", "v", "EX", "x")) == NOT_INTEGER
    for args in (("NX", "XX"), ("EX", 1, "PX", 1), ("FOO",), ("EX",)):
        assert error_of(lambda a=args: r.execute_command("SET", "k", "v", *a)) == "syntax error"
    assert r.exists("k") == 0


def test_mget_mset(r: redis.Redis) -> None:
    assert r.mset({"a": "1", "b": b"\x00", "c": ""}) is True
    r.rpush("l", "x")
    assert r.mget("a", "missing", "b", "c", "l") == [b"1", None, b"\x00", b"", None]
    assert r.mset({"a": "new"}) is True
    assert r.get("a") == b"new"
    msg = error_of(lambda: r.execute_command("MSET", "a", "b", "c"))
    assert msg == "wrong number of arguments for 'mset' command"


def test_incr_incrby(r: redis.Redis) -> None:
    assert r.incr("n") == 1
    assert r.incr("n") == 2
    assert r.incrby("n", 40) == 42
    assert r.incrby("n", -50) == -8
    assert r.decr("n") == -9
    assert r.decrby("n", 1) == -10
    assert r.get("n") == b"-10"
    r.set("m", "100")
    assert r.incr("m") == 101


def test_incr_overflow(r: redis.Redis) -> None:
    overflow = "increment or decrement would overflow"
    r.set("big", str(2**63 - 1))
    assert error_of(lambda: r.incr("big")) == overflow
    assert r.get("big") == str(2**63 - 1).encode()
    r.set("small", str(-(2**63)))
    assert error_of(lambda: r.incrby("small", -1)) == overflow
    assert r.incrby("small", 1) == -(2**63) + 1


def test_incr_not_integer(r: redis.Redis) -> None:
    for value in ("abc", "1.5", " 1", "1 ", "", "99999999999999999999"):
        r.set("s", value)
        assert error_of(lambda: r.incr("s")) == NOT_INTEGER, value
        assert r.get("s") == value.encode()
    r.set("n", "1")
    assert error_of(lambda: r.execute_command("INCRBY", "n", "x")) == NOT_INTEGER
    assert error_of(lambda: r.execute_command("INCRBY", "n", "1.0")) == NOT_INTEGER
    assert r.get("n") == b"1"


# --------------------------------------------------------------------------
# expiry
# --------------------------------------------------------------------------


def test_expire_ttl(r: redis.Redis) -> None:
    assert r.ttl("missing") == -2
    assert r.expire("missing", 10) is False
    r.set("k", "v")
    assert r.ttl("k") == -1
    assert r.expire("k", 100) is True
    assert 99 <= r.ttl("k") <= 100
    assert r.persist("k") is True
    assert r.ttl("k") == -1
    assert r.persist("k") is False
    assert r.pexpire("k", 100_000) is True
    assert 99_000 < r.pttl("k") <= 100_000
    assert error_of(lambda: r.execute_command("EXPIRE", "k", "x")) == NOT_INTEGER


def test_expire_really_expires(r: redis.Redis) -> None:
    r.set("k", "v")
    r.rpush("l", "a")
    assert r.pexpire("k", 50) is True
    assert r.pexpire("l", 50) is True
    time.sleep(0.25)
    assert r.get("k") is None
    assert r.llen("l") == 0
    assert r.exists("k", "l") == 0
    assert r.dbsize() == 0


def test_expire_in_the_past_deletes(r: redis.Redis) -> None:
    r.set("k", "v")
    assert r.expire("k", -1) is True
    assert r.exists("k") == 0


# --------------------------------------------------------------------------
# lists
# --------------------------------------------------------------------------


def test_push_len_range(r: redis.Redis) -> None:
    assert r.rpush("l", "b", "c") == 2
    assert r.lpush("l", "a", "z") == 4  # each pushed to the head in turn
    assert r.lrange("l", 0, -1) == [b"z", b"a", b"b", b"c"]
    assert r.llen("l") == 4
    assert r.lrange("l", -2, -1) == [b"b", b"c"]
    assert r.lrange("l", 1, 1) == [b"a"]
    assert r.lrange("l", 2, 1) == []
    assert r.lrange("l", 5, 10) == []
    assert r.lrange("l", -100, 100) == [b"z", b"a", b"b", b"c"]
    assert r.lrange("missing", 0, -1) == []
    assert r.llen("missing") == 0
    assert error_of(lambda: r.execute_command("LRANGE", "l", "x", 1)) == NOT_INTEGER


def test_pop(r: redis.Redis) -> None:
    r.rpush("l", "a", "b", "c", "d", "e")
    assert r.lpop("l") == b"a"
    assert r.rpop("l") == b"e"
    assert r.lpop("l", 2) == [b"b", b"c"]
    assert r.rpop("l", 5) == [b"d"]  # count beyond the length: what there is
    assert r.exists("l") == 0  # the emptied list is gone
    assert r.lpop("l") is None
    assert r.rpop("l") is None
    assert r.lpop("l", 2) is None  # null array, not an empty one
    r.rpush("l", "x")
    assert r.lpop("l", 0) == []
    assert r.rpop("l", 0) == []
    assert error_of(lambda: r.lpop("l", -1)) == "value is out of range, must be positive"
    assert r.lrange("l", 0, -1) == [b"x"]


def test_list_binary_elements(r: redis.Redis) -> None:
    items = [b"", b"\x00", b"\r\n", bytes(range(256))]
    r.rpush("l", *items)
    assert r.lrange("l", 0, -1) == items
    assert r.rpop("l", 4) == items[::-1]


def test_wrongtype(r: redis.Redis) -> None:
    r.set("s", "v")
    r.rpush("l", "x")
    for fn in (
        lambda: r.get("l"),
        lambda: r.incr("l"),
        lambda: r.incrby("l", 2),
        lambda: r.strlen("l"),
        lambda: r.lpush("s", "x"),
        lambda: r.rpush("s", "x"),
        lambda: r.lpop("s"),
        lambda: r.rpop("s", 2),
        lambda: r.llen("s"),
        lambda: r.lrange("s", 0, -1),
    ):
        assert error_of(fn) == WRONGTYPE
    assert r.get("s") == b"v"
    assert r.lrange("l", 0, -1) == [b"x"]
    assert r.set("l", "now a string") is True  # SET overwrites any type
    assert r.get("l") == b"now a string"


# --------------------------------------------------------------------------
# introspection
# --------------------------------------------------------------------------


def info_text(c: RawConn, *section: str) -> str:
    reply = c.call("INFO", *section)
    assert isinstance(reply, bytes), reply
    return reply.decode()


def test_info_sections(server: ServerProcess, raw: Raw, r: redis.Redis) -> None:
    r.set("a", 1)
    r.set("b", 2, ex=100)
    text = info_text(raw())
    headers = re.findall(r"^# (\w+)\r$", text, re.M)
    expected = ["Server", "Clients", "Memory", "Stats", "Keyspace"]
    if server.kind != "redis":
        expected.append("Replay")
    for name in expected:
        assert name in headers, f"INFO lacks '# {name}' (has {headers})"
    fields = dict(
        line.split(":", 1) for line in text.split("\r\n") if line and not line.startswith("#")
    )
    assert int(fields["connected_clients"]) >= 2
    assert int(fields["tcp_port"]) == server.port
    assert int(fields["used_memory"]) > 0
    assert int(fields["total_commands_processed"]) > 0
    assert fields["db0"].startswith("keys=2,expires=1")


def test_info_single_section(raw: Raw, r: redis.Redis) -> None:
    r.set("a", 1)
    text = info_text(raw(), "keyspace")
    assert text == "# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n"


def test_info_replay_section(inreplay_server: ServerProcess) -> None:
    with inreplay_server.raw() as c:
        text = info_text(c, "replay")
    assert text.startswith("# Replay\r\n")
    assert "# Server" not in text


def test_config_get_flat_list(raw: Raw) -> None:
    c = raw()
    assert c.call("CONFIG", "GET", "save") == [b"save", b""]
    assert c.call("CONFIG", "GET", "appendonly") == [b"appendonly", b"no"]
    reply = c.call("CONFIG", "GET", "maxmemory")
    assert isinstance(reply, list) and len(reply) == 2 and reply[0] == b"maxmemory"
    assert reply[1].isdigit()
    assert c.call("CONFIG", "GET", "no-such-parameter") == []


def test_config_get_via_redis_py(r: redis.Redis) -> None:
    assert r.config_get("appendonly") == {"appendonly": "no"}


def test_command_count(r: redis.Redis) -> None:
    n = r.command_count()
    assert isinstance(n, int) and n > 0


# --------------------------------------------------------------------------
# SHUTDOWN (a server of its own)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("server_kind", ["redis", "inreplay"])
def test_shutdown(server_kind: str, server_factory: Callable[..., ServerProcess]) -> None:
    srv = server_factory(server_kind)
    with srv.raw() as c:
        c.send(c.command("SHUTDOWN"))
        c.expect_close(timeout=10)  # no reply on success: the server is gone
    assert srv.wait(15) == 0, srv.log_tail()
