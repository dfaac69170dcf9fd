"""Trajectories stored once: a writer shaped like Reverb's TrajectoryWriter
and a sampler that returns each column of a TRAJECTORY table as one array.

    w = TrajectoryWriter(rc, "actor-0", {"obs": ((84, 84), np.uint8), "action": ((), np.int64),
                                         "reward": ((), np.float32)})
    w.append({"obs": frame, "action": a, "reward": r})
    ...
    w.create_item("replay", priority=1.0, trajectory={
        "obs": w.history["obs"][-4:],             # the last 4 frames
        "rewards": w.history["reward"][-3:]})
    w.flush()                                     # one round trip: REPLAY.APPEND + REPLAY.ITEM
    s = sample_trajectories(rc, "replay", 32)     # s.columns["obs"]: (32, 4, 84, 84) uint8

Each step is stored once on the server, in chunks shared by every item (and table) that
references it; a chunk is freed when no item references it and the stream has moved past
it (HISTORY steps). flush() pipelines its APPEND and ITEM commands in one round trip;
each command is all-or-nothing (an ITEM error leaves the appended steps, which nothing
references and which are freed as the stream moves on). Server errors come back as the
classes of pyctl.errors (NoSuchTableError, EmptyTableError, ...), as ReplayClient's do,
flush()'s too: the first failed command of its round trip, with the server's message.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
import redis

from pyctl import _jax
from pyctl.client import ReplayClient, SampleInfo, create_args, sample_args
from pyctl.errors import replay_error

__all__ = [
    "ReplayGroup",
    "StepRef",
    "TrajectorySample",
    "TrajectoryWriter",
    "chunk_stats",
    "create_trajectory_table",
    "flush_writers",
    "sample_trajectories",
]


@runtime_checkable
class ReplayGroup(Protocol):
    """What the functions here need of a replay group (pyctl.sharded.ShardedReplayClient):
    its shards, the shard of a stream, and its own trajectory calls, to which
    create_trajectory_table, sample_trajectories and chunk_stats hand a group."""

    @property
    def shards(self) -> Sequence[ReplayClient]: ...

    def stream_shard(self, stream: str) -> int: ...

    def create_trajectory_table(self, table: str, capacity: int, **opts: Any) -> None: ...

    def sample_trajectories(self, table: str, n: int, *, beta: float | None = None,
                            info: bool = False, torch: bool = False,
                            timeout: float | None = None) -> TrajectorySample: ...

    def chunk_stats(self) -> dict[str, Any]: ...


Client = ReplayClient | redis.Redis | ReplayGroup
"""What the functions here take: a client, a redis-py connection, or a replay group."""


def _conn(client: Client, stream: str | None = None) -> redis.Redis:
    if isinstance(client, ReplayClient):
        return client.redis
    if _group(client):  # a replay group: the stream's shard (ShardedReplayClient.stream_shard)
        if stream is None:
            raise TypeError("a replay group has no single connection: use its own method")
        return client.shards[client.stream_shard(stream)].redis
    return client  # type: ignore[return-value]


def _call(r: redis.Redis, *args: Any) -> Any:
    """One command; a REPLAY error comes back as its class (pyctl.errors)."""
    try:
        return r.execute_command(*args)
    except redis.ResponseError as e:
        raise replay_error(e) from None


def _group(client: object) -> bool:
    return not isinstance(client, ReplayClient | redis.Redis) and isinstance(client,
                                                                          ReplayGroup)


@dataclass(frozen=True)
class StepRef:
    """Steps [first, first + length) of one field of the current episode of ``stream``
    ("": the writer's own; another writer's history names its stream, so one item can
    reference steps of two streams, e.g. a sequence and a state stored once per item)."""

    field: str
    first: int
    length: int
    stream: str = ""
    """The stream the steps are in ("": the writer's own stream)."""


class _Column:
    def __init__(self, writer: TrajectoryWriter, name: str) -> None:
        self._w, self._name = writer, name

    def __getitem__(self, key: int | slice) -> StepRef:
        n = self._w.episode_steps
        if isinstance(key, int):
            i = key + n if key < 0 else key
            if not 0 <= i < n:
                raise IndexError(f"step {key} of field {self._name!r}: the episode has {n} steps")
            return StepRef(self._name, i, 1, self._w.stream)
        start, stop, step = key.indices(n)
        if step != 1 or stop <= start:
            raise IndexError(f"{key} of field {self._name!r}: use a non-empty slice of "
                             f"consecutive steps (the episode has {n} steps)")
        return StepRef(self._name, start, stop - start, self._w.stream)


class _History:
    def __init__(self, writer: TrajectoryWriter) -> None:
        self._w = writer

    def __getitem__(self, name: str) -> _Column:
        if name not in self._w.signature:
            raise KeyError(f"no field {name!r}: the stream has {list(self._w.signature)}")
        return _Column(self._w, name)


class TrajectoryWriter:
    """Appends steps to one episode stream and creates items over them (Reverb's
    TrajectoryWriter). signature: field -> (shape, dtype), declared once per stream."""

    def __init__(self, client: Client, stream: str,
                 signature: Mapping[str, tuple[tuple[int, ...] | int, npt.DTypeLike]], *,
                 chunk_steps: int = 16, history: int = 1024, compress: int = 0,
                 item_timeout: float | None = None) -> None:
        """item_timeout: each REPLAY.ITEM waits up to that many seconds (0: forever) while
        the table's rate limiter holds it (None: a held ITEM fails at once with
        RateLimited)."""
        self.item_timeout = item_timeout
        self.redis = _conn(client, stream)  # a group: the shard of the stream's name
        self.stream = stream
        self.signature: dict[str, tuple[tuple[int, ...], np.dtype[Any]]] = {}
        args: list[Any] = ["REPLAY.STREAM", stream, "FIELDS", len(signature)]
        for name, (shape, dtype) in signature.items():
            shp = (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)
            dt = np.dtype(dtype)
            self.signature[name] = (shp, dt)
            args += [name, dt.name, ",".join(str(d) for d in shp)]
        args += ["CHUNK", int(chunk_steps), "HISTORY", int(history)]
        if compress:  # zstd level for full chunks (a server built with libzstd)
            args += ["COMPRESS", int(compress)]
        _call(self.redis, *args)
        self.declaration: list[Any] = args  # REPLAY.STREAM's arguments, to declare it elsewhere
        self.history = _History(self)
        self.episode_steps = 0  # steps of this episode, buffered ones included
        self._steps: list[Mapping[str, Any]] = []
        self._items: list[Any] = []  # REPLAY.ITEM argument lists, one per item
        self._item_tables: list[str] = []

    def append(self, step: Mapping[str, Any]) -> None:
        """Buffer one step (every field of the signature, of its shape)."""
        missing = set(self.signature) - set(step)
        if missing:
            raise ValueError(f"step lacks fields {sorted(missing)}")
        for name, (shape, dtype) in self.signature.items():
            a = np.asarray(step[name])
            if a.shape != shape:
                raise ValueError(f"field {name!r} has shape {a.shape}, the stream has {shape}")
            if not np.can_cast(a.dtype, dtype, "same_kind"):
                raise ValueError(f"field {name!r} has dtype {a.dtype}, the stream has {dtype}")
        self._steps.append(step)
        self.episode_steps += 1

    def create_item(self, table: str, priority: float | None,
                    trajectory: Mapping[str, StepRef]) -> None:
        """Buffer an item of table whose columns reference steps (from self.history, or
        another writer's history: flush them together with flush_writers); priority None
        means the table's max. Sent by flush()."""
        args: list[Any] = ["MAX" if priority is None else repr(float(priority)), len(trajectory)]
        for col, ref in trajectory.items():
            args += [col, ref.stream or self.stream, ref.field, ref.first, ref.length]
        self._items.append(args)
        self._item_tables.append(table)

    def flush(self) -> list[int]:
        """Send the buffered steps and items in one round trip; returns the new ids."""
        return flush_writers(self)

    def _queue_appends(self, pipe: Any) -> None:
        if self._steps:
            bulks = [np.ascontiguousarray(
                np.stack([np.asarray(s[name], dtype) for s in self._steps])).tobytes()
                for name, (_, dtype) in self.signature.items()]
            pipe.execute_command("REPLAY.APPEND", self.stream, len(self._steps), *bulks)
            self._steps = []

    def _queue_items(self, pipe: Any) -> int:
        # consecutive items of one table go in one REPLAY.ITEM
        groups: list[tuple[str, list[Any]]] = []
        for table, args in zip(self._item_tables, self._items, strict=True):
            if groups and groups[-1][0] == table:
                groups[-1][1].extend(args)
            else:
                groups.append((table, list(args)))
        wait = [] if self.item_timeout is None else ["TIMEOUT", repr(float(self.item_timeout))]
        for table, args in groups:
            pipe.execute_command("REPLAY.ITEM", table, *args, *wait)
        self._items, self._item_tables = [], []
        return len(groups)

    def end_episode(self) -> list[int]:
        """Flush, then end the episode: steps restart at 0 and the stream lets go of
        its chunks (items keep what they reference)."""
        ids = self.flush()
        _call(self.redis, "REPLAY.STREAM", self.stream, "END")
        self.episode_steps = 0
        return ids

    def close(self) -> None:
        """Flush and drop the stream (its chunks stay while items reference them)."""
        self.flush()
        _call(self.redis, "REPLAY.STREAM", self.stream, "DROP")


def flush_writers(*writers: TrajectoryWriter) -> list[int]:
    """Send the buffered steps of every writer, then their items (which may reference
    steps of any of them), in one round trip on the first writer's connection; returns
    the new ids. The writers' streams must be on that server."""
    if not writers:
        return []
    pipe = writers[0].redis.pipeline(transaction=False)
    for w in writers:
        w._queue_appends(pipe)
    groups = sum(w._queue_items(pipe) for w in writers)
    if not len(pipe):
        return []
    replies = pipe.execute(raise_on_error=False)
    failed = next((x for x in replies if isinstance(x, redis.ResponseError)), None)
    if failed is not None:  # the first failed command, as the server said it
        raise replay_error(failed)
    ids: list[int] = []
    for r in replies[len(replies) - groups:] if groups else []:
        ids.extend(int(x) for x in r)
    return ids


def create_trajectory_table(client: Client,
                            table: str, capacity: int, **opts: Any) -> None:
    """REPLAY.CREATE ... TRAJECTORY (options as ReplayClient.create's: queue, stack and
    the rate limiter hold REPLAY.ITEM as they hold adds); on every shard of a replay group."""
    if _group(client):
        return client.create_trajectory_table(table, capacity, **opts)  # type: ignore[union-attr]
    _call(_conn(client), *create_args(table, capacity, **opts), "TRAJECTORY")


@dataclass
class TrajectorySample:
    ids: npt.NDArray[np.int64]
    weights: npt.NDArray[np.float32]
    columns: dict[str, Any] = field(default_factory=dict)
    """column -> array (n, length, *shape) (a torch tensor with torch=True)."""
    info: SampleInfo | None = None


Columns = list[tuple[str, np.dtype[Any], tuple[int, ...], int]]
"""A TRAJECTORY table's columns (REPLAY.COLUMNS): name, dtype, shape per step, steps."""

_columns_cache: dict[tuple[int, str], Columns] = {}


def _columns(r: redis.Redis, table: str) -> Columns:
    key = (id(r), table)
    if key not in _columns_cache:
        out = []
        for name, dt, shape, length in _call(r, "REPLAY.COLUMNS", table):
            s = shape.decode() if isinstance(shape, bytes) else str(shape)
            out.append(((name.decode() if isinstance(name, bytes) else str(name)),
                        np.dtype(dt.decode() if isinstance(dt, bytes) else str(dt)),
                        tuple(int(d) for d in s.split(",") if d), int(length)))
        if not out:
            return out  # no item yet: ask again next time
        _columns_cache[key] = out
    return _columns_cache[key]


@_jax.option
def sample_trajectories(client: Client, table: str, n: int, *, beta: float | None = None,
                        info: bool = False, torch: bool = False,
                        timeout: float | None = None, jax: bool = False) -> TrajectorySample:
    """One REPLAY.SAMPLE of a TRAJECTORY table: the server assembles each item's columns
    and returns each column of the n items as one bulk. A replay group samples with
    exact global probabilities (ShardedReplayClient.sample_trajectories). jax=True:
    weights and columns as jax.Arrays (DLPack, pyctl/_jax.py)."""
    if _group(client):
        return client.sample_trajectories(  # type: ignore[union-attr]
            table, n, beta=beta, info=info, torch=torch, timeout=timeout)
    r = _conn(client)
    raw = _call(r, *sample_args(table, n, beta=beta, timeout=timeout, withinfo=info))
    cols = reply_columns(r, table, raw[2], n)
    if cols is None:
        raise ValueError(f"table {table!r} has columns that do not match its reply of {n} "
                         f"items")
    return TrajectorySample(np.frombuffer(raw[0], "<i8").copy(),
                            np.frombuffer(raw[1], "<f4").copy(),
                            join_columns(cols, [raw[2]], n, torch),
                            SampleInfo.parse(raw[-1], n) if info else None)


def reply_columns(r: redis.Redis, table: str, bulks: Sequence[bytes], m: int
                  ) -> Columns | None:
    """The table's columns on r (REPLAY.COLUMNS, cached) checked against a reply of m
    items (one bulk per column); asked again once when they do not fit (the table was
    made again). None: they do not fit."""
    for again in (False, True):
        if again:
            _columns_cache.pop((id(r), table), None)
        cols = _columns(r, table)
        if len(cols) == len(bulks) and all(
                len(b) == m * length * dt.itemsize * int(np.prod(shape))
                for (_, dt, shape, length), b in zip(cols, bulks, strict=True)):
            return cols
    return None


def join_columns(cols: Columns, replies: Sequence[Sequence[bytes]], n: int,
                 torch: bool = False) -> dict[str, Any]:
    """Each column as one new array (n, length, *shape): the replies' bulks of it (one
    reply per server, in order) back to back; torch tensors with torch=True."""
    out: dict[str, Any] = {}
    for j, (name, dt, shape, length) in enumerate(cols):
        a = np.empty((n, length, *shape), dt)
        flat, at = a.reshape(-1).view(np.uint8), 0
        for bulks in replies:
            b = bulks[j]
            flat[at:at + len(b)] = np.frombuffer(b, np.uint8)
            at += len(b)
        if torch:
            import torch as th
            a = th.from_numpy(a)
        out[name] = a
    return out


def chunk_stats(client: Client) -> dict[str, Any]:
    """REPLAY.CHUNKS: streams, chunks, chunk_bytes, references, memory, ... (a replay
    group's summed, with "shards": each shard's)."""
    if _group(client):
        return client.chunk_stats()  # type: ignore[union-attr]
    raw = _call(_conn(client), "REPLAY.CHUNKS")
    if isinstance(raw, dict):
        return {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in raw.items()}
    return {raw[i].decode(): int(raw[i + 1]) for i in range(0, len(raw), 2)}
