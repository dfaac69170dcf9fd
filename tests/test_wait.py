"""WAIT numreplicas timeout: against stock redis-server and inreplay without
replicas (the same replies, errors included), and with a stock redis-server
7.0.15 replicating inreplay (REPLCONF ACK answers the GETACK WAIT sends).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
import redis
from conftest import HOST
from test_replication import _wait

if TYPE_CHECKING:
    from conftest import ServerProcess


def test_wait_without_replicas(server: ServerProcess) -> None:
    r = server.client()
    try:
        r.set("k", "v")
        assert r.execute_command("WAIT", 0, 0) == 0
        t0 = time.monotonic()
        assert r.execute_command("WAIT", 1, 200) == 0  # the timeout: no replica acknowledged
        assert time.monotonic() - t0 >= 0.18
        for args, msg in [
            (("x", 0), "value is not an integer or out of range"),
            ((1, "x"), "timeout is not an integer or out of range"),
            ((1, "1.5"), "timeout is not an integer or out of range"),
            ((1, -1), "timeout is negative"),
            ((1,), "wrong number of arguments for 'wait' command"),
        ]:
            with pytest.raises(redis.ResponseError, match=msg):
                r.execute_command("WAIT", *args)
        # in a transaction WAIT cannot block: it answers at once
        p = r.pipeline(transaction=True)
        p.set("k", "w").execute_command("WAIT", 1, 0)
        t0 = time.monotonic()
        assert p.execute() == [True, 0]
        assert time.monotonic() - t0 < 1
    finally:
        r.close()


def test_wait_counts_a_stock_replica(server_factory: Callable[..., ServerProcess]) -> None:
    master = server_factory("inreplay")
    replica = server_factory("redis", "--replicaof", HOST, str(master.port))
    s = replica.client()
    m = master.client()
    try:
        _wait("the link", lambda: s.info("replication")["master_link_status"] == "up")
        for i in range(3):
            m.set("param", f"blob{i}" * 1000)
            t0 = time.monotonic()
            assert m.execute_command("WAIT", 1, 5000) == 1
            # answered on the replica's ACK to the GETACK, not its 1 s periodic one
            assert time.monotonic() - t0 < 0.9
            assert s.get("param") == f"blob{i}".encode() * 1000
        m.set("x", "1")
        assert m.execute_command("WAIT", 1, 0) == 1  # 0: no time limit
        t0 = time.monotonic()
        assert m.execute_command("WAIT", 2, 300) == 1  # one of two: the timeout answers
        assert time.monotonic() - t0 >= 0.28
        assert m.info("clients")["blocked_clients"] == 0
        info = m.info("replication")
        assert 0 < info["slave0"]["offset"] <= info["master_repl_offset"]
    finally:
        s.close()
        m.close()
