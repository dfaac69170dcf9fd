"""Snapshots hold trajectories: episode streams, their
reference-counted chunks (raw and zstd-compressed) and TRAJECTORY tables come
back from SAVE + --restore (and DEBUG RELOAD) as they were: the same
REPLAY.INFO, REPLAY.COLUMNS and REPLAY.CHUNKS, the same samples from the same
seed, appends that continue the open episodes, and frees that bring the
chunks back to nothing. A snapshot whose chunk counts do not add up is refused
in one line and the older one loads."""
from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import redis

from pyctl.trajectory import TrajectoryWriter, chunk_stats, create_trajectory_table

if TYPE_CHECKING:
    from conftest import ServerProcess

Start = Callable[..., "ServerProcess"]
SIG = {"obs": ((6, 5), np.uint8), "action": ((), np.int64), "reward": ((), np.float32)}


@pytest.fixture
def start(server_factory: Callable[..., ServerProcess]) -> Start:
    def make(*flags: str) -> ServerProcess:
        return server_factory("inreplay", *flags)

    return make


def can_compress(r: redis.Redis) -> bool:
    try:
        r.execute_command("REPLAY.STREAM", "probe", "FIELDS", 1, "a", "uint8", "", "COMPRESS", 1)
    except redis.ResponseError as e:
        if "built without libzstd" in str(e):
            return False
        raise
    r.execute_command("REPLAY.STREAM", "probe", "DROP")
    return True


def snapshots(d: Path) -> list[Path]:
    found = [p for p in d.iterdir() if p.name.startswith("inreplay-") and p.suffix == ".snap"]
    return sorted(found, key=lambda p: int(p.name[len("inreplay-"):-len(".snap")]))


def frames(seed: int, n: int) -> dict[str, np.ndarray]:
    """Steps whose obs compress (a few values repeated), as frames do."""
    rng = np.random.default_rng(seed)
    return {"obs": np.repeat(rng.integers(0, 3, (n, 1, 5), dtype=np.uint8), 6, axis=1),
            "action": rng.integers(0, 6, n).astype(np.int64),
            "reward": rng.normal(size=n).astype(np.float32)}


def fill(r: redis.Redis, zstd: bool) -> None:
    """Two tables sharing chunks of three streams: one raw and open, one
    compressed and open (or raw without libzstd), one ended and dropped whose
    chunks only the items keep; draws from the fifo table so that times sampled
    are not 0 (and items sampled MAX_TIMES_SAMPLED times are gone)."""
    create_trajectory_table(r, "ring", 40, alpha=0.8, seed=3)
    # a fifo sampler draws without the RNG (which a snapshot does not keep:
    # a table restored draws as the same table did right after its SAVE)
    create_trajectory_table(r, "gen", 30, sampler="fifo", remover="fifo",
                            max_times_sampled=3, min_size=2, seed=5)
    writers = {"raw": TrajectoryWriter(r, "raw", SIG, chunk_steps=8, history=32),
               "zs": TrajectoryWriter(r, "zs", SIG, chunk_steps=8, history=32,
                                      compress=3 if zstd else 0),
               "old": TrajectoryWriter(r, "old", SIG, chunk_steps=4, history=16)}
    for k, (name, w) in enumerate(writers.items()):
        ep = frames(k, 45)
        for i in range(45):
            w.append({f: v[i] for f, v in ep.items()})
            if i >= 4:
                cols = {"obs": w.history["obs"][i - 4:i + 1], "action": w.history["action"][i - 4],
                        "reward": w.history["reward"][i - 4:i - 1]}
                w.create_item("ring", 1.0 + (i % 7), cols)
                if i % 3 == 0:
                    w.create_item("gen", None, cols)  # the same steps: shared chunks
            if i % 10 == 9:
                w.flush()
        w.flush()
        if name == "old":
            w.end_episode()
            r.execute_command("REPLAY.STREAM", "old", "DROP")
    for _ in range(4):
        r.execute_command("REPLAY.SAMPLE", "gen", 5)


def state(r: redis.Redis) -> dict[str, Any]:
    return {"chunks": chunk_stats(r),
            **{f"info {t}": r.execute_command("REPLAY.INFO", t) for t in ("ring", "gen")},
            **{f"columns {t}": r.execute_command("REPLAY.COLUMNS", t) for t in ("ring", "gen")}}


def after(r: redis.Redis) -> list[Any]:
    """What the server answers to the same requests from the saved state on:
    draws (ids, weights, columns, WITHINFO), appends continuing the open
    episodes, items that evict, frees, down to no chunk at all."""
    out: list[Any] = []
    for _ in range(3):
        out.append(r.execute_command("REPLAY.SAMPLE", "ring", 8, "WITHINFO"))
        out.append(r.execute_command("REPLAY.SAMPLE", "gen", 4, "WITHINFO"))
    ep = frames(9, 20)
    for name in ("raw", "zs"):
        n = int(r.execute_command("REPLAY.APPEND", name, 20, *(ep[f].tobytes() for f in SIG)))
        out.append(n)
        # columns across the steps saved and the steps appended after the restore
        out.append(r.execute_command(
            "REPLAY.ITEM", "ring", 2.5, 3, "obs", name, "obs", n - 25, 5,
            "action", name, "action", n - 25, 1, "reward", name, "reward", n - 25, 3,
            "MAX", 3, "obs", name, "obs", n - 5, 5, "action", name, "action", n - 5, 1,
            "reward", name, "reward", n - 5, 3))
        out.append(chunk_stats(r))
    out.append(r.execute_command("REPLAY.SAMPLE", "ring", 40, "WITHINFO"))
    out.append(state(r))
    r.execute_command("REPLAY.STREAM", "raw", "END")
    out.append(chunk_stats(r))
    r.execute_command("REPLAY.DROP", "ring")
    out.append(chunk_stats(r))
    r.execute_command("REPLAY.STREAM", "zs", "DROP")
    r.execute_command("REPLAY.STREAM", "raw", "DROP")
    out.append(chunk_stats(r))
    r.execute_command("REPLAY.DROP", "gen")
    out.append(chunk_stats(r))
    return out


@pytest.mark.parametrize("compressed", [False, True], ids=["raw", "zstd"])
def test_round_trip_restores_the_same_trajectories(start: Start, tmp_path: Path,
                                                   compressed: bool) -> None:
    d = tmp_path / "snap"
    d.mkdir()
    a = start("--dir", str(d), "--seed", "7")
    r = a.client()
    if compressed and not can_compress(r):
        pytest.skip("this server was built without libzstd (make installs libzstd-dev)")
    fill(r, compressed)
    before = state(r)
    assert before["chunks"]["streams"] == 2 and before["chunks"]["references"] > 0
    assert (before["chunks"]["chunks_compressed"] > 0) == compressed
    assert r.save() is True
    expect = after(r)  # the same requests on the original, from the saved state
    end = expect[-1]
    assert end["chunks"] == 0 and end["chunk_bytes"] == 0 and end["references"] == 0
    assert end["streams"] == 0 and end["chunks_compressed"] == 0
    r.close()
    assert a.stop() == 0

    (tmp_path / "b").mkdir()
    b = start("--restore", str(d), "--dir", str(tmp_path / "b"), "--seed", "7")
    r = b.client()
    assert "restored 0 keys and 2 tables" in b.log_tail()
    assert state(r) == before
    assert after(r) == expect


def test_appended_steps_after_restore_read_back(start: Start, tmp_path: Path) -> None:
    """Saved on stop (--save-on-shutdown), an open episode continues: an item
    over steps from before and after the restore assembles exactly those steps."""
    d = tmp_path / "snap"
    d.mkdir()
    a = start("--dir", str(d), "--save-on-shutdown")
    r = a.client()
    create_trajectory_table(r, "t", 100, sampler="uniform")
    w = TrajectoryWriter(r, "s", SIG, chunk_steps=8, history=64)
    ep = frames(1, 30)
    for i in range(13):
        w.append({f: v[i] for f, v in ep.items()})
    w.create_item("t", 1.0, {"obs": w.history["obs"][0:13]})
    w.flush()
    r.close()
    assert a.stop() == 0
    assert len(snapshots(d)) == 1
    (tmp_path / "b").mkdir()
    b = start("--restore", str(d), "--dir", str(tmp_path / "b"))
    r = b.client()
    assert r.execute_command("REPLAY.APPEND", "s", 17, *(ep[f][13:].tobytes() for f in SIG)) == 30
    r.execute_command("REPLAY.DROP", "t")
    create_trajectory_table(r, "t", 100, sampler="uniform")
    r.execute_command("REPLAY.ITEM", "t", 1, 1, "obs", "s", "obs", 5, 20)
    _, _, (obs,) = r.execute_command("REPLAY.SAMPLE", "t", 1)
    got = np.frombuffer(obs, np.uint8).reshape(20, 6, 5)
    np.testing.assert_array_equal(got, ep["obs"][5:25])


def test_debug_reload_and_bgsave_keep_trajectories(start: Start, tmp_path: Path) -> None:
    d = tmp_path / "snap"
    d.mkdir()
    a = start("--dir", str(d), "--seed", "9")
    r = a.client()
    fill(r, can_compress(r))
    before = state(r)
    assert r.execute_command("DEBUG", "RELOAD") in (b"OK", "OK", True)
    assert state(r) == before
    r.bgsave()
    for _ in range(500):
        if r.info("persistence")["rdb_bgsave_in_progress"] == 0:
            break
        time.sleep(0.02)
    assert r.info("persistence")["rdb_last_bgsave_status"] == "ok"
    assert r.execute_command("DEBUG", "RELOAD", "NOSAVE") in (b"OK", "OK", True)
    assert state(r) == before
    # a TRAJECTORY table with items that the snapshot lacks: its chunks would
    # not survive the snapshot's chunk store replacing the server's
    create_trajectory_table(r, "late", 5)
    r.execute_command("REPLAY.ITEM", "late", 1, 1, "o", "raw", "obs", 40, 2)
    with pytest.raises(redis.ResponseError, match="TRAJECTORY table 'late' holds items and is "
                       r"not in the snapshot: drop it \(REPLAY.DROP\) before loading"):
        r.execute_command("DEBUG", "RELOAD", "NOSAVE")
    assert chunk_stats(r)["references"] == before["chunks"]["references"] + 1  # nothing loaded
    r.execute_command("REPLAY.DROP", "late")
    assert r.execute_command("DEBUG", "RELOAD", "NOSAVE") in (b"OK", "OK", True)
    assert state(r) == before


def fix_crc(data: bytearray) -> None:
    struct.pack_into("<I", data, len(data) - 4, zlib.crc32(bytes(data[:-4])) & 0xFFFFFFFF)


def test_corrupt_trajectory_records_are_refused_in_one_line(start: Start, tmp_path: Path) -> None:
    """A newer snapshot whose chunk reference count or record version was
    changed (checksum made valid again) is refused with one line saying what
    is wrong; the older snapshot loads instead."""
    d = tmp_path / "snap"
    d.mkdir()
    a = start("--dir", str(d), "--seed", "7")
    r = a.client()
    fill(r, False)
    assert r.save() is True
    good = state(r)
    r.execute_command("REPLAY.APPEND", "raw", 1, *(frames(3, 1)[f].tobytes() for f in SIG))
    assert r.save() is True
    assert a.stop() == 0
    older, newer = snapshots(d)
    orig = newer.read_bytes()
    at = orig.index(b"CSTO") + 12  # the body: version, 3 counters, used, cap, nfree
    nfree = struct.unpack_from("<I", orig, at + 4 + 24 + 8)[0]
    first = at + 4 + 24 + 12 + 4 * nfree + 8  # the first chunk: handle, refs, bytes, raw
    handle = struct.unpack_from("<I", orig, first)[0]
    cases = [(first + 4, 1, f"chunk {handle}: saved with "),  # refs + 1
             (at, 1, "chunk store (CSTO) record of version 2")]
    for k, (off, delta, why) in enumerate(cases):
        data = bytearray(orig)
        struct.pack_into("<I", data, off, struct.unpack_from("<I", data, off)[0] + delta)
        fix_crc(data)
        newer.write_bytes(bytes(data))
        (tmp_path / f"b{k}").mkdir()
        b = start("--restore", str(d), "--dir", str(tmp_path / f"b{k}"), "--seed", "7")
        r = b.client()
        lines = [ln for ln in b.log_tail(1 << 20).splitlines() if "is corrupt" in ln]
        assert len(lines) == 1 and why in lines[0] and str(newer) in lines[0], lines
        assert f"from {older}" in b.log_tail(1 << 20)
        assert state(r) == good  # the older snapshot, whole
        r.close()
        assert b.stop() == 0
