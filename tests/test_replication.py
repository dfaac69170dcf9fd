"""Replication, master side: SYNC/PSYNC, REPLCONF, the RDB image and the stream.

Two kinds of test:

- a stock redis-server 7.0.15 started with ``--replicaof`` inreplay becomes a
  working replica of inreplay's keyspace (every database, every type, TTLs,
  transactions, served blocking pops, keys that expire);
- raw ``SYNC`` sockets read the replication stream while commands run, against
  stock redis-server and inreplay with the same expectations, so the rewrites
  (EXPIRE -> PEXPIREAT, SET EX -> SET PXAT, BLPOP -> LPOP, GETDEL -> DEL ...),
  the SELECTs and the MULTI/EXEC wrapping are Redis's own.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis
from conftest import HOST, RawConn, RespError

if TYPE_CHECKING:
    from conftest import ServerProcess

MS = re.compile(rb"^\d{13}$")


def attach(server: ServerProcess, psync: bool = False) -> tuple[RawConn, bytes]:
    """A raw replica: SYNC (or PSYNC ? -1), the RDB payload read; (conn, payload)."""
    admin = server.client()
    admin.config_set("repl-ping-replica-period", 3600)
    admin.close()
    c = server.raw()
    if psync:
        c.send(c.command("PSYNC", "?", "-1"))
        line = _line(c)
        assert re.fullmatch(rb"\+FULLRESYNC [0-9a-f]{40} \d+", line), line
    else:
        c.send(b"SYNC\r\n")
    line = _line(c)
    while line == b"":  # newlines are keepalives while the RDB is prepared
        line = _line(c)
    assert line.startswith(b"$"), line
    return c, c.recv_exact(int(line[1:]))


def _line(c: RawConn) -> bytes:
    while b"\n" not in c.buf:
        c._fill("a line")
    i = c.buf.index(b"\n")
    line = bytes(c.buf[:i]).rstrip(b"\r")
    del c.buf[: i + 1]
    return line


def read_stream(c: RawConn, n: int) -> list[str]:
    """The next n commands of the stream, 13-digit numbers (unix ms) as <ms>."""
    out = []
    for _ in range(n):
        args = c.read_reply()
        assert isinstance(args, list), args
        out.append(" ".join("<ms>" if MS.match(a) else a.decode() for a in args))
    return out


def expect_stream(c: RawConn, expected: list[str]) -> None:
    assert read_stream(c, len(expected)) == expected
    c.expect_silence(0.3)


def wait_blocked(server: ServerProcess, n: int = 1) -> None:
    r = server.client()
    try:
        deadline = time.monotonic() + 5
        while r.info("clients")["blocked_clients"] != n:
            assert time.monotonic() < deadline, "the client did not block"
            time.sleep(0.01)
    finally:
        r.close()


# --------------------------------------------------------------------------
# the stream, against both servers
# --------------------------------------------------------------------------


def test_expire_family_propagates_as_absolute_times(server: ServerProcess) -> None:
    c, _ = attach(server)
    r = server.client()
    now = int(time.time())
    r.execute_command("SET", "foo1", "bar", "EX", "200")
    r.execute_command("SET", "foo1", "bar", "px", "100000", "nx")  # not set: nothing
    r.execute_command("SET", "foo1", "bar", "px", "100000", "xx", "get")
    r.execute_command("SET", "foo1", "bar", "exat", str(now + 100))
    r.execute_command("SET", "foo1", "bar", "pxat", str(now * 1000 + 100000))
    r.execute_command("SETEX", "foo1", "100", "bar")
    r.execute_command("PSETEX", "foo1", "100000", "bar")
    r.execute_command("SET", "foo2", "bar")
    r.execute_command("EXPIRE", "foo2", "100")
    r.execute_command("PEXPIRE", "foo2", "100000", "NX")  # has a TTL: nothing
    r.execute_command("PEXPIRE", "foo2", "200000", "gt")
    r.execute_command("EXPIREAT", "foo2", str(now + 300))
    r.execute_command("EXPIRE", "nokey", "100")  # no key: nothing
    r.execute_command("EXPIREAT", "foo2", str(now - 100))  # in the past: deleted
    r.execute_command("SET", "foo4", "bar")
    r.execute_command("GETEX", "foo4")  # no option: nothing
    r.execute_command("GETEX", "foo4", "EX", "200")
    r.execute_command("GETEX", "foo4", "PERSIST")
    r.execute_command("GETEX", "foo4", "PERSIST")  # no TTL left: nothing
    r.execute_command("GETEX", "foo4", "pxat", str(now * 1000 - 1000))
    r.execute_command("SET", "foo5", "bar")
    r.execute_command("PERSIST", "foo5")  # no TTL: nothing
    r.execute_command("GETDEL", "foo5")
    r.execute_command("GETDEL", "foo5")  # gone: nothing
    r.close()
    expect_stream(c, [
        "SELECT 0",
        "SET foo1 bar PXAT <ms>",
        "SET foo1 bar PXAT <ms>",
        "SET foo1 bar PXAT <ms>",
        "SET foo1 bar PXAT <ms>",
        "SET foo1 bar PXAT <ms>",
        "SET foo1 bar PXAT <ms>",
        "SET foo2 bar",
        "PEXPIREAT foo2 <ms>",
        "PEXPIREAT foo2 <ms> gt",
        "PEXPIREAT foo2 <ms>",
        "DEL foo2",
        "SET foo4 bar",
        "PEXPIREAT foo4 <ms>",
        "PERSIST foo4",
        "DEL foo4",
        "SET foo5 bar",
        "DEL foo5",
    ])  # fmt: skip
    c.close()


def test_float_increments_and_spop_propagate_their_effect(server: ServerProcess) -> None:
    r = server.client()
    r.set("f", "1.5")
    r.hset("h", "x", "1")
    r.sadd("one", "m")
    r.sadd("three", "a", "b", "c")
    r.sadd("two", "a", "b")
    c, _ = attach(server)
    r.incrbyfloat("f", 2)
    r.hincrbyfloat("h", "x", 2.5)
    r.spop("one")  # one member: SREM of it
    r.spop("three", 5)  # all of them: DEL
    r.srandmember("two", 2)  # read-only
    r.spop("two", 0)  # nothing
    r.sadd("two", "a")  # already there: nothing
    r.sadd("two", "z")
    r.close()
    expect_stream(c, [
        "SELECT 0",
        "SET f 3.5 KEEPTTL",
        "HSET h x 3.5",
        "SREM one m",
        "DEL three",
        "SADD two z",
    ])  # fmt: skip
    c.close()


def test_spop_with_count_propagates_srems_in_a_transaction(server: ServerProcess) -> None:
    r = server.client()
    r.sadd("s", *range(10))
    c, _ = attach(server)
    popped = sorted(m.decode() for m in r.spop("s", 3))
    r.close()
    got = read_stream(c, 6)
    assert got[:2] == ["SELECT 0", "MULTI"] and got[-1] == "EXEC"
    assert sorted(x.split()[2] for x in got[2:5]) == popped
    assert all(x.startswith("SREM s ") for x in got[2:5])
    c.close()


def test_transactions_wrap_only_more_than_one_write(server: ServerProcess) -> None:
    c, _ = attach(server)
    r = server.client()
    p = r.pipeline(transaction=True)  # one write: no MULTI/EXEC
    p.set("a", "1").get("a")
    p.execute()
    r.pipeline(transaction=True).execute()  # empty: nothing
    p = r.pipeline(transaction=True)  # only reads and a no-op write: nothing
    p.get("a").delete("nokey")
    p.execute()
    p = r.pipeline(transaction=True)
    p.set("b", "2").get("b").execute_command("INCR", "c")
    p.execute_command("SELECT", "2").set("x", "1")
    p.execute_command("SELECT", "0").execute_command("PUBLISH", "ch", "m")
    p.execute()
    r.execute_command("PUBLISH", "ch", "m")  # propagated as itself
    r.close()
    expect_stream(c, [
        "SELECT 0",
        "SET a 1",
        "MULTI",
        "SET b 2",
        "INCR c",
        "SELECT 2",
        "SET x 1",
        "SELECT 0",
        "PUBLISH ch m",
        "EXEC",
        "PUBLISH ch m",
    ])  # fmt: skip
    c.close()


def test_blocking_pops_propagate_as_non_blocking_forms(server: ServerProcess) -> None:
    r = server.client()
    r.rpush("l", "a", "b", "c", "d", "e")
    c, _ = attach(server)
    r.blpop(["nokey", "l"], 1)
    r.brpop(["l"], 1)
    r.execute_command("BLMOVE", "l", "dst", "Left", "RIGHT", "1")
    r.execute_command("BRPOPLPUSH", "l", "dst", "1")
    r.execute_command("BLMPOP", "1", "2", "nokey", "l", "LEFT", "COUNT", "5")
    r.execute_command("LMPOP", "1", "dst", "RIGHT")
    # and once served after waiting
    results: dict[str, Any] = {}

    def waiter(name: str, *args: str) -> None:
        w = server.client()
        try:
            results[name] = w.execute_command(*args)
        finally:
            w.close()

    cases: list[tuple[tuple[str, ...], Callable[[], object]]] = [
        (("BLPOP", "w1", "0"), lambda: r.rpush("w1", "x", "y")),
        (("BLMOVE", "w2", "w2dst", "right", "Left", "0"), lambda: r.lpush("w2", "x")),
        (("BRPOPLPUSH", "w3", "w3dst", "0"), lambda: r.lpush("w3", "x")),
        (("BLMPOP", "0", "1", "w4", "RIGHT", "COUNT", "10"), lambda: r.lpush("w4", "x", "y")),
    ]
    for args, push in cases:
        t = threading.Thread(target=waiter, args=(args[0], *args))
        t.start()
        wait_blocked(server)
        push()
        t.join(5)
        assert args[0] in results
    r.close()
    expect_stream(c, [
        "SELECT 0",
        "LPOP l",
        "RPOP l",
        "LMOVE l dst Left RIGHT",
        "RPOPLPUSH l dst",
        "LPOP l 1",
        "RPOP dst 1",
        "RPUSH w1 x y",
        "LPOP w1",
        "LPUSH w2 x",
        "LMOVE w2 w2dst right left",
        "LPUSH w3 x",
        "RPOPLPUSH w3 w3dst",
        "LPUSH w4 x y",
        "RPOP w4 2",
    ])  # fmt: skip
    c.close()


def test_expired_keys_propagate_as_del(server: ServerProcess) -> None:
    c, _ = attach(server)
    r = server.client()
    r.execute_command("SELECT", "1")
    r.set("gone", "v", px=50)
    time.sleep(0.3)  # expired: deleted lazily or by the cron, DEL either way
    assert r.get("gone") is None
    r.set("marker", "1")
    r.close()
    expect_stream(c, ["SELECT 1", "SET gone v PXAT <ms>", "DEL gone", "SET marker 1"])
    c.close()


def test_blocked_client_meeting_an_expired_key_deletes_it(server: ServerProcess) -> None:
    """A key pushed and expired inside one transaction (DEBUG SLEEP past its TTL):
    when EXEC tries to serve the client blocked on it, the key has expired, so it
    is deleted (DEL to replicas) and the client stays blocked, as Redis's
    unit/type/list "MULTI + LPUSH + EXPIRE + DEBUG SLEEP on blocked client"."""
    c, _ = attach(server)
    r = server.client()
    r.flushall()
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        b = server.raw()
        b.send(b.command("BRPOP", "k", "0"))
        wait_blocked(server)
        p = r.pipeline(transaction=True)
        p.rpush("k", "hello")
        p.pexpire("k", 100)
        p.execute_command("DEBUG", "SLEEP", "0.2")
        p.execute()
        # deleted by the serving attempt itself, before anything else looks at it
        expect_stream(c, ["SELECT 0", "FLUSHALL", "MULTI", "RPUSH k hello", "PEXPIREAT k <ms>",
                          "EXEC", "DEL k"])
        assert r.dbsize() == 0  # DBSIZE counts a stale key that is still stored
        assert r.info("clients")["blocked_clients"] == 1  # and the client stays blocked
        b.close()
    finally:
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        r.close()
        c.close()


def test_restore_propagates_absolute_ttl_and_expired_replacements(server: ServerProcess) -> None:
    """RESTORE with a relative TTL reaches replicas as RESTORE key <unix ms> payload
    ABSTTL; one whose TTL has passed creates nothing (nothing sent) or, replacing a
    key, deletes it (DEL), as Redis 7.0's restoreCommand. Its keyspace event is
    "restore"."""
    r = server.client()
    r.set("src", "bar")
    payload = r.dump("src")
    assert payload is not None
    c, _ = attach(server)
    now = int(time.time() * 1000)
    r.execute_command("RESTORE", "foo6", "100000", payload)
    r.execute_command("RESTORE", "foo7", str(now + 100000), payload, "ABSTTL")
    r.execute_command("RESTORE", "foo8", str(now - 1000), payload, "ABSTTL")  # nothing
    r.execute_command("RESTORE", "src", str(now - 1000), payload, "ABSTTL", "REPLACE")
    r.set("marker", "1")
    r.close()
    got = [c.read_reply() for _ in range(5)]
    assert got[0][0].upper() == b"SELECT"
    assert got[1][:2] == [b"RESTORE", b"foo6"] and got[1][3:] == [payload, b"ABSTTL"]
    assert abs(int(got[1][2]) - (now + 100000)) < 5000
    assert got[2] == [b"RESTORE", b"foo7", str(now + 100000).encode(), payload, b"ABSTTL"]
    assert got[3] == [b"DEL", b"src"]
    assert got[4] == [b"SET", b"marker", b"1"]
    c.expect_silence(0.3)
    c.close()


def test_expiry_propagates_unlink_with_lazyfree_lazy_expire(server: ServerProcess) -> None:
    r = server.client()
    r.config_set("lazyfree-lazy-expire", "yes")
    try:
        c, _ = attach(server)
        r.set("gone", "v", px=50)
        time.sleep(0.3)
        assert r.get("gone") is None
        r.set("marker", "1")
        expect_stream(c, ["SELECT 0", "SET gone v PXAT <ms>", "UNLINK gone", "SET marker 1"])
        c.close()
    finally:
        r.config_set("lazyfree-lazy-expire", "no")
        r.close()


def test_replicas_get_a_ping_every_period(server: ServerProcess) -> None:
    c, _ = attach(server)  # sets the period to 3600 s
    r = server.client()
    r.config_set("repl-ping-replica-period", 1)
    try:
        c.sock.settimeout(5)
        assert read_stream(c, 1) == ["ping"]
        c.close()
    finally:
        r.config_set("repl-ping-replica-period", 10)
        r.close()


def test_flush_swap_move_copy_rename_propagate_as_themselves(server: ServerProcess) -> None:
    r = server.client()
    r.set("k", "v")
    c, _ = attach(server)
    r.execute_command("RENAME", "k", "k2")
    r.execute_command("COPY", "k2", "k3")
    r.execute_command("MOVE", "k3", "4")
    r.execute_command("SWAPDB", "0", "4")
    r.execute_command("FLUSHDB")
    r.execute_command("FLUSHALL")
    r.close()
    expect_stream(c, [
        "SELECT 0",
        "RENAME k k2",
        "COPY k2 k3",
        "MOVE k3 4",
        "SWAPDB 0 4",
        "FLUSHDB",
        "FLUSHALL",
    ])  # fmt: skip
    c.close()


def test_psync_answers_fullresync_and_replconf(server: ServerProcess) -> None:
    c = server.raw()
    assert c.call("REPLCONF", "listening-port", "7777") == "OK"
    assert c.call("REPLCONF", "capa", "eof", "capa", "psync2") == "OK"
    assert c.call("REPLCONF", "ip-address", "10.1.2.3") == "OK"
    unknown = RespError(b"ERR Unrecognized REPLCONF option: nosuch")
    assert c.call("REPLCONF", "nosuch", "1") == unknown
    assert c.call("REPLCONF", "capa") == RespError(b"ERR syntax error")
    c.send(c.command("REPLCONF", "ACK", "0"))  # not a replica yet: no answer
    c.expect_open()
    c.close()
    r = server.client()
    _wait("earlier replicas to go", lambda: r.info("replication")["connected_slaves"] == 0)
    c, payload = attach(server, psync=True)
    assert payload.startswith(b"REDIS")
    info = r.info("replication")
    assert info["connected_slaves"] == 1
    role = r.execute_command("ROLE")
    assert role[0] == b"master" and len(role[2]) == 1
    c.send(c.command("REPLCONF", "ACK", "0"))  # a replica's ACK: never answered
    c.expect_silence(0.3)
    c.close()
    _wait("the replica to go", lambda: r.info("replication")["connected_slaves"] == 0)
    r.close()


def test_writes_of_every_family_propagate_as_redis_does(server: ServerProcess) -> None:
    """Only what changed the dataset, as it was called (GETSET as SET)."""
    commands = [
        "mset a 1 b 2",
        "msetnx a 1 c 3",
        "msetnx d 4 e 5",
        "setnx a 9",
        "setnx z 9",
        "getset a 7",
        "append a x",
        "setrange a 0 q",
        "incr n",
        "decr n",
        "incrby n 5",
        "decrby n 2",
        "setbit bits 7 1",
        "rpush l a b c d",
        "lpushx l z",
        "rpushx nolist z",
        "lpushx nolist z",
        "lset l 0 y",
        "linsert l before b bb",
        "linsert l before nothere x",
        "lrem l 0 bb",
        "lrem l 0 nothere",
        "ltrim l 0 1",
        "ltrim l 0 -1",
        "lpop l 0",
        "lmove l l2 left left",
        "rpoplpush l l2",
        "hset h a 1 b 2",
        "hsetnx h a 3",
        "hsetnx h c 3",
        "hmset h d 4",
        "hdel h a",
        "hdel h zz",
        "hincrby h b 5",
        "sadd s a b c",
        "sadd s2 b c d",
        "srem s a",
        "srem s zz",
        "smove s s2 b",
        "smove s s2 zz",
        "sinterstore dst s s2",
        "sunionstore dst2 s s2",
        "sdiffstore dst3 s2 s",
        "sinterstore empty s nokey",
        "del a b nokey",
        "unlink c",
        "touch d",
        "renamenx d e",
        "rename d f",
        "copy f g",
        "copy f g",
        "move g 2",
        "swapdb 0 1",
        "swapdb 0 1",
        "expire f 100",
        "persist f",
        "persist f",
        "object encoding f",
        "randomkey",
        "type f",
        "exists f",
    ]
    c, _ = attach(server)
    r = server.client()
    for cmd in commands:
        try:
            r.execute_command(*cmd.split())
        except redis.ResponseError:
            pass
    r.execute_command("SETRANGE", "nokey", "0", "")  # nothing written: nothing sent
    r.close()
    expect_stream(c, [
        "SELECT 0",
        "mset a 1 b 2",
        "msetnx d 4 e 5",
        "setnx z 9",
        "SET a 7",
        "append a x",
        "setrange a 0 q",
        "incr n",
        "decr n",
        "incrby n 5",
        "decrby n 2",
        "setbit bits 7 1",
        "rpush l a b c d",
        "lpushx l z",
        "lset l 0 y",
        "linsert l before b bb",
        "lrem l 0 bb",
        "ltrim l 0 1",
        "lmove l l2 left left",
        "rpoplpush l l2",
        "hset h a 1 b 2",
        "hsetnx h c 3",
        "hmset h d 4",
        "hdel h a",
        "hincrby h b 5",
        "sadd s a b c",
        "sadd s2 b c d",
        "srem s a",
        "smove s s2 b",
        "sinterstore dst s s2",
        "sunionstore dst2 s s2",
        "sdiffstore dst3 s2 s",
        "del a b nokey",
        "rename d f",
        "copy f g",
        "move g 2",
        "swapdb 0 1",
        "swapdb 0 1",
        "PEXPIREAT f <ms>",
        "persist f",
    ])  # fmt: skip
    c.close()


def test_replica_over_its_output_limit_is_dropped(server: ServerProcess) -> None:
    r = server.client()
    r.config_set("client-output-buffer-limit", "replica 1mb 0 0")
    try:
        _wait("earlier replicas to go", lambda: r.info("replication")["connected_slaves"] == 0)
        c, _ = attach(server)  # and never reads the stream
        assert r.info("replication")["connected_slaves"] == 1
        for i in range(24):
            r.set(f"big{i}", b"x" * (1 << 20))
        _wait("the replica to be dropped", lambda: r.info("replication")["connected_slaves"] == 0)
        c.close()
    finally:
        r.config_set("client-output-buffer-limit", "replica 256mb 64mb 60")
        r.close()


def test_info_lists_the_replica_with_its_handshake(server: ServerProcess) -> None:
    r = server.client()
    _wait("earlier replicas to go", lambda: r.info("replication")["connected_slaves"] == 0)
    other = server.raw()  # another connection's handshake is its own
    assert other.call("REPLCONF", "listening-port", "1111") == "OK"
    c = server.raw()
    assert c.call("REPLCONF", "listening-port", "7777") == "OK"
    assert c.call("REPLCONF", "ip-address", "10.1.2.3") == "OK"
    c.send(c.command("PSYNC", "?", "-1"))
    assert _line(c).startswith(b"+FULLRESYNC ")
    line = _line(c)
    while line == b"":
        line = _line(c)
    c.recv_exact(int(line[1:]))
    c.send(c.command("REPLCONF", "ACK", "0"))
    _wait("the replica online", lambda: r.info("replication")["slave0"]["state"] == "online")
    slave0 = r.info("replication")["slave0"]
    assert (slave0["ip"], slave0["port"]) == ("10.1.2.3", 7777)
    assert r.execute_command("ROLE")[2] == [[b"10.1.2.3", b"7777", b"0"]]
    c.close()
    other.close()
    r.close()


# --------------------------------------------------------------------------
# inreplay only
# --------------------------------------------------------------------------


def test_a_replica_s_own_commands_run_silently_or_not_at_all(
    inreplay_server: ServerProcess,
) -> None:
    """After SYNC only REPLCONF and PING run for the replica, without a reply: a
    write it sent would feed its own stream while its replies are dropped."""
    c, _ = attach(inreplay_server)
    c.send(c.command("PING") + c.command("SET", "fromreplica", "1"))
    c.send(c.command("REPLCONF", "ACK", "5"))
    c.expect_silence(0.3)
    r = inreplay_server.client()
    assert r.get("fromreplica") is None
    assert r.info("replication")["slave0"]["offset"] == 5
    r.set("k", "v")
    assert read_stream(c, 2) == ["SELECT 0", "SET k v"]
    c.close()
    r.close()


def crc64_jones(data: bytes) -> int:
    """Bit by bit, independent of the server's table: reflected 0xad93d23594c935a9."""
    poly = int(f"{0xAD93D23594C935A9:064b}"[::-1], 2)
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
    return crc


def test_rdb_image_has_version_10_and_a_crc64_trailer(
    inreplay_server: ServerProcess, tmp_path: Path
) -> None:
    assert crc64_jones(b"123456789") == 0xE9C6D914C4B8D9CA
    r = inreplay_server.client()
    r.set("s", "x" * 100)
    r.set("n", "12345")
    r.rpush("l", "a", "b")
    r.sadd("st", "m")
    r.hset("h", "f", "v")
    r.set("t", "v", ex=100)
    r.execute_command("SELECT", "5")
    r.set("five", "5")
    r.execute_command("REPLAY.CREATE", "replaytable_xyz", "CAPACITY", "16", "MAXBYTES", "65536")
    c, payload = attach(inreplay_server)
    c.close()
    r.execute_command("REPLAY.DROP", "replaytable_xyz")
    r.close()
    assert payload[:9] == b"REDIS0010"
    assert payload[-9] == 0xFF
    assert int.from_bytes(payload[-8:], "little") == crc64_jones(payload[:-8])
    assert b"\xfe\x05" in payload  # SELECTDB 5
    assert b"replaytable_xyz" not in payload.split(b"aof-base", 1)[1]  # replay tables are not in it
    checker = shutil.which("redis-check-rdb")  # Redis's own reader, where installed
    if checker:
        (tmp_path / "dump.rdb").write_bytes(payload)
        out = subprocess.run([checker, str(tmp_path / "dump.rdb")], capture_output=True, text=True)
        assert out.returncode == 0 and "RDB looks OK" in out.stdout, out.stdout + out.stderr
        assert "7 keys read" in out.stdout and "1 expires" in out.stdout, out.stdout


def test_no_replica_no_stream(inreplay_server: ServerProcess) -> None:
    """Without replicas nothing is encoded: the offset does not move."""
    r = inreplay_server.client()
    before = r.info("replication")["master_repl_offset"]
    for i in range(200):
        r.set(f"k{i}", i)
    assert r.info("replication")["master_repl_offset"] == before
    c, _ = attach(inreplay_server)
    r.set("k", "v")
    got = read_stream(c, 2)
    assert got == ["SELECT 0", "SET k v"]
    sent = len(b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n")
    assert r.info("replication")["master_repl_offset"] == before + sent
    c.close()
    r.close()


def test_replicas_share_one_copy_of_a_big_command(inreplay_server: ServerProcess) -> None:
    """Three replicas that read nothing: a 32 MB SET costs the value once in the
    keyspace and once in the stream, not once per replica."""
    conns = [attach(inreplay_server)[0] for _ in range(3)]
    r = inreplay_server.client()
    before = r.info("memory")["used_memory"]
    r.set("blob", b"b" * (32 << 20))
    grown = r.info("memory")["used_memory"] - before
    assert 64 << 20 <= grown + (8 << 20) and grown < 80 << 20, grown  # 3 copies would be 128 MB
    for c in conns:
        c.close()
    r.delete("blob")
    r.close()


def _snapshot(r: redis.Redis) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in sorted(r.scan_iter(count=1000)):
        t = r.type(key).decode()
        if t == "string":
            v: Any = r.get(key)
        elif t == "list":
            v = r.lrange(key, 0, -1)
        elif t == "set":
            v = sorted(r.smembers(key))
        elif t == "hash":
            v = sorted(r.hgetall(key).items())
        else:
            v = None
        out[key.decode()] = (t, v, r.pttl(key))
    return out


def _wait(what: str, cond: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_stock_redis_replicates_inreplay(server_factory: Callable[..., ServerProcess]) -> None:
    master = server_factory("inreplay")
    m = master.client()
    dbs = (0, 1, 3)
    for db in dbs:
        m.execute_command("SELECT", db)
        m.set("str", f"value{db}")
        m.set("int", 12345 + db)
        m.set("big", b"\x00\xff" * 40000)  # a big argument (taken over by the server)
        m.set("ttl", "t", ex=1000)
        m.rpush("list", *[f"e{i}" for i in range(300)])
        m.sadd("set", *range(100))
        m.sadd("intset", 1, 2, 3)
        m.hset("hash", mapping={"num": 1, **{f"f{i}": f"v{i}" for i in range(50)}})
        m.hset("hash_ttl", "f", "v")
        m.pexpire("hash_ttl", 500000)
    m.execute_command("SELECT", 0)
    replica = server_factory("redis", "--replicaof", HOST, str(master.port))
    s = replica.client()
    _wait("master_link_status:up", lambda: s.info("replication")["master_link_status"] == "up")
    info = m.info("replication")
    assert info["connected_slaves"] == 1 and info["slave0"]["state"] == "online"
    assert info["slave0"]["port"] == replica.port
    # writes after the replica attached: in several databases, in MULTI,
    # blocking pops served, expiring keys
    for db in dbs:
        m.execute_command("SELECT", db)
        m.set("after", db)
        m.append("str", "+")
        m.incrbyfloat("float", 1.25)
        m.lpush("list", "head")
        m.rpop("list")
        m.srem("set", 5)
        m.spop("set", 3)
        m.hincrbyfloat("hash", "num", 0.5)
        m.hdel("hash", "f2")
        m.expire("str", 5000)
        m.getex("int", px=700000)
        m.set("soon", "x", px=300)
    m.execute_command("SELECT", 0)
    p = m.pipeline(transaction=True)
    p.set("tx1", "a").rpush("txl", "1", "2").sadd("txs", "m").execute_command("SELECT", 1)
    p.set("tx2", "b")
    p.execute()
    w = master.client()
    got: list[Any] = []
    t = threading.Thread(target=lambda: got.append(w.blpop(["queue"], 5)))
    t.start()
    wait_blocked(master)
    m.execute_command("SELECT", 0)
    m.rpush("queue", "job1", "job2")
    t.join(5)
    w.close()
    assert got == [(b"queue", b"job1")]
    m.set("last", "1")
    _wait("the last write", lambda: s.get("last") == b"1")
    # the expiring keys are gone on the replica: deleted there by the DEL
    # inreplay propagated (a replica never expires keys itself; DBSIZE counts them)
    for db in dbs:
        s.execute_command("SELECT", db)
        want = {0: 16, 1: 12, 3: 11}[db]  # "soon" gone
        _wait(f"db {db}'s expired key to go", lambda w=want: s.execute_command("DBSIZE") == w)
    for db in dbs:
        m.execute_command("SELECT", db)
        s.execute_command("SELECT", db)
        mine, theirs = _snapshot(m), _snapshot(s)
        assert mine.keys() == theirs.keys()
        for key, (t_, v, pttl) in mine.items():
            t2, v2, pttl2 = theirs[key]
            assert (t_, v) == (t2, v2), key
            assert (pttl == -1) == (pttl2 == -1) and abs(pttl - pttl2) < 2000, key
    m.close()
    s.close()
