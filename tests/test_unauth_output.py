"""The output limit of a client that has not authenticated (CVE-2025-21605), against
stock redis-server 7.0.15 (Debian's patch) and inreplay.

With a password set, a client that keeps sending commands without reading the NOAUTH
errors must not grow the server's output without bound: once more than 1024 bytes of
its replies wait for the socket it is closed ("scheduled to be closed ASAP for
overcoming of output buffer limits" in the log). A client that reads its replies, or
one that authenticated, is not held to that.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from conftest import RawConn, ServerProcess

KINDS = ("redis", "inreplay")
PASSWORD = "unauth-obuf-pw"
GET = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
NOAUTH = b"-NOAUTH Authentication required.\r\n"
LOG_LINE = "scheduled to be closed ASAP for overcoming of output buffer limits"


@pytest.fixture(scope="module")
def obuf_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProcess]]:
    servers: dict[str, ServerProcess] = {}
    try:
        for kind in KINDS:
            srv = ServerProcess(kind, tmp_path_factory.mktemp(f"unauth-{kind}"))
            with srv.raw() as c:
                assert c.call("SET", "k", "v" * 1000) == "OK"
                assert c.call("CONFIG", "SET", "requirepass", PASSWORD) == "OK"
            servers[kind] = srv
        yield servers
    finally:
        for s in servers.values():
            s.stop()


@pytest.fixture(params=KINDS)
def srv(request: pytest.FixtureRequest, obuf_servers: dict[str, ServerProcess]) -> ServerProcess:
    return obuf_servers[request.param]


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def small_socket(srv: ServerProcess) -> socket.socket:
    """A connection whose receive buffer is small: the replies it does not read soon
    stay in the server."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect((srv.host, srv.port))
    return s


def addr_of(s: socket.socket) -> str:
    """How CLIENT LIST names the connection."""
    host, port = s.getsockname()[:2]
    return f"addr={host}:{port} "


def flood(s: socket.socket, limit: int, request: bytes = GET) -> tuple[int, bool]:
    """Send a pipelined request (unauthenticated GET by default) without reading, up to
    `limit` bytes: (bytes sent, whether the server closed the connection)."""
    chunk = request * 2000
    sent = 0
    try:
        while sent < limit:
            s.sendall(chunk)
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError):
        return sent, True
    except TimeoutError:
        return sent, False
    return sent, False


def authed(srv: ServerProcess) -> RawConn:
    c = srv.raw()
    assert c.call("AUTH", PASSWORD) == "OK"
    return c


def test_unauthenticated_client_not_reading_is_closed(srv: ServerProcess) -> None:
    admin = authed(srv)
    rss0 = rss_kb(srv.proc.pid)
    s = small_socket(srv)
    # 64 MB of GETs would queue ~100 MB of NOAUTH errors in a server without the limit
    sent, closed = flood(s, 64 << 20)
    assert closed, f"{srv.kind} still took requests after {sent} bytes"
    # well before the server had to hold megabytes of replies (the kernel's buffers
    # take some of them first)
    assert sent < 32 << 20
    assert admin.call("PING") == "PONG"  # the server is fine
    assert rss_kb(srv.proc.pid) - rss0 < 16 << 10
    me = addr_of(s)
    s.close()
    clients = admin.call("CLIENT", "LIST").decode()
    assert me not in clients, clients
    deadline = time.monotonic() + 5
    while LOG_LINE not in srv.log_tail(20000) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert LOG_LINE in srv.log_tail(20000)
    admin.close()


def test_unauthenticated_client_reading_is_served(srv: ServerProcess) -> None:
    """400 pipelined NOAUTH errors (13 KB, over 1024 bytes) reach a client that reads
    them: the limit is on what waits for the socket."""
    with srv.raw() as c:
        c.send(GET * 400)
        assert c.recv_exact(len(NOAUTH) * 400) == NOAUTH * 400
        assert c.call("AUTH", PASSWORD) == "OK"
        assert c.call("GET", "k") == b"v" * 1000


def test_authenticated_client_not_reading_is_kept(srv: ServerProcess) -> None:
    """An authenticated client is held only to client-output-buffer-limit (none for
    normal clients by default): 20000 GETs of a 1000-byte value, 20 MB of replies,
    are all there once it reads."""
    s = small_socket(srv)
    s.sendall(b"AUTH " + PASSWORD.encode() + b"\r\n")
    n = 20000
    s.sendall(GET * n)
    time.sleep(0.5)  # the server has queued what the socket did not take
    me = addr_of(s)
    with authed(srv) as admin:
        clients = admin.call("CLIENT", "LIST").decode()
        assert me in clients, clients  # still connected, its replies waiting
    line = next(ln for ln in clients.splitlines() if me in ln)
    fields = dict(kv.split("=", 1) for kv in line.split())
    # what waits is counted, not wrapped below zero (omem read 2**64 - 2 MB here)
    assert 0 < int(fields["omem"]) + int(fields["obl"]) < 64 << 20, line
    want = b"+OK\r\n" + (b"$1000\r\n" + b"v" * 1000 + b"\r\n") * n
    got = bytearray()
    while len(got) < len(want):
        chunk = s.recv(1 << 20)
        assert chunk, f"closed after {len(got)} bytes"
        got += chunk
    assert bytes(got) == want
    s.close()


REFUSED = {"unknown command": b"*1\r\n$6\r\nNOSUCH\r\n", "wrong arity": b"*1\r\n$3\r\nGET\r\n"}


@pytest.mark.parametrize("request_", list(REFUSED.values()), ids=list(REFUSED))
def test_refused_requests_count_toward_the_limit(srv: ServerProcess, request_: bytes) -> None:
    """A request refused before it runs (unknown command, wrong arity) still queues an
    error reply: the flood is closed all the same."""
    admin = authed(srv)
    s = small_socket(srv)
    sent, closed = flood(s, 64 << 20, request_)
    assert closed, f"{srv.kind} still took requests after {sent} bytes"
    assert admin.call("PING") == "PONG"
    s.close()
    admin.close()
