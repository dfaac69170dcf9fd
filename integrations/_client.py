"""The one way the integrations reach the appliance: ``connect(address)``."""

from __future__ import annotations

from typing import Any

import redis

from pyctl.client import ReplayClient
from pyctl.sharded import ShardedReplayClient, replay_client

Client = ReplayClient | ShardedReplayClient


def connect(address: str = "127.0.0.1:6379", **kwargs: Any) -> Client:
    """A client for the server at HOST:PORT: a ReplayClient for a standalone server, a
    ShardedReplayClient for the whole group when the server is a member of one
    (pyctl.sharded.replay_client). kwargs go to redis.Redis (password, socket_timeout,
    ...). No server there: one ConnectionError line saying how to start one."""
    try:
        return replay_client(address, **kwargs)
    except redis.ConnectionError as e:
        raise ConnectionError(f"inreplay at {address}: {e}; start one with "
                              f"`pyctl start --listen {address}`") from None
