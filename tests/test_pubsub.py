"""Pub/sub against both servers: SUBSCRIBE, PSUBSCRIBE, PUBLISH, PUBSUB, the
RESP2 subscribed mode, RESP3 push messages, the pubsub output limit, and
redis-py's PubSub on both protocols.

Every test runs against stock redis-server 7.0.15 and inreplay with the same
expectations.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
import redis
from conftest import RespError
from helpers import mbulk

# also over the same-host rings (server kind shm), against stock Redis as the others
pytestmark = pytest.mark.also_shm

if TYPE_CHECKING:
    from conftest import RawConn, ServerProcess

Raw = Callable[[], "RawConn"]

CONTEXT_ERR = (
    "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET "
    "are allowed in this context"
)


def test_subscribe_publish_message(raw: Raw) -> None:
    sub, pub = raw(), raw()
    assert sub.call("SUBSCRIBE", "ps.a", "ps.b") == [b"subscribe", b"ps.a", 1]
    assert sub.read_reply() == [b"subscribe", b"ps.b", 2]
    assert sub.call("SUBSCRIBE", "ps.a") == [b"subscribe", b"ps.a", 2]  # already: count unchanged
    assert pub.call("PUBLISH", "ps.a", "hello") == 1
    assert sub.read_reply() == [b"message", b"ps.a", b"hello"]
    payload = bytes(range(256)) * 100  # binary, bigger than a reference chunk
    assert pub.call("PUBLISH", "ps.b", payload) == 1
    assert sub.read_reply() == [b"message", b"ps.b", payload]
    assert pub.call("PUBLISH", "ps.none", "x") == 0
    assert sub.call("UNSUBSCRIBE", "ps.a") == [b"unsubscribe", b"ps.a", 1]
    assert pub.call("PUBLISH", "ps.a", "gone") == 0
    assert sub.call("UNSUBSCRIBE") == [b"unsubscribe", b"ps.b", 0]
    assert sub.call("UNSUBSCRIBE") == [b"unsubscribe", None, 0]
    assert sub.call("PUNSUBSCRIBE") == [b"punsubscribe", None, 0]
    assert sub.call("GET", "ps.nokey") is None  # out of subscribed mode


def test_psubscribe_matches_redis_globs(raw: Raw) -> None:
    sub, pub = raw(), raw()
    patterns = ["pp.*", "pp.[ab]?", "pp.\\*", "pp.[^x]z"]
    for i, p in enumerate(patterns):
        assert sub.call("PSUBSCRIBE", p) == [b"psubscribe", p.encode(), i + 1]
    cases = {
        "pp.a1": ["pp.*", "pp.[ab]?"],
        "pp.*": ["pp.*", "pp.\\*"],
        "pp.yz": ["pp.*", "pp.[^x]z"],
        "pp.xz": ["pp.*"],
        "qq.a1": [],
    }
    for channel, matching in cases.items():
        assert pub.call("PUBLISH", channel, "m") == len(matching)
        got = sorted(sub.read_reply() for _ in matching)
        assert got == sorted([b"pmessage", m.encode(), channel.encode(), b"m"] for m in matching)
    # a client subscribed to a channel and a matching pattern gets both
    assert sub.call("SUBSCRIBE", "pp.a1") == [b"subscribe", b"pp.a1", 5]
    assert pub.call("PUBLISH", "pp.a1", "both") == 3
    got = [sub.read_reply() for _ in range(3)]
    assert got[0] == [b"message", b"pp.a1", b"both"]
    assert sorted(got[1:]) == sorted(
        [[b"pmessage", b"pp.*", b"pp.a1", b"both"], [b"pmessage", b"pp.[ab]?", b"pp.a1", b"both"]]
    )
    assert sub.call("PUNSUBSCRIBE", "pp.*") == [b"punsubscribe", b"pp.*", 4]


def test_resp2_subscribed_mode_allows_only_some_commands(server: ServerProcess, raw: Raw) -> None:
    sub = raw()
    sub.call("SUBSCRIBE", "ctx")
    assert sub.call("GET", "x") == RespError(CONTEXT_ERR.format("get").encode())
    assert sub.call("CONFIG", "GET", "x") == RespError(CONTEXT_ERR.format("config|get").encode())
    assert sub.call("PING") == [b"pong", b""]
    assert sub.call("PING", "hi") == [b"pong", b"hi"]
    assert sub.call("PSUBSCRIBE", "c*") == [b"psubscribe", b"c*", 2]
    assert sub.call("RESET") == "RESET"
    if server.password is not None:  # RESET signs the client out too, as in Redis
        assert sub.call("AUTH", server.password) == "OK"
    assert sub.call("PING") == "PONG"  # RESET left subscribed mode
    assert sub.call("GET", "ctx.nokey") is None


def test_pubsub_introspection(raw: Raw) -> None:
    a, b, q = raw(), raw(), raw()
    a.call("SUBSCRIBE", "pi.one", "pi.two")
    a.read_reply()
    b.call("SUBSCRIBE", "pi.one")
    b.call("PSUBSCRIBE", "pi.*", "zz*")
    b.read_reply()
    a.call("PSUBSCRIBE", "pi.*")
    channels = q.call("PUBSUB", "CHANNELS", "pi.*")
    assert sorted(channels) == [b"pi.one", b"pi.two"]
    assert b"pi.one" in q.call("PUBSUB", "CHANNELS")
    assert q.call("PUBSUB", "NUMSUB", "pi.one", "pi.two", "pi.none") == [
        b"pi.one", 2, b"pi.two", 1, b"pi.none", 0,
    ]  # fmt: skip
    assert q.call("PUBSUB", "NUMSUB") == []
    assert q.call("PUBSUB", "NUMPAT") == 2  # unique patterns
    assert q.call("PUBSUB", "SHARDCHANNELS") == []
    assert q.call("PUBSUB", "NOPE") == RespError(
        b"ERR unknown subcommand 'NOPE'. Try PUBSUB HELP."
    )
    assert q.call("PUBSUB", "NUMPAT", "x") == RespError(
        b"ERR wrong number of arguments for 'pubsub|numpat' command"
    )
    a.close()  # a disconnect unsubscribes
    deadline = time.monotonic() + 5
    while q.call("PUBSUB", "NUMSUB", "pi.two")[1] != 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert q.call("PUBSUB", "NUMSUB", "pi.two") == [b"pi.two", 0]


def test_resp3_push_messages(raw: Raw) -> None:
    sub, pub = raw(), raw()
    hello = sub.call("HELLO", "3")
    assert isinstance(hello, dict) and hello[b"proto"] == 3
    sub.send(sub.command("SUBSCRIBE", "p3"))
    assert sub.read_reply_bytes() == b">3\r\n$9\r\nsubscribe\r\n$2\r\np3\r\n:1\r\n"
    # RESP3 has no subscribed mode: any command works
    assert sub.call("GET", "p3.nokey") is None
    assert sub.call("PING") == "PONG"
    pub.call("PUBLISH", "p3", "m")
    assert sub.read_reply_bytes() == b">3\r\n$7\r\nmessage\r\n$2\r\np3\r\n$1\r\nm\r\n"
    # a client publishing to itself gets the push before PUBLISH's reply
    sub.send(sub.command("PUBLISH", "p3", "self"))
    assert sub.read_reply_bytes() == b">3\r\n$7\r\nmessage\r\n$2\r\np3\r\n$4\r\nself\r\n"
    assert sub.read_reply() == 1
    sub.send(sub.command("PSUBSCRIBE", "p*"))
    assert sub.read_reply_bytes() == b">3\r\n$10\r\npsubscribe\r\n$2\r\np*\r\n:2\r\n"
    pub.call("PUBLISH", "p3", "x")
    assert sub.read_reply_bytes() == b">3\r\n$7\r\nmessage\r\n$2\r\np3\r\n$1\r\nx\r\n"
    assert sub.read_reply_bytes() == b">4\r\n$8\r\npmessage\r\n$2\r\np*\r\n$2\r\np3\r\n$1\r\nx\r\n"
    sub.send(sub.command("UNSUBSCRIBE"))
    assert sub.read_reply_bytes() == b">3\r\n$11\r\nunsubscribe\r\n$2\r\np3\r\n:1\r\n"
    sub.send(sub.command("PUNSUBSCRIBE", "nothing"))
    assert sub.read_reply_bytes() == b">3\r\n$12\r\npunsubscribe\r\n$7\r\nnothing\r\n:1\r\n"


def test_slow_subscriber_is_disconnected_at_the_pubsub_limit(
    server: ServerProcess, raw: Raw
) -> None:
    pub = raw()
    old = pub.call("CONFIG", "GET", "client-output-buffer-limit")[1]
    assert pub.call("CONFIG", "SET", "client-output-buffer-limit", "pubsub 256kb 0 0") == "OK"
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        slow.connect((server.host, server.port))
        if server.password is not None:  # its +OK stays unread with the rest
            slow.sendall(mbulk("AUTH", server.password))
        slow.sendall(b"*2\r\n$9\r\nSUBSCRIBE\r\n$4\r\nslow\r\n")
        time.sleep(0.1)
        chunk = b"x" * 65536
        delivered = 0
        for _ in range(200):  # 13 MB that nobody reads
            delivered += pub.call("PUBLISH", "slow", chunk)
            if pub.call("PUBSUB", "NUMSUB", "slow")[1] == 0:
                break
        deadline = time.monotonic() + 5
        while pub.call("PUBSUB", "NUMSUB", "slow")[1] != 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pub.call("PUBSUB", "NUMSUB", "slow") == [b"slow", 0]
        assert delivered < 200
    finally:
        slow.close()
        pub.call("CONFIG", "SET", "client-output-buffer-limit", old)


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_pubsub(server: ServerProcess, protocol: int) -> None:
    r = redis.Redis(host=server.host, port=server.port, protocol=protocol, socket_timeout=10,
                    password=server.password)
    p = r.pubsub()
    try:
        p.subscribe("rp.chan")
        p.psubscribe("rp.*")
        assert p.get_message(timeout=5)["type"] == "subscribe"
        assert p.get_message(timeout=5)["type"] == "psubscribe"
        assert r.publish("rp.chan", "v1") == 2
        m1 = p.get_message(timeout=5)
        m2 = p.get_message(timeout=5)
        assert m1 == {"type": "message", "pattern": None, "channel": b"rp.chan", "data": b"v1"}
        assert m2 == {"type": "pmessage", "pattern": b"rp.*", "channel": b"rp.chan", "data": b"v1"}
        assert r.pubsub_numsub("rp.chan") == [(b"rp.chan", 1)]
        assert r.pubsub_numpat() >= 1
        p.unsubscribe()
        p.punsubscribe()
    finally:
        p.close()
        r.close()


def test_subscription_replies_are_sent_under_client_reply_off(raw: Raw) -> None:
    sub, pub = raw(), raw()
    sub.send(sub.command("CLIENT", "REPLY", "OFF") + sub.command("SUBSCRIBE", "off.ch"))
    assert sub.read_reply() == [b"subscribe", b"off.ch", 1]
    assert pub.call("PUBLISH", "off.ch", "m") == 1
    assert sub.read_reply() == [b"message", b"off.ch", b"m"]
    assert sub.call("UNSUBSCRIBE") == [b"unsubscribe", b"off.ch", 0]
    sub.send(sub.command("GET", "off.nokey") + sub.command("CLIENT", "REPLY", "ON"))
    assert sub.read_reply() == "OK"
