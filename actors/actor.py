"""An Ape-X actor: act epsilon-greedily, build n-step transitions, insert them with
priorities, pull parameters when the learner announces new ones.

    python -m inreplay.actors.actor --actor-id 0 --env CartPole-v1 --port 6379 [--config FILE.json]

Each flush of ``actor_batch`` transitions is

1. one write through the actor's :class:`Writer` (the learner's side is
   ``learner.replay.Replay``): ``REPLAY.ADD table p1 item1 p2 item2 ...``
   (:class:`ItemWriter`), the frames-once items of a TRAJECTORY table
   (:class:`FrameItemWriter`, Atari on one appliance) or, with ``--replay local``, one
   ``RPUSH <prefix>:experience`` of priority-prefixed records to a stock Redis
   (:class:`ListWriter`), and
2. one pipelined round trip: ``INCRBY <prefix>:frames``, ``INCRBY <prefix>:transitions``,
   ``RPUSH <prefix>:returns`` (finished episodes), ``MGET <prefix>:learner:samples
   <prefix>:stop``;
3. a look, without blocking, at the actor's subscription (below) and
   ``MGET <prefix>:params <prefix>:params:version`` only when it announced a version
   other than the one loaded (the learner sets both and publishes the version in one
   MULTI/EXEC, so the pair is consistent and the announced blob is there).

Parameters are announced, not polled: each actor holds a second connection (from
its client's pool: same server, auth and protocol, RESP2 or RESP3) subscribed to
``<prefix>:params:updates``, on which the learner PUBLISHes each new version. Every
confirmation of that SUBSCRIBE (the first one, and the one redis-py gets when it
reconnects a dropped subscriber) is followed by one ``GET <prefix>:params:version``:
what was published before the subscription took effect, or while the connection was
down, is read there rather than lost. Several versions announced between two looks
cost one pull, of the newest. Before its first parameters the actor blocks on the
subscription (in slices of :data:`WAIT_SLICE_S`, so a SIGTERM or the stop key ends
the wait) instead of polling.

Priorities are the actor's own |TD error| (see rl.nstep), computed from the
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
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import redis
import torch
from inreplay.rl.codec import TransitionCodec, capacity_warning, stored_bytes
from inreplay.rl.config import (
    Config,
    Keys,
    Parser,
    add_arguments,
    appliance_password,
    dump_stacks_on_signal,
    fail,
    from_args,
    net_reason,
)
from inreplay.rl.env import EnvSpec, env_spec, lives, make_env
from inreplay.rl.frames import FrameWriter, frames_once_on
from inreplay.rl.model import BlobError, MlpPolicy, build_model, load_blob
from inreplay.rl.nstep import NStep, Transition, td_priorities

from pyctl.client import RateLimited, connect
from pyctl.proc import stop_handler
from pyctl.sharded import ShardedReplayClient, home_address

ADD_WAIT_S = 1.0
"""How long one REPLAY.ADD may wait in the appliance for the rate limiter (the learner
to catch up) before the actor checks for a stop and new parameters and tries again."""
INSERTS_IN_FLIGHT = 4
"""An actor's item batches on the wire at once (ReplayClient.inserter's default)."""

WAIT_LOG_EVERY_S = 5.0
"""Seconds between the progress lines while an actor waits for parameters."""
WAIT_SLICE_S = 0.1
"""Longest single block on the subscription while waiting for the first parameters:
the stop event and the stop key are checked between slices."""
PRIORITY = struct.Struct("<f")
"""--replay local: each list element is a float32 priority, then the record."""


def epsilon_ladder(i: int, n: int, base: float = 0.4, alpha: float = 7.0) -> float:
    """Ape-X: actor i of n explores with base ** (1 + alpha * i / (n - 1)); n = 1: base."""
    if not 0 <= i < n:
        raise ValueError(f"actor index {i} not in [0, {n})")
    if n == 1:
        return base
    return float(base ** (1.0 + alpha * i / (n - 1)))


class Log:
    """An actor's log lines, with a message that repeats collapsed: the first one is
    printed, later ones only as "(repeated N times in S s)" at most every ``every`` s."""

    def __init__(self, write: Any, every: float = 5.0) -> None:
        self.write = write
        self.every = every
        self.seen: dict[str, list[float]] = {}  # message -> [last printed, repeats since]

    def __call__(self, msg: str) -> None:
        self.write(msg)

    def warn(self, key: str, msg: str) -> None:
        """``key`` names the kind of warning (the message may vary, e.g. a version)."""
        now = time.monotonic()
        st = self.seen.get(key)
        if st is None:
            self.seen[key] = [now, 0]
            self.write(msg)
            return
        st[1] += 1
        if now - st[0] >= self.every:
            self.write(f"{msg} (repeated {int(st[1])} times in {now - st[0]:.0f} s)")
            st[0], st[1] = now, 0

    def flush(self) -> None:
        """Say how often each collapsed warning repeated since it was last printed."""
        for key, (_, n) in self.seen.items():
            if n:
                self.write(f"{key}: {int(n)} more times")
        self.seen.clear()


class ParamUpdates:
    """The versions the learner announces on ``Keys.updates``, on a subscriber connection
    of its own taken from ``r``'s pool (same server, auth and protocol as ``r``).

    :meth:`poll` drains what has arrived and returns the newest version announced, or
    None if nothing was. After every SUBSCRIBE confirmation (the first subscription and
    each one redis-py makes when it reconnects a dropped connection) it also reads the
    version key once through ``r``: the confirmation means the subscription is in
    effect, so a version published before it is in the key and one published after it
    arrives as a message; none is missed.
    """

    def __init__(self, r: redis.Redis, keys: Keys) -> None:
        self.r = r
        self.keys = keys
        self.subscriptions = 0
        """SUBSCRIBE confirmations seen (1 + the reconnections)."""
        self.ps = r.pubsub()
        self.ps.subscribe(keys.updates)

    def poll(self, timeout: float = 0.0) -> int | None:
        """The newest version announced since the last call, or None; waits up to
        ``timeout`` seconds for the first message (0: only what has already arrived)."""
        newest: int | None = None
        renewed = False
        while True:
            try:
                msg = self.ps.get_message(timeout=timeout)
            except redis.ConnectionError:
                if renewed:
                    raise
                # redis-py's own reconnection gave up: start a new subscription once
                # (subscribe raises if the server cannot be reached at all)
                self.ps.reset()
                self.ps.subscribe(self.keys.updates)
                renewed = True
                continue
            if msg is None:
                return newest
            timeout = 0.0  # the rest only if already there
            if msg["type"] == "subscribe":
                self.subscriptions += 1
                v = int(self.r.get(self.keys.version) or 0)
            elif msg["type"] == "message":
                try:
                    v = int(msg["data"])
                except ValueError:
                    continue  # not a version: not the learner's
            else:
                continue
            if v and (newest is None or v > newest):
                newest = v

    def close(self) -> None:
        self.ps.close()


class Writer(Protocol):
    """Where an actor's transitions go. ``begin``/``step`` see every observation (a
    frames-once writer stores each frame there and returns its step number, carried
    in the transition; the others return 0); ``write`` inserts a batch with its
    priorities; ``paced``: the server's rate limiter paces the writes (else the actor
    throttles itself against the learner's sample counter); ``waited_s``: the time
    writes spent held by that limiter."""

    paced: bool
    waited_s: float

    def begin(self, obs: np.ndarray) -> int: ...
    def step(self, obs: np.ndarray) -> int: ...
    def end_episode(self) -> None: ...
    def write(self, ts: list[Transition], prio: np.ndarray) -> None: ...
    def close(self) -> None: ...


Waiting = Callable[[], bool]
"""Called between waits for the rate limiter: True to give up (stop, or stop key)."""


class PlainSteps:
    """A writer that stores whole items: observations are not its business."""

    waited_s = 0.0

    def begin(self, obs: np.ndarray) -> int:
        return 0

    def step(self, obs: np.ndarray) -> int:
        return 0

    def end_episode(self) -> None:
        pass


class ItemWriter(PlainSteps):
    """Each transition one item of the appliance's table (``REPLAY.ADD`` through the
    replay group's client), encoded by ``rl.codec``. The batches are pipelined
    (``ShardedReplayClient.inserter``, ``INSERTS_IN_FLIGHT`` on each shard's connection):
    the actor acts on while the appliance stores its last batches. A batch the table's
    rate limiter holds waits in the appliance ``ADD_WAIT_S`` at a time and is sent again
    from the buffers the inserter kept, until the actor is told to stop. Warns once if
    the table's MAXBYTES cannot hold its capacity at the mean item size."""

    paced = True

    def __init__(self, rc: ShardedReplayClient, table: str, codec: TransitionCodec,
                 waiting: Waiting, log: Log) -> None:
        self.rc, self.table, self.codec = rc, table, codec
        self.waiting, self.log = waiting, log
        self.items = 0  # sent (the appliance acknowledges them later: ins.added)
        self.item_bytes = 0  # arena bytes of the items inserted (for capacity_check)
        self.capacity_checked = 0.0  # the mean item size last checked; -1 once warned
        self.waited_s = 0.0
        self.ins: Any = None  # the group's inserter, made at the first batch

    def _resend(self, err: RateLimited) -> bool:
        """A batch the rate limiter held ADD_WAIT_S: send it again unless told to stop."""
        return not self.waiting()

    def write(self, ts: list[Transition], prio: np.ndarray) -> None:
        items = encode(self.codec, ts)
        if self.ins is None:
            self.ins = self.rc.inserter(self.table, max_in_flight=INSERTS_IN_FLIGHT,
                                        timeout=ADD_WAIT_S, resend=self._resend)
        t0, resent = time.monotonic(), self.ins.resent
        try:
            self.ins.add(prio, items)
        except RateLimited:  # a held batch, and the actor is stopping: this one is dropped
            return
        finally:
            if self.ins.resent != resent:
                self.waited_s += time.monotonic() - t0
        self.items += len(items)
        self.item_bytes += sum(stored_bytes(len(row)) for row in items)
        self.capacity_check()

    def capacity_check(self) -> None:
        """Warn once, in one line, if the table's capacity x the mean size of the items
        inserted here exceeds its MAXBYTES (REPLAY.INFO); checked on the first insert
        and again whenever the mean has grown by more than 10%."""
        mean = self.item_bytes / max(1, self.items)
        if self.capacity_checked < 0 or mean <= 1.1 * self.capacity_checked:
            return
        self.capacity_checked = mean
        msg = capacity_warning(self.table, self.rc.info(self.table), mean)
        if msg:
            self.log(f"warning: {msg}")
            self.capacity_checked = -1.0

    def close(self) -> None:
        """Wait for the batches in flight (a held one is given up if the actor is
        stopping), then close the group's connections."""
        try:
            if self.ins is not None:
                self.ins.close()
        except RateLimited:
            pass
        except redis.RedisError as e:  # a shard gone at shutdown: its batches are lost
            self.log(f"warning: closing the item writer: {e}")
        finally:
            self.rc.close()


class FrameItemWriter(ItemWriter):
    """Frames stored once (rl.frames): each new frame appended to the actor's
    stream as it is seen, each transition an item referencing its obs and next_obs
    stacks there (a TRAJECTORY table on one appliance)."""

    def __init__(self, rc: ShardedReplayClient, r: redis.Redis, name: str, table: str,
                 obs_shape: tuple[int, ...], codec: TransitionCodec, waiting: Waiting,
                 log: Log) -> None:
        super().__init__(rc, table, codec, waiting, log)
        self.fw = FrameWriter(r, name, table, obs_shape)

    def begin(self, obs: np.ndarray) -> int:
        return self.fw.begin(obs)

    def step(self, obs: np.ndarray) -> int:
        return self.fw.step(obs)

    def end_episode(self) -> None:
        self.fw.end_episode()

    def write(self, ts: list[Transition], prio: np.ndarray) -> None:
        for t, p in zip(ts, prio, strict=True):
            self.fw.add(t.extra[1], t.steps, t.action, t.ret, t.discount, float(p))
        self.fw.flush()

    def close(self) -> None:
        try:
            self.fw.close()
        except redis.RedisError:
            pass
        super().close()


class ListWriter(PlainSteps):
    """The stock-Redis baseline (``--replay local``): one ``RPUSH <prefix>:experience``
    of float32-priority-prefixed records per batch, which the learner drains into its
    own tree; Redis has no rate limiter, so the actor paces itself (``paced`` False)."""

    paced = False

    def __init__(self, r: redis.Redis, key: str, codec: TransitionCodec) -> None:
        self.r, self.key, self.codec = r, key, codec

    def write(self, ts: list[Transition], prio: np.ndarray) -> None:
        p32 = prio.astype("<f4")
        self.r.rpush(self.key, *[PRIORITY.pack(p) + bytes(row)
                                 for p, row in zip(p32, encode(self.codec, ts), strict=True)])

    def close(self) -> None:
        pass


def encode(codec: TransitionCodec, ts: list[Transition]) -> Any:
    """A batch of transitions as the codec's records (one per transition)."""
    return codec.encode(np.stack([t.obs for t in ts]), [t.action for t in ts],
                        [t.ret for t in ts], [t.discount for t in ts],
                        np.stack([t.next_obs for t in ts]), [t.steps for t in ts])


class Actor:
    """One actor. ``run()`` loops until ``stop`` is set, the stop key appears,
    ``max_steps`` agent steps are done, or a SIGTERM (in ``main``)."""

    def __init__(self, cfg: Config, actor_id: int, *, spec: EnvSpec | None = None,
                 stop: threading.Event | None = None, log: Any = None) -> None:
        self.cfg = cfg
        self.id = actor_id
        self.keys = Keys(cfg.prefix)
        self.stop = stop or threading.Event()
        self.log = Log(log or (lambda msg: print(f"actor {actor_id}: {msg}", flush=True)))
        host, port = cfg.host, cfg.port
        if cfg.replay == "appliance":  # the run's keys live on shard 0 of a replay group
            host, port = home_address(host, port, socket_timeout=60, socket_connect_timeout=5,
                                      password=appliance_password())
        self.r = connect(host=host, port=port, protocol=2, socket_timeout=60,
                             socket_connect_timeout=5, password=appliance_password())
        self.r.ping()  # the server first: no environment for an actor that cannot run
        self.updates = ParamUpdates(self.r, self.keys)  # subscribed before any read
        self.spec = spec or env_spec(cfg)
        self.eps = epsilon_ladder(actor_id, cfg.num_actors, cfg.eps_base, cfg.eps_alpha)
        self.seed = cfg.seed + 1000 * (actor_id + 1)
        self.rng = np.random.default_rng(self.seed)
        self.model = build_model(self.spec, cfg.hidden)
        self.model.eval()
        # vector observations act through NumPy (torch's dispatch is most of a call)
        self.policy = None if self.spec.pixels else MlpPolicy(self.model)
        codec = TransitionCodec(self.spec.obs_shape, self.spec.obs_dtype, cfg.n_step,
                                self.spec.pixels)
        self.writer: Writer
        if cfg.replay != "appliance":
            self.writer = ListWriter(self.r, self.keys.experience, codec)
        else:
            rc = ShardedReplayClient.from_seed(f"{cfg.host}:{cfg.port}", socket_timeout=60,
                                                 password=appliance_password())
            if frames_once_on(cfg, self.spec.pixels, rc):
                self.writer = FrameItemWriter(rc, self.r, f"{cfg.prefix}:actor{actor_id}",
                                              cfg.table, self.spec.obs_shape, codec,
                                              self._waiting, self.log)
            else:
                self.writer = ItemWriter(rc, cfg.table, codec, self._waiting, self.log)
        self.version = 0
        self.pulls = 0
        self.learner_samples = 0
        self.transitions_total = 0
        self.steps = 0
        self.frames = 0
        self.episodes = 0
        self.inserted = 0
        self.waited_s = 0.0  # throttled by itself (--replay local); the writer's own too
        self.stopped_by_key = False
        """The stop key was seen. Only signal handlers (and the caller) set ``stop``: a
        handler's stop.set() while this thread held the Event's lock would deadlock."""

    # ---- network -------------------------------------------------------------
    def q_values(self, obs: np.ndarray) -> np.ndarray:
        if self.policy is not None:
            q = self.policy.q(obs)
            # Hand the GIL to a thread waiting for it (a learner in the same process, as in
            # the tests): NumPy's small products never release it, torch's forward did, and
            # without this a learner thread next to two actor threads waited up to the 5 ms
            # switch interval per torch call (38 learner steps/s against 54 with torch's
            # forward and 81 with this; a syscall per step where the actor runs alone).
            time.sleep(0)
            return q
        with torch.inference_mode():
            x = torch.from_numpy(np.asarray(obs)[None])
            return self.model(x)[0].numpy().astype(np.float64)

    def pull(self, version: int) -> bool:
        """Load the published parameters (``version``: what was announced, for the log)."""
        blob, v = self.r.mget(self.keys.params, self.keys.version)
        if blob is None:
            return False
        version = int(v or version)
        try:
            load_blob(self.model, blob)
            if self.policy is not None:
                self.policy.load(self.model)
        except BlobError as e:
            self.log.warn("ignoring parameter blobs",
                          f"ignoring parameter blob version {version}: {e}")
            return False
        self.version = version
        self.pulls += 1
        return True

    def _poll(self) -> tuple[int, bool]:
        """The learner's sample counter and whether the stop key is set."""
        samples, stop = self.r.mget(self.keys.samples, self.keys.stop)
        return int(samples or 0), stop is not None

    def check_params(self, timeout: float = 0.0) -> bool:
        """Pull the parameters if the subscription announced a version other than the
        loaded one (several announced: one pull, of the newest); True if pulled."""
        v = self.updates.poll(timeout)
        return v is not None and v != self.version and self.pull(v)

    def wait_for_params(self) -> bool:
        """Wait up to params_wait_s for the learner's first parameters, blocking on the
        subscription, with a progress line every WAIT_LOG_EVERY_S."""
        t0 = t_log = time.monotonic()
        deadline = t0 + self.cfg.params_wait_s
        while not self.stop.is_set():
            now = time.monotonic()
            if now >= deadline:
                return False
            if self.check_params(min(WAIT_SLICE_S, deadline - now)):
                return True
            if self.r.exists(self.keys.stop):
                self.stopped_by_key = True
                return False
            now = time.monotonic()
            if now - t_log >= WAIT_LOG_EVERY_S:
                self.log(f"waiting for the learner's parameters on {self.cfg.host}:"
                         f"{self.cfg.port} ({now - t0:.0f} of {self.cfg.params_wait_s:.0f} s)")
                t_log = now
        return False

    # ---- the loop --------------------------------------------------------------
    def run(self, max_steps: int = 0) -> None:
        if not self.wait_for_params():
            return
        self.log(f"epsilon {self.eps:.5f}, parameters version {self.version}")
        env = make_env(self.cfg, self.seed)
        nstep = NStep(self.cfg.n_step, self.cfg.gamma)
        pending: list[Transition] = []  # their Q(s_{t+k}) comes with the next act
        out: list[tuple[Transition, float]] = []  # (transition, max_a Q(s_{t+k}, a))
        returns: list[str] = []
        obs, info = env.reset(seed=self.seed)
        ep_return, ep_frames, ep_lives = 0.0, 0, lives(info)
        w = self.writer
        row = w.begin(obs)  # the stream step of obs (frames stored once; else 0)
        frames_unsent = 0
        t_log = time.monotonic()
        frames_log = 0
        n_actions = self.spec.n_actions
        while (not self.stop.is_set() and not self.stopped_by_key
               and (max_steps <= 0 or self.steps < max_steps)):
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
            next_row = w.step(next_obs)
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
                                truncated and not terminated, extra=(float(q[action]), row)):
                if t.discount == 0.0:
                    out.append((t, 0.0))
                elif done:
                    out.append((t, float(self.q_values(t.next_obs).max())))
                else:
                    pending.append(t)
            if done:
                self.episodes += 1
                returns.append(f"{time.time():.3f} {self.id} {ep_return:g} {ep_frames}")
                if isinstance(w, FrameItemWriter):  # its items reference the episode's
                    self.flush(out, returns, frames_unsent)  # steps: in before it ends
                    out, returns, frames_unsent = [], [], 0
                    w.end_episode()
                obs, info = env.reset()
                ep_return, ep_frames, ep_lives = 0.0, 0, lives(info)
                row = w.begin(obs)
            else:
                obs = next_obs
                row = next_row
            if len(out) >= self.cfg.actor_batch:
                self.flush(out, returns, frames_unsent)
                out, returns, frames_unsent = [], [], 0
            now_t = time.monotonic()
            if now_t - t_log >= 30.0:
                fps = (self.frames - frames_log) / (now_t - t_log)
                self.log(f"{self.frames} frames ({fps:.0f}/s), {self.episodes} episodes, "
                         f"params v{self.version} ({self.pulls} pulls), "
                         f"waited {self.waited_s + self.writer.waited_s:.1f} s for the "
                         "learner")
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
            prio = td_priorities([t.extra[0] for t in ts], [t.ret for t in ts],
                                 [t.discount for t in ts], [q for _, q in out])
            self.writer.write(ts, prio)
            self.inserted += len(out)
        pipe = self.r.pipeline(transaction=False)
        pipe.incrby(keys.frames, frames)
        pipe.incrby(keys.transitions, len(out))
        if returns:
            pipe.rpush(keys.returns, *returns)
        pipe.mget(keys.samples, keys.stop)
        res = pipe.execute()
        self.transitions_total = int(res[1])
        samples, stop = res[-1]
        self.learner_samples = int(samples or 0)
        if stop is not None:
            self.stopped_by_key = True
            return
        self.check_params()
        if throttle and not self.writer.paced and cfg.samples_per_insert > 0:
            self._throttle()

    def _waiting(self) -> bool:
        """Between waits for the appliance's rate limiter (the learner is behind): pick
        up a stop or new parameters; True to stop."""
        self.learner_samples, stop = self._poll()
        self.stopped_by_key = self.stopped_by_key or stop
        if not (stop or self.stop.is_set()):
            self.check_params()
        return stop or self.stop.is_set()

    def _throttle(self) -> None:
        """The baseline only (--replay local: stock Redis has no rate limiter): wait
        while inserts run ahead of samples_per_insert, polling the learner's counter."""
        cfg = self.cfg
        slack = cfg.actor_batch * cfg.num_actors
        t0 = time.monotonic()
        while not self.stop.is_set() and not self.stopped_by_key:
            allowed = cfg.learning_starts + self.learner_samples / cfg.samples_per_insert + slack
            if self.transitions_total <= allowed:
                break
            time.sleep(0.005)
            self.learner_samples, stop = self._poll()
            if stop:
                self.stopped_by_key = True
            else:
                self.check_params()
        self.waited_s += time.monotonic() - t0

    def close(self) -> None:
        self.writer.close()
        self.updates.close()
        self.r.close()


def main(argv: list[str] | None = None) -> int:
    """One actor process. Every failure is one line on stderr: 2 for a usage error,
    1 for anything else (no server, no parameters)."""
    stop = threading.Event()

    on_signal = stop_handler(stop)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    dump_stacks_on_signal()
    prog = "python -m inreplay.actors.actor"
    p = Parser(prog=prog, description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--actor-id", type=int, required=True, help="this actor's index i in [0, N)")
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many agent steps")
    add_arguments(p, role="actor")
    args = p.parse_args(argv)
    try:
        cfg = from_args(args)
    except ValueError as e:
        return fail(prog, str(e), 2)
    if not 0 <= args.actor_id < cfg.num_actors:
        return fail(prog, f"--actor-id {args.actor_id} must be in [0, {cfg.num_actors}) "
                          f"(--num-actors {cfg.num_actors})", 2)
    torch.set_num_threads(cfg.torch_threads)
    name = f"actor {args.actor_id}"
    where = f"{cfg.host}:{cfg.port}"
    try:
        actor = Actor(cfg, args.actor_id, stop=stop)
    except redis.ConnectionError as e:
        return fail(name, f"cannot reach the server at {where}: {net_reason(e)}")
    except redis.RedisError as e:
        return fail(name, f"the server at {where} refused: {e}")
    try:
        actor.run(args.max_steps)
    except redis.ConnectionError as e:
        if not stop.is_set():
            return fail(name, f"{'lost' if actor.version else 'cannot reach'} the server at "
                              f"{where}: {net_reason(e)}")
    except redis.RedisError as e:
        return fail(name, f"the server at {where} answered: {e}")
    finally:
        actor.log.flush()
        actor.close()
    if not actor.version and not stop.is_set() and not actor.stopped_by_key:
        return fail(name, f"no parameters from the learner on {where} within "
                          f"{cfg.params_wait_s:g} s (--params-wait-s)")
    print(f"{name}: stopped after {actor.frames} frames, {actor.episodes} "
          f"episodes, {actor.pulls} parameter pulls (pid {os.getpid()})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
