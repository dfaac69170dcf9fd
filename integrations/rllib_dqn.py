"""python -m inreplay.integrations.rllib_dqn: RLlib DQN on CartPole-v1, replay on inreplay
or local.

    python -m inreplay.integrations.rllib_dqn                   # a private appliance, started here
    python -m inreplay.integrations.rllib_dqn --address 10.0.0.5:6379 --env-runners 4
    python -m inreplay.integrations.rllib_dqn --buffer local    # RLlib's own prioritized buffer

Ray's new API stack: the env runners (Ray actors) step CartPole and return episodes to
this process, which adds them to the buffer, samples prioritized batches for the
learner and sends back its TD errors as priorities (see integrations/rllib.py for
what that means for data movement). Both buffers get the same DQN settings (n-step 3,
double and dueling Q, alpha 0.6, beta 0.4).

Every ``--eval-every`` iterations (of 1000 env steps) whose exploring return passed 300,
the greedy policy plays ``--eval-episodes`` games here (stopping at the first below 475);
a mean of 475 or more (CartPole-v1's threshold) is solved and ends the run. Otherwise it
runs until ``--max-env-steps`` or ``--minutes``. Prints progress lines, then learner
steps/s (learner updates per second of training time) and ``solved: true|false`` last;
``--json`` adds one JSON line with the numbers before them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SOLVED_RETURN = 475.0
"""CartPole-v1's reward threshold (gymnasium's spec)."""
BUFFER_TYPE = "integrations.rllib.InreplayEpisodeReplayBuffer"
EVAL_FROM = 300.0
"""Exploring mean return from which the greedy policy is evaluated."""


@contextlib.contextmanager
def private_server() -> Iterator[str]:
    """A kernel-stack appliance on a free local port for this run; its HOST:PORT."""
    run = tempfile.mkdtemp(prefix="inreplay-rllib-")
    env = dict(os.environ, INREPLAY_RUN_DIR=run, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    out = subprocess.run([sys.executable, "-m", "pyctl", "start", "--listen", "127.0.0.1:0",
                          "--daemon"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=60)
    if out.returncode != 0:
        raise SystemExit(f"rllib_dqn: pyctl start failed: {out.stderr.strip()}")
    line = next(ln for ln in out.stdout.splitlines() if "listening on" in ln)
    address = line.split("listening on ", 1)[1].split()[0]
    try:
        yield address
    finally:
        subprocess.run([sys.executable, "-m", "pyctl", "stop", "--all"], cwd=ROOT, env=env,
                       capture_output=True, timeout=60)


@dataclass
class Result:
    buffer: str
    solved: bool
    iterations: int
    env_steps: int
    learner_steps: int
    train_seconds: float
    learner_steps_per_s: float
    episode_return_mean: float | None
    greedy_return: float | None
    replay_seconds: dict[str, float]
    """Time the algorithm spent in the buffer's add, sample and update (RLlib's timers)."""


def build_config(buffer: str, address: str | None, env_runners: int, seed: int,
                 capacity: int, table: str) -> Any:
    from ray.rllib.algorithms.dqn import DQNConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    n_step = 3
    rb: dict[str, Any] = {"capacity": capacity, "alpha": 0.6, "beta": 0.4}
    if buffer == "inreplay":
        rb.update(type=BUFFER_TYPE, address=address, table=table, n_step=n_step,
                  if_exists="drop")
    else:
        rb["type"] = "PrioritizedEpisodeReplayBuffer"
    return (
        DQNConfig()
        .environment("CartPole-v1")
        .framework("torch")
        .env_runners(num_env_runners=env_runners, num_cpus_per_env_runner=0.5)
        .learners(num_learners=0)
        .debugging(seed=seed, log_level="ERROR")
        .reporting(min_sample_timesteps_per_iteration=1000)
        .training(lr=5e-4, train_batch_size_per_learner=32, n_step=n_step, double_q=True,
                  dueling=True, num_steps_sampled_before_learning_starts=1000,
                  epsilon=[(0, 1.0), (10_000, 0.02)], target_network_update_freq=500,
                  replay_buffer_config=rb)
        .rl_module(model_config=DefaultModelConfig(
            fcnet_hiddens=[256], fcnet_activation="tanh", head_fcnet_hiddens=[256],
            head_fcnet_activation="tanh"))
    )


def greedy_return(algo: Any, episodes: int, seed: int) -> float:
    """Mean return of the greedy policy over full CartPole-v1 games, played here; stops
    after the first game below the solved return (then that mean cannot reach it)."""
    import gymnasium as gym
    import numpy as np
    import torch

    module = algo.get_module()
    env = gym.make("CartPole-v1")
    returns: list[float] = []
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + ep)
        done = False
        total = 0.0
        while not done:
            with torch.no_grad():
                out = module.forward_inference(
                    {"obs": torch.from_numpy(np.asarray(obs, dtype=np.float32)[None])})
            obs, r, term, trunc, _ = env.step(int(out["actions"][0]))
            total += float(r)
            done = term or trunc
        returns.append(total)
        if total < SOLVED_RETURN:
            break
    env.close()
    return sum(returns) / len(returns)


def _get(d: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def run(buffer: str, *, address: str | None = None, env_runners: int = 2, seed: int = 0,
        max_env_steps: int = 100_000, minutes: float = 30.0, eval_every: int = 2,
        eval_episodes: int = 10, capacity: int = 50_000, table: str = "rllib-dqn",
        quiet: bool = False, init_ray: bool = True, evaluate: bool = True) -> Result:
    """One training run; Ray is started (locally) and stopped here unless init_ray is
    False (then the caller's Ray instance is used). evaluate False: no greedy games (a
    fixed amount of work, for benchmarks)."""
    import ray

    if init_ray:
        ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False,
                 runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    algo = build_config(buffer, address, env_runners, seed, capacity, table).build_algo()
    try:
        t_train = 0.0
        solved = False
        it = env_steps = learner_steps = 0
        ret_mean = greedy = None
        timers: dict[str, float] = {}
        deadline = time.monotonic() + 60 * minutes
        while env_steps < max_env_steps and time.monotonic() < deadline:
            t0 = time.perf_counter()
            res = algo.train()
            t_train += time.perf_counter() - t0
            it += 1
            env_steps = int(_get(res, "env_runners", "num_env_steps_sampled_lifetime") or 0)
            trained = _get(res, "learners", "__all_modules__", "num_env_steps_trained_lifetime")
            learner_steps = int(trained or 0) // 32
            ret_mean = _get(res, "env_runners", "episode_return_mean")
            for name in ("replay_buffer_add_data_timer", "replay_buffer_sampling_timer",
                         "replay_buffer_update_prios_timer", "learner_update_timer"):
                v = _get(res, "timers", name)
                if v is not None:
                    timers[name] = float(v)
            if not quiet:
                print(f"iter {it}: env steps {env_steps}, learner steps {learner_steps}, "
                      f"return {ret_mean if ret_mean is None else round(ret_mean, 1)}, "
                      f"{learner_steps / max(t_train, 1e-9):.0f} learner steps/s", flush=True)
            if evaluate and ret_mean is not None and ret_mean >= EVAL_FROM \
                    and it % eval_every == 0:
                greedy = greedy_return(algo, eval_episodes, seed=10_000 + it)
                if not quiet:
                    print(f"iter {it}: greedy return {greedy:.1f}", flush=True)
                if greedy >= SOLVED_RETURN:
                    solved = True
                    break
        return Result(buffer, solved, it, env_steps, learner_steps, round(t_train, 2),
                      round(learner_steps / max(t_train, 1e-9), 1), ret_mean, greedy,
                      {k: round(v, 6) for k, v in timers.items()})
    finally:
        algo.stop()
        if init_ray:
            ray.shutdown()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m inreplay.integrations.rllib_dqn",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--buffer", choices=["inreplay", "local"], default="inreplay",
                   help="where the replay lives (default inreplay)")
    p.add_argument("--address", help="HOST:PORT of an appliance or replay-group member "
                   "(default: start a private one for this run)")
    p.add_argument("--table", default="rllib-dqn", help="replay table (dropped if present)")
    p.add_argument("--env-runners", type=int, default=2, help="Ray env runners (default 2)")
    p.add_argument("--max-env-steps", type=int, default=100_000)
    p.add_argument("--minutes", type=float, default=30.0, help="wall-clock limit")
    p.add_argument("--eval-every", type=int, default=2, help="iterations between greedy "
                   "evaluations, once the exploring return reaches 300 (default 2)")
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the result as one JSON line")
    a = p.parse_args(argv)
    if a.env_runners < 0 or a.max_env_steps <= 0 or a.minutes <= 0:
        p.error("--env-runners must be >= 0, --max-env-steps and --minutes > 0")
    with contextlib.ExitStack() as stack:
        address = a.address
        if a.buffer == "inreplay" and address is None:
            address = stack.enter_context(private_server())
        r = run(a.buffer, address=address, env_runners=a.env_runners, seed=a.seed,
                max_env_steps=a.max_env_steps, minutes=a.minutes, eval_every=a.eval_every,
                eval_episodes=a.eval_episodes, table=a.table)
    if a.json:
        print(json.dumps(asdict(r)))
    print(f"buffer {r.buffer}: {r.learner_steps} learner steps in {r.train_seconds:.1f} s of "
          f"training, {r.learner_steps_per_s:.1f} learner steps/s, {r.env_steps} env steps")
    print(f"solved: {'true' if r.solved else 'false'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
