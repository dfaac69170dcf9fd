"""python -m inreplay.integrations.jax_dqn: a DQN in plain JAX + optax on CartPole-v1, replay on
inreplay, batches sampled as jax.Arrays (``ReplayClient.sample(..., jax=True)``).

    python -m inreplay.integrations.jax_dqn --address 127.0.0.1:6379 --steps 30000

``train`` takes a ReplayClient (or an ``ApplianceBuffer``) or a ``RingBuffer``: the same
loop on NumPy arrays in this process, the local buffer ``make bench`` compares it with.

The loop is rl-baselines3-zoo's CartPole DQN: 256 env steps (ε-greedy, ε from 1 to 0.04
over the first 16%), sent as one REPLAY.ADD, then 128 gradient steps on batches of 64
sampled uniformly from the appliance, the target network copied before each round of
gradient steps; Huber loss, Adam (lr 2.3e-3), gradients clipped at norm 10, an MLP of
256-256. Every ``eval_every`` steps 10 greedy episodes are played; ``train`` returns the
(steps, mean return) history, stopping early once a mean reaches ``stop_at``.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import optax

from pyctl.client import ReplayClient, Schema

Params = list[tuple[jax.Array, jax.Array]]


def init_mlp(key: jax.Array, sizes: list[int]) -> Params:
    params = []
    for n_in, n_out in itertools.pairwise(sizes):
        key, sub = jax.random.split(key)
        w = jax.random.normal(sub, (n_in, n_out)) * jnp.sqrt(2.0 / n_in)
        params.append((w, jnp.zeros(n_out)))
    return params


def q_values(params: Params, obs: jax.Array) -> jax.Array:
    x = obs
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def make_update(opt: optax.GradientTransformation, gamma: float) -> Callable[..., Any]:
    def loss_fn(params: Params, target: Params, batch: dict[str, jax.Array]) -> jax.Array:
        next_q = q_values(target, batch["next_obs"]).max(axis=1)
        y = batch["reward"] + gamma * (1.0 - batch["done"]) * next_q
        q = jnp.take_along_axis(q_values(params, batch["obs"]),
                                batch["action"][:, None].astype(jnp.int32), axis=1)[:, 0]
        return optax.huber_loss(q, jax.lax.stop_gradient(y)).mean()

    @jax.jit
    def update(params: Params, target: Params, opt_state: Any,
               batch: dict[str, jax.Array]) -> tuple[Params, Any, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(params, target, batch)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return update


SCHEMA = Schema({"obs": ((4,), np.float32), "next_obs": ((4,), np.float32),
                 "action": ((), np.int32), "reward": ((), np.float32),
                 "done": ((), np.float32)})


def evaluate(params: Params, episodes: int, seed: int) -> float:
    env = gym.make("CartPole-v1")
    greedy = jax.jit(lambda p, o: jnp.argmax(q_values(p, o)))
    total = 0.0
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + ep)
        done = False
        while not done:
            obs, r, term, trunc, _ = env.step(int(greedy(params, jnp.asarray(obs))))
            total += float(r)
            done = term or trunc
    return total / episodes


class ApplianceBuffer:
    """Replay in an appliance table (made here, uniform); batches as jax.Arrays through
    ``sample(..., jax=True)``."""

    def __init__(self, client: ReplayClient, table: str = "jax-dqn",
                 capacity: int = 100_000) -> None:
        self.client, self.table = client, table
        client.create(table, capacity, sampler="uniform")

    def add(self, rows: dict[str, np.ndarray]) -> None:
        self.client.add(self.table, None, rows, schema=SCHEMA)

    def sample(self, n: int) -> dict[str, jax.Array]:
        return self.client.sample(self.table, n, schema=SCHEMA, jax=True).items


class RingBuffer:
    """The same replay in this process: NumPy arrays as a ring, uniform indices, the batch
    handed to JAX with jnp.asarray (what a local buffer in a JAX loop does)."""

    def __init__(self, capacity: int = 100_000, seed: int = 0) -> None:
        self.data = {k: np.zeros((capacity, *f.shape), f.dtype)
                     for k, f in SCHEMA.fields.items()}
        self.capacity, self.pos, self.size = capacity, 0, 0
        self.rng = np.random.default_rng(seed)

    def add(self, rows: dict[str, np.ndarray]) -> None:
        n = len(rows["reward"])
        at = (self.pos + np.arange(n)) % self.capacity
        for k, v in rows.items():
            self.data[k][at] = v
        self.pos, self.size = (self.pos + n) % self.capacity, min(self.size + n, self.capacity)

    def sample(self, n: int) -> dict[str, jax.Array]:
        idx = self.rng.integers(0, self.size, n)
        return {k: jnp.asarray(v[idx]) for k, v in self.data.items()}


Buffer = ApplianceBuffer | RingBuffer


def train(replay: ReplayClient | Buffer, table: str = "jax-dqn", steps: int = 30_000,
          seed: int = 0, eval_every: int = 5120, stop_at: float | None = None,
          timings: dict[str, float] | None = None) -> list[tuple[int, float]]:
    """Train on CartPole-v1 with replay in ``table`` (a ReplayClient: made here, uniform)
    or in a Buffer; returns the evaluation history [(env steps, mean greedy return of 10
    episodes)]. ``timings``, when given, gets ``learner_steps`` and ``learner_seconds``
    (the gradient-step rounds, sampling included, until their results are ready; not the
    first round, which compiles the update)."""
    buf = replay if isinstance(replay, ApplianceBuffer | RingBuffer) else \
        ApplianceBuffer(replay, table)
    key = jax.random.PRNGKey(seed)
    params = init_mlp(key, [4, 256, 256, 2])
    opt = optax.chain(optax.clip_by_global_norm(10.0), optax.adam(2.3e-3))
    opt_state = opt.init(params)
    update = make_update(opt, 0.99)
    greedy = jax.jit(lambda p, o: jnp.argmax(q_values(p, o)))
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    history: list[tuple[int, float]] = []
    t, rollout, explore = 0, 256, int(0.16 * steps)
    learner_steps, learner_s, compiled = 0, 0.0, False
    while t < steps:
        rows: dict[str, list[Any]] = {k: [] for k in SCHEMA.fields}
        for _ in range(rollout):
            eps = max(0.04, 1.0 - t / explore * 0.96)
            a = int(rng.integers(2)) if rng.random() < eps else \
                int(greedy(params, jnp.asarray(obs)))
            nxt, r, term, trunc, _ = env.step(a)
            for k, v in (("obs", obs), ("next_obs", nxt), ("action", a), ("reward", r),
                         ("done", float(term))):  # a timeout is not a termination
                rows[k].append(v)
            obs = nxt
            if term or trunc:
                obs, _ = env.reset()
            t += 1
            if t % eval_every == 0:
                history.append((t, evaluate(params, 10, seed=10_000 + t)))
        buf.add({k: np.asarray(v) for k, v in rows.items()})
        if history and stop_at is not None and history[-1][1] >= stop_at:
            break
        if t >= 1000:
            target = params
            t0 = time.perf_counter()
            for _ in range(128):
                params, opt_state, _ = update(params, target, opt_state, buf.sample(64))
            jax.block_until_ready(params)
            if compiled:
                learner_s += time.perf_counter() - t0
                learner_steps += 128
            compiled = True
    if timings is not None:
        timings.update(learner_steps=learner_steps, learner_seconds=learner_s)
    return history


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m inreplay.integrations.jax_dqn")
    p.add_argument("--address", default="127.0.0.1:6379")
    p.add_argument("--table", default="jax-dqn")
    p.add_argument("--steps", type=int, default=30_000)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    host, _, port = a.address.rpartition(":")
    t0 = time.monotonic()
    with ReplayClient(host, int(port)) as rc:
        hist = train(rc, a.table, a.steps, a.seed)
    for steps, ret in hist:
        print(f"{steps:>7} steps  mean greedy return {ret:.1f}")
    print(f"{time.monotonic() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
