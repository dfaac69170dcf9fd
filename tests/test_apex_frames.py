"""Atari frames stored once: an Ape-X actor on ALE Breakout writes
its transitions through rl.frames' FrameWriter into a TRAJECTORY table on a real
server, and the learner's replay samples them back, assembled server-side, with
observations byte-identical to what the environment produced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gymnasium")
pytest.importorskip("ale_py")

import inreplay.actors.actor as actor_mod  # noqa: E402
from inreplay.learner.replay import ApplianceReplay  # noqa: E402
from inreplay.rl.codec import TransitionCodec  # noqa: E402
from inreplay.rl.config import Keys, preset  # noqa: E402
from inreplay.rl.env import env_spec  # noqa: E402
from inreplay.rl.frames import FrameWriter, bytes_per_transition  # noqa: E402
from inreplay.rl.model import build_model, params_to_blob  # noqa: E402
from inreplay.rl.nstep import Transition  # noqa: E402

from pyctl.client import ReplayClient  # noqa: E402


def _run_actor(port: int, tmp_path: Path, steps: int, **over: Any) -> tuple[
        Any, ApplianceReplay, dict[int, Transition]]:
    cfg = preset("ALE/Breakout-v5", port=port, out_dir=str(tmp_path), num_actors=1,
                 learning_starts=1, capacity=100_000, replay_maxbytes=1 << 30,
                 eps_base=1.0, actor_batch=16, **over)
    spec = env_spec(cfg)
    codec = TransitionCodec(spec.obs_shape, spec.obs_dtype, cfg.n_step, spec.pixels)
    replay = ApplianceReplay(cfg, codec, create=True)
    assert replay.frames, "Breakout on one appliance stores frames once"
    keys = Keys(cfg.prefix)
    rc = ReplayClient(port=port)
    rc.redis.set(keys.params, params_to_blob(build_model(spec, cfg.hidden)))
    rc.redis.set(keys.version, 1)
    actor = actor_mod.Actor(cfg, 0, spec=spec, log=lambda m: None)
    assert isinstance(actor.writer, actor_mod.FrameItemWriter)
    fw = actor.writer.fw
    made: dict[int, Transition] = {}
    batches: list[list[Transition]] = []
    fw_flush = fw.flush
    orig_flush = actor.flush

    def flush(out: list[tuple[Transition, float]], *a: Any, **k: Any) -> None:
        batches.append([t for t, _ in out])
        orig_flush(out, *a, **k)

    def fw_flush_ids() -> list[int]:
        ids = fw_flush()
        if ids:
            ts = batches.pop(0)
            assert len(ts) == len(ids)
            made.update(zip(ids, ts, strict=True))
        return ids

    actor.flush = flush  # type: ignore[method-assign]
    fw.flush = fw_flush_ids  # type: ignore[method-assign]
    actor.run(max_steps=steps)
    actor.close()
    rc.close()
    return cfg, replay, made


def test_actor_writes_frames_once_and_learner_samples_them_identical(
        replay_server: Any, tmp_path: Path) -> None:
    # episodes cut at 100 steps: truncations, life losses (terminal) and ends are all in
    cfg, replay, made = _run_actor(replay_server.port, tmp_path, 400, max_episode_steps=100)
    try:
        assert len(made) >= 380
        assert replay.size() == len(made)
        assert {t.steps for t in made.values()} >= {1, 3}  # short ones at episode ends
        seen: set[int] = set()
        for _ in range(8):
            s = replay.sample(128, cfg.beta)
            assert s is not None
            for i, id_ in enumerate(s.ids.tolist()):
                t = made[id_]
                assert s.batch.obs[i].tobytes() == np.asarray(t.obs).tobytes()
                assert s.batch.next_obs[i].tobytes() == np.asarray(t.next_obs).tobytes()
                assert s.batch.action[i] == t.action
                assert s.batch.ret[i] == np.float32(t.ret)
                assert s.batch.discount[i] == np.float32(t.discount)
                seen.add(id_)
        assert len(seen) > 200
        bpt = bytes_per_transition(replay.rc.shards[0], cfg.table)
        assert bpt["items"] == len(made) and bpt["bytes_per_transition"] > 0
    finally:
        replay.close()


def test_frame_writer_refuses_frames_that_do_not_stack(replay_server: Any) -> None:
    rc = ReplayClient(port=replay_server.port)
    try:
        fw = FrameWriter(rc, "bad", "nope", (4, 8, 8))
        obs = np.arange(4 * 64, dtype=np.uint8).reshape(4, 8, 8)
        fw.begin(obs)
        nxt = np.concatenate([obs[1:], obs[:1]])
        assert fw.step(nxt) == 1
        with pytest.raises(ValueError, match="not the previous one shifted"):
            fw.step(obs)
        fw.close()
    finally:
        rc.close()


def test_episode_end_compresses_the_partly_filled_last_chunk(replay_server: Any,
                                                            replay_host: str) -> None:
    """An episode's last chunk, partly filled, stayed raw (a whole chunk of raw frames per
    episode: 1.8 KB per Breakout transition in the demo); END now compresses it when
    items still reference it, and samples read it back the same."""
    from pyctl.trajectory import (
        TrajectoryWriter,
        chunk_stats,
        create_trajectory_table,
        sample_trajectories,
    )

    rc = ReplayClient(port=replay_server.port)
    r = rc.redis
    try:
        create_trajectory_table(r, "pz", 100)
        w = TrajectoryWriter(r, "pz:s", {"f": ((64, 64), np.uint8)}, chunk_steps=16,
                             history=16, compress=3)
        rng = np.random.default_rng(0)
        frames = [np.full((64, 64), i, np.uint8) for i in range(5)]
        frames[2] = rng.integers(0, 256, (64, 64), dtype=np.uint8)
        for f in frames:
            w.append({"f": f})
        w.create_item("pz", 1.0, {"x": w.history["f"][0:5]})
        w.flush()
        before = chunk_stats(r)
        assert before["chunks_compressed"] == 0
        w.end_episode()
        after = chunk_stats(r)
        assert after["chunks_compressed"] == 1
        assert after["chunk_bytes"] < before["chunk_bytes"] - 40_000  # 64 KB raw, ~4 KB
        s = sample_trajectories(r, "pz", 4)
        for i in range(4):
            assert s.columns["x"][i].tobytes() == np.stack(frames).tobytes()
        if replay_host in ("native", "shm"):  # inreplay's own snapshots keep the compressed chunk
            r.execute_command("DEBUG", "RELOAD")
            assert chunk_stats(r)["chunks_compressed"] == 1
            s = sample_trajectories(r, "pz", 4)
            for i in range(4):
                assert s.columns["x"][i].tobytes() == np.stack(frames).tobytes()
        # a chunk nothing but the stream holds is freed, not compressed
        for f in frames:
            w.append({"f": f})
        w.flush()
        w.end_episode()
        assert chunk_stats(r)["chunks_compressed"] == 1
        w.close()
        r.execute_command("REPLAY.DROP", "pz")
        assert chunk_stats(r)["chunks"] == 0
    finally:
        rc.close()


@pytest.mark.slow
def test_breakout_bytes_per_transition_from_real_play(server_factory: Any) -> None:
    """Real Breakout play (recorded, replayed through the actors' n-step logic and
    FrameWriters, as bench/trajectory_bytes.py --apex does at 2M) costs the server at most
    160 B per transition (the issue's goal; zstd records of 7 frames took 638 B), and
    everything is freed when the table and streams go."""
    import sys

    import redis

    from pyctl.trajectory import chunk_stats, create_trajectory_table, sample_trajectories

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    from trajectory_bytes import record_play, write_play  # type: ignore[import-not-found]

    srv = server_factory("inreplay")
    play = record_play(3000)
    r = redis.Redis(port=srv.port)
    try:
        create_trajectory_table(r, "apexb", 30_000, maxbytes=1 << 32)
        w = write_play(r, play, 30_000, table="apexb")
        bpt = bytes_per_transition(r, "apexb")
        assert bpt["items"] == 30_000
        assert bpt["bytes_per_transition"] <= 160, bpt
        s = sample_trajectories(r, "apexb", 64)
        obs, nxt = s.columns["obs"], s.columns["next_obs"]
        head = s.columns["head"].reshape(-1, 3)
        k = np.rint(np.log(np.maximum(head[:, 2], 1e-9)) / np.log(0.99)).astype(int)
        for i in range(64):  # a full-length transition's stacks overlap by S - k frames
            if head[i, 2] > 0 and k[i] == 3:
                assert obs[i, 3:].tobytes() == nxt[i, :1].tobytes()
        for fw in w["writers"]:
            fw.close()
        r.execute_command("REPLAY.DROP", "apexb")
        assert chunk_stats(r)["chunks"] == 0
    finally:
        r.close()


def test_a_restarted_frame_writer_starts_its_streams_afresh(replay_server: Any) -> None:
    """An actor that restarts finds its streams holding the old episode's steps: the new
    writer ends that episode first, so its step numbers (0, 1, ...) are the stream's."""
    rc = ReplayClient(port=replay_server.port)
    try:
        from pyctl.trajectory import create_trajectory_table, sample_trajectories

        create_trajectory_table(rc, "rs", 100)
        old = FrameWriter(rc, "rs-actor", "rs", (4, 8, 8))
        old.begin(np.zeros((4, 8, 8), np.uint8))
        old.step(np.zeros((4, 8, 8), np.uint8))
        old.flush()  # 5 frames appended, then the process "dies"
        fw = FrameWriter(rc, "rs-actor", "rs", (4, 8, 8))
        obs = np.arange(4 * 64, dtype=np.uint8).reshape(4, 8, 8)
        t = fw.begin(obs)
        nxt = np.concatenate([obs[1:], np.full((1, 8, 8), 7, np.uint8)])
        assert fw.step(nxt) == 1
        fw.add(t, 1, 2, 1.5, 0.99, 1.0)
        fw.flush()
        s = sample_trajectories(rc, "rs", 1)
        assert s.columns["obs"][0].tobytes() == obs.tobytes()
        assert s.columns["next_obs"][0].tobytes() == nxt.tobytes()
        fw.close()
        rc.redis.execute_command("REPLAY.DROP", "rs")
    finally:
        rc.close()
