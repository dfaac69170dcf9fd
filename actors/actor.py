"""An Ape-X actor: act epsilon-greedily, build n-step transitions, insert them with
priorities, pull parameters when the learner publishes new ones.

    python -m actors.actor --actor-id 0 --env CartPole-v1 --port 6379 [--config FILE.json]

Each flush of ``actor_batch`` transitions is

1. one ``REPLAY.ADD table p1 item1 p2 item2 ...`` (or, with ``--replay local``, one
   ``RPUSH <prefix>:experience`` of priority-prefixed records to a stock Redis), and
2. one pipelined round trip: ``INCRBY <prefix>:frames``, ``INCRBY <prefix>:transitions``,
   ``RPUSH <prefix>:returns`` (finished episodes), ``MGET <prefix>:params:version
   <prefix>:learner:samples <prefix>:stop``;
3. ``MGET <prefix>:params <prefix>:params:version`` only when the version changed
   (the learner MSETs both at once, so the pair is consistent).

Priorities are the actor's own |TD error| (see actors.nstep), computed from the
Q-values it already has from acting: Q(s_t) when it acted at t and Q(s_{t+k})
when it acts at t+k, so they cost no extra forward pass (except one at a
time-limit truncation, whose last observation is never acted on).

Returned episodes are "unix_time actor_id return env_frames" strings.
"""

from __future__ import annotations

import argparse
import os
import signal
import struct
import sys
import threading
import time
from typing import Any

import numpy as np
import redis
import torch

from actors.codec import TransitionCodec, capacity_warning, stored_bytes
from actors.config import Config, Keys, add_arguments, from_args
from actors.env import EnvSpec, env_spec, lives, make_env
from actors.model import BlobError, build_model, load_blob
from actors.nstep import NStep, Transition, td_priorities
from pyctl.client import ReplayClient

PRIORITY = struct.Struct("<f")
"""--replay local: each list element is a float32 priority, then the record."""


def epsilon_ladder(i: int, n: int, base: float = 0.4, alpha: float = 7.0) -> float:
    """Ape-X: actor i of n explores with base ** (1 + alpha * i / (n - 1)); n = 1: base."""
    if not 0 <= i < n:
        raise ValueError(f"actor index {i} not in [0, {n})")
    if n == 1:
        return base
    return float(base ** (1.0 + alpha * i / (n - 1)))


class Actor:
    """One actor. ``run()`` loops until ``stop`` is set, the stop key appears,
    ``max_steps`` agent steps are done, or a SIGTERM (in ``main``)."""

    def __init__(self, cfg: Config, actor_id: int, *, spec: EnvSpec | None = None,
                 stop: threading.Event | None = None, log: Any = None) -> None:
        self.cfg = cfg
        self.id = actor_id
        self.keys = Keys(cfg.prefix)
        self.stop = stop or threading.Event()
        self.log = log or (lambda msg: print(f"actor {actor_id}: {msg}", flush=True))
        self.spec = spec or env_spec(cfg)
        self.eps = epsilon_ladder(actor_id, cfg.num_actors, cfg.eps_base, cfg.eps_alpha)
        self.seed = cfg.seed + 1000 * (actor_id + 1)
        self.rng = np.random.default_rng(self.seed)
        self.model = build_model(self.spec, cfg.hidden)
        self.model.eval()
        self.codec = TransitionCodec(self.spec.obs_shape, self.spec.obs_dtype, cfg.n_step,
                                     self.spec.pixels)
        self.r = redis.Redis(host=cfg.host, port=cfg.port, protocol=2, socket_timeout=60)
        self.rc = ReplayClient(connection=self.r)
        self.version = 0
        self.pulls = 0
        self.learner_samples = 0
        self.transitions_total = 0
        self.steps = 0
        self.frames = 0
        self.episodes = 0
        self.inserted = 0
        self.inserted_bytes = 0  # arena bytes of the items inserted (for capacity_check)
        self.capacity_checked = 0.0  # the mean item size last checked; -1 once warned
        self.waited_s = 0.0

    # ---- network -------------------------------------------------------------
    def q_values(self, obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            x = torch.from_numpy(np.asarray(obs)[None])
            return self.model(x)[0].numpy().astype(np.float64)

    def pull(self, version: int) -> bool:
        """Load the published parameters (``version``: what the poll saw, for the log)."""
        blob, v = self.r.mget(self.keys.params, self.keys.version)
        if blob is None:
            return False
        version = int(v or version)
        try:
            load_blob(self.model, blob)
        except BlobError as e:
            self.log(f"ignoring parameter blob version {version}: {e}")
            return False
        self.version = version
        self.pulls += 1
        return True

    def _poll(self) -> tuple[int, int, bool]:
        v, samples, stop = self.r.mget(self.keys.version, self.keys.samples, self.keys.stop)
        return int(v or 0), int(samples or 0), stop is not None

    def wait_for_params(self) -> bool:
        deadline = time.monotonic() + self.cfg.params_wait_s
        while not self.stop.is_set() and time.monotonic() < deadline:
            v, _, stop = self._poll()
            if stop:
                return False
            if v and self.pull(v):
                return True
            time.sleep(0.05)
        return False

    # ---- the loop --------------------------------------------------------------
    def run(self, max_steps: int = 0) -> None:
        if not self.wait_for_params():
            if not self.stop.is_set():
                self.log("no parameters from the learner; giving up")
            return
        self.log(f"epsilon {self.eps:.5f}, parameters version {self.version}")
        env = make_env(self.cfg, self.seed)
        nstep = NStep(self.cfg.n_step, self.cfg.gamma)
        pending: list[Transition] = []  # their Q(s_{t+k}) comes with the next act
        out: list[tuple[Transition, float]] = []  # (transition, max_a Q(s_{t+k}, a))
        returns: list[str] = []
        obs, info = env.reset(seed=self.seed)
        ep_return, ep_frames, ep_lives = 0.0, 0, lives(info)
        frames_unsent = 0
        t_log = time.monotonic()
        frames_log = 0
        n_actions = self.spec.n_actions
        while not self.stop.is_set() and (max_steps <= 0 or self.steps < max_steps):
            q = self.q_values(obs)
            if pending:
                qmax = float(q.max())
                out.extend((t, qmax) for t in pending)
                pending.clear()
            if self.rng.random() < self.eps:
                action = int(self.rng.integers(n_actions))
            else:
                action = int(q.argmax())
            next_obs, reward, terminated, truncated, info = env.step(action)
            self.steps += 1
            self.frames += self.spec.frame_skip
            frames_unsent += self.spec.frame_skip
            ep_frames += self.spec.frame_skip
            ep_return += float(reward)
            life_lost = False
            if self.cfg.episodic_life and self.spec.pixels:
                now = lives(info)
                life_lost = now < ep_lives
                ep_lives = now
            r = float(np.sign(reward)) if self.cfg.clip_rewards else float(reward)
            done = terminated or truncated
            for t in nstep.step(obs, action, r, next_obs, terminated or life_lost,
                                truncated and not terminated, extra=float(q[action])):
                if t.discount == 0.0:
                    out.append((t, 0.0))
                elif done:
                    out.append((t, float(self.q_values(t.next_obs).max())))
                else:
                    pending.append(t)
            if done:
                self.episodes += 1
                returns.append(f"{time.time():.3f} {self.id} {ep_return:g} {ep_frames}")
                obs, info = env.reset()
                ep_return, ep_frames, ep_lives = 0.0, 0, lives(info)
            else:
                obs = next_obs
            if len(out) >= self.cfg.actor_batch:
                self.flush(out, returns, frames_unsent)
                out, returns, frames_unsent = [], [], 0
            now_t = time.monotonic()
            if now_t - t_log >= 30.0:
                fps = (self.frames - frames_log) / (now_t - t_log)
                self.log(f"{self.frames} frames ({fps:.0f}/s), {self.episodes} episodes, "
                         f"params v{self.version} ({self.pulls} pulls), "
                         f"waited {self.waited_s:.1f} s for the learner")
                t_log, frames_log = now_t, self.frames
        if out or returns or frames_unsent:
            try:
                self.flush(out, returns, frames_unsent, throttle=False)
            except redis.RedisError:
                pass
        env.close()

    def flush(self, out: list[tuple[Transition, float]], returns: list[str], frames: int,
              throttle: bool = True) -> None:
        """Insert a batch with priorities, report counters, pull parameters if new."""
        cfg, keys = self.cfg, self.keys
        if out:
            ts = [t for t, _ in out]
            prio = td_priorities([t.extra for t in ts], [t.ret for t in ts],
                                 [t.discount for t in ts], [q for _, q in out])
            items = self.codec.encode(
                np.stack([t.obs for t in ts]), [t.action for t in ts], [t.ret for t in ts],
                [t.discount for t in ts], np.stack([t.next_obs for t in ts]),
                [t.steps for t in ts])
            if cfg.replay == "appliance":
                self.rc.add(cfg.table, prio, items)
            else:
                p32 = prio.astype("<f4")
                self.r.rpush(keys.experience,
                             *[PRIORITY.pack(p) + bytes(row) for p, row in zip(p32, items,
                                                                               strict=True)])
            self.inserted += len(out)
            self.inserted_bytes += sum(stored_bytes(len(row)) for row in items)
            if cfg.replay == "appliance":
                self.capacity_check()
        pipe = self.r.pipeline(transaction=False)
        pipe.incrby(keys.frames, frames)
        pipe.incrby(keys.transitions, len(out))
        if returns:
            pipe.rpush(keys.returns, *returns)
        pipe.mget(keys.version, keys.samples, keys.stop)
        res = pipe.execute()
        self.transitions_total = int(res[1])
        v, samples, stop = res[-1]
        self.learner_samples = int(samples or 0)
        if stop is not None:
            self.stop.set()
            return
        v = int(v or 0)
        if v != self.version:
            self.pull(v)
        if throttle and cfg.samples_per_insert > 0:
            self._throttle()

    def capacity_check(self) -> None:
        """Warn once, in one line, if the table's capacity x the mean size of the items
        inserted here exceeds its MAXBYTES (REPLAY.INFO); checked on the first insert
        and again whenever the mean has grown by more than 10%."""
        mean = self.inserted_bytes / max(1, self.inserted)
        if self.capacity_checked < 0 or mean <= 1.1 * self.capacity_checked:
            return
        self.capacity_checked = mean
        msg = capacity_warning(self.cfg.table, self.rc.info(self.cfg.table), mean)
        if msg:
            self.log(f"warning: {msg}")
            self.capacity_checked = -1.0

    def _throttle(self) -> None:
        """Wait while inserts run ahead of samples_per_insert (Reverb-style rate limit)."""
        cfg = self.cfg
        slack = cfg.actor_batch * cfg.num_actors
        t0 = time.monotonic()
        while not self.stop.is_set():
            allowed = cfg.learning_starts + self.learner_samples / cfg.samples_per_insert + slack
            if self.transitions_total <= allowed:
                break
            time.sleep(0.005)
            v, self.learner_samples, stop = self._poll()
            if stop:
                self.stop.set()
            elif v != self.version:
                self.pull(v)
        self.waited_s += time.monotonic() - t0

    def close(self) -> None:
        self.r.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m actors.actor", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--actor-id", type=int, required=True, help="this actor's index i in [0, N)")
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many agent steps")
    add_arguments(p)
    args = p.parse_args(argv)
    cfg = from_args(args)
    torch.set_num_threads(cfg.torch_threads)
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    actor = Actor(cfg, args.actor_id, stop=stop)
    try:
        actor.run(args.max_steps)
    except redis.ConnectionError as e:
        if not stop.is_set():
            print(f"actor {args.actor_id}: lost the server: {e}", file=sys.stderr)
            return 1
    finally:
        actor.close()
    print(f"actor {args.actor_id}: stopped after {actor.frames} frames, {actor.episodes} "
          f"episodes, {actor.pulls} parameter pulls (pid {os.getpid()})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
