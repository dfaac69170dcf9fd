"""Pipelined inserts into a replay group: one pyctl.client.Inserter per shard.

See pyctl.client.Inserter for what pipelining an actor's inserts means."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import redis

from pyctl.client import Inserter

if TYPE_CHECKING:
    from pyctl.client import ReplayClient, Schema
    from pyctl.errors import RateLimited


class GroupInserter:
    """Pipelined inserts into a replay group: one :class:`Inserter` per shard, the batches
    taking the shards in turn as ``ShardedReplayClient.add`` does."""

    def __init__(self, shards: list[ReplayClient], table: str, *, max_in_flight: int = 4,
                 schema: Schema | None = None, timeout: float | None = None,
                 resend: Callable[[RateLimited], bool] | None = None) -> None:
        self._ins = [Inserter(c, table, max_in_flight=max_in_flight, schema=schema,
                              timeout=timeout, resend=resend) for c in shards]
        self._next = 0

    def add(self, priorities: Any, items: Any) -> None:
        """Send one batch to the next shard (Inserter.add)."""
        k = self._next
        self._next = (k + 1) % len(self._ins)
        self._ins[k].add(priorities, items)

    def flush(self) -> int:
        """Every shard's replies read; the items acknowledged across the group. The first
        shard's error raises after all are flushed."""
        first: Exception | None = None
        for ins in self._ins:
            try:
                ins.flush()
            except (redis.ConnectionError, redis.TimeoutError):
                raise
            except Exception as e:
                first = first or e
        if first is not None:
            raise first
        return self.added

    @property
    def added(self) -> int:
        return sum(ins.added for ins in self._ins)

    @property
    def resent(self) -> int:
        return sum(ins.resent for ins in self._ins)

    @property
    def in_flight(self) -> int:
        return sum(ins.in_flight for ins in self._ins)

    def close(self) -> None:
        try:
            self.flush()
        finally:
            for ins in self._ins:
                ins.__exit__(None, None, None)

    def __enter__(self) -> GroupInserter:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
        else:
            for ins in self._ins:
                ins.__exit__(*exc)
