"""Pinned reply memory under partial writes.

A big GET or REPLAY.SAMPLE reply goes out by reference to the stored value or
the replay arena. A client that does not read leaves most of it unsent; the
server pins that memory instead of copying it. These tests make such partial
writes (a reader with a small receive buffer that sends a request and does not
read) and then change the data underneath from another connection: overwrite,
delete, expire, flush, wrap the arena ring with new items, drop the table. The
reader must still get the original bytes, and nothing may leak: a reader that
disconnects releases what it pinned (used_memory returns to its baseline).

Runs against inreplay on the kernel stack and, where the session has one, on
the DPDK stack.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import redis
from conftest import RawConn, ServerProcess
from helpers import mbulk

BIG = 13 * 1024 * 1024
ITEM = 28 * 1024
NITEMS = 512




@pytest.fixture
def r(srv: ServerProcess) -> Iterator[redis.Redis]:
    c = srv.client()
    try:
        yield c
    finally:
        c.close()


def slow_reader(srv: ServerProcess) -> RawConn:
    """A raw connection with a small receive window, so big replies stay pending."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.settimeout(30)
    sock.connect((srv.host, srv.port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c = RawConn.__new__(RawConn)
    c.sock = sock
    c.timeout = 30
    c.buf = bytearray()
    if srv.password is not None:
        c.send(mbulk("AUTH", srv.password))
        c.expect(b"+OK\r\n")
    return c


def blob(seed: int, n: int) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


def used_memory(r: redis.Redis) -> int:
    return int(r.info("memory")["used_memory"])


def pinned(r: redis.Redis) -> tuple[int, int]:
    """(pinned buffers, bytes of detached pinned memory) from INFO memory."""
    m = r.info("memory")
    return int(m["pinned_buffers"]), int(m["used_memory_pinned_detached"])


def wait_unpinned(r: redis.Redis, baseline: int) -> None:
    deadline = time.monotonic() + 10
    while (pinned(r) != (0, 0) or used_memory(r) > baseline + 256 * 1024) and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    assert pinned(r) == (0, 0)
    assert used_memory(r) <= baseline + 256 * 1024, (used_memory(r), baseline)


def settle() -> None:
    """Let the server run the request and fill the socket buffers."""
    time.sleep(0.3)


def make_table(r: redis.Redis, count: int = NITEMS, *, size: int = ITEM, first: int = 0,
               name: str | None = None, create: bool = True) -> str:
    t = name or f"pin-{uuid.uuid4().hex[:10]}"
    if create:
        # the arena holds exactly `count` items: the next ADD wraps the ring
        assert r.execute_command("REPLAY.CREATE", t, "CAPACITY", count,
                                 "MAXBYTES", count * size) == b"OK"
    for start in range(first, first + count, 64):
        args: list[Any] = []
        for i in range(start, min(start + 64, first + count)):
            args += ["1", item_for(i, size)]
        r.execute_command("REPLAY.ADD", t, *args)
    return t


def item_for(i: int, size: int = ITEM) -> bytes:
    # cheap and distinct per id: an 8-byte id pattern repeated
    return (i.to_bytes(8, "little") * (size // 8 + 1))[:size]


def check_sample(reply: Any, n: int, size: int = ITEM, packed: bool = False) -> np.ndarray:
    if packed:
        assert isinstance(reply, bytes) and len(reply) == 12 * n + size * n
        ids = np.frombuffer(reply, "<i8", n)
        for k, i in enumerate(ids.tolist()):
            off = 12 * n + k * size
            assert reply[off:off + size] == item_for(i, size), f"item {k} (id {i}) changed"
        return ids
    ids_b, _, items = reply
    ids = np.frombuffer(ids_b, "<i8")
    assert len(ids) == n and len(items) == n
    for k, i in enumerate(ids.tolist()):
        assert items[k] == item_for(i, size), f"item {k} (id {i}) changed"
    return ids


# --------------------------------------------------------------------------
# stored values
# --------------------------------------------------------------------------


def _overwrite(r: redis.Redis) -> None:
    r.set("k", blob(2, BIG))


def _overwrite_same_size_in_place_candidate(r: redis.Redis) -> None:
    r.set("k", blob(3, BIG - 100))  # would fit the old buffer


def _overwrite_small(r: redis.Redis) -> None:
    r.set("k", b"small")


def _set_get(r: redis.Redis) -> None:
    assert r.set("k", blob(4, 5000), get=True) == blob(1, BIG)


def _delete(r: redis.Redis) -> None:
    assert r.delete("k") == 1


def _expire(r: redis.Redis) -> None:
    assert r.pexpire("k", 1)
    time.sleep(0.05)
    assert r.get("k") is None


def _expire_negative(r: redis.Redis) -> None:
    assert r.expire("k", -1)


def _flushall(r: redis.Redis) -> None:
    assert r.flushall()


VALUE_OPS: dict[str, Callable[[redis.Redis], None]] = {
    "set": _overwrite,
    "set_fits_in_place": _overwrite_same_size_in_place_candidate,
    "set_small": _overwrite_small,
    "set_get": _set_get,
    "del": _delete,
    "expire": _expire,
    "expire_negative": _expire_negative,
    "flushall": _flushall,
}


@pytest.mark.parametrize("op", sorted(VALUE_OPS))
def test_get_reader_keeps_original_value(srv: ServerProcess, r: redis.Redis, op: str) -> None:
    original = blob(1, BIG)
    r.set("k", original)
    with slow_reader(srv) as c:
        c.send(c.command("GET", "k") + c.command("MGET", "k", "k"))
        settle()
        VALUE_OPS[op](r)
        assert r.ping()
        got = c.read_reply()
        assert len(got) == BIG and got == original
        assert c.read_reply() == [original, original]
        c.expect_open()
        assert pinned(r) == (0, 0)
    after = r.get("k")
    assert after is None or after != original


def test_pipelined_get_set_get_on_one_connection(srv: ServerProcess, r: redis.Redis) -> None:
    a, b = blob(5, BIG), blob(6, BIG)
    r.set("k", a)
    with slow_reader(srv) as c:
        c.send(c.command("GET", "k") + c.command("SET", "k", b) + c.command("GET", "k")
               + c.command("DEL", "k") + c.command("GET", "k"))
        settle()
        assert c.read_reply() == a
        assert c.read_reply() == "OK"
        assert c.read_reply() == b
        assert c.read_reply() == 1
        assert c.read_reply() is None


def test_value_disconnect_while_pinned_frees_everything(srv: ServerProcess,
                                                        r: redis.Redis) -> None:
    baseline = used_memory(r)
    with srv.client() as w:
        w.set("k", blob(7, BIG))
    readers = [slow_reader(srv) for _ in range(3)]
    for c in readers:
        c.send(c.command("GET", "k"))
    settle()
    assert pinned(r) == (1, 0)
    r.delete("k")  # detached, still counted while the readers hold it
    assert used_memory(r) > baseline + BIG
    npins, detached = pinned(r)
    assert npins == 1 and BIG <= detached < BIG + 1024
    for c in readers:
        c.close()
    wait_unpinned(r, baseline)
    assert r.ping()


def test_four_slow_readers_get_the_same_13mb(srv: ServerProcess, r: redis.Redis) -> None:
    original = blob(8, BIG)
    r.set("k", original)
    readers = [slow_reader(srv) for _ in range(4)]
    try:
        for c in readers:
            c.send(c.command("GET", "k"))
        settle()
        r.set("k", b"new")
        for c in readers:
            assert c.read_reply() == original
    finally:
        for c in readers:
            c.close()


# --------------------------------------------------------------------------
# replay arena
# --------------------------------------------------------------------------


@pytest.mark.parametrize("packed", [False, True], ids=["array", "packed"])
def test_sample_reader_survives_arena_wrap(srv: ServerProcess, r: redis.Redis,
                                           packed: bool) -> None:
    t = make_table(r)
    opts = ["PACKED"] if packed else []
    with slow_reader(srv) as c:
        c.send(c.command("REPLAY.SAMPLE", t, NITEMS, *opts)
               + c.command("REPLAY.SAMPLE", t, 100, *opts))
        settle()
        # rewrite the whole ring, twice over
        make_table(r, 2 * NITEMS, first=NITEMS, name=t, create=False)
        ids = check_sample(c.read_reply(), NITEMS, packed=packed)
        assert ids.max() < NITEMS
        check_sample(c.read_reply(), 100, packed=packed)
        # and new samples see the new items
        c.send(c.command("REPLAY.SAMPLE", t, 50, *opts))
        assert check_sample(c.read_reply(), 50, packed=packed).min() >= 2 * NITEMS


def test_sample_then_add_on_one_connection(srv: ServerProcess, r: redis.Redis) -> None:
    t = make_table(r)
    with slow_reader(srv) as c:
        adds = b"".join(
            c.command("REPLAY.ADD", t, *[x for i in range(s, s + 64) for x in ("1", item_for(i))])
            for s in range(NITEMS, 2 * NITEMS, 64))
        c.send(c.command("REPLAY.SAMPLE", t, NITEMS) + adds
               + c.command("REPLAY.SAMPLE", t, NITEMS, "PACKED"))
        settle()
        assert check_sample(c.read_reply(), NITEMS).max() < NITEMS
        for _ in range(NITEMS // 64):
            assert len(c.read_reply()) == 64
        assert check_sample(c.read_reply(), NITEMS, packed=True).min() >= NITEMS


@pytest.mark.parametrize("how", ["drop", "flushall", "drop_and_recreate"])
def test_sample_reader_survives_drop(srv: ServerProcess, r: redis.Redis, how: str) -> None:
    t = make_table(r)
    with slow_reader(srv) as c:
        c.send(c.command("REPLAY.SAMPLE", t, NITEMS)
               + c.command("REPLAY.SAMPLE", t, NITEMS, "PACKED"))
        settle()
        if how == "flushall":
            r.flushall()
        else:
            r.execute_command("REPLAY.DROP", t)
        if how == "drop_and_recreate":
            make_table(r, NITEMS, first=10 * NITEMS, name=t)
        check_sample(c.read_reply(), NITEMS)
        check_sample(c.read_reply(), NITEMS, packed=True)
        c.expect_open()
        assert pinned(r) == (0, 0)


def test_sample_disconnect_while_pinned_frees_everything(srv: ServerProcess,
                                                         r: redis.Redis) -> None:
    baseline = used_memory(r)
    with srv.client() as w:
        t = make_table(w)
        w.set("k", blob(9, BIG))
    readers = [slow_reader(srv) for _ in range(3)]
    for k, c in enumerate(readers):
        c.send(c.command("REPLAY.SAMPLE", t, NITEMS, *(["PACKED"] if k % 2 else []))
               + c.command("GET", "k"))
    settle()
    assert pinned(r)[0] >= 1
    r.execute_command("REPLAY.DROP", t)
    r.delete("k")
    assert used_memory(r) > baseline + BIG  # the dropped arena and the value still count
    assert pinned(r)[1] >= BIG
    for c in readers:
        c.close()
    wait_unpinned(r, baseline)
    # the server is fine and a new table of the same name works
    t2 = make_table(r, 8, name=t)
    assert len(r.execute_command("REPLAY.SAMPLE", t2, 4)[2]) == 4
