"""REPLAY.SAMPLE ... PACKED: fixed-size items in one bulk string.

    REPLAY.SAMPLE t n [BETA b] [PACKED]   (BETA and PACKED in either order, once each)
    PACKED reply: one bulk of 12n + n*itemsize bytes: n int64 LE ids, n float32 LE
                  weights, then the n items back to back.

Runs on both REPLAY hosts (conftest's replay_server: the native server and
redis-server with the module) and, where the session has one, on the native
server's DPDK stack.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import redis
from conftest import ServerProcess
from redis.exceptions import ResponseError

from pyctl.client import ReplayClient

pytestmark = pytest.mark.also_dpdk


@pytest.fixture
def srv(replay_server: ServerProcess) -> ServerProcess:
    return replay_server


@pytest.fixture
def r(srv: ServerProcess) -> Iterator[redis.Redis]:
    c = srv.client()
    try:
        yield c
    finally:
        c.close()


def item_for(i: int, size: int) -> bytes:
    return np.random.default_rng(i).integers(0, 256, size, dtype=np.uint8).tobytes()


def make_table(r: redis.Redis, sizes: list[int], *, capacity: int = 1024,
               prios: list[float] | None = None) -> tuple[str, dict[int, bytes]]:
    t = f"p-{uuid.uuid4().hex[:10]}"
    assert r.execute_command("REPLAY.CREATE", t, "CAPACITY", capacity, "ALPHA", 1,
                             "EPSILON", 0) == b"OK"
    stored: dict[int, bytes] = {}
    batch = 64
    for start in range(0, len(sizes), batch):
        args: list[Any] = []
        for k in range(start, min(start + batch, len(sizes))):
            data = item_for(k, sizes[k])
            args += [repr(prios[k] if prios else 1.0), data]
        ids = r.execute_command("REPLAY.ADD", t, *args)
        for j, i in enumerate(ids):
            stored[i] = args[2 * j + 1]
    return t, stored


def info(r: redis.Redis, t: str) -> dict[str, Any]:
    raw = r.execute_command("REPLAY.INFO", t)
    return {k.decode(): v for k, v in zip(raw[::2], raw[1::2], strict=True)}


def unpack(reply: bytes, n: int) -> tuple[np.ndarray, np.ndarray, list[bytes]]:
    assert isinstance(reply, bytes)
    body = len(reply) - 12 * n
    assert body >= 0 and body % n == 0, len(reply)
    size = body // n
    ids = np.frombuffer(reply, "<i8", n)
    w = np.frombuffer(reply, "<f4", n, 8 * n)
    items = [reply[12 * n + k * size: 12 * n + (k + 1) * size] for k in range(n)]
    return ids, w, items


def test_packed_items_are_the_items_of_their_ids(r: redis.Redis) -> None:
    prios = [float(1 + k % 5) for k in range(40)]
    t, stored = make_table(r, [256] * 40, prios=prios)
    n = 300
    reply = r.execute_command("REPLAY.SAMPLE", t, n, "PACKED")
    assert len(reply) == 12 * n + 256 * n
    ids, w, items = unpack(reply, n)
    assert all(items[k] == stored[int(i)] for k, i in enumerate(ids))
    # weights are a function of the id's priority: the same as without PACKED
    plain_ids, plain_w, plain_items = r.execute_command("REPLAY.SAMPLE", t, n)
    by_id = dict(zip(np.frombuffer(plain_ids, "<i8").tolist(),
                     np.frombuffer(plain_w, "<f4").tolist(), strict=True))
    for i, wi in zip(ids.tolist(), w.tolist(), strict=True):
        if i in by_id:
            assert wi == by_id[i]
        assert wi == pytest.approx((1.0 / prios[i]) ** 0.4, rel=1e-6)
    assert all(plain_items[k] == stored[i] for k, i in
               enumerate(np.frombuffer(plain_ids, "<i8").tolist()))


def test_sampled_ids_and_items_after_the_ring_wraps(r: redis.Redis) -> None:
    """The slots wrap several times (capacity 50, 237 items): every sampled id is
    live and names its own item, PACKED and plain (SAMPLE derives ids from slots)."""
    t, stored = make_table(r, [128] * 237, capacity=50)
    live = set(range(237 - 50, 237))
    ids, _, items = unpack(r.execute_command("REPLAY.SAMPLE", t, 2000, "PACKED"), 2000)
    assert set(ids.tolist()) == live  # 2000 uniform draws over 50 items reach them all
    assert all(items[k] == stored[int(i)] for k, i in enumerate(ids))
    plain_ids, _, plain_items = r.execute_command("REPLAY.SAMPLE", t, 2000)
    got = np.frombuffer(plain_ids, "<i8").tolist()
    assert set(got) == live
    assert all(plain_items[k] == stored[i] for k, i in enumerate(got))


def test_packed_small_and_empty_items(r: redis.Redis) -> None:
    for size in (0, 1, 13, 4095, 4096, 4097):
        t, stored = make_table(r, [size] * 7)
        reply = r.execute_command("REPLAY.SAMPLE", t, 20, "PACKED")
        assert len(reply) == 12 * 20 + size * 20
        ids = np.frombuffer(reply, "<i8", 20)
        assert set(ids.tolist()) <= set(stored)
        if size:
            _, _, items = unpack(reply, 20)
            assert all(items[k] == stored[int(i)] for k, i in enumerate(ids))


def test_plain_samples_of_mixed_small_sizes_are_exact(r: redis.Redis) -> None:
    """Items below the by-reference size go out in one reservation whose "$<len>" headers
    are formatted again only when the length changes: every length, in any order, and an
    item at the size where replies switch to references, come back byte for byte."""
    sizes = [0, 1, 9, 10, 99, 100, 999, 1000, 4095, 4096, 13, 13, 13, 7, 4095, 0]
    t, stored = make_table(r, sizes * 4)
    for n in (1, 7, 64, 300):
        ids, _, items = r.execute_command("REPLAY.SAMPLE", t, n)
        got = np.frombuffer(ids, "<i8").tolist()
        assert len(items) == n
        assert all(items[k] == stored[i] for k, i in enumerate(got))
    r.execute_command("REPLAY.DROP", t)
    t, stored = make_table(r, [s for s in sizes if s < 4096] * 4)
    ids, _, items = r.execute_command("REPLAY.SAMPLE", t, 500)
    got = np.frombuffer(ids, "<i8").tolist()
    assert len({len(x) for x in items}) > 5
    assert all(items[k] == stored[i] for k, i in enumerate(got))


def test_packed_mixed_sizes_is_an_error_and_the_connection_survives(r: redis.Redis) -> None:
    t, _ = make_table(r, [128] * 4 + [256] * 2, capacity=6)
    before = r.client_id()
    samples = info(r, t)["samples"]
    with pytest.raises(ResponseError) as exc:
        r.execute_command("REPLAY.SAMPLE", t, 8, "PACKED")
    msg = str(exc.value)
    assert msg.startswith("MIXEDSIZE PACKED needs items of one size")
    assert "128 and 256 bytes" in msg and "sample without PACKED" in msg
    assert "\n" not in msg
    assert r.client_id() == before
    assert r.ping()
    assert info(r, t)["samples"] == samples  # nothing was drawn
    assert len(r.execute_command("REPLAY.SAMPLE", t, 8)[2]) == 8
    # once the 128-byte items are evicted the table is one size again
    r.execute_command("REPLAY.ADD", t, *(["1", b"x" * 256] * 4))
    reply = r.execute_command("REPLAY.SAMPLE", t, 8, "PACKED")
    assert len(reply) == 12 * 8 + 256 * 8
    # and a different size anywhere in the window refuses again
    r.execute_command("REPLAY.ADD", t, "1", b"y" * 255)
    with pytest.raises(ResponseError, match="256 and 255 bytes"):
        r.execute_command("REPLAY.SAMPLE", t, 8, "PACKED")


@pytest.mark.parametrize("opts", [["BETA", "1", "PACKED"], ["PACKED", "BETA", "1"],
                                  ["packed", "beta", "1.0"], ["Beta", "1", "Packed"]])
def test_beta_and_packed_in_either_order(r: redis.Redis, opts: list[str]) -> None:
    prios = [1.0, 2.0, 4.0]
    t, stored = make_table(r, [64] * 3, prios=prios)
    n = 50
    ids, w, items = unpack(r.execute_command("REPLAY.SAMPLE", t, n, *opts), n)
    for i, wi in zip(ids.tolist(), w.tolist(), strict=True):
        assert wi == pytest.approx(1.0 / prios[i], rel=1e-6)  # beta 1
    assert all(items[k] == stored[int(i)] for k, i in enumerate(ids))


@pytest.mark.parametrize("opts", [
    ["PACKED", "PACKED"],
    ["BETA", "1", "BETA", "1"],
    ["PACKED", "BETA"],
    ["BETA"],
    ["FOO"],
    ["PACKED", "FOO"],
    ["BETA", "1", "PACKED", "1"],
    ["PACKEDX"],
])
def test_sample_syntax_errors(r: redis.Redis, opts: list[str]) -> None:
    t, _ = make_table(r, [8] * 2)
    before = r.client_id()
    with pytest.raises(ResponseError) as exc:
        r.execute_command("REPLAY.SAMPLE", t, 2, *opts)
    assert str(exc.value) == "syntax error"
    assert r.client_id() == before


def test_bad_beta_with_packed(r: redis.Redis) -> None:
    t, _ = make_table(r, [8] * 2)
    for opts in (["BETA", "x", "PACKED"], ["PACKED", "BETA", "-1"]):
        with pytest.raises(ResponseError, match="BETA must be a finite number >= 0"):
            r.execute_command("REPLAY.SAMPLE", t, 2, *opts)


def test_packed_empty_table(r: redis.Redis) -> None:
    t, _ = make_table(r, [])
    with pytest.raises(ResponseError, match="is empty"):
        r.execute_command("REPLAY.SAMPLE", t, 2, "PACKED")


def test_packed_large_items_sent_in_parts(srv: ServerProcess, r: redis.Redis) -> None:
    size, count = 28 * 1024, 512
    t, stored = make_table(r, [size] * count, capacity=count)
    n = 512
    with srv.raw(timeout=30) as c:
        c.send(c.command("REPLAY.SAMPLE", t, n, "PACKED") + c.command("PING"))
        reply = c.read_reply()
        assert c.read_reply() == "PONG"
    assert len(reply) == 12 * n + size * n
    ids, _, items = unpack(reply, n)
    assert all(items[k] == stored[int(i)] for k, i in enumerate(ids))


# --------------------------------------------------------------------------
# ReplayClient.sample(item_shape=...)
# --------------------------------------------------------------------------


def test_client_sample_item_shape(srv: ServerProcess) -> None:
    with ReplayClient(srv.host, srv.port, password=srv.password) as rc:
        t = f"c-{uuid.uuid4().hex[:8]}"
        rc.create(t, capacity=100, alpha=1.0, epsilon=0.0)
        frames = np.random.default_rng(3).random((30, 4, 5, 3), dtype=np.float32)
        ids = rc.add(t, np.arange(1, 31), frames)
        assert ids.tolist() == list(range(30))
        s = rc.sample(t, 64, beta=0.5, item_shape=(4, 5, 3), item_dtype=np.float32)
        assert s.items.shape == (64, 4, 5, 3) and s.items.dtype == np.float32
        assert s.ids.shape == (64,) and s.ids.dtype == np.int64
        assert s.weights.shape == (64,) and s.weights.dtype == np.float32
        np.testing.assert_array_equal(s.items, frames[s.ids])
        np.testing.assert_allclose(s.weights, (1.0 / (s.ids + 1)) ** 0.5, rtol=1e-6)
        for a in (s.items, s.ids, s.weights):
            assert a.flags.writeable and a.flags.c_contiguous
        s.items[0] = 0
        s.ids[0] = -1
        s.weights[0] = 0
        # bytes, not floats: the same items as uint8 rows
        b = rc.sample(t, 5, item_shape=(240,))
        assert b.items.dtype == np.uint8 and b.items.shape == (5, 240)
        np.testing.assert_array_equal(b.items, frames[b.ids].reshape(5, -1).view(np.uint8))
        # without item_shape: the list of bytes, as before
        plain = rc.sample(t, 3)
        assert isinstance(plain.items, list) and all(isinstance(x, bytes) for x in plain.items)
        with pytest.raises(ValueError) as exc:
            rc.sample(t, 4, item_shape=(4, 5, 2), item_dtype=np.float32)
        assert "160 bytes" in str(exc.value) and "240 bytes" in str(exc.value)
        with pytest.raises(ValueError, match="240 bytes"):
            rc.sample(t, 4, item_shape=(4, 5, 3), item_dtype=np.float64)
        rc.add(t, None, [b"short"])
        with pytest.raises(ResponseError, match="PACKED needs items of one size"):
            rc.sample(t, 4, item_shape=(4, 5, 3), item_dtype=np.float32)
        assert len(rc.sample(t, 4).items) == 4
        rc.drop(t)


def test_sample_too_big_for_a_reply_is_refused(r: redis.Redis) -> None:
    """A PACKED sample above proto-max-bulk-len, or a plain one above the
    client-output-buffer-limit, is refused before it draws: nothing sampled."""
    t, _ = make_table(r, [1 << 20] * 4, capacity=8)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("REPLAY.SAMPLE", t, 1 << 20, "PACKED")
    msg = str(e.value)
    assert "above proto-max-bulk-len" in msg and "sample fewer items" in msg
    r.config_set("client-output-buffer-limit", "normal 64mb 0 0")
    try:
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command("REPLAY.SAMPLE", t, 100)
        assert "client-output-buffer-limit" in str(e.value)
    finally:
        r.config_set("client-output-buffer-limit", "normal 1gb 0 0")
    assert info(r, t)["samples"] == 0
    assert len(r.execute_command("REPLAY.SAMPLE", t, 3, "PACKED")) == 3 * (12 + (1 << 20))
