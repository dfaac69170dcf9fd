"""R2D2's actor (Kapturowski et al. 2019) and the entry point of its demo
(``pyctl demo --algo r2d2``, ``python -m inreplay.actors.r2d2``: actors.r2d2_demo).

An actor acts epsilon-greedily with the newest published parameters through
:class:`rl.networks.StepPolicy` and writes fixed-length overlapping sequences with the
recurrent state it had at their first step (stored state):
:class:`SequenceStreamWriter` appends each step once to the actor's episode stream on
the appliance and adds an item per sequence referencing its steps (overlapping
sequences share them); :class:`SequenceWriter` makes the same sequences as packed items
(``--storage packed``).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Any

import numpy as np
from inreplay.rl.config import appliance_password, child_role
from inreplay.rl.networks import StepPolicy
from inreplay.rl.r2d2 import (
    FLAG_DONE,
    FLAG_MASK,
    FLAG_VALID,
    SAMPLE_WAIT_S,
    R2D2Config,
    as_child,
    build_net,
    keys_of,
    limiter_holds,
    make_env,
    parse,
    sequence_schema,
    step_signature,
)


class SequenceWriter:
    """An actor's steps in, R2D2 sequence items out.

    Call :meth:`append` once per environment step with the observation the actor saw,
    its previous action, the recurrent state it had *before* that step, and what it did
    and got; call :meth:`end_episode` with the final observation. Sequences start at
    steps 0, period, 2 period, ... of each episode and hold ``seq_len`` steps; one is
    returned (as a dict of arrays, one row, ready for ``Schema.pack``) as soon as its
    last step is appended, and at the episode's end every sequence begun is returned,
    with the final observation after the last step and zero padding (mask / valid
    0) to ``seq_len``. Each carries the (h, c) of its first step: R2D2's stored state.

    Each sequence is one item of its own (``--storage packed``), so the seq_len - period
    steps two sequences share are stored twice; :class:`SequenceStreamWriter` (the
    default) stores them once, and its samples equal these sequences field for field.
    """

    def __init__(self, seq_len: int, period: int, obs_dim: int, hidden: int) -> None:
        if not 1 <= period <= seq_len:
            raise ValueError("period must be in [1, seq_len]")
        self.seq_len, self.period, self.obs_dim, self.hidden = seq_len, period, obs_dim, hidden
        self._reset()

    def _reset(self) -> None:
        self.steps: list[tuple[np.ndarray, int, np.ndarray, np.ndarray, int, float, bool]] = []
        self.first = 0  # episode step index of self.steps[0]
        self.next_start = 0  # episode step at which the next sequence starts

    def append(self, obs: np.ndarray, prev_action: int, h: np.ndarray, c: np.ndarray,
               action: int, reward: float, terminated: bool) -> list[dict[str, np.ndarray]]:
        """Add one step; returns the sequences it completes (none or one)."""
        self.steps.append((np.asarray(obs, np.float32), int(prev_action),
                           np.asarray(h, np.float32), np.asarray(c, np.float32), int(action),
                           float(reward), bool(terminated)))
        end = self.first + len(self.steps)
        if end - self.next_start < self.seq_len:
            return []
        out = [self._sequence(self.next_start, None)]
        self.next_start += self.period
        drop = self.next_start - self.first
        if drop > 0:
            del self.steps[:drop]
            self.first = self.next_start
        return out

    def end_episode(self, final_obs: np.ndarray) -> list[dict[str, np.ndarray]]:
        """The episode ended (terminated or truncated) with ``final_obs``: every sequence
        begun and not yet returned, padded; then start a new episode."""
        out = []
        end = self.first + len(self.steps)
        while self.next_start < end:
            out.append(self._sequence(self.next_start, np.asarray(final_obs, np.float32)))
            self.next_start += self.period
        self._reset()
        return out

    def _sequence(self, start: int, final_obs: np.ndarray | None) -> dict[str, np.ndarray]:
        L = self.seq_len  # noqa: N806 - the paper's name
        rows = self.steps[start - self.first:start - self.first + L]
        n = len(rows)
        seq = {"obs": np.zeros((1, L, self.obs_dim), np.float32),
               "prev_action": np.zeros((1, L), np.int64), "action": np.zeros((1, L), np.int64),
               "reward": np.zeros((1, L), np.float32), "done": np.zeros((1, L), np.float32),
               "mask": np.zeros((1, L), np.float32), "valid": np.zeros((1, L), np.float32),
               "h0": rows[0][2][None].copy(), "c0": rows[0][3][None].copy()}
        seq["obs"][0, :n] = np.stack([r[0] for r in rows])
        seq["prev_action"][0, :n] = [r[1] for r in rows]
        seq["action"][0, :n] = [r[4] for r in rows]
        seq["reward"][0, :n] = [r[5] for r in rows]
        seq["done"][0, :n] = [r[6] for r in rows]
        seq["mask"][0, :n] = 1.0
        seq["valid"][0, :n] = 1.0
        if final_obs is not None and n < L:
            seq["obs"][0, n] = final_obs
            seq["valid"][0, n] = 1.0
        return seq


class SequenceStreamWriter:
    """The sequences of :class:`SequenceWriter`, stored once on the appliance.

    Same calls (:meth:`append` per environment step, :meth:`end_episode` with the final
    observation), but nothing is returned: each step is appended once to the actor's
    episode stream (:class:`pyctl.trajectory.TrajectoryWriter`, fields
    :func:`step_signature`), and each sequence becomes an item of the TRAJECTORY table
    ``table`` (priority: the table's max) whose columns reference its seq_len steps, so
    two overlapping sequences share the chunks of their common steps. At an episode's
    end the stream gets the final observation (valid, not mask) and zero steps until
    every sequence begun has seq_len steps: the padding SequenceWriter puts in each item,
    here stored once per episode (at most seq_len - 1 steps).

    The stored state is not a step field: (h, c) would be 2 x hidden float32 on every
    step (512 B with hidden 64, 4 KB with R2D2's 512) where a sequence needs it only at
    its first step. It goes to a second stream, ``<stream>:state``, one step (h and c
    stacked) per sequence start, chunks of one step, and each item references its one
    step as the column ``state``: 2 x hidden x 4 / period bytes per environment step.
    Items and steps go out on :meth:`flush` (the state stream's append first, then the
    steps and the items in one pipeline) and at the episode's end.
    """

    def __init__(self, client: Any, table: str, stream: str, seq_len: int, period: int,
                 obs_dim: int, n_actions: int, hidden: int, *, chunk_steps: int = 32) -> None:
        from pyctl.trajectory import TrajectoryWriter

        if not 1 <= period <= seq_len:
            raise ValueError("period must be in [1, seq_len]")
        self.table, self.seq_len, self.period = table, seq_len, period
        self.obs_dim, self.hidden = obs_dim, hidden
        # the steps a flush may still reference: a sequence and what came after it
        self.max_unflushed = 2 * (seq_len + period) + 64
        self.steps = TrajectoryWriter(client, stream, step_signature(obs_dim, n_actions),
                                      chunk_steps=chunk_steps,
                                      history=2 * self.max_unflushed)
        self.states = TrajectoryWriter(client, stream + ":state",
                                       {"state": ((2, hidden), np.float32)}, chunk_steps=1,
                                       history=2 * self.max_unflushed // period + 4)
        self._act = self.steps.signature["action"][1]
        self._zero = {"obs": np.zeros(obs_dim, np.float32), "prev_action": self._act.type(0),
                      "action": self._act.type(0), "reward": np.float32(0),
                      "flags": np.uint8(FLAG_VALID)}
        self.pending = 0  # items not yet flushed
        self.t = 0  # acting steps of this episode
        self.next_start = 0
        self._unflushed = 0

    def append(self, obs: np.ndarray, prev_action: int, h: np.ndarray, c: np.ndarray,
               action: int, reward: float, terminated: bool) -> int:
        """Add one step; returns the sequences it completes (0 or 1)."""
        if self.t % self.period == 0:
            self.states.append({"state": np.stack([np.asarray(h, np.float32),
                                                   np.asarray(c, np.float32)])})
        self.steps.append({"obs": np.asarray(obs, np.float32),
                           "prev_action": self._act.type(prev_action),
                           "action": self._act.type(action), "reward": np.float32(reward),
                           "flags": np.uint8(FLAG_MASK | FLAG_VALID
                                             | (FLAG_DONE if terminated else 0))})
        self.t += 1
        self._unflushed += 1
        made = 0
        if self.t - self.next_start >= self.seq_len:
            self._item(self.next_start)
            self.next_start += self.period
            made = 1
        if self._unflushed >= self.max_unflushed:
            self.flush()
        return made

    def end_episode(self, final_obs: np.ndarray) -> int:
        """The episode ended with ``final_obs``: an item for every sequence begun, sent
        with the rest; the streams start a new episode. Returns the items made."""
        starts = range(self.next_start, self.t, self.period)
        if starts:
            extra = starts[-1] + self.seq_len - self.t  # steps past the last acting one
            if extra > 0:
                self.steps.append({**self._zero, "obs": np.asarray(final_obs, np.float32)})
                for _ in range(extra - 1):
                    self.steps.append({**self._zero, "flags": np.uint8(0)})
            for s in starts:
                self._item(s)
        self.states.flush()
        self.steps.end_episode()
        self.states.end_episode()
        self.t = self.next_start = self._unflushed = 0
        self.pending = 0
        return len(starts)

    def flush(self) -> None:
        """Send the buffered steps and items (the state stream's first)."""
        self.states.flush()
        self.steps.flush()
        self.pending = self._unflushed = 0

    def close(self) -> None:
        """Flush and drop both streams (items keep the chunks they reference)."""
        self.states.flush()
        self.steps.close()
        self.states.close()

    def _item(self, start: int) -> None:
        L, h = self.seq_len, self.steps.history  # noqa: N806 - the paper's name
        traj = {name: h[name][start:start + L] for name in self.steps.signature}
        k = start // self.period
        traj["state"] = self.states.history["state"][k:k + 1]
        self.steps.create_item(self.table, None, traj)
        self.pending += 1


def run_actor(cfg: R2D2Config, actor_id: int, stop: threading.Event) -> None:
    """Act epsilon-greedily with the newest published parameters, write sequences (each
    step once to the actor's episode stream, an item per sequence; or packed items with
    ``--storage packed``), insert them (table's max priority for new items) and report
    frames and episode returns."""
    import redis
    from inreplay.actors.actor import ParamUpdates, epsilon_ladder
    from inreplay.rl.model import BlobError, load_blob

    from pyctl.client import RateLimited, ReplayClient, connect

    keys = keys_of(cfg)
    r = connect(host=cfg.host, port=cfg.port, protocol=2, socket_timeout=60,
                password=appliance_password())
    rc = ReplayClient(cfg.host, cfg.port, protocol=2, socket_timeout=60,
                      password=appliance_password())
    updates = ParamUpdates(r, keys)
    net = build_net(cfg).eval()
    obs_dim = net.torso[0].in_features - net.n_actions
    schema = sequence_schema(cfg, obs_dim)
    eps = epsilon_ladder(actor_id, cfg.num_actors, cfg.eps_base, cfg.eps_alpha)
    seed = cfg.seed + 1000 * (actor_id + 1)
    rng = np.random.default_rng(seed)
    env = make_env(cfg)
    policy = StepPolicy(net)
    packed = cfg.storage == "packed"
    writer = SequenceWriter(cfg.seq_len, cfg.period, obs_dim, cfg.hidden)
    stream: SequenceStreamWriter | None = None
    if not packed:
        stream = SequenceStreamWriter(rc, cfg.table, f"{cfg.prefix}:steps:{actor_id}",
                                      cfg.seq_len, cfg.period, obs_dim, net.n_actions,
                                      cfg.hidden)
    version = 0

    def pull(timeout: float) -> None:
        nonlocal version
        v = updates.poll(timeout)
        if v is None or v == version:
            return
        blob, v_raw = r.mget(keys.params, keys.version)
        if blob is None:
            return
        try:
            load_blob(net, blob)
            policy.load(net)
            version = int(v_raw or v)
        except BlobError as e:
            print(f"actor {actor_id}: ignoring parameters: {e}", flush=True)

    def wait_for_limiter() -> None:
        """--storage trajectory: hold the insert while the learner is behind."""
        while not stop.is_set() and limiter_holds(rc.info(cfg.table), cfg, insert=True):
            if r.exists(keys.stop):
                stop.set()
            pull(0.0)
            time.sleep(0.02)

    while not version and not stop.is_set() and not r.exists(keys.stop):
        pull(0.1)
    print(f"actor {actor_id}: epsilon {eps:.4f}, parameters v{version}, "
          f"storage {cfg.storage}", flush=True)
    pending: list[dict[str, np.ndarray]] = []
    n_pending = 0  # sequences made and not yet counted
    returns: list[str] = []
    frames_unsent = 0
    obs, _ = env.reset(seed=seed)
    state = policy.initial_state()
    prev_action, ep_return = 0, 0.0
    while not stop.is_set():
        q, new_state = policy.step(obs, prev_action, state)
        action = int(rng.integers(net.n_actions)) if rng.random() < eps else int(q.argmax())
        next_obs, reward, terminated, truncated, _ = env.step(action)
        step = (obs, prev_action, state[0], state[1], action, float(reward), bool(terminated))
        if stream is None:
            pending += writer.append(*step)
        else:
            n_pending += stream.append(*step)
        frames_unsent += 1
        ep_return += float(reward)
        state, prev_action, obs = new_state, action, next_obs
        ended = terminated or truncated
        if ended:
            if stream is None:
                pending += writer.end_episode(next_obs)
            else:
                wait_for_limiter()
                n_pending += stream.end_episode(next_obs)  # sent now
            returns.append(f"{time.time():.3f} {actor_id} {ep_return:g}")
            obs, _ = env.reset()
            state, prev_action, ep_return = policy.initial_state(), 0, 0.0
        n_pending = n_pending if stream is not None else len(pending)
        if n_pending >= cfg.actor_flush or (returns and n_pending):
            if stream is not None:
                if stream.pending:
                    wait_for_limiter()
                    stream.flush()
            else:
                batch = {k: np.concatenate([p[k] for p in pending]) for k in pending[0]}
                while not stop.is_set():
                    try:
                        rc.add(cfg.table, None, batch, schema=schema, timeout=SAMPLE_WAIT_S)
                        break
                    except RateLimited:
                        if r.exists(keys.stop):
                            stop.set()
                        pull(0.0)
            pipe = r.pipeline(transaction=False)
            pipe.incrby(keys.frames, frames_unsent)
            pipe.incrby(keys.transitions, n_pending)
            if returns:
                pipe.rpush(keys.returns, *returns)
            pipe.exists(keys.stop)
            if pipe.execute()[-1]:
                break
            pending, returns, frames_unsent, n_pending = [], [], 0, 0
            pull(0.0)
    if stream is not None:
        with contextlib.suppress(redis.RedisError):
            stream.close()
    env.close()
    updates.close()
    rc.close()
    r.close()


def main(argv: list[str] | None = None) -> int:
    """An actor (``--role actor``, started by the demo), else the demo itself."""
    role = child_role(argv)
    if role == "learner":
        print("python -m inreplay.actors.r2d2: the learner is python -m inreplay.learner.r2d2",
              file=sys.stderr)
        return 2
    if role != "actor":
        from inreplay.actors import r2d2_demo

        return r2d2_demo.main(argv)
    args, cfg = parse(argv, __doc__)
    stop = threading.Event()
    as_child(stop)
    run_actor(cfg, args.actor_id, stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
