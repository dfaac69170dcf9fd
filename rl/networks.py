"""Networks the actor-critic agents share (IMPALA, A3C): separate policy and value MLPs,
and the environment's sizes they are built for."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn


class ActorCritic(nn.Module):
    """Separate MLPs for the policy logits and the value V(x). ``forward`` gives the
    logits, so a greedy evaluation (argmax of forward) plays the policy's mode."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: int) -> None:
        super().__init__()

        def mlp(out: int, gain: float) -> nn.Sequential:
            net = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden),
                                nn.Tanh(), nn.Linear(hidden, out))
            for m in net:
                if isinstance(m, nn.Linear):
                    nn.init.orthogonal_(m.weight, math.sqrt(2) if m.out_features == hidden
                                        else gain)
                    nn.init.zeros_(m.bias)
            return net

        self.policy = mlp(n_actions, 0.01)
        self.value_net = mlp(1, 1.0)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.policy(obs.float())

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.value_net(obs.float()).squeeze(-1)


def env_dims(env_id: str) -> tuple[int, int]:
    import gymnasium as gym

    env = gym.make(env_id)
    try:
        assert env.observation_space.shape is not None
        return int(np.prod(env.observation_space.shape)), int(env.action_space.n)  # type: ignore[attr-defined]
    finally:
        env.close()


def step_reward(model: ActorCritic, gamma: float, reward: float, next_obs: Any,
                terminated: bool, truncated: bool) -> float:
    """The reward an unroll records for a step. A step cut off by the time limit (not
    ended) bootstraps from V(its last observation), folded into its reward, since the
    unroll goes on with the next episode and marks the step done: as a plain terminal,
    every 500-step CartPole episode looked like a failure to the value function, and the
    policy collapsed to one action once it began to reach the limit."""
    if not truncated or terminated:
        return reward
    with torch.inference_mode():
        v = model.value(torch.from_numpy(np.asarray(next_obs, np.float32)[None]))[0]
    return reward + gamma * float(v)
