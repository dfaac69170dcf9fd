"""Replies whose bodies the command frees or rewrites before the reply is written.

A body of 4 KB or more is where a reply could point at memory instead of
copying it. Every command here replies with such a body and then, in the same
command (or the next one on the same connection, pipelined), frees, reuses or
rewrites the memory it came from: popped list elements, SPOP'd members,
overwritten hash values, DUMP's and FUNCTION DUMP's buffers, ACL LIST's
per-user text. Each reply must carry the bytes the command saw, on every
server kind (stock Redis is the reference).
"""

from __future__ import annotations

import random

import redis

BIG = 5000  # over the by-reference threshold (IR_REF_MIN, 4096)


def body(tag: bytes, n: int = BIG) -> bytes:
    """n bytes that neither compress (DUMP's LZF) nor repeat across tags."""
    return random.Random(tag).randbytes(n)


def test_popped_list_elements_reach_the_client_intact(r: redis.Redis) -> None:
    items = [body(bytes([65 + i])) for i in range(6)]
    r.rpush("l", *items)
    p = r.pipeline(transaction=False)
    p.lpop("l")
    p.rpop("l", 2)
    p.rpush("l", body(b"z"), body(b"y"))  # reuses what was freed
    p.lrange("l", 0, -1)
    got = p.execute()
    assert got[0] == items[0]
    assert got[1] == [items[5], items[4]]
    assert got[3] == [items[1], items[2], items[3], body(b"z"), body(b"y")]


def test_blocking_pop_replies_with_the_element_it_frees(r: redis.Redis) -> None:
    r.rpush("bl", body(b"q"))
    assert r.blpop(["bl"], timeout=1) == (b"bl", body(b"q"))


def test_spop_and_hash_overwrites_reply_with_what_was_there(r: redis.Redis) -> None:
    members = {body(bytes([97 + i])) for i in range(4)}
    r.sadd("s", *members)
    r.hset("h", "f", body(b"old"))
    p = r.pipeline(transaction=False)
    p.spop("s", 4)
    p.hget("h", "f")
    p.hset("h", "f", body(b"new"))
    p.hgetall("h")
    p.hdel("h", "f")
    got = p.execute()
    assert set(got[0]) == members
    assert got[1] == body(b"old")
    assert got[3] == {b"f": body(b"new")}


def test_dump_of_big_values_restores(r: redis.Redis) -> None:
    r.hset("hd", mapping={f"f{i}": body(str(i).encode()) for i in range(3)})
    r.rpush("ld", body(b"e"), body(b"f"))
    for key in ("hd", "ld"):
        payload = r.dump(key)
        assert payload is not None and len(payload) > BIG
        r.restore(key + "2", 0, payload)
    assert r.hgetall("hd2") == r.hgetall("hd")
    assert r.lrange("ld2", 0, -1) == r.lrange("ld", 0, -1)


def test_acl_list_and_getuser_with_long_patterns(r: redis.Redis) -> None:
    pattern = "k" + "x" * BIG + "*"
    channel = "c" + "y" * BIG
    try:
        r.execute_command("ACL", "SETUSER", "lp1", "on", ">pw", f"~{pattern}", f"&{channel}")
        r.execute_command("ACL", "SETUSER", "lp2", "on", ">pw", f"%R~{pattern}", "&z*")
        p = r.pipeline(transaction=False)
        p.execute_command("ACL", "LIST")
        p.execute_command("ACL", "GETUSER", "lp1")
        p.execute_command("ACL", "GETUSER", "lp2")
        listed, u1, u2 = p.execute()
        mine = sorted(x for x in listed if x.startswith((b"user lp1 ", b"user lp2 ")))
        assert len(mine) == 2
        assert f"~{pattern}".encode() in mine[0] and f"&{channel}".encode() in mine[0]
        assert f"%R~{pattern}".encode() in mine[1]
        f1 = dict(zip(u1[::2], u1[1::2], strict=True))
        f2 = dict(zip(u2[::2], u2[1::2], strict=True))
        assert f1[b"keys"] == f"~{pattern}".encode()
        assert f1[b"channels"] == f"&{channel}".encode()
        assert f2[b"keys"] == f"%R~{pattern}".encode()
        assert f2[b"channels"] == b"&z*"
    finally:
        r.execute_command("ACL", "DELUSER", "lp1", "lp2")
