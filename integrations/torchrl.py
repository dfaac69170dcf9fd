"""TorchRL replay buffers whose data and priorities live on inreplay.

    from inreplay.integrations.torchrl import InreplaySampler, InreplayStorage, connect
    from torchrl.data import TensorDictReplayBuffer

    client = connect("127.0.0.1:6379")            # a server, or any member of a replay group
    rb = TensorDictReplayBuffer(
        storage=InreplayStorage(100_000, client=client, table="replay"),
        sampler=InreplaySampler(100_000, alpha=0.6, beta=0.4),
        batch_size=256, priority_key="td_error")
    rb.extend(td)                      # one REPLAY.ADD (new items at the max priority)
    batch = rb.sample()                # one REPLAY.SAMPLE ... PACKED round trip
    batch["td_error"] = new_errors
    rb.update_tensordict_priority(batch)   # one REPLAY.UPDATE

What each TorchRL part does here
--------------------------------
* :class:`InreplayStorage` (a TorchRL ``Storage``) holds no data. Its first write
  infers a :class:`pyctl.client.Schema` from the batch (every tensor leaf becomes a
  fixed-shape field, nested keys joined by "/"), creates the table (REPLAY.CREATE with
  the sampler's alpha and eps) and records the schema as JSON under the key
  ``torchrl:schema:<table>`` of the server (shard 0 of a group), so another process
  (a learner that only samples) reads the same layout. Tensors travel as packed
  little-endian fields: no pickle on the network.
* :class:`InreplayWriter` (a TorchRL ``Writer``): ``extend`` is one REPLAY.ADD per
  batch. The indices TorchRL sees are the server's item ids (int64, unique across a
  replay group: shard k issues ids from k << 48), not ring positions, so a priority
  update always reaches the item that was sampled, and an update for an item that was
  evicted meanwhile is skipped by the server instead of landing on its successor.
  Items are added at the table's max priority (``MAX``), or, for a
  ``TensorDictReplayBuffer`` whose batch carries its ``priority_key``, at those
  priorities in the same REPLAY.ADD (TorchRL's extend writes at the max and then
  updates; here both happen in the one request, and the sampler recognises the
  buffer's follow-up ``update_priority`` for the batch just written and skips it).
* :class:`InreplaySampler` (a TorchRL ``PrioritizedSampler``, so TorchRL's own
  ``isinstance`` checks such as ``update_tensordict_priority`` treat it as one, but
  with no local trees): PrioritizedSampler's semantics computed by the server.
  Stored priority ``(p + eps) ** alpha``; P(i) proportional to it; importance weight
  ``(p_min / p_i) ** beta`` (TorchRL's ``(p_i / min p) ** -beta``) under the info key
  ``"priority_weight"`` (which a ``TensorDictReplayBuffer`` copies into the sample,
  with ``"index"``); new items at the max raw priority seen so far, which starts at 1
  (the server's MAX starts at stored 1.0 and never decreases, as TorchRL's default
  ``max_priority_within_buffer=False`` does); ``beta`` may change between draws
  (sent with every REPLAY.SAMPLE); in a replay group each shard's MAX is its own, so
  a writer whose sampler has sent priority updates (a learner's) adds new items at the
  largest raw priority it has sent, TorchRL's definition, and one that has not (an
  actor's) at the shard's MAX; ``alpha`` and ``eps`` are fixed when the table is
  created. ``max_priority_within_buffer=True`` is not offered (the server keeps the
  max since creation).

One round trip per sample
-------------------------
TorchRL splits sampling in two: ``Sampler.sample(storage, n)`` returns indices and
``ReplayBuffer`` then calls ``storage.get(indices)``. Done literally that is two round
trips (a draw of ids, then a fetch by id), and inreplay has no fetch-by-id at all:
items are only ever served by a prioritized draw. So the pair works together:
``InreplaySampler.sample`` asks its storage for one REPLAY.SAMPLE ... PACKED (ids,
weights and the packed items in one reply), the storage keeps the decoded batch, the
sampler returns the ids and weights, and the storage's ``get`` serves exactly that
batch for exactly those ids (once). ``get`` of any other index (``rb[3]``,
``rb.storage[...]``, iterating the storage) raises an error saying so: this storage
is sampled, never indexed. Everything else TorchRL does around the two calls
(transforms, the ``index`` and ``priority_weight`` keys, prefetch threads under the
buffer's lock) is TorchRL's own code.

Attaching: ``ReplayBuffer(storage=InreplayStorage(...))`` without a writer gets an
:class:`InreplayWriter` and without a sampler an ``InreplaySampler(alpha=0, beta=0)``
(uniform draws, weights 1, like TorchRL's default RandomSampler); the storage does
this when the buffer attaches to it. An explicit other writer or sampler fails on
first use with an error naming the class to use.

Replay groups: pass a :class:`pyctl.sharded.ShardedReplayClient` (``connect`` returns
one when the address belongs to a group). Every shard gets ``max_size / shards``
slots; each batch goes to one shard (in turn); draws are exact global prioritized
samples with the group's importance weights; updates go to each id's shard.

``len(storage)`` asks the server (REPLAY.INFO: one round trip, every shard of a
group); ``rb.empty()`` drops the table and its schema. State lives on the appliance:
``state_dict`` names the table, and ``dumps``/``loads`` refer to the server's
snapshots (``pyctl start --dir``), as the data is not in this process.

Not yet: TorchRL's SliceSampler (trajectories) maps onto inreplay's trajectories and
queues once the table-model issue builds them; they do not exist in this session.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
import torch
from inreplay.integrations._client import Client, connect
from tensordict import TensorDict, is_tensor_collection
from torchrl.data.replay_buffers.samplers import PrioritizedSampler
from torchrl.data.replay_buffers.storages import Storage, StoreStorage
from torchrl.data.replay_buffers.writers import (
    RoundRobinWriter,
    TensorDictRoundRobinWriter,
    Writer,
)

from pyctl.client import ReplayClient, Schema
from pyctl.errors import EmptyTableError, NoSuchTableError
from pyctl.sharded import ShardedReplayClient, split_address

__all__ = ["InreplaySampler", "InreplayStorage", "InreplayWriter", "connect",
           "inreplay_buffer"]

EMPTY_STORAGE_ERROR = "Cannot sample from an empty storage."
"""TorchRL's message for a draw from an empty buffer (PrioritizedSampler's), kept so
code that matches on it behaves the same."""

SCHEMA_KEY = "torchrl:schema:{table}"
"""Key (on the server, shard 0 of a group) holding a table's field layout as JSON."""

TENSOR_FIELD = "_tensor"
"""The one field of a buffer of plain tensors (not TensorDicts)."""


def _addresses(client: Client) -> list[str]:
    if isinstance(client, ShardedReplayClient):
        return list(client.addresses)
    kw = client.redis.connection_pool.connection_kwargs
    return [f"{kw.get('host', '127.0.0.1')}:{kw.get('port', 6379)}"]


def _shard_count(client: Client) -> int:
    return len(client.shards) if isinstance(client, ShardedReplayClient) else 1


def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    try:
        return torch.empty(0, dtype=dtype).numpy().dtype
    except TypeError:
        raise TypeError(f"a field of dtype {dtype} has no NumPy equivalent to pack it in; "
                        f"convert it (e.g. to torch.float32) before extend") from None


class _Layout:
    """How a batch maps to the table's fixed-size items: the Schema, each field's
    (nested) TensorDict key, and the batch dims of one item."""

    def __init__(self, kind: str, item_batch: Sequence[int],
                 fields: Sequence[tuple[str, tuple[str, ...], tuple[int, ...], str]],
                 skip: Sequence[str] = ("index",)) -> None:
        self.kind = kind  # "tensordict" or "tensor"
        self.skip = tuple(skip)
        self.item_batch = tuple(int(d) for d in item_batch)
        self.fields = [(n, tuple(k), tuple(int(d) for d in s), str(dt)) for n, k, s, dt in fields]
        self.schema = Schema({n: (s, np.dtype(dt)) for n, _, s, dt in self.fields})

    @classmethod
    def of(cls, data: Any, skip: Sequence[str] = ("index",)) -> _Layout:
        """The layout of a batch (dim 0 = items): a TensorDict or a tensor. Top-level
        keys in skip are not stored (TorchRL's "index", the buffer's priority key)."""
        if is_tensor_collection(data):
            fields = []
            for key, leaf in data.items(include_nested=True, leaves_only=True):
                key_t = (key,) if isinstance(key, str) else tuple(key)
                if len(key_t) == 1 and key_t[0] in skip:
                    continue  # ids are the server's; priorities go with the REPLAY.ADD
                if not isinstance(leaf, torch.Tensor):
                    raise TypeError(f"field {'/'.join(key_t)!r} is a {type(leaf).__name__}, "
                                    f"not a tensor: inreplay items are fixed-size tensors")
                fields.append(("/".join(key_t), key_t, tuple(leaf.shape[1:]),
                               _numpy_dtype(leaf.dtype).str))
            if not fields:
                raise ValueError("a TensorDict with no tensor leaves cannot be stored")
            return cls("tensordict", tuple(data.batch_size[1:]), fields, skip)
        if isinstance(data, torch.Tensor):
            return cls("tensor", (), [(TENSOR_FIELD, (TENSOR_FIELD,), tuple(data.shape[1:]),
                                       _numpy_dtype(data.dtype).str)])
        raise TypeError(f"InreplayStorage stores TensorDicts and tensors, not "
                        f"{type(data).__name__}")

    def to_json(self) -> str:
        return json.dumps({"kind": self.kind, "item_batch": list(self.item_batch),
                           "skip": list(self.skip),
                           "fields": [[n, list(k), list(s), dt] for n, k, s, dt in self.fields]})

    @classmethod
    def from_json(cls, text: str | bytes) -> _Layout:
        d = json.loads(text)
        return cls(d["kind"], d["item_batch"], [tuple(f) for f in d["fields"]],
                   d.get("skip", ("index",)))

    def columns(self, data: Any, priority_key: str | None = None) -> dict[str, Any]:
        """The batch as {field name: tensor (n, *shape)} for Schema.pack. The buffer's
        priority key may come in a batch although the table has no field for it (its
        values go with the REPLAY.ADD as priorities)."""
        if self.kind == "tensor":
            if not isinstance(data, torch.Tensor):
                raise TypeError(f"this table holds tensors, not {type(data).__name__}")
            return {TENSOR_FIELD: data}
        if not is_tensor_collection(data):
            raise TypeError(f"this table holds TensorDicts, not {type(data).__name__}")
        if tuple(data.batch_size[1:]) != self.item_batch:
            raise ValueError(f"items of batch shape {tuple(data.batch_size[1:])}, but the "
                             f"table's items have {self.item_batch}")
        have = {(k,) if isinstance(k, str) else tuple(k)
                for k in data.keys(include_nested=True, leaves_only=True)
                if not (isinstance(k, str) and k in self.skip)}
        if priority_key is not None and (priority_key,) not in {k for _, k, _, _ in self.fields}:
            have.discard((priority_key,))
        want = {k for _, k, _, _ in self.fields}
        if have != want:
            missing = sorted("/".join(k) for k in want - have)
            extra = sorted("/".join(k) for k in have - want)
            raise ValueError("the batch's keys differ from the table's"
                             + (f"; missing {missing}" if missing else "")
                             + (f"; not in the table {extra}" if extra else "")
                             + "; nothing was written")
        return {n: data.get(k) for n, k, _, _ in self.fields}

    def build(self, items: dict[str, torch.Tensor], n: int, device: Any) -> Any:
        """Sampled fields back into a TensorDict of batch size (n, *item_batch) (or the
        tensor of a tensor table)."""
        if self.kind == "tensor":
            return items[TENSOR_FIELD]
        td = TensorDict({}, batch_size=(n, *self.item_batch), device=device)
        for name, key, _, _ in self.fields:
            td.set(key if len(key) > 1 else key[0], items[name])
        return td


class InreplayStorage(StoreStorage):
    """A TorchRL Storage whose items live in an inreplay table (see the module docstring).

    Args:
        max_size: the table's capacity in items (a group: split evenly over its shards);
            the sampler's max_capacity when that is smaller.

    Keyword Args:
        client: a ReplayClient or ShardedReplayClient (see :func:`connect`); or
        address: HOST:PORT of the server or of any member of a replay group.
        table: the replay table's name.
        maxbytes: the table's MAXBYTES (default: the server's, 1 GiB per shard).
        timeout: seconds a rate-limited REPLAY.ADD / SAMPLE may wait (None: the
            limiter's error at once; tables without a limiter never wait).
        device: where sampled tensors are put (default CPU).

    It subclasses TorchRL's StoreStorage (the storage kind for Redis-protocol
    servers) only so that TorchRL picks the identity collate for it; every method
    is its own.
    """

    def __init__(self, max_size: int, *, client: Client | None = None,
                 address: str | None = None, table: str = "replay",
                 maxbytes: int | None = None, timeout: float | None = None,
                 device: torch.device | str | None = None) -> None:
        Storage.__init__(self, max_size=max_size)
        if (client is None) == (address is None):
            raise ValueError("pass client= (a ReplayClient or ShardedReplayClient) or "
                             "address='HOST:PORT', one of them")
        self._client: Client = client if client is not None else connect(str(address))
        self._addresses = _addresses(self._client)
        self.table = table
        self.maxbytes = maxbytes
        self.timeout = timeout
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        shards = _shard_count(self._client)
        self._requested = int(max_size)
        self._per_shard = -(-int(max_size) // shards)
        self.max_size = self._per_shard * shards
        self._layout: _Layout | None = None
        self._drawn: tuple[torch.Tensor, Any] | None = None
        self._init_fill_pending = False

    # ---- connection ------------------------------------------------------------------
    @property
    def client(self) -> Client:
        """The ReplayClient or ShardedReplayClient this storage talks through."""
        return self._client

    def __getstate__(self) -> dict[str, Any]:
        # For TorchRL's multiprocess sharing (collectors in subprocesses): the
        # connection is not copied, only the addresses; the child connects anew.
        state = super().__getstate__()
        state.pop("_client", None)
        state["_drawn"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        addrs = self._addresses
        self._client = (ShardedReplayClient(addrs) if len(addrs) > 1
                        else ReplayClient(*split_address(addrs[0])))

    # ---- TorchRL's attach hook: a default writer / sampler become ours -----------------
    def attach(self, buffer: Any) -> None:
        super().attach(buffer)
        init_writer = getattr(buffer, "_init_writer", "absent")
        if init_writer is None or init_writer is RoundRobinWriter or (
                isinstance(init_writer, partial)
                and init_writer.func in (RoundRobinWriter, TensorDictRoundRobinWriter)):
            buffer._init_writer = InreplayWriter  # TorchRL's default: REPLAY.ADD instead
        if getattr(buffer, "_init_sampler", "absent") is None:
            buffer._init_sampler = partial(InreplaySampler, self._requested, alpha=0.0,
                                           beta=0.0)
        self._init_fill_pending = True

    def _buffer_sampler(self) -> InreplaySampler:
        for ent in self._attached_entities:
            sampler = getattr(ent, "_sampler", None)
            if isinstance(sampler, InreplaySampler):
                return sampler
            if sampler is not None:
                raise TypeError(f"InreplayStorage is sampled by the server: give the buffer "
                                f"sampler=InreplaySampler(...), not {type(sampler).__name__}")
        raise RuntimeError("InreplayStorage is not attached to a replay buffer with an "
                           "InreplaySampler (it takes alpha and eps from it)")

    # ---- the table -------------------------------------------------------------------
    @property
    def _schema_key(self) -> str:
        return SCHEMA_KEY.format(table=self.table)

    def _open(self) -> bool:
        """Read the table's layout from the server; False if there is no table yet."""
        if self._layout is not None:
            return True
        if self.table not in self._client.tables():
            return False
        raw = self._client.redis.get(self._schema_key)
        if raw is None:
            raise RuntimeError(f"table {self.table!r} exists but has no TorchRL layout "
                               f"(key {self._schema_key!r}): it was not created by "
                               f"InreplayStorage; use another table name")
        self._layout = _Layout.from_json(raw)
        return True

    def _table_info(self) -> dict[str, Any]:
        if isinstance(self._client, ShardedReplayClient):
            return self._client.shards[0].info(self.table)
        return self._client.info(self.table)

    def _create(self, data: Any, skip: Sequence[str]) -> None:
        """First write: create the table (or check the one there) and its layout."""
        layout = _Layout.of(data, skip)
        sampler = self._buffer_sampler()
        if sampler.max_size < self._requested:
            # TorchRL lets a sampler's trees be smaller than its storage; items beyond
            # the sampler's capacity could never be drawn, so the table is that size
            shards = _shard_count(self._client)
            self._per_shard = -(-int(sampler.max_size) // shards)
            self.max_size = self._per_shard * shards
        if self._open():
            info = self._table_info()
            want = {"capacity": self._per_shard, "alpha": sampler.alpha,
                    "epsilon": sampler._eps}
            for k, v in want.items():
                if not math.isclose(float(info[k]), float(v), rel_tol=1e-9, abs_tol=1e-300):
                    raise ValueError(f"table {self.table!r} exists with {k} {info[k]}, not "
                                     f"{v}: drop it (rb.empty()) or use another table name")
            return
        self._client.create(self.table, self._per_shard, alpha=sampler.alpha,
                            beta=sampler.beta, epsilon=sampler._eps, maxbytes=self.maxbytes)
        self._client.redis.set(self._schema_key, layout.to_json())
        self._layout = layout

    def write(self, data: Any, priorities: Any = None, skip: Sequence[str] = ("index",),
              priority_key: str | None = None) -> torch.Tensor:
        """One REPLAY.ADD of a batch (dim 0 = items); priorities None: the table's max.
        Top-level keys in skip are not stored, nor priority_key when the table has no
        field for it. Returns the ids (int64)."""
        self._init_fill_pending = False
        if self._layout is None:
            self._create(data, skip)
        assert self._layout is not None
        cols = self._layout.columns(data, priority_key)
        ids = self._client.add(self.table, priorities, cols, schema=self._layout.schema,
                               timeout=self.timeout)
        self._bump_mutation_revision()
        return torch.from_numpy(ids)

    def draw(self, batch_size: int, beta: float) -> tuple[torch.Tensor, torch.Tensor]:
        """One REPLAY.SAMPLE ... PACKED: keeps the items for get() and returns (ids,
        importance weights)."""
        self._init_fill_pending = False
        if not self._open():
            raise RuntimeError(EMPTY_STORAGE_ERROR)
        assert self._layout is not None
        try:
            s = self._client.sample(self.table, int(batch_size), beta=beta,
                                    schema=self._layout.schema, torch=True,
                                    timeout=self.timeout)
        except EmptyTableError:
            raise RuntimeError(EMPTY_STORAGE_ERROR) from None
        ids = torch.from_numpy(s.ids)
        data = self._layout.build(s.items, len(s.ids), self.device)
        if self.device.type != "cpu" and self._layout.kind == "tensor":
            data = data.to(self.device)
        self._drawn = (ids, data)
        return ids, s.weights

    # ---- TorchRL's Storage interface -----------------------------------------------
    def set(self, cursor: Any, data: Any, *, set_cursor: bool = True) -> None:
        raise RuntimeError("InreplayStorage is written by InreplayWriter (REPLAY.ADD assigns "
                           "the ids); give the buffer writer=InreplayWriter() or no writer")

    def get(self, index: Any) -> Any:
        drawn, self._drawn = self._drawn, None
        if drawn is not None:
            ids, data = drawn
            if index is ids or (isinstance(index, torch.Tensor) and index.shape == ids.shape
                                and torch.equal(index.to(ids.device), ids)):
                return data
        raise RuntimeError("InreplayStorage serves items only through a prioritized draw "
                           "(rb.sample(); one REPLAY.SAMPLE returns ids and items); reading "
                           "items by index (rb[i], storage.get, iteration) is not possible")

    def __len__(self) -> int:
        if self._layout is None and self.table not in self._client.tables():
            return 0
        try:
            return int(self._client.info(self.table)["size"])
        except NoSuchTableError:
            return 0

    def _empty(self) -> None:
        """rb.empty(): drop the table and its layout (the next write creates them)."""
        if self.table in self._client.tables():
            self._client.drop(self.table)
        self._client.redis.delete(self._schema_key)
        self._layout = None
        self._drawn = None
        self._bump_mutation_revision()

    def drop(self) -> None:
        """Drop the table and its layout from the server."""
        self._empty()

    def state_dict(self) -> dict[str, Any]:
        return {"table": self.table, "addresses": list(self._addresses),
                "max_size": self.max_size}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if state_dict.get("table") != self.table:
            raise ValueError(f"state of table {state_dict.get('table')!r}, this storage holds "
                             f"{self.table!r}")
        self._layout = None  # read again from the server

    def dumps(self, path: Any) -> None:
        raise RuntimeError("the items are on the inreplay server, not in this process: save "
                           "them with the server's snapshots (pyctl start --dir DIR, SAVE)")

    def loads(self, path: Any) -> None:
        raise RuntimeError("the items are on the inreplay server, not in this process: "
                           "restore them with pyctl start --restore DIR")

    def contains(self, item: Any) -> bool:
        raise RuntimeError("InreplayStorage cannot tell which ids are live without a draw")

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(table={self.table!r}, max_size={self.max_size}, "
                f"servers={','.join(self._addresses)})")


class InreplayWriter(Writer):
    """Writes each batch with one REPLAY.ADD; the index returned is the server's ids."""

    def __init__(self) -> None:
        super().__init__()
        self._write_count = 0
        self._pending: tuple[torch.Tensor, torch.Tensor | None] | None = None

    def _inreplay_storage(self) -> InreplayStorage:
        if not isinstance(self._storage, InreplayStorage):
            raise TypeError(f"InreplayWriter writes to an InreplayStorage, not "
                            f"{type(self._storage).__name__}")
        return self._storage

    def _priorities(self, data: Any) -> torch.Tensor | None:
        """The batch's own priorities when the buffer is a TensorDictReplayBuffer and the
        batch carries its priority_key (reduced per item as TorchRL does); else None."""
        if not is_tensor_collection(data):
            return None
        for ent in self._inreplay_storage()._attached_entities:
            key = getattr(ent, "priority_key", None)
            if not isinstance(key, str) or data.get(key, None) is None:
                continue
            sampler = getattr(ent, "_sampler", None)
            if not isinstance(sampler, InreplaySampler):
                return None
            return sampler._reduce(data.get(key), data.shape[0])
        return None

    def add(self, data: Any) -> torch.Tensor:
        batch = data.unsqueeze(0) if is_tensor_collection(data) else torch.as_tensor(data)[None]
        return self.extend(batch)[0]

    def extend(self, data: Any) -> torch.Tensor:
        storage = self._inreplay_storage()
        if isinstance(data, list) and data and all(isinstance(x, torch.Tensor) for x in data):
            data = torch.stack(data)  # TorchRL: a list is a stack of values to add one by one
        n = len(data)
        if n == 0:
            raise RuntimeError(f"Expected at least one element in extend. Got {data=}")
        prio = self._priorities(data)
        sampler = storage._buffer_sampler()
        if prio is None and sampler._updated and isinstance(storage.client, ShardedReplayClient):
            # A shard's MAX is its own max; in a group the max over the group is the
            # largest raw priority this sampler has sent (TorchRL's own definition)
            prio = torch.full((n,), sampler.default_priority, dtype=torch.float64)
        key = next((k for e in storage._attached_entities
                    if isinstance(k := getattr(e, "priority_key", None), str)), None)
        ids = storage.write(data, None if prio is None else prio.cpu().numpy(),
                            priority_key=key)
        self._write_count += n
        self._pending = (ids, prio)
        return ids

    def _take_pending(self) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        pending, self._pending = self._pending, None
        return pending

    def _empty(self, empty_write_count: bool = True) -> None:
        self._pending = None
        if empty_write_count:
            self._write_count = 0

    def state_dict(self) -> dict[str, Any]:
        return {"_write_count": self._write_count}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._write_count = int(state_dict.get("_write_count", 0))

    def dumps(self, path: Any) -> None:
        raise RuntimeError("the items are on the inreplay server: use its snapshots")

    def loads(self, path: Any) -> None:
        raise RuntimeError("the items are on the inreplay server: use its snapshots")


class InreplaySampler(PrioritizedSampler):
    """TorchRL's PrioritizedSampler computed by the inreplay server (see the module
    docstring): same arguments, priorities and weights; no local trees.

    Args:
        max_capacity: the buffer's capacity (equal to the storage's max_size).
        alpha: priority exponent, fixed when the table is created.
        beta: importance-sampling exponent, sent with every draw (may change).
        eps: added to raw priorities, fixed when the table is created.
        reduction: how a multi-element priority per item is reduced ("max", "min",
            "mean", "median"), as TorchRL's.
    """

    def __init__(self, max_capacity: int, alpha: float, beta: float, eps: float = 1e-8,
                 dtype: torch.dtype = torch.float, reduction: str = "max",
                 max_priority_within_buffer: bool = False,
                 device: torch.device | str | None = None) -> None:
        if alpha < 0:
            raise ValueError(f"alpha must be greater or equal than 0, got alpha={alpha}")
        if beta < 0:
            raise ValueError(f"beta must be greater or equal to 0, got beta={beta}")
        if eps < 0:
            raise ValueError(f"eps must be >= 0, got eps={eps}")
        if max_priority_within_buffer:
            raise ValueError("max_priority_within_buffer=True is not available: the inreplay "
                             "server keeps the max priority since the table was created")
        if reduction not in ("max", "min", "mean", "median"):
            raise ValueError(f"reduction must be max, min, mean or median, not {reduction!r}")
        self._max_capacity = int(max_capacity)
        self._alpha = float(alpha)
        self._beta = float(beta)
        self._eps = float(eps)
        self.dtype = dtype
        self.reduction = reduction
        self._max_priority_within_buffer = False
        self._device = torch.device("cpu")
        self._max_raw = 1.0  # the raw max sent from here; the server's MAX is authoritative
        self._updated = False  # has this sampler sent priorities (it is a learner's)?

    def _init(self) -> None:  # PrioritizedSampler builds its trees here: none
        return

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    @property
    def alpha(self) -> float:
        return self._alpha

    @alpha.setter
    def alpha(self, value: float) -> None:
        if value != self._alpha:
            raise ValueError("alpha is fixed when the table is created (REPLAY.CREATE "
                             "ALPHA): create the buffer anew to change it")

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_rng"] = None
        return state

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(alpha={self._alpha}, beta={self._beta}, "
                f"eps={self._eps}, reduction={self.reduction})")

    @property
    def default_priority(self) -> float:
        """The raw max priority sent through this sampler (at least 1). New items do not
        use it: the server puts them at its own max (REPLAY.ADD ... MAX)."""
        return self._max_raw

    def _reduce(self, priority: torch.Tensor, n: int) -> torch.Tensor:
        p = torch.as_tensor(priority).detach()
        if p.numel() == n:
            return p.reshape(n).to(torch.float64)
        p = p.reshape(n, -1).to(torch.float64)
        if self.reduction == "max":
            return p.max(1).values
        if self.reduction == "min":
            return p.min(1).values
        if self.reduction == "mean":
            return p.mean(1)
        return p.median(1).values

    @staticmethod
    def _storage_of(storage: Storage | None) -> InreplayStorage:
        if not isinstance(storage, InreplayStorage):
            raise TypeError(f"InreplaySampler draws from an InreplayStorage, not "
                            f"{type(storage).__name__}")
        return storage

    def sample(self, storage: Storage, batch_size: int) -> tuple[torch.Tensor, dict]:
        ids, weights = self._storage_of(storage).draw(batch_size, self._beta)
        return ids, {"priority_weight": weights}

    def add(self, index: Any) -> None:
        return  # REPLAY.ADD already gave the item its priority

    def extend(self, index: Any) -> None:
        return

    def mark_update(self, index: Any, *, storage: Storage | None = None) -> None:
        if isinstance(storage, InreplayStorage) and self._is_written(storage, index, None):
            return
        self.update_priority(index, self.default_priority, storage=storage)

    @staticmethod
    def _writer_of(storage: InreplayStorage) -> InreplayWriter | None:
        for ent in storage._attached_entities:
            writer = getattr(ent, "_writer", None)
            if isinstance(writer, InreplayWriter):
                return writer
        return None

    def _is_written(self, storage: InreplayStorage, index: torch.Tensor,
                    priority: torch.Tensor | None) -> bool:
        """True for the buffer's follow-up update of the batch just written, whose
        priorities already went with the REPLAY.ADD (None: the default, i.e. MAX)."""
        writer = self._writer_of(storage)
        pending = writer._pending if writer is not None else None
        if pending is None:
            return False
        ids, prio = pending
        if index.shape != ids.shape or not torch.equal(index, ids):
            return False
        writer._take_pending()
        if prio is None:
            return priority is None or bool(torch.all(priority == self.default_priority))
        return priority is not None and priority.shape == prio.shape and bool(
            torch.allclose(priority.to(torch.float64), prio))

    @torch.no_grad()
    def update_priority(self, index: Any, priority: Any, *,
                        storage: Storage | None = None) -> None:
        index = torch.as_tensor(index, dtype=torch.long).reshape(-1)
        priority = torch.as_tensor(priority).detach()
        if priority.numel() == 1:
            priority = priority.reshape(1).expand(index.numel())
        else:
            priority = self._reduce(priority, index.numel())
        priority = priority.to(torch.float64)
        if isinstance(storage, InreplayStorage):
            if storage._init_fill_pending:
                # TorchRL's _initialize_prioritized_sampler fills a fresh local tree with
                # the default priority for every index below len(storage); the server
                # already holds these items' priorities, so that call is skipped.
                storage._init_fill_pending = False
                if torch.equal(index, torch.arange(index.numel())):
                    return
            if self._is_written(storage, index, priority):
                return
        else:
            raise TypeError(f"InreplaySampler updates priorities in an InreplayStorage, not "
                            f"{type(storage).__name__}: call rb.update_priority(index, priority)")
        keep = index >= 0  # TorchRL's MaxValueWriter marks items to leave alone with -1
        index, priority = index[keep], priority[keep]
        if index.numel() == 0:
            return
        storage.client.update(storage.table, index.cpu().numpy(), priority.cpu().numpy())
        self._max_raw = max(self._max_raw, float(priority.max()))
        self._updated = True

    def state_dict(self) -> dict[str, Any]:
        return {"_alpha": self._alpha, "_beta": self._beta, "_eps": self._eps,
                "_max_raw": self._max_raw}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if state_dict.get("_alpha", self._alpha) != self._alpha or \
                state_dict.get("_eps", self._eps) != self._eps:
            raise ValueError("alpha and eps are fixed when the table is created")
        self._beta = float(state_dict.get("_beta", self._beta))
        self._max_raw = float(state_dict.get("_max_raw", self._max_raw))

    def _empty(self) -> None:
        self._max_raw = 1.0
        self._updated = False

    def dumps(self, path: Any) -> None:
        raise RuntimeError("the priorities are on the inreplay server: use its snapshots")

    def loads(self, path: Any) -> None:
        raise RuntimeError("the priorities are on the inreplay server: use its snapshots")


def inreplay_buffer(capacity: int, *, client: Client | None = None, address: str | None = None,
                    table: str = "replay", alpha: float = 0.6, beta: float = 0.4,
                    eps: float = 1e-8, batch_size: int | None = None,
                    priority_key: str = "td_error", **storage_kwargs: Any) -> Any:
    """A TensorDictReplayBuffer on inreplay: InreplayStorage + InreplaySampler +
    InreplayWriter (PrioritizedSampler's arguments)."""
    from torchrl.data import TensorDictReplayBuffer

    return TensorDictReplayBuffer(
        storage=InreplayStorage(capacity, client=client, address=address, table=table,
                                **storage_kwargs),
        sampler=InreplaySampler(capacity, alpha=alpha, beta=beta, eps=eps),
        writer=InreplayWriter(), batch_size=batch_size, priority_key=priority_key)
