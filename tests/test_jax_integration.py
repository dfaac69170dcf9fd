"""Samples as jax.Array (sample(..., jax=True), pyctl/_jax.py) against real servers: a
standalone one and a 2-shard replay group, plain and TRAJECTORY tables; and a DQN in plain
JAX + optax (integrations/jax_dqn.py) that learns CartPole-v1 through the appliance."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from helpers import require

from pyctl.client import ReplayClient, Schema
from pyctl.sharded import ShardedReplayClient
from pyctl.trajectory import TrajectoryWriter, create_trajectory_table, sample_trajectories

jax = require("jax", "jax")
require("optax", "jax")
import jax.numpy as jnp  # noqa: E402

SCHEMA = Schema({"obs": ((3,), np.float32), "k": ((), np.int32), "flag": ((), np.bool_)})


def _rows(k0: int, n: int) -> dict[str, np.ndarray]:
    k = np.arange(k0, k0 + n, dtype=np.int32)
    return {"obs": np.stack([k, 2 * k, 3 * k], axis=1).astype(np.float32) + 0.5, "k": k,
            "flag": k % 2 == 0}


def _check_batch(items: Any, weights: Any, n: int) -> None:
    assert isinstance(weights, jax.Array) and weights.dtype == jnp.float32
    assert weights.shape == (n,)
    for name in ("obs", "k", "flag"):
        assert isinstance(items[name], jax.Array), name
    assert items["obs"].shape == (n, 3) and items["obs"].dtype == jnp.float32
    assert items["k"].dtype == jnp.int32 and items["flag"].dtype == jnp.bool_
    k = np.asarray(items["k"])
    np.testing.assert_array_equal(np.asarray(items["obs"]),
                                  np.stack([k, 2 * k, 3 * k], axis=1) + 0.5)
    np.testing.assert_array_equal(np.asarray(items["flag"]), k % 2 == 0)


GROUP_SEED = "5"


@pytest.fixture
def client(replay_members: list[str]) -> Iterator[ReplayClient | ShardedReplayClient]:
    """A ReplayClient on the session's server, or a ShardedReplayClient on a 2-shard group
    of replay_host (conftest's replay_members)."""
    if len(replay_members) == 1:
        host, port = replay_members[0].rsplit(":", 1)
        with ReplayClient(host, int(port)) as rc:
            yield rc
        return
    with ShardedReplayClient(replay_members) as rc:
        yield rc


def test_sample_jax_schema_and_item_shape(client: ReplayClient | ShardedReplayClient) -> None:
    """jax=True: weights and every field as jax.Arrays holding the sampled items (the
    fields agree with each other row by row); ids stay NumPy int64."""
    client.create("j", 1000, alpha=1.0, beta=0.5)
    client.add("j", np.arange(1, 201, dtype=np.float64), _rows(0, 200), schema=SCHEMA)
    s = client.sample("j", 256, schema=SCHEMA, jax=True)
    assert isinstance(s.ids, np.ndarray) and s.ids.dtype == np.int64
    _check_batch(s.items, s.weights, 256)
    # the weights are the same numbers NumPy would have had
    p = np.asarray(s.items["k"], np.float64) + 1.0
    w = (p.min() / p) ** 0.5
    np.testing.assert_allclose(np.asarray(s.weights) / np.asarray(s.weights).max(),
                               w / w.max(), rtol=1e-5)
    # one array per item row: item_shape
    client.create("raw", 100, sampler="uniform")
    rows = np.arange(50 * 6, dtype=np.float32).reshape(50, 6)
    client.add("raw", None, rows)
    r = client.sample("raw", 64, item_shape=(6,), item_dtype=np.float32, jax=True)
    assert isinstance(r.items, jax.Array) and r.items.shape == (64, 6)
    got = np.asarray(r.items)
    np.testing.assert_array_equal(got, rows[(got[:, 0] // 6).astype(int)])
    with pytest.raises(ValueError, match="torch=True or jax=True"):
        client.sample("raw", 4, item_shape=(6,), item_dtype=np.float32, jax=True, torch=True)
    with pytest.raises(ValueError, match="packed items"):
        client.sample("raw", 4, jax=True)


def test_sample_trajectories_jax(client: ReplayClient | ShardedReplayClient) -> None:
    """The trajectory sampler with jax=True: each column one jax.Array (n, length, ...)."""
    sig = {"obs": ((2,), np.float32), "t": ((), np.int32)}
    create_trajectory_table(client, "traj", 100, sampler="uniform")
    writers = ([client.trajectory_writer(f"w{k}", sig, shard=k) for k in range(2)]
               if isinstance(client, ShardedReplayClient)
               else [TrajectoryWriter(client, "w0", sig)])
    for w in writers:
        for t in range(10):
            w.append({"obs": np.array([t, -t], np.float32), "t": np.int32(t)})
            if t >= 2:
                w.create_item("traj", 1.0, {"obs": w.history["obs"][t - 2:t + 1],
                                            "t": w.history["t"][t - 2:t + 1]})
        w.flush()
    s = sample_trajectories(client, "traj", 32, jax=True)
    assert isinstance(s.ids, np.ndarray)
    assert isinstance(s.weights, jax.Array) and s.weights.shape == (32,)
    obs, t = s.columns["obs"], s.columns["t"]
    assert isinstance(obs, jax.Array) and obs.shape == (32, 3, 2)
    assert isinstance(t, jax.Array) and t.shape == (32, 3) and t.dtype == jnp.int32
    tn = np.asarray(t)
    np.testing.assert_array_equal(tn[:, 1:] - tn[:, :-1], 1)  # 3 consecutive steps
    np.testing.assert_array_equal(np.asarray(obs)[..., 0], tn)
    np.testing.assert_array_equal(np.asarray(obs)[..., 1], -tn)


@pytest.mark.slow
def test_jax_dqn_learns_cartpole(inreplay_server: Any) -> None:
    """integrations.jax_dqn (plain JAX + optax, batches sampled with jax=True) reaches a
    mean greedy return of 150 on CartPole-v1 within 40k env steps (random: about 22)."""
    from inreplay.integrations.jax_dqn import train

    t0 = time.monotonic()
    with ReplayClient(inreplay_server.host, inreplay_server.port) as rc:
        history = train(rc, steps=40_000, seed=0, eval_every=2560, stop_at=150.0)
        info = rc.info("jax-dqn")
    print(f"jax DQN: {history} in {time.monotonic() - t0:.0f}s")
    assert history and history[-1][1] >= 150.0, history
    assert info["samples"] > 0 and info["size"] == history[-1][0]  # every step, once
