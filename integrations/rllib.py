"""RLlib's prioritized episode replay buffer, kept on an inreplay appliance.

    from ray.rllib.algorithms.dqn import DQNConfig

    config = DQNConfig().environment("CartPole-v1").env_runners(num_env_runners=2)
    config = config.training(n_step=3, replay_buffer_config={
        "type": "integrations.rllib.InreplayEpisodeReplayBuffer",
        "address": "127.0.0.1:6379",   # any member of a replay group works too
        "table": "rllib-dqn", "capacity": 50_000, "alpha": 0.6, "beta": 0.4,
        "n_step": 3,                   # must equal the algorithm's n_step
    })
    algo = config.build_algo()

``type`` must be this dotted path as a string: RLlib 2.60 tests the type's name with
``"EpisodeReplayBuffer" in type`` before building the buffer, which fails on a class.

What is stored. RLlib's own buffer keeps whole episode objects in the algorithm's
process and builds n-step transitions when it samples. Here every time step becomes
one fixed-shape n-step transition when it is added: ``obs`` (o_t), ``action`` (a_t),
``rewards`` (r_t .. r_t+n-1, undiscounted, zero-padded), ``next_obs`` (o_t+k),
``n_step`` (k: n, or fewer at the end of an episode), ``terminated`` and ``truncated``
(of step t+k). The fields travel as one packed pyctl :class:`~pyctl.client.Schema`
record per transition (one ``REPLAY.ADD`` per ``add()`` call, no pickle), the
priorities live in the server's sum tree (new items at the table's max priority, as
RLlib), and ``sample()`` is one ``REPLAY.SAMPLE ... PACKED`` round trip (one per shard,
all in flight at once, over a replay group) whose weights are the server's
(N * P(i))^-beta / max_j w_j. The discount is applied at sample time with the ``gamma``
RLlib passes, so only ``n_step`` has to be known when adding; the algorithm's n_step
and the buffer's must agree (a mismatch is refused with a one-line error). Because
episodes arrive in fragments, the last n-1 steps of an unfinished fragment wait in
this process for the episode's next fragment (at most ``max_pending_episodes`` such
tails are kept). Two differences from RLlib's buffer: the final n-1 steps of an
episode are stored as shorter n-step transitions (RLlib's buffer re-draws them
instead), and eviction is per transition (FIFO on the server) rather than per episode.

How the data moves (RLlib's new API stack, as of Ray 2.60). Env runners are Ray
actors; each ``training_step`` of DQN collects their episodes into the algorithm's
own process (the driver, or the Algorithm actor under Tune) through Ray's object
store, and ``add()`` runs there. So several env runners do feed this buffer, but
through the algorithm: episodes cross the network once as Ray objects (pickled by
Ray, between Ray processes) and once more from the algorithm to the appliance, as
packed transitions. What the appliance changes is where the replay lives: the
transitions and the priority tree are out of the algorithm's memory (capacity is
bounded by the replay boxes, not the driver), survive a driver restart (``if_exists=
"reuse"``; ``pyctl`` snapshots), can be shared or inspected by other processes, and
scale over a replay group. It does not make env runners write to replay directly:
RLlib 2.60 has no hook for that. For Ape-X with actors writing straight to the
appliance, see ``python -m inreplay.actors.ray_job``.

``get_state``/``set_state`` (RLlib checkpoints) hold only counters and the table's
address: the transitions stay on the appliance (save them with ``pyctl``'s SAVE /
snapshot directory).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

import numpy as np
from inreplay.integrations._client import connect
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer
from ray.rllib.utils.replay_buffers.prioritized_episode_buffer import (
    PrioritizedEpisodeReplayBuffer,
)
from ray.rllib.utils.typing import ModuleID

from pyctl.client import Schema
from pyctl.sharded import ShardedReplayClient

DEFAULT_AGENT_ID = "default_agent"
DEFAULT_MODULE_ID = "default_policy"
SCHEMA_SUFFIX = ":rllib-schema"
"""Key (on the group's first shard) holding the table's transition layout as JSON."""


def _schema_to_json(schema: Schema) -> str:
    return json.dumps({n: [list(f.shape), np.dtype(f.dtype).str]
                       for n, f in schema.fields.items()})


def _schema_from_json(text: str | bytes) -> Schema:
    return Schema({n: (tuple(s), np.dtype(d)) for n, (s, d) in json.loads(text).items()})


class InreplayEpisodeReplayBuffer(PrioritizedEpisodeReplayBuffer):
    """A PrioritizedEpisodeReplayBuffer whose transitions and priorities are on inreplay.

    Arguments beyond RLlib's (``capacity`` in transitions, over the whole group;
    ``alpha``; ``batch_size_B``):

    address: HOST:PORT of the appliance or of any member of a replay group.
    table: the replay table's name.
    n_step: steps per stored transition (DQN's ``n_step``; tuples are not supported).
    epsilon: added to |TD error| before the exponent (RLlib floors priorities at 1e-12).
    if_exists: what to do when the table exists: "error" (default), "reuse" (continue
        a run: the stored layout must match) or "drop".
    max_pending_episodes: unfinished episodes whose last n-1 steps are held here.
    """

    def __init__(self, capacity: int = 10000, *, batch_size_B: int = 16,  # noqa: N803
                 batch_length_T: int = 1, alpha: float = 1.0,  # noqa: N803
                 metrics_num_episodes_for_smoothing: int = 100,
                 address: str = "127.0.0.1:6379", table: str = "rllib",
                 n_step: int = 1, epsilon: float = 1e-6, if_exists: str = "error",
                 max_pending_episodes: int = 10_000, **kwargs: Any) -> None:
        # RLlib's prioritized __init__ allocates two segment trees of 4x capacity in
        # this process; the tree is on the server here, so only the base class runs.
        EpisodeReplayBuffer.__init__(
            self, capacity=capacity, batch_size_B=batch_size_B,
            batch_length_T=batch_length_T,
            metrics_num_episodes_for_smoothing=metrics_num_episodes_for_smoothing)
        if not isinstance(n_step, int) or n_step < 1:
            raise ValueError(f"n_step {n_step!r}: the inreplay buffer stores n-step "
                             f"transitions and needs one int >= 1 (DQN's n_step)")
        if if_exists not in ("error", "reuse", "drop"):
            raise ValueError(f"if_exists {if_exists!r}: use 'error', 'reuse' or 'drop'")
        if alpha < 0:
            raise ValueError(f"alpha {alpha!r}: must be >= 0")
        self._alpha = float(alpha)
        self._max_priority = 1.0
        self._last_sampled_indices: list[int] = []
        self.address, self.table, self.n_step = address, table, n_step
        self.client = connect(address)
        shards = len(self.client.shards) if isinstance(self.client, ShardedReplayClient) else 1
        self.schema: Schema | None = None
        self._spaces: tuple[Any, Any] = (None, None)
        self._pending: OrderedDict[Any, tuple[list[Any], list[Any], list[float]]] = \
            OrderedDict()
        self._max_pending = max_pending_episodes
        self._episodes_seen: set[Any] = set()
        self._num_episodes = 0
        self._last_sampled_ids = np.empty(0, dtype=np.int64)
        exists = table in self.client.tables()
        if exists and if_exists == "error":
            raise ValueError(f"replay table '{table}' already exists on {address}: pass "
                             f"if_exists='reuse' to continue it or 'drop' to start over")
        if exists and if_exists == "drop":
            self.client.drop(table)
            self.client.redis.delete(table + SCHEMA_SUFFIX)
        if exists and if_exists == "reuse":
            stored = self.client.redis.get(table + SCHEMA_SUFFIX)
            if stored is not None:
                self.schema = _schema_from_json(stored)
        else:
            self.client.create(table, -(-int(capacity) // shards), alpha=self._alpha,
                               epsilon=epsilon)

    # ---- adding -------------------------------------------------------------------------
    def _make_schema(self, obs: np.ndarray, act: np.ndarray) -> Schema:
        o = np.asarray(obs[0])
        a = np.asarray(act[0])
        for name, x in (("observations", o), ("actions", a)):
            if x.dtype.hasobject or x.dtype.kind not in "biuf":
                raise ValueError(f"inreplay stores numeric {name} of fixed shape; this "
                                 f"episode's are {x.dtype} (flatten Dict/Tuple spaces first)")
        return Schema({"obs": (o.shape, o.dtype), "action": (a.shape, a.dtype),
                       "rewards": ((self.n_step,), np.float32),
                       "next_obs": (o.shape, o.dtype), "n_step": ((), np.int16),
                       "terminated": ((), np.bool_), "truncated": ((), np.bool_)})

    def _transitions(self, eps: SingleAgentEpisode) -> dict[str, np.ndarray] | None:
        """This fragment's finished n-step transitions (with any held tail before it)."""
        steps = len(eps)
        obs = list(eps.get_observations(slice(0, steps + 1)))
        act = list(eps.get_actions(slice(0, steps)))
        rew = [float(r) for r in eps.get_rewards(slice(0, steps))]
        tail = self._pending.pop(eps.id_, None)
        if tail is not None:
            obs, act, rew = tail[0] + obs, tail[1] + act, tail[2] + rew
        length, n = len(act), self.n_step
        done = eps.is_done
        last = length if done else length - n + 1  # steps with a full window (or the end)
        if not done and length > 0:
            start = max(last, 0)
            self._pending[eps.id_] = (obs[start:length], act[start:length], rew[start:length])
            while len(self._pending) > self._max_pending:
                self._pending.popitem(last=False)
        if last <= 0:
            return None
        t = np.arange(last)
        end = np.minimum(t + n, length)
        o = np.stack([np.asarray(x) for x in obs])
        a = np.stack([np.asarray(x) for x in act])
        if self.schema is None:
            self.schema = self._make_schema(o, a)
            self.client.redis.set(self.table + SCHEMA_SUFFIX, _schema_to_json(self.schema))
        r = np.zeros((last, n), dtype=np.float32)
        rv = np.asarray(rew, dtype=np.float32)
        for k in range(n):
            ok = t + k < end
            r[ok, k] = rv[(t + k)[ok]]
        at_end = end == length
        return {"obs": o[t], "action": a[t], "rewards": r, "next_obs": o[end],
                "n_step": (end - t).astype(np.int16),
                "terminated": at_end & bool(eps.is_terminated),
                "truncated": at_end & bool(eps.is_truncated)}

    def add(self, episodes: list[SingleAgentEpisode] | SingleAgentEpisode,
            weight: float | None = None) -> None:
        """Turn the episodes (or fragments) into n-step transitions and insert them in
        one request at ``weight`` (default: the table's max priority, as RLlib)."""
        if isinstance(episodes, SingleAgentEpisode):
            episodes = [episodes]
        parts = []
        steps = new_eps = 0
        for eps in episodes:
            if not isinstance(eps, SingleAgentEpisode):
                raise TypeError(f"the inreplay buffer takes SingleAgentEpisodes, not "
                                f"{type(eps).__name__} (multi-agent is not supported)")
            if self._spaces == (None, None):
                self._spaces = (eps.observation_space, eps.action_space)
            steps += len(eps)
            if eps.id_ not in self._episodes_seen:
                self._episodes_seen.add(eps.id_)
                new_eps += 1
            if eps.is_done:
                self._episodes_seen.discard(eps.id_)
            part = self._transitions(eps)
            if part is not None:
                parts.append(part)
        if parts and self.schema is not None:
            batch = {k: np.concatenate([p[k] for p in parts]) for k in self.schema.fields}
            n = len(batch["obs"])
            prio = None if weight is None else np.full(n, float(weight))
            self.client.add(self.table, prio, batch, schema=self.schema)
        self._num_episodes += new_eps
        self._num_timesteps_added += steps
        self._update_add_metrics(
            num_episodes_added=new_eps, num_env_steps_added=steps,
            num_episodes_evicted=0, num_env_steps_evicted=0,
            agent_to_num_episodes_added={DEFAULT_AGENT_ID: new_eps},
            agent_to_num_steps_added={DEFAULT_AGENT_ID: steps},
            agent_to_num_episodes_evicted={DEFAULT_AGENT_ID: 0},
            agent_to_num_steps_evicted={DEFAULT_AGENT_ID: 0},
            module_to_num_episodes_added={DEFAULT_MODULE_ID: new_eps},
            module_to_num_steps_added={DEFAULT_MODULE_ID: steps},
            module_to_num_episodes_evicted={DEFAULT_MODULE_ID: 0},
            module_to_num_steps_evicted={DEFAULT_MODULE_ID: 0})

    # ---- sampling -----------------------------------------------------------------------
    def sample(self, num_items: int | None = None, *, batch_size_B: int | None = None,  # noqa: N803
               batch_length_T: int | None = None, n_step: int | tuple[int, int] | None = None,  # noqa: N803
               beta: float = 0.0, gamma: float = 0.99, include_infos: bool = False,
               include_extra_model_outputs: bool = False, to_numpy: bool = False,
               **kwargs: Any) -> list[SingleAgentEpisode]:
        """B one-step episodes (o_t, a_t, discounted n-step return, o_t+k) with
        ``weights`` and ``n_step`` in their extra_model_outputs, as RLlib's buffer."""
        if num_items is not None and batch_size_B is not None:
            raise ValueError("pass num_items or batch_size_B, not both")
        b = int(num_items or batch_size_B or self.batch_size_B)
        if batch_length_T and batch_length_T > 1:
            raise ValueError("the inreplay buffer samples transitions (batch_length_T 1); "
                             "stateful modules are not supported")
        if n_step is not None and n_step != self.n_step:
            raise ValueError(f"n_step {n_step!r} at sampling, but the buffer stores "
                             f"{self.n_step}-step transitions: set replay_buffer_config's "
                             f"n_step to the algorithm's n_step")
        if include_infos or include_extra_model_outputs:
            raise ValueError("the inreplay buffer stores no infos or extra model outputs")
        if self.schema is None:
            raise ValueError(f"replay table '{self.table}' has nothing to sample yet: add "
                             f"episodes first")
        s = self.client.sample(self.table, b, beta=float(beta or 0.0), schema=self.schema)
        it = s.items
        disc = (float(gamma) ** np.arange(self.n_step)).astype(np.float32)
        ret = it["rewards"] @ disc
        w = np.asarray(s.weights, dtype=np.float32)
        obs_space, act_space = self._spaces
        out = []
        for i in range(b):
            ep = SingleAgentEpisode(
                observations=[it["obs"][i], it["next_obs"][i]], observation_space=obs_space,
                actions=[it["action"][i]], action_space=act_space, rewards=[float(ret[i])],
                terminated=bool(it["terminated"][i]), truncated=bool(it["truncated"][i]),
                extra_model_outputs={"weights": [float(w[i])],
                                     "n_step": [int(it["n_step"][i])]},
                len_lookback_buffer=0)
            if to_numpy:
                ep.to_numpy()
            out.append(ep)
        self._last_sampled_ids = s.ids
        self._last_sampled_indices = list(range(b))  # RLlib's length check in utils
        self.sampled_timesteps += b
        mean_n = float(np.mean(it["n_step"])) if b else 0.0
        uniq = len(np.unique(s.ids))
        self._update_sample_metrics(
            num_env_steps_sampled=b, num_episodes_per_sample=uniq,
            num_env_steps_per_sample=uniq, sampled_n_step=mean_n, num_resamples=0,
            agent_to_num_steps_sampled={DEFAULT_AGENT_ID: b},
            agent_to_num_episodes_per_sample={DEFAULT_AGENT_ID: uniq},
            agent_to_num_steps_per_sample={DEFAULT_AGENT_ID: uniq},
            agent_to_sampled_n_step={DEFAULT_AGENT_ID: mean_n},
            agent_to_num_resamples={DEFAULT_AGENT_ID: 0},
            module_to_num_steps_sampled={DEFAULT_MODULE_ID: b},
            module_to_num_episodes_per_sample={DEFAULT_MODULE_ID: uniq},
            module_to_num_steps_per_sample={DEFAULT_MODULE_ID: uniq},
            module_to_sampled_n_step={DEFAULT_MODULE_ID: mean_n},
            module_to_num_resamples={DEFAULT_MODULE_ID: 0})
        return out

    def update_priorities(self, priorities: Any, module_id: ModuleID | None = None) -> None:
        """New priorities (|TD errors|) for the last sampled batch, in one REPLAY.UPDATE;
        slots overwritten since the sample are skipped by the server."""
        p = np.abs(np.asarray(priorities, dtype=np.float64).reshape(-1))
        if p.shape[0] != self._last_sampled_ids.shape[0]:
            raise ValueError(f"{p.shape[0]} priorities for the last sample of "
                             f"{self._last_sampled_ids.shape[0]}: update after each sample")
        p = np.maximum(p, 1e-12)
        self.client.update(self.table, self._last_sampled_ids, p)
        self._max_priority = max(self._max_priority, float(p.max(initial=0.0)))
        self._last_sampled_ids = np.empty(0, dtype=np.int64)
        self._last_sampled_indices = []

    # ---- sizes and state ----------------------------------------------------------------
    def get_num_timesteps(self, module_id: ModuleID | None = None) -> int:
        """Transitions stored on the appliance (over the group)."""
        return int(self.client.info(self.table)["size"])

    def get_num_episodes(self, module_id: ModuleID | None = None) -> int:
        """Episodes (counted by id) added through this buffer object."""
        return self._num_episodes

    def get_num_episodes_evicted(self, module_id: ModuleID | None = None) -> int:
        return 0  # the server evicts transitions, not episodes

    def get_state(self) -> dict[str, Any]:
        return {"address": self.address, "table": self.table, "n_step": self.n_step,
                "num_timesteps_added": self._num_timesteps_added,
                "sampled_timesteps": self.sampled_timesteps,
                "num_episodes": self._num_episodes, "max_priority": self._max_priority}

    def set_state(self, state: dict[str, Any]) -> None:
        """Counters only: the transitions are on the appliance named in the state."""
        if state.get("table") != self.table or state.get("n_step") != self.n_step:
            raise ValueError(f"checkpoint of table {state.get('table')!r} "
                             f"(n_step {state.get('n_step')}), but this buffer is "
                             f"{self.table!r} (n_step {self.n_step})")
        self._num_timesteps_added = int(state["num_timesteps_added"])
        self.sampled_timesteps = int(state["sampled_timesteps"])
        self._num_episodes = int(state["num_episodes"])
        self._max_priority = float(state["max_priority"])
