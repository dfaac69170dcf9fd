"""IMPALA's configuration, shared by its actor (actors.impala), its learner
(learner.impala) and its demo (actors.impala_demo): the settings, the unroll's schema
on the QUEUE table, the connection and the command line of every process."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np
import redis
from inreplay.rl.config import (
    DemoSettings,
    Parser,
    add_dataclass_flags,
    appliance_password,
    dataclass_argv,
    dataclass_from_args,
)

from pyctl.client import Schema, connect


@dataclass
class ImpalaConfig(DemoSettings):
    """IMPALA (V-trace actor-critic) on CartPole-v1 through a QUEUE table."""

    num_actors: int = 2
    """Actor processes."""
    envs_per_actor: int = 8
    """Environments each actor steps together (one batched forward pass per step)."""
    unroll: int = 20
    """Steps per unroll (T): an item holds T+1 observations and T of everything else."""
    queue_size: int = 64
    """Capacity of the QUEUE table in unrolls; an actor's add waits while it is full."""
    batch_size: int = 16
    """Unrolls per learner step (each consumed once)."""
    hidden: int = 64
    """Width of the two hidden layers of the policy and of the value network."""
    lr: float = 5e-4
    """Adam learning rate."""
    gamma: float = 0.99
    """Discount."""
    entropy_cost: float = 0.01
    """Weight of the entropy bonus."""
    baseline_cost: float = 0.5
    """Weight of the value loss 0.5 * (v_s - V(x_s))^2."""
    grad_clip: float = 40.0
    """Global gradient-norm clip."""
    rho_bar: float = 1.0
    """V-trace truncation of the importance weights in the targets and the advantages."""
    c_bar: float = 1.0
    """V-trace truncation of the trace coefficients."""
    table: str = "impala"
    """Name of the QUEUE table."""
    prefix: str = "impala"
    """Prefix of the shared keys and of the parameter channel (rl.config.Keys)."""
    sample_timeout_s: float = 1.0
    """How long one add or sample may wait on the queue before the loop looks again."""


def schema_for(cfg: ImpalaConfig, obs_dim: int, n_actions: int) -> Schema:
    """One item = one unroll of T steps (plus the bootstrap observation)."""
    t = cfg.unroll
    return Schema({"obs": ((t + 1, obs_dim), np.float32), "action": ((t,), np.int64),
                   "reward": ((t,), np.float32), "done": ((t,), np.bool_),
                   "logits": ((t, n_actions), np.float32)})


def redis_for(cfg: ImpalaConfig) -> redis.Redis:
    return connect(host=cfg.host, port=cfg.port, protocol=2, socket_timeout=60,
                   password=appliance_password(), socket_connect_timeout=5)


def parse(argv: list[str] | None, description: str | None = None,
          ) -> tuple[argparse.Namespace, ImpalaConfig]:
    """The demo's flags (and, hidden, a child's role); a usage error is one line, status 2."""
    from inreplay.rl.harness import add_budget_flags, check_budget_flags

    p = Parser(prog="python -m inreplay.actors.impala", description=description,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stack", choices=["auto", "kernel", "dpdk"], default="auto",
                   help="the appliance's network stack (as pyctl demo: auto, kernel, dpdk)")
    add_budget_flags(p, 5.0)
    p.add_argument("--out", default="out/demo-impala", help="output directory")
    p.add_argument("--algo", choices=["impala"], default="impala",
                   help="accepted for pyctl demo --algo impala (this module is that demo)")
    p.add_argument("--role", choices=["main", "actor", "learner"], default="main",
                   help=argparse.SUPPRESS)
    p.add_argument("--actor-id", type=int, default=0, help=argparse.SUPPRESS)
    add_dataclass_flags(p, ImpalaConfig)
    args = p.parse_args(argv)
    cfg = dataclass_from_args(args, ImpalaConfig)
    for name in ("num_actors", "envs_per_actor", "unroll", "queue_size", "batch_size",
                 "hidden"):
        if getattr(cfg, name) < 1:
            p.error(f"--{name.replace('_', '-')}: must be >= 1")
    if cfg.batch_size > cfg.queue_size or cfg.envs_per_actor > cfg.queue_size:
        p.error("--queue-size: must hold at least --batch-size and --envs-per-actor unrolls")
    if not (cfg.lr > 0 and 0 <= cfg.gamma <= 1 and cfg.rho_bar > 0 and cfg.c_bar > 0):
        p.error("--lr, --rho-bar and --c-bar must be > 0 and --gamma within [0, 1]")
    check_budget_flags(p, args)
    return args, cfg


def child_argv(cfg: ImpalaConfig, role: str, actor_id: int = 0) -> list[str]:
    """The command line of the learner (learner.impala) or of actor actor_id."""
    if role == "learner":
        return [sys.executable, "-m", "inreplay.learner.impala", "--role", "learner",
                *dataclass_argv(cfg)]
    return [sys.executable, "-m", "inreplay.actors.impala", "--role", "actor", "--actor-id",
            str(actor_id), *dataclass_argv(cfg)]
