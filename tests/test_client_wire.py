"""The large-item data path of ReplayClient (pyctl/_wire.py) against a real server:
gathered REPLAY.ADD requests, PACKED samples received into preallocated arrays, and
the connection staying in step after errors and mismatched replies."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest
import redis
from helpers import free_port

from pyctl import _wire
from pyctl.client import RateLimited, ReplayClient
from pyctl.sharded import ShardedReplayClient

ATARI = 84 * 84 * 4


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    p = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pyctl", "start", "--listen", f"127.0.0.1:{p}", "--seed", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert "listening" in proc.stdout.readline()
    yield p
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=5) == 0


@pytest.fixture
def rc(port: int) -> Iterator[ReplayClient]:
    c = ReplayClient(port=port)
    for t in c.tables():
        c.drop(t)
    yield c
    c.close()


def test_add_request_is_the_resp_of_the_command() -> None:
    big = np.arange(2 * 5000, dtype=np.uint32).astype(np.uint8).reshape(2, 5000)
    rows = [memoryview(big.reshape(-1))[:5000], b"small", memoryview(big.reshape(-1))[5000:]]
    chunks = _wire.add_request("t", [b"1", b"2.5", b"MAX"], rows, ["TIMEOUT", "0.5"])
    wire = b"".join(bytes(c) for c in chunks)
    expect = redis.Connection().pack_command("REPLAY.ADD", "t", b"1", bytes(rows[0]), b"2.5",
                                             b"small", b"MAX", bytes(rows[2]), "TIMEOUT", "0.5")
    assert wire == b"".join(expect)
    # the two large items travel as views of the caller's array, not copies
    assert sum(isinstance(c, memoryview) for c in chunks) == 2


def test_send_gather_resumes_partial_sends() -> None:
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    payload = [bytes([i]) * 70_000 for i in range(5)] + [b"end"]
    got = bytearray()
    import threading

    def reader() -> None:
        while len(got) < 350_003:
            got.extend(b.recv(65536))

    t = threading.Thread(target=reader)
    t.start()
    _wire.send_gather(a, payload)
    t.join(10)
    assert bytes(got) == b"".join(payload)
    a.close()
    b.close()


def test_atari_batch_round_trip_into_out(rc: ReplayClient) -> None:
    rc.create("atari", capacity=200, alpha=1.0, epsilon=0.0)
    rng = np.random.default_rng(1)
    frames = rng.integers(0, 256, (50, 84, 84, 4), dtype=np.uint8)
    ids = rc.add("atari", np.ones(50), frames)
    assert ids.tolist() == list(range(50))
    out = np.zeros((64, 84, 84, 4), dtype=np.uint8)
    s = rc.sample("atari", 64, item_shape=(84, 84, 4), out=out)
    assert s.items is out
    np.testing.assert_array_equal(out, frames[s.ids])
    np.testing.assert_array_equal(s.weights, np.ones(64, dtype=np.float32))
    # a non-contiguous stacked batch and a list of arrays take the same path
    rc.add("atari", np.ones(25), frames[::2])
    rc.add("atari", [2.0] * 3, [frames[i] for i in range(3)])
    assert rc.info("atari")["size"] == 78


def test_out_of_the_wrong_shape_is_refused_before_sending(rc: ReplayClient) -> None:
    rc.create("t", capacity=10)
    rc.add("t", [1.0], [b"x" * 8])
    with pytest.raises(ValueError, match=r"shape \(4, 8\)"):
        rc.sample("t", 4, item_shape=(8,), out=np.empty((3, 8), np.uint8))
    with pytest.raises(ValueError, match="item_shape"):
        rc.sample("t", 4, out=np.empty((4, 8), np.uint8))
    assert rc.sample("t", 2, item_shape=(8,)).items.tobytes() == b"x" * 16


def test_mismatched_item_size_and_errors_keep_the_connection_in_step(rc: ReplayClient) -> None:
    rc.create("t", capacity=10)
    rc.add("t", [1.0, 2.0], [b"a" * 16, b"b" * 16])
    with pytest.raises(ValueError, match="16 bytes"):
        rc.sample("t", 8, item_shape=(4,), item_dtype=np.float64)  # 32-byte items asked
    with pytest.raises(redis.ResponseError, match=r"no such table|not found|unknown"):
        rc.sample("nope", 8, item_shape=(16,))
    with pytest.raises(redis.ResponseError):
        rc.add("nope", [1.0], [b"z" * 10_000])
    s = rc.sample("t", 8, item_shape=(16,))
    assert {bytes(r) for r in s.items} <= {b"a" * 16, b"b" * 16}
    assert rc.redis.ping()


def test_rate_limited_through_the_raw_path(rc: ReplayClient) -> None:
    rc.create("lim", capacity=10, min_size=5)
    with pytest.raises(RateLimited):
        rc.sample("lim", 2, item_shape=(4,))
    assert rc.redis.ping()


def test_sharded_sample_into_out(port: int, rc: ReplayClient) -> None:
    sc = ShardedReplayClient([f"127.0.0.1:{port}"])
    sc.create("sh", capacity=100)
    items = np.arange(40 * 100, dtype=np.uint32).astype(np.uint8).reshape(40, 100)
    sc.add("sh", np.linspace(1, 2, 40), items)
    out = np.empty((33, 100), np.uint8)
    s = sc.sample("sh", 33, item_shape=(100,), out=out)
    assert s.items is out
    np.testing.assert_array_equal(out, items[s.ids])
    assert s.weights.max() == pytest.approx(1.0, abs=0.2) and (s.weights <= 1.0).all()
    plain = sc.sample("sh", 33, item_shape=(100,))
    np.testing.assert_array_equal(plain.items, items[plain.ids])
    sc.close()


def test_a_dead_pooled_connection_is_replaced_once(rc: ReplayClient) -> None:
    rc.create("t", capacity=100)
    rc.add("t", [1.0], [b"a" * 8])
    for call in (lambda: rc.add("t", [1.0] * 2, np.zeros((2, 8), np.uint8)),
                 lambda: rc.sample("t", 1, item_shape=(8,))):
        pool = rc.redis.connection_pool
        conn = pool.get_connection()
        conn._sock.shutdown(socket.SHUT_RDWR)  # as if the server had dropped it
        pool.release(conn)
        call()
    assert rc.info("t")["size"] == 3


def test_a_socket_timeout_on_the_raw_path_is_redis_timeout_error(port: int) -> None:
    """Review finding: recv_into's socket timeout surfaced as the builtin TimeoutError, which
    `except redis.RedisError` (redis-py's own path's family) does not catch."""
    rc = ReplayClient(port=port, socket_timeout=0.5)
    rc.create("slowpoke", capacity=16, min_size=8)
    rc.add("slowpoke", [1.0], [np.zeros(8, np.uint8)])
    with pytest.raises(redis.TimeoutError):
        rc.sample("slowpoke", 2, item_shape=8, timeout=2)  # waits for MIN_SIZE past 0.5 s
    rc.drop("slowpoke")  # the connection was replaced: the next call works
    rc.close()


def test_a_request_the_server_got_is_not_sent_again(port: int, rc: ReplayClient) -> None:
    """Review finding: the raw path retried any request whose connection failed, so a
    REPLAY.ADD the server had applied before its connection was lost went in twice. A
    proxy forwards the request, then closes the client's side instead of passing the
    reply on: the client raises, and the items are in the table once."""
    import select
    import threading

    rc.create("once", capacity=100)
    lsock = socket.create_server(("127.0.0.1", 0))
    pport = lsock.getsockname()[1]

    def proxy() -> None:
        for _ in range(8):  # every connection the client makes (a retry would be one)
            try:
                cl, _ = lsock.accept()
            except OSError:
                return
            up = socket.create_connection(("127.0.0.1", port))
            add_sent = False
            try:  # both ways, until the server answers the REPLAY.ADD: applied, not passed on
                while True:
                    ready = select.select([cl, up], [], [], 5)[0]
                    if not ready:
                        break
                    if up in ready:
                        data = up.recv(1 << 20)
                        if add_sent or not data:
                            break
                        cl.sendall(data)
                    if cl in ready:
                        data = cl.recv(1 << 20)
                        if not data:
                            break
                        add_sent = add_sent or b"REPLAY.ADD" in data
                        up.sendall(data)
            except OSError:
                pass
            cl.close()
            up.close()

    t = threading.Thread(target=proxy, daemon=True)
    t.start()
    # TCP through the proxy (the server would otherwise hand a local client its rings)
    client = ReplayClient(port=pport, socket_timeout=5, shm=False)
    with pytest.raises(redis.ConnectionError):
        client.add("once", [1.0] * 2, np.zeros((2, 8), np.uint8))
    lsock.close()
    t.join(5)
    client.close()
    assert rc.info("once")["size"] == 2, "the request was applied twice"
