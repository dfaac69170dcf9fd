"""A3C through the appliance's parameter tables: the appliance is the parameter server.

    python -m inreplay.actors.a3c [--out DIR] [--minutes M] [--stack auto|kernel|dpdk]
                                  [--FLAG V ...]

(``pyctl demo --algo a3c`` runs this module's main.) Mnih et al. 2016, asynchronous
advantage actor-critic: ``num_workers`` worker processes, each with its own
environments, play ``n_steps`` steps with their copy of the parameters, compute the
actor-critic gradient of those steps (n-step returns bootstrapped from V, an entropy
bonus) and send it with ``PARAM.PUSH``; the appliance applies one optimizer step per
push (``torch.optim``'s Adam or RMSprop, in the table) and the worker pulls the new
parameters with ``PARAM.PULL``. There is no learner process: the workers are the
learners, asynchronous and lock-free as in the paper, and a push computed on
parameters more than ``max_stale`` versions old is refused (bounded staleness).

The demo process creates the table, evaluates its newest parameters like the other
demos (rl.harness: a greedy screen, then ``eval_episodes`` on fresh seeds; a mean of at
least the solve return, 475 for CartPole-v1, is solved), writes DIR/summary.json and
prints ``solved: true`` or ``solved: false`` last.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import redis
import torch
from inreplay.rl.config import (
    DemoSettings,
    Keys,
    Parser,
    add_dataclass_flags,
    appliance_password,
    dataclass_argv,
    dataclass_from_args,
)
from inreplay.rl.harness import Run, SolveRule, add_budget_flags, check_budget_flags, machine
from inreplay.rl.networks import ActorCritic, env_dims, step_reward

from pyctl.errors import NoSuchTableError
from pyctl.params import OPTIMIZERS, ParamClient


@dataclass
class A3CConfig(DemoSettings):
    """A3C (asynchronous advantage actor-critic) on CartPole-v1 through a parameter table."""

    num_workers: int = 2
    """Worker processes (each plays, computes gradients and pushes them)."""
    envs_per_worker: int = 4
    """Environments each worker steps together (one batched forward pass per step)."""
    n_steps: int = 8
    """Steps per environment between two pushes: the n of the n-step returns."""
    hidden: int = 64
    """Width of the two hidden layers of the policy and of the value network."""
    optimizer: str = "adam"
    """The server's optimizer: adam or rmsprop (or any PARAM.CREATE OPTIMIZER)."""
    lr: float = 1e-3
    """The server's learning rate."""
    gamma: float = 0.99
    """Discount."""
    entropy_cost: float = 0.01
    """Weight of the entropy bonus."""
    value_cost: float = 0.5
    """Weight of the value loss 0.5 * (R - V(x))^2."""
    grad_clip: float = 1.0
    """Global gradient-norm clip, sent as the push's SCALE."""
    max_stale: int = 8
    """A push computed on parameters more than this many versions old is refused."""
    table: str = "a3c"
    """Name of the parameter table."""
    prefix: str = "a3c"
    """Prefix of the shared counters (rl.config.Keys)."""
    eval_every_s: float = 3.0
    """Seconds between screens of the newest parameters."""


def connect(cfg: A3CConfig) -> ParamClient:
    return ParamClient(cfg.host, cfg.port, protocol=2, socket_timeout=60,
                       password=appliance_password(), socket_connect_timeout=5)


def build_model(cfg: A3CConfig) -> ActorCritic:
    obs_dim, n_actions = env_dims(cfg.env_id)
    return ActorCritic(obs_dim, n_actions, cfg.hidden)


# ---- the worker ---------------------------------------------------------------------


def n_step_returns(rewards: torch.Tensor, dones: torch.Tensor, bootstrap: torch.Tensor,
                   gamma: float) -> torch.Tensor:
    """R_t = r_t + gamma (1 - done_t) R_{t+1}, R_n = V(x_n): time-major [n, E] inputs."""
    returns = torch.empty_like(rewards)
    acc = bootstrap
    for t in range(rewards.shape[0] - 1, -1, -1):
        acc = rewards[t] + gamma * (1.0 - dones[t]) * acc
        returns[t] = acc
    return returns


def a3c_loss(model: ActorCritic, obs: torch.Tensor, actions: torch.Tensor,
             returns: torch.Tensor, cfg: A3CConfig) -> torch.Tensor:
    """The actor-critic loss of a batch of steps (flattened over time and environments):
    policy gradient with advantage R - V(x), value regression, entropy bonus."""
    logits = model(obs)
    values = model.value(obs)
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, actions[:, None]).squeeze(-1)
    advantages = (returns - values).detach()
    pg_loss = -(logp * advantages).mean()
    value_loss = 0.5 * ((returns - values) ** 2).mean()
    entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
    return pg_loss + cfg.value_cost * value_loss - cfg.entropy_cost * entropy


def run_worker(cfg: A3CConfig, worker_id: int) -> None:
    """Play n_steps, push the gradient, pull the new parameters; forever."""
    import gymnasium as gym

    torch.set_num_threads(1)
    keys = Keys(cfg.prefix)
    pc = connect(cfg)
    model = build_model(cfg)
    flat = pc.bind(model)  # parameters and .grads: views of two flat buffers
    while True:  # the demo creates the table
        try:
            pc.pull_bound(cfg.table, flat, only_newer=False)
            break
        except NoSuchTableError:
            time.sleep(0.1)
    seed = cfg.seed + 1000 * (worker_id + 1)
    rng = np.random.default_rng(seed)
    e, n = cfg.envs_per_worker, cfg.n_steps
    envs = [gym.make(cfg.env_id, max_episode_steps=cfg.max_episode_steps) for _ in range(e)]
    obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]).astype(np.float32)
    ep_ret = np.zeros(e)
    stale = 0
    while True:
        b_obs = np.empty((n, e, obs.shape[1]), np.float32)
        b_act = np.empty((n, e), np.int64)
        b_rew = np.empty((n, e), np.float32)
        b_done = np.empty((n, e), np.float32)
        finished: list[str] = []
        for t in range(n):
            with torch.inference_mode():
                logits = model(torch.from_numpy(obs)).numpy()
            # sample from softmax(logits) with the Gumbel-max trick
            actions = np.argmax(logits - np.log(-np.log(rng.random(logits.shape))), axis=1)
            b_obs[t], b_act[t] = obs, actions
            for i, env in enumerate(envs):
                o, rew, term, trunc, _ = env.step(int(actions[i]))
                ep_ret[i] += rew
                b_rew[t, i] = step_reward(model, cfg.gamma, float(rew), o, term, trunc)
                b_done[t, i] = term or trunc
                if term or trunc:
                    finished.append(f"{time.time():.3f} {worker_id} {ep_ret[i]:g}")
                    ep_ret[i] = 0.0
                    o, _ = env.reset()
                obs[i] = o
        with torch.no_grad():
            bootstrap = model.value(torch.from_numpy(obs))
        returns = n_step_returns(torch.from_numpy(b_rew), torch.from_numpy(b_done), bootstrap,
                                 cfg.gamma)
        flat.grads.zero_()
        a3c_loss(model, torch.from_numpy(b_obs).flatten(0, 1), torch.from_numpy(b_act).flatten(),
                 returns.flatten(), cfg).backward()
        norm = float(flat.grads.norm())
        scale = min(1.0, cfg.grad_clip / (norm + 1e-6))
        try:
            pc.push_bound(cfg.table, flat, scale=scale, base=flat.version,
                          maxstale=cfg.max_stale)
        except redis.ResponseError:
            # refused: stale (the table moved more than max_stale versions past the
            # parameters this gradient was computed on: drop it, as downpour SGD does),
            # or anything else, which ends the worker
            if pc.info(cfg.table)["version"] - flat.version <= cfg.max_stale:
                raise
            stale += 1
        pc.pull_bound(cfg.table, flat)
        pipe = pc.redis.pipeline(transaction=False)
        pipe.incrby(keys.frames, e * n)
        pipe.incrby(keys.transitions, 1)  # gradients computed (pushed or refused as stale)
        if stale:
            pipe.incrby(keys.samples, stale)  # refused as stale
            stale = 0
        if finished:
            pipe.rpush(keys.returns, *finished)
        pipe.execute()


# ---- main: the appliance, the workers, the evaluation -------------------------------


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, A3CConfig]:
    p = Parser(prog="python -m inreplay.actors.a3c", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stack", choices=["auto", "kernel", "dpdk"], default="auto",
                   help="the appliance's network stack (as pyctl demo: auto, kernel, dpdk)")
    add_budget_flags(p, 5.0)
    p.add_argument("--out", default="out/demo-a3c", help="output directory")
    p.add_argument("--algo", choices=["a3c"], default="a3c",
                   help="accepted for pyctl demo --algo a3c (this module is that demo)")
    p.add_argument("--role", choices=["main", "worker"], default="main", help=argparse.SUPPRESS)
    p.add_argument("--worker-id", type=int, default=0, help=argparse.SUPPRESS)
    add_dataclass_flags(p, A3CConfig)
    args = p.parse_args(argv)
    cfg = dataclass_from_args(args, A3CConfig)
    for name in ("num_workers", "envs_per_worker", "n_steps", "hidden", "eval_episodes"):
        if getattr(cfg, name) < 1:
            p.error(f"--{name.replace('_', '-')}: must be >= 1")
    if cfg.optimizer not in OPTIMIZERS:
        p.error(f"--optimizer: choose one of {', '.join(OPTIMIZERS)}")
    if not (cfg.lr > 0 and 0 <= cfg.gamma <= 1 and cfg.grad_clip > 0 and cfg.max_stale >= 0):
        p.error("--lr and --grad-clip must be > 0, --gamma within [0, 1], --max-stale >= 0")
    check_budget_flags(p, args)
    return args, cfg


def child_argv(cfg: A3CConfig, worker_id: int) -> list[str]:
    return [sys.executable, "-m", "inreplay.actors.a3c", "--role", "worker", "--worker-id",
            str(worker_id), *dataclass_argv(cfg)]


def train_and_evaluate(run: Run, cfg: A3CConfig, updates: int) -> dict[str, Any]:
    host, port = run.start_appliance()
    cfg = replace(cfg, host=host, port=port)
    torch.manual_seed(cfg.seed)
    keys = Keys(cfg.prefix)
    pc = connect(cfg)
    pc.redis.delete(*keys.all())
    model = build_model(cfg).eval()
    flat = pc.bind(model)
    pc.create(cfg.table, flat.size, cfg.optimizer, lr=cfg.lr, init=flat.params)
    run.line.say(f"A3C: {cfg.num_workers} workers x {cfg.envs_per_worker} environments, "
                 f"{cfg.n_steps}-step returns, {cfg.optimizer} (lr {cfg.lr:g}) on the "
                 f"appliance's parameter table '{cfg.table}' ({flat.size} parameters)")
    for i in range(cfg.num_workers):
        run.spawn(f"worker {i}", child_argv(cfg, i))
    returns: list[float] = []
    first: tuple[float, int, int] | None = None  # (time, frames, version) when first seen

    def poll() -> dict[str, int]:
        frames, grads, stale = pc.redis.mget(keys.frames, keys.transitions, keys.samples)
        returns.extend(float(x.split()[2]) for x in pc.redis.lrange(keys.returns, len(returns), -1))
        return {"frames": int(frames or 0), "gradients": int(grads or 0),
                "stale": int(stale or 0), "version": int(pc.info(cfg.table)["version"])}

    def status() -> tuple[str, int, int]:
        nonlocal first
        st = poll()
        if first is None and st["frames"]:
            first = (time.monotonic(), st["frames"], st["version"])
        recent = returns[-100:]
        return (f"[{run.elapsed():6.1f}s] workers {st['frames']:>8} steps | pushes "
                f"{st['version']:>6} ({st['stale']} stale) | return(100) "
                f"{np.mean(recent) if recent else float('nan'):6.1f} ({len(returns)} episodes)",
                st["version"], st["version"])  # an update: one gradient applied (a push)

    def pull() -> int:
        pc.pull_bound(cfg.table, flat, only_newer=False)
        return flat.version

    rule = SolveRule.of(cfg)
    play = run.greedy(model, cfg.env_config())
    deadline = run.end - min(20.0, 0.1 * run.budget_s)
    solved = run.solve(rule, play, pull=pull, status=status, deadline=deadline,
                       updates=updates)
    t_stop = time.monotonic()
    run.stop_children()
    st = poll()
    result = run.final(rule, play, pull=pull, solved=solved)
    torch.save({"model": model.state_dict(), "config": asdict(cfg),
                "params_version": result["version"]}, run.out / "evaluated.pt")
    info = pc.info(cfg.table)
    pc.close()
    span = t_stop - first[0] if first else 0.0
    return {
        "algo": "a3c", "env": cfg.env_id, **run.verdict(rule, result),
        "env_steps": st["frames"], "gradients": st["gradients"], "pushes": st["version"],
        "stale_refused": st["stale"],
        "pushes_per_s": round((st["version"] - first[2]) / span, 1) if first and span > 0
        else 0.0,
        "env_steps_per_s": round((st["frames"] - first[1]) / span, 1) if first and span > 0
        else 0.0,
        "episodes": len(returns),
        "return_mean_100": float(np.mean(returns[-100:])) if returns else None,
        "param_table": {k: info.get(k) for k in ("optimizer", "lr", "step", "version", "bytes")},
        "model_parameters": flat.size,
        "evaluations": run.evals,
        "machine": machine(torch=torch.__version__),
        "config": asdict(cfg),
    }


def report(s: dict[str, Any]) -> str:
    return (f"{s['env']} on the {s['stack']} stack: evaluation "
            f"{s['eval_return_mean'] or float('nan'):.1f} over {s['eval_episodes']} episodes "
            f"after {s['pushes']} pushes ({s['pushes_per_s']:.0f}/s, {s['stale_refused']} "
            f"refused as stale) and {s['env_steps']} env steps in {s['wall_s']:.0f} s")


def main(argv: list[str] | None = None) -> int:
    args, cfg = parse(argv)
    if args.role == "worker":
        from inreplay.rl.config import dump_stacks_on_signal

        dump_stacks_on_signal()
        run_worker(cfg, args.worker_id)
        return 0
    torch.set_num_threads(1)
    run = Run("a3c", Path(args.out), args.minutes, args.stack)
    return run.main(lambda r: train_and_evaluate(r, cfg, args.updates), report)


if __name__ == "__main__":
    sys.exit(main())

