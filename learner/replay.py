"""Where the learner's prioritized batches come from.

- :class:`ApplianceReplay`: the replay table lives in inreplay; a batch is one
  ``REPLAY.SAMPLE`` round trip (ids, importance weights, items), new priorities one
  ``REPLAY.UPDATE``.
- :class:`LocalReplay`: the baseline (``--replay local``). Actors ``RPUSH`` records
  prefixed with their priority to a stock redis-server; the learner pops them
  (``LPOP key count``), stores the items in a local ring and their priorities in
  :class:`pyctl.sumtree.PrioritizedSampler` (the same C sum tree as the appliance's),
  and samples there.

Both give the same :class:`Sampled` batches, so the learner code is the same.
:class:`Prefetcher` keeps the next batches in flight on a background thread with
its own connection, so sampling and decoding overlap training.

Vector records (CartPole) are one size and come back ``PACKED``, one array viewed
in place. Stacked frames (Atari) may be zstd-compressed, so their items differ in
size: they come back as a list and the codec decompresses them on the prefetch
thread, spreading a batch over its decode threads (rl.codec).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import redis
from inreplay.rl.codec import HEADER_BYTES, Batch, TransitionCodec, stored_bytes
from inreplay.rl.config import Config, Keys, appliance_password
from inreplay.rl.frames import batch_of, frames_once_on

from pyctl.client import RateLimited, connect
from pyctl.errors import replay_error
from pyctl.sharded import ShardedReplayClient
from pyctl.sumtree import PrioritizedSampler
from pyctl.trajectory import create_trajectory_table, sample_trajectories

SAMPLE_WAIT_S = 1.0
"""How long one REPLAY.SAMPLE may wait in the appliance for the rate limiter (MIN_SIZE
while the table fills, the ratio after): the prefetch thread asks again after each such
wait, so a shutdown never waits longer."""


@dataclass
class Sampled:
    """One prioritized batch: ids to update, importance weights, decoded transitions."""

    ids: npt.NDArray[np.int64]
    weights: npt.NDArray[np.float32]
    batch: Batch


class Replay(Protocol):
    def size(self) -> int: ...
    def sample(self, n: int, beta: float) -> Sampled | None: ...
    def update(self, ids: npt.NDArray[np.int64], priorities: npt.NDArray[np.float32]) -> int: ...
    def counters(self) -> dict[str, float]: ...
    def sampling_view(self) -> Replay: ...
    def close(self) -> None: ...


class ApplianceReplay:
    """A table of the inreplay appliance, or of a replay group of them (every member
    reached from the one address given; exact global sampling, see pyctl.sharded).

    The table carries the run's rate limiter (Config.limiter): MIN_SIZE holds the
    first sample until learning_starts transitions are in, and samples_per_insert keeps
    the learner and the actors in step, each waiting in the appliance (TIMEOUT) rather
    than polling."""

    def __init__(self, cfg: Config, codec: TransitionCodec, create: bool = False) -> None:
        self.cfg = cfg
        self.codec = codec
        self.rc = ShardedReplayClient.from_seed(f"{cfg.host}:{cfg.port}", socket_timeout=60,
                                                    password=appliance_password())
        self.limited: str | None = None
        """The limiter's last word while a sample waited (None once one ran)."""
        self.decode_lock = threading.Lock()
        """Shared by every sampling_view: a codec decodes on one thread at a time, while
        the views' requests are in flight together (Prefetcher's max_inflight)."""
        self.frames = frames_once_on(cfg, codec.pixels, self.rc)
        """Frames stored once (rl.frames): a TRAJECTORY table, sampled assembled."""
        if create and cfg.table not in self.rc.tables():
            if self.frames:  # no samples_per_insert on TRAJECTORY tables yet: MIN_SIZE only
                create_trajectory_table(
                    self.rc.shards[0], cfg.table, cfg.capacity, alpha=cfg.alpha, beta=cfg.beta,
                    epsilon=cfg.priority_eps, maxbytes=cfg.replay_maxbytes,
                    min_size=cfg.limiter()["min_size"])
            else:
                self.rc.create(cfg.table, cfg.capacity, alpha=cfg.alpha, beta=cfg.beta,
                               epsilon=cfg.priority_eps, maxbytes=cfg.replay_maxbytes,
                               **cfg.limiter())

    def size(self) -> int:
        return int(self.rc.info(self.cfg.table)["size"])

    def sample(self, n: int, beta: float) -> Sampled | None:
        """A batch, or None when the rate limiter held the call for SAMPLE_WAIT_S (the
        reason is in self.limited)."""
        if self.frames:
            try:
                ts = sample_trajectories(self.rc.shards[0], self.cfg.table, n, beta=beta,
                                         timeout=SAMPLE_WAIT_S)
            except redis.ResponseError as e:
                err = e if isinstance(e, RateLimited) else replay_error(e)
                if not isinstance(err, RateLimited):
                    raise
                self.limited = err.reason
                return None
            self.limited = None
            return Sampled(ts.ids, ts.weights, batch_of(ts))
        try:
            if self.codec.pixels:  # raw or compressed, of any size: a list of items
                s = self.rc.sample(self.cfg.table, n, beta=beta, timeout=SAMPLE_WAIT_S)
            else:
                s = self.rc.sample(self.cfg.table, n, beta=beta,
                                   item_shape=(self.codec.itemsize,), timeout=SAMPLE_WAIT_S)
        except RateLimited as e:
            self.limited = e.reason  # "table 't' has 3 items, MIN_SIZE is 5: sample ..."
            return None
        self.limited = None
        with self.decode_lock:
            return Sampled(s.ids, s.weights, self.codec.decode(s.items, s.ids))

    def update(self, ids: npt.NDArray[np.int64], priorities: npt.NDArray[np.float32]) -> int:
        return self.rc.update(self.cfg.table, ids, priorities)

    def counters(self) -> dict[str, float]:
        return self.rc.info(self.cfg.table)

    def sampling_view(self) -> ApplianceReplay:
        """A second connection to the same table, for the prefetch thread."""
        view = ApplianceReplay(self.cfg, self.codec)
        view.decode_lock = self.decode_lock
        return view

    def close(self) -> None:
        self.rc.close()


class LocalReplay:
    """The baseline: items and sum tree in the learner, experience popped from Redis.

    Vector records live in one (capacity, itemsize) array. Stacked frames, raw or
    compressed, are kept as the bytes objects popped, and the oldest go when their
    bytes would exceed ``replay_maxbytes`` (as the appliance's arena does)."""

    POP_CHUNK = 2048

    def __init__(self, cfg: Config, codec: TransitionCodec,
                 connection: redis.Redis | None = None) -> None:
        self.cfg = cfg
        self.codec = codec
        self.key = Keys(cfg.prefix).experience
        self.r = connection or connect(host=cfg.host, port=cfg.port, protocol=2,
                                       password=appliance_password(), socket_timeout=60)
        self.variable = codec.pixels  # items of any size (compressed frames)
        self.maxbytes = cfg.replay_maxbytes
        if self.variable:
            self.capacity = max(1, cfg.capacity)
            self.items: np.ndarray = np.empty(self.capacity, dtype=object)
            self.sizes = np.zeros(self.capacity, dtype=np.int64)
        else:
            self.capacity = max(1, min(cfg.capacity, cfg.replay_maxbytes // codec.itemsize))
            self.items = np.zeros((self.capacity, codec.itemsize), dtype=np.uint8)
        self.bytes_used = 0
        self.oldest = 0  # live ids are [oldest, next_id)
        self.ids = np.full(self.capacity, -1, dtype=np.int64)
        self.tree = PrioritizedSampler(self.capacity, alpha=cfg.alpha, epsilon=cfg.priority_eps,
                                       seed=cfg.seed + 7)
        self.lock = threading.Lock()  # the tree is touched by the sampler and the updater
        self.next_id = 0
        self.stats = {"inserts": 0, "samples": 0, "sample_calls": 0, "updates": 0,
                      "stale_updates": 0, "evictions": 0, "bad_records": 0}

    # -- ingestion -----------------------------------------------------------------
    def ingest(self, limit: int = 1 << 30) -> int:
        """Pop whatever the actors pushed (up to ``limit`` records); returns how many."""
        got = 0
        rec = 4 + self.codec.itemsize
        while got < limit:
            chunk = self.r.lpop(self.key, min(self.POP_CHUNK, limit - got))
            if not chunk:
                break
            if self.variable:  # checked when sampled: the codec names a bad item
                good = [c for c in chunk if len(c) >= 4 + HEADER_BYTES]
            else:
                good = [c for c in chunk if len(c) == rec]
            self.stats["bad_records"] += len(chunk) - len(good)
            if good and self.variable:
                prio = np.frombuffer(b"".join(c[:4] for c in good), dtype="<f4")
                self.add(prio, [c[4:] for c in good])
            elif good:
                arr = np.frombuffer(b"".join(good), dtype=np.uint8).reshape(len(good), rec)
                prio = arr[:, :4].copy().view("<f4").reshape(-1)
                self.add(prio, arr[:, 4:])
            got += len(chunk)
            if len(chunk) < self.POP_CHUNK:
                break
        return got

    def add(self, priorities: npt.ArrayLike, records: np.ndarray | list[bytes],
            ) -> npt.NDArray[np.int64]:
        p = np.asarray(priorities, dtype=np.float64).reshape(-1)
        p = np.where(np.isfinite(p) & (p >= 0), p, 0.0)
        m = len(p)
        ids = self.next_id + np.arange(m, dtype=np.int64)
        if m > self.capacity:  # only the newest fit
            ids, p, records = ids[-self.capacity:], p[-self.capacity:], records[-self.capacity:]
        slots = ids % self.capacity
        with self.lock:
            old = self.ids[slots] >= 0
            evicted = int(np.count_nonzero(old))
            if self.variable:
                sizes = np.array([stored_bytes(len(r)) for r in records], dtype=np.int64)
                self.bytes_used -= int(self.sizes[slots[old]].sum())
                self.items[slots] = records if isinstance(records, np.ndarray) else \
                    _objects(records)
                self.sizes[slots] = sizes
                self.bytes_used += int(sizes.sum())
            else:
                self.items[slots] = records
            self.ids[slots] = ids
            self.tree.update(slots.astype(np.uint64), p)
            self.next_id += m
            self.oldest = max(self.oldest, self.next_id - self.capacity)
            if self.variable:
                evicted += self._evict_bytes()
        self.stats["inserts"] += m
        self.stats["evictions"] += evicted
        return ids

    def _evict_bytes(self) -> int:
        """Drop the oldest items while the live ones exceed maxbytes (one always stays)."""
        slots = []
        while self.bytes_used > self.maxbytes and self.next_id - self.oldest > 1:
            slot = self.oldest % self.capacity
            self.bytes_used -= int(self.sizes[slot])
            self.sizes[slot] = 0
            self.items[slot] = None
            self.ids[slot] = -1
            self.oldest += 1
            slots.append(slot)
        if slots:  # never drawn again
            self.tree.update(np.array(slots, dtype=np.uint64), np.zeros(len(slots)))
        return len(slots)

    # -- the Replay protocol ---------------------------------------------------------
    def size(self) -> int:
        return self.next_id - self.oldest

    def sample(self, n: int, beta: float) -> Sampled:
        self.ingest()
        with self.lock:
            size = self.size()
            first = self.oldest % self.capacity
            slots, weights = self.tree.sample(n, beta=beta, first=first, live=size)
            assert weights is not None
            idx = slots.astype(np.int64)
            ids = self.ids[idx].copy()
            items = self.items[idx].tolist() if self.variable else self.items[idx]
        self.stats["samples"] += n
        self.stats["sample_calls"] += 1
        return Sampled(ids, weights, self.codec.decode(items, ids))

    def update(self, ids: npt.NDArray[np.int64], priorities: npt.NDArray[np.float32]) -> int:
        ids = np.asarray(ids, dtype=np.int64)
        slots = ids % self.capacity
        p = np.asarray(priorities, dtype=np.float64)
        p = np.where(np.isfinite(p) & (p >= 0), p, 0.0)
        with self.lock:
            live = self.ids[slots] == ids
            self.tree.update(slots[live].astype(np.uint64), p[live])
        applied = int(live.sum())
        self.stats["updates"] += applied
        self.stats["stale_updates"] += len(ids) - applied
        return applied

    def counters(self) -> dict[str, float]:
        used = self.bytes_used if self.variable else self.size() * self.codec.itemsize
        return {"size": self.size(), "capacity": self.capacity, "bytes_used": used,
                "maxbytes": self.maxbytes, **self.stats}

    def sampling_view(self) -> LocalReplay:
        return self  # ingestion and sampling happen on the prefetch thread

    def close(self) -> None:
        self.tree.close()
        self.r.close()


def _objects(records: list[bytes]) -> np.ndarray:
    """A 1-D object array of the records (np.array would make a bytes-string array)."""
    out = np.empty(len(records), dtype=object)
    out[:] = records
    return out


def open_replay(cfg: Config, codec: TransitionCodec, create: bool = True) -> Replay:
    if cfg.replay == "appliance":
        return ApplianceReplay(cfg, codec, create=create)
    return LocalReplay(cfg, codec)


class Prefetcher:
    """A background thread that keeps ``depth`` sampled batches ready.

    ``convert`` runs on the thread too (e.g. NumPy -> torch tensors), so the
    training thread only trains. Errors on the thread are re-raised by ``get``.

    Decoding spreads over more threads only where one cannot keep up: the
    source's codec starts on this thread alone (``parallel`` 1), gains a decode
    thread (up to its ``threads``) after each batch during which the consumer
    found no batch waiting, and gives one back after each batch that had to wait
    for room in the queue.
    """

    def __init__(self, source: Replay, n: int, beta: float, depth: int,
                 convert: Callable[[Sampled], Any] = lambda s: s,
                 max_inflight: int = 1) -> None:
        self.source = source
        self.max_inflight = max(1, max_inflight) if isinstance(source, ApplianceReplay) else 1
        """Sampling requests in flight at most: a batch during which the consumer found
        nothing ready starts another sampler (its own connection, sampling_view()), so
        the round trip hides behind training; 1 for a source that is not networked."""
        self.samplers: list[threading.Thread] = []
        self.views: list[Replay] = []
        self.n = n
        self.beta = beta
        self.convert = convert
        self.q: queue.Queue[Any] = queue.Queue(maxsize=max(1, depth))
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="prefetch", daemon=True)
        codec = getattr(source, "codec", None)
        self.codec: TransitionCodec | None = codec if isinstance(codec, TransitionCodec) \
            else None
        if self.codec is not None:
            self.codec.parallel = 1
        self.starved = 0
        """Calls of get() that found no batch ready."""
        self.most_parallel = 1
        """The most decode threads used at once."""

    def start(self) -> Prefetcher:
        self.thread.start()
        return self

    def _more(self) -> None:
        """One more sampler on its own connection (no codec adaptation on it)."""
        view = self.source.sampling_view()
        self.views.append(view)
        t = threading.Thread(target=self._run, args=(view, False), daemon=True,
                             name=f"prefetch-{len(self.samplers) + 1}")
        self.samplers.append(t)
        t.start()

    def _run(self, source: Replay | None = None, lead: bool = True) -> None:
        src = source or self.source
        try:
            while not self.stop.is_set():
                starved = self.starved
                sampled = src.sample(self.n, self.beta)
                if sampled is None:  # the rate limiter held it: ask again
                    continue
                item = self.convert(sampled)
                waited = False
                while not self.stop.is_set():
                    try:
                        self.q.put(item, block=waited, timeout=0.1)
                        break
                    except queue.Full:
                        waited = True
                if not lead:
                    continue
                behind = self.starved > starved
                self._adapt(behind=behind, ahead=waited)
                if behind and not waited and 1 + len(self.samplers) < self.max_inflight:
                    self._more()
        except BaseException as e:
            self.error = e

    def _adapt(self, behind: bool, ahead: bool) -> None:
        c = self.codec
        if c is None:
            return
        if behind and not ahead:
            c.parallel = min(c.threads, c.parallel + 1)
        elif ahead:
            c.parallel = max(1, c.parallel - 1)
        self.most_parallel = max(self.most_parallel, c.parallel)

    def limited(self) -> str | None:
        """Why the source's rate limiter holds the sampler now (None: it does not)."""
        return getattr(self.source, "limited", None)

    def get(self, timeout: float = 30.0, stop: threading.Event | None = None,
            on_wait: Callable[[str | None], bool] | None = None,
            wait_every: float = 5.0) -> Any:
        """The next batch; None at once when `stop` (the caller's shutdown flag) is set,
        so a SIGTERM is not held up by a sampler stuck on the network.

        Waiting that the table's rate limiter imposes (MIN_SIZE while the table fills,
        the sample-to-insert ratio after) does not count towards ``timeout``; every
        ``wait_every`` seconds of waiting ``on_wait`` gets the limiter's reason (None if
        it is not the limiter) and returns False to give up (get returns None)."""
        deadline = timeout
        if stop is not None and stop.is_set():
            return None
        try:
            return self.q.get_nowait()
        except queue.Empty:
            self.starved += 1
        waited = 0.0
        while True:
            if stop is not None and stop.is_set():
                return None
            try:
                return self.q.get(timeout=min(0.1, deadline))
            except queue.Empty:
                if self.error is not None:
                    raise RuntimeError(f"the sampling thread failed: {self.error}") \
                        from self.error
                waited += 0.1
                if on_wait is not None and waited >= wait_every:
                    waited = 0.0
                    if not on_wait(self.limited()):
                        return None
                if self.limited() is None:
                    deadline -= 0.1
                if deadline <= 0 or self.stop.is_set():
                    raise TimeoutError("no batch from the sampling thread") from None

    def close(self) -> None:
        """Stop sampling; a thread still blocked in the source is left to die with the
        process (it is a daemon), so shutdown never waits on the network."""
        self.stop.set()
        deadline = time.monotonic() + 1.0  # one second for every sampler together
        self.thread.join(timeout=1)
        for t, v in zip(self.samplers, self.views, strict=False):
            t.join(timeout=max(0.0, deadline - time.monotonic()))
            if not t.is_alive():  # one still blocked is left to die with the process
                v.close()
