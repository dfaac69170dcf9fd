"""R2D2's configuration and what its actors, learner and demo share: the settings
(R2D2's published values as defaults, :data:`CARTPOLE` for the demo), CartPole without
its velocities (:class:`MaskVelocity`: a feed-forward Q-network sees no motion, so the
agent must remember), the sequence item's schema and the stored step's layout, the
client-side rate limiter of a TRAJECTORY table (:func:`limiter_holds`) and the
processes' command lines. The network is rl.networks.RecurrentQNet."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from inreplay.rl.networks import RecurrentQNet


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


def parse(argv: list[str] | None, description: str | None = None,
          ) -> tuple[argparse.Namespace, R2D2Config]:
    """The demo's flags (CARTPOLE, then the flags), or a child's --config and --role."""
    from inreplay.rl.config import Parser
    from inreplay.rl.harness import add_budget_flags, check_budget_flags

    p = Parser(prog="python -m inreplay.actors.r2d2", description=description,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stack", choices=["auto", "kernel", "dpdk"], default="auto",
                   help="the appliance's network stack (auto: dpdk when possible)")
    add_budget_flags(p, 10.0)
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
    check_budget_flags(p, args)
    return args, cfg


def as_child(stop: threading.Event) -> None:
    """A learner or actor process: SIGTERM and SIGINT set stop (the loop ends, the learner
    checkpoints), and STACKS_SIGNAL writes every thread's stack to the log."""
    from inreplay.rl.config import dump_stacks_on_signal

    from pyctl.proc import stop_handler

    torch.set_num_threads(1)
    on_signal = stop_handler(stop)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    dump_stacks_on_signal()


def child_argv(config_path: Path, role: str, actor_id: int = 0) -> list[str]:
    """The command line of the learner (learner.r2d2) or of actor actor_id (actors.r2d2),
    which read the run's configuration from config_path."""
    if role == "learner":
        return [sys.executable, "-m", "inreplay.learner.r2d2", "--config", str(config_path),
                "--role", "learner"]
    return [sys.executable, "-m", "inreplay.actors.r2d2", "--config", str(config_path),
            "--role", "actor", "--actor-id", str(actor_id)]
