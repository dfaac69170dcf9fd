"""A client killed in the middle of a request: nothing partial becomes visible, its
memory is freed, and other clients are unaffected (stock Redis, kernel and DPDK stacks)."""

from __future__ import annotations

import socket
import struct
import time

from pyctl.errors import decode_info
from tests.conftest import ServerProcess

BIG = 13 << 20


def kill_midway(server: ServerProcess, head: bytes, body_sent: int) -> None:
    """Send a request header and part of its body, then reset the connection."""
    s = server.connect(timeout=10)
    s.sendall(head)
    chunk = b"\r\n\x00x" * (1 << 14)
    sent = 0
    while sent < body_sent:
        n = min(len(chunk), body_sent - sent)
        s.sendall(chunk[:n])
        sent += n
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()  # RST: the peer is gone mid-request


def wait_clients(r: object, n: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if int(r.info("clients")["connected_clients"]) == n:  # type: ignore[attr-defined]
            return
        time.sleep(0.05)
    raise AssertionError(f"connected_clients did not return to {n}")


def test_killed_during_13mb_set(server: ServerProcess) -> None:
    other = server.client()
    other.set("x", "1")
    wait_clients(other, 1)
    before = int(other.info("memory")["used_memory"])
    head = b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n" % BIG
    kill_midway(server, head, BIG // 2)
    wait_clients(other, 1)
    assert other.get("big") is None, "no partial value is visible"
    assert other.get("x") == b"1" and other.dbsize() == 1
    after = int(other.info("memory")["used_memory"])
    assert after < before + (1 << 20), f"the half-received 13 MB was freed ({before}->{after})"
    other.set("big", b"y" * 10)  # the server keeps serving
    assert other.get("big") == b"y" * 10
    other.close()


def test_killed_during_replay_add_batch(replay_server: ServerProcess) -> None:
    server = replay_server
    other = server.client()
    other.execute_command("REPLAY.CREATE", "kill", "CAPACITY", "1000")
    wait_clients(other, 1)
    items = 200
    head = b"*%d\r\n$10\r\nREPLAY.ADD\r\n$4\r\nkill\r\n" % (2 + 2 * items)
    one = b"$1\r\n1\r\n$28672\r\n" + b"\x07" * 28672 + b"\r\n"
    s = server.connect(timeout=10)
    s.sendall(head + one * (items // 2))  # half the batch, then the client dies
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    wait_clients(other, 1)
    d = decode_info(other.execute_command("REPLAY.INFO", "kill"))
    assert d["size"] == 0 and d["inserts"] == 0, "no item of the unfinished batch is visible"
    assert other.execute_command("REPLAY.ADD", "kill", "1", b"ok") == [0]
    other.close()
