"""DQN on CartPole-v1 with a TorchRL prioritized replay buffer, on inreplay or local.

    python -m inreplay.integrations.torchrl_dqn                  # starts an inreplay server itself
    python -m inreplay.integrations.torchrl_dqn --address 127.0.0.1:6379   # or uses a running one
    python -m inreplay.integrations.torchrl_dqn --buffer local   # TorchRL's own buffer

One file, top to bottom (CleanRL's layout): the config, the network, the buffer, the
loop. The only line that differs between ``--buffer inreplay`` and ``--buffer local``
is the buffer's storage and sampler: inreplay's InreplayStorage + InreplaySampler
(integrations.torchrl) or TorchRL's LazyTensorStorage + PrioritizedSampler, both in a
TorchRL ``TensorDictReplayBuffer`` with the same alpha, beta and eps. The agent is
Double DQN with prioritized replay (Schaul et al.): the Huber loss is weighted by the
sample's ``priority_weight`` and ``rb.update_tensordict_priority`` writes |TD error|
back. Every ``--train-every`` environment steps the new transitions go into the buffer
as one ``extend`` (one REPLAY.ADD) and the learner takes ``--grad-steps`` steps (each
one sample, one gradient step, one priority update). The hyperparameters are RL Baselines3
Zoo's for DQN on CartPole-v1, with prioritized replay added.

Solved: the greedy policy is evaluated every ``--eval-every`` steps over
``--eval-episodes`` episodes; CartPole-v1's criterion (its ``reward_threshold``) is a
mean return of at least 475. Training stops at the first evaluation that reaches it;
the last line printed is ``solved: true`` when the last evaluation did. Before it:
learner steps/s, the learner's gradient steps divided by the seconds spent in them
(sample + loss + backward + optimizer + priority update), i.e. the buffer's share of
the work as seen by the learner, and the run's wall time.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import itertools
import json
import random
import subprocess
import sys
import textwrap
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from inreplay.integrations import torchrl_trees
from inreplay.integrations.torchrl import InreplaySampler, InreplayStorage, connect
from tensordict import TensorDict
from torch import nn
from torchrl.data import LazyTensorStorage, PrioritizedSampler, TensorDictReplayBuffer


@dataclass
class Args:
    """DQN on CartPole-v1 through a TorchRL replay buffer."""

    buffer: str = "inreplay"
    """Where the replay buffer lives: "inreplay" (the appliance) or "local" (TorchRL's
    LazyTensorStorage + PrioritizedSampler in this process)."""
    address: str = ""
    """inreplay server (or any member of a replay group) HOST:PORT; empty: start one
    on a free port for this run and stop it at the end."""
    table: str = "torchrl_dqn"
    """Replay table name on the server (dropped and created anew)."""
    total_steps: int = 50_000
    """Environment steps at most (training stops earlier once solved)."""
    seed: int = 1
    """Seed of the environment, the network and the sampling."""
    capacity: int = 50_000
    """Replay capacity in transitions."""
    batch_size: int = 64
    """Transitions per learner step."""
    learning_starts: int = 1_000
    """Environment steps before the first learner step."""
    train_every: int = 256
    """Environment steps between rounds of learning; their transitions go in as one
    extend (one REPLAY.ADD)."""
    grad_steps: int = 128
    """Learner steps per round (each: one sample, one gradient step, one priority
    update). The target network is the online one as of the round's start."""
    lr: float = 2.3e-3
    """Adam learning rate."""
    gamma: float = 0.99
    """Discount."""
    eps_start: float = 1.0
    """Initial exploration epsilon."""
    eps_end: float = 0.04
    """Final exploration epsilon."""
    eps_fraction: float = 0.16
    """Share of total_steps over which epsilon decays linearly."""
    alpha: float = 0.6
    """Priority exponent (TorchRL's PrioritizedSampler alpha)."""
    beta: float = 0.4
    """Initial importance-sampling exponent, annealed linearly to 1 over total_steps."""
    eps: float = 1e-6
    """Added to |TD error| before the exponent."""
    hidden: int = 256
    """Width of the two hidden layers."""
    eval_every: int = 5_120
    """Environment steps between greedy evaluations."""
    eval_episodes: int = 10
    """Episodes per evaluation."""
    solve_return: float = 475.0
    """Mean greedy return that counts as solved (CartPole-v1's reward_threshold)."""
    json_out: str = ""
    """Write the run's summary as JSON to this file."""


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of a dataclass (the flags' help)."""
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body  # type: ignore[attr-defined]
    return {a.target.id: " ".join(b.value.value.split())
            for a, b in itertools.pairwise(body)
            if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name)
            and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)}


def parse_args(argv: list[str] | None = None) -> Args:
    p = argparse.ArgumentParser(prog="python -m inreplay.integrations.torchrl_dqn",
                                description=Args.__doc__)
    docs = field_docs(Args)
    for f in fields(Args):
        p.add_argument("--" + f.name.replace("_", "-"), type=type(f.default),
                       default=f.default, help=f"{docs.get(f.name, '')} (default {f.default!r})")
    args = Args(**vars(p.parse_args(argv)))
    if args.buffer not in ("inreplay", "local"):
        p.error(f"--buffer must be inreplay or local, not {args.buffer!r}")
    if min(args.total_steps, args.capacity, args.batch_size, args.train_every,
           args.grad_steps, args.eval_every) <= 0:
        p.error("--total-steps, --capacity, --batch-size, --train-every, --grad-steps and "
                "--eval-every must be positive")
    return args


class QNetwork(nn.Module):
    def __init__(self, n_obs: int, n_actions: int, hidden: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_obs, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, n_actions))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    """An inreplay server on a free port of 127.0.0.1 (pyctl start --listen :0)."""
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, "-m", "pyctl", "start", "--listen", "127.0.0.1:0"],
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.decode(errors="replace").strip()
        if "listening on " in line:
            return proc, line.split("listening on ", 1)[1].split()[0]
    proc.wait()
    raise RuntimeError(f"inreplay did not start (exit {proc.returncode})")


def make_buffer(args: Args) -> TensorDictReplayBuffer:
    if args.buffer == "inreplay":
        storage = InreplayStorage(args.capacity, client=connect(args.address), table=args.table)
        storage.drop()  # a fresh table for this run
        sampler = InreplaySampler(args.capacity, alpha=args.alpha, beta=args.beta, eps=args.eps)
    else:
        torchrl_trees.ensure()  # TorchRL's segment trees for this torch (see torchrl_trees)
        storage = LazyTensorStorage(args.capacity)
        sampler = PrioritizedSampler(args.capacity, alpha=args.alpha, beta=args.beta,
                                     eps=args.eps)
    return TensorDictReplayBuffer(storage=storage, sampler=sampler, batch_size=args.batch_size,
                                  priority_key="td_error")


def evaluate(q: QNetwork, episodes: int, seed: int) -> float:
    env = gym.make("CartPole-v1")
    returns = []
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + ep)
        done, total = False, 0.0
        while not done:
            with torch.no_grad():
                action = int(q(torch.as_tensor(obs)).argmax())
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # a 2x128 MLP: one thread is fastest and leaves a core free

    server = None
    if args.buffer == "inreplay" and not args.address:
        server, args.address = start_server()
    try:
        return train(args)
    finally:
        if server is not None:
            server.terminate()
            server.wait(30)


def train(args: Args) -> int:
    env = gym.make("CartPole-v1")
    n_obs, n_actions = env.observation_space.shape[0], int(env.action_space.n)
    q = QNetwork(n_obs, n_actions, args.hidden)
    target = QNetwork(n_obs, n_actions, args.hidden)
    target.load_state_dict(q.state_dict())
    opt = torch.optim.Adam(q.parameters(), lr=args.lr)
    rb = make_buffer(args)

    obs, _ = env.reset(seed=args.seed)
    pending: list[tuple[np.ndarray, int, float, np.ndarray, bool]] = []
    learner_steps, learner_s = 0, 0.0
    evals: list[tuple[int, float]] = []
    episode_return, returns = 0.0, []
    t0 = time.perf_counter()
    for step in range(1, args.total_steps + 1):
        # ---- act -----------------------------------------------------------------
        eps = max(args.eps_end, args.eps_start - (args.eps_start - args.eps_end)
                  * step / (args.eps_fraction * args.total_steps))
        if random.random() < eps:
            action = env.action_space.sample()
        else:
            with torch.no_grad():
                action = int(q(torch.as_tensor(obs)).argmax())
        next_obs, reward, terminated, truncated, _ = env.step(action)
        pending.append((obs, action, float(reward), next_obs, bool(terminated)))
        episode_return += float(reward)
        obs = next_obs
        if terminated or truncated:
            returns.append(episode_return)
            episode_return = 0.0
            obs, _ = env.reset()

        if step % args.train_every:
            continue
        # ---- store the last train_every transitions: one extend ------------------
        o, a, r, o2, d = zip(*pending, strict=True)
        pending.clear()
        rb.extend(TensorDict({
            "observation": torch.as_tensor(np.stack(o), dtype=torch.float32),
            "action": torch.as_tensor(a, dtype=torch.int64),
            "reward": torch.as_tensor(r, dtype=torch.float32),
            "next_observation": torch.as_tensor(np.stack(o2), dtype=torch.float32),
            "terminated": torch.as_tensor(d, dtype=torch.bool),
        }, batch_size=[len(a)]))

        # ---- learn: grad_steps x (one sample, one gradient step, one priority update)
        if step >= args.learning_starts:
            target.load_state_dict(q.state_dict())
            rb.sampler.beta = args.beta + (1.0 - args.beta) * step / args.total_steps
            t = time.perf_counter()
            for _ in range(args.grad_steps):
                batch = rb.sample()
                with torch.no_grad():
                    best = q(batch["next_observation"]).argmax(1, keepdim=True)
                    next_q = target(batch["next_observation"]).gather(1, best).squeeze(1)
                    y = batch["reward"] + args.gamma * next_q * (~batch["terminated"]).float()
                pred = q(batch["observation"]).gather(1, batch["action"][:, None]).squeeze(1)
                loss = (batch["priority_weight"]
                        * F.smooth_l1_loss(pred, y, reduction="none")).mean()
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(q.parameters(), 10.0)
                opt.step()
                batch["td_error"] = (y - pred).detach().abs()
                rb.update_tensordict_priority(batch)
            learner_steps += args.grad_steps
            learner_s += time.perf_counter() - t

        # ---- evaluate ------------------------------------------------------------
        if step % args.eval_every < args.train_every or step == args.total_steps:
            mean = evaluate(q, args.eval_episodes, seed=10_000 + step)
            evals.append((step, mean))
            recent = float(np.mean(returns[-20:])) if returns else 0.0
            print(f"step {step:>7}  eval {mean:6.1f}  train(last 20) {recent:6.1f}  "
                  f"learner {learner_steps / max(learner_s, 1e-9):6.0f} steps/s", flush=True)
            if mean >= args.solve_return:
                break

    wall = time.perf_counter() - t0
    env.close()
    solved = bool(evals) and evals[-1][1] >= args.solve_return
    summary: dict[str, Any] = {
        "buffer": args.buffer, "env_steps": step, "learner_steps": learner_steps,
        "learner_steps_per_s": learner_steps / learner_s if learner_s else 0.0,
        "wall_s": wall, "evals": evals, "solved": solved, "args": asdict(args)}
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(summary, indent=1))
    print(f"buffer: {args.buffer}  env steps: {step}  learner steps: {learner_steps}  "
          f"wall: {wall:.1f} s")
    print(f"learner steps/s: {summary['learner_steps_per_s']:.0f}")
    print(f"solved: {'true' if solved else 'false'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
