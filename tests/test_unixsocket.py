"""Unix domain sockets (unixsocket, unixsocketperm) as Redis 7.0 has them.

Each behaviour is asserted against stock redis-server started with the same
--unixsocket/--unixsocketperm flags and against inreplay (`pyctl start`, whose flags
are the same names): CONFIG GET, the socket file's mode, a stale file replaced at
start, the file removed at a clean shutdown, CLIENT LIST's addr= form, AUTH and a
client killed mid-request. REPLAY.* over the socket runs through ReplayClient's
unix_socket_path on inreplay and on redis-server with the module.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import conftest  # pytest's own (the session's DPDK namespace lives there)
import numpy as np
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from pyctl import config
from pyctl.client import ReplayClient
from pyctl.sharded import ShardedReplayClient
from tests.conftest import SERVER_KINDS, ServerProcess

Factory = Callable[..., ServerProcess]
# the DPDK stack serves the kernel's Unix socket in its loop, beside its port
KINDS = ["redis", "inreplay", *(["dpdk"] if "dpdk" in SERVER_KINDS else [])]


@pytest.fixture
def sockdir() -> Iterator[Path]:
    """A short directory for socket files (sun_path holds 107 bytes; pytest's tmp_path
    can be longer, and Redis shows at most 77 bytes of a path in addr=)."""
    d = Path(tempfile.mkdtemp(prefix="irus", dir="/tmp"))
    try:
        yield d
    finally:
        for p in d.iterdir():
            p.unlink()
        d.rmdir()


def start(factory: Factory, kind: str, path: Path, *extra: str) -> ServerProcess:
    if kind == "dpdk":  # its port trusts no one without a password: let the session's
        # veth in (these tests are the socket's, whose clients are local on every stack)
        net = ipaddress.ip_interface(f"{conftest._dpdk_netns_up()}/24").network
        extra = ("--client-subnet", str(net), *extra)
    return factory(kind, "--unixsocket", str(path), *extra)


def unix_client(path: Path, **kwargs: object) -> redis.Redis:
    """redis-py over the socket; no retries (a refused AUTH fails at once)."""
    return redis.Redis(unix_socket_path=str(path), protocol=2, socket_timeout=10,
                       single_connection_client=True, retry=Retry(NoBackoff(), 0),
                       **kwargs)  # type: ignore[arg-type]


def cli(path: Path, *args: str) -> str:
    """redis-cli -s PATH ARGS: stock redis-cli over the socket."""
    out = subprocess.run(["redis-cli", "-s", str(path), *args], capture_output=True, text=True,
                         timeout=10, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize("server_kind", KINDS)
def test_config_get_and_immutable(server_factory: Factory, server_kind: str,
                                  sockdir: Path) -> None:
    path = sockdir / "s.sock"
    srv = start(server_factory, server_kind, path, "--unixsocketperm", "700")
    with unix_client(path) as r:
        assert r.config_get("unixsocket") == {"unixsocket": str(path)}
        assert r.config_get("unixsocketperm") == {"unixsocketperm": "700"}
        assert r.config_get("unixsocket*") == {"unixsocket": str(path), "unixsocketperm": "700"}
        for name, value in (("unixsocket", "/tmp/other.sock"), ("unixsocketperm", "777")):
            with pytest.raises(redis.ResponseError) as e:
                r.config_set(name, value)
            assert str(e.value) == (f"CONFIG SET failed (possibly related to argument "
                                    f"'{name}') - can't set immutable config")
    assert cli(path, "PING") == "PONG"
    assert cli(path, "CONFIG", "GET", "unixsocket").splitlines() == ["unixsocket", str(path)]
    # the TCP port still serves, and says the same
    with srv.client() as r:
        assert r.config_get("unixsocket") == {"unixsocket": str(path)}


@pytest.mark.parametrize("server_kind", KINDS)
def test_defaults_no_socket(server_factory: Factory, server_kind: str) -> None:
    srv = server_factory(server_kind)
    with srv.client() as r:
        assert r.config_get("unixsocket*") == {"unixsocket": "", "unixsocketperm": "0"}


@pytest.mark.parametrize("server_kind", KINDS)
def test_socket_file_mode(server_factory: Factory, server_kind: str, sockdir: Path) -> None:
    p700, pdef = sockdir / "a.sock", sockdir / "b.sock"
    start(server_factory, server_kind, p700, "--unixsocketperm", "700")
    start(server_factory, server_kind, pdef)
    st = os.stat(p700)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(pdef).st_mode) == 0o777 & ~umask  # perm 0: the umask's


@pytest.mark.parametrize("server_kind", KINDS)
def test_stale_socket_replaced_and_removed_at_shutdown(server_factory: Factory,
                                                       server_kind: str, sockdir: Path) -> None:
    path = sockdir / "s.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))  # a socket file nobody listens on: a crashed server's
    stale.close()
    with pytest.raises(ConnectionRefusedError):
        socket.socket(socket.AF_UNIX).connect(str(path))
    srv = start(server_factory, server_kind, path)
    assert cli(path, "PING") == "PONG"
    assert srv.stop() == 0
    assert not path.exists(), "the socket file is removed at a clean shutdown"


@pytest.mark.parametrize("server_kind", KINDS)
def test_client_list_addr(server_factory: Factory, server_kind: str, sockdir: Path) -> None:
    path = sockdir / "s.sock"
    srv = start(server_factory, server_kind, path)
    with unix_client(path) as u, srv.client() as t:
        # protected mode (no password) lets a Unix-socket client in: it is local
        assert u.config_get("protected-mode") == {"protected-mode": "yes"}
        me = u.client_info()
        assert me["addr"] == f"{path}:0" and me["laddr"] == f"{path}:0"
        assert "U" in me["flags"]
        tcp = t.client_info()
        assert not tcp["addr"].startswith(str(path)) and "U" not in tcp["flags"]
        listed = {str(c["id"]): c for c in t.client_list()}
        assert listed[str(me["id"])]["addr"] == f"{path}:0"
    line = cli(path, "CLIENT", "INFO")
    assert f" addr={path}:0 laddr={path}:0 " in line and " flags=U " in line


@pytest.mark.parametrize("server_kind", KINDS)
def test_auth_required_over_socket(server_factory: Factory, server_kind: str,
                                   sockdir: Path) -> None:
    path = sockdir / "s.sock"
    srv = start(server_factory, server_kind, path)
    with srv.client() as t:  # (the fixture's readiness PING takes no password)
        t.config_set("requirepass", "s3cret")
    # NOAUTH: at GET (Redis 7.0), or at connect for redis-py's CLIENT SETINFO, which
    # inreplay has (Redis 7.2's) and refuses before AUTH, as it does over TCP
    with pytest.raises(redis.AuthenticationError):
        unix_client(path).get("k")
    with pytest.raises(redis.AuthenticationError):  # single_connection: AUTH at connect
        unix_client(path, password="wrong").ping()
    with unix_client(path, password="s3cret") as r:
        assert r.set("k", "v") and r.get("k") == b"v"
    assert cli(path, "GET", "k").startswith("NOAUTH")


@pytest.mark.parametrize("server_kind", KINDS)
def test_killed_client_mid_request(server_factory: Factory, server_kind: str,
                                   sockdir: Path) -> None:
    path = sockdir / "s.sock"
    start(server_factory, server_kind, path)
    with unix_client(path) as r:
        r.set("x", "1")
        for _ in range(3):
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(path))
            s.sendall(b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n" % (8 << 20) + b"y" * (1 << 20))
            s.close()  # gone with 7 MB of its value still to come
        deadline = time.monotonic() + 10
        while int(r.info("clients")["connected_clients"]) != 1:
            assert time.monotonic() < deadline, "the killed clients were not freed"
            time.sleep(0.05)
        assert r.get("big") is None and r.get("x") == b"1"
        assert r.set("y", "2") and r.dbsize() == 2
    assert cli(path, "PING") == "PONG"


def test_busy_poll_serves_the_socket(server_factory: Factory, sockdir: Path) -> None:
    path = sockdir / "s.sock"
    start(server_factory, "inreplay", path, "--busy-poll")
    with unix_client(path) as r:
        for i in range(200):
            r.set(f"k{i}", i)
        assert r.dbsize() == 200 and cli(path, "GET", "k7") == "7"


@pytest.mark.parametrize("server_kind", ["inreplay", "module"])
def test_replay_over_socket(server_factory: Factory, server_kind: str, sockdir: Path) -> None:
    path = sockdir / "s.sock"
    start(server_factory, server_kind, path)
    with ReplayClient(unix_socket_path=str(path), protocol=2) as rc:
        assert rc.redis.connection_pool.connection_class is redis.UnixDomainSocketConnection
        rc.create("t", 1000, alpha=1.0, epsilon=0.0)
        items = np.arange(100 * 64, dtype=np.uint8).reshape(100, 64)
        ids = rc.add("t", np.ones(100), items)
        assert ids.tolist() == list(range(100))
        s = rc.sample("t", 32, item_shape=(64,))
        np.testing.assert_array_equal(s.items, items[s.ids])
        s2 = rc.sample("t", 8)  # not packed: bulk replies
        assert len(s2.ids) == 8
        assert rc.info("t")["size"] == 100


def test_sharded_client_per_shard_socket(server_factory: Factory, sockdir: Path) -> None:
    path = sockdir / "s.sock"
    srv = start(server_factory, "inreplay", path)
    g = ShardedReplayClient([f"{srv.host}:{srv.port}"], unix_socket_paths=[str(path)],
                            protocol=2, seed=1)
    try:
        assert g.redis.client_info()["addr"] == f"{path}:0"
        g.create("t", 100)
        g.add("t", [1.0] * 10, [b"x%d" % i for i in range(10)])
        assert len(g.sample("t", 4).ids) == 4
    finally:
        g.close()
    with pytest.raises(ValueError, match="one per shard"):
        ShardedReplayClient(["127.0.0.1:1", "127.0.0.1:2"], unix_socket_paths=[str(path)])
    with pytest.raises(ValueError, match="unix_socket_paths"):
        ShardedReplayClient(["127.0.0.1:1"], unix_socket_path=str(path))


def test_pyctl_flags_from_the_table() -> None:
    specs = {s.name: s for s in config.flag_specs()}
    perm = specs["unixsocketperm"]
    assert perm.flag == "--unixsocketperm" and perm.parse is not None
    assert perm.parse("700") == 0o700 and perm.parse("0755") == 0o755
    for bad in ("9", "1000", "rwx"):
        with pytest.raises(ValueError):
            perm.parse(bad)
    assert specs["unixsocket"].metavar == "PATH" and specs["unixsocket"].action == "store"
    assert config.render("unixsocketperm", 0o700) == "700"


def test_pyctl_takes_dpdk_and_refuses_shards(tmp_path: Path) -> None:
    cfg = config.build(None, {"stack": "dpdk", "ip": "10.9.0.2/24", "unixsocket": "/tmp/x.sock"})
    assert cfg.unixsocket == "/tmp/x.sock"
    with pytest.raises(config.ConfigError, match="--shards"):
        config.build(None, {"shards": 2, "unixsocket": "/tmp/x.sock"})
    with pytest.raises(config.ConfigError, match="at most 107"):
        config.build(None, {"unixsocket": "/tmp/" + "x" * 120})
    with pytest.raises(config.ConfigError, match=r"between 0 and 777 \(octal\), got 1000"):
        config.build(None, {"unixsocketperm": 0o1000})
    toml = tmp_path / "c.toml"
    toml.write_text('unixsocket = "/tmp/x.sock"\nunixsocketperm = "750"\n')
    assert config.build(str(toml), {}).unixsocketperm == 0o750


def test_server_reports_a_socket_it_cannot_open(sockdir: Path) -> None:
    """The server's own error (bind fails: no such directory), one line, exit != 0."""
    from helpers import free_port

    path = sockdir / "missing" / "s.sock"
    out = subprocess.run(["python3", "-m", "pyctl", "start", "--listen",
                          f"127.0.0.1:{free_port()}", "--unixsocket", str(path)],
                         capture_output=True, text=True, timeout=30,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode != 0
    assert f"Failed opening Unix socket {path}: No such file or directory" in out.stderr


@pytest.mark.parametrize("server_kind", KINDS)
def test_monitor_names_the_socket(server_factory: Factory, server_kind: str,
                                  sockdir: Path) -> None:
    path = sockdir / "s.sock"
    srv = start(server_factory, server_kind, path)
    with srv.raw() as mon, unix_client(path) as u:
        assert mon.call("MONITOR") == "OK"
        u.set("mk", "1")
        line = mon.read_reply()
        while "mk" not in str(line):  # redis-py's connect-time commands come first
            line = mon.read_reply()
        assert f'[0 unix:{path}] "SET" "mk" "1"' in str(line)
