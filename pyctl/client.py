"""ReplayClient: the REPLAY.* commands on redis-py (hiredis parser when installed).

Batches travel as one request each way; ids, weights and priorities are packed
little-endian arrays, converted with NumPy rather than per-item Python loops.

    rc = ReplayClient(port=6379)
    rc.create("replay", capacity=100_000, alpha=0.6, beta=0.4)
    ids = rc.add("replay", priorities, items)            # items: list of bytes or 2-D uint8 array
    batch = rc.sample("replay", 512, item_shape=(84, 84, 4))
    rc.update("replay", batch.ids, new_priorities)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import redis


@dataclass
class Sample:
    """One REPLAY.SAMPLE reply."""

    ids: npt.NDArray[np.int64]
    """Item ids, one per draw (an id may repeat: sampling is with replacement)."""
    weights: npt.NDArray[np.float32]
    """Importance weights (N * P(i))^-beta / max_j w_j, so at most 1."""
    items: Any
    """The items: a NumPy array of shape (n, *item_shape) when item_shape was given,
    else a list of bytes."""


def _fmt_priorities(priorities: npt.ArrayLike | None, n: int) -> list[bytes]:
    if priorities is None:
        return [b"MAX"] * n
    p = np.asarray(priorities, dtype=np.float64).reshape(-1)
    if p.shape[0] != n:
        raise ValueError(f"{p.shape[0]} priorities for {n} items")
    # repr-exact decimal strings, formatted in C by NumPy
    return np.char.encode(np.char.mod("%.17g", p), "ascii").tolist()


def _as_items(items: Sequence[bytes] | npt.NDArray[Any]) -> list[Any]:
    if isinstance(items, np.ndarray):
        arr = np.ascontiguousarray(items)
        if arr.ndim == 0:
            raise ValueError("items must be a sequence or an array with one row per item")
        rows = arr.reshape(arr.shape[0], -1).view(np.uint8)
        buf = memoryview(rows.tobytes())
        size = rows.shape[1]
        return [buf[i * size:(i + 1) * size] for i in range(rows.shape[0])]
    return list(items)


class ReplayClient:
    """A client for inreplay's replay tables (and, through .redis, its key/value store)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 6379, *,
                 connection: redis.Redis | None = None, **kwargs: Any) -> None:
        # redis-py's default protocol (RESP3 from redis-py 8); protocol=2 in kwargs works too
        self.redis: redis.Redis = connection or redis.Redis(host=host, port=port, **kwargs)

    def close(self) -> None:
        self.redis.close()

    def __enter__(self) -> ReplayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create(self, table: str, capacity: int, *, alpha: float | None = None,
               beta: float | None = None, epsilon: float | None = None,
               maxbytes: int | None = None) -> None:
        """REPLAY.CREATE; raises redis.ResponseError if the table exists."""
        args: list[Any] = ["REPLAY.CREATE", table, "CAPACITY", int(capacity)]
        for name, v in (("ALPHA", alpha), ("BETA", beta), ("EPSILON", epsilon)):
            if v is not None:
                args += [name, repr(float(v))]
        if maxbytes is not None:
            args += ["MAXBYTES", int(maxbytes)]
        self.redis.execute_command(*args)

    def add(self, table: str, priorities: npt.ArrayLike | None,
            items: Sequence[bytes] | npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        """Insert a batch in one request; priorities None means the table's max. Returns ids."""
        rows = _as_items(items)
        if not rows:
            return np.empty(0, dtype=np.int64)
        args: list[Any] = [None] * (2 * len(rows))
        args[0::2] = _fmt_priorities(priorities, len(rows))
        args[1::2] = rows
        ids = self.redis.execute_command("REPLAY.ADD", table, *args)
        return np.asarray(ids, dtype=np.int64)

    def sample(self, table: str, n: int, *, beta: float | None = None,
               item_shape: tuple[int, ...] | None = None,
               item_dtype: npt.DTypeLike = np.uint8) -> Sample:
        """Draw n items with importance weights in one round trip.

        With item_shape the reply is REPLAY.SAMPLE ... PACKED (one bulk string)
        and the items come back as one writable array of shape (n, *item_shape):
        no Python object per item. Raises ValueError if item_shape and
        item_dtype do not match the size of the table's items.
        """
        n = int(n)
        args: list[Any] = ["REPLAY.SAMPLE", table, n]
        if beta is not None:
            args += ["BETA", repr(float(beta))]
        if item_shape is None:
            raw_ids, raw_w, raw_items = self.redis.execute_command(*args)
            ids = np.frombuffer(raw_ids, dtype="<i8").astype(np.int64, copy=False)
            weights = np.frombuffer(raw_w, dtype="<f4").astype(np.float32, copy=False)
            return Sample(ids, weights, raw_items)
        dtype = np.dtype(item_dtype)
        shape = tuple(int(d) for d in item_shape)
        want = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        raw = self.redis.execute_command(*args, "PACKED")
        body = len(raw) - 12 * n
        if body < 0 or body % n:
            raise ValueError(f"REPLAY.SAMPLE PACKED reply of {len(raw)} bytes for {n} items")
        if body // n != want:
            raise ValueError(f"item_shape {shape} of {dtype} is {want} bytes, "
                             f"but the table's items are {body // n} bytes")
        # One copy of every byte into aligned, writable arrays.
        ids = np.frombuffer(raw, dtype="<i8", count=n).astype(np.int64)
        weights = np.frombuffer(raw, dtype="<f4", count=n, offset=8 * n).astype(np.float32)
        count = n * (want // dtype.itemsize)
        items = np.frombuffer(raw, dtype=dtype, count=count, offset=12 * n).reshape((n, *shape))
        items = items.copy()
        return Sample(ids, weights, items)

    def update(self, table: str, ids: npt.ArrayLike, priorities: npt.ArrayLike) -> int:
        """New raw priorities for sampled ids; returns how many applied (stale ids skipped)."""
        i = np.ascontiguousarray(ids, dtype="<i8")
        p = np.ascontiguousarray(priorities, dtype="<f4")
        if i.shape != p.shape:
            raise ValueError(f"{i.size} ids but {p.size} priorities")
        return int(self.redis.execute_command("REPLAY.UPDATE", table, i.tobytes(), p.tobytes()))

    def info(self, table: str) -> dict[str, Any]:
        """REPLAY.INFO as a dict of ints, floats and strings."""
        raw = self.redis.execute_command("REPLAY.INFO", table)
        out: dict[str, Any] = {}
        for k, v in zip(raw[::2], raw[1::2], strict=True):
            key = k.decode()
            if isinstance(v, bytes):
                s = v.decode(errors="replace")
                try:
                    out[key] = float(s) if key != "name" else s
                except ValueError:
                    out[key] = s
            else:
                out[key] = v
        return out

    def drop(self, table: str) -> None:
        self.redis.execute_command("REPLAY.DROP", table)

    def tables(self) -> list[str]:
        return [t.decode(errors="replace") for t in self.redis.execute_command("REPLAY.LIST")]
