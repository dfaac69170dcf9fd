"""Stable-Baselines3 on inreplay (integrations/sb3.py), against real servers: the
transitions SB3's rollout loop writes come back exactly (n_envs 2, optimize_memory_usage,
timeouts), prioritized sampling follows the priorities PrioritizedDQN sends, collector
processes feed one learner's table, SB3's own replay-buffer tests pass on it, and SB3's
DQN learns CartPole-v1 through it, uniform and prioritized."""

from __future__ import annotations

import importlib.util
import itertools
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from helpers import ROOT, checkout_env, free_port, require

GROUP_SEED = "4"
SB3_VERSION = "2.9.2"


require("stable_baselines3", "sb3")
gym = require("gymnasium", "sb3")

from inreplay.integrations.sb3 import (  # noqa: E402
    ZOO_CARTPOLE,
    ApplianceReplayBuffer,
    PrioritizedDQN,
)
from stable_baselines3 import DQN  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.evaluation import evaluate_policy  # noqa: E402
from stable_baselines3.common.logger import Logger  # noqa: E402

_tables = itertools.count()


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Any:
    """One intra-op thread: on a shared 2-core box torch's second thread waits for a core
    (a 256-256 MLP's gradient step took 148 ms with 2 threads under load, 2.6 ms with 1)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _address(srv: Any) -> str:
    return f"{srv.host}:{srv.port}"


def _record(buf: ApplianceReplayBuffer, steps: int, n_envs: int, seed: int,
            max_steps: int = 20) -> list[tuple[bytes, ...]]:
    """SB3's rollout path by hand: a VecEnv of CartPole (episodes cut at max_steps, so
    timeouts happen), random actions, terminal observations swapped in as
    OffPolicyAlgorithm._store_transition does; every transition as SB3's buffer would
    return it (done masked by TimeLimit.truncated)."""
    env = make_vec_env("CartPole-v1", n_envs=n_envs, seed=seed,
                       env_kwargs={"max_episode_steps": max_steps})
    env.action_space.seed(seed)
    obs = env.reset()
    seen: list[tuple[bytes, ...]] = []
    for _ in range(steps):
        action = np.array([env.action_space.sample() for _ in range(n_envs)])
        new_obs, reward, done, infos = env.step(action)
        next_obs = new_obs.copy()
        for i, d in enumerate(done):
            if d:
                next_obs[i] = infos[i]["terminal_observation"]
        buf.add(obs, next_obs, action, reward, done, infos)
        for i in range(n_envs):
            eff = float(done[i]) * (1.0 - float(infos[i].get("TimeLimit.truncated", False)))
            seen.append(_key(obs[i], next_obs[i], action[i], reward[i], eff))
        obs = new_obs
    return seen


def _key(o: Any, no: Any, a: Any, r: Any, d: Any) -> tuple[bytes, ...]:
    return (np.asarray(o, np.float32).tobytes(), np.asarray(no, np.float32).tobytes(),
            np.asarray(a, np.int64).reshape(-1).tobytes(), np.float32(r).tobytes(),
            np.float32(d).tobytes())


@pytest.fixture
def address(replay_members: list[str]) -> str:
    """The session's server, or the first member of a 2-shard replay group of replay_host
    (the buffer then uses the whole group)."""
    return replay_members[0]


@pytest.mark.parametrize("optimize_memory_usage", [False, True])
def test_transitions_come_back_exactly(address: str, optimize_memory_usage: bool) -> None:
    """Every sampled transition is one that was written, byte for byte, terminal
    observations and timeout-masked dones included; the samples cover them all (on a
    standalone server and across a 2-shard replay group)."""
    env = gym.make("CartPole-v1")
    buf = ApplianceReplayBuffer(10_000, env.observation_space, env.action_space, device="cpu",
                                n_envs=2, optimize_memory_usage=optimize_memory_usage,
                                address=address, table="sb3-exact")
    seen = _record(buf, 150, 2, seed=1)
    written = set(seen)
    timeouts = [k for k in seen if k[4] == np.float32(0).tobytes()]
    assert len(timeouts) < len(seen) and any(k[4] == np.float32(1).tobytes() for k in seen)
    # optimize_memory_usage: each env's last step waits for its next observation
    assert buf.size() == len(seen) - (2 if optimize_memory_usage else 0)
    got: set[tuple[bytes, ...]] = set()
    for _ in range(10):
        s = buf.sample(256)
        assert s.observations.shape == (256, 4) and s.actions.shape == (256, 1)
        assert s.dones.shape == (256, 1) and s.rewards.shape == (256, 1)
        for j in range(256):
            k = _key(s.observations[j].numpy(), s.next_observations[j].numpy(),
                     s.actions[j].numpy(), s.rewards[j, 0].item(), s.dones[j, 0].item())
            assert k in written, f"sample {j} was never written: {k}"
            got.add(k)
    assert len(got) >= 0.95 * buf.size()
    assert np.all(buf.last_weights == 1.0)  # uniform
    buf.close()


def test_unsupported_spaces_are_refused_in_one_line() -> None:
    """A Dict observation space (SB3's MultiInputPolicy) or a MultiDiscrete action space:
    one TypeError line naming the space, before anything connects (port 1 is closed)."""
    box = gym.spaces.Box(-1.0, 1.0, (4,))
    cases = [(gym.spaces.Dict({"pos": box}), gym.spaces.Discrete(2),
              "Box or Discrete observation spaces, not Dict (flatten a Dict or Tuple "
              "observation with gymnasium.wrappers.FlattenObservation)"),
             (box, gym.spaces.MultiDiscrete([2, 3]),
              "Box or Discrete action spaces, not MultiDiscrete")]
    for obs_space, act_space, words in cases:
        with pytest.raises(TypeError) as e:
            ApplianceReplayBuffer(100, obs_space, act_space, address="127.0.0.1:1")
        assert str(e.value) == f"ApplianceReplayBuffer takes {words}"
    env = gym.make("CartPole-v1")
    dict_env = gym.wrappers.TransformObservation(
        env, lambda o: {"pos": o}, gym.spaces.Dict({"pos": env.observation_space}))
    with pytest.raises(TypeError, match=r"^ApplianceReplayBuffer takes Box or Discrete "
                                        r"observation spaces, not Dict \(flatten"):
        DQN("MultiInputPolicy", dict_env, device="cpu", replay_buffer_class=ApplianceReplayBuffer,
            replay_buffer_kwargs={"address": "127.0.0.1:1"})


def test_no_server_is_one_line_saying_how_to_start_one() -> None:
    """connect() (every integration's) with nothing listening: one ConnectionError line."""
    port = free_port()  # free: nothing listens there
    with pytest.raises(ConnectionError) as e:
        ApplianceReplayBuffer(100, gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2),
                              address=f"127.0.0.1:{port}")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"inreplay at 127.0.0.1:{port}: ")
    assert msg.endswith(f"start one with `pyctl start --listen 127.0.0.1:{port}`")


def test_prioritized_follows_updates(replay_server: Any) -> None:
    """prioritized=True: a transition given a large TD error is drawn in proportion to
    (|td| + eps)^alpha, and its importance weight is the smallest."""
    env = gym.make("CartPole-v1")
    buf = ApplianceReplayBuffer(1000, env.observation_space, env.action_space, device="cpu",
                                prioritized=True, alpha=1.0, beta=1.0,
                                address=_address(replay_server), table="sb3-per")
    _record(buf, 100, 1, seed=2)
    buf.sample(3000)  # every id, at equal (max) priority
    ids = np.unique(buf.last_ids)
    assert ids.size == 100
    hot = int(ids[37])
    td = np.full(100, 0.01)
    td[ids == hot] = 99 * 0.01 * 3  # 3 times the rest together: p(hot) = 3/4
    assert buf.update_priorities(ids, -td) == 100  # the sign of the TD error is dropped
    buf.sample(4000)
    share = float(np.mean(buf.last_ids == hot))
    assert 0.72 < share < 0.78, share
    w = buf.last_weights
    assert np.isclose(w[buf.last_ids == hot].max(), w.min(), rtol=1e-5) and w.max() == 1.0
    buf.close()


def test_collectors_feed_one_learner(inreplay_server: Any) -> None:
    """Two SB3 collector processes (python -m inreplay.integrations.sb3 collect) fill the table
    the learner made; the learner's DQN samples and trains on all of it."""
    address, table = _address(inreplay_server), "sb3-shared"
    model = PrioritizedDQN("MlpPolicy", "CartPole-v1", buffer_size=10_000, batch_size=32,
                           seed=0, device="cpu", replay_buffer_class=ApplianceReplayBuffer,
                           replay_buffer_kwargs={"address": address, "table": table,
                                                 "prioritized": True})
    env = checkout_env()
    procs = [subprocess.Popen([sys.executable, "-m", "inreplay.integrations.sb3", "collect",
                               "--address", address, "--table", table, "--steps", "300",
                               "--seed", str(k)], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in (1, 2)]
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-3000:]
        assert f"collected 300 steps into {table}" in out
    buf = model.replay_buffer
    assert isinstance(buf, ApplianceReplayBuffer)
    assert buf.size() == 600
    model.set_logger(Logger(None, []))  # train() outside learn() records to nothing
    model.train(gradient_steps=20, batch_size=32)
    info = buf.client.info(table)
    assert info["samples"] == 20 * 32 and info["updates"] == 20 * 32
    buf.client.close()


def _sb3_tests(cache: Path) -> ModuleType:
    """SB3's own tests/test_buffers.py, from its source distribution (pip download)."""
    src = cache / f"stable_baselines3-{SB3_VERSION}" / "tests" / "test_buffers.py"
    if not src.exists():
        cache.mkdir(parents=True, exist_ok=True)
        dl = subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:",
                             "--no-deps", "-d", str(cache), f"stable-baselines3=={SB3_VERSION}"],
                            capture_output=True, text=True, timeout=300)
        if dl.returncode:
            pytest.fail(f"could not download SB3's sdist for its tests:\n{dl.stderr[-2000:]}")
        import tarfile

        with tarfile.open(cache / f"stable_baselines3-{SB3_VERSION}.tar.gz") as tar:
            tar.extractall(cache, members=[m for m in tar.getmembers()
                                           if m.name.endswith("tests/test_buffers.py")],
                           filter="data")
    spec = importlib.util.spec_from_file_location("sb3_upstream_test_buffers", src)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("case", ["test_replay_buffer_normalization",
                                  "test_device_buffer-cpu", "test_device_buffer-auto"])
def test_sb3_own_buffer_tests(replay_server: Any, case: str) -> None:
    """SB3 2.9.2's tests/test_buffers.py cases for ReplayBuffer, with ReplayBuffer bound to
    ApplianceReplayBuffer on this server (test_buffer_dtypes reads the local arrays
    ReplayBuffer allocates, which this buffer does not have: not run)."""
    mod = _sb3_tests(ROOT / "build" / "sb3-sdist")
    address = _address(replay_server)

    class Bound(ApplianceReplayBuffer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, address=address, table=f"sb3-up-{next(_tables)}", **kwargs)

    mod.ReplayBuffer = Bound
    name, _, device = case.partition("-")
    if device:
        getattr(mod, name)(Bound, device)
    else:
        getattr(mod, name)(Bound)


HYPER = ZOO_CARTPOLE
THRESHOLD = 150.0  # mean greedy return over 10 episodes (a random policy gets about 22)


@pytest.mark.slow
@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
def test_dqn_learns_cartpole(inreplay_server: Any, prioritized: bool) -> None:
    """SB3's DQN (PrioritizedDQN when prioritized) on CartPole-v1 with its replay on the
    appliance reaches a mean greedy return of THRESHOLD within 40k env steps."""
    cls = PrioritizedDQN if prioritized else DQN
    model = cls("MlpPolicy", "CartPole-v1", seed=0, device="cpu", **HYPER,
                replay_buffer_class=ApplianceReplayBuffer,
                replay_buffer_kwargs={"address": _address(inreplay_server),
                                      "table": "sb3-dqn", "prioritized": prioritized})
    t0, history = time.monotonic(), []
    eval_env = gym.make("CartPole-v1")
    while model.num_timesteps < 40_000:
        model.learn(5120, reset_num_timesteps=False)
        mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=10, deterministic=True)
        history.append((model.num_timesteps, round(float(mean), 1)))
        if mean >= THRESHOLD:
            break
    print(f"{cls.__name__} prioritized={prioritized}: {history} in "
          f"{time.monotonic() - t0:.0f}s")
    assert history[-1][1] >= THRESHOLD, history
    buf = model.replay_buffer
    assert isinstance(buf, ApplianceReplayBuffer)
    info = buf.client.info("sb3-dqn")
    assert info["size"] == model.num_timesteps
    assert (info["updates"] > 0) == prioritized
    buf.client.close()
