"""Trajectories stored once: episode streams in reference-counted
chunks, TRAJECTORY tables whose items reference ranges of steps, samples assembled
server-side per column, bad input refused whole, memory back to its baseline."""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import redis
from conftest import REPLAY_HOSTS

from pyctl.errors import decode_info
from pyctl.trajectory import (
    TrajectoryWriter,
    chunk_stats,
    create_trajectory_table,
    sample_trajectories,
)

if TYPE_CHECKING:
    from conftest import ServerProcess

SIG = {"obs": ((4, 3), np.uint8), "action": ((), np.int64), "reward": ((), np.float32)}


@pytest.fixture
def r(replay_server: ServerProcess) -> Iterator[redis.Redis]:
    c = replay_server.client()
    yield c
    c.close()


def episode(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    return {"obs": rng.integers(0, 256, (n, 4, 3), dtype=np.uint8),
            "action": rng.integers(0, 6, n).astype(np.int64),
            "reward": rng.normal(size=n).astype(np.float32)}


def steps(ep: dict[str, np.ndarray], i: int) -> dict[str, Any]:
    return {k: v[i] for k, v in ep.items()}


def table_size(r: redis.Redis, t: str) -> int:
    return int(decode_info(r.execute_command("REPLAY.INFO", t))["size"])


def test_nstep_transitions_match_numpy(r: redis.Redis) -> None:
    """(obs t, action t, rewards t..t+n-1, obs t+n) built from steps, as NumPy slices them."""
    rng = np.random.default_rng(1)
    create_trajectory_table(r, "nstep", 10_000, sampler="uniform")
    w = TrajectoryWriter(r, "actor0", SIG, chunk_steps=8, history=64)
    n = 3
    eps = [episode(rng, 50), episode(rng, 37)]
    expect: dict[int, tuple[int, int]] = {}
    for e, ep in enumerate(eps):
        for i in range(len(ep["action"])):
            w.append(steps(ep, i))
            t = i - n  # a transition from t is complete once step t+n is in
            if t >= 0:
                w.create_item("nstep", 1.0, {
                    "obs": w.history["obs"][t], "action": w.history["action"][t],
                    "rewards": w.history["reward"][t:t + n], "next_obs": w.history["obs"][-1]})
                expect[len(expect)] = (e, t)
            if i % 10 == 9:
                w.flush()
        w.end_episode()
    assert table_size(r, "nstep") == len(expect)
    s = sample_trajectories(r, "nstep", 256, info=True)
    assert s.info is not None and s.info.table_size == len(expect)
    for j, item in enumerate(s.ids):
        e, t = expect[int(item)]
        ep = eps[e]
        np.testing.assert_array_equal(s.columns["obs"][j, 0], ep["obs"][t])
        assert s.columns["action"][j, 0] == ep["action"][t]
        np.testing.assert_array_equal(s.columns["rewards"][j], ep["reward"][t:t + n])
        np.testing.assert_array_equal(s.columns["next_obs"][j, 0], ep["obs"][t + n])
    assert s.columns["rewards"].dtype == np.float32 and s.columns["obs"].shape == (256, 1, 4, 3)


def test_sequences_of_80_overlapping_by_40_in_two_tables(r: redis.Redis) -> None:
    """R2D2's sequences: 80 consecutive steps, period 40; the same steps in two tables."""
    rng = np.random.default_rng(2)
    for t in ("seq_a", "seq_b"):
        create_trajectory_table(r, t, 1000, sampler="uniform")
    w = TrajectoryWriter(r, "actor1", SIG, chunk_steps=16, history=200)
    ep = episode(rng, 400)
    starts = []
    for i in range(400):
        w.append(steps(ep, i))
        if i + 1 >= 80 and (i + 1 - 80) % 40 == 0:
            for t in ("seq_a", "seq_b"):
                w.create_item(t, 2.0, {"obs": w.history["obs"][-80:],
                                       "reward": w.history["reward"][-80:]})
            starts.append(i + 1 - 80)
        if i % 25 == 24:
            w.flush()
    w.flush()
    before = chunk_stats(r)
    # 400 steps x 2 fields (+ action) stored once: chunks of 16 steps, never per item
    assert before["chunk_bytes"] <= 3 * 400 * (12 + 8 + 4)
    for t in ("seq_a", "seq_b"):
        s = sample_trajectories(r, t, 64)  # ids of each table count from 0, like starts
        for j, item in enumerate(s.ids):
            start = starts[int(item)]
            np.testing.assert_array_equal(s.columns["obs"][j], ep["obs"][start:start + 80])
            np.testing.assert_array_equal(s.columns["reward"][j], ep["reward"][start:start + 80])
    # dropping one table keeps the chunks the other references
    r.execute_command("REPLAY.DROP", "seq_a")
    assert chunk_stats(r)["chunks"] == before["chunks"]
    r.execute_command("REPLAY.DROP", "seq_b")
    w.close()
    st = chunk_stats(r)
    assert (st["chunks"], st["chunk_bytes"], st["references"], st["streams"]) == (0, 0, 0, 0)


def test_reference_counting_with_random_eviction_returns_to_baseline(server_factory: Any,
                                                                      replay_host: str) -> None:
    """Many items in batches, two tables sharing chunks, one evicting at random, episodes
    ending: memory (REPLAY.CHUNKS, INFO used_memory) returns to its baseline. A server of
    its own: on the session's shared one, other tests' clients and tables going away moved
    used_memory by more than the chunks (a fresh clone's make test saw it fall 218 KB).
    The module host's tables and chunks are not in Redis's used_memory (not its
    allocator's): its INFO inreplay_memory adds them; and Redis's per-command latency
    histograms (about 37 KB each, made at a command's first call) are off."""
    extra = ("--latency-tracking", "no") if replay_host == "module" else ()
    r = server_factory(REPLAY_HOSTS[replay_host], *extra).client()
    def used() -> int:
        module = int(r.info("inreplay")["inreplay_memory"]) if replay_host == "module" else 0
        return int(r.info("memory")["used_memory"]) + module
    base_mem = used()
    create_trajectory_table(r, "fifo", 500)
    create_trajectory_table(r, "rand", 300, remover="uniform", max_times_sampled=2)
    rng = np.random.default_rng(3)
    writers = [TrajectoryWriter(r, f"w{i}", SIG, chunk_steps=4, history=32) for i in range(3)]
    made = 0
    for it in range(600):
        w = writers[it % 3]
        ep = episode(rng, 8)
        for i in range(8):
            w.append(steps(ep, i))
        for _ in range(8):
            table = "fifo" if rng.random() < 0.5 else "rand"
            ln = 6 if table == "fifo" else 2  # a table's columns have one length
            end = w.episode_steps - int(rng.integers(0, 8 - ln + 1))
            w.create_item(table, float(rng.random()) + 0.1,
                          {"obs": w.history["obs"][end - ln:end],
                           "reward": w.history["reward"][end - 1]})
            made += 1
        w.flush()
        if rng.random() < 0.1:
            w.end_episode()
        if it % 7 == 0 and table_size(r, "rand") >= 4:
            sample_trajectories(r, "rand", 4)  # may consume items (MAX_TIMES_SAMPLED 2)
    st = chunk_stats(r)
    assert st["items_made"] >= made and st["chunks"] > 0 and st["references"] > 0
    flat = r.execute_command("REPLAY.INFO", "fifo")
    info = dict(zip(flat[::2], flat[1::2], strict=True))
    assert (info[b"columns"], info[b"store_chunks"], info[b"store_chunk_bytes"],
            info[b"store_references"]) == (2, st["chunks"], st["chunk_bytes"], st["references"])
    peak = used()
    assert peak - base_mem >= st["chunk_bytes"] > 0
    for t in ("fifo", "rand"):
        r.execute_command("REPLAY.DROP", t)
    for w in writers:
        w.close()
    st = chunk_stats(r)
    assert (st["chunks"], st["chunk_bytes"], st["references"], st["streams"]) == (0, 0, 0, 0)
    # what stays: the chunk headers' array (a free list) and client buffers grown by
    # the pipelines; the chunks themselves are gone from used_memory
    assert used() - base_mem <= st["memory"] + 65536 < peak - base_mem


def err(r: redis.Redis, *args: Any) -> str:
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*args)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_bad_input_is_refused_whole(r: redis.Redis) -> None:
    create_trajectory_table(r, "tt", 100)
    r.execute_command("REPLAY.CREATE", "plain", "CAPACITY", 10)
    r.execute_command("REPLAY.STREAM", "s", "FIELDS", 2, "obs", "uint8", "4,3", "r", "float32", "",
                      "CHUNK", 4, "HISTORY", 8)
    obs = np.zeros((20, 4, 3), np.uint8).tobytes()
    rew = np.zeros(20, np.float32).tobytes()
    assert r.execute_command("REPLAY.APPEND", "s", 20, obs, rew) == 20
    # unknown stream, wrong field size, wrong field count
    assert "no such stream 'nope'" in err(r, "REPLAY.APPEND", "nope", 1, b"x", b"y")
    assert "must be 1 steps of uint8 [4,3] (12 bytes), got 11 bytes" in err(
        r, "REPLAY.APPEND", "s", 1, b"x" * 11, b"y" * 4)
    assert "has 2 fields" in err(r, "REPLAY.APPEND", "s", 1, b"x" * 12)
    assert "unknown dtype 'uint7'" in err(r, "REPLAY.STREAM", "z", "FIELDS", 1, "a", "uint7", "")
    assert "invalid shape" in err(r, "REPLAY.STREAM", "z", "FIELDS", 1, "a", "uint8", "3,x")
    assert "holds more than 1048576 chunks" in err(
        r, "REPLAY.STREAM", "z", "FIELDS", 1, "a", "uint8", "", "CHUNK", 1, "HISTORY", 16777216)
    assert "another signature" in err(r, "REPLAY.STREAM", "s", "FIELDS", 1, "obs", "uint8", "4,3")
    before = chunk_stats(r)
    good = ["1.0", 2, "o", "s", "obs", 15, 3, "rw", "s", "r", 17, 1]
    cases = {
        "past the episode's end": ["1.0", 2, "o", "s", "obs", 18, 3, "rw", "s", "r", 17, 1],
        "was freed": ["1.0", 2, "o", "s", "obs", 0, 3, "rw", "s", "r", 17, 1],
        "no field 'nope'": ["1.0", 2, "o", "s", "nope", 15, 3, "rw", "s", "r", 17, 1],
        "no such stream 'x'": ["1.0", 2, "o", "x", "obs", 15, 3, "rw", "s", "r", 17, 1],
        "every item of a table has the same columns": ["1.0", 2, "o", "s", "obs", 15, 2, "rw",
                                                       "s", "r", 17, 1],
        "invalid priority": ["-1", 2, "o", "s", "obs", 15, 3, "rw", "s", "r", 17, 1],
    }
    for want, bad in cases.items():
        # a good first item and a bad second one: nothing of the batch is applied
        assert want in err(r, "REPLAY.ITEM", "tt", *good, *bad), want
        assert table_size(r, "tt") == 0
        assert chunk_stats(r)["references"] == before["references"]
    assert "holds opaque items" in err(r, "REPLAY.ITEM", "plain", *good)
    assert len(r.execute_command("REPLAY.ITEM", "tt", *good, *good)) == 2
    assert "holds trajectories" in err(r, "REPLAY.ADD", "tt", 1, b"x")
    assert "without PACKED" in err(r, "REPLAY.SAMPLE", "tt", 1, "PACKED")
    # a TRAJECTORY table takes QUEUE/STACK and SAMPLES_PER_INSERT (tests/test_traj_limiter.py)
    assert r.execute_command("REPLAY.CREATE", "q", "QUEUE", 4, "TRAJECTORY") in (b"OK", True)
    # a column now mismatching the table's first item
    assert "every item of a table has the same columns" in err(
        r, "REPLAY.ITEM", "tt", "1", 2, "o", "s", "r", 15, 3, "rw", "s", "r", 17, 1)
    cols = r.execute_command("REPLAY.COLUMNS", "tt")
    assert [[bytes(x) if isinstance(x, bytes) else x for x in c] for c in cols] == [
        [b"o", b"uint8", b"4,3", 3], [b"rw", b"float32", b"", 1]]


def test_sample_too_big_for_a_reply_is_refused(r: redis.Redis) -> None:
    """A sample whose column would exceed proto-max-bulk-len is refused before
    it draws (it used to abort the server reserving 16 TiB of reply)."""
    r.execute_command("REPLAY.STREAM", "big", "FIELDS", 1, "obs", "uint8", "1048576",
                      "CHUNK", 16, "HISTORY", 16)
    r.execute_command("REPLAY.APPEND", "big", 16, b"\x01" * (16 << 20))
    r.execute_command("REPLAY.CREATE", "bt", "CAPACITY", 10, "TRAJECTORY")
    r.execute_command("REPLAY.ITEM", "bt", 1, 1, "obs", "big", "obs", 0, 16)
    msg = err(r, "REPLAY.SAMPLE", "bt", 1048576)
    assert "above proto-max-bulk-len" in msg and "sample fewer items" in msg
    flat = r.execute_command("REPLAY.INFO", "bt")
    d = dict(zip(flat[::2], flat[1::2], strict=True))
    assert int(d[b"samples"]) == 0  # nothing was drawn
    r.config_set("client-output-buffer-limit", "normal 64mb 0 0")
    try:
        assert "client-output-buffer-limit" in err(r, "REPLAY.SAMPLE", "bt", 8)
    finally:
        r.config_set("client-output-buffer-limit", "normal 1gb 0 0")
    used = int(r.info("memory")["used_memory"])
    r.config_set("maxmemory", used + (64 << 20))
    try:
        assert "maxmemory's headroom" in err(r, "REPLAY.SAMPLE", "bt", 8)
    finally:
        r.config_set("maxmemory", 0)
    got = r.execute_command("REPLAY.SAMPLE", "bt", 2)  # the server is still up
    assert len(got[2][0]) == 2 * (16 << 20)
    r.execute_command("REPLAY.STREAM", "big", "DROP")


def test_item_batch_over_maxbytes_adds_nothing(r: redis.Redis) -> None:
    """REPLAY.ITEM checks each reference record as the table will store it
    (general mode: 16-byte header, 8-byte rounding; a one-column record is 5 bytes and
    4 per chunk it spans: 4 steps from step 0 span 2 chunks of 2, 13 bytes, 32 stored;
    from step 1, 3 chunks, 17 bytes, 40 stored): a batch whose second record is larger
    than the table is refused whole."""
    r.execute_command("REPLAY.STREAM", "fs", "FIELDS", 1, "x", "uint8", "", "CHUNK", 2)
    r.execute_command("REPLAY.APPEND", "fs", 8, bytes(range(8)))
    r.execute_command("REPLAY.CREATE", "ft", "CAPACITY", 10, "MAXBYTES", 36, "REMOVER",
                      "uniform", "TRAJECTORY")
    msg = err(r, "REPLAY.ITEM", "ft", 1, 1, "c", "fs", "x", 0, 4, 1, 1, "c", "fs", "x", 1, 4)
    assert "item 1's reference record (17 bytes)" in msg and "MAXBYTES" in msg, msg
    assert table_size(r, "ft") == 0
    assert len(r.execute_command("REPLAY.ITEM", "ft", 1, 1, "c", "fs", "x", 0, 4)) == 1
    r.execute_command("REPLAY.STREAM", "fs", "DROP")


def test_blocked_sample_wakes_on_items(replay_server: ServerProcess, r: redis.Redis) -> None:
    """MIN_SIZE holds a TRAJECTORY table's SAMPLE ... TIMEOUT until REPLAY.ITEM fills it."""
    import threading
    create_trajectory_table(r, "wait", 10, min_size=2)
    w = TrajectoryWriter(r, "wz", SIG)
    got: list[Any] = []
    other = replay_server.client()
    th = threading.Thread(target=lambda: got.append(
        sample_trajectories(other, "wait", 2, timeout=10)))
    th.start()
    rng = np.random.default_rng(4)
    ep = episode(rng, 3)
    for i in range(3):
        w.append(steps(ep, i))
    w.create_item("wait", 1.0, {"obs": w.history["obs"][0:2]})
    w.flush()
    assert not got  # one item: still below MIN_SIZE
    w.create_item("wait", 1.0, {"obs": w.history["obs"][1:3]})
    w.flush()
    th.join(10)
    other.close()
    assert got and got[0].columns["obs"].shape == (2, 2, 4, 3)


def test_compressed_chunks_assemble_the_same_steps(r: redis.Redis) -> None:
    """COMPRESS 3: full chunks are kept zstd-compressed; samples decompress them."""
    rng = np.random.default_rng(5)
    create_trajectory_table(r, "z", 1000, sampler="uniform")
    sig = {"obs": ((16, 16), np.uint8), "reward": ((), np.float32)}
    try:
        w = TrajectoryWriter(r, "wz", sig, chunk_steps=8, history=64, compress=3)
    except redis.ResponseError as e:
        if "built without libzstd" in str(e):
            pytest.skip("this server was built without libzstd (make installs libzstd-dev)")
        raise
    n = 200
    ep = {"obs": np.repeat(rng.integers(0, 4, (n, 1, 16), dtype=np.uint8), 16, axis=1),
          "reward": rng.normal(size=n).astype(np.float32)}
    for i in range(n):
        w.append({k: v[i] for k, v in ep.items()})
        if i >= 9:
            w.create_item("z", 1.0, {"obs": w.history["obs"][-10:],
                                     "reward": w.history["reward"][-10:]})
        if i % 16 == 15:
            w.flush()
    w.flush()
    st = chunk_stats(r)
    assert st["chunks_compressed"] > 0 and st["chunk_bytes"] < st["raw_bytes_compressed"]
    s = sample_trajectories(r, "z", 128)
    for j, item in enumerate(s.ids):
        t = int(item) + 10  # item k covers steps k..k+9
        np.testing.assert_array_equal(s.columns["obs"][j], ep["obs"][t - 10:t])
        np.testing.assert_array_equal(s.columns["reward"][j], ep["reward"][t - 10:t])
    assert "COMPRESS must be a zstd level" in err(
        r, "REPLAY.STREAM", "q", "FIELDS", 1, "a", "uint8", "", "COMPRESS", 0)
