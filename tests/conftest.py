"""Shared fixtures for the server suites.

Every test that takes the ``server`` fixture runs twice: against a stock
``redis-server`` (the reference: whatever it answers is what inreplay must
answer) and against inreplay started with ``python -m pyctl start``. Tests
that only make sense for inreplay take ``inreplay_server`` instead.

Select servers with ``--servers redis,inreplay`` (or the environment variable
``INREPLAY_TEST_SERVERS``); tests for a server that is not selected are
deselected, not skipped. A test parametrized on ``server_kind`` (one that starts
servers of its own with ``server_factory``) is selected the same way.

REPLAY.* tests take ``replay_server`` (or ``replay_host``, its name): each runs on
both hosts of the REPLAY.* handlers, ``[native]`` (inreplay) and ``[module]``
(stock redis-server with ``--loadmodule "$(pyctl module-path)"``). A REPLAY test of
something only the native server has is marked
``@pytest.mark.native_only(reason="...")`` and runs ``[native]`` alone. The module
host is the server kind ``module`` for ``--servers``.

``INREPLAY_SERVER_CMD`` replaces the inreplay command line (a template with
``{host}`` and ``{port}``); ``INREPLAY_PYCTL_ARGS`` adds flags to the default
one.

Servers are started once per session and restarted if one dies; a test during
which its server died fails with the tail of the server's log. Every process
started here is stopped at the end of the session (SIGTERM, expecting exit
code 0), killed at interpreter exit if anything went wrong on the way, and
sent SIGTERM by the kernel (PR_SET_PDEATHSIG) should pytest itself be killed.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

import pytest
import redis
from helpers import die_with_parent as _die_with_parent
from helpers import free_port, group_members, mbulk, run_pyctl

from pyctl import _native, _shm

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"


def _dpdk_built() -> bool:
    """The library was built with the DPDK stack (meson found libdpdk and lwip)."""
    return _native.has_stack("dpdk")


# "dpdk" is inreplay on the DPDK + lwIP stack in a network namespace, reached
# across a veth: the same suites run on both stacks. It needs root (CI is root).
SERVER_KINDS = ("redis", "inreplay") + (("dpdk",) if os.geteuid() == 0 and _dpdk_built() else ())
# "shm": the native server on the kernel stack with its clients (client(), raw(), a
# ReplayClient) on the shared-memory rings; "inreplay" serves TCP only (--shm-socket none),
# so the TCP path stays tested. The REPLAY suites run on it as replay_host [shm]; the
# rest of the suite reaches it through tests/test_shm.py.
EXTRA_KINDS = ("module", "shm")
DPDK_NETNS_PREFIX = "irsu"
# the whole pid (a live run is told by it), short enough for the veth names (12 + "-a")
DPDK_NETNS = f"{DPDK_NETNS_PREFIX}{os.getpid()}"
# The REPLAY.* handlers' hosts (replay_server) and the server kind each runs as; "dpdk"
# (the native host on the DPDK stack) only for tests marked also_dpdk, where the session has it.
REPLAY_HOSTS = {"native": "inreplay", "module": "module", "shm": "shm", "dpdk": "dpdk"}
OPENED = ("--enable-debug-command", "yes", "--enable-protected-configs", "yes")
"""What the test servers open of Redis 7's protected actions (closed by default)."""
START_TIMEOUT = float(os.environ.get("INREPLAY_TEST_START_TIMEOUT", "30"))
STOP_TIMEOUT = 15.0

# Every server process this module started and has not yet reaped.
_LIVE: dict[int, subprocess.Popen[bytes]] = {}


def _kill_leftovers() -> None:
    for pid, proc in list(_LIVE.items()):
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _LIVE.pop(pid, None)


atexit.register(_kill_leftovers)


# --------------------------------------------------------------------------
# options, markers, selection
# --------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--servers",
        default=os.environ.get("INREPLAY_TEST_SERVERS", ",".join((*SERVER_KINDS, *EXTRA_KINDS))),
        help="comma-separated servers to test: redis (the reference), inreplay, dpdk, "
             "module (redis-server with the REPLAY.* module: the REPLAY tests' second host), "
             "shm (inreplay reached through its shared-memory rings)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: long-running test (still part of the default run)")
    config.addinivalue_line(
        "markers",
        "native_only(reason): a REPLAY test of something only the native server has: "
        "replay_host is [native] alone (the reason is required)")
    config.addinivalue_line(
        "markers",
        "also_shm: a test on the server fixture that also runs with its clients on the "
        "same-host shared-memory rings (server kind shm), compared with stock Redis as the "
        "others")
    config.addinivalue_line(
        "markers",
        "also_dpdk: a REPLAY test that also runs on the native server's DPDK stack "
        "(replay_host [dpdk], where the session has that stack)")


def _native_only(node: Any) -> bool:
    mark = node.get_closest_marker("native_only")
    if mark is None:
        return False
    if not str(mark.kwargs.get("reason", "")).strip():
        raise pytest.UsageError(f"{node.nodeid}: native_only needs reason=\"...\"")
    return True


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """replay_host: both hosts, or [native] alone for a native_only test (and [dpdk]
    for an also_dpdk one, where the session has the DPDK stack)."""
    if "server" in metafunc.fixturenames:
        also = metafunc.definition.get_closest_marker("also_shm") is not None
        metafunc.parametrize("server", [*SERVER_KINDS, *(("shm",) if also else ())],
                             indirect=True)
    if "replay_host" in metafunc.fixturenames:
        hosts = ["native", "shm"] if _native_only(metafunc.definition) else [
            "native", "shm", "module"]
        if "dpdk" in SERVER_KINDS and metafunc.definition.get_closest_marker("also_dpdk"):
            hosts.append("dpdk")
        # module scope: a module-scoped fixture (a replay group) may take it too
        metafunc.parametrize("replay_host", hosts, scope="module")


def _selected(config: pytest.Config) -> set[str]:
    kinds = {k.strip() for k in str(config.getoption("--servers")).split(",") if k.strip()}
    unknown = kinds - {*SERVER_KINDS, *EXTRA_KINDS}
    if unknown:
        raise pytest.UsageError(f"--servers: unknown server(s) {sorted(unknown)}")
    return kinds


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kinds = _selected(config)
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        kind = params.get("server", params.get("server_kind"))
        if kind is None and "replay_host" in params:
            kind = REPLAY_HOSTS[params["replay_host"]]
        fixtures = getattr(item, "fixturenames", ())
        if kind is None and "inreplay_server" in fixtures:
            kind = "inreplay"
        if kind is None and "module_server" in fixtures:
            kind = "module"
        (keep if kind is None or kind in kinds else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


# --------------------------------------------------------------------------
# raw RESP connection
# --------------------------------------------------------------------------


class RespError:
    """An error reply (``-ERR ...``), kept as a value rather than raised."""

    def __init__(self, message: bytes) -> None:
        self.message = message

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RespError) and other.message == self.message

    def __hash__(self) -> int:
        return hash(self.message)

    def __repr__(self) -> str:
        return f"RespError({self.message!r})"


class _IncompleteError(Exception):
    pass


class RawConn:
    """A plain TCP connection speaking bytes, with a small RESP reader.

    Every read has a timeout; a read that times out or hits EOF raises
    AssertionError naming what had arrived so far.
    """

    def __init__(self, host: str, port: int, timeout: float = 10.0, sock: Any = None,
                 password: str | None = None) -> None:
        """sock: an open connection to use instead (the shm kind's ShmSocket)."""
        if sock is None:
            sock = socket.create_connection((host, port), timeout=timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        else:
            sock.settimeout(timeout)
        self.sock = sock
        self.timeout = timeout
        self.buf = bytearray()
        if password is not None:  # the server's password (the DPDK one has one)
            self.send(mbulk("AUTH", password))
            self.expect(b"+OK\r\n")

    # -- plumbing --
    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self, what: str) -> None:
        try:
            chunk = self.sock.recv(1 << 20)
        except TimeoutError:
            raise AssertionError(
                f"timed out after {self.timeout}s waiting for {what}; "
                f"have {bytes(self.buf[:300])!r}"
            ) from None
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            raise AssertionError(
                f"connection closed while waiting for {what}; have {bytes(self.buf[:300])!r}"
            )
        self.buf += chunk

    def recv_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill(f"{n} bytes")
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def expect(self, data: bytes) -> None:
        got = self.recv_exact(len(data))
        assert got == data

    def command(self, *args: bytes | str | int) -> bytes:
        """Encode a request as a multibulk."""
        return mbulk(*args)

    def call(self, *args: bytes | str | int) -> Any:
        self.send(self.command(*args))
        return self.read_reply()

    # -- reading whole replies --
    def _parse(self, pos: int) -> tuple[Any, int]:
        buf = self.buf
        end = buf.find(b"\r\n", pos)
        if end < 0:
            raise _IncompleteError
        kind = buf[pos : pos + 1]
        line = bytes(buf[pos + 1 : end])
        nxt = end + 2
        if kind == b"+":
            return line.decode(), nxt
        if kind == b"-":
            return RespError(line), nxt
        if kind == b":":
            return int(line), nxt
        if kind in (b"$", b"="):
            n = int(line)
            if n < 0:
                return None, nxt
            if len(buf) < nxt + n + 2:
                raise _IncompleteError
            assert buf[nxt + n : nxt + n + 2] == b"\r\n", "bulk not followed by CRLF"
            return bytes(buf[nxt : nxt + n]), nxt + n + 2
        if kind in (b"*", b"~", b">", b"%"):
            n = int(line)
            if n < 0:
                return None, nxt
            count = 2 * n if kind == b"%" else n
            items = []
            for _ in range(count):
                v, nxt = self._parse(nxt)
                items.append(v)
            if kind == b"%":
                return dict(zip(items[::2], items[1::2], strict=True)), nxt
            return items, nxt
        if kind == b"_":
            return None, nxt
        if kind == b"#":
            return line == b"t", nxt
        if kind == b",":
            return float(line), nxt
        raise AssertionError(f"not a RESP reply: {bytes(buf[pos : pos + 80])!r}")

    def read_reply(self) -> Any:
        return self._read()[0]

    def read_reply_bytes(self) -> bytes:
        """The exact bytes of the next complete reply."""
        return self._read()[1]

    def _read(self) -> tuple[Any, bytes]:
        while True:
            try:
                value, end = self._parse(0)
            except _IncompleteError:
                self._fill("a complete reply")
                continue
            raw = bytes(self.buf[:end])
            del self.buf[:end]
            return value, raw

    # -- connection state --
    def read_until_close(self, timeout: float = 5.0) -> tuple[bytes, bool]:
        """Read everything until EOF (or reset) or timeout: (data, closed)."""
        self.sock.settimeout(timeout)
        data = bytes(self.buf)
        self.buf.clear()
        closed = False
        try:
            while True:
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    closed = True
                    break
                data += chunk
        except TimeoutError:
            pass
        except ConnectionResetError:
            closed = True
        finally:
            self.sock.settimeout(self.timeout)
        return data, closed

    def expect_close(self, timeout: float = 5.0) -> None:
        """Assert the server closes the connection with nothing more to say."""
        rest, closed = self.read_until_close(timeout)
        assert rest == b"", f"unexpected bytes before close: {rest[:300]!r}"
        assert closed, "server kept the connection open"

    def expect_open(self) -> None:
        """Assert the connection still answers commands (PING -> +PONG)."""
        self.send(b"*1\r\n$4\r\nPING\r\n")
        self.expect(b"+PONG\r\n")

    def expect_silence(self, wait: float = 0.3) -> None:
        """Assert no reply arrives within `wait` and the connection stays open."""
        rest, closed = self.read_until_close(wait)
        assert rest == b"", f"unexpected reply {rest[:300]!r}"
        assert not closed, "server closed the connection"


# --------------------------------------------------------------------------
# server processes
# --------------------------------------------------------------------------


def _ping(port: int, host: str = HOST, password: str | None = None) -> bool:
    auth = mbulk("AUTH", password) if password is not None else b""
    want = (b"+OK\r\n" if password is not None else b"") + b"+PONG\r\n"
    try:
        with socket.create_connection((host, port), timeout=1.0) as s:
            s.sendall(auth + b"PING\r\n")
            data = b""
            while len(data) < len(want):
                chunk = s.recv(64)
                if not chunk:
                    return False
                data += chunk
            return data[: len(want)] == want
    except OSError:
        return False


def module_path() -> str:
    """The built REPLAY.* module (pyctl module-path)."""
    try:
        return str(_native.module_path())
    except Exception as e:  # any reason it is missing fails the test
        pytest.fail(f"the REPLAY.* module: {e} (make build builds it)", pytrace=False)


def _require(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        pytest.fail(f"{binary} not found: install Debian's redis-server and redis-tools")
    return path


_netns_state: dict[str, Any] = {"up": False, "ip": ""}


def _remove_stale_suite_namespaces() -> list[str]:
    """Namespaces an earlier, killed run of this suite left (irsu<pid> with that pid
    gone and nothing running in them): removed, so that their veths do not linger."""
    from pyctl import netns

    removed = []
    for name in netns.namespaces():
        tail = name[len(DPDK_NETNS_PREFIX):]
        if not name.startswith(DPDK_NETNS_PREFIX) or not tail.isdigit() or name == DPDK_NETNS:
            continue
        if Path(f"/proc/{int(tail)}").exists() or netns.pids(name):
            continue  # a run that is still going
        netns.down(name)
        removed.append(name)
    return removed


def _dpdk_netns_up() -> str:
    """The session's namespace + veth for the DPDK server (torn down at exit), on a
    subnet no other interface uses; returns the server's address."""
    if _netns_state["up"]:
        return str(_netns_state["ip"])
    from pyctl import netns

    _remove_stale_suite_namespaces()
    r = subprocess.run([sys.executable, "-m", "pyctl", "netns", "up", "--name", DPDK_NETNS,
                        "--subnet", netns.free_subnet(), "--json"],
                       capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        raise RuntimeError(f"pyctl netns up failed: {r.stderr}")
    _netns_state["up"] = True  # from here on it is removed at exit, whatever follows
    atexit.register(_dpdk_netns_down)
    _netns_state["ip"] = json.loads(r.stdout)["appliance_ip"]
    return str(_netns_state["ip"])


def _dpdk_netns_down() -> None:
    if _netns_state["up"]:
        subprocess.run([sys.executable, "-m", "pyctl", "netns", "down", "--name", DPDK_NETNS],
                       capture_output=True, cwd=ROOT)
        _netns_state["up"] = False


class ServerProcess:
    """One running server on 127.0.0.1:port: redis-server, inreplay (its kernel or DPDK
    stack), or module (redis-server with the REPLAY.* module; extra_args after the module's
    path are the module's own, SEED 7, until a --flag of redis-server's).

    The DPDK server has a password (``password``): a DPDK port has no loopback, so
    without one protected mode refuses every client. Its clients here (``client``,
    ``raw``, ``connect``, ``cli_auth``) authenticate with it, as a notebook's hand out
    its token."""

    def __init__(self, kind: str, workdir: Path, extra_args: tuple[str, ...] = (),
                 port: int | None = None, opened: bool = True) -> None:
        self.kind = kind
        self.host = HOST
        self.password: str | None = None
        if "--requirepass" in extra_args:  # the test's own: its clients here use it too
            self.password = extra_args[extra_args.index("--requirepass") + 1]
        self.port = port or free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / f"{kind}-{self.port}.log"
        if kind in ("redis", "module"):
            argv = [
                _require("redis-server"),
                "--port", str(self.port), "--bind", HOST,
                "--save", "", "--appendonly", "no",
                # DEBUG and CONFIG SET dir as Redis's own test suite opens them
                # (OPENED, unless opened=False; inreplay's servers too)
                *(OPENED if opened else ()),
                "--dir", str(workdir), "--daemonize", "no",
                *(("--loadmodule", module_path()) if kind == "module" else ()),
                *extra_args,
            ]  # fmt: skip
            cwd = workdir
            env = None
        elif kind == "inreplay" and os.environ.get("INREPLAY_SERVER_CMD"):
            # e.g. to run the daemon under a debugger: "gdb -batch -ex run --args
            # python -m pyctl start --listen {host}:{port}"
            template = os.environ["INREPLAY_SERVER_CMD"]
            argv = shlex.split(template.format(host=HOST, port=self.port)) + list(extra_args)
            cwd = ROOT
            env = None
        elif kind == "dpdk":
            self.host = _dpdk_netns_up()
            env = dict(os.environ)
            env.pop("INREPLAY_REQUIREPASS", None)
            # (unless the test lets clients in otherwise: a network, or no protected mode)
            if self.password is None and not {"--protected-mode", "--client-subnet"} & {
                    *extra_args}:
                self.password = env["INREPLAY_REQUIREPASS"] = secrets.token_hex(16)
            argv = [
                sys.executable, "-m", "pyctl", "start", "--stack", "dpdk",
                "--netns", DPDK_NETNS, "--cores", "0", "--ip", f"{self.host}/24",
                "--vdev", f"net_af_packet0,iface={DPDK_NETNS[:12]}-a",
                "--listen-port", str(self.port), "--hugepages", "128",
                "--file-prefix", f"{DPDK_NETNS}-{self.port}",
                # its clients test lwIP's path: same-host shared memory is test_shm.py's
                *(() if "--shm-socket" in extra_args else ("--shm-socket", "none")),
                *(OPENED if opened else ()),
                *extra_args,
            ]  # fmt: skip
            cwd = ROOT
        elif kind in ("inreplay", "shm"):
            argv = [
                sys.executable, "-m", "pyctl", "start",
                "--listen", f"{HOST}:{self.port}",
                *(("--shm-socket", "none") if kind == "inreplay" and "--shm-socket" not in
                  extra_args else ()),
                *(OPENED if opened else ()),
                *shlex.split(os.environ.get("INREPLAY_PYCTL_ARGS", "")),
                *extra_args,
            ]  # fmt: skip
            cwd = ROOT
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p
            )
        else:
            raise ValueError(kind)
        self.argv = argv
        with open(self.log_path, "wb") as log:
            self.proc: subprocess.Popen[bytes] = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a ^C reaches pytest, which stops us cleanly
                preexec_fn=_die_with_parent,
            )
        _LIVE[self.proc.pid] = self.proc
        try:
            self._wait_ready()
        except BaseException:
            self.kill()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.kind} exited with {self.proc.returncode} before listening "
                    f"({shlex.join(self.argv)}):\n{self.log_tail()}"
                )
            if _ping(self.port, self.host, self.password):
                return
            time.sleep(0.05)
        raise RuntimeError(
            f"{self.kind} did not answer PING on port {self.port} within "
            f"{START_TIMEOUT}s ({shlex.join(self.argv)}):\n{self.log_tail()}"
        )

    def __repr__(self) -> str:
        return f"<{self.kind} on {self.host}:{self.port} pid {self.proc.pid}>"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, nbytes: int = 4000) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return "(no log)"
        return data[-nbytes:].decode(errors="replace")

    def wait(self, timeout: float) -> int | None:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        _LIVE.pop(self.proc.pid, None)
        return rc

    def stop(self) -> int:
        """SIGTERM and wait; returns the exit code (kills and raises on a hang)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.wait(STOP_TIMEOUT)
        if rc is None:
            self.kill()
            raise AssertionError(f"{self} ignored SIGTERM for {STOP_TIMEOUT}s; killed")
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        _LIVE.pop(self.proc.pid, None)

    # -- clients --
    def client(self, **kwargs: Any) -> redis.Redis:
        """A redis-py client speaking RESP2 over one connection."""
        opts: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "protocol": 2,
            "socket_timeout": 30,
            "single_connection_client": True,
        }
        if self.password is not None:
            opts["password"] = self.password
        opts.update(kwargs)
        if self.kind == "shm":
            return _shm.connect(shm=True, **opts)
        return redis.Redis(**opts)

    def shm_path(self) -> str:
        """The shm kind's shm socket (what INFO server names)."""
        with redis.Redis(host=self.host, port=self.port, protocol=2, password=self.password) as r:
            return str(r.info("server")["shm_socket"])

    def raw(self, timeout: float = 10.0) -> RawConn:
        if self.kind == "shm":
            return RawConn(self.host, self.port, timeout, sock=_shm.ShmSocket(self.shm_path()),
                           password=self.password)
        return RawConn(self.host, self.port, timeout, password=self.password)

    def connect(self, timeout: float = 10.0) -> socket.socket:
        """A plain connected socket, authenticated when the server has a password."""
        s = socket.create_connection((self.host, self.port), timeout=timeout)
        if self.password is not None:
            s.sendall(mbulk("AUTH", self.password))
            got = b""
            while not got.endswith(b"\r\n"):
                chunk = s.recv(1)
                if not chunk:
                    break
                got += chunk
            assert got == b"+OK\r\n", f"AUTH on {self}: {got!r}"
        return s

    def cli_auth(self, benchmark: bool = False) -> list[str]:
        """redis-cli's (or redis-benchmark's, which lacks --no-auth-warning) flags for the
        server's password, if any."""
        if self.password is None:
            return []
        return ["-a", self.password, *(() if benchmark else ("--no-auth-warning",))]

    def flushall(self) -> None:
        with self.raw() as c:
            reply = c.call("FLUSHALL")
        assert reply == "OK", f"FLUSHALL on {self}: {reply!r}"


class ServerPool:
    """The session's long-lived servers, one per kind, restarted if they die."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.servers: dict[str, ServerProcess] = {}
        self.start_errors: dict[str, str] = {}
        self.crashes: list[str] = []

    def get(self, kind: str) -> ServerProcess:
        if kind in self.start_errors:
            pytest.fail(f"{kind} could not be started:\n{self.start_errors[kind]}", pytrace=False)
        srv = self.servers.get(kind)
        if srv is not None and srv.alive():
            return srv
        try:
            srv = ServerProcess(kind, self.workdir)
        except Exception as e:
            self.start_errors[kind] = str(e)
            pytest.fail(f"{kind} could not be started:\n{e}", pytrace=False)
        self.servers[kind] = srv
        return srv

    def close(self) -> list[str]:
        problems = []
        for kind, srv in self.servers.items():
            if not srv.alive():
                continue  # its death was already reported by the test it happened in
            rc = srv.stop()
            if rc != 0:
                problems.append(f"{kind} exited with {rc} on SIGTERM:\n{srv.log_tail()}")
        self.servers.clear()
        return problems


@pytest.fixture(scope="session")
def server_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    pool = ServerPool(tmp_path_factory.mktemp("servers"))
    try:
        yield pool
    finally:
        problems = pool.close()
        _kill_leftovers()
        _dpdk_netns_down()
    assert not problems, "\n".join(problems)


def _use(pool: ServerPool, kind: str) -> Iterator[ServerProcess]:
    srv = pool.get(kind)
    srv.flushall()
    yield srv
    if not srv.alive():
        pytest.fail(
            f"{srv} died during this test (exit code {srv.proc.returncode}):\n{srv.log_tail()}",
            pytrace=False,
        )


@pytest.fixture
def server(request: pytest.FixtureRequest, server_pool: ServerPool) -> Iterator[ServerProcess]:
    """The session's server of each kind (SERVER_KINDS, and shm for a test marked
    also_shm: pytest_generate_tests), emptied with FLUSHALL before the test."""
    yield from _use(server_pool, request.param)


@pytest.fixture
def inreplay_server(server_pool: ServerPool) -> Iterator[ServerProcess]:
    """The session's inreplay server (for inreplay-only tests)."""
    yield from _use(server_pool, "inreplay")


@pytest.fixture
def module_server(server_pool: ServerPool) -> Iterator[ServerProcess]:
    """The session's redis-server with the module (for the module host's own tests)."""
    yield from _use(server_pool, "module")


@pytest.fixture
def replay_host(request: pytest.FixtureRequest) -> str:
    """native or module (or dpdk): parametrized by pytest_generate_tests."""
    return str(request.param)


@pytest.fixture
def replay_server(replay_host: str, server_pool: ServerPool) -> Iterator[ServerProcess]:
    """The session's server of replay_host (inreplay, redis-server with the module, or
    inreplay on the DPDK stack), emptied with FLUSHALL (which drops every REPLAY table)."""
    yield from _use(server_pool, REPLAY_HOSTS[replay_host])


INREPLAY_KINDS = tuple(k for k in SERVER_KINDS if k != "redis")


@pytest.fixture(params=INREPLAY_KINDS)
def server_kind(request: pytest.FixtureRequest) -> str:
    """inreplay on each stack this machine runs (kernel; dpdk as root with a DPDK build).
    Tests that start their own servers, stock Redis included, parametrize it themselves."""
    return str(request.param)


@pytest.fixture
def srv(server_kind: str, server_pool: ServerPool) -> Iterator[ServerProcess]:
    """The session's inreplay server on server_kind's stack, flushed; it must outlive the test."""
    yield from _use(server_pool, server_kind)


@pytest.fixture
def r(server: ServerProcess) -> Iterator[redis.Redis]:
    """A redis-py client (RESP2, one connection) to `server`."""
    client = server.client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def raw(server: ServerProcess) -> Iterator[Callable[[], RawConn]]:
    """Factory of raw connections to `server`, all closed at teardown."""
    conns: list[RawConn] = []

    def make() -> RawConn:
        c = server.raw()
        conns.append(c)
        return c

    yield make
    for c in conns:
        c.close()


@contextlib.contextmanager
def module_group(workdir: Path, shards: int, seed: str = "7") -> Iterator[list[str]]:
    """A replay group of redis-servers with the module on this box (SHARD_GROUP,
    SHARD_INDEX: pyctl start --shards's group on the module host); yields the members'
    addresses and stops them all (each must exit cleanly)."""
    ports = [free_port() for _ in range(shards)]
    members = [f"{HOST}:{p}" for p in ports]
    started: list[ServerProcess] = []
    try:
        for k, p in enumerate(ports):
            started.append(ServerProcess("module", workdir / f"shard-{k}", (
                "SHARD_GROUP", ",".join(members), "SHARD_INDEX", str(k), "SEED", seed), port=p))
        yield members
    finally:
        codes = [srv.stop() for srv in started]
        assert codes == [0] * len(started), f"module group exit codes {codes}"


@contextlib.contextmanager
def replay_group(workdir: Path, replay_host: str, shards: int = 2,
                 seed: str | None = "7") -> Iterator[list[str]]:
    """A replay group of replay_host on this box, its members' addresses: redis-servers
    with the module (module_group) for the module host, else pyctl start --shards
    --daemon (run directory workdir/run; seed None: pyctl's own), stopped with pyctl
    stop --all (exit 0)."""
    if replay_host == "module":
        with module_group(workdir, shards, seed=seed or "7") as members:
            yield members
        return
    run = workdir / "run"
    out = run_pyctl(run, "start", "--shards", str(shards), "--listen", "127.0.0.1:0",
                    "--daemon", *(("--seed", seed) if seed else ()))
    assert out.returncode == 0, out.stderr
    try:
        yield group_members(out)
    finally:
        stop = run_pyctl(run, "stop", "--all")
        assert stop.returncode == 0, stop.stderr


@pytest.fixture(params=["standalone", "group"])
def replay_members(request: pytest.FixtureRequest, tmp_path: Path,
                   replay_host: str) -> Iterator[list[str]]:
    """The session's replay_server (one address), or a 2-shard replay group of replay_host
    (replay_group, seeded with the test module's GROUP_SEED): the members' addresses."""
    if request.param == "standalone":
        srv = request.getfixturevalue("replay_server")
        yield [f"{srv.host}:{srv.port}"]
        return
    with replay_group(tmp_path, replay_host,
                      seed=str(getattr(request.module, "GROUP_SEED", "7"))) as members:
        yield members


@contextlib.contextmanager
def own_server(kind: str, work: Path) -> Iterator[ServerProcess]:
    """A server of its own (for a module that changes server-wide state such as
    DEBUG SET-ACTIVE-EXPIRE or notify-keyspace-events): stock Redis as the pool
    starts it (DEBUG enabled), inreplay with its snapshot directory in `work`.
    It must exit cleanly at the end."""
    srv = ServerProcess(kind, work, () if kind == "redis" else ("--dir", str(work)))
    try:
        yield srv
    finally:
        rc = srv.stop()
        assert rc == 0, f"{srv} exited with {rc}:\n{srv.log_tail()}"


@pytest.fixture
def server_factory(tmp_path: Path,
                   server_pool: ServerPool) -> Iterator[Callable[..., ServerProcess]]:
    """Start dedicated servers for one test: factory(kind, *extra_args).

    The session's DPDK servers share one address on one veth, so a dedicated one
    stops the pool's first (the pool starts it again when a test needs it).
    Teardown stops the ones still running (SIGTERM) and asserts exit code 0.
    """
    started: list[ServerProcess] = []

    def start(kind: str, *extra_args: str, opened: bool = True) -> ServerProcess:
        pooled = server_pool.servers.get("dpdk") if kind == "dpdk" else None
        if pooled is not None and pooled.alive():
            rc = pooled.stop()
            assert rc == 0, f"{pooled} exited with {rc}:\n{pooled.log_tail()}"
        srv = ServerProcess(kind, tmp_path / f"srv{len(started)}", tuple(extra_args),
                            opened=opened)
        started.append(srv)
        return srv

    try:
        yield start
    finally:
        problems = []
        for srv in started:
            was_alive = srv.alive()
            rc = srv.stop()
            if was_alive and rc != 0:
                problems.append(f"{srv} exited with {rc} on SIGTERM:\n{srv.log_tail()}")
    assert not problems, "\n".join(problems)
