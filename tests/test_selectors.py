"""Reverb's table model on REPLAY.* tables: selectors as sampler and remover,
MAX_TIMES_SAMPLED, the QUEUE/STACK presets and their blocking, SAMPLE WITHINFO,
and snapshots of all of it."""
from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from pyctl.errors import decode_info

if TYPE_CHECKING:
    from conftest import RawConn, ServerProcess



@pytest.fixture
def c(replay_server: ServerProcess) -> Iterator[RawConn]:
    conn = replay_server.raw()
    yield conn
    conn.close()


def info(c: RawConn, t: str) -> dict[str, Any]:
    return decode_info(c.call("REPLAY.INFO", t))


def err(reply: Any) -> str:
    assert type(reply).__name__ == "RespError", reply
    return reply.message.decode()


def add(c: RawConn, t: str, prios: list[float], *extra: Any) -> list[int]:
    args: list[Any] = []
    for p in prios:
        args += [repr(float(p)), b"x%d" % len(args)]
    return c.call("REPLAY.ADD", t, *args, *extra)


def sample(c: RawConn, t: str, n: int, *extra: Any) -> tuple[np.ndarray, np.ndarray, Any]:
    r = c.call("REPLAY.SAMPLE", t, n, *extra)
    assert isinstance(r, list), r
    return np.frombuffer(r[0], "<i8"), np.frombuffer(r[1], "<f4"), r


def unpack_info(b: bytes, n: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    assert len(b) == 8 + 20 * n
    size = struct.unpack_from("<q", b)[0]
    prob = np.frombuffer(b, "<f8", n, 8)
    prio = np.frombuffer(b, "<f8", n, 8 + 8 * n)
    times = np.frombuffer(b, "<u4", n, 8 + 16 * n)
    return size, prob, prio, times


def counts(c: RawConn, t: str, ids: list[int], draws: int, batch: int = 100_000) -> np.ndarray:
    pos = {i: k for k, i in enumerate(ids)}
    out = np.zeros(len(ids))
    for _ in range(draws // batch):
        got, _, _ = sample(c, t, batch)
        u, cnt = np.unique(got, return_counts=True)
        for i, k in zip(u.tolist(), cnt.tolist(), strict=True):
            out[pos[i]] += k
    return out


# ---- statistics: 10^6 draws within total-variation distance 0.01 ----------


@pytest.mark.parametrize("remover", ["fifo", "uniform"])  # ring and general storage
def test_uniform_sampler_tv(c: RawConn, remover: str) -> None:
    assert c.call("REPLAY.CREATE", "u", "CAPACITY", 64, "SAMPLER", "uniform",
                  "REMOVER", remover) == "OK"
    ids = add(c, "u", [float(i % 7) for i in range(50)])
    freq = counts(c, "u", ids, 10**6) / 10**6
    assert 0.5 * np.abs(freq - 1 / 50).sum() < 0.01
    _, w, r = sample(c, "u", 8, "WITHINFO")
    assert (w == 1).all()
    size, prob, _, _ = unpack_info(r[3], 8)
    assert size == 50 and np.allclose(prob, 1 / 50)


@pytest.mark.parametrize("remover", ["fifo", "maxheap"])
def test_prioritized_sampler_tv(c: RawConn, remover: str) -> None:
    assert c.call("REPLAY.CREATE", "p", "CAPACITY", 64, "ALPHA", 1, "EPSILON", 0,
                  "REMOVER", remover) == "OK"
    prios = [float(i + 1) for i in range(40)]
    ids = add(c, "p", prios)
    freq = counts(c, "p", ids, 10**6) / 10**6
    exact = np.array(prios) / sum(prios)
    assert 0.5 * np.abs(freq - exact).sum() < 0.01
    got, _, r = sample(c, "p", 16, "WITHINFO")
    _, prob, prio, _ = unpack_info(r[3], 16)
    pos = {i: k for k, i in enumerate(ids)}
    for i, p, q in zip(got.tolist(), prob.tolist(), prio.tolist(), strict=True):
        assert q == prios[pos[i]] and p == pytest.approx(exact[pos[i]])


# ---- exact orders -----------------------------------------------------------

ORDER_PRIOS = [5.0, 1.0, 9.0, 3.0, 7.0]


@pytest.mark.parametrize("sel,order", [
    ("fifo", [0, 1, 2, 3, 4]), ("lifo", [4, 3, 2, 1, 0]),
    ("minheap", [1, 3, 0, 4, 2]), ("maxheap", [2, 4, 0, 3, 1])])
def test_deterministic_orders(c: RawConn, sel: str, order: list[int]) -> None:
    assert c.call("REPLAY.CREATE", "d", "CAPACITY", 10, "ALPHA", 1, "EPSILON", 0,
                  "SAMPLER", sel, "REMOVER", "fifo", "MAX_TIMES_SAMPLED", 1) == "OK"
    ids = add(c, "d", ORDER_PRIOS)
    got, w, r = sample(c, "d", 5, "WITHINFO")  # five successive draws
    assert got.tolist() == [ids[k] for k in order]
    assert (w == 1).all()
    size, prob, prio, times = unpack_info(r[3], 5)
    assert size == 5 and (prob == 1).all() and (times == 1).all()
    assert prio.tolist() == [ORDER_PRIOS[k] for k in order]
    i = info(c, "d")
    assert (i["size"], i["consumed"], i["sampler"], i["storage"]) == (0, 5, sel, "general")


@pytest.mark.parametrize("sel", ["fifo", "lifo", "minheap", "maxheap"])
def test_removers(c: RawConn, sel: str) -> None:
    assert c.call("REPLAY.CREATE", "r", "CAPACITY", 5, "ALPHA", 1, "EPSILON", 0,
                  "REMOVER", sel, "SAMPLER", "fifo") == "OK"
    ids = add(c, "r", ORDER_PRIOS)
    victim = {"fifo": 0, "lifo": 4, "minheap": 1, "maxheap": 2}[sel]
    new = add(c, "r", [4.0])
    assert info(c, "r")["evictions"] == 1
    # the victim's id is stale now; every other id is live
    stale = struct.pack("<q", ids[victim])
    assert c.call("REPLAY.UPDATE", "r", stale, struct.pack("<f", 1.0)) == 0
    live = [i for k, i in enumerate(ids) if k != victim] + new
    assert c.call("REPLAY.UPDATE", "r", struct.pack("<5q", *live),
                  struct.pack("<5f", *[2.0] * 5)) == 5


def test_heap_follows_updates(c: RawConn) -> None:
    c.call("REPLAY.CREATE", "h", "CAPACITY", 8, "ALPHA", 1, "EPSILON", 0, "SAMPLER", "maxheap")
    ids = add(c, "h", [1.0, 2.0, 3.0])  # ring storage, heap sampler
    assert info(c, "h")["storage"] == "ring"
    assert sample(c, "h", 3)[0].tolist() == [ids[2]] * 3  # nothing removes it
    c.call("REPLAY.UPDATE", "h", struct.pack("<q", ids[0]), struct.pack("<f", 10.0))
    assert sample(c, "h", 1)[0].tolist() == [ids[0]]


def update(c: RawConn, t: str, ids: list[int], prios: list[float]) -> None:
    c.call("REPLAY.UPDATE", t, struct.pack(f"<{len(ids)}q", *ids),
           struct.pack(f"<{len(prios)}f", *prios))


def test_heap_follows_batched_updates(c: RawConn) -> None:
    """An UPDATE of several ids re-keys them all: the min-heap sampler draws
    the least priority after batches that moved two keys at once."""
    c.call("REPLAY.CREATE", "m", "CAPACITY", 5, "ALPHA", 1, "EPSILON", 0, "SAMPLER", "minheap")
    ids = add(c, "m", [0.5, 2.0])
    update(c, "m", ids, [0.135, 0.379])
    ids += add(c, "m", [0.5, 1.0, 1.0])
    update(c, "m", [ids[3], ids[0]], [0.212, 0.398])
    update(c, "m", [ids[3], ids[1]], [0.496, 0.827])
    # priorities now: 0.398 0.827 0.5 0.496 1.0
    assert sample(c, "m", 1)[0].tolist() == [ids[0]]


@pytest.mark.parametrize(("sel", "k"), [("fifo", 0), ("minheap", 0), ("prioritized", 2),
                                      ("uniform", 1)])
def test_withstats_refused_where_it_cannot_be_right(c: RawConn, sel: str, k: int) -> None:
    """WITHSTATS describes the table after the draws: refused for deterministic
    samplers and MAX_TIMES_SAMPLED (removal), before anything is drawn."""
    extra = ["MAX_TIMES_SAMPLED", k] if k else []
    c.call("REPLAY.CREATE", "ws", "CAPACITY", 8, "SAMPLER", sel, *extra)
    add(c, "ws", [1.0, 2.0])
    for packed in ([], ["PACKED"]):
        msg = err(c.call("REPLAY.SAMPLE", "ws", 1, *packed, "WITHSTATS"))
        assert "WITHSTATS needs a prioritized or uniform sampler" in msg and "WITHINFO" in msg
    assert info(c, "ws")["samples"] == 0 and info(c, "ws")["size"] == 2
    _, _, r = sample(c, "ws", 1, "WITHINFO")  # what to use instead
    assert len(r) == 4


def test_max_times_sampled_removes(c: RawConn) -> None:
    c.call("REPLAY.CREATE", "k", "CAPACITY", 10, "SAMPLER", "fifo", "MAX_TIMES_SAMPLED", 3)
    ids = add(c, "k", [1.0, 1.0])
    got, _, r = sample(c, "k", 4, "WITHINFO")
    assert got.tolist() == [ids[0]] * 3 + [ids[1]]
    assert unpack_info(r[3], 4)[3].tolist() == [1, 2, 3, 1]
    i = info(c, "k")
    assert (i["size"], i["consumed"]) == (1, 1)
    # 2 draws left: a sample of 3 waits (fails at once without TIMEOUT)
    assert "RATELIMITED" in err(c.call("REPLAY.SAMPLE", "k", 3))
    assert "MAX_TIMES_SAMPLED 3" in err(c.call("REPLAY.SAMPLE", "k", 3))
    assert sample(c, "k", 2)[0].tolist() == [ids[1]] * 2
    assert info(c, "k")["size"] == 0


def test_uniform_with_max_times_sampled(c: RawConn) -> None:
    c.call("REPLAY.CREATE", "m", "CAPACITY", 1000, "SAMPLER", "uniform", "MAX_TIMES_SAMPLED", 2)
    ids = add(c, "m", [1.0] * 500)
    got = sample(c, "m", 1000)[0]
    u, cnt = np.unique(got, return_counts=True)
    assert sorted(u.tolist()) == sorted(ids) and (cnt == 2).all()
    assert info(c, "m")["size"] == 0


def test_variable_sizes_compact_and_keep_bytes(c: RawConn) -> None:
    c.call("REPLAY.CREATE", "v", "CAPACITY", 200, "MAXBYTES", 4096, "REMOVER", "uniform",
           "SAMPLER", "uniform")
    rng = np.random.default_rng(1)
    expect: dict[int, bytes] = {}
    for k in range(400):
        body = bytes([k % 251]) * int(rng.integers(0, 120))
        (i,) = c.call("REPLAY.ADD", "v", "1", body)
        expect[i] = body
    i = info(c, "v")
    assert i["bytes_used"] <= 4096 and i["compactions"] > 0
    got, _, r = sample(c, "v", 300)
    for gid, item in zip(got.tolist(), r[2], strict=True):
        assert expect[gid] == item


# ---- QUEUE and STACK ---------------------------------------------------------


def test_queue_preset(c: RawConn) -> None:
    assert c.call("REPLAY.CREATE", "q", "QUEUE", 4) == "OK"
    i = info(c, "q")
    assert (i["sampler"], i["remover"], i["max_times_sampled"], i["queue_size"],
            i["capacity"]) == ("fifo", "fifo", 1, 4, 4)
    ids = add(c, "q", [1.0] * 4)
    e = err(add(c, "q", [1.0]))
    assert e.startswith("RATELIMITED") and "QUEUE 4 is full" in e and "use TIMEOUT" in e
    assert sample(c, "q", 4)[0].tolist() == ids  # the 4 oldest, removed
    e = err(c.call("REPLAY.SAMPLE", "q", 1))
    assert e.startswith("RATELIMITED") and "QUEUE 4 has too few items" in e
    assert "sample fewer" in err(c.call("REPLAY.SAMPLE", "q", 5))
    assert "add fewer" in err(add(c, "q", [1.0] * 5))


def test_stack_preset(c: RawConn) -> None:
    assert c.call("REPLAY.CREATE", "s", "STACK", 3) == "OK"
    ids = add(c, "s", [1.0] * 3)
    assert "STACK 3 is full" in err(add(c, "s", [1.0]))
    assert sample(c, "s", 2)[0].tolist() == [ids[2], ids[1]]


def test_queue_insert_waits_until_a_sample(c: RawConn, replay_server: ServerProcess) -> None:
    c.call("REPLAY.CREATE", "q", "QUEUE", 2)
    add(c, "q", [1.0, 1.0])
    w = replay_server.raw()
    w.send(w.command("REPLAY.ADD", "q", "1", "late", "TIMEOUT", 5))
    deadline = time.monotonic() + 5
    while info(c, "q")["blocked_inserters"] != 1:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    sample(c, "q", 1)
    new = w.read_reply()
    assert isinstance(new, list) and len(new) == 1
    assert sample(c, "q", 2)[2][2] == [b"x2", b"late"]
    w.close()


def test_queue_sample_waits_until_an_insert(c: RawConn, replay_server: ServerProcess) -> None:
    c.call("REPLAY.CREATE", "q", "QUEUE", 2)
    w = replay_server.raw()
    w.send(w.command("REPLAY.SAMPLE", "q", 1, "TIMEOUT", 5))
    deadline = time.monotonic() + 5
    while info(c, "q")["blocked_samplers"] != 1:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    c.call("REPLAY.ADD", "q", "1", "first")
    reply = w.read_reply()
    assert reply[2] == [b"first"]
    assert info(c, "q")["size"] == 0
    w.close()


def test_queue_timeout_and_disconnected_waiter(c: RawConn, replay_server: ServerProcess) -> None:
    c.call("REPLAY.CREATE", "q", "QUEUE", 1)
    t0 = time.monotonic()
    e = err(c.call("REPLAY.SAMPLE", "q", 1, "TIMEOUT", "0.2"))
    assert time.monotonic() - t0 >= 0.19
    assert "timed out after TIMEOUT 0.2" in e and "QUEUE 1" in e
    w = replay_server.raw()
    w.send(w.command("REPLAY.SAMPLE", "q", 1, "TIMEOUT", 10))
    deadline = time.monotonic() + 5
    while info(c, "q")["blocked_samplers"] != 1:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    w.close()
    while info(c, "q")["blocked_samplers"] != 0:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    add(c, "q", [1.0])  # nobody takes it: the waiter is gone
    assert info(c, "q")["size"] == 1


# ---- bad input: one line, nothing created -------------------------------------


@pytest.mark.parametrize("args,msg", [
    (("CAPACITY", 5, "SAMPLER", "bogus"), "unknown selector 'bogus' for SAMPLER"),
    (("CAPACITY", 5, "REMOVER", "heap"), "unknown selector 'heap' for REMOVER"),
    (("QUEUE", 5, "SAMPLER", "fifo"), "drop SAMPLER"),
    (("QUEUE", 5, "MIN_SIZE", 1), "drop MIN_SIZE"),
    (("STACK", 5, "SAMPLES_PER_INSERT", 1), "drop SAMPLES_PER_INSERT"),
    (("QUEUE", 5, "CAPACITY", 5), "drop CAPACITY"),
    (("QUEUE", 0), "QUEUE must be given once"),
    (("CAPACITY", 5, "MAX_TIMES_SAMPLED", 0), "MAX_TIMES_SAMPLED must be an integer"),
    (("CAPACITY", 5, "MAX_TIMES_SAMPLED", -2), "MAX_TIMES_SAMPLED must be an integer"),
])
def test_bad_create(c: RawConn, args: tuple[Any, ...], msg: str) -> None:
    e = err(c.call("REPLAY.CREATE", "bad", *args))
    assert msg in e and "\n" not in e
    assert c.call("REPLAY.LIST") == []


# ---- snapshots -------------------------------------------------------------------


def state(c: RawConn, t: str) -> dict[str, Any]:
    i = info(c, t)
    i.pop("waited_seconds")
    return i


@pytest.mark.native_only(reason="DEBUG RELOAD through inreplay's own snapshot format")
def test_snapshot_round_trip(server_factory: Callable[..., ServerProcess],
                  tmp_path: Path) -> None:
    c = server_factory("inreplay", "--dir", str(tmp_path)).raw()
    c.call("REPLAY.CREATE", "q", "QUEUE", 8)
    c.call("REPLAY.CREATE", "k", "CAPACITY", 6, "ALPHA", 1, "SAMPLER", "minheap",
           "REMOVER", "lifo", "MAX_TIMES_SAMPLED", 3)
    c.call("REPLAY.CREATE", "h", "CAPACITY", 6, "ALPHA", 1, "SAMPLER", "maxheap")
    c.call("REPLAY.CREATE", "p", "CAPACITY", 6)
    add(c, "q", [1.0] * 5)
    sample(c, "q", 2)
    add(c, "k", [3.0, 1.0, 2.0, 5.0, 4.0, 6.0, 0.5])
    sample(c, "k", 4)
    add(c, "h", [1.0, 8.0, 2.0])
    add(c, "p", [1.0, 2.0, 3.0])
    sample(c, "p", 5)
    before = {t: state(c, t) for t in ("q", "k", "h", "p")}
    assert c.call("DEBUG", "RELOAD") == "OK"
    after = {t: state(c, t) for t in ("q", "k", "h", "p")}
    assert after == before
    # the same next draws and times sampled
    for t, n in (("q", 3), ("k", 5), ("h", 2)):
        got, _, r = sample(c, t, n, "WITHINFO")
        assert got.size == n, t
    # times sampled of the prioritized table survived: every draw count grew on
    _, _, r = sample(c, "p", 1, "WITHINFO")
    assert unpack_info(r[3], 1)[3][0] >= 1
    assert sum(int(x) for x in [before["p"]["samples"]]) == 5


@pytest.mark.native_only(reason="DEBUG RELOAD through inreplay's own snapshot format")
def test_snapshot_keeps_exact_order(server_factory: Callable[..., ServerProcess],
                  tmp_path: Path) -> None:
    c = server_factory("inreplay", "--dir", str(tmp_path)).raw()
    c.call("REPLAY.CREATE", "k", "CAPACITY", 6, "ALPHA", 1, "EPSILON", 0,
           "SAMPLER", "minheap", "MAX_TIMES_SAMPLED", 2)
    ids = add(c, "k", [3.0, 1.0, 2.0])
    sample(c, "k", 1)  # ids[1] drawn once
    c.call("REPLAY.CREATE", "ref", "CAPACITY", 6, "ALPHA", 1, "EPSILON", 0,
           "SAMPLER", "minheap", "MAX_TIMES_SAMPLED", 2)
    assert c.call("DEBUG", "RELOAD") == "OK"
    got, _, r = sample(c, "k", 5, "WITHINFO")
    assert got.tolist() == [ids[1], ids[2], ids[2], ids[0], ids[0]]
    assert unpack_info(r[3], 5)[3].tolist() == [2, 1, 2, 1, 2]
    assert add(c, "k", [1.0])[0] == ids[-1] + 1  # ids go on where they were


# ---- the Python client ---------------------------------------------------------


def test_client_create_and_sample_info(replay_server: ServerProcess) -> None:
    from pyctl.client import ReplayClient

    with ReplayClient(port=replay_server.port, protocol=2) as rc:
        rc.create("cq", 4, queue=True)
        assert rc.info("cq")["sampler"] == "fifo"
        ids = rc.add("cq", [1.0, 2.0], [b"ab", b"cd"])
        s = rc.sample("cq", 2, info=True)
        assert s.ids.tolist() == ids.tolist() and s.items == [b"ab", b"cd"]
        assert s.info is not None and s.info.table_size == 2
        assert s.info.times_sampled.tolist() == [1, 1]
        rc.create("cp", 8, sampler="maxheap", remover="uniform", max_times_sampled=2, alpha=1.0,
                  epsilon=0.0)
        ids = rc.add("cp", [1.0, 3.0, 2.0], np.arange(6, dtype=np.uint8).reshape(3, 2))
        s = rc.sample("cp", 3, item_shape=2, info=True)  # PACKED with the info at its end
        assert s.ids.tolist() == [ids[1], ids[1], ids[2]]
        assert s.items.tolist() == [[2, 3], [2, 3], [4, 5]]
        assert s.info is not None and s.info.priority.tolist() == [3.0, 3.0, 2.0]
        assert s.info.times_sampled.tolist() == [1, 2, 1]


def test_group_refuses_inexact_samplers(replay_server: ServerProcess) -> None:
    from pyctl.sharded import ShardedReplayClient

    group = ShardedReplayClient([f"127.0.0.1:{replay_server.port}"], protocol=2)
    group.create("gq", 4, queue=True)
    group.add("gq", [1.0], [b"x"])
    with pytest.raises(ValueError, match="cannot be sampled exactly across a replay group"):
        group.sample("gq", 1)


def test_group_samples_uniform_exactly(replay_server: ServerProcess) -> None:
    from pyctl.sharded import ShardedReplayClient

    group = ShardedReplayClient([f"127.0.0.1:{replay_server.port}"], protocol=2)
    group.create("gu", 100, sampler="uniform", remover="fifo")
    ids = group.add("gu", np.arange(20) + 1.0, [b"%d" % i for i in range(20)])
    s = group.sample("gu", 20000, beta=1.0)
    assert (s.weights == 1).all()
    _, cnt = np.unique(s.ids, return_counts=True)
    assert cnt.size == ids.size and 0.5 * np.abs(cnt / 20000 - 1 / 20).sum() < 0.05
