"""pyctl.client.ReplayClient against a real server."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest
import redis

from pyctl.client import ReplayClient


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        p = int(s.getsockname()[1])
    proc = subprocess.Popen(
        [sys.executable, "-m", "pyctl", "start", "--listen", f"127.0.0.1:{p}", "--seed", "7"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert "listening" in proc.stdout.readline()
    yield p
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=5) == 0


@pytest.fixture
def rc(port: int) -> Iterator[ReplayClient]:
    c = ReplayClient(port=port)
    c.redis.flushall()
    for t in c.tables():
        c.drop(t)
    yield c
    c.close()


def test_roundtrip_fixed_size_items(rc: ReplayClient) -> None:
    rc.create("atari", capacity=1000, alpha=1.0, epsilon=0.0)
    frames = np.arange(50 * 84 * 84 * 4, dtype=np.uint64).astype(np.uint8).reshape(50, 84, 84, 4)
    ids = rc.add("atari", np.ones(50), frames)
    assert ids.tolist() == list(range(50))
    s = rc.sample("atari", 32, item_shape=(84, 84, 4))
    assert s.ids.dtype == np.int64 and s.weights.dtype == np.float32
    assert s.items.shape == (32, 84, 84, 4) and s.items.dtype == np.uint8
    np.testing.assert_array_equal(s.items, frames[s.ids])
    np.testing.assert_array_equal(s.weights, np.ones(32, dtype=np.float32))


def test_update_changes_distribution_and_info(rc: ReplayClient) -> None:
    rc.create("t", capacity=4, alpha=1.0, epsilon=0.0)
    ids = rc.add("t", [1, 1, 1, 1], [b"a", b"b", b"c", b"d"])
    assert rc.update("t", ids, [0, 0, 0, 5]) == 4
    s = rc.sample("t", 200)
    assert set(s.items) == {b"d"} and set(s.ids.tolist()) == {3}
    info = rc.info("t")
    assert info["size"] == 4 and info["updates"] == 4 and info["total_priority"] == 5.0
    assert info["name"] == "t"


def test_stale_ids_are_skipped_and_counted(rc: ReplayClient) -> None:
    rc.create("fifo", capacity=2)
    old = rc.add("fifo", [1, 1], [b"x", b"y"])
    rc.add("fifo", [1, 1], [b"z", b"w"])  # evicts both
    assert rc.update("fifo", old, [3, 3]) == 0
    assert rc.info("fifo")["stale_updates"] == 2


def test_max_priority_insert(rc: ReplayClient) -> None:
    rc.create("m", capacity=10, alpha=1.0, epsilon=0.0)
    rc.add("m", [7.0], [b"high"])
    rc.add("m", None, [b"new"])
    assert rc.info("m")["max_priority"] == 7.0
    assert rc.info("m")["total_priority"] == 14.0


def test_errors_are_redis_errors(rc: ReplayClient) -> None:
    with pytest.raises(redis.ResponseError, match="no such table"):
        rc.sample("missing", 1)
    rc.create("e", capacity=4)
    with pytest.raises(redis.ResponseError, match="already exists"):
        rc.create("e", capacity=4)
    with pytest.raises(redis.ResponseError, match="empty"):
        rc.sample("e", 1)
    with pytest.raises(ValueError, match="priorities"):
        rc.add("e", [1.0, 2.0], [b"one"])
    with pytest.raises(redis.ResponseError, match="invalid priority"):
        rc.add("e", [float("nan")], [b"x"])
    assert rc.info("e")["size"] == 0
