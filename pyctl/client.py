"""ReplayClient: the REPLAY.* commands on redis-py (hiredis parser when installed).

Batches travel as one request each way; ids, weights and priorities are packed
little-endian arrays, converted with NumPy rather than per-item Python loops.

    schema = Schema({"obs": ((84, 84, 4), np.uint8), "action": ((), np.int64),
                     "reward": ((), np.float32), "done": ((), np.bool_)})
    rc = ReplayClient(port=6379)
    rc.create("replay", capacity=100_000, alpha=0.6, beta=0.4)
    ids = rc.add("replay", td_errors, batch, schema=schema)  # batch: dict of arrays
    s = rc.sample("replay", 512, schema=schema)              # s.items: dict of arrays
    rc.update("replay", s.ids, new_td_errors)

Items can also be given without a schema: a list of bytes, NumPy arrays or torch
tensors (one per item), or one stacked array or tensor with one row per item; and
sampled as bytes or, with ``item_shape``/``item_dtype``, as one array. Every array
returned is writable and owns its memory. A batch with a bad item or priority is
rejected whole, before anything is sent, by a :class:`BatchError` naming the index.
"""

from __future__ import annotations

import math
import sys
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import redis

from pyctl import _jax, _shm, _wire
from pyctl._shm import connect  # noqa: F401  (public: pyctl.client.connect)
from pyctl.errors import (  # noqa: F401
    BadPriorityError,
    EmptyTableError,
    NoSuchTableError,
    RateLimited,
    ReplayError,
    TableExistsError,
    decode_info,
    replay_error,
)


class BatchError(ValueError):
    """A batch the client refused before sending it (the message names the index)."""


@dataclass(frozen=True)
class ItemSpec:
    """How sampled items come back: a list of bytes (packed False), or one PACKED body
    viewed as dtype with shape per item (or unpacked by a schema)."""

    packed: bool
    dtype: np.dtype = field(default_factory=lambda: np.dtype(np.uint8))
    shape: tuple[int, ...] = ()
    itemsize: int = 0
    schema: Schema | None = None
    torch: bool = False
    device: Any = None

    @classmethod
    def of(cls, item_shape: tuple[int, ...] | int | None, item_dtype: npt.DTypeLike | None,
           schema: Schema | None, torch: bool, device: Any) -> ItemSpec:
        """Check sample()'s item arguments (ValueError naming the mistake)."""
        if item_dtype is not None and item_shape is None and schema is None:
            raise ValueError("item_dtype needs item_shape: pass both (e.g. item_shape=(84, "
                             "84, 4), item_dtype=np.uint8), or neither for a list of bytes")
        if schema is not None and item_shape is not None:
            raise ValueError("pass schema or item_shape, not both")
        if schema is None and item_shape is None:
            if torch:
                raise ValueError("torch=True needs schema or item_shape")
            return cls(False)
        if schema is not None:
            return cls(True, np.dtype(np.uint8), (schema.itemsize,), schema.itemsize, schema,
                       torch, device)
        dtype = np.dtype(np.uint8 if item_dtype is None else item_dtype)
        shape = ((int(item_shape),) if isinstance(item_shape, int | np.integer)
                 else tuple(int(d) for d in item_shape))  # type: ignore[union-attr]
        return cls(True, dtype, shape, dtype.itemsize * math.prod(shape), None, torch, device)

    def decode(self, ids: npt.NDArray[np.int64], weights: npt.NDArray[np.float32],
               body: bytes | memoryview, n: int) -> Sample:
        """A Sample from the ids, weights and the n items back to back (packed), copied
        out of body into arrays of their own."""
        if len(body) != n * self.itemsize:
            what = repr(self.schema) if self.schema is not None else \
                f"item_shape {self.shape} of {self.dtype}"
            raise ValueError(f"{what} is {self.itemsize} bytes, but the table's items are "
                             f"{len(body) // max(1, n)} bytes")
        if self.schema is not None:  # unpack copies each field
            return finish_sample(ids, weights, body, n, self)
        count = n * (self.itemsize // self.dtype.itemsize)
        items = np.frombuffer(body, dtype=self.dtype, count=count)
        # one copy into an aligned, writable array
        return finish_sample(ids, weights, items.reshape((n, *self.shape)).astype(
            self.dtype.newbyteorder("=")), n, self)


def _is_torch(x: object) -> bool:
    return type(x).__module__.split(".", 1)[0] == "torch" and hasattr(x, "detach")


def _to_numpy(x: Any) -> np.ndarray:
    """A NumPy view of an array-like; torch tensors (any device) are moved to the CPU."""
    if _is_torch(x):
        return np.asarray(x.detach().cpu().numpy())
    return np.asarray(x)


@dataclass(frozen=True)
class Field:
    """One field of a transition: its shape per transition and its dtype."""

    shape: tuple[int, ...] = ()
    dtype: Any = np.float32


class Schema:
    """Named fields with fixed shapes and dtypes, packed into one fixed-size item per
    transition (like cpprb's env_dict)::

        schema = Schema({"obs": ((84, 84, 4), np.uint8), "action": ((), np.int64),
                         "next_obs": {"shape": (84, 84, 4), "dtype": np.uint8},
                         "reward": Field((), np.float32)})
        items = schema.pack(batch)       # (n, schema.itemsize) uint8, batch: dict of arrays
        batch = schema.unpack(items)     # dict of writable arrays, shape (n, *field shape)

    A field is ``(shape, dtype)``, cpprb's ``{"shape": ..., "dtype": ...}`` (dtype
    defaults to float32) or a :class:`Field`; an int shape means ``(shape,)``.
    Values are stored little-endian, without padding.
    """

    def __init__(self, fields: Mapping[str, Any]) -> None:
        if not fields:
            raise ValueError("a Schema needs at least one field")
        self.fields: dict[str, Field] = {}
        for name, spec in fields.items():
            if isinstance(spec, Field):
                f = spec
            elif isinstance(spec, Mapping):
                unknown = set(spec) - {"shape", "dtype"}
                if unknown:
                    raise ValueError(f"field {name!r}: unknown keys {sorted(unknown)}")
                f = Field(spec.get("shape", ()), spec.get("dtype", np.float32))
            elif isinstance(spec, tuple) and len(spec) == 2:
                f = Field(*spec)
            else:
                raise ValueError(f"field {name!r}: expected (shape, dtype), "
                                 f"{{'shape': ..., 'dtype': ...}} or Field, got {spec!r}")
            shape = (f.shape,) if isinstance(f.shape, int) else tuple(f.shape)
            if not all(isinstance(d, int | np.integer) and d >= 0 for d in shape):
                raise ValueError(f"field {name!r}: shape {f.shape!r} is not a tuple of ints")
            dt = np.dtype(f.dtype)
            if dt.hasobject or dt.itemsize == 0:
                raise ValueError(f"field {name!r}: dtype {dt} has no fixed size")
            self.fields[name] = Field(tuple(int(d) for d in shape), dt)
        self.dtype = np.dtype([(n, f.dtype.newbyteorder("<") if f.dtype.byteorder != "|"
                                else f.dtype, f.shape) for n, f in self.fields.items()])
        self.itemsize = self.dtype.itemsize
        """Bytes per packed transition (the table's item size)."""

    def __repr__(self) -> str:
        inner = ", ".join(f"{n!r}: ({f.shape}, {np.dtype(f.dtype).name})"
                          for n, f in self.fields.items())
        return f"Schema({{{inner}}})"

    def pack(self, batch: Mapping[str, Any] | None = None, **fields: Any) -> np.ndarray:
        """A batch of transitions (a dict, or keywords, of arrays / tensors / lists with
        one row per transition) -> uint8 array (n, itemsize), one item per row."""
        data = dict(batch or {}, **fields)
        missing = [n for n in self.fields if n not in data]
        extra = [n for n in data if n not in self.fields]
        if missing or extra:
            raise BatchError("; ".join(
                ([f"missing field(s) {missing}"] if missing else [])
                + ([f"unknown field(s) {extra}"] if extra else []))
                + f" (the schema has {list(self.fields)}); the batch was rejected whole")
        arrays = {n: _field_array(n, data[n], f) for n, f in self.fields.items()}
        first = next(iter(self.fields))
        n_rows = arrays[first].shape[0]
        for name in self.fields:
            a = arrays[name]
            if a.shape[0] != n_rows:
                raise BatchError(f"field {name!r} has {a.shape[0]} rows but {first!r} has "
                                 f"{n_rows}; the batch was rejected whole")
        rec = np.empty(n_rows, dtype=self.dtype)
        for name in self.fields:
            rec[name] = arrays[name]
        return rec.view(np.uint8).reshape(n_rows, self.itemsize)

    def unpack(self, items: Any, *, torch: bool = False, device: Any = None,
               ) -> dict[str, Any]:
        """Packed items ((n, itemsize) array, concatenated bytes or a list of bytes) ->
        dict of writable arrays of shape (n, *field shape), each owning its memory; torch
        tensors (on ``device``) with ``torch=True``."""
        if isinstance(items, list | tuple):
            items = b"".join(bytes(x) for x in items)
        buf = (np.frombuffer(items, dtype=np.uint8) if isinstance(items, bytes | bytearray
                                                                   | memoryview)
               else np.ascontiguousarray(_to_numpy(items)).reshape(-1).view(np.uint8))
        if buf.size % self.itemsize:
            raise ValueError(f"{buf.size} bytes is not a whole number of "
                             f"{self.itemsize}-byte items of {self!r}")
        rec = buf.view(self.dtype)
        out: dict[str, Any] = {}
        for name, f in self.fields.items():
            a = np.array(rec[name], dtype=np.dtype(f.dtype).newbyteorder("="), order="C")
            out[name] = a
        if torch:
            import torch as th

            out = {n: th.from_numpy(a) if device is None else th.from_numpy(a).to(device)
                   for n, a in out.items()}
        return out


def _field_array(name: str, x: Any, f: Field) -> np.ndarray:
    """One field's rows as an array (n, *f.shape); BatchError names a bad row."""
    if isinstance(x, list | tuple):
        rows = [_to_numpy(r) for r in x]
        for i, r in enumerate(rows):
            if r.shape != f.shape:
                raise BatchError(f"field {name!r}: the row at index {i} has shape {r.shape}, "
                                 f"not {f.shape}; the batch was rejected whole")
        a = np.stack(rows) if rows else np.empty((0, *f.shape), dtype=f.dtype)
    else:
        a = _to_numpy(x)
        if a.ndim == 0:
            raise BatchError(f"field {name!r} is a scalar, not one row per transition; "
                             f"the batch was rejected whole")
        if a.shape[1:] != f.shape:
            raise BatchError(f"field {name!r}: rows of shape {a.shape[1:]}, not {f.shape}; "
                             f"the batch was rejected whole")
    if a.dtype.hasobject:
        raise BatchError(f"field {name!r}: object arrays cannot be packed; "
                         f"the batch was rejected whole")
    return a


@dataclass
class SampleInfo:
    """Reverb's sample info (REPLAY.SAMPLE ... WITHINFO), one entry per draw."""

    table_size: int
    """Items in the table when the sample began."""
    probability: npt.NDArray[np.float64]
    """The probability of each draw as the sampler made it (1 for fifo/lifo/heaps)."""
    priority: npt.NDArray[np.float64]
    """Each item's stored priority ((raw + epsilon)^alpha)."""
    times_sampled: npt.NDArray[np.uint32]
    """Times each item has been sampled, this draw included."""

    @classmethod
    def parse(cls, raw: bytes | memoryview, n: int) -> SampleInfo:
        if len(raw) != 8 + 20 * n:
            raise ValueError(f"WITHINFO field of {len(raw)} bytes for {n} items")
        return cls(int(np.frombuffer(raw, "<i8", 1)[0]),
                   np.frombuffer(raw, "<f8", n, 8).astype(np.float64),
                   np.frombuffer(raw, "<f8", n, 8 + 8 * n).astype(np.float64),
                   np.frombuffer(raw, "<u4", n, 8 + 16 * n).astype(np.uint32))


@dataclass
class Sample:
    """One REPLAY.SAMPLE reply."""

    ids: npt.NDArray[np.int64]
    """Item ids, one per draw (an id may repeat: sampling is with replacement)."""
    weights: npt.NDArray[np.float32]
    """Importance weights (N * P(i))^-beta / max_j w_j, so at most 1."""
    items: Any
    """The items: a dict of arrays (or tensors) with a schema, a NumPy array of shape
    (n, *item_shape) with item_shape, else a list of bytes."""
    info: SampleInfo | None = None
    """With sample(..., info=True): probability, priority, times sampled, table size."""


def _batch_priorities(priorities: Any, n: int) -> npt.NDArray[np.float64]:
    """A batch's priorities as n checked float64 (a scalar for all n)."""
    p = _priority_array(priorities, n)
    if p.shape[0] == 1 and n > 1 and np.ndim(_to_numpy(priorities)) == 0:
        p = np.repeat(p, n)
    if p.shape[0] != n:
        raise BatchError(f"{p.shape[0]} priorities for {n} items; the batch was rejected whole")
    _check_priorities(p, n)
    return p


def _fmt_priorities(priorities: Any, n: int) -> list[bytes]:
    """Decimal strings for REPLAY.ADD; None: the table's max priority for every item."""
    if priorities is None:
        return [b"MAX"] * n
    # repr-exact decimal strings, formatted in C by NumPy
    return np.char.encode(np.char.mod("%.17g", _batch_priorities(priorities, n)),
                          "ascii").tolist()


def _priority_array(priorities: Any, n: int) -> npt.NDArray[np.float64]:
    """Priorities as float64, flat. Only numbers are priorities: a str such as '1.0', which
    NumPy would parse, or any other non-number raises BatchError naming its index."""
    try:
        a = _to_numpy(priorities)
    except (TypeError, ValueError) as e:
        raise BatchError(f"priorities: {e}; the batch was rejected whole") from None
    if a.dtype.kind in "biuf":
        return a.astype(np.float64).reshape(-1)
    # the elements as given (NumPy would have turned [1.0, 'high'] into two strings)
    given = priorities if isinstance(priorities, Sequence) and not isinstance(
        priorities, str | bytes) else a.reshape(-1).tolist() if a.ndim else [a.item()]
    for i, x in enumerate(given):
        if not isinstance(x, int | float | np.number | np.bool_):
            raise BatchError(f"priority at index {i} is {x!r} ({type(x).__name__}): priorities "
                             f"must be numbers; the batch of {n} was rejected whole")
    return a.astype(np.float64).reshape(-1)


def _check_priorities(p: np.ndarray, n: int) -> None:
    bad = np.flatnonzero(~(np.isfinite(p) & (p >= 0)))
    if bad.size:
        i = int(bad[0])
        more = f" (and {bad.size - 1} more)" if bad.size > 1 else ""
        raise BatchError(f"priority at index {i} is {float(p[i])!r}{more}: priorities must be "
                         f"finite and >= 0; the batch of {n} was rejected whole")


def _item_bytes(x: Any, i: int) -> bytes | memoryview:
    if isinstance(x, bytes | memoryview):
        return x
    if isinstance(x, bytearray):
        return bytes(x)
    if isinstance(x, np.ndarray | np.generic) or _is_torch(x):
        a = np.ascontiguousarray(_to_numpy(x))
        if a.dtype.hasobject:
            raise BatchError(f"item at index {i} is an object array; the batch was rejected "
                             f"whole")
        return memoryview(a.reshape(-1).view(np.uint8))
    raise BatchError(f"item at index {i} is a {type(x).__name__}, not bytes, a NumPy array or "
                     f"a torch tensor; the batch was rejected whole")


def _packed_rows(items: Any) -> tuple[int, memoryview] | None:
    """One NumPy array or tensor of plain values with one row per item: (rows, its bytes,
    contiguous, as one view); anything else None (sent an argument per item)."""
    if not (isinstance(items, np.ndarray) or _is_torch(items)):
        return None
    arr = np.ascontiguousarray(_to_numpy(items))
    if arr.ndim == 0 or arr.dtype.hasobject:
        return None  # _as_items says what is wrong
    return arr.shape[0], memoryview(arr.reshape(-1).view(np.uint8))


def _packed_priorities(priorities: Any, n: int) -> bytes | None:
    """REPLAY.ADD PACKED's priorities: n little-endian float64, or None for MAX."""
    if priorities is None:
        return None
    return np.ascontiguousarray(_batch_priorities(priorities, n), dtype="<f8").tobytes()


def _as_items(items: Any) -> list[Any]:
    """bytes (one item), one stacked array/tensor (one row per item), or a sequence of
    bytes / arrays / tensors (one per item) -> a list of bytes-like objects."""
    if isinstance(items, bytes | bytearray | memoryview):
        return [_item_bytes(items, 0)]
    if isinstance(items, np.ndarray) or _is_torch(items):
        arr = np.ascontiguousarray(_to_numpy(items))
        if arr.ndim == 0:
            raise BatchError("items must be a sequence or an array with one row per item")
        if arr.dtype.hasobject:
            return [_item_bytes(x, i) for i, x in enumerate(arr)]
        rows = arr.reshape(arr.shape[0], -1).view(np.uint8)
        # views of the caller's (contiguous) array: no copy until the socket's
        buf = memoryview(rows.reshape(-1))
        size = rows.shape[1]
        return [buf[i * size:(i + 1) * size] for i in range(rows.shape[0])]
    if isinstance(items, str | Mapping) or not isinstance(items, Sequence):
        raise BatchError(f"items must be bytes, an array or tensor with one row per item, or "
                         f"a list of them, not a {type(items).__name__}"
                         + (" (pass schema= for a dict of fields)"
                            if isinstance(items, Mapping) else ""))
    return [_item_bytes(x, i) for i, x in enumerate(items)]


def _native_order(dt: np.dtype) -> bool:
    return dt.byteorder in ("=", "|") or dt.byteorder == ("<" if sys.byteorder == "little"
                                                           else ">")


def _out_array(out: Any, spec: ItemSpec, n: int) -> np.ndarray | None:
    """sample()'s out= as a NumPy array, checked (ValueError saying what to pass)."""
    if out is None:
        return None
    if not spec.packed or spec.schema is not None:
        raise ValueError("out= needs item_shape (and item_dtype): the items are read into "
                         "one array of shape (n, *item_shape)")
    a = out.numpy() if _is_torch(out) and out.device.type == "cpu" else out
    if not isinstance(a, np.ndarray):
        raise ValueError(f"out= must be a NumPy array or a CPU tensor, not "
                         f"{type(out).__name__}")
    want = (n, *spec.shape)
    if a.shape != want or a.dtype != spec.dtype.newbyteorder("=") \
            or not a.flags.c_contiguous or not a.flags.writeable:
        raise ValueError(f"out= must be a writable C-contiguous array of shape {want} and "
                         f"dtype {spec.dtype}, not {a.shape} {a.dtype}"
                         f"{'' if a.flags.c_contiguous else ' (not contiguous)'}")
    return a


# ---- one sample, from one server or from the shards of a replay group ------------------
# A standalone server is a group of one: ReplayClient.sample sends one SampleRequest,
# ShardedReplayClient.sample one per shard with a share (WITHSTATS, to weigh the draws
# globally). draw() receives the replies, by the client's own transport, straight from
# the sockets into the final arrays where it can, else from redis-py's replies, and
# Draws.sample() makes them the Sample the caller asked for.


class SampleRequest(NamedTuple):
    """One REPLAY.SAMPLE of a draw: to shard ``shard`` (0 for a standalone server), for
    ``n`` items; ``where`` names the shard in errors ("" for a standalone server)."""

    shard: int
    n: int
    args: tuple[Any, ...]
    where: str = ""


def sample_requests(table: str, counts: Sequence[tuple[int, int, str]], spec: ItemSpec, *,
                    beta: float | None, timeout: float | None, info: bool,
                    stats: bool) -> list[SampleRequest]:
    """The requests of one draw, one per (shard, items, where) of counts; stats: WITHSTATS
    (each shard's total, minimum priority, size and draw probabilities)."""
    return [SampleRequest(k, m, tuple(sample_args(
        table, m, beta=beta, packed=spec.packed, withstats=stats, withinfo=info,
        timeout=timeout)), where) for k, m, where in counts]


SendInto = Callable[[list[SampleRequest], list[list[memoryview]]], list[int | None] | None]
"""Sends every request, then reads each bulk reply into its list of buffers (None where it
filled them, else its length); None, having sent nothing, when the replies cannot be read
raw (_wire.recv_bulk_into)."""
Send = Callable[[list[SampleRequest]], list[Any]]
"""Sends every request and returns redis-py's replies, in request order."""
View = Callable[[SampleRequest], memoryview | None]
"""Sends one request on a shared-memory connection and returns its reply's body in the
ring (_wire.call_bulk_view); None, having sent nothing, on any other connection."""


@dataclass
class Draws:
    """The replies of one draw, in request order, before they are made a Sample."""

    ids: npt.NDArray[np.int64]
    weights: npt.NDArray[np.float32]
    """Each server's own importance weights (a group weighs the draws again)."""
    items: Any
    """Received: the items' final array (a schema's: its packed bytes); else the packed
    items back to back, or a list of bytes."""
    received: bool
    spec: ItemSpec
    stats: list[tuple[float, float, int]] = field(default_factory=list)
    """WITHSTATS, per request: total priority, minimum priority, live size."""
    probs: npt.NDArray[np.float64] | None = None
    """WITHSTATS: each draw's probability within its shard."""
    infos: list[SampleInfo] = field(default_factory=list)
    """WITHINFO, per request."""

    def sample(self, weights: npt.NDArray[np.float32] | None = None,
               info: SampleInfo | None = None) -> Sample:
        """The Sample, with these weights (default: the server's) and info."""
        w = self.weights if weights is None else weights
        n = self.ids.size
        if not self.spec.packed:
            out = Sample(self.ids, w, self.items)
        elif self.received:
            out = finish_sample(self.ids, w, self.items, n, self.spec)
        else:
            out = self.spec.decode(self.ids, w, self.items, n)
        out.info = info
        return out


def draw(reqs: list[SampleRequest], n: int, spec: ItemSpec, *, out: Any, info: bool,
         stats: bool, send_into: SendInto, send: Send, view: View | None = None,
         not_raw: str) -> Draws:
    """Every client's sample: out= checked, then the reply's body in place (view, one
    request: copy=False on shared memory), else the replies read into their final arrays
    (send_into), else redis-py's replies decoded (send); out= needs one of the first two
    (ValueError not_raw)."""
    dest = _out_array(out, spec, n)
    if info and dest is not None:
        raise ValueError("out= reads items only; sample with info=True without out=")
    raw = spec.packed and not info and _native_order(spec.dtype)
    if view is not None and raw and dest is None and len(reqs) == 1 and not stats:
        body = view(reqs[0])
        if body is not None:
            return _draws_from_view(body, n, spec)
    if raw:
        got = _receive_packed(send_into, reqs, n, spec, dest, stats)
        if got is not None:
            return got
    if dest is not None:
        raise ValueError(not_raw)
    return _decode_replies(send(reqs), reqs, n, spec, stats, info)


def _item_array(n: int, spec: ItemSpec, dest: np.ndarray | None) -> np.ndarray:
    """Where n packed items are received: out=, a schema's bytes, or a new array."""
    if dest is not None:
        return dest
    if spec.schema is not None:
        return np.empty(n * spec.itemsize, dtype=np.uint8)
    return np.empty((n, *spec.shape), dtype=spec.dtype.newbyteorder("="))


def _receive_packed(send_into: SendInto, reqs: list[SampleRequest], n: int, spec: ItemSpec,
                    dest: np.ndarray | None, stats: bool) -> Draws | None:
    """REPLAY.SAMPLE ... PACKED [WITHSTATS] read from the sockets into the final arrays:
    each reply's ids, weights, items (into their rows of one array), stats and
    probabilities. One copy, kernel to array. None: the connections cannot be read raw."""
    ids = np.empty(n, dtype=np.int64)
    weights = np.empty(n, dtype=np.float32)
    items = _item_array(n, spec, dest)
    flat = memoryview(items.reshape(-1).view(np.uint8))
    if stats:  # WITHSTATS: total, min, size (its int64 bits); each draw's probability
        heads = np.empty((len(reqs), 3), dtype=np.float64)
        probs = np.empty(n, dtype=np.float64)
    dests, at = [], 0
    for j, q in enumerate(reqs):
        m = q.n
        d = [memoryview(ids[at:at + m]).cast("B"), memoryview(weights[at:at + m]).cast("B"),
             flat[at * spec.itemsize:(at + m) * spec.itemsize]]
        if stats:
            d += [memoryview(heads[j]).cast("B"), memoryview(probs[at:at + m]).cast("B")]
        dests.append(d)
        at += m
    got = send_into(reqs, dests)
    if got is None:
        return None
    for q, length in zip(reqs, got, strict=True):
        if length is not None:
            raise _size_error(length, q.n, spec, stats, q.where)
    if not stats:
        return Draws(ids, weights, items, True, spec)
    st = [(float(h[0]), float(h[1]), int(h[2:3].view(np.int64)[0])) for h in heads]
    return Draws(ids, weights, items, True, spec, st, probs)


def _decode_replies(replies: list[Any], reqs: list[SampleRequest], n: int, spec: ItemSpec,
                    stats: bool, info: bool) -> Draws:
    """Draws from redis-py's replies: PACKED bulks (ids, weights, items, then WITHSTATS's
    tail, then WITHINFO's) or arrays (ids, weights, items[, stats][, info])."""
    ids, weights, items, st, probs, infos = [], [], [], [], [], []
    for q, rep in zip(reqs, replies, strict=True):
        m = q.n
        if spec.packed:
            end = len(rep) - (8 + 20 * m if info else 0)
            tail = end - (24 + 8 * m if stats else 0)
            if tail < 12 * m or (tail - 12 * m) % m:
                raise ValueError(f"REPLAY.SAMPLE PACKED reply of {len(rep)} bytes for {m} "
                                 f"items{q.where}")
            body = memoryview(rep)
            ids.append(np.frombuffer(rep, dtype="<i8", count=m))
            weights.append(np.frombuffer(rep, dtype="<f4", count=m, offset=8 * m))
            items.append(body[12 * m:tail])
            raw_stats, raw_info = body[tail:end], body[end:]
        else:
            ids.append(np.frombuffer(rep[0], dtype="<i8"))
            weights.append(np.frombuffer(rep[1], dtype="<f4"))
            items.extend(rep[2])
            raw_stats, raw_info = (rep[3] if stats else b""), rep[-1]
        if stats:
            head, prob = parse_stats(raw_stats, m)
            st.append(head)
            probs.append(prob)
        if info:
            infos.append(SampleInfo.parse(raw_info, m))
    body: Any = items if not spec.packed else items[0] if len(items) == 1 \
        else b"".join(items)
    return Draws(_joined(ids, np.int64), _joined(weights, np.float32), body, False, spec, st,
                 _joined(probs, np.float64) if stats else None, infos)


def parse_stats(raw: bytes | memoryview, m: int
                ) -> tuple[tuple[float, float, int], npt.NDArray[np.float64]]:
    """A WITHSTATS field of m draws: (total priority, minimum priority, live size) and
    each draw's probability within the server (a view of raw)."""
    total, mn = np.frombuffer(raw, dtype="<f8", count=2)
    size = int(np.frombuffer(raw, dtype="<i8", count=1, offset=16)[0])
    return (float(total), float(mn), size), np.frombuffer(raw, dtype="<f8", count=m, offset=24)


def _joined(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    """The parts as one new array of dtype (native order, writable, owning its memory)."""
    if len(parts) == 1:
        return parts[0].astype(dtype)
    return np.concatenate(parts).astype(dtype, copy=False)


def finish_sample(ids: npt.NDArray[np.int64], weights: npt.NDArray[np.float32], items: Any,
                  n: int, spec: ItemSpec) -> Sample:
    """A packed sample's arrays as the caller asked for them: a schema's fields, or the
    items and weights as NumPy arrays or torch tensors (on spec.device). Every client's
    decoder ends here."""
    out: Any = items
    w: Any = weights
    if spec.schema is not None:
        out = spec.schema.unpack(memoryview(items) if isinstance(items, np.ndarray) else items,
                                 torch=spec.torch, device=spec.device)
    if spec.torch:
        import torch as th

        w = th.from_numpy(weights)
        if spec.schema is None:
            out = th.from_numpy(items)
        if spec.device is not None:
            w = w.to(spec.device)
            if spec.schema is None:
                out = out.to(spec.device)
    return Sample(ids, w, out)


def _size_error(got: int, n: int, spec: ItemSpec, stats: bool = False,
                where: str = "") -> ValueError:
    """The error for a PACKED reply of got bytes (WITHSTATS's tail included with stats)
    that does not hold n items of spec."""
    body = got - (24 + 8 * n if stats else 0)
    if body < 12 * n or (body - 12 * n) % n:
        return ValueError(f"REPLAY.SAMPLE PACKED reply of {got} bytes for {n} items{where}")
    what = repr(spec.schema) if spec.schema is not None else \
        f"item_shape {spec.shape} of {spec.dtype}"
    return ValueError(f"{what} is {spec.itemsize} bytes, but the table's items are "
                      f"{(body - 12 * n) // n} bytes{where}")


def _locked_array(shape: tuple[int, ...], dtype: np.dtype, lock: bool) -> np.ndarray:
    """A new array; with lock, its pages locked in RAM (mlock) when the limit allows."""
    a = np.zeros(shape, dtype=dtype)  # zeros: every page touched before it is locked
    if lock and a.nbytes:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.mlock(ctypes.c_void_p(a.ctypes.data), ctypes.c_size_t(a.nbytes))  # best effort
    return a


def _draws_from_view(body: memoryview, n: int, spec: ItemSpec) -> Draws:
    """A PACKED reply's body, in place: ids and weights copied (12 bytes an item), the
    items a view of the body."""
    if len(body) != 12 * n + n * spec.itemsize:
        raise _size_error(len(body), n, spec)
    ids = np.frombuffer(body, dtype="<i8", count=n).astype(np.int64)
    weights = np.frombuffer(body, dtype="<f4", count=n, offset=8 * n).astype(np.float32)
    if spec.schema is not None:
        return Draws(ids, weights, body[12 * n:], True, spec)
    items = np.frombuffer(body, dtype=spec.dtype.newbyteorder("="),
                          offset=12 * n).reshape(n, *spec.shape)
    return Draws(ids, weights, items, True, spec)


SELECTORS = ("prioritized", "uniform", "fifo", "lifo", "minheap", "maxheap")


def add_request(table: str, priorities: Any, items: Any, *, schema: Schema | None = None,
                timeout: float | None = None) -> tuple[list[bytes | memoryview], int]:
    """REPLAY.ADD's request as buffers, and its item count (0: nothing to send). One
    array or tensor with a row per item goes PACKED, from its own buffer; a list of
    items goes an argument per item. Raises BatchError for a bad item or priority."""
    if schema is not None:
        items = schema.pack(items)
    tail = ["TIMEOUT", repr(float(timeout))] if timeout is not None else []
    packed = _packed_rows(items)
    if packed is not None:
        n, body = packed
        if not n:
            return [], 0
        return _wire.add_packed_request(table, _packed_priorities(priorities, n), n, body,
                                        tail), n
    rows = _as_items(items)
    if not rows:
        return [], 0
    return _wire.add_request(table, _fmt_priorities(priorities, len(rows)), rows, tail), len(rows)


def add_ids(reply: Any) -> npt.NDArray[np.int64]:
    """REPLAY.ADD's reply as ids: PACKED's bulk of n int64, or an array of integers."""
    if isinstance(reply, bytes):
        return np.frombuffer(reply, dtype="<i8").astype(np.int64)
    return np.array(reply, dtype=np.int64)


def add_error(e: redis.ResponseError, n: int) -> Exception:
    """REPLAY.ADD's error reply as its pyctl.errors class, naming the batch."""
    err = replay_error(e)
    if isinstance(err, BadPriorityError):
        return BadPriorityError(f"{err} (priority at index {err.index}); the batch of {n} was "
                                f"rejected whole")
    return err


def create_args(table: str, capacity: int, **opts: Any) -> list[Any]:
    """REPLAY.CREATE's arguments; options that are None are left out. queue=True or
    stack=True make Reverb's queue/stack of ``capacity`` items (REPLAY.CREATE ... QUEUE n)."""
    preset = "QUEUE" if opts.get("queue") else "STACK" if opts.get("stack") else "CAPACITY"
    args: list[Any] = ["REPLAY.CREATE", table, preset, int(capacity)]
    for name in ("sampler", "remover"):
        if opts.get(name) is not None:
            args += [name.upper(), str(opts[name])]
    if opts.get("max_times_sampled") is not None:
        args += ["MAX_TIMES_SAMPLED", int(opts["max_times_sampled"])]
    for name in ("alpha", "beta", "epsilon", "samples_per_insert", "error_buffer"):
        if opts.get(name) is not None:
            args += [name.upper(), repr(float(opts[name]))]
    for name in ("maxbytes", "min_size"):
        if opts.get(name) is not None:
            args += [name.upper(), int(opts[name])]
    return args


def sample_args(table: str, n: int, *, beta: float | None = None, packed: bool = False,
                withstats: bool = False, timeout: float | None = None,
                withinfo: bool = False) -> list[Any]:
    """REPLAY.SAMPLE's arguments."""
    args: list[Any] = ["REPLAY.SAMPLE", table, int(n)]
    if beta is not None:
        args += ["BETA", repr(float(beta))]
    if packed:
        args.append("PACKED")
    if withstats:
        args.append("WITHSTATS")
    if withinfo:
        args.append("WITHINFO")
    if timeout is not None:
        args += ["TIMEOUT", repr(float(timeout))]
    return args


class ReplayClient:
    """A client for inreplay's replay tables (and, through .redis, its key/value store)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 6379, *,
                 unix_socket_path: str | None = None, shm: bool | None = None,
                 connection: redis.Redis | None = None, **kwargs: Any) -> None:
        """Connect to host:port. A server on this machine that offers shared memory (its
        --shm-socket, on by default with pyctl start) is reached through its rings, no
        TCP at all; shm=False stays on TCP, shm=True requires the rings (pyctl._shm).
        unix_socket_path: the server's Unix socket instead (its --unixsocket; host and
        port are then unused). connection: use this redis.Redis instead; kwargs go to
        redis.Redis."""
        # redis-py's default protocol (RESP3 from redis-py 8); protocol=2 in kwargs works too
        if connection is None and unix_socket_path:
            connection = redis.Redis(unix_socket_path=unix_socket_path, **kwargs)
        self.redis: redis.Redis = connection or _shm.connect(host, port, shm=shm, **kwargs)

    def close(self) -> None:
        self.redis.close()

    def __enter__(self) -> ReplayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create(self, table: str, capacity: int, *, alpha: float | None = None,
               beta: float | None = None, epsilon: float | None = None,
               maxbytes: int | None = None, min_size: int | None = None,
               samples_per_insert: float | None = None,
               error_buffer: float | None = None, sampler: str | None = None,
               remover: str | None = None, max_times_sampled: int | None = None,
               queue: bool = False, stack: bool = False) -> None:
        """REPLAY.CREATE; raises redis.ResponseError if the table exists. min_size,
        samples_per_insert and error_buffer set the table's rate limiter (Reverb's
        MinSize and SampleToInsertRatio; see the docs). sampler and remover are one
        of SELECTORS; queue=True / stack=True make Reverb's Table.queue / Table.stack
        of ``capacity`` items (fifo/lifo, each item sampled once, blocking)."""
        self._cmd(*create_args(
            table, capacity, alpha=alpha, beta=beta, epsilon=epsilon, maxbytes=maxbytes,
            min_size=min_size, samples_per_insert=samples_per_insert,
            error_buffer=error_buffer, sampler=sampler, remover=remover,
            max_times_sampled=max_times_sampled, queue=queue, stack=stack))

    def add(self, table: str, priorities: Any, items: Any, *,
            schema: Schema | None = None, timeout: float | None = None) -> npt.NDArray[np.int64]:
        """Insert a batch in one request; returns the ids.

        items: bytes (one item); a list or tuple of bytes, NumPy arrays or torch
        tensors (one item each); one array or tensor with one row per item; or, with
        ``schema``, a dict of fields (one row per transition). priorities: one
        number per item (array, list, tensor; a scalar for all), or None for the
        table's max priority. A bad item or priority raises BatchError naming its
        index, and nothing of the batch is inserted. With a rate limiter, ``timeout``
        seconds (0: forever) is how long the insert may wait for the sampler to catch
        up; without it, or when it runs out, RateLimited is raised.
        """
        request, n = add_request(table, priorities, items, schema=schema, timeout=timeout)
        if not n:
            return np.empty(0, dtype=np.int64)
        try:  # the items go from their buffers to the socket (pyctl/_wire.py)
            reply = _wire.call_gather(self.redis, request)
        except redis.ResponseError as e:
            raise add_error(e, n) from None
        return add_ids(reply)

    def inserter(self, table: str, *, max_in_flight: int = 4, schema: Schema | None = None,
                 timeout: float | None = None,
                 resend: Callable[[RateLimited], bool] | None = None) -> Inserter:
        """An :class:`Inserter`: ``add`` without waiting for each reply, up to
        ``max_in_flight`` batches on the wire (an actor that only inserts); errors of a
        batch raise at a later ``add`` or at ``flush``/``close``; ``resend`` sends a batch
        the rate limiter refused again (see :class:`Inserter`)."""
        return Inserter(self, table, max_in_flight=max_in_flight, schema=schema,
                        timeout=timeout, resend=resend)

    @_jax.option
    def sample(self, table: str, n: int, *, beta: float | None = None,
               item_shape: tuple[int, ...] | int | None = None,
               item_dtype: npt.DTypeLike | None = None, schema: Schema | None = None,
               torch: bool = False, device: Any = None, timeout: float | None = None,
               out: Any = None, info: bool = False, copy: bool = True,
               jax: bool = False) -> Sample:
        """Draw n items with importance weights in one round trip.

        With ``schema`` (or ``item_shape``, with ``item_dtype``, default uint8) the
        reply is REPLAY.SAMPLE ... PACKED (one bulk string) and the items come back as a
        dict of arrays (or one array of shape (n, *item_shape)): no Python object per
        item. ``torch=True`` turns them and the weights into torch tensors (on
        ``device``). Raises ValueError if the shape and dtype do not match the size of
        the table's items, or if item_dtype comes without item_shape. Every array
        returned is writable and owns its memory. With a rate limiter, ``timeout``
        seconds (0: forever) is how long the call may wait until sampling is allowed;
        without it, or when it runs out, RateLimited is raised. ``info=True`` adds
        Reverb's sample info (Sample.info).

        ``out`` (with item_shape): a preallocated C-contiguous, writable array (or CPU
        tensor) of shape (n, *item_shape) and item_dtype that receives the items, read
        from the socket straight into it; the Sample's items are then ``out`` itself.
        Without ``out`` a packed sample is read into a new array the same way.

        ``copy=False`` (with item_shape or schema, on a shared-memory connection): the
        items are a view of the reply where the server wrote it, in the shared ring,
        with no copy on this side. The view is valid until the next request on the
        connection that received it (for a client used by one thread: until its next
        call); after that it may show other bytes (the memory stays mapped, so reading
        it never faults). On other connections copy=False is a normal sample.

        ``jax=True`` (the ``[jax]`` extra): the weights and items as jax.Arrays, handed
        over from those arrays through DLPack (pyctl/_jax.py); ids stay NumPy. It
        ignores copy=False: a jax.Array must not alias a ring the next request reuses.
        """
        n = int(n)
        spec = ItemSpec.of(item_shape, item_dtype, schema, torch, device)
        reqs = sample_requests(table, [(0, n, "")], spec, beta=beta, timeout=timeout,
                               info=info, stats=False)
        got = draw(reqs, n, spec, out=out, info=info, stats=False, send_into=self._send_into,
                   send=self._send, view=None if copy else self._view, not_raw=(
                       "out= needs a plain TCP or Unix-socket connection with no reply "
                       "pending (this one is TLS or has buffered bytes); sample without "
                       "out="))
        return got.sample(info=got.infos[0] if info else None)

    # the transport of draw(): one request, on this client's connection
    def _send_into(self, reqs: list[SampleRequest],
                   dests: list[list[memoryview]]) -> list[int | None] | None:
        (req,), (dest,) = reqs, dests
        try:
            got = _wire.call_bulk_into(self.redis, req.args, dest)
        except redis.ResponseError as e:
            raise replay_error(e) from None
        return None if got is False else [got]  # type: ignore[list-item]

    def _send(self, reqs: list[SampleRequest]) -> list[Any]:
        return [self._cmd(*q.args) for q in reqs]

    def _view(self, req: SampleRequest) -> memoryview | None:
        try:
            return _wire.call_bulk_view(self.redis, req.args)
        except redis.ResponseError as e:
            raise replay_error(e) from None

    def update(self, table: str, ids: Any, priorities: Any) -> int:
        """New raw priorities for sampled ids (arrays, lists or tensors); returns how many
        applied (stale ids skipped). A bad priority raises BatchError naming its index,
        and none of the batch is applied."""
        i = np.ascontiguousarray(_to_numpy(ids), dtype="<i8").reshape(-1)
        p64 = _priority_array(priorities, i.size)
        if i.shape != p64.shape:
            raise BatchError(f"{i.size} ids but {p64.size} priorities; the batch was rejected "
                             f"whole")
        _check_priorities(p64, i.size)
        with np.errstate(over="ignore"):
            p = np.ascontiguousarray(p64, dtype="<f4")
        _check_priorities(p.astype(np.float64), i.size)  # beyond float32's range
        return int(self._cmd("REPLAY.UPDATE", table, i.tobytes(), p.tobytes()))

    def _cmd(self, *args: Any) -> Any:
        """One command; a REPLAY error comes back as its class (pyctl.errors)."""
        try:
            return self.redis.execute_command(*args)
        except redis.ResponseError as e:
            raise replay_error(e) from None

    def info(self, table: str) -> dict[str, Any]:
        """REPLAY.INFO as a dict of ints, floats and strings."""
        return decode_info(self._cmd("REPLAY.INFO", table))

    def drop(self, table: str) -> None:
        self._cmd("REPLAY.DROP", table)

    def tables(self) -> list[str]:
        return [t.decode(errors="replace") for t in self.redis.execute_command("REPLAY.LIST")]

    @staticmethod
    def receive_buffer(n: int, item_shape: tuple[int, ...] | int,
                       item_dtype: npt.DTypeLike = np.uint8, *, torch: bool = False,
                       pinned: bool = True) -> Any:
        """An array for ``sample(..., out=)`` that a GPU copy can take by DMA: with torch
        and a CUDA device, a page-locked CPU tensor (torch's pin_memory); otherwise a
        NumPy array (a CPU tensor with torch=True) whose pages are locked in memory with
        mlock(2) where the limits allow (``pinned=False``: neither). Its items are
        written by the sample straight into it, as with any out= array. Not measured on
        a GPU here (this project's machines have none)."""
        shape = (int(n), *((item_shape,) if isinstance(item_shape, int) else item_shape))
        dtype = np.dtype(item_dtype)
        if torch:
            import torch as th

            if pinned and th.cuda.is_available():
                return th.empty(shape, dtype=th.from_numpy(np.empty(0, dtype)).dtype,
                                pin_memory=True)
            return th.from_numpy(_locked_array(shape, dtype, pinned))
        return _locked_array(shape, dtype, pinned)


class Inserter:
    """REPLAY.ADD batches into one table, pipelined on a connection of its own.

    ``ReplayClient.add`` is one round trip per batch: the actor builds a batch, sends it,
    then waits while the server inserts it and answers. An actor that only inserts (Ape-X's,
    IMPALA's) does not need the ids before its next batch, so :class:`Inserter` keeps up to
    ``max_in_flight`` REPLAY.ADD requests on its connection and reads their replies only
    when that many are out, or on :meth:`Inserter.flush`. The actor's next batch is built
    while the server inserts the last one; the server keeps one connection's requests in
    order, so batches land in the order they were added, each whole or not at all, as with
    ``add``. Redis users do the same with a pipeline.

    A failed batch (a bad priority the server refused, a dropped table, a rate limiter that
    held it past its timeout) raises its pyctl.errors class at the next ``add`` or
    ``flush``, naming which batch it was; the batches before and after it stand. Bad input
    found before sending (BatchError) raises at once, and nothing of that batch is sent.

    ``with rc.inserter("apex") as ins: ins.add(priorities, items)``; leaving the block
    (or :meth:`close`) flushes. Items and priorities are what ``ReplayClient.add`` takes.
    One thread at a time: an actor's threads each take an inserter of their own.

    ``resend``: a batch the table's rate limiter refused (-RATELIMITED, at once or after
    ``timeout``) is sent again, as often as ``resend(error)`` returns True (it is called
    before each resend: it may check a stop flag); when it returns False the error raises
    as without it. The inserter then keeps each batch's buffers until its reply: do not
    change the arrays given to ``add`` until then. A resent batch lands after the batches
    sent since it (the order of batches is kept only without resends).
    """

    def __init__(self, client: ReplayClient, table: str, *, max_in_flight: int = 4,
                 schema: Schema | None = None, timeout: float | None = None,
                 resend: Callable[[RateLimited], bool] | None = None) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, not {max_in_flight}")
        self.table = table
        self.max_in_flight = max_in_flight
        self.schema = schema
        self.timeout = timeout
        self.resend = resend
        self.added = 0
        """Items the server has acknowledged so far."""
        self.resent = 0
        """Batches sent again after the rate limiter refused them (``resend``)."""
        self._redis = client.redis
        self._pool = self._redis.connection_pool
        self._own = self._redis.connection is None
        self._conn: Any = self._redis.connection or self._pool.get_connection()
        # (batch number, items, its request while it may be resent)
        self._pending: deque[tuple[int, int, list[bytes | memoryview] | None]] = deque()
        self._batches = 0
        self._last_ids: npt.NDArray[np.int64] = np.empty(0, dtype=np.int64)
        if self._conn._sock is None:
            self._conn.connect()

    def add(self, priorities: Any, items: Any) -> None:
        """Send one batch; reads the oldest reply first when max_in_flight are out. If
        that reply is an earlier batch's error, it raises before this batch is sent
        (nothing of this one is sent: add it again)."""
        request, n = self._request(priorities, items)
        if not n:
            return
        while len(self._pending) >= self.max_in_flight:
            self._read_one()
        self._send(request)
        self._batches += 1
        self._pending.append((self._batches, n, request if self.resend else None))

    def flush(self) -> int:
        """Wait for every reply; returns the items acknowledged since the inserter began.
        The first failed batch among them raises (after all replies are read)."""
        first: Exception | None = None
        while self._pending:
            try:
                self._read_one()
            except (redis.ConnectionError, redis.TimeoutError):
                raise
            except Exception as e:  # a batch's error: read the rest, then raise it
                first = first or e
        if first is not None:
            raise first
        return self.added

    @property
    def in_flight(self) -> int:
        """Batches sent whose replies are not read yet."""
        return len(self._pending)

    @property
    def last_ids(self) -> npt.NDArray[np.int64]:
        """The ids of the batch whose reply was read last."""
        return self._last_ids

    def close(self) -> None:
        """Flush, then give the connection back."""
        if self._conn is None:
            return
        try:
            self.flush()
        finally:
            conn, self._conn = self._conn, None
            if self._own:
                self._pool.release(conn)

    def __enter__(self) -> Inserter:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
        else:  # an error is already on its way: do not wait for replies over it
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.disconnect()
                if self._own:
                    self._pool.release(conn)

    def _request(self, priorities: Any, items: Any) -> tuple[list[bytes | memoryview], int]:
        if self._conn is None:
            raise RuntimeError("the inserter is closed")
        return add_request(self.table, priorities, items, schema=self.schema,
                           timeout=self.timeout)

    def _send(self, request: list[bytes | memoryview]) -> None:
        conn = self._conn
        try:
            if _wire.plain_socket(conn._sock):
                _wire.send_gather(conn._sock, request)
            else:  # TLS: redis-py's own send
                conn.send_packed_command(request)
        except OSError as e:
            self._lost(f"Error while writing to socket: {e}")

    def _read_one(self) -> None:
        batch, n, request = self._pending[0]
        try:
            reply = self._conn.read_response()
        except redis.ResponseError as e:
            self._pending.popleft()
            err = add_error(e, n)
            again = False
            if request is not None and isinstance(err, RateLimited) and self.resend is not None:
                try:
                    again = self.resend(err)
                except Exception as why:  # the batch is not resent: say so, naming it
                    raise type(err)(f"{err.args[0]} (batch {batch} of this inserter, not "
                                    f"resent: {type(why).__name__}: {why})") from why
            if again:
                self._pending.append((batch, n, request))
                self.resent += 1
                self._send(request)  # the same buffers, kept since add
                return
            # the code stays the first word (pyctl.errors): the batch is named at the end
            raise type(err)(f"{err.args[0]} (batch {batch} of this inserter)") from None
        except (OSError, redis.ConnectionError, redis.TimeoutError) as e:
            self._lost(str(e))
        self._pending.popleft()
        self._last_ids = add_ids(reply)
        self.added += n

    def _lost(self, why: str) -> None:
        unread = len(self._pending)
        self._pending.clear()
        self._conn.disconnect()
        raise redis.ConnectionError(
            f"{why}; {unread} batch(es) of this inserter were sent with no reply read: they "
            f"may or may not be in the table")
