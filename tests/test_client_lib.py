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
from helpers import free_port

from pyctl.client import ReplayClient


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    p = free_port()
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


# ---- regressions found by the fuzzer (tests/fuzz/corpus/bug_*) ----------------


def test_batch_that_outgrows_maxbytes_never_samples_its_own_evicted_items(
        rc: ReplayClient) -> None:
    rc.create("small", capacity=100, alpha=1.0, epsilon=0.0, maxbytes=64)
    ids = rc.add("small", [1, 2, 3, 4, 5, 6], [b"x" * 16] * 6)  # 64 B holds 4 of 6
    info = rc.info("small")
    live = ids[ids >= info["next_id"] - info["size"]]
    assert info["size"] == len(live) < 6
    assert info["total_priority"] == float(sum(ids[len(ids) - len(live):] + 1))
    s = rc.sample("small", 500)
    assert set(s.ids.tolist()) <= set(live.tolist())
    assert all(item == b"x" * 16 for item in s.items)


def test_priority_too_large_for_the_tree_is_rejected_not_dropped(rc: ReplayClient) -> None:
    rc.create("big", capacity=1000, alpha=1.0, epsilon=0.0)
    with pytest.raises(redis.ResponseError, match="invalid priority"):
        rc.add("big", [1e308], [b"x"])
    assert rc.info("big")["size"] == 0
    rc.create("steep", capacity=1000, alpha=8.1, epsilon=0.0)
    ids = rc.add("steep", [1.0], [b"x"])
    with pytest.raises(redis.ResponseError, match="finite"):
        rc.update("steep", ids, [1e38])  # (1e38)^8.1 is finite but would overflow sums
    assert rc.info("steep")["total_priority"] == 1.0


def test_client_list_and_info_bodies_match_their_lengths(port: int) -> None:
    conns = [redis.Redis(port=port) for _ in range(20)]
    for i, c in enumerate(conns):
        c.client_setname(f"c{i}")
    for cmd in (b"CLIENT LIST\r\n", b"CLIENT INFO\r\n"):
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(cmd + b"PING\r\n")
            data = b""
            s.settimeout(2)
            while not data.endswith(b"+PONG\r\n"):
                data += s.recv(65536)
        header, _, rest = data.partition(b"\r\n")
        n = int(header[1:])
        assert rest[n:] == b"\r\n+PONG\r\n", "the body is exactly as long as announced"
    for c in conns:
        c.close()
