"""Greedy (or epsilon-greedy) episodes with unclipped, full-game returns: how every demo
judges a policy (the screen and the final evaluation of rl.harness), and what
``python -m inreplay.learner.evaluate`` plays from a checkpoint."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import torch
from inreplay.rl.config import Config
from inreplay.rl.env import make_env
from torch import nn


def run_episodes(model: nn.Module, cfg: Config, episodes: int, *, seed: int = 10_000,
                 epsilon: float = 0.0, deadline: float | None = None,
                 stop_below: float | None = None) -> list[float]:
    """Play up to ``episodes`` full games (no episodic life, no reward clipping).

    Stops early at ``deadline`` (time.monotonic()) or, with ``stop_below``, after
    the first episode whose return is below it. Returns the finished episodes' returns.
    """
    env = make_env(replace(cfg, episodic_life=False), seed)
    rng = np.random.default_rng(seed)
    n_actions = int(env.action_space.n)  # type: ignore[attr-defined]
    out: list[float] = []
    try:
        for ep in range(episodes):
            obs, _ = env.reset(seed=seed + ep)
            total = 0.0
            while True:
                if epsilon > 0 and rng.random() < epsilon:
                    action = int(rng.integers(n_actions))
                else:
                    with torch.inference_mode():
                        q = model(torch.from_numpy(np.asarray(obs)[None]))
                    action = int(q[0].argmax())
                obs, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                if terminated or truncated:
                    break
                if deadline is not None and time.monotonic() > deadline:
                    return out
            out.append(total)
            if stop_below is not None and total < stop_below:
                break
            if deadline is not None and time.monotonic() > deadline:
                break
    finally:
        env.close()
    return out
