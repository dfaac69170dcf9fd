"""Compressed Atari transitions (rl.codec) on real Breakout frames: the zstd
round trip, the format byte, corrupt items, the parallel decode and the
prefetcher's decode threads, the actors' capacity warning, the Atari preset's
MAXBYTES, and bench/compress.py end to end."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("zstandard")
torch = pytest.importorskip("torch")
pytest.importorskip("ale_py")
pytest.importorskip("cv2")

from inreplay.actors.actor import Actor  # noqa: E402
from inreplay.learner.replay import ApplianceReplay, LocalReplay, Prefetcher  # noqa: E402
from inreplay.rl.codec import (  # noqa: E402
    FORMAT_RAW,
    FORMAT_ZSTD,
    HEADER_BYTES,
    ItemError,
    TransitionCodec,
    capacity_warning,
    stored_bytes,
)
from inreplay.rl.config import preset  # noqa: E402
from inreplay.rl.env import EnvSpec  # noqa: E402
from inreplay.rl.nstep import Transition  # noqa: E402

from pyctl.client import ReplayClient  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import compress  # noqa: E402

ATARI = EnvSpec((4, 84, 84), np.dtype(np.uint8), 4, 4, True, None)


@pytest.fixture(scope="module")
def breakout() -> list[Transition]:
    """Real Breakout transitions; random actions, so lives are lost (k < n) often."""
    ts = compress.breakout_transitions(400, seed=3, explore=1.0)
    assert {t.steps for t in ts} >= {1, 2, 3}, "no episode ends early in this sample"
    return ts


def _encode(codec: TransitionCodec, ts: list[Transition]) -> Any:
    return codec.encode(np.stack([t.obs for t in ts]), [t.action for t in ts],
                        [t.ret for t in ts], [t.discount for t in ts],
                        np.stack([t.next_obs for t in ts]), [t.steps for t in ts])


def _check(out: Any, ts: list[Transition]) -> None:
    np.testing.assert_array_equal(out.obs, np.stack([t.obs for t in ts]))
    np.testing.assert_array_equal(out.next_obs, np.stack([t.next_obs for t in ts]))
    np.testing.assert_array_equal(out.action, [t.action for t in ts])
    np.testing.assert_array_equal(out.ret, np.float32([t.ret for t in ts]))
    np.testing.assert_array_equal(out.discount, np.float32([t.discount for t in ts]))


# ---- the round trip ------------------------------------------------------------------


def test_breakout_round_trip_is_bit_exact_and_small(breakout: list[Transition]) -> None:
    codec = TransitionCodec(ATARI.obs_shape, np.uint8, n_step=3, threads=1)
    assert codec.compress and codec.itemsize == HEADER_BYTES + 7 * 84 * 84
    items = _encode(codec, breakout)
    assert isinstance(items, list) and all(isinstance(i, bytes) for i in items)
    assert {i[11] for i in items} == {FORMAT_ZSTD}
    mean = np.mean([stored_bytes(len(i)) for i in items])
    assert mean <= 8 * 1024, f"{mean:.0f} B per transition (goal: 8 KB)"
    assert mean < codec.itemsize / 20
    _check(codec.decode(items), breakout)


def test_raw_and_compressed_items_read_together(breakout: list[Transition]) -> None:
    ts = breakout[:120]
    zstd = TransitionCodec(ATARI.obs_shape, np.uint8, n_step=3, threads=1)
    raw = TransitionCodec(ATARI.obs_shape, np.uint8, n_step=3, compress=False)
    rows = _encode(raw, ts)
    assert isinstance(rows, np.ndarray) and rows.shape == (len(ts), raw.itemsize)
    assert (rows[:, 11] == FORMAT_RAW).all()
    items = _encode(zstd, ts)
    mixed = [bytes(rows[i]) if i % 3 == 0 else items[i] for i in range(len(ts))]
    for codec in (zstd, raw):  # either codec reads either format
        _check(codec.decode(mixed), ts)
        _check(codec.decode(rows), ts)  # PACKED: raw records back to back
        _check(codec.decode(rows.tobytes()), ts)


def test_vector_records_stay_raw() -> None:
    codec = TransitionCodec((4,), np.float32, n_step=3)
    assert not codec.compress and codec.itemsize == HEADER_BYTES + 2 * 4 * 4
    rows = codec.encode(np.ones((3, 4), np.float32), [0, 1, 0], [1, 2, 3], [0.5] * 3,
                        np.zeros((3, 4), np.float32), [3, 3, 3])
    assert isinstance(rows, np.ndarray) and (rows[:, 11] == FORMAT_RAW).all()
    np.testing.assert_array_equal(codec.decode([bytes(r) for r in rows]).ret, [1, 2, 3])
    with pytest.raises(ValueError, match="only stacked frames are compressed"):
        TransitionCodec((4,), np.float32, n_step=3, compress=True)


# ---- corrupt items ---------------------------------------------------------------------


def _corrupt(kind: str, item: bytes, raw_row: bytes) -> bytes:
    b = bytearray(item)
    if kind == "truncated":
        return item[:-10]
    if kind == "header only":
        return item[:5]
    if kind == "flipped byte":
        b[HEADER_BYTES + (len(b) - HEADER_BYTES) // 2] ^= 0x55
        return bytes(b)
    if kind == "format":
        b[11] = 7
        return bytes(b)
    if kind == "next_off":
        b[10] = 0
        return bytes(b)
    if kind == "raw truncated":
        return raw_row[:-1]
    if kind == "frame size":  # a 5-frame (n = 1) record's payload in a 7-frame codec
        small = TransitionCodec(ATARI.obs_shape, np.uint8, n_step=1)
        obs = np.zeros((1, 4, 84, 84), np.uint8)
        return bytes(small.encode(obs, [0], [0], [0], obs, [1])[0])
    raise AssertionError(kind)


@pytest.mark.parametrize("kind, says", [
    ("truncated", "corrupt zstd frame"),
    ("header only", "5 bytes, shorter than the 12-byte record header"),
    ("flipped byte", "corrupt zstd frame"),
    ("format", "unknown format 7"),
    ("next_off", "next_off 0 is not in [1, 3]"),
    ("raw truncated", "raw record of 49403 bytes, not 49404"),
    ("frame size", "says 35280 bytes, the frames are 49392"),
])
def test_a_corrupt_item_is_one_line_naming_it(breakout: list[Transition], kind: str,
                                              says: str) -> None:
    ts = breakout[:100]
    codec = TransitionCodec(ATARI.obs_shape, np.uint8, n_step=3, threads=2)
    items = _encode(codec, ts)
    raw = TransitionCodec(ATARI.obs_shape, np.uint8, n_step=3, compress=False)
    bad = 77  # in the second half: decoded on a pool thread
    items[bad] = _corrupt(kind, items[bad], bytes(_encode(raw, ts[bad:bad + 1])[0]))
    ids = np.arange(5000, 5100)
    with pytest.raises(ItemError) as e:
        codec.decode(items, ids)
    msg = str(e.value)
    assert msg.startswith("replay item 5077: ") and says in msg and "\n" not in msg, msg
    with pytest.raises(ItemError, match=r"^item 77 of the batch: "):
        codec.decode(items)
    codec.close()


def test_a_compressed_item_among_raw_records_is_named() -> None:
    codec = TransitionCodec(ATARI.obs_shape, np.uint8, n_step=3, compress=False)
    obs = np.zeros((3, 4, 84, 84), np.uint8)
    rows = codec.encode(obs, [0] * 3, [0] * 3, [0] * 3, obs, [3] * 3)
    rows[2, 11] = FORMAT_ZSTD
    with pytest.raises(ItemError, match=r"^replay item 12: format 1 \(zstd\) in a batch of "
                                        r"49404-byte raw records$"):
        codec.decode(rows, [10, 11, 12])


# ---- parallel decoding -------------------------------------------------------------------


def test_parallel_decode_matches_and_uses_the_pool(breakout: list[Transition]) -> None:
    codec = TransitionCodec(ATARI.obs_shape, np.uint8, n_step=3, threads=3)
    items = _encode(codec, breakout)
    before = {t.ident for t in threading.enumerate() if t.name.startswith("decode")}
    _check(codec.decode(items), breakout)
    pool = {t.ident for t in threading.enumerate() if t.name.startswith("decode")} - before
    assert len(pool) == 2, "the batch was not spread over the decode threads"
    codec.parallel = 1
    _check(codec.decode(items), breakout)
    codec.close()


def _fill(srv: Any, table: str, items: list[bytes], capacity: int = 4096) -> ApplianceReplay:
    cfg = preset("ALE/Breakout-v5", port=srv.port, table=table, capacity=capacity,
                 replay_maxbytes=64 << 20, frames_once=False)  # the records path
    with ReplayClient(port=srv.port) as rc:
        rc.create(table, capacity, maxbytes=cfg.replay_maxbytes)
        rc.add(table, np.ones(len(items)), items)
    return ApplianceReplay(cfg, TransitionCodec(ATARI.obs_shape, np.uint8, 3, threads=3))


def test_appliance_samples_compressed_items(replay_server: Any,
                                            breakout: list[Transition]) -> None:
    codec = TransitionCodec(ATARI.obs_shape, np.uint8, n_step=3)
    items = _encode(codec, breakout)
    replay = _fill(replay_server, "atari", items)
    try:
        s = replay.sample(256, 0.4)
        _check(s.batch, [breakout[i] for i in s.ids])
        with ReplayClient(port=replay_server.port) as rc:  # a corrupt one is named
            [bad_id] = rc.add("atari", [1e6], [items[0][:-3]])
        for _ in range(20):
            try:
                replay.sample(256, 0.4)
            except ItemError as e:
                assert str(e).startswith(f"replay item {bad_id}: corrupt zstd frame")
                break
        else:
            pytest.fail("the corrupt item was never sampled")
    finally:
        replay.close()


def test_prefetcher_adds_decode_threads_only_when_behind(replay_server: Any,
                                                         breakout: list[Transition]) -> None:
    items = _encode(TransitionCodec(ATARI.obs_shape, np.uint8, 3), breakout)
    fast = _fill(replay_server, "fast", items)
    p = Prefetcher(fast, 256, 0.4, 1).start()
    try:
        for _ in range(12):  # a consumer that waits for every batch
            p.get(timeout=30)
        assert p.most_parallel == 3 and fast.codec.parallel >= 2
    finally:
        p.close()
        fast.close()
    slow = _fill(replay_server, "slow", items)
    p = Prefetcher(slow, 256, 0.4, 1).start()
    try:
        for _ in range(6):  # a consumer slower than one decode thread
            p.get(timeout=30)
            time.sleep(0.15)
        assert slow.codec.parallel == 1
    finally:
        p.close()
        slow.close()


def test_prefetcher_keeps_more_requests_in_flight_when_starved(
        replay_server: Any, breakout: list[Transition]) -> None:
    items = _encode(TransitionCodec(ATARI.obs_shape, np.uint8, 3), breakout)
    src = _fill(replay_server, "inflight", items)
    p = Prefetcher(src, 64, 0.4, 3, max_inflight=3).start()
    try:
        for _ in range(20):  # a consumer that never finds a batch waiting at first
            b = p.get(timeout=30)
            assert len(b.ids) == 64
        assert len(p.samplers) >= 1  # a second connection sampling alongside the first
        assert all(isinstance(v, ApplianceReplay) and v.decode_lock is src.decode_lock
                   for v in p.views)
    finally:
        p.close()
        src.close()
    other = _fill(replay_server, "default", items)
    assert Prefetcher(other, 64, 0.4, 3).max_inflight == 1  # the default: one, as before
    other.close()


def test_prefetcher_error_is_one_line() -> None:
    class Broken:
        def sample(self, n: int, beta: float) -> Any:
            raise ItemError("replay item 9: corrupt zstd frame (40 bytes): no data")

    p = Prefetcher(Broken(), 8, 0.4, 1).start()  # type: ignore[arg-type]
    try:
        with pytest.raises(RuntimeError, match=r"^the sampling thread failed: replay item 9: "
                                               r"corrupt zstd frame \(40 bytes\): no data$"):
            p.get(timeout=5)
    finally:
        p.close()


# ---- the local baseline with compressed items ---------------------------------------------


def test_local_replay_keeps_compressed_items_within_maxbytes(
        breakout: list[Transition]) -> None:
    codec = TransitionCodec(ATARI.obs_shape, np.uint8, n_step=3, threads=1)
    items = _encode(codec, breakout)
    budget = sum(stored_bytes(len(i)) for i in items[-100:])
    cfg = preset("ALE/Breakout-v5", replay="local", capacity=1000, replay_maxbytes=budget)
    rep = LocalReplay(cfg, codec)
    rep.ingest = lambda limit=0: 0  # type: ignore[method-assign]  # no server: add() only
    ids = rep.add(np.ones(len(items)), items)
    assert rep.size() == 100 and rep.bytes_used <= budget
    assert rep.counters()["evictions"] == len(items) - 100
    s = rep.sample(200, 0.4)
    assert set(s.ids.tolist()) <= set(ids[-100:].tolist())
    _check(s.batch, [breakout[i] for i in s.ids])


# ---- honest capacity ---------------------------------------------------------------------


def test_capacity_warning_is_one_line() -> None:
    info = {"capacity": 2_000_000, "maxbytes": 1 << 30}
    assert capacity_warning("replay", info, 536.0) is None
    msg = capacity_warning("replay", info, 49_408.0)
    assert msg is not None and "\n" not in msg
    assert msg.startswith("table 'replay' cannot hold its capacity: 2,000,000 items of 49,408 B")
    assert "keeps about 21,732" in msg and "--replay-maxbytes to 94239 MiB" in msg


@pytest.mark.parametrize("maxbytes, warns", [(1 << 20, True), (64 << 20, False)])
def test_actor_warns_once_when_the_table_cannot_hold_its_capacity(
        replay_server: Any, breakout: list[Transition], maxbytes: int, warns: bool) -> None:
    table = f"cap{maxbytes}"
    cfg = preset("ALE/Breakout-v5", port=replay_server.port, table=table, capacity=10_000,
                 prefix="captest", frames_once=False)  # the records path's warning
    with ReplayClient(port=replay_server.port) as rc:
        rc.create(table, 10_000, maxbytes=maxbytes)
    lines: list[str] = []
    actor = Actor(cfg, 0, spec=ATARI, log=lines.append)
    try:
        for lo in (0, 50, 100):
            out = [(dataclasses.replace(t, extra=(0.0, None)), 0.0) for t in breakout[lo:lo + 50]]
            actor.flush(out, [], 0, throttle=False)
    finally:
        actor.close()
    warned = [x for x in lines if x.startswith("warning: ")]
    if warns:
        assert len(warned) == 1, lines
        assert f"table '{table}' cannot hold its capacity: 10,000 items of " in warned[0]
    else:
        assert warned == []


def test_atari_preset_sizes_maxbytes_for_its_capacity(breakout: list[Transition]) -> None:
    cfg = preset("ALE/Breakout-v5")
    items = _encode(TransitionCodec(ATARI.obs_shape, np.uint8, 3), breakout)
    need = cfg.capacity * float(np.mean([stored_bytes(len(i)) for i in items]))
    assert 1.25 * need <= cfg.replay_maxbytes <= 3 * need, (need, cfg.replay_maxbytes)


# ---- end to end ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["inreplay", "redis"])
def test_breakout_actor_and_learner_through_compressed_items(
        kind: str, server_factory: Any, tmp_path: Path) -> None:
    """An actor inserts compressed Breakout transitions (REPLAY.ADD, or RPUSH to stock
    Redis for the local baseline); the learner samples, decodes and trains on them."""
    from inreplay.learner.learner import Learner

    srv = server_factory(kind)
    cfg = preset("ALE/Breakout-v5", port=srv.port, out_dir=str(tmp_path),
                 replay="appliance" if kind == "inreplay" else "local", num_actors=1,
                 actor_batch=25, learning_starts=100, batch_size=32, capacity=2000,
                 replay_maxbytes=16 << 20, publish_every=2, target_update=10,
                 max_learner_steps=3, checkpoint_every=0, log_every_s=60.0, noop_max=0)
    torch.set_num_threads(1)
    stop = threading.Event()
    learner = Learner(cfg, stop=stop, progress=False)
    actor = Actor(cfg, 0, stop=stop, log=lambda msg: None)
    errors: list[BaseException] = []

    def run(fn: Any) -> None:
        try:
            fn()
        except BaseException as e:  # reported below
            errors.append(e)

    workers = [threading.Thread(target=run, args=(learner.run,), daemon=True),
               threading.Thread(target=run, args=(actor.run,), daemon=True)]
    try:
        for w in workers:
            w.start()
        workers[0].join(timeout=120)
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=30)
    counters = learner.replay.counters()
    learner.close()
    actor.close()
    assert not errors, errors
    assert learner.steps == 3 and actor.inserted >= 100
    mean = counters["bytes_used"] / counters["size"]
    assert mean < 4096, f"{mean:.0f} B per stored transition: not compressed"


# ---- the benchmark -------------------------------------------------------------------------


def test_compress_bench_quick(tmp_path: Path) -> None:
    out = tmp_path / "compress.json"
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "compress.py"), "--quick",
                        "--json", str(out)], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(out.read_text())
    c = doc["codec"]
    assert c["raw_bytes"] == 49_404 and 0 < c["zstd_stored_bytes"]["mean"] <= 8192
    assert c["encode_us_per_frame"] > 0 and c["decode_us_per_frame"] > 0
    assert [lv["level"] for lv in c["levels"]] == [1, 3, 6, 9]
    assert {(r["format"], r["decode_threads"]) for r in doc["learner"]} == {
        ("zstd", 1), ("zstd", 2), ("raw", 1)}
    assert all(r["transitions_per_s"] > 0 for r in doc["learner"])
    assert set(doc["goals"]) == {"bytes_per_transition", "learner_transitions_per_s"}
