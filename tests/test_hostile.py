"""A hostile client against every place the server runs, each with its defaults (nothing
opened) and a password: inreplay on the kernel stack ([inreplay]), on the DPDK stack in a
namespace ([dpdk], where the session has it) and, where the item applies to it, stock
redis-server hosting the REPLAY.* module ([module]). The protections, and where each is
tested:

- replies never point at memory that can go away: test_reply_lifetime.py, test_acl.py
  (ACL GETUSER), the fuzz corpus's named seed;
- scripts run Lua source only, string.dump is gone: test_script_sandbox.py (kernel and
  DPDK), test_scripting.py and test_functions.py (compared with stock); the Lua parser
  and lexer CVEs: test_script_sandbox.py;
- DEBUG and CONFIG SET dir closed, ``local`` is no one on DPDK: here, and
  test_protected_actions.py (every setting, compared with stock on the kernel stack);
- SORT BY/GET need access to every key: here, and test_acl.py (every key rule);
- an unauthenticated client's output is capped at 1 KB: here, and
  test_unauth_output.py (what counts, what is kept);
- RESTORE allocates only what the payload can fill: test_restore_bounds.py (stock,
  kernel and DPDK);
- protected mode, judged by the default user: here (ACL SETUSER default nopass on DPDK),
  test_security.py (kernel), test_dpdk.py (DPDK: Redis's DENIED, --protected-mode no,
  random ISNs, martian frames dropped);
- pyctl's files and the run directory: test_pyctl_files.py.
"""

from __future__ import annotations

import secrets
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from conftest import INREPLAY_KINDS, ServerPool, ServerProcess
from helpers import mbulk

PASSWORD = f"hostile-{secrets.token_hex(8)}"
HOSTS = (*INREPLAY_KINDS, "module")
Factory = Callable[..., ServerProcess]


def _stop(srv: ServerProcess) -> None:
    rc = srv.stop()
    assert rc == 0, f"{srv} exited with {rc}:\n{srv.log_tail()}"


class Hosts(dict[str, ServerProcess]):
    """One server per kind, started when a test first needs it, with a password and
    Redis 7's defaults: DEBUG and the protected configs closed. The session's DPDK
    servers share one address on one veth (conftest), so one runs at a time: starting
    ours stops the pool's (the pool starts it again when a test needs it)."""

    def __init__(self, workdir: Path, pool: ServerPool) -> None:
        super().__init__()
        self.workdir, self.pool = workdir, pool

    def free_dpdk_address(self) -> None:
        for owner in (self, self.pool.servers):
            srv = owner.pop("dpdk", None)
            if srv is not None and srv.alive():
                _stop(srv)

    def __missing__(self, kind: str) -> ServerProcess:
        if kind == "dpdk":
            self.free_dpdk_address()
        srv = ServerProcess(kind, self.workdir / kind, ("--requirepass", PASSWORD),
                            opened=False)
        self[kind] = srv
        return srv


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory, server_pool: ServerPool) -> Iterator[Hosts]:
    h = Hosts(tmp_path_factory.mktemp("hostile"), server_pool)
    try:
        yield h
    finally:
        for srv in list(h.values()):
            _stop(srv)


@pytest.fixture(params=HOSTS)
def server_kind(request: pytest.FixtureRequest) -> str:
    """inreplay (kernel stack), dpdk, module: conftest's --servers selects them."""
    return str(request.param)


@pytest.fixture
def host(server_kind: str, hosts: Hosts) -> ServerProcess:
    srv = hosts[server_kind]
    assert srv.alive(), srv.log_tail()
    srv.flushall()
    return srv


def _error(r: redis.Redis, *cmd: str) -> str:
    try:
        return f"reply: {r.execute_command(*cmd)!r}"
    except redis.ResponseError as e:
        return str(e)


def test_debug_and_protected_configs_are_closed(host: ServerProcess, tmp_path: Path) -> None:
    """Redis 7's defaults, in its words, wherever the server runs."""
    r = host.client(decode_responses=True)
    try:
        assert _error(r, "DEBUG", "SLEEP", "0").startswith(
            "DEBUG command not allowed. If the enable-debug-command option is set to "
            '"local", you can run it from a local connection, otherwise you need to set '
            "this option in the configuration file, and then restart the server.")
        assert _error(r, "CONFIG", "SET", "dir", str(tmp_path)) == (
            "CONFIG SET failed (possibly related to argument 'dir') - can't set protected "
            "config")
        assert _error(r, "CONFIG", "SET", "enable-debug-command", "yes") == (
            "CONFIG SET failed (possibly related to argument 'enable-debug-command') - "
            "can't set immutable config")
    finally:
        r.close()


def test_local_is_no_one_on_dpdk(server_factory: Factory, hosts: Hosts) -> None:
    """``local`` opens DEBUG and CONFIG SET dir to loopback clients; a DPDK port has no
    loopback (a 127/8 source there came off the wire), so there it opens them to no
    network client (only to the Unix and shm sockets' same-host ones). The kernel
    stack's loopback client gets them (test_protected_actions.py)."""
    if "dpdk" not in INREPLAY_KINDS:
        pytest.skip("the DPDK stack needs root and a DPDK build")
    hosts.free_dpdk_address()
    srv = server_factory("dpdk", "--requirepass", PASSWORD, "--enable-debug-command", "local",
                         "--enable-protected-configs", "local", opened=False)
    r = srv.client(decode_responses=True)
    try:
        assert _error(r, "DEBUG", "SLEEP", "0").startswith("DEBUG command not allowed.")
        assert _error(r, "CONFIG", "SET", "dir", "/tmp").endswith("can't set protected config")
    finally:
        r.close()


def test_sort_by_and_get_need_every_key(host: ServerProcess) -> None:
    """A user limited to pub:* cannot read secret:* through SORT's BY or GET."""
    admin = host.client(decode_responses=True)
    try:
        admin.execute_command("ACL", "SETUSER", "hostile", "on", ">h-pw", "+@all", "~pub:*")
        admin.rpush("pub:l", "2", "1")
        admin.mset({"secret:1": "s1", "secret:2": "s2", "w_1": "9", "w_2": "8"})
        u = host.client(decode_responses=True, username="hostile", password="h-pw")
        try:
            assert _error(u, "SORT", "pub:l", "GET", "secret:*") == (
                "GET option of SORT denied due to insufficient ACL permissions.")
            assert _error(u, "SORT", "pub:l", "BY", "w_*") == (
                "BY option of SORT denied due to insufficient ACL permissions.")
            assert u.execute_command("SORT", "pub:l") == ["1", "2"]
            assert _error(u, "GET", "secret:1") == (
                "this user has no permissions to access one of the keys used as arguments")
        finally:
            u.close()
    finally:
        admin.execute_command("ACL", "DELUSER", "hostile")
        admin.close()


def test_unauthenticated_client_that_does_not_read_is_closed(host: ServerProcess) -> None:
    """CVE-2025-21605: NOAUTH errors queued for a client that never reads are capped
    (1 KB); without the cap 64 MB of GETs would queue about 90 MB of them."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect((host.host, host.port))
    chunk = mbulk("GET", "k") * 2000
    sent, closed = 0, False
    try:
        while sent < 64 << 20:
            s.sendall(chunk)
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    except TimeoutError:
        pass
    finally:
        s.close()
    assert closed, f"{host.kind} still took requests after {sent} bytes"
    with host.raw() as c:  # and the server carries on
        assert c.call("PING") == "PONG"


def test_nopass_on_the_default_user_closes_the_dpdk_port(server_factory: Factory,
                                                         hosts: Hosts) -> None:
    """Protected mode follows the default user, as in Redis 7: once ``ACL SETUSER default
    nopass`` drops its password the DPDK port (no loopback) refuses every new client in
    Redis's words; connections already made carry on, and a password reopens it."""
    if "dpdk" not in INREPLAY_KINDS:
        pytest.skip("the DPDK stack needs root and a DPDK build")
    hosts.free_dpdk_address()
    srv = server_factory("dpdk", "--requirepass", PASSWORD, opened=False)
    admin = srv.raw()
    try:
        assert admin.call("ACL", "SETUSER", "default", "nopass") == "OK"
        with socket.create_connection((srv.host, srv.port), timeout=10) as s:
            s.sendall(b"PING\r\n")
            got = b""
            deadline = time.monotonic() + 10
            while not got.endswith(b"\r\n") and time.monotonic() < deadline:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
        assert got.startswith(b"-DENIED Redis is running in protected mode because protected "
                              b"mode is enabled and no password is set for the default user."), got
        assert admin.call("PING") == "PONG"
        assert admin.call("ACL", "SETUSER", "default", "resetpass", f">{PASSWORD}") == "OK"
        with srv.raw() as c:
            assert c.call("PING") == "PONG"
    finally:
        admin.close()
