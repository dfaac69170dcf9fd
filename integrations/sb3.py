"""Stable-Baselines3's replay buffer on inreplay: ``ApplianceReplayBuffer`` and
``PrioritizedDQN``.

    from inreplay.integrations.sb3 import ApplianceReplayBuffer, PrioritizedDQN
    model = DQN("MlpPolicy", "CartPole-v1",
                replay_buffer_class=ApplianceReplayBuffer,
                replay_buffer_kwargs={"address": "10.0.0.5:6379", "table": "cartpole"})

``ApplianceReplayBuffer`` is a ``stable_baselines3.common.buffers.ReplayBuffer`` whose
transitions live in an appliance table (a standalone server, or a replay group when the
address is a member of one) instead of local arrays; ``sample`` is one REPLAY.SAMPLE
(PACKED: the batch read from the socket into NumPy arrays, then ``to_torch``).

- uniform by default (the table's sampler is ``uniform``); ``prioritized=True`` makes a
  prioritized table (``alpha``, ``beta``, ``epsilon``: the server's (|td| + eps)^alpha and
  importance weights). New transitions get the table's max priority. The TD errors come
  back through ``update_priorities(ids, td_errors)``, which SB3's algorithms never call:
  **use ``PrioritizedDQN``** (a ``DQN`` subclass whose ``train`` weights the Huber loss by
  the importance weights and sends |TD error| of every batch with REPLAY.UPDATE). SB3's
  other algorithms (SAC, TD3, plain DQN) sample it uniformly-weighted: with
  ``prioritized=True`` they still sample by priority but nothing updates the priorities.
- ``n_envs > 1``: one item per env per ``add`` (all in one request).
- ``optimize_memory_usage=True``: each env writes an episode stream (REPLAY.STREAM) and a
  TRAJECTORY table holds items over two consecutive steps, so every observation is stored
  once, as ``next_obs`` of one item and ``obs`` of the next. An episode's last item
  references the true terminal observation (an extra step appended at the episode's end),
  so unlike SB3's own buffer this works with ``handle_timeout_termination=True``. An item is
  created when its next step arrives (one ``add`` later).
- ``handle_timeout_termination``: ``done`` is stored as done * (1 - TimeLimit.truncated),
  as SB3's buffer returns it.
- several processes (collectors) feed one table: the learner makes it (``create=True``,
  the default) and collectors attach with ``create=False`` (``python -m inreplay.integrations.sb3
  collect``). The learner's buffer samples everything in the table.

Observations and actions are Box or Discrete spaces; any other space (Dict, Tuple,
MultiDiscrete, MultiBinary) is refused in one line before anything connects.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import numpy as np
import torch as th
import torch.nn.functional as F  # noqa: N812
from gymnasium import spaces
from inreplay.integrations._client import Client, connect
from stable_baselines3 import DQN
from stable_baselines3.common.buffers import BaseBuffer, ReplayBuffer
from stable_baselines3.common.type_aliases import ReplayBufferSamples
from stable_baselines3.common.vec_env import VecNormalize

from pyctl.client import Schema
from pyctl.errors import TableExistsError
from pyctl.sharded import ShardedReplayClient
from pyctl.trajectory import (
    TrajectoryWriter,
    create_trajectory_table,
    flush_writers,
    sample_trajectories,
)

__all__ = ["ZOO_CARTPOLE", "ApplianceReplayBuffer", "PrioritizedDQN", "connect"]

ZOO_CARTPOLE: dict[str, Any] = {  # rl-baselines3-zoo's CartPole-v1 DQN (the tests, make bench)
    "learning_rate": 2.3e-3, "batch_size": 64, "buffer_size": 100_000, "learning_starts": 1000,
    "gamma": 0.99, "target_update_interval": 10, "train_freq": 256, "gradient_steps": 128,
    "exploration_fraction": 0.16, "exploration_final_eps": 0.04,
    "policy_kwargs": {"net_arch": [256, 256]}}


UNSUPPORTED_HINT = {"observation": " (flatten a Dict or Tuple observation with "
                                   "gymnasium.wrappers.FlattenObservation)"}


class ApplianceReplayBuffer(ReplayBuffer):
    """An SB3 ReplayBuffer backed by the appliance table ``table`` (see the module
    docstring). ``buffer_size`` is the table's capacity in transitions (all envs)."""

    def __init__(self, buffer_size: int, observation_space: spaces.Space,
                 action_space: spaces.Space, device: th.device | str = "auto",
                 n_envs: int = 1, optimize_memory_usage: bool = False,
                 handle_timeout_termination: bool = True, *,
                 address: str = "127.0.0.1:6379", table: str = "sb3", create: bool = True,
                 prioritized: bool = False, alpha: float = 0.6, beta: float = 0.4,
                 epsilon: float = 1e-6, client: Client | None = None,
                 stream_prefix: str | None = None,
                 redis_kwargs: dict[str, Any] | None = None) -> None:
        # BaseBuffer, not ReplayBuffer's __init__: no local arrays
        BaseBuffer.__init__(self, buffer_size, observation_space, action_space, device,
                            n_envs=n_envs)
        for s, what in ((observation_space, "observation"), (action_space, "action")):
            if not isinstance(s, spaces.Box | spaces.Discrete):
                raise TypeError(f"ApplianceReplayBuffer takes Box or Discrete {what} spaces, "
                                f"not {type(s).__name__}{UNSUPPORTED_HINT.get(what, '')}")
        self.optimize_memory_usage = optimize_memory_usage
        self.handle_timeout_termination = handle_timeout_termination
        self.table = table
        self.prioritized = prioritized
        self.beta = beta
        self.client: Client = client or connect(address, **(redis_kwargs or {}))
        self.obs_dtype = np.dtype(observation_space.dtype)
        self.action_dtype = np.dtype(self._maybe_cast_dtype(action_space.dtype))
        self.last_ids: np.ndarray = np.empty(0, np.int64)
        """The ids of the last sample() (for update_priorities)."""
        self.last_weights: np.ndarray = np.empty(0, np.float32)
        """The importance weights of the last sample() (all 1 when uniform)."""
        opts: dict[str, Any] = {"sampler": "prioritized", "alpha": alpha, "beta": beta,
                                "epsilon": epsilon} if prioritized else {"sampler": "uniform"}
        self._schema = Schema({
            "obs": (self.obs_shape, self.obs_dtype),
            "next_obs": (self.obs_shape, self.obs_dtype),
            "action": ((self.action_dim,), self.action_dtype),
            "reward": ((), np.float32),
            "done": ((), np.float32)})
        if create:
            try:
                if optimize_memory_usage:
                    create_trajectory_table(self.client, table, buffer_size, **opts)
                else:
                    self.client.create(table, buffer_size, **opts)
            except TableExistsError:
                raise TableExistsError(
                    f"table {table!r} exists: drop it, pick another name, or attach to it "
                    f"with create=False (a collector)") from None
        self._writers: list[TrajectoryWriter] = []
        self._pending = np.zeros(n_envs, dtype=bool)  # env i's last step awaits its next
        if optimize_memory_usage:
            prefix = stream_prefix or f"sb3-{table}-{os.getpid()}-{id(self):x}"
            sig = {"obs": (self.obs_shape, self.obs_dtype),
                   "action": ((self.action_dim,), self.action_dtype),
                   "reward": ((), np.float32), "done": ((), np.float32)}
            for i in range(n_envs):
                name = f"{prefix}-{i}"
                self._writers.append(
                    self.client.trajectory_writer(name, sig)
                    if isinstance(self.client, ShardedReplayClient)
                    else TrajectoryWriter(self.client, name, sig))

    # ---- writing -------------------------------------------------------------------
    def add(self, obs: np.ndarray, next_obs: np.ndarray, action: np.ndarray,
            reward: np.ndarray, done: np.ndarray, infos: list[dict[str, Any]]) -> None:
        n = self.n_envs
        obs = np.asarray(obs).reshape((n, *self.obs_shape))
        next_obs = np.asarray(next_obs).reshape((n, *self.obs_shape))
        action = np.asarray(action).reshape((n, self.action_dim))
        reward = np.asarray(reward, dtype=np.float32).reshape(n)
        done_f = np.asarray(done, dtype=np.float32).reshape(n)
        if self.handle_timeout_termination:
            timeout = np.array([info.get("TimeLimit.truncated", False) for info in infos],
                               dtype=np.float32)
            done_f = done_f * (1.0 - timeout)
        if self.optimize_memory_usage:
            self._add_steps(obs, next_obs, action, reward, done_f, np.asarray(done).reshape(n))
        else:
            self.client.add(self.table, None, {
                "obs": obs, "next_obs": next_obs, "action": action, "reward": reward,
                "done": done_f}, schema=self._schema)
        self.pos += 1
        if self.pos == self.buffer_size:
            self.full, self.pos = True, 0

    def _add_steps(self, obs: np.ndarray, next_obs: np.ndarray, action: np.ndarray,
                   reward: np.ndarray, done_f: np.ndarray, ended: np.ndarray) -> None:
        ending = []
        for i, w in enumerate(self._writers):
            w.append({"obs": obs[i], "action": action[i], "reward": reward[i],
                      "done": done_f[i]})
            k = w.episode_steps - 1
            if self._pending[i]:  # step k - 1's next observation is step k's
                self._item(w, k - 1)
            if ended[i]:  # the terminal observation as one more step, then the item
                w.append({"obs": next_obs[i], "reward": 0.0, "done": 0.0,
                          "action": np.zeros(self.action_dim, self.action_dtype)})
                self._item(w, k)
                ending.append(w)
            self._pending[i] = not ended[i]
        if isinstance(self.client, ShardedReplayClient):
            for w in self._writers:
                w.flush()
        else:  # every env's steps and items in one round trip
            flush_writers(*self._writers)
        for w in ending:
            w.end_episode()

    def _item(self, w: TrajectoryWriter, k: int) -> None:
        h = w.history
        w.create_item(self.table, None, {"obs": h["obs"][k:k + 2],
                                         "action": h["action"][k:k + 1],
                                         "reward": h["reward"][k:k + 1],
                                         "done": h["done"][k:k + 1]})

    # ---- reading -------------------------------------------------------------------
    def size(self) -> int:
        """Transitions in the table (every writer's)."""
        return int(self.client.info(self.table)["size"])

    def sample(self, batch_size: int, env: VecNormalize | None = None,
               ) -> ReplayBufferSamples:
        """One REPLAY.SAMPLE of batch_size transitions; their ids and importance weights
        are kept in last_ids and last_weights."""
        beta = self.beta if self.prioritized else None
        if self.optimize_memory_usage:
            t = sample_trajectories(self.client, self.table, batch_size, beta=beta)
            c = t.columns
            obs, next_obs = c["obs"][:, 0], c["obs"][:, 1]
            action, reward, done = c["action"][:, 0], c["reward"][:, 0], c["done"][:, 0]
            ids, weights = t.ids, t.weights
        else:
            s = self.client.sample(self.table, batch_size, beta=beta, schema=self._schema)
            it = s.items
            obs, next_obs, action = it["obs"], it["next_obs"], it["action"]
            reward, done = it["reward"], it["done"]
            ids, weights = s.ids, s.weights
        self.last_ids, self.last_weights = ids, weights
        data = (self._normalize_obs(obs, env), action, self._normalize_obs(next_obs, env),
                done.reshape(-1, 1),
                self._normalize_reward(reward.reshape(-1, 1), env))
        return ReplayBufferSamples(*tuple(map(self.to_torch, data)))

    def _get_samples(self, batch_inds: np.ndarray, env: VecNormalize | None = None,
                     ) -> ReplayBufferSamples:
        raise NotImplementedError("the appliance draws the indices: call sample()")

    def update_priorities(self, ids: Any, td_errors: Any) -> int:
        """REPLAY.UPDATE with |td_errors| as the new raw priorities; returns how many
        applied (ids evicted since the sample are skipped)."""
        if not self.prioritized:
            return 0
        td = td_errors.detach().cpu().numpy() if isinstance(td_errors, th.Tensor) \
            else np.asarray(td_errors)
        return self.client.update(self.table, ids, np.abs(td.reshape(-1)).astype(np.float64))

    def reset(self) -> None:
        super().reset()

    def close(self) -> None:
        """Close the episode streams (their pending last steps are not stored) and the
        connection."""
        for w in self._writers:
            w.close()
        self._writers = []
        self.client.close()

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("an ApplianceReplayBuffer holds a connection, not its data: "
                        "save_replay_buffer is not supported (the appliance keeps the table; "
                        "REPLAY snapshots: see the README)")


class PrioritizedDQN(DQN):
    """DQN whose train() weights each sample's Huber loss by its importance weight and
    sends |TD error| back as its priority (ApplianceReplayBuffer(prioritized=True))."""

    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        buf = self.replay_buffer
        if not isinstance(buf, ApplianceReplayBuffer):
            raise TypeError("PrioritizedDQN needs replay_buffer_class=ApplianceReplayBuffer")
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        losses = []
        for _ in range(gradient_steps):
            data = buf.sample(batch_size, env=self._vec_normalize_env)
            weights = th.as_tensor(buf.last_weights, device=self.device).reshape(-1, 1)
            with th.no_grad():
                next_q, _ = self.q_net_target(data.next_observations).max(dim=1)
                target = data.rewards + (1 - data.dones) * self.gamma * next_q.reshape(-1, 1)
            q = th.gather(self.q_net(data.observations), dim=1, index=data.actions.long())
            loss = (weights * F.smooth_l1_loss(q, target, reduction="none")).mean()
            losses.append(loss.item())
            self.policy.optimizer.zero_grad()
            loss.backward()
            th.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
            self.policy.optimizer.step()
            buf.update_priorities(buf.last_ids, (q - target).detach())
        self._n_updates += gradient_steps
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/loss", float(np.mean(losses)))


def collect(address: str, table: str, env_id: str, steps: int, seed: int,
            optimize_memory_usage: bool = False) -> int:
    """A collector: SB3's own DQN rollout loop (random actions: learning never starts)
    adding ``steps`` transitions to the learner's table; returns the steps taken."""
    model = DQN("MlpPolicy", env_id, buffer_size=1, learning_starts=steps + 1, seed=seed,
                optimize_memory_usage=optimize_memory_usage,
                replay_buffer_class=ApplianceReplayBuffer,
                replay_buffer_kwargs={"address": address, "table": table, "create": False},
                device="cpu")
    model.learn(total_timesteps=steps)
    buf = model.replay_buffer
    assert isinstance(buf, ApplianceReplayBuffer)
    buf.client.close()
    return int(model.num_timesteps)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m inreplay.integrations.sb3")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="feed a learner's table from SB3's rollout loop")
    c.add_argument("--address", default="127.0.0.1:6379")
    c.add_argument("--table", required=True)
    c.add_argument("--env", default="CartPole-v1")
    c.add_argument("--steps", type=int, default=1000)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--optimize-memory-usage", action="store_true")
    a = p.parse_args(argv)
    n = collect(a.address, a.table, a.env, a.steps, a.seed, a.optimize_memory_usage)
    print(f"collected {n} steps into {a.table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
