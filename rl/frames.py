"""Atari frames stored once: the Ape-X actors' n-step transitions as items of a
TRAJECTORY table that reference frames of an episode stream, instead of records that
carry 7 frames each (rl.codec).

Two streams per actor, on the server of the table:

- ``<name>:f``, one step per frame: field ``frame`` uint8 (84, 84). An episode starts
  with the S frames of the first observation (S = 4: its stack), then each env step
  appends the newest frame of the next observation, so the observation at step t of the
  episode is frames [t, t + S) and the one k steps later frames [t + k, t + k + S).
- ``<name>:h``, one step per transition: ``head`` float32 (3,) = (action, the n-step
  return, gamma^k or 0 at a terminal), whatever k is (one column, not three: each
  column costs its item a reference of about 8 bytes).

An item (one transition) has the columns ``obs`` (S frames), ``next_obs`` (S frames)
and ``head`` (1 step of the head stream). A sample assembles
them server-side, one bulk per column (pyctl.trajectory.sample_trajectories), and
:func:`batch_of` turns it into the learner's Batch. Frames chunks are zstd-compressed
(``COMPRESS``), so a Breakout transition costs about 0.1 KB instead of 0.6 KB.

The stacking rule (each observation is the previous one shifted by one new frame) is
checked on every step: an environment that breaks it raises ValueError.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import redis
from inreplay.rl.codec import Batch

from pyctl.client import ReplayClient
from pyctl.trajectory import TrajectorySample, TrajectoryWriter, flush_writers

CHUNK_STEPS = 32
"""Frames per chunk (zstd compresses a chunk as one frame: more frames, better ratio)."""
HISTORY = 1024
"""Steps a stream keeps for items still to come (more than an actor batch)."""
ZSTD_LEVEL = 3


def frames_once_on(cfg: Any, pixels: bool, rc: Any) -> bool:
    """Whether a run (rl.config.Config) stores frames once: stacked frames, on the
    appliance (rc: its ShardedReplayClient, None with --replay local), frames_once, and
    one replay server (a stream and the items referencing it live on one server)."""
    return bool(pixels and cfg.frames_once and rc is not None and len(rc.shards) == 1)


class FrameWriter:
    """One actor's writer of frame-stack transitions into TRAJECTORY table ``table``."""

    def __init__(self, client: ReplayClient | redis.Redis, name: str, table: str,
                 obs_shape: tuple[int, ...], *, compress: int = ZSTD_LEVEL,
                 chunk_steps: int = CHUNK_STEPS, history: int = HISTORY) -> None:
        self.table = table
        self.stack = int(obs_shape[0])
        self.frame_shape = tuple(int(d) for d in obs_shape[1:])
        self.frames = TrajectoryWriter(client, f"{name}:f", {"frame": (self.frame_shape,
                                                                        np.uint8)},
                                       chunk_steps=chunk_steps, history=history,
                                       compress=compress)
        self.heads = TrajectoryWriter(client, f"{name}:h", {"head": ((3,), np.float32)},
                                      chunk_steps=chunk_steps, history=history,
                                      compress=compress)
        self._last: np.ndarray | None = None
        self.items = 0
        # a restarted actor finds its streams as it left them: their episodes end here,
        # so steps count from 0 as this writer's do
        pipe = self.frames.redis.pipeline(transaction=False)
        for w in (self.frames, self.heads):
            pipe.execute_command("REPLAY.STREAM", w.stream, "END")
        pipe.execute()

    def begin(self, obs: np.ndarray) -> int:
        """A new episode's first observation (S frames); returns its step (0)."""
        if self.frames.episode_steps:
            self.end_episode()
        obs = np.asarray(obs, np.uint8)
        for f in obs:
            self.frames.append({"frame": f})
        self._last = obs
        return 0

    def step(self, next_obs: np.ndarray) -> int:
        """The observation after one env step (its newest frame is appended); returns
        its step t (frames [t, t + S) of the stream)."""
        if self._last is None:
            raise ValueError("begin() the episode first")
        next_obs = np.asarray(next_obs, np.uint8)
        if not np.array_equal(next_obs[:-1], self._last[1:]):
            raise ValueError("the observation is not the previous one shifted by one frame: "
                             "frames cannot be stored once")
        self.frames.append({"frame": next_obs[-1]})
        self._last = next_obs
        return self.frames.episode_steps - self.stack

    def add(self, t: int, k: int, action: int, ret: float, discount: float,
            priority: float) -> None:
        """The transition from the observation at step t to the one at step t + k."""
        s = self.stack
        if not (0 <= t and 1 <= k and t + k + s <= self.frames.episode_steps):
            raise ValueError(f"transition from step {t} over {k} steps: the episode has "
                             f"observations at steps 0..{self.frames.episode_steps - s}")
        self.heads.append({"head": np.array([action, ret, discount], np.float32)})
        fr = self.frames.history["frame"]
        self.heads.create_item(self.table, priority, {
            "obs": fr[t:t + s], "next_obs": fr[t + k:t + k + s],
            "head": self.heads.history["head"][-1]})
        self.items += 1

    def flush(self) -> list[int]:
        """Steps and items to the server, in one round trip."""
        return flush_writers(self.frames, self.heads)

    def end_episode(self) -> None:
        """Flush, then end both streams' episodes (items keep what they reference)."""
        self.flush()
        pipe = self.frames.redis.pipeline(transaction=False)
        for w in (self.frames, self.heads):
            pipe.execute_command("REPLAY.STREAM", w.stream, "END")
            w.episode_steps = 0
        pipe.execute()
        self._last = None

    def close(self) -> None:
        """Flush and drop both streams (their chunks stay while items reference them)."""
        self.flush()
        for w in (self.frames, self.heads):
            w.redis.execute_command("REPLAY.STREAM", w.stream, "DROP")


def batch_of(s: TrajectorySample) -> Batch:
    """A sample of a FrameWriter table -> the learner's Batch."""
    c = s.columns
    head = c["head"].reshape(-1, 3)
    return Batch(obs=c["obs"], action=head[:, 0].astype(np.int64), ret=head[:, 1].copy(),
                 discount=head[:, 2].copy(), next_obs=c["next_obs"])


def bytes_per_transition(client: ReplayClient | redis.Redis, table: str) -> dict[str, Any]:
    """What the server holds per item of ``table``: every chunk (REPLAY.CHUNKS memory:
    chunk bytes, headers, streams) plus the table's reference records (REPLAY.INFO
    bytes_used), over its items. Counts every stream's chunks, so it is honest only for a
    server whose streams feed this table."""
    from pyctl.errors import decode_info
    from pyctl.trajectory import chunk_stats

    r = client.redis if isinstance(client, ReplayClient) else client
    info = decode_info(r.execute_command("REPLAY.INFO", table))
    cs = chunk_stats(r)
    size = int(info["size"])
    total = cs["memory"] + int(info["bytes_used"])
    return {"items": size, "chunk_memory": cs["memory"], "chunks": cs["chunks"],
            "record_bytes": int(info["bytes_used"]),
            "bytes_per_transition": total / size if size else None}


def replay_footprint(client: ReplayClient | redis.Redis, table: str, frames: bool,
                     ) -> dict[str, Any]:
    """The demo's summary of what its replay costs on the server: per transition
    (bytes_per_transition for frames stored once, REPLAY.INFO bytes_used / size for
    records) and the server's INFO memory used_memory."""
    from pyctl.errors import decode_info

    r = client.redis if isinstance(client, ReplayClient) else client
    if frames:
        out = bytes_per_transition(r, table)
    else:
        info = decode_info(r.execute_command("REPLAY.INFO", table))
        size = int(info["size"])
        out = {"items": size, "record_bytes": int(info["bytes_used"]),
               "bytes_per_transition": int(info["bytes_used"]) / size if size else None}
    out["storage"] = "frames once (TRAJECTORY table)" if frames else "records (REPLAY.ADD)"
    out["server_used_memory"] = int(r.info("memory")["used_memory"])
    return out
