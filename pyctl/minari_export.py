"""Episodes recorded on the appliance, exported as a Minari 0.5 dataset (``[offline]``).

    rec = EpisodeRecorder(rc, "cartpole-rec", obs=((4,), np.float32), action=((), np.int64))
    obs, _ = env.reset(seed=0)
    while ...:
        nxt, r, term, trunc, _ = env.step(a)
        rec.step(obs, a, r, term, trunc, nxt)      # nxt: the terminal observation at the end
        obs = nxt if not (term or trunc) else env.reset()[0]
    rec.close()
    ds = export_minari(rc, "cartpole-rec", "cartpole/inreplay-v0", env="CartPole-v1")

    pyctl export-minari cartpole/inreplay-v0 --table cartpole-rec --env CartPole-v1 \\
        --address 10.0.0.5:6379

The recording is a TRAJECTORY table made as a queue (``Table.queue``): each step is one
item over its episode stream (REPLAY.STREAM / APPEND), so an observation is stored once,
as ``obs`` of one step and ``next_obs`` of the one before; the episode's final observation
is appended as one more step when it ends. The server has no command that lists a table's
items, so **the export drains the queue**: it samples every item once, in insertion order
(a queue's items are removed as they are sampled), groups them by episode and writes the
complete episodes, in order of episode id (recorder, then its episode number), with
``minari.create_dataset_from_buffers``. An episode whose steps are
not all there (still being recorded, or evicted) is left out and counted in the warning
the export prints. Minari's per-step ``infos`` are not recorded (each episode's infos are
empty).

Several recorders (actors) can write one table: each gets its own ``recorder`` number, so
episode ids stay apart (``episode = recorder << 32 | n``).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Any

import numpy as np
import numpy.typing as npt

from pyctl.client import ReplayClient
from pyctl.trajectory import TrajectoryWriter, create_trajectory_table, sample_trajectories

__all__ = ["EpisodeRecorder", "create_recording_table", "export_minari", "main"]

Shape = tuple[int, ...] | int


def create_recording_table(client: ReplayClient, table: str, capacity: int) -> None:
    """The queue a recorder writes and export_minari drains (``capacity`` steps)."""
    create_trajectory_table(client, table, capacity, queue=True)


class EpisodeRecorder:
    """Writes env steps to an episode stream, one queue item per step (see the module
    docstring). ``obs`` and ``action``: (shape, dtype). ``create``: make the table."""

    def __init__(self, client: ReplayClient, table: str, *,
                 obs: tuple[Shape, npt.DTypeLike], action: tuple[Shape, npt.DTypeLike],
                 recorder: int = 0, capacity: int = 1_000_000, create: bool = True,
                 stream: str | None = None) -> None:
        if create:
            create_recording_table(client, table, capacity)
        self.table = table
        self.recorder = int(recorder)
        self.episodes = 0
        a_shape = (action[0],) if isinstance(action[0], int) else tuple(action[0])
        self._action_zero = np.zeros(a_shape, np.dtype(action[1]))
        self._w = TrajectoryWriter(client, stream or f"{table}-rec-{recorder}-{os.getpid()}", {
            "obs": obs, "action": action, "reward": ((), np.float64),
            "terminated": ((), np.bool_), "truncated": ((), np.bool_),
            "episode": ((), np.int64), "step": ((), np.int64)})

    def step(self, obs: Any, action: Any, reward: float, terminated: bool, truncated: bool,
             next_obs: Any) -> None:
        """One env step: obs, the action taken, its reward and end flags, and the
        observation after it (the terminal one when the episode ends)."""
        w = self._w
        t = w.episode_steps
        ep = (self.recorder << 32) | self.episodes
        w.append({"obs": obs, "action": action, "reward": float(reward),
                  "terminated": bool(terminated), "truncated": bool(truncated),
                  "episode": ep, "step": t})
        if t > 0:  # step t - 1's next observation is step t's
            self._item(t - 1)
        if terminated or truncated:
            w.append({"obs": next_obs, "action": self._action_zero, "reward": 0.0,
                      "terminated": False, "truncated": False, "episode": ep, "step": t + 1})
            self._item(t)
            w.end_episode()
            self.episodes += 1
        elif w.episode_steps % 64 == 0:
            w.flush()

    def _item(self, t: int) -> None:
        h = self._w.history
        cols = {"obs": h["obs"][t:t + 2]}
        for f in ("action", "reward", "terminated", "truncated", "episode", "step"):
            cols[f] = h[f][t:t + 1]
        self._w.create_item(self.table, 1.0, cols)

    def flush(self) -> None:
        self._w.flush()

    def close(self) -> None:
        """Flush and drop the stream (an unfinished episode's last step is not stored)."""
        self._w.close()


def _drain(client: ReplayClient, table: str, batch: int) -> dict[str, np.ndarray]:
    """Every item of the queue, once, in insertion order (column -> array)."""
    parts: dict[str, list[np.ndarray]] = {}
    while (size := int(client.info(table)["size"])) > 0:
        s = sample_trajectories(client, table, min(size, batch))
        for k, v in s.columns.items():
            parts.setdefault(k, []).append(v)
    return {k: np.concatenate(v) for k, v in parts.items()}


def episodes_of(columns: dict[str, np.ndarray]) -> tuple[list[Any], int]:
    """Minari EpisodeBuffers of the complete episodes in drained columns, in order of
    episode id (recorder, then its episode number); and how many incomplete episodes
    were left out."""
    from minari.data_collector import EpisodeBuffer

    if not columns:
        return [], 0
    ep = columns["episode"][:, 0]
    order = np.lexsort((columns["step"][:, 0], ep))  # by episode id, then step
    bounds = np.flatnonzero(np.diff(ep[order])) + 1
    out, dropped = [], 0
    for idx in np.split(order, bounds):
        steps = columns["step"][idx, 0]
        term = columns["terminated"][idx, 0]
        trunc = columns["truncated"][idx, 0]
        if not (np.array_equal(steps, np.arange(len(idx))) and (term[-1] or trunc[-1])):
            dropped += 1
            continue
        obs = columns["obs"][idx]
        out.append(EpisodeBuffer(
            id=len(out), observations=np.concatenate([obs[:, 0], obs[-1:, 1]]),
            actions=columns["action"][idx, 0], rewards=columns["reward"][idx, 0],
            terminations=term, truncations=trunc, infos={}))
    return out, dropped


def export_minari(client: ReplayClient, table: str, dataset_id: str, *, env: Any = None,
                  observation_space: Any = None, action_space: Any = None, batch: int = 4096,
                  **minari_kwargs: Any) -> Any:
    """Drain ``table`` (an EpisodeRecorder queue) into the Minari dataset ``dataset_id``
    (under $MINARI_DATASETS_PATH, else ~/.minari/datasets) and return it (a
    MinariDataset). ``env`` (an id, spec or env) or both spaces describe the data;
    minari_kwargs go to minari.create_dataset_from_buffers (author, description, ...)."""
    try:
        import minari
    except ImportError as e:
        raise ImportError(f"the Minari export needs minari: pip install 'inreplay[offline]' "
                          f"(or '.[offline]' in a checkout) ({e})") from None
    buffers, dropped = episodes_of(_drain(client, table, batch))
    if dropped:
        warnings.warn(f"{dropped} incomplete episode(s) of {table!r} left out", stacklevel=2)
    if not buffers:
        raise ValueError(f"table {table!r} holds no complete episode to export")
    minari_kwargs.setdefault("algorithm_name", "inreplay export")
    return minari.create_dataset_from_buffers(
        dataset_id, buffers, env=env, observation_space=observation_space,
        action_space=action_space, **minari_kwargs)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="pyctl export-minari",
                                description="drain an EpisodeRecorder table into a Minari "
                                            "dataset (pyctl/minari_export.py)")
    p.add_argument("dataset_id", help="e.g. cartpole/inreplay-v0")
    p.add_argument("--table", required=True, help="the recording table (a queue)")
    p.add_argument("--address", default="127.0.0.1:6379", help="HOST:PORT of the server")
    p.add_argument("--env", required=True, help="the gymnasium env id the data comes from")
    p.add_argument("--author", help="the dataset's author")
    p.add_argument("--description", help="the dataset's description")
    a = p.parse_args(argv)
    host, _, port = a.address.rpartition(":")
    kw = {k: v for k, v in (("author", a.author), ("description", a.description)) if v}
    with ReplayClient(host or "127.0.0.1", int(port)) as rc:
        ds = export_minari(rc, a.table, a.dataset_id, env=a.env, **kw)
    print(f"pyctl export-minari: {ds.total_episodes} episodes, {ds.total_steps} steps "
          f"-> {a.dataset_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
