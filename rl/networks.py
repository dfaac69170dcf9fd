"""Networks the agents share: the actor-critic MLPs of IMPALA and A3C (and the
environment's sizes they are built for), R2D2's recurrent Q-network and its one step in
NumPy that R2D2's actors and evaluation act with. (Ape-X's Q-networks: rl.model.)"""

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


State = tuple[torch.Tensor, torch.Tensor]
"""The LSTM's (h, c), each (batch, hidden)."""


class RecurrentQNet(nn.Module):
    """Q(history, a): a linear+ReLU torso on [observation, one-hot previous action], an
    LSTM, and a dueling head (R2D2's architecture without the Atari convolutions)."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: int) -> None:
        super().__init__()
        self.n_actions = n_actions
        self.hidden = hidden
        self.torso = nn.Sequential(nn.Linear(obs_dim + n_actions, hidden), nn.ReLU())
        self.lstm = nn.LSTM(hidden, hidden, batch_first=True)
        self.value = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.advantage = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(),
                                       nn.Linear(hidden, n_actions))

    def initial_state(self, batch: int) -> State:
        z = torch.zeros(batch, self.hidden)
        return z, z.clone()

    def forward(self, obs: torch.Tensor, prev_action: torch.Tensor, state: State,
                ) -> tuple[torch.Tensor, State]:
        """obs (B, T, obs_dim), prev_action (B, T) int64, state ((B, H), (B, H)) ->
        Q (B, T, n_actions) and the state after the T steps."""
        x = torch.cat([obs, nn.functional.one_hot(prev_action, self.n_actions).float()], -1)
        y, (h, c) = self.lstm(self.torso(x), (state[0][None], state[1][None]))
        a = self.advantage(y)
        return self.value(y) + a - a.mean(-1, keepdim=True), (h[0], c[0])


class StepPolicy:
    """One step of a :class:`RecurrentQNet` in NumPy, for acting: the same float32
    arithmetic as ``net(obs[None, None], prev[None, None], state)``, without torch's
    per-call overhead. An actor calls the network once per environment step, and through
    torch a 64-wide LSTM step costs several times its arithmetic in dispatch (measured on
    a 2-core VM: 7x the NumPy step); the actors share the cores with the learner, and with
    samples per insert held at 8 every microsecond an actor spends per step is taken from
    the learner. :meth:`load` copies the weights again after the actor pulls new
    parameters; the learner trains the torch module."""

    def __init__(self, net: RecurrentQNet) -> None:
        self.hidden, self.n_actions = net.hidden, net.n_actions
        self.load(net)

    def load(self, net: RecurrentQNet) -> None:
        """Copy ``net``'s weights (pre-transposed and with the LSTM's two biases summed)."""
        w = {k: v.detach().numpy().astype(np.float32) for k, v in net.state_dict().items()}
        obs_dim = w["torso.0.weight"].shape[1] - self.n_actions
        self.w_obs = np.ascontiguousarray(w["torso.0.weight"][:, :obs_dim].T)
        self.w_prev = np.ascontiguousarray(w["torso.0.weight"][:, obs_dim:].T)  # one-hot rows
        self.b_torso = w["torso.0.bias"]
        self.w_ih = np.ascontiguousarray(w["lstm.weight_ih_l0"].T)
        self.w_hh = np.ascontiguousarray(w["lstm.weight_hh_l0"].T)
        self.b_lstm = w["lstm.bias_ih_l0"] + w["lstm.bias_hh_l0"]
        self.head = [(np.ascontiguousarray(w[f"{n}.0.weight"].T), w[f"{n}.0.bias"],
                      np.ascontiguousarray(w[f"{n}.2.weight"].T), w[f"{n}.2.bias"])
                     for n in ("value", "advantage")]

    def initial_state(self) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(self.hidden, np.float32), np.zeros(self.hidden, np.float32)

    def step(self, obs: np.ndarray, prev_action: int, state: tuple[np.ndarray, np.ndarray],
             ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """Q (n_actions,) and the LSTM's (h, c) after one step (PyTorch's gate order i, f,
        g, o)."""
        h, c = state
        x = np.maximum(obs @ self.w_obs + self.w_prev[prev_action] + self.b_torso, 0.0)
        g = x @ self.w_ih + h @ self.w_hh + self.b_lstm
        H = self.hidden  # noqa: N806 - the LSTM's width, as in the paper
        i, f, o = (1.0 / (1.0 + np.exp(-g[k * H:(k + 1) * H])) for k in (0, 1, 3))
        c = f * c + i * np.tanh(g[2 * H:3 * H])
        h = o * np.tanh(c)
        (v1, vb1, v2, vb2), (a1, ab1, a2, ab2) = self.head
        v = np.maximum(h @ v1 + vb1, 0.0) @ v2 + vb2
        a = np.maximum(h @ a1 + ab1, 0.0) @ a2 + ab2
        return v + a - a.mean(), (h, c)
