"""Pipelined inserts: an actor's batches go out without waiting for each reply.

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
"""

from __future__ import annotations

import socket
from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import redis

from pyctl import _wire

if TYPE_CHECKING:
    from pyctl.client import ReplayClient, Schema


class Inserter:
    """REPLAY.ADD batches into one table, pipelined on a connection of its own.

    ``with rc.inserter("apex") as ins: ins.add(priorities, items)``; leaving the block
    (or :meth:`close`) flushes. Items and priorities are what ``ReplayClient.add`` takes.
    One thread at a time: an actor's threads each take an inserter of their own.
    """

    def __init__(self, client: ReplayClient, table: str, *, max_in_flight: int = 4,
                 schema: Schema | None = None, timeout: float | None = None) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, not {max_in_flight}")
        self.table = table
        self.max_in_flight = max_in_flight
        self.schema = schema
        self.timeout = timeout
        self.added = 0
        """Items the server has acknowledged so far."""
        self._redis = client.redis
        self._pool = self._redis.connection_pool
        self._own = self._redis.connection is None
        self._conn: Any = self._redis.connection or self._pool.get_connection()
        self._pending: deque[tuple[int, int]] = deque()  # (batch number, items)
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
        self._pending.append((self._batches, n))

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
        from pyctl.client import add_request

        if self._conn is None:
            raise RuntimeError("the inserter is closed")
        return add_request(self.table, priorities, items, schema=self.schema,
                           timeout=self.timeout)

    def _send(self, request: list[bytes | memoryview]) -> None:
        conn = self._conn
        try:
            if type(conn._sock) is socket.socket or type(conn._sock).__name__ == "ShmSocket":
                _wire.send_gather(conn._sock, request)
            else:  # TLS: redis-py's own send
                conn.send_packed_command(request)
        except OSError as e:
            self._lost(f"Error while writing to socket: {e}")

    def _read_one(self) -> None:
        from pyctl.client import add_error, add_ids

        batch, n = self._pending[0]
        try:
            reply = self._conn.read_response()
        except redis.ResponseError as e:
            self._pending.popleft()
            err = add_error(e, n)
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


class GroupInserter:
    """Pipelined inserts into a replay group: one :class:`Inserter` per shard, the batches
    taking the shards in turn as ``ShardedReplayClient.add`` does."""

    def __init__(self, shards: list[ReplayClient], table: str, *, max_in_flight: int = 4,
                 schema: Schema | None = None, timeout: float | None = None) -> None:
        self._ins = [Inserter(c, table, max_in_flight=max_in_flight, schema=schema,
                              timeout=timeout) for c in shards]
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
