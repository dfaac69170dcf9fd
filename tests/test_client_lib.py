"""pyctl.client.ReplayClient against a real server."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import redis
from helpers import free_port

from pyctl.client import BatchError, Field, ReplayClient, Schema


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
    with pytest.raises(BatchError, match="priority at index 0 is nan"):
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
    conns = [redis.Redis(port=port, protocol=2) for _ in range(20)]
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


# ---- a client API that fits RL code --------------------------------------------------

ATARI = Schema({"obs": ((84, 84, 4), np.uint8), "action": ((), np.int64),
                "reward": {"shape": (), "dtype": np.float32}, "done": Field((), np.bool_),
                "next_obs": ((84, 84, 4), np.uint8)})


def _transitions(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    obs = rng.integers(0, 256, (n, 84, 84, 4), dtype=np.uint8)
    return {"obs": obs, "action": rng.integers(0, 6, n), "reward": rng.normal(size=n)
            .astype(np.float32), "done": rng.random(n) < 0.1, "next_obs": obs[::-1].copy()}


def test_schema_packs_a_batch_and_unpacks_a_sample_into_writable_arrays(
        rc: ReplayClient) -> None:
    assert ATARI.itemsize == 2 * 84 * 84 * 4 + 8 + 4 + 1
    batch = _transitions(40)
    rc.create("atari", capacity=100, alpha=1.0, epsilon=0.0)
    ids = rc.add("atari", np.ones(40), batch, schema=ATARI)
    assert ids.tolist() == list(range(40))
    s = rc.sample("atari", 64, schema=ATARI)
    assert set(s.items) == set(ATARI.fields)
    for name, arr in s.items.items():
        want = batch[name][s.ids]
        assert arr.dtype == want.dtype and arr.shape == want.shape, name
        np.testing.assert_array_equal(arr, want)
        assert arr.flags.writeable and arr.flags.owndata, name
        arr[...] = 0  # RL code normalises in place
    for a in (s.ids, s.weights):
        assert a.flags.writeable
    # the same transitions as keywords, lists of per-row arrays, and a schema-less add
    items = ATARI.pack(**{k: list(v) for k, v in batch.items()})
    assert items.shape == (40, ATARI.itemsize) and items.dtype == np.uint8
    np.testing.assert_array_equal(items, ATARI.pack(batch))
    back = ATARI.unpack([bytes(r) for r in items])
    np.testing.assert_array_equal(back["reward"], batch["reward"])


def test_add_takes_bytes_arrays_lists_tuples_and_tensors(rc: ReplayClient) -> None:
    rc.create("t", capacity=100, alpha=1.0, epsilon=0.0)
    rows = np.arange(24, dtype=np.float32).reshape(6, 4)
    assert rc.add("t", [1], b"\x00" * 16).tolist() == [0]              # bytes: one item
    assert rc.add("t", np.ones(6), rows).tolist() == list(range(1, 7))  # stacked array
    assert rc.add("t", 1.0, [rows[0], rows[1]]).tolist() == [7, 8]     # list of arrays
    assert rc.add("t", (1, 1), (rows[2].tobytes(), rows[3])).tolist() == [9, 10]  # tuple
    s = rc.sample("t", 50, item_shape=(4,), item_dtype=np.float32)
    assert s.items.dtype == np.float32 and s.items.flags.writeable
    by_id = {0: np.zeros(4, np.float32), **{i + 1: rows[i] for i in range(6)},
             7: rows[0], 8: rows[1], 9: rows[2], 10: rows[3]}
    for i, item in zip(s.ids, s.items, strict=True):
        np.testing.assert_array_equal(item, by_id[int(i)])
    torch = pytest.importorskip("torch")
    t = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    ids = rc.add("t", torch.tensor([2.0, 2.0]), t)            # a stacked tensor
    ids2 = rc.add("t", None, [t[0], t[1]])                     # a list of tensors
    assert ids.tolist() == [11, 12] and ids2.tolist() == [13, 14]
    assert rc.update("t", torch.tensor(ids), torch.tensor([3.0, 3.0])) == 2
    s = rc.sample("t", 8, schema=Schema({"x": ((4,), np.float32)}), torch=True)
    assert isinstance(s.items["x"], torch.Tensor) and isinstance(s.weights, torch.Tensor)
    s.items["x"].add_(1)  # writable: no warning, no copy needed


@pytest.mark.parametrize("call, message", [
    (lambda rc: rc.add("e", [1, 1, 1, 1, 1, 1, 1, float("nan"), 1], [b"x"] * 9),
     "priority at index 7 is nan: priorities must be finite and >= 0; the batch of 9 was "
     "rejected whole"),
    (lambda rc: rc.add("e", [1, -2, 1], [b"x"] * 3), "priority at index 1 is -2.0"),
    (lambda rc: rc.add("e", [1, 1, 1], [b"x", "text", b"y"]),
     "item at index 1 is a str, not bytes, a NumPy array or a torch tensor; the batch was "
     "rejected whole"),
    (lambda rc: rc.add("e", [1.0, 2.0], [b"one"]), "2 priorities for 1 items"),
    (lambda rc: rc.add("e", None, {"obs": np.zeros((2, 3))}), "pass schema="),
    (lambda rc: rc.add("e", None, {"obs": np.zeros((2, 84, 84, 4), np.uint8)}, schema=ATARI),
     "missing field(s) ['action', 'reward', 'done', 'next_obs']"),
    (lambda rc: rc.add("e", None, {**_transitions(3), "action": [0, 1]}, schema=ATARI),
     "field 'action' has 2 rows but 'obs' has 3; the batch was rejected whole"),
    (lambda rc: rc.add("e", None, {**_transitions(3), "obs": [np.zeros((84, 84, 4)),
                                                             np.zeros((84, 84, 3)),
                                                             np.zeros((84, 84, 4))]},
                       schema=ATARI),
     "field 'obs': the row at index 1 has shape (84, 84, 3), not (84, 84, 4)"),
    (lambda rc: rc.update("e", [0, 1, 2], [1.0, float("inf"), 0.5]),
     "priority at index 1 is inf"),
    (lambda rc: rc.update("e", [0, 1, 2], [1.0, 1.0, 1e39]),
     "priority at index 2 is inf"),  # beyond float32
    # a str that NumPy would parse was accepted, and the index was missing
    (lambda rc: rc.add("e", ["1.0"], [b"q"]), "priority at index 0 is '1.0' (str)"),
    (lambda rc: rc.add("e", [1.0, "high", 2.0], [b"x", b"y", b"z"]),
     "priority at index 1 is 'high' (str): priorities must be numbers"),
    (lambda rc: rc.update("e", [0], ["x"]), "priority at index 0 is 'x' (str)"),
])
def test_a_bad_batch_is_rejected_whole_naming_the_index(rc: ReplayClient, call: Any,
                                                        message: str) -> None:
    rc.create("e", capacity=10)
    rc.add("e", [1, 1, 1], [b"a", b"b", b"c"])
    with pytest.raises(BatchError) as err:
        call(rc)
    assert message in str(err.value)
    assert "\n" not in str(err.value)
    info = rc.info("e")
    assert info["size"] == 3 and info["inserts"] == 3 and info["updates"] == 0


def test_a_priority_the_server_refuses_is_named_by_index(rc: ReplayClient) -> None:
    rc.create("steep", capacity=10, alpha=1.0, epsilon=0.0)
    with pytest.raises(redis.ResponseError, match=r"\(priority at index 2\); the batch of 3 "
                                                   "was rejected whole"):
        rc.add("steep", [1.0, 2.0, 1e308], [b"a", b"b", b"c"])
    assert rc.info("steep")["size"] == 0


def test_item_dtype_without_item_shape_is_an_error(rc: ReplayClient) -> None:
    rc.create("d", capacity=10)
    rc.add("d", [1.0], [np.zeros(4, np.float32)])
    with pytest.raises(ValueError, match="item_dtype needs item_shape"):
        rc.sample("d", 1, item_dtype=np.float32)
    with pytest.raises(ValueError, match=r"item_shape \(3,\) of float32 is 12 bytes, but the "
                                         r"table's items are 16 bytes"):
        rc.sample("d", 1, item_shape=3, item_dtype=np.float32)
    s = rc.sample("d", 2)
    assert s.items == [b"\x00" * 16] * 2 and s.ids.flags.writeable and s.weights.flags.writeable


def test_schema_definitions_are_checked() -> None:
    with pytest.raises(ValueError, match="field 'x': expected"):
        Schema({"x": np.float32})
    with pytest.raises(ValueError, match="no fixed size"):
        Schema({"x": ((), object)})
    s = Schema({"obs": {"shape": 4}, "a": ((), ">i4")})  # cpprb style: dtype float32
    assert s.itemsize == 4 * 4 + 4
    packed = s.pack(obs=np.ones((2, 4)), a=np.array([1, 258]))
    assert packed[1, 16:].tolist() == [2, 1, 0, 0]  # little-endian on the wire
    out = s.unpack(packed)
    assert out["a"].tolist() == [1, 258] and out["a"].dtype.isnative
