"""The one way the integrations reach the appliance: ``connect(address)``."""

from __future__ import annotations

from typing import Any

import redis

from pyctl.client import ReplayClient
from pyctl.sharded import ShardedReplayClient, _shards_of, _split_address

Client = ReplayClient | ShardedReplayClient


def connect(address: str = "127.0.0.1:6379", **kwargs: Any) -> Client:
    """A client for the server at HOST:PORT: a ReplayClient for a standalone server, a
    ShardedReplayClient for the whole group when the server is a member of one.
    kwargs go to redis.Redis (password, socket_timeout, ...). No server there: one
    ConnectionError line saying how to start one."""
    host, port = _split_address(address)
    probe = redis.Redis(host=host, port=port, protocol=2, **kwargs)
    try:
        _, members = _shards_of(probe)
    except redis.ConnectionError as e:
        raise ConnectionError(f"inreplay at {address}: {e}; start one with "
                              f"`pyctl start --listen {address}`") from None
    finally:
        probe.close()
    if members:
        return ShardedReplayClient(members, **kwargs)
    return ReplayClient(host, port, **kwargs)
