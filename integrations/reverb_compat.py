"""A subset of Reverb's Python client API over the appliance (no TensorFlow).

    from inreplay.integrations import reverb_compat as reverb

    server = reverb.Server(tables=[reverb.Table(
        name="my_table", sampler=reverb.selectors.Prioritized(0.8),
        remover=reverb.selectors.Fifo(), max_size=1000,
        rate_limiter=reverb.rate_limiters.MinSize(1))])
    client = reverb.Client(f"localhost:{server.port}")
    client.insert([0, 1], priorities={"my_table": 1.0})
    for s in client.sample("my_table", num_samples=2):
        print(s.info.key, s.info.probability, s.data)

What maps onto what: a ``Table`` is one REPLAY.CREATE ... TRAJECTORY (``max_size`` the
capacity, the sampler and remover selectors by name, ``Prioritized(e)`` the alpha,
``max_times_sampled``; ``MinSize(n)`` MIN_SIZE n, ``SampleToInsertRatio(spi, n, e)``
SAMPLES_PER_INSERT / MIN_SIZE / ERROR_BUFFER, ``Queue(n)`` / ``Stack(n)`` and
``Table.queue`` / ``Table.stack`` QUEUE n / STACK n). Every item is a trajectory over
episode streams: ``Client.insert`` appends one step to a stream of its own and creates a
one-step item in each table of ``priorities``; ``TrajectoryWriter`` is Reverb's, over
``pyctl.trajectory.TrajectoryWriter``.

Data is a nested structure of dicts, lists and tuples of arrays (or numbers), as Reverb
takes it; a field indexed with an int in ``history`` comes back without a time axis, a
slice with one (as in Reverb). What differs from Reverb is listed in docs/reverb.md.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import redis

from pyctl.client import ReplayClient
from pyctl.errors import RateLimited, replay_error
from pyctl.trajectory import StepRef, create_trajectory_table, sample_trajectories
from pyctl.trajectory import TrajectoryWriter as _Writer

__all__ = ["Client", "ReplaySample", "SampleInfo", "Server", "Table", "TrajectoryDataset",
           "TrajectoryWriter", "rate_limiters", "selectors"]

ROOT = Path(__file__).resolve().parent.parent


# ---- selectors and rate limiters ------------------------------------------------------
class _Selector:
    name = ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class _Uniform(_Selector):
    name = "uniform"


class _Prioritized(_Selector):
    name = "prioritized"

    def __init__(self, priority_exponent: float) -> None:
        self.priority_exponent = float(priority_exponent)


class _Fifo(_Selector):
    name = "fifo"


class _Lifo(_Selector):
    name = "lifo"


class _MinHeap(_Selector):
    name = "minheap"


class _MaxHeap(_Selector):
    name = "maxheap"


class selectors:  # noqa: N801 - Reverb's module name
    Uniform = _Uniform
    Prioritized = _Prioritized
    Fifo = _Fifo
    Lifo = _Lifo
    MinHeap = _MinHeap
    MaxHeap = _MaxHeap


@dataclass(frozen=True)
class _MinSize:
    min_size_to_sample: int

    def options(self) -> dict[str, Any]:
        return {"min_size": int(self.min_size_to_sample)}


@dataclass(frozen=True)
class _SampleToInsertRatio:
    samples_per_insert: float
    min_size_to_sample: int
    error_buffer: float | tuple[float, float]

    def options(self) -> dict[str, Any]:
        e = self.error_buffer
        if isinstance(e, tuple):  # Reverb's (min, max) diff: the appliance's is symmetric
            lo, hi = e
            e = (hi - lo) / 2
        return {"samples_per_insert": float(self.samples_per_insert),
                "min_size": int(self.min_size_to_sample), "error_buffer": float(e)}


@dataclass(frozen=True)
class _Queue:
    size: int

    def options(self) -> dict[str, Any]:
        return {"queue": True}


@dataclass(frozen=True)
class _Stack:
    size: int

    def options(self) -> dict[str, Any]:
        return {"stack": True}


class rate_limiters:  # noqa: N801 - Reverb's module name
    MinSize = _MinSize
    SampleToInsertRatio = _SampleToInsertRatio
    Queue = _Queue
    Stack = _Stack


# ---- tables and the server ------------------------------------------------------------
class Table:
    """Reverb's Table: made on the appliance by Server (or create_on)."""

    def __init__(self, name: str, sampler: _Selector, remover: _Selector, max_size: int,
                 rate_limiter: Any, max_times_sampled: int = 0, signature: Any = None,
                 ) -> None:
        self.name, self.sampler, self.remover = name, sampler, remover
        self.max_size, self.rate_limiter = int(max_size), rate_limiter
        self.max_times_sampled, self.signature = int(max_times_sampled), signature

    @classmethod
    def queue(cls, name: str, max_size: int, signature: Any = None) -> Table:
        """Reverb's Table.queue: fifo, each item sampled once, inserts wait when full."""
        return cls(name, selectors.Fifo(), selectors.Fifo(), max_size,
                   rate_limiters.Queue(max_size), 1, signature)

    @classmethod
    def stack(cls, name: str, max_size: int, signature: Any = None) -> Table:
        return cls(name, selectors.Lifo(), selectors.Lifo(), max_size,
                   rate_limiters.Stack(max_size), 1, signature)

    def options(self) -> dict[str, Any]:
        """REPLAY.CREATE's options for this table (ReplayClient.create's keywords)."""
        rl = self.rate_limiter
        if isinstance(rl, _Queue | _Stack):
            if rl.size != self.max_size:
                raise ValueError(f"table {self.name!r}: a {type(rl).__name__[1:]} rate limiter "
                                 f"of {rl.size} on a table of {self.max_size}: the appliance's "
                                 f"queue and stack hold max_size items")
            return rl.options()
        opts: dict[str, Any] = {"sampler": self.sampler.name, "remover": self.remover.name}
        if isinstance(self.sampler, _Prioritized):
            opts["alpha"] = self.sampler.priority_exponent
        if self.max_times_sampled:
            opts["max_times_sampled"] = self.max_times_sampled
        if rl is not None:
            opts.update(rl.options())
        return opts

    def create_on(self, client: ReplayClient) -> None:
        create_trajectory_table(client, self.name, self.max_size, **self.options())


class Server:
    """Reverb's Server: starts an appliance (python -m pyctl start) on 127.0.0.1:port
    (a free one when port is None) and makes the tables."""

    def __init__(self, tables: Sequence[Table], port: int | None = None,
                 checkpointer: Any = None) -> None:
        if checkpointer is not None:
            raise NotImplementedError("checkpointer: the appliance snapshots with pyctl "
                                      "start --dir (see the README)")
        if port is None:
            import socket

            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
        self.port = port
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "pyctl", "start", "--listen", f"127.0.0.1:{port}"],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        rc = ReplayClient("127.0.0.1", port)
        while True:
            try:
                rc.redis.ping()
                break
            except redis.ConnectionError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    err = self._proc.stderr.read().decode() if self._proc.stderr else ""
                    self.stop()
                    raise RuntimeError(f"the appliance did not start: {err[-2000:]}") from None
                time.sleep(0.05)
        try:
            for t in tables:
                t.create_on(rc)
        finally:
            rc.close()

    def localhost_client(self) -> Client:
        return Client(f"localhost:{self.port}")

    def stop(self) -> int:
        """SIGTERM the appliance; its exit code (0: a clean stop)."""
        if self._proc.poll() is None:
            self._proc.terminate()
        return self._proc.wait(15)

    def wait(self) -> None:
        self._proc.wait()


# ---- nested structures ----------------------------------------------------------------
def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """path -> leaf; a list's index is '#i', a tuple's '$i', a dict's key as is."""
    if isinstance(data, Mapping):
        out: dict[str, Any] = {}
        for k, v in data.items():
            if not isinstance(k, str) or "/" in k or k[:1] in "#$=":
                raise ValueError(f"key {k!r}: keys are strings without '/' that do not start "
                                 f"with '#', '$' or '='")
            out.update(_flatten(v, f"{prefix}{k}/"))
        return out
    if isinstance(data, list | tuple):
        mark = "#" if isinstance(data, list) else "$"
        out = {}
        for i, v in enumerate(data):
            out.update(_flatten(v, f"{prefix}{mark}{i}/"))
        return out
    return {prefix[:-1] if prefix else "$": data}


def _unflatten(flat: Mapping[str, Any]) -> Any:
    if list(flat) == ["$"]:
        return flat["$"]
    tree: dict[str, Any] = {}
    for path, v in flat.items():
        node = tree
        parts = path.split("/")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = v
    return _rebuild(tree)


def _rebuild(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    keys = list(node)
    kids = {k: _rebuild(v) for k, v in node.items()}
    if keys and all(k[:1] == "#" for k in keys):
        return [kids[k] for k in sorted(keys, key=lambda k: int(k[1:]))]
    if keys and all(k[:1] == "$" for k in keys):
        return tuple(kids[k] for k in sorted(keys, key=lambda k: int(k[1:])))
    return kids


# ---- client ---------------------------------------------------------------------------
@dataclass
class SampleInfo:
    key: int
    probability: float
    table_size: int
    priority: float
    times_sampled: int


@dataclass
class ReplaySample:
    info: SampleInfo
    data: Any


@dataclass(frozen=True)
class TableInfo:
    name: str
    max_size: int
    current_size: int
    sampler: str
    remover: str
    max_times_sampled: int
    num_episodes: int = 0


_streams = itertools.count()


def _address(server_address: str) -> tuple[str, int]:
    host, _, port = server_address.rpartition(":")
    return ("127.0.0.1" if host in ("", "localhost") else host), int(port)


class Client:
    """Reverb's Client(server_address) on the appliance at HOST:PORT."""

    def __init__(self, server_address: str) -> None:
        self.server_address = server_address
        self._rc = ReplayClient(*_address(server_address))
        self._insert_writers: dict[tuple[Any, ...], TrajectoryWriter] = {}

    def insert(self, data: Any, priorities: Mapping[str, float]) -> None:
        """One step of ``data`` as an item of each table in ``priorities``."""
        flat = _flatten(data)
        sig = tuple((k, np.asarray(v).shape, np.asarray(v).dtype.str) for k, v in flat.items())
        w = self._insert_writers.get(sig)
        if w is None:
            w = self._insert_writers[sig] = self.trajectory_writer(1)
        w.append(data)
        ref = w.history
        for table, p in priorities.items():
            w.create_item(table, p, _map(lambda c: c[-1], ref))
        w.flush()

    def sample(self, table: str, num_samples: int = 1) -> Iterator[ReplaySample]:
        """num_samples draws (one REPLAY.SAMPLE), each a ReplaySample(info, data); waits
        while the table's rate limiter holds sampling, as Reverb's does."""
        return self._samples(table, int(num_samples), 0.0)

    def _samples(self, table: str, n: int, timeout: float) -> Iterator[ReplaySample]:
        s = sample_trajectories(self._rc, table, n, info=True, timeout=timeout)
        return self._unpack(s, n)

    @staticmethod
    def _unpack(s: Any, num_samples: int) -> Iterator[ReplaySample]:
        assert s.info is not None
        cols = s.columns
        for j in range(int(num_samples)):
            flat = {}
            for name, a in cols.items():
                if name.startswith("="):  # one step indexed with an int: no time axis
                    flat[name[1:]] = a[j, 0]
                else:
                    flat[name] = a[j]
            yield ReplaySample(
                SampleInfo(int(s.ids[j]), float(s.info.probability[j]), s.info.table_size,
                           float(s.info.priority[j]), int(s.info.times_sampled[j])),
                _unflatten(flat))

    def mutate_priorities(self, table: str, updates: Mapping[int, float] | None = None,
                          deletes: Sequence[int] | None = None) -> None:
        if deletes:
            raise NotImplementedError("deletes: the appliance has no item delete command")
        if updates:
            self._rc.update(table, list(updates), list(updates.values()))

    def update_priorities(self, table: str, updates: Mapping[int, float]) -> None:
        self.mutate_priorities(table, updates)

    def reset(self, table: str) -> None:
        """Empty the table: dropped and made again with the options it had."""
        i = self._rc.info(table)
        opts: dict[str, Any]
        if i.get("queue_size"):
            opts = {"queue": True} if i["sampler"] == "fifo" else {"stack": True}
        else:
            opts = {"sampler": i["sampler"], "remover": i["remover"], "alpha": i["alpha"],
                    "max_times_sampled": i["max_times_sampled"] or None,
                    "min_size": i["min_size"] or None,
                    "samples_per_insert": i["samples_per_insert"] or None,
                    "error_buffer": i["error_buffer"] if i["samples_per_insert"] else None}
        self._rc.drop(table)
        create_trajectory_table(self._rc, table, int(i["capacity"]), **opts)

    def server_info(self, timeout: float | None = None) -> dict[str, TableInfo]:
        out = {}
        for name in self._rc.tables():
            i = self._rc.info(name)
            out[name] = TableInfo(name, int(i["capacity"]), int(i["size"]), str(i["sampler"]),
                                  str(i["remover"]), int(i["max_times_sampled"]))
        return out

    def checkpoint(self) -> str:
        raise NotImplementedError("checkpoint: the appliance snapshots its tables itself "
                                  "(pyctl start --dir; see the README)")

    def trajectory_writer(self, num_keep_alive_refs: int, *,
                          validate_items: bool = True) -> TrajectoryWriter:
        return TrajectoryWriter(self, num_keep_alive_refs)

    def close(self) -> None:
        for w in self._insert_writers.values():
            w.close()
        self._rc.close()


def _map(fn: Any, tree: Any) -> Any:
    if isinstance(tree, Mapping):
        return {k: _map(fn, v) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(_map(fn, v) for v in tree)
    return fn(tree)


class TrajectoryDataset:
    """Reverb's TrajectoryDataset as a NumPy iterator (no TensorFlow): yields
    ReplaySample(info, data) one at a time, fetched ``max_in_flight_samples_per_worker``
    per REPLAY.SAMPLE. ``rate_limiter_timeout_ms``: -1 waits for as long as the table's
    rate limiter holds sampling; otherwise the iteration ends once one wait lasted that
    long (Reverb's end of dataset). ``max_samples``: stop after that many (-1: never)."""

    def __init__(self, server_address: str, table: str, max_in_flight_samples_per_worker: int,
                 num_workers_per_iterator: int = -1, max_samples_per_stream: int = -1,
                 rate_limiter_timeout_ms: int = -1, max_samples: int = -1) -> None:
        if max_in_flight_samples_per_worker < 1:
            raise ValueError("max_in_flight_samples_per_worker must be at least 1")
        self.server_address, self.table = server_address, table
        self.batch = int(max_in_flight_samples_per_worker)
        self.timeout = 0.0 if rate_limiter_timeout_ms < 0 else max(
            rate_limiter_timeout_ms / 1000.0, 1e-3)
        self.max_samples = int(max_samples)

    def __iter__(self) -> Iterator[ReplaySample]:
        client = Client(self.server_address)
        left = self.max_samples
        try:
            while left != 0:
                n = self.batch if left < 0 else min(self.batch, left)
                try:
                    got = list(client._samples(self.table, n, self.timeout))
                except redis.ResponseError as e:  # decoded by pyctl.errors' one table
                    if isinstance(replay_error(e), RateLimited):
                        return  # the wait ran out: the end of the dataset
                    raise
                yield from got
                left = left - n if left > 0 else left
        finally:
            client.close()


@dataclass(frozen=True)
class _Col:
    """A column of an item: steps of one field; squeeze: taken with an int index (no time
    axis when sampled)."""

    ref: StepRef
    squeeze: bool


class _Ref:
    """One field's column in history: [int] one step (no time axis), [slice] steps."""

    def __init__(self, writer: TrajectoryWriter, path: str) -> None:
        self._w, self.path = writer, path

    def __getitem__(self, key: int | slice) -> _Col:
        assert self._w._w is not None
        return _Col(self._w._w.history[self.path][key], isinstance(key, int))


class TrajectoryWriter:
    """Reverb's TrajectoryWriter: append steps (nested structures), history, create_item,
    flush, end_episode, close. The stream is declared at the first append (the steps'
    structure, shapes and dtypes are then fixed for the writer)."""

    def __init__(self, client: Client, num_keep_alive_refs: int) -> None:
        self._client = client
        self._keep = max(int(num_keep_alive_refs), 1)
        self._w: _Writer | None = None
        self._structure: Any = None

    def append(self, data: Any) -> None:
        flat = _flatten(data)
        if self._w is None:
            sig = {k: (np.asarray(v).shape, np.asarray(v).dtype) for k, v in flat.items()}
            name = f"reverb-{os.getpid()}-{next(_streams)}"
            self._w = _Writer(self._client._rc, name, sig,
                              history=max(1024, 2 * self._keep), item_timeout=0)
            self._structure = data
        self._w.append(flat)

    @property
    def history(self) -> Any:
        """The appended steps' fields, in the structure of a step: ref[-1], ref[-3:]."""
        if self._w is None:
            raise RuntimeError("history before the first append")
        paths = {k: _Ref(self, k) for k in self._w.signature}
        return _unflatten(paths)

    def create_item(self, table: str, priority: float, trajectory: Any) -> None:
        assert self._w is not None
        cols: dict[str, StepRef] = {}
        for path, col in _flatten(trajectory).items():
            if not isinstance(col, _Col):
                raise TypeError(f"trajectory leaf {path!r} is a {type(col).__name__}, not a "
                                f"writer.history[...][...] reference")
            cols[("=" if col.squeeze else "") + path] = col.ref
        self._w.create_item(table, priority, cols)

    def flush(self, block_until_num_items: int = 0, timeout_ms: int | None = None) -> None:
        if self._w is not None:
            self._w.flush()

    def end_episode(self, clear_buffers: bool = True, timeout_ms: int | None = None) -> None:
        if self._w is not None:
            self._w.end_episode()

    def close(self) -> None:
        if self._w is not None:
            self._w.close()
            self._w = None

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


