"""Access control and limits, with Redis's replies: AUTH, protected mode, maxclients,
maxmemory, output buffer limit, request deadline, idle timeout, keepalive."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest
import redis
from conftest import REPLAY_HOSTS, ServerProcess
from helpers import free_port

from pyctl.errors import decode_info

PYCTL = [sys.executable, "-m", "pyctl", "start"]


Starter = Callable[..., int]


@pytest.fixture
def start(tmp_path: object) -> Iterator[Starter]:
    """start(*flags, listen_host=...) -> port; every server is SIGTERMed and must exit 0."""
    procs: list[subprocess.Popen[str]] = []

    def _start(*flags: str, host: str = "127.0.0.1") -> int:
        port = free_port()
        p = subprocess.Popen([*PYCTL, "--listen", f"{host}:{port}", *flags],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(p)
        assert p.stdout is not None
        line = p.stdout.readline()
        assert "listening" in line, (line, p.stderr.read() if p.poll() is not None else "")
        return port

    yield _start
    for p in procs:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=5) == 0


def raw(port: int, data: bytes, wait: float = 0.3) -> tuple[bytes, bool]:
    """Send bytes over loopback; return (what came back, whether the server closed)."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(data)
        s.settimeout(wait)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
            return out, True
        except TimeoutError:
            return out, False


def test_requirepass(start: Starter) -> None:
    port = start("--requirepass", "s3cret")
    r = redis.Redis(port=port)
    # redis-py 8 opens with HELLO 3, refused before AUTH (redis-py 7 failed on the GET)
    with pytest.raises(redis.AuthenticationError, match=r"Authentication required|authenticated"):
        r.get("k")
    out, closed = raw(port, b"*1\r\n$4\r\nPING\r\n")
    assert out == b"-NOAUTH Authentication required.\r\n" and not closed
    out, _ = raw(port, b"AUTH wrong\r\n")
    assert out == b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    out, _ = raw(port, b"AUTH s3cret\r\nSET k v\r\nGET k\r\n")
    assert out == b"+OK\r\n+OK\r\n$1\r\nv\r\n"
    out, _ = raw(port, b"AUTH default s3cret\r\nPING\r\n")
    assert out == b"+OK\r\n+PONG\r\n"
    out, _ = raw(port, b"AUTH someone s3cret\r\n")
    assert out.startswith(b"-WRONGPASS")
    out, _ = raw(port, b"HELLO 2\r\n")
    assert out.startswith(b"-NOAUTH HELLO must be called with the client already authenticated")
    out, _ = raw(port, b"HELLO 2 AUTH default s3cret\r\nPING\r\n")
    assert out.startswith(b"*14\r\n") and out.endswith(b"+PONG\r\n")
    ok = redis.Redis(port=port, password="s3cret")
    assert ok.get("k") == b"v"
    ok.close()
    r.close()


def test_unauthenticated_request_limits(start: Starter) -> None:
    port = start("--requirepass", "pw")
    out, closed = raw(port, b"*11\r\n")
    assert out == b"-ERR Protocol error: unauthenticated multibulk length\r\n" and closed
    out, closed = raw(port, b"*1\r\n$16385\r\n")
    assert out == b"-ERR Protocol error: unauthenticated bulk length\r\n" and closed
    # within the limits the request is parsed (and refused for want of AUTH)
    out, closed = raw(port, b"*10\r\n" + b"$3\r\nfoo\r\n" * 10)
    assert out.startswith(b"-ERR unknown command 'foo'") and not closed
    # after AUTH the limits are gone
    big = b"x" * 20000
    out, closed = raw(port, b"AUTH pw\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$20000\r\n" + big + b"\r\n")
    assert out == b"+OK\r\n+OK\r\n" and not closed


def test_redis_cli_and_benchmark_with_password(start: Starter) -> None:
    port = start("--requirepass", "pw")
    r = subprocess.run(["redis-cli", "-p", str(port), "-a", "pw", "--no-auth-warning", "PING"],
                       capture_output=True, text=True, timeout=10)
    assert r.stdout.strip() == "PONG"
    b = subprocess.run(["redis-benchmark", "-p", str(port), "-a", "pw", "-q", "-n", "2000",
                        "-t", "set,get"], capture_output=True, text=True, timeout=60)
    assert b.returncode == 0 and "SET:" in b.stdout and "GET:" in b.stdout
    assert "NOAUTH" not in b.stdout + b.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a network namespace (root; CI is root)")
def test_protected_mode_denies_remote_peers_without_password(start: Starter) -> None:
    ns = f"irsec{os.getpid() % 100000}"
    subnet = "10.79.0.0/24"
    up = subprocess.run([sys.executable, "-m", "pyctl", "netns", "up", "--name", ns,
                         "--subnet", subnet], capture_output=True, text=True)
    assert up.returncode == 0, up.stderr
    try:
        def ping_from_ns(port: int, auth: str | None = None) -> bytes:
            req = (f"AUTH {auth}\r\n" if auth else "") + "PING\r\n"
            code = (f"import socket;s=socket.create_connection(('10.79.0.1',{port}));"
                    f"s.sendall({req.encode()!r});s.settimeout(1);import sys;d=b''\n"
                    "try:\n while c:=s.recv(9999): d+=c\nexcept Exception: pass\n"
                    "sys.stdout.buffer.write(d)")
            return subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code],
                                  capture_output=True, timeout=20).stdout

        # stock Redis 7's reply to a peer outside loopback, word for word
        stock_port = free_port()
        stock = subprocess.Popen(["redis-server", "--bind", "10.79.0.1", "--port",
                                  str(stock_port), "--save", "", "--appendonly", "no"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while not (denied := ping_from_ns(stock_port)) and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            stock.terminate()
            stock.wait(10)
        assert denied.startswith(b"-DENIED Redis is running in protected mode"), denied
        open_port = start(host="10.79.0.1")
        assert ping_from_ns(open_port) == denied
        subnet_port = start("--client-subnet", subnet, host="10.79.0.1")
        assert ping_from_ns(subnet_port) == b"+PONG\r\n"
        unprotected_port = start("--protected-mode", "no", host="10.79.0.1")
        assert ping_from_ns(unprotected_port) == b"+PONG\r\n"
        pw_port = start("--requirepass", "pw", host="10.79.0.1")
        assert ping_from_ns(pw_port, auth="pw") == b"+OK\r\n+PONG\r\n"
        # protected mode is judged by the default user, as Redis 7 does: `nopass` on it
        # closes the door to remote peers as an empty requirepass would
        with socket.create_connection(("10.79.0.1", pw_port), timeout=10) as c:
            c.sendall(b"AUTH pw\r\nACL SETUSER default nopass\r\n")
            got = b""
            while got.count(b"\r\n") < 2:
                got += c.recv(100)
            assert got == b"+OK\r\n+OK\r\n"
        assert ping_from_ns(pw_port) == denied
    finally:
        subprocess.run([sys.executable, "-m", "pyctl", "netns", "down", "--name", ns],
                       capture_output=True)


def test_maxclients(start: Starter) -> None:
    port = start("--maxclients", "2")
    a, b = redis.Redis(port=port), redis.Redis(port=port)
    a.ping()
    b.ping()
    # the refused client only reads: the server answers at accept time and closes,
    # and anything it had sent could arrive after the close and draw an RST
    out, closed = raw(port, b"")
    assert out == b"-ERR max number of clients reached\r\n" and closed
    a.close()
    time.sleep(0.2)
    out, _ = raw(port, b"PING\r\n")
    assert out == b"+PONG\r\n"
    b.close()


def used_memory(r: redis.Redis) -> int:
    return int(r.info("memory")["used_memory"])


def test_maxmemory_refuses_writes_keeps_reads(start: Starter) -> None:
    port = start("--maxmemory", str(64 << 20))
    r = redis.Redis(port=port)
    r.set("keep", "me")
    r.execute_command("REPLAY.CREATE", "t", "CAPACITY", "10")
    blob = os.urandom(4 << 20)
    with pytest.raises(redis.ResponseError) as e:
        for i in range(40):
            r.set(f"big{i}", blob)
    assert str(e.value) == "command not allowed when used memory > 'maxmemory'."
    assert r.get("keep") == b"me" and r.dbsize() > 1  # reads work
    # the refused SET's own 4 MB argument counted too; clearly over the limit now:
    r.config_set("maxmemory", 1 << 20)
    with pytest.raises(redis.ResponseError, match="maxmemory"):
        r.execute_command("REPLAY.ADD", "t", "1", "x")
    assert r.get("big0") == blob
    r.config_set("maxmemory", 0)
    assert r.execute_command("REPLAY.ADD", "t", "1", "x") == [0]  # no limit: writes work
    r.flushdb()
    r.config_set("maxmemory", 64 << 20)
    assert r.set("again", "ok")  # memory back under the limit: writes work again
    r.close()


def test_output_buffer_limit_disconnects_a_client_that_does_not_read(start: Starter) -> None:
    port = start("--client-output-buffer-limit", str(8 << 20))
    r = redis.Redis(port=port)
    r.set("v", os.urandom(1 << 20))
    base = used_memory(r)
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"GET v\r\n" * 200)  # 200 MB of replies, never read
    clients = lambda: int(r.info("clients")["connected_clients"])  # noqa: E731
    seen, deadline = False, time.monotonic() + 10
    while time.monotonic() < deadline:
        n = clients()
        seen = seen or n == 2 or int(r.info("stats")["total_connections_received"]) >= 2
        if seen and n == 1:
            break
        time.sleep(0.05)
    assert seen and clients() == 1, "the non-reader was disconnected"
    assert used_memory(r) < base + (16 << 20), "its buffers were freed"
    s.close()
    r.close()


def test_request_deadline_closes_trickling_client(start: Starter) -> None:
    port = start("--request-timeout-ms", "300")
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"*2\r\n$3\r\nGET\r\n")  # ... and never the rest
        s.settimeout(3)
        t0 = time.monotonic()
        assert s.recv(100) == b""  # closed by the server
        assert 0.2 < time.monotonic() - t0 < 2.5
    r = redis.Redis(port=port)  # a client that finishes its requests is unaffected
    r.set("a", "b")
    time.sleep(0.6)
    assert r.get("a") == b"b"
    r.close()


def test_idle_timeout(start: Starter) -> None:
    port = start("--timeout", "1")
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(4)
        t0 = time.monotonic()
        assert s.recv(100) == b""
        assert 0.9 < time.monotonic() - t0 < 3.5


def test_keepalive_is_set_on_accepted_sockets(start: Starter) -> None:
    port = start("--tcp-keepalive", "7")
    r = redis.Redis(port=port)
    r.ping()
    time.sleep(0.3)  # let the reply's ACK arrive: ss shows the retransmit timer until then
    ss = subprocess.run(["ss", "-tnoH", "state", "established", f"( sport = :{port} )"],
                        capture_output=True, text=True).stdout
    assert "keepalive" in ss, ss
    r.close()


def _keepalive_timer(port: int, peer_port: int) -> float | None:
    """The number on the server side's keepalive timer of the connection from
    peer_port (ss's, whose unit varies by iproute2 version: only differences
    are compared), None when the connection has no keepalive."""
    time.sleep(0.3)  # let the reply's ACK arrive: ss shows the retransmit timer until then
    ss = subprocess.run(["ss", "-tnoH", "state", "established",
                         f"( sport = :{port} and dport = :{peer_port} )"],
                        capture_output=True, text=True).stdout
    assert ss.strip(), f"no connection from port {peer_port}"
    m = re.search(r"keepalive,(?:(\d+)min)?([\d.]+)", ss)
    return None if m is None else int(m.group(1) or 0) * 60 + float(m.group(2))


def test_config_set_tcp_keepalive_reaches_new_connections(start: Starter) -> None:
    """The stack asks the server for tcp-keepalive at each accept: CONFIG SET
    changes it for the connections that come after (0: none)."""
    port = start("--tcp-keepalive", "7")
    r = redis.Redis(port=port)
    left = {}
    for value in ("7", "9", "0"):
        assert r.config_set("tcp-keepalive", value)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"PING\r\n")
            assert s.recv(100) == b"+PONG\r\n"
            left[value] = _keepalive_timer(port, s.getsockname()[1])
    assert left["0"] is None, f"tcp-keepalive 0 still set a timer: {left}"
    assert left["7"] is not None and left["9"] is not None, left
    assert 1.5 < left["9"] - left["7"] < 2.5, left
    r.close()


def test_maxmemory_charges_a_new_tables_slots_before_allocating(
        server_factory: Callable[..., ServerProcess], replay_host: str) -> None:
    """Found by the fuzzer: one REPLAY.CREATE could commit gigabytes past maxmemory."""
    r = server_factory(REPLAY_HOSTS[replay_host], "--maxmemory", str(64 << 20)).client()
    with pytest.raises(redis.ResponseError, match="maxmemory"):
        r.execute_command("REPLAY.CREATE", "huge", "CAPACITY", str(1 << 28))
    assert r.execute_command("REPLAY.LIST") == []
    assert r.execute_command("REPLAY.CREATE", "fits", "CAPACITY", str(1 << 16)) == b"OK"
    r.close()


def _vm_peak_kib(r: redis.Redis) -> int:
    pid = int(r.info("server")["process_id"])
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmPeak:"):
            return int(line.split()[1])
    raise AssertionError("no VmPeak")


@pytest.mark.parametrize("args, error, words", [
    # 4294967296 slots: ~170 GB of slots and trees, written at once
    (("CAPACITY", str(1 << 32)), redis.exceptions.OutOfMemoryError, "lower CAPACITY"),
    # and the general mode's lists and hash
    (("CAPACITY", str(1 << 32), "MAX_TIMES_SAMPLED", "1"), redis.exceptions.OutOfMemoryError,
     "lower CAPACITY"),
    # an arena of 1 PiB: past the address space (MAXBYTES is mapped, not charged)
    (("CAPACITY", "1000", "MAXBYTES", str(1 << 50)), redis.ResponseError,
     "CAPACITY and MAXBYTES: lower them"),
])  # fmt: skip
def test_create_without_maxmemory_is_bounded_by_the_machine(
        replay_server: ServerProcess, args: tuple[str, ...], error: type[Exception],
        words: str) -> None:
    """With no maxmemory, a REPLAY.CREATE whose slots and trees exceed the machine's free
    physical memory, or whose arena cannot be mapped, is refused before anything is
    written, in one line that says what to lower; the server lives on and a table that
    fits is created."""
    memtotal_kib = int(open("/proc/meminfo").read().split()[1])
    if memtotal_kib > 128 << 20:  # 4294967296 slots (~170 GB) could be created there
        pytest.skip("a machine with more than 128 GiB could hold the table")
    r = replay_server.client()
    try:
        assert r.config_get("maxmemory")["maxmemory"] == "0"
        peak = _vm_peak_kib(r)
        with pytest.raises(error) as e:
            r.execute_command("REPLAY.CREATE", "huge", *args)
        msg = str(e.value)
        assert "\n" not in msg and words in msg, msg
        assert r.ping()
        assert r.execute_command("REPLAY.LIST") == []
        assert _vm_peak_kib(r) - peak < 1 << 20, "allocated by the refused CREATE"  # < 1 GiB
        assert r.execute_command("REPLAY.CREATE", "fits", "CAPACITY", "1000") == b"OK"
        assert r.execute_command("REPLAY.LIST") == [b"fits"]
    finally:
        r.close()


def test_maxmemory_counts_the_tables(server_factory: Callable[..., ServerProcess],
                                     replay_host: str) -> None:
    """Tables count against maxmemory: past it, REPLAY.ADD (deny-oom) is refused, reads go
    on, a sample's reply must fit in the headroom. On the module host too, whose tables
    are outside Redis's allocator (Redis's own check does not see them: the module's
    does); a CONFIG SET maxmemory applies at once."""
    r = server_factory(REPLAY_HOSTS[replay_host], "--maxmemory", str(64 << 20)).client()
    r.execute_command("REPLAY.CREATE", "t", "CAPACITY", 1000, "MAXBYTES", 1 << 30)
    blob = b"x" * (1 << 20)
    with pytest.raises(redis.ResponseError) as e:
        for _ in range(100):  # 100 MB
            r.execute_command("REPLAY.ADD", "t", 1, blob)
    assert str(e.value) == "command not allowed when used memory > 'maxmemory'."
    size = decode_info(r.execute_command("REPLAY.INFO", "t"))["size"]  # reads go on
    assert 32 <= size < 64
    with pytest.raises(redis.ResponseError, match="above maxmemory's headroom"):
        # every item: more reply than the headroom left beside them (a fixed count would
        # depend on what the transport's buffers took when the ADD was refused)
        r.execute_command("REPLAY.SAMPLE", "t", size)
    r.config_set("maxmemory", 0)
    assert r.execute_command("REPLAY.ADD", "t", 1, b"y") == [size]  # no limit: writes work
    assert len(r.execute_command("REPLAY.SAMPLE", "t", 2)[2]) == 2
    r.config_set("maxmemory", 1 << 20)
    with pytest.raises(redis.ResponseError, match="maxmemory"):
        r.execute_command("REPLAY.ADD", "t", 1, b"z")
    r.close()


def test_default_output_limit_stops_sample_amplification(start: Starter) -> None:
    """Found by the fuzzer: tiny pipelined REPLAY.SAMPLEs from a client that never reads."""
    port = start()
    r = redis.Redis(port=port)
    limit = r.config_get("client-output-buffer-limit")["client-output-buffer-limit"]
    assert limit.split()[:4] == ["normal", str(1 << 30), "0", "0"]  # Redis's format
    r.execute_command("REPLAY.CREATE", "t", "CAPACITY", "10")
    r.execute_command("REPLAY.ADD", "t", "1", b"x" * 16)
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"REPLAY.SAMPLE t 1048576\r\n" * 120)  # ~2.4 GB of replies, never read
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if int(r.info("stats")["total_connections_received"]) >= 2 and \
                int(r.info("clients")["connected_clients"]) == 1:
            break
        time.sleep(0.1)
    assert int(r.info("clients")["connected_clients"]) == 1, "dropped at the 1 GiB default"
    s.close()
    r.close()
