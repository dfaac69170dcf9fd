"""ShardedReplayClient: one prioritized replay spread over a group of appliances.

A replay group is N inreplay servers (shards), each holding its own tables
(started together with `pyctl start --shards N`, or one per box with
`--shard-group` and `--shard-index`). Any member answers REPLAY.SHARDS with
the whole group, so a client needs one address:

    rc = ShardedReplayClient.from_seed("10.0.0.5:6379")
    rc.create("replay", capacity=1_000_000)          # on every shard
    ids = rc.add("replay", priorities, items)        # one shard per batch, in turn
    batch = rc.sample("replay", 512)                 # every shard at once, one round trip
    rc.update("replay", batch.ids, new_priorities)   # each id back to its shard

    rc.create_trajectory_table("seq", capacity=100_000)        # TRAJECTORY, every shard
    w = rc.trajectory_writer("actor-3", signature)     # its stream on one shard
    s = rc.sample_trajectories("seq", 64, info=True)   # columns from every shard at once

Exact global prioritized sampling. Other replay systems sample each shard
about equally often (Reverb round-robins across servers; RLlib's Ape-X takes
each batch from one shard), so item i is drawn with p_i / (S * P_s) instead of
p_i / P. Here a batch of n is split across shards in proportion to their
total priorities P_s, stratified (shard s gets floor or ceil of n * P_s / P,
with the right expectation; or multinomial counts), every shard request goes
out before any reply is read, and each shard answers with its draws plus its
own total, minimum priority, live size and each draw's probability inside it
(REPLAY.SAMPLE ... WITHSTATS). A draw from shard s then has the global
probability P(i) = q_s * p_i / P_s, where q_s is the share of the batch the
shard was given, and its importance weight is (N * P(i))^-beta divided by the
largest weight any item of the group could get, N being the group's size.

The shares come from the totals of the previous reply (or one REPLAY.INFO
round when there is none). The weights use the shares actually used, so they
correct exactly for the distribution the batch was drawn from; when
priorities change between batches that distribution lags the newest totals by
one batch (refresh() re-reads them).

Trajectory tables are sampled the same way. Their items reference
chunks of one shard's episode streams, so a writer's stream, its steps and its
items stay on one shard: by default the shard of a hash of the stream's name
(stream_shard: BLAKE2b mod N, the same in every process), or the writer's
shard=, or with rotate=True each new episode on the next shard.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import redis

from pyctl import _jax, _wire, errors
from pyctl.client import (
    ItemSpec,
    ReplayClient,
    Sample,
    SampleInfo,
    SampleRequest,
    draw,
    parse_stats,
    sample_args,
    sample_requests,
)
from pyctl.config import WILDCARD_HOSTS
from pyctl.trajectory import (
    Columns,
    TrajectorySample,
    TrajectoryWriter,
    chunk_stats,
    create_trajectory_table,
    join_columns,
    reply_columns,
)

SHARD_ID_BITS = 48
"""Ids of shard k start at k << 48 (IR_SHARD_ID_BITS in inreplay.h): an id names its shard."""


def split_address(addr: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets: [::1]:6379) as (host, port); ValueError
    for anything else."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"shard address {addr!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def _reachable(member: str, seed_host: str) -> str:
    """A member advertised on a wildcard address (`pyctl start --shards N --listen
    0.0.0.0:P` advertises what it listens on) lives on the seed's box, as a --shards
    group is one box: reach it at the address the seed was reached at."""
    host, port = split_address(member)
    if host not in WILDCARD_HOSTS:
        return member
    return f"[{seed_host}]:{port}" if ":" in seed_host else f"{seed_host}:{port}"


@dataclass
class ShardStats:
    """What one shard said about itself in its last reply."""

    total: float
    """Sum of the shard's stored priorities."""
    min_priority: float
    """Smallest positive stored priority (0: none, the shard samples uniformly)."""
    size: int
    """Live items."""


class ShardedReplayClient:
    """The methods of ReplayClient over a replay group, with exact global sampling."""

    def __init__(self, addresses: Sequence[str], *, stratified: bool = True,
                 seed: int | None = None,
                 unix_socket_paths: Sequence[str | None] | None = None,
                 **kwargs: Any) -> None:
        """addresses: every member's HOST:PORT in shard order (REPLAY.SHARDS's order).
        stratified: split batches with stratified shares (False: multinomial counts).
        unix_socket_paths: per shard, in the same order, the Unix socket to reach it by
        instead of its address (a shard on this box started with --unixsocket), or None
        for TCP.
        kwargs go to each shard's redis.Redis (password, socket_timeout, ...)."""
        if not addresses:
            raise ValueError("a replay group needs at least one address")
        if "unix_socket_path" in kwargs:
            raise ValueError("unix_socket_path would send every shard to one server: give "
                             "unix_socket_paths, one per shard (None for TCP)")
        self.addresses = list(addresses)
        paths = list(unix_socket_paths) if unix_socket_paths is not None else []
        if paths and len(paths) != len(self.addresses):
            raise ValueError(f"unix_socket_paths has {len(paths)} entries for "
                             f"{len(self.addresses)} shards: give one per shard (None for TCP)")
        paths = paths or [None] * len(self.addresses)
        self.shards = [ReplayClient(*split_address(a), unix_socket_path=p, **kwargs)
                       for a, p in zip(self.addresses, paths, strict=True)]
        self.stratified = stratified
        self._rng = np.random.default_rng(seed)
        self._stats: dict[str, list[ShardStats]] = {}
        self._next_add = 0
        self._beta: dict[str, float] = {}
        self._kind: dict[str, tuple[str, int, bool]] = {}  # sampler, max_times_sampled, traj
        for k, rc in enumerate(self.shards):
            index, members = shard_members(rc.redis)
            if members and (index != k or len(members) != len(self.shards)):
                raise ValueError(f"{self.addresses[k]} is shard {index} of a group of "
                                 f"{len(members)} ({','.join(members)}), not shard {k} of "
                                 f"{len(self.shards)}: give the addresses in REPLAY.SHARDS order")

    @classmethod
    def from_seed(cls, address: str, /, **kwargs: Any) -> ShardedReplayClient:
        """Connect to the group that the server at address (HOST:PORT) belongs to
        (kwargs as __init__'s: seed= is the sampling RNG's seed)."""
        host, port = split_address(address)
        members = group_members(host, port, **{k: v for k, v in kwargs.items()
                                               if k not in ("stratified", "seed")})
        return cls([_reachable(m, host) for m in members] or [address], **kwargs)

    @property
    def redis(self) -> redis.Redis:
        """Shard 0's connection: the group's key/value store (parameters, run metadata)."""
        return self.shards[0].redis

    def close(self) -> None:
        for rc in self.shards:
            rc.close()

    def __enter__(self) -> ShardedReplayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- sending to several shards at once ------------------------------------------
    def _fanout(self, requests: list[tuple[int, tuple[Any, ...]]]) -> list[Any]:
        """Send every (shard, command) before reading any reply: one round trip for all.
        Replies come back in request order; an error reply is raised after all are read."""
        return self._exchange(requests, None)  # type: ignore[return-value]

    def _fanout_into(self, requests: list[tuple[int, tuple[Any, ...]]],
                     dests: list[list[memoryview]]) -> list[int | None] | None:
        """_fanout for bulk replies read straight into dests (one list per request, as
        _wire.recv_bulk_into: None where a reply filled them, else its length); None,
        having sent nothing, when a connection cannot be read raw."""
        return self._exchange(requests, dests)

    def _exchange(self, requests: list[tuple[int, tuple[Any, ...]]],
                  dests: list[list[memoryview]] | None) -> list[Any] | None:
        """_fanout (dests None: redis-py's replies) and _fanout_into, on one connection
        of each shard's pool; any failure but an error reply disconnects them all."""
        conns = []
        try:
            for k, _ in requests:
                pool = self.shards[k].redis.connection_pool
                conn = pool.get_connection()
                conns.append((pool, conn))
                if dests is not None and conn._sock is None:
                    conn.connect()
            if dests is not None and not all(_wire.idle(c) for _, c in conns):
                return None
            for (_, args), (_, conn) in zip(requests, conns, strict=True):
                if dests is None:
                    conn.send_command(*args)
                else:
                    conn.send_packed_command(conn.pack_command(*args))
            out: list[Any] = []
            first_error: BaseException | None = None
            for j, ((k, _), (_, conn)) in enumerate(zip(requests, conns, strict=True)):
                try:
                    out.append(conn.read_response() if dests is None
                               else _wire.recv_bulk_into(conn, dests[j]))
                except redis.ResponseError as e:
                    out.append(None)
                    first_error = first_error or (
                        errors.where(e, k, self.addresses[k]) if len(self.shards) > 1
                        else errors.replay_error(e))
            if first_error:
                raise first_error
            return out
        except redis.ResponseError:
            raise
        except BaseException:
            for _, conn in conns:  # a reply may be left half read: start afresh
                conn.disconnect()
            raise
        finally:
            for pool, conn in conns:
                pool.release(conn)

    def _all(self, *args: Any) -> list[Any]:
        return self._fanout([(k, args) for k in range(len(self.shards))])

    # ---- the ReplayClient methods ---------------------------------------------------------
    def create(self, table: str, capacity: int, **opts: Any) -> None:
        """REPLAY.CREATE on every shard, each with `capacity` slots (the group holds
        N times capacity). Options as ReplayClient.create; a rate limiter's min_size is
        the group's, split evenly (each shard enforces its share and the ratio on its
        own traffic)."""
        if opts.get("min_size"):
            opts["min_size"] = -(-int(opts["min_size"]) // len(self.shards))
        for rc in self.shards:
            rc.create(table, capacity, **opts)

    def add(self, table: str, priorities: Any, items: Any, **kwargs: Any) -> npt.NDArray[np.int64]:
        """Insert a batch on one shard (the shards take batches in turn); returns the ids,
        unique across the group. Arguments as ReplayClient.add (schema, timeout)."""
        k = self._next_add
        self._next_add = (k + 1) % len(self.shards)
        return self.shards[k].add(table, priorities, items, **kwargs)

    def inserter(self, table: str, *, max_in_flight: int = 4, schema: Any = None,
                 timeout: float | None = None, resend: Any = None) -> Any:
        """Pipelined adds across the group (pyctl.inserter.GroupInserter): the batches take
        the shards in turn, up to max_in_flight on each shard's connection; resend as
        ReplayClient.inserter's."""
        from pyctl.inserter import GroupInserter

        return GroupInserter(self.shards, table, max_in_flight=max_in_flight, schema=schema,
                             timeout=timeout, resend=resend)

    def update(self, table: str, ids: npt.ArrayLike, priorities: npt.ArrayLike) -> int:
        """New raw priorities; each id goes back to the shard that issued it, all shards
        in one round trip. Returns how many applied."""
        i = np.ascontiguousarray(ids, dtype="<i8").reshape(-1)
        p = np.ascontiguousarray(priorities, dtype="<f4").reshape(-1)
        if i.shape != p.shape:
            raise ValueError(f"{i.size} ids but {p.size} priorities")
        owner = i >> SHARD_ID_BITS
        bad = np.flatnonzero((owner < 0) | (owner >= len(self.shards)))
        if bad.size:
            raise ValueError(f"id {int(i[bad[0]])} at index {int(bad[0])} belongs to no shard of "
                             f"this group of {len(self.shards)}; the batch was rejected whole")
        reqs = []
        for k in np.unique(owner):
            sel = owner == k
            reqs.append((int(k), ("REPLAY.UPDATE", table, i[sel].tobytes(), p[sel].tobytes())))
        return sum(int(r) for r in self._fanout(reqs))

    def refresh(self, table: str) -> list[ShardStats]:
        """Every shard's total, minimum priority and size, in one REPLAY.INFO round."""
        stats = []
        for raw in self._all("REPLAY.INFO", table):
            d = errors.decode_info(raw)
            mn = d["min_priority"]
            if d.get("sampler") == "uniform":  # mass 1 per item, as WITHSTATS says
                stats.append(ShardStats(float(d["size"]), 1.0, d["size"]))
                continue
            stats.append(ShardStats(d["total_priority"], mn if np.isfinite(mn) else 0.0,
                                    d["size"]))
        self._stats[table] = stats
        return stats

    def shares(self, table: str) -> npt.NDArray[np.float64]:
        """The share of a batch each shard gets: P_s / P (by size when no shard has
        priority mass)."""
        stats = self._stats.get(table)
        if not stats or not any(s.size for s in stats):  # nothing known yet: ask
            stats = self.refresh(table)
        mass = np.array([s.total if s.size else 0.0 for s in stats])
        if not mass.sum() > 0:
            mass = np.array([float(s.size) for s in stats])
        if not mass.sum() > 0:  # every shard empty: each says so, or its limiter waits
            mass = np.ones(len(stats))
        return mass / mass.sum()

    def _counts(self, q: npt.NDArray[np.float64], n: int) -> npt.NDArray[np.int64]:
        if not self.stratified:
            return self._rng.multinomial(n, q).astype(np.int64)
        # systematic: n evenly spaced points with one random offset, binned by the
        # cumulative shares (each shard gets floor or ceil of n * q_s, unbiased)
        edges = np.cumsum(q)
        edges[-1] = 1.0
        pts = (np.arange(n) + self._rng.random()) / n
        return np.bincount(np.searchsorted(edges, pts, side="right"),
                           minlength=len(q)).astype(np.int64)

    def _check_exact(self, table: str) -> None:
        """Only the prioritized and uniform samplers without MAX_TIMES_SAMPLED are
        sampled exactly across shards (WITHSTATS gives a uniform table mass 1 per item);
        fifo/lifo/heaps have no global order here, and removal would race."""
        if table not in self._kind:
            i = self.shards[0].info(table)
            self._kind[table] = (str(i.get("sampler", "prioritized")),
                                 int(i.get("max_times_sampled", 0)), "columns" in i)
        sampler, k, _ = self._kind[table]
        if sampler not in ("prioritized", "uniform") or k:
            raise ValueError(f"table {table!r} ({sampler} sampler, MAX_TIMES_SAMPLED {k}) cannot "
                             f"be sampled exactly across a replay group: sample its shards "
                             f"with ReplayClient")

    @_jax.option
    def sample(self, table: str, n: int, *, beta: float | None = None,
               item_shape: tuple[int, ...] | int | None = None,
               item_dtype: npt.DTypeLike | None = None, schema: Any = None,
               torch: bool = False, device: Any = None, timeout: float | None = None,
               out: Any = None, info: bool = False, jax: bool = False) -> Sample:
        """Draw n items from the whole group with exact global probabilities and
        importance weights (see the module docstring), one round trip to every shard
        that gets a share. Arguments and items as ReplayClient.sample (packed items
        are read from each shard's socket straight into their place in one array,
        ``out`` when given). info=True: a ShardedSampleInfo (global probabilities,
        each draw's shard, the group's size). jax=True: weights and items as jax.Arrays
        (DLPack, pyctl/_jax.py)."""
        n = int(n)
        if n <= 0:
            raise ValueError(f"sample size must be positive, not {n}")
        spec = ItemSpec.of(item_shape, item_dtype, schema, torch, device)
        self._check_exact(table)
        if self._kind[table][2]:
            raise ValueError(f"table {table!r} holds trajectories: sample it with "
                             f"sample_trajectories")
        q = self.shares(table)
        counts = self._counts(q, n)
        beta = self._default_beta(table, beta)
        reqs = sample_requests(table, [(int(k), int(counts[k]), self._where(int(k)))
                                       for k in np.flatnonzero(counts)],
                               spec, beta=beta, timeout=timeout, info=info, stats=True)
        got = draw(reqs, n, spec, out=out, info=info, stats=True, send_into=self._send_into,
                   send=self._send, not_raw="out= needs plain TCP or Unix-socket connections "
                                            "with no reply pending; sample without out=")
        stats = list(self._stats.get(table) or self.refresh(table))
        for r, head in zip(reqs, got.stats, strict=True):
            stats[r.shard] = ShardStats(*head)
        owner = np.repeat(np.array([r.shard for r in reqs], np.int64), [r.n for r in reqs])
        assert got.probs is not None  # WITHSTATS
        weights = self._weights(table, q, owner, got.probs, beta, stats)
        shards = [(r.shard, r.args) for r in reqs]
        return got.sample(weights, _group_info(stats, shards, got.infos, q, owner, got.probs)
                          if info else None)

    def _where(self, k: int) -> str:
        """Shard k in an error message ("" in a group of one)."""
        return f" on shard {k} ({self.addresses[k]})" if len(self.shards) > 1 else ""

    # the transport of draw(): every shard's request before any reply is read
    def _send_into(self, reqs: list[SampleRequest],
                   dests: list[list[memoryview]]) -> list[int | None] | None:
        return self._fanout_into([(r.shard, r.args) for r in reqs], dests)

    def _send(self, reqs: list[SampleRequest]) -> list[Any]:
        return self._fanout([(r.shard, r.args) for r in reqs])

    def _weights(self, table: str, q: npt.NDArray[np.float64], owner: npt.NDArray[np.int64],
                 probs: npt.NDArray[np.float64], beta: float,
                 stats: list[ShardStats]) -> npt.NDArray[np.float32]:
        self._stats[table] = stats
        p_global = q[owner] * probs
        # the least probable item of the group has the largest weight
        p_min = min(q[k] * (s.min_priority / s.total if s.total > 0 else 1.0 / s.size)
                    for k, s in enumerate(stats) if s.size and q[k] > 0)
        return ((p_global / p_min) ** -beta).astype(np.float32)

    def info(self, table: str) -> dict[str, Any]:
        """REPLAY.INFO of every shard ("shards": a list of dicts) with the group's
        size, capacity, inserts, samples and total_priority summed."""
        per = [rc.info(table) for rc in self.shards]
        out: dict[str, Any] = {"name": table, "shards": per}
        for key in ("size", "capacity", "inserts", "samples", "updates", "evictions",
                    "total_priority", "bytes_used", "maxbytes", "blocked_samplers",
                    "blocked_inserters"):
            out[key] = sum(d.get(key, 0) for d in per)
        return out

    def drop(self, table: str) -> None:
        """REPLAY.DROP on every shard."""
        self._all("REPLAY.DROP", table)
        for cache in (self._stats, self._kind, self._beta):
            cache.pop(table, None)

    def tables(self) -> list[str]:
        return self.shards[0].tables()

    # ---- trajectory tables ------------------------------------------------
    def create_trajectory_table(self, table: str, capacity: int, **opts: Any) -> None:
        """REPLAY.CREATE ... TRAJECTORY on every shard, `capacity` items each (options as
        create's; min_size is the group's, split evenly)."""
        if opts.get("min_size"):
            opts["min_size"] = -(-int(opts["min_size"]) // len(self.shards))
        for rc in self.shards:
            create_trajectory_table(rc, table, capacity, **opts)

    def stream_shard(self, stream: str) -> int:
        """The shard a stream lives on by default: a hash of its name (BLAKE2b, 64 bits)
        modulo the group's size, the same in every process (an actor that reconnects
        finds its stream)."""
        digest = hashlib.blake2b(stream.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little") % len(self.shards)

    def trajectory_writer(self, stream: str,
                          signature: Mapping[str, tuple[tuple[int, ...] | int, npt.DTypeLike]],
                          *, shard: int | None = None, rotate: bool = False,
                          **opts: Any) -> ShardedTrajectoryWriter:
        """A TrajectoryWriter whose episode stream lives on one shard: `shard`, else
        stream_shard(stream). An episode's steps and the items over them stay on that
        shard (items reference its chunks). rotate=True moves each new episode to the next
        shard (one actor then fills every shard in turn). opts: chunk_steps, history,
        compress, item_timeout, as TrajectoryWriter's."""
        return ShardedTrajectoryWriter(self, stream, signature, shard=shard, rotate=rotate,
                                       **opts)

    @_jax.option
    def sample_trajectories(self, table: str, n: int, *, beta: float | None = None,
                            info: bool = False, torch: bool = False,
                            timeout: float | None = None, jax: bool = False,
                            ) -> TrajectorySample:
        """Draw n items of a TRAJECTORY table from the whole group, as sample() does for
        plain tables: the batch split by the shards' total priorities, one round trip to
        every shard with a share, global importance weights. Each column is one array
        (n, length, *shape), the shards' draws in the order of ids. info=True: a
        ShardedSampleInfo (global probability, the shard of each draw, the group's size).
        jax=True: weights and columns as jax.Arrays (DLPack, pyctl/_jax.py)."""
        n = int(n)
        if n <= 0:
            raise ValueError(f"sample size must be positive, not {n}")
        self._check_exact(table)
        if not self._kind[table][2]:
            raise ValueError(f"table {table!r} holds opaque items, not trajectories: "
                             f"sample it with sample")
        q = self.shares(table)
        counts = self._counts(q, n)
        beta = self._default_beta(table, beta)
        reqs = [(int(k), tuple(sample_args(table, int(counts[k]), beta=beta, withstats=True,
                                           withinfo=info, timeout=timeout)))
                for k in np.flatnonzero(counts)]
        replies = self._fanout(reqs)
        stats = list(self._stats.get(table) or self.refresh(table))
        ids, probs, owners, infos = [], [], [], []
        cols: Columns | None = None
        for (k, _), rep in zip(reqs, replies, strict=True):
            m = int(counts[k])
            got = reply_columns(self.shards[k].redis, table, rep[2], m)
            if got is None:
                raise ValueError(f"table {table!r} on shard {k} ({self.addresses[k]}) has "
                                 f"columns that do not match its reply of {m} items")
            if cols is None:
                cols = got
            elif got != cols:
                raise ValueError(f"table {table!r} has columns {_fmt_cols(got)} on shard {k} "
                                 f"({self.addresses[k]}) but {_fmt_cols(cols)} on shard "
                                 f"{reqs[0][0]}: its items must have the same columns "
                                 f"on every shard")
            ids.append(np.frombuffer(rep[0], "<i8"))
            head, prob = parse_stats(rep[3], m)
            stats[k] = ShardStats(*head)
            probs.append(prob)
            owners.append(np.full(m, k, np.int64))
            if info:
                infos.append(SampleInfo.parse(rep[4], m))
        assert cols is not None  # n > 0: some shard had a share
        owner = np.concatenate(owners)
        prob = np.concatenate(probs)
        weights = self._weights(table, q, owner, prob, beta, stats)
        out = join_columns(cols, [rep[2] for rep in replies], n, torch)
        sinfo = _group_info(stats, reqs, infos, q, owner, prob) if info else None
        return TrajectorySample(np.concatenate(ids).astype(np.int64), weights, out, sinfo)

    def chunk_stats(self) -> dict[str, Any]:
        """REPLAY.CHUNKS of every shard summed, with "shards": each shard's own."""
        per = [chunk_stats(rc) for rc in self.shards]
        out: dict[str, Any] = {k: sum(d[k] for d in per) for k in per[0]}
        out["shards"] = per
        return out

    def _default_beta(self, table: str, beta: float | None) -> float:
        if beta is None:  # the table's own default, asked once
            if table not in self._beta:
                self._beta[table] = float(self.shards[0].info(table)["beta"])
            beta = self._beta[table]
        return beta


@dataclass
class ShardedSampleInfo(SampleInfo):
    """SampleInfo of a draw from a replay group: table_size is the group's and
    probability each draw's global probability (what its weight corrects for)."""

    shard: npt.NDArray[np.int64] = field(default_factory=lambda: np.empty(0, np.int64))
    """The shard each draw came from (also ids >> SHARD_ID_BITS)."""
    shard_sizes: list[int] = field(default_factory=list)
    """Each shard's live items (as its sample began, for the shards that drew)."""


def _group_info(stats: list[ShardStats], reqs: list[tuple[int, tuple[Any, ...]]],
                infos: list[SampleInfo], q: npt.NDArray[np.float64],
                owner: npt.NDArray[np.int64], prob: npt.NDArray[np.float64]
                ) -> ShardedSampleInfo:
    """The shards' WITHINFO parts as one info: global probabilities, the group's size."""
    sizes = [s.size for s in stats]
    for (k, _), i in zip(reqs, infos, strict=True):
        sizes[k] = i.table_size  # as the sample began, like one server's info
    return ShardedSampleInfo(sum(sizes), q[owner] * prob,
                             np.concatenate([i.priority for i in infos]),
                             np.concatenate([i.times_sampled for i in infos]), owner, sizes)


def _fmt_cols(cols: Columns) -> str:
    return ",".join(f"{name}:{dt.name}{list(shape)}x{length}"
                    for name, dt, shape, length in cols)


class ShardedTrajectoryWriter(TrajectoryWriter):
    """A TrajectoryWriter on one shard of a replay group (see
    ShardedReplayClient.trajectory_writer); `shard` is where the current episode goes."""

    def __init__(self, group: ShardedReplayClient, stream: str,
                 signature: Mapping[str, tuple[tuple[int, ...] | int, npt.DTypeLike]], *,
                 shard: int | None = None, rotate: bool = False, **opts: Any) -> None:
        k = group.stream_shard(stream) if shard is None else int(shard)
        if not 0 <= k < len(group.shards):
            raise ValueError(f"shard {shard} is not in this group of {len(group.shards)}")
        self.group, self.shard, self.rotate = group, k, rotate
        super().__init__(group.shards[k], stream, signature, **opts)
        self._declared = {k}

    def end_episode(self) -> list[int]:
        """Flush and end the episode; with rotate, the next one goes to the next shard."""
        ids = super().end_episode()
        if self.rotate and len(self.group.shards) > 1:
            k = (self.shard + 1) % len(self.group.shards)
            r = self.group.shards[k].redis
            if k not in self._declared:
                r.execute_command(*self.declaration)
                self._declared.add(k)
            self.shard, self.redis = k, r
        return ids

    def close(self) -> None:
        """Flush and drop the stream on every shard it was declared on."""
        self.flush()
        for k in sorted(self._declared):
            self.group.shards[k].redis.execute_command("REPLAY.STREAM", self.stream, "DROP")


def home_address(host: str, port: int, **kwargs: Any) -> tuple[str, int]:
    """Where a group keeps its keys (parameters, counters): shard 0, found from any
    member; (host, port) itself for a standalone server."""
    members = group_members(host, port, **kwargs)
    return split_address(members[0]) if members else (host, port)


def replay_client(address: str, **kwargs: Any) -> ReplayClient | ShardedReplayClient:
    """The client for the server at HOST:PORT: a ReplayClient for a standalone server,
    a ShardedReplayClient for its whole group when it is a member of one (members in
    REPLAY.SHARDS order, as advertised). kwargs go to redis.Redis (password,
    socket_timeout, ...)."""
    host, port = split_address(address)
    members = group_members(host, port, **kwargs)
    if members:
        return ShardedReplayClient(members, **kwargs)
    return ReplayClient(host, port, **kwargs)


def group_members(host: str, port: int, **kwargs: Any) -> list[str]:
    """Every member's HOST:PORT of the group the server at host:port belongs to, in shard
    order ([] for a standalone server), asked on a connection of its own (kwargs go to
    redis.Redis; RESP2 unless protocol= says otherwise) that is closed after."""
    kwargs.setdefault("protocol", 2)
    r = redis.Redis(host=host, port=port, **kwargs)
    try:
        return shard_members(r)[1]
    finally:
        r.close()


def shard_members(r: redis.Redis) -> tuple[int, list[str]]:
    """REPLAY.SHARDS on r: (this server's index, every member's HOST:PORT in shard order);
    the list is empty for a standalone server."""
    raw = r.execute_command("REPLAY.SHARDS")
    if isinstance(raw, dict):  # RESP3
        d = {k if isinstance(k, bytes) else str(k).encode(): v for k, v in raw.items()}
    else:
        d = dict(zip(raw[::2], raw[1::2], strict=True))
    members = [m.decode() if isinstance(m, bytes) else str(m) for m in d[b"shards"]]
    return int(d[b"index"]), members
