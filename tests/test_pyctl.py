"""pyctl's CLI: one-line errors that name the flag, daemon start/status/stop, TOML config."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from helpers import free_port

from pyctl import netns
from pyctl.errors import decode_info

PYCTL = [sys.executable, "-m", "pyctl"]


@pytest.fixture
def rundir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private run directory so tests never see each other's servers."""
    d = tmp_path / "run"
    monkeypatch.setenv("INREPLAY_RUN_DIR", str(d))
    yield d
    for f in d.glob("*.json") if d.exists() else []:
        try:
            pid = json.loads(f.read_text())["pid"]
            os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError, KeyError):
            pass


def pyctl(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PYCTL, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["start", "--listen", "nonsense"], "--listen"),
        (["start", "--listen", "127.0.0.1:70000"], "--listen"),
        (["start", "--listen", "no-such-host.invalid:6379"], "--listen: cannot resolve host"),
        (["start", "--listen", "::1:6379"], "--listen"),
        (["start", "--maxmemory", "4tb"], "--maxmemory"),
        (["start", "--maxbytes", "1.5gb"], "--maxbytes"),
        (["start", "--daemon", "--logfile", "/nonexistent/x.log"],
         "--logfile /nonexistent/x.log: No such file or directory"),
        (["start", "--capacity", "-5"], "--capacity"),
        (["start", "--capacity", "ten"], "--capacity"),
        (["start", "--alpha", "nan"], "--alpha"),
        (["start", "--stack", "tcp"], "--stack"),
        (["start", "--fanout", "3"], "--fanout"),
        (["start", "--maxclients", "0"], "--maxclients"),
        (["start", "--config", "/nonexistent.toml"], "--config"),
        (["start", "--bogus"], "--bogus"),
        (["status", "--listen", "x"], "--listen"),
    ],
)
def test_bad_flags_get_one_line_naming_the_flag(args: list[str], names: str) -> None:
    r = pyctl(*args)
    assert r.returncode == 2, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert names in lines[0]
    assert "Traceback" not in r.stderr


SUDO = "" if os.geteuid() == 0 else "sudo "  # no sudo for root, who may not have it
WORKS_HERE = f"a start line that works on this machine: {SUDO}pyctl netns up && {SUDO}pyctl start"


def test_dpdk_stack_flags_are_checked_before_anything_starts() -> None:
    r = pyctl("start", "--stack", "dpdk", "--listen-port", "7000")
    assert r.returncode == 2
    assert "--ip: required with the DPDK stack" in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith(f"pyctl start: {WORKS_HERE}")
    assert "--listen-port 7000" in r.stderr.strip().splitlines()[-1]
    # a DPDK-only flag implies the DPDK stack; with --stack kernel it is refused
    r = pyctl("start", "--cores", "0-1")
    assert r.returncode == 2 and "--ip: required with the DPDK stack" in r.stderr
    r = pyctl("start", "--stack", "kernel", "--mtu", "9000")
    assert r.returncode == 2 and "--mtu is for the DPDK stack: drop --stack kernel" in r.stderr


def test_the_designs_start_line_lists_every_problem_and_a_line_that_works() -> None:
    """`pyctl start --cores 2-5 --port 0` on a 2-core machine with no NIC bound to DPDK."""
    r = pyctl("start", "--cores", "2-5", "--port", "0")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert all(line.startswith("pyctl start: ") for line in lines)
    text = r.stderr
    if (os.cpu_count() or 1) < 6:
        assert "--cores 2-5: this machine has cores" in text
    assert "--ip: required with the DPDK stack" in text
    if not any(Path("/sys/bus/pci/drivers", d).is_dir() and any(
            Path("/sys/bus/pci/drivers", d).glob("0000:*"))
            for d in ("vfio-pci", "igb_uio", "uio_pci_generic")):
        assert "no NIC is bound to a DPDK driver" in text
    assert lines[-1].startswith(f"pyctl start: {WORKS_HERE}")
    # a TCP port where a DPDK port id goes gets pointed at --listen-port
    r = pyctl("start", "--port", "7100", "--ip", "10.1.2.3/24")
    assert r.returncode == 2
    if os.geteuid() == 0:
        assert "for the TCP port use --listen-port 7100" in r.stderr


def test_daemon_status_stop(rundir: Path) -> None:
    port = free_port()
    listen = f"127.0.0.1:{port}"
    r = pyctl("start", "--daemon", "--listen", listen, "--capacity", "1000", "--table", "t1")
    assert r.returncode == 0, r.stderr
    assert f"listening on {listen}" in r.stdout
    try:
        st = pyctl("status", "--json", "--listen", listen)
        assert st.returncode == 0, st.stderr
        d = json.loads(st.stdout)
        assert d["running"] is True and d["stack"] == "kernel" and d["endpoint"] == listen
        assert d["tables"] == [{"name": "t1", "size": 0, "capacity": 1000}]
        assert "cores" in d and isinstance(d["pid"], int) and d["uptime_s"] >= 0
        assert d["lua"].startswith("redis deps/lua (Debian redis "), d["lua"]
        human = pyctl("status")
        assert f"kernel stack on {listen}" in human.stdout and "t1 0/1000" in human.stdout
        assert f"scripts run on: {d['lua']}" in human.stdout
        # a second server on the same port is refused with a one-line reason
        again = pyctl("start", "--listen", listen)
        assert again.returncode != 0 and "already runs" in again.stderr
        assert len(again.stderr.strip().splitlines()) == 1
    finally:
        t0 = time.monotonic()
        stop = pyctl("stop", "--listen", listen)
        assert stop.returncode == 0, stop.stderr
        assert time.monotonic() - t0 < 5
    gone = pyctl("status", "--json", "--listen", listen)
    assert gone.returncode == 3 and json.loads(gone.stdout)["running"] is False
    with pytest.raises(redis.ConnectionError):
        redis.Redis(port=port, socket_timeout=1, protocol=2).ping()


@pytest.mark.parametrize("daemon", [False, True])
def test_port_in_use_is_reported(rundir: Path, daemon: bool) -> None:
    """The hint comes from the error's errno (ir_last_errno, through the daemon's pipe
    too), not from its text."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = pyctl("start", "--listen", f"127.0.0.1:{port}", *(["--daemon"] if daemon else []))
    assert r.returncode == 1
    assert "Address already in use" in r.stderr and "--listen" in r.stderr
    assert "another server holds this port" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_config_file(rundir: Path, tmp_path: Path) -> None:
    port = free_port()
    cfg = tmp_path / "inreplay.toml"
    cfg.write_text(
        f'listen = "127.0.0.1:{port}"\ncapacity = 64\ntable = "fromtoml"\n'
        "alpha = 1\nmaxclients = 7\n"
    )
    proc = subprocess.Popen(
        [*PYCTL, "start", "--config", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert "listening" in proc.stdout.readline()
        r = redis.Redis(port=port, protocol=2)
        d = decode_info(r.execute_command("REPLAY.INFO", "fromtoml"))
        assert d["capacity"] == 64 and d["alpha"] == 1.0
        assert r.config_get("maxclients") == {"maxclients": "7"}
        r.close()
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=5) == 0


@pytest.mark.parametrize(
    ("body", "msg"),
    [
        ("colour = 3\n", "unknown setting 'colour'"),
        ('capacity = "big"\n', "capacity must be int"),
        ("listen = \n", "--config"),
    ],
)
def test_bad_config_file(tmp_path: Path, body: str, msg: str) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(body)
    r = pyctl("start", "--config", str(cfg))
    assert r.returncode == 2
    assert msg in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_foreground_sigterm_exits_zero(rundir: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [*PYCTL, "start", "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert "listening" in proc.stdout.readline()
    assert list(rundir.glob("*.json")), "a running server records itself"
    c = redis.Redis(port=port, protocol=2)
    c.set("k", "v")
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=5) == 0
    assert time.monotonic() - t0 < 5
    assert not list(rundir.glob("*.json")), "the state file is removed on exit"


def test_drivers_lists_the_af_packet_pmd() -> None:
    r = pyctl("drivers", "--json")
    assert r.returncode == 0, r.stderr
    drivers = {d["name"]: d for d in json.loads(r.stdout)}
    assert "net_af_packet" in drivers and drivers["net_af_packet"]["kind"] == "net"
    assert "iface=<string>" in drivers["net_af_packet"]["params"]
    assert drivers["net_i40e"]["pci_ids"] > 0  # the seed's XL710 NIC
    human = pyctl("drivers")
    assert "net_af_packet" in human.stdout and "virtual (--vdev)" in human.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)")
def test_netns_up_prints_topology_and_start_line_then_down() -> None:
    name = f"irt{os.getpid() % 100000}"
    subnet = netns.free_subnet()
    client_ip = subnet.replace(".0/24", ".1")
    try:
        r = pyctl("netns", "up", "--name", name, "--subnet", subnet, "--json")
        assert r.returncode == 0, r.stderr
        t = json.loads(r.stdout)
        assert {"netns", "iface", "appliance_ip", "client_ip", "prefix"} <= t.keys()
        assert t["netns"] == name and t["prefix"] == 24 and t["client_ip"] == client_ip
        ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert name in ns
        feats = subprocess.run(["ip", "netns", "exec", name, "ethtool", "-k", t["iface"]],
                               capture_output=True, text=True).stdout
        assert "generic-segmentation-offload: off" in feats
        again = pyctl("netns", "up", "--name", name, "--subnet", subnet)
        assert again.returncode == 0 and "pyctl start --stack dpdk" in again.stdout
    finally:
        down = pyctl("netns", "down", "--name", name)
    assert down.returncode == 0 and "removed" in down.stdout
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert name not in ns



@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CI runs as root)")
def test_netns_up_refuses_a_taken_subnet_and_replaces_a_stale_namespace() -> None:
    """A pair left by a killed run kept its route: a new pair on the same subnet lost the
    clients' packets to it (CI's DPDK servers never answered PING). Now the subnet is
    refused with the interface named; a demo's fresh=True replaces a namespace with
    nothing running in it and refuses one another run is using."""
    pid = os.getpid() % 100000
    a, b = f"irta{pid}", f"irtb{pid}"
    subnet = netns.free_subnet()
    try:
        assert pyctl("netns", "up", "--name", a, "--subnet", subnet).returncode == 0
        r = pyctl("netns", "up", "--name", b, "--subnet", subnet)
        assert r.returncode != 0 and b not in netns.namespaces()
        assert f"--subnet {subnet} overlaps" in r.stderr and f"{a}-c" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        # left over, nothing running in it: replaced by a new pair (a new veth)
        before = netns.topology(a, subnet).peer
        idx = Path(f"/sys/class/net/{before}/ifindex").read_text()
        t = netns.up(a, subnet, fresh=True)
        assert Path(f"/sys/class/net/{t.peer}/ifindex").read_text() != idx
        # another run's: refused, and left alone
        sleeper = subprocess.Popen(["ip", "netns", "exec", a, "sleep", "60"])
        try:
            deadline = time.monotonic() + 5
            while not netns.pids(a) and time.monotonic() < deadline:
                time.sleep(0.05)
            with pytest.raises(netns.SetupError, match=f"namespace {a} is in use by pid"):
                netns.up(a, subnet, fresh=True)
            assert a in netns.namespaces()
        finally:
            sleeper.kill()
            sleeper.wait()
    finally:
        for n in (a, b):
            pyctl("netns", "down", "--name", n)

def test_stop_and_status_pick_by_address_when_two_servers_share_a_port(rundir: Path) -> None:
    """A kernel and a DPDK appliance often share a port on different addresses; --listen
    HOST:PORT must pick the one at HOST (it used to match the port only and refuse)."""
    port = free_port()
    a, b = f"127.0.0.1:{port}", f"127.0.0.2:{port}"
    for listen in (a, b):
        r = pyctl("start", "--daemon", "--listen", listen)
        assert r.returncode == 0, r.stderr
    try:
        st = pyctl("status", "--json", "--listen", b)
        assert st.returncode == 0 and json.loads(st.stdout)["endpoint"] == b, st.stdout
        stop = pyctl("stop", "--listen", b)
        assert stop.returncode == 0, stop.stderr
        assert pyctl("status", "--listen", b).returncode == 3
        assert pyctl("status", "--listen", a).returncode == 0
    finally:
        pyctl("stop", "--listen", b)
        assert pyctl("stop", "--listen", a).returncode == 0


def test_listen_forms_in_start_status_and_stop(rundir: Path) -> None:
    """--listen HOST:PORT with a host name (resolved), :PORT and PORT alike; :0 picks a
    free port; status does not count its own connection as a client."""
    port = free_port()
    r = pyctl("start", "--daemon", "--listen", f"localhost:{port}")
    assert r.returncode == 0, r.stderr
    assert f"listening on 127.0.0.1:{port}" in r.stdout
    for form in (str(port), f":{port}", f"127.0.0.1:{port}", f"localhost:{port}"):
        st = pyctl("status", "--json", "--listen", form)
        assert st.returncode == 0, (form, st.stdout, st.stderr)
        d = json.loads(st.stdout)
        assert d["endpoint"] == f"127.0.0.1:{port}" and d["clients"] == 0, (form, d)
    with redis.Redis(port=port, protocol=2) as c:
        c.ping()
        d = json.loads(pyctl("status", "--json", "--listen", str(port)).stdout)
        assert d["clients"] == 1
    human = pyctl("status", "--listen", f":{port}")
    assert "0 client(s)" in human.stdout, human.stdout
    stop = pyctl("stop", "--listen", str(port))
    assert stop.returncode == 0, stop.stderr
    r = pyctl("start", "--daemon", "--listen", ":0")
    assert r.returncode == 0, r.stderr
    chosen = int(r.stdout.split("listening on 127.0.0.1:")[1].split()[0])
    assert chosen > 0
    assert pyctl("status", "--listen", str(chosen)).returncode == 0
    assert pyctl("stop", "--listen", f":{chosen}").returncode == 0
    assert pyctl("status", "--listen", str(chosen)).returncode == 3


SIZES = ["0", "1", "4096", "1b", "1k", "1K", "1kb", "1KB", "3m", "3mb", "3Mb", "2g", "2gb",
         "2GB", "1Gb", "01k"]


def test_size_units_parse_as_redis_parses_them(server_factory: Any) -> None:
    from pyctl.config import parse_size

    stock = server_factory("redis")
    c = stock.client()
    try:
        for text in SIZES:
            c.config_set("maxmemory", text)
            assert parse_size(text) == int(c.config_get("maxmemory")["maxmemory"]), text
        for bad in ("1tb", "1.5gb", "1 gb", "1kib", " 1gb", "+1gb", "gb", ""):
            if bad not in ("gb", ""):  # Redis reads these two as 0; pyctl refuses them
                with pytest.raises(redis.ResponseError):
                    c.config_set("maxmemory", bad)
            with pytest.raises(ValueError, match="is not a size like"):
                parse_size(bad)
    finally:
        c.config_set("maxmemory", "0")
        c.close()


def test_size_units_in_flags_and_toml(rundir: Path, tmp_path: Path) -> None:
    port = free_port()
    r = pyctl("start", "--daemon", "--listen", f"127.0.0.1:{port}", "--maxmemory", "1GB",
              "--maxbytes", "64mb", "--capacity", "10")
    assert r.returncode == 0, r.stderr
    try:
        with redis.Redis(port=port, protocol=2) as c:
            assert c.config_get("maxmemory")["maxmemory"] == str(1 << 30)
            assert decode_info(c.execute_command("REPLAY.INFO", "replay"))["maxbytes"] == 64 << 20
    finally:
        assert pyctl("stop", "--listen", f"127.0.0.1:{port}").returncode == 0
    port = free_port()
    toml = tmp_path / "c.toml"
    toml.write_text(f'listen = "127.0.0.1:{port}"\nmaxbytes = "1GB"\nmaxmemory = "500k"\n'
                    'capacity = 10\n')
    r = pyctl("start", "--daemon", "--config", str(toml))
    assert r.returncode == 0, r.stderr
    try:
        with redis.Redis(port=port, protocol=2) as c:
            assert c.config_get("maxmemory")["maxmemory"] == "500000"
            assert decode_info(c.execute_command("REPLAY.INFO", "replay"))["maxbytes"] == 1 << 30
    finally:
        assert pyctl("stop", "--listen", f"127.0.0.1:{port}").returncode == 0
    toml.write_text('maxbytes = "1 XB"\n')
    r = pyctl("start", "--config", str(toml))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "maxbytes: '1 XB' is not a size like" in r.stderr


def test_drivers_separates_parameter_strings() -> None:
    from pyctl.cli import split_params

    assert split_params("selftest=1ipsec_in_min_spi=<1-U32_MAX>inl_cpt_channel=<1-4095>/"
                        "<1-4095>") == ["selftest=1", "ipsec_in_min_spi=<1-U32_MAX>",
                                        "inl_cpt_channel=<1-4095>/<1-4095>"]
    assert split_params("iface=<string> qdisc_bypass=<0|1>") == ["iface=<string>",
                                                                  "qdisc_bypass=<0|1>"]
    assert split_params("") == []
    human = pyctl("drivers")
    line = next(x for x in human.stdout.splitlines() if " net_af_packet " in x)
    assert "iface=<string>, qpairs=<int>," in line
    for row in human.stdout.splitlines()[1:]:
        assert not re.search(r"[>\w]=?<[^>]*>[a-z_]+=", row), row  # no params run together


def test_status_and_stats_take_the_password(rundir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Against --requirepass, status and stats take --password or REDISCLI_AUTH (as
    redis-cli does); without it they say what to do and exit non-zero."""
    listen = f"127.0.0.1:{free_port()}"
    r = pyctl("start", "--daemon", "--listen", listen, "--requirepass", "s3cret",
              "--capacity", "10", "--table", "t")
    assert r.returncode == 0, r.stderr
    try:
        monkeypatch.delenv("REDISCLI_AUTH", raising=False)
        bare = pyctl("status", "--listen", listen)
        assert bare.returncode == 1
        assert "--password" in bare.stdout and "REDISCLI_AUTH" in bare.stdout
        st = pyctl("status", "--json", "--listen", listen, "--password", "s3cret")
        assert st.returncode == 0, st.stdout + st.stderr
        assert json.loads(st.stdout)["tables"] == [{"name": "t", "size": 0, "capacity": 10}]
        bad = pyctl("stats", "--listen", listen, "--interval", "0.1")
        assert bad.returncode != 0 and "REDISCLI_AUTH" in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1
        monkeypatch.setenv("REDISCLI_AUTH", "s3cret")
        sa = pyctl("stats", "--json", "--listen", listen, "--interval", "0.1")
        assert sa.returncode == 0, sa.stderr
        assert json.loads(sa.stdout)["tables"]["t"]["capacity"] == 10
    finally:
        monkeypatch.setenv("REDISCLI_AUTH", "s3cret")
        assert pyctl("stop", "--listen", listen).returncode == 0


def test_output_into_a_closed_pipe_ends_quietly() -> None:
    """`pyctl drivers | head -1` ended in a BrokenPipeError traceback."""
    r = subprocess.run(f"{sys.executable} -m pyctl drivers --all | head -1", shell=True,
                       capture_output=True, text=True, timeout=60)
    assert r.stdout.count("\n") == 1
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--min-size", "5"], "--min-size: sets the table created at start-up"),
    (["--table", "x"], "--table: sets the table created at start-up"),
    (["--alpha", "0.7"], "give --capacity"),
    (["--capacity", "500"], "--capacity: --restore brings the saved tables back"),
    (["--samples-per-insert", "2"], "--restore brings the saved tables back"),
])
def test_start_up_table_flags_are_never_dropped(rundir: Path, tmp_path: Path, args: list[str],
                                                message: str) -> None:
    """Table flags without --capacity, or with --restore, were ignored silently."""
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    restore = ["--restore", str(snaps)] if "restore" in message else []
    r = pyctl("start", "--listen", f"127.0.0.1:{free_port()}", *restore, *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr, r.stderr


def test_a_wider_route_does_not_block_a_test_subnet() -> None:
    """Review finding: a host with a VPN's 10.0.0.0/8 route refused every test subnet.
    A new /24 wins over a wider route (longest prefix), so only an equal or narrower
    route or address on it is in the way."""
    import ipaddress

    net = ipaddress.ip_network
    assert not netns._shadows(net("10.0.0.0/8"), net("10.93.0.0/24"))
    assert netns._shadows(net("10.93.0.0/24"), net("10.93.0.0/24"))
    assert netns._shadows(net("10.93.0.128/25"), net("10.93.0.0/24"))
    assert not netns._shadows(net("10.94.0.0/24"), net("10.93.0.0/24"))
