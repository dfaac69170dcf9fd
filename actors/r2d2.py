"""R2D2 through the replay appliance: a recurrent DQN on CartPole-v1 with the velocities
hidden (``pyctl demo --algo r2d2``; this module: ``python -m inreplay.actors.r2d2``).

    python -m inreplay.actors.r2d2 --out DIR [--minutes M] [--stack auto|kernel|dpdk] [--actors N]
                          [--seq-len L --period P --burn-in B ...any R2D2Config field]

Recurrent Replay Distributed DQN (Kapturowski et al. 2019), read top to bottom:

1. :class:`R2D2Config`: every setting, with R2D2's published values as defaults
   (sequences of 80 steps overlapping by 40, burn-in 40, n = 5, priority exponent 0.9,
   IS exponent 0.6, 64 sequences per batch, priority 0.9 max|delta| + 0.1 mean|delta|);
   :data:`CARTPOLE` scales the network and the targets down for the demo (see there).
2. :class:`MaskVelocity`: CartPole's observation without the two velocities (cart
   position and pole angle only): a feed-forward Q-network sees no motion, so the
   agent must remember (the usual memory check).
3. :class:`RecurrentQNet`: an LSTM Q-network fed the observation and the previous action;
   :class:`StepPolicy`: its one step in NumPy, which the actors and the evaluation act with.
4. :class:`SequenceStreamWriter`: steps in, each appended once to the actor's episode
   stream on the appliance, and an item per fixed-length sequence referencing its
   steps (overlapping sequences share them) and the recurrent state the actor had at
   its first step (stored state); :class:`SequenceWriter` makes the same sequences as
   packed items (``--storage packed``), and :func:`sequences_from_columns` turns a
   sample of the stored-once items into the tensors a packed sample gives.
5. :func:`value_rescale` / :func:`inverse_value_rescale`: R2D2's h(x).
6. :func:`sequence_td`: burn-in, n-step double-Q targets under h, TD errors; and
   :func:`mixed_priority`.
7. :func:`run_actor`, :func:`run_learner`: the processes; :class:`R2D2Demo` and
   :func:`main`: start the appliance, the learner and N actors, evaluate, write
   ``DIR/summary.json``, print ``solved: true|false`` last.

Replay goes through the appliance: one prioritized TRAJECTORY table (``REPLAY.CREATE ...
ALPHA 0.9 BETA 0.6 MIN_SIZE ... TRAJECTORY``; samples per insert kept by the clients, see
:func:`limiter_holds`) whose items reference steps stored once (an actor
appends each step once, with :class:`pyctl.trajectory.TrajectoryWriter`, and the learner
gets each column of 64 sequences in one REPLAY.SAMPLE,
:func:`pyctl.trajectory.sample_trajectories`); ``--storage packed`` stores each sequence
as one item packed by a :class:`pyctl.client.Schema` instead, with the server's own
SAMPLES_PER_INSERT limiter. ``summary.json``'s ``storage`` compares the bytes the
appliance holds per step with the packed form's. Parameters go through the appliance as
in the Ape-X demo (the learner SETs the blob and PUBLISHes its version in one
MULTI/EXEC, actors listen with :class:`actors.actor.ParamUpdates`; blob format:
:mod:`rl.model`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import platform
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from inreplay.rl.config import appliance_password
from torch import nn

# ---------------------------------------------------------------------------------------
# 1. configuration
# ---------------------------------------------------------------------------------------


@dataclass
class R2D2Config:
    """R2D2 on the replay appliance (defaults: the paper's and Acme's R2D2Config)."""

    env_id: str = "CartPole-v1"
    """Gymnasium id (a classic-control task; its velocities are hidden by MaskVelocity)."""
    seed: int = 0
    """Base seed: actor i seeds its environment with seed + 1000 * (i + 1)."""
    # ---- sequences --------------------------------------------------------------
    seq_len: int = 80
    """Steps per sequence item (R2D2: 80)."""
    period: int = 40
    """A new sequence starts every `period` steps, so consecutive ones overlap by
    seq_len - period (R2D2: 40)."""
    burn_in: int = 40
    """Leading steps of each sequence that only warm the LSTM up from the stored state:
    no loss and no gradient there (R2D2: 40)."""
    # ---- network ----------------------------------------------------------------
    hidden: int = 512
    """LSTM width (R2D2: 512 after the Atari torso)."""
    # ---- learning ---------------------------------------------------------------
    n_step: int = 5
    """n of the n-step double-Q targets (R2D2: 5)."""
    gamma: float = 0.997
    """Discount (R2D2: 0.997)."""
    rescale_eps: float = 1e-3
    """epsilon of the value rescaling h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x."""
    batch_size: int = 64
    """Sequences per learner batch (R2D2: 64)."""
    lr: float = 1e-4
    """Adam learning rate (R2D2: 1e-4)."""
    adam_eps: float = 1e-3
    """Adam epsilon (R2D2: 1e-3)."""
    grad_clip: float = 40.0
    """Gradient norm clip."""
    target_update: int = 2500
    """Learner steps between target-network syncs (R2D2: 2500)."""
    priority_exponent: float = 0.9
    """alpha: the table stores (priority + eps)^alpha (R2D2: 0.9)."""
    importance_exponent: float = 0.6
    """beta of the importance weights (R2D2: 0.6)."""
    priority_eta: float = 0.9
    """Sequence priority eta max|delta| + (1 - eta) mean|delta| (R2D2: 0.9)."""
    # ---- replay -----------------------------------------------------------------
    storage: str = "trajectory"
    """How sequences are stored: "trajectory" (each step appended once to the actor's
    episode stream, each sequence an item referencing seq_len of its steps, so the
    overlap is stored once: SequenceStreamWriter) or "packed" (each sequence one opaque
    item holding all its steps: SequenceWriter; kept to compare bytes per step)."""
    capacity: int = 100_000
    """Sequences the table holds, the oldest evicted first (Acme's R2D2: 100,000)."""
    min_replay: int = 50_000
    """Sequences in the table before the learner may sample: the rate limiter's MIN_SIZE
    (Acme's R2D2: 50,000)."""
    samples_per_insert: float = 4.0
    """Rate limiter: sequences sampled per sequence inserted (Acme's R2D2: 4)."""
    # ---- actors -----------------------------------------------------------------
    num_actors: int = 2
    """Actor processes."""
    eps_base: float = 0.4
    """Actor i of N explores with eps_base ** (1 + eps_alpha * i / (N - 1)) (Ape-X, R2D2)."""
    eps_alpha: float = 7.0
    """See eps_base."""
    actor_flush: int = 4
    """Sequences an actor collects before one REPLAY.ADD (and at each episode's end)."""
    publish_every: int = 20
    """Learner steps between parameter publications (actors pull on the announcement)."""
    # ---- the run / evaluation ----------------------------------------------------
    eval_every_s: float = 15.0
    """Seconds between screenings of the newest parameters."""
    screen_episodes: int = 3
    """Greedy episodes of a screening; all must reach the solve return for a full one."""
    eval_episodes: int = 20
    """Fresh-seed greedy episodes of the final evaluation (mean >= 475: solved)."""
    solve_return: float = 475.0
    """Mean return that counts as solved (CartPole-v1's reward threshold)."""
    prefix: str = "r2d2"
    """Prefix of the shared keys (<prefix>:params, :params:version, :frames, ...)."""
    table: str = "r2d2"
    """The sequence table's name."""
    host: str = "127.0.0.1"
    """The appliance (set by the demo)."""
    port: int = 6379
    """The appliance's port (set by the demo)."""
    out_dir: str = "out/r2d2"
    """Where logs, config.json, summary.json and the learner's metrics go."""

    def validate(self) -> None:
        """ValueError naming the first bad setting."""
        if not 0 <= self.burn_in < self.seq_len:
            raise ValueError("--burn-in must be in [0, --seq-len)")
        if not 1 <= self.period <= self.seq_len:
            raise ValueError("--period must be in [1, --seq-len]")
        if self.n_step < 1 or self.batch_size < 1 or self.num_actors < 1:
            raise ValueError("--n-step, --batch-size and --num-actors must be >= 1")
        if self.min_replay < 1 or self.capacity < self.min_replay:
            raise ValueError("--min-replay must be in [1, --capacity]")
        if self.storage not in ("trajectory", "packed"):
            raise ValueError("--storage must be trajectory or packed")


CARTPOLE: dict[str, Any] = {
    "hidden": 32, "n_step": 3, "gamma": 0.99,
    "lr": 1e-3, "adam_eps": 1e-8, "target_update": 100, "min_replay": 200,
    "samples_per_insert": 8.0, "capacity": 20_000, "publish_every": 10,
}
"""What the demo uses on CartPole instead of R2D2's Atari values, and why: a 32-wide LSTM
is plenty for two observations (the learner sets the pace, and a step of 64 sequences of
80 steps took 37 ms at 32 wide against 76 ms at 64 on one core of a 2-core AMD VM; at 64
wide the demo solved in 1 of 3 runs there within its 10 minutes, at 8-12 learner steps/s),
and gamma 0.99 / n = 3 / lr 1e-3 / target sync every 100
steps are the usual CartPole DQN values (0.997 and 2500 steps are for Atari's long
horizons and would take far longer than 10 minutes). The sequences stay R2D2's (80 steps
every 40, burn-in 40: a sequence that starts its episode needs no burn-in, see
:func:`sequence_td`, which is what lets the short early episodes teach anything), and so
do the priority exponent 0.9, IS exponent 0.6, 64 sequences per batch and the 0.9/0.1
mixed priority."""


def config_flags(p: argparse.ArgumentParser) -> None:
    """One --kebab-case flag per R2D2Config field, its docstring as help (unset: SUPPRESS)."""
    from inreplay.rl.config import field_docs

    docs = field_docs(R2D2Config)
    g = p.add_argument_group("R2D2 settings (defaults: R2D2's; the demo applies CARTPOLE "
                             "first)")
    for f in fields(R2D2Config):
        if f.name in ("out_dir", "num_actors", "host", "port"):
            continue  # --out, --actors: the demo's common flags; host/port: the demo's
        default = getattr(R2D2Config(), f.name)
        demo = f"; the demo's: {CARTPOLE[f.name]!r}" if f.name in CARTPOLE else ""
        g.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=type(default),
                       default=argparse.SUPPRESS, metavar=type(default).__name__.upper(),
                       help=f"{docs.get(f.name, '')} (default {default!r}{demo})")


# ---------------------------------------------------------------------------------------
# 2. the environment: CartPole without velocities
# ---------------------------------------------------------------------------------------

MASKED_DIMS = (0, 2)
"""CartPole's observation is (cart position, cart velocity, pole angle, pole angular
velocity); the agent sees positions only."""


class MaskVelocity(gym.ObservationWrapper[Any, Any, Any]):
    """Keep cart position and pole angle; drop both velocities."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        box = env.observation_space
        assert isinstance(box, gym.spaces.Box)
        idx = list(MASKED_DIMS)
        self.observation_space = gym.spaces.Box(box.low[idx], box.high[idx], dtype=np.float32)

    def observation(self, observation: Any) -> np.ndarray:
        return np.asarray(observation, dtype=np.float32)[list(MASKED_DIMS)]


def make_env(cfg: R2D2Config) -> gym.Env[Any, Any]:
    return MaskVelocity(gym.make(cfg.env_id))


# ---------------------------------------------------------------------------------------
# 3. the network
# ---------------------------------------------------------------------------------------

State = tuple[torch.Tensor, torch.Tensor]
"""The LSTM's (h, c), each (batch, hidden)."""


class RecurrentQNet(nn.Module):
    """Q(history, a): a linear+ReLU torso on [observation, one-hot previous action], an
    LSTM, and a dueling head (R2D2's architecture without the Atari convolutions)."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: int) -> None:
        super().__init__()
        self.n_actions = n_actions
        self.hidden = hidden
        self.torso = nn.Sequential(nn.Linear(obs_dim + n_actions, hidden), nn.ReLU())
        self.lstm = nn.LSTM(hidden, hidden, batch_first=True)
        self.value = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.advantage = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(),
                                       nn.Linear(hidden, n_actions))

    def initial_state(self, batch: int) -> State:
        z = torch.zeros(batch, self.hidden)
        return z, z.clone()

    def forward(self, obs: torch.Tensor, prev_action: torch.Tensor, state: State,
                ) -> tuple[torch.Tensor, State]:
        """obs (B, T, obs_dim), prev_action (B, T) int64, state ((B, H), (B, H)) ->
        Q (B, T, n_actions) and the state after the T steps."""
        x = torch.cat([obs, nn.functional.one_hot(prev_action, self.n_actions).float()], -1)
        y, (h, c) = self.lstm(self.torso(x), (state[0][None], state[1][None]))
        a = self.advantage(y)
        return self.value(y) + a - a.mean(-1, keepdim=True), (h[0], c[0])


class StepPolicy:
    """One step of a :class:`RecurrentQNet` in NumPy, for acting: the same float32
    arithmetic as ``net(obs[None, None], prev[None, None], state)``, without torch's
    per-call overhead. An actor calls the network once per environment step, and through
    torch a 64-wide LSTM step costs several times its arithmetic in dispatch (measured on
    a 2-core VM: 7x the NumPy step); the actors share the cores with the learner, and with
    samples per insert held at 8 every microsecond an actor spends per step is taken from
    the learner. :meth:`load` copies the weights again after the actor pulls new
    parameters; the learner trains the torch module."""

    def __init__(self, net: RecurrentQNet) -> None:
        self.hidden, self.n_actions = net.hidden, net.n_actions
        self.load(net)

    def load(self, net: RecurrentQNet) -> None:
        """Copy ``net``'s weights (pre-transposed and with the LSTM's two biases summed)."""
        w = {k: v.detach().numpy().astype(np.float32) for k, v in net.state_dict().items()}
        obs_dim = w["torso.0.weight"].shape[1] - self.n_actions
        self.w_obs = np.ascontiguousarray(w["torso.0.weight"][:, :obs_dim].T)
        self.w_prev = np.ascontiguousarray(w["torso.0.weight"][:, obs_dim:].T)  # one-hot rows
        self.b_torso = w["torso.0.bias"]
        self.w_ih = np.ascontiguousarray(w["lstm.weight_ih_l0"].T)
        self.w_hh = np.ascontiguousarray(w["lstm.weight_hh_l0"].T)
        self.b_lstm = w["lstm.bias_ih_l0"] + w["lstm.bias_hh_l0"]
        self.head = [(np.ascontiguousarray(w[f"{n}.0.weight"].T), w[f"{n}.0.bias"],
                      np.ascontiguousarray(w[f"{n}.2.weight"].T), w[f"{n}.2.bias"])
                     for n in ("value", "advantage")]

    def initial_state(self) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(self.hidden, np.float32), np.zeros(self.hidden, np.float32)

    def step(self, obs: np.ndarray, prev_action: int, state: tuple[np.ndarray, np.ndarray],
             ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """Q (n_actions,) and the LSTM's (h, c) after one step (PyTorch's gate order i, f,
        g, o)."""
        h, c = state
        x = np.maximum(obs @ self.w_obs + self.w_prev[prev_action] + self.b_torso, 0.0)
        g = x @ self.w_ih + h @ self.w_hh + self.b_lstm
        H = self.hidden  # noqa: N806 - the LSTM's width, as in the paper
        i, f, o = (1.0 / (1.0 + np.exp(-g[k * H:(k + 1) * H])) for k in (0, 1, 3))
        c = f * c + i * np.tanh(g[2 * H:3 * H])
        h = o * np.tanh(c)
        (v1, vb1, v2, vb2), (a1, ab1, a2, ab2) = self.head
        v = np.maximum(h @ v1 + vb1, 0.0) @ v2 + vb2
        a = np.maximum(h @ a1 + ab1, 0.0) @ a2 + ab2
        return v + a - a.mean(), (h, c)


# ---------------------------------------------------------------------------------------
# 4. the sequence writer
# ---------------------------------------------------------------------------------------


def sequence_schema(cfg: R2D2Config, obs_dim: int) -> Any:
    """One sequence item: seq_len steps of each field plus the stored recurrent state.

    mask[t] = 1 where the actor acted at step t (a step to learn from); valid[t] = 1
    where obs[t] is real (the acting steps and, after the last one, the episode's final
    observation, which n-step targets bootstrap from after a time-limit truncation);
    done[t] = 1 where the action at t ended the episode by termination (no bootstrap).
    Padding after the episode's end is zeros with mask = valid = 0."""
    from pyctl.client import Schema

    n, h = cfg.seq_len, cfg.hidden
    return Schema({"obs": ((n, obs_dim), np.float32), "prev_action": ((n,), np.int64),
                   "action": ((n,), np.int64), "reward": ((n,), np.float32),
                   "done": ((n,), np.float32), "mask": ((n,), np.float32),
                   "valid": ((n,), np.float32), "h0": ((h,), np.float32),
                   "c0": ((h,), np.float32)})


class SequenceWriter:
    """An actor's steps in, R2D2 sequence items out.

    Call :meth:`append` once per environment step with the observation the actor saw,
    its previous action, the recurrent state it had *before* that step, and what it did
    and got; call :meth:`end_episode` with the final observation. Sequences start at
    steps 0, period, 2 period, ... of each episode and hold ``seq_len`` steps; one is
    returned (as a dict of arrays, one row, ready for ``Schema.pack``) as soon as its
    last step is appended, and at the episode's end every sequence begun is returned,
    with the final observation after the last step and zero padding (mask / valid
    0) to ``seq_len``. Each carries the (h, c) of its first step: R2D2's stored state.

    Each sequence is one item of its own (``--storage packed``), so the seq_len - period
    steps two sequences share are stored twice; :class:`SequenceStreamWriter` (the
    default) stores them once, and its samples equal these sequences field for field.
    """

    def __init__(self, seq_len: int, period: int, obs_dim: int, hidden: int) -> None:
        if not 1 <= period <= seq_len:
            raise ValueError("period must be in [1, seq_len]")
        self.seq_len, self.period, self.obs_dim, self.hidden = seq_len, period, obs_dim, hidden
        self._reset()

    def _reset(self) -> None:
        self.steps: list[tuple[np.ndarray, int, np.ndarray, np.ndarray, int, float, bool]] = []
        self.first = 0  # episode step index of self.steps[0]
        self.next_start = 0  # episode step at which the next sequence starts

    def append(self, obs: np.ndarray, prev_action: int, h: np.ndarray, c: np.ndarray,
               action: int, reward: float, terminated: bool) -> list[dict[str, np.ndarray]]:
        """Add one step; returns the sequences it completes (none or one)."""
        self.steps.append((np.asarray(obs, np.float32), int(prev_action),
                           np.asarray(h, np.float32), np.asarray(c, np.float32), int(action),
                           float(reward), bool(terminated)))
        end = self.first + len(self.steps)
        if end - self.next_start < self.seq_len:
            return []
        out = [self._sequence(self.next_start, None)]
        self.next_start += self.period
        drop = self.next_start - self.first
        if drop > 0:
            del self.steps[:drop]
            self.first = self.next_start
        return out

    def end_episode(self, final_obs: np.ndarray) -> list[dict[str, np.ndarray]]:
        """The episode ended (terminated or truncated) with ``final_obs``: every sequence
        begun and not yet returned, padded; then start a new episode."""
        out = []
        end = self.first + len(self.steps)
        while self.next_start < end:
            out.append(self._sequence(self.next_start, np.asarray(final_obs, np.float32)))
            self.next_start += self.period
        self._reset()
        return out

    def _sequence(self, start: int, final_obs: np.ndarray | None) -> dict[str, np.ndarray]:
        L = self.seq_len  # noqa: N806 - the paper's name
        rows = self.steps[start - self.first:start - self.first + L]
        n = len(rows)
        seq = {"obs": np.zeros((1, L, self.obs_dim), np.float32),
               "prev_action": np.zeros((1, L), np.int64), "action": np.zeros((1, L), np.int64),
               "reward": np.zeros((1, L), np.float32), "done": np.zeros((1, L), np.float32),
               "mask": np.zeros((1, L), np.float32), "valid": np.zeros((1, L), np.float32),
               "h0": rows[0][2][None].copy(), "c0": rows[0][3][None].copy()}
        seq["obs"][0, :n] = np.stack([r[0] for r in rows])
        seq["prev_action"][0, :n] = [r[1] for r in rows]
        seq["action"][0, :n] = [r[4] for r in rows]
        seq["reward"][0, :n] = [r[5] for r in rows]
        seq["done"][0, :n] = [r[6] for r in rows]
        seq["mask"][0, :n] = 1.0
        seq["valid"][0, :n] = 1.0
        if final_obs is not None and n < L:
            seq["obs"][0, n] = final_obs
            seq["valid"][0, n] = 1.0
        return seq


FLAG_MASK, FLAG_VALID, FLAG_DONE = 1, 2, 4
"""Bits of a stored step's ``flags`` byte: mask, valid and done of the sequence fields
(see :func:`sequence_schema`), one byte instead of three float32 per step."""


def step_signature(obs_dim: int, n_actions: int) -> dict[str, tuple[tuple[int, ...], Any]]:
    """One step of an actor's episode stream. Actions are stored in the smallest dtype
    that holds them and the three 0/1 fields as bits: :func:`sequences_from_columns`
    turns them back into the int64 / float32 tensors the loss takes."""
    act = np.uint8 if n_actions <= 256 else np.int64
    return {"obs": ((obs_dim,), np.float32), "prev_action": ((), act), "action": ((), act),
            "reward": ((), np.float32), "flags": ((), np.uint8)}


class SequenceStreamWriter:
    """The sequences of :class:`SequenceWriter`, stored once on the appliance.

    Same calls (:meth:`append` per environment step, :meth:`end_episode` with the final
    observation), but nothing is returned: each step is appended once to the actor's
    episode stream (:class:`pyctl.trajectory.TrajectoryWriter`, fields
    :func:`step_signature`), and each sequence becomes an item of the TRAJECTORY table
    ``table`` (priority: the table's max) whose columns reference its seq_len steps, so
    two overlapping sequences share the chunks of their common steps. At an episode's
    end the stream gets the final observation (valid, not mask) and zero steps until
    every sequence begun has seq_len steps: the padding SequenceWriter puts in each item,
    here stored once per episode (at most seq_len - 1 steps).

    The stored state is not a step field: (h, c) would be 2 x hidden float32 on every
    step (512 B with hidden 64, 4 KB with R2D2's 512) where a sequence needs it only at
    its first step. It goes to a second stream, ``<stream>:state``, one step (h and c
    stacked) per sequence start, chunks of one step, and each item references its one
    step as the column ``state``: 2 x hidden x 4 / period bytes per environment step.
    Items and steps go out on :meth:`flush` (the state stream's append first, then the
    steps and the items in one pipeline) and at the episode's end.
    """

    def __init__(self, client: Any, table: str, stream: str, seq_len: int, period: int,
                 obs_dim: int, n_actions: int, hidden: int, *, chunk_steps: int = 32) -> None:
        from pyctl.trajectory import TrajectoryWriter

        if not 1 <= period <= seq_len:
            raise ValueError("period must be in [1, seq_len]")
        self.table, self.seq_len, self.period = table, seq_len, period
        self.obs_dim, self.hidden = obs_dim, hidden
        # the steps a flush may still reference: a sequence and what came after it
        self.max_unflushed = 2 * (seq_len + period) + 64
        self.steps = TrajectoryWriter(client, stream, step_signature(obs_dim, n_actions),
                                      chunk_steps=chunk_steps,
                                      history=2 * self.max_unflushed)
        self.states = TrajectoryWriter(client, stream + ":state",
                                       {"state": ((2, hidden), np.float32)}, chunk_steps=1,
                                       history=2 * self.max_unflushed // period + 4)
        self._act = self.steps.signature["action"][1]
        self._zero = {"obs": np.zeros(obs_dim, np.float32), "prev_action": self._act.type(0),
                      "action": self._act.type(0), "reward": np.float32(0),
                      "flags": np.uint8(FLAG_VALID)}
        self.pending = 0  # items not yet flushed
        self.t = 0  # acting steps of this episode
        self.next_start = 0
        self._unflushed = 0

    def append(self, obs: np.ndarray, prev_action: int, h: np.ndarray, c: np.ndarray,
               action: int, reward: float, terminated: bool) -> int:
        """Add one step; returns the sequences it completes (0 or 1)."""
        if self.t % self.period == 0:
            self.states.append({"state": np.stack([np.asarray(h, np.float32),
                                                   np.asarray(c, np.float32)])})
        self.steps.append({"obs": np.asarray(obs, np.float32),
                           "prev_action": self._act.type(prev_action),
                           "action": self._act.type(action), "reward": np.float32(reward),
                           "flags": np.uint8(FLAG_MASK | FLAG_VALID
                                             | (FLAG_DONE if terminated else 0))})
        self.t += 1
        self._unflushed += 1
        made = 0
        if self.t - self.next_start >= self.seq_len:
            self._item(self.next_start)
            self.next_start += self.period
            made = 1
        if self._unflushed >= self.max_unflushed:
            self.flush()
        return made

    def end_episode(self, final_obs: np.ndarray) -> int:
        """The episode ended with ``final_obs``: an item for every sequence begun, sent
        with the rest; the streams start a new episode. Returns the items made."""
        starts = range(self.next_start, self.t, self.period)
        if starts:
            extra = starts[-1] + self.seq_len - self.t  # steps past the last acting one
            if extra > 0:
                self.steps.append({**self._zero, "obs": np.asarray(final_obs, np.float32)})
                for _ in range(extra - 1):
                    self.steps.append({**self._zero, "flags": np.uint8(0)})
            for s in starts:
                self._item(s)
        self.states.flush()
        self.steps.end_episode()
        self.states.end_episode()
        self.t = self.next_start = self._unflushed = 0
        self.pending = 0
        return len(starts)

    def flush(self) -> None:
        """Send the buffered steps and items (the state stream's first)."""
        self.states.flush()
        self.steps.flush()
        self.pending = self._unflushed = 0

    def close(self) -> None:
        """Flush and drop both streams (items keep the chunks they reference)."""
        self.states.flush()
        self.steps.close()
        self.states.close()

    def _item(self, start: int) -> None:
        L, h = self.seq_len, self.steps.history  # noqa: N806 - the paper's name
        traj = {name: h[name][start:start + L] for name in self.steps.signature}
        k = start // self.period
        traj["state"] = self.states.history["state"][k:k + 1]
        self.steps.create_item(self.table, None, traj)
        self.pending += 1


def sequences_from_columns(cols: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """A TRAJECTORY sample's columns (:class:`SequenceStreamWriter`'s items) as the
    tensors of :func:`sequence_schema` (what a packed sample gives): int64 actions,
    float32 done / mask / valid from the flag bits, h0 and c0 of shape (n, hidden)."""
    f = cols["flags"]
    state = cols["state"]  # (n, 1, 2, hidden)
    out = {"obs": cols["obs"], "prev_action": cols["prev_action"].astype(np.int64),
           "action": cols["action"].astype(np.int64), "reward": cols["reward"],
           "done": ((f & FLAG_DONE) != 0).astype(np.float32),
           "mask": ((f & FLAG_MASK) != 0).astype(np.float32),
           "valid": ((f & FLAG_VALID) != 0).astype(np.float32),
           "h0": np.ascontiguousarray(state[:, 0, 0]), "c0": np.ascontiguousarray(state[:, 0, 1])}
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in out.items()}


# ---------------------------------------------------------------------------------------
# 5. value rescaling
# ---------------------------------------------------------------------------------------


def value_rescale(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x (Pohlen et al. 2018, used by R2D2)."""
    return torch.sign(x) * (torch.sqrt(x.abs() + 1.0) - 1.0) + eps * x


def inverse_value_rescale(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """h^-1(x) = sign(x) (((sqrt(1 + 4 eps (|x| + 1 + eps)) - 1) / (2 eps))^2 - 1)."""
    z = (torch.sqrt(1.0 + 4.0 * eps * (x.abs() + 1.0 + eps)) - 1.0) / (2.0 * eps)
    return torch.sign(x) * (z * z - 1.0)


# ---------------------------------------------------------------------------------------
# 6. the loss: burn-in, n-step double-Q targets under h, mixed priorities
# ---------------------------------------------------------------------------------------


def nstep_targets(reward: torch.Tensor, done: torch.Tensor, mask: torch.Tensor,
                  valid: torch.Tensor, n: int, gamma: float,
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """For every step t of (B, T) sequences: the discounted reward sum over up to n
    steps t..t+k-1 (stopping at a termination, at padding, or where the next observation
    is not in the sequence), the bootstrap index t + k, its discount gamma^k (0 after a
    termination), and whether t has a target at all (an acting step with k >= 1)."""
    B, T = reward.shape  # noqa: N806 - batch and time, as in the paper
    pad = n + 1

    def shifted(x: torch.Tensor, i: int) -> torch.Tensor:
        return nn.functional.pad(x, (0, pad))[:, i:i + T]

    ret = torch.zeros(B, T)
    disc = torch.ones(B, T)
    k = torch.zeros(B, T, dtype=torch.int64)
    terminated = torch.zeros(B, T)
    active = torch.ones(B, T)
    for i in range(n):
        d = shifted(done, i)
        take = active * shifted(mask, i) * torch.maximum(d, shifted(valid, i + 1))
        ret = ret + take * disc * shifted(reward, i)
        disc = torch.where(take > 0, disc * gamma, disc)
        k = k + take.long()
        terminated = torch.maximum(terminated, take * d)
        active = take * (1.0 - d)
    has_target = mask * (k > 0).float()
    boot_idx = (torch.arange(T)[None] + k).clamp(max=T - 1)
    return ret, boot_idx, disc * (1.0 - terminated), has_target


def sequence_td(net: RecurrentQNet, target_net: RecurrentQNet, batch: dict[str, torch.Tensor],
                cfg: R2D2Config) -> tuple[torch.Tensor, torch.Tensor]:
    """TD errors (B, T) and their loss mask (B, T). Both networks start from the stored
    state (h0, c0); targets are n-step double-Q,
    h(R + gamma^k h^-1(Q_target(s_{t+k}, argmax_a Q(s_{t+k}, a)))), and the TD error is
    taken against Q on the h-scale.

    Burn-in where the stored state can be stale: a sequence that starts later in its
    episode runs its first burn_in steps without gradient (R2D2's burn-in) and is trained
    on the rest (mask 0 before). A sequence that starts its episode carries the initial
    state itself (all zeros: nothing to be stale), so it is trained from its first step.
    Without that, with 80/40/40 every episode shorter than 40 steps (every early CartPole
    episode) would have no step to learn from."""
    b = cfg.burn_in
    obs, prev = batch["obs"], batch["prev_action"]
    h0, c0 = batch["h0"], batch["c0"]
    with torch.no_grad():
        q_target, _ = target_net(obs, prev, (h0, c0))
    B, T = obs.shape[:2]  # noqa: N806 - batch and time, as in the paper
    starts = (h0 == 0).all(1) & (c0 == 0).all(1) if b else torch.ones(B, dtype=torch.bool)
    later = ~starts
    q = torch.zeros(B, T, q_target.shape[-1])
    if starts.any():
        q[starts], _ = net(obs[starts], prev[starts], (h0[starts], c0[starts]))
    if later.any():
        with torch.no_grad():
            _, state = net(obs[later, :b], prev[later, :b], (h0[later], c0[later]))
        q[later, b:], _ = net(obs[later, b:], prev[later, b:], state)
    trained = torch.ones(B, T)
    trained[later, :b] = 0.0
    ret, boot_idx, boot_disc, has_target = nstep_targets(
        batch["reward"], batch["done"], batch["mask"] * trained, batch["valid"], cfg.n_step,
        cfg.gamma)
    with torch.no_grad():
        q_boot_online = q.detach().gather(1, boot_idx[..., None].expand(-1, -1, q.shape[-1]))
        a_star = q_boot_online.argmax(-1, keepdim=True)
        q_boot_target = q_target.gather(
            1, boot_idx[..., None].expand(-1, -1, q.shape[-1])).gather(2, a_star).squeeze(-1)
        y = value_rescale(ret + boot_disc * inverse_value_rescale(q_boot_target, cfg.rescale_eps),
                          cfg.rescale_eps)
    q_taken = q.gather(2, batch["action"][..., None]).squeeze(-1)
    return (y - q_taken) * has_target, has_target


def mixed_priority(td: torch.Tensor, mask: torch.Tensor, eta: float = 0.9) -> torch.Tensor:
    """R2D2's sequence priority eta max_t |delta_t| + (1 - eta) mean_t |delta_t| over the
    steps with a target (mask 1); 0 for a sequence without any."""
    a = td.abs() * mask
    n = mask.sum(1)
    mean = a.sum(1) / n.clamp(min=1.0)
    return torch.where(n > 0, eta * a.max(1).values + (1.0 - eta) * mean, torch.zeros_like(n))


# ---------------------------------------------------------------------------------------
# 7. the processes
# ---------------------------------------------------------------------------------------

NETNS = "irr2d2"
"""The DPDK stack's namespace (and DPDK file prefix) for this demo: not the Ape-X demo's
"irdemo", so the two can run on one machine at the same time."""
SUBNET = "10.79.0.0/24"
"""The namespace's subnet (the Ape-X demo's is 10.78.0.0/24)."""

SAMPLE_WAIT_S = 1.0
"""How long one REPLAY.SAMPLE / REPLAY.ADD may wait in the rate limiter before the caller
checks for a stop and tries again."""


def build_net(cfg: R2D2Config) -> RecurrentQNet:
    env = make_env(cfg)
    try:
        obs_dim = int(np.prod(env.observation_space.shape or (1,)))
        n_actions = int(env.action_space.n)  # type: ignore[attr-defined]
    finally:
        env.close()
    return RecurrentQNet(obs_dim, n_actions, cfg.hidden)


def keys_of(cfg: R2D2Config) -> Any:
    from inreplay.rl.config import Keys

    return Keys(cfg.prefix)


def limiter_error_buffer(cfg: R2D2Config) -> float:
    """The rate limiter's error buffer (sequences x samples_per_insert of slack)."""
    spi = cfg.samples_per_insert
    return max(2.0 * max(1.0, spi), 0.1 * cfg.min_replay * spi, 2.0 * cfg.batch_size)


def limiter_holds(info: dict[str, Any], cfg: R2D2Config, insert: bool) -> bool:
    """Whether the MIN_SIZE / SAMPLES_PER_INSERT limiter holds an insert (or a sample),
    from the table's REPLAY.INFO: the server's own rule (t_replay.c limiterHolds*).
    A TRAJECTORY table refuses SAMPLES_PER_INSERT ("cannot hold inserts yet"), so with
    ``--storage trajectory`` the actors and the learner keep the ratio themselves: each
    waits (polling REPLAY.INFO) while the server would have held it; MIN_SIZE stays the
    server's."""
    spi = cfg.samples_per_insert
    if spi <= 0:
        return False
    err = float(info["limiter_samples"]) - spi * (float(info["limiter_inserts"])
                                                  - cfg.min_replay)
    if insert:
        return int(info["size"]) >= cfg.min_replay and err < -limiter_error_buffer(cfg)
    return err > limiter_error_buffer(cfg)


def run_actor(cfg: R2D2Config, actor_id: int, stop: threading.Event) -> None:
    """Act epsilon-greedily with the newest published parameters, write sequences (each
    step once to the actor's episode stream, an item per sequence; or packed items with
    ``--storage packed``), insert them (table's max priority for new items) and report
    frames and episode returns."""
    import redis
    from inreplay.actors.actor import ParamUpdates, epsilon_ladder
    from inreplay.rl.model import BlobError, load_blob

    from pyctl.client import RateLimited, ReplayClient, connect

    keys = keys_of(cfg)
    r = connect(host=cfg.host, port=cfg.port, protocol=2, socket_timeout=60,
                password=appliance_password())
    rc = ReplayClient(cfg.host, cfg.port, protocol=2, socket_timeout=60,
                      password=appliance_password())
    updates = ParamUpdates(r, keys)
    net = build_net(cfg).eval()
    obs_dim = net.torso[0].in_features - net.n_actions
    schema = sequence_schema(cfg, obs_dim)
    eps = epsilon_ladder(actor_id, cfg.num_actors, cfg.eps_base, cfg.eps_alpha)
    seed = cfg.seed + 1000 * (actor_id + 1)
    rng = np.random.default_rng(seed)
    env = make_env(cfg)
    policy = StepPolicy(net)
    packed = cfg.storage == "packed"
    writer = SequenceWriter(cfg.seq_len, cfg.period, obs_dim, cfg.hidden)
    stream: SequenceStreamWriter | None = None
    if not packed:
        stream = SequenceStreamWriter(rc, cfg.table, f"{cfg.prefix}:steps:{actor_id}",
                                      cfg.seq_len, cfg.period, obs_dim, net.n_actions,
                                      cfg.hidden)
    version = 0

    def pull(timeout: float) -> None:
        nonlocal version
        v = updates.poll(timeout)
        if v is None or v == version:
            return
        blob, v_raw = r.mget(keys.params, keys.version)
        if blob is None:
            return
        try:
            load_blob(net, blob)
            policy.load(net)
            version = int(v_raw or v)
        except BlobError as e:
            print(f"actor {actor_id}: ignoring parameters: {e}", flush=True)

    def wait_for_limiter() -> None:
        """--storage trajectory: hold the insert while the learner is behind."""
        while not stop.is_set() and limiter_holds(rc.info(cfg.table), cfg, insert=True):
            if r.exists(keys.stop):
                stop.set()
            pull(0.0)
            time.sleep(0.02)

    while not version and not stop.is_set() and not r.exists(keys.stop):
        pull(0.1)
    print(f"actor {actor_id}: epsilon {eps:.4f}, parameters v{version}, "
          f"storage {cfg.storage}", flush=True)
    pending: list[dict[str, np.ndarray]] = []
    n_pending = 0  # sequences made and not yet counted
    returns: list[str] = []
    frames_unsent = 0
    obs, _ = env.reset(seed=seed)
    state = policy.initial_state()
    prev_action, ep_return = 0, 0.0
    while not stop.is_set():
        q, new_state = policy.step(obs, prev_action, state)
        action = int(rng.integers(net.n_actions)) if rng.random() < eps else int(q.argmax())
        next_obs, reward, terminated, truncated, _ = env.step(action)
        step = (obs, prev_action, state[0], state[1], action, float(reward), bool(terminated))
        if stream is None:
            pending += writer.append(*step)
        else:
            n_pending += stream.append(*step)
        frames_unsent += 1
        ep_return += float(reward)
        state, prev_action, obs = new_state, action, next_obs
        ended = terminated or truncated
        if ended:
            if stream is None:
                pending += writer.end_episode(next_obs)
            else:
                wait_for_limiter()
                n_pending += stream.end_episode(next_obs)  # sent now
            returns.append(f"{time.time():.3f} {actor_id} {ep_return:g}")
            obs, _ = env.reset()
            state, prev_action, ep_return = policy.initial_state(), 0, 0.0
        n_pending = n_pending if stream is not None else len(pending)
        if n_pending >= cfg.actor_flush or (returns and n_pending):
            if stream is not None:
                if stream.pending:
                    wait_for_limiter()
                    stream.flush()
            else:
                batch = {k: np.concatenate([p[k] for p in pending]) for k in pending[0]}
                while not stop.is_set():
                    try:
                        rc.add(cfg.table, None, batch, schema=schema, timeout=SAMPLE_WAIT_S)
                        break
                    except RateLimited:
                        if r.exists(keys.stop):
                            stop.set()
                        pull(0.0)
            pipe = r.pipeline(transaction=False)
            pipe.incrby(keys.frames, frames_unsent)
            pipe.incrby(keys.transitions, n_pending)
            if returns:
                pipe.rpush(keys.returns, *returns)
            pipe.exists(keys.stop)
            if pipe.execute()[-1]:
                break
            pending, returns, frames_unsent, n_pending = [], [], 0, 0
            pull(0.0)
    if stream is not None:
        with contextlib.suppress(redis.RedisError):
            stream.close()
    env.close()
    updates.close()
    rc.close()
    r.close()


def publish(r: Any, keys: Any, net: nn.Module, version: int, samples: int) -> int:
    """The parameters as the next version, in one MULTI/EXEC as the Ape-X learner does:
    blob, version and sample counter SET and the version PUBLISHed (actors.actor reads it)."""
    from inreplay.rl.model import params_to_blob

    pipe = r.pipeline(transaction=True)
    pipe.set(keys.params, params_to_blob(net))
    pipe.set(keys.version, version + 1)
    pipe.set(keys.samples, samples)
    pipe.publish(keys.updates, version + 1)
    pipe.execute()
    return version + 1


def run_learner(cfg: R2D2Config, stop: threading.Event) -> None:
    """Create the table, then: sample 64 sequences, burn in, n-step double-Q loss under h
    weighted by importance, Adam, mixed priorities back (REPLAY.UPDATE), target sync every
    target_update steps, publish every publish_every steps."""
    import copy

    import redis

    from pyctl.client import RateLimited, ReplayClient, connect
    from pyctl.errors import replay_error
    from pyctl.trajectory import create_trajectory_table, sample_trajectories

    keys = keys_of(cfg)
    r = connect(host=cfg.host, port=cfg.port, protocol=2, socket_timeout=60,
                password=appliance_password())
    rc = ReplayClient(cfg.host, cfg.port, protocol=2, socket_timeout=60,
                      password=appliance_password())
    torch.manual_seed(cfg.seed)
    net = build_net(cfg)
    target_net = copy.deepcopy(net).eval()
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr, eps=cfg.adam_eps)
    schema = sequence_schema(cfg, net.torso[0].in_features - net.n_actions)
    spi = cfg.samples_per_insert
    packed = cfg.storage == "packed"
    if packed:
        rc.create(cfg.table, cfg.capacity, alpha=cfg.priority_exponent,
                  beta=cfg.importance_exponent, min_size=cfg.min_replay,
                  **({"samples_per_insert": spi, "error_buffer": limiter_error_buffer(cfg)}
                     if spi > 0 else {}))
    else:  # the ratio is kept by the clients: see limiter_holds
        create_trajectory_table(rc, cfg.table, cfg.capacity, alpha=cfg.priority_exponent,
                                beta=cfg.importance_exponent, min_size=cfg.min_replay)
    version = publish(r, keys, net, 0, 0)
    steps, samples, t_log = 0, 0, time.monotonic()
    losses: list[float] = []
    out = Path(cfg.out_dir)
    metrics = open(out / "r2d2-metrics.csv", "w")  # closed below
    metrics.write("wall_s,learner_steps,loss,q_mean,replay_size\n")
    t0 = time.monotonic()
    while not stop.is_set():
        try:
            if packed:
                s = rc.sample(cfg.table, cfg.batch_size, schema=schema, torch=True,
                              timeout=SAMPLE_WAIT_S)
                ids, weights, batch = s.ids, s.weights, s.items
            else:
                if limiter_holds(rc.info(cfg.table), cfg, insert=False):
                    if r.exists(keys.stop):
                        break
                    time.sleep(0.01)
                    continue
                try:
                    ts = sample_trajectories(rc, cfg.table, cfg.batch_size,
                                             timeout=SAMPLE_WAIT_S)
                except redis.ResponseError as e:
                    raise replay_error(e) from None
                ids, weights = ts.ids, torch.from_numpy(ts.weights)
                batch = sequences_from_columns(ts.columns)
        except RateLimited:
            if r.exists(keys.stop):
                break
            continue
        td, mask = sequence_td(net, target_net, batch, cfg)
        w = weights[:, None]
        loss = (w * 0.5 * td.pow(2)).sum() / mask.sum().clamp(min=1.0)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), cfg.grad_clip)
        opt.step()
        rc.update(cfg.table, ids, mixed_priority(td.detach(), mask, cfg.priority_eta).numpy())
        steps += 1
        samples += cfg.batch_size
        losses.append(float(loss))
        if steps % cfg.target_update == 0:
            target_net.load_state_dict(net.state_dict())
        if steps % cfg.publish_every == 0:
            version = publish(r, keys, net, version, samples)
        now = time.monotonic()
        if now - t_log >= 5.0:
            size = int(rc.info(cfg.table)["size"])
            print(f"learner: {steps} steps, loss {np.mean(losses):.4f}, replay {size} "
                  f"sequences, params v{version}", flush=True)
            metrics.write(f"{now - t0:.1f},{steps},{np.mean(losses):.5f},,{size}\n")
            metrics.flush()
            losses.clear()
            t_log = now
    publish(r, keys, net, version, samples)
    torch.save({"model": net.state_dict(), "config": asdict(cfg), "learner_steps": steps},
               out / "checkpoint.pt")
    metrics.close()
    print(f"learner: stopped after {steps} steps", flush=True)
    rc.close()
    r.close()


# ---------------------------------------------------------------------------------------
# 8. evaluation and the demo
# ---------------------------------------------------------------------------------------


def evaluate(net: RecurrentQNet, cfg: R2D2Config, episodes: int, seed: int,
             stop_below: float | None = None, deadline: float = math.inf) -> list[float]:
    """Greedy episodes (the recurrent state carried through each) on fresh seeds seed,
    seed + 1, ...; stops after the first return below ``stop_below`` or at ``deadline``.
    Acts through :class:`StepPolicy`, as the actors do."""
    env = make_env(cfg)
    policy = StepPolicy(net)
    out: list[float] = []
    try:
        for ep in range(episodes):
            obs, _ = env.reset(seed=seed + ep)
            state, prev, total = policy.initial_state(), 0, 0.0
            while True:
                q, state = policy.step(obs, prev, state)
                prev = int(q.argmax())
                obs, reward, terminated, truncated, _ = env.step(prev)
                total += float(reward)
                if terminated or truncated or time.monotonic() > deadline:
                    break
            if time.monotonic() > deadline:
                break
            out.append(total)
            if stop_below is not None and total < stop_below:
                break
    finally:
        env.close()
    return out


def storage_stats(r: Any, cfg: R2D2Config, env_steps: int, item_bytes: int) -> dict[str, Any]:
    """Bytes the appliance holds per environment step of the live sequences, as the server
    counts them: the table's records (REPLAY.INFO bytes_used: whole packed sequences, or
    a TRAJECTORY item's references) plus, for trajectories, the chunk store (REPLAY.CHUNKS
    memory: chunk bytes, chunk headers, the streams). Live steps are env_steps x size /
    inserts (all of them until the table evicts). ``packed_bytes_per_step`` is what the
    packed form takes for the same live sequences: measured in a packed run, otherwise
    their count x the packed item's bytes (what a packed table's bytes_used counts for
    them) over the same steps."""
    from pyctl.errors import decode_info
    from pyctl.trajectory import chunk_stats

    info = decode_info(r.execute_command("REPLAY.INFO", cfg.table))
    size, inserts = int(info["size"]), int(info["inserts"])
    chunks = chunk_stats(r) if cfg.storage == "trajectory" else {}
    stored = int(info["bytes_used"]) + int(chunks.get("memory", 0))
    live = env_steps * size / inserts if inserts else 0.0
    per_step = round(stored / live, 1) if live else None
    out: dict[str, Any] = {
        "mode": cfg.storage, "items": size, "items_inserted": inserts,
        "live_env_steps": round(live), "table_bytes": int(info["bytes_used"]),
        "chunk_memory": int(chunks.get("memory", 0)), "chunks": int(chunks.get("chunks", 0)),
        "chunk_references": int(chunks.get("references", 0)),
        "bytes_per_step": per_step,
        "packed_item_bytes": item_bytes,
        "packed_bytes_per_step": per_step if cfg.storage == "packed" or not live
        else round(size * item_bytes / live, 1),
    }
    if cfg.storage == "trajectory" and per_step:
        out["vs_packed"] = round(per_step / out["packed_bytes_per_step"], 3)
    return out


class R2D2Demo:
    """The appliance, the learner and the actors as processes (actors.demo's helpers),
    screened every eval_every_s, stopped when solved or at the end of the budget."""

    def __init__(self, cfg: R2D2Config, stack: str, minutes: float, out: Path) -> None:
        self.cfg, self.stack_requested, self.minutes, self.out = cfg, stack, minutes, out
        self.stack = "kernel"
        self.server: Any = None
        self.children: list[Any] = []
        self.t0 = time.monotonic()
        self.evals: list[dict[str, Any]] = []

    def say(self, msg: str) -> None:
        print(f"[{time.monotonic() - self.t0:6.1f}s] {msg}", flush=True)

    def start_server(self) -> None:
        from inreplay.rl.harness import HOST, DemoError, dpdk_possible, start_appliance

        from pyctl.proc import free_port

        stack = self.stack_requested
        if stack == "auto":
            why = dpdk_possible()
            stack = "kernel" if why else "dpdk"
        try:
            self.server, host, port = start_appliance(stack, free_port(HOST), self.out,
                                                      netns_name=NETNS, subnet=SUBNET)
        except DemoError as e:
            if stack == "kernel":
                raise
            self.say(f"the dpdk stack did not start ({str(e).splitlines()[0]}); "
                     f"using the kernel stack")
            self._netns_down()
            stack = "kernel"
            self.server, host, port = start_appliance(stack, free_port(HOST), self.out)
        self.stack = stack
        self.cfg = dataclasses.replace(self.cfg, host=host, port=port)
        self.say(f"inreplay appliance: {stack} stack on {host}:{port}")

    def _netns_down(self) -> None:
        from pyctl import netns

        if NETNS in netns.namespaces():
            netns.down(NETNS)

    def start_processes(self) -> None:
        from inreplay.rl.harness import Child

        path = self.out / "config.json"
        path.write_text(json.dumps(asdict(self.cfg), indent=1))
        py = [sys.executable, "-m", "inreplay.actors.r2d2", "--config", str(path)]
        self.children.append(Child("learner", [*py, "--role", "learner"],
                                   self.out / "learner.log"))
        for i in range(self.cfg.num_actors):
            self.children.append(Child(f"actor {i}", [*py, "--role", "actor", "--actor-id",
                                                      str(i)], self.out / f"actor-{i}.log"))

    def check(self) -> None:
        from inreplay.rl.harness import DemoError

        for c in [*self.children, self.server]:
            if c is not None and c.proc.poll() is not None:
                raise DemoError(f"{c.name} exited with status {c.proc.returncode}:\n{c.tail()}")

    def stop(self) -> None:
        for c in self.children:
            if c.alive():
                with contextlib.suppress(ProcessLookupError):
                    c.proc.send_signal(signal.SIGTERM)
        for c in self.children:
            c.stop(timeout=20.0)
        self.children = []
        if self.server is not None:
            self.server.stop(timeout=15.0)
            self.server = None
        if self.stack == "dpdk":
            self._netns_down()

    def run(self) -> dict[str, Any]:
        from inreplay.rl.model import BlobError, load_blob

        from pyctl.client import connect

        cfg = self.cfg
        keys = keys_of(cfg)
        r = connect(host=cfg.host, port=cfg.port, protocol=2, socket_timeout=60,
                password=appliance_password())
        self.start_processes()
        self.say(f"learner and {cfg.num_actors} actors started; logs in {self.out}/")
        net = build_net(cfg).eval()
        item_bytes = sequence_schema(cfg, net.torso[0].in_features - net.n_actions).itemsize
        budget = self.minutes * 60.0
        deadline = self.t0 + budget - 20.0  # the last evaluation and the shutdown
        solved: dict[str, Any] | None = None
        seen_version, last_eval, first = 0, 0.0, None
        steps_rate = 0.0

        def counters() -> tuple[int, int, int, int]:
            frames, samples, version = r.mget(keys.frames, keys.samples, keys.version)
            return int(frames or 0), int(samples or 0), int(version or 0), r.llen(keys.returns)

        def inserted() -> int:
            return int(r.get(keys.transitions) or 0)

        def pull() -> int:
            blob, v = r.mget(keys.params, keys.version)
            if blob is None:
                return 0
            try:
                load_blob(net, blob)
            except BlobError as e:
                self.say(f"cannot load parameters: {e}")
                return 0
            return int(v or 0)

        def run_eval(v: int, episodes: int, seed: int, stop_below: float | None,
                     kind: str, until: float = math.inf) -> list[float]:
            t = time.monotonic()
            rets = evaluate(net, cfg, episodes, seed, stop_below, until)
            self.evals.append({"t": round(time.monotonic() - self.t0, 1), "kind": kind,
                               "params_version": v, "returns": rets,
                               "mean": float(np.mean(rets)) if rets else None,
                               "seconds": round(time.monotonic() - t, 1)})
            return rets

        t_status = 0.0
        while time.monotonic() < deadline:
            time.sleep(0.5)
            self.check()
            frames, samples, version, episodes = counters()
            now = time.monotonic()
            if samples and first is None:
                first = (now, samples)
            if first and now - first[0] > 1.0:
                steps_rate = (samples - first[1]) / cfg.batch_size / (now - first[0])
            if now - t_status >= 10.0:
                recent = [float(x.split()[2]) for x in r.lrange(keys.returns, -20, -1)]
                self.say(f"actors {frames} steps, {episodes} episodes (last 20: mean "
                         f"{np.mean(recent) if recent else 0:.0f}) | learner "
                         f"{samples // cfg.batch_size} steps ({steps_rate:.1f}/s) | "
                         f"params v{version}")
                t_status = now
            if now - last_eval < cfg.eval_every_s or version == seen_version or not samples:
                continue
            last_eval = now
            v = pull()
            if not v:
                continue
            seen_version = v
            screen = run_eval(v, cfg.screen_episodes, 20_000 + 100 * len(self.evals),
                              cfg.solve_return, "screen")
            self.say(f"screening v{v}: {screen}")
            if len(screen) < cfg.screen_episodes or min(screen) < cfg.solve_return:
                continue
            full = run_eval(v, cfg.eval_episodes, 1_000_000, None, "final")
            self.say(f"parameters v{v}: {len(full)} greedy episodes, mean {np.mean(full):.1f}")
            if len(full) == cfg.eval_episodes and np.mean(full) >= cfg.solve_return:
                solved = {"version": v, "returns": full, "t": time.monotonic() - self.t0}
                torch.save({"model": net.state_dict(), "config": asdict(cfg),
                            "params_version": v}, self.out / "evaluated.pt")
                break
        frames, samples, version, episodes = counters()
        sequences = inserted()
        storage = storage_stats(r, cfg, frames, item_bytes)
        r.set(keys.stop, 1)
        self.stop()
        if solved is None:  # the learner published its last parameters on the way out
            rets = run_eval(version, cfg.eval_episodes, 1_000_000, None, "final",
                            time.monotonic() + 15.0) if self._pull_last(net) else []
            result = {"version": version, "returns": rets, "t": None}
        else:
            result = solved
        rets = result["returns"]
        mean = float(np.mean(rets)) if rets else None
        return {
            "algo": "r2d2", "env": f"{cfg.env_id} (velocities hidden)",
            "solved": bool(mean is not None and len(rets) == cfg.eval_episodes
                           and mean >= cfg.solve_return),
            "solve_return": cfg.solve_return,
            "solved_at_s": None if result["t"] is None else round(result["t"], 1),
            "eval_return_mean": mean, "eval_episodes": len(rets), "eval_returns": rets,
            "eval_params_version": result["version"],
            "stack": self.stack, "stack_requested": self.stack_requested,
            "wall_s": None, "env_steps": frames, "episodes": episodes,
            "learner_steps": samples // cfg.batch_size, "learner_samples": samples,
            "learner_steps_per_s": round(steps_rate, 2), "params_version": version,
            "sequence": {"seq_len": cfg.seq_len, "period": cfg.period, "burn_in": cfg.burn_in},
            "sequences_inserted": sequences,
            "samples_per_insert": round(samples / sequences, 2) if sequences else None,
            "storage": storage,
            "stored_bytes_per_step": storage["bytes_per_step"],
            "evaluations": self.evals,
            "machine": {"cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0],
                        "python": platform.python_version(), "torch": torch.__version__},
            "config": asdict(cfg),
        }

    def _pull_last(self, net: RecurrentQNet) -> bool:
        """The learner's checkpoint (written on SIGTERM) after the appliance is gone."""
        path = self.out / "checkpoint.pt"
        if not path.exists():
            return False
        net.load_state_dict(torch.load(path, weights_only=True)["model"])
        return True


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, R2D2Config]:
    from inreplay.rl.config import Parser

    p = Parser(prog="python -m inreplay.actors.r2d2", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stack", choices=["auto", "kernel", "dpdk"], default="auto",
                   help="the appliance's network stack (auto: dpdk when possible)")
    p.add_argument("--minutes", type=float, default=10.0,
                   help="wall-time budget of the whole run, evaluation included (default 10)")
    p.add_argument("--out", default="out/demo-r2d2", help="output directory")
    p.add_argument("--actors", type=int, default=argparse.SUPPRESS,
                   help="actor processes (default 2)")
    p.add_argument("--config", default=None, help=argparse.SUPPRESS)
    p.add_argument("--role", choices=["demo", "learner", "actor"], default="demo",
                   help=argparse.SUPPRESS)
    p.add_argument("--actor-id", type=int, default=0, help=argparse.SUPPRESS)
    config_flags(p)
    args = p.parse_args(argv)
    if args.config:
        cfg = R2D2Config(**json.loads(Path(args.config).read_text()))
    else:
        given = {f.name: getattr(args, f.name) for f in fields(R2D2Config)
                 if hasattr(args, f.name)}
        cfg = R2D2Config(**{**CARTPOLE, **given, "out_dir": args.out,
                            "num_actors": getattr(args, "actors", 2)})
    try:
        cfg.validate()
    except ValueError as e:
        p.error(str(e))
    if args.minutes <= 0:
        p.error("--minutes must be > 0")
    return args, cfg


def main(argv: list[str] | None = None) -> int:
    args, cfg = parse(argv)
    torch.set_num_threads(1)
    stop = threading.Event()
    if args.role != "demo":
        from pyctl.proc import stop_handler

        on_signal = stop_handler(stop)
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        from inreplay.rl.config import dump_stacks_on_signal

        dump_stacks_on_signal()
        if args.role == "learner":
            run_learner(cfg, stop)
        else:
            run_actor(cfg, args.actor_id, stop)
        return 0
    import redis
    from inreplay.rl.harness import DemoError

    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("summary.json", "checkpoint.pt", "evaluated.pt"):
        (out / stale).unlink(missing_ok=True)
    demo = R2D2Demo(cfg, args.stack, args.minutes, out)

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_term)
    summary: dict[str, Any] | None = None
    code = 0
    try:
        demo.start_server()
        summary = demo.run()
    except KeyboardInterrupt:
        demo.say("interrupted: stopping every process")
        code = 130
    except DemoError as e:
        demo.say(f"r2d2 demo: {e}")
        code = 1
    except redis.RedisError as e:  # the appliance went away (or refused) mid-run
        demo.say(f"r2d2 demo: lost the appliance on {demo.cfg.host}:{demo.cfg.port}: {e}"
                 + (f"\n{demo.server.name} log ends:\n{demo.server.tail(5)}"
                    if demo.server is not None else ""))
        code = 1
    finally:
        demo.stop()
        signal.signal(signal.SIGTERM, old)
    if summary is None:
        print("solved: false")
        return code
    summary["wall_s"] = round(time.monotonic() - demo.t0, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"\nR2D2 on {summary['env']}, {summary['stack']} stack: evaluation "
          f"{summary['eval_return_mean'] or float('nan'):.1f} over {summary['eval_episodes']} "
          f"episodes after {summary['learner_steps']} learner steps "
          f"({summary['learner_steps_per_s']:.1f}/s) and {summary['env_steps']} env steps in "
          f"{summary['wall_s']:.0f} s; wrote {out}/summary.json")
    print(f"solved: {'true' if summary['solved'] else 'false'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
