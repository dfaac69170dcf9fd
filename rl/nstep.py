"""n-step transitions and their initial priorities.

:class:`NStep` turns the stream of one environment's steps into n-step
transitions (s_t, a_t, R_t, gamma_t, s_{t+k}):

- R_t = sum_{i<k} gamma^i r_{t+i} with k = n, or fewer steps when the episode
  ends first;
- gamma_t = gamma^k, or 0 when s_{t+k} is terminal (a true end, or a lost life
  with episodic life); a time-limit truncation is not terminal, so the
  transitions cut by it still bootstrap from the last observation.

The initial priority (Ape-X: computed by the actor with its local network) is
|R_t + gamma_t * max_a Q(s_{t+k}, a) - Q(s_t, a_t)|: the learner's double-DQN
TD error when online and target networks are the same network, which is all
an actor has.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt


@dataclass
class Transition:
    obs: Any
    action: int
    ret: float
    discount: float
    next_obs: Any
    steps: int
    """k: steps of lookahead (n, or fewer at an episode's end)."""
    extra: Any = None
    """Whatever the caller attached to step t (the actor: Q(s_t, a_t))."""


class NStep:
    """Accumulates one environment's steps into n-step transitions."""

    def __init__(self, n: int, gamma: float) -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, not {n}")
        self.n = n
        self.gamma = float(gamma)
        self._q: deque[tuple[Any, int, float, Any]] = deque()

    def __len__(self) -> int:
        return len(self._q)

    def _emit(self, i: int, next_obs: Any, terminal: bool) -> Transition:
        """The transition of the i-th queued step, bootstrapping from next_obs."""
        ret = 0.0
        g = 1.0
        for _, _, r, _ in list(self._q)[i:]:
            ret += g * r
            g *= self.gamma
        obs, action, _, extra = self._q[i]
        k = len(self._q) - i
        return Transition(obs, action, ret, 0.0 if terminal else g, next_obs, k, extra)

    def step(self, obs: Any, action: int, reward: float, next_obs: Any, terminated: bool,
             truncated: bool = False, extra: Any = None) -> list[Transition]:
        """Record one step; return the transitions it completes (oldest first)."""
        self._q.append((obs, int(action), float(reward), extra))
        if terminated or truncated:
            out = [self._emit(i, next_obs, terminated) for i in range(len(self._q))]
            self._q.clear()
            return out
        if len(self._q) == self.n:
            t = self._emit(0, next_obs, False)
            self._q.popleft()
            return [t]
        return []

    def reset(self) -> None:
        """Drop unfinished steps (e.g. when an actor restarts an episode by force)."""
        self._q.clear()


def td_priorities(q_taken: npt.ArrayLike, ret: npt.ArrayLike, discount: npt.ArrayLike,
                  q_next_max: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """|R + gamma_k * max_a Q(s', a) - Q(s, a)|: the actor's initial priorities."""
    q = np.asarray(q_taken, dtype=np.float64)
    target = np.asarray(ret, dtype=np.float64) + np.asarray(discount, dtype=np.float64) * \
        np.asarray(q_next_max, dtype=np.float64)
    return np.abs(target - q)
