"""REPLAY.ADD ... PACKED, the parser's by-reference bodies, and pipelined inserts.

    REPLAY.ADD t PACKED n <priorities|MAX> <items> [TIMEOUT s]
        -> one bulk string of n int64 ids

priorities: n little-endian float64 (or the word MAX for every item); items: n items of
one size back to back. ReplayClient.add sends one array with a row per item this way,
and ReplayClient.inserter() pipelines such batches. Run on the native host (kernel
TCP, and the shm rings, where the parser reads bodies straight from the request ring)
and on the module host (Redis's parser, the same command code).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
import redis
from conftest import replay_group

from pyctl.client import ReplayClient
from pyctl.errors import NoSuchTableError, RateLimited
from pyctl.sharded import ShardedReplayClient

if TYPE_CHECKING:
    from conftest import ServerProcess


def _client(srv: ServerProcess) -> ReplayClient:
    return ReplayClient(srv.host, srv.port, shm=srv.kind == "shm", password=srv.password)


@pytest.fixture
def rc(replay_server: ServerProcess) -> Iterator[ReplayClient]:
    c = _client(replay_server)
    yield c
    c.close()


@pytest.fixture
def r(replay_server: ServerProcess) -> Iterator[redis.Redis]:
    c = replay_server.client()
    yield c
    c.close()


def _f64(*p: float) -> bytes:
    return np.array(p, dtype="<f8").tobytes()


def _items(n: int, size: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, size), dtype=np.uint8)


def _all_items(rc: ReplayClient, table: str, size: int) -> dict[int, bytes]:
    """Every item of a FIFO table, by id (a queue of everything: sample it all)."""
    n = rc.info(table)["size"]
    s = rc.sample(table, n, item_shape=(size,))
    return {int(i): bytes(row) for i, row in zip(s.ids, s.items, strict=True)}


def test_packed_add_stores_each_item_and_priority(r: redis.Redis) -> None:
    r.execute_command("REPLAY.CREATE", "p", "CAPACITY", 100, "ALPHA", 1, "EPSILON", 0)
    items = _items(3, 10)
    ids = r.execute_command("REPLAY.ADD", "p", "PACKED", 3, _f64(1, 2, 4), items.tobytes())
    assert np.frombuffer(ids, "<i8").tolist() == [0, 1, 2]
    info = dict(zip(*[iter(r.execute_command("REPLAY.INFO", "p"))] * 2, strict=True))
    assert float(info[b"total_priority"]) == 7.0
    assert float(info[b"max_priority"]) == 4.0
    ids = r.execute_command("REPLAY.ADD", "p", "packed", 3, "max", items.tobytes(),
                            "TIMEOUT", 1)
    assert np.frombuffer(ids, "<i8").tolist() == [3, 4, 5]
    info = dict(zip(*[iter(r.execute_command("REPLAY.INFO", "p"))] * 2, strict=True))
    assert float(info[b"total_priority"]) == 19.0  # three more at the max, 4


@pytest.mark.parametrize(("args", "words"), [
    (("PACKED", 0, "MAX", b"x" * 30), "PACKED needs a count n >= 1"),
    (("PACKED", 4, "MAX", b"x" * 30), "n items of one size"),
    (("PACKED", "x", "MAX", b"x" * 30), "got n 'x'"),
    (("PACKED", 3, b"12", b"x" * 30), "MAX or 3 little-endian float64"),
    (("PACKED", 3, "MAX"), "syntax error"),
    (("PACKED", 3, "MAX", b"x" * 30, "TIMEOUT"), "syntax error"),
])
def test_packed_add_refuses_bad_input_whole(r: redis.Redis, args: tuple[object, ...],
                                            words: str) -> None:
    r.execute_command("REPLAY.CREATE", "p", "CAPACITY", 100)
    with pytest.raises(redis.ResponseError, match=words):
        r.execute_command("REPLAY.ADD", "p", *args)
    info = dict(zip(*[iter(r.execute_command("REPLAY.INFO", "p"))] * 2, strict=True))
    assert info[b"size"] == 0


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_packed_add_names_the_bad_priority(r: redis.Redis, bad: float) -> None:
    r.execute_command("REPLAY.CREATE", "p", "CAPACITY", 100)
    with pytest.raises(redis.ResponseError, match=r"^BADPRIO 2 invalid priority"):
        r.execute_command("REPLAY.ADD", "p", "PACKED", 3, _f64(1, 1, bad), b"x" * 30)
    with pytest.raises(redis.ResponseError, match="NOTABLE"):
        r.execute_command("REPLAY.ADD", "q", "PACKED", 3, "MAX", b"x" * 30)
    assert r.execute_command("REPLAY.INFO", "p")[3] == 0


@pytest.mark.parametrize("size", [16, 28224, 40000])
def test_client_add_of_one_array_round_trips(rc: ReplayClient, size: int) -> None:
    """ReplayClient.add of one array goes PACKED (bodies of 40 KB items and of whole
    batches past the parser's 32 KB big-argument size go by reference on the native host)."""
    rc.create("q", 1000, queue=True)
    batches = [_items(50, size, seed) for seed in range(3)]
    ids = [rc.add("q", np.arange(50) + 1.0, b) for b in batches]
    assert np.concatenate(ids).tolist() == list(range(150))
    got = _all_items(rc, "q", size)
    want = {k * 50 + i: bytes(row) for k, b in enumerate(batches) for i, row in enumerate(b)}
    assert got == want


def test_client_add_priorities_are_exact_float64(rc: ReplayClient) -> None:
    """PACKED's binary priorities store what the decimal path (an argument per item,
    repr-exact) stores, bit for bit."""
    p = np.array([0.1, 1 / 3, 1e-300, 12345.678901234567])
    rc.create("packed", 100, alpha=1.0, epsilon=0.0)
    rc.create("args", 100, alpha=1.0, epsilon=0.0)
    rc.add("packed", p, _items(4, 8))
    rc.add("args", p, [bytes(row) for row in _items(4, 8)])
    a, b = rc.info("packed"), rc.info("args")
    for k in ("total_priority", "max_priority", "min_priority"):
        assert a[k] == b[k], k
    assert a["max_priority"] == p[3] and a["min_priority"] == 1e-300


def test_client_add_bad_priority_rejects_the_batch(rc: ReplayClient) -> None:
    rc.create("p", 100)
    with pytest.raises(Exception, match="index 1"):
        rc.add("p", [1.0, -2.0, 1.0], _items(3, 8))
    assert rc.info("p")["size"] == 0


def test_packed_add_waits_for_the_limiter_then_stores_its_body(
        rc: ReplayClient, replay_server: ServerProcess) -> None:
    """A PACKED add with a big body parked by the rate limiter keeps its items (the
    parser's by-reference body is copied before the command waits) and the requests sent
    behind it on the same connection run after it, in order."""
    rc.create("lim", 100, queue=True)  # Reverb's queue: an insert waits while it is full
    size = 20000  # a body of 2 items is past 32 KB and fits one read of the kernel stack
    first = _items(100, size, 1)
    rc.add("lim", None, first)
    with pytest.raises(RateLimited):
        rc.add("lim", None, first[:1])
    second = _items(2, size, 2)
    done: dict[str, object] = {}

    def insert() -> None:
        c = _client(replay_server)
        try:
            done["ids"] = c.add("lim", None, second, timeout=20)
        finally:
            c.close()

    t = threading.Thread(target=insert)
    t.start()
    time.sleep(0.3)
    assert t.is_alive(), "the insert should wait for samples"
    s = rc.sample("lim", 100, item_shape=(size,))  # consumes the first batch: room again
    assert [bytes(x) for x in s.items] == [bytes(x) for x in first]
    t.join(20)
    assert not t.is_alive()
    assert np.asarray(done["ids"]).tolist() == [100, 101]
    s = rc.sample("lim", 2, item_shape=(size,))
    assert [bytes(x) for x in s.items] == [bytes(x) for x in second]


def _resp(*args: bytes | str | int) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def test_requests_split_anywhere_parse_the_same(replay_server: ServerProcess) -> None:
    """Pipelined PACKED adds with big bodies, cut at every kind of place (inside a header,
    inside a body, between requests), and sent in pieces: each request lands whole,
    whether the parser read it where it lay or copied its unfinished part."""
    if replay_server.kind == "shm":
        pytest.skip("raw TCP pieces: the shm kind's rings are covered by the client tests")
    c = replay_server.client()
    c.execute_command("REPLAY.CREATE", "q", "QUEUE", 1000)
    size = 33000
    bodies = [_items(2, size, k) for k in range(6)]
    stream = b"".join(_resp("REPLAY.ADD", "q", "PACKED", 2, _f64(1, 2), b.tobytes())
                      for b in bodies) + _resp("PING")
    cuts = [3, 20, 100, 40000, len(stream) // 2, len(stream) // 2 + 7, len(stream) - 5]
    s = socket.create_connection((replay_server.host, replay_server.port), timeout=10)
    try:
        if replay_server.password:
            s.sendall(_resp("AUTH", replay_server.password))
            assert s.recv(5) == b"+OK\r\n"
        prev = 0
        for cut in [*sorted(cuts), len(stream)]:
            s.sendall(stream[prev:cut])
            prev = cut
            time.sleep(0.02)
        want = b"".join(b"$16\r\n" + np.array([2 * k, 2 * k + 1], "<i8").tobytes() + b"\r\n"
                        for k in range(6)) + b"+PONG\r\n"
        got = b""
        while len(got) < len(want):
            chunk = s.recv(65536)
            assert chunk, f"closed after {got!r}"
            got += chunk
        assert got == want
    finally:
        s.close()
    rc = ReplayClient(connection=c)
    assert _all_items(rc, "q", size) == {
        2 * k + i: bytes(row) for k, b in enumerate(bodies) for i, row in enumerate(b)}


def test_packed_add_inside_multi_keeps_its_body(r: redis.Redis) -> None:
    """MULTI queues owned copies of a by-reference body: EXEC inserts the same bytes."""
    r.execute_command("REPLAY.CREATE", "q", "QUEUE", 100)
    body = _items(1, 50000, 3)
    p = r.pipeline(transaction=True)
    p.execute_command("REPLAY.ADD", "q", "PACKED", 1, "MAX", body.tobytes())
    p.execute_command("REPLAY.ADD", "q", "PACKED", 1, "MAX", body[:, ::-1].tobytes())
    out = p.execute()
    assert [np.frombuffer(x, "<i8").tolist() for x in out] == [[0], [1]]
    got = _all_items(ReplayClient(connection=r), "q", 50000)
    assert got == {0: body.tobytes(), 1: body[:, ::-1].tobytes()}


# ---- Inserter: pipelined adds -----------------------------------------------------


def test_inserter_pipelines_batches_in_order(rc: ReplayClient) -> None:
    rc.create("q", 10000, queue=True)
    batches = [_items(50, 640, k) for k in range(20)]
    with rc.inserter("q", max_in_flight=3) as ins:
        for b in batches:
            ins.add(np.ones(50), b)
            assert ins.in_flight <= 3
        assert ins.flush() == 1000
        assert ins.in_flight == 0
        assert ins.last_ids.tolist() == list(range(950, 1000))
    got = _all_items(rc, "q", 640)
    assert got == {k * 50 + i: bytes(row) for k, b in enumerate(batches)
                   for i, row in enumerate(b)}


def test_inserter_names_a_failed_batch_and_keeps_the_others(rc: ReplayClient) -> None:
    rc.create("q", 1000, queue=True)
    rc.create("other", 10)
    ins = rc.inserter("q", max_in_flight=8)
    ins.add(None, _items(5, 16, 1))
    ins.add(None, _items(5, 16, 2))
    rc.drop("q")  # the table goes while batches may be in flight
    rc.create("q", 1000, queue=True)
    ins.add(None, _items(5, 16, 3))
    assert ins.flush() == 15  # the re-created table took the third
    rc.drop("q")
    ins.add(None, _items(5, 16, 4))
    with pytest.raises(NoSuchTableError, match=r"^NOTABLE .*\(batch 4 of this inserter\)$"):
        ins.flush()
    rc.create("q", 1000, queue=True)
    ins.add(np.ones(2), _items(2, 16, 5))
    ins.close()
    assert rc.info("q")["size"] == 2
    with pytest.raises(RuntimeError, match="closed"):
        ins.add(None, _items(1, 16))


def test_inserter_resends_what_the_rate_limiter_refused(
        rc: ReplayClient, replay_server: ServerProcess) -> None:
    """resend: batches a full queue refused (-RATELIMITED, at once: no timeout) are sent
    again from the buffers the inserter kept, until a reader makes room; every item lands
    exactly once. resend returning False raises the batch's RateLimited instead."""
    rc.create("q", 20, queue=True)
    batches = [_items(5, 16, k) for k in range(30)]
    got: list[bytes] = []

    def read() -> None:
        c = _client(replay_server)
        try:
            while len(got) < 150:
                s = c.sample("q", 1, item_shape=(16,), timeout=10)
                got.extend(bytes(row) for row in s.items)
        finally:
            c.close()

    calls: list[RateLimited] = []

    def resend(err: RateLimited) -> bool:
        calls.append(err)
        time.sleep(0.001)
        return True

    with rc.inserter("q", max_in_flight=4, resend=resend) as ins:
        for b in batches[:4]:  # 20 items: the queue is full
            ins.add(None, b)
        assert ins.flush() == 20 and not calls
        t = threading.Thread(target=read)
        t.start()
        for b in batches[4:]:
            ins.add(None, b.copy())  # the inserter keeps the only reference to each
        assert ins.flush() == 150
        assert ins.resent == len(calls) > 0
    t.join(30)
    assert not t.is_alive()
    assert sorted(got) == sorted(bytes(row) for b in batches for row in b)
    ins = rc.inserter("q", resend=lambda err: False)
    for b in batches[:5]:
        ins.add(None, b)
    with pytest.raises(RateLimited, match=r"\(batch 5 of this inserter\)$"):
        ins.flush()
    ins.close()
    assert rc.info("q")["size"] == 20


def test_inserter_refuses_bad_input_before_sending(rc: ReplayClient) -> None:
    rc.create("q", 100, queue=True)
    with rc.inserter("q") as ins:
        with pytest.raises(Exception, match="priorities must be finite"):
            ins.add([1.0, float("nan")], _items(2, 8))
        assert ins.in_flight == 0
        ins.add([1.0, 2.0], _items(2, 8))
    assert rc.info("q")["size"] == 2
    with pytest.raises(ValueError, match="max_in_flight"):
        rc.inserter("q", max_in_flight=0)


def test_group_inserter_spreads_batches_over_the_shards(tmp_path: Path, replay_host: str) -> None:
    """ShardedReplayClient.inserter: batches take the shards in turn, pipelined on each
    shard's connection; every batch lands whole on one shard."""
    if replay_host == "shm":
        pytest.skip("a group of its own on TCP (the group's shm use is test_shm's)")
    with replay_group(tmp_path, replay_host) as members:
        g = ShardedReplayClient(members)
        try:
            g.create("q", 1000, queue=True)
            batches = [_items(10, 64, k) for k in range(6)]
            with g.inserter("q", max_in_flight=2) as ins:
                for b in batches:
                    ins.add(None, b)
                assert ins.flush() == 60
            sizes = [s.info("q")["size"] for s in g.shards]
            assert sizes == [30, 30]
            got = sorted(bytes(row) for s in g.shards
                         for row in s.sample("q", 30, item_shape=(64,)).items)
            assert got == sorted(bytes(row) for b in batches for row in b)
        finally:
            g.close()
