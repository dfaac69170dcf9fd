"""Reply order of small hashes and integer sets, against stock redis-server too.

Redis 7.0 keeps a hash of at most hash-max-listpack-entries fields, each field
and value at most hash-max-listpack-value bytes, as a listpack: HGETALL, HKEYS,
HVALS, HSCAN, HRANDFIELD with a count and DUMP give its fields in insertion
order (an overwritten field keeps its place, HDEL closes the gap). Past a limit
it becomes a hashtable for good. A set of at most set-max-intset-entries
integers is an intset: SMEMBERS and SSCAN give it ascending. Every test runs on
both servers (the `r` fixture) and states the order Redis gives.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
import redis

if TYPE_CHECKING:
    from conftest import ServerPool

LIMITS = ("hash-max-listpack-entries", "hash-max-listpack-value", "set-max-intset-entries")


@pytest.fixture
def rc(r: redis.Redis) -> Iterator[redis.Redis]:
    """`r` with the encoding limits put back afterwards."""
    saved = {k: r.config_get(k)[k] for k in LIMITS}
    try:
        yield r
    finally:
        for k, v in saved.items():
            r.config_set(k, v)


def b(*xs: str | int) -> list[bytes]:
    return [str(x).encode() for x in xs]


def pairs(fields: list[str], values: dict[str, str]) -> list[bytes]:
    out: list[bytes] = []
    for f in fields:
        out += [f.encode(), values[f].encode()]
    return out


def raw(r: redis.Redis, *cmd: str | int) -> list[bytes]:
    """The array reply as the server sent it (redis-py makes sets and dicts of some)."""
    conn = r.connection  # `r` holds one connection
    assert conn is not None
    conn.send_command(*cmd)
    return list(conn.read_response())


def hgetall_raw(r: redis.Redis, key: str) -> list[bytes]:
    return raw(r, "HGETALL", key)


def hscan_all(r: redis.Redis, key: str) -> tuple[int, list[bytes]]:
    cursor, items = raw(r, "HSCAN", key, 0)
    return int(cursor), list(items)


def assert_order(r: redis.Redis, key: str, fields: list[str], values: dict[str, str]) -> None:
    assert r.object("encoding", key) == b"listpack"
    assert r.hkeys(key) == b(*fields)
    assert r.hvals(key) == b(*(values[f] for f in fields))
    assert hgetall_raw(r, key) == pairs(fields, values)
    assert hscan_all(r, key) == (0, pairs(fields, values))
    # a count at least the size gives the whole hash, in its order
    assert raw(r, "HRANDFIELD", key, len(fields) + 5, "WITHVALUES") == pairs(fields, values)


def test_insertion_order_after_writes(r: redis.Redis) -> None:
    order = ["zeta", "alpha", "mid", "7", "beta", "x", "a1", "0", "omega", "run_id"]
    vals = {f: f"v-{f}" for f in order}
    r.hset("h", mapping={f: vals[f] for f in order[:4]})
    r.execute_command("HMSET", "h", *[x for f in order[4:7] for x in (f, vals[f])])
    assert r.hsetnx("h", "0", vals["0"]) == 1
    assert r.hsetnx("h", "zeta", "ignored") == 0  # exists: neither value nor place changes
    r.hincrby("h", "omega", 5)
    vals["omega"] = "5"
    r.hincrbyfloat("h", "run_id", 1.5)
    vals["run_id"] = "1.5"
    assert_order(r, "h", order, vals)

    # an overwrite keeps the field's place, whatever writes it
    r.hset("h", "alpha", "new")
    vals["alpha"] = "new"
    r.hincrby("h", "omega", 1)
    vals["omega"] = "6"
    r.hincrbyfloat("h", "run_id", 1)
    vals["run_id"] = "2.5"
    r.execute_command("HMSET", "h", "mid", "m2")
    vals["mid"] = "m2"
    assert_order(r, "h", order, vals)

    # HDEL closes the gap; a field added again goes last
    assert r.hdel("h", "mid", "zeta", "nosuch") == 2
    order.remove("mid")
    order.remove("zeta")
    assert_order(r, "h", order, vals)
    r.hset("h", "zeta", "back")
    vals["zeta"] = "back"
    order.append("zeta")
    assert_order(r, "h", order, vals)


def test_hrandfield_few_of_the_hash_keeps_its_order(r: redis.Redis) -> None:
    """A count up to a third of the size: Redis picks from the listpack in order."""
    order = [f"f{i:02d}" for i in range(40)][::-1]
    r.hset("h", mapping={f: "v" for f in order})
    for _ in range(20):
        got = [x.decode() for x in raw(r, "HRANDFIELD", "h", 13)]
        assert len(set(got)) == 13
        assert got == sorted(got, key=order.index)


def test_at_the_entries_limit_and_past_it(rc: redis.Redis) -> None:
    rc.config_set("hash-max-listpack-entries", 16)
    order = [f"k{(i * 7) % 16}" for i in range(16)]
    vals = {f: f + "!" for f in order}
    for f in order:
        rc.hset("h", f, vals[f])
    assert_order(rc, "h", order, vals)  # 16 fields: still a listpack

    rc.hset("h", "one-more", "v")
    assert rc.object("encoding", "h") == b"hashtable"
    rc.hdel("h", "one-more", *order[:10])
    assert rc.object("encoding", "h") == b"hashtable"  # never back
    assert sorted(rc.hkeys("h")) == sorted(b(*order[10:]))


def test_at_the_value_limit_and_past_it(rc: redis.Redis) -> None:
    rc.config_set("hash-max-listpack-value", 8)
    order = ["bbbbbbbb", "a", "cc", "d"]
    vals = {"bbbbbbbb": "12345678", "a": "x", "cc": "y", "d": "zzzzzzzz"}
    for f in order:
        rc.hset("h", f, vals[f])
    assert_order(rc, "h", order, vals)  # 8 bytes: still a listpack
    rc.hset("h", "a", "123456789")
    assert rc.object("encoding", "h") == b"hashtable"
    rc.hset("h", "a", "x")
    assert rc.object("encoding", "h") == b"hashtable"


def test_rename_copy_move_restore_keep_order(r: redis.Redis) -> None:
    order = ["q", "w", "e", "r", "t", "y", "u", "i", "o", "p", "a", "s"]
    vals = {f: f * 3 for f in order}
    for f in order:
        r.hset("h", f, vals[f])
    r.hdel("h", "e")
    order.remove("e")

    r.rename("h", "h2")
    assert_order(r, "h2", order, vals)
    assert r.copy("h2", "h3") == 1
    assert_order(r, "h3", order, vals)
    assert r.move("h3", 1) == 1
    r.execute_command("SELECT", 1)  # `r` holds one connection
    try:
        assert_order(r, "h3", order, vals)
        r.delete("h3")
    finally:
        r.execute_command("SELECT", 0)

    dump = r.dump("h2")
    r.restore("h4", 0, dump)
    assert_order(r, "h4", order, vals)
    assert r.dump("h4") == dump  # the same bytes: the fields in the same order


def test_restore_converting_to_hashtable_keeps_the_values(rc: redis.Redis) -> None:
    """Redis's "Hash ziplist of various encodings": dump a listpack, restore as a table."""
    rc.config_set("hash-max-listpack-entries", 1000)
    rc.config_set("hash-max-listpack-value", 100000)
    order = ["ZIP_INT_8B", "ZIP_INT_16B", "ZIP_INT_64B", "ZIP_STR_06B", "ZIP_STR_14B", "ZIP_INT_0"]
    vals = {
        "ZIP_INT_8B": "127",
        "ZIP_INT_16B": "32767",
        "ZIP_INT_64B": "9223372036854775808",
        "ZIP_STR_06B": "x" * 31,
        "ZIP_STR_14B": "x" * 8191,
        "ZIP_INT_0": "0",
    }
    for f in order:
        rc.hset("k", f, vals[f])
    assert_order(rc, "k", order, vals)
    dump = rc.dump("k")
    rc.config_set("hash-max-listpack-entries", 2)
    rc.restore("kk", 0, dump)
    assert rc.object("encoding", "kk") == b"hashtable"
    assert rc.hgetall("kk") == {f.encode(): vals[f].encode() for f in order}
    assert hgetall_raw(rc, "k") == pairs(order, vals)


def test_debug_reload_keeps_order(r: redis.Redis) -> None:
    order = [f"field:{(i * 37) % 101}" for i in range(101)]
    vals = {f: str(i) for i, f in enumerate(order)}
    r.hset("h", mapping={f: vals[f] for f in order})
    r.hdel("h", order[50])
    del order[50]
    r.sadd("s", 9, -4, 100, 0, 3)
    assert r.execute_command("DEBUG", "RELOAD") in (True, b"OK", "OK")
    assert_order(r, "h", order, vals)
    assert raw(r, "SMEMBERS", "s") == b(-4, 0, 3, 9, 100)


def test_intset_members_ascending(rc: redis.Redis) -> None:
    members = [17, -3, 1000000, 5, 0, -9223372036854775808, 42, 9223372036854775807, 8]
    rc.sadd("s", *members)
    rc.srem("s", 5)
    rc.sadd("s", 6)
    want = b(*sorted([m for m in members if m != 5] + [6]))
    assert rc.object("encoding", "s") == b"intset"
    assert raw(rc, "SMEMBERS", "s") == want
    cursor, got = raw(rc, "SSCAN", "s", 0)
    assert (int(cursor), list(got)) == (0, want)
    assert raw(rc, "SRANDMEMBER", "s", 100) == want
    rc.sadd("t", 3, 1, 2)
    assert raw(rc, "SUNION", "s", "t") == b(*sorted({int(x) for x in want} | {1, 2, 3}))
    rc.copy("s", "s2")
    assert raw(rc, "SMEMBERS", "s2") == want
    rc.restore("s3", 0, rc.dump("s"))
    assert raw(rc, "SMEMBERS", "s3") == want

    rc.config_set("set-max-intset-entries", 4)
    rc.sadd("small", 4, 3, 2, 1)
    assert raw(rc, "SMEMBERS", "small") == b(1, 2, 3, 4)
    rc.sadd("small", 0)
    assert rc.object("encoding", "small") == b"hashtable"
    rc.sadd("mixed", 2, 1, "a")
    assert rc.object("encoding", "mixed") == b"hashtable"
    assert sorted(raw(rc, "SMEMBERS", "mixed")) == [b"1", b"2", b"a"]


def test_random_writes_reply_like_redis_byte_for_byte(server_pool: ServerPool) -> None:
    """Random writes to small hashes and integer sets, replies compared with stock's bytes."""
    servers = [server_pool.get("redis"), server_pool.get("inreplay")]
    for s in servers:
        s.flushall()
    conns = [s.raw() for s in servers]
    try:
        for c in conns:
            c.send(c.command("CONFIG", "SET", "hash-max-listpack-entries", 16))
            assert c.read_reply_bytes() == b"+OK\r\n"

        def run(*cmd: str | int) -> None:
            got = []
            for c in conns:
                c.send(c.command(*cmd))
                got.append(c.read_reply_bytes())
            assert got[1] == got[0], f"{cmd!r}: redis {got[0]!r}, inreplay {got[1]!r}"

        rng = random.Random(11)
        for _ in range(3000):
            # at most 16 fields: a listpack throughout
            h, f, n = f"h{rng.randrange(4)}", f"f{rng.randrange(11)}", rng.randrange(-50, 50)
            st = f"s{rng.randrange(3)}"
            op = rng.randrange(9)
            if op == 0:
                run("HSET", h, f, n, f"g{n % 5}", "x" * rng.randrange(3))
            elif op == 1:
                run("HDEL", h, f, f"g{rng.randrange(5)}")
            elif op == 2:
                run("HINCRBY", h, f, n)
            elif op == 3:
                run("HSETNX", h, f, n)
            elif op == 4:
                run("SADD", st, n, rng.randrange(-9, 9))
            elif op == 5:
                run("SREM", st, n)
            elif op == 6:
                run("HGETALL", h)
                run("HSCAN", h, 0, "MATCH", "f1*")
            elif op == 7:
                run("SMEMBERS", st)
                run("SUNION", "s0", "s1")
                run("SDIFF", st, "s2")
            else:
                run("HKEYS", h)
                run("HVALS", h)
                run("OBJECT", "ENCODING", h)
    finally:
        for c in conns:
            c.send(c.command("CONFIG", "SET", "hash-max-listpack-entries", 512))
            c.read_reply_bytes()
            c.close()
