"""Environments through gymnasium: classic control as is, Atari with DQN preprocessing.

Atari (ale-py, whose wheel ships the ROMs) goes through gymnasium's own wrappers:
``AtariPreprocessing`` (up to ``noop_max`` no-ops after reset, frame skip 4 with
max-pooling of the last two frames, 84x84 grayscale uint8) and
``FrameStackObservation`` (the last 4 frames, shape (4, 84, 84)). Two parts of the
classic DQN pipeline are done by the actor instead of a wrapper, because they
concern learning rather than the environment:

- episodic life: a lost life ends the n-step return (discount 0) but not the game,
  so the frame stack and the score go on (``info["lives"]`` tells a life was lost);
  in games that serve with FIRE, :class:`FireOnStart` presses it after a reset and
  after each lost life, as the DQN baselines do;
- reward clipping: the actor learns from sign(r) and reports the raw score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from inreplay.rl.config import Config, is_atari


class FireOnStart(gym.Wrapper[Any, Any, Any, Any]):
    """Press FIRE after a reset and after each lost life (the DQN baselines' FireResetEnv).

    Games like Breakout wait for FIRE to serve; a near-greedy actor (the low end of
    the epsilon ladder) that has not learned that yet would otherwise stand still
    until the episode's time limit. The FIRE step's reward counts toward the step
    that lost the life (or, after a reset, is dropped: it is 0 in these games).
    """

    FIRE = 1

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        assert env.unwrapped.get_action_meanings()[self.FIRE] == "FIRE"  # type: ignore[attr-defined]
        self.lives = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        obs, _, terminated, truncated, info = self.env.step(self.FIRE)
        if terminated or truncated:
            obs, info = self.env.reset(**kwargs)
        self.lives = lives(info)
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        now = lives(info)
        if now < self.lives and not (terminated or truncated):
            obs, r2, terminated, truncated, info = self.env.step(self.FIRE)
            reward = float(reward) + float(r2)
        self.lives = lives(info)
        return obs, float(reward), terminated, truncated, info


@dataclass(frozen=True)
class EnvSpec:
    """What the network and the codec need to know about an environment."""

    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype[Any]
    n_actions: int
    frame_skip: int
    """Emulator frames per agent step (1 for non-Atari)."""
    pixels: bool
    """Observations are stacked uint8 frames (n_stack, H, W)."""
    reward_threshold: float | None


def make_env(cfg: Config, seed: int | None = None, *, max_episode_steps: int | None = None,
             ) -> gym.Env[Any, Any]:
    """The environment of ``cfg.env_id`` with its preprocessing (see the module doc)."""
    steps = max_episode_steps or cfg.max_episode_steps
    if is_atari(cfg.env_id):
        import ale_py  # registers the ALE/ namespace

        gym.register_envs(ale_py)
        env = gym.make(cfg.env_id, frameskip=1, repeat_action_probability=cfg.sticky_actions,
                       max_num_frames_per_episode=steps * cfg.frame_skip)
        env = gym.wrappers.AtariPreprocessing(
            env, noop_max=cfg.noop_max, frame_skip=cfg.frame_skip, screen_size=84,
            terminal_on_life_loss=False, grayscale_obs=True, scale_obs=False)
        if "FIRE" in env.unwrapped.get_action_meanings():  # type: ignore[attr-defined]
            env = FireOnStart(env)
        env = gym.wrappers.FrameStackObservation(env, cfg.frame_stack)
    else:
        env = gym.make(cfg.env_id, max_episode_steps=steps)
    if seed is not None:
        env.action_space.seed(seed)
    return env


def env_spec(cfg: Config) -> EnvSpec:
    env = make_env(cfg)
    try:
        space = env.observation_space
        assert isinstance(env.action_space, gym.spaces.Discrete), "DQN needs discrete actions"
        assert space.shape is not None
        threshold = env.spec.reward_threshold if env.spec is not None else None
        pixels = is_atari(cfg.env_id)
        return EnvSpec(
            obs_shape=tuple(space.shape),
            obs_dtype=np.dtype(np.uint8 if pixels else np.float32),
            n_actions=int(env.action_space.n),
            frame_skip=cfg.frame_skip if pixels else 1,
            pixels=pixels,
            reward_threshold=None if threshold is None else float(threshold),
        )
    finally:
        env.close()


def lives(info: dict[str, Any]) -> int:
    return int(info.get("lives", 0))
